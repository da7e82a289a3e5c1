"""`league`: a football league of our own invention as a SQLite database, for sparqlnav's relational benchmarks.

Fourteen clubs (twelve in the league each season, one relegated and one promoted every summer), five seasons
(2020-21 to 2024-25, the last one half played), the players, their season statistics, every goal, the summer
transfers, the stadiums, the referees and the final (or current) table. All names and facts are made up here and
the data is simulated from a seeded `random.Random`, so the same file comes out every time.

The schema is written in a style unlike a snake_case, surrogate-key one on purpose: natural TEXT keys (club codes
such as 'RVR', player codes such as 'HALVE-M1'), CamelCase table and column names, two foreign keys from one table to
the same table (`Match.HomeClub`/`AwayClub`, `Transfer.FromClub`/`ToClub`), composite primary keys whose columns are
foreign keys (`PlayerSeasonStats`, `Standing`, `Goal`), NULLs where a real database has gaps, INTEGER and REAL
numbers, DATE columns, and low-cardinality text columns (positions, statuses, goal and transfer types, grades).

    .venv/bin/python bench/databases/league.py OUT.db
"""

from __future__ import annotations

import datetime
import math
import random
import sqlite3
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

SEED = 20261126
SEASONS = ("2020-21", "2021-22", "2022-23", "2023-24", "2024-25")
CURRENT_SEASON = "2024-25"
ROUNDS_PLAYED_IN_CURRENT = 15  # of 22: the last season is under way
CLOSED_DOORS_ROUNDS = 17  # the first rounds of 2020-21 were played without spectators

SCHEMA = """
CREATE TABLE Stadium (
    StadiumCode TEXT PRIMARY KEY,
    StadiumName TEXT NOT NULL,
    City TEXT NOT NULL,
    Capacity INTEGER NOT NULL,
    OpenedYear INTEGER,
    Surface TEXT NOT NULL,
    RoofType TEXT
);
CREATE TABLE Club (
    ClubCode TEXT PRIMARY KEY,
    ClubName TEXT NOT NULL,
    City TEXT NOT NULL,
    FoundedYear INTEGER NOT NULL,
    HomeStadium TEXT REFERENCES Stadium (StadiumCode),
    Colours TEXT,
    ManagerName TEXT,
    AnnualBudget REAL
);
CREATE TABLE Referee (
    RefereeCode TEXT PRIMARY KEY,
    RefereeName TEXT NOT NULL,
    BirthYear INTEGER NOT NULL,
    HomeCity TEXT,
    Grade TEXT NOT NULL
);
CREATE TABLE Season (
    SeasonCode TEXT PRIMARY KEY,
    StartYear INTEGER NOT NULL,
    EndYear INTEGER NOT NULL,
    SponsorName TEXT,
    Champion TEXT REFERENCES Club (ClubCode),
    Relegated TEXT REFERENCES Club (ClubCode)
);
CREATE TABLE Player (
    PlayerCode TEXT PRIMARY KEY,
    PlayerName TEXT NOT NULL,
    BirthYear INTEGER NOT NULL,
    Nationality TEXT NOT NULL,
    Position TEXT NOT NULL,
    HeightCm INTEGER,
    PreferredFoot TEXT,
    ShirtNumber INTEGER,
    MarketValue REAL,
    CurrentClub TEXT REFERENCES Club (ClubCode)
);
CREATE TABLE Match (
    MatchCode TEXT PRIMARY KEY,
    Season TEXT NOT NULL REFERENCES Season (SeasonCode),
    Round INTEGER NOT NULL,
    MatchDate DATE,
    HomeClub TEXT NOT NULL REFERENCES Club (ClubCode),
    AwayClub TEXT NOT NULL REFERENCES Club (ClubCode),
    HomeGoals INTEGER,
    AwayGoals INTEGER,
    Venue TEXT REFERENCES Stadium (StadiumCode),
    Referee TEXT REFERENCES Referee (RefereeCode),
    Attendance INTEGER,
    Status TEXT NOT NULL
);
CREATE TABLE Goal (
    MatchCode TEXT NOT NULL REFERENCES Match (MatchCode),
    GoalNo INTEGER NOT NULL,
    Minute INTEGER NOT NULL,
    Scorer TEXT NOT NULL REFERENCES Player (PlayerCode),
    ForClub TEXT NOT NULL REFERENCES Club (ClubCode),
    AssistBy TEXT REFERENCES Player (PlayerCode),
    GoalType TEXT NOT NULL,
    PRIMARY KEY (MatchCode, GoalNo)
);
CREATE TABLE PlayerSeasonStats (
    PlayerCode TEXT NOT NULL REFERENCES Player (PlayerCode),
    Season TEXT NOT NULL REFERENCES Season (SeasonCode),
    Club TEXT NOT NULL REFERENCES Club (ClubCode),
    Appearances INTEGER NOT NULL,
    MinutesPlayed INTEGER NOT NULL,
    Goals INTEGER NOT NULL,
    Assists INTEGER NOT NULL,
    YellowCards INTEGER NOT NULL,
    RedCards INTEGER NOT NULL,
    AvgRating REAL,
    PRIMARY KEY (PlayerCode, Season)
);
CREATE TABLE Standing (
    Season TEXT NOT NULL REFERENCES Season (SeasonCode),
    Club TEXT NOT NULL REFERENCES Club (ClubCode),
    Position INTEGER NOT NULL,
    Played INTEGER NOT NULL,
    Won INTEGER NOT NULL,
    Drawn INTEGER NOT NULL,
    Lost INTEGER NOT NULL,
    GoalsFor INTEGER NOT NULL,
    GoalsAgainst INTEGER NOT NULL,
    PointsDeducted INTEGER,
    Points INTEGER NOT NULL,
    PRIMARY KEY (Season, Club)
);
CREATE TABLE Transfer (
    TransferCode TEXT PRIMARY KEY,
    Player TEXT NOT NULL REFERENCES Player (PlayerCode),
    FromClub TEXT REFERENCES Club (ClubCode),
    ToClub TEXT REFERENCES Club (ClubCode),
    OtherClubName TEXT,
    TransferDate DATE NOT NULL,
    Fee REAL,
    TransferType TEXT NOT NULL
);
"""

