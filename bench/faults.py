"""Latency under packet loss, reordering and duplication: inreplay's kernel stack and DPDK + lwIP.

Both sit in one appliance namespace behind the impairment bridge
(`pyctl netns up --impair`, bench/impair.c), reached from the root namespace:

    kernel   inreplay --stack kernel on the kernel address, port 6390
    dpdk     inreplay --stack dpdk (af_packet on the same veth) on the appliance address
    redis    stock redis-server on the kernel address (only with --systems ...,redis)

For each condition (the bridge's spec, the same in both directions; `none` is the
reference) and each system, one connection and one request in flight times

    GET 64 B, GET 64 KB, GET 1 MB, GET 13 MB      values SET beforehand
    SAMPLE 512 x 28 KB                            REPLAY.SAMPLE of 512 items of 28 KB
    first reply                                   a fresh connection per request: from
                                                  sending GET 64 B to its reply (the
                                                  handshake is timed apart, as connect_ms)

for at most --seconds per cell (at least 3 and at most a fixed count of requests;
nothing is dropped as warm-up: the first requests are the point) and reports p50,
p99 and max in milliseconds. Every reply is checked byte for byte. --json FILE
writes one row per cell; bench/report.py --faults FILE turns it into the README's
fault table and its goals (PASS / NOT MET). --quick takes fewer
requests per cell (p99 of a few dozen samples is close to the max). Needs root.

    python bench/faults.py [--quick] [--conditions none,loss-1,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
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
CONDITIONS: dict[str, str] = {
    "none": "",
    "loss-0.1": "loss=0.1%",
    "loss-1": "loss=1%",
    "loss-5": "loss=5%",
    "reorder-25": "reorder=25%/1ms",
    "duplicate-1": "duplicate=1%",
}
"""Condition name -> the bridge's spec (both directions)."""
ITEM = 28 * 1024
VALUES = {"GET 64 B": 64, "GET 64 KB": 64 << 10, "GET 1 MB": 1 << 20, "GET 13 MB": 13 << 20}
SAMPLE = "SAMPLE 512 x 28 KB"
FRESH = "first reply"
WORKLOADS = (*VALUES, SAMPLE, FRESH)
COUNTS = {"GET 64 B": 2000, "GET 64 KB": 1000, "GET 1 MB": 300, "GET 13 MB": 60,
          SAMPLE: 40, FRESH: 500}
FRESH_SECONDS = 20.0
"""At least this long for the first-reply cell (its handshakes lose SYNs under loss)."""
QUICK_COUNTS = {"GET 64 B": 400, "GET 64 KB": 200, "GET 1 MB": 60, "GET 13 MB": 15,
                SAMPLE: 10, FRESH: 150}


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
    """The servers in the topology's appliance namespace."""

    def __init__(self, topo: netns.Topology, workdir: Path, systems: list[str]) -> None:
        self.topo, self.procs = topo, []  # type: list[subprocess.Popen[bytes]]
        self.addr: dict[str, tuple[str, int]] = {}
        self.dpdk_endpoint = ""
        self.dpdk_build = ""
        ns, kip = topo.netns, topo.kernel_ip
        log_f = open(workdir / "servers.log", "ab")
        if "redis" in systems:
            self.procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "redis-server", "--bind", kip, "--port", "6379",
                 "--save", "", "--appendonly", "no", "--protected-mode", "no",
                 "--dir", str(workdir)], stdout=log_f, stderr=log_f))
            self.addr["redis"] = (kip, 6379)
        if "kernel" in systems:
            self.procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, *PYCTL, "start", "--listen", f"{kip}:{PORT}",
                 "--client-subnet", f"{topo.client_ip}/{topo.prefix}"],
                stdout=log_f, stderr=log_f, cwd=ROOT))
            self.addr["kernel"] = (kip, PORT)
        if "dpdk" in systems:
            r = subprocess.run([*PYCTL, "start", "--stack", "dpdk", "--netns", ns, "--cores", "0",
                                "--vdev", f"net_af_packet0,iface={topo.iface}",
                                "--ip", f"{topo.appliance_ip}/{topo.prefix}", "--listen-port",
                                str(PORT), "--mtu", str(topo.mtu), "--hugepages", "256",
                                "--file-prefix", f"{ns}-b", "--daemon",
                                # as the kernel row: a DPDK port trusts no one by default
                                "--client-subnet", f"{topo.client_ip}/{topo.prefix}"],
                               capture_output=True, text=True, cwd=ROOT, timeout=90)
            if r.returncode == 0:
                self.addr["dpdk"] = (topo.appliance_ip, PORT)
                self.dpdk_endpoint = f"{topo.appliance_ip}:{PORT}"
            else:
                log(f"dpdk did not start: {r.stderr.strip()}")
        for name, (host, port) in self.addr.items():
            wait_ping(host, port)
            log(f"{name} answers on {host}:{port}")
        if "dpdk" in self.addr:
            with redis.Redis(*self.addr["dpdk"], protocol=2) as r:
                self.dpdk_build = str(r.info("server").get("stack_build", ""))

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


