"""The configuration table: CONFIG GET/SET against stock redis-server 7.0.15 (values,
aliases, units, errors, several at once, all or nothing), the encoding limits taking
effect, and pyctl's defaults and bounds agreeing with the C table.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import RespError

from pyctl import config
from pyctl.config import ConfigError, ServerConfig

ROOT = Path(__file__).resolve().parent.parent

if TYPE_CHECKING:
    from conftest import RawConn, ServerPool, ServerProcess

# Redis's parameters Redis's own test units set or read, with Redis's defaults.
REDIS_PARAMS = (
    "save", "appendonly", "appendfsync", "list-max-listpack-size", "list-max-ziplist-size",
    "list-compress-depth", "set-max-intset-entries", "hash-max-listpack-entries",
    "hash-max-ziplist-entries", "hash-max-listpack-value", "hash-max-ziplist-value",
    "zset-max-listpack-entries", "zset-max-ziplist-entries", "zset-max-listpack-value",
    "zset-max-ziplist-value", "stream-node-max-bytes", "stream-node-max-entries",
    "notify-keyspace-events", "lazyfree-lazy-eviction", "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del", "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush",
    "activerehashing", "latency-tracking", "repl-backlog-size", "repl-ping-replica-period",
    "repl-ping-slave-period", "replica-serve-stale-data", "slave-serve-stale-data",
    "replica-read-only", "slave-read-only", "min-replicas-to-write", "min-slaves-to-write",
    "slowlog-log-slower-than", "slowlog-max-len", "maxmemory-policy", "lua-time-limit",
    "busy-reply-threshold", "loglevel", "sanitize-dump-payload", "daemonize", "maxmemory",
    "maxclients", "timeout", "tcp-keepalive", "proto-max-bulk-len", "client-query-buffer-limit",
    "tcp-backlog", "databases", "maxmemory-clients", "maxmemory-samples", "replicaof",
    "slaveof", "key-load-delay", "rdb-key-save-delay", "maxmemory-eviction-tenacity",
)  # fmt: skip

# Redis's defaults, to put the pooled servers back after each test.
RESTORE = (
    "appendfsync", "everysec", "list-max-listpack-size", "-2", "list-compress-depth", "0",
    "set-max-intset-entries", "512", "hash-max-listpack-entries", "512",
    "hash-max-listpack-value", "64", "zset-max-listpack-entries", "128",
    "zset-max-listpack-value", "64", "stream-node-max-bytes", "4096",
    "stream-node-max-entries", "100", "lazyfree-lazy-eviction", "no", "lazyfree-lazy-expire",
    "no", "lazyfree-lazy-server-del", "no", "lazyfree-lazy-user-del", "no",
    "lazyfree-lazy-user-flush", "no", "activerehashing", "yes", "latency-tracking", "yes",
    "repl-backlog-size", "1mb", "repl-ping-replica-period", "10", "replica-serve-stale-data",
    "yes", "replica-read-only", "yes", "min-replicas-to-write", "0",
    "slowlog-log-slower-than", "10000", "slowlog-max-len", "128", "busy-reply-threshold",
    "5000", "loglevel", "notice", "sanitize-dump-payload", "no", "maxmemory", "0",
    "maxclients", "10000", "timeout", "0", "tcp-keepalive", "300", "maxmemory-clients", "0",
    "maxmemory-samples", "5", "key-load-delay", "0", "rdb-key-save-delay", "0",
    "maxmemory-eviction-tenacity", "10", "notify-keyspace-events", "", "save", "",
    "masterauth", "", "masteruser", "", "aof-use-rdb-preamble", "yes",
    "auto-aof-rewrite-percentage", "100", "auto-aof-rewrite-min-size", "64mb",
    "aof-load-truncated", "yes", "aof-timestamp-enabled", "no",
)  # fmt: skip


class Pair:
    """A raw connection to stock Redis and one to inreplay."""

    def __init__(self, ref: ServerProcess, ours: ServerProcess) -> None:
        self.conns: list[RawConn] = [ref.raw(), ours.raw()]

    def replies(self, *cmd: str) -> tuple[Any, Any]:
        a, b = (c.call(*cmd) for c in self.conns)
        return a, b

    def same(self, *cmd: str) -> Any:
        a, b = self.replies(*cmd)
        assert b == a, f"{cmd!r}: redis {a!r}, inreplay {b!r}"
        return a

    def get(self, *patterns: str) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
        a, b = self.replies("CONFIG", "GET", *patterns)
        return dict(zip(a[::2], a[1::2], strict=True)), dict(zip(b[::2], b[1::2], strict=True))

    def same_get(self, *patterns: str) -> dict[bytes, bytes]:
        a, b = self.get(*patterns)
        assert b == a, f"CONFIG GET {patterns!r}: redis {a!r}, inreplay {b!r}"
        return a

    def run_all(self, cmds: Sequence[Sequence[str]]) -> None:
        for cmd in cmds:
            self.same(*cmd)


@pytest.fixture
def pair(server_pool: ServerPool) -> Iterator[Pair]:
    ref, ours = server_pool.get("redis"), server_pool.get("inreplay")
    for s in (ref, ours):
        s.flushall()
    p = Pair(ref, ours)
    try:
        yield p
    finally:
        for c in p.conns:
            assert c.call("CONFIG", "SET", *RESTORE) == "OK"
            c.close()


def cfg_err(name: str, why: str) -> RespError:
    return RespError(f"ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                     .encode())


# --------------------------------------------------------------------------
# CONFIG GET
# --------------------------------------------------------------------------


def test_get_shows_redis_defaults(pair: Pair) -> None:
    got = pair.same_get(*REDIS_PARAMS)
    assert set(got) == {n.encode() for n in REDIS_PARAMS}


@pytest.mark.parametrize("pattern", [
    "hash-max-*", "*-max-*-entries", "*-max-*-value", "lazyfree*", "slowlog*", "stream-node*",
    "repl-ping-*", "*read-only", "list-max-*", "lua-time-limit", "LUA-TIME-LIMIT",
    "Hash-Max-Ziplist-*", "zset-max-???????-value", "maxmemory*", "*of",
    "key-load-delay",
])  # fmt: skip
def test_get_globs_and_aliases_as_redis(pair: Pair, pattern: str) -> None:
    """A glob shows a parameter under its name and its alias when both match; an exact
    name is shown as it was asked."""
    assert pair.same_get(pattern)


def test_hidden_parameters_are_shown_only_by_name_as_redis(pair: Pair) -> None:
    assert pair.same_get("key-load-*", "rdb-key-*") == {}
    for c in pair.conns:
        assert b"key-load-delay" not in c.call("CONFIG", "GET", "*")[::2]
    assert pair.same_get("key-load-delay") == {b"key-load-delay": b"0"}


def test_get_several_patterns_without_duplicates(pair: Pair) -> None:
    got = pair.same_get("hash-max-listpack-entries", "hash-max-*", "hash-max-listpack-entries")
    assert len(got) == 4


# --------------------------------------------------------------------------
# CONFIG SET
# --------------------------------------------------------------------------

SET_CASES = [
    # values and units
    ("repl-backlog-size", "2mb"), ("repl-backlog-size", "1k"), ("repl-backlog-size", "100000"),
    ("repl-backlog-size", "0"), ("repl-backlog-size", "1.5mb"), ("repl-backlog-size", "-1"),
    ("hash-max-listpack-value", "1k"), ("hash-max-ziplist-value", "2KB"),
    ("zset-max-ziplist-value", "99999999999"), ("stream-node-max-bytes", "1gb"),
    ("maxmemory", "1K"), ("maxmemory", ""), ("maxmemory", "1t"),
    ("maxmemory", "18446744073709551615"),
    # integers and their bounds
    ("list-max-listpack-size", "-6"), ("list-max-ziplist-size", "0"),
    ("list-compress-depth", "-1"), ("list-compress-depth", "3"),
    ("set-max-intset-entries", "600000"), ("hash-max-listpack-entries", "-1"),
    ("slowlog-log-slower-than", "-1"), ("slowlog-log-slower-than", "-2"),
    ("slowlog-max-len", "-1"), ("lua-time-limit", "-1"), ("lua-time-limit", "100"),
    ("busy-reply-threshold", "x"), ("repl-ping-replica-period", "0"),
    ("repl-ping-slave-period", "3600"), ("min-replicas-to-write", "2"),
    ("maxclients", "10000.0"), ("stream-node-max-entries", "7"),
    # booleans and enums (case-insensitive, shown in lower case)
    ("activerehashing", "NO"), ("activerehashing", "1"), ("latency-tracking", "no"),
    ("lazyfree-lazy-user-del", "yes"), ("slave-read-only", "no"),
    ("loglevel", "WARNING"), ("loglevel", "loud"), ("appendfsync", "x"),
    ("appendfsync", "always"), ("sanitize-dump-payload", "clients"),
    ("maxmemory-policy", "foo"), ("maxmemory-policy", "NOEVICTION"),
    ("notify-keyspace-events", "Q"), ("notify-keyspace-events", ""),
    ("notify-keyspace-events", "KEA"), ("notify-keyspace-events", "gK$n"),
    ("save", "a b"), ("save", "1"), ("save", ""), ("save", "100 10"),
    ("save", "3600 1 300 100 60 10000"), ("save", "1 -1"), ("appendonly", "maybe"),
    ("appendonly", "no"),
    ("maxmemory-clients", "10%"), ("maxmemory-clients", "1mb"), ("maxmemory-clients", "x"),
    ("maxmemory-clients", "-5%"), ("maxmemory-clients", "0%"), ("maxmemory-clients", "200%"),
    ("maxmemory-clients", "1.5%"), ("maxmemory-samples", "0"), ("maxmemory-samples", "65"),
    ("key-load-delay", "5"), ("rdb-key-save-delay", "-1"), ("replicaof", "no one"),
    ("slaveof", "no one"), ("maxmemory-eviction-tenacity", "101"),
    ("maxmemory-eviction-tenacity", "0"),
    # names: unknown, immutable
    ("no-such-param", "1"), ("daemonize", "yes"), ("databases", "3"), ("tcp-backlog", "5"),
    # the AOF's settings and replication's credentials (stored, shown as Redis shows them)
    ("appendfilename", "x.aof"), ("appenddirname", "d"), ("aof-use-rdb-preamble", "no"),
    ("aof-load-truncated", "no"), ("aof-timestamp-enabled", "yes"),
    ("auto-aof-rewrite-percentage", "-1"), ("auto-aof-rewrite-percentage", "50"),
    ("auto-aof-rewrite-min-size", "1mb"), ("auto-aof-rewrite-min-size", "x"),
    ("masterauth", "secret"), ("masterauth", ""), ("masteruser", "someone"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "value"), SET_CASES)
def test_set_as_redis(pair: Pair, name: str, value: str) -> None:
    """The same reply (OK or Redis's error text) and the same value afterwards."""
    pair.same("CONFIG", "SET", name, value)
    pair.same_get(name)


def test_set_several_at_once_and_aliases(pair: Pair) -> None:
    pair.same("CONFIG", "SET", "maxmemory", "10000001", "repl-backlog-size", "10000002",
              "hash-max-ziplist-entries", "7", "loglevel", "verbose")
    pair.same_get("maxmemory", "repl-backlog-size", "hash-max-*", "loglevel")
    # a name and its alias in one command: no duplicate, the last one wins
    pair.same("CONFIG", "SET", "hash-max-listpack-entries", "1", "hash-max-ziplist-entries", "2")
    pair.same_get("hash-max-*")
    pair.same("CONFIG", "SET", "maxmemory", "1", "MAXMEMORY", "2")
    pair.same("CONFIG", "SET", "maxmemory", "1", "timeout")
    pair.same("CONFIG", "SET", "maxmemory")


@pytest.mark.parametrize("bad", [
    ("slowlog-max-len", "-5"), ("no-such-param", "1"), ("daemonize", "no"),
    ("loglevel", "loud"), ("repl-backlog-size", "lots"), ("activerehashing", "perhaps"),
])  # fmt: skip
def test_set_is_all_or_nothing(pair: Pair, bad: tuple[str, str]) -> None:
    names = ("maxmemory", "repl-backlog-size", "hash-max-listpack-entries", "loglevel")
    before = pair.same_get(*names)
    pair.same("CONFIG", "SET", "maxmemory", "10mb", "hash-max-listpack-entries", "3", *bad,
              "loglevel", "warning")
    assert pair.same_get(*names) == before


# --------------------------------------------------------------------------
# inreplay's refusals, hidden start-up parameters
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value", "why"), [
    ("maxmemory-policy", "allkeys-lru",
     "inreplay never evicts keys: only noeviction is supported"),
])  # fmt: skip
def test_settings_without_behaviour_that_would_mislead_are_refused(
    inreplay_server: ServerProcess, name: str, value: str, why: str
) -> None:
    with inreplay_server.raw() as c:
        before = c.call("CONFIG", "GET", name)
        assert c.call("CONFIG", "SET", name, value) == cfg_err(name, why)
        assert c.call("CONFIG", "GET", name) == before


