"""Reverb's client API over the appliance (integrations/reverb_compat.py): Reverb's
documented examples (its README's Server / insert / sample and TrajectoryWriter examples,
Table.queue, rate limiters), written anew and run against an appliance that
reverb_compat.Server starts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from inreplay.integrations import reverb_compat as reverb


@pytest.fixture(scope="module")
def server() -> Iterator[reverb.Server]:
    srv = reverb.Server(tables=[
        reverb.Table(name="my_table", sampler=reverb.selectors.Prioritized(0.8),
                     remover=reverb.selectors.Fifo(), max_size=1_000_000,
                     rate_limiter=reverb.rate_limiters.MinSize(1)),
        reverb.Table(name="exp1", sampler=reverb.selectors.Prioritized(1.0),
                     remover=reverb.selectors.Fifo(), max_size=100,
                     rate_limiter=reverb.rate_limiters.MinSize(1)),
        reverb.Table(name="heap", sampler=reverb.selectors.MaxHeap(),
                     remover=reverb.selectors.MinHeap(), max_size=3,
                     rate_limiter=reverb.rate_limiters.MinSize(1)),
        reverb.Table.queue("my_queue", 10),
        reverb.Table(name="ratio", sampler=reverb.selectors.Uniform(),
                     remover=reverb.selectors.Fifo(), max_size=100,
                     rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
                         samples_per_insert=4.0, min_size_to_sample=2, error_buffer=8.0),
                     max_times_sampled=5),
    ])
    yield srv
    assert srv.stop() == 0


@pytest.fixture
def client(server: reverb.Server) -> Iterator[reverb.Client]:
    c = reverb.Client(f"localhost:{server.port}")
    yield c
    c.close()


def test_readme_insert_then_sample(client: reverb.Client) -> None:
    """README: client.insert([0, 1], priorities={'my_table': 1.0}); sample 2."""
    client.insert([0, 1], priorities={"my_table": 1.0})
    got = list(client.sample("my_table", num_samples=2))
    assert len(got) == 2
    for s in got:
        assert isinstance(s.data, list) and [int(x) for x in s.data] == [0, 1]
        assert s.info.table_size == 1 and s.info.probability == pytest.approx(1.0)
        assert s.info.key == got[0].info.key
    assert sorted(s.info.times_sampled for s in got) == [1, 2]
    # nested structures come back as inserted (dicts, tuples, arrays)
    obs = np.arange(6, dtype=np.float32).reshape(2, 3)
    client.reset("my_table")
    client.insert({"obs": obs, "pair": (np.int32(7), 2.5)}, priorities={"my_table": 1.0})
    (s,) = client.sample("my_table", 1)
    np.testing.assert_array_equal(s.data["obs"], obs)
    assert s.data["obs"].dtype == np.float32
    assert isinstance(s.data["pair"], tuple) and int(s.data["pair"][0]) == 7
    assert float(s.data["pair"][1]) == 2.5


def test_readme_trajectory_writer(client: reverb.Client) -> None:
    """README: three appends, one item over all of them, flush; and an item of the last
    step (an int index: no time axis)."""
    client.reset("my_table")
    with client.trajectory_writer(num_keep_alive_refs=3) as writer:
        writer.append({"a": 2, "b": 12})
        writer.append({"a": 3, "b": 13})
        writer.append({"a": 4, "b": 14})
        writer.create_item(table="my_table", priority=1.0, trajectory={
            "a": writer.history["a"][:], "b": writer.history["b"][:]})
        writer.flush()
        (s,) = client.sample("my_table", 1)
        np.testing.assert_array_equal(s.data["a"], [2, 3, 4])
        np.testing.assert_array_equal(s.data["b"], [12, 13, 14])
        client.reset("my_table")
        writer.create_item("my_table", 1.0, {"last_a": writer.history["a"][-1],
                                             "two_b": writer.history["b"][-2:]})
        writer.end_episode()
    (s,) = client.sample("my_table", 1)
    assert np.shape(s.data["last_a"]) == () and int(s.data["last_a"]) == 4
    np.testing.assert_array_equal(s.data["two_b"], [13, 14])


def test_prioritized_probabilities_and_mutate(client: reverb.Client) -> None:
    """Prioritized(1.0): P(i) = p_i / sum p; mutate_priorities changes it."""
    client.insert(1, priorities={"exp1": 1.0})
    client.insert(2, priorities={"exp1": 3.0})
    draws = list(client.sample("exp1", 400))
    p = {int(s.data): s.info.probability for s in draws}
    assert p == pytest.approx({1: 0.25, 2: 0.75}, rel=1e-3)
    share = np.mean([int(s.data) == 2 for s in draws])
    assert 0.68 < share < 0.82
    key1 = next(s.info.key for s in draws if int(s.data) == 1)
    client.mutate_priorities("exp1", updates={key1: 9.0})
    (s,) = [x for x in client.sample("exp1", 50) if int(x.data) == 1][:1]
    assert s.info.probability == pytest.approx(0.75, rel=1e-3)
    assert s.info.priority == pytest.approx(9.0, rel=1e-3)
    with pytest.raises(NotImplementedError, match="delete"):
        client.mutate_priorities("exp1", deletes=[key1])


def test_heap_selectors(client: reverb.Client) -> None:
    """MaxHeap sampler: the highest priority item, probability 1; MinHeap remover: the
    lowest goes when the table is full."""
    for v, p in ((10, 5.0), (11, 1.0), (12, 3.0), (13, 4.0)):  # 11 is removed
        client.insert(v, priorities={"heap": p})
    (s,) = client.sample("heap", 1)
    assert int(s.data) == 10 and s.info.probability == 1.0
    assert client.server_info()["heap"].current_size == 3


def test_queue_is_fifo_each_item_once(client: reverb.Client) -> None:
    """Table.queue: items come out in insertion order, once each."""
    for i in range(5):
        client.insert({"x": i}, priorities={"my_queue": 1.0})
    got = [int(s.data["x"]) for s in client.sample("my_queue", 3)]
    got += [int(s.data["x"]) for s in client.sample("my_queue", 2)]
    assert got == [0, 1, 2, 3, 4]
    info = client.server_info()["my_queue"]
    assert info.current_size == 0 and info.max_size == 10 and info.max_times_sampled == 1


def test_rate_limiter_and_reset_keep_the_table(client: reverb.Client, server: reverb.Server,
                                                ) -> None:
    """SampleToInsertRatio and max_times_sampled map onto REPLAY.CREATE's options, and
    reset empties a table without changing them."""
    from pyctl.client import ReplayClient

    with ReplayClient("127.0.0.1", server.port) as rc:
        before = rc.info("ratio")
        assert (before["sampler"], before["remover"], before["capacity"]) == \
            ("uniform", "fifo", 100)
        assert before["samples_per_insert"] == 4.0 and before["min_size"] == 2
        assert before["error_buffer"] == 8.0 and before["max_times_sampled"] == 5
        client.insert(1, priorities={"ratio": 1.0})
        client.insert(2, priorities={"ratio": 1.0})
        assert {int(s.data) for s in client.sample("ratio", 4)} <= {1, 2}
        client.reset("ratio")
        after = rc.info("ratio")
    assert after["size"] == 0
    for k in ("sampler", "remover", "capacity", "samples_per_insert", "min_size",
              "error_buffer", "max_times_sampled"):
        assert after[k] == before[k], k


def test_trajectory_dataset(client: reverb.Client, server: reverb.Server) -> None:
    """TrajectoryDataset as a NumPy iterator: a queue's items in order, fetched
    max_in_flight_samples_per_worker at a time, ending when rate_limiter_timeout_ms runs out
    with the queue empty; max_samples bounds an endless table."""
    for i in range(5):
        client.insert({"x": i}, priorities={"my_queue": 1.0})
    ds = reverb.TrajectoryDataset(f"localhost:{server.port}", "my_queue",
                                  max_in_flight_samples_per_worker=1,
                                  rate_limiter_timeout_ms=200)
    t0 = time.monotonic()
    assert [int(s.data["x"]) for s in ds] == [0, 1, 2, 3, 4]
    assert 0.2 <= time.monotonic() - t0 < 5.0  # one wait of 200 ms at the end
    client.reset("my_table")
    client.insert({"y": 1}, priorities={"my_table": 1.0})
    ds = reverb.TrajectoryDataset(f"localhost:{server.port}", "my_table",
                                  max_in_flight_samples_per_worker=3, max_samples=7)
    got = list(ds)
    assert len(got) == 7 and all(int(s.data["y"]) == 1 for s in got)
    assert sorted(s.info.times_sampled for s in got) == list(range(1, 8))
