"""The demo harness every ``pyctl demo --algo X`` runs on: the appliance (kernel stack, or
DPDK in a network namespace with a fallback to the kernel stack), the child processes
(own session, log file, SIGTERM then stacks then SIGKILL), the progress line, the
solve test (a greedy screen, then ``eval_episodes`` on fresh seeds) within the run's
two budgets (--minutes and --updates: add_budget_flags) and the end of a run (every
child stopped, summary.json written with its ``budget``, ``solved: true|false`` printed
last, the exit status).

An algorithm's demo supplies what differs (its children, its counters, how to load
the newest parameters, its summary's own fields) and calls :meth:`Run.main`.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from inreplay.rl.config import PASSWORD_ENV, STACKS_SIGNAL, appliance_password, new_run_password

from pyctl import server
from pyctl.proc import die_with_parent, free_port

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
START_TIMEOUT = 30.0
POLL_S = 0.5  # how often the demo reads the counters
MIN_RATE_SPAN_S = POLL_S  # a rate needs the worker seen at least one poll before the stop


def machine(**extra: Any) -> dict[str, Any]:
    """The machine facts every demo's summary.json records, with the demo's own."""
    return {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(), **extra}


class DemoError(RuntimeError):
    """Something the demo cannot go on without (a process died, a server would not start)."""


def add_budget_flags(p: argparse.ArgumentParser, minutes: float) -> None:
    """Every demo's two budgets: --minutes (wall time, default ``minutes``) and --updates
    (learner updates; 0: none). The run stops at whichever is spent first, or when
    solved; summary.json's ``budget`` says which (:meth:`Run.solve`)."""
    p.add_argument("--minutes", type=float, default=minutes,
                   help=f"wall-time budget of the whole run, evaluation included (default "
                        f"{minutes:g})")
    p.add_argument("--updates", type=int, default=0, metavar="N",
                   help="stop training after N learner updates (read every "
                        f"{POLL_S:g} s, so a few more may run), then evaluate; "
                        "0 (default): no update budget")