def test_inreplay_parameters_are_shown_only_by_name(inreplay_server: ServerProcess) -> None:
    with inreplay_server.raw() as c:
        everything = c.call("CONFIG", "GET", "*")[::2]
        assert b"maxbytes" not in everything and b"fanout" not in everything
        assert c.call("CONFIG", "GET", "maxbytes") == [b"maxbytes", str(1 << 30).encode()]
        assert c.call("CONFIG", "GET", "alpha") == [b"alpha", b"0.6"]
        assert c.call("CONFIG", "SET", "maxbytes", "1mb") == cfg_err(
            "maxbytes", "can't set immutable config")


# --------------------------------------------------------------------------
# the encoding limits take effect
# --------------------------------------------------------------------------


def test_hash_and_set_encoding_limits_as_redis(pair: Pair) -> None:
    pair.run_all([
        ("CONFIG", "SET", "hash-max-listpack-entries", "4", "set-max-intset-entries", "3"),
        ("HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"), ("OBJECT", "ENCODING", "h"),
        ("HSET", "h", "e", "5"), ("OBJECT", "ENCODING", "h"),
        ("SADD", "s", "1", "2", "3"), ("OBJECT", "ENCODING", "s"),
        ("SADD", "s", "4"), ("OBJECT", "ENCODING", "s"),
        # through the old ziplist alias, with a unit
        ("CONFIG", "SET", "hash-max-ziplist-value", "8b", "hash-max-ziplist-entries", "512"),
        ("HSET", "v", "f", "12345678"), ("OBJECT", "ENCODING", "v"),
        ("HSET", "v", "g", "123456789"), ("OBJECT", "ENCODING", "v"),
        ("CONFIG", "SET", "hash-max-listpack-value", "64"),
        ("HSET", "w", "f", "123456789"), ("OBJECT", "ENCODING", "w"),
    ])  # fmt: skip
    assert pair.same("OBJECT", "ENCODING", "h") == b"hashtable"
    assert pair.same("OBJECT", "ENCODING", "w") == b"listpack"


