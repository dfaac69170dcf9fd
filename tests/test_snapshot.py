"""Snapshots: SAVE, BGSAVE, LASTSAVE, INFO persistence, --restore and --save-on-shutdown.

Every test starts its own inreplay processes (``python -m pyctl start``) on a
snapshot directory of its own, saves, stops, starts another server with
``--restore`` and compares what the clients see.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import redis

from pyctl.client import ReplayClient

if TYPE_CHECKING:
    from conftest import ServerProcess

HEADER = 24  # magic, version, flags, created ms: the bytes two saves of one dataset differ in
CRC = 4  # and the CRC at the very end, which covers them

Start = Callable[..., "ServerProcess"]


@pytest.fixture(params=["inreplay"])
def server_kind(request: pytest.FixtureRequest) -> str:
    """Selected with --servers like conftest's other server_kind tests."""
    return str(request.param)


@pytest.fixture
def start(server_kind: str, server_factory: Callable[..., ServerProcess]) -> Start:
    """start(*flags): a dedicated server; teardown SIGTERMs it and expects exit code 0."""

    def make(*flags: str) -> ServerProcess:
        return server_factory(server_kind, *flags)

    return make


def snapshots(d: Path) -> list[Path]:
    """Complete snapshots in d, oldest first."""
    found = [p for p in d.iterdir() if p.name.startswith("inreplay-") and p.suffix == ".snap"]
    return sorted(found, key=lambda p: int(p.name[len("inreplay-") : -len(".snap")]))


def persistence(r: redis.Redis) -> dict[str, Any]:
    return dict(r.info("persistence"))


def table_info(r: redis.Redis, name: str) -> dict[str, Any]:
    return ReplayClient(connection=r).info(name)


