"""SPARQL text: tokens and the guard, a parse-only parser, checks against a schema, prefix maps."""
