"""bench/databases/bigpg.py at a tiny scale on a real private PostgreSQL: the tables get the rows `sizes` promises,
every foreign key holds, and two builds give the same data (the generator is deterministic)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from postgres import Postgres

BIGPG = Path(__file__).resolve().parent.parent / "bench" / "databases" / "bigpg.py"
SCALE = 0.00005  # members 50, trips 900, repairs 51; the small tables keep their size


def bigpg() -> ModuleType:
    """The bench module, loaded from its file (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location("bigpg", BIGPG)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bigpg"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_bigpg_builds_the_promised_rows_with_keys_that_hold() -> None:
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.importorskip("psycopg", reason="no psycopg (pip install -e '.[dev]')")
    import psycopg

    gen = bigpg()
    expected = gen.sizes(SCALE)
    assert expected == {"regions": 12, "stations": 2000, "bikes": 30000, "members": 50, "trips": 900, "repairs": 51}
    assert sum(gen.sizes(1.0).values()) >= 20_000_000
    with Postgres() as server:
        digests = []
        for db in ("one", "two"):
            with psycopg.connect(server.url(), autocommit=True) as con:
                con.execute(f"CREATE DATABASE {db}")  # type: ignore[arg-type]  # a fixed name
            with psycopg.connect(server.url(db), autocommit=True) as con:
                for statement in gen.statements(SCALE):
                    con.execute(statement)
                counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[arg-type,index]
                          for t in expected}
                assert counts == expected
                keys = con.execute("SELECT count(*) FROM pg_constraint WHERE contype = 'f'").fetchone()
                assert keys == (9,)
                plans = con.execute("SELECT count(DISTINCT plan) FROM members").fetchone()
                assert plans is not None and plans[0] >= 2
                digest = con.execute("SELECT md5(string_agg(t::text, ',' ORDER BY trip_id)) FROM trips t").fetchone()
                digests.append(digest)
        assert digests[0] == digests[1]
