"""The run configuration: a dataclass schema, read from YAML or TOML, checked before anything runs.

A config file has five sections (every key optional except where a default cannot be guessed)::

    name: ms_cub_bninception
    data:  {dataset: cub, crop: 227, resize: 256, ...}
    model: {backbone: bn_inception, pretrained: default, dim: 512, pooling: max, freeze_bn: true}
    loss:  {name: multi_similarity, params: {alpha: 2, beta: 40, margin: 0.5, epsilon: 0.1}}
    optim: {name: adam, lr: 3.0e-5, weight_decay: 5.0e-4, milestones: [1200, 2400], gamma: 0.1}
    train: {iterations: 3000, batch_size: 80, k: 5, bf16: true, ...}

:func:`load_config` reads a file (:mod:`dmlbook.engine.config_file`: UTF-8 YAML or TOML; no
alias, repeated key or deep nesting), applies ``--set section.key=value`` overrides and returns a
:class:`Config`. Unknown keys fail with the closest valid name, values of the wrong type with the
expected type, and inconsistent values (``batch_size`` not a multiple of ``k``) with the fix.

Tests: ``tests/engine/test_config.py``.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import itertools
import math
import types
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.validation import is_integer, is_number
from ..training.optim import check_optimizer
from .config_file import CONFIG_DIR, MAX_DEPTH, find_config, load_yaml, read_file
from .config_sections import (
    RECALL_KS,
    ConfigError,
    DataConfig,
    LossConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
)

__all__ = [
    "MAX_COUNT",
    "MAX_DEPTH",
    "Config",
    "ConfigError",
    "DataConfig",
    "LossConfig",
    "ModelConfig",
    "OptimConfig",
    "TrainConfig",
    "CONFIG_DIR",
    "RECALL_KS",
    "apply_overrides",
    "config_from_dict",
    "find_config",
    "load_config",
    "load_yaml",
    "read_file",
]

#: The largest ``train.iterations`` (and other counts of the ``train`` section) a config takes:
#: 10^9 iterations are 11 days at 1,000 a second; a larger number is a typo (``1e30``).
MAX_COUNT = 10**9


@dataclass
class Config:
    """A whole run. ``name`` names the output folder (``runs/<name>`` unless ``train.out_dir``)."""

    name: str = "run"
    description: str = ""
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for YAML, checkpoints and metadata)."""
        return asdict(self)

    @property
    def ks(self) -> tuple[int, ...]:
        """The Recall@K set of this run."""
        if self.train.ks:
            return tuple(self.train.ks)
        return RECALL_KS.get(self.data.dataset.lower(), (1, 2, 4, 8))

    @property
    def out_dir(self) -> Path:
        """Where checkpoints, CSV files and metadata go."""
        return Path(self.train.out_dir or Path("runs") / self.name).expanduser()

    def validate(self) -> Config:
        """Check values and their consistency; return ``self``.

        Raises
        ------
        ConfigError
            Naming the key, the bad value and the fix.
        """
        _check_name(self.name)
        _check_train(self.train)
        _check_optim(self.optim, self.train.iterations)
        _check_data_and_model(self.data, self.model)
        return self


def _check_name(name: str) -> None:
    """``name`` is one folder under ``runs/``: never a path that leaves it."""
    if name in ("", ".", "..") or any(c in name for c in "/\\\0") or name.startswith("~"):
        raise ConfigError(
            f"name {name!r} must be a plain folder name (no '/', '\\', '..' or '~'): a run goes "
            "to runs/<name>. To write it elsewhere, set train.out_dir."
        )


