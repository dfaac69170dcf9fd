"""The replay rate limiter: REPLAY.CREATE ... MIN_SIZE SAMPLES_PER_INSERT
ERROR_BUFFER, REPLAY.SAMPLE/ADD ... TIMEOUT waiting as blocked clients.

Every way a waiting client ends is covered: allowed (served in arrival
order), timeout, disconnect, SHUTDOWN, REPLAY.DROP and FLUSHALL, and a SAVE
while clients wait (the limiter's config and counters come back from the
snapshot). Two statistical runs (a fast inserter with a slow sampler, and the
reverse) check that the error stays within the buffer and nobody starves.
"""

from __future__ import annotations

import json
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis

from pyctl.errors import decode_info

if TYPE_CHECKING:
    from conftest import RawConn, ServerProcess

OLD_FIELDS = ["name", "size", "capacity", "inserts", "samples", "sample_calls", "updates",
              "stale_updates", "evictions", "total_priority", "max_priority", "min_priority",
              "alpha", "beta", "epsilon", "bytes_used", "maxbytes", "next_id", "fanout"]
LIMITER_FIELDS = ["min_size", "samples_per_insert", "error_buffer", "limiter_inserts",
                  "limiter_samples", "limiter_error", "blocked_samplers", "blocked_inserters",
                  "waited_seconds"]




def info(c: RawConn, table: str = "t") -> dict[str, Any]:
    return decode_info(c.call("REPLAY.INFO", table))


def add(c: RawConn, n: int, table: str = "t", *extra: str) -> Any:
    args: list[str | bytes] = []
    for i in range(n):
        args += ["1", b"item%d" % i]
    return c.call("REPLAY.ADD", table, *args, *extra)


def wait_info(c: RawConn, field: str, value: float, table: str = "t") -> None:
    deadline = time.monotonic() + 5
    while info(c, table)[field] != value:
        assert time.monotonic() < deadline, f"{field} never became {value}: {info(c, table)}"
        time.sleep(0.005)


def blocked_stat(c: RawConn, host: str, field: str) -> int:
    """How waits ended: the native server's INFO stats field (blocked_timeouts, ...), or
    the module host's own, inreplay_<field> in INFO inreplay."""
    text = c.call("INFO", "inreplay" if host == "module" else "stats").decode()
    return int(text.split(field + ":")[1].split("\r\n")[0])


def err(reply: Any) -> str:
    assert type(reply).__name__ == "RespError", reply
    return reply.message.decode()


@pytest.fixture
def c(replay_server: ServerProcess) -> Iterator[RawConn]:
    conn = replay_server.raw()
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


# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------


def test_info_fields_appended_in_order(c: RawConn) -> None:
    assert c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 10,
                  "SAMPLES_PER_INSERT", "2.5", "ERROR_BUFFER", 30) == "OK"
    flat = c.call("REPLAY.INFO", "t")
    assert [k.decode() for k in flat[::2]] == OLD_FIELDS + LIMITER_FIELDS + ["capacity_fits"] + [
        "sampler", "remover", "max_times_sampled", "queue_size", "consumed", "storage",
        "compactions"]
    i = info(c)
    assert (i["min_size"], i["samples_per_insert"], i["error_buffer"]) == (10, 2.5, 30.0)
    assert (i["limiter_inserts"], i["limiter_samples"], i["blocked_samplers"]) == (0, 0, 0)


def test_defaults(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "none", "CAPACITY", 10)
    c.call("REPLAY.CREATE", "r4", "CAPACITY", 10, "SAMPLES_PER_INSERT", 4)
    c.call("REPLAY.CREATE", "r05", "CAPACITY", 10, "SAMPLES_PER_INSERT", "0.5")
    assert info(c, "none")["error_buffer"] == 0 and info(c, "none")["min_size"] == 0
    assert info(c, "r4")["error_buffer"] == 4.0  # Reverb's minimum, max(1, rate)
    assert info(c, "r05")["error_buffer"] == 1.0
    # no limiter: TIMEOUT is accepted and changes nothing
    assert err(c.call("REPLAY.SAMPLE", "none", 1, "TIMEOUT", 1)) == "EMPTY table 'none' is empty"


