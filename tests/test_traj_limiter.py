"""The rate limiter on TRAJECTORY tables: REPLAY.ITEM is the insert.

SAMPLES_PER_INSERT/ERROR_BUFFER and QUEUE/STACK hold REPLAY.ITEM as they hold
REPLAY.ADD (the same gate in t_replay.c): without TIMEOUT a held ITEM fails at
once with -RATELIMITED, with TIMEOUT it waits as a blocked client until a
sample lets it run; samples wait for ITEMs likewise. A held ITEM applies
nothing (no item, no chunk reference) until it runs; a snapshot keeps a
TRAJECTORY table's limiter options and counters.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from pyctl.errors import decode_info
from pyctl.trajectory import TrajectoryWriter, create_trajectory_table, sample_trajectories

if TYPE_CHECKING:
    from conftest import RawConn, ServerProcess

STEPS = 64  # steps 0..63 of stream "s": field "x" (uint8 scalar), step i holds i


def info(c: RawConn, table: str = "t") -> dict[str, Any]:
    return decode_info(c.call("REPLAY.INFO", table))


def chunks(c: RawConn) -> dict[str, Any]:
    return decode_info(c.call("REPLAY.CHUNKS"))


def wait_info(c: RawConn, field: str, value: float, table: str = "t") -> None:
    deadline = time.monotonic() + 5
    while info(c, table)[field] != value:
        assert time.monotonic() < deadline, f"{field} never became {value}: {info(c, table)}"
        time.sleep(0.005)


def err(reply: Any) -> str:
    assert type(reply).__name__ == "RespError", reply
    return reply.message.decode()


def item_args(table: str, *firsts: int) -> list[str | int]:
    """REPLAY.ITEM of one item per first step: one column "x", one step long."""
    args: list[str | int] = ["REPLAY.ITEM", table]
    for f in firsts:
        args += ["1", 1, "x", "s", "x", f, 1]
    return args


def item(c: RawConn, table: str, *firsts: int, timeout: str | None = None) -> Any:
    extra: list[str | int] = ["TIMEOUT", timeout] if timeout is not None else []
    return c.call(*item_args(table, *firsts), *extra)


def send_item(w: RawConn, table: str, *firsts: int, timeout: str = "5") -> None:
    w.send(w.command(*item_args(table, *firsts), "TIMEOUT", timeout))


def sampled_steps(reply: Any) -> list[int]:
    """The steps a sample of one-step items drew (the x column's bytes)."""
    return list(reply[2][0])


def setup_stream(c: RawConn) -> None:
    c.call("REPLAY.STREAM", "s", "FIELDS", 1, "x", "uint8", "", "CHUNK", 8, "HISTORY", 1024)
    c.call("REPLAY.APPEND", "s", STEPS, bytes(range(STEPS)))


@pytest.fixture
def c(replay_server: ServerProcess) -> Iterator[RawConn]:
    conn = replay_server.raw()
    setup_stream(conn)
    yield conn
    conn.close()


@pytest.fixture
def conns(replay_server: ServerProcess) -> Iterator[Callable[[], RawConn]]:
    made: list[RawConn] = []

    def make() -> RawConn:
        made.append(replay_server.raw())
        return made[-1]

    yield make
    for m in made:
        m.close()


def test_create_accepts_limiters_on_trajectory_tables(c: RawConn) -> None:
    assert c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 2,
                  "SAMPLES_PER_INSERT", "1.5", "ERROR_BUFFER", 3, "TRAJECTORY") == "OK"
    i = info(c)
    assert (i["min_size"], i["samples_per_insert"], i["error_buffer"]) == (2, 1.5, 3)
    assert c.call("REPLAY.CREATE", "q", "QUEUE", 4, "TRAJECTORY") == "OK"
    assert c.call("REPLAY.CREATE", "k", "STACK", 3, "TRAJECTORY") == "OK"
    q, k = info(c, "q"), info(c, "k")
    assert (q["queue_size"], q["sampler"], q["max_times_sampled"]) == (4, "fifo", 1)
    assert (k["queue_size"], k["sampler"], k["remover"]) == (3, "lifo", "lifo")
    # the preset's own rules hold with TRAJECTORY too
    assert "drop CAPACITY" in err(c.call("REPLAY.CREATE", "x", "QUEUE", 4, "CAPACITY", 4,
                                         "TRAJECTORY"))


