"""Soak: actors insert and a learner samples at full speed; the server's memory must
stay flat once the tables are full (a benchmark, not part of make test).

    python bench/soak.py [--minutes 30] [--actors 2] [--json FILE]

Starts inreplay on the kernel stack (loopback), creates a table that fills in
the first minute or so, runs `--actors` inserter processes (REPLAY.ADD batches
of 64 items of 1-4 KB) and one learner process (REPLAY.SAMPLE 512 + REPLAY.UPDATE,
and a 1 MB parameter SET every 50 steps), and samples the server's RSS and
INFO used_memory every 5 s. The baseline is the RSS when the table first
reports full; the run passes if the last sample is within --tolerance of it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl.client import ReplayClient  # noqa: E402
from pyctl.proc import free_port  # noqa: E402

TABLE = "soak"


def actor(port: int, seed: int, stop: Any, counter: Any) -> None:
    rc = ReplayClient(port=port)
    rng = np.random.default_rng(seed)
    while not stop.is_set():
        sizes = rng.integers(1024, 4096, size=64)
        items = [rng.bytes(int(n)) for n in sizes]
        rc.add(TABLE, np.abs(rng.normal(size=64)), items)
        with counter.get_lock():
            counter.value += 64


def learner(port: int, stop: Any, counter: Any) -> None:
    rc = ReplayClient(port=port)
    rng = np.random.default_rng(1)
    blob = rng.bytes(1 << 20)
    steps = 0
    while not stop.is_set():
        try:
            s = rc.sample(TABLE, 512)
        except Exception:  # empty at the very start
            time.sleep(0.05)
            continue
        rc.update(TABLE, s.ids, np.abs(rng.normal(size=len(s.ids))))
        steps += 1
        if steps % 50 == 0:
            rc.redis.set("params", blob)
        with counter.get_lock():
            counter.value += 1


def rss_bytes(pid: int) -> int:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--capacity", type=int, default=50_000)
    ap.add_argument("--maxbytes", type=int, default=128 << 20)
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="allowed RSS growth after the table is full (default 5%%)")
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "pyctl", "start", "--listen",
                               f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert server.stdout is not None and "listening" in server.stdout.readline()
    rc = ReplayClient(port=port)
    rc.create(TABLE, capacity=args.capacity, maxbytes=args.maxbytes)
    stop = mp.get_context("spawn").Event()
    inserted = mp.get_context("spawn").Value("q", 0)
    sampled = mp.get_context("spawn").Value("q", 0)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=actor, args=(port, 100 + i, stop, inserted))
             for i in range(args.actors)]
    procs.append(ctx.Process(target=learner, args=(port, stop, sampled)))
    for p in procs:
        p.start()
    samples: list[dict[str, Any]] = []
    baseline: dict[str, Any] | None = None
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < args.minutes * 60:
            time.sleep(args.interval)
            info = rc.info(TABLE)
            mem = rc.redis.info("memory")
            row = {"t": round(time.monotonic() - t0, 1), "rss": rss_bytes(server.pid),
                   "used_memory": int(mem["used_memory"]), "size": int(info["size"]),
                   "inserts": int(info["inserts"]), "samples": int(info["samples"]),
                   "learner_steps": sampled.value}
            samples.append(row)
            if baseline is None and row["size"] >= args.capacity * 0.99:
                baseline = row
            print(f"[{row['t']:7.1f}s] rss {row['rss'] / 2**20:7.1f} MiB  used "
                  f"{row['used_memory'] / 2**20:7.1f} MiB  size {row['size']:>7}  inserts "
                  f"{row['inserts']:>9}  learner steps {row['learner_steps']:>7}", flush=True)
    finally:
        stop.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
        rc.close()
        server.send_signal(signal.SIGTERM)
        server_rc = server.wait(10)
    last = samples[-1] if samples else None
    growth = (last["rss"] - baseline["rss"]) / baseline["rss"] if baseline and last else None
    ok = growth is not None and growth <= args.tolerance and server_rc == 0
    result = {
        "minutes": args.minutes, "actors": args.actors, "capacity": args.capacity,
        "maxbytes": args.maxbytes, "tolerance": args.tolerance, "baseline": baseline,
        "last": last, "rss_growth": growth, "max_rss": max(s["rss"] for s in samples),
        "passed": ok, "server_exit": server_rc, "samples": samples,
        "inserts_per_s": last["inserts"] / last["t"] if last else None,
        "learner_steps_per_s": last["learner_steps"] / last["t"] if last else None,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    verdict = "PASS" if ok else "FAIL"
    print(f"soak {verdict}: RSS {baseline['rss'] / 2**20 if baseline else 0:.1f} MiB when full, "
          f"{last['rss'] / 2**20 if last else 0:.1f} MiB at the end "
          f"({(growth or 0) * 100:+.1f}%, tolerance {args.tolerance * 100:.0f}%)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
