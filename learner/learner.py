"""The Ape-X learner: double DQN with a dueling head, n-step targets, prioritized replay.

    python -m learner.learner --env CartPole-v1 --port 6379 [--replay local] [--device cpu]

Per step: take the next prioritized batch (sampled ahead by a background thread
on its own connection), minimise the importance-weighted Huber loss of the
double-DQN n-step TD error

    delta = R + gamma_k * Q_target(s', argmax_a Q(s', a)) - Q(s, a)

clip the gradient norm, step Adam, and send |delta| back as the batch's new
priorities (``REPLAY.UPDATE``). Every ``target_update`` steps the target network
is synced; every ``publish_every`` steps the parameters are published:
one ``MSET <prefix>:params <blob> <prefix>:params:version <v>`` (atomic, so a
reader's ``MGET`` of both never pairs a blob with another version; v continues
from the version already on the server; blob layout: actors.model).
``<prefix>:learner:samples`` (transitions sampled so far) is kept current for the
actors' rate limiter.

Metrics (loss, mean Q, learner steps/s, samples/s, actor frames/s, recent
returns, ...) go to ``<out_dir>/metrics.csv``, to TensorBoard when it is
installed, and to a progress line. ``<out_dir>/checkpoint.pt`` holds the
learner's own model (``torch.save``; load it with ``learner.evaluate``).
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from actors.codec import TransitionCodec
from actors.config import Config, Keys, add_arguments, from_args
from actors.env import EnvSpec, env_spec
from actors.model import build_model, params_to_blob
from learner.replay import LocalReplay, Prefetcher, Replay, Sampled, open_replay


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@dataclasses.dataclass
class TorchBatch:
    ids: np.ndarray
    weights: torch.Tensor
    obs: torch.Tensor
    action: torch.Tensor
    ret: torch.Tensor
    discount: torch.Tensor
    next_obs: torch.Tensor


def to_torch(s: Sampled, device: torch.device) -> TorchBatch:
    b = s.batch

    def t(a: np.ndarray) -> torch.Tensor:
        a = np.ascontiguousarray(a)
        if not a.flags.writeable:  # a view of the reply's bytes: torch wants its own
            a = a.copy()
        return torch.from_numpy(a).to(device, non_blocking=True)

    return TorchBatch(s.ids, t(s.weights), t(b.obs), t(b.action), t(b.ret), t(b.discount),
                      t(b.next_obs))


def double_dqn_td(model: nn.Module, target: nn.Module, b: TorchBatch,
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(Q(s, a) with grad, TD target without): double DQN with n-step discounts."""
    q = model(b.obs).gather(1, b.action[:, None]).squeeze(1)
    with torch.no_grad():
        a_star = model(b.next_obs).argmax(dim=1, keepdim=True)
        q_next = target(b.next_obs).gather(1, a_star).squeeze(1)
        y = b.ret + b.discount * q_next
    return q, y


class Metrics:
    """CSV rows, TensorBoard scalars (if installed), and a progress line."""

    FIELDS = ("wall_s", "learner_steps", "steps_per_s", "samples_per_s", "loss", "q_mean",
              "actor_frames", "frames_per_s", "transitions", "replay_size", "params_version",
              "episodes", "return_mean_100", "return_last")

    def __init__(self, out_dir: Path, progress: bool = True) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / "metrics.csv"
        self.file = open(self.path, "w", newline="")  # closed in close()
        self.csv = csv.DictWriter(self.file, fieldnames=self.FIELDS)
        self.csv.writeheader()
        self.progress = progress
        self.tty = sys.stdout.isatty()
        self.tb: Any = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(out_dir / "tb"))
        except ImportError:
            pass

    def write(self, row: dict[str, Any]) -> None:
        self.csv.writerow({k: row.get(k, "") for k in self.FIELDS})
        self.file.flush()
        if self.tb is not None:
            for k, v in row.items():
                if isinstance(v, int | float) and k != "learner_steps" and math.isfinite(v):
                    self.tb.add_scalar(k, v, row["learner_steps"])
        if self.progress:
            line = (f"learner {row['learner_steps']:>7} steps {row['steps_per_s']:6.1f}/s "
                    f"{row['samples_per_s']:8.0f} samples/s | loss {row['loss']:.4f} "
                    f"Q {row['q_mean']:7.2f} | actors {row['actor_frames']:>8} frames "
                    f"{row['frames_per_s']:6.0f}/s | return {row['return_mean_100']:7.1f} "
                    f"({row['episodes']} episodes) | replay {row['replay_size']}")
            print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", flush=True)

    def close(self) -> None:
        if self.tty and self.progress:
            print()
        self.file.close()
        if self.tb is not None:
            self.tb.close()


