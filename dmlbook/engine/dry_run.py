"""The dry run: a config at benchmark scale on fake tensors, without data and without a GPU.

:func:`dry_run` builds the config's model and optimiser under PyTorch's
:class:`~torch._subclasses.fake_tensor.FakeTensorMode` (tensors with shapes, dtypes and
strides but no memory), runs one training step on a batch of the real shape (``batch_size /
gpus`` images of ``data.crop`` px per GPU, bf16 autocast as the config asks) and measures:

* **memory per GPU**, by category, with PyTorch's ``MemTracker``
  (``torch.distributed._tools.mem_tracker``): parameters, gradients, optimiser state and the
  activations kept for the backward pass, at the step's peak; plus the loss on the gathered
  global batch (computed for real on the CPU: its pair mining reads values, which fake tensors do
  not have) and a fixed :data:`CUDA_OVERHEAD_GIB` for the CUDA context and library workspaces;
* **FLOPs per image** of the forward and backward pass, with
  :class:`torch.utils.flop_counter.FlopCounterMode`;
* **predicted throughput** on a GPU of :file:`dmlbook/data/gpu_specs.csv` (peak FLOP/s and
  memory bandwidth from NVIDIA's datasheets) at a stated utilisation ``u``: a roofline, the step
  takes ``max(FLOPs / (u x peak), bytes / (u x bandwidth))``.

It fails early, with :class:`DoesNotFit`, when the memory exceeds :data:`USABLE_FRACTION` of the
GPU's. What it leaves out: the input pipeline (JPEG decoding, which often bounds DML training,
see Chapter 14), gradient all-reduce time between GPUs, and kernel launch overheads; channels-last
changes neither the FLOPs nor the bytes and is not emulated.

Tests: ``tests/engine/test_dry_run.py`` (every ``configs/*.yaml`` passes; a config too large
for its GPU fails with the message); Chapter 14, Section 14.11; CLI ``dmlbook train
--dry-run``.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils.flop_counter import FlopCounterMode

from ..core.validation import is_integer, is_number
from .build import build_loss, build_model, build_optimizer
from .config import (
    Config,
    ConfigError,
    DataConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
    load_config,
)

__all__ = [
    "CUDA_OVERHEAD_GIB",
    "DEFAULT_UTILIZATION",
    "DoesNotFit",
    "DryRunReport",
    "GPUSpec",
    "USABLE_FRACTION",
    "dry_run",
    "gpu_spec",
    "gpu_specs",
]

SPECS_FILE = Path(__file__).resolve().parents[1] / "data" / "gpu_specs.csv"
#: Share of the GPU's memory a run may plan to use (the rest: allocator fragmentation).
USABLE_FRACTION = 0.9
#: CUDA context and cuDNN/cuBLAS workspaces, added to every GPU's estimate (GiB).
CUDA_OVERHEAD_GIB = 1.0
#: Default utilisation of peak, measured: this engine's training step (eager, bf16, channels-last,
#: its GPU input path included) on an NVIDIA H200 ran at u = 0.014 (liu_cub_bninception, batch
#: 80), 0.017 (ms_cub_bninception, 80), 0.046 (ms_sop_bninception, 1,000) and 0.066
#: (gs_cars_resnet50, 128) of this roofline (`make gpu-check`, bench/results/gpu_check_h200.md);
#: 0.03 is their geometric mean, within a factor of 2.2 of each. NVIDIA's tuned ResNet-50 figures
#: (DALI, CUDA graphs) reach about 0.19 (Chapter 14, Section 14.11).
DEFAULT_UTILIZATION = 0.03
GIB = 2**30


class DoesNotFit(ConfigError):
    """A config whose training step needs more memory than the GPU has."""


@dataclass(frozen=True)
class GPUSpec:
    """Peak numbers of a GPU from its datasheet (dense Tensor Core FLOP/s; see ``source``)."""

    gpu: str
    name: str
    bf16_tflops: float
    tf32_tflops: float
    fp32_tflops: float
    bandwidth_gb_s: float
    memory_gb: float
    source: str

    @property
    def memory_gib(self) -> float:
        """The datasheet's GB (10^9 bytes) in GiB."""
        return self.memory_gb * 1e9 / GIB