def wait_bgsave(r: redis.Redis, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = persistence(r)
        if p["rdb_bgsave_in_progress"] == 0:
            return p
        time.sleep(0.02)
    raise AssertionError("BGSAVE did not finish")


def corrupt_lines(srv: ServerProcess) -> list[str]:
    return [ln for ln in srv.log_tail(1 << 20).splitlines() if "is corrupt" in ln]


def made(d: Path) -> Path:
    """d, created: a snapshot directory must exist before a server starts on it."""
    d.mkdir(exist_ok=True)
    return d


def restart(srv: ServerProcess, start: Start, *flags: str) -> ServerProcess:
    assert srv.stop() == 0, srv.log_tail()
    return start(*flags)


def sample_ids(r: redis.Redis, table: str, n: int, calls: int) -> list[int]:
    rc = ReplayClient(connection=r)
    out: list[int] = []
    for _ in range(calls):
        out += rc.sample(table, n).ids.tolist()
    return out


# ---------------------------------------------------------------------------


def test_save_then_restore_keys_lists_and_tables(start: Start, tmp_path: Path) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d), "--seed", "7")
    r = a.client()
    r.set("plain", "value")
    r.set(b"bin\x00key", b"\x00\xff\r\nbinary")
    r.set("counter", 41)
    r.incr("counter")
    r.set("ttl", "lives", px=60_000)
    r.set("short", "dies", px=300)
    t_short = time.monotonic()
    r.rpush("list", b"a", b"", b"c" * 100_000, b"d")
    r.lpush("list", b"head")

    rc = ReplayClient(connection=r)
    rc.create("ring", 8, alpha=0.7, beta=0.5, epsilon=0.01, maxbytes=4096)
    ids = rc.add("ring", np.arange(20) + 0.5, [bytes([i]) * (i * 13 % 200) for i in range(20)])
    assert rc.update("ring", ids[-3:], [9.0, 0.0, 2.5]) == 3
    assert rc.update("ring", ids[:2], [1.0, 1.0]) == 0  # evicted: stale
    rc.sample("ring", 16)
    rc.create("wide", 100, alpha=1.0, epsilon=0.0)
    rc.add("wide", [3.0, 1.0, 7.0], [b"x", b"y", b"z"])
    rc.add("wide", None, [b"max"])
    rc.create("empty", 5)
    tables = rc.tables()
    before = {t: rc.info(t) for t in tables}

    last0 = r.lastsave()
    assert r.save() is True
    assert r.lastsave() >= last0
    files = snapshots(d)
    assert len(files) == 1
    p = persistence(r)
    assert p["rdb_saves"] == 1 and p["rdb_last_bgsave_status"] == "ok"
    assert p["rdb_last_save_bytes"] == files[0].stat().st_size
    assert Path(p["snapshot_dir"]) == d.resolve()
    pttl_before = r.pttl("ttl")
    t_before = time.monotonic()
    r.close()

    time.sleep(max(0.0, 0.4 - (time.monotonic() - t_short)))  # "short" has expired
    b = restart(a, start, "--restore", str(d), "--dir", str(made(tmp_path / "b")))
    r = b.client()
    assert r.get("plain") == b"value"
    assert r.get(b"bin\x00key") == b"\x00\xff\r\nbinary"
    assert r.incr("counter") == 43
    assert r.get("short") is None and r.exists("short") == 0
    # the TTL is an absolute time: it kept counting down while no server ran
    elapsed_ms = (time.monotonic() - t_before) * 1000
    pttl_after = r.pttl("ttl")
    assert 0 < pttl_after <= pttl_before
    assert abs(pttl_before - elapsed_ms - pttl_after) < 1000
    assert r.ttl("plain") == -1
    assert r.lrange("list", 0, -1) == [b"head", b"a", b"", b"c" * 100_000, b"d"]
    assert r.type("list") == b"list"
    assert r.dbsize() == 5

    rc = ReplayClient(connection=r)
    assert rc.tables() == tables
    for t in tables:
        assert rc.info(t) == before[t], t
    assert "restored 5 keys and 3 tables" in b.log_tail()
    assert persistence(r)["rdb_last_load_keys_loaded"] == 5
    # new items continue the ids; MAX still means the saved max
    assert rc.add("ring", [1.0], [b"new"]).tolist() == [before["ring"]["next_id"]]
    assert rc.add("wide", None, [b"max2"]).tolist() == [4]
    after = rc.info("wide")
    assert after["max_priority"] == before["wide"]["max_priority"]
    assert after["total_priority"] == pytest.approx(
        before["wide"]["total_priority"] + before["wide"]["max_priority"])
    assert rc.info("empty")["size"] == 0 and rc.add("empty", [1], [b"e"]).tolist() == [0]


def test_sampling_after_restore_matches_before(start: Start, tmp_path: Path) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d), "--seed", "11")
    r = a.client()
    rc = ReplayClient(connection=r)
    rc.create("d", 16, alpha=1.0, epsilon=0.0)
    rc.add("d", np.arange(1, 17, dtype=float), [b"%d" % i for i in range(16)])
    # 8 more: the ring wraps, ids 8..23 are live; a few priorities change
    ids = rc.add("d", np.arange(1, 9, dtype=float) * 2.5, [b"%d" % i for i in range(16, 24)])
    rc.update("d", [9, 12, 20, int(ids[-1])], [0.0, 40.0, 0.0, 11.0])
    prio = {i: float(i + 1) for i in range(8, 16)}
    prio.update({16 + k: (k + 1) * 2.5 for k in range(8)})
    prio.update({9: 0.0, 12: 40.0, 20: 0.0, 23: 11.0})
    assert r.save() is True  # before any draw: both samplers start from the same RNG state
    before = rc.info("d")
    draws_a = sample_ids(r, "d", 4096, 8)
    b = restart(a, start, "--restore", str(d), "--dir", str(made(tmp_path / "b")))
    r = b.client()
    rc = ReplayClient(connection=r)
    after = rc.info("d")
    for k in ("size", "next_id", "total_priority", "min_priority", "max_priority"):
        assert after[k] == before[k], k
    draws_b = sample_ids(r, "d", 4096, 8)

    total = sum(prio.values())
    for draws in (draws_a, draws_b):
        seen = Counter(draws)
        assert seen[9] == 0 and seen[20] == 0  # stored priority 0: never drawn
        assert set(seen) <= {i for i, p in prio.items() if p > 0}
        n = len(draws)
        chi2 = sum((seen[i] - n * p / total) ** 2 / (n * p / total) for i, p in prio.items() if p)
        df = sum(1 for p in prio.values() if p) - 1
        assert chi2 < df + 6 * math.sqrt(2 * df), (chi2, seen)
    # Same stored priorities on the same slots and the same seed: the very same draws.
    assert draws_a == draws_b


