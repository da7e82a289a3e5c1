"""Verbs for data and indexes: `index` (the retrieval index, a name index, documents) and `cache` (the stores of
local RDF files)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from sparqlnav.faces.output import (
    TABLE_JSON,
    TABLE_JSON_CSV,
    FormatOpt,
    JsonOpt,
    OutputFormat,
    cell,
    chosen_format,
    write_json,
    write_records,
)
from sparqlnav.faces.progress import human_size, reporting
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.progress import ProgressStep
from sparqlnav.settings import Settings

if TYPE_CHECKING:
    from sparqlnav.retrieval.examples import Example
from sparqlnav.faces.cli.common import CliError, KgOpt, TimeoutOpt, err, opened, out, settings_for


def _index_sql_examples(kg: str, paths: list[Path], settings: Settings, json_output: bool) -> bool:
    """`index --examples` on a database: keep the files' question/SQL pairs for the SQL writer (nothing is copied
    into a graph); False when `kg` is no database or the files hold no SQL (then they are SPARQL examples)."""
    from sparqlnav.graph.kg import KGError
    from sparqlnav.graph.relational import database_spec
    from sparqlnav.retrieval.examples import DATASET_SUFFIXES, ExamplesError
    from sparqlnav.retrieval.sql_examples import keep_sql_examples, load_sql_examples

    try:
        database = database_spec(kg)
    except KGError as exc:
        raise CliError(str(exc)) from None
    if database is None or not all(p.is_file() and p.suffix.lower() in DATASET_SUFFIXES for p in paths):
        return False
    try:
        found = load_sql_examples(paths, database.kind)
    except ExamplesError as exc:
        raise CliError(str(exc)) from None
    if not found:
        return False
    path = keep_sql_examples(settings.paths.home, database, found)
    if json_output:
        print(json.dumps({"sql_examples": len(found), "database": database.shown, "kept": str(path)}))
    else:
        out().print(f"{len(found)} question/SQL examples for {database.shown}, kept in {path}; the SQL writer "
                    "shows the closest to each question", markup=False, highlight=False)
    return True


def _index_names(kg: str, settings: Settings, json_output: bool) -> None:
    """`index --names`: the explicit download of an endpoint's names (large endpoints are otherwise searched in place)."""
    import time

    from sparqlnav.graph.kg import KGError
    from sparqlnav.graph.opening import index_remote_names

    if not kg.startswith(("http://", "https://")):
        raise CliError("--names is for SPARQL endpoints (http(s):// URLs); local files are always indexed")
    start = time.monotonic()
    try:
        with reporting(err(), "never" if json_output else settings.progress) as reporter:
            path, problem = index_remote_names(kg, settings, reporter=reporter)
    except KGError as exc:
        raise CliError(str(exc)) from None
    summary = {"names_index": str(path), "complete": not problem, "problem": problem,
               "seconds": round(time.monotonic() - start, 3)}  # fmt: skip
    if json_output:
        print(json.dumps(summary, ensure_ascii=False))
        return
    note = f" (incomplete: {problem}; used for this run only)" if problem else ""
    out().print(f"names of {kg} indexed in {path}{note}", markup=False, highlight=False)


def _synthesized(graph: KnowledgeGraph, settings: Settings, n: int, kept_ids: list[str]) -> list[Example]:
    """`index --synthesize-examples N`: pairs the LLM writes over the schema that run and return rows."""
    from sparqlnav.llm import LLMError
    from sparqlnav.retrieval.kg_index import SchemaUnavailable, kg_schema
    from sparqlnav.retrieval.synthesize import synthesize_examples

    if settings.llm is None:
        raise CliError("--synthesize-examples needs an LLM: set OPENAI_BASE_URL, OPENAI_API_KEY and SPARQLNAV_LLM_MODEL")
    try:
        made = synthesize_examples(graph, kg_schema(graph), settings.llm, n)
    except (LLMError, SchemaUnavailable) as exc:
        raise CliError(f"no examples synthesized: {exc}") from None
    for question, why in made.dropped:
        err().print(f"dropped synthetic example {question!r}: {why}", markup=False, highlight=False)
    kept_ids += [e.id for e in made.kept]
    return made.kept


