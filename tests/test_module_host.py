"""REPLAY.* on both hosts: the native server and Debian's stock redis-server
with the module (fstack_redis/module/, `redis-server --loadmodule
"$(pyctl module-path)"`).

Every test here runs against both (the `host` fixture, over conftest's
replay_server, as the other REPLAY suites do): one implementation of
the commands (t_replay.c, t_traj.c), two hosts under it, the same replies. The
differential test starts both with one seed and compares a scripted session's
replies byte for byte.
"""

from __future__ import annotations

import itertools
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import ROOT, RawConn, ServerProcess

HOSTS = ("native", "module")
SEED = "42"
_names = itertools.count()


def _module_path() -> str:
    r = subprocess.run([sys.executable, "-m", "pyctl", "module-path"], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"pyctl module-path: {r.stderr.strip()} (make build builds the module)")
    return r.stdout.strip()


def _start(kind: str, workdir: Path, seed: str = SEED) -> ServerProcess:
    if kind == "module":
        return ServerProcess("redis", workdir, ("--loadmodule", _module_path(), "SEED", seed))
    return ServerProcess("inreplay", workdir, ("--seed", seed))


@pytest.fixture
def host(replay_server: ServerProcess) -> Iterator[redis.Redis]:
    """A client of each host (conftest's replay_server: [native], [module]), its tables
    dropped (FLUSHALL)."""
    r = replay_server.client()
    yield r
    r.close()


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


