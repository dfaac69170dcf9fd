"""Binary transition records: fixed-size, little-endian, decoded a batch at a time.

A replay item is one n-step transition (s_t, a_t, R_t, gamma_t, s_{t+k}) with
k <= n steps of lookahead (k < n only when the episode ended early). Items are
never pickled: each is one record of a NumPy structured dtype, so a sampled batch
of B items is ``np.frombuffer`` over B * itemsize bytes, with no per-item Python.

Record layout (offsets in bytes)::

    0   float32  ret        R_t = sum_{i<k} gamma^i r_{t+i}
    4   float32  discount   gamma^k, or 0 if s_{t+k} is terminal (no bootstrap)
    8   uint16   action     a_t
    10  uint8    next_off   where s_{t+k}'s frames start in `frames` (pixels only)
    11  uint8    reserved   0
    12  ...      payload

Vector observations (CartPole): payload = obs float32[D], next_obs float32[D].

Stacked frames (Atari, obs = (S, 84, 84) uint8 with S = 4): the stacks s_t and
s_{t+k} share S - k frames when k < S (s_{t+k} is s_t shifted by k frames), so a
record stores each frame once: ``frames`` uint8[S + min(n, S), 84, 84] where
s_t = frames[0:S] and s_{t+k} = frames[next_off:next_off + S], next_off = min(k, S).
With S = 4 and n = 3 that is 7 frames (49 KB) instead of 8 (56 KB); frames past
next_off + S in a record with k < n are zero. The encoder does not check the
sharing: it writes s_t, then s_{t+k} over the shared frames, so a caller that
breaks the stacking rule gets its s_{t+k} back intact and s_t's newest frames
overwritten (tests check the actor's stacks do follow the rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

HEADER_BYTES = 12


@dataclass
class Batch:
    """Decoded transitions (NumPy arrays with a leading batch dimension)."""

    obs: np.ndarray
    action: npt.NDArray[np.int64]
    ret: npt.NDArray[np.float32]
    discount: npt.NDArray[np.float32]
    next_obs: np.ndarray


class TransitionCodec:
    """Encoder/decoder of transition records for one observation shape."""

    def __init__(self, obs_shape: tuple[int, ...], obs_dtype: npt.DTypeLike, n_step: int,
                 pixels: bool | None = None) -> None:
        self.obs_shape = tuple(obs_shape)
        self.obs_dtype = np.dtype(obs_dtype)
        self.n_step = int(n_step)
        self.pixels = (self.obs_dtype == np.uint8 and len(self.obs_shape) == 3
                       if pixels is None else pixels)
        head = [("ret", "<f4"), ("discount", "<f4"), ("action", "<u2"), ("next_off", "u1"),
                ("reserved", "u1")]
        if self.pixels:
            stack = self.obs_shape[0]
            self.stack = stack
            self.nframes = stack + min(self.n_step, stack)
            payload: list[Any] = [("frames", "u1", (self.nframes, *self.obs_shape[1:]))]
        else:
            self.stack = 0
            self.nframes = 0
            dt = self.obs_dtype.newbyteorder("<")
            payload = [("obs", dt, self.obs_shape), ("next_obs", dt, self.obs_shape)]
        self.dtype = np.dtype(head + payload)
        assert self.dtype.fields is not None and self.dtype.fields["ret"][1] == 0
        self.itemsize = self.dtype.itemsize

    def encode(self, obs: np.ndarray, action: npt.ArrayLike, ret: npt.ArrayLike,
               discount: npt.ArrayLike, next_obs: np.ndarray, steps: npt.ArrayLike,
               ) -> np.ndarray:
        """B transitions -> uint8 array (B, itemsize), one record per row."""
        b = len(obs)
        rec = np.zeros(b, dtype=self.dtype)
        rec["ret"] = ret
        rec["discount"] = discount
        rec["action"] = action
        if self.pixels:
            k = np.minimum(np.asarray(steps, dtype=np.int64), self.stack)
            if np.any(k < 1):
                raise ValueError("steps must be >= 1")
            rec["next_off"] = k
            frames = rec["frames"]
            frames[:, :self.stack] = obs
            s = self.stack
            for off in np.unique(k):
                rows = np.flatnonzero(k == off)
                frames[rows, off:off + s] = next_obs[rows]
        else:
            rec["obs"] = obs
            rec["next_obs"] = next_obs
        return rec.view(np.uint8).reshape(b, self.itemsize)

    def decode(self, data: bytes | np.ndarray | list[bytes]) -> Batch:
        """Records (concatenated bytes, a list of them, or a (B, itemsize) array) -> Batch."""
        if isinstance(data, list):
            data = b"".join(data)
        buf = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) \
            else np.ascontiguousarray(data).reshape(-1)
        if buf.size % self.itemsize:
            raise ValueError(f"{buf.size} bytes is not a whole number of "
                             f"{self.itemsize}-byte records")
        rec = buf.view(self.dtype)
        if self.pixels:
            frames = rec["frames"]
            off = rec["next_off"].astype(np.int64)
            if np.any((off < 1) | (off > self.nframes - self.stack)):
                raise ValueError("corrupt record: next_off out of range")
            obs = frames[:, :self.stack]
            idx = off[:, None] + np.arange(self.stack)[None, :]
            next_obs = np.take_along_axis(frames, idx[:, :, None, None], axis=1)
        else:
            obs = rec["obs"]
            next_obs = rec["next_obs"]
        return Batch(obs=obs, action=rec["action"].astype(np.int64),
                     ret=rec["ret"].astype(np.float32), discount=rec["discount"].astype(
                         np.float32), next_obs=next_obs)
