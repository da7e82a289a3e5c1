"""`clinic`: a small hospital's SQLite database, written for sparqlnav's relational benchmark (our own data).

Departments, doctors (each but the chief supervised by another: `doctors.supervisor_id`), patients, wards,
appointments, drugs (keyed by a text code), prescriptions (keyed by appointment and drug code together), admissions
and a visit log that has no primary key and holds a few rows entered twice. Style: integer surrogate keys,
snake_case names, dates declared DATE (some NULL), low-cardinality text (specialty, rank, status, blood type, drug
class), and `appointments.room`, text that mostly looks like a number ('12', '7') but is not always ('12B', 'n/a').

Everything is drawn from one seeded `random.Random`, so the same file comes out on every build.
"""

from __future__ import annotations

import datetime
import random
import sqlite3
import sys
from pathlib import Path
from typing import NamedTuple

SEED = 20261126
TODAY = datetime.date(2025, 6, 15)  # the day the data was "exported": later appointments are still scheduled

SCHEMA = """
CREATE TABLE departments (
    department_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    building TEXT NOT NULL,
    floor INTEGER NOT NULL,
    phone TEXT,
    opened_on DATE
);
CREATE TABLE doctors (
    doctor_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    specialty TEXT NOT NULL,
    rank TEXT NOT NULL,
    department_id INTEGER NOT NULL REFERENCES departments (department_id),
    supervisor_id INTEGER REFERENCES doctors (doctor_id),
    hired_on DATE,
    email TEXT,
    consultation_fee INTEGER
);
CREATE TABLE patients (
    patient_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    sex TEXT,
    birth_date DATE,
    blood_type TEXT,
    city TEXT,
    phone TEXT,
    primary_doctor_id INTEGER REFERENCES doctors (doctor_id),
    registered_on DATE NOT NULL
);
CREATE TABLE wards (
    ward_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    department_id INTEGER NOT NULL REFERENCES departments (department_id),
    floor INTEGER NOT NULL,
    beds INTEGER NOT NULL,
    extension TEXT
);
CREATE TABLE appointments (
    appointment_id INTEGER PRIMARY KEY,
    patient_id INTEGER NOT NULL REFERENCES patients (patient_id),
    doctor_id INTEGER NOT NULL REFERENCES doctors (doctor_id),
    appointment_date DATE NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    room TEXT,
    billed_amount NUMERIC(8, 2)
);
CREATE TABLE drugs (
    drug_code TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    drug_class TEXT NOT NULL,
    form TEXT NOT NULL,
    unit_price NUMERIC(8, 2) NOT NULL,
    controlled BOOLEAN NOT NULL,
    manufacturer TEXT
);
CREATE TABLE prescriptions (
    appointment_id INTEGER NOT NULL REFERENCES appointments (appointment_id),
    drug_code TEXT NOT NULL REFERENCES drugs (drug_code),
    dosage TEXT NOT NULL,
    frequency TEXT NOT NULL,
    quantity INTEGER NOT NULL,
    refills INTEGER,
    PRIMARY KEY (appointment_id, drug_code)
);
CREATE TABLE admissions (
    admission_id INTEGER PRIMARY KEY,
    patient_id INTEGER NOT NULL REFERENCES patients (patient_id),
    ward_id INTEGER NOT NULL REFERENCES wards (ward_id),
    attending_doctor_id INTEGER NOT NULL REFERENCES doctors (doctor_id),
    admitted_on DATE NOT NULL,
    discharged_on DATE,
    diagnosis TEXT
);
CREATE TABLE visit_log (
    patient_id INTEGER NOT NULL REFERENCES patients (patient_id),
    ward_id INTEGER NOT NULL REFERENCES wards (ward_id),
    visit_date DATE NOT NULL,
    visitor_name TEXT NOT NULL,
    relationship TEXT
);
"""


class Department(NamedTuple):
    """A department as written here, with what its doctors do and see patients for (a NamedTuple, not a dataclass:
    bench/databases/build.py loads this module without registering it, which dataclasses cannot work with)."""

    name: str
    building: str
    floor: int
    phone: str | None
    opened_on: str | None
    specialty: str  # what its doctors are called
    reasons: tuple[str, ...]  # why patients book with it
    weight: int  # its share of appointments


