"""The Ape-X learner: double DQN with a dueling head, n-step targets, prioritized replay.

    python -m inreplay.learner.learner --env CartPole-v1 --port 6379 [--replay local] [--device cpu]

Per step: take the next prioritized batch (sampled ahead by a background thread
on its own connection), minimise the importance-weighted Huber loss of the
double-DQN n-step TD error

    delta = R + gamma_k * Q_target(s', argmax_a Q(s', a)) - Q(s, a)

clip the gradient norm, step Adam, and send |delta| back as the batch's new
priorities (``REPLAY.UPDATE``). Every ``target_update`` steps the target network
is synced; every ``publish_every`` steps the parameters are published in one
transaction::

    MULTI
    SET <prefix>:params <blob>
    SET <prefix>:params:version <v>
    SET <prefix>:learner:samples <n>
    PUBLISH <prefix>:params:updates <v>
    EXEC

so a reader's ``MGET`` of blob and version never pairs a blob with another
version, and a subscriber that hears v finds v's blob (v continues from the
version already on the server; blob layout: rl.model). Actors subscribe to
the channel instead of polling the version (actors.actor).
``<prefix>:learner:samples`` (transitions sampled so far) is kept current for the
actors' rate limiter.

Metrics (loss, mean Q, learner steps/s, samples/s, actor frames/s, recent
returns, ...) go to ``<out_dir>/metrics.csv``, to TensorBoard when it is
installed, and to a progress line. ``<out_dir>/checkpoint.pt`` holds the
learner's own model (``torch.save``; load it with ``learner.evaluate``).

Runs do not mix: a table or parameters left on the server by an earlier run make
the learner refuse to start unless ``--resume`` (continue them; it says what it
resumes) or ``--fresh`` (drop the table and the shared keys first).

Shutdown: SIGTERM or SIGINT (from the first line of this module on, so also during
the seconds of ``import torch``) sets a flag the loops check at least every 0.1 s;
every call to the server has a timeout, and after the signal the last ones (final
metrics row, parameters) get :data:`STOP_NET_TIMEOUT_S` each. A signal may be
delivered to any thread (torch's, the prefetch thread), and then it does not
interrupt a call the main thread is blocked in, nor can Python's handler run
(only the main thread runs it, between bytecodes): the C-level handler also writes
the signal's number to a socket (``signal.set_wakeup_fd``) that a watchdog thread
reads, so the watchdog sets the flag itself; if the process has still not exited
:data:`STOP_GRACE_S` after the signal (a server that stopped answering), it prints
where the main thread was, the stop line, and exits 1. After the
stop line the process ends without the interpreter's slow finalization.
"""

from __future__ import annotations

import signal
import threading

STOP = threading.Event()
"""Set by SIGTERM/SIGINT in the learner process (see main)."""
STOP_GRACE_S = 5.0
"""Seconds between a stop signal and the watchdog's forced exit."""
STOP_NET_TIMEOUT_S = 3.0
"""Socket timeout of the learner's last calls to the server after a stop signal."""
NET_TIMEOUT_S = 60.0
"""Socket timeout of the learner's calls to the server while it trains."""


from pyctl.proc import stop_handler  # noqa: E402  (a light import, before torch's)

_on_stop_signal = stop_handler(STOP)

if __name__ == "__main__":  # before the imports below: `import torch` takes seconds
    signal.signal(signal.SIGTERM, _on_stop_signal)
    signal.signal(signal.SIGINT, _on_stop_signal)

import argparse  # noqa: E402
import copy  # noqa: E402
import csv  # noqa: E402
import dataclasses  # noqa: E402
import faulthandler  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import redis  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402, N812 - the usual name
from inreplay.learner.replay import LocalReplay, Prefetcher, Replay, Sampled, open_replay  # noqa: E402
from inreplay.rl.codec import TransitionCodec  # noqa: E402
from inreplay.rl.config import (  # noqa: E402
    Config,
    Keys,
    Parser,
    add_arguments,
    appliance_password,
    dump_stacks_on_signal,
    fail,
    from_args,
    net_reason,
)
from inreplay.rl.env import EnvSpec, env_spec  # noqa: E402
from inreplay.rl.model import build_model, params_to_blob  # noqa: E402
from torch import nn  # noqa: E402

