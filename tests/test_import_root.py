"""One import root: `import inreplay` gives the client (`from inreplay import
ReplayClient, ShardedReplayClient, Schema`) and the RL code as inreplay.actors,
inreplay.learner and inreplay.integrations, which in the repository are the top-level
folders actors/, learner/ and integrations/ (the wheel installs them inside inreplay:
tests/test_install.py). Nothing in the tree imports those folders by their own names,
so no module is ever loaded twice under two names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import inreplay
from pyctl import client, errors, sharded, trajectory

ROOT = Path(__file__).resolve().parent.parent
OLD_ROOTS = set(inreplay.SUBPACKAGES)


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
    import inreplay.actors.actor
    import inreplay.integrations
    import inreplay.learner
    import inreplay.rl.config

    assert Path(inreplay.rl.config.__file__) == ROOT / "rl" / "config.py"
    assert Path(inreplay.actors.actor.__file__) == ROOT / "actors" / "actor.py"
    assert Path(inreplay.learner.__file__) == ROOT / "learner" / "__init__.py"
    assert Path(inreplay.integrations.__file__) == ROOT / "integrations" / "__init__.py"


def test_importing_the_root_loads_no_client_yet() -> None:
    r = subprocess.run([sys.executable, "-c", "import sys, inreplay; "
                        "print('pyctl.client' in sys.modules)"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.strip() == "False"


def _old_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.module
                 and node.level == 0 else [])
        out += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                if n.split(".")[0] in OLD_ROOTS]
    return out


def test_nothing_imports_the_folders_by_their_own_names() -> None:
    files = [p for d in ("rl", "actors", "learner", "integrations", "pyctl", "inreplay", "tests",
                         "bench") for p in sorted((ROOT / d).rglob("*.py"))]
    assert not [x for p in files for x in _old_imports(p)]
