"""The data-set registry: ``load_dataset(name, split, **options)`` for every data set of the book.

A data set is registered with a *loader*, a function ``loader(split, *, option=default, ...)``
that returns an :class:`~dmlbook.data.EmbeddedDataset`. The loader may be given as a
``"module:function"`` string so that its module (and any heavy dependency it has) is imported
only when the data set is first loaded. :func:`load_dataset` checks the name, the split and the
option names against the loader's signature before calling it, so a typo fails at once with a
message listing what is valid.

Adding a data set (e.g. a benchmark loader in ``dmlbook/data/benchmarks/cub.py``) is one call::

    register_dataset("cub", "dmlbook.data.benchmarks.cub:load", summary="CUB-200-2011, 100/100 classes")
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DatasetInfo",
    "available_datasets",
    "dataset_info",
    "load_dataset",
    "register_dataset",
]

Loader = Callable[..., Any]  # returns an EmbeddedDataset or an ImageListDataset


@dataclass(frozen=True)
class DatasetInfo:
    """A registry entry.

    Attributes
    ----------
    name : str
        Lower-case name used by :func:`load_dataset`.
    loader : callable or str
        ``loader(split, **options) -> EmbeddedDataset``, or its ``"module:function"`` path.
    splits : tuple of str
        Valid split names.
    summary : str
        One line describing the data set.
    """

    name: str
    loader: Loader | str
    splits: tuple[str, ...] = ("train", "test")
    summary: str = ""

    def resolve(self) -> Loader:
        """Import (if needed) and return the loader function."""
        if callable(self.loader):
            return self.loader
        module_name, _, attr = self.loader.partition(":")
        module = importlib.import_module(module_name)
        return getattr(module, attr)

    def options(self) -> dict[str, object] | None:
        """Option names of the loader with their defaults, or ``None`` if it takes ``**kwargs``."""
        params = list(inspect.signature(self.resolve()).parameters.values())[1:]  # skip ``split``
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return None
        return {
            p.name: p.default
            for p in params
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        }


_REGISTRY: dict[str, DatasetInfo] = {}


def register_dataset(
    name: str,
    loader: Loader | str,
    *,
    splits: Sequence[str] = ("train", "test"),
    summary: str = "",
    overwrite: bool = False,
) -> DatasetInfo:
    """Make a data set available to :func:`load_dataset`.

    Parameters
    ----------
    name : str
        Name to load it by (stored lower-case).
    loader : callable or str
        ``loader(split, *, option=default, ...) -> EmbeddedDataset``, or a ``"module:function"``
        path imported on first use. The first parameter receives the split; every other
        parameter is an option that :func:`load_dataset` forwards.
    splits : sequence of str
        Valid split names.
    summary : str
        One-line description.
    overwrite : bool
        Replace an existing entry of the same name instead of raising.

    Raises
    ------
    ValueError
        If ``name`` is empty or already registered (and ``overwrite`` is false), or ``splits``
        is empty.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"A data set name must be a non-empty string, got {name!r}.")
    key = name.strip().lower()
    if key in _REGISTRY and not overwrite:
        raise ValueError(
            f"A data set named {key!r} is already registered; pass overwrite=True to replace it."
        )
    if isinstance(loader, str) and ":" not in loader:
        raise ValueError(
            f"loader {loader!r} must be a callable or a 'module:function' path, "
            "e.g. 'dmlbook.data.handwritten.digits:load'."
        )
    splits = tuple(splits)
    if not splits:
        raise ValueError(f"Data set {key!r} needs at least one split, e.g. ('train', 'test').")
    info = DatasetInfo(name=key, loader=loader, splits=splits, summary=summary)
    _REGISTRY[key] = info
    return info


def available_datasets() -> list[str]:
    """Sorted names of the registered data sets, e.g. ``['digits', 'synthetic']``."""
    return sorted(_REGISTRY)


