"""The impairment bridge itself (bench/impair.c via `pyctl netns up --impair`).

UDP datagrams from the root namespace to an echo server at the topology's kernel
address cross the bridge twice. The neighbour entries are static and IPv6 is
off, so the only frames on the wire are the test's own: the bridge's counters
can be compared exactly."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyctl import netns

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs network namespaces (root)"),
    pytest.mark.skipif(not (Path(__file__).resolve().parent.parent / "build" / "bench" / "impair")
                       .exists(), reason="build/bench/impair is not built (make build)"),
]

PYCTL = [sys.executable, "-m", "pyctl"]
PORT = 7777
ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    d, a = s.recvfrom(65536)
    s.sendto(d, a)
"""


class Bridge:
    def __init__(self, topo: dict[str, object], echo: subprocess.Popen[str]) -> None:
        self.topo, self.echo = topo, echo
        self.name = str(topo["netns"])
        self.addr = (str(topo["kernel_ip"]), PORT)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)

    def down(self) -> dict[str, object]:
        """Stop the echo server and remove the topology; `pyctl netns down --json`."""
        if self.echo.poll() is None:
            self.echo.kill()
            self.echo.wait()
        r = subprocess.run([*PYCTL, "netns", "down", "--name", self.name, "--json"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return dict(json.loads(r.stdout))

    def stats(self) -> dict[str, dict[str, int]]:
        return netns.bridge_stats(self.name)  # type: ignore[return-value]

    def exchange(self, n: int, size: int = 64, gap: float = 0.0,
                 wait: float = 0.5) -> list[int]:
        """Send n numbered datagrams; the sequence numbers of the echoes, in arrival order."""
        for i in range(n):
            self.sock.sendto(i.to_bytes(4, "big") + bytes(size - 4), self.addr)
            if gap:
                time.sleep(gap)
        got: list[int] = []
        self.sock.settimeout(wait)
        try:
            while True:
                got.append(int.from_bytes(self.sock.recv(65536)[:4], "big"))
        except TimeoutError:
            pass
        return got


def _mac(iface: str, ns: str | None = None) -> str:
    pre = ["ip", "netns", "exec", ns] if ns else []
    out = subprocess.run([*pre, "ip", "-j", "link", "show", iface], capture_output=True,
                         text=True, check=True).stdout
    return str(json.loads(out)[0]["address"])


@pytest.fixture
def bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[Callable[..., Bridge]]:
    """bridge(spec, seed=1): a topology with an impairment bridge and a UDP echo server."""
    monkeypatch.setenv("INREPLAY_RUN_DIR", str(tmp_path / "run"))
    made: list[tuple[str, subprocess.Popen[str] | None]] = []

    def make(spec: str, seed: int = 1) -> Bridge:
        name = f"iri{os.getpid() % 100000}{len(made)}"
        r = subprocess.run([*PYCTL, "netns", "up", "--name", name, "--subnet", netns.free_subnet(),
                            "--impair", spec, "--impair-seed", str(seed), "--json"],
                           capture_output=True, text=True)
        made.append((name, None))
        assert r.returncode == 0, r.stderr
        topo = json.loads(r.stdout)
        subprocess.run(["ip", "neigh", "replace", topo["kernel_ip"], "lladdr",
                        _mac(topo["iface"], name), "dev", topo["peer"], "nud", "permanent"],
                       check=True)
        subprocess.run(["ip", "netns", "exec", name, "ip", "neigh", "replace", topo["client_ip"],
                        "lladdr", _mac(topo["peer"]), "dev", topo["iface"], "nud", "permanent"],
                       check=True)
        echo = subprocess.Popen(["ip", "netns", "exec", name, sys.executable, "-c", ECHO,
                                 topo["kernel_ip"], str(PORT)], stdout=subprocess.PIPE, text=True)
        made[-1] = (name, echo)
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        return Bridge(topo, echo)

    try:
        yield make
    finally:
        for name, echo in made:
            if echo is not None:
                echo.kill()
                echo.wait()
            subprocess.run([*PYCTL, "netns", "down", "--name", name], capture_output=True)


def test_no_impairment_passes_everything_in_order_with_jumbo_frames(
        bridge: Callable[..., Bridge]) -> None:
    b = bridge("")
    assert b.exchange(50, size=8900, gap=0.001) == list(range(50))
    s = b.stats()
    assert s["ab"]["received"] == s["ab"]["forwarded"] == 50
    assert s["ba"]["forwarded"] == 50 and s["ab"]["bytes"] == 50 * (8900 + 42)


def test_loss_100_percent_passes_nothing(bridge: Callable[..., Bridge]) -> None:
    b = bridge("loss=100%")
    assert b.exchange(20, gap=0.001, wait=0.3) == []
    s = b.stats()
    assert s["ab"]["dropped"] == s["ab"]["received"] == 20
    assert s["ab"]["forwarded"] == 0 and s["ba"]["received"] == 0


def test_duplicate_100_percent_delivers_every_frame_twice(bridge: Callable[..., Bridge]) -> None:
    b = bridge("in.duplicate=100%")
    got = b.exchange(30, gap=0.002)
    assert sorted(got) == sorted(list(range(30)) * 2)
    s = b.stats()
    assert s["ab"]["duplicated"] == 30 and s["ba"]["duplicated"] == 0
    assert s["ba"]["received"] == 60


def test_the_same_seed_makes_the_same_decisions(bridge: Callable[..., Bridge]) -> None:
    spec = "loss=20%,duplicate=10%,reorder=20%/1ms,delay=1ms±1ms"
    runs = []
    for seed in (7, 7, 8):
        b = bridge(spec, seed)
        b.exchange(300, gap=0.0005, wait=0.3)
        s = b.stats()
        runs.append({d: {k: v for k, v in s[d].items() if k != "params"} for d in ("ab", "ba")})
        b.down()
    assert runs[0] == runs[1]
    assert runs[0]["ab"]["dropped"] > 0 and runs[0]["ab"]["duplicated"] > 0
    assert runs[0]["ab"]["reordered"] > 0
    assert runs[2] != runs[0], "another seed, other decisions"


def test_delay_adds_at_least_the_configured_delay_to_the_rtt(
        bridge: Callable[..., Bridge]) -> None:
    b = bridge("delay=20ms±5ms")
    rtts = []
    b.sock.settimeout(1.0)
    for i in range(15):
        t0 = time.monotonic()
        b.sock.sendto(i.to_bytes(4, "big"), b.addr)
        assert b.sock.recv(100) == i.to_bytes(4, "big")
        rtts.append(time.monotonic() - t0)
    # at least the delay (20 ms - 5 ms each way); how much more is the machine's load
    assert min(rtts) >= 2 * 0.015, rtts
    s = b.stats()
    assert s["ab"]["delayed"] == s["ba"]["delayed"] == 15


def test_reorder_lets_later_frames_overtake(bridge: Callable[..., Bridge]) -> None:
    b = bridge("in.reorder=30%/5ms")
    got = b.exchange(100)
    assert sorted(got) == list(range(100)), "nothing lost"
    assert got != list(range(100)), "some frames were overtaken"
    assert b.stats()["ab"]["reordered"] > 10


def test_a_burst_drops_for_its_length_then_stops(bridge: Callable[..., Bridge]) -> None:
    b = bridge("burst=100%/500ms")
    assert b.exchange(5, gap=0.001, wait=0.1) == list(range(5))
    r = subprocess.run([*PYCTL, "netns", "impair", "--name", b.name, "--burst", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert b.exchange(5, gap=0.001, wait=0.1) == []
    time.sleep(0.5)
    assert b.exchange(5, gap=0.001, wait=0.1) == list(range(5))
    s = b.stats()
    assert s["ab"]["burst_dropped"] == s["ab"]["dropped"] == 5


def test_sigterm_reports_the_counters_and_down_removes_everything(
        bridge: Callable[..., Bridge]) -> None:
    b = bridge("in.loss=50%")
    b.exchange(40, gap=0.001, wait=0.2)
    pid = int(b.topo["impair"]["pid"])  # type: ignore[index]
    out = b.down()
    bridge_stats = out["bridge"]
    assert out["removed"] and isinstance(bridge_stats, dict)
    assert bridge_stats["ab"]["received"] == 40
    assert 0 < bridge_stats["ab"]["dropped"] < 40
    assert not netns._alive(pid), "the bridge exited"
    have = netns.namespaces()
    assert b.name not in have and f"{b.name}-br" not in have


def test_impair_with_a_bad_value_fails_and_keeps_the_spec(bridge: Callable[..., Bridge]) -> None:
    """`pyctl netns impair --impair loss=abc` printed counters and exited 0 while the
    bridge kept its old spec; now it fails in one line and nothing changes."""
    b = bridge("loss=0%")
    r = subprocess.run([*PYCTL, "netns", "impair", "--name", b.name, "--impair", "loss=abc"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "loss=abc" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert netns._bridge_state(b.name)["spec"] == "loss=0%"  # type: ignore[index]
    assert len(b.exchange(10, gap=0.001, wait=0.3)) == 10
    ok = subprocess.run([*PYCTL, "netns", "impair", "--name", b.name, "--impair", "loss=100%"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert b.exchange(10, gap=0.001, wait=0.3) == []


def test_drop_takes_only_the_listed_tcp_segments(bridge: Callable[..., Bridge]) -> None:
    """drop=N+M counts TCP segments that take sequence space (tests/test_tcp_recovery.py
    drops single reply segments with it): UDP passes, bad lists are refused."""
    b = bridge("drop=1+2")
    assert sorted(b.exchange(20, gap=0.001, wait=0.3)) == list(range(20))
    assert b.stats()["ab"]["dropped"] == 0
    too_many = "drop=" + "+".join(map(str, range(1, 18)))
    for bad in ("drop=0", "drop=3+2", "drop=1+", "drop=x", too_many):
        r = subprocess.run([netns.impair_binary(), "--check", netns.impair_spec(bad)],
                           capture_output=True, text=True)
        assert r.returncode != 0, bad
    ok = subprocess.run([netns.impair_binary(), "--check", netns.impair_spec("out.drop=1+5+9")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
