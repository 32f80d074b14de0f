"""Tests of dmlbook.models.head: the backbone registry, global pooling, and the embedding model
(unit norm under bf16 autocast, frozen BatchNorm statistics, frozen backbone, parameter groups)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dmlbook.models import EmbeddingModel, GlobalPool, available_backbones, build_backbone
from dmlbook.models.head import DEFAULT_WEIGHTS

pytestmark = pytest.mark.usefixtures("one_thread")


def test_backbone_registry():
    assert available_backbones() == ["bn_inception", "resnet18", "resnet50"]
    assert DEFAULT_WEIGHTS["resnet50"].endswith("resnet50-0676ba61.pth")  # V1, not V2
    assert DEFAULT_WEIGHTS["bn_inception"].endswith("bn_inception-52deb4733.pth")
    with pytest.raises(ValueError, match="Did you mean 'resnet50'"):
        build_backbone("resnet51")
    with pytest.raises(ValueError, match="bad options"):
        build_backbone("resnet18", depth=3)
    assert isinstance(build_backbone("resnet18", width=8).fc, nn.Identity)


def test_global_pooling_modes():
    x = torch.arange(8.0).view(1, 2, 2, 2)
    assert torch.equal(GlobalPool("max")(x), torch.tensor([[3.0, 7.0]]))
    assert torch.equal(GlobalPool("avg")(x), torch.tensor([[1.5, 5.5]]))
    assert torch.equal(GlobalPool("avg+max")(x), torch.tensor([[4.5, 12.5]]))
    with pytest.raises(ValueError, match="pooling must be one of"):
        GlobalPool("sum")


def _small(freeze_bn: bool = False, dim: int | None = 8) -> EmbeddingModel:
    torch.manual_seed(0)
    return EmbeddingModel(build_backbone("resnet18", width=8), dim, freeze_bn=freeze_bn)


def test_embedding_model_unit_norm_float32_under_bf16_autocast():
    model = _small()
    x = torch.randn(4, 3, 32, 32)
    with torch.autocast("cpu", torch.bfloat16):
        emb = model(x)
    assert emb.dtype == torch.float32 and emb.shape == (4, 8)
    assert torch.allclose(emb.norm(dim=1), torch.ones(4), atol=1e-5)
    assert _small(dim=None)(x).shape == (4, 64)
    assert model.input_spec.color == "RGB"
    with pytest.raises(TypeError, match="features"):
        EmbeddingModel(nn.Linear(3, 3), 8)


def test_frozen_bn_keeps_statistics_but_trains_affine():
    model = _small(freeze_bn=True).train()
    bns = [m for m in model.backbone.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns) and model.embedding.training
    stats = [m.running_mean.clone() for m in bns]
    weight = bns[0].weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(6, 3, 32, 32)).sum(0).pow(2).sum()
    loss.backward()
    opt.step()
    assert all(torch.equal(m.running_mean, s) for m, s in zip(bns, stats, strict=True))
    assert not torch.equal(bns[0].weight, weight)
    assert _small(freeze_bn=False).train().backbone.bn1.training


def test_frozen_backbone_and_param_groups():
    model = _small()
    groups = model.param_groups(1e-5, head_lr_mult=10)
    assert [g["name"] for g in groups] == ["backbone", "head"]
    assert groups[0]["lr"] == 1e-5 and groups[1]["lr"] == pytest.approx(1e-4)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    model.freeze_backbone(True)
    model.train()
    assert model.backbone_frozen and not model.backbone.training and model.embedding.training
    assert not any(p.requires_grad for p in model.backbone.parameters())
    model(torch.randn(4, 3, 32, 32)).sum().backward()
    assert model.embedding.weight.grad is not None
    assert all(p.grad is None for p in model.backbone.parameters())
    model.freeze_backbone(False)
    assert all(p.requires_grad for p in model.backbone.parameters())
