"""Small process and socket helpers shared by pyctl, the benchmarks and the tests (one
definition each): free ports, children that die with their parent, RESP requests."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1  # <sys/prctl.h>


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the kernel's pick for port 0)."""
    return free_ports(host, 1)[0]


def free_ports(host: str, n: int) -> list[int]:
    """n distinct TCP ports that are free on host now (held together while picked)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(family, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def die_with_parent() -> None:
    """preexec_fn: the kernel SIGTERMs this child when the process that started it dies
    (even by SIGKILL), so no server or actor outlives a killed parent."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def resp_command(*args: bytes | str | int) -> bytes:
    """One request as RESP's multibulk: ``*N`` then one bulk string per argument."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def descendants(pid: int) -> list[int]:
    """Every process below pid, children first (read from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def stop_handler(event: threading.Event) -> Callable[[int, Any], None]:
    """A SIGTERM/SIGINT handler that sets event. Python runs a handler in the main thread
    between two bytecodes, which may be inside Event.set() itself (a second signal during
    the first one's set, or the main thread's own set): calling set() there waits forever
    for the lock the interrupted set() holds (a learner hung at shutdown that way). So the
    handler never takes the lock: the first signal hands set() to a thread of its own."""
    fired = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal fired
        if not fired:
            fired = True
            threading.Thread(target=event.set, name="stop-signal", daemon=True).start()

    return handler

