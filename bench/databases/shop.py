"""`shop`: an online shop and its warehouse as one SQLite database, written for sparqlnav's relational benchmark.

Ten tables: categories (a three-level tree through `cat_parent`), suppliers, products, product_supplier (a
many-to-many link with no primary key), customers, addresses, orders, order_lines (keyed by ord_id + line_no),
shipments and reviews. Every name and fact is written here and drawn from a seeded `random.Random`, so the same
file comes out on every run. The data is a little messy on purpose, as a shop's own database is: short prefixed
column names, dates as TEXT 'YYYY-MM-DD', money as NUMERIC, NULLs where a clerk left a field empty, and cities and
states typed with a trailing space, odd capitals or a missing space ('Lyon ', 'NewYork').

    .venv/bin/python bench/databases/shop.py /tmp/shop.db
"""

from __future__ import annotations

import datetime
import random
import sqlite3
import sys
from pathlib import Path

SEED = 20261126

SCHEMA = """
CREATE TABLE categories (
    cat_id      INTEGER PRIMARY KEY,
    cat_name    TEXT NOT NULL,
    cat_parent  INTEGER REFERENCES categories(cat_id),
    cat_slug    TEXT
);
CREATE TABLE suppliers (
    sup_id      INTEGER PRIMARY KEY,
    sup_name    TEXT NOT NULL,
    sup_country TEXT,
    sup_email   TEXT,
    sup_since   TEXT
);
CREATE TABLE products (
    prod_id     INTEGER PRIMARY KEY,
    prod_name   TEXT NOT NULL,
    prod_sku    TEXT NOT NULL,
    cat_id      INTEGER REFERENCES categories(cat_id),
    prod_price  NUMERIC NOT NULL,
    prod_weight REAL,
    prod_added  TEXT,
    prod_status TEXT NOT NULL
);
CREATE TABLE product_supplier (
    prod_id     INTEGER NOT NULL REFERENCES products(prod_id),
    sup_id      INTEGER NOT NULL REFERENCES suppliers(sup_id),
    ps_cost     NUMERIC,
    ps_lead_days INTEGER
);
CREATE TABLE customers (
    cust_id     INTEGER PRIMARY KEY,
    cust_fname  TEXT NOT NULL,
    cust_lname  TEXT NOT NULL,
    cust_email  TEXT,
    cust_phone  TEXT,
    cust_since  TEXT NOT NULL,
    cust_tier   TEXT
);
CREATE TABLE addresses (
    addr_id     INTEGER PRIMARY KEY,
    cust_id     INTEGER NOT NULL REFERENCES customers(cust_id),
    addr_kind   TEXT NOT NULL,
    addr_street TEXT NOT NULL,
    addr_city   TEXT NOT NULL,
    addr_state  TEXT,
    addr_zip    TEXT,
    addr_country TEXT NOT NULL
);
CREATE TABLE orders (
    ord_id      INTEGER PRIMARY KEY,
    cust_id     INTEGER NOT NULL REFERENCES customers(cust_id),
    ord_date    TEXT NOT NULL,
    ord_status  TEXT NOT NULL,
    ship_addr_id INTEGER REFERENCES addresses(addr_id),
    ord_note    TEXT
);
CREATE TABLE order_lines (
    ord_id      INTEGER NOT NULL REFERENCES orders(ord_id),
    line_no     INTEGER NOT NULL,
    prod_id     INTEGER NOT NULL REFERENCES products(prod_id),
    ol_qty      INTEGER NOT NULL,
    ol_price    NUMERIC NOT NULL,
    ol_discount NUMERIC,
    PRIMARY KEY (ord_id, line_no)
);
CREATE TABLE shipments (
    shp_id      INTEGER PRIMARY KEY,
    ord_id      INTEGER NOT NULL REFERENCES orders(ord_id),
    shp_carrier TEXT NOT NULL,
    shp_tracking TEXT,
    shp_sent    TEXT NOT NULL,
    shp_delivered TEXT
);
CREATE TABLE reviews (
    rev_id      INTEGER PRIMARY KEY,
    prod_id     INTEGER NOT NULL REFERENCES products(prod_id),
    cust_id     INTEGER REFERENCES customers(cust_id),
    rev_stars   INTEGER NOT NULL,
    rev_date    TEXT NOT NULL,
    rev_title   TEXT
);
"""

