"""`python -m rnnbench ...`, as the `rnnbench` script."""

import sys

from rnnbench.cli.main import main

sys.exit(main())
