"""Helpers shared by the test suites (one definition each; import from here).

pytest puts tests/ on sys.path (no __init__.py, the default import mode), so a
test file imports these as ``from helpers import free_port``.
"""

from __future__ import annotations

from pyctl import proc

HOST = "127.0.0.1"


free_port = proc.free_port
die_with_parent = proc.die_with_parent
mbulk = proc.resp_command


def bulk(b: bytes | None) -> bytes:
    """A RESP2 bulk string reply, or the null bulk for None."""
    return b"$-1\r\n" if b is None else b"$%d\r\n%s\r\n" % (len(b), b)
