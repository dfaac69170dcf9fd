"""`pip install .` without make: a plain virtual environment (no system site-packages),
a clean copy of the tree (no build/, no build-deps/), the package built by meson-python
from the registry's build tools, then in that environment with the working directory
outside the tree: `pyctl start --daemon`, the README's quick start as written (its
address replaced), `pyctl status`, `pyctl stop`. Then `pip wheel .` with DPDK turned
off, as on a machine without it: the wheel holds the library and every module, its
kernel stack runs the same cycle, and `--stack dpdk` is refused in one line that says
how to get it. And each integration extra (`[sb3]`, `[jax]`, `[offline]`): a fresh venv,
`pip install 'inreplay-*.whl[EXTRA]'`, then its integration imported and used for real
against the venv's own appliance.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from doc_blocks import blocks, page, with_port

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pyctl", "inreplay", "rl", "actors", "learner", "integrations")  # meson.build's list
INSIDE_INREPLAY = ("rl", "actors", "learner", "integrations")
"""Repository folders the wheel installs inside the inreplay package."""
IMPORT_ROOTS = {"pyctl", "inreplay"}
"""The top-level names a wheel puts in site-packages (besides its .dist-info)."""


def installed_name(rel: str) -> str:
    """Where a repository file of a Python package lands in the wheel."""
    return f"inreplay/{rel}" if rel.split("/", 1)[0] in INSIDE_INREPLAY else rel
PIP_TIMEOUT = 1200  # compiles the C library once; dependencies come from pip's cache



def _clean_copy(dest: Path) -> Path:
    """The tree as a checkout has it: tracked and new (not ignored) files, no build output."""
    src = dest / "src"
    try:
        files = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
            "build", "build-*", ".git", "__pycache__", ".mesonpy-*", ".deps-stamp"))
        return src
    for f in filter(None, files):
        if (ROOT / f).is_file():  # a deleted but still tracked file is skipped
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    return src


def _env(work: Path, venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "INREPLAY_LIB", "INREPLAY_HEADER", "VIRTUAL_ENV",
                        "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["INREPLAY_RUN_DIR"] = str(work / "run")
    return env


def _run(argv: list[str], work: Path, venv: Path, timeout: float = 60
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=work, env=_env(work, venv), capture_output=True, text=True,
                          timeout=timeout, check=False)


def _pip(venv: Path, work: Path, *args: str) -> None:
    r = _run([str(venv / "bin" / "python"), "-m", "pip", *args], work, venv, PIP_TIMEOUT)
    assert r.returncode == 0, f"pip {' '.join(args)}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


def _expected_stacks() -> list[str]:
    """What meson's `dpdk` feature (auto) must find: libdpdk and lwIP (the copy has no
    lwIP source, so Debian's liblwip-dev)."""
    have = all(subprocess.run(["pkg-config", "--exists", p], check=False).returncode == 0
               for p in ("libdpdk", "lwip")) if shutil.which("pkg-config") else False
    return ["kernel", "dpdk"] if have else ["kernel"]


def _cycle(venv: Path, work: Path, stacks: list[str]) -> None:
    """start --daemon, the README's quick start, status, stop: all from the venv."""
    py, pyctl = str(venv / "bin" / "python"), str(venv / "bin" / "pyctl")
    where = _run([py, "-c", "import pyctl, pyctl._native as n; "
                            "print(pyctl.__file__); print(n.library_path())"], work, venv)
    assert where.returncode == 0, where.stderr
    # one import root for the RL code: inreplay.actors, not a top-level actors
    roots = _run([py, "-c", "import importlib.util as u, inreplay, inreplay.rl.config, "
                            "inreplay.learner, inreplay.integrations; "
                            "from inreplay import ReplayClient, ShardedReplayClient, Schema; "
                            "print(inreplay.rl.config.__file__); "
                            "print([m for m in ('rl', 'actors', 'learner', 'integrations') "
                            "if u.find_spec(m)])"], work, venv)
    assert roots.returncode == 0, roots.stderr
    assert Path(roots.stdout.split()[0]).is_relative_to(venv / "lib"), roots.stdout
    assert roots.stdout.splitlines()[-1] == "[]", roots.stdout
    site = venv / "lib"
    for line in where.stdout.split():
        assert Path(line).is_relative_to(site), f"{line} is not from the venv ({site})"
    start = _run([pyctl, "start", "--daemon", "--listen", "127.0.0.1:0"], work, venv)
    assert start.returncode == 0, start.stderr
    m = re.search(r"kernel stack listening on 127\.0\.0\.1:(\d+) \(daemon\)", start.stdout)
    assert m, start.stdout
    port = int(m.group(1))
    try:
        # the README's quick start, as a user pastes it after `pip install .`
        code = with_port(blocks(page("README.md"))[0], "127.0.0.1", port)
        code += ("\nassert s.items.shape == (32, 4) and (s.weights <= 1).all()"
                 "\nassert 'quickstart' not in rc.tables()\nprint('example ok')\n")
        ex = _run([py, "-c", code], work, venv)
        assert ex.returncode == 0 and "example ok" in ex.stdout, ex.stderr
        st = _run([pyctl, "status"], work, venv)
        assert st.returncode == 0, st.stderr
        assert f"kernel stack on 127.0.0.1:{port}" in st.stdout, st.stdout
        assert f"stacks in this install: {', '.join(stacks)} ({site}" in st.stdout, st.stdout
    finally:
        stop = _run([pyctl, "stop", "--all"], work, venv)
    assert stop.returncode == 0 and f"on 127.0.0.1:{port}" in stop.stdout, stop.stderr
    gone = _run([pyctl, "status"], work, venv)
    assert gone.returncode == 3 and "not running" in gone.stdout