# (code, name, city, capacity, opened, surface, roof)
STADIUMS = [
    ("MEAD", "The Meadow", "Riverside", 24150, 1911, "Grass", "Partial"),
    ("ASHL", "Ashbourne Lane", "Ashbourne", 18400, 1923, "Grass", "Full"),
    ("KPRK", "Kingsford Park", "Kingsford", 41200, 2004, "Hybrid", "Full"),
    ("MOOR", "Moorside Road", "Middlemoor", 15600, 1898, "Grass", None),
    ("HARB", "Harbour Ground", "Porthaven", 21300, 1932, "Grass", "Partial"),
    ("SILV", "Silverdale Arena", "Silverdale", 27800, 2016, "Hybrid", "Retractable"),
    ("HIGH", "Highford Common", "Highford", 12900, 1907, "Grass", None),
    ("NWST", "Northwick Stadium", "Northwick", 23050, 1971, "Grass", "Partial"),
    ("BRKF", "Bracken Fields", "Brackenridge", 9800, 1950, "Artificial", None),
    ("CALD", "Calder Bridge", "Calderholm", 16700, 1929, "Grass", "Partial"),
    ("ELMS", "Elmstead Community Stadium", "Elmstead", 8200, 2011, "Artificial", "Partial"),
    ("STOW", "Stowe Lane", "Stowbury", 14300, 1936, "Grass", "Partial"),
    ("GLEN", "Glenholt Park", "Glenholt", 11050, 1962, "Grass", None),
    ("RVAR", "Riverside Athletics Arena", "Riverside", 30500, 1995, "Hybrid", "Partial"),
]

# (code, name, city, founded, stadium, colours, manager, budget in millions, strength)
CLUBS = [
    ("RVR", "Riverside Rovers", "Riverside", 1884, "MEAD", "Blue and white", "Tomas Feldbrugge", 88.5, 0.42),
    ("ASH", "Ashbourne Athletic", "Ashbourne", 1892, "ASHL", "Red and black", "Graham Oduya", 61.0, 0.22),
    ("KGC", "Kingsford City", "Kingsford", 1879, "KPRK", "Sky blue", "Ines Marchetti", 112.0, 0.55),
    ("KSP", "Kingsford Sporting", "Kingsford", 1921, "KPRK", "Green and gold", "Paul Achterberg", 47.3, 0.08),
    ("MDA", "Middlemoor Albion", "Middlemoor", 1887, "MOOR", "Claret", "Desmond Whitlow", 33.8, -0.10),
    ("PHV", "Porthaven FC", "Porthaven", 1903, "HARB", "Navy and white", "Rui Cardeal", 52.6, 0.15),
    ("SDW", "Silverdale Wanderers", "Silverdale", 1899, "SILV", "White", "Henrik Sollund", 74.9, 0.30),
    ("HFT", "Highford Town", "Highford", 1910, "HIGH", "Amber and black", None, 21.4, -0.30),
    ("NWU", "Northwick United", "Northwick", 1902, "NWST", "Red", "Callum Breck", 44.0, 0.02),
    ("BRK", "Brackenridge FC", "Brackenridge", 1947, "BRKF", "Orange", "Noor Hakimi", 18.9, -0.28),
    ("CLR", "Calderholm Rangers", "Calderholm", 1891, "CALD", "Blue and yellow", "Owen Prys", 29.5, -0.12),
    ("ELB", "Elmstead Borough", "Elmstead", 1968, "ELMS", "Purple", "Sandra Kowal", None, -0.35),
    ("STB", "Stowbury Town", "Stowbury", 1890, "STOW", "Black and white", "Ivo Radman", 24.2, -0.20),
    ("GLH", "Glenholt Harriers", "Glenholt", 1912, "GLEN", "Green", "Fergus Lennie", 15.7, -0.38),
]
FIRST_SEASON_CLUBS = ("RVR", "ASH", "KGC", "KSP", "MDA", "PHV", "SDW", "HFT", "NWU", "BRK", "CLR", "STB")
WAITING = ["ELB", "GLH"]  # the clubs outside the league in 2020-21, promoted in this order as places free up

