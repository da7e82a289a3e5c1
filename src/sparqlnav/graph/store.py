"""Local RDF files as a persistent Oxigraph store, queried through a managed `oxigraph serve-read-only` process.

Why a process and not in-process pyoxigraph: a query inside pyoxigraph cannot be interrupted, and
Oxigraph's own server timeout does not stop every query (a COUNT over a cross product runs on). A
separate process can always be killed, so a time limit is real; the process is restarted on demand.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import hashlib
import io
import json
import logging
import os
import queue
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pyoxigraph as ox

from sparqlnav.cancel import RunCancelled
from sparqlnav.errors import SparqlnavError
from sparqlnav.folders import Outside, describe_outside, files_under
from sparqlnav.graph.endpoint import (
    HttpOptions,
    Limits,
    Outcome,
    QueryResult,
    RemoteEndpoint,
    default_engine_memory,
)
from sparqlnav.graph.entities import (
    EntityExpansionError,
    as_ntriples_bounded,
    check_entity_expansion,
)
from sparqlnav.graph.keeper import (
    Registration,
    ServerFolder,
    ServerState,
    keeper_command,
    process_start,
)
from sparqlnav.graph.keeper import kill as kill_process
from sparqlnav.graph.netjail import PEAK_MEMORY_MARK, jail_command
from sparqlnav.graph.progress import CountingReader, ProgressStep, Reporter
from sparqlnav.sparql.prefixes import spell_out_names

FORMATS: dict[str, ox.RdfFormat] = {
    ".ttl": ox.RdfFormat.TURTLE,
    ".turtle": ox.RdfFormat.TURTLE,
    ".nt": ox.RdfFormat.N_TRIPLES,
    ".ntriples": ox.RdfFormat.N_TRIPLES,
    ".nq": ox.RdfFormat.N_QUADS,
    ".trig": ox.RdfFormat.TRIG,
    ".n3": ox.RdfFormat.N3,
    ".rdf": ox.RdfFormat.RDF_XML,
    ".owl": ox.RdfFormat.RDF_XML,
    ".xml": ox.RdfFormat.RDF_XML,
    ".jsonld": ox.RdfFormat.JSON_LD,
    ".json-ld": ox.RdfFormat.JSON_LD,
}
STORE_FORMAT_VERSION = "1"  # bump when the on-disk layout changes, so old stores are rebuilt
BUILD_PREFIX = ".build-"  # folders of stores being built; renamed to their key when complete
# Written into every store (and build) folder sparqlnav makes: only folders holding it are ever removed.
STORE_MARKER = ".sparqlnav-store"
MARKER_TEXT = "sparqlnav built this store; `sparqlnav cache clear` may remove this folder.\n"
CANCEL_KILL_AFTER_S = 0.5  # a cancelled query in flight this long is stopped by restarting the engine

log = logging.getLogger(__name__)

class LoadError(SparqlnavError):
    """A file could not be loaded; the message names the file and the parser's complaint."""


def rdf_files(path: Path) -> list[Path]:
    """The RDF files of a file or folder (recursively), sorted; error when none."""
    if not path.exists():
        raise LoadError(f"no such file or folder: {path}")
    if path.is_file():
        if path.suffix.lower() not in FORMATS:
            raise LoadError(f"{path}: unknown RDF format (known: {', '.join(sorted(FORMATS))})")
        return [path]
    outside: list[Outside] = []
    found = files_under(path, lambda p: p.suffix.lower() in FORMATS, outside)
    for line in describe_outside(outside):  # a folder's symlinks may point anywhere; only the folder is served
        log.warning("%s", line)
    if not found:
        raise LoadError(
            f"{path}: no RDF files found (known extensions: {', '.join(sorted(FORMATS))})"
        )
    return found


