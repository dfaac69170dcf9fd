"""The same-host transport: RESP through the server's shared-memory rings (shm-socket).

What must hold on any machine: the client takes the rings only when the server is on
this machine and reachable, every command answers as over TCP (stock Redis is the
reference), replies and requests larger than a ring stream through it, and a client or
server that dies, or a client that breaks the ring's rules, costs nothing but its own
connection. Speed is bench/latency.py's and bench/peers.py's business.
"""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from conftest import ROOT, SERVER_KINDS, ServerProcess

from pyctl import _shm
from pyctl.client import ReplayClient
from pyctl.errors import RateLimited


def _clients(r: redis.Redis) -> list[dict[str, Any]]:
    return list(r.client_list())


# --------------------------------------------------------------------------
# choosing the transport
# --------------------------------------------------------------------------


def test_a_local_client_takes_the_rings(server_factory: Any) -> None:
    srv = server_factory("shm")
    rc = ReplayClient(srv.host, srv.port, protocol=2)
    assert _shm.is_shm(rc.redis)
    me = [c for c in _clients(rc.redis) if c["cmd"] == "client|list"]
    assert me and me[0]["addr"].endswith(".shm:0"), me
    assert "U" in me[0]["flags"]  # local, as a Unix-socket client
    info = rc.redis.info("server")
    assert info["shm_socket"] == me[0]["addr"][:-2]
    assert info["boot_id"] == _shm.boot_id()
    tcp = redis.Redis(host=srv.host, port=srv.port, protocol=2)
    assert tcp.info("clients")["connected_shm_clients"] == 1
    rc.close()
    _wait(lambda: tcp.info("clients")["connected_shm_clients"] == 0, "never closed")


