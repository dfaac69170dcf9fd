"""The Ape-X actors' item writer (actors/actor.py ItemWriter) on a real server: its
batches are pipelined through the replay group's inserter, a batch the table's rate
limiter holds past ADD_WAIT_S is sent again from the buffers the inserter kept until it
lands (every transition exactly once), and a held batch is given up when the actor is
told to stop, so closing the writer ends."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import inreplay.actors.actor as actor_mod
from inreplay.rl.codec import TransitionCodec
from inreplay.rl.nstep import Transition

from pyctl.client import ReplayClient
from pyctl.errors import RateLimited
from pyctl.sharded import ShardedReplayClient


def _batch(first: int, n: int) -> list[Transition]:
    return [Transition(obs=np.full(4, k, np.float32), action=k % 2, ret=float(k),
                       discount=0.99, next_obs=np.full(4, k + 1, np.float32), steps=3)
            for k in range(first, first + n)]


@pytest.mark.parametrize("kind", ["inreplay", "shm"])
def test_held_batches_are_resent_until_they_land(server_factory: Any, kind: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actor_mod, "ADD_WAIT_S", 0.05)  # held batches come back soon
    srv = server_factory(kind)
    ctl = ReplayClient(srv.host, srv.port)
    ctl.create("q", 32, queue=True)  # inserts are held while 32 items wait
    codec = TransitionCodec((4,), np.float32, 3, False)
    stop = threading.Event()
    asked: list[float] = []

    def waiting() -> bool:
        asked.append(time.monotonic())
        return stop.is_set()

    w = actor_mod.ItemWriter(ShardedReplayClient.from_seed(f"{srv.host}:{srv.port}"), "q",
                             codec, waiting, lambda msg: None)
    rets: list[float] = []

    def learner() -> None:  # starts once a batch has come back held
        c = ReplayClient(srv.host, srv.port)
        while not asked:
            time.sleep(0.01)
        while len(rets) < 160:
            s = c.sample("q", 1, item_shape=(codec.itemsize,), timeout=10)
            rets.extend(codec.decode(s.items).ret.tolist())
        c.close()

    t = threading.Thread(target=learner)
    t.start()
    for b in range(20):  # 160 transitions through a queue of 32
        w.write(_batch(8 * b, 8), np.ones(8))
    assert w.ins.flush() == 160
    t.join(30)
    assert not t.is_alive()
    assert w.ins.resent > 0 and w.waited_s > 0
    assert sorted(rets) == [float(k) for k in range(160)]
    # the queue full again and nobody reading: the held batch is given up on stop
    w.write(_batch(0, 32), np.ones(32))
    w.write(_batch(32, 8), np.ones(8))
    stop.set()
    w.close()
    assert ctl.info("q")["size"] == 32


def test_a_resend_callback_that_fails_names_the_batch_it_gave_up(server_factory: Any) -> None:
    srv = server_factory("inreplay")
    rc = ReplayClient(srv.host, srv.port)
    rc.create("q", 4, queue=True)
    rc.add("q", np.ones(4), np.zeros((4, 8), np.uint8))  # full: the next batch is held

    def resend(err: Exception) -> bool:
        raise OSError("the actor's own check failed")

    ins = rc.inserter("q", timeout=0.05, resend=resend)
    ins.add(np.ones(2), np.zeros((2, 8), np.uint8))
    with pytest.raises(RateLimited, match=r"batch 1 of this inserter, not resent: OSError: "
                                          r"the actor's own check failed"):
        ins.flush()
    assert rc.info("q")["size"] == 4
    rc.close()


def test_closing_the_writer_after_its_shard_went_away_logs_and_returns(
        server_factory: Any) -> None:
    srv = server_factory("inreplay")
    ctl = ReplayClient(srv.host, srv.port)
    ctl.create("q", 8, queue=True)
    ctl.close()
    codec = TransitionCodec((4,), np.float32, 3, False)
    logged: list[str] = []
    w = actor_mod.ItemWriter(ShardedReplayClient.from_seed(f"{srv.host}:{srv.port}"), "q",
                             codec, lambda: False, logged.append)
    w.write(_batch(0, 8), np.ones(8))
    w.write(_batch(8, 8), np.ones(8))  # held: the queue is full and nobody reads
    srv.stop()
    w.close()  # the batch in flight is lost with its shard: said, not raised
    assert any(m.startswith("warning: closing the item writer:") for m in logged), logged
