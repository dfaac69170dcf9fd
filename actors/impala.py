"""IMPALA through the replay appliance: a V-trace actor-critic on a QUEUE table.

    python -m inreplay.actors.impala [--out DIR] [--minutes M] [--stack auto|kernel|dpdk]
                                     [--FLAG V ...]

(``pyctl demo --algo impala`` runs this module's main.) Espeholt et al. 2018: actors
play with the newest published policy and push unrolls of ``unroll`` steps (obs,
actions, rewards, dones, behaviour logits and the bootstrap obs) into a FIFO queue,
``REPLAY.CREATE <t> QUEUE n``: each unroll is consumed once, an actor's insert into a
full queue waits and the learner's sample from an empty one waits. The learner takes
``batch_size`` unrolls per step, corrects for the policy lag with V-trace targets
(truncation rho_bar = c_bar = 1), trains and publishes the parameters as the Ape-X
demo does (a checked float32 blob SET with its version and announced on pub/sub).

This process starts the appliance, the learner and ``num_actors`` actors (separate
processes, with the Ape-X demo's process management), evaluates the newest
parameters like the Ape-X demo (a greedy screen, then ``eval_episodes`` episodes on
fresh seeds; a mean of at least the solve return, 475 for CartPole-v1, is solved),
writes DIR/summary.json and prints ``solved: true`` or ``solved: false`` last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import redis
import torch
from inreplay.rl.config import (
    Config,
    Keys,
    Parser,
    appliance_password,
    dump_stacks_on_signal,
    field_docs,
)
from inreplay.rl.model import load_blob, params_to_blob
from inreplay.rl.networks import ActorCritic, env_dims, step_reward
from torch import nn

from pyctl.client import RateLimited, ReplayClient, Schema, connect


@dataclass
class ImpalaConfig:
    """IMPALA (V-trace actor-critic) on CartPole-v1 through a QUEUE table."""

    env_id: str = "CartPole-v1"
    """Gymnasium id of a vector-observation, discrete-action environment."""
    seed: int = 1
    """Base seed: actor i seeds its environments from seed + 1000 * (i + 1)."""
    max_episode_steps: int = 500
    """Episodes are truncated after this many steps (CartPole-v1's own limit)."""
    num_actors: int = 2
    """Actor processes."""
    envs_per_actor: int = 8
    """Environments each actor steps together (one batched forward pass per step)."""
    unroll: int = 20
    """Steps per unroll (T): an item holds T+1 observations and T of everything else."""
    queue_size: int = 64
    """Capacity of the QUEUE table in unrolls; an actor's add waits while it is full."""
    batch_size: int = 16
    """Unrolls per learner step (each consumed once)."""
    hidden: int = 64
    """Width of the two hidden layers of the policy and of the value network."""
    lr: float = 5e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount."""
    entropy_cost: float = 0.01
    """Weight of the entropy bonus."""
    baseline_cost: float = 0.5
    """Weight of the value loss 0.5 * (v_s - V(x_s))^2."""
    grad_clip: float = 40.0
    """Global gradient-norm clip."""
    rho_bar: float = 1.0
    """V-trace truncation of the importance weights in the targets and the advantages."""
    c_bar: float = 1.0
    """V-trace truncation of the trace coefficients."""
    host: str = "127.0.0.1"
    """Host of the appliance (set by main)."""
    port: int = 6379
    """Port of the appliance (set by main)."""
    table: str = "impala"
    """Name of the QUEUE table."""
    prefix: str = "impala"
    """Prefix of the shared keys and of the parameter channel (rl.config.Keys)."""
    sample_timeout_s: float = 1.0
    """How long one add or sample may wait on the queue before the loop looks again."""
    eval_episodes: int = 20
    """Episodes on fresh seeds that decide solved (their mean against the solve return)."""
    screen_episodes: int = 3
    """Greedy episodes that must all reach the solve return before the full evaluation."""
    eval_every_s: float = 5.0
    """Seconds between screens of the newest parameters."""
    solve_return: float = 475.0
    """Mean evaluation return that counts as solved (CartPole-v1's reward threshold)."""


def schema_for(cfg: ImpalaConfig, obs_dim: int, n_actions: int) -> Schema:
    """One item = one unroll of T steps (plus the bootstrap observation)."""
    t = cfg.unroll
    return Schema({"obs": ((t + 1, obs_dim), np.float32), "action": ((t,), np.int64),
                   "reward": ((t,), np.float32), "done": ((t,), np.bool_),
                   "logits": ((t, n_actions), np.float32)})


# ---- V-trace --------------------------------------------------------------------------


def vtrace(behaviour_logp: torch.Tensor, target_logp: torch.Tensor, rewards: torch.Tensor,
           discounts: torch.Tensor, values: torch.Tensor, bootstrap: torch.Tensor,
           rho_bar: float = 1.0, c_bar: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace targets v_s and policy-gradient advantages, time-major ([T, B] inputs,
    bootstrap [B]), by the paper's backward recursion:

        rho_t = min(rho_bar, pi/mu),  c_t = min(c_bar, pi/mu)
        delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
        v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})),  v_T = V(x_T)
        advantage_s = rho_s (r_s + gamma_s v_{s+1} - V(x_s))

    ``discounts`` is gamma * (1 - done). No gradient flows through the results."""
    with torch.no_grad():
        ratio = torch.exp(target_logp - behaviour_logp)
        rho = torch.clamp(ratio, max=rho_bar)
        c = torch.clamp(ratio, max=c_bar)
        next_values = torch.cat([values[1:], bootstrap[None]], dim=0)
        deltas = rho * (rewards + discounts * next_values - values)
        acc = torch.zeros_like(bootstrap)
        diffs = []
        for t in range(values.shape[0] - 1, -1, -1):
            acc = deltas[t] + discounts[t] * c[t] * acc
            diffs.append(acc)
        vs = values + torch.stack(diffs[::-1])
        next_vs = torch.cat([vs[1:], bootstrap[None]], dim=0)
        advantages = rho * (rewards + discounts * next_vs - values)
    return vs, advantages


# ---- the actor ------------------------------------------------------------------------


def redis_for(cfg: ImpalaConfig) -> redis.Redis:
    return connect(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                       password=appliance_password(), socket_connect_timeout=5)


def run_actor(cfg: ImpalaConfig, actor_id: int) -> None:
    """Step ``envs_per_actor`` environments with the newest published policy and push
    each batch of unrolls with one REPLAY.ADD (waiting while the queue is full)."""
    import gymnasium as gym
    from inreplay.actors.actor import ParamUpdates

    torch.set_num_threads(1)
    keys = Keys(cfg.prefix)
    r = redis_for(cfg)
    rc = ReplayClient(connection=r)
    updates = ParamUpdates(r, keys)
    obs_dim, n_actions = env_dims(cfg.env_id)
    schema = schema_for(cfg, obs_dim, n_actions)
    model = ActorCritic(obs_dim, n_actions, cfg.hidden).eval()
    version = 0
    while version == 0:  # the learner's first parameters
        v = updates.poll(1.0)
        if v:
            blob = r.get(keys.params)
            if blob is not None:
                load_blob(model, blob)
                version = v
    seed = cfg.seed + 1000 * (actor_id + 1)
    rng = np.random.default_rng(seed)
    e, t_len = cfg.envs_per_actor, cfg.unroll
    envs = [gym.make(cfg.env_id, max_episode_steps=cfg.max_episode_steps) for _ in range(e)]
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    ep_ret = np.zeros(e)
    waited = 0.0
    while True:
        v = updates.poll(0.0)  # the newest policy for every unroll
        if v is not None and v != version:
            blob = r.get(keys.params)
            if blob is not None:
                load_blob(model, blob)
                version = v
        b_obs = np.empty((e, t_len + 1, obs_dim), np.float32)
        b_act = np.empty((e, t_len), np.int64)
        b_rew = np.empty((e, t_len), np.float32)
        b_done = np.empty((e, t_len), np.bool_)
        b_logits = np.empty((e, t_len, n_actions), np.float32)
        returns: list[str] = []
        for t in range(t_len):
            with torch.inference_mode():
                logits = model(torch.from_numpy(obs)).numpy()
            # sample from softmax(logits) with the Gumbel-max trick
            actions = np.argmax(logits - np.log(-np.log(rng.random(logits.shape))), axis=1)
            b_obs[:, t], b_act[:, t], b_logits[:, t] = obs, actions, logits
            for i, env in enumerate(envs):
                o, rew, term, trunc, _ = env.step(int(actions[i]))
                ep_ret[i] += rew
                b_rew[i, t] = step_reward(model, cfg.gamma, float(rew), o, term, trunc)
                b_done[i, t] = term or trunc
                if term or trunc:
                    returns.append(f"{time.time():.3f} {actor_id} {ep_ret[i]:g}")
                    ep_ret[i] = 0.0
                    o, _ = env.reset()
                obs[i] = o
        b_obs[:, t_len] = obs
        batch = {"obs": b_obs, "action": b_act, "reward": b_rew, "done": b_done,
                 "logits": b_logits}
        t0 = time.monotonic()
        while True:
            try:
                rc.add(cfg.table, None, batch, schema=schema, timeout=cfg.sample_timeout_s)
                break
            except RateLimited:  # the queue stayed full: the learner is behind
                continue
        waited += time.monotonic() - t0
        pipe = r.pipeline(transaction=False)
        pipe.incrby(keys.frames, e * t_len)
        pipe.incrby(keys.transitions, e)  # unrolls
        if returns:
            pipe.rpush(keys.returns, *returns)
        pipe.execute()


# ---- the learner ----------------------------------------------------------------------


def run_learner(cfg: ImpalaConfig) -> None:
    """Take ``batch_size`` unrolls from the queue (waiting while it is empty), take one
    V-trace actor-critic step, publish the parameters; forever."""
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    keys = Keys(cfg.prefix)
    r = redis_for(cfg)
    rc = ReplayClient(connection=r)
    obs_dim, n_actions = env_dims(cfg.env_id)
    schema = schema_for(cfg, obs_dim, n_actions)
    model = ActorCritic(obs_dim, n_actions, cfg.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, eps=1e-5)
    version = 0
    consumed = 0

    def publish() -> None:
        nonlocal version
        version += 1
        pipe = r.pipeline(transaction=True)
        pipe.set(keys.params, params_to_blob(model))
        pipe.set(keys.version, version)
        pipe.set(keys.samples, consumed)
        pipe.publish(keys.updates, version)
        pipe.execute()

    publish()
    while True:
        try:
            s = rc.sample(cfg.table, cfg.batch_size, schema=schema, torch=True,
                          timeout=cfg.sample_timeout_s)
        except RateLimited:  # too few unrolls in the queue yet
            continue
        b = {k: v.transpose(0, 1) for k, v in s.items.items()}  # time-major [T(+1), B, ...]
        values_all = model.value(b["obs"])  # [T+1, B]
        logits = model(b["obs"][:-1])  # [T, B, A]
        logp_all = torch.log_softmax(logits, dim=-1)
        target_logp = logp_all.gather(-1, b["action"][..., None]).squeeze(-1)
        behaviour_logp = torch.log_softmax(b["logits"], dim=-1).gather(
            -1, b["action"][..., None]).squeeze(-1)
        discounts = cfg.gamma * (~b["done"]).float()
        vs, adv = vtrace(behaviour_logp, target_logp.detach(), b["reward"], discounts,
                         values_all[:-1].detach(), values_all[-1].detach(), cfg.rho_bar,
                         cfg.c_bar)
        pg_loss = -(target_logp * adv).mean()
        baseline_loss = 0.5 * ((vs - values_all[:-1]) ** 2).mean()
        entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
        loss = pg_loss + cfg.baseline_cost * baseline_loss - cfg.entropy_cost * entropy
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        consumed += cfg.batch_size
        publish()


# ---- main: the appliance, the processes, the evaluation -----------------------------------


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, ImpalaConfig]:
    p = Parser(prog="python -m inreplay.actors.impala", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stack", choices=["auto", "kernel", "dpdk"], default="auto",
                   help="the appliance's network stack (as pyctl demo: auto, kernel, dpdk)")
    p.add_argument("--minutes", type=float, default=5.0,
                   help="wall-time budget of the whole run, evaluation included (default 5)")
    p.add_argument("--out", default="out/demo-impala", help="output directory")
    p.add_argument("--algo", choices=["impala"], default="impala",
                   help="accepted for pyctl demo --algo impala (this module is that demo)")
    p.add_argument("--role", choices=["main", "actor", "learner"], default="main",
                   help=argparse.SUPPRESS)
    p.add_argument("--actor-id", type=int, default=0, help=argparse.SUPPRESS)
    docs = field_docs(ImpalaConfig)
    for f in fields(ImpalaConfig):
        default = getattr(ImpalaConfig, f.name)
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=type(default),
                       default=default, help=f"{docs.get(f.name, '')} (default {default!r})")
    args = p.parse_args(argv)
    cfg = ImpalaConfig(**{f.name: getattr(args, f.name) for f in fields(ImpalaConfig)})
    for name in ("num_actors", "envs_per_actor", "unroll", "queue_size", "batch_size",
                 "hidden"):
        if getattr(cfg, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be >= 1")
    if cfg.batch_size > cfg.queue_size or cfg.envs_per_actor > cfg.queue_size:
        p.error("--queue-size: must hold at least --batch-size and --envs-per-actor unrolls")
    if not (cfg.lr > 0 and 0 <= cfg.gamma <= 1 and cfg.rho_bar > 0 and cfg.c_bar > 0):
        p.error("--lr, --rho-bar and --c-bar must be > 0 and --gamma within [0, 1]")
    if args.minutes <= 0:
        p.error("--minutes: must be > 0")
    return args, cfg


def child_argv(cfg: ImpalaConfig, role: str, actor_id: int = 0) -> list[str]:
    argv = [sys.executable, "-m", "inreplay.actors.impala", "--role", role, "--actor-id",
            str(actor_id)]
    for f in fields(ImpalaConfig):
        argv += ["--" + f.name.replace("_", "-"), str(getattr(cfg, f.name))]
    return argv


def evaluate(model: nn.Module, cfg: ImpalaConfig, episodes: int, seed: int,
             stop_below: float | None, deadline: float) -> list[float]:
    """Greedy episodes with the Ape-X demo's evaluation (rl.evaluate.run_episodes)."""
    from inreplay.rl.evaluate import run_episodes

    ecfg = Config(env_id=cfg.env_id, max_episode_steps=cfg.max_episode_steps)
    return run_episodes(model, ecfg, episodes, seed=seed, deadline=deadline,
                        stop_below=stop_below)


