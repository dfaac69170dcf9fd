"""Arena reuse: a table writes about twice its live bytes (at least
32 MB) before going back to the front of its arena, in both storage modes, so a
fresh table does not pay a page fault and a page clear per new page until it
has written MAXBYTES, and the server's resident memory follows the live bytes.

Each test writes ten times more than the reuse bound into a table whose
MAXBYTES is 1 GB, checks the server's resident set stays far below what the
writes would have touched, and reads the items back byte for byte (and, for
ring mode, through a snapshot round trip: the loader accepts a ring that
wrapped early).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pyctl.client import ReplayClient

if TYPE_CHECKING:
    from conftest import ServerProcess

ITEM = 64 * 1024
BATCH = 32


def rss_bytes(srv: ServerProcess) -> int:
    for line in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def item_of(i: int) -> bytes:
    """A 64 KB item whose every 8-byte word names it."""
    return np.full(ITEM // 8, i, dtype="<u8").tobytes()


def fill(rc: ReplayClient, table: str, total: int) -> None:
    n = 0
    while n < total:
        k = min(BATCH, total - n)
        rc.add(table, np.ones(k), [item_of(n + j) for j in range(k)])
        n += k


def check_items(rc: ReplayClient, table: str, live: range) -> None:
    s = rc.sample(table, 64)
    assert len(s.ids) == 64
    for i, data in zip(s.ids.tolist(), s.items, strict=True):
        assert i in live, i
        assert bytes(data) == item_of(i), f"item {i} corrupted"


def test_ring_arena_is_reused_and_survives_a_snapshot(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    srv = server_factory("inreplay", "--dir", str(snap), "--seed", "5")
    rc = ReplayClient(connection=srv.client())
    base = rss_bytes(srv)
    rc.create("ring", 256, maxbytes=1 << 30)  # 16 MB live
    total = 5000  # 320 MB written
    fill(rc, "ring", total)
    grown = rss_bytes(srv) - base
    assert grown < 160 << 20, f"resident set grew {grown >> 20} MB for 16 MB of live items"
    check_items(rc, "ring", range(total - 256, total))
    assert srv.client().save() is True
    before = rc.info("ring")
    assert srv.stop() == 0
    b = server_factory("inreplay", "--restore", str(snap), "--dir", str(tmp_path))
    rc = ReplayClient(connection=b.client())
    after = rc.info("ring")
    for k in ("size", "next_id", "bytes_used", "total_priority"):
        assert after[k] == before[k], k
    check_items(rc, "ring", range(total - 256, total))
    fill(rc, "ring", 1000)  # and it goes on from where it was
    assert rc.info("ring")["size"] == 256


def test_general_arena_compacts_early(server_factory: Callable[..., ServerProcess]) -> None:
    srv = server_factory("inreplay")
    rc = ReplayClient(connection=srv.client())
    base = rss_bytes(srv)
    # a LIFO remover makes a general-mode table (the bump allocator that compacts)
    rc.create("gen", 256, maxbytes=1 << 30, remover="lifo")
    fill(rc, "gen", 256)
    fill(rc, "gen", 5000)  # each insert removes the newest: ids 0..254 stay
    grown = rss_bytes(srv) - base
    assert grown < 200 << 20, f"resident set grew {grown >> 20} MB for 16 MB of live items"
    info = rc.info("gen")
    assert info["size"] == 256
    s = rc.sample("gen", 64)
    for i, data in zip(s.ids.tolist(), s.items, strict=True):
        assert bytes(data) == item_of(i if i < 255 else i - 256), f"item {i} corrupted"
