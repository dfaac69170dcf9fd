"""Integer arguments of RESTORE, MEMORY USAGE and SORT: the one shared parser
(getLongLongFromArg) answers a non-integer with Redis's own error, before the
key is looked at, on stock Redis and inreplay alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import RawConn, RespError

NOT_INTEGER = RespError(b"ERR value is not an integer or out of range")


@pytest.mark.parametrize(
    "cmd",
    [
        ("RESTORE", "k", "0", "payload", "IDLETIME", "x"),
        ("RESTORE", "k", "0", "payload", "FREQ", "1.5"),
        ("RESTORE", "k", "ten", "payload"),
        ("RESTORE", "k", "99999999999999999999", "payload"),
        ("MEMORY", "USAGE", "k", "SAMPLES", "x"),
        ("SORT", "k", "LIMIT", "x", "1"),
        ("SORT", "k", "LIMIT", "0", "x"),
    ],
)
def test_non_integer_arguments(raw: Callable[[], RawConn], cmd: tuple[str, ...]) -> None:
    c = raw()
    c.call("FLUSHALL")
    assert c.call(*cmd) == NOT_INTEGER, cmd
