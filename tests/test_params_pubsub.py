"""Parameter distribution by pub/sub: the learner sets the blob and its version and
PUBLISHes the version in one MULTI/EXEC; actors subscribe instead of polling the
version, and a dropped subscriber reconnects and re-reads the version.

Every test runs against stock redis-server (the ``--replay local`` baseline) and
against inreplay (``--replay appliance``), with a real Learner and real Actors;
the last one against a replay group of two inreplay shards.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from conftest import replay_group

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from inreplay.actors.actor import Actor, ParamUpdates  # noqa: E402
from inreplay.learner.learner import Learner  # noqa: E402
from inreplay.rl.config import Config, Keys, preset  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BLOB_HEADER = 24  # rl.model: the floats start here


@pytest.fixture(params=["redis", "inreplay"])
def store(request: pytest.FixtureRequest, server_pool: Any) -> Iterator[Any]:
    """The session's stock redis-server or inreplay (kernel stack), flushed."""
    srv = server_pool.get(request.param)
    srv.flushall()
    yield srv
    assert srv.alive(), f"{srv} died during the test:\n{srv.log_tail()}"


def _cfg(srv: Any, tmp_path: Path, **kw: Any) -> Config:
    opts: dict[str, Any] = {
        "port": srv.port, "out_dir": str(tmp_path), "hidden": 16,
        "replay": "local" if srv.kind == "redis" else "appliance",
        "capacity": 1000, "learning_starts": 10, "checkpoint_every": 0,
        "params_wait_s": 20.0}
    return preset("CartPole-v1", **{**opts, **kw})


def _learner(cfg: Config) -> Learner:
    torch.set_num_threads(1)
    return Learner(cfg, progress=False, existing="fresh")


def _stamp(learner: Learner) -> None:
    """Write the next version into the model's first weight, so a blob says which
    version it is."""
    with torch.no_grad():
        next(learner.model.parameters()).view(-1)[0] = float(learner.version + 1)


def _blob_version(blob: bytes) -> int:
    return int(np.frombuffer(blob, "<f4", count=1, offset=BLOB_HEADER)[0])


def _first_weight(actor: Actor) -> float:
    return float(next(actor.model.parameters()).detach().view(-1)[0])


class Monitor:
    """The server's MONITOR feed on a socket of its own: every command any client sends
    (stock Redis and inreplay print ``"cmd" "arg" ...``)."""

    def __init__(self, srv: Any) -> None:
        self.sock = socket.create_connection((srv.host, srv.port), timeout=10)
        self.sock.sendall(b"MONITOR\r\n")
        self.lines: list[str] = []
        self.buf = b""
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(4096)
        first, self.buf = self.buf.split(b"\r\n", 1)
        assert first == b"+OK", first
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return
                self.buf += data
                *done, self.buf = self.buf.split(b"\r\n")
                self.lines.extend(x.decode(errors="replace") for x in done)
        except OSError:
            return

    def commands(self, settle: float = 0.3) -> list[list[str]]:
        """The commands seen so far (lower-cased name, then the arguments), after
        ``settle`` seconds for the feed to catch up."""
        time.sleep(settle)
        out = []
        for line in list(self.lines):
            args = re.findall(r'"((?:[^"\\]|\\.)*)"', line)
            if args:
                out.append([args[0].lower(), *args[1:]])
        return out

    def close(self) -> None:
        self.sock.close()
        self.thread.join(timeout=5)


def _version_reads(cmds: list[list[str]], keys: Keys) -> list[list[str]]:
    """GET/MGET calls naming the version key that are not a pull (MGET blob version)."""
    return [c for c in cmds if c[0] in ("get", "mget") and keys.version in c[1:]
            and keys.params not in c[1:]]


# ---- the learner: one MULTI/EXEC per publication -------------------------------------


