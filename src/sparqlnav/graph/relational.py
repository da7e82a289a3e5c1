"""A relational database as a graph: a SQLite file or a PostgreSQL database, read without writing and turned into
a local store by the Direct Mapping (`direct_mapping`), cached like a store of RDF files.

`--kg` forms: `sqlite:///abs/path/file.db`, a file path ending in .db, .sqlite or .sqlite3, and
`postgresql://user@host:port/db` (or `postgres://`). The base IRI is `http://sparqlnav.local/db/<name>/`, `<name>`
being the file's name without its extension or the PostgreSQL database's name.

Read-only: SQLite is opened through a `file:…?mode=ro` URI with `query_only` on, and read in one transaction (one
snapshot); PostgreSQL is read in one READ ONLY, REPEATABLE READ transaction (one snapshot), checked to be read-only
before anything is read. Cached: a SQLite store is current while the file's path, size, modification time and
header (which holds SQLite's change counter) and its WAL file's are; a PostgreSQL store while its schema and every
table's row count and content checksum (one scan per table, computed in the same snapshot) are.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import pyoxigraph as ox

from sparqlnav.graph.direct_mapping import (
    Column,
    DirectMapping,
    ForeignKey,
    Naming,
    Row,
    Table,
    iri_safe,
    table_label,
)
from sparqlnav.graph.kg import KGError, KnowledgeGraph
from sparqlnav.graph.progress import ProgressStep, Reporter
from sparqlnav.graph.store import STORE_FORMAT_VERSION, StoreInfo, StoreSource, ensure_built
from sparqlnav.sparql.prefixes import WELL_KNOWN, WIKIDATA

BASE_ROOT = "http://sparqlnav.local/db/"
MAPPING_VERSION = "1"  # bump when the mapping's triples change, so stores built by an older one are rebuilt
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
CONNECT_TIMEOUT_S = 10
BATCH_ROWS = 2_000  # rows fetched at a time from a PostgreSQL cursor
# PostgreSQL types read as Python values (natural_literal types them); any other is read as its text, a plain literal.
PG_NATIVE = frozenset({"int2", "int4", "int8", "numeric", "float4", "float8", "bool", "date", "time", "timestamp",
                       "timestamptz", "bytea", "text", "varchar", "bpchar", "name", "char"})


@dataclass(frozen=True)
class Database:
    """A database a `--kg` value names: its kind, how to reach it, and how messages and the cache name it."""

    kind: Literal["sqlite", "postgresql"]
    target: str  # SQLite: the file's path; PostgreSQL: the connection URL as given (password included)
    shown: str  # the URL without a password: what meta.json, the graph's name and messages say

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return Path(self.target)


def database_spec(spec: str) -> Database | None:
    """The database a `--kg` value names, None when it names none; KGError (one line) for a malformed URL."""
    lower = spec.lower()
    if lower.startswith("sqlite:"):
        return _sqlite_url(spec)
    if lower.startswith(("postgresql:", "postgres:")):
        return _postgres_url(spec)
    path = Path(spec).expanduser()
    if "://" not in spec and path.suffix.lower() in SQLITE_SUFFIXES and not path.is_dir():
        path = path.absolute()
        return Database("sqlite", str(path), "sqlite://" + quote(str(path)))
    return None


def _sqlite_url(spec: str) -> Database:
    parts = urlsplit(spec)
    if not spec.lower().startswith("sqlite://") or parts.netloc not in ("", "localhost") or parts.query \
            or parts.fragment or parts.path.strip("/") == "":
        raise KGError(f"bad SQLite URL {spec!r}: write sqlite:///absolute/path/to/file.db, or give the file's path")
    path = Path("/" + unquote(parts.path).lstrip("/"))
    return Database("sqlite", str(path), "sqlite://" + quote(str(path)))


def _postgres_url(spec: str) -> Database:
    parts = urlsplit(spec)
    if not re.match(r"(?i)postgres(ql)?://", spec):
        scheme, _, rest = spec.partition(":")
        unsaid = f"{scheme}:" + re.sub(r":[^:@/]*@", "@", rest)  # a password is not repeated
        raise KGError(f"bad PostgreSQL URL {unsaid!r}: write postgresql://user@host:port/database")
    netloc = parts.netloc.rsplit("@", 1)
    if len(netloc) == 2:
        user = netloc[0].split(":", 1)[0]
        netloc = [f"{user}@{netloc[1]}"]
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"])
    shown = urlunsplit(("postgresql", netloc[0], parts.path, query, ""))
    return Database("postgresql", spec, shown)


def base_iri(name: str) -> str:
    """The base IRI of a database called `name`: `http://sparqlnav.local/db/<name>/`."""
    return f"{BASE_ROOT}{iri_safe(name) or 'db'}/"


def table_prefixes(base: str, tables: Iterable[Table]) -> dict[str, str]:
    """`db:` for the tables' classes, `<table>:` for each table's columns and its singular for its rows
    (`db:employees`, `employees:name`, `employee: <…/employees/>`). Row IRIs hold `=`, so they are never written
    with a prefix; declaring one keeps the digest from inventing a worse name (`employees2`) for their namespace."""
    reserved = {*WELL_KNOWN, *WIKIDATA}
    out = {"db": base}
    naming = Naming(base)

    def free(name: str, fallback: str) -> str:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", name)
        name = name if name[:1].isalpha() else f"t_{name}"
        candidate, n = name, 2
        if candidate in reserved or candidate in out:
            candidate = fallback
        while candidate in reserved or candidate in out:
            candidate, n = f"{fallback}_{n}", n + 1
        return candidate

    for t in tables:
        out[free(t.name, f"{t.name}_columns")] = naming.table(t.name) + "#"
    for t in tables:
        out[free(table_label(t.name).replace(" ", "_"), f"{t.name}_rows")] = naming.table(t.name) + "/"
    return out


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sqlite_fingerprint(path: Path) -> str:
    """What changes when a SQLite database does: the file's and its WAL's path, size, modification time and header
    (SQLite's change counter is in the first 100 bytes); cheap, and no byte of data is hashed."""
    parts: list[str] = []
    for f in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(FileNotFoundError):
            st = f.stat()
            with f.open("rb") as fh:
                head = fh.read(100)
            parts.append(f"{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{head.hex()}")
    return "\n".join(parts)


def _wal_without_log(path: Path) -> bool:
    """Whether the file is a WAL-mode SQLite database (header bytes 18 and 19 are 2) with no -wal file beside it."""
    with path.open("rb") as fh:
        head = fh.read(20)
    return head[18:20] == b"\x02\x02" and not path.with_name(path.name + "-wal").exists()


def read_only_uri(path: Path) -> str:
    """The URI that opens a SQLite file read-only (`mode=ro`): what the mapping and SQL runs (`sparqlnav.sql`) use."""
    uri = "file:" + quote(str(path.resolve())) + "?mode=ro"
    if _wal_without_log(path):
        # A read-only connection to a WAL database makes its -wal and -shm files (and leaves them); with no -wal
        # file there is no log to read, so the file alone is the database and is opened as unchanging.
        uri += "&immutable=1"
    return uri


class SqliteReader:
    """A SQLite file opened read-only (`mode=ro`, `query_only`), read in one transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.stamp = sqlite_fingerprint(path)  # before the snapshot: a later write at worst rebuilds once more
            self.con = sqlite3.connect(read_only_uri(path), uri=True, isolation_level=None, check_same_thread=False)
            self.con.text_factory = lambda b: b.decode("utf-8", "replace")  # text that is no UTF-8 still reads
            self.con.execute("PRAGMA query_only = ON")
            self.con.execute("BEGIN")
            self.con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # takes the snapshot
        except (sqlite3.Error, OSError) as exc:
            raise KGError(f"cannot read {path} as a SQLite database: {exc}") from None

    def tables(self) -> list[Table]:
        """The database's tables (not views, virtual tables nor their shadow tables)."""
        listed = self.con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
            "ORDER BY name"
        ).fetchall()
        virtual = [name for name, sql in listed if (sql or "").upper().startswith("CREATE VIRTUAL")]
        names = [name for name, _ in listed if name not in virtual and not name.startswith(tuple(v + "_" for v in virtual))]
        info = {name: self.con.execute("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", (name,)).fetchall()
                for name in names}
        # table_xinfo also lists generated columns, which table_info (and so the mapping) leaves out
        every = {name: self.con.execute("SELECT count(*) FROM pragma_table_xinfo(?)", (name,)).fetchone()[0]
                 for name in names}
        out = []
        for name in names:
            columns = tuple(Column(c, t or "") for c, t, _ in info[name])
            key = tuple(c for c, _, pk in sorted((r for r in info[name] if r[2]), key=lambda r: r[2]))
            fks: dict[int, list[tuple[str, str, str | None]]] = {}
            for fk_id, target, frm, to in self.con.execute(
                'SELECT id, "table", "from", "to" FROM pragma_foreign_key_list(?) ORDER BY id, seq', (name,)
            ):
                fks.setdefault(fk_id, []).append((target, frm, to))
            foreign = []
            for pairs in fks.values():
                target = pairs[0][0]
                if target not in info:
                    continue  # refers to a table that is not there (SQLite allows it)
                referenced = [to for _, _, to in pairs]
                if any(to is None for to in referenced):  # `REFERENCES t` alone: t's primary key
                    target_key = [c for c, _, pk in sorted((r for r in info[target] if r[2]), key=lambda r: r[2])]
                    referenced = target_key if len(target_key) == len(pairs) else referenced
                if any(to is None for to in referenced):
                    continue
                foreign.append(ForeignKey(tuple(frm for _, frm, _ in pairs), target, tuple(str(to) for to in referenced)))
            out.append(Table(name, columns, key, tuple(foreign), hidden=every[name] > len(columns)))
        return out

    def fingerprint(self, tables: list[Table]) -> str:
        """The file's stamp, taken before the snapshot."""
        return self.stamp

    def rows(self, table: Table) -> Iterator[Row]:
        """The table's rows, in its columns' order."""
        columns = ", ".join(_quoted(c.name) for c in table.columns)
        yield from self.con.execute(f"SELECT {columns} FROM {_quoted(table.name)}")

    def close(self) -> None:
        """End the read transaction and close (nothing was written)."""
        with contextlib.suppress(sqlite3.Error):
            self.con.execute("ROLLBACK")
        self.con.close()


