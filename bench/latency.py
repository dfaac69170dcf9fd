"""Latency of stock Redis and inreplay (kernel and DPDK stacks) over veth paths.

Systems, all reached from the root namespace across a veth (`pyctl netns`; the
script makes its own namespaces and removes them at the end):

    redis        stock redis-server in the appliance namespace, kernel TCP stack
    kernel       inreplay on the kernel stack, same namespace and address
    kernel-poll  the same, started with --busy-poll (spins on epoll, never sleeps)
    dpdk         inreplay on DPDK + lwIP, af_packet attached to the same veth
    redis-module stock redis-server with inreplay's REPLAY.* module loaded
                 (`pyctl module-path`), kernel TCP stack: the same engine hosted
                 by Redis (not in the default set; make bench runs it beside
                 kernel)

Paths (--paths), each at every MTU of --mtu (default 1500 and 9000):

    shared          one veth with offloads off on both ends, all four systems
                    (DPDK's af_packet needs them off)
    kernel-default  a veth of their own with the kernel's default offloads
                    (TSO/GSO/GRO, checksum): redis, kernel and kernel-poll only,
                    what a user of the kernel stack gets

Workloads, one connection, one request in flight (the learner's view):

    PING
    GET, SET             64 B, 4 KB, 64 KB, 1 MB, 13 MB (a Dueling network's parameters)
    SAMPLE n x item      in-network REPLAY.SAMPLE of n items (32, 512) of 128 B and
                         28 KB (one 84x84x4 Atari state), ids and weights decoded
    SAMPLE n x item PACKED
                         the same with PACKED (n = 512): one bulk string of n int64
                         ids, n float32 weights and the n items, decoded with
                         np.frombuffer; a server that refuses PACKED is recorded
                         under "errors" and the run goes on
    BASELINE n x item    the seed's learner-side baseline: a local sum tree
                         (pyctl.sumtree.PrioritizedSampler) draws n slots, then one MGET
                         fetches those items; timed end to end as the learner sees it
    UPDATE n             REPLAY.UPDATE of n priorities (the ids of a sample)
    local update n       the baseline's priority update: the learner's own tree, no network

and the same requests on 16 connections, each with several requests in flight
(requests above 4 MB are left out of that mode: 16 of them in flight do not fit).

The client is this process: a raw socket per connection, requests encoded
once, replies parsed by hiredis. Its own cost (the same loop against a
socketpair whose reply is already waiting) is measured and reported. With two
or more CPUs the client runs on --client-core and every server on
--server-core (the DPDK server busy-polls it), so each system gets the same split.

    python bench/latency.py [--quick] [--json FILE] [--plots DIR] [--delay USEC]
                            [--mtu 1500,9000] [--paths shared,kernel-default]

Needs root for the namespace; --loopback runs the kernel-stack systems on
127.0.0.1 instead (for tests and machines without root); --loopback --unix then
also runs them over a Unix domain socket (unixsocket), path "unix", in the same
run: what a learner on the replay box saves by leaving loopback TCP. `--delay USEC` adds
netem delay on both ends of the veth (each direction, so RTT grows by 2 x USEC).
A system that cannot start or fails midway is recorded under "errors" in the
JSON (and reported as not measured); the exit status is 1 only if no system
produced numbers, 2 if the set-up failed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import ipaddress
import itertools
import json
import os
import platform
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import hiredis
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl import _native, netns  # noqa: E402
from pyctl.proc import die_with_parent as _die_with_parent  # noqa: E402
from pyctl.proc import free_port, resp_command  # noqa: E402
from pyctl.sumtree import PrioritizedSampler  # noqa: E402

KB = 1024
MB = 1024 * KB
ATARI_STATE = 84 * 84 * 4  # bytes of one stacked 84x84x4 uint8 observation
KV_SIZES = (64, 4 * KB, 64 * KB, MB, 13 * MB)
BATCHES = (32, 512)
ITEM_SIZES = (128, ATARI_STATE)
UPDATE_BATCH = 512
SYSTEMS = ("redis", "kernel", "kernel-poll", "dpdk", "redis-module")
KERNEL_STACK = ("redis", "kernel", "kernel-poll", "redis-module")
OPT_IN = ("redis-module",)  # asked for by --systems only
"""The systems on the kernel's TCP stack (the only ones a kernel-default path serves)."""
BUSY_POLLING = ("kernel-poll", "dpdk")
"""Servers that spin on their core whether or not there is work."""
PATHS = ("shared", "kernel-default")
MTUS = (1500, 9000)
PACKED_BATCHES = (512,)
TABLE_ITEMS = {128: 100_000, ATARI_STATE: 4_000}
"""Items per replay table by item size (a full run; --quick uses a tenth, 1,000 at least)."""
DPDK_HUGEPAGES = 256  # 2 MB pages: jumbo-frame mbufs need more than the default 128
ALPHA, BETA = 0.6, 0.4
PIPELINE_MAX_PAYLOAD = 4 * MB  # larger requests are not run 16-wide
PIPELINE_WINDOW = MB  # bytes in flight per connection, at most 16 requests
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


class BenchError(RuntimeError):
    """A set-up step failed; the message says what and why."""


class StartError(BenchError):
    """A system under test did not start (the same reason holds at every size)."""


# --------------------------------------------------------------------------
# sizes and statistics
# --------------------------------------------------------------------------


# What `make bench` itself rewrites before this benchmark runs (the README's
# generated blocks and plots): changes there do not make the measured code "+dirty".
BENCH_OUTPUTS = ("README.md", "docs")


def commit_label(root: Path = ROOT) -> str:
    """HEAD's short hash, "+dirty" when code differs from it."""
    r = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                       capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                            "--untracked-files=no", "--", "."]
                           + [f":(exclude){p}" for p in BENCH_OUTPUTS],
                           capture_output=True, text=True, check=False).stdout.strip()
    return r.stdout.strip() + ("+dirty" if dirty else "")


def human(size: int) -> str:
    """64 -> '64 B', 4096 -> '4 KB', 28224 -> '28 KB', 13631488 -> '13 MB'."""
    for unit, scale in (("MB", MB), ("KB", KB)):
        if size >= scale:
            return f"{size / scale:.0f} {unit}"
    return f"{size} B"


def summarize(ns: list[int], payload: int) -> dict[str, float | int]:
    """Latency percentiles (µs) and the sequential rate of one connection."""
    us = np.asarray(ns, dtype=np.float64) / 1e3
    p50, p90, p99 = np.percentile(us, [50, 90, 99])
    mean = float(us.mean())
    rps = 1e6 / mean
    return {"n": len(ns), "p50_us": float(p50), "p90_us": float(p90), "p99_us": float(p99),
            "mean_us": mean, "rps": rps, "mbps": rps * payload / 1e6}


