"""Validate a SPARQL query before it runs: syntax (with line and column), missing well-known prefixes (repaired),
and classes and predicates against the schema of the endpoint each triple pattern runs on.

Messages say what is wrong and what would be right, so a person or an LLM can fix the query. When the
checker is unsure (untyped subject, predicate outside the schema's namespaces, no statistics for a class)
it says nothing: a valid query must never be rejected. Nothing here executes a query or opens a connection.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Levenshtein

from sparqlnav.graph.schema import Schema, namespace_of
from sparqlnav.sparql.guard import normalise_endpoint
from sparqlnav.sparql.parser import (
    BNode,
    Iri,
    Path,
    PathAlt,
    PathInv,
    PathLink,
    PathMod,
    PathNeg,
    PathSeq,
    SparqlSyntaxError,
    Term,
    TriplePattern,
    Var,
    parse_query,
)
from sparqlnav.sparql.parser import (
    Literal as Lit,
)
from sparqlnav.sparql.prefixes import WELL_KNOWN, WIKIDATA, declare_prefixes

IssueKind = Literal[
    "syntax",
    "fix",
    "unknown_class",
    "unknown_predicate",
    "predicate_not_on_class",
    "object_class_mismatch",
    "absent_iri",  # an IRI the checked graph never uses (a warning: the query runs, and matches nothing there)
    "unknown_prefix",  # an undeclared prefix read from defaults the checked graph does not use
]
Severity = Literal["error", "warning", "info"]

# Prefixes a query may use without declaring them: common vocabularies, the prefixes the Wikidata Query
# Service predeclares, and the SIB (UniProt, Rhea) ones. The caller's prefixes and the schemas' win.
REPAIR_PREFIXES: dict[str, str] = {
    **WELL_KNOWN,
    **WIKIDATA,
    "wdv": "http://www.wikidata.org/value/",
    "wdref": "http://www.wikidata.org/reference/",
    "wdno": "http://www.wikidata.org/prop/novalue/",
    "wdtn": "http://www.wikidata.org/prop/direct-normalized/",
    "psv": "http://www.wikidata.org/prop/statement/value/",
    "psn": "http://www.wikidata.org/prop/statement/value-normalized/",
    "pqv": "http://www.wikidata.org/prop/qualifier/value/",
    "pqn": "http://www.wikidata.org/prop/qualifier/value-normalized/",
    "pr": "http://www.wikidata.org/prop/reference/",
    "prv": "http://www.wikidata.org/prop/reference/value/",
    "prn": "http://www.wikidata.org/prop/reference/value-normalized/",
    "wdata": "http://www.wikidata.org/wiki/Special:EntityData/",
    "bd": "http://www.bigdata.com/rdf#",
    "bds": "http://www.bigdata.com/rdf/search#",
    "gas": "http://www.bigdata.com/rdf/gas#",
    "hint": "http://www.bigdata.com/queryHints#",
    "mwapi": "https://www.mediawiki.org/ontology#API/",
    "geo": "http://www.opengis.net/ont/geosparql#",
    "geof": "http://www.opengis.net/def/function/geosparql/",
    "ontolex": "http://www.w3.org/ns/lemon/ontolex#",
    "dct": "http://purl.org/dc/terms/",
    "prov": "http://www.w3.org/ns/prov#",
    "cc": "http://creativecommons.org/ns#",
    "dbo": "http://dbpedia.org/ontology/",
    "dbr": "http://dbpedia.org/resource/",
    "dbp": "http://dbpedia.org/property/",
    "up": "http://purl.uniprot.org/core/",
    "uniprotkb": "http://purl.uniprot.org/uniprot/",
    "taxon": "http://purl.uniprot.org/taxonomy/",
    "keywords": "http://purl.uniprot.org/keywords/",
    "ec": "http://purl.uniprot.org/enzyme/",
    "faldo": "http://biohackathon.org/resource/faldo#",
    "rh": "http://rdf.rhea-db.org/",
    "obo": "http://purl.obolibrary.org/obo/",
    "GO": "http://purl.obolibrary.org/obo/GO_",
    "CHEBI": "http://purl.obolibrary.org/obo/CHEBI_",
}

_LIST_LIMIT = 12
_NAMESPACE_TYPO = 2  # edits between a namespace and the schema's for it to read as a typo of it (`zoo/` for `zoo#`: 1)


@dataclass(frozen=True)
class Issue:
    """One problem (or repair) found in a query; `line`/`column` refer to `CheckReport.query`."""

    kind: IssueKind
    message: str
    severity: Severity = "error"
    line: int | None = None
    column: int | None = None
    suggestions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "line": self.line,
            "column": self.column,
            "suggestions": list(self.suggestions),
        }


@dataclass
class CheckReport:
    """The verdict on a query: `ok` unless an error was found; `query` is the (possibly repaired) text."""

    ok: bool
    issues: list[Issue]
    query: str
    triple_patterns: list[TriplePattern] = field(default_factory=list)
    services: list[str] = field(default_factory=list)

    @property
    def repaired(self) -> bool:
        """Whether `query` differs from the text that was checked."""
        return any(i.kind == "fix" for i in self.issues)

    def text(self) -> str:
        """The issues as lines a person or an LLM can act on."""
        if not self.issues:
            return "no issues"
        return "\n".join(
            f"{i.severity} [{i.kind}]" + (f" line {i.line}" if i.line else "") + f": {i.message}"
            for i in self.issues
        )

    def to_dict(self, compact: Callable[[str], str] | None = None) -> dict[str, Any]:
        """A JSON-ready dict; IRIs in triple patterns are compacted with `compact` when given."""
        return {
            "ok": self.ok,
            "issues": [i.to_dict() for i in self.issues],
            "query": self.query,
            "triple_patterns": [pattern_to_dict(p, compact) for p in self.triple_patterns],
            "services": self.services,
        }


def pattern_to_dict(
    pattern: TriplePattern, compact: Callable[[str], str] | None = None
) -> dict[str, Any]:
    """A triple pattern as strings (subject, predicate, object, service, line, context)."""
    return {
        "subject": term_text(pattern.subject, compact),
        "predicate": predicate_text(pattern.predicate, compact),
        "object": term_text(pattern.object, compact),
        "service": pattern.service,
        "line": pattern.line,
        "context": list(pattern.context),
    }


def term_text(term: Term, compact: Callable[[str], str] | None = None) -> str:
    """A term as SPARQL text (IRIs compacted when `compact` is given)."""
    if isinstance(term, Iri) and compact is not None:
        return compact(term.value)
    return str(term)


def predicate_text(pred: Var | Iri | Path, compact: Callable[[str], str] | None = None) -> str:
    """A predicate or property path as SPARQL text."""
    text = str(pred)
    if compact is None:
        return text
    return re.sub(r"<([^<>\s]+)>", lambda m: compact(m.group(1)), text)


# ---------------------------------------------------------------------------------------------- entry


def validate(
    query: str,
    schema: Schema | None = None,
    *,
    prefixes: Mapping[str, str] | None = None,
    schemas_by_endpoint: Mapping[str, Schema] | None = None,
) -> CheckReport:
    """Check a query's syntax, repair missing well-known prefixes, and check its classes and predicates
    against `schema` (the endpoint the query is sent to) and `schemas_by_endpoint` (SERVICE endpoints)."""
    issues: list[Issue] = []
    repair = dict(REPAIR_PREFIXES)
    for other in (schemas_by_endpoint or {}).values():
        repair.update({k: v for k, v in other.prefixes.items() if k})
    if schema is not None:
        repair.update({k: v for k, v in schema.prefixes.items() if k})
    repair.update(prefixes or {})

    try:
        parsed = parse_query(query, collect_undefined_prefixes=True)
    except SparqlSyntaxError as e:
        return CheckReport(False, [syntax_issue(query, e)], query)
    fixed = declare_prefixes(query, repair)
    text = fixed.query
    for prefix, (line, col) in parsed.undefined_prefixes.items():
        if prefix not in repair:
            engine = (
                " [Virtuoso built-in prefix; not standard SPARQL 1.1]"
                if prefix in _VIRTUOSO_PREFIXES
                else ""
            )
            message = (
                f"the prefix '{prefix}:' is not declared and is not a well-known prefix; "
                f"add PREFIX {prefix}: <namespace IRI>{engine}"
            )
            issues.append(Issue("syntax", message, "error", line, col))
    if fixed.changed:
        done = []
        if fixed.added:
            names = ", ".join(f"{p}:" for p in fixed.added)
            done.append(f"added missing PREFIX declaration(s) for {names} at the top of the query")
        if fixed.written_out:
            done.append(f"wrote the %-escaped name(s) {', '.join(fixed.written_out)} as <IRI>s")
        issues.insert(
            0,
            Issue(
                "fix",
                f"{'; '.join(done)} (line numbers below refer to the repaired query)",
                "info",
                suggestions=tuple(f"PREFIX {p}: <{repair[p]}>" for p in fixed.added),
            ),
        )
    if any(i.kind == "syntax" for i in issues):
        return CheckReport(False, issues, text, parsed.patterns, _service_list(parsed.services))
    if text != query:
        try:
            parsed = parse_query(text)
        except SparqlSyntaxError as e:  # not expected once the first parse passed; never crash
            return CheckReport(False, [*issues, syntax_issue(text, e)], text)

    services = _service_list(parsed.services)
    targets = _Targets(schema, schemas_by_endpoint or {})
    by_endpoint: dict[str | None, list[TriplePattern]] = {}
    for pattern in parsed.patterns:
        by_endpoint.setdefault(pattern.service, []).append(pattern)
    for endpoint, patterns in by_endpoint.items():
        target = targets.find(endpoint)
        if target is None:
            continue
        where = "" if endpoint is None else f" in SERVICE <{endpoint}>"
        issues.extend(
            _SchemaCheck(target, patterns, parsed.values, parsed.projections, where).run()
        )
    ok = not any(i.severity == "error" for i in issues)
    return CheckReport(ok, issues, text, parsed.patterns, services)


def _service_list(services: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for s in services:
        if s.endpoint not in out:
            out.append(s.endpoint)
    return out


def syntax_issue(query: str, error: SparqlSyntaxError) -> Issue:
    """A syntax issue, naming the engine when the text uses a known non-standard extension."""
    message = error.reason
    engine = engine_extension(query, error)
    if engine:
        message += f" [{engine}; not standard SPARQL 1.1]"
    return Issue("syntax", message, "error", error.line, error.column)


_VIRTUOSO_PREFIXES = frozenset({"bif", "sql", "virtrdf"})
_EXTENSIONS: list[tuple[str, re.Pattern[str]]] = [
    (
        "Virtuoso extension: aggregate without (… AS ?var)",
        re.compile(r"an aggregate in SELECT must be written"),
    ),
    (
        # BESTIARY's gold for such queries came from rdflib (one sampled value per group); Virtuoso refuses them
        # (SP031) or returns every member of the groups: no engine is "the" meaning, so the message names both.
        "engine leniency: a variable neither grouped nor aggregated (Virtuoso groups by it or refuses it; rdflib"
        " takes one value per group; write SAMPLE(?v) for the standard form)",
        re.compile(r"neither grouped nor aggregated|outside an aggregate"),
    ),
    (
        "Virtuoso extension: expression without (… AS ?var)",
        re.compile(r"an expression in SELECT must be written"),
    ),
    (
        "Blazegraph extension: named subquery WITH { … } AS %name",
        re.compile(r"found '(WITH|with|INCLUDE|include)'"),
    ),
    (
        "Blazegraph/Virtuoso leniency: BIND rebinding a variable",
        re.compile(r"BIND\(… AS \?\w+\): .* already used"),
    ),
]


def engine_extension(query: str, error: SparqlSyntaxError) -> str | None:
    """Which engine's non-standard syntax a rejected query relies on (Virtuoso, Blazegraph), if any."""
    if re.match(r"\s*DEFINE\s", query, re.I):
        return "Virtuoso extension: DEFINE pragma"
    if re.search(r"\bOPTION\s*\(", query[error.offset :], re.I):
        return "Virtuoso extension: OPTION (…) hints"
    for name, pattern in _EXTENSIONS:
        if pattern.search(error.reason):
            return name
    return None


