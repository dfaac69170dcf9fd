"""Unit tests of the actors package: epsilon ladder, n-step returns, priorities,
the dueling network, transition records and parameter blobs, the configuration."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from inreplay.actors.actor import epsilon_ladder  # noqa: E402
from inreplay.rl.codec import HEADER_BYTES, TransitionCodec  # noqa: E402
from inreplay.rl.config import Config, add_arguments, field_docs, from_args, preset  # noqa: E402
from inreplay.rl.env import EnvSpec, env_spec, make_env  # noqa: E402
from inreplay.rl.model import (  # noqa: E402
    BlobError,
    MlpPolicy,
    build_model,
    load_blob,
    param_count,
    params_to_blob,
    pull_blob,
)
from inreplay.rl.nstep import NStep, td_priorities  # noqa: E402

ATARI = EnvSpec((4, 84, 84), np.dtype(np.uint8), 4, 4, True, None)
CARTPOLE = EnvSpec((4,), np.dtype(np.float32), 2, 1, False, 475.0)


# ---- epsilon ladder -----------------------------------------------------------------


def test_epsilon_ladder_matches_apex() -> None:
    assert epsilon_ladder(0, 1) == pytest.approx(0.4)
    n = 8
    eps = [epsilon_ladder(i, n) for i in range(n)]
    assert eps[0] == pytest.approx(0.4)
    assert eps[-1] == pytest.approx(0.4**8)
    for i, e in enumerate(eps):
        assert e == pytest.approx(0.4 ** (1 + 7 * i / (n - 1)))
    assert all(a > b for a, b in itertools.pairwise(eps))
    assert epsilon_ladder(1, 2, base=0.5, alpha=3) == pytest.approx(0.5**4)
    with pytest.raises(ValueError):
        epsilon_ladder(2, 2)


# ---- n-step returns -------------------------------------------------------------------


def _reference(rewards: list[float], ends: list[str], n: int, gamma: float,
               ) -> list[tuple[int, float, float, int, int]]:
    """Brute force over a whole trajectory: (t, R, discount, k, index of s_{t+k})."""
    out = []
    start = 0
    for t in range(len(rewards)):
        # the episode segment containing t ends at the first end >= t
        end = next(j for j in range(t, len(rewards)) if ends[j] != "")
        k = min(n, end - t + 1)
        ret = sum(gamma**i * rewards[t + i] for i in range(k))
        last = t + k - 1
        terminal = ends[last] == "term"
        disc = 0.0 if terminal else gamma**k
        out.append((t, ret, disc, k, last + 1))
        if t == end:
            start = end + 1
    assert start == len(rewards)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_nstep_matches_brute_force(n: int) -> None:
    rng = np.random.default_rng(n)
    gamma = 0.9
    length = 200
    rewards = rng.normal(size=length).round(3).tolist()
    ends = [""] * length
    for j in rng.choice(length - 1, size=25, replace=False):
        ends[j] = "term" if rng.random() < 0.5 else "trunc"
    ends[-1] = "term"
    # observation i is "s_i"; the step at t goes from s_t to s_{t+1}
    acc = NStep(n, gamma)
    got = []
    for t in range(length):
        for tr in acc.step(t, t % 3, rewards[t], t + 1, ends[t] == "term", ends[t] == "trunc",
                           extra=-t):
            got.append(tr)
    want = _reference(rewards, ends, n, gamma)
    assert len(got) == len(want) == length
    got.sort(key=lambda tr: tr.obs)
    for tr, (t, ret, disc, k, nxt) in zip(got, want, strict=True):
        assert tr.obs == t and tr.action == t % 3 and tr.extra == -t
        assert tr.ret == pytest.approx(ret, abs=1e-9)
        assert tr.discount == pytest.approx(disc)
        assert tr.steps == k
        assert tr.next_obs == nxt


def test_nstep_emits_in_order_and_truncation_bootstraps() -> None:
    acc = NStep(3, 0.5)
    assert acc.step("s0", 0, 1.0, "s1", False) == []
    assert acc.step("s1", 1, 2.0, "s2", False) == []
    (t0,) = acc.step("s2", 0, 4.0, "s3", False)
    assert (t0.obs, t0.ret, t0.discount, t0.next_obs, t0.steps) == ("s0", 1 + 1 + 1, 0.125,
                                                                    "s3", 3)
    out = acc.step("s3", 1, 8.0, "s4", False, truncated=True)
    assert [t.obs for t in out] == ["s1", "s2", "s3"]
    assert [t.ret for t in out] == [2 + 2 + 2, 4 + 4, 8]
    assert [t.discount for t in out] == [0.125, 0.25, 0.5]  # truncation is not terminal
    assert all(t.next_obs == "s4" for t in out)
    assert len(acc) == 0
    (t,) = acc.step("s5", 0, 3.0, "s6", True)
    assert (t.ret, t.discount, t.steps) == (3.0, 0.0, 1)


def test_td_priorities() -> None:
    p = td_priorities([1.0, 2.0, -1.0], [0.5, 1.0, 0.0], [0.9, 0.0, 0.81], [2.0, 100.0, -1.0])
    np.testing.assert_allclose(p, [abs(0.5 + 1.8 - 1.0), 1.0, abs(-0.81 + 1.0)])
    assert (p >= 0).all()


# ---- network -------------------------------------------------------------------------


def test_atari_dueling_network_is_the_seeds_13mb() -> None:
    model = build_model(ATARI)
    n = param_count(model)
    assert 3_200_000 < n < 3_400_000, n
    blob = params_to_blob(model)
    assert 12.5e6 < len(blob) < 13.5e6
    q = model(torch.zeros((2, 4, 84, 84), dtype=torch.uint8))
    assert q.shape == (2, 4)


def test_dueling_aggregation() -> None:
    model = build_model(CARTPOLE, hidden=16)
    x = torch.randn(5, 4)
    h = model.torso(x)
    v = model.value(h)
    q = model(x)
    # mean over actions of Q is V (the advantages are centred)
    torch.testing.assert_close(q.mean(dim=1, keepdim=True), v)


def test_numpy_policy_is_the_torch_network() -> None:
    """The actors act through MlpPolicy: the same Q values as the torch module (float32,
    another summation order), and after a parameter pull (load) the new network's."""
    torch.manual_seed(0)
    net = build_model(CARTPOLE, hidden=32)
    policy = MlpPolicy(net)
    obs = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    with torch.inference_mode():
        want = net(torch.from_numpy(obs)).numpy()
    got = np.stack([policy.q(o) for o in obs])
    assert got.dtype == np.float64 and got.shape == (20, CARTPOLE.n_actions)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    torch.manual_seed(1)
    other = build_model(CARTPOLE, hidden=32)
    load_blob(net, params_to_blob(other))
    np.testing.assert_array_equal(policy.q(obs[0]), got[0])  # its own copy until load
    policy.load(net)
    with torch.inference_mode():
        new = other(torch.from_numpy(obs[:1]))[0].numpy()
    assert not np.allclose(new, got[0])
    np.testing.assert_allclose(policy.q(obs[0]), new, rtol=1e-5, atol=1e-6)


