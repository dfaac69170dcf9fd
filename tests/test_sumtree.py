"""The prioritized sampler (pyctl.sumtree over libinreplay) against a NumPy reference.

A hypothesis state machine drives random sequences of insert / update /
set_stored / evict / sample / rebuild (plus rejected bad input) and checks the
tree against plain arrays after every step. Statistical tests draw 10^6
samples with fixed seeds and compare frequencies with scipy's chi-square test
at significance 1e-3 (stratified sampling is less dispersed than multinomial,
so the test is conservative and does not flake).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from scipy import stats

from pyctl._native import EmptyTableError, NativeLibraryMissingError, load
from pyctl.sumtree import FANOUTS, PrioritizedSampler

try:
    load()
except NativeLibraryMissingError as exc:  # pragma: no cover - depends on the build
    pytest.skip(f"libinreplay not available: {exc}", allow_module_level=True)

KS = (2, 4, 8, 16, 32)
SIGNIFICANCE = 1e-3
BAD_VALUES = (-1.0, -1e-300, math.nan, math.inf, -math.inf)


def transform(raw: np.ndarray, alpha: float, epsilon: float) -> np.ndarray:
    """Reference priority transform, through libm's pow like the library."""
    return np.array([math.pow(float(r) + epsilon, alpha) for r in raw], dtype=np.float64)


def reference_weights(p: np.ndarray, slots: np.ndarray, beta: float) -> np.ndarray:
    """w_i = (N * P(i))^-beta / max_j (N * P(j))^-beta over the positive slots."""
    pos = p[p > 0]
    n = pos.size
    prob = p / p.sum()
    w = (n * prob[slots]) ** -beta
    return w / ((n * pos.min() / p.sum()) ** -beta)


# --------------------------------------------------------------------------
# the state machine
# --------------------------------------------------------------------------

raw_value = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1e-300, max_value=1e-3),
)


