"""Unit tests of the learner: double-DQN targets, the training step, priorities,
the local (baseline) replay, the prefetch thread, checkpoints."""

from __future__ import annotations

import copy
import os
import platform
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from inreplay.learner.learner import TorchBatch, double_dqn_td, to_torch  # noqa: E402
from inreplay.learner.replay import LocalReplay, Prefetcher, Sampled  # noqa: E402
from inreplay.rl.codec import TransitionCodec  # noqa: E402
from inreplay.rl.config import preset  # noqa: E402
from inreplay.rl.env import EnvSpec  # noqa: E402
from inreplay.rl.model import build_model  # noqa: E402
from inreplay.rl.nstep import td_priorities  # noqa: E402
from torch import nn  # noqa: E402

CARTPOLE = EnvSpec((4,), np.dtype(np.float32), 2, 1, False, 475.0)


class Table(nn.Module):
    """Q(s, .) = rows of a fixed table, indexed by the first observation feature."""

    def __init__(self, q: list[list[float]]) -> None:
        super().__init__()
        self.q = nn.Parameter(torch.tensor(q))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q[obs[:, 0].long()]


def _batch(obs: list[int], act: list[int], ret: list[float], disc: list[float],
           nxt: list[int]) -> TorchBatch:
    def col(v: list[int]) -> torch.Tensor:
        return torch.tensor(v, dtype=torch.float32)[:, None]

    return TorchBatch(np.arange(len(obs)), torch.ones(len(obs)), col(obs), torch.tensor(act),
                      torch.tensor(ret), torch.tensor(disc), col(nxt))


def test_double_dqn_target_uses_online_argmax_and_target_values() -> None:
    online = Table([[1.0, 2.0], [5.0, 3.0], [0.0, 0.0]])
    target = Table([[10.0, 20.0], [30.0, 40.0], [0.0, 0.0]])
    b = _batch(obs=[0, 1, 2], act=[1, 0, 0], ret=[1.0, 2.0, 3.0], disc=[0.5, 0.25, 0.0],
               nxt=[1, 0, 1])
    q, y = double_dqn_td(online, target, b)
    torch.testing.assert_close(q, torch.tensor([2.0, 5.0, 0.0]))
    # s'=1: online argmax is action 0 -> target 30; s'=0: argmax 1 -> target 20; terminal
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.5 * 30.0, 2.0 + 0.25 * 20.0, 3.0]))
    assert not y.requires_grad and q.requires_grad


def test_actor_priorities_equal_learner_td_when_networks_agree() -> None:
    torch.manual_seed(0)
    model = build_model(CARTPOLE, hidden=16)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(32, 4)).astype(np.float32)
    nxt = rng.normal(size=(32, 4)).astype(np.float32)
    act = rng.integers(0, 2, 32)
    ret = rng.normal(size=32).astype(np.float32)
    disc = rng.choice([0.0, 0.99**3], 32).astype(np.float32)
    with torch.no_grad():
        q_obs = model(torch.from_numpy(obs)).numpy()
        q_next = model(torch.from_numpy(nxt)).numpy()
    actor = td_priorities(q_obs[np.arange(32), act], ret, disc, q_next.max(axis=1))
    b = TorchBatch(np.arange(32), torch.ones(32), torch.from_numpy(obs), torch.from_numpy(act),
                   torch.from_numpy(ret), torch.from_numpy(disc), torch.from_numpy(nxt))
    q, y = double_dqn_td(model, copy.deepcopy(model), b)
    np.testing.assert_allclose(actor, (y - q).abs().detach().numpy(), rtol=1e-5, atol=1e-5)


