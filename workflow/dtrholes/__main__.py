"""`python -m dtrholes`: the `dtr-holes` command line with the running interpreter."""

import sys

# Guarded: worker processes started by the runner import this module under another name, and
# need none of the command line.
if __name__ == "__main__":
    from dtrholes.cli import main

    sys.exit(main())
