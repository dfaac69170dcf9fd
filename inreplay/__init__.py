"""inreplay: an in-network prioritized replay appliance for distributed RL.

The one import root of the package's Python code:

- ``from inreplay import ReplayClient, ShardedReplayClient, Schema`` (the client, whose
  code lives in ``pyctl``, the control plane that also gives the ``pyctl`` command);
- ``inreplay.rl``: the pieces every agent shares (configuration, codec, environments,
  networks, n-step returns, evaluation, the demo harness);
- ``inreplay.actors`` and ``inreplay.learner``: the agents' actors and learners (Ape-X,
  IMPALA, R2D2, A3C; ``pyctl demo``), which import ``inreplay.rl`` and never each other;
- ``inreplay.integrations``: TorchRL and RLlib on the appliance
  (``inreplay.integrations.torchrl``, ``inreplay.integrations.rllib``, ...).

In the repository the RL code and the integrations stay in their own top-level folders
(``rl/``, ``actors/``, ``learner/``, ``integrations/``); the wheel installs them inside this
package (meson.build), and in a checkout this package's path reaches them there.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

SUBPACKAGES = ("rl", "actors", "learner", "integrations")
"""The repository's top-level folders that are subpackages of inreplay."""

_checkout = Path(__file__).resolve().parent.parent
if (_checkout / "meson.build").is_file() and all((_checkout / p).is_dir() for p in SUBPACKAGES):
    # a source checkout: inreplay.actors is <checkout>/actors, and so on (an installed
    # package holds them inside itself and never gets here)
    __path__.append(str(_checkout))

_EXPORTS = {
    "ReplayClient": "pyctl.client", "Schema": "pyctl.client", "Sample": "pyctl.client",
    "SampleInfo": "pyctl.client", "BatchError": "pyctl.client",
    "ShardedReplayClient": "pyctl.sharded",
    "TrajectoryWriter": "pyctl.trajectory", "TrajectorySample": "pyctl.trajectory",
    "create_trajectory_table": "pyctl.trajectory", "sample_trajectories": "pyctl.trajectory",
    "flush_writers": "pyctl.trajectory",
    "errors": "pyctl.errors",
}
"""What ``from inreplay import X`` gives, and the module that defines it (imported on
first use, so that ``import inreplay.actors`` does not load the client)."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'inreplay' has no attribute {name!r}")
    module = import_module(_EXPORTS[name])
    value = module if name == "errors" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
