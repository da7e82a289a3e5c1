"""The hybrid strategy (SPAGHETTI): evidence from four sources gathered in parallel, then one answer citing them.

(a) the KG path: another strategy (default `auto`) answers through `run_question` on the same trace, and its
query, rows and answer become one statement "the KG says …"; (b) the top passages and (c) the top tables and
infoboxes from the documents indexed beside the graph, each reduced by the LLM to what bears on the question
(or dropped); (d) the LLM's own answer split into atomic claims, each kept only when the retrieved evidence
supports it. A failing source is reported (trace `error` event, `Answer.extra["failed"]`) and the others still
answer. One prompt combines the evidence; `Answer.extra["evidence"]` lists every item with whether it was cited.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from sparqlnav.answer import Answer, Strategy, run_question
from sparqlnav.context import EMPTY, RunContext
from sparqlnav.errors import SparqlnavError
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.results import shown_labels
from sparqlnav.llm import (
    Budget,
    LLMClient,
    LLMConfig,
    LLMError,
    Message,
    Recorder,
    trace_recorder,
)
from sparqlnav.retrieval.index import Mode, RetrievalIndex
from sparqlnav.retrieval.indexes import KGIndexes, index_documents, index_errors
from sparqlnav.retrieval.records import DOCUMENT_KINDS, DocKind, IndexHit
from sparqlnav.settings import Settings
from sparqlnav.strategies.prompts import prompt_text
from sparqlnav.trace import Trace

Source = Literal["kg", "text", "tables", "claims"]
SOURCES: tuple[Source, ...] = ("kg", "text", "tables", "claims")
EvidenceKind = Literal["kg", "text", "table", "infobox", "claim"]
IRRELEVANT = "IRRELEVANT"
_CITE = re.compile(r"\[(E\d+)\]")
_SHORT_LINE = re.compile(r"(?im)^[ \t*_]*short answer[ \t*_]*:[ \t*_]*(.*?)[ \t*_]*$\n?")
KG_ROWS = 10  # rows of the KG result shown in its evidence statement


class HybridError(SparqlnavError):
    """A source of evidence that could not be used (no documents, a failed KG path)."""


@dataclass(frozen=True)
class HybridOptions:
    """Knobs of the hybrid strategy: which sources to use (`--sources`), how much to retrieve, the KG strategy."""

    sources: tuple[Source, ...] = SOURCES
    kg_strategy: str = "auto"
    k_passages: int = 4
    k_tables: int = 3
    k_verify: int = 3  # evidence retrieved per claim to check it
    kg_deadline_s: float = 180.0  # the KG path is abandoned (and reported) after this long
    mode: Mode = "hybrid"


@dataclass
class Evidence:
    """One item of evidence: its kind, where it comes from (`ref`), what it says, and whether the answer cited it."""

    id: str
    kind: EvidenceKind
    ref: str
    text: str
    used: bool = False
    source: str = ""  # the full text it was reduced from (a passage, a table), for the UI

    def to_json(self) -> dict[str, Any]:
        """The `Answer.extra["evidence"]` item."""
        return {"id": self.id, "kind": self.kind, "ref": self.ref, "text": self.text, "used": self.used,
                "source": self.source}


class Claims(BaseModel):
    """The structured output of the claims step."""

    answer: str = ""
    claims: list[str] = Field(default_factory=list)


class ClaimVerdict(BaseModel):
    """Whether one claim is supported, and by which evidence ids."""

    claim: int
    supported: bool
    evidence: list[str] = Field(default_factory=list)


class Verdicts(BaseModel):
    """The structured output of the verification step."""

    verdicts: list[ClaimVerdict] = Field(default_factory=list)


def demo_docs() -> Path:
    """The bundled documents beside the demo KG."""
    return Path(str(resources.files("sparqlnav") / "data" / "demo" / "docs"))


def parse_sources(text: str) -> tuple[Source, ...]:
    """`kg,text,tables,claims` (any subset, any order) as a tuple; raises ValueError on an unknown name."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SOURCES]
    if unknown or not names:
        raise ValueError(f"unknown source(s) {', '.join(unknown) or '(none)'}: choose from {', '.join(SOURCES)}")
    return tuple(s for s in SOURCES if s in names)