def train_and_evaluate(args: argparse.Namespace, cfg: ImpalaConfig, out: Path,
                       line: Any, children: list[Any], t0: float) -> dict[str, Any]:
    from inreplay.rl.harness import Child, DemoError

    keys = Keys(cfg.prefix)
    r = redis_for(cfg)
    rc = ReplayClient(connection=r)
    r.delete(*keys.all())
    rc.create(cfg.table, cfg.queue_size, queue=True)
    obs_dim, n_actions = env_dims(cfg.env_id)
    model = ActorCritic(obs_dim, n_actions, cfg.hidden).eval()
    children.append(Child("learner", child_argv(cfg, "learner"), out / "learner.log"))
    for i in range(cfg.num_actors):
        children.append(Child(f"actor {i}", child_argv(cfg, "actor", i), out / f"actor-{i}.log"))
    budget = args.minutes * 60.0
    deadline = t0 + budget - min(20.0, 0.1 * budget)
    evals: list[dict[str, Any]] = []
    returns: list[float] = []
    first: tuple[float, int, int] | None = None  # (time, frames, unrolls consumed)
    last_eval, evaluated, solved_at = 0.0, 0, None
    result: list[float] = []
    st: dict[str, int] = {}

    def poll() -> dict[str, int]:
        frames, unrolls, consumed, version = r.mget(keys.frames, keys.transitions,
                                                    keys.samples, keys.version)
        new = r.lrange(keys.returns, len(returns), -1)
        returns.extend(float(x.split()[2]) for x in new)
        return {"frames": int(frames or 0), "unrolls": int(unrolls or 0),
                "consumed": int(consumed or 0), "version": int(version or 0)}

    def pull() -> int:
        blob, v = r.mget(keys.params, keys.version)
        if blob is None:
            return 0
        load_blob(model, blob)
        return int(v or 0)

    def run_eval(v: int, n: int, seed: int, stop_below: float | None, kind: str) -> list[float]:
        t = time.monotonic()
        rets = evaluate(model, cfg, n, seed, stop_below, max(t + 5.0, t0 + budget))
        evals.append({"t": round(t - t0, 1), "params_version": v, "kind": kind,
                      "mean": float(np.mean(rets)) if rets else None, "episodes": len(rets),
                      "seconds": round(time.monotonic() - t, 2)})
        return rets

    while time.monotonic() < deadline:
        time.sleep(0.5)
        for c in children:
            if not c.alive():
                raise DemoError(f"{c.name} exited with status {c.proc.returncode}:\n{c.tail()}")
        st = poll()
        now = time.monotonic()
        if first is None and st["consumed"]:
            first = (now, st["frames"], st["consumed"])
        recent = returns[-100:]
        line.show(f"[{now - t0:6.1f}s] actors {st['frames']:>8} steps | learner "
                  f"{st['consumed'] // cfg.batch_size:>6} steps | params v{st['version']} | "
                  f"return(100) {np.mean(recent) if recent else float('nan'):6.1f} "
                  f"({len(returns)} episodes)")
        if now - last_eval < cfg.eval_every_s or st["version"] == evaluated:
            continue
        last_eval = now
        v = evaluated = pull()
        screen = run_eval(v, cfg.screen_episodes, 20_000 + 100 * len(evals), cfg.solve_return,
                          "screen")
        if len(screen) < cfg.screen_episodes or min(screen) < cfg.solve_return:
            continue
        full = run_eval(v, cfg.eval_episodes, 1_000_000, None, "final")
        line.say(f"[{time.monotonic() - t0:6.1f}s] parameters v{v}: {len(full)} greedy "
                 f"episodes on fresh seeds, mean return {np.mean(full):.1f}")
        if len(full) == cfg.eval_episodes and np.mean(full) >= cfg.solve_return:
            solved_at, result = time.monotonic() - t0, full
            break
    end = time.monotonic()
    for c in children:  # the actors and the learner stop before the last evaluation
        c.stop(timeout=10.0)
    children.clear()
    st = poll()  # final counts; the learner may have taken one batch it did not count
    info = rc.info(cfg.table)
    v = evaluated
    if solved_at is None:
        v = pull()
        result = run_eval(v, cfg.eval_episodes, 1_000_000, None, "final") if v else []
        line.say(f"[{time.monotonic() - t0:6.1f}s] last parameters v{v}: {len(result)} "
                 f"episodes, mean return {np.mean(result) if result else float('nan'):.1f}")
    torch.save({"model": model.state_dict(), "config": asdict(cfg), "params_version": v},
               out / "evaluated.pt")
    r.close()
    mean = float(np.mean(result)) if result else None
    span = end - first[0] if first else 0.0
    queue_keys = ("size", "capacity", "queue_size", "inserts", "samples", "sample_calls",
                  "consumed", "evictions", "blocked_samplers", "blocked_inserters",
                  "waited_seconds", "sampler", "remover", "max_times_sampled")
    return {
        "algo": "impala", "env": cfg.env_id, "stack": args.stack_used,
        "solved": bool(mean is not None and len(result) == cfg.eval_episodes
                       and mean >= cfg.solve_return),
        "solve_return": cfg.solve_return, "solved_at_s": None if solved_at is None
        else round(solved_at, 1),
        "eval_return_mean": mean, "eval_episodes": len(result), "eval_returns": result,
        "eval_params_version": v, "wall_s": None,
        "env_steps": st["frames"], "unrolls_inserted": st["unrolls"],
        "unrolls_consumed": st["consumed"], "learner_steps": st["consumed"] // cfg.batch_size,
        "learner_steps_per_s": round((st["consumed"] - first[2]) / cfg.batch_size / span, 2)
        if first and span > 0 else 0.0,
        "env_steps_per_s": round((st["frames"] - first[1]) / span, 1) if first and span > 0
        else 0.0,
        "episodes": len(returns), "return_mean_100": float(np.mean(returns[-100:]))
        if returns else None,
        "queue": {k: info.get(k) for k in queue_keys},
        "evaluations": evals,
        "machine": {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
                    "python": platform.python_version(), "torch": torch.__version__},
        "config": asdict(cfg),
    }