def test_corrupt_and_truncated_snapshots_fall_back(start: Start, tmp_path: Path) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d))
    r = a.client()
    for gen in range(1, 5):
        r.set("gen", gen)
        ReplayClient(connection=r).create(f"t{gen}", 4)
        assert r.save() is True
    files = snapshots(d)
    assert len(files) == 3  # the oldest of four went
    newest, middle, oldest = files[2], files[1], files[0]
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])
    data = bytearray(middle.read_bytes())
    data[len(data) // 2] ^= 0x04
    middle.write_bytes(bytes(data))

    b = restart(a, start, "--restore", str(d), "--dir", str(d))
    r = b.client()
    assert r.get("gen") == b"2"
    assert sorted(ReplayClient(connection=r).tables()) == ["t1", "t2"]
    lines = corrupt_lines(b)
    assert len(lines) == 2, b.log_tail()
    assert str(newest) in lines[0] and "truncated" in lines[0] and "not loaded" in lines[0]
    assert str(middle) in lines[1] and "checksum mismatch" in lines[1]
    assert "not loaded" in lines[1]
    assert f"from {oldest}" in b.log_tail()


def test_bgsave_while_clients_write(start: Start, tmp_path: Path) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d))
    r = a.client()
    rc = ReplayClient(connection=r)
    rc.create("t", 50_000)
    r.set("blob", os.urandom(4 << 20))
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        w = a.client()
        i = 0
        while not stop.is_set():
            pipe = w.pipeline(transaction=False)
            for _ in range(200):
                pipe.set(f"w:{i}", i)
                pipe.execute_command("REPLAY.ADD", "t", 1, b"item-%d" % i)
                i += 1
            pipe.execute()
            written[0] = i
        w.close()

    th = threading.Thread(target=writer)
    th.start()
    try:
        while written[0] < 2000:
            time.sleep(0.01)
        with a.raw() as c:
            c.send(c.command("BGSAVE") + c.command("BGSAVE"))
            assert c.read_reply() == "Background saving started"
            err = c.read_reply()
            assert err.message == b"ERR Background save already in progress"
        p = wait_bgsave(r)
        assert p["rdb_last_bgsave_status"] == "ok" and p["rdb_saves"] == 1
        time.sleep(0.1)  # and the writes go on after the save
    finally:
        stop.set()
        th.join()
    assert abs(r.lastsave().timestamp() - time.time()) < 60
    assert len(snapshots(d)) == 1 and not [p for p in d.iterdir() if p.name.startswith(".")]

    b = restart(a, start, "--restore", str(d), "--dir", str(made(tmp_path / "b")))
    r = b.client()
    assert corrupt_lines(b) == []
    keys = sorted(int(k[2:]) for k in r.keys("w:*"))
    # one instant: every write before the fork, none after it
    assert keys == list(range(len(keys))) and 2000 <= len(keys) < written[0]
    nxt = table_info(r, "t")["next_id"]
    assert len(keys) - 1 <= nxt <= len(keys)
    assert len(r.get("blob")) == 4 << 20


