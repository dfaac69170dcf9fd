"""Compressed Atari transitions on real Breakout frames: size, codec speed, learner rate.

Frames come from ALE/Breakout-v5 through the actors' own preprocessing
(rl.env.make_env: no-op reset, frame skip 4 with max-pooling, 84x84
grayscale, 4-frame stacks, FIRE on start) and n-step transitions
(rl.nstep, n = 3, a lost life ends the n-step return as in the actor). The
policy follows the ball with the paddle (read from the emulator's RAM) and takes
a random action 10% of the time, so episodes last and bricks get broken, as in a
learning agent's replay, rather than a random agent's first few hundred frames.

Measured:

    bytes      per transition: the raw record (7 frames, 49 KB) and the zstd item
               (format 1, rl.codec), as sent and as the appliance's arena holds it
               (8-byte units): mean, p50, p99, max
    codec      encode (the actor: batches of 50) and decode (the learner: batches of
               512, one thread) in µs per transition and per stored frame (7 per
               transition); and the same for a few zstd levels
    learner    decoded transitions/s through the learner's own path: inreplay started
               here, a table filled with the transitions, learner.replay.ApplianceReplay
               sampling batches of 512 on learner.replay.Prefetcher's thread, decoding
               (zstd on 1, and up to 2 decode threads, as many as the prefetcher found
               it needed; raw records for comparison) and
               converting to torch tensors (learner.learner.to_torch, CPU), taken by a
               consumer that does nothing else; the appliance shares the machine

    python bench/compress.py [--transitions N] [--seconds S] [--quick] [--json FILE]

Goals: a Breakout transition stored in at most 8 KB on average, and at
least 10,000 decoded transitions/s with the learner's prefetch on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inreplay.rl.codec import HEADER_BYTES, TransitionCodec, stored_bytes  # noqa: E402
from inreplay.rl.config import preset  # noqa: E402
from inreplay.rl.nstep import NStep, Transition  # noqa: E402

from pyctl.proc import die_with_parent, free_port  # noqa: E402

ENV_ID = "ALE/Breakout-v5"
ACTOR_BATCH = 50
LEARNER_BATCH = 512
GOAL_BYTES = 8 * 1024
GOAL_RATE = 10_000
BREAKOUT_BALL_X, BREAKOUT_PADDLE_X = 99, 72  # RAM addresses


def breakout_transitions(n: int, seed: int = 1, explore: float = 0.1) -> list[Transition]:
    """n n-step transitions of Breakout through the actors' preprocessing: the paddle
    follows the ball, except for a random action with probability ``explore``."""
    from inreplay.rl.env import lives, make_env

    cfg = preset(ENV_ID)
    env = make_env(cfg, seed)
    ale = env.unwrapped.ale  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    nstep = NStep(cfg.n_step, cfg.gamma)
    out: list[Transition] = []
    obs, info = env.reset(seed=seed)
    ep_lives = lives(info)
    try:
        while len(out) < n:
            ram = ale.getRAM()
            ball, paddle = int(ram[BREAKOUT_BALL_X]), int(ram[BREAKOUT_PADDLE_X])
            if rng.random() < explore:
                action = int(rng.integers(4))
            else:  # NOOP, FIRE, RIGHT, LEFT
                action = 2 if ball > paddle + 8 else 3 if ball < paddle + 4 else 0
            nxt, reward, terminated, truncated, info = env.step(action)
            now = lives(info)
            lost, ep_lives = now < ep_lives, now
            out += nstep.step(obs, action, float(np.sign(reward)), nxt, terminated or lost,
                              truncated and not terminated)
            if terminated or truncated:
                obs, info = env.reset()
                ep_lives = lives(info)
            else:
                obs = nxt
    finally:
        env.close()
    return out[:n]


def encode_all(codec: TransitionCodec, ts: list[Transition]) -> tuple[list[Any], float]:
    """Items of every transition, encoded in the actor's batches; (items, seconds)."""
    items: list[Any] = []
    t0 = time.perf_counter()
    for lo in range(0, len(ts), ACTOR_BATCH):
        b = ts[lo:lo + ACTOR_BATCH]
        enc = codec.encode(np.stack([t.obs for t in b]), [t.action for t in b],
                           [t.ret for t in b], [t.discount for t in b],
                           np.stack([t.next_obs for t in b]), [t.steps for t in b])
        items += [bytes(r) for r in enc] if isinstance(enc, np.ndarray) else enc
    return items, time.perf_counter() - t0


def decode_all(codec: TransitionCodec, items: list[Any]) -> float:
    t0 = time.perf_counter()
    for lo in range(0, len(items), LEARNER_BATCH):
        codec.decode(items[lo:lo + LEARNER_BATCH])
    return time.perf_counter() - t0