# --------------------------------------------------------------------------
# pyctl and the C table
# --------------------------------------------------------------------------


def test_pyctl_defaults_are_the_c_defaults() -> None:
    c = config.c_defaults()
    cfg = ServerConfig()
    checked = 0
    for f in dataclasses.fields(ServerConfig):
        p = config.c_param(f.name)
        if p is None or f.name in config.OWN_DEFAULTS:
            continue
        want = c[p["field"]]
        if p["type"] == "bool":
            want = bool(want)
        assert getattr(cfg, f.name) == want, f.name
        checked += 1
    assert checked >= 25
    assert cfg.listen == f"{c['bind']}:{c['port']}"


def test_c_defaults_are_the_table_defaults() -> None:
    """ir_config_init fills each member with its row's default."""
    c = config.c_defaults()
    for p in config.c_params():
        if p["field"] is None or p["type"] == "special":
            continue
        v = c[p["field"]]
        if p["type"] == "bool":
            assert v == (p["default"] == "yes"), p["name"]
        elif p["type"] == "memory":
            assert v == config.parse_size(p["default"]), p["name"]
        elif p["type"] in ("int", "double"):
            assert v == float(p["default"]), p["name"]
        else:
            assert v == p["default"], p["name"]


def test_table_rows_are_complete() -> None:
    names: set[str] = set()
    for p in config.c_params():
        assert p["doc"] and p["type"] in ("bool", "int", "memory", "enum", "string", "double",
                                          "special"), p
        for n in (p["name"], p["alias"]):
            if n:
                assert n not in names, n
                names.add(n)
        if p["type"] == "enum":
            assert p["default"] in p["values"].split(","), p["name"]
        if p["type"] in ("int", "memory"):
            assert p["min"] <= p["max"], p["name"]
        if p["hidden"] and p["field"]:  # inreplay's own start-up settings
            assert not p["mutable"], p["name"]