class _Targets:
    """Which schema describes the endpoint a pattern runs on."""

    def __init__(self, main: Schema | None, others: Mapping[str, Schema]) -> None:
        self.main = main
        self.others = {endpoint_key(url): s for url, s in others.items()}
        if main is not None and main.endpoint:
            self.main_key: str | None = endpoint_key(main.endpoint)
        else:
            self.main_key = None

    def find(self, endpoint: str | None) -> Schema | None:
        if endpoint is None:
            return self.main
        if endpoint.startswith(("?", "$")):
            return None
        key = endpoint_key(endpoint)
        if key in self.others:
            return self.others[key]
        if key == self.main_key:
            return self.main
        return None


def endpoint_key(url: str) -> str:
    """An endpoint URL without its scheme, in the guard's one spelling (host case, default port, slash)."""
    try:
        return normalise_endpoint(url, scheme=False)
    except ValueError:  # not a URL (e.g. a malformed host): compare the text as it is
        return url.strip().rstrip("/")


# ------------------------------------------------------------------------------------------ schema


@dataclass
class _Edge:
    subject: str
    predicate: str
    obj: str | None
    obj_term: Term
    exact: bool
    alt: tuple[int, int] | None
    nested_alt: bool
    pattern: TriplePattern


class _SchemaCheck:
    """Checks the patterns that run on one endpoint against that endpoint's schema."""

    def __init__(
        self,
        schema: Schema,
        patterns: list[TriplePattern],
        values: Mapping[str, list[Term]],
        projections: Mapping[int, frozenset[str] | None],
        where: str,
    ) -> None:
        self.schema = schema
        self.patterns = patterns
        self.values = values
        self.projections = projections
        self.where = where
        self.type_predicates = set(schema.type_predicates)
        self.edges: list[_Edge] = []
        self._fresh = 0
        self._alts = 0
        self.display: dict[str, str] = {}

    # -- graph of the query
    def node(self, term: Term, pattern: TriplePattern) -> str | None:
        if isinstance(term, Var) and not term.name.startswith("\u00b7"):
            # A variable a subquery does not project is a different variable outside it.
            for sid in reversed(pattern.scope):
                projected = self.projections.get(sid)
                if projected is not None and term.name not in projected:
                    key = f"?{term.name}@{sid}"
                    self.display[key] = f"?{term.name} (inside a subquery)"
                    return key
            return f"?{term.name}"
        if isinstance(term, Var):
            return f"?{term.name}"
        if isinstance(term, BNode):
            return f"_:{term.label}"
        if isinstance(term, Iri):
            return f"<{term.value}>"
        return None

    def fresh(self, pattern: TriplePattern) -> Var:
        self._fresh += 1
        name = f"\u00b7path{self._fresh}"  # '·' cannot start a SPARQL variable name: no clash
        self.display[f"?{name}"] = f"the node inside the property path on line {pattern.line}"
        return Var(name)

    def add_path(
        self,
        s: Term,
        path: Path,
        o: Term,
        pattern: TriplePattern,
        exact: bool,
        alt: tuple[int, int] | None,
        depth: int,
    ) -> None:
        if isinstance(path, PathLink):
            subject = self.node(s, pattern)
            if subject is not None:
                self.edges.append(
                    _Edge(
                        subject, path.iri, self.node(o, pattern), o, exact, alt, depth > 1, pattern
                    )
                )
        elif isinstance(path, PathInv):
            self.add_path(o, path.path, s, pattern, exact, alt, depth)
        elif isinstance(path, PathSeq):
            current = s
            for i, part in enumerate(path.parts):
                nxt = o if i == len(path.parts) - 1 else self.fresh(pattern)
                self.add_path(current, part, nxt, pattern, exact, alt, depth)
                current = nxt
        elif isinstance(path, PathAlt):
            self._alts += 1
            gid = self._alts
            for i, option in enumerate(path.options):
                self.add_path(s, option, o, pattern, exact, alt or (gid, i), depth + 1)
        elif isinstance(path, PathMod):
            # Zero or more steps: the ends need not be linked by the predicate, so no range inference.
            self.add_path(s, path.path, o, pattern, False, alt, depth)
        elif isinstance(path, PathNeg):
            return

    def build(self) -> None:
        for p in self.patterns:
            if isinstance(p.predicate, Var):
                continue
            if isinstance(p.predicate, Iri):
                self.add_path(p.subject, PathLink(p.predicate.value), p.object, p, True, None, 0)
            else:
                self.add_path(p.subject, p.predicate, p.object, p, True, None, 0)

    # -- helpers
    def owned(self, iri: str) -> bool:
        # A namespace one typo away from the schema's is the schema's, misspelt: its names are checked (and found
        # missing) like a misspelt local name, not passed as another vocabulary's.
        return namespace_of(iri) in self.schema.namespaces or self.near_namespace(iri) is not None

    def near_namespace(self, iri: str) -> str | None:
        """The schema's namespace that the IRI's (not the schema's) is a typo of (`zoo/` for `zoo#`), if any."""
        ns = namespace_of(iri)
        if ns in self.schema.namespaces:
            return None
        close = sorted((Levenshtein.distance(ns, x), x) for x in self.schema.namespaces)
        return close[0][1] if close and close[0][0] <= _NAMESPACE_TYPO else None

    def moved(self, iri: str) -> str:
        """The IRI with a misspelt namespace replaced by the schema's it is a typo of (else as it is)."""
        near = self.near_namespace(iri)
        return near + iri[len(namespace_of(iri)):] if near is not None else iri

    def namespace_note(self, iri: str) -> str:
        """", in the namespace <…>, which this endpoint does not use (closest namespace: <…>)" for a misspelt
        namespace, else ''."""
        near = self.near_namespace(iri)
        if near is None:
            return ""
        return f", in the namespace <{namespace_of(iri)}>, which it does not use (closest namespace: <{near}>)"

    def c(self, iri: str) -> str:
        return self.schema.compact(iri)

    def show(self, node: str) -> str:
        if node in self.display:
            return self.display[node]
        if node.startswith("<"):
            return self.c(node[1:-1])
        if node.startswith("_:"):
            return "a blank node [ … ]"
        return node

    def same_namespace(self, iri: str) -> list[str]:
        """Predicates in the namespace of `iri` (all predicates when there are none)."""
        ns = namespace_of(self.moved(iri))
        return [
            x for x in self.schema.predicate_names if namespace_of(x) == ns
        ] or self.schema.predicate_names

    def named(self, compact: str) -> str:
        """A compact class name with its label when the schema knows one (`wd:Q5 (human)`)."""
        iri = self.schema.prefix_map.expand(compact)
        label = self.schema.labels.get(iri or "")
        return f"{compact} ({label})" if label else compact

    def closest(self, iri: str, choices: Iterable[str], limit: int = 3) -> list[str]:
        names = {self.c(x): x for x in choices}
        want = self.c(self.moved(iri))
        found = process.extract(want, list(names), scorer=fuzz.ratio, limit=limit, score_cutoff=60)
        return [name for name, _score, _i in found]

    # -- checks
    def run(self) -> list[Issue]:
        self.build()
        issues: list[Issue] = []
        types = self.explicit_types(issues)
        inferred = self.inferred_types(types)
        failures: dict[tuple[int, int], list[tuple[_Edge, Issue]]] = {}
        failed_options: dict[int, set[int]] = {}
        options: dict[int, set[int]] = {}
        for edge in self.edges:
            if edge.alt is not None:
                options.setdefault(edge.alt[0], set()).add(edge.alt[1])
            if edge.predicate in self.type_predicates:
                continue
            issue = self.check_edge(edge, types, inferred)
            if issue is None:
                continue
            if edge.alt is None or issue.kind == "unknown_predicate":
                # A predicate the endpoint never uses is wrong even as one alternative among others.
                issues.append(issue)
            elif not edge.nested_alt:
                failures.setdefault(edge.alt, []).append((edge, issue))
                failed_options.setdefault(edge.alt[0], set()).add(edge.alt[1])
        # An alternative path is wrong only when every option is.
        for gid, failed in failed_options.items():
            if failed == options.get(gid, set()):
                for (g, _opt), found in failures.items():
                    if g == gid:
                        issues.extend(issue for _edge, issue in found)
        issues.extend(self.check_object_classes(types, inferred))
        return _dedupe(issues)

    def explicit_types(self, issues: list[Issue]) -> dict[str, set[str]]:
        types: dict[str, set[str]] = {}
        for edge in self.edges:
            if edge.predicate not in self.type_predicates or not edge.exact or edge.alt is not None:
                continue
            classes: list[str] = []
            if isinstance(edge.obj_term, Iri):
                classes = [edge.obj_term.value]
            elif isinstance(edge.obj_term, Var) and edge.obj_term.name in self.values:
                consts = self.values[edge.obj_term.name]
                if all(isinstance(v, Iri) for v in consts):
                    classes = [v.value for v in consts if isinstance(v, Iri)]
            known: list[str] = []
            for cls in classes:
                if self.schema.has_class(cls):
                    known.append(cls)
                elif self.owned(cls):
                    near = self.closest(cls, self.schema.class_names)
                    hint = f" (closest: {', '.join(self.named(n) for n in near)})" if near else ""
                    issues.append(
                        Issue(
                            "unknown_class",
                            f"{self.c(cls)} is not a class of this endpoint{self.where}{self.namespace_note(cls)}"
                            f"{hint}",
                            "error",
                            edge.pattern.line,
                            edge.pattern.column,
                            tuple(near),
                        )
                    )
            if known:
                types.setdefault(edge.subject, set()).update(known)
        return types

    def inferred_types(self, types: dict[str, set[str]]) -> dict[str, tuple[set[str], str]]:
        """Types of untyped nodes: from the range of a predicate pointing at them, else from a predicate only
        one class uses (its domain), then ranges again from those."""
        inferred: dict[str, tuple[set[str], str]] = {}
        unsure: set[str] = set()
        self.propagate_ranges(types, inferred, unsure, fixed=set())
        for edge in self.edges:
            subject = edge.subject
            if (
                not edge.exact
                or edge.alt is not None
                or subject.startswith("<")
                or subject in types
                or subject in inferred
            ):
                continue
            domain = self.schema.sole_domains.get(edge.predicate)
            if domain is not None:
                inferred[subject] = (
                    {domain},
                    f"{self.c(edge.predicate)}, used only on {self.c(domain)}",
                )
                unsure.discard(subject)
        self.propagate_ranges(types, inferred, unsure, fixed=set(inferred))
        return inferred

    def propagate_ranges(
        self,
        types: dict[str, set[str]],
        inferred: dict[str, tuple[set[str], str]],
        unsure: set[str],
        fixed: set[str],
    ) -> None:
        for _round in range(4):
            changed = False
            for edge in self.edges:
                target = edge.obj
                if (
                    target is None
                    or not edge.exact
                    or edge.alt is not None
                    or target in types
                    or target in unsure
                ):
                    continue
                if (
                    target in fixed
                    or target.startswith("<")
                    or edge.predicate in self.type_predicates
                ):
                    continue
                subject_types = (
                    types.get(edge.subject) or inferred.get(edge.subject, (set(), ""))[0]
                )
                if not subject_types:
                    continue
                candidates: set[str] = set()
                ok = True
                for t in subject_types:
                    info = self.schema.classes.get(t)
                    pred = info.predicates.get(edge.predicate) if info else None
                    if pred is None:
                        continue
                    if not pred.objects_fully_typed():
                        ok = False
                        break
                    candidates.update(pred.object_classes)
                described = all(
                    x in self.schema.classes and self.schema.classes[x].predicates
                    for x in candidates
                )
                if not ok or not described:
                    # Objects of unknown or partly known types: say nothing about this node.
                    unsure.add(target)
                    inferred.pop(target, None)
                    continue
                if not candidates:
                    continue
                before = inferred.get(target, (set(), ""))[0]
                merged = before | candidates
                if merged != before:
                    inferred[target] = (merged, self.c(edge.predicate))
                    changed = True
            if not changed:
                break

    def check_edge(
        self, edge: _Edge, types: dict[str, set[str]], inferred: dict[str, tuple[set[str], str]]
    ) -> Issue | None:
        p = edge.predicate
        subject_types = types.get(edge.subject)
        via = ""
        if not subject_types and edge.subject in inferred:
            subject_types, via_pred = inferred[edge.subject]
            via = f" (inferred from {via_pred})"
        known_anywhere = self.schema.has_predicate(p)
        if not known_anywhere and not self.owned(p):
            return None  # a vocabulary this schema knows nothing about
        if subject_types:
            infos = [self.schema.classes.get(t) for t in subject_types]
            if any(i is None or not i.predicates for i in infos):
                return None  # a class without statistics: nothing to compare with
            if any(i is not None and p in i.predicates for i in infos):
                return None
            offered: dict[str, int] = {}
            for i in infos:
                assert i is not None
                for pred in i.predicates.values():
                    offered[pred.iri] = max(offered.get(pred.iri, 0), pred.triples or 0)
            ranked = sorted(offered, key=lambda x: (-offered[x], x))
            ranked = [x for x in ranked if x not in self.type_predicates]
            near = self.closest(p, ranked)
            listed = ", ".join(self.c(x) for x in ranked[:_LIST_LIMIT]) + (
                ", …" if len(ranked) > _LIST_LIMIT else ""
            )
            type_names = " or ".join(sorted(self.named(self.c(t)) for t in subject_types))
            hint = f" (closest: {', '.join(near)})" if near else ""
            if not known_anywhere and self.owned(p):
                kind: IssueKind = "unknown_predicate"
                what = f"{self.c(p)} is not a predicate of this endpoint{self.where}{self.namespace_note(p)}, and "
                what += f"{self.show(edge.subject)} of type {type_names}{via} cannot have it"
                elsewhere = [x for x in self.closest(p, self.same_namespace(p)) if x not in near][
                    :2
                ]
                if elsewhere:
                    hint += f" (used on other classes: {', '.join(elsewhere)})"
                    near += elsewhere
            else:
                kind = "predicate_not_on_class"
                what = f"{self.show(edge.subject)} of type {type_names}{via} has no predicate {self.c(p)}{self.where}"
            return Issue(
                kind,
                f"{what}; it has: {listed}{hint}",
                "error",
                edge.pattern.line,
                edge.pattern.column,
                tuple(near),
            )
        if known_anywhere or not self.owned(p):
            return None
        near = self.closest(p, self.same_namespace(p))
        hint = f" (closest: {', '.join(near)})" if near else ""
        return Issue(
            "unknown_predicate",
            f"{self.c(p)} is not a predicate of this endpoint{self.where}{self.namespace_note(p)}{hint}",
            "error",
            edge.pattern.line,
            edge.pattern.column,
            tuple(near),
        )

    def check_object_classes(
        self, types: dict[str, set[str]], inferred: dict[str, tuple[set[str], str]]
    ) -> list[Issue]:
        """Warn when an object cannot be what the predicate leads to from its typed subject."""
        issues: list[Issue] = []
        for edge in self.edges:
            if not edge.exact or edge.alt is not None or edge.predicate in self.type_predicates:
                continue
            subject_types = types.get(edge.subject) or inferred.get(edge.subject, (set(), ""))[0]
            if not subject_types:
                continue
            preds = [
                self.schema.classes[t].predicates.get(edge.predicate)
                for t in subject_types
                if t in self.schema.classes
            ]
            if not preds or any(p is None for p in preds):
                continue
            used = [p for p in preds if p is not None]
            if isinstance(edge.obj_term, Lit):
                issue = self.literal_mismatch(edge, edge.obj_term, used)
                if issue is not None:
                    issues.append(issue)
                continue
            object_types = types.get(edge.obj) if edge.obj else None
            if not object_types or not all(p.objects_fully_typed() for p in used):
                continue
            reachable = {oc for p in used for oc in p.object_classes}
            if not reachable & object_types:
                listed = sorted(self.c(t) for t in reachable)[:_LIST_LIMIT]
                issues.append(
                    Issue(
                        "object_class_mismatch",
                        f"{self.show(edge.obj or '')} is typed {' or '.join(sorted(self.c(t) for t in object_types))}, "
                        f"but {self.c(edge.predicate)} from {self.show(edge.subject)} leads to {', '.join(listed)}{self.where}",
                        "warning",
                        edge.pattern.line,
                        edge.pattern.column,
                        tuple(listed),
                    )
                )
        return issues

    def literal_mismatch(self, edge: _Edge, literal: Lit, used: list[Any]) -> Issue | None:
        """A literal object where the predicate only leads to resources, or to literals of another kind."""
        if all(p.objects_fully_typed() for p in used):
            targets = sorted({self.c(oc) for p in used for oc in p.object_classes})[:_LIST_LIMIT]
            what = f"resources of type {', '.join(targets)}, never to a literal such as {literal}"
        else:
            if any(p.object_classes or not p.datatypes for p in used):
                return None
            kinds = {_literal_kind(dt) for p in used for dt in p.datatypes}
            mine = _literal_kind(literal.datatype or XSD_STRING, literal.lang)
            if mine in kinds or "other" in kinds or mine == "other":
                return None
            datatypes = sorted({self.c(dt) for p in used for dt in p.datatypes})
            targets = datatypes
            what = (
                f"literals of type {', '.join(datatypes)}, not a {mine} literal such as {literal}"
            )
        return Issue(
            "object_class_mismatch",
            f"{self.c(edge.predicate)} from {self.show(edge.subject)} leads to {what}{self.where}",
            "warning",
            edge.pattern.line,
            edge.pattern.column,
            tuple(targets),
        )


XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"
_NUMERIC = {
    "integer",
    "decimal",
    "float",
    "double",
    "int",
    "long",
    "short",
    "byte",
    "nonNegativeInteger",
    "positiveInteger",
    "negativeInteger",
    "nonPositiveInteger",
    "unsignedInt",
    "unsignedLong",
    "unsignedShort",
    "unsignedByte",
}


def _literal_kind(datatype: str, lang: str | None = None) -> str:
    """A coarse kind of literal (engines compare numbers across numeric types, not across kinds)."""
    if lang or datatype in (XSD_STRING, "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"):
        return "string"
    if not datatype.startswith(XSD):
        return "other"
    local = datatype[len(XSD) :]
    if local in _NUMERIC:
        return "numeric"
    if local == "boolean":
        return "boolean"
    if local in ("date", "dateTime", "gYear", "gYearMonth", "time"):
        return "date"
    return "other"


def _dedupe(issues: list[Issue]) -> list[Issue]:
    seen: set[tuple[str, str]] = set()
    out: list[Issue] = []
    for issue in issues:
        key = (issue.kind, issue.message)
        if key not in seen:
            seen.add(key)
            out.append(issue)
    return out


__all__ = [
    "REPAIR_PREFIXES",
    "CheckReport",
    "Issue",
    "endpoint_key",
    "engine_extension",
    "validate",
]