def stats(sizes: list[int]) -> dict[str, float]:
    a = np.asarray(sizes, dtype=np.float64)
    return {"mean": round(float(a.mean()), 1), "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def codec_numbers(ts: list[Transition], repeats: int) -> tuple[dict[str, Any], list[Any],
                                                               list[Any]]:
    """Sizes and speeds; returns (numbers, zstd items, raw items)."""
    shape = ts[0].obs.shape
    zc = TransitionCodec(shape, np.uint8, 3, compress=True, threads=1)
    rc = TransitionCodec(shape, np.uint8, 3, compress=False, threads=1)
    frames = zc.nframes
    n = len(ts)
    enc = min(encode_all(zc, ts)[1] for _ in range(repeats))
    items, _ = encode_all(zc, ts)
    raw, _ = encode_all(rc, ts)
    dec = min(decode_all(zc, items) for _ in range(repeats))
    # round trip, bit-exact, on every transition
    out = zc.decode(items)
    assert np.array_equal(out.obs, np.stack([t.obs for t in ts]))
    assert np.array_equal(out.next_obs, np.stack([t.next_obs for t in ts]))
    levels = []
    for level in (1, 3, 6, 9):
        lc = TransitionCodec(shape, np.uint8, 3, compress=True, level=level, threads=1)
        le = min(encode_all(lc, ts)[1] for _ in range(repeats))
        litems, _ = encode_all(lc, ts)
        ld = min(decode_all(lc, litems) for _ in range(repeats))
        levels.append({"level": level,
                       "bytes_mean": round(float(np.mean([len(i) for i in litems])), 1),
                       "encode_us_per_frame": round(le / n / frames * 1e6, 2),
                       "decode_us_per_frame": round(ld / n / frames * 1e6, 2)})
    sizes = [len(i) for i in items]
    numbers = {
        "transitions": n,
        "frames_per_transition": frames,
        "steps_k": {str(k): int(v) for k, v in zip(*np.unique([t.steps for t in ts],
                                                               return_counts=True),
                                                   strict=True)},
        "raw_bytes": rc.itemsize,
        "zstd_level": zc.level,
        "zstd_bytes": stats(sizes),
        "zstd_stored_bytes": stats([stored_bytes(s) for s in sizes]),
        "header_bytes": HEADER_BYTES,
        "ratio": round(rc.itemsize / float(np.mean(sizes)), 1),
        "encode_us_per_transition": round(enc / n * 1e6, 1),
        "encode_us_per_frame": round(enc / n / frames * 1e6, 2),
        "decode_us_per_transition": round(dec / n * 1e6, 1),
        "decode_us_per_frame": round(dec / n / frames * 1e6, 2),
        "levels": levels,
    }
    return numbers, items, raw


# --------------------------------------------------------------------------
# the learner's path, against an appliance started here
# --------------------------------------------------------------------------


