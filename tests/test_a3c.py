"""A3C through a parameter table: the n-step returns against their definition, one
worker's gradient applied by the appliance as torch.optim would, and the whole demo
(`pyctl demo --algo a3c`) solving CartPole-v1."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch
from helpers import assert_learned
from inreplay.actors.a3c import A3CConfig, a3c_loss, build_model, n_step_returns

from pyctl.params import ParamClient

if TYPE_CHECKING:
    from conftest import ServerProcess

ROOT = Path(__file__).resolve().parent.parent


def test_n_step_returns_are_the_discounted_sums_cut_at_episode_ends() -> None:
    """R_t = sum_{k<K} gamma^k r_{t+k} + gamma^K V(x_n) when no episode ends in between,
    and the sum stops (no bootstrap) after a done step."""
    rng = np.random.default_rng(3)
    n, e, gamma = 7, 5, 0.9
    r = rng.normal(size=(n, e))
    done = (rng.random((n, e)) < 0.25).astype(np.float64)
    boot = rng.normal(size=e)
    got = n_step_returns(torch.tensor(r), torch.tensor(done), torch.tensor(boot), gamma).numpy()
    for j in range(e):
        for t in range(n):
            total, coef, cut = 0.0, 1.0, False
            for k in range(t, n):
                total += coef * r[k, j]
                coef *= gamma
                if done[k, j]:
                    cut = True
                    break
            if not cut:
                total += coef * boot[j]
            assert got[t, j] == pytest.approx(total, rel=1e-12)


def test_a_worker_gradient_pushed_is_an_adam_step_on_the_server(
        inreplay_server: ServerProcess) -> None:
    """The worker's path: bind the model, backward the A3C loss into the bound .grads,
    push with the clip as SCALE, pull. The pulled parameters equal torch.optim.Adam's
    step on the same clipped gradient (float32, a few ulps)."""
    cfg = A3CConfig(hidden=16)
    torch.manual_seed(0)
    model = build_model(cfg)
    ref = build_model(cfg)
    ref.load_state_dict(model.state_dict())
    opt = torch.optim.Adam(ref.parameters(), lr=cfg.lr)
    pc = ParamClient(inreplay_server.host, inreplay_server.port)
    flat = pc.bind(model)
    pc.create("a3c-t", flat.size, "adam", lr=cfg.lr, init=flat.params)
    obs = torch.randn(24, 4)
    actions = torch.randint(0, 2, (24,))
    returns = torch.randn(24) * 10
    for _ in range(5):
        flat.grads.zero_()
        a3c_loss(model, obs, actions, returns, cfg).backward()
        scale = min(1.0, cfg.grad_clip / (float(flat.grads.norm()) + 1e-6))
        assert scale < 1.0  # the clip is exercised
        pc.push_bound("a3c-t", flat, scale=scale, base=flat.version, maxstale=cfg.max_stale)
        assert pc.pull_bound("a3c-t", flat)
        opt.zero_grad()
        a3c_loss(ref, obs, actions, returns, cfg).backward()
        for p in ref.parameters():
            p.grad.mul_(torch.tensor(scale, dtype=torch.float32))
        opt.step()
        want = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
        # the same loss on parameters that differ by ulps gives gradients that differ by
        # ulps; Adam's normalized step keeps the difference at that scale
        assert torch.allclose(flat.params, want, rtol=0, atol=1e-6)
    assert flat.version == 5
    pc.drop("a3c-t")
    pc.close()


def test_pyctl_demo_algo_a3c_is_this_demo() -> None:
    r = subprocess.run([sys.executable, "-m", "pyctl", "demo", "--algo", "a3c", "-h"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "--n-steps" in r.stdout and "--optimizer" in r.stdout and "--role" not in r.stdout
    bad = subprocess.run([sys.executable, "-m", "inreplay.actors.a3c", "--optimizer", "lion"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--optimizer: choose one of" in bad.stderr


DEMO_UPDATES = 20_000
"""The pushes (one optimizer step each) the A3C demo gets to solve CartPole (solved runs
took 1,375 to 2,702, docs/patterns.md)."""
HANG_MINUTES = 30
"""Only a guard against a hung run: learning is judged in updates, not wall time."""


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_a3c_demo_solves_cartpole_within_its_update_budget(tmp_path: Path,
                                                           optimizer: str) -> None:
    out = tmp_path / "a3c"
    proc = subprocess.run([sys.executable, "-m", "pyctl", "demo", "--algo", "a3c", "--out",
                           str(out), "--updates", str(DEMO_UPDATES), "--minutes",
                           str(HANG_MINUTES), "--stack", "kernel", "--optimizer", optimizer],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_MINUTES * 60 + 120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert_learned(s, DEMO_UPDATES)
    assert proc.stdout.strip().splitlines()[-1] == "solved: true", proc.stdout[-3000:]
    assert s["shutdown_problems"] == []
    # every push was one optimizer step on the server; the table's version counts them
    t = s["param_table"]
    assert t["optimizer"] == optimizer and t["step"] == t["version"] == s["pushes"] > 0
    # a worker stopped between its push and its counters leaves one push uncounted
    assert 0 <= s["pushes"] + s["stale_refused"] - s["gradients"] <= s["config"]["num_workers"]