def test_training_step_fits_targets_and_returns_priorities(tmp_path: Path) -> None:
    from inreplay.learner.learner import Learner

    cfg = preset("CartPole-v1", lr=1e-2, out_dir=str(tmp_path), batch_size=16, hidden=16)
    learner = Learner.__new__(Learner)  # no server: only the training parts
    learner.cfg = cfg
    torch.manual_seed(0)
    learner.model = build_model(CARTPOLE, hidden=16)
    learner.target = copy.deepcopy(learner.model)
    learner.opt = torch.optim.Adam(learner.model.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(1)
    b = TorchBatch(np.arange(16), torch.rand(16), torch.from_numpy(
        rng.normal(size=(16, 4)).astype(np.float32)), torch.from_numpy(rng.integers(0, 2, 16)),
        torch.from_numpy(rng.normal(size=16).astype(np.float32)), torch.zeros(16),
        torch.zeros(16, 4))
    first, td, _ = learner.train_step(b)
    assert td.shape == (16,) and td.dtype == np.float32 and (td >= 0).all()
    for _ in range(200):
        loss, td, _ = learner.train_step(b)
    assert loss < 0.05 * first
    learner.out = tmp_path
    learner.steps, learner.version = 200, 3
    path = learner.checkpoint()
    from inreplay.learner.evaluate import load_checkpoint

    model, cfg2, meta = load_checkpoint(str(path))
    assert cfg2 == cfg and meta == {"learner_steps": 200, "params_version": 3}
    x = torch.randn(3, 4)
    torch.testing.assert_close(model(x), learner.model(x))


class FakeRedis:
    """The few list commands LocalReplay uses."""

    def __init__(self) -> None:
        self.lists: dict[str, list[bytes]] = {}

    def rpush(self, key: str, *vals: bytes) -> int:
        self.lists.setdefault(key, []).extend(vals)
        return len(self.lists[key])

    def lpop(self, key: str, count: int) -> list[bytes] | None:
        lst = self.lists.get(key, [])
        out, self.lists[key] = lst[:count], lst[count:]
        return out or None

    def close(self) -> None:
        pass


def _local(capacity: int) -> tuple[LocalReplay, FakeRedis, TransitionCodec]:
    cfg = preset("CartPole-v1", capacity=capacity, alpha=1.0, priority_eps=0.0)
    codec = TransitionCodec((4,), np.float32, cfg.n_step)
    fake = FakeRedis()
    return LocalReplay(cfg, codec, connection=fake), fake, codec  # type: ignore[arg-type]


def _records(codec: TransitionCodec, actions: list[int]) -> np.ndarray:
    n = len(actions)
    return codec.encode(np.zeros((n, 4), np.float32), actions, np.zeros(n), np.zeros(n),
                        np.zeros((n, 4), np.float32), np.ones(n, int))


def test_local_replay_pops_samples_and_skips_stale_updates() -> None:
    import struct

    rep, fake, codec = _local(capacity=8)
    rows = _records(codec, list(range(6)))
    prios = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    fake.rpush("apex:experience", *[struct.pack("<f", p) + r.tobytes()
                                    for p, r in zip(prios, rows, strict=True)])
    fake.rpush("apex:experience", b"short")  # malformed: dropped and counted
    assert rep.ingest() == 7
    assert rep.size() == 6 and rep.stats["bad_records"] == 1
    s = rep.sample(32, beta=0.4)
    assert (s.ids == 5).all() and (s.batch.action == 5).all()  # only id 5 has priority
    np.testing.assert_allclose(s.weights, 1.0)
    assert rep.update(np.array([5, 0]), np.array([0.0, 1.0], np.float32)) == 2
    s = rep.sample(16, beta=0.4)
    assert (s.ids == 0).all() and (s.batch.action == 0).all()
    # 6 more items wrap the ring of 8: ids 0..3 are evicted
    rep.add(np.ones(6), _records(codec, list(range(6, 12))))
    assert rep.size() == 8 and rep.stats["evictions"] == 4
    assert rep.update(np.array([0, 1, 11]), np.ones(3, np.float32)) == 1
    assert rep.stats["stale_updates"] == 2
    s = rep.sample(4000, beta=0.4)
    assert set(s.ids.tolist()) <= set(range(4, 12))
    np.testing.assert_array_equal(s.batch.action, s.ids)
    rep.close()


def test_local_replay_samples_in_proportion_to_priority() -> None:
    rep, _, codec = _local(capacity=16)
    rep.add(np.array([1.0, 2.0, 3.0, 4.0]), _records(codec, [0, 1, 2, 3]))
    s = rep.sample(20_000, beta=1.0)
    freq = np.bincount(s.ids, minlength=4) / len(s.ids)
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.01)
    # w_i = (min p / p_i) ** beta
    for i in range(4):
        np.testing.assert_allclose(s.weights[s.ids == i], 1.0 / (i + 1), rtol=1e-5)
    rep.close()