class SamplerMachine(RuleBasedStateMachine):
    """PrioritizedSampler vs. a NumPy array of stored priorities."""

    s: PrioritizedSampler

    @initialize(
        capacity=st.integers(1, 150),
        fanout=st.sampled_from(FANOUTS),
        alpha=st.sampled_from([0.0, 0.5, 0.6, 1.0, 1.7]),
        epsilon=st.sampled_from([0.0, 1e-6, 0.01]),
    )
    def init(self, capacity: int, fanout: int, alpha: float, epsilon: float) -> None:
        self.s = PrioritizedSampler(capacity, fanout, alpha, epsilon, seed=7)
        self.cap, self.alpha, self.eps = capacity, alpha, epsilon
        self.ref = np.zeros(capacity)
        self.maxp = 1.0
        self.head = 0  # ring position of the next insert
        self.size = 0  # live items in the ring

    def teardown(self) -> None:
        if hasattr(self, "s"):
            self.s.close()

    def _set(self, slots: np.ndarray, stored: np.ndarray) -> None:
        for slot, v in zip(slots.tolist(), stored.tolist(), strict=True):
            self.ref[slot] = v  # in order: the last value wins
        if stored.size:
            self.maxp = max(self.maxp, float(stored.max()))

    def _slots(self, data: st.DataObject, max_size: int = 40) -> np.ndarray:
        xs = data.draw(st.lists(st.integers(0, self.cap - 1), max_size=max_size))
        return np.array(xs, dtype=np.uint64)

    @rule(data=st.data(), f32=st.booleans())
    def insert(self, data: st.DataObject, f32: bool) -> None:
        k = data.draw(st.integers(1, self.cap))
        raw = np.array(data.draw(st.lists(raw_value, min_size=k, max_size=k)))
        if f32:
            raw = raw.astype(np.float32)
        slots = ((self.head + np.arange(k)) % self.cap).astype(np.uint64)
        self.s.update(slots, raw)
        self._set(slots, transform(raw, self.alpha, self.eps))
        self.head = (self.head + k) % self.cap
        self.size = min(self.cap, self.size + k)

    @rule(data=st.data(), f32=st.booleans())
    def update(self, data: st.DataObject, f32: bool) -> None:
        slots = self._slots(data)
        raw = np.array(data.draw(st.lists(raw_value, min_size=slots.size, max_size=slots.size)))
        if f32:
            raw = raw.astype(np.float32)
        self.s.update(slots, raw)
        self._set(slots, transform(raw, self.alpha, self.eps))

    @rule(data=st.data())
    def set_stored(self, data: st.DataObject) -> None:
        slots = self._slots(data)
        stored = np.array(data.draw(st.lists(raw_value, min_size=slots.size, max_size=slots.size)))
        self.s.set_stored(slots, stored)
        self._set(slots, stored.astype(np.float64))

    @rule(data=st.data())
    def evict(self, data: st.DataObject) -> None:
        slots = self._slots(data)
        self.s.clear(slots)
        self.ref[slots.astype(np.intp)] = 0.0

    @rule(data=st.data(), which=st.sampled_from(["update", "update_f32", "set_stored", "slot"]))
    def bad_input(self, data: st.DataObject, which: str) -> None:
        before = [self.s.get(i) for i in range(self.cap)]
        total, mn, mx = self.s.total, self.s.min, self.s.max
        slots = self._slots(data)
        slots = np.append(slots, np.uint64(data.draw(st.integers(0, self.cap - 1))))
        vals = np.ones(slots.size)
        if which == "slot":
            slots[data.draw(st.integers(0, slots.size - 1))] = self.cap + data.draw(
                st.integers(0, 10**6)
            )
        else:
            bad = BAD_VALUES[:1] + BAD_VALUES[2:] if which == "update_f32" else BAD_VALUES
            vals[data.draw(st.integers(0, slots.size - 1))] = data.draw(st.sampled_from(bad))
        with pytest.raises(ValueError):
            if which == "set_stored":
                self.s.set_stored(slots, vals)
            elif which == "update_f32":
                self.s.update(slots, vals.astype(np.float32))
            else:
                self.s.update(slots, vals)
        assert [self.s.get(i) for i in range(self.cap)] == before
        assert (self.s.total, self.s.min, self.s.max) == (total, mn, mx)

    @rule(
        n=st.integers(0, 300),
        beta=st.sampled_from([0.0, 0.4, 0.5, 1.0, 0.123]),
        data=st.data(),
    )
    def sample(self, n: int, beta: float, data: st.DataObject) -> None:
        first = data.draw(st.integers(0, self.cap - 1))
        live = data.draw(st.integers(0, self.cap))
        if live == 0 and n > 0:
            with pytest.raises(EmptyTableError):
                self.s.sample(n, beta, first, live)
            return
        slots, w = self.s.sample(n, beta, first, live)
        assert slots.dtype == np.uint64 and w is not None and w.dtype == np.float32
        assert slots.shape == w.shape == (n,)
        if n == 0:
            return
        idx = slots.astype(np.intp)
        if self.ref.sum() > 0:
            assert (self.ref[idx] > 0).all(), "drew a slot with stored priority 0"
            want = (self.ref[self.ref > 0].min() / self.ref[idx]) ** beta
            np.testing.assert_allclose(w, want.astype(np.float32), rtol=2e-7, atol=1e-44)
            assert (w <= 1.0).all()
        else:
            offset = (idx - first) % self.cap
            assert (offset < live).all(), "uniform draw outside the live window"
            assert (w == 1.0).all()

    @precondition(lambda self: self.ref.any())
    @rule(data=st.data())
    def sample_at(self, data: st.DataObject) -> None:
        us = data.draw(st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1, max_size=50))
        slots = self.s.sample_at(np.array(us))
        assert (self.ref[slots.astype(np.intp)] > 0).all()
        assert (np.diff(slots.astype(np.int64)) >= 0).all(), "strata out of order"

    @rule()
    def rebuild(self) -> None:
        total = self.s.total
        drift = self.s.rebuild()
        assert 0.0 <= drift <= 1e-12 * total
        assert self.s.total == pytest.approx(total, rel=1e-12, abs=0)

    @invariant()
    def matches_reference(self) -> None:
        if not hasattr(self, "s"):
            return
        got = np.array([self.s.get(i) for i in range(self.cap)])
        np.testing.assert_allclose(got, self.ref, rtol=1e-13, atol=0)
        want = math.fsum(self.ref.tolist())
        total = self.s.total
        assert total >= 0.0
        assert total == pytest.approx(want, rel=1e-12, abs=1e-300)
        pos = self.ref[self.ref > 0]
        assert self.s.min == (pos.min() if pos.size else math.inf)
        assert self.s.max == self.maxp


TestSamplerMachine = SamplerMachine.TestCase
TestSamplerMachine.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------