def _check_train(t: TrainConfig) -> None:
    """The checks of :meth:`Config.validate` on the ``train`` section."""
    if (t.iterations is None) == (t.epochs is None):
        raise ConfigError(
            "give exactly one of train.iterations and train.epochs "
            f"(got iterations={t.iterations}, epochs={t.epochs})."
        )
    for key in (
        "iterations", "epochs", "epoch_iters", "batch_size", "k", "eval_every",
        "eval_batch_size", "log_every", "checkpoint_every",
    ):  # fmt: skip
        value = getattr(t, key)
        if value is not None and not 1 <= value <= MAX_COUNT:
            raise ConfigError(
                f"train.{key} must be a positive integer of at most {MAX_COUNT:,} (10^9), got "
                f"{value:,}."
            )
    if t.epochs is not None and t.epoch_iters is not None and t.epochs * t.epoch_iters > MAX_COUNT:
        raise ConfigError(
            f"train.epochs x train.epoch_iters = {t.epochs * t.epoch_iters:,} iterations, more "
            f"than {MAX_COUNT:,} (10^9); give fewer epochs or iterations per epoch."
        )
    if t.k < 2:
        raise ConfigError(f"train.k must be at least 2 (a positive pair), got {t.k}.")
    if t.batch_size % t.k:
        lower = max(t.batch_size // t.k, 1) * t.k
        raise ConfigError(
            f"train.batch_size={t.batch_size} is not a multiple of train.k={t.k}; use e.g. "
            f"{lower} or {lower + t.k} (P classes x k images)."
        )
    if not 0 <= t.seed < 2**32:  # epochs are seeded with seed * 1_000_003 + ...: 64 bits
        raise ConfigError(f"train.seed must be an integer in [0, 2**32), got {t.seed}.")
    minutes = t.checkpoint_minutes
    if minutes is not None and not (math.isfinite(minutes) and minutes > 0):
        raise ConfigError(
            f"train.checkpoint_minutes must be a positive number of minutes or null (off), "
            f"got {minutes}."
        )
    if t.ks is not None and (not t.ks or min(t.ks) < 1):
        raise ConfigError(f"train.ks must be positive integers, got {t.ks}.")
    if t.device not in ("auto", "cpu", "cuda", "mps") and not t.device.startswith("cuda:"):
        raise ConfigError(f"train.device must be auto, cpu, cuda[:N] or mps, got {t.device!r}.")


def _check_optim(o: OptimConfig, iterations: int | None = None) -> None:
    """The checks of :meth:`Config.validate` on the ``optim`` section."""
    try:
        check_optimizer(o.name, o.lr, **o.settings())
    except ValueError as err:
        msg = str(err)
        raise ConfigError(
            msg.replace("Unknown optimizer", "unknown optim.name", 1)
            if msg.startswith("Unknown")
            else f"optim.{msg}"
        ) from err
    for key in ("head_lr_mult", "gamma", "warmup_factor"):
        value = getattr(o, key)
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"optim.{key} must be a positive number, got {value}.")
    if o.warmup_iters < 0:
        raise ConfigError(f"optim.warmup_iters must be >= 0, got {o.warmup_iters}.")
    if o.freeze_backbone_epochs < 0:
        raise ConfigError("optim.freeze_backbone_epochs must be >= 0.")
    if o.grad_clip is not None and not o.grad_clip > 0:
        raise ConfigError(f"optim.grad_clip must be positive or null, got {o.grad_clip}.")
    _check_milestones(o.milestones, iterations)


def _check_milestones(values: list[int | float], iterations: int | None) -> None:
    """``optim.milestones``: increasing fractions in (0, 1), or increasing whole iterations
    within ``train.iterations`` (when given); never a mix, NaN or a number like 1.5."""
    fractions = [0 < m < 1 for m in values]
    whole = [math.isfinite(m) and m >= 1 and m == int(m) for m in values]
    kind = "fractions of the run" if all(fractions) else "iterations"
    ok = all(fractions) or all(whole)
    if not ok or any(b <= a for a, b in itertools.pairwise(values)):
        bad = [m for m, f, w in zip(values, fractions, whole, strict=True) if not (f or w)]
        why = (
            f"{bad[0]} is neither a fraction in (0, 1) nor a whole iteration"
            if bad
            else "fractions and iterations are mixed"
            if not ok
            else f"the {kind} do not increase"
        )
        raise ConfigError(
            f"optim.milestones must be increasing fractions of the run in (0, 1) (e.g. [0.4, "
            f"0.8]) or increasing whole iterations (e.g. [1200, 2400]), got {values}: {why}."
        )
    if iterations is not None and all(whole) and values and values[-1] > iterations:
        raise ConfigError(
            f"optim.milestones {values} lie beyond the run's train.iterations={iterations:,}; "
            "use smaller iterations, or fractions of the run (e.g. [0.4, 0.8])."
        )


