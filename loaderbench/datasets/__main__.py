"""``python -m loaderbench.datasets``: runs :func:`loaderbench.datasets.by_hand.main`."""

import sys

from loaderbench.datasets.by_hand import main

if __name__ == "__main__":
    sys.exit(main())