def _ids(b: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(b) // 8}q", b))


def _info(r: redis.Redis, t: str) -> dict[bytes, object]:
    v = r.execute_command("REPLAY.INFO", t)
    return dict(zip(v[::2], v[1::2], strict=True))


def test_create_add_sample_update_info_list_drop(host: redis.Redis) -> None:
    t = _name("t")
    assert host.execute_command("REPLAY.CREATE", t, "CAPACITY", 100, "ALPHA", 1) == b"OK"
    assert host.execute_command("REPLAY.ADD", t, 1, b"a" * 10, 2, b"b" * 10, "MAX", b"c" * 10) \
        == [0, 1, 2]
    ids, weights, items = host.execute_command("REPLAY.SAMPLE", t, 8)
    assert len(ids) == 64 and len(weights) == 32 and len(items) == 8
    assert all(it in (b"a" * 10, b"b" * 10, b"c" * 10) for it in items)
    n = host.execute_command("REPLAY.UPDATE", t, struct.pack("<2q", 0, 1), struct.pack("<2f", 5, 0))
    assert n == 2
    info = _info(host, t)
    assert info[b"name"] == t.encode() and info[b"size"] == 3 and info[b"samples"] == 8
    assert info[b"updates"] == 2 and float(info[b"max_priority"]) >= 5
    assert t.encode() in host.execute_command("REPLAY.LIST")
    assert host.execute_command("REPLAY.DROP", t) == b"OK"
    assert t.encode() not in host.execute_command("REPLAY.LIST")


@pytest.mark.parametrize("itemsize", [16, 5000])  # copied, and by reference on the native host
def test_sample_packed_withstats_withinfo(host: redis.Redis, itemsize: int) -> None:
    t = _name("p")
    host.execute_command("REPLAY.CREATE", t, "CAPACITY", 64)
    args: list[object] = []
    for k in range(10):
        args += [k + 1, bytes([65 + k]) * itemsize]
    host.execute_command("REPLAY.ADD", t, *args)
    n = 6
    blob = host.execute_command("REPLAY.SAMPLE", t, n, "PACKED", "WITHSTATS", "WITHINFO")
    assert len(blob) == 12 * n + n * itemsize + (24 + 8 * n) + (8 + 20 * n)
    ids = _ids(blob[: 8 * n])
    for i, id_ in enumerate(ids):
        item = blob[12 * n + i * itemsize: 12 * n + (i + 1) * itemsize]
        assert item == bytes([65 + id_]) * itemsize
    plain = host.execute_command("REPLAY.SAMPLE", t, n, "WITHSTATS", "WITHINFO")
    assert len(plain) == 5 and len(plain[2]) == n
    assert all(len(x) == itemsize for x in plain[2])
    assert len(plain[3]) == 24 + 8 * n and len(plain[4]) == 8 + 20 * n
    total, _mn, live = struct.unpack("<ddq", plain[3][:24])
    assert live == 10 and total == pytest.approx(sum(k ** 0.6 for k in range(1, 11)))


def test_selectors_and_queue(host: redis.Redis) -> None:
    f = _name("fifo")
    host.execute_command("REPLAY.CREATE", f, "CAPACITY", 10, "SAMPLER", "fifo", "REMOVER", "fifo")
    host.execute_command("REPLAY.ADD", f, 1, b"x", 1, b"y", 1, b"z")
    assert _ids(host.execute_command("REPLAY.SAMPLE", f, 3)[0]) == [0, 0, 0]
    q = _name("queue")
    host.execute_command("REPLAY.CREATE", q, "QUEUE", 2)
    host.execute_command("REPLAY.ADD", q, 1, b"first", 1, b"second")
    with pytest.raises(redis.ResponseError, match=r"^RATELIMITED .*QUEUE 2 is full"):
        host.execute_command("REPLAY.ADD", q, 1, b"third")
    assert host.execute_command("REPLAY.SAMPLE", q, 1)[2] == [b"first"]
    assert host.execute_command("REPLAY.SAMPLE", q, 1)[2] == [b"second"]
    info = _info(host, q)
    assert info[b"sampler"] == b"fifo" and info[b"queue_size"] == 2 and info[b"size"] == 0


def test_trajectory_table(host: redis.Redis) -> None:
    s, t = _name("s"), _name("traj")
    assert host.execute_command("REPLAY.STREAM", s, "FIELDS", 2, "obs", "uint8", "4",
                                "rew", "float32", "", "CHUNK", 4) == b"OK"
    obs = bytes(range(4 * 8))
    rew = struct.pack("<8f", *range(8))
    assert host.execute_command("REPLAY.APPEND", s, 8, obs, rew) == 8
    host.execute_command("REPLAY.CREATE", t, "CAPACITY", 16, "TRAJECTORY")
    ids = host.execute_command("REPLAY.ITEM", t, 1, 2, "o", s, "obs", 0, 3, "r", s, "rew", 0, 3,
                               2, 2, "o", s, "obs", 4, 3, "r", s, "rew", 4, 3)
    assert ids == [0, 1]
    assert host.execute_command("REPLAY.COLUMNS", t) == [[b"o", b"uint8", b"4", 3],
                                                         [b"r", b"float32", b"", 3]]
    rid, _w, cols = host.execute_command("REPLAY.SAMPLE", t, 4)
    assert len(cols) == 2 and len(cols[0]) == 4 * 12 and len(cols[1]) == 4 * 12
    for i, id_ in enumerate(_ids(rid)):
        first = 0 if id_ == 0 else 4
        assert cols[0][i * 12:(i + 1) * 12] == obs[4 * first: 4 * (first + 3)]
        assert cols[1][i * 12:(i + 1) * 12] == rew[4 * first: 4 * (first + 3)]
    info = _info(host, t)
    assert info[b"columns"] == 2 and int(info[b"store_references"]) >= 2
    chunks = host.execute_command("REPLAY.CHUNKS")
    assert chunks[0] == b"streams" and chunks[1] >= 1
    assert host.execute_command("REPLAY.STREAM", s, "END") == b"OK"
    host.execute_command("REPLAY.DROP", t)
    assert host.execute_command("REPLAY.STREAM", s, "DROP") == b"OK"


@pytest.mark.parametrize(("args", "error"), [
    (("REPLAY.SAMPLE", "nope", 1), "^NOTABLE no such table 'nope'$"),
    (("REPLAY.CREATE", "{t}", "CAPACITY", 4), "^BUSYTABLE table '.*' already exists"),
    (("REPLAY.SAMPLE", "{e}", 1), "^EMPTY table '.*' is empty$"),
    (("REPLAY.ADD", "{t}", "-1", b"x"), "^BADPRIO 0 invalid priority '-1'"),
    (("REPLAY.SAMPLE", "{t}", 1, "PACKED"), "^MIXEDSIZE PACKED needs items of one size"),
    (("REPLAY.APPEND", "nostream", 1, b"x"), "^NOSTREAM no such stream 'nostream'"),
    (("REPLAY.ITEM", "{t}", 1, 1, "c", "s", "f", 0, 1), "^WRONGKIND table '.*' holds opaque items"),
    (("REPLAY.ADD", "{t}", 1), "^wrong number of arguments for 'replay.add' command$"),
    (("REPLAY.INFO",), "^wrong number of arguments for 'replay.info' command$"),
    (("REPLAY.CREATE", "x", "CAPACITY", 4, "BOGUS"), "^syntax error$"),
    (("REPLAY.CREATE", "x", "CAPACITY", 0), "^CAPACITY must be a positive integer$"),
    (("REPLAY.SAMPLE", "{t}", 0), "^sample size must be an integer between 1 and"),
])  # fmt: skip
def test_errors(host: redis.Redis, args: tuple[object, ...], error: str) -> None:
    t, e = _name("err"), _name("empty")
    host.execute_command("REPLAY.CREATE", t, "CAPACITY", 4)
    host.execute_command("REPLAY.CREATE", e, "CAPACITY", 4)
    host.execute_command("REPLAY.ADD", t, 1, b"x", 1, b"yy")
    argv = [a.replace("{t}", t).replace("{e}", e) if isinstance(a, str) else a for a in args]
    with pytest.raises(redis.ResponseError, match=error):
        host.execute_command(*argv)


def test_module_command_table_comes_from_commands_json(module_server: ServerProcess) -> None:
    import json

    cmds = json.loads((ROOT / "fstack_redis" / "commands.json").read_text())
    replay = [n for n in cmds if n.startswith(("replay.", "param."))]
    assert len(replay) >= 19
    with module_server.raw() as conn:
        for name in replay:
            d = cmds[name]
            raw = conn.call("COMMAND", "INFO", name)[0]
            assert raw[0] in (name, name.encode()) and raw[1] == d["arity"], (name, raw[:2])
            flags = {f.decode() if isinstance(f, bytes) else f for f in raw[2]}
            want = set(d["flags"].split())
            assert ("write" in flags) == ("write" in want), name
            assert ("denyoom" in flags) == ("denyoom" in want), name
            assert ("readonly" in flags) == ("readonly" in want), name
            assert list(raw[3:6]) == d["keys"], name


def test_timeout_waits_then_runs_times_out_or_hears_of_a_drop(host: redis.Redis) -> None:
    """The limiter's waiters: natively blocked.c's, on the module host Redis
    blocked clients (RedisModule_BlockClient); the same answers on both."""
    q = _name("q")
    host.execute_command("REPLAY.CREATE", q, "QUEUE", 2)
    with pytest.raises(redis.ResponseError, match=r"^RATELIMITED table '.*' QUEUE 2 has too few "
                                                  r"items \(0 items\): sample timed out after "
                                                  r"TIMEOUT 0\.05$"):
        host.execute_command("REPLAY.SAMPLE", q, 1, "TIMEOUT", "0.05")
    kw = host.connection_pool.connection_kwargs
    got: dict[int, object] = {}

    def wait(k: int, *args: object) -> None:  # a connection of the same kind (TCP, shm)
        r = redis.Redis(connection_pool=redis.ConnectionPool(
            connection_class=host.connection_pool.connection_class,
            **{**kw, "socket_timeout": 10}))
        try:
            got[k] = r.execute_command(*args)
        except redis.ResponseError as e:
            got[k] = e
        finally:
            r.close()

    def until(cond: object, what: str) -> None:
        deadline = time.monotonic() + 5
        while not cond():  # type: ignore[operator]
            assert time.monotonic() < deadline, what
            time.sleep(0.01)

    threads = [threading.Thread(target=wait, args=(k, "REPLAY.SAMPLE", q, 1, "TIMEOUT", 5))
               for k in range(2)]
    threads[0].start()
    until(lambda: _info(host, q)[b"blocked_samplers"] == 1, "first sampler waits")
    threads[1].start()
    until(lambda: _info(host, q)[b"blocked_samplers"] == 2, "second sampler waits")
    host.execute_command("REPLAY.ADD", q, 1, b"first")
    threads[0].join(5)
    assert got[0][2] == [b"first"]  # type: ignore[index]
    host.execute_command("REPLAY.ADD", q, 1, b"second")
    threads[1].join(5)
    assert got[1][2] == [b"second"]  # type: ignore[index]
    host.execute_command("REPLAY.ADD", q, 1, b"a", 1, b"b")
    t = threading.Thread(target=wait, args=(2, "REPLAY.ADD", q, 1, b"c", "TIMEOUT", 0))
    t.start()
    until(lambda: _info(host, q)[b"blocked_inserters"] == 1, "inserter waits")
    host.execute_command("REPLAY.DROP", q)
    t.join(5)
    assert isinstance(got[2], redis.ResponseError)
    assert str(got[2]) == f"NOTABLE table '{q}' was dropped while the client waited"
    host.execute_command("REPLAY.CREATE", q, "CAPACITY", 2)
    with pytest.raises(redis.ResponseError, match=r"^timeout is negative$"):
        host.execute_command("REPLAY.SAMPLE", q, 1, "TIMEOUT", "-1")


def test_module_info_section(module_server: ServerProcess) -> None:
    r = module_server.client()
    t = _name("i")
    r.execute_command("REPLAY.CREATE", t, "CAPACITY", 8)
    r.execute_command("REPLAY.ADD", t, 1, b"abc", 1, b"de")
    info = r.info("inreplay")
    assert info["inreplay_tables"] >= 1 and info["inreplay_items"] >= 2
    assert info["inreplay_blocked_clients"] == 0
    assert info["inreplay_memory"] >= info["inreplay_item_bytes"] > 0  # outside used_memory
    for field in ("total_blocked_clients", "blocked_timeouts", "blocked_disconnects",
                  "blocked_dropped"):  # the native server's INFO stats fields
        assert f"inreplay_{field}" in info, field
    r.execute_command("REPLAY.DROP", t)
    r.close()


# A session of REPLAY.* commands whose replies both hosts must give byte for
# byte, from the same seed: draws, weights, stats, info, INFO counters, errors.
SCRIPT: list[tuple[object, ...]] = [
    ("REPLAY.CREATE", "a", "CAPACITY", 32, "ALPHA", 0.7, "BETA", 0.4),
    ("REPLAY.ADD", "a", *itertools.chain.from_iterable((k % 5 + 0.5, bytes([k]) * 20)
                                                       for k in range(20))),
    ("REPLAY.SAMPLE", "a", 16),
    ("REPLAY.SAMPLE", "a", 16, "PACKED", "WITHSTATS", "WITHINFO"),
    ("REPLAY.SAMPLE", "a", 8, "BETA", 1, "WITHSTATS"),
    ("REPLAY.UPDATE", "a", struct.pack("<3q", 1, 2, 3), struct.pack("<3f", 9, 0.25, 3)),
    ("REPLAY.SAMPLE", "a", 32, "WITHINFO"),
    ("REPLAY.ADD", "a", *itertools.chain.from_iterable((1, bytes([k]) * 6000)
                                                       for k in range(20))),
    ("REPLAY.SAMPLE", "a", 12),
    ("REPLAY.INFO", "a"),
    ("REPLAY.CREATE", "u", "CAPACITY", 8, "SAMPLER", "uniform", "REMOVER", "fifo"),
    ("REPLAY.ADD", "u", *itertools.chain.from_iterable((1, b"u%d" % k) for k in range(12))),
    ("REPLAY.SAMPLE", "u", 5, "PACKED"),
    ("REPLAY.SAMPLE", "u", 5, "WITHSTATS", "WITHINFO"),
    ("REPLAY.CREATE", "h", "CAPACITY", 8, "SAMPLER", "maxheap", "MAX_TIMES_SAMPLED", 2),
    ("REPLAY.ADD", "h", 3, b"x", 7, b"y", 5, b"z"),
    ("REPLAY.SAMPLE", "h", 4, "WITHINFO"),
    ("REPLAY.INFO", "h"),
    ("REPLAY.CREATE", "big", "CAPACITY", 8),
    ("REPLAY.ADD", "big", *itertools.chain.from_iterable((k + 1, bytes([k]) * 5000)
                                                         for k in range(4))),
    ("REPLAY.SAMPLE", "big", 6, "PACKED", "WITHSTATS"),
    ("REPLAY.SAMPLE", "big", 3, "WITHINFO"),
    ("REPLAY.STREAM", "s", "FIELDS", 1, "obs", "float32", "2", "CHUNK", 3),
    ("REPLAY.APPEND", "s", 7, struct.pack("<14f", *range(14))),
    ("REPLAY.CREATE", "tr", "CAPACITY", 8, "TRAJECTORY"),
    ("REPLAY.ITEM", "tr", 1, 1, "o", "s", "obs", 0, 2, 4, 1, "o", "s", "obs", 3, 2),
    ("REPLAY.SAMPLE", "tr", 6, "WITHSTATS", "WITHINFO"),
    ("REPLAY.COLUMNS", "tr"),
    ("REPLAY.INFO", "tr"),
    ("REPLAY.CHUNKS",),
    ("REPLAY.LIST",),
    ("REPLAY.SHARDS",),
    ("REPLAY.SAMPLE", "a", 2, "PACKED"),
    ("REPLAY.CREATE", "qq", "QUEUE", 1),
    ("REPLAY.SAMPLE", "qq", 1, "TIMEOUT", "0.02"),
    ("REPLAY.ADD", "qq", 1, b"x"),
    ("REPLAY.ADD", "qq", 1, b"y", "TIMEOUT", "0.02"),
    ("REPLAY.SAMPLE", "qq", 1, "TIMEOUT", "1"),
    ("REPLAY.SAMPLE", "qq", 1, "TIMEOUT", "abc"),
    ("REPLAY.SAMPLE", "nope", 1),
    ("REPLAY.ADD", "a", "x", b"y"),
    ("REPLAY.ADD", "a", 1),
    ("REPLAY.CREATE", "a", "CAPACITY", 3),
    ("REPLAY.ITEM", "a", 1, 1, "o", "s", "obs", 0, 1),
    ("REPLAY.DROP", "u"),
    ("REPLAY.DROP", "u"),
    ("REPLAY.LIST",),
]


@pytest.mark.parametrize("resp", [2, 3])
def test_same_seed_same_bytes_on_both_hosts(tmp_path: Path, resp: int) -> None:
    """RESP2: byte for byte. RESP3: the same values (REPLAY.INFO's doubles are
    written by Redis itself there, as "%.17g", where the native server writes
    the shortest form that reads back as the same double)."""
    servers = {kind: _start(kind, tmp_path / kind) for kind in HOSTS}
    try:
        replies: dict[str, list[object]] = {}
        for kind, srv in servers.items():
            with srv.raw() as conn:
                if resp == 3:
                    conn.call("HELLO", "3")
                out: list[object] = []
                for args in SCRIPT:
                    conn.send(conn.command(*args))
                    out.append(conn.read_reply_bytes() if resp == 2 else conn.read_reply())
                replies[kind] = out
        for args, a, b in zip(SCRIPT, replies["native"], replies["module"], strict=True):
            assert a == b, f"{args[:3]}: native {str(a)[:200]} != module {str(b)[:200]}"
    finally:
        for srv in servers.values():
            srv.stop()


def _asan_runtime() -> str | None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        return None
    p = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True)
    path = p.stdout.strip()
    return path if p.returncode == 0 and os.path.isabs(path) else None


