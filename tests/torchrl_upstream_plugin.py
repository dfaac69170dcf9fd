"""pytest plugin: TorchRL's own replay-buffer tests with inreplay's storage and sampler.

Loaded (``-p torchrl_upstream_plugin``) by tests/test_torchrl_integration.py into a
separate pytest run over TorchRL's test files. Before those files are imported it
replaces, inside the installed torchrl, the storages a test can name (ListStorage,
LazyTensorStorage, LazyMemmapStorage, and the ListStorage a buffer makes by default)
with InreplayStorage on the server in ``INREPLAY_TORCHRL_SERVER`` (HOST:PORT; a fresh
table per storage), and PrioritizedSampler (also inside PrioritizedReplayBuffer and
TensorDictPrioritizedReplayBuffer) with InreplaySampler. The tests themselves run
unchanged, from where they are.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import torch
import torchrl.data as data_pkg
import torchrl.data.replay_buffers as rb_pkg
from inreplay.integrations.torchrl import InreplaySampler, InreplayStorage, connect
from torchrl.data.replay_buffers import samplers as samplers_pkg
from torchrl.data.replay_buffers import storages as storages_pkg
from torchrl.data.replay_buffers.replay_buffers import base as rb_base
from torchrl.data.replay_buffers.replay_buffers import prioritized as prb_mod
from torchrl.data.replay_buffers.replay_buffers import prioritized_tensordict as ptdrb_mod

ADDRESS = os.environ.get("INREPLAY_TORCHRL_SERVER", "")
_tables = itertools.count()


class UpstreamStorage(InreplayStorage):
    """InreplayStorage with the signature of TorchRL's storages (max_size first; their
    other options are accepted, device honoured), each on a table of its own."""

    def __init__(self, max_size: int = 1000, *args: Any, device: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(max_size, client=connect(ADDRESS), table=f"upstream{next(_tables)}",
                         device=None if device in (None, "auto") else torch.device(device))


def _patch() -> None:
    if not ADDRESS:
        raise RuntimeError("set INREPLAY_TORCHRL_SERVER=HOST:PORT of an inreplay server")
    for mod in (storages_pkg, data_pkg, rb_pkg):
        for name in ("ListStorage", "LazyTensorStorage", "LazyMemmapStorage"):
            if hasattr(mod, name):
                setattr(mod, name, UpstreamStorage)
    for mod in (rb_base, prb_mod, ptdrb_mod):  # the storage buffers make by default
        if hasattr(mod, "ListStorage"):
            mod.ListStorage = UpstreamStorage  # type: ignore[attr-defined]
    for mod in (samplers_pkg, data_pkg, rb_pkg, prb_mod, ptdrb_mod):
        if hasattr(mod, "PrioritizedSampler"):
            mod.PrioritizedSampler = InreplaySampler  # type: ignore[attr-defined]


_patch()
