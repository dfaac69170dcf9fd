"""The layers of the Python code, read from the import statements of its sources (ast,
nothing imported): RL code (actors/, learner/, integrations/) -> client (pyctl/).

- pyctl has no import cycle among its modules: every import counts, at the top of a
  module, inside a function or under TYPE_CHECKING, since each is a dependency a reader
  has to follow (a replay group's types reach pyctl.trajectory as a Protocol, not as an
  import of pyctl.sharded);
- pyctl imports none of the RL code: not actors, learner or integrations, nor the
  inreplay package that holds them (inreplay imports pyctl, for its re-exports);
- the RL code (rl/, actors/, learner/, integrations/, inreplay/) uses pyctl's public
  names only: no ``from pyctl import _shm`` or ``_native``, no
  ``from pyctl.sharded import _x``, no ``pyctl.client._x``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYCTL = ROOT / "pyctl"
RL_ROOTS = ("actors", "learner", "integrations", "inreplay")
"""Top-level packages of the RL code (and inreplay, whose subpackages they are)."""


def _imports(path: Path, package: str) -> list[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) of every import in path, relative
    imports resolved against package; ``import a.b`` gives ("a.b", [], line)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def _pyctl_modules() -> dict[str, Path]:
    mods = {p.stem: p for p in sorted(PYCTL.glob("*.py"))}
    assert {"client", "sharded", "trajectory", "errors", "_wire"} <= set(mods)
    return mods


def _pyctl_graph() -> dict[str, set[str]]:
    """pyctl module -> the pyctl modules it imports (``from pyctl import x`` counts as an
    import of pyctl.x when x is a module)."""
    mods = _pyctl_modules()
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for mod, names, _ in _imports(path, "pyctl"):
            parts = mod.split(".")
            if parts[0] != "pyctl":
                continue
            if len(parts) > 1:
                deps.add(parts[1])
            else:
                deps |= {n for n in names if n in mods}
        edges[name] = deps - {name}
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, recursive:
    the graphs here are small), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_is_read() -> None:
    """The parser sees pyctl's imports, those inside functions too (a graph with no
    edges would pass every rule below)."""
    g = _pyctl_graph()
    assert {"client", "trajectory"} <= g["sharded"]
    assert "client" in g["trajectory"]
    assert "_shm" in g["client"]


def test_pyctl_has_no_import_cycle() -> None:
    g = _pyctl_graph()
    print("\npyctl imports:")
    for m in sorted(g):
        print(f"  {m}: {' '.join(sorted(g[m])) or '-'}")
    assert _cycles(g) == [], "import cycles among pyctl modules"


def _rl_imports(path: Path) -> list[str]:
    """Every import of RL code in path (a pyctl module)."""
    return [f"{path.name}:{line} imports {mod}" for mod, _, line in _imports(path, "pyctl")
            if mod.split(".")[0] in RL_ROOTS]


def _private_uses(path: Path, package: str) -> list[str]:
    """Every private (_-prefixed) module or name of pyctl that path imports or reaches
    as an attribute (pyctl.client._x)."""
    bad = []
    for mod, names, line in _imports(path, package):
        parts = mod.split(".")
        if parts[0] != "pyctl":
            continue
        hidden = [p for p in parts[1:] if p.startswith("_")]
        hidden += [n for n in names if n.startswith("_")]
        if hidden:
            bad.append(f"{path.name}:{line} {mod}: {', '.join(hidden)}")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            chain, v = [node.attr], node.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id == "pyctl":
                bad.append(f"{path.name}:{node.lineno} pyctl.{'.'.join(reversed(chain))}")
    return bad


def test_the_checks_see_what_they_forbid(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import pyctl.sharded\nfrom pyctl import _shm\n"
                 "from pyctl.sharded import replay_client, _where\n"
                 "pyctl.sharded._fanout\n"
                 "def f():\n    from inreplay.actors import config\n    import learner.x\n")
    assert [u.split(" ", 1)[1] for u in _private_uses(f, "x")] == [
        "pyctl: _shm", "pyctl.sharded: _where", "pyctl.sharded._fanout"]
    assert [u.split(" ", 1)[1] for u in _rl_imports(f)] == [
        "imports inreplay.actors", "imports learner.x"]


def test_pyctl_imports_no_rl_code() -> None:
    bad = [u for p in _pyctl_modules().values() for u in _rl_imports(p)]
    assert not bad, "pyctl is below the RL code:\n" + "\n".join(bad)


def test_rl_code_uses_public_names_of_pyctl() -> None:
    bad, seen = [], set()
    for root in ("rl", *RL_ROOTS):
        files = sorted((ROOT / root).rglob("*.py"))
        seen |= {f.relative_to(ROOT).as_posix() for f in files}
        bad += [f"{root}/{u}" for f in files for u in _private_uses(f, root)]
    assert {"rl/harness.py", "actors/demo.py", "learner/learner.py"} <= seen
    assert len([f for f in seen if f.startswith("integrations/")]) > 3
    assert not bad, ("the RL code imports private names of pyctl (make them public and "
                     "documented, or give it a public API):\n" + "\n".join(bad))
