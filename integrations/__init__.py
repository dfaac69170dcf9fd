"""Backends that let other RL libraries keep their replay on inreplay: TorchRL and RLlib."""
