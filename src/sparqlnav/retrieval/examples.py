"""Question–query examples: SHACL `sh:SPARQLExecutable` descriptions (files or an endpoint's own metadata),
QALD JSON, text2sparql YAML and SPINACH JSON, all as one `Example` record."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyoxigraph as ox

from sparqlnav.datasets import DatasetFormatError, load_dataset
from sparqlnav.errors import SparqlnavError
from sparqlnav.folders import Outside, files_under
from sparqlnav.graph.endpoint import Endpoint
from sparqlnav.sparql.parser import SparqlSyntaxError, parse_query
from sparqlnav.sparql.prefixes import declare_prefixes

SH = "http://www.w3.org/ns/shacl#"
RDFS_COMMENT = "http://www.w3.org/2000/01/rdf-schema#comment"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
# schema.org is written with both schemes in the wild (SIB uses https, older files http).
SCHEMA_NS = ("https://schema.org/", "http://schema.org/")
SPEX = "https://purl.expasy.org/sparql-examples/ontology#"
QUERY_PREDICATES = {SH + "select": "SELECT", SH + "ask": "ASK", SH + "construct": "CONSTRUCT", SH + "describe": "DESCRIBE",
                    SPEX + "describe": "DESCRIBE"}  # SHACL has no describe; SIB's own vocabulary fills the gap
RDF_SUFFIXES = {".ttl": ox.RdfFormat.TURTLE, ".trig": ox.RdfFormat.TRIG, ".nt": ox.RdfFormat.N_TRIPLES,
                ".nq": ox.RdfFormat.N_QUADS, ".rdf": ox.RdfFormat.RDF_XML, ".owl": ox.RdfFormat.RDF_XML,
                ".n3": ox.RdfFormat.N3}
DATASET_SUFFIXES = {".json", ".jsonl", ".yml", ".yaml"}
_SERVICE = re.compile(r"(?i)\bSERVICE\s+(?:SILENT\s+)?<([^>\s]+)>")
_TAG = re.compile(r"<[^>]+>")


class ExamplesError(SparqlnavError):
    """Examples that cannot be read; the message names the file or endpoint."""


@dataclass(frozen=True)
class Example:
    """A question in plain language and the SPARQL query that answers it, with the endpoint it targets."""

    id: str
    question: str
    query: str
    endpoint: str | None = None
    form: str = "SELECT"
    keywords: tuple[str, ...] = ()
    source: str = ""
    language: str = "en"

    @property
    def services(self) -> list[str]:
        """Endpoints named in SERVICE clauses (federation), in order of appearance."""
        return list(dict.fromkeys(m.group(1) for m in _SERVICE.finditer(self.query)))


@dataclass
class _Node:
    """Everything one subject says, gathered from quads."""

    types: set[str] = field(default_factory=set)
    values: dict[str, list[ox.Literal | ox.NamedNode]] = field(default_factory=lambda: defaultdict(list))


def normalize_endpoint(url: str | None) -> str | None:
    """An endpoint URL for comparisons: no trailing slash, lower-case scheme and host."""
    if not url:
        return None
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url.rstrip("/")
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}://{host.lower()}{slash}{path}".rstrip("/")


def clean_text(text: str) -> str:
    """A comment as plain text: HTML tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(_TAG.sub("", text)).split())


def _pick_literal(values: Sequence[ox.Literal | ox.NamedNode], language: str) -> str | None:
    literals = [v for v in values if isinstance(v, ox.Literal)]
    for wanted in (language, None):
        for lit in literals:
            if (lit.language or None) == wanted or (wanted and (lit.language or "").startswith(wanted + "-")):
                return lit.value
    return literals[0].value if literals else None


def _target(node: _Node) -> str | None:
    for ns in SCHEMA_NS:
        for value in node.values.get(ns + "target", ()):
            return value.value
    return None