class Hybrid:
    """The hybrid strategy; one instance answers many questions (thread-safe), each KG's index opened once."""

    name = "hybrid"

    def __init__(
        self,
        llm: LLMConfig,
        options: HybridOptions | None = None,
        *,
        index: RetrievalIndex | None = None,
        kg_strategy: Strategy | None = None,
        settings: Settings | None = None,
        docs: Sequence[Path] | None = None,
    ) -> None:
        self.llm = llm
        self.options = options or HybridOptions()
        self.settings = settings
        self.docs = list(docs) if docs is not None else None
        self._index = index
        self._kg_strategy = kg_strategy
        self._indexes: KGIndexes | None = None
        self._prepared: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def _settings(self) -> Settings:
        if self.settings is None:
            # The registry builds strategies without settings: read them once, as the entry points do.
            self.settings = Settings.from_env()
        return self.settings

    def kg_strategy(self) -> Strategy:
        """The strategy of the KG path (made on first use)."""
        with self._lock:
            if self._kg_strategy is None:
                from sparqlnav.strategies import make_strategy

                self._kg_strategy = make_strategy(self.options.kg_strategy, self.llm, settings=self._settings())
            return self._kg_strategy

    def index(self, kg: KnowledgeGraph, trace: Trace) -> RetrievalIndex:
        """The KG's retrieval index with its documents: as given, as `sparqlnav index --docs` built it, or (the
        demo KG, or `docs` given) built now."""
        if self._index is not None:
            return self._index
        with self._lock:
            if self._indexes is None:
                settings = self._settings()
                self._indexes = KGIndexes(settings.paths.home, embedding=settings.embedding)
            indexes = self._indexes
        def announce(text: str) -> None:
            trace.emit("info", message=text)

        ctx = indexes.get(kg, on_build=announce)
        key = (kg.name, kg.description)
        with self._lock:
            if key not in self._prepared:
                docs = self.docs if self.docs is not None else ([demo_docs()] if kg.name == "demo" else [])
                if docs and not ctx.index.documents(DOCUMENT_KINDS):
                    trace.emit("info", message=f"no documents indexed for {kg.name} yet: indexing "
                               + ", ".join(str(p) for p in docs))
                    index_documents(ctx, kg, self._settings().paths.home, docs)
                self._prepared.add(key)
        return ctx.index

    def run(self, question: str, kg: KnowledgeGraph, trace: Trace, context: RunContext | None = None) -> Answer:
        """Answer one question from the KG, the documents and checked claims."""
        run = _Run(self, question, kg, trace, context if context is not None else EMPTY)
        try:
            return run.go()
        finally:
            run.close()


