from loaderbench.bench.run_all import main

raise SystemExit(main())