# The category tree: top level → second level → leaves, each leaf with the noun its products are called by, a
# price range and a weight range (kg).
TREE: dict[str, dict[str, dict[str, tuple[str, float, float, float, float]]]] = {
    "Electronics": {
        "Audio": {
            "Headphones": ("Headphones", 19, 349, 0.15, 0.45),
            "Speakers": ("Speaker", 25, 499, 0.4, 6.0),
        },
        "Computers": {
            "Laptops": ("Laptop", 399, 2499, 1.0, 2.6),
            "Monitors": ("Monitor", 109, 899, 2.5, 9.0),
            "Keyboards & Mice": ("Keyboard", 15, 189, 0.1, 1.2),
        },
        "Phones & Accessories": {
            "Chargers": ("Charger", 9, 79, 0.05, 0.4),
            "Phone Cases": ("Case", 7, 59, 0.03, 0.15),
        },
    },
    "Home & Kitchen": {
        "Cookware": {
            "Pans": ("Pan", 18, 229, 0.8, 3.5),
            "Knives": ("Knife", 12, 260, 0.1, 0.6),
        },
        "Small Appliances": {
            "Coffee Makers": ("Coffee Maker", 39, 899, 1.5, 11.0),
            "Blenders": ("Blender", 29, 449, 1.2, 5.5),
            "Kettles": ("Kettle", 19, 149, 0.8, 1.9),
        },
    },
    "Outdoors": {
        "Camping": {
            "Tents": ("Tent", 59, 799, 1.1, 9.0),
            "Sleeping Bags": ("Sleeping Bag", 29, 399, 0.6, 2.4),
        },
        "Cycling": {
            "Helmets": ("Helmet", 25, 249, 0.25, 0.5),
            "Bike Lights": ("Bike Light", 9, 119, 0.05, 0.3),
        },
    },
    "Office": {
        "Stationery": {
            "Notebooks": ("Notebook", 3, 39, 0.1, 0.6),
            "Pens": ("Pen", 1, 89, 0.01, 0.08),
        },
        "Office Furniture": {
            "Desks": ("Desk", 149, 1299, 14.0, 45.0),
            "Office Chairs": ("Chair", 89, 999, 9.0, 24.0),
        },
    },
}

BRANDS = ["Aurel", "Brisk", "Corvid", "Dunmore", "Eldra", "Fjell", "Garnet", "Halvard", "Isola", "Juniper",
          "Kestrel", "Lumo", "Marlow", "Nordby", "Orla", "Pellin", "Quarry", "Rasmus", "Sable", "Tovey"]
MODELS = ["One", "Air", "Pro", "Max", "Lite", "Studio", "Trail", "Classic", "Mini", "Plus", "Go", "Edge", "Core",
          "Flow", "Peak", "Zen", "Arc", "Nova"]

SUPPLIERS = [  # name, country, has an e-mail on file, since
    ("Hanseatic Parts GmbH", "Germany", True, "2014-03-02"),
    ("Pearl River Trading Co.", "China", True, "2015-07-19"),
    ("Lakeshore Wholesale", "USA", True, "2012-11-05"),
    ("Atelier Dumas", "France", False, "2018-01-22"),
    ("Formosa Components", "Taiwan", True, "2016-05-30"),
    ("Mekong Manufacturing", "Vietnam", True, "2019-09-09"),
    ("Sierra Madre Supply", "Mexico", False, "2017-04-14"),
    ("Vistula Metalworks", "Poland", True, "2020-02-03"),
    ("Bluegrass Distributors", "USA", True, "2011-06-27"),
    ("Shenzhen Brightline", "China", True, "2016-10-11"),
    ("Nordkap Outdoor AS", "Norway", True, "2019-03-18"),
    ("Cascadia Goods", "USA", False, "2021-08-01"),
    ("Rhine Valley Kitchenware", "Germany", True, "2013-12-09"),
    ("Osaka Precision", "Japan", True, "2015-02-25"),
    ("Lombardia Design", "Italy", True, "2018-06-06"),
    ("Ningbo Homeware", "China", False, "2020-10-20"),
    ("Great Plains Paper", "USA", True, "2010-04-12"),
    ("Baltic Timber Furniture", "Lithuania", True, "2017-09-28"),
    ("Maple Leaf Imports", "Canada", True, "2014-08-15"),
    ("Saigon Textile & Gear", "Vietnam", False, "2022-01-10"),
    ("Iberia Cycling S.L.", "Spain", True, "2019-05-05"),
    ("Danube Electric", "Austria", True, "2016-03-21"),
]

