"""python -m inreplay.actors.ray_job: a whole Ape-X run on a Ray cluster, started by one command.

    python -m inreplay.actors.ray_job --shards 2 --env CartPole-v1 --num-actors 4
    python -m inreplay.actors.ray_job --ray-address auto --shards 4 --snapshot-dir /data/snap \\
        --snapshot-every 60 --env ALE/Breakout-v5 --num-actors 64

What runs where:
replay shards  one Ray actor per shard (ShardHost), each starting `pyctl start
               --shard-group ... --shard-index i` on its node as a child process.
               When the cluster has the custom resource ``replay`` (``ray start
               --resources '{"replay": 1}'`` on the replay boxes: one per node, or
               as many as cores), each shard takes one unit of it, so shards land
               only there; otherwise they go wherever a CPU is free. Kernel stack:
               the shard listens on its node's IP and a free port. DPDK
               (``--shard-args "--stack dpdk ..."`` with ``--shard-ip`` one
               A.B.C.D/NN per shard): the shard needs root and a port bound to a
               DPDK driver on its node, and the job stops with pyctl's one-line
               reason when it cannot have them.
learner        one Ray actor running learner.learner.Learner, on a ``GPU`` when the
               cluster has one, else on the custom resource ``learner`` when there is
               one, else on a CPU.
actors         actors.launch's Ray backend: one Ray actor per actor, restarted by Ray
               when its process dies.

Faults. The job checks its shards every second. A shard whose server exits or whose
Ray actor dies is reported in one line. With ``--snapshot-dir`` the job has every
shard BGSAVE there every ``--snapshot-every`` seconds, and a dead shard is started
again on the same node and address from its last snapshot (``--restore-if-present``);
the learner and actors that lost their connection meanwhile are replaced (the learner
resumes the table and parameters). Without snapshots the run cannot continue with a
shard's items gone, so the job says so and stops.

The job runs until SIGTERM/SIGINT, until the learner reaches --max-learner-steps, or
for --minutes; then it stops the actors, the learner and the shards (each server
SIGTERMed; a shard process whose Ray worker dies gets SIGTERM from the kernel too),
and, for a local Ray instance, Ray itself. Learner and actor flags are those of
``python -m inreplay.actors.launch`` and ``python -m inreplay.learner.learner``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import ipaddress
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from inreplay.actors.launch import ROOT, RayBackend, init_ray, shutdown_ray
from inreplay.rl.config import (
    PASSWORD_ENV,
    Config,
    add_arguments,
    appliance_password,
    from_args,
    new_run_password,
)

from pyctl.proc import stop_handler

PR_SET_PDEATHSIG = 1
LEARNER_MODULE = "inreplay.learner.learner"
"""The module whose Learner the job's learner actor runs."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """The shard's server gets SIGTERM when the Ray worker that started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ShardHost:
    """One replay shard inside a Ray worker: `pyctl start` as a child process."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: subprocess.Popen[bytes] | None = None
        self.run_dir = tempfile.mkdtemp(prefix=f"inreplay-shard{index}-")
        self.log = Path(self.run_dir, "server.log")

    def where(self) -> tuple[str, str, int]:
        """(node IP, Ray node id, a free TCP port on this node)."""
        import ray

        ip = ray.util.get_node_ip_address()
        with socket.socket() as s:
            s.bind((ip, 0))
            port = s.getsockname()[1]
        return ip, ray.get_runtime_context().get_node_id(), port

    def start(self, group: list[str], args: list[str], snapshot_dir: str | None,
              restore: bool) -> str:
        """Start shard index of group; '' when it answers, else pyctl's reason (one line)."""
        me = group[self.index]
        cmd = [sys.executable, "-m", "pyctl", "start", "--shard-group", ",".join(group),
               "--shard-index", str(self.index), *args]
        if "--stack" not in args or "kernel" in args:
            cmd += ["--listen", me]
        if snapshot_dir:
            Path(snapshot_dir).mkdir(parents=True, exist_ok=True)
            cmd += ["--dir", snapshot_dir]
            if restore:
                cmd += ["--restore-if-present", snapshot_dir]
        env = dict(os.environ, INREPLAY_RUN_DIR=self.run_dir, PYTHONPATH=os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)
        host, port = me.rsplit(":", 1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return self._last_line() or f"pyctl start exited with {self.proc.returncode}"
            if self.ping(host, int(port)):
                return ""
            time.sleep(0.1)
        return f"not answering on {me} after 60 s"

    def _last_line(self) -> str:
        lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    @staticmethod
    def ping(host: str, port: int) -> bool:
        import redis

        try:
            return bool(redis.Redis(host=host, port=port, socket_timeout=2,
                                    socket_connect_timeout=2,
                                    password=appliance_password()).ping())
        except redis.RedisError:
            return False

    def status(self) -> dict[str, Any]:
        """pid of the server process, and its exit status (None while it runs)."""
        if self.proc is None:
            return {"pid": None, "rc": None}
        return {"pid": self.proc.pid, "rc": self.proc.poll(), "last": self._last_line()}

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class LearnerHost:
    """The learner inside a Ray worker: Learner.run in a thread, so stats/stop answer."""

    def __init__(self, cfg: dict[str, Any], existing: str) -> None:
        import importlib

        import torch

        # the learner's code by name, as the demo starts `python -m inreplay.learner.learner`:
        # actors/ never imports learner/ (tests/test_rl_layers.py)
        Learner = importlib.import_module(LEARNER_MODULE).Learner  # noqa: N806 - a class

        c = Config.from_dict(cfg)
        torch.set_num_threads(c.torch_threads)
        self.stop_event = threading.Event()
        self.learner = Learner(c, stop=self.stop_event, progress=False, existing=existing)
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.learner.run()
        except Exception as e:  # reported through stats()
            self.error = f"{type(e).__name__}: {e}"
        finally:
            with contextlib.suppress(Exception):
                self.learner.close()

    def stats(self) -> dict[str, Any]:
        return {"steps": self.learner.steps, "version": self.learner.version,
                "running": self.thread.is_alive(), "error": self.error, "pid": os.getpid()}

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=20)


