"""The ``dmlbook`` command line.

``dmlbook datasets [--data DIR]``
    List the data sets with their splits' sizes (benchmarks: if found on disk).
``dmlbook prepare NAME [--data DIR] [--cache SIZE | --no-cache] [--allow-partial] [--skip-bad-images]``
    Build (and cache) a data set ahead of time, e.g. before a class or an offline session. For a
    benchmark, a copy already extracted under ``--data`` (by hand, by a course, on a cluster) is
    checked and used as it is; otherwise its archives are downloaded, verified and extracted.
    Then its images are decoded once into the cache (``--cache 256`` by default, the size
    ``dmlbook train`` reads with the default ``data.resize``, so training reuses it).
``dmlbook recall EMBEDDINGS.npy LABELS.npy [--ks 1 2 4 8] [--gallery G.npy --gallery-labels GL.npy]``
    Recall@K, MAP@R and R-precision of saved embeddings (one set, or query/gallery).
``dmlbook train --config FILE [--data DIR] [--set key=value ...] [--resume [CHECKPOINT] | --overwrite] [--dry-run]``
    Train the run a config file describes (:mod:`dmlbook.engine`); ``--set optim.lr=1e-4``
    overrides a key, ``--resume`` continues from ``<out_dir>/last.pt``. A fresh run never
    writes over a run its folder holds: ``--overwrite`` moves that run into
    ``<out_dir>/previous-run-N/`` first. Under ``torchrun`` every
    process trains its share of the batch (:mod:`dmlbook.engine.distributed`); ``--dry-run``
    checks the config and predicts memory and speed (:mod:`dmlbook.engine.dry_run`).
``dmlbook evaluate CHECKPOINT [--data DIR] [--ks ...] [--device auto]``
    Recall@K and MAP@R of a trained checkpoint on its test split.

Parsing the arguments imports neither torch nor numpy: each command imports what it needs when
it runs, so that ``dmlbook --help`` and a mistyped argument answer at once (tested in
``tests/test_cli.py``). Every error a command raises for bad input (``ValueError``,
``TypeError``, ``OSError``, a NaN loss's ``FloatingPointError``) is printed as one line,
``dmlbook <command>: error: ...``, with exit status 2 (a training run a signal stopped: 128 + the
signal, after the command that resumes it); the fixes the data layer suggests in Python
spelling (``allow_partial=True``) are rewritten to the command's flags by :func:`cli_spelling`.
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import re
import shlex
import sys
import textwrap
import warnings
from pathlib import Path

from .data.base.errors import ALLOW_PARTIAL, SKIP_BAD
from .data.registry import available_datasets

__all__ = ["build_parser", "cli_spelling", "main"]


def cli_spelling(message: str, command: str) -> str:
    """Rewrite the Python fixes a data error suggests into flags of ``dmlbook <command>``.

    ``allow_partial=True`` becomes ``--allow-partial`` (``prepare``) or ``--set
    data.options.allow_partial=true`` (``train``, which reads the data options of its config);
    ``skip_bad=True`` becomes ``--skip-bad-images``; ``dmlbook.data.fetch.download.prepare('cub',
    data_dir)`` becomes ``dmlbook prepare cub --data DIR``; ``root='/path/to/X'`` becomes
    ``--data DIR``.
    """
    if command == "prepare":
        partial, skip = "--allow-partial", "--skip-bad-images"
    else:  # training reads the cache strictly: undecodable files must go, then a partial copy
        partial = "--set data.options.allow_partial=true"
        skip = "--skip-bad-images (dmlbook prepare NAME)"
        message = message.replace(
            f"pass {SKIP_BAD} to leave them out", f"delete them and add {partial}"
        )
    message = message.replace(ALLOW_PARTIAL, partial).replace(SKIP_BAD, skip)
    message = re.sub(
        r"dmlbook\.data\.fetch\.download\.prepare\('(\w+)', data_dir\)",
        r"dmlbook prepare \1 --data DIR",
        message,
    )
    message = re.sub(
        r"load_dataset\('(\w+)', '\w+', download=True\)",
        r"dmlbook prepare \1 --data DIR --option download=true",
        message,
    )
    return re.sub(r"root='/path/to/[^']*'", "--data DIR", message)


def _parse_options(pairs: list[str]) -> dict[str, object]:
    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--option expects key=value, got {pair!r}.")
        if value.lower() in ("true", "false"):  # the shell spelling of a flag's value
            options[key] = value.lower() == "true"
            continue
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return options


def _load_array(path: str, what: str) -> object:
    import numpy as np  # only the recall command needs it: --help stays fast

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{what} file {path!r} does not exist.")
    if p.suffix != ".npy":
        raise ValueError(f"{what} must be a .npy file written by numpy.save, got {path!r}.")
    return np.load(p, allow_pickle=False)


def _cmd_datasets(args: argparse.Namespace) -> None:
    from .data import dataset_info, load_dataset

    for name in available_datasets():
        info = dataset_info(name)
        print(f"{name}: {info.summary}")
        options = info.options() or {}
        root = {"root": args.data} if "root" in options and args.data is not None else {}
        for split in info.splits:
            try:
                print("   ", load_dataset(name, split, **root).describe())
            except (ValueError, FileNotFoundError) as err:
                reason = cli_spelling(str(err), "datasets").split(". ")[0].rstrip(".")
                print(f"    {name}: not available: {reason}.")
                break


def _benchmark_root(name: str, data: str | None) -> str:
    """The benchmark's extracted copy under ``--data`` / ``$DMLBOOK_DATA``, fetched if absent."""
    from .data.base.locations import datasets_folder
    from .data.fetch.download import find_copy, prepare

    data_dir = data or datasets_folder()
    if not data_dir:
        raise ValueError(
            f"{name} needs a data folder: pass --data DIR (the folder that holds the data sets, "
            "or the extracted copy itself) or set DMLBOOK_DATA."
        )
    if not Path(data_dir).expanduser().is_dir():
        given = "--data" if data else "DMLBOOK_DATA"
        raise ValueError(
            f"{given} {data_dir}: no such folder. Check the spelling; to download {name} into a "
            f"new folder, create it first (mkdir -p {data_dir})."
        )
    copy = find_copy(name, data_dir)
    if copy is not None:
        print(f"{name}: checking the copy in {copy} (nothing to download)")
    else:
        prepare(name, data_dir)  # download, verify, extract
        copy = find_copy(name, data_dir) or Path(data_dir)
    return str(copy)


