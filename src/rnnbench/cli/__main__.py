"""`python -m rnnbench.cli ...`, as the `rnnbench` script."""

import sys

from rnnbench.cli.main import main

sys.exit(main())
