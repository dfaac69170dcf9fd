"""IMPALA's learner: ``batch_size`` unrolls from the QUEUE table per step, V-trace targets
(Espeholt et al. 2018, rho_bar = c_bar = 1), one actor-critic step, the parameters
published as the Ape-X learner publishes them. Started by the IMPALA demo
(actors.impala_demo) as ``python -m inreplay.learner.impala --role learner ...``."""

from __future__ import annotations

import sys

import torch
from inreplay.rl.config import Keys, dump_stacks_on_signal
from inreplay.rl.impala import ImpalaConfig, parse, redis_for, schema_for
from inreplay.rl.model import params_to_blob
from inreplay.rl.networks import ActorCritic, env_dims
from torch import nn

from pyctl.client import RateLimited, ReplayClient


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


def main(argv: list[str] | None = None) -> int:
    _, cfg = parse(argv, __doc__)
    dump_stacks_on_signal()
    run_learner(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
