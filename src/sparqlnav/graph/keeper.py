"""A local engine kept running between processes: its folder under the store, and the keeper process that ends it.

Why: starting `oxigraph serve-read-only` inside its network jail costs a CLI call most of its time (0.6 s of a
2.2 s `ask`), so an engine started by one call is left running for the next calls on the same store, and ends on
its own after an idle period. Everything about it lives in one folder inside the store it serves (so another
home, another store or a rebuilt store never finds it), one per engine configuration (allowed SERVICE endpoints,
memory ceiling):

- `lock`: an flock held while a process adopts or starts the engine, and by the keeper when it decides to end;
- `state.json`: the keeper's pid (and the start time that tells it from a reused pid), the port, the log's name;
- `engine-*.log`: the engine's stderr, where its owner reads a memory death and its peak memory;
- `users/`: one file per process using the engine, flocked for as long as it does (a process that dies, even by
  SIGKILL, lets go of it);
- `activity`: touched after every query; the keeper ends the engine when no process uses it and the last query
  is older than the idle period.

The keeper (`python -m sparqlnav.graph.keeper --folder F --idle S -- <jailed engine command>`, stdlib only) runs in
a session of its own, so it outlives the call that started it; the engine dies with it (parent-death signal), so
killing the keeper on a timeout stops the engine's work as killing the launcher did. It also ends the engine when
its state file is gone or names another process (the store was removed or rebuilt, or a client replaced it).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

__all__ = ["Registration", "ServerFolder", "ServerState", "alive", "keeper_command", "kill", "main", "process_start", "stop_kept"]

STATE = "state.json"
STARTUP_GRACE_S = 60.0  # a keeper whose starter never wrote its state (the starter died) ends after this


@dataclass(frozen=True)
class ServerState:
    """A kept engine as its starter recorded it."""

    pid: int  # the keeper's
    started: str  # the keeper's start time (/proc/PID/stat), so a reused pid is never taken for it
    port: int
    log: str  # the engine's log, a file name in the folder
    config: str  # what the engine was started with (data folder, allowed endpoints, memory ceiling), hashed
    socket: str = ""  # the private Unix socket its clients use (a state from before it has none: not used)


def process_start(pid: int) -> str | None:
    """The start time of a live process (clock ticks since boot, as text), or None when there is none (or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def alive(pid: int, started: str) -> bool:
    """Whether the process `pid` that started at `started` still runs."""
    return process_start(pid) == started


def kill(pid: int, started: str, *, wait_s: float = 5.0) -> None:
    """SIGKILL the process `pid` if it is still the one that started at `started`; wait until it is gone."""
    if not alive(pid, started):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while alive(pid, started) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # our own child: reap it, or it stays a zombie
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.005)


