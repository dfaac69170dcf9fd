"""TCP loss recovery of the DPDK stack's lwIP (dataplane/lwip/patches), one test per patch.

Each test makes one loss happen exactly where the patch acts, with the impairment
bridge's deterministic drop (`drop=N+M`: the Nth and Mth TCP segments that take
sequence space in a direction, counted from when the spec was set), and times the
recovery from the client's side. The bounds are generous (many times what the
patched stack takes) and still below what lwIP 2.1 takes without the patch:

    0001  a fresh connection's lost first reply is resent after the RTO that the
          handshake's RTT sample gives (floored at 60 ms), not after 2.26 s;
          a lost SYN-ACK is resent after 1 s (RFC 6298), not 3 s
    0002  a second hole in one window is resent on the partial ACK (NewReno),
          not after a retransmission timeout
    0003  with the peer's SACK blocks, every hole of a window is resent within one
          round trip of the first duplicate ACKs (RFC 6675), not one hole per
          round trip
    0004  a lost last segment of a reply is resent by a tail-loss probe after
          2 SRTT (at least 10 ms), not after the RTO (40-60 ms at its floor)
    0005  an ACK that acknowledges new data also updates the send window, so a
          client that uploads while its own receive window is closed keeps getting
          ACKs on a lossy path, not none for seconds to minutes

To see a test fail without its patch, build lwIP without it and point pyctl at that
library:

    meson setup build-nopatch -Dlwip_skip_patches=0001,0002,0003,0004,0005 -Dtests=false
    meson compile -C build-nopatch
    INREPLAY_LIB=build-nopatch/libinreplay.so python3 -m pytest tests/test_tcp_recovery.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyctl import netns

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs network namespaces (root)"),
    pytest.mark.skipif(not (ROOT / "build" / "bench" / "impair").exists(),
                       reason="build/bench/impair is not built (make build)"),
]

PYCTL = [sys.executable, "-m", "pyctl"]
PORT = 6391
SEG = 8960          # the MSS on the topology's 9000-byte MTU (lwIP sends no timestamps)
NSEG = 40           # the partial-ACK test's reply: 40 full segments


class Appliance:
    """The DPDK appliance behind the impairment bridge (an empty spec: no impairment)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.topo = netns.up(name, netns.free_subnet(), impair="", impair_seed=1)
        self.host = self.topo.appliance_ip
        self.prefix = f"{name}-t"
        r = subprocess.run([*PYCTL, "start", "--stack", "dpdk", "--netns", name, "--cores", "0",
                            "--vdev", f"net_af_packet0,iface={self.topo.iface}",
                            "--ip", f"{self.host}/{self.topo.prefix}", "--listen-port", str(PORT),
                            "--hugepages", "128", "--file-prefix", self.prefix, "--daemon",
                            # the test's own veth: a DPDK port trusts no one by default
                            "--client-subnet", f"{self.topo.client_ip}/{self.topo.prefix}"],
                           capture_output=True, text=True, timeout=90, cwd=ROOT)
        if r.returncode != 0:
            netns.down(name)
            pytest.skip(f"the DPDK appliance did not start: {r.stderr.strip()[-300:]}")

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


def read_reply(s: socket.socket, want: int) -> bytes:
    got = bytearray()
    while len(got) < want:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError(f"closed after {len(got)} of {want} bytes")
        got += chunk
    return bytes(got)


def timed_get(s: socket.socket, key: bytes, value_len: int) -> float:
    """Seconds from sending GET key to the last byte of its reply."""
    want = len(b"$%d\r\n" % value_len) + value_len + 2
    t0 = time.perf_counter()
    s.sendall(command(b"GET", key))
    reply = read_reply(s, want)
    dt = time.perf_counter() - t0
    assert reply.startswith(b"$%d\r\n" % value_len) and len(reply) == want
    return dt


@pytest.fixture(scope="module")
def app() -> Iterator[Appliance]:
    a = Appliance(f"irtr{os.getpid() % 100000}")
    try:
        with a.connect() as s:
            s.sendall(command(b"SET", b"small", b"v" * 64))
            assert read_reply(s, 5) == b"+OK\r\n"
            s.sendall(command(b"SET", b"big", b"b" * (NSEG * SEG)))
            assert read_reply(s, 5) == b"+OK\r\n"
        yield a
    finally:
        a.stop()