def store_key(files: Iterable[Path]) -> str:
    """A key that changes when any file's path, size or modification time changes."""
    h = hashlib.sha256(STORE_FORMAT_VERSION.encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


@dataclass(frozen=True)
class StoreInfo:
    """A built store on disk and what went into it."""

    path: Path
    files: tuple[str, ...]
    triples: int
    built_s: float | None = None  # seconds this process spent building it; None when it was there already

    @property
    def data_dir(self) -> Path:
        """The Oxigraph database folder."""
        return self.path / "oxigraph"


@dataclass(frozen=True)
class StoreSource:
    """What a store is built from: a key that changes whenever its content does, the sources meta.json records
    (file paths, or a database's URL), and how to fill a fresh store (given a scratch folder inside the build)."""

    key: str
    names: tuple[str, ...]
    fill: Callable[[ox.Store, Path], None]


def ensure_store(
    files: list[Path], stores_dir: Path, reporter: Reporter | None = None
) -> StoreInfo:
    """Load files into a store under `stores_dir` unless an up-to-date one exists; atomic and crash-safe.

    Leftovers of builds whose process died are removed first; a damaged store is rebuilt from its files.
    `reporter` hears the bytes read of each file as the parser takes them.
    """

    def fill(store: ox.Store, scratch: Path) -> None:
        for f in files:
            if FORMATS[f.suffix.lower()] == ox.RdfFormat.RDF_XML:
                try:
                    check_entity_expansion(f)
                except EntityExpansionError as exc:
                    raise LoadError(f"cannot load {f}: {exc}") from None
        for i, f in enumerate(files):
            try:
                _load_file(store, f, reporter, f"reading {f.name}" + (f" ({i + 1}/{len(files)})" if len(files) > 1 else ""),
                           scratch)
            except SyntaxError as exc:
                raise LoadError(f"cannot load {f}: {exc}") from None

    source = StoreSource(store_key(files), tuple(str(f.resolve()) for f in files), fill)
    return ensure_built(source, stores_dir, reporter)


def ensure_built(source: StoreSource, stores_dir: Path, reporter: Reporter | None = None) -> StoreInfo:
    """The store of `source` under `stores_dir`, built (atomically) unless an up-to-date, undamaged one exists."""
    stores_dir.mkdir(parents=True, exist_ok=True)
    remove_leftovers(stores_dir)
    final = stores_dir / source.key
    if final.exists() or final.is_symlink():
        if not made_by_sparqlnav(final):
            raise LoadError(f"{final} is in the way: it is not a store sparqlnav made (no {STORE_MARKER}); move it")
        problem = store_damage(final)
        if problem is None:
            if not (final / STORE_MARKER).is_file():
                with contextlib.suppress(OSError):  # a store of a version before the marker; a read-only home keeps it as is
                    _mark(final)
            return read_store(final)
        if stores_dir.is_symlink():
            raise LoadError(f"the store {final} is damaged ({problem}); sparqlnav removes nothing through the "
                            f"symlinked stores folder {stores_dir}: remove {final.name} there yourself")
        notice = f"the store {final} is damaged ({problem}); rebuilding it from its source files"
        log.warning("%s", notice)
        if reporter:
            reporter.step(ProgressStep(notice, 0, len(source.names), "items"))
        shutil.rmtree(final, ignore_errors=True)
    started = time.monotonic()
    with _build_folder(stores_dir, final.name) as tmp:
        store = ox.Store(str(tmp / "oxigraph"))
        source.fill(store, tmp)
        triples = len(store)
        store.flush()
        del store  # closes RocksDB before the folder moves
        info = {
            "files": list(source.names),
            "triples": triples,
            "created": time.time(),
        }
        (tmp / "meta.json").write_text(json.dumps(info, indent=1))
        with contextlib.suppress(OSError):  # another process finished the same store first; use theirs
            tmp.rename(final)
    _remove_superseded(stores_dir, final)
    return dataclasses.replace(read_store(final), built_s=time.monotonic() - started)


def _load_file(store: ox.Store, f: Path, reporter: Reporter | None, task: str, scratch: Path) -> None:
    """Bulk-load one file; with a reporter, through a reader that counts the bytes the parser took. RDF/XML is
    parsed first in a child process under a memory ceiling (its entities expand inside the parser)."""
    fmt, base = FORMATS[f.suffix.lower()], f.resolve().as_uri()
    if fmt == ox.RdfFormat.RDF_XML:
        folder = Path(tempfile.mkdtemp(prefix="rdfxml-", dir=scratch))
        try:
            as_ntriples_bounded(f, folder / "converted.nt", base_iri=base, memory_bytes=default_engine_memory())
            _load_file(store, folder / "converted.nt", reporter, task, scratch)
        except EntityExpansionError as exc:
            raise LoadError(f"cannot load {f}: {exc}") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    if reporter is None:
        store.bulk_load(path=str(f), format=fmt, base_iri=base)
        return
    size = f.stat().st_size
    reporter.step(ProgressStep(task, 0, size, "bytes"))
    with f.open("rb") as raw:
        reader = CountingReader(raw, lambda done: reporter.step(ProgressStep(task, done, size, "bytes")))
        # Buffered in 1 MiB reads: the parser's own small reads would report thousands of times a second.
        store.bulk_load(input=io.BufferedReader(reader, buffer_size=1 << 20), format=fmt, base_iri=base)


def read_store(path: Path) -> StoreInfo:
    """The store at `path` as its meta.json describes it; LoadError naming the file when that is unreadable."""
    meta_path = path / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
        return StoreInfo(path, tuple(str(f) for f in meta["files"]), int(meta["triples"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoadError(f"cannot read {meta_path}: {type(exc).__name__}: {exc}") from None


def made_by_sparqlnav(folder: Path) -> bool:
    """Whether `folder` is a real folder sparqlnav made: it holds the marker, or (a store built before the marker
    existed) a meta.json with sparqlnav's fields. A symlink never is, nor a bare folder."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    marker = folder / STORE_MARKER
    if marker.is_file() and not marker.is_symlink():
        return True
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(meta, dict) and isinstance(meta.get("files"), list) and isinstance(meta.get("triples"), int)
            and isinstance(meta.get("created"), (int, float)))


def _mark(folder: Path) -> None:
    """Write the marker into a folder sparqlnav made; O_NOFOLLOW, so a planted symlink is not written through."""
    fd = os.open(folder / STORE_MARKER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(MARKER_TEXT)


def store_damage(path: Path) -> str | None:
    """What is wrong with a built store (its meta.json or its database), or None when it opens and reads."""
    try:
        info = read_store(path)
    except LoadError as exc:
        return str(exc)
    try:
        store = ox.Store.read_only(str(info.data_dir))
        first = next(iter(store.quads_for_pattern(None, None, None)), None)
        del store
    except (OSError, RuntimeError, ValueError) as exc:
        return f"cannot read {info.data_dir}: {exc}"
    if first is None and info.triples:
        return f"{info.data_dir} is empty but should hold {info.triples} triples"
    return None


def _take_lock(path: Path, *, wait: bool) -> IO[str] | None:
    """An open file holding an flock on `path` (created if need be), or None when another process holds it.

    A lock on a file that was unlinked meanwhile guards nothing, so the path is checked to still be it. A path
    that is a symlink raises OSError (ELOOP): following it would create a file wherever it points.
    """
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        held = os.fdopen(fd, "a")
        try:
            fcntl.flock(held, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.close()
            return None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(held.fileno()).st_ino:
                return held
        held.close()


@contextlib.contextmanager
def _build_folder(stores_dir: Path, key: str) -> Iterator[Path]:
    """A fresh `.build-*` folder, locked for as long as this process builds in it, removed afterwards.

    The lock (an flock on a file beside the folder) dies with the process however it ends, even by
    SIGKILL, so `remove_leftovers` can tell an abandoned folder from one still being built.
    """
    tmp = stores_dir / f"{BUILD_PREFIX}{key}-{os.getpid()}-{threading.get_ident()}"
    lock = tmp.with_name(tmp.name + ".lock")
    held = _take_lock(lock, wait=True)  # taken before the folder exists, so no cleaner sees it unlocked
    assert held is not None
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        _mark(tmp)  # moves with the folder when it becomes the store: what lets a cleaner remove it
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        lock.unlink(missing_ok=True)
        held.close()


def remove_leftovers(stores_dir: Path, left_alone: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Remove `.build-*` folders sparqlnav made that no live process is building in (left by a crash or a kill);
    return them. Nothing is removed through a symlink: a symlinked stores folder is not cleaned, and symlinks and
    folders without the marker are left as they are (appended to `left_alone` with why)."""
    removed: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    if stores_dir.is_symlink() or not stores_dir.is_dir():
        return removed
    for entry in sorted(stores_dir.glob(BUILD_PREFIX + "*")):
        is_lock = entry.name.endswith(".lock")
        folder = entry.with_name(entry.name[: -len(".lock")]) if is_lock else entry
        lock = folder.with_name(folder.name + ".lock")
        if entry.is_symlink():
            skipped.append((entry, "a symlink"))
            continue
        if is_lock and (folder.exists() or folder.is_symlink()):
            continue  # handled with its folder
        if not (entry.is_file() if is_lock else entry.is_dir()):
            skipped.append((entry, "not a lock file" if is_lock else "not a folder"))
            continue
        if not is_lock and not lock.exists() and not made_by_sparqlnav(folder):
            # A builder holds its lock file before its folder exists, so this is no live build; no lock is made for it.
            skipped.append((folder, f"no {STORE_MARKER} marker"))
            continue
        try:
            held = _take_lock(lock, wait=False)
        except OSError:
            continue  # its lock is a symlink (said above), or a stores folder we may only read
        if held is None:
            continue  # its builder is alive
        try:
            if is_lock:
                if os.fstat(held.fileno()).st_size == 0:  # a lock file of ours is empty; anything else is not one
                    lock.unlink(missing_ok=True)
            elif made_by_sparqlnav(folder):  # read under the lock: a builder marks its folder as soon as it makes it
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
                lock.unlink(missing_ok=True)
            else:
                skipped.append((folder, f"no {STORE_MARKER} marker"))
        finally:
            held.close()
    if left_alone is not None:
        left_alone.extend(skipped)
    return removed


def _remove_superseded(stores_dir: Path, current: Path) -> None:
    """Remove stores built earlier from the same files (since changed), so old versions do not pile up; only
    stores sparqlnav made, never through a symlink."""
    try:
        sources = read_store(current).files
    except LoadError:
        return
    if stores_dir.is_symlink():
        return
    for entry in stores_dir.iterdir():
        if entry == current or entry.name.startswith(".") or not made_by_sparqlnav(entry):
            continue
        with contextlib.suppress(LoadError):
            if read_store(entry).files == sources:
                shutil.rmtree(entry, ignore_errors=True)


def oxigraph_binary() -> str:
    """Path of the `oxigraph` CLI installed with the `oxigraph` package."""
    beside = Path(sys.executable).parent / "oxigraph"
    if beside.exists():
        return str(beside)
    found = shutil.which("oxigraph")
    if not found:
        raise RuntimeError("the `oxigraph` command is missing: pip install oxigraph")
    return found


def _die_with_parent() -> None:
    # Linux: the server gets SIGKILL if the Python process dies, so no orphan keeps the port.
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _Spawner:
    """Starts child processes from one long-lived thread.

    Linux sends the parent-death signal when the *thread* that forked the child exits, so a server
    started from a short-lived worker thread would die with it; this thread lives as long as the process.
    """

    def __init__(self) -> None:
        self._requests: queue.Queue[tuple[list[str], dict[str, Any], Future[subprocess.Popen[bytes]]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """`subprocess.Popen(cmd, **kwargs)`, forked from the spawner thread."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="sparqlnav-spawner", daemon=True)
                self._thread.start()
        done: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((cmd, kwargs, done))
        return done.result()

    def _loop(self) -> None:
        linux = sys.platform.startswith("linux")
        while True:
            cmd, kwargs, done = self._requests.get()
            try:
                done.set_result(subprocess.Popen(cmd, preexec_fn=_die_with_parent if linux else None, **kwargs))
            except Exception as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
                done.set_exception(exc)


_SPAWNER = _Spawner()


# What the engine's allocator prints when the heap ceiling refuses it memory (Rust's alloc error handler).
OUT_OF_MEMORY_MARK = b"memory allocation of "


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(socket_path: str) -> bool:
    """Whether an engine of ours accepts connections on the Unix socket `socket_path`: the socket must sit in a
    folder this user owns and nobody else may enter, so no other local user can have put it there (issue 39: a
    listener on the engine's old TCP port was taken for the engine after a crash)."""
    if not socket_path or not _private_folder(Path(socket_path).parent):
        return False
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        s.connect(socket_path)
        return True
    return False


def _private_folder(path: Path) -> bool:
    """Whether `path` is a real folder (no symlink) owned by this user with no rights for anyone else."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077 == 0


def _socket_folder() -> Path:
    """A new private folder for an engine's socket (short enough for a Unix socket's path; the launcher removes it
    when the engine ends)."""
    return Path(tempfile.mkdtemp(prefix="sparqlnav-engine-"))


def _open_log(path: Path) -> IO[bytes] | None:
    """A kept engine's log, for reading what it said (its memory ceiling); None when it is gone."""
    try:
        return open(path, "rb")
    except OSError:
        return None


class OxigraphServer:
    """One `oxigraph serve-read-only` process on 127.0.0.1, started on demand and killed on timeouts.

    It runs inside `graph/netjail` (a network namespace from which only `allowed` endpoints can be reached, so
    no reading of a query the guard let through can make it call anywhere else) with a heap ceiling of
    `memory_bytes`; a query that needs more ends the process, which is restarted like after a crash.

    With `idle_s` > 0 the process is kept (`graph/keeper`): it outlives this object and its process, is found and
    used by the next process serving the same store with the same configuration, and ends once nobody has used it
    for `idle_s` seconds. Killing it on a timeout stops it for every process; each of them restarts or finds the
    next one. With `idle_s` 0 it ends with this process, as before.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        startup_s: float = 20.0,
        allowed: Iterable[str] = (),
        memory_bytes: int | None = None,
        idle_s: float = 0.0,
    ) -> None:
        self.data_dir = data_dir
        self.startup_s = startup_s
        self.allowed = list(allowed)
        self.memory_bytes = memory_bytes
        self.idle_s = idle_s
        self.port = 0
        self.socket_path = ""  # the private Unix socket clients reach the engine on (its port is inside its jail)
        self._proc: subprocess.Popen[bytes] | None = None  # the process this object started (launcher or keeper)
        self._kept: ServerState | None = None  # the kept engine in use (started here or found)
        self._folder = self._kept_folder() if idle_s > 0 else None
        self._user: Registration | None = None
        self._log: IO[bytes] | None = None
        self._log_name = ""  # a kept engine's log, in its folder
        self._lock = threading.Lock()
        self.restarts = 0
        self.generation = 0  # bumped at each start
        self._memory_deaths: set[int] = set()  # generations that ended on the memory ceiling
        self.last_peak_bytes = 0  # the peak memory of the last engine process that ended on its own
        self._active = 0
        self._peak: dict[int, int] = {}  # generation -> most queries in flight at once

    def _config(self) -> str:
        """What an engine of this data is started with: a kept engine is only used by processes that agree."""
        parts = [str(self.data_dir.resolve()), oxigraph_binary(), repr(self.memory_bytes), *sorted(self.allowed)]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]

    def _kept_folder(self) -> ServerFolder | None:
        """The kept engine's folder inside the store (beside its database); None when it cannot be made there
        (a read-only home), or off Linux (a kept engine is told from a reused pid by /proc): the engine then ends
        with this process."""
        if not sys.platform.startswith("linux"):
            return None
        folder = ServerFolder(self.data_dir.parent / ".servers" / self._config())
        try:
            folder.make()
        except OSError as exc:
            log.info("not keeping the engine of %s running between calls: %s", self.data_dir.parent, exc)
            return None
        return folder

    @property
    def url(self) -> str:
        """The SPARQL query URL (valid once started)."""
        return f"http://127.0.0.1:{self.port}/query"

    @property
    def kept(self) -> bool:
        """Whether the engine is kept running between processes."""
        return self._folder is not None

    def running(self) -> bool:
        """Whether the engine process (or its keeper) is alive."""
        kept, proc = self._kept, self._proc  # read once: another thread may clear them meanwhile (issue 39)
        if kept is not None:
            if proc is not None:
                proc.poll()  # our child: reaped when it ends, so it does not count as running
            return process_start(kept.pid) == kept.started
        return proc is not None and proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The id of the process this object stops on a timeout (the keeper or the launcher); None when none."""
        kept, proc = self._kept, self._proc
        if not self.running():
            return None
        return kept.pid if kept is not None else (proc.pid if proc is not None else None)

    def ensure_running(self) -> str:
        """Start the process if it is not running (or use the kept one); return its query URL."""
        with self._lock:
            if self.running():
                return self.url
            if self._folder is not None:
                self._find_or_start(self._folder)
            else:
                self._start()
            return self.url

    def _find_or_start(self, folder: ServerFolder) -> None:
        """Use the folder's engine when it runs and answers, else start one and record it (under the folder's
        lock, so two processes arriving at once start one engine, not two)."""
        self._kill()
        with folder.locked():
            if self._user is None:
                self._user = folder.attach()  # under the lock: the keeper cannot decide it is unused meanwhile
            state = folder.read_state()
            config = self._config()
            if state is not None and state.config == config and process_start(state.pid) == state.started \
                    and _answers(state.socket):
                self._kept, self.port, self.socket_path = state, state.port, state.socket
                self._log = _open_log(folder.path / state.log)
                self.generation += 1
                return
            if state is not None:
                kill_process(state.pid, state.started)
                folder.clear_state(state.pid)
            self._start(folder)
            assert self._proc is not None
            started = process_start(self._proc.pid) or ""
            self._kept = ServerState(self._proc.pid, started, self.port, self._log_name, config, self.socket_path)
            folder.write_state(self._kept)

    def _start(self, folder: ServerFolder | None = None) -> None:
        last_error = ""
        for attempt in range(3):
            # Keep the port across restarts when it is still free, so clients keep their URL.
            if attempt > 0 or not self.port:
                self.port = _free_port()
            engine = [
                oxigraph_binary(),
                "serve-read-only",
                "--location",
                str(self.data_dir),
                "--bind",
                f"127.0.0.1:{self.port}",
                "--union-default-graph",
            ]  # no --timeout-s: it keeps a sleeping thread per request for that long (2 MiB of stack each, thousands
            # a minute under lexical's query bursts), and the client's deadline kills what overruns anyway
            # A new private folder for each start: whatever listened before is never taken for this engine.
            self.socket_path = str(_socket_folder() / "engine.sock")
            cmd = jail_command(engine, port=self.port, allowed=self.allowed, memory_bytes=self.memory_bytes,
                               socket_path=self.socket_path)
            if folder is None:
                # stderr to a file, not a pipe nobody reads: a full pipe would block the server.
                self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process; closed in _kill
                self._proc = _SPAWNER.popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log
                )
            else:
                # A session of its own and no parent-death signal: the keeper outlives this process on purpose.
                self._log_name = f"engine-{os.getpid()}-{time.monotonic_ns()}.log"
                self._log = open(folder.path / self._log_name, "w+b")  # noqa: SIM115 - closed in _kill
                self._proc = subprocess.Popen(
                    keeper_command(folder.path, self.idle_s, self._log_name, cmd),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True,
                )
            deadline = time.monotonic() + self.startup_s
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    self._log.seek(0)
                    last_error = self._log.read(2000).decode(errors="replace")
                    break
                if _answers(self.socket_path):
                    self.generation += 1
                    return
                time.sleep(0.02)
            self._kill()
        raise RuntimeError(f"the local Oxigraph server did not start: {last_error.strip()[:300]}")

    def _kill(self) -> None:
        if self._kept is not None:
            kill_process(self._kept.pid, self._kept.started)  # the engine dies with its keeper
            if self._folder is not None:
                with contextlib.suppress(OSError), self._folder.locked():
                    self._folder.clear_state(self._kept.pid)  # only if no other process replaced it already
                with contextlib.suppress(OSError):
                    (self._folder.path / self._kept.log).unlink()
            self._kept = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        if self._log is not None:
            if self._ran_out_of_memory():
                self._memory_deaths.add(self.generation)
            self._log.seek(0)
            for line in self._log.read().decode(errors="replace").splitlines():
                if line.startswith(PEAK_MEMORY_MARK):  # the launcher's last word on an engine that ended
                    self.last_peak_bytes = int(line.removeprefix(PEAK_MEMORY_MARK).split()[0])
            self._log.close()
            self._log = None
        self._proc = None
        if self.socket_path:  # the launcher removes it as it ends; one killed outright cannot
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(self.socket_path))

    def _ran_out_of_memory(self) -> bool:
        assert self._log is not None
        self._log.seek(0)
        return OUT_OF_MEMORY_MARK in self._log.read()

    def begin_query(self) -> int:
        """Count a query in flight; return the generation it runs on."""
        with self._lock:
            self._active += 1
            self._peak[self.generation] = max(self._peak.get(self.generation, 0), self._active)
            return self.generation

    def end_query(self) -> None:
        """A query counted by begin_query is done."""
        with self._lock:
            self._active -= 1
        if self._folder is not None:
            self._folder.touch()  # what the keeper's idle period counts from

    def memory_death(self, generation: int, *, wait_s: float = 2.0) -> tuple[bool, bool]:
        """Whether the process of `generation` ended on the memory ceiling, and whether it ran no other query
        at the time (so the query that saw it go is the one that needed the memory)."""
        with self._lock:
            current = generation == self.generation
        if current:
            # The connection drops a moment before the process is gone; waited for without the lock, so other
            # threads' queries are not held up meanwhile.
            deadline = time.monotonic() + wait_s
            while self.running() and time.monotonic() < deadline:
                time.sleep(0.01)
        with self._lock:
            if current and generation == self.generation and self._log is not None and not self.running() \
                    and self._ran_out_of_memory():
                self._memory_deaths.add(generation)
            alone = self._peak.get(generation, 0) <= 1
            if alone and self._folder is not None and self._user is not None:
                alone = self._folder.users(besides=self._user) == 0  # another process's query may have been in flight
            return generation in self._memory_deaths, alone

    def engine_pid(self) -> int | None:
        """The engine process's id (the launcher's child), for measuring it; None when not running."""
        top = self.pid
        if top is None:
            return None
        seen, todo = [], [top]
        while todo:  # the keeper's child is the launcher; the launcher's children its door and the engine
            pid = todo.pop()
            seen.append(pid)
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "oxigraph":
                    return pid
                todo += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        return None

    def restart(self, generation: int | None = None) -> None:
        """Kill the process (stopping whatever it was computing); the next query starts a new one.

        With `generation`, only if the process is still that one: threads that saw the same failure
        then cause one restart, not one each.
        """
        with self._lock:
            if generation is not None and generation != self.generation:
                return
            self._kill()
            self.restarts += 1

    def stop(self) -> None:
        """Stop the process for good (a kept one is only let go of: it ends when unused for its idle period)."""
        with self._lock:
            if self._folder is None:
                self._kill()
                return
            if self._user is not None:
                with contextlib.suppress(OSError):
                    self._folder.detach(self._user)
                self._user = None
            self._kept = None
            self._proc = None  # not waited for: it is meant to outlive this process
            if self._log is not None:
                self._log.close()
                self._log = None


class LocalGraph:
    """RDF files served by a private Oxigraph process; every query is time-limited for real."""

    def __init__(
        self,
        info: StoreInfo,
        *,
        name: str,
        limits: Limits | None = None,
        allowed_services: Iterable[str] = (),
        http: HttpOptions | None = None,
    ) -> None:
        self.info = info
        self.name = name
        self.limits = limits or Limits()
        self._allowed = list(allowed_services)
        self._server = OxigraphServer(
            info.data_dir,
            allowed=self._allowed,
            memory_bytes=self.limits.engine_memory_bytes,
            idle_s=self.limits.engine_idle_s,
        )
        self._http = http
        self._remote: RemoteEndpoint | None = None
        self._client_lock = threading.Lock()

    @property
    def url(self) -> str:
        """The local server's SPARQL URL (starts the server)."""
        return self._endpoint().url

    @property
    def server(self) -> OxigraphServer:
        """The managed server process."""
        return self._server

    def _endpoint(self) -> RemoteEndpoint:
        url = self._server.ensure_running()
        with self._client_lock:  # threads share one client; swap it only once per server restart
            return self._client_for(url)

    def _client_for(self, url: str) -> RemoteEndpoint:
        if self._remote is None or self._remote.url != url or self._remote.unix_socket != self._server.socket_path:
            if self._remote is not None:
                self._remote.close()
            # No retries: a local server that is busy or gone is restarted here, not waited for.
            http = self._http or HttpOptions(retries=0)
            self._remote = RemoteEndpoint(
                url, name=self.name, limits=self.limits, http=http, allowed_services=self._allowed,
                allow_self=False,  # the server's loopback URL is ours alone: never named in a refusal
                unix_socket=self._server.socket_path,  # the only way in: a socket in a folder of ours alone
            )
        return self._remote

    def query(self, sparql: str, *, timeout_s: float | None = None) -> QueryResult:
        """Run one query; on timeout, or when its run is cancelled, the server process is killed so the work
        really stops."""
        given = timeout_s if timeout_s is not None else self.limits.timeout_s
        deadline = time.monotonic() + given
        memory_deaths = 0
        # A name the engine would misread (`prodi:…Kuttner%40company.org`, valid SPARQL) is sent as its full IRI.
        sparql = spell_out_names(sparql)
        for attempt in range(5):
            endpoint = self._endpoint()
            generation = self._server.begin_query()
            # A retry gets what is left of the time limit, not a fresh one.
            limit = given if attempt == 0 else max(0.1, deadline - time.monotonic())
            started = time.monotonic()
            try:
                result = endpoint.query(sparql, timeout_s=limit)
            except RunCancelled:
                # The run gave up, but the engine would compute on to its time limit (a core of two, for nobody):
                # a query that was not quick is stopped the way a timed-out one is. Other runs' queries on the
                # same process see it go and retry within their own limits.
                if time.monotonic() - started >= CANCEL_KILL_AFTER_S:
                    self._server.restart(generation)
                raise
            finally:
                self._server.end_query()
            if result.outcome is Outcome.TIMEOUT:
                self._server.restart(generation)
                result.message = f"the query did not finish within {given:g} s"
            if result.outcome is Outcome.UNREACHABLE:
                out_of_memory, alone = self._server.memory_death(generation)
                memory_deaths += out_of_memory
                # The one query in flight when the ceiling was hit needed that memory; with others beside it, each
                # is retried once and the one that meets the ceiling again is it.
                if out_of_memory and (alone or memory_deaths > 1):
                    self._server.restart(generation)
                    return QueryResult(sparql, Outcome.ENGINE_ERROR, message=self._memory_message(), endpoint=self.name)
                if alone and not self._server.running():
                    # It ended while this query was the only one it ran: sending it again would end the next one
                    # too (one query started four engines in 15 s, issue 39). Restarted for the others; not retried.
                    self._server.restart(generation)
                    return QueryResult(sparql, Outcome.ENGINE_ERROR, endpoint=self.name,
                                       message="the local engine stopped while running this query (not run again)")
            if result.outcome is not Outcome.UNREACHABLE or time.monotonic() >= deadline:
                break
            # The process died under us (killed for another thread's timeout, or crashed): restart and retry.
            self._server.restart(generation)
        if result.outcome is Outcome.UNREACHABLE and time.monotonic() >= deadline:
            # Its time ran out while the engine was being restarted: for the caller that is a timeout.
            result = QueryResult(
                sparql, Outcome.TIMEOUT, message=f"the query did not finish within {given:g} s", endpoint=self.name
            )
        return result

    def _memory_message(self) -> str:
        ceiling = self.limits.engine_memory_bytes / 1024**3
        return (
            f"the query needed more memory than allowed ({ceiling:.1f} GiB, SPARQLNAV_ENGINE_MEMORY): "
            "it builds values too large to hold; simplify it"
        )

    def close(self) -> None:
        """Stop the server process."""
        if self._remote is not None:
            self._remote.close()
        self._server.stop()

    def __enter__(self) -> LocalGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_store(self) -> ox.Store:
        """A read-only pyoxigraph handle on the same data (for bulk reads such as building indexes)."""
        return ox.Store.read_only(str(self.info.data_dir))


def health(url: str) -> bool:
    """True when a SPARQL endpoint answers a trivial ASK."""
    try:
        r = httpx.get(
            url,
            params={"query": "ASK {}"},
            headers={"Accept": "application/sparql-results+json"},
            timeout=5,
        )
    except httpx.HTTPError:
        return False
    return r.status_code == 200
