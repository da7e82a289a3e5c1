"""A local engine kept running between CLI calls (graph/keeper): found and reused by the next call on the same
store, replaced when it died, never used for another store, another configuration or another home, ended after
its idle period, and started once when two calls arrive together. The CLI runs as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sparqlnav.graph.endpoint import Limits, Outcome
from sparqlnav.graph.keeper import ServerFolder, alive, process_start, stop_kept
from sparqlnav.graph.store import LocalGraph, ensure_store, rdf_files

TTL = """@prefix ex: <http://example.org/> .
ex:ada ex:name "Ada" ; ex:knows ex:charles .
ex:charles ex:name "Charles" .
"""
COUNT = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SPARQLNAV_"))}
    return {**env, "SPARQLNAV_HOME": str(home), **extra}


def _sparql(kg: Path, home: Path, query: str = COUNT, **extra: str) -> str:
    """`sparqlnav sparql QUERY --kg KG --json` as a process of its own; the count it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "sparqlnav", "sparql", query, "--kg", str(kg), "--json"],
        env=_env(home, **extra), capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["results"]["bindings"][0]["n"]["value"])


def _states(home: Path) -> list[dict[str, object]]:
    """The kept engines recorded under a home."""
    return [json.loads(p.read_text()) for p in sorted(home.glob("stores/*/.servers/*/state.json"))]


def _one_state(home: Path) -> dict[str, object]:
    states = _states(home)
    assert len(states) == 1, states
    return states[0]


def _gone(pid: int, started: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid, started):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def kg(tmp_path: Path) -> Path:
    path = tmp_path / "people.ttl"
    path.write_text(TTL)
    return path