def test_first_reply_lost_is_resent_after_the_handshake_rto(app: Appliance) -> None:
    """0001: the SYN-ACK's RTT sample sets the estimate (RFC 6298 2.2), so a fresh
    connection's lost first reply comes back after about the 60 ms floor; lwIP 2.1
    averaged that sample into its 3 s start value and waited 2.26 s."""
    times = []
    for _ in range(3):
        with app.connect() as s:
            before = app.impair("out.drop=1")  # the appliance's next segment: the reply
            times.append(timed_get(s, b"small", 64))
            assert app.dropped(before) == (0, 1)
    app.impair("")
    assert max(times) < 1.0, f"first reply after a loss took {times} s (unpatched lwIP: 2.26 s)"


def test_lost_syn_ack_is_resent_after_one_second(app: Appliance) -> None:
    """0001: before any RTT sample the RTO is 1 s (RFC 6298 2.1), not lwIP 2.1's 3 s.
    The SYN-ACK and the client's next two SYNs (at 1 s and 2 s: this kernel's
    tcp_syn_linear_timeouts) are dropped, so only the appliance's own timer can
    complete the handshake before the client's fourth SYN at 3 s."""
    before = app.impair("out.drop=1,in.drop=2+3")
    t0 = time.perf_counter()
    with app.connect() as s:
        took = time.perf_counter() - t0
        # The drops count the client's segments, not only its SYNs: when the resent
        # SYN-ACK beats the client's own retry, its next segment is the request. Clear
        # them before asking, so the request measures the connection, not the drops.
        dropped_in, dropped_out = app.dropped(before)
        app.impair("")
        assert timed_get(s, b"small", 64) < 1.0
    # 0: the resent SYN-ACK beat the client's retry; 1-2: its retries were dropped
    assert dropped_out == 1 and dropped_in in (0, 1, 2)
    assert 0.9 < took < 2.0, f"handshake took {took:.2f} s (1 s RTO: about 1.0; 3 s RTO: 3.0)"


def test_partial_ack_resends_the_next_hole_at_once(app: Appliance) -> None:
    """0002: two segments of one window lost; the ACK that the first one's fast
    retransmit brings is partial, and NewReno resends the second hole at once.
    lwIP 2.1 left fast recovery on that ACK and waited for its RTO (40-60 ms at
    the floor, more before it). The best of five runs against a loss-free one."""
    value_len = NSEG * SEG
    with app.connect() as s:
        for _ in range(3):  # open the congestion window: the reply leaves in one flight
            timed_get(s, b"big", value_len)
        clean = min(timed_get(s, b"big", value_len) for _ in range(5))
        lossy = []
        for _ in range(5):
            # the holes: segments 20 and 24 of 40, so no new data follows to bring
            # the dupacks a second fast retransmit would need
            before = app.impair("out.drop=20+24")
            lossy.append(timed_get(s, b"big", value_len))
            assert app.dropped(before) == (0, 2)
        app.impair("")
    extra_ms = (min(lossy) - clean) * 1000
    assert extra_ms < 25, (f"two holes cost {extra_ms:.1f} ms over a loss-free GET "
                           f"({[round(x * 1000, 1) for x in lossy]} ms; an RTO is 40 ms or more)")


def test_sack_blocks_resend_every_hole_in_one_round_trip(app: Appliance) -> None:
    """0003: four segments of one window lost on a 40 ms round trip. The client's SACK
    blocks show all four holes at once and the appliance resends them together:
    about one round trip more than a loss-free GET. NewReno alone (0002) learns of
    one hole per partial ACK: four round trips more."""
    value_len = NSEG * SEG
    rtt_ms = 40
    app.impair(f"delay={rtt_ms // 2}ms")
    try:
        with app.connect() as s:
            for _ in range(3):  # the RTT estimate and the congestion window settle
                timed_get(s, b"big", value_len)
            clean = min(timed_get(s, b"big", value_len) for _ in range(3))
            lossy = []
            for _ in range(3):
                before = app.impair(f"delay={rtt_ms // 2}ms,out.drop=8+14+20+26")
                lossy.append(timed_get(s, b"big", value_len))
                assert app.dropped(before) == (0, 4)
    finally:
        app.impair("")
    extra_rtts = (min(lossy) - clean) * 1000 / rtt_ms
    assert extra_rtts < 2.5, (f"four holes cost {extra_rtts:.1f} round trips over a loss-free GET "
                              f"of {clean * 1000:.0f} ms ({[round(x * 1000) for x in lossy]} ms)")