def _cmd_prepare(args: argparse.Namespace) -> None:
    from .data import dataset_info, load_dataset
    from .data.fetch.download import LAYOUTS

    info = dataset_info(args.name)
    options = _parse_options(args.option)
    accepted = info.options() or {}
    if info.name in LAYOUTS:  # a benchmark: use the copy on disk, or fetch it
        options["root"] = _benchmark_root(info.name, args.data)
    elif args.data is not None:
        if "root" not in accepted:
            raise ValueError(
                f"--data applies to the data sets read from disk, not to {args.name!r}."
            )
        options["root"] = args.data
    if args.allow_partial:
        if "allow_partial" not in accepted:
            raise ValueError(
                f"--allow-partial applies to the data sets read from disk, not to {args.name!r}."
            )
        options["allow_partial"] = True
    size = None if args.no_cache else args.cache
    if args.skip_bad_images and size is None:
        raise ValueError("--skip-bad-images applies while decoding: drop --no-cache.")
    for split in info.splits:
        ds = load_dataset(info.name, split, **options)
        if size is not None and hasattr(ds, "cached"):
            ds = ds.cached(size, skip_bad=args.skip_bad_images)
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


def _cmd_train(args: argparse.Namespace) -> int:
    from .engine import load_config, train
    from .engine.runtime import exit_status

    cfg = load_config(args.config, args.set, data_dir=args.data)
    if args.dry_run:  # the checked config, then the dry run's report as YAML comments
        import yaml

        from .engine.dry_run import dry_run

        print(yaml.safe_dump(cfg.to_dict(), sort_keys=False), end="")
        stated = {} if args.utilization is None else {"utilization": args.utilization}
        report = dry_run(cfg, gpu=args.gpu, gpus=args.gpus, memory_gib=args.gpu_memory, **stated)
        print("\n".join(f"# {line}" for line in report.describe().splitlines()))
        return
    resume = True if args.resume == "" else (args.resume or False)
    result = train(
        cfg,
        resume=resume,
        overwrite=args.overwrite,
        progress=not args.quiet and None,
        resume_command=_resume_command(args),
    )
    print(f"outputs in {result.out_dir}")
    return exit_status(result.stopped_by)


def _resume_command(args: argparse.Namespace) -> str:
    """The exact command that resumes the run ``args`` describes (printed if it stops early)."""
    words = ["dmlbook", "train", "--config", args.config]
    if args.data is not None:
        words += ["--data", args.data]
    for item in args.set:
        words += ["--set", item]
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world > 1:  # under torchrun: the same processes again
        words[:2] = ["torchrun", "--nproc-per-node", str(world), "-m", "dmlbook.cli", "train"]
    return shlex.join([*words, "--resume"])


