"""The parts of ``bench/gpu_check.py``, each run as ``python bench/gpu_check_parts.py PART ...``.

Each part appends one JSON line per measurement to ``<out>/results.jsonl`` as soon as it has it,
checks its own deadline (``--budget-s``) between measurements and stops there, so that the
runner's hard stop (budget + grace) is only a last resort. ``--smoke`` runs the same code at toy
sizes on the CPU. See ``bench/gpu_check.py`` for what each part measures and why.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from machine import cpu_description, device_name  # noqa: E402

#: The benchmark configs whose training the part ``training`` measures (BN-Inception at 227 px
#: and batch 80 and 1000, Liu et al.'s recipe, ResNet-50 at 224 px and batch 128).
CONFIGS = ["ms_cub_bninception", "ms_sop_bninception", "liu_cub_bninception", "gs_cars_resnet50"]
#: The configs also measured under torch.compile (one per backbone: compiling takes a minute).
COMPILED = ["ms_cub_bninception", "gs_cars_resnet50"]
#: Toy sizes of the smoke run, applied to every config (same code path, seconds on a CPU).
SMOKE_OVERRIDES = [
    "train.batch_size=8", "train.k=2", "data.resize=36", "data.crop=32", "train.bf16=false",
    "train.channels_last=true", "model.dim=16",
]  # fmt: skip
#: Seconds a stopped child has to write its reports after SIGINT (within the runner's GRACE).
INTERRUPT_GRACE = 10.0
SOP_TEST = 60_502  # images in SOP's test split (Song et al. 2016), the Recall@K scale


@dataclass
class Ctx:
    """What every part gets: where to write, its device, its deadline, smoke or not."""

    out: Path
    device: torch.device
    deadline: float
    smoke: bool
    part: str

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def emit(self, **row: object) -> None:
        row = {"part": self.part, **row}
        with open(self.out / "results.jsonl", "a") as f:
            f.write(json.dumps(row, default=str) + "\n")
        print(json.dumps(row, default=str), flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_ms(fn: Callable[[], object], device: torch.device, iters: int, warmup: int) -> float:
    """Milliseconds per call of ``fn`` (after ``warmup`` calls), the device synchronised."""
    for _ in range(warmup):
        fn()
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return 1000 * (time.perf_counter() - start) / iters


def peak_gib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def run_child(ctx: Ctx, cmd: list[str], env: dict[str, str] | None = None) -> str:
    """Run ``cmd`` until the part's deadline; its status: ``ok``, ``exit N`` or ``stopped``.

    At the deadline the child gets SIGINT first, as Ctrl-C would: pytest then stops and still
    writes its JUnit XML, so a stopped part reports the cells it did run. It is killed if it has
    not exited after ``INTERRUPT_GRACE`` seconds.
    """
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        code = proc.wait(timeout=max(ctx.left(), 1))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=INTERRUPT_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return "stopped at the part's budget"
    return "ok" if code == 0 else f"exit {code}"


# ------------------------------------------------------------------------------------ losses


def _value_and_grad(name, x, y, device, dtype, bf16, seed):
    """A registered loss (defaults) on ``x``: its value and d value / d x, as float64 on the CPU."""
    from dmlbook.losses import get_loss

    loss = get_loss(name).to(device=device, dtype=dtype)
    xd = x.detach().to(device=device, dtype=dtype).clone().requires_grad_(True)
    torch.manual_seed(seed)
    with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
        value = loss(xd, y.to(device))
    value.float().backward()
    return value.detach().double().cpu(), xd.grad.double().cpu()


def _rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    scale = float(ref.norm())
    diff = float((a - ref).norm())
    return diff / scale if scale > 0 else diff


def part_losses(ctx: Ctx) -> None:
    """Every registered loss on the device (float32, bf16 autocast) against float64 on the CPU."""
    from dmlbook.losses import available_losses, get_loss

    b, d = (16, 8) if ctx.smoke else (64, 128)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, d, generator=g, dtype=torch.float64)
    cpu = torch.device("cpu")
    batches = [torch.arange(b // 4).repeat_interleave(4), torch.arange(b // 2).repeat_interleave(2)]
    timing = [(80, 512), (320, 512)] if not ctx.smoke else [(16, 16)]
    ctx.emit(kind="registry", losses=available_losses())
    for name in available_losses():
        if ctx.left() < 2:
            ctx.emit(loss=name, status="skipped: part budget spent")
            continue
        row: dict[str, object] = {"loss": name}
        for y in batches:  # 4 images per class; N-pair-like losses need 2
            try:
                ref = _value_and_grad(name, x, y, cpu, torch.float64, False, 0)
                break
            except Exception as err:  # noqa: BLE001 (a loss that needs another batch)
                row["status"] = f"left out: {type(err).__name__}: {err}"
        else:
            ctx.emit(**row)
            continue
        row.pop("status", None)
        row["k"] = int((y == y[0]).sum())
        again = _value_and_grad(name, x, y, cpu, torch.float64, False, 1)
        row["stochastic"] = not torch.equal(ref[0], again[0])
        for label, dtype, bf16 in (("fp32", torch.float32, False), ("bf16", torch.float32, True)):
            try:
                value, grad = _value_and_grad(name, x, y, ctx.device, dtype, bf16, 0)
                row[f"{label}_finite"] = bool(torch.isfinite(grad).all() and value.isfinite())
                row[f"{label}_value_rel"] = _rel(value, ref[0])
                row[f"{label}_grad_rel"] = _rel(grad, ref[1])
            except Exception as err:  # noqa: BLE001
                row[f"{label}_error"] = f"{type(err).__name__}: {err}"
        for bt, dt in timing:
            row[f"ms_B{bt}"] = _loss_ms(get_loss(name), bt, dt, row["k"], ctx.device, ctx.smoke)
        ctx.emit(status="ok", **row)


def _loss_ms(loss, b: int, d: int, k: int, device: torch.device, smoke: bool) -> float | None:
    """Device milliseconds of one float32 forward + backward of ``loss`` on a (b, d) batch."""
    g = torch.Generator().manual_seed(1)
    x = torch.nn.functional.normalize(torch.randn(b, d, generator=g), dim=1).to(device)
    x.requires_grad_(True)
    y = torch.arange(b // k).repeat_interleave(k).to(device)
    loss = loss.to(device)

    def call() -> None:
        loss(x, y).backward()
        x.grad = None

    try:
        return round(timed_ms(call, device, 2 if smoke else 20, 1 if smoke else 3), 4)
    except Exception:  # noqa: BLE001 (recorded as missing)
        return None


# ------------------------------------------------------------------------------------ training


class _RandomImages:
    """Random images standing in for a cached data set: what the engine's Source reads."""

    name = "random"

    def __init__(self, n: int, size: int, classes: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.inputs = torch.rand(n, 3, size, size, generator=g)
        self.labels = torch.arange(n) % classes
        self.size = size

    def describe(self) -> str:
        return f"{len(self.labels)} random {self.size} px images"


def _config_run(name: str, overrides: list[str], device: torch.device, compiled: bool):
    """The engine's pieces for a config: trainer, batch iterator, loss, config."""
    from bench_training import config_trainer

    from dmlbook.data import PKSampler
    from dmlbook.engine import load_config
    from dmlbook.engine.data import Source

    cfg = load_config(name, [*overrides, f"train.compile={str(compiled).lower()}"])
    t = cfg.train
    trainer, model, loss_fn = config_trainer(cfg, device)
    classes = 2 * t.batch_size // t.k
    data = _RandomImages(2 * t.batch_size, cfg.data.resize, classes)
    source = Source(data, cfg, device, model.input_spec, train=True)
    sampler = PKSampler(source.labels, t.batch_size, t.k, seed=0)
    generator = torch.Generator().manual_seed(0)

    def forever():
        while True:
            yield from sampler

    batches = source.train_batches(forever(), generator)
    return cfg, trainer, batches, loss_fn, model.dim


def _measure_config(ctx: Ctx, name: str, compiled: bool, iters: int, warmup: int) -> dict:
    from bench_training import spec_of

    from dmlbook.engine.dry_run import dry_run

    overrides = SMOKE_OVERRIDES if ctx.smoke else []
    cfg, trainer, batches, loss_fn, dim = _config_run(name, overrides, ctx.device, compiled)
    t = cfg.train
    for _ in range(warmup):
        trainer.step(*next(batches))
    reset_peak(ctx.device)
    step_ms = timed_ms(lambda: trainer.step(*next(batches)), ctx.device, iters, 0)
    peak = peak_gib(ctx.device)
    input_ms = timed_ms(lambda: next(batches), ctx.device, iters, 0)
    loss_ms = _loss_ms(loss_fn, t.batch_size, dim, t.k, ctx.device, ctx.smoke)
    row = {
        "config": name, "mode": "compile" if compiled else "eager", "batch": t.batch_size,
        "crop": cfg.data.crop, "precision": "bf16" if t.bf16 else "fp32",
        "channels_last": t.channels_last, "images_per_s": t.batch_size * 1000 / step_ms,
        "step_ms": step_ms, "input_ms": input_ms, "loss_ms": loss_ms,
        "loss_share": None if loss_ms is None else loss_ms / step_ms, "peak_gib": peak,
        "iters": iters, "warmup": warmup,
    }  # fmt: skip
    if not compiled:  # the prediction is the same for both modes
        spec = spec_of(ctx.device)
        report = dry_run(cfg, gpu=spec, check_fit=False)
        row.update(
            gpu_spec=spec, predicted_images_per_s=report.images_per_s,
            predicted_gib=report.memory_gib, utilization=report.utilization,
            implied_utilization=report.utilization * row["images_per_s"] / report.images_per_s,
        )  # fmt: skip
    return row


def part_training(ctx: Ctx) -> None:
    """Each benchmark config's training step, eager then compiled, beside its dry run."""
    if ctx.device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    iters, warmup = (1, 1) if ctx.smoke else (20, 5)
    # each compiled backbone right after its eager run, so that a short budget still measures one
    # compile (the first H200 run spent its 170 s on the eager configs), then the other configs
    plan = [(n, c) for n in COMPILED for c in (False, True)]
    plan += [(n, False) for n in CONFIGS if n not in COMPILED]
    if ctx.smoke:  # one config per backbone, eager: compiling on a CPU takes minutes
        plan = [(n, False) for n in COMPILED]
    needed = {False: 10.0, True: 75.0} if not ctx.smoke else {False: 2.0, True: 10.0}
    for name, compiled in plan:
        if ctx.left() < needed[compiled]:
            ctx.emit(config=name, mode="compile" if compiled else "eager",
                     status=f"skipped: {ctx.left():.0f} s left of the part's budget")  # fmt: skip
            continue
        try:
            ctx.emit(status="ok", **_measure_config(ctx, name, compiled, iters, warmup))
        except Exception as err:  # noqa: BLE001
            traceback.print_exc()
            ctx.emit(config=name, mode="compile" if compiled else "eager",
                     status=f"error: {type(err).__name__}: {err}")  # fmt: skip
        finally:
            if ctx.device.type == "cuda":
                torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------ recall


def part_recall(ctx: Ctx) -> None:
    """Recall@K and MAP@R over SOP's test-set size, on the device; R@1 checked on the CPU."""
    from dmlbook.evaluate import retrieval_metrics

    n, d = (3_000, 32) if ctx.smoke else (SOP_TEST, 512)
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(n) * 11_316 // SOP_TEST  # SOP's test split: 11,316 products
    centers = torch.randn(int(labels.max()) + 1, d, generator=g)
    x = centers[labels] + 1.5 * torch.randn(n, d, generator=g)
    ks = tuple(k for k in (1, 10, 100, 1000) if k < n)
    xd = x.to(ctx.device)
    retrieval_metrics(xd[:2048], labels[:2048], (1,), device=ctx.device)  # warm-up
    reset_peak(ctx.device)
    best, out = math.inf, {}
    for _ in range(2 if not ctx.smoke else 1):
        sync(ctx.device)
        start = time.perf_counter()
        out = retrieval_metrics(xd, labels, ks, device=ctx.device)
        sync(ctx.device)
        best = min(best, time.perf_counter() - start)
    sub = 6_000 if not ctx.smoke else 1_000
    on_cpu = retrieval_metrics(x[:sub], labels[:sub], (1,), metrics=("recall",), device="cpu")
    on_dev = retrieval_metrics(xd[:sub], labels[:sub], (1,), metrics=("recall",), device=ctx.device)
    ctx.emit(status="ok", n=n, d=d, ks=list(ks), seconds=best, peak_gib=peak_gib(ctx.device),
             metrics=out, subset=sub, subset_R1_cpu=on_cpu["R@1"], subset_R1_device=on_dev["R@1"])  # fmt: skip


# ------------------------------------------------------------------------------------ omniglot


def part_omniglot(ctx: Ctx) -> None:
    """The fair Omniglot comparison at GPU scale, through its own bench script."""
    script = HERE / "omniglot_compare.py"
    if not script.is_file():
        ctx.emit(status=f"not run: {script.name} is not in this tree")
        return
    out = ctx.out / "omniglot"
    scale = ["--smoke"] if ctx.smoke else ["--scale", "gpu", "--seeds", "0", "1", "2"]
    cmd = [sys.executable, str(script), "--device", ctx.device.type, *scale,
           "--out-dir", str(out), "--budget-s", f"{max(ctx.left() - 10, 5):.0f}"]  # fmt: skip
    ctx.emit(status=run_child(ctx, cmd),
             files=sorted(p.name for p in out.glob("*")) if out.is_dir() else [])  # fmt: skip


# ------------------------------------------------------------------------------------ torchrun


def part_torchrun(ctx: Ctx) -> None:
    """``dmlbook train`` under torchrun, one process on the device (NCCL on a GPU, else gloo)."""
    run_dir = Path(tempfile.mkdtemp(prefix="gpu_check_torchrun_"))  # $OUT brings back 8 files
    iters = 4 if ctx.smoke else 60
    sets = [
        f"train.device={ctx.device.type}", f"train.iterations={iters}",
        f"train.epoch_iters={iters // 2}", f"train.out_dir={run_dir}", "train.tensorboard=false",
        f"train.bf16={str(ctx.device.type == 'cuda').lower()}",
    ]  # fmt: skip
    if ctx.smoke:
        sets += ["train.batch_size=8", "train.k=2", "data.options.num_classes=8",
                 "data.options.images_per_class=6", "model.backbone_options.width=4",
                 "train.ks=[1,2,4]"]  # fmt: skip
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
           "-m", "dmlbook.cli", "train", "--config", "synthetic_ms_cpu", "--quiet"]  # fmt: skip
    for s in sets:
        cmd += ["--set", s]
    start = time.perf_counter()
    status = run_child(ctx, cmd)
    seconds = time.perf_counter() - start
    run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    if status == "ok" and not run.get("complete"):
        status = "incomplete: run.json does not say complete"
    ctx.emit(status=status, seconds=seconds, iterations=run.get("iteration"),
             process_group=run.get("process_group"), world_size=run.get("world_size"),
             device=run.get("device"),
             best_R1=(run.get("best") or {}).get("metrics", {}).get("R@1"))  # fmt: skip


