"""Latency under packet loss: stock Redis, inreplay's kernel stack and DPDK + lwIP.

All three sit in one appliance namespace behind the impairment bridge
(`pyctl netns up --impair`, bench/impair.c), reached from the root namespace:

    redis    stock redis-server on the kernel address, port 6379
    kernel   inreplay --stack kernel on the kernel address, port 6390
    dpdk     inreplay --stack dpdk (af_packet on the same veth) on the appliance address

For each loss rate (--loss, percent, the same in both directions; 0 is the
reference) and each system, one connection and one request in flight times

    GET 64 B, GET 13 MB     values SET beforehand
    SAMPLE 512              REPLAY.SAMPLE of 512 items of 128 B (inreplay only)

for at most --seconds per workload (at least 3 and at most a fixed count of
requests; the first ones are not dropped as warm-up: they are the point), then prints p50/p99
in milliseconds, and with --json FILE writes every number. Needs root.

    python bench/faults.py [--loss 0,0.1,1,5] [--seconds 8] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl import netns  # noqa: E402

PYCTL = [sys.executable, "-m", "pyctl"]
PORT = 6390
WORKLOADS = ("GET 64 B", "GET 13 MB", "SAMPLE 512")
COUNTS = {"GET 64 B": 2000, "GET 13 MB": 60, "SAMPLE 512": 1000}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def wait_ping(host: str, port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with redis.Redis(host=host, port=port, socket_timeout=1, protocol=2) as r:
                if r.ping():
                    return
        except redis.RedisError:
            time.sleep(0.1)
    raise RuntimeError(f"{host}:{port} did not answer PING within {timeout} s")


class Systems:
    """The three servers in the topology's appliance namespace."""

    def __init__(self, topo: netns.Topology, workdir: Path) -> None:
        self.topo, self.procs = topo, []  # type: list[subprocess.Popen[bytes]]
        self.addr: dict[str, tuple[str, int]] = {}
        self.dpdk_endpoint = ""
        ns, kip = topo.netns, topo.kernel_ip
        log_f = open(workdir / "servers.log", "ab")
        self.procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, "redis-server", "--bind", kip, "--port", "6379",
             "--save", "", "--appendonly", "no", "--protected-mode", "no",
             "--dir", str(workdir)], stdout=log_f, stderr=log_f))
        self.addr["redis"] = (kip, 6379)
        self.procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, *PYCTL, "start", "--listen", f"{kip}:{PORT}",
             "--client-subnet", f"{topo.client_ip}/{topo.prefix}"],
            stdout=log_f, stderr=log_f, cwd=ROOT))
        self.addr["kernel"] = (kip, PORT)
        r = subprocess.run([*PYCTL, "start", "--stack", "dpdk", "--netns", ns, "--cores", "0",
                            "--vdev", f"net_af_packet0,iface={topo.iface}",
                            "--ip", f"{topo.appliance_ip}/{topo.prefix}", "--listen-port",
                            str(PORT), "--mtu", str(topo.mtu), "--hugepages", "128",
                            "--file-prefix", f"{ns}-b", "--daemon"],
                           capture_output=True, text=True, cwd=ROOT, timeout=90)
        if r.returncode == 0:
            self.addr["dpdk"] = (topo.appliance_ip, PORT)
            self.dpdk_endpoint = f"{topo.appliance_ip}:{PORT}"
        else:
            log(f"dpdk did not start: {r.stderr.strip()}")
        for name, (host, port) in self.addr.items():
            wait_ping(host, port)
            log(f"{name} answers on {host}:{port}")

    def stop(self) -> None:
        if self.dpdk_endpoint:
            subprocess.run([*PYCTL, "stop", "--listen", self.dpdk_endpoint],
                           capture_output=True, cwd=ROOT)
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def connect(host: str, port: int) -> redis.Redis:
    return redis.Redis(host=host, port=port, protocol=2, socket_timeout=120,
                       single_connection_client=True, retry=Retry(NoBackoff(), 0))


def load(r: redis.Redis, system: str) -> None:
    r.set("f:64", b"x" * 64)
    r.set("f:13m", os.urandom(13 << 20))
    if system != "redis":
        r.execute_command("REPLAY.CREATE", "f:t", "CAPACITY", 4096)
        args: list[object] = []
        for i in range(4096):
            args += ["1.0" if i % 7 else "3.0", i.to_bytes(4, "little") * 32]
        r.execute_command("REPLAY.ADD", "f:t", *args)


