"""Knowledge graphs: endpoints with real time limits, the local Oxigraph store, typed results, schemas, names, Wikidata."""
