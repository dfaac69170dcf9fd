"""RQ (the job queue from PyPI) against the appliance and, as the reference,
stock redis-server: jobs enqueued, a real ``rq worker`` run as a subprocess
(burst mode, and a long-running worker served by its blocking pop), results,
failures, dependencies, scheduled jobs and cancellation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

rq = pytest.importorskip("rq")
from rq import Queue, Retry  # noqa: E402
from rq.job import JobStatus  # noqa: E402

if TYPE_CHECKING:
    from conftest import ServerProcess

TESTS = Path(__file__).resolve().parent


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p)
    return env


def _worker_argv(server: ServerProcess, *args: str) -> list[str]:
    auth = f":{server.password}@" if server.password is not None else ""
    url = f"redis://{auth}{server.host}:{server.port}"
    return [sys.executable, "-m", "rq.cli", "worker", *args, "--url", url]


def test_rq_burst_worker_runs_jobs(server: ServerProcess) -> None:
    r = server.client()
    try:
        q = Queue("default", connection=r)
        hi = Queue("high", connection=r)
        add = q.enqueue("rq_jobs.add", 2, 3, result_ttl=300, meta={"run": "t1"})
        fail = q.enqueue("rq_jobs.boom", retry=Retry(max=1))
        dep = q.enqueue("rq_jobs.scale", [1.0, 2.5], 2.0, depends_on=add)
        later = q.enqueue_in(timedelta(milliseconds=300), "rq_jobs.add", 10, 20)
        first = hi.enqueue("rq_jobs.add", 5, 5, job_timeout=30)
        gone = q.enqueue("rq_jobs.add", 0, 0)
        gone.cancel()
        assert q.count == 2 and hi.count == 1
        assert dep.get_status() == JobStatus.DEFERRED
        time.sleep(0.5)  # the scheduled job is due when the worker starts
        p = subprocess.run(
            _worker_argv(server, "high", "default", "--burst", "--with-scheduler"),
            env=_worker_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-3000:]
        assert add.get_status(refresh=True) == JobStatus.FINISHED
        assert add.return_value() == 5 and add.meta == {"run": "t1"}
        assert dep.get_status(refresh=True) == JobStatus.FINISHED
        assert dep.return_value() == [2.0, 5.0]
        assert later.get_status(refresh=True) == JobStatus.FINISHED and later.return_value() == 30
        assert first.return_value() == 10
        assert fail.get_status(refresh=True) == JobStatus.FAILED
        assert "boom from a job" in (fail.latest_result().exc_string or "")
        assert gone.get_status(refresh=True) == JobStatus.CANCELED
        assert q.failed_job_registry.get_job_ids() == [fail.id]
        assert len(q.finished_job_registry) == 3 and len(hi.finished_job_registry) == 1
        assert q.count == 0 and hi.count == 0
    finally:
        r.flushall()
        r.close()


def test_rq_long_running_worker(server: ServerProcess) -> None:
    r = server.client()
    w = subprocess.Popen(
        _worker_argv(server, "live"), env=_worker_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not rq.Worker.all(connection=r):  # registered, then waiting in its blocking pop
            assert time.monotonic() < deadline and w.poll() is None, "the worker did not start"
            time.sleep(0.05)
        time.sleep(0.3)
        job = Queue("live", connection=r).enqueue("rq_jobs.scale", [3.0], 3.0)
        while job.get_status(refresh=True) != JobStatus.FINISHED:
            assert time.monotonic() < deadline, f"job {job.get_status()}"
            time.sleep(0.05)
        assert job.return_value() == [9.0]
        w.send_signal(signal.SIGTERM)  # a warm shutdown
        out, _ = w.communicate(timeout=30)
        assert w.returncode == 0, out[-3000:]
        assert rq.Worker.all(connection=r) == []
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
        r.flushall()
        r.close()