# (code, name, born, home city or None, grade)
REFEREES = [
    ("R-HALB", "Martin Halbrook", 1979, "Riverside", "Elite"),
    ("R-OSEI", "Kwame Osei", 1983, "Kingsford", "Elite"),
    ("R-DRUM", "Fiona Drummond", 1986, None, "Elite"),
    ("R-PRYC", "Gareth Pryce", 1977, "Calderholm", "Elite"),
    ("R-VAND", "Pieter van Dam", 1981, "Northwick", "National"),
    ("R-KELS", "Alan Kelso", 1975, "Highford", "National"),
    ("R-MORG", "Rhian Morgan", 1990, "Porthaven", "National"),
    ("R-BASS", "Leon Bassett", 1984, None, "National"),
    ("R-NAKA", "Kenji Nakamura", 1988, "Silverdale", "National"),
    ("R-CORR", "Aidan Corrigan", 1992, "Middlemoor", "Candidate"),
    ("R-LUND", "Elsa Lundgren", 1994, "Ashbourne", "Candidate"),
    ("R-FERR", "Bruno Ferreira", 1991, None, "Candidate"),
]
REFEREE_WEIGHTS = (13, 12, 12, 11, 9, 8, 8, 7, 7, 5, 4, 4)

SPONSORS = {"2020-21": "Harbourline Premier Division", "2021-22": "Harbourline Premier Division",
            "2022-23": None, "2023-24": "Norvik Energy League", "2024-25": "Norvik Energy League"}

