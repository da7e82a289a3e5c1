"""The retrieve strategy (SPARQL-LLM): decompose the question, retrieve example queries and class shapes,
generate a query, check it against the schema and fix it (at most three times, fed the validator's
messages), run it where it says it must run, fix it once more from the engine's feedback when it fails or
finds nothing, and explain the result. About one LLM call per step; no exploration of the data.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from string import Template
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from sparqlnav.answer import Answer, Status
from sparqlnav.context import EMPTY, RunContext
from sparqlnav.feedback.catalogue import Guideline, render_guidelines
from sparqlnav.feedback.checker import Feedback
from sparqlnav.feedback.eraser import StepContext
from sparqlnav.feedback.memory import Memory
from sparqlnav.graph.endpoint import Endpoint, Outcome, QueryResult, RemoteEndpoint
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import ResultTable
from sparqlnav.graph.schema import META_NAMESPACES, Schema
from sparqlnav.graph.vocab import humanise, local_name
from sparqlnav.llm import (
    Budget,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMOutputError,
    LLMReply,
    Message,
    Recorder,
    ToolCall,
    trace_recorder,
)
from sparqlnav.question.named import NamedThings, named_things
from sparqlnav.question.words import is_stopword
from sparqlnav.retrieval.embed import EmbedderUnavailable
from sparqlnav.retrieval.examples import ExamplesError
from sparqlnav.retrieval.fusion import fuse_hits, search_all
from sparqlnav.retrieval.index import IndexUnavailable, Mode, RetrievalIndex
from sparqlnav.retrieval.indexes import KGIndexes
from sparqlnav.retrieval.kg_index import KGIndex, SchemaUnavailable
from sparqlnav.retrieval.records import Doc, IndexHit
from sparqlnav.settings import Settings
from sparqlnav.sparql.check import CheckReport, endpoint_key, validate
from sparqlnav.sparql.prefixes import PrefixMap
from sparqlnav.strategies.ending import conclude, writer_view
from sparqlnav.strategies.prompts import prompt_text
from sparqlnav.tools.digest import Digests, annotated_shape, graph_notes, main_classes
from sparqlnav.tools.lookup import absent, closest_values, value_datatype
from sparqlnav.tools.toolkit import NAME_SERVICE_ERRORS, Observation, TracedEndpoint
from sparqlnav.trace import Trace

_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)
_ENDPOINT_LINE = re.compile(r"(?im)^\s*#\s*endpoint\s*:\s*<?([^\s>]+)>?\s*$")
_BARE_QUERY = re.compile(r"(?is)((?:PREFIX\s+\S*\s*<[^>]*>\s*)*(?:SELECT|ASK|CONSTRUCT|DESCRIBE)\b.*)")
# The explain step's way of saying the result may not answer the question (retrieve_explain.md asks for it).
_UNSURE_LINE = re.compile(r"(?im)^[ \t*_]*UNSURE[ \t*_]*:[ \t]*(.*?)[ \t*_]*$")
# Engine feedback worth showing when a query needs one more fix; the others speak of tools this strategy lacks.
ENGINE_GUIDELINES = ("undeclared_prefix", "syntax_error", "empty_result", "timeout", "oversized_result",
                     "refused", "engine_error", "unbound_projection", "failed_cast", "answer_shape", "absent_iri",
                     "filtered_value", "typed_value")
# Guidelines that send even a query with rows (or a false ASK) back once: its answer cannot be trusted as it is.
CLASSES_PER_WORD = 3  # a word naming properties of more classes than this (name, id) names none of them
MAIN_SHAPES = 2  # shapes shown when the question's words match no class: the biggest classes
REDO_ANSWERED = ("answer_shape", "absent_iri", "failed_cast", "filtered_value", "typed_value")


class Decomposition(BaseModel):
    """The structured output of the decomposition step."""

    sub_questions: list[str] = Field(default_factory=list)
    classes: list[str] = Field(default_factory=list)


class AllowedExamples(Protocol):
    """Which dataset examples a question may see (the eval's k-fold splits)."""

    folds: tuple[frozenset[str], ...]

    def allowed_for(self, question: str) -> frozenset[str] | None:
        """Example ids allowed for this question text; None when the text is not in the dataset."""
        ...


@dataclass(frozen=True)
class RetrieveOptions:
    """Knobs of the retrieve strategy (defaults follow SPARQL-LLM: 5–10 examples, at most 3 fixes)."""

    k_examples: int = 8
    k_shapes: int = 5  # retrieved shapes; classes the decomposition names come first
    k_ranges: int = 3  # shapes of classes met only as ranges of those shown (pv:Manager), smallest first
    k_endpoints: int = 2
    max_fixes: int = 3
    engine_fix: bool = True
    explain: bool = True
    mode: Mode = "hybrid"
    result_rows: int = 20  # rows shown to the LLM when explaining or fixing


@dataclass
class Attempt:
    """One generated query and what became of it."""

    query: str | None
    endpoint: str | None
    report: CheckReport | None = None
    result: QueryResult | None = None




def extract_query(text: str) -> tuple[str | None, str | None]:
    """The SPARQL query of a reply (the last `sparql` code block, else the last code block, else bare text)
    and the endpoint its `# endpoint:` line names."""
    blocks = _BLOCK.findall(text or "")
    tagged = [body for lang, body in blocks if lang.lower() in ("sparql", "rq")]
    body = (tagged or [body for _lang, body in blocks] or [None])[-1]
    if body is None:
        found = _BARE_QUERY.search(text or "")
        body = found.group(1) if found else None
    if body is None or not body.strip():
        return None, None
    named = _ENDPOINT_LINE.search(body)
    return body.strip(), named.group(1) if named else None


def example_block(hit: IndexHit) -> str:
    """An example for the prompt: its question, then its query with the endpoint line first."""
    query = hit.doc.content.strip()
    if hit.doc.endpoint and not _ENDPOINT_LINE.search(query):
        query = f"# endpoint: {hit.doc.endpoint}\n{query}"
    return f"- {hit.doc.title or hit.doc.text}\n\n```sparql\n{query}\n```"


def shape_block(hit: IndexHit, content: str | None = None) -> str:
    """A class shape for the prompt, with the endpoint holding it (`content` replaces the indexed shape)."""
    where = f" ({hit.doc.endpoint})" if hit.doc.endpoint else ""
    return f"- {hit.doc.title}{where}:\n\n```\n{(content or hit.doc.content).strip()}\n```"


_PNAME = re.compile(r"(?<![\w<#/:.-])([A-Za-z][\w.-]*)?:(?=[A-Za-z_])")


def _named_shapes(
    per_text: Mapping[str, Sequence[IndexHit]], classes: Sequence[str], every: Callable[[], Sequence[Doc]]
) -> list[IndexHit]:
    """For each class name, the shape whose class is called just that (`Employee` → pv:Employee): among the name's
    own hits, else among `every` shape (a class named by a word search drops, such as `Show`, is found by name)."""
    found: list[IndexHit] = []
    docs: Sequence[Doc] | None = None

    def called(doc: Doc, want: str) -> bool:
        return want in (_plain_name(local_name(str(doc.meta.get("class", "")))), _plain_name(doc.title or ""))

    for name in dict.fromkeys(c.strip() for c in classes):
        want = _plain_name(name)
        hit = [h for h in per_text.get(name, []) if called(h.doc, want)][:1]
        if not hit and want:
            docs = every() if docs is None else docs
            hit = [IndexHit(d, 0.0) for d in docs if called(d, want)][:1]
        found += hit
    return found


def _main_shapes(docs: Sequence[Doc], schema: Schema | None, k: int) -> list[IndexHit]:
    """The shapes of the `k` classes with the most instances (not the vocabulary's own: owl:Class, an ontology's
    authors): what a question whose words name no class is most likely about (relay players got "(no schema
    information)" for "which elemental creatures have a challenge rating above 10?" on a graph of one big class)."""
    def fit(doc: Doc) -> bool:
        cls = str(doc.meta.get("class", ""))
        return bool(cls) and not cls.startswith(META_NAMESPACES) and not (schema and schema.about_the_vocabulary(cls))

    def size(doc: Doc) -> int:
        found = doc.meta.get("instances")
        return int(found) if isinstance(found, int) else 0

    return [IndexHit(d, 0.0) for d in sorted(filter(fit, docs), key=size, reverse=True)[:k]]


def _plain_name(name: str) -> str:
    """A class name for comparison: lower case, letters and digits only, no plural s (`Employees` = `employee`)."""
    plain = re.sub(r"[^0-9a-z]", "", name.lower())
    return plain[:-1] if plain.endswith("s") and len(plain) > 3 else plain


def _names_words(name: str, words: Sequence[str]) -> bool:
    """Whether a class name's words (`ProductCategory`: product, category) occur in a row among `words`."""
    wanted = [_plain_name(w) for w in humanise(name).split()]
    if not wanted or not all(wanted):
        return False
    return any(words[i:i + len(wanted)] == wanted for i in range(len(words) - len(wanted) + 1))


def prefix_lines(texts: Sequence[str], prefixes: PrefixMap) -> str:
    """PREFIX lines for every known prefix the texts use (prefixed names outside <IRIs>), sorted."""
    used = {m.group(1) or "" for t in texts for m in _PNAME.finditer(re.sub(r"<[^>]*>", "", t))}
    return "\n".join(f"PREFIX {p}: <{ns}>" for p, ns in sorted(prefixes.items()) if p in used and p)


class Retrieve:
    """The retrieve strategy; one instance answers many questions (thread-safe), each KG's index opened once."""

    name = "retrieve"

    def __init__(
        self,
        llm: LLMConfig,
        options: RetrieveOptions | None = None,
        *,
        index: RetrievalIndex | None = None,
        schema: Schema | None = None,
        schemas: dict[str, Schema] | None = None,
        main_endpoint: str | None = None,
        settings: Settings | None = None,
        example_splits: AllowedExamples | None = None,
        endpoint_factory: Callable[[str], Endpoint] | None = None,
        feedback: Feedback | None = None,
    ) -> None:
        self.llm = llm
        self.options = options or RetrieveOptions()
        self.settings = settings
        self.example_splits = example_splits
        self.endpoint_factory = endpoint_factory
        self.feedback = feedback
        self._given: KGIndex | None = None
        if index is not None:
            endpoints = sorted({d.endpoint for d in index.documents() if d.endpoint} | set(schemas or {}))
            self._given = KGIndex(index, schema, dict(schemas or {}), endpoints, main_endpoint)
        self._indexes: KGIndexes | None = None  # made on first use, from the settings read then
        self.digests = Digests()  # sample values of the shapes shown, read once per class
        self._lock = threading.Lock()

    # ------------------------------------------------------------ context

    def _settings(self) -> Settings:
        if self.settings is None:
            # The registry builds strategies without settings: read them once, as the entry points do.
            self.settings = Settings.from_env()
        return self.settings

    def context(self, kg: KnowledgeGraph, trace: Trace | None = None) -> KGIndex:
        """The index and schemas for `kg`: as given, as `sparqlnav index` built them, or built now."""
        if self._given is not None:
            return self._given
        with self._lock:
            if self._indexes is None:
                settings = self._settings()
                self._indexes = KGIndexes(settings.paths.home, embedding=settings.embedding)
            indexes = self._indexes

        def announce(text: str) -> None:
            if trace is not None:
                trace.emit("info", message=text)

        return indexes.get(kg, on_build=announce)

    # ------------------------------------------------------------ run

    def run(
        self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None
    ) -> Answer:
        """Answer one question (after the earlier turns and handover in `context`, if any)."""
        run = _Run(self, question, kg, trace, context if context is not None else EMPTY)
        try:
            return run.go()
        finally:
            run.close()


@dataclass
class _Run:
    """The state of answering one question."""

    strategy: Retrieve
    question: str
    kg: KnowledgeGraph
    trace: Trace
    context: RunContext
    client: LLMClient = field(init=False)
    record: Recorder = field(init=False)
    budget: Budget = field(init=False)
    options: RetrieveOptions = field(init=False)
    messages: list[Message] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    opened: list[Endpoint] = field(default_factory=list)
    chosen: Attempt | None = None  # the attempt whose query is the answer's
    doubt: str | None = None  # why the explain step doubts the result, when it does
    named: NamedThings | Literal[False] | None = False  # what the question names (False: not looked up yet)

    def __post_init__(self) -> None:
        self.client = LLMClient(self.strategy.llm)
        self.record = trace_recorder(self.trace)  # the client reports each request it sends
        # The question's LLM time, retries included (what is left of it when a cascade ran stages before).
        self.budget = self.client.question_budget(self.context.seconds_left(self.strategy.llm.budget_s))
        self.options = self.strategy.options

    def close(self) -> None:
        self.client.close()
        for endpoint in self.opened:
            endpoint.close()

    # -- llm
    def _chat(self, messages: Sequence[Message], purpose: str) -> LLMReply:
        return self.client.chat(messages, purpose=purpose, record=self.record, budget=self.budget)

    # -- steps
    def go(self) -> Answer:
        try:
            ctx = self.strategy.context(self.kg, self.trace)
        except (SchemaUnavailable, IndexUnavailable, ExamplesError, EmbedderUnavailable) as exc:
            self.trace.emit("error", message=str(exc))
            return self.finish(None, None, "error", f"No retrieval index for {self.kg.name}: {exc}", error=str(exc))
        try:
            # The decomposition only steers which examples are found: with none in the index, relay players saw it
            # change nothing ("(no examples)" in every request), so the classes the question names stand in for it.
            parts = self.decompose(ctx) if self._has_examples(ctx) else self.classes_named(ctx)
            examples, shapes, endpoints = self.retrieve(ctx, parts)
            attempt = self.generate(ctx, examples, shapes, endpoints)
            attempt = self.check_and_fix(ctx, attempt)
            if attempt.query is None:
                return self.finish(None, None, "error", "No SPARQL query could be written for this question.",
                                   error="the model's replies held no SPARQL query")
            attempt.result = self.execute(ctx, attempt)
            if self.options.engine_fix:
                guidelines = self._engine_guidelines(attempt.query, attempt.result)
                # Rows are sent back only when their shape is wrong; the other notes ride along with it.
                if not _answered(attempt.result) or any(g.id in REDO_ANSWERED for g in guidelines):
                    attempt = self.engine_fix(ctx, attempt, guidelines)
            self.chosen = attempt
        except (LLMError, IndexUnavailable, EmbedderUnavailable) as exc:
            self.trace.emit("error", message=str(exc))
            last = self.attempts[-1] if self.attempts else None
            what = "The LLM failed" if isinstance(exc, LLMError) else "Retrieval failed"
            return self.finish(last.query if last else None, None, "error", f"{what}: {exc}", error=str(exc))
        result = attempt.result
        assert result is not None
        if not result.ok or result.table is None:
            return self.finish(attempt.query, None, "error", f"The query failed: {result.describe()}",
                               error=result.describe())
        if result.table.is_empty:
            return self.finish(attempt.query, result.table, "not_found", "The query ran but found nothing.")
        try:
            text = self.explain(attempt.query or "", result.table, attempt.endpoint)
        except LLMError as exc:
            self.trace.emit("error", message=str(exc))
            text = f"The query returned {len(result.table)} row(s) (no explanation: {exc})."
        return self.finish(attempt.query, result.table, "answered", text)

    def _has_examples(self, ctx: KGIndex) -> bool:
        """Whether the index holds an example this question may see."""
        exclude = self._excluded(ctx.index)
        return any(d.id not in exclude for d in ctx.index.documents(kinds=["example"]))

    def classes_named(self, ctx: KGIndex) -> Decomposition:
        """Without an LLM call, the classes a decomposition would name, so their shapes are shown first: the graph's
        main classes whose names are words of the question ("persons": db:person), the classes of the things and
        stored texts it names ("Marketing": pv:Department), and those whose own properties a word names ("expert":
        pv:Employee, by pv:areaOfExpertise) when at most `CLASSES_PER_WORD` classes have such a property."""
        schema = ctx.schema
        classes = main_classes(schema) if schema is not None else []
        words = [_plain_name(w) for w in re.findall(r"[A-Za-z0-9]+", self.question)]
        direct = [c for c in classes if _names_words(local_name(c), words)]
        found = self._named_things()
        things = [c for n in (found.names if found is not None else ()) for c in (
            *(c for t in n.things for c in t.classes), *(u.subject_class for u in n.values))]
        by_property: list[str] = []
        for word in dict.fromkeys(w for w in words if len(w) >= 4 and not is_stopword(w)):
            owners = [c for c in classes if schema is not None and any(
                any(part.startswith(word) for part in (_plain_name(x) for x in humanise(local_name(p)).split()))
                for p in schema.classes[c].predicates)]
            # A subclass beside its superclass (pv:Manager beside pv:Employee, both with pv:email) is one kind.
            owners = [c for c in owners if schema is None or not set(schema.superclasses.get(c, [])) & set(owners)]
            by_property += owners if len(owners) <= CLASSES_PER_WORD else []
        wanted = set(classes)
        chosen = [c for c in dict.fromkeys([*direct, *things, *by_property]) if c in wanted]
        found_names = [local_name(c) for c in chosen][: self.options.k_shapes]
        self.trace.emit("info", message="no examples in the index: the question is not decomposed"
                        + (f"; it names the classes {', '.join(found_names)}" if found_names else ""))
        return Decomposition(classes=found_names)
    def decompose(self, ctx: KGIndex) -> Decomposition:
        # The graph's own class names, so the step names `Beast` where a relay model wrote "Creature" and got no
        # Beast shape.
        names = [local_name(c) for c in main_classes(ctx.schema)][:40] if ctx.schema is not None else []
        listed = ("  This graph's classes (use their names where they fit): " + ", ".join(dict.fromkeys(names)) + ".\n"
                  if names else "")
        system = Template(prompt_text("retrieve_decompose.md")).safe_substitute(classes=listed)
        # The handover is for generation only: an earlier stage's query and doubts do not help split the question.
        messages = [Message.system(system), Message.user(self.context.without_handover().with_question(self.question))]
        try:
            found = self.client.chat_json(messages, Decomposition, repairs=1, purpose="decompose", record=self.record,
                                          budget=self.budget)
        except LLMOutputError as exc:
            # Retrieval still works with the question alone.
            self.trace.emit("info", message=f"question not decomposed: {exc}")
            return Decomposition()
        parts = found.value
        self.trace.emit("thought", text="Sub-questions: " + ("; ".join(parts.sub_questions) or "(none)")
                        + ". Classes: " + (", ".join(parts.classes) or "(none)") + ".")
        return parts

    def _excluded(self, index: RetrievalIndex) -> set[str]:
        splits = self.strategy.example_splits
        if splits is None:
            return set()
        allowed = splits.allowed_for(self.question)
        if allowed is None:
            return set()
        known = frozenset().union(*splits.folds)
        return {f"example:{i}" for i in known - allowed}

    def retrieve(self, ctx: KGIndex, parts: Decomposition) -> tuple[list[IndexHit], list[IndexHit], list[IndexHit]]:
        o = self.options
        index = ctx.index
        exclude = self._excluded(index)
        found = search_all(index, [self.question, *parts.sub_questions], k=2 * o.k_examples, kinds=["example"],
                           exclude=exclude, mode=o.mode)
        # The same query under two descriptions would only cost prompt tokens.
        seen: set[str] = set()
        examples: list[IndexHit] = []
        for hit in found:
            key = " ".join(hit.doc.content.split())
            if key not in seen and len(examples) < o.k_examples:
                seen.add(key)
                examples.append(hit)
        # One search for the shapes: each text's own hits, then fused.
        texts = [t for t in dict.fromkeys(t.strip() for t in [*parts.classes, *parts.sub_questions, self.question]) if t]
        per_text = dict(zip(texts, index.search_many(texts, k=o.k_shapes, kinds=["shape"], mode=o.mode), strict=True))
        shapes = fuse_hits(list(per_text.values()), k=o.k_shapes)
        # A class the decomposition names outright is shown whatever the fusion ranked (a relay model listed
        # "Employee" for "Who is our Sensor expert?" and got no pv:Employee shape).
        named = _named_shapes(per_text, parts.classes, lambda: index.documents(kinds=["shape"]))
        shapes = list({h.doc.id: h for h in [*named, *shapes]}.values())[: max(o.k_shapes, len(named))]
        if not shapes:  # no class matched the question's words: the graph's main classes, not "(no schema information)"
            shapes = _main_shapes(index.documents(kinds=["shape"]), ctx.schema, MAIN_SHAPES)
        endpoints = search_all(index, [self.question], k=o.k_endpoints, kinds=["endpoint"], mode=o.mode)
        self.trace.emit("action", tool="retrieve", arguments={"texts": [self.question, *parts.sub_questions],
                                                              "classes": parts.classes, "excluded": len(exclude)})
        lines = ["Examples:"] + [f"  {h.doc.title or h.doc.text}" + (f" [{h.doc.endpoint}]" if h.doc.endpoint else "")
                                 for h in examples]
        lines += ["Classes:"] + [f"  {h.doc.title} ({h.doc.meta.get('class', h.doc.id)})" for h in shapes]
        self.trace.emit("observation", text="\n".join(lines), examples=[h.doc.id for h in examples],
                        shapes=[h.doc.id for h in shapes])
        return examples, shapes, endpoints

    def _endpoints_text(self, ctx: KGIndex, endpoint_hits: Sequence[IndexHit]) -> str:
        main = ctx.main_endpoint or self.kg.endpoint.url
        lines = [f"- The question is asked of {self.kg.name}; send queries to {main}"
                 + (" unless the data lives elsewhere." if ctx.endpoints else ".")]
        others = [e for e in ctx.endpoints if endpoint_key(e) != endpoint_key(main)]
        if others:
            lines.append("- Other endpoints the examples use: " + ", ".join(others))
        for h in endpoint_hits:
            if (h.doc.content and h.doc.endpoint and endpoint_key(h.doc.endpoint) != endpoint_key(main)
                    and h.doc.endpoint != self.kg.name):  # the graph asked of, described once above
                lines.append(f"- {h.doc.endpoint}: {h.doc.content}")
        return "\n".join(lines)

    def _shape_texts(self, ctx: KGIndex, shapes: list[IndexHit]) -> list[str]:
        """The retrieved shapes with real sample values, plus the shapes of classes they point to (ranges)."""
        schema = self._schema(ctx)
        main = ctx.main_endpoint
        blocks: list[str] = []
        shown: set[str] = set()
        ranges: list[str] = []
        for h in shapes:
            cls = str(h.doc.meta.get("class", ""))
            own = schema is not None and cls in schema.classes and (
                h.doc.endpoint is None or (main is not None and endpoint_key(h.doc.endpoint) == endpoint_key(main))
            )
            if not own or schema is None:
                blocks.append(shape_block(h))
                continue
            if cls.startswith(META_NAMESPACES) or schema.about_the_vocabulary(cls):
                continue  # owl:Ontology, owl:Class, the ontology's authors …: bookkeeping, not the data asked about
            shown.add(cls)
            blocks.append(shape_block(h, self._shape(schema, cls)))
            ranges += [o for p in schema.classes[cls].predicates.values() for o in p.object_classes]
        extra = [
            c
            for c in dict.fromkeys(ranges)
            if schema is not None and c in schema.classes and c not in shown and not c.startswith(META_NAMESPACES)
            and not schema.about_the_vocabulary(c)
        ]
        # Small shapes first: classes met only as a range are often small (pv:Manager) and cheap to show.
        extra.sort(key=lambda c: len(schema.classes[c].predicates) if schema is not None else 0)
        for cls in extra[: self.options.k_ranges]:
            assert schema is not None
            text = self._shape(schema, cls)
            blocks.append(f"- {schema.compact(cls)} (a range of the classes above):\n\n```\n{text}\n```")
        return blocks

    def _shape(self, schema: Schema, cls: str) -> str:
        digests = self.strategy.digests
        return annotated_shape(schema, cls, digests.samples(self.kg, cls), digests.get(self.kg).probes,
                               digests.members(self.kg, cls))

    def _schema(self, ctx: KGIndex) -> Schema | None:
        """The index's schema with the prefixes the digest invents for namespaces the graph does not declare
        (BESTIARY's `…/ontology#`, CK25's instances), so shapes and samples are short and the prompt declares them."""
        schema = ctx.schema
        if schema is None:
            return None
        invented = self.strategy.digests.get(self.kg).invented
        if not invented:
            return schema
        return dataclasses.replace(schema, prefixes={**invented, **schema.prefixes})

    def generate(self, ctx: KGIndex, examples: list[IndexHit], shapes: list[IndexHit], endpoints: list[IndexHit]) -> Attempt:
        example_texts = [example_block(h) for h in examples]
        shape_texts = self._shape_texts(ctx, shapes)
        schema = self._schema(ctx)
        known = schema.prefix_map.merged(dict(self.kg.prefixes.items())) if schema else self.kg.prefixes
        graph = self._graph_text(schema, known, shape_texts)
        named = self._named_text(known)
        endpoint_lines = self._endpoints_text(ctx, endpoints)
        # Rules and sections about examples and other endpoints only when there are some: relay runs without
        # examples sent "(no examples)" and the rule to follow them in every request.
        # What the prompt says it rests on is what it carries: with no example retrieved, relay players were told
        # to use "the examples" that never came (issue 37).
        system = Template(prompt_text("retrieve_generate.md")).safe_substitute(
            sources="reference examples and schema information retrieved for this question" if example_texts
            else "the schema information below, computed from the graph",
            where_terms="the examples or in the schema below" if example_texts else "the schema below",
            prefix_users="the examples and the schema use" if example_texts else "the schema uses",
            endpoints=endpoint_lines,
            follow_examples=prompt_text("rule_follow_examples.md") if example_texts else "",
            federation=prompt_text("rule_federation.md") if "\n" in endpoint_lines else "",
            examples=Template(prompt_text("retrieve_examples.md")).safe_substitute(
                examples="\n\n".join(example_texts)) if example_texts else "",
            shapes="\n\n".join(shape_texts) or "(no schema information)",
            prefixes=prefix_lines([*example_texts, *shape_texts, graph, named], known) or "# (none needed)",
            graph=graph,
            named=named,
        )
        self.messages = [Message.system(system), Message.user(self.context.with_question(self.question))]
        return self._ask("generate")

    def _named_text(self, prefixes: PrefixMap) -> str:
        """What the question names, looked up in the graph (its queries traced), as a prompt block: a writer without
        lookup tools otherwise guesses identifiers from the pattern of a sample value."""
        found = self._named_things()
        lines = found.lines(prefixes) if found is not None else []
        return Template(prompt_text("retrieve_named.md")).safe_substitute(names="\n".join(lines)) if lines else ""

    def _named_things(self) -> NamedThings | None:
        """What the question names, looked up once (a traced step); None when the name service failed."""
        if self.named is not False:
            return self.named
        self.trace.emit("action", tool="resolve_names", arguments={"question": self.question})
        try:
            found = named_things(self.kg, self.question,
                                 endpoint=TracedEndpoint(self.kg.endpoint, self.trace, purpose="lookup"))
        except NAME_SERVICE_ERRORS as exc:
            self.trace.emit("observation", text=f"names not looked up: {exc}", named=[])
            self.named = None
            return None
        lines = found.lines(self.kg.prefixes)
        self.trace.emit("observation", text="\n".join(lines) or "(no names in the question)", named=found.to_json())
        self.named = found
        return found

    def _graph_text(self, schema: Schema | None, prefixes: PrefixMap, shape_texts: Sequence[str]) -> str:
        """What the digest knows of the whole graph (no label property, property groups), as a prompt block."""
        if schema is None:
            return ""
        shown = "\n".join(shape_texts)
        properties = [p for p in schema.predicates if prefixes.compact(p) in shown]
        notes = graph_notes(self.strategy.digests.get(self.kg), prefixes, properties)
        return Template(prompt_text("retrieve_graph.md")).safe_substitute(notes="\n".join(notes)) if notes else ""

    def _ask(self, purpose: str) -> Attempt:
        reply = self._chat(self.messages, purpose)
        self.messages.append(reply.as_message())
        query, endpoint = extract_query(reply.text)
        attempt = Attempt(query, endpoint)
        self.attempts.append(attempt)
        if query is not None:
            self.trace.emit("thought", text=f"Query ({purpose}):\n{query}", purpose=purpose)
        return attempt

    def _check(self, ctx: KGIndex, attempt: Attempt) -> CheckReport:
        assert attempt.query is not None
        target = self._target_endpoint(ctx, attempt.endpoint)[1]
        report = validate(attempt.query, ctx.schema_for(target), prefixes=dict(self.kg.prefixes.items()),
                          schemas_by_endpoint=self._service_schemas(ctx, target))
        attempt.report = report
        self.trace.emit("feedback", source="validator", ok=report.ok, text=report.text(),
                        issues=[i.to_dict() for i in report.issues])
        if report.ok:
            attempt.query = report.query  # with repaired prefixes
        return report

    def _service_schemas(self, ctx: KGIndex, target: str | None) -> dict[str, Schema]:
        out = dict(ctx.schemas)
        if ctx.schema is not None and target is not None:
            # A SERVICE back to the KG itself is checked against the KG's schema.
            out[ctx.main_endpoint or self.kg.endpoint.url] = ctx.schema
        return out

    def check_and_fix(self, ctx: KGIndex, attempt: Attempt) -> Attempt:
        for fix in range(self.options.max_fixes + 1):
            if attempt.query is None:
                problem = "Your reply contained no SPARQL query."
            else:
                report = self._check(ctx, attempt)
                if report.ok:
                    return attempt
                problem = "\n".join(f"- {i.message}" + (f" (line {i.line})" if i.line else "")
                                    for i in report.issues if i.severity == "error")
            if fix == self.options.max_fixes:
                break
            self.messages.append(Message.user(Template(prompt_text("retrieve_fix.md")).safe_substitute(issues=problem)))
            attempt = self._ask(f"fix {fix + 1}")
        if attempt.query is None:
            # Fall back to the last query that was written at all.
            attempt = next((a for a in reversed(self.attempts) if a.query is not None), attempt)
        elif attempt.report is not None and not attempt.report.ok:
            self.trace.emit("info", message="the query still has schema issues after the last fix; running it anyway")
        return attempt

    def _target_endpoint(self, ctx: KGIndex, named: str | None) -> tuple[Endpoint, str | None]:
        """Where a query runs: the KG unless it names another endpoint the index knows."""
        if named is None:
            return self.kg.endpoint, None
        key = endpoint_key(named)
        own = {endpoint_key(u) for u in (ctx.main_endpoint, self.kg.endpoint.url) if u}
        if key in own:
            return self.kg.endpoint, None
        known = next((e for e in [*ctx.endpoints, *ctx.schemas] if endpoint_key(e) == key), None)
        if known is None:
            self.trace.emit("info", message=f"the query names {named}, which no example or schema mentions: "
                            f"running it on {self.kg.name} instead")
            return self.kg.endpoint, None
        for endpoint in self.opened:
            if endpoint_key(endpoint.url) == key:
                return endpoint, known
        factory = self.strategy.endpoint_factory or (lambda url: self._remote(url, ctx))
        endpoint = factory(known)
        self.opened.append(endpoint)
        return endpoint, known

    def _remote(self, url: str, ctx: KGIndex) -> Endpoint:
        settings = self.strategy._settings()
        # Federated examples name their SERVICE endpoints: those may be called from the target too.
        return RemoteEndpoint(url, limits=settings.limits, http=settings.remote.http(),
                              allowed_services=[*settings.remote.allowed_services, *ctx.endpoints])

    def execute(self, ctx: KGIndex, attempt: Attempt) -> QueryResult:
        assert attempt.query is not None
        endpoint, url = self._target_endpoint(ctx, attempt.endpoint)
        attempt.endpoint = url
        return TracedEndpoint(endpoint, self.trace).query(attempt.query)

    def engine_fix(self, ctx: KGIndex, attempt: Attempt, guidelines: Sequence[Guideline]) -> Attempt:
        """Send the query back once with what the engine (or the answer-shape check) said; keep the better."""
        result = attempt.result
        assert result is not None and attempt.query is not None
        for g in guidelines:
            self.trace.emit("feedback", id=g.id, source=g.source, text=g.text)
        details = render_guidelines(guidelines) or result.message
        if any(g.id == "absent_iri" for g in guidelines):
            outcome = "matched nothing, over identifiers the graph does not have"
        elif any(g.id == "filtered_value" for g in guidelines):
            outcome = "matched nothing: a text it compares with is not spelled as stored"
        elif any(g.id == "typed_value" for g in guidelines):
            outcome = "matched nothing: it compares typed values (dates, numbers) with plain text"
        elif any(g.id == "failed_cast" for g in guidelines):
            outcome = "returned no value: a cast in it failed"
        elif _answered(result):
            outcome = f"returned {len(result.table or ())} row(s) that do not fit the question"
        elif result.outcome in (Outcome.EMPTY, Outcome.OK):
            outcome = "returned no rows"
        else:
            outcome = f"failed ({result.describe()})"
        where = attempt.endpoint or self.kg.name
        self.messages.append(Message.user(Template(prompt_text("retrieve_engine_fix.md")).safe_substitute(
            endpoint=where, outcome=outcome, details=details, question=self.question)))
        retry = self._ask("engine fix")
        if retry.query is None:
            return attempt
        report = self._check(ctx, retry)
        if not report.ok:
            self.trace.emit("info", message="the engine fix has schema issues; running it anyway")
        retry.result = self.execute(ctx, retry)
        # Keep the retry unless it did worse than the first query (rows of the wrong shape beat no rows).
        if _answered(retry.result):
            return retry
        if _answered(result):
            return attempt
        if not result.ok or retry.result.ok:
            return retry
        return attempt

    def _engine_guidelines(self, query: str, result: QueryResult) -> list[Guideline]:
        feedback = self.strategy.feedback or Feedback()
        self.strategy.feedback = feedback
        memory = Memory(prefixes=self.kg.prefixes, vocab=self.kg.vocab)
        text = result.table.to_markdown(self.kg.prefixes) if result.table is not None else result.describe()
        ctx = StepContext(memory=memory, call=ToolCall(id="retrieve", name="execute_sparql", arguments={"query": query}),
                          query=query, observation=Observation(text, result, ok=result.ok), result=result,
                          question=self.question, absent_of=functools.partial(absent, self.kg),
                          values_of=functools.partial(closest_values, self.kg),
                          datatype_of=functools.partial(value_datatype, self.kg))
        return [g for g in feedback.check(ctx, "after") if g.id in ENGINE_GUIDELINES]

    def explain(self, query: str, table: ResultTable, endpoint: str | None) -> str:
        if not self.options.explain:
            return f"The query returned {len(table)} row(s)." if not table.is_boolean else f"The answer is {'yes' if table.boolean else 'no'}."
        shown = writer_view(table, self.kg, rows=max(1, self.options.result_rows // 2), labelled=endpoint is None)
        user = f"{self.context.without_handover().with_question(self.question)}\n\nSPARQL:\n{query}\n\nResult:\n{shown}"
        reply = self._chat([Message.system(prompt_text("retrieve_explain.md")), Message.user(user)], "explain")
        text, self.doubt = split_doubt(reply.text)
        if self.doubt is not None:
            self.trace.emit("feedback", source="explain", ok=False, text=f"The model is unsure: {self.doubt}")
        return text

    def finish(self, sparql: str | None, table: ResultTable | None, status: Status, text: str,
               *, error: str | None = None) -> Answer:
        # One per fix asked for, however many requests (retries) it took.
        fixes = len({p for e in self.trace.of_kind("llm_call") if (p := str(e.data.get("purpose", ""))).startswith("fix")})
        last = self.attempts[-1] if self.attempts else None
        extra: dict[str, Any] = {"fixes": fixes, "endpoint": last.endpoint if last else None}
        chosen = self.chosen or last
        if chosen is not None and chosen.report is not None and not chosen.report.ok:
            # Left after the fix loop: a cascade reads them as a reason not to trust the answer.
            extra["validator_issues"] = [i.message for i in chosen.report.issues if i.severity == "error"]
        if self.doubt is not None:
            extra["unsure"] = self.doubt
        return conclude(
            self.trace,
            question=self.question,
            strategy="retrieve",
            sparql=sparql,
            results=table,
            text=text,
            status=status,
            error=error,
            extra=extra,
        )


def split_doubt(reply: str) -> tuple[str, str | None]:
    """The explanation without its `UNSURE: …` line, and that line's reason (None when the model is sure)."""
    found = _UNSURE_LINE.search(reply or "")
    if found is None:
        return (reply or "").strip(), None
    text = (reply[: found.start()] + reply[found.end() :]).strip()
    return text, found.group(1).strip() or "no reason given"


def _answered(result: QueryResult | None) -> bool:
    return result is not None and result.outcome is Outcome.OK and result.table is not None and not result.table.is_empty


def create(llm: LLMConfig | None, **options: Any) -> Retrieve:
    """Build the retrieve strategy: options are RetrieveOptions fields plus `index`, `schema`, `schemas`,
    `main_endpoint`, `settings`, `example_splits`, `endpoint_factory` and `feedback`."""
    if llm is None:
        raise ValueError("the retrieve strategy needs an LLM (set OPENAI_BASE_URL and SPARQLNAV_LLM_MODEL)")
    fields = {f.name for f in dataclasses.fields(RetrieveOptions)}
    extra = {"index", "schema", "schemas", "main_endpoint", "settings", "example_splits", "endpoint_factory", "feedback"}
    unknown = set(options) - fields - extra
    if unknown:
        raise TypeError(f"unknown retrieve options: {', '.join(sorted(unknown))}")
    knobs = RetrieveOptions(**{k: v for k, v in options.items() if k in fields})
    return Retrieve(llm, knobs, **{k: v for k, v in options.items() if k in extra})


__all__ = ["AllowedExamples", "Decomposition", "Retrieve", "RetrieveOptions", "create", "extract_query", "split_doubt"]