@cache
def gpu_specs() -> dict[str, GPUSpec]:
    """The GPUs of ``dmlbook/data/gpu_specs.csv`` by key (``h100_sxm``, ``a100_sxm_80gb``...)."""
    with open(SPECS_FILE, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    numbers = ("bf16_tflops", "tf32_tflops", "fp32_tflops", "bandwidth_gb_s", "memory_gb")
    return {
        r["gpu"]: GPUSpec(**{k: float(v) if k in numbers else v for k, v in r.items()})
        for r in rows
    }


def gpu_spec(gpu: str | GPUSpec) -> GPUSpec:
    """A :class:`GPUSpec` by key; raises ``ValueError`` listing the known keys."""
    if isinstance(gpu, GPUSpec):
        return gpu
    specs = gpu_specs()
    if gpu not in specs:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(specs)}.")
    return specs[gpu]


@dataclass
class DryRunReport:
    """What :func:`dry_run` measured and predicted for one config on one kind of GPU.

    Memory figures are bytes per GPU; ``flops_per_image`` counts the forward and backward
    pass of the model (the loss's FLOPs per step are ``loss_flops``).
    """

    name: str
    backbone: str
    gpu: GPUSpec
    gpus: int
    global_batch: int
    local_batch: int
    crop: int
    precision: str
    utilization: float
    parameters: int
    param_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    other_bytes: int
    loss_bytes: int
    flops_per_image: float
    loss_flops: float
    capacity_gib: float

    @property
    def memory_gib(self) -> float:
        """Predicted peak memory per GPU, CUDA overhead included."""
        model = self.param_bytes + self.grad_bytes + self.optimizer_bytes
        total = model + self.activation_bytes + self.other_bytes + self.loss_bytes
        return total / GIB + CUDA_OVERHEAD_GIB

    @property
    def fits(self) -> bool:
        """Whether :attr:`memory_gib` is within :data:`USABLE_FRACTION` of the GPU's memory."""
        return self.memory_gib <= USABLE_FRACTION * self.capacity_gib

    @property
    def peak_flops(self) -> float:
        """Peak FLOP/s used: dense BF16 under autocast, else TF32 (PyTorch's default for
        cuDNN convolutions, which dominate these backbones)."""
        tflops = self.gpu.bf16_tflops if self.precision == "bf16" else self.gpu.tf32_tflops
        return tflops * 1e12

    @property
    def traffic_bytes(self) -> float:
        """Memory traffic of one step, a lower bound: activations written in the forward and
        read in the backward pass, float32 parameters read twice and gradients written and read
        once, optimiser state read and written."""
        return (
            2 * self.activation_bytes
            + 2 * self.param_bytes
            + 2 * self.grad_bytes
            + 2 * self.optimizer_bytes
        )

    @property
    def step_seconds(self) -> float:
        """Roofline time of one step on one GPU at :attr:`utilization`."""
        compute = (self.flops_per_image * self.local_batch + self.loss_flops) / self.peak_flops
        memory = self.traffic_bytes / (self.gpu.bandwidth_gb_s * 1e9)
        return max(compute, memory) / self.utilization

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"``: which roof the step hits."""
        compute = (self.flops_per_image * self.local_batch + self.loss_flops) / self.peak_flops
        return (
            "compute"
            if compute >= self.traffic_bytes / (self.gpu.bandwidth_gb_s * 1e9)
            else ("memory")
        )

    @property
    def images_per_s(self) -> float:
        """Predicted training images/s of the whole run (all GPUs; no communication time)."""
        return self.gpus * self.local_batch / self.step_seconds

    def row(self) -> dict[str, Any]:
        """One rounded table row (the chapter's dry-run table)."""
        return {
            "config": self.name,
            "backbone": self.backbone,
            "batch / GPU": self.local_batch,
            "crop": self.crop,
            "precision": self.precision,
            "params (M)": round(self.parameters / 1e6, 1),
            "activations (GiB)": round(self.activation_bytes / GIB, 2),
            "optimiser (GiB)": round(self.optimizer_bytes / GIB, 3),
            "memory / GPU (GiB)": round(self.memory_gib, 1),
            "GFLOPs / image": round(self.flops_per_image / 1e9, 2),
            "images/s": int(round(self.images_per_s, -1)),
            "bound": self.bound,
        }

    def describe(self) -> str:
        """A few lines for the command line."""
        r = self.row()
        lines = [
            f"dry run of {self.name} on {self.gpus} x {self.gpu.name} "
            f"(batch {self.global_batch} = {self.gpus} x {self.local_batch}, {self.crop} px, "
            f"{self.precision})",
            f"parameters: {self.parameters:,}",
            f"memory per GPU: {r['memory / GPU (GiB)']} GiB of {self.capacity_gib:.1f} "
            f"(activations {r['activations (GiB)']}, parameters + gradients + optimiser "
            f"{(self.param_bytes + self.grad_bytes + self.optimizer_bytes) / GIB:.2f}, loss "
            f"{self.loss_bytes / GIB:.3f}, other {self.other_bytes / GIB:.2f}, CUDA "
            f"{CUDA_OVERHEAD_GIB:.1f})",
            f"FLOPs per image (forward + backward): {r['GFLOPs / image']} GFLOPs",
            f"predicted: {r['images/s']:,} images/s at {100 * self.utilization:.0f} % of peak "
            f"({self.peak_flops / 1e12:.0f} TFLOP/s, {self.gpu.bandwidth_gb_s:,.0f} GB/s per "
            f"GPU; {self.bound}-bound; data loading and communication not included)",
        ]
        return "\n".join(lines)


