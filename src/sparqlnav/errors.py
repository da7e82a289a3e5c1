"""The root of sparqlnav's exceptions: every error it raises on purpose derives from SparqlnavError.

The exceptions themselves stay beside the code that raises them (KGError in graph/kg.py, LLMError in
llm/errors.py, ...), so that this module imports nothing and any module can import it.
"""


class SparqlnavError(Exception):
    """Any error sparqlnav raises on purpose; catch it to handle them all."""


__all__ = ["SparqlnavError"]
