"""`pyctl status` and `pyctl stop` know a `pyctl start --server redis` appliance: the
stock redis-server it became records itself in the run directory as a native server
does (same pid, its start time and executable), so status reports it running with what
it holds, and stop signals it only while that pid is still that redis-server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from pyctl.proc import free_ports

ROOT = Path(__file__).resolve().parent.parent


def _pyctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyctl", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def redis_host(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int, dict[str, str]]:
    port = free_ports("127.0.0.1", 1)[0]
    env = dict(os.environ, PYTHONPATH=str(ROOT), INREPLAY_RUN_DIR=str(tmp_path / "run"))
    proc = subprocess.Popen([sys.executable, "-m", "pyctl", "start", "--server", "redis",
                             "--listen", f"127.0.0.1:{port}"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port, socket_timeout=10)
    deadline = time.monotonic() + 20
    while True:
        try:
            r.ping()
            break
        except redis.ConnectionError:
            assert proc.poll() is None and time.monotonic() < deadline, "did not start"
            time.sleep(0.05)
    r.execute_command("REPLAY.CREATE", "t", "CAPACITY", 8)
    r.close()
    yield proc, port, env
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=20)


def test_status_reports_a_redis_host(
        redis_host: tuple[subprocess.Popen[bytes], int, dict[str, str]]) -> None:
    proc, port, env = redis_host
    st = _pyctl(env, "status")
    assert st.returncode == 0, st.stdout + st.stderr
    assert (f"running, pid {proc.pid}, redis-server with the REPLAY.* module on "
            f"127.0.0.1:{port}") in st.stdout, st.stdout
    assert "tables: t 0/8" in st.stdout
    js = json.loads(_pyctl(env, "status", "--json").stdout)
    assert js["running"] and js["server"] == "redis" and js["pid"] == proc.pid


def test_stop_stops_a_redis_host(
        redis_host: tuple[subprocess.Popen[bytes], int, dict[str, str]]) -> None:
    proc, port, env = redis_host
    stop = _pyctl(env, "stop", "--listen", f"127.0.0.1:{port}")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert proc.wait(timeout=20) == 0
    gone = _pyctl(env, "status")
    assert gone.returncode == 3 and "not running" in gone.stdout
