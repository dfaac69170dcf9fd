"""Redis's own unit tests against inreplay: ``make redis-suite``
(tests/redis_suite/run.py) on the kernel stack, every unit.

The runner runs Redis 7.0.15's Tcl test suite (Debian's source package) in
external-server mode against stock redis-server and against inreplay, each unit
against a fresh server, and counts which of the tests stock passes inreplay
passes too. Here: all of the issue's units (about three minutes for both
servers), held to the issue's goal (run.py's GOAL, 97% of what stock passes, in total) and each
unit to the floor measured when the figure was last raised (raise a floor when
the server gets better; never lower one to make a change pass). ``make
redis-suite`` runs the same on every stack this machine has and writes the
README's table.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "tests" / "redis_suite" / "run.py"
_spec = importlib.util.spec_from_file_location("redis_suite_run", RUNNER)
assert _spec is not None and _spec.loader is not None
suite = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = suite  # dataclasses look their module up
_spec.loader.exec_module(suite)

GOAL = suite.GOAL
"""The issue's goal: inreplay passes this share of the tests stock passes, in total."""

# tests inreplay passes of those stock passes, per unit (kernel stack, 16 databases),
# as measured on main: raise as the server grows
FLOORS = {
    "unit/protocol": 25,
    "unit/type/string": 76,
    "unit/type/list": 240,
    "unit/type/hash": 73,
    "unit/type/set": 98,
    "unit/expire": 66,  # its two DEBUG LOADAOF tests pass with the AOF
    "unit/keyspace": 54,
    "unit/multi": 57,
    "unit/pubsub": 29,
    "unit/auth": 0,
    "unit/info-command": 3,
    "unit/introspection": 27,
    "unit/introspection-2": 42,  # MIGRATE (movablekeys) is the one left
    "unit/scripting": 153,  # NOREPLICAS; 'Binary code loading failed' (no string.dump here)
    "unit/functions": 93,
    "unit/type/stream": 72,  # AOF's DEBUG LOADAOF and BGREWRITEAOF included
    "unit/type/stream-cgroups": 51,
    "unit/slowlog": 15,  # MIGRATE's redaction is the one left
    "unit/latency-monitor": 14,
    # the first block only (patches/03-acl-first-block-external.patch); the others need
    # an aclfile set at start; READONLY is not here
    "unit/acl": 71,
    "unit/geo": 59,
    "unit/hyperloglog": 22,  # about two minutes a server: its stress and fuzz tests
    "unit/bitops": 45,
    "unit/bitfield": 16,
}

SAMPLE = """\
[\x1b[0;32;49mok\x1b[0m]: Handle an empty query (0 ms)
[ok]: Handle an empty query (1 ms)
[err]: SETNX target key missing in tests/unit/type/string.tcl
n command 'setnx', with args beginning with: 'novar' 'foobared'
ERR unknown command 'setnx', with args beginning with: 'novar' 'foobared'
    while executing
[err]: GETEX no arguments in tests/unit/type/string.tcl
Expected 'ERR foo' to match 'ERR*wrong number of arguments*' (context: type eval)
[skip]: BLPOP with a huge timeout
[ignore]: Not supported on external server
[ignore]: Tag: needs:repl denied
[err]: n option or number of arguments for CONFIG SET - 'save'
ERR Unknown option or number of arguments for CONFIG SET - 'save'
    while executing
[exception]: Executing test client: ERR DB index is out of range.
ERR DB index is out of range
    while executing
"""


def test_parse_output_counts_every_kind_and_recovers_cut_messages() -> None:
    r = suite.parse_output(SAMPLE)
    assert r.passed == ["Handle an empty query", "Handle an empty query"]
    assert r.failed == ["SETNX target key missing", "GETEX no arguments"]
    # --durable cuts a runtime error's first 10 characters; the trace has them
    assert r.errors["SETNX target key missing"].startswith("ERR unknown command 'setnx'")
    assert r.errors["GETEX no arguments"].startswith("Expected 'ERR foo'")
    assert r.skipped == ["BLPOP with a huge timeout"]
    assert r.ignored == 2
    assert r.block_errors == ["ERR Unknown option or number of arguments for CONFIG SET - 'save'"]
    assert r.exception is not None and "DB index is out of range" in r.exception


def test_failure_causes_group_by_command() -> None:
    assert suite.cause_of("ERR unknown command 'SETNX', with args beginning with: 'a'") \
        == "unknown command 'setnx'"
    assert suite.cause_of("ERR unknown subcommand 'getkeys'. Try COMMAND HELP.") \
        == "unknown subcommand 'COMMAND getkeys'"
    assert suite.cause_of("ERR Unknown option or number of arguments for CONFIG SET - 'save'") \
        == "CONFIG SET save"


def test_compare_counts_only_what_stock_passes() -> None:
    stock = {"u": suite.parse_output("[ok]: a (1 ms)\n[ok]: a (1 ms)\n[ok]: b (1 ms)\n"
                                     "[err]: c in tests/u.tcl\nx\n")}
    other = {"u": suite.parse_output("[ok]: a (1 ms)\n[ok]: c (1 ms)\n[skip]: b\n")}
    v = suite.compare(stock, other, [("b", "hangs")])
    assert (v["stock_passed"], v["passed"]) == (3, 1)
    assert v["units"]["u"]["not_passed"] == ["a", "b"]
    assert v["units"]["u"]["skipped_of_stock_passes"] == ["b"]
    assert "skipped_without_reason" not in v["units"]["u"]
    assert suite.compare(stock, other, [])["units"]["u"]["skipped_without_reason"] == ["b"]


def test_skiplist_has_a_reason_on_every_line(tmp_path: Path) -> None:
    entries = suite.read_skiplist(RUNNER.parent / "skiplist.txt")
    assert all(reason for _, reason in entries)
    bad = tmp_path / "skiplist.txt"
    bad.write_text("# comment\nsome test name\n")
    with pytest.raises(suite.SuiteError, match=r"skiplist.txt:2: expected"):
        suite.read_skiplist(bad)


@pytest.mark.slow
def test_inreplay_passes_the_goal_and_each_unit_its_floor(tmp_path: Path) -> None:
    for tool in ("tclsh8.6", "redis-server"):
        assert shutil.which(tool), f"{tool} is missing (make deps installs it)"
    out = tmp_path / "suite.json"
    r = subprocess.run(
        [sys.executable, str(RUNNER), "--servers", "redis,kernel",
         "--units", ",".join(FLOORS), "--work", str(tmp_path / "work"), "--json", str(out),
         "--unit-timeout", "300"],
        cwd=ROOT, capture_output=True, text=True, timeout=1500, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads(out.read_text())
    stock = summary["servers"]["redis"]["units"]
    for unit in FLOORS:
        assert stock[unit]["exception"] is None and not stock[unit]["timeout"], \
            f"stock redis-server did not run {unit}: {stock[unit]}"
    vs = summary["servers"]["kernel"]["vs_stock"]
    v = vs["units"]
    low = {u: f"{v[u]['passed']} < {floor} of {v[u]['stock_passed']}; first failures: "
              f"{v[u]['not_passed'][:5]}"
           for u, floor in FLOORS.items() if v[u]["passed"] < floor}
    assert not low, f"inreplay fell below its floor: {low}\n{r.stdout}"
    assert vs["passed"] >= GOAL * vs["stock_passed"], \
        f"{vs['passed']} of {vs['stock_passed']} is below {GOAL:.0%}\n{r.stdout}"