def test_item_over_the_ratio_blocks_until_a_sample(c: RawConn,
                                                   conns: Callable[[], RawConn]) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 2, "SAMPLES_PER_INSERT", 2,
           "ERROR_BUFFER", 2, "TRAJECTORY")
    assert item(c, "t", 0, 1, 2) == [0, 1, 2]  # below MIN_SIZE; error 0 - 2 x (3 - 2) = -2
    assert item(c, "t", 3) == [3]  # -2 >= -2: runs; -> -4
    refs = chunks(c)["references"]
    assert err(item(c, "t", 4)) == (
        "RATELIMITED table 't' is 4.0 samples behind SAMPLES_PER_INSERT 2 x inserts, "
        "ERROR_BUFFER is 2: insert waits (use TIMEOUT to wait)")
    w = conns()
    send_item(w, "t", 4)
    wait_info(c, "blocked_inserters", 1)
    c.call("REPLAY.SAMPLE", "t", 1)  # -4 -> -3: still too far behind
    w.expect_silence(0.05)
    assert info(c)["size"] == 4 and chunks(c)["references"] == refs  # nothing applied
    c.call("REPLAY.SAMPLE", "t", 1)  # -3 -> -2: the ITEM runs
    assert w.read_reply() == [4]
    i = info(c)
    assert (i["size"], i["limiter_inserts"], i["limiter_samples"], i["limiter_error"]) == (
        5, 5, 2, -4.0)
    assert i["blocked_inserters"] == 0


def test_sample_over_the_ratio_waits_for_an_item(c: RawConn,
                                                 conns: Callable[[], RawConn]) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 1, "SAMPLES_PER_INSERT", 1,
           "ERROR_BUFFER", 1, "TRAJECTORY")
    item(c, "t", 7)
    c.call("REPLAY.SAMPLE", "t", 1)
    c.call("REPLAY.SAMPLE", "t", 1)  # error 2: samplers wait
    s = conns()
    s.send(s.command("REPLAY.SAMPLE", "t", 1, "TIMEOUT", 5))
    wait_info(c, "blocked_samplers", 1)
    item(c, "t", 9)  # error 1: the sample runs
    assert len(sampled_steps(s.read_reply())) == 1
    assert info(c)["blocked_samplers"] == 0


def test_queue_holds_the_extra_item_and_the_empty_sample(c: RawConn,
                                                        conns: Callable[[], RawConn]) -> None:
    c.call("REPLAY.CREATE", "q", "QUEUE", 2, "TRAJECTORY")
    # an empty queue's sample waits until an item comes, and gets it
    s = conns()
    s.send(s.command("REPLAY.SAMPLE", "q", 1, "TIMEOUT", 5))
    wait_info(c, "blocked_samplers", 1, "q")
    assert item(c, "q", 10) == [0]
    assert sampled_steps(s.read_reply()) == [10]
    assert info(c, "q")["size"] == 0
    # the (n+1)-th item waits until a sample consumes one
    assert item(c, "q", 11, 12) == [1, 2]
    assert "QUEUE 2 is full (2 items): insert waits" in err(item(c, "q", 13))
    w = conns()
    send_item(w, "q", 13)
    wait_info(c, "blocked_inserters", 1, "q")
    w.expect_silence(0.05)
    assert sampled_steps(c.call("REPLAY.SAMPLE", "q", 1)) == [11]  # fifo: the oldest
    assert w.read_reply() == [3]
    assert sampled_steps(c.call("REPLAY.SAMPLE", "q", 2)) == [12, 13]
    assert "larger than table 'q' (QUEUE 2)" in err(item(c, "q", 1, 2, 3))
    assert "has too few items" in err(c.call("REPLAY.SAMPLE", "q", 1))


def test_stack_serves_the_newest(c: RawConn, conns: Callable[[], RawConn]) -> None:
    c.call("REPLAY.CREATE", "k", "STACK", 2, "TRAJECTORY")
    item(c, "k", 20, 21)
    w = conns()
    send_item(w, "k", 22)
    wait_info(c, "blocked_inserters", 1, "k")
    assert sampled_steps(c.call("REPLAY.SAMPLE", "k", 1)) == [21]
    assert w.read_reply() == [2]
    assert sampled_steps(c.call("REPLAY.SAMPLE", "k", 2)) == [22, 20]


