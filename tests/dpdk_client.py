"""Client-side checks for tests/test_dpdk.py, run inside the client namespace.

    ip netns exec NS python tests/dpdk_client.py CHECK HOST PORT [options]

CHECK is one of values, replay, concurrent, uploads, rtt, isn, martians. Each prints one
JSON object on stdout and exits 0 when every assertion held (1 with the failure
otherwise), so the test reads both the verdict and the measurements. The server's
password is $INREPLAY_REQUIREPASS (the DPDK server has one: no loopback there).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import redis

# 64 B .. 13 MB, including the MSS and the 64 KB send-buffer edges
VALUE_SIZES = (64, 1000, 1460, 1461, 4096, 65535, 65536, 65537, 100_000, 1 << 20, 13 << 20)


PASSWORD = os.environ.get("INREPLAY_REQUIREPASS") or None


def connect(host: str, port: int, **kw: Any) -> redis.Redis:
    opts: dict[str, Any] = {"host": host, "port": port, "protocol": 2, "socket_timeout": 60,
                            "single_connection_client": True, "password": PASSWORD}
    opts.update(kw)
    return redis.Redis(**opts)


def check_values(host: str, port: int, _args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    r = connect(host, port)
    assert r.ping() is True, "PING did not answer PONG"
    out["ping"] = True
    rng = os.urandom
    for n in VALUE_SIZES:
        v = rng(n)
        key = f"dpdk:value:{n}"
        t0 = time.perf_counter()
        assert r.set(key, v) is True, f"SET {n} B failed"
        t1 = time.perf_counter()
        got = r.get(key)
        t2 = time.perf_counter()
        assert got is not None, f"GET {n} B returned nil"
        assert len(got) == n, f"GET {n} B returned {len(got)} B"
        assert hashlib.sha256(got).digest() == hashlib.sha256(v).digest(), f"{n} B differ"
        assert r.strlen(key) == n
        out[str(n)] = {"set_ms": round((t1 - t0) * 1e3, 3), "get_ms": round((t2 - t1) * 1e3, 3)}
    # pipelined: many replies in one flush
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"dpdk:p:{i}", i)
        pipe.get(f"dpdk:p:{i}")
    res = pipe.execute()
    assert res[1::2] == [str(i).encode() for i in range(1000)], "pipelined GETs differ"
    r.close()
    return out


def check_replay(host: str, port: int, _args: argparse.Namespace) -> dict[str, Any]:
    r = connect(host, port)
    t = f"dpdk-replay-{os.getpid()}"
    assert r.execute_command("REPLAY.CREATE", t, "CAPACITY", 1024, "ALPHA", 0.6, "BETA", 0.4) \
        in (b"OK", "OK", True)
    items = [os.urandom(256) for _ in range(8)]
    args: list[Any] = []
    for i, it in enumerate(items):
        args += [1.0 + i, it]
    ids = r.execute_command("REPLAY.ADD", t, *args)
    assert list(ids) == list(range(8)), f"REPLAY.ADD ids {ids!r}"
    n = 16
    rep = r.execute_command("REPLAY.SAMPLE", t, n)
    sids = struct.unpack(f"<{n}q", rep[0])
    weights = struct.unpack(f"<{n}f", rep[1])
    assert len(rep[2]) == n
    for sid, item in zip(sids, rep[2], strict=True):
        assert 0 <= sid < 8 and item == items[sid], "sampled item does not match its id"
    assert all(0.0 < w <= 1.0 + 1e-6 for w in weights), f"weights {weights}"
    upd_ids = struct.pack("<8q", *range(8))
    upd_pr = struct.pack("<8f", *([0.5] * 8))
    applied = r.execute_command("REPLAY.UPDATE", t, upd_ids, upd_pr)
    assert applied == 8, f"REPLAY.UPDATE applied {applied}"
    rep = r.execute_command("REPLAY.SAMPLE", t, n)
    weights = struct.unpack(f"<{n}f", rep[1])
    assert all(abs(w - 1.0) < 1e-5 for w in weights), "equal priorities give weight 1"
    r.execute_command("REPLAY.DROP", t)
    r.close()
    return {"sampled": n, "updated": 8}


def check_concurrent(host: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    conns, reqs = args.conns, args.reqs
    barrier = threading.Barrier(conns + 1, timeout=120)
    errors: list[str] = []
    done = [0] * conns

    def worker(k: int) -> None:
        try:
            r = connect(host, port, socket_timeout=120)
            r.ping()
            barrier.wait()  # every connection is open before anyone works
            for i in range(reqs // 2):
                key = f"dpdk:c:{k}:{i}"
                val = f"{k}:{i}:".encode() + bytes(64)
                assert r.set(key, val) is True
                assert r.get(key) == val, f"conn {k} req {i}: wrong value"
                done[k] += 2
            r.close()
        except Exception as e:
            errors.append(f"conn {k}: {e!r}")
            try:
                barrier.abort()
            except threading.BrokenBarrierError:
                pass

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(conns)]
    for th in threads:
        th.start()
    t0 = time.perf_counter()
    opened = 0
    try:
        barrier.wait()
        info = connect(host, port).info("clients")
        opened = int(info["connected_clients"])
    except threading.BrokenBarrierError:
        pass
    for th in threads:
        th.join(300)
    elapsed = time.perf_counter() - t0
    assert not errors, "; ".join(errors[:5])
    assert sum(done) == conns * (reqs // 2) * 2, f"{sum(done)} requests done"
    assert opened >= conns, f"only {opened} clients connected at once"
    return {"connections": conns, "requests": sum(done), "connected_at_once": opened,
            "seconds": round(elapsed, 3)}


def tcp_counters() -> dict[str, int]:
    """This namespace's kernel TCP counters (the client side of the veth)."""
    with open("/proc/net/snmp") as f:
        lines = [line.split() for line in f if line.startswith("Tcp:")]
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:], strict=True)}


