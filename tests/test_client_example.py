"""The README's Python client example, extracted and run as written against a real
server (only its port is replaced by the test server's)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyctl.client import ReplayClient

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_client_example() -> str:
    text = README.read_text()
    section = text.split("### Python client\n", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "the Python client section has no python block"
    return m.group(1)


def test_readme_client_example_runs(inreplay_server: Any) -> None:
    pytest.importorskip("torch")
    code = readme_client_example()
    assert 'port=6379' in code
    code = code.replace("port=6379", f"port={inreplay_server.port}")
    with ReplayClient(port=inreplay_server.port) as rc:
        for t in rc.tables():
            rc.drop(t)
    scope: dict[str, Any] = {}
    exec(compile(code, str(README) + ":python-client", "exec"), scope)
    s, schema = scope["s"], scope["schema"]
    assert scope["ids"].tolist() == list(range(64))
    assert scope["obs"].shape == (32, 84, 84, 4) and scope["obs"].flags.writeable
    assert set(s.items) == set(schema.fields) and (s.weights <= 1).all()
    assert type(scope["t"].items["obs"]).__module__.startswith("torch")
    batch = scope["batch"]
    np.testing.assert_array_equal(s.items["action"], batch["action"][s.ids])
    with ReplayClient(port=inreplay_server.port) as rc:
        assert rc.redis.get("params") == b"..." and "replay" not in rc.tables()
