"""python -m rnnbench.report.site SITE.toml OUT [--asv-html DIR] [--local DIR]: the site (site.build)."""

import sys

from rnnbench.report.site.build import main

sys.exit(main())
