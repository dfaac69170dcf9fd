"""Episodes recorded on the appliance and exported as a Minari dataset
(pyctl/minari_export.py, pyctl export-minari), loaded back with minari.load_dataset and
checked step by step against what the env produced."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import ROOT, checkout_env, require

from pyctl.client import ReplayClient

minari = require("minari", "offline")
gym = require("gymnasium", "rl")

from pyctl.minari_export import EpisodeRecorder, export_minari  # noqa: E402


def _record(rc: ReplayClient, table: str, steps: int, seed: int) -> list[dict[str, Any]]:
    """Two recorders (actors) interleaving steps of CartPole (episodes cut at 25 steps, so
    both terminations and truncations happen) into one table; the episodes as the envs
    produced them, complete ones only, by recorder and then episode number."""
    envs = [gym.make("CartPole-v1", max_episode_steps=25) for _ in range(2)]
    recs = [EpisodeRecorder(rc, table, obs=((4,), np.float32), action=((), np.int64),
                            recorder=k, create=k == 0) for k in range(2)]
    obs = [env.reset(seed=seed + k)[0] for k, env in enumerate(envs)]
    for k, env in enumerate(envs):
        env.action_space.seed(seed + k)
    cur: list[dict[str, Any]] = [{"obs": [o], "act": [], "rew": [], "term": [], "trunc": []}
                                 for o in obs]
    started = [(k, 0) for k in range(2)]  # (recorder, its episode number)
    done_eps: dict[tuple[int, int], dict[str, Any]] = {}
    for _ in range(steps):
        for k, env in enumerate(envs):
            a = env.action_space.sample()
            nxt, r, term, trunc, _ = env.step(a)
            recs[k].step(obs[k], a, r, term, trunc, nxt)
            e = cur[k]
            e["act"].append(a)
            e["rew"].append(r)
            e["term"].append(term)
            e["trunc"].append(trunc)
            e["obs"].append(nxt)
            if term or trunc:
                done_eps[started[k]] = e
                obs[k] = env.reset()[0]
                cur[k] = {"obs": [obs[k]], "act": [], "rew": [], "term": [], "trunc": []}
                started[k] = (k, started[k][1] + 1)
            else:
                obs[k] = nxt
    for r in recs:
        r.close()  # the unfinished episodes stay incomplete
    return [done_eps[key] for key in sorted(done_eps)]


def _check(ds: Any, want: list[dict[str, Any]]) -> None:
    assert ds.total_episodes == len(want)
    assert ds.total_steps == sum(len(e["act"]) for e in want)
    got = list(ds.iterate_episodes())
    # the export orders episodes by id: recorder, then its episode number
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.observations, np.asarray(w["obs"], np.float32))
        np.testing.assert_array_equal(g.actions, np.asarray(w["act"]))
        np.testing.assert_array_equal(g.rewards, np.asarray(w["rew"]))
        np.testing.assert_array_equal(g.terminations, np.asarray(w["term"]))
        np.testing.assert_array_equal(g.truncations, np.asarray(w["trunc"]))
    assert any(any(w["term"]) for w in want) and any(any(w["trunc"]) for w in want)


def test_export_round_trips_every_step(replay_server: Any, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    with ReplayClient(replay_server.host, replay_server.port) as rc:
        want = _record(rc, "rec", 200, seed=3)
        assert len(want) >= 10
        with pytest.warns(UserWarning, match=r"2 incomplete episode\(s\) of 'rec' left out"):
            export_minari(rc, "rec", "cartpole/inreplay-v0", env="CartPole-v1",
                          author="tests", description="round trip")
        assert rc.info("rec")["size"] == 0  # drained
    ds = minari.load_dataset("cartpole/inreplay-v0")
    _check(ds, want)
    assert ds.spec.env_spec.id == "CartPole-v1"
    assert ds.observation_space == gym.make("CartPole-v1").observation_space


def test_cli_export(replay_server: Any, tmp_path: Path) -> None:
    """pyctl export-minari writes the same dataset from another process."""
    with ReplayClient(replay_server.host, replay_server.port) as rc:
        want = _record(rc, "rec-cli", 120, seed=11)
    env = checkout_env(MINARI_DATASETS_PATH=str(tmp_path / "minari"))
    out = subprocess.run([sys.executable, "-m", "pyctl", "export-minari", "cartpole/cli-v0",
                          "--table", "rec-cli", "--env", "CartPole-v1", "--address",
                          f"{replay_server.host}:{replay_server.port}", "--author", "tests"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    steps = sum(len(e["act"]) for e in want)
    assert f"{len(want)} episodes, {steps} steps -> cartpole/cli-v0" in out.stdout
    os.environ["MINARI_DATASETS_PATH"] = env["MINARI_DATASETS_PATH"]
    try:
        _check(minari.load_dataset("cartpole/cli-v0"), want)
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


def test_export_of_nothing_says_so(replay_server: Any, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    with ReplayClient(replay_server.host, replay_server.port) as rc:
        EpisodeRecorder(rc, "empty", obs=((4,), np.float32), action=((), np.int64)).close()
        with pytest.raises(ValueError, match="no complete episode"):
            export_minari(rc, "empty", "cartpole/none-v0", env="CartPole-v1")
