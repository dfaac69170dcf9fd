"""TorchRL's replay buffers on inreplay (integrations/torchrl.py), against real servers:
a standalone one and a 2-shard replay group, compared with TorchRL's own
PrioritizedSampler + LazyTensorStorage on the same priorities."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from doc_blocks import blocks, page, section

from pyctl.errors import decode_info

torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")

from inreplay.integrations import torchrl_trees  # noqa: E402
from inreplay.integrations.torchrl import (  # noqa: E402
    EMPTY_STORAGE_ERROR,
    InreplaySampler,
    InreplayStorage,
    InreplayWriter,
    connect,
)
from tensordict import TensorDict  # noqa: E402
from torchrl.data import (  # noqa: E402
    LazyTensorStorage,
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    RoundRobinWriter,
    TensorDictReplayBuffer,
)

ROOT = Path(__file__).resolve().parent.parent
ALPHA, BETA, EPS = 0.7, 0.5, 1e-6


GROUP_SEED = "3"


@pytest.fixture
def address(replay_members: list[str]) -> str:
    """A standalone server, or the first member of a 2-shard replay group, of replay_host."""
    return replay_members[0]


def _ours(address: str, capacity: int = 64, table: str = "t", **kw: Any) -> TensorDictReplayBuffer:
    return TensorDictReplayBuffer(
        storage=InreplayStorage(capacity, client=connect(address), table=table),
        sampler=InreplaySampler(capacity, alpha=kw.get("alpha", ALPHA), beta=BETA, eps=EPS),
        batch_size=kw.get("batch_size", 16), priority_key="td_error")


def _local(capacity: int = 64) -> TensorDictReplayBuffer:
    torchrl_trees.ensure()  # TorchRL's own trees, built for this torch if its wheel's fail
    return TensorDictReplayBuffer(
        storage=LazyTensorStorage(capacity),
        sampler=PrioritizedSampler(capacity, alpha=ALPHA, beta=BETA, eps=EPS),
        batch_size=16, priority_key="td_error")


def _batch(start: int, n: int) -> TensorDict:
    k = torch.arange(start, start + n)
    return TensorDict({"k": k, "obs": k[:, None].float().expand(n, 3).clone(),
                       ("next", "done"): (k % 2 == 0)[:, None]}, batch_size=[n])


def _calls(address: str) -> dict[str, int]:
    """REPLAY.* calls so far on every server of the group (INFO commandstats)."""
    out: dict[str, int] = {}
    rc = connect(address)
    clients = rc.shards if hasattr(rc, "shards") else [rc]
    for c in clients:
        for k, v in c.redis.info("commandstats").items():
            if k.startswith("cmdstat_replay.") and k != "cmdstat_replay.shards":  # connect's
                out[k] = out.get(k, 0) + int(v["calls"])
    rc.close()
    return out


def _weights_by_k(rb: TensorDictReplayBuffer, n: int = 20_000) -> tuple[dict[int, float],
                                                                          np.ndarray]:
    s = rb.sample(n)
    ks = s["k"].numpy()
    w = s["priority_weight"].numpy()
    out: dict[int, float] = {}
    for k, wk in zip(ks.tolist(), w.tolist(), strict=True):
        out.setdefault(k, wk)
        assert out[k] == pytest.approx(wk, rel=1e-6), "one item, one weight"
    return out, ks


def test_round_trips_len_and_fields(address: str) -> None:
    rb = _ours(address)
    assert len(rb) == 0
    with pytest.raises(RuntimeError, match=re.escape(EMPTY_STORAGE_ERROR)):
        rb.sample()
    before = _calls(address)
    ids = rb.extend(_batch(0, 10))
    after = _calls(address)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    # the first extend creates the table; the REPLAY.ADD is one per batch
    assert delta["cmdstat_replay.add"] == 1
    assert ids.dtype == torch.int64 and ids.shape == (10,) and len(set(ids.tolist())) == 10
    ids2 = rb.extend(_batch(10, 6))
    assert len(rb) == 16
    rb.sample()  # a group learns the shards' totals on the first draw
    before = _calls(address)
    s = rb.sample()
    after = _calls(address)
    delta = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    shards = len(getattr(rb.storage.client, "shards", [None]))
    assert set(delta) == {"cmdstat_replay.sample"} and delta["cmdstat_replay.sample"] <= shards
    assert s.batch_size == (16,)
    assert (s["obs"] == s["k"][:, None].float()).all()
    assert (s["next", "done"][:, 0] == (s["k"] % 2 == 0)).all()
    assert set(s["index"].tolist()) <= set(ids.tolist()) | set(ids2.tolist())
    assert s["priority_weight"].dtype == torch.float32
    assert ((s["priority_weight"] > 0) & (s["priority_weight"] <= 1)).all()


def test_weights_and_new_items_match_torchrl(address: str) -> None:
    """Same priorities -> the same importance weights as TorchRL's PrioritizedSampler,
    and new items at the max priority, in both."""
    ours, local = _ours(address), _local()
    oid, lid = ours.extend(_batch(0, 20)), local.extend(_batch(0, 20))
    prio = torch.linspace(0.05, 3.0, 20)
    ours.update_priority(oid, prio)
    local.update_priority(lid, prio)
    ours.extend(_batch(20, 4))   # new items: the max priority
    local.extend(_batch(20, 4))
    w_ours, ks = _weights_by_k(ours)
    w_local, _ = _weights_by_k(local)
    assert set(w_ours) == set(range(24)) == set(w_local)
    for k in range(24):
        assert w_ours[k] == pytest.approx(w_local[k], rel=2e-5), k
    # new items got the max priority: the weight of the largest raw priority (3.0)
    for k in range(20, 24):
        assert w_ours[k] == pytest.approx(w_ours[19], rel=1e-6)
    # draws follow P(i) = (p_i + eps)^alpha / sum
    p = torch.cat([prio, torch.full((4,), 3.0)]).double()
    want = ((p + EPS) ** ALPHA / ((p + EPS) ** ALPHA).sum()).numpy()
    freq = np.bincount(ks, minlength=24) / ks.size
    assert np.abs(freq - want).max() < 0.012, (freq, want)


def test_update_priority_and_tensordict_priority(address: str) -> None:
    rb = _ours(address)
    rb.extend(_batch(0, 8))
    s = rb.sample(64)
    hot = int(s["k"][0])
    s["td_error"] = torch.where(s["k"] == hot, 1e6, 1e-3)
    rb.update_tensordict_priority(s)
    again = rb.sample(256)
    assert (again["k"] == hot).float().mean() > 0.95
    # update_priority by index: the cold items come back
    rb.update_priority(again["index"][:1], torch.tensor([1e-3]))
    mixed = rb.sample(512)
    assert len(set(mixed["k"].tolist())) == 8
    # beta is sent with every draw
    rb.sampler.beta = 0.0
    assert (rb.sample(32)["priority_weight"] == 1).all()


def test_extend_with_priorities_is_one_request(address: str) -> None:
    rb = _ours(address)
    rb.extend(_batch(0, 4))  # creates the table
    td = _batch(4, 6)
    td["td_error"] = torch.tensor([0.1, 0.1, 0.1, 0.1, 0.1, 9.0])
    before = _calls(address)
    rb.extend(td)
    after = _calls(address)
    delta = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert delta == {"cmdstat_replay.add": 1}
    ks = rb.sample(2000)["k"]
    assert (ks == 9).float().mean() > 0.3  # (9+eps)^0.7 against the rest at 1 or 0.1


def test_stale_update_after_eviction_is_skipped(replay_server: Any) -> None:
    rb = _ours(f"{replay_server.host}:{replay_server.port}", capacity=4)
    old = rb.extend(_batch(0, 4))
    rb.extend(_batch(4, 4))  # evicts the first four
    rb.update_priority(old, torch.full((4,), 100.0))
    info = rb.storage.client.info("t")
    assert info["stale_updates"] == 4 and info["size"] == 4
    assert set(rb.sample(200)["k"].tolist()) == {4, 5, 6, 7}


def test_a_learner_process_reads_the_layout(address: str) -> None:
    writer = _ours(address)
    writer.extend(_batch(0, 5))
    learner = _ours(address)  # another process: nothing written through it
    s = learner.sample(8)
    assert (s["obs"][:, 0] == s["k"].float()).all()
    # a buffer created with other alpha refuses the table
    with pytest.raises(ValueError, match="alpha"):
        _ours(address, alpha=0.3).extend(_batch(0, 1))


def test_plain_replay_buffer_and_defaults(replay_server: Any) -> None:
    """ReplayBuffer(storage=InreplayStorage(...)) gets InreplayWriter and a uniform
    InreplaySampler (alpha 0, beta 0: TorchRL's RandomSampler's draws)."""
    addr = f"{replay_server.host}:{replay_server.port}"
    rb = ReplayBuffer(storage=InreplayStorage(10, client=connect(addr), table="p"), batch_size=5)
    assert isinstance(rb.writer, InreplayWriter) and isinstance(rb.sampler, InreplaySampler)
    rb.extend(torch.arange(12).reshape(6, 2))
    s, info = rb.sample(return_info=True)
    assert s.shape == (5, 2) and (s[:, 1] == s[:, 0] + 1).all()
    assert (info["priority_weight"] == 1).all()
    assert rb.write_count == 6
    rb.empty()
    assert len(rb) == 0 and "p" not in connect(addr).tables()


def test_clear_errors(replay_server: Any) -> None:
    addr = f"{replay_server.host}:{replay_server.port}"
    rb = _ours(addr)
    rb.extend(_batch(0, 3))
    with pytest.raises(RuntimeError, match="only through a prioritized draw"):
        rb[0]
    explicit = ReplayBuffer(storage=InreplayStorage(8, client=connect(addr), table="w"),
                            sampler=InreplaySampler(8, alpha=0.6, beta=0.4),
                            writer=RoundRobinWriter())
    with pytest.raises(RuntimeError, match="InreplayWriter"):
        explicit.extend(torch.zeros(2, 2))
    uniform = ReplayBuffer(storage=InreplayStorage(8, client=connect(addr), table="u"),
                           sampler=RandomSampler())
    with pytest.raises(TypeError, match="InreplaySampler"):
        uniform.extend(torch.zeros(2, 2))
    with pytest.raises(ValueError, match="max_priority_within_buffer"):
        InreplaySampler(8, alpha=0.6, beta=0.4, max_priority_within_buffer=True)
    with pytest.raises(ValueError, match="alpha is fixed"):
        rb.sampler.alpha = 0.1
    with pytest.raises(ValueError, match="keys differ"):
        rb.extend(TensorDict({"other": torch.zeros(2)}, [2]))
    assert len(rb) == 3  # nothing of the bad batch was written


def test_torchrl_dqn_smoke(replay_server: Any) -> None:
    """python -m inreplay.integrations.torchrl_dqn with small step counts: trains, reports learner
    steps/s and prints solved: true|false last."""
    _dqn_smoke("inreplay", replay_server)


def test_torchrl_dqn_smoke_local_buffer(inreplay_server: Any) -> None:
    """The same with TorchRL's own buffer (the server is not used: once is enough)."""
    _dqn_smoke("local", inreplay_server)


