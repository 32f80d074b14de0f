"""Throughput of the input pipeline: JPEG -> uint8 cache (once), then batched augmentation.

Measures, on generated 500x375 JPEGs (the typical size of a CUB-200-2011 photo):

1. cache build rate (images/s): decode + resize (short side 256) + center crop into the
   memory-mapped cache, with all cores and with one decoding thread;
2. batch read rate from the cache (PK-style random indices, batch 80 and 256);
3. augmentation rate at 224 px: ``TrainTransform`` (random resized crop + flip + normalise) and
   ``EvalTransform`` (center crop + normalise), batch 80 and 256, on the CPU and on CUDA if present.

Writes a Markdown table (machine named: CPU, cores, torch version and load, since the machine may
be shared) to ``bench/results/input_pipeline_<device>.md``.

    python bench/bench_input_pipeline.py [--images 500] [--device cpu|cuda] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import cpu_description, sync  # noqa: E402

from dmlbook.data import EvalTransform, ImageListDataset, TrainTransform  # noqa: E402


def photo_like(rng: np.random.Generator, width: int = 500, height: int = 375) -> np.ndarray:
    """A smooth random colour field plus fine noise: JPEG sizes close to real photos (~40 kB)."""
    coarse = rng.uniform(0, 255, size=(height // 25 + 2, width // 25 + 2, 3)).astype(np.float32)
    img = np.asarray(
        Image.fromarray(coarse.astype(np.uint8)).resize((width, height), Image.Resampling.BICUBIC),
        dtype=np.float32,
    )
    img += rng.normal(0, 12, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def make_fixture(folder: Path, n: int) -> ImageListDataset:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        rel = f"c{i % 50:03d}/{i:05d}.jpg"
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(photo_like(rng)).save(folder / rel, format="JPEG", quality=90)
        paths.append(rel)
    labels = torch.tensor([i % 50 for i in range(n)])
    return ImageListDataset(root=folder, paths=paths, labels=labels, name="bench", split="train")


def load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def rate(fn, images: int, device: str, repeats: int = 5, warmup: int = 2) -> tuple[float, float]:
    """``(images/s, images per CPU-second)``: medians over ``repeats`` timed calls of ``fn``.

    The second number divides by the CPU time of this process (all its threads), so it does not
    drop when other processes take the cores, as wall-clock time does on a shared machine.
    """
    for _ in range(warmup):
        fn()
    sync(device)
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        sync(device)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return images / statistics.median(wall), images / max(statistics.median(cpu), 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=500, help="fixture size (default 500)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=None, help="Markdown output file")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: cores)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    torch.set_num_threads(args.threads or cores)
    device = args.device
    out = args.out or ROOT / "bench" / "results" / f"input_pipeline_{device.split(':')[0]}.md"
    load_before = load()
    rows: list[tuple[str, str, float, float]] = []

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        ds = make_fixture(tmp / "images", args.images)
        print(
            f"fixture: {args.images} JPEGs 500x375 in {time.perf_counter() - t:.1f} s", flush=True
        )
        kib = sum(f.stat().st_size for f in ds.files) / len(ds) / 1024

        for workers in (cores, 1):
            t, c = time.perf_counter(), time.process_time()
            cached = ds.cached(
                256, cache_dir=tmp / f"cache{workers}", workers=workers, progress=False
            )
            dt, dc = time.perf_counter() - t, time.process_time() - c
            stage = "cache build (decode + resize 256 + crop)"
            rows.append((stage, f"{workers} thread(s)", len(ds) / dt, len(ds) / dc))
            print(rows[-1], flush=True)

        g = torch.Generator().manual_seed(0)
        for bs in (80, 256):
            idx = [torch.randint(0, len(cached), (bs,), generator=g) for _ in range(8)]
            it = iter(range(10**9))
            r = rate(lambda idx=idx, it=it: cached.batch(idx[next(it) % 8]), bs, "cpu")
            rows.append(("batch read from the memmap cache (random indices)", f"batch {bs}", *r))
            print(rows[-1], flush=True)

        for backbone in ("resnet50", "bn_inception"):
            train = TrainTransform(224, normalization=backbone)
            center = EvalTransform(224, normalization=backbone)
            gen = torch.Generator(device=device).manual_seed(0)
            for bs in (80, 256):
                rows_idx = torch.arange(bs) % len(cached)
                x = cached.batch(rows_idx, device=device).images
                for name, fn in (
                    (
                        "train: random resized crop + flip + normalise",
                        lambda x=x, t=train, g=gen: t(x, g),
                    ),
                    ("test: center crop + normalise", lambda x=x, c=center: c(x)),
                ):
                    r = rate(fn, bs, device, repeats=5 if device == "cpu" else 20)
                    rows.append((f"{name} ({backbone})", f"batch {bs}, 224 px", *r))
                    print(rows[-1], flush=True)

    load_after = load()
    dev_name = torch.cuda.get_device_name() if device.startswith("cuda") else cpu_description()
    lines = [
        f"# Input pipeline throughput ({device})",
        "",
        "Produced by `python bench/bench_input_pipeline.py"
        + (f" --device {device}" if device != "cpu" else "")
        + f"` on {time.strftime('%Y-%m-%d')}.",
        "",
        f"- device: {dev_name}",
        f"- CPU: {cpu_description()}, {cores} usable cores; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads); Pillow {Image.__version__}; Python "
        f"{platform.python_version()}",
        f"- load before: `{load_before}`",
        f"- load after: `{load_after}`",
        f"- fixture: {args.images} generated 500x375 JPEGs (quality 90, {kib:.0f} KiB each on "
        'average), cache 256x256 (`fit="crop"`), 224 px crops',
        "",
        "| stage | setting | images/s (wall clock) | images per CPU-second |",
        "| --- | --- | ---: | ---: |",
    ]
    lines += [f"| {stage} | {setting} | {r:,.0f} | {c:,.0f} |" for stage, setting, r, c in rows]
    lines += [
        "",
        "The cache is built once per data set and split; every epoch afterwards reads the memmap",
        "and augments on the device of the batch. Timings are medians of repeated calls. Wall",
        "clock rates drop when other processes share the cores (see the load above); images per",
        "CPU-second (this process's CPU time, all threads) are what the work costs, and times the",
        "number of free cores estimate the rate on an idle machine.",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
