"""What the fast paths promise, checked on the wire and in the loop.

- Busy polling on the kernel stack: `--busy-poll` makes the loop poll epoll
  without sleeping while traffic flows (many loop iterations per request) and
  back off once idle (few iterations per idle second); the default loop
  sleeps in epoll (about one iteration per request). Counted with INFO's
  `eventloop_cycles`, so the test does not depend on how busy the machine is.
- The DPDK stack's lwIP is the source build: the peer sees window scaling
  (ss's `wscale:` and `snd_wnd`), so a run on Debian's 64 KB-window lwIP fails.
- `--mtu`: the MSS the client gets follows it (1460 at 1500, 8960 at 9000),
  and large values cross intact both ways.
- Zero-copy TX: large replies leave as segments that point into lwIP's
  buffers (telemetry `tx_zerocopy_segs` grows) and arrive byte-identical.
- The DPDK loop's idle rule: adaptive by default, never napping with
  `--busy-poll`, as INFO's `event_loop` says.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import ROOT, ServerProcess, _dpdk_built
from helpers import free_port

from pyctl import netns

HAVE_DPDK = os.geteuid() == 0 and _dpdk_built()
needs_dpdk = pytest.mark.skipif(not HAVE_DPDK, reason="the DPDK stack needs root and a "
                                "DPDK build (CI has both)")


def loop_cycles(r: redis.Redis) -> int:
    return int(r.info("stats")["eventloop_cycles"])


def cycles_for_requests(r: redis.Redis, n: int, gap_s: float) -> int:
    """Loop iterations while n PINGs arrive gap_s apart."""
    before = loop_cycles(r)
    for _ in range(n):
        r.ping()
        time.sleep(gap_s)
    return loop_cycles(r) - before


def test_kernel_busy_poll_spins_under_traffic_and_backs_off_when_idle(
        server_factory: Callable[..., ServerProcess]) -> None:
    sleepy = server_factory("inreplay")
    poller = server_factory("inreplay", "--busy-poll")
    rs = redis.Redis(host=sleepy.host, port=sleepy.port, protocol=2)
    rp = redis.Redis(host=poller.host, port=poller.port, protocol=2)
    assert rs.info("server")["event_loop"] == "sleep"
    assert rp.info("server")["event_loop"] == "adaptive"

    # 100 requests 1 ms apart: the sleeping loop wakes about once per request
    # (plus its 100 ms ticks); the polling one keeps polling for 200 us after
    # each request, thousands of iterations in all
    # (how many thousands depends on the CPU time the machine gives it: only that
    # it polls at all is asserted, the counts are printed)
    sleepy_cycles = cycles_for_requests(rs, 100, 0.001)
    polling_cycles = cycles_for_requests(rp, 100, 0.001)
    print(f"\n100 requests 1 ms apart: {sleepy_cycles} iterations sleeping, "
          f"{polling_cycles} polling")
    assert sleepy_cycles < 600, sleepy_cycles
    assert polling_cycles > sleepy_cycles, (polling_cycles, sleepy_cycles)

    # idle: after the spin window that follows the INFO request the waits
    # grow to a whole tick, so a quiet second costs about one request's spin
    # and back-off, not a spinning core: the server's CPU time says so on any
    # machine (load only lowers it)
    cpu0, t0 = _cpu_seconds(poller.proc.pid), time.monotonic()
    time.sleep(1.0)
    used = (_cpu_seconds(poller.proc.pid) - cpu0) / (time.monotonic() - t0)
    assert used < 0.3, f"{used:.2f} cores used by the idle --busy-poll server"
    assert rp.ping()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its threads (pyctl start runs the server
    in its own process: the library's polling thread is one of its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- the DPDK stack ---------------------------------------------------------


class Appliance:
    """inreplay on DPDK in this module's namespace, with its own flags."""

    def __init__(self, topo: dict[str, Any], workdir: Path, *flags: str) -> None:
        self.topo = topo
        self.host = str(topo["appliance_ip"])
        self.port = free_port()
        self.prefix = f"{topo['netns']}-{self.port}"
        self.log = workdir / f"dpdk-{self.port}.log"
        argv = [sys.executable, "-m", "pyctl", "start", "--stack", "dpdk",
                "--netns", str(topo["netns"]), "--cores", "0",
                "--vdev", f"net_af_packet0,iface={topo['iface']}",
                "--ip", f"{topo['appliance_ip']}/{topo['prefix']}",
                "--listen-port", str(self.port), "--hugepages", "128",
                "--file-prefix", self.prefix,
                # the test's own veth: a DPDK port trusts no one by default
                "--client-subnet", f"{topo['client_ip']}/{topo['prefix']}", *flags]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"DPDK appliance did not start:\n{self.log.read_text()[-3000:]}")
                time.sleep(0.1)

    def client(self) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, protocol=2, socket_timeout=30)

    def telemetry(self) -> dict[str, Any]:
        """/inreplay/stats (refreshed every 100 ms by the polling thread)."""
        r = subprocess.run(["dpdk-telemetry.py", "-f", self.prefix], input="/inreplay/stats\n",
                           capture_output=True, text=True, timeout=20)
        m = re.search(r'\{"/inreplay/stats": (\{.*?\})\}', r.stdout)
        assert m, r.stdout + r.stderr
        return dict(json.loads(m.group(1)))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(Path("/var/run/dpdk") / self.prefix, ignore_errors=True)
        return self.proc.returncode


