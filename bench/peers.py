"""inreplay against the replay systems a user would pick instead, on one machine, one run.

Workload (Ape-X's loop): --actors actor connections insert batches of 50 items as fast as
they are taken (each with its priority), while one learner samples 512 items (prioritized,
alpha 0.6, beta 0.4) and sends 512 new priorities back, again and again. Items of 128 B,
640 B (a compressed Atari transition) and 28,224 B (one 84x84x4 Atari state). Reported
per system and item size: the learner's batches/s with the actors at full load, its sample
latency p50/p99 (the call that returns the items as an array), inserts/s, and the server
process's CPU time per item moved (inserted or sampled), from /proc.

Systems:
    inreplay-kernel       inreplay on the kernel stack; ReplayClient (add; sample into a
                          preallocated array with out=; update)
    inreplay-kernel-poll  the same server with --busy-poll
    inreplay-dpdk         inreplay on DPDK + lwIP (af_packet on the veth; root, DPDK build)
    redis+tree            stock redis-server with the learner-side tree (today's baseline,
                          as bench/latency.py's BASELINE): actors MSET their items into a ring
                          of keys and RPUSH the slots; the learner pops new slots into its own
                          sum tree (pyctl.sumtree), samples it and fetches with one MGET
    reverb                Reverb 0.14 (dm-reverb 0.14.0, tensorflow-cpu 2.14.1), its server in
                          its own process; actors: TrajectoryWriter, one item per step,
                          flush() per batch of 50; learner: reverb.TrajectoryDataset with
                          1024 samples in flight, batched 512, and mutate_priorities. It runs
                          in a virtual environment this script makes (build/peers-venv) and
                          is driven by bench/peers_reverb.py there (JSON on stdout)
    torchrl               TorchRL 0.14: TensorDictPrioritizedReplayBuffer (PrioritizedSampler +
                          LazyTensorStorage) in the learner's process, actors as threads
    torchrl-ray           TorchRL's RayReplayBuffer, its networked form (tried; the error is
                          reported when it does not run)
    cpprb                 cpprb's MPPrioritizedReplayBuffer (shared memory; its Ape-X form),
                          actors as forked processes

Networked systems run their server on --server-core and the actors and learner on
--client-core, over the shared veth (offloads off, --mtu, default 9000; what DPDK's
af_packet needs) that bench/latency.py builds, or loopback with --loopback (no DPDK). The
in-process peers have no network and no server; their CPU column is empty.

Also measured in the same run: memcpy GB/s (a NumPy copy of a 256 MB buffer, best of 5)
and how close each system's 28 KB sample of 512 (14.5 MB) comes to copying those bytes
once; and the client's own path (ReplayClient.add of 50 x 28 KB, sample(out=) of
512 x 28 KB, MB/s) on the kernel stack.

    python bench/peers.py [--quick] [--json FILE] [--systems ...] [--item-bytes 128,640,28224]
                          [--seconds S] [--actors N] [--loopback] [--mtu 9000]

--quick: ~2-3 minutes (short windows, small tables). A system that cannot be set up or
fails is recorded under "errors" with the reason and the run goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import latency as lat  # noqa: E402

from pyctl.proc import descendants, free_port  # noqa: E402

BATCH = 50
SAMPLE = 512
ALPHA, BETA = 0.6, 0.4
ATARI = 84 * 84 * 4
ITEM_SIZES = (128, 640, ATARI)
SYSTEMS = ("inreplay-kernel", "inreplay-kernel-poll", "inreplay-dpdk", "redis+tree", "reverb",
           "torchrl", "torchrl-ray", "cpprb")
INREPLAY = {"inreplay-kernel": "kernel", "inreplay-kernel-poll": "kernel-poll",
            "inreplay-dpdk": "dpdk"}
IN_PROCESS = ("torchrl", "torchrl-ray", "cpprb")
VENV = ROOT / "build" / "peers-venv"
VENV_TORCHRL = ROOT / "build" / "peers-venv-torchrl"
TORCHRL_TORCH = "2.14.1"
REVERB_PINS = ("dm-reverb==0.14.0", "tensorflow-cpu==2.14.1", "numpy<2")
TABLE = "peers"
KEY_PREFIX = b"peers:"
NEW_SLOTS = b"peers:new"
MEMCPY_BYTES = 256 << 20


def log(msg: str) -> None:
    print(f"peers: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# measures shared by every system
# --------------------------------------------------------------------------


def memcpy_gbps(nbytes: int = MEMCPY_BYTES, repeats: int = 5) -> float:
    """This machine's memory-copy rate: NumPy copying a buffer far larger than the caches."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return nbytes / best / 1e9


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of pid and its descendants, from /proc."""
    total = 0.0
    for p in [pid, *descendants(pid)]:
        with contextlib.suppress(OSError, IndexError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def cpu_window(pid: int | None, start_at: float, stop_at: float) -> Callable[[], float | None]:
    """A thread that reads pid's CPU at start_at and stop_at; call the result to get the
    difference (None without a pid)."""
    got: list[float] = []

    def run() -> None:
        for at in (start_at, stop_at):
            time.sleep(max(0.0, at - time.time()))
            got.append(tree_cpu(pid) if pid else 0.0)

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def result() -> float | None:
        t.join(timeout=max(0.0, stop_at - time.time()) + 5)
        return got[1] - got[0] if pid and len(got) == 2 else None

    return result


def percentiles(us: list[float]) -> tuple[float | None, float | None]:
    if not us:
        return None, None
    p50, p99 = np.percentile(np.asarray(us), [50, 99])
    return float(p50), float(p99)


def items_of(item_bytes: int, seed: int, n: int = BATCH) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, item_bytes), dtype=np.uint8)


# --------------------------------------------------------------------------
# roles run in child processes (actors, in-process peers)
# --------------------------------------------------------------------------


def _pin(core: int | None) -> None:
    if core is not None and core >= 0:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {core})


def wait_for_window(a: argparse.Namespace) -> None:
    """--start-at -1: say ready (imports and set-up done), then read the measured window
    from stdin (Children.go), so a slow start on a loaded machine never eats into it."""
    if a.start_at >= 0:
        return
    print(json.dumps({"ready": True}), flush=True)
    w = json.loads(sys.stdin.readline())
    a.start_at, a.stop_at = w["start_at"], w["stop_at"]


def role_actors(a: argparse.Namespace) -> dict[str, Any]:
    """--conns threads, one connection each, inserting batches of 50 (inreplay or redis)."""
    import redis

    from pyctl.client import ReplayClient

    rows = items_of(a.item_bytes, a.seed)
    prios = np.random.default_rng(a.seed + 1).random(BATCH) + 0.1
    counts = [0] * a.conns
    window = [0] * a.conns
    errors: list[str] = []
    per_conn = -(-a.fill // a.conns) if a.fill else 0

    def run(k: int) -> None:
        try:
            if a.system == "redis":
                r = redis.Redis(host=a.host, port=a.port, protocol=2)
                g = a.conn_base + k
                region = a.capacity // a.conn_total
                base = g * region
                i = 0
                while True:
                    if (per_conn and counts[k] * BATCH >= per_conn) or \
                            (not per_conn and time.time() >= a.stop_at):
                        break
                    slots = base + (np.arange(i, i + BATCH) % region)
                    i += BATCH
                    p = r.pipeline(transaction=False)
                    p.mset({KEY_PREFIX + b"%d" % s: memoryview(rows[j])
                            for j, s in enumerate(slots.tolist())})
                    p.rpush(NEW_SLOTS, slots.astype("<i8").tobytes())
                    p.execute()
                    _count(k)
            else:
                rc = ReplayClient(a.host, a.port)
                while True:
                    if (per_conn and counts[k] * BATCH >= per_conn) or \
                            (not per_conn and time.time() >= a.stop_at):
                        break
                    rc.add(TABLE, prios, rows)
                    _count(k)
        except Exception as e:  # reported in the JSON
            errors.append(f"{type(e).__name__}: {e}")

    def _count(k: int) -> None:
        counts[k] += 1
        if a.start_at <= time.time() <= a.stop_at:
            window[k] += 1

    if not a.fill:
        wait_for_window(a)
    threads = [threading.Thread(target=run, args=(k,)) for k in range(a.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"batches": sum(window), "items": sum(window) * BATCH,
            "batches_total": sum(counts), "errors": errors}


def _open_window(a: argparse.Namespace) -> None:
    """The measured window of an in-process peer starts once its buffer is filled."""
    a.start_at = time.time() + 0.5
    a.stop_at = a.start_at + a.window


def role_inproc(a: argparse.Namespace) -> dict[str, Any]:
    """An in-process peer: its buffer, --conns actors and the learner in this process
    (cpprb's actors in forked processes on its shared-memory buffer)."""
    if a.system == "cpprb":
        return _cpprb(a)
    if a.system == "torchrl":
        return _torchrl(a)
    if a.system == "torchrl-ray":
        return _torchrl_ray(a)
    raise SystemExit(f"unknown in-process system {a.system}")


def _learner_loop(a: argparse.Namespace, sample: Callable[[], Any],
                  update: Callable[[Any], None]) -> dict[str, Any]:
    lat_us: list[float] = []
    batches = 0
    while True:
        now = time.time()
        if now >= a.stop_at:
            break
        t0 = time.perf_counter()
        s = sample()
        t1 = time.perf_counter()
        update(s)
        if now >= a.start_at and time.time() <= a.stop_at:
            batches += 1
            lat_us.append((t1 - t0) * 1e6)
    return {"batches": batches, "sample_us": lat_us}


def _cpprb(a: argparse.Namespace) -> dict[str, Any]:
    import multiprocessing as mp

    from cpprb import MPPrioritizedReplayBuffer

    ctx = mp.get_context("fork")
    rb = MPPrioritizedReplayBuffer(a.capacity, {"obs": {"shape": a.item_bytes,
                                                        "dtype": np.uint8}},
                                   alpha=ALPHA, ctx=ctx)
    rows = items_of(a.item_bytes, a.seed)
    prios = np.random.default_rng(a.seed).random(BATCH) + 0.1
    for _ in range(-(-a.fill // BATCH)):
        rb.add(obs=rows, priorities=prios)
    _open_window(a)
    q = ctx.Queue()

    def actor(k: int) -> None:
        n = w = 0
        while time.time() < a.stop_at:
            rb.add(obs=rows, priorities=prios)
            n += 1
            if a.start_at <= time.time() <= a.stop_at:
                w += 1
        q.put(w)

    procs = [ctx.Process(target=actor, args=(k,), daemon=True) for k in range(a.conns)]
    for p in procs:
        p.start()
    rng = np.random.default_rng(a.seed)

    def sample() -> Any:
        return rb.sample(SAMPLE, beta=BETA)

    def update(s: Any) -> None:
        rb.update_priorities(s["indexes"], rng.random(SAMPLE) + 0.1)

    out = _learner_loop(a, sample, update)
    out["batches_inserted"] = sum(q.get(timeout=30) for _ in procs)
    for p in procs:
        p.join(timeout=10)
    out["items"] = out["batches_inserted"] * BATCH
    return out


def _torchrl_buffer(a: argparse.Namespace) -> Any:
    from torchrl.data import LazyTensorStorage, TensorDictPrioritizedReplayBuffer

    return TensorDictPrioritizedReplayBuffer(
        alpha=ALPHA, beta=BETA, storage=LazyTensorStorage(a.capacity), batch_size=SAMPLE,
        priority_key="td_error")


def _torchrl_batch(a: argparse.Namespace) -> Any:
    import torch
    from tensordict import TensorDict

    rows = torch.from_numpy(items_of(a.item_bytes, a.seed))
    prios = torch.from_numpy(np.random.default_rng(a.seed).random(BATCH) + 0.1).float()
    return TensorDict({"obs": rows, "td_error": prios}, batch_size=[BATCH])


def _torchrl(a: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    rb = _torchrl_buffer(a)
    batch = _torchrl_batch(a)
    for _ in range(-(-a.fill // BATCH)):
        rb.extend(batch.clone())
    _open_window(a)
    window = [0] * a.conns

    def actor(k: int) -> None:
        while time.time() < a.stop_at:
            rb.extend(batch.clone())
            if a.start_at <= time.time() <= a.stop_at:
                window[k] += 1

    threads = [threading.Thread(target=actor, args=(k,), daemon=True) for k in range(a.conns)]
    for t in threads:
        t.start()
    gen = torch.Generator().manual_seed(a.seed)

    def update(s: Any) -> None:
        s.set("td_error", torch.rand(SAMPLE, generator=gen) + 0.1)
        rb.update_tensordict_priority(s)

    out = _learner_loop(a, rb.sample, update)
    for t in threads:
        t.join(timeout=30)
    out["items"] = sum(window) * BATCH
    return out


def _torchrl_ray(a: argparse.Namespace) -> dict[str, Any]:
    from functools import partial

    import torch
    from torchrl.data import LazyTensorStorage, PrioritizedSampler, RayReplayBuffer

    rb = RayReplayBuffer(storage=partial(LazyTensorStorage, a.capacity),
                         sampler=partial(PrioritizedSampler, max_capacity=a.capacity,
                                         alpha=ALPHA, beta=BETA),
                         batch_size=SAMPLE,
                         ray_init_config={"num_cpus": 2, "include_dashboard": False})
    batch = _torchrl_batch(a)
    for _ in range(-(-a.fill // BATCH)):
        rb.extend(batch)
    _open_window(a)
    window = [0] * a.conns

    def actor(k: int) -> None:
        while time.time() < a.stop_at:
            idx = rb.extend(batch)
            rb.update_priority(idx, batch["td_error"])
            if a.start_at <= time.time() <= a.stop_at:
                window[k] += 1

    threads = [threading.Thread(target=actor, args=(k,), daemon=True) for k in range(a.conns)]
    for t in threads:
        t.start()

    def sample() -> Any:
        return rb.sample(SAMPLE, return_info=True)

    def update(s: Any) -> None:
        _, info = s
        rb.update_priority(info["index"], torch.rand(SAMPLE) + 0.1)

    try:
        out = _learner_loop(a, sample, update)
        for t in threads:
            t.join(timeout=30)
    finally:
        import ray

        rb.shutdown()
        ray.shutdown()
    out["items"] = sum(window) * BATCH
    return out


# --------------------------------------------------------------------------
# the learner of the networked systems (this process)
# --------------------------------------------------------------------------


PREFETCH = 2  # inreplay's learner: samples in flight, as learner/replay.py's Prefetcher


def learner_inreplay(host: str, port: int, item_bytes: int, start_at: float,
                     stop_at: float, seed: int, prefetch: int = PREFETCH) -> dict[str, Any]:
    """The learner as the Ape-X learner runs it: a sampling thread on its own connection
    keeps ``prefetch`` samples in flight (into preallocated arrays, a ring of
    prefetch + 2) while the main thread updates priorities on another, so the
    learner waits only for what the round trips cannot hide. Reverb's
    TrajectoryDataset prefetches the same way (1024 samples in flight); the latency
    reported is what the learner waits for a batch, as for Reverb, and the sampling
    thread's round trips are kept beside it (sample_rtt_us). prefetch=0: one
    connection, sample then update, nothing in flight."""
    import queue

    from pyctl.client import ReplayClient

    rc = ReplayClient(host, port)
    rng = np.random.default_rng(seed)
    if prefetch <= 0:
        out = np.empty((SAMPLE, item_bytes), dtype=np.uint8)

        def sample() -> Any:
            return rc.sample(TABLE, SAMPLE, item_shape=(item_bytes,), out=out)

        def update(s: Any) -> None:
            rc.update(TABLE, s.ids, rng.random(SAMPLE) + 0.1)

        try:
            return _learner_loop(argparse.Namespace(start_at=start_at, stop_at=stop_at),
                                 sample, update)
        finally:
            rc.close()

    bufs: queue.Queue[np.ndarray] = queue.Queue()
    for _ in range(prefetch + 2):
        bufs.put(np.empty((SAMPLE, item_bytes), dtype=np.uint8))
    ready: queue.Queue[Any] = queue.Queue(maxsize=prefetch)
    rtt_us: list[float] = []
    stop = threading.Event()

    def sampler() -> None:
        src = ReplayClient(host, port)
        try:
            while not stop.is_set():
                buf = bufs.get()
                t0 = time.perf_counter()
                s = src.sample(TABLE, SAMPLE, item_shape=(item_bytes,), out=buf)
                if start_at <= time.time() <= stop_at:
                    rtt_us.append((time.perf_counter() - t0) * 1e6)
                ready.put((s, buf))
        except Exception as e:  # surfaced by the main thread
            ready.put(e)
        finally:
            src.close()

    th = threading.Thread(target=sampler, name="peers-prefetch", daemon=True)
    th.start()
    held: list[np.ndarray] = []

    def take() -> Any:
        got = ready.get()
        if isinstance(got, Exception):
            raise got
        s, buf = got
        held.append(buf)
        return s

    def give_back(s: Any) -> None:
        rc.update(TABLE, s.ids, rng.random(SAMPLE) + 0.1)
        bufs.put(held.pop(0))

    try:
        res = _learner_loop(argparse.Namespace(start_at=start_at, stop_at=stop_at),
                            take, give_back)
        res.update(sample_rtt_us=rtt_us, prefetch=prefetch)
        return res
    finally:
        stop.set()
        while th.is_alive():  # unblock the sampler wherever it waits
            with contextlib.suppress(queue.Empty):
                ready.get_nowait()
            bufs.put(np.empty((1, 1), dtype=np.uint8))
            th.join(0.05)
        rc.close()


def learner_redis(host: str, port: int, item_bytes: int, capacity: int, start_at: float,
                  stop_at: float, seed: int) -> dict[str, Any]:
    import redis

    from pyctl.sumtree import PrioritizedSampler

    r = redis.Redis(host=host, port=port, protocol=2)
    tree = PrioritizedSampler(capacity, alpha=ALPHA, seed=seed)
    keys = [KEY_PREFIX + b"%d" % s for s in range(capacity)]
    rng = np.random.default_rng(seed)

    def drain() -> None:
        while True:
            got = r.lpop(NEW_SLOTS, 4096)
            if not got:
                return
            slots = np.frombuffer(b"".join(got), dtype="<i8")
            tree.update(slots, np.full(slots.size, max(tree.max, 1.0)))
            if len(got) < 4096:
                return

    drain()

    def sample() -> Any:
        drain()  # new items enter the learner's tree before it draws
        slots, w = tree.sample(SAMPLE, BETA)
        vals = r.mget([keys[s] for s in slots.tolist()])
        items = np.frombuffer(b"".join(vals), dtype=np.uint8).reshape(SAMPLE, item_bytes)
        return slots, w, items

    def update(s: Any) -> None:
        tree.update(s[0], rng.random(SAMPLE) + 0.1)

    try:
        return _learner_loop(argparse.Namespace(start_at=start_at, stop_at=stop_at),
                             sample, update)
    finally:
        tree.close()
        r.close()


# --------------------------------------------------------------------------
# running one system at one item size
# --------------------------------------------------------------------------


@dataclass
class Settings:
    systems: list[str]
    item_sizes: list[int]
    seconds: float
    actors: int
    actor_procs: int
    capacity: dict[int, int]
    loopback: bool
    mtu: int
    server_core: int
    client_core: int
    quick: bool
    seed: int = 1


class Children:
    """Child processes started for one cell; all are ended on the way out."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.errs: dict[int, Any] = {}

    def start(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        # stderr goes to a file, never a pipe read only at the end: a child that logs a lot
        # (Reverb's TrajectoryWriter warns on every flush) would fill the pipe's 64 KB and
        # block in write(), and the benchmark would measure that stall, not the system
        err = tempfile.TemporaryFile("w+")
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=err, text=True,
                             env=env, cwd=ROOT, start_new_session=True,
                             preexec_fn=lat._die_with_parent)
        self.procs.append(p)
        self.errs[p.pid] = err
        return p

    def stderr_tail(self, p: subprocess.Popen[str], default: str = "") -> str:
        """The last line the child wrote to stderr."""
        f = self.errs[p.pid]
        f.seek(0)
        return (f.read().strip().splitlines() or [default])[-1]

    def go(self, procs: list[subprocess.Popen[str]], seconds: float,
           timeout: float = 300.0) -> tuple[float, float]:
        """Wait until every one of procs says it is ready, then give them all one window
        (start, stop) starting now; returns it."""
        deadline = time.monotonic() + timeout
        for p in procs:
            got: list[str] = []
            assert p.stdout is not None
            t = threading.Thread(target=lambda p=p, got=got: got.append(p.stdout.readline()),
                                 daemon=True)
            t.start()
            t.join(max(0.0, deadline - time.monotonic()))
            if not got or not got[0].startswith('{"ready"'):
                err = self.stderr_tail(p) if p.poll() is not None else ""
                raise lat.BenchError(f"a child was not ready within {timeout:.0f} s "
                                     f"(exit {p.poll()}): {err or (got[0][:200] if got else '')}")
        start_at = time.time() + 0.3
        stop_at = start_at + seconds
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(json.dumps({"start_at": start_at, "stop_at": stop_at}) + "\n")
            p.stdin.flush()
        return start_at, stop_at

    def result(self, p: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise lat.BenchError(f"{p.args[1] if isinstance(p.args, list) else p.args} "
                                 f"timed out after {timeout:.0f} s") from None
        lines = [x for x in out.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not lines:
            tail = self.stderr_tail(p, "no output")
            raise lat.BenchError(f"a child exited {p.returncode}: {tail}")
        return json.loads(lines[-1])

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, 15)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, 9)
                    p.wait()
        for f in self.errs.values():
            f.close()


def _taskset(core: int | None) -> list[str]:
    return ["taskset", "-c", str(core)] if core is not None else []


def actor_argv(s: Settings, system: str, host: str, port: int, item_bytes: int,
               conns: int, base: int, total: int, start_at: float, stop_at: float,
               fill: int, pin: lat.Pinning) -> list[str]:
    return [sys.executable, str(Path(__file__)), "--role", "actors", "--system", system,
            "--host", host, "--port", str(port), "--item-bytes", str(item_bytes),
            "--conns", str(conns), "--conn-base", str(base), "--conn-total", str(total),
            "--capacity", str(s.capacity[item_bytes]), "--start-at", repr(start_at),
            "--stop-at", repr(stop_at), "--fill", str(fill),
            "--core", str(pin.client if pin.client is not None else -1)]


def run_actors_and_learner(s: Settings, system: str, host: str, port: int, item_bytes: int,
                           server_pid: int | None, pin: lat.Pinning,
                           learner: Callable[[float, float], dict[str, Any]]
                           ) -> dict[str, Any]:
    """Fill the table, then actors at full load and the learner in one window."""
    kind = "redis" if system == "redis+tree" else "inreplay"
    cap = s.capacity[item_bytes]
    ch = Children()
    try:
        per = [s.actors // s.actor_procs + (1 if i < s.actors % s.actor_procs else 0)
               for i in range(s.actor_procs)]
        per = [c for c in per if c]
        # fill: the whole table once, through the actors' own path
        fills = [ch.start(actor_argv(s, kind, host, port, item_bytes, c, sum(per[:i]),
                                     s.actors, 0, 0, cap // len(per), pin))
                 for i, c in enumerate(per)]
        for p in fills:
            ch.result(p, 300)
        procs = [ch.start(actor_argv(s, kind, host, port, item_bytes, c, sum(per[:i]),
                                     s.actors, -1, 0, 0, pin))
                 for i, c in enumerate(per)]
        start_at, stop_at = ch.go(procs, s.seconds)
        cpu = cpu_window(server_pid, start_at, stop_at)
        res = learner(start_at, stop_at)
        acts = [ch.result(p, s.seconds + 60) for p in procs]
        errs = [e for x in acts for e in x["errors"]]
        if errs:
            raise lat.BenchError(f"an actor failed: {errs[0]}")
        return {**res, "items": sum(x["items"] for x in acts), "server_cpu_s": cpu()}
    finally:
        ch.close()


def venv_python() -> Path:
    """The peers' virtual environment's Python, made (and Reverb installed) if missing."""
    py = VENV / "bin" / "python"
    ok = py.exists() and subprocess.run(
        [str(py), "-c", "import reverb, tensorflow"], capture_output=True, check=False,
        timeout=120).returncode == 0
    if not ok:
        log(f"making {VENV} with {' '.join(REVERB_PINS)} (a peer, not a project dependency)")
        base = os.environ.get("PEERS_PYTHON", "python3.11")
        for cmd in ([base, "-m", "venv", str(VENV)],
                    [str(py), "-m", "pip", "install", "-q", *REVERB_PINS]):
            r = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
            if r.returncode != 0:
                raise lat.BenchError(f"{' '.join(cmd[:4])} failed: "
                                     f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return py


def run_reverb(s: Settings, net: lat.Network, pin: lat.Pinning, item_bytes: int
               ) -> dict[str, Any]:
    py = str(venv_python())
    driver = str(ROOT / "bench" / "peers_reverb.py")
    in_ns = ["ip", "netns", "exec", net.topo.netns] if net.topo else []
    cap = s.capacity[item_bytes]
    port = free_port()
    ch = Children()
    try:
        srv = ch.start([*in_ns, *_taskset(pin.server), py, driver, "server", "--port",
                        str(port), "--item-bytes", str(item_bytes), "--capacity", str(cap)])
        assert srv.stdout is not None
        ready: list[str] = []
        t = threading.Thread(target=lambda: ready.append(srv.stdout.readline()), daemon=True)
        t.start()
        t.join(120)
        if not ready or not ready[0].startswith("{"):
            raise lat.StartError("the Reverb server did not start within 120 s")
        info = json.loads(ready[0])
        addr = f"{net.kernel_host}:{info['port']}"
        client = [*_taskset(pin.client), py, driver]
        per = max(1, s.actors // s.actor_procs)
        procs_n = max(1, s.actors // per)
        fills = [ch.start([*client, "actors", "--address", addr, "--item-bytes",
                           str(item_bytes), "--conns", str(per), "--fill",
                           str(cap // procs_n), "--seed", str(i)]) for i in range(procs_n)]
        for p in fills:
            ch.result(p, 600)
        window = ["--start-at", "-1"]  # TensorFlow takes seconds to import: wait for ready
        acts = [ch.start([*client, "actors", "--address", addr, "--item-bytes",
                          str(item_bytes), "--conns", str(per), "--seed", str(i), *window])
                for i in range(procs_n)]
        learner = ch.start([*client, "learner", "--address", addr, "--item-bytes",
                            str(item_bytes), "--sample", str(SAMPLE), *window])
        start_at, stop_at = ch.go([*acts, learner], s.seconds)
        cpu = cpu_window(srv.pid, start_at, stop_at)
        res = ch.result(learner, s.seconds + 120)
        a = [ch.result(p, s.seconds + 120) for p in acts]
        errs = [e for x in a for e in x["errors"]]
        if errs:
            raise lat.BenchError(f"a Reverb actor failed: {errs[0]}")
        return {**res, "items": sum(x["items"] for x in a), "server_cpu_s": cpu()}
    finally:
        ch.close()


def find_torchrl_python() -> str | None:
    """A Python here whose TorchRL loads its C++ extension (PrioritizedSampler needs it):
    this one, or build/peers-venv-torchrl's; None when neither does.

    TorchRL 0.14.1's _torchrl.so is built against torch 2.14 and does not load with the
    project's torch 2.13.0 (undefined symbol torch::autograd::_wrap_outputs), so TorchRL
    runs in build/peers-venv-torchrl: the system site-packages (torchrl, tensordict, this
    project's modules) with torch 2.14.1 in front of them."""
    probe = ["-c", "from torchrl._torchrl import SumSegmentTreeFp32"]
    for py in (sys.executable, str(VENV_TORCHRL / "bin" / "python")):
        if Path(py).exists() and subprocess.run([py, *probe], capture_output=True,
                                                check=False, timeout=300).returncode == 0:
            return py
    return None


def torchrl_python() -> str:
    """find_torchrl_python(), making build/peers-venv-torchrl (a 700 MB download) when
    there is none."""
    found = find_torchrl_python()
    if found is not None:
        return found
    py = VENV_TORCHRL / "bin" / "python"
    log(f"making {VENV_TORCHRL} (torch {TORCHRL_TORCH} for TorchRL's extension)")
    for cmd in ([sys.executable, "-m", "venv", "--system-site-packages", str(VENV_TORCHRL)],
                [str(py), "-m", "pip", "install", "-q", f"torch=={TORCHRL_TORCH}"]):
        r = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=3600)
        if r.returncode != 0:
            raise lat.BenchError(f"{' '.join(cmd[:4])} failed: "
                                 f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return str(py)


def run_inproc(s: Settings, system: str, item_bytes: int) -> dict[str, Any]:
    py = torchrl_python() if system.startswith("torchrl") else sys.executable
    cap = s.capacity[item_bytes]
    argv = [py, str(Path(__file__)), "--role", "inproc", "--system", system,
            "--item-bytes", str(item_bytes), "--conns", str(s.actors), "--capacity", str(cap),
            "--fill", str(cap), "--window", repr(s.seconds)]
    every_cpu = ",".join(map(str, sorted(os.sched_getaffinity(0) | set(range(os.cpu_count()
                                                                                or 1)))))
    ch = Children()
    try:  # no server: the peer's actors and learner get every core
        return ch.result(ch.start(["taskset", "-c", every_cpu, *argv]), s.seconds + 300)
    finally:
        ch.close()


def row(system: str, item_bytes: int, res: dict[str, Any], seconds: float, path: str,
        memcpy: float) -> dict[str, Any]:
    p50, p99 = percentiles(res.get("sample_us", []))
    items = res["items"]
    moved = items + res["batches"] * SAMPLE
    cpu = res.get("server_cpu_s")
    out = {"system": system, "workload": "apex", "item_bytes": item_bytes,
           "batches_per_s": res["batches"] / seconds, "sample_p50_us": p50,
           "sample_p99_us": p99, "inserts_per_s": items / seconds,
           "server_cpu_us_per_item": (cpu * 1e6 / moved) if cpu is not None and moved else None,
           "path": path}
    rtt50, rtt99 = percentiles(res.get("sample_rtt_us", []))
    if rtt50 is not None:  # a prefetching learner: the round trips it hid
        out.update(sample_rtt_p50_us=rtt50, sample_rtt_p99_us=rtt99, prefetch=res["prefetch"])
    moved_us = rtt50 if rtt50 is not None else p50  # the time to move the bytes, not the wait
    if moved_us is not None:  # the sample against one copy of its bytes at memcpy speed
        copy_us = SAMPLE * item_bytes / (memcpy * 1e9) * 1e6
        out["sample_vs_memcpy"] = moved_us / copy_us
    return out


# client_micro's block: each path runs this long in a row (after one untimed call)
MICRO_BLOCK_S = 0.25


def client_micro(pin: lat.Pinning, tmp: Path, seconds: float) -> dict[str, Any]:
    """ReplayClient's own large-item path against a kernel-stack server on loopback (the
    client's cost, not the network's): add of 50 x 28 KB and sample(out=) of 512 x 28 KB,
    and the same add through redis-py's execute_command (per-item bytes, hiredis packing:
    the path add took before) for comparison, interleaved in one run.

    Interleaved in blocks of MICRO_BLOCK_S seconds per path, each block's first call untimed:
    every path sees the same machine load, and each is timed in its steady state, as a
    caller repeating it sees it (an actor adds batch after batch). Timed one call at a
    time instead, an add right after a 14.5 MB sample starts with caches the sample just
    filled: on the AMD VM 704 MB/s against 1,148-1,183 alone (2026-11-29)."""
    from pyctl.client import ReplayClient

    port = free_port()
    server = lat.make_server("kernel", lat.Network(True), pin, tmp, port).start()
    rc = ReplayClient("127.0.0.1", port)
    try:
        rc.create("micro", 4000)
        rows = items_of(ATARI, 9)
        pr = np.ones(BATCH)
        out = np.empty((SAMPLE, ATARI), dtype=np.uint8)
        flat: list[Any] = []
        for r in rows:
            flat += [b"1", r.tobytes()]
        steps = {
            "add_50x28KB_MBps": (lambda: rc.add("micro", pr, rows), rows.nbytes),
            "add_50x28KB_redispy_MBps": (
                lambda: rc.redis.execute_command("REPLAY.ADD", "micro", *flat), rows.nbytes),
            "sample_512x28KB_out_MBps": (
                lambda: rc.sample("micro", SAMPLE, item_shape=(ATARI,), out=out), out.nbytes),
        }
        times = {k: 0.0 for k in steps}
        cpu = {k: 0.0 for k in steps}
        counts = {k: 0 for k in steps}
        for _ in range(3):
            for step, _n in steps.values():
                step()
        deadline = time.perf_counter() + seconds * len(steps)
        while time.perf_counter() < deadline:  # interleaved blocks: the same load for each
            for k, (step, _n) in steps.items():
                step()  # warm-up: the other paths' blocks ran just before
                end = time.perf_counter() + MICRO_BLOCK_S
                while True:
                    t0, c0 = time.perf_counter(), time.thread_time()
                    step()
                    t1 = time.perf_counter()
                    times[k] += t1 - t0
                    cpu[k] += time.thread_time() - c0
                    counts[k] += 1
                    if t1 >= end:
                        break
        res: dict[str, Any] = {k: counts[k] * n / times[k] / 1e6 for k, (_s, n) in steps.items()}
        # MB per second of the client's own CPU (system calls included): what the client
        # costs, less sensitive than the wall clock to other work on the machine
        res["per_client_cpu_s"] = {k: counts[k] * n / max(cpu[k], 1e-9) / 1e6
                                   for k, (_s, n) in steps.items()}
        res.update(path="loopback", system="inreplay-kernel", block_s=MICRO_BLOCK_S)
        return res
    finally:
        rc.close()
        server.stop()


def run(s: Settings) -> dict[str, Any]:
    started = time.time()
    pin = lat.Pinning.choose(s.server_core, s.client_core)
    memcpy = memcpy_gbps()
    pin.pin_client()  # the learner of the networked systems runs in this process
    log(f"memcpy {memcpy:.1f} GB/s")
    rows: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    micro: dict[str, Any] = {}
    net_info: dict[str, Any] = {}
    networked = [x for x in s.systems if x not in IN_PROCESS]
    net_cm = (lat.network(s.loopback, 0, s.mtu, False) if networked
              else contextlib.nullcontext(None))
    skip: set[str] = set()
    load_start = os.getloadavg()[0]
    with lat.sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="peers-") as tmp, \
            net_cm as net:
        if net is not None:
            net_info = net.describe()
        try:
            micro.update(client_micro(pin, Path(tmp), 1.0 if s.quick else 3.0))
            log(f"client: {micro}")
        except Exception as e:
            errors["client"] = f"{type(e).__name__}: {e}"
        # item size outside, systems inside: each size's systems run close together in time
        for size in s.item_sizes:
            for i, system in enumerate(s.systems):
                if system in skip:
                    continue
                tag = f"{system} {size} B"
                if system in IN_PROCESS:
                    path = "in-process" if system != "torchrl-ray" else \
                        "Ray actor (same machine)"
                else:
                    path = "loopback" if net.topo is None else \
                        f"veth (offloads off, MTU {s.mtu})"
                log(f"[{tag}] {path}")
                try:
                    if system in IN_PROCESS:
                        res = run_inproc(s, system, size)
                    else:
                        res = run_networked(s, system, net, pin, Path(tmp), size, i, micro)
                    rows.append(row(system, size, res, s.seconds, path, memcpy))
                    log(f"[{tag}] {rows[-1]['batches_per_s']:.1f} batches/s, "
                        f"{rows[-1]['inserts_per_s']:.0f} inserts/s")
                except Exception as e:
                    errors[tag] = f"{type(e).__name__}: {e}"
                    log(f"[{tag}] failed: {e}")
                    if isinstance(e, lat.StartError):
                        skip.add(system)  # the same reason at every size
    return {"bench": "peers", "quick": s.quick, "commit": lat.commit_label(),
            "machine": {**lat.machine(), "loadavg_start": load_start,
                        "loadavg_end": os.getloadavg()[0]},
            "network": net_info, "pinning": {"server": pin.server, "client": pin.client},
            "config": {"actors": s.actors, "actor_procs": s.actor_procs, "batch": BATCH,
                       "sample": SAMPLE, "alpha": ALPHA, "beta": BETA,
                       "seconds": s.seconds, "capacity": {str(k): v for k, v in
                                                          s.capacity.items()},
                       "item_sizes": s.item_sizes, "systems": s.systems},
            "memcpy_gbps": memcpy, "client": micro, "rows": rows, "errors": errors,
            "seconds": time.time() - started}


def run_networked(s: Settings, system: str, net: lat.Network, pin: lat.Pinning, tmp: Path,
                  size: int, i: int, micro: dict[str, Any]) -> dict[str, Any]:
    if system == "reverb":
        return run_reverb(s, net, pin, size)
    kind = INREPLAY.get(system) or ("redis" if system == "redis+tree" else None)
    if kind is None:
        raise lat.BenchError(f"unknown system {system}")
    port = free_port() if net.loopback else 7100 + i
    server = lat.make_server(kind, net, pin, tmp, port).start()
    try:
        host, cap = server.host, s.capacity[size]
        if kind == "redis":
            import redis

            redis.Redis(host=host, port=port).flushall()

            def learner(a: float, b: float) -> dict[str, Any]:
                return learner_redis(host, port, size, cap, a, b, s.seed)
        else:
            from pyctl.client import ReplayClient

            with ReplayClient(host, port) as rc:
                rc.create(TABLE, cap, alpha=ALPHA, beta=BETA)

            def learner(a: float, b: float) -> dict[str, Any]:
                return learner_inreplay(host, port, size, a, b, s.seed)

        assert server.proc is not None
        return run_actors_and_learner(s, system, host, port, size, server.proc.pid, pin,
                                      learner)
    finally:
        server.stop()


def table(doc: dict[str, Any]) -> str:
    lines = [f"memcpy {doc['memcpy_gbps']:.1f} GB/s; {doc['config']['actors']} actors",
             "| system | item | batches/s | sample p50 µs | p99 µs | inserts/s | "
             "server CPU µs/item | 28 KB sample / memcpy | path |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        vs_copy = r.get("sample_vs_memcpy") if r["item_bytes"] == ATARI else None

        def f(x: Any, fmt: str = "{:,.0f}") -> str:
            return "—" if x is None else fmt.format(x)
        lines.append(f"| {r['system']} | {lat.human(r['item_bytes'])} | "
                     f"{f(r['batches_per_s'], '{:,.1f}')} | {f(r['sample_p50_us'])} | "
                     f"{f(r['sample_p99_us'])} | {f(r['inserts_per_s'])} | "
                     f"{f(r['server_cpu_us_per_item'], '{:.2f}')} | "
                     f"{f(vs_copy, '{:.1f}×')} | {r['path']} |")
    for k, v in doc["errors"].items():
        lines.append(f"not measured: {k}: {v.splitlines()[0][:200]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--item-bytes", default=",".join(map(str, ITEM_SIZES)))
    p.add_argument("--seconds", type=float)
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--actor-procs", type=int, default=2)
    p.add_argument("--loopback", action="store_true")
    p.add_argument("--mtu", type=int, default=9000)
    p.add_argument("--server-core", type=int, default=1)
    p.add_argument("--client-core", type=int, default=0)
    # child roles (internal)
    p.add_argument("--role", choices=("actors", "inproc"), help=argparse.SUPPRESS)
    p.add_argument("--system", help=argparse.SUPPRESS)
    p.add_argument("--host", default="127.0.0.1", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--conns", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--conn-base", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--conn-total", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--capacity", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--fill", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--stop-at", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--core", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--window", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.role:
        _pin(a.core)
        a.item_bytes = int(a.item_bytes)
        doc = role_actors(a) if a.role == "actors" else role_inproc(a)
        print(json.dumps(doc), flush=True)
        return 0
    sizes = [int(x) for x in a.item_bytes.split(",") if x]
    systems = [x for x in a.systems.split(",") if x]
    bad = [x for x in systems if x not in SYSTEMS]
    if bad:
        p.error(f"unknown system(s) {bad}; choose from {', '.join(SYSTEMS)}")
    if not a.loopback and os.geteuid() != 0:
        log("not root: loopback instead of the veth, no DPDK")
        a.loopback = True
    if a.loopback or not lat.dpdk_built():
        systems = [x for x in systems if x != "inreplay-dpdk"] if a.loopback else systems
    cap = {z: (10_000 if z < 4096 else 2_000) if a.quick else
           (100_000 if z < 4096 else 20_000) for z in sizes}
    s = Settings(systems, sizes, a.seconds or (3.0 if a.quick else 15.0), a.actors,
                 a.actor_procs, cap, a.loopback, a.mtu, a.server_core, a.client_core, a.quick)
    doc = run(s)
    print(table(doc))
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if doc["rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
