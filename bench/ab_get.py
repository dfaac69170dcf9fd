"""A/B of GET 64 B round trips and frames per request between two source trees.

    python bench/ab_get.py --tree old=/path/a --tree new=/path/b [--rounds 3] [--requests 3000]
                           [--kernel-poll]

Interleaved in one run on one veth (offloads off, MTU 1500): per round, each
tree's DPDK server, then (--kernel-poll) each tree's kernel-poll server, each
measured with one connection and one request in flight after 500 warm-up
requests; the client's veth end counts the frames (RX + TX) during the timed
requests. Frames per request is deterministic where timing is not.

The "regression since 79f4a87", measured with this tool
---------------------------------------------------------------------------
The issue: DPDK GET 64 B went from 0.83x kernel-poll's p50 (README, 79f4a87)
to 1.18-1.21x (HEAD 7c029f0), SAMPLE 512 x 128 B PACKED from 0.33x to 0.74x
the learner-side baseline. What differs between the two trees, deterministically:
  - frames per GET on the veth: 2.00 in both (request, reply; no pure ACK,
    no split reply), DPDK and kernel-poll alike (2.016 vs 2.018 over 5000).
  - syscalls per GET (strace -c -f, 2500 requests): DPDK 1 sendto in both;
    kernel-poll 1 read + 1 writev + 1.13 epoll_pwait2 in both.
  - the dataplane's diff is the sockname/port_in_use ops (called at accept
    and CONFIG SET port only); lwIP's configuration is unchanged.
  - server instructions per GET (callgrind, kernel stack, irs_data inclusive,
    2000 requests): 2,322 at 79f4a87, 2,722 at 0e81e7f (+400: call()'s
    commandstats clock pair, commandSubName, error/reply-mode bookkeeping);
    ll2string by hand instead of snprintf (util.c) brings it to 2,072.
    400 instructions are ~0.2 us, not the 3-8 us the ratios implied.
  - interleaved timing, this tool, 8 rounds x 5000 GETs (load average 14-18
    from other work): DPDK p50 25.0 us (79f4a87) vs 25.2 us (0e81e7f),
    kernel-poll 26.9 vs 26.9: ratio 0.93 vs 0.94. After the ll2string change,
    6 rounds: 24.6 vs 25.1, kernel-poll 26.7 vs 26.6 (0.92 vs 0.94).
    bench/latency.py --quick from each tree, 4 interleaved runs: ratio
    0.73/0.86/0.95/0.86 (79f4a87) vs 0.92/1.11/0.97/0.81 (0e81e7f).
So there is no regression in the server or the DPDK path: the README's own
79f4a87 run measured 0.83x at MTU 1500 and 1.21x at MTU 9000 in the same run,
the spread of p50s on this shared VM. The PACKED ratio moved with its
denominator: the baseline (stock Redis + the learner's tree, code unchanged)
was 691 us in the README's run and 270-1062 us in these; DPDK PACKED itself
was 231 us then and 193-336 us in both trees now.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyctl import netns  # noqa: E402


def start(tree: Path, system: str, t: netns.Topology, port: int, work: Path,
          server_core: int) -> tuple[subprocess.Popen[bytes], str, str]:
    env = dict(os.environ, INREPLAY_RUN_DIR=str(work / "run"), PYTHONPATH=str(tree))
    prefix = ""
    if system == "dpdk":
        prefix = f"{t.netns}-{port}"
        argv = [sys.executable, "-m", "pyctl", "start", "--stack", "dpdk", "--netns", t.netns,
                "--cores", str(server_core), "--ip", f"{t.appliance_ip}/{t.prefix}",
                "--vdev", f"net_af_packet0,iface={t.iface}", "--listen-port", str(port),
                "--mtu", str(t.mtu), "--hugepages", "256", "--file-prefix", prefix,
                "--client-subnet", f"{t.client_ip}/{t.prefix}", "--busy-poll"]
        host = t.appliance_ip
    else:
        argv = ["ip", "netns", "exec", t.netns, "taskset", "-c", str(server_core),
                sys.executable, "-m", "pyctl", "start", "--listen", f"{t.kernel_ip}:{port}",
                "--client-subnet", f"{t.client_ip}/{t.prefix}", "--busy-poll"]
        host = t.kernel_ip
    log = open(work / f"{system}-{port}.log", "wb")
    p = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return p, host, prefix
        except OSError:
            pass
        if p.poll() is not None:
            break
        time.sleep(0.1)
    stop(p, prefix)
    raise SystemExit(f"{system} from {tree} did not start; see {work}")


def stop(p: subprocess.Popen[bytes], prefix: str) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if prefix:
        subprocess.run(["rm", "-rf", f"/var/run/dpdk/{prefix}"], check=False)


def recv_reply(s: socket.socket, want: int, buf: bytearray) -> None:
    got = 0
    while got < want:
        n = s.recv_into(memoryview(buf)[got:])
        if not n:
            raise SystemExit("connection closed")
        got += n


def frames_on(iface: str) -> int:
    st = Path("/sys/class/net") / iface / "statistics"
    return sum(int((st / f).read_text()) for f in ("rx_packets", "tx_packets"))


def measure(host: str, port: int, requests: int, iface: str,
            info: bool) -> tuple[list[float], int, str]:
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    val = b"v" * 64
    s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$64\r\n" + val + b"\r\n")
    buf = bytearray(4096)
    recv_reply(s, 5, buf)
    req = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
    want = len(b"$64\r\n") + 64 + 2
    for _ in range(500):
        s.sendall(req)
        recv_reply(s, want, buf)
    time.sleep(0.3)
    f0 = frames_on(iface)
    rtts = []
    for _ in range(requests):
        t0 = time.perf_counter_ns()
        s.sendall(req)
        recv_reply(s, want, buf)
        rtts.append((time.perf_counter_ns() - t0) / 1000)
    time.sleep(0.3)
    frames = frames_on(iface) - f0
    stats = ""
    if info:
        s.sendall(b"*3\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
        time.sleep(0.2)
        stats = s.recv(65536).decode(errors="replace")
    s.close()
    return rtts, frames, stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--kernel-poll", action="store_true",
                    help="also each tree's kernel-poll server")
    ap.add_argument("--server-core", type=int, default=1)
    ap.add_argument("--client-core", type=int, default=0)
    a = ap.parse_args()
    trees = [(x.split("=", 1)[0], Path(x.split("=", 1)[1]).resolve()) for x in a.tree]
    os.sched_setaffinity(0, {a.client_core})
    name = f"irab{os.getpid() % 10000}"
    t = netns.up(name, netns.free_subnet(), mtu=1500)
    results: dict[str, list[tuple[float, float, float]]] = {}
    port = 7400
    try:
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            for rnd in range(a.rounds):
                runs = [(n, p, "dpdk") for n, p in trees]
                if a.kernel_poll:
                    runs += [(n, p, "kernel-poll") for n, p in trees]
                for n, p, system in runs:
                    port += 1
                    proc, host, prefix = start(p, system, t, port, work, a.server_core)
                    try:
                        rtts, frames, _ = measure(host, port, a.requests, t.peer, False)
                    finally:
                        stop(proc, prefix)
                    key = f"{n}:{system}"
                    med = statistics.median(rtts)
                    mean = statistics.fmean(rtts)
                    fpr = frames / a.requests
                    results.setdefault(key, []).append((med, mean, fpr))
                    print(f"round {rnd} {key:24s} p50 {med:7.1f} us  mean {mean:7.1f} us  "
                          f"frames/request {fpr:.3f}", flush=True)
    finally:
        netns.down(name)
    print("summary (median over rounds of the p50):")
    for key, rows in results.items():
        print(f"  {key:24s} p50 {statistics.median(r[0] for r in rows):7.1f} us  "
              f"frames/request {statistics.median(r[2] for r in rows):.3f}")


if __name__ == "__main__":
    main()
