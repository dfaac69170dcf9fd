"""The swarm: many actors inserting while one learner samples, on 1 and 2 shards.

Ape-X ran 360 actors (about 50,000 transitions/s together) against one replay
while the learner drew about 19 batches of 512 per second. This benchmark
opens --actors connections that each insert batches of 50 items (REPLAY.ADD,
one request per batch, one batch in flight per actor, as an Ape-X actor sends)
at Ape-X's per-actor rate (--rate apex: 50,000 / 360 transitions/s each) or as
fast as the server takes them (--rate max), while a learner connection runs
SAMPLE 512 + UPDATE 512 back to back, through ShardedReplayClient (one round
trip per call to every shard).

For each shard count it measures, in order:
    learner alone        the learner's batches/s with no actor connected (baseline)
    apex                 actors at Ape-X's rate and the learner
    apex10               actors at ten times Ape-X's rate (500,000 transitions/s) and the learner
    max                  actors as fast as possible and the learner
    traj                 trajectories stored once: each actor connection declares
                         an episode stream (obs: one item_bytes frame, action, reward) and per
                         batch sends REPLAY.APPEND of 50 steps, REPLAY.ITEM of 47 3-step
                         transitions referencing them (obs, next_obs, action, 3 rewards) and
                         REPLAY.STREAM END in one round trip, as fast as the server takes
                         them; the learner samples 512 assembled transitions
                         (sample_trajectories across the group) + UPDATE 512
and reports inserts_per_s, sample_batches_per_s, sample_p99_ms and
insert_p99_ms, overall and per shard (inserts counted by each shard's
REPLAY.INFO, over the window the actors offered load: every connection is open
before the clock starts, and the window ends with the last reply). Actors run
in their own process (asyncio over raw sockets with the hiredis parser; requests
pre-encoded), the learner in another, the shards
pinned to their own cores by `pyctl start --shards`: on a 2-core machine
everything shares the two cores, and the report says so.

    python bench/swarm.py [--actors 360] [--item-bytes 128] [--seconds 20]
                          [--shards 1,2] [--phases learner,apex,max] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hiredis
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl.proc import resp_command  # noqa: E402
from pyctl.sharded import ShardedReplayClient  # noqa: E402
from pyctl.trajectory import (  # noqa: E402
    TrajectoryWriter,
    chunk_stats,
    create_trajectory_table,
)

APEX_ACTORS = 360
APEX_TRANSITIONS_PER_S = 50_000
BATCH = 50          # transitions per actor request (Ape-X batches its traffic)
SAMPLE = 512        # the learner's batch
TABLE = "swarm"
TRAJ_TABLE = "swarm_traj"
NSTEP = 3           # the traj phase's transitions: obs t, next_obs t+3, rewards t..t+2


def log(msg: str) -> None:
    print(f"swarm: {msg}", file=sys.stderr, flush=True)


# ---- actors -------------------------------------------------------------------------------

async def _replies(reader: asyncio.StreamReader, parser: hiredis.Reader, n: int) -> None:
    """Read n replies; an error reply raises."""
    for _ in range(n):
        while True:
            reply = parser.gets()
            if reply is not False:
                break
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            parser.feed(data)
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"actor request: {reply}")


async def _connect(k: int, addrs: list[tuple[str, int]], setup: list[bytes] | None
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, hiredis.Reader]:
    """Actor k's connection (the actors spread over the shards, as add() does), its
    setup[k] request answered (the traj phase's stream)."""
    host, port = addrs[k % len(addrs)]
    reader, writer = await asyncio.open_connection(host, port)
    parser = hiredis.Reader()
    if setup is not None:
        writer.write(setup[k])
        await _replies(reader, parser, 1)
    return reader, writer, parser


async def _actor(k: int, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter, hiredis.Reader],
                 payload: bytes | list[bytes], per_s: float, start: float, stop_at: float,
                 lat: list[float], counts: list[int], replies: int = 1, per_batch: int = BATCH
                 ) -> None:
    """One actor connection, already open: payload (or payload[k]) per batch, `replies`
    replies each, per_batch transitions counted, from `start` until `stop_at` (loop time).
    Paced actors send on a fixed schedule (lateness does not accumulate), their first
    sends spread over one interval so the actors do not fire in step: over the window,
    each actor offers per_s on average."""
    reader, writer, parser = conn
    if isinstance(payload, list):
        payload = payload[k]
    interval = BATCH / per_s if per_s > 0 else 0.0
    loop = asyncio.get_running_loop()
    next_at = start + interval * ((k * 0.618034) % 1.0)
    try:
        while loop.time() < stop_at:
            if interval:
                if next_at >= stop_at:  # no send due before the window ends: stop now
                    break
                delay = next_at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                next_at += interval
            t0 = time.perf_counter()
            writer.write(payload)
            await _replies(reader, parser, replies)
            lat.append(time.perf_counter() - t0)
            counts[0] += per_batch
    finally:
        writer.close()