def _psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError:
        raise KGError("reading PostgreSQL needs the psycopg driver: pip install 'sparqlnav[postgres]'") from None
    return psycopg


class PostgresReader:
    """A PostgreSQL database read in one READ ONLY, REPEATABLE READ transaction."""

    def __init__(self, database: Database) -> None:
        psycopg = self.psycopg = _psycopg()
        self.shown = database.shown
        self._cursors = 0
        options: dict[str, Any] = {"application_name": "sparqlnav"}
        try:
            given = psycopg.conninfo.conninfo_to_dict(database.target)
        except psycopg.ProgrammingError as exc:
            raise KGError(f"bad PostgreSQL URL {database.shown}: {_first_line(exc)}") from None
        if "connect_timeout" not in given:
            options["connect_timeout"] = CONNECT_TIMEOUT_S
        try:
            self.con = psycopg.connect(database.target, autocommit=False, **options)
        except psycopg.Error as exc:
            raise KGError(f"cannot connect to PostgreSQL at {database.shown}: {_first_line(exc)}") from None
        try:
            self.con.read_only = True
            self.con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            read_only = self.con.execute("SHOW transaction_read_only").fetchone()
            if not read_only or read_only[0] != "on":
                raise KGError(f"PostgreSQL at {database.shown} did not start a read-only transaction; nothing was read")
            self.dbname = str(self.con.info.dbname)
        except psycopg.Error as exc:
            self.con.close()
            raise KGError(f"cannot read PostgreSQL at {database.shown}: {_first_line(exc)}") from None

    def transaction_read_only(self) -> str:
        """The session's `transaction_read_only` as PostgreSQL reports it ("on" while we read)."""
        found = self.con.execute("SHOW transaction_read_only").fetchone()
        return str(found[0]) if found else ""

    def tables(self) -> list[Table]:
        """Ordinary and partitioned tables of every schema but the system's, that this user may read; a table
        outside `public` is named `schema.table`."""
        listed = self.con.execute(
            "SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition "
            "AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' "
            "AND has_table_privilege(c.oid, 'SELECT') ORDER BY n.nspname, c.relname"
        ).fetchall()
        oids = [oid for oid, _, _ in listed]
        names = {oid: rel if schema == "public" else f"{schema}.{rel}" for oid, schema, rel in listed}
        self._sql_names = {names[oid]: f"{_quoted(schema)}.{_quoted(rel)}" for oid, schema, rel in listed}
        columns: dict[int, list[tuple[int, str, str, str]]] = {}
        for oid, num, name, declared, typname in self.con.execute(
            "SELECT a.attrelid, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), t.typname "
            "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
            "WHERE a.attrelid = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum",
            (oids,),
        ):
            columns.setdefault(oid, []).append((num, name, declared, typname))
        self._native = {names[oid]: [typ in PG_NATIVE for _, _, _, typ in cols] for oid, cols in columns.items()}
        by_num = {oid: {num: name for num, name, _, _ in cols} for oid, cols in columns.items()}
        keys: dict[int, tuple[str, ...]] = {}
        foreign: dict[int, list[ForeignKey]] = {}
        for oid, kind, conkey, target, confkey in self.con.execute(
            "SELECT conrelid, contype, conkey, confrelid, confkey FROM pg_catalog.pg_constraint "
            "WHERE conrelid = ANY(%s) AND contype IN ('p', 'f') ORDER BY conrelid, conname",
            (oids,),
        ):
            cols = tuple(by_num[oid][n] for n in conkey)
            if kind == "p":
                keys[oid] = cols
            elif target in names:
                foreign.setdefault(oid, []).append(
                    ForeignKey(cols, names[target], tuple(by_num[target][n] for n in confkey)))
        return [
            Table(names[oid], tuple(Column(n, d) for _, n, d, _ in columns.get(oid, [])), keys.get(oid, ()),
                  tuple(foreign.get(oid, [])))
            for oid in oids
        ]

    def fingerprint(self, tables: list[Table]) -> str:
        """The schema, and each table's row count and an order-free checksum of its rows (one scan each)."""
        parts = [repr(tables)]
        for t in tables:
            found = self.con.execute(
                "SELECT count(*), coalesce(sum(('x' || left(md5(r::text), 15))::bit(60)::bigint), 0)::text "
                f"FROM {self._sql_names[t.name]} AS r"
            ).fetchone()
            parts.append(f"{t.name}\0{found}")
        return "\n".join(parts)

    def rows(self, table: Table) -> Iterator[Row]:
        """The table's rows in its columns' order, through a server-side cursor; types natural_literal does not
        know are read as PostgreSQL's text for them."""
        native = self._native.get(table.name, [])
        columns = ", ".join(
            _quoted(c.name) if i < len(native) and native[i] else f"{_quoted(c.name)}::text"
            for i, c in enumerate(table.columns)
        )
        self._cursors += 1  # a foreign key's lookup reads another table while this one is being read
        with self.con.cursor(name=f"sparqlnav_rows_{self._cursors}") as cursor:
            cursor.itersize = BATCH_ROWS
            cursor.execute(f"SELECT {columns} FROM {self._sql_names[table.name]}")
            yield from cursor

    def close(self) -> None:
        """End the read-only transaction and close."""
        with contextlib.suppress(self.psycopg.Error):  # a connection already gone has nothing to roll back
            self.con.rollback()
        self.con.close()


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


