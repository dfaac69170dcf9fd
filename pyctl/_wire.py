"""The large-item data path of ReplayClient: requests gathered from the caller's buffers
and PACKED replies received straight into preallocated arrays.

redis-py builds a request by packing every argument (hiredis.pack_command copies them all
into one bytes object) and parses a bulk reply into a bytes object that the client copies
again into arrays. For batches of Atari-sized items those copies are the cost, so:

- :func:`add_request` lays a REPLAY.ADD request out as a list of buffers: the small RESP
  framing (and items under :data:`GATHER_MIN` bytes) joined, every larger item a
  memoryview of the caller's array; :func:`send_gather` hands the list to the kernel with
  ``sendmsg`` (one system call per ``IOV_MAX`` buffers), no Python copy of an item.
- :func:`recv_bulk_into` reads one bulk-string reply (``$<len>\\r\\n<bytes>\\r\\n``) from the
  connection's socket into a list of writable buffers (ids, weights, the caller's item
  array ...): the payload crosses from the kernel into its final place once.

Both work on a redis-py Connection that is connected and idle (its parser holds no
unread bytes); :func:`idle` says whether that holds and the callers fall back to
redis-py's own path when it does not (a TLS socket, a parser with buffered bytes).
"""

from __future__ import annotations

import contextlib
import select
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import redis

GATHER_MIN = 4096
"""Items of at least this many bytes are sent from the caller's buffer (a memoryview);
smaller ones are copied into the framing around them (fewer, larger iovecs)."""
IOV_MAX = 1024
HEADER_READ = 64


def plain_socket(sock: Any) -> bool:
    """Whether sock is a plain TCP/Unix socket (or the shm rings, a socket here), that
    send_gather may write to: not TLS (SSLSocket has no sendmsg), not None (not
    connected)."""
    return type(sock) is socket.socket or type(sock).__name__ == "ShmSocket"


def idle(conn: Any) -> bool:
    """Whether conn is a plain, connected TCP/Unix socket whose parser has nothing
    buffered: the next bytes on the socket are the reply to the next request."""
    if not plain_socket(getattr(conn, "_sock", None)):
        return False
    parser = getattr(conn, "_parser", None)
    reader = getattr(parser, "_reader", None)
    if reader is not None and hasattr(reader, "has_data"):
        return not reader.has_data()
    buf = getattr(parser, "_buffer", None)
    if buf is not None and hasattr(buf, "unread_bytes"):
        return buf.unread_bytes() == 0
    return False


def _b(x: bytes | str | int) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode()


def add_request(table: bytes | str, prio: Sequence[bytes], rows: Sequence[Any],
                tail: Sequence[bytes | str | int] = ()) -> list[bytes | memoryview]:
    """REPLAY.ADD table prio0 item0 prio1 item1 ... [tail] as a list of buffers."""
    t = _b(table)
    out: list[bytes | memoryview] = []
    acc = bytearray(b"*%d\r\n$10\r\nREPLAY.ADD\r\n$%d\r\n%s\r\n"
                    % (2 + 2 * len(rows) + len(tail), len(t), t))
    for p, row in zip(prio, rows, strict=True):
        size = row.nbytes if isinstance(row, memoryview) else len(row)
        acc += b"$%d\r\n%s\r\n$%d\r\n" % (len(p), p, size)
        if size >= GATHER_MIN:
            out.append(bytes(acc))
            acc = bytearray(b"\r\n")
            out.append(row)
        else:
            acc += row
            acc += b"\r\n"
    for a in tail:
        s = _b(a)
        acc += b"$%d\r\n%s\r\n" % (len(s), s)
    out.append(bytes(acc))
    return out


