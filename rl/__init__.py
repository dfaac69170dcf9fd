"""Shared RL pieces that actors/ and learner/ both import (and that import neither)."""
