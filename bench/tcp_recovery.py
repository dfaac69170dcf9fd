"""How fast the DPDK stack's lwIP recovers from a loss, one scenario per patch of
dataplane/lwip/patches (tests/test_tcp_recovery.py checks that each recovers, with
the data intact; how long it takes is measured here, where a loaded machine's
numbers are a report, not a failed test).

Each scenario makes one loss happen exactly where its patch acts, with the impairment
bridge's deterministic drop (`drop=N+M`: the Nth and Mth TCP segments that take
sequence space in a direction, counted from when the spec was set), and times the
recovery from the client's side. The targets are many times what the patched stack
takes and still below what lwIP 2.1 takes without the patch:

    0001  a fresh connection's lost first reply is resent after the RTO that the
          handshake's RTT sample gives (floored at 60 ms): under 1 s, not 2.26 s;
          a lost SYN-ACK is resent after 1 s (RFC 6298): 0.9-2 s, not 3 s
    0002  a second hole in one window is resent on the partial ACK (NewReno):
          under 25 ms over a loss-free GET, not a retransmission timeout
    0003  with the peer's SACK blocks, every hole of a window is resent within one
          round trip of the first duplicate ACKs (RFC 6675): under 2.5 round trips
          over a loss-free GET, not one hole per round trip
    0004  a lost last segment of a reply is resent by a tail-loss probe after
          2 SRTT (at least 10 ms): under 30 ms over a loss-free GET, not the RTO
    0005  an ACK that acknowledges new data also updates the send window, so a
          client that uploads while its own receive window is closed keeps getting
          ACKs on a lossy path: every upload under 5 s, not seconds to minutes
    0006  a zero-window probe leaves snd_nxt alone, so a client whose closed window
          lwIP has probed still takes lwIP's pure ACKs: an upload sent after a
          second of probes (no loss) under 5 s, not tens of seconds

Needs root (network namespaces) and build/bench/impair.

    python bench/tcp_recovery.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl import netns  # noqa: E402

PYCTL = [sys.executable, "-m", "pyctl"]
PORT = 6391
SEG = 8960          # the MSS on the topology's 9000-byte MTU (lwIP sends no timestamps)
NSEG = 40           # the partial-ACK scenario's reply: 40 full segments
SACK_RTT_MS = 40    # the SACK scenario's round trip (the bridge's delay, both ways)
UPLOAD = 13 * 1024 * 1024
UPLOAD_TRIES = 40
PROBE_WAIT = 1.0    # 0006: seconds a client's window stays closed before it uploads


class StartError(RuntimeError):
    """The DPDK appliance did not start (the machine cannot run it)."""


class Appliance:
    """The DPDK appliance behind the impairment bridge (an empty spec: no impairment),
    with the values the scenarios GET: ``small`` (64 B) and ``big`` (NSEG segments)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.topo = netns.up(name, netns.free_subnet(), impair="", impair_seed=1)
        self.host = self.topo.appliance_ip
        self.prefix = f"{name}-t"
        r = subprocess.run([*PYCTL, "start", "--stack", "dpdk", "--netns", name, "--cores", "0",
                            "--vdev", f"net_af_packet0,iface={self.topo.iface}",
                            "--ip", f"{self.host}/{self.topo.prefix}", "--listen-port", str(PORT),
                            "--hugepages", "128", "--file-prefix", self.prefix, "--daemon",
                            # the client's own veth: a DPDK port trusts no one by default
                            "--client-subnet", f"{self.topo.client_ip}/{self.topo.prefix}"],
                           capture_output=True, text=True, timeout=90, cwd=ROOT)
        if r.returncode != 0:
            netns.down(name)
            raise StartError(f"the DPDK appliance did not start: {r.stderr.strip()[-300:]}")
        with self.connect() as s:
            s.sendall(command(b"SET", b"small", b"v" * 64))
            expect(read_reply(s, 5), b"+OK\r\n")
            s.sendall(command(b"SET", b"big", b"b" * (NSEG * SEG)))
            expect(read_reply(s, 5), b"+OK\r\n")

    def stop(self) -> None:
        subprocess.run([*PYCTL, "stop", "--listen", f"{self.host}:{PORT}"],
                       capture_output=True, cwd=ROOT, timeout=30)
        netns.down_with_stats(self.name)

    def impair(self, spec: str) -> dict[str, dict[str, int]]:
        """Set the bridge's spec; returns its counters once it runs with the new one
        (it reads the spec on SIGHUP before it writes counters on SIGUSR2)."""
        netns.set_impair(self.name, spec)
        return netns.bridge_stats(self.name)  # type: ignore[return-value]

    def dropped(self, before: dict[str, dict[str, int]]) -> tuple[int, int]:
        after = netns.bridge_stats(self.name)
        return tuple(after[d]["dropped"] - before[d]["dropped"]  # type: ignore[index,return-value]
                     for d in ("ab", "ba"))

    def connect(self, timeout: float = 10, rcvbuf: int | None = None) -> socket.socket:
        """A TCP_NODELAY connection; rcvbuf: a receive buffer set before the handshake
        (its window scale is fixed there)."""
        s = socket.socket()
        s.settimeout(timeout)
        if rcvbuf is not None:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect((self.host, PORT))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s