DEPARTMENTS = (
    Department("General Medicine", "Main", 1, "555-0100", "1998-03-02", "general practitioner",
               ("annual check-up", "flu symptoms", "high blood pressure", "diabetes review", "persistent cough",
                "fatigue", "sore throat", "vaccination"), 9),
    Department("Cardiology", "North", 3, "555-0130", "2001-09-17", "cardiologist",
               ("chest pain", "palpitations", "high blood pressure", "follow-up after stent", "shortness of breath"), 5),
    Department("Pediatrics", "South", 2, "555-0120", "1998-03-02", "pediatrician",
               ("ear infection", "vaccination", "fever", "growth check", "asthma review", "rash"), 6),
    Department("Orthopedics", "North", 2, "555-0125", "2005-01-10", "orthopedic surgeon",
               ("knee pain", "back pain", "fracture follow-up", "sprained ankle", "hip pain"), 5),
    Department("Neurology", "North", 4, None, "2009-06-01", "neurologist",
               ("migraine", "numbness", "seizure review", "dizziness", "memory problems"), 3),
    Department("Oncology", "East", 3, "555-0140", "2012-11-05", "oncologist",
               ("chemotherapy review", "lump assessment", "scan results", "pain management"), 3),
    Department("Dermatology", "Main", 2, "555-0110", None, "dermatologist",
               ("eczema", "acne", "mole check", "psoriasis", "rash"), 3),
    Department("Emergency Medicine", "South", 0, "555-0199", "1998-03-02", "emergency physician",
               ("laceration", "fall", "abdominal pain", "burn", "allergic reaction"), 4),
    Department("Obstetrics and Gynecology", "East", 1, "555-0150", "2003-04-22", "obstetrician",
               ("prenatal visit", "postnatal check", "pelvic pain", "contraception advice"), 3),
    Department("Psychiatry", "West", 1, None, "2016-02-15", "psychiatrist",
               ("anxiety", "depression follow-up", "sleep problems", "medication review"), 2),
)