def test_prefetcher_keeps_batches_in_flight_and_reports_errors() -> None:
    calls: list[int] = []

    class Source:
        def sample(self, n: int, beta: float) -> Sampled:
            calls.append(n)
            if len(calls) > 5:
                raise RuntimeError("boom")
            return Sampled(np.arange(n), np.ones(n, np.float32), None)  # type: ignore[arg-type]

    source: Any = Source()
    pf = Prefetcher(source, 4, 0.4, depth=2, convert=lambda s: len(s.ids)).start()
    try:
        deadline = time.monotonic() + 5
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) >= 3  # sampled ahead before anyone asked
        got: list[Any] = [pf.get(timeout=5) for _ in range(5)]
        assert got == [4] * 5
        with pytest.raises(RuntimeError, match="sampling thread"):
            pf.get(timeout=5)
    finally:
        pf.close()


def test_prefetcher_get_returns_at_once_on_shutdown_while_the_sampler_is_stuck() -> None:
    """The learner ignored SIGTERM for 30 s when its sampling thread was blocked on the
    server: get() waited for a batch that never came. Now the caller's stop flag ends it."""
    release = threading.Event()

    class StuckSource:
        def sample(self, n: int, beta: float) -> Sampled:
            release.wait(30)  # a reply that never comes (a hung server, a lost connection)
            raise RuntimeError("released")

    source: Any = StuckSource()
    pf = Prefetcher(source, 4, 0.4, depth=2).start()
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    try:
        assert pf.get(timeout=30, stop=stop) is None
        # the stop (0.3 s), not the 30 s timeout; the margin is a loaded machine's
        assert time.monotonic() - t0 < 15
        t1 = time.monotonic()
        pf.close()  # the sampler stays stuck until release: a close that waited hangs
        assert time.monotonic() - t1 < 15, "close() waited for the stuck sampler"
    finally:
        release.set()


def test_to_torch_makes_contiguous_tensors() -> None:
    codec = TransitionCodec((4,), np.float32, 3)
    rows = _records(codec, [1, 0, 1])
    s = Sampled(np.arange(3), np.ones(3, np.float32), codec.decode(rows))
    b = to_torch(s, torch.device("cpu"))
    assert b.obs.shape == (3, 4) and b.obs.dtype == torch.float32 and b.obs.is_contiguous()
    assert b.action.dtype == torch.int64 and b.action.tolist() == [1, 0, 1]


# ---- the learner process against a real server --------------------------------------

ROOT = Path(__file__).resolve().parent.parent
LEARNER = [sys.executable, "-m", "inreplay.learner.learner", "--env", "CartPole-v1", "--quiet"]


def _fill(port: int, n: int = 2000, version: int | None = None,
          obs_shape: tuple[int, ...] = (4,)) -> None:
    """A CartPole table of n transitions (and a parameter version), as a run leaves them."""
    from pyctl.client import ReplayClient

    with ReplayClient(port=port) as rc:
        rc.redis.flushall()
        for t in rc.tables():
            rc.drop(t)
        codec = TransitionCodec(obs_shape, np.float32, 3)
        rng = np.random.default_rng(0)
        items = codec.encode(rng.normal(size=(n, *obs_shape)).astype(np.float32),
                             rng.integers(0, 2, n), rng.normal(size=n), np.full(n, 0.97),
                             rng.normal(size=(n, *obs_shape)).astype(np.float32), np.full(n, 3))
        rc.create("replay", 100_000)
        rc.add("replay", np.ones(n), items)
        if version is not None:
            rc.redis.set("apex:params:version", version)