# --------------------------------------------------------------------------
# RESP on a raw socket
# --------------------------------------------------------------------------


def bulk(arg: bytes | str | int) -> bytes:
    b = arg if isinstance(arg, bytes) else str(arg).encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


encode = resp_command  # one request as a RESP multibulk


class ServerReplyError(RuntimeError):
    """The server answered with an error reply."""


class Conn:
    """One connection: sendall the encoded request, parse the reply with hiredis."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = hiredis.Reader()
        self.buf = bytearray(MB)
        self.whole = memoryview(bytearray(MB))

    @classmethod
    def connect(cls, host: str, port: int, timeout: float = 60.0,
                unix_path: str = "", shm_path: str = "") -> Conn:
        """TCP to host:port, or the Unix socket unix_path, or the shared-memory rings
        set up at shm_path (pyctl._shm.ShmSocket, which reads and writes as a socket)."""
        if shm_path:
            from pyctl import _shm

            shm = _shm.ShmSocket(shm_path)
            shm.settimeout(timeout)
            return cls(shm)  # type: ignore[arg-type]
        if unix_path:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(unix_path)
            return cls(sock)
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def close(self) -> None:
        self.sock.close()

    def feed_once(self) -> None:
        n = self.sock.recv_into(self.buf)
        if n == 0:
            raise ConnectionError("the server closed the connection")
        self.reader.feed(self.buf, 0, n)

    def read(self) -> Any:
        while (reply := self.reader.gets()) is False:
            self.feed_once()
        if isinstance(reply, hiredis.ReplyError):
            raise ServerReplyError(str(reply))
        return reply

    def call(self, request: bytes) -> Any:
        self.sock.sendall(request)
        return self.read()

    def call_sized(self, request: bytes, size: int) -> Any:
        """call() for a reply of known length: read it whole, then parse it once.

        hiredis grows its input buffer 1 MB at a time, copying it each time, so
        feeding it a 13 MB reply piece by piece costs the client milliseconds.
        """
        self.sock.sendall(request)
        if size > len(self.whole):
            self.whole = memoryview(bytearray(size))
        view, got = self.whole[:size], 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("the server closed the connection")
            got += n
        self.reader.feed(view)
        reply = self.reader.gets()
        if reply is False:
            raise ConnectionError(f"reply longer than the expected {size} bytes")
        if isinstance(reply, hiredis.ReplyError):
            raise ServerReplyError(str(reply))
        return reply

    def call_raw(self, request: bytes) -> bytes:
        """The exact bytes of the reply (to replay them when measuring the client)."""
        self.sock.sendall(request)
        chunks = []
        while self.reader.gets() is False:
            n = self.sock.recv_into(self.buf)
            if n == 0:
                raise ConnectionError("the server closed the connection")
            chunks.append(bytes(self.buf[:n]))
            self.reader.feed(self.buf, 0, n)
        return b"".join(chunks)


def keep_big_buffers() -> None:
    """Let glibc reuse freed multi-MB buffers instead of unmapping them.

    Otherwise every 13 MB reply is parsed into freshly mapped pages and the
    client spends ~20 ms in page faults per request (M_MMAP_THRESHOLD tops out
    at 32 MB on 64-bit glibc).
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 32 * MB)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 512 * MB)  # M_TRIM_THRESHOLD


