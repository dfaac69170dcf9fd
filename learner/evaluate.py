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

import numpy as np
import torch
from inreplay.rl.config import Config, Parser, fail
from inreplay.rl.env import env_spec
from inreplay.rl.evaluate import run_episodes
from inreplay.rl.model import build_model
from torch import nn


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
