"""A private Redis (Debian's `redis-server`) for tests: its own folder, a free port on 127.0.0.1, nothing saved to
disk, stopped and removed afterwards. When redis-server is missing, tests skip, except under CI=true, where they
fail (./scripts/test installs it)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def require_bin() -> str:
    """The redis-server binary, or a skip (a failure under CI=true, where ./scripts/test must have installed it)."""
    import pytest

    found = shutil.which("redis-server")
    if found is not None:
        return found
    why = "no redis-server (./scripts/test installs Debian's redis-server with apt-get)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(why)
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """One private redis-server; `url(db)` reaches one of its databases."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or require_bin()
        self.folder = Path(tempfile.mkdtemp(prefix="sparqlnav-redis-"))
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 20.0) -> PrivateRedis:
        """Start the server; returns once it answers PING."""
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.folder / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server ended at start: {log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(64).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer in time")

    def url(self, db: int = 0) -> str:
        """A redis:// URL for database `db`."""
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        """Stop this server (its own process only) and remove its folder."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PrivateRedis:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
