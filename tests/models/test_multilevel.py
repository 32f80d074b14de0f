"""Liu et al.'s multi-level head (Fig. 3): shapes, unit norm, the taps are BN-Inception's own
block outputs, state-dict compatible backbone, the head's parameter group, and configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dmlbook.engine import load_config
from dmlbook.engine.build import build_model
from dmlbook.engine.config_sections import ConfigError
from dmlbook.models import EmbeddingModel, bn_inception, resnet18
from dmlbook.models.multilevel import MultiLevelEmbeddingModel, level_features

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def backbone():
    torch.manual_seed(0)
    return bn_inception(None, num_classes=0).eval()


def test_levels_are_the_block_outputs(backbone):
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        maps = level_features(backbone, x)
        # an independent route to the 3c and 4e outputs: the inputs of blocks 4a and 5a
        seen = {}
        hooks = [
            getattr(backbone, f"inception_{b}_3x3_reduce").register_forward_pre_hook(
                lambda m, i, b=b: seen.__setitem__(b, i[0])
            )
            for b in ("4a", "5a")
        ]
        final = backbone.features(x)
        for h in hooks:
            h.remove()
    assert [tuple(m.shape[1:]) for m in maps] == [(576, 14, 14), (1056, 7, 7), (1024, 7, 7)]
    assert torch.equal(maps[0], seen["4a"]) and torch.equal(maps[1], seen["5a"])
    assert torch.equal(maps[2], final)


def test_fused_embedding_and_state_dict(backbone):
    model = MultiLevelEmbeddingModel(backbone, 16, freeze_bn=True).eval()
    with torch.no_grad():
        z = model(torch.randn(2, 3, 224, 224))
    assert z.shape == (2, 48) and model.dim == 48
    torch.testing.assert_close(z.norm(dim=1), torch.ones(2))
    plain = EmbeddingModel(bn_inception(None, num_classes=0), 16)
    keys = {k for k in model.state_dict() if k.startswith("backbone.")}
    assert keys == {k for k in plain.state_dict() if k.startswith("backbone.")}
    plain.backbone.load_state_dict(model.backbone.state_dict())  # loads both ways, strictly
    names = [g["name"] for g in model.param_groups(1e-5, 10.0)]
    assert names == ["backbone", "head"] and len(model.head_parameters()) == 6


def test_needs_bn_inception_and_a_width():
    with pytest.raises(TypeError, match="bn_inception"):
        MultiLevelEmbeddingModel(resnet18(None), 8)
    with pytest.raises(ConfigError, match="multilevel"):
        load_config(ROOT / "configs/liu_cub_pair_v2.yaml", ["model.backbone=resnet50"])
    with pytest.raises(ConfigError, match="model.head"):
        load_config(ROOT / "configs/liu_cub_pair_v1.yaml", ["model.head=fused"])


def test_configs_build_the_heads():
    v1 = load_config(ROOT / "configs/liu_cub_pair_v1.yaml")
    v2 = load_config(ROOT / "configs/liu_cub_pair_v2.yaml")
    assert v1.model.head == "linear" and v2.model.head == "multilevel"
    assert (v2.optim.head_lr_mult, v2.optim.freeze_backbone_epochs) == (10.0, 5)
    assert (v2.data.crop, v2.train.batch_size, v2.train.k) == (224, 80, 5)
    model = build_model(v2, pretrained=False)
    assert isinstance(model, MultiLevelEmbeddingModel) and model.dim == 3 * 512
    sop = load_config(ROOT / "configs/liu_sop_fused.yaml")
    assert sop.train.batch_size == 320 and sop.loss.params["neg_margin"] == 1.0