def _learner(port: int, out: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*LEARNER, "--port", str(port), "--out-dir", str(out),
                             "--learning-starts", "500", *flags], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_learner_refuses_an_earlier_run_unless_resume_or_fresh(inreplay_server: Any,
                                                               tmp_path: Path) -> None:
    from pyctl.client import ReplayClient

    port = inreplay_server.port
    _fill(port, 2000, version=7)
    p = _learner(port, tmp_path, "--max-learner-steps", "3")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, (out, err)
    assert err.count("\n") == 1 and "--resume" in err and "--fresh" in err, err
    assert "2000 items" in err and "parameter version 7" in err, err
    with ReplayClient(port=port) as rc:
        assert rc.info("replay")["size"] == 2000  # untouched
        assert rc.redis.get("apex:params:version") == b"7"

    p = subprocess.Popen([*LEARNER, "--port", str(port), "--out-dir", str(tmp_path),
                          "--learning-starts", "500", "--max-learner-steps", "3", "--resume"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and err == "", (out, err)
    assert (f"learner: resuming the run on 127.0.0.1:{port}: table 'replay' with 2000 items, "
            "parameter version 7") in out  # said even with --quiet
    assert "stopped after 3 steps" in out
    with ReplayClient(port=port) as rc:
        assert rc.info("replay")["updates"] > 0  # the same table, trained on
        assert int(rc.redis.get("apex:params:version") or 0) > 7  # the sequence continues

    # --fresh: the earlier table and keys go; a new empty table waits for actors, saying so
    p = subprocess.Popen([*LEARNER[:-1], "--port", str(port), "--out-dir", str(tmp_path),
                          "--learning-starts", "500", "--fresh"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    lines = []
    t0 = time.monotonic()
    for line in p.stdout:
        lines.append(line)
        if "waiting for the replay" in line:
            break
    waited = time.monotonic() - t0
    p.send_signal(signal.SIGTERM)
    rest, err = p.communicate(timeout=20)
    text = "".join(lines) + rest
    assert p.returncode == 0 and err == "", (text, err)
    assert f"learner: --fresh: dropped the earlier run on 127.0.0.1:{port} (table 'replay' " \
           "with 2000 items" in text
    # the appliance's rate limiter holds the first sample (MIN_SIZE = learning_starts)
    assert "waiting for the replay (5 s): table 'replay' has 0 items, MIN_SIZE is 500" in text, text
    assert 4.0 < waited < 30, waited  # rate-limited progress line, not one per poll
    assert "learner: stopped after 0 steps, parameters version 1" in text
    with ReplayClient(port=port) as rc:
        assert rc.info("replay")["size"] == 0 and rc.info("replay")["inserts"] == 0


@pytest.mark.parametrize("argv, code, message", [
    (["--port", "1"], 1, "cannot reach the server at 127.0.0.1:1: connection refused"),
    (["--config", "/nonexistent/c.json"], 2, "--config /nonexistent/c.json: No such file"),
    (["--out-dir", "/proc/no/such"], 1, "--out-dir /proc/no/such: No such file or directory"),
    (["--batch-size", "0"], 2, "--batch-size must be >= 1"),
    (["--eps-base", "0.3"], 2, "unrecognized arguments: --eps-base"),  # an actor's flag
])
def test_learner_errors_are_one_line(argv: list[str], code: int, message: str) -> None:
    p = subprocess.run([*LEARNER, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == code, (p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr


def test_learner_help_shows_only_the_learners_flags() -> None:
    p = subprocess.run([*LEARNER[:3], "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0
    for flag in ("--batch-size", "--lr", "--capacity", "--resume", "--fresh", "--n-step"):
        assert flag in p.stdout, flag
    for flag in ("--eps-base", "--actor-batch", "--params-wait-s", "--eval-every-s",
                 "--screen-episodes"):
        assert flag not in p.stdout, flag


def test_sigterm_at_random_moments_stops_the_learner_cleanly(inreplay_server: Any,
                                                            tmp_path: Path) -> None:
    """20 runs, SIGTERM 0.5-6 s after the start (during the imports, the set-up, the wait
    for data or training): each exits 0 within a few seconds with its stop line."""
    port = inreplay_server.port
    rng = random.Random(12)
    slow = []
    for i in range(20):
        _fill(port, 1000)
        p = _learner(port, tmp_path / str(i), "--resume")
        delay = rng.uniform(0.5, 6.0)
        time.sleep(delay)
        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        took = time.monotonic() - t
        assert p.returncode == 0, (i, delay, out, err)
        assert "learner: stopped " in out.splitlines()[-1], (i, delay, out, err)
        assert err == "", (i, delay, err)
        slow.append((took, delay))
    worst = max(slow)
    # bounded, not fast: a SIGTERM during torch's import waits for it, which took 9.5 s
    # on a 2-core machine running other work
    assert worst[0] < 30.0, f"{worst[0]:.1f} s to stop after a SIGTERM at {worst[1]:.1f} s"


def _tgkill_other_thread(pid: int, sig: int) -> None:
    """`sig` to one of pid's threads other than its main thread (tgkill), as the kernel
    may deliver a process's signal to any thread that does not block it."""
    import ctypes

    tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert tids, "the learner has no other thread"
    libc = ctypes.CDLL(None, use_errno=True)
    sys_tgkill = 234  # x86_64
    assert libc.syscall(sys_tgkill, pid, tids[-1], sig) == 0, ctypes.get_errno()


@pytest.mark.parametrize("to", ["process", "other-thread"])
def test_sigterm_while_the_server_hangs_ends_the_learner_within_the_grace(
        server_factory: Any, tmp_path: Path, to: str) -> None:
    """The server stops answering (SIGSTOP) while the learner trains: a SIGTERM cannot
    interrupt the call its main thread is blocked in, so the watchdog ends the process
    STOP_GRACE_S later, saying where it was stuck, with the stop line. Delivered to a
    thread other than the main one, Python's handler cannot run at all while the main
    thread is blocked: the learner ignored such a SIGTERM for 30 s in CI's demo run,
    until the watchdog read the signal from set_wakeup_fd's socket."""
    from inreplay.learner.learner import STOP_GRACE_S

    if to == "other-thread" and platform.machine() != "x86_64":
        pytest.skip("tgkill's syscall number is x86_64's")

    srv = server_factory("inreplay")
    _fill(srv.port, 1000)
    p = _learner(srv.port, tmp_path, "--resume")
    r = srv.client()
    try:
        deadline = time.monotonic() + 60
        while int(r.get("apex:params:version") or 0) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert int(r.get("apex:params:version") or 0) >= 3, "the learner did not train"
        os.kill(srv.proc.pid, signal.SIGSTOP)
        time.sleep(0.5)
        t = time.monotonic()
        if to == "process":
            p.send_signal(signal.SIGTERM)
        else:
            _tgkill_other_thread(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=STOP_GRACE_S + 20)
        took = time.monotonic() - t
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        if p.poll() is None:
            p.kill()
            p.wait()
        r.close()
    assert STOP_GRACE_S - 0.5 < took < STOP_GRACE_S + 3, took
    assert p.returncode == 1, (out, err)
    assert err.count("\n") == 1 and err.startswith(
        f"learner: still stopping {STOP_GRACE_S:.0f} s after the signal, in "), err
    assert out.splitlines()[-1].startswith("learner: stopped after ") and \
        out.splitlines()[-1].endswith("(forced)"), out


def test_evaluate_errors_are_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint\n")
    for path, message in ((str(tmp_path / "none.pt"), "none.pt: No such file or directory"),
                          (str(junk), "junk.pt: not a learner checkpoint")):
        p = subprocess.run([sys.executable, "-m", "inreplay.learner.evaluate", path], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 1, (p.stdout, p.stderr)
        assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr


def test_resume_refuses_a_table_of_another_item_size(inreplay_server: Any,
                                                    tmp_path: Path) -> None:
    _fill(inreplay_server.port, 500, obs_shape=(6,))  # e.g. Acrobot's transitions
    p = _learner(inreplay_server.port, tmp_path, "--resume", "--max-learner-steps", "3")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, (out, err)
    assert err.count("\n") == 1 and "holds items of 60 bytes, but this run's transitions " \
        "(CartPole-v1) are 44 bytes: pass --fresh" in err, err


def test_a_child_that_ignores_sigterm_leaves_every_threads_stack_in_its_log(
        tmp_path: Path) -> None:
    """A demo's learner once ignored SIGTERM for 30 s (its own watchdog did not fire
    either) and was killed with nothing in its log to say where it hung. Every child role
    now dumps its threads' stacks on STACKS_SIGNAL, and Child.stop sends it before the
    kill."""
    from inreplay.rl.harness import Child

    script = textwrap.dedent("""
        import signal, time
        from inreplay.rl.config import dump_stacks_on_signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        dump_stacks_on_signal()
        print("ready", flush=True)
        def stuck_here():
            while True:
                time.sleep(0.05)
        stuck_here()
    """)
    c = Child("stuck", [sys.executable, "-c", script], tmp_path / "stuck.log")
    deadline = time.monotonic() + 60
    while "ready" not in c.log.read_text() and time.monotonic() < deadline:
        assert c.alive(), c.tail()
        time.sleep(0.05)
    assert c.stop(timeout=0.5) is None  # killed
    assert c.last_words == "ready"
    log = c.log.read_text()
    assert "stuck_here" in log and "Current thread" in log, log
