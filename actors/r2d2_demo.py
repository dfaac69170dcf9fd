"""R2D2's demo (``pyctl demo --algo r2d2``, ``python -m inreplay.actors.r2d2``): a recurrent
DQN on CartPole-v1 with the velocities hidden, through the replay appliance.

    python -m inreplay.actors.r2d2 --out DIR [--minutes M] [--stack auto|kernel|dpdk] [--actors N]
                          [--seq-len L --period P --burn-in B ...any R2D2Config field]

Recurrent Replay Distributed DQN (Kapturowski et al. 2019), in four modules:
rl.r2d2 (the settings, CartPole without velocities, the sequence layout),
rl.networks (:class:`RecurrentQNet`, :class:`StepPolicy`), actors.r2d2 (the actor and
its sequence writers) and learner.r2d2 (burn-in, n-step double-Q targets under h(x),
mixed priorities). This module starts the appliance, the learner and N actors on the
demo harness (rl.harness), evaluates with the shared solve rule, writes
``DIR/summary.json`` and prints ``solved: true|false`` last.

Replay goes through the appliance: one prioritized TRAJECTORY table (``REPLAY.CREATE ...
ALPHA 0.9 BETA 0.6 MIN_SIZE ... TRAJECTORY``; samples per insert kept by the clients, see
:func:`rl.r2d2.limiter_holds`) whose items reference steps stored once (an actor
appends each step once, with :class:`pyctl.trajectory.TrajectoryWriter`, and the learner
gets each column of 64 sequences in one REPLAY.SAMPLE,
:func:`pyctl.trajectory.sample_trajectories`); ``--storage packed`` stores each sequence
as one item packed by a :class:`pyctl.client.Schema` instead, with the server's own
SAMPLES_PER_INSERT limiter. ``summary.json``'s ``storage`` compares the bytes the
appliance holds per step with the packed form's. Parameters go through the appliance as
in the Ape-X demo (the learner SETs the blob and PUBLISHes its version in one
MULTI/EXEC, actors listen with :class:`actors.actor.ParamUpdates`; blob format:
:mod:`rl.model`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from inreplay.rl.config import appliance_password
from inreplay.rl.harness import Run, SolveRule, machine
from inreplay.rl.networks import RecurrentQNet, StepPolicy
from inreplay.rl.r2d2 import (
    NETNS,
    SUBNET,
    R2D2Config,
    build_net,
    child_argv,
    keys_of,
    make_env,
    parse,
    sequence_schema,
)


def evaluate(net: RecurrentQNet, cfg: R2D2Config, episodes: int, seed: int,
             stop_below: float | None = None, deadline: float = math.inf) -> list[float]:
    """Greedy episodes (the recurrent state carried through each) on fresh seeds seed,
    seed + 1, ...; stops after the first return below ``stop_below`` or at ``deadline``.
    Acts through :class:`StepPolicy`, as the actors do."""
    env = make_env(cfg)
    policy = StepPolicy(net)
    out: list[float] = []
    try:
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed + ep)
            state, prev, total = policy.initial_state(), 0, 0.0
            while True:
                q, state = policy.step(obs, prev, state)
                prev = int(q.argmax())
                obs, reward, terminated, truncated, _ = env.step(prev)
                total += float(reward)
                if terminated or truncated or time.monotonic() > deadline:
                    break
            if time.monotonic() > deadline:
                break
            out.append(total)
            if stop_below is not None and total < stop_below:
                break
    finally:
        env.close()
    return out


def storage_stats(r: Any, cfg: R2D2Config, env_steps: int, item_bytes: int) -> dict[str, Any]:
    """Bytes the appliance holds per environment step of the live sequences, as the server
    counts them: the table's records (REPLAY.INFO bytes_used: whole packed sequences, or
    a TRAJECTORY item's references) plus, for trajectories, the chunk store (REPLAY.CHUNKS
    memory: chunk bytes, chunk headers, the streams). Live steps are env_steps x size /
    inserts (all of them until the table evicts). ``packed_bytes_per_step`` is what the
    packed form takes for the same live sequences: measured in a packed run, otherwise
    their count x the packed item's bytes (what a packed table's bytes_used counts for
    them) over the same steps."""
    from pyctl.errors import decode_info
    from pyctl.trajectory import chunk_stats

    info = decode_info(r.execute_command("REPLAY.INFO", cfg.table))
    size, inserts = int(info["size"]), int(info["inserts"])
    chunks = chunk_stats(r) if cfg.storage == "trajectory" else {}
    stored = int(info["bytes_used"]) + int(chunks.get("memory", 0))
    live = env_steps * size / inserts if inserts else 0.0
    per_step = round(stored / live, 1) if live else None
    out: dict[str, Any] = {
        "mode": cfg.storage, "items": size, "items_inserted": inserts,
        "live_env_steps": round(live), "table_bytes": int(info["bytes_used"]),
        "chunk_memory": int(chunks.get("memory", 0)), "chunks": int(chunks.get("chunks", 0)),
        "chunk_references": int(chunks.get("references", 0)),
        "bytes_per_step": per_step,
        "packed_item_bytes": item_bytes,
        "packed_bytes_per_step": per_step if cfg.storage == "packed" or not live
        else round(size * item_bytes / live, 1),
    }
    if cfg.storage == "trajectory" and per_step:
        out["vs_packed"] = round(per_step / out["packed_bytes_per_step"], 3)
    return out


def train_and_evaluate(run: Run, cfg: R2D2Config, updates: int) -> dict[str, Any]:
    from inreplay.rl.model import pull_blob

    from pyctl.client import connect

    host, port = run.start_appliance()
    cfg = dataclasses.replace(cfg, host=host, port=port)
    keys = keys_of(cfg)
    r = connect(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                password=appliance_password())
    path = run.out / "config.json"
    path.write_text(json.dumps(asdict(cfg), indent=1))
    run.spawn("learner", child_argv(path, "learner"))
    for i in range(cfg.num_actors):
        run.spawn(f"actor {i}", child_argv(path, "actor", i))
    run.line.say(f"learner and {cfg.num_actors} actors started; logs in {run.out}/")
    net = build_net(cfg).eval()
    item_bytes = sequence_schema(cfg, net.torso[0].in_features - net.n_actions).itemsize
    first: tuple[float, int] | None = None
    steps_rate = 0.0

    def counters() -> tuple[int, int, int, int]:
        frames, samples, version = r.mget(keys.frames, keys.samples, keys.version)
        return int(frames or 0), int(samples or 0), int(version or 0), r.llen(keys.returns)

    def status() -> tuple[str, int, int]:
        nonlocal first, steps_rate
        frames, samples, version, episodes = counters()
        now = time.monotonic()
        if samples and first is None:
            first = (now, samples)
        if first and now - first[0] > 1.0:
            steps_rate = (samples - first[1]) / cfg.batch_size / (now - first[0])
        recent = [float(x.split()[2]) for x in r.lrange(keys.returns, -20, -1)]
        # no screen before the learner's first step (its first version is the untrained net)
        return (f"[{run.elapsed():6.1f}s] actors {frames} steps, {episodes} episodes (last 20: "
                f"mean {np.mean(recent) if recent else 0:.0f}) | learner "
                f"{samples // cfg.batch_size} steps ({steps_rate:.1f}/s) | params v{version}",
                version if samples else 0, samples // cfg.batch_size)

    def pull() -> int:
        got = pull_blob(r, net, keys.params, keys.version, say=run.line.say)
        return int(got[0] or 0) if got else 0

    def pull_last() -> int:
        """The learner's checkpoint (written on SIGTERM, with its last parameters)."""
        ck = run.out / "checkpoint.pt"
        if not ck.exists():
            return 0
        net.load_state_dict(torch.load(ck, weights_only=True)["model"])
        return counters()[2]

    def play(episodes: int, seed: int, stop_below: float | None,
             deadline: float) -> list[float]:
        return evaluate(net, cfg, episodes, seed, stop_below, deadline)

    rule = SolveRule.of(cfg)
    solved = run.solve(rule, play, pull=pull, status=status, deadline=run.end - 20.0,
                       updates=updates)
    if solved is not None:
        torch.save({"model": net.state_dict(), "config": asdict(cfg),
                    "params_version": solved["version"]}, run.out / "evaluated.pt")
    frames, samples, version, episodes = counters()
    sequences = int(r.get(keys.transitions) or 0)
    storage = storage_stats(r, cfg, frames, item_bytes)
    r.set(keys.stop, 1)
    run.stop_children()
    result = run.final(rule, play, pull=pull_last, solved=solved,
                       until=time.monotonic() + 15.0)
    r.close()
    return {
        "algo": "r2d2", "env": f"{cfg.env_id} (velocities hidden)", **run.verdict(rule, result),
        "stack_requested": run.stack_requested, "env_steps": frames, "episodes": episodes,
        "learner_steps": samples // cfg.batch_size, "learner_samples": samples,
        "learner_steps_per_s": round(steps_rate, 2), "params_version": version,
        "sequence": {"seq_len": cfg.seq_len, "period": cfg.period, "burn_in": cfg.burn_in},
        "sequences_inserted": sequences,
        "samples_per_insert": round(samples / sequences, 2) if sequences else None,
        "storage": storage,
        "stored_bytes_per_step": storage["bytes_per_step"],
        "evaluations": run.evals,
        "machine": machine(torch=torch.__version__),
        "config": asdict(cfg),
    }


def report(s: dict[str, Any]) -> str:
    return (f"R2D2 on {s['env']}, {s['stack']} stack: evaluation "
            f"{s['eval_return_mean'] or float('nan'):.1f} over {s['eval_episodes']} "
            f"episodes after {s['learner_steps']} learner steps "
            f"({s['learner_steps_per_s']:.1f}/s) and {s['env_steps']} env steps in "
            f"{s['wall_s']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse(argv, __doc__)
    torch.set_num_threads(1)
    out = Path(cfg.out_dir)
    for stale in ("checkpoint.pt", "evaluated.pt"):
        (out / stale).unlink(missing_ok=True)
    run = Run("r2d2 demo", out, args.minutes, args.stack, netns_name=NETNS, subnet=SUBNET,
              stop_timeout=20.0)
    return run.main(lambda r: train_and_evaluate(r, cfg, args.updates), report)


if __name__ == "__main__":
    sys.exit(main())