from pyctl.client import ReplayClient, connect  # noqa: E402
from pyctl.errors import RateLimited, replay_error  # noqa: E402
from pyctl.sharded import ShardedReplayClient, home_address  # noqa: E402

WAIT_LOG_EVERY_S = 5.0
"""Seconds between the progress lines while the learner waits for the table to fill."""


class RunExistsError(RuntimeError):
    """The server holds an earlier run's table or parameters (neither --resume nor --fresh)."""


def _group(cfg: Config) -> ShardedReplayClient:
    """The appliance, or every shard of its replay group, from the address given."""
    return ShardedReplayClient.from_seed(f"{cfg.host}:{cfg.port}",
                                         socket_timeout=NET_TIMEOUT_S, socket_connect_timeout=5,
                                         password=appliance_password())


def key_server(cfg: Config) -> redis.Redis:
    """Where the run's keys live (parameters, counters, the stop key): the appliance, or
    shard 0 of its group (any member's address finds it); the stock redis-server of the
    baseline."""
    host, port = cfg.host, cfg.port
    if cfg.replay == "appliance":
        host, port = home_address(host, port, socket_timeout=NET_TIMEOUT_S,
                                  socket_connect_timeout=5, password=appliance_password())
    return connect(host=host, port=port, protocol=2, socket_timeout=NET_TIMEOUT_S,
                       socket_connect_timeout=5, password=appliance_password())


def existing_run(cfg: Config, r: redis.Redis) -> dict[str, Any] | None:
    """What an earlier run left on the server: table items and parameter version, or None."""
    keys = Keys(cfg.prefix)
    version = r.get(keys.version)
    items: int | None = None
    if cfg.replay == "appliance":
        rc = _group(cfg)
        if cfg.table in rc.tables():
            items = int(rc.info(cfg.table)["size"])
        rc.close()
    else:
        n = int(r.llen(keys.experience))
        items = n or None
    if items is None and version is None and not r.exists(keys.params):
        return None
    return {"items": items or 0, "table": items is not None,
            "version": int(version or 0)}


def claim_run(cfg: Config, r: redis.Redis, mode: str,
              say: Callable[[str], None] = print) -> None:
    """Make sure this run does not silently continue another one.

    mode "new": refuse (RunExistsError) if an earlier run left a table or parameters;
    "resume": continue them, saying what; "fresh": drop the table and every shared key.
    """
    keys = Keys(cfg.prefix)
    where = f"{cfg.host}:{cfg.port}"
    found = existing_run(cfg, r)
    what = "" if found is None else (
        f"table '{cfg.table}' with {found['items']} items" if found["table"]
        else "no table") + f", parameter version {found['version']}"
    if mode == "fresh":
        if found is not None:
            if found["table"] and cfg.replay == "appliance":
                rc = _group(cfg)
                rc.drop(cfg.table)  # on every shard of a group
                rc.close()
            r.delete(*keys.all())
            say(f"learner: --fresh: dropped the earlier run on {where} ({what})")
        return
    if found is None:
        if mode == "resume":
            say(f"learner: --resume: nothing to resume on {where}; starting a new run")
        return
    if mode == "resume":
        r.delete(keys.stop)  # the earlier run's stop request is not this run's
        say(f"learner: resuming the run on {where}: {what}")
        return
    raise RunExistsError(f"{where} holds an earlier run ({what}): pass --resume to "
                         f"continue it or --fresh to drop it")


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


