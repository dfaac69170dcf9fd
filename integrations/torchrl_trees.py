"""TorchRL's own segment trees for the installed torch, when its prebuilt ones do not load.

The torchrl 0.14.1 wheel's C++ extension (``torchrl._torchrl``: the sum and min
segment trees behind PrioritizedSampler) was built against another torch than this
project's torch 2.13.0 (CPU): importing it fails with an undefined symbol, and TorchRL's
PrioritizedSampler then raises "SumSegmentTreeFp32 is not available". TorchRL's own
warning suggests a local build; :func:`ensure` does exactly that, from the C++ sources
the wheel ships (``torchrl/csrc``), with ``torch.utils.cpp_extension`` against the
installed torch, once (cached in ``~/.cache/inreplay/torchrl-trees-<torch version>``;
several minutes on 2 busy cores), and hands the classes to TorchRL's prioritized
sampler module. Nothing is changed when TorchRL's prebuilt extension loads.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

NAMES = ("SumSegmentTreeFp32", "SumSegmentTreeFp64", "MinSegmentTreeFp32",
         "MinSegmentTreeFp64")


def prebuilt_error() -> str | None:
    """Why TorchRL's prebuilt extension does not load (None: it loads)."""
    try:
        import torchrl._torchrl  # noqa: F401
    except ImportError as e:
        return str(e).splitlines()[0][:300]
    return None


def ensure(verbose: bool = False) -> str:
    """Make TorchRL's PrioritizedSampler usable; returns how ("prebuilt" or the build
    directory of the local build)."""
    from torchrl.data.replay_buffers.samplers import prioritized

    if all(getattr(prioritized, n, None) is not None for n in NAMES):
        return "prebuilt"
    import torchrl
    from torch.utils.cpp_extension import load

    src = Path(torchrl.__file__).parent / "csrc"
    build = Path(os.environ.get("INREPLAY_TORCHRL_TREES_DIR", Path.home() / ".cache" /
                                "inreplay" / f"torchrl-trees-{torch.__version__}"))
    build.mkdir(parents=True, exist_ok=True)
    ext = load(name="_torchrl", sources=[str(src / "pybind.cpp"), str(src / "utils.cpp")],
               extra_include_paths=[str(src)], extra_cflags=["-O2"],
               build_directory=str(build), verbose=verbose)
    for n in NAMES:
        setattr(prioritized, n, getattr(ext, n))
    return str(build)
