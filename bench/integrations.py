"""Learner steps/s of RL libraries' own replay buffers against the same code on inreplay.

    python bench/integrations.py [--torchrl] [--rllib] [--sb3] [--jax] [--reverb]
                                 [--steps N] [--rounds R] [--json FILE]

One function per integration (``bench_torchrl``, ``bench_rllib``, ``bench_sb3``,
``bench_jax``, ``bench_reverb``), each returning JSON rows; the shared CLI runs the
selected ones in one run (the same machine, the same cores) and prints one JSON row per
line (and writes them all to ``--json``). Within an integration the local and inreplay
runs alternate (A/B rounds, same seed, same step count, no early stop), so a busy machine
slows both alike; the last row of each integration is a summary with the medians and
their ratio. ``--json`` writes ``{commit, when, machine, steps, rounds, seconds, rows}``,
which ``bench/report.py --integrations`` turns into the integrations page's block.

Every run row has ``integration``, ``buffer``, ``round`` and ``learner_steps_per_s``;
a summary row has ``summary: true`` and ``{buffer}_learner_steps_per_s`` for each buffer.
An integration that fails leaves one row with ``error`` (the others still run; exit 1).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
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
    return [*rows, *_torchrl_buffer_only(rounds), summary("torchrl", rows, rounds, steps)]


def summary(name: str, rows: list[Row], rounds: int, steps: int) -> Row:
    """The medians of each buffer's learner steps/s over the rounds, and each inreplay
    buffer's over the local one."""
    bufs = list(dict.fromkeys(r["buffer"] for r in rows))
    med = {b: statistics.median(r["learner_steps_per_s"] for r in rows if r["buffer"] == b)
           for b in bufs}
    out: Row = {"integration": name, "summary": True, "rounds": rounds, "env_steps": steps}
    out.update({f"{b}_learner_steps_per_s": round(v, 1) for b, v in med.items()})
    for b in bufs:
        if b != "local" and med.get("local"):
            out[f"{b}_over_local"] = round(med[b] / med["local"], 3)
    return out