def _cmd_evaluate(args: argparse.Namespace) -> None:
    from .engine import evaluate_checkpoint
    from .training import load_checkpoint

    note = load_checkpoint(args.checkpoint).get("best")
    metrics = evaluate_checkpoint(
        args.checkpoint,
        data_dir=args.data,
        device=args.device,
        ks=args.ks,
        describe=lambda line: print(line, flush=True),
    )
    for key, value in metrics.items():
        print(f"{key:>6}  {100 * value:6.2f}")
    if note is not None:
        print(f"note: {note['note']}")


_EXAMPLES = {
    "datasets": """examples:
  dmlbook datasets
  dmlbook datasets --data /data        # benchmarks found under /data are listed with their sizes""",
    "prepare": """examples:
  dmlbook prepare synthetic --option num_classes=40
  dmlbook prepare cub --data /data                  # uses /data/CUB_200_2011 if it is there,
                                                    # else downloads, checks md5 and extracts
  dmlbook prepare cub --data /data --no-cache       # check only, decode nothing
  dmlbook prepare cub --data /course --allow-partial   # a subset of the official split
  dmlbook prepare cub --data /data --cache 256 --skip-bad-images

offline: put the extracted copy (e.g. /data/CUB_200_2011/images.txt ...) or the archive
(/data/downloads/CUB_200_2011.tgz) in place first; nothing that is there is downloaded.
In-Shop has no direct download: extract it by hand under /data/InShop.""",
    "recall": """examples:
  dmlbook recall emb.npy labels.npy --ks 1 2 4 8
  dmlbook recall query.npy query_labels.npy --gallery gal.npy --gallery-labels gal_labels.npy""",
    "train": """examples:
  dmlbook train --config ms_cub_bninception --data /data
  dmlbook train --config my.yaml --set optim.lr=1e-4 --set train.iterations=2000
  dmlbook train --config my.yaml --set data.options.allow_partial=true   # a partial copy
  dmlbook train --config my.yaml --resume                                # from <out_dir>/last.pt
  dmlbook train --config my.yaml --overwrite   # afresh; the old run -> <out_dir>/previous-run-1/
  dmlbook train --config my.yaml --dry-run          # memory, FLOPs, images/s on an H100
  dmlbook train --config ms_sop_bninception --dry-run --gpus 4 --gpu a100_sxm_40gb
  torchrun --nproc-per-node 4 -m dmlbook.cli train --config ms_sop_bninception --data /data""",
    "evaluate": """examples:
  dmlbook evaluate runs/ms_cub/best.pt --device cpu
  dmlbook evaluate runs/ms_cub/best.pt --data /new/place --ks 1 2 4 8""",
}


def _gpu_keys() -> list[str]:
    """The GPUs of ``dmlbook/data/gpu_specs.csv`` (read with csv: ``--help`` imports no torch)."""
    with open(Path(__file__).parent / "data" / "gpu_specs.csv", newline="", encoding="utf-8") as f:
        return [row["gpu"] for row in csv.DictReader(f)]


