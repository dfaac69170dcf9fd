"""`pyctl demo` (this module: ``python -m inreplay.actors.demo``): train Ape-X DQN through the
replay appliance and evaluate it.

    pyctl demo [--stack kernel|dpdk] [--env-id CartPole-v1] [--actors N] [--minutes M]
               [--out DIR] [--replay appliance|local] [--stop-timeout S]
               [any learner/actor flag]

Starts the appliance (``pyctl start``; with ``--replay local`` a stock
redis-server instead: the baseline), one learner and N actors as separate
processes, and shows progress. Every ``eval_every_s`` seconds it pulls the newest
published parameters and plays ``screen_episodes`` greedy episodes; if all reach
the solve return (CartPole-v1: 475) it plays ``eval_episodes`` (20) more on fresh
seeds with the same parameters, and if their mean reaches it too the run is
solved and stops. Otherwise training runs for ``--minutes`` and the last
parameters are evaluated. Writes DIR/summary.json, DIR/returns.png,
DIR/metrics.csv (learner), DIR/checkpoint.pt (the learner's last model),
DIR/evaluated.pt (the parameters the summary's evaluation played: check with
``python -m inreplay.learner.evaluate DIR/evaluated.pt``) and one log per process, stops
every process it started (also on Ctrl-C or a crash), and prints
``solved: true`` or ``solved: false`` last. Exit status 0 when the policy solved
the task (or the environment has no solve return, as ALE's games), 3 (UNSOLVED_EXIT)
when the run ended without solving it, so that a script or CI can tell; 1 when
something crashed, 2 for a usage error, 130 when interrupted. A learner or actor
that does not exit within ``--stop-timeout`` seconds of SIGTERM (or exits with an
error) at the end is killed and named, in the output and in summary.json's
``shutdown_problems``; the summary and the verdict are still written from what was
measured, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
from inreplay.rl.config import appliance_password
from inreplay.rl.harness import (
    HOST,
    MIN_RATE_SPAN_S,
    Child,
    Run,
    SolveRule,
    add_budget_flags,
    check_budget_flags,
    machine,
    start_redis,
)

from pyctl.proc import free_port
from pyctl.sysinfo import cpu_model


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, Any]:
    """Flags and the configuration; a usage error is one line and exit status 2."""
    from inreplay.rl.config import add_arguments, from_args

    from pyctl.cli import Parser

    p = Parser(prog="pyctl demo", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algo", choices=list(ALGOS), default="apex",
                   help="apex (default): Ape-X DQN; impala: V-trace actor-critic through a "
                        "QUEUE table (actors.impala); r2d2: recurrent DQN with sequence "
                        "replay (actors.r2d2); a3c: asynchronous actor-critic workers pushing "
                        "gradients to a parameter table (actors.a3c). Each has its own "
                        "flags: pyctl demo --algo X -h")
    p.add_argument("--stack", choices=["auto", "kernel", "dpdk"], default="auto",
                   help="the appliance's network stack: auto (default) runs DPDK in a "
                        "namespace when the machine allows it, else the kernel stack; "
                        "dpdk falls back to kernel if it cannot start")
    p.add_argument("--actors", dest="num_actors", type=int, default=argparse.SUPPRESS,
                   help="actor processes (default: the preset's, 2 for CartPole)")
    add_budget_flags(p, 5.0)
    p.add_argument("--out", dest="out_dir", default=argparse.SUPPRESS,
                   help="output directory (default out/demo-<env>)")
    p.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    p.add_argument("--shards", type=int, default=1,
                   help="a replay group of N appliances (pyctl start --shards N); the learner "
                        "samples across them exactly (default 1)")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="actors as processes here (local, default) or as Ray actors on a "
                        "local Ray instance, restarted if they die "
                        "(python -m inreplay.actors.launch)")
    p.add_argument("--stop-timeout", type=float, default=30.0, metavar="S",
                   help="seconds a process gets to exit after SIGTERM before it is killed "
                        "(default 30)")
    # one flag per concept: --actors and --out above stand for these Config fields
    add_arguments(p, skip=("host", "port", "num_actors", "out_dir"))
    args = p.parse_args(argv)
    env_id = getattr(args, "env_id", "CartPole-v1")
    fallback = {"env_id": env_id,
                "out_dir": f"out/demo-{env_id.replace('/', '-').replace(':', '-')}"}
    try:
        cfg = from_args(args, **fallback)
    except ValueError as e:
        p.error(str(e))
    check_budget_flags(p, args)
    if args.stop_timeout < 0:
        p.error("--stop-timeout: must be >= 0")
    if not 1 <= args.shards <= 16:
        p.error("--shards: choose 1 to 16")
    if args.shards > 1 and cfg.replay == "local":
        p.error("--shards: the --replay local baseline is one stock redis-server")
    return args, cfg


UNSOLVED_EXIT = 3
"""Exit status of a run that ended without solving an environment that has a solve
return (everything else went well)."""
ALGOS = {"apex": "inreplay.actors.demo", "impala": "inreplay.actors.impala_demo",
         "r2d2": "inreplay.actors.r2d2_demo", "a3c": "inreplay.actors.a3c"}
"""pyctl demo --algo NAME: the module whose main(argv) runs that pattern's demo."""


