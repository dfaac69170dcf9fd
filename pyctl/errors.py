"""The REPLAY.* and PARAM.* error codes and REPLAY.INFO's fields: the one decoder of each.

The server's errors start with a code (Redis's convention, like WRONGTYPE or NOAUTH);
the codes are defined once, in fstack_redis/replay_err.h. ``replay_error`` turns a
redis.ResponseError into the class of its code (each a redis.ResponseError, so
existing ``except redis.ResponseError`` clauses keep working); nothing here reads an
error's wording, only its first word (and BADPRIO's index, the word after it).
``decode_info`` turns a REPLAY.INFO reply into a dict typed by ``INFO_FIELDS``.
"""

from __future__ import annotations

from typing import Any

import redis


class ReplayError(redis.ResponseError):
    """An error reply with a REPLAY.* code (``code``: its first word)."""

    code = ""


class RateLimited(ReplayError):  # noqa: N818 (named after its code)
    """The table's rate limiter held the call (-RATELIMITED): at once without a timeout,
    or when the timeout ran out. The message names the limit (MIN_SIZE, or how far
    samples are from SAMPLES_PER_INSERT x inserts)."""

    code = "RATELIMITED"

    @property
    def reason(self) -> str:
        """The message without its code: which limit held the call, and how it ended."""
        return message(self)


class NoSuchTableError(ReplayError):
    """-NOTABLE: the table does not exist (or was dropped while the call waited)."""

    code = "NOTABLE"


class TableExistsError(ReplayError):
    """-BUSYTABLE: REPLAY.CREATE of a table that exists."""

    code = "BUSYTABLE"


class EmptyTableError(ReplayError):
    """-EMPTY: a sample from a table with no items."""

    code = "EMPTY"


class BadPriorityError(ReplayError):
    """-BADPRIO <index> ...: the priority at ``index`` of the batch is not a finite
    number >= 0 or MAX; nothing of the batch was inserted."""

    code = "BADPRIO"

    @property
    def index(self) -> int:
        return int(message(self).split(" ", 1)[0])


class MixedSizesError(ReplayError):
    """-MIXEDSIZE: REPLAY.SAMPLE ... PACKED from a table whose items differ in size."""

    code = "MIXEDSIZE"


class WrongKindError(ReplayError):
    """-WRONGKIND: an opaque-item command on a trajectory table, or the reverse."""

    code = "WRONGKIND"


class NoSuchStreamError(ReplayError):
    """-NOSTREAM: no such trajectory stream."""

    code = "NOSTREAM"


class StaleGradientError(ReplayError):
    """-STALE: PARAM.PUSH ... BASE v MAXSTALE k of a gradient computed more than k
    versions before the table's; nothing was applied (pull, recompute, push again)."""

    code = "STALE"


class SyncTimeout(ReplayError):  # noqa: N818 (named after its code)
    """-SYNCTIMEOUT: a push to a SYNC table whose round did not complete within its
    TIMEOUT; the gradient was withdrawn from the round (nothing of it applied)."""

    code = "SYNCTIMEOUT"


CLASSES: dict[str, type[ReplayError]] = {
    c.code: c for c in (RateLimited, NoSuchTableError, TableExistsError, EmptyTableError,
                        BadPriorityError, MixedSizesError, WrongKindError, NoSuchStreamError,
                        StaleGradientError, SyncTimeout)}


def code_of(e: BaseException) -> str:
    """An error reply's code: its first word ("" for anything but a ResponseError)."""
    if not isinstance(e, redis.ResponseError) or not e.args:
        return ""
    return str(e.args[0]).split(" ", 1)[0]


def message(e: BaseException) -> str:
    """The error's text after its code."""
    parts = str(e.args[0] if e.args else "").split(" ", 1)
    return parts[1] if len(parts) == 2 else ""


def replay_error(e: redis.ResponseError) -> redis.ResponseError:
    """The class of e's code, with the same message; e itself if it has no REPLAY code.

    redis-py keeps the error's first word (it strips only "ERR "), so the text is the
    server's line without its "-"."""
    if isinstance(e, ReplayError):
        return e
    cls = CLASSES.get(code_of(e))
    return e if cls is None else cls(*e.args)


def where(e: redis.ResponseError, shard: int, address: str) -> redis.ResponseError:
    """e decoded (replay_error) and naming the shard that replied: at the end for a
    coded error (its code and values stay where they are), else in front."""
    cls = CLASSES.get(code_of(e))
    if cls is None:
        return type(e)(f"shard {shard} ({address}): {e}")
    return cls(f"{e.args[0]} (shard {shard}, {address})")


# ---- REPLAY.INFO ---------------------------------------------------------------------

#: Every REPLAY.INFO field and its type (doubles come as bulk strings in RESP2).
INFO_FIELDS: dict[str, type] = {
    "name": str, "size": int, "capacity": int, "inserts": int, "samples": int,
    "sample_calls": int, "updates": int, "stale_updates": int, "evictions": int,
    "total_priority": float, "max_priority": float, "min_priority": float,
    "alpha": float, "beta": float, "epsilon": float, "bytes_used": int, "maxbytes": int,
    "next_id": int, "fanout": int, "min_size": int, "samples_per_insert": float,
    "error_buffer": float, "limiter_inserts": int, "limiter_samples": int,
    "limiter_error": float, "blocked_samplers": int, "blocked_inserters": int,
    "waited_seconds": float, "capacity_fits": int, "sampler": str, "remover": str,
    "max_times_sampled": int, "queue_size": int, "consumed": int, "storage": str,
    "compactions": int,
    # trajectory tables add their chunk store's counts
    "columns": int, "store_chunks": int, "store_chunk_bytes": int, "store_references": int,
}


def _value(kind: type, v: Any) -> Any:
    if isinstance(v, bytes):
        v = v.decode(errors="replace")
    return kind(v)


def decode_info(raw: Any) -> dict[str, Any]:
    """A REPLAY.INFO reply (RESP2 flat list or RESP3 map) as a dict typed by
    INFO_FIELDS; a field the server added since is kept as an int or a str."""
    pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
    out: dict[str, Any] = {}
    for k, v in pairs:
        key = k.decode() if isinstance(k, bytes) else str(k)
        kind = INFO_FIELDS.get(key)
        if kind is None:
            kind = int if isinstance(v, int) else str
        out[key] = _value(kind, v)
    return out