@pytest.mark.parametrize("fanout", KS)
def test_frequencies_chi_square(fanout: int) -> None:
    """10^6 draws follow p_i^alpha / sum_j p_j^alpha; zero-priority slots never come up."""
    rng = np.random.default_rng(1234 + fanout)
    cap, alpha, eps = 1000, 0.6, 1e-6
    raw = rng.exponential(1.0, cap)
    raw[rng.random(cap) < 0.1] = 0.0
    s = PrioritizedSampler(cap, fanout, alpha, eps, seed=99)
    s.update(np.arange(cap, dtype=np.uint64), raw)
    zero = np.arange(0, cap, 97)
    s.clear(zero)  # stored 0, unlike raw 0 which stores eps^alpha > 0
    p = (raw + eps) ** alpha
    p[zero] = 0.0
    counts = np.zeros(cap, dtype=np.int64)
    for _ in range(1000):
        slots, _w = s.sample(1000, 0.4, weights=False)
        counts += np.bincount(slots.astype(np.intp), minlength=cap)
    assert counts.sum() == 10**6
    assert counts[zero].sum() == 0
    pos = p > 0
    expected = p[pos] / p[pos].sum() * counts.sum()
    chi = stats.chisquare(counts[pos], expected)
    assert chi.pvalue > SIGNIFICANCE, chi
    s.close()


@pytest.mark.parametrize("fanout", [2, 8, 32])
def test_all_zero_is_uniform_over_live_window(fanout: int) -> None:
    cap, first, live = 500, 450, 120  # the window wraps: 450..499, 0..69
    s = PrioritizedSampler(cap, fanout, seed=5)
    s.update(np.arange(cap), np.ones(cap))
    s.clear(np.arange(cap))
    assert s.total == 0.0
    counts = np.zeros(cap, dtype=np.int64)
    for _ in range(100):
        slots, w = s.sample(10_000, 0.4, first, live)
        assert w is not None and (w == 1.0).all()
        counts += np.bincount(slots.astype(np.intp), minlength=cap)
    window = (first + np.arange(live)) % cap
    assert counts.sum() == counts[window].sum() == 10**6
    chi = stats.chisquare(counts[window])
    assert chi.pvalue > SIGNIFICANCE, chi


def test_a_heavy_slot_does_not_starve_light_ones() -> None:
    # half the mass on slot 500, 1 on each other slot: P(light) = 1/2000 each
    cap = 1001
    s = PrioritizedSampler(cap, 8, alpha=1.0, epsilon=0.0, seed=3)
    stored = np.ones(cap)
    stored[500] = 1000.0
    s.set_stored(np.arange(cap), stored)
    counts = np.zeros(cap, dtype=np.int64)
    for _ in range(200):
        slots, _w = s.sample(5000, 0.4, weights=False)
        counts += np.bincount(slots.astype(np.intp), minlength=cap)
    expected = stored / stored.sum() * counts.sum()
    chi = stats.chisquare(counts, expected)
    assert chi.pvalue > SIGNIFICANCE, chi


# --------------------------------------------------------------------------
# weights
# --------------------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.0, 0.4, 0.5, 0.7, 1.0])
def test_weights_formula(beta: float) -> None:
    rng = np.random.default_rng(42)
    cap = 5000
    s = PrioritizedSampler(cap, 8, alpha=0.6, epsilon=1e-6, seed=1)
    raw = rng.random(cap) * 10 ** rng.uniform(-6, 3, cap)
    s.update(np.arange(cap), raw)
    p = np.array([s.get(i) for i in range(cap)])
    slots, w = s.sample(4096, beta)
    assert w is not None
    want = reference_weights(p, slots.astype(np.intp), beta)
    np.testing.assert_allclose(w, want, rtol=1e-6)
    assert w.max() <= 1.0
    # the weight of the minimum itself is exactly 1
    lo = int(np.argmin(p))
    other = (lo + 1) % cap
    s.clear(np.arange(cap))
    s.set_stored([lo, other], [p[lo], 4 * p[lo]])
    slots, w = s.sample(100, beta)
    assert w is not None
    assert (slots == lo).any() and (slots == other).any()
    np.testing.assert_allclose(w[slots == lo], 1.0)
    np.testing.assert_allclose(w[slots == other], 0.25**beta, rtol=1e-6)


@pytest.mark.parametrize("fanout", KS)
def test_equal_priorities_give_weight_one(fanout: int) -> None:
    s = PrioritizedSampler(777, fanout)
    s.update(np.arange(777), np.full(777, 0.3))
    slots, w = s.sample(1000, 0.4)
    assert w is not None and (w == 1.0).all()
    assert len(np.unique(slots)) > 500


# --------------------------------------------------------------------------
# zero, bad input, drift
# --------------------------------------------------------------------------


@pytest.mark.parametrize("fanout", KS)
def test_stored_zero_never_sampled(fanout: int) -> None:
    rng = np.random.default_rng(fanout)
    cap = 20_000
    stored = 10.0 ** rng.uniform(-300, 300, cap)
    stored[rng.random(cap) < 0.3] = 0.0
    stored[-50:] = 0.0  # trailing zeros: where rounding past the end would land
    s = PrioritizedSampler(cap, fanout, seed=fanout)
    s.set_stored(np.arange(cap), stored)
    for _ in range(200):
        slots, _w = s.sample(512, 0.4)
        assert (stored[slots.astype(np.intp)] > 0).all()
    edge = s.sample_at(np.full(512, np.nextafter(1.0, 0.0)))  # the far end of every stratum
    assert (stored[edge.astype(np.intp)] > 0).all()