def index_command(
    kg: KgOpt = "demo",
    examples: Annotated[
        list[Path] | None,
        typer.Option("--examples", help="SHACL example files or folders, QALD JSON, text2sparql YAML or SPINACH JSON (repeatable); on a database, question files whose questions carry `sql` (kept for the SQL writer, nothing copied)."),
    ] = None,
    void: Annotated[
        list[Path] | None,
        typer.Option("--void", help="VoID description of this KG or of an endpoint its examples federate with (repeatable)."),
    ] = None,
    embedder: Annotated[
        str,
        typer.Option("--embedder", help="auto (offline MiniLM when installed, else lexical only), minilm, minilm:<dir>, none, st:<model>, fastembed:<model>, openai:<model>."),
    ] = "auto",
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", help="Endpoint of examples that name none (benchmark files never do).")
    ] = None,
    qdrant: Annotated[
        str | None, typer.Option("--qdrant", help="Keep the index in Qdrant: an http(s) URL or a local folder.")
    ] = None,
    no_endpoint_examples: Annotated[
        bool, typer.Option("--no-endpoint-examples", help="Do not read the examples the endpoint publishes itself.")
    ] = False,
    names: Annotated[
        bool,
        typer.Option("--names", help="Download a SPARQL endpoint's names into a local search index, whatever its size (only that)."),
    ] = False,
    docs: Annotated[
        list[Path] | None,
        typer.Option("--docs", help="Documents beside the KG: folders or files of text, Markdown, HTML or JSONL {id, title, text} (repeatable; replaces the documents indexed before)."),
    ] = None,
    synthesize_examples: Annotated[
        int,
        typer.Option("--synthesize-examples", help="Ask the LLM for N question–query pairs over the schema; index those that run and return rows (marked synthetic)."),
    ] = 0,
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Build or refresh the retrieval index of a KG (examples, class shapes, endpoint descriptions, documents)."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="index") is OutputFormat.json
    import hashlib

    if names:
        _index_names(kg, settings_for(timeout), json_output)
        return

    from sparqlnav.folders import Outside, describe_outside
    from sparqlnav.retrieval.documents import DocumentsError
    from sparqlnav.retrieval.embed import EmbedderUnavailable, make_embedder
    from sparqlnav.retrieval.examples import ExamplesError, load_examples
    from sparqlnav.retrieval.index import IndexUnavailable
    from sparqlnav.retrieval.indexes import index_documents
    from sparqlnav.retrieval.kg_index import (
        SchemaUnavailable,
        build_kg_index,
        kg_index_dir,
        open_kg_index,
    )
    from sparqlnav.retrieval.qdrant import QdrantIndex
    from sparqlnav.retrieval.records import DOCUMENT_KINDS

    settings = settings_for(timeout)
    if examples and not (void or docs or qdrant or synthesize_examples) and _index_sql_examples(
            kg, examples, settings, json_output):
        return
    outside: list[Outside] = []  # symlinks out of a folder given, skipped and said so in the summary
    try:
        chosen = make_embedder(embedder, embedding=settings.embedding)
        found = load_examples(examples or [], endpoint=endpoint, outside=outside)
    except (EmbedderUnavailable, ExamplesError) as exc:
        raise CliError(str(exc)) from None
    for path in void or []:
        if not path.is_file():
            raise CliError(f"no such VoID file: {path}")
    spec = ("minilm" if chosen is not None else "none") if embedder == "auto" else embedder
    with opened(kg, settings) as graph, reporting(err(), settings.progress) as reporter:

        def report(message: str, done: int, total: int) -> None:
            if reporter is not None:
                reporter.step(ProgressStep(message, done, total or None, "items"))

        synthesized: list[str] = []
        if synthesize_examples > 0:
            found = [*found, *_synthesized(graph, settings, synthesize_examples, synthesized)]
        backend = backend_spec = None
        if qdrant:
            collection = "sparqlnav-" + hashlib.sha256(f"{graph.name}|{graph.description}".encode()).hexdigest()[:16]
            try:
                backend = QdrantIndex.open(qdrant, collection, chosen)
            except IndexUnavailable as exc:
                raise CliError(str(exc)) from None
            backend_spec = {"kind": "qdrant", "location": qdrant, "collection": collection}
        try:
            # Documents alone refresh an index that exists: its examples and shapes are kept as they are.
            ctx = (open_kg_index(graph, settings.paths.home, embedder=chosen)
                   if docs and not (examples or void or qdrant) else None)
            if ctx is None:
                ctx, stats = build_kg_index(
                    graph, settings.paths.home, examples=found, void_files=void or [], embedder=chosen,
                    embedder_spec=spec, endpoint_examples=not no_endpoint_examples,
                    backend=backend, backend_spec=backend_spec, progress=report,
                )
            corpus = None
            if docs:
                corpus, stats = index_documents(ctx, graph, settings.paths.home, docs, progress=report)
        except (SchemaUnavailable, ExamplesError, IndexUnavailable, DocumentsError) as exc:
            raise CliError(str(exc)) from None
        kinds = ("example", "shape", "endpoint", *DOCUMENT_KINDS)
        counts = {kind: len(ctx.index.documents([kind])) for kind in kinds}
        ctx.close()
    summary = {
        "index": str(kg_index_dir(graph, settings.paths.home)),
        "examples": counts["example"], "shapes": counts["shape"], "endpoints": counts["endpoint"],
        "passages": counts["passage"], "tables": counts["table"], "infoboxes": counts["infobox"],
        "embedder": spec, **stats.to_json(),
        **({"files": corpus.files, "files_read": corpus.read, "files_unchanged": corpus.unchanged} if corpus else {}),
        **({"synthesized": synthesized} if synthesize_examples > 0 else {}),
        "skipped": [o.to_json() for o in [*outside, *(corpus.outside if corpus else [])]],
    }  # fmt: skip
    if json_output:
        print(json.dumps(summary, ensure_ascii=False))
        return
    documents = (f"; {summary['passages']} passages, {summary['tables']} tables, {summary['infoboxes']} infoboxes "
                 f"from {corpus.files} files ({corpus.read} read, {corpus.unchanged} unchanged)") if corpus else ""
    out().print(
        f"{summary['examples']} examples, {summary['shapes']} class shapes, {summary['endpoints']} endpoint(s)"
        f"{documents} in {summary['index']}\n{stats.added} added, {stats.updated} updated, {stats.removed} removed, "
        f"{stats.unchanged} unchanged; {stats.embedded} embedded with {summary['embedder']} in {stats.seconds:.1f} s"
        + "".join(f"\n{line}" for line in describe_outside([*outside, *(corpus.outside if corpus else [])]))
        + "".join(f"\nskipped {why}" for why in (corpus.skipped if corpus else [])),
        markup=False, highlight=False,
    )


