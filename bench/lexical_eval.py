"""Benchmark the `lexical` strategy (no LLM) on CK25 and BESTIARY (and the bundled demo questions): macro
set-F1 overall and per CK25 feature tag, entity-linking accuracy on CK25, and time per question.

    .venv/bin/python bench/lexical_eval.py [--data DIR] [--out bench/results/lexical.md] [--limit N]

Data is read from --data, $SPARQLNAV_DATA or ../shared/data next to the repository; stores and indexes
go to a temporary SPARQLNAV home unless --home is given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparqlnav.datasets import Question, load_dataset
from sparqlnav.evaluation.execution import execution_match
from sparqlnav.evaluation.metrics import SetMatch, macro_prf, row_em, set_match
from sparqlnav.graph.kg import KnowledgeGraph
from sparqlnav.graph.names import LabelIndex
from sparqlnav.graph.opening import demo_path, open_kg
from sparqlnav.question.linking import Linking, link
from sparqlnav.settings import Settings
from sparqlnav.strategies.lexical import LexicalStrategy
from sparqlnav.trace import Trace

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    """One question's run."""

    id: str
    question: str
    tags: tuple[str, ...]
    status: str
    confidence: float | None
    match: SetMatch
    seconds: float
    queries: int
    sparql: str | None
    answer: str
    extra: dict[str, Any] = field(default_factory=dict)
    exact: bool = False  # row EM, or the same table with numbers within tolerance: the answer, not part of it


@dataclass
class Report:
    """All runs on one dataset."""

    name: str
    outcomes: list[Outcome] = field(default_factory=list)
    link_seconds: list[float] = field(default_factory=list)
    link_ranks: list[int | None] = field(
        default_factory=list
    )  # best mention-level rank of each gold entity
    link_global: list[int | None] = field(
        default_factory=list
    )  # rank in the question's whole candidate list


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def gold_entities(q: Question, kg: KnowledgeGraph) -> list[str]:
    """IRIs in the reference query that the KG's name index knows as entities (not classes or properties)."""
    if not q.sparql or not isinstance(kg.names, LabelIndex):
        return []
    body = re.sub(r"(?i)(PREFIX\s+[\w\-.]*:|BASE)\s*<[^>]*>", " ", q.sparql)
    found = []
    for iri in dict.fromkeys(re.findall(r"<(https?://[^>\s]+)>", body)):
        item = kg.names.item(iri)
        if item is not None and item.kind == "entity":
            found.append(iri)
    return found


def demo_questions(path: Path) -> list[Question]:
    """The bundled demo questions; their `answer` lists become one-column gold results."""
    out = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        answers = item["answer"]
        if answers and isinstance(answers[0], bool):
            gold: dict[str, Any] = {"head": {}, "boolean": answers[0]}
        else:
            rows = [{"x": {"type": "literal", "value": str(v)}} for v in answers]
            gold = {"head": {"vars": ["x"]}, "results": {"bindings": rows}}
        out.append(
            Question(
                item["id"], item["question"], item.get("sparql"), gold, tuple(item.get("tags", ()))
            )
        )
    return out