@dataclass(frozen=True)
class Materialised:
    """A database's store and what the graph over it needs: its base, tables and prefixes."""

    info: StoreInfo | None  # None: the schema only, nothing copied (a database answered in SQL)
    database: Database
    base: str
    tables: tuple[Table, ...]
    prefixes: dict[str, str]

    @property
    def description(self) -> str:
        """One line: how many triples from which database (or its tables, when nothing was copied)."""
        what = f"the SQLite database {self.database.path}" if self.database.kind == "sqlite" else (
            f"the PostgreSQL database {self.database.shown}")
        if self.info is None:
            return f"{what} ({len(self.tables)} tables; answered in SQL, copied into a graph only for SPARQL)"
        return f"{self.info.triples} triples from {what} ({len(self.tables)} tables, W3C Direct Mapping)"


RELATIONAL = "relational"  # the key of a database graph's `Materialised` in KnowledgeGraph.extra


def relational_of(kg: KnowledgeGraph) -> Materialised | None:
    """The database a graph was opened from (its spec and tables), None for any other graph."""
    found = kg.extra.get(RELATIONAL)
    return found if isinstance(found, Materialised) else None


def key_properties(kg: KnowledgeGraph) -> set[str]:
    """The properties of a database graph's key columns (primary and foreign keys): they identify rows, and a
    question about them ("List the books with their id.") asks for nothing a person reads. Empty for other graphs."""
    found = relational_of(kg)
    if found is None:
        return set()
    naming = Naming(found.base)
    return {naming.column(t.name, c) for t in found.tables
            for c in (*t.key, *(c for fk in t.foreign_keys for c in fk.columns))}


