"""`python -m sparqlnav` runs the command line."""

import sys

from sparqlnav.faces.cli import main

sys.exit(main())
