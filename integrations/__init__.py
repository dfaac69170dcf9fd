"""inreplay where RL code already lives: backends for TorchRL (and, later, RLlib)."""
