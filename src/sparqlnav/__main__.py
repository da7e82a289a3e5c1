"""`python -m sparqlnav` runs the command line."""

import sys

from sparqlnav.cli import main

sys.exit(main())
