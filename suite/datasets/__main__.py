"""``python -m suite.datasets``: runs :func:`suite.datasets.cli.main`."""

import sys

from suite.datasets.cli import main

if __name__ == "__main__":
    sys.exit(main())