def value(size: int) -> bytes:
    """A value whose every byte is checked (a repeating counter, not one byte)."""
    return bytes(range(256)) * (size // 256) + bytes(range(size % 256))


def item(i: int) -> bytes:
    return i.to_bytes(4, "little") * (ITEM // 4)


def load(r: redis.Redis, system: str) -> None:
    for w, size in VALUES.items():
        r.set(f"f:{w}", value(size))
    if system != "redis":
        r.execute_command("REPLAY.CREATE", "f:t", "CAPACITY", 1024)
        for base in range(0, 1024, 64):
            args: list[object] = []
            for i in range(base, base + 64):
                args += ["1.0" if i % 7 else "3.0", item(i)]
            r.execute_command("REPLAY.ADD", "f:t", *args)


GET64 = b"*2\r\n$3\r\nGET\r\n$10\r\nf:GET 64 B\r\n"
GET64_REPLY = b"$64\r\n" + value(64) + b"\r\n"


def steps(r: redis.Redis) -> dict[str, Callable[[], Any]]:
    def get(w: str, size: int) -> Callable[[], None]:
        want = value(size)

        def step() -> None:
            got = r.get(f"f:{w}")
            assert got == want, f"{w}: {len(got or b'')} bytes, not the value SET"
        return step

    def sample() -> None:
        ids, _weights, items = r.execute_command("REPLAY.SAMPLE", "f:t", 512)
        assert len(ids) == 8 * 512 and len(items) == 512
        for k, it in enumerate(items):
            i = int.from_bytes(ids[8 * k:8 * k + 8], "little") % 1024
            assert it == item(i), f"{SAMPLE}: item {i} differs"

    out: dict[str, Callable[[], Any]] = {w: get(w, s) for w, s in VALUES.items()}
    out[SAMPLE] = sample
    return out


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary(ms: list[float]) -> dict[str, Any]:
    return {"n": len(ms), "p50_ms": percentile(ms, 0.5), "p99_ms": percentile(ms, 0.99),
            "max_ms": max(ms), "mean_ms": sum(ms) / len(ms)}


def measure(step: Callable[[], Any], count: int, seconds: float) -> dict[str, Any]:
    ms: list[float] = []
    t_end = time.monotonic() + seconds
    while len(ms) < count and (time.monotonic() < t_end or len(ms) < 3):
        t0 = time.perf_counter_ns()
        step()
        ms.append((time.perf_counter_ns() - t0) / 1e6)
    return summary(ms)


def measure_fresh(host: str, port: int, count: int, seconds: float) -> dict[str, Any]:
    """The first reply on a fresh connection: connect, send GET 64 B, time to its reply."""
    ms: list[float] = []
    conn_ms: list[float] = []
    t_end = time.monotonic() + seconds
    while len(ms) < count and (time.monotonic() < t_end or len(ms) < 3):
        t0 = time.perf_counter_ns()
        with socket.create_connection((host, port), timeout=30) as s:
            t1 = time.perf_counter_ns()
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(GET64)
            got = b""
            while len(got) < len(GET64_REPLY):
                chunk = s.recv(4096)
                if not chunk:
                    raise ConnectionError(f"closed after {len(got)} bytes of the first reply")
                got += chunk
            ms.append((time.perf_counter_ns() - t1) / 1e6)
            conn_ms.append((t1 - t0) / 1e6)
            assert got == GET64_REPLY, "first reply differs from the value SET"
    out = summary(ms)
    c = summary(conn_ms)
    out.update({"connect_p50_ms": c["p50_ms"], "connect_p99_ms": c["p99_ms"],
                "connect_max_ms": c["max_ms"]})
    return out


def run(conditions: list[str], systems_wanted: list[str], seconds: float, quick: bool,
        seed: int, workdir: Path) -> dict[str, Any]:
    name = f"irb{os.getpid() % 100000}"
    os.environ.setdefault("INREPLAY_RUN_DIR", str(workdir / "run"))
    topo = netns.up(name, netns.free_subnet(), impair="", impair_seed=seed)
    counts = QUICK_COUNTS if quick else COUNTS
    systems = None
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    dpdk_build = ""
    try:
        systems = Systems(topo, workdir, systems_wanted)
        dpdk_build = systems.dpdk_build
        conns = {s: connect(*a) for s, a in systems.addr.items()}
        for s, r in conns.items():
            load(r, s)
        for cond in conditions:
            netns.set_impair(name, CONDITIONS[cond])
            for system, r in conns.items():
                work: dict[str, Callable[[], dict[str, Any]]] = {
                    w: (lambda st=st, w=w: measure(st, counts[w], seconds))
                    for w, st in steps(r).items()}
                # a lost SYN costs the client 1 s: the fresh-connection cell gets more time
                work[FRESH] = lambda a=systems.addr[system]: measure_fresh(  # type: ignore
                    a[0], a[1], counts[FRESH], max(seconds, FRESH_SECONDS))
                for w in WORKLOADS:
                    if system == "redis" and w == SAMPLE:
                        continue
                    before = netns.bridge_stats(name)
                    try:
                        m = work[w]()
                    except (redis.RedisError, AssertionError, OSError) as e:
                        errors.append(f"{system} {w} under {cond}: {e!r}")
                        log(errors[-1])
                        continue
                    after = netns.bridge_stats(name)
                    m["dropped"] = sum(after[d]["dropped"] - before[d]["dropped"]  # type: ignore
                                       for d in ("ab", "ba"))
                    results.append({"system": system, "workload": w, "condition": cond,
                                    "spec": CONDITIONS[cond], **m})
                    log(f"{cond:12} {system:6} {w:19} p50 {m['p50_ms']:9.2f}  "
                        f"p99 {m['p99_ms']:9.2f}  max {m['max_ms']:9.2f} ms  "
                        f"(n={m['n']}, {m['dropped']} dropped)")
        for r in conns.values():
            r.close()
    finally:
        if systems is not None:
            systems.stop()
        _, bridge = netns.down_with_stats(name)
    return {"conditions": {c: CONDITIONS[c] for c in conditions}, "systems": systems_wanted,
            "seconds": seconds, "quick": quick, "seed": seed, "mtu": topo.mtu,
            "dpdk_build": dpdk_build, "results": results, "errors": errors, "bridge": bridge,
            "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%d %H:%M:%S")}


def table(doc: dict[str, Any]) -> str:
    systems = doc["systems"]
    lines = [f"{'workload':19} {'condition':12} " + "  ".join(
        f"{s + ' p50/p99/max ms':>30}" for s in systems)]
    for w in WORKLOADS:
        for cond in doc["conditions"]:
            cells = []
            for s in systems:
                m = next((x for x in doc["results"] if x["system"] == s and x["workload"] == w
                          and x["condition"] == cond), None)
                cells.append(f"{m['p50_ms']:>9.2f} /{m['p99_ms']:>9.2f} /{m['max_ms']:>9.2f}"
                             if m else f"{'-':>30}")
            lines.append(f"{w:19} {cond:12} " + "  ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--conditions", default=",".join(CONDITIONS),
                   help=f"comma-separated, from {', '.join(CONDITIONS)} (default: all)")
    p.add_argument("--systems", default="kernel,dpdk",
                   help="comma-separated, from kernel, dpdk, redis (default: kernel,dpdk)")
    p.add_argument("--quick", action="store_true",
                   help="fewer requests per cell and at most 3 s each (a few minutes in all)")
    p.add_argument("--seconds", type=float, help="at most this long per cell (8; quick: 3)")
    p.add_argument("--seed", type=int, default=1, help="the bridge's seed")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--workdir", type=Path, default=Path("/tmp") / f"inreplay-faults-{os.getpid()}")
    a = p.parse_args(argv)
    conds = [c for c in a.conditions.split(",") if c]
    bad = [c for c in conds if c not in CONDITIONS]
    if bad:
        p.error(f"--conditions: unknown {', '.join(bad)}; choose from {', '.join(CONDITIONS)}")
    systems = [s for s in a.systems.split(",") if s]
    if any(s not in ("kernel", "dpdk", "redis") for s in systems):
        p.error("--systems: choose from kernel, dpdk, redis")
    if os.geteuid() != 0:
        print("bench/faults.py needs root (network namespaces)", file=sys.stderr)
        return 2
    seconds = a.seconds if a.seconds is not None else (3.0 if a.quick else 8.0)
    a.workdir.mkdir(parents=True, exist_ok=True)
    doc = run(conds, systems, seconds, a.quick, a.seed, a.workdir)
    print(table(doc))
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1))
    return 0 if doc["results"] and not doc["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
