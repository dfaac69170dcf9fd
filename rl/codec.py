"""Binary transition records: a fixed-size header, then the observations, a batch at a time.

A replay item is one n-step transition (s_t, a_t, R_t, gamma_t, s_{t+k}) with
k <= n steps of lookahead (k < n only when the episode ended early). Items are
never pickled: each starts with one record of a NumPy structured dtype, so the
headers of a batch decode with ``np.frombuffer``, with no per-field Python.

Record layout (offsets in bytes)::

    0   float32  ret        R_t = sum_{i<k} gamma^i r_{t+i}
    4   float32  discount   gamma^k, or 0 if s_{t+k} is terminal (no bootstrap)
    8   uint16   action     a_t
    10  uint8    next_off   where s_{t+k}'s frames start in `frames` (pixels only)
    11  uint8    format     how the payload is stored: 0 raw, 1 zstd (below)
    12  ...      payload

Vector observations (CartPole): payload = obs float32[D], next_obs float32[D],
always raw (format 0): a batch is B * itemsize bytes, sampled ``PACKED``.

Stacked frames (Atari, obs = (S, 84, 84) uint8 with S = 4): the stacks s_t and
s_{t+k} share S - k frames when k < S (s_{t+k} is s_t shifted by k frames), so a
record stores each frame once: ``frames`` uint8[S + min(n, S), 84, 84] where
s_t = frames[0:S] and s_{t+k} = frames[next_off:next_off + S], next_off = min(k, S).
With S = 4 and n = 3 that is 7 frames (49 KB) instead of 8 (56 KB); frames past
next_off + S in a record with k < n are zero. The encoder does not check the
sharing: it writes s_t, then s_{t+k} over the shared frames, so a caller that
breaks the stacking rule gets its s_{t+k} back intact and s_t's newest frames
overwritten (tests check the actor's stacks do follow the rule).

Formats (the header's ``format`` byte; a decoder reads both, in any mix):

- 0, raw: the payload as above (itemsize bytes in all). Records written before
  the byte had a meaning carry 0 there, so they still read.
- 1, zstd (stacked frames only): the 12-byte header, then one zstd frame
  (content size and checksum included) of the ``frames`` array. Breakout
  transitions take about 0.5 KB instead of 49 KB (``bench/compress.py``).
  Items differ in size, so such tables are sampled without ``PACKED``, and
  :meth:`TransitionCodec.decode` decompresses a batch on a thread pool (zstd
  releases the GIL) straight into the obs and next_obs arrays.

A corrupt or truncated item raises :class:`ItemError`, one line naming the item.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

HEADER_BYTES = 12
FORMAT_RAW = 0
FORMAT_ZSTD = 1
FORMATS = {FORMAT_RAW: "raw", FORMAT_ZSTD: "zstd"}
ZSTD_LEVEL = 3
"""zstd level of compressed records (bench/compress.py compares levels)."""
MIN_CHUNK = 32
"""Fewest items one decode thread is given (smaller batches decode on one thread)."""
ITEM_ALIGN = 8
"""The appliance's arena reserves each item in units of this many bytes."""

HEAD = np.dtype([("ret", "<f4"), ("discount", "<f4"), ("action", "<u2"), ("next_off", "u1"),
                 ("format", "u1")])
assert HEAD.itemsize == HEADER_BYTES

Items = bytes | bytearray | memoryview


class ItemError(ValueError):
    """A replay item that cannot be decoded (the message names the item)."""


