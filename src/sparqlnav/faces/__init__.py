"""The faces of sparqlnav: the command line, the HTTP API with its web UI, and MCP."""
