"""The guard every query passes before an engine sees it: read-only, and SERVICE only to allowed endpoints.

It works on tokens (comments, strings and IRIs removed), not on a full parse, so that it cannot be
fooled by comments, odd casing or prefixes, and so that it refuses even text no parser accepts.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from sparqlnav.errors import SparqlnavError
from sparqlnav.sparql.parser import SparqlSyntaxError, parse_query

QueryForm = Literal["SELECT", "ASK", "CONSTRUCT", "DESCRIBE"]

UPDATE_KEYWORDS = frozenset(
    {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"}
)
_FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")
# Brackets ({ ( [) inside one another. Oxigraph 0.5.13 overflows its stack and dies while parsing 2,185 nested
# groups, 2,599 nested OPTIONALs or 4,642 nested parentheses, and while evaluating 800 nested OPTIONALs over a
# 28-triple graph; hand-written and generated queries stay under 30.
MAX_NESTING = 64
# Flat chains, side by side rather than nested: pyoxigraph 0.5 dies (SIGSEGV) on 3,000 MINUS blocks (64 KB),
# 8,000 UNIONs, 8,000 OPTIONALs or 8,000 `+` terms (32 KB), all under the HTTP size limit; it survives 2,000 MINUS and
# 4,000 of the others. Real queries use tens.
MAX_GROUP_OPERATORS = 1000  # UNION, MINUS, OPTIONAL
MAX_OPERATORS = 2000  # + - * / | & ^ and the like, in expressions and property paths
_GROUP_WORDS = frozenset({"UNION", "MINUS", "OPTIONAL"})
_OPERATOR_CHARS = frozenset("+-*/|&^!=<>")
_OPEN, _CLOSE = frozenset("{(["), frozenset("})]")

# Order matters: long strings before short ones, comments only outside strings and IRIs.
_TOKEN = re.compile(
    r'''(?P<lstring>"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^'\\]|\\.|'(?!''))*\'\'\')'''
    r"""|(?P<string>"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*')"""
    # IRIREF as SPARQL defines it: any character but these (Unicode spaces included), plus \u escapes.
    r"""|(?P<iri><(?:[^<>"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*>)"""
    # A comment ends at the end of a line, and SPARQL ends lines at \r as well as \n.
    r"|(?P<comment>\#[^\r\n]*)"
    r"|(?P<var>[?$][A-Za-z0-9_\u00b7-\uffff]+)"
    r"|(?P<pname>(?:[A-Za-z][\w\-.]*)?:(?:[\w\-.:%]|\\.)*)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<other>\S)",
    re.DOTALL,
)


@dataclass(frozen=True)
class SparqlToken:
    """One lexical token: kind is lstring/string/iri/var/pname/word/other."""

    kind: str
    text: str
    pos: int


class Refused(SparqlnavError):
    """A query the guard will not let through; the message says why, in one line."""


def tokens(query: str) -> list[SparqlToken]:
    """Lexical tokens of a SPARQL text, comments dropped."""
    out: list[SparqlToken] = []
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup or "other"
        if kind == "comment":
            continue
        out.append(SparqlToken(kind, m.group(), m.start()))
    return out


def declared_prefixes(toks: list[SparqlToken]) -> dict[str, str]:
    """PREFIX declarations of the query (prefix → namespace)."""
    found: dict[str, str] = {}
    for i, t in enumerate(toks[:-2]):
        if (
            t.kind == "word"
            and t.text.upper() == "PREFIX"
            and toks[i + 1].kind == "pname"
            and toks[i + 2].kind == "iri"
        ):
            found[toks[i + 1].text[:-1]] = toks[i + 2].text[1:-1]
    return found


def query_form(query: str) -> QueryForm | None:
    """SELECT, ASK, CONSTRUCT or DESCRIBE; None when the text is no query form."""
    for t in tokens(query):
        if t.kind == "word":
            word = t.text.upper()
            if word in ("PREFIX", "BASE"):
                continue
            return word if word in _FORMS else None  # type: ignore[return-value]
    return None


def check_read_only(query: str) -> None:
    """Raise Refused when the text contains any SPARQL Update form."""
    for t in tokens(query):
        if t.kind == "word" and t.text.upper() in UPDATE_KEYWORDS:
            raise Refused(
                f"refused: this is a read-only tool and the query contains the update keyword "
                f"{t.text.upper()} (line {query.count(chr(10), 0, t.pos) + 1})"
            )
    if query_form(query) is None:
        raise Refused("refused: not a SPARQL query (expected SELECT, ASK, CONSTRUCT or DESCRIBE)")