FIRST = ["Marie", "James", "Sofia", "Liam", "Chloe", "Noah", "Emma", "Lucas", "Olivia", "Ethan", "Ava", "Mason",
         "Isabelle", "Hugo", "Mia", "Oscar", "Léa", "Daniel", "Grace", "Samuel", "Hannah", "Arthur", "Zoe", "Felix",
         "Nora", "Victor", "Alice", "Jonas", "Clara", "Mateo", "Elena", "Tomás", "Priya", "Kenji", "Amara", "Diego",
         "Ingrid", "Rafael", "Yusuf", "Lena"]
LAST = ["Dubois", "Smith", "Martin", "Johnson", "Moreau", "Brown", "Garcia", "Miller", "Lefebvre", "Wilson",
        "Schneider", "Taylor", "Rossi", "Anderson", "Nguyen", "Thomas", "Fischer", "Clark", "Lambert", "Lewis",
        "Novak", "Walker", "Kowalski", "Young", "Bernard", "King", "Okafor", "Wright", "Tanaka", "Hughes",
        "Silva", "Baker", "Petit", "Adams", "Weber", "Nelson", "Costa", "Hill", "Jensen", "Murphy"]

# (city, state as it should read, country); the state is None where the country's addresses carry none.
CITIES = [
    ("New York", "New York", "USA"), ("Buffalo", "New York", "USA"), ("Austin", "Texas", "USA"),
    ("Houston", "Texas", "USA"), ("San Diego", "California", "USA"), ("Oakland", "California", "USA"),
    ("Portland", "Oregon", "USA"), ("Chicago", "Illinois", "USA"), ("Denver", "Colorado", "USA"),
    ("Boston", "Massachusetts", "USA"), ("Seattle", "Washington", "USA"), ("Miami", "Florida", "USA"),
    ("Toronto", "Ontario", "Canada"), ("Ottawa", "Ontario", "Canada"), ("Montreal", "Quebec", "Canada"),
    ("Vancouver", "British Columbia", "Canada"),
    ("Lyon", None, "France"), ("Paris", None, "France"), ("Bordeaux", None, "France"), ("Lille", None, "France"),
    ("Berlin", None, "Germany"), ("Munich", None, "Germany"), ("Hamburg", None, "Germany"),
    ("Manchester", None, "United Kingdom"), ("Leeds", None, "United Kingdom"), ("Bristol", None, "United Kingdom"),
]
CITY_WEIGHTS = [14, 3, 8, 5, 6, 3, 5, 8, 4, 5, 5, 4, 6, 3, 4, 3, 7, 8, 3, 3, 5, 3, 3, 4, 2, 2]
# How clerks typed some states and cities: the value stored instead of the clean one, now and then.
STATE_TYPOS = {"New York": ["NewYork", "new york", "NY"], "California": ["california", "CA"],
               "Texas": ["Texas ", "TX"], "Massachusetts": ["Massachusets"], "Ontario": ["ontario", "ON"],
               "Quebec": ["Québec"], "Illinois": ["IL"]}
CITY_TYPOS = {"Lyon": ["Lyon ", "LYON"], "New York": ["New York ", "new york", "NYC"], "Austin": ["Austin "],
              "Paris": ["paris", "Paris "], "Chicago": ["Chicago "], "Toronto": ["TORONTO"],
              "Montreal": ["Montréal"], "Munich": ["München"]}
STREETS = ["Main St", "Oak Ave", "Maple Rd", "Rue de la République", "Cedar Ln", "High Street", "Hauptstraße",
           "Elm St", "Park Ave", "Rue Victor Hugo", "Lake Dr", "Church Road", "Bahnhofstraße", "Pine St",
           "Station Road", "Boulevard Voltaire", "Sunset Blvd", "King St W", "Rue Sainte-Catherine", "Hill Rd"]

