"""Issue 39, items 1 and 2, and the engine side of 3: the kept engine belongs to its owner. Before, the engine
listened on a TCP port of 127.0.0.1 with no authentication: another local user read its data there, and after a
crash listened on the same port, which the restart took for the engine (every answer forged). Now clients reach it
only through a Unix socket in a folder only its owner may enter, made anew at each start; everything under the
home is private; a query that ends the engine is not sent again. "Another local user" is a child process that drops
to uid 65534 (nobody), as a second user would be; the tests run as root here and in CI."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from sparqlnav.graph.endpoint import Outcome
from sparqlnav.graph.opening import open_kg
from sparqlnav.settings import Settings
from test_serve import EX, MANAGER_OF_ALICE, tiny_path  # noqa: F401 (a fixture)

NOBODY = 65534
# stdlib only, and one that another user may run (the venv's interpreter may sit in a folder only root enters)
SYSTEM_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")


def settings_at(home: Path) -> Settings:
    return Settings.from_env({"SPARQLNAV_HOME": str(home)})


def as_nobody(code: str) -> str:
    """Run Python `code` as another local user (uid/gid 65534); what it printed."""
    def drop() -> None:
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    done = subprocess.run([SYSTEM_PYTHON, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=drop, check=False, cwd="/")  # fmt: skip
    return (done.stdout + done.stderr).strip()


def test_another_user_can_neither_query_the_engine_nor_read_the_store(
    tiny_path: Path, tmp_path: Path  # noqa: F811
) -> None:
    home = tmp_path / "home"
    old = os.umask(0o022)  # the red team's umask: before, store files were 0644
    try:
        with open_kg(str(tiny_path), settings_at(home)) as graph:
            assert graph.endpoint.query(MANAGER_OF_ALICE).table.rows[0]["m"].value == EX + "bob"  # type: ignore[union-attr]
            server = graph.endpoint.server  # type: ignore[attr-defined]
            sock = server.socket_path
            # the engine's port is inside its network namespace: nothing answers it on this machine's loopback
            with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port), timeout=1):
                pass
            tried = as_nobody(f"import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({sock!r})\n"
                              "    print('connected')\nexcept OSError as e:\n    print(type(e).__name__)")  # fmt: skip
            assert tried == "PermissionError", tried
            stores = [p for p in home.rglob("*") if p.is_file()]
            assert stores
            read = as_nobody(f"import pathlib\nn = 0\nfor p in {[str(p) for p in stores[:20]]!r}:\n    try:\n"
                             "        pathlib.Path(p).read_bytes(); n += 1\n    except OSError:\n        pass\nprint(n)")  # fmt: skip
            assert read == "0", read
    finally:
        os.umask(old)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700  # before: 0755 under umask 022
    servers = list(home.rglob(".servers"))
    assert servers and all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in servers)  # before: 0755
    assert not Path(sock).exists() or graph is not None  # the socket lives only as long as its engine


def test_a_listener_on_the_old_port_is_never_taken_for_the_engine(tiny_path: Path, tmp_path: Path) -> None:  # noqa: F811
    with open_kg(str(tiny_path), settings_at(tmp_path / "home")) as graph:
        server = graph.endpoint.server  # type: ignore[attr-defined]
        assert graph.endpoint.query(MANAGER_OF_ALICE).ok
        old_port, old_socket = server.port, server.socket_path
        os.kill(server.engine_pid(), signal.SIGKILL)  # the crash (hole 3 in the issue)
        time.sleep(0.3)
        caught: list[bytes] = []
        forger = socket.socket()
        forger.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        forger.bind(("127.0.0.1", old_port))  # the attacker takes the engine's old port
        forger.listen(8)
        forger.settimeout(5)

        def forge() -> None:
            try:
                conn, _ = forger.accept()
                caught.append(conn.recv(4096))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/sparql-results+json\r\n"
                             b"Content-Length: 58\r\n\r\n" b'{"head":{"vars":["m"]},"results":{"bindings":[]}}        ')
                conn.close()
            except OSError:
                pass

        thread = threading.Thread(target=forge, daemon=True)
        thread.start()
        answer = graph.endpoint.query(MANAGER_OF_ALICE)
        thread.join(timeout=6)
        forger.close()
    assert caught == []  # before: the restart took the attacker's listener for the engine and sent it the query
    assert answer.outcome is Outcome.OK and answer.table.rows[0]["m"].value == EX + "bob"  # type: ignore[union-attr]
    assert server.socket_path != old_socket  # a new private folder at each start


def test_a_query_that_ends_the_engine_is_not_sent_again(tiny_path: Path, tmp_path: Path) -> None:  # noqa: F811
    with open_kg(str(tiny_path), settings_at(tmp_path / "home")) as graph:
        server = graph.endpoint.server  # type: ignore[attr-defined]
        assert graph.endpoint.query(MANAGER_OF_ALICE).ok
        restarts = server.restarts
        slow = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l . ?m ?n2 ?o }"
        pid = server.engine_pid()
        killer = threading.Timer(0.5, lambda: os.kill(pid, signal.SIGKILL))  # it dies under this one query
        killer.start()
        ended = graph.endpoint.query(slow, timeout_s=20)
        killer.join()
        assert ended.outcome is Outcome.ENGINE_ERROR and "not run again" in ended.message, ended.message
        assert server.restarts - restarts == 1  # before: five attempts, each starting an engine
        assert graph.endpoint.query(MANAGER_OF_ALICE).ok  # the next query gets a fresh engine


def test_an_engine_with_a_host_name_allowed_leaves_nothing_in_tmp(tiny_path: Path, tmp_path: Path) -> None:  # noqa: F811
    before = set(Path(tempfile.gettempdir()).glob("sparqlnav-hosts-*"))
    allowing = Settings.from_env({"SPARQLNAV_HOME": str(tmp_path / "home"),
                                  "SPARQLNAV_ALLOWED_SERVICES": "http://sparqlnav-peer.invalid:8890/sparql"})
    with open_kg(str(tiny_path), allowing) as graph:
        assert graph.endpoint.query(MANAGER_OF_ALICE).ok
        during = set(Path(tempfile.gettempdir()).glob("sparqlnav-hosts-*"))
    assert during - before == set()  # before: one /tmp/sparqlnav-hosts-* file per engine start


def test_what_the_cli_writes_under_its_home_is_its_users_alone(tiny_path: Path, tmp_path: Path) -> None:  # noqa: F811
    home = tmp_path / "home"
    env = {**os.environ, "SPARQLNAV_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "sparqlnav", "sparql", "ASK { ?s ?p ?o }", "--kg", str(tiny_path)],
                          capture_output=True, text=True, timeout=120, env=env, check=False,
                          preexec_fn=lambda: os.umask(0o022))  # fmt: skip
    assert done.returncode == 0, done.stderr
    loose = [(p, oct(stat.S_IMODE(p.stat().st_mode))) for p in [home, *home.rglob("*")]
             if not p.is_symlink() and p.exists() and stat.S_IMODE(p.stat().st_mode) & 0o077]
    assert loose == []  # before: 0755 folders and 0644 files, a world-readable copy of the data