def test_timeout_answers_ratelimited_and_applies_nothing(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "q", "QUEUE", 1, "TRAJECTORY")
    item(c, "q", 0)
    refs, size = chunks(c)["references"], info(c, "q")["size"]
    assert err(item(c, "q", 1, timeout="0.05")) == (
        "RATELIMITED table 'q' QUEUE 1 is full (1 items): insert timed out after TIMEOUT 0.05")
    assert chunks(c)["references"] == refs and info(c, "q")["size"] == size
    assert info(c, "q")["blocked_inserters"] == 0 and info(c, "q")["waited_seconds"] > 0
    # TIMEOUT's own errors, as REPLAY.ADD's
    assert "timeout is not a float or out of range" in err(item(c, "q", 1, timeout="x"))
    assert "timeout is negative" in err(item(c, "q", 1, timeout="-1"))
    # inside MULTI the limiter answers at once
    c.call("MULTI")
    c.call(*item_args("q", 1), "TIMEOUT", 0)
    (reply,) = c.call("EXEC")
    assert "QUEUE 1 is full" in err(reply)


def test_client_disconnecting_while_held(c: RawConn, conns: Callable[[], RawConn],
                                        replay_host: str) -> None:
    c.call("REPLAY.CREATE", "q", "QUEUE", 1, "TRAJECTORY")
    item(c, "q", 0)
    refs = chunks(c)["references"]
    gone = conns()
    send_item(gone, "q", 5, timeout="0")
    keep = conns()
    send_item(keep, "q", 6, timeout="0")
    wait_info(c, "blocked_inserters", 2, "q")
    section = "inreplay" if replay_host == "module" else "stats"  # the module's own fields
    before = c.call("INFO", section).decode()
    gone.close()
    wait_info(c, "blocked_inserters", 1, "q")
    after = c.call("INFO", section).decode()

    def count(text: str) -> int:  # blocked_disconnects, or the module's inreplay_...
        return int(text.split("blocked_disconnects:")[1].split("\r\n")[0])

    assert count(after) == count(before) + 1
    assert chunks(c)["references"] == refs  # the gone ITEM applied nothing
    assert sampled_steps(c.call("REPLAY.SAMPLE", "q", 1)) == [0]
    assert keep.read_reply() == [1]
    assert sampled_steps(c.call("REPLAY.SAMPLE", "q", 1)) == [6]


def test_pipelined_append_applies_and_the_held_item_waits(c: RawConn,
                                                          conns: Callable[[], RawConn]) -> None:
    """A writer's flush: APPEND then ITEM. The APPEND applies; the ITEM waits
    and, once it runs, references the appended step; the PING after it waits too."""
    c.call("REPLAY.CREATE", "q", "QUEUE", 1, "TRAJECTORY")
    item(c, "q", 0)
    w = conns()
    w.send(w.command("REPLAY.APPEND", "s", 1, bytes([200]))
           + w.command(*item_args("q", STEPS), "TIMEOUT", 5) + w.command("PING"))
    assert w.read_reply() == STEPS + 1
    wait_info(c, "blocked_inserters", 1, "q")
    w.expect_silence(0.05)
    c.call("REPLAY.SAMPLE", "q", 1)
    assert w.read_reply() == [1]
    assert w.read_reply() == "PONG"
    assert sampled_steps(c.call("REPLAY.SAMPLE", "q", 1)) == [200]


def test_dropping_the_table_answers_a_held_item(c: RawConn,
                                                conns: Callable[[], RawConn]) -> None:
    c.call("REPLAY.CREATE", "q", "QUEUE", 1, "TRAJECTORY")
    item(c, "q", 0)
    w = conns()
    send_item(w, "q", 1, timeout="0")
    wait_info(c, "blocked_inserters", 1, "q")
    assert c.call("REPLAY.DROP", "q") == "OK"
    assert err(w.read_reply()) == "NOTABLE table 'q' was dropped while the client waited"
    assert chunks(c)["references"] == 0


