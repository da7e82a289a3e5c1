"""How much the internal entities of an RDF/XML file's DTD expand to, so an entity bomb is refused before parsing.

Why a scan and not a parser option: pyoxigraph's RDF/XML parser expands internal entities without a bound
(a 660-byte "billion laughs" file grew past 20 GB), and it has no setting to limit that.

Why a reading that does not depend on the file's structure: an earlier scan found the DTD the way XML says it
is found (after comments and processing instructions, up to the `]` that closes it), and each trick that made it
read the structure differently from the parser (`<!-- <a -->` or `<?foo <a?>` before `<!DOCTYPE`, `<!-- ] -->`
inside the subset) hid the bomb from it. So this scan over-approximates: every `<!ENTITY` declaration anywhere
in the file counts (even one inside a comment, or inside another declaration's value), every reference to a
declared name anywhere after it counts, and a character reference for `&` in a value counts as a `&`. Whatever a
parser takes for the DTD, it cannot expand more than this sum.
"""

from __future__ import annotations

import bisect
import re
import resource
import subprocess
import sys
from pathlib import Path

from sparqlnav.errors import SparqlnavError

MAX_EXPANSION_BYTES = 64 * 1024 * 1024  # entity text a file may expand to, at least
MAX_AMPLIFICATION = 10  # or this many times the file's own size, for large files abbreviating namespaces
MAX_DECLARATION = 64 * 1024  # an entity declaration longer than this is refused rather than guessed at
_CHUNK = 8 * 1024 * 1024

_NAME = rb"[A-Za-z_:\x80-\xff][A-Za-z0-9_:.\-\x80-\xff]*"
_DECL_START = re.compile(rb"<!ENTITY\s+(%\s*)?(" + _NAME + rb")\s+")
_VALUE = re.compile(rb"\"([^\"]*)\"|'([^']*)'|(SYSTEM|PUBLIC)\b")
_REFERENCE = re.compile(rb"&(" + _NAME + rb");")
_AMPERSAND = re.compile(rb"&#(?:0*38|[xX]0*26);")  # a character reference that turns into '&' in a value
_PREDEFINED = {b"amp", b"lt", b"gt", b"apos", b"quot"}


class EntityExpansionError(SparqlnavError, ValueError):
    """A file's entities expand to more than the limit (or refer to themselves)."""


def _expanded_sizes(values: dict[bytes, bytes], limit: int) -> dict[bytes, int]:
    """Bytes each declared entity expands to (capped just above `limit`)."""
    sizes: dict[bytes, int] = {}
    visiting: set[bytes] = set()

    def size(name: bytes) -> int:
        if name in sizes:
            return sizes[name]
        if name in visiting:
            raise EntityExpansionError(f"entity &{name.decode(errors='replace')}; refers to itself — refused")
        visiting.add(name)
        value = values[name]
        total = len(_REFERENCE.sub(b"", value))
        for ref in _REFERENCE.findall(value):
            total += size(ref) if ref in values else len(ref) + 2
            total = min(total, limit + 1)  # keeps the numbers small however deep the nesting
        visiting.discard(name)
        sizes[name] = total
        return total

    for name in values:
        size(name)
    return sizes


def _declarations(text: bytes, upto: int, values: dict[bytes, bytes]) -> list[tuple[int, int]]:
    """Add every general entity declaration starting before `upto` (the longest value seen wins); return the
    spans of the values read, whose references count through their entity's uses rather than on their own."""
    spans: list[tuple[int, int]] = []
    for start in _DECL_START.finditer(text, 0, upto):
        if start.group(1) is not None:
            continue  # a parameter entity: its own value is scanned for declarations like any text
        value = _VALUE.match(text, start.end())
        if value is None:
            if len(text) - start.end() >= MAX_DECLARATION:
                raise EntityExpansionError(f"an entity declaration longer than {MAX_DECLARATION} bytes — refused")
            continue  # malformed: no parser takes a value from it
        if value.group(3) is not None:
            continue  # external: not read by the parser
        spans.append(value.span())
        body = _AMPERSAND.sub(b"&", value.group(1) if value.group(1) is not None else value.group(2))
        name = start.group(2)
        if name not in _PREDEFINED and len(body) >= len(values.get(name, b"")):
            values[name] = body
    return spans


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    i = bisect.bisect_right(spans, (pos, 1 << 62)) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]


def check_entity_expansion(path: Path, limit: int | None = None) -> int:
    """Bytes the entity references of an XML file expand to, at most; EntityExpansionError when over the limit.

    The limit is `MAX_EXPANSION_BYTES` or `MAX_AMPLIFICATION` times the file's size, whichever is larger.
    """
    file_size = path.stat().st_size
    bound = limit if limit is not None else max(MAX_EXPANSION_BYTES, MAX_AMPLIFICATION * file_size)
    values: dict[bytes, bytes] = {}
    counts: dict[bytes, int] = {}
    with path.open("rb") as fh:
        tail = b""
        while True:
            chunk = fh.read(_CHUNK)
            text = tail + chunk
            # Declarations and references starting in the kept tail are read with the next chunk, whole.
            upto = len(text) if not chunk else max(0, len(text) - MAX_DECLARATION)
            spans = _declarations(text, upto, values)
            for m in _REFERENCE.finditer(text, 0, upto):
                if m.group(1) in values and not _inside(m.start(), spans):
                    counts[m.group(1)] = counts.get(m.group(1), 0) + 1
            if not chunk:
                break
            tail = text[upto:]
    if not values:
        return 0
    sizes = _expanded_sizes(values, bound)
    total = 0
    for name, count in counts.items():
        total += count * sizes[name]
        if total > bound:
            raise EntityExpansionError(f"entity expansion over {bound} bytes — refused")
    return total


def as_ntriples_bounded(path: Path, out: Path, *, base_iri: str, memory_bytes: int, timeout_s: float = 3600) -> None:
    """Parse an RDF/XML file in a child process whose heap is capped at `memory_bytes`, writing N-Triples to `out`.

    The second barrier behind the scan: whatever the scan misses, the parser's expansion cannot take more memory
    than this. EntityExpansionError when the child runs out of it (or fails otherwise, with its last line).
    """
    cmd = [sys.executable, "-m", "sparqlnav.graph.entities", str(path), str(out), base_iri, str(memory_bytes)]
    done = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False)
    if done.returncode == 0:
        return
    said = done.stderr.decode(errors="replace").strip().splitlines()
    if done.returncode == 2 and said:
        raise SyntaxError(said[-1].removeprefix("SyntaxError: "))  # the file's own fault, told as the parser said
    if done.returncode < 0 or any("memory" in line.lower() for line in said):
        raise EntityExpansionError(f"reading it needed more than {memory_bytes:,} bytes of memory — refused")
    raise EntityExpansionError(said[-1] if said else f"its reader failed (exit {done.returncode})")


def _convert(argv: list[str]) -> int:
    """The child's side of as_ntriples_bounded: RDF/XML in, N-Triples out; SyntaxError's message on stderr."""
    import pyoxigraph as ox

    source, target, base, memory = argv
    resource.setrlimit(resource.RLIMIT_DATA, (int(memory), int(memory)))  # the child caps itself before parsing
    try:
        with open(target, "wb") as fh:
            ox.serialize(ox.parse(path=source, format=ox.RdfFormat.RDF_XML, base_iri=base), fh, ox.RdfFormat.N_TRIPLES)
    except SyntaxError as exc:
        print(f"SyntaxError: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("out of memory", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(_convert(sys.argv[1:]))
