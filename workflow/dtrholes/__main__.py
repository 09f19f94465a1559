"""`python -m dtrholes`: the `dtr-holes` command line with the running interpreter."""

import sys

from dtrholes.cli import main

sys.exit(main())