@contextlib.contextmanager
def appliance() -> Iterator[str]:
    """A kernel-stack appliance of this checkout on a free port of 127.0.0.1, a process
    of its own for the whole integration; its HOST:PORT."""
    proc = subprocess.Popen([sys.executable, "-m", "pyctl", "start", "--listen", "127.0.0.1:0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            if "listening on " in line:
                yield line.split("listening on ", 1)[1].split()[0]
                break
        else:
            raise RuntimeError(f"inreplay did not start (exit {proc.wait()})")
    finally:
        proc.terminate()
        proc.wait(30)


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


SB3_BUFFERS = ("local", "inreplay", "inreplay-prioritized")


def bench_sb3(steps: int, rounds: int) -> list[Row]:
    """SB3 DQN on CartPole-v1 (rl-baselines3-zoo's hyperparameters): SB3's own
    ReplayBuffer, ApplianceReplayBuffer (uniform) and PrioritizedDQN on a prioritized
    ApplianceReplayBuffer, interleaved; learner steps/s = gradient steps per second of
    train() (sampling, the update and, prioritized, REPLAY.UPDATE), after one untimed
    warm-up run."""
    import torch
    from inreplay.integrations.sb3 import ZOO_CARTPOLE, ApplianceReplayBuffer, PrioritizedDQN
    from stable_baselines3 import DQN

    torch.set_num_threads(1)  # a 2-core box: a second intra-op thread waits for a core
    # untimed: the first model in a process pays torch's and gymnasium's first calls
    DQN("MlpPolicy", "CartPole-v1", seed=0, device="cpu", **ZOO_CARTPOLE).learn(1300)
    rows: list[Row] = []
    with appliance() as address:
        for r in range(rounds):
            for buffer in SB3_BUFFERS:
                kw: dict[str, Any] = {}
                if buffer != "local":
                    kw = {"replay_buffer_class": ApplianceReplayBuffer, "replay_buffer_kwargs": {
                        "address": address, "table": f"sb3-{buffer}-{r}",
                        "prioritized": buffer.endswith("prioritized")}}
                cls = PrioritizedDQN if buffer.endswith("prioritized") else DQN
                model = cls("MlpPolicy", "CartPole-v1", seed=1, device="cpu", **ZOO_CARTPOLE,
                            **kw)
                spent = [0.0]
                train = model.train

                def timed(gradient_steps: int, batch_size: int = 100,
                          train: Callable[..., None] = train, spent: list[float] = spent,
                          ) -> None:
                    t = time.perf_counter()
                    train(gradient_steps, batch_size)
                    spent[0] += time.perf_counter() - t

                model.train = timed  # type: ignore[method-assign]
                t0 = time.perf_counter()
                model.learn(steps)
                wall = time.perf_counter() - t0
                n = int(model._n_updates)
                rows.append({"integration": "sb3", "buffer": buffer, "round": r,
                             "env_steps": int(model.num_timesteps), "learner_steps": n,
                             "learner_steps_per_s": round(n / spent[0], 1) if spent[0] else 0.0,
                             "wall_s": round(wall, 1)})
                if buffer != "local":
                    model.replay_buffer.close()  # type: ignore[union-attr]
    return [*rows, summary("sb3", rows, rounds, steps)]


def bench_jax(steps: int, rounds: int) -> list[Row]:
    """integrations.jax_dqn (plain JAX + optax DQN on CartPole-v1): the same loop with a
    NumPy ring in this process (RingBuffer) and on the appliance (batches sampled with
    jax=True), interleaved; learner steps/s = gradient steps per second of the update
    rounds (sampling included, until JAX's results are ready)."""
    from inreplay.integrations.jax_dqn import ApplianceBuffer, RingBuffer, train

    from pyctl.client import ReplayClient

    rows: list[Row] = []
    with appliance() as address:
        host, _, port = address.rpartition(":")
        with ReplayClient(host, int(port)) as rc:
            for r in range(rounds):
                for buffer in ("local", "inreplay"):
                    buf = (RingBuffer(seed=1) if buffer == "local"
                           else ApplianceBuffer(rc, f"jax-{r}"))
                    t: dict[str, float] = {}
                    t0 = time.perf_counter()
                    train(buf, steps=steps, seed=1, eval_every=steps + 1, timings=t)
                    n, s = int(t["learner_steps"]), t["learner_seconds"]
                    rows.append({"integration": "jax", "buffer": buffer, "round": r,
                                 "env_steps": steps, "learner_steps": n,
                                 "learner_steps_per_s": round(n / s, 1) if s else 0.0,
                                 "wall_s": round(time.perf_counter() - t0, 1)})
                    if buffer == "inreplay":
                        rc.drop(f"jax-{r}")
    return [*rows, summary("jax", rows, rounds, steps)]


def bench_reverb(steps: int, rounds: int) -> list[Row]:
    """bench/reverb_api.py: one loop written to Reverb's API (a prioritized table of
    CartPole transitions; learner steps of a batch of 64 and mutate_priorities) on
    dm-reverb 0.14 (its server in the loop's process; bench/peers.py's venv, made on
    first use) and on
    reverb_compat (the appliance in a process of its own), interleaved; by
    Client.sample and by TrajectoryDataset. --steps/25 learner steps per way."""
    from bench.peers import venv_python

    pythons = {"local": str(venv_python()), "inreplay": sys.executable}
    api = {"local": "reverb", "inreplay": "inreplay"}
    learner = max(100, steps // 25)
    rows: list[Row] = []
    for r in range(rounds):
        for buffer in ("local", "inreplay"):
            out = subprocess.run([pythons[buffer], str(ROOT / "bench" / "reverb_api.py"),
                                  "--api", api[buffer], "--steps", str(learner)],
                                 cwd=ROOT, capture_output=True, text=True, timeout=1800)
            if out.returncode != 0:
                raise RuntimeError(f"reverb_api.py --api {api[buffer]} failed "
                                   f"({out.returncode}):\n{out.stderr[-2000:]}")
            doc = json.loads(out.stdout.strip().splitlines()[-1])
            for way in ("sample", "dataset"):
                rows.append({"integration": "reverb", "buffer": buffer, "way": way,
                             "round": r, "learner_steps": learner, "batch": doc["batch"],
                             "items": doc["items"], "inserts_per_s": doc["inserts_per_s"],
                             "learner_steps_per_s": doc[f"{way}_steps_per_s"]})
    out_rows: list[Row] = list(rows)
    for way in ("sample", "dataset"):
        s = summary("reverb", [x for x in rows if x["way"] == way], rounds, 0)
        del s["env_steps"]  # no environment: a fixed table of transitions
        out_rows.append({**s, "way": way, "learner_steps": learner})
    return out_rows


INTEGRATIONS: dict[str, Callable[[int, int], list[Row]]] = {
    "torchrl": bench_torchrl, "rllib": bench_rllib, "sb3": bench_sb3, "jax": bench_jax,
    "reverb": bench_reverb}


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
    from bench.latency import commit_label, machine

    doc: dict[str, Any] = {"bench": "integrations", "commit": commit_label(),
                           "when": time.strftime("%Y-%m-%d %H:%M:%S"), "steps": a.steps,
                           "rounds": a.rounds, "machine": machine(), "rows": []}
    t0 = time.monotonic()
    failed = []
    for name in chosen:
        try:
            rows = INTEGRATIONS[name](a.steps, a.rounds)
        except Exception as e:  # the others still run; the report names what failed
            failed.append(name)
            rows = [{"integration": name, "error": f"{type(e).__name__}: {e}"[-1000:]}]
            print(f"integrations: {name} failed: {rows[0]['error']}", file=sys.stderr)
        for row in rows:
            print(json.dumps(row), flush=True)
            doc["rows"].append(row)
    doc["machine"]["loadavg_end"] = os.getloadavg()[0]
    doc["seconds"] = round(time.monotonic() - t0, 1)
    if a.json:  # bench/report.py --integrations FILE writes the integrations page's block from it
        Path(a.json).write_text(json.dumps(doc, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
