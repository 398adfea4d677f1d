"""`python -m bench`: every bench in its own process, one table (see bench/all.py)."""

import sys

from bench.all import main

sys.exit(main())