# Nationality → (share of players, first names, surnames). The league is in a made-up English-speaking country
# whose own players are listed as 'England'; the rest come from abroad.
NAMES: dict[str, tuple[int, list[str], list[str]]] = {
    "England": (40, ["James", "Oliver", "Harry", "Jack", "George", "Callum", "Ryan", "Lewis", "Daniel", "Sam", "Joe",
                     "Tom", "Nathan", "Kieran", "Luke", "Adam", "Ben", "Connor", "Jordan", "Mason", "Reece", "Liam",
                     "Aaron", "Jamie", "Elliot", "Toby", "Alfie", "Dominic", "Marcus", "Scott"],
                ["Ashworth", "Bramley", "Cotterill", "Dunmore", "Eastwood", "Fairclough", "Gresley", "Hollins",
                 "Ingram", "Jessop", "Kettering", "Lowther", "Marsden", "Newbold", "Oakley", "Pickering", "Radcliffe",
                 "Shelton", "Thwaite", "Underhill", "Varley", "Whitcombe", "Yardley", "Allsop", "Birtwistle",
                 "Catterall", "Dimmock", "Ellwood", "Fenwick", "Gaskell", "Hebden", "Kershaw", "Lambourne", "Mottram",
                 "Nuttall", "Pennington", "Royle", "Stanhope", "Tidswell", "Wadsworth"]),
    "Scotland": (6, ["Euan", "Fraser", "Callum", "Ross", "Grant", "Ewan", "Craig", "Hamish"],
                 ["McAllister", "Drummond", "Baird", "Strachan", "Lennox", "Murdoch", "Cairns", "Kinnaird"]),
    "Ireland": (5, ["Cian", "Darragh", "Eoin", "Seamus", "Niall", "Ronan"],
                ["Donnelly", "Fitzgerald", "Hegarty", "Kavanagh", "Mulcahy", "O'Driscoll", "Quinlan"]),
    "Wales": (4, ["Rhys", "Gethin", "Dafydd", "Iwan", "Owain"], ["Llewellyn", "Pritchard", "Vaughan", "Gruffydd"]),
    "Netherlands": (5, ["Daan", "Sem", "Bram", "Thijs", "Jesse", "Ruben"],
                    ["de Wit", "Verhoeven", "Bakker", "Hoekstra", "van Leeuwen", "Brouwer", "Kuipers"]),
    "Norway": (4, ["Sindre", "Eirik", "Håkon", "Magnus", "Vegard"], ["Haugland", "Nygård", "Solberg", "Rønning"]),
    "Sweden": (3, ["Viktor", "Linus", "Oskar", "Emil"], ["Lindqvist", "Bergström", "Ekholm", "Sandberg"]),
    "Denmark": (3, ["Mads", "Rasmus", "Jonas", "Frederik"], ["Kjær", "Østergaard", "Brandt", "Lund"]),
    "France": (5, ["Théo", "Lucas", "Hugo", "Mathis", "Yanis", "Enzo"],
               ["Lefèvre", "Mercier", "Garnier", "Rousseau", "Chevalier", "Bonnet"]),
    "Spain": (4, ["Álvaro", "Iker", "Sergio", "Pablo", "Unai"], ["Ortega", "Navarro", "Iglesias", "Domínguez", "Salas"]),
    "Portugal": (3, ["Tiago", "Rúben", "Diogo", "Gonçalo"], ["Figueiredo", "Carvalho", "Pinheiro", "Magalhães"]),
    "Brazil": (3, ["Matheus", "Gabriel", "Vinícius", "Caio"], ["Albuquerque", "Teixeira", "Nogueira", "Barbosa"]),
    "Nigeria": (4, ["Chukwuemeka", "Tobi", "Emeka", "Femi", "Sani"], ["Okonkwo", "Adeyemi", "Nwosu", "Balogun"]),
    "Ghana": (3, ["Kofi", "Yaw", "Kwabena", "Nana"], ["Mensah", "Asante", "Boateng", "Owusu"]),
    "Senegal": (2, ["Moussa", "Cheikh", "Ibrahima"], ["Ndiaye", "Sarr", "Diallo"]),
    "Poland": (3, ["Kacper", "Jakub", "Mateusz"], ["Wiśniewski", "Zieliński", "Kowalczyk", "Szymański"]),
    "Croatia": (2, ["Luka", "Ivan", "Marko"], ["Kovačić", "Perković", "Babić"]),
    "Japan": (2, ["Haruto", "Ren", "Sota"], ["Takahashi", "Morimoto", "Ishikawa"]),
    "United States": (3, ["Tyler", "Brandon", "Cody", "Austin"], ["Whitaker", "Delgado", "Brennan", "Hollister"]),
}

FOREIGN_CLUBS = ["FC Lindholm (Sweden)", "Vestby IL (Norway)", "Sporting Alvor (Portugal)", "SC Heerenveld (Netherlands)",
                 "Olympique Varenne (France)", "CD Almagro (Spain)", "Lakeshore FC (United States)",
                 "Enugu Stars (Nigeria)", "Accra Lions (Ghana)", "Dinamo Krapina (Croatia)", "Wisła Brzeg (Poland)",
                 "Kashiwa Reds (Japan)", "Aarhus Nord (Denmark)", "Dunfermline Thistle (Scotland)",
                 "Shamrock Athletic (Ireland)", "Recife Náutico (Brazil)"]

SQUAD_SHAPE = {"Goalkeeper": 3, "Defender": 8, "Midfielder": 8, "Forward": 5}
SCORING_WEIGHT = {"Goalkeeper": 0.01, "Defender": 0.9, "Midfielder": 2.2, "Forward": 5.0}
ASSIST_WEIGHT = {"Goalkeeper": 0.05, "Defender": 1.0, "Midfielder": 2.6, "Forward": 1.8}
FORMATION = {"Goalkeeper": 1, "Defender": 4, "Midfielder": 4, "Forward": 2}


@dataclass
class Player:
    """A player as the simulation tracks him."""

    code: str
    name: str
    born: int
    nationality: str
    position: str
    height: int | None
    foot: str | None
    quality: float
    club: str | None
    shirt: int | None = None
    loan_from: str | None = None  # the parent club while on a one-season loan
    stats: dict[str, list[float]] = field(default_factory=dict)  # season → [apps, minutes, yellow, red, rating sum]


