"""Open a knowledge graph from a `--kg` value: the bundled demo, Wikidata, a local RDF file or folder, a relational
database (SQLite or PostgreSQL, through the W3C Direct Mapping), or a SPARQL endpoint URL."""

from __future__ import annotations

import difflib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from sparqlnav.folders import make_private
from sparqlnav.graph.endpoint import HttpOptions, Outcome, QueryResult, RemoteEndpoint
from sparqlnav.graph.kg import PREPARE_SPARQL, KGError, KnowledgeGraph
from sparqlnav.graph.names import Kind, LabelIndex, NameHit, Names
from sparqlnav.graph.profile import load_or_probe
from sparqlnav.graph.progress import Built, ProgressStep, Reporter, folder_size
from sparqlnav.graph.relational import (
    RELATIONAL,
    Database,
    database_spec,
    materialise,
    rows_in,
    schema_of,
)
from sparqlnav.graph.search import EndpointNames
from sparqlnav.graph.store import LocalGraph, StoreInfo, ensure_store, rdf_files
from sparqlnav.graph.vocab import WIKIBASE, Vocabulary, Wikibase
from sparqlnav.graph.wikidata import open_wikidata
from sparqlnav.settings import Settings
from sparqlnav.sparql.prefixes import PrefixMap, prefixes_in_text
from sparqlnav.urls import shown_url

REMOTE_LABEL_CAP = 2_000_000  # names fetched from a remote endpoint to build its search index


def demo_path() -> Path:
    """The bundled demo KG file."""
    return Path(str(resources.files("sparqlnav") / "data" / "demo" / "demo.ttl"))


def open_kg(spec: str, settings: Settings, *, reporter: Reporter | None = None) -> KnowledgeGraph:
    """Resolve a `--kg` value into an open knowledge graph."""
    spec = spec.strip()
    make_private(settings.paths.home)  # what is built there from the graph is its owner's alone (issue 39)
    if spec in ("", "demo"):
        return open_local(demo_path(), settings, name="demo", reporter=reporter)
    if spec == "wikidata":
        return open_wikidata(settings)
    database = database_spec(spec)
    if database is not None:
        return open_database(database, settings, reporter=reporter)
    if spec.startswith(("http://", "https://")):
        return open_remote(spec, settings, reporter=reporter)
    path = Path(spec).expanduser()
    if path.exists():
        return open_local(path, settings, name=path.name, reporter=reporter)
    if _looks_like_path(spec):
        raise KGError(f"no such file or folder: {spec}{near_name(path)}")
    raise KGError(
        f"unknown KG {spec!r}: give a file or folder of RDF, an http(s):// SPARQL endpoint, a sqlite:/// or "
        "postgresql:// database, 'demo' or 'wikidata'"
    )


def _looks_like_path(spec: str) -> bool:
    """Whether a `--kg` value was meant as a file or folder (a separator or a file extension)."""
    return "/" in spec or "\\" in spec or spec.startswith("~") or bool(Path(spec).suffix)


def near_name(path: Path) -> str:
    """" (did you mean …?)" naming the closest existing entry of the path's folder, or ""."""
    folder = path.parent
    try:
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.75)
    return f" (did you mean {folder / close[0]}?)" if close else ""


def detect_wikibase(triples: Iterable[tuple[str, str]]) -> Wikibase | None:
    """Find Wikibase namespaces from `wikibase:directClaim` declarations (subject, object) if any."""
    for prop, direct in triples:
        pid = prop.rsplit("/", 1)[-1]
        suffix = f"prop/direct/{pid}"
        if direct.endswith(suffix) and prop.endswith(f"entity/{pid}"):
            return Wikibase.from_base(direct[: -len(suffix)])
    return None


def _file_prefixes(files: list[Path]) -> dict[str, str]:
    found: dict[str, str] = {}
    for f in files:
        if (
            f.suffix.lower() in (".ttl", ".trig", ".n3", ".turtle")
            and f.stat().st_size < 200_000_000
        ):
            with f.open(encoding="utf-8", errors="replace") as fh:
                head = fh.read(200_000)
            found.update({k: v for k, v in prefixes_in_text(head).items() if k})
    return found