def check_item_size(cfg: Config, r: redis.Redis, itemsize: int, pixels: bool = False) -> None:
    """RunExistsError if the table to resume holds items of another size than this run's
    transitions (another environment or observation shape): it could never be sampled.
    Frames are compressed to items of any size, so only vector records are checked."""
    if cfg.replay != "appliance" or pixels:
        return
    rc = ReplayClient(connection=r)
    if cfg.table not in rc.tables():
        return
    if not int(rc.info(cfg.table)["size"]):
        return
    try:  # one draw tells the size of the table's items
        raw = r.execute_command("REPLAY.SAMPLE", cfg.table, 1, "PACKED")
        have = len(raw) - 12
    except redis.ResponseError as e:
        if isinstance(replay_error(e), RateLimited):  # below its MIN_SIZE: nothing to tell by
            return
        have = -1  # items of mixed sizes (MIXEDSIZE) or trajectories: not this learner's table
    if have != itemsize:
        held = f"items of {have} bytes" if have >= 0 else "items of mixed sizes"
        raise RunExistsError(
            f"--resume: table '{cfg.table}' on {cfg.host}:{cfg.port} holds {held}, but this "
            f"run's transitions ({cfg.env_id}) are {itemsize} bytes: pass --fresh to drop it, "
            f"or another --table")


