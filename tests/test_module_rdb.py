"""The module host's tables in the RDB: stock redis-server with the
module saves every replay table as the aux data of the module's data type
("ir_tables", the engine's records of replay/persist.h) and loads them back
on a restart, a DEBUG RELOAD or a replica's sync.

Each round trip (SAVE, BGSAVE, DEBUG RELOAD; the native server's snapshot for
comparison) must keep every table: the same REPLAY.INFO, columns, chunk
store, items, and with the same seed the same draws as the same tables drew
without the round trip. A payload that is corrupt or not the module's fails
the load with one line saying why (Redis then stops, as it does for any RDB
it cannot read), never a crash.
"""

from __future__ import annotations

import shutil
import signal
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import RawConn, ServerProcess
from test_module_host import SEED, _module_path, asan_module

BIG = 3 << 20  # one item of 3 MiB: saved as string buffers of 1 MiB each


def item(t: str, i: int) -> bytes:
    """The bytes of table t's item i (every table's items can be checked)."""
    if t == "prio" and i == 35:
        return b"big:" + bytes(range(256)) * (BIG // 256)
    return f"{t}:{i}:".encode() * (1 + i % 5)


def _adds(t: str, ids: range, prio: Callable[[int], float] = lambda i: 1.0 + i % 7) -> list[Any]:
    args: list[Any] = ["REPLAY.ADD", t]
    for i in ids:
        args += [prio(i), item(t, i)]
    return args


OBS = bytes(range(4 * 12))
REW = struct.pack("<12f", *range(12))

# Tables of every kind. Only the selectors without randomness (fifo, lifo,
# heaps) and "drawn" draw before the save, so that every other table's
# sampler is where its seed put it: a table restored draws from its seed.
FILL: list[list[Any]] = [
    # ring mode, prioritized: wraps (capacity 32, 40 items), updates, a 3 MiB item
    ["REPLAY.CREATE", "prio", "CAPACITY", 32, "ALPHA", 0.7],
    _adds("prio", range(40)),
    ["REPLAY.UPDATE", "prio", struct.pack("<3q", 10, 20, 39), struct.pack("<3f", 9, 0, 2.5)],
    # ring mode with times sampled (TTMS): drawn from before the save
    ["REPLAY.CREATE", "drawn", "CAPACITY", 16],
    _adds("drawn", range(10)),
    ["REPLAY.SAMPLE", "drawn", 5],
    # general mode: uniform sampler, lifo remover, MAX_TIMES_SAMPLED
    ["REPLAY.CREATE", "uni", "CAPACITY", 50, "SAMPLER", "uniform", "REMOVER", "lifo",
     "MAX_TIMES_SAMPLED", 3],
    _adds("uni", range(20)),
    # fifo with MAX_TIMES_SAMPLED 2: some items consumed before the save
    ["REPLAY.CREATE", "fifo", "CAPACITY", 10, "SAMPLER", "fifo", "REMOVER", "fifo",
     "MAX_TIMES_SAMPLED", 2],
    _adds("fifo", range(8)),
    ["REPLAY.SAMPLE", "fifo", 3],
    ["REPLAY.SAMPLE", "fifo", 2],
    # lifo sampler, minheap remover: evictions by priority
    ["REPLAY.CREATE", "lifo", "CAPACITY", 10, "SAMPLER", "lifo", "REMOVER", "minheap"],
    _adds("lifo", range(12), lambda i: float((i * 7) % 11)),
    ["REPLAY.SAMPLE", "lifo", 2],
    # Reverb's Queue(4)
    ["REPLAY.CREATE", "q", "QUEUE", 4],
    _adds("q", range(3)),
    ["REPLAY.SAMPLE", "q", 1],
    # the rate limiter (a maxheap sampler: drawn from before the save without the RNG)
    ["REPLAY.CREATE", "lim", "CAPACITY", 100, "MIN_SIZE", 3, "SAMPLES_PER_INSERT", 2,
     "ERROR_BUFFER", 4, "SAMPLER", "maxheap"],
    _adds("lim", range(5)),
    ["REPLAY.SAMPLE", "lim", 2],
    # an empty table
    ["REPLAY.CREATE", "empty", "CAPACITY", 5],
    # a TRAJECTORY table over an open stream's chunks, and a dropped stream's
    ["REPLAY.STREAM", "s", "FIELDS", 2, "obs", "uint8", "4", "rew", "float32", "", "CHUNK", 4],
    ["REPLAY.APPEND", "s", 12, OBS, REW],
    ["REPLAY.STREAM", "old", "FIELDS", 1, "x", "int32", "2", "CHUNK", 2],
    ["REPLAY.APPEND", "old", 4, struct.pack("<8i", *range(8))],
    ["REPLAY.CREATE", "traj", "CAPACITY", 16, "TRAJECTORY"],
    ["REPLAY.ITEM", "traj", 1, 2, "o", "s", "obs", 0, 3, "r", "s", "rew", 0, 3,
     2, 2, "o", "s", "obs", 4, 3, "r", "s", "rew", 4, 3,
     3, 2, "o", "s", "obs", 8, 3, "r", "s", "rew", 8, 3],
    ["REPLAY.CREATE", "traj2", "CAPACITY", 4, "SAMPLER", "fifo", "TRAJECTORY"],
    ["REPLAY.ITEM", "traj2", 1, 1, "x", "old", "x", 1, 3],
    ["REPLAY.STREAM", "old", "END"],
    ["REPLAY.STREAM", "old", "DROP"],
]
TABLES = ["prio", "drawn", "uni", "fifo", "lifo", "q", "lim", "empty", "traj", "traj2"]

# What the tables answer after the round trip: draws (items checked), then
# more items (ids continue, the rings evict as before), draws again.
PROBE: list[list[Any]] = [
    ["REPLAY.SAMPLE", "prio", 64, "WITHINFO"],
    ["REPLAY.SAMPLE", "uni", 8],
    ["REPLAY.SAMPLE", "fifo", 2],
    ["REPLAY.SAMPLE", "lifo", 3],
    ["REPLAY.SAMPLE", "q", 2],
    ["REPLAY.SAMPLE", "lim", 3],
    ["REPLAY.SAMPLE", "traj", 6, "WITHINFO"],
    ["REPLAY.SAMPLE", "traj2", 1],
    ["REPLAY.SAMPLE", "empty", 1],
    _adds("prio", range(40, 44)),
    ["REPLAY.ADD", "prio", "MAX", b"max"],
    _adds("uni", range(20, 23)),
    _adds("lifo", range(12, 14), lambda i: float(i)),
    _adds("q", range(3, 6)),
    ["REPLAY.APPEND", "s", 4, OBS[:16], REW[:16]],
    ["REPLAY.ITEM", "traj", 1, 1, "o", "s", "obs", 12, 3, "r", "s", "rew", 12, 3],
    ["REPLAY.SAMPLE", "prio", 32],
    ["REPLAY.SAMPLE", "uni", 30],
    ["REPLAY.SAMPLE", "traj", 4],
    ["REPLAY.CREATE", "later", "CAPACITY", 4],  # its seed follows the tables restored
    _adds("later", range(4)),
    ["REPLAY.SAMPLE", "later", 8],
]
# The table drawn from with the RNG before the save draws anew from its seed
# once restored: compared between the hosts only, not with the live server.
PROBE_DRAWN: list[list[Any]] = [["REPLAY.SAMPLE", "drawn", 16]]


def run(r: redis.Redis, script: list[list[Any]]) -> list[Any]:
    out: list[Any] = []
    for args in script:
        try:
            out.append(r.execute_command(*args))
        except redis.ResponseError as e:
            out.append(f"error: {e}")
    return out


def fill(r: redis.Redis) -> None:
    errors = [(args[:3], rep) for args, rep in zip(FILL, run(r, FILL), strict=True)
              if isinstance(rep, str)]
    assert errors == []


def state(r: redis.Redis) -> dict[str, Any]:
    names = r.execute_command("REPLAY.LIST")
    st: dict[str, Any] = {"list": names, "chunks": r.execute_command("REPLAY.CHUNKS")}
    for t in names:
        v = r.execute_command("REPLAY.INFO", t)
        info = dict(zip(v[::2], v[1::2], strict=True))
        # the sum tree adds the loaded priorities in another order than it
        # added them (the native snapshot's restore does the same): the last bits
        info[b"total_priority"] = pytest.approx(float(info[b"total_priority"]), rel=1e-12)
        st[f"info {t!r}"] = info
        if t.startswith(b"traj"):
            st[f"columns {t!r}"] = r.execute_command("REPLAY.COLUMNS", t)
    return st


def check_items(script: list[list[Any]], replies: list[Any]) -> int:
    """Every item an opaque table's SAMPLE returned is the one ADD put under its id."""
    checked = 0
    for args, rep in zip(script, replies, strict=True):
        if args[0] != "REPLAY.SAMPLE" or args[1].startswith("traj") or isinstance(rep, str):
            continue
        ids = struct.unpack(f"<{len(rep[0]) // 8}q", rep[0])
        for id_, data in zip(ids, rep[2], strict=True):
            assert data == (b"max" if data == b"max" else item(args[1], id_)), (args[1], id_)
            checked += 1
    return checked


def module(workdir: Path) -> ServerProcess:
    return ServerProcess("redis", workdir, ("--loadmodule", _module_path(), "SEED", SEED))


def native(workdir: Path, *flags: str) -> ServerProcess:
    return ServerProcess("inreplay", workdir, ("--seed", SEED, *flags))


def module_info(r: redis.Redis) -> dict[str, Any]:
    """INFO inreplay without what is not the tables' state: their memory (a loaded
    arena is sized to its items, a filled one grew) and how blocked calls ended."""
    return {k: v for k, v in r.info("inreplay").items()
            if k != "inreplay_memory" and "blocked" not in k}


def bgsave(r: redis.Redis) -> None:
    assert r.bgsave()
    deadline = time.monotonic() + 30
    while r.info("persistence")["rdb_bgsave_in_progress"]:
        assert time.monotonic() < deadline, "BGSAVE did not end"
        time.sleep(0.02)
    assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """The probe's replies from tables that never left memory."""
    srv = module(tmp_path_factory.mktemp("ref"))
    try:
        r = srv.client()
        fill(r)
        out = run(r, PROBE)
        r.close()
    finally:
        srv.stop()
    assert check_items(PROBE, out) > 100
    return out


@pytest.mark.parametrize("how", ["save", "bgsave", "debug-reload", "shutdown-save"])
def test_every_table_survives_the_round_trip(how: str, tmp_path: Path,
                                             reference: list[Any]) -> None:
    a = module(tmp_path)
    r = a.client()
    fill(r)
    before, info_before = state(r), module_info(r)
    assert len(before["list"]) == len(TABLES)
    if how == "debug-reload":
        # a client the queue's limiter holds: its table is replaced under it
        waiter = RawConn("127.0.0.1", a.port, 30)
        waiter.send(waiter.command("REPLAY.SAMPLE", "q", 3, "TIMEOUT", 20))
        deadline = time.monotonic() + 10
        while r.info("inreplay")["inreplay_blocked_clients"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert r.execute_command("DEBUG", "RELOAD") == b"OK"
        # Redis empties its data before it loads (FLUSHALL's event): the table goes
        assert waiter.read_reply().message == (b"NOTABLE table 'q' was dropped while the "
                                               b"client waited")
        waiter.close()
        b = a
    else:
        if how == "save":
            assert r.save() is True
        elif how == "bgsave":
            bgsave(r)
        r.close()
        if how == "shutdown-save":
            a.client().shutdown(save=True)
            assert a.wait(30) == 0
        else:
            assert a.stop() == 0
        b = module(tmp_path)  # the same directory: its dump.rdb
        r = b.client()
    try:
        assert state(r) == before
        assert module_info(r) == info_before
        loaded = f"loaded {len(TABLES)} replay tables and 1 streams from the RDB"
        assert loaded in b.log_tail(1 << 16)
        after = run(r, PROBE)
        assert check_items(PROBE, after) > 100
        assert after == reference
        r.close()
    finally:
        b.stop()


def test_a_restart_keeps_what_the_live_server_would_draw(tmp_path: Path) -> None:
    """SAVE, draw on the live server, restart from the file: the same draws."""
    a = module(tmp_path)
    r = a.client()
    fill(r)
    assert r.save() is True
    live = run(r, PROBE)
    r.close()
    assert a.stop() == 0
    b = module(tmp_path)
    r = b.client()
    assert run(r, PROBE) == live
    r.close()
    assert b.stop() == 0


def test_the_module_round_trip_is_the_native_snapshot_round_trip(tmp_path: Path) -> None:
    """The same session with the same seed through the native server's snapshot
    and through the module's RDB: the same tables and the same replies after."""
    d = tmp_path / "snap"
    d.mkdir()
    n = native(tmp_path / "n1", "--dir", str(d))
    rn = n.client()
    fill(rn)
    assert rn.save() is True
    rn.close()
    assert n.stop() == 0
    n = native(tmp_path / "n2", "--restore", str(d), "--dir", str(d))
    rn = n.client()
    m = module(tmp_path / "m")
    rm = m.client()
    fill(rm)
    assert rm.save() is True
    rm.close()
    assert m.stop() == 0
    m = module(tmp_path / "m")
    rm = m.client()
    try:
        assert state(rm) == state(rn)
        assert run(rm, PROBE + PROBE_DRAWN) == run(rn, PROBE + PROBE_DRAWN)
    finally:
        rn.close()
        rm.close()
        n.stop()
        m.stop()


def test_a_restart_without_tables_and_an_rdb_without_the_aux(tmp_path: Path) -> None:
    """No table: the aux data says so and loads as none. An RDB saved without
    the module (no aux data) leaves the module's tables as they are."""
    a = module(tmp_path)
    r = a.client()
    r.set("k", "v")
    assert r.save() is True
    r.close()
    assert a.stop() == 0
    b = module(tmp_path)
    r = b.client()
    assert r.get("k") == b"v" and r.execute_command("REPLAY.LIST") == []
    assert "loaded 0 replay tables and 0 streams" in b.log_tail()
    r.close()
    assert b.stop() == 0
    plain = ServerProcess("redis", tmp_path / "plain")
    rp = plain.client()
    rp.set("k", "plain")
    assert rp.save() is True
    rp.close()
    assert plain.stop() == 0
    c = module(tmp_path / "plain")
    r = c.client()
    assert r.get("k") == b"plain" and r.execute_command("REPLAY.LIST") == []
    r.execute_command("REPLAY.CREATE", "t", "CAPACITY", 2)
    r.close()
    assert c.stop() == 0


def test_a_replica_gets_the_tables_with_its_full_sync(tmp_path: Path) -> None:
    """REPLICAOF: the master's RDB (written by a forked child to the socket)
    carries the tables; the replica's replace its own."""
    m = module(tmp_path / "master")
    rm = m.client()
    fill(rm)
    before = state(rm)
    rep = module(tmp_path / "replica")
    rr = rep.client()
    rr.execute_command("REPLAY.CREATE", "replaced", "CAPACITY", 2)
    try:
        rr.execute_command("REPLICAOF", "127.0.0.1", m.port)
        deadline = time.monotonic() + 30
        while rr.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, rep.log_tail()
            time.sleep(0.05)
        assert state(rr) == before
        rr.close()
        rm.close()
    finally:
        rep.stop()
        m.stop()


# ---- payloads the module cannot load --------------------------------------------


def _type_id(encver: int) -> int:
    """Redis's 64-bit module type id: the 9-character name in 6-bit symbols, the
    encoding version in the low 10 bits (moduleTypeEncodeId)."""
    chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    v = 0
    for ch in "ir_tables":
        v = (v << 6) | chars.index(ch)
    return (v << 10) | encver


def _uint(tag: bytes) -> bytes:
    """A SaveUnsigned of a record tag in the RDB: the UINT opcode, then the
    32-bit length encoding (0x80, big-endian) of the tag's little-endian value."""
    return b"\x02\x80" + tag[::-1]


def _first(data: bytes, pat: bytes) -> int:
    assert pat in data, pat
    return data.index(pat)


def _len_size(b: bytes | bytearray, at: int) -> int:
    """Bytes of the RDB length encoding at b[at]: 1, 2, 5 or 9."""
    kind = b[at] >> 6
    return 1 if kind == 0 else 2 if kind == 1 else 5 if b[at] == 0x80 else 9


def _corrupt(data: bytes, case: str) -> tuple[bytes, str]:
    """data (a dump.rdb) with one change, and the line the load must log."""
    b = bytearray(data)
    if case == "unknown-record":
        at = _first(data, _uint(b"TABL"))
        b[at + 2:at + 6] = _uint(b"TABX")[2:]
        why = "unknown record type 54414258"
    elif case == "newer-encoding":
        old = b"\x81" + _type_id(1).to_bytes(8, "big")
        at = _first(data, old)
        b[at:at + 9] = b"\x81" + _type_id(2).to_bytes(8, "big")
        why = "encoding version 2; this module reads version 1"
    elif case == "short-length":
        at = _first(data, _uint(b"TABL")) + 6
        assert b[at] == 2  # UINT, then the length: 5 in the same number of bytes
        size = _len_size(b, at + 1)
        b[at + 1:at + 1 + size] = {1: b"\x05", 2: b"\x40\x05", 5: b"\x80\0\0\0\x05",
                                   9: b"\x81" + bytes(7) + b"\x05"}[size]
        why = "(TABL): table name runs past the record"
    elif case == "done-count":
        at = _first(data, _uint(b"DONE")) + 6
        assert b[at:at + 3] == b"\x02\x08\x02" and b[at + 3] < 56  # length 8, n tables
        n = b[at + 3]
        b[at + 3] = n + 7
        why = f"the DONE record does not count the {n} tables loaded"
    elif case == "foreign-value":  # a string where the tag's integer should be
        at = _first(data, _uint(b"TABL"))
        b[at] = 5
        why = "the RDB ends early or holds other data there"
    else:
        raise ValueError(case)
    b[-8:] = bytes(8)  # checksum 0: "saved with checksum disabled", not checked
    return bytes(b), why


CASES = ["unknown-record", "newer-encoding", "short-length", "done-count", "foreign-value"]


def _saved_dump(tmp_path: Path) -> bytes:
    a = module(tmp_path / "saved")
    r = a.client()
    r.set("key", "value")
    run(r, [["REPLAY.CREATE", "prio", "CAPACITY", 32], _adds("prio", range(4))])
    assert r.save() is True
    r.close()
    assert a.stop() == 0
    return (tmp_path / "saved" / "dump.rdb").read_bytes()


def _load_fails(so: str, d: Path, why: str, env: dict[str, str] | None = None) -> str:
    """redis-server with the module over d's dump.rdb: after one line of ours
    and Redis's own, it stops as for any RDB it cannot read (it runs
    redis-check-rdb, which exits 0 when the file's structure is sound, else 1),
    never killed by a signal."""
    from pyctl.proc import free_ports

    server = shutil.which("redis-server")
    assert server
    port = free_ports("127.0.0.1", 1)[0]
    log = d / "load.log"
    with open(log, "wb") as out:
        p = subprocess.run([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", str(d), "--loadmodule", so,
                            "SEED", SEED], stdout=out, stderr=subprocess.STDOUT, timeout=60,
                           env=env)
    text = log.read_text(errors="replace")
    assert p.returncode in (0, 1), (p.returncode, text[-3000:])
    ours = [ln for ln in text.splitlines() if "<inreplay>" in ln]
    assert len(ours) == 1 and why in ours[0], text[-3000:]
    assert "not able to load" in text  # Redis's own line after ours
    return text


@pytest.mark.parametrize("case", CASES)
def test_a_bad_payload_fails_the_load_in_one_line(case: str, tmp_path: Path) -> None:
    data, why = _corrupt(_saved_dump(tmp_path), case)
    d = tmp_path / case
    d.mkdir()
    (d / "dump.rdb").write_bytes(data)
    _load_fails(_module_path(), d, why)


def test_round_trips_and_bad_payloads_run_clean_under_asan(tmp_path: Path) -> None:
    """The ASan/UBSan build of the module (build-asan): SAVE, BGSAVE, DEBUG
    RELOAD, a restart, then every bad payload: nothing reported."""
    so, env = asan_module(tmp_path)
    server = shutil.which("redis-server")
    assert server
    from pyctl.proc import free_ports

    d = tmp_path / "rt"
    d.mkdir()

    def start() -> tuple[subprocess.Popen[bytes], redis.Redis]:
        port = free_ports("127.0.0.1", 1)[0]
        proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--enable-debug-command", "yes",
                                 "--dir", str(d), "--loadmodule", str(so), "SEED", SEED],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        r = redis.Redis(port=port, socket_timeout=60)
        for _ in range(400):
            try:
                r.ping()
                return proc, r
            except redis.ConnectionError:
                assert proc.poll() is None
                time.sleep(0.05)
        raise AssertionError("the ASan server did not start")

    proc, r = start()
    try:
        fill(r)
        before = state(r)
        assert r.save() is True
        bgsave(r)
        # a client the queue's limiter holds: the table it waits on is replaced
        waiter = RawConn("127.0.0.1", r.connection_pool.connection_kwargs["port"], 30)
        waiter.send(waiter.command("REPLAY.SAMPLE", "q", 3, "TIMEOUT", 20))
        deadline = time.monotonic() + 10
        while state(r)["info b'q'"][b"blocked_samplers"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert r.execute_command("DEBUG", "RELOAD") == b"OK"
        # Redis empties its data before it loads (FLUSHALL's event): the table goes
        assert waiter.read_reply().message == (b"NOTABLE table 'q' was dropped while the "
                                               b"client waited")
        waiter.close()
        assert state(r) == before
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    proc, r = start()
    try:
        assert state(r) == before
        check_items(PROBE, run(r, PROBE))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    data = (d / "dump.rdb").read_bytes()
    for case in CASES:
        bad, why = _corrupt(data, case)
        dc = tmp_path / case
        dc.mkdir()
        (dc / "dump.rdb").write_bytes(bad)
        _load_fails(str(so), dc, why, env)
    reports = sorted(tmp_path.glob("asan.log*"))
    text = "\n".join(p.read_text() for p in reports)
    assert "ERROR: AddressSanitizer" not in text and "runtime error" not in text, text[:4000]
