"""inreplay control plane: start, configure and query the replay appliance."""

__version__ = "0.1.0"