def check_uploads(host: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """Many clients uploading at once: no segment may be lost on the way in
    (the af_packet ring must hold everyone's window; lwIP 2.1 recovers from a
    loss only after a coarse RTO)."""
    conns, size = args.conns, args.size
    value = os.urandom(size)
    digest = hashlib.sha256(value).digest()
    errors: list[str] = []

    def worker(k: int) -> None:
        try:
            r = connect(host, port)
            for _ in range(3):
                assert r.set(f"dpdk:u:{k}", value) is True
            got = r.get(f"dpdk:u:{k}")
            assert got is not None and hashlib.sha256(got).digest() == digest, f"{k}: differs"
            r.delete(f"dpdk:u:{k}")
            r.close()
        except Exception as e:
            errors.append(f"conn {k}: {e!r}")

    before = tcp_counters()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(conns)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    elapsed = time.perf_counter() - t0
    after = tcp_counters()
    assert not errors, "; ".join(errors[:5])
    out_segs = after["OutSegs"] - before["OutSegs"]
    retrans = after["RetransSegs"] - before["RetransSegs"]
    # Every byte was checked above. The share of segments retransmitted (the
    # af_packet ring and mbuf pool can overflow when 100 clients burst on a loaded
    # machine) is a figure for the fault benchmark, not something that holds anywhere.
    return {"connections": conns, "bytes": conns * 3 * size, "seconds": round(elapsed, 3),
            "out_segs": out_segs, "retrans_segs": retrans}


def check_rtt(host: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """Round trip of GET of a 64 B value on one connection, raw socket, in us."""
    r = connect(host, port)
    r.set("dpdk:rtt", b"x" * 64)
    r.close()
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if PASSWORD:
        auth = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(PASSWORD), PASSWORD.encode())
        s.sendall(auth)
        assert s.recv(5) == b"+OK\r\n", "AUTH failed"
    req = b"*2\r\n$3\r\nGET\r\n$8\r\ndpdk:rtt\r\n"
    want = b"$64\r\n" + b"x" * 64 + b"\r\n"
    samples = []
    for i in range(args.n + 200):
        t0 = time.perf_counter_ns()
        s.sendall(req)
        buf = b""
        while len(buf) < len(want):
            chunk = s.recv(4096)
            assert chunk, "connection closed"
            buf += chunk
        t1 = time.perf_counter_ns()
        assert buf == want, f"bad reply {buf[:80]!r}"
        if i >= 200:  # warm-up
            samples.append((t1 - t0) / 1000)
    s.close()
    samples.sort()
    return {"n": len(samples), "p50_us": round(statistics.median(samples), 1),
            "p90_us": round(samples[int(len(samples) * 0.9)], 1),
            "p99_us": round(samples[int(len(samples) * 0.99)], 1),
            "min_us": round(samples[0], 1)}


def _iface_to(host: str) -> str:
    """This namespace's interface toward host (the client end of the veth)."""
    out = subprocess.run(["ip", "-o", "route", "get", host], capture_output=True, text=True,
                         check=True).stdout.split()
    return out[out.index("dev") + 1]


def _sniffer(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.settimeout(0.3)
    return s


def _tcp(frame: bytes) -> tuple[str, str, int, int, int, int] | None:
    """(src, dst, sport, dport, seq, flags) of an IPv4 TCP frame, else None."""
    if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return None
    ihl = (frame[14] & 0x0F) * 4
    t = 14 + ihl
    sport, dport, seq = struct.unpack("!HHI", frame[t:t + 8])
    return (socket.inet_ntoa(frame[26:30]), socket.inet_ntoa(frame[30:34]), sport, dport, seq,
            frame[t + 13])


def check_isn(host: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """The server's initial sequence numbers (its SYN-ACKs' seq) for args.n connections
    from as many source ports, read off the wire with an AF_PACKET socket."""
    sniff = _sniffer(_iface_to(host))
    sports = []
    for _ in range(args.n):
        c = socket.create_connection((host, port), timeout=10)
        sports.append(c.getsockname()[1])
        c.close()
    isn: dict[int, int] = {}
    deadline = time.monotonic() + 10
    while len(isn) < len(sports) and time.monotonic() < deadline:
        try:
            f = sniff.recv(65535)
        except TimeoutError:
            continue
        t = _tcp(f)
        if t and t[0] == host and t[2] == port and t[5] & 0x12 == 0x12 and t[3] in sports:
            isn[t[3]] = t[4]
    sniff.close()
    assert len(isn) == len(sports), f"saw {len(isn)} of {len(sports)} SYN-ACKs"
    return {"isns": [isn[p] for p in sports]}


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _syn(src_mac: bytes, dst_mac: bytes, src: str, dst: str, sport: int, dport: int) -> bytes:
    """An Ethernet frame with a TCP SYN, checksums right: lwIP would take it."""
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 12345, 0, 5 << 4, 0x02, 65535, 0, 0)
    tcp = tcp[:16] + struct.pack("!H", _csum(s + d + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)) \
        + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0, s, d)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + tcp


def _arp_request(src_mac: bytes, sender_ip: str, target_ip: str) -> bytes:
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, src_mac,
                       socket.inet_aton(sender_ip), b"\0" * 6, socket.inet_aton(target_ip))
    return b"\xff" * 6 + src_mac + b"\x08\x06" + body