def _sub(
    sub: argparse._SubParsersAction, name: str, help: str, more: str = ""
) -> argparse.ArgumentParser:
    return sub.add_parser(
        name,
        help=help,
        description=textwrap.fill(" ".join(filter(None, (help[0].upper() + help[1:] + ".", more)))),
        epilog=_EXAMPLES[name],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dmlbook`` (no heavy import: choices come from the registry)."""
    parser = argparse.ArgumentParser(
        prog="dmlbook",
        description="Deep metric learning book tools: data sets, training, retrieval metrics.",
        epilog="Run 'dmlbook COMMAND --help' for a command's options and examples.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    names = available_datasets()
    ds = _sub(sub, "datasets", "list the data sets and their splits")
    ds.add_argument("--data", metavar="DIR", help="folder holding the benchmark data sets")
    ds.set_defaults(func=_cmd_datasets)
    prep = _sub(sub, "prepare", "check or fetch a data set, and cache it")
    prep.add_argument("name", choices=names, metavar="NAME", help=f"one of: {', '.join(names)}")
    prep.add_argument(
        "--data", metavar="DIR",
        help="benchmarks: the folder holding the data sets, or the extracted copy itself "
        "(default: $DMLBOOK_DATA)",
    )  # fmt: skip
    prep.add_argument(
        "--cache", type=int, default=256, metavar="SIZE",
        help="benchmarks: decode the images once into a SIZE px cache (default 256, what "
        "dmlbook train reads)",
    )  # fmt: skip
    prep.add_argument(
        "--no-cache", action="store_true", help="check (and fetch) only, decode nothing"
    )
    prep.add_argument(
        "--allow-partial", action="store_true",
        help="benchmarks: accept a copy with other image counts than the official split (a "
        "course subset), leaving out listed images that are missing",
    )  # fmt: skip
    prep.add_argument(
        "--skip-bad-images", action="store_true",
        help="while caching: leave out and list the images that cannot be decoded instead of "
        "stopping (to train without them, delete the listed files and use --allow-partial, or "
        "data.options.allow_partial in the config)",
    )  # fmt: skip
    prep.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE",
        help="a loader option, e.g. num_classes=40 (synthetic) or layout=folders (cars)",
    )  # fmt: skip
    prep.set_defaults(func=_cmd_prepare)
    rec = _sub(sub, "recall", "retrieval metrics of saved embeddings")
    rec.add_argument("embeddings", help="(N, D) array saved with numpy.save")
    rec.add_argument("labels", help="(N,) integer labels saved with numpy.save")
    rec.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8], metavar="K")
    rec.add_argument("--gallery", metavar="G.npy", help="gallery embeddings (query/gallery)")
    rec.add_argument("--gallery-labels", metavar="GL.npy", help="gallery labels")
    rec.set_defaults(func=_cmd_recall)
    tr = _sub(
        sub,
        "train",
        "train the run a config file describes",
        "Outputs (last.pt, best.pt, metrics.csv, train_log.csv, run.json) go to the config's "
        "train.out_dir: runs/<name> under the current folder by default; --set "
        "train.out_dir=DIR puts them elsewhere. A fresh run into a folder that holds a run "
        "stops, unless --resume continues it or --overwrite moves it aside.",
    )
    tr.add_argument(
        "--config", required=True, metavar="FILE",
        help="a .yaml/.yml/.toml file, or the name of a shipped config (e.g. ms_cub_bninception)",
    )  # fmt: skip
    tr.add_argument("--data", metavar="DIR", help="folder holding the data sets (data.root)")
    tr.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. optim.lr=1e-4"
    )
    tr.add_argument(
        "--resume", nargs="?", const="", default=None, metavar="CHECKPOINT",
        help="continue from <out_dir>/last.pt, or from CHECKPOINT",
    )  # fmt: skip
    tr.add_argument(
        "--overwrite", action="store_true",
        help="start afresh in a folder that holds a run: its files move into "
        "<out_dir>/previous-run-N/ (nothing is deleted); without it such a run stops",
    )  # fmt: skip
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.add_argument(
        "--dry-run", action="store_true",
        help="print the checked config, run one step on fake tensors (no data, no GPU) and "
        "report memory per GPU, FLOPs per image and predicted images/s; fail if it cannot fit",
    )  # fmt: skip
    gpus = _gpu_keys()
    tr.add_argument(
        "--gpu", default="h100_sxm", choices=gpus, metavar="GPU",
        help=f"dry run: the GPU to predict for, one of {', '.join(gpus)} "
        "(dmlbook/data/gpu_specs.csv; default h100_sxm)",
    )  # fmt: skip
    tr.add_argument("--gpus", type=int, default=1, help="dry run: GPUs (processes) of the run")
    tr.add_argument(
        "--gpu-memory", type=float, metavar="GIB", help="dry run: GPU memory if not the datasheet's"
    )
    tr.add_argument(
        "--utilization",
        type=float,
        help="dry run: stated fraction of peak (default: the one measured on a GPU, "
        "dmlbook.engine.dry_run.DEFAULT_UTILIZATION)",
    )
    tr.set_defaults(func=_cmd_train)
    ev = _sub(sub, "evaluate", "Recall@K of a trained checkpoint")
    ev.add_argument("checkpoint", help="a best.pt or last.pt written by dmlbook train")
    ev.add_argument("--data", metavar="DIR", help="folder holding the data sets, if moved")
    ev.add_argument("--ks", type=int, nargs="+", metavar="K", help="default: the run's set")
    ev.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, mps ...")
    ev.set_defaults(func=_cmd_evaluate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dmlbook`` command; returns the exit status.

    Bad input (``ValueError``, ``TypeError``, ``OSError`` and their subclasses, e.g. the engine's
    ``ConfigError``, a failed download, a damaged checkpoint, a full disk, a run folder another
    run holds; and a loss that became NaN) is printed as one line without a traceback, exit
    status 2. A training run stopped by a signal exits with 128 + its number, as the shell
    reports a process the signal killed: 130 (Ctrl-C), 143 (SIGTERM), 129 (SIGHUP), after
    printing the command that resumes it. Warnings (e.g. images left out of a partial copy) are
    printed as they happen, one line each, in the command's spelling.
    """
    args = build_parser().parse_args(argv)

    def one_line(text: str) -> str:
        return " ".join(cli_spelling(text, args.command).split())

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        print(f"dmlbook {args.command}: warning: {one_line(str(message))}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        try:
            status = args.func(args)
        except (ValueError, TypeError, OSError, FloatingPointError) as err:
            print(f"dmlbook {args.command}: error: {one_line(str(err))}", file=sys.stderr)
            return 2
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