@pytest.mark.parametrize("args,message", [
    (("MIN_SIZE", 11), "ERR MIN_SIZE must be at most CAPACITY"),
    (("MIN_SIZE", -1), "ERR MIN_SIZE must be an integer >= 0"),
    (("MIN_SIZE", "x"), "ERR MIN_SIZE must be an integer >= 0"),
    (("SAMPLES_PER_INSERT", -1), "ERR SAMPLES_PER_INSERT must be a finite number >= 0"),
    (("SAMPLES_PER_INSERT", "inf"), "ERR SAMPLES_PER_INSERT must be a finite number >= 0"),
    (("ERROR_BUFFER", 5), "ERR ERROR_BUFFER needs SAMPLES_PER_INSERT"),
    (("SAMPLES_PER_INSERT", 4, "ERROR_BUFFER", 3),
     "ERR ERROR_BUFFER must be finite and at least max(1, SAMPLES_PER_INSERT)"),
    (("SAMPLES_PER_INSERT", "0.5", "ERROR_BUFFER", "0.5"),
     "ERR ERROR_BUFFER must be finite and at least max(1, SAMPLES_PER_INSERT)"),
])  # fmt: skip
def test_create_errors(c: RawConn, args: tuple[Any, ...], message: str) -> None:
    assert err(c.call("REPLAY.CREATE", "t", "CAPACITY", 10, *args)) == message
    assert c.call("REPLAY.LIST") == []


def test_timeout_argument_errors(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 10, "MIN_SIZE", 1)
    assert err(c.call("REPLAY.SAMPLE", "t", 1, "TIMEOUT", -1)) == "ERR timeout is negative"
    assert err(c.call("REPLAY.SAMPLE", "t", 1, "TIMEOUT", "x")) == (
        "ERR timeout is not a float or out of range")
    assert err(c.call("REPLAY.ADD", "t", 1, "a", "TIMEOUT", "x")) == (
        "ERR timeout is not a float or out of range")
    assert err(c.call("REPLAY.SAMPLE", "t", 1, "TIMEOUT")) == "ERR syntax error"
    assert err(c.call("REPLAY.ADD", "t", 1, "a", "TIMEOUT")) == (
        "ERR wrong number of arguments for 'replay.add' command")
    assert info(c)["size"] == 0


# --------------------------------------------------------------------------
# the limits, at once and waiting
# --------------------------------------------------------------------------


def test_min_size_refuses_at_once_without_timeout(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 5)
    add(c, 3)
    assert err(c.call("REPLAY.SAMPLE", "t", 2)) == (
        "RATELIMITED table 't' has 3 items, MIN_SIZE is 5: sample waits (use TIMEOUT to wait)")
    add(c, 2)
    ids, weights, items = c.call("REPLAY.SAMPLE", "t", 2)
    assert len(ids) == 16 and len(weights) == 8 and len(items) == 2
    assert info(c)["limiter_samples"] == 2  # a sample of n items counts n


def test_min_size_waiter_runs_when_allowed(c: RawConn, conns: Callable[[], RawConn]) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 4)
    w = conns()
    w.send(w.command("REPLAY.SAMPLE", "t", 3, "TIMEOUT", 5) + w.command("PING"))
    wait_info(c, "blocked_samplers", 1)
    add(c, 3)
    w.expect_silence(0.05)
    add(c, 1)
    ids, _, items = w.read_reply()  # items, not its TIMEOUT 5's error: woken by the add
    assert len(items) == 3 and all(x.startswith(b"item") for x in items)
    assert all(0 <= i < 4 for i in struct.unpack("<3q", ids))
    assert w.read_reply() == "PONG"  # its pipelined input resumes
    i = info(c)
    assert (i["blocked_samplers"], i["limiter_samples"], i["limiter_inserts"]) == (0, 3, 4)
    assert i["waited_seconds"] > 0.04


