"""The same-host transport from Python: redis-py connections whose bytes go through the
server's shared-memory rings (its ``shm-socket``) instead of TCP.

:func:`connect` is what every client of this package uses to reach a server: it returns
a ``redis.Redis``, over shared memory when the server is on this machine and offers it,
over TCP otherwise. Everything on top (redis-py's commands, pipelines, pub/sub, the
REPLAY data path of :mod:`pyctl._wire`) is unchanged: :class:`ShmSocket` behaves as the
socket those read and write.

How a client tells the server is local: ``INFO server`` names the server's shm socket
and the machine's boot id (the kernel's, the same in every container and namespace on
the machine); only a client that reads the same boot id tries the socket, and the server
then answers with its run_id, which must be the one the TCP connection saw. A remote
client never tries; a local one that cannot reach the socket (another mount namespace, a
file mode that keeps it out) stays on TCP.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import select
import socket
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis

from . import _native

log = logging.getLogger(__name__)

SPIN_US_ENV = "INREPLAY_SHM_SPIN_US"
SHM_ENV = "INREPLAY_SHM"
"""``INREPLAY_SHM=0`` keeps every client of this process on TCP (as ``shm=False``)."""


@lru_cache(maxsize=1)
def boot_id() -> str:
    """This machine's boot id ("" if it cannot be read)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _socket_hung_up(fd: int) -> bool:
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