def test_checkout_reports_the_stacks_meson_built(tmp_path: Path) -> None:
    """In a checkout pyctl loads build/'s library, whose stacks are what meson built:
    the DPDK side library exists exactly when the library says it has DPDK."""
    from pyctl import _native

    assert _native.library_path() == ROOT / "build" / "libinreplay.so"
    built = any((ROOT / "build" / "dataplane").glob("libinreplay_dpdk.a"))
    assert _native.stacks() == (("kernel", "dpdk") if built else ("kernel",))
    env = {**os.environ, "INREPLAY_RUN_DIR": str(tmp_path / "run")}
    line = (f"stacks in this install: {', '.join(_native.stacks())} "
            f"({ROOT / 'build' / 'libinreplay.so'})")
    for argv in (["status"], ["drivers"]):
        r = subprocess.run([sys.executable, "-m", "pyctl", *argv], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60, check=False)
        assert line in r.stdout.splitlines(), r.stdout
    r = subprocess.run([sys.executable, "-m", "pyctl", "status", "--json"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 3 and json.loads(r.stdout)["stacks"] == list(_native.stacks())
    if not built:
        assert "meson setup --reconfigure" in _native.missing_stack_hint("dpdk")


def test_one_version() -> None:
    """meson.build's project version is the package's (pyproject takes it: dynamic);
    pyctl --version and the library's ir_version() must say the same."""
    import pyctl
    from pyctl import _native

    m = re.search(r"project\('inreplay'.*?version : '([^']+)'", (ROOT / "meson.build").read_text(),
                  re.S)
    assert m
    ffi, lib = _native.load()
    assert pyctl.__version__ == m.group(1) == ffi.string(lib.ir_version()).decode()
    # and it is written nowhere else (it was in server.h and pyctl/__init__.py too)
    literal = re.compile(rf"[\"']{re.escape(m.group(1))}[\"']")
    again = [str(f.relative_to(ROOT)) for d in ("fstack_redis", "dataplane", "pyctl")
             for f in (ROOT / d).rglob("*") if f.suffix in (".c", ".h", ".py", ".build")
             and literal.search(f.read_text(errors="replace"))]
    assert not again, f"the version is also written in {again}"


@pytest.mark.slow
def test_pip_install_and_wheel_in_a_fresh_venv(tmp_path: Path) -> None:
    src = _clean_copy(tmp_path)
    assert not (src / "build").exists() and not (src / "build-deps").exists()
    work = tmp_path / "work"  # every command runs here, outside the tree
    work.mkdir()
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg

    _pip(venv, work, "install", "-q", str(src))
    _cycle(venv, work, _expected_stacks())

    # pip wheel . as on a machine without DPDK: the library inside, linked to no DPDK
    wheels = tmp_path / "wheels"
    _pip(venv, work, "wheel", "-q", "--no-deps", "-w", str(wheels),
         "-Csetup-args=-Ddpdk=disabled", str(src))
    (wheel,) = wheels.glob("inreplay-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"pyctl/libinreplay.so", "pyctl/inreplay.h"} <= names
    modules = {installed_name(p.relative_to(src).as_posix()) for pkg in PACKAGES
               if (src / pkg).is_dir() for p in (src / pkg).rglob("*.py")}
    assert modules and modules <= names, sorted(modules - names)
    tops = {n.split("/", 1)[0] for n in names} - {n.split("/", 1)[0] for n in names
                                                  if ".dist-info/" in n}
    assert tops == IMPORT_ROOTS, f"the wheel installs {sorted(tops)} at top level"
    _pip(venv, work, "install", "-q", "--no-deps", "--force-reinstall", str(wheel))
    lib = next((venv / "lib").glob("python*/site-packages/pyctl/libinreplay.so"))
    if shutil.which("readelf"):
        needed = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True,
                                check=True).stdout
        assert "librte_" not in needed and "liblwip" not in needed, needed
    _cycle(venv, work, ["kernel"])
    pyctl = str(venv / "bin" / "pyctl")
    no = _run([pyctl, "start", "--stack", "dpdk", "--ip", "10.0.0.1/24"], work, venv)
    assert no.returncode == 1 and len(no.stderr.strip().splitlines()) == 1, no.stderr
    assert "this install has no DPDK stack" in no.stderr and "pip install" in no.stderr
    dr = _run([pyctl, "drivers"], work, venv)
    assert dr.stdout.startswith("stacks in this install: kernel ("), dr.stdout


# ---- the integrations' extras: each in a fresh venv, from one wheel -----------------

EXTRA_USES = {
    # extra: a tiny real use of what it installs, against the venv's own appliance at PORT
    "sb3": """
import gymnasium as gym, numpy as np
from inreplay.integrations.sb3 import ApplianceReplayBuffer
env = gym.make("CartPole-v1")
buf = ApplianceReplayBuffer(100, env.observation_space, env.action_space, device="cpu",
                            address="127.0.0.1:PORT", table="x-sb3", prioritized=True)
obs, _ = env.reset(seed=0)
for _ in range(10):
    a = env.action_space.sample()
    nxt, r, term, trunc, _ = env.step(a)
    buf.add(obs[None], nxt[None], np.array([a]), np.array([r]), np.array([term]), [{}])
    obs = nxt
s = buf.sample(8)
assert buf.size() == 10 and s.observations.shape == (8, 4)
assert buf.update_priorities(buf.last_ids, np.ones(8)) == 8
print("extra ok")
""",
    "jax": """
import jax, numpy as np
from pyctl.client import ReplayClient, Schema
schema = Schema({"obs": ((3,), np.float32), "k": ((), np.int32)})
with ReplayClient("127.0.0.1", PORT) as rc:
    rc.create("x-jax", 100, sampler="uniform")
    k = np.arange(20, dtype=np.int32)
    rc.add("x-jax", None, {"obs": np.stack([k, k, k], 1).astype(np.float32), "k": k},
           schema=schema)
    s = rc.sample("x-jax", 16, schema=schema, jax=True)
assert isinstance(s.items["obs"], jax.Array) and s.items["obs"].shape == (16, 3)
assert (np.asarray(s.items["obs"])[:, 0] == np.asarray(s.items["k"])).all()
print("extra ok")
""",
    "offline": """
import gymnasium as gym, minari, numpy as np
from pyctl.client import ReplayClient
from pyctl.minari_export import EpisodeRecorder, export_minari
env = gym.make("CartPole-v1", max_episode_steps=5)
with ReplayClient("127.0.0.1", PORT) as rc:
    rec = EpisodeRecorder(rc, "x-min", obs=((4,), np.float32), action=((), np.int64))
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        a = env.action_space.sample()
        nxt, r, term, trunc, _ = env.step(a)
        rec.step(obs, a, r, term, trunc, nxt)
        obs, done = nxt, term or trunc
    rec.close()
    export_minari(rc, "x-min", "cartpole/extra-v0", env="CartPole-v1")
ds = minari.load_dataset("cartpole/extra-v0")
assert ds.total_episodes == 1 and ds.total_steps >= 1
print("extra ok")
""",
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wheel of a clean copy (DPDK off: the extras do not touch it), for every extra."""
    tmp = tmp_path_factory.mktemp("extras-wheel")
    src = _clean_copy(tmp)
    out = tmp / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                        "-Csetup-args=-Ddpdk=disabled", str(src)], cwd=tmp, capture_output=True,
                       text=True, timeout=PIP_TIMEOUT, check=False)
    assert r.returncode == 0, f"pip wheel:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    (whl,) = out.glob("inreplay-*.whl")
    return whl


def test_every_extra_has_a_use() -> None:
    """The integrations' extras in pyproject.toml are the ones exercised below."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(EXTRA_USES) <= set(extras), set(EXTRA_USES) - set(extras)


@pytest.mark.slow
@pytest.mark.parametrize("extra", sorted(EXTRA_USES))
def test_extra_installs_and_works_in_a_fresh_venv(extra: str, wheel: Path,
                                                  tmp_path: Path) -> None:
    """pip install 'inreplay[EXTRA]' (the wheel) in a venv without system site-packages,
    then its integration imported and used against that venv's own appliance."""
    work, venv = tmp_path / "work", tmp_path / "venv"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr
    _pip(venv, work, "install", "-q", f"{wheel}[{extra}]")
    py, pyctl = str(venv / "bin" / "python"), str(venv / "bin" / "pyctl")
    start = _run([pyctl, "start", "--daemon", "--listen", "127.0.0.1:0"], work, venv)
    assert start.returncode == 0, start.stderr
    m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(daemon\)", start.stdout)
    assert m, start.stdout
    try:
        env_code = f"import os; os.environ['MINARI_DATASETS_PATH'] = {str(work / 'minari')!r}\n"
        use = _run([py, "-c", env_code + EXTRA_USES[extra].replace("PORT", m.group(1))],
                   work, venv, timeout=300)
        assert use.returncode == 0 and "extra ok" in use.stdout, use.stderr[-3000:]
    finally:
        stop = _run([pyctl, "stop", "--all"], work, venv)
    assert stop.returncode == 0, stop.stderr