def test_timeout_names_the_limit(c: RawConn, replay_host: str) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 5)
    timeouts = blocked_stat(c, replay_host, "blocked_timeouts")
    t0 = time.monotonic()
    reply = c.call("REPLAY.SAMPLE", "t", 1, "PACKED", "TIMEOUT", "0.1")
    took = time.monotonic() - t0
    assert err(reply) == (
        "RATELIMITED table 't' has 0 items, MIN_SIZE is 5: sample timed out after TIMEOUT 0.1")
    assert 0.09 <= took < 10  # at least the timeout; the upper bound only a hang guard
    assert blocked_stat(c, replay_host, "blocked_timeouts") == timeouts + 1
    i = info(c)
    # the server counts whole milliseconds (0.101 s against the client's 0.1007 seen):
    # at least the timeout, and the upper bound only a hang guard
    assert i["blocked_samplers"] == 0 and 0.09 <= i["waited_seconds"] < 10


def test_idle_timeout_is_not_late(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 5)
    late = []
    for _ in range(7):
        t0 = time.monotonic()
        c.call("REPLAY.SAMPLE", "t", 1, "TIMEOUT", "0.03")
        late.append(time.monotonic() - t0 - 0.03)
    # the median: a timeout checked only on a coarse tick is late every time, while
    # another process taking the core now and then delays single calls (0.06 s seen)
    assert sorted(late)[len(late) // 2] < 0.015, late


def test_ratio_limits_both_sides(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 1, "SAMPLES_PER_INSERT", 1,
           "ERROR_BUFFER", 1)
    add(c, 1)
    c.call("REPLAY.SAMPLE", "t", 1)  # error 0 -> 1
    c.call("REPLAY.SAMPLE", "t", 1)  # 1 <= 1 still allowed -> 2
    assert err(c.call("REPLAY.SAMPLE", "t", 1)) == (
        "RATELIMITED table 't' is 2.0 samples ahead of SAMPLES_PER_INSERT 1 x inserts, "
        "ERROR_BUFFER is 1: sample waits (use TIMEOUT to wait)")
    assert info(c)["limiter_error"] == 2.0
    add(c, 4)  # error 2 -> -2
    assert info(c)["limiter_error"] == -2.0
    assert err(add(c, 1)) == (
        "RATELIMITED table 't' is 2.0 samples behind SAMPLES_PER_INSERT 1 x inserts, "
        "ERROR_BUFFER is 1: insert waits (use TIMEOUT to wait)")
    assert err(add(c, 1, "t", "TIMEOUT", "0.05")) == (
        "RATELIMITED table 't' is 2.0 samples behind SAMPLES_PER_INSERT 1 x inserts, "
        "ERROR_BUFFER is 1: insert timed out after TIMEOUT 0.05")


def test_inserter_waits_for_a_sample(c: RawConn, conns: Callable[[], RawConn]) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 2, "SAMPLES_PER_INSERT", 2,
           "ERROR_BUFFER", 2)
    add(c, 3)  # below MIN_SIZE: allowed; error 0 - 2 x (3 - 2) = -2
    add(c, 1)  # -2 >= -2: allowed; -> -4
    w = conns()
    w.send(w.command("REPLAY.ADD", "t", "MAX", "late", "TIMEOUT", 5))
    wait_info(c, "blocked_inserters", 1)
    c.call("REPLAY.SAMPLE", "t", 1)  # -4 -> -3: still too far behind
    w.expect_silence(0.05)
    assert info(c)["size"] == 4
    c.call("REPLAY.SAMPLE", "t", 1)  # -3 -> -2: the inserter may run
    assert w.read_reply() == [4]
    assert info(c)["size"] == 5 and info(c)["limiter_error"] == -4.0