def check_budget_flags(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The budgets add_budget_flags defined, or a one-line usage error (status 2)."""
    if args.minutes <= 0:
        p.error("--minutes: must be > 0")
    if args.updates < 0:
        p.error("--updates: must be >= 0")


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
    if not server.has_stack("dpdk"):
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


# ---- one run of a demo --------------------------------------------------------------


@dataclass(frozen=True)
class SolveRule:
    """What solved means, for every demo alike: every ``eval_every_s`` seconds the newest
    parameters play ``screen_episodes`` greedy episodes; if all reach ``solve_return``
    they play ``eval_episodes`` more on fresh seeds, and a mean of at least
    ``solve_return`` over those is solved."""

    solve_return: float | None = 475.0  # None: no solve return (ALE): no screens
    screen_episodes: int = 3
    eval_episodes: int = 20
    eval_every_s: float = 5.0

    @classmethod
    def of(cls, cfg: Any) -> SolveRule:
        """The rule of a configuration with these four fields (rl.config.DemoSettings,
        R2D2Config)."""
        return cls(cfg.solve_return, cfg.screen_episodes, cfg.eval_episodes, cfg.eval_every_s)


SCREEN_SEED = 20_000
"""The screens' first seed (the n-th screen plays from SCREEN_SEED + 100 n)."""
FINAL_SEED = 1_000_000
"""The final evaluation's first seed: episodes no screen played."""

Play = Callable[[int, int, "float | None", float], list[float]]
"""play(episodes, seed, stop_below, deadline): the returns of up to ``episodes`` episodes
of the policy under test from seeds seed, seed + 1, ..., stopping after the first below
stop_below or at deadline (time.monotonic())."""


class Run:
    """One demo run: its appliance, its children, the solve loop and the end of the run.

    A demo's ``body(run)`` starts the appliance (:meth:`start_appliance`) and its
    children (:meth:`spawn`), trains with :meth:`solve`, stops the children
    (:meth:`stop_children`) and returns its summary; :meth:`main` wraps it: SIGTERM
    as ^C, every process stopped whatever happens, summary.json with ``wall_s`` and
    ``budget`` (what :meth:`solve` recorded), the
    ``solved:`` line last and the exit status (0, 1 on a crash, 130 interrupted)."""

    def __init__(self, name: str, out: Path, minutes: float, stack: str = "auto", *,
                 netns_name: str = DEMO_NETNS, subnet: str = DEMO_SUBNET,
                 stop_timeout: float = 10.0, unsolved_exit: int = 0) -> None:
        self.name = name
        self.unsolved_exit = unsolved_exit
        self.out = out
        self.budget_s = minutes * 60.0
        self.stack_requested = stack
        self.stack = "kernel" if stack == "auto" else stack
        self.netns_name = netns_name
        self.subnet = subnet
        self.stop_timeout = stop_timeout
        self.line = Line()
        self.t0 = time.monotonic()
        self.server: Child | None = None
        self.children: list[Child] = []
        self.evals: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.budget: dict[str, Any] | None = None  # set by solve(): summary.json's budget

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    @property
    def end(self) -> float:
        """time.monotonic() at which the run's budget (--minutes) is spent."""
        return self.t0 + self.budget_s

    # ---- processes ------------------------------------------------------------------
    def start_appliance(self, shards: int = 1, port: int = 0) -> tuple[str, int]:
        """Start the appliance on the requested stack (auto: DPDK when the machine allows
        it; DPDK falls back to the kernel stack when it cannot start, or when another
        demo holds this run's namespace); its (host, port)."""
        stack = self.stack_requested
        if stack == "auto":
            why_not = dpdk_possible()
            stack = "kernel" if why_not else "dpdk"
            if why_not:
                self.line.say(f"DPDK stack not possible here ({why_not}): using the kernel "
                              "stack")
        if stack == "dpdk" and self._netns_in_use():
            self.line.say("another demo's DPDK appliance is using the namespace this one "
                          "runs in: using the kernel stack")
            stack = "kernel"
        try:
            self.server, host, port = start_appliance(
                stack, port or free_port(HOST), self.out, shards, netns_name=self.netns_name,
                subnet=self.subnet)
        except DemoError as e:
            if stack == "kernel":
                raise
            lines = str(e).splitlines()
            reason = next((x.strip() for x in reversed(lines) if x.strip()), str(e))
            self.line.say(f"the {stack} stack did not start ({reason}); falling back to the "
                          "kernel stack")
            self._netns_down()
            stack = "kernel"
            self.server, host, port = start_appliance(stack, free_port(HOST), self.out, shards)
        self.stack = stack
        group = f" (shard 0 of a group of {shards})" if shards > 1 else ""
        self.line.say(f"inreplay appliance: {stack} stack on {host}:{port}{group}, "
                      f"pid {self.server.proc.pid}")
        return host, port

    def _netns_in_use(self) -> bool:
        from pyctl import netns

        return self.netns_name in netns.namespaces()

    def _netns_down(self) -> None:
        from pyctl import netns

        if self.netns_name in netns.namespaces():
            netns.down(self.netns_name)

    def spawn(self, name: str, argv: list[str]) -> Child:
        """Start a child whose output goes to out/<name>.log (spaces as dashes)."""
        c = Child(name, argv, self.out / f"{name.replace(' ', '-')}.log")
        self.children.append(c)
        return c

    def check_children(self) -> None:
        """A child or the appliance that exited during the run ends it (DemoError)."""
        for c in self.children:
            if not c.alive():
                raise DemoError(f"{c.name} exited with status {c.proc.returncode}:\n{c.tail()}")
        if self.server is not None and not self.server.alive():
            raise DemoError(f"{self.server.name} exited with status "
                            f"{self.server.proc.returncode}:\n{self.server.tail()}")

    def stop_children(self) -> None:
        """SIGTERM every child at once, give them ``stop_timeout`` seconds together and
        kill the rest; a child that had to be killed or exited with an error is named in
        ``problems`` (the summary's ``shutdown_problems``)."""
        for c in self.children:
            if c.alive():
                with contextlib.suppress(ProcessLookupError):
                    c.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for c in self.children:
            rc = c.stop(timeout=max(0.0, deadline - time.monotonic()))
            if rc is None:
                self.problems.append(f"{c.name} (pid {c.proc.pid}) ignored SIGTERM for "
                                     f"{self.stop_timeout:g} s and was killed; its log {c.log} "
                                     f"ends: {c.last_words} (every thread's stack follows "
                                     f"it there)")
            elif rc not in (0, -signal.SIGTERM):
                self.problems.append(f"{c.name} (pid {c.proc.pid}) exited with status {rc}:\n"
                                     f"{c.tail()}")
        self.children = []

    def _stop_server(self) -> None:
        if self.server is not None:
            rc = self.server.stop(timeout=15.0)
            if rc not in (0, -signal.SIGTERM):
                self.line.say(f"{self.server.name} exited with status {rc}")
            self.server = None
        if self.stack == "dpdk":
            self._netns_down()

    # ---- the solve test -------------------------------------------------------------
    @staticmethod
    def greedy(model: Any, env: Any, epsilon: float = 0.0) -> Play:
        """Episodes of model acting by the argmax of its output (epsilon-greedy with
        epsilon) on env, a Config (env_id, max_episode_steps): rl.evaluate.run_episodes."""
        from inreplay.rl.evaluate import run_episodes

        def play(episodes: int, seed: int, stop_below: float | None,
                 deadline: float) -> list[float]:
            return run_episodes(model, env, episodes, seed=seed, epsilon=epsilon,
                                deadline=deadline, stop_below=stop_below)

        return play

    def evaluate(self, play: Play, episodes: int, seed: int, *, kind: str, version: int,
                 stop_below: float | None = None, until: float | None = None,
                 max_s: float = math.inf) -> list[float]:
        """``play(episodes, seed, stop_below, deadline)``, recorded in ``evals``; at most
        ``max_s`` seconds and never past ``until`` (the run's end by default, but at least
        5 s from now)."""
        t = time.monotonic()
        until = max(t + 5.0, self.end) if until is None else until
        rets = play(episodes, seed, stop_below, min(t + max_s, until))
        self.evals.append({"t": round(t - self.t0, 2), "params_version": version, "kind": kind,
                           "returns": rets, "mean": float(np.mean(rets)) if rets else None,
                           "seconds": round(time.monotonic() - t, 2)})
        return rets

    def solve(self, rule: SolveRule, play: Play, *, pull: Callable[[], int],
              status: Callable[[], tuple[str, int, int]], deadline: float, updates: int,
              max_eval_s: float = math.inf) -> dict[str, Any] | None:
        """Train until solved, ``deadline``, or ``updates`` learner updates (0: no update
        budget): every POLL_S seconds check the children and show ``status()`` (its line,
        the newest version and the learner's updates so far); every ``eval_every_s`` a
        newer version is pulled (``pull()`` loads it into the model ``play`` plays and
        returns its version, 0 if none yet) and judged by ``rule``. The solving result
        ({version, returns, t, updates}) or None; ``budget`` (summary.json's) records
        both budgets and which one ended the training: ``ended_by`` solved, updates or
        minutes."""
        last_eval, evaluated, done = 0.0, 0, 0
        self.budget = {"updates": updates, "minutes": round(self.budget_s / 60.0, 3),
                       "ended_by": "minutes", "updates_done": 0}
        while time.monotonic() < deadline:
            time.sleep(POLL_S)
            self.check_children()
            text, version, done = status()
            self.budget["updates_done"] = done
            self.line.show(text)
            if updates and done >= updates:
                self.budget["ended_by"] = "updates"
                self.line.say(f"[{self.elapsed():6.1f}s] {done} learner updates: the "
                              f"--updates {updates} budget is spent")
                return None
            if (rule.solve_return is None or rule.screen_episodes <= 0
                    or time.monotonic() - last_eval < rule.eval_every_s or version == evaluated):
                continue
            last_eval = time.monotonic()
            v = pull()
            if not v:
                continue
            evaluated = v
            screen = self.evaluate(play, rule.screen_episodes,
                                   SCREEN_SEED + 100 * len(self.evals), kind="screen",
                                   version=v, stop_below=rule.solve_return, max_s=max_eval_s)
            if len(screen) < rule.screen_episodes or min(screen) < rule.solve_return:
                continue
            full = self.evaluate(play, rule.eval_episodes, FINAL_SEED, kind="final",
                                 version=v, max_s=max_eval_s)
            self.line.say(f"[{self.elapsed():6.1f}s] parameters v{v}: {len(full)} greedy "
                          f"episodes on fresh seeds, mean return {np.mean(full):.1f}")
            if len(full) == rule.eval_episodes and np.mean(full) >= rule.solve_return:
                self.budget.update(ended_by="solved", solved_at_updates=done)
                return {"version": v, "returns": full, "t": self.elapsed(), "updates": done}
        return None

    def final(self, rule: SolveRule, play: Play, *, pull: Callable[[], int],
              solved: dict[str, Any] | None, until: float | None = None,
              max_s: float = math.inf) -> dict[str, Any]:
        """The result the summary reports: the solving one, or (children stopped) the last
        parameters' ``eval_episodes`` on fresh seeds within what is left of the budget
        (or until ``until``)."""
        if solved is not None:
            return solved
        v = pull()
        rets = self.evaluate(play, rule.eval_episodes, FINAL_SEED, kind="final", version=v,
                             until=until, max_s=max_s) if v else []
        self.line.say(f"[{self.elapsed():6.1f}s] last parameters v{v}: {len(rets)} episodes, "
                      f"mean return {np.mean(rets) if rets else float('nan'):.1f}")
        return {"version": v, "returns": rets, "t": None}

    @staticmethod
    def verdict(rule: SolveRule, result: dict[str, Any]) -> dict[str, Any]:
        """The summary fields every demo reports about its evaluation."""
        rets = result["returns"]
        mean = float(np.mean(rets)) if rets else None
        return {"solved": bool(rule.solve_return is not None and mean is not None
                               and len(rets) == rule.eval_episodes and mean >= rule.solve_return),
                "solve_return": rule.solve_return,
                "solved_at_s": None if result["t"] is None else round(result["t"], 1),
                "eval_return_mean": mean, "eval_episodes": len(rets), "eval_returns": rets,
                "eval_params_version": result["version"]}

    # ---- the whole run --------------------------------------------------------------
    def main(self, body: Callable[[Run], dict[str, Any]],
             report: Callable[[dict[str, Any]], str] | None = None) -> int:
        """Run body with every process stopped at the end whatever happens; write
        out/summary.json (with ``wall_s``, ``stack`` and ``shutdown_problems``), print
        report(summary) (which may write the demo's other outputs) and ``solved:
        true|false`` last. The exit status: 0; ``unsolved_exit`` when the run ended
        without solving an environment that has a solve return; 1 when something crashed
        or a child misbehaved at the stop; 130 when interrupted."""
        import redis

        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "summary.json").unlink(missing_ok=True)

        def on_term(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGTERM, on_term)
        code = 0
        summary: dict[str, Any] | None = None
        try:
            summary = body(self)
        except KeyboardInterrupt:
            self.line.say("interrupted: stopping every process")
            code = 130
        except DemoError as e:
            self.line.say(f"{self.name}: {e}")
            code = 1
        except redis.RedisError as e:
            self.line.say(f"{self.name}: the appliance stopped answering ({e}); see "
                          f"{self.out}/inreplay-{self.stack}.log")
            code = 1
        finally:
            signal.signal(signal.SIGTERM, old)
            self.stop_children()
            self._stop_server()
        for p in self.problems:
            self.line.say(f"{self.name}: {p}")
        if self.problems:
            code = code or 1
        if summary is None:
            return code
        summary["stack"] = self.stack
        summary["wall_s"] = round(self.elapsed(), 1)
        summary["budget"] = self.budget
        summary["shutdown_problems"] = [p.splitlines()[0] for p in self.problems]
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        if report is not None:
            print("\n" + report(summary))
        print(f"solved: {'true' if summary['solved'] else 'false'}")
        if code == 0 and summary.get("solve_return") is not None and not summary["solved"]:
            code = self.unsolved_exit
        return code