def command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def expect(got: bytes, want: bytes) -> None:
    if got != want:
        raise ConnectionError(f"reply {got[:60]!r}, expected {want[:60]!r}")


def read_reply(s: socket.socket, want: int) -> bytes:
    got = bytearray()
    while len(got) < want:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError(f"closed after {len(got)} of {want} bytes")
        got += chunk
    return bytes(got)


def timed_get(s: socket.socket, key: bytes, value_len: int) -> float:
    """Seconds from sending GET key to the last byte of its reply, checked whole."""
    head = b"$%d\r\n" % value_len
    want = len(head) + value_len + 2
    t0 = time.perf_counter()
    s.sendall(command(b"GET", key))
    reply = read_reply(s, want)
    dt = time.perf_counter() - t0
    if not reply.startswith(head) or len(reply) != want or not reply.endswith(b"\r\n"):
        raise ConnectionError(f"GET {key.decode()}: a reply of {len(reply)} bytes starting "
                              f"{reply[:20]!r}, expected {want} starting {head!r}")
    return dt


# ---- the scenarios: each returns its drops (to check) and its times (to report) ----


def first_reply_lost(app: Appliance) -> dict[str, Any]:
    """0001: three fresh connections, each one's first reply dropped."""
    times, drops = [], []
    for _ in range(3):
        with app.connect() as s:
            before = app.impair("out.drop=1")  # the appliance's next segment: the reply
            times.append(timed_get(s, b"small", 64))
            drops.append(app.dropped(before))
    app.impair("")
    return {"drops": drops, "seconds": times, "value": max(times)}


def syn_ack_lost(app: Appliance) -> dict[str, Any]:
    """0001: the SYN-ACK and the client's next two SYNs (at 1 s and 2 s: this kernel's
    tcp_syn_linear_timeouts) dropped, so only the appliance's own timer can complete
    the handshake before the client's fourth SYN at 3 s."""
    before = app.impair("out.drop=1,in.drop=2+3")
    t0 = time.perf_counter()
    with app.connect() as s:
        took = time.perf_counter() - t0
        # The drops count the client's segments, not only its SYNs: when the resent
        # SYN-ACK beats the client's own retry, its next segment is the request. Clear
        # them before asking, so the request measures the connection, not the drops.
        dropped_in, dropped_out = app.dropped(before)
        app.impair("")
        after = timed_get(s, b"small", 64)
    return {"dropped_in": dropped_in, "dropped_out": dropped_out, "handshake_s": took,
            "get_s": after, "value": took}


def _extra(app: Appliance, spec: str, runs: int, warm: int = 3) -> dict[str, Any]:
    """The best of ``runs`` GETs of ``big`` with spec set before each, against the best
    loss-free one, on one connection whose window ``warm`` GETs opened."""
    with app.connect() as s:
        for _ in range(warm):
            timed_get(s, b"big", NSEG * SEG)
        clean = min(timed_get(s, b"big", NSEG * SEG) for _ in range(runs))
        lossy, drops = [], []
        for _ in range(runs):
            before = app.impair(spec)
            lossy.append(timed_get(s, b"big", NSEG * SEG))
            drops.append(app.dropped(before))
    return {"drops": drops, "clean_s": clean, "lossy_s": lossy,
            "extra_ms": (min(lossy) - clean) * 1000}


def partial_ack(app: Appliance) -> dict[str, Any]:
    """0002: segments 20 and 24 of 40 lost, so no new data follows to bring the dupacks
    a second fast retransmit would need. Extra ms over a loss-free GET, best of 5."""
    try:
        r = _extra(app, "out.drop=20+24", 5)
    finally:
        app.impair("")
    return {**r, "value": r["extra_ms"]}


def sack_holes(app: Appliance) -> dict[str, Any]:
    """0003: four segments of one window lost on a SACK_RTT_MS round trip. Extra round
    trips over a loss-free GET, best of 3."""
    delay = f"delay={SACK_RTT_MS // 2}ms"
    app.impair(delay)
    try:
        r = _extra(app, f"{delay},out.drop=8+14+20+26", 3)
    finally:
        app.impair("")
    return {**r, "value": r["extra_ms"] / SACK_RTT_MS}


