"""One configuration for actors, learner and demo: a dataclass, CleanRL style.

Every field has a docstring; :func:`add_arguments` turns the fields into
``--kebab-case`` flags whose help is that docstring, so the flags, the help and
the defaults cannot drift apart. Defaults are Ape-X's (Horgan et al. 2018) where
they apply; :data:`PRESETS` holds the CartPole-tuned values the demo uses, applied
by :func:`preset` before any flag given on the command line.

    cfg = preset("CartPole-v1")                 # Config with the CartPole overrides
    p = argparse.ArgumentParser(); add_arguments(p)
    cfg = from_args(p.parse_args())             # preset for --env-id, then the flags
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import faulthandler
import inspect
import itertools
import json
import os
import secrets
import signal
import sys
import textwrap
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pyctl.cli import Parser
from pyctl.config import parse_size

__all__ = ["PASSWORD_ENV", "Config", "Keys", "Parser", "add_arguments", "appliance_password",
           "fail", "from_args", "net_reason", "new_run_password", "preset"]

PASSWORD_ENV = "INREPLAY_REQUIREPASS"
"""The appliance's password: pyctl start reads it from here, and the processes a demo or
the Ray job starts get it here (as a notebook server hands out its token)."""
_run_password: str | None = None


def new_run_password() -> str:
    """The password of the appliance this process starts, made once (random): a DPDK port
    has no loopback, so without one protected mode would refuse every client."""
    global _run_password
    if _run_password is None:
        _run_password = secrets.token_hex(16)
    return _run_password


def appliance_password() -> str | None:
    """What this process's clients authenticate with: the password it made for the
    appliance it started, else $INREPLAY_REQUIREPASS; None: the appliance has none."""
    return _run_password or os.environ.get(PASSWORD_ENV) or None


@dataclass
class Config:
    """Ape-X DQN with an in-network replay appliance (defaults: Ape-X on Atari)."""

    # ---- environment ---------------------------------------------------------
    env_id: str = "ALE/Breakout-v5"
    """Gymnasium id: CartPole-v1 or an Atari game through ale-py (ALE/Breakout-v5, ...)."""
    seed: int = 0
    """Base seed: actor i seeds its environment with seed + 1000 * (i + 1)."""
    frame_skip: int = 4
    """Atari: agent steps repeat the action this many frames, max-pooling the last two."""
    frame_stack: int = 4
    """Atari: frames stacked into one observation."""
    noop_max: int = 30
    """Atari: at most this many no-op actions after each reset."""
    sticky_actions: float = 0.0
    """Atari: repeat_action_probability (Ape-X used 0; the ALE v5 default is 0.25)."""
    episodic_life: bool = True
    """Atari: a lost life ends the n-step return (terminal for learning), not the game."""
    clip_rewards: bool = True
    """Learn from sign(reward) (DQN's reward clipping); returns are reported unclipped."""
    max_episode_steps: int = 27_000
    """Agent steps after which an episode is truncated (Atari: 108K frames = 27K steps)."""

    # ---- network -------------------------------------------------------------
    hidden: int = 128
    """Width of the MLP torso and of each dueling stream for vector observations."""

    # ---- appliance / transport -----------------------------------------------
    replay: str = "appliance"
    """Where prioritized replay lives: "appliance" (REPLAY.* tables in inreplay) or
    "local" (the baseline: experience is RPUSHed to a stock redis-server, the learner
    pops it and keeps the sum tree and the items itself)."""
    host: str = "127.0.0.1"
    """Host of the appliance (or of the stock redis-server with --replay local)."""
    port: int = 6379
    """Port of the appliance (or of the stock redis-server with --replay local)."""
    table: str = "replay"
    """Replay table name (REPLAY.CREATE / ADD / SAMPLE / UPDATE)."""
    prefix: str = "apex"
    """Prefix of the keys the processes share: <prefix>:params, <prefix>:params:version,
    <prefix>:frames, <prefix>:transitions, <prefix>:returns, <prefix>:learner:samples,
    <prefix>:stop and, with --replay local, <prefix>:experience; and of the pub/sub
    channel <prefix>:params:updates on which the learner announces each new version."""

    # ---- actors --------------------------------------------------------------
    num_actors: int = 2
    """Actor processes; actor i of N explores with
    eps_i = eps_base ** (1 + eps_alpha * i / (N - 1))."""
    eps_base: float = 0.4
    """Base of the Ape-X epsilon ladder."""
    eps_alpha: float = 7.0
    """Exponent range of the Ape-X epsilon ladder."""
    actor_batch: int = 50
    """Transitions an actor collects before one REPLAY.ADD (Ape-X: 50 steps)."""
    samples_per_insert: float = 0.0
    """If > 0, the replay keeps sampled items per inserted item at this rate: the table's
    rate limiter (Reverb's SampleToInsertRatio, enforced by the appliance) makes actors
    wait when they run ahead and the learner when it does. 0 lets both run free, as in
    Ape-X. (--replay local has no limiter in stock Redis: its actors throttle themselves.)"""
    error_buffer: float = 0.0
    """How far sampled items may drift from samples_per_insert x inserted ones before a
    side waits; 0 takes Acme's default: a tenth of learning_starts x samples_per_insert (at
    least max(1, samples_per_insert))."""
    params_wait_s: float = 120.0
    """How long an actor waits for the learner's first parameters before giving up."""

    # ---- replay --------------------------------------------------------------
    capacity: int = 2_000_000
    """Replay capacity in transitions (FIFO eviction)."""
    replay_maxbytes: int = 6 << 30
    """Arena bytes of the replay table (items beyond it evict the oldest first); the flag
    takes units as Redis reads them: 64mb, 6gb. Atari: capacity x 3 KB, zstd-compressed
    transitions of ten games measured 0.4-2.5 KB (bench/compress.py; raw they are 49 KB);
    the Breakout preset needs less."""
    frames_once: bool = True
    """Stacked frames (Atari) on the appliance with one replay server: each frame is stored
    once in an episode stream and each transition is an item referencing its frames
    (a TRAJECTORY table, rl.frames: about 0.1 KB per Breakout transition); false (or
    a replay group of several shards) stores zstd-compressed records of 7 frames each
    (rl.codec: about 0.6 KB)."""
    alpha: float = 0.6
    """Priority exponent: P(i) ~ (|delta_i| + priority_eps) ** alpha."""
    beta: float = 0.4
    """Importance-sampling exponent (Ape-X keeps it fixed)."""
    priority_eps: float = 1e-6
    """Added to |delta| before the exponent, so no transition has probability 0."""

    # ---- learner -------------------------------------------------------------
    n_step: int = 3
    """n of the n-step returns."""
    gamma: float = 0.99
    """Discount factor."""
    batch_size: int = 512
    """Transitions per learner step (one REPLAY.SAMPLE)."""
    lr: float = 6.25e-5
    """Adam learning rate (Ape-X used centred RMSProp 0.00025 / 4)."""
    adam_eps: float = 1.5e-4
    """Adam epsilon."""
    grad_clip: float = 40.0
    """Gradient norm clipping (Ape-X: 40)."""
    target_update: int = 2500
    """Learner steps between target-network syncs (Ape-X: 2500)."""
    publish_every: int = 50
    """Learner steps between parameter publications (one MULTI: SET blob, SET version,
    PUBLISH version; EXEC)."""
    learning_starts: int = 50_000
    """Transitions in replay before the learner starts (Ape-X: 50K): the table's MIN_SIZE,
    so the learner's first sample waits in the appliance until they are there."""
    prefetch: int = 2
    """Sampled batches kept in flight by the learner's background sampling thread."""
    max_learner_steps: int = 0
    """Stop the learner after this many steps; 0 means run until stopped."""
    device: str = "auto"
    """Torch device of the learner: auto (CUDA if available, else CPU), cpu, cuda, cuda:1."""
    torch_threads: int = 1
    """Intra-op threads per process (1: actors, learner and server share few cores)."""

    # ---- metrics, checkpoints, evaluation -------------------------------------
    out_dir: str = "out/apex"
    """Where metrics.csv, checkpoint.pt and the demo's summary.json and returns.png go."""
    log_every_s: float = 5.0
    """Seconds between metric rows (CSV, TensorBoard if installed, progress line)."""
    checkpoint_every: int = 10_000
    """Learner steps between checkpoints (also written when the learner stops)."""
    eval_episodes: int = 20
    """Greedy episodes of the final evaluation."""
    eval_epsilon: float = 0.05
    """Epsilon during evaluation: 0 (greedy) for control tasks; 0.05 for Atari as in
    Nature DQN's protocol (a greedy Breakout agent that never presses FIRE never ends)."""
    eval_every_s: float = 30.0
    """Demo: seconds between periodic evaluations of newly published parameters."""
    screen_episodes: int = 3
    """Demo: episodes of a periodic evaluation; all must reach solve_return before the
    full eval_episodes evaluation of the same parameters is run (0: no periodic eval)."""
    eval_max_s: float = 60.0
    """Demo: wall-time budget of one evaluation; fewer episodes are reported if exceeded."""
    solve_return: float = 0.0
    """Mean greedy return that counts as solved and stops the demo early; 0 means the
    environment's reward_threshold (CartPole-v1: 475), if it has one."""

    # ---- derived ---------------------------------------------------------------
    def limiter(self) -> dict[str, Any]:
        """The replay table's rate limiter (ReplayClient.create's arguments): MIN_SIZE is
        learning_starts; with samples_per_insert, the ratio and its error buffer."""
        out: dict[str, Any] = {"min_size": max(1, min(self.learning_starts, self.capacity))}
        if self.samples_per_insert > 0:
            rate = self.samples_per_insert
            buffer = self.error_buffer or 0.1 * self.learning_starts * rate
            out.update(samples_per_insert=rate, error_buffer=max(1.0, rate, buffer))
        return out

    @property
    def is_atari(self) -> bool:
        return is_atari(self.env_id)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Config:
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown config keys: {sorted(unknown)}")
        return cls(**d)

    @classmethod
    def load(cls, path: str | Path) -> Config:
        """A saved configuration; ValueError (one line, naming the file) if unusable."""
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except OSError as e:
            raise ValueError(f"--config {path}: {e.strerror or e}") from None
        except (ValueError, TypeError) as e:
            raise ValueError(f"--config {path}: {e}") from None

    def validate(self) -> None:
        for f in fields(self):
            want = type(getattr(Config, f.name))
            v = getattr(self, f.name)
            if not isinstance(v, want) and not (want is float and type(v) is int):
                raise ValueError(f"{f.name} must be {want.__name__}, not {v!r}")
        if self.replay not in ("appliance", "local"):
            raise ValueError(f"--replay must be appliance or local, not {self.replay!r}")
        for name in ("num_actors", "n_step", "batch_size", "actor_batch", "capacity",
                     "target_update", "publish_every", "frame_stack", "frame_skip", "hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError("--gamma must be in (0, 1]")


def is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/") or "NoFrameskip" in env_id


# Overrides of the Ape-X (Atari) defaults. "control" applies to every environment with
# vector observations; then every key contained in the env id (e.g. "CartPole"). The
# CartPole values are tuned so that `pyctl demo` solves CartPole-v1 on two shared CPU
# cores within a few minutes.
PRESETS: dict[str, dict[str, Any]] = {
    "control": {
        "clip_rewards": False,
        "episodic_life": False,
        "max_episode_steps": 500,
        "frame_skip": 1,
        "eval_epsilon": 0.0,
        "capacity": 100_000,
        "replay_maxbytes": 64 << 20,
        "batch_size": 128,
        "lr": 1e-3,
        "adam_eps": 1e-8,
        "grad_clip": 10.0,
        "target_update": 500,
        "publish_every": 20,
        "learning_starts": 1_000,
        "checkpoint_every": 2_000,
        "log_every_s": 2.0,
        "eval_every_s": 5.0,
    },
    # bench/compress.py: 0.5-0.7 KB per compressed Breakout transition; 2M x 1 KB
    "Breakout": {
        "replay_maxbytes": 2 << 30,
    },
    "CartPole": {
        "hidden": 128,
        "num_actors": 2,
        "actor_batch": 32,
        "samples_per_insert": 8.0,
        "screen_episodes": 3,
    },
}


def preset(env_id: str, **overrides: Any) -> Config:
    """Config for ``env_id``: the defaults, the matching presets, then ``overrides``."""
    values: dict[str, Any] = {}
    if not is_atari(env_id):
        values.update(PRESETS["control"])
    for key, vals in PRESETS.items():
        if key != "control" and key in env_id:
            values.update(vals)
    values.update(overrides)
    values["env_id"] = env_id
    return Config(**values)


# ---- command line ------------------------------------------------------------------


@cache
def field_docs(cls: type = Config) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the string literal after each field)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    out: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            out[node.target.id] = " ".join(nxt.value.value.split())
    return out


SIZE_FIELDS = ("replay_maxbytes",)
"""Fields in bytes: their flags take units as Redis reads them (64mb, 4gb)."""


def _size(text: str) -> int:
    try:
        v = parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return v


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


ACTOR_ONLY = ("num_actors", "eps_base", "eps_alpha", "actor_batch", "params_wait_s")
"""Fields only the actors read."""
LEARNER_ONLY = ("capacity", "replay_maxbytes", "alpha", "beta", "priority_eps", "error_buffer",
                "batch_size",
                "lr", "adam_eps", "grad_clip", "target_update", "publish_every", "prefetch",
                "max_learner_steps", "device", "checkpoint_every", "log_every_s")
"""Fields only the learner reads (the table's options: it creates the table)."""
DEMO_ONLY = ("eval_episodes", "eval_epsilon", "eval_every_s", "screen_episodes", "eval_max_s",
             "solve_return")
"""Fields only `pyctl demo` (and learner.evaluate) read."""
ROLE_SKIP = {"actor": (*LEARNER_ONLY, *DEMO_ONLY, "out_dir"),
             "learner": (*ACTOR_ONLY, *DEMO_ONLY), "all": ()}
"""The flags a program does not show: each --help lists only what that program reads
(a --config file still carries every field)."""


def add_arguments(parser: argparse.ArgumentParser, skip: tuple[str, ...] = (),
                  role: str = "all") -> None:
    """One --flag per Config field the program (role: actor, learner or all) reads
    (help = its docstring); unset flags stay unset."""
    docs = field_docs(Config)
    defaults = Config()
    skip = (*skip, *ROLE_SKIP[role])
    group = parser.add_argument_group("configuration (defaults: Ape-X; CartPole: tuned preset)")
    group.add_argument("--config", metavar="FILE.json", default=argparse.SUPPRESS,
                       help="start from a saved configuration instead of the preset")
    for f in fields(Config):
        if f.name in skip:
            continue
        default = getattr(defaults, f.name)
        kind = type(default)
        conv: Any = _bool if kind is bool else _size if f.name in SIZE_FIELDS else kind
        flag = "--" + f.name.replace("_", "-")
        aliases = [flag]
        if f.name == "env_id":
            aliases.append("--env")
        group.add_argument(*aliases, dest=f.name, type=conv, default=argparse.SUPPRESS,
                           metavar=kind.__name__.upper(),
                           help=f"{docs.get(f.name, '')} (default {default!r})")


def from_args(ns: argparse.Namespace, **fallback: Any) -> Config:
    """Config from parsed flags: --config file or preset(--env-id), then the given flags.

    ``fallback`` supplies values used when neither the file nor a flag sets them.
    """
    given = {f.name: getattr(ns, f.name) for f in fields(Config) if hasattr(ns, f.name)}
    path = getattr(ns, "config", None)
    if path:
        base = dataclasses.asdict(Config.load(path))
        base.update(given)
        cfg = Config.from_dict(base)
    else:
        env_id = given.pop("env_id", fallback.pop("env_id", Config.env_id))
        merged = {**fallback, **given}
        cfg = preset(env_id, **merged)
    cfg.validate()
    return cfg


STACKS_SIGNAL = signal.SIGUSR1
"""The signal on which a demo's child processes (learners, actors) write every thread's
Python stack to stderr, their log: a demo sends it to a child that has not exited
within --stop-timeout of SIGTERM, before killing it, so the log says where it hung."""


def dump_stacks_on_signal() -> None:
    """Have :data:`STACKS_SIGNAL` dump every thread's stack to stderr (faulthandler: a
    C-level handler, so it works while the main thread is stuck in a call or holding the
    GIL, when no Python signal handler can run)."""
    faulthandler.register(STACKS_SIGNAL, all_threads=True)


def fail(prog: str, msg: str, code: int = 1) -> int:
    """Print a program's one-line error; returns the exit status for main() to return."""
    print(f"{prog}: {msg}", file=sys.stderr, flush=True)
    return code


def net_reason(e: BaseException) -> str:
    """The cause of a redis-py connection error, from the socket error it wraps (its
    errno's text: 'connection refused'), not from its message's wording."""
    cause = e.__cause__ or e.__context__
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OSError) and cause.errno:
        text = os.strerror(cause.errno)
    elif isinstance(cause, OSError) and str(cause):
        text = str(cause)
    else:
        return type(e).__name__ if not str(e) else str(e).splitlines()[0]
    return text[:1].lower() + text[1:]