# (code, name, class, form, unit price, controlled, manufacturer)
DRUGS = (
    ("AMX500", "Amoxicillin 500 mg", "antibiotic", "capsule", 0.35, False, "Norvale Pharma"),
    ("AZI250", "Azithromycin 250 mg", "antibiotic", "tablet", 1.20, False, "Norvale Pharma"),
    ("CEF500", "Cefalexin 500 mg", "antibiotic", "capsule", 0.55, False, "Brightwell Labs"),
    ("DOX100", "Doxycycline 100 mg", "antibiotic", "tablet", 0.80, False, None),
    ("AMXS125", "Amoxicillin suspension 125 mg/5 ml", "antibiotic", "syrup", 4.50, False, "Norvale Pharma"),
    ("IBU400", "Ibuprofen 400 mg", "analgesic", "tablet", 0.10, False, "Castleford Generics"),
    ("PAR500", "Paracetamol 500 mg", "analgesic", "tablet", 0.05, False, "Castleford Generics"),
    ("PARS120", "Paracetamol syrup 120 mg/5 ml", "analgesic", "syrup", 3.25, False, "Castleford Generics"),
    ("NAP250", "Naproxen 250 mg", "analgesic", "tablet", 0.25, False, None),
    ("TRA50", "Tramadol 50 mg", "opioid analgesic", "capsule", 0.90, True, "Brightwell Labs"),
    ("MOR10", "Morphine sulfate 10 mg", "opioid analgesic", "tablet", 2.75, True, "Halden Medical"),
    ("COD30", "Codeine phosphate 30 mg", "opioid analgesic", "tablet", 0.60, True, "Halden Medical"),
    ("AML5", "Amlodipine 5 mg", "antihypertensive", "tablet", 0.15, False, "Castleford Generics"),
    ("LIS10", "Lisinopril 10 mg", "antihypertensive", "tablet", 0.20, False, "Castleford Generics"),
    ("BIS5", "Bisoprolol 5 mg", "beta blocker", "tablet", 0.30, False, "Brightwell Labs"),
    ("ATO20", "Atorvastatin 20 mg", "statin", "tablet", 0.40, False, "Norvale Pharma"),
    ("CLO75", "Clopidogrel 75 mg", "antiplatelet", "tablet", 0.65, False, "Halden Medical"),
    ("ASP75", "Aspirin 75 mg", "antiplatelet", "tablet", 0.03, False, None),
    ("WAR5", "Warfarin 5 mg", "anticoagulant", "tablet", 0.45, False, "Halden Medical"),
    ("MET500", "Metformin 500 mg", "antidiabetic", "tablet", 0.12, False, "Castleford Generics"),
    ("INSG100", "Insulin glargine 100 units/ml", "antidiabetic", "injection", 38.00, False, "Sorrel Biologics"),
    ("SAL100", "Salbutamol inhaler 100 mcg", "bronchodilator", "inhaler", 6.50, False, "Brightwell Labs"),
    ("BUD200", "Budesonide inhaler 200 mcg", "corticosteroid", "inhaler", 14.80, False, "Brightwell Labs"),
    ("PRED5", "Prednisolone 5 mg", "corticosteroid", "tablet", 0.22, False, None),
    ("HYD1", "Hydrocortisone cream 1%", "corticosteroid", "cream", 3.90, False, "Castleford Generics"),
    ("BET01", "Betamethasone cream 0.1%", "corticosteroid", "cream", 7.25, False, "Halden Medical"),
    ("EMO500", "Emollient cream 500 g", "emollient", "cream", 5.60, False, None),
    ("ISO20", "Isotretinoin 20 mg", "retinoid", "capsule", 2.40, False, "Sorrel Biologics"),
    ("CET10", "Cetirizine 10 mg", "antihistamine", "tablet", 0.08, False, "Castleford Generics"),
    ("EPI300", "Epinephrine auto-injector 0.3 mg", "adrenergic", "injection", 95.00, False, "Sorrel Biologics"),
    ("SUM50", "Sumatriptan 50 mg", "antimigraine", "tablet", 1.10, False, "Norvale Pharma"),
    ("LEV500", "Levetiracetam 500 mg", "anticonvulsant", "tablet", 0.70, False, "Halden Medical"),
    ("GAB300", "Gabapentin 300 mg", "anticonvulsant", "capsule", 0.50, True, "Brightwell Labs"),
    ("SER50", "Sertraline 50 mg", "antidepressant", "tablet", 0.28, False, "Norvale Pharma"),
    ("FLU20", "Fluoxetine 20 mg", "antidepressant", "capsule", 0.26, False, None),
    ("ZOP75", "Zopiclone 7.5 mg", "hypnotic", "tablet", 0.35, True, "Halden Medical"),
    ("DIA5", "Diazepam 5 mg", "benzodiazepine", "tablet", 0.18, True, "Castleford Generics"),
    ("OND4", "Ondansetron 4 mg", "antiemetic", "tablet", 1.45, False, "Sorrel Biologics"),
    ("FOL400", "Folic acid 400 mcg", "supplement", "tablet", 0.04, False, None),
    ("FER200", "Ferrous sulfate 200 mg", "supplement", "tablet", 0.06, False, "Castleford Generics"),
    ("OME20", "Omeprazole 20 mg", "proton pump inhibitor", "capsule", 0.14, False, "Norvale Pharma"),
    ("TAM20", "Tamoxifen 20 mg", "antineoplastic", "tablet", 1.85, False, "Sorrel Biologics"),
)

