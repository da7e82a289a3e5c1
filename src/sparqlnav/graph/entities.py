"""How much the internal entities of an RDF/XML file's DTD expand to, so an entity bomb is refused before parsing.

Why a scan and not a parser option: pyoxigraph's RDF/XML parser expands internal entities without a bound
(a 660-byte "billion laughs" file grew past 20 GB), and it has no setting to limit that.
"""

from __future__ import annotations

import re
from pathlib import Path

from sparqlnav.errors import SparqlnavError

MAX_EXPANSION_BYTES = 64 * 1024 * 1024  # entity text a file may expand to, at least
MAX_AMPLIFICATION = 10  # or this many times the file's own size, for large files abbreviating namespaces
_HEAD_BYTES = 16 * 1024 * 1024  # a DTD longer than this is refused rather than read whole
_CHUNK = 8 * 1024 * 1024

_NAME = rb"[A-Za-z_:\x80-\xff][A-Za-z0-9_:.\-\x80-\xff]*"
_ENTITY_DECL = re.compile(rb"<!ENTITY\s+(%\s+)?(" + _NAME + rb")\s+(?:\"([^\"]*)\"|'([^']*)'|(SYSTEM|PUBLIC))")
_REFERENCE = re.compile(rb"&(" + _NAME + rb");")
_PREDEFINED = {b"amp", b"lt", b"gt", b"apos", b"quot"}


class EntityExpansionError(SparqlnavError, ValueError):
    """A file's entities expand to more than the limit (or refer to themselves)."""


def _internal_subset(head: bytes) -> tuple[bytes, int] | None:
    """The DTD's internal subset and the offset where the document after it starts; None without one."""
    start = head.find(b"<!DOCTYPE")
    if start < 0:
        return None
    root = re.search(rb"<[A-Za-z_]", head)
    if root is not None and root.start() < start:
        return None  # the DOCTYPE text sits inside the document, not in its prolog
    open_at = head.find(b"[", start)
    close = head.find(b">", start)
    if open_at < 0 or (0 <= close < open_at):
        return None  # no internal subset: external entities are not read by the parser
    i, quote = open_at + 1, 0
    while i < len(head):
        c = head[i]
        if quote:
            quote = 0 if c == quote else quote
        elif c in b"\"'":
            quote = c
        elif c == ord("]"):
            end = head.find(b">", i)
            if end < 0:
                break
            return head[open_at + 1 : i], end + 1
        i += 1
    raise EntityExpansionError(f"its DTD is longer than {_HEAD_BYTES} bytes — refused")


def _expanded_sizes(subset: bytes, limit: int) -> dict[bytes, int]:
    """Bytes each general internal entity expands to (capped just above `limit`)."""
    values: dict[bytes, bytes] = {}
    for m in _ENTITY_DECL.finditer(subset):
        if m.group(1) is None and m.group(5) is None and m.group(2) not in values:
            values[m.group(2)] = m.group(3) if m.group(3) is not None else m.group(4)
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


def check_entity_expansion(path: Path, limit: int | None = None) -> int:
    """Bytes the entity references of an XML file expand to; EntityExpansionError when over the limit.

    The limit is `MAX_EXPANSION_BYTES` or `MAX_AMPLIFICATION` times the file's size, whichever is larger.
    """
    file_size = path.stat().st_size
    bound = limit if limit is not None else max(MAX_EXPANSION_BYTES, MAX_AMPLIFICATION * file_size)
    with path.open("rb") as fh:
        head = fh.read(_HEAD_BYTES)
        found = _internal_subset(head)
        if found is None:
            return 0
        subset, body_at = found
        sizes = _expanded_sizes(subset, bound)
        if not sizes:
            return 0
        fh.seek(body_at)
        total, tail = 0, b""
        while chunk := fh.read(_CHUNK):
            text = tail + chunk
            last = text.rfind(b"&")
            # A reference cut by the chunk boundary is counted with the next chunk.
            cut = last if last >= 0 and b";" not in text[last:] and len(text) - last < 256 else len(text)
            for ref in _REFERENCE.findall(text, 0, cut):
                if ref not in _PREDEFINED:
                    total += sizes.get(ref, 0)
            if total > bound:
                raise EntityExpansionError(f"entity expansion over {bound} bytes — refused")
            tail = text[cut:]
    return total