def _checked(cfg: Config, gpus: int, utilization: float) -> int:
    """The per-GPU batch; raises :class:`ConfigError` for a bad GPU count or utilisation."""
    t = cfg.train
    if not is_integer(gpus) or gpus < 1:
        raise ConfigError(f"gpus must be a positive integer, got {gpus!r}.")
    if not (is_number(utilization) and 0 < utilization <= 1):
        raise ConfigError(f"utilization must be a fraction in (0, 1], got {utilization!r}.")
    p = t.batch_size // t.k
    if p % gpus:
        raise ConfigError(
            f"train.batch_size={t.batch_size} (P={p} classes x k={t.k}) does not split over "
            f"{gpus} GPUs: each GPU takes P / {gpus} whole classes; use P a multiple of {gpus}."
        )
    return t.batch_size // gpus


def _model_step(cfg: Config, local_batch: int) -> tuple[dict[str, int], float, int, int]:
    """Fake-tensor step of the model: (peak bytes by category, FLOPs, parameters, dim).

    The step takes seconds (every operator goes through the fake-tensor, FLOP-counting and
    memory-tracking modes) and depends only on the fields below, so it is computed once per
    distinct set of them (the MS configs of CUB and Cars share one).
    """
    m, o = cfg.model, cfg.optim
    key = {
        "model": {**asdict(m), "pretrained": None},
        "optim": {"name": o.name, "momentum": o.momentum},
        "crop": cfg.data.crop,
        "bf16": cfg.train.bf16,
        "batch": local_batch,
    }
    return _fake_step(json.dumps(key, sort_keys=True))


@lru_cache(maxsize=16)
def _fake_step(key: str) -> tuple[dict[str, int], float, int, int]:
    """:func:`_model_step` for the fields in ``key`` (JSON)."""
    k = json.loads(key)
    cfg = Config(
        model=ModelConfig(**k["model"]),
        optim=OptimConfig(**k["optim"]),
        data=DataConfig(crop=k["crop"], resize=k["crop"]),
        train=TrainConfig(bf16=k["bf16"]),
    )
    local_batch = k["batch"]
    with FakeTensorMode():
        model = build_model(cfg, pretrained=False)
        model.train()
        opt = build_optimizer(cfg, model, nn.Module())  # the loss's parameters: see _loss_step
        params = [p for g in opt.param_groups for p in g["params"]]
        for group in opt.param_groups:  # one fake op per update step, not one per parameter
            group["foreach"] = True
        for p in params:  # create the optimiser state (Adam's moments) before measuring
            p.grad = torch.zeros_like(p)
        opt.step()
        opt.zero_grad(set_to_none=True)
        x = torch.empty(local_batch, 3, cfg.data.crop, cfg.data.crop)
        tracker = MemTracker()
        tracker.track_external(model, opt)
        with tracker, FlopCounterMode(display=False) as flops:
            with torch.autocast("cpu", torch.bfloat16, enabled=cfg.train.bf16):
                emb = model(x)
            emb = emb.float()
            emb.backward(torch.ones_like(emb))
            opt.step()
            opt.zero_grad(set_to_none=True)
        peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
        n_params = sum(p.numel() for p in model.parameters())
        dim = int(emb.shape[1])
    by_kind = {str(k).rsplit(".", 1)[-1]: int(v) for k, v in peak.items()}
    return by_kind, float(flops.get_total_flops()), n_params, dim


