"""RESP2 wire protocol, byte for byte, over raw sockets.

The malformed-request cases are those of Redis's tests/unit/protocol.tcl plus
the neighbouring edge cases of its parser (networking.c). Every expected reply
below was checked against redis-server 7.0.15, which runs the same test as the
``redis`` parameter: a test that fails there is a wrong test.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from helpers import bulk, mbulk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# also over the same-host rings (server kind shm), against stock Redis as the others
pytestmark = pytest.mark.also_shm

if TYPE_CHECKING:
    from conftest import RawConn, ServerProcess

Raw = Callable[[], "RawConn"]

PONG = b"+PONG\r\n"
INVALID_MBULK = b"-ERR Protocol error: invalid multibulk length\r\n"
INVALID_BULK = b"-ERR Protocol error: invalid bulk length\r\n"
PROTO_MAX_BULK_LEN = 512 * 1024 * 1024  # Redis's default proto-max-bulk-len


def send_bytewise(c: RawConn, data: bytes) -> None:
    for i in range(len(data)):
        c.send(data[i : i + 1])


# --------------------------------------------------------------------------
# ignored input
# --------------------------------------------------------------------------


@pytest.mark.parametrize("line", [b"\r\n", b"\n", b"   \r\n", b"\r\n\r\n\n"])
def test_empty_query_is_ignored(raw: Raw, line: bytes) -> None:
    c = raw()
    c.send(line)
    c.expect_open()


@pytest.mark.parametrize("count", [b"-10", b"-1", b"0", b"-3000000000"])
def test_non_positive_multibulk_length_is_ignored(raw: Raw, count: bytes) -> None:
    c = raw()
    c.send(b"*" + count + b"\r\n")
    c.expect_open()
    # and the next request on the same stream parses normally
    c.send(b"*" + count + b"\r\n" + mbulk("ECHO", "after"))
    c.expect(bulk(b"after"))


# --------------------------------------------------------------------------
# malformed multibulk: reply, then close
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"*3000000000\r\n",  # protocol.tcl "Out of range multibulk length"
        b"*2147483648\r\n",  # INT_MAX + 1
        b"*9223372036854775808\r\n",  # does not fit a long long
        b"*20x\r\n",
        b"*abc\r\n",
        b"*\r\n",
        b"*+1\r\n$4\r\nPING\r\n",  # string2ll: no sign ...
        b"*01\r\n$4\r\nPING\r\n",  # ... no leading zero ...
        b"*1 \r\n$4\r\nPING\r\n",  # ... no trailing space
        b"*1\n$4\r\nPING\r\n",  # the count line ends at CR, so it reads "1\n$4"
    ],
)
def test_invalid_multibulk_length(raw: Raw, request_bytes: bytes) -> None:
    c = raw()
    c.send(request_bytes)
    c.expect(INVALID_MBULK)
    c.expect_close()


def test_multibulk_length_int_max_is_accepted(server: ServerProcess, raw: Raw) -> None:
    """INT_MAX itself is a legal count: the server waits for the arguments
    (and must not try to allocate them all up front)."""
    c = raw()
    c.send(b"*2147483647\r\n")
    c.expect_silence()
    c.send(mbulk("SET")[4:])  # first argument: $3\r\nSET\r\n
    c.expect_silence()
    c.close()
    with server.raw() as other:
        other.expect_open()


@pytest.mark.parametrize(
    ("request_bytes", "got"),
    [
        (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", b"f"),  # protocol.tcl
        (b"*1\r\nfoo\r\n", b"f"),  # protocol.tcl
        (b"*2\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n", b"*"),
        (b"*2\r\n$4\r\nECHO\r\n:1\r\n", b":"),
        # a newline in the error text is replaced by a space
        (b"*2\r\n$3\r\nfo\no\r\n$1\r\na\r\n", b" "),
    ],
)
def test_expected_dollar(raw: Raw, request_bytes: bytes, got: bytes) -> None:
    c = raw()
    c.send(request_bytes)
    c.expect(b"-ERR Protocol error: expected '$', got '" + got + b"'\r\n")
    c.expect_close()


@pytest.mark.parametrize(
    "header",
    [
        b"$-10",  # protocol.tcl "Negative multibulk payload length"
        b"$-1",
        b"$2000000000",  # protocol.tcl "Out of range multibulk payload length"
        b"$%d" % (PROTO_MAX_BULK_LEN + 1),
        b"$9223372036854775808",
        b"$blabla",  # protocol.tcl "Non-number multibulk payload length"
        b"$",
        b"$+4",
        b"$04",
        b"$4 ",
    ],
)
def test_invalid_bulk_length(raw: Raw, header: bytes) -> None:
    c = raw()
    c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n" + header + b"\r\n")
    c.expect(INVALID_BULK)
    c.expect_close()


def test_bulk_length_at_proto_max_bulk_len_is_accepted(raw: Raw) -> None:
    c = raw()
    c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$%d\r\n" % PROTO_MAX_BULK_LEN)
    c.expect_silence()


# --------------------------------------------------------------------------
# over-long lines (64 KiB without a newline)
# --------------------------------------------------------------------------


def flood_until_closed(c: RawConn, prefix: bytes, limit: int = 32 << 20) -> tuple[bytes, bool]:
    """Send prefix then junk without CR/LF until the server hangs up.

    This is protocol.tcl's "Protocol desync regression test": the server must
    notice the runaway line and close, not buffer forever. Bounded by `limit`
    bytes and 30 s.
    """
    junk = b"payload" * 1024
    c.send(prefix)
    sent = 0
    deadline = time.monotonic() + 30
    try:
        while sent < limit and time.monotonic() < deadline:
            c.send(junk)
            sent += len(junk)
    except OSError:  # broken pipe, reset, or the server stopped reading (timeout)
        pass
    return c.read_until_close(timeout=5.0)


@pytest.mark.parametrize(
    ("prefix", "error"),
    [
        # protocol.tcl "Protocol desync regression test #1..#3"
        (b"\x00", b"too big inline request"),
        (b"*\x00", b"too big mbulk count string"),
        (b"$\x00", b"too big inline request"),
        # the same limits reached without a NUL
        (b"PING", b"too big inline request"),
        (b"*", b"too big mbulk count string"),
        (b"*1\r\n$", b"too big bulk count string"),
        (b"*2\r\n$4\r\nECHO\r\n$", b"too big bulk count string"),
    ],
)
def test_runaway_line_is_a_protocol_error(raw: Raw, prefix: bytes, error: bytes) -> None:
    data, closed = flood_until_closed(raw(), prefix)
    assert data == b"-ERR Protocol error: " + error + b"\r\n"
    assert closed


def test_runaway_line_after_good_commands(raw: Raw) -> None:
    data, closed = flood_until_closed(raw(), mbulk("PING") + b"*1\r\n")
    assert data == PONG + b"-ERR Protocol error: too big bulk count string\r\n"
    assert closed


def test_inline_request_just_under_limit(raw: Raw) -> None:
    arg = b"a" * 60000
    c = raw()
    c.send(b"ECHO " + arg + b"\r\n")
    c.expect(bulk(arg))
    c.expect_open()


# --------------------------------------------------------------------------
# inline requests
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "reply"),
    [
        (b"PING\r\n", PONG),
        (b"ping\n", PONG),  # LF alone ends a line too
        (b"Ping\r\n", PONG),
        (b"PING hello\r\n", bulk(b"hello")),
        (b"ECHO x\r\r\n", bulk(b"x")),  # a CR before the CRLF is whitespace
        (b'ECHO "a b"\r\n', bulk(b"a b")),
        (b'ECHO ""\r\n', bulk(b"")),
        (b"ECHO ''\r\n", bulk(b"")),
        (b'ECHO "\\x41\\x00\\xff\\n"\r\n', bulk(b"A\x00\xff\n")),
        (b'ECHO "\\t\\r\\b\\a\\\\\\""\r\n', bulk(b'\t\r\x08\x07\\"')),
        (b'ECHO "\\xzz"\r\n', bulk(b"xzz")),  # not a hex escape: just the letter
        (b"ECHO 'a\\'b'\r\n", bulk(b"a'b")),
        (b"ECHO 'a\\nb'\r\n", bulk(b"a\\nb")),  # single quotes: only \' is an escape
        (b"ECHO   spaced   \r\n", bulk(b"spaced")),
        (b"ECHO\tx\r\n", bulk(b"x")),
        (b"ECHO x\ty\r\n", b"-ERR wrong number of arguments for 'echo' command\r\n"),
    ],
)
def test_inline_command(raw: Raw, request_bytes: bytes, reply: bytes) -> None:
    c = raw()
    c.send(request_bytes)
    c.expect(reply)
    c.expect_open()


def test_inline_set_with_quotes_then_get(raw: Raw) -> None:
    c = raw()
    c.send(b'set k "a b"\r\nget k\r\nSET k2 "\\r\\n\\x00"\r\nGET k2\r\n')
    c.expect(b"+OK\r\n" + bulk(b"a b") + b"+OK\r\n" + bulk(b"\r\n\x00"))


@pytest.mark.parametrize(
    "line",
    [
        b'set """test-key""" test-value',  # protocol.tcl "Unbalanced number of quotes"
        b'set a "b',
        b'set a "b"c',
        b"set a 'b",
        b"set a 'b'c",
    ],
)
def test_unbalanced_quotes(raw: Raw, line: bytes) -> None:
    c = raw()
    c.send(line + b"\r\nping\r\n")
    c.expect(b"-ERR Protocol error: unbalanced quotes in request\r\n")
    c.expect_close()


def test_mixed_inline_and_multibulk_pipeline(raw: Raw) -> None:
    c = raw()
    c.send(b"ECHO a\r\nPING\r\n" + mbulk("PING") + b"\r\nPING\r\n" + mbulk("ECHO", "b"))
    c.expect(bulk(b"a") + PONG + PONG + PONG + bulk(b"b"))


def test_bytes_after_a_complete_multibulk_are_inline(raw: Raw) -> None:
    """Extra arguments beyond the count start a new (inline) request."""
    c = raw()
    c.send(b"*1\r\n$4\r\nPING\r\n$1\r\nx\r\n")
    c.expect(
        PONG
        + b"-ERR unknown command '$1', with args beginning with: \r\n"
        + b"-ERR unknown command 'x', with args beginning with: \r\n"
    )
    c.expect_open()


def test_bulk_terminator_is_skipped_not_checked(raw: Raw) -> None:
    """Redis skips the two bytes after a bulk without looking at them."""
    c = raw()
    c.send(b"*1\r\n$4\r\nPINGxx" + mbulk("ECHO", "y"))
    c.expect(PONG + bulk(b"y"))


def test_empty_bulk_argument(raw: Raw) -> None:
    c = raw()
    c.send(mbulk("ECHO", b""))
    c.expect(b"$0\r\n\r\n")


# --------------------------------------------------------------------------
# unknown command and arity: error, connection stays
# --------------------------------------------------------------------------

UNKNOWN = b"-ERR unknown command '%s', with args beginning with: %s\r\n"


@pytest.mark.parametrize(
    ("request_bytes", "reply"),
    [
        (b"foo a b\r\n", UNKNOWN % (b"foo", b"'a' 'b' ")),
        (mbulk("foo", "a", "b"), UNKNOWN % (b"foo", b"'a' 'b' ")),
        (b"FOO\r\n", UNKNOWN % (b"FOO", b"")),
        (mbulk("FOO", ""), UNKNOWN % (b"FOO", b"'' ")),
        (mbulk(""), UNKNOWN % (b"", b"")),
        (
            b"foo a b c d e f g h i j k l m n\r\n",
            UNKNOWN % (b"foo", b"'a' 'b' 'c' 'd' 'e' 'f' 'g' 'h' 'i' 'j' 'k' 'l' 'm' 'n' "),
        ),
        # the argument list is cut at 128 characters ...
        (
            mbulk("foo", b"a" * 100, b"b" * 100, b"c"),
            UNKNOWN % (b"foo", b"'" + b"a" * 100 + b"' '" + b"b" * 25 + b"' "),
        ),
        # ... and so is the command name
        (mbulk(b"X" * 300), UNKNOWN % (b"X" * 128, b"")),
        # CR/LF in the text become spaces; a NUL ends an argument (C string)
        (mbulk("foo", b"a\nb", b"c\rd"), UNKNOWN % (b"foo", b"'a b' 'c d' ")),
        (mbulk("foo", b"a\x00b"), UNKNOWN % (b"foo", b"'a' ")),
    ],
)
def test_unknown_command(raw: Raw, request_bytes: bytes, reply: bytes) -> None:
    c = raw()
    c.send(request_bytes)
    c.expect(reply)
    c.expect_open()


@pytest.mark.parametrize(
    ("request_bytes", "name"),
    [
        (b"get\r\n", b"get"),
        (mbulk("GET"), b"get"),  # the reported name is the lower-case table name
        (b"ping x y z\r\n", b"ping"),  # protocol.tcl "Generic wrong number of args"
        (b"ECHO\r\n", b"echo"),
        (mbulk("echo", "a", "b"), b"echo"),
        (b"SET k\r\n", b"set"),
        (mbulk("mset", "a"), b"mset"),
        (mbulk("mset", "a", "b", "c"), b"mset"),
    ],
)
def test_wrong_arity(raw: Raw, request_bytes: bytes, name: bytes) -> None:
    c = raw()
    c.send(request_bytes)
    c.expect(b"-ERR wrong number of arguments for '" + name + b"' command\r\n")
    c.expect_open()


# --------------------------------------------------------------------------
# the same protocol errors, one byte at a time
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "reply"),
    [
        (b"*3000000000\r\n", INVALID_MBULK),
        (
            b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
            b"-ERR Protocol error: expected '$', got 'f'\r\n",
        ),
        (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n", INVALID_BULK),
        (b'set a "b\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    ],
)
def test_protocol_error_bytewise(raw: Raw, request_bytes: bytes, reply: bytes) -> None:
    c = raw()
    send_bytewise(c, request_bytes)
    c.expect(reply)
    c.expect_close()


# --------------------------------------------------------------------------
# property: the reply stream does not depend on how the request stream is cut
# --------------------------------------------------------------------------

STRING_KEYS = [b"s:0", b"s:1", b"s:2"]
LIST_KEYS = [b"l:0", b"l:1"]
COUNTER = b"c:0"


def inline_arg(b: bytes) -> bytes:
    """Quote an argument for an inline request (\\xHH for anything unsafe)."""
    if b and all(0x21 <= ch <= 0x7E and ch not in b"\"'\\" for ch in b):
        return b
    return b'"' + b"".join(b"\\x%02x" % ch for ch in b) + b'"'


class Model:
    """What the server should answer, for the few commands we generate."""

    def __init__(self) -> None:
        self.strings: dict[bytes, bytes] = {}
        self.lists: dict[bytes, list[bytes]] = {}
        self.counter = 0

    def apply(self, args: tuple[bytes, ...]) -> bytes:
        cmd = args[0]
        if cmd == b"SET":
            self.strings[args[1]] = args[2]
            return b"+OK\r\n"
        if cmd == b"GET":
            return bulk(self.strings.get(args[1]))
        if cmd == b"STRLEN":
            return b":%d\r\n" % len(self.strings.get(args[1], b""))
        if cmd == b"DEL":
            return b":%d\r\n" % (self.strings.pop(args[1], None) is not None)
        if cmd == b"EXISTS":
            return b":%d\r\n" % (args[1] in self.strings)
        if cmd == b"ECHO":
            return bulk(args[1])
        if cmd == b"PING":
            return PONG if len(args) == 1 else bulk(args[1])
        if cmd == b"INCR":
            self.counter += 1
            return b":%d\r\n" % self.counter
        if cmd == b"RPUSH":
            lst = self.lists.setdefault(args[1], [])
            lst.extend(args[2:])
            return b":%d\r\n" % len(lst)
        if cmd == b"LRANGE":
            lst = self.lists.get(args[1], [])
            return b"*%d\r\n" % len(lst) + b"".join(bulk(x) for x in lst)
        raise AssertionError(cmd)


payloads = st.binary(max_size=200)
skeys = st.sampled_from(STRING_KEYS)
lkeys = st.sampled_from(LIST_KEYS)
commands = st.one_of(
    st.tuples(st.just(b"SET"), skeys, payloads),
    st.tuples(st.just(b"GET"), skeys),
    st.tuples(st.just(b"STRLEN"), skeys),
    st.tuples(st.just(b"DEL"), skeys),
    st.tuples(st.just(b"EXISTS"), skeys),
    st.tuples(st.just(b"ECHO"), payloads),
    st.tuples(st.just(b"PING")),
    st.tuples(st.just(b"PING"), payloads),
    st.tuples(st.just(b"INCR"), st.just(COUNTER)),
    st.tuples(st.just(b"RPUSH"), lkeys, payloads, payloads),
    st.tuples(st.just(b"LRANGE"), lkeys, st.just(b"0"), st.just(b"-1")),
)
requests = st.lists(st.tuples(commands, st.booleans()), min_size=1, max_size=25)


def encode(args: tuple[bytes, ...], inline: bool) -> bytes:
    if inline:
        return b" ".join(inline_arg(a) for a in args) + b"\r\n"
    return mbulk(*args)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(reqs=requests, cut_seed=st.integers(0, 2**32 - 1))
def test_reply_stream_independent_of_segmentation(
    server: ServerProcess, reqs: list[tuple[tuple[bytes, ...], bool]], cut_seed: int
) -> None:
    stream = b"".join(encode(args, inline) for args, inline in reqs)
    model = Model()
    expected = b"".join(model.apply(args) for args, _ in reqs)

    rng = random.Random(cut_seed)
    cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(1, 30))))
    bounds = [0, *cuts, len(stream)]
    ways: dict[str, list[bytes]] = {
        "whole": [stream],
        "bytewise": [stream[i : i + 1] for i in range(len(stream))],
        "random cuts": [stream[a:b] for a, b in itertools.pairwise(bounds)],
    }
    for how, chunks in ways.items():
        server.flushall()
        with server.raw() as c:
            for chunk in chunks:
                c.send(chunk)
            got = c.recv_exact(len(expected))
            assert got == expected, f"sent {how}"
            c.expect_open()  # and nothing more came before the PONG


# --------------------------------------------------------------------------
# volume
# --------------------------------------------------------------------------


def pump(c: RawConn, data: bytes, expected_len: int, chunk: int = 256 * 1024) -> bytes:
    """Send `data` from a thread while reading `expected_len` reply bytes here
    (so neither side's socket buffer can deadlock the other)."""
    errors: list[BaseException] = []

    def sender() -> None:
        try:
            for i in range(0, len(data), chunk):
                c.send(data[i : i + chunk])
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    try:
        got = c.recv_exact(expected_len)
    finally:
        t.join(60)
    if errors:
        raise errors[0]
    return got


@pytest.mark.slow
def test_100k_pipelined_commands_answered_in_order(raw: Raw) -> None:
    n = 50_000  # SET + GET each: 100,000 commands
    reqs: list[bytes] = []
    replies: list[bytes] = []
    for i in range(n):
        key = b"key:%d" % i
        val = b"value:%d:%s" % (i, b"x" * (i % 17))
        reqs.append(mbulk(b"SET", key, val))
        reqs.append(mbulk(b"GET", key))
        replies.append(b"+OK\r\n")
        replies.append(bulk(val))
    expected = b"".join(replies)
    c = raw()
    c.sock.settimeout(60)
    got = pump(c, b"".join(reqs), len(expected))
    if got != expected:  # find the first divergence rather than dump 2 MB
        at = next(i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b)
        pytest.fail(f"replies diverge at byte {at}: {got[at - 40 : at + 40]!r}")
    c.expect_open()


def nasty_value(size: int, seed: int) -> bytes:
    """Random bytes salted with CR, LF, NUL and fake RESP headers."""
    rng = random.Random(seed)
    v = bytearray(rng.randbytes(size))
    for pattern in (b"\r\n", b"\x00", b"\r\n$5\r\n", b"*3\r\n", b"\r", b"\n"):
        for _ in range(2000):
            at = rng.randrange(0, size - len(pattern))
            v[at : at + len(pattern)] = pattern
    v[:2] = b"\r\n"
    v[-2:] = b"\r\n"
    return bytes(v)


@pytest.mark.slow
def test_13mb_binary_value_roundtrip(raw: Raw) -> None:
    value = nasty_value(13 * 1024 * 1024, seed=13)
    digest = hashlib.sha256(value).hexdigest()
    c = raw()
    c.sock.settimeout(60)
    c.send(mbulk(b"SET", b"big", value))
    c.expect(b"+OK\r\n")
    c.send(mbulk(b"STRLEN", b"big") + mbulk(b"GET", b"big"))
    c.expect(b":%d\r\n" % len(value))
    c.expect(b"$%d\r\n" % len(value))
    body = c.recv_exact(len(value))
    c.expect(b"\r\n")
    assert hashlib.sha256(body).hexdigest() == digest
    c.expect_open()


def test_many_arguments_in_one_request(raw: Raw) -> None:
    """protocol.tcl "test large number of args": argv far beyond 1024."""
    args: list[bytes] = [b"MSET"]
    for i in range(10000):
        args += [b"k%d" % i, b"v%d" % i]
    c = raw()
    c.send(mbulk(*args))
    c.expect(b"+OK\r\n")
    c.send(mbulk(b"GET", b"k9999") + mbulk(b"GET", b"k0"))
    c.expect(bulk(b"v9999") + bulk(b"v0"))


def test_large_bulk_sent_in_pieces(raw: Raw) -> None:
    value = os.urandom(200_000) + b"\r\n\x00"
    data = mbulk(b"SET", b"piecewise", value) + mbulk(b"GET", b"piecewise")
    c = raw()
    for i in range(0, len(data), 7919):
        c.send(data[i : i + 7919])
    c.expect(b"+OK\r\n" + bulk(value))


# --------------------------------------------------------------------------
# many clients, slow clients
# --------------------------------------------------------------------------


def test_slow_reader_does_not_block_others(server: ServerProcess, raw: Raw) -> None:
    """50 MB of replies queue up for a client that is not reading; the
    server keeps serving everyone else, then delivers all of it in order."""
    value = bytes(range(256)) * 400  # 100 KiB
    slow, quitter = raw(), raw()
    slow.send(mbulk("SET", "big", value))
    slow.expect(b"+OK\r\n")
    slow.send(mbulk("GET", "big") * 500)
    quitter.send(mbulk("GET", "big") * 200)
    time.sleep(0.3)
    quitter.close()  # goes away with its replies unread
    with server.raw() as other:
        other.timeout = 2.0
        other.sock.settimeout(2.0)
        other.expect_open()
        other.send(mbulk("STRLEN", "big"))
        other.expect(b":%d\r\n" % len(value))
    one = bulk(value)
    for _ in range(500):
        slow.expect(one)
    slow.expect_open()


def test_many_connections(server: ServerProcess, raw: Raw) -> None:
    conns = [raw() for _ in range(300)]
    for i, c in enumerate(conns):
        c.send(mbulk("ECHO", b"conn-%d" % i))
    for i, c in enumerate(conns):
        c.expect(bulk(b"conn-%d" % i))
    info = conns[0].call("INFO", "clients")
    clients = int(re.search(rb"connected_clients:(\d+)", info)[1])
    assert clients >= 300
    for c in conns[1:]:
        c.close()
    deadline = time.monotonic() + 5
    while clients > 2 and time.monotonic() < deadline:  # closed ones are noticed
        time.sleep(0.05)
        info = conns[0].call("INFO", "clients")
        clients = int(re.search(rb"connected_clients:(\d+)", info)[1])
    assert clients <= 2
