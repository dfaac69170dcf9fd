"""SLOWLOG and LATENCY, differential against stock redis-server 7.0.15: the
same commands on both servers, replies compared byte for byte where they are
deterministic (errors, help, argument lists, lengths) and by shape where they
hold times (ids, unix times, durations, client ports)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import test_families
from test_families import Both

if TYPE_CHECKING:
    from conftest import ServerProcess

    Pair = tuple[ServerProcess, ServerProcess]

pair = test_families.pair
both = test_families.both

DEFAULTS = (("slowlog-log-slower-than", "10000"), ("slowlog-max-len", "128"),
            ("latency-monitor-threshold", "0"))  # fmt: skip


def _restore(b: Both) -> None:
    for name, value in DEFAULTS:
        b.run("CONFIG", "SET", name, value)
    b.run("SLOWLOG", "RESET")
    b.replies("LATENCY", "RESET")


@pytest.fixture
def sl(both: Both) -> Iterator[Both]:
    """`both`, with the slow log and latency settings at their defaults and
    empty, before and after (the servers are the session's)."""
    _restore(both)
    yield both
    _restore(both)


def entries(b: Both, *count: str) -> tuple[list[Any], list[Any]]:
    a, o = b.replies("SLOWLOG", "GET", *count)
    assert isinstance(a, list) and isinstance(o, list), (a, o)
    return a, o


def same_entries(b: Both, *count: str) -> list[Any]:
    """SLOWLOG GET on both: the same arguments and names, entries of 6 fields,
    consecutive ids, plausible times; returns stock's."""
    ref, ours = entries(b, *count)
    assert [e[3] for e in ours] == [e[3] for e in ref]
    assert [e[5] for e in ours] == [e[5] for e in ref]
    now = time.time()
    for got in (ref, ours):
        for e in got:
            assert len(e) == 6
            assert isinstance(e[0], int) and isinstance(e[2], int) and e[2] >= 0
            assert abs(e[1] - now) < 60
            host, _, port = e[4].rpartition(b":")
            assert (host == b"127.0.0.1" and port.isdigit()) or e[4] == b"?:0"
        ids = [e[0] for e in got]
        assert ids == list(range(ids[0], ids[0] - len(ids), -1)) if ids else True
    return ref


def test_errors_and_help(sl: Both) -> None:
    sl.run_all([
        ("SLOWLOG",), ("SLOWLOG", "foo"), ("SLOWLOG", "GET", "1", "2"), ("SLOWLOG", "GET", "-2"),
        ("SLOWLOG", "GET", "x"), ("SLOWLOG", "GET", "99999999999999999999"),
        ("SLOWLOG", "LEN", "1"), ("SLOWLOG", "RESET", "1"), ("SLOWLOG", "HELP", "1"),
        ("SLOWLOG", "HELP"), ("slowlog", "len"), ("SLOWLOG", "GET"), ("SLOWLOG", "GET", "0"),
        ("SLOWLOG", "GET", "-1"),
        ("LATENCY",), ("LATENCY", "foo"), ("LATENCY", "GRAPH"), ("LATENCY", "GRAPH", "a", "b"),
        ("LATENCY", "GRAPH", "nosuchevent"), ("LATENCY", "HISTORY"),
        ("LATENCY", "HISTORY", "nosuchevent"), ("LATENCY", "LATEST", "x"),
        ("LATENCY", "DOCTOR", "x"), ("LATENCY", "HELP", "x"), ("LATENCY", "RESET", "nosuchevent"),
        ("LATENCY", "RESET", "a", "b"), ("LATENCY", "LATEST"),
        ("LATENCY", "HISTOGRAM", "nosuchcommand"),
        ("CONFIG", "SET", "slowlog-log-slower-than", "-2"),
        ("CONFIG", "SET", "slowlog-log-slower-than", "x"),
        ("CONFIG", "SET", "slowlog-max-len", "-1"),
        ("CONFIG", "SET", "latency-monitor-threshold", "-1"),
        ("CONFIG", "GET", "latency-monitor-threshold"),
    ])  # fmt: skip
    sl.same_set("CONFIG", "GET", "slowlog-*")  # Redis's order is its dict's
    sl.run("LATENCY", "HELP")


def test_entries_arguments_and_markers(sl: Both) -> None:
    sl.run("CONFIG", "SET", "slowlog-log-slower-than", "0")
    sl.run("SLOWLOG", "RESET")
    sl.run("SET", "k", "v")
    sl.run("SET", "big", "x" * 129)  # one byte over: "... (1 more bytes)"
    sl.run("SET", "exact", "y" * 128)  # not cut
    sl.run("RPUSH", "l", *[f"e{i}" for i in range(40)])  # 42 args: 31 + "... (11 more arguments)"
    sl.run("RPUSH", "m", *[f"e{i}" for i in range(30)])  # 32 args: all of them
    sl.run("ECHO", "")
    sl.run("SET", "huge", "h" * 200000)  # a big bulk the command takes over: still logged
    sl.run("CLIENT", "SETNAME", "slowpoke")
    sl.run("GET", "k")
    got = same_entries(sl, "-1")
    args = [e[3] for e in got]
    assert args[0] == [b"get", b"k"] or args[0] == [b"GET", b"k"]
    assert got[0][5] == b"slowpoke" and got[2][5] == b""
    big = next(a for a in args if a[1] == b"big")
    assert big[2] == b"x" * 128 + b"... (1 more bytes)"
    assert next(a for a in args if a[1] == b"exact")[2] == b"y" * 128
    assert next(a for a in args if a[1] == b"huge")[2] == b"h" * 128 + b"... (199872 more bytes)"
    rp = next(a for a in args if a[1] == b"l")
    assert len(rp) == 32 and rp[-1] == b"... (11 more arguments)" and rp[-2] == b"e28"
    assert len(next(a for a in args if a[1] == b"m")) == 32
    # the oldest is the SLOWLOG RESET that ran after the threshold was set
    assert args[-1] == [b"SLOWLOG", b"RESET"]
    sl.run("SLOWLOG", "LEN")
    assert len(same_entries(sl)) == 10  # default count (of 11)
    assert len(same_entries(sl, "2")) == 2
    assert same_entries(sl, "0") == []


def test_max_len_trims_and_reset(sl: Both) -> None:
    sl.run("CONFIG", "SET", "slowlog-log-slower-than", "0")
    sl.run("CONFIG", "SET", "slowlog-max-len", "5")
    for i in range(12):
        sl.run("SET", f"k{i}", "v")
    assert sl.run("SLOWLOG", "LEN") == b":5\r\n"
    got = same_entries(sl, "-1")
    assert [e[3][1] for e in got[1:]] == [b"k11", b"k10", b"k9", b"k8"]
    # a smaller max-len applies at the next command, as in Redis
    sl.run("CONFIG", "SET", "slowlog-max-len", "2")
    assert sl.run("SLOWLOG", "LEN") == b":2\r\n"
    sl.run("CONFIG", "SET", "slowlog-max-len", "0")
    assert sl.run("SLOWLOG", "LEN") == b":0\r\n"
    sl.run("CONFIG", "SET", "slowlog-max-len", "128")
    sl.run("PING")
    assert sl.run("SLOWLOG", "LEN") != b":0\r\n"
    sl.run("SLOWLOG", "RESET")
    assert sl.run("SLOWLOG", "LEN") == b":1\r\n"  # the RESET itself, logged after it ran
    sl.run("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    sl.run("SLOWLOG", "RESET")
    sl.run("DEBUG", "SLEEP", "0.02")
    assert sl.run("SLOWLOG", "LEN") == b":0\r\n"  # negative: nothing is logged


def test_threshold_and_debug_sleep(sl: Both) -> None:
    # default 10000 us: a fast command is not logged, a 50 ms one is
    sl.run("SLOWLOG", "RESET")
    sl.run("GET", "x")
    assert sl.run("SLOWLOG", "LEN") == b":0\r\n"
    sl.run("DEBUG", "SLEEP", "0.05")
    got = same_entries(sl)
    ref, ours = entries(sl)
    assert [e[3] for e in ours] == [[b"DEBUG", b"SLEEP", b"0.05"]]
    for e in ref + ours:
        assert 50000 <= e[2] < 5_000_000
    sl.run("CONFIG", "SET", "slowlog-log-slower-than", "200000")
    sl.run("DEBUG", "SLEEP", "0.05")
    assert len(same_entries(sl)) == len(got)


def test_sensitive_arguments_redacted(sl: Both) -> None:
    sl.run("CONFIG", "SET", "slowlog-log-slower-than", "0")
    sl.run("SLOWLOG", "RESET")
    sl.run("AUTH", "secret")
    sl.run("AUTH", "user", "secret")
    sl.replies("HELLO", "2", "AUTH", "default", "secret")
    sl.run("CONFIG", "SET", "requirepass", "")
    sl.replies("ACL", "SETUSER", "sl-user", ">secret", "+get")
    sl.replies("ACL", "DELUSER", "sl-user")
    sl.run("CONFIG", "SET", "masterauth", "secret")
    sl.run("CONFIG", "SET", "masteruser", "someone")
    sl.run("MULTI")
    sl.run("SET", "a", "1")
    sl.run("EXEC")  # not logged itself (skip_slowlog); its SET is
    args = [e[3] for e in same_entries(sl, "-1")]
    assert [b"AUTH", b"(redacted)"] in args
    assert [b"AUTH", b"(redacted)", b"(redacted)"] in args
    assert [b"HELLO", b"2", b"AUTH", b"(redacted)", b"(redacted)"] in args
    assert [b"CONFIG", b"SET", b"requirepass", b"(redacted)"] in args
    assert [b"ACL", b"SETUSER", b"(redacted)", b"(redacted)", b"(redacted)"] in args
    assert [b"CONFIG", b"SET", b"masterauth", b"(redacted)"] in args
    assert [b"CONFIG", b"SET", b"masteruser", b"(redacted)"] in args
    a, b = sl.replies("CONFIG", "GET", "master*")  # shown, as Redis shows them
    assert dict(zip(b[::2], b[1::2], strict=True)) == dict(zip(a[::2], a[1::2], strict=True))
    sl.run("CONFIG", "SET", "masterauth", "", "masteruser", "")
    assert not any(a[0].lower() == b"exec" for a in args)
    assert [b"SET", b"a", b"1"] in args
    assert not any(b"secret" in x for a in args for x in a)


def test_latency_monitor(sl: Both) -> None:
    sl.run("CONFIG", "SET", "latency-monitor-threshold", "30")
    sl.run("LATENCY", "RESET")
    sl.run("GET", "x")
    assert sl.run("LATENCY", "LATEST") == b"*0\r\n"  # no spike yet
    sl.run("DEBUG", "SLEEP", "0.05")
    ref, ours = sl.replies("LATENCY", "LATEST")
    for got in (ref, ours):
        assert len(got) == 1 and got[0][0] == b"command"
        _, when, last, peak = got[0]
        assert abs(when - time.time()) < 60 and 50 <= last <= peak < 5000
    ref, ours = sl.replies("LATENCY", "HISTORY", "command")
    assert len(ref) == len(ours) == 1 and abs(ours[0][0] - ref[0][0]) < 5
    assert ours[0][1] >= 50
    for reply in sl.replies("LATENCY", "GRAPH", "command"):
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        assert "command - high" in text and "all time high" in text
    _, doctor = sl.replies("LATENCY", "DOCTOR")
    doc = doctor.decode() if isinstance(doctor, bytes) else str(doctor)
    assert "command" in doc and "SLOWLOG" in doc
    # a second spike in another second: two samples, the maximum kept
    time.sleep(1.05)
    sl.run("DEBUG", "SLEEP", "0.08")
    ref, ours = sl.replies("LATENCY", "HISTORY", "command")
    assert len(ref) == len(ours) == 2 and ours[1][1] >= 80
    _, latest = sl.replies("LATENCY", "LATEST")
    assert latest[0][3] >= 80
    assert sl.run("LATENCY", "RESET", "command", "nosuch") == b":1\r\n"
    sl.run("LATENCY", "LATEST")
    sl.run("LATENCY", "HISTORY", "command")
    # off: nothing is sampled
    sl.run("CONFIG", "SET", "latency-monitor-threshold", "0")
    sl.run("DEBUG", "SLEEP", "0.05")
    sl.run("LATENCY", "LATEST")


def test_latency_doctor_without_samples(pair: Pair) -> None:
    """With the monitor off and no samples, DOCTOR says how to turn it on."""
    _, ours = pair
    with ours.raw() as c:
        assert c.call("LATENCY", "RESET") >= 0
        assert c.call("CONFIG", "SET", "latency-monitor-threshold", "0") in ("OK", b"OK")
        doc = c.call("LATENCY", "DOCTOR")
        assert "latency-monitor-threshold" in (doc.decode() if isinstance(doc, bytes) else doc)


def test_params_reach_pyctl() -> None:
    from pyctl.config import c_params

    rows = {p["name"]: p for p in c_params()}
    for name, default in DEFAULTS:
        assert name in rows, name
        assert str(rows[name]["default"]) == default
        assert rows[name].get("noop") in (False, None), rows[name]


def _histograms(reply: Any) -> dict[bytes, tuple[int, list[int], list[int]]]:
    """LATENCY HISTOGRAM's reply (RESP2 flat lists or RESP3 maps) as
    name -> (calls, bucket labels, cumulative counts)."""
    def pairs(x: Any) -> list[tuple[Any, Any]]:
        return list(x.items()) if isinstance(x, dict) else list(zip(x[::2], x[1::2], strict=True))

    out = {}
    for name, body in pairs(reply):
        fields = dict(pairs(body))
        hist = pairs(fields[b"histogram_usec"])
        out[name] = (fields[b"calls"], [k for k, _ in hist], [v for _, v in hist])
    return out


# HdrHistogram's reporting levels as Redis prints them (µs)
LEVELS = {(2**m + 2 ** (m - 7) - 1) // 1000 for m in range(10, 30)} | {(2**30 - 1) // 1000}


def test_latency_histogram(sl: Both) -> None:
    sl.run("CONFIG", "RESETSTAT")
    sl.run("SET", "a", "b")
    sl.run("SET", "c", "d")
    sl.replies("CLIENT", "ID")  # ids differ between the servers
    sl.run("DEBUG", "SLEEP", "0.05")
    sl.run("DEBUG", "SLEEP", "1.2")  # beyond Redis's 1 s ceiling: the top level
    got = [_histograms(r) for r in sl.replies("LATENCY", "HISTOGRAM", "set", "client", "debug",
                                              "nosuch", "client|id")]
    ref, ours = got
    assert sorted(ref) == sorted(ours) == [b"client|id", b"debug", b"set"]
    for h in got:
        assert h[b"set"][0] == 2 and h[b"client|id"][0] == 1 and h[b"debug"][0] == 2
        for calls, labels, cums in h.values():
            assert set(labels) <= LEVELS and labels == sorted(labels)
            assert cums == sorted(cums) and cums[-1] == calls
        assert h[b"debug"][1][-1] == 1073741 and 50000 <= h[b"debug"][1][0] <= 67633
    # everything called since the reset (CONFIG RESETSTAT itself was before it)
    ref, ours = (_histograms(r) for r in sl.replies("LATENCY", "HISTOGRAM"))
    assert set(ref) - {b"latency|histogram"} == set(ours) - {b"latency|histogram"}
    sl.run("CONFIG", "RESETSTAT")
    sl.run("LATENCY", "HISTOGRAM", "set")  # empty after the reset
    sl.run("CONFIG", "SET", "latency-tracking", "no")
    sl.run("GET", "a")
    sl.run("LATENCY", "HISTOGRAM", "get")  # not recorded while off
    sl.run("CONFIG", "SET", "latency-tracking", "yes")


def test_blocked_command_logged_when_served(sl: Both, pair: Pair) -> None:
    """As Redis: a BLPOP that blocked is logged once it is served, after the
    LPUSH that served it, with its own arguments."""
    sl.run("CONFIG", "SET", "slowlog-log-slower-than", "0")
    sl.run("SLOWLOG", "RESET")
    for srv in pair:
        with srv.raw() as blocker:
            blocker.send(blocker.command("BLPOP", "slowlog-l", "0"))
            blocker.expect_silence(0.2)
            sl.conns[pair.index(srv)].send(sl.conns[0].command("LPUSH", "slowlog-l", "foo"))
            assert sl.conns[pair.index(srv)].read_reply() == 1
            assert blocker.read_reply() == [b"slowlog-l", b"foo"]
    ref, ours = entries(sl, "2")
    assert [e[3] for e in ours] == [e[3] for e in ref] == [
        [b"BLPOP", b"slowlog-l", b"0"], [b"LPUSH", b"slowlog-l", b"foo"]]


def test_script_commands_logged(sl: Both) -> None:
    """The commands a script runs are logged after the script, with the script
    client's peer id "?:0"."""
    sl.run("CONFIG", "SET", "slowlog-log-slower-than", "0")
    sl.run("SLOWLOG", "RESET")
    sl.run("EVAL", "redis.call('set', KEYS[1], '1') return 1", "1", "slowlog-x")
    ref, ours = entries(sl, "3")
    assert [e[3] for e in ours] == [e[3] for e in ref]
    assert [e[4] for e in ours][1] == [e[4] for e in ref][1] == b"?:0"
