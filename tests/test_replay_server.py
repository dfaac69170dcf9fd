"""REPLAY.* commands of inreplay, through redis-py's execute_command.

The spec these tests are written to:

    REPLAY.CREATE t CAPACITY n [ALPHA a] [BETA b] [EPSILON e] [MAXBYTES bytes] -> OK
    REPLAY.ADD t prio item [prio item ...]    -> array of integer ids (0, 1, 2 ...);
                                                 prio may be MAX
    REPLAY.SAMPLE t n [BETA b]                 -> [ids: n int64 LE, weights: n float32 LE,
                                                   [n items]]
    REPLAY.SAMPLE t n [BETA b] PACKED          -> one bulk: ids, weights, n items of one size
                                                 (tests/test_packed.py)
    REPLAY.UPDATE t ids prios                  -> number applied (ids int64 LE,
                                                 prios float32 LE)
    REPLAY.INFO t                              -> flat field/value array
    REPLAY.DROP t, REPLAY.LIST

Stored priority is (p + epsilon)^alpha; an item is drawn with probability
stored_i / sum(stored); its importance weight is (min_stored / stored_i)^beta.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import redis
from conftest import REPLAY_HOSTS
from redis.exceptions import ResponseError

from pyctl.errors import decode_info

if TYPE_CHECKING:
    from conftest import ServerProcess

INFO_FIELDS = {
    "size",
    "capacity",
    "inserts",
    "samples",
    "updates",
    "stale_updates",
    "total_priority",
    "max_priority",
    "min_priority",
    "alpha",
    "beta",
    "epsilon",
    "bytes_used",
}

# chi-square critical values at p = 1e-4 (tests must not flake)
CHI2_CRIT_1E4 = {1: 15.137, 2: 18.421, 3: 21.108}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


@dataclass
class Sample:
    ids: np.ndarray
    weights: np.ndarray
    items: list[bytes]


def fmt(p: float | str) -> str:
    return p if isinstance(p, str) else repr(float(p))


class Replay:
    """Thin wrappers over execute_command, one method per REPLAY command."""

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.made: list[str] = []

    def name(self) -> str:
        return f"t-{uuid.uuid4().hex[:12]}"

    def create(self, capacity: int, name: str | None = None, **opts: float | int) -> str:
        name = name or self.name()
        args: list[Any] = ["REPLAY.CREATE", name, "CAPACITY", capacity]
        for key, value in opts.items():
            args += [key.upper(), value]
        assert self.r.execute_command(*args) == b"OK"
        self.made.append(name)
        return name

    def add(self, name: str, *pairs: tuple[float | str, bytes | str]) -> list[int]:
        args: list[Any] = ["REPLAY.ADD", name]
        for prio, item in pairs:
            args += [fmt(prio), item]
        ids = self.r.execute_command(*args)
        assert isinstance(ids, list) and all(isinstance(i, int) for i in ids), ids
        return ids

    def sample(self, name: str, n: int, beta: float | None = None) -> Sample:
        args: list[Any] = ["REPLAY.SAMPLE", name, n]
        if beta is not None:
            args += ["BETA", fmt(beta)]
        reply = self.r.execute_command(*args)
        assert isinstance(reply, list) and len(reply) == 3, reply
        ids_b, w_b, items = reply
        assert isinstance(ids_b, bytes) and len(ids_b) == 8 * n, ids_b
        assert isinstance(w_b, bytes) and len(w_b) == 4 * n, w_b
        assert isinstance(items, list) and len(items) == n
        return Sample(np.frombuffer(ids_b, "<i8"), np.frombuffer(w_b, "<f4"), items)

    def update(self, name: str, ids: Sequence[int], prios: Sequence[float]) -> int:
        n = self.r.execute_command(
            "REPLAY.UPDATE",
            name,
            np.asarray(ids, "<i8").tobytes(),
            np.asarray(prios, "<f4").tobytes(),
        )
        assert isinstance(n, int), n
        return n

    def info(self, name: str) -> dict[str, Any]:
        """REPLAY.INFO as a dict; numeric values (integers or bulk strings) as float."""
        reply = self.r.execute_command("REPLAY.INFO", name)
        assert isinstance(reply, list) and len(reply) % 2 == 0, reply
        out: dict[str, Any] = {}
        for key, value in zip(reply[::2], reply[1::2], strict=True):
            try:
                out[key.decode()] = float(value)
            except ValueError:
                out[key.decode()] = value
        for field in INFO_FIELDS & set(out):
            assert isinstance(out[field], float), (field, out[field])
        return out

    def tables(self) -> set[bytes]:
        reply = self.r.execute_command("REPLAY.LIST")
        assert isinstance(reply, list), reply
        return set(reply)

    def counts(self, name: str, draws: int, batch: int = 10_000) -> dict[int, int]:
        counts: dict[int, int] = {}
        left = draws
        while left:
            n = min(batch, left)
            ids, freq = np.unique(self.sample(name, n).ids, return_counts=True)
            for i, c in zip(ids.tolist(), freq.tolist(), strict=True):
                counts[i] = counts.get(i, 0) + c
            left -= n
        return counts


def chi_square(observed: dict[int, int], probs: dict[int, float]) -> float:
    assert set(observed) <= set(probs), f"drew ids outside {set(probs)}: {observed}"
    total = sum(observed.values())
    return sum((observed.get(i, 0) - total * p) ** 2 / (total * p) for i, p in probs.items())


@pytest.fixture
def rc(replay_server: ServerProcess) -> Iterator[redis.Redis]:
    client = replay_server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def rp(rc: redis.Redis) -> Iterator[Replay]:
    rp = Replay(rc)
    yield rp
    for name in rp.made:  # tables may outlive FLUSHALL: drop what we made
        try:
            rc.execute_command("REPLAY.DROP", name)
        except redis.RedisError:
            pass


def same_connection_error(r: redis.Redis, *args: Any) -> str:
    """Run a command that must fail; check the connection survived it."""
    before = r.client_id()
    with pytest.raises(ResponseError) as exc:
        r.execute_command(*args)
    assert r.client_id() == before, "the error closed the connection"
    return str(exc.value)


# --------------------------------------------------------------------------
# CREATE / LIST / DROP
# --------------------------------------------------------------------------


def test_create_list_drop(rp: Replay) -> None:
    a = rp.create(10)
    b = rp.create(20)
    assert {a.encode(), b.encode()} <= rp.tables()
    rp.r.execute_command("REPLAY.DROP", a)
    assert a.encode() not in rp.tables()
    assert b.encode() in rp.tables()
    same_connection_error(rp.r, "REPLAY.INFO", a)
    same_connection_error(rp.r, "REPLAY.DROP", a)
    # the name is free again
    rp.create(5, name=a)
    assert rp.info(a)["capacity"] == 5


def test_create_duplicate_name(rp: Replay) -> None:
    t = rp.create(10)
    rp.add(t, (1.0, "x"))
    same_connection_error(rp.r, "REPLAY.CREATE", t, "CAPACITY", 99)
    info = rp.info(t)  # the existing table is untouched
    assert info["capacity"] == 10
    assert info["size"] == 1


def test_create_options_in_info(rp: Replay) -> None:
    t = rp.create(123, alpha=0.7, beta=0.4, epsilon=0.01, maxbytes=1 << 20)
    info = rp.info(t)
    assert INFO_FIELDS <= set(info), set(info) ^ INFO_FIELDS
    assert info["capacity"] == 123
    assert info["alpha"] == pytest.approx(0.7)
    assert info["beta"] == pytest.approx(0.4)
    assert info["epsilon"] == pytest.approx(0.01)
    for field in ("size", "inserts", "samples", "updates", "stale_updates"):
        assert info[field] == 0, field


@pytest.mark.parametrize(
    "args",
    [
        ["CAPACITY", "0"],
        ["CAPACITY", "-5"],
        ["CAPACITY", "x"],
        ["CAPACITY", "1.5"],
        ["CAPACITY"],
        ["ALPHA", "1"],  # no CAPACITY
        ["CAPACITY", "10", "ALPHA", "-1"],
        ["CAPACITY", "10", "ALPHA", "nan"],
        ["CAPACITY", "10", "ALPHA", "x"],
        ["CAPACITY", "10", "ALPHA"],
        ["CAPACITY", "10", "EPSILON", "-0.1"],
        ["CAPACITY", "10", "MAXBYTES", "-1"],
        ["CAPACITY", "10", "NOSUCHOPTION", "1"],
    ],
)
def test_create_bad_arguments(rp: Replay, args: list[str]) -> None:
    name = rp.name()
    same_connection_error(rp.r, "REPLAY.CREATE", name, *args)
    assert name.encode() not in rp.tables()


# --------------------------------------------------------------------------
# ADD
# --------------------------------------------------------------------------


def test_add_ids_monotonic_from_zero(rp: Replay) -> None:
    t = rp.create(100)
    assert rp.add(t, (1.0, "a")) == [0]
    assert rp.add(t, (2.0, "b"), (0.5, "c"), ("MAX", "d")) == [1, 2, 3]
    assert rp.add(t, ("MAX", "e"), (3, "f")) == [4, 5]
    info = rp.info(t)
    assert info["size"] == 6
    assert info["inserts"] == 6


def test_tables_have_their_own_ids(rp: Replay) -> None:
    a, b = rp.create(10), rp.create(10)
    assert rp.add(a, (1, "x"), (1, "y")) == [0, 1]
    assert rp.add(b, (1, "z")) == [0]
    assert rp.sample(b, 5).items == [b"z"] * 5


def test_add_max_priority(rp: Replay) -> None:
    t = rp.create(10, alpha=1, epsilon=0, beta=1)
    [m0] = rp.add(t, ("MAX", "first"))
    info = rp.info(t)
    assert info["max_priority"] == pytest.approx(1.0)  # the maximum before any priority
    assert info["total_priority"] == pytest.approx(1.0)
    rp.add(t, (5.0, "five"), (0.5, "half"))
    [m1] = rp.add(t, ("MAX", "second"))
    info = rp.info(t)
    assert info["max_priority"] == pytest.approx(5.0)
    assert info["min_priority"] == pytest.approx(0.5)
    assert info["total_priority"] == pytest.approx(1.0 + 5.0 + 0.5 + 5.0)
    s = rp.sample(t, 400)
    by_id = dict(zip(s.ids.tolist(), s.weights.tolist(), strict=True))
    assert by_id[m1] == pytest.approx(0.5 / 5.0, rel=1e-5)  # (min/p)^beta, p = current max
    if m0 in by_id:
        assert by_id[m0] == pytest.approx(0.5 / 1.0, rel=1e-5)


@pytest.mark.parametrize("bad", ["-1", "-0.001", "nan", "NaN", "inf", "-inf", "abc", "", "1.0x"])
def test_add_bad_priority_inserts_nothing(rp: Replay, bad: str) -> None:
    t = rp.create(10)
    same_connection_error(rp.r, "REPLAY.ADD", t, "1.0", "good", bad, "bad", "2.0", "good2")
    info = rp.info(t)
    assert info["size"] == 0
    assert info["inserts"] == 0
    assert rp.add(t, (1.0, "ok")) == [0]  # no id was used up


@pytest.mark.parametrize("args", [[], ["1.0"], ["1.0", "a", "2.0"]])
def test_add_unpaired_arguments(rp: Replay, args: list[str]) -> None:
    t = rp.create(10)
    same_connection_error(rp.r, "REPLAY.ADD", t, *args)
    assert rp.info(t)["size"] == 0


def test_items_are_binary_safe(rp: Replay) -> None:
    t = rp.create(10)
    items = [b"", b"\x00", b"\r\n", b"*1\r\n$4\r\nPING\r\n", bytes(range(256)), b"x" * 1_000_000]
    ids = rp.add(t, *[(1.0, it) for it in items])
    s = rp.sample(t, 24)
    for i, item in zip(s.ids.tolist(), s.items, strict=True):
        assert item == items[ids.index(i)]
    assert set(s.ids.tolist()) == set(ids)  # 24 stratified draws over 6 equal items


# --------------------------------------------------------------------------
# SAMPLE
# --------------------------------------------------------------------------


def test_sample_returns_the_items_of_its_ids(rp: Replay) -> None:
    t = rp.create(100)
    payload = {}
    for k in range(10):
        [i] = rp.add(t, (k + 1, f"item-{k}".encode()))
        payload[i] = f"item-{k}".encode()
    for n in (1, 7, 10, 50):  # more draws than items: with replacement
        s = rp.sample(t, n)
        assert all(0 <= i < 10 for i in s.ids.tolist())
        assert s.items == [payload[i] for i in s.ids.tolist()]
        assert np.all(np.isfinite(s.weights)) and np.all(s.weights > 0)
        assert np.all(s.weights <= 1.0)


def test_sample_empty_table_is_error(rp: Replay) -> None:
    t = rp.create(10)
    same_connection_error(rp.r, "REPLAY.SAMPLE", t, 4)
    rp.add(t, (1.0, "now"))
    assert rp.sample(t, 1).items == [b"now"]


@pytest.mark.parametrize("n", ["x", "-1", "1.5"])
def test_sample_bad_count(rp: Replay, n: str) -> None:
    t = rp.create(10)
    rp.add(t, (1.0, "a"))
    same_connection_error(rp.r, "REPLAY.SAMPLE", t, n)


def test_sample_bad_beta(rp: Replay) -> None:
    t = rp.create(10)
    rp.add(t, (1.0, "a"))
    same_connection_error(rp.r, "REPLAY.SAMPLE", t, 1, "BETA", "x")
    same_connection_error(rp.r, "REPLAY.SAMPLE", t, 1, "BETA")


def test_fifo_eviction(rp: Replay) -> None:
    t = rp.create(5, alpha=1, epsilon=0)
    ids = rp.add(t, *[(1.0, f"a{k}") for k in range(3)])
    for k in range(3, 12):
        ids += rp.add(t, (1.0, f"a{k}"))
    assert ids == list(range(12))
    info = rp.info(t)
    assert info["size"] == 5
    assert info["capacity"] == 5
    assert info["inserts"] == 12
    assert info["total_priority"] == pytest.approx(5.0)
    s = rp.sample(t, 500)
    assert set(s.ids.tolist()) == {7, 8, 9, 10, 11}
    assert s.items == [f"a{i}".encode() for i in s.ids.tolist()]


def test_eviction_within_one_add(rp: Replay) -> None:
    t = rp.create(3)
    assert rp.add(t, *[(1.0, f"b{k}") for k in range(8)]) == list(range(8))
    assert rp.info(t)["size"] == 3
    assert set(rp.sample(t, 300).ids.tolist()) == {5, 6, 7}


def test_zero_priority_never_sampled(rp: Replay) -> None:
    t = rp.create(10, alpha=1, epsilon=0)
    ids = rp.add(t, (0, "z0"), (1.0, "one"), (0.0, "z1"), (0, "z2"))
    s = rp.sample(t, 5000)
    assert set(s.ids.tolist()) == {ids[1]}
    assert set(s.items) == {b"one"}


def test_epsilon_makes_zero_priority_sampleable(rp: Replay) -> None:
    t = rp.create(10, alpha=1, epsilon=0.5)
    rp.add(t, (0, "zero"), (1.0, "one"))  # stored 0.5 and 1.5
    counts = rp.counts(t, 40_000)
    assert chi_square(counts, {0: 0.25, 1: 0.75}) < CHI2_CRIT_1E4[1]
    assert rp.info(t)["total_priority"] == pytest.approx(2.0)


def test_sampling_distribution_chi_square(rp: Replay) -> None:
    t = rp.create(10, alpha=1, epsilon=0)
    rp.add(t, (1, "p1"), (2, "p2"), (3, "p3"), (4, "p4"))
    counts = rp.counts(t, 200_000)
    stat = chi_square(counts, {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4})
    assert stat < CHI2_CRIT_1E4[3], counts


def test_alpha_transforms_priorities(rp: Replay) -> None:
    t = rp.create(10, alpha=0.5, epsilon=0)
    rp.add(t, (1, "p1"), (4, "p4"))  # stored 1 and 2
    assert rp.info(t)["total_priority"] == pytest.approx(3.0)
    counts = rp.counts(t, 60_000)
    assert chi_square(counts, {0: 1 / 3, 1: 2 / 3}) < CHI2_CRIT_1E4[1]


def test_alpha_zero_is_uniform(rp: Replay) -> None:
    t = rp.create(10, alpha=0, epsilon=0)
    rp.add(t, (1, "a"), (100, "b"), (0.01, "c"))
    counts = rp.counts(t, 30_000)
    assert chi_square(counts, {0: 1 / 3, 1: 1 / 3, 2: 1 / 3}) < CHI2_CRIT_1E4[2]
    assert np.all(rp.sample(t, 100, beta=1.0).weights == 1.0)


# --------------------------------------------------------------------------
# weights
# --------------------------------------------------------------------------


def test_weights_equal_priorities_are_one(rp: Replay) -> None:
    t = rp.create(10, alpha=0.6, beta=0.4, epsilon=0.01)
    rp.add(t, *[(2.5, f"e{k}") for k in range(6)])
    for beta in (None, 0.0, 0.5, 1.0):
        assert np.all(rp.sample(t, 64, beta=beta).weights == np.float32(1.0))


@pytest.mark.parametrize("beta", [None, 0.0, 0.6, 1.0])
def test_weights_formula(rp: Replay, beta: float | None) -> None:
    table_beta = 0.4
    t = rp.create(10, alpha=1, epsilon=0, beta=table_beta)
    prios = [1.0, 2.0, 4.0, 8.0]
    rp.add(t, *[(p, f"w{p}") for p in prios])
    s = rp.sample(t, 200, beta=beta)
    b = table_beta if beta is None else beta
    expected = np.array([(min(prios) / prios[i]) ** b for i in s.ids.tolist()], np.float32)
    np.testing.assert_allclose(s.weights, expected, rtol=1e-5)
    assert set(s.ids.tolist()) == {0, 1, 2, 3}


def test_weights_use_the_table_minimum(rp: Replay) -> None:
    """The minimum is over the whole table, not over the drawn batch."""
    t = rp.create(10, alpha=1, epsilon=0, beta=0.5)
    [tiny, *_] = rp.add(t, (1e-3, "tiny"), (10.0, "a"), (10.0, "b"))
    s = rp.sample(t, 4)
    drawn = s.ids.tolist()
    big = [k for k, i in enumerate(drawn) if i != tiny]
    assert big, drawn  # P(all four are 'tiny') ~ 1e-16
    for k in big:
        assert s.weights[k] == pytest.approx(math.sqrt(1e-3 / 10.0), rel=1e-5)


# --------------------------------------------------------------------------
# UPDATE
# --------------------------------------------------------------------------


def test_update_changes_sampling(rp: Replay) -> None:
    t = rp.create(10, alpha=1, epsilon=0)
    ids = rp.add(t, *[(1.0, f"u{k}") for k in range(4)])
    assert rp.update(t, ids[:3], [0.0, 0.0, 0.0]) == 3
    s = rp.sample(t, 1000)
    assert set(s.ids.tolist()) == {ids[3]}
    info = rp.info(t)
    assert info["total_priority"] == pytest.approx(1.0)
    assert info["updates"] > 0
    assert rp.update(t, [ids[0]], [3.0]) == 1
    counts = rp.counts(t, 40_000)
    assert chi_square(counts, {ids[0]: 0.75, ids[3]: 0.25}) < CHI2_CRIT_1E4[1]
    assert rp.info(t)["max_priority"] == pytest.approx(3.0)


def test_update_sampled_ids_roundtrip(rp: Replay) -> None:
    """The learner loop: sample, then send new priorities for those ids
    (duplicates included; the last value for an id wins)."""
    t = rp.create(50, alpha=1, epsilon=0)
    rp.add(t, *[(1.0, f"r{k}") for k in range(50)])
    s = rp.sample(t, 32)
    rp.update(t, s.ids.tolist(), [0.0] * 32)
    assert not set(rp.sample(t, 2000).ids.tolist()) & set(s.ids.tolist())
    rp.update(t, [0, 0], [5.0, 0.0])  # last wins: id 0 ends at 0
    assert 0 not in rp.sample(t, 2000).ids.tolist()


def test_update_stale_ids_ignored_and_counted(rp: Replay) -> None:
    t = rp.create(4, alpha=1, epsilon=0)
    assert rp.add(t, *[(1.0, f"s{k}") for k in range(6)]) == list(range(6))  # 0, 1 evicted
    assert rp.update(t, [0, 1, 5], [2.0, 2.0, 3.0]) == 1
    info = rp.info(t)
    assert info["stale_updates"] == 2
    assert info["max_priority"] == pytest.approx(3.0)
    assert info["total_priority"] == pytest.approx(1.0 + 1.0 + 1.0 + 3.0)
    assert rp.update(t, [2], [1.0]) == 1
    assert rp.info(t)["stale_updates"] == 2


def test_update_finds_every_live_id_after_the_ring_wraps(rp: Replay) -> None:
    """In ring mode an id's slot is derived from the oldest live id's (one
    division per batch): after the ring wrapped, each live id's update lands
    on that id and on no other."""
    t = rp.create(5, alpha=1, epsilon=0)
    assert rp.add(t, *[(1.0, f"w{k}") for k in range(13)]) == list(range(13))  # live: 8..12
    live = list(range(8, 13))
    for target in live:
        assert rp.update(t, live, [1.0 if i == target else 0.0 for i in live]) == 5
        assert set(rp.sample(t, 64).ids.tolist()) == {target}
    assert rp.update(t, [3, 7, 12], [1.0, 1.0, 2.0]) == 1  # 3 and 7 evicted: stale
    assert rp.info(t)["total_priority"] == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("ids", "prios"),
    [
        (np.array([0, 1], "<i8").tobytes(), np.array([1.0], "<f4").tobytes()),
        (np.array([0], "<i8").tobytes()[:7], np.array([1.0], "<f4").tobytes()),
        (np.array([0], "<i8").tobytes(), np.array([1.0], "<f4").tobytes() + b"\x00"),
        (np.array([0, 1], "<i8").tobytes(), np.array([2.0, -1.0], "<f4").tobytes()),
        (np.array([0, 1], "<i8").tobytes(), np.array([2.0, np.nan], "<f4").tobytes()),
        (np.array([0, 1], "<i8").tobytes(), np.array([2.0, np.inf], "<f4").tobytes()),
    ],
    ids=["count-mismatch", "ids-not-int64s", "prios-not-float32s", "negative", "nan", "inf"],
)
def test_update_bad_payload_changes_nothing(rp: Replay, ids: bytes, prios: bytes) -> None:
    t = rp.create(10, alpha=1, epsilon=0)
    rp.add(t, (1.0, "a"), (1.0, "b"))
    same_connection_error(rp.r, "REPLAY.UPDATE", t, ids, prios)
    info = rp.info(t)
    assert info["total_priority"] == pytest.approx(2.0)
    assert info["max_priority"] == pytest.approx(1.0)


# --------------------------------------------------------------------------
# INFO counters, memory
# --------------------------------------------------------------------------


def test_info_values(rp: Replay) -> None:
    t = rp.create(8, alpha=1, beta=0.5, epsilon=0)
    rp.add(t, (1.0, "a"), (2.0, "b"), (3.0, "c"))
    info = rp.info(t)
    assert INFO_FIELDS <= set(info)
    assert info["size"] == 3
    assert info["capacity"] == 8
    assert info["inserts"] == 3
    assert info["samples"] == 0
    assert info["updates"] == 0
    assert info["stale_updates"] == 0
    assert info["total_priority"] == pytest.approx(6.0)
    assert info["max_priority"] == pytest.approx(3.0)
    assert info["min_priority"] == pytest.approx(1.0)
    assert info["alpha"] == 1.0
    assert info["beta"] == 0.5
    assert info["epsilon"] == 0.0
    assert info["bytes_used"] > 0

    rp.sample(t, 5)
    rp.sample(t, 5)
    assert rp.info(t)["samples"] in (2, 10)  # calls or items: either way, counted
    rp.update(t, [0, 1, 2], [1.0, 1.0, 1.0])
    assert rp.info(t)["updates"] in (1, 3)


def test_bytes_used_tracks_items(rp: Replay) -> None:
    t = rp.create(100)
    before = rp.info(t)["bytes_used"]
    rp.add(t, *[(1.0, b"x" * 10_000) for _ in range(10)])
    assert rp.info(t)["bytes_used"] >= before + 100_000


def test_maxbytes_bounds_bytes_used(rp: Replay) -> None:
    limit = 64 * 1024
    t = rp.create(1000, maxbytes=limit)
    accepted = 0
    for k in range(64):
        try:
            accepted += len(rp.add(t, (1.0, bytes([k % 256]) * 4096)))
        except ResponseError:
            pass  # refusing an item that does not fit is allowed; overflowing is not
        assert rp.info(t)["bytes_used"] <= limit
    assert accepted > 0
    info = rp.info(t)
    assert 0 < info["size"] < 64
    s = rp.sample(t, 20)
    assert all(len(item) == 4096 for item in s.items)


# --------------------------------------------------------------------------
# errors that must not close the connection
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["REPLAY.ADD", "{missing}", "1.0", "x"],
        ["REPLAY.SAMPLE", "{missing}", "1"],
        ["REPLAY.UPDATE", "{missing}", b"\x00" * 8, b"\x00" * 4],
        ["REPLAY.INFO", "{missing}"],
        ["REPLAY.DROP", "{missing}"],
    ],
)
def test_unknown_table(rp: Replay, args: list[Any]) -> None:
    name = rp.name()
    args = [name if a == "{missing}" else a for a in args]
    same_connection_error(rp.r, *args)
    assert name.encode() not in rp.tables()


@pytest.mark.parametrize(
    "args",
    [
        ["REPLAY.CREATE"],
        ["REPLAY.ADD"],
        ["REPLAY.SAMPLE", "{t}"],
        ["REPLAY.UPDATE", "{t}", b"\x00" * 8],
        ["REPLAY.INFO"],
        ["REPLAY.DROP"],
    ],
)
def test_wrong_arity(rp: Replay, args: list[Any]) -> None:
    t = rp.create(4)
    rp.add(t, (1.0, "a"))
    args = [t if a == "{t}" else a for a in args]
    msg = same_connection_error(rp.r, *args)
    assert msg == f"wrong number of arguments for '{args[0].lower()}' command"
    assert rp.info(t)["size"] == 1


def test_replay_survives_flood_of_errors(rp: Replay, replay_server: ServerProcess) -> None:
    t = rp.create(4)
    pipe = rp.r.pipeline(transaction=False)
    for k in range(500):
        pipe.execute_command("REPLAY.ADD", t, "-1" if k % 2 else "1", f"i{k}")
    results = pipe.execute(raise_on_error=False)
    assert sum(isinstance(x, ResponseError) for x in results) == 250
    assert rp.info(t)["inserts"] == 250
    assert rp.info(t)["size"] == 4
    assert replay_server.alive()


def test_capacity_fits_and_the_log_say_what_maxbytes_keeps(server_factory: Any,
                                                            replay_host: str) -> None:
    """Honest capacity: REPLAY.INFO capacity_fits is what MAXBYTES holds at the
    mean item size seen, and the log says so once, in one line."""
    srv = server_factory(REPLAY_HOSTS[replay_host])
    r = redis.Redis(port=srv.port, protocol=2)
    r.execute_command("REPLAY.CREATE", "cap", "CAPACITY", 1000, "MAXBYTES", 64 * 1024)
    fits = decode_info(r.execute_command("REPLAY.INFO", "cap"))["capacity_fits"]
    assert fits == 1000  # nothing seen yet
    for _ in range(3):
        r.execute_command("REPLAY.ADD", "cap", *[x for _ in range(10) for x in (1, b"x" * 1024)])
    fits = decode_info(r.execute_command("REPLAY.INFO", "cap"))["capacity_fits"]
    assert 55 <= fits <= 64  # 64 KiB of ~1 KiB items, not 1000
    r.close()
    lines = [ln for ln in srv.log_tail().splitlines() if "capacity_fits" in ln]
    assert len(lines) == 1 and "not its CAPACITY 1000" in lines[0], lines


@pytest.mark.native_only(reason="the start-up table (--capacity) is the native server's")
def test_start_up_table_and_replay_create_share_their_defaults(server_factory: Any) -> None:
    """Tables are built from one set of defaults (replay.h, taken by config.c's rows and
    by REPLAY.CREATE): a start-up table given only its capacity and a REPLAY.CREATE'd
    one agree on every option (they were once written in three places)."""
    srv = server_factory("inreplay", "--capacity", "100", "--seed", "7")
    r = srv.client()
    r.execute_command("REPLAY.CREATE", "made", "CAPACITY", "100")
    a, b = (decode_info(r.execute_command("REPLAY.INFO", t)) for t in ("replay", "made"))
    for key in ("capacity", "alpha", "beta", "epsilon", "maxbytes", "fanout", "sampler",
                "remover", "max_times_sampled", "storage"):
        assert a[key] == b[key], key
    assert (a["alpha"], a["beta"], a["epsilon"]) == (0.6, 0.4, 1e-6)
    r.close()
