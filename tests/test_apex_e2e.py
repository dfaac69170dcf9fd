"""End to end: actors insert, the learner samples, updates priorities and publishes
parameters, the actors pick the new version up — each step read back from the
server's own counters. Then `pyctl demo` as a user runs it, briefly."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from helpers import assert_learned  # noqa: E402
from inreplay.actors.actor import Actor  # noqa: E402
from inreplay.actors.demo import UNSOLVED_EXIT  # noqa: E402
from inreplay.learner.learner import Learner  # noqa: E402
from inreplay.rl.config import Keys, preset  # noqa: E402

from pyctl.client import ReplayClient  # noqa: E402
from pyctl.proc import descendants  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Worker(threading.Thread):
    def __init__(self, target: Callable[[], Any], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.fn = target
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.fn()
        except BaseException as e:  # reported by the test
            self.error = e


@pytest.mark.parametrize("server_kind", ["inreplay", "redis"])
def test_actors_learner_and_appliance(server_kind: str, server_factory: Callable[..., Any],
                                      tmp_path: Path) -> None:
    srv = server_factory(server_kind)
    replay = "appliance" if server_kind == "inreplay" else "local"
    cfg = preset("CartPole-v1", port=srv.port, replay=replay, out_dir=str(tmp_path),
                 num_actors=2, actor_batch=16, learning_starts=200, batch_size=32,
                 publish_every=5, target_update=20, capacity=5_000, samples_per_insert=0.0,
                 log_every_s=0.3, checkpoint_every=0, hidden=32)
    keys = Keys(cfg.prefix)
    torch.set_num_threads(1)
    stop = threading.Event()
    learner = Learner(cfg, stop=stop, progress=False)
    actors = [Actor(cfg, i, stop=stop, log=lambda msg: None) for i in range(cfg.num_actors)]
    workers = [Worker(learner.run, "learner")] + [
        Worker(a.run, f"actor {a.id}") for a in actors]
    r = srv.client()
    rc = ReplayClient(connection=r)

    def table() -> dict[str, Any]:
        if replay == "appliance":
            return rc.info(cfg.table)
        assert learner.replay is not None
        return learner.replay.counters()  # type: ignore[no-any-return]

    def check_workers() -> None:
        for w in workers:
            assert w.error is None, f"{w.name} failed: {w.error!r}"

    try:
        for w in workers:
            w.start()
        # 1. the learner publishes its first parameters; actors start from them
        _wait(lambda: int(r.get(keys.version) or 0) >= 1, 30, "the first parameters")
        _wait(lambda: all(a.version >= 1 for a in actors), 30, "actors to pull version 1")
        # 2. actors insert batches with their own priorities; frames are counted
        _wait(lambda: table()["inserts"] >= cfg.learning_starts, 30, "actor inserts")
        check_workers()
        assert int(r.get(keys.frames) or 0) >= cfg.learning_starts
        if replay == "appliance":
            assert table()["max_priority"] > 0  # not MAX/default: the actors' |delta|
        # 3. the learner samples, updates priorities, publishes new versions
        _wait(lambda: table()["updates"] >= 5 * cfg.batch_size, 30, "priority updates")
        _wait(lambda: int(r.get(keys.version) or 0) >= 3, 30, "new parameter versions")
        # 4. the actors pick the new version up
        _wait(lambda: all(a.version >= 3 and a.pulls >= 2 for a in actors), 30,
              "actors to pull a new version")
        _wait(lambda: int(r.get(keys.samples) or 0) > 0, 10, "the learner's sample counter")
        check_workers()
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=30)
    check_workers()
    assert not any(w.is_alive() for w in workers)

    info = table()
    assert learner.steps >= 5
    assert info["samples"] >= learner.steps * cfg.batch_size
    assert info["sample_calls"] >= learner.steps
    assert info["updates"] + info["stale_updates"] >= (learner.steps - 1) * cfg.batch_size
    frames = int(r.get(keys.frames))
    transitions = int(r.get(keys.transitions))
    assert frames == sum(a.frames for a in actors)  # every actor flushed its count on exit
    assert transitions == sum(a.inserted for a in actors)
    if replay == "appliance":
        assert info["inserts"] == transitions
    else:
        learner.replay.ingest()  # type: ignore[attr-defined]
        assert learner.replay.counters()["inserts"] == transitions
        assert r.llen(keys.experience) == 0
    assert int(r.get(keys.version)) == learner.version >= 3
    assert int(r.get(keys.samples)) == learner.samples
    # episode returns were reported: "unix_time actor_id return frames"
    rets = [x.split() for x in r.lrange(keys.returns, 0, -1)]
    assert rets and all(len(x) == 4 and float(x[2]) > 0 for x in rets)
    # the learner's metrics and checkpoint
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("wall_s,learner_steps") and len(rows) >= 2
    assert (tmp_path / "checkpoint.pt").exists()
    learner.close()
    for a in actors:
        a.close()
    r.close()


def _start_time(pid: int) -> int | None:
    """When a process started (clock ticks since boot), or None if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def _demo_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class DemoRun:
    """`pyctl demo ...` (which hands over to actors.demo) in a subprocess; remembers every
    descendant it had."""

    def __init__(self, *args: str) -> None:
        # SIGINT as a terminal gives it: a test run started in the background (nohup, a
        # shell's `&`) inherits SIGINT ignored, and Python then never raises
        # KeyboardInterrupt, so the interrupt test would wait for nothing
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pyctl", "demo", *args], cwd=ROOT, env=_demo_env(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=_sigint_default)
        self.seen: set[int] = set()
        self.started: dict[int, int] = {}
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def watch(self, until: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None and not until():
            self.seen |= set(descendants(self.proc.pid))
            self.watch_starts()
            time.sleep(0.1)

    def wait(self, timeout: float) -> int:
        self.watch(lambda: False, timeout)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("pyctl demo did not finish:\n" + "".join(self.lines[-30:]))
        self.reader.join(timeout=10)
        return self.proc.returncode

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def watch_starts(self) -> None:
        for p in self.seen - set(self.started):
            st = _start_time(p)
            if st is not None:
                self.started[p] = st

    def leftovers(self, grace: float = 10.0) -> list[str]:
        """Descendants still running `grace` seconds from now at the latest (the same
        process: pid and start time, as pids are reused; not a zombie waiting for the
        init process to reap it), with their command lines."""
        deadline = time.monotonic() + grace
        while True:
            out = []
            for p, st in self.started.items():
                if _start_time(p) != st or _state(p) in ("Z", "X", None):
                    continue
                cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                out.append(f"{p} ({_state(p)}): {cmd.strip()}")
            if not out or time.monotonic() > deadline:
                return out
            time.sleep(0.2)


@pytest.mark.slow
def test_pyctl_demo_runs_writes_summary_and_cleans_up(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    # a budget of learner updates, not of time: the learner is seen working for 300
    # updates however late a loaded machine starts it (--minutes only guards a hang)
    run = DemoRun("--updates", "300", "--minutes", "10", "--out", str(out),
                  "--eval-episodes", "2", "--screen-episodes", "0", "--learning-starts", "300",
                  "--eval-max-s", "5")
    rc = run.wait(timeout=12 * 60)
    s = json.loads((out / "summary.json").read_text())
    assert s["budget"]["ended_by"] == "updates" and s["budget"]["updates"] == 300, s["budget"]
    assert s["learner_steps"] >= 300 and s["budget"]["updates_done"] >= 300
    # 300 updates rarely solve CartPole: the exit status says which it was
    assert rc == (0 if s["solved"] else UNSOLVED_EXIT), run.output[-4000:]
    assert run.output.strip().splitlines()[-1] == f"solved: {str(s['solved']).lower()}"
    assert len(run.seen) >= 4  # server, learner and 2 actors were separate processes
    for k in ("env", "stack", "solved", "eval_return_mean", "eval_episodes", "wall_s",
              "env_frames", "learner_steps"):
        assert k in s, k
    from inreplay.rl.harness import DEMO_NETNS, dpdk_possible

    # --stack auto: DPDK in a namespace when this machine allows it (CI: root, DPDK built)
    expected = "kernel" if dpdk_possible() else "dpdk"
    assert s["env"] == "CartPole-v1" and s["stack"] == expected and s["replay"] == "appliance"
    assert f"{expected} stack on" in run.output
    if expected == "dpdk":
        from pyctl import netns

        assert DEMO_NETNS not in netns.namespaces(), "the demo removed its namespace"
    assert s["env_frames"] > 0 and s["learner_steps"] > 0 and s["eval_episodes"] == 2
    assert s["actor_frames_per_s"] and s["actor_frames_per_s"] > 0, run.output[-2000:]
    assert s["learner_steps_per_s"] and s["learner_steps_per_s"] > 0, run.output[-2000:]
    fp = s["replay_footprint"]  # CartPole keeps its records
    assert fp["storage"] == "records (REPLAY.ADD)" and fp["items"] > 0
    assert 0 < s["replay_bytes_per_transition"] < 100
    assert (out / "returns.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "checkpoint.pt").exists() and (out / "metrics.csv").exists()
    from inreplay.learner.evaluate import load_checkpoint

    _, cfg, meta = load_checkpoint(str(out / "evaluated.pt"))  # what the evaluation played
    assert cfg.env_id == "CartPole-v1" and meta["params_version"] == s["eval_params_version"]
    assert not run.leftovers()


APEX_UPDATES = 40_000
"""The learner updates the Ape-X demo gets to solve CartPole (make demo solved in 8,410,
docs/patterns.md)."""
HANG_MINUTES = 30
"""Only a guard against a hung run: learning is judged in updates, not wall time."""


@pytest.mark.slow
def test_pyctl_demo_on_ray_through_two_shards_solves_cartpole(tmp_path: Path) -> None:
    """The actors as Ray actors on a local Ray instance, the replay a group of
    two shards sampled exactly across both; CartPole-v1 solved (greedy evaluation >= 475
    over 20 episodes) within APEX_UPDATES learner updates."""
    pytest.importorskip("ray")
    out = tmp_path / "demo"
    run = DemoRun("--backend", "ray", "--shards", "2", "--stack", "kernel", "--out", str(out),
                  "--updates", str(APEX_UPDATES), "--minutes", str(HANG_MINUTES))
    rc = run.wait(timeout=HANG_MINUTES * 60 + 120)
    s = json.loads((out / "summary.json").read_text())
    assert_learned(s, APEX_UPDATES)
    assert rc == 0, run.output[-4000:]
    assert "shard 0 of a group of 2" in run.output
    assert s["shards"] == 2 and s["backend"] == "ray"
    assert run.output.strip().splitlines()[-1] == "solved: true"
    log = (out / "actors.log").read_text()
    assert "launch: 2 actors on ray" in log and "running on Ray" in log
    # how the launcher ended (its own "launch: stopped", or the demo's SIGTERM, which the
    # demo accepts) matters less than that nothing of Ray is left running
    assert not run.leftovers()


@pytest.mark.slow
def test_pyctl_demo_stops_everything_on_interrupt(tmp_path: Path) -> None:
    run = DemoRun("--minutes", "5", "--out", str(tmp_path / "demo"))
    try:
        run.watch(lambda: "learner pid" in run.output and len(run.seen) >= 4, timeout=60)
        assert len(run.seen) >= 4, run.output  # server, learner, 2 actors
        run.proc.send_signal(signal.SIGINT)
        rc = run.wait(timeout=60)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
    assert rc == 130, run.output
    assert "interrupted" in run.output
    assert not run.leftovers()


@pytest.mark.slow
def test_pyctl_demo_keeps_its_result_when_a_child_hangs_at_shutdown(tmp_path: Path) -> None:
    """The learner is frozen (SIGSTOP: it cannot act on SIGTERM, as if stuck in a call)
    once it trains; the demo kills it after --stop-timeout, names it, and still writes
    summary.json and prints its verdict from what it measured."""
    out = tmp_path / "demo"
    run = DemoRun("--minutes", "0.6", "--out", str(out), "--eval-episodes", "2",
                  "--screen-episodes", "0", "--learning-starts", "300", "--eval-max-s", "5",
                  "--stop-timeout", "3")
    try:
        run.watch(lambda: "learner pid" in run.output, timeout=60)
        pid = int(run.output.split("learner pid ")[1].split(";")[0])
        metrics = out / "metrics.csv"
        t0 = time.monotonic()
        run.watch(lambda: (metrics.exists() and len(metrics.read_text().splitlines()) >= 2)
                  or time.monotonic() - t0 > 20, timeout=30)
        os.kill(pid, signal.SIGSTOP)
        rc = run.wait(timeout=150)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
    assert rc == 1, run.output[-4000:]
    assert f"learner (pid {pid}) ignored SIGTERM for 3 s and was killed" in run.output
    assert run.output.strip().splitlines()[-1] in ("solved: true", "solved: false")
    s = json.loads((out / "summary.json").read_text())
    assert len(s["shutdown_problems"]) == 1 and s["shutdown_problems"][0].startswith(
        f"learner (pid {pid}) ignored SIGTERM"), s["shutdown_problems"]
    assert s["env_frames"] > 0 and s["eval_episodes"] == 2
    assert not run.leftovers()


@pytest.mark.slow
def test_pyctl_demo_breakout_writes_frames_once(tmp_path: Path) -> None:
    """The Atari demo (make bench runs it for 2 minutes): its actors store each frame
    once (a TRAJECTORY table) and summary.json says what a transition cost the server."""
    pytest.importorskip("ale_py")
    out = tmp_path / "breakout"
    run = DemoRun("--env-id", "ALE/Breakout-v5", "--stack", "kernel", "--minutes", "0.75",
                  "--out", str(out), "--eval-episodes", "1", "--screen-episodes", "0",
                  "--learning-starts", "500", "--eval-max-s", "5", "--batch-size", "32")
    rc = run.wait(timeout=240)
    assert rc == 0, run.output[-4000:]
    s = json.loads((out / "summary.json").read_text())
    fp = s["replay_footprint"]
    assert fp["storage"] == "frames once (TRAJECTORY table)", fp
    assert fp["items"] > 500 and s["learner_steps"] > 0
    assert s["replay_bytes_per_transition"] <= 160, fp
    assert "B per transition (frames once" in run.output
    assert not run.leftovers()


def test_pyctl_demo_has_one_flag_per_concept() -> None:
    p = subprocess.run([sys.executable, "-m", "pyctl", "demo", "--help"], cwd=ROOT,
                       env=_demo_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    flags = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", p.stdout)
    for flag in ("--actors", "--out", "--stop-timeout", "--minutes"):
        assert flag in flags, flag
    for flag in ("--num-actors", "--out-dir", "--host"):
        assert flag not in flags, flag
    # the description's usage lines name only flags the parser takes
    head, options = p.stdout.split("\noptions:", 1)
    taken = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", options))
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", head.split("\n\n", 1)[1]))
    assert named <= taken, f"the description names flags pyctl demo lacks: {named - taken}"


@pytest.mark.parametrize("argv, message", [
    (["--bogus"], "pyctl demo: unrecognized arguments: --bogus"),
    (["--batch-size", "0"], "pyctl demo: --batch-size must be >= 1"),
    (["--config", "/nonexistent/c.json"], "--config /nonexistent/c.json: No such file"),
    (["--stop-timeout", "-1"], "--stop-timeout: must be >= 0"),
])
def test_pyctl_demo_usage_errors_are_one_line(argv: list[str], message: str) -> None:
    p = subprocess.run([sys.executable, "-m", "pyctl", "demo", *argv], cwd=ROOT,
                       env=_demo_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr


def test_run_rates_count_the_exit_publish_and_say_unknown_for_a_late_starter() -> None:
    from inreplay.actors.demo import run_rates
    from inreplay.rl.harness import MIN_RATE_SPAN_S

    # actors seen at t=10 with 100 frames, learner at t=19.9 (one poll before the stop at
    # t=20 would be 19.5): the learner's rate is unknown, not zero
    first = {"frames": (10.0, 100), "samples": (19.9, 64)}
    after = {"frames": 2100, "samples": 640}  # read after the children stopped
    rates = run_rates(first, after, 20.0, batch_size=32)
    assert rates["frames_per_s"] == 200.0 and rates["steps_per_s"] is None
    first["samples"] = (20.0 - MIN_RATE_SPAN_S, 64)  # seen one poll before: a rate
    assert run_rates(first, after, 20.0, 32)["steps_per_s"] == (640 - 64) / 32 / MIN_RATE_SPAN_S
    assert run_rates({"frames": None, "samples": None}, after, 20.0, 32) == {
        "frames_per_s": None, "steps_per_s": None}
