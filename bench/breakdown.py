"""Where the microseconds of one request go on the DPDK path.

    python bench/breakdown.py [--requests N] [--json FILE]

Runs GET of a 64 B value on one connection against the DPDK appliance (the
same veth topology and core split as bench/latency.py) and reads the
appliance's cycle counters from DPDK telemetry before and after: the polling
loop counts, for the iterations that did work, the time in the driver's RX
burst, in lwIP's input, in dispatching lwIP's events to the server, and in the
driver's TX flush; the server counts the time in handling input, executing
commands and flushing replies. Divided by the requests, with the client's
measured round trip, that is one request's budget.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from latency import (  # noqa: E402
    BenchError,
    Conn,
    Pinning,
    encode,
    free_port,
    make_server,
    network,
    sigterm_as_exit,
)

from pyctl import telemetry  # noqa: E402

COUNTERS = ("work_iterations", "cycles_rx", "cycles_stack", "cycles_dispatch", "cycles_tx",
            "cycles_input", "cycles_execute", "cycles_reply", "commands")


def read(prefix: str) -> dict[str, int]:
    time.sleep(0.3)  # both snapshots are refreshed every 100 ms
    t = telemetry.query(prefix, "/inreplay/stats")["/inreplay/stats"]
    return {k: int(t[k]) for k in (*COUNTERS, "tsc_hz")}


def measure(n: int) -> dict[str, Any]:
    with sigterm_as_exit(), network(False) as net, \
            tempfile.TemporaryDirectory(prefix="irbd") as tmp:
        pin = Pinning.choose(server=0, client=1)
        server = make_server("dpdk", net, pin, Path(tmp), free_port()).start()
        try:
            pin.pin_client()
            conn = Conn.connect(server.host, server.port)
            conn.call(encode("SET", "k", b"v" * 64))
            req = encode("GET", "k")
            for _ in range(2000):
                conn.call(req)
            before = read(server.file_prefix)
            rtts = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                conn.call(req)
                rtts.append(time.perf_counter_ns() - t0)
            after = read(server.file_prefix)
            conn.close()
        finally:
            server.stop()
    d = {k: after[k] - before[k] for k in COUNTERS}
    if d["commands"] < n:
        raise BenchError(f"the appliance counted {d['commands']} commands for {n} requests")
    us = 1e6 / after["tsc_hz"] / n  # cycles -> µs per request

    def per(k: str) -> float:
        return d[k] * us

    server_side = {
        "driver RX (rx_burst, af_packet ring)": per("cycles_rx"),
        "lwIP input (IP, TCP) and timers": per("cycles_stack"),
        "parse and bookkeeping (RESP parser, dispatch)":
            per("cycles_input") - per("cycles_execute") - per("cycles_reply"),
        "execute (GET)": per("cycles_execute"),
        "reply (RESP encoding, lwIP tcp_write/output)": per("cycles_reply"),
        "lwIP event delivery around the upcalls": per("cycles_dispatch") - per("cycles_input"),
        "driver TX (tx_buffer_flush: af_packet sendto)": per("cycles_tx"),
    }
    total = sum(server_side.values())
    rtt_mean = statistics.fmean(rtts) / 1000
    return {
        "requests": n,
        "rtt_p50_us": statistics.median(rtts) / 1000,
        "rtt_mean_us": rtt_mean,
        "work_iterations_per_request": d["work_iterations"] / n,
        "stages_us": server_side,
        "appliance_us": total,
        "outside_us": rtt_mean - total,
        "tsc_hz": after["tsc_hz"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    try:
        r = measure(args.requests)
    except BenchError as e:
        print(f"breakdown: {e}", file=sys.stderr)
        return 2
    print(f"GET 64 B on the DPDK path, {r['requests']} requests: round trip p50 "
          f"{r['rtt_p50_us']:.1f} µs, mean {r['rtt_mean_us']:.1f} µs")
    for name, v in r["stages_us"].items():
        print(f"  {v:7.2f} µs  {name}")
    print(f"  {r['appliance_us']:7.2f} µs  in the appliance's loop")
    print(f"  {r['outside_us']:7.2f} µs  outside it (client, kernel, veth, waiting for a poll)")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
