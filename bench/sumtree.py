"""Benchmark of the prioritized sampler against other prioritized-replay samplers.

Compares, at capacities 1e4, 1e5, 1e6 and 2e6 (tree full, raw priorities
uniform in [0.1, 1.1), alpha 0.6, beta 0.4), three batched operations of 512:

    insert  set priorities of the next 512 slots of the ring (new items)
    sample  draw 512 slots with importance weights
    update  set new priorities of the 512 slots just drawn

for
    ours    pyctl.sumtree.PrioritizedSampler (libinreplay's K-ary sum tree via cffi)
    cpprb   cpprb.PrioritizedReplayBuffer (C++ segment tree, Cython)
    torchrl torchrl's PrioritizedSampler (its C++ extension needs torch 2.14: when
            it does not load here, the whole comparison runs again, in one process,
            under build/peers-venv-torchrl's Python, which bench/peers.py makes)
    numpy   a plain NumPy reference: priorities array, cumsum + searchsorted per sample

and prints a markdown table of medians (µs per call) and ratios (theirs / ours,
so > 1 means ours is faster). It also runs build/bench/sumtree_k (the C
fanout micro-benchmark) when it is built and prints its K table.

    python bench/sumtree.py [--quick] [--json FILE] [--sumtree-k PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl.sumtree import PrioritizedSampler  # noqa: E402

BATCH = 512
ALPHA, BETA, EPS = 0.6, 0.4, 1e-6
OPS = ("insert", "sample", "update")
IMPLS = ("ours", "cpprb", "torchrl", "numpy")


# --------------------------------------------------------------------------
# the contestants: each gets fill(), insert(raw), sample() -> idx, update(idx, raw)
# --------------------------------------------------------------------------


class Ours:
    name = "ours"

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.s = PrioritizedSampler(cap, 0, ALPHA, EPS, seed=1)
        self.head = 0
        self.base = np.arange(BATCH, dtype=np.uint64)

    def fill(self, raw: np.ndarray) -> None:
        step = 1 << 16
        for b in range(0, self.cap, step):
            e = min(self.cap, b + step)
            self.s.update(np.arange(b, e, dtype=np.uint64), raw[b:e])

    def insert(self, raw: np.ndarray) -> None:
        if self.head + BATCH <= self.cap:
            slots = self.base + np.uint64(self.head)
        else:
            slots = (self.base + np.uint64(self.head)) % np.uint64(self.cap)
        self.head = (self.head + BATCH) % self.cap
        self.s.update(slots, raw)

    def sample(self) -> np.ndarray:
        slots, _w = self.s.sample(BATCH, BETA)
        return slots

    def update(self, idx: np.ndarray, raw: np.ndarray) -> None:
        self.s.update(idx, raw)


class Cpprb:
    name = "cpprb"

    def __init__(self, cap: int) -> None:
        from cpprb import PrioritizedReplayBuffer

        self.cap = cap
        # one uint8 field: cpprb always stores and gathers data with the
        # priorities, so give it the smallest field it accepts
        self.rb = PrioritizedReplayBuffer(cap, {"a": {"dtype": np.uint8}}, alpha=ALPHA, eps=EPS)
        self.zeros = np.zeros(BATCH, dtype=np.uint8)

    def fill(self, raw: np.ndarray) -> None:
        step = 1 << 16
        for b in range(0, self.cap, step):
            e = min(self.cap, b + step)
            self.rb.add(a=np.zeros(e - b, dtype=np.uint8), priorities=raw[b:e])

    def insert(self, raw: np.ndarray) -> None:
        self.rb.add(a=self.zeros, priorities=raw)

    def sample(self) -> np.ndarray:
        return self.rb.sample(BATCH, beta=BETA)["indexes"]

    def update(self, idx: np.ndarray, raw: np.ndarray) -> None:
        self.rb.update_priorities(idx, raw)


class TorchRL:
    name = "torchrl"

    def __init__(self, cap: int) -> None:
        import torch
        from torchrl.data.replay_buffers.samplers import PrioritizedSampler as TRLSampler
        from torchrl.data.replay_buffers.storages import LazyTensorStorage

        self.torch = torch
        self.cap = cap
        self.sampler = TRLSampler(max_capacity=cap, alpha=ALPHA, beta=BETA, eps=EPS)
        self.storage = LazyTensorStorage(cap)
        self.head = 0

    def fill(self, raw: np.ndarray) -> None:
        t = self.torch
        idx = t.arange(self.cap)
        self.storage.set(idx, t.zeros(self.cap, dtype=t.uint8))
        self.sampler.extend(idx)
        self.sampler.update_priority(idx, self.priorities(raw))

    @staticmethod
    def priorities(raw: np.ndarray) -> Any:
        """raw as the sampler takes it: its trees are float32 (PrioritizedSampler's default
        dtype) and it refuses a float64 tensor ("expected scalar type Float but found
        Double"), which every `make bench` before this fix reported as "failed to set up"."""
        import torch

        return torch.from_numpy(np.ascontiguousarray(raw, dtype=np.float32))

    def insert(self, raw: np.ndarray) -> None:
        t = self.torch
        idx = (self.head + t.arange(BATCH)) % self.cap
        self.head = (self.head + BATCH) % self.cap
        self.sampler.extend(idx)
        self.sampler.update_priority(idx, self.priorities(raw))

    def sample(self) -> Any:
        idx, _info = self.sampler.sample(self.storage, BATCH)  # _info["_weight"]: weights
        return idx

    def update(self, idx: Any, raw: np.ndarray) -> None:
        self.sampler.update_priority(idx, self.priorities(raw))


class NumpyRef:
    """What one writes without a tree: O(capacity) cumsum on every sample."""

    name = "numpy"

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.p = np.zeros(cap)
        self.head = 0
        self.rng = np.random.default_rng(1)

    def fill(self, raw: np.ndarray) -> None:
        self.p[:] = (raw + EPS) ** ALPHA

    def insert(self, raw: np.ndarray) -> None:
        end = self.head + BATCH
        if end <= self.cap:
            self.p[self.head : end] = (raw + EPS) ** ALPHA
        else:
            self.p[(self.head + np.arange(BATCH)) % self.cap] = (raw + EPS) ** ALPHA
        self.head = end % self.cap

    def sample(self) -> np.ndarray:
        c = np.cumsum(self.p)
        total = c[-1]
        u = (np.arange(BATCH) + self.rng.random(BATCH)) * (total / BATCH)
        idx = np.minimum(np.searchsorted(c, u, side="right"), self.cap - 1)
        p = self.p[idx]
        min_p = self.p[self.p > 0].min()
        _w = ((min_p / p) ** BETA).astype(np.float32)
        return idx

    def update(self, idx: np.ndarray, raw: np.ndarray) -> None:
        self.p[idx] = (raw + EPS) ** ALPHA


FACTORIES: dict[str, Callable[[int], Any]] = {
    "ours": Ours,
    "cpprb": Cpprb,
    "torchrl": TorchRL,
    "numpy": NumpyRef,
}


# --------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------


def bench_one(impl: Any, budget_s: float, max_reps: int, min_reps: int) -> dict[str, Any]:
    """Median µs of insert/sample/update, interleaved, within a time budget."""
    rng = np.random.default_rng(7)
    pool = [0.1 + rng.random(BATCH) for _ in range(64)]
    times: dict[str, list[float]] = {op: [] for op in OPS}
    # warm-up
    for i in range(3):
        impl.insert(pool[i])
        impl.update(impl.sample(), pool[i + 1])
    start = time.perf_counter()
    reps = 0
    pc = time.perf_counter_ns
    while reps < max_reps and (reps < min_reps or time.perf_counter() - start < budget_s):
        raw_a, raw_b = pool[reps % 64], pool[(reps + 1) % 64]
        t0 = pc()
        impl.insert(raw_a)
        t1 = pc()
        idx = impl.sample()
        t2 = pc()
        impl.update(idx, raw_b)
        t3 = pc()
        times["insert"].append((t1 - t0) / 1e3)
        times["sample"].append((t2 - t1) / 1e3)
        times["update"].append((t3 - t2) / 1e3)
        reps += 1
    return {op: statistics.median(v) for op, v in times.items()} | {"reps": reps}


def _torchrl_loads() -> bool:
    """Whether TorchRL's PrioritizedSampler (its C++ sum tree) works in this Python."""
    try:
        from torchrl._torchrl import SumSegmentTreeFp32  # noqa: F401
    except Exception:  # ImportError, or the extension's undefined symbols
        return False
    return True


def run_sumtree_k(path: Path, quick: bool) -> list[dict[str, Any]]:
    cmd = [str(path), "--json"] + (["--quick"] if quick else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def fmt(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer reps and capacities (~20 s)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument(
        "--sumtree-k",
        metavar="PATH",
        default=str(ROOT / "build" / "bench" / "sumtree_k"),
        help="the C fanout benchmark (default: build/bench/sumtree_k)",
    )
    ap.add_argument(
        "--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}"
    )
    args = ap.parse_args(argv)

    caps = [10_000, 1_000_000] if args.quick else [10_000, 100_000, 1_000_000, 2_000_000]
    budget, max_reps, min_reps = (0.25, 200, 5) if args.quick else (1.5, 3000, 10)
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    if "torchrl" in impls and not os.environ.get("INREPLAY_SUMTREE_TORCHRL") and \
            not _torchrl_loads():
        sys.path.insert(0, str(ROOT / "bench"))
        from peers import torchrl_python  # the venv TorchRL's extension loads in

        py = torchrl_python()
        if py != sys.executable:
            print(f"note: TorchRL's extension does not load here: running under {py}",
                  file=sys.stderr)
            os.execve(py, [py, str(Path(__file__).resolve()), *(argv or sys.argv[1:])],
                      dict(os.environ, INREPLAY_SUMTREE_TORCHRL="1"))
    notes: list[str] = [
        "insert = priorities of the next 512 ring slots; sample = 512 slots with importance "
        "weights (beta 0.4); update = new priorities of the 512 slots just sampled",
        "cpprb stores and gathers data with every add/sample: it is given one uint8 field, "
        "the least it accepts, so its sample also copies 512 bytes (negligible)",
        "numpy = priorities array + np.cumsum + np.searchsorted on every sample (O(capacity))",
        "all times are medians of interleaved runs, µs per call of 512, through Python",
    ]
    results: list[dict[str, Any]] = []
    skipped: set[str] = set()
    spin_until = time.perf_counter() + 0.3  # let the CPU clock ramp up first
    while time.perf_counter() < spin_until:
        pass
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for cap in caps:
            raw = 0.1 + np.random.default_rng(cap).random(cap)
            for name in impls:
                if name in skipped:
                    continue
                try:
                    impl = FACTORIES[name](cap)
                    impl.fill(raw)
                except ImportError as exc:
                    skipped.add(name)
                    notes.append(f"{name}: not importable ({exc}); skipped")
                    print(f"note: {name} not importable ({exc}); skipped", file=sys.stderr)
                    continue
                except Exception as exc:  # a contestant's API drifted: say so, go on
                    skipped.add(name)
                    notes.append(f"{name}: failed to set up ({type(exc).__name__}: {exc})")
                    print(f"note: {name} failed: {exc}", file=sys.stderr)
                    continue
                r = bench_one(impl, budget, max_reps, min_reps)
                results.append({"impl": name, "capacity": cap} | r)
                print(
                    f"{name:8s} cap {cap:>9,}: "
                    + "  ".join(f"{op} {r[op]:8.1f} µs" for op in OPS)
                    + f"  ({r['reps']} reps)",
                    file=sys.stderr,
                )
                del impl
                gc.collect()
    finally:
        if gc_was:
            gc.enable()

    # ---- the comparison table ----
    others = [i for i in impls if i != "ours" and i not in skipped]
    by = {(r["impl"], r["capacity"]): r for r in results}
    head = "| capacity | op | ours µs |" + "".join(f" {o} µs | {o}/ours |" for o in others)
    lines = [head, "|" + "---|" * (3 + 2 * len(others))]
    for cap in caps:
        for op in OPS:
            ours = by.get(("ours", cap), {}).get(op)
            row = f"| {cap:,} | {op} | {fmt(ours)} |"
            for o in others:
                t = by.get((o, cap), {}).get(op)
                ratio = f"{t / ours:,.1f}×" if t is not None and ours else "—"
                row += f" {fmt(t)} | {ratio} |"
            lines.append(row)
    print(f"\n## prioritized sampler, batch {BATCH} (alpha {ALPHA}, beta {BETA})\n")
    print("\n".join(lines))

    # ---- the targets of the issue ----
    big = max(caps)
    o, c = by.get(("ours", big)), by.get(("cpprb", big))
    if o:
        print(f"\nsample(512)+weights at {big:,}: {o['sample']:.1f} µs (target <= 25 µs)")
        if c:
            print(
                f"vs cpprb at {big:,}: sample {c['sample'] / o['sample']:.1f}× (target >= 20×), "
                f"update {c['update'] / o['update']:.1f}× (target >= 10×), "
                f"insert {c['insert'] / o['insert']:.1f}×"
            )

    # ---- the C fanout table ----
    k_rows: list[dict[str, Any]] = []
    kpath = Path(args.sumtree_k)
    if kpath.exists():
        try:
            k_rows = run_sumtree_k(kpath, args.quick)
        except (subprocess.SubprocessError, OSError, json.JSONDecodeError) as exc:
            notes.append(f"sumtree_k failed: {exc}")
    else:
        notes.append(f"{kpath} not built: no K table (meson compile -C build)")
    if k_rows:
        print("\n## sum tree fanout K (C, no Python; µs per call of 512, median)\n")
        print("| capacity | K | depth | sample+w | update | insert |")
        print("|---|---|---|---|---|---|")
        for r in sorted(k_rows, key=lambda r: (r["capacity"], r["k"])):
            print(
                f"| {r['capacity']:,} | {r['k']} | {r['depth']} | {r['sample_ns'] / 1e3:.1f} |"
                f" {r['update_ns'] / 1e3:.1f} | {r['insert_ns'] / 1e3:.1f} |"
            )
    print("\nnotes:\n" + "\n".join(f"- {n}" for n in notes))

    if args.json:
        doc = {
            "batch": BATCH,
            "alpha": ALPHA,
            "beta": BETA,
            "quick": args.quick,
            "machine": {
                "python": platform.python_version(),
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "processor": platform.processor(),
            },
            "results": results,
            "sumtree_k": k_rows,
            "notes": notes,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
