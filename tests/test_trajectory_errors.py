"""The trajectory API raises the client's error classes (pyctl.errors), as ReplayClient
does for every call: a missing table is NoSuchTableError, an empty one EmptyTableError,
a second create TableExistsError, and flush() raises the class of the first command of
its round trip that failed, with the server's own message (not redis-py's "Command # N
of pipeline caused error" wrapping)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import redis

from pyctl.client import ReplayClient
from pyctl.errors import (
    EmptyTableError,
    NoSuchTableError,
    TableExistsError,
    WrongKindError,
)
from pyctl.trajectory import TrajectoryWriter, create_trajectory_table, sample_trajectories

SIGNATURE = {"obs": ((3,), np.float32), "reward": ((), np.float32)}


@pytest.fixture
def rc(replay_server: Any) -> Any:
    c = ReplayClient(host=replay_server.host, port=replay_server.port)
    for t in c.tables():
        c.drop(t)
    yield c
    for t in c.tables():
        c.drop(t)
    c.close()


def _writer(rc: ReplayClient, stream: str) -> TrajectoryWriter:
    w = TrajectoryWriter(rc, stream, SIGNATURE)
    for i in range(4):
        w.append({"obs": np.full(3, i, np.float32), "reward": float(i)})
    return w


def test_sample_of_a_missing_table_is_no_such_table(rc: ReplayClient) -> None:
    with pytest.raises(NoSuchTableError) as e:
        sample_trajectories(rc, "nowhere", 4)
    assert isinstance(e.value, redis.ResponseError) and "nowhere" in str(e.value)


def test_sample_of_an_empty_table_is_empty(rc: ReplayClient) -> None:
    create_trajectory_table(rc, "t", 100)
    with pytest.raises(EmptyTableError):
        sample_trajectories(rc, "t", 4)


def test_second_create_is_table_exists(rc: ReplayClient) -> None:
    create_trajectory_table(rc, "t", 100)
    with pytest.raises(TableExistsError):
        create_trajectory_table(rc, "t", 100)


def test_flush_into_a_missing_table_raises_its_class(rc: ReplayClient) -> None:
    w = _writer(rc, "s")
    w.create_item("nowhere", 1.0, {"obs": w.history["obs"][-2:]})
    with pytest.raises(NoSuchTableError) as e:
        w.flush()
    assert "pipeline" not in str(e.value) and "nowhere" in str(e.value)
    # the steps went in before the failed item: the stream holds them
    create_trajectory_table(rc, "t", 100)
    w.create_item("t", 1.0, {"obs": w.history["obs"][-2:]})
    assert len(w.flush()) == 1
    s = sample_trajectories(rc, "t", 2)
    np.testing.assert_array_equal(s.columns["obs"][0], [[2, 2, 2], [3, 3, 3]])
    w.close()


def test_trajectory_sample_of_an_opaque_table_is_wrong_kind(rc: ReplayClient) -> None:
    rc.create("opaque", capacity=10)
    rc.add("opaque", [1.0], [b"x"])
    w = _writer(rc, "s2")
    w.create_item("opaque", 1.0, {"obs": w.history["obs"][-1:]})
    with pytest.raises(WrongKindError):
        w.flush()
    w.close()
