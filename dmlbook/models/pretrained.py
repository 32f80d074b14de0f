"""Pretrained weights: fetch a state dict from a path or URL and load it with clear errors.

Backbones pretrained on ImageNet are the starting point of every benchmark run. The weights are
plain state dicts, read with ``torch.load(..., weights_only=True)`` (no pickled code runs), either
from a local file or downloaded once into ``$TORCH_HOME/hub/checkpoints``; files the package knows
by name are verified against their full SHA-256 first (:mod:`dmlbook.models.weight_files`), and
a file that cannot be read raises one ``ValueError`` naming it and the fix.

:func:`load_pretrained` refuses to load silently wrong weights: a missing key, an unexpected key or
a shape mismatch raises ``ValueError`` listing the offending names (only ``num_batches_tracked``
counters, absent from files written before PyTorch 0.4.1, may be missing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from .weight_files import cached_weights, read_torch_file, verify_weights

__all__ = ["InputSpec", "LoadReport", "fetch_state_dict", "load_pretrained", "is_url"]

StateDict = dict[str, torch.Tensor]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class InputSpec:
    """How a backbone expects its input images.

    Attributes
    ----------
    color : {"RGB", "BGR"}
        Channel order.
    scale : float
        Pixel range: 1.0 for ``[0, 1]`` inputs (torchvision), 255.0 for ``[0, 255]`` (Caffe).
    mean, std : tuple of float
        Per channel, in the channel order and range above: ``x = (pixels * scale - mean) / std``.
    size : int
        The crop side the weights were trained at.
    """

    color: str = "RGB"
    scale: float = 1.0
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    size: int = 224


@dataclass
class LoadReport:
    """What :func:`load_pretrained` did: the keys loaded, skipped and left at their defaults."""

    source: str
    loaded: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    defaulted: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"loaded {len(self.loaded)} tensors from {self.source}"
            + (f", ignored {len(self.ignored)}" if self.ignored else "")
            + (f", kept {len(self.defaulted)} default counters" if self.defaulted else "")
        )


def is_url(source: str | Path) -> bool:
    """True for ``http://``, ``https://`` and ``file://`` sources."""
    return str(source).startswith(("http://", "https://", "file://"))


def _unwrap(obj: object, source: str) -> StateDict:
    """Accept a bare state dict or one nested under ``state_dict``/``model``; drop ``module.``."""
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(
            f"{source} does not hold a state dict (a dict of tensors); got {type(obj).__name__}."
        )
    prefix = "module."
    if obj and all(k.startswith(prefix) for k in obj):  # saved from nn.DataParallel
        obj = {k[len(prefix) :]: v for k, v in obj.items()}
    return dict(obj)


def fetch_state_dict(
    source: str | Path,
    *,
    model_dir: str | Path | None = None,
    check_hash: bool = False,
    progress: bool = True,
) -> StateDict:
    """Read a state dict from a local file or a URL, on the CPU, with ``weights_only=True``.

    Parameters
    ----------
    source : str or Path
        A file path, or an ``http(s)://`` / ``file://`` URL (downloaded once into ``model_dir``).
    model_dir : str or Path, optional
        Download cache; default ``$TORCH_HOME/hub/checkpoints``.
    check_hash : bool
        For URLs whose file name carries a SHA-256 prefix and is not in the manifest, verify the
        prefix. Files named in :data:`~dmlbook.models.weight_files.MANIFEST` are always verified
        against their full SHA-256, downloaded, cached or local.
    progress : bool
        Show the download progress bar.

    Raises
    ------
    FileNotFoundError
        If a local path does not exist.
    ValueError
        One line naming the file and the fix: a file that fails its SHA-256 check, cannot be
        read (truncated, damaged, not weights) or does not hold a dict of tensors, or a URL that
        cannot be downloaded from any source.
    """
    text = str(source)
    if is_url(text):
        path = cached_weights(text, model_dir=model_dir, check_hash=check_hash, progress=progress)
        fix = "Delete it and run again to download it afresh."
    else:
        path = Path(text).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"pretrained weights {text!r} not found; pass an existing .pth file or a URL "
                "(http://, https:// or file://)."
            )
        verify_weights(path, check_prefix=False)  # an official file name promises its content
        fix = "Replace it with a good copy."
    return _unwrap(read_torch_file(path, fix), text)


def _listed(names: Iterable[str], limit: int = 8) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f" ... ({len(names) - limit} more)" if len(names) > limit else "")


def load_pretrained(
    model: nn.Module,
    source: str | Path | StateDict,
    *,
    convert: Callable[[StateDict], StateDict] | None = None,
    ignore: tuple[str, ...] = (),
    check_hash: bool = False,
    model_dir: str | Path | None = None,
    progress: bool = True,
) -> LoadReport:
    """Load weights into ``model``, refusing missing, unexpected or mis-shaped tensors.

    Parameters
    ----------
    model : nn.Module
        The network to fill in place.
    source : str, Path or dict
        A path or URL (see :func:`fetch_state_dict`), or a state dict already in memory.
    convert : callable, optional
        Applied to the state dict first (e.g. renaming keys, squeezing ``[1, C]`` tensors).
    ignore : tuple of str
        Key prefixes to leave out on both sides (e.g. ``("fc.",)`` for a model without the
        ImageNet classifier).
    check_hash, model_dir, progress
        Passed to :func:`fetch_state_dict`.

    Returns
    -------
    LoadReport

    Raises
    ------
    ValueError
        Listing the missing keys, the unexpected keys and the shape mismatches, if any.
    """
    if isinstance(source, dict):
        state, name = _unwrap(source, "the given state dict"), "the given state dict"
    else:
        state = fetch_state_dict(
            source, model_dir=model_dir, check_hash=check_hash, progress=progress
        )
        name = str(source)
    if convert is not None:
        state = convert(state)
    own = model.state_dict()
    ignored = [k for k in state if k.startswith(ignore)] if ignore else []
    state = {k: v for k, v in state.items() if k not in ignored}
    expected = {k: v for k, v in own.items() if not (ignore and k.startswith(ignore))}
    counters = [k for k in expected if k.endswith("num_batches_tracked") and k not in state]
    missing = [k for k in expected if k not in state and k not in counters]
    unexpected = [k for k in state if k not in expected]
    wrong = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing key(s): {_listed(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected key(s): {_listed(unexpected)}")
    if wrong:
        problems.append(f"{len(wrong)} shape mismatch(es): {_listed(wrong, 4)}")
    if problems:
        raise ValueError(
            f"the weights in {name} do not fit {type(model).__name__}: "
            + "; ".join(problems)
            + ". Check that the file belongs to this architecture (and to this number of classes, "
            "or leave the classifier out with num_classes=0)."
        )
    model.load_state_dict(state, strict=False)
    return LoadReport(name, loaded=sorted(state), ignored=ignored, defaulted=counters)
