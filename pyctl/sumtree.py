"""The prioritized sampler of libinreplay (a K-ary sum tree) for NumPy callers.

:class:`PrioritizedSampler` wraps the ``ir_sampler_*`` C API through cffi. Arrays
go to C as buffers (``ffi.from_buffer``), never item by item, so a call costs
about a microsecond on top of the C work.

    >>> s = PrioritizedSampler(1000, alpha=0.6)
    >>> s.update(np.arange(10, dtype=np.uint64), np.linspace(0, 1, 10))
    >>> slots, weights = s.sample(32, beta=0.4, live=10)

Stored priorities are ``(raw + epsilon) ** alpha``; sampling is stratified and
proportional to them; importance weights are ``(min_p / p_i) ** beta``.
"""

from __future__ import annotations

import math
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from pyctl._native import check, load

__all__ = ["FANOUTS", "PrioritizedSampler"]

FANOUTS = (0, 2, 4, 8, 16, 32)  # 0 = the library's default (IR_DEFAULT_FANOUT)
_EINVAL = -1


def _slots(slots: npt.ArrayLike) -> np.ndarray:
    if (
        type(slots) is np.ndarray
        and slots.dtype == np.uint64
        and slots.ndim == 1
        and slots.flags.c_contiguous
    ):
        return slots  # the common case, as cheap as possible
    a = np.asarray(slots)
    if a.dtype != np.uint64:
        if a.size and a.dtype.kind not in "iu":
            raise ValueError(f"slots must be integers, not {a.dtype}")
        if a.size and a.dtype.kind == "i" and a.min() < 0:
            raise ValueError("slots must be non-negative")
        a = a.astype(np.uint64)
    return np.ascontiguousarray(a.reshape(-1))


def _values(values: npt.ArrayLike, n: int, allow_f32: bool) -> np.ndarray:
    a = values
    if not (
        type(a) is np.ndarray
        and (a.dtype == np.float64 or (allow_f32 and a.dtype == np.float32))
        and a.ndim == 1
        and a.flags.c_contiguous
    ):
        a = np.asarray(values)
        if allow_f32 and a.dtype == np.float32:
            a = np.ascontiguousarray(a.reshape(-1))
        else:
            a = np.ascontiguousarray(a, dtype=np.float64).reshape(-1)
    if a.shape[0] != n:
        raise ValueError(f"{n} slots but {a.shape[0]} values")
    return a


