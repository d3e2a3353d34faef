"""`python -m memprof`: the same as the `memprof` command."""
import sys

from ._launcher import main

sys.exit(main())
