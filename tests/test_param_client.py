"""pyctl.params.ParamClient: a torch module bound to flat buffers pushes its .grad
buffer as it is and pulls into its parameters with one copy, and training through
the appliance tracks torch.optim on the same module."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pytest
import redis

from pyctl.errors import NoSuchTableError, StaleGradientError, SyncTimeout
from pyctl.params import ParamClient

if TYPE_CHECKING:
    from conftest import ServerProcess

torch = pytest.importorskip("torch")


@pytest.fixture
def pc(inreplay_server: ServerProcess) -> Iterator[ParamClient]:
    c = ParamClient(connection=redis.Redis(host=inreplay_server.host,
                                           port=inreplay_server.port))
    yield c
    c.close()


def net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def test_bound_module_trains_like_torch_optim(pc: ParamClient) -> None:
    worker, ref = net(1), net(1)
    flat = pc.bind(worker)
    # every parameter and gradient is a view of the flat buffers
    lo = flat.params.data_ptr()
    assert all(lo <= p.data_ptr() < lo + 4 * flat.size for p in worker.parameters())
    assert flat.grads_bound()
    pc.create("net", flat.size, "adam", lr=1e-2, init=flat.params)
    opt = torch.optim.Adam(ref.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    for step in range(1, 51):
        x = torch.from_numpy(rng.standard_normal((32, 6)).astype(np.float32))
        y = torch.from_numpy(rng.standard_normal((32, 3)).astype(np.float32))
        flat.grads.zero_()
        torch.nn.functional.mse_loss(worker(x), y).backward()
        assert flat.grads_bound()  # backward accumulated into the views
        assert pc.push_bound("net", flat, base=flat.version, maxstale=0) == step
        assert pc.pull_bound("net", flat)
        assert not pc.pull_bound("net", flat)  # IFNEWER: nothing new
        opt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), y).backward()
        opt.step()
    ours = flat.params.detach().numpy()
    theirs = torch.nn.utils.parameters_to_vector(ref.parameters()).detach().numpy()
    # the same float32 formulas; the forward/backward passes see the same parameters
    # to within the optimizer's ulps, which 50 steps of a small net keep below 1e-5
    assert np.max(np.abs(ours - theirs)) < 1e-5
    assert np.max(np.abs(ours - flat.params.numpy())) == 0
    assert pc.info("net")["step"] == 50


def test_flat_push_pull_and_errors(pc: ParamClient) -> None:
    pc.create("f", 4, "sgd", lr=0.5, init=np.ones(4, dtype=np.float32))
    assert pc.push("f", torch.full((2, 2), 0.5)) == 1
    version, w = pc.pull("f")
    assert version == 1 and w is not None and np.array_equal(w, np.full(4, 0.75, np.float32))
    assert pc.pull("f", ifnewer=1) == (1, None)
    assert pc.set("f", np.zeros(4)) == 2
    worker = net(2)
    flat = pc.bind(worker)
    worker.zero_grad(set_to_none=True)
    assert not flat.grads_bound()
    with pytest.raises(ValueError, match="no longer a view"):
        pc.push_bound("f", flat)
    with pytest.raises(NoSuchTableError):
        pc.pull("nosuch")


def test_sync_staleness_and_timeout_raise_their_classes(pc: ParamClient) -> None:
    """create(sync=k) makes a SYNC table; push(timeout=) of a round that does not complete
    raises SyncTimeout (withdrawn: nothing applied); push(base, maxstale) of a gradient
    too old raises StaleGradientError."""
    pc.create("s", 4, "sgd", sync=2)
    assert pc.info("s")["sync"] == 2
    with pytest.raises(SyncTimeout):
        pc.push("s", np.ones(4, np.float32), timeout=0.05)
    assert pc.pull("s")[0] == 0 and pc.info("s")["sync_pending"] == 0
    pc.create("t", 4, "sgd")
    for _ in range(3):
        pc.push("t", np.ones(4, np.float32))
    with pytest.raises(StaleGradientError):
        pc.push("t", np.ones(4, np.float32), base=0, maxstale=2)
    assert pc.push("t", np.ones(4, np.float32), base=1, maxstale=2) == 4