def traj_requests(stream: str, item_bytes: int, rng: np.random.Generator
                  ) -> tuple[bytes, bytes, int]:
    """The traj phase's requests of one actor connection: (its stream's declaration,
    one batch: APPEND 50 steps + ITEM over them + END, pipelined; transitions per batch)."""
    declare = resp_command("REPLAY.STREAM", stream, "FIELDS", 3, "obs", "uint8", str(item_bytes),
                           "action", "int64", "", "reward", "float32", "")
    obs = rng.integers(0, 256, (BATCH, item_bytes), np.uint8).tobytes()
    action = rng.integers(0, 4, BATCH).astype(np.int64).tobytes()
    reward = rng.random(BATCH, dtype=np.float32).tobytes()
    items: list[Any] = []
    n = BATCH - NSTEP
    for t in range(n):
        items += [f"{rng.uniform(0.1, 10):.6g}", 4,
                  "obs", stream, "obs", t, 1, "next_obs", stream, "obs", t + NSTEP, 1,
                  "action", stream, "action", t, 1, "reward", stream, "reward", t, NSTEP]
    batch = (resp_command("REPLAY.APPEND", stream, BATCH, obs, action, reward)
             + resp_command("REPLAY.ITEM", TRAJ_TABLE, *items)
             + resp_command("REPLAY.STREAM", stream, "END"))
    return declare, batch, n


def run_actors(addrs: list[tuple[str, int]], n: int, item_bytes: int, per_s: float,
               seconds: float, traj: bool, out_fd: int) -> None:
    """The actors' process: n connections for `seconds`; writes a JSON line to out_fd.
    traj: the traj phase's requests (each connection its own stream) instead of ADD."""
    rng = np.random.default_rng(os.getpid())
    payload: bytes | list[bytes]
    setup: list[bytes] | None = None
    replies, per_batch = 1, BATCH
    if traj:
        reqs = [traj_requests(f"swarm-{os.getpid()}-{k}", item_bytes, rng) for k in range(n)]
        setup = [r[0] for r in reqs]
        payload = [r[1] for r in reqs]
        replies, per_batch = 3, reqs[0][2]
    else:
        args: list[Any] = ["REPLAY.ADD", TABLE]
        for _ in range(BATCH):
            args += [f"{rng.uniform(0.1, 10):.6g}", rng.integers(0, 256, item_bytes,
                                                                  np.uint8).tobytes()]
        payload = resp_command(*args)
    lat: list[float] = []
    counts = [0]

    window = [0.0, 0.0]

    async def main() -> None:
        # every connection open (and its stream declared) before the clock starts: the
        # window below is the time the actors offered their load, nothing else
        conns = await asyncio.gather(*(_connect(k, addrs, setup) for k in range(n)))
        loop = asyncio.get_running_loop()
        start = loop.time()
        window[0] = time.perf_counter()
        tasks = [asyncio.create_task(_actor(k, conns[k], payload, per_s, start,
                                            start + seconds, lat, counts, replies, per_batch))
                 for k in range(n)]
        done = await asyncio.gather(*tasks, return_exceptions=True)
        window[1] = time.perf_counter()  # the last reply is in
        errors = [repr(e) for e in done if isinstance(e, BaseException)]
        if errors:
            raise RuntimeError(f"{len(errors)} actors failed, first: {errors[0]}")

    t0 = time.perf_counter()
    asyncio.run(main())
    wall = time.perf_counter() - t0
    ms = np.array(lat) * 1e3 if lat else np.zeros(1)
    os.write(out_fd, (json.dumps({
        "transitions": counts[0], "wall_s": wall, "window_s": window[1] - window[0],
        "insert_p50_ms": float(np.percentile(ms, 50)),
        "insert_p99_ms": float(np.percentile(ms, 99)),
    }) + "\n").encode())


# ---- the learner --------------------------------------------------------------------------