def open_local(
    path: Path, settings: Settings, *, name: str, reporter: Reporter | None = None
) -> KnowledgeGraph:
    """Load RDF files (once; later runs reuse the store) and serve them through a managed Oxigraph process."""
    try:
        files = rdf_files(path)
        started = time.monotonic()
        info = ensure_store(files, settings.paths.stores_dir, reporter)
    except OSError as exc:
        raise KGError(f"cannot open {path}: {exc}") from None
    what = f"store of {files[0].name}" if len(files) == 1 else f"store of {len(files)} files under {path}"
    return _serve_store(
        info, settings, name=name, what=what, started=started, reporter=reporter, prefixes=_file_prefixes(files),
        description=f"{info.triples} triples from {len(files)} file(s) under {path}",
    )


def open_database(database: Database, settings: Settings, *, reporter: Reporter | None = None) -> KnowledgeGraph:
    """A SQLite or PostgreSQL database as a graph, read where it lives: SQL strategies use the database itself
    (`relational_of`: its spec and tables, from its catalogue); its Direct Mapping is copied into a store (read
    without writing, once per content) only when something asks it a SPARQL query, and refused in one line above
    `SPARQLNAV_DB_COPY_MAX_ROWS` rows (issue 35)."""
    if database.kind == "sqlite" and not database.path.is_file():
        raise KGError(f"no such SQLite database: {database.path}{near_name(database.path)}")
    schema = schema_of(database)
    name = database.path.name if database.kind == "sqlite" else database.shown
    copy = _DatabaseCopy(database, settings, reporter, name)
    kg = KnowledgeGraph(
        name=name,
        endpoint=_CopyEndpoint(copy),
        vocab=Vocabulary(),
        prefixes=PrefixMap.default(schema.prefixes),
        names=_CopyNames(copy),
        description=schema.description,
    )
    kg.extra[RELATIONAL] = schema  # the database and its tables: what SQL strategies run on
    copy.owner = kg
    kg.extra[PREPARE_SPARQL] = copy
    _warn_of_rights(database)
    return kg


def copy_database(database: Database, settings: Settings, *, reporter: Reporter | None = None) -> KnowledgeGraph:
    """The database's Direct Mapping built into a store (once per content) and served like a store of RDF files."""
    started = time.monotonic()
    built = materialise(database, settings.paths.stores_dir, reporter)
    assert built.info is not None
    name = database.path.name if database.kind == "sqlite" else database.shown
    kg = _serve_store(
        built.info, settings, name=name, what=f"store of {name}", started=started, reporter=reporter,
        prefixes=built.prefixes, description=built.description,
    )
    kg.extra[RELATIONAL] = built
    return kg


class _DatabaseCopy:
    """A database's graph copy, made on first SPARQL use (once, whichever thread asks first)."""

    def __init__(self, database: Database, settings: Settings, reporter: Reporter | None, name: str) -> None:
        self.database, self.settings, self.reporter, self.name = database, settings, reporter, name
        self._graph: KnowledgeGraph | None = None
        self._rows: int | None = None
        self._lock = threading.Lock()
        self.owner: KnowledgeGraph | None = None  # the graph that stands for the database: it becomes the copy

    def __call__(self) -> KnowledgeGraph:
        """Make the copy (`SparqlPreparation`)."""
        return self.graph()

    @property
    def made(self) -> bool:
        """Whether the copy was made."""
        return self._graph is not None

    def rows(self) -> int:
        """Rows the copy holds or would hold (counted once: the catalogue's counts)."""
        if self._rows is None:
            self._rows = rows_in(self.database)
        return self._rows

    def graph(self) -> KnowledgeGraph:
        """The copy, built now if it is not yet (KGError above the size limit)."""
        with self._lock:
            if self._graph is None:
                limit = self.settings.databases.copy_max_rows
                rows = self.rows()
                if rows > limit:
                    raise KGError(
                        f"{self.name} has {rows:,} rows, more than SPARQLNAV_DB_COPY_MAX_ROWS ({limit:,}) for a copy "
                        "into a graph: ask in SQL (--strategy auto or sql with an LLM, or -s build -o target=sql)")
                self._graph = built = copy_database(self.database, self.settings, reporter=self.reporter)
                if self.owner is not None:  # from now on the graph is the copy, as before issue 35
                    self.owner.endpoint, self.owner.names = built.endpoint, built.names
                    self.owner.vocab, self.owner.prefixes = built.vocab, built.prefixes
                    self.owner.description = built.description
                    self.owner.extra.update({k: v for k, v in built.extra.items()})
            return self._graph

    @property
    def built(self) -> KnowledgeGraph | None:
        """The copy when it was made."""
        return self._graph

    def close(self) -> None:
        """Close the copy, if one was made."""
        if self._graph is not None:
            self._graph.close()