def _open_nofollow(path: Path, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


@dataclass(frozen=True)
class Registration:
    """A process's registration as a user of a kept engine: a file it holds an flock on."""

    path: Path
    file: IO[bytes]


class ServerFolder:
    """The folder of one kept engine: its lock, state, log, users and last activity."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def make(self) -> None:
        """Create the folder (private to this user); OSError when it cannot be made or is a symlink."""
        (self.path / "users").mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in (self.path.parent, self.path, self.path / "users"):
            if folder.is_symlink():
                raise OSError(f"{folder} is a symlink")
            os.chmod(folder, 0o700)  # `mode` above applies to the last folder only, and under the umask

    @contextlib.contextmanager
    def locked(self, *, wait: bool = True) -> Iterator[bool]:
        """Hold the folder's lock for the block; yields False (holding nothing) when `wait` is off and it is taken."""
        fd = _open_nofollow(self.path / "lock", os.O_RDWR | os.O_CREAT)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def read_state(self) -> ServerState | None:
        """The recorded engine, or None when there is none or it does not read."""
        try:
            fd = _open_nofollow(self.path / STATE, os.O_RDONLY)
            with os.fdopen(fd) as fh:
                if os.fstat(fh.fileno()).st_uid != os.getuid():
                    return None  # not written by this user: never trusted
                return ServerState(**json.load(fh))
        except (OSError, ValueError, TypeError):
            return None

    def write_state(self, state: ServerState) -> None:
        """Record the engine (atomically: readers see the old state or the new one)."""
        tmp = self.path / f".{STATE}.{os.getpid()}"
        fd = _open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w") as fh:
            json.dump(asdict(state), fh)
        os.replace(tmp, self.path / STATE)

    def clear_state(self, pid: int) -> None:
        """Forget the recorded engine if it is keeper `pid`'s (call under the lock)."""
        state = self.read_state()
        if state is not None and state.pid == pid:
            with contextlib.suppress(OSError):
                (self.path / STATE).unlink()

    def touch(self) -> None:
        """Note that the engine was just used."""
        try:
            os.utime(self.path / "activity")
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                os.close(_open_nofollow(self.path / "activity", os.O_WRONLY | os.O_CREAT))

    def last_activity(self) -> float:
        """When the engine was last used (0 when never)."""
        try:
            return (self.path / "activity").stat().st_mtime
        except OSError:
            return 0.0

    def attach(self) -> Registration:
        """Register this process as a user (call under the lock); the registration holds until `detach`."""
        path = self.path / "users" / f"{os.getpid()}-{time.monotonic_ns()}"
        fd = _open_nofollow(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return Registration(path, os.fdopen(fd, "r+b"))

    def detach(self, registration: Registration) -> None:
        """End a registration made by `attach`."""
        self.touch()
        with contextlib.suppress(OSError):
            registration.path.unlink()
        registration.file.close()

    def users(self, *, besides: Registration | None = None, tidy: bool = False) -> int:
        """How many processes use the engine (other than the one holding `besides`); `tidy` removes the files of
        processes that have gone (call under the lock)."""
        mine = os.fstat(besides.file.fileno()).st_ino if besides is not None else None
        count = 0
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.path / "users"):
                try:
                    fd = _open_nofollow(Path(entry.path), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    if os.fstat(fd).st_ino == mine:
                        continue
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        count += 1
                        continue
                    if tidy:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)
                finally:
                    os.close(fd)
        return count


def stop_kept(root: Path) -> int:
    """Stop every kept engine whose folder lies under `root` (a home, a stores folder); return how many ran."""
    stopped = 0
    for path in root.rglob(f".servers/*/{STATE}"):
        folder = ServerFolder(path.parent)
        with contextlib.suppress(OSError), folder.locked():
            state = folder.read_state()
            if state is not None and alive(state.pid, state.started):
                kill(state.pid, state.started)
                stopped += 1
            if state is not None:
                folder.clear_state(state.pid)
    return stopped


# -- the keeper process ----------------------------------------------------------------------------------------


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def keeper_command(folder: Path, idle_s: float, log: str, engine: Sequence[str]) -> list[str]:
    """The command that keeps `engine` running for `folder` (its stderr going to the folder's file `log`), ending
    it after `idle_s` seconds unused."""
    return [sys.executable, "-m", "sparqlnav.graph.keeper", "--folder", str(folder), "--idle", repr(idle_s),
            "--log", log, "--", *engine]


def _should_end(folder: ServerFolder, idle_s: float, since: float, seen: bool) -> str | None:
    """Why the keeper ends now (its state is gone or another's; unused for the idle period), or None."""
    state = folder.read_state()
    if state is None or state.pid != os.getpid():
        if seen or time.time() - since > STARTUP_GRACE_S:
            return "replaced"
        return None
    if time.time() - max(folder.last_activity(), since) < idle_s:
        return None
    with folder.locked(wait=False) as held:
        # Under the lock no process can be adopting it meanwhile: it is idle only with no user registered.
        if held and folder.users(tidy=True) == 0 and time.time() - max(folder.last_activity(), since) >= idle_s:
            folder.clear_state(os.getpid())
            return "idle"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the engine command until it ends, it is replaced, or it has been idle for the idle period."""
    args = sys.argv[1:] if argv is None else list(argv)
    split = args.index("--") if "--" in args else len(args)
    parser = argparse.ArgumentParser(prog="python -m sparqlnav.graph.keeper")
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--idle", type=float, required=True)
    parser.add_argument("--log", required=True)
    opts = parser.parse_args(args[:split])
    engine = args[split + 1 :]
    if not engine:
        parser.error("no engine command after --")
    folder = ServerFolder(opts.folder)
    since = time.time()
    proc = subprocess.Popen(engine, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=_die_with_parent)

    def end(*_: object) -> None:
        proc.kill()
        sys.exit(1)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, end)
    tick = min(1.0, max(0.05, opts.idle / 4))
    seen = False
    while True:
        try:
            status = proc.wait(timeout=tick)
        except subprocess.TimeoutExpired:
            pass
        else:  # the engine ended (a crash, its memory ceiling): the next query starts another
            with contextlib.suppress(OSError), folder.locked():  # OSError: the store was removed meanwhile
                folder.clear_state(os.getpid())
            return status % 256
        state = folder.read_state()
        seen = seen or (state is not None and state.pid == os.getpid())
        why = _should_end(folder, opts.idle, since, seen)
        if why is not None:
            proc.kill()
            proc.wait()
            print(f"sparqlnav: engine ended ({why})", file=sys.stderr, flush=True)
            with contextlib.suppress(OSError):
                (folder.path / Path(opts.log).name).unlink()  # nobody reads the log of an engine ended this way
            return 0


if __name__ == "__main__":
    sys.exit(main())
