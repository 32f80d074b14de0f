"""Training throughput of the benchmark backbones, and Recall@K at SOP scale (not a test).

Two measurements, meant for a GPU:

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

from dmlbook.evaluate import retrieval_metrics  # noqa: E402
from dmlbook.losses import get_loss  # noqa: E402
from dmlbook.models import EmbeddingModel, build_backbone  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


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
    args = p.parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    out = args.out or RESULTS / f"training_{device.type}.md"

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
        f"{'on' if args.channels_last else 'off'}, torch.compile {'on' if args.compile else 'off'}, "
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
