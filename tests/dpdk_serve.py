"""Run inreplay on the DPDK stack in this process, through cffi like pyctl does.

Used by tests/test_dpdk.py (inside a network namespace, as root) until pyctl
grows --eal-args/--ip:

    INREPLAY_REQUIREPASS=PW ip netns exec NS python tests/dpdk_serve.py \\
        --ip 10.77.0.2/24 --port 6390 \\
        --eal-args "-l 0 --no-pci --vdev=net_af_packet0,iface=veth0 --file-prefix=ir"

The password comes from $INREPLAY_REQUIREPASS, as for pyctl start: a DPDK port has
no loopback, so without one protected mode refuses every client (unless
--protected-mode no, or --client-subnet).

Prints ``READY <port>`` once the server listens; SIGTERM/SIGINT stop it, and the
exit code is 0 after a clean stop (1 with the library's error otherwise).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyctl import _native
from pyctl.server import stop_on_signals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eal-args", required=True, help="EAL arguments as one string")
    ap.add_argument("--ip", required=True, help="the stack's address, a.b.c.d/prefix")
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--maxclients", type=int, default=10000)
    ap.add_argument("--client-subnet", default=None,
                    help="clients allowed without a password (default: none)")
    ap.add_argument("--protected-mode", choices=("yes", "no"), default="yes")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    ffi, lib = _native.load()
    keep: list[Any] = []

    def s(v: str) -> Any:
        b = ffi.new("char[]", v.encode())
        keep.append(b)
        return b

    cfg = ffi.new("ir_config *")
    lib.ir_config_init(cfg)
    cfg.stack = s("dpdk")
    cfg.eal_args = s(args.eal_args)
    cfg.ip = s(args.ip)
    cfg.bind = s(args.ip.split("/")[0])
    cfg.port = args.port
    cfg.maxclients = args.maxclients
    cfg.verbose = int(args.verbose)
    if os.environ.get("INREPLAY_REQUIREPASS"):
        cfg.requirepass = s(os.environ["INREPLAY_REQUIREPASS"])
    if args.client_subnet:
        cfg.client_subnet = s(args.client_subnet)
    if "protected_mode" in dict(ffi.typeof("ir_config").fields):  # an older library has none
        cfg.protected_mode = int(args.protected_mode == "yes")

    result: dict[str, Any] = {}

    def target() -> None:
        result["rc"] = lib.ir_run(cfg)
        result["err"] = _native.last_error()  # thread-local in C

    t = threading.Thread(target=target, name="inreplay-dpdk", daemon=True)
    with stop_on_signals(lib):  # SIGTERM/SIGINT -> ir_stop: signals are the host's
        t.start()
        return _wait(t, ffi, lib, result)


def _wait(t: threading.Thread, ffi: Any, lib: Any, result: dict[str, Any]) -> int:
    stats = ffi.new("ir_stats *")
    while t.is_alive():
        lib.ir_get_stats(stats)
        if stats.running and stats.port:
            print(f"READY {stats.port}", flush=True)
            break
        t.join(0.01)
    while t.is_alive():
        t.join(0.2)
    rc = result.get("rc", -1)
    if rc != 0:
        print(f"inreplay: error {rc}: {result.get('err')}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