def _split_algo(argv: list[str]) -> tuple[str, list[str]]:
    """--algo NAME (or --algo=NAME) and the other flags, for the chosen demo."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--algo", default="apex")
    known, _ = pre.parse_known_args(argv)
    rest = [a for i, a in enumerate(argv)
            if not (a == "--algo" or a.startswith("--algo=") or (i and argv[i - 1] == "--algo"))]
    return known.algo, rest


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    algo, rest = _split_algo(raw)
    if algo not in ALGOS:
        print(f"pyctl demo: --algo {algo}: choose one of {', '.join(ALGOS)}", file=sys.stderr)
        return 2
    if algo != "apex":
        return int(importlib.import_module(ALGOS[algo]).main(rest))
    args, cfg = parse(rest)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("summary.json", "returns.png", "metrics.csv", "checkpoint.pt", "evaluated.pt"):
        (out / stale).unlink(missing_ok=True)
    demo = Demo(args, cfg, out)
    return demo.main(lambda run: demo.train_and_evaluate(), demo.report)


def run_rates(first: dict[str, Any], after: dict[str, Any], t_stop: float,
              batch_size: int) -> dict[str, float | None]:
    """Actor frames/s and learner steps/s over the run: from the first poll that saw each
    working to the moment the children were told to stop, counting what they published on
    the way out (everything they did before t_stop). None when one was not seen working at
    least one poll interval before the stop (a loaded machine can start the learner late):
    an unknown rate, not a zero one."""
    out: dict[str, float | None] = {"frames_per_s": None, "steps_per_s": None}
    for name, counter, scale in (("frames_per_s", "frames", 1), ("steps_per_s", "samples",
                                                                  batch_size)):
        seen = first[counter]
        if seen is None or t_stop - seen[0] < MIN_RATE_SPAN_S:
            continue
        out[name] = (after[counter] - seen[1]) / scale / (t_stop - seen[0])
    return out


def _rate(v: float | None, digits: int) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


class Demo(Run):
    """The Ape-X run on the demo harness: a learner and N actors (or one Ray launcher)."""

    def __init__(self, args: argparse.Namespace, cfg: Any, out: Path) -> None:
        super().__init__("pyctl demo", out, args.minutes, args.stack,
                         stop_timeout=float(args.stop_timeout), unsolved_exit=UNSOLVED_EXIT)
        self.args = args
        self.cfg = cfg
        self.unix0 = time.time()
        self.returns: list[tuple[float, int, float]] = []  # (t since start, actor, return)
        self.returns_seen = 0

    # ---- setup ------------------------------------------------------------------------
    def start_server(self) -> None:
        if self.cfg.replay == "local":
            port = self.args.port or free_port(HOST)
            self.server = start_redis(port, self.out)
            self.stack = "kernel"
            self.line.say(f"redis-server (the --replay local baseline) on {HOST}:{port}, "
                          f"pid {self.server.proc.pid}")
            host = HOST
        else:
            host, port = self.start_appliance(self.args.shards, self.args.port)
        self.cfg = replace(self.cfg, host=host, port=port)

    def start_processes(self) -> None:
        cfg_path = self.out / "config.json"
        cfg_path.write_text(self.cfg.to_json())
        py = sys.executable
        learner = self.spawn("learner", [py, "-m", "inreplay.learner.learner", "--config",
                                         str(cfg_path)])
        if self.args.backend == "ray":  # one launcher; Ray runs and restarts the actors
            c = Child("actors (Ray)", [py, "-m", "inreplay.actors.launch", "--backend", "ray",
                                       "--config", str(cfg_path), "--status-every", "10"],
                      self.out / "actors.log")
            self.children.append(c)
        else:
            for i in range(self.cfg.num_actors):
                self.spawn(f"actor {i}", [py, "-m", "inreplay.actors.actor", "--config",
                                          str(cfg_path), "--actor-id", str(i)])
        from inreplay.actors.actor import epsilon_ladder

        c = self.cfg
        eps = ", ".join(f"{epsilon_ladder(i, c.num_actors, c.eps_base, c.eps_alpha):.4g}"
                        for i in range(c.num_actors))
        self.line.say(f"learner pid {learner.proc.pid}; {self.cfg.num_actors} actors "
                      f"(epsilon {eps}); logs in {self.out}/")

    # ---- the run --------------------------------------------------------------------
    def report(self, summary: dict[str, Any]) -> str:
        """Plots returns.png; the lines printed before the verdict."""
        self.plot(summary)
        lines = [
            f"{summary['env']} on the {summary['stack']} stack ({summary['replay']} replay): "
            f"evaluation {summary['eval_return_mean'] or float('nan'):.1f} over "
            f"{summary['eval_episodes']} episodes after {summary['learner_steps']} learner "
            f"steps and {summary['env_frames']} frames in {summary['wall_s']:.0f} s",
            f"actors {_rate(summary['actor_frames_per_s'], 0)} frames/s, learner "
            f"{_rate(summary['learner_steps_per_s'], 1)} steps/s "
            f"({_rate(summary['samples_per_s'], 0)} samples/s); wrote "
            f"{self.out}/summary.json and {self.out}/returns.png"]
        if summary["shutdown_problems"]:
            lines.append(f"(measured before the shutdown; at the shutdown: "
                         f"{'; '.join(summary['shutdown_problems'])})")
        if summary.get("replay_bytes_per_transition"):
            fp = summary["replay_footprint"]
            lines.append(f"replay: {fp['bytes_per_transition']:,.0f} B per transition "
                         f"({fp['storage']}, {fp['items']:,} transitions on the server)")
        return "\n".join(lines)

    def train_and_evaluate(self) -> dict[str, Any]:
        import redis
        import torch
        from inreplay.rl.config import Keys
        from inreplay.rl.env import env_spec
        from inreplay.rl.model import build_model, pull_blob

        torch.set_num_threads(1)
        self.start_server()
        cfg = self.cfg
        keys = Keys(cfg.prefix)
        spec = env_spec(cfg)
        threshold = cfg.solve_return or spec.reward_threshold
        model = build_model(spec, cfg.hidden).eval()
        r = redis.Redis(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                        password=appliance_password())
        r.delete(*keys.all())
        self.start_processes()
        reserve = min(cfg.eval_max_s, 0.15 * self.budget_s) + 5.0  # final eval and shutdown
        first = {"frames": None, "samples": None}
        rates: dict[str, float] = {}
        pulled = {"version": 0, "samples": 0}

        def pull() -> int:
            # one MULTI/EXEC wrote all three: the blob, its version and the samples behind it
            got = pull_blob(r, model, keys.params, keys.version, keys.samples,
                            say=lambda msg: self.line.say(f"demo: {msg}"))
            if got is None:
                return 0
            v = int(got[0] or 0)
            pulled.update(version=v, samples=int(got[1] or 0))
            return v

        def save_evaluated() -> Path:
            """The parameters evaluated last, reloadable by
            `python -m inreplay.learner.evaluate`."""
            path = self.out / "evaluated.pt"
            torch.save({"model": model.state_dict(), "config": asdict(cfg),
                        "params_version": pulled["version"],
                        "learner_steps": pulled["samples"] // cfg.batch_size}, path)
            return path

        def status() -> tuple[str, int, int]:
            st = self.poll(r, keys, first, rates)
            # nothing to screen before the learner's first step
            return (self.status(st, threshold), st["version"] if st["samples"] else 0,
                    st["samples"] // cfg.batch_size)

        rule = SolveRule(threshold, cfg.screen_episodes, cfg.eval_episodes, cfg.eval_every_s)
        play = self.greedy(model, cfg, cfg.eval_epsilon)
        solved = self.solve(rule, play, pull=pull, status=status, updates=self.args.updates,
                            deadline=self.end - reserve, max_eval_s=cfg.eval_max_s)
        if solved is not None:
            save_evaluated()
        st = self.poll(r, keys, first, rates)
        self.line.say(self.status(st, threshold))
        t_stop = time.monotonic()
        # the learner publishes and checkpoints on exit; a child that misbehaves here
        # does not cost the result: it is named in the summary and the exit status
        self.stop_children()
        st = self.poll(r, keys, first, {})
        rates = run_rates(first, st, t_stop, cfg.batch_size)
        footprint = self.replay_footprint(r, spec.pixels)
        result = self.final(rule, play, pull=pull, solved=solved, max_s=cfg.eval_max_s)
        if solved is None and result["version"]:
            save_evaluated()
        r.close()
        from inreplay.rl.model import param_count, params_to_blob

        return {
            "env": cfg.env_id,
            "model_parameters": param_count(model),
            "params_blob_bytes": len(params_to_blob(model)),
            "stack": self.stack,
            "stack_requested": self.args.stack if cfg.replay == "appliance" else "kernel",
            "replay": cfg.replay if cfg.replay == "local" else "appliance",
            "shards": self.args.shards,
            "backend": self.args.backend,
            **self.verdict(rule, result),
            "eval_epsilon": cfg.eval_epsilon,
            "eval_checkpoint": str(self.out / "evaluated.pt") if result["version"] else None,
            "env_frames": st["frames"],
            "transitions": st["transitions"],
            "episodes": st["episodes"],
            "learner_steps": st["samples"] // cfg.batch_size,
            "learner_samples": st["samples"],
            "params_version": st["version"],
            "actor_frames_per_s": rates["frames_per_s"],
            "learner_steps_per_s": rates["steps_per_s"],
            "samples_per_s": (None if rates["steps_per_s"] is None
                              else rates["steps_per_s"] * cfg.batch_size),
            "num_actors": cfg.num_actors,
            "batch_size": cfg.batch_size,
            "replay_bytes_per_transition": footprint.get("bytes_per_transition"),
            "replay_footprint": footprint,
            "evaluations": self.evals,
            "machine": machine(cpu=cpu_model(), torch=torch.__version__,
                               device="cuda" if torch.cuda.is_available() and cfg.device != "cpu"
                               else "cpu"),
            "config": asdict(cfg),
        }

    def replay_footprint(self, r: Any, pixels: bool) -> dict[str, Any]:
        """Bytes per transition the replay holds on the (home) server, measured after the
        actors stopped (their streams dropped: what is left is what the items reference);
        {} with --replay local or when the server does not answer."""
        import redis
        from inreplay.rl.frames import frames_once_on, replay_footprint

        cfg = self.cfg
        if cfg.replay != "appliance":
            return {}

        class _Group:  # frames_once_on asks how many shards the group has
            shards = range(self.args.shards or 1)

        try:
            out = replay_footprint(r, cfg.table, frames_once_on(cfg, pixels, _Group()))
        except redis.RedisError as e:
            return {"error": str(e)}
        out["shards_measured"] = f"1 of {self.args.shards or 1}"
        return out

    def poll(self, r: Any, keys: Any, first: dict[str, Any], rates: dict[str, float],
             ) -> dict[str, Any]:
        pipe = r.pipeline(transaction=False)
        pipe.mget(keys.frames, keys.transitions, keys.samples, keys.version)
        pipe.lrange(keys.returns, self.returns_seen, -1)
        (frames, trans, samples, version), new = pipe.execute()
        now = time.monotonic()
        st = {"frames": int(frames or 0), "transitions": int(trans or 0),
              "samples": int(samples or 0), "version": int(version or 0)}
        for raw in new:
            parts = raw.split()
            self.returns.append((float(parts[0]) - self.unix0, int(parts[1]), float(parts[2])))
        self.returns_seen += len(new)
        st["episodes"] = len(self.returns)
        recent = [x[2] for x in self.returns[-100:]]
        st["return_mean_100"] = float(np.mean(recent)) if recent else float("nan")
        # rates over the whole run, from the first moment actors / learner were seen working
        if st["frames"] and first["frames"] is None:
            first["frames"] = (now, st["frames"])
        if st["samples"] and first["samples"] is None:
            first["samples"] = (now, st["samples"])
        if first["frames"] and now - first["frames"][0] > 1.0:
            rates["frames_per_s"] = (st["frames"] - first["frames"][1]) / (now - first["frames"][0])
        if first["samples"] and now - first["samples"][0] > 1.0:
            rates["steps_per_s"] = ((st["samples"] - first["samples"][1]) / self.cfg.batch_size
                                    / (now - first["samples"][0]))
        st.update(rates)
        return st

    def status(self, st: dict[str, Any], threshold: float | None) -> str:
        last = next((e for e in reversed(self.evals)), None)
        ev = "" if last is None else (f" | eval v{last['params_version']} "
                                      f"{last['mean'] if last['mean'] is not None else 0:.0f}")
        steps = st["samples"] // self.cfg.batch_size
        return (f"[{self.elapsed():6.1f}s] actors {st['frames']:>8} frames "
                f"{st.get('frames_per_s', 0):5.0f}/s | learner {steps:>6} "
                f"steps {st.get('steps_per_s', 0):5.1f}/s | params v{st['version']} | "
                f"return(100) {st['return_mean_100']:6.1f} ({st['episodes']} episodes){ev}")

    def plot(self, summary: dict[str, Any]) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from inreplay.actors.actor import epsilon_ladder

        fig, ax = plt.subplots(figsize=(9, 5))
        cfg = self.cfg
        for i in range(cfg.num_actors):
            pts = [(t, ret) for t, a, ret in self.returns if a == i]
            if pts:
                t, ret = zip(*pts, strict=True)
                eps = epsilon_ladder(i, cfg.num_actors, cfg.eps_base, cfg.eps_alpha)
                ax.scatter(t, ret, s=6, alpha=0.5, label=f"actor {i} (epsilon {eps:.3g})")
        if len(self.returns) >= 2:
            t = np.array([x[0] for x in self.returns])
            ret = np.array([x[2] for x in self.returns])
            k = min(50, len(ret))
            smooth = np.convolve(ret, np.ones(k) / k, mode="valid")
            ax.plot(t[k - 1:], smooth, color="black", lw=1.5, label=f"mean of last {k} episodes")
        for kind, marker, color in (("screen", "^", "tab:purple"), ("final", "*", "tab:red")):
            pts = [(e["t"], e["mean"]) for e in self.evals if e["kind"] == kind and e["mean"]]
            if pts:
                t, m = zip(*pts, strict=True)
                ax.scatter(t, m, marker=marker, s=80 if kind == "final" else 30, color=color,
                           zorder=5, label=f"greedy evaluation ({kind})")
        if summary.get("solve_return"):
            ax.axhline(summary["solve_return"], ls="--", color="gray", lw=1,
                       label=f"solved at {summary['solve_return']:g}")
        ax.set_xlabel("wall time since start (s)")
        ax.set_ylabel("episode return")
        if summary.get("solve_return"):
            solved = "solved" if summary["solved"] else "not solved"
        else:
            solved = f"{summary['eval_episodes']} evaluation episodes"
        ax.set_title(f"{summary['env']}: Ape-X through inreplay ({summary['stack']} stack, "
                     f"{summary['replay']} replay) — {solved}")
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        fig.savefig(self.out / "returns.png", dpi=110)
        plt.close(fig)




if __name__ == "__main__":
    sys.exit(main())
