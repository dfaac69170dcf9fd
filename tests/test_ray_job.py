"""python -m inreplay.actors.ray_job on a local Ray instance: CartPole through 2 Ray-started replay
shards, the learner and 2 actors as Ray actors; SIGTERM stops everything; a killed shard
is reported and restarted from its snapshot (or ends the run when there are none)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from inreplay.actors.ray_job import cluster_subnet

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

SMALL = ["--shards", "2", "--env", "CartPole-v1", "--num-actors", "2", "--cpus-per-shard",
         "0.25", "--cpus-per-learner", "0.5", "--cpus-per-actor", "0.25",
         "--learning-starts", "200", "--batch-size", "32", "--capacity", "5000",
         "--checkpoint-every", "0", "--status-every", "2", "--hidden", "32"]


class Job:
    """The job as a subprocess, its stdout lines collected by a thread."""

    def __init__(self, tmp: Path, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "inreplay.actors.ray_job", *SMALL, "--out-dir", str(tmp / "out"),
             *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        self.lines: list[str] = []
        self.q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for ln in self.proc.stdout:
            self.lines.append(ln.rstrip())
            self.q.put(ln.rstrip())

    def wait_for(self, pattern: str, timeout: float = 180) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        for ln in list(self.lines):
            if m := re.search(pattern, ln):
                return m
        while time.monotonic() < deadline:
            try:
                ln = self.q.get(timeout=1)
            except queue.Empty:
                if self.proc.poll() is not None and self.q.empty():
                    break
                continue
            if m := re.search(pattern, ln):
                return m
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.lines[-40:]))

    def finish(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            time.sleep(0.5)  # the reader thread drains the pipe

    def learner_steps(self) -> int:
        """The learner's steps in the newest progress line."""
        self.wait_for(r"ray_job: learner \d+ steps")
        last = [m for ln in list(self.lines) if (m := re.search(r"ray_job: learner (\d+) steps",
                                                                ln))][-1]
        return int(last.group(1))


def _server_pids(group: str) -> dict[int, int]:
    """shard index -> pid of the `pyctl start` process serving it in this group (not a
    BGSAVE child forked from it, which has the same command line)."""
    found: dict[int, tuple[int, int]] = {}  # pid -> (shard, parent pid)
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if b"--shard-group" in argv and group.encode() in argv:
            idx = argv.index(b"--shard-index")
            found[int(d.name)] = (int(argv[idx + 1]), ppid)
    return {shard: pid for pid, (shard, ppid) in found.items() if ppid not in found}


def _group(job: Job) -> str:
    return job.wait_for(r"ray_job: replay group (\S+)").group(1)


def test_cluster_subnet() -> None:
    assert cluster_subnet(["10.0.0.5"]) == "10.0.0.5/32"
    assert cluster_subnet(["10.0.0.5", "10.0.0.6"]) == "10.0.0.4/30"
    assert cluster_subnet(["10.0.1.9", "10.0.0.6"]) == "10.0.0.0/23"


def test_cartpole_on_two_shards_until_sigterm(tmp_path: Path) -> None:
    job = Job(tmp_path)
    try:
        group = _group(job)
        assert len(group.split(",")) == 2
        pids = _server_pids(group)
        assert sorted(pids) == [0, 1]
        # the learner trains from both shards and the actors feed them
        deadline = time.monotonic() + 180
        while job.learner_steps() < 30:
            assert time.monotonic() < deadline, "\n".join(job.lines[-30:])
            job.wait_for(r"ray_job: learner \d+ steps")
            time.sleep(1)
        job.proc.send_signal(signal.SIGTERM)
        assert job.finish() == 0, "\n".join(job.lines[-30:])
    finally:
        if job.proc.poll() is None:
            job.proc.kill()
    assert job.lines[-1] == "ray_job: stopped"
    line = [ln for ln in job.lines if re.search(r"learner \d+ steps", ln)][-1]
    frames = int(re.search(r"(\d+) frames", line).group(1))  # type: ignore[union-attr]
    assert frames > 0
    assert not any(Path(f"/proc/{p}").exists() for p in pids.values()), "a shard outlived the job"


def test_killed_shard_restarts_from_its_snapshot(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    # enough steps that the run outlasts the kill: on a quiet machine this learner makes
    # ~400 steps/s, and a limit of 400 ended the run before the test could kill a shard
    job = Job(tmp_path, "--snapshot-dir", str(snap), "--snapshot-every", "1",
              "--max-learner-steps", "8000")
    try:
        group = _group(job)
        addr1 = group.split(",")[1]
        # wait for training and for a snapshot of shard 1 holding the table
        deadline = time.monotonic() + 180
        while job.learner_steps() < 20:
            assert time.monotonic() < deadline, "\n".join(job.lines[-30:])
            assert job.proc.poll() is None, "\n".join(job.lines[-30:])
            time.sleep(1)
        time.sleep(1.5)
        assert list((snap / "shard-1").glob("*.snap")), "no snapshot of shard 1"
        pid = _server_pids(group)[1]
        before = job.learner_steps()
        n_lines = len(job.lines)
        os.kill(pid, signal.SIGKILL)
        job.wait_for(rf"ray_job: shard 1 \({re.escape(addr1)}\) server exited with signal 9")
        job.wait_for(rf"ray_job: shard 1 restarted from .*shard-1 on {re.escape(addr1)}")
        new_pid = _server_pids(group)[1]
        assert new_pid != pid
        # the learner and actors that lost the shard are replaced, and the run finishes
        job.wait_for(r"ray_job: the learner reached --max-learner-steps", timeout=600)
        assert job.finish() == 0, "\n".join(job.lines[-30:])
    finally:
        if job.proc.poll() is None:
            job.proc.kill()
    assert job.lines[-1] == "ray_job: stopped"
    assert re.search(r"1 shard restarts", "\n".join(job.lines))
    # the replaced learner's steps count on from the first one's (--max-learner-steps is
    # the run's total)
    after = [int(m.group(1)) for ln in job.lines[n_lines:]
             if (m := re.search(r"ray_job: learner (\d+) steps", ln))]
    assert after and min(after) >= before


def test_killed_shard_without_snapshots_ends_the_run(tmp_path: Path) -> None:
    job = Job(tmp_path)
    try:
        group = _group(job)
        job.wait_for(r"ray_job: learner \d+ steps")
        os.kill(_server_pids(group)[0], signal.SIGKILL)
        job.wait_for(r"ray_job: shard 0 is gone and no --snapshot-dir is configured")
        assert job.finish() == 1
    finally:
        if job.proc.poll() is None:
            job.proc.kill()
    assert job.lines[-1] == "ray_job: stopped"
    assert not _server_pids(group), "a shard outlived the job"