def netns_in_use() -> bool:
    """The Ape-X demo's namespace exists already (another demo is running)."""
    from inreplay.rl.harness import DEMO_NETNS

    from pyctl import netns

    return DEMO_NETNS in netns.namespaces()


def netns_down() -> None:
    """Remove the namespace the DPDK appliance ran in (the Ape-X demo's)."""
    from inreplay.rl.harness import DEMO_NETNS

    from pyctl import netns

    if DEMO_NETNS in netns.namespaces():
        netns.down(DEMO_NETNS)


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse(argv)
    if args.role in ("actor", "learner"):
        dump_stacks_on_signal()
    if args.role == "actor":
        run_actor(cfg, args.actor_id)
        return 0
    if args.role == "learner":
        run_learner(cfg)
        return 0
    from inreplay.rl.harness import DemoError, Line, dpdk_possible, start_appliance

    from pyctl.proc import free_port

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").unlink(missing_ok=True)
    line = Line()
    t0 = time.monotonic()
    stack = args.stack
    if stack == "auto":
        why_not = dpdk_possible()
        stack = "kernel" if why_not else "dpdk"
        if why_not:
            line.say(f"DPDK stack not possible here ({why_not}): using the kernel stack")
    if stack == "dpdk" and netns_in_use():
        # the Ape-X demo's helpers use one namespace name: never take over (or remove)
        # the namespace of another demo running on this machine
        line.say("another demo's DPDK appliance is using the namespace it runs in: using the "
                 "kernel stack")
        stack = "kernel"
    children: list[Any] = []
    server = None
    summary: dict[str, Any] | None = None
    code = 0

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        try:
            server, host, port = start_appliance(stack, free_port(), out)
        except DemoError as e:
            if stack == "kernel":
                raise
            line.say(f"the dpdk stack did not start ({str(e).splitlines()[0]}); using the "
                     f"kernel stack")
            netns_down()
            stack = "kernel"
            server, host, port = start_appliance(stack, free_port(), out)
        args.stack_used = stack
        line.say(f"inreplay appliance: {stack} stack on {host}:{port}; IMPALA with "
                 f"{cfg.num_actors} actors x {cfg.envs_per_actor} environments, unrolls of "
                 f"{cfg.unroll}, batches of {cfg.batch_size}, QUEUE {cfg.queue_size}")
        cfg = replace(cfg, host=host, port=port)
        summary = train_and_evaluate(args, cfg, out, line, children, t0)
    except KeyboardInterrupt:
        line.say("interrupted: stopping every process")
        code = 130
    except DemoError as e:
        line.say(f"impala: {e}")
        code = 1
    except redis.RedisError as e:
        line.say(f"impala: the appliance stopped answering ({e}); see {out}/inreplay-{stack}.log")
        code = 1
    finally:
        signal.signal(signal.SIGTERM, old)
        for c in children:
            c.stop(timeout=10.0)
        if server is not None:
            server.stop(timeout=15.0)
        if stack == "dpdk":
            netns_down()
    if summary is None:
        return code
    summary["wall_s"] = round(time.monotonic() - t0, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    q = summary["queue"]
    print(f"\n{summary['env']} on the {stack} stack: evaluation "
          f"{summary['eval_return_mean'] or float('nan'):.1f} over {summary['eval_episodes']} "
          f"episodes after {summary['learner_steps']} learner steps "
          f"({summary['learner_steps_per_s']:.1f}/s) and {summary['env_steps']} env steps in "
          f"{summary['wall_s']:.0f} s; queue: {q['inserts']:.0f} unrolls in, "
          f"{q['consumed']:.0f} consumed, actors waited {q['waited_seconds']:.1f} s; wrote "
          f"{out}/summary.json")
    print(f"solved: {'true' if summary['solved'] else 'false'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
