"""ParamClient: the PARAM.* parameter tables on redis-py.

Workers push a flat float32 gradient, the server applies one optimizer step
(torch.optim's math) and actors pull the parameters:

    pc = ParamClient(port=6379)
    flat = pc.bind(model)                  # model's parameters and grads become views
    pc.create("net", flat.size, "adam", lr=1e-3, init=flat.params)
    loss.backward(); version = pc.push_bound("net", base=flat.version, maxstale=4)
    pc.pull_bound("net")                   # one copy of the reply into the parameters

bind() moves a module's parameters (and their .grad) into one contiguous float32
buffer each, every parameter a view at its offset, so pushing sends the gradient
buffer as it is and pulling copies the reply once into the parameter buffer: no
Python object or copy per tensor on either path. push()/pull() take and give flat
arrays for code that keeps its own buffers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import redis

from pyctl import _shm
from pyctl.errors import replay_error

OPTIMIZERS = ("sgd", "momentum", "rmsprop", "adam", "adamw", "adagrad")


@dataclass
class FlatModule:
    """A module whose parameters and gradients are views of two flat float32 tensors."""

    module: Any
    params: Any  # torch.Tensor, float32, 1-d: every parameter's .data is a view of it
    grads: Any  # torch.Tensor, float32, 1-d: every parameter's .grad is a view of it
    version: int = 0  # the table version last pulled into params

    @property
    def size(self) -> int:
        return int(self.params.numel())

    def grads_bound(self) -> bool:
        """Whether every .grad still is its view (zero_grad(set_to_none=True), the
        default, replaces them with None; backward() then makes new tensors)."""
        lo = self.grads.data_ptr()
        hi = lo + self.grads.numel() * 4
        return all(p.grad is not None and lo <= p.grad.data_ptr() < hi
                   for p in self.module.parameters())


class ParamClient:
    """A client for inreplay's parameter tables (PARAM.*)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *,
                 connection: redis.Redis | None = None, shm: bool | None = None,
                 **kwargs: Any) -> None:
        self.redis: redis.Redis = connection or _shm.connect(host, port, shm=shm, **kwargs)
        self._flat: dict[int, FlatModule] = {}

    def close(self) -> None:
        self.redis.close()

    def __enter__(self) -> ParamClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _cmd(self, *args: Any) -> Any:
        try:
            return self.redis.execute_command(*args)
        except redis.ResponseError as e:
            raise replay_error(e) from None

    def create(self, name: str, size: int, optimizer: str, *, lr: float | None = None,
               momentum: float | None = None, alpha: float | None = None,
               betas: tuple[float, float] | None = None, eps: float | None = None,
               weight_decay: float | None = None, nesterov: bool = False,
               init: Any = None, sync: int | None = None) -> None:
        """PARAM.CREATE; hyper-parameters left None take torch's defaults (the server's).
        sync=k: one step per k pushes, with their mean (each push waits for its round)."""
        args: list[Any] = ["PARAM.CREATE", name, "SIZE", size, "OPTIMIZER", optimizer]
        for word, v in (("LR", lr), ("MOMENTUM", momentum), ("ALPHA", alpha),
                        ("EPS", eps), ("WEIGHT_DECAY", weight_decay)):
            if v is not None:
                args += [word, repr(float(v))]
        if betas is not None:
            args += ["BETA1", repr(float(betas[0])), "BETA2", repr(float(betas[1]))]
        if nesterov:
            args.append("NESTEROV")
        if sync is not None:
            args += ["SYNC", int(sync)]
        if init is not None:
            args += ["INIT", _blob(init)]
        self._cmd(*args)

    def push(self, name: str, grad: Any, *, scale: float | None = None,
             base: int | None = None, maxstale: int | None = None,
             timeout: float | None = None) -> int:
        """PARAM.PUSH of a flat float32 gradient (array, tensor or bytes): the new version.
        On a SYNC table the call waits for its round (at most timeout seconds, else
        pyctl.errors.SyncTimeout and the gradient is withdrawn); a gradient more than
        maxstale versions behind base raises pyctl.errors.StaleGradientError."""
        args: list[Any] = ["PARAM.PUSH", name, _blob(grad)]
        if scale is not None:
            args += ["SCALE", repr(float(scale))]
        if base is not None:
            args += ["BASE", int(base)]
        if maxstale is not None:
            args += ["MAXSTALE", int(maxstale)]
        if timeout is not None:
            args += ["TIMEOUT", repr(float(timeout))]
        return int(self._cmd(*args))

    def pull(self, name: str, ifnewer: int | None = None,
             out: npt.NDArray[np.float32] | None = None
             ) -> tuple[int, npt.NDArray[np.float32] | None]:
        """PARAM.PULL: (version, parameters), parameters None when not newer than ifnewer;
        with out, the parameters are copied into it (and it is returned)."""
        args: list[Any] = ["PARAM.PULL", name]
        if ifnewer is not None:
            args += ["IFNEWER", int(ifnewer)]
        version, blob = self._cmd(*args)
        if blob is None:
            return int(version), None
        arr = np.frombuffer(blob, dtype="<f4")
        if out is None:
            return int(version), arr.copy()
        if out.shape != arr.shape:
            raise ValueError(f"out holds {out.size} parameters, the table {arr.size}")
        np.copyto(out, arr)
        return int(version), out

    def set(self, name: str, params: Any) -> int:
        return int(self._cmd("PARAM.SET", name, _blob(params)))

    def info(self, name: str) -> dict[str, Any]:
        raw = self._cmd("PARAM.INFO", name)
        pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
        out: dict[str, Any] = {}
        for k, v in pairs:
            key = k.decode() if isinstance(k, bytes) else str(k)
            if isinstance(v, bytes):
                text = v.decode()
                try:
                    out[key] = float(text) if key not in ("name", "optimizer", "channel") \
                        else text
                except ValueError:
                    out[key] = text
            else:
                out[key] = v
        return out

    def drop(self, name: str) -> None:
        self._cmd("PARAM.DROP", name)

    # ---- torch modules ------------------------------------------------------

    def bind(self, module: Any) -> FlatModule:
        """Move module's parameters into one flat float32 tensor (and their .grad into
        another, zeroed), each parameter a view at its offset, in parameters() order."""
        import torch

        ps = list(module.parameters())
        n = sum(p.numel() for p in ps)
        params = torch.empty(n, dtype=torch.float32)
        grads = torch.zeros(n, dtype=torch.float32)
        off = 0
        with torch.no_grad():
            for p in ps:
                k = p.numel()
                params[off:off + k].copy_(p.reshape(-1))
                p.data = params[off:off + k].view_as(p)
                p.grad = grads[off:off + k].view_as(p)
                off += k
        flat = FlatModule(module, params, grads)
        self._flat[id(module)] = flat
        return flat

    def push_bound(self, name: str, flat: FlatModule, *, scale: float | None = None,
                   base: int | None = None, maxstale: int | None = None) -> int:
        """Push the bound module's gradient buffer as it is (no copy on this side)."""
        if not flat.grads_bound():
            raise ValueError("a parameter's .grad is no longer a view of the bound buffer: "
                             "use zero_grad(set_to_none=False), or flat.grads.zero_()")
        return self.push(name, flat.grads, scale=scale, base=base, maxstale=maxstale)

    def pull_bound(self, name: str, flat: FlatModule, *, only_newer: bool = True) -> bool:
        """Copy the table's parameters into the bound module (once, into its buffer);
        with only_newer, only when the table is newer than the last pull. Whether it did."""
        version, arr = self.pull(name, ifnewer=flat.version if only_newer else None,
                                 out=flat.params.numpy())
        if arr is None:
            return False
        flat.version = version
        return True


def _blob(x: Any) -> bytes | memoryview:
    """float32 little-endian bytes of x (a NumPy array, a torch tensor or bytes) without a
    copy where x already is a contiguous float32 buffer."""
    if isinstance(x, (bytes, bytearray, memoryview)):
        return x
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().reshape(-1).contiguous()
        if x.dtype.is_floating_point and str(x.dtype) != "torch.float32":
            x = x.float()
        x = x.numpy()
    a = np.ascontiguousarray(x, dtype="<f4").reshape(-1)
    return memoryview(a).cast("B")