def add_packed_request(table: bytes | str, prio: bytes | None, n: int, body: memoryview,
                       tail: Sequence[bytes | str | int] = ()) -> list[bytes | memoryview]:
    """REPLAY.ADD table PACKED n <priorities|MAX> <items> [tail]: the priorities as n
    little-endian float64 (None: MAX), the n items of one size back to back in body,
    sent from the caller's buffer."""
    t, p = _b(table), (b"MAX" if prio is None else prio)
    size = body.nbytes
    head = bytearray(b"*%d\r\n$10\r\nREPLAY.ADD\r\n$%d\r\n%s\r\n$6\r\nPACKED\r\n"
                     % (6 + len(tail), len(t), t))
    ns = b"%d" % n
    head += b"$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n" % (len(ns), ns, len(p), p, size)
    end = bytearray(b"\r\n")
    for a in tail:
        s = _b(a)
        end += b"$%d\r\n%s\r\n" % (len(s), s)
    if size < GATHER_MIN:
        return [bytes(head + body.cast("B") + end)]
    return [bytes(head), body, bytes(end)]


def send_gather(sock: socket.socket, chunks: list[bytes | memoryview]) -> None:
    """sendmsg every chunk, in order, until all are sent (partial sends resumed)."""
    views = [memoryview(c).cast("B") for c in chunks]
    i = 0
    while i < len(views):
        sent = sock.sendmsg(views[i:i + IOV_MAX])
        while sent and i < len(views):
            size = len(views[i])
            if sent >= size:
                sent -= size
                i += 1
            else:
                views[i] = views[i][sent:]
                sent = 0
        while i < len(views) and not len(views[i]):
            i += 1


