"""The C code follows .clang-format: clang-format 14, Debian's (make
installs it), finds nothing to change in any tracked C file. `make format` applies
it; the generated command table (build/.../commands_table.inc) is not tracked."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_c_code_follows_clang_format() -> None:
    exe = shutil.which("clang-format")
    if exe is None:
        pytest.fail("clang-format is missing: make deps installs it (apt-get install clang-format)")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.", version)
    assert m and m.group(1) == "14", \
        f"the format is clang-format 14's (Debian 12); this is {version.strip()}"
    files = subprocess.run(["git", "ls-files", "*.c", "*.h"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    assert len(files) > 50
    res = subprocess.run([exe, "--dry-run", "-Werror", *files], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    bad = sorted({ln.split(":")[0] for ln in res.stderr.splitlines() if ": error:" in ln})
    assert res.returncode == 0 and not bad, \
        f"not formatted (run make format): {', '.join(bad) or res.stderr[-500:]}"
