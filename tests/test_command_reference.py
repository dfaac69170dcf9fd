"""The README's command reference against the server's own command table (issue 12):
every command the server has is documented, and every command documented exists."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import redis

README = Path(__file__).resolve().parent.parent / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"### {title}\n")
    end = text.index("\n### ", start + 1)
    return text[start:end]


def documented() -> set[str]:
    """Commands named in the first column of the Redis and replay command tables (the
    parenthesised subcommand lists are not commands)."""
    names: set[str] = set()
    for line in _section("Redis commands").splitlines():
        if line.startswith("| ") and not line.startswith("| family"):
            cells = line.split("|")
            if len(cells) > 2:
                body = re.sub(r"\([^)]*\)", "", cells[2])
                names |= {m.lower() for m in re.findall(r"`([A-Z][A-Z0-9_-]*)`", body)}
    for line in _section("Replay commands").splitlines():
        names |= {m.lower() for m in re.findall(r"`(REPLAY\.[A-Z]+)", line)}
    return names


def test_readme_lists_exactly_the_servers_commands(inreplay_server: Any) -> None:
    r = redis.Redis(port=inreplay_server.port, protocol=2)
    have = {c if isinstance(c, str) else c.decode() for c in r.command_list()}
    have = {c for c in have if "|" not in c}
    r.close()
    docs = documented()
    assert not have - docs, f"commands the README does not list: {sorted(have - docs)}"
    assert not docs - have, f"the README lists commands the server lacks: {sorted(docs - have)}"
