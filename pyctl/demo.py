"""`make demo`: start the appliance, run a scripted ReplayClient session, stop it.

Each step prints what it sends and what came back. This is the foundation
demo; the Ape-X actors and learner replace it once they exist.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import subprocess
import sys
import time

import numpy as np

from pyctl.client import ReplayClient


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def step(msg: str) -> None:
    print(f"\n== {msg}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pyctl.demo", description=__doc__)
    ap.add_argument("--port", type=int, default=0, help="port to use (default: a free one)")
    args = ap.parse_args(argv)
    port = args.port or free_port()
    listen = f"127.0.0.1:{port}"
    env = dict(os.environ)

    step(f"pyctl start --daemon --listen {listen}")
    out = subprocess.run([sys.executable, "-m", "pyctl", "start", "--daemon", "--listen", listen],
                         capture_output=True, text=True, env=env, check=False)
    print(out.stdout.strip() or out.stderr.strip())
    if out.returncode != 0:
        return out.returncode
    try:
        rc = ReplayClient(port=port)
        rng = np.random.default_rng(0)

        step("parameters: SET a 13 MB blob (the seed's Dueling network) and GET it back")
        blob = rng.integers(0, 256, size=13 * 2**20, dtype=np.uint8).tobytes()
        t0 = time.perf_counter()
        rc.redis.set("params", blob)
        rc.redis.incr("params:version")
        back = rc.redis.get("params")
        dt = time.perf_counter() - t0
        same = hashlib.sha256(back or b"").hexdigest() == hashlib.sha256(blob).hexdigest()
        print(f"SET+GET 13 MB in {dt * 1e3:.1f} ms, byte-identical: {same}, "
              f"version {rc.redis.get('params:version').decode()}")

        step("REPLAY.CREATE demo CAPACITY 10000 ALPHA 0.6 BETA 0.4")
        rc.create("demo", capacity=10_000, alpha=0.6, beta=0.4)
        print("tables:", rc.tables())

        step("REPLAY.ADD: 4 batches of 512 transitions (128 B each) with |TD error| priorities")
        for _ in range(4):
            items = rng.integers(0, 256, size=(512, 128), dtype=np.uint8)
            prios = np.abs(rng.normal(size=512))
            ids = rc.add("demo", prios, items)
        print(f"last batch got ids {ids[0]}..{ids[-1]}")
        rc.add("demo", None, [b"new transition at max priority"])

        step("REPLAY.SAMPLE demo 512: ids, importance weights and items in one round trip")
        t0 = time.perf_counter()
        s = rc.sample("demo", 512)
        dt = time.perf_counter() - t0
        print(f"{len(s.ids)} items in {dt * 1e6:.0f} us; weights min {s.weights.min():.3f} "
              f"max {s.weights.max():.3f}; first ids {s.ids[:5].tolist()}")

        step("REPLAY.UPDATE with new priorities for the sampled ids")
        applied = rc.update("demo", s.ids, np.abs(rng.normal(size=len(s.ids))))
        print(f"applied {applied}")

        step("REPLAY.INFO demo")
        for k, v in rc.info("demo").items():
            print(f"  {k:15} {v}")
        rc.close()
    finally:
        step("pyctl stop")
        out = subprocess.run([sys.executable, "-m", "pyctl", "stop", "--listen", listen],
                             capture_output=True, text=True, env=env, check=False)
        print(out.stdout.strip() or out.stderr.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
