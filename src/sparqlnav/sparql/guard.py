"""The guard every query passes before an engine sees it: read-only, SERVICE only to allowed endpoints, nothing
the engine would crash on, and nothing sparqlnav cannot read.

It reads a query twice. Tokens (strings, IRIs and comments set apart) serve the checks any text gets: update
keywords and bracket depth. The parser (`sparql.parser`) must then read the query completely, or it does
not run (the guard fails closed): the SERVICE endpoints the allow-list sees are the ones the parser resolved, with
their \\u escapes decoded and their prefixes and BASE applied, and they are compared as unescaped, normalised URLs.
For the local Oxigraph engine every query must parse, its names read exactly as Oxigraph reads them. A remote engine
may speak its own dialect (Virtuoso's `SELECT COUNT(?x)`, Blazegraph's named subqueries), so there a query the parser
cannot read still runs, but only when neither its text nor its \\u-decoded text mentions SERVICE and its tokens are
in step (no unclosed string, no stray backslash). Both readings are linear in the query's length.

Width has one budget, MAX_CLAUSES, on the clauses and nodes of every kind the parser reads, counted together: the
parser stops where the count passes it. A remote dialect's query the parser cannot read is held to the same budget by
an estimate from its tokens (`rough_clauses`).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin, urlsplit

from sparqlnav import cancel
from sparqlnav.errors import SparqlnavError
from sparqlnav.sparql.parser import (
    IRIREF,
    LANGTAG,
    SPARQL_NAMES,
    UCHAR,
    UNDEFINED_PREFIX_NS,
    SparqlSyntaxError,
    TooManyClauses,
    code_point,
    decode_uchars,
    parse_query,
)

QueryForm = Literal["SELECT", "ASK", "CONSTRUCT", "DESCRIBE"]

UPDATE_KEYWORDS = frozenset(
    {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"}
)
_FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")
# Brackets ({ ( [) inside one another. Oxigraph 0.5.13 overflows its stack and dies while parsing 2,185 nested
# groups, 2,599 nested OPTIONALs or 4,642 nested parentheses, and while evaluating 800 nested OPTIONALs over a
# 28-triple graph; hand-written and generated queries stay under 30.
MAX_NESTING = 64
# Wide queries, side by side rather than nested: one budget on the clauses and nodes of every kind the parser reads
# (`ParsedQuery.clauses`: groups, triple patterns, FILTERs, BINDs, VALUES blocks, projected items, ORDER/GROUP/HAVING
# conditions, DESCRIBE targets, operators, calls, path steps). pyoxigraph 0.5 dies (SIGSEGV or SIGABRT) on 3,000 of
# any one of a dozen shapes (MINUS blocks, projected `(1 AS ?v)`, VALUES blocks, BINDs, `ORDER BY (1)` conditions,
# `GRAPH ?g { }` blocks, DESCRIBE targets, sub-SELECTs; 8,000 UNIONs or `+` terms), all under the HTTP size limit,
# and survives 2,500. The 4,048 gold queries of five public benchmarks hold at most 79 (bench/guard_budget.py).
MAX_CLAUSES = 1000
_OPEN, _CLOSE = frozenset("{(["), frozenset("})]")
TICK_EVERY = 4096  # tokens between two looks at the deadline and the run's cancel signal

_N = SPARQL_NAMES
# Each alternative either matches or fails within the text it would cover, and what it covers is never read again
# from a later position: tokenizing is linear. (A string that never closes used to be re-read from each quote inside
# it, and a run of names such as `a.a.a…` from each word in it: quadratic, minutes for 100 KB.)
_TOKEN = re.compile(
    "|".join(
        [
            r'(?P<lstring>"""(?:[^"\\]|\\.|"(?!""))*+"""' + r"|'''(?:[^'\\]|\\.|'(?!''))*+''')",
            r'(?P<string>"(?:[^"\\\n\r]|\\[^\n\r])*+"' + r"|'(?:[^'\\\n\r]|\\[^\n\r])*+')",
            # A string that never closes is one token: a long one to the end of the text, a short one to its line's.
            r'(?P<unclosed>"""(?:[^"\\]|\\.|"(?!""))*+\\?\Z' + r"|'''(?:[^'\\]|\\.|'(?!''))*+\\?\Z"
            r'|"(?:[^"\\\n\r]|\\[^\n\r])*+\\?' + r"|'(?:[^'\\\n\r]|\\[^\n\r])*+\\?)",
            # IRIREF as SPARQL defines it: any character but these (Unicode spaces included), plus \u escapes.
            rf"(?P<iri>{IRIREF})",
            # A comment ends at the end of a line, and SPARQL ends lines at \r as well as \n.
            r"(?P<comment>\#[^\r\n]*+)",
            rf"(?P<var>[?$]{_N.varname})",
            rf"(?P<bnode>{_N.blank_node})",
            # A prefixed name when a colon follows the run of name characters, else words (split below).
            rf"(?P<name>{_N.pn_prefix}(?::(?:{_N.pn_local})?+)?+)",
            rf"(?P<pname>:(?:{_N.pn_local})?+)",
            rf"(?P<langtag>{LANGTAG})",
            r"(?P<word>[A-Za-z_][A-Za-z0-9_]*+)",
            r"(?P<other>\S)",
        ]
    ),
    re.DOTALL,
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPLIT = re.compile(r"(?P<word>[A-Za-z_][A-Za-z0-9_]*+)|(?P<other>\S)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_MENTIONS_SERVICE = re.compile("service", re.IGNORECASE)
# A plain host name or IP address, and an optional port: nothing URL readers disagree about (user names, %-escapes,
# backslashes read as slashes) can stand in the part that says which machine is called.
_AUTHORITY = re.compile(r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


@dataclass(frozen=True)
class SparqlToken:
    """One lexical token: kind is lstring/string/unclosed/iri/var/bnode/pname/langtag/word/other."""

    kind: str
    text: str
    pos: int


class Refused(SparqlnavError):
    """A query the guard will not let through; the message says why, in one line."""


class Unreadable(Refused):
    """A query sparqlnav's parser cannot read completely: it is not run, whatever an engine would make of it."""

    def __init__(self, error: SparqlSyntaxError, *, decoded: bool = False) -> None:
        how = "with its \\u escapes decoded first, as SPARQL 1.1 reads them, " if decoded else ""
        super().__init__(
            f"refused: sparqlnav could not read this query completely ({how}error at {error.line}:{error.column}: "
            f"{error.reason}), so it is not run"
        )
        self.error = error

    def syntax_message(self) -> str:
        """The refusal as a syntax error reads, place first: `error at L:C: reason (…)`."""
        e = self.error
        return (
            f"error at {e.line}:{e.column}: {e.reason} (sparqlnav could not read the query completely, so it was "
            "not run)"
        )


def tokens(query: str) -> list[SparqlToken]:
    """Lexical tokens of a SPARQL text, comments dropped."""
    return _tokens(query, None)


def _tokens(query: str, tick: Callable[[], None] | None) -> list[SparqlToken]:
    out: list[SparqlToken] = []
    for n, m in enumerate(_TOKEN.finditer(query)):
        if tick is not None and n % TICK_EVERY == TICK_EVERY - 1:
            tick()
        kind = m.lastgroup or "other"
        if kind == "comment":
            continue
        text = m.group()
        if kind != "name":
            out.append(SparqlToken(kind, text, m.start()))
        elif ":" in text:
            out.append(SparqlToken("pname", text, m.start()))
        elif _WORD.fullmatch(text):
            out.append(SparqlToken("word", text, m.start()))
        else:  # `a-b`, `x.y`: the words and marks of a run that is no name
            out.extend(SparqlToken(p.lastgroup or "other", p.group(), m.start() + p.start()) for p in _SPLIT.finditer(text))
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
    return _form(tokens(query))


def _form(toks: list[SparqlToken]) -> QueryForm | None:
    for t in toks:
        if t.kind == "word":
            word = t.text.upper()
            if word in ("PREFIX", "BASE", "VERSION"):
                continue
            return word if word in _FORMS else None  # type: ignore[return-value]
    return None


def check_read_only(query: str) -> None:
    """Raise Refused when the text contains any SPARQL Update form."""
    _check_read_only(query, tokens(query))


def _check_read_only(query: str, toks: list[SparqlToken]) -> QueryForm:
    for t in toks:
        if t.kind == "word" and t.text.upper() in UPDATE_KEYWORDS:
            raise Refused(
                f"refused: this is a read-only tool and the query contains the update keyword "
                f"{t.text.upper()} (line {query.count(chr(10), 0, t.pos) + 1})"
            )
    form = _form(toks)
    if form is None:
        raise Refused("refused: not a SPARQL query (expected SELECT, ASK, CONSTRUCT or DESCRIBE)")
    return form


def check_nesting(query: str, limit: int = MAX_NESTING) -> None:
    """Raise Refused when brackets outside strings, IRIs and comments nest deeper than `limit`."""
    _check_nesting(query, tokens(query), limit)


def _check_nesting(query: str, toks: list[SparqlToken], limit: int = MAX_NESTING) -> None:
    depth = 0
    for t in toks:
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


class TooWide(Refused):
    """A query with more clauses than MAX_CLAUSES: so wide a query can crash the engine."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"refused: the query has more than {MAX_CLAUSES:,} clauses ({where}; groups, triple patterns, filters, "
            "conditions, operators and the like, counted together); so wide a query can crash the engine: split it, "
            "or put its values in one VALUES block"
        )


def rough_clauses(toks: list[SparqlToken]) -> int:
    """The clause count of a query the parser cannot read (a remote engine's dialect), estimated from its tokens:
    the punctuation and operators that open or join a clause (`{ ( . , ; = + …`), closing brackets aside."""
    return sum(1 for t in toks if t.kind == "other" and t.text not in _CLOSE)


def service_targets(query: str) -> list[str]:
    """The endpoint of every SERVICE clause as the tokens show it (IRIs resolved, `?var` for variable endpoints)."""
    return _token_targets(tokens(query))


def _iri_value(text: str, base: str | None) -> str:
    """An IRI token's IRI: \\u escapes decoded, resolved against `base` when relative."""
    value = text[1:-1]
    if "\\" in value:
        with contextlib.suppress(ValueError):  # an escape that stands for no character: the parser refuses it
            value = re.sub(UCHAR, lambda m: code_point(m.group()), value)
    if base is not None and _SCHEME.match(value) is None:
        value = urljoin(base, value)
    return value


def _token_targets(toks: list[SparqlToken]) -> list[str]:
    base: str | None = None
    prefixes: dict[str, str] = {}
    found: list[str] = []
    for i, t in enumerate(toks):
        if t.kind != "word":
            continue
        word = t.text.upper()
        after = toks[i + 1 : i + 3]
        if word == "BASE" and after and after[0].kind == "iri":
            base = _iri_value(after[0].text, base)
        elif word == "PREFIX" and len(after) == 2 and after[0].kind == "pname" and after[1].kind == "iri":
            prefixes[after[0].text[:-1]] = _iri_value(after[1].text, base)
        elif word == "SERVICE":
            j = i + 1
            if j < len(toks) and toks[j].kind == "word" and toks[j].text.upper() == "SILENT":
                j += 1
            if j >= len(toks):
                found.append("")
                continue
            target = toks[j]
            if target.kind == "iri":
                found.append(_iri_value(target.text, base))
            elif target.kind == "pname":
                prefix, _, local = target.text.partition(":")
                local = re.sub(r"\\(.)", r"\1", local)  # PN_LOCAL_ESC: `\'` is `'`
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


def endpoint_form(url: str) -> str:
    """An endpoint as the allow-list compares it (unescaped, normalised); ValueError saying why a URL is not
    compared at all: a user name (`@`), a backslash, a space or control character, a scheme other than http(s), or a
    host that is no plain name or address."""
    if "@" in url:
        raise ValueError("it holds '@', which URL readers take for a user name in different places")
    if "\\" in url:
        raise ValueError("it holds a backslash, which some URL readers take for '/'")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise ValueError("it holds a space or a control character")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise ValueError("it is not an http or https URL")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if _AUTHORITY.fullmatch(authority) is None:
        raise ValueError(f"{authority[:100]!r} is not a plain host name or address")
    return normalise_endpoint(url)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_services(
    query: str,
    allowed: Iterable[str],
    *,
    remote: bool = False,
    tick: Callable[[], None] | None = None,
) -> None:
    """Raise Refused when a SERVICE clause targets an endpoint outside the allow-list, or when the query cannot be
    read well enough to know (see the module's docstring; `remote`: the engine is not sparqlnav's Oxigraph)."""
    _check_targets(_read_targets(query, _tokens(query, tick), remote=remote, tick=tick), allowed)


def _check_targets(targets: list[str], allowed: Iterable[str]) -> None:
    allow = set()
    for url in allowed:
        with contextlib.suppress(ValueError):  # a malformed allow-list entry allows nothing
            allow.add(endpoint_form(url))
    for target in targets:
        if target.startswith(("?", "$")):
            raise Refused(
                f"refused: SERVICE with a variable endpoint ({_short(target)}) cannot be checked against the allow-list"
            )
        if target.startswith(UNDEFINED_PREFIX_NS):
            name = target.removeprefix(UNDEFINED_PREFIX_NS)
            raise Refused(
                f"refused: SERVICE {_short(name)} uses the prefix '{name.partition(':')[0]}:', which the query does "
                "not declare, so its endpoint cannot be checked against the allow-list"
            )
        try:
            form = endpoint_form(target)
        except ValueError as exc:
            raise Refused(f"refused: SERVICE <{_short(target)}> is not a valid endpoint URL ({exc})") from None
        if form not in allow:
            allowed_text = ", ".join(sorted(allow)) or "none"
            raise Refused(
                f"refused: SERVICE <{_short(target)}> is not an allowed endpoint (allowed: {allowed_text})"
            )


def _read_targets(
    query: str, toks: list[SparqlToken], *, remote: bool, tick: Callable[[], None] | None
) -> list[str]:
    """Every SERVICE endpoint the query can call, as the parser resolved it; Unreadable when the query must parse
    and does not."""
    decoded = decode_uchars(query)
    mentions = _MENTIONS_SERVICE.search(query) is not None
    # An engine that follows SPARQL 1.1 to the letter decodes \u escapes anywhere before parsing (§19.2): for
    # it, `\u0053ERVICE` is SERVICE. Oxigraph decodes them in strings and IRIs only.
    decoded_mentions = remote and decoded != query and _MENTIONS_SERVICE.search(decoded) is not None
    try:
        # Remote engines predeclare prefixes (Virtuoso's bif:, Wikidata's wdt:), so undeclared ones are no error.
        parsed = parse_query(
            query, collect_undefined_prefixes=remote, tick=tick, oxigraph=not remote, max_clauses=MAX_CLAUSES
        )
    except TooManyClauses as exc:
        raise TooWide(f"line {exc.line}") from None
    except SparqlSyntaxError as exc:
        if not remote or mentions or decoded_mentions or not _in_step(toks):
            raise Unreadable(exc) from None
        if rough_clauses(toks) > MAX_CLAUSES:
            raise TooWide("by its punctuation and operators, as sparqlnav cannot read it whole") from None
        return []  # a remote engine's own dialect, with no SERVICE in any reading of its text
    targets = [s.endpoint for s in parsed.services]
    token_targets = _token_targets(toks)
    if len(token_targets) != len(targets):
        raise Refused(
            f"refused: the query's tokens show {len(token_targets)} SERVICE clause(s) and its parse "
            f"{len(targets)}; a query read two ways is not run"
        )
    if remote and mentions:
        # Oxigraph reads a keyword as the start of a longer name (`SERVICEx:y` is SERVICE x:y), so a prefix only the
        # engine knows must not begin like one.
        for prefix in parsed.undefined_prefixes:
            if prefix[:7].upper() == "SERVICE" or prefix[:6].upper() == "SILENT":
                raise Refused(
                    f"refused: the undeclared prefix '{_short(prefix, 60)}:' begins like the keyword SERVICE or "
                    "SILENT, which an engine may read apart; declare it"
                )
    if decoded_mentions:
        try:
            decoded_parse = parse_query(decoded, collect_undefined_prefixes=True, tick=tick, max_clauses=MAX_CLAUSES)
            targets += [s.endpoint for s in decoded_parse.services]
        except TooManyClauses as exc:
            raise TooWide(f"line {exc.line}, with its \\u escapes decoded") from None
        except SparqlSyntaxError as exc:
            raise Unreadable(exc, decoded=True) from None
    return targets + token_targets


def _in_step(toks: list[SparqlToken]) -> bool:
    """Whether the token reading can be trusted without a parse: no string left open, no backslash outside one."""
    return not any(t.kind == "unclosed" or (t.kind == "other" and t.text == "\\") for t in toks)


def _deadline_tick(deadline: float | None) -> Callable[[], None]:
    def tick() -> None:
        cancel.check()  # a cancelled run stops here too (RunCancelled)
        if deadline is not None and time.monotonic() > deadline:
            raise Refused("refused: checking the query took longer than its time limit, so it is not run")

    return tick


def check_query(
    query: str,
    allowed_services: Iterable[str],
    *,
    remote: bool = False,
    deadline: float | None = None,
) -> QueryForm:
    """Apply every guard; return the query form.

    `remote`: the engine is a remote endpoint with its own dialect, not sparqlnav's Oxigraph (see the module's
    docstring). `deadline` (time.monotonic()) bounds the check, which also stops when the run is cancelled."""
    if not query.strip():
        raise Refused("refused: the query is empty")
    tick = _deadline_tick(deadline)
    toks = _tokens(query, tick)
    _check_nesting(query, toks)  # first: the parser recurses per bracket
    form = _check_read_only(query, toks)
    _check_targets(_read_targets(query, toks, remote=remote, tick=tick), allowed_services)
    return form
