"""bench/integrations.py (each integration's learner steps/s against its library's own
local buffer) and its block in bench/report.py: a short real run of the SB3 and JAX
loops against an appliance the bench starts, and the report on synthetic rows (every
integration present, one missing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402


def _runs(name: str, buffers: tuple[str, ...], **extra: Any) -> list[dict[str, Any]]:
    return [{"integration": name, "buffer": b, "round": r, "learner_steps_per_s": 100.0 + k + r,
             **extra} for r in range(2) for k, b in enumerate(buffers)]


def _doc(skip: str = "") -> dict[str, Any]:
    rows = (_runs("torchrl", ("local", "inreplay"))
            + [{"bench": "rllib", "buffer": b, "repeat": 0, "learner_steps_per_s": 14.0,
                "replay_seconds": {"sampling": 0.01}} for b in ("local", "inreplay")]
            + _runs("sb3", ("local", "inreplay", "inreplay-prioritized"))
            + _runs("jax", ("local", "inreplay"))
            + _runs("reverb", ("local", "inreplay"), way="sample", inserts_per_s=5000.0)
            + _runs("reverb", ("local", "inreplay"), way="dataset", inserts_per_s=5000.0))
    rows = [r for r in rows if (r.get("integration") or r.get("bench")) != skip]
    return {"rows": rows, "rounds": 2, "steps": 12800, "commit": "abc", "when": "now",
            "seconds": 1, "machine": {"cpus": 2}}


def test_report_lists_every_integration_and_judges_the_run() -> None:
    text = report.integrations_section(_doc())
    assert "bench/integrations.py --torchrl --rllib --sb3 --jax --reverb" in text
    for label, buffers in report.INTEGRATION_RUNS.values():
        for what in buffers.values():
            assert f"| {label} | {what} |" in text, (label, what)
    # sb3's prioritized arm against the local ReplayBuffer: 102 / 100, 103 / 101 -> 1.02x
    assert "| 102.0 / 103.0 | 102.5 | 1.02× |" in text
    assert "**PASS** — every integration's learner steps/s" in text
    assert "median items/s: dm-reverb 0.14 (server in process) 5,000" in text


def test_report_says_which_integration_has_no_rows() -> None:
    text = report.integrations_section(_doc(skip="jax"))
    assert "| JAX DQN (`inreplay.integrations.jax_dqn`) | — | not run | | |" in text
    assert "**NOT MET** — every integration's" in text
    assert "no rows: JAX DQN (`inreplay.integrations.jax_dqn`): RingBuffer" in text
    assert "--jax" not in text.split("\n")[0]
    failed = _doc(skip="reverb")
    failed["rows"].append({"integration": "reverb", "error": "BenchError: no venv"})
    text = report.integrations_section(failed)
    assert "- reverb failed: BenchError: no venv" in text and "**NOT MET**" in text


def test_short_real_run_sb3_and_jax(tmp_path: Path) -> None:
    """Both arms of each measured, the appliance started and stopped by the bench; the
    report renders the run."""
    out = tmp_path / "integ.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "integrations.py"), "--sb3",
                        "--jax", "--rounds", "1", "--steps", "1600", "--json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    runs = {(x["integration"], x["buffer"]): x for x in doc["rows"] if not x.get("summary")}
    assert set(runs) == {("sb3", "local"), ("sb3", "inreplay"), ("sb3", "inreplay-prioritized"),
                         ("jax", "local"), ("jax", "inreplay")}
    for row in runs.values():
        assert row["learner_steps"] > 0 and row["learner_steps_per_s"] > 0, row
    # the same work on every arm: SB3 trains 128 steps per 256 env steps past 1000
    assert len({x["learner_steps"] for k, x in runs.items() if k[0] == "sb3"}) == 1
    sums = {x["integration"]: x for x in doc["rows"] if x.get("summary")}
    assert sums["sb3"]["inreplay-prioritized_over_local"] > 0
    assert sums["jax"]["inreplay_over_local"] > 0
    text = report.integrations_section(doc)
    assert "bench/integrations.py --sb3 --jax --rounds 1 --steps 1600" in text
    assert "**NOT MET**" in text  # TorchRL, RLlib and Reverb were not run


def test_a_failing_integration_leaves_an_error_row_and_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One integration raising does not lose the others' rows: the JSON is written with
    an error row for it, and the exit code is 1."""
    sys.path.insert(0, str(ROOT))
    from bench import integrations

    def broken(steps: int, rounds: int) -> list[dict[str, Any]]:
        raise RuntimeError("no venv here")

    def fine(steps: int, rounds: int) -> list[dict[str, Any]]:
        return _runs("jax", ("local", "inreplay"))

    monkeypatch.setitem(integrations.INTEGRATIONS, "reverb", broken)
    monkeypatch.setitem(integrations.INTEGRATIONS, "jax", fine)
    out = tmp_path / "i.json"
    assert integrations.main(["--reverb", "--jax", "--json", str(out)]) == 1
    rows = json.loads(out.read_text())["rows"]
    assert rows[-1] == {"integration": "reverb", "error": "RuntimeError: no venv here"}
    assert [r["buffer"] for r in rows[:-1]] == ["local", "inreplay"] * 2
