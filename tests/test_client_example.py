"""The Python client page's example (docs/python-client.md), extracted and run as
written against a real server (only its port is replaced by the test server's)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from doc_blocks import blocks, page

from pyctl.client import ReplayClient


def client_example() -> str:
    found = blocks(page("python-client.md"))
    assert found, "the Python client page has no python block"
    return found[0]


def test_client_example_runs(inreplay_server: Any) -> None:
    pytest.importorskip("torch")
    code = client_example()
    assert 'port=6379' in code
    code = code.replace("port=6379", f"port={inreplay_server.port}")
    with ReplayClient(port=inreplay_server.port) as rc:
        for t in rc.tables():
            rc.drop(t)
    scope: dict[str, Any] = {}
    exec(compile(code, "docs/python-client.md", "exec"), scope)
    s, schema = scope["s"], scope["schema"]
    assert scope["ids"].tolist() == list(range(64))
    assert scope["obs"].shape == (32, 84, 84, 4) and scope["obs"].flags.writeable
    assert set(s.items) == set(schema.fields) and (s.weights <= 1).all()
    assert type(scope["t"].items["obs"]).__module__.startswith("torch")
    batch = scope["batch"]
    np.testing.assert_array_equal(s.items["action"], batch["action"][s.ids])
    with ReplayClient(port=inreplay_server.port) as rc:
        assert rc.redis.get("params") == b"..." and "replay" not in rc.tables()