def test_each_wait_is_served_in_turn(c: RawConn, conns: Callable[[], RawConn]) -> None:
    """A queue served empty is ready for its next waiter: the module host once left the
    queue marked after its last waiter ran, and the next waiter then slept to its
    TIMEOUT."""
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 1, "SAMPLES_PER_INSERT", 1,
           "ERROR_BUFFER", 1)
    add(c, 3)  # error -2: inserters wait
    for k in range(3):
        w = conns()
        w.send(w.command("REPLAY.ADD", "t", "1", b"w%d" % k, "TIMEOUT", 5))
        wait_info(c, "blocked_inserters", 1)
        c.call("REPLAY.SAMPLE", "t", 2)  # -2 -> 0: the waiter runs (-> -1)
        assert w.read_reply() == [3 + 3 * k]  # its id, not its TIMEOUT 5's error
        assert info(c)["blocked_inserters"] == 0
        c.call("REPLAY.SAMPLE", "t", 1)  # -1 -> 0 ...
        add(c, 2)  # ... -> -2: the next one waits


def test_many_waiters_served_in_arrival_order(c: RawConn, conns: Callable[[], RawConn]) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 1000, "MIN_SIZE", 1, "SAMPLES_PER_INSERT", 1,
           "ERROR_BUFFER", 1)
    add(c, 1)
    c.call("REPLAY.SAMPLE", "t", 1)
    c.call("REPLAY.SAMPLE", "t", 1)  # error 2: samplers wait
    ws = []
    for i in range(5):
        w = conns()
        w.send(w.command("REPLAY.SAMPLE", "t", 1, "TIMEOUT", 10))
        wait_info(c, "blocked_samplers", i + 1)
        ws.append(w)
    # a newcomer with TIMEOUT queues behind the earlier waiters
    late = conns()
    for k, w in enumerate(ws):
        add(c, 1)  # error 2 -> 1: exactly the head runs (-> 2 again)
        assert len(w.read_reply()[2]) == 1
        for other in ws[k + 1:]:
            other.expect_silence(0.02)
        if k == 2:
            late.send(late.command("REPLAY.SAMPLE", "t", 1, "TIMEOUT", 10))
            wait_info(c, "blocked_samplers", 3)
    add(c, 1)
    assert len(late.read_reply()[2]) == 1
    assert info(c)["blocked_samplers"] == 0


# --------------------------------------------------------------------------
# the other ways a wait ends
# --------------------------------------------------------------------------


def test_disconnect_while_waiting(c: RawConn, conns: Callable[[], RawConn],
                                  replay_host: str) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 2)
    gone = conns()
    gone.send(gone.command("REPLAY.SAMPLE", "t", 1, "TIMEOUT", 0))
    keep = conns()
    keep.send(keep.command("REPLAY.SAMPLE", "t", 1, "TIMEOUT", 0))
    wait_info(c, "blocked_samplers", 2)
    section = "inreplay" if replay_host == "module" else "stats"  # the module's own fields
    before = c.call("INFO", section).decode()
    gone.close()
    wait_info(c, "blocked_samplers", 1)
    after = c.call("INFO", section).decode()

    def count(text: str) -> int:  # blocked_disconnects, or the module's inreplay_...
        return int(text.split("blocked_disconnects:")[1].split("\r\n")[0])

    assert count(after) == count(before) + 1
    add(c, 2)
    assert len(keep.read_reply()[2]) == 1


@pytest.mark.parametrize("how", ["drop", "flushall"])
def test_table_going_answers_waiters(c: RawConn, conns: Callable[[], RawConn], how: str,
                                     replay_host: str) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 1, "SAMPLES_PER_INSERT", 1)
    add(c, 1)
    for _ in range(2):
        c.call("REPLAY.SAMPLE", "t", 1)
    s = conns()
    s.send(s.command("REPLAY.SAMPLE", "t", 1, "TIMEOUT", 0) + s.command("PING"))
    wait_info(c, "blocked_samplers", 1)
    dropped = blocked_stat(c, replay_host, "blocked_dropped")
    assert c.call(*(("REPLAY.DROP", "t") if how == "drop" else ("FLUSHALL",))) == "OK"
    assert err(s.read_reply()) == "NOTABLE table 't' was dropped while the client waited"
    assert s.read_reply() == "PONG"
    assert c.call("REPLAY.LIST") == []
    assert blocked_stat(c, replay_host, "blocked_dropped") == dropped + 1