@dataclass
class Sim:
    """Everything the simulation writes, gathered before one insert."""

    rng: random.Random
    players: dict[str, Player] = field(default_factory=dict)
    names_used: set[str] = field(default_factory=set)
    codes_used: set[str] = field(default_factory=set)
    matches: list[tuple[object, ...]] = field(default_factory=list)
    goals: list[tuple[object, ...]] = field(default_factory=list)
    transfers: list[tuple[object, ...]] = field(default_factory=list)
    standings: list[tuple[object, ...]] = field(default_factory=list)
    seasons: list[tuple[object, ...]] = field(default_factory=list)
    season_stats: list[tuple[object, ...]] = field(default_factory=list)


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().replace("'", "").replace(" ", "")


def new_player(sim: Sim, position: str, club: str | None, born: int, nationality: str | None = None) -> Player:
    """A player with a name and code no other player has."""
    rng = sim.rng
    if nationality is None:
        nations = list(NAMES)
        nationality = rng.choices(nations, weights=[NAMES[n][0] for n in nations])[0]
    for attempt in range(1000):
        if attempt and attempt % 40 == 0:  # this nation's names are used up: the player is from elsewhere
            nationality = rng.choices(list(NAMES), weights=[NAMES[n][0] for n in NAMES])[0]
        _, firsts, lasts = NAMES[nationality]
        first, last = rng.choice(firsts), rng.choice(lasts)
        name = f"{first} {last}"
        if name not in sim.names_used:
            break
    else:
        raise RuntimeError("ran out of player names")
    sim.names_used.add(name)
    stem = _ascii(last).upper()[:5] + "-" + _ascii(first)[0].upper()
    n = 1
    while f"{stem}{n}" in sim.codes_used:
        n += 1
    code = f"{stem}{n}"
    sim.codes_used.add(code)
    base_height = {"Goalkeeper": 190, "Defender": 185, "Midfielder": 178, "Forward": 181}[position]
    height = None if rng.random() < 0.08 else int(rng.gauss(base_height, 5))
    foot = None if rng.random() < 0.1 else rng.choices(["Right", "Left", "Both"], weights=[68, 27, 5])[0]
    player = Player(code, name, born, nationality, position, height, foot, rng.gauss(0, 1), club)
    sim.players[code] = player
    return player


def squad(sim: Sim, club: str) -> list[Player]:
    """The players at a club now."""
    return [p for p in sim.players.values() if p.club == club]


def poisson(rng: random.Random, lam: float) -> int:
    """A Poisson draw (Knuth's method; the means here are small)."""
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def fixtures(rng: random.Random, clubs: list[str]) -> list[list[tuple[str, str]]]:
    """A double round robin by the circle method: 2(n-1) rounds, each club at home about half the time."""
    order = clubs[:]
    rng.shuffle(order)
    n = len(order)
    first_half = []
    for r in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = order[i], order[n - 1 - i]
            pairs.append((a, b) if (r + i) % 2 == 0 else (b, a))
        first_half.append(pairs)
        order = [order[0], order[-1], *order[1:-1]]
    return first_half + [[(b, a) for a, b in pairs] for pairs in first_half]


def lineup(rng: random.Random, players: list[Player]) -> tuple[list[Player], list[Player]]:
    """Eleven starters by the formation, better players more likely, and three substitutes."""
    starters: list[Player] = []
    for position, count in FORMATION.items():
        pool = [p for p in players if p.position == position]
        for _ in range(min(count, len(pool))):
            weights = [math.exp(1.3 * p.quality) for p in pool]
            chosen = rng.choices(pool, weights=weights)[0]
            pool.remove(chosen)
            starters.append(chosen)
    bench = [p for p in players if p not in starters and p.position != "Goalkeeper"]
    subs = rng.sample(bench, min(3, len(bench)))
    return starters, subs


