"""The version of sparqlnav, in a module of its own so that any module can read it without importing the API."""

__version__ = "0.1.0"
