"""The ``dmlbook`` command line.

``dmlbook datasets``
    List the embedded data sets with their splits' sizes.
``dmlbook prepare NAME [--option key=value ...]``
    Build (and cache) a data set ahead of time, e.g. before a class or an offline session.
``dmlbook recall EMBEDDINGS.npy LABELS.npy [--ks 1 2 4 8] [--gallery G.npy --gallery-labels GL.npy]``
    Recall@K, MAP@R and R-precision of saved embeddings (one set, or query/gallery).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import numpy as np

__all__ = ["main"]


def _parse_options(pairs: list[str]) -> dict[str, object]:
    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--option expects key=value, got {pair!r}.")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return options


def _load_array(path: str, what: str) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{what} file {path!r} does not exist.")
    if p.suffix != ".npy":
        raise ValueError(f"{what} must be a .npy file written by numpy.save, got {path!r}.")
    return np.load(p, allow_pickle=False)


def _cmd_datasets(_: argparse.Namespace) -> None:
    from .data import available_datasets, dataset_info, load_dataset

    for name in available_datasets():
        info = dataset_info(name)
        print(f"{name}: {info.summary}")
        for split in info.splits:
            print("   ", load_dataset(name, split).describe())


def _cmd_prepare(args: argparse.Namespace) -> None:
    from .data import dataset_info, load_dataset

    options = _parse_options(args.option)
    for split in dataset_info(args.name).splits:
        print(load_dataset(args.name, split, **options).describe())


def _cmd_recall(args: argparse.Namespace) -> None:
    from .evaluate import retrieval_metrics

    x = _load_array(args.embeddings, "embeddings")
    y = _load_array(args.labels, "labels")
    gallery = gallery_labels = None
    if (args.gallery is None) != (args.gallery_labels is None):
        raise ValueError("give both --gallery and --gallery-labels, or neither.")
    if args.gallery is not None:
        gallery = _load_array(args.gallery, "gallery")
        gallery_labels = _load_array(args.gallery_labels, "gallery labels")
    metrics = retrieval_metrics(
        x, y, tuple(args.ks), gallery=gallery, gallery_labels=gallery_labels
    )
    for key, value in metrics.items():
        print(f"{key:>6}  {100 * value:6.2f}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dmlbook", description="deep metric learning book tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("datasets", help="list the embedded data sets").set_defaults(func=_cmd_datasets)
    prep = sub.add_parser("prepare", help="build and cache a data set")
    prep.add_argument("name")
    prep.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    prep.set_defaults(func=_cmd_prepare)
    rec = sub.add_parser("recall", help="retrieval metrics of saved embeddings")
    rec.add_argument("embeddings")
    rec.add_argument("labels")
    rec.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8])
    rec.add_argument("--gallery")
    rec.add_argument("--gallery-labels")
    rec.set_defaults(func=_cmd_recall)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dmlbook`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, TypeError) as err:
        print(f"dmlbook {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