def check_nesting(query: str, limit: int = MAX_NESTING) -> None:
    """Raise Refused when brackets outside strings, IRIs and comments nest deeper than `limit`."""
    depth = 0
    for t in tokens(query):
        if t.kind != "other":
            continue
        if t.text in _OPEN:
            depth += 1
            if depth > limit:
                raise Refused(
                    f"refused: the query nests brackets more than {limit} deep (line "
                    f"{query.count(chr(10), 0, t.pos) + 1}); such depth can crash the engine, so flatten it"
                )
        elif t.text in _CLOSE:
            depth = max(0, depth - 1)


def check_chains(query: str) -> None:
    """Raise Refused when a query chains more pattern or expression operators than the engine survives."""
    groups = operators = 0
    for t in tokens(query):
        if t.kind == "word" and t.text.upper() in _GROUP_WORDS:
            groups += 1
        elif t.kind == "other" and t.text in _OPERATOR_CHARS:
            operators += 1
    if groups > MAX_GROUP_OPERATORS:
        raise Refused(
            f"refused: the query chains {groups:,} UNION/MINUS/OPTIONAL blocks (at most {MAX_GROUP_OPERATORS:,}); "
            "so many can crash the engine, so use VALUES or split the query"
        )
    if operators > MAX_OPERATORS:
        raise Refused(
            f"refused: the query has {operators:,} operators (at most {MAX_OPERATORS:,}); so long a chain can crash "
            "the engine, so shorten it"
        )


def service_targets(query: str) -> list[str]:
    """The endpoint of every SERVICE clause (IRIs; `?var` for variable endpoints)."""
    toks = tokens(query)
    prefixes = declared_prefixes(toks)
    found: list[str] = []
    for i, t in enumerate(toks):
        if not (t.kind == "word" and t.text.upper() == "SERVICE"):
            continue
        j = i + 1
        if j < len(toks) and toks[j].kind == "word" and toks[j].text.upper() == "SILENT":
            j += 1
        if j >= len(toks):
            found.append("")
            continue
        target = toks[j]
        if target.kind == "iri":
            found.append(target.text[1:-1])
        elif target.kind == "pname":
            prefix, _, local = target.text.partition(":")
            found.append(prefixes[prefix] + local if prefix in prefixes else target.text)
        else:
            found.append(target.text)
    return found


def normalise_endpoint(url: str, *, scheme: bool = True) -> str:
    """An endpoint URL in one spelling: host in lower case, no default port, no trailing slash, and its
    scheme (lower case) only when `scheme`; ValueError when it is not a URL."""
    parts = urlsplit(url.strip())
    port = parts.port  # raises ValueError for a malformed port or host
    host = (parts.hostname or "").lower()
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    netloc = host if port in (None, default) else f"{host}:{port}"
    rest = f"{netloc}{parts.path.rstrip('/')}" + (f"?{parts.query}" if parts.query else "")
    return f"{parts.scheme.lower()}://{rest}" if scheme else rest


def _allowed_form(url: str) -> str:
    """The endpoint as the allow-list compares it; Refused when it is not a URL."""
    try:
        return normalise_endpoint(url)
    except ValueError as exc:
        raise Refused(f"refused: {url!r} is not a valid endpoint URL ({exc})") from None


def check_services(query: str, allowed: Iterable[str]) -> None:
    """Raise Refused when a SERVICE clause targets an endpoint outside the allow-list."""
    allow = set()
    for url in allowed:
        with contextlib.suppress(ValueError):  # a malformed allow-list entry allows nothing
            allow.add(normalise_endpoint(url))
    for target in _all_service_targets(query):
        if target.startswith(("?", "$")):
            raise Refused(
                f"refused: SERVICE with a variable endpoint ({target}) cannot be checked against the allow-list"
            )
        if (
            not target.lower().startswith(("http://", "https://"))
            or _allowed_form(target) not in allow
        ):
            allowed_text = ", ".join(sorted(allow)) or "none"
            raise Refused(
                f"refused: SERVICE <{target}> is not an allowed endpoint (allowed: {allowed_text})"
            )


def _all_service_targets(query: str) -> list[str]:
    """SERVICE targets as the tokens show them and, when it parses, as the full parser reads them.

    Two independent readings: a query crafted so that the token reading misses a SERVICE clause
    (escapes, unusual whitespace) is still caught by the parser, and a dialect the parser rejects
    (Virtuoso extensions, meant for a remote engine) is still checked by the tokens.
    """
    targets = service_targets(query)
    try:
        parsed = parse_query(query)
    except SparqlSyntaxError:
        return targets
    return targets + [s.endpoint for s in parsed.services]


def check_query(query: str, allowed_services: Iterable[str]) -> QueryForm:
    """Apply every guard; return the query form."""
    if not query.strip():
        raise Refused("refused: the query is empty")
    check_nesting(query)  # first: the parser behind check_services recurses per bracket
    check_chains(query)
    check_read_only(query)
    check_services(query, allowed_services)
    form = query_form(query)
    assert form is not None  # check_read_only refuses non-queries
    return form
