"""Liu et al.'s multi-level embedding head (Fig. 3, "v2"): FC layers after inception 3, 4 and 5.

Chapter: ``book/11_liu_weighting.ipynb``, "At benchmark scale". Tests: ``tests/models/test_multilevel.py``.
Configs: ``model.head: multilevel`` (``configs/liu_*_v2.yaml``, :func:`dmlbook.engine.build.build_model`).

Liu et al. (Sec. IV-A, Fig. 3) add three fully connected layers to BN-Inception, after the
``inception3``, ``inception4`` and ``inception5`` stages, and concatenate their outputs: with FC
width ``d`` the embedding has ``3 d`` dimensions. dmlbook taps the output of the last block of
each stage (3c: 576 channels at 14 x 14 for 224 inputs, 4e: 1056 at 7 x 7, 5b: 1024 at 7 x 7),
pools each globally (the model's ``pooling``), maps it to ``d`` with its own Linear layer,
L2-normalises each level and concatenates them, divided by ``sqrt(3)`` so the embedding is a
unit vector whose three levels weigh the same.

What the paper leaves open, and what dmlbook chose: Fig. 3 draws a metric loss on every level
as well as on the concatenation; dmlbook trains one loss on the concatenated embedding (deep
supervision per level is not implemented). The levels are read by :func:`level_features`, which
runs the backbone's own units in the order of :meth:`BNInception.features`, so the backbone and
its state dict are exactly :class:`~dmlbook.models.BNInception`'s: pretrained weights load
unchanged, and the head's keys are ``embedding.0``, ``embedding.1``, ``embedding.2``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .bn_inception import BLOCKS, BNInception
from .head import EmbeddingModel

__all__ = ["LEVELS", "MultiLevelEmbeddingModel", "level_features"]

#: Level -> (the BN-Inception block whose output it taps, its channels).
LEVELS: dict[str, tuple[str, int]] = {
    "inception3": ("3c", 576),
    "inception4": ("4e", 1056),
    "inception5": ("5b", 1024),
}


def level_features(backbone: BNInception, x: torch.Tensor) -> list[torch.Tensor]:
    """The feature maps after blocks 3c, 4e and 5b: :meth:`BNInception.features`, tapped."""
    if x.ndim != 4 or x.shape[1] != 3 or any((side + 1) % 32 > 7 for side in x.shape[2:]):
        raise ValueError(
            "BN-Inception expects BGR images (N, 3, H, W) with sides of 32k-1 to 32k+6 pixels "
            f"(e.g. 224 or 227); got {tuple(x.shape)}."
        )
    b = backbone
    x = b.pool1_3x3_s2(b._cbr("conv1_7x7_s2", x))
    x = b.pool2_3x3_s2(b._cbr("conv2_3x3", b._cbr("conv2_3x3_reduce", x)))
    taps = {block for block, _ in LEVELS.values()}
    out = []
    for block in BLOCKS:
        x = b._block(block, x)
        if block in taps:
            out.append(x)
    return out


class MultiLevelEmbeddingModel(EmbeddingModel):
    """BN-Inception with Liu et al.'s fused multi-level embedding (Fig. 3), size ``3 * dim``.

    Parameters
    ----------
    backbone : BNInception
        Needs the units named in :data:`LEVELS` (any BN-Inception of :mod:`dmlbook.models`).
    dim : int
        Width ``d`` of each level's Linear layer; the embedding has ``3 d`` dimensions.
    pooling, freeze_bn, normalize
        As for :class:`~dmlbook.models.EmbeddingModel`.
    """

    def __init__(
        self,
        backbone: nn.Module,
        dim: int = 512,
        *,
        pooling: str = "max",
        freeze_bn: bool = False,
        normalize: bool = True,
    ) -> None:
        if not isinstance(backbone, BNInception):
            raise TypeError(
                "the multi-level head (model.head: multilevel) needs a BN-Inception backbone "
                f"(model.backbone: bn_inception), got {type(backbone).__name__}."
            )
        if dim is None:
            raise ValueError("the multi-level head needs a width: pass dim (model.dim), e.g. 512.")
        super().__init__(backbone, dim, pooling=pooling, freeze_bn=freeze_bn, normalize=normalize)
        width = self.dim
        layers = []
        for _, channels in LEVELS.values():
            layer = nn.Linear(channels, width)
            nn.init.kaiming_normal_(layer.weight, mode="fan_out")
            nn.init.zeros_(layer.bias)
            layers.append(layer)
        self.embedding = nn.ModuleList(layers)
        self.level_dim = width
        self.dim = width * len(LEVELS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embeddings (N, 3 dim): the three L2-normalised levels, concatenated, / sqrt(3)."""
        maps = level_features(self.backbone, x)
        parts = []
        with torch.autocast(x.device.type, enabled=False):
            for layer, fmap in zip(self.embedding, maps, strict=True):
                z = layer(self.pool(fmap).float())
                parts.append(nn.functional.normalize(z, dim=1))
            fused = torch.cat(parts, dim=1) / math.sqrt(len(parts))
            return self.norm(fused)
