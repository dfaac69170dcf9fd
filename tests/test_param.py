"""PARAM.* parameter tables: every optimizer against torch.optim over 200 steps,
staleness (BASE/MAXSTALE), SYNC rounds (the mean of k pushes, one step; blocking,
timeout, disconnect, drop), PULL IFNEWER, the version channel, bad input (one
error line, nothing applied), FLUSHALL and snapshot round trips; on both hosts
(the native server, and the module inside stock redis-server: its RDB)."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import redis
from conftest import REPLAY_HOSTS

from pyctl import errors

if TYPE_CHECKING:
    from conftest import ServerProcess

torch = pytest.importorskip("torch")

N = 10_007  # odd (the vector loops' tails run) and above IR_REF_MIN: PULL goes by reference
STEPS = 200
# Tolerance: max |ours - torch| over the parameters after 200 steps, relative to
# max(1, max |w|): 16 float32 ulps (ulp at 1 is 2^-23), 1.9e-6. Both sides compute
# torch's formulas in float32 in the same order, but torch's AVX2 kernels fuse some
# multiply-adds (lerp is an FMA there, addcmul may be contracted) and their scalar
# tails round differently, so one step may leave a parameter an ulp apart. The
# updates are stable (no term amplifies a difference) and these per-step roundings
# are independent, so they add up as a random walk, about sqrt(200) = 14 ulps at
# one ulp per step; 16 covers that. Measured on this machine: at most 1.6 ulps
# (5.96e-7 at |w| = 4). A wrong formula (a missing bias correction, a dropped
# weight decay, a hyper-parameter rounded to the wrong type) is off by 1e-5 or more.
TOL = 16 * 2.0**-23


@pytest.fixture
def r(replay_server: ServerProcess) -> Iterator[redis.Redis]:
    c = redis.Redis(host=replay_server.host, port=replay_server.port)
    yield c
    c.close()


def pull(r: redis.Redis, name: str) -> tuple[int, np.ndarray]:
    version, blob = r.execute_command("PARAM.PULL", name)
    return int(version), np.frombuffer(blob, dtype="<f4")


def info_of(r: redis.Redis, name: str) -> dict[bytes, Any]:
    info = r.execute_command("PARAM.INFO", name)
    return info if isinstance(info, dict) else dict(zip(info[::2], info[1::2], strict=True))


# (our optimizer and options, torch's class and keyword arguments)
CASES: dict[str, tuple[str, dict[str, float], Callable[..., Any], dict[str, Any]]] = {
    "sgd": ("sgd", {"LR": 0.1, "WEIGHT_DECAY": 0.01},
            lambda: torch.optim.SGD, {"lr": 0.1, "weight_decay": 0.01}),
    "momentum": ("momentum", {"LR": 0.01, "MOMENTUM": 0.9},
                 lambda: torch.optim.SGD, {"lr": 0.01, "momentum": 0.9}),
    "nesterov": ("momentum", {"LR": 0.01, "MOMENTUM": 0.8, "WEIGHT_DECAY": 0.001, "NESTEROV": 1},
                 lambda: torch.optim.SGD,
                 {"lr": 0.01, "momentum": 0.8, "weight_decay": 0.001, "nesterov": True}),
    "rmsprop": ("rmsprop", {"LR": 0.01, "ALPHA": 0.9, "EPS": 1e-6},
                lambda: torch.optim.RMSprop, {"lr": 0.01, "alpha": 0.9, "eps": 1e-6}),
    "rmsprop_momentum": ("rmsprop", {"LR": 0.001, "MOMENTUM": 0.5, "WEIGHT_DECAY": 0.01},
                         lambda: torch.optim.RMSprop,
                         {"lr": 0.001, "momentum": 0.5, "weight_decay": 0.01}),
    "adam": ("adam", {"LR": 0.001, "BETA1": 0.8, "BETA2": 0.99, "WEIGHT_DECAY": 0.01},
             lambda: torch.optim.Adam, {"lr": 0.001, "betas": (0.8, 0.99), "weight_decay": 0.01}),
    "adam_defaults": ("adam", {}, lambda: torch.optim.Adam, {}),
    "adamw": ("adamw", {"LR": 0.002, "WEIGHT_DECAY": 0.1},
              lambda: torch.optim.AdamW, {"lr": 0.002, "weight_decay": 0.1}),
    "adagrad": ("adagrad", {"LR": 0.05}, lambda: torch.optim.Adagrad, {"lr": 0.05}),
}


def create_args(name: str, opt: str, hp: dict[str, float], init: np.ndarray) -> list[Any]:
    args: list[Any] = ["PARAM.CREATE", name, "SIZE", len(init), "OPTIMIZER", opt]
    for k, v in hp.items():
        args += ["NESTEROV"] if k == "NESTEROV" else [k, repr(v)]
    return [*args, "INIT", init.astype("<f4").tobytes()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch_optim(r: redis.Redis, case: str) -> None:
    opt, hp, torch_cls, kw = CASES[case]
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal(N).astype(np.float32)
    assert r.execute_command(*create_args("p", opt, hp, w0)) == b"OK"
    t = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    topt = torch_cls()([t], **kw)
    for step in range(1, STEPS + 1):
        g = (rng.standard_normal(N) * 0.1).astype(np.float32)
        assert r.execute_command("PARAM.PUSH", "p", g.tobytes()) == step
        t.grad = torch.from_numpy(g.copy())
        topt.step()
    version, ours = pull(r, "p")
    assert version == STEPS
    ref = t.detach().numpy()
    diff = float(np.max(np.abs(ours.astype(np.float64) - ref)))
    scale = max(1.0, float(np.max(np.abs(ref))))
    moved = float(np.max(np.abs(ref - w0)))
    print(f"{case}: max |ours - torch| = {diff:.3g} (relative {diff / scale:.3g}), "
          f"max |moved| {moved:.3g}, tolerance {TOL:.3g}")
    assert moved > 100 * TOL * scale  # the test sees real updates, not a tolerance that hides them
    assert diff <= TOL * scale, f"{case}: {diff} > {TOL * scale}"
    d = info_of(r, "p")
    assert int(d[b"step"]) == STEPS and d[b"optimizer"] == opt.encode()


def test_scale_is_applied(r: redis.Redis) -> None:
    w0 = np.ones(8, dtype=np.float32)
    r.execute_command(*create_args("s", "sgd", {"LR": 0.5}, w0))
    g = np.full(8, 0.25, dtype=np.float32)
    r.execute_command("PARAM.PUSH", "s", g.tobytes(), "SCALE", "2")
    assert np.array_equal(pull(r, "s")[1], np.full(8, 0.75, dtype=np.float32))


def test_maxstale(r: redis.Redis) -> None:
    r.execute_command("PARAM.CREATE", "m", "SIZE", 4, "OPTIMIZER", "sgd")
    g = np.ones(4, dtype=np.float32).tobytes()
    for _ in range(5):
        r.execute_command("PARAM.PUSH", "m", g)
    before = pull(r, "m")
    # version 5: a gradient from version 2 is 3 behind
    assert r.execute_command("PARAM.PUSH", "m", g, "BASE", 2, "MAXSTALE", 3) == 6
    with pytest.raises(redis.ResponseError,
                       match=r"^STALE gradient.*4 versions behind.*MAXSTALE is 3") as stale:
        r.execute_command("PARAM.PUSH", "m", g, "BASE", 2, "MAXSTALE", 3)
    assert type(errors.replay_error(stale.value)) is errors.StaleGradientError
    with pytest.raises(redis.ResponseError, match="newer than"):
        r.execute_command("PARAM.PUSH", "m", g, "BASE", 99)
    with pytest.raises(redis.ResponseError, match="MAXSTALE needs BASE"):
        r.execute_command("PARAM.PUSH", "m", g, "MAXSTALE", 3)
    version, w = pull(r, "m")
    assert version == 6 and np.allclose(w, before[1] - 0.01)


def test_pull_ifnewer(r: redis.Redis) -> None:
    r.execute_command("PARAM.CREATE", "q", "SIZE", 3, "OPTIMIZER", "adam")
    assert r.execute_command("PARAM.PULL", "q", "IFNEWER", 0) == [0, None]
    r.execute_command("PARAM.PUSH", "q", np.ones(3, dtype=np.float32).tobytes())
    version, blob = r.execute_command("PARAM.PULL", "q", "IFNEWER", 0)
    assert version == 1 and len(blob) == 12
    assert r.execute_command("PARAM.PULL", "q", "IFNEWER", 1) == [1, None]
    assert r.execute_command("PARAM.SET", "q", np.zeros(3, dtype=np.float32).tobytes()) == 2
    version, blob = r.execute_command("PARAM.PULL", "q", "IFNEWER", 1)
    assert version == 2 and blob == bytes(12)


def test_version_published(r: redis.Redis) -> None:
    r.execute_command("PARAM.CREATE", "v", "SIZE", 2, "OPTIMIZER", "sgd")
    ps = r.pubsub()
    ps.subscribe("__param__:v")
    assert ps.get_message(timeout=5)["type"] == "subscribe"
    r.execute_command("PARAM.PUSH", "v", bytes(8))
    r.execute_command("PARAM.SET", "v", bytes(8))
    got = [ps.get_message(timeout=5) for _ in range(2)]
    assert [m["data"] for m in got if m] == [b"1", b"2"]
    ps.close()


def test_pull_survives_a_step(r: redis.Redis) -> None:
    """A PULL's reply goes by reference; a step right behind it in the same pipeline
    must not change what the PULL already answered."""
    n = 1 << 20
    r.execute_command("PARAM.CREATE", "big", "SIZE", n, "OPTIMIZER", "sgd", "LR", 1)
    p = r.pipeline(transaction=False)
    for _ in range(3):
        p.execute_command("PARAM.PULL", "big")
        p.execute_command("PARAM.PUSH", "big", np.ones(n, dtype=np.float32).tobytes())
    out = p.execute()
    for k in range(3):
        version, blob = out[2 * k]
        assert version == k
        assert np.all(np.frombuffer(blob, dtype="<f4") == -float(k))


def error_of(r: redis.Redis, *args: Any) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_bad_input_changes_nothing(r: redis.Redis) -> None:
    r.execute_command("PARAM.CREATE", "b", "SIZE", 4, "OPTIMIZER", "adam")
    r.execute_command("PARAM.PUSH", "b", np.ones(4, dtype=np.float32).tobytes())
    before = pull(r, "b")
    info_before = r.execute_command("PARAM.INFO", "b")
    assert "a gradient of 12 bytes" in error_of(r, "PARAM.PUSH", "b", bytes(12))
    assert "parameters of 20 bytes" in error_of(r, "PARAM.SET", "b", bytes(20))
    for bad in (np.nan, np.inf, -np.inf):
        g = np.ones(4, dtype=np.float32)
        g[2] = bad
        assert "gradient element 2 is not finite" in error_of(r, "PARAM.PUSH", "b", g.tobytes())
    big = np.full(4, 3e38, dtype=np.float32).tobytes()
    assert "once scaled" in error_of(r, "PARAM.PUSH", "b", big, "SCALE", "10")
    assert "SCALE" in error_of(r, "PARAM.PUSH", "b", bytes(16), "SCALE", "nan")
    assert error_of(r, "PARAM.PUSH", "b", bytes(16), "FOO", "1") == "syntax error"
    assert pull(r, "b")[0] == before[0] and np.array_equal(pull(r, "b")[1], before[1])
    assert r.execute_command("PARAM.INFO", "b") == info_before
    # unknown tables
    assert error_of(r, "PARAM.PUSH", "nosuch", bytes(16)).startswith("NOTABLE")
    assert error_of(r, "PARAM.PULL", "nosuch").startswith("NOTABLE")
    assert error_of(r, "PARAM.DROP", "nosuch").startswith("NOTABLE")
    assert error_of(r, "PARAM.INFO", "nosuch").startswith("NOTABLE")
    # creation: nothing is created when refused
    assert "unknown optimizer 'lbfgs'" in error_of(r, "PARAM.CREATE", "c", "SIZE", 4,
                                                   "OPTIMIZER", "lbfgs")
    for args, words in ((("LR", "-1"), "LR must be >= 0"), (("BETA1", "1"), "BETA1"),
                        (("BETA2", "1.5"), "BETA2"), (("EPS", "-1e-8"), "EPS"),
                        (("WEIGHT_DECAY", "-0.1"), "WEIGHT_DECAY"), (("LR", "inf"), "LR"),
                        (("MOMENTUM", "1"), "MOMENTUM"), (("NESTEROV",), "NESTEROV")):
        assert words in error_of(r, "PARAM.CREATE", "c", "SIZE", 4, "OPTIMIZER", "adam", *args)
    assert "ALPHA" in error_of(r, "PARAM.CREATE", "c", "SIZE", 4, "OPTIMIZER", "rmsprop",
                               "ALPHA", "2")
    assert "SIZE" in error_of(r, "PARAM.CREATE", "c", "SIZE", 0, "OPTIMIZER", "sgd")
    assert "INIT of 8 bytes" in error_of(r, "PARAM.CREATE", "c", "SIZE", 4, "OPTIMIZER", "sgd",
                                         "INIT", bytes(8))
    assert "exists" in error_of(r, "PARAM.CREATE", "b", "SIZE", 4, "OPTIMIZER", "sgd")
    assert error_of(r, "PARAM.INFO", "c").startswith("NOTABLE")


def test_drop_and_flushall(r: redis.Redis) -> None:
    r.execute_command("PARAM.CREATE", "d", "SIZE", 4, "OPTIMIZER", "sgd")
    r.execute_command("PARAM.CREATE", "e", "SIZE", 4, "OPTIMIZER", "sgd")
    r.set("d", "a string key of the same name")
    assert r.delete("d") == 1  # DEL deletes the key, not the parameter table
    assert pull(r, "d")[0] == 0
    assert r.execute_command("PARAM.DROP", "d") == b"OK"
    assert error_of(r, "PARAM.PULL", "d").startswith("NOTABLE")
    r.flushall()
    assert error_of(r, "PARAM.PULL", "e").startswith("NOTABLE")


def test_acl_key_patterns(r: redis.Redis, replay_host: str) -> None:
    r.execute_command("PARAM.CREATE", "team:a", "SIZE", 2, "OPTIMIZER", "sgd")
    r.execute_command("PARAM.CREATE", "other", "SIZE", 2, "OPTIMIZER", "sgd")
    # the module host's commands have no category of their own (Redis 7.0's modules
    # cannot add one): the worker is allowed the command by name there
    allow = "+param.push" if replay_host == "module" else "+@replay"
    r.execute_command("ACL", "SETUSER", "worker", "on", ">pw", "~team:*", allow)
    try:
        w = redis.Redis(host=r.connection_pool.connection_kwargs["host"],
                        port=r.connection_pool.connection_kwargs["port"],
                        username="worker", password="pw")
        assert w.execute_command("PARAM.PUSH", "team:a", bytes(8)) == 1
        with pytest.raises(redis.exceptions.NoPermissionError):
            w.execute_command("PARAM.PUSH", "other", bytes(8))
        w.close()
    finally:
        r.execute_command("ACL", "DELUSER", "worker")


@pytest.mark.parametrize("opt", ["adam", "adamw", "adagrad", "momentum", "rmsprop", "sgd"])
def test_snapshot_round_trip(server_factory: Callable[..., ServerProcess], tmp_path: Path,
                             opt: str, replay_host: str) -> None:
    """SAVE keeps the parameters and the optimizer state (moments, step count): a table
    restored from the snapshot takes its next step exactly as its twin that never left.
    The native server's snapshot (--restore), or the module's RDB (redis-server loads
    its dump.rdb at start). A SYNC table keeps its SYNC k."""
    d = tmp_path / "snap"
    d.mkdir()
    kind = REPLAY_HOSTS[replay_host]
    a = server_factory(kind, "--dir", str(d))
    r = a.client()
    rng = np.random.default_rng(11)
    w0 = rng.standard_normal(257).astype(np.float32)
    hp = {"LR": 0.01, "MOMENTUM": 0.5} if opt in ("momentum", "rmsprop") else {"LR": 0.01}
    for name in ("p", "twin"):
        r.execute_command(*create_args(name, opt, hp, w0))
    r.execute_command("PARAM.CREATE", "sync", "SIZE", 3, "OPTIMIZER", opt, "SYNC", 4)
    for _ in range(5):
        g = rng.standard_normal(257).astype(np.float32).tobytes()
        r.execute_command("PARAM.PUSH", "p", g)
        r.execute_command("PARAM.PUSH", "twin", g)
    assert r.save() is True
    saved = pull(r, "p")
    info = info_of(r, "p")
    g = rng.standard_normal(257).astype(np.float32).tobytes()
    assert r.execute_command("PARAM.PUSH", "twin", g) == 6
    expect = pull(r, "twin")
    assert a.stop() == 0, a.log_tail()
    (tmp_path / "b").mkdir()
    if kind == "module":
        b = server_factory(kind, "--dir", str(d))
    else:
        b = server_factory(kind, "--restore", str(d), "--dir", str(tmp_path / "b"))
    rb = b.client()
    version, w = pull(rb, "p")
    assert version == saved[0] == 5 and np.array_equal(w, saved[1])
    assert info_of(rb, "p") == info
    assert rb.execute_command("PARAM.PUSH", "p", g) == 6
    got = pull(rb, "p")
    assert np.array_equal(got[1], expect[1])  # bit for bit: the same state, the same step
    assert int(info_of(rb, "sync")[b"sync"]) == 4


def test_tables_count_toward_maxmemory(server_factory: Callable[..., ServerProcess],
                                       replay_host: str) -> None:
    srv = server_factory(REPLAY_HOSTS[replay_host])
    r = srv.client()

    def used() -> int:
        """The memory maxmemory's checks count: the native server's used_memory; on the
        module host Redis's own plus the module's tables (outside Redis's allocator)."""
        if replay_host == "module":
            return int(r.info("memory")["used_memory"]) + int(r.info("inreplay")[
                "inreplay_memory"])
        return int(r.info("memory")["used_memory"])

    before = used()
    r.execute_command("PARAM.CREATE", "a", "SIZE", 1 << 20, "OPTIMIZER", "adam")  # 12 MiB
    assert used() >= before + 12 * (1 << 20)
    r.config_set("maxmemory", str(used() + (1 << 20)))
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        r.execute_command("PARAM.CREATE", "b", "SIZE", 1 << 20, "OPTIMIZER", "sgd")
    assert error_of(r, "PARAM.INFO", "b").startswith("NOTABLE")
    assert r.execute_command("PARAM.PUSH", "a", bytes(4 << 20)) == 1  # steps still run


# ---- SYNC k: one step with the mean of k pushes ---------------------------------------


def pending(r: redis.Redis, name: str) -> int:
    return int(info_of(r, name)[b"sync_pending"])


def wait_pending(r: redis.Redis, name: str, n: int) -> None:
    deadline = time.monotonic() + 10
    while pending(r, name) != n:
        assert time.monotonic() < deadline, f"sync_pending stayed {pending(r, name)}, not {n}"
        time.sleep(0.002)


class Pusher:
    """One worker's connection: send a PUSH now, read its reply later (it may wait)."""

    def __init__(self, srv: ServerProcess) -> None:
        self.conn = redis.Connection(host=srv.host, port=srv.port, socket_timeout=30)
        self.conn.connect()

    def send(self, *args: Any) -> None:
        self.conn.send_command(*args)

    def reply(self) -> Any:
        try:
            return self.conn.read_response()
        except redis.ResponseError as e:
            return errors.replay_error(e)

    def waiting(self, timeout: float = 0.05) -> bool:
        """Whether no reply came within timeout (the push waits for its round)."""
        return not self.conn.can_read(timeout=timeout)

    def close(self) -> None:
        self.conn.disconnect()


def push_round(r: redis.Redis, pushers: list[Pusher], name: str, grads: list[np.ndarray],
               *extra: Any) -> list[Any]:
    """One round: every pusher but the last waits (in this order), the last completes it."""
    for k, (p, g) in enumerate(zip(pushers, grads, strict=True)):
        p.send("PARAM.PUSH", name, g.tobytes(), *extra)
        if k + 1 < len(grads):
            wait_pending(r, name, k + 1)
    return [p.reply() for p in pushers]


def mean_of(grads: list[np.ndarray]) -> np.ndarray:
    """float32: summed in arrival order, then divided by k (what the server computes)."""
    acc = grads[0].copy()
    for g in grads[1:]:
        acc = acc + g
    return acc / np.float32(len(grads))


@pytest.fixture
def pushers(replay_server: ServerProcess) -> Iterator[list[Pusher]]:
    ps = [Pusher(replay_server) for _ in range(3)]
    yield ps
    for p in ps:
        p.close()


def test_sync_mean_then_one_step(r: redis.Redis, pushers: list[Pusher]) -> None:
    """SYNC 3: each round of 3 pushes is one Adam step with their mean, bit for bit the
    step of a plain table pushed that mean, and within TOL of torch.optim.Adam."""
    rng = np.random.default_rng(5)
    n, rounds = 4099, 40
    w0 = rng.standard_normal(n).astype(np.float32)
    hp = {"LR": 0.01, "WEIGHT_DECAY": 0.01}
    r.execute_command(*create_args("s", "adam", hp, w0)[:-2], "SYNC", 3,
                      "INIT", w0.tobytes())
    r.execute_command(*create_args("twin", "adam", hp, w0))
    t = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    topt = torch.optim.Adam([t], lr=0.01, weight_decay=0.01)
    ps = r.pubsub()
    ps.subscribe("__param__:s")
    assert ps.get_message(timeout=5)["type"] == "subscribe"
    for k in range(1, rounds + 1):
        grads = [(rng.standard_normal(n) * 0.1).astype(np.float32) for _ in range(3)]
        assert push_round(r, pushers, "s", grads) == [k, k, k]  # all get the new version
        mean = mean_of(grads)
        assert r.execute_command("PARAM.PUSH", "twin", mean.tobytes()) == k
        t.grad = torch.stack([torch.from_numpy(g) for g in grads]).mean(0)
        topt.step()
    version, ours = pull(r, "s")
    assert version == rounds and int(info_of(r, "s")[b"step"]) == rounds
    assert np.array_equal(ours, pull(r, "twin")[1])
    ref = t.detach().numpy()
    assert float(np.max(np.abs(ref - w0))) > 100 * TOL
    assert float(np.max(np.abs(ours.astype(np.float64) - ref))) <= TOL * max(1.0, np.abs(ref).max())
    # one version message per round, not per push
    got = [ps.get_message(timeout=5) for _ in range(rounds)]
    assert [int(m["data"]) for m in got if m] == list(range(1, rounds + 1))
    assert ps.get_message(timeout=0.1) is None
    ps.close()


def test_sync_scale_per_push(r: redis.Redis, pushers: list[Pusher]) -> None:
    r.execute_command("PARAM.CREATE", "sc", "SIZE", 4, "OPTIMIZER", "sgd", "LR", 1, "SYNC", 2)
    a, b = np.full(4, 1, np.float32), np.full(4, 3, np.float32)
    pushers[0].send("PARAM.PUSH", "sc", a.tobytes(), "SCALE", 4)
    wait_pending(r, "sc", 1)
    pushers[1].send("PARAM.PUSH", "sc", b.tobytes())
    assert [pushers[0].reply(), pushers[1].reply()] == [1, 1]
    assert np.array_equal(pull(r, "sc")[1], np.full(4, -3.5, np.float32))  # -(4 + 3) / 2


def test_sync_pushers_wait_for_the_round(r: redis.Redis, pushers: list[Pusher]) -> None:
    r.execute_command("PARAM.CREATE", "w", "SIZE", 8, "OPTIMIZER", "sgd", "SYNC", 3)
    g = np.ones(8, np.float32).tobytes()
    pushers[0].send("PARAM.PUSH", "w", g, "TIMEOUT", 10)
    wait_pending(r, "w", 1)
    pushers[1].send("PARAM.PUSH", "w", g)
    wait_pending(r, "w", 2)
    assert pushers[0].waiting() and pushers[1].waiting()
    assert pull(r, "w")[0] == 0  # nothing applied yet
    assert int(r.info("clients")["blocked_clients"]) >= 2
    pushers[2].send("PARAM.PUSH", "w", g)
    assert [p.reply() for p in pushers] == [1, 1, 1]
    assert pending(r, "w") == 0 and int(info_of(r, "w")[b"step"]) == 1


def test_sync_timeout_withdraws_the_gradient(r: redis.Redis, pushers: list[Pusher]) -> None:
    """A pusher whose round does not complete in its TIMEOUT gets -SYNCTIMEOUT, and its
    gradient is not in the next round (which is only the pushes that still wait)."""
    r.execute_command("PARAM.CREATE", "t", "SIZE", 4, "OPTIMIZER", "sgd", "LR", 1, "SYNC", 2)
    t0 = time.monotonic()
    pushers[0].send("PARAM.PUSH", "t", np.full(4, 100, np.float32).tobytes(), "TIMEOUT", 0.2)
    e = pushers[0].reply()
    assert isinstance(e, errors.SyncTimeout), e
    assert 0.15 <= time.monotonic() - t0 < 5
    assert "had 1 of its 2 pushes" in str(e) and "withdrawn" in str(e)
    assert pending(r, "t") == 0 and pull(r, "t")[0] == 0
    got = push_round(r, pushers[1:], "t", [np.full(4, 1, np.float32), np.full(4, 3, np.float32)])
    assert got == [1, 1]
    assert np.array_equal(pull(r, "t")[1], np.full(4, -2, np.float32))
    # the connection that timed out pushes again, into a later round
    assert push_round(r, pushers[:2], "t", [np.zeros(4, np.float32)] * 2) == [2, 2]


def test_sync_disconnect_withdraws_the_gradient(r: redis.Redis,
                                                replay_server: ServerProcess,
                                                pushers: list[Pusher]) -> None:
    r.execute_command("PARAM.CREATE", "x", "SIZE", 4, "OPTIMIZER", "sgd", "LR", 1, "SYNC", 2)
    gone = Pusher(replay_server)
    gone.send("PARAM.PUSH", "x", np.full(4, 100, np.float32).tobytes())
    wait_pending(r, "x", 1)
    gone.close()
    wait_pending(r, "x", 0)
    got = push_round(r, pushers[:2], "x", [np.full(4, 1, np.float32), np.full(4, 5, np.float32)])
    assert got == [1, 1]
    assert np.array_equal(pull(r, "x")[1], np.full(4, -3, np.float32))


def test_sync_drop_answers_the_waiters(r: redis.Redis, pushers: list[Pusher]) -> None:
    r.execute_command("PARAM.CREATE", "dr", "SIZE", 4, "OPTIMIZER", "sgd", "SYNC", 2)
    pushers[0].send("PARAM.PUSH", "dr", bytes(16))
    wait_pending(r, "dr", 1)
    r.execute_command("PARAM.DROP", "dr")
    e = pushers[0].reply()
    assert isinstance(e, errors.NoSuchTableError) and "dropped while" in str(e), e
    r.execute_command("PARAM.CREATE", "dr", "SIZE", 4, "OPTIMIZER", "sgd", "SYNC", 2)
    pushers[0].send("PARAM.PUSH", "dr", bytes(16))
    wait_pending(r, "dr", 1)
    r.flushall()
    assert isinstance(pushers[0].reply(), errors.NoSuchTableError)


def test_sync_bad_input_joins_no_round(r: redis.Redis, pushers: list[Pusher]) -> None:
    r.execute_command("PARAM.CREATE", "bi", "SIZE", 4, "OPTIMIZER", "sgd", "LR", 1, "SYNC", 2)
    pushers[0].send("PARAM.PUSH", "bi", np.full(4, 1, np.float32).tobytes())
    wait_pending(r, "bi", 1)
    nan = np.ones(4, np.float32)
    nan[1] = np.nan
    assert "not finite" in error_of(r, "PARAM.PUSH", "bi", nan.tobytes())
    assert "a gradient of 8 bytes" in error_of(r, "PARAM.PUSH", "bi", bytes(8))
    assert "timeout" in error_of(r, "PARAM.PUSH", "bi", bytes(16), "TIMEOUT", "x")
    assert pending(r, "bi") == 1 and pushers[0].waiting()
    # inside MULTI a push that cannot complete its round is refused (it cannot wait)
    p = r.pipeline(transaction=True)
    p.execute_command("PARAM.PUSH", "bi", np.full(4, 3, np.float32).tobytes())
    assert p.execute() == [1]  # it completes the waiting round: allowed
    assert pushers[0].reply() == 1
    p = r.pipeline(transaction=True)
    p.execute_command("PARAM.PUSH", "bi", bytes(16))
    with pytest.raises(redis.ResponseError, match="cannot inside MULTI"):
        p.execute()
    assert pending(r, "bi") == 0
    assert np.array_equal(pull(r, "bi")[1], np.full(4, -2, np.float32))
    assert "SYNC must be an integer" in error_of(r, "PARAM.CREATE", "z", "SIZE", 4,
                                                  "OPTIMIZER", "sgd", "SYNC", 0)
    assert "SYNC must be an integer" in error_of(r, "PARAM.CREATE", "z", "SIZE", 4,
                                                  "OPTIMIZER", "sgd", "SYNC", 4097)


def test_sync_overflowing_mean_applies_nothing(r: redis.Redis, pushers: list[Pusher]) -> None:
    r.execute_command("PARAM.CREATE", "o", "SIZE", 4, "OPTIMIZER", "sgd", "SYNC", 2)
    big = np.full(4, 3e38, np.float32)
    got = push_round(r, pushers[:2], "o", [big, big])
    assert all("not finite" in str(e) and "nothing applied" in str(e) for e in got), got
    assert pull(r, "o")[0] == 0 and int(info_of(r, "o")[b"step"]) == 0
    assert push_round(r, pushers[:2], "o", [np.ones(4, np.float32)] * 2) == [1, 1]
