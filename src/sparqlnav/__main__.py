"""`python -m sparqlnav` runs the command line."""

from sparqlnav.cli import main

main()