def play_match(sim: Sim, season: str, code: str, home: str, away: str, strength: dict[str, float]) -> tuple[int, int]:
    """Simulate one match: appearances, cards and goals; returns the score."""
    rng = sim.rng
    sides = {}
    for club in (home, away):
        starters, subs = lineup(rng, squad(sim, club))
        minutes: dict[str, int] = {p.code: 90 for p in starters}
        for sub in subs:
            off = rng.choice([p for p in starters if p.position != "Goalkeeper" and minutes[p.code] == 90])
            on_at = rng.randint(55, 85)
            minutes[off.code] = on_at
            minutes[sub.code] = 90 - on_at
        for p in starters + subs:
            row = p.stats.setdefault(season, [0, 0, 0, 0, 0.0])
            row[0] += 1
            row[1] += minutes[p.code]
            row[2] += rng.random() < 0.11
            row[3] += rng.random() < 0.006
            row[4] += min(9.5, max(4.5, rng.gauss(6.6 + 0.25 * p.quality, 0.6)))
        sides[club] = (starters + subs, minutes)
    lam_home = 1.45 * math.exp(strength[home] - strength[away])
    lam_away = 1.10 * math.exp(strength[away] - strength[home])
    score = {home: poisson(rng, lam_home), away: poisson(rng, lam_away)}
    events = []
    for club, other in ((home, away), (away, home)):
        on_pitch, _ = sides[club]
        for _ in range(score[club]):
            minute = rng.randint(91, 96) if rng.random() < 0.05 else rng.randint(1, 90)
            kind = rng.choices(["Open play", "Header", "Penalty", "Free kick", "Own goal"],
                               weights=[66, 16, 10, 4, 4])[0]
            if kind == "Own goal":
                scorer = rng.choice([p for p in sides[other][0] if p.position != "Goalkeeper"])
                assist = None
            else:
                scorer = rng.choices(on_pitch, weights=[SCORING_WEIGHT[p.position] for p in on_pitch])[0]
                mates = [p for p in on_pitch if p is not scorer]
                assist = None
                if kind in ("Open play", "Header") and rng.random() < 0.72:
                    assist = rng.choices(mates, weights=[ASSIST_WEIGHT[p.position] for p in mates])[0]
            events.append((minute, scorer.code, club, assist.code if assist else None, kind))
    events.sort(key=lambda e: e[0])
    for n, (minute, scorer_code, club, assist_code, kind) in enumerate(events, start=1):
        sim.goals.append((code, n, minute, scorer_code, club, assist_code, kind))
    return score[home], score[away]


def season_dates(start_year: int) -> list[datetime.date]:
    """22 round dates, Saturdays a week or a fortnight apart: eleven from the second Saturday of August, eleven from
    the last Saturday of January (a winter break between), so a season ends in May."""

    def saturdays(first: datetime.date) -> list[datetime.date]:
        while first.weekday() != 5:
            first += datetime.timedelta(days=1)
        out = [first]
        for gap in (7, 14) * 5:
            out.append(out[-1] + datetime.timedelta(days=gap))
        return out

    return saturdays(datetime.date(start_year, 8, 8)) + saturdays(datetime.date(start_year + 1, 1, 25))


def play_season(sim: Sim, season: str, clubs: list[str], strength: dict[str, float], venue_of: dict[str, str],
                capacity: dict[str, int]) -> list[tuple[str, int, int, int, int, int, int, int]]:
    """All of a season's matches; returns its table rows (club, W, D, L, GF, GA, played, deducted)."""
    rng = sim.rng
    start = int(season[:4])
    rounds = fixtures(rng, clubs)
    dates = season_dates(start)
    table = {c: [0, 0, 0, 0, 0, 0] for c in clubs}  # W D L GF GA played
    referees = [r[0] for r in REFEREES]
    awarded_done = False
    for r, (pairs, date) in enumerate(zip(rounds, dates, strict=True), start=1):
        for i, (home, away) in enumerate(pairs, start=1):
            code = f"{season[:4]}{season[5:]}-R{r:02d}-{i}"
            day = date + datetime.timedelta(days=rng.choice([0, 0, 0, 1, 1, -1]))  # Friday, Saturday or Sunday
            venue = venue_of[home]
            if season == CURRENT_SEASON and r > ROUNDS_PLAYED_IN_CURRENT:
                postponed = r == ROUNDS_PLAYED_IN_CURRENT + 1 and i == 4
                sim.matches.append((code, season, r, None if postponed else day.isoformat(), home, away, None,
                                    None, venue, None, None, "Postponed" if postponed else "Scheduled"))
                continue
            hg, ag = play_match(sim, season, code, home, away, strength)
            status = "Played"
            if season == "2022-23" and not awarded_done and r == 9 and i == 2:
                # Awarded 3-0 to the home side after the away side fielded a suspended player; the goals scored
                # on the pitch stay recorded in Goal, as the league's records keep them.
                hg, ag, status, awarded_done = 3, 0, "Awarded", True
            referee = rng.choices(referees, weights=REFEREE_WEIGHTS)[0]
            if rng.random() < 0.015:
                referee = None  # missing from the records
            if season == "2020-21" and r <= CLOSED_DOORS_ROUNDS:
                attendance: int | None = 0
            elif rng.random() < 0.03:
                attendance = None
            else:
                cap = capacity[venue]
                fill = min(1.0, max(0.35, rng.gauss(0.78 + 0.25 * strength[home], 0.1)))
                attendance = int(cap * fill)
            sim.matches.append((code, season, r, day.isoformat(), home, away, hg, ag, venue, referee, attendance,
                                status))
            for club, gf, ga in ((home, hg, ag), (away, ag, hg)):
                row = table[club]
                row[0 if gf > ga else 1 if gf == ga else 2] += 1
                row[3] += gf
                row[4] += ga
                row[5] += 1
    return [(c, *table[c]) for c in clubs]  # type: ignore[misc]