# What a visit for a reason may be prescribed (a few reasons get nothing); dosage and frequency per drug.
REASON_DRUGS = {
    "flu symptoms": ("PAR500", "IBU400"), "persistent cough": ("AMX500", "AZI250", "SAL100"),
    "sore throat": ("AMX500", "PAR500"), "high blood pressure": ("AML5", "LIS10", "BIS5"),
    "diabetes review": ("MET500", "INSG100"), "fatigue": ("FER200",), "chest pain": ("ASP75", "CLO75", "ATO20"),
    "palpitations": ("BIS5",), "follow-up after stent": ("CLO75", "ASP75", "ATO20"), "shortness of breath": ("SAL100",),
    "ear infection": ("AMXS125", "PARS120"), "fever": ("PARS120",), "asthma review": ("SAL100", "BUD200"),
    "rash": ("HYD1", "CET10"), "knee pain": ("IBU400", "NAP250"), "back pain": ("NAP250", "TRA50", "DIA5"),
    "fracture follow-up": ("PAR500", "COD30"), "sprained ankle": ("IBU400",), "hip pain": ("NAP250", "TRA50"),
    "migraine": ("SUM50", "IBU400"), "numbness": ("GAB300",), "seizure review": ("LEV500",),
    "dizziness": ("OND4",), "chemotherapy review": ("OND4", "TAM20"), "pain management": ("MOR10", "TRA50", "PAR500"),
    "eczema": ("EMO500", "HYD1", "BET01"), "acne": ("DOX100", "ISO20"), "psoriasis": ("BET01", "EMO500"),
    "laceration": ("CEF500", "PAR500"), "fall": ("PAR500", "COD30"), "abdominal pain": ("OME20",),
    "burn": ("PAR500", "HYD1"), "allergic reaction": ("CET10", "EPI300", "PRED5"), "prenatal visit": ("FOL400", "FER200"),
    "pelvic pain": ("IBU400",), "anxiety": ("SER50", "DIA5"), "depression follow-up": ("SER50", "FLU20"),
    "sleep problems": ("ZOP75",), "medication review": ("SER50", "FLU20"),
}
DOSAGE = {code: name.split(" ", 1)[1] if any(ch.isdigit() for ch in name) else "as directed"
          for code, name, *_ in DRUGS}
FREQUENCIES = ("once daily", "twice daily", "three times daily", "as needed", "at night")

WARDS = (  # (name, department, floor, beds, extension)
    ("Elm Ward", "General Medicine", 1, 24, "1104"), ("Oak Ward", "General Medicine", 1, 20, "1108"),
    ("Heart Care Unit", "Cardiology", 3, 14, "3120"), ("Cedar Ward", "Cardiology", 3, 18, "3125"),
    ("Rainbow Ward", "Pediatrics", 2, 16, "2210"), ("Bone and Joint Ward", "Orthopedics", 2, 22, "2140"),
    ("Stroke Unit", "Neurology", 4, 10, "n/a"), ("Willow Ward", "Oncology", 3, 12, "3301"),
    ("Day Therapy Unit", "Oncology", 3, 8, None), ("Observation Ward", "Emergency Medicine", 0, 12, "0900"),
    ("Maternity Ward", "Obstetrics and Gynecology", 1, 20, "1501"), ("Birch Ward", "Psychiatry", 1, 15, "12"),
)

DIAGNOSES = {
    "General Medicine": ("pneumonia", "dehydration", "urinary tract infection", "cellulitis"),
    "Cardiology": ("myocardial infarction", "heart failure", "atrial fibrillation", "angina"),
    "Pediatrics": ("bronchiolitis", "gastroenteritis", "asthma attack", "febrile convulsion"),
    "Orthopedics": ("hip fracture", "knee replacement", "spinal fusion", "wrist fracture"),
    "Neurology": ("stroke", "seizure", "transient ischaemic attack"),
    "Oncology": ("chemotherapy cycle", "neutropenic fever", "palliative care"),
    "Emergency Medicine": ("head injury", "chest pain observation", "overdose", "fall"),
    "Obstetrics and Gynecology": ("childbirth", "caesarean section", "pre-eclampsia"),
    "Psychiatry": ("acute psychosis", "severe depression", "bipolar episode"),
}

FIRST_F = ("Amelia", "Grace", "Olivia", "Sofia", "Hannah", "Chloe", "Maya", "Leah", "Ruth", "Irene", "Nadia", "Priya",
           "Mei", "Fatima", "Elena", "Clara", "Zoe", "Ingrid", "Beatriz", "Aisha", "Joanna", "Helen", "Lucy", "Tara",
           "Keiko", "Rosa", "Yasmin", "Margaret", "Sandra", "Naomi", "Vera", "Agnes", "Lena", "Diana", "Eva",
           "Martha", "Noor", "Ines", "Freya", "Alice")
FIRST_M = ("James", "Oliver", "Samuel", "Daniel", "Ethan", "Lucas", "Omar", "Ravi", "Kenji", "Mateo", "Tomas",
           "Felix", "Hugo", "Arjun", "Victor", "Peter", "George", "Henry", "Isaac", "Noah", "David", "Marcus", "Leon",
           "Adrian", "Walter", "Frank", "Ibrahim", "Jonas", "Carlos", "Paul", "Simon", "Owen", "Aaron", "Luis",
           "Dmitri", "Theo", "Bruno", "Caleb", "Elias", "Martin")