ORDER_STATUSES = ["pending", "paid", "shipped", "delivered", "cancelled", "returned"]
STATUS_WEIGHTS = [4, 5, 8, 70, 8, 5]
CARRIERS = ["UPS", "FedEx", "DHL", "USPS", "Canada Post", "La Poste"]
NOTES = ["leave at the door", "gift - no invoice in the box", "call before delivery", "Fragile!!",
         "back entrance", "deliver after 5pm", "please use recycled packaging"]
REVIEW_TITLES = {5: ["Love it", "Perfect", "Exactly as described", "Great value", "Best purchase this year"],
                 4: ["Very good", "Does the job", "Solid", "Happy with it"],
                 3: ["OK", "Average", "Fine for the price"],
                 2: ["Disappointing", "Not great", "Broke quickly"],
                 1: ["Terrible", "Returned it", "Do not buy"]}


def _day(rng: random.Random, start: datetime.date, end: datetime.date) -> datetime.date:
    return start + datetime.timedelta(days=rng.randrange((end - start).days + 1))


def _money(x: float) -> float:
    """A price as shops write them: whole units ending in .99 or .49, or .00 for big ones."""
    whole = int(x)
    if whole >= 300:
        return float(whole // 10 * 10 + 9)
    return whole + (0.99 if whole % 3 else 0.49)


def build(path: Path) -> None:
    """Write the shop database to `path` (replacing any file there); the same bytes of data on every call."""
    rng = random.Random(SEED)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        with con:
            _fill(con, rng)
    finally:
        con.close()


def _fill(con: sqlite3.Connection, rng: random.Random) -> None:
    # Categories: ids by level so a person reading the table sees the tree (1.. top, 10.. middle, 100.. leaves).
    categories: list[tuple[int, str, int | None, str | None]] = []
    leaves: list[tuple[int, str, tuple[str, float, float, float, float]]] = []
    top_id, mid_id, leaf_id = 1, 10, 100
    for top, mids in TREE.items():
        categories.append((top_id, top, None, top.lower().replace(" & ", "-")))
        for mid, kids in mids.items():
            categories.append((mid_id, mid, top_id, mid.lower().replace(" & ", "-").replace(" ", "-")))
            for leaf, spec in kids.items():
                slug = None if leaf_id % 7 == 3 else leaf.lower().replace(" & ", "-").replace(" ", "-")
                categories.append((leaf_id, leaf, mid_id, slug))
                leaves.append((leaf_id, leaf, spec))
                leaf_id += 1
            mid_id += 1
        top_id += 1
    con.executemany("INSERT INTO categories VALUES (?, ?, ?, ?)", categories)

    suppliers = []
    for i, (name, country, mail, since) in enumerate(SUPPLIERS, start=1):
        email = "orders@" + "".join(ch for ch in name.lower().split()[0] if ch.isalpha()) + ".example" if mail else None
        suppliers.append((i, name, country, email, since))
    con.executemany("INSERT INTO suppliers VALUES (?, ?, ?, ?, ?)", suppliers)

    # Products: 8-13 per leaf, names "<Brand> <Model> <noun>" unique over the shop.
    products: list[tuple[int, str, str, int | None, float, float | None, str, str]] = []
    seen: set[str] = set()
    pid = 1
    for cat, _leaf, (noun, lo, hi, wlo, whi) in leaves:
        for _ in range(rng.randint(8, 13)):
            while True:
                model = rng.choice(MODELS)
                number = rng.choice(["", "", f" {rng.randint(2, 9)}", f" {rng.randrange(100, 900, 50)}"])
                name = f"{rng.choice(BRANDS)} {model}{number} {noun}"
                if name not in seen:
                    seen.add(name)
                    break
            price = _money(lo + (hi - lo) * rng.random() ** 1.7)
            weight = None if rng.random() < 0.12 else round(rng.uniform(wlo, whi), 2)
            added = _day(rng, datetime.date(2019, 1, 1), datetime.date(2024, 6, 30)).isoformat()
            status = rng.choices(["active", "discontinued", "out_of_stock"], [80, 12, 8])[0]
            # A few products were filed under the middle level, as happens when nobody picks a leaf.
            category = cat if rng.random() > 0.04 else next(c[2] for c in categories if c[0] == cat)
            sku = f"{noun[:3].upper()}-{pid:04d}"
            products.append((pid, name, sku, category, price, weight, added, status))
            pid += 1
    con.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?)", products)

    # Which suppliers deliver what: each product from one to three suppliers, at a cost below its price.
    links = []
    for prod in products:
        for sup in rng.sample(range(1, len(SUPPLIERS) + 1), rng.choices([1, 2, 3], [50, 35, 15])[0]):
            cost = round(prod[4] * rng.uniform(0.35, 0.7), 2) if rng.random() > 0.06 else None
            lead = rng.choice([3, 5, 7, 10, 14, 21, 30, 45]) if rng.random() > 0.1 else None
            links.append((prod[0], sup, cost, lead))
    con.executemany("INSERT INTO product_supplier VALUES (?, ?, ?, ?)", links)

    # Customers: unique first + last name pairs.
    customers = []
    names: set[tuple[str, str]] = set()
    while len(customers) < 320:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        if (first, last) in names:
            continue
        names.add((first, last))
        cid = len(customers) + 1
        plain = first.lower().replace("é", "e").replace("á", "a")
        email = None if rng.random() < 0.07 else f"{plain}.{last.lower()}{rng.choice(['', '', str(cid)])}@mail.example"
        phone = None if rng.random() < 0.45 else f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
        since = _day(rng, datetime.date(2018, 1, 1), datetime.date(2024, 9, 30)).isoformat()
        tier = rng.choices(["bronze", "silver", "gold", None], [45, 25, 10, 20])[0]
        customers.append((cid, first, last, email, phone, since, tier))
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?)", customers)

    # Addresses: one shipping address each, and a billing one for about a third, mostly in the same city.
    addresses = []
    home: dict[int, list[int]] = {}
    for cust in customers:
        city, state, country = rng.choices(CITIES, CITY_WEIGHTS)[0]
        kinds = ["shipping"] + (["billing"] if rng.random() < 0.35 else [])
        for kind in kinds:
            if kind == "billing" and rng.random() < 0.2:
                city, state, country = rng.choices(CITIES, CITY_WEIGHTS)[0]
            aid = len(addresses) + 1
            stored_city = rng.choice(CITY_TYPOS[city]) if city in CITY_TYPOS and rng.random() < 0.25 else city
            stored_state = state
            if state in STATE_TYPOS and rng.random() < 0.3:
                stored_state = rng.choice(STATE_TYPOS[state])
            if country in ("USA", "Canada") and rng.random() < 0.03:
                stored_state = None  # left empty on the form
            street = f"{rng.randint(1, 240)} {rng.choice(STREETS)}"
            zip_code = None if rng.random() < 0.05 else _zip(rng, country)
            addresses.append((aid, cust[0], kind, street, stored_city, stored_state, zip_code, country))
            home.setdefault(cust[0], []).append(aid)
    con.executemany("INSERT INTO addresses VALUES (?, ?, ?, ?, ?, ?, ?, ?)", addresses)

    # Orders: more each year as the shop grows; a quarter of the customers order often, some never.
    weights = [rng.choice([0, 1, 1, 2, 3, 3, 6, 10]) for _ in customers]
    orders = []
    years = [(2021, 18), (2022, 24), (2023, 27), (2024, 31)]
    for oid in range(1, 1301):
        cust = rng.choices(customers, weights)[0]
        year = rng.choices([y for y, _ in years], [w for _, w in years])[0]
        date = _day(rng, datetime.date(year, 1, 1), datetime.date(year, 12, 31))
        since = datetime.date.fromisoformat(cust[5])
        if date < since:
            date = _day(rng, since, datetime.date(2024, 12, 31))
        status = rng.choices(ORDER_STATUSES, STATUS_WEIGHTS)[0]
        if date > datetime.date(2024, 12, 15) and status in ("delivered", "returned"):
            status = "shipped"
        ship = rng.choice([a for a in home[cust[0]] if addresses[a - 1][2] == "shipping"])
        if rng.random() < 0.02:
            ship = None
        note = rng.choice(NOTES) if rng.random() < 0.06 else None
        orders.append((oid, cust[0], date.isoformat(), status, ship, note))
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", orders)

    # Order lines: one to five, a product each, at the list price less an occasional discount.
    lines = []
    pweights = [rng.choice([1, 1, 1, 2, 3, 5, 8]) for _ in products]
    for order in orders:
        chosen: list[tuple[int, str, str, int | None, float, float | None, str, str]] = []
        for _ in range(rng.choices([1, 2, 3, 4, 5], [40, 28, 17, 10, 5])[0]):
            prod = rng.choices(products, pweights)[0]
            if prod not in chosen:
                chosen.append(prod)
        for no, prod in enumerate(chosen, start=1):
            qty = rng.choices([1, 2, 3, 4, 6, 10], [70, 15, 6, 4, 3, 2])[0]
            discount = rng.choice([0.05, 0.1, 0.15, 0.2]) if rng.random() < 0.15 else None
            lines.append((order[0], no, prod[0], qty, prod[4], discount))
    con.executemany("INSERT INTO order_lines VALUES (?, ?, ?, ?, ?, ?)", lines)

    # Shipments: for orders that left the warehouse; a few large orders went in two parcels.
    shipments = []
    for order in orders:
        if order[3] not in ("shipped", "delivered", "returned"):
            continue
        placed = datetime.date.fromisoformat(order[2])
        country = addresses[order[4] - 1][7] if order[4] else "USA"
        local = {"USA": ["UPS", "FedEx", "USPS"], "Canada": ["Canada Post", "UPS", "FedEx"],
                 "France": ["La Poste", "DHL"]}.get(country, ["DHL", "UPS"])
        for _ in range(2 if rng.random() < 0.05 else 1):
            sent = placed + datetime.timedelta(days=rng.choice([0, 1, 1, 2, 2, 3, 5]))
            delivered = None
            if order[3] in ("delivered", "returned"):
                delivered = (sent + datetime.timedelta(days=rng.randint(1, 9))).isoformat()
            tracking = None if rng.random() < 0.04 else f"{rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}{rng.randrange(10**9):09d}"
            shipments.append((len(shipments) + 1, order[0], rng.choice(local), tracking, sent.isoformat(), delivered))
    con.executemany("INSERT INTO shipments VALUES (?, ?, ?, ?, ?, ?)", shipments)

    # Reviews: some buyers of delivered orders review what they bought, a few anonymously (no customer).
    reviews = []
    by_order = {o[0]: o for o in orders}
    quality = {p[0]: rng.choice([2.2, 3.0, 3.6, 4.0, 4.3, 4.6]) for p in products}
    done: set[tuple[int, int]] = set()
    for ord_id, _no, prod_id, *_ in lines:
        order = by_order[ord_id]
        if order[3] not in ("delivered", "returned") or rng.random() > 0.4 or (order[1], prod_id) in done:
            continue
        done.add((order[1], prod_id))
        stars = max(1, min(5, round(rng.gauss(quality[prod_id] - (1.2 if order[3] == "returned" else 0), 0.9))))
        date = datetime.date.fromisoformat(order[2]) + datetime.timedelta(days=rng.randint(5, 60))
        title = rng.choice(REVIEW_TITLES[stars]) if rng.random() > 0.15 else None
        cust = order[1] if rng.random() > 0.05 else None
        reviews.append((len(reviews) + 1, prod_id, cust, stars, date.isoformat(), title))
    con.executemany("INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?)", reviews)


def _zip(rng: random.Random, country: str) -> str:
    if country == "USA":
        return f"{rng.randint(1000, 99950):05d}"
    if country == "Canada":
        letters = "ABCEGHJKLMNPRSTVXY"
        return f"{rng.choice(letters)}{rng.randint(0, 9)}{rng.choice(letters)} {rng.randint(0, 9)}{rng.choice(letters)}{rng.randint(0, 9)}"
    if country == "United Kingdom":
        return f"{rng.choice(['M', 'LS', 'BS'])}{rng.randint(1, 20)} {rng.randint(1, 9)}{rng.choice('ABDEFGHJLNPQRSTUWXYZ')}{rng.choice('ABDEFGHJLNPQRSTUWXYZ')}"
    return f"{rng.randint(10000, 99999)}"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: shop.py OUTPUT.db")
    build(Path(sys.argv[1]))