def _loss_step(cfg: Config, dim: int) -> tuple[int, float, int]:
    """The loss on the global batch, for real on the CPU: (peak bytes, FLOPs, parameters)."""
    t = cfg.train
    loss_fn = build_loss(cfg)
    g = torch.Generator().manual_seed(0)
    tracker = MemTracker()
    with tracker, FlopCounterMode(display=False) as flops:
        emb = torch.randn(t.batch_size, dim, generator=g).requires_grad_()
        labels = torch.arange(t.batch_size // t.k).repeat_interleave(t.k)
        loss_fn(emb, labels).backward()
    peak = next(iter(tracker.get_tracker_snapshot("peak").values()), {"Total": 0})
    extra = sum(p.numel() for p in loss_fn.parameters())
    # Loss parameters (proxies) in float32: value, gradient and two Adam moments.
    return int(peak["Total"]) + 16 * extra, float(flops.get_total_flops()), extra


def dry_run(
    config: Config | str | Path,
    *,
    gpu: str | GPUSpec = "h100_sxm",
    gpus: int = 1,
    utilization: float = DEFAULT_UTILIZATION,
    memory_gib: float | None = None,
    check_fit: bool = True,
) -> DryRunReport:
    """One fake training step of ``config``: memory per GPU, FLOPs per image, throughput.

    Parameters
    ----------
    config : Config, str or Path
        A config or config file (a shipped config by name works too).
    gpu : str or GPUSpec
        A key of ``dmlbook/data/gpu_specs.csv`` (``h100_sxm``, ``h100_pcie``, ``h200_sxm``,
        ``a100_sxm_80gb``, ``a100_sxm_40gb``).
    gpus : int
        Processes of the run (one per GPU): each gets ``batch_size / gpus`` images.
    utilization : float
        The stated fraction of peak FLOP/s and bandwidth the prediction assumes.
    memory_gib : float, optional
        The GPU's memory, if not the datasheet's.
    check_fit : bool
        Raise :class:`DoesNotFit` when the step does not fit (else only report it).

    Returns
    -------
    DryRunReport

    Raises
    ------
    DoesNotFit
        With the memory needed, where it goes and what to change.
    ConfigError
        For an invalid config, GPU count or utilisation.
    """
    cfg = config if isinstance(config, Config) else load_config(config)
    cfg.validate()
    spec = gpu_spec(gpu)
    local_batch = _checked(cfg, gpus, utilization)
    peak, flops, n_params, dim = _model_step(cfg, local_batch)
    loss_bytes, loss_flops, loss_params = _loss_step(cfg, dim)
    known = ("PARAM", "GRAD", "OPT", "ACT", "Total")
    report = DryRunReport(
        name=cfg.name,
        backbone=cfg.model.backbone,
        gpu=spec,
        gpus=gpus,
        global_batch=cfg.train.batch_size,
        local_batch=local_batch,
        crop=cfg.data.crop,
        precision="bf16" if cfg.train.bf16 else "fp32",
        utilization=float(utilization),
        parameters=n_params + loss_params,
        param_bytes=peak.get("PARAM", 0) + peak.get("BUFFER", 0),
        grad_bytes=peak.get("GRAD", 0),
        optimizer_bytes=peak.get("OPT", 0),
        activation_bytes=peak.get("ACT", 0),
        other_bytes=sum(v for k, v in peak.items() if k not in (*known, "BUFFER")),
        loss_bytes=loss_bytes,
        flops_per_image=flops / local_batch,
        loss_flops=loss_flops,
        capacity_gib=spec.memory_gib if memory_gib is None else float(memory_gib),
    )
    if check_fit and not report.fits:
        raise DoesNotFit(_too_large(report))
    return report


def _too_large(r: DryRunReport) -> str:
    per_image = r.activation_bytes / GIB / r.local_batch
    fitting = math.floor(
        (USABLE_FRACTION * r.capacity_gib - (r.memory_gib - r.activation_bytes / GIB)) / per_image
    )
    on = r.gpu.name if r.capacity_gib == r.gpu.memory_gib else f"a {r.capacity_gib:.1f} GiB GPU"
    return (
        f"config {r.name!r} does not fit on {on}: one training step needs about "
        f"{r.memory_gib:.1f} GiB per GPU (activations {r.activation_bytes / GIB:.1f} GiB for "
        f"{r.local_batch} images of {r.crop} px, {per_image * 1024:.0f} MiB each), more than "
        f"{100 * USABLE_FRACTION:.0f} % of its {r.capacity_gib:.1f} GiB. Lower train.batch_size "
        f"(about {max(fitting, 0)} images fit per GPU), spread the batch over more GPUs "
        "(torchrun --nproc-per-node N: each GPU takes batch_size / N images, the loss still "
        "sees the whole P x K batch)"
        + (", or set train.bf16=true." if r.precision == "fp32" else ".")
    )
