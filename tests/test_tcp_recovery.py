"""TCP loss recovery of the DPDK stack's lwIP (dataplane/lwip/patches), one test per patch.

Each test makes one loss happen exactly where its patch acts (bench/tcp_recovery.py's
scenarios: the impairment bridge's deterministic drop, `drop=N+M`, the Nth and Mth
TCP segments that take sequence space in a direction) and checks what holds on any
machine: the bridge dropped exactly those segments, and the connection recovered with
every reply intact. How long each recovery takes, against the patch's target, is
measured by `make bench` (bench/tcp_recovery.py), not asserted here: a loaded CI
machine's timings are not a functional fact.

To compare against lwIP without the patches, build lwIP without them and point pyctl
at that library:

    meson setup build-nopatch -Dlwip_skip_patches=0001,0002,0003,0004,0005 -Dtests=false
    meson compile -C build-nopatch
    INREPLAY_LIB=build-nopatch/libinreplay.so python3 bench/tcp_recovery.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import tcp_recovery as tr  # noqa: E402

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs network namespaces (root)"),
    pytest.mark.skipif(not (ROOT / "build" / "bench" / "impair").exists(),
                       reason="build/bench/impair is not built (make build)"),
]


@pytest.fixture(scope="module")
def app() -> Iterator[tr.Appliance]:
    try:
        a = tr.Appliance(f"irtr{os.getpid() % 100000}")
    except tr.StartError as e:
        pytest.skip(str(e))
    try:
        yield a
    finally:
        a.stop()


def test_first_reply_lost_is_resent(app: tr.Appliance) -> None:
    """0001: a fresh connection's lost first reply comes back (whole) by the appliance's
    own retransmission: the client sends nothing more that could prompt it."""
    r = tr.first_reply_lost(app)
    assert r["drops"] == [(0, 1)] * 3, r


def test_lost_syn_ack_is_resent(app: tr.Appliance) -> None:
    """0001: the SYN-ACK and the client's next two SYNs dropped; the handshake still
    completes and the connection serves a GET."""
    r = tr.syn_ack_lost(app)
    # 0: the resent SYN-ACK beat the client's retry; 1-2: its retries were dropped
    assert r["dropped_out"] == 1 and r["dropped_in"] in (0, 1, 2), r


def test_partial_ack_recovers_both_holes(app: tr.Appliance) -> None:
    """0002: two segments of one window lost (20 and 24 of 40); the reply arrives whole."""
    r = tr.partial_ack(app)
    assert r["drops"] == [(0, 2)] * 5, r


def test_sack_recovers_every_hole(app: tr.Appliance) -> None:
    """0003: four segments of one window lost on a 40 ms round trip; the reply arrives
    whole."""
    r = tr.sack_holes(app)
    assert r["drops"] == [(0, 4)] * 3, r


def test_lost_tail_segment_is_recovered(app: tr.Appliance) -> None:
    """0004: the reply's last segment lost (no later segment brings duplicate ACKs);
    the reply arrives whole."""
    r = tr.tail_lost(app)
    assert r["drops"] == [(0, 1)] * 5, r


def test_a_reader_that_does_not_read_still_gets_its_upload_acked(app: tr.Appliance) -> None:
    """0005: a client that pipelines a 13 MB SET behind a GET of 13 MB and reads
    nothing until it has sent it all (a full receive buffer, so its window closes
    while it sends), on a path that loses 1% of frames. lwIP without the patch took
    the client's ACK but not its window, sent beyond it, and the client's upload waited
    seconds to minutes for an ACK (1 in 5-30 tries; make test's test_pinned hit it).
    Ten tries, every reply checked; an upload not sent within 60 s fails (a hang).
    The hunt for rarer stalls, forty tries with a 20 s bound and the slowest upload's
    target, is bench/tcp_recovery.py's 0005 scenario (make bench): a fresh-clone make
    test saw one 20 s stall in forty tries, an upload that outlasted lwIP's first
    zero-window probe (patch 0006 and the next test)."""
    try:
        r = tr.upload_while_not_reading(app, tries=10, timeout=60.0)
    except TimeoutError:
        pytest.fail("an upload was not sent within 60 s")
    assert len(r["sends_s"]) == 10


def test_an_upload_after_zero_window_probes_still_gets_acked(app: tr.Appliance) -> None:
    """0006: a client asks for a GET of 13 MB and reads nothing; after a second (its
    window closed, and lwIP probed it) it uploads a 13 MB SET, still not reading, on a
    loss-free path. lwIP without the patch moved snd_nxt past its probe's byte, which
    the client's closed window did not take, so the client dropped every pure ACK
    after it as out of window and the upload got ACKs only from the probes. Three
    tries, every reply checked; an upload not sent within 60 s fails (a hang)."""
    try:
        r = tr.upload_after_zero_window_probes(app, tries=3, timeout=60.0)
    except TimeoutError:
        pytest.fail("an upload after zero-window probes was not sent within 60 s")
    assert len(r["sends_s"]) == 3


@pytest.mark.skipif("INREPLAY_LIB" in os.environ, reason="an A/B library: its own patch set")
def test_stack_build_names_the_patches_applied(app: tr.Appliance) -> None:
    """INFO's stack_build says which of dataplane/lwip/patches the build applied: all."""
    series = sorted(p.name[:4] for p in (ROOT / "dataplane/lwip/patches").glob("*.patch"))
    with app.connect() as s:
        s.sendall(tr.command(b"INFO", b"server"))
        got = tr.read_reply(s, 1)
        while b"\r\n" not in got:
            got += tr.read_reply(s, 1)
        head = got[:got.index(b"\r\n") + 2]  # $<length>: read the whole bulk reply
        want = len(head) + int(head[1:-2]) + 2
        if len(got) < want:
            got += tr.read_reply(s, want - len(got))
        info = got[len(head):want - 2].decode()
    build = next(line for line in info.splitlines() if line.startswith("stack_build:"))
    assert f"patches {'+'.join(series)};" in build, build