class Keys:
    """Names of the shared keys (see Config.prefix) and of the parameter channel."""

    def __init__(self, prefix: str) -> None:
        self.params = f"{prefix}:params"
        self.version = f"{prefix}:params:version"
        self.frames = f"{prefix}:frames"
        self.transitions = f"{prefix}:transitions"
        self.returns = f"{prefix}:returns"
        self.samples = f"{prefix}:learner:samples"
        self.stop = f"{prefix}:stop"
        self.experience = f"{prefix}:experience"

    @property
    def updates(self) -> str:
        """The pub/sub channel (not a key) on which the learner PUBLISHes each new
        parameter version, in the MULTI/EXEC that SETs the blob and the version."""
        return self.params + ":updates"

    def all(self) -> list[str]:
        """Every key (not the channel)."""
        return list(vars(self).values())


_D = TypeVar("_D")


def child_role(argv: list[str] | None) -> str | None:
    """The hidden ``--role`` a demo gives the processes it starts (None: not given), read
    before the whole command line is parsed: an entry point that is both an actor and
    its demo's command hands the demo's flags and ``--help`` to the demo."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--role", default=None)
    known, _ = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    return known.role


@dataclass
class DemoSettings:
    """What the demos whose whole configuration is one dataclass (IMPALA, A3C) share: the
    environment, the appliance's address and the solve rule (rl.harness.SolveRule)."""

    env_id: str = "CartPole-v1"
    """Gymnasium id of a vector-observation, discrete-action environment."""
    seed: int = 1
    """Base seed: of the initial parameters, and process i seeds its environments from
    seed + 1000 * (i + 1)."""
    max_episode_steps: int = 500
    """Episodes are truncated after this many steps (CartPole-v1's own limit)."""
    host: str = "127.0.0.1"
    """Host of the appliance (set by the demo)."""
    port: int = 6379
    """Port of the appliance (set by the demo)."""
    eval_episodes: int = 20
    """Episodes on fresh seeds that decide solved (their mean against the solve return)."""
    screen_episodes: int = 3
    """Greedy episodes that must all reach the solve return before the full evaluation."""
    eval_every_s: float = 5.0
    """Seconds between screens of the newest parameters."""
    solve_return: float = 475.0
    """Mean evaluation return that counts as solved (CartPole-v1's reward threshold)."""

    def env_config(self) -> Config:
        """The environment as the shared evaluation (rl.evaluate) takes it."""
        return Config(env_id=self.env_id, max_episode_steps=self.max_episode_steps)


def add_dataclass_flags(p: argparse.ArgumentParser, cls: type) -> None:
    """One --kebab-case flag per field of the dataclass cls, its docstring as help: the
    flags of a demo whose whole configuration is one dataclass (IMPALA, A3C)."""
    docs = {k: v for base in reversed(cls.__mro__) if dataclasses.is_dataclass(base)
            for k, v in field_docs(base).items()}
    for f in dataclasses.fields(cls):
        default = getattr(cls, f.name)
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=type(default),
                       default=default, help=f"{docs.get(f.name, '')} (default {default!r})")


def dataclass_from_args(args: argparse.Namespace, cls: type[_D]) -> _D:
    """The dataclass cls from the flags add_dataclass_flags made."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def dataclass_argv(cfg: Any) -> list[str]:
    """The flags that give cfg back (a child process's command line)."""
    argv: list[str] = []
    for f in dataclasses.fields(cfg):
        argv += ["--" + f.name.replace("_", "-"), str(getattr(cfg, f.name))]
    return argv
