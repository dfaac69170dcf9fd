"""The Dueling network (Wang et al. 2016) and its parameter blob.

Q(s, a) = V(s) + A(s, a) - mean_a A(s, a), with two streams on a shared torso:

- pixels (4, 84, 84) uint8: the Nature DQN torso (conv 32x8x8/4, 64x4x4/2,
  64x3x3/1, 3136 features) and two 512-unit streams: 3.29 M parameters for
  Breakout's 4 actions, 13.2 MB as float32 (the seed system's 13 MB network);
- vectors: an MLP torso (two layers of ``hidden``) and two ``hidden``-unit streams.

Parameter blob (what the learner SETs and the actors GET)
---------------------------------------------------------
Never pickle: the blob is a 24-byte header and raw little-endian float32s::

    offset 0   4 bytes   magic b"IRPB"
    offset 4   uint32    format version (1)
    offset 8   uint32    CRC-32 of the layout string "name:d0xd1x..;" over the
                         state_dict entries in order (both sides must agree on it)
    offset 12  uint32    number of tensors
    offset 16  uint64    number of float32 values that follow
    offset 24  float32[] every state_dict tensor, flattened (C order), concatenated
                         in state_dict order

Decoding checks magic, version, layout CRC and size before copying the floats in.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from inreplay.rl.env import EnvSpec
from torch import nn

BLOB_MAGIC = b"IRPB"
BLOB_VERSION = 1
_HEADER = struct.Struct("<4sIIIQ")


class DuelingNet(nn.Module):
    """Dueling Q-network: torso, then value and advantage streams."""

    def __init__(self, torso: nn.Module, features: int, n_actions: int, stream: int,
                 scale: float = 1.0) -> None:
        super().__init__()
        self.torso = torso
        self.value = nn.Sequential(nn.Linear(features, stream), nn.ReLU(), nn.Linear(stream, 1))
        self.advantage = nn.Sequential(nn.Linear(features, stream), nn.ReLU(),
                                       nn.Linear(stream, n_actions))
        self.scale = scale  # 1/255 for uint8 frames

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float()
        if self.scale != 1.0:
            x = x * self.scale
        h = self.torso(x)
        v = self.value(h)
        a = self.advantage(h)
        return v + a - a.mean(dim=1, keepdim=True)


def nature_torso(in_channels: int) -> tuple[nn.Module, int]:
    torso = nn.Sequential(
        nn.Conv2d(in_channels, 32, 8, stride=4), nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
        nn.Flatten(),
    )
    return torso, 64 * 7 * 7


def mlp_torso(in_features: int, hidden: int) -> tuple[nn.Module, int]:
    torso = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(),
                          nn.Linear(hidden, hidden), nn.ReLU())
    return torso, hidden


def build_model(spec: EnvSpec, hidden: int = 128) -> DuelingNet:
    """The dueling network for ``spec``: Nature CNN for frames, MLP for vectors."""
    if spec.pixels:
        assert spec.obs_shape[1:] == (84, 84), spec.obs_shape
        torso, feats = nature_torso(spec.obs_shape[0])
        return DuelingNet(torso, feats, spec.n_actions, 512, scale=1.0 / 255.0)
    torso, feats = mlp_torso(int(np.prod(spec.obs_shape)), hidden)
    return DuelingNet(torso, feats, spec.n_actions, hidden)


class MlpPolicy:
    """The vector :class:`DuelingNet`'s forward pass for one observation, in NumPy: the
    same float32 arithmetic as ``net(obs[None])[0]``, without torch's per-call dispatch
    (an actor calls the network once per environment step, and for CartPole's 128-wide
    MLP that dispatch is most of the call: 275-291 us through torch, one thread, against
    42-62 us here, measured on the 2-core AMD VM). The actors share the cores with the
    learner, so what an actor saves per step goes to the learner. :meth:`load` copies
    the weights again after the actor pulls new parameters; the learner trains the torch
    module. Pixel networks stay in torch (a convolution in NumPy is slower than torch's)."""

    def __init__(self, net: DuelingNet) -> None:
        self.load(net)

    def load(self, net: DuelingNet) -> None:
        """Copy ``net``'s weights, pre-transposed for ``x @ w``."""
        w = {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}
        self.torso = [(np.ascontiguousarray(w[f"torso.{i}.weight"].T), w[f"torso.{i}.bias"])
                      for i in (0, 2)]
        self.head = [(np.ascontiguousarray(w[f"{n}.0.weight"].T), w[f"{n}.0.bias"],
                      np.ascontiguousarray(w[f"{n}.2.weight"].T), w[f"{n}.2.bias"])
                     for n in ("value", "advantage")]

    def q(self, obs: np.ndarray) -> np.ndarray:
        """Q(obs, .) as float64, shape (n_actions,)."""
        x = np.asarray(obs, np.float32).reshape(-1)
        for wt, b in self.torso:
            x = np.maximum(x @ wt + b, 0.0)
        (v1, vb1, v2, vb2), (a1, ab1, a2, ab2) = self.head
        v = np.maximum(x @ v1 + vb1, 0.0) @ v2 + vb2
        a = np.maximum(x @ a1 + ab1, 0.0) @ a2 + ab2
        return (v + a - a.mean()).astype(np.float64)


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---- parameter blob ---------------------------------------------------------------


def layout(model: nn.Module) -> str:
    return "".join(f"{k}:{'x'.join(map(str, v.shape))};" for k, v in model.state_dict().items())


def params_to_blob(model: nn.Module) -> bytes:
    """The model's state_dict as a blob (see the module doc for the layout)."""
    sd = model.state_dict()
    flat = [t.detach().to("cpu", torch.float32).reshape(-1) for t in sd.values()]
    data = torch.cat(flat).numpy().astype("<f4", copy=False) if flat else np.empty(0, "<f4")
    crc = zlib.crc32(layout(model).encode())
    return _HEADER.pack(BLOB_MAGIC, BLOB_VERSION, crc, len(sd), data.size) + data.tobytes()


class BlobError(ValueError):
    """A parameter blob that does not fit this model."""


def pull_blob(r: Any, model: nn.Module, key: str | bytes, *others: str | bytes,
              say: Callable[[str], None]) -> list[Any] | None:
    """One MGET of a parameter blob and the keys written with it (one MULTI/EXEC), the
    blob loaded into ``model``; the other keys' values, or None while there is no blob
    yet or when it does not fit the model (said through ``say``, the caller goes on)."""
    blob, *rest = r.mget(key, *others)
    if blob is None:
        return None
    try:
        load_blob(model, blob)
    except BlobError as e:
        say(f"cannot load parameters: {e}")
        return None
    return rest


def blob_to_arrays(blob: bytes, model: nn.Module) -> dict[str, np.ndarray]:
    """Check a blob against ``model``'s layout and split it into named float32 arrays."""
    if len(blob) < _HEADER.size:
        raise BlobError(f"blob of {len(blob)} bytes is shorter than its header")
    magic, version, crc, ntensors, nfloats = _HEADER.unpack_from(blob)
    if magic != BLOB_MAGIC or version != BLOB_VERSION:
        raise BlobError(f"not a version-{BLOB_VERSION} parameter blob ({magic!r} v{version})")
    sd = model.state_dict()
    if crc != zlib.crc32(layout(model).encode()) or ntensors != len(sd):
        raise BlobError("parameter blob layout differs from this model (another architecture?)")
    want = sum(t.numel() for t in sd.values())
    if nfloats != want or len(blob) != _HEADER.size + 4 * want:
        raise BlobError(f"blob holds {nfloats} floats in {len(blob)} bytes; model needs {want}")
    data = np.frombuffer(blob, dtype="<f4", offset=_HEADER.size)
    out: dict[str, np.ndarray] = {}
    pos = 0
    for k, t in sd.items():
        out[k] = data[pos:pos + t.numel()].reshape(tuple(t.shape))
        pos += t.numel()
    return out


def load_blob(model: nn.Module, blob: bytes) -> None:
    """Copy a parameter blob into ``model`` (in place; raises BlobError if it does not fit)."""
    arrays = blob_to_arrays(blob, model)
    with torch.no_grad():
        for k, t in model.state_dict().items():
            t.copy_(torch.from_numpy(arrays[k].copy()))
