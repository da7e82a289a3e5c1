"""`bikeshare`: a city bike-sharing operator's PostgreSQL database, written for sparqlnav's scale benchmark
(issue #35). At scale 1.0 it holds 20.05 million rows: regions (12), stations (2,000), bikes (30,000), members
(1,000,000), trips (18,000,000: who rode which bike from where to where, when, how long, for what fare) and repairs
(1,020,000), with primary and foreign keys, names, categories, dates, timestamps and money.

Every row is made by the server (INSERT … SELECT FROM generate_series) from arithmetic on the row number, so the
same database comes out on every run, without sending rows over the wire. A smaller `--scale` keeps the shape and
the small tables and shrinks members, trips and repairs (the slices the copy's cost is measured on).

The server is a private PostgreSQL of its own (Debian's initdb/pg_ctl under /usr/lib/postgresql/*/bin; as root it
runs as the `postgres` user), its data folder under the folder given on the command line:

    .venv/bin/python bench/databases/bigpg.py build runs/bigpg              # 20 M rows into database `bikeshare`
    .venv/bin/python bench/databases/bigpg.py build runs/bigpg --db s100k --scale 0.005
    .venv/bin/python bench/databases/bigpg.py start runs/bigpg              # prints the postgresql:// URL
    .venv/bin/python bench/databases/bigpg.py stop runs/bigpg
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "bench"
FULL = {"regions": 12, "stations": 2_000, "bikes": 30_000, "members": 1_000_000, "trips": 18_000_000,
        "repairs": 1_020_000}
SCALED = ("members", "trips", "repairs")  # the tables a smaller scale shrinks; the others keep their size

FIRST = ("Ada", "Ben", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kenji", "Lea",
         "Malik", "Nora", "Omar", "Paula", "Quentin", "Rosa", "Sami", "Tessa", "Umar", "Vera", "Wen", "Ximena",
         "Yusuf", "Zoe", "Arjun", "Bianca", "Carlos", "Dalia", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Jana",
         "Karim", "Lucia", "Milan", "Nadia")
LAST = ("Abbott", "Brandt", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat", "Ivanova", "Jensen",
        "Kowalski", "Laurent", "Moreau", "Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Silva", "Tanaka",
        "Ueda", "Varga", "Weber", "Xu", "Yilmaz", "Zimmer", "Andersen", "Becker", "Castillo", "Dvorak", "Engel",
        "Ferreira", "Gallo", "Hoffmann", "Iqbal", "Jovanovic", "Keller", "Lindqvist", "Meyer", "Nilsen")
REGIONS = ("Old Town", "Harbour", "University", "Riverside", "North Hills", "Market", "Airport", "Docklands",
           "Castle Hill", "West End", "Parkside", "Station Quarter")
STREETS = ("Linden", "Mill", "Church", "Bridge", "Garden", "Market", "Station", "River", "Park", "Castle",
           "School", "Harbour", "Forest", "King", "Queen", "Baker", "Canal", "Orchard", "Meadow", "Tower")
KINDS = ("Street", "Square", "Avenue", "Corner", "Gate")
MODELS = ("Urban 3", "Urban 7", "E-Glide", "E-Glide Pro", "Cargo")
PLANS = ("day", "monthly", "annual", "student", "corporate")
REPAIRS = ("flat tyre", "brake pads", "chain", "battery", "light", "saddle", "gears", "frame check")


def _array(values: tuple[str, ...]) -> str:
    return "ARRAY[" + ",".join("'" + v.replace("'", "''") + "'" for v in values) + "]"


def pick(values: tuple[str, ...], expression: str) -> str:
    """SQL choosing one of `values` by a non-negative integer expression."""
    return f"({_array(values)})[1 + (({expression}) % {len(values)})]"


def sizes(scale: float) -> dict[str, int]:
    """Rows per table at `scale` (the small tables keep their size)."""
    return {name: max(1, round(rows * scale)) if name in SCALED else rows for name, rows in FULL.items()}


def statements(scale: float) -> list[str]:
    """The DDL and the server-side INSERT … SELECTs of the database at `scale`, in order."""
    n = sizes(scale)
    # Hashing the row number (Knuth's multiplicative constant) spreads members, bikes and stations over the trips.
    h = "((g::bigint * 2654435761) % 4294967296)"
    return [
        "CREATE TABLE regions (region_id integer PRIMARY KEY, name text NOT NULL, zone char(1) NOT NULL)",
        "CREATE TABLE stations (station_id integer PRIMARY KEY, name text NOT NULL, "
        "region_id integer NOT NULL, capacity integer NOT NULL, opened date NOT NULL, "
        "latitude numeric(8,5), longitude numeric(8,5))",
        "CREATE TABLE bikes (bike_id integer PRIMARY KEY, serial text NOT NULL, model text NOT NULL, "
        "electric boolean NOT NULL, home_station_id integer, bought date NOT NULL, retired date)",
        "CREATE TABLE members (member_id integer PRIMARY KEY, first_name text NOT NULL, last_name text NOT NULL, "
        "email text NOT NULL, plan text NOT NULL, joined date NOT NULL, birth_year integer, "
        "home_region_id integer)",
        "CREATE TABLE trips (trip_id bigint PRIMARY KEY, member_id integer NOT NULL, bike_id integer NOT NULL, "
        "start_station_id integer NOT NULL, end_station_id integer NOT NULL, started_at timestamp NOT NULL, "
        "duration_min integer NOT NULL, distance_km numeric(6,2) NOT NULL, fare numeric(7,2) NOT NULL)",
        "CREATE TABLE repairs (repair_id integer PRIMARY KEY, bike_id integer NOT NULL, reported date NOT NULL, "
        "kind text NOT NULL, cost numeric(8,2) NOT NULL, station_id integer)",
        f"INSERT INTO regions SELECT g, ({_array(REGIONS)})[g], chr((65 + (g - 1) / 4)::integer) "
        f"FROM generate_series(1::bigint, {n['regions']}) g",
        f"INSERT INTO stations SELECT g, {pick(STREETS, 'g * 7')} || ' ' || {pick(KINDS, 'g / 20')} || ' ' || g, "
        f"1 + (g % {n['regions']}), 10 + (g % 5) * 6, date '2015-03-01' + (g * 37 % 3000)::integer, "
        f"51.4 + (g % 97) / 400.0, -0.25 + (g % 89) / 350.0 FROM generate_series(1::bigint, {n['stations']}) g",
        f"INSERT INTO bikes SELECT g, 'BK-' || lpad(g::text, 6, '0'), {pick(MODELS, h)}, "
        f"{pick(MODELS, h)} LIKE 'E-%', 1 + ({h} % {n['stations']}), date '2016-01-01' + (g * 13 % 3200)::integer, "
        f"CASE WHEN g % 17 = 0 THEN date '2024-06-01' + (g % 500)::integer END FROM generate_series(1::bigint, {n['bikes']}) g",
        f"INSERT INTO members SELECT g, {pick(FIRST, h)}, {pick(LAST, f'{h} / 64')}, "
        f"lower({pick(FIRST, h)}) || '.' || g || '@mail.example', {pick(PLANS, f'{h} / 4096')}, "
        f"date '2016-01-01' + ({h} % 3600)::integer, "
        f"CASE WHEN g % 11 = 0 THEN NULL ELSE 1950 + ({h} % 55)::integer END, "
        f"1 + ({h} % {n['regions']}) FROM generate_series(1::bigint, {n['members']}) g",
        f"INSERT INTO trips SELECT g, 1 + ({h} % {n['members']}), 1 + ((g * 40503) % {n['bikes']}), "
        f"1 + ((g * 7919) % {n['stations']}), 1 + ((g * 104729 + g / 3) % {n['stations']}), "
        f"timestamp '2019-01-01' + (g::bigint * 171 % 189345600) * interval '1 second', "
        f"3 + ({h} / 8 % 55)::integer, (({h} / 16 % 1500) + 30) / 100.0, "
        f"round((1 + ({h} / 8 % 55) * 0.15)::numeric, 2) FROM generate_series(1::bigint, {n['trips']}) g",
        f"INSERT INTO repairs SELECT g, 1 + ((g * 613) % {n['bikes']}), date '2017-01-01' + ({h} % 2900)::integer, "
        f"{pick(REPAIRS, h)}, round((8 + ({h} / 32 % 190) * 1.25)::numeric, 2), "
        f"CASE WHEN g % 9 = 0 THEN NULL ELSE 1 + (g % {n['stations']}) END FROM generate_series(1::bigint, {n['repairs']}) g",
        "ALTER TABLE stations ADD FOREIGN KEY (region_id) REFERENCES regions",
        "ALTER TABLE bikes ADD FOREIGN KEY (home_station_id) REFERENCES stations",
        "ALTER TABLE members ADD FOREIGN KEY (home_region_id) REFERENCES regions",
        "ALTER TABLE trips ADD FOREIGN KEY (member_id) REFERENCES members",
        "ALTER TABLE trips ADD FOREIGN KEY (bike_id) REFERENCES bikes",
        "ALTER TABLE trips ADD FOREIGN KEY (start_station_id) REFERENCES stations",
        "ALTER TABLE trips ADD FOREIGN KEY (end_station_id) REFERENCES stations",
        "ALTER TABLE repairs ADD FOREIGN KEY (bike_id) REFERENCES bikes",
        "ALTER TABLE repairs ADD FOREIGN KEY (station_id) REFERENCES stations",
        "ANALYZE",
    ]


def find_bin() -> Path:
    """The folder of initdb/pg_ctl, the newest installed version first."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: tuple(int(x) for x in p.parent.parent.name.split(".") if x.isdigit()))
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    if on_path is None:
        raise SystemExit("no PostgreSQL server binaries: apt-get install postgresql")
    return Path(on_path).parent


