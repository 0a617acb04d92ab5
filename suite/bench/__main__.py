from suite.bench.cli import main

raise SystemExit(main())
