"""The command table is one description: fstack_redis/commands.json, generated into
the server's arrays by fstack_redis/gen_commands.py at build time. COMMAND
DOCS, COMMAND INFO and COMMAND LIST's filters come from it; the docs' facts (group,
since) and the ACL categories agree with stock redis-server for every command both
have; the generator refuses a description it does not understand, one line per
problem."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis

if TYPE_CHECKING:
    from conftest import ServerPool

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "fstack_redis" / "commands.json"
GEN = ROOT / "fstack_redis" / "gen_commands.py"


def _docs(reply: Any) -> dict[str, dict[str, Any]]:
    """COMMAND DOCS (RESP2: flat name, doc, ...; each doc flat too) as dicts of str."""
    def conv(x: Any) -> Any:
        if isinstance(x, bytes):
            return x.decode()
        if isinstance(x, list) and len(x) % 2 == 0 and all(isinstance(k, bytes) for k in x[::2]):
            return {k.decode(): conv(v) for k, v in zip(x[::2], x[1::2], strict=True)}
        if isinstance(x, list):
            return [conv(v) for v in x]
        return x
    out = conv(reply)
    assert isinstance(out, dict)
    return out


@pytest.fixture
def pair(server_pool: ServerPool) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    """A plain redis-py connection (no response callbacks) to inreplay and to stock Redis."""
    ours = server_pool.get("inreplay")
    stock = server_pool.get("redis")
    a = redis.Redis(host=ours.host, port=ours.port, protocol=2)
    b = redis.Redis(host=stock.host, port=stock.port, protocol=2)
    yield a, b
    a.close()
    b.close()


def _call(r: redis.Redis, *args: str) -> Any:
    """One command's raw reply (redis-py's COMMAND callbacks reshape DOCS and LIST)."""
    conn = r.connection_pool.get_connection()
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def test_docs_cover_every_command_and_subcommand(pair: tuple[redis.Redis, redis.Redis]) -> None:
    ours, _ = pair
    docs = _docs(_call(ours, "COMMAND", "DOCS"))
    assert len(docs) == _call(ours, "COMMAND", "COUNT")
    table = json.loads(TABLE.read_text())
    assert set(docs) == set(table)
    for name, d in docs.items():
        assert d["summary"] and d["since"] and d["group"], name
        subs = table[name].get("subcommands", {})
        assert set(d.get("subcommands", {})) == {f"{name}|{s}" for s in subs}, name
    get = _docs(_call(ours, "COMMAND", "DOCS", "get", "client|list", "nosuch"))
    assert set(get) == {"get", "client|list"}
    assert get["get"] == {"summary": table["get"]["summary"], "since": "1.0.0",
                          "group": "string"}
    assert get["client|list"]["group"] == "connection"
    sample = _docs(_call(ours, "COMMAND", "DOCS", "REPLAY.SAMPLE"))["replay.sample"]
    assert sample["group"] == "module" and sample["module"] == "inreplay"
    assert sample["summary"] == table["replay.sample"]["summary"]


def test_docs_facts_agree_with_stock_redis(pair: tuple[redis.Redis, redis.Redis]) -> None:
    """group and since (facts, unlike the summaries, which are inreplay's own words)."""
    ours, stock = pair
    a = _docs(_call(ours, "COMMAND", "DOCS"))
    b = _docs(_call(stock, "COMMAND", "DOCS"))
    both = set(a) & set(b)
    assert len(both) > 200
    wrong = {n: (a[n]["group"], a[n]["since"], b[n]["group"], b[n]["since"]) for n in both
             if (a[n]["group"], a[n]["since"]) != (b[n]["group"], b[n]["since"])}
    assert not wrong
    for n in both:
        sa, sb = a[n].get("subcommands", {}), b[n].get("subcommands", {})
        for s in set(sa) & set(sb):
            assert sa[s]["since"] == sb[s]["since"], s


def test_list_filters_agree_with_stock_redis(pair: tuple[redis.Redis, redis.Redis]) -> None:
    ours, stock = pair
    mine = {x.decode() for x in _call(ours, "COMMAND", "LIST")}
    theirs = {x.decode() for x in _call(stock, "COMMAND", "LIST")}
    both = mine & theirs
    for cat in ("string", "keyspace", "write", "fast", "dangerous", "pubsub", "scripting",
                "stream", "blocking", "connection"):
        a = {x.decode() for x in _call(ours, "COMMAND", "LIST", "FILTERBY", "ACLCAT", cat)}
        b = {x.decode() for x in _call(stock, "COMMAND", "LIST", "FILTERBY", "ACLCAT", cat)}
        assert a, cat
        assert a & both == b & both, (cat, sorted((a ^ b) & both))
    assert _call(ours, "COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch") == []
    replay = {x.decode() for x in _call(ours, "COMMAND", "LIST", "FILTERBY", "ACLCAT", "replay")}
    # @replay is inreplay's own commands: the replay tables' and the parameter tables'
    assert replay == {n for n in mine if n.startswith(("replay.", "param."))}
    assert {x.decode() for x in _call(ours, "COMMAND", "LIST", "FILTERBY", "MODULE",
                                      "inreplay")} == replay
    assert _call(ours, "COMMAND", "LIST", "FILTERBY", "MODULE", "other") == []
    assert _call(stock, "COMMAND", "LIST", "FILTERBY", "MODULE", "other") == []


def test_replay_sample_is_a_write_command(pair: tuple[redis.Redis, redis.Redis]) -> None:
    info = _call(pair[0], "COMMAND", "INFO", "replay.sample")[0]
    assert b"write" in info[2] and b"readonly" not in info[2]


def _generate(tmp_path: Path, table: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "commands.json"
    src.write_text(json.dumps(table))
    return subprocess.run([sys.executable, str(GEN), str(src), str(tmp_path / "out.inc")],
                          capture_output=True, text=True, timeout=60)


def test_generator_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    table = json.loads(TABLE.read_text())
    ok = _generate(tmp_path, table)
    assert ok.returncode == 0, ok.stderr
    text = (tmp_path / "out.inc").read_text()
    assert text.count('"replay.sample", replaySampleCommand') == 1
    bad = json.loads(TABLE.read_text())
    bad["get"]["flags"] = "readonly quick"           # a flag Redis does not have
    bad["set"]["arity"] = 0                          # no such arity
    del bad["ping"]["summary"]                       # docs are required
    bad["client"]["subcommands"]["list"]["acl"] = "connections"  # a typo'd category
    bad["xread"]["key_specs"][0].pop("range")        # a keyword spec without its range
    bad["echo"]["colour"] = "red"                    # an unknown field
    res = _generate(tmp_path, bad)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert any("get: unknown flag word 'quick'" in x for x in lines), lines
    assert any("set: 'arity' must be a non-zero integer" in x for x in lines), lines
    assert any("ping: 'summary' is required" in x for x in lines), lines
    assert any("client|list: unknown ACL category word 'connections'" in x for x in lines), lines
    assert any("xread key_specs[0]: give exactly one of range" in x for x in lines), lines
    assert any("xread key_specs[0]: a keyword spec finds its keys by a range" in x
               for x in lines), lines
    assert any("echo: unknown field 'colour'" in x for x in lines), lines
    assert len(lines) == 7, lines
