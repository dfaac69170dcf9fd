"""R2D2 (rl/r2d2.py, actors/r2d2.py, learner/r2d2.py, actors/r2d2_demo.py): value
rescaling, mixed priorities, n-step targets, burn-in with
stored state, the sequence writers (packed and stored once on the appliance), and the
whole demo solving masked CartPole."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
from helpers import assert_learned
from inreplay.actors.r2d2 import SequenceStreamWriter, SequenceWriter
from inreplay.learner.r2d2 import (
    inverse_value_rescale,
    mixed_priority,
    nstep_targets,
    sequence_td,
    sequences_from_columns,
    value_rescale,
)
from inreplay.rl.networks import RecurrentQNet, StepPolicy
from inreplay.rl.r2d2 import CARTPOLE, MaskVelocity, R2D2Config, make_env, sequence_schema

if TYPE_CHECKING:
    from conftest import ServerProcess

ROOT = Path(__file__).resolve().parent.parent


# ---- value rescaling -----------------------------------------------------------------


def test_value_rescale_values_and_inverse() -> None:
    eps = 1e-3
    x = torch.tensor([-1e4, -500.0, -3.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 3.0, 99.0, 500.0, 1e4],
                     dtype=torch.float64)
    h = value_rescale(x, eps)
    # the definition, by hand: h(3) = sqrt(4) - 1 + 0.003, h is odd and increasing
    assert h[8].item() == pytest.approx(1.003)
    assert h[5].item() == 0.0
    assert torch.allclose(h, -value_rescale(-x, eps))
    assert bool((h[1:] > h[:-1]).all())
    assert torch.allclose(inverse_value_rescale(h, eps), x, rtol=1e-9, atol=1e-9)
    y = torch.linspace(-50, 50, 1001, dtype=torch.float64)
    assert torch.allclose(value_rescale(inverse_value_rescale(y, eps), eps), y, atol=1e-9)
    # h compresses: a return of 100 becomes about 9.1
    assert value_rescale(torch.tensor(100.0), eps).item() == pytest.approx(
        np.sqrt(101) - 1 + 0.1, rel=1e-6)


# ---- mixed priorities ----------------------------------------------------------------


def test_mixed_priority_is_09_max_plus_01_mean_over_masked_steps() -> None:
    td = torch.tensor([[1.0, -4.0, 2.0, 100.0],
                       [0.5, 0.5, -0.5, 0.5],
                       [3.0, 3.0, 3.0, 3.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0],   # the 100 is padding: ignored
                         [1.0, 1.0, 1.0, 1.0],
                         [0.0, 0.0, 0.0, 0.0]])  # no step with a target: priority 0
    p = mixed_priority(td, mask, 0.9)
    assert p[0].item() == pytest.approx(0.9 * 4.0 + 0.1 * (1 + 4 + 2) / 3)
    assert p[1].item() == pytest.approx(0.5)
    assert p[2].item() == 0.0
    assert mixed_priority(td, mask, 1.0)[0].item() == pytest.approx(4.0)
    assert mixed_priority(td, mask, 0.0)[0].item() == pytest.approx(7 / 3)


# ---- n-step targets --------------------------------------------------------------------


def _nstep_reference(reward: list[float], done: list[float], mask: list[float],
                     valid: list[float], n: int, gamma: float) -> list[tuple[float, int, float,
                                                                             float]]:
    """The targets' pieces by plain loops: (return, bootstrap index, discount, has target)."""
    out = []
    T = len(reward)  # noqa: N806
    for t in range(T):
        ret, g, k, term = 0.0, 1.0, 0, False
        for i in range(n):
            s = t + i
            if s >= T or not mask[s] or not (done[s] or (s + 1 < T and valid[s + 1])):
                break
            ret += g * reward[s]
            g *= gamma
            k += 1
            if done[s]:
                term = True
                break
        out.append((ret, min(t + k, T - 1), 0.0 if term else g,
                    1.0 if mask[t] and k > 0 else 0.0))
    return out


