"""RLlib DQN's learner steps/s with RLlib's own buffer against the same code on inreplay.

    python bench/integrations_rllib.py [--env-steps 20000] [--repeats 2] [--json FILE]

``rllib()`` runs ``integrations.rllib_dqn.run`` on CartPole-v1 with
``PrioritizedEpisodeReplayBuffer`` (in the algorithm's process) and with
``InreplayEpisodeReplayBuffer`` (a private kernel-stack appliance on loopback),
alternating local, inreplay, local, ... so both see the same machine load; each run
does the same work (``env_steps`` environment steps, no greedy evaluation). One JSON
row per run: learner steps/s (learner updates per second of ``algo.train()`` time),
env steps, RLlib's smoothed per-call timers (seconds) for the buffer's add, sample
and priority update, and the learner update. The summary row has each buffer's median
and the inreplay/local ratio. The lead wires this into bench/integrations.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rllib(env_steps: int = 20_000, repeats: int = 2, env_runners: int = 2,
          seed: int = 0) -> list[dict[str, Any]]:
    """JSON rows: one per run (buffers interleaved), then a summary row (the caller prints
    them: bench/integrations.py prints every integration's rows once)."""
    from inreplay.integrations.rllib_dqn import private_server, run

    rows: list[dict[str, Any]] = []
    with private_server() as address:
        for rep in range(repeats):
            for buffer in ("local", "inreplay"):
                r = run(buffer, address=address if buffer == "inreplay" else None,
                        env_runners=env_runners, seed=seed + rep, max_env_steps=env_steps,
                        minutes=60.0, quiet=True, evaluate=False)
                rows.append({"bench": "rllib", "repeat": rep, **asdict(r)})
    med = {b: round(statistics.median(r["learner_steps_per_s"] for r in rows
                                      if r["buffer"] == b), 2)
           for b in ("local", "inreplay")}
    summary = {"bench": "rllib", "summary": True, "env_steps": env_steps, "repeats": repeats,
               "env_runners": env_runners,
               "learner_steps_per_s_local": med["local"],
               "learner_steps_per_s_inreplay": med["inreplay"],
               "inreplay_over_local": round(med["inreplay"] / med["local"], 3)
               if med["local"] else None}
    rows.append(summary)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env-steps", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--env-runners", type=int, default=2)
    p.add_argument("--json", type=Path, help="write the rows here")
    a = p.parse_args(argv)
    if a.env_steps < 2000 or a.repeats < 1:
        p.error("--env-steps must be >= 2000 (learning starts at 1000) and --repeats >= 1")
    rows = rllib(a.env_steps, a.repeats, a.env_runners)
    for row in rows:
        print(json.dumps(row), flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
