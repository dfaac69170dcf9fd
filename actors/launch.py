"""python -m inreplay.actors.launch: run N Ape-X actors, as local processes or on Ray.

    python -m inreplay.actors.launch --backend local --num-actors 8 --host 10.0.0.5 --port 6379
    python -m inreplay.actors.launch --backend ray --ray-address auto --num-actors 360 ...

The appliances are not started here: they run on the replay boxes (`pyctl start`,
`pyctl start --shards N`), and the actors reach them through the address given
(--host/--port, any member of a replay group: see ShardedReplayClient.from_seed).

local  one `python -m inreplay.actors.actor` process per actor on this machine; one that
       exits with an error is restarted after a short back-off.
ray    each actor is a Ray actor (max_restarts=-1): when its worker process dies
       (killed, out of memory, a lost node) Ray starts it again and it resumes
       with a fresh environment and the newest parameters. --ray-address joins a
       running cluster ("auto", or ray://HOST:PORT); without it a local Ray
       instance starts on this machine. --cpus-per-actor sets each actor's CPU
       share (fractional values pack several actors per core).

The launcher runs until SIGTERM/SIGINT or until every actor has stopped (the
learner's stop key, or --max-steps), printing a progress line every --status-every
seconds, and stops its actors on the way out.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from inreplay.rl.config import (
    PASSWORD_ENV,
    Config,
    add_arguments,
    appliance_password,
    from_args,
)

from pyctl.proc import descendants, stop_handler

ROOT = Path(__file__).resolve().parent.parent
RAY_NAMESPACE = "inreplay"
"""Ray namespace of the actors, named inreplay-actor-<i> (ray.get_actor finds them)."""


class ActorHost:
    """One actor inside a Ray worker (wrapped with ray.remote by RayBackend): the
    actor loop runs in a thread, so pid/stats/stop stay answerable while it runs."""

    def __init__(self, cfg: dict[str, Any], actor_id: int, max_steps: int = 0) -> None:
        from inreplay.actors.actor import Actor  # in the worker: torch and gymnasium load here

        self.stop_event = threading.Event()
        self.actor = Actor(Config.from_dict(cfg), actor_id, stop=self.stop_event)
        self.started = time.time()
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, args=(max_steps,), daemon=True)
        self.thread.start()

    def _run(self, max_steps: int) -> None:
        try:
            self.actor.run(max_steps)
        except Exception as e:  # reported through stats(), and the launcher logs it
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.actor.close()

    def pid(self) -> int:
        return os.getpid()

    def stats(self) -> dict[str, Any]:
        a = self.actor
        return {"id": a.id, "pid": os.getpid(), "frames": a.frames, "episodes": a.episodes,
                "inserted": a.inserted, "version": a.version, "running": self.thread.is_alive(),
                "error": self.error, "up_s": round(time.time() - self.started, 1)}

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=10)


class LocalBackend:
    """One process per actor on this machine, restarted when it fails."""

    def __init__(self, cfg: Config, n: int, argv: list[str], max_steps: int) -> None:
        self.argv, self.n, self.max_steps = argv, n, max_steps
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.restarts = 0
        self.finished: set[int] = set()
        for i in range(n):
            self._spawn(i)

    def _spawn(self, i: int) -> None:
        cmd = [sys.executable, "-m", "inreplay.actors.actor", "--actor-id", str(i), *self.argv]
        if self.max_steps:
            cmd += ["--max-steps", str(self.max_steps)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
        self.procs[i] = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)

    def poll(self) -> str:
        for i, p in list(self.procs.items()):
            rc = p.poll()
            if rc is None:
                continue
            if rc == 0:
                self.finished.add(i)
                del self.procs[i]
            else:
                print(f"launch: actor {i} exited with {rc}; restarting it", flush=True)
                self.restarts += 1
                time.sleep(1.0)
                self._spawn(i)
        return f"{len(self.procs)} running, {len(self.finished)} done, {self.restarts} restarts"

    def done(self) -> bool:
        return not self.procs

    def stop(self) -> None:
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


class RayBackend:
    """Each actor a Ray actor with unlimited restarts."""

    def __init__(self, cfg: Config, n: int, address: str | None, cpus: float,
                 max_steps: int, *, init: bool = True) -> None:
        """init False: Ray is already initialised by the caller (actors.ray_job)."""
        try:
            import ray
        except ImportError:
            raise SystemExit("launch: --backend ray needs Ray: pip install 'inreplay[ray]'") \
                from None
        self.ray = ray
        if init:
            init_ray(address)
        # the appliance's password reaches the actors as the job's other processes get it
        pw = appliance_password()
        env = {"runtime_env": {"env_vars": {PASSWORD_ENV: pw}}} if pw else {}
        self.remote = ray.remote(num_cpus=cpus, max_restarts=-1, max_task_retries=-1,
                                 **env)(ActorHost)
        self.cfg_dict = dataclasses.asdict(cfg)
        self.max_steps = max_steps
        self.handles = [self._spawn(i) for i in range(n)]
        self.pids: dict[int, int] = {}
        self.restarts = 0
        self.last: list[dict[str, Any]] = []

    def _spawn(self, i: int) -> Any:
        return self.remote.options(name=f"inreplay-actor-{i}").remote(
            self.cfg_dict, i, self.max_steps)

    def respawn(self, i: int) -> None:
        """Replace actor i (one whose loop ended with an error, e.g. its replay shard
        went away and came back): a new Ray actor, fresh environment, newest parameters."""
        self.ray.kill(self.handles[i], no_restart=True)
        self.pids.pop(i, None)
        deadline = time.monotonic() + 30
        while True:  # the name is free once Ray has removed the old actor
            try:
                self.handles[i] = self._spawn(i)
                break
            except ValueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.restarts += 1

    def stats(self) -> list[dict[str, Any]]:
        """Every actor's counters; {"running": None} for one that is restarting."""
        refs = [h.stats.remote() for h in self.handles]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=10)
        done = set(ready)
        out = []
        for ref in refs:
            try:
                out.append(self.ray.get(ref) if ref in done else {"running": None})
            except Exception as e:  # died between calls: Ray restarts it
                out.append({"running": None, "error": type(e).__name__})
        return out

    def poll(self) -> str:
        st = self.last = self.stats()
        for i, s in enumerate(st):
            pid = s.get("pid")
            if pid and self.pids.get(i) not in (None, pid):
                self.restarts += 1
                print(f"launch: actor {i} was restarted by Ray (pid {self.pids[i]} -> {pid})",
                      flush=True)
            if pid:
                self.pids[i] = pid
            if s.get("error") and s.get("running") is False:
                print(f"launch: actor {i} stopped: {s['error']}", flush=True)
        running = sum(1 for s in st if s.get("running"))
        frames = sum(s.get("frames", 0) for s in st)
        return f"{running} running on Ray, {frames} frames, {self.restarts} restarts"

    def done(self) -> bool:
        return all(s.get("running") is False for s in self.last)

    def stop_actors(self) -> None:
        try:
            self.ray.get([h.stop.remote() for h in self.handles], timeout=30)
        except Exception as e:
            print(f"launch: stopping the Ray actors: {type(e).__name__}: {e}", flush=True)
        for h in self.handles:
            self.ray.kill(h, no_restart=True)

    def stop(self) -> None:
        self.stop_actors()
        shutdown_ray(self.ray)


