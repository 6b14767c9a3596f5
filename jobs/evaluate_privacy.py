"""spark-submit entry point: evaluate the privacy of a synthetic table (see README)."""

import sys

from privacy_eval.cli import main

if __name__ == "__main__":
    sys.exit(main())
