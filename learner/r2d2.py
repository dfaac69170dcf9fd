"""R2D2's learner (Kapturowski et al. 2019): samples 64 sequences from the prioritized
table, burns in the LSTM from the stored state, n-step double-Q targets under R2D2's
value rescaling h(x) (:func:`value_rescale`), importance-weighted loss, mixed
priorities back (:func:`mixed_priority`), parameters published as the Ape-X learner
publishes them. Started by the R2D2 demo as ``python -m inreplay.learner.r2d2``.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from inreplay.rl.config import appliance_password
from inreplay.rl.networks import RecurrentQNet
from inreplay.rl.r2d2 import (
    FLAG_DONE,
    FLAG_MASK,
    FLAG_VALID,
    SAMPLE_WAIT_S,
    R2D2Config,
    as_child,
    build_net,
    keys_of,
    limiter_error_buffer,
    limiter_holds,
    parse,
    sequence_schema,
)
from torch import nn


def sequences_from_columns(cols: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """A TRAJECTORY sample's columns (:class:`SequenceStreamWriter`'s items) as the
    tensors of :func:`sequence_schema` (what a packed sample gives): int64 actions,
    float32 done / mask / valid from the flag bits, h0 and c0 of shape (n, hidden)."""
    f = cols["flags"]
    state = cols["state"]  # (n, 1, 2, hidden)
    out = {"obs": cols["obs"], "prev_action": cols["prev_action"].astype(np.int64),
           "action": cols["action"].astype(np.int64), "reward": cols["reward"],
           "done": ((f & FLAG_DONE) != 0).astype(np.float32),
           "mask": ((f & FLAG_MASK) != 0).astype(np.float32),
           "valid": ((f & FLAG_VALID) != 0).astype(np.float32),
           "h0": np.ascontiguousarray(state[:, 0, 0]), "c0": np.ascontiguousarray(state[:, 0, 1])}
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (Pohlen et al. 2018, used by R2D2)."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def inverse_value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1)."""
    z = (torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(x) * (z * z - 1.0)


def nstep_targets(reward: torch.Tensor, done: torch.Tensor, mask: torch.Tensor,
                  valid: torch.Tensor, n: int, gamma: float,
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every step t of (B, T) sequences: the discounted reward sum over up to n
    steps t..t+k-1 (stopping at a termination, at padding, or where the next observation
    is not in the sequence), the bootstrap index t + k, its discount gamma^k (0 after a
    termination), and whether t has a target at all (an acting step with k >= 1)."""
    B, T = reward.shape  # noqa: N806 - batch and time, as in the paper
    pad = n + 1

    def shifted(x: torch.Tensor, i: int) -> torch.Tensor:
        return nn.functional.pad(x, (0, pad))[:, i:i + T]

    ret = torch.zeros(B, T)
    disc = torch.ones(B, T)
    k = torch.zeros(B, T, dtype=torch.int64)
    terminated = torch.zeros(B, T)
    active = torch.ones(B, T)
    for i in range(n):
        d = shifted(done, i)
        take = active * shifted(mask, i) * torch.maximum(d, shifted(valid, i + 1))
        ret = ret + take * disc * shifted(reward, i)
        disc = torch.where(take > 0, disc * gamma, disc)
        k = k + take.long()
        terminated = torch.maximum(terminated, take * d)
        active = take * (1.0 - d)
    has_target = mask * (k > 0).float()
    boot_idx = (torch.arange(T)[None] + k).clamp(max=T - 1)
    return ret, boot_idx, disc * (1.0 - terminated), has_target


def sequence_td(net: RecurrentQNet, target_net: RecurrentQNet, batch: dict[str, torch.Tensor],
                cfg: R2D2Config) -> tuple[torch.Tensor, torch.Tensor]:
    """TD errors (B, T) and their loss mask (B, T). Both networks start from the stored
    state (h0, c0); targets are n-step double-Q,
    h(R + gamma^k h^-1(Q_target(s_{t+k}, argmax_a Q(s_{t+k}, a)))), and the TD error is
    taken against Q on the h-scale.

    Burn-in where the stored state can be stale: a sequence that starts later in its
    episode runs its first burn_in steps without gradient (R2D2's burn-in) and is trained
    on the rest (mask 0 before). A sequence that starts its episode carries the initial
    state itself (all zeros: nothing to be stale), so it is trained from its first step.
    Without that, with 80/40/40 every episode shorter than 40 steps (every early CartPole
    episode) would have no step to learn from."""
    b = cfg.burn_in
    obs, prev = batch["obs"], batch["prev_action"]
    h0, c0 = batch["h0"], batch["c0"]
    with torch.no_grad():
        q_target, _ = target_net(obs, prev, (h0, c0))
    B, T = obs.shape[:2]  # noqa: N806 - batch and time, as in the paper
    starts = (h0 == 0).all(1) & (c0 == 0).all(1) if b else torch.ones(B, dtype=torch.bool)
    later = ~starts
    q = torch.zeros(B, T, q_target.shape[-1])
    if starts.any():
        q[starts], _ = net(obs[starts], prev[starts], (h0[starts], c0[starts]))
    if later.any():
        with torch.no_grad():
            _, state = net(obs[later, :b], prev[later, :b], (h0[later], c0[later]))
        q[later, b:], _ = net(obs[later, b:], prev[later, b:], state)
    trained = torch.ones(B, T)
    trained[later, :b] = 0.0
    ret, boot_idx, boot_disc, has_target = nstep_targets(
        batch["reward"], batch["done"], batch["mask"] * trained, batch["valid"], cfg.n_step,
        cfg.gamma)
    with torch.no_grad():
        q_boot_online = q.detach().gather(1, boot_idx[..., None].expand(-1, -1, q.shape[-1]))
        a_star = q_boot_online.argmax(-1, keepdim=True)
        q_boot_target = q_target.gather(
            1, boot_idx[..., None].expand(-1, -1, q.shape[-1])).gather(2, a_star).squeeze(-1)
        y = value_rescale(ret + boot_disc * inverse_value_rescale(q_boot_target, cfg.rescale_eps),
                          cfg.rescale_eps)
    q_taken = q.gather(2, batch["action"][..., None]).squeeze(-1)
    return (y - q_taken) * has_target, has_target


def mixed_priority(td: torch.Tensor, mask: torch.Tensor, eta: float = 0.9) -> torch.Tensor:
    """R2D2's sequence priority eta max_t |delta_t| + (1 - eta) mean_t |delta_t| over the
    steps with a target (mask 1); 0 for a sequence without any."""
    a = td.abs() * mask
    n = mask.sum(1)
    mean = a.sum(1) / n.clamp(min=1.0)
    return torch.where(n > 0, eta * a.max(1).values + (1.0 - eta) * mean, torch.zeros_like(n))


def publish(r: Any, keys: Any, net: nn.Module, version: int, samples: int) -> int:
    """The parameters as the next version, in one MULTI/EXEC as the Ape-X learner does:
    blob, version and sample counter SET and the version PUBLISHed (actors.actor reads it)."""
    from inreplay.rl.model import params_to_blob

    pipe = r.pipeline(transaction=True)
    pipe.set(keys.params, params_to_blob(net))
    pipe.set(keys.version, version + 1)
    pipe.set(keys.samples, samples)
    pipe.publish(keys.updates, version + 1)
    pipe.execute()
    return version + 1


def run_learner(cfg: R2D2Config, stop: threading.Event) -> None:
    """Create the table, then: sample 64 sequences, burn in, n-step double-Q loss under h
    weighted by importance, Adam, mixed priorities back (REPLAY.UPDATE), target sync every
    target_update steps, publish every publish_every steps."""
    import copy

    import redis

    from pyctl.client import RateLimited, ReplayClient, connect
    from pyctl.errors import replay_error
    from pyctl.trajectory import create_trajectory_table, sample_trajectories

    keys = keys_of(cfg)
    r = connect(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                password=appliance_password())
    rc = ReplayClient(cfg.host, cfg.port, protocol=2, socket_timeout=60,
                      password=appliance_password())
    torch.manual_seed(cfg.seed)
    net = build_net(cfg)
    target_net = copy.deepcopy(net).eval()
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
    schema = sequence_schema(cfg, net.torso[0].in_features - net.n_actions)
    spi = cfg.samples_per_insert
    packed = cfg.storage == "packed"
    if packed:
        rc.create(cfg.table, cfg.capacity, alpha=cfg.priority_exponent,
                  beta=cfg.importance_exponent, min_size=cfg.min_replay,
                  **({"samples_per_insert": spi, "error_buffer": limiter_error_buffer(cfg)}
                     if spi > 0 else {}))
    else:  # the ratio is kept by the clients: see limiter_holds
        create_trajectory_table(rc, cfg.table, cfg.capacity, alpha=cfg.priority_exponent,
                                beta=cfg.importance_exponent, min_size=cfg.min_replay)
    version = publish(r, keys, net, 0, 0)
    steps, samples, t_log = 0, 0, time.monotonic()
    losses: list[float] = []
    out = Path(cfg.out_dir)
    metrics = open(out / "r2d2-metrics.csv", "w")  # closed below
    metrics.write("wall_s,learner_steps,loss,q_mean,replay_size\n")
    t0 = time.monotonic()
    while not stop.is_set():
        try:
            if packed:
                s = rc.sample(cfg.table, cfg.batch_size, schema=schema, torch=True,
                              timeout=SAMPLE_WAIT_S)
                ids, weights, batch = s.ids, s.weights, s.items
            else:
                if limiter_holds(rc.info(cfg.table), cfg, insert=False):
                    if r.exists(keys.stop):
                        break
                    time.sleep(0.01)
                    continue
                try:
                    ts = sample_trajectories(rc, cfg.table, cfg.batch_size,
                                             timeout=SAMPLE_WAIT_S)
                except redis.ResponseError as e:
                    raise replay_error(e) from None
                ids, weights = ts.ids, torch.from_numpy(ts.weights)
                batch = sequences_from_columns(ts.columns)
        except RateLimited:
            if r.exists(keys.stop):
                break
            continue
        td, mask = sequence_td(net, target_net, batch, cfg)
        w = weights[:, None]
        loss = (w * 0.5 * td.pow(2)).sum() / mask.sum().clamp(min=1.0)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        opt.step()
        rc.update(cfg.table, ids, mixed_priority(td.detach(), mask, cfg.priority_eta).numpy())
        steps += 1
        samples += cfg.batch_size
        losses.append(float(loss))
        if steps % cfg.target_update == 0:
            target_net.load_state_dict(net.state_dict())
        if steps % cfg.publish_every == 0:
            version = publish(r, keys, net, version, samples)
        now = time.monotonic()
        if now - t_log >= 5.0:
            size = int(rc.info(cfg.table)["size"])
            print(f"learner: {steps} steps, loss {np.mean(losses):.4f}, replay {size} "
                  f"sequences, params v{version}", flush=True)
            metrics.write(f"{now - t0:.1f},{steps},{np.mean(losses):.5f},,{size}\n")
            metrics.flush()
            losses.clear()
            t_log = now
    publish(r, keys, net, version, samples)
    torch.save({"model": net.state_dict(), "config": asdict(cfg), "learner_steps": steps},
               out / "checkpoint.pt")
    metrics.close()
    print(f"learner: stopped after {steps} steps", flush=True)
    rc.close()
    r.close()


def main(argv: list[str] | None = None) -> int:
    _, cfg = parse(argv, __doc__)
    stop = threading.Event()
    as_child(stop)
    run_learner(cfg, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
