"""The `sparqlnav` command line: each verb is a thin layer over the library.

`app` lists the verbs; they live by what they serve: `lookup` (sparql, search, entity, validate), `asking` (ask,
chat), `evaluation` (score, eval, report), `serving` (serve, mcp) and `data` (index, cache), over the options and
helpers every verb shares (`common`).
"""

from sparqlnav.faces.cli.app import app, main

__all__ = ["app", "main"]