def _nodes_from_quads(quads: Iterable[ox.Quad], nodes: dict[str, _Node], prefixes: dict[str, str]) -> None:
    declared: dict[str, dict[str, str]] = defaultdict(dict)
    for q in quads:
        s, p, o = q.subject, q.predicate.value, q.object
        key = str(s)
        if p == SH + "prefix" and isinstance(o, ox.Literal):
            declared[key]["prefix"] = o.value
        elif p == SH + "namespace" and isinstance(o, ox.Literal | ox.NamedNode):
            declared[key]["namespace"] = o.value
        if p == RDF_TYPE and isinstance(o, ox.NamedNode):
            nodes.setdefault(key, _Node()).types.add(o.value)
        elif isinstance(o, ox.Literal | ox.NamedNode) and isinstance(s, ox.NamedNode | ox.BlankNode):
            nodes.setdefault(key, _Node()).values[p].append(o)
    for decl in declared.values():
        if "prefix" in decl and "namespace" in decl:
            prefixes.setdefault(decl["prefix"], decl["namespace"])


def _examples_from_nodes(nodes: dict[str, _Node], prefixes: dict[str, str], source: str,
                         language: str, sources: dict[str, str] | None = None) -> list[Example]:
    out: list[Example] = []
    for key, node in nodes.items():
        if not any(t.startswith(SH + "SPARQL") and t.endswith("Executable") for t in node.types):
            continue
        form, query = next(
            ((form, node.values[p][0].value) for p, form in QUERY_PREDICATES.items() if node.values.get(p)),
            (None, None),
        )
        if form is None or query is None:
            continue
        question = _pick_literal(node.values.get(RDFS_COMMENT, ()), language) or _pick_literal(
            node.values.get(RDFS_LABEL, ()), language
        )
        if not question:
            continue
        keywords = tuple(
            sorted({v.value for ns in SCHEMA_NS for v in node.values.get(ns + "keywords", ()) if isinstance(v, ox.Literal)})
        )
        out.append(
            Example(
                id=key[1:-1] if key.startswith("<") else key,
                question=clean_text(question),
                query=declare_prefixes(query.strip(), prefixes).query,
                endpoint=_target(node),
                form=form,
                keywords=keywords,
                source=(sources or {}).get(key, source),
                language=language,
            )
        )
    return out


def examples_from_rdf(paths: Iterable[Path], *, language: str = "en") -> list[Example]:
    """Examples described as `sh:SPARQLExecutable` in RDF files (SIB sparql-examples, VoID example files).

    Prefixes declared with `sh:declare` in any of the files complete queries that use them undeclared."""
    nodes: dict[str, _Node] = {}
    prefixes: dict[str, str] = {}
    sources: dict[str, str] = {}
    for path in paths:
        fmt = RDF_SUFFIXES.get(path.suffix.lower())
        if fmt is None:
            raise ExamplesError(f"{path}: not an RDF file ({', '.join(sorted(RDF_SUFFIXES))})")
        before = set(nodes)
        try:
            _nodes_from_quads(ox.parse(path=str(path), format=fmt, base_iri=path.resolve().as_uri()), nodes, prefixes)
        except (SyntaxError, OSError) as exc:
            raise ExamplesError(f"cannot read examples from {path}: {' '.join(str(exc).split())}") from None
        for key in set(nodes) - before:
            sources[key] = str(path)
    return _examples_from_nodes(nodes, prefixes, "", language, sources)


ENDPOINT_QUERY = """PREFIX sh: <http://www.w3.org/ns/shacl#>
SELECT ?ex ?p ?o WHERE {
  { ?ex a ?type . ?ex ?p ?o . }
  UNION
  { GRAPH ?g { ?ex a ?type . ?ex ?p ?o . } }
  VALUES ?type { sh:SPARQLExecutable sh:SPARQLSelectExecutable sh:SPARQLAskExecutable sh:SPARQLConstructExecutable sh:SPARQLDescribeExecutable }
}"""

PREFIXES_QUERY = """PREFIX sh: <http://www.w3.org/ns/shacl#>
SELECT DISTINCT ?prefix ?namespace WHERE {
  { ?d sh:prefix ?prefix ; sh:namespace ?namespace . }
  UNION
  { GRAPH ?g { ?d sh:prefix ?prefix ; sh:namespace ?namespace . } }
}"""


