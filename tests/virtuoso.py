"""A private Virtuoso (Debian's `virtuoso-opensource`: `virtuoso-t`, `isql-vt`) for tests and benchmarks: its own
database folder and virtuoso.ini, free ports, data loaded into a named graph with its text index enabled, and
stopped afterwards. When Virtuoso is missing, tests skip, except under CI=true, where they fail (./scripts/test
installs it)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx

INI = """\
[Database]
DatabaseFile = {db}/virtuoso.db
ErrorLogFile = {db}/virtuoso.log
LockFile = {db}/virtuoso.lck
TransactionFile = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {db}/virtuoso-temp.db
TransactionFile = {db}/virtuoso-temp.trx
Striping = 0

[Parameters]
ServerPort = {sql_port}
DisableUnixSocket = 1
CheckpointInterval = 0
DirsAllowed = ., {db}, {data_dirs}
NumberOfBuffers = {buffers}
MaxDirtyBuffers = {dirty}
MaxQueryMem = 1G
ThreadsPerQuery = 2
AsyncQueueMaxThreads = 4
RdfFreeTextRulesSize = 100
FreeTextBatchSize = 100000

[HTTPServer]
ServerPort = {http_port}
ServerRoot = {db}
ServerThreads = 8
MaxClientConnections = 8
Charset = UTF-8

[SPARQL]
ResultSetMaxRows = {max_rows}
MaxQueryCostEstimationTime = 400
MaxQueryExecutionTime = 60
DefaultGraph = {graph}
"""


def find_binaries() -> tuple[str, str] | None:
    """(virtuoso-t, isql-vt) when installed."""
    server, isql = shutil.which("virtuoso-t"), shutil.which("isql-vt")
    return (server, isql) if server and isql else None


def require_binaries() -> tuple[str, str]:
    """The binaries, or a skip (a failure under CI=true, where ./scripts/test must have installed them)."""
    import pytest

    found = find_binaries()
    if found:
        return found
    why = "no virtuoso-t/isql-vt on PATH (./scripts/test installs Debian's virtuoso-opensource with apt-get)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(why)
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Virtuoso:
    """One private Virtuoso process; `load` puts RDF files into `graph` and indexes their literals for `bif:contains`."""

    def __init__(
        self,
        folder: Path,
        *,
        graph: str = "urn:sparqlnav:test",
        data_dirs: list[Path] | None = None,
        max_rows: int = 10_000,
        buffers: int = 20_000,
        binaries: tuple[str, str] | None = None,
    ) -> None:
        self.server_bin, self.isql_bin = binaries or require_binaries()
        self.folder = folder
        self.graph = graph
        self.sql_port, self.http_port = _free_port(), _free_port()
        folder.mkdir(parents=True, exist_ok=True)
        dirs = ", ".join(str(d) for d in (data_dirs or []))
        (folder / "virtuoso.ini").write_text(
            INI.format(
                db=folder,
                sql_port=self.sql_port,
                http_port=self.http_port,
                data_dirs=dirs or str(folder),
                buffers=buffers,
                dirty=buffers * 3 // 4,
                max_rows=max_rows,
                graph=graph,
            ),
            encoding="utf-8",
        )
        self.process: subprocess.Popen[bytes] | None = None

    def version(self) -> str:
        """The server's version as it prints it (e.g. `7.2.5.3240-pthreads`), so a test can say what it ran on."""
        done = subprocess.run([self.server_bin, "-?"], capture_output=True, timeout=30, check=False)
        found = re.search(r"Version (\S+)", (done.stdout + done.stderr).decode(errors="replace"))
        return found.group(1) if found else "unknown"

    @property
    def url(self) -> str:
        """The SPARQL endpoint."""
        return f"http://127.0.0.1:{self.http_port}/sparql"

    def start(self, timeout_s: float = 60.0) -> Virtuoso:
        """Start in the foreground (so the process is ours to stop) and wait until SPARQL answers."""
        log = (self.folder / "stdout.log").open("wb")
        self.process = subprocess.Popen(
            [self.server_bin, "+foreground", "+configfile", str(self.folder / "virtuoso.ini")],
            cwd=self.folder,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise RuntimeError(f"virtuoso-t exited: {(self.folder / 'virtuoso.log').read_text(errors='replace')[-2000:]}")
            try:
                r = httpx.get(self.url, params={"query": "ASK {}"}, headers={"Accept": "application/sparql-results+json"}, timeout=2)
                if r.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError("virtuoso-t did not answer SPARQL within {timeout_s:g} s")

    def _isql_command(self) -> list[str]:
        return [self.isql_bin, f"127.0.0.1:{self.sql_port}", "dba", "dba", "VERBOSE=OFF", "BANNER=OFF", "PROMPT=OFF"]

    def _isql_process(self, script: str) -> subprocess.Popen[bytes]:
        """isql-vt running `script` in the background (stdout and stderr together, read when it ends)."""
        process = subprocess.Popen(
            self._isql_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert process.stdin is not None
        process.stdin.write(script.encode())
        process.stdin.close()
        return process

    def isql(self, script: str, timeout_s: float = 3600.0) -> str:
        """Run SQL statements through isql-vt; raises with Virtuoso's message on an error."""
        done = subprocess.run(
            self._isql_command(),
            input=script.encode(),
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
        out = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        if done.returncode != 0 or "*** Error" in out:
            raise RuntimeError(f"isql-vt failed: {out[-2000:]}")
        return out

    def load(self, files: list[Path], *, graph: str | None = None, loaders: int = 1) -> None:
        """Bulk-load RDF files (their folders must be in DirsAllowed) into a named graph and build the text index;
        `loaders` > 1 runs that many `rdf_loader_run()` sessions at once (Virtuoso's parallel bulk load: each takes
        the next file from the load list, so it only helps with several files)."""
        target = graph or self.graph
        lines = ["DB.DBA.RDF_OBJ_FT_RULE_ADD(null, null, 'sparqlnav');"]
        lines += [f"ld_dir('{f.parent}', '{f.name}', '{target}');" for f in files]
        self.isql("\n".join(lines) + "\n")
        extra = [self._isql_process("rdf_loader_run();\n") for _ in range(max(0, loaders - 1))]
        self.isql("rdf_loader_run();\n")
        for process in extra:
            assert process.stdout is not None
            out = process.stdout.read()  # stdin was already written and closed, so no communicate()
            process.wait()
            if process.returncode != 0 or b"*** Error" in out:
                raise RuntimeError(f"isql-vt failed: {out.decode(errors='replace')[-2000:]}")
        self.isql("DB.DBA.VT_INC_INDEX_DB_DBA_RDF_OBJ();\ncheckpoint;\n")
        errors = self.isql("SELECT ll_file, ll_error FROM DB.DBA.LOAD_LIST WHERE ll_error IS NOT NULL;\n")
        if errors.strip():
            raise RuntimeError(f"loading failed: {errors}")

    def stop(self) -> None:
        """Stop the process (it is ours: started in the foreground)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> Virtuoso:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