def test_lost_tail_segment_is_probed_before_the_rto(app: Appliance) -> None:
    """0004: the reply's last segment lost: no later segment brings duplicate ACKs,
    so lwIP waited for its RTO (3 ticks of 20 ms: 40-60 ms). The tail-loss probe
    resends it 2 SRTT (here its 10 ms minimum) after the last ACK. Best of five."""
    value_len = NSEG * SEG
    reply_segs = -(-(len(b"$%d\r\n" % value_len) + value_len + 2) // SEG)
    with app.connect() as s:
        for _ in range(3):
            timed_get(s, b"big", value_len)
        clean = min(timed_get(s, b"big", value_len) for _ in range(5))
        lossy = []
        for _ in range(5):
            before = app.impair(f"out.drop={reply_segs}")
            lossy.append(timed_get(s, b"big", value_len))
            assert app.dropped(before) == (0, 1)
        app.impair("")
    extra_ms = (min(lossy) - clean) * 1000
    assert extra_ms < 30, (f"a lost last segment cost {extra_ms:.1f} ms over a loss-free GET "
                           f"({[round(x * 1000, 1) for x in lossy]} ms; the RTO is 40 ms or more)")


def test_a_reader_that_does_not_read_still_gets_its_upload_acked(app: Appliance) -> None:
    """0005: a client that pipelines a 13 MB SET behind a GET of 13 MB and reads
    nothing until it has sent it all (a full receive buffer, so its window closes
    while it sends), on a path that loses 1% of frames. The client's resent old
    segments carry its newest ACK and a smaller window; lwIP took the ACK but not the
    window, so its usable window (lastack + snd_wnd) ran past the client's. It sent
    beyond it, the client dropped those segments and then every pure ACK of lwIP's
    too (their sequence number, snd_nxt, was out of its window: RFC 9293 3.10.7.4),
    and the client's upload waited seconds to minutes for an ACK (1 in 5-30 tries;
    make test's test_pinned hit it). Forty tries, each upload bounded."""
    n = 13 * 1024 * 1024
    value = bytes(range(256)) * (n // 256)
    with app.connect() as s:
        s.sendall(command(b"SET", b"blob", value))
        assert read_reply(s, 5) == b"+OK\r\n"
    request = command(b"GET", b"blob") + command(b"SET", b"up", value) + command(b"PING")
    replies = len(b"$%d\r\n" % n) + n + 2 + len(b"+OK\r\n+PONG\r\n")
    sends = []
    app.impair("loss=1%")
    try:
        for _ in range(40):
            with app.connect(timeout=20, rcvbuf=64 * 1024) as s:
                t0 = time.perf_counter()
                try:
                    s.sendall(request)
                except TimeoutError:
                    pytest.fail(f"an upload got no ACK for 20 s (after {len(sends)} "
                                f"that took at most {max(sends, default=0):.2f} s)")
                sends.append(time.perf_counter() - t0)
                got = read_reply(s, replies)
                assert got.endswith(b"+OK\r\n+PONG\r\n") and got[-30:-14] == value[-16:]
    finally:
        app.impair("")
    assert max(sends) < 5.0, f"uploads took up to {max(sends):.2f} s: {sorted(sends)[-5:]}"


@pytest.mark.skipif("INREPLAY_LIB" in os.environ, reason="an A/B library: its own patch set")
def test_stack_build_names_the_patches_applied(app: Appliance) -> None:
    """INFO's stack_build says which of dataplane/lwip/patches the build applied: all."""
    series = sorted(p.name[:4] for p in (ROOT / "dataplane/lwip/patches").glob("*.patch"))
    with app.connect() as s:
        s.sendall(command(b"INFO", b"server"))
        time.sleep(0.2)
        info = s.recv(1 << 16).decode()
    build = next(line for line in info.splitlines() if line.startswith("stack_build:"))
    assert f"patches {'+'.join(series)};" in build, build