def _dqn_smoke(buffer: str, replay_server: Any) -> None:
    argv = [sys.executable, "-m", "inreplay.integrations.torchrl_dqn", "--buffer", buffer,
            "--total-steps", "1024", "--learning-starts", "256", "--train-every", "256",
            "--grad-steps", "8", "--eval-every", "512", "--eval-episodes", "2",
            "--address", f"{replay_server.host}:{replay_server.port}"]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert re.fullmatch(r"solved: (true|false)", lines[-1]), lines[-3:]
    rate = float(lines[-2].removeprefix("learner steps/s: "))
    assert rate > 0
    assert re.search(r"learner steps: 32\b", out.stdout), out.stdout  # 4 rounds of 8
    if buffer == "inreplay":
        r = redis.Redis(host=replay_server.host, port=replay_server.port, protocol=2)
        assert decode_info(r.execute_command("REPLAY.INFO", "torchrl_dqn"))["size"] == 1024
        r.close()


UPSTREAM_DIR = os.environ.get("TORCHRL_TESTS_DIR", "")
"""test/rb of a pytorch/rl checkout of the installed version: the torchrl 0.14.1 wheel
ships no tests and the package index here has no sdist."""
UPSTREAM_SELECTION = ("test_prioritized.py", "test_rb_core.py::TestBuffers")
"""TorchRL's tests of a prioritized sampler and of generic buffers over storages; the
other files test TorchRL's other samplers (slice, random, without replacement), its
tensor/memmap storages' internals, writers and transforms."""
SKIPLIST = ROOT / "tests" / "torchrl_upstream_skiplist.txt"