def test_nstep_targets_match_plain_loops() -> None:
    rng = np.random.default_rng(3)
    cases = [  # (reward, done, mask, valid): terminated, truncated, mid-sequence windows
        ([1, 1, 1, 1, 0, 0], [0, 0, 0, 1, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]),
        ([1, 2, 3, 4, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]),
        ([1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]),
        ([5, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]),
    ]
    for _ in range(20):
        T = 7  # noqa: N806
        n_real = int(rng.integers(1, T + 1))
        term = bool(rng.integers(2))
        mask = [1.0] * n_real + [0.0] * (T - n_real)
        valid = [1.0] * min(T, n_real + 1) + [0.0] * (T - min(T, n_real + 1))
        done = [0.0] * T
        if term:
            done[n_real - 1] = 1.0
        cases.append((list(rng.normal(size=T)), done, mask, valid))
    for n in (1, 3, 5):
        for reward, done, mask, valid in cases:
            ret, idx, disc, has = nstep_targets(*(torch.tensor([x], dtype=torch.float32)
                                                  for x in (reward, done, mask, valid)),
                                                n=n, gamma=0.9)
            want = _nstep_reference(reward, done, mask, valid, n, 0.9)
            for t, (r, i, d, h) in enumerate(want):
                assert has[0, t].item() == h, (n, reward, done, t)
                if h:
                    assert ret[0, t].item() == pytest.approx(r, abs=1e-5), (n, t)
                    assert idx[0, t].item() == i and disc[0, t].item() == pytest.approx(d)


# ---- burn-in and stored state -----------------------------------------------------------


