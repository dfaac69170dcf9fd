"""Signals belong to the host process: libinreplay installs no handler, the host's
SIGINT/SIGTERM handler calls ir_stop(), and a stop asked for before the loop starts is kept."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HOST = textwrap.dedent("""
    import signal, sys, threading, time
    from pyctl import _native, config, server
    ffi, lib = _native.load()
    cfg = server.with_data_dir(config.build(None, {"listen": "127.0.0.1:0"}))
    keep = []
    ccfg = server._to_c(cfg, keep)
    def caught(sig):
        mask = next(line for line in open("/proc/self/status") if line.startswith("SigCgt:"))
        return bool(int(mask.split()[1], 16) >> (sig - 1) & 1)
    out = {}
    def run():
        out["rc"] = lib.ir_run(ccfg)
    """)


def _host(code: str) -> list[str]:
    r = subprocess.run([sys.executable, "-c", HOST + textwrap.dedent(code)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_the_library_installs_no_signal_handler() -> None:
    """Before, ir_run took SIGINT/SIGTERM from its host for as long as it ran."""
    before, during, rc = _host("""
        b = caught(signal.SIGTERM)
        t = threading.Thread(target=run); t.start()
        st = ffi.new("ir_stats *")
        while not (lib.ir_get_stats(st) or st.running and st.port):
            time.sleep(0.01)
        d = caught(signal.SIGTERM)
        lib.ir_stop(); t.join(10)
        print(b, d, out["rc"])
        """)
    assert (before, during, rc) == ("False", "False", "0")


def test_a_stop_asked_for_before_the_loop_starts_is_kept() -> None:
    """Before, ir_run cleared the flag at its start: a Ctrl-C or ir_stop() in between was lost
    and the server ran on."""
    (elapsed,) = _host("""
        lib.ir_stop()
        t0 = time.monotonic()
        run()
        assert out["rc"] == 0, out
        print(round(time.monotonic() - t0, 3))
        """)
    assert float(elapsed) < 5


def test_each_stop_request_stops_one_run() -> None:
    """A taken request does not stop the next run at once."""
    (alive,) = _host("""
        lib.ir_stop(); run()
        t = threading.Thread(target=run); t.start()
        t.join(1.0)
        print(t.is_alive())
        lib.ir_stop(); t.join(10)
        """)
    assert alive == "True"


def test_a_stop_signal_never_waits_for_the_events_lock() -> None:
    """stop_handler: a signal that lands while the main thread is inside Event.set() (its
    lock held: a second SIGTERM during the first one's set, as a learner hung at shutdown)
    must not wait for that lock. Simulated by holding the lock and calling the handler."""
    import threading

    from pyctl.proc import stop_handler

    ev = threading.Event()
    handler = stop_handler(ev)

    def interrupted_set() -> None:
        with ev._cond:  # what an interrupted set() holds
            handler(15, None)  # would wait forever if it called ev.set() itself
            handler(15, None)  # a second signal: nothing more

    t = threading.Thread(target=interrupted_set, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "the handler waited for the lock its own thread holds"
    assert ev.wait(5)