@pytest.fixture(scope="module")
def topo() -> Iterator[dict[str, Any]]:
    name = f"irsp{os.getpid() % 100000}"
    subnet = netns.free_subnet()
    r = subprocess.run([sys.executable, "-m", "pyctl", "netns", "up", "--name", name,
                        "--subnet", subnet, "--json"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    try:
        yield json.loads(r.stdout)
    finally:
        subprocess.run([sys.executable, "-m", "pyctl", "netns", "down", "--name", name],
                       capture_output=True, cwd=ROOT)


@pytest.fixture
def appliance(topo: dict[str, Any], tmp_path: Path) -> Iterator[Callable[..., Appliance]]:
    started: list[Appliance] = []

    def start(*flags: str) -> Appliance:
        a = Appliance(topo, tmp_path, *flags)
        started.append(a)
        return a

    yield start
    codes = [(a.stop(), a) for a in started]
    bad = [f"exit {rc}:\n{a.log.read_text()[-2000:]}" for rc, a in codes if rc != 0]
    assert not bad, bad


def tcp_info(host: str, port: int, local_port: int) -> str:
    """ss's view of our connection to host:port (from local_port)."""
    r = subprocess.run(["ss", "-tin", "dst", f"{host}:{port}", "src", f":{local_port}"],
                       capture_output=True, text=True, check=True)
    return r.stdout


def connect_and_inspect(a: Appliance, payload: int) -> tuple[str, bytes]:
    """SET and GET a payload-byte value on one raw connection; ss's line for it."""
    value = os.urandom(payload)
    c = a.client()
    c.set("v", value)
    got = c.get("v")
    conn = c.connection_pool.get_connection()
    local_port = conn._sock.getsockname()[1]
    info = tcp_info(a.host, a.port, local_port)
    c.connection_pool.release(conn)
    c.close()
    assert got is not None
    return info, got if hashlib.sha256(got).digest() == hashlib.sha256(value).digest() else b""


@needs_dpdk
def test_lwip_source_build_has_window_scaling(appliance: Callable[..., Appliance]) -> None:
    a = appliance()
    build = a.client().info("server")["stack_build"]
    assert "source build" in build and "wscale 6" in build, build
    info, ok = connect_and_inspect(a, 1 << 20)
    assert ok, "1 MB value changed on the way"
    # wscale:<the peer's shift>,<ours>: the appliance scales its window by 2^6
    m = re.search(r"wscale:(\d+),(\d+)", info)
    assert m, f"no window scaling negotiated with the appliance:\n{info}"
    assert int(m.group(1)) >= 5, info
    snd_wnd = re.search(r"snd_wnd:(\d+)", info)
    assert snd_wnd and int(snd_wnd.group(1)) >= 1 << 20, f"window under 1 MB:\n{info}"


@needs_dpdk
@pytest.mark.parametrize("mtu", [1500, 9000])
def test_mss_follows_mtu(appliance: Callable[..., Appliance], mtu: int) -> None:
    a = appliance("--mtu", str(mtu))
    assert f"MTU {mtu}" in a.client().info("server")["stack_build"]
    info, ok = connect_and_inspect(a, 3 << 20)
    assert ok, "3 MB value changed on the way"
    assert re.search(rf"\bmss:{mtu - 40}\b", info), info
    # the appliance sent full-sized segments back
    rcvmss = re.search(r"rcvmss:(\d+)", info)
    assert rcvmss and int(rcvmss.group(1)) == mtu - 40, info


@needs_dpdk
def test_large_replies_leave_without_a_copy(appliance: Callable[..., Appliance]) -> None:
    a = appliance()
    before = a.telemetry()["tx_zerocopy_segs"]
    c = a.client()
    blob = os.urandom(13 << 20)
    c.set("params", blob)
    for _ in range(3):
        assert c.get("params") == blob
    c.execute_command("REPLAY.CREATE", "t", "CAPACITY", "1000")
    items = [os.urandom(28224) for _ in range(64)]
    args: list[Any] = []
    for it in items:
        args += ["1", it]
    c.execute_command("REPLAY.ADD", "t", *args)
    _, _, got = c.execute_command("REPLAY.SAMPLE", "t", "512")
    assert set(got) <= set(items) and len(got) == 512
    c.close()
    time.sleep(0.3)  # telemetry is refreshed every 100 ms
    sent = a.telemetry()["tx_zerocopy_segs"] - before
    assert sent > 3 * (13 << 20) // 9000, sent


def idle_second(a: Appliance, event_loop: str) -> int:
    """Loop iterations in a second without requests (after one INFO)."""
    r = a.client()
    assert r.info("server")["event_loop"] == event_loop
    before = loop_cycles(r)
    time.sleep(1.0)
    n = loop_cycles(r) - before
    r.close()
    assert a.stop() == 0  # one lwIP answers on the address at a time
    return n


@needs_dpdk
def test_dpdk_idle_rule_is_adaptive_unless_busy_poll(
        appliance: Callable[..., Appliance]) -> None:
    idle = idle_second(appliance(), "adaptive")
    spinning = idle_second(appliance("--busy-poll"), "busy-poll")
    # the adaptive loop spins for 100 us after the INFO request, then sleeps
    # on the af_packet socket until a frame or a 100 ms tick wakes it: a
    # small fraction of the never-napping loop's count
    assert idle * 20 < spinning, f"idle second: {idle} iterations adaptive, {spinning} busy-poll"


@needs_dpdk
def test_dpdk_sleeps_on_the_af_packet_socket_when_idle(
        appliance: Callable[..., Appliance]) -> None:
    a = appliance()
    r = a.client()
    w0 = a.telemetry()["idle_waits"]
    t0 = time.monotonic()
    # about one wait per 100 ms tick while idle (telemetry itself wakes it too): poll
    # (up to 60 s, a loaded machine's ticks come late) until five have been counted
    w1 = w0
    while w1 - w0 < 5 and time.monotonic() - t0 < 60:
        time.sleep(1.0)
        w1 = a.telemetry()["idle_waits"]
    waited = time.monotonic() - t0
    assert w1 - w0 >= 5, f"{w1 - w0} idle waits in {waited:.0f} s"
    # and it sleeps in them rather than spinning: no more than its ticks and the
    # telemetry reads' wakes (load only makes them fewer)
    assert w1 - w0 <= 40 * waited + 20, (w0, w1, waited)
    # a request arriving while it sleeps is answered (its latency: bench/, not here)
    assert r.ping()
    r.close()


@needs_dpdk
def test_idle_appliance_does_not_spin_when_its_interface_vanishes(tmp_path: Path) -> None:
    """Deleting the namespace under a running appliance (a test's teardown, an
    operator's mistake) makes the af_packet socket report errors at once; the idle
    wait must not turn into a spin, and SIGTERM still stops the appliance."""
    name = f"irsv{os.getpid() % 100000}"
    subnet = netns.free_subnet()
    r = subprocess.run([sys.executable, "-m", "pyctl", "netns", "up", "--name", name,
                        "--subnet", subnet, "--json"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    a = Appliance(json.loads(r.stdout), tmp_path)
    try:
        assert a.client().ping()
        subprocess.run([sys.executable, "-m", "pyctl", "netns", "down", "--name", name],
                       capture_output=True, cwd=ROOT, check=True)
        stat = Path(f"/proc/{a.proc.pid}/stat")
        # pyctl runs the appliance in-process (the loop thread is in this pid)
        def cpu() -> float:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        time.sleep(0.5)
        c0 = cpu()
        time.sleep(2.0)
        assert cpu() - c0 < 0.5, "the appliance spins without its interface"
    finally:
        subprocess.run([sys.executable, "-m", "pyctl", "netns", "down", "--name", name],
                       capture_output=True, cwd=ROOT)
        assert a.stop() == 0