def _batch(cfg: R2D2Config, b: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    L, H = cfg.seq_len, cfg.hidden  # noqa: N806
    done = torch.zeros(b, L)
    done[0, L - 3] = 1.0
    mask = torch.ones(b, L)
    mask[0, L - 2:] = 0.0
    valid = torch.ones(b, L)
    valid[0, L - 1:] = 0.0
    return {"obs": torch.randn(b, L, 2, generator=g),
            "prev_action": torch.randint(0, 2, (b, L), generator=g),
            "action": torch.randint(0, 2, (b, L), generator=g),
            "reward": torch.ones(b, L), "done": done, "mask": mask, "valid": valid,
            "h0": torch.randn(b, H, generator=g), "c0": torch.randn(b, H, generator=g)}


def test_burn_in_gets_no_gradient_and_uses_the_stored_state() -> None:
    cfg = R2D2Config(seq_len=12, period=6, burn_in=5, hidden=16, n_step=3, gamma=0.99)
    b = cfg.burn_in
    torch.manual_seed(0)
    net = RecurrentQNet(2, 2, cfg.hidden)
    target = RecurrentQNet(2, 2, cfg.hidden)
    batch = _batch(cfg, 4)
    batch["obs"].requires_grad_(True)
    batch["h0"].requires_grad_(True)
    td, mask = sequence_td(net, target, batch, cfg)
    assert td.shape == mask.shape == (4, cfg.seq_len)
    assert float(mask[:, :b].abs().sum()) == 0.0, "a burn-in step was trained"
    (td.pow(2) * mask).sum().backward()
    g = batch["obs"].grad
    assert g is not None
    assert float(g[:, :b].abs().sum()) == 0.0, "gradient reached the burn-in steps"
    assert float(g[:, b:].abs().sum()) > 0.0
    assert batch["h0"].grad is None  # the stored state is an input, not trained through
    assert any(float(p.grad.abs().sum()) > 0 for p in net.parameters() if p.grad is not None)
    assert all(p.grad is None for p in target.parameters())

    # burning in from (h0, c0) and then training is the same as running the online
    # net from (h0, c0) over the whole sequence: the TD errors of the trained steps agree
    batch = {k: v.detach() for k, v in batch.items()}
    with torch.no_grad():
        td0, mask0 = sequence_td(net, target, batch, cfg)
        td_burn0, mask_burn0 = sequence_td(net, target, batch,
                                           dataclasses.replace(cfg, burn_in=0))
        # another stored state changes the Q-values: zero state is not the same
        td_zero, _ = sequence_td(net, target, {**batch, "h0": torch.zeros_like(batch["h0"]),
                                               "c0": torch.zeros_like(batch["c0"])}, cfg)
    assert torch.allclose(td0[:, b:], td_burn0[:, b:], atol=1e-5)
    assert torch.equal(mask0[:, b:], mask_burn0[:, b:])
    assert not torch.allclose(td0[:, b:], td_zero[:, b:], atol=1e-3)
    # the padded steps of sequence 0 have no target; the terminated one has
    assert mask0[0, -2:].tolist() == [0.0, 0.0] and mask0[0, -3].item() == 1.0


def test_a_sequence_that_starts_its_episode_is_trained_from_its_first_step() -> None:
    """Its stored state is the initial one (zeros), which cannot be stale: no burn-in, so
    an episode shorter than the burn-in still teaches something; in the same batch a
    sequence from later in an episode still burns in."""
    cfg = R2D2Config(seq_len=12, period=6, burn_in=5, hidden=16, n_step=3, gamma=0.99)
    b = cfg.burn_in
    torch.manual_seed(1)
    net, target = RecurrentQNet(2, 2, cfg.hidden), RecurrentQNet(2, 2, cfg.hidden)
    batch = _batch(cfg, 3, seed=2)
    batch["h0"][1] = 0.0
    batch["c0"][1] = 0.0  # sequence 1 starts its episode
    batch["obs"].requires_grad_(True)
    td, mask = sequence_td(net, target, batch, cfg)
    assert mask[1, :b].tolist() == [1.0] * b and float(mask[[0, 2], :b].abs().sum()) == 0.0
    (td.pow(2) * mask).sum().backward()
    g = batch["obs"].grad
    assert g is not None and float(g[1, 0].abs().sum()) > 0.0
    assert float(g[[0, 2], :b].abs().sum()) == 0.0
    # its TD errors are those of burn-in 0 (the same sequence, no burn-in at all)
    batch = {k: v.detach() for k, v in batch.items()}
    with torch.no_grad():
        td_a, _ = sequence_td(net, target, batch, cfg)
        td_b, _ = sequence_td(net, target, batch, dataclasses.replace(cfg, burn_in=0))
    assert torch.allclose(td_a[1], td_b[1], atol=1e-6)


# ---- the sequence writer ------------------------------------------------------------------


def _play(writer: SequenceWriter, rewards: list[float], terminated: bool,
          ) -> tuple[list[dict[str, np.ndarray]], list[int]]:
    """A toy episode: obs t is [t, -t], state before step t is t * ones; returns the
    sequences and the step after which each was emitted (-1: at the episode's end)."""
    out, when = [], []
    H = writer.hidden  # noqa: N806
    for t, r in enumerate(rewards):
        last = t == len(rewards) - 1
        got = writer.append(np.array([t, -t], np.float32), max(t - 1, 0), np.full(H, t),
                            np.full(H, -t), t % 2, r, terminated and last)
        out += got
        when += [t] * len(got)
    got = writer.end_episode(np.array([len(rewards), -len(rewards)], np.float32))
    return out + got, when + [-1] * len(got)


def test_sequence_writer_overlap_period_padding_and_mask() -> None:
    w = SequenceWriter(seq_len=4, period=2, obs_dim=2, hidden=3)
    seqs, when = _play(w, [1.0] * 7, terminated=True)
    # starts 0, 2, 4, 6: two full ones as soon as their 4th step is in, two at the end
    assert when == [3, 5, -1, -1]
    starts = [int(s["obs"][0, 0, 0]) for s in seqs]
    assert starts == [0, 2, 4, 6]
    for s, start in zip(seqs, starts, strict=True):
        assert s["h0"][0].tolist() == [start] * 3 and s["c0"][0].tolist() == [-start] * 3
    # overlap: the last seq_len - period steps of one are the first of the next
    for a, b in itertools.pairwise(seqs):
        np.testing.assert_array_equal(a["obs"][0, 2:], b["obs"][0, :2])
        np.testing.assert_array_equal(a["action"][0, 2:], b["action"][0, :2])
    assert seqs[0]["mask"][0].tolist() == [1, 1, 1, 1] and seqs[0]["done"][0].sum() == 0
    # start 4: steps 4, 5, 6 (6 terminated), then the final observation (valid, no mask)
    s = seqs[2]
    assert s["mask"][0].tolist() == [1, 1, 1, 0] and s["valid"][0].tolist() == [1, 1, 1, 1]
    assert s["done"][0].tolist() == [0, 0, 1, 0] and s["obs"][0, 3].tolist() == [7, -7]
    # start 6: step 6, the final observation, then zero padding
    s = seqs[3]
    assert s["mask"][0].tolist() == [1, 0, 0, 0] and s["valid"][0].tolist() == [1, 1, 0, 0]
    assert s["obs"][0, 2:].sum() == 0 and s["reward"][0].tolist() == [1, 0, 0, 0]
    assert s["prev_action"][0, 0] == 5

    # the writer starts over after end_episode; a truncated episode ending on a sequence
    # boundary gets the final observation in a sequence of its own (for the bootstrap)
    seqs, when = _play(w, [2.0] * 4, terminated=False)
    assert when == [3, -1] and [int(s["obs"][0, 0, 0]) for s in seqs] == [0, 2]
    assert seqs[1]["valid"][0].tolist() == [1, 1, 1, 0] and seqs[1]["done"][0].sum() == 0

    # items pack into the table's schema (one row each) and come back unchanged
    cfg = R2D2Config(seq_len=4, period=2, burn_in=2, hidden=3)
    schema = sequence_schema(cfg, 2)
    batch = {k: np.concatenate([s[k] for s in seqs]) for k in seqs[0]}
    back = schema.unpack(schema.pack(batch))
    for k in batch:
        np.testing.assert_array_equal(back[k], batch[k])

    with pytest.raises(ValueError, match="period"):
        SequenceWriter(seq_len=4, period=5, obs_dim=2, hidden=3)


def test_sequence_writer_period_equal_to_length_does_not_overlap() -> None:
    w = SequenceWriter(seq_len=3, period=3, obs_dim=2, hidden=1)
    seqs, when = _play(w, [1.0] * 9, terminated=False)
    assert [int(s["obs"][0, 0, 0]) for s in seqs] == [0, 3, 6] and when == [2, 5, 8]
    assert len(w.steps) == 0  # nothing kept once emitted


def _actor_episodes(cfg: R2D2Config, episodes: int, seed: int,
                    ) -> list[dict[str, Any]]:
    """What an R2D2 actor sees and does on masked CartPole: the LSTM (untrained) carries
    its state, actions balance the pole from the hidden state (long episodes, some
    truncated at 500) or are random (short ones, terminated). Per episode: the steps
    (obs, prev_action, h, c, action, reward, terminated) and the final observation."""
    torch.manual_seed(seed)
    net = RecurrentQNet(2, 2, cfg.hidden).eval()
    env = make_env(cfg)
    rng = np.random.default_rng(seed)
    out = []
    try:
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed + ep)
            state, prev, steps = net.initial_state(1), 0, []
            balance = ep % 3 != 2
            while True:
                with torch.inference_mode():
                    _, new_state = net(torch.from_numpy(obs)[None, None],
                                       torch.tensor([[prev]]), state)
                full = env.unwrapped.state  # type: ignore[attr-defined]
                if balance and rng.random() > 0.05:
                    action = int(full[2] + 0.5 * full[3] > 0)
                else:
                    action = int(rng.integers(2))
                nxt, reward, terminated, truncated, _ = env.step(action)
                steps.append((obs.copy(), prev, state[0][0].numpy().copy(),
                              state[1][0].numpy().copy(), action, float(reward),
                              bool(terminated)))
                obs, prev, state = nxt, action, new_state
                if terminated or truncated:
                    break
            out.append({"steps": steps, "final": obs.copy()})
    finally:
        env.close()
    return out


