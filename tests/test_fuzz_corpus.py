"""Replay the RESP fuzz harness's seed corpus once (tests/fuzz/).

``tests/fuzz/run.sh --build`` builds ``build-fuzz/fuzz_resp`` with clang
(libFuzzer + ASan + UBSan; skipped when already up to date), then
``fuzz_resp -runs=0 tests/fuzz/corpus`` runs every seed, including the
minimized reproducers of past findings (``bug_*``), through the real parser
and dispatcher with the harness's RESP and invariant checks. Any crash, leak,
UB report or invariant violation fails the test. Fuzzing itself (for a time)
is ``make fuzz``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "tests" / "fuzz"
CORPUS = FUZZ / "corpus"
BIN = ROOT / os.environ.get("FUZZ_BUILD", "build-fuzz") / "fuzz_resp"
CC = os.environ.get("FUZZ_CC", "clang")


def _libfuzzer_available() -> bool:
    """clang is there and links -fsanitize=fuzzer (libclang-rt-*-dev)."""
    cc = shutil.which(CC)
    if cc is None:
        return False
    probe = subprocess.run(
        [cc, "-fsanitize=fuzzer", "-x", "c", "-", "-o", os.devnull],
        input=b"#include <stddef.h>\n#include <stdint.h>\n"
        b"int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n",
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@pytest.fixture(scope="module")
def harness() -> Path:
    if not _libfuzzer_available():
        pytest.skip(
            f"{CC} with libFuzzer is not installed (apt-get install clang libclang-rt-14-dev)"
        )
    build = subprocess.run(
        [str(FUZZ / "run.sh"), "--build"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert build.returncode == 0, f"building the fuzz harness failed:\n{build.stdout}{build.stderr}"
    return BIN


def test_seed_corpus_is_small_and_present() -> None:
    seeds = sorted(p for p in CORPUS.iterdir() if p.is_file())
    assert len(seeds) >= 30
    # every seed is a header (ctl, opt, split points) plus a stream within run.sh's -max_len
    max_len = int(re.search(r"-max_len=(\d+)", (FUZZ / "run.sh").read_text()).group(1))
    too_big = [p.name for p in seeds if not 2 <= p.stat().st_size <= max_len]
    assert not too_big, f"seeds over -max_len={max_len} (libFuzzer truncates them): {too_big}"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FUZZ_RESP_SKIP", None)  # every invariant is checked here
    env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=1:allocator_may_return_null=0")
    env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    return env


def _run(
    harness: Path, target: Path, artifacts: Path, *more: Path
) -> subprocess.CompletedProcess[str]:
    """The corpus directory (each seed once), or the seed files given, in that order,
    in one process."""
    return subprocess.run(
        [
            str(harness),
            "-runs=0" if target.is_dir() else "-runs=1",
            "-timeout=10",
            "-rss_limit_mb=3072",
            f"-artifact_prefix={artifacts}/",
            str(target),
            *map(str, more),
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        check=False,
    )


def _why(stderr: str) -> str:
    """The first line that says what went wrong."""
    for line in stderr.splitlines():
        if "invariant violated" in line or "ERROR:" in line or "runtime error" in line:
            return line.strip()
    return stderr.strip().splitlines()[-1] if stderr.strip() else "?"


def test_corpus_replays_clean(harness: Path, tmp_path: Path) -> None:
    run = _run(harness, CORPUS, tmp_path)
    if run.returncode != 0:
        # libFuzzer stops at the first failing seed: name every one that fails
        failing = []
        for seed in sorted(p for p in CORPUS.iterdir() if p.is_file()):
            one = _run(harness, seed, tmp_path)
            if one.returncode != 0:
                failing.append(f"  {seed.name}: {_why(one.stderr)}")
        pytest.fail(
            f"{len(failing)} seed(s) fail in the fuzz harness; reproduce with "
            f"{BIN.relative_to(ROOT)} tests/fuzz/corpus/<seed>:\n" + "\n".join(failing),
            pytrace=False,
        )
    assert "INITED" in run.stderr, run.stderr[-2000:]


def test_an_input_does_not_see_what_the_one_before_left(harness: Path, tmp_path: Path) -> None:
    """The harness runs each input on a new server: the first seed loads a
    FUNCTION library, caches a script and fills the SLOWLOG; the second reads
    all three, then removes them, fed whole and then split. On a server only
    emptied between runs its split run saw another state (a 60 s fuzzing run
    of ``make test`` hit this with FUNCTION DELETE)."""
    pair = sorted(CORPUS.glob("bug_state_left_by_earlier_input_*"))
    assert [p.name.removeprefix("bug_state_left_by_earlier_input_")[0] for p in pair] == [
        "1",
        "2",
    ], pair
    run = _run(harness, pair[0], tmp_path, pair[1])
    assert run.returncode == 0, _why(run.stderr)
    assert run.stderr.count("Executed ") == 2, run.stderr[-2000:]
