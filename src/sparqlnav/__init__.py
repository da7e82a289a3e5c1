"""sparqlnav: answer natural-language questions over knowledge graphs by writing, checking and running SPARQL."""

__version__ = "0.1.0"