@dataclass
class Server:
    """A private PostgreSQL whose data folder lives under `folder` and stays there between runs."""

    folder: Path

    @property
    def data(self) -> Path:
        """The cluster's data folder."""
        return self.folder / "data"

    @property
    def port_file(self) -> Path:
        """Where the running server's port is written."""
        return self.folder / "port"

    def _run(self, *args: str, timeout_s: float = 300) -> str:
        command = [str(find_bin() / args[0]), *args[1:]]
        if os.geteuid() == 0:  # initdb refuses root
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False,
                              cwd=self.folder)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {(done.stdout + done.stderr)[-2000:]}")
        return done.stdout

    def running(self) -> bool:
        """Whether this folder's server is up."""
        return (self.data / "postmaster.pid").exists()

    def start(self) -> Server:
        """initdb when new, then start (unless running)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder = self.folder.resolve()
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                      "--locale=C.UTF-8")
        if not self.running():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            # A benchmark database: no fsync; work memory modest (the machine is shared).
            options = (f"-p {port} -c listen_addresses=127.0.0.1 -k {self.folder} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off -c max_wal_size=4GB "
                       "-c shared_buffers=512MB -c maintenance_work_mem=512MB -c max_parallel_workers_per_gather=1")
            self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "server.log"),
                      "-w", "start")
            self.port_file.write_text(str(port))
        return self

    def url(self, database: str = "postgres") -> str:
        """A connection URL for `database` as the superuser."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port_file.read_text().strip()}/{database}"

    def stop(self) -> None:
        """Stop the server (by its data folder: only this one); the data stays."""
        if self.running():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


def build(server: Server, database: str, scale: float) -> dict[str, float]:
    """Create `database` afresh on the running server and fill it; seconds per step and the total rows."""
    import psycopg

    with psycopg.connect(server.url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
        admin.execute(f'CREATE DATABASE "{database}"')
    started = time.perf_counter()
    with psycopg.connect(server.url(database), autocommit=True) as conn:
        for statement in statements(scale):
            conn.execute(statement)  # built from our own constants
    return {"seconds": time.perf_counter() - started, "rows": float(sum(sizes(scale).values()))}


def main(argv: list[str]) -> int:
    """build / start / stop the benchmark server and database."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("build", "start", "stop"))
    parser.add_argument("folder", nargs="?", default="runs/bigpg", type=Path)
    parser.add_argument("--db", default="bikeshare")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    server = Server(args.folder)
    if args.action == "stop":
        server.stop()
        return 0
    server.start()
    if args.action == "build":
        done = build(server, args.db, args.scale)
        print(f"built {args.db}: {int(done['rows']):,} rows in {done['seconds']:.1f} s")
    print(server.url(args.db))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