# ------------------------------------------------------------------------------------ chapters


def part_chapters(ctx: Ctx) -> None:
    """Every chapter under nbval on this machine's CPU, in parallel (where nbval imports)."""
    try:
        import nbval  # noqa: F401
        import xdist  # noqa: F401
    except ImportError as err:
        ctx.emit(status=f"not run: {err.name} is not installed here (carry it as a wheel)")
        return
    book = sorted((ROOT / "book").glob("[0-9]*.ipynb"))
    if ctx.smoke:
        book = [p for p in book if p.name.startswith("90_")]
    xml = ctx.out / "chapters.xml"
    workers = min(len(book), max(1, (os.cpu_count() or 2) - 1))
    # the kernels start in book/: a relative PYTHONPATH entry ("." of `make gpu-check`) would
    # point there, so the source tree goes first as an absolute path
    path = os.pathsep.join(
        [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_WAIT_POLICY="PASSIVE", PYTHONPATH=path)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
           "--nbval-current-env", "--nbval-sanitize-with", "book/sanitize.cfg",
           "--nbval-cell-timeout=300", f"--junitxml={xml}", "-n", str(workers), "--dist", "loadfile",
           *map(str, book)]  # fmt: skip
    status = run_child(ctx, cmd, env)
    from gpu_check_report import junit_counts

    ctx.emit(status=status, cpu=cpu_description(), chapters=len(book), **junit_counts(xml))  # fmt: skip


PARTS = {
    "losses": part_losses, "training": part_training, "recall": part_recall,
    "omniglot": part_omniglot, "torchrun": part_torchrun, "chapters": part_chapters,
}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=["machine", *sorted(PARTS)])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--budget-s", type=float, required=True)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args()
    start = time.perf_counter()
    cuda = torch.cuda.is_available() and not args.smoke
    device = torch.device("cuda" if cuda else "cpu")
    ctx = Ctx(args.out, device, start + args.budget_s, args.smoke, args.part)
    if args.part == "machine":  # first, once per run: what it ran on
        ctx.emit(kind="machine", device=device_name(device), cpu=cpu_description(),
                 torch=torch.__version__, cuda=torch.version.cuda, smoke=args.smoke,
                 cpus=os.cpu_count(), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 cuda_available=torch.cuda.is_available())  # fmt: skip
        return 0
    try:
        PARTS[args.part](ctx)
    except Exception as err:  # noqa: BLE001 (the runner records the part's status)
        traceback.print_exc()
        ctx.emit(status=f"error: {type(err).__name__}: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
