"""Backends that let other RL libraries keep their replay on inreplay: TorchRL, RLlib,
Stable-Baselines3, JAX code and Reverb's client API."""
