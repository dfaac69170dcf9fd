"""Trajectory tables across a replay group: writers whose
episode streams live on one shard, exact global sampling of trajectory items with the
single-server importance weights, byte-identical columns, updates routed by id."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from conftest import replay_group

from pyctl.errors import ReplayError
from pyctl.sharded import SHARD_ID_BITS, ShardedReplayClient, ShardedSampleInfo
from pyctl.trajectory import (
    TrajectoryWriter,
    chunk_stats,
    create_trajectory_table,
    sample_trajectories,
)

ROOT = Path(__file__).resolve().parent.parent
SIG = {"obs": ((3,), np.float32), "action": ((), np.int64)}
ITEMS = 20  # per shard
DRAWS = 100_000


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory, replay_host: str) -> Iterator[list[str]]:
    """Two shards started as one group, by pyctl (native) or as redis-servers with the
    module (conftest's replay_group); their addresses."""
    with replay_group(tmp_path_factory.mktemp("shardtraj"), replay_host) as members:
        yield members


@pytest.fixture
def rc(group: list[str]) -> Iterator[ShardedReplayClient]:
    c = ShardedReplayClient.from_seed(group[1], seed=11)
    yield c
    for t in c.tables():
        c.drop(t)
    c.close()


class Filled:
    """ITEMS items per shard, each (obs of steps t-1 and t, action of step t) of an
    episode written on that shard; shard 0's priorities sum to 10x shard 1's."""

    def __init__(self, rc: ShardedReplayClient, table: str) -> None:
        rng = np.random.default_rng(1)
        rc.create_trajectory_table(table, capacity=1000, alpha=1.0, epsilon=0.0, beta=0.5)
        self.prio: dict[int, float] = {}
        self.obs: dict[int, np.ndarray] = {}
        self.action: dict[int, np.ndarray] = {}
        self.shard: dict[int, int] = {}
        pri = [rng.uniform(1, 10, ITEMS), rng.uniform(1, 10, ITEMS)]
        pri[1] *= pri[0].sum() / (10 * pri[1].sum())
        for k in range(2):
            w = rc.trajectory_writer(f"{table}-actor-{k}", SIG, shard=k, chunk_steps=4)
            obs = rng.normal(size=(ITEMS + 1, 3)).astype(np.float32)
            act = (1000 * k + np.arange(ITEMS + 1)).astype(np.int64)
            for t in range(ITEMS + 1):
                w.append({"obs": obs[t], "action": act[t]})
                if t:
                    w.create_item(table, float(pri[k][t - 1]), {
                        "obs": w.history["obs"][-2:], "action": w.history["action"][-1]})
            ids = w.end_episode()
            assert len(ids) == ITEMS and all(i >> SHARD_ID_BITS == k for i in ids)
            for t, i in enumerate(ids, start=1):
                self.prio[i], self.shard[i] = float(pri[k][t - 1]), k
                self.obs[i], self.action[i] = obs[t - 1:t + 1], act[t:t + 1]
            w.close()
        self.ids = np.array(sorted(self.prio), np.int64)
        p = np.array([self.prio[i] for i in self.ids])
        self.exact = p / p.sum()

    def index(self, ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.ids, ids)


def _tv(counts: np.ndarray, exact: np.ndarray) -> float:
    return float(0.5 * np.abs(counts / counts.sum() - exact).sum())


def test_writers_choose_their_shard_and_episodes_can_rotate(rc: ShardedReplayClient) -> None:
    # a hash of the name, the same in every process: actor-0..3 on shards 0, 1, 1, 1
    assert [rc.stream_shard(f"actor-{i}") for i in range(4)] == [0, 1, 1, 1]
    assert {rc.stream_shard(f"actor-{i}") for i in range(16)} == {0, 1}
    rc.create_trajectory_table("rot", capacity=100)
    w = rc.trajectory_writer("rot-actor", SIG, rotate=True)
    home = w.shard
    assert home == rc.stream_shard("rot-actor")
    got = []
    for ep in range(4):
        for t in range(3):
            w.append({"obs": np.full(3, ep, np.float32), "action": t})
        w.create_item("rot", 1.0, {"obs": w.history["obs"][-3:]})
        got += w.end_episode()
    assert [i >> SHARD_ID_BITS for i in got] == [(home + e) % 2 for e in range(4)]
    assert [d["streams"] for d in rc.chunk_stats()["shards"]] == [1, 1]
    w.close()
    stats = rc.chunk_stats()
    assert stats["streams"] == 0 and stats["references"] == 4
    assert [int(d["size"]) for d in rc.info("rot")["shards"]] == [2, 2]


def test_the_module_functions_take_a_group(rc: ShardedReplayClient) -> None:
    """pyctl.trajectory's functions and TrajectoryWriter accept a ShardedReplayClient:
    the writer goes to its stream's shard, the rest to the group's methods."""
    create_trajectory_table(rc, "mod", capacity=100)
    assert [int(d["size"]) for d in rc.info("mod")["shards"]] == [0, 0]
    names = ["mod-a", "mod-b"]  # on shards 0 and 1
    assert sorted(rc.stream_shard(n) for n in names) == [0, 1]
    for name in names:
        w = TrajectoryWriter(rc, name, SIG)
        w.append({"obs": np.ones(3, np.float32), "action": 7})
        w.create_item("mod", 1.0, {"obs": w.history["obs"][-1]})
        (i,) = w.end_episode()
        assert i >> SHARD_ID_BITS == rc.stream_shard(name)
        assert chunk_stats(rc)["shards"][rc.stream_shard(name)]["streams"] == 1
        w.close()
    s = sample_trajectories(rc, "mod", 16)
    assert s.columns["obs"].shape == (16, 1, 3) and set(np.unique(s.ids >> SHARD_ID_BITS)) == {0, 1}


@pytest.mark.parametrize("stratified", [True, False])
def test_global_distribution_matches_one_tree(rc: ShardedReplayClient, stratified: bool) -> None:
    rc.stratified = stratified
    f = Filled(rc, "dist")
    counts = np.zeros(len(f.ids))
    for _ in range(DRAWS // 1000):
        s = rc.sample_trajectories("dist", 1000)
        np.add.at(counts, f.index(s.ids), 1)
    # 0.0008 measured (each shard's draws are stratified too); 10^5 independent draws
    # over 40 items would give about 0.008
    assert _tv(counts, f.exact) < 0.01
    # sampling each shard equally often (Reverb across servers) fails the same test
    counts[:] = 0
    for _ in range(DRAWS // 1000):
        for shard in rc.shards:
            np.add.at(counts, f.index(sample_trajectories(shard, "dist", 500).ids), 1)
    assert _tv(counts, f.exact) > 0.3


def test_uniform_sampler_across_shards(rc: ShardedReplayClient) -> None:
    """A uniform table: shares by size, every item 1/N, weights 1."""
    rc.create_trajectory_table("uni", capacity=100, sampler="uniform")
    for k, n in ((0, 3), (1, 9)):
        w = rc.trajectory_writer(f"uni-{k}", SIG, shard=k)
        for t in range(n):
            w.append({"obs": np.zeros(3, np.float32), "action": t})
            w.create_item("uni", float(t + 1), {"action": w.history["action"][-1]})
        w.close()
    counts = np.zeros(2)
    for _ in range(50):
        s = rc.sample_trajectories("uni", 1200, info=True)
        assert s.info is not None
        np.testing.assert_allclose(s.info.probability, 1 / 12, rtol=1e-12)
        np.testing.assert_array_equal(s.weights, 1.0)
        np.add.at(counts, s.ids >> SHARD_ID_BITS, 1)
    np.testing.assert_allclose(counts / counts.sum(), [0.25, 0.75], atol=1e-3)


def test_weights_equal_the_single_server_formula(rc: ShardedReplayClient) -> None:
    f = Filled(rc, "wts")
    n_items = len(f.exact)
    for beta in (0.4, 1.0):
        s = rc.sample_trajectories("wts", 512, beta=beta)
        p = f.exact[f.index(s.ids)]
        want = (n_items * p) ** -beta / (n_items * f.exact.min()) ** -beta
        np.testing.assert_allclose(s.weights, want, rtol=2e-6)
    s = rc.sample_trajectories("wts", 512)  # the table's beta, 0.5
    want = (f.exact[f.index(s.ids)] / f.exact.min()) ** -0.5
    np.testing.assert_allclose(s.weights, want, rtol=2e-6)
    assert s.weights.max() <= 1.0


def test_columns_round_trip_byte_identical_with_info(rc: ShardedReplayClient) -> None:
    f = Filled(rc, "data")
    s = rc.sample_trajectories("data", 300, info=True)
    assert set(np.unique(s.ids >> SHARD_ID_BITS)) == {0, 1}
    assert s.columns["obs"].shape == (300, 2, 3) and s.columns["obs"].dtype == np.float32
    assert s.columns["action"].shape == (300, 1) and s.columns["action"].flags.writeable
    for j, i in enumerate(s.ids):
        assert s.columns["obs"][j].tobytes() == f.obs[int(i)].tobytes()
        assert s.columns["action"][j].tobytes() == f.action[int(i)].tobytes()
    info = s.info
    assert isinstance(info, ShardedSampleInfo)
    assert info.table_size == 2 * ITEMS and info.shard_sizes == [ITEMS, ITEMS]
    np.testing.assert_array_equal(info.shard, s.ids >> SHARD_ID_BITS)
    np.testing.assert_allclose(info.probability, f.exact[f.index(s.ids)], rtol=1e-9)
    np.testing.assert_allclose(info.priority, [f.prio[int(i)] for i in s.ids], rtol=1e-6)
    assert info.times_sampled.min() >= 1
    torch = pytest.importorskip("torch")
    t = rc.sample_trajectories("data", 8, torch=True)
    assert isinstance(t.columns["obs"], torch.Tensor) and tuple(t.columns["obs"].shape) == (8, 2, 3)


def test_updates_land_on_their_shard(rc: ShardedReplayClient) -> None:
    f = Filled(rc, "upd")
    s = rc.sample_trajectories("upd", 64)
    uniq = np.unique(s.ids)
    new = np.arange(1, uniq.size + 1, dtype=np.float32)
    assert rc.update("upd", uniq, new) == uniq.size
    per = rc.info("upd")["shards"]
    assert [int(d["updates"]) for d in per] == [int(np.sum(uniq >> SHARD_ID_BITS == k))
                                                for k in range(2)]
    prio = dict(f.prio)
    prio.update(zip(uniq.tolist(), new.tolist(), strict=True))
    for k in range(2):
        want = sum(p for i, p in prio.items() if i >> SHARD_ID_BITS == k)
        assert float(per[k]["total_priority"]) == pytest.approx(want, rel=1e-6)
    # a batch is split by the totals of the previous reply (documented one-batch lag);
    # after a refresh the split and each draw's probability are the new exact ones
    rc.refresh("upd")
    s2 = rc.sample_trajectories("upd", 256, info=True)
    assert s2.info is not None
    np.testing.assert_allclose(s2.info.priority, [prio[int(i)] for i in s2.ids], rtol=1e-6)
    p = np.array([prio[int(i)] for i in f.ids])
    np.testing.assert_allclose(s2.info.probability, (p / p.sum())[f.index(s2.ids)], rtol=1e-6)


def _one_line(e: pytest.ExceptionInfo[BaseException]) -> str:
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def test_bad_input_gets_one_line(rc: ShardedReplayClient, group: list[str]) -> None:
    # a table on shard 0 only: the error names the shard that lacks it
    create_trajectory_table(rc.shards[0], "half", capacity=10)
    w = rc.trajectory_writer("half-w", SIG, shard=0)
    w.append({"obs": np.zeros(3, np.float32), "action": 0})
    w.create_item("half", 1.0, {"action": w.history["action"][-1]})
    w.close()
    with pytest.raises(ReplayError) as e:
        rc.sample_trajectories("half", 4)
    msg = _one_line(e)
    assert "half" in msg and "shard 1" in msg and group[1] in msg
    w = rc.trajectory_writer("half-w1", SIG, shard=1)
    w.append({"obs": np.zeros(3, np.float32), "action": 0})
    w.create_item("half", 1.0, {"action": w.history["action"][-1]})
    with pytest.raises(redis.ResponseError) as e:
        w.flush()
    assert "no such table" in _one_line(e)
    w.close()
    rc.shards[0].redis.execute_command("REPLAY.DROP", "half")
    # an opaque table, a trajectory table through sample(), a shard not in the group
    rc.create("plain", capacity=10)
    rc.add("plain", [1.0], [b"x"])
    with pytest.raises(ValueError) as e:
        rc.sample_trajectories("plain", 2)
    assert "opaque" in _one_line(e)
    rc.create_trajectory_table("tr", capacity=10)
    with pytest.raises(ValueError) as e:
        rc.sample("tr", 2)
    assert "sample_trajectories" in _one_line(e)
    with pytest.raises(ValueError) as e:
        rc.trajectory_writer("x", SIG, shard=2)
    assert "not in this group of 2" in _one_line(e)
    # columns that differ between shards cannot be one batch
    for k, length in ((0, 1), (1, 2)):
        w = rc.trajectory_writer(f"tr-{k}", SIG, shard=k)
        for _ in range(2):
            w.append({"obs": np.zeros(3, np.float32), "action": 0})
        w.create_item("tr", 1.0, {"obs": w.history["obs"][-length:]})
        w.close()
    with pytest.raises(ValueError) as e:
        rc.sample_trajectories("tr", 64)
    assert "same columns on every shard" in _one_line(e)
    with pytest.raises(ValueError) as e:
        rc.sample_trajectories("tr", 0)
    _one_line(e)


def test_a_group_of_one_is_a_server(replay_server: object) -> None:
    """A standalone server is a group of one: the same calls work against it."""
    port = replay_server.port  # type: ignore[attr-defined]
    rc = ShardedReplayClient([f"127.0.0.1:{port}"], seed=2)
    rc.create_trajectory_table("one", capacity=10, alpha=1.0, epsilon=0.0)
    w = rc.trajectory_writer("one-w", SIG)
    assert w.shard == 0
    for t in range(3):
        w.append({"obs": np.full(3, t, np.float32), "action": t})
        w.create_item("one", float(t + 1), {"action": w.history["action"][-1]})
    w.close()
    s = rc.sample_trajectories("one", 600, info=True)
    assert s.info is not None
    np.testing.assert_allclose(s.info.probability, (s.columns["action"][:, 0] + 1) / 6,
                               rtol=1e-12)
    np.testing.assert_allclose(s.weights, ((s.columns["action"][:, 0] + 1) / 1.0) ** -0.4,
                               rtol=2e-6)
    rc.drop("one")
    stats = rc.chunk_stats()
    assert stats["streams"] == 0 and stats["references"] == 0
    rc.close()
