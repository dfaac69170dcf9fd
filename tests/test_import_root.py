"""One import root: `import inreplay` gives the client (`from inreplay import
ReplayClient, ShardedReplayClient, Schema`) and the RL code as inreplay.actors,
inreplay.learner and inreplay.integrations, which in the repository are the top-level
folders actors/, learner/ and integrations/ (the wheel installs them inside inreplay:
tests/test_install.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import inreplay
from pyctl import client, errors, sharded, trajectory

ROOT = Path(__file__).resolve().parent.parent


def test_exports_are_the_clients() -> None:
    assert inreplay.ReplayClient is client.ReplayClient
    assert inreplay.Schema is client.Schema
    assert inreplay.ShardedReplayClient is sharded.ShardedReplayClient
    assert inreplay.TrajectoryWriter is trajectory.TrajectoryWriter
    assert inreplay.errors is errors
    assert set(inreplay.__all__) <= set(dir(inreplay))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = inreplay.nope  # type: ignore[attr-defined]


def test_subpackages_are_the_repository_folders() -> None:
    import inreplay.actors.config
    import inreplay.integrations
    import inreplay.learner

    assert Path(inreplay.actors.config.__file__) == ROOT / "actors" / "config.py"
    assert Path(inreplay.learner.__file__) == ROOT / "learner" / "__init__.py"
    assert Path(inreplay.integrations.__file__) == ROOT / "integrations" / "__init__.py"


def test_importing_the_root_loads_no_client_yet() -> None:
    r = subprocess.run([sys.executable, "-c", "import sys, inreplay; "
                        "print('pyctl.client' in sys.modules)"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.strip() == "False"