@contextlib.contextmanager
def read_database(database: Database) -> Iterator[SqliteReader | PostgresReader]:
    """One read-only snapshot of the database, closed afterwards."""
    if database.kind == "sqlite":
        if not database.path.is_file():
            raise KGError(f"no such SQLite database: {database.path}")
        reader: SqliteReader | PostgresReader = SqliteReader(database.path)
    else:
        reader = PostgresReader(database)
    try:
        yield reader
    finally:
        reader.close()


def schema_of(database: Database) -> Materialised:
    """The database's tables and the base its mapping would use, read from its catalogue; nothing copied."""
    with read_database(database) as reader:
        name = reader.dbname if isinstance(reader, PostgresReader) else database.path.stem
        base = base_iri(name)
        try:
            tables = reader.tables()
        except _read_errors(database) as exc:
            raise KGError(f"cannot read {database.shown}: {_first_line(exc)}") from None
    return Materialised(None, database, base, tuple(tables), table_prefixes(base, tables))


def rows_in(database: Database) -> int:
    """Rows in all the database's tables: SQLite counts them (a scan of each table's b-tree, fast), PostgreSQL's
    statistics estimate them (a count would scan tens of millions of rows)."""
    with read_database(database) as reader:
        if isinstance(reader, SqliteReader):
            return sum(reader.con.execute(f"SELECT COUNT(*) FROM {_quoted(t.name)}").fetchone()[0]
                       for t in reader.tables())
        found = reader.con.execute(
            "SELECT COALESCE(SUM(GREATEST(reltuples, 0)), 0)::bigint FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', "
            "'information_schema')").fetchone()
        return int(found[0]) if found else 0


