"""A parse-only SPARQL 1.1 query parser: syntax errors with line and column, and the parts a checker needs
(triple patterns with property paths, the endpoint each pattern runs on, VALUES, IRI positions). It also reads
the SPARQL 1.2 forms Oxigraph 0.5 accepts (triple terms, reified triples, annotations, their functions, LATERAL),
decodes \\u escapes in strings and IRIs as Oxigraph does, and with `oxigraph=True` ends names where Oxigraph ends
them: the guard runs a query only when this parser reads it completely.

It never evaluates anything and never touches the network: pyoxigraph can only parse by executing, and an
executed SERVICE clause makes an HTTP call. Grammar: https://www.w3.org/TR/sparql11-query/#sparqlGrammar
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from urllib.parse import urljoin

from sparqlnav.errors import SparqlnavError

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDF_TYPE = RDF + "type"
XSD = "http://www.w3.org/2001/XMLSchema#"
UNDEFINED_PREFIX_NS = "urn:sparqlnav:undefined-prefix:"

# ---------------------------------------------------------------------------------------------- AST


@dataclass(frozen=True)
class Var:
    """A query variable (name without ? or $)."""

    name: str

    def __str__(self) -> str:
        return f"?{self.name}"


@dataclass(frozen=True)
class Iri:
    """An absolute IRI (prefixed names are expanded)."""

    value: str

    def __str__(self) -> str:
        return f"<{self.value}>"


@dataclass(frozen=True)
class Literal:
    """A literal with its lexical form, datatype or language tag."""

    value: str
    datatype: str | None = None
    lang: str | None = None

    def __str__(self) -> str:
        text = '"' + self.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if self.lang:
            return f"{text}@{self.lang}"
        if self.datatype and self.datatype != XSD + "string":
            return f"{text}^^<{self.datatype}>"
        return text


@dataclass(frozen=True)
class BNode:
    """A blank node: a `_:label` or one made for `[]`, `[ … ]` or a collection."""

    label: str

    def __str__(self) -> str:
        return f"_:{self.label}"


Term = Var | Iri | Literal | BNode


@dataclass(frozen=True)
class PathLink:
    """One predicate IRI inside a property path."""

    iri: str

    def __str__(self) -> str:
        return f"<{self.iri}>"


@dataclass(frozen=True)
class PathInv:
    """`^path`: the path walked backwards."""

    path: Path

    def __str__(self) -> str:
        return f"^{_wrap(self.path)}"


@dataclass(frozen=True)
class PathSeq:
    """`a/b/…`."""

    parts: tuple[Path, ...]

    def __str__(self) -> str:
        return "/".join(_wrap(p) for p in self.parts)


@dataclass(frozen=True)
class PathAlt:
    """`a|b|…`."""

    options: tuple[Path, ...]

    def __str__(self) -> str:
        return "|".join(_wrap(p) for p in self.options)


@dataclass(frozen=True)
class PathMod:
    """`path?`, `path*` or `path+`."""

    path: Path
    mod: str

    def __str__(self) -> str:
        return f"{_wrap(self.path)}{self.mod}"


@dataclass(frozen=True)
class PathNeg:
    """`!(a|^b)`: any predicate but these (each with its direction: True for inverse)."""

    iris: tuple[tuple[str, bool], ...]

    def __str__(self) -> str:
        return "!(" + "|".join(("^" if inv else "") + f"<{i}>" for i, inv in self.iris) + ")"


Path = PathLink | PathInv | PathSeq | PathAlt | PathMod | PathNeg


def _wrap(path: Path) -> str:
    return str(path) if isinstance(path, PathLink | PathNeg | PathMod) else f"({path})"


@dataclass(frozen=True)
class TriplePattern:
    """One triple pattern; `predicate` is a Var, an Iri or a property path.

    `service` is the SERVICE endpoint the pattern runs on (an IRI, `?var` for a variable endpoint, None for
    the endpoint the query is sent to); `context` lists the enclosing constructs (OPTIONAL, UNION, MINUS,
    EXISTS, NOT EXISTS, GRAPH, SERVICE, SUBQUERY); `scope` the ids of the enclosing subqueries (see
    `ParsedQuery.projections`), outermost first."""

    subject: Term
    predicate: Var | Iri | Path
    object: Term
    line: int
    column: int
    service: str | None = None
    context: tuple[str, ...] = ()
    scope: tuple[int, ...] = ()


@dataclass(frozen=True)
class ServiceRef:
    """A SERVICE clause: its endpoint (IRI or `?var`), SILENT flag and position."""

    endpoint: str
    silent: bool
    line: int
    column: int


@dataclass(frozen=True)
class IriUse:
    """Where an IRI is written in the query text, its role (predicate, class or other) and SERVICE endpoint."""

    iri: str
    start: int
    end: int
    role: str
    service: str | None = None


@dataclass
class ParsedQuery:
    """What the parser learned about a query."""

    form: str
    prefixes: dict[str, str]
    base: str | None
    patterns: list[TriplePattern]
    template: list[TriplePattern]
    services: list[ServiceRef]
    values: dict[str, list[Term]]
    iri_uses: list[IriUse]
    undefined_prefixes: dict[str, tuple[int, int]] = field(default_factory=dict)
    projections: dict[int, frozenset[str] | None] = field(default_factory=dict)
    """Subquery id → the variables it projects (None for SELECT *): the others are local to it."""
    clauses: int = 0
    """How many clauses and nodes of every kind the query holds (see `_Parser.clause`)."""


class SparqlSyntaxError(SparqlnavError):
    """A syntax error with its 1-based line and column."""

    def __init__(self, message: str, line: int, column: int, offset: int) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.reason = message
        self.line = line
        self.column = column
        self.offset = offset


class TooManyClauses(SparqlnavError):
    """A query with more clauses than the caller's budget: read up to the clause past it, and no further."""

    def __init__(self, limit: int, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: more than {limit:,} clauses")
        self.limit = limit
        self.line = line
        self.column = column


# -------------------------------------------------------------------------------------------- lexer

# Names are read in one of two dialects. SPARQL 1.1's grammar, for checking and for remote engines; and Oxigraph
# 0.5.13's (the local engine), which the guard relies on: a name must end where the engine ends it, or a SERVICE
# clause could hide inside what we took for one name. Oxigraph's PN_CHARS_BASE stops at U+FFFD and its local names
# hold one run of dots at most (`ex:a.b.c` is `ex:a.b` then `.c`). Every repetition is possessive (`*+`), as in a
# PEG grammar: no match backtracks, so lexing is linear in the text.
_PN_CHARS_BASE_BMP = (
    "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d"
    "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd"
)
_PLX = r"(?:%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%])"
UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
# IRIREF: any character but these, and \u escapes (decoded, then checked again: see `_Parser.check_iri`).
IRIREF = rf"""<(?:[^<>"{{}}|^`\\\x00-\x20]|{UCHAR})*+>"""
LANGTAG = r"@[a-zA-Z]++(?:-[a-zA-Z0-9]++)*+(?:--[a-zA-Z]++)?+"
_ECHAR = rf"""\\[tbnrf\\"']|{UCHAR}"""
# SPARQL's whitespace is these four characters (Oxigraph refuses a no-break space); comments end at \r or \n.
_WS = r"(?:[ \t\r\n]|\#[^\n\r]*+)*+"


@dataclass(frozen=True)
class NameRules:
    """The regular expressions of one dialect's names."""

    pn_prefix: str
    pn_local: str
    pname: str
    blank_node: str
    varname: str


_MAX_CODE = 0x10FFFF
_BMP_END = 0xFFFF


def class_ranges(body: str) -> list[tuple[int, int]]:
    """The code point ranges of a character class's body as these rules write them (characters, `a-b` ranges,
    `\\-`, `\\uXXXX` and `\\UXXXXXXXX`), sorted and merged."""
    codes: list[int | None] = []  # None: the dash of a range
    i = 0
    while i < len(body):
        if body[i] == "\\":
            width = {"u": 4, "U": 8}.get(body[i + 1], 0)
            codes.append(int(body[i + 2 : i + 2 + width], 16) if width else ord(body[i + 1]))
            i += 2 + width
        else:
            dash = body[i] == "-" and bool(codes) and codes[-1] is not None and i + 1 < len(body)
            codes.append(None if dash else ord(body[i]))
            i += 1
    ranges: list[tuple[int, int]] = []
    k = 0
    while k < len(codes):
        low = codes[k]
        assert low is not None
        high = codes[k + 2] if k + 2 < len(codes) and codes[k + 1] is None else None
        ranges.append((low, low if high is None else high))
        k += 1 if high is None else 3
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _escaped(code: int) -> str:
    return f"\\U{code:08x}" if code > _BMP_END else f"\\u{code:04x}"


def char_class(body: str) -> str:
    """`[body]`, or the same set of characters written as a negated class when that compiles faster.

    Python's regex compiler visits every BMP character of every range in a class, one by one: Unicode name
    classes (53,000 characters each, eleven in one lexer) made compiling the lexers a tenth of a CLI call. Their
    complements hold a fifth as many. tests/test_hardening2_guard.py checks both spell the same set on every code
    point.
    """
    ranges = class_ranges(body)
    gaps, start = [], 0
    for low, high in ranges:
        if low > start:
            gaps.append((start, low - 1))
        start = high + 1
    if start <= _MAX_CODE:
        gaps.append((start, _MAX_CODE))

    def cost(spans: list[tuple[int, int]]) -> int:
        return sum(min(high, _BMP_END) - low + 1 for low, high in spans if low <= _BMP_END)

    if cost(gaps) >= cost(ranges):
        return f"[{body}]"
    return "[^" + "".join(_escaped(lo) if lo == hi else f"{_escaped(lo)}-{_escaped(hi)}" for lo, hi in gaps) + "]"


def _names(*, oxigraph: bool) -> NameRules:
    base = _PN_CHARS_BASE_BMP + ("" if oxigraph else "\U00010000-\U000effff")
    chars_u = base + "_"
    chars = chars_u + r"\-0-9\u00b7\u0300-\u036f\u203f-\u2040"
    c_base, c_chars, c_local = char_class(base), char_class(chars), char_class(chars + ":")
    c_first = char_class(chars_u + "0-9")
    c_var = char_class(chars_u + r"0-9\u00b7\u0300-\u036f\u203f-\u2040")
    prefix = rf"{c_base}{c_chars}*+(?:\.++{c_chars}++)*+"
    first = rf"(?:{char_class(chars_u + ':0-9')}|{_PLX})"
    if oxigraph:
        local = rf"{first}(?:{c_local}|{_PLX})*+(?:\.++(?:{c_local}|{_PLX})++)?+"
    else:  # dots anywhere but at the end
        local = rf"{first}(?:{c_local}|{_PLX}|\.++(?={c_local}|{_PLX}))*+"
    return NameRules(
        pn_prefix=prefix,
        pn_local=local,
        pname=rf"(?:{prefix})?+:(?:{local})?+",
        blank_node=rf"_:{c_first}{c_chars}*+(?:\.++{c_chars}++)*+",
        varname=rf"{c_first}{c_var}*+",
    )


SPARQL_NAMES = _names(oxigraph=False)
OXIGRAPH_NAMES = _names(oxigraph=True)


class _Lexer:
    """One dialect's token patterns, each compiled on first use: their Unicode classes take tens of milliseconds
    to compile, and most processes never need `token_no_pname` (or one of the dialects)."""

    def __init__(self, names: NameRules) -> None:
        self._names = names

    @functools.cached_property
    def token(self) -> re.Pattern[str]:
        """Any token."""
        return re.compile("|".join(self._parts(pname=True)))

    # Inside a run of name characters that made no prefixed name (`true-true-…`, `a.a.a…`), no later position can
    # start one either (it would end where the first attempt ended): lexing there leaves the PNAME attempt out, so a
    # long run is scanned a fixed number of times, not once per word in it.
    @functools.cached_property
    def token_no_pname(self) -> re.Pattern[str]:
        """Any token but a prefixed name."""
        return re.compile("|".join(self._parts(pname=False)))

    @functools.cached_property
    def name_run(self) -> re.Pattern[str]:
        """A run of prefix-name characters."""
        return re.compile(self._names.pn_prefix)

    def _parts(self, *, pname: bool) -> list[str]:
        names = self._names
        return [
            rf"(?P<IRI>{IRIREF})",
            rf"(?P<LSTRING1>'''(?:(?:''|')?+(?:[^'\\]|{_ECHAR}))*+''')",
            rf'(?P<LSTRING2>"""(?:(?:""|")?+(?:[^"\\]|{_ECHAR}))*+""")',
            rf"(?P<STRING1>'(?:[^'\\\n\r]|{_ECHAR})*+')",
            rf'(?P<STRING2>"(?:[^"\\\n\r]|{_ECHAR})*+")',
            rf"(?P<VAR>[?$]{names.varname})",
            rf"(?P<BNODE>{names.blank_node})",
            *([rf"(?P<PNAME>{names.pname})"] if pname else []),
            rf"(?P<LANGTAG>{LANGTAG})",
            r"(?P<DOUBLE>(?:[0-9]++\.[0-9]*+|\.[0-9]++|[0-9]++)[eE][+-]?[0-9]++)",
            r"(?P<DECIMAL>[0-9]*+\.[0-9]++)",
            r"(?P<INTEGER>[0-9]++)",
            r"(?P<NIL>\([ \t\r\n]*+\))",  # whitespace only: no comment inside NIL or ANON
            r"(?P<ANON>\[[ \t\r\n]*+\])",
            r"(?P<WORD>[A-Za-z_][A-Za-z0-9_]*+)",
            # SPARQL 1.2: <<( )>> triple terms, << >> reified triples, {| |} annotations, ~ reifiers.
            r"(?P<PUNCT><<\(|\)>>|<<|>>|\{\||\|\}|\^\^|&&|\|\||!=|<=|>=|[{}()\[\].,;|/^*+?!=<>\-~])",
        ]


_LEXERS = {False: _Lexer(SPARQL_NAMES), True: _Lexer(OXIGRAPH_NAMES)}
_SKIP = re.compile(_WS)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_GLUED = re.compile(
    r"(PREFIX|BASE|SELECT|DISTINCT|REDUCED|WHERE|LIMIT|OFFSET|FILTER|OPTIONAL|UNION|ORDER|GROUP)(?=[^\s])",
    re.I,
)
_RELOP = re.compile(r"<=|>=|!=|=|<|>")
_UNESCAPE = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", "\\": "\\", '"': '"', "'": "'"}
_ESCAPES = re.compile(_ECHAR)
_UCHARS = re.compile(UCHAR)
# What an IRI may not hold once its \u escapes are decoded (Oxigraph: "IRI parsing failed").
_NOT_IN_IRI = re.compile(r'[<>"{}|^`\\\x00-\x20]')
TICK_EVERY = 2048  # tokens between two looks at the caller's deadline and cancel signal
MAX_QUOTED_DEPTH = 64  # as the guard's MAX_NESTING for brackets


@dataclass(frozen=True)
class ParserToken:
    """A lexical token; `kind` is IRI, PNAME, VAR, BNODE, STRING, LANGTAG, INTEGER, DECIMAL, DOUBLE, NIL,
    ANON, WORD, PUNCT or EOF; `value` is upper-cased for WORD."""

    kind: str
    value: str
    text: str
    start: int
    end: int


def code_point(escape: str) -> str:
    """The character a \\u or \\U escape stands for; ValueError for a surrogate or beyond U+10FFFF (Rust's `char`
    has neither, so Oxigraph refuses them)."""
    code = int(escape[2:], 16)
    if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        raise ValueError(f"{escape} stands for no character")
    return chr(code)


def _unescape_string(body: str) -> str:
    def repl(m: re.Match[str]) -> str:
        esc = m.group(0)
        if esc[1] in "uU":
            return code_point(esc)
        return _UNESCAPE[esc[1]]

    return _ESCAPES.sub(repl, body)


def decode_uchars(text: str) -> str:
    """`text` with every \\u and \\U escape decoded, as SPARQL 1.1 (§19.2) reads a query before parsing it; an escape
    that stands for no character is left as it is."""
    if "\\u" not in text and "\\U" not in text:
        return text

    def repl(m: re.Match[str]) -> str:
        try:
            return code_point(m.group())
        except ValueError:
            return m.group()

    return _UCHARS.sub(repl, text)


def _describe(tok: ParserToken) -> str:
    if tok.kind == "EOF":
        return "the end of the query"
    text = tok.text if len(tok.text) <= 40 else tok.text[:37] + "…"
    return f"'{text}'"


# ---------------------------------------------------------------------------------------- built-ins

# name -> (min args, max args); None max = any number (ExpressionList)
_BUILTINS: dict[str, tuple[int, int | None]] = {
    "STR": (1, 1),
    "LANG": (1, 1),
    "LANGMATCHES": (2, 2),
    "DATATYPE": (1, 1),
    "IRI": (1, 1),
    "URI": (1, 1),
    "BNODE": (0, 1),
    "RAND": (0, 0),
    "ABS": (1, 1),
    "CEIL": (1, 1),
    "FLOOR": (1, 1),
    "ROUND": (1, 1),
    "CONCAT": (0, None),
    "SUBSTR": (2, 3),
    "STRLEN": (1, 1),
    "REPLACE": (3, 4),
    "UCASE": (1, 1),
    "LCASE": (1, 1),
    "ENCODE_FOR_URI": (1, 1),
    "CONTAINS": (2, 2),
    "STRSTARTS": (2, 2),
    "STRENDS": (2, 2),
    "STRBEFORE": (2, 2),
    "STRAFTER": (2, 2),
    "YEAR": (1, 1),
    "MONTH": (1, 1),
    "DAY": (1, 1),
    "HOURS": (1, 1),
    "MINUTES": (1, 1),
    "SECONDS": (1, 1),
    "TIMEZONE": (1, 1),
    "TZ": (1, 1),
    "NOW": (0, 0),
    "UUID": (0, 0),
    "STRUUID": (0, 0),
    "MD5": (1, 1),
    "SHA1": (1, 1),
    "SHA256": (1, 1),
    "SHA384": (1, 1),
    "SHA512": (1, 1),
    "COALESCE": (0, None),
    "IF": (3, 3),
    "STRLANG": (2, 2),
    "STRDT": (2, 2),
    "SAMETERM": (2, 2),
    "ISIRI": (1, 1),
    "ISURI": (1, 1),
    "ISBLANK": (1, 1),
    "ISLITERAL": (1, 1),
    "ISNUMERIC": (1, 1),
    "REGEX": (2, 3),
    # SPARQL 1.2, and ADJUST (SEP-0002), which Oxigraph 0.5 accepts
    "LANGDIR": (1, 1),
    "STRLANGDIR": (3, 3),
    "HASLANG": (1, 1),
    "HASLANGDIR": (1, 1),
    "ISTRIPLE": (1, 1),
    "TRIPLE": (3, 3),
    "SUBJECT": (1, 1),
    "PREDICATE": (1, 1),
    "OBJECT": (1, 1),
    "ADJUST": (2, 2),
}
_AGGREGATES = frozenset({"COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT"})
_UPDATE_WORDS = frozenset(
    {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"}
)
_GPNT_WORDS = frozenset({"OPTIONAL", "LATERAL", "MINUS", "GRAPH", "SERVICE", "FILTER", "BIND", "VALUES"})
_TERM_START = frozenset(
    {"IRI", "PNAME", "VAR", "BNODE", "STRING", "INTEGER", "DECIMAL", "DOUBLE", "NIL", "ANON"}
)


@dataclass
class _Expr:
    """What an expression mentions: variables outside aggregates, and whether it aggregates."""

    vars: set[str] = field(default_factory=set)
    aggregate: bool = False

    def add(self, other: _Expr) -> _Expr:
        self.vars |= other.vars
        self.aggregate = self.aggregate or other.aggregate
        return self


@dataclass
class _Projection:
    star: bool
    items: list[tuple[str, _Expr | None, ParserToken]]


# ------------------------------------------------------------------------------------------- parser


class _Parser:
    def __init__(
        self,
        text: str,
        *,
        extra_prefixes: dict[str, str] | None,
        collect_undefined: bool,
        tick: Callable[[], None] | None = None,
        oxigraph: bool = False,
        max_clauses: int | None = None,
    ) -> None:
        self.text = text
        self.clauses = 0
        self._max_clauses = max_clauses
        self.pos = 0
        self._cache: dict[int, ParserToken] = {}
        self._lexer = _LEXERS[oxigraph]
        self._no_pname_until = 0  # see _Lexer.token_no_pname
        self._tick = tick
        self._lexed = 0
        self._quoted = 0  # reified triples and triple terms open around the current position
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\n|\r", text)]
        self.prefixes: dict[str, str] = dict(extra_prefixes or {})
        self.declared: dict[str, str] = {}
        self.base: str | None = None
        self.collect_undefined = collect_undefined
        self.undefined: dict[str, tuple[int, int]] = {}
        self.patterns: list[TriplePattern] = []
        self.template: list[TriplePattern] = []
        self.services: list[ServiceRef] = []
        self.values: dict[str, list[Term]] = {}
        self.iri_uses: list[IriUse] = []
        self._bnodes = 0
        self._bgp = 0
        self._bnode_bgp: dict[str, int] = {}
        self._service: str | None = None
        self._context: tuple[str, ...] = ()
        self._scope: tuple[int, ...] = ()
        self.projections: dict[int, frozenset[str] | None] = {}
        self._agg_ok = False
        self._agg_where = "this place"
        self._in_template = False

    # -- positions and errors
    def linecol(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def error(self, message: str, tok: ParserToken | None = None) -> SparqlSyntaxError:
        offset = tok.start if tok is not None else self.pos
        line, col = self.linecol(offset)
        return SparqlSyntaxError(message, line, col, offset)

    def expected(self, what: str, tok: ParserToken | None = None) -> SparqlSyntaxError:
        tok = tok or self.peek()
        hint = ""
        if tok.kind == "PUNCT" and tok.value == "<":
            hint = " (an IRI in <…> cannot contain spaces, quotes, braces, |, ^, ` or \\)"
        elif tok.kind in ("PNAME", "WORD") and (glued := _GLUED.match(tok.text)) is not None:
            hint = f" (a missing space after {glued.group(1)}?)"
        return self.error(f"expected {what}, found {_describe(tok)}{hint}", tok)

    def clause(self, tok: ParserToken | None = None) -> None:
        """Count one clause or node: a group, triple pattern, FILTER, BIND, VALUES block, projected item, FROM,
        DESCRIBE target, GROUP/HAVING/ORDER condition, LIMIT/OFFSET, operator, function call, path step or quoted
        triple; past the budget, stop reading (TooManyClauses)."""
        self.clauses += 1
        if self._max_clauses is not None and self.clauses > self._max_clauses:
            line, col = self.linecol(tok.start if tok is not None else self._skip(self.pos))
            raise TooManyClauses(self._max_clauses, line, col)

    # -- lexing
    def _skip(self, pos: int) -> int:
        m = _SKIP.match(self.text, pos)
        return m.end() if m else pos

    def peek(self) -> ParserToken:
        tok = self._cache.get(self.pos)
        if tok is not None:
            return tok
        start = self._skip(self.pos)
        if start >= len(self.text):
            tok = ParserToken("EOF", "", "", start, start)
        else:
            self._lexed += 1
            if self._tick is not None and self._lexed % TICK_EVERY == 0:
                self._tick()
            full = start >= self._no_pname_until
            m = (self._lexer.token if full else self._lexer.token_no_pname).match(self.text, start)
            if m is None:
                ch = self.text[start]
                line, col = self.linecol(start)
                what = (
                    "an unterminated string" if ch in "\"'" else f"an unexpected character {ch!r}"
                )
                raise SparqlSyntaxError(what, line, col, start)
            kind = m.lastgroup or "PUNCT"
            raw = m.group()
            if kind.startswith(("LSTRING", "STRING")):
                cut = 3 if kind.startswith("L") else 1
                try:
                    value = _unescape_string(raw[cut:-cut])
                except ValueError as exc:
                    line, col = self.linecol(start)
                    raise SparqlSyntaxError(f"in a string, {exc}", line, col, start) from None
                tok = ParserToken("STRING", value, raw, start, m.end())
            elif kind == "WORD":
                if full and (run := self._lexer.name_run.match(self.text, start)) and run.end() > m.end():
                    self._no_pname_until = run.end()
                tok = ParserToken("WORD", raw if raw == "a" else raw.upper(), raw, start, m.end())
            else:
                tok = ParserToken(kind, raw, raw, start, m.end())
        self._cache[self.pos] = tok
        return tok

    def next(self) -> ParserToken:
        tok = self.peek()
        self.pos = tok.end
        return tok

    def is_punct(self, value: str, tok: ParserToken | None = None) -> bool:
        tok = tok or self.peek()
        return tok.kind == "PUNCT" and tok.value == value

    def is_word(self, *values: str) -> bool:
        tok = self.peek()
        return tok.kind == "WORD" and tok.value in values and tok.text != "a"

    def accept_punct(self, value: str) -> bool:
        if self.is_punct(value):
            self.next()
            return True
        return False

    def accept_word(self, value: str) -> bool:
        if self.is_word(value):
            self.next()
            return True
        return False

    def expect_punct(self, value: str, what: str | None = None) -> ParserToken:
        if not self.is_punct(value):
            raise self.expected(what or f"'{value}'")
        return self.next()

    def expect_word(self, value: str) -> ParserToken:
        if not self.is_word(value):
            raise self.expected(value)
        return self.next()

    # -- names
    def iri_of(self, tok: ParserToken, role: str = "other") -> str:
        if tok.kind == "IRI":
            value = self.check_iri(tok)
        else:
            prefix, _, local = tok.text.partition(":")
            local = re.sub(r"\\(.)", r"\1", local)
            if prefix in self.prefixes:
                value = self.prefixes[prefix] + local
            elif self.collect_undefined:
                self.undefined.setdefault(prefix, self.linecol(tok.start))
                value = f"{UNDEFINED_PREFIX_NS}{prefix}:{local}"
            else:
                raise self.error(
                    f"the prefix '{prefix}:' is not declared; add PREFIX {prefix}: <namespace IRI>",
                    tok,
                )
        self.iri_uses.append(IriUse(value, tok.start, tok.end, role, self._service))
        return value

    def check_iri(self, tok: ParserToken) -> str:
        value = tok.text[1:-1]
        if "\\" in value:
            # \u escapes are decoded (as Oxigraph does) before the IRI is read: the guard compares what the engine
            # will call, not its spelling.
            try:
                value = _UCHARS.sub(lambda m: code_point(m.group()), value)
            except ValueError as exc:
                raise self.error(f"{_describe(tok)} is not a valid IRI: {exc}", tok) from None
            if (bad := _NOT_IN_IRI.search(value)) is not None:
                raise self.error(
                    f"{_describe(tok)} is not a valid IRI: an escape in it stands for {bad.group()!r}, which an IRI "
                    "cannot hold",
                    tok,
                )
        if _SCHEME.match(value) is None:
            if self.base is None:
                raise self.error(
                    f"{_describe(tok)} is not an absolute IRI (it needs a scheme such as http:) and there is no BASE",
                    tok,
                )
            value = urljoin(self.base, value)
        if re.search(r"%(?![0-9A-Fa-f]{2})", value):
            raise self.error(
                f"{_describe(tok)} is not a valid IRI: '%' must be followed by two hex digits", tok
            )
        if value.count("#") > 1:
            raise self.error(f"{_describe(tok)} is not a valid IRI: it has more than one '#'", tok)
        return value

    def new_bnode(self) -> BNode:
        self._bnodes += 1
        return BNode(f"_b{self._bnodes}")

    def bnode_label(self, tok: ParserToken) -> BNode:
        label = tok.text[2:]
        if not self._in_template:
            seen = self._bnode_bgp.setdefault(label, self._bgp)
            if seen != self._bgp:
                raise self.error(
                    f"the blank node _:{label} is used in two different graph patterns; use a variable ?{label} instead",
                    tok,
                )
        return BNode(label)

    # -- query
    def parse(self) -> ParsedQuery:
        self.prologue()
        tok = self.peek()
        if tok.kind != "WORD":
            raise self.expected("SELECT, ASK, CONSTRUCT or DESCRIBE")
        if tok.value in _UPDATE_WORDS:
            raise self.error(
                f"{tok.value} is SPARQL Update, not a query: only SELECT, ASK, CONSTRUCT and DESCRIBE are accepted",
                tok,
            )
        form = tok.value
        if form == "SELECT":
            self.select_query()
        elif form == "CONSTRUCT":
            self.construct_query()
        elif form == "DESCRIBE":
            self.describe_query()
        elif form == "ASK":
            self.next()
            self.dataset_clauses()
            self.where_clause(required=True)
            self.solution_modifier(projection=None, where_scope=set())
        else:
            raise self.expected("SELECT, ASK, CONSTRUCT or DESCRIBE")
        self.values_clause()
        end = self.peek()
        if end.kind != "EOF":
            raise self.expected("the end of the query", end)
        return ParsedQuery(
            form=form,
            prefixes=dict(self.declared),
            base=self.base,
            patterns=self.patterns,
            template=self.template,
            services=self.services,
            values=self.values,
            iri_uses=self.iri_uses,
            undefined_prefixes=dict(self.undefined),
            projections=dict(self.projections),
            clauses=self.clauses,
        )

    def prologue(self) -> None:
        while True:
            if self.accept_word("BASE"):
                tok = self.next()
                if tok.kind != "IRI":
                    raise self.expected("an IRI after BASE", tok)
                self.base = self.check_iri(tok)
            elif self.accept_word("PREFIX"):
                name = self.next()
                if name.kind != "PNAME" or not name.text.endswith(":") or name.text.count(":") != 1:
                    raise self.expected("a prefix name such as 'ex:' after PREFIX", name)
                iri = self.next()
                if iri.kind != "IRI":
                    raise self.expected(f"an IRI in <…> after PREFIX {name.text}", iri)
                ns = self.check_iri(iri)
                self.prefixes[name.text[:-1]] = ns
                self.declared[name.text[:-1]] = ns
            elif self.accept_word("VERSION"):  # SPARQL 1.2: a short string, not a long one
                version = self.next()
                if version.kind != "STRING" or version.text[:3] in ("'''", '"""'):
                    raise self.expected('a version string such as "1.2" after VERSION', version)
            else:
                return

    def select_clause(self) -> _Projection:
        self.expect_word("SELECT")
        if not self.accept_word("DISTINCT"):
            self.accept_word("REDUCED")
        if self.accept_punct("*"):
            return _Projection(True, [])
        items: list[tuple[str, _Expr | None, ParserToken]] = []
        names: set[str] = set()
        while True:
            tok = self.peek()
            if tok.kind == "VAR" or self.is_punct("("):
                self.clause(tok)
            if tok.kind == "VAR":
                self.next()
                if tok.text[1:] in names:
                    raise self.error(f"the variable {tok.text} is projected twice", tok)
                names.add(tok.text[1:])
                items.append((tok.text[1:], None, tok))
            elif self.is_punct("("):
                self.next()
                self._agg_ok = True
                expr = self.expression()
                self._agg_ok = False
                self.expect_word("AS")
                var = self.next()
                if var.kind != "VAR":
                    raise self.expected("a variable after AS", var)
                if var.text[1:] in names:
                    raise self.error(f"the variable {var.text} is projected twice", var)
                names.add(var.text[1:])
                items.append((var.text[1:], expr, var))
                self.expect_punct(")")
            else:
                break
        if not items:
            tok = self.peek()
            if tok.kind == "WORD" and tok.value in _AGGREGATES:
                raise self.error(
                    f"an aggregate in SELECT must be written ({tok.text}(…) AS ?name) in SPARQL 1.1",
                    tok,
                )
            raise self.expected("'*', a variable or (expression AS ?var) after SELECT")
        tok = self.peek()
        if tok.kind == "WORD" and tok.value in _AGGREGATES | set(_BUILTINS):
            raise self.error(
                f"an expression in SELECT must be written ({tok.text}(…) AS ?name)", tok
            )
        return _Projection(False, items)

    def select_query(self) -> None:
        projection = self.select_clause()
        self.dataset_clauses()
        scope = self.where_clause(required=True)
        self.solution_modifier(projection, scope)

    def sub_select(self) -> set[str]:
        projection = self.select_clause()
        sid = len(self.projections) + 1
        self.projections[sid] = (
            None if projection.star else frozenset(n for n, _, _ in projection.items)
        )
        old_ctx, old_scope = self._context, self._scope
        self._context, self._scope = (*old_ctx, "SUBQUERY"), (*old_scope, sid)
        scope = self.where_clause(required=True)
        self._context, self._scope = old_ctx, old_scope
        self.solution_modifier(projection, scope)
        self.values_clause()
        return set(scope) if projection.star else {name for name, _, _ in projection.items}

    def check_projection(self, projection: _Projection, bound: set[str], *, grouped: bool) -> None:
        # After grouping only the group keys are bound, so (SAMPLE(?x) AS ?x) is fine there.
        where = "GROUP BY" if grouped else "the WHERE clause"
        for name, expr, tok in projection.items:
            if expr is not None and name in bound:
                raise self.error(
                    f"(… AS ?{name}) reuses ?{name}, which {where} already binds; pick a new name",
                    tok,
                )

    def construct_query(self) -> None:
        self.expect_word("CONSTRUCT")
        if self.is_punct("{"):
            self.next()
            self._in_template = True
            self.construct_triples(until="}")
            self._in_template = False
            self.expect_punct("}")
            self.dataset_clauses()
            scope = self.where_clause(required=True)
            self.solution_modifier(None, scope)
            return
        self.dataset_clauses()
        self.expect_word("WHERE")
        self.expect_punct("{")
        self._bgp += 1
        start = len(self.patterns)
        self.construct_triples(until="}")
        self.expect_punct("}")
        self.template.extend(self.patterns[start:])
        self.solution_modifier(None, set())

    def describe_query(self) -> None:
        self.expect_word("DESCRIBE")
        if not self.accept_punct("*"):
            count = 0
            while self.peek().kind in ("VAR", "IRI", "PNAME"):
                self.clause()
                tok = self.next()
                if tok.kind != "VAR":
                    self.iri_of(tok)
                count += 1
            if count == 0:
                raise self.expected("'*', a variable or an IRI after DESCRIBE")
        self.dataset_clauses()
        scope: set[str] = set()
        if self.is_word("WHERE") or self.is_punct("{"):
            scope = self.where_clause(required=True)
        self.solution_modifier(None, scope)

    def dataset_clauses(self) -> None:
        while self.is_word("FROM"):
            self.clause()
            self.next()
            self.accept_word("NAMED")
            tok = self.next()
            if tok.kind not in ("IRI", "PNAME"):
                raise self.expected("an IRI after FROM", tok)
            self.iri_of(tok)

    def where_clause(self, *, required: bool) -> set[str]:
        has_where = self.accept_word("WHERE")
        if not self.is_punct("{"):
            if has_where or required:
                raise self.expected("'{' to open the WHERE clause")
            return set()
        return self.group_graph_pattern()

    def solution_modifier(self, projection: _Projection | None, where_scope: set[str]) -> None:
        group_vars: set[str] = set()
        grouped = False
        aggregated = projection is not None and any(
            e is not None and e.aggregate for _, e, _ in projection.items
        )
        if self.is_word("GROUP"):
            self.next()
            self.expect_word("BY")
            grouped = True
            count = 0
            while True:
                tok = self.peek()
                if tok.kind == "VAR":
                    self.next()
                    group_vars.add(tok.text[1:])
                elif self.is_punct("("):
                    self.next()
                    self._agg_check_where("GROUP BY")
                    self.expression()
                    if self.accept_word("AS"):
                        var = self.next()
                        if var.kind != "VAR":
                            raise self.expected("a variable after AS", var)
                        group_vars.add(var.text[1:])
                    self.expect_punct(")")
                elif tok.kind in ("IRI", "PNAME") or (
                    tok.kind == "WORD" and tok.value in _BUILTINS
                ):
                    self._agg_check_where("GROUP BY")
                    self.primary_expression()
                else:
                    break
                count += 1
                self.clause()
            if count == 0:
                raise self.expected("a variable or expression after GROUP BY")
        if self.accept_word("HAVING"):
            count = 0
            while self.is_punct("(") or self.peek().kind in ("IRI", "PNAME", "WORD"):
                if self.peek().kind == "WORD" and self.peek().value not in {
                    *_BUILTINS,
                    "NOT",
                    "EXISTS",
                    *_AGGREGATES,
                }:
                    break
                self._agg_ok = True
                aggregated = self.constraint().aggregate or aggregated
                self._agg_ok = False
                count += 1
                self.clause()
            if count == 0:
                raise self.expected("a condition in (…) after HAVING")
            grouped = True
        if self.is_word("ORDER"):
            self.next()
            self.expect_word("BY")
            count = 0
            while True:
                tok = self.peek()
                self._agg_ok = True
                if tok.kind == "WORD" and tok.value in ("ASC", "DESC") and tok.text != "a":
                    self.next()
                    if not self.is_punct("("):
                        raise self.expected(f"'(' after {tok.value}")
                    aggregated = self.bracketted_expression().aggregate or aggregated
                elif tok.kind == "VAR":
                    self.next()
                elif (
                    self.is_punct("(")
                    or tok.kind in ("IRI", "PNAME")
                    or (
                        tok.kind == "WORD"
                        and (
                            tok.value in _BUILTINS or tok.value in _AGGREGATES or tok.value == "NOT"
                        )
                    )
                ):
                    aggregated = self.constraint().aggregate or aggregated
                else:
                    self._agg_ok = False
                    break
                self._agg_ok = False
                count += 1
                self.clause()
            if count == 0:
                raise self.expected("a variable or expression after ORDER BY")
        self.limit_offset()
        if projection is not None:
            aggregate_mode = grouped or aggregated
            self.check_projection(
                projection, group_vars if aggregate_mode else where_scope, grouped=aggregate_mode
            )
            if aggregate_mode:
                self.check_grouping(projection, group_vars)

    def check_grouping(self, projection: _Projection, group_vars: set[str]) -> None:
        if projection.star:
            raise self.error(
                "SELECT * cannot be used with GROUP BY or aggregates; list the variables"
            )
        aliases: set[str] = set()
        for name, expr, tok in projection.items:
            if expr is None:
                if name not in group_vars and name not in aliases:
                    raise self.error(
                        f"?{name} is selected but neither grouped nor aggregated; add it to GROUP BY "
                        f"or use (SAMPLE(?{name}) AS ?…)",
                        tok,
                    )
            else:
                loose = sorted(expr.vars - group_vars - aliases)
                if loose:
                    raise self.error(
                        f"(… AS ?{name}) uses ?{loose[0]} outside an aggregate, but ?{loose[0]} is not grouped; "
                        f"add it to GROUP BY or wrap it in an aggregate such as SAMPLE()",
                        tok,
                    )
                aliases.add(name)

    def limit_offset(self) -> None:
        seen: set[str] = set()
        while self.is_word("LIMIT", "OFFSET"):
            self.clause()
            word = self.next().value
            if word in seen:
                raise self.error(f"{word} is given twice")
            seen.add(word)
            tok = self.next()
            if tok.kind != "INTEGER":
                raise self.expected(f"a non-negative integer after {word}", tok)

    def values_clause(self) -> None:
        if self.accept_word("VALUES"):
            self.data_block()

    def data_block(self) -> list[str]:
        tok = self.peek()
        self.clause(tok)
        if tok.kind == "VAR":
            self.next()
            var = tok.text[1:]
            self.expect_punct("{")
            while not self.is_punct("}"):
                value = self.data_block_value()
                if value is not None:
                    self.values.setdefault(var, []).append(value)
            self.next()
            return [var]
        variables: list[str] = []
        if tok.kind == "NIL":
            self.next()
        elif self.accept_punct("("):
            while self.peek().kind == "VAR":
                variables.append(self.next().text[1:])
            self.expect_punct(")", "a variable or ')'")
        else:
            raise self.expected("a variable or (variables) after VALUES")
        self.expect_punct("{")
        while True:
            row = self.peek()
            if row.kind == "NIL":
                self.next()
                if variables:
                    raise self.error(
                        f"this VALUES row has 0 values for {len(variables)} variables", row
                    )
                continue
            if not self.accept_punct("("):
                break
            count = 0
            while not self.is_punct(")"):
                value = self.data_block_value()
                if count < len(variables) and value is not None:
                    self.values.setdefault(variables[count], []).append(value)
                count += 1
            self.next()
            if count != len(variables):
                raise self.error(
                    f"this VALUES row has {count} values for {len(variables)} variables", row
                )
        self.expect_punct("}", "'(' or '}'")
        return variables

    def data_block_value(self) -> Term | None:
        tok = self.peek()
        if self.is_punct("<<("):
            self.triple_term_data()
            return None  # a triple term: no single value to record
        if tok.kind == "WORD" and tok.value == "UNDEF" and tok.text != "a":
            self.next()
            return None
        if tok.kind in ("IRI", "PNAME"):
            self.next()
            return Iri(self.iri_of(tok))
        if (
            tok.kind in ("STRING", "INTEGER", "DECIMAL", "DOUBLE")
            or self.is_punct("+")
            or self.is_punct("-")
        ):
            return self.literal()
        if tok.kind == "WORD" and tok.value in ("TRUE", "FALSE") and tok.text in ("true", "false"):
            self.next()
            return Literal(tok.text, XSD + "boolean")
        raise self.expected("an IRI, a literal or UNDEF in VALUES")

    # -- graph patterns
    def group_graph_pattern(self) -> set[str]:
        self.clause()
        self.expect_punct("{")
        scope = self.sub_select() if self.is_word("SELECT") else self.group_graph_pattern_sub()
        self.expect_punct("}", "'}' or a graph pattern")
        return scope

    def group_graph_pattern_sub(self) -> set[str]:
        scope: set[str] = set()
        self._bgp += 1
        after_triples_without_dot = False
        while True:
            tok = self.peek()
            if self.is_punct("}") or tok.kind == "EOF":
                return scope
            if self.is_punct("{") or (
                tok.kind == "WORD" and tok.value in _GPNT_WORDS and tok.text != "a"
            ):
                self.graph_pattern_not_triples(scope)
                after_triples_without_dot = False
                self.accept_punct(".")
                continue
            if self.starts_triples():
                if after_triples_without_dot:
                    raise self.expected("'.' between triple patterns")
                scope |= self.triples_same_subject_path()
                after_triples_without_dot = not self.accept_punct(".")
                continue
            if tok.kind == "WORD" and tok.value in ("UNION",):
                raise self.error("UNION must come between two { … } groups", tok)
            raise self.expected("a triple pattern, FILTER, OPTIONAL, BIND, VALUES, … or '}'")

    def starts_triples(self) -> bool:
        tok = self.peek()
        if tok.kind in _TERM_START:
            return True
        if tok.kind == "PUNCT" and tok.value in ("(", "[", "+", "-", "<<", "<<("):
            return True
        return tok.kind == "WORD" and tok.text in ("true", "false")

    def with_context(self, label: str) -> tuple[str, ...]:
        old = self._context
        self._context = (*old, label)
        return old

    def graph_pattern_not_triples(self, scope: set[str]) -> None:
        tok = self.peek()
        if self.is_punct("{"):
            outer = self._context
            first = len(self.patterns)
            inner = self.group_graph_pattern()
            if self.is_word("UNION"):
                # The first branch is only known to be a UNION branch once UNION follows it.
                self.patterns[first:] = [
                    replace(p, context=(*outer, "UNION", *p.context[len(outer) :]))
                    for p in self.patterns[first:]
                ]
            while self.accept_word("UNION"):
                old = self.with_context("UNION")
                inner |= self.group_graph_pattern()
                self._context = old
            scope |= inner
            self._bgp += 1
            return
        word = tok.value
        self.next()
        if word == "OPTIONAL":
            old = self.with_context("OPTIONAL")
            scope |= self.group_graph_pattern()
            self._context = old
        elif word == "LATERAL":  # SEP-0006, which Oxigraph 0.5 accepts
            old = self.with_context("LATERAL")
            scope |= self.group_graph_pattern()
            self._context = old
        elif word == "MINUS":
            old = self.with_context("MINUS")
            self.group_graph_pattern()
            self._context = old
        elif word == "GRAPH":
            name = self.next()
            if name.kind == "VAR":
                scope.add(name.text[1:])
            elif name.kind in ("IRI", "PNAME"):
                self.iri_of(name)
            else:
                raise self.expected("a variable or IRI after GRAPH", name)
            old = self.with_context("GRAPH")
            scope |= self.group_graph_pattern()
            self._context = old
        elif word == "SERVICE":
            after = self.peek()
            if after.kind in ("WORD", "PNAME") and after.text[:6].upper() == "SILENT" and after.text.upper() != "SILENT":
                # Oxigraph matches keywords as prefixes: it reads `SERVICE SILENTLY:x` as SERVICE SILENT LY:x.
                raise self.error(
                    f"{_describe(after)} after SERVICE reads as SILENT followed by the rest; write SILENT, a space, "
                    "and the endpoint",
                    after,
                )
            silent = self.accept_word("SILENT")
            name = self.next()
            if name.kind == "VAR":
                endpoint = name.text
                scope.add(name.text[1:])
            elif name.kind in ("IRI", "PNAME"):
                endpoint = self.iri_of(name)
            else:
                raise self.expected("an endpoint IRI or a variable after SERVICE", name)
            line, col = self.linecol(tok.start)
            self.services.append(ServiceRef(endpoint, silent, line, col))
            old_service = self._service
            self._service = endpoint
            old = self.with_context("SERVICE")
            scope |= self.group_graph_pattern()
            self._context = old
            self._service = old_service
        elif word == "FILTER":
            self.clause(tok)
            self.where_constraint("FILTER")
            return  # a FILTER does not split a basic graph pattern
        elif word == "BIND":
            self.clause(tok)
            self.expect_punct("(")
            self._agg_check_where("BIND")
            self.expression()
            self.expect_word("AS")
            var = self.next()
            if var.kind != "VAR":
                raise self.expected("a variable after AS", var)
            if var.text[1:] in scope:
                raise self.error(
                    f"BIND(… AS {var.text}): {var.text} is already used before this BIND in the same group; "
                    "pick a new variable name",
                    var,
                )
            scope.add(var.text[1:])
            self.expect_punct(")")
        elif word == "VALUES":
            scope.update(self.data_block())
        self._bgp += 1

    def _agg_check_where(self, where: str) -> None:
        self._agg_ok = False
        self._agg_where = where

    def where_constraint(self, where: str) -> _Expr:
        self._agg_check_where(where)
        return self.constraint()

    # -- triples
    def triples_same_subject_path(self) -> set[str]:
        tok = self.peek()
        scope: set[str] = set()
        if self.is_punct("["):
            self.next()
            subject: Term = self.new_bnode()
            scope |= self.property_list(subject, paths=True)
            self.expect_punct("]")
            if not (
                self.is_punct(".") or self.is_punct("}") or self.starts_graph_pattern_not_triples()
            ):
                scope |= self.property_list(subject, paths=True)
            return scope
        if self.is_punct("("):
            subject, inner = self.collection(paths=True)
            scope |= inner
            if not (
                self.is_punct(".") or self.is_punct("}") or self.starts_graph_pattern_not_triples()
            ):
                scope |= self.property_list(subject, paths=True)
            return scope
        if self.is_punct("<<"):  # a reified triple may stand alone
            subject, inner = self.reified_triple()
            scope |= inner
            if self.starts_verb(paths=True):
                scope |= self.property_list(subject, paths=True)
            return scope
        if self.is_punct("<<("):
            subject, inner = self.triple_term()
            scope |= inner
        else:
            subject = self.var_or_term()
        if isinstance(subject, Var):
            scope.add(subject.name)
        if not self.starts_verb(paths=True):
            raise self.expected(f"a predicate after the subject {_describe(tok)}")
        scope |= self.property_list(subject, paths=True)
        return scope

    def starts_graph_pattern_not_triples(self) -> bool:
        tok = self.peek()
        return self.is_punct("{") or (
            tok.kind == "WORD" and tok.value in _GPNT_WORDS and tok.text != "a"
        )

    def construct_triples(self, until: str) -> None:
        while not self.is_punct(until):
            tok = self.peek()
            if self.is_punct("["):
                self.next()
                subject: Term = self.new_bnode()
                self.property_list(subject, paths=False)
                self.expect_punct("]")
                if not (self.is_punct(".") or self.is_punct(until)):
                    self.property_list(subject, paths=False)
            elif self.is_punct("("):
                subject, _ = self.collection(paths=False)
                if not (self.is_punct(".") or self.is_punct(until)):
                    self.property_list(subject, paths=False)
            elif self.is_punct("<<"):
                subject, _ = self.reified_triple()
                if self.starts_verb(paths=False):
                    self.property_list(subject, paths=False)
            elif self.starts_triples():
                subject = self.triple_term()[0] if self.is_punct("<<(") else self.var_or_term()
                if not self.starts_verb(paths=False):
                    raise self.expected(f"a predicate after the subject {_describe(tok)}")
                self.property_list(subject, paths=False)
            else:
                raise self.expected("a triple or '}'")
            if not self.accept_punct("."):
                break

    def starts_verb(self, *, paths: bool) -> bool:
        tok = self.peek()
        if tok.kind in ("VAR", "IRI", "PNAME") or (tok.kind == "WORD" and tok.text == "a"):
            return True
        return paths and tok.kind == "PUNCT" and tok.value in ("^", "!", "(")

    def property_list(self, subject: Term, *, paths: bool) -> set[str]:
        scope: set[str] = set()
        while True:
            if not self.starts_verb(paths=paths):
                raise self.expected("a predicate")
            vtok = self.peek()
            verb: Var | Iri | Path
            if vtok.kind == "VAR":
                self.next()
                verb = Var(vtok.text[1:])
                scope.add(verb.name)
            elif paths:
                path = self.path()
                verb = Iri(path.iri) if isinstance(path, PathLink) else path
            else:
                self.next()
                verb = Iri(RDF_TYPE if vtok.text == "a" else self.iri_of(vtok, "predicate"))
            is_type = verb == Iri(RDF_TYPE)
            while True:
                obj, inner = self.graph_node(paths=paths, class_position=is_type)
                scope |= inner
                if isinstance(obj, Var):
                    scope.add(obj.name)
                self.clause(vtok)
                line, col = self.linecol(vtok.start)
                pattern = TriplePattern(
                    subject, verb, obj, line, col, self._service, self._context, self._scope
                )
                (self.template if self._in_template else self.patterns).append(pattern)
                scope |= self.annotations(verb, paths=paths)
                if not self.accept_punct(","):
                    break
            if not self.accept_punct(";"):
                return scope
            while self.accept_punct(";"):
                pass
            if not self.starts_verb(paths=paths):
                return scope

    def graph_node(self, *, paths: bool, class_position: bool = False) -> tuple[Term, set[str]]:
        tok = self.peek()
        if self.is_punct("["):
            self.next()
            node: Term = self.new_bnode()
            scope = self.property_list(node, paths=paths)
            self.expect_punct("]")
            return node, scope
        if self.is_punct("("):
            return self.collection(paths=paths)
        if self.is_punct("<<"):
            return self.reified_triple()
        if self.is_punct("<<("):
            return self.triple_term()
        if self.starts_triples():
            return self.var_or_term(role="class" if class_position else "other"), set()
        del tok
        raise self.expected(
            "an object (a variable, an IRI, a literal, [ … ] or ( … )) after the predicate"
        )

    # -- SPARQL 1.2 (RDF-star) as Oxigraph 0.5 reads it. A triple term or a reified triple stands in the patterns
    # as a blank node (or its reifier): the quoted triple is not asserted, so the checker has nothing to check there.
    def annotations(self, verb: Var | Iri | Path, *, paths: bool) -> set[str]:
        """Reifiers (`~ r`) and annotation blocks (`{| p o |}`) after an object: what they say is about the reifier."""
        scope: set[str] = set()
        while self.is_punct("~") or self.is_punct("{|"):
            if not isinstance(verb, Var | Iri):
                raise self.error("reifiers and annotations are not allowed on property paths")
            self.clause()
            node: Term | None = None
            if self.accept_punct("~"):
                node = self.reifier_id(scope)
            node = node or self.new_bnode()
            if self.is_punct("{|"):
                self.next()
                scope |= self.property_list(node, paths=paths)
                self.expect_punct("|}", "'|}' to close the annotation")
        return scope

    def reifier_id(self, scope: set[str]) -> Term | None:
        """The optional name after `~`: a variable, an IRI or a blank node."""
        tok = self.peek()
        if tok.kind == "VAR":
            scope.add(tok.text[1:])
            return self.var_or_term()
        if tok.kind in ("IRI", "PNAME", "BNODE", "ANON"):
            return self.var_or_term()
        return None

    def _quote(self) -> ParserToken:
        # The engine's parser recurses per level: deep quoting is refused like deep brackets.
        tok = self.next()
        self.clause(tok)
        self._quoted += 1
        if self._quoted > MAX_QUOTED_DEPTH:
            raise self.error(f"quoted triples nest more than {MAX_QUOTED_DEPTH} deep", tok)
        return tok

    def reified_triple(self) -> tuple[Term, set[str]]:
        """`<< s p o ~ r >>`: stands for its reifier (a fresh blank node without one)."""
        self._quote()
        scope = self._quoted_parts("the reified triple", reified=True)
        node: Term | None = None
        if self.accept_punct("~"):
            node = self.reifier_id(scope)
        self.expect_punct(">>", "'>>' to close the reified triple")
        self._quoted -= 1
        return node or self.new_bnode(), scope

    def _quoted_parts(self, what: str, *, reified: bool) -> set[str]:
        """Subject, predicate and object of a quoted triple (`<< >>` when `reified`, else `<<( )>>`, which holds no
        reified triple); the variables they bind."""
        scope: set[str] = set()
        for position in ("subject", "predicate", "object"):
            if position == "predicate":
                self.quoted_verb(scope)
                continue
            tok = self.peek()
            if reified and self.is_punct("<<"):
                scope |= self.reified_triple()[1]
            elif self.is_punct("<<("):
                scope |= self.triple_term()[1]
            elif tok.kind in ("VAR", "IRI", "PNAME", "BNODE", "ANON", "STRING", "INTEGER", "DECIMAL", "DOUBLE") or (
                self.is_punct("+") or self.is_punct("-") or (tok.kind == "WORD" and tok.text in ("true", "false"))
            ):
                if tok.kind == "VAR":
                    scope.add(tok.text[1:])
                self.var_or_term()
            else:
                raise self.expected(f"the {position} of {what}")
        return scope

    def triple_term(self) -> tuple[Term, set[str]]:
        """`<<( s p o )>>` in a pattern: subject and object are variables, IRIs, literals, blank nodes or triple
        terms."""
        self._quote()
        scope = self._quoted_parts("the triple term", reified=False)
        self.expect_punct(")>>", "')>>' to close the triple term")
        self._quoted -= 1
        return self.new_bnode(), scope

    def triple_term_data(self) -> None:
        """`<<( s p o )>>` in VALUES: an IRI, then an IRI or `a`, then an IRI, a literal or a triple term."""
        self._quote()
        subject = self.next()
        if subject.kind not in ("IRI", "PNAME"):
            raise self.expected("an IRI as the subject of the triple term", subject)
        self.iri_of(subject)
        verb = self.next()
        if verb.kind in ("IRI", "PNAME"):
            self.iri_of(verb)
        elif not (verb.kind == "WORD" and verb.text == "a"):
            raise self.expected("an IRI or 'a' as the predicate of the triple term", verb)
        tok = self.peek()
        if self.is_punct("<<("):
            self.triple_term_data()
        elif tok.kind in ("IRI", "PNAME", "STRING", "INTEGER", "DECIMAL", "DOUBLE") or (
            self.is_punct("+") or self.is_punct("-") or (tok.kind == "WORD" and tok.text in ("true", "false"))
        ):
            self.var_or_term()
        else:
            raise self.expected("an IRI, a literal or a triple term as the object of the triple term")
        self.expect_punct(")>>", "')>>' to close the triple term")
        self._quoted -= 1

    def expr_triple_term(self) -> _Expr:
        """`<<( s p o )>>` in an expression: subject and object are triple terms, IRIs, literals or variables."""
        self._quote()
        expr = _Expr()
        for position in ("subject", "predicate", "object"):
            if position == "predicate":
                self.quoted_verb(expr.vars)
                continue
            tok = self.peek()
            if self.is_punct("<<("):
                expr.add(self.expr_triple_term())
            elif tok.kind in ("VAR", "IRI", "PNAME", "STRING", "INTEGER", "DECIMAL", "DOUBLE") or (
                self.is_punct("+") or self.is_punct("-") or (tok.kind == "WORD" and tok.text in ("true", "false"))
            ):
                if tok.kind == "VAR":
                    expr.vars.add(tok.text[1:])
                self.var_or_term()
            else:
                raise self.expected(f"the {position} of the triple term")
        self.expect_punct(")>>", "')>>' to close the triple term")
        self._quoted -= 1
        return expr

    def quoted_verb(self, scope: set[str]) -> None:
        """The predicate of a quoted triple: a variable, an IRI or `a` (no property path)."""
        tok = self.next()
        if tok.kind == "VAR":
            scope.add(tok.text[1:])
        elif tok.kind in ("IRI", "PNAME"):
            self.iri_of(tok)
        elif not (tok.kind == "WORD" and tok.text == "a"):
            raise self.expected("a variable, an IRI or 'a' as the predicate of the quoted triple", tok)

    def collection(self, *, paths: bool) -> tuple[Term, set[str]]:
        self.expect_punct("(")
        items: list[Term] = []
        scope: set[str] = set()
        while not self.is_punct(")"):
            if self.peek().kind == "EOF":
                raise self.expected("')' to close the collection")
            self.clause()
            node, inner = self.graph_node(paths=paths)
            scope |= inner
            if isinstance(node, Var):
                scope.add(node.name)
            items.append(node)
        close = self.next()
        if not items:
            raise self.error("an empty collection must be written ()", close)
        head = self.new_bnode()
        current = head
        line, col = self.linecol(close.start)
        target = self.template if self._in_template else self.patterns
        for i, item in enumerate(items):
            target.append(
                TriplePattern(
                    current,
                    Iri(RDF + "first"),
                    item,
                    line,
                    col,
                    self._service,
                    self._context,
                    self._scope,
                )
            )
            rest: Term = self.new_bnode() if i < len(items) - 1 else Iri(RDF + "nil")
            target.append(
                TriplePattern(
                    current,
                    Iri(RDF + "rest"),
                    rest,
                    line,
                    col,
                    self._service,
                    self._context,
                    self._scope,
                )
            )
            if isinstance(rest, BNode):
                current = rest
        return head, scope

    def var_or_term(self, role: str = "other") -> Term:
        tok = self.peek()
        if tok.kind == "VAR":
            self.next()
            return Var(tok.text[1:])
        if tok.kind in ("IRI", "PNAME"):
            self.next()
            return Iri(self.iri_of(tok, role))
        if tok.kind == "BNODE":
            self.next()
            return self.bnode_label(tok)
        if tok.kind == "ANON":
            self.next()
            return self.new_bnode()
        if tok.kind == "NIL":
            self.next()
            return Iri(RDF + "nil")
        if tok.kind == "WORD" and tok.text in ("true", "false"):
            self.next()
            return Literal(tok.text, XSD + "boolean")
        if (
            tok.kind in ("STRING", "INTEGER", "DECIMAL", "DOUBLE")
            or self.is_punct("+")
            or self.is_punct("-")
        ):
            return self.literal()
        raise self.expected("a variable, an IRI or a literal")

    def literal(self) -> Literal:
        sign = ""
        if self.is_punct("+") or self.is_punct("-"):
            sign = self.next().value
            if self.peek().kind not in ("INTEGER", "DECIMAL", "DOUBLE"):
                raise self.expected(f"a number after '{sign}'")
        tok = self.next()
        if tok.kind == "INTEGER":
            return Literal(sign + tok.text, XSD + "integer")
        if tok.kind == "DECIMAL":
            return Literal(sign + tok.text, XSD + "decimal")
        if tok.kind == "DOUBLE":
            return Literal(sign + tok.text, XSD + "double")
        if tok.kind != "STRING":
            raise self.expected("a literal", tok)
        nxt = self.peek()
        if nxt.kind == "LANGTAG":
            self.next()
            if "--" in nxt.text and nxt.text.rpartition("--")[2] not in ("ltr", "rtl"):
                raise self.error("a base direction after '--' is ltr or rtl", nxt)
            return Literal(tok.value, None, nxt.text[1:])
        if self.is_punct("^^"):
            self.next()
            dt = self.next()
            if dt.kind not in ("IRI", "PNAME"):
                raise self.expected("a datatype IRI after ^^", dt)
            return Literal(tok.value, self.iri_of(dt))
        return Literal(tok.value, XSD + "string")

    # -- property paths
    def path(self) -> Path:
        options = [self.path_sequence()]
        while self.accept_punct("|"):
            self.clause()
            options.append(self.path_sequence())
        return options[0] if len(options) == 1 else PathAlt(tuple(options))

    def path_sequence(self) -> Path:
        parts = [self.path_elt_or_inverse()]
        while self.accept_punct("/"):
            self.clause()
            parts.append(self.path_elt_or_inverse())
        return parts[0] if len(parts) == 1 else PathSeq(tuple(parts))

    def path_elt_or_inverse(self) -> Path:
        if self.accept_punct("^"):
            self.clause()
            return PathInv(self.path_elt())
        return self.path_elt()

    def path_elt(self) -> Path:
        primary = self.path_primary()
        tok = self.peek()
        if tok.kind == "PUNCT" and tok.value in ("?", "*", "+"):
            self.clause(tok)
            self.next()
            return PathMod(primary, tok.value)
        return primary

    def path_primary(self) -> Path:
        tok = self.peek()
        if tok.kind in ("IRI", "PNAME"):
            self.next()
            return PathLink(self.iri_of(tok, "predicate"))
        if tok.kind == "WORD" and tok.text == "a":
            self.next()
            return PathLink(RDF_TYPE)
        if self.accept_punct("!"):
            self.clause()
            return self.negated_property_set()
        if self.accept_punct("("):
            inner = self.path()
            self.expect_punct(")", "')' to close the path")
            return inner
        raise self.expected("a predicate or property path")

    def negated_property_set(self) -> PathNeg:
        if self.peek().kind == "NIL":
            self.next()
            return PathNeg(())
        if self.accept_punct("("):
            items = [self.path_one_in_property_set()]
            while self.accept_punct("|"):
                items.append(self.path_one_in_property_set())
            self.expect_punct(")")
            return PathNeg(tuple(items))
        return PathNeg((self.path_one_in_property_set(),))

    def path_one_in_property_set(self) -> tuple[str, bool]:
        inverse = self.accept_punct("^")
        tok = self.next()
        if tok.kind in ("IRI", "PNAME"):
            return self.iri_of(tok, "predicate"), inverse
        if tok.kind == "WORD" and tok.text == "a":
            return RDF_TYPE, inverse
        raise self.expected("an IRI or 'a' in the negated property set", tok)

    # -- expressions
    def constraint(self) -> _Expr:
        tok = self.peek()
        if self.is_punct("("):
            return self.bracketted_expression()
        if tok.kind == "WORD" and tok.text != "a":
            return self.builtin_call()
        if tok.kind in ("IRI", "PNAME"):
            return self.iri_or_function(require_call=True)
        raise self.expected("a condition in (…)")

    def bracketted_expression(self) -> _Expr:
        self.expect_punct("(")
        expr = self.expression()
        self.expect_punct(")", "')'")
        return expr

    def expression(self) -> _Expr:
        expr = self.and_expression()
        while self.accept_punct("||"):
            self.clause()
            expr.add(self.and_expression())
        return expr

    def and_expression(self) -> _Expr:
        expr = self.relational_expression()
        while self.accept_punct("&&"):
            self.clause()
            expr.add(self.relational_expression())
        return expr

    def relational_expression(self) -> _Expr:
        expr = self.additive_expression()
        # '<' is an operator here, never the start of an IRI: read it from the raw text.
        start = self._skip(self.pos)
        m = _RELOP.match(self.text, start)
        if m:
            self.clause()
            self.pos = m.end()
            expr.add(self.additive_expression())
        elif self.is_word("IN"):
            self.clause()
            self.next()
            expr.add(self.expression_list())
        elif self.is_word("NOT"):
            self.clause()
            self.next()
            self.expect_word("IN")
            expr.add(self.expression_list())
        return expr

    def expression_list(self) -> _Expr:
        expr = _Expr()
        if self.peek().kind == "NIL":
            self.next()
            return expr
        self.expect_punct("(")
        expr.add(self.expression())
        while self.accept_punct(","):
            expr.add(self.expression())
        self.expect_punct(")", "',' or ')'")
        return expr

    def additive_expression(self) -> _Expr:
        expr = self.multiplicative_expression()
        while self.is_punct("+") or self.is_punct("-"):
            self.clause()
            self.next()
            expr.add(self.multiplicative_expression())
        return expr

    def multiplicative_expression(self) -> _Expr:
        expr = self.unary_expression()
        while self.is_punct("*") or self.is_punct("/"):
            self.clause()
            self.next()
            expr.add(self.unary_expression())
        return expr

    def unary_expression(self) -> _Expr:
        while self.accept_punct("!"):  # `!!x` is SPARQL 1.2; a loop, as a long run must not recurse
            self.clause()
        if self.is_punct("+") or self.is_punct("-"):
            self.clause()
            self.next()
        return self.primary_expression()

    def primary_expression(self) -> _Expr:
        tok = self.peek()
        if self.is_punct("("):
            return self.bracketted_expression()
        if self.is_punct("<<("):
            return self.expr_triple_term()
        if self.is_punct("+") or self.is_punct("-"):
            self.literal()  # a signed number; anything else is refused there
            return _Expr()
        if tok.kind == "VAR":
            self.next()
            return _Expr({tok.text[1:]})
        if tok.kind in ("IRI", "PNAME"):
            return self.iri_or_function(require_call=False)
        if tok.kind in ("STRING", "INTEGER", "DECIMAL", "DOUBLE"):
            self.literal()
            return _Expr()
        if tok.kind == "WORD" and tok.text in ("true", "false"):
            self.next()
            return _Expr()
        if tok.kind == "WORD" and tok.text != "a":
            return self.builtin_call()
        raise self.expected("an expression")

    def iri_or_function(self, *, require_call: bool) -> _Expr:
        tok = self.next()
        self.iri_of(tok)
        nxt = self.peek()
        if nxt.kind == "NIL":
            self.next()
            return _Expr()
        if self.is_punct("("):
            self.clause()
            self.next()
            self.accept_word("DISTINCT")
            expr = self.expression()
            while self.accept_punct(","):
                expr.add(self.expression())
            self.expect_punct(")", "',' or ')'")
            return expr
        if require_call:
            raise self.expected(f"'(' after the function {_describe(tok)}")
        return _Expr()

    def builtin_call(self) -> _Expr:
        tok = self.next()
        self.clause(tok)
        name = tok.value
        if name in _AGGREGATES:
            return self.aggregate(tok)
        if name == "BOUND":
            self.expect_punct("(")
            var = self.next()
            if var.kind != "VAR":
                raise self.expected("a variable in BOUND(…)", var)
            self.expect_punct(")")
            return _Expr({var.text[1:]})
        if name == "EXISTS":
            return self.exists("EXISTS")
        if name == "NOT":
            self.expect_word("EXISTS")
            return self.exists("NOT EXISTS")
        if name not in _BUILTINS:
            hint = ""
            if name in ("TRUE", "FALSE"):
                hint = f"; write it in lower case: {name.lower()}"
            raise self.error(f"unknown function or keyword {_describe(tok)}{hint}", tok)
        low, high = _BUILTINS[name]
        expr = _Expr()
        count = 0
        if self.peek().kind == "NIL":
            self.next()
        else:
            self.expect_punct("(", f"'(' after {tok.text}")
            expr.add(self.expression())
            count = 1
            while self.accept_punct(","):
                expr.add(self.expression())
                count += 1
            self.expect_punct(")", "',' or ')'")
        if count < low or (high is not None and count > high):
            want = (
                str(low)
                if low == high
                else (f"{low} to {high}" if high is not None else f"at least {low}")
            )
            raise self.error(f"{tok.text}() takes {want} argument(s), got {count}", tok)
        return expr

    def aggregate(self, tok: ParserToken) -> _Expr:
        if not self._agg_ok:
            where = self._agg_where
            raise self.error(
                f"the aggregate {tok.text}() is not allowed in {where}; aggregate in SELECT or HAVING "
                "(with GROUP BY), or in a subquery",
                tok,
            )
        self.expect_punct("(", f"'(' after {tok.text}")
        self.accept_word("DISTINCT")
        inner = _Expr()
        if tok.value == "COUNT" and self.is_punct("*"):
            self.next()
        else:
            inner = self.expression()
        if tok.value == "GROUP_CONCAT" and self.accept_punct(";"):
            self.expect_word("SEPARATOR")
            self.expect_punct("=")
            sep = self.next()
            if sep.kind != "STRING":
                raise self.expected("a string after SEPARATOR=", sep)
        self.expect_punct(")", "')'")
        del inner  # variables inside an aggregate never need grouping
        return _Expr(set(), True)

    def exists(self, label: str) -> _Expr:
        old = self.with_context(label)
        agg_ok = self._agg_ok
        self.group_graph_pattern()
        self._agg_ok = agg_ok
        self._context = old
        return _Expr()


def parse_query(
    text: str,
    *,
    prefixes: dict[str, str] | None = None,
    collect_undefined_prefixes: bool = False,
    tick: Callable[[], None] | None = None,
    oxigraph: bool = False,
    max_clauses: int | None = None,
) -> ParsedQuery:
    """Parse a SPARQL 1.1 query, or one with the SPARQL 1.2 forms Oxigraph 0.5 reads (never executed); raise
    SparqlSyntaxError with line and column.

    `prefixes` are predeclared (the query's own PREFIX lines win). With `collect_undefined_prefixes`
    undeclared prefixes are recorded in `undefined_prefixes` instead of raising. `tick` is called every
    `TICK_EVERY` tokens (a caller's deadline or cancel signal raises from it). With `oxigraph`, names are read as
    Oxigraph 0.5 reads them (see `OXIGRAPH_NAMES`), not as SPARQL 1.1 defines them. With `max_clauses`, a query
    holding more clauses and nodes of every kind (`ParsedQuery.clauses`) raises TooManyClauses where it passes them."""
    parser = _Parser(
        text,
        extra_prefixes=prefixes,
        collect_undefined=collect_undefined_prefixes,
        tick=tick,
        oxigraph=oxigraph,
        max_clauses=max_clauses,
    )
    try:
        return parser.parse()
    except RecursionError:
        raise parser.error("the query nests brackets too deeply to check") from None
