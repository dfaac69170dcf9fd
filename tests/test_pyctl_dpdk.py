"""The DPDK stack as a user starts it: `pyctl netns up`, then the printed `pyctl start` line.

Runs as root (CI is root); skipped elsewhere with the reason."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pyctl import netns

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="the DPDK stack needs root (hugepages, af_packet)")

PYCTL = [sys.executable, "-m", "pyctl"]


def pyctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYCTL, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


@pytest.fixture
def topo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    monkeypatch.setenv("INREPLAY_RUN_DIR", str(tmp_path / "run"))
    # a DPDK port has no loopback: without a password protected mode refuses every
    # client, so the appliance gets one (pyctl start reads it from the environment)
    # and its clients are handed it (redis-cli and pyctl status: REDISCLI_AUTH)
    password = secrets.token_hex(16)
    monkeypatch.setenv("INREPLAY_REQUIREPASS", password)
    monkeypatch.setenv("REDISCLI_AUTH", password)
    name = f"irp{os.getpid() % 100000}"
    subnet = netns.free_subnet()
    up = pyctl("netns", "up", "--name", name, "--subnet", subnet, "--json")
    assert up.returncode == 0, up.stderr
    t = json.loads(up.stdout)
    t["password"] = password
    human = pyctl("netns", "up", "--name", name, "--subnet", subnet)
    t["start_line"] = human.stdout.strip().splitlines()[-1].strip()
    try:
        yield t
    finally:
        for f in (tmp_path / "run").glob("*.json"):
            try:
                os.kill(json.loads(f.read_text())["pid"], 9)
            except (OSError, ValueError, KeyError):
                pass
        pyctl("netns", "down", "--name", name)


def test_printed_start_line_brings_up_the_dpdk_appliance(topo: dict[str, object]) -> None:
    line = str(topo["start_line"])
    assert line.startswith("pyctl start --stack dpdk --netns ")
    prefix = f"irtest{os.getpid() % 100000}"
    args = [*shlex.split(line)[1:], "--daemon", "--file-prefix", prefix]
    r = pyctl(*args)
    assert r.returncode == 0, r.stderr
    endpoint = f"{topo['appliance_ip']}:6379"
    assert f"dpdk stack listening on {endpoint}" in r.stdout
    st = json.loads(pyctl("status", "--json", "--listen", endpoint).stdout)
    assert st["running"] and st["stack"] == "dpdk" and st["endpoint"] == endpoint
    assert "lwIP" in st["cores"]["0"] and st["netns"] == topo["netns"]

    c = redis.Redis(host=str(topo["appliance_ip"]), port=6379, socket_timeout=10,
                    password=str(topo["password"]))
    assert c.ping()
    blob = os.urandom(13 << 20)
    c.set("params", blob)
    assert hashlib.sha256(c.get("params") or b"").digest() == hashlib.sha256(blob).digest()
    c.execute_command("REPLAY.CREATE", "t", "CAPACITY", "100")
    ids = c.execute_command("REPLAY.ADD", "t", "1", b"a", "2", b"b")
    assert ids == [0, 1]
    raw_ids, _, items = c.execute_command("REPLAY.SAMPLE", "t", "8")
    assert len(raw_ids) == 64 and set(items) <= {b"a", b"b"}
    cli = subprocess.run(["redis-cli", "-h", str(topo["appliance_ip"]), "GET", "nokey"],
                         capture_output=True, text=True, timeout=10)
    assert cli.returncode == 0 and cli.stdout.strip() == ""
    c.close()

    stats = json.loads(pyctl("stats", "--json", "--listen", endpoint).stdout)
    port0 = stats["ports"]["0"]
    # 13 MB came in, in frames of the topology's MTU (jumbo by default)
    assert port0["link_up"] == 1
    assert port0["rx_packets"] > 13e6 / (int(topo["mtu"]) - 40)
    assert {"imissed", "rx_nombuf", "tx_packets"} <= port0.keys()
    assert port0["rx_martians"] == 0  # nothing spoofed here (test_dpdk.py sends some)
    assert stats["tables"]["t"]["size"] == 2 and stats["tables"]["t"]["samples"] == 8
    tool = subprocess.run(["dpdk-telemetry.py", "-f", prefix], input="/inreplay/tables\n",
                          capture_output=True, text=True, timeout=20)
    assert '"capacity": 100' in tool.stdout, tool.stdout + tool.stderr

    t0 = time.monotonic()
    stop = pyctl("stop", "--listen", endpoint)
    assert stop.returncode == 0, stop.stderr
    assert time.monotonic() - t0 < 5
    assert not [f for f in os.listdir("/dev/hugepages") if f.startswith(prefix)]
    assert not Path(f"/var/run/dpdk/{prefix}").exists(), "EAL's runtime dir is removed"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--cores", "0-63"], "--cores 0-63: this machine has cores"),
        (["--cores", "x"], "--cores"),
        (["--queues", "4"], "--queues"),
        (["--listen", "127.0.0.1:1"], "--listen is for the kernel stack"),
    ],
)
def test_dpdk_flag_errors_are_one_line(topo: dict[str, object], extra: list[str],
                                       needle: str) -> None:
    args = [*shlex.split(str(topo["start_line"]))[1:], *extra]
    r = pyctl(*args)
    assert r.returncode != 0
    problems = [line for line in r.stderr.strip().splitlines()
                if "a start line that works on this machine" not in line]
    assert needle in r.stderr and len(problems) == 1, r.stderr


def test_design_start_line_without_stack_or_hugepages(topo: dict[str, object]) -> None:
    """DPDK flags imply --stack dpdk, and hugepages are reserved without --hugepages."""
    prefix = f"irdesign{os.getpid() % 100000}"
    r = pyctl("start", "--cores", "0", "--netns", str(topo["netns"]),
              "--vdev", f"net_af_packet0,iface={topo['iface']}",
              "--ip", f"{topo['appliance_ip']}/{topo['prefix']}", "--listen-port", "6390",
              "--daemon", "--file-prefix", prefix)
    assert r.returncode == 0, r.stderr
    endpoint = f"{topo['appliance_ip']}:6390"
    assert f"dpdk stack listening on {endpoint}" in r.stdout
    st = json.loads(pyctl("status", "--json", "--listen", endpoint).stdout)
    assert st["stack"] == "dpdk" and "lwIP" in str(st["stack_build"])
    assert pyctl("stop", "--listen", endpoint).returncode == 0


def test_missing_interface_and_namespace(topo: dict[str, object]) -> None:
    r = pyctl("start", "--stack", "dpdk", "--ip", "10.81.0.2/24", "--vdev",
              "net_af_packet0,iface=nosuch0")
    assert r.returncode == 2 and "interface nosuch0 does not exist" in r.stderr
    r = pyctl("start", "--stack", "dpdk", "--ip", "10.81.0.2/24", "--netns", "nosuchns")
    assert r.returncode == 2 and "no such namespace" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_no_such_dpdk_port(topo: dict[str, object]) -> None:
    args = [*shlex.split(str(topo["start_line"]))[1:], "--port", "5",
            "--file-prefix", f"irport{os.getpid() % 100000}"]
    r = pyctl(*args)
    assert r.returncode == 1
    assert "no port 5" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_idle_appliance_naps(topo: dict[str, object]) -> None:
    """Busy polling burns a whole core even when nobody talks; the default naps when idle.
    (--busy-poll's full core is not asserted: on a loaded 2-core CI box it is not given one.)"""
    prefix = f"iridle{os.getpid() % 100000}"
    args = [*shlex.split(str(topo["start_line"]))[1:], "--daemon", "--file-prefix", prefix,
            "--cores", "0"]
    r = pyctl(*args)
    assert r.returncode == 0, r.stderr
    endpoint = f"{topo['appliance_ip']}:6379"
    try:
        pid = json.loads(pyctl("status", "--json", "--listen", endpoint).stdout)["pid"]
        time.sleep(1.0)
        c0, t0 = _cpu_seconds(pid), time.monotonic()
        time.sleep(2.0)
        used = (_cpu_seconds(pid) - c0) / (time.monotonic() - t0)
        assert used < 0.3, f"{used:.2f} cores used while idle"
        c = redis.Redis(host=str(topo["appliance_ip"]), port=6379, socket_timeout=5,
                        password=str(topo["password"]))
        assert c.ping()  # a napping appliance still answers
        c.close()
    finally:
        assert pyctl("stop", "--listen", endpoint).returncode == 0