class Learner:
    def __init__(self, cfg: Config, *, spec: EnvSpec | None = None,
                 stop: threading.Event | None = None, progress: bool = True,
                 replay: Replay | None = None) -> None:
        self.cfg = cfg
        self.keys = Keys(cfg.prefix)
        self.stop = stop or threading.Event()
        self.device = pick_device(cfg.device)
        self.spec = spec or env_spec(cfg)
        torch.manual_seed(cfg.seed)
        self.model = build_model(self.spec, cfg.hidden).to(self.device)
        self.target = copy.deepcopy(self.model).eval()
        for p in self.target.parameters():
            p.requires_grad_(False)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        self.codec = TransitionCodec(self.spec.obs_shape, self.spec.obs_dtype, cfg.n_step,
                                     self.spec.pixels)
        self.r = redis.Redis(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60)
        self.replay = replay or open_replay(cfg, self.codec)
        self.out = Path(cfg.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.progress = progress
        self.steps = 0
        self.version = int(self.r.get(self.keys.version) or 0)  # continue the sequence
        self.samples = 0

    # ---- parameters and checkpoints -------------------------------------------------
    def publish(self) -> int:
        blob = params_to_blob(self.model)
        version = self.version + 1
        self.r.mset({self.keys.params: blob, self.keys.version: version,
                     self.keys.samples: self.samples})
        self.version = version
        return version

    def checkpoint(self, path: Path | None = None) -> Path:
        path = path or self.out / "checkpoint.pt"
        tmp = path.with_suffix(".tmp")
        torch.save({
            "model": {k: v.cpu() for k, v in self.model.state_dict().items()},
            "target": {k: v.cpu() for k, v in self.target.state_dict().items()},
            "optimizer": self.opt.state_dict(),
            "learner_steps": self.steps,
            "params_version": self.version,
            "config": dataclasses.asdict(self.cfg),
        }, tmp)
        os.replace(tmp, path)
        return path

    # ---- training ----------------------------------------------------------------------
    def train_step(self, b: TorchBatch) -> tuple[float, np.ndarray, float]:
        """One gradient step; returns (loss, |TD error| per item, mean Q)."""
        q, y = double_dqn_td(self.model, self.target, b)
        loss = (b.weights * F.smooth_l1_loss(q, y, reduction="none")).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        td = (y - q.detach()).abs().float().cpu().numpy()
        return float(loss.item()), td, float(q.detach().mean().item())

    def wait_for_data(self) -> bool:
        """Wait until the replay holds learning_starts transitions (or a stop)."""
        t_log = time.monotonic()
        while not self.stop.is_set():
            if isinstance(self.replay, LocalReplay):
                self.replay.ingest()
            size = self.replay.size()
            if size >= max(1, self.cfg.learning_starts):
                return True
            if self.r.exists(self.keys.stop):
                self.stop.set()
                break
            if time.monotonic() - t_log > 10 and self.progress:
                print(f"learner: waiting for {self.cfg.learning_starts} transitions "
                      f"(replay holds {size})", flush=True)
                t_log = time.monotonic()
            time.sleep(0.05)
        return False

    def run(self) -> None:
        cfg = self.cfg
        self.publish()
        if self.progress:
            print(f"learner: {self.spec.obs_shape} -> {self.spec.n_actions} actions, "
                  f"{sum(p.numel() for p in self.model.parameters()):,} parameters, "
                  f"device {self.device}, replay {cfg.replay}, published version "
                  f"{self.version}", flush=True)
        if not self.wait_for_data():
            return
        prefetch = Prefetcher(self.replay.sampling_view(), cfg.batch_size, cfg.beta,
                              cfg.prefetch, lambda s: to_torch(s, self.device)).start()
        metrics = Metrics(self.out, self.progress)
        t0 = time.monotonic()
        last = {"t": t0, "steps": 0, "frames": self._frames()}
        losses: list[float] = []
        qs: list[float] = []
        try:
            while not self.stop.is_set():
                if cfg.max_learner_steps and self.steps >= cfg.max_learner_steps:
                    break
                b = prefetch.get(stop=self.stop)
                if b is None:  # SIGTERM while waiting for a batch
                    break
                loss, td, qm = self.train_step(b)
                self.replay.update(b.ids, td)
                self.steps += 1
                self.samples += len(b.ids)
                losses.append(loss)
                qs.append(qm)
                if self.steps % cfg.target_update == 0:
                    self.target.load_state_dict(self.model.state_dict())
                if self.steps % cfg.publish_every == 0:
                    self.publish()
                elif self.steps % 4 == 0:
                    self.r.set(self.keys.samples, self.samples)
                if cfg.checkpoint_every and self.steps % cfg.checkpoint_every == 0:
                    self.checkpoint()
                now = time.monotonic()
                if now - last["t"] >= cfg.log_every_s:
                    row = self._row(now, t0, last, losses, qs)
                    metrics.write(row)
                    losses, qs = [], []
                    if row["stop"]:
                        self.stop.set()
        finally:
            prefetch.close()
            if self.steps > last["steps"]:  # a last row for the steps since the last one
                try:
                    metrics.write(self._row(time.monotonic(), t0, last, losses, qs))
                except redis.RedisError:
                    pass
            metrics.close()
            try:
                self.publish()
            except redis.RedisError:
                pass
            self.checkpoint()

    def _frames(self) -> int:
        return int(self.r.get(self.keys.frames) or 0)

    def _row(self, now: float, t0: float, last: dict[str, Any], losses: list[float],
             qs: list[float]) -> dict[str, Any]:
        pipe = self.r.pipeline(transaction=False)
        pipe.get(self.keys.frames)
        pipe.get(self.keys.transitions)
        pipe.llen(self.keys.returns)
        pipe.lrange(self.keys.returns, -100, -1)
        pipe.exists(self.keys.stop)
        frames_raw, trans, episodes, recent, stop = pipe.execute()
        frames = int(frames_raw or 0)
        rets = [float(x.split()[2]) for x in recent]
        dt = now - last["t"]
        row = {
            "wall_s": round(now - t0, 3),
            "learner_steps": self.steps,
            "steps_per_s": (self.steps - last["steps"]) / dt,
            "samples_per_s": (self.steps - last["steps"]) * self.cfg.batch_size / dt,
            "loss": float(np.mean(losses)) if losses else float("nan"),
            "q_mean": float(np.mean(qs)) if qs else float("nan"),
            "actor_frames": frames,
            "frames_per_s": (frames - last["frames"]) / dt,
            "transitions": int(trans or 0),
            "replay_size": self.replay.size(),
            "params_version": self.version,
            "episodes": int(episodes),
            "return_mean_100": float(np.mean(rets)) if rets else float("nan"),
            "return_last": rets[-1] if rets else float("nan"),
            "stop": bool(stop),
        }
        last.update(t=now, steps=self.steps, frames=frames)
        return row

    def close(self) -> None:
        self.replay.close()
        self.r.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m learner.learner", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quiet", action="store_true", help="no progress line")
    add_arguments(p)
    args = p.parse_args(argv)
    cfg = from_args(args)
    torch.set_num_threads(cfg.torch_threads)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    learner = Learner(cfg, stop=stop, progress=not args.quiet)
    try:
        learner.run()
    except redis.ConnectionError as e:
        if not stop.is_set():
            print(f"learner: lost the server: {e}", file=sys.stderr)
            return 1
    finally:
        learner.close()
    print(f"learner: stopped after {learner.steps} steps, parameters version "
          f"{learner.version}, checkpoint {learner.out / 'checkpoint.pt'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
