"""redis-benchmark against stock Redis and inreplay (kernel, kernel-poll, DPDK), per server core.

The same systems, veth path and core split as bench/latency.py (servers on
--server-core, redis-benchmark on --client-core). Each system gets, in order,

    SET then GET, 64 B,   -c 1            (one client, one request in flight)
    SET then GET, 64 B,   -c 50 -P 16     (many clients, pipelined)
    SET then GET, 13 MB,  -c 1 and -c 4   (parameter blobs; 50 x 16 of them do not fit)

Each run is sized by a short calibration run to last about --seconds. Requests
per server core = requests/s / server cores, where a kernel-stack server's
cores are its process's CPU time during the run (utime + stime from
/proc/PID/stat) over the run's wall time, and a busy-polling server's (DPDK,
kernel-poll) is one core: it spins on its core whether or not there is work.
The shared veth (offloads off) at --mtu (default 9000).

    python bench/throughput.py [--quick] [--json FILE] [--mtu N]

As with bench/latency.py, a system that fails is recorded under "errors"; the
exit status is 1 only if nothing was measured.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from latency import (
    BUSY_POLLING,
    MB,
    SYSTEMS,
    BenchError,
    Pinning,
    Server,
    default_systems,
    free_port,
    human,
    log,
    machine,
    make_server,
    network,
    sigterm_as_exit,
)

from pyctl import netns

PARAMS = 13 * MB  # the seed's Dueling network


@dataclass(frozen=True)
class Config:
    size: int
    clients: int
    pipeline: int

    @property
    def label(self) -> str:
        p = f" -P {self.pipeline}" if self.pipeline > 1 else ""
        return f"{human(self.size)}, -c {self.clients}{p}"


CONFIGS = (Config(64, 1, 1), Config(64, 50, 16), Config(PARAMS, 1, 1), Config(PARAMS, 4, 1))


def redis_benchmark(server: Server, pin: Pinning, test: str, cfg: Config,
                    requests: int) -> dict[str, Any]:
    """One redis-benchmark run, with the server's CPU time and wall time around it."""
    taskset = ["taskset", "-c", str(pin.client)] if pin.client is not None else []
    argv = [*taskset, "redis-benchmark", "-h", server.host, "-p", str(server.port),
            "-t", test.lower(), "-n", str(requests), "-c", str(cfg.clients),
            "-P", str(cfg.pipeline), "-d", str(cfg.size), "--csv"]
    cpu0 = server.cpu_seconds()
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    wall = time.perf_counter() - t0
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = server.cpu_seconds() - cpu0
    rows = [row for row in csv.DictReader(io.StringIO(r.stdout)) if row.get("test")]
    if r.returncode != 0 or not rows:
        raise BenchError(f"redis-benchmark {test} {cfg.label} failed (exit {r.returncode}): "
                         f"{(r.stderr or r.stdout).strip()[-500:]}")
    row = rows[0]
    client_cpu = (child1.ru_utime + child1.ru_stime) - (child0.ru_utime + child0.ru_stime)
    return {"requests": requests, "rps": float(row["rps"]),
            "avg_ms": float(row["avg_latency_ms"]), "p50_ms": float(row["p50_latency_ms"]),
            "p99_ms": float(row["p99_latency_ms"]), "wall_s": wall, "server_cpu_s": cpu,
            "client_cores": client_cpu / wall}


def measure(server: Server, pin: Pinning, test: str, cfg: Config,
            seconds: float) -> dict[str, Any]:
    """Calibrate the request count on a short run, then run for about `seconds`."""
    least = cfg.clients * cfg.pipeline
    calib_n = max(least, 2 if cfg.size >= MB else (20_000 if cfg.pipeline > 1 else 500))
    calib = redis_benchmark(server, pin, test, cfg, calib_n)
    n = max(least, 2, int(calib["rps"] * seconds))
    run = redis_benchmark(server, pin, test, cfg, n)
    measured = run["server_cpu_s"] / run["wall_s"]
    charged = 1.0 if server.system in BUSY_POLLING else measured
    return {"system": server.system, "test": test, "size": cfg.size, "clients": cfg.clients,
            "pipeline": cfg.pipeline, "label": cfg.label, **run,
            "mbps": run["rps"] * cfg.size / 1e6,
            "server_cores_measured": measured, "server_cores": charged,
            "rps_per_core": run["rps"] / charged if charged > 0 else None}