def test_a_second_call_reuses_the_running_engine(kg: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert _sparql(kg, home) == "3"
    first = _one_state(home)
    assert alive(int(first["pid"]), str(first["started"]))  # outlived the call that started it
    assert _sparql(kg, home) == "3"
    assert _one_state(home) == first  # same keeper, same port: the second call started nothing
    assert stop_kept(home) == 1


@pytest.mark.parametrize("victim", ["keeper", "engine"])
def test_a_dead_engine_is_detected_and_replaced(kg: Path, tmp_path: Path, victim: str) -> None:
    home = tmp_path / "home"
    assert _sparql(kg, home) == "3"
    state = _one_state(home)
    pid, started = int(state["pid"]), str(state["started"])
    if victim == "keeper":
        os.kill(pid, signal.SIGKILL)
    else:  # the engine crashes: its launcher and keeper end with it
        engine = _descendant(pid, "oxigraph")
        assert engine is not None
        os.kill(engine, signal.SIGKILL)
    assert _gone(pid, started, 10)
    assert _sparql(kg, home) == "3"
    replaced = _one_state(home)
    assert replaced["pid"] != pid and alive(int(replaced["pid"]), str(replaced["started"]))
    stop_kept(home)


def _descendant(pid: int, name: str) -> int | None:
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            if Path(f"/proc/{current}/comm").read_text().strip() == name:
                return current
            todo += [int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
        except OSError:
            continue
    return None


def _engines(home: Path, kg: Path) -> list[dict[str, object]]:
    """The kept engines recorded under a home for the store of `kg` (by its store's meta.json)."""
    found = []
    for path in sorted(home.glob("stores/*/.servers/*/state.json")):
        if json.loads((path.parents[2] / "meta.json").read_text())["files"] == [str(kg.resolve())]:
            found.append(json.loads(path.read_text()))
    return found


def test_an_engine_is_never_used_for_another_store_configuration_or_home(kg: Path, tmp_path: Path) -> None:
    home, other_home = tmp_path / "home", tmp_path / "other-home"
    other = tmp_path / "other.ttl"
    other.write_text(TTL + 'ex:grace ex:name "Grace" .\n')
    assert _sparql(kg, home) == "3"
    assert _sparql(other, home) == "4"
    assert _sparql(kg, other_home) == "3"
    assert _sparql(kg, home, SPARQLNAV_ENGINE_MEMORY="2G") == "3"  # another memory ceiling: another engine
    mine = _engines(home, kg)
    assert len(mine) == 2 and len(_engines(home, other)) == 1 and len(_engines(other_home, kg)) == 1
    assert len({s["pid"] for s in [*mine, *_engines(home, other), *_engines(other_home, kg)]}) == 4
    # The file changes: a new store and a new engine; the old store is removed, and its engines end with it.
    kg.write_text(TTL + 'ex:alan ex:name "Alan" .\n')
    assert _sparql(kg, home) == "4"
    (now,) = _engines(home, kg)
    assert now["pid"] not in {s["pid"] for s in mine}
    for state in mine:
        assert _gone(int(str(state["pid"])), str(state["started"]), 10)
    assert len(_engines(home, other)) == 1  # the other store's engine is not touched
    stop_kept(tmp_path)


def test_an_unused_engine_ends_after_its_idle_period_and_a_user_keeps_it(kg: Path, tmp_path: Path) -> None:
    """A process using the engine keeps it, however long it has not queried (a CLI call meanwhile uses the same
    one); once the last user lets go, it ends after its idle period and clears its record."""
    home = tmp_path / "home"
    graph = LocalGraph(ensure_store(rdf_files(kg), home / "stores"), name="people", limits=Limits(engine_idle_s=0.5))
    try:
        assert graph.query(COUNT).outcome is Outcome.OK
        pid = graph.server.pid
        assert pid is not None
        started = str(process_start(pid))
        time.sleep(2)  # four idle periods without a query
        assert alive(pid, started)
        assert _sparql(kg, home) == "3"
        assert _one_state(home)["pid"] == pid  # the CLI call used it too (its idle setting is the starter's)
    finally:
        graph.close()
    assert _gone(pid, started, 10)
    assert _states(home) == []  # it cleared its record as it ended


def test_two_calls_at_once_start_one_engine(kg: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ensure_store(rdf_files(kg), home / "stores")  # built first: the race here is the engine's start
    counts: list[str] = []
    calls = [threading.Thread(target=lambda: counts.append(_sparql(kg, home))) for _ in range(3)]
    for call in calls:
        call.start()
    for call in calls:
        call.join()
    assert counts == ["3", "3", "3"]
    state = _one_state(home)
    folder = next(home.glob("stores/*/.servers/*"))
    assert [p.name for p in folder.glob("engine-*.log")] == [state["log"]]  # one engine was ever started
    stop_kept(home)


def test_a_timeout_in_one_process_kills_the_kept_engine_and_the_next_call_gets_another(tmp_path: Path) -> None:
    """Time limits stay real for a kept engine: the process whose query ran out kills it (the work stops, for every
    process using it), and the next call starts another."""
    home, big = tmp_path / "home", tmp_path / "big.ttl"
    big.write_text("@prefix ex: <http://example.org/> .\n" + "".join(f"ex:s{i} ex:p {i} .\n" for i in range(300)))
    assert _sparql(big, home) == "300"
    (state,) = _states(home)
    graph = LocalGraph(ensure_store(rdf_files(big), home / "stores"), name="big")  # the CLI's configuration
    try:
        graph.server.ensure_running()
        assert graph.server.pid == state["pid"]  # this process found the CLI's engine
        runaway = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"  # 300^4 rows
        started = time.monotonic()
        assert graph.query(runaway, timeout_s=0.5).outcome is Outcome.TIMEOUT
        assert time.monotonic() - started < 5
        assert _gone(int(str(state["pid"])), str(state["started"]), 5)  # killed: the work really stopped
    finally:
        graph.close()
    assert _sparql(big, home) == "300"
    (replaced,) = _states(home)
    assert replaced["pid"] != state["pid"]
    stop_kept(home)


def test_a_server_folder_trusts_only_its_own_users_state(tmp_path: Path) -> None:
    folder = ServerFolder(tmp_path / "f")
    folder.make()
    assert folder.read_state() is None
    (folder.path / "state.json").symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text('{"pid": 1, "started": "0", "port": 1, "log": "x", "config": "c"}')
    assert folder.read_state() is None  # never read through a symlink


def test_the_idle_period_is_a_setting(tmp_path: Path) -> None:
    from sparqlnav.settings import ConfigError, Settings

    assert Settings.from_env({"SPARQLNAV_HOME": str(tmp_path)}).limits.engine_idle_s == 300
    assert Settings.from_env({"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_ENGINE_IDLE": "7.5"}).limits.engine_idle_s == 7.5
    with pytest.raises(ConfigError, match="SPARQLNAV_ENGINE_IDLE"):
        Settings.from_env({"SPARQLNAV_HOME": str(tmp_path), "SPARQLNAV_ENGINE_IDLE": "-1"})
    graph = LocalGraph(ensure_store(rdf_files(_write(tmp_path)), tmp_path / "s"), name="t", limits=Limits(engine_idle_s=0))
    try:
        assert graph.query(COUNT).outcome is Outcome.OK
        assert not graph.server.kept and not list((tmp_path / "s").glob("*/.servers"))  # 0: ends with its process
    finally:
        graph.close()


def _write(folder: Path) -> Path:
    path = folder / "t.ttl"
    path.write_text(TTL)
    return path
