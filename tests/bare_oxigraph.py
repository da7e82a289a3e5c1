"""A plain `oxigraph serve-read-only` on a TCP port of 127.0.0.1, for tests that need a remote SPARQL endpoint over
HTTP (sparqlnav's own engines are reachable only through a private Unix socket, so they cannot play one)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from sparqlnav.graph.store import health, oxigraph_binary


class BareOxigraph:
    """One Oxigraph server process over a store folder: `ensure_running()`, `url`, `stop()`."""

    def __init__(self, data_dir: Path, startup_s: float = 30.0) -> None:
        self.data_dir = data_dir
        self.startup_s = startup_s
        self.proc: subprocess.Popen[bytes] | None = None
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])

    @property
    def url(self) -> str:
        """The query URL."""
        return f"http://127.0.0.1:{self.port}/query"

    def ensure_running(self) -> str:
        """Start the server once; its query URL."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [oxigraph_binary(), "serve-read-only", "--location", str(self.data_dir), "--bind",
                 f"127.0.0.1:{self.port}", "--union-default-graph"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            deadline = time.monotonic() + self.startup_s
            while not health(self.url):
                assert self.proc.poll() is None and time.monotonic() < deadline, "oxigraph did not start"
                time.sleep(0.05)
        return self.url

    def stop(self) -> None:
        """Stop the server."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None