def test_stream_writer_stores_steps_once_and_samples_back_the_packed_sequences(
        replay_server: ServerProcess) -> None:
    """An actor's sequences through the trajectory writer, sampled back (in
    insertion order: a FIFO sampler with MAX_TIMES_SAMPLED 1), are byte-identical to the
    packed SequenceWriter's items and to the environment's steps (obs, actions, rewards,
    the stored state at each first step), and overlapping sequences share chunks: the
    appliance holds well under the packed form's bytes per step."""
    from pyctl.client import ReplayClient
    from pyctl.errors import decode_info
    from pyctl.trajectory import chunk_stats, create_trajectory_table, sample_trajectories

    cfg = R2D2Config(**CARTPOLE)
    L, P, H = cfg.seq_len, cfg.period, cfg.hidden  # noqa: N806
    eps = _actor_episodes(cfg, 9, seed=11)
    lengths = [len(e["steps"]) for e in eps]
    assert max(lengths) == 500 and min(lengths) < 100, lengths  # truncated and terminated
    r = replay_server.client()
    rc = ReplayClient(connection=r)
    base = chunk_stats(r)
    for t in ("r2d2t-packed", "r2d2t-traj"):
        if t.encode() in r.execute_command("REPLAY.LIST"):
            r.execute_command("REPLAY.DROP", t)
    schema = sequence_schema(cfg, 2)
    rc.create("r2d2t-packed", 100_000)
    create_trajectory_table(r, "r2d2t-traj", 100_000, sampler="fifo", max_times_sampled=1)
    packed_w = SequenceWriter(L, P, 2, H)
    stream_w = SequenceStreamWriter(rc, "r2d2t-traj", "r2d2t:steps:0", L, P, 2, 2, H)
    packed: list[dict[str, np.ndarray]] = []
    starts: list[tuple[int, int]] = []  # (episode, first step) of each sequence, in order
    made = 0
    try:
        for e, ep in enumerate(eps):
            got: list[dict[str, np.ndarray]] = []
            for i, step in enumerate(ep["steps"]):
                got += packed_w.append(*step)
                made += stream_w.append(*step)
                if i % 37 == 36:
                    stream_w.flush()
            got += packed_w.end_episode(ep["final"])
            made += stream_w.end_episode(ep["final"])
            starts += [(e, int(s)) for s in range(0, len(ep["steps"]), P)]
            rc.add("r2d2t-packed", None, {k: np.concatenate([g[k] for g in got])
                                          for k in got[0]}, schema=schema)
            packed += got
        stream_w.close()
        n = len(packed)
        assert made == n == len(starts)
        env_steps = sum(lengths)

        # bytes per environment step, as the server counts them
        info_p = decode_info(r.execute_command("REPLAY.INFO", "r2d2t-packed"))
        info_t = decode_info(r.execute_command("REPLAY.INFO", "r2d2t-traj"))
        ch = chunk_stats(r)
        assert info_p["size"] == info_t["size"] == n
        packed_bps = info_p["bytes_used"] / env_steps
        traj_bps = (info_t["bytes_used"] + ch["memory"] - base["memory"]) / env_steps
        state_bps = n * 2 * H * 4 / env_steps  # one stored state per sequence, either way
        print(f"bytes per env step: packed {packed_bps:.1f}, stored once {traj_bps:.1f} "
              f"({traj_bps / packed_bps:.2f}x; of which the stored state {state_bps:.1f}); "
              f"steps without the state: {packed_bps - state_bps:.1f} -> "
              f"{traj_bps - state_bps:.1f}")
        # a step is held once: the chunks span the env steps (plus per-episode padding and
        # the last chunk's tail), not the items' seq_len / period = 2x of them
        step_bytes = 8 + 1 + 1 + 4 + 1
        referenced = n * L * step_bytes
        chunk_bytes = ch["chunk_bytes"] - base["chunk_bytes"] - n * 2 * H * 4
        assert chunk_bytes < 0.65 * referenced, (chunk_bytes, referenced)
        assert ch["references"] - base["references"] > ch["chunks"] - base["chunks"]
        assert traj_bps - state_bps < 0.5 * (packed_bps - state_bps)
        assert traj_bps < 0.7 * packed_bps

        # every item back, in order, equal to the packed items and to the env's steps
        s = sample_trajectories(r, "r2d2t-traj", n)
        back = sequences_from_columns(s.columns)
        want = {k: np.concatenate([p[k] for p in packed]) for k in packed[0]}
        assert set(back) == set(want)
        for k in want:
            b = back[k].numpy()
            assert b.dtype == want[k].dtype and b.shape == want[k].shape, k
            assert b.tobytes() == want[k].tobytes(), k
        for j, (e, first) in enumerate(starts):
            steps = eps[e]["steps"][first:first + L]
            m = len(steps)
            assert back["obs"][j, :m].numpy().tobytes() == np.stack(
                [x[0] for x in steps]).tobytes()
            assert back["action"][j, :m].tolist() == [x[4] for x in steps]
            assert back["prev_action"][j, :m].tolist() == [x[1] for x in steps]
            assert back["reward"][j, :m].tolist() == [x[5] for x in steps]
            assert back["h0"][j].numpy().tobytes() == steps[0][2].tobytes()
            assert back["c0"][j].numpy().tobytes() == steps[0][3].tobytes()
            if m < L:  # the final observation after the last step, then padding
                assert back["obs"][j, m].numpy().tobytes() == eps[e]["final"].tobytes()
                assert back["valid"][j].tolist() == [1.0] * (m + 1) + [0.0] * (L - m - 1)
        # the batch trains as a packed one does
        net, tgt = RecurrentQNet(2, 2, H), RecurrentQNet(2, 2, H)
        with torch.no_grad():
            td_a, _ = sequence_td(net, tgt, {k: v[:64] for k, v in back.items()}, cfg)
            td_b, _ = sequence_td(net, tgt, {k: torch.from_numpy(v[:64])
                                             for k, v in want.items()}, cfg)
        assert torch.equal(td_a, td_b)
    finally:
        for t in ("r2d2t-packed", "r2d2t-traj"):
            r.execute_command("REPLAY.DROP", t)
        for st in ("r2d2t:steps:0", "r2d2t:steps:0:state"):
            with contextlib.suppress(Exception):
                r.execute_command("REPLAY.STREAM", st, "DROP")
        r.close()
    after = chunk_stats(r)
    assert after["chunks"] == base["chunks"]


