"""A private PostgreSQL (Debian's `postgresql`: initdb, pg_ctl under /usr/lib/postgresql/*/bin) for tests: its own
data folder, a free port on 127.0.0.1, trust authentication for one superuser, stopped and removed afterwards. As
root it runs as the `postgres` user (initdb refuses root). When PostgreSQL is missing, tests skip, except under
CI=true, where they fail (./scripts/test installs it)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

SUPERUSER = "sparqlnav"


def find_bin() -> Path | None:
    """The folder of initdb/pg_ctl/postgres, the newest installed version first."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: _version(p.parent.parent.name))
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def require_bin() -> Path:
    """The binaries' folder, or a skip (a failure under CI=true, where ./scripts/test must have installed them)."""
    import pytest

    found = find_bin()
    if found is not None and (os.geteuid() != 0 or shutil.which("runuser")):
        return found
    why = "no PostgreSQL server binaries (initdb, pg_ctl) (./scripts/test installs Debian's postgresql with apt-get)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(why)
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Postgres:
    """One private PostgreSQL server; `url(db)` reaches a database on it as the superuser."""

    def __init__(self, bin_dir: Path | None = None) -> None:
        self.bin = bin_dir or require_bin()
        # Under /tmp, not pytest's tmp_path: as root the server runs as `postgres`, which cannot enter root's folders.
        self.folder = Path(tempfile.mkdtemp(prefix="sparqlnav-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.as_other = os.geteuid() == 0
        if self.as_other:
            shutil.chown(self.folder, "postgres", "postgres")
        self.started = False

    def _run(self, *args: str, timeout_s: float = 120) -> str:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.as_other:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=self.folder)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {(done.stdout + done.stderr)[-2000:]}")
        return done.stdout

    def start(self) -> Postgres:
        """initdb and start the server; returns once it accepts connections."""
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "server.log"), "-w", "start")
        self.started = True
        return self

    def url(self, database: str = "postgres") -> str:
        """A connection URL for `database` as the superuser."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Stop the server (by its data folder: only this one) and remove its folder."""
        if self.started:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            self.started = False
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Postgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
