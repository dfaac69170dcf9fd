"""Helpers shared by the test suites (one definition each; import from here).

pytest puts tests/ on sys.path (no __init__.py, the default import mode), so a
test file imports these as ``from helpers import free_port``.
"""

from __future__ import annotations

import ctypes
import signal
import socket

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """preexec_fn: SIGTERM this child when the process that started it dies,
    so not even a SIGKILLed pytest leaves a server behind."""
    PR_SET_PDEATHSIG = 1  # noqa: N806 - the C name
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def mbulk(*args: bytes | str | int) -> bytes:
    """A request as RESP's multibulk: ``*N`` then one bulk string per argument."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def bulk(b: bytes | None) -> bytes:
    """A RESP2 bulk string reply, or the null bulk for None."""
    return b"$-1\r\n" if b is None else b"$%d\r\n%s\r\n" % (len(b), b)