def examples_from_endpoint(endpoint: Endpoint, *, language: str = "en", timeout_s: float | None = None) -> list[Example]:
    """Examples an endpoint publishes about itself (SIB style: `sh:SPARQLExecutable` in its own data)."""
    result = endpoint.query(ENDPOINT_QUERY, timeout_s=timeout_s)
    if not result.ok or result.table is None:
        raise ExamplesError(f"cannot read examples from {endpoint.name}: {result.describe()}")
    nodes: dict[str, _Node] = {}
    for row in result.table.rows:
        ex, p, o = row.get("ex"), row.get("p"), row.get("o")
        if ex is None or p is None or o is None:
            continue
        key = f"<{ex.value}>" if ex.kind == "uri" else f"_:{ex.value}"
        node = nodes.setdefault(key, _Node())
        if p.value == RDF_TYPE and o.kind == "uri":
            node.types.add(o.value)
        elif o.kind == "uri":
            node.values[p.value].append(ox.NamedNode(o.value))
        elif o.kind == "literal":
            node.values[p.value].append(
                ox.Literal(o.value, language=o.lang) if o.lang
                else ox.Literal(o.value, datatype=ox.NamedNode(o.datatype)) if o.datatype
                else ox.Literal(o.value)
            )
    prefixes: dict[str, str] = {}
    if nodes:
        found = endpoint.query(PREFIXES_QUERY, timeout_s=timeout_s)
        if found.ok and found.table is not None:
            for row in found.table.rows:
                if "prefix" in row and "namespace" in row:
                    prefixes.setdefault(row["prefix"].value, row["namespace"].value)
    examples = _examples_from_nodes(nodes, prefixes, endpoint.url, language)
    # An endpoint's own examples target that endpoint unless they say otherwise.
    return [e if e.endpoint else _with_endpoint(e, endpoint.url) for e in examples]


def _with_endpoint(example: Example, endpoint: str) -> Example:
    from dataclasses import replace

    return replace(example, endpoint=endpoint)


def examples_from_dataset(path: Path, *, endpoint: str | None = None, language: str = "en") -> list[Example]:
    """Examples from a benchmark file (QALD JSON, text2sparql YAML, SPINACH JSON, plain lists); questions without a query are skipped."""
    try:
        dataset = load_dataset(path, language=language)
    except DatasetFormatError as exc:
        raise ExamplesError(str(exc)) from None
    return [
        Example(
            id=q.id,
            question=q.question,
            query=q.sparql.strip(),
            endpoint=endpoint,
            form=_form_of(q.sparql),
            keywords=tuple(q.tags),
            source=str(path),
            language=q.language,
        )
        for q in dataset.questions
        if q.sparql
    ]


def _form_of(query: str) -> str:
    try:
        return parse_query(query, collect_undefined_prefixes=True).form.upper()
    except SparqlSyntaxError:
        return "SELECT"


def _files(path: Path, outside: list[Outside] | None) -> Iterator[Path]:
    if path.is_dir():
        # A folder means RDF example files (benchmark files are named explicitly).
        yield from files_under(path, lambda p: p.suffix.lower() in RDF_SUFFIXES, outside)
    else:
        yield path


def load_examples(
    paths: Iterable[Path | str], *, endpoint: str | None = None, language: str = "en",
    outside: list[Outside] | None = None,
) -> list[Example]:
    """Examples from files and folders: RDF (`sh:SPARQLExecutable`) or benchmark files; ids are unique.

    `endpoint` is the target of examples that do not name one (benchmark files never do). A folder's symlinks
    leading out of it are skipped and appended to `outside`; a file named outright is read wherever it is."""
    rdf: list[Path] = []
    out: list[Example] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise ExamplesError(f"no such file or folder: {path}")
        for f in _files(path, outside):
            suffix = f.suffix.lower()
            if suffix in RDF_SUFFIXES:
                rdf.append(f)
            elif suffix in DATASET_SUFFIXES:
                out.extend(examples_from_dataset(f, endpoint=endpoint, language=language))
            else:
                raise ExamplesError(
                    f"{f}: unknown examples format (RDF {', '.join(sorted(RDF_SUFFIXES))} or "
                    f"benchmark {', '.join(sorted(DATASET_SUFFIXES))})"
                )
    if rdf:
        found = examples_from_rdf(rdf, language=language)
        out.extend(e if e.endpoint or not endpoint else _with_endpoint(e, endpoint) for e in found)
    unique: dict[str, Example] = {}
    for example in out:
        unique.setdefault(example.id, example)
    return list(unique.values())
