#!/usr/bin/env python3
"""Parameter tables at 13 MB (3.4M float32, the seed's dueling network): the
server's optimizer step against its memory floor, and pushes/s from N worker
processes against the parameter server users would build instead. One run,
the same machine and cores for every figure.

- step: the server time of PARAM.PUSH (INFO commandstats' usec_per_call: the
  finite check and the step, not the transfer) on an Adam and an RMSprop table,
  against bench/paramfloor.c's floor, run in between: one loop streaming exactly
  the arrays the step touches (Adam: gradient, parameters, two moments read,
  three written; RMSprop: gradient, parameters, square average read, two
  written). paramfloor's in-process step (param.c alone) is reported beside it.
  Goal: step <= 1.5x floor.
- pushes/s: N processes each pushing a 13 MB gradient in a loop for --seconds,
  to inreplay's PARAM.PUSH (Adam; ParamClient over the same-host shared-memory
  transport, and over TCP beside it) and to a Ray actor holding the
  same flat float32 tensor and applying torch.optim.Adam to it (the gradient
  goes through Ray's object store, as a user's ray.remote call sends it).
  Goal: inreplay >= 2x the Ray actor.

    python3 bench/params.py [--workers N] [--seconds S] [--json OUT]

bench/report.py --params OUT prints the section with PASS / NOT MET.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import redis  # noqa: E402

from pyctl.proc import free_port  # noqa: E402

N = 3_400_000  # float32: 13.6 MB
GOAL_FLOOR_RATIO = 1.5
GOAL_PUSH_RATIO = 2.0


def start_server(work: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), INREPLAY_RUN_DIR=str(work))
    argv = [sys.executable, "-m", "pyctl", "start", "--listen", f"127.0.0.1:{port}"]
    with open(work / "server.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        try:
            redis.Redis(port=port).ping()
            return proc, port
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start; see {work}/server.log") from None
            time.sleep(0.2)


def server_step_ms(r: redis.Redis, name: str, opt: str, grad: bytes, pushes: int) -> float:
    """Mean server time of one PARAM.PUSH (commandstats), over `pushes` after 3 warm-ups."""
    r.execute_command("PARAM.CREATE", name, "SIZE", N, "OPTIMIZER", opt)
    for _ in range(3):
        r.execute_command("PARAM.PUSH", name, grad)
    r.config_resetstat()
    for _ in range(pushes):
        r.execute_command("PARAM.PUSH", name, grad)
    stats = r.info("commandstats")
    row = next(v for k, v in stats.items() if k.lower().replace("|", ".") in
               ("cmdstat_param.push",))
    r.execute_command("PARAM.DROP", name)
    return float(row["usec_per_call"]) / 1000


def floor(path: Path, reps: int) -> dict[str, Any]:
    out = subprocess.run([str(path), "--n", str(N), "--reps", str(reps)], capture_output=True,
                         text=True, check=True).stdout
    return dict(json.loads(out))


# ---- pushes/s ------------------------------------------------------------------------


def _inreplay_worker(port: int, shm: bool, seconds: float, start: Any, out: Any) -> None:
    from pyctl.params import ParamClient

    pc = ParamClient(port=port, shm=shm)
    g = (np.random.default_rng(os.getpid()).standard_normal(N) * 1e-3).astype("<f4")
    start.wait()
    n, t_end = 0, time.monotonic() + seconds
    while time.monotonic() < t_end:
        pc.push("net", g)
        n += 1
    pc.close()
    out.put(n)


def inreplay_pushes(port: int, shm: bool, workers: int, seconds: float) -> dict[str, Any]:
    r = redis.Redis(port=port)
    r.execute_command("PARAM.CREATE", "net", "SIZE", N, "OPTIMIZER", "adam")
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=_inreplay_worker, args=(port, shm, seconds, start, out))
             for _ in range(workers)]
    for p in procs:
        p.start()
    start.wait()
    t0 = time.monotonic()
    counts = [out.get(timeout=seconds + 120) for _ in procs]
    wall = time.monotonic() - t0
    for p in procs:
        p.join()
    version = int(r.execute_command("PARAM.PULL", "net", "IFNEWER", 2**62)[0])
    r.execute_command("PARAM.DROP", "net")
    assert version == sum(counts), (version, counts)
    return {"pushes": sum(counts), "seconds": wall, "pushes_per_s": sum(counts) / wall}


def ray_pushes(workers: int, seconds: float) -> dict[str, Any]:
    import ray
    import torch

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
             configure_logging=False)

    @ray.remote
    class ParameterServer:
        """What a user builds: the flat parameters and torch.optim.Adam over them."""

        def __init__(self, n: int) -> None:
            self.w = torch.nn.Parameter(torch.zeros(n))
            self.opt = torch.optim.Adam([self.w], lr=1e-3)
            self.version = 0
            self.step_s = 0.0

        def push(self, grad: np.ndarray) -> int:
            t0 = time.perf_counter()
            self.w.grad = torch.from_numpy(grad)
            self.opt.step()
            self.step_s += time.perf_counter() - t0
            self.version += 1
            return self.version

        def stats(self) -> tuple[int, float]:
            return self.version, self.step_s

    @ray.remote
    class Worker:
        def __init__(self, ps: Any) -> None:
            self.ps = ps
            self.g = (np.random.default_rng(os.getpid()).standard_normal(N) * 1e-3).astype(
                np.float32)

        def ready(self) -> bool:
            return True

        def run(self, seconds: float) -> int:
            n, t_end = 0, time.monotonic() + seconds
            while time.monotonic() < t_end:
                ray.get(self.ps.push.remote(self.g))
                n += 1
            return n

    try:
        ps = ParameterServer.remote(N)
        ws = [Worker.remote(ps) for _ in range(workers)]
        ray.get([w.ready.remote() for w in ws])
        ray.get(ps.push.remote(np.zeros(N, np.float32)))  # warm: the optimizer's state
        t0 = time.monotonic()
        counts = ray.get([w.run.remote(seconds) for w in ws])
        wall = time.monotonic() - t0
        version, step_s = ray.get(ps.stats.remote())
    finally:
        ray.shutdown()
    return {"pushes": sum(counts), "seconds": wall, "pushes_per_s": sum(counts) / wall,
            "torch_step_ms": 1000 * step_s / max(1, version)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=4, help="pushing processes (default 4)")
    ap.add_argument("--seconds", type=float, default=10.0, help="per system (default 10)")
    ap.add_argument("--pushes", type=int, default=20,
                    help="timed pushes per optimizer for the server step (default 20)")
    ap.add_argument("--paramfloor", type=Path, default=ROOT / "build" / "bench" / "paramfloor")
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args(argv)
    if not a.paramfloor.is_file():
        ap.error(f"no {a.paramfloor}: make build")
    work = Path(tempfile.mkdtemp(prefix="irparams-"))
    proc, port = start_server(work)
    try:
        r = redis.Redis(port=port)
        grad = (np.random.default_rng(1).standard_normal(N) * 1e-3).astype("<f4").tobytes()
        step = {"adam_server_ms": server_step_ms(r, "a", "adam", grad, a.pushes)}
        fl = floor(a.paramfloor, 21)
        step["rmsprop_server_ms"] = server_step_ms(r, "s", "rmsprop", grad, a.pushes)
        # the workers are on the server's machine, as Ray's are on its object store's:
        # the same-host transport (shared-memory rings), and TCP beside it
        pushes = {"inreplay": inreplay_pushes(port, True, a.workers, a.seconds),
                  "inreplay_tcp": inreplay_pushes(port, False, a.workers, a.seconds)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    pushes["ray_torch"] = ray_pushes(a.workers, a.seconds)
    doc = {"n": N, "bytes": N * 4, "workers": a.workers, "seconds": a.seconds,
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "loadavg": os.getloadavg()},
           "step": step, "floor": fl, "pushes": pushes}
    doc["adam_ratio"] = step["adam_server_ms"] / fl["adam_floor_ms"]
    doc["rmsprop_ratio"] = step["rmsprop_server_ms"] / fl["rmsprop_floor_ms"]
    doc["push_ratio"] = (pushes["inreplay"]["pushes_per_s"]
                         / max(1e-9, pushes["ray_torch"]["pushes_per_s"]))
    doc["goals"] = {"adam_step": doc["adam_ratio"] <= GOAL_FLOOR_RATIO,
                    "rmsprop_step": doc["rmsprop_ratio"] <= GOAL_FLOOR_RATIO,
                    "pushes": doc["push_ratio"] >= GOAL_PUSH_RATIO}
    text = json.dumps(doc, indent=2)
    if a.json:
        a.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