class _CopyEndpoint:
    """The endpoint of a database graph: its copy's, made when the first SPARQL query comes."""

    def __init__(self, copy: _DatabaseCopy) -> None:
        self.copy = copy

    @property
    def name(self) -> str:
        """The database's name."""
        return self.copy.name

    @property
    def url(self) -> str:
        """The copy's engine URL once it runs; the database's (shown) URL before."""
        built = self.copy.built
        return built.endpoint.url if built is not None else self.copy.database.shown

    def query(self, sparql: str, *, timeout_s: float | None = None) -> QueryResult:
        """Run a SPARQL query on the copy (made now if needed)."""
        return self.copy.graph().endpoint.query(sparql, timeout_s=timeout_s)

    def close(self) -> None:
        """Close the copy."""
        self.copy.close()

    def __getattr__(self, attribute: str) -> Any:
        # what a local store's endpoint offers besides the protocol (its server, its store): the copy's
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return getattr(self.copy.graph().endpoint, attribute)


class _CopyNames:
    """The names of a database graph: its copy's; asking for none makes no copy (a SQL answer has no IRIs)."""

    def __init__(self, copy: _DatabaseCopy) -> None:
        self.copy = copy

    def search(self, text: str, *, limit: int = 8, kinds: Iterable[Kind] | None = None) -> list[NameHit]:
        """Search the copy's names."""
        return self.copy.graph().names.search(text, limit=limit, kinds=kinds)

    def labels_of(self, iris: Iterable[str]) -> dict[str, str]:
        """Labels from the copy, when any IRI is asked about."""
        wanted = list(iris)
        return self.copy.graph().names.labels_of(wanted) if wanted else {}

    def close(self) -> None:
        """The copy's names are closed with the copy."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return getattr(self.copy.graph().names, attribute)


def _warn_of_rights(database: Database) -> None:
    """Say (as a logged warning, on stderr where nothing else logs) when a PostgreSQL role has more rights than
    reading needs: the statement check would then be the only barrier."""
    from sparqlnav.sql.executor import SqlError, role_warning

    try:
        said = role_warning(database)
    except SqlError:
        return  # the connection itself failing is reported where SQL runs
    if said:
        logging.getLogger("sparqlnav.sql").warning("warning: %s", said)


def _serve_store(
    info: StoreInfo, settings: Settings, *, name: str, what: str, started: float, reporter: Reporter | None,
    prefixes: dict[str, str], description: str,
) -> KnowledgeGraph:
    """A built store as a graph: its name index (built once), a managed Oxigraph process, its prefixes."""
    store = ox.Store.read_only(str(info.data_dir))
    decl = ox.NamedNode(WIKIBASE + "directClaim")
    wb = detect_wikibase(
        (str(q.subject.value), str(q.object.value))
        for q in store.quads_for_pattern(None, decl, None)
        if isinstance(q.subject, ox.NamedNode) and isinstance(q.object, ox.NamedNode)
    )
    vocab = Vocabulary.for_wikibase(wb) if wb else Vocabulary()
    index_path = info.path / "labels.sqlite"
    built = info.built_s is not None
    if not LabelIndex.exists(index_path):
        built = True
        task = "building the name index"
        counted = None if reporter is None else (lambda done: reporter.step(ProgressStep(task, done, info.triples, "triples")))
        if reporter:
            reporter.step(ProgressStep(task, 0, info.triples, "triples"))
        LabelIndex.build_from_store(store, index_path, vocab, progress=counted)
    del store
    if built and reporter:
        reporter.built(Built(what, info.path, folder_size(info.path), info.triples, time.monotonic() - started))
    mapping = {**prefixes, **(wb.prefixes() if wb else {})}
    endpoint = LocalGraph(
        info,
        name=name,
        limits=settings.limits,
        allowed_services=settings.remote.allowed_services,  # nothing outside unless the user allows it
        http=HttpOptions(user_agent=settings.remote.user_agent, headers=settings.remote.headers, retries=0),
    )
    return KnowledgeGraph(
        name=name,
        endpoint=endpoint,
        vocab=vocab,
        prefixes=PrefixMap.default(mapping),
        names=LabelIndex(index_path),
        description=description,
        extra={"triples": info.triples},
    )


_NameRow = tuple[str, str, str, bool, str | None]  # subject, predicate, object, object is an IRI, language


class _NamePages:
    """Names and predicate usage of a remote graph, fetched page by page; notes whether it got them all."""

    def __init__(self, endpoint: RemoteEndpoint, vocab: Vocabulary) -> None:
        self.endpoint = endpoint
        self.vocab = vocab
        self.complete = True
        self.problem = ""

    def __iter__(self) -> Iterator[_NameRow]:
        preds = " ".join(f"<{p}>" for p in self.vocab.text_predicates)
        # A page no larger than the row cap, or every page would come back cut and end the loop.
        page, offset = min(50_000, self.endpoint.limits.max_rows), 0
        while True:
            if offset >= REMOTE_LABEL_CAP:
                self.complete, self.problem = False, f"stopped at {REMOTE_LABEL_CAP} names"
                return
            res = self.endpoint.query(
                f"SELECT ?s ?p ?o WHERE {{ VALUES ?p {{ {preds} }} ?s ?p ?o FILTER(isIRI(?s)) }} "
                f"LIMIT {page} OFFSET {offset}"  # no ORDER BY: too costly on large endpoints
            )
            if not res.ok or res.table is None:
                self.complete, self.problem = False, res.describe()
                return
            for row in res.table.rows:
                if not ("s" in row and "p" in row and "o" in row):
                    continue  # a broken endpoint's row without a value the query always binds
                o = row["o"]
                yield row["s"].value, row["p"].value, o.value, o.kind == "uri", o.lang
            if len(res.table.rows) < page and not res.table.truncated:
                return
            offset += page


def _remote_predicates(endpoint: RemoteEndpoint) -> dict[str, int]:
    """Predicates of a remote graph with their triple counts (empty when the endpoint cannot say)."""
    res = endpoint.query("SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p")
    if not res.ok or res.table is None:
        return {}
    return {
        r["p"].value: int(r["n"].value) if "n" in r and r["n"].value.isdigit() else 1
        for r in res.table.rows
        if "p" in r
    }


def remote_dir(url: str, settings: Settings) -> Path:
    """Where what sparqlnav keeps about an endpoint lives (its profile, and its name index when it has one)."""
    return settings.paths.home / "remote" / hashlib.sha256(url.encode()).hexdigest()[:20]


def _remote_endpoint(url: str, settings: Settings) -> tuple[RemoteEndpoint, Wikibase | None]:
    endpoint = RemoteEndpoint(
        url,
        limits=settings.limits,
        http=settings.remote.http(),
        allowed_services=settings.remote.allowed_services,  # nothing outside unless the user allows it
    )
    probe = endpoint.query(f"SELECT ?p ?d WHERE {{ ?p <{WIKIBASE}directClaim> ?d }} LIMIT 5")
    if probe.outcome in (Outcome.UNREACHABLE,):
        endpoint.close()
        raise KGError(probe.message)
    wb = detect_wikibase(
        (r["p"].value, r["d"].value) for r in (probe.table.rows if probe.table else []) if "p" in r and "d" in r
    )
    return endpoint, wb


def download_names(
    endpoint: RemoteEndpoint, vocab: Vocabulary, index_path: Path, *, reporter: Reporter | None = None
) -> tuple[Path, str]:
    """Page an endpoint's names into a local index: (the index file, "" or why it is incomplete). An index
    built from an incomplete read is kept beside the real one and used for this run only."""
    task, started = f"indexing names of {endpoint.url}", time.monotonic()
    if reporter:
        reporter.step(ProgressStep(task, 0, None, "names"))
    partial = index_path.with_name("labels.partial.sqlite")
    pages = _NamePages(endpoint, vocab)
    rows = pages if reporter is None else _counted(pages, lambda n: reporter.step(ProgressStep(task, n, None, "names")))
    LabelIndex.build_from_triples(rows, partial, vocab, _remote_predicates(endpoint))
    target = index_path if pages.complete else partial
    if pages.complete:
        partial.replace(index_path)
    if reporter:
        reporter.built(Built(f"names of {endpoint.url}", target, folder_size(target), None, time.monotonic() - started))
    return target, pages.problem


def _counted(rows: Iterable[_NameRow], report: Callable[[int], None], every: int = 5_000) -> Iterator[_NameRow]:
    """The rows, reporting how many have passed every `every` rows."""
    n = 0
    for n, row in enumerate(rows, start=1):
        if n % every == 0:
            report(n)
        yield row
    report(n)


def index_remote_names(url: str, settings: Settings, *, reporter: Reporter | None = None) -> tuple[Path, str]:
    """Build (or rebuild) the local name index of an endpoint whatever its size (`sparqlnav index --names`)."""
    endpoint, wb = _remote_endpoint(url, settings)
    try:
        vocab = Vocabulary.for_wikibase(wb) if wb else Vocabulary()
        return download_names(endpoint, vocab, remote_dir(url, settings) / "labels.sqlite", reporter=reporter)
    finally:
        endpoint.close()


def open_remote(
    url: str, settings: Settings, *, reporter: Reporter | None = None
) -> KnowledgeGraph:
    """A SPARQL endpoint over HTTP. Names come from a local index when one was built (`index --names`) or the
    endpoint is small (SPARQLNAV_NAME_INDEX_MAX_TRIPLES); otherwise from the endpoint's own text search, nothing
    downloaded. What was learnt about the endpoint is kept under the sparqlnav home."""
    endpoint, wb = _remote_endpoint(url, settings)
    vocab = Vocabulary.for_wikibase(wb) if wb else Vocabulary()
    folder = remote_dir(url, settings)
    index_path = folder / "labels.sqlite"
    prefixes = PrefixMap.default(wb.prefixes() if wb else {})
    names: Names
    note = ""
    if LabelIndex.exists(index_path):
        names = LabelIndex(index_path)
    else:
        profile = load_or_probe(folder / "endpoint.json", endpoint, vocab)
        if profile.is_small(settings.remote.name_index_max_triples):
            target, problem = download_names(endpoint, vocab, index_path, reporter=reporter)
            names, note = LabelIndex(target), f"names index incomplete: {problem}" if problem else ""
        else:
            names = EndpointNames(endpoint, vocab, profile.search, schema_terms=profile.schema_terms)
            size = f"{profile.triples} triples ({profile.size_from})" if profile.triples is not None else "size unknown"
            note = f"{size}; names searched on the endpoint ({profile.search.value})"
            if profile.search.degraded:
                note = f"{size}; {names.note}"
    return KnowledgeGraph(
        name=shown_url(url),
        endpoint=endpoint,
        vocab=vocab,
        prefixes=prefixes,
        names=names,
        description=f"SPARQL endpoint {shown_url(url)}" + (f" ({note})" if note else ""),
        extra={"search_note": names.note} if isinstance(names, EndpointNames) and names.note else {},
    )
