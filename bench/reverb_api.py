"""One replay loop written to Reverb's Python API, run on Reverb itself and on
``inreplay.integrations.reverb_compat`` (the appliance): bench/integrations.py --reverb.

    python bench/reverb_api.py --api inreplay|reverb [--items N] [--steps N] [--batch B]

``--api reverb`` needs dm-reverb (bench/peers.py's build/peers-venv, whose Python runs it);
``--api inreplay`` imports reverb_compat under the name ``reverb``: the rest of the code is
the same text. The loop: a ``Server`` with one prioritized table (priority exponent 0.6,
FIFO remover, ``MinSize(1)``), ``--items`` CartPole-sized transitions written through one
``TrajectoryWriter`` (a one-step item per step, ``flush`` every 64), then ``--steps``
learner steps, each a batch of ``--batch`` samples and ``mutate_priorities`` of every
sampled key. Two ways to draw the batch, both timed: ``Client.sample(table, batch)``
(the call both APIs share) and ``TrajectoryDataset`` (Reverb's recommended training path:
Reverb's own over TensorFlow, reverb_compat's NumPy iterator), ``batch`` samples in
flight. Prints one JSON object: the insert rate and each way's learner steps/s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

TABLE = "transitions"
FIELDS = {"obs": ((4,), np.float32), "action": ((), np.int64), "reward": ((), np.float32),
          "next_obs": ((4,), np.float32), "done": ((), np.float32)}


def load(api: str) -> Any:
    if api == "reverb":
        import reverb
        return reverb
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from inreplay.integrations import reverb_compat
    return reverb_compat


def signature(api: str) -> Any:
    """Reverb's TrajectoryDataset.from_table_signature needs the table's signature."""
    if api != "reverb":
        return None
    import tensorflow as tf
    return {k: tf.TensorSpec(shape, tf.as_dtype(dtype)) for k, (shape, dtype) in FIELDS.items()}


def steps_per_s(draw: Any, client: Any, steps: int) -> float:
    """learner steps/s: draw() -> a batch's keys, then their new priorities."""
    rng = np.random.default_rng(1)
    draw()  # the first call opens its streams
    t = time.perf_counter()
    for _ in range(steps):
        keys = draw()
        client.mutate_priorities(TABLE, dict(zip(keys, rng.uniform(0.1, 2.0, len(keys)),
                                                 strict=True)))
    return steps / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", choices=("inreplay", "reverb"), required=True)
    p.add_argument("--items", type=int, default=20_000)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args(argv)
    reverb = load(a.api)
    server = reverb.Server(tables=[reverb.Table(
        name=TABLE, sampler=reverb.selectors.Prioritized(0.6), remover=reverb.selectors.Fifo(),
        max_size=100_000, rate_limiter=reverb.rate_limiters.MinSize(1),
        signature=signature(a.api))])
    address = f"localhost:{server.port}"
    client = reverb.Client(address)
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for i in range(a.items):
            writer.append({k: rng.standard_normal(shape).astype(dtype) if shape else
                           dtype(rng.integers(2)) for k, (shape, dtype) in FIELDS.items()})
            writer.create_item(TABLE, 1.0, {k: writer.history[k][-1] for k in FIELDS})
            if i % 64 == 63:
                writer.flush()
        writer.flush()
    inserts = a.items / (time.perf_counter() - t)
    sample_kw = {"emit_timesteps": False} if a.api == "reverb" else {}

    def by_sample() -> list[int]:
        batch = list(client.sample(TABLE, num_samples=a.batch, **sample_kw))
        return [int(s.info.key) for s in batch]

    if a.api == "reverb":
        ds = reverb.TrajectoryDataset.from_table_signature(
            address, TABLE, max_in_flight_samples_per_worker=a.batch).batch(a.batch)
        it = iter(ds)

        def by_dataset() -> list[int]:
            return [int(k) for k in next(it).info.key.numpy()]
    else:
        it = iter(reverb.TrajectoryDataset(address, TABLE,
                                           max_in_flight_samples_per_worker=a.batch))

        def by_dataset() -> list[int]:
            return [int(next(it).info.key) for _ in range(a.batch)]

    out = {"api": a.api, "items": a.items, "batch": a.batch, "steps": a.steps,
           "inserts_per_s": round(inserts, 1),
           "sample_steps_per_s": round(steps_per_s(by_sample, client, a.steps), 1),
           "dataset_steps_per_s": round(steps_per_s(by_dataset, client, a.steps), 1)}
    for x in (it, client):  # reverb_compat's iterator and client hold connections
        getattr(x, "close", lambda: None)()
    server.stop()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