def dataset_info(name: str) -> DatasetInfo:
    """Return the registry entry of ``name``.

    Raises
    ------
    ValueError
        ``Unknown data set 'xyz'. Available: digits, synthetic.``
    """
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in _REGISTRY:
        raise ValueError(
            f"Unknown data set {name!r}. Available: {', '.join(available_datasets())}."
        )
    return _REGISTRY[key]


def load_dataset(name: str, split: str = "train", **options: object) -> Any:
    """Load split ``split`` of the registered data set ``name``.

    Parameters
    ----------
    name : str
        A name from :func:`available_datasets` (case-insensitive).
    split : str
        ``"train"`` or ``"test"`` (zero-shot: the two splits have disjoint classes).
    **options
        Forwarded to the data set's loader, e.g. ``as_images=True`` for ``digits`` or
        ``difficulty=0.7`` for ``synthetic``.

    Returns
    -------
    EmbeddedDataset or ImageListDataset
        In-memory tensors for the embedded data sets, an image list (decoded on demand or
        through its cache) for the benchmarks.

    Raises
    ------
    ValueError
        For an unknown name or split (the message lists the valid ones).
    TypeError
        For an option the loader does not take (the message lists the valid ones).
    """
    info = dataset_info(name)
    if not isinstance(split, str) or split not in info.splits:
        valid = ", ".join(repr(s) for s in info.splits)
        raise ValueError(
            f"Unknown split {split!r} for data set {info.name!r}. Valid splits: {valid}."
        )
    valid_options = info.options()
    if valid_options is not None:
        unknown = sorted(set(options) - set(valid_options))
        if unknown:
            listed = ", ".join(f"{k}={v!r}" for k, v in valid_options.items()) or "none"
            raise TypeError(
                f"Unknown option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(u) for u in unknown)} for data set {info.name!r}. "
                f"Valid options (with defaults): {listed}."
            )
    return info.resolve()(split, **options)


register_dataset(
    "digits",
    "dmlbook.data.handwritten.digits:load",
    summary="scikit-learn's 8x8 handwritten digits; train = digits 0-4, test = digits 5-9",
)
register_dataset(
    "synthetic",
    "dmlbook.data.generated.synthetic:load",
    summary="procedural fine-grained 32x32 RGB images; classes are attribute combinations",
)
register_dataset(
    "omniglot",
    "dmlbook.data.handwritten.omniglot:load",
    summary="Omniglot handwritten characters shipped with dmlbook, 28x28; train = background "
    "small set 1 (136 characters, 5 alphabets), test = 106 characters of 3 other alphabets "
    "(small set 2 less Greek and Latin)",
)
register_dataset(
    "omniglot_full",
    "dmlbook.data.handwritten.omniglot:load_full",
    summary="Omniglot full release ($DMLBOOK_DATA/omniglot); train = images_background (964 "
    "characters), test = images_evaluation (659)",
)
# Benchmarks read from their official layouts under ``root`` (default ``$DMLBOOK_DATA/<folder>``);
# they return an ImageListDataset (paths + labels), decoded by ImageListDataset.cached().
register_dataset(
    "cub",
    "dmlbook.data.benchmarks.cub:load",
    summary="CUB-200-2011 ($DMLBOOK_DATA/CUB_200_2011); train = classes 1-100 (5,864 images), "
    "test = classes 101-200 (5,924)",
)
register_dataset(
    "cars",
    "dmlbook.data.benchmarks.cars:load",
    summary="Cars-196 ($DMLBOOK_DATA/cars196); train = classes 1-98 (8,054 images), "
    "test = classes 99-196 (8,131)",
)
register_dataset(
    "sop",
    "dmlbook.data.benchmarks.sop:load",
    summary="Stanford Online Products ($DMLBOOK_DATA/Stanford_Online_Products); "
    "train 59,551 images / 11,318 products, test 60,502 / 11,316",
)
register_dataset(
    "inshop",
    "dmlbook.data.benchmarks.inshop:load",
    splits=("train", "query", "gallery"),
    summary="DeepFashion In-Shop ($DMLBOOK_DATA/InShop); train 25,882 images / 3,997 items, "
    "query 14,218 and gallery 12,612 of 3,985 other items",
)
