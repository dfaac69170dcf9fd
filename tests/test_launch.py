"""The actor launcher: local processes and Ray actors, restarted on failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from inreplay.rl.config import Keys, preset
from inreplay.rl.env import env_spec
from inreplay.rl.model import build_model, params_to_blob

from pyctl.errors import decode_info

ROOT = Path(__file__).resolve().parent.parent


def _prepare(port: int) -> tuple[str, str, redis.Redis]:
    """A fresh table and key prefix with published parameters, as the learner leaves them."""
    tag = uuid.uuid4().hex[:8]
    table, prefix = f"launch-{tag}", f"launch-{tag}"
    cfg = preset("CartPole-v1", port=port, prefix=prefix, table=table)
    r = redis.Redis(port=port, protocol=2)
    r.execute_command("REPLAY.CREATE", table, "CAPACITY", 100_000)
    keys = Keys(prefix)
    r.mset({keys.params: params_to_blob(build_model(env_spec(cfg), cfg.hidden)),
            keys.version: 1})
    return table, prefix, r


def _launch(port: int, table: str, prefix: str, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    return subprocess.Popen(
        [sys.executable, "-m", "inreplay.actors.launch", "--num-actors", "2", "--port", str(port),
         "--env", "CartPole-v1", "--table", table, "--prefix", prefix,
         "--samples-per-insert", "0", "--status-every", "1", *extra],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _size(r: redis.Redis, table: str) -> int:
    return int(decode_info(r.execute_command("REPLAY.INFO", table))["size"])


def test_local_backend_runs_actors_to_their_step_budget(inreplay_server: object) -> None:
    port = inreplay_server.port  # type: ignore[attr-defined]
    table, prefix, r = _prepare(port)
    p = _launch(port, table, prefix, "--backend", "local", "--max-steps", "300")
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    assert "launch: stopped" in out
    assert _size(r, table) >= 2 * 300 - 2 * 32  # each actor's last partial batch is flushed too
    r.close()


def test_ray_backend_restarts_a_killed_actor(inreplay_server: object) -> None:
    ray = pytest.importorskip("ray")
    port = inreplay_server.port  # type: ignore[attr-defined]
    table, prefix, r = _prepare(port)
    p = _launch(port, table, prefix, "--backend", "ray", "--cpus-per-actor", "0.5")
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while _size(r, table) < 1000:
            assert p.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.5)
        ray.init(address="auto", namespace="inreplay", log_to_driver=False)
        try:
            actor = ray.get_actor("inreplay-actor-0")
            pid = ray.get(actor.pid.remote(), timeout=30)
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 90
            while True:
                try:
                    new = ray.get(actor.pid.remote(), timeout=10)
                    if new != pid:
                        break
                except Exception:  # restarting
                    pass
                assert time.monotonic() < deadline, "Ray did not restart the killed actor"
                time.sleep(0.5)
            before = ray.get(actor.stats.remote(), timeout=30)["inserted"]
            deadline = time.monotonic() + 60
            while ray.get(actor.stats.remote(), timeout=30)["inserted"] <= before:
                assert time.monotonic() < deadline, "the restarted actor inserts nothing"
                time.sleep(0.5)
        finally:
            ray.shutdown()
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=90)
        assert p.returncode == 0, out
        assert "was restarted by Ray" in out and "launch: stopped" in out
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        r.close()
