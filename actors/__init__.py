"""Ape-X actors for the inreplay appliance: environments, network, codec, n-step, actor loop."""
