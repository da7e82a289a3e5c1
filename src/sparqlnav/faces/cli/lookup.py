"""Verbs that look at a graph directly: run SPARQL, search names, show an entity, check a query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sparqlnav.faces.cli.common import (
    CliError,
    KgOpt,
    TimeoutOpt,
    declare_known_prefixes,
    err,
    opened,
    out,
    read_query,
    rich_table,
    settings_for,
    syntax_error_as_typed,
)
from sparqlnav.faces.output import (
    TABLE_JSON,
    TABLE_JSON_CSV,
    FormatOpt,
    JsonOpt,
    OutputFormat,
    check_form,
    chosen_format,
    write_json,
    write_records,
    write_result,
)
from sparqlnav.graph.endpoint import Outcome
from sparqlnav.graph.kg import KnowledgeGraph

if TYPE_CHECKING:
    from sparqlnav.graph.schema import Schema
    from sparqlnav.sparql.check import Issue


def sparql(
    query: Annotated[str, typer.Argument(help="The query, a file holding it, or '-' for stdin.")],
    kg: KgOpt = "demo",
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Run a read-only SPARQL query."""
    from sparqlnav.sparql.guard import query_form

    fmt = chosen_format(format, json_output, verb="sparql")
    text = read_query(query)
    check_form(fmt, query_form(text))  # before the graph opens: a wrong format costs no load
    with opened(kg, settings_for(timeout)) as graph:
        typed, text = text, declare_known_prefixes(text, graph)
        result = graph.endpoint.query(text)
        if not result.ok:
            said = syntax_error_as_typed(typed) if result.outcome == "syntax_error" and text != typed else None
            raise CliError(said or result.describe())
        assert result.table is not None
        table = result.table
        if fmt is not OutputFormat.table:
            write_result(table, fmt, form=query_form(text), prefixes=graph.prefixes.mapping)
        elif table.is_boolean:
            out().print("true" if table.boolean else "false")
        else:
            out().print(rich_table(table, graph))
            err().print(f"{len(table)} row(s) in {result.seconds:.2f} s")
        if table.truncated:
            err().print(
                f"[yellow]warning:[/] the result was cut at a cap ({table.cap}); more rows exist"
            )


