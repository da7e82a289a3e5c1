"""Example question–query pairs for graphs that have none (as SPARQL-LLM did for CK25): an LLM writes pairs over
the computed schema, and only those that parse, validate against the schema and return rows are kept, marked
synthetic (`source="synthetic"`, keyword `synthetic`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pydantic import BaseModel, Field

from sparqlnav.graph.endpoint import Outcome
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.schema import META_NAMESPACES, Schema
from sparqlnav.llm import LLMClient, LLMConfig, Message, Recorder
from sparqlnav.retrieval.examples import Example
from sparqlnav.sparql.check import validate
from sparqlnav.sparql.prefixes import declare_prefixes

SYSTEM = """You write example questions with the SPARQL queries that answer them, for a knowledge graph whose
schema is below (each class with its predicates and what their values are). Write varied, realistic questions a
user could ask: lookups, filters, counts, comparisons, questions that join two or three classes. Use only the
classes and predicates of the schema, declare every prefix you use with a PREFIX line, and select the entities
themselves (adding a label is fine). Each query must return rows on this graph.

Prefixes:
{prefixes}

Schema:
{shapes}"""


class _Pair(BaseModel):
    question: str
    query: str


class _Pairs(BaseModel):
    pairs: list[_Pair] = Field(default_factory=list)


@dataclass(frozen=True)
class Synthesis:
    """What a synthesis kept, and why each other pair was dropped."""

    kept: list[Example]
    dropped: list[tuple[str, str]]  # (question, reason)


def synthesize_examples(
    kg: KnowledgeGraph,
    schema: Schema,
    llm: LLMConfig,
    n: int,
    *,
    max_classes: int = 15,
    record: Recorder | None = None,
) -> Synthesis:
    """Ask the LLM for `n` pairs over `schema`; keep those that parse, validate and return rows on `kg`."""
    classes = [c for c in schema.class_names if c in schema.classes and not c.startswith(META_NAMESPACES)]
    shapes = "\n".join(schema.shape(c, counts=True) for c in classes[:max_classes])
    known = {p: ns for p, ns in schema.prefix_map.merged(dict(kg.prefixes.items())).items() if p}
    used = {p: ns for p, ns in known.items() if f"{p}:" in shapes}
    prefixes = "\n".join(f"PREFIX {p}: <{ns}>" for p, ns in sorted(used.items()))
    system = SYSTEM.format(prefixes=prefixes, shapes=shapes)
    user = f"Write {n} question–query pairs as a JSON object {{\"pairs\": [{{\"question\": …, \"query\": …}}]}}."
    with LLMClient(llm) as client:
        reply = client.chat_json([Message.system(system), Message.user(user)], _Pairs, repairs=1,
                                 purpose="synthesize examples", record=record)
    kept: list[Example] = []
    dropped: list[tuple[str, str]] = []
    for pair in reply.value.pairs[:n]:
        query = declare_prefixes(pair.query.strip(), known).query
        report = validate(query, schema, prefixes=known)
        if not report.ok:
            dropped.append((pair.question, "invalid: " + "; ".join(i.message for i in report.issues if i.severity == "error")))
            continue
        result = kg.endpoint.query(report.query)
        if result.outcome is not Outcome.OK or result.table is None or result.table.is_empty:
            dropped.append((pair.question, f"no rows ({result.outcome.value})"))
            continue
        digest = hashlib.sha256(f"{pair.question}\n{report.query}".encode()).hexdigest()[:12]
        kept.append(Example(id=f"synthetic-{digest}", question=pair.question.strip(), query=report.query,
                            keywords=("synthetic",), source="synthetic"))
    return Synthesis(kept, dropped)