def _recv_into(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise redis.ConnectionError("the server closed the connection mid-reply")
        got += n


def recv_bulk_into(conn: Any, dests: Sequence[memoryview]) -> int | None:
    """Read one bulk-string reply from an idle conn into dests, in order.

    Returns None when the reply filled dests exactly. When its length differs from
    theirs, the reply is read and dropped (the connection stays usable) and its length
    is returned. An error reply raises redis-py's exception for it (the connection stays
    usable); anything else disconnects and raises redis.ConnectionError."""
    sock: socket.socket = conn._sock
    head = bytearray()
    buf = bytearray(HEADER_READ)
    while b"\r\n" not in head:
        n = sock.recv_into(buf)
        if n == 0:
            raise redis.ConnectionError("the server closed the connection")
        head += buf[:n]
        if len(head) > 1 << 20:
            raise redis.ConnectionError("no end of line in the first MB of a reply")
    end = head.index(b"\r\n")
    line, rest = bytes(head[:end]), memoryview(bytes(head[end + 2:]))
    if line[:1] == b"-":
        if rest:
            raise redis.ConnectionError(f"bytes after an error reply: {line[:80]!r}")
        raise conn._parser.parse_error(line[1:].decode(errors="replace"))
    if line[:1] != b"$" or not line[1:].isdigit():
        raise redis.ConnectionError(f"expected a bulk string, got {line[:80]!r}")
    length = int(line[1:])
    want = sum(len(d) for d in dests)
    targets = list(dests) if length == want else [memoryview(bytearray(length))]
    targets.append(memoryview(bytearray(2)))  # the closing CRLF
    for d in targets:
        take = min(len(d), len(rest))
        if take:
            d[:take] = rest[:take]
            rest = rest[take:]
        if take < len(d):
            _recv_into(sock, d[take:])
    if rest or bytes(targets[-1]) != b"\r\n":
        raise redis.ConnectionError("a bulk reply did not end where its length said")
    return None if length == want else length


def _redis_error(e: BaseException, fresh: bool) -> BaseException:
    """What redis-py's own path raises for e: a socket timeout is redis.TimeoutError and
    another socket error redis.ConnectionError, so callers catch one family either way."""
    if isinstance(e, TimeoutError):
        err: BaseException = redis.TimeoutError(f"Timeout reading from socket: {e}")
    elif isinstance(e, OSError) and not isinstance(e, redis.RedisError):
        err = redis.ConnectionError(f"Error while reading from socket: {e}")
    else:
        err = e
    err.fresh = fresh  # type: ignore[attr-defined]
    return err


def _once_more(call: Any) -> Any:
    """call(fresh, state) and, when a pooled connection turns out dead (the server
    restarted, an idle timeout) before the request was all sent, once more on a new one.
    Once the whole request is out (call sets state["sent"]), a lost connection is raised,
    never retried: the server may have applied it, and a REPLAY.ADD sent twice would
    insert its items twice."""
    state = {"sent": False}
    try:
        return call(False, state)
    except (redis.ConnectionError, ConnectionResetError, BrokenPipeError) as e:
        if getattr(e, "fresh", False) or state["sent"]:
            raise
        return call(True, state)


def call_gather(r: redis.Redis, chunks: list[bytes | memoryview]) -> Any:
    """Send a request laid out as buffers on one of r's connections and read its reply
    with redis-py's parser (a small reply: REPLAY.ADD's ids)."""
    return _once_more(lambda retry, state: _call_gather(r, chunks, retry, state))


def _closed_by_peer(sock: Any) -> bool:
    """An idle connection's socket is readable only if the server closed it (or sent
    what nobody asked for): either way it cannot carry the next request. poll(), not
    select(), which refuses descriptors past 1023 (a learner with many files open)."""
    if sock is None:
        return False
    if hasattr(sock, "closed_by_peer"):  # the shm rings: its own check, no poll of fds
        return bool(sock.closed_by_peer())
    try:
        p = select.poll()
        p.register(sock, select.POLLIN)
        return bool(p.poll(0))
    except (OSError, ValueError):
        return True


@contextlib.contextmanager
def _connection(r: redis.Redis, retry: bool) -> Iterator[Any]:
    """One of r's connections, connected (a new one when retrying). An error other than
    the server's reply disconnects it and is raised as redis-py's path would raise it,
    marked with whether the connection was new (then _once_more does not retry)."""
    pool = r.connection_pool
    conn = r.connection or pool.get_connection()
    fresh = conn._sock is None
    try:
        if not fresh and not retry and _closed_by_peer(conn._sock):
            retry = True  # the server closed it while it idled (as redis-py's pool checks)
        if retry and not fresh:
            conn.disconnect()
            fresh = True
        if conn._sock is None:
            conn.connect()
        yield conn
    except BaseException as e:
        if isinstance(e, redis.ResponseError):
            raise
        conn.disconnect()
        err = _redis_error(e, fresh)
        if err is e:
            raise
        raise err from None
    finally:
        if r.connection is None:
            pool.release(conn)


def _call_gather(r: redis.Redis, chunks: list[bytes | memoryview], retry: bool,
                 state: dict[str, bool]) -> Any:
    with _connection(r, retry) as conn:
        try:
            if idle(conn):
                send_gather(conn._sock, chunks)
            else:
                conn.send_packed_command(chunks)
        except OSError as e:
            conn.disconnect()
            raise redis.ConnectionError(f"Error while writing to socket: {e}") from None
        state["sent"] = True
        return conn.read_response()


def call_bulk_into(r: redis.Redis, args: Sequence[Any],
                   dests: Sequence[memoryview]) -> int | bool | None:
    """Send one command and read its bulk reply into dests (recv_bulk_into).

    Returns False, having sent nothing, when the connection cannot be read raw (the
    caller takes redis-py's path); else what recv_bulk_into returns."""
    return _once_more(lambda retry, state: _call_bulk_into(r, args, dests, retry, state))


def _call_bulk_into(r: redis.Redis, args: Sequence[Any], dests: Sequence[memoryview],
                    retry: bool, state: dict[str, bool]) -> int | bool | None:
    with _connection(r, retry) as conn:
        if not idle(conn):
            return False
        conn.send_packed_command(conn.pack_command(*args))
        state["sent"] = True
        return recv_bulk_into(conn, dests)


def call_bulk_view(r: redis.Redis, args: Sequence[Any]) -> memoryview | None:
    """Send one command on a shared-memory connection and return its bulk reply's body
    where it lies in the reply ring (ShmSocket.read_bulk_view: valid until the next
    request on that connection). None, having sent nothing, on any other connection."""
    return _once_more(lambda retry, state: _call_bulk_view(r, args, retry, state))


def _call_bulk_view(r: redis.Redis, args: Sequence[Any], retry: bool,
                    state: dict[str, bool]) -> memoryview | None:
    with _connection(r, retry) as conn:
        if not idle(conn) or not hasattr(conn._sock, "read_bulk_view"):
            return None
        conn.send_packed_command(conn.pack_command(*args))
        state["sent"] = True
        return conn._sock.read_bulk_view()