def steps(r: redis.Redis) -> dict[str, Callable[[], Any]]:
    def get64() -> None:
        assert r.get("f:64") == b"x" * 64

    def get13() -> None:
        assert len(r.get("f:13m") or b"") == 13 << 20

    def sample() -> None:
        ids, _weights, items = r.execute_command("REPLAY.SAMPLE", "f:t", 512)
        assert len(ids) == 8 * 512 and len(items) == 512

    return {"GET 64 B": get64, "GET 13 MB": get13, "SAMPLE 512": sample}


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def measure(step: Callable[[], Any], count: int, seconds: float) -> dict[str, Any]:
    ns: list[float] = []
    t_end = time.monotonic() + seconds
    while len(ns) < count and (time.monotonic() < t_end or len(ns) < 3):
        t0 = time.perf_counter_ns()
        step()
        ns.append((time.perf_counter_ns() - t0) / 1e6)
    return {"n": len(ns), "p50_ms": percentile(ns, 0.5), "p99_ms": percentile(ns, 0.99),
            "max_ms": max(ns), "mean_ms": sum(ns) / len(ns)}


def run(losses: list[float], seconds: float, seed: int, workdir: Path) -> dict[str, Any]:
    name = f"irb{os.getpid() % 100000}"
    os.environ.setdefault("INREPLAY_RUN_DIR", str(workdir / "run"))
    topo = netns.up(name, netns.free_subnet(), impair="", impair_seed=seed)
    systems = None
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    try:
        systems = Systems(topo, workdir)
        conns = {s: connect(*a) for s, a in systems.addr.items()}
        for s, r in conns.items():
            load(r, s)
        for loss in losses:
            netns.set_impair(name, f"loss={loss}%" if loss else "")
            for system, r in conns.items():
                for w, step in steps(r).items():
                    if system == "redis" and w.startswith("SAMPLE"):
                        continue
                    before = netns.bridge_stats(name)
                    try:
                        m = measure(step, COUNTS[w], seconds)
                    except (redis.RedisError, AssertionError) as e:
                        errors.append(f"{system} {w} at {loss}% loss: {e!r}")
                        log(errors[-1])
                        continue
                    after = netns.bridge_stats(name)
                    m["dropped"] = sum(after[d]["dropped"] - before[d]["dropped"]  # type: ignore
                                       for d in ("ab", "ba"))
                    results.append({"system": system, "workload": w, "loss_pct": loss, **m})
                    log(f"{loss:>4}% {system:6} {w:10} p50 {m['p50_ms']:9.2f} ms  "
                        f"p99 {m['p99_ms']:9.2f} ms  (n={m['n']}, {m['dropped']} dropped)")
        for r in conns.values():
            r.close()
    finally:
        if systems is not None:
            systems.stop()
        _, bridge = netns.down_with_stats(name)
    return {"losses_pct": losses, "seconds": seconds, "seed": seed, "results": results,
            "errors": errors, "bridge": bridge, "cpus": os.cpu_count(),
            "when": time.strftime("%Y-%m-%d %H:%M:%S")}


def table(doc: dict[str, Any]) -> str:
    systems = ["redis", "kernel", "dpdk"]
    lines = [f"{'workload':11} {'loss':>5}  " + "  ".join(f"{s + ' p50/p99 ms':>22}"
                                                          for s in systems)]
    for w in WORKLOADS:
        for loss in doc["losses_pct"]:
            cells = []
            for s in systems:
                m = next((x for x in doc["results"] if x["system"] == s and x["workload"] == w
                          and x["loss_pct"] == loss), None)
                cells.append(f"{m['p50_ms']:>10.2f} /{m['p99_ms']:>10.2f}" if m else f"{'-':>22}")
            lines.append(f"{w:11} {loss:>4}%  " + "  ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loss", default="0,0.1,1,5", help="loss rates in percent (0,0.1,1,5)")
    p.add_argument("--seconds", type=float, default=8.0, help="at most this long per workload")
    p.add_argument("--seed", type=int, default=1, help="the bridge's seed")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--workdir", type=Path, default=Path("/tmp") / f"inreplay-faults-{os.getpid()}")
    a = p.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/faults.py needs root (network namespaces)", file=sys.stderr)
        return 2
    a.workdir.mkdir(parents=True, exist_ok=True)
    doc = run([float(x) for x in a.loss.split(",")], a.seconds, a.seed, a.workdir)
    print(table(doc))
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1))
    return 0 if doc["results"] else 1


if __name__ == "__main__":
    sys.exit(main())