@dataclass
class _Run:
    """The state of answering one question."""

    strategy: Hybrid
    question: str
    kg: KnowledgeGraph
    trace: Trace
    context: RunContext
    client: LLMClient = field(init=False)
    record: Recorder = field(init=False)
    budget: Budget = field(init=False)
    evidence: list[Evidence] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    kg_answer: Answer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _index: RetrievalIndex | None = None
    _index_error: str | None = None
    _index_once: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.client = LLMClient(self.strategy.llm)
        self.record = trace_recorder(self.trace)
        self.budget = self.client.question_budget(self.context.seconds_left(self.strategy.llm.budget_s))

    def close(self) -> None:
        self.client.close()

    # -- shared pieces
    def _add(self, kind: EvidenceKind, ref: str, text: str, source: str = "") -> Evidence:
        with self._lock:
            item = Evidence(f"E{len(self.evidence) + 1}", kind, ref, text.strip(), source=source)
            self.evidence.append(item)
        return item

    def _fail(self, branch: str, message: str) -> None:
        with self._lock:
            self.failed[branch] = message
        self.trace.emit("error", branch=branch, message=f"{branch}: {message}")

    def _docs(self) -> RetrievalIndex:
        with self._index_once:
            if self._index is None and self._index_error is None:
                try:
                    self._index = self.strategy.index(self.kg, self.trace)
                except index_errors() as exc:
                    self._index_error = f"no document index: {exc}"
            if self._index is None:
                raise HybridError(self._index_error or "no document index")
            return self._index

    def _retrieve(self, text: str, kinds: Sequence[DocKind], k: int) -> list[IndexHit]:
        index = self._docs()
        hits = index.search(text, k=k, kinds=kinds, mode=self.strategy.options.mode)
        if not hits and not index.documents(kinds):
            raise HybridError(f"no {'/'.join(kinds)} documents are indexed for {self.kg.name} "
                              "(add them with `sparqlnav index --docs PATH`)")
        return hits

    def _chat(self, system: str, user: str, purpose: str) -> str:
        messages = [Message.system(system), Message.user(user)]
        return self.client.chat(messages, purpose=purpose, record=self.record, budget=self.budget).text.strip()

    # -- the run
    def go(self) -> Answer:
        sources = self.strategy.options.sources
        self.trace.emit("thought", text="Gathering evidence from: " + ", ".join(sources) + ".")
        branches: dict[str, Callable[[], None]] = {
            "kg": self.kg_path, "text": self.text_path, "tables": self.table_path, "claims": self.claims_path,
        }
        expected: tuple[type[Exception], ...] = (HybridError, LLMError, *index_errors())
        pool = ThreadPoolExecutor(max_workers=len(sources), thread_name_prefix="hybrid")
        try:
            futures: dict[str, Future[None]] = {s: pool.submit(branches[s]) for s in sources}
            for name, future in futures.items():
                try:
                    future.result(timeout=self.strategy.options.kg_deadline_s if name == "kg" else None)
                except FutureTimeout:
                    self._fail(name, f"no answer within {self.strategy.options.kg_deadline_s:g} s")
                except expected as exc:
                    self._fail(name, str(exc))
        finally:
            # A KG path past its deadline finishes on its own; its late events are marked by the error above.
            pool.shutdown(wait=False, cancel_futures=True)
        for item in self.evidence:
            self.trace.emit("evidence", id=item.id, type=item.kind, ref=item.ref, text=item.text)
        return self.combine()

    def kg_path(self) -> None:
        sub = self.strategy.kg_strategy()
        answer = run_question(sub, self.question, self.kg, self.trace, self.context or None)
        self.kg_answer = answer
        if answer.status == "error":
            raise HybridError(f"the {sub.name} strategy failed: {answer.error or answer.text}")
        table = answer.results
        if table is None or (not table.is_boolean and table.is_empty):
            # Finding nothing is an answer of the KG, not a failure of the path: it just gives no evidence.
            self.trace.emit("observation", branch="kg", text=f"the {sub.name} strategy found nothing ({answer.status})")
            return
        if table.is_boolean:
            shown = "yes" if table.boolean else "no"
        else:
            labels = shown_labels(table, self.kg.names, head=KG_ROWS, tail=0)
            shown = table.to_markdown(self.kg.prefixes, labels, head=KG_ROWS, tail=0)
        statement = f"The knowledge graph ({self.kg.name}) says the answer is: {answer.text.strip()}\nResult:\n{shown}"
        self._add("kg", f"kg:{self.kg.name}", statement, source=answer.sparql or "")

    def _reduce_hits(self, hits: Sequence[IndexHit], branch: str) -> None:
        system = prompt_text("hybrid_reduce.md")

        def reduce(hit: IndexHit) -> tuple[IndexHit, str]:
            user = f"Question: {self.question}\n\nSource ({hit.doc.kind}, {hit.doc.title}):\n{hit.doc.content}"
            return hit, self._chat(system, user, f"reduce {hit.doc.kind}")

        with ThreadPoolExecutor(max_workers=max(1, len(hits)), thread_name_prefix=f"hybrid-{branch}") as pool:
            reduced = list(pool.map(reduce, hits))
        kept = 0
        for hit, text in reduced:
            if not text or text.strip().rstrip(".").upper() == IRRELEVANT:
                continue
            kind: EvidenceKind = "text" if hit.doc.kind == "passage" else ("infobox" if hit.doc.kind == "infobox" else "table")
            self._add(kind, str(hit.doc.meta.get("ref", hit.doc.id)), text, source=hit.doc.content)
            kept += 1
        self.trace.emit("observation", branch=branch,
                        text=f"{kept} of {len(hits)} retrieved {branch} item(s) bear on the question",
                        refs=[str(h.doc.meta.get("ref", h.doc.id)) for h in hits])

    def text_path(self) -> None:
        self._reduce_hits(self._retrieve(self.question, ["passage"], self.strategy.options.k_passages), "text")

    def table_path(self) -> None:
        self._reduce_hits(self._retrieve(self.question, ["table", "infobox"], self.strategy.options.k_tables), "tables")

    def claims_path(self) -> None:
        messages = [Message.system(prompt_text("hybrid_claims.md")), Message.user(self.context.with_question(self.question))]
        found = self.client.chat_json(messages, Claims, repairs=1, purpose="claims", record=self.record,
                                      budget=self.budget).value
        claims = [c.strip() for c in found.claims if c.strip()][:5]
        self.trace.emit("thought", branch="claims", text=f"From memory: {found.answer}", claims=claims)
        if not claims:
            return
        # Each claim is checked against documents retrieved for it (and for the question).
        index = self._docs()
        lists = index.search_many([self.question, *claims], k=self.strategy.options.k_verify,
                                  kinds=list(DOCUMENT_KINDS), mode=self.strategy.options.mode)
        seen: dict[str, IndexHit] = {}
        for hits in lists:
            for hit in hits:
                seen.setdefault(hit.doc.id, hit)
        items = list(seen.values())
        if not items:
            raise HybridError("no documents to check the claims against")
        labels = {f"D{n}": h for n, h in enumerate(items, start=1)}
        shown = "\n\n".join(f"[{label}] ({h.doc.kind}, {h.doc.title})\n{h.doc.content}" for label, h in labels.items())
        listed = "\n".join(f"{n}. {c}" for n, c in enumerate(claims, start=1))
        user = f"Question: {self.question}\n\nClaims:\n{listed}\n\nEvidence:\n{shown}"
        verdicts = self.client.chat_json([Message.system(prompt_text("hybrid_verify.md")), Message.user(user)], Verdicts,
                                         repairs=1, purpose="verify", record=self.record, budget=self.budget).value
        supported = {v.claim: v for v in verdicts.verdicts if v.supported}
        for n, claim in enumerate(claims, start=1):
            verdict = supported.get(n)
            refs = [str(labels[e].doc.meta.get("ref", labels[e].doc.id)) for e in (verdict.evidence if verdict else [])
                    if e in labels]
            if verdict is None or not refs:
                # Unchecked claims are dropped: memory alone is not evidence.
                self.trace.emit("feedback", source="verification", ok=False, text=f"claim dropped: {claim}")
                continue
            self.trace.emit("feedback", source="verification", ok=True, text=f"claim kept: {claim}", refs=refs)
            self._add("claim", "claim:" + ",".join(refs), claim, source="\n\n".join(
                labels[e].doc.content for e in verdict.evidence if e in labels))

    def combine(self) -> Answer:
        kg_answer = self.kg_answer
        sparql = kg_answer.sparql if kg_answer is not None else None
        results = kg_answer.results if kg_answer is not None and kg_answer.status != "error" else None
        if not self.evidence:
            text = "No source gave evidence for this question."
            return self.finish(text, "not_found" if not self.failed else "error", sparql, results,
                               error="; ".join(f"{k}: {v}" for k, v in self.failed.items()) or None)
        listed = "\n\n".join(f"[{e.id}] ({e.kind}, {e.ref})\n{e.text}" for e in self.evidence)
        missing = [f"{k} ({v})" for k, v in self.failed.items()]
        note = f"\n\nSources that failed: {'; '.join(missing)}." if missing else ""
        user = f"{self.context.with_question(self.question)}\n\nEvidence:\n{listed}{note}"
        try:
            text = self._chat(prompt_text("hybrid_combine.md"), user, "combine")
        except LLMError as exc:
            self._fail("combine", str(exc))
            return self.finish(f"The answer could not be written: {exc}", "error", sparql, results, error=str(exc))
        text, short = split_short_answer(text)
        known = {e.id: e for e in self.evidence}
        cited = set(_CITE.findall(text))
        unknown = sorted(cited - set(known))
        if unknown:
            # A citation of nothing would send a reader to no source: it is removed and reported.
            text = _CITE.sub(lambda m: m.group(0) if m.group(1) in known else "", text)
            self.trace.emit("info", message=f"citations of unknown evidence removed: {', '.join(unknown)}")
        for ident in cited & set(known):
            known[ident].used = True
        return self.finish(text, "answered", sparql, results, short=short)

    def finish(self, text: str, status: Any, sparql: str | None, results: Any, *, error: str | None = None,
               short: str | None = None) -> Answer:
        self.trace.emit("answer", text=text, status=status, sparql=sparql,
                        evidence=[e.id for e in self.evidence if e.used], failed=dict(self.failed))
        return Answer(
            question=self.question, strategy="hybrid", sparql=sparql, results=results, text=text, trace=self.trace,
            status=status, error=error,
            extra={"evidence": [e.to_json() for e in self.evidence], "failed": dict(self.failed),
                   "sources": list(self.strategy.options.sources),
                   **({"short_answer": short} if short else {})},
        )