def test_save_on_shutdown(start: Start, tmp_path: Path) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d), "--save-on-shutdown")
    r = a.client()
    r.set("kept", "yes")
    ReplayClient(connection=r).create("t", 10)
    ReplayClient(connection=r).add("t", [1, 2], [b"a", b"b"])
    r.close()
    t0 = time.monotonic()
    a.proc.send_signal(signal.SIGTERM)
    assert a.wait(5.0) == 0, a.log_tail()
    assert time.monotonic() - t0 < 5.0
    assert len(snapshots(d)) == 1
    b = start("--restore", str(d), "--dir", str(made(tmp_path / "b")))
    r = b.client()
    assert r.get("kept") == b"yes"
    assert table_info(r, "t")["size"] == 2


def test_big_value_and_100k_items_round_trip(start: Start, tmp_path: Path) -> None:
    d1, d2 = tmp_path / "a", tmp_path / "b"
    d1.mkdir()
    d2.mkdir()
    a = start("--dir", str(d1))
    r = a.client()
    blob = os.urandom(13 << 20)
    r.set("params", blob)
    rng = random.Random(1)
    items = [rng.randbytes(rng.randrange(0, 200)) for _ in range(100_000)]
    rc = ReplayClient(connection=r)
    rc.create("big", 100_000, alpha=1.0, epsilon=0.0)
    pipe = r.pipeline(transaction=False)
    for k in range(0, len(items), 2000):
        chunk = items[k : k + 2000]
        args: list[Any] = []
        for it in chunk:
            args += [1, it]
        pipe.execute_command("REPLAY.ADD", "big", *args)
    pipe.execute()
    assert r.save() is True
    info = rc.info("big")
    (fa,) = snapshots(d1)

    b = restart(a, start, "--restore", str(d1), "--dir", str(d2))
    r = b.client()
    # Saving the restored server gives the same bytes (but for the header's
    # time and the CRC over it): every item, offset, priority and counter.
    assert r.save() is True
    (fb,) = snapshots(d2)
    da, db = fa.read_bytes(), fb.read_bytes()
    assert len(da) == len(db) > (13 << 20) + 100_000 * 28
    assert hashlib.sha256(da[HEADER:-CRC]).digest() == hashlib.sha256(db[HEADER:-CRC]).digest()
    rc = ReplayClient(connection=r)
    assert hashlib.sha256(r.get("params")).digest() == hashlib.sha256(blob).digest()
    assert rc.info("big") == info
    # equal priorities, 100k strata: every item comes back once, byte for byte
    s = rc.sample("big", 100_000)
    assert len(set(s.ids.tolist())) >= 99_900
    assert all(item == items[i] for i, item in zip(s.ids.tolist(), s.items, strict=True))


def test_restore_if_present_from_empty_dir_and_errors(start: Start, tmp_path: Path) -> None:
    empty = made(tmp_path / "empty")
    gone = made(tmp_path / "gone")
    a = start("--restore-if-present", str(empty), "--dir", str(gone))
    assert "nothing to restore" in a.log_tail()
    r = a.client()
    assert r.dbsize() == 0
    p = persistence(r)
    assert p["rdb_bgsave_in_progress"] == 0 and p["rdb_saves"] == 0
    assert p["rdb_last_bgsave_status"] == "ok" and p["snapshot_last_error"] == ""
    assert abs(r.lastsave().timestamp() - time.time()) < 120
    gone.rmdir()  # the directory goes away under the running server
    with pytest.raises(redis.ResponseError, match=r"snapshot failed: cannot create .*gone"):
        r.save()
    p = persistence(r)
    assert p["rdb_last_bgsave_status"] == "err" and str(gone) in p["snapshot_last_error"]
    with a.raw() as c:
        assert c.call("BGSAVE", "NOW").message.startswith(b"ERR syntax error")
        assert c.call("SAVE", "x").message.startswith(b"ERR wrong number of arguments")