def ping(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


# --------------------------------------------------------------------------
# the network: a namespace with a veth, or loopback
# --------------------------------------------------------------------------


def _sh(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False)


def free_subnet() -> str:
    """A /24 under 10.200.0.0/16 that no local address or route overlaps."""
    used = _sh("ip", "-4", "route", "show", "table", "all").stdout
    used += _sh("ip", "-4", "-o", "addr").stdout
    for third in range(256):
        net = ipaddress.ip_network(f"10.200.{third}.0/24")
        if f"10.200.{third}." not in used:
            return str(net)
    raise BenchError("no free /24 under 10.200.0.0/16 for the benchmark's veth")


def add_netem(topo: netns.Topology, delay_us: int) -> None:
    """netem delay on both veth ends' egress, or a BenchError saying why not."""
    if shutil.which("modprobe"):
        _sh("modprobe", "sch_netem")
    for pre, dev in (([], topo.peer), (["ip", "netns", "exec", topo.netns], topo.iface)):
        r = _sh(*pre, "tc", "qdisc", "replace", "dev", dev, "root", "netem",
                "delay", f"{delay_us}us")
        if r.returncode != 0:
            raise BenchError(f"--delay {delay_us}: netem is not available on this kernel "
                             f"(tc: {r.stderr.strip() or r.stdout.strip()}); load sch_netem "
                             "(modprobe sch_netem) or run without --delay")


@dataclass
class Network:
    """Where servers listen and clients connect from."""

    loopback: bool
    topo: netns.Topology | None = None
    delay_us: int = 0
    unix: bool = False
    """loopback's servers also listen on a Unix socket, and clients use it."""
    shm: bool = False
    """loopback's inreplay servers also serve the shared-memory rings, and clients use them."""

    @property
    def kernel_host(self) -> str:
        return self.topo.kernel_ip if self.topo else "127.0.0.1"

    @property
    def path(self) -> str:
        """loopback, unix (a Unix socket on this box), shared (offloads off: every
        system) or kernel-default (offloads on)."""
        if self.topo is None:
            return "shm" if self.shm else "unix" if self.unix else "loopback"
        return "kernel-default" if self.topo.offloads else "shared"

    @property
    def mtu(self) -> int | None:
        return self.topo.mtu if self.topo else None

    def serves(self, system: str) -> bool:
        """Whether `system` runs on this path (DPDK's af_packet needs offloads off)."""
        if self.shm:  # the rings are inreplay's own
            return system in ("kernel", "kernel-poll")
        return system in KERNEL_STACK or self.path == "shared"

    @property
    def subnet(self) -> str:
        if self.topo is None:
            return "127.0.0.0/8"
        return str(ipaddress.ip_network(f"{self.topo.client_ip}/{self.topo.prefix}",
                                         strict=False))

    def describe(self) -> dict[str, Any]:
        if self.topo is None:
            return {"path": self.path, "name": self.path}
        return {"path": "veth", "name": self.path, "delay_us": self.delay_us,
                **self.topo.to_json()}


@contextlib.contextmanager
def network(loopback: bool, delay_us: int = 0, mtu: int = netns.DEFAULT_MTU,
            offloads: bool = False, unix: bool = False, shm: bool = False) -> Iterator[Network]:
    """A fresh namespace + veth (removed on the way out), or loopback.

    mtu: both veth ends'; offloads: keep the kernel's default offloads (a
    kernel-default path, for kernel-stack servers only)."""
    if loopback:
        if delay_us:
            raise BenchError("--delay needs the veth: drop --loopback")
        yield Network(True, unix=unix, shm=shm)
        return
    if os.geteuid() != 0:
        raise BenchError("the veth topology needs root (or run with --loopback)")
    name = f"irb{os.getpid() % 1_000_000}{'k' if offloads else 's'}"
    if name in netns.namespaces():
        raise BenchError(f"namespace {name} exists (left by a killed run?): "
                         f"python -m pyctl netns down --name {name}")
    topo = netns.up(name, free_subnet(), mtu=mtu, offloads=offloads)
    try:
        if delay_us:
            add_netem(topo, delay_us)
        yield Network(False, topo, delay_us)
    finally:
        netns.down(name)


# --------------------------------------------------------------------------
# servers
# --------------------------------------------------------------------------


def dpdk_built() -> bool:
    return _native.has_stack("dpdk")


@dataclass
class Server:
    """One server process, started in the foreground and stopped with SIGTERM."""

    system: str
    argv: list[str]
    host: str
    port: int
    log: Path
    env: dict[str, str]
    file_prefix: str = ""
    proc: subprocess.Popen[bytes] | None = None
    unix_path: str = ""
    """the Unix socket clients use instead of host:port (the unix path), or ""."""
    shm_path: str = ""
    """the shm socket clients set up the rings at instead (the shm path), or ""."""

    def start(self) -> Server:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env,
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT
        while not ping(self.host, self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log_tail()
                last = next((x.strip() for x in reversed(tail.splitlines()) if x.strip()),
                            "no output")
                raise StartError(f"{self.system} did not start: {last} "
                                 f"({shlex.join(self.argv)}):\n{tail}")
            time.sleep(0.05)
        return self

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process (all its threads)."""
        assert self.proc is not None
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.file_prefix:  # EAL leaves its runtime directory behind
            shutil.rmtree(Path("/var/run/dpdk") / self.file_prefix, ignore_errors=True)
        self.proc = None


@dataclass
class Pinning:
    """The server core and the client core (None: no pinning, one CPU)."""

    server: int | None
    client: int | None

    @classmethod
    def choose(cls, server: int, client: int) -> Pinning:
        cpus = os.sched_getaffinity(0)
        if len(cpus) < 2 or server not in cpus or client not in cpus:
            return cls(None, None)
        return cls(server, client)

    def pin_client(self) -> None:
        if self.client is not None:
            os.sched_setaffinity(0, {self.client})

    def prefix(self) -> list[str]:
        return ["taskset", "-c", str(self.server)] if self.server is not None else []


DPDK_PMDS = ("af_packet", "af_xdp")
"""Virtual NIC drivers the dpdk system can attach to the veth with."""


def make_server(system: str, net: Network, pin: Pinning, workdir: Path, port: int,
                busy_poll: bool = True, pmd: str = "af_packet",
                shm_socket: str = "none") -> Server:
    """The argv of each system, on the same core, reached over the same path.

    busy_poll: the DPDK server spins on its core even when idle (by default it
    naps after a millisecond without traffic). kernel-poll is the kernel stack
    with --busy-poll (it spins on epoll instead of sleeping in it).
    shm_socket: inreplay's --shm-socket. "none" by default: pyctl start serves the
    same-host shared-memory rings unless told not to, and a client on this machine
    takes them, so a benchmark of the TCP path must start its servers without them
    (a bench of the shm path passes a path or "auto").
    """
    shm_args = ["--shm-socket", shm_socket]
    env = dict(os.environ, INREPLAY_RUN_DIR=str(workdir / "run"),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    in_ns = ["ip", "netns", "exec", net.topo.netns] if net.topo else []
    log = workdir / f"{system}-{port}.log"
    host = net.kernel_host
    unix_path = str(workdir / f"{system}-{port}.sock") if net.unix else ""
    if net.shm:
        shm_socket = str(workdir / f"{system}-{port}.shm")
        shm_args = ["--shm-socket", shm_socket]
    unix_args = ["--unixsocket", unix_path] if unix_path else []
    if system in ("redis", "redis-module"):
        argv = [*in_ns, *pin.prefix(), "redis-server", "--bind", host, "--port", str(port),
                "--save", "", "--appendonly", "no", "--protected-mode", "no",
                "--dir", str(workdir), *unix_args]
        if system == "redis-module":
            from pyctl import _native

            try:
                argv += ["--loadmodule", str(_native.module_path())]
            except _native.NativeLibraryMissingError as e:
                raise BenchError(f"redis-module: {e}") from None
        return Server(system, argv, host, port, log, env, unix_path=unix_path)
    if system in ("kernel", "kernel-poll"):
        argv = [*in_ns, *pin.prefix(), sys.executable, "-m", "pyctl", "start",
                "--listen", f"{host}:{port}", "--client-subnet", net.subnet, *shm_args,
                *(["--busy-poll"] if system == "kernel-poll" else []), *unix_args]
        return Server(system, argv, host, port, log, env, unix_path=unix_path,
                      shm_path=shm_socket if net.shm else "")
    if system == "dpdk":
        if net.topo is None:
            raise BenchError("dpdk needs the veth topology (not --loopback)")
        if not net.serves(system):
            raise BenchError(f"dpdk cannot run on the {net.path} path (af_packet needs the "
                             "veth's offloads off)")
        if not dpdk_built():
            raise BenchError("dpdk: build/ has no DPDK dataplane (meson found no libdpdk)")
        t = net.topo
        if pmd not in DPDK_PMDS:
            raise BenchError(f"--dpdk-pmd {pmd}: choose from {', '.join(DPDK_PMDS)}")
        vdev = f"net_{pmd}0,iface={t.iface}"
        if net.delay_us and pmd == "af_packet":  # it bypasses the qdisc (and netem) by default
            vdev += ",qdisc_bypass=0"
        prefix = f"{t.netns}-{port}"
        core = str(pin.server if pin.server is not None else 0)
        argv = [sys.executable, "-m", "pyctl", "start", "--stack", "dpdk", "--netns", t.netns,
                "--cores", core, "--ip", f"{t.appliance_ip}/{t.prefix}", "--vdev", vdev,
                "--listen-port", str(port), "--mtu", str(t.mtu),
                "--hugepages", str(DPDK_HUGEPAGES), "--file-prefix", prefix, *shm_args,
                # the clients' subnet, trusted as the kernel rows trust it: no AUTH in
                # one system's numbers only (a DPDK port trusts no one by default)
                "--client-subnet", net.subnet,
                *(["--busy-poll"] if busy_poll else [])]
        return Server(system, argv, t.appliance_ip, port, log, env, file_prefix=prefix)
    raise BenchError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")


def default_systems() -> list[str]:
    have_dpdk = os.geteuid() == 0 and dpdk_built()
    return [s for s in SYSTEMS if (s != "dpdk" or have_dpdk) and s not in OPT_IN]


@contextlib.contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """SIGTERM unwinds like ^C, so every finally (servers, namespace) runs."""
    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def machine() -> dict[str, Any]:
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "kernel": platform.release(), "loadavg_start": os.getloadavg()[0]}


# --------------------------------------------------------------------------
# data the sampling workloads read
# --------------------------------------------------------------------------


@dataclass
class Table:
    """One replay table (in-network) and its learner-side twin (local tree + keys)."""

    item_size: int
    items: int
    priorities: np.ndarray
    pool: list[bytes]
    sampler: PrioritizedSampler
    keys: list[bytes]
    """MGET arguments, RESP-encoded, by slot."""

    @property
    def name(self) -> str:
        return f"t{self.item_size}"

    def item(self, slot: int) -> bytes:
        return self.pool[slot % len(self.pool)]


def make_table(item_size: int, items: int, seed: int) -> Table:
    rng = np.random.default_rng(seed)
    priorities = rng.uniform(0.1, 1.1, items)  # raw |TD errors|
    pool = [rng.bytes(item_size) for _ in range(64)]
    sampler = PrioritizedSampler(items, alpha=ALPHA, seed=seed)
    sampler.update(np.arange(items, dtype=np.uint64), priorities)
    keys = [bulk(f"b{item_size}:{slot}") for slot in range(items)]
    return Table(item_size, items, priorities, pool, sampler, keys)


def load(conn: Conn, system: str, tables: list[Table], sizes: list[int],
         baseline_keys: bool = True) -> None:
    """The values GET reads, the baseline's items as keys and, on inreplay, the tables."""
    for size in sizes:
        conn.call(encode("SET", f"kv:{size}", b"v" * size))
    chunk_bytes = 4 * MB
    for t in tables:
        per = max(1, chunk_bytes // t.item_size)
        for lo in range(0, t.items if baseline_keys else 0, per):
            slots = range(lo, min(t.items, lo + per))
            parts = [b"*%d\r\n" % (1 + 2 * len(slots)), bulk("MSET")]
            for s in slots:
                parts += [t.keys[s], bulk(t.item(s))]
            conn.call(b"".join(parts))
        if system == "redis":
            continue
        conn.call(encode("REPLAY.CREATE", t.name, "CAPACITY", t.items, "ALPHA", repr(ALPHA),
                         "BETA", repr(BETA)))
        for lo in range(0, t.items, per):
            slots = range(lo, min(t.items, lo + per))
            parts = [b"*%d\r\n" % (2 + 2 * len(slots)), bulk("REPLAY.ADD"), bulk(t.name)]
            for s in slots:
                parts += [bulk(repr(float(t.priorities[s]))), bulk(t.item(s))]
            ids = conn.call(b"".join(parts))
            if ids[0] != lo:
                raise BenchError(f"{system}: REPLAY.ADD gave id {ids[0]} for slot {lo}")


# --------------------------------------------------------------------------
# workloads
# --------------------------------------------------------------------------


def _nothing(reply: Any) -> None:
    return None


@dataclass
class Workload:
    """One kind of request: how to make the next one and what the learner does with the reply."""

    name: str
    kind: str
    """ping, get, set, sample, sample-packed, baseline or update"""
    size: int
    """value or item bytes (0 for PING and UPDATE)"""
    batch: int
    request: Callable[[], bytes]
    finish: Callable[[Any], None] = _nothing
    check: Callable[[Any], None] = _nothing

    @property
    def payload(self) -> int:
        """Bytes of values or items one request moves (for MB/s)."""
        return self.size * self.batch


def _expect(what: str, ok: bool) -> None:
    if not ok:
        raise BenchError(f"unexpected reply to {what}")


def kv_workloads(sizes: list[int]) -> list[Workload]:
    out = [Workload("PING", "ping", 0, 1, lambda: b"*1\r\n$4\r\nPING\r\n",
                    check=lambda r: _expect("PING", r == b"PONG"))]
    for size in sizes:
        get = encode("GET", f"kv:{size}")
        put = encode("SET", f"kv:set:{size}", b"w" * size)
        out.append(Workload(f"GET {human(size)}", "get", size, 1, lambda r=get: r,
                            check=lambda v, n=size: _expect("GET", len(v) == n)))
        out.append(Workload(f"SET {human(size)}", "set", size, 1, lambda r=put: r,
                            check=lambda v: _expect("SET", v == b"OK")))
    return out


def _decode_sample(reply: list[Any]) -> None:
    """What the learner does with a REPLAY.SAMPLE reply: ids and weights as arrays."""
    np.frombuffer(reply[0], dtype="<i8")
    np.frombuffer(reply[1], dtype="<f4")


def sample_workload(t: Table, n: int) -> Workload:
    req = encode("REPLAY.SAMPLE", t.name, n)

    def check(r: list[Any]) -> None:
        _expect("REPLAY.SAMPLE", len(r[0]) == 8 * n and len(r[2]) == n
                and all(len(i) == t.item_size for i in r[2]))

    return Workload(f"SAMPLE {n} × {human(t.item_size)}", "sample", t.item_size, n,
                    lambda: req, _decode_sample, check)


def packed_reply_size(n: int, item_size: int) -> int:
    """Bytes of a PACKED reply's one bulk: n int64 ids, n float32 weights, n items."""
    return 12 * n + n * item_size


def _decode_packed(n: int, item_size: int) -> Callable[[Any], Any]:
    def decode(blob: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = np.frombuffer(blob, dtype="<i8", count=n)
        weights = np.frombuffer(blob, dtype="<f4", count=n, offset=8 * n)
        items = np.frombuffer(blob, dtype=np.uint8, offset=12 * n).reshape(n, item_size)
        return ids, weights, items

    return decode


def sample_packed_workload(t: Table, n: int) -> Workload:
    """REPLAY.SAMPLE ... PACKED: one bulk the learner views as three arrays, no copies."""
    req = encode("REPLAY.SAMPLE", t.name, n, "PACKED")
    decode = _decode_packed(n, t.item_size)

    def check(r: Any) -> None:
        _expect("REPLAY.SAMPLE PACKED", isinstance(r, bytes)
                and len(r) == packed_reply_size(n, t.item_size))
        ids, weights, _items = decode(r)
        _expect("REPLAY.SAMPLE PACKED (ids)", bool(((ids >= 0) & (ids < t.items)).all()))
        _expect("REPLAY.SAMPLE PACKED (weights)",
                bool((np.isfinite(weights) & (weights > 0)).all()))

    return Workload(f"SAMPLE {n} × {human(t.item_size)} PACKED", "sample-packed", t.item_size,
                    n, lambda: req, decode, check)


def baseline_workload(t: Table, n: int) -> Workload:
    """The learner samples its own tree, then fetches the n items with one MGET."""
    head = b"*%d\r\n$4\r\nMGET\r\n" % (n + 1)
    keys = t.keys

    def request() -> bytes:
        slots, _weights = t.sampler.sample(n, BETA)
        return head + b"".join([keys[s] for s in slots.tolist()])

    def check(r: list[Any]) -> None:
        _expect("MGET", len(r) == n and all(len(i) == t.item_size for i in r))

    return Workload(f"BASELINE {n} × {human(t.item_size)}", "baseline", t.item_size, n,
                    request, check=check)


def update_workload(t: Table, ids: bytes, n: int, seed: int) -> Workload:
    """REPLAY.UPDATE of the n ids of one sample with new float32 priorities."""
    rng = np.random.default_rng(seed)
    priorities = itertools.cycle([rng.uniform(0.1, 1.1, n).astype("<f4") for _ in range(16)])
    head = (b"*4\r\n" + bulk("REPLAY.UPDATE") + bulk(t.name)
            + b"$%d\r\n" % len(ids) + ids + b"\r\n$%d\r\n" % (4 * n))

    def request() -> bytes:
        return head + next(priorities).tobytes() + b"\r\n"

    return Workload(f"UPDATE {n}", "update", 0, n, request,
                    check=lambda r: _expect("REPLAY.UPDATE", r == n))


# --------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------


@dataclass
class Budget:
    seconds: float
    """per workload, one connection"""
    pipe_seconds: float
    """per workload, many connections"""
    min_iters: int
    max_iters: int
    conns: int


def timed(step: Callable[[], Any], budget: Budget) -> list[int]:
    """Run step() until the time or iteration budget is spent; ns per call."""
    warm_until = time.perf_counter() + budget.seconds / 10
    step()
    while time.perf_counter() < warm_until:
        step()
    out: list[int] = []
    clock = time.perf_counter_ns
    deadline = clock() + int(budget.seconds * 1e9)
    gc.disable()
    try:
        while len(out) < budget.max_iters:
            t0 = clock()
            step()
            t1 = clock()
            out.append(t1 - t0)
            if t1 > deadline and len(out) >= budget.min_iters:
                break
    finally:
        gc.enable()
    return out


def reply_size(conn: Conn, w: Workload) -> tuple[int, bytes]:
    """Check one reply; its length (the same for every request of a workload) and bytes."""
    raw = conn.call_raw(w.request())
    reader = hiredis.Reader()
    reader.feed(raw)
    reply = reader.gets()
    if isinstance(reply, hiredis.ReplyError):
        raise ServerReplyError(f"{w.name}: {reply}")
    w.check(reply)
    return len(raw), raw


SERVER_TIME_COMMANDS = {"ping": "ping", "get": "get", "set": "set", "sample": "replay.sample",
                        "sample-packed": "replay.sample", "update": "replay.update"}
"""The command behind each workload kind whose server time INFO commandstats gives."""


def server_usec(conn: Conn, command: str) -> float | None:
    """usec_per_call of one command in INFO commandstats (stock Redis and inreplay)."""
    text = conn.call(encode("INFO", "commandstats"))
    text = text.decode() if isinstance(text, bytes) else str(text)
    for line in text.splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            fields = dict(f.split("=", 1) for f in line.split(":", 1)[1].split(",") if "=" in f)
            return float(fields["usec_per_call"]) if "usec_per_call" in fields else None
    return None


def one_connection(conn: Conn, w: Workload, size: int, budget: Budget) -> list[int]:
    def step() -> None:
        w.finish(conn.call_sized(w.request(), size))

    return timed(step, budget)


def client_cost(w: Workload, raw_reply: bytes, seconds: float) -> float | None:
    """µs (p50) the client spends per request with the reply already waiting (no server).

    The same step as one_connection(), against a socketpair; None when the
    request or reply does not fit in the socket buffers.
    """
    a, b = socket.socketpair()
    with a, b:
        if os.geteuid() == 0:
            for s in (a, b):
                s.setsockopt(socket.SOL_SOCKET, 32, 64 * MB)  # SO_SNDBUFFORCE
                s.setsockopt(socket.SOL_SOCKET, 33, 64 * MB)  # SO_RCVBUFFORCE
        a.settimeout(2.0)
        b.settimeout(2.0)
        conn = Conn(a)
        out: list[int] = []
        deadline = time.perf_counter() + seconds
        try:
            while time.perf_counter() < deadline or len(out) < 6:
                b.sendall(raw_reply)
                t0 = time.perf_counter_ns()
                w.finish(conn.call_sized(w.request(), len(raw_reply)))
                out.append(time.perf_counter_ns() - t0)
                b.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    while b.recv(4 * MB):
                        pass
                b.settimeout(2.0)
        except (TimeoutError, OSError):
            return None
    return float(np.median(out[1:] if len(out) > 1 else out)) / 1e3


def pipelined(host: str, port: int, w: Workload, budget: Budget,
              unix_path: str = "") -> dict[str, Any]:
    """`conns` connections, each keeping `depth` requests in flight, for pipe_seconds."""
    depth = max(1, min(16, PIPELINE_WINDOW // max(w.payload, 1)))
    conns = [Conn.connect(host, port, unix_path=unix_path) for _ in range(budget.conns)]
    sel = selectors.DefaultSelector()
    done = 0
    try:
        for c in conns:
            c.sock.sendall(b"".join([w.request() for _ in range(depth)]))
            sel.register(c.sock, selectors.EVENT_READ, c)
        start = time.perf_counter()
        deadline = start + budget.pipe_seconds
        outstanding = depth * len(conns)
        stopped = 0.0
        while outstanding:
            # at least one reply per connection, however slow the system
            if not stopped and time.perf_counter() >= deadline and done >= len(conns):
                stopped = time.perf_counter()
            stopping = bool(stopped)
            events = sel.select(timeout=STOP_TIMEOUT)
            if not events:
                raise BenchError(f"{w.name}: no reply for {STOP_TIMEOUT:.0f} s")
            for key, _ in events:
                c = key.data
                c.feed_once()
                k = 0
                while (reply := c.reader.gets()) is not False:
                    if isinstance(reply, hiredis.ReplyError):
                        raise ServerReplyError(str(reply))
                    w.finish(reply)
                    k += 1
                outstanding -= k
                if not stopping:
                    done += k
                    c.sock.sendall(b"".join([w.request() for _ in range(k)]))
                    outstanding += k
        elapsed = stopped - start
    finally:
        sel.close()
        for c in conns:
            c.close()
    rps = done / elapsed
    return {"conns": budget.conns, "depth": depth, "ops": done, "seconds": elapsed,
            "rps": rps, "mbps": rps * w.payload / 1e6}


# --------------------------------------------------------------------------
# one system, then all of them
# --------------------------------------------------------------------------


@dataclass
class Settings:
    systems: list[str]
    sizes: list[int]
    batches: list[int]
    item_sizes: list[int]
    table_items: dict[int, int]
    update_batch: int
    budget: Budget
    loopback: bool
    delay_us: int
    server_core: int
    client_core: int
    quick: bool
    busy_poll: bool = True
    seed: int = 1
    mtus: list[int] = field(default_factory=lambda: list(MTUS))
    paths: list[str] = field(default_factory=lambda: list(PATHS))
    packed_batches: list[int] = field(default_factory=lambda: list(PACKED_BATCHES))
    dpdk_pmd: str = "af_packet"
    unix: bool = False
    shm: bool = False
    """with loopback: also the unix path (see network)."""


@dataclass
class Results:
    latency: list[dict[str, Any]] = field(default_factory=list)
    pipelined: list[dict[str, Any]] = field(default_factory=list)
    local: list[dict[str, Any]] = field(default_factory=list)
    client_us: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def workloads_for(system: str, conn: Conn, tables: list[Table], s: Settings) -> list[Workload]:
    out = kv_workloads(s.sizes)
    for t in tables:
        for n in s.batches:
            if system != "redis":
                out.append(sample_workload(t, n))
                if n in s.packed_batches:
                    out.append(sample_packed_workload(t, n))
            out.append(baseline_workload(t, n))
        if system != "redis":
            out += [sample_packed_workload(t, n) for n in s.packed_batches
                    if n not in s.batches]
    if system != "redis" and tables:
        t = tables[0]
        ids = conn.call(encode("REPLAY.SAMPLE", t.name, s.update_batch))[0]
        out.append(update_workload(t, ids, s.update_batch, s.seed))
    return out


def run_key(system: str, net: Network) -> str:
    """How "errors" names one system's run: 'dpdk (shared, MTU 9000)'."""
    return f"{system} ({net.path})" if net.mtu is None else f"{system} ({net.path}, MTU {net.mtu})"


def run_system(system: str, server: Server, net: Network, tables: list[Table], s: Settings,
               res: Results) -> None:
    """Every workload on one system over one path; a refused optional request
    (PACKED, not in every server yet) goes to res.errors and the rest still runs."""
    where = {"path": net.path, "mtu": net.mtu}
    tag = run_key(system, net)
    conn = Conn.connect(server.host, server.port, unix_path=server.unix_path,
                        shm_path=server.shm_path)
    try:
        t0 = time.perf_counter()
        load(conn, system, tables, s.sizes)
        log(f"[{tag}] loaded in {time.perf_counter() - t0:.1f} s")
        for w in workloads_for(system, conn, tables, s):
            try:
                size, raw = reply_size(conn, w)
            except ServerReplyError as e:
                if w.kind != "sample-packed":
                    raise
                res.errors[f"{tag}: {w.name}"] = f"ServerReplyError: {e}"
                log(f"[{tag}] {w.name}: refused ({e})")
                continue
            command = SERVER_TIME_COMMANDS.get(w.kind)
            if command:  # the server's own time per call over exactly these requests
                conn.call(encode("CONFIG", "RESETSTAT"))
            lat = summarize(one_connection(conn, w, size, s.budget), w.payload)
            row = {"system": system, **where, "workload": w.name, "kind": w.kind,
                   "size": w.size, "batch": w.batch, "payload": w.payload, **lat}
            if command:
                row["server_us"] = server_usec(conn, command)
            res.latency.append(row)
            if w.name not in res.client_us:
                res.client_us[w.name] = client_cost(w, raw, s.budget.seconds / 4)
            pipe = None
            if w.payload <= PIPELINE_MAX_PAYLOAD and s.budget.conns > 0:
                pipe = pipelined(server.host, server.port, w, s.budget, server.unix_path)
                res.pipelined.append({"system": system, **where, "workload": w.name,
                                      "kind": w.kind, "size": w.size, "batch": w.batch,
                                      **pipe})
            log(f"[{tag}] {w.name:<22} p50 {lat['p50_us']:>10.1f} µs  p99 "
                f"{lat['p99_us']:>10.1f} µs  n {lat['n']:>6}"
                + (f"  {pipe['conns']}x{pipe['depth']}: {pipe['rps']:>10.0f} req/s"
                   if pipe else ""))
    finally:
        conn.close()


def local_update(t: Table, n: int, budget: Budget, seed: int) -> dict[str, Any]:
    """The baseline's priority update: the learner's own tree, no network."""
    rng = np.random.default_rng(seed)
    slots, _ = t.sampler.sample(n, BETA)
    priorities = itertools.cycle([rng.uniform(0.1, 1.1, n).astype(np.float32)
                                  for _ in range(16)])

    def step() -> None:
        t.sampler.update(slots, next(priorities))

    lat = summarize(timed(step, budget), 0)
    return {"system": "learner", "workload": f"local update {n}", "kind": "local-update",
            "size": 0, "batch": n, "payload": 0, **lat}


def run(s: Settings) -> dict[str, Any]:
    started = time.time()
    pin = Pinning.choose(s.server_core, s.client_core)
    pin.pin_client()
    keep_big_buffers()
    res = Results()
    tables = [make_table(size, s.table_items[size], s.seed + i)
              for i, size in enumerate(s.item_sizes)]
    nets: list[dict[str, Any]] = []
    with sigterm_as_exit(), tempfile.TemporaryDirectory(prefix="irbench-") as tmp:
        for mtu, path in path_plan(s):
            with network(s.loopback, s.delay_us, mtu, path == "kernel-default",
                         path == "unix", path == "shm") as net:
                nets.append(net.describe())
                for i, system in enumerate(x for x in s.systems if net.serves(x)):
                    tag = run_key(system, net)
                    port = free_port() if net.loopback else 7000 + i
                    try:
                        server = make_server(system, net, pin, Path(tmp), port,
                                             s.busy_poll, s.dpdk_pmd).start()
                    except BenchError as e:
                        res.errors[tag] = str(e)
                        log(f"[{tag}] not run: {e}")
                        continue
                    try:
                        run_system(system, server, net, tables, s, res)
                    except (OSError, ServerReplyError, BenchError) as e:
                        res.errors[tag] = f"{type(e).__name__}: {e}\n{server.log_tail()}"
                        log(f"[{tag}] failed: {e}")
                    finally:
                        server.stop()
        if tables:
            res.local.append(local_update(tables[0], s.update_batch, s.budget, s.seed))
    for t in tables:
        t.sampler.close()
    return {
        "bench": "latency",
        "commit": commit_label(),
        "quick": s.quick,
        "machine": {**machine(), "loadavg_end": os.getloadavg()[0]},
        "network": nets[0] if nets else {"path": "none"},
        "networks": nets,
        "pinning": asdict(pin),
        "systems": s.systems,
        "paths": [p for _, p in path_plan(s)] if s.loopback else s.paths,
        "mtus": [] if s.loopback else s.mtus,
        "config": {"sizes": s.sizes, "batches": s.batches, "item_sizes": s.item_sizes,
                   "packed_batches": s.packed_batches, "dpdk_busy_poll": s.busy_poll,
                   "dpdk_pmd": s.dpdk_pmd,
                   "vhost_net": Path("/dev/vhost-net").exists(),
                   "table_items": {str(k): v for k, v in s.table_items.items()},
                   "update_batch": s.update_batch, "alpha": ALPHA, "beta": BETA,
                   "pipeline_max_payload": PIPELINE_MAX_PAYLOAD, **asdict(s.budget)},
        "latency": res.latency,
        "pipelined": res.pipelined,
        "local": res.local,
        "client_us": res.client_us,
        "errors": res.errors,
        "seconds": time.time() - started,
        "notes": notes(s, pin, nets[0] if nets else {}),
    }


def path_plan(s: Settings) -> list[tuple[int, str]]:
    """(MTU, path) in the order they run: each MTU's paths together."""
    if s.loopback:
        return [(netns.DEFAULT_MTU, "loopback")] + \
            ([(netns.DEFAULT_MTU, "unix")] if s.unix else []) + \
            ([(netns.DEFAULT_MTU, "shm")] if s.shm else [])
    return [(mtu, path) for mtu in s.mtus for path in s.paths]


def notes(s: Settings, pin: Pinning, net_info: dict[str, Any]) -> list[str]:
    out = ["one connection: one request in flight; p50/p90/p99/mean in µs as the client "
           "sees them (request encoded, sent, reply parsed by hiredis, ids and weights "
           "decoded); req/s = 1 / mean; MB/s counts values or items",
           "BASELINE = the learner samples its own sum tree (pyctl.sumtree, the same C code) "
           "and fetches the drawn items with one MGET; its time includes the local draw",
           f"pipelined: {s.budget.conns} connections, up to 16 requests in flight each "
           f"(at most {human(PIPELINE_WINDOW)} per connection), one Python client process; "
           f"requests above {human(PIPELINE_MAX_PAYLOAD)} are not run this way"]
    if pin.server is None:
        out.append("fewer than two usable cores: client and servers not pinned")
    if "dpdk" in s.systems:
        out.append("the DPDK server busy-polls its core (--busy-poll)" if s.busy_poll else
                   "the DPDK server naps after a millisecond idle (no --busy-poll)")
    if "kernel-poll" in s.systems:
        out.append("kernel-poll = inreplay on the kernel stack with --busy-poll: it spins on "
                   "epoll instead of sleeping in it")
    if s.packed_batches and any(x != "redis" for x in s.systems):
        out.append("PACKED = REPLAY.SAMPLE ... PACKED: one bulk string of n int64 ids, "
                   "n float32 weights and the n items, viewed with np.frombuffer")
    if net_info.get("path") != "loopback":
        out.append("paths: " + "; ".join(
            {"shared": "shared = one veth, offloads off on both ends, every system",
             "kernel-default": "kernel-default = a veth of their own with the kernel's "
                               "default offloads (TSO/GSO/GRO, checksum), kernel-stack "
                               "systems only (af_packet needs offloads off)"}[p]
            for p in s.paths) + f"; MTU {', '.join(map(str, s.mtus))} on both veth ends"
            + (" (DPDK started with the same --mtu)" if "dpdk" in s.systems else ""))
    if net_info.get("path") == "loopback":
        out.append("loopback: servers on 127.0.0.1, no namespace (not the veth path)")
        if s.unix:
            out.append("unix: the same servers also on a Unix domain socket (--unixsocket), "
                       "the client connected to it")
        if s.shm:
            out.append("shm: the inreplay servers also serving the same-host shared-memory "
                       "rings (--shm-socket), the client on them (pyctl._shm.ShmSocket)")
    elif s.delay_us:
        out.append(f"netem delay {s.delay_us} µs on each veth end's egress "
                   f"(+{2 * s.delay_us} µs per round trip)")
    return out


# --------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------


def row_key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r.get("path"), r.get("mtu"), r["system"], r["workload"])


def table(doc: dict[str, Any]) -> str:
    pipe = {row_key(r): r for r in doc["pipelined"]}
    nc = f"{doc['config']['conns']}c"
    head = (f"{'system':<11} {'path':<14} {'mtu':>5} {'workload':<27} {'n':>6} {'p50 µs':>10} "
            f"{'p90 µs':>10} "
            f"{'p99 µs':>10} {'mean µs':>10} {'req/s':>9} {'MB/s':>8} {nc + ' req/s':>10} "
            f"{nc + ' MB/s':>9} {'client µs':>9}")
    lines = [head, "-" * len(head)]
    for r in doc["latency"] + doc["local"]:
        p = pipe.get(row_key(r))
        c = doc["client_us"].get(r["workload"])
        lines.append(
            f"{r['system']:<11} {r.get('path') or '—':<14} {r.get('mtu') or '—':>5} "
            f"{r['workload']:<27} {r['n']:>6} {r['p50_us']:>10.1f} "
            f"{r['p90_us']:>10.1f} {r['p99_us']:>10.1f} {r['mean_us']:>10.1f} "
            f"{r['rps']:>9.0f} {r['mbps']:>8.1f} "
            + (f"{p['rps']:>10.0f} {p['mbps']:>9.1f} " if p else f"{'—':>10} {'—':>9} ")
            + (f"{c:>9.1f}" if c is not None else f"{'—':>9}"))
    for system, err in doc["errors"].items():
        lines.append(f"{system}: not measured: {err.splitlines()[0]}")
    return "\n".join(lines)


def plots(doc: dict[str, Any], outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    # one path and MTU: the shared veth (every system) at the largest MTU measured
    mtu = max(doc.get("mtus") or [None], key=lambda m: m or 0)
    shared = "loopback" if doc["network"].get("path") == "loopback" else "shared"
    rows = [r for r in doc["latency"] if r.get("path") == shared and r.get("mtu") == mtu]
    systems = [s for s in doc["systems"] if any(r["system"] == s for r in rows)]
    written = []

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, kind in zip(axes, ("get", "set"), strict=True):
        for system in systems:
            pts = sorted((r["size"], r["p50_us"]) for r in rows
                         if r["system"] == system and r["kind"] == kind)
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=system)
        ax.set(xscale="log", yscale="log", xlabel="value size (bytes)",
               title=f"{kind.upper()}, one connection" + (f", MTU {mtu}" if mtu else ""))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("p50 latency (µs)")
    axes[0].legend()
    fig.tight_layout()
    path = outdir / "latency_by_size.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    item_sizes = doc["config"]["item_sizes"]
    colors = {s: f"C{i}" for i, s in enumerate(systems)}
    fig, axes = plt.subplots(1, len(item_sizes), figsize=(5 * len(item_sizes), 4), squeeze=False)
    for ax, item in zip(axes[0], item_sizes, strict=True):
        for system in systems:
            for kind, style, label in (("sample", "-", "REPLAY.SAMPLE"),
                                       ("sample-packed", ":", "PACKED"),
                                       ("baseline", "--", "local tree + MGET")):
                pts = sorted((r["batch"], r["p50_us"]) for r in rows if r["system"] == system
                             and r["kind"] == kind and r["size"] == item)
                if pts:
                    ax.plot(*zip(*pts, strict=True), style, marker="o", color=colors[system],
                            label=f"{label} ({system})")
        ax.set(xscale="log", yscale="log", xlabel="batch (items)", ylabel="p50 latency (µs)",
               title=f"sampling, {human(item)} items")
        ax.set_xticks(doc["config"]["batches"], [str(b) for b in doc["config"]["batches"]])
        ax.minorticks_off()
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = outdir / "sampling_by_batch.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def settings_from(args: argparse.Namespace) -> Settings:
    quick = args.quick
    budget = Budget(
        seconds=args.seconds if args.seconds is not None else (0.2 if quick else 1.0),
        pipe_seconds=(args.pipe_seconds if args.pipe_seconds is not None
                      else (0.1 if quick else 0.5)),
        min_iters=3 if quick else 5,
        max_iters=args.max_iters,
        conns=args.conns,
    )
    item_sizes = ints(args.item_sizes) if args.item_sizes else list(ITEM_SIZES)
    default_items = {size: max(1_000, n // 10) if quick else n
                     for size, n in TABLE_ITEMS.items()}
    table_items = {size: args.table_items or default_items.get(size, 1_000)
                   for size in item_sizes}
    systems = args.systems.split(",") if args.systems else default_systems()
    for system in systems:
        if system not in SYSTEMS:
            raise SystemExit(f"--systems: unknown system {system!r} (from {', '.join(SYSTEMS)})")
    if args.unix and not args.loopback:
        raise SystemExit("--unix: the Unix socket path runs beside loopback: add --loopback")
    if args.shm and not args.loopback:
        raise SystemExit("--shm: the shared-memory path runs beside loopback: add --loopback")
    paths = args.paths.split(",") if args.paths else list(PATHS)
    for path in paths:
        if path not in PATHS:
            raise SystemExit(f"--paths: unknown path {path!r} (from {', '.join(PATHS)})")
    mtus = ints(args.mtu) if args.mtu else list(MTUS)
    for mtu in mtus:
        try:
            netns.check_mtu(mtu)
        except netns.SetupError as e:
            raise SystemExit(str(e)) from None
    return Settings(
        systems=systems,
        sizes=ints(args.sizes) if args.sizes else list(KV_SIZES),
        batches=ints(args.batches) if args.batches else list(BATCHES),
        item_sizes=item_sizes,
        table_items=table_items,
        update_batch=args.update_batch,
        budget=budget,
        loopback=args.loopback,
        unix=args.unix,
        shm=args.shm,
        delay_us=args.delay,
        server_core=args.server_core,
        client_core=args.client_core,
        quick=quick,
        busy_poll=not args.dpdk_nap,
        dpdk_pmd=args.dpdk_pmd,
        mtus=mtus,
        paths=paths,
        packed_batches=(ints(args.packed_batches) if args.packed_batches is not None
                        else list(PACKED_BATCHES)),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="short run (about 2 minutes with both paths and MTUs)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--plots", metavar="DIR", help="write PNG plots here")
    ap.add_argument("--delay", type=int, default=0, metavar="USEC",
                    help="netem delay on each veth end (edge to cloud)")
    ap.add_argument("--systems", help=f"comma-separated, from {','.join(SYSTEMS)} "
                                      "(default: all that can run here)")
    ap.add_argument("--loopback", action="store_true",
                    help="kernel-stack systems on 127.0.0.1, no namespace (no root needed)")
    ap.add_argument("--unix", action="store_true",
                    help="with --loopback: also run every system over a Unix socket "
                         "(path unix), in the same run")
    ap.add_argument("--shm", action="store_true",
                    help="with --loopback: also run the inreplay systems over the same-host "
                         "shared-memory rings (path shm), in the same run")
    ap.add_argument("--mtu", metavar="N,N", help="veth MTUs to measure at, comma-separated "
                                                 "(default 1500,9000)")
    ap.add_argument("--paths", help=f"comma-separated, from {','.join(PATHS)} (default both)")
    ap.add_argument("--sizes", help="GET/SET value sizes in bytes, comma-separated")
    ap.add_argument("--batches", help="sample batch sizes, comma-separated")
    ap.add_argument("--packed-batches", metavar="N,N",
                    help="batch sizes also sampled with PACKED (default 512; '' for none)")
    ap.add_argument("--item-sizes", help="replay item sizes in bytes, comma-separated")
    ap.add_argument("--table-items", type=int, help="items per replay table")
    ap.add_argument("--update-batch", type=int, default=UPDATE_BATCH)
    ap.add_argument("--seconds", type=float, help="time per workload, one connection")
    ap.add_argument("--pipe-seconds", type=float, help="time per workload, pipelined")
    ap.add_argument("--max-iters", type=int, default=20_000)
    ap.add_argument("--conns", type=int, default=16, help="connections when pipelined (0: skip)")
    ap.add_argument("--server-core", type=int, default=0)
    ap.add_argument("--client-core", type=int, default=1)
    ap.add_argument("--dpdk-nap", action="store_true",
                    help="start the DPDK server without --busy-poll (it naps when idle)")
    ap.add_argument("--dpdk-pmd", choices=DPDK_PMDS, default="af_packet",
                    help="the DPDK server's virtual NIC driver on the veth (af_xdp: MTU up "
                         "to about 3000 in DPDK 22.11, one page per frame)")
    args = ap.parse_args(argv)
    try:
        doc = run(settings_from(args))
    except (BenchError, netns.SetupError) as e:
        print(f"latency: {e}", file=sys.stderr)
        return 2
    print(table(doc))
    print(f"\n{doc['seconds']:.0f} s; load average {doc['machine']['loadavg_start']:.1f} "
          f"at the start, {doc['machine']['loadavg_end']:.1f} at the end")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    if args.plots:
        for p in plots(doc, Path(args.plots)):
            print(f"wrote {p}")
    for system, err in doc["errors"].items():
        print(f"latency: {system} not measured: {err}", file=sys.stderr)
    return 0 if doc["latency"] else 1


if __name__ == "__main__":
    sys.exit(main())
