"""IMPALA's actor (Espeholt et al. 2018), and the entry point of IMPALA's demo.

    python -m inreplay.actors.impala [--out DIR] [--minutes M] [--stack auto|kernel|dpdk]
                                     [--FLAG V ...]

runs the demo (actors.impala_demo; ``pyctl demo --algo impala`` too). With ``--role
actor`` (the demo starts its actors so) this module is an actor: it steps
``envs_per_actor`` environments with the newest published policy and pushes unrolls
of ``unroll`` steps (obs, actions, rewards, dones, behaviour logits and the bootstrap
obs) into the demo's FIFO ``QUEUE`` table, waiting while it is full.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from inreplay.rl.config import Keys, child_role, dump_stacks_on_signal
from inreplay.rl.impala import ImpalaConfig, parse, redis_for, schema_for
from inreplay.rl.model import load_blob
from inreplay.rl.networks import ActorCritic, env_dims, step_reward

from pyctl.client import RateLimited, ReplayClient


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


def main(argv: list[str] | None = None) -> int:
    """An actor (``--role actor``, started by the demo), else the demo itself."""
    if child_role(argv) != "actor":
        from inreplay.actors import impala_demo

        return impala_demo.main(argv)
    args, cfg = parse(argv, __doc__)
    dump_stacks_on_signal()
    run_actor(cfg, args.actor_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
