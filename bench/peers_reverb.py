"""bench/peers.py's driver for Reverb, run by the Python of the peers' virtual environment
(dm-reverb 0.14 + tensorflow-cpu 2.14; never imported by the project). One role per
process; every result is one JSON object on stdout (no pickle).

    server   a reverb.Server with one prioritized table (alpha 0.6, FIFO remover,
             MinSize(1)); prints {"port": P} and serves until SIGTERM
    actors   --conns clients (one thread and one TrajectoryWriter each) inserting
             batches of --batch items (one create_item per step, flush() per batch)
             until --stop-at (wall clock); prints the batches completed inside
             [--start-at, --stop-at]; with --fill N, inserts N items and exits
    learner  a reverb.TrajectoryDataset (max_in_flight_samples_per_worker 1024, as
             Reverb recommends) batched by --sample, and mutate_priorities for every
             sampled key, until --stop-at; prints the batches and each batch's sample
             time inside the window
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import reverb
import tensorflow as tf

TABLE = "peers"


def emit(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def wait_for_window(a: argparse.Namespace) -> None:
    """--start-at -1: say ready (imports done), then read the window from stdin."""
    if a.start_at >= 0:
        return
    emit({"ready": True})
    w = json.loads(sys.stdin.readline())
    a.start_at, a.stop_at = w["start_at"], w["stop_at"]


def server(a: argparse.Namespace) -> None:
    table = reverb.Table(
        name=TABLE, sampler=reverb.selectors.Prioritized(0.6), remover=reverb.selectors.Fifo(),
        max_size=a.capacity, rate_limiter=reverb.rate_limiters.MinSize(1),
        signature={"obs": tf.TensorSpec([a.item_bytes], tf.uint8)})
    srv = reverb.Server(tables=[table], port=a.port or None)
    emit({"port": srv.port, "pid": os.getpid()})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    srv.stop()


def actors(a: argparse.Namespace) -> None:
    rng = np.random.default_rng(a.seed)
    rows = rng.integers(0, 256, (a.batch, a.item_bytes), dtype=np.uint8)
    prios = rng.random(a.batch) + 0.1
    counts = [0] * a.conns
    in_window = [0] * a.conns
    first, last = [0.0], [0.0]
    errors: list[str] = []
    per_conn_fill = -(-a.fill // a.conns) if a.fill else 0

    def run(k: int) -> None:
        try:
            client = reverb.Client(a.address)
            with client.trajectory_writer(num_keep_alive_refs=1) as w:
                while True:
                    now = time.time()
                    if per_conn_fill and counts[k] * a.batch >= per_conn_fill:
                        break
                    if not per_conn_fill and now >= a.stop_at:
                        break
                    for i in range(a.batch):
                        w.append({"obs": rows[i]})
                        w.create_item(TABLE, float(prios[i]), {"obs": w.history["obs"][-1]})
                    w.flush()
                    counts[k] += 1
                    done = time.time()
                    first[0] = first[0] or done
                    last[0] = done
                    if a.start_at <= done <= a.stop_at:
                        in_window[k] += 1
        except Exception as e:  # reported in the JSON, not swallowed
            errors.append(f"{type(e).__name__}: {e}")

    if not a.fill:
        wait_for_window(a)
    threads = [threading.Thread(target=run, args=(k,)) for k in range(a.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    emit({"batches": sum(in_window), "batches_total": sum(counts),
          "items": sum(in_window) * a.batch, "errors": errors,
          "window": [a.start_at, a.stop_at], "first_last": [first[0], last[0]]})


def learner(a: argparse.Namespace) -> None:
    client = reverb.Client(a.address)
    ds = reverb.TrajectoryDataset.from_table_signature(
        server_address=a.address, table=TABLE, max_in_flight_samples_per_worker=1024)
    ds = ds.batch(a.sample, drop_remainder=True)
    it = iter(ds)
    next(it)  # the pipeline built and running before the window
    wait_for_window(a)
    rng = np.random.default_rng(a.seed)
    lat: list[float] = []
    batches = 0
    checked = False
    while True:
        now = time.time()
        if now >= a.stop_at:
            break
        t0 = time.perf_counter()
        s = next(it)
        obs = s.data["obs"].numpy()
        t1 = time.perf_counter()
        if not checked:
            if obs.shape != (a.sample, a.item_bytes):
                raise SystemExit(f"reverb sampled {obs.shape}, expected "
                                 f"{(a.sample, a.item_bytes)}")
            checked = True
        keys = s.info.key.numpy().tolist()
        client.mutate_priorities(TABLE, updates=dict(zip(keys, (rng.random(len(keys)) + 0.1)
                                                         .tolist(), strict=True)))
        done = time.time()
        if a.start_at <= now and done <= a.stop_at:
            batches += 1
            lat.append((t1 - t0) * 1e6)
    emit({"batches": batches, "sample_us": lat})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=("server", "actors", "learner"))
    p.add_argument("--address", default="")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--item-bytes", type=int, default=128)
    p.add_argument("--capacity", type=int, default=100_000)
    p.add_argument("--conns", type=int, default=4)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--sample", type=int, default=512)
    p.add_argument("--fill", type=int, default=0)
    p.add_argument("--start-at", type=float, default=0.0)
    p.add_argument("--stop-at", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    {"server": server, "actors": actors, "learner": learner}[a.role](a)


if __name__ == "__main__":
    main()