def init_ray(address: str | None) -> None:
    """Join the cluster at address ("auto", ray://HOST:PORT), or start a local instance."""
    import ray

    env = {"env_vars": {"PYTHONPATH": str(ROOT)}}
    if address:
        ray.init(address=address, namespace=RAY_NAMESPACE, runtime_env=env)
    else:  # a local instance on this machine
        ray.init(include_dashboard=False, log_to_driver=False, namespace=RAY_NAMESPACE,
                 runtime_env=env)


def shutdown_ray(ray: Any) -> None:
    """ray.shutdown(), then end whatever of a local instance outlived it."""
    ours = descendants(os.getpid())  # the local instance's raylet, GCS and workers
    ray.shutdown()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in ours):
        time.sleep(0.1)
    for p in ours:  # one still there after Ray's own shutdown: end it
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, Config, list[str]]:
    p = argparse.ArgumentParser(prog="python -m inreplay.actors.launch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="where the actors run (default local)")
    p.add_argument("--ray-address", help="join this Ray cluster (default: a local instance)")
    p.add_argument("--cpus-per-actor", type=float, default=0.5,
                   help="Ray CPU share of one actor (default 0.5)")
    p.add_argument("--max-steps", type=int, default=0, help="each actor stops after this many")
    p.add_argument("--status-every", type=float, default=10.0,
                   help="seconds between progress lines (default 10)")
    add_arguments(p)
    args, _ = p.parse_known_args(argv)
    raw = list(sys.argv[1:] if argv is None else argv)
    # the actor flags, passed on unchanged to local actor processes
    passthrough: list[str] = []
    skip = {"--backend", "--ray-address", "--cpus-per-actor", "--max-steps", "--status-every"}
    it = iter(raw)
    for a in it:
        name = a.split("=", 1)[0]
        if name in skip:
            if "=" not in a:
                next(it, None)
            continue
        passthrough.append(a)
    try:
        cfg = from_args(args)
    except ValueError as e:
        p.error(str(e))
    return args, cfg, passthrough


def main(argv: list[str] | None = None) -> int:
    args, cfg, passthrough = parse(argv)
    stop = threading.Event()
    n = cfg.num_actors
    backend: LocalBackend | RayBackend
    if args.backend == "ray":
        backend = RayBackend(cfg, n, args.ray_address, args.cpus_per_actor, args.max_steps)
    else:
        backend = LocalBackend(cfg, n, passthrough, args.max_steps)

    on_signal = stop_handler(stop)
    # after ray.init, which installs handlers of its own that would end the driver at once
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"launch: {n} actors on {args.backend} against {cfg.host}:{cfg.port}", flush=True)
    last = time.monotonic()
    try:
        while not stop.wait(1.0):
            line = backend.poll()
            if time.monotonic() - last >= args.status_every:
                print(f"launch: {line}", flush=True)
                last = time.monotonic()
            if backend.done():
                break
    finally:
        backend.stop()
    print("launch: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
