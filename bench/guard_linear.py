"""CPU time of the guard (`check_query`) on the red team's quadratic input, `BIND('` + `\\'`×N + ` AS ?x)`, on a run of
`a.a.a…`, and on a long valid query of many ordinary tokens, at several sizes. Linear work doubles its time with the
size; the guard of issue 29 took 4.5 s at 10 KB, 15.6 s at 20 KB and 66 s at 40 KB on the first.

Run: .venv/bin/python bench/guard_linear.py [--sizes 10 20 40 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from sparqlnav.sparql.guard import Refused, check_query


def escaped_quotes(kb: int) -> str:
    """The red team's query: one unterminated string of escaped quotes, `kb` kilobytes long."""
    head, tail = "SELECT * WHERE { BIND('", " AS ?x) }"
    return head + "\\'" * ((kb * 1000 - len(head) - len(tail)) // 2) + tail


def many_tokens(kb: int) -> str:
    """A valid query of many small triple patterns and some filters, `kb` kilobytes long."""
    head = "PREFIX ex: <http://example.org/>\nSELECT * WHERE {\n"
    parts: list[str] = []
    size, i = len(head) + 2, 0
    while size < kb * 1000:
        # Past about 20 KB the guard refuses it at its clause budget (MAX_CLAUSES): reading stops there.
        part = f'  ?s{i} ex:p{i % 7} ?o{i} .' + (f' FILTER(?o{i} != "x{i}")\n' if i % 5 == 0 else "\n")
        parts.append(part)
        size += len(part)
        i += 1
    return head + "".join(parts) + "}"


def dotted_names(kb: int) -> str:
    """A run of names and dots, `a.a.a…` (the old tokenizer read its rest again from every word: quadratic)."""
    head, tail = "SELECT * WHERE { ", " }"
    return head + "a." * ((kb * 1000 - len(head) - len(tail)) // 2) + tail


def cpu_seconds(query: str, repeat: int) -> tuple[float, str]:
    """The best CPU time of `repeat` checks, and how the check ended."""
    best, verdict = float("inf"), ""
    for _ in range(repeat):
        start = time.process_time()
        try:
            verdict = f"ran as {check_query(query, [])}"
        except Refused as exc:
            verdict = str(exc)[:60]
        best = min(best, time.process_time() - start)
    return best, verdict


INPUTS: dict[str, Callable[[int], str]] = {
    "escaped-quotes": escaped_quotes,
    "dotted-names": dotted_names,
    "many-tokens": many_tokens,
}


def main() -> None:
    """Print one line per input and size."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 40, 100], help="query sizes in KB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--inputs", nargs="+", choices=sorted(INPUTS), default=sorted(INPUTS))
    args = parser.parse_args()
    for name in args.inputs:
        make = INPUTS[name]
        for kb in args.sizes:
            query = make(kb)
            seconds, verdict = cpu_seconds(query, args.repeat)
            print(f"{name:15} {kb:4d} KB  {seconds * 1000:10.1f} ms CPU  ({len(query):,} chars; {verdict})", flush=True)


if __name__ == "__main__":
    main()