def materialise(database: Database, stores_dir: Path, reporter: Reporter | None = None) -> Materialised:
    """The database's Direct Mapping in a store under `stores_dir`, built unless one of the same content exists."""
    with read_database(database) as reader:
        name = reader.dbname if isinstance(reader, PostgresReader) else database.path.stem
        base = base_iri(name)
        try:
            tables = reader.tables()
            key = store_key(database, base, reader.fingerprint(tables))
            source = StoreSource(key, (database.shown,), lambda store, _scratch: _fill(store, reader, tables, base, reporter))
            info = ensure_built(source, stores_dir, reporter)
        except _read_errors(database) as exc:
            raise KGError(f"cannot read {database.shown} into a store: {_first_line(exc)}") from None
    return Materialised(info, database, base, tuple(tables), table_prefixes(base, tables))


def _read_errors(database: Database) -> tuple[type[BaseException], ...]:
    """What reading the database may raise besides KGError: the driver's errors and the file system's."""
    if database.kind == "postgresql":
        return (_psycopg().Error, OSError)
    return (sqlite3.Error, OSError)


def store_key(database: Database, base: str, fingerprint: str) -> str:
    """The store's folder name: it changes with the database's content, the mapping and the store layout."""
    h = hashlib.sha256(f"{STORE_FORMAT_VERSION}\0db{MAPPING_VERSION}\0{database.shown}\0{base}\0".encode())
    h.update(fingerprint.encode())
    return h.hexdigest()[:20]


def stored_status(source: str, key: str) -> str | None:
    """Whether a store built from the database `source` (as meta.json names it) is "current" or "stale", without
    reading the database; None when `source` names no database. A PostgreSQL store counts as current: it is the
    latest built for its database (building removes older ones) and is checked when the database is next opened."""
    if source.startswith("postgresql://"):
        return "current"
    if not source.startswith("sqlite://"):
        return None
    try:
        database = _sqlite_url(source)
        fresh = store_key(database, base_iri(database.path.stem), sqlite_fingerprint(database.path))
    except (KGError, OSError):
        return "stale"  # not a URL we write, or a file we cannot read
    return "current" if database.path.is_file() and fresh == key else "stale"


def _fill(store: ox.Store, reader: SqliteReader | PostgresReader, tables: list[Table], base: str,
          reporter: Reporter | None) -> None:
    mapping = DirectMapping(Naming(base), tables, reader.rows)
    store.bulk_extend(mapping.schema_labels())
    for i, table in enumerate(tables, start=1):
        task = f"reading table {table.name}" + (f" ({i}/{len(tables)})" if len(tables) > 1 else "")
        store.bulk_extend(_counted(mapping.quads(table), task, reporter))


def _counted(quads: Iterator[ox.Quad], task: str, reporter: Reporter | None, every: int = 20_000) -> Iterator[ox.Quad]:
    """The quads, telling the reporter how many have passed every `every` (and at the end)."""
    if reporter is None:
        yield from quads
        return
    n = 0
    reporter.step(ProgressStep(task, 0, None, "triples"))
    for n, quad in enumerate(quads, start=1):
        if n % every == 0:
            reporter.step(ProgressStep(task, n, None, "triples"))
        yield quad
    reporter.step(ProgressStep(task, n, None, "triples"))