def run_dataset(
    name: str,
    questions: list[Question],
    kg: KnowledgeGraph,
    strategy: LexicalStrategy,
    *,
    linking: bool,
) -> Report:
    """Ask every question; score set-F1 against the gold answers; measure linking when asked."""
    report = Report(name)
    for i, q in enumerate(questions, 1):
        trace = Trace()
        started = time.monotonic()
        try:
            answer = strategy.run(q.question, kg, trace)
        except Exception as exc:  # noqa: BLE001 - a benchmark records failures and goes on
            print(f"  {q.id}: error {type(exc).__name__}: {exc}", file=sys.stderr)
            report.outcomes.append(
                Outcome(
                    q.id,
                    q.question,
                    q.tags,
                    "error",
                    None,
                    set_match(q.gold_results or {}, None),
                    0.0,
                    0,
                    None,
                    "",
                )
            )
            continue
        seconds = time.monotonic() - started
        predicted = (
            answer.results.to_sparql_json()
            if answer.status == "answered" and answer.results is not None
            else None
        )
        gold = q.gold_results or {"head": {}, "results": {"bindings": []}}
        match = set_match(gold, predicted)
        exact = row_em(gold, predicted) == 1.0 or execution_match(gold, predicted).correct
        report.outcomes.append(
            Outcome(
                q.id,
                q.question,
                q.tags,
                answer.status,
                answer.confidence,
                match,
                seconds,
                trace.usage.sparql_queries,
                answer.sparql,
                answer.text,
                dict(answer.extra),
                exact,
            )
        )
        if linking:
            t0 = time.monotonic()
            result = link(kg, q.question)
            report.link_seconds.append(time.monotonic() - t0)
            ents = [e for e in result.entities if e.kind == "entity"]
            for iri in gold_entities(q, kg):
                global_rank = next((n for n, e in enumerate(ents, 1) if e.iri == iri), None)
                report.link_global.append(global_rank)
                report.link_ranks.append(_mention_rank(kg, result, iri))
        print(
            f"  [{i}/{len(questions)}] {q.id} F1={match.f1:.2f} {answer.status} conf={answer.confidence} "
            f"{seconds:.2f}s — {q.question[:70]}",
            file=sys.stderr,
        )
    return report


def _mention_rank(kg: KnowledgeGraph, result: Linking, iri: str) -> int | None:
    """The best rank of `iri` among the candidates of any single mention."""
    best: int | None = None
    per_mention: dict[tuple[int, int], list[tuple[float, str]]] = defaultdict(list)
    for e in result.candidates:
        per_mention[(e.mention.first, e.mention.last)].append((e.score, e.iri))
    for cands in per_mention.values():
        ordered = [i for _, i in sorted(cands, key=lambda x: -x[0])]
        if iri in ordered:
            rank = ordered.index(iri) + 1
            best = rank if best is None else min(best, rank)
    return best