@pytest.mark.parametrize("name", ["maxclients", "maxbytes", "tcp_backlog", "shard_index",
                                  "proto_max_bulk_len", "listen_port", "timeout", "seed"])
def test_pyctl_bounds_are_the_c_bounds(name: str) -> None:
    lo, hi = config.c_bounds(name)  # type: ignore[misc]
    assert isinstance(lo, int) and isinstance(hi, int)
    for ok in (lo, hi):
        try:
            dataclasses.replace(ServerConfig(), **{name: ok})._validate_bounds()
        except ConfigError as e:
            pytest.fail(f"{name}={ok}: {e}")
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ConfigError, match=f"--{name.replace('_', '-')}: must be between "
                                              f"{lo} and {hi}, got {bad}"):
            dataclasses.replace(ServerConfig(), **{name: bad})._validate_bounds()


def test_every_visible_parameter_is_in_config_get(inreplay_server: ServerProcess) -> None:
    """CONFIG GET * lists exactly the table's visible rows (names and aliases)."""
    want = set()
    for p in config.c_params():
        if not p["hidden"]:
            want |= {n.encode() for n in (p["name"], p["alias"]) if n}
    with inreplay_server.raw() as c:
        assert set(c.call("CONFIG", "GET", "*")[::2]) == want


def test_size_settings_are_the_c_memory_parameters() -> None:
    assert set(config.size_fields()) == {"maxbytes", "maxmemory", "client_output_buffer_limit",
                                       "proto_max_bulk_len", "client_query_buffer_limit",
                                       "shm_ring_size"}


def test_pyctl_without_the_library_fails_in_one_line(tmp_path: Path) -> None:
    """The defaults come from libinreplay, so without it `pyctl start` says so in one line
    (and importing pyctl.config, as the actors do, still works)."""
    env = dict(os.environ, INREPLAY_LIB=str(tmp_path / "missing.so"))
    p = subprocess.run([sys.executable, "-m", "pyctl", "start", "--listen", "127.0.0.1:0"],
                       env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode != 0
    assert p.stderr.strip().splitlines() == [
        f"pyctl start: INREPLAY_LIB={tmp_path / 'missing.so'}: no such file"], p.stderr
    p = subprocess.run([sys.executable, "-c", "import pyctl.config, rl.config"],
                       env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