def summer(sim: Sim, year: int, clubs_all: list[str], counter: list[int]) -> None:
    """A summer window: loans end, veterans retire, players move between clubs and to and from abroad, and academies
    fill the squads back to their shape."""
    rng = sim.rng

    def transfer(player: Player, src: str | None, dst: str | None, kind: str, fee: float | None,
                 other: str | None = None) -> None:
        counter[0] += 1
        day = datetime.date(year, 6, 1) + datetime.timedelta(days=rng.randint(0, 70))
        sim.transfers.append((f"T{year}-{counter[0]:03d}", player.code, src, dst, other, day.isoformat(), fee, kind))
        player.club = dst

    for p in sorted((p for p in sim.players.values() if p.loan_from), key=lambda p: p.code):
        parent, p.loan_from = p.loan_from, None
        transfer(p, p.club, parent, "Loan return", None)
    for p in sorted(sim.players.values(), key=lambda p: p.code):
        age = year - p.born
        if p.club and age >= 33 and rng.random() < (0.25 if age < 35 else 0.7):
            p.club = None  # retired: no transfer, the club just lets him go
    movable = sorted((p for p in sim.players.values() if p.club), key=lambda p: p.code)
    for p in rng.sample(movable, 14):
        dst = rng.choice([c for c in clubs_all if c != p.club])
        kind = rng.choices(["Permanent", "Free", "Loan"], weights=[60, 22, 18])[0]
        fee: float | None
        if kind == "Permanent":
            fee = None if rng.random() < 0.15 else round(max(0.3, math.exp(rng.gauss(1.0 + 0.6 * p.quality, 0.7))), 1)
        elif kind == "Loan":
            fee = round(rng.uniform(0.2, 1.5), 1) if rng.random() < 0.3 else None
        else:
            fee = None
        src = p.club
        transfer(p, src, dst, kind, fee)
        if kind == "Loan":
            p.loan_from = src
    for p in rng.sample([p for p in sim.players.values() if p.club and not p.loan_from], 5):
        fee = round(max(0.5, math.exp(rng.gauss(1.5 + 0.5 * p.quality, 0.6))), 1)
        transfer(p, p.club, None, "Permanent", fee if rng.random() < 0.8 else None, rng.choice(FOREIGN_CLUBS))
    for club in clubs_all:
        for position, count in SQUAD_SHAPE.items():
            have = [p for p in squad(sim, club) if p.position == position]
            for k in range(count - len(have)):
                if k == 0 and rng.random() < 0.45:
                    nation = rng.choice([n for n in NAMES if n != "England"])
                    p = new_player(sim, position, None, year - rng.randint(21, 29), nation)
                    p.quality += 0.3
                    fee = round(max(0.2, math.exp(rng.gauss(0.8 + 0.5 * p.quality, 0.6))), 1)
                    other = [c for c in FOREIGN_CLUBS if c.endswith(f"({nation})")] or FOREIGN_CLUBS
                    transfer(p, None, club, "Permanent", fee if rng.random() < 0.75 else None, rng.choice(other))
                else:
                    p = new_player(sim, position, club, year - rng.randint(17, 19), "England")
                    p.quality -= 0.6  # an academy graduate


def number_shirts(sim: Sim, club: str) -> None:
    """Shirt numbers: keepers 1, 13, 31; everyone else a free number; a few recorded without one."""
    rng = sim.rng
    taken: set[int] = set()
    for p in sorted(squad(sim, club), key=lambda p: (p.position != "Goalkeeper", p.code)):
        if p.shirt is not None and p.shirt not in taken and rng.random() < 0.9:
            taken.add(p.shirt)
            continue
        choices = [1, 13, 31] if p.position == "Goalkeeper" else list(range(2, 40))
        free = [n for n in choices if n not in taken] or [n for n in range(40, 99) if n not in taken]
        p.shirt = free[0] if p.position == "Goalkeeper" else rng.choice(free)
        taken.add(p.shirt)