def tail_lost(app: Appliance) -> dict[str, Any]:
    """0004: the reply's last segment lost. Extra ms over a loss-free GET, best of 5."""
    reply_segs = -(-(len(b"$%d\r\n" % (NSEG * SEG)) + NSEG * SEG + 2) // SEG)
    try:
        r = _extra(app, f"out.drop={reply_segs}", 5)
    finally:
        app.impair("")
    return {**r, "value": r["extra_ms"]}


def _blob(app: Appliance) -> bytes:
    """SET blob to the UPLOAD-byte value that the upload scenarios GET and SET back."""
    value = bytes(range(256)) * (UPLOAD // 256)
    with app.connect() as s:
        s.sendall(command(b"SET", b"blob", value))
        expect(read_reply(s, 5), b"+OK\r\n")
    return value


UPLOAD_REPLIES = len(b"$%d\r\n" % UPLOAD) + UPLOAD + 2 + len(b"+OK\r\n+PONG\r\n")
"""The bytes of GET blob's, SET up's and PING's replies."""


def upload_while_not_reading(app: Appliance, tries: int = UPLOAD_TRIES,
                             timeout: float = 20.0) -> dict[str, Any]:
    """0005: a client pipelines a 13 MB SET behind a GET of 13 MB and reads nothing
    until it has sent it all (its window closes while it sends) on a path that loses
    1% of frames; each upload must be sent within ``timeout`` (sendall's timeout is
    its whole duration; TimeoutError). Every reply is checked. The slowest upload's
    seconds."""
    value = _blob(app)
    request = command(b"GET", b"blob") + command(b"SET", b"up", value) + command(b"PING")
    replies = UPLOAD_REPLIES
    sends: list[float] = []
    app.impair("loss=1%")
    try:
        for _ in range(tries):
            with app.connect(timeout=timeout, rcvbuf=64 * 1024) as s:
                t0 = time.perf_counter()
                s.sendall(request)
                sends.append(time.perf_counter() - t0)
                got = read_reply(s, replies)
                if not (got.endswith(b"+OK\r\n+PONG\r\n") and got[-30:-14] == value[-16:]):
                    raise ConnectionError(f"upload {len(sends)}: replies end {got[-30:]!r}")
    finally:
        app.impair("")
    return {"sends_s": sends, "value": max(sends)}


def upload_after_zero_window_probes(app: Appliance, tries: int = 3, timeout: float = 30.0,
                                    wait: float = PROBE_WAIT) -> dict[str, Any]:
    """0006: a client asks for a GET of 13 MB, reads nothing for ``wait`` seconds (its
    receive window closes at once and lwIP probes it 60, 180 and 420 ms after),
    then uploads a 13 MB SET before it reads; no impairment. Each upload must be sent
    within ``timeout`` (TimeoutError); every reply is checked. The slowest upload's
    seconds."""
    value = _blob(app)
    upload = command(b"SET", b"up", value) + command(b"PING")
    sends: list[float] = []
    for _ in range(tries):
        with app.connect(timeout=timeout, rcvbuf=64 * 1024) as s:
            s.sendall(command(b"GET", b"blob"))
            time.sleep(wait)
            t0 = time.perf_counter()
            s.sendall(upload)
            sends.append(time.perf_counter() - t0)
            got = read_reply(s, UPLOAD_REPLIES)
            if not (got.endswith(b"+OK\r\n+PONG\r\n") and got[-30:-14] == value[-16:]):
                raise ConnectionError(f"upload {len(sends)}: replies end {got[-30:]!r}")
    return {"sends_s": sends, "value": max(sends)}


SCENARIOS: dict[str, tuple[Callable[[Appliance], dict[str, Any]], str, float, float]] = {
    "0001 first reply lost (s)": (first_reply_lost, "s", 0.0, 1.0),
    "0001 SYN-ACK lost, handshake (s)": (syn_ack_lost, "s", 0.9, 2.0),
    "0002 partial ACK, extra (ms)": (partial_ack, "ms", 0.0, 25.0),
    "0003 SACK, extra (round trips)": (sack_holes, "RTT", 0.0, 2.5),
    "0004 tail loss, extra (ms)": (tail_lost, "ms", 0.0, 30.0),
    "0005 upload not reading, slowest (s)": (upload_while_not_reading, "s", 0.0, 5.0),
    "0006 upload after probes, slowest (s)": (upload_after_zero_window_probes, "s", 0.0, 5.0),
}
"""name: (scenario, unit, target low, target high): the patched stack's value is
expected within [low, high)."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, help="write the results here")
    a = p.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/tcp_recovery.py needs root (network namespaces)", file=sys.stderr)
        return 2
    app = Appliance(f"irtb{os.getpid() % 100000}")
    rows = []
    try:
        for name, (scenario, unit, lo, hi) in SCENARIOS.items():
            try:
                r = scenario(app)
            except TimeoutError as e:  # a recovery that never came: reported, not fatal
                r = {"value": float("inf"), "error": f"timed out: {e}"}
            met = lo <= r["value"] < hi
            rows.append({"scenario": name, "unit": unit, "value": r["value"], "target":
                         [lo, hi], "met": met, "detail": r})
            print(f"{name:40} {r['value']:10.3f}  target [{lo:g}, {hi:g})  "
                  f"{'PASS' if met else 'NOT MET'}", flush=True)
    finally:
        app.stop()
    if a.json:
        a.json.write_text(json.dumps({"scenarios": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