@contextlib.contextmanager
def appliance(workdir: Path) -> Any:
    """inreplay on the kernel stack (python -m pyctl start), stopped with SIGTERM."""
    import redis

    port = free_port()
    env = dict(os.environ, INREPLAY_RUN_DIR=str(workdir / "run"),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    log = open(workdir / "inreplay.log", "wb")  # closed below
    proc = subprocess.Popen([sys.executable, "-m", "pyctl", "start", "--listen",
                             f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                redis.Redis(port=port, protocol=2, socket_timeout=2).ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (workdir / "inreplay.log").read_text(errors="replace")[-500:]
                    raise RuntimeError(f"inreplay did not start: {tail.strip()}") from None
                time.sleep(0.05)
        yield port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def learner_rate(port: int, table: str, items: list[Any], fill: int, threads: int,
                 seconds: float, obs_shape: tuple[int, ...]) -> dict[str, Any]:
    """Decoded transitions/s through ApplianceReplay + Prefetcher + to_torch."""
    import torch
    from inreplay.learner.learner import to_torch
    from inreplay.learner.replay import ApplianceReplay, Prefetcher

    from pyctl.client import ReplayClient

    cfg = preset(ENV_ID, port=port, table=table, capacity=fill,
                 replay_maxbytes=max(1 << 20, 2 * fill * stored_bytes(max(map(len, items)))),
                 frames_once=False)  # this bench measures the zstd records path
    codec = TransitionCodec(obs_shape, np.uint8, cfg.n_step, threads=threads)
    with ReplayClient(port=port) as rc:
        if table not in rc.tables():
            rc.create(table, fill, maxbytes=cfg.replay_maxbytes)
            rng = np.random.default_rng(0)
            for lo in range(0, fill, 256):
                chunk = [items[i % len(items)] for i in range(lo, min(fill, lo + 256))]
                rc.add(table, rng.uniform(0.1, 1.0, len(chunk)), chunk)
    replay = ApplianceReplay(cfg, codec)
    cpu = torch.device("cpu")
    prefetch = Prefetcher(replay, LEARNER_BATCH, cfg.beta, cfg.prefetch,
                          lambda s: to_torch(s, cpu)).start()
    try:
        prefetch.get(timeout=60)  # warm: connections, the decode pool
        t0, got = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            got += len(prefetch.get(timeout=60).ids)
        dt = time.perf_counter() - t0
    finally:
        prefetch.close()
        replay.close()
        codec.close()
    return {"table_items": fill, "decode_threads": threads,
            "decode_threads_used": prefetch.most_parallel, "batch": LEARNER_BATCH,
            "transitions": got, "seconds": round(dt, 2),
            "transitions_per_s": round(got / dt, 0)}


def learner_numbers(items: list[Any], raw: list[Any], seconds: float, fill: int,
                    obs_shape: tuple[int, ...]) -> list[dict[str, Any]]:
    runs = []
    with tempfile.TemporaryDirectory(prefix="compress-bench-") as tmp, \
            appliance(Path(tmp)) as port:
        for threads in (1, 2):
            r = learner_rate(port, "zstd", items, fill, threads, seconds, obs_shape)
            runs.append({"format": "zstd", **r})
            print(f"learner, zstd, up to {threads} decode thread(s) ({r['decode_threads_used']} "
                  f"used): {r['transitions_per_s']:,.0f} transitions/s", flush=True)
        raw_fill = min(fill, 4000)  # 49 KB each: 200 MB
        r = learner_rate(port, "raw", raw, raw_fill, 1, seconds, obs_shape)
        runs.append({"format": "raw", **r})
        print(f"learner, raw records: {r['transitions_per_s']:,.0f} transitions/s", flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/compress.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transitions", type=int, default=3000,
                   help="Breakout transitions to collect (default 3000)")
    p.add_argument("--seconds", type=float, default=8.0,
                   help="seconds of each learner measurement (default 8)")
    p.add_argument("--fill", type=int, default=20_000,
                   help="items in the appliance's table (the transitions, repeated)")
    p.add_argument("--quick", action="store_true", help="small sizes, for tests")
    p.add_argument("--json", metavar="FILE", help="write the numbers here")
    args = p.parse_args(argv)
    if args.quick:
        args.transitions, args.seconds, args.fill = 600, 1.5, 2000
    repeats = 2 if args.quick else 3
    t0 = time.monotonic()
    ts = breakout_transitions(args.transitions)
    gather_s = time.monotonic() - t0
    codec, items, raw = codec_numbers(ts, repeats)
    z = codec["zstd_bytes"]
    print(f"{len(ts)} Breakout transitions ({gather_s:.0f} s): raw {codec['raw_bytes']:,} B, "
          f"zstd level {codec['zstd_level']} mean {z['mean']:,.0f} B (p99 {z['p99']:,.0f}, "
          f"max {z['max']:,.0f}), {codec['ratio']}x; encode {codec['encode_us_per_frame']} "
          f"µs/frame, decode {codec['decode_us_per_frame']} µs/frame", flush=True)
    for lv in codec["levels"]:
        print(f"  level {lv['level']}: {lv['bytes_mean']:,.0f} B, encode "
              f"{lv['encode_us_per_frame']} µs/frame, decode {lv['decode_us_per_frame']} "
              f"µs/frame")
    runs = learner_numbers(items, raw, args.seconds, args.fill, ts[0].obs.shape)
    best = max(r["transitions_per_s"] for r in runs if r["format"] == "zstd")
    stored = codec["zstd_stored_bytes"]["mean"]
    doc = {
        "env": ENV_ID,
        "policy": "follow the ball, 10% random actions",
        "codec": codec,
        "learner": runs,
        "goals": {
            "bytes_per_transition": {"goal": GOAL_BYTES, "measured": stored,
                                     "met": stored <= GOAL_BYTES},
            "learner_transitions_per_s": {"goal": GOAL_RATE, "measured": best,
                                          "met": best >= GOAL_RATE},
        },
        "capacity_2m_gib": round(2_000_000 * stored / 2**30, 2),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "machine": platform.machine()},
        "wall_s": round(time.monotonic() - t0, 1),
    }
    for name, g in doc["goals"].items():
        print(f"{'PASS' if g['met'] else 'NOT MET'}: {name} {g['measured']:,.0f} "
              f"(goal {'<=' if name.startswith('bytes') else '>='} {g['goal']:,})")
    print(f"2,000,000 transitions take {doc['capacity_2m_gib']} GiB of arena")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
