"""Retrieval over a KG's metadata: example queries, class shapes, embedders and the index."""
