"""Code blocks of the README and the documentation pages, for the tests that run them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```$", re.S | re.M)


def page(name: str) -> str:
    """README.md, or a page under docs/ by its path there ("concepts/tables.md")."""
    return (README if name == "README.md" else DOCS / name).read_text()


def section(text: str, heading: str) -> str:
    """From a heading line (as written, "## TorchRL") to the next heading of its level
    or above (or the end)."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1:]
    m = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return heading + "\n" + (rest[:m.start()] if m else rest)


def blocks(text: str, lang: str = "python") -> list[str]:
    """The fenced code blocks of one language, in order."""
    return [m.group(2) for m in FENCE.finditer(text) if m.group(1) == lang]


def with_port(code: str, host: str, port: int) -> str:
    """A sample written for 127.0.0.1:6379, pointed at another server."""
    assert "6379" in code, "the sample names no 127.0.0.1:6379 server"
    return (code.replace("port=6379", f"port={port}")
            .replace('"127.0.0.1:6379"', f'"{host}:{port}"')
            .replace('host="127.0.0.1"', f'host="{host}"'))