def simulate(rng: random.Random) -> Sim:
    """Five seasons of the league."""
    sim = Sim(rng)
    strength = {c[0]: c[8] for c in CLUBS}
    venue_of = {c[0]: c[4] for c in CLUBS}
    capacity = {s[0]: s[3] for s in STADIUMS}
    clubs_all = [c[0] for c in CLUBS]
    for club in clubs_all:
        for position, count in SQUAD_SHAPE.items():
            for _ in range(count):
                p = new_player(sim, position, club, rng.randint(1986, 2002))
                p.quality += strength[club] * 1.5
    in_league = list(FIRST_SEASON_CLUBS)
    waiting = list(WAITING)
    for season in SEASONS:
        start = int(season[:4])
        summer(sim, start, clubs_all, [0])
        for club in clubs_all:
            number_shirts(sim, club)
        # Kingsford Sporting played 2021-22 at the Riverside Athletics Arena while its shared ground was rebuilt.
        venue_of["KSP"] = "RVAR" if season == "2021-22" else "KPRK"
        rows = play_season(sim, season, in_league, strength, venue_of, capacity)
        for p in sim.players.values():
            if p.club in in_league:
                p.stats.setdefault(season, [0, 0, 0, 0, 0.0])
        for p in sorted(sim.players.values(), key=lambda p: p.code):
            if season in p.stats and p.club:
                apps, minutes, yellow, red, rating = p.stats[season]
                goals = sum(1 for g in sim.goals if g[0].startswith(season[:4] + season[5:]) and g[3] == p.code
                            and g[6] != "Own goal")
                assists = sum(1 for g in sim.goals if g[0].startswith(season[:4] + season[5:]) and g[5] == p.code)
                avg = round(rating / apps, 2) if apps >= 3 else None
                sim.season_stats.append((p.code, season, p.club, int(apps), int(minutes), goals, assists,
                                         int(yellow), int(red), avg))
        deduction = {("2023-24", "MDA"): 6}  # financial irregularities
        table = []
        for club, won, drawn, lost, gf, ga, played in rows:
            deducted = deduction.get((season, club))
            points = 3 * won + drawn - (deducted or 0)
            table.append((club, played, won, drawn, lost, gf, ga, deducted, points))
        table.sort(key=lambda t: (-t[8], -(t[5] - t[6]), -t[5], t[0]))
        for position, t in enumerate(table, start=1):
            club, played, won, drawn, lost, gf, ga, deducted, points = t
            sim.standings.append((season, club, position, played, won, drawn, lost, gf, ga, deducted, points))
        finished = season != CURRENT_SEASON
        champion = table[0][0] if finished else None
        relegated = table[-1][0] if finished else None
        sim.seasons.append((season, start, start + 1, SPONSORS[season], champion, relegated))
        if finished and relegated:
            in_league.remove(relegated)
            in_league.append(waiting.pop(0))
            waiting.append(relegated)
        for p in sim.players.values():
            p.quality += rng.gauss(0.03, 0.08) - (0.08 if start - p.born > 31 else 0)
    return sim


def market_value(rng: random.Random, p: Player, year: int) -> float | None:
    """A player's market value in millions of euros, unknown for some; none for a player without a club."""
    if p.club is None or rng.random() < 0.07:
        return None
    age = year - p.born
    base = math.exp(1.2 + 0.9 * p.quality - 0.06 * max(0, age - 27) ** 1.4 + rng.gauss(0, 0.3))
    return round(max(0.1, base), 1)


def build(path: Path) -> None:
    """Write the league database to `path` (which must not exist yet)."""
    rng = random.Random(SEED)
    sim = simulate(rng)
    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        con.executemany("INSERT INTO Stadium VALUES (?, ?, ?, ?, ?, ?, ?)", STADIUMS)
        con.executemany("INSERT INTO Club VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [c[:8] for c in CLUBS])
        con.executemany("INSERT INTO Referee VALUES (?, ?, ?, ?, ?)", REFEREES)
        con.executemany("INSERT INTO Season VALUES (?, ?, ?, ?, ?, ?)", sim.seasons)
        players = sorted(sim.players.values(), key=lambda p: p.code)
        con.executemany("INSERT INTO Player VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            (p.code, p.name, p.born, p.nationality, p.position, p.height, p.foot,
             p.shirt if p.club else None, market_value(rng, p, 2025), p.club) for p in players])
        con.executemany("INSERT INTO Match VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", sim.matches)
        con.executemany("INSERT INTO Goal VALUES (?, ?, ?, ?, ?, ?, ?)", sim.goals)
        con.executemany("INSERT INTO PlayerSeasonStats VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", sim.season_stats)
        con.executemany("INSERT INTO Standing VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", sim.standings)
        con.executemany("INSERT INTO Transfer VALUES (?, ?, ?, ?, ?, ?, ?, ?)", sim.transfers)
        con.commit()
    finally:
        con.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: league.py OUT.db")
    build(Path(sys.argv[1]))