def test_parameter_blob_round_trip_and_checks() -> None:
    torch.manual_seed(0)
    a = build_model(CARTPOLE, hidden=32)
    torch.manual_seed(1)
    b = build_model(CARTPOLE, hidden=32)
    blob = params_to_blob(a)
    assert blob[:4] == b"IRPB"
    assert len(blob) == 24 + 4 * param_count(a)
    load_blob(b, blob)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb
        torch.testing.assert_close(va, vb, rtol=0, atol=0)
    # the blob is raw float32 in state_dict order, nothing else
    first = next(iter(a.state_dict().values())).reshape(-1).numpy()
    np.testing.assert_array_equal(np.frombuffer(blob, "<f4", count=first.size, offset=24), first)
    with pytest.raises(BlobError, match="layout"):
        load_blob(build_model(CARTPOLE, hidden=16), blob)
    with pytest.raises(BlobError):
        load_blob(b, blob[:-4])
    with pytest.raises(BlobError):
        load_blob(b, b"PK\x03\x04" + blob[4:])  # not ours (e.g. a zip / torch.save file)
    with pytest.raises(BlobError):
        load_blob(b, b"")


def test_pull_blob_loads_the_blob_and_hands_back_the_keys_written_with_it(
        server_factory: Any) -> None:
    srv = server_factory("inreplay")
    r = srv.client()
    torch.manual_seed(0)
    a = build_model(CARTPOLE, hidden=32)
    torch.manual_seed(1)
    b = build_model(CARTPOLE, hidden=32)
    said: list[str] = []
    assert pull_blob(r, b, "p", "v", say=said.append) is None  # nothing published yet
    r.mset({"p": params_to_blob(a), "v": 7})
    assert pull_blob(r, b, "p", "v", say=said.append) == [b"7"]
    for va, vb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(va, vb, rtol=0, atol=0)
    r.set("p", b"PK\x03\x04 not a blob")  # a foreign value: said, not raised
    assert pull_blob(r, b, "p", "v", say=said.append) is None
    assert said and said[0].startswith("cannot load parameters: ")
    assert not said[1:]


