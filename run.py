"""Benchmark operator backends: ``python run.py --op exp --mode bwd --metrics accuracy,latency``."""

import sys

from harness.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