def test_a_publication_is_one_transaction_and_never_seen_half(store: Any,
                                                              tmp_path: Path) -> None:
    cfg = _cfg(store, tmp_path)
    keys = Keys(cfg.prefix)
    learner = _learner(cfg)
    mon = Monitor(store)
    try:
        _stamp(learner)
        v = learner.publish()
        cmds = [c for c in mon.commands() if c[0] in ("multi", "set", "publish", "exec",
                                                      "mset")]
    finally:
        mon.close()
    assert [c[0] for c in cmds] == ["multi", "set", "set", "set", "publish", "exec"], cmds
    assert {c[1] for c in cmds[1:4]} == {keys.params, keys.version, keys.samples}
    assert cmds[4][1:] == [keys.updates, str(v)]

    # a reader racing many publications never pairs a blob with another version, and a
    # subscriber that hears v finds v's blob (or a newer one) there
    r, r2 = store.client(), store.client()
    sub = store.client().pubsub()
    sub.subscribe(keys.updates)
    confirmed = sub.get_message(timeout=5)
    assert confirmed is not None and confirmed["type"] == "subscribe"
    stop = threading.Event()
    seen: list[tuple[int, int]] = []
    heard: list[tuple[int, int]] = []

    def read() -> None:
        while not stop.is_set():
            blob, ver = r.mget(keys.params, keys.version)
            seen.append((_blob_version(blob), int(ver)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        for _ in range(150):
            _stamp(learner)
            learner.publish()
            msg = sub.get_message(timeout=5)
            assert msg is not None and msg["type"] == "message"
            announced = int(msg["data"])
            heard.append((announced, _blob_version(r2.get(keys.params))))
    finally:
        stop.set()
        reader.join(timeout=10)
        sub.close()
    assert len(seen) > 100, "the reader did not race the publications"
    assert all(b == v for b, v in seen), [x for x in seen if x[0] != x[1]][:5]
    assert [a for a, _ in heard] == list(range(v + 1, v + 151))
    assert all(b >= a for a, b in heard)
    r.close()
    r2.close()
    learner.close()


# ---- the actor: subscribed, not polling --------------------------------------------


def test_actor_learns_new_versions_without_polling(store: Any, tmp_path: Path) -> None:
    cfg = _cfg(store, tmp_path)
    keys = Keys(cfg.prefix)
    learner = _learner(cfg)
    _stamp(learner)
    learner.publish()
    actor = Actor(cfg, 0, log=lambda msg: None)
    try:
        assert actor.wait_for_params() and actor.version == learner.version
        mon = Monitor(store)
        try:
            pulls0 = actor.pulls
            for i in range(30):
                if i % 10 == 5:  # one publication: loaded within the next flush
                    _stamp(learner)
                    learner.publish()
                    actor.flush([], [], 1)
                    assert actor.version == learner.version
                    assert _first_weight(actor) == learner.version
                elif i == 20:  # three at once: one pull, of the newest
                    for _ in range(3):
                        _stamp(learner)
                        learner.publish()
                    time.sleep(0.3)  # all three announcements have arrived
                    before = actor.pulls
                    actor.flush([], [], 1)
                    assert actor.version == learner.version and actor.pulls == before + 1
                else:
                    actor.flush([], [], 1)
            cmds = mon.commands()
        finally:
            mon.close()
        assert actor.pulls - pulls0 == 4  # v2, v3 and v6 (of v4..v6)
        flushes = [c for c in cmds if c[0] == "mget" and keys.stop in c[1:]]
        assert len(flushes) == 30
        assert _version_reads(cmds, keys) == [], "the actor polled the version"
        assert actor.updates.subscriptions == 1
    finally:
        actor.close()
        learner.close()


def test_wait_for_params_blocks_on_the_subscription(store: Any, tmp_path: Path) -> None:
    cfg = _cfg(store, tmp_path)
    keys = Keys(cfg.prefix)
    learner = _learner(cfg)
    actor = Actor(cfg, 0, log=lambda msg: None)
    result: list[tuple[bool, float]] = []

    def wait() -> None:
        ok = actor.wait_for_params()
        result.append((ok, time.monotonic()))

    mon = Monitor(store)
    waiter = threading.Thread(target=wait, daemon=True)
    try:
        waiter.start()
        time.sleep(1.0)
        assert not result, "wait_for_params returned before any parameters"
        cmds = mon.commands(settle=0.0)
        _stamp(learner)
        learner.publish()
        waiter.join(timeout=5)
        assert result and result[0][0], "wait_for_params did not see the publication"
        assert actor.version == 1 and _first_weight(actor) == 1.0
        # while waiting: one read of the version (after SUBSCRIBE confirmed), no polling
        assert len(_version_reads(cmds, keys)) == 1, _version_reads(cmds, keys)
    finally:
        actor.stop.set()
        waiter.join(timeout=5)
        mon.close()
        actor.close()
        learner.close()


def test_wait_for_params_ends_on_stop_and_at_the_deadline(store: Any, tmp_path: Path) -> None:
    cfg = _cfg(store, tmp_path, params_wait_s=0.6)
    actor = Actor(cfg, 0, log=lambda msg: None)
    try:
        t0 = time.monotonic()
        assert not actor.wait_for_params()
        assert 0.6 <= time.monotonic() - t0 < 20  # the deadline; then only a hang guard
        stopper = threading.Timer(0.3, actor.stop.set)
        actor.cfg.params_wait_s = 30.0
        t0 = time.monotonic()
        stopper.start()
        assert not actor.wait_for_params()
        assert time.monotonic() - t0 < 20  # the stop (0.3 s), long before the 30 s deadline
        stopper.join()
        actor.stop.clear()
        actor.r.set(Keys(cfg.prefix).stop, 1)
        assert not actor.wait_for_params() and actor.stopped_by_key
    finally:
        actor.close()


# ---- a dropped subscriber --------------------------------------------------------


def _numsub(r: redis.Redis, channel: str) -> int:
    return int(dict(r.pubsub_numsub(channel))[channel.encode()])


def _until(cond: Callable[[], bool], timeout: float, step: Callable[[], None]) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        step()
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_actor_resubscribes_and_rereads_after_client_kill(store: Any, tmp_path: Path) -> None:
    cfg = _cfg(store, tmp_path)
    keys = Keys(cfg.prefix)
    learner = _learner(cfg)
    _stamp(learner)
    learner.publish()
    actor = Actor(cfg, 0, log=lambda msg: None)
    admin = store.client()
    try:
        assert actor.wait_for_params() and actor.version == 1
        assert _numsub(admin, keys.updates) == 1
        assert admin.client_kill_filter(_type="pubsub") == 1
        assert _numsub(admin, keys.updates) == 0
        # published while nobody listens: the message is lost, the version key is not
        _stamp(learner)
        learner.publish()
        assert _until(lambda: actor.version == 2, 5, lambda: actor.flush([], [], 1)), \
            "the actor stayed on version 1 after its subscriber was dropped"
        assert _first_weight(actor) == 2.0
        assert actor.updates.subscriptions == 2 and _numsub(admin, keys.updates) == 1
        # the renewed subscription delivers the next version as a message
        _stamp(learner)
        learner.publish()
        time.sleep(0.1)
        actor.flush([], [], 1)
        assert actor.version == 3 and actor.updates.subscriptions == 2
    finally:
        admin.close()
        actor.close()
        learner.close()


# ---- both protocols --------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
def test_param_updates_on_resp2_and_resp3(store: Any, protocol: int) -> None:
    keys = Keys("pp")
    r = redis.Redis(host=store.host, port=store.port, protocol=protocol, socket_timeout=10)
    pub = store.client()
    try:
        pub.set(keys.version, 4)
        updates = ParamUpdates(r, keys)
        assert updates.poll(timeout=2) == 4  # the version key, read once subscribed
        assert updates.poll() is None
        for v in (5, 6, 7):
            with pub.pipeline(transaction=True) as p:
                p.set(keys.version, v).publish(keys.updates, v).execute()
        time.sleep(0.1)
        assert updates.poll() == 7  # three announcements, the newest once
        assert updates.poll() is None
        t0 = time.monotonic()
        later = threading.Timer(0.2, lambda: pub.publish(keys.updates, 8))
        later.start()
        assert updates.poll(timeout=60) == 8
        assert time.monotonic() - t0 < 30  # woken by the message, not at its timeout
        later.join()  # its PUBLISH has its reply: nothing re-sent into the next test
        assert updates.subscriptions == 1
        updates.close()
    finally:
        pub.close()
        r.close()


def test_the_subscriber_authenticates_as_the_main_connection(store: Any) -> None:
    keys = Keys("pp")
    admin = store.client()
    assert admin.config_set("requirepass", "s3cret")
    r = redis.Redis(host=store.host, port=store.port, protocol=2, password="s3cret",
                    socket_timeout=10)
    try:
        r.set(keys.version, 3)
        updates = ParamUpdates(r, keys)
        assert updates.poll(timeout=2) == 3
        r.publish(keys.updates, 4)
        assert updates.poll(timeout=2) == 4
        updates.close()
    finally:
        r.config_set("requirepass", "")
        r.close()
        admin.close()


# ---- a replay group: parameters (and their channel) on shard 0 ------------------------


@pytest.fixture
def group(tmp_path: Path) -> Iterator[list[str]]:
    """Two inreplay shards started as one group by pyctl; their addresses."""
    with replay_group(tmp_path, "native", seed=None) as members:
        yield members


def test_actors_of_a_group_subscribe_on_shard_0(group: list[str], tmp_path: Path) -> None:
    shards = [redis.Redis(host=a.rsplit(":", 1)[0], port=int(a.rsplit(":", 1)[1]), protocol=2)
              for a in group]
    host, port = group[1].rsplit(":", 1)  # given shard 1's address, as any member's
    cfg = preset("CartPole-v1", host=host, port=int(port), out_dir=str(tmp_path), hidden=16,
                 capacity=1000, learning_starts=10, checkpoint_every=0, params_wait_s=20.0)
    keys = Keys(cfg.prefix)
    learner = _learner(cfg)
    actor = Actor(cfg, 0, log=lambda msg: None)
    try:
        assert [_numsub(s, keys.updates) for s in shards] == [1, 0]
        _stamp(learner)
        learner.publish()
        assert actor.wait_for_params() and actor.version == 1
        _stamp(learner)
        learner.publish()
        time.sleep(0.3)
        actor.flush([], [], 1)
        assert actor.version == 2 and _first_weight(actor) == 2.0
        assert shards[0].get(keys.version) == b"2" and shards[1].get(keys.version) is None
    finally:
        actor.close()
        learner.close()
        for s in shards:
            s.close()