def _skiplist() -> list[tuple[str, str]]:
    out = []
    for line in SKIPLIST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pattern, _, reason = line.partition(" | ")
            out.append((pattern.strip(), reason.strip()))
    return out


def test_torchrl_own_replay_buffer_tests(server_factory: Any, tmp_path: Path) -> None:
    """TorchRL's own tests, run from their directory with torchrl's storages and
    PrioritizedSampler replaced by ours (tests/torchrl_upstream_plugin.py): every test
    passes except those in tests/torchrl_upstream_skiplist.txt, each with its reason,
    and each of those fails."""
    import fnmatch
    import xml.etree.ElementTree as ET

    upstream = Path(UPSTREAM_DIR) if UPSTREAM_DIR else None
    if upstream is None or not (upstream / "test_prioritized.py").is_file():
        pytest.skip("TorchRL's own replay-buffer tests are not installed: the torchrl 0.14.1 "
                    "wheel has no test/ and this package index has no sdist; set "
                    "TORCHRL_TESTS_DIR to test/rb of a pytorch/rl checkout to run them")
    srv = server_factory("inreplay")
    junit = tmp_path / "upstream.xml"
    env = dict(os.environ, INREPLAY_TORCHRL_SERVER=f"{srv.host}:{srv.port}", RL_WARNINGS="0",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "torchrl_upstream_plugin",
                    "-p", "no:cacheprovider", f"--junitxml={junit}", *UPSTREAM_SELECTION],
                   cwd=upstream, env=env, capture_output=True, text=True, timeout=1800)
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module, _, cls = case.get("classname", "").partition(".")
        test_id = "::".join(p for p in (f"{module}.py", cls, case.get("name", "")) if p)
        kinds = {child.tag for child in case}
        outcomes[test_id] = ("failed" if kinds & {"failure", "error"} else
                             "skipped" if "skipped" in kinds else "passed")
    skip = _skiplist()
    listed = {t for t in outcomes if any(fnmatch.fnmatchcase(t, p) for p, _ in skip)}
    unexpected = sorted(t for t, o in outcomes.items() if o == "failed" and t not in listed)
    stale = sorted(t for t in listed if outcomes[t] == "passed")
    unused = [p for p, _ in skip if not any(fnmatch.fnmatchcase(t, p) for t in outcomes)]
    counts = {o: sum(1 for v in outcomes.values() if v == o) for o in ("passed", "failed",
                                                                      "skipped")}
    print(f"TorchRL's tests on inreplay: {counts}, {len(listed)} listed as not applicable")
    assert counts["passed"] > 0, outcomes
    assert not unexpected, f"failed and not in {SKIPLIST.name}: {unexpected[:20]}"
    assert not stale, f"pass but are listed in {SKIPLIST.name} (remove them): {stale[:20]}"
    assert not unused, f"patterns in {SKIPLIST.name} that match no test: {unused}"


def test_docs_torchrl_example_runs(replay_server: Any) -> None:
    """The integrations page's TorchRL example, run as written (only the address
    replaced)."""
    found = blocks(section(page("integrations.md"), "## TorchRL"))
    assert found, "the TorchRL section has no python block"
    code = found[0]
    assert '"127.0.0.1:6379"' in code
    code = code.replace('"127.0.0.1:6379"', f'"{replay_server.host}:{replay_server.port}"')
    scope: dict[str, Any] = {}
    exec(compile(code, "docs/integrations.md:torchrl", "exec"), scope)
    batch = scope["batch"]
    assert batch.batch_size == (256,) and (batch["priority_weight"] <= 1).all()
    assert set(batch.keys()) >= {"obs", "action", "reward", "next", "done", "index"}
    assert "torchrl" not in scope["client"].tables()  # rb.empty() dropped it