class ShmSocket:
    """A connected shm ring pair with the part of socket.socket's interface redis-py and
    pyctl._wire use (recv_into, sendall, sendmsg, timeouts, close)."""

    def __init__(self, path: str, spin_us: int | None = None) -> None:
        self._c: Any = None
        ffi, lib = _native.load()
        self._ffi, self._lib = ffi, lib
        out = ffi.new("ir_shm_client **")
        run_id = ffi.new("char[]", 48)
        rc = lib.ir_shm_connect(path.encode(), out, run_id, 48)
        if rc != 0:
            raise ConnectionRefusedError(errno.ECONNREFUSED, _native.last_error())
        self._c: Any = out[0]
        self.path = path
        self.run_id = ffi.string(run_id).decode()
        self.server_pid = int(lib.ir_shm_peer_pid(self._c))
        self._timeout_ms = -1
        if spin_us is None:
            spin_us = int(os.environ.get(SPIN_US_ENV, "20"))
        lib.ir_shm_set_spin(self._c, spin_us)

    # --- what socket.socket offers -------------------------------------------------
    def settimeout(self, t: float | None) -> None:
        self._timeout_ms = -1 if t is None else max(0, int(t * 1000))

    def gettimeout(self) -> float | None:
        return None if self._timeout_ms < 0 else self._timeout_ms / 1000

    def setblocking(self, flag: bool) -> None:
        self._timeout_ms = -1 if flag else 0

    def setsockopt(self, *args: Any) -> None:
        """Socket options mean nothing on a ring (redis-py sets TCP's)."""

    def fileno(self) -> int:
        """An fd poll() finds readable when reply bytes wait in the ring or the server
        has gone (redis-py polls it for pub/sub timeouts and closed connections)."""
        return self._lib.ir_shm_poll_fd(self._live()) if self._c is not None else -1

    def closed_by_peer(self) -> bool:
        """Whether an idle connection cannot carry the next request: the server hung up,
        or sent what nobody asked for (without putting the rings in poll mode)."""
        if self._c is None:
            return True
        return self.pending() > 0 or _socket_hung_up(self._lib.ir_shm_fileno(self._c))

    def pending(self) -> int:
        """Reply bytes readable now (redis-py asks before it polls, as of a TLS socket)."""
        return int(self._lib.ir_shm_pending(self._live())) if self._c is not None else 0

    def getsockname(self) -> str:
        return self.path

    def getpeername(self) -> str:
        return self.path

    def _live(self) -> Any:
        if self._c is None:
            raise OSError(errno.EBADF, "the shm connection is closed")
        return self._c

    def recv_into(self, buf: Any, nbytes: int = 0) -> int:
        c = self._live()
        view = self._ffi.from_buffer(buf, require_writable=True)
        n = nbytes or len(view)
        got = self._lib.ir_shm_read(c, view, n, self._timeout_ms)
        if got >= 0:
            return int(got)
        if got == -2:
            if self._timeout_ms == 0:
                raise BlockingIOError(errno.EWOULDBLOCK, "no reply bytes yet")
            raise TimeoutError("timed out")
        raise OSError(errno.EIO, _native.last_error())

    def recv(self, n: int, flags: int = 0) -> bytes:
        if flags & socket.MSG_PEEK:  # redis-py's closed-or-not check: b"" only at the end
            if self.pending():
                return b"?"
            if _socket_hung_up(self._lib.ir_shm_fileno(self._live())):
                return b""
            raise BlockingIOError(errno.EWOULDBLOCK, "no reply bytes yet")
        buf = bytearray(n)
        got = self.recv_into(buf)
        return bytes(buf[:got])

    def sendmsg(self, buffers: Any) -> int:
        c = self._live()
        bufs = [self._ffi.from_buffer(b) for b in buffers]
        n = len(bufs)
        ptrs = self._ffi.new("const void *[]", bufs)
        lens = self._ffi.new("size_t[]", [len(b) for b in bufs])
        timeout = -1 if self._timeout_ms < 0 else max(self._timeout_ms, 1)
        sent = self._lib.ir_shm_writev(c, ptrs, lens, n, timeout)
        if sent >= 0:
            return int(sent)
        if sent == -2:
            raise TimeoutError("timed out writing to the server")
        raise BrokenPipeError(errno.EPIPE, _native.last_error())

    def read_bulk_view(self) -> memoryview:
        """Read one bulk-string reply and return its body where it lies in the reply
        ring, with no copy: valid until the next request on this connection (the
        memory stays mapped while the view lives, even after close). A body too large
        for the ring beside what is held is copied instead. An error reply raises
        redis.ResponseError; anything else but a bulk string redis.ConnectionError."""
        c, ffi, lib = self._live(), self._ffi, self._lib
        line = ffi.new("char[]", 64)
        n = lib.ir_shm_read_line(c, line, 64, self._timeout_ms)
        head = self._check_read(n, "reading a reply")
        text = ffi.buffer(line, head)[:]
        if text[:1] == b"-":
            raise redis.ResponseError(text[1:].rstrip(b"\r\n").decode(errors="replace"))
        if text[:1] != b"$" or not text.endswith(b"\r\n") or not text[1:-2].isdigit():
            raise redis.ConnectionError(f"expected a bulk string, got {text[:80]!r}")
        length = int(text[1:-2])
        out = ffi.new("const void **")
        got = lib.ir_shm_peek(c, length + 2, self._timeout_ms, out)
        if got == -3:  # larger than the ring allows: copy it out as it streams
            buf = bytearray(length + 2)
            view, done = memoryview(buf), 0
            while done < len(buf):
                done += self._check_read(lib.ir_shm_read(c, ffi.from_buffer(view[done:]),
                                                         len(buf) - done, self._timeout_ms),
                                         "reading a reply")
            body = memoryview(buf)
        else:
            self._check_read(got, "reading a reply")
            lib.ir_shm_ref(c)  # the mapping lives while the view does
            keep = ffi.gc(ffi.cast("char *", out[0]), lambda _p, c=c: lib.ir_shm_unref(c))
            body = memoryview(ffi.buffer(keep, length + 2))
        if bytes(body[length:]) != b"\r\n":
            raise redis.ConnectionError("a bulk reply did not end where its length said")
        return body[:length]

    def _check_read(self, n: int, what: str) -> int:
        if n > 0:
            return int(n)
        if n == 0:
            raise redis.ConnectionError(f"the server closed the connection {what}")
        if n == -2:
            raise TimeoutError(f"timed out {what}")
        raise redis.ConnectionError(_native.last_error())

    def sendall(self, data: Any) -> None:
        self.sendmsg([data])

    def send(self, data: Any) -> int:
        return self.sendmsg([data])

    def shutdown(self, how: int) -> None:
        """Nothing to do: close() ends the connection."""

    def close(self) -> None:
        if self._c is not None:
            self._lib.ir_shm_close(self._c)
            self._c = None

    def __del__(self) -> None:
        self.close()


