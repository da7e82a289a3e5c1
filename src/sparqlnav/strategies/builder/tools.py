"""The query builder's step functions (queryagent.txt §3.2, appendix E), declared with the shared `tool()`
machinery: each edits one run's `Builder` (its draft query), which renders and runs the draft after every
edit so each step has a result to observe. The builder travels as the keyword-only hook `builder`, which a
model never sees; a face that holds no builder gets a failed observation saying so.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from sparqlnav.graph.endpoint import QueryResult
from sparqlnav.graph.results import ResultTable, shown_labels
from sparqlnav.graph.vocab import humanise, local_name
from sparqlnav.retrieval.embed import Embedder
from sparqlnav.retrieval.similarity import top_similar
from sparqlnav.sparql.draft import (
    Aggregation,
    Condition,
    Draft,
    DraftTerm,
    Fact,
    iri_of,
    parse_term,
)
from sparqlnav.sparql.prefixes import PrefixMap
from sparqlnav.tools.registry import TOOLKIT_TOOLS, Registry, tool
from sparqlnav.tools.toolkit import NAME_SERVICE_ERRORS, Observation, Toolkit

Direction = Literal["out", "in"]
SHOWN_ROWS = 5
RELATION_LIMIT = 200  # per direction, as the toolkit's relations lookup


@dataclass(frozen=True)
class Relation:
    """A relation around a target: outgoing (the target is the subject) or incoming (it is the object)."""

    iri: str
    direction: Direction
    label: str
    uses: int


@dataclass(frozen=True)
class RelationList:
    """What get_relations found, and which of it the model is shown."""

    target: str
    found: int
    shown: tuple[Relation, ...]


@dataclass(frozen=True)
class DraftRun:
    """One execution of the draft: the query, its result, and whether the step was kept."""

    query: str
    result: QueryResult
    kept: bool = True

    @property
    def rows(self) -> int | None:
        """Rows returned (None when the query failed)."""
        table = self.result.table
        return len(table) if self.result.ok and table is not None else None


class Builder:
    """One run's query under construction, over a traced toolkit."""

    def __init__(
        self,
        kit: Toolkit,
        question: str,
        *,
        embedder: Callable[[], Embedder | None] = lambda: None,
        keep: int = 40,
        seed: int | None = None,
    ) -> None:
        self.kit = kit
        self.question = question
        self.embedder = embedder  # called only when there are relations to rank (loading a model takes seconds)
        self.keep = keep
        self.random = random.Random(question if seed is None else seed)  # a replayed run shuffles alike
        self.draft = Draft()
        self.relations: dict[str, frozenset[str]] = {}  # target key → relation IRIs shown
        self.last: DraftRun | None = None  # the latest kept execution
        self.finished = False

    @property
    def prefixes(self) -> PrefixMap:
        """The graph's prefixes."""
        return self.kit.kg.prefixes

    # ------------------------------------------------------------ relations

    def get_relations(self, target: str) -> Observation:
        """The relations around an entity or a variable's current bindings, ranked when there are many."""
        term = parse_term(target, self.prefixes)
        if term is None or term.kind == "literal":
            return Observation(f"cannot read {target!r} as an entity or a variable", None, ok=False)
        if term.kind == "var" and term.text not in self.draft.variables():
            return Observation(f"{term.text} is not a variable of the query", None, ok=False)
        found = self._relations(term)
        if isinstance(found, Observation):
            return found
        listed = self.rank(found)
        key = iri_of(term) or term.text
        self.relations[key] = self.relations.get(key, frozenset()) | {r.iri for r in listed}
        out = RelationList(self._show(term), len(found), tuple(listed))
        return Observation(self._relations_text(out), out)

    def _relations(self, term: DraftTerm) -> list[Relation] | Observation:
        where = self.draft.where()
        if term.kind == "var":
            v = term.text
            queries: list[tuple[Direction, str]] = [
                ("out", f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {{ SELECT DISTINCT {v} WHERE {{\n{where}\n}} }} {v} ?p ?o }}"),
                ("in", f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {{ SELECT DISTINCT {v} WHERE {{\n{where}\n}} }} ?s ?p {v} }}"),
            ]
        else:
            queries = [("out", f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {term.text} ?p ?o }}"),
                       ("in", f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ ?s ?p {term.text} }}")]  # fmt: skip
        found: list[tuple[str, Direction, int]] = []
        for direction, q in queries:
            result = self.kit.kg.endpoint.query(
                f"{q} GROUP BY ?p ORDER BY DESC(?n) LIMIT {RELATION_LIMIT}", timeout_s=self.kit.timeout_s
            )
            if not result.ok or result.table is None:
                return Observation(f"get_relations failed — {result.describe()}", result, ok=False)
            for row in result.table.rows:
                if "p" in row and row["p"].kind == "uri":
                    found.append((row["p"].value, direction, int(row["n"].value) if "n" in row else 0))
        try:
            labels = self.kit.kg.names.labels_of([p for p, _, _ in found])
        except NAME_SERVICE_ERRORS:
            labels = {}  # a courtesy: local names stand in
        return [Relation(p, d, labels.get(p) or humanise(local_name(p)), n) for p, d, n in found]

    def rank(self, relations: Sequence[Relation]) -> list[Relation]:
        """All relations when they are few; else the `keep` most similar to the question, shuffled
        (queryagent.txt B.3: the order of scores must not sway the model's choice)."""
        if len(relations) <= self.keep:
            return list(relations)
        texts = [f"{r.label} ({'of' if r.direction == 'in' else 'has'})" for r in relations]
        chosen = [relations[i] for i in top_similar(self.question, texts, self.keep, self.embedder())]
        self.random.shuffle(chosen)
        return chosen

    def _relations_text(self, found: RelationList) -> str:
        p = self.prefixes
        head = f"Relations around {found.target}: {found.found} found"
        if len(found.shown) < found.found:
            head += f"; the {len(found.shown)} most similar to the question are listed, in no particular order"
        if not found.shown:
            return head + "."
        lines = [head + ". '→' means " + found.target + " <relation> ?x; '←' means ?x <relation> " + found.target + "."]
        for r in found.shown:
            lines.append(f"  {'→' if r.direction == 'out' else '←'} {p.compact(r.iri)} ({r.label}) ×{r.uses}")
        return "\n".join(lines)

    # ------------------------------------------------------------ edits

    def add_fact(self, head: str, relation: str, tail: str) -> Observation:
        """Add a triple pattern and run the query."""
        terms = [parse_term(t, self.prefixes) for t in (head, relation, tail)]
        bad = [raw for raw, t in zip((head, relation, tail), terms, strict=True) if t is None]
        if bad:
            return Observation(
                f"cannot read {', '.join(map(repr, bad))}: write ?name, a prefixed name or <IRI> as shown, or a "
                'literal such as "France" or 12',
                None,
                ok=False,
            )
        h, r, t = (x for x in terms if x is not None)
        if r.kind != "iri":
            return Observation("the relation must be a relation's identifier, as get_relations shows it", None, ok=False)
        fact = Fact(h, r, t)
        if fact in self.draft.facts:
            return Observation("this fact is already in the query", None, ok=False)
        return self._apply(self.draft.add_fact(fact), "fact")

    def add_filter(self, left: str, op: str, right: str) -> Observation:
        """Add a comparison and run the query."""
        lt, rt = parse_term(left, self.prefixes), parse_term(right, self.prefixes)
        if lt is None or rt is None:
            return Observation(f"cannot read {left if lt is None else right!r} as a variable or a value", None, ok=False)
        return self._apply(self.draft.add_filter(Condition(lt, op.strip(), rt)), "filter")

    def aggregate(self, kind: Aggregation, var: str) -> Observation:
        """Count a variable, or keep the row where it is largest or smallest, and run the query."""
        term = parse_term(var, self.prefixes)
        if term is None or term.kind != "var" or term.text not in self.draft.variables():
            return Observation(f"{var} is not a variable of the query", None, ok=False)
        return self._apply(self.draft.set_aggregate(kind, term.text), kind)

    def set_answer(self, var: str) -> Observation:
        """Choose the variable the query returns, and run it."""
        term = parse_term(var, self.prefixes)
        if term is None or term.kind != "var" or term.text not in self.draft.variables():
            return Observation(f"{var} is not a variable of the query", None, ok=False)
        return self._apply(self.draft.set_answer(term.text), "answer")

    def execute(self) -> Observation:
        """Finish when the query runs and returns something."""
        if not self.draft.facts:
            return Observation("the query has no facts yet: add_fact first", None, ok=False)
        run = self.run(self.draft)
        if run.rows is None or run.rows == 0:
            return Observation(self._run_text(run) + "\nNot finished: the query must return the answer.", run, ok=False)
        self.last, self.finished = run, True
        return Observation(self._run_text(run) + "\nDone: this query is the final answer.", run)

    def _apply(self, draft: Draft, what: str) -> Observation:
        run = self.run(draft)
        if run.rows is None or run.rows == 0:  # not kept: every kept step leaves a query that answers
            undone = DraftRun(run.query, run.result, kept=False)
            note = f"\nThe {what} was not kept: the query went back to its previous version."
            return Observation(self._run_text(undone) + note, undone)
        self.draft, self.last = draft, run
        return Observation(self._run_text(run), run)

    def run(self, draft: Draft) -> DraftRun:
        """Render and execute a draft."""
        query = draft.render(self.prefixes)
        return DraftRun(query, self.kit.kg.endpoint.query(query, timeout_s=self.kit.timeout_s))

    def _run_text(self, run: DraftRun) -> str:
        """The query, and what it returned: rows, a few of them with labels, distinct values per variable."""
        out = [f"Query:\n{run.query}"]
        table = run.result.table
        if not run.result.ok or table is None:
            return "\n".join([*out, f"It failed — {run.result.describe()}"])
        if table.is_empty:
            return "\n".join([*out, "It returned no rows."])
        more = " (cut at the cap)" if table.truncated else ""
        out.append(f"It returned {len(table)} row(s){more}:")
        out.append(self._rows(table))
        if len(table) > 1:
            counts = ", ".join(f"{v}: {len({row[v] for row in table.rows if v in row})}" for v in table.vars)
            out.append(f"Distinct values: {counts}")
        return "\n".join(out)

    def _rows(self, table: ResultTable) -> str:
        try:
            # A preview of the draft after each edit: its first rows are enough to judge the edit.
            labels = shown_labels(table, self.kit.kg.names, head=SHOWN_ROWS, tail=0, whole=0)
        except NAME_SERVICE_ERRORS:
            labels = {}
        return table.to_markdown(self.prefixes, labels, head=SHOWN_ROWS, tail=0, whole=0)

    def _show(self, term: DraftTerm) -> str:
        iri = iri_of(term)
        return self.prefixes.compact(iri) if iri else term.text


