"""Replay groups: pyctl start --shards, REPLAY.SHARDS, id routing, and exact
global prioritized sampling across shards (ShardedReplayClient)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from conftest import replay_group
from helpers import run_pyctl

from pyctl import _native
from pyctl.client import ReplayClient
from pyctl.sharded import (
    SHARD_ID_BITS,
    ShardedReplayClient,
    ShardedSampleInfo,
    group_members,
    replay_client,
    shard_members,
    split_address,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def group(tmp_path: Path, replay_host: str) -> Iterator[list[str]]:
    """Two shards started as one group on this box, their addresses: by pyctl (native), or
    two redis-servers with the module (SHARD_GROUP, SHARD_INDEX)."""
    with replay_group(tmp_path, replay_host) as members:
        yield members


def _conn(addr: str) -> redis.Redis:
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), protocol=2)


@pytest.mark.native_only(reason="pyctl start --shards and pyctl status start native servers")
def test_group_start_status(group: list[str], tmp_path: Path) -> None:
    assert len(group) == 2
    status = run_pyctl(tmp_path / "run", "status", "--json")
    rows = json.loads(status.stdout)
    assert sorted(r["shard"]["index"] for r in rows) == [0, 1]
    assert all(r["shard"]["group"] == group for r in rows)


def test_group_shards_and_ids(group: list[str]) -> None:
    assert len(group) == 2
    for k, addr in enumerate(group):
        r = _conn(addr)
        raw = r.execute_command("REPLAY.SHARDS")
        assert raw == [b"index", k, b"shards", [m.encode() for m in group]]
        r.execute_command("REPLAY.CREATE", "t", "CAPACITY", 10)
        ids = r.execute_command("REPLAY.ADD", "t", 1, b"a", 1, b"b")
        assert ids == [k << SHARD_ID_BITS, (k << SHARD_ID_BITS) + 1]
        r.close()


def test_standalone_server_is_a_group_of_one(replay_server: object) -> None:
    port = replay_server.port  # type: ignore[attr-defined]
    r = redis.Redis(port=port, protocol=2)
    assert r.execute_command("REPLAY.SHARDS") == [b"index", 0, b"shards", []]
    r.close()
    rc = ShardedReplayClient.from_seed(f"127.0.0.1:{port}")
    assert rc.addresses == [f"127.0.0.1:{port}"]
    rc.close()


@pytest.mark.parametrize("args, message", [
    (["--shards", "2", "--shard-group", "127.0.0.1:1,127.0.0.1:2"], "--shards starts a whole"),
    (["--shard-group", "127.0.0.1:1,127.0.0.1:2", "--shard-index", "2"], "--shard-index 2"),
    (["--shard-group", "127.0.0.1:1,nonsense"], "--shard-group"),
    # it listened on its --listen while REPLAY.SHARDS advertised the group's address
    (["--shard-group", "127.0.0.1:6380,127.0.0.1:6381", "--shard-index", "1"],
     "names this member 127.0.0.1:6381"),
])
def test_group_flags_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    out = run_pyctl(tmp_path / "run", "start", "--listen", "127.0.0.1:0", *args)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and message in out.stderr


def test_from_seed_finds_the_group_and_updates_route_by_id(group: list[str]) -> None:
    rc = ShardedReplayClient.from_seed(group[1])
    assert rc.addresses == group
    rc.create("t", capacity=100)
    a = rc.add("t", [1.0, 2.0], [b"x", b"y"])
    b = rc.add("t", [3.0], [b"z"])
    assert list(a >> SHARD_ID_BITS) == [0, 0] and list(b >> SHARD_ID_BITS) == [1]
    applied = rc.update("t", np.concatenate([b, a]), np.array([5.0, 6.0, 7.0], np.float32))
    assert applied == 3
    per = rc.info("t")["shards"]
    assert [int(d["updates"]) for d in per] == [2, 1]
    with pytest.raises(ValueError, match="belongs to no shard"):
        rc.update("t", [5 << SHARD_ID_BITS], [1.0])
    rc.close()


def test_replay_client_is_the_group_or_the_server(group: list[str],
                                                 replay_server: object) -> None:
    """replay_client (the integrations' connect): the whole group from any member, a
    ReplayClient for a standalone server; the steps it takes are public too."""
    rc = replay_client(group[1])
    assert isinstance(rc, ShardedReplayClient) and rc.addresses == group
    rc.close()
    host, port = split_address(group[1])
    assert group_members(host, port) == group
    r = _conn(group[1])
    assert shard_members(r) == (1, group)
    r.close()
    port = replay_server.port  # type: ignore[attr-defined]
    one = replay_client(f"127.0.0.1:{port}")
    assert type(one) is ReplayClient and group_members("127.0.0.1", port) == []
    one.close()
    assert split_address("[::1]:6379") == ("::1", 6379)
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        split_address("6379")


def test_shards_in_the_wrong_order_are_refused(group: list[str]) -> None:
    with pytest.raises(ValueError, match=r"REPLAY\.SHARDS order"):
        ShardedReplayClient(list(reversed(group)))


ITEMS = 40


def _fill(rc: ShardedReplayClient) -> np.ndarray:
    """ITEMS items per shard; shard 0's priorities sum to 10x shard 1's. Returns each
    item's exact probability under one tree holding all of them, by id order."""
    rng = np.random.default_rng(1)
    rc.create("t", capacity=1000, alpha=1.0, epsilon=0.0, beta=0.5)
    p0 = rng.uniform(1, 10, ITEMS)
    p1 = rng.uniform(1, 10, ITEMS)
    p1 *= p0.sum() / (10 * p1.sum())
    rc.shards[0].add("t", p0, [b"%d" % i for i in range(ITEMS)])
    rc.shards[1].add("t", p1, [b"%d" % (ITEMS + i) for i in range(ITEMS)])
    p = np.concatenate([p0, p1])
    return p / p.sum()


def _index(ids: np.ndarray) -> np.ndarray:
    """Item position 0..2*ITEMS-1 from a group id."""
    return (ids >> SHARD_ID_BITS) * ITEMS + (ids & ((1 << SHARD_ID_BITS) - 1))


def _tv(counts: np.ndarray, exact: np.ndarray) -> float:
    return float(0.5 * np.abs(counts / counts.sum() - exact).sum())


DRAWS = 1_000_000


@pytest.mark.parametrize("stratified", [True, False])
def test_global_sampling_matches_one_tree(group: list[str], stratified: bool) -> None:
    rc = ShardedReplayClient(group, stratified=stratified, seed=3)
    exact = _fill(rc)
    counts = np.zeros(2 * ITEMS)
    batch = 1000
    for _ in range(DRAWS // batch):
        s = rc.sample("t", batch)
        np.add.at(counts, _index(s.ids), 1)
    assert _tv(counts, exact) < 0.01
    rc.close()


def test_per_shard_uniform_sampling_fails_the_same_test(group: list[str]) -> None:
    """Reverb-style: equal draws from each shard, proportional inside it."""
    rc = ShardedReplayClient(group, seed=3)
    exact = _fill(rc)
    counts = np.zeros(2 * ITEMS)
    for _ in range(DRAWS // 1000):
        for shard in rc.shards:
            s = shard.sample("t", 500)
            np.add.at(counts, _index(s.ids), 1)
    assert _tv(counts, exact) > 0.1
    rc.close()


def test_a_single_tree_passes_the_same_bound(replay_server: object) -> None:
    """The bound is reachable: one server holding the same items."""
    rc = ReplayClient(port=replay_server.port)  # type: ignore[attr-defined]
    rng = np.random.default_rng(1)
    p0 = rng.uniform(1, 10, ITEMS)
    p1 = rng.uniform(1, 10, ITEMS)
    p1 *= p0.sum() / (10 * p1.sum())
    p = np.concatenate([p0, p1])
    rc.create("single", capacity=1000, alpha=1.0, epsilon=0.0)
    base = int(rc.add("single", p, [b"x"] * len(p))[0])
    counts = np.zeros(len(p))
    for _ in range(DRAWS // 1000):
        np.add.at(counts, rc.sample("single", 1000).ids - base, 1)
    assert _tv(counts, p / p.sum()) < 0.01
    rc.drop("single")
    rc.close()


def test_weights_are_global_and_exact(group: list[str]) -> None:
    rc = ShardedReplayClient(group, seed=5)
    exact = _fill(rc)
    n_items = len(exact)
    for beta in (0.4, 1.0):
        s = rc.sample("t", 512, beta=beta)
        p = exact[_index(s.ids)]
        want = (n_items * p) ** -beta / (n_items * exact.min()) ** -beta
        np.testing.assert_allclose(s.weights, want, rtol=2e-6)
    assert rc.sample("t", 512).weights.max() <= 1.0
    rc.close()


@pytest.mark.parametrize("packed", [False, True])
def test_sample_info_across_shards(group: list[str], packed: bool) -> None:
    """info=True: each draw's global probability and shard, the group's size, the
    stored priority and times sampled, as one server's WITHINFO."""
    rc = ShardedReplayClient(group, seed=4)
    exact = _fill(rc)
    if packed:  # the same priorities, items of 2 bytes: the item's position
        rc.create("tp", capacity=1000, alpha=1.0, epsilon=0.0)
        for k in range(2):
            pos = np.arange(k * ITEMS, (k + 1) * ITEMS, dtype=">u2")
            rc.shards[k].add("tp", exact[pos] * 1000, pos.view(np.uint8).reshape(-1, 2))
    table = "tp" if packed else "t"
    s = rc.sample(table, 256, info=True, **({"item_shape": 2} if packed else {}))
    info = s.info
    assert isinstance(info, ShardedSampleInfo)
    assert info.table_size == 2 * ITEMS and info.shard_sizes == [ITEMS, ITEMS]
    np.testing.assert_array_equal(info.shard, s.ids >> SHARD_ID_BITS)
    np.testing.assert_allclose(info.probability, exact[_index(s.ids)], rtol=1e-6)
    assert info.times_sampled.min() >= 1 and info.priority.shape == (256,)
    if packed:
        np.testing.assert_array_equal(s.items.view(">u2")[:, 0], _index(s.ids))
        np.testing.assert_allclose(info.priority, exact[_index(s.ids)] * 1000, rtol=1e-6)
    else:
        assert [int(it) for it in s.items] == list(_index(s.ids))
    rc.close()


def test_packed_items_across_shards(group: list[str]) -> None:
    rc = ShardedReplayClient(group, seed=9)
    rc.create("img", capacity=100)
    for k in range(4):
        frames = np.full((5, 2, 3), k, np.uint8) + np.arange(5, dtype=np.uint8)[:, None, None]
        rc.add("img", None, frames)
    s = rc.sample("img", 64, item_shape=(2, 3))
    assert s.items.shape == (64, 2, 3) and s.items.flags.writeable
    # every item is a constant array: its value tells batch k and row i
    assert all(np.all(it == it[0, 0]) for it in s.items)
    assert set(np.unique(s.ids >> SHARD_ID_BITS)) == {0, 1}
    rc.close()


def test_item_size_errors_name_the_shard(group: list[str]) -> None:
    """A group's packed sample of the wrong item size says what a standalone server's
    does, with the shard; the group stays usable after it (the replies were read)."""
    rc = ShardedReplayClient(group, seed=9)
    rc.create("img", capacity=100)
    rc.add("img", None, np.zeros((8, 6), np.uint8))
    rc.add("img", None, np.zeros((8, 6), np.uint8))
    with pytest.raises(ValueError, match=r"item_shape \(4,\) of uint8 is 4 bytes, but the "
                                         r"table's items are 6 bytes on shard [01] \(127"):
        rc.sample("img", 32, item_shape=(4,))
    with pytest.raises(ValueError, match=r"is 4 bytes, but the table's items are 6 bytes"):
        rc.sample("img", 32, item_shape=(4,), info=True)  # redis-py's replies
    assert rc.sample("img", 32, item_shape=(6,)).items.shape == (32, 6)
    rc.close()


def test_withstats_reply_layout(replay_server: object) -> None:
    r = redis.Redis(port=replay_server.port, protocol=2)  # type: ignore[attr-defined]
    r.execute_command("REPLAY.CREATE", "w", "CAPACITY", 8, "ALPHA", 1, "EPSILON", 0)
    r.execute_command("REPLAY.ADD", "w", 1, b"aa", 3, b"bb")
    _, _, items, st = r.execute_command("REPLAY.SAMPLE", "w", 4, "WITHSTATS")
    total, mn = np.frombuffer(st, "<f8", 2)
    size = int(np.frombuffer(st, "<i8", 1, 16)[0])
    probs = np.frombuffer(st, "<f8", 4, 24)
    assert (total, mn, size) == (4.0, 1.0, 2)
    assert len(st) == 24 + 8 * 4
    for item, pr in zip(items, probs, strict=True):
        assert pr == (0.25 if item == b"aa" else 0.75)
    packed = r.execute_command("REPLAY.SAMPLE", "w", 4, "PACKED", "WITHSTATS")
    assert len(packed) == 12 * 4 + 2 * 4 + 24 + 8 * 4
    assert np.frombuffer(packed, "<f8", 1, 12 * 4 + 8)[0] == 4.0
    r.execute_command("REPLAY.DROP", "w")
    r.close()


DPDK = os.geteuid() == 0 and _native.has_stack("dpdk")


@pytest.mark.skipif(not DPDK, reason="needs root and a DPDK build")
def test_dpdk_group_one_lwip_per_core(tmp_path: Path) -> None:
    """--shards 2 on DPDK: two processes, one per core of --cores, each with its own lwIP
    on its own address of the same port, found from either address."""
    from pyctl import netns

    name = f"irsh{os.getpid() % 10000}"
    subnet = netns.free_subnet()
    base = subnet.rsplit(".", 2)[0]
    run = tmp_path / "run"
    up = run_pyctl(run, "netns", "up", "--name", name, "--subnet", subnet)
    assert up.returncode == 0, up.stderr
    try:
        ips = f"{base}.0.2/24,{base}.0.4/24"  # .3 is the namespace's kernel address
        out = run_pyctl(run, "start", "--shards", "2", "--stack", "dpdk", "--netns", name,
                     "--cores", "0-1", "--ip", ips, "--vdev", f"net_af_packet0,iface={name}-a",
                     "--listen-port", "7400", "--hugepages", "128", "--daemon",
                     "--capacity", "1000",
                     # the test's own veth: a DPDK port trusts no one by default
                     "--client-subnet", subnet, timeout=120)
        assert out.returncode == 0, out.stderr + out.stdout
        try:
            rc = ShardedReplayClient.from_seed(f"{base}.0.4:7400")
            assert rc.addresses == [f"{base}.0.2:7400", f"{base}.0.4:7400"]
            for i in range(4):
                rc.add("replay", None, np.full((50, 128), i, np.uint8))
            s = rc.sample("replay", 512, item_shape=(128,))
            assert set(np.unique(s.ids >> SHARD_ID_BITS)) == {0, 1}
            assert rc.update("replay", s.ids, np.ones(512)) == 512
            assert rc.info("replay")["size"] == 200
            rc.close()
        finally:
            stop = run_pyctl(run, "stop", "--all")
            assert stop.returncode == 0, stop.stderr
    finally:
        run_pyctl(run, "netns", "down", "--name", name)


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")
def test_group_on_every_address_is_usable_from_another_host(tmp_path: Path) -> None:
    """A group started on 0.0.0.0 advertises 0.0.0.0:P in REPLAY.SHARDS; a client
    in another network namespace reaches every member through from_seed(box address)."""
    ns, here, there = f"irsh{os.getpid() % 100000}", "10.231.7.1", "10.231.7.2"
    veth = f"irsh{os.getpid() % 100000}a"

    def ip(*a: str) -> None:
        subprocess.run(["ip", *a], check=True, capture_output=True)

    ip("netns", "add", ns)
    try:
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("addr", "add", f"{here}/24", "dev", veth)
        ip("link", "set", veth, "up")
        ip("-n", ns, "addr", "add", f"{there}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        run = tmp_path / "run"
        out = run_pyctl(run, "start", "--shards", "2", "--listen", "0.0.0.0:0", "--daemon",
                     "--client-subnet", "10.231.7.0/24")
        assert out.returncode == 0, out.stderr
        try:
            line = next(ln for ln in out.stdout.splitlines() if ln.startswith("inreplay: group "))
            members = line.removeprefix("inreplay: group ").split(",")
            assert all(m.startswith("0.0.0.0:") for m in members), members
            port = members[0].rsplit(":", 1)[1]
            code = (
                "import numpy as np\n"
                "from pyctl.sharded import ShardedReplayClient\n"
                f"rc = ShardedReplayClient.from_seed('{here}:{port}', socket_timeout=10)\n"
                "print(','.join(rc.addresses))\n"
                "rc.create('t', capacity=100)\n"
                "for _ in range(2): rc.add('t', np.ones(4), [b'x'] * 4)\n"
                "print(len(rc.sample('t', 8).ids))\n")
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            res = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code],
                                 capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
            assert res.returncode == 0, res.stderr
            addrs, n = res.stdout.split()
            assert addrs == ",".join(f"{here}:{m.rsplit(':', 1)[1]}" for m in members)
            assert n == "8"
        finally:
            stop = run_pyctl(run, "stop", "--all")
            assert stop.returncode == 0, stop.stderr
    finally:
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