def split_short_answer(reply: str) -> tuple[str, str | None]:
    """The combiner's answer without its `Short answer: …` line, and that line's words (citations removed)."""
    found = _SHORT_LINE.search(reply or "")
    if found is None:
        return reply, None
    short = " ".join(_CITE.sub(" ", found.group(1)).split()).strip(" .")
    return (reply[: found.start()] + reply[found.end():]).strip(), short or None


def create(llm: LLMConfig | None, **options: Any) -> Hybrid:
    """Build the hybrid strategy: options are HybridOptions fields (`sources` also as "kg,text,…") plus `index`,
    `kg_strategy` (a Strategy), `settings` and `docs` (paths to index when the KG has no documents yet)."""
    if llm is None:
        raise ValueError("the hybrid strategy needs an LLM (set OPENAI_BASE_URL and SPARQLNAV_LLM_MODEL)")
    import dataclasses

    fields = {f.name for f in dataclasses.fields(HybridOptions)}
    extra = {"index", "kg_strategy", "settings", "docs"}
    unknown = set(options) - fields - extra
    if unknown:
        raise TypeError(f"unknown hybrid options: {', '.join(sorted(unknown))}")
    knobs = {k: v for k, v in options.items() if k in fields and k != "kg_strategy"}
    if isinstance(knobs.get("sources"), str):
        knobs["sources"] = parse_sources(knobs["sources"])
    given = {k: v for k, v in options.items() if k in extra and k != "kg_strategy"}
    sub = options.get("kg_strategy")
    if isinstance(sub, str):
        knobs["kg_strategy"] = sub  # a strategy name, made on first use
    elif sub is not None:
        given["kg_strategy"] = sub
    return Hybrid(llm, HybridOptions(**knobs), **given)


__all__ = ["SOURCES", "Evidence", "Hybrid", "HybridError", "HybridOptions", "create", "demo_docs", "parse_sources"]
