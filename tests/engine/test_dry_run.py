"""Tests of dmlbook.engine.dry_run: every shipped config passes; a config too large fails clearly.

Independent references: ResNet-50's parameter count and forward cost as torchvision documents
them (25,557,032 parameters with its 1000-class ``fc``; 4.09 GFLOPS, i.e. multiply-adds, per
224 px image), the usual rule that a training step costs three forward passes, and the
datasheet numbers of ``dmlbook/data/gpu_specs.csv`` worked by hand.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from dmlbook.cli import main
from dmlbook.engine import load_config
from dmlbook.engine.config import ConfigError
from dmlbook.engine.dry_run import (
    CUDA_OVERHEAD_GIB,
    DEFAULT_UTILIZATION,
    GIB,
    DoesNotFit,
    dry_run,
    gpu_spec,
    gpu_specs,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))  # configs other helpers add are covered


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_passes_the_dry_run(path):
    report = dry_run(path)  # raises DoesNotFit if the config cannot fit one H100
    cfg = load_config(path)
    assert report.fits and report.memory_gib <= 0.9 * gpu_spec("h100_sxm").memory_gib
    assert report.local_batch == cfg.train.batch_size and report.crop == cfg.data.crop
    assert report.parameters > 0 and report.flops_per_image > 0 and report.images_per_s > 0
    assert report.activation_bytes > 0 and report.memory_gib > CUDA_OVERHEAD_GIB


@pytest.mark.slow
def test_resnet50_matches_torchvision_figures():
    report = dry_run("gs_cars_resnet50")
    # torchvision's resnet50: 25,557,032 parameters, of which fc = 2048 x 1000 + 1000; this
    # config's head is Linear(2048, 64).
    assert report.parameters == 25_557_032 - 2_049_000 + 2048 * 64 + 64
    # 4.09 G multiply-adds forward = 8.18 GFLOPs; forward + backward about 3x that.
    assert report.flops_per_image == pytest.approx(3 * 2 * 4.09e9, rel=0.02)
    assert report.optimizer_bytes == 0  # SGD without momentum keeps no state


@pytest.mark.slow
def test_adam_state_is_two_float32_moments():
    report = dry_run("ms_cub_bninception")
    trainable = report.parameters  # every parameter of the MS model is trained
    assert report.optimizer_bytes == pytest.approx(2 * 4 * trainable, rel=0.01)


def test_activations_grow_with_the_batch():
    one = dry_run("synthetic_ms_cpu")
    cfg = load_config("synthetic_ms_cpu", ["train.batch_size=160"])
    two = dry_run(cfg)
    assert 1.8 < two.activation_bytes / one.activation_bytes < 2.3  # fixed parts are small
    assert two.flops_per_image == pytest.approx(one.flops_per_image, rel=1e-6)


def test_gpus_split_the_batch_and_multiply_throughput():
    cfg = load_config("synthetic_ms_cpu")
    one, four = dry_run(cfg), dry_run(cfg, gpus=4)
    assert four.local_batch == 20 and four.activation_bytes < one.activation_bytes / 3
    with pytest.raises(ConfigError, match=r"P=16 classes x k=5\) does not split over 3 GPUs"):
        dry_run(cfg, gpus=3)


def test_roofline_by_hand():
    base = dry_run("synthetic_ms_cpu")
    spec = gpu_spec("a100_sxm_80gb")
    r = dataclasses.replace(
        base, gpu=spec, precision="bf16", local_batch=100, gpus=2, utilization=0.5,
        flops_per_image=30e9, loss_flops=0.0, activation_bytes=10 * GIB, param_bytes=0,
        grad_bytes=0, optimizer_bytes=0,
    )  # fmt: skip
    compute = 100 * 30e9 / 312e12  # 9.6 ms at the A100's 312 dense BF16 TFLOP/s
    memory = 2 * 10 * GIB / 2039e9  # 10.5 ms at 2,039 GB/s: memory-bound
    assert r.bound == "memory"
    assert r.step_seconds == pytest.approx(max(compute, memory) / 0.5)
    assert r.images_per_s == pytest.approx(2 * 100 / r.step_seconds)
    fp32 = dataclasses.replace(r, precision="fp32", activation_bytes=0)
    assert fp32.step_seconds == pytest.approx(100 * 30e9 / 156e12 / 0.5)  # TF32 peak


def test_gpu_specs_are_dense_datasheet_numbers():
    h100 = gpu_spec("h100_sxm")
    assert (h100.bf16_tflops, h100.bandwidth_gb_s, h100.memory_gb) == (989.4, 3350, 80)
    for s in gpu_specs().values():  # dense Tensor Core BF16 is twice TF32 on Ampere and Hopper
        assert s.source and s.bf16_tflops == pytest.approx(2 * s.tf32_tflops, rel=1e-3)
    with pytest.raises(ValueError, match="unknown GPU 'v100'; known: h100_sxm"):
        gpu_spec("v100")


@pytest.mark.slow
def test_a_config_that_cannot_fit_fails_with_the_fix():
    cfg = load_config("ms_sop_bninception", ["train.bf16=false"])  # batch 1000 in float32
    with pytest.raises(DoesNotFit) as err:
        dry_run(cfg, gpu="a100_sxm_40gb")
    message = str(err.value)
    assert "config 'ms_sop_bninception' does not fit on NVIDIA A100 SXM4 40GB" in message
    assert "for 1000 images of 227 px" in message and "of its 37.3 GiB" in message
    assert "Lower train.batch_size (about" in message and "torchrun --nproc-per-node N" in message
    report = dry_run(cfg, gpu="a100_sxm_40gb", check_fit=False)
    assert not report.fits and report.memory_gib > 0.9 * 37.25
    per_image = report.activation_bytes / GIB / 1000
    assert report.memory_gib - 750 * per_image < 0.9 * 37.25  # 250 images per GPU would fit


def test_cli_dry_run_reports_and_fails_in_one_line(capsys):
    assert main(["train", "--config", "synthetic_ms_cpu", "--dry-run", "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert yaml.safe_load(out)["name"] == "synthetic_ms_cpu"  # the report lines are comments
    assert "# dry run of synthetic_ms_cpu on 2 x NVIDIA H100 SXM5 80GB (batch 80 = 2 x 40" in out
    assert "# FLOPs per image (forward + backward):" in out
    assert f"at {100 * DEFAULT_UTILIZATION:.0f} % of peak" in out
    code = main(["train", "--config", "synthetic_ms_cpu", "--dry-run", "--gpu-memory", "0.5"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("dmlbook train: error: config 'synthetic_ms_cpu' does not fit")


def test_numpy_integer_gpu_counts_and_utilisations_are_accepted():
    """Issue 38: gpus=numpy.int64(4) is 4 GPUs; a bool is refused."""
    import numpy as np

    from dmlbook.engine.dry_run import _checked

    cfg = load_config("synthetic_ms_cpu")
    assert _checked(cfg, np.int64(1), np.int64(1)) == _checked(cfg, 1, 1)
    with pytest.raises(ConfigError, match="gpus must be a positive integer"):
        _checked(cfg, True, 1)
