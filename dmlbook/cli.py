"""The ``dmlbook`` command line.

``dmlbook datasets [--data DIR]``
    List the data sets with their splits' sizes (benchmarks: if found on disk).
``dmlbook prepare NAME [--option key=value ...] [--data DIR] [--cache 256]``
    Build (and cache) a data set ahead of time, e.g. before a class or an offline session; for a
    benchmark, download, verify and extract it, and with ``--cache`` decode it once.
``dmlbook recall EMBEDDINGS.npy LABELS.npy [--ks 1 2 4 8] [--gallery G.npy --gallery-labels GL.npy]``
    Recall@K, MAP@R and R-precision of saved embeddings (one set, or query/gallery).
``dmlbook train --config FILE [--data DIR] [--set key=value ...] [--resume [CHECKPOINT]]``
    Train the run a config file describes (:mod:`dmlbook.engine`); ``--set optim.lr=1e-4``
    overrides a key, ``--resume`` continues from ``<out_dir>/last.pt``.
``dmlbook evaluate CHECKPOINT [--data DIR] [--ks ...] [--device auto]``
    Recall@K and MAP@R of a trained checkpoint on its test split.
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


def _data_root(name: str, data: str | None) -> dict[str, str]:
    """``{"root": <the data set's folder>}`` for ``--data DIR``, else ``{}``."""
    if data is None:
        return {}
    from .engine.data import _resolve_root

    return {"root": _resolve_root(name, data)}


def _cmd_datasets(args: argparse.Namespace) -> None:
    from .data import available_datasets, dataset_info, load_dataset

    for name in available_datasets():
        info = dataset_info(name)
        print(f"{name}: {info.summary}")
        options = info.options() or {}
        root = _data_root(name, args.data) if "root" in options else {}
        for split in info.splits:
            try:
                print("   ", load_dataset(name, split, **root).describe())
            except (ValueError, FileNotFoundError) as err:
                reason = str(err).split(". ")[0].rstrip(".")
                print(f"    {name}: not available: {reason}.")
                break


def _cmd_prepare(args: argparse.Namespace) -> None:
    from .data import dataset_info, load_dataset
    from .data.download import RESOURCES
    from .data.download import prepare as download

    info = dataset_info(args.name)
    options = _parse_options(args.option)
    if info.name in RESOURCES:  # a benchmark: download, verify, extract (then cache)
        download(info.name, args.data)
        options.update(_data_root(info.name, args.data))
    for split in info.splits:
        ds = load_dataset(info.name, split, **options)
        if args.cache and hasattr(ds, "cached"):
            ds = ds.cached(args.cache)
        print(ds.describe())


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


def _cmd_train(args: argparse.Namespace) -> None:
    from .engine import load_config, train

    cfg = load_config(args.config, args.set, data_dir=args.data)
    if args.dry_run:
        import yaml

        print(yaml.safe_dump(cfg.to_dict(), sort_keys=False), end="")
        return
    resume = True if args.resume == "" else (args.resume or False)
    result = train(cfg, resume=resume, progress=not args.quiet and None)
    print(f"outputs in {result.out_dir}")


def _cmd_evaluate(args: argparse.Namespace) -> None:
    from .engine import evaluate_checkpoint, load_checkpoint

    note = load_checkpoint(args.checkpoint).get("best")
    metrics = evaluate_checkpoint(
        args.checkpoint, data_dir=args.data, device=args.device, ks=args.ks
    )
    for key, value in metrics.items():
        print(f"{key:>6}  {100 * value:6.2f}")
    if note is not None:
        print(f"note: {note['note']}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dmlbook", description="deep metric learning book tools")
    sub = parser.add_subparsers(dest="command", required=True)
    ds = sub.add_parser("datasets", help="list the data sets and their splits")
    ds.add_argument("--data", help="folder holding the benchmark data sets (as DMLBOOK_DATA)")
    ds.set_defaults(func=_cmd_datasets)
    prep = sub.add_parser("prepare", help="build and cache a data set (benchmarks: download)")
    prep.add_argument("name")
    prep.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    prep.add_argument("--data", help="benchmarks: folder holding the data sets (DMLBOOK_DATA)")
    prep.add_argument(
        "--cache", type=int, metavar="SIZE", help="benchmarks: decode once into a SIZE px cache"
    )
    prep.set_defaults(func=_cmd_prepare)
    rec = sub.add_parser("recall", help="retrieval metrics of saved embeddings")
    rec.add_argument("embeddings")
    rec.add_argument("labels")
    rec.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8])
    rec.add_argument("--gallery")
    rec.add_argument("--gallery-labels")
    rec.set_defaults(func=_cmd_recall)
    tr = sub.add_parser("train", help="train the run a config file describes")
    tr.add_argument(
        "--config", required=True,
        help="a .yaml/.yml/.toml file, or the name of one in configs/ (e.g. ms_cub_bninception)",
    )  # fmt: skip
    tr.add_argument("--data", help="folder holding the data sets (as DMLBOOK_DATA)")
    tr.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. optim.lr=1e-4"
    )
    tr.add_argument(
        "--resume", nargs="?", const="", default=None, metavar="CHECKPOINT",
        help="continue from <out_dir>/last.pt, or from CHECKPOINT",
    )  # fmt: skip
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.add_argument("--dry-run", action="store_true", help="print the checked config and stop")
    tr.set_defaults(func=_cmd_train)
    ev = sub.add_parser("evaluate", help="Recall@K of a trained checkpoint")
    ev.add_argument("checkpoint")
    ev.add_argument("--data", help="folder holding the data sets, if moved since training")
    ev.add_argument("--ks", type=int, nargs="+", help="default: the run's Recall@K set")
    ev.add_argument("--device", default="auto")
    ev.set_defaults(func=_cmd_evaluate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dmlbook`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"dmlbook {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
