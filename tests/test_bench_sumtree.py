"""bench/sumtree.py's peers: TorchRL's PrioritizedSampler is given what it accepts.

Every `make bench` until 2026-11-29 printed "torchrl: failed to set up (RuntimeError:
expected scalar type Float but found Double)" and left TorchRL out of the sum-tree
comparison: the bench handed the sampler float64 priorities. Timed figures are judged in
the benchmark, never here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import peers  # noqa: E402
import sumtree  # noqa: E402


def test_torchrl_priorities_are_float32() -> None:
    torch = pytest.importorskip("torch")
    raw = 0.1 + np.random.default_rng(0).random(512)  # float64, as the bench draws them
    t = sumtree.TorchRL.priorities(raw)
    assert t.dtype == torch.float32
    assert np.allclose(t.numpy(), raw, rtol=1e-6)


def test_torchrl_row_is_measured(tmp_path: Path) -> None:
    py = peers.find_torchrl_python()  # the venv is make bench's, not make test's
    if py is None:
        pytest.skip("no Python here loads TorchRL's extension (make bench makes "
                    "build/peers-venv-torchrl)")
    out = tmp_path / "sumtree.json"
    r = subprocess.run([py, str(ROOT / "bench" / "sumtree.py"), "--quick", "--impls", "torchrl",
                        "--sumtree-k", "/nonexistent", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, check=False,
                       env={"PATH": "/usr/bin:/bin", "INREPLAY_SUMTREE_TORCHRL": "1",
                            "HOME": str(tmp_path)})
    assert "failed to set up" not in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    rows = [x for x in doc["results"] if x["impl"] == "torchrl"]
    assert [x["capacity"] for x in rows] == [10_000, 1_000_000], doc
    assert all(x[op] > 0 for x in rows for op in sumtree.OPS), rows
    assert not any("torchrl" in n for n in doc["notes"]), doc["notes"]