# ---- transition records --------------------------------------------------------------


def test_codec_vector_round_trip() -> None:
    rng = np.random.default_rng(0)
    codec = TransitionCodec((4,), np.float32, n_step=3)
    assert codec.itemsize == HEADER_BYTES + 2 * 4 * 4
    b = 64
    obs = rng.normal(size=(b, 4)).astype(np.float32)
    nxt = rng.normal(size=(b, 4)).astype(np.float32)
    act = rng.integers(0, 2, b)
    ret = rng.normal(size=b).astype(np.float32)
    disc = rng.choice([0.0, 0.99**3], b).astype(np.float32)
    steps = rng.integers(1, 4, b)
    rows = codec.encode(obs, act, ret, disc, nxt, steps)
    assert rows.shape == (b, codec.itemsize) and rows.dtype == np.uint8
    for data in (rows, rows.tobytes(), [r.tobytes() for r in rows]):
        out = codec.decode(data)
        np.testing.assert_array_equal(out.obs, obs)
        np.testing.assert_array_equal(out.next_obs, nxt)
        np.testing.assert_array_equal(out.action, act)
        np.testing.assert_array_equal(out.ret, ret)
        np.testing.assert_array_equal(out.discount, disc)
    with pytest.raises(ValueError):
        codec.decode(rows.tobytes()[:-1])


@pytest.mark.parametrize("n", [1, 3, 4, 6])
def test_codec_frames_share_stacked_frames(n: int) -> None:
    rng = np.random.default_rng(n)
    codec = TransitionCodec((4, 84, 84), np.uint8, n_step=n)
    assert codec.nframes == 4 + min(n, 4)
    assert codec.itemsize == HEADER_BYTES + codec.nframes * 84 * 84
    seq = rng.integers(0, 256, size=(40, 84, 84), dtype=np.uint8)  # one frame per step
    ts = np.arange(8) * 3
    ks = np.array([n, 1, n, max(1, n - 1), n, 1, n, n])[: len(ts)]
    obs = np.stack([seq[t:t + 4] for t in ts])
    nxt = np.stack([seq[t + k:t + k + 4] for t, k in zip(ts, ks, strict=True)])
    rows = codec.encode(obs, np.arange(len(ts)), np.ones(len(ts)), np.zeros(len(ts)), nxt, ks)
    out = codec.decode(rows)
    np.testing.assert_array_equal(out.obs, obs)
    np.testing.assert_array_equal(out.next_obs, nxt)
    np.testing.assert_array_equal(out.action, np.arange(len(ts)))


def test_atari_frame_stacks_follow_the_sharing_rule() -> None:
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    cfg = preset("ALE/Breakout-v5", noop_max=0)
    spec = env_spec(cfg)
    assert spec.obs_shape == (4, 84, 84) and spec.obs_dtype == np.uint8 and spec.pixels
    env = make_env(cfg, seed=0)
    obs, info = env.reset(seed=0)
    assert "lives" in info
    prev = [obs]
    codec = TransitionCodec(spec.obs_shape, np.uint8, n_step=3)
    for i in range(12):
        obs, *_ = env.step(1 if i == 0 else 2)  # FIRE, then move
        prev.append(obs)
        np.testing.assert_array_equal(prev[-1][:3], prev[-2][1:])
    env.close()
    rows = codec.encode(np.stack(prev[:5]), [1] * 5, [0] * 5, [0.97] * 5, np.stack(prev[3:8]),
                        [3] * 5)
    out = codec.decode(rows)
    np.testing.assert_array_equal(out.obs, np.stack(prev[:5]))
    np.testing.assert_array_equal(out.next_obs, np.stack(prev[3:8]))


# ---- configuration ----------------------------------------------------------------------


def test_every_config_field_has_a_docstring() -> None:
    docs = field_docs(Config)
    missing = [f.name for f in dataclasses.fields(Config) if not docs.get(f.name)]
    assert not missing, missing


