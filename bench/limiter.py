"""The rate limiter under a 10x imbalance between inserting and sampling.

    python bench/limiter.py [--seconds 600] [--json FILE] [--port P]

A table with MIN_SIZE, SAMPLES_PER_INSERT r and ERROR_BUFFER e; two inserter
clients (REPLAY.ADD batches with TIMEOUT) and two sampler clients
(REPLAY.SAMPLE with TIMEOUT), each paced to an offered rate. For the first
half of the run the inserters offer 10x the items the samplers' rate
licenses (the samplers want base x r samples/s, the inserters offer
10 x base items/s); for the second half the samplers want 10x what the
inserters offer. The limiter must hold the measured samples per insert at r
either way: the fast side waits as blocked clients.

Every --window seconds REPLAY.INFO is read; the report (JSON) has the
timeline (inserts, samples, the limiter's error, samples per insert in the
window, clients waiting), the measured samples per insert over the run (after
MIN_SIZE), the largest deviation of a window from r, the time waited, calls
that timed out, deadlocks (a window in which neither side moved) and starved
clients (one whose longest gap between finished calls exceeds
--starve-seconds while the run went on). Without --port it starts inreplay
itself (kernel stack, loopback). run() is importable (tests run it for 3 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl.errors import RateLimited, code_of, decode_info  # noqa: E402
from pyctl.proc import free_port  # noqa: E402


@dataclass
class Client:
    name: str
    kind: str                     # "inserter" or "sampler"
    calls: int = 0
    items: int = 0
    timeouts: int = 0
    errors: list[str] = field(default_factory=list)
    max_latency_s: float = 0.0
    longest_gap_s: float = 0.0
    last_done: float = 0.0


def _connect(host: str, port: int) -> redis.Redis:
    return redis.Redis(host=host, port=port, protocol=2, socket_timeout=60)


def _info(r: redis.Redis, table: str) -> dict[str, float]:
    d = decode_info(r.execute_command("REPLAY.INFO", table))
    return {k: float(v) for k, v in d.items() if not isinstance(v, str)}


def _worker(c: Client, host: str, port: int, table: str, batch: int, rate_of: Any,
            stop: threading.Event, t_end: float) -> None:
    """Paced calls: rate_of(now) items per second offered (0 = as fast as allowed)."""
    r = _connect(host, port)
    args: list[Any] = []
    if c.kind == "inserter":
        for i in range(batch):
            args += [1, b"transition-%04d" % i + b"." * 48]
    next_at = time.monotonic()
    c.last_done = next_at
    while not stop.is_set():
        now = time.monotonic()
        if now < next_at:
            time.sleep(min(next_at - now, 0.05))
            continue
        rate = rate_of(now)
        next_at = max(next_at + batch / rate, now - 1.0) if rate > 0 else now
        t0 = time.monotonic()
        try:
            if c.kind == "inserter":
                r.execute_command("REPLAY.ADD", table, *args, "TIMEOUT", 5)
            else:
                r.execute_command("REPLAY.SAMPLE", table, batch, "PACKED", "TIMEOUT", 5)
            done = time.monotonic()
            if done < t_end:  # a call left waiting when the run ends does not count
                c.longest_gap_s = max(c.longest_gap_s, done - c.last_done)
            c.last_done = done
            c.calls += 1
            c.items += batch
            c.max_latency_s = max(c.max_latency_s, done - t0)
        except redis.ResponseError as e:
            if code_of(e) != RateLimited.code:
                c.errors.append(str(e))
                return
            if time.monotonic() < t_end:  # else the other side stopped first
                c.timeouts += 1
        except redis.ConnectionError as e:
            if not stop.is_set():
                c.errors.append(str(e))
            return
    r.close()


def run(host: str, port: int, seconds: float, *, rate: float = 4.0, min_size: int = 1000,
        error_buffer: float = 100.0, base: float = 200.0, insert_batch: int = 8,
        sample_batch: int = 32, window: float = 10.0, starve_seconds: float = 5.0,
        table: str = "limiter_bench") -> dict[str, Any]:
    """Run the two phases for `seconds` in total against a running inreplay."""
    ctl = _connect(host, port)
    try:
        ctl.execute_command("REPLAY.DROP", table)
    except redis.ResponseError:
        pass
    ctl.execute_command("REPLAY.CREATE", table, "CAPACITY", max(100_000, 10 * min_size),
                        "MAXBYTES", 256 << 20, "MIN_SIZE", min_size,
                        "SAMPLES_PER_INSERT", rate, "ERROR_BUFFER", error_buffer)
    t0 = time.monotonic()
    t_end = t0 + seconds
    half = t0 + seconds / 2

    # phase 1: inserters offer 10x base items/s, samplers want base x rate samples/s;
    # phase 2: inserters offer base items/s, samplers want 10 x base x rate.
    def insert_rate(now: float) -> float:
        return (10 * base if now < half else base) / 2  # two inserters

    def sample_rate(now: float) -> float:
        return (base * rate if now < half else 10 * base * rate) / 2

    clients = [Client(f"inserter{i}", "inserter") for i in range(2)] + \
              [Client(f"sampler{i}", "sampler") for i in range(2)]
    stop = threading.Event()
    threads = [threading.Thread(
        target=_worker,
        args=(c, host, port, table, insert_batch if c.kind == "inserter" else sample_batch,
              insert_rate if c.kind == "inserter" else sample_rate, stop, t_end),
        daemon=True) for c in clients]
    for t in threads:
        t.start()

    timeline: list[dict[str, Any]] = []
    prev = _info(ctl, table)
    deadlocks = 0
    while True:
        now = time.monotonic()
        if now >= t_end:
            break
        time.sleep(min(window, t_end - now))
        now = time.monotonic()
        cur = _info(ctl, table)
        di = cur["limiter_inserts"] - prev["limiter_inserts"]
        ds = cur["limiter_samples"] - prev["limiter_samples"]
        warm = prev["size"] >= min_size
        if warm and di == 0 and ds == 0:
            deadlocks += 1
        timeline.append({
            "t": round(now - t0, 3),
            "phase": "inserters 10x" if now <= half else "samplers 10x",
            "inserts": int(cur["limiter_inserts"]), "samples": int(cur["limiter_samples"]),
            "error": cur["limiter_error"], "size": int(cur["size"]),
            "window_samples_per_insert": round(ds / di, 4) if warm and di else None,
            "blocked_inserters": int(cur["blocked_inserters"]),
            "blocked_samplers": int(cur["blocked_samplers"]),
            "waited_seconds": cur["waited_seconds"],
        })
        prev = cur
    stop.set()
    for t in threads:
        t.join(timeout=10)
    final = _info(ctl, table)
    ctl.execute_command("REPLAY.DROP", table)
    ctl.close()

    ratios = [w["window_samples_per_insert"] for w in timeline
              if w["window_samples_per_insert"] is not None]
    counted_inserts = final["limiter_inserts"] - min_size
    measured = final["limiter_samples"] / counted_inserts if counted_inserts > 0 else None
    max_dev = max((abs(x - rate) / rate for x in ratios), default=None)
    starved = [c.name for c in clients if c.longest_gap_s > starve_seconds or c.calls == 0]
    return {
        "config": {"seconds": seconds, "samples_per_insert": rate, "min_size": min_size,
                   "error_buffer": error_buffer, "base_inserts_per_s": base,
                   "insert_batch": insert_batch, "sample_batch": sample_batch,
                   "window_s": window, "starve_seconds": starve_seconds,
                   "imbalance": "inserters offer 10x what the samplers license for the first "
                                "half, samplers want 10x what the inserters offer after"},
        "timeline": timeline,
        "measured_samples_per_insert": measured,
        "max_window_deviation": max_dev,
        "within_10_percent": max_dev is not None and max_dev <= 0.10,
        "final_error": final["limiter_error"],
        "waited_seconds": final["waited_seconds"],
        "timeouts": sum(c.timeouts for c in clients),
        "deadlocked_windows": deadlocks,
        "starved": starved,
        "errors": [e for c in clients for e in c.errors],
        "clients": [{"name": c.name, "kind": c.kind, "calls": c.calls, "items": c.items,
                     "timeouts": c.timeouts, "max_latency_s": round(c.max_latency_s, 4),
                     "longest_gap_s": round(c.longest_gap_s, 4)} for c in clients],
    }


def _start_server() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pyctl", "start", "--listen",
                             f"127.0.0.1:{port}"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            _connect("127.0.0.1", port).ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("inreplay did not start within 30 s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--json", metavar="FILE", help="write the report here")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, help="a running inreplay (default: start one)")
    ap.add_argument("--rate", type=float, default=4.0, help="SAMPLES_PER_INSERT (default 4)")
    ap.add_argument("--min-size", type=int, default=1000)
    ap.add_argument("--error-buffer", type=float, default=100.0)
    ap.add_argument("--base", type=float, default=200.0,
                    help="items/s the slow side inserts or licenses (default 200)")
    ap.add_argument("--window", type=float, default=10.0, help="seconds per measurement")
    ap.add_argument("--starve-seconds", type=float, default=5.0)
    a = ap.parse_args(argv)
    proc = None
    port = a.port
    if port is None:
        proc, port = _start_server()
    try:
        doc = run(a.host, port, a.seconds, rate=a.rate, min_size=a.min_size,
                  error_buffer=a.error_buffer, base=a.base, window=a.window,
                  starve_seconds=a.starve_seconds)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=15)
    text = json.dumps(doc, indent=1)
    if a.json:
        Path(a.json).write_text(text + "\n")
    print(f"samples per insert {doc['measured_samples_per_insert']} (configured {a.rate}); "
          f"max window deviation {doc['max_window_deviation']}; waited "
          f"{doc['waited_seconds']:.1f} s; timeouts {doc['timeouts']}; deadlocked windows "
          f"{doc['deadlocked_windows']}; starved {doc['starved'] or 'none'}")
    ok = doc["within_10_percent"] and not doc["starved"] and not doc["deadlocked_windows"] \
        and not doc["errors"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