@pytest.mark.native_only(reason="the start-up table (--capacity) is the native server's")
def test_shutdown_answers_waiters(server_factory: Callable[..., ServerProcess]) -> None:
    srv = server_factory("inreplay", "--capacity", "10", "--min-size", "5")
    w = srv.raw()
    w.send(w.command("REPLAY.SAMPLE", "replay", 1, "TIMEOUT", 0))
    with srv.raw() as c:
        wait_info(c, "blocked_samplers", 1, "replay")
        c.send(c.command("SHUTDOWN", "NOSAVE"))
    assert w.read_reply_bytes() == b"-ERR the server is shutting down\r\n"
    assert srv.wait(10) == 0


@pytest.mark.native_only(reason="SAVE into inreplay's own snapshot format")
def test_save_while_waiting_keeps_the_limiter(server_factory: Callable[..., ServerProcess],
                                               tmp_path: Any) -> None:
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    srv = server_factory("inreplay", "--dir", str(snaps))
    c = srv.raw()
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 3, "SAMPLES_PER_INSERT", "1.5",
           "ERROR_BUFFER", 4)
    add(c, 6)
    for _ in range(3):
        c.call("REPLAY.SAMPLE", "t", 2)
    c.call("REPLAY.SAMPLE", "t", 1)  # error 7 - 1.5 x 3 = 2.5
    w = srv.raw()
    w.send(w.command("REPLAY.SAMPLE", "t", 4, "TIMEOUT", 0))  # runs: then error 6.5
    assert len(w.read_reply()[2]) == 4
    w.send(w.command("REPLAY.SAMPLE", "t", 1, "TIMEOUT", 0))  # waits
    wait_info(c, "blocked_samplers", 1)
    assert c.call("SAVE") == "OK"
    saved = info(c)
    add(c, 2)  # error 6.5 - 3 = 3.5: the waiter is still served after the save
    assert len(w.read_reply()[2]) == 1
    c.close()
    w.close()
    assert srv.stop() == 0
    again = server_factory("inreplay", "--restore", str(snaps))
    with again.raw() as c2:
        back = info(c2)
    for k in ("size", "min_size", "samples_per_insert", "error_buffer", "limiter_inserts",
              "limiter_samples", "limiter_error"):
        assert back[k] == saved[k], k
    assert (back["limiter_inserts"], back["limiter_samples"], back["limiter_error"]) == (6, 11, 6.5)
    assert back["blocked_samplers"] == 0


@pytest.mark.native_only(reason="the start-up table (--min-size) is the native server's")
def test_pyctl_start_options(server_factory: Callable[..., ServerProcess]) -> None:
    srv = server_factory("inreplay", "--capacity", "100", "--min-size", "10",
                         "--samples-per-insert", "4")
    with srv.raw() as c:
        i = info(c, "replay")
        assert (i["min_size"], i["samples_per_insert"], i["error_buffer"]) == (10, 4.0, 4.0)
        assert err(c.call("REPLAY.SAMPLE", "replay", 1)).startswith("RATELIMITED ")


def test_multi_samples_without_waiting(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "t", "CAPACITY", 100, "MIN_SIZE", 5)
    if c.call("MULTI") != "OK":
        pytest.skip("MULTI is not on this branch yet")
    assert c.call("REPLAY.SAMPLE", "t", 1, "TIMEOUT", 0) == "QUEUED"
    reply = c.call("EXEC")
    assert err(reply[0]).startswith("RATELIMITED table 't' has 0 items, MIN_SIZE is 5")


# --------------------------------------------------------------------------
# statistics: the error stays within the buffer, nobody starves
# --------------------------------------------------------------------------


