"""The tools every strategy and face shares: lookup functions and the traced toolkit."""