def test_config_flags_presets_and_files(tmp_path: Path) -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    atari = from_args(p.parse_args([]))
    assert (atari.capacity, atari.alpha, atari.beta, atari.batch_size, atari.n_step) == (
        2_000_000, 0.6, 0.4, 512, 3)
    cp = from_args(p.parse_args(["--env", "CartPole-v1", "--lr", "0.01", "--clip-rewards",
                                 "true"]))
    assert cp.env_id == "CartPole-v1" and cp.lr == 0.01 and cp.clip_rewards is True
    assert cp.batch_size == preset("CartPole-v1").batch_size != 512
    path = tmp_path / "c.json"
    path.write_text(cp.to_json())
    again = from_args(p.parse_args(["--config", str(path), "--seed", "7"]))
    assert dataclasses.replace(again, seed=cp.seed) == cp and again.seed == 7
    with pytest.raises(ValueError, match="unknown"):
        Config.from_dict({**json.loads(cp.to_json()), "nope": 1})
    with pytest.raises(ValueError, match="replay"):
        from_args(p.parse_args(["--replay", "nowhere"]))


# ---- the actor process: manners and one-line errors ----------------------------------

ROOT = Path(__file__).resolve().parent.parent
ACTOR = [sys.executable, "-m", "inreplay.actors.actor"]


def test_repeated_warnings_are_collapsed_with_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from inreplay.actors import actor as actor_mod

    now = [100.0]
    monkeypatch.setattr(actor_mod.time, "monotonic", lambda: now[0])
    lines: list[str] = []
    log = actor_mod.Log(lines.append, every=5.0)
    for i in range(253):  # 253 bad blobs in 15 s
        log.warn("ignoring parameter blobs", f"ignoring parameter blob version {i}: bad")
        now[0] += 15.0 / 253
    log.flush()
    assert lines[0] == "ignoring parameter blob version 0: bad"
    assert len(lines) <= 5, lines
    counted = sum(int(x.split("repeated ")[1].split()[0]) for x in lines if "repeated" in x)
    counted += sum(int(x.split(": ")[1].split()[0]) for x in lines if "more times" in x)
    assert counted == 252, lines
    log("other")  # ordinary lines are not collapsed
    log("other")
    assert lines[-2:] == ["other", "other"]


@pytest.mark.parametrize("argv, code, message", [
    (["--actor-id", "5", "--num-actors", "2"], 2, "--actor-id 5 must be in [0, 2)"),
    (["--actor-id", "0", "--port", "1"], 1,
     "actor 0: cannot reach the server at 127.0.0.1:1: connection refused"),
    (["--actor-id", "0", "--config", "/nonexistent/c.json"], 2,
     "--config /nonexistent/c.json: No such file or directory"),
    (["--actor-id", "0", "--batch-size", "64"], 2, "unrecognized arguments: --batch-size"),
    (["--actor-id", "x"], 2, "--actor-id: invalid int value: 'x'"),
])
def test_actor_errors_are_one_line(argv: list[str], code: int, message: str) -> None:
    p = subprocess.run([*ACTOR, "--env", "CartPole-v1", *argv], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == code, (p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr


def test_replay_maxbytes_takes_size_units() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert from_args(p.parse_args(["--env", "CartPole-v1", "--replay-maxbytes", "64MB"])
                     ).replay_maxbytes == 64 << 20
    assert from_args(p.parse_args(["--replay-maxbytes", "2g"])).replay_maxbytes == 2 * 10**9


def test_actor_help_shows_only_the_actors_flags() -> None:
    p = subprocess.run([*ACTOR, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    for flag in ("--actor-id", "--eps-base", "--actor-batch", "--params-wait-s", "--n-step"):
        assert flag in p.stdout, flag
    for flag in ("--batch-size", "--lr", "--target-update", "--capacity", "--eval-every-s",
                 "--resume", "--out-dir"):
        assert flag not in p.stdout, flag


def test_actor_waiting_for_parameters_says_so_then_gives_up_in_one_line(
        inreplay_server: Any) -> None:
    p = subprocess.run([*ACTOR, "--env", "CartPole-v1", "--actor-id", "0", "--port",
                        str(inreplay_server.port), "--params-wait-s", "7"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, (p.stdout, p.stderr)
    waits = [x for x in p.stdout.splitlines() if "waiting for the learner's parameters" in x]
    assert len(waits) == 1 and "(5 of 7 s)" in waits[0], p.stdout
    assert p.stderr == (f"actor 0: no parameters from the learner on 127.0.0.1:"
                        f"{inreplay_server.port} within 7 s (--params-wait-s)\n")