def _raises(r: redis.Redis, *args: object) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def asan_module(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The ASan/UBSan build of the module (build-asan, as make test-c configures it) and
    the environment that preloads libasan for redis-server, its reports going to
    tmp_path/asan.log.<pid>; skips where there is no such build or runtime."""
    so = ROOT / "build-asan" / "fstack_redis" / "module" / "inreplay_module.so"
    if not so.is_file():
        pytest.skip("no ASan build of the module (make test-c configures build-asan)")
    asan = _asan_runtime()
    if asan is None:
        pytest.skip("no libasan to preload")
    log = tmp_path / "asan.log"
    env = dict(os.environ, LD_PRELOAD=asan,
               ASAN_OPTIONS=f"detect_leaks=0:log_path={log}:abort_on_error=0",
               UBSAN_OPTIONS=f"print_stacktrace=1:log_path={log}")
    return so, env


def _pinfo(r: redis.Redis, name: str) -> dict[bytes, Any]:
    raw = r.execute_command("PARAM.INFO", name)
    return raw if isinstance(raw, dict) else dict(zip(raw[::2], raw[1::2], strict=True))


def test_module_runs_clean_under_asan(tmp_path: Path) -> None:
    """The module built with ASan and UBSan (build-asan, as make test-c
    configures it) in stock redis-server (libasan preloaded): the scripted
    session, a DROP of every table, waits ended by a deadline, a disconnect and
    FLUSHALL, CONFIG SET, and the parameter tables (SYNC waiters ended each way, the
    RDB) report nothing."""
    so, env = asan_module(tmp_path)
    redis_server = shutil.which("redis-server")
    assert redis_server
    from pyctl.proc import free_ports

    port = free_ports("127.0.0.1", 1)[0]
    proc = subprocess.Popen([redis_server, "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path),
                             "--enable-debug-command", "yes",
                             "--loadmodule", str(so), "SEED", SEED],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        r = redis.Redis(port=port, socket_timeout=30)
        for _ in range(200):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        for args in SCRIPT:
            try:
                r.execute_command(*args)
            except redis.ResponseError:
                pass
        # waiters: one served at its turn, one told of its table's drop
        r.execute_command("REPLAY.CREATE", "w", "QUEUE", 1)
        conns = [RawConn("127.0.0.1", port, 30) for _ in range(2)]
        for c in conns:
            c.send(c.command("REPLAY.SAMPLE", "w", 1, "TIMEOUT", 10))
        deadline = time.monotonic() + 10
        while _info(r, "w")[b"blocked_samplers"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        r.execute_command("REPLAY.ADD", "w", 1, b"item")
        assert conns[0].read_reply()[2] == [b"item"]
        for name in r.execute_command("REPLAY.LIST"):
            r.execute_command("REPLAY.DROP", name)
        assert conns[1].read_reply().message.startswith(b"NOTABLE")
        for c in conns:
            c.close()
        r.execute_command("REPLAY.STREAM", "s", "DROP")
        # a deadline (the module's timer) fires; one goes with its client; FLUSHALL answers
        # the last; CONFIG SET re-reads the limits
        r.execute_command("REPLAY.CREATE", "w", "QUEUE", 1)
        assert _raises(r, "REPLAY.SAMPLE", "w", 1, "TIMEOUT", "0.02").startswith("RATELIMITED")
        conns = [RawConn("127.0.0.1", port, 30) for _ in range(2)]
        for c in conns:
            c.send(c.command("REPLAY.SAMPLE", "w", 1, "TIMEOUT", 10))
        while _info(r, "w")[b"blocked_samplers"] < 2 and time.monotonic() < deadline + 10:
            time.sleep(0.01)
        conns[0].close()
        while _info(r, "w")[b"blocked_samplers"] > 1 and time.monotonic() < deadline + 10:
            time.sleep(0.01)
        r.flushall()
        assert conns[1].read_reply().message.startswith(b"NOTABLE")
        conns[1].close()
        r.config_set("maxmemory", 1 << 30)
        r.config_set("maxmemory", 0)
        # parameter tables: steps, a SYNC round, its waiters ended by a timeout, a
        # disconnect, a drop and FLUSHALL, and the tables through the RDB (DEBUG RELOAD)
        g = bytes(4 * 1000)
        r.execute_command("PARAM.CREATE", "pa", "SIZE", 1000, "OPTIMIZER", "adam")
        r.execute_command("PARAM.PUSH", "pa", g)
        r.execute_command("PARAM.PULL", "pa")
        r.execute_command("PARAM.CREATE", "ps", "SIZE", 1000, "OPTIMIZER", "rmsprop", "SYNC", 2)
        assert _raises(r, "PARAM.PUSH", "ps", g, "TIMEOUT", "0.05").startswith("SYNCTIMEOUT")
        conns = [RawConn("127.0.0.1", port, 30) for _ in range(3)]
        conns[0].send(conns[0].command("PARAM.PUSH", "ps", g))
        while _pinfo(r, "ps")[b"sync_pending"] < 1 and time.monotonic() < deadline + 20:
            time.sleep(0.01)
        assert r.execute_command("PARAM.PUSH", "ps", g) == 1
        assert conns[0].read_reply() == 1
        conns[1].send(conns[1].command("PARAM.PUSH", "ps", g))
        while _pinfo(r, "ps")[b"sync_pending"] < 1 and time.monotonic() < deadline + 20:
            time.sleep(0.01)
        conns[1].close()
        while _pinfo(r, "ps")[b"sync_pending"] > 0 and time.monotonic() < deadline + 20:
            time.sleep(0.01)
        r.execute_command("DEBUG", "RELOAD")
        assert r.execute_command("PARAM.PULL", "pa")[0] == 1
        conns[2].send(conns[2].command("PARAM.PUSH", "ps", g))
        while _pinfo(r, "ps")[b"sync_pending"] < 1 and time.monotonic() < deadline + 20:
            time.sleep(0.01)
        r.execute_command("PARAM.DROP", "ps")
        assert conns[2].read_reply().message.startswith(b"NOTABLE")
        conns[0].send(conns[0].command("PARAM.PUSH", "pa", g))
        assert conns[0].read_reply() == 2
        for c in conns:
            c.close()
        r.flushall()
        r.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    reports = sorted(tmp_path.glob("asan.log*"))
    text = "\n".join(p.read_text() for p in reports)
    assert "ERROR: AddressSanitizer" not in text and "runtime error" not in text, text[:4000]


def test_pyctl_start_server_redis(tmp_path: Path) -> None:
    """`pyctl start --server redis` execs stock redis-server with the module; the
    native server's other flags are refused in one line."""
    from pyctl.proc import free_ports

    port = free_ports("127.0.0.1", 1)[0]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "pyctl", "start", "--server", "redis",
                             "--listen", f"127.0.0.1:{port}", "--seed", SEED,
                             "--maxbytes", "64mb"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port, socket_timeout=10)
        deadline = time.monotonic() + 20
        while True:
            try:
                r.ping()
                break
            except redis.ConnectionError:
                assert proc.poll() is None and time.monotonic() < deadline, "did not start"
                time.sleep(0.05)
        assert str(r.info("server")["executable"]).endswith("redis-server")  # exec'd
        assert r.execute_command("REPLAY.CREATE", "t", "CAPACITY", 4) == b"OK"
        assert _info(r, "t")[b"maxbytes"] == 64 * 1024 * 1024
        assert r.info("inreplay")["inreplay_tables"] == 1
        r.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    bad = subprocess.run([sys.executable, "-m", "pyctl", "start", "--server", "redis",
                          "--capacity", "4"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2
    from pyctl.cli import REDIS_HOST_FLAGS  # the one list of what --server redis takes

    only = ", ".join("--" + f.replace("_", "-") for f in REDIS_HOST_FLAGS)
    assert bad.stderr.strip() == (
        f"pyctl start: --capacity is the native server's: with --server redis only {only} apply")
    assert "--listen, --seed, --fanout, --maxbytes, --requirepass, --requirepass-file" in only


@pytest.mark.parametrize("args,message", [
    (("SHARD_GROUP", "127.0.0.1:{port},127.0.0.1:1", "SHARD_INDEX", "2"),
     "SHARD_INDEX 2 is not a member of a group of 2"),
    (("SHARD_GROUP", "127.0.0.1:1,127.0.0.1:{port}", "SHARD_INDEX", "0"),
     "SHARD_INDEX 0 is 127.0.0.1:1, but redis-server listens on port {port}"),
    (("SHARD_GROUP", "127.0.0.1:{port},nonsense"), "SHARD_GROUP: "),
    (("SHARD_INDEX", "1"), "SHARD_INDEX needs SHARD_GROUP"),
])  # fmt: skip
def test_module_refuses_a_bad_replay_group(tmp_path: Path, args: tuple[str, ...],
                                           message: str) -> None:
    """SHARD_GROUP and SHARD_INDEX are checked as the native server checks --shard-group:
    a bad group refuses the module (redis-server does not start), saying why in its log."""
    from pyctl.proc import free_ports

    port = free_ports("127.0.0.1", 1)[0]
    redis_server = shutil.which("redis-server")
    assert redis_server
    out = subprocess.run([redis_server, "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--dir", str(tmp_path),
                          "--loadmodule", _module_path(),
                          *(a.format(port=port) for a in args)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert f"inreplay: {message.format(port=port)}" in out.stdout, out.stdout[-2000:]