def summarise(reports: list[Report], budget: float, threshold: float) -> str:
    """The markdown summary."""
    lines = ["# lexical strategy (no LLM): benchmark", ""]
    lines.append(
        f"Budget {budget:g} s per question, confidence threshold {threshold:g}. "
        "Macro set-F1: mean over questions of the F1 between the set of"
    )
    lines.append(
        "all values in the result and the gold answer values; a not-found answer scores 0."
    )
    lines.append("")
    lines.append(
        "| dataset | questions | macro P | macro R | macro F1 | answered | F1=1 | p50 s | p95 s | queries/q |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in reports:
        p, rec, f1 = macro_prf(o.match for o in r.outcomes)
        secs = [o.seconds for o in r.outcomes]
        answered = sum(1 for o in r.outcomes if o.status == "answered")
        perfect = sum(1 for o in r.outcomes if o.match.f1 >= 0.999)
        qpq = statistics.mean(o.queries for o in r.outcomes) if r.outcomes else 0
        lines.append(
            f"| {r.name} | {len(r.outcomes)} | {p:.3f} | {rec:.3f} | {f1:.3f} | {answered} | {perfect} | "
            f"{percentile(secs, 0.5):.2f} | {percentile(secs, 0.95):.2f} | {qpq:.1f} |"
        )
    for r in reports:
        if not any(o.tags for o in r.outcomes):
            continue
        lines += [
            "",
            f"## {r.name}: macro F1 per feature tag",
            "",
            "| tag | questions | macro F1 |",
            "|---|---|---|",
        ]
        by_tag: dict[str, list[SetMatch]] = defaultdict(list)
        for o in r.outcomes:
            for t in o.tags:
                by_tag[t].append(o.match)
        for tag, matches in sorted(by_tag.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"| {tag} | {len(matches)} | {macro_prf(matches)[2]:.3f} |")
    for r in reports:
        if not r.link_ranks:
            continue
        n = len(r.link_ranks)

        def share(ranks: list[int | None], k: int) -> float:
            return sum(1 for x in ranks if x is not None and x <= k) / len(ranks) if ranks else 0.0

        lines += [
            "",
            f"## {r.name}: entity linking",
            "",
            f"{n} entity IRIs in the reference queries (classes and properties excluded).",
            "",
            "| measure | top-1 | top-5 |",
            "|---|---|---|",
            f"| ranked first/within 5 among the candidates of its mention | {share(r.link_ranks, 1):.3f} | {share(r.link_ranks, 5):.3f} |",
            f"| ranked first/within 5 among all the question's entity candidates | {share(r.link_global, 1):.3f} | {share(r.link_global, 5):.3f} |",
            "",
            f"Linking latency (entities and relations): p50 {percentile(r.link_seconds, 0.5) * 1000:.0f} ms, "
            f"p95 {percentile(r.link_seconds, 0.95) * 1000:.0f} ms.",
        ]
    for r in reports:
        lines += [
            "",
            f"## {r.name}: per question",
            "",
            "| id | F1 | status | conf | s | question |",
            "|---|---|---|---|---|---|",
        ]
        for o in r.outcomes:
            conf = f"{o.confidence:.2f}" if o.confidence is not None else "-"
            lines.append(
                f"| {o.id} | {o.match.f1:.2f} | {o.status} | {conf} | {o.seconds:.2f} | {o.question.replace('|', '/')[:90]} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the summary."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "lexical.md")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--budget", type=float, default=5.0)
    ap.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="confidence threshold (default: the strategy's)",
    )
    ap.add_argument("--only", choices=["demo", "ck25", "bestiary"], default=None)
    ap.add_argument(
        "--json", type=Path, default=None, help="also write per-question records as JSON lines"
    )
    args = ap.parse_args(argv)
    data = args.data or Path(os.environ.get("SPARQLNAV_DATA") or REPO.parent / "shared" / "data")
    if not data.exists():
        print(f"no benchmark data at {data}", file=sys.stderr)
        return 2
    home = args.home or Path(tempfile.mkdtemp(prefix="sparqlnav-bench-"))
    settings = Settings.from_env({"SPARQLNAV_HOME": str(home)})
    strategy = (
        LexicalStrategy(budget_s=args.budget)
        if args.threshold is None
        else LexicalStrategy(budget_s=args.budget, threshold=args.threshold)
    )
    reports: list[Report] = []
    sets = [
        ("DEMO", demo_path(), demo_path().parent / "questions.json", False),
        ("CK25", data / "ck25" / "prod-inst.ttl", data / "ck25" / "questions.yml", True),
        (
            "BESTIARY",
            data / "bestiary" / "beastiary_kg.rdf",
            data / "bestiary" / "beastiary_with_qald_format.json",
            False,
        ),
    ]
    for name, kg_path, questions_path, do_linking in sets:
        if args.only and args.only != name.lower():
            continue
        if name == "DEMO":
            questions = demo_questions(questions_path)[: args.limit]
            with open_kg("demo", settings) as kg:
                reports.append(run_dataset(name, questions, kg, strategy, linking=False))
            continue
        questions = load_dataset(questions_path).questions[: args.limit]
        print(f"{name}: {len(questions)} questions", file=sys.stderr)
        with open_kg(str(kg_path), settings) as kg:
            reports.append(run_dataset(name, questions, kg, strategy, linking=do_linking))
    text = summarise(reports, args.budget, strategy.threshold)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    if args.json:
        with args.json.open("w", encoding="utf-8") as fh:
            for r in reports:
                for o in r.outcomes:
                    fh.write(
                        json.dumps(
                            {
                                "dataset": r.name,
                                "id": o.id,
                                "question": o.question,
                                "f1": o.match.f1,
                                "status": o.status,
                                "confidence": o.confidence,
                                "sparql": o.sparql,
                                "answer": o.answer,
                                **o.extra,
                            },
                            ensure_ascii=False,
                        )
                        + "\n"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