class Learner:
    def __init__(self, cfg: Config, *, spec: EnvSpec | None = None,
                 stop: threading.Event | None = None, progress: bool = True,
                 replay: Replay | None = None, existing: str = "new") -> None:
        """existing: what to do with an earlier run's table and parameters on the
        server: "new" refuses them (RunExistsError), "resume", "fresh" (see claim_run)."""
        self.cfg = cfg
        self.keys = Keys(cfg.prefix)
        self.stop = stop or threading.Event()
        self.progress = progress
        self.out = Path(cfg.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        # the server first: no model is built for a learner that cannot run
        self.r = key_server(cfg)
        if replay is None:
            claim_run(cfg, self.r, existing, say=lambda m: print(m, flush=True))  # even --quiet
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
        if replay is None and existing == "resume":
            check_item_size(cfg, self.r, self.codec.itemsize, self.codec.pixels)
        self.replay = replay or open_replay(cfg, self.codec)
        self.steps = 0
        # continue the sequences (a resumed run, or parameters published before a restart)
        self.version = int(self.r.get(self.keys.version) or 0)
        self.samples = int(self.r.get(self.keys.samples) or 0)

    def _say(self, msg: str) -> None:
        if self.progress:
            print(msg, flush=True)

    # ---- parameters and checkpoints -------------------------------------------------
    def publish(self) -> int:
        """Publish the model as the next version: blob, version and sample counter set and
        the version announced on the channel, all in one MULTI/EXEC."""
        blob = params_to_blob(self.model)
        version = self.version + 1
        pipe = self.r.pipeline(transaction=True)
        pipe.set(self.keys.params, blob)
        pipe.set(self.keys.version, version)
        pipe.set(self.keys.samples, self.samples)
        pipe.publish(self.keys.updates, version)
        pipe.execute()
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
        """The baseline (--replay local) only: pop the actors' records until the local
        replay holds learning_starts transitions (or a stop), with a progress line every
        WAIT_LOG_EVERY_S. The appliance's table waits by itself (its MIN_SIZE)."""
        t_wait = t_log = time.monotonic()
        while not self.stop.is_set():
            if isinstance(self.replay, LocalReplay):
                self.replay.ingest()
            size = self.replay.size()
            if size >= max(1, self.cfg.learning_starts):
                return True
            if self.r.exists(self.keys.stop):
                break
            if time.monotonic() - t_log >= WAIT_LOG_EVERY_S:
                self._say(f"learner: waiting for the replay to fill: {size} of "
                          f"{self.cfg.learning_starts} transitions "
                          f"({time.monotonic() - t_wait:.0f} s)")
                t_log = time.monotonic()
            time.sleep(0.05)  # not stop.wait(): see main()
        return False

    def run(self) -> None:
        cfg = self.cfg
        if self.stop.is_set():
            return
        self.publish()
        if self.progress:
            print(f"learner: {self.spec.obs_shape} -> {self.spec.n_actions} actions, "
                  f"{sum(p.numel() for p in self.model.parameters()):,} parameters, "
                  f"device {self.device}, replay {cfg.replay}, published version "
                  f"{self.version}", flush=True)
        if isinstance(self.replay, LocalReplay) and not self.wait_for_data():
            return
        prefetch = Prefetcher(self.replay.sampling_view(), cfg.batch_size, cfg.beta,
                              cfg.prefetch, lambda s: to_torch(s, self.device),
                              max_inflight=cfg.prefetch).start()
        t_wait = time.monotonic()

        def waiting(reason: str | None) -> bool:
            """A progress line while the rate limiter holds the learner; False on the
            stop key (the demo's way to end a run that never filled its table)."""
            if self.r.exists(self.keys.stop):
                return False
            self._say(f"learner: waiting for the replay ({time.monotonic() - t_wait:.0f} s): "
                      f"{reason or 'no batch from the sampling thread yet'}")
            return True

        metrics = Metrics(self.out, self.progress)
        t0 = time.monotonic()
        last = {"t": t0, "steps": 0, "frames": self._frames()}
        losses: list[float] = []
        qs: list[float] = []
        try:
            while not self.stop.is_set():
                if cfg.max_learner_steps and self.steps >= cfg.max_learner_steps:
                    break
                t_wait = time.monotonic()
                b = prefetch.get(stop=self.stop, on_wait=waiting, wait_every=WAIT_LOG_EVERY_S)
                if b is None:  # SIGTERM (or the stop key) while waiting for a batch
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
                        break
        finally:
            prefetch.close()
            if self.stop.is_set():  # the last calls must not hold a SIGTERM up for long
                self._short_timeouts()
            if self.steps > last["steps"]:  # a last row for the steps since the last one
                try:
                    metrics.write(self._row(time.monotonic(), t0, last, losses, qs))
                except redis.RedisError:
                    pass
            metrics.close()
            try:
                if self.steps:  # no step, nothing new to publish
                    self.publish()
            except redis.RedisError:
                pass
            self.checkpoint()

    def _short_timeouts(self) -> None:
        """STOP_NET_TIMEOUT_S on the learner's own connection (new and pooled sockets)."""
        pool = self.r.connection_pool
        pool.connection_kwargs["socket_timeout"] = STOP_NET_TIMEOUT_S
        for conn in [*getattr(pool, "_available_connections", []),
                     *getattr(pool, "_in_use_connections", [])]:
            conn.socket_timeout = STOP_NET_TIMEOUT_S
            sock = getattr(conn, "_sock", None)
            if sock is not None:
                sock.settimeout(STOP_NET_TIMEOUT_S)

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


def _signal_socket() -> tuple[socket.socket, socket.socket]:
    """A socket pair whose write end the C-level signal handler writes each handled
    signal's number to, in whichever thread the kernel delivered the signal to
    (signal.set_wakeup_fd; main thread only). Returns (read end, write end)."""
    rd, wr = socket.socketpair()
    wr.setblocking(False)
    signal.set_wakeup_fd(wr.fileno(), warn_on_full_buffer=False)
    return rd, wr


def _wait_for_stop(wake: socket.socket | None) -> None:
    """Until a stop signal: STOP set by the handler, or SIGTERM/SIGINT read from `wake`
    when the handler could not run (the main thread blocked in a call, the signal
    delivered to another thread); then STOP is set here (not from a handler, so no
    deadlock on its lock)."""
    stops = {int(signal.SIGTERM), int(signal.SIGINT)}
    while not STOP.is_set():
        if wake is None:
            STOP.wait(0.5)
            continue
        ready, _, _ = select.select([wake], [], [], 0.5)
        if ready and stops & set(wake.recv(64)):
            STOP.set()


def _watchdog(learner: list[Learner], grace: float,
              wake: tuple[socket.socket, socket.socket] | None = None) -> None:
    """After a stop signal: if the process still runs `grace` s later, say where the main
    thread is, print the stop line and exit (faulthandler dumps every thread and exits
    5 s after that if even this thread cannot run)."""
    _wait_for_stop(wake[0] if wake else None)
    faulthandler.dump_traceback_later(grace + 5.0, exit=True)
    time.sleep(grace)
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    where = "unknown"
    if frame is not None:
        f = traceback.extract_stack(frame)[-1]
        where = f"{f.name} ({f.filename}:{f.lineno})"
    print(f"learner: still stopping {grace:.0f} s after the signal, in {where}: exiting",
          file=sys.stderr, flush=True)
    print(stop_line(learner[0] if learner else None, forced=True), flush=True)
    os._exit(1)


def stop_line(learner: Learner | None, forced: bool = False) -> str:
    if learner is None:
        return "learner: stopped before it started" + (" (forced)" if forced else "")
    return (f"learner: stopped after {learner.steps} steps, parameters version "
            f"{learner.version}, checkpoint {learner.out / 'checkpoint.pt'}"
            + (" (forced)" if forced else ""))


def main(argv: list[str] | None = None) -> int:
    """The learner process. Every failure is one line on stderr: 2 for a usage error,
    1 for anything else (no server, an earlier run on it, an unwritable --out-dir)."""
    if threading.current_thread() is threading.main_thread():
        # `python -m inreplay.learner` (learner/__main__.py) imports this module, so the handlers
        # at its top were not installed; install them now (stop_handler: a signal
        # never waits for STOP's lock, which an interrupted set() may hold).
        signal.signal(signal.SIGTERM, _on_stop_signal)
        signal.signal(signal.SIGINT, _on_stop_signal)
        dump_stacks_on_signal()
    prog = "python -m inreplay.learner.learner"
    p = Parser(prog=prog, description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quiet", action="store_true", help="no progress line")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--resume", action="store_true",
                     help="continue the table and parameters an earlier run left on the server")
    run.add_argument("--fresh", action="store_true",
                     help="drop the earlier run's table and shared keys, then start anew")
    add_arguments(p, role="learner")
    args = p.parse_args(argv)
    try:
        cfg = from_args(args)
    except (ValueError, OSError) as e:
        return fail(prog, str(e), 2)
    if STOP.is_set():  # a signal during the imports
        print(stop_line(None), flush=True)
        return 0
    torch.set_num_threads(cfg.torch_threads)
    holder: list[Learner] = []
    # the pair goes to the thread: its write end must stay open as long as it runs
    wake = _signal_socket() if threading.current_thread() is threading.main_thread() else None
    threading.Thread(target=_watchdog, args=(holder, STOP_GRACE_S, wake),
                     name="stop-watchdog", daemon=True).start()
    where = f"{cfg.host}:{cfg.port}"
    try:
        learner = Learner(cfg, stop=STOP, progress=not args.quiet,
                          existing="resume" if args.resume else "fresh" if args.fresh
                          else "new")
    except RunExistsError as e:
        return fail(prog, str(e))
    except redis.ConnectionError as e:
        return fail(prog, f"cannot reach the server at {where}: {net_reason(e)}")
    except redis.RedisError as e:
        return fail(prog, f"the server at {where} refused: {e}")
    except OSError as e:
        return fail(prog, f"--out-dir {cfg.out_dir}: {e.strerror or e}")
    holder.append(learner)
    try:
        learner.run()
    except redis.ConnectionError as e:
        if not STOP.is_set():
            return fail(prog, f"lost the server at {where}: {net_reason(e)}")
    except redis.RedisError as e:
        return fail(prog, f"the server at {where} answered: {e}")
    except RuntimeError as e:  # the sampling thread failed: say why, in one line
        cause = e.__cause__ or e
        return fail(prog, f"{e}: {type(cause).__name__}: {cause}".replace("\n", " "))
    finally:
        learner.close()
    print(stop_line(learner), flush=True)
    return 0


def exit_now(code: int) -> None:
    """End the process once main() is done: flush, then skip the interpreter's
    finalization (tearing down torch, gymnasium and their threads takes 1-2 s on a
    loaded machine, after the stop line; every file is already closed)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
