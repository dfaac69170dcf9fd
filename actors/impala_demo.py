"""IMPALA's demo (``pyctl demo --algo impala``, ``python -m inreplay.actors.impala``): the
appliance with a ``QUEUE`` table, the learner (learner.impala) and ``num_actors``
actors (actors.impala) as processes, the newest parameters judged by the solve rule
every demo shares (rl.harness: a greedy screen, then ``eval_episodes`` on fresh seeds;
a mean of at least the solve return, 475 for CartPole-v1, is solved); writes
DIR/summary.json and prints ``solved: true`` or ``solved: false`` last.

    python -m inreplay.actors.impala [--out DIR] [--minutes M] [--stack auto|kernel|dpdk]
                                     [--FLAG V ...]

Espeholt et al. 2018: actors play with the newest published policy and push unrolls of
``unroll`` steps (obs, actions, rewards, dones, behaviour logits and the bootstrap obs)
into a FIFO queue, ``REPLAY.CREATE <t> QUEUE n``: each unroll is consumed once, an
actor's insert into a full queue waits and the learner's sample from an empty one waits.
The learner takes ``batch_size`` unrolls per step, corrects for the policy lag with
V-trace targets (truncation rho_bar = c_bar = 1), trains and publishes the parameters as
the Ape-X demo does (a checked float32 blob SET with its version and announced on pub/sub).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from inreplay.rl.config import Keys
from inreplay.rl.harness import Run, SolveRule, machine
from inreplay.rl.impala import ImpalaConfig, child_argv, parse, redis_for
from inreplay.rl.model import pull_blob
from inreplay.rl.networks import ActorCritic, env_dims

from pyctl.client import ReplayClient

QUEUE_FIELDS = ("size", "capacity", "queue_size", "inserts", "samples", "sample_calls",
                "consumed", "evictions", "blocked_samplers", "blocked_inserters",
                "waited_seconds", "sampler", "remover", "max_times_sampled")
"""The QUEUE table's REPLAY.INFO fields the summary keeps."""


def train_and_evaluate(run: Run, cfg: ImpalaConfig, updates: int) -> dict[str, Any]:
    host, port = run.start_appliance()
    cfg = replace(cfg, host=host, port=port)
    run.line.say(f"IMPALA with {cfg.num_actors} actors x {cfg.envs_per_actor} environments, "
                 f"unrolls of {cfg.unroll}, batches of {cfg.batch_size}, QUEUE {cfg.queue_size}")
    keys = Keys(cfg.prefix)
    r = redis_for(cfg)
    rc = ReplayClient(connection=r)
    r.delete(*keys.all())
    rc.create(cfg.table, cfg.queue_size, queue=True)
    obs_dim, n_actions = env_dims(cfg.env_id)
    model = ActorCritic(obs_dim, n_actions, cfg.hidden).eval()
    run.spawn("learner", child_argv(cfg, "learner"))
    for i in range(cfg.num_actors):
        run.spawn(f"actor {i}", child_argv(cfg, "actor", i))
    returns: list[float] = []
    first: tuple[float, int, int] | None = None  # (time, frames, unrolls consumed)

    def poll() -> dict[str, int]:
        frames, unrolls, consumed, version = r.mget(keys.frames, keys.transitions,
                                                    keys.samples, keys.version)
        returns.extend(float(x.split()[2]) for x in r.lrange(keys.returns, len(returns), -1))
        return {"frames": int(frames or 0), "unrolls": int(unrolls or 0),
                "consumed": int(consumed or 0), "version": int(version or 0)}

    def status() -> tuple[str, int, int]:
        nonlocal first
        st = poll()
        if first is None and st["consumed"]:
            first = (time.monotonic(), st["frames"], st["consumed"])
        recent = returns[-100:]
        return (f"[{run.elapsed():6.1f}s] actors {st['frames']:>8} steps | learner "
                f"{st['consumed'] // cfg.batch_size:>6} steps | params v{st['version']} | "
                f"return(100) {np.mean(recent) if recent else float('nan'):6.1f} "
                f"({len(returns)} episodes)", st["version"], st["consumed"] // cfg.batch_size)

    def pull() -> int:
        got = pull_blob(r, model, keys.params, keys.version, say=run.line.say)
        return int(got[0] or 0) if got else 0

    rule = SolveRule.of(cfg)
    play = run.greedy(model, cfg.env_config())
    deadline = run.end - min(20.0, 0.1 * run.budget_s)
    solved = run.solve(rule, play, pull=pull, status=status, deadline=deadline,
                       updates=updates)
    end = time.monotonic()
    run.stop_children()  # the actors and the learner stop before the last evaluation
    st = poll()  # final counts; the learner may have taken one batch it did not count
    info = rc.info(cfg.table)
    result = run.final(rule, play, pull=pull, solved=solved)
    torch.save({"model": model.state_dict(), "config": asdict(cfg),
                "params_version": result["version"]}, run.out / "evaluated.pt")
    r.close()
    span = end - first[0] if first else 0.0
    return {
        "algo": "impala", "env": cfg.env_id, **run.verdict(rule, result),
        "env_steps": st["frames"], "unrolls_inserted": st["unrolls"],
        "unrolls_consumed": st["consumed"], "learner_steps": st["consumed"] // cfg.batch_size,
        "learner_steps_per_s": round((st["consumed"] - first[2]) / cfg.batch_size / span, 2)
        if first and span > 0 else 0.0,
        "env_steps_per_s": round((st["frames"] - first[1]) / span, 1) if first and span > 0
        else 0.0,
        "episodes": len(returns), "return_mean_100": float(np.mean(returns[-100:]))
        if returns else None,
        "queue": {k: info.get(k) for k in QUEUE_FIELDS},
        "evaluations": run.evals,
        "machine": machine(torch=torch.__version__),
        "config": asdict(cfg),
    }


def report(s: dict[str, Any]) -> str:
    q = s["queue"]
    return (f"{s['env']} on the {s['stack']} stack: evaluation "
            f"{s['eval_return_mean'] or float('nan'):.1f} over {s['eval_episodes']} "
            f"episodes after {s['learner_steps']} learner steps "
            f"({s['learner_steps_per_s']:.1f}/s) and {s['env_steps']} env steps in "
            f"{s['wall_s']:.0f} s; queue: {q['inserts']:.0f} unrolls in, "
            f"{q['consumed']:.0f} consumed, actors waited {q['waited_seconds']:.1f} s")


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse(argv, __doc__)
    torch.set_num_threads(1)
    run = Run("impala", Path(args.out), args.minutes, args.stack)
    return run.main(lambda r: train_and_evaluate(r, cfg, args.updates), report)


if __name__ == "__main__":
    sys.exit(main())

