"""inreplay against the replay systems a user would pick instead, on one machine, one run.

Workload (Ape-X's loop): --actors actor connections insert batches of 50 items as fast as
they are taken (each with its priority), while one learner samples 512 items (prioritized,
alpha 0.6, beta 0.4) and sends 512 new priorities back, again and again. Items of 128 B,
640 B (a compressed Atari transition) and 28,224 B (one 84x84x4 Atari state). Reported
per system and item size: the learner's batches/s with the actors at full load, its sample
latency p50/p99 (the call that returns the items as an array), inserts/s, and the server
process's CPU time per item moved (inserted or sampled), from /proc.

Systems:
    inreplay-shm          inreplay through the same-host shared-memory rings (the kernel
                          stack's --shm-socket; clients shm=True, no TCP on the data path)
    inreplay-shm-poll     the same server with --busy-poll
    inreplay-kernel       inreplay on the kernel stack over TCP (--shm-socket none, clients
                          shm=False, as every TCP/DPDK system); ReplayClient (add; sample
                          into a preallocated array with out=; update)
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
    cpprb-single          cpprb's in-process PrioritizedReplayBuffer, one learner, no actors
                          (workload single, beside inreplay-shm and inreplay-kernel)
    echo                  InstaDeep's echo 0.2.1 (id-echo, in build/peers-venv-echo), the
                          streaming peer (workload queue, beside inreplay's QUEUE tables on
                          inreplay-shm, inreplay-shm-poll and inreplay-kernel)

Workloads (--workloads, default all): apex (the loop above); single (one learner in one
process: fill in batches of 50, then inserts of 50 for half the cell, sample 512 / update
512 for the other half); queue (1 and 4 producer processes -> FIFO -> a learner taking
batches of 512, at 128 B and 28,224 B; every process, a server included, on both cores).

Networked systems run their server on --server-core and the actors and learner on
--client-core, over the shared veth (offloads off, --mtu, default 9000; what DPDK's
af_packet needs) that bench/latency.py builds, or loopback with --loopback (no DPDK). The
in-process peers have no network and no server; their CPU column is empty.

Also measured in the same run: memcpy GB/s (a NumPy copy of a 256 MB buffer, best of 5)
and how close each system's 28 KB sample of 512 (14.5 MB) comes to copying those bytes
once; and the client's own path (ReplayClient.add of 50 x 28 KB, sample(out=) of
512 x 28 KB, MB/s) on the kernel stack.

    python bench/peers.py [--quick] [--json FILE] [--systems ...] [--item-bytes 128,640,28224]
                          [--workloads apex,single,queue] [--producers 1,4]
                          [--queue-bytes 128,28224] [--seconds S] [--actors N] [--loopback]
                          [--mtu 9000]

--quick: short windows, small tables: about 5 minutes for the shm, kernel and Redis
systems, cpprb, cpprb-single and echo with every workload on a loaded 2-core machine
(Reverb and TorchRL add their own start-up; --workloads apex and fewer --systems make a
smoke test of a minute or two). A system that cannot be set up or fails is recorded under
"errors" with the reason and the run goes on.
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

from pyctl import _shm  # noqa: E402
from pyctl.proc import descendants, free_port  # noqa: E402

BATCH = 50
INSERTS_IN_FLIGHT = 4
"""An inreplay actor's batches on the wire at once (ReplayClient.inserter's default)."""
SAMPLE = 512
ALPHA, BETA = 0.6, 0.4
ATARI = 84 * 84 * 4
ITEM_SIZES = (128, 640, ATARI)
SYSTEMS = ("inreplay-shm", "inreplay-shm-poll", "inreplay-kernel", "inreplay-kernel-poll",
           "inreplay-dpdk", "redis+tree", "reverb", "torchrl", "torchrl-ray", "cpprb",
           "cpprb-single", "echo")
INREPLAY = {"inreplay-shm": "kernel", "inreplay-shm-poll": "kernel-poll",
            "inreplay-kernel": "kernel", "inreplay-kernel-poll": "kernel-poll",
            "inreplay-dpdk": "dpdk"}
SHM = ("inreplay-shm", "inreplay-shm-poll")
"""inreplay through the same-host shared-memory rings (the server's --shm-socket; every
other inreplay system is started with --shm-socket none and its clients pass shm=False,
so its figures are TCP's)."""
IN_PROCESS = ("torchrl", "torchrl-ray", "cpprb")
WORKLOADS = ("apex", "single", "queue")
"""apex: the Ape-X loop (actors + learner); single: one learner in one process, fill in
batches of 50 then sample 512 / update 512 (cpprb-single and inreplay); queue: the
IMPALA/SEED stream, producers -> FIFO -> a learner taking batches of 512 (echo and
inreplay's QUEUE tables)."""
APEX_ONLY = ("redis+tree", "reverb", "torchrl", "torchrl-ray", "cpprb")
SINGLE_INREPLAY = ("inreplay-shm", "inreplay-kernel")
QUEUE_INREPLAY = ("inreplay-shm", "inreplay-shm-poll", "inreplay-kernel")
PRODUCERS = (1, 4)
QUEUE_SIZES = (128, ATARI)
QUEUE_ITEMS = 2048
"""REPLAY.CREATE ... QUEUE n for the stream: four learner batches (echo's ring holds
num_buffers=3 batches plus 8 items per producer connection)."""
VENV_ECHO = ROOT / "build" / "peers-venv-echo"
ECHO_PINS = ("id-echo==0.2.1",)
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


def _acks(ins: Any, acked: int, on_ack: Callable[[], None]) -> int:
    """Calls on_ack once per batch the server has acknowledged since `acked` batches
    (an Inserter's `added` counts acknowledged items) and returns the new count."""
    while acked * BATCH < ins.added:
        acked += 1
        on_ack()
    return acked


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
                rc = ReplayClient(a.host, a.port, shm=bool(a.shm))
                # pipelined as Redis's actors are (Inserter: batches in flight, replies
                # read later), so a batch counts when the server acknowledged it
                with rc.inserter(TABLE, max_in_flight=INSERTS_IN_FLIGHT) as ins:
                    acked = 0
                    while True:
                        if (per_conn and counts[k] * BATCH >= per_conn) or \
                                (not per_conn and time.time() >= a.stop_at):
                            break
                        ins.add(prios, rows)
                        acked = _acks(ins, acked, lambda: _count(k))
                    ins.flush()
                    _acks(ins, acked, lambda: _count(k))
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
    if a.system == "cpprb-single":
        return _cpprb_single(a)
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


def single_learner(fill: Callable[[], None], add: Callable[[], None],
                   sample: Callable[[], Any], update: Callable[[Any], None],
                   capacity: int, seconds: float,
                   server_cpu: Callable[[], float] | None = None,
                   settle: Callable[[], None] | None = None) -> dict[str, Any]:
    """One learner in one process (no actors): fill the table in batches of 50, then
    insert batches of 50 for half the window (inserts/s; settle, if given, waits for
    inserts still in flight, inside the timed half) and sample 512 / update 512
    for the other half (batches/s, the sample's latency). The learner's own CPU (and
    the server's, with server_cpu) over each half's wall time say where it went."""
    for _ in range(-(-capacity // BATCH)):
        fill()
    half = seconds / 2
    cpu: dict[str, float] = {}
    c0, s0 = time.thread_time(), server_cpu() if server_cpu else 0.0
    n, t0 = 0, time.perf_counter()
    end = t0 + half
    while True:
        add()
        n += 1
        if time.perf_counter() >= end:
            break
    if settle:
        settle()
    insert_s = time.perf_counter() - t0
    cpu["learner_cpu_insert"] = (time.thread_time() - c0) / insert_s
    if server_cpu:
        cpu["server_cpu_insert"] = (server_cpu() - s0) / insert_s
    c0, s0 = time.thread_time(), server_cpu() if server_cpu else 0.0
    lat_us: list[float] = []
    t0 = time.perf_counter()
    end = t0 + half
    while True:
        a = time.perf_counter()
        got = sample()
        lat_us.append((time.perf_counter() - a) * 1e6)
        update(got)
        if time.perf_counter() >= end:
            break
    sample_s = time.perf_counter() - t0
    cpu["learner_cpu_sample"] = (time.thread_time() - c0) / sample_s
    if server_cpu:
        cpu["server_cpu_sample"] = (server_cpu() - s0) / sample_s
    return {"batches": len(lat_us), "sample_us": lat_us, "items": n * BATCH,
            "insert_s": insert_s, "sample_s": sample_s, "cpu_share": cpu}


def _cpprb_single(a: argparse.Namespace) -> dict[str, Any]:
    """cpprb's in-process PrioritizedReplayBuffer with a single learner."""
    from cpprb import PrioritizedReplayBuffer

    rb = PrioritizedReplayBuffer(a.capacity, {"obs": {"shape": a.item_bytes,
                                                      "dtype": np.uint8}}, alpha=ALPHA)
    rows = items_of(a.item_bytes, a.seed)
    prios = np.random.default_rng(a.seed).random(BATCH) + 0.1
    rng = np.random.default_rng(a.seed)

    def add() -> None:
        rb.add(obs=rows, priorities=prios)

    def sample() -> Any:
        return rb.sample(SAMPLE, beta=BETA)

    def update(s: Any) -> None:
        rb.update_priorities(s["indexes"], rng.random(SAMPLE) + 0.1)

    return single_learner(add, add, sample, update, a.capacity, a.window)


def single_inreplay(host: str, port: int, item_bytes: int, capacity: int, seconds: float,
                    seed: int, shm: bool, server_pid: int | None = None) -> dict[str, Any]:
    """inreplay with the same single learner (this process): adds of 50 pipelined on a
    connection of their own (ReplayClient.inserter, flushed at the end of the insert
    half), then sample of 512 (a view of the reply on the shm rings, sample(out=) over
    TCP) and update of 512, nothing in flight."""
    from pyctl.client import ReplayClient

    rc = ReplayClient(host, port, shm=shm)
    rows = items_of(item_bytes, seed)
    prios = np.random.default_rng(seed).random(BATCH) + 0.1
    out = np.empty((SAMPLE, item_bytes), dtype=np.uint8)
    rng = np.random.default_rng(seed)

    ins = rc.inserter(TABLE, max_in_flight=INSERTS_IN_FLIGHT)

    def add() -> None:  # pipelined: the learner's next batch goes out before the last's ids
        ins.add(prios, rows)

    def fill() -> None:
        rc.add(TABLE, prios, rows)

    def sample() -> Any:  # on the shm rings a view of the reply (one copy, the server's)
        if shm:
            return rc.sample(TABLE, SAMPLE, item_shape=(item_bytes,), copy=False)
        return rc.sample(TABLE, SAMPLE, item_shape=(item_bytes,), out=out)

    def update(s: Any) -> None:
        rc.update(TABLE, s.ids, rng.random(SAMPLE) + 0.1)

    try:
        return single_learner(fill, add, sample, update, capacity, seconds,
                              (lambda: tree_cpu(server_pid)) if server_pid else None,
                              settle=ins.flush)
    finally:
        ins.close()
        rc.close()


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
# the stream (queue workload): producers and a learner, each a child process
# --------------------------------------------------------------------------


def _until(a: argparse.Namespace, work: Callable[[list[float]], None], grace: float = 0.5
           ) -> list[float]:
    """Run work(times) on a daemon thread (it appends the time of each unit done) until
    the window is over, then return the times. The thread may be blocked for good in a
    peer's call once the other side has stopped (echo's send waits for acks with no
    timeout), so the caller reports and exits without joining it."""
    times: list[float] = []
    errors: list[str] = []

    def run() -> None:
        try:
            work(times)
        except Exception as e:  # reported in the JSON
            errors.append(f"{type(e).__name__}: {e}")

    threading.Thread(target=run, daemon=True).start()
    time.sleep(max(0.0, a.stop_at + grace - time.time()))
    if errors and not times:
        raise lat.BenchError(errors[0])
    return list(times)


def _in_window(a: argparse.Namespace, times: list[float]) -> int:
    return sum(1 for x in times if a.start_at <= x <= a.stop_at)


def role_producer(a: argparse.Namespace) -> dict[str, Any]:
    """One producer process, one connection, sending items as fast as they are taken:
    echo's TcpClient.send of one sample at a time (its API; it pipelines up to 32
    unacknowledged), or inreplay's pipelined adds (ReplayClient.inserter, up to
    INSERTS_IN_FLIGHT unacknowledged) of batches of 50 into the QUEUE table (waiting while
    the queue is full)."""
    rows = items_of(a.item_bytes, a.seed)
    if a.system == "echo":
        from echo import TcpClient

        client = TcpClient(a.host, a.port, {"obs": np.zeros(a.item_bytes, np.uint8)})
        samples = [{"obs": r} for r in rows]
        per = 1

        def send(times: list[float]) -> None:
            i = 0
            while time.time() < a.stop_at:
                client.send(samples[i % BATCH])
                i += 1
                times.append(time.time())
    else:
        from pyctl.client import ReplayClient
        from pyctl.errors import RateLimited

        rc = ReplayClient(a.host, a.port, shm=bool(a.shm))
        if a.shm and not _shm.is_shm(rc.redis):
            raise lat.BenchError("the producer is not on the shm rings")
        prios = np.ones(BATCH)
        per = BATCH

        def send(times: list[float]) -> None:
            # pipelined (ReplayClient.inserter), waiting up to 0.5 s while the queue is
            # full; a batch counts when the server acknowledged it
            with rc.inserter(TABLE, max_in_flight=INSERTS_IN_FLIGHT, timeout=0.5) as ins:
                acked = 0

                def count() -> None:
                    nonlocal acked
                    now = time.time()
                    acked = _acks(ins, acked, lambda: times.append(now))

                while time.time() < a.stop_at:
                    try:
                        ins.add(prios, rows)
                    except RateLimited:
                        pass  # an earlier batch timed out: not stored, not counted
                    count()
                try:
                    ins.flush()
                except RateLimited:
                    pass
                count()
    wait_for_window(a)
    times = _until(a, send)
    return {"items": _in_window(a, times) * per}


def role_queue_learner(a: argparse.Namespace) -> dict[str, Any]:
    """The stream's learner: batches of 512 as they are ready. echo: the Server (with its
    TcpTransport) lives in this process and hands out zero-copy views into its ring,
    valid until the next sample; inreplay: REPLAY.SAMPLE of 512 from the QUEUE table
    into one preallocated array (sample(out=)), valid until the next sample too."""
    if a.system == "echo":
        from echo import Server, TcpTransport

        srv = Server({"obs": np.zeros(a.item_bytes, np.uint8)}, batch_size=SAMPLE,
                     transport=TcpTransport(port=0))
        srv.start()
        print(json.dumps({"port": srv.port}), flush=True)

        def take(times: list[float]) -> None:
            while True:
                got = srv.sample()
                if got is None:
                    return
                if got.batch["obs"].shape != (SAMPLE, a.item_bytes):
                    raise lat.BenchError(f"echo batch of shape {got.batch['obs'].shape}")
                times.append(time.time())
    else:
        from pyctl.client import ReplayClient
        from pyctl.errors import RateLimited

        rc = ReplayClient(a.host, a.port, shm=bool(a.shm))
        if a.shm and not _shm.is_shm(rc.redis):
            raise lat.BenchError("the learner is not on the shm rings")
        out = np.empty((SAMPLE, a.item_bytes), dtype=np.uint8)

        def take(times: list[float]) -> None:
            while True:
                try:  # on the shm rings a view of the reply, valid until the next sample
                    if a.shm:
                        rc.sample(TABLE, SAMPLE, item_shape=(a.item_bytes,), copy=False,
                                  timeout=1.0)
                    else:
                        rc.sample(TABLE, SAMPLE, item_shape=(a.item_bytes,), out=out,
                                  timeout=1.0)
                except RateLimited:
                    if time.time() > a.stop_at:
                        return
                    continue
                times.append(time.time())
    wait_for_window(a)
    times = _until(a, take)
    return {"batches": _in_window(a, times), "items": _in_window(a, times) * SAMPLE}


# --------------------------------------------------------------------------
# the learner of the networked systems (this process)
# --------------------------------------------------------------------------


PREFETCH = 2  # inreplay's learner: samples in flight, as learner/replay.py's Prefetcher


def learner_inreplay(host: str, port: int, item_bytes: int, start_at: float,
                     stop_at: float, seed: int, prefetch: int = PREFETCH,
                     shm: bool = False) -> dict[str, Any]:
    """The learner as the Ape-X learner runs it: a sampling thread on its own connection
    keeps ``prefetch`` samples in flight (into preallocated arrays, a ring of
    prefetch + 2) while the main thread updates priorities on another, so the
    learner waits only for what the round trips cannot hide. Reverb's
    TrajectoryDataset prefetches the same way (1024 samples in flight); the latency
    reported is what the learner waits for a batch, as for Reverb, and the sampling
    thread's round trips are kept beside it (sample_rtt_us). prefetch=0: one
    connection, sample then update, nothing in flight. shm: through the same-host rings
    (required), else TCP only."""
    import queue

    from pyctl.client import ReplayClient

    rc = ReplayClient(host, port, shm=shm)
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

    # what a sample lands in, prefetch + 2 of them in turn: over TCP a preallocated
    # array (sample(out=)); on the shm rings a connection of its own, whose sample is a
    # view of its reply ring (sample(copy=False): the items are copied once, by the
    # server), valid until that connection's next request, i.e. until given back
    bufs: queue.Queue[Any] = queue.Queue()
    srcs = [ReplayClient(host, port, shm=shm) for _ in range(prefetch + 2)] if shm else []
    for k in range(prefetch + 2):
        bufs.put(srcs[k] if shm else np.empty((SAMPLE, item_bytes), dtype=np.uint8))
    ready: queue.Queue[Any] = queue.Queue(maxsize=prefetch)
    rtt_us: list[float] = []
    stop = threading.Event()

    def sampler() -> None:
        src = None if shm else ReplayClient(host, port, shm=shm)
        try:
            while not stop.is_set():
                buf = bufs.get()
                if isinstance(buf, np.ndarray) and buf.size == 1:
                    break  # woken to stop
                t0 = time.perf_counter()
                if shm:
                    s = buf.sample(TABLE, SAMPLE, item_shape=(item_bytes,), copy=False)
                else:
                    s = src.sample(TABLE, SAMPLE, item_shape=(item_bytes,), out=buf)
                if start_at <= time.time() <= stop_at:
                    rtt_us.append((time.perf_counter() - t0) * 1e6)
                ready.put((s, buf))
        except Exception as e:  # surfaced by the main thread
            ready.put(e)
        finally:
            if src is not None:
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
        for c in srcs:
            c.close()


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
    workloads: tuple[str, ...] = ("apex",)
    producers: tuple[int, ...] = PRODUCERS
    queue_sizes: tuple[int, ...] = QUEUE_SIZES
    shm_cores: str = "split"


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
               fill: int, pin: lat.Pinning, shm: bool = False) -> list[str]:
    return [sys.executable, str(Path(__file__)), "--role", "actors", "--system", system,
            "--host", host, "--port", str(port), "--item-bytes", str(item_bytes),
            "--conns", str(conns), "--conn-base", str(base), "--conn-total", str(total),
            "--capacity", str(s.capacity[item_bytes]), "--start-at", repr(start_at),
            "--stop-at", repr(stop_at), "--fill", str(fill), "--shm", str(int(shm)),
            "--core", str(pin.client if pin.client is not None else -1)]


def run_actors_and_learner(s: Settings, system: str, host: str, port: int, item_bytes: int,
                           server_pid: int | None, pin: lat.Pinning,
                           learner: Callable[[float, float], dict[str, Any]]
                           ) -> dict[str, Any]:
    """Fill the table, then actors at full load and the learner in one window."""
    kind = "redis" if system == "redis+tree" else "inreplay"
    shm = system in SHM
    cap = s.capacity[item_bytes]
    ch = Children()
    try:
        per = [s.actors // s.actor_procs + (1 if i < s.actors % s.actor_procs else 0)
               for i in range(s.actor_procs)]
        per = [c for c in per if c]
        # fill: the whole table once, through the actors' own path
        fills = [ch.start(actor_argv(s, kind, host, port, item_bytes, c, sum(per[:i]),
                                     s.actors, 0, 0, cap // len(per), pin, shm))
                 for i, c in enumerate(per)]
        for p in fills:
            ch.result(p, 300)
        procs = [ch.start(actor_argv(s, kind, host, port, item_bytes, c, sum(per[:i]),
                                     s.actors, -1, 0, 0, pin, shm))
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


def echo_python() -> str:
    """build/peers-venv-echo's Python with echo (id-echo 0.2.1), made on first use: the
    system site-packages (numpy, this project's modules) with echo and optree added, so
    echo never becomes a dependency of the package."""
    py = VENV_ECHO / "bin" / "python"
    probe = [str(py), "-c", "import echo; assert echo.__version__ == '0.2.1'"]
    if py.exists() and subprocess.run(probe, capture_output=True, check=False,
                                      timeout=120).returncode == 0:
        return str(py)
    log(f"making {VENV_ECHO} with {' '.join(ECHO_PINS)} (a peer, not a project dependency)")
    for cmd in ([sys.executable, "-m", "venv", "--system-site-packages", str(VENV_ECHO)],
                [str(py), "-m", "pip", "install", "-q", *ECHO_PINS], probe):
        r = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
        if r.returncode != 0:
            raise lat.StartError(f"{' '.join(cmd[:4])} failed: "
                                 f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return str(py)


def all_cpus() -> set[int]:
    return set(os.sched_getaffinity(0)) | set(range(os.cpu_count() or 1))


def path_of(system: str, net: lat.Network | None, mtu: int) -> str:
    """Which path a system's figures took, as the report names it."""
    if system in ("torchrl", "cpprb", "cpprb-single"):
        return "in-process"
    if system == "torchrl-ray":
        return "Ray actor (same machine)"
    if system in SHM:
        return "shm rings (same host)"
    where = "loopback" if net is None or net.topo is None else \
        f"veth (offloads off, MTU {mtu})"
    if system == "inreplay-dpdk":
        return f"DPDK + lwIP, {where}"
    return f"kernel TCP, {where}"


def run_queue(s: Settings, system: str, item_bytes: int, producers: int, tmp: Path
              ) -> dict[str, Any]:
    """One cell of the stream: `producers` producer processes and one learner taking
    batches of 512, every process (and inreplay's server) free to run on every core."""
    from pyctl.client import ReplayClient

    keep = os.sched_getaffinity(0)
    os.sched_setaffinity(0, all_cpus())  # inherited by the server and every child
    ch = Children()
    server = None
    me = str(Path(__file__))
    try:
        shm = system in SHM
        if system == "echo":
            py = echo_python()
            learner = ch.start([py, me, "--role", "queue-learner", "--system", "echo",
                                "--item-bytes", str(item_bytes), "--start-at", "-1"])
            assert learner.stdout is not None
            got: list[str] = []
            th = threading.Thread(target=lambda: got.append(learner.stdout.readline()),
                                  daemon=True)
            th.start()
            th.join(120)
            if not got or not got[0].startswith('{"port"'):
                raise lat.StartError(f"echo's server did not start: "
                                     f"{ch.stderr_tail(learner, got[0] if got else '')}")
            host, port, cpu_pid = "127.0.0.1", int(json.loads(got[0])["port"]), learner.pid
            kind = "echo"
        else:
            py, port = sys.executable, free_port()
            net = lat.Network(True)
            sock = str(tmp / f"q-{system}-{port}.shm") if shm else "none"
            server = lat.make_server(INREPLAY[system], net, lat.Pinning(None, None), tmp, port,
                                     shm_socket=sock).start()
            host = server.host
            with ReplayClient(host, port, shm=shm) as rc:
                rc.create(TABLE, QUEUE_ITEMS, queue=True)
            assert server.proc is not None
            cpu_pid, kind = server.proc.pid, "inreplay"
            learner = ch.start([py, me, "--role", "queue-learner", "--system", kind,
                                "--host", host, "--port", str(port), "--shm", str(int(shm)),
                                "--item-bytes", str(item_bytes), "--start-at", "-1"])
        prods = [ch.start([py, me, "--role", "producer", "--system", kind, "--host", host,
                           "--port", str(port), "--shm", str(int(shm)), "--item-bytes",
                           str(item_bytes), "--seed", str(k), "--start-at", "-1"])
                 for k in range(producers)]
        start_at, stop_at = ch.go([learner, *prods], s.seconds)
        cpu = cpu_window(cpu_pid, start_at, stop_at)
        res = ch.result(learner, s.seconds + 60)
        sent = sum(ch.result(p, s.seconds + 60)["items"] for p in prods)
        cpu_s = cpu()
        items = res["items"]
        return {"system": system, "workload": "queue", "item_bytes": item_bytes,
                "producers": producers, "items_per_s": items / s.seconds,
                "batches_per_s": res["batches"] / s.seconds, "sent_per_s": sent / s.seconds,
                "server_cpu_us_per_item": (cpu_s * 1e6 / items) if cpu_s and items else None,
                "server_cpu_share": (cpu_s / s.seconds) if cpu_s is not None else None,
                "cpu_of": "the learner's process (echo's server lives in it)"
                if system == "echo" else "the server process",
                "path": "kernel TCP, loopback" if system == "echo" else path_of(system, None, 0)}
    finally:
        ch.close()
        if server is not None:
            server.stop()
        os.sched_setaffinity(0, keep)


def run_single(s: Settings, system: str, pin: lat.Pinning, tmp: Path, item_bytes: int
               ) -> dict[str, Any]:
    """The single learner on inreplay: the server on the server core, the learner (this
    process) on the client core, on loopback or the shm rings."""
    shm = system in SHM
    port = free_port()
    sock = str(tmp / f"s-{system}-{port}.shm") if shm else "none"
    server = lat.make_server(INREPLAY[system], lat.Network(True), pin, tmp, port,
                             shm_socket=sock).start()
    try:
        from pyctl.client import ReplayClient

        cap = s.capacity[item_bytes]
        with ReplayClient(server.host, port, shm=shm) as rc:
            rc.create(TABLE, cap, alpha=ALPHA, beta=BETA)
        assert server.proc is not None
        return single_inreplay(server.host, port, item_bytes, cap, s.seconds, s.seed, shm,
                               server.proc.pid)
    finally:
        server.stop()


def run_inproc(s: Settings, system: str, item_bytes: int, conns: int | None = None
               ) -> dict[str, Any]:
    py = torchrl_python() if system.startswith("torchrl") else sys.executable
    cap = s.capacity[item_bytes]
    argv = [py, str(Path(__file__)), "--role", "inproc", "--system", system,
            "--item-bytes", str(item_bytes), "--conns", str(conns or s.actors),
            "--capacity", str(cap),
            "--fill", str(cap), "--window", repr(s.seconds)]
    every_cpu = ",".join(map(str, sorted(os.sched_getaffinity(0) | set(range(os.cpu_count()
                                                                                or 1)))))
    ch = Children()
    try:  # no server: the peer's actors and learner get every core
        return ch.result(ch.start(["taskset", "-c", every_cpu, *argv]), s.seconds + 300)
    finally:
        ch.close()


def row(system: str, item_bytes: int, res: dict[str, Any], seconds: float, path: str,
        memcpy: float, workload: str = "apex") -> dict[str, Any]:
    p50, p99 = percentiles(res.get("sample_us", []))
    items = res["items"]
    moved = items + res["batches"] * SAMPLE
    cpu = res.get("server_cpu_s")
    # the single learner times its inserts and its samples in two halves of the window
    insert_s, sample_s = res.get("insert_s", seconds), res.get("sample_s", seconds)
    out = {"system": system, "workload": workload, "item_bytes": item_bytes,
           "batches_per_s": res["batches"] / sample_s, "sample_p50_us": p50,
           "sample_p99_us": p99, "inserts_per_s": items / insert_s,
           "server_cpu_us_per_item": (cpu * 1e6 / moved) if cpu is not None and moved else None,
           "path": path}
    if res.get("cores"):
        out["cores"] = res["cores"]
    if res.get("cpu_share"):  # the single learner: CPU seconds per wall second, per half
        out["cpu_share"] = res["cpu_share"]
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


def client_micro(pin: lat.Pinning, tmp: Path, seconds: float, shm: bool = False
                 ) -> dict[str, Any]:
    """ReplayClient's own large-item path against a kernel-stack server on loopback (the
    client's cost, not the network's): add of 50 x 28 KB and sample(out=) of 512 x 28 KB,
    and the same add through redis-py's execute_command (per-item bytes, hiredis packing:
    the path add took before) for comparison, interleaved in one run.

    Interleaved in blocks of MICRO_BLOCK_S seconds per path, each block's first call untimed:
    every path sees the same machine load, and each is timed in its steady state, as a
    caller repeating it sees it (an actor adds batch after batch). Timed one call at a
    time instead, an add right after a 14.5 MB sample starts with caches the sample just
    filled: on the AMD VM 704 MB/s against 1,148-1,183 alone (2026-11-29).

    shm: the same through the same-host rings instead of TCP on loopback."""
    from pyctl.client import ReplayClient

    port = free_port()
    sock = str(tmp / f"micro-{port}.shm") if shm else "none"
    server = lat.make_server("kernel", lat.Network(True), pin, tmp, port,
                             shm_socket=sock).start()
    rc = ReplayClient("127.0.0.1", port, shm=shm)
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
        res.update(path="shm rings (same host)" if shm else "loopback",
                   system="inreplay-shm" if shm else "inreplay-kernel", block_s=MICRO_BLOCK_S)
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
    queue_rows: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    micro: dict[str, Any] = {}
    micro_shm: dict[str, Any] = {}
    net_info: dict[str, Any] = {}
    apex = [x for x in s.systems if x not in ("cpprb-single", "echo")] \
        if "apex" in s.workloads else []
    single = [x for x in s.systems if x == "cpprb-single" or x in SINGLE_INREPLAY] \
        if "single" in s.workloads else []
    queue = [x for x in s.systems if x == "echo" or x in QUEUE_INREPLAY] \
        if "queue" in s.workloads else []
    networked = [x for x in apex if x not in IN_PROCESS]
    net_cm = (lat.network(s.loopback, 0, s.mtu, False) if networked
              else contextlib.nullcontext(None))
    skip: set[str] = set()
    load_start = os.getloadavg()[0]
    with lat.sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="peers-") as tmp, \
            net_cm as net:
        if net is not None:
            net_info = net.describe()
        for shm, into in ((False, micro), (True, micro_shm)):
            if shm and not any(x in SHM for x in s.systems):
                continue
            try:
                into.update(client_micro(pin, Path(tmp), 1.0 if s.quick else 3.0, shm))
                log(f"client ({into['path']}): {into}")
            except Exception as e:
                errors["client-shm" if shm else "client"] = f"{type(e).__name__}: {e}"

        def cell(tag: str, system: str, fn: Callable[[], dict[str, Any]]) -> None:
            log(f"[{tag}]")
            try:
                got = fn()
                (queue_rows if got.get("workload") == "queue" else rows).append(got)
                log(f"[{tag}] {got.get('batches_per_s', 0):.1f} batches/s, "
                    f"{got.get('inserts_per_s', got.get('items_per_s', 0)):.0f} items/s "
                    f"({got['path']})")
            except Exception as e:
                errors[tag] = f"{type(e).__name__}: {e}"
                log(f"[{tag}] failed: {e}")
                if isinstance(e, lat.StartError):
                    skip.add(system)  # the same reason at every size

        # item size outside, systems inside: each size's systems run close together in time
        for size in s.item_sizes:
            for i, system in enumerate(apex):
                if system in skip:
                    continue
                path = path_of(system, net, s.mtu)
                if system in IN_PROCESS:
                    cell(f"{system} {size} B", system, lambda system=system, size=size, path=path:
                         row(system, size, run_inproc(s, system, size), s.seconds, path,
                             memcpy))
                else:
                    cell(f"{system} {size} B", system,
                         lambda system=system, size=size, path=path, i=i: row(
                             system, size, run_networked(s, system, net, pin, Path(tmp), size,
                                                         i, micro),
                             s.seconds, path, memcpy))
            for system in single:
                if system in skip:
                    continue
                path = path_of(system, None, s.mtu)
                if system == "cpprb-single":
                    cell(f"{system} {size} B", system, lambda system=system, size=size,
                         path=path: row(system, size, run_inproc(s, system, size, 1),
                                        s.seconds, path, memcpy, "single"))
                else:
                    cell(f"{system} single {size} B", system, lambda system=system, size=size,
                         path=path: row(system, size, run_single(s, system, pin, Path(tmp),
                                                                 size),
                                        s.seconds, path, memcpy, "single"))
        for size in s.queue_sizes:
            for n in s.producers:
                for system in queue:
                    if system in skip:
                        continue
                    cell(f"{system} queue {size} B x{n}", system,
                         lambda system=system, size=size, n=n: run_queue(s, system, size, n,
                                                                         Path(tmp)))
    return {"bench": "peers", "quick": s.quick, "commit": lat.commit_label(),
            "machine": {**lat.machine(), "loadavg_start": load_start,
                        "loadavg_end": os.getloadavg()[0]},
            "network": net_info, "pinning": {"server": pin.server, "client": pin.client},
            "config": {"actors": s.actors, "actor_procs": s.actor_procs, "batch": BATCH,
                       "sample": SAMPLE, "alpha": ALPHA, "beta": BETA,
                       "seconds": s.seconds, "capacity": {str(k): v for k, v in
                                                          s.capacity.items()},
                       "item_sizes": s.item_sizes, "systems": s.systems,
                       "workloads": list(s.workloads), "producers": list(s.producers),
                       "shm_cores": s.shm_cores,
                       "queue_sizes": list(s.queue_sizes), "queue_items": QUEUE_ITEMS},
            "memcpy_gbps": memcpy, "client": micro, "client_shm": micro_shm, "rows": rows,
            "queue_rows": queue_rows, "errors": errors, "seconds": time.time() - started}


@contextlib.contextmanager
def cores_for(s: Settings, system: str, pin: lat.Pinning) -> Any:
    """The pinning a cell runs with: --shm-cores shared puts the shm systems' server,
    actors and learner on every core, as the in-process peers are (the server's idle
    time is then the clients'); otherwise the server core / client core split."""
    if system not in SHM or s.shm_cores != "shared":
        yield pin
        return
    keep = os.sched_getaffinity(0)
    os.sched_setaffinity(0, all_cpus())
    try:
        yield lat.Pinning(None, None)
    finally:
        os.sched_setaffinity(0, keep)


def run_networked(s: Settings, system: str, net: lat.Network, pin: lat.Pinning, tmp: Path,
                  size: int, i: int, micro: dict[str, Any]) -> dict[str, Any]:
    with cores_for(s, system, pin) as p:
        res = _run_networked(s, system, net, p, tmp, size, i, micro)
    res["cores"] = "every core, shared" if p.server is None else \
        f"server {p.server}, clients {p.client}"
    return res


def _run_networked(s: Settings, system: str, net: lat.Network, pin: lat.Pinning, tmp: Path,
                   size: int, i: int, micro: dict[str, Any]) -> dict[str, Any]:
    if system == "reverb":
        return run_reverb(s, net, pin, size)
    kind = INREPLAY.get(system) or ("redis" if system == "redis+tree" else None)
    if kind is None:
        raise lat.BenchError(f"unknown system {system}")
    port = free_port() if net.loopback else 7100 + i
    shm = system in SHM
    server = lat.make_server(kind, net, pin, tmp, port,
                             shm_socket=str(tmp / f"{system}-{port}.shm") if shm else "none"
                             ).start()
    try:
        host, cap = server.host, s.capacity[size]
        if kind == "redis":
            import redis

            redis.Redis(host=host, port=port).flushall()

            def learner(a: float, b: float) -> dict[str, Any]:
                return learner_redis(host, port, size, cap, a, b, s.seed)
        else:
            from pyctl.client import ReplayClient

            with ReplayClient(host, port, shm=shm) as rc:
                rc.create(TABLE, cap, alpha=ALPHA, beta=BETA)
                if shm and not _shm.is_shm(rc.redis):
                    raise lat.BenchError(f"{system}: the client is not on the shm rings")

            def learner(a: float, b: float) -> dict[str, Any]:
                return learner_inreplay(host, port, size, a, b, s.seed, shm=shm)

        assert server.proc is not None
        return run_actors_and_learner(s, system, host, port, size, server.proc.pid, pin,
                                      learner)
    finally:
        server.stop()


def table(doc: dict[str, Any]) -> str:
    lines = [f"memcpy {doc['memcpy_gbps']:.1f} GB/s; {doc['config']['actors']} actors",
             "| system | workload | item | batches/s | sample p50 µs | p99 µs | inserts/s | "
             "server CPU µs/item | 28 KB sample / memcpy | path |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        vs_copy = r.get("sample_vs_memcpy") if r["item_bytes"] == ATARI else None

        def f(x: Any, fmt: str = "{:,.0f}") -> str:
            return "—" if x is None else fmt.format(x)
        lines.append(f"| {r['system']} | {r.get('workload', 'apex')} | "
                     f"{lat.human(r['item_bytes'])} | "
                     f"{f(r['batches_per_s'], '{:,.1f}')} | {f(r['sample_p50_us'])} | "
                     f"{f(r['sample_p99_us'])} | {f(r['inserts_per_s'])} | "
                     f"{f(r['server_cpu_us_per_item'], '{:.2f}')} | "
                     f"{f(vs_copy, '{:.1f}×')} | {r['path']} |")
    if doc.get("queue_rows"):
        lines += ["", "| system | item | producers | learner items/s | sent items/s | "
                      "server CPU µs/item | path |", "|---|---|---|---|---|---|---|"]
        for r in doc["queue_rows"]:
            cpu = r.get("server_cpu_us_per_item")
            lines.append(f"| {r['system']} | {lat.human(r['item_bytes'])} | {r['producers']} | "
                         f"{r['items_per_s']:,.0f} | {r['sent_per_s']:,.0f} | "
                         f"{'—' if cpu is None else f'{cpu:.2f}'} | {r['path']} |")
    for k, v in doc["errors"].items():
        lines.append(f"not measured: {k}: {v.splitlines()[0][:200]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--item-bytes", default=",".join(map(str, ITEM_SIZES)))
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"of {', '.join(WORKLOADS)} (default all)")
    p.add_argument("--producers", default=",".join(map(str, PRODUCERS)),
                   help="producer processes of the queue workload (default 1,4)")
    p.add_argument("--shm-cores", choices=("split", "shared"), default="split",
                   help="the shm systems in the Ape-X loop: server and clients on their own "
                        "cores as the TCP systems (split, the default), or all on every core "
                        "as the in-process peers (shared)")
    p.add_argument("--queue-bytes", default=",".join(map(str, QUEUE_SIZES)),
                   help="item sizes of the queue workload (default 128,28224)")
    p.add_argument("--seconds", type=float)
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--actor-procs", type=int, default=2)
    p.add_argument("--loopback", action="store_true")
    p.add_argument("--mtu", type=int, default=9000)
    p.add_argument("--server-core", type=int, default=1)
    p.add_argument("--client-core", type=int, default=0)
    # child roles (internal)
    p.add_argument("--role", choices=("actors", "inproc", "producer", "queue-learner"),
                   help=argparse.SUPPRESS)
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
    p.add_argument("--shm", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.role:
        _pin(a.core)
        a.item_bytes = int(a.item_bytes)
        roles = {"actors": role_actors, "inproc": role_inproc, "producer": role_producer,
                 "queue-learner": role_queue_learner}
        doc = roles[a.role](a)
        print(json.dumps(doc), flush=True)
        if a.role in ("producer", "queue-learner"):
            os._exit(0)  # its sending/sampling thread may be blocked in the peer for good
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
    workloads = tuple(x for x in a.workloads.split(",") if x)
    if set(workloads) - set(WORKLOADS):
        p.error(f"unknown workload(s) {sorted(set(workloads) - set(WORKLOADS))}; choose from "
                f"{', '.join(WORKLOADS)}")
    s = Settings(systems, sizes, a.seconds or (3.0 if a.quick else 15.0), a.actors,
                 a.actor_procs, cap, a.loopback, a.mtu, a.server_core, a.client_core, a.quick,
                 workloads=workloads,
                 producers=tuple(int(x) for x in a.producers.split(",") if x),
                 queue_sizes=tuple(int(x) for x in a.queue_bytes.split(",") if x),
                 shm_cores=a.shm_cores)
    doc = run(s)
    print(table(doc))
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if doc["rows"] or doc["queue_rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