class PrioritizedSampler:
    """A prioritized sampler over ``capacity`` slots.

    Args:
        capacity: number of slots (leaves), at least 1.
        fanout: the tree's K, one of 2, 4, 8, 16, 32; 0 picks the library default.
        alpha: priority exponent (stored = (raw + epsilon) ** alpha), >= 0.
        epsilon: added to raw priorities so that 0 errors still get drawn, >= 0.
        seed: seed of the sampler's own RNG (draws are reproducible per seed).

    Not thread-safe: use one sampler from one thread at a time.
    """

    def __init__(
        self,
        capacity: int,
        fanout: int = 0,
        alpha: float = 0.6,
        epsilon: float = 1e-6,
        seed: int = 0,
    ) -> None:
        self._ptr: Any = None
        capacity = int(capacity)
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, not {capacity}")
        if fanout not in FANOUTS:
            raise ValueError(f"fanout must be one of {FANOUTS}, not {fanout}")
        for name, v in (("alpha", alpha), ("epsilon", epsilon)):
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be finite and >= 0, not {v}")
        self._ffi, self._lib = load()
        ptr = self._lib.ir_sampler_new(
            capacity, fanout, float(alpha), float(epsilon), int(seed) & (2**64 - 1)
        )
        if ptr == self._ffi.NULL:
            raise MemoryError(f"cannot allocate a sampler of {capacity} slots")
        self._ptr = ptr
        self._capacity = capacity

    # ---- lifetime ---------------------------------------------------------

    def close(self) -> None:
        """Free the C sampler (idempotent); the object is unusable afterwards."""
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            self._lib.ir_sampler_free(ptr)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _p(self) -> Any:
        if self._ptr is None:
            raise ValueError("sampler is closed")
        return self._ptr

    # ---- configuration ----------------------------------------------------

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return self._capacity

    @property
    def fanout(self) -> int:
        return int(self._lib.ir_sampler_fanout(self._p()))

    @property
    def alpha(self) -> float:
        return float(self._lib.ir_sampler_alpha(self._p()))

    @property
    def epsilon(self) -> float:
        return float(self._lib.ir_sampler_epsilon(self._p()))

    def seed(self, seed: int) -> None:
        """Reseed the sampler's RNG."""
        self._lib.ir_sampler_seed(self._p(), int(seed) & (2**64 - 1))

    # ---- writes -----------------------------------------------------------

    def _call(self, rc: int, what: str) -> None:
        if rc == _EINVAL:
            raise ValueError(
                f"{what}: values must be finite and >= 0 (and small enough to sum), "
                f"slots < {self._capacity}; nothing was changed"
            )
        check(rc)

    def update(self, slots: npt.ArrayLike, raw: npt.ArrayLike) -> None:
        """Set raw priorities (e.g. |TD error|) of ``slots``; stored as (raw + eps) ** alpha.

        ``raw`` may be float64 or float32 (passed as is). All values are checked
        first: a negative, NaN or infinite value, or a slot >= capacity raises
        ValueError and changes nothing. Repeated slots: the last value wins.
        """
        s = _slots(slots)
        v = _values(raw, s.shape[0], allow_f32=True)
        ffi = self._ffi
        if v.dtype == np.float32:
            rc = self._lib.ir_sampler_update_f32(
                self._p(),
                ffi.from_buffer("uint64_t[]", s),
                ffi.from_buffer("float[]", v),
                s.shape[0],
            )
        else:
            rc = self._lib.ir_sampler_update(
                self._p(),
                ffi.from_buffer("uint64_t[]", s),
                ffi.from_buffer("double[]", v),
                s.shape[0],
            )
        self._call(rc, "update")

    def set_stored(self, slots: npt.ArrayLike, stored: npt.ArrayLike) -> None:
        """Set already-transformed priorities (e.g. ``self.max`` for new items)."""
        s = _slots(slots)
        v = _values(stored, s.shape[0], allow_f32=False)
        ffi = self._ffi
        rc = self._lib.ir_sampler_set_stored(
            self._p(),
            ffi.from_buffer("uint64_t[]", s),
            ffi.from_buffer("double[]", v),
            s.shape[0],
        )
        self._call(rc, "set_stored")

    def clear(self, slots: npt.ArrayLike) -> None:
        """Mark ``slots`` empty: stored priority 0, never drawn, not in ``min``."""
        s = _slots(slots)
        rc = self._lib.ir_sampler_clear(
            self._p(), self._ffi.from_buffer("uint64_t[]", s), s.shape[0]
        )
        self._call(rc, "clear")

    # ---- reads ------------------------------------------------------------

    def get(self, slot: int) -> float:
        """Stored priority of one slot (0.0 if empty)."""
        slot = int(slot)
        if not 0 <= slot < self._capacity:
            raise IndexError(f"slot {slot} out of range [0, {self._capacity})")
        return float(self._lib.ir_sampler_get(self._p(), slot))

    @property
    def total(self) -> float:
        """Sum of stored priorities (the root)."""
        return float(self._lib.ir_sampler_total(self._p()))

    @property
    def min(self) -> float:
        """Smallest positive stored priority; +inf when there is none."""
        return float(self._lib.ir_sampler_min(self._p()))

    @property
    def max(self) -> float:
        """Largest stored priority ever set (1.0 before any); never decreases."""
        return float(self._lib.ir_sampler_max(self._p()))

    def rebuild(self) -> float:
        """Recompute every inner node; return the root's absolute change (drift)."""
        return float(self._lib.ir_sampler_rebuild(self._p()))

    # ---- sampling ---------------------------------------------------------

    def sample(
        self,
        n: int,
        beta: float = 0.4,
        first: int = 0,
        live: int | None = None,
        *,
        weights: bool = True,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Draw ``n`` slots, stratified, with probability proportional to stored priority.

        Returns ``(slots, weights)``: uint64 slots in stratum order and float32
        importance weights ``(min_p / p_i) ** beta`` (None if ``weights=False``).
        When every priority is 0, slots are uniform over the live window
        ``[first, first + live) mod capacity`` (``live`` defaults to capacity)
        with weight 1. Raises EmptyTableError when ``live`` is 0.
        """
        n = int(n)
        if n < 0:
            raise ValueError(f"n must be >= 0, not {n}")
        live = self._capacity if live is None else int(live)
        if live < 0 or live > self._capacity:
            raise ValueError(f"live must be in [0, {self._capacity}], not {live}")
        first = int(first)
        if first < 0:
            raise ValueError(f"first must be >= 0, not {first}")
        beta = float(beta)
        if not (math.isfinite(beta) and beta >= 0):
            raise ValueError(f"beta must be finite and >= 0, not {beta}")
        out = np.empty(n, dtype=np.uint64)
        w = np.empty(n, dtype=np.float32) if weights else None
        ffi = self._ffi
        rc = self._lib.ir_sampler_sample(
            self._p(),
            n,
            beta,
            first % self._capacity,
            live,
            ffi.from_buffer("uint64_t[]", out, require_writable=True),
            ffi.from_buffer("float[]", w, require_writable=True) if w is not None else ffi.NULL,
        )
        self._call(rc, "sample")
        return out, w

    def sample_at(self, u: npt.ArrayLike) -> np.ndarray:
        """The descent for given points ``u`` in [0, 1): stratum i gets (i + u[i]) * total / n."""
        a = np.ascontiguousarray(u, dtype=np.float64).reshape(-1)
        out = np.empty(a.shape[0], dtype=np.uint64)
        ffi = self._ffi
        rc = self._lib.ir_sampler_sample_at(
            self._p(),
            a.shape[0],
            ffi.from_buffer("double[]", a),
            ffi.from_buffer("uint64_t[]", out, require_writable=True),
        )
        if rc == _EINVAL:
            raise ValueError("sample_at: points must be in [0, 1)")
        check(rc)
        return out

    def __repr__(self) -> str:
        if self._ptr is None:
            return "<PrioritizedSampler closed>"
        return (
            f"<PrioritizedSampler capacity={self._capacity} fanout={self.fanout} "
            f"alpha={self.alpha} total={self.total:.6g}>"
        )
