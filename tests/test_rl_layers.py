"""The RL code's layers, from the imports themselves (ast): rl/ holds what every agent
shares and imports neither actors/ nor learner/; actors/ and learner/ import rl/ (and the
client) and never each other. A launcher that runs the other side's code (the demos,
the Ray job) names its module as a command line does (``python -m inreplay.learner.r2d2``,
importlib), so the direction stays one-way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"rl": set(), "actors": {"rl"}, "learner": {"rl"}}
"""Each RL folder and the RL folders it may import (always as inreplay.<folder>)."""
RL_FOLDERS = ("rl", "actors", "learner", "integrations")


def rl_imports(path: Path) -> list[tuple[int, str]]:
    """(line, folder) of every import of an RL folder in path, at any depth (a function's
    lazy import counts as much as a top-level one)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        folders = {parts[1] for parts in (n.split(".") for n in names)
                   if parts[0] == "inreplay" and len(parts) > 1 and parts[1] in RL_FOLDERS}
        out += [(node.lineno, f) for f in sorted(folders)]
    return sorted(out)


def violations(folder: str, allowed: set[str], root: Path = ROOT) -> list[str]:
    return [f"{p.relative_to(root)}:{line}: imports inreplay.{other}"
            for p in sorted((root / folder).rglob("*.py"))
            for line, other in rl_imports(p) if other != folder and other not in allowed]


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_rl_folders_import_only_the_layer_below(folder: str) -> None:
    assert violations(folder, LAYERS[folder]) == []


def test_the_check_sees_a_lazy_import_and_a_from_import(tmp_path: Path) -> None:
    """The checker itself: a function-level import of the other side, and ``from inreplay
    import learner``, are both found (a test that cannot fail is no test)."""
    (tmp_path / "actors").mkdir()
    (tmp_path / "actors" / "x.py").write_text(
        "import inreplay.rl.config\n"
        "def f():\n    from inreplay.learner.learner import Learner\n"
        "from inreplay import learner\n")
    assert violations("actors", {"rl"}, tmp_path) == [
        "actors/x.py:3: imports inreplay.learner", "actors/x.py:4: imports inreplay.learner"]


def test_the_shared_pieces_live_in_rl() -> None:
    """config, codec, env, networks, n-step, evaluation and the demo harness are rl's."""
    for name in ("config", "codec", "env", "model", "networks", "nstep", "frames",
                 "evaluate", "harness"):
        assert (ROOT / "rl" / f"{name}.py").is_file(), name
        assert not (ROOT / "actors" / f"{name}.py").exists(), name