LAST = ("Abbott", "Achebe", "Alvarez", "Andersen", "Baker", "Banerjee", "Barros", "Becker", "Bennett", "Bishop",
        "Brennan", "Castillo", "Chandra", "Chen", "Clarke", "Costa", "Dalton", "Demir", "Dixon", "Donovan", "Duarte",
        "Ellis", "Eriksen", "Farrell", "Fischer", "Fontaine", "Foster", "Gallagher", "Garcia", "Gupta", "Haas",
        "Hale", "Hansen", "Harper", "Hayes", "Horvat", "Hughes", "Ibarra", "Iqbal", "Jansen", "Jensen", "Kaplan",
        "Keller", "Kim", "Kowalski", "Larsen", "Lindqvist", "Lopez", "Lowe", "Maddox", "Marsh", "Mendes", "Meyer",
        "Moreau", "Murphy", "Nakamura", "Navarro", "Nguyen", "Novak", "Okafor", "Olsen", "Ortega", "Osei", "Palmer",
        "Park", "Patel", "Pereira", "Quinn", "Ramos", "Reyes", "Rossi", "Russo", "Sato", "Schmidt", "Sharma",
        "Silva", "Sokolov", "Stone", "Sullivan", "Tanaka", "Thornton", "Torres", "Tran", "Vance", "Varga", "Vogel",
        "Walsh", "Weber", "Whitaker", "Wilde", "Yamada", "Young", "Zielinski", "Zhou")
CITIES = ("Riverton", "Riverton", "Riverton", "Riverton", "Millbrook", "Millbrook", "Ashford", "Ashford", "Lakeside",
          "Oakham", "Fernley", "Harwick")
BLOOD_TYPES = (("O+", 37), ("A+", 30), ("B+", 9), ("O-", 7), ("A-", 6), ("AB+", 4), ("B-", 2), ("AB-", 1))
RELATIONSHIPS = ("spouse", "child", "parent", "sibling", "friend")
RANKS_BELOW_HEAD = ("consultant", "consultant", "registrar", "registrar", "resident")


def _day(start: datetime.date, end: datetime.date, rng: random.Random) -> datetime.date:
    return start + datetime.timedelta(days=rng.randrange((end - start).days + 1))


