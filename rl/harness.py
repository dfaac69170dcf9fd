"""The demo harness every ``pyctl demo --algo X`` runs on: the appliance (kernel stack, or
DPDK in a network namespace with a fallback to the kernel stack), the child processes
(own session, log file, SIGTERM then stacks then SIGKILL), the progress line, the
solve test (a greedy screen, then ``eval_episodes`` on fresh seeds) and the end of a
run (every child stopped, summary.json written, ``solved: true|false`` printed last,
the exit status).

An algorithm's demo supplies what differs (its children, its counters, how to load
the newest parameters, its summary's own fields) and calls :meth:`Run.main`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from inreplay.rl.config import PASSWORD_ENV, STACKS_SIGNAL, appliance_password, new_run_password

from pyctl import _native
from pyctl.proc import die_with_parent

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
START_TIMEOUT = 30.0
POLL_S = 0.5  # how often the demo reads the counters
MIN_RATE_SPAN_S = POLL_S  # a rate needs the worker seen at least one poll before the stop


class DemoError(RuntimeError):
    """Something the demo cannot go on without (a process died, a server would not start)."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    if (password := appliance_password()) is not None:
        env[PASSWORD_ENV] = password  # pyctl start's, and its clients' (appliance_password)
    return env


STACKS_WAIT_S = 2.0
"""How long a child that ignored SIGTERM gets to write its stacks before SIGKILL."""


class Child:
    """A process the demo started: its own session (so ^C reaches only the demo, which
    stops children in order), SIGTERMed by the kernel if the demo dies, output to a log."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name = name
        self.argv = argv
        self.log = log
        self.last_words = ""
        with open(log, "wb") as f:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=_child_env(), stdin=subprocess.DEVNULL,
                                         stdout=f, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=die_with_parent)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = 15) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join("    " + line for line in lines[-n:])

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then `timeout` s to exit; past it, :data:`STACKS_SIGNAL` (a Python
        child writes every thread's stack to its log) and SIGKILL. The exit status, or
        None when it had to be killed (``last_words``: its log's last line before the
        stacks)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.last_words = next(
                (x.strip() for x in reversed(self.tail(5).splitlines()) if x.strip()),
                "(empty log)")
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(STACKS_SIGNAL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(STACKS_WAIT_S)  # the dump is written at once, from C
            self.proc.kill()
            self.proc.wait()
            return None


DEMO_NETNS = "irdemo"
DEMO_SUBNET = "10.78.0.0/24"


def dpdk_possible() -> str | None:
    """Why the DPDK stack cannot run here, or None if it can."""
    if os.geteuid() != 0:
        return "not root"
    if not _native.has_stack("dpdk"):
        return "libinreplay was built without DPDK"
    return None


def start_appliance(stack: str, port: int, out: Path, shards: int = 1, *,
                    netns_name: str = DEMO_NETNS, subnet: str = DEMO_SUBNET,
                    ) -> tuple[Child, str, int]:
    """Start inreplay (a replay group of `shards` members when more than one); returns the
    process and the address clients use (shard 0's: the others are found from it).
    It has a random password (new_run_password), which every child started after it
    gets in $INREPLAY_REQUIREPASS, as a notebook server hands out its token.

    The DPDK stack runs in its own namespace (pyctl netns up; ``netns_name`` on
    ``subnet``, also its DPDK file prefix), reached over a veth; a group there is one
    process per core, each with its own lwIP address on the veth. Demos that may run at
    the same time as another need a namespace and subnet of their own."""
    new_run_password()
    if stack == "dpdk":
        from pyctl import netns

        try:
            # a namespace left by a killed run is replaced; one in use is an error
            t = netns.up(netns_name, subnet, fresh=True)
        except netns.SetupError as e:
            raise DemoError(str(e)) from None
        net = ipaddress.ip_network(f"{t.appliance_ip}/{t.prefix}", strict=False)
        taken = {t.client_ip, t.kernel_ip}
        spare = [str(h) for h in net.hosts() if str(h) not in taken | {t.appliance_ip}]
        ips = [t.appliance_ip, *spare[:shards - 1]]
        argv = [sys.executable, "-m", "pyctl", "start", "--stack", "dpdk", "--netns", t.netns,
                "--cores", f"0-{shards - 1}" if shards > 1 else "0",
                "--vdev", f"net_af_packet0,iface={t.iface}",
                "--ip", ",".join(f"{ip}/{t.prefix}" for ip in ips), "--listen-port", str(port),
                "--mtu", str(t.mtu), "--hugepages", "256", "--file-prefix", netns_name,
                # this demo shows lwIP's path: its clients on this machine would otherwise
                # take the shared-memory rings (the kernel-stack demo does)
                "--shm-socket", "none"]
        host = t.appliance_ip
    else:
        argv = [sys.executable, "-m", "pyctl", "start", "--listen",
                f"{HOST}:{0 if shards > 1 else port}"]
        host = HOST
    if shards > 1:
        argv += ["--shards", str(shards)]
    c = Child(f"inreplay ({stack}{f', {shards} shards' if shards > 1 else ''})", argv,
              out / f"inreplay-{stack}.log")
    if shards > 1:  # member 0's address is on the group line
        first = _wait_marker(c, b"inreplay: group ").split(b"inreplay: group ")[1]
        host, _, p = first.split(b",")[0].decode().rpartition(":")
        port = int(p)
    _wait_listening(c, port, b"listening", host)
    return c, host, port


def start_redis(port: int, out: Path) -> Child:
    exe = shutil.which("redis-server")
    if exe is None:
        raise DemoError("--replay local needs Debian's redis-server (make deps installs it)")
    argv = [exe, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
            "--dir", str(out), "--daemonize", "no"]
    c = Child("redis-server", argv, out / "redis-server.log")
    _wait_listening(c, port, b"Ready to accept")
    return c


def _wait_marker(c: Child, marker: bytes) -> bytes:
    """The log line of c that holds marker, once it is there."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if c.proc.poll() is not None:
            raise DemoError(f"{c.name} exited with status {c.proc.returncode} before "
                            f"listening:\n{c.tail()}")
        line = next((x for x in c.log.read_bytes().splitlines() if marker in x), None)
        if line is not None:
            return line
        time.sleep(0.05)
    raise DemoError(f"{c.name} did not start within {START_TIMEOUT} s:\n{c.tail()}")


def _wait_listening(c: Child, port: int, marker: bytes, host: str = HOST) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if c.proc.poll() is not None:
            raise DemoError(f"{c.name} exited with status {c.proc.returncode} before "
                            f"listening:\n{c.tail()}")
        try:
            if marker in c.log.read_bytes():
                with socket.create_connection((host, port), timeout=1.0):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    c.stop()
    raise DemoError(f"{c.name} did not listen on {host}:{port} within {START_TIMEOUT:.0f} s:\n"
                    f"{c.tail()}")


class Line:
    """A live progress line on a terminal; one line every few seconds otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stdout.isatty()
        self.last = 0.0
        self.open = False

    def show(self, text: str) -> None:
        if self.tty:
            cols = shutil.get_terminal_size((120, 20)).columns
            print("\r" + text[: cols - 1].ljust(cols - 1), end="", flush=True)
            self.open = True
        elif time.monotonic() - self.last >= 5.0:
            print(text, flush=True)
            self.last = time.monotonic()

    def say(self, text: str) -> None:
        if self.open:
            print()
            self.open = False
        print(text, flush=True)