def check_martians(host: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """Frames no wire may carry, sent to the server: TCP SYNs from 127.0.0.1 and from
    the server's own address, and an ARP request claiming its address. Reports how
    many were sent and whether the server answered any of them (it must not)."""
    c = connect(host, port)  # the neighbour entry: the server's MAC
    c.ping()
    c.close()
    iface = _iface_to(host)
    neigh = subprocess.run(["ip", "neigh", "show", host, "dev", iface], capture_output=True,
                           text=True, check=True).stdout.split()
    dst_mac = bytes.fromhex(neigh[neigh.index("lladdr") + 1].replace(":", ""))
    with open(f"/sys/class/net/{iface}/address") as f:
        src_mac = bytes.fromhex(f.read().strip().replace(":", ""))
    frames = [_syn(src_mac, dst_mac, "127.0.0.1", host, 40000 + i, port) for i in range(3)]
    frames += [_syn(src_mac, dst_mac, host, host, 41000 + i, port) for i in range(3)]
    frames += [_arp_request(src_mac, host, host)]
    sniff = _sniffer(iface)
    for f in frames:
        sniff.send(f)
    answered = []
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        try:
            f = sniff.recv(65535)
        except TimeoutError:
            continue
        t = _tcp(f)
        if f[6:12] == dst_mac and t and t[2] == port and t[1] in ("127.0.0.1", host):
            answered.append(f"{t[0]}:{t[2]} -> {t[1]}:{t[3]} flags {t[5]:#x}")
    sniff.close()
    assert not answered, f"the server answered martians: {answered}"
    return {"sent": len(frames)}


ETH_P_ALL = 0x0003

CHECKS = {"values": check_values, "replay": check_replay, "concurrent": check_concurrent,
          "uploads": check_uploads, "rtt": check_rtt, "isn": check_isn,
          "martians": check_martians}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("check", choices=sorted(CHECKS))
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--conns", type=int, default=200)
    ap.add_argument("--reqs", type=int, default=100)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--size", type=int, default=1 << 20)
    args = ap.parse_args()
    try:
        out = CHECKS[args.check](args.host, args.port, args)
    except (AssertionError, redis.RedisError, OSError) as e:
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}), flush=True)
        return 1
    out["ok"] = True
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