def run_learner(group: list[str], item_bytes: int, seconds: float, traj: bool,
                out_fd: int) -> None:
    """SAMPLE 512 + UPDATE 512 back to back for `seconds`; a JSON line to out_fd.
    traj: 512 transitions assembled from the trajectory table instead."""
    rc = ShardedReplayClient(group, seed=1)
    rng = np.random.default_rng(2)
    lat = []
    batches = 0
    table = TRAJ_TABLE if traj else TABLE
    t_end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < t_end:
        s0 = time.perf_counter()
        s = (rc.sample_trajectories(table, SAMPLE) if traj
             else rc.sample(table, SAMPLE, item_shape=(item_bytes,)))
        lat.append(time.perf_counter() - s0)
        rc.update(table, s.ids, rng.uniform(0.1, 10, SAMPLE).astype(np.float32))
        batches += 1
    wall = time.perf_counter() - t0
    ms = np.array(lat) * 1e3
    rc.close()
    os.write(out_fd, (json.dumps({
        "batches": batches, "wall_s": wall, "sample_batches_per_s": batches / wall,
        "sample_p50_ms": float(np.percentile(ms, 50)),
        "sample_p99_ms": float(np.percentile(ms, 99)),
    }) + "\n").encode())


def _fork(fn: Any, *args: Any) -> tuple[int, int]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            fn(*args, w)
        except BaseException as e:  # report, never return into the parent's code
            os.write(w, (json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n").encode())
            code = 1
        os._exit(code)
    os.close(w)
    return pid, r


def _collect(pid: int, fd: int) -> dict[str, Any]:
    with os.fdopen(fd) as f:
        line = f.readline()
    os.waitpid(pid, 0)
    out = json.loads(line) if line else {"error": "the process exited without a result"}
    if "error" in out:
        raise RuntimeError(out["error"])
    return out


# ---- one configuration --------------------------------------------------------------------

def _inserts(rc: ShardedReplayClient, table: str) -> list[int]:
    return [int(s.info(table)["inserts"]) for s in rc.shards]


def phase(group: list[str], name: str, actors: int, item_bytes: int, seconds: float,
          per_s: float, traj: bool = False) -> dict[str, Any]:
    addrs = [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in group)]
    table = TRAJ_TABLE if traj else TABLE
    probe = ShardedReplayClient(group)
    before = _inserts(probe, table)
    t0 = time.perf_counter()
    procs = []
    if actors:
        procs.append(("actors", *_fork(run_actors, addrs, actors, item_bytes, per_s, seconds,
                                       traj)))
    procs.append(("learner", *_fork(run_learner, group, item_bytes, seconds, traj)))
    results = {name_: _collect(pid, fd) for name_, pid, fd in procs}
    wall = time.perf_counter() - t0
    after = _inserts(probe, table)
    if traj:  # what storing each step once costs: chunk bytes over transitions held
        chunks = chunk_stats(probe)
        held = sum(int(s.info(table)["size"]) for s in probe.shards)
    probe.close()
    # inserts/s over the window the actors offered their load (first send to last reply,
    # every connection already open), not over the processes' start-up and exit
    window = results["actors"]["window_s"] if actors else wall
    per_shard = [(a - b) / window for a, b in zip(after, before, strict=True)]
    learner = results["learner"]
    row: dict[str, Any] = {
        "shards": len(group), "phase": name, "actors": actors, "item_bytes": item_bytes,
        "seconds": round(wall, 2), "insert_window_s": round(window, 3),
        "inserts_per_s": round(sum(per_shard)),
        "inserts_per_s_per_shard": [round(x) for x in per_shard],
        "sample_batches_per_s": round(learner["sample_batches_per_s"], 1),
        "sample_p50_ms": round(learner["sample_p50_ms"], 3),
        "sample_p99_ms": round(learner["sample_p99_ms"], 3),
    }
    if traj:
        row["transitions_held"] = held
        row["chunk_memory_bytes"] = chunks["memory"]
        row["bytes_per_transition"] = round(chunks["memory"] / max(held, 1), 1)
    if actors:
        row["insert_p50_ms"] = round(results["actors"]["insert_p50_ms"], 3)
        row["insert_p99_ms"] = round(results["actors"]["insert_p99_ms"], 3)
        row["target_inserts_per_s"] = round(per_s * actors) if per_s else None
    log(json.dumps(row))
    return row


def fill_trajectories(rc: ShardedReplayClient, capacity: int, item_bytes: int,
                      episodes: int) -> None:
    """The traj phase's table on every shard, filled through TrajectoryWriter with the
    items the actors' raw requests make (obs, next_obs, action, NSTEP rewards)."""
    create_trajectory_table(rc, TRAJ_TABLE, capacity=capacity)
    rng = np.random.default_rng(3)
    sig = {"obs": ((item_bytes,), np.uint8), "action": ((), np.int64),
           "reward": ((), np.float32)}
    for k in range(episodes):
        w = TrajectoryWriter(rc, f"swarm-fill-{k}", sig)
        for _ in range(BATCH):
            w.append({"obs": rng.integers(0, 256, item_bytes, np.uint8),
                      "action": np.int64(rng.integers(0, 4)), "reward": np.float32(rng.random())})
        h = w.history
        for t in range(BATCH - NSTEP):
            w.create_item(TRAJ_TABLE, float(rng.uniform(0.1, 10)), {
                "obs": h["obs"][t], "next_obs": h["obs"][t + NSTEP],
                "action": h["action"][t], "reward": h["reward"][t:t + NSTEP]})
        w.end_episode()
        w.close()


def start_group(rundir: Path, shards: int) -> list[str]:
    env = dict(os.environ, INREPLAY_RUN_DIR=str(rundir))
    out = subprocess.run([sys.executable, "-m", "pyctl", "start", "--shards", str(shards),
                          "--listen", "127.0.0.1:0", "--daemon", "--seed", "1"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if out.returncode:
        raise RuntimeError(f"pyctl start --shards {shards}: {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        if line.startswith("inreplay: group "):
            return line.removeprefix("inreplay: group ").split(",")
    return [out.stdout.split(" on ")[1].split()[0]]  # one shard: "... listening on H:P"


def stop_group(rundir: Path) -> None:
    env = dict(os.environ, INREPLAY_RUN_DIR=str(rundir))
    subprocess.run([sys.executable, "-m", "pyctl", "stop", "--all"], cwd=ROOT, env=env,
                   capture_output=True, timeout=60)


def configuration(shards: int, args: argparse.Namespace, item_bytes: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="swarm-") as tmp:
        rundir = Path(tmp)
        group = start_group(rundir, shards)
        try:
            rc = ShardedReplayClient(group)
            # the group holds Ape-X's 2M transitions; items beyond the arena evict the oldest
            maxbytes = min(args.capacity * (item_bytes + 16) // shards + (64 << 20), 8 << 30)
            rc.create(TABLE, capacity=args.capacity // shards, maxbytes=maxbytes)
            fill = np.random.default_rng(0).integers(0, 256, (SAMPLE * 4, item_bytes), np.uint8)
            for _ in range(shards * 4):
                rc.add(TABLE, np.random.default_rng(1).uniform(0.1, 10, len(fill)), fill)
            if "traj" in args.phases:
                fill_trajectories(rc, args.capacity // shards, item_bytes, shards * 4)
            rc.close()
            rows = []
            apex_rate = APEX_TRANSITIONS_PER_S / APEX_ACTORS
            for ph in args.phases:
                if ph == "learner":
                    rows.append(phase(group, ph, 0, item_bytes, args.seconds, 0))
                elif ph == "apex":
                    rows.append(phase(group, ph, args.actors, item_bytes, args.seconds,
                                      apex_rate))
                elif ph == "apex10":  # ten times Ape-X's load: the goal
                    rows.append(phase(group, ph, args.actors, item_bytes, args.seconds,
                                      10 * apex_rate))
                elif ph == "max":
                    rows.append(phase(group, ph, args.actors, item_bytes, args.seconds, 0))
                elif ph == "traj":
                    rows.append(phase(group, ph, args.actors, item_bytes, args.seconds, 0,
                                      traj=True))
                else:
                    raise SystemExit(f"unknown phase {ph!r}: use learner, apex, apex10, max "
                                     "or traj")
            base = next((r for r in rows if r["phase"] == "learner"), None)
            for r in rows:
                if base and r is not base and r["phase"] != "traj":  # traj: another sample
                    r["learner_vs_alone"] = round(r["sample_batches_per_s"]
                                                  / base["sample_batches_per_s"], 3)
            return rows
        finally:
            stop_group(rundir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actors", type=int, default=APEX_ACTORS, help="actor connections (360)")
    ap.add_argument("--item-bytes", default="128",
                    help="item sizes, comma-separated (128; Atari: 49392 raw)")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds per phase (20)")
    ap.add_argument("--shards", default="1,2", help="shard counts to run (1,2)")
    ap.add_argument("--phases", default="learner,apex,apex10,max,traj",
                    help="learner (alone), apex (Ape-X's rate), apex10 (ten times it), max (as "
                         "fast as possible), traj (trajectories stored once, as fast as "
                         "possible)")
    ap.add_argument("--capacity", type=int, default=2_000_000,
                    help="transitions the group holds (Ape-X: 2M)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    args.phases = args.phases.split(",")
    rows = []
    for item_bytes in (int(x) for x in args.item_bytes.split(",")):
        for shards in (int(x) for x in args.shards.split(",")):
            rows += configuration(shards, args, item_bytes)
    report = {"machine_cpus": os.cpu_count(), "actors": args.actors, "rows": rows,
              "note": "actors, learner and shards share this machine's cores"}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    else:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
