"""bench/memfloor's candidate layouts and bench/report.py's judges of the layout goals.

memfloor models each candidate layout of a sampled item's path (today's K = 8 tree,
record and item; the record folded into the item; leaf blocks with records; K = 16 inner
levels; combinations) and times the cache lines a draw of each touches. This checks that
every candidate runs, alone and all together, with the lines per draw its layout implies,
and that the report turns given floors and server times into PASS and NOT MET. Timed
figures are judged in the benchmark, never here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402

MEMFLOOR = ROOT / "build" / "bench" / "memfloor"
ITEMS = 3000  # depth 4 at K = 8 (8^4 = 4,096), 3 at K = 16; 8^3 < 3,000 leaf blocks of 8
# the layouts and the lines one draw of a 128 B item touches in each at 3,000 items:
# tree blocks (one line per K = 8 block, two per K = 16 block) + record + item lines
LINES = {
    "today": 4 + 1 + 2,
    "fold": 4 + 1 + 3,  # the 8-byte header pushes a 128 B item onto a third line
    "leafrec": 4 + 1 + 3,
    "leafrec16": 4 + 1 + 2,
    "leafrec8": 4 + 1 + 2,
    "k16": 3 * 2 + 1 + 2,
    "k16inner": 3 * 2 + 1 + 1 + 2,  # three K = 16 levels over the blocks of 8 leaves
    "k16inner-leafrec": 3 * 2 + 1 + 1 + 3,
    "k16-fold": 3 * 2 + 1 + 3,
    "norecord": 4 + 2,  # a bound: no record read at all
}
EXACT = {"today", "fold", "leafrec", "leafrec16", "leafrec8", "norecord"}  # the K = 8 sums


def memfloor(*args: str) -> dict[str, Any]:
    if not MEMFLOOR.is_file():
        pytest.skip(f"no {MEMFLOOR}: meson compile -C build")
    r = subprocess.run([str(MEMFLOOR), "--items", str(ITEMS), "--reps", "40", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def sane(lay: dict[str, Any]) -> None:
    for k in ("sample_us", "tree_us", "items_us", "update_us"):
        assert 0 < lay[k] < 1e5, (k, lay)
    assert lay["distinct_lines"] <= lay["lines_per_draw"]


@pytest.mark.parametrize("name", sorted(LINES))
def test_each_layout_alone(name: str) -> None:
    doc = memfloor("--layout", name)
    assert doc["layout"] == name and list(doc["layouts"]) == [name]
    lay = doc["layouts"][name]
    sane(lay)
    assert lay["lines_per_draw"] == LINES[name]
    assert lay["exact"] == (name in EXACT)
    assert lay["bound"] == (name == "norecord")
    assert doc["sample_us"] == lay["sample_us"] and doc["pow_us"] > 0


def test_all_layouts_in_the_same_passes() -> None:
    doc = memfloor("--layout", "all")
    assert set(doc["layouts"]) == set(LINES)
    assert doc["layout"] == "today" and doc["fanout"] == 8 and doc["depth"] == 4
    for name, lay in doc["layouts"].items():
        sane(lay)
        assert lay["lines_per_draw"] == LINES[name], name
    assert doc["layouts"]["k16"]["depth"] == 3 and doc["layouts"]["k16inner"]["depth"] == 4
    # the top-level figures are today's, as bench/server_time.py and the report read them
    assert doc["sample_us"] == doc["layouts"]["today"]["sample_us"]


def test_default_is_todays_layout_and_bad_names_fail() -> None:
    doc = memfloor()
    assert list(doc["layouts"]) == ["today"] and doc["fanout"] == 8
    r = subprocess.run([str(MEMFLOOR), "--layout", "k7"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown layout 'k7'" in r.stderr


def floors(ratios: dict[str, float], rounds: int = 5) -> list[dict[str, Any]]:
    """memfloor --layout all at 100k and 2M items in each round: today's SAMPLE floor 40 µs
    (UPDATE 20 + pow 10), each candidate at its given ratio of it."""
    out = []
    for r in range(rounds):
        for items in (100_000, 2_000_000):
            lays = {"today": {"sample_us": 40.0, "update_us": 20.0}}
            lays |= {n: {"sample_us": 40.0 * x, "update_us": 20.0} for n, x in ratios.items()}
            out.append({"round": r, "items": items, "item_bytes": 128, "batch": 512,
                        "fanout": 8, "depth": 7, "sample_us": 40.0, "tree_us": 20.0,
                        "items_us": 10.0, "update_us": 20.0, "pow_us": 10.0, "layouts": lays})
    return out


def test_layout_goal_judged() -> None:
    goal = report.layout_goal(floors({"leafrec": 0.93, "k16": 1.2, "fold": 1.1}))
    assert goal.ok is False
    line = goal.line()
    assert line.startswith("- **NOT MET** — the best candidate layout's SAMPLE 512 floor ≤ 0.75×")
    assert "leafrec 0.93× at 100,000 items, 0.93× at 2,000,000 items (median of 5 rounds)" in line
    assert "tree lines per draw fixed by exactness" in line
    goal = report.layout_goal(floors({"leafrec": 0.7, "k16": 1.2}))
    assert goal.ok is True and "leafrec 0.70×" in goal.line() and "cause" not in goal.line()
    # judged at the size where the candidate does worst
    doc = floors({"leafrec": 0.7})
    for f in doc:
        if f["items"] == 2_000_000:
            f["layouts"]["leafrec"]["sample_us"] = 40.0 * 0.8
    assert report.layout_goal(doc).ok is False
    # a bound is shown but never judged: a floor nothing can keep a table in cannot pass
    doc = floors({"leafrec": 0.93, "norecord": 0.6})
    for f in doc:
        f["layouts"]["norecord"]["bound"] = True
    goal = report.layout_goal(doc)
    assert goal.ok is False and "norecord (a bound, not a layout) 0.60×" in goal.line()
    # an older floor (no candidates) is not measured, not passed
    for f in doc:
        del f["layouts"]
    assert report.layout_goal(doc).ok is None


def server_doc(sample: list[float], update: list[float]) -> dict[str, Any]:
    """server_time.py's JSON: round r's SAMPLE and UPDATE at both sizes, and the floors."""
    rows = [{"round": r, "tree": "layout", "items": items, "item_bytes": 128, "batch": 512,
             "packed_us": s, "plain_us": s + 30, "update_us": u}
            for r, (s, u) in enumerate(zip(sample, update, strict=True))
            for items in (100_000, 2_000_000)]
    return {"calls": 300, "rows": rows, "floor": floors({"leafrec": 0.95}, len(sample)),
            "machine": {"cpus": 2, "python": "3.11", "loadavg_end": 1.0}}


def test_server_at_floor_judged() -> None:
    # floors: SAMPLE 40 µs, UPDATE 20 + 10 µs
    samp, upd = report.at_floor_goals(server_doc([44, 46, 47, 45, 48], [33, 34, 35, 36, 30]))
    assert samp.ok is True and upd.ok is True
    assert "worst 1.20× (round 4, 2,000,000 items), median 1.15× over 5 rounds" in samp.line()
    # one round over the line is a NOT MET, with the worst ratio
    samp, upd = report.at_floor_goals(server_doc([44, 60, 47, 45, 48], [33, 34, 35, 37, 30]))
    assert samp.ok is False and "worst 1.50× (round 1" in samp.line()
    assert upd.ok is False and "worst 1.23× (round 3" in upd.line()
    assert samp.line().startswith("- **NOT MET** — server time of REPLAY.SAMPLE 512")
    # too few rounds cannot pass
    samp, _ = report.at_floor_goals(server_doc([44, 44, 44], [30, 30, 30]))
    assert samp.ok is False and "only 3 rounds, the goal asks for 5" in samp.line()


def test_goals_in_the_report() -> None:
    text = report.server_sample_section(server_doc([44, 60, 47, 45, 48], [33, 34, 35, 36, 30]))
    assert "- **NOT MET** — server time of REPLAY.SAMPLE 512 (the better of PACKED and plain)" \
        in text
    assert "- **PASS** — server time of REPLAY.UPDATE 512 ≤ 1.2×" in text
    assert "- **NOT MET** — the best candidate layout's SAMPLE 512 floor" in text
    assert "leafrec 0.95×" in text


def with_in_cache(doc: dict[str, Any], sample: float, update: float) -> dict[str, Any]:
    """server_time.py --in-cache 4096: the same commands on a table that stays in the
    caches, every round; its floor SAMPLE 3 µs, UPDATE 1 + pow 10 µs (and a layout far
    below today's, which must not count for the layout goal)."""
    rounds = sorted({r["round"] for r in doc["rows"]})
    doc["rows"] += [{"round": r, "tree": "layout", "items": 4096, "item_bytes": 128,
                     "batch": 512, "in_cache": True, "packed_us": sample,
                     "plain_us": sample + 5, "update_us": update} for r in rounds]
    doc["floor"] += [{"round": r, "items": 4096, "item_bytes": 128, "batch": 512,
                      "fanout": 8, "depth": 4, "in_cache": True, "sample_us": 3.0,
                      "tree_us": 1.0, "items_us": 1.0, "update_us": 1.0, "pow_us": 10.0,
                      "layouts": {"today": {"sample_us": 3.0, "update_us": 1.0},
                                  "leafrec": {"sample_us": 0.3, "update_us": 1.0}}}
                     for r in rounds]
    return doc


def test_in_cache_table_is_the_cause_not_a_round() -> None:
    doc = with_in_cache(server_doc([44, 60, 47, 45, 48], [33, 34, 35, 37, 30]), 20.0, 17.0)
    samp, upd = report.at_floor_goals(doc)
    # the in-cache rows (20 µs over a 3 µs floor: 6.7×) are not the worst round
    assert samp.ok is False and "worst 1.50× (round 1, 2,000,000 items)" in samp.line()
    assert "over 5 rounds" in samp.line()
    # they are the cause: 17 µs of work the floor leaves out, 0.42× of the 40 µs floor
    assert ("cause: the command's own work, not its misses: on a table of 4,096 items, "
            "whose lines stay in the caches, it takes 20.0 µs where its floor takes 3.0 µs, "
            "so 17.0 µs of the descent's compares") in samp.line()
    assert "that work alone is 0.42× the floor where the goal leaves 0.20×" in samp.line()
    assert upd.ok is False and "it takes 17.0 µs where its floor takes 11.0 µs, so 6.0 µs" \
        in upd.line()
    # a PASS names no cause; a NOT MET without the table says the cause was not measured
    ok, _ = report.at_floor_goals(with_in_cache(
        server_doc([44, 46, 47, 45, 48], [33, 34, 35, 36, 30]), 20.0, 17.0))
    assert ok.ok is True and "cause" not in ok.line()
    samp, _ = report.at_floor_goals(server_doc([44, 60, 47, 45, 48], [33, 34, 35, 37, 30]))
    assert "cause not measured: no in-cache table in this run" in samp.line()
    # the layout goal ignores the in-cache floor (its leafrec at 0.1× would pass it)
    assert report.layout_goal(doc["floor"]).ok is False
    text = report.server_sample_section(doc)
    assert "| 4,096 (in cache) | 20.0 | 25.0 | 17.0 |" in text