def search(
    text: Annotated[str, typer.Argument(help="A name, possibly partial or misspelt.")],
    kg: KgOpt = "demo",
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    limit: Annotated[
        int, typer.Option("--limit", help="How many entities (properties: half as many).")
    ] = 8,
    timeout: TimeoutOpt = None,
) -> None:
    """Find entities and properties by label, alias or description."""
    from sparqlnav.tools.lookup import search as do_search

    fmt = chosen_format(format, json_output, allowed=TABLE_JSON_CSV, verb="search")
    if not text.strip():
        raise CliError("nothing to search for: the text is empty")
    with opened(kg, settings_for(timeout)) as graph:
        found = do_search(graph, text, entities=limit, properties=max(1, limit // 2))
        if fmt is OutputFormat.json:
            write_json(found.to_json())
        elif fmt is OutputFormat.csv:
            data = found.to_json()
            hits = [{**h, "kind": kind} for kind, key in (("entity", "entities"), ("property", "properties")) for h in data[key]]
            write_records(hits, [*dict.fromkeys(k for h in hits for k in h)] or ["iri", "kind"])
        else:
            out().print(found.to_text(graph), markup=False, highlight=False)


def entity(
    ident: Annotated[
        str, typer.Argument(metavar="ID", help="IRI, prefixed name, Q/P id, or a name to look up.")
    ],
    kg: KgOpt = "demo",
    format: FormatOpt = None,
    json_output: JsonOpt = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Show an entity's outgoing edges, with qualifiers where the KG has them."""
    from sparqlnav.tools.lookup import entity as do_entity
    from sparqlnav.tools.lookup import resolve_name

    fmt = chosen_format(format, json_output, allowed=TABLE_JSON_CSV, verb="entity")
    with opened(kg, settings_for(timeout)) as graph:
        iri, hit = resolve_name(graph, ident)
        if hit is not None and fmt is OutputFormat.table:
            err().print(f"{ident!r} → {graph.prefixes.compact(iri)} ({hit.label})", style="dim", markup=False)
        page = do_entity(graph, iri)
        if fmt is OutputFormat.json:
            write_json(page.to_json())
        elif fmt is OutputFormat.csv:
            edges = [
                {"property": e["property"], "property_label": e["label"], "value": v["value"]["value"],
                 "value_label": v["label"], "qualifiers": [f"{q['property']}={q['value']['value']}" for q in v["qualifiers"]]}
                for e in page.to_json()["edges"] for v in e["values"]
            ]  # fmt: skip
            write_records(edges, ["property", "property_label", "value", "value_label", "qualifiers"])
        else:
            out().print(page.to_text(graph), markup=False, highlight=False)


def outcome_exit_code(outcome: Outcome) -> int:
    """Exit code for a query outcome: 0 ran, 1 otherwise."""
    return 0 if outcome in (Outcome.OK, Outcome.EMPTY) else 1



def validate_command(
    query: Annotated[
        str, typer.Argument(metavar="QUERY_OR_FILE", help="A SPARQL query, a file holding one, or '-' for stdin.")
    ],
    kg: Annotated[
        str | None,
        typer.Option(
            "--kg", help="Check against this KG's schema (RDF file or folder, endpoint URL, 'demo' (the default), 'wikidata')."
        ),
    ] = None,
    void: Annotated[Path | None, typer.Option("--void", help="Check against the schema in this VoID file.")] = None,
    format: FormatOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Check a query without running it: syntax, missing prefixes (repaired), classes and predicates against the
    schema. Exit 0 when the (repaired) query is ok, 1 otherwise."""
    json_output = chosen_format(format, json_output, allowed=TABLE_JSON, verb="validate") is OutputFormat.json
    from sparqlnav.graph.schema import schema_from_void_file
    from sparqlnav.retrieval.kg_index import SchemaUnavailable, kg_schema, open_kg_index
    from sparqlnav.sparql.check import validate as check_query

    if kg and void:
        raise CliError("give --kg or --void, not both")
    text = read_query(query)
    schema: Schema | None = None
    services: dict[str, Schema] = {}
    prefixes: dict[str, str] = {}
    if void is not None:
        if not void.is_file():
            raise CliError(f"no such VoID file: {void}")
        try:
            schema = schema_from_void_file(void)
        except (SyntaxError, ValueError, OSError) as exc:
            raise CliError(f"cannot read the VoID file {void}: {exc}") from None
        if not schema.classes and not schema.predicates:
            # Checking against an empty schema would pass every query: say what the file is not.
            raise CliError(f"{void} is not a VoID description: it has no void:classPartition or void:propertyPartition")
    else:
        kg = kg or "demo"  # every verb's default graph
        settings = settings_for(None)
        with opened(kg, settings) as graph:
            prefixes = {k: v for k, v in graph.prefixes.items() if k}
            # The schemas `sparqlnav index` stored; else read or computed now (not for Wikidata: too large).
            stored = open_kg_index(graph, settings.paths.home, embedder=None)
            if stored is not None:
                schema, services = stored.schema, stored.schemas
                stored.close()
            elif graph.name != "wikidata":
                try:
                    schema = kg_schema(graph)
                except SchemaUnavailable as exc:
                    raise CliError(f"cannot get the schema of {kg}: {exc}") from None
            report = check_query(text, schema, prefixes=prefixes, schemas_by_endpoint=services)
            report.issues.extend(_unused_in_graph(report.query, text, graph, schema))
    if void is not None:
        report = check_query(text, schema, prefixes=prefixes, schemas_by_endpoint=services)
    if json_output:
        compact = schema.compact if schema is not None else None
        print(json.dumps(report.to_dict(compact), ensure_ascii=False))
    elif not report.issues:
        out().print("ok: no issues", markup=False, highlight=False)
    else:
        out().print(report.text(), markup=False, highlight=False)
        if report.repaired:
            out().print("\nrepaired query:\n" + report.query, markup=False, highlight=False)
    if not report.ok:  # a repaired prefix is reported, but the repaired query is fine: `ok` decides
        raise typer.Exit(1)


def _unused_in_graph(query: str, given: str, graph: KnowledgeGraph, schema: Schema | None) -> list[Issue]:
    """Warnings for what the checked graph never uses: each IRI of the query that occurs nowhere in it (one query),
    and each prefix the query did not declare that was read from defaults the graph does not use (`wdt:` read as
    Wikidata's on a graph that is not Wikidata)."""
    from sparqlnav.feedback.memory import query_iris
    from sparqlnav.sparql.check import Issue
    from sparqlnav.sparql.guard import declared_prefixes, tokens
    from sparqlnav.sparql.prefixes import WELL_KNOWN
    from sparqlnav.tools.lookup import absent

    missing = absent(graph, query_iris(query, graph.prefixes, graph.vocab))
    out = [Issue("absent_iri", f"{graph.prefixes.compact(iri)} occurs nowhere in {graph.name}", "warning")
           for iri in missing]
    # The graph's own namespaces: those its file declares (not the defaults every graph gets) and those its classes
    # and predicates are in. A misspelt name in one of them is the name's fault (absent_iri), not the namespace's.
    own = {ns for prefix, ns in graph.prefixes.items() if WELL_KNOWN.get(prefix) != ns}
    own |= set(schema.namespaces) if schema is not None else set()
    declared_by_user = declared_prefixes(tokens(given))
    for prefix, ns in declared_prefixes(tokens(query)).items():
        if prefix not in declared_by_user and ns not in own and any(i.startswith(ns) for i in missing):
            out.append(Issue("unknown_prefix", f"the prefix '{prefix}:' was not declared and was read as <{ns}>, "
                             f"which {graph.name} does not use: declare the namespace you mean", "warning"))
    return out