@pytest.mark.parametrize("bad", BAD_VALUES)
@pytest.mark.parametrize("how", ["f64", "f32", "stored"])
def test_invalid_priorities_rejected(bad: float, how: str) -> None:
    if how == "f32" and bad == -1e-300:
        pytest.skip("-1e-300 is -0.0 as a float32, a valid priority")
    s = PrioritizedSampler(100, 4)
    s.update(np.arange(100), np.linspace(0, 1, 100))
    before = [s.get(i) for i in range(100)]
    total, mx = s.total, s.max
    vals = np.full(10, 5.0)  # would raise max to > 1 if applied
    vals[7] = bad
    with pytest.raises(ValueError):
        if how == "f64":
            s.update(np.arange(10), vals)
        elif how == "f32":
            s.update(np.arange(10), vals.astype(np.float32))
        else:
            s.set_stored(np.arange(10), vals)
    assert [s.get(i) for i in range(100)] == before
    assert (s.total, s.max) == (total, mx)


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        PrioritizedSampler(0)
    with pytest.raises(ValueError):
        PrioritizedSampler(10, fanout=3)
    with pytest.raises(ValueError):
        PrioritizedSampler(10, alpha=-1.0)
    with pytest.raises(ValueError):
        PrioritizedSampler(10, epsilon=math.nan)
    s = PrioritizedSampler(10)
    with pytest.raises(ValueError):
        s.update([10], [1.0])  # slot >= capacity
    with pytest.raises(ValueError):
        s.update([-1], [1.0])
    with pytest.raises(ValueError):
        s.update([1, 2], [1.0])  # length mismatch
    with pytest.raises(ValueError):
        s.clear([11])
    with pytest.raises(ValueError):
        s.sample(3, beta=-0.5)
    with pytest.raises(ValueError):
        s.sample(3, live=11)
    with pytest.raises(ValueError):
        s.sample_at([1.0])
    with pytest.raises(EmptyTableError):
        s.sample(3, live=0)
    slots, w = s.sample(0, live=0)
    assert slots.size == 0 and w is not None and w.size == 0
    with pytest.raises(IndexError):
        s.get(10)
    s.close()
    with pytest.raises(ValueError):
        _ = s.total


def test_float32_path_matches_float64() -> None:
    rng = np.random.default_rng(0)
    raw = rng.random(1000).astype(np.float32)
    a = PrioritizedSampler(1000, 8, alpha=0.7)
    b = PrioritizedSampler(1000, 8, alpha=0.7)
    a.update(np.arange(1000), raw)
    b.update(np.arange(1000), raw.astype(np.float64))
    assert [a.get(i) for i in range(1000)] == [b.get(i) for i in range(1000)]
    assert a.total == b.total


def test_seed_makes_draws_reproducible() -> None:
    draws = []
    for _ in range(2):
        s = PrioritizedSampler(1000, seed=123)
        s.update(np.arange(1000), np.linspace(0.1, 2, 1000))
        draws.append(s.sample(256)[0])
    np.testing.assert_array_equal(draws[0], draws[1])


@pytest.mark.slow
@pytest.mark.parametrize("fanout", [2, 8, 32])
def test_rebuild_after_a_million_updates_finds_no_drift(fanout: int) -> None:
    rng = np.random.default_rng(fanout)
    cap = 100_000
    s = PrioritizedSampler(cap, fanout, alpha=0.6, epsilon=1e-6)
    ref = np.zeros(cap)
    for _ in range(2000):  # 1,024,000 updates
        slots = rng.integers(0, cap, 512)
        raw = rng.random(512) * 10.0 ** rng.integers(-6, 6, 512)
        s.update(slots, raw)
        ref[slots] = (raw + 1e-6) ** 0.6  # repeated slots: NumPy keeps the last
    assert s.rebuild() <= 1e-12 * s.total
    assert s.total == pytest.approx(math.fsum(ref.tolist()), rel=1e-9)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 63), st.floats(0, 1e9)), max_size=300))
@settings(max_examples=50, deadline=None)
def test_root_never_negative_after_deletes(ops: list[tuple[bool, int, float]]) -> None:
    s = PrioritizedSampler(64, 4, alpha=1.0, epsilon=0.0)
    for delete, slot, value in ops:
        if delete:
            s.clear([slot])
        else:
            s.update([slot], [value])
        assert s.total >= 0.0
    s.clear(np.arange(64))
    assert s.total == 0.0
    assert s.min == math.inf