def test_shm_false_and_the_environment_keep_tcp(server_factory: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    srv = server_factory("shm")
    assert not _shm.is_shm(ReplayClient(srv.host, srv.port, shm=False).redis)
    monkeypatch.setenv(_shm.SHM_ENV, "0")
    r = ReplayClient(srv.host, srv.port).redis
    assert not _shm.is_shm(r)
    assert r.ping()


def test_a_server_without_the_socket_is_reached_over_tcp(server_factory: Any) -> None:
    srv = server_factory("inreplay")  # --shm-socket none
    rc = ReplayClient(srv.host, srv.port)
    assert not _shm.is_shm(rc.redis) and rc.redis.ping()
    with pytest.raises(redis.ConnectionError, match="offers no shared memory"):
        ReplayClient(srv.host, srv.port, shm=True)


def test_stock_redis_is_reached_over_tcp(server_factory: Any) -> None:
    srv = server_factory("redis")
    rc = ReplayClient(srv.host, srv.port)
    assert not _shm.is_shm(rc.redis) and rc.redis.ping()


def test_another_machine_never_tries_the_socket(server_factory: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A client whose boot id differs is on another machine: it stays on TCP without
    touching the path (which may name anything there)."""
    srv = server_factory("shm")
    monkeypatch.setattr(_shm, "boot_id", lambda: "another-machine")
    tried: list[str] = []
    monkeypatch.setattr(_shm, "ShmSocket", lambda path, *a: tried.append(path))
    rc = ReplayClient(srv.host, srv.port)
    assert not _shm.is_shm(rc.redis) and rc.redis.ping() and not tried


def test_a_client_the_socket_keeps_out_stays_on_tcp(server_factory: Any, tmp_path: Path) -> None:
    """shm-socketperm 700 on a socket of root's: another user's client cannot connect,
    and falls back to TCP (or, asked for the rings, says why)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    sock = tmp_path / "s.shm"
    os.chmod(tmp_path, 0o755)
    srv = server_factory("shm", "--shm-socket", str(sock), "--shm-socketperm", "700")
    assert oct(sock.stat().st_mode & 0o777) == "0o700"
    assert _shm.is_shm(_shm.connect(srv.host, srv.port))  # root may (and imports are done)
    os.setegid(65534)
    os.seteuid(65534)
    try:
        r = _shm.connect(srv.host, srv.port)
        assert not _shm.is_shm(r) and r.ping()
        with pytest.raises(redis.ConnectionError, match="Permission denied"):
            _shm.connect(srv.host, srv.port, shm=True)
    finally:
        os.seteuid(0)
        os.setegid(0)


# --------------------------------------------------------------------------
# the same answers as over TCP
# --------------------------------------------------------------------------


def _workload(r: redis.Redis) -> list[Any]:
    """Commands of every family and reply type; the answers are compared with stock
    Redis's (nothing here depends on time or on the server)."""
    out: list[Any] = []
    out.append(r.set("s", "v"))
    out.append(r.get("s"))
    out.append(r.append("s", "w" * 70_000))
    out.append(len(r.get("s") or b""))
    out.append(r.incrby("n", 41))
    out.append(r.rpush("l", *range(100)))
    out.append(r.lrange("l", 5, 9))
    out.append(r.hset("h", mapping={f"f{i}": i for i in range(50)}))
    out.append(sorted(r.hgetall("h").items()))
    out.append(r.sadd("set", *"abcdef"))
    out.append(sorted(r.smembers("set")))
    out.append(r.zadd("z", {"a": 1.5, "b": 2.5}))
    out.append(r.zrange("z", 0, -1, withscores=True))
    out.append(r.xadd("x", {"k": "v"}, id="1-1"))
    out.append(r.xrange("x"))
    out.append(r.eval("return {1, 'two', {3}}", 0))
    p = r.pipeline(transaction=True)
    p.set("t", 1).incr("t").get("t")
    out.append(p.execute())
    try:
        r.execute_command("NOSUCHCOMMAND", "a")
    except redis.ResponseError as e:
        out.append(str(e))
    try:
        r.lpush("s", "x")
    except redis.ResponseError as e:
        out.append(str(e))
    out.append(r.delete("s", "n", "l", "h", "set", "z", "x", "t"))
    return out


def test_commands_answer_as_stock_redis(server_factory: Any) -> None:
    ref = server_factory("redis").client()
    shm = server_factory("shm").client()
    assert _shm.is_shm(shm)
    assert _workload(shm) == _workload(ref)


def test_raw_resp_answers_as_stock_redis(server_factory: Any) -> None:
    """Bytes as a hand-written client sends them: inline commands, a request split at
    every byte, a protocol error (the reply, then the connection closes)."""
    ref, shm = server_factory("redis"), server_factory("shm")
    answers = []
    for srv in (ref, shm):
        with srv.raw() as c:
            c.send(b"PING\r\n")
            a = [c.read_reply()]
            for b in b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n":
                c.send(bytes([b]))
            a.append(c.read_reply())
            c.send(b"*1\r\n$x\r\n")
            a.append(c.read_reply())
            answers.append(a)
    assert answers[0] == answers[1]


def test_values_larger_than_a_ring_stream_through_it(server_factory: Any) -> None:
    """64 KB rings, a 40 MB value each way, and a pipeline whose requests and replies
    are each many rings long: nothing waits forever, nothing is lost or reordered."""
    srv = server_factory("shm", "--shm-ring-size", "64kb")
    r = srv.client(socket_timeout=60)
    big = np.random.default_rng(1).bytes(40 << 20)
    assert r.set("big", big)
    assert r.get("big") == big
    p = r.pipeline(transaction=False)
    for i in range(20_000):
        p.set(f"k{i}", f"value-{i}" * 8)
        p.get(f"k{i}")
    out = p.execute()
    assert out[1::2] == [f"value-{i}".encode() * 8 for i in range(20_000)]


def test_replay_batches_over_the_rings(server_factory: Any) -> None:
    """REPLAY's own data path (gathered ADD, PACKED SAMPLE read into its arrays) on a
    ring smaller than one batch."""
    srv = server_factory("shm", "--shm-ring-size", "1mb")
    rc = ReplayClient(srv.host, srv.port)
    assert _shm.is_shm(rc.redis)
    rc.create("t", 1000)
    items = np.random.default_rng(2).integers(0, 255, (200, 28_224), dtype=np.uint8)
    ids = rc.add("t", np.arange(1, 201, dtype=np.float64), items)
    s = rc.sample("t", 512, item_shape=(28_224,), item_dtype=np.uint8)
    assert s.items.shape == (512, 28_224)
    by_id = dict(zip(np.asarray(ids).tolist(), items, strict=True))
    for i, row in zip(s.ids.tolist(), s.items, strict=True):
        assert np.array_equal(row, by_id[i])


def test_packed_batches_that_wrap_the_ring_are_read_in_place(server_factory: Any) -> None:
    """A 1 MB request ring and PACKED batches of 5 to 35 items of 28,224 B (up to 988 KB
    each): most batches wrap around the ring's end, at a different place each time. Each
    reaches the parser in one piece and its body is read where it lies (INFO stats
    by_reference_bodies_copied stays 0); every item reads back byte for byte. A batch
    larger than the ring cannot lie whole in it: its body is copied, and counted."""
    srv = server_factory("shm", "--shm-ring-size", "1mb")
    rc = ReplayClient(srv.host, srv.port, socket_timeout=60)
    assert _shm.is_shm(rc.redis)
    tcp = redis.Redis(host=srv.host, port=srv.port, protocol=2)

    def copied() -> int:
        return int(tcp.info("stats")["by_reference_bodies_copied"])

    rng = np.random.default_rng(7)
    sizes = [5 + (b * 7) % 31 for b in range(60)]
    rc.create("t", sum(sizes) + sum(sizes[:20]) + 40, queue=True)  # FIFO, each sampled once
    sent: list[np.ndarray] = []
    offset, wraps = 0, 0
    for n in sizes:
        items = rng.integers(0, 256, (n, 28_224), dtype=np.uint8)
        assert len(rc.add("t", None, items)) == n
        sent.append(items)
        request = sum(memoryview(b).nbytes for b in rc_add_request(n, items))
        wraps += (offset + request) // (1 << 20)
        offset = (offset + request) % (1 << 20)
    assert wraps >= 25, wraps
    assert copied() == 0
    # pipelined: the next batch is written while the server stores the last, and one
    # that does not fit beside what is in flight waits until it fits whole
    with rc.inserter("t", max_in_flight=4) as ins:
        for n in sizes[:20]:
            items = rng.integers(0, 256, (n, 28_224), dtype=np.uint8)
            ins.add(None, items)
            sent.append(items)
    assert copied() == 0
    big = rng.integers(0, 256, (40, 28_224), dtype=np.uint8)  # 1.13 MB: more than the ring
    assert len(rc.add("t", None, big)) == 40
    sent.append(big)
    assert copied() >= 1
    want = np.concatenate(sent)
    for start in range(0, len(want), 100):
        k = min(100, len(want) - start)
        s = rc.sample("t", k, item_shape=(28_224,), item_dtype=np.uint8)
        assert np.array_equal(s.items, want[start:start + k]), start


def test_a_held_insert_keeps_its_body_in_the_ring(server_factory: Any) -> None:
    """A QUEUE table that is full holds the next REPLAY.ADD until a sample makes room. On
    the rings the held batch's body stays where it lies and is read by reference when the
    insert goes on: it is not copied out (by_reference_bodies_copied stays 0; the old
    server copied every held body, with the batches pipelined behind it, into buffers of
    its own). Every item comes out once, in the order sent, byte for byte. A held insert
    whose timeout passes is refused, nothing of it stored, and the connection serves on."""
    srv = server_factory("shm", "--shm-ring-size", "8mb")
    rc = ReplayClient(srv.host, srv.port, socket_timeout=60)
    assert _shm.is_shm(rc.redis)
    tcp = redis.Redis(host=srv.host, port=srv.port, protocol=2)
    rng = np.random.default_rng(11)
    n, size = 20, 28_224  # 565 KB a batch: the queue holds two, the ring eight
    rc.create("t", 2 * n, queue=True)
    batches = [rng.integers(0, 256, (n, size), dtype=np.uint8) for _ in range(8)]
    got: list[np.ndarray] = []
    with rc.inserter("t", max_in_flight=len(batches), timeout=30.0) as ins:
        for batch in batches:  # two go in, the third is held, five wait behind it
            ins.add(None, batch)
        _wait(lambda: int(tcp.info("clients")["blocked_clients"]) == 1, "a held insert")
        for _ in batches:  # each sample makes room for the next batch
            got.append(rc.sample("t", n, item_shape=(size,)).items.copy())
        assert ins.flush() == len(batches) * n
    assert np.array_equal(np.concatenate(got), np.concatenate(batches))
    assert int(tcp.info("stats")["by_reference_bodies_copied"]) == 0
    rc.add("t", None, batches[0])
    rc.add("t", None, batches[1])  # full again
    with pytest.raises(RateLimited), rc.inserter("t", timeout=0.2) as ins:
        ins.add(None, batches[2])
        ins.flush()
    assert rc.info("t")["size"] == 2 * n
    assert int(tcp.info("stats")["by_reference_bodies_copied"]) == 0
    assert np.array_equal(rc.sample("t", 2 * n, item_shape=(size,)).items,
                          np.concatenate(batches[:2]))


def rc_add_request(n: int, items: np.ndarray) -> list[Any]:
    """REPLAY.ADD t's request as the client lays it out (pyctl.client.add_request)."""
    from pyctl.client import add_request

    request, got = add_request("t", None, items)
    assert got == n
    return request


def test_blocking_and_pubsub_wait_on_the_ring(server_factory: Any) -> None:
    srv = server_factory("shm")
    shm = srv.client(socket_timeout=30)
    tcp = redis.Redis(host=srv.host, port=srv.port, protocol=2)
    t0 = time.monotonic()
    assert shm.blpop(["q"], timeout=0.2) is None  # the server's timeout, not ours
    assert time.monotonic() - t0 >= 0.15
    threading.Timer(0.2, lambda: tcp.rpush("q", "x")).start()
    assert shm.blpop(["q"], timeout=10) == (b"q", b"x")
    ps = _shm.connect(srv.host, srv.port, shm=True).pubsub()
    ps.subscribe("ch")
    assert ps.get_message(timeout=5)["type"] == "subscribe"
    assert ps.get_message(timeout=0.1) is None
    tcp.publish("ch", "hello")
    msg = ps.get_message(timeout=5)
    assert msg is not None and msg["data"] == b"hello"
    ps.close()


def test_a_selector_sees_each_reply(server_factory: Any) -> None:
    """An event loop that registers the connection once (selectors, as a pipelining
    client does) is told about every reply, and only when there is one."""
    import selectors

    srv = server_factory("shm")
    sock = _shm.ShmSocket(srv.shm_path())
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    buf = bytearray(64)
    for i in range(5):
        assert sel.select(0) == []
        sock.sendall(b"PING\r\n")
        assert sel.select(5), f"reply {i} never reported"
        got = sock.recv_into(buf)
        assert bytes(buf[:got]) == b"+PONG\r\n"
    assert sel.select(0) == []
    sel.close()
    sock.close()


def test_auth_and_acls_apply_unchanged(server_factory: Any) -> None:
    srv = server_factory("shm")
    assert srv.client().config_set("requirepass", "s3cret")
    with pytest.raises(redis.AuthenticationError):
        srv.client().ping()
    r = srv.client(password="s3cret")
    assert _shm.is_shm(r) and r.ping()
    r.acl_setuser("ro", enabled=True, passwords=["+pw"], keys=["*"], commands=["+get"])
    ro = _shm.connect(srv.host, srv.port, shm=True, username="ro", password="pw")
    assert ro.get("nothing") is None
    with pytest.raises(redis.exceptions.NoPermissionError):
        ro.set("k", "v")


# --------------------------------------------------------------------------
# faults
# --------------------------------------------------------------------------


def _count_shm_clients(tcp: redis.Redis) -> int:
    return sum(1 for c in tcp.client_list() if c["addr"].endswith(".shm:0"))


def _wait(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_killed_client_frees_its_connection(server_factory: Any) -> None:
    """SIGKILL in the middle of sending a 10 MB value: the server notices the hang-up,
    frees the client, and keeps serving."""
    srv = server_factory("shm", "--shm-ring-size", "64kb")
    tcp = redis.Redis(host=srv.host, port=srv.port, protocol=2)
    code = ("import sys\nfrom pyctl import _shm\n"
            f"r = _shm.connect('{srv.host}', {srv.port}, shm=True)\n"
            "r.ping(); print('up', flush=True)\n"
            "r.set('k', b'x' * (10 << 20) * 100)\n")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None and child.stdout.readline() == b"up\n"
    _wait(lambda: _count_shm_clients(tcp) == 1, "the child's shm client never showed")
    time.sleep(0.3)  # mid-request
    child.send_signal(signal.SIGKILL)
    child.wait()
    _wait(lambda: _count_shm_clients(tcp) == 0, "the killed client was never freed")
    assert tcp.get("k") is None  # its unfinished request did nothing
    assert srv.client().ping()


def test_a_stalled_reader_is_bounded_by_the_output_buffer_limit(server_factory: Any) -> None:
    """A client that asks and never reads: once its ring is full the server buffers the
    replies, and past client-output-buffer-limit closes it, as on TCP."""
    srv = server_factory("shm", "--shm-ring-size", "64kb")
    tcp = redis.Redis(host=srv.host, port=srv.port, protocol=2)
    tcp.config_set("client-output-buffer-limit", "normal 1mb 0 0")
    tcp.set("big", b"b" * (256 << 10))
    sock = _shm.ShmSocket(srv.shm_path())
    sock.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 40)  # 10 MB of replies, unread
    _wait(lambda: _count_shm_clients(tcp) == 0, "the stalled reader was never closed")
    assert "output buffer" in srv.log_tail() or "client-output-buffer-limit" in srv.log_tail()
    assert tcp.ping()
    sock.close()


def test_a_dead_server_ends_a_waiting_call(server_factory: Any) -> None:
    """The client waits for a reply (BLPOP with no timeout) and the server is killed:
    the call ends with a connection error, not a hang."""
    srv = server_factory("shm")
    r = srv.client(socket_timeout=None)
    result: list[BaseException] = []

    def wait() -> None:
        try:
            r.blpop(["never"], timeout=0)
        except BaseException as e:
            result.append(e)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.3)
    srv.kill()
    t.join(10)
    assert not t.is_alive(), "the client still waits on a dead server"
    assert result and isinstance(result[0], redis.ConnectionError), result


def test_a_restarted_server_is_reached_again(server_factory: Any, tmp_path: Path) -> None:
    sock = str(tmp_path / "r.shm")
    first: ServerProcess = server_factory("shm", "--shm-socket", sock)
    rc = ReplayClient(first.host, first.port)
    assert rc.redis.set("a", 1)
    port = first.port
    first.stop()
    again = ServerProcess("shm", tmp_path / "again", ("--shm-socket", sock), port=port)
    try:
        # the pooled connection is dead: redis-py reconnects, and the new run_id is
        # checked over TCP before the new connection is used
        for _ in range(3):
            try:
                assert rc.redis.ping()
                break
            except redis.ConnectionError:
                continue
        assert rc.redis.set("b", 2) and _shm.is_shm(rc.redis)
    finally:
        assert again.stop() == 0


def _hostile_segment(path: str) -> tuple[Any, int, mmap.mmap]:
    """A client of its own (no library): the set-up socket, the segment's memfd and
    its mapping."""
    import socket as so
    import struct

    s = so.socket(so.AF_UNIX, so.SOCK_STREAM)
    s.connect(path)
    hello_size = 4 + 4 + 4 + 4 + 8 + 8 + 48 + 192  # shm_ring.h's ir_shm_hello
    msg, fds, _, _ = so.recv_fds(s, hello_size, 3)
    magic, _version, status = struct.unpack_from("<IIi", msg)
    assert (magic, status) == (0x49525348, 0) and len(fds) == 3, (hex(magic), status)
    req, rep = struct.unpack_from("<QQ", msg, 16)
    m = mmap.mmap(fds[0], 4096 + req + rep)
    for fd in fds[1:]:
        os.close(fd)
    return s, fds[0], m


def test_a_client_breaking_the_ring_rules_loses_only_its_connection(
        server_factory: Any) -> None:
    """A client that moves its request counter past what the ring can hold is closed
    (with a log line); the server and its other clients carry on. The segment is sealed:
    the client cannot shrink it under the server (which would fault the server)."""
    import fcntl

    srv = server_factory("shm")
    other = srv.client()
    assert other.set("k", "v")
    s, memfd, m = _hostile_segment(srv.shm_path())
    assert fcntl.fcntl(memfd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK
    with pytest.raises(PermissionError):
        os.ftruncate(memfd, 4096)
    m[4096:4096 + 6] = b"PING\r\n"
    m[64:72] = (6).to_bytes(8, "little")  # req_head: its own 64-byte line (shm_ring.h)
    _wait(lambda: int.from_bytes(m[192:200], "little") == 7, "no PONG")  # rep_head
    rep = 4096 + int.from_bytes(m[8:16], "little")  # the reply ring follows the request ring
    assert m[rep:rep + 7] == b"+PONG\r\n"
    m[64:72] = (2**62).to_bytes(8, "little")
    s.settimeout(10)
    assert s.recv(1) == b""  # the server closed the set-up socket: we are gone
    assert other.get("k") == b"v"
    _wait(lambda: "request ring head out of range" in srv.log_tail(), "no log line")
    m.close()
    os.close(memfd)
    s.close()


@pytest.mark.skipif("dpdk" not in SERVER_KINDS, reason="needs root and a build with DPDK")
def test_the_dpdk_stack_serves_the_rings_beside_its_port(server_factory: Any,
                                                         tmp_path: Path) -> None:
    """The DPDK appliance's loop serves same-host clients through the rings while its
    network clients go through lwIP: both see the same data."""
    srv = server_factory("dpdk", "--shm-socket", str(tmp_path / "d.shm"))
    # the DPDK server has a password (conftest): no loopback there to trust
    rc = ReplayClient(srv.host, srv.port, protocol=2, password=srv.password)
    assert _shm.is_shm(rc.redis)
    assert rc.redis.info("server")["stack"] == "dpdk"
    net = redis.Redis(host=srv.host, port=srv.port, protocol=2,  # over the veth, lwIP
                      password=srv.password)
    rc.create("t", 100)
    items = np.arange(10 * 1000, dtype=np.uint8).reshape(10, 1000)
    rc.add("t", np.ones(10), items)
    assert net.execute_command("REPLAY.INFO", "t")
    big = b"z" * (20 << 20)
    assert rc.redis.set("big", big) and net.get("big") == big
    assert net.set("n", 1) and rc.redis.get("n") == b"1"
    s = rc.sample("t", 64, item_shape=(1000,), item_dtype=np.uint8)
    assert s.items.shape == (64, 1000)


def test_a_sample_can_be_read_where_the_server_wrote_it(server_factory: Any) -> None:
    """copy=False: the items are a view of the reply ring (no copy on the client), the
    right bytes for the ids drawn, on a ring where the reply wraps; the view outlives
    the connection without faulting; a reply too large for the ring is copied instead."""
    srv = server_factory("shm", "--shm-ring-size", "1mb")
    rc = ReplayClient(srv.host, srv.port)
    rc.create("t", 64)
    items = np.random.default_rng(3).integers(0, 255, (64, 10_000), dtype=np.uint8)
    by_id = dict(zip(np.asarray(rc.add("t", np.ones(64), items)).tolist(), items,
                     strict=True))
    for _ in range(12):  # 12 x 330 KB through a 1 MB ring: some replies wrap
        s = rc.sample("t", 33, item_shape=(10_000,), item_dtype=np.uint8, copy=False)
        assert not s.items.flags.owndata
        for i, row in zip(s.ids.tolist(), s.items, strict=True):
            assert np.array_equal(row, by_id[i])
    kept = s
    rc.redis.connection_pool.disconnect()  # unmaps nothing while the view lives
    assert kept.items.sum() >= 0
    big = rc.sample("t", 200, item_shape=(10_000,), item_dtype=np.uint8, copy=False)
    for i, row in zip(big.ids.tolist(), big.items, strict=True):  # 2 MB: copied
        assert np.array_equal(row, by_id[i])
    tcp = ReplayClient(srv.host, srv.port, shm=False)  # copy=False elsewhere: a copy
    s = tcp.sample("t", 8, item_shape=(10_000,), item_dtype=np.uint8, copy=False)
    assert s.items.flags.owndata


def test_receive_buffers_for_a_gpu_copy_take_the_items(server_factory: Any) -> None:
    """receive_buffer: locked pages on CPU (page-locked through torch where CUDA is),
    filled by the sample as any out= array, over the rings and over TCP."""
    srv = server_factory("shm")
    rc = ReplayClient(srv.host, srv.port)
    rc.create("t", 16)
    items = np.arange(16 * 256, dtype=np.uint8).reshape(16, 256)
    by_id = dict(zip(np.asarray(rc.add("t", np.ones(16), items)).tolist(), items,
                     strict=True))
    buf = ReplayClient.receive_buffer(32, 256)
    locked = [ln for ln in Path("/proc/self/status").read_text().splitlines()
              if ln.startswith("VmLck:")]
    assert locked and int(locked[0].split()[1]) > 0  # mlock took (root: no limit)
    for client in (rc, ReplayClient(srv.host, srv.port, shm=False)):
        s = client.sample("t", 32, item_shape=(256,), item_dtype=np.uint8, out=buf)
        assert s.items is buf
        for i, row in zip(s.ids.tolist(), buf, strict=True):
            assert np.array_equal(row, by_id[i])
    import torch

    tbuf = ReplayClient.receive_buffer(32, 256, torch=True)
    assert isinstance(tbuf, torch.Tensor) and tbuf.device.type == "cpu"
    assert tbuf.is_pinned() == torch.cuda.is_available()
    s = rc.sample("t", 32, item_shape=(256,), item_dtype=np.uint8, out=tbuf)
    for i, row in zip(s.ids.tolist(), tbuf.numpy(), strict=True):
        assert np.array_equal(row, by_id[i])


def test_a_group_client_takes_the_rings_for_its_local_shards(server_factory: Any) -> None:
    """ShardedReplayClient: shared memory for a shard that offers it on this machine, TCP
    for one that does not, with no change in the caller's code."""
    from pyctl.sharded import ShardedReplayClient

    a, b = server_factory("shm"), server_factory("inreplay")
    group = ShardedReplayClient([f"{a.host}:{a.port}", f"{b.host}:{b.port}"])
    assert [_shm.is_shm(s.redis) for s in group.shards] == [True, False]
    for s in group.shards:
        s.create("t", 100)
    group.add("t", np.ones(20), np.zeros((20, 64), dtype=np.uint8))
    assert sum(s.info("t")["size"] for s in group.shards) == 20
