"""Learner steps/s of RL libraries' own replay buffers against the same code on inreplay.

    python bench/integrations.py --torchrl [--steps N] [--rounds R] [--json FILE]

One function per integration (``bench_torchrl``; RLlib's goes beside it as
``bench_rllib`` behind ``--rllib``), each returning JSON rows; the shared CLI runs the
selected ones in one run and prints one JSON row per line (and writes them all to
``--json``). Within an integration the local and inreplay runs alternate (A/B rounds,
same seed, same step count, no early stop), so a busy machine slows both alike; the
last row of each integration is a summary with the medians and their ratio.
``--json`` writes ``{commit, when, machine, steps, rounds, seconds, rows}``, which
``bench/report.py --integrations`` turns into the integrations page's block.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path[0] != str(ROOT):  # `integrations` is the package at the root, not this file
    sys.path.insert(0, str(ROOT))
Row = dict[str, Any]


def _module_run(module: str, args: list[str], json_path: Path, timeout: float) -> Row:
    """python -m module args --json-out json_path, from the repository root; its summary."""
    out = subprocess.run([sys.executable, "-m", module, *args, "--json-out", str(json_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed ({out.returncode}):\n"
                           f"{out.stderr[-2000:]}")
    return json.loads(json_path.read_text())


def bench_torchrl(steps: int, rounds: int) -> list[Row]:
    """integrations.torchrl_dqn (DQN on CartPole-v1, a TorchRL TensorDictReplayBuffer)
    with --buffer local (TorchRL's LazyTensorStorage + PrioritizedSampler) and --buffer
    inreplay (InreplayStorage + InreplaySampler on a server the run starts itself);
    then the buffer alone (sample + priority update, no network training)."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for buffer in ("local", "inreplay"):
                s = _module_run("inreplay.integrations.torchrl_dqn",
                                ["--buffer", buffer, "--total-steps", str(steps),
                                 "--solve-return", "1e9", "--seed", "1"],
                                Path(tmp) / f"{buffer}{r}.json", timeout=3600)
                rows.append({"integration": "torchrl", "buffer": buffer, "round": r,
                             "env_steps": s["env_steps"], "learner_steps": s["learner_steps"],
                             "learner_steps_per_s": round(s["learner_steps_per_s"], 1),
                             "wall_s": round(s["wall_s"], 1),
                             "last_eval": s["evals"][-1][1] if s["evals"] else None})
    med = {b: statistics.median(x["learner_steps_per_s"] for x in rows if x["buffer"] == b)
           for b in ("local", "inreplay")}
    rows += _torchrl_buffer_only(rounds)
    rows.append({"integration": "torchrl", "summary": True, "rounds": rounds,
                 "env_steps": steps, "local_learner_steps_per_s": round(med["local"], 1),
                 "inreplay_learner_steps_per_s": round(med["inreplay"], 1),
                 "inreplay_over_local": round(med["inreplay"] / med["local"], 3)})
    return rows


def _torchrl_buffer_only(rounds: int, steps: int = 200) -> list[Row]:
    """The buffer alone: one learner step is sample(64) + update_tensordict_priority on
    a TensorDictReplayBuffer holding 10,240 CartPole transitions, local (TorchRL's
    LazyTensorStorage + PrioritizedSampler) and inreplay (a server started here),
    interleaved; wall and this process's CPU time per step (the server's CPU is not
    counted: it runs in its own process)."""
    import time

    import torch
    from inreplay.integrations import torchrl_trees
    from inreplay.integrations.torchrl import InreplaySampler, InreplayStorage, connect
    from inreplay.integrations.torchrl_dqn import start_server
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, PrioritizedSampler, TensorDictReplayBuffer

    torchrl_trees.ensure()
    torch.set_num_threads(1)
    cap = 50_000
    server, address = start_server()
    try:
        buffers = {
            "local": TensorDictReplayBuffer(
                storage=LazyTensorStorage(cap), priority_key="td_error", batch_size=64,
                sampler=PrioritizedSampler(cap, alpha=0.6, beta=0.4, eps=1e-6)),
            "inreplay": TensorDictReplayBuffer(
                storage=InreplayStorage(cap, client=connect(address), table="bench"),
                sampler=InreplaySampler(cap, alpha=0.6, beta=0.4, eps=1e-6),
                priority_key="td_error", batch_size=64)}
        for rb in buffers.values():
            for _ in range(40):
                rb.extend(TensorDict({
                    "observation": torch.randn(256, 4), "action": torch.randint(2, (256,)),
                    "reward": torch.randn(256), "next_observation": torch.randn(256, 4),
                    "terminated": torch.zeros(256, dtype=torch.bool)}, batch_size=[256]))
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in buffers}
        for _ in range(max(3, 2 * rounds + 1)):
            for name, rb in buffers.items():
                t, c = time.perf_counter(), time.process_time()
                for _ in range(steps):
                    batch = rb.sample()
                    batch["td_error"] = torch.rand(64)
                    rb.update_tensordict_priority(batch)
                times[name].append(((time.perf_counter() - t) / steps * 1e6,
                                    (time.process_time() - c) / steps * 1e6))
    finally:
        server.terminate()
        server.wait(30)
    return [{"integration": "torchrl", "buffer_only": True, "buffer": name,
             "batch": 64, "items": 10_240, "repeats": len(v),
             "wall_us_per_step": round(statistics.median(x[0] for x in v), 1),
             "client_cpu_us_per_step": round(statistics.median(x[1] for x in v), 1),
             "steps_per_s": round(1e6 / statistics.median(x[0] for x in v), 1)}
            for name, v in times.items()]


def bench_rllib(steps: int, rounds: int) -> list[Row]:
    """RLlib DQN on CartPole-v1: learner steps/s with RLlib's local prioritized episode
    buffer and with inreplay's (bench/integrations_rllib.py), interleaved in one run."""
    from bench.integrations_rllib import rllib

    return rllib(env_steps=steps, repeats=rounds)


INTEGRATIONS: dict[str, Callable[[int, int], list[Row]]] = {"torchrl": bench_torchrl,
                                                            "rllib": bench_rllib}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in INTEGRATIONS:
        p.add_argument(f"--{name}", action="store_true", help=INTEGRATIONS[name].__doc__)
    p.add_argument("--steps", type=int, default=25_600,
                   help="environment steps per run (default 25600)")
    p.add_argument("--rounds", type=int, default=3,
                   help="A/B rounds per integration (default 3)")
    p.add_argument("--json", default="", help="also write every row to this file")
    a = p.parse_args(argv)
    chosen = [n for n in INTEGRATIONS if getattr(a, n)]
    if not chosen:
        p.error("choose at least one of " + ", ".join(f"--{n}" for n in INTEGRATIONS))
    if a.steps <= 0 or a.rounds <= 0:
        p.error("--steps and --rounds must be positive")
    import os
    import time

    from bench.latency import commit_label, machine

    doc: dict[str, Any] = {"bench": "integrations", "commit": commit_label(),
                           "when": time.strftime("%Y-%m-%d %H:%M:%S"), "steps": a.steps,
                           "rounds": a.rounds, "machine": machine(), "rows": []}
    t0 = time.monotonic()
    for name in chosen:
        for row in INTEGRATIONS[name](a.steps, a.rounds):
            print(json.dumps(row), flush=True)
            doc["rows"].append(row)
    doc["machine"]["loadavg_end"] = os.getloadavg()[0]
    doc["seconds"] = round(time.monotonic() - t0, 1)
    if a.json:  # bench/report.py --integrations FILE writes the integrations page's block from it
        Path(a.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
