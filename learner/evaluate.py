"""Evaluate a policy: greedy (or epsilon-greedy) episodes with unclipped, full-game returns.

    python -m inreplay.learner.evaluate out/demo/checkpoint.pt [--episodes 20] [--epsilon 0]

Loads a checkpoint the learner wrote (``torch.load(weights_only=True)``: tensors
and plain values only) and prints the mean return.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from dataclasses import replace

import numpy as np
import torch
from inreplay.actors.config import Config, Parser, fail
from inreplay.actors.env import env_spec, make_env
from inreplay.actors.model import build_model
from torch import nn


def run_episodes(model: nn.Module, cfg: Config, episodes: int, *, seed: int = 10_000,
                 epsilon: float = 0.0, deadline: float | None = None,
                 stop_below: float | None = None) -> list[float]:
    """Play up to ``episodes`` full games (no episodic life, no reward clipping).

    Stops early at ``deadline`` (time.monotonic()) or, with ``stop_below``, after
    the first episode whose return is below it. Returns the finished episodes' returns.
    """
    env = make_env(replace(cfg, episodic_life=False), seed)
    rng = np.random.default_rng(seed)
    n_actions = int(env.action_space.n)  # type: ignore[attr-defined]
    out: list[float] = []
    try:
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed + ep)
            total = 0.0
            while True:
                if epsilon > 0 and rng.random() < epsilon:
                    action = int(rng.integers(n_actions))
                else:
                    with torch.inference_mode():
                        q = model(torch.from_numpy(np.asarray(obs)[None]))
                    action = int(q[0].argmax())
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                if terminated or truncated:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    return out
            out.append(total)
            if stop_below is not None and total < stop_below:
                break
            if deadline is not None and time.monotonic() > deadline:
                break
    finally:
        env.close()
    return out


def load_checkpoint(path: str) -> tuple[nn.Module, Config, dict[str, int]]:
    ck = torch.load(path, map_location="cpu", weights_only=True)
    cfg = Config.from_dict(ck["config"])
    model = build_model(env_spec(cfg), cfg.hidden)
    model.load_state_dict(ck["model"])
    model.eval()
    return model, cfg, {"learner_steps": int(ck["learner_steps"]),
                        "params_version": int(ck["params_version"])}


def main(argv: list[str] | None = None) -> int:
    prog = "python -m inreplay.learner.evaluate"
    p = Parser(prog=prog, description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="checkpoint.pt written by the learner")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--epsilon", type=float, default=None, help="default: the config's")
    p.add_argument("--seed", type=int, default=10_000)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    try:
        model, cfg, meta = load_checkpoint(args.checkpoint)
    except OSError as e:
        return fail(prog, f"{args.checkpoint}: {e.strerror or e}")
    except (ValueError, KeyError, RuntimeError, pickle.UnpicklingError) as e:
        return fail(prog, f"{args.checkpoint}: not a learner checkpoint "
                          f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else e!r})")
    eps = cfg.eval_epsilon if args.epsilon is None else args.epsilon
    t0 = time.monotonic()
    rets = run_episodes(model, cfg, args.episodes, seed=args.seed, epsilon=eps)
    res = {"env": cfg.env_id, **meta, "episodes": len(rets), "epsilon": eps,
           "return_mean": float(np.mean(rets)), "return_min": float(np.min(rets)),
           "return_max": float(np.max(rets)), "seconds": round(time.monotonic() - t0, 2)}
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{cfg.env_id}: {len(rets)} episodes, epsilon {eps}: mean return "
              f"{res['return_mean']:.1f} (min {res['return_min']:g}, max {res['return_max']:g})"
              f", learner step {meta['learner_steps']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
