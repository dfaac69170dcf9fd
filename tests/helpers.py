"""Helpers shared by the test suites (one definition each; import from here).

pytest puts tests/ on sys.path (no __init__.py, the default import mode), so a
test file imports these as ``from helpers import free_port``.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pyctl import proc

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent


free_port = proc.free_port
die_with_parent = proc.die_with_parent
mbulk = proc.resp_command


def bulk(b: bytes | None) -> bytes:
    """A RESP2 bulk string reply, or the null bulk for None."""
    return b"$-1\r\n" if b is None else b"$%d\r\n%s\r\n" % (len(b), b)


def crc64(data: bytes) -> int:
    """Redis's CRC-64 (Jones, reflected), bit by bit: DUMP's trailer."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc


def dump_payload(body: bytes) -> bytes:
    """A DUMP payload around an RDB value (type byte and encoding): RDB version 10 and
    the CRC-64, as RESTORE checks them."""
    body += bytes([10, 0])
    return body + crc64(body).to_bytes(8, "little")


def checkout_env(**extra: str) -> dict[str, str]:
    """This process's environment with the checkout first on PYTHONPATH (a child's
    ``python -m pyctl`` or ``-m inreplay.integrations...`` finds this tree), plus extra."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def run_pyctl(rundir: Path, *args: str, timeout: float = 60
              ) -> subprocess.CompletedProcess[str]:
    """python -m pyctl ARGS from the checkout, its run directory rundir; output captured."""
    return subprocess.run([sys.executable, "-m", "pyctl", *args], cwd=ROOT,
                          env=checkout_env(INREPLAY_RUN_DIR=str(rundir)), capture_output=True,
                          text=True, timeout=timeout)


def require(module: str, extra: str) -> ModuleType:
    """Import an optional dependency, or fail (not skip) the module's tests saying which
    extra installs it: make deps installs every extra the tests need."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.fail(f"{module} is not installed ({e}): pip install '.[{extra}]' "
                    f"(make deps installs every extra the tests need)", pytrace=False)


def group_members(started: Any) -> list[str]:
    """The members' addresses from pyctl start --shards's output."""
    line = next(ln for ln in started.stdout.splitlines() if ln.startswith("inreplay: group "))
    return line.removeprefix("inreplay: group ").split(",")


def assert_learned(summary: dict[str, Any], updates: int, solve_return: float = 475.0,
                   episodes: int = 20) -> None:
    """A demo run (its summary.json) learned: solved, i.e. a greedy evaluation mean of at
    least solve_return over episodes fresh episodes, within its --updates budget of
    learner updates. Wall time is no part of it (its --minutes is only the hang guard)."""
    budget = summary.get("budget") or {}
    ended = budget.get("ended_by")
    assert summary.get("solved") is True and ended == "solved", (
        f"not learned within {updates} learner updates: the run ended by {ended!r} after "
        f"{budget.get('updates_done')} updates in {summary.get('wall_s')} s, evaluation mean "
        f"{summary.get('eval_return_mean')} over {summary.get('eval_episodes')} episodes "
        f"(needs >= {solve_return} over {episodes}); budget {budget}")
    assert budget["updates"] == updates and budget["solved_at_updates"] <= updates, budget
    assert summary["eval_episodes"] == episodes and summary["eval_return_mean"] >= solve_return