def _resources(ray: Any) -> dict[str, float]:
    return dict(ray.cluster_resources())


def cluster_subnet(ips: list[str]) -> str:
    """The smallest IPv4 network holding every address (the shards' --client-subnet)."""
    addrs = [ipaddress.IPv4Address(a) for a in ips]
    for bits in range(32, -1, -1):
        net = ipaddress.IPv4Network((int(addrs[0]), bits), strict=False)
        if all(a in net for a in addrs):
            return str(net)
    return "0.0.0.0/0"  # pragma: no cover - /0 holds every address


class Job:
    """Shards, learner and actors of one run; poll() supervises, stop() ends them."""

    def __init__(self, args: argparse.Namespace, cfg: Config) -> None:
        import ray

        self.ray, self.args, self.cfg = ray, args, cfg
        res = _resources(ray)
        self.shard_opts: dict[str, Any] = {"num_cpus": args.cpus_per_shard, "max_restarts": 0}
        if res.get("replay", 0) >= 1:
            self.shard_opts["resources"] = {"replay": 1}
        self.learner_opts: dict[str, Any] = {"num_cpus": args.cpus_per_learner,
                                             "max_restarts": 0}
        if res.get("GPU", 0) >= 1:
            self.learner_opts["num_gpus"] = 1
        elif res.get("learner", 0) >= 1:
            self.learner_opts["resources"] = {"learner": 1}
        self.shard_args = shlex.split(args.shard_args or "")
        own = {"--client-subnet", "--requirepass", "--requirepass-file", "--protected-mode"}
        if args.client_subnet:  # the operator trusts that network without a password
            self.shard_args += ["--client-subnet", args.client_subnet]
        elif not own & set(self.shard_args):
            # protected mode admits loopback only (on DPDK no one): the shards get a random
            # password, handed to the learner and actors as a notebook hands out its token
            env = {"env_vars": {PASSWORD_ENV: new_run_password()}}
            for opts in (self.shard_opts, self.learner_opts):
                opts["runtime_env"] = env
        self.shard_ips = [s for s in (args.shard_ip or "").split(",") if s]
        self.remote_shard = ray.remote(**self.shard_opts)(ShardHost)
        self.remote_learner = ray.remote(**self.learner_opts)(LearnerHost)
        self.shards: list[Any] = []
        self.nodes: list[str] = []
        self.addresses: list[str] = []
        self.restarts = 0
        self.steps_before = 0
        """Steps of the learners that were replaced (each resumed one counts from 0)."""
        self.last_steps = 0
        self.failed: str | None = None
        self._start_shards()
        host, port = self.addresses[0].rsplit(":", 1)
        self.cfg = dataclasses.replace(cfg, host=host, port=int(port))
        self.learner = self._start_learner("fresh")
        self.actors = RayBackend(self.cfg, cfg.num_actors, None, args.cpus_per_actor,
                                 args.max_steps, init=False)
        self.last_save = time.monotonic()

    # ---- shards ---------------------------------------------------------------------
    def _snapshot_dir(self, i: int) -> str | None:
        return str(Path(self.args.snapshot_dir, f"shard-{i}")) if self.args.snapshot_dir \
            else None

    def _start_shards(self) -> None:
        n = self.args.shards
        self.shards = [self.remote_shard.remote(i) for i in range(n)]
        where = self.ray.get([s.where.remote() for s in self.shards], timeout=120)
        self.nodes = [w[1] for w in where]
        if self.shard_ips:  # DPDK: the shard's own IP and TCP port
            if len(self.shard_ips) != n:
                raise SystemExit(f"ray_job: --shard-ip lists {len(self.shard_ips)} addresses "
                                 f"for {n} shards: give one A.B.C.D/NN per shard")
            lp = self.args.shard_port
            self.addresses = [f"{ip.split('/')[0]}:{lp}" for ip in self.shard_ips]
        else:
            self.addresses = [f"{ip}:{port}" for ip, _, port in where]
        starts = [s.start.remote(self.addresses, self._args_of(i), self._snapshot_dir(i),
                                 False) for i, s in enumerate(self.shards)]
        for i, err in enumerate(self.ray.get(starts, timeout=180)):
            if err:
                raise SystemExit(f"ray_job: shard {i} on node {where[i][0]}: {err}")
        print(f"ray_job: replay group {','.join(self.addresses)} "
              f"({'on resource replay' if 'resources' in self.shard_opts else 'on CPUs'})",
              flush=True)

    def _args_of(self, i: int) -> list[str]:
        out = list(self.shard_args)
        if self.shard_ips:
            out += ["--ip", self.shard_ips[i], "--listen-port", str(self.args.shard_port)]
        return out

    def _restart_shard(self, i: int, why: str) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        print(f"ray_job: shard {i} ({self.addresses[i]}) {why}", flush=True)
        if not self.args.snapshot_dir:
            self.failed = (f"shard {i} is gone and no --snapshot-dir is configured, so its "
                           f"items cannot come back: stopping the run")
            return
        with contextlib.suppress(Exception):
            self.ray.kill(self.shards[i], no_restart=True)
        node = NodeAffinitySchedulingStrategy(self.nodes[i], soft=False)
        self.shards[i] = self.remote_shard.options(scheduling_strategy=node).remote(i)
        err = self.ray.get(self.shards[i].start.remote(
            self.addresses, self._args_of(i), self._snapshot_dir(i), True), timeout=180)
        if err:
            self.failed = f"shard {i} could not be restarted: {err}"
            return
        self.restarts += 1
        print(f"ray_job: shard {i} restarted from {self._snapshot_dir(i)} on "
              f"{self.addresses[i]}", flush=True)

    def _save(self) -> None:
        import redis

        for i, a in enumerate(self.addresses):
            host, port = a.rsplit(":", 1)
            try:
                redis.Redis(host=host, port=int(port), socket_timeout=5,
                            password=appliance_password()).bgsave()
            except redis.RedisError as e:
                print(f"ray_job: BGSAVE on shard {i}: {e}", flush=True)

    # ---- learner --------------------------------------------------------------------
    def _start_learner(self, existing: str) -> Any:
        """A learner; one that resumes gets the steps left of --max-learner-steps."""
        cfg = self.cfg
        if existing == "resume":
            self.steps_before += self.last_steps
            self.last_steps = 0
            if cfg.max_learner_steps:
                cfg = dataclasses.replace(cfg, max_learner_steps=max(
                    1, cfg.max_learner_steps - self.steps_before))
        return self.remote_learner.remote(dataclasses.asdict(cfg), existing)

    def learner_stats(self) -> dict[str, Any]:
        """The learner's counters; "total" counts the steps of learners it replaced."""
        from ray.exceptions import GetTimeoutError

        try:
            st = dict(self.ray.get(self.learner.stats.remote(), timeout=30))
            self.last_steps = int(st["steps"])
        except GetTimeoutError:  # still constructing (imports, claiming the run)
            st = {"running": None, "steps": self.last_steps}
        except Exception as e:  # its worker died, or its constructor raised
            st = {"running": False, "error": f"{type(e).__name__}: {e}".splitlines()[0],
                  "steps": self.last_steps}
        st["total"] = self.steps_before + self.last_steps
        return st

    # ---- supervision ----------------------------------------------------------------
    def poll(self) -> str:
        shard_down = False
        for i, s in enumerate(self.shards):
            try:
                st = self.ray.get(s.status.remote(), timeout=30)
            except Exception as e:
                self._restart_shard(i, f"lost its Ray actor ({type(e).__name__})")
                shard_down = True
                continue
            if st["rc"] is not None:
                rc = st["rc"]
                how = f"signal {-rc}" if rc < 0 else f"status {rc}"
                self._restart_shard(i, f"server exited with {how}")
                shard_down = True
            if self.failed:
                return self.failed
        if self.args.snapshot_dir and \
                time.monotonic() - self.last_save >= self.args.snapshot_every:
            self._save()
            self.last_save = time.monotonic()
        ls = self.learner_stats()
        if ls.get("running") is False and not self.learner_done(ls):
            print(f"ray_job: learner stopped: {ls.get('error')}; starting it again (resume)",
                  flush=True)
            with contextlib.suppress(Exception):
                self.ray.kill(self.learner, no_restart=True)
            self.learner = self._start_learner("resume")
        line = self.actors.poll()
        for i, a in enumerate(self.actors.last):
            if a.get("running") is False and a.get("error"):
                self.actors.respawn(i)
        if shard_down:
            return "restarted"
        return (f"learner {ls['total']} steps (version {ls.get('version', 0)}); "
                f"actors: {line}; {self.restarts} shard restarts")

    def learner_done(self, ls: dict[str, Any]) -> bool:
        m = self.cfg.max_learner_steps
        return bool(m and ls["total"] >= m and not ls.get("error"))

    def stop(self) -> None:
        self.actors.stop_actors()
        with contextlib.suppress(Exception):
            self.ray.get(self.learner.stop.remote(), timeout=30)
        with contextlib.suppress(Exception):
            self.ray.kill(self.learner, no_restart=True)
        stops = []
        for s in self.shards:
            with contextlib.suppress(Exception):
                stops.append(s.stop.remote())
        with contextlib.suppress(Exception):
            self.ray.get(stops, timeout=60)
        for s in self.shards:
            with contextlib.suppress(Exception):
                self.ray.kill(s, no_restart=True)


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, Config]:
    p = argparse.ArgumentParser(prog="python -m inreplay.actors.ray_job", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ray-address", help="join this Ray cluster (default: a local instance)")
    p.add_argument("--shards", type=int, default=2, help="replay shards (default 2)")
    p.add_argument("--shard-args", default="",
                   help="more `pyctl start` flags for every shard, one string "
                        "(e.g. \"--maxbytes 4gb\" or \"--stack dpdk --port 0\")")
    p.add_argument("--client-subnet", metavar="A.B.C.D/NN",
                   help="who may connect to the shards without a password (default: no "
                        "one: the shards get a random password, which the learner and the "
                        "actors are handed)")
    p.add_argument("--shard-ip", help="DPDK: each shard's A.B.C.D/NN, comma-separated")
    p.add_argument("--shard-port", type=int, default=6379,
                   help="DPDK: the shards' TCP port (default 6379)")
    p.add_argument("--cpus-per-shard", type=float, default=1.0,
                   help="Ray CPU share of one shard (default 1)")
    p.add_argument("--cpus-per-learner", type=float, default=1.0,
                   help="Ray CPU share of the learner (default 1)")
    p.add_argument("--cpus-per-actor", type=float, default=0.5,
                   help="Ray CPU share of one actor (default 0.5)")
    p.add_argument("--max-steps", type=int, default=0, help="each actor stops after this many")
    p.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0: never)")
    p.add_argument("--snapshot-dir", help="BGSAVE every shard under DIR/shard-<i>; a dead "
                   "shard restarts from there (default: no snapshots, a dead shard ends the run)")
    p.add_argument("--snapshot-every", type=float, default=60.0,
                   help="seconds between snapshots (default 60)")
    p.add_argument("--status-every", type=float, default=10.0,
                   help="seconds between progress lines (default 10)")
    add_arguments(p, skip=("host", "port", "replay"))
    args = p.parse_args(argv)
    if args.shards < 1:
        p.error(f"--shards {args.shards}: choose 1 or more")
    if args.snapshot_every <= 0:
        p.error("--snapshot-every must be > 0")
    try:
        cfg = from_args(args)
    except ValueError as e:
        p.error(str(e))
    return args, cfg


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse(argv)
    try:
        import ray
    except ImportError:
        raise SystemExit("ray_job: needs Ray: pip install 'inreplay[ray]'") from None
    stop = threading.Event()
    init_ray(args.ray_address)
    job: Job | None = None
    code = 0
    try:
        job = Job(args, cfg)

        on_signal = stop_handler(stop)
        # after ray.init, which installs handlers of its own that would end the driver
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        print(f"ray_job: {args.shards} shards, 1 learner, {cfg.num_actors} actors, "
              f"{cfg.env_id}", flush=True)
        t_end = time.monotonic() + 60 * args.minutes if args.minutes else float("inf")
        last = time.monotonic()
        while not stop.wait(1.0):
            line = job.poll()
            if job.failed:
                print(f"ray_job: {job.failed}", flush=True)
                code = 1
                break
            if time.monotonic() - last >= args.status_every:
                print(f"ray_job: {line}", flush=True)
                last = time.monotonic()
            if job.learner_done(job.learner_stats()):
                print("ray_job: the learner reached --max-learner-steps", flush=True)
                break
            if time.monotonic() >= t_end:
                break
    finally:
        if job is not None:
            job.stop()
        shutdown_ray(ray)
    print("ray_job: stopped", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