def test_step_policy_acts_as_the_torch_network_does() -> None:
    """The actors' NumPy step gives the module's Q and (h, c) over a 200-step episode,
    before and after new weights are loaded (as an actor does on a parameter pull)."""
    torch.manual_seed(3)
    net = RecurrentQNet(2, 2, 64).eval()
    policy = StepPolicy(net)
    rng = np.random.default_rng(0)
    for phase in range(2):
        state = net.initial_state(1)
        mine = policy.initial_state()
        assert all(x.dtype == np.float32 and x.shape == (64,) and not x.any() for x in mine)
        for _ in range(200):
            obs = rng.standard_normal(2).astype(np.float32)
            prev = int(rng.integers(2))
            with torch.inference_mode():
                q, state = net(torch.from_numpy(obs)[None, None], torch.tensor([[prev]]), state)
            q_np, mine = policy.step(obs, prev, mine)
            assert q_np.dtype == np.float32 and q_np.shape == (2,)
            np.testing.assert_allclose(q_np, q[0, 0].numpy(), rtol=0, atol=1e-5)
            np.testing.assert_allclose(mine[0], state[0][0].numpy(), rtol=0, atol=1e-5)
            np.testing.assert_allclose(mine[1], state[1][0].numpy(), rtol=0, atol=1e-5)
        if phase == 0:  # new parameters: the copy follows only after load()
            with torch.no_grad():
                for prm in net.parameters():
                    prm.add_(0.1 * torch.randn_like(prm))
            stale, _ = policy.step(obs, prev, mine)
            policy.load(net)
            fresh, _ = policy.step(obs, prev, mine)
            assert not np.allclose(stale, fresh)


