"""Documents beside a graph (plain text, Markdown, HTML, JSONL of `{id, title, text}`) cut into retrievable
items: passages with their title and section, and tables and infoboxes linearised as SPAGHETTI does (§3.3:
the section title, up to two sentences before and after, one line per row `column: cell, column: cell`).

Every item has a stable reference, `file#anchor` (the file relative to the folder it was found in), and its
kind; `DocumentCorpus` remembers each file's fingerprint so an unchanged file is not read again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal

from sparqlnav.errors import SparqlnavError
from sparqlnav.folders import Outside, files_under
from sparqlnav.retrieval.records import Doc, DocKind

DocumentKind = Literal["passage", "table", "infobox"]
DOCUMENT_KINDS: tuple[DocKind, ...] = ("passage", "table", "infobox")
SUFFIXES = {".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown", ".html": "html",
            ".htm": "html", ".jsonl": "jsonl"}
PASSAGE_WORDS = 120  # about a paragraph: long enough to hold a fact with its subject, short enough to rank
CONTEXT_SENTENCES = 2  # sentences of the section kept before and after a table (the paper's choice)
CORPUS_FORMAT = 1
# A document file larger than this, or a JSONL record longer than MAX_RECORD_BYTES, is skipped and named: a 200 MB
# HTML file took 2 GB and over a minute, one 100 MB JSONL line 3.8 GB (the red team's files).
MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_RECORD_BYTES = 1024 * 1024

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_SLUG = re.compile(r"[^a-z0-9]+")
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_MD_RULE = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_MD_INLINE = re.compile(r"(\*\*|__|\*|_|`)(.+?)\1")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


class DocumentsError(SparqlnavError):
    """A document path that cannot be read as asked (missing, unknown type, malformed JSONL line)."""


# ------------------------------------------------------------------------------------------ parsed pieces


@dataclass
class Block:
    """A piece of a page in reading order: a paragraph, a table (rows of cells, first row the header when
    `header`), or an infobox (rows of label and value)."""

    kind: Literal["text", "table", "infobox"]
    section: str
    text: str = ""
    rows: list[list[str]] = field(default_factory=list)
    header: bool = False
    caption: str = ""


@dataclass
class Page:
    """One document: its title and blocks."""

    title: str
    blocks: list[Block]
    key: str = ""  # anchor prefix for documents of a multi-page file (a JSONL record's id)


def _clean(text: str) -> str:
    return " ".join(text.split())


def slug(text: str) -> str:
    """A short anchor: lower-case words joined by hyphens."""
    return _SLUG.sub("-", text.lower()).strip("-")[:60] or "top"


def sentences(text: str) -> list[str]:
    """Sentences of a paragraph (split after . ! ? before a capital, digit or quote)."""
    return [s for s in (_clean(p) for p in _SENTENCE.split(text)) if s]


# ------------------------------------------------------------------------------------------ linearisation


def linearise_table(rows: Sequence[Sequence[str]], *, section: str, header: bool = True,
                    before: Sequence[str] = (), after: Sequence[str] = (), caption: str = "") -> str:
    """A table as text: `section ; sentences before`, then one line per row `column: cell, column: cell.`,
    then the sentences after. Without a header row columns are numbered."""
    cleaned = [[_clean(c) for c in row] for row in rows if any(_clean(c) for c in row)]
    if not cleaned:
        return ""
    columns = cleaned[0] if header else []
    body = cleaned[1:] if header else cleaned
    lines: list[str] = []
    for row in body:
        cells = []
        for i, cell in enumerate(row):
            if not cell:
                continue
            name = columns[i] if i < len(columns) and columns[i] else f"column {i + 1}"
            cells.append(f"{name}: {cell}")
        if cells:
            lines.append(", ".join(cells) + ".")
    caption = _clean(caption)
    if caption and caption[-1] not in ".!?:":
        caption += "."
    head = " ".join(x for x in (caption, *before) if x)
    first = f"{section} ; {head}".rstrip() if head else f"{section} ;"
    text = "\n".join([first, *lines]) if head else "\n".join([f"{first} {lines[0]}" if lines else first, *lines[1:]])
    return text + ("\n" + " ".join(after) if after else "")


def linearise_infobox(rows: Sequence[Sequence[str]], *, title: str) -> str:
    """An infobox as text: `title ;` then one line per row `label: value`."""
    lines = [f"{_clean(r[0])}: {_clean(' '.join(r[1:]))}" for r in rows if len(r) >= 2 and _clean(r[0]) and _clean(" ".join(r[1:]))]
    return "\n".join([f"{title} ;", *lines]) if lines else ""


# ------------------------------------------------------------------------------------------ readers


class _HtmlReader(HTMLParser):
    """Blocks of an HTML page: headings set the section, paragraphs and list items are text, each table (and
    `class="infobox"` table) a block of rows; scripts, styles and navigation are skipped."""

    SKIP = frozenset({"script", "style", "nav", "footer", "head", "noscript", "template"})
    TEXT = frozenset({"p", "li", "dd", "dt", "blockquote", "pre", "figcaption"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.h1 = ""
        self.section = ""
        self.blocks: list[Block] = []
        self._skip = 0
        self._in_title = False
        self._heading: list[str] | None = None
        self._text: list[str] | None = None
        self._tables: list[Block] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._row_has_th = False
        self._first_row_th: list[bool] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP and tag != "head":
            self._skip += 1
            return
        if self._skip:
            return
        if tag == "title":
            self._in_title = True
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6") and not self._tables:
            self._flush_text()
            self._heading = []
        elif tag == "table":
            self._flush_text()
            classes = (dict(attrs).get("class") or "").split()
            kind: Literal["table", "infobox"] = "infobox" if "infobox" in classes else "table"
            self._tables.append(Block(kind, self.section))
            self._first_row_th.append(False)
        elif self._tables and tag == "tr":
            self._row, self._row_has_th = [], False
        elif self._tables and tag in ("td", "th"):
            self._cell = []
            self._row_has_th |= tag == "th"
        elif self._tables and tag == "caption":
            self._cell = []
        elif tag in self.TEXT and not self._tables:
            self._flush_text()
            self._text = []
        elif tag == "br":
            self._data(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and tag != "head":
            self._skip = max(0, self._skip - 1)
            return
        if self._skip:
            return
        if tag == "title":
            self._in_title = False
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6") and self._heading is not None:
            text = _clean("".join(self._heading))
            self._heading = None
            if tag == "h1" and not self.h1:
                self.h1 = text
            self.section = text
        elif self._tables and tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(_clean("".join(self._cell)))
            self._cell = None
        elif self._tables and tag == "caption" and self._cell is not None:
            self._tables[-1].caption = _clean("".join(self._cell))
            self._cell = None
        elif self._tables and tag == "tr" and self._row is not None:
            table = self._tables[-1]
            if not table.rows:
                table.header = self._row_has_th and table.kind == "table"
            table.rows.append(self._row)
            self._row = None
        elif tag == "table" and self._tables:
            table = self._tables.pop()
            self._first_row_th.pop()
            if table.rows:
                self.blocks.append(table)
        elif tag in self.TEXT and self._text is not None:
            self._flush_text()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title += data
            return
        self._data(data)

    def _data(self, data: str) -> None:
        if self._heading is not None:
            self._heading.append(data)
        elif self._cell is not None:
            self._cell.append(data)
        elif self._text is not None:
            self._text.append(data)
        elif not self._tables and data.strip():
            # Loose text (in a div or body) is a paragraph of its own.
            self._text = [data]

    def _flush_text(self) -> None:
        if self._text is not None:
            text = _clean("".join(self._text))
            if text:
                self.blocks.append(Block("text", self.section, text))
        self._text = None

    def close(self) -> None:
        super().close()
        self._flush_text()


def read_html(text: str, *, fallback_title: str) -> Page:
    """An HTML page as blocks; the title is the first `h1`, else `<title>`, else the file name."""
    reader = _HtmlReader()
    reader.feed(text)
    reader.close()
    title = reader.h1 or _clean(reader.title) or fallback_title
    for block in reader.blocks:
        block.section = block.section or title
    return Page(title, reader.blocks)


def _md_text(line: str) -> str:
    return _MD_INLINE.sub(r"\2", _MD_LINK.sub(r"\1", line))


def _md_cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [_md_text(c.strip()) for c in inner.split("|")]


def read_markdown(text: str, *, fallback_title: str) -> Page:
    """A Markdown page as blocks: `#` headings, blank-line paragraphs, pipe tables (header and rule rows)."""
    lines = text.splitlines()
    title = ""
    section = ""
    blocks: list[Block] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            joined = _clean(_md_text(" ".join(para)))
            if joined:
                blocks.append(Block("text", section, joined))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _MD_HEADING.match(line)
        if heading:
            flush()
            section = _clean(_md_text(heading.group(2)))
            if len(heading.group(1)) == 1 and not title:
                title = section
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and _MD_RULE.match(lines[i + 1].strip()):
            flush()
            rows = [_md_cells(line)]
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_md_cells(lines[i]))
                i += 1
            blocks.append(Block("table", section, rows=rows, header=True))
            continue
        elif not line.strip():
            flush()
        else:
            para.append(line.strip().lstrip("-*+> ").strip() if line.lstrip()[:2] in ("- ", "* ", "+ ", "> ") else line)
        i += 1
    flush()
    title = title or fallback_title
    for block in blocks:
        block.section = block.section or title
    return Page(title, blocks)


def read_plain(text: str, *, fallback_title: str) -> Page:
    """Plain text: blank-line paragraphs; a short first line without a full stop is the title."""
    paragraphs = [_clean(p) for p in re.split(r"\n\s*\n", text) if _clean(p)]
    title = fallback_title
    if paragraphs and len(paragraphs[0]) < 100 and not paragraphs[0].endswith("."):
        title = paragraphs.pop(0)
    return Page(title, [Block("text", title, p) for p in paragraphs])


def read_jsonl(text: str, *, source: str) -> list[Page]:
    """JSONL of `{id, title, text}` records (an exported corpus), one page each."""
    pages = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_RECORD_BYTES:
            raise DocumentsError(f"{source}: line {number} is longer than {MAX_RECORD_BYTES:,} bytes")
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DocumentsError(f"{source}: line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise DocumentsError(f"{source}: line {number}: expected an object with a 'text' string")
        ident = str(record.get("id", number))
        page = read_plain(record["text"], fallback_title=str(record.get("title") or ident))
        if record.get("title"):
            page.title = str(record["title"])
            for block in page.blocks:
                block.section = page.title
        page.key = slug(ident)
        pages.append(page)
    return pages


def read_pages(path: Path, *, name: str) -> list[Page]:
    """The pages of one file, by its suffix."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise DocumentsError(f"{path}: not a document type sparqlnav reads ({', '.join(sorted(SUFFIXES))})")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise DocumentsError(f"{name}: {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit for one document")
        data = path.read_bytes()
    except OSError as exc:
        raise DocumentsError(f"{path}: cannot read ({exc})") from None
    if b"\x00" in data[:8192]:
        raise DocumentsError(f"{name}: not text (binary content), though named {path.suffix}")
    text = data.decode("utf-8", errors="replace")
    stem = path.stem.replace("_", " ").replace("-", " ")
    if kind == "jsonl":
        return read_jsonl(text, source=name)
    if kind == "html":
        return [read_html(text, fallback_title=stem)]
    if kind == "markdown":
        return [read_markdown(text, fallback_title=stem)]
    return [read_plain(text, fallback_title=stem)]


# ------------------------------------------------------------------------------------------ documents


def _context(blocks: Sequence[Block], at: int, step: int) -> list[str]:
    """Up to two sentences of the same section next to block `at`, going back (step -1) or forward (+1)."""
    section = blocks[at].section
    found: list[str] = []
    i = at + step
    while 0 <= i < len(blocks) and blocks[i].section == section and len(found) < CONTEXT_SENTENCES:
        if blocks[i].kind == "text":
            said = sentences(blocks[i].text)
            found = (said[-(CONTEXT_SENTENCES - len(found)):] + found) if step < 0 else found + said[: CONTEXT_SENTENCES - len(found)]
        else:
            break
        i += step
    return found


def _passages(texts: Iterable[str], limit: int = PASSAGE_WORDS) -> Iterator[str]:
    """Paragraphs packed into passages of about `limit` words; a longer paragraph is cut at sentences."""
    current: list[str] = []
    words = 0
    for text in texts:
        for sentence in sentences(text) if len(text.split()) > limit else [text]:
            n = len(sentence.split())
            if current and words + n > limit:
                yield " ".join(current)
                current, words = [], 0
            current.append(sentence)
            words += n
    if current:
        yield " ".join(current)


def page_docs(page: Page, file_ref: str) -> list[Doc]:
    """The passages, tables and infoboxes of one page, each with its reference `file#anchor`."""
    docs: list[Doc] = []
    base = f"{file_ref}#{page.key}-" if page.key else f"{file_ref}#"
    used: dict[str, int] = {}

    def anchor(name: str) -> str:
        used[name] = used.get(name, 0) + 1
        return f"{base}{name}" if used[name] == 1 else f"{base}{name}-{used[name]}"

    def add(kind: DocKind, ref: str, text: str, section: str) -> None:
        docs.append(Doc(id=f"{kind}:{ref}", kind=kind, text=f"{page.title}. {text}" if kind == "passage" else text,
                        content=text, title=page.title,
                        meta={"ref": ref, "section": section, "file": file_ref}))

    sections: list[tuple[str, list[str]]] = []
    for i, block in enumerate(page.blocks):
        if block.kind == "text":
            if sections and sections[-1][0] == block.section:
                sections[-1][1].append(block.text)
            else:
                sections.append((block.section, [block.text]))
        elif block.kind == "infobox":
            text = linearise_infobox(block.rows, title=page.title)
            if text:
                add("infobox", anchor("infobox"), text, block.section)
        else:
            text = linearise_table(block.rows, section=block.section, header=block.header, caption=block.caption,
                                   before=_context(page.blocks, i, -1), after=_context(page.blocks, i, 1))
            if text:
                add("table", anchor(f"table-{slug(block.section)}"), text, block.section)
    for section, texts in sections:
        for n, passage in enumerate(_passages(texts), start=1):
            add("passage", anchor(f"{slug(section)}-{n}"), passage, section)
    return docs


def file_docs(path: Path, name: str) -> list[Doc]:
    """Every document of one file (`name` is its reference: the path relative to what was given); DocumentsError
    naming the file when it cannot be read as its kind."""
    try:
        return [d for page in read_pages(path, name=name) for d in page_docs(page, name)]
    except (ValueError, AssertionError) as exc:
        # html.parser gives up on some malformed markup ("unknown status keyword 'T' in marked section").
        raise DocumentsError(f"{name}: not readable as {SUFFIXES[path.suffix.lower()]} ({exc})") from None


def find_files(paths: Sequence[Path], outside: list[Outside] | None = None) -> list[tuple[Path, str]]:
    """The readable files under the given files and folders, each with its reference name (relative to the
    folder given, or the file's own name), in a stable order; a folder's symlinks leading out of it are skipped
    (appended to `outside`), a file named outright is read wherever it is."""
    found: list[tuple[Path, str]] = []
    for given in paths:
        if given.is_dir():
            for path in files_under(given, lambda p: p.suffix.lower() in SUFFIXES, outside):
                found.append((path, path.relative_to(given).as_posix()))
        elif given.is_file():
            if given.suffix.lower() not in SUFFIXES:
                raise DocumentsError(f"{given}: not a document type sparqlnav reads ({', '.join(sorted(SUFFIXES))})")
            found.append((given, given.name))
        else:
            raise DocumentsError(f"no such file or folder: {given}")
    names = [n for _p, n in found]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise DocumentsError(f"two documents have the same reference ({', '.join(dupes[:3])}): give their folders")
    return found


# ------------------------------------------------------------------------------------------ the corpus


@dataclass
class CorpusStats:
    """What reading a corpus did: files read or kept, and the documents of each kind."""

    files: int = 0
    read: int = 0
    unchanged: int = 0
    removed: int = 0
    passages: int = 0
    tables: int = 0
    infoboxes: int = 0
    outside: list[Outside] = field(default_factory=list)  # symlinks out of a folder given, skipped
    skipped: list[str] = field(default_factory=list)  # files not indexed, each with why (too large, not text, …)

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {**vars(self), "outside": [o.to_json() for o in self.outside]}


class DocumentCorpus:
    """The documents of a KG's corpus with each file's fingerprint, kept in one JSON file next to the index, so a
    refresh reads only new or changed files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, dict[str, Any]] = {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") == CORPUS_FORMAT:
                self.files = dict(data.get("files") or {})
        except (OSError, ValueError):
            self.files = {}

    def documents(self) -> list[Doc]:
        """Every document of the corpus, file by file."""
        return [Doc.from_json(d) for entry in self.files.values() for d in entry["docs"]]

    def update(self, paths: Sequence[Path], *, replace: bool = True,
               progress: Callable[[str, int, int], None] | None = None) -> CorpusStats:
        """Read the files under `paths` (only new or changed ones); with `replace`, files no longer given are
        dropped. Saved at the end, so a failure keeps the previous corpus."""
        outside: list[Outside] = []
        found = find_files(paths, outside)
        stats = CorpusStats(files=len(found), outside=outside)
        files: dict[str, dict[str, Any]] = {} if replace else dict(self.files)
        for n, (path, name) in enumerate(found):
            if progress:
                progress("reading documents", n, len(found))
            if path.stat().st_size > MAX_FILE_BYTES:  # not even hashed: it would be read whole for that
                stats.skipped.append(f"{name}: {path.stat().st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit "
                                     "for one document")
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:32]
            old = self.files.get(name)
            if old is not None and old.get("sha") == digest:
                files[name] = old
                stats.unchanged += 1
                continue
            try:
                docs = file_docs(path, name)
            except DocumentsError as exc:  # one bad file is named and left out; the others are indexed
                stats.skipped.append(str(exc))
                continue
            files[name] = {"sha": digest, "docs": [d.to_json() for d in docs]}
            stats.read += 1
        if progress:
            progress("reading documents", len(found), len(found))
        stats.removed = len(set(self.files) - set(files))
        self.files = files
        for doc in self.documents():
            if doc.kind == "passage":
                stats.passages += 1
            elif doc.kind == "table":
                stats.tables += 1
            else:
                stats.infoboxes += 1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps({"format": CORPUS_FORMAT, "files": files}, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.path)
        return stats


__all__ = [
    "DOCUMENT_KINDS",
    "CorpusStats",
    "DocumentCorpus",
    "DocumentsError",
    "file_docs",
    "find_files",
    "linearise_infobox",
    "linearise_table",
    "page_docs",
    "read_html",
    "read_markdown",
]