class ShmConnection(redis.UnixDomainSocketConnection):
    """redis-py's connection over the server's shm socket at path. server is who the
    caller found at host:port (tcp): a different server answering at path (the server
    restarted) is checked again before it is used."""

    def __init__(self, path: str = "", server: Found | None = None,
                 tcp: dict[str, Any] | None = None, spin_us: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(path=path, **kwargs)
        self.server = server
        self.tcp = tcp or {}
        self.spin_us = spin_us

    def repr_pieces(self) -> list[tuple[str, Any]]:
        return [("shm", self.path), ("db", self.db)]

    def _connect(self) -> Any:
        sock = ShmSocket(self.path, self.spin_us)
        if self.server is not None and not self.server.answered_by(sock):
            found = _discover_tcp(self.tcp)
            if found is None or found.path != self.path or not found.answered_by(sock):
                sock.close()
                raise redis.ConnectionError(
                    f"the shm socket {self.path} belongs to another server than "
                    f"{self.tcp.get('host')}:{self.tcp.get('port')}: connect again, or pass "
                    f"shm=False")
            self.server = found  # the same address, restarted
        sock.settimeout(self.socket_timeout)
        return sock

    def _host_error(self) -> str:
        return f"shm:{self.path}"


@dataclass(frozen=True)
class Found:
    """A server on this machine that offers shared memory: its shm socket, and what
    tells it apart (its run_id from INFO, or the pid pyctl recorded for its address)."""

    path: str
    run_id: str = ""
    pid: int = 0

    def answered_by(self, sock: ShmSocket) -> bool:
        return sock.run_id == self.run_id if self.run_id else sock.server_pid == self.pid


def _discover(r: redis.Redis, host: str, port: int) -> Found | None:
    """The server r talks to, if it is on this machine and offers shared memory."""
    try:
        info = r.info("server")
    except redis.exceptions.NoPermissionError:
        return _discover_state(host, port)  # a user its ACL keeps from INFO
    except redis.RedisError:
        return None
    path, boot, run_id = (str(info.get(k) or "") for k in ("shm_socket", "boot_id", "run_id"))
    if not path or not boot or boot != boot_id():
        return None
    return Found(path, run_id=run_id)


def _discover_state(host: str, port: int) -> Found | None:
    """What pyctl start recorded for host:port in this user's run directory (a server
    this user started: its shm socket and pid), or None."""
    from pyctl import server

    p = server.rundir_path() / server.state_file_name(host, port)
    try:
        if p.stat().st_uid != os.getuid():
            return None
        state = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    path, pid = state.get("shm_socket") or "", int(state.get("pid") or 0)
    return Found(path, pid=pid) if path and pid else None


def _discover_tcp(tcp: dict[str, Any]) -> Found | None:
    r = redis.Redis(**tcp)
    try:
        return _discover(r, tcp.get("host", ""), int(tcp.get("port", 0)))
    finally:
        r.close()


def connect(host: str = "127.0.0.1", port: int = 6379, *, shm: bool | None = None,
            shm_spin_us: int | None = None, **kwargs: Any) -> redis.Redis:
    """A redis.Redis for the server at host:port: through its shared-memory rings when it
    is on this machine and offers them (shm=None, the default; shm=False never; shm=True
    requires them and raises redis.ConnectionError saying why not), else TCP. kwargs go to
    redis.Redis. shm_spin_us: how long a waiting call spins on the ring before sleeping
    (default 20, or $INREPLAY_SHM_SPIN_US)."""
    if shm is None and os.environ.get(SHM_ENV, "1") == "0":
        shm = False
    tcp = redis.Redis(host=host, port=port, **kwargs)
    if shm is False:
        return tcp
    found = _discover(tcp, host, port)
    if found is None:
        if shm:
            tcp.close()
            raise redis.ConnectionError(
                f"{host}:{port} offers no shared memory to this machine (it is remote, or "
                f"started without --shm-socket)")
        return tcp
    path = found.path
    try:
        probe = ShmSocket(path, shm_spin_us)  # reachable from here (mount namespace, mode)?
        same = found.answered_by(probe)
        probe.close()
        if not same:
            raise OSError(errno.ESTALE, "another server answers there")
    except OSError as e:
        if shm:
            tcp.close()
            raise redis.ConnectionError(f"{host}:{port}'s shm socket {path}: {e}") from None
        log.info("%s:%d: staying on TCP: its shm socket %s: %s", host, port, path, e)
        return tcp
    tcp.close()
    single = bool(kwargs.pop("single_connection_client", False))
    # redis-py turns Redis's keywords into its connections' (it connects nothing yet)
    shape = redis.Redis(unix_socket_path=path, **kwargs)
    ckw = dict(shape.connection_pool.connection_kwargs)
    shape.close()
    ckw.update(server=found, spin_us=shm_spin_us, tcp=dict(host=host, port=port, **kwargs))
    pool = redis.ConnectionPool(connection_class=ShmConnection, **ckw)
    r = redis.Redis(connection_pool=pool, single_connection_client=single)
    r.auto_close_connection_pool = True  # its own pool, as with TCP: close() disconnects it
    return r


def is_shm(r: redis.Redis) -> bool:
    """Whether r's connections go through shared memory."""
    return r.connection_pool.connection_class is ShmConnection


__all__ = ["Found", "ShmConnection", "ShmSocket", "boot_id", "connect", "is_shm"]
