"""RLlib's episode replay buffer on inreplay (integrations/rllib.py), against a real
server: n-step transitions from episodes and fragments, prioritized sampling with
the server's weights, priority updates for the last batch, sizes; and a short
`python -m inreplay.integrations.rllib_dqn` run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import replay_group
from helpers import checkout_env

pytest.importorskip("ray.rllib")
pytest.importorskip("gymnasium")

from inreplay.integrations.rllib import InreplayEpisodeReplayBuffer
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

ROOT = Path(__file__).resolve().parent.parent


def _episode(ep: int, steps: int, *, terminated: bool = True, start: int = 0,
             eid: str | None = None) -> SingleAgentEpisode:
    """obs_t = [t, ep]; action_t = t % 2; reward_t = 1 + t + 100 ep (all distinct)."""
    e = SingleAgentEpisode(id_=eid or f"ep{ep}", len_lookback_buffer=0,
                           observations=[np.array([start + t, ep], np.float32)
                                         for t in range(steps + 1)],
                           actions=[(start + t) % 2 for t in range(steps)],
                           rewards=[1.0 + start + t + 100 * ep for t in range(steps)],
                           terminated=terminated, t_started=start)
    return e.to_numpy()


def _buffer(port: int, table: str, **kw: Any) -> InreplayEpisodeReplayBuffer:
    return InreplayEpisodeReplayBuffer(address=f"127.0.0.1:{port}", table=table, **kw)


def _all_transitions(buf: InreplayEpisodeReplayBuffer, gamma: float,
                     draws: int = 3000) -> dict[tuple[int, int], SingleAgentEpisode]:
    """Every stored transition keyed by (episode, t), from enough uniform draws."""
    seen: dict[tuple[int, int], SingleAgentEpisode] = {}
    for s in buf.sample(draws, n_step=buf.n_step, gamma=gamma):
        o = s.get_observations(0)
        seen[(int(o[1]), int(o[0]))] = s
    buf.update_priorities(np.ones(draws))
    return seen


def test_episodes_become_n_step_transitions(inreplay_server: Any) -> None:
    buf = _buffer(inreplay_server.port, "rl-nstep", capacity=1000, n_step=3, alpha=0.6)
    buf.add([_episode(0, 5), _episode(1, 4, terminated=False)])
    # episode 1 is unfinished: its last n-1 = 2 steps wait for the next fragment
    assert len(buf) == 5 + 2 and buf.get_num_timesteps() == 7
    assert buf.get_num_episodes() == 2 and buf.get_added_timesteps() == 9
    gamma = 0.5
    seen = _all_transitions(buf, gamma)
    assert sorted(seen) == [(0, t) for t in range(5)] + [(1, 0), (1, 1)]
    for (ep, t), s in seen.items():
        n = min(3, 5 - t) if ep == 0 else 3
        rewards = [1.0 + k + 100 * ep for k in range(t, t + n)]
        assert s.get_rewards()[0] == pytest.approx(sum(r * gamma**i
                                                       for i, r in enumerate(rewards)))
        assert list(s.get_observations(1)) == [t + n, ep]
        assert int(s.get_actions(0)) == t % 2
        assert s.get_extra_model_outputs("n_step")[0] == n
        assert s.get_extra_model_outputs("weights")[0] == pytest.approx(1.0)  # equal prios
        assert s.is_terminated == (ep == 0 and t + n == 5)
        assert not s.is_truncated


def test_fragments_of_one_episode_join_across_add_calls(inreplay_server: Any) -> None:
    buf = _buffer(inreplay_server.port, "rl-frag", capacity=1000, n_step=3)
    buf.add(_episode(7, 4, terminated=False, eid="E"))
    assert len(buf) == 2
    buf.add(_episode(7, 3, terminated=True, start=4, eid="E"))  # steps 4..6, done
    assert len(buf) == 7 and buf.get_num_episodes() == 1
    seen = _all_transitions(buf, gamma=1.0)
    assert sorted(seen) == [(7, t) for t in range(7)]
    for (_, t), s in seen.items():
        n = min(3, 7 - t)
        assert s.get_rewards()[0] == pytest.approx(sum(1.0 + k + 700 for k in range(t, t + n)))
        assert list(s.get_observations(1)) == [t + n, 7]
        assert s.is_terminated == (t + n == 7)


def test_priorities_and_weights_follow_the_last_batch(inreplay_server: Any) -> None:
    buf = _buffer(inreplay_server.port, "rl-prio", capacity=1000, n_step=1, alpha=1.0,
                  epsilon=0.0)
    buf.add([_episode(0, 50), _episode(1, 50)])
    assert len(buf) == 100
    batch = buf.sample(64, n_step=1, beta=0.4)
    hot = tuple(batch[0].get_observations(0))
    prios = [100.0 if tuple(s.get_observations(0)) == hot else 0.01 for s in batch]
    buf.update_priorities(np.array(prios))
    with pytest.raises(ValueError, match="update after each sample"):
        buf.update_priorities(np.ones(64))  # the batch was already updated
    draws = buf.sample(2000, n_step=1, beta=1.0)
    hits = [tuple(s.get_observations(0)) == hot for s in draws]
    info = buf.client.info("rl-prio")
    p_hot = 100.0 / info["total_priority"]
    assert abs(np.mean(hits) - p_hot) < 0.05
    w = {tuple(s.get_observations(0)): s.get_extra_model_outputs("weights")[0] for s in draws}
    # beta 1: w_i = (N P(i))^-1 / max_j w_j, so the hot item's weight is min_p / 100
    assert w[hot] == pytest.approx(info["min_priority"] / 100.0, rel=1e-3)
    assert max(w.values()) == pytest.approx(1.0)
    buf.update_priorities(np.ones(2000))
    assert buf.client.info("rl-prio")["updates"] >= 64 + 2000


def test_metrics_state_and_errors(inreplay_server: Any) -> None:
    buf = _buffer(inreplay_server.port, "rl-err", capacity=100, n_step=2)
    with pytest.raises(ValueError, match="nothing to sample yet"):
        buf.sample(4, n_step=2)
    buf.add(_episode(0, 10))
    with pytest.raises(ValueError, match="set replay_buffer_config's n_step"):
        buf.sample(4, n_step=3)
    with pytest.raises(ValueError, match="already exists"):
        _buffer(inreplay_server.port, "rl-err", n_step=2)
    buf.sample(4, n_step=2)
    m = buf.get_metrics()
    assert m["num_env_steps_added_lifetime"] == 10 and m["num_env_steps_sampled"] == 4
    # a second buffer continues the table (a restarted driver): same layout from the server
    again = _buffer(inreplay_server.port, "rl-err", n_step=2, if_exists="reuse")
    again.set_state(buf.get_state())
    assert len(again) == 10 and again.sample(3, n_step=2)[0].get_extra_model_outputs("n_step")
    with pytest.raises(ValueError, match="n_step"):
        _buffer(inreplay_server.port, "rl-err2", n_step=0)
    # capacity is per transition (FIFO on the server)
    small = _buffer(inreplay_server.port, "rl-small", capacity=8, n_step=1)
    small.add([_episode(0, 5), _episode(1, 6)])
    assert len(small) == 8 and small.client.info("rl-small")["evictions"] == 3


def test_over_a_replay_group(tmp_path: Path) -> None:
    """One member's address is enough: capacity is split, batches go to the shards in
    turn, samples and priority updates reach every shard."""
    with replay_group(tmp_path, "native", seed=None) as members:
        second = members[1]
        buf = InreplayEpisodeReplayBuffer(address=second, table="rl-group", capacity=100,
                                          n_step=1)
        assert len(buf.client.shards) == 2
        buf.add(_episode(0, 30))
        buf.add(_episode(1, 30))
        sizes = [rc.info("rl-group")["size"] for rc in buf.client.shards]
        caps = [rc.info("rl-group")["capacity"] for rc in buf.client.shards]
        assert sizes == [30, 30] and caps == [50, 50] and len(buf) == 60
        seen = _all_transitions(buf, gamma=0.9, draws=1000)
        assert {ep for ep, _ in seen} == {0, 1}
        assert sum(rc.info("rl-group")["updates"] for rc in buf.client.shards) == 1000


@pytest.mark.slow
def test_rllib_dqn_smoke() -> None:
    """A short DQN run through a private appliance: trains, prints its numbers, exits 0."""
    env = checkout_env()
    out = subprocess.run([sys.executable, "-m", "inreplay.integrations.rllib_dqn",
                          "--max-env-steps", "2000", "--env-runners", "1", "--json"], cwd=ROOT,
                         env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-1] in ("solved: true", "solved: false")
    row = json.loads(next(ln for ln in lines if ln.startswith("{")))
    assert row["buffer"] == "inreplay" and row["env_steps"] >= 2000
    assert row["learner_steps"] > 50 and row["learner_steps_per_s"] > 0
    assert row["replay_seconds"]["replay_buffer_sampling_timer"] > 0