# -- the tools, as models and clients see them ------------------------------------------------------

Hook = Builder | None
Var = Annotated[str, Field(description="a variable of the query, e.g. ?product")]
_NO_BUILDER = Observation("this tool edits a query under construction; only the build strategy holds one", None, ok=False)


def get_relations(
    kit: Toolkit,
    target: Annotated[str, Field(description="an entity (prefixed name or <IRI> as shown) or a variable of the query")],
    *,
    builder: Hook = None,
) -> Observation:
    """List the relations around an entity, or around the current values of a variable, each with its direction:
    → the target is the subject, ← the target is the object."""
    return builder.get_relations(target) if builder else _NO_BUILDER


def add_fact(
    kit: Toolkit,
    head: Annotated[str, Field(description="the subject: an entity, a variable, or a new ?variable")],
    relation: Annotated[str, Field(description="a relation exactly as get_relations listed it")],
    tail: Annotated[str, Field(description='the object: an entity, a variable, a new ?variable, or a literal ("France", 12)')],
    *,
    builder: Hook = None,
) -> Observation:
    """Add the triple pattern (head, relation, tail) to the query and run it. At most one of head and tail may be a
    new variable."""
    return builder.add_fact(head, relation, tail) if builder else _NO_BUILDER


def add_filter(
    kit: Toolkit,
    left: Annotated[str, Field(description="a variable of the query")],
    op: Annotated[str, Field(description="one of = != < <= > >=")],
    right: Annotated[str, Field(description='a value (12, "France", an entity) or another variable')],
    *,
    builder: Hook = None,
) -> Observation:
    """Keep only the results where `left op right` holds, and run the query."""
    return builder.add_filter(left, op, right) if builder else _NO_BUILDER