def run_pair(srv: ServerProcess, seconds: float, insert_sleep: float, sample_sleep: float,
             rate: float, buffer: float, k: int, n: int) -> dict[str, Any]:
    table = f"s{time.monotonic_ns()}"
    ctl = srv.client()
    ctl.execute_command("REPLAY.CREATE", table, "CAPACITY", 10000, "MIN_SIZE", 20,
                        "SAMPLES_PER_INSERT", rate, "ERROR_BUFFER", buffer)
    stop = time.monotonic() + seconds
    done = {"inserts": 0, "samples": 0, "timeouts": 0}
    errors: list[float] = []
    problems: list[str] = []

    def inserter() -> None:
        r = srv.client()
        args: list[Any] = []
        for i in range(k):
            args += [1, b"x" * 32 + bytes([i])]
        while time.monotonic() < stop:
            try:
                r.execute_command("REPLAY.ADD", table, *args, "TIMEOUT", 1)
                done["inserts"] += 1
            except redis.ResponseError as e:
                if not str(e).startswith("RATELIMITED"):
                    problems.append(str(e))
                if time.monotonic() < stop:  # not the last call, left waiting at the end
                    done["timeouts"] += 1
            time.sleep(insert_sleep)
        r.close()

    def sampler() -> None:
        r = srv.client()
        while time.monotonic() < stop:
            try:
                r.execute_command("REPLAY.SAMPLE", table, n, "TIMEOUT", 1)
                done["samples"] += 1
            except redis.ResponseError as e:
                if not str(e).startswith("RATELIMITED"):
                    problems.append(str(e))
                if time.monotonic() < stop:  # not the last call, left waiting at the end
                    done["timeouts"] += 1
            time.sleep(sample_sleep)
        r.close()

    threads = [threading.Thread(target=inserter), threading.Thread(target=sampler)]
    for t in threads:
        t.start()
    while time.monotonic() < stop:
        flat = ctl.execute_command("REPLAY.INFO", table)
        d = dict(zip(flat[::2], flat[1::2], strict=True))
        if int(d[b"size"]) >= 20:
            errors.append(float(d[b"limiter_error"]))
        time.sleep(0.01)
    for t in threads:
        t.join()
    ctl.close()
    assert not problems, problems
    return {**done, "errors": errors}


@pytest.mark.parametrize("fast", ["inserter", "sampler"])
def test_ratio_holds_under_imbalance(replay_server: ServerProcess, fast: str) -> None:
    rate, buffer, k, n = 2.0, 16.0, 4, 8
    if fast == "inserter":
        res = run_pair(replay_server, 2.0, 0.0, 0.01, rate, buffer, k, n)
    else:
        res = run_pair(replay_server, 2.0, 0.02, 0.0, rate, buffer, k, n)
    errs = res["errors"]
    assert errs, res
    # checked before each call, counted after: one call may overshoot by its own size
    assert min(errs) >= -buffer - rate * k, min(errs)
    assert max(errs) <= buffer + n, max(errs)
    # both sides kept running: nobody starved, and the waits ended by being served
    assert res["inserts"] > 20 and res["samples"] > 20, res
    assert res["timeouts"] == 0, res


def test_bench_limiter_runs(replay_server: ServerProcess) -> None:
    """bench/limiter.py for 3 s: both phases, the ratio held, nobody starved."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import limiter

    doc = limiter.run(replay_server.host, replay_server.port, 3.0, min_size=100,
                      error_buffer=40.0, window=0.5, starve_seconds=2.0)
    assert {w["phase"] for w in doc["timeline"]} == {"inserters 10x", "samplers 10x"}
    assert not doc["errors"] and not doc["starved"] and doc["deadlocked_windows"] == 0, doc
    assert doc["timeouts"] == 0
    assert abs(doc["measured_samples_per_insert"] - 4.0) < 0.5, doc
    assert abs(doc["final_error"]) <= 40.0 + 32, doc  # within the buffer (+ one call)
    assert doc["waited_seconds"] > 0  # the fast side did wait
    assert json.loads(json.dumps(doc)) == doc
