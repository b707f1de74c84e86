"""Random CSV objects for the sync equivalence tests: mixed types, nulls, dates and timestamps in several
spellings, numbers written as text (leading zeros, signs, exponents, 20 digits), booleans in any case,
unicode and quoted text (commas, quotes, newlines), repeated primary keys, and columns whose type a value
far down the file changes (past DuckDB's sniffing sample)."""
from __future__ import annotations

import csv
import io
import random
from dataclasses import dataclass

WORDS = ["Ann", "Bo", "Cy Díaz", "naïve", "Zoë", "東京", "emoji 🙂", "a,b", 'say "hi"', "two\nlines", "  pad ",
         "NULL", "-", ".", "é, ü", "user@example.com", "ß", "x" * 40]
HEADERS = ["Employee ID", "Full Name", "Score", "Active", "Joined", "Seen At", "Zip", "Note", "naïve col", "Amount",
           "Big", "Odd", "Mixed", "Empty", "When", "Größe", "Count", "Ratio"]
KINDS = ["int", "float", "bool", "date", "ts", "zip", "text", "big", "odd", "mixed", "empty", "baddate", "intfloat"]


def _value(rng: random.Random, kind: str) -> str:
    if kind == "int":
        return str(rng.randint(-10**6, 10**6))
    if kind == "float":
        return rng.choice([f"{rng.uniform(-1e3, 1e3):.{rng.randint(1, 6)}f}", f"{rng.uniform(-5, 5):.2e}",
                           "-.5", ".25", "0.0"])
    if kind == "intfloat":
        return str(rng.randint(0, 999)) if rng.random() < 0.9 else f"{rng.randint(0, 99)}.5"
    if kind == "bool":
        return rng.choice(["true", "false", "TRUE", "False"])
    if kind == "date":
        return f"{rng.randint(1990, 2030):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == "baddate":
        return rng.choice(["2024-02-30", "2024-13-01", "2023-02-29", "2024-02-29", "2024-01-01"])
    if kind == "ts":
        base = f"{rng.randint(1990, 2030):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        t = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
        return rng.choice([f"{base}T{t}:00", f"{base} {t}", f"{base}T{t}:05Z", f"{base}T{t}:05+02:00",
                           f"{base} {t}:59.123456", f"{base}T{t}:00-0530", f"{base}T{t}:00z", base])
    if kind == "zip":
        return f"{rng.randint(0, 99999):05d}"
    if kind == "text":
        return rng.choice(WORDS)
    if kind == "big":
        return str(rng.randint(10**17, 10**20))
    if kind == "odd":
        return rng.choice(["+5", "1e5", "-.5", "1.", "01.5", "NaN", "inf", "1,5", " 1", "007", "0", "-0"])
    if kind == "mixed":
        return str(rng.randint(0, 100)) if rng.random() < 0.97 else rng.choice(["abc", "2024-01-01", "true", "1.5"])
    return ""


@dataclass
class Table:
    """A generated source: its objects (name -> CSV text) and the primary key (None: keyed by row)."""

    objects: dict[str, str]
    primary_key: list[str] | None
    columns: list[tuple[str, str]]  # (header, kind)


def _render(header: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def table(seed: int, *, long_rows: int = 0, blank_key: bool = False) -> Table:
    """A random source for ``seed``. ``long_rows``: rows of the first object (0: a few hundred at most);
    past DuckDB's sample, its last row holds a value that changes columns' types. ``blank_key``: a keyed
    source has one row without a key value (the sync must fail)."""
    rng = random.Random(seed)
    names = rng.sample(HEADERS[1:], rng.randint(2, 7))
    columns = [(n, rng.choice(KINDS)) for n in names]
    keyed = rng.random() < 0.6
    key_kind = rng.choice(["int", "zip", "text"]) if keyed else None
    header = (["Employee ID"] if keyed else []) + names
    nulls = {n: rng.choice([0.0, 0.0, 0.1, 0.5]) for n in names}
    objects: dict[str, str] = {}
    for o in range(rng.randint(1, 3)):
        count = long_rows if (o == 0 and long_rows) else rng.randint(0, 300)
        rows = []
        for _ in range(count):
            row = []
            if keyed:
                k = rng.randint(0, max(1, int(count * 0.8)))  # repeats within and across objects
                row.append(str(k) if key_kind == "int" else f"{k:05d}" if key_kind == "zip" else f"k-{k}-é")
            for n, kind in columns:
                row.append("" if rng.random() < nulls[n] else _value(rng, kind))
            rows.append(row)
        if long_rows and o == 0 and rows:  # past the sniffer's sample: another type in the last row
            rows[-1] = rows[-1][:1 if keyed else 0] + [rng.choice(["x", "1.5", "2024-01-01T10:00:00Z", ""])
                                                       for _ in columns]
        if blank_key and keyed and rows:
            rows[rng.randrange(len(rows))][0] = ""
        objects[f"t/{o:02d}.csv"] = _render(header, rows)
    return Table(objects, ["Employee ID"] if keyed else None, columns)


def changed(seed: int, before: Table) -> Table:
    """``before`` with some objects edited (rows changed, dropped, added), one maybe removed, one maybe added."""
    rng = random.Random(seed * 7919 + 1)
    objects = dict(before.objects)
    for name in list(objects):
        roll = rng.random()
        if roll < 0.2 and len(objects) > 1:
            del objects[name]
        elif roll < 0.7:
            lines = list(csv.reader(io.StringIO(objects[name])))
            header, rows = lines[0], lines[1:]
            rows = [r for r in rows if rng.random() > 0.1]
            for r in rows:
                if rng.random() < 0.2:
                    j = rng.randrange(len(r))
                    if not (before.primary_key and j == 0):
                        r[j] = _value(rng, rng.choice(KINDS))
            objects[name] = _render(header, rows)
    if rng.random() < 0.5:
        header = list(csv.reader(io.StringIO(next(iter(before.objects.values())))))[0]
        rows = [[_value(rng, "int") if (before.primary_key and j == 0) else _value(rng, kind)
                 for j, kind in enumerate(["int"] * (1 if before.primary_key else 0) + [k for _, k in before.columns])]
                for _ in range(rng.randint(1, 50))]
        objects["t/99.csv"] = _render(header, rows)
    return Table(objects, before.primary_key, before.columns)