def stored_bytes(length: int) -> int:
    """Arena bytes the appliance reserves for an item of ``length`` bytes."""
    return max(ITEM_ALIGN, (length + ITEM_ALIGN - 1) // ITEM_ALIGN * ITEM_ALIGN)


def capacity_warning(table: str, info: Mapping[str, Any], item_bytes: float) -> str | None:
    """One line if ``info``'s (REPLAY.INFO) capacity x ``item_bytes`` exceeds its MAXBYTES."""
    capacity, maxbytes = int(info["capacity"]), int(info["maxbytes"])
    need = capacity * item_bytes
    if need <= maxbytes:
        return None
    fits = int(maxbytes // item_bytes)
    return (f"table '{table}' cannot hold its capacity: {capacity:,} items of "
            f"{item_bytes:,.0f} B (the mean inserted here) need {need / 2**30:.2f} GiB, "
            f"MAXBYTES is {maxbytes / 2**30:.2f} GiB, so it keeps about {fits:,} "
            f"(raise --replay-maxbytes to {int(np.ceil(need / 2**20))} MiB or more, "
            f"or lower --capacity)")


@dataclass
class Batch:
    """Decoded transitions (NumPy arrays with a leading batch dimension)."""

    obs: np.ndarray
    action: npt.NDArray[np.int64]
    ret: npt.NDArray[np.float32]
    discount: npt.NDArray[np.float32]
    next_obs: np.ndarray


class TransitionCodec:
    """Encoder/decoder of transition records for one observation shape.

    ``compress`` (default: for stacked frames) makes :meth:`encode` write format 1
    (zstd at ``level``); :meth:`decode` reads either format whatever it is set to.
    A batch of items is decoded on ``parallel`` threads (the caller's and pool
    threads), at most ``threads`` (default: one per CPU, at most 4);
    learner.replay.Prefetcher raises ``parallel`` from 1 only while decoding
    cannot keep up. One codec may decode on one thread at a time, and encode on
    another.
    """

    def __init__(self, obs_shape: tuple[int, ...], obs_dtype: npt.DTypeLike, n_step: int,
                 pixels: bool | None = None, *, compress: bool | None = None,
                 level: int = ZSTD_LEVEL, threads: int | None = None) -> None:
        self.obs_shape = tuple(obs_shape)
        self.obs_dtype = np.dtype(obs_dtype)
        self.n_step = int(n_step)
        self.pixels = (self.obs_dtype == np.uint8 and len(self.obs_shape) == 3
                       if pixels is None else pixels)
        assert HEAD.fields is not None
        head: list[Any] = [(name, HEAD.fields[name][0]) for name in HEAD.names]
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
        self.payload_bytes = self.itemsize - HEADER_BYTES
        self.compress = self.pixels if compress is None else bool(compress)
        if self.compress and not self.pixels:
            raise ValueError("only stacked frames are compressed (vector records stay raw)")
        self.level = int(level)
        self.threads = max(1, min(4, os.cpu_count() or 1) if threads is None else int(threads))
        self.parallel = self.threads
        self._local = threading.local()  # a zstd context per thread (they are not shared)
        self._pool: ThreadPoolExecutor | None = None

    # ---- encoding ------------------------------------------------------------------
    def encode(self, obs: np.ndarray, action: npt.ArrayLike, ret: npt.ArrayLike,
               discount: npt.ArrayLike, next_obs: np.ndarray, steps: npt.ArrayLike,
               ) -> np.ndarray | list[bytes]:
        """B transitions -> items: a uint8 array (B, itemsize), one raw record per row,
        or with ``compress`` a list of B format-1 items (bytes of varying length)."""
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
        if not self.compress:
            return rec.view(np.uint8).reshape(b, self.itemsize)
        rec["format"] = FORMAT_ZSTD
        rows = rec.view(np.uint8).reshape(b, self.itemsize)
        cctx = self._zstd().compressor
        return [row[:HEADER_BYTES].tobytes() + cctx.compress(row[HEADER_BYTES:])
                for row in rows]

    def _zstd(self) -> Any:
        """This thread's zstd contexts (``.compressor``, ``.decompressor``)."""
        z = getattr(self._local, "z", None)
        if z is None:
            import zstandard  # only the pixel path needs it

            z = self._local.z = _Zstd(
                zstandard.ZstdCompressor(level=self.level, write_checksum=True,
                                         write_content_size=True),
                zstandard.ZstdDecompressor(), zstandard.ZstdError,
                zstandard.frame_content_size)
        return z

    # ---- decoding ------------------------------------------------------------------
    def decode(self, data: bytes | np.ndarray | Sequence[Items],
               ids: npt.ArrayLike | None = None) -> Batch:
        """Items -> Batch. ``data``: a list of items (any format; a sampled batch
        without PACKED), or raw records concatenated (bytes, or a (B, itemsize)
        array: a PACKED batch). ``ids`` (the items' replay ids) name a bad item in
        the error; without them it is named by its position in the batch."""
        if isinstance(data, list | tuple):
            if self.pixels:
                return self._decode_items(data, ids)
            data = b"".join(data)
        buf = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) \
            else np.ascontiguousarray(data).reshape(-1)
        if buf.size % self.itemsize:
            raise ValueError(f"{buf.size} bytes is not a whole number of "
                             f"{self.itemsize}-byte records")
        rec = buf.view(self.dtype)
        fmt = rec["format"]
        bad = np.flatnonzero(fmt != FORMAT_RAW)
        if bad.size:
            i = int(bad[0])
            kind = FORMATS.get(int(fmt[i]), "unknown")
            raise ItemError(f"{_name(i, ids)}: format {fmt[i]} ({kind}) in a batch of "
                            f"{self.itemsize}-byte raw records")
        if self.pixels:
            frames = rec["frames"]
            off = rec["next_off"].astype(np.int64)
            self._check_next_off(off, ids)
            obs = frames[:, :self.stack]
            idx = off[:, None] + np.arange(self.stack)[None, :]
            next_obs = np.take_along_axis(frames, idx[:, :, None, None], axis=1)
        else:
            obs = rec["obs"]
            next_obs = rec["next_obs"]
        return Batch(obs=obs, action=rec["action"].astype(np.int64),
                     ret=rec["ret"].astype(np.float32), discount=rec["discount"].astype(
                         np.float32), next_obs=next_obs)

    def _check_next_off(self, off: np.ndarray, ids: npt.ArrayLike | None) -> None:
        bad = np.flatnonzero((off < 1) | (off > self.nframes - self.stack))
        if bad.size:
            i = int(bad[0])
            raise ItemError(f"{_name(i, ids)}: corrupt header: next_off {off[i]} is not in "
                            f"[1, {self.nframes - self.stack}]")

    def _decode_items(self, items: Sequence[Items], ids: npt.ArrayLike | None) -> Batch:
        """Stacked frames, one item at a time: raw or zstd, on up to ``threads`` threads."""
        n = len(items)
        for i, it in enumerate(items):
            if len(it) < HEADER_BYTES:
                raise ItemError(f"{_name(i, ids)}: {len(it)} bytes, shorter than the "
                                f"{HEADER_BYTES}-byte record header")
        head = np.frombuffer(b"".join(bytes(it[:HEADER_BYTES]) for it in items), dtype=HEAD)
        fmt = head["format"]
        bad = np.flatnonzero((fmt != FORMAT_RAW) & (fmt != FORMAT_ZSTD))
        if bad.size:
            i = int(bad[0])
            raise ItemError(f"{_name(i, ids)}: unknown format {fmt[i]} (this decoder reads "
                            + ", ".join(f"{k}: {v}" for k, v in FORMATS.items()) + ")")
        off = head["next_off"].astype(np.int64)
        self._check_next_off(off, ids)
        obs = np.empty((n, *self.obs_shape), dtype=np.uint8)
        next_obs = np.empty((n, *self.obs_shape), dtype=np.uint8)
        parts = max(1, min(self.parallel, self.threads, n // MIN_CHUNK))
        bounds = [n * j // parts for j in range(parts + 1)] if parts > 1 else [0, n]
        futures: list[Future[None]] = []
        if len(bounds) > 2:
            pool = self._decode_pool()
            futures = [pool.submit(self._decode_range, items, lo, hi, fmt, off, obs, next_obs,
                                   ids) for lo, hi in itertools.pairwise(bounds[1:])]
        try:
            self._decode_range(items, 0, bounds[1], fmt, off, obs, next_obs, ids)
        finally:
            errors = [f.exception() for f in futures]  # waits for every part
        for e in errors:
            if e is not None:
                raise e
        return Batch(obs=obs, action=head["action"].astype(np.int64),
                     ret=head["ret"].astype(np.float32),
                     discount=head["discount"].astype(np.float32), next_obs=next_obs)

    def _decode_range(self, items: Sequence[Items], lo: int, hi: int, fmt: np.ndarray,
                      off: np.ndarray, obs: np.ndarray, next_obs: np.ndarray,
                      ids: npt.ArrayLike | None) -> None:
        z = self._zstd()
        s, want = self.stack, self.payload_bytes
        shape = (self.nframes, *self.obs_shape[1:])
        for i in range(lo, hi):
            it = items[i]
            if fmt[i] == FORMAT_RAW:
                if len(it) != self.itemsize:
                    raise ItemError(f"{_name(i, ids)}: raw record of {len(it)} bytes, not "
                                    f"{self.itemsize}")
                frames = np.frombuffer(it, dtype=np.uint8, count=want, offset=HEADER_BYTES)
            else:
                body = memoryview(it)[HEADER_BYTES:]
                try:
                    size = z.frame_content_size(body)
                    if size != want:
                        raise ItemError(f"{_name(i, ids)}: corrupt zstd frame: says {size} "
                                        f"bytes, the frames are {want}")
                    frames = np.frombuffer(z.decompressor.decompress(body), dtype=np.uint8)
                except z.error as e:
                    raise ItemError(f"{_name(i, ids)}: corrupt zstd frame "
                                    f"({len(it)} bytes): {e}") from None
                if frames.size != want:
                    raise ItemError(f"{_name(i, ids)}: corrupt zstd frame: {frames.size} "
                                    f"bytes, the frames are {want}")
            f = frames.reshape(shape)
            obs[i] = f[:s]
            o = off[i]
            next_obs[i] = f[o:o + s]

    def _decode_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="decode")
        return self._pool

    def close(self) -> None:
        """Stop the decode threads (a later decode starts them again)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


@dataclass
class _Zstd:
    compressor: Any
    decompressor: Any
    error: type[Exception]
    frame_content_size: Callable[[Any], int]


def _name(i: int, ids: npt.ArrayLike | None) -> str:
    if ids is None:
        return f"item {i} of the batch"
    return f"replay item {int(np.asarray(ids).reshape(-1)[i])}"