@pytest.mark.native_only(reason="SAVE into inreplay's own snapshot format")
def test_snapshot_keeps_a_trajectory_tables_limiter(
        server_factory: Callable[..., ServerProcess], tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    srv = server_factory("inreplay", "--dir", str(snaps))
    c = srv.raw()
    setup_stream(c)
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 3, "SAMPLES_PER_INSERT", "1.5",
           "ERROR_BUFFER", 4, "TRAJECTORY")
    c.call("REPLAY.CREATE", "q", "QUEUE", 3, "TRAJECTORY")
    item(c, "t", *range(6))
    for _ in range(3):
        c.call("REPLAY.SAMPLE", "t", 2)
    c.call("REPLAY.SAMPLE", "t", 1)  # error 7 - 1.5 x 3 = 2.5
    item(c, "q", 30, 31, 32)
    c.call("REPLAY.SAMPLE", "q", 1)
    item(c, "q", 33)
    fields = ("size", "min_size", "samples_per_insert", "error_buffer", "limiter_inserts",
              "limiter_samples", "limiter_error", "queue_size", "sampler", "remover",
              "max_times_sampled", "consumed", "columns")
    saved = {t: {k: info(c, t)[k] for k in fields} for t in ("t", "q")}
    assert (saved["t"]["limiter_inserts"], saved["t"]["limiter_samples"]) == (6, 7)
    assert (saved["q"]["limiter_inserts"], saved["q"]["limiter_samples"]) == (4, 1)
    assert c.call("SAVE") == "OK"
    c.close()
    assert srv.stop() == 0
    again = server_factory("inreplay", "--restore", str(snaps))
    with again.raw() as c2:
        assert {t: {k: info(c2, t)[k] for k in fields} for t in ("t", "q")} == saved
        # and the restored limiter holds as before
        assert "QUEUE 3 is full (3 items)" in err(item(c2, "q", 40))
        assert sampled_steps(c2.call("REPLAY.SAMPLE", "q", 1)) == [31]
        assert item(c2, "q", 40) == [4]
        ids = struct.unpack("<2q", c2.call("REPLAY.SAMPLE", "t", 2)[0])  # 2.5 -> 4.5
        assert all(0 <= i < 6 for i in ids)
        assert "4.5 samples ahead of" in err(c2.call("REPLAY.SAMPLE", "t", 1))


def test_writer_item_timeout_waits_for_the_queue(replay_server: ServerProcess) -> None:
    """pyctl's TrajectoryWriter(item_timeout=s) sends REPLAY.ITEM ... TIMEOUT s: its
    flush waits while the QUEUE is full and returns once a sample makes room."""
    r = replay_server.client()
    create_trajectory_table(r, "wq", 2, queue=True)
    w = TrajectoryWriter(replay_server.client(), "ws", {"x": ((), np.int64)}, item_timeout=5)
    for i in range(3):
        w.append({"x": 100 + i})
        w.create_item("wq", 1.0, {"x": w.history["x"][-1]})
        if i == 1:
            assert w.flush() == [0, 1]
    got: list[list[int]] = []
    t = threading.Thread(target=lambda: got.append(w.flush()))
    t.start()
    deadline = time.monotonic() + 5
    while int(decode_info(r.execute_command("REPLAY.INFO", "wq"))["blocked_inserters"]) != 1:
        assert time.monotonic() < deadline
    assert not got
    s = sample_trajectories(r, "wq", 1)
    assert int(s.columns["x"][0, 0]) == 100
    t.join(5)
    assert got == [[2]]
    s = sample_trajectories(r, "wq", 2)
    assert [int(v) for v in s.columns["x"][:, 0]] == [101, 102]
    r.close()
    w.redis.close()


def test_held_item_is_checked_again_when_it_runs(c: RawConn,
                                                 conns: Callable[[], RawConn]) -> None:
    """A held ITEM whose steps left the stream's HISTORY while it waited answers
    the reference error when it runs, applies nothing, and the client goes on."""
    c.call("REPLAY.STREAM", "h", "FIELDS", 1, "x", "uint8", "", "CHUNK", 4, "HISTORY", 4)
    c.call("REPLAY.APPEND", "h", 4, bytes(range(4)))
    c.call("REPLAY.CREATE", "q", "QUEUE", 1, "TRAJECTORY")
    item(c, "q", 0)
    w = conns()
    w.send(w.command("REPLAY.ITEM", "q", "1", 1, "x", "h", "x", 1, 1, "TIMEOUT", 5)
           + w.command("PING"))
    wait_info(c, "blocked_inserters", 1, "q")
    c.call("REPLAY.APPEND", "h", 12, bytes(12))  # steps 0..7 leave HISTORY
    assert sampled_steps(c.call("REPLAY.SAMPLE", "q", 1)) == [0]
    assert "was freed" in err(w.read_reply())
    assert w.read_reply() == "PONG"
    i = info(c, "q")
    assert (i["size"], i["blocked_inserters"], i["limiter_inserts"]) == (0, 0, 1)