def add_count(kit: Toolkit, var: Var, *, builder: Hook = None) -> Observation:
    """Make the query return how many distinct values the variable has, and run it."""
    return builder.aggregate("count", var) if builder else _NO_BUILDER


def add_max(kit: Toolkit, var: Var, *, builder: Hook = None) -> Observation:
    """Keep only the result where the variable is largest (e.g. the most expensive), and run the query."""
    return builder.aggregate("max", var) if builder else _NO_BUILDER


def add_min(kit: Toolkit, var: Var, *, builder: Hook = None) -> Observation:
    """Keep only the result where the variable is smallest (e.g. the cheapest), and run the query."""
    return builder.aggregate("min", var) if builder else _NO_BUILDER


def set_answer(kit: Toolkit, var: Var, *, builder: Hook = None) -> Observation:
    """Make the query return only this variable (the answer), and run it."""
    return builder.set_answer(var) if builder else _NO_BUILDER


def execute(kit: Toolkit, *, builder: Hook = None) -> Observation:
    """Finish: the current query becomes the final answer. Call it once the query returns the answer."""
    return builder.execute() if builder else _NO_BUILDER


# Names and arguments are a contract (docs/design.md); `search` comes from the shared toolkit.
BUILDER_TOOLS: Registry = Registry(
    tool(fn) for fn in (get_relations, add_fact, add_filter, add_count, add_max, add_min, set_answer, execute)
)
BUILD_TOOLS: Registry = TOOLKIT_TOOLS.only("search").plus(*BUILDER_TOOLS)
"""What the build strategy offers the model."""