def test_masked_cartpole_hides_the_velocities() -> None:
    env = make_env(R2D2Config())
    try:
        assert isinstance(env, MaskVelocity) and env.observation_space.shape == (2,)
        obs, _ = env.reset(seed=1)
        full = env.unwrapped.state  # type: ignore[attr-defined]
        assert obs.tolist() == pytest.approx([full[0], full[2]])
    finally:
        env.close()


# ---- the demo ---------------------------------------------------------------------------


def test_demo_flags_apply_the_cartpole_preset_then_the_flags() -> None:
    from inreplay.rl.r2d2 import parse

    args, cfg = parse(["--out", "/tmp/x", "--minutes", "3", "--stack", "kernel",
                       "--burn-in", "5"])
    assert cfg.hidden == CARTPOLE["hidden"] and cfg.burn_in == 5 and cfg.out_dir == "/tmp/x"
    assert args.minutes == 3 and args.stack == "kernel"
    # R2D2's sequences, in the demo too: 80 steps every 40, burn-in 40
    assert (cfg.seq_len, cfg.period) == (80, 40) and parse([])[1].burn_in == 40
    with pytest.raises(SystemExit):
        parse(["--burn-in", "80"])  # not below seq_len 80


@pytest.mark.parametrize("algo", ["apex", "impala", "r2d2", "a3c"])
def test_every_demo_takes_the_update_budget_and_checks_it(algo: str) -> None:
    """--updates (rl/harness.py's add_budget_flags) on every demo, its check one line."""
    for argv, want in ((["--updates", "-1"], "--updates: must be >= 0"),
                       (["--minutes", "0"], "--minutes: must be > 0")):
        bad = subprocess.run([sys.executable, "-m", "pyctl", "demo", "--algo", algo, *argv],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2 and want in bad.stderr, (algo, bad.stderr)
        assert len(bad.stderr.strip().splitlines()) <= 2, bad.stderr  # usage + the error
    ok = subprocess.run([sys.executable, "-m", "pyctl", "demo", "--algo", algo, "--help"],
                        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "--updates N" in ok.stdout, ok.stdout


DEMO_UPDATES = 15_000
"""The learner updates the R2D2 demo gets to solve masked CartPole (solved runs took
3,270 to 5,570, docs/patterns.md)."""
HANG_MINUTES = 45
"""Only a guard against a hung run: learning is judged in updates, not wall time."""


@pytest.mark.slow
def test_r2d2_demo_solves_masked_cartpole_within_its_update_budget(tmp_path: Path) -> None:
    """`python -m inreplay.actors.r2d2` solves CartPole-v1 with the velocities
    hidden (20 fresh-seed greedy episodes, mean >= 475) within DEMO_UPDATES learner
    updates."""
    out = tmp_path / "r2d2"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "inreplay.actors.r2d2", "--out", str(out),
                           "--updates", str(DEMO_UPDATES), "--minutes", str(HANG_MINUTES),
                           "--stack", "kernel"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=HANG_MINUTES * 60 + 120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert_learned(s, DEMO_UPDATES)
    assert s["learner_steps"] > 0 and s["learner_steps_per_s"] > 0 and s["env_steps"] > 0
    assert proc.stdout.strip().splitlines()[-1] == "solved: true"
