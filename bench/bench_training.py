"""Training throughput of the benchmark configs and backbones; Recall@K at SOP scale (not a test).

Three measurements, meant for a GPU:

* **each benchmark config against its dry run** (issue 16): the config's own model, loss,
  optimiser, batch, crop, bf16 and channels-last, trained with the engine's
  :class:`~dmlbook.training.Trainer` on random inputs already on the device; beside it the
  dry run's prediction (:func:`dmlbook.engine.dry_run.dry_run`: memory per GPU and images/s at
  the stated utilisation on the GPU's datasheet numbers), the measured peak memory and the
  utilisation the measurement implies. Written to ``training_vs_dry_run_<device>.md``.

* **training images/s** of ResNet-50 and BN-Inception with the MS head (global max pooling,
  Linear to 512, L2 norm, frozen BatchNorm) and the MS loss, Adam, bf16 autocast, channels-last,
  at 224 px and batch 80 (16 classes x 5) and 256 (64 x 4). Inputs are random tensors already
  on the device, so this is the model's ceiling; the input pipeline is measured separately.
  Target on one H100 (issue 6): ResNet-50 >= 2,500 images/s at batch 256.
* **Recall@K over 60,000 x 512** embeddings with SOP-like labels (about 5 images per class),
  ``dmlbook.evaluate.retrieval_metrics`` with K = 1, 10, 100, 1000 on the device. Target on one
  H100: under 1 s.

Usage::

    python bench/bench_training.py                       # GPU, full settings
    python bench/bench_training.py --device cpu --configs synthetic_ms_cpu gs_cars_resnet50 \
        --set train.batch_size=16 --set train.k=4 --iters 2 --warmup 1 --skip-backbones \
        --out-configs /tmp/dry_cpu.md    # proves the config path runs (CPU numbers: not GPU's)
    python bench/bench_training.py --device cpu --size 96 --batch-sizes 10 --iters 2 \
        --warmup 1 --recall-n 6000 --out bench/results/training_cpu.md   # proves it runs

Results go to a markdown file naming the device, with the settings next to every number.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402
from machine import device_name, load_average, sync  # noqa: E402

from dmlbook.engine import load_config  # noqa: E402
from dmlbook.engine.build import build_loss, build_model, build_optimizer  # noqa: E402
from dmlbook.engine.dry_run import DEFAULT_UTILIZATION, dry_run, gpu_specs  # noqa: E402
from dmlbook.evaluate import retrieval_metrics  # noqa: E402
from dmlbook.losses import get_loss  # noqa: E402
from dmlbook.models import EmbeddingModel, build_backbone  # noqa: E402
from dmlbook.training import Trainer  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BENCHMARK_CONFIGS = [
    "ms_cub_bninception", "ms_sop_bninception", "liu_cub_bninception", "gs_cars_resnet50",
]  # fmt: skip


def spec_of(device: torch.device) -> str:
    """The gpu_specs.csv key of this GPU (by its name), or h100_sxm for a CPU smoke run."""
    if device.type != "cuda":
        return "h100_sxm"
    name = device_name(device).lower()
    memory_gb = torch.cuda.get_device_properties(device).total_memory / 1e9
    matches = [
        (abs(spec.memory_gb - memory_gb), key)
        for key, spec in gpu_specs().items()
        if key.split("_")[0] in name and ("pcie" in name) == ("pcie" in spec.name.lower())
    ]
    return min(matches)[1] if matches else "h100_sxm"


def config_trainer(cfg, device: torch.device) -> tuple[Trainer, torch.nn.Module, torch.nn.Module]:
    """A config's model (random weights, seed 0, channels-last as configured, train mode), loss
    and the engine's :class:`Trainer` on ``device``, compiled where ``train.compile`` says;
    ``bench/gpu_check_parts.py`` measures through it too."""
    t = cfg.train
    torch.manual_seed(0)
    model = build_model(cfg, pretrained=False).to(device)
    loss_fn = build_loss(cfg).to(device)
    if t.channels_last:
        model.to(memory_format=torch.channels_last)
    model.train()
    trainer = Trainer(
        model, loss_fn, build_optimizer(cfg, model, loss_fn), bf16=t.bf16,
        forward=torch.compile(model) if t.compile else model,
    )  # fmt: skip
    return trainer, model, loss_fn


def config_throughput(
    name: str, overrides: list[str], device: torch.device, iters: int, warmup: int
) -> dict:
    """Measured images/s and peak memory of a config's training step, with its dry run."""
    cfg = load_config(name, overrides)
    t = cfg.train
    trainer, model, loss_fn = config_trainer(cfg, device)
    x = torch.randn(t.batch_size, 3, cfg.data.crop, cfg.data.crop, device=device)
    if t.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.arange(t.batch_size // t.k, device=device).repeat_interleave(t.k)
    for _ in range(warmup):
        trainer.step(x, y)
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for _ in range(iters):
        trainer.step(x, y)
    sync(device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    predicted = dry_run(cfg, gpu=spec_of(device), check_fit=False)
    measured = t.batch_size * iters / seconds
    return {
        "config": name, "batch": t.batch_size, "crop": cfg.data.crop,
        "precision": "bf16" if t.bf16 else "fp32", "predicted": predicted, "measured": measured,
        "peak_gib": peak,
        "implied_u": predicted.utilization * measured / predicted.images_per_s,
    }  # fmt: skip


def write_config_results(rows: list[dict], device: torch.device, args, out: Path) -> None:
    """The side-by-side table: dry-run prediction and measurement of every config."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    spec = rows[0]["predicted"].gpu if rows else None
    lines = [
        f"# Benchmark configs on {device.type.upper()}: dry-run prediction and measurement",
        "",
        *([f"**{args.note}**", ""] if args.note else []),
        f"- Date: {stamp}",
        f"- Device: {device_name(device)}; predictions for {spec.name if spec else '-'} at "
        f"u = {DEFAULT_UTILIZATION} (dmlbook.engine.dry_run)",
        f"- torch {torch.__version__}, Python {platform.python_version()}; overrides: "
        f"{' '.join(args.set) or 'none'}",
        f"- {args.warmup} warm-up + {args.iters} timed iterations of the engine's Trainer.step on "
        "random inputs already on the device (no data loading, no evaluation)",
        f"- Load average at the end: {load_average()}",
        "",
        "| config | batch | crop | precision | predicted GiB | measured peak GiB "
        "| predicted images/s | measured images/s | implied utilisation |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        p = r["predicted"]
        peak = "-" if r["peak_gib"] is None else f"{r['peak_gib']:.1f}"
        lines.append(
            f"| {r['config']} | {r['batch']} | {r['crop']} | {r['precision']} | "
            f"{p.memory_gib:.1f} | {peak} | {p.images_per_s:,.0f} | {r['measured']:,.1f} | "
            f"{r['implied_u']:.3f} |"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"written to {out}")


def train_throughput(
    backbone: str,
    batch: int,
    size: int,
    iters: int,
    warmup: int,
    device: torch.device,
    bf16: bool,
    args: argparse.Namespace,
) -> dict:
    """Images/s of full training steps (forward, MS loss, backward, Adam) on random inputs."""
    torch.manual_seed(0)
    model = EmbeddingModel(build_backbone(backbone), 512, pooling="max", freeze_bn=True)
    model.to(device).train()
    if args.channels_last:
        model.to(memory_format=torch.channels_last)
    forward = torch.compile(model) if args.compile else model
    loss_fn = get_loss("multi_similarity", alpha=2.0, beta=40.0, margin=0.5, epsilon=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-5, weight_decay=5e-4)
    k = 5 if batch % 5 == 0 else 4
    x = torch.randn(batch, 3, size, size, device=device)
    if args.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.arange(batch // k, device=device).repeat_interleave(k)

    def step() -> None:
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            emb = forward(x)
        loss = loss_fn(emb.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for _ in range(iters):
        step()
    sync(device)
    seconds = time.perf_counter() - start
    peak = (
        torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
    )
    return {
        "images_per_s": batch * iters / seconds,
        "s_per_iter": seconds / iters,
        "peak_gib": peak,
    }


def recall_time(n: int, dim: int, device: torch.device, repeats: int) -> dict:
    """Seconds of retrieval_metrics(R@1/10/100/1000) over n x dim embeddings on the device."""
    g = torch.Generator(device="cpu").manual_seed(0)
    labels = torch.arange(n) // 5  # SOP: about 5 images per product
    centers = torch.randn(n // 5 + 1, dim, generator=g)
    x = (centers[labels] + 1.5 * torch.randn(n, dim, generator=g)).to(device)
    ks = tuple(k for k in (1, 10, 100, 1000) if k < n)
    retrieval_metrics(x[:2048], labels[:2048], (1,), device=device)  # warm-up
    best, out = float("inf"), {}
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        out = retrieval_metrics(x, labels, ks, device=device)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return {"seconds": best, "R@1": out["R@1"], "ks": ks}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--models", nargs="+", default=["resnet50", "bn_inception"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[80, 256])
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument(
        "--precisions", nargs="+", default=["bf16"], choices=["bf16", "fp32"],
        help="bf16 autocast and/or plain float32",
    )  # fmt: skip
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--recall-n", type=int, default=60_000)
    p.add_argument("--recall-dim", type=int, default=512)
    p.add_argument("--recall-repeats", type=int, default=3)
    p.add_argument("--note", default="", help="a line added under the title (e.g. the scope)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--configs", nargs="*", default=BENCHMARK_CONFIGS, help="configs to measure")
    p.add_argument("--set", action="append", default=[], help="override for every config")
    p.add_argument("--out-configs", type=Path, default=None)
    p.add_argument("--skip-backbones", action="store_true", help="configs only")
    args = p.parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    out = args.out or RESULTS / f"training_{device.type}.md"

    config_rows = []
    for name in args.configs:
        r = config_throughput(name, args.set, device, args.iters, args.warmup)
        config_rows.append(r)
        print(
            f"{name:>22}: measured {r['measured']:9.1f} images/s, predicted "
            f"{r['predicted'].images_per_s:9.0f} (implied utilisation {r['implied_u']:.3f})"
        )
    if config_rows:
        target = args.out_configs or RESULTS / f"training_vs_dry_run_{device.type}.md"
        write_config_results(config_rows, device, args, target)
    if args.skip_backbones:
        return

    rows = []
    for name in args.models:
        for batch in args.batch_sizes:
            for precision in args.precisions:
                bf16 = precision == "bf16"
                r = train_throughput(
                    name, batch, args.size, args.iters, args.warmup, device, bf16, args
                )
                rows.append((name, batch, precision, r))
                print(
                    f"{name:>12} batch {batch:>4} {precision} @ {args.size}px: "
                    f"{r['images_per_s']:9.1f} images/s"
                )
    rec = recall_time(args.recall_n, args.recall_dim, device, args.recall_repeats)
    print(f"retrieval_metrics {args.recall_n:,} x {args.recall_dim}: {rec['seconds']:.3f} s")

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Training throughput and Recall@K time on {device.type.upper()}",
        "",
        *([f"**{args.note}**", ""] if args.note else []),
        f"- Date: {stamp}",
        f"- Device: {device_name(device)}",
        f"- torch {torch.__version__}, Python {platform.python_version()}",
        f"- Settings: {args.size} px, channels-last "
        f"{'on' if args.channels_last else 'off'}, "
        f"torch.compile {'on' if args.compile else 'off'}, "
        f"{args.warmup} warm-up + {args.iters} timed iterations; random inputs already on the "
        "device; MS head (max pool, Linear 512, L2) with frozen BN, MS loss, Adam",
        f"- Load average at the end: {load_average()}",
        "",
        "| backbone | batch | precision | images/s | s / iteration | peak memory (GiB) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for name, batch, precision, r in rows:
        lines.append(
            f"| {name} | {batch} | {precision} | {r['images_per_s']:.1f} | {r['s_per_iter']:.3f} | "
            + ("- |" if r["peak_gib"] != r["peak_gib"] else f"{r['peak_gib']:.1f} |")
        )
    lines += [
        "",
        f"Recall@K ({', '.join(map(str, rec['ks']))}) with `retrieval_metrics` over "
        f"{args.recall_n:,} x {args.recall_dim} float32 embeddings (SOP-like, 5 per class): "
        f"**{rec['seconds']:.3f} s** (best of {args.recall_repeats}).",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