class _Names:
    """Full names handed out once each, so doctors and patients never share one."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[tuple[str, str]] = set()

    def take(self, sex: str | None) -> tuple[str, str]:
        pool = FIRST_F if sex == "F" else FIRST_M if sex == "M" else FIRST_F + FIRST_M
        while True:
            name = (self.rng.choice(pool), self.rng.choice(LAST))
            if name not in self.used:
                self.used.add(name)
                return name


def build(path: Path) -> None:
    """Write the clinic database to `path` (replacing any file there), the same rows on every run."""
    rng = random.Random(SEED)
    names = _Names(rng)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        _fill(con, rng, names)
        con.commit()
    finally:
        con.close()


def _fill(con: sqlite3.Connection, rng: random.Random, names: _Names) -> None:
    dept_id = {d.name: i for i, d in enumerate(DEPARTMENTS, start=1)}
    con.executemany("INSERT INTO departments VALUES (?, ?, ?, ?, ?, ?)",
                    [(i, d.name, d.building, d.floor, d.phone, d.opened_on) for i, d in enumerate(DEPARTMENTS, 1)])

    # Doctors: a chief (who also heads General Medicine), a head per department under the chief, and four to eight
    # more per department under its head or one of its consultants.
    doctors: list[tuple[object, ...]] = []
    by_dept: dict[str, list[int]] = {d.name: [] for d in DEPARTMENTS}

    def add_doctor(dept: Department, rank: str, supervisor: int | None) -> int:
        doctor_id = len(doctors) + 1
        sex = rng.choice("FM")
        first, last = names.take(sex)
        hired = None if rng.random() < 0.08 else _day(datetime.date(1995 if rank == "head" else 2008, 1, 1),
                                                        datetime.date(2024, 9, 1), rng).isoformat()
        email = None if rng.random() < 0.15 else f"{first[0].lower()}.{last.lower()}@clinic.example"
        fee = {"head": 180, "consultant": 150, "registrar": 110, "resident": 80}[rank] + rng.choice((0, 10, 20, -10))
        doctors.append((doctor_id, first, last, dept.specialty, "consultant" if rank == "head" else rank,
                        dept_id[dept.name], supervisor, hired, email, None if rng.random() < 0.05 else fee))
        by_dept[dept.name].append(doctor_id)
        return doctor_id

    chief = add_doctor(DEPARTMENTS[0], "head", None)
    heads = {DEPARTMENTS[0].name: chief}
    for dept in DEPARTMENTS[1:]:
        heads[dept.name] = add_doctor(dept, "head", chief)
    for dept in DEPARTMENTS:
        consultants = [heads[dept.name]]
        for _ in range(rng.randint(3, 7)):
            rank = rng.choice(RANKS_BELOW_HEAD)
            supervisor = heads[dept.name] if rank == "consultant" else rng.choice(consultants)
            new = add_doctor(dept, rank, supervisor)
            if rank == "consultant":
                consultants.append(new)
    con.executemany("INSERT INTO doctors VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", doctors)

    # Patients.
    patients: list[tuple[object, ...]] = []
    for patient_id in range(1, 641):
        sex = "F" if rng.random() < 0.52 else "M"
        first, last = names.take(sex)
        birth = _day(datetime.date(1930, 1, 1), datetime.date(2024, 12, 31), rng)
        registered = max(birth, _day(datetime.date(2010, 1, 1), datetime.date(2025, 5, 31), rng))
        child = (TODAY - birth).days < 16 * 365
        gp_pool = by_dept["Pediatrics" if child else "General Medicine"]
        patients.append((
            patient_id, first, last,
            None if rng.random() < 0.02 else sex,
            None if rng.random() < 0.06 else birth.isoformat(),
            None if rng.random() < 0.15 else rng.choices([b for b, _ in BLOOD_TYPES], [w for _, w in BLOOD_TYPES])[0],
            None if rng.random() < 0.04 else rng.choice(CITIES),
            None if rng.random() < 0.2 else f"555-{rng.randrange(2000, 9999)}",
            None if rng.random() < 0.12 else rng.choice(gp_pool),
            registered.isoformat(),
        ))
    con.executemany("INSERT INTO patients VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", patients)

    # Wards.
    ward_rows = [(i, name, dept_id[dept], floor, beds, ext) for i, (name, dept, floor, beds, ext) in enumerate(WARDS, 1)]
    con.executemany("INSERT INTO wards VALUES (?, ?, ?, ?, ?, ?)", ward_rows)
    wards_of = {d.name: [w[0] for w in ward_rows if w[2] == dept_id[d.name]] for d in DEPARTMENTS}

    # Appointments and their prescriptions.
    birth_of = {p[0]: (datetime.date.fromisoformat(str(p[4])) if p[4] else None) for p in patients}
    sex_of = {p[0]: p[3] for p in patients}
    registered_of = {p[0]: datetime.date.fromisoformat(str(p[9])) for p in patients}
    seeing = {d.name: [i for i in by_dept[d.name] if doctors[i - 1][4] != "resident" or rng.random() < 0.5]
              for d in DEPARTMENTS}
    fee_of = {d[0]: d[9] for d in doctors}
    appointments: list[tuple[object, ...]] = []
    prescriptions: list[tuple[object, ...]] = []
    dates = sorted(_day(datetime.date(2021, 1, 4), datetime.date(2025, 9, 30), rng) for _ in range(2600))
    for appointment_id, when in enumerate(dates, start=1):
        patient = rng.randrange(1, len(patients) + 1)
        while registered_of[patient] > when:
            patient = rng.randrange(1, len(patients) + 1)
        birth = birth_of[patient]
        child = birth is not None and (when - birth).days < 16 * 365
        choices = [d for d in DEPARTMENTS if (d.name != "Pediatrics" or child) and
                   (d.name != "Obstetrics and Gynecology" or (sex_of[patient] == "F" and not child))]
        dept = DEPARTMENTS[2] if child and rng.random() < 0.7 else rng.choices(choices, [d.weight for d in choices])[0]
        doctor = rng.choice(seeing[dept.name])
        if when > TODAY:
            status = "scheduled"
        else:
            status = rng.choices(("completed", "cancelled", "no-show"), (86, 9, 5))[0]
        reason = None if rng.random() < 0.04 else rng.choice(dept.reasons)
        roll = rng.random()
        room = "n/a" if roll < 0.07 else f"{rng.randint(1, 14)}B" if roll < 0.12 else str(rng.randint(1, 24))
        fee = fee_of[doctor]
        billed = None
        if status == "completed" and fee is not None:
            billed = fee + rng.choice((0, 0, 0, 12.5, 25, 42.5, 60))
        elif status == "no-show" and rng.random() < 0.5:
            billed = 25.0
        appointments.append((appointment_id, patient, doctor, when.isoformat(), status, reason, room, billed))
        if status == "completed" and reason in REASON_DRUGS and rng.random() < 0.8:
            options = REASON_DRUGS[reason]
            for code in rng.sample(options, rng.randint(1, min(2, len(options)))):
                frequency = rng.choice(FREQUENCIES)
                quantity = rng.choice((7, 14, 21, 28, 30, 56, 60)) if code not in ("SAL100", "BUD200", "EPI300",
                                                                                    "INSG100") else rng.choice((1, 2))
                refills = None if rng.random() < 0.25 else rng.choice((0, 0, 0, 1, 2, 3))
                prescriptions.append((appointment_id, code, DOSAGE[code], frequency, quantity, refills))
    con.executemany("INSERT INTO appointments VALUES (?, ?, ?, ?, ?, ?, ?, ?)", appointments)
    con.executemany("INSERT INTO drugs VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(c, n, k, f, p, int(ctl), m) for c, n, k, f, p, ctl, m in DRUGS])
    con.executemany("INSERT INTO prescriptions VALUES (?, ?, ?, ?, ?, ?)", prescriptions)

    # Admissions and the visits patients had during them (a few visits logged twice, as happens at a front desk).
    admissions: list[tuple[object, ...]] = []
    visits: list[tuple[object, ...]] = []
    ward_dept = {w[0]: DEPARTMENTS[int(str(w[2])) - 1].name for w in ward_rows}
    for _ in range(320):
        ward = rng.choice([w for listed in wards_of.values() for w in listed])
        dept = ward_dept[ward]
        patient = rng.randrange(1, len(patients) + 1)
        birth = birth_of[patient]
        admitted = _day(max(datetime.date(2021, 1, 1), registered_of[patient]), TODAY, rng)
        if dept == "Pediatrics" and (birth is None or (admitted - birth).days >= 16 * 365):
            continue  # only children on the children's ward
        if dept == "Obstetrics and Gynecology" and (sex_of[patient] != "F" or birth is None
                                                    or (admitted - birth).days < 16 * 365):
            continue  # and only women on the maternity ward
        stay = rng.choice((1, 1, 2, 2, 3, 3, 4, 5, 6, 8, 10, 14, 21))
        discharged = admitted + datetime.timedelta(days=stay)
        out = None if discharged > TODAY else discharged.isoformat()
        diagnosis = None if rng.random() < 0.05 else rng.choice(DIAGNOSES[dept])
        number = len(admissions) + 1
        admissions.append((number, patient, ward, rng.choice(by_dept[dept]), admitted.isoformat(), out, diagnosis))
        family = rng.choice(LAST) if rng.random() < 0.3 else str(patients[patient - 1][2])
        for _ in range(rng.choice((0, 1, 1, 2, 3, 4))):
            visitor = f"{rng.choice(FIRST_F + FIRST_M)} {family}"
            on = admitted + datetime.timedelta(days=rng.randint(0, stay))
            row = (patient, ward, min(on, TODAY).isoformat(), visitor,
                   None if rng.random() < 0.1 else rng.choice(RELATIONSHIPS))
            visits.append(row)
            if rng.random() < 0.04:
                visits.append(row)
    con.executemany("INSERT INTO admissions VALUES (?, ?, ?, ?, ?, ?, ?)", admissions)
    rng.shuffle(visits)
    con.executemany("INSERT INTO visit_log VALUES (?, ?, ?, ?, ?)", visits)


def main(argv: list[str]) -> int:
    """Build the database at the path given on the command line."""
    if len(argv) != 2:
        print(f"usage: {argv[0]} PATH.db", file=sys.stderr)
        return 2
    build(Path(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