def _check_data_and_model(d: DataConfig, m: ModelConfig) -> None:
    """The checks of :meth:`Config.validate` on ``data`` and ``model`` (crop fits backbone)."""
    if len(d.scale) != 2 or not 0 < d.scale[0] <= d.scale[1] <= 1:
        raise ConfigError(f"data.scale must be [min, max] with 0 < min <= max <= 1, got {d.scale}.")
    if d.crop < 1 or d.resize < d.crop:
        raise ConfigError(
            f"data.crop must be positive and data.resize >= data.crop, got crop={d.crop}, "
            f"resize={d.resize}."
        )
    if m.backbone == "bn_inception" and (d.crop + 1) % 32 > 7:
        raise ConfigError(
            f"data.crop={d.crop} does not fit BN-Inception, which needs sides of 32k-1 to "
            "32k+6 pixels (e.g. 224 or 227, as MS)."
        )
    if m.pooling not in ("max", "avg", "avg+max"):
        raise ConfigError(f"model.pooling must be max, avg or avg+max, got {m.pooling!r}.")
    if m.dim is not None and m.dim < 1:
        raise ConfigError(f"model.dim must be a positive integer or null, got {m.dim}.")
    if m.head not in ("linear", "multilevel"):
        raise ConfigError(f"model.head must be linear or multilevel, got {m.head!r}.")
    if m.head == "multilevel" and (m.backbone != "bn_inception" or m.dim is None):
        raise ConfigError(
            "model.head: multilevel (Liu et al.'s Fig. 3) needs model.backbone: bn_inception and "
            f"a model.dim, got backbone={m.backbone!r}, dim={m.dim}."
        )


# ------------------------------------------------------------------------------------------
# Reading and checking
# ------------------------------------------------------------------------------------------


def _type_name(tp: Any) -> str:
    if dataclasses.is_dataclass(tp):
        return "a mapping of keys (a config section)"
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and not typing.get_args(tp):
        return {
            "int": "an integer",
            "float": "a number",
            "str": "a string",
            "bool": "true/false",
        }.get(tp.__name__, tp.__name__)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:  # "a list of integers or numbers"
        union = typing.get_origin(args[0]) in (typing.Union, types.UnionType)
        kinds = typing.get_args(args[0]) if union else args
        plural = [_type_name(k).removeprefix("an ").removeprefix("a ") + "s" for k in kinds]
        return "a list of " + " or ".join(plural)
    if origin is dict:
        return "a mapping"
    return str(tp)


def _coerce(value: Any, tp: Any, path: str) -> Any:
    """Return ``value`` converted to ``tp`` or raise :class:`ConfigError`."""
    if tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, path)
            except ConfigError:
                continue
    elif dataclasses.is_dataclass(tp):
        if value is None:  # an empty section in YAML
            return tp()
        if isinstance(value, dict):
            return _build(tp, value, path)
    elif origin is list:
        if isinstance(value, list | tuple):
            return [_coerce(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)]
    elif origin is dict:
        if isinstance(value, dict):
            return dict(value)
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if is_integer(value):
            return int(value)
    elif tp is float:
        if is_number(value):
            return float(value)
        if isinstance(value, str):  # YAML reads 3e-5 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{path} must be {_type_name(tp)}, got {value!r} ({type(value).__name__}).")


def _build(cls: type, values: dict[str, Any], path: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in values.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in hints:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"unknown key {where!r}.{hint} Valid keys{' of ' + path if path else ''}: "
                f"{', '.join(names)}."
            )
        kwargs[key] = _coerce(value, hints[key], where)
    return cls(**kwargs)


def config_from_dict(values: dict[str, Any]) -> Config:
    """Build and validate a :class:`Config` from a nested dict (missing keys get defaults)."""
    if not isinstance(values, dict):
        raise ConfigError(f"a config must be a mapping of sections, got {type(values).__name__}.")
    return _build(Config, values, "").validate()


def _parse_value(text: str) -> Any:
    import yaml

    try:
        return load_yaml(text, f"--set value {text!r}")
    except yaml.YAMLError:
        return text


def apply_overrides(values: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` strings (values parsed as YAML) to a nested dict, in place.

    Raises
    ------
    ConfigError
        For a string without ``=`` or a path through a non-mapping.
    """
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects section.key=value, got {item!r}.")
        parts = key.strip().split(".")
        node = values
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {item!r}: {part!r} is not a section.")
            node = child
        node[parts[-1]] = _parse_value(text)
    return values


def load_config(
    path: str | Path | dict[str, Any],
    overrides: list[str] | None = None,
    *,
    data_dir: str | Path | None = None,
) -> Config:
    """Read a config file (or dict), apply ``--set`` overrides and ``--data``, validate it.

    Parameters
    ----------
    path : str, Path or dict
        A ``.yaml``/``.yml``/``.toml`` file, or the nested values themselves.
    overrides : list of str, optional
        ``"optim.lr=1e-4"``-style assignments, applied in order.
    data_dir : str or Path, optional
        Sets ``data.root`` (the folder holding the data sets).

    Raises
    ------
    ConfigError
        For a missing file, bad syntax, unknown keys, wrong types or inconsistent values.
    """
    values = copy.deepcopy(path) if isinstance(path, dict) else read_file(path)
    apply_overrides(values, list(overrides or []))
    if data_dir is not None:
        values.setdefault("data", {})["root"] = str(data_dir)
    return config_from_dict(values)