def run(systems: list[str], configs: tuple[Config, ...], seconds: float, loopback: bool,
        server_core: int, client_core: int, quick: bool, busy_poll: bool,
        mtu: int = netns.DEFAULT_MTU) -> dict[str, Any]:
    started = time.time()
    pin = Pinning.choose(server_core, client_core)
    runs: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    with (sigterm_as_exit(), network(loopback, mtu=mtu) as net,
          tempfile.TemporaryDirectory(prefix="irbench-") as tmp):
        for i, system in enumerate(systems):
            port = free_port() if net.loopback else 7100 + i
            try:
                server = make_server(system, net, pin, Path(tmp), port, busy_poll).start()
            except BenchError as e:
                errors[system] = str(e)
                log(f"[{system}] not run: {e}")
                continue
            try:
                for cfg in configs:
                    for test in ("SET", "GET"):  # SET first: GET reads the key it wrote
                        r = measure(server, pin, test, cfg, seconds)
                        runs.append(r)
                        log(f"[{system}] {test} {cfg.label:<22} {r['rps']:>10.0f} req/s "
                            f"{r['mbps']:>8.1f} MB/s  server {r['server_cores_measured']:.2f} "
                            f"cores  {r['rps_per_core'] or 0:>10.0f} req/s/core")
            except (BenchError, OSError, subprocess.TimeoutExpired) as e:
                errors[system] = f"{e}\n{server.log_tail()}"
                log(f"[{system}] failed: {e}")
            finally:
                server.stop()
        net_info = net.describe()
    return {
        "bench": "throughput",
        "quick": quick,
        "machine": {**machine(), "loadavg_end": os.getloadavg()[0]},
        "network": net_info,
        "pinning": asdict(pin),
        "systems": systems,
        "config": {"seconds": seconds, "dpdk_busy_poll": busy_poll, "mtu": mtu,
                   "runs": [asdict(c) for c in configs]},
        "runs": runs,
        "errors": errors,
        "seconds": time.time() - started,
        "notes": [
            "redis-benchmark (C, one thread) on the client core; key key:__rand_int__, "
            "value of -d bytes; SET runs first so GET reads a value of that size",
            "server cores: kernel stacks = the server process's utime + stime over wall "
            "time (the kernel's receive work done in softirq on the client's core is not "
            "counted); DPDK and kernel-poll = 1, the core they busy-poll (DPDK's own "
            "af_packet sends are in it)"
            + ("" if busy_poll else "; started without --busy-poll, so it naps when idle"),
        ],
    }


def table(doc: dict[str, Any]) -> str:
    head = (f"{'system':<8} {'test':<4} {'config':<22} {'req/s':>10} {'MB/s':>8} "
            f"{'p50 ms':>8} {'p99 ms':>8} {'srv cores':>9} {'req/s/core':>11}")
    lines = [head, "-" * len(head)]
    for r in doc["runs"]:
        per = r["rps_per_core"]
        lines.append(f"{r['system']:<8} {r['test']:<4} {r['label']:<22} {r['rps']:>10.0f} "
                     f"{r['mbps']:>8.1f} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
                     f"{r['server_cores']:>9.2f} "
                     + (f"{per:>11.0f}" if per is not None else f"{'—':>11}"))
    for system, err in doc["errors"].items():
        lines.append(f"{system}: not measured: {err.splitlines()[0]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs (under a minute)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--systems", help=f"comma-separated, from {','.join(SYSTEMS)}")
    ap.add_argument("--loopback", action="store_true",
                    help="kernel-stack systems on 127.0.0.1, no namespace")
    ap.add_argument("--sizes", help="value sizes in bytes instead of 64 and 13 MB (tests)")
    ap.add_argument("--seconds", type=float, help="length of each run (default 2, quick 0.5)")
    ap.add_argument("--mtu", type=int, default=netns.DEFAULT_MTU,
                    help=f"the veth's MTU (default {netns.DEFAULT_MTU})")
    ap.add_argument("--server-core", type=int, default=0)
    ap.add_argument("--client-core", type=int, default=1)
    ap.add_argument("--dpdk-nap", action="store_true",
                    help="start the DPDK server without --busy-poll (it naps when idle)")
    args = ap.parse_args(argv)
    systems = args.systems.split(",") if args.systems else default_systems()
    configs = CONFIGS
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
        configs = tuple(Config(s, c.clients, c.pipeline) for s in sizes
                        for c in CONFIGS if c.size == CONFIGS[0].size)
    seconds = args.seconds if args.seconds is not None else (0.5 if args.quick else 2.0)
    try:
        doc = run(systems, configs, seconds, args.loopback, args.server_core,
                  args.client_core, args.quick, not args.dpdk_nap, args.mtu)
    except (BenchError, netns.SetupError) as e:
        print(f"throughput: {e}", file=sys.stderr)
        return 2
    print(table(doc))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    for system, err in doc["errors"].items():
        print(f"throughput: {system} not measured: {err}", file=sys.stderr)
    return 0 if doc["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
