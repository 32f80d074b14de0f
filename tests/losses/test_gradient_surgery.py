"""Tests of dmlbook.losses.gradient_surgery: the designed-gradient module (its spec, its backward through the
normalisation layer) and the loss on every training path: ``fit`` (chapters) and the
config-driven engine, with SGD without momentum (Xuan & Pless, Sec. 4). Chapter:
book/13_gradient_surgery.ipynb.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from surgery.strategies import unit_batches
from tiny_run import tiny_config

import dmlbook
from dmlbook.data import load_dataset
from dmlbook.engine import load_config, train
from dmlbook.engine.build import build_loss, build_model, build_optimizer
from dmlbook.losses import CosineTripletLoss, get_loss
from dmlbook.losses.gradient_surgery import GradientSurgeryLoss
from dmlbook.models import EmbeddingMLP
from dmlbook.surgery.gradient import SurgerySpec
from dmlbook.training import fit

pytestmark = pytest.mark.usefixtures("one_thread")
BEST = {"direction": "cos_orth", "pair_weight": "lin_ms", "triplet_weight": "cir"}


def test_fit_with_plain_sgd_learns():
    """Omniglot as in Chapter 13.7: recall rises; the logged gap S_an - S_ap stays finite."""
    train_set, test_set = load_dataset("omniglot", "train"), load_dataset("omniglot", "test")
    dmlbook.seed_everything(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), EmbeddingMLP(784, (128,), dim=32))
    history = fit(model, get_loss("gradient_surgery", **BEST), train_set, test_set, epochs=2,
                  batch_size=64, k=4, lr=1.0, optimizer="sgd", momentum=0.0, ks=(1,),
                  progress=False)  # fmt: skip
    assert history["R@1"].iloc[-1] > history["R@1"].iloc[0] + 0.1
    assert np.isfinite(history["loss"].iloc[1:]).all()


def test_engine_trains_a_designed_gradient_with_plain_sgd(tmp_path):
    cfg = load_config(
        tiny_config(
            tmp_path / "run",
            loss={"name": "gradient_surgery", "params": BEST},
            optim={"name": "sgd", "lr": 0.05, "momentum": 0.0},
        )
    )
    loss = build_loss(cfg)
    assert isinstance(loss, GradientSurgeryLoss) and loss.spec.direction == "cos_orth"
    opt = build_optimizer(cfg, build_model(cfg), loss)
    assert isinstance(opt, torch.optim.SGD)
    assert all(group["momentum"] == 0.0 for group in opt.param_groups)
    result = train(cfg, progress=False, verbose=False)
    log = pd.read_csv(result.out_dir / "train_log.csv")
    assert np.isfinite(log["loss"]).all()


def test_module_spec_round_trips():
    loss = GradientSurgeryLoss(direction="euc", selection="sc2")
    assert loss.spec == SurgerySpec(direction="euc", selection="sc2")
    with pytest.raises(TypeError) as refused:
        loss.loss_on_similarity(torch.eye(2), torch.tensor([0, 1]))
    assert str(refused.value) == (
        "gradient_surgery acts on embeddings, not on S (its orthogonal directions are no "
        "weights on S); call the module as loss(embeddings, labels)."
    )


def test_module_checks_its_settings_at_construction_and_after_a_change_only(monkeypatch):
    """Forward calls reuse the spec checked at construction (no SurgerySpec.check per call); an
    attribute assigned afterwards is checked then, and a bad one refused and not stored."""
    loss = GradientSurgeryLoss(direction="cos-orth", pair_weight="lin_ms")
    checks = []
    real = SurgerySpec.check
    monkeypatch.setattr(SurgerySpec, "check", lambda spec: (checks.append(1), real(spec))[1])
    x, y = torch.randn(8, 4, dtype=torch.float64), torch.arange(4).repeat_interleave(2)
    for _ in range(3):
        loss(x, y)
    assert checks == [] and loss.spec.direction == "cos_orth"
    loss.alpha = 3.0
    assert loss.spec.alpha == 3.0 and checks == [1]
    loss(x, y)
    assert checks == [1]
    with pytest.raises(ValueError, match="alpha"):
        loss.alpha = -1.0
    assert loss.alpha == 3.0 and loss.spec.alpha == 3.0


@settings(max_examples=20, deadline=None)
@given(unit_batches())
def test_module_backward_goes_through_the_normalisation(batch):
    """GradientSurgeryLoss on unnormalised x = autograd of Eq. 4 (CosineTripletLoss) on x."""
    f, y = batch
    x = (f * torch.linspace(0.5, 2.0, len(y), dtype=f.dtype)[:, None]).requires_grad_(True)
    tau = 3.0
    (want,) = torch.autograd.grad(CosineTripletLoss(tau)(x, y), x)
    module = get_loss(
        "gradient_surgery", pair_weight="con", triplet_weight="cos", tau=tau, scale=tau
    )
    (got,) = torch.autograd.grad(module(x, y), x)
    assert torch.allclose(got, want, atol=1e-10, rtol=0)


def test_module_refuses_masks_naming_what_to_do():
    loss = get_loss("gradient_surgery")
    x, y = torch.randn(4, 3), torch.tensor([0, 0, 1, 1])
    for mask in ("pos_mask", "neg_mask"):
        with pytest.raises(ValueError) as refused:
            loss(x, y, **{mask: torch.ones(4, 4, dtype=torch.bool)})
        assert str(refused.value) == (
            "gradient_surgery selects its own easy-positive / hard-negative triplets; "
            "call it without pos_mask/neg_mask."
        )


def _cos_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(12, 5, generator=g) * torch.linspace(0.5, 2.0, 12)[:, None]
    return x.to(torch.bfloat16).float(), torch.arange(12) // 3  # bf16 values, exact in float32


def test_module_computes_bf16_and_autocast_in_float32():
    """Half precision and bf16 autocast are computed in float32: the gradient of bf16 embeddings
    is the float32 one rounded to bf16, and under autocast it is the float32 one; the float32
    one is Eq. 4's (autograd of CosineTripletLoss in float64, the reference above)."""
    x32, y = _cos_batch()
    tau = 3.0
    module = get_loss(
        "gradient_surgery", pair_weight="con", triplet_weight="cos", tau=tau, scale=tau
    )
    x64 = x32.double().requires_grad_(True)
    (want,) = torch.autograd.grad(CosineTripletLoss(tau)(x64, y), x64)
    x = x32.clone().requires_grad_(True)
    (g32,) = torch.autograd.grad(module(x, y), x)
    assert torch.allclose(g32.double(), want, atol=1e-6, rtol=0)
    xb = x32.to(torch.bfloat16).requires_grad_(True)
    (gb,) = torch.autograd.grad(module(xb, y), xb)
    assert gb.dtype == torch.bfloat16 and torch.equal(gb, g32.to(torch.bfloat16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (ga,) = torch.autograd.grad(module(x, y), x)
    assert torch.equal(ga, g32)


def test_module_has_a_first_derivative_only():
    """The designed gradient is no derivative of a loss: a second backward is refused."""
    x32, y = _cos_batch()
    x = x32.double().requires_grad_(True)
    (g,) = torch.autograd.grad(get_loss("gradient_surgery")(x, y), x, create_graph=True)
    with pytest.raises(RuntimeError, match="has a first derivative only"):
        g.pow(2).sum().backward()