cache_app = typer.Typer(
    help="List the local stores of RDF files (source, size, age); `cache clear` removes stale ones.",
    no_args_is_help=False,
)


def _human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


@cache_app.callback(invoke_without_command=True)
def cache_command(ctx: typer.Context, format: FormatOpt = None, json_output: JsonOpt = False) -> None:
    """List the stores built from local RDF files: source, size, age, and whether the source changed since."""
    from sparqlnav.graph.cache import survey

    if ctx.invoked_subcommand is not None:
        return
    fmt = chosen_format(format, json_output, allowed=TABLE_JSON_CSV, verb="cache")
    stores_dir = settings_for(None).paths.stores_dir
    found = survey(stores_dir)
    stores = found.stores
    if fmt is OutputFormat.json:
        write_json({"stores_dir": str(stores_dir), "stores": [s.to_json() for s in stores],
                    "left_alone": [e.to_json() for e in found.left_alone]})
        return
    if fmt is OutputFormat.csv:
        write_records([s.to_json() for s in stores], ["path", "files", "triples", "size_bytes", "age_s", "status"])
        return
    table = Table(title=str(stores_dir))
    for column in ("store", "source", "triples", "size", "age", "status"):
        table.add_column(column, overflow="fold", no_wrap=column == "store")
    for s in stores:
        source = s.files[0] if len(s.files) == 1 else f"{len(s.files)} files under {os.path.commonpath(s.files)}" if s.files else "?"
        table.add_row(cell(s.path.name), cell(source), str(s.triples), human_size(s.size_bytes), _human_age(s.age_s),
                      s.status)
    out().print(table)
    err().print(f"{len(stores)} store(s), {human_size(sum(s.size_bytes for s in stores))}", markup=False, highlight=False)
    for entry in found.left_alone:
        err().print(f"not a store, left alone: {entry.path.name} ({entry.why})", markup=False, highlight=False)
    if stores_dir.is_symlink():
        err().print(f"{stores_dir} is a symlink: `cache clear` removes nothing through it", markup=False, highlight=False)


@cache_app.command("clear")
def cache_clear_command(
    everything: Annotated[bool, typer.Option("--all", help="Remove every store, not only stale and damaged ones (never a folder sparqlnav did not make).")] = False,
    format: FormatOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Remove stores whose source files changed or are gone, damaged ones and abandoned builds (--all: every store).

    Only folders sparqlnav made are removed; anything else is left alone and named, and nothing through a symlink."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="cache clear") is OutputFormat.json
    from sparqlnav.graph.cache import StoresFolderError, clear_stores

    try:
        cleared = clear_stores(settings_for(None).paths.stores_dir, everything=everything)
    except StoresFolderError as exc:
        raise CliError(str(exc)) from None
    removed = cleared.stores
    if json_output:
        print(json.dumps({"removed": [s.to_json() for s in removed], "left_alone": [e.to_json() for e in cleared.left_alone]},
                         ensure_ascii=False))
        return
    for s in removed:
        out().print(f"removed {s.path.name} ({', '.join(s.files) or s.status}, {human_size(s.size_bytes)})", markup=False, highlight=False)
    for entry in cleared.left_alone:
        err().print(f"not a store, left alone: {entry.path.name} ({entry.why})", markup=False, highlight=False)
    err().print(f"{len(removed)} store(s) removed, {human_size(sum(s.size_bytes for s in removed))} freed", markup=False, highlight=False)
