"""Samples as jax.Array: the NumPy arrays a sample was received into, handed to JAX
through DLPack (``jax.dlpack.from_dlpack``), one call per array, no Python object per item.

Shared by ReplayClient.sample, ShardedReplayClient.sample / sample_trajectories and
pyctl.trajectory.sample_trajectories (``jax=True``). JAX is the optional ``[jax]`` extra.

Ids stay NumPy int64 (they go back to ``update``; JAX without ``jax_enable_x64`` would
narrow them to int32). Items and weights become jax.Arrays on JAX's default device (the
CPU here); JAX may copy a buffer it cannot use in place (one not aligned as XLA wants),
and without ``jax_enable_x64`` 64-bit fields come back as 32-bit, as ``jnp.asarray`` does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import numpy as np

P = ParamSpec("P")
R = TypeVar("R")

JAX_MISSING = "jax=True needs JAX: pip install 'inreplay[jax]' (or '.[jax]' in a checkout)"


def _dlpack() -> Any:
    try:
        import jax.dlpack
    except ImportError as e:
        raise ImportError(f"{JAX_MISSING} ({e})") from None
    return jax.dlpack


def check(jax: bool, torch: bool) -> None:
    """sample()'s jax= and torch= together: ValueError."""
    if jax and torch:
        raise ValueError("pass torch=True or jax=True, not both")


def option(sample_fn: Callable[P, R]) -> Callable[P, R]:
    """A sampler's ``jax=`` keyword, in one place: with jax=True the sampler runs without
    it (and without copy=False: a jax.Array must not alias a ring the next request
    reuses) and its Sample or TrajectorySample is handed to JAX (sample); torch=True with
    it is a ValueError. The sampler keeps ``jax`` in its signature for its callers and
    its documentation; it never sees it set."""

    @functools.wraps(sample_fn)
    def with_jax(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.pop("jax", False):
            return sample_fn(*args, **kwargs)
        check(True, bool(kwargs.get("torch", False)))
        kwargs.pop("copy", None)
        return sample(sample_fn(*args, **kwargs))

    return with_jax  # type: ignore[return-value]


def array(a: np.ndarray) -> Any:
    """One NumPy array as a jax.Array through DLPack (a C-contiguous array in native byte
    order, which every array a sample returns is)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_ or a.ndim == 0:  # no DLPack bool in older NumPy; 0-d: as is
        import jax.numpy as jnp

        return jnp.asarray(a)
    if not a.flags.writeable:  # NumPy exports read-only arrays only by copy
        a = a.copy()
    jdl = _dlpack()
    return jdl.from_dlpack(a)


def convert(items: Any) -> Any:
    """A sample's items (one array, or a dict of arrays) as jax.Arrays."""
    if isinstance(items, np.ndarray):
        return array(items)
    if isinstance(items, dict):
        return {k: array(v) for k, v in items.items()}
    raise ValueError("jax=True needs packed items: pass schema= or item_shape= (a list of "
                     "bytes has no array to hand over)")


def sample(s: Any) -> Any:
    """A Sample or TrajectorySample with its weights and items (or columns) as jax.Arrays,
    in place; ids stay NumPy."""
    s.weights = array(s.weights)
    if hasattr(s, "columns"):
        s.columns = convert(s.columns)
    else:
        s.items = convert(s.items)
    return s
