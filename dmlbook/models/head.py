"""The embedding model of the benchmark papers: backbone -> global pooling -> Linear -> L2 norm.

MS (Wang et al. 2019, Sec. 5.1) and DRO "add a FC layer on the top of the network following the
global pooling layer"; their public code pools by global *max* pooling, Proxy-Anchor by the *sum*
of global average and max pooling. The embedding is L2-normalised, so that inner products are the
cosine similarities ``S_ij`` every loss of this book is written on.

Two training details of the papers live here too:

* **Frozen BatchNorm** (MS code; Liu et al. Sec. V-A): every BatchNorm layer of the backbone stays
  in eval mode at every iteration, i.e. normalises with the ImageNet running statistics and never
  updates them, while its affine scale and shift are still trained. With batches of 16 classes
  this is worth about 2 points of Recall@1 on CUB.
* **A larger learning rate for the new head** (Liu et al.: 10x): :meth:`EmbeddingModel.param_groups`
  returns the backbone and head parameters as two optimiser groups.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .bn_inception import BN_INCEPTION_URL, bn_inception
from .embedding import L2Normalize, check_positive_int
from .pretrained import InputSpec
from .resnet import RESNET18_URL, RESNET50_V1_URL, resnet18, resnet50

__all__ = [
    "GlobalPool",
    "EmbeddingModel",
    "build_backbone",
    "available_backbones",
    "POOLINGS",
    "DEFAULT_WEIGHTS",
]

#: Global pooling modes: max (MS, DRO), average, or their sum (Proxy-Anchor).
POOLINGS = ("max", "avg", "avg+max")

_BACKBONES = {"resnet18": resnet18, "resnet50": resnet50, "bn_inception": bn_inception}
#: The ImageNet weights that ``pretrained: default`` means for each backbone.
DEFAULT_WEIGHTS = {
    "resnet18": RESNET18_URL,
    "resnet50": RESNET50_V1_URL,
    "bn_inception": BN_INCEPTION_URL,
}


def available_backbones() -> list[str]:
    """Names accepted by :func:`build_backbone`."""
    return sorted(_BACKBONES)


def build_backbone(name: str, pretrained: str | Path | None = None, **options: Any) -> nn.Module:
    """A backbone without its classifier, optionally with pretrained weights.

    Parameters
    ----------
    name : str
        ``"bn_inception"``, ``"resnet50"`` or ``"resnet18"``.
    pretrained : str or Path, optional
        A weight file or URL; ``"default"`` means :data:`DEFAULT_WEIGHTS` ``[name]``.
    **options
        Passed to the constructor (e.g. ``width=16`` for a small ResNet, ``bn_momentum``).

    Returns
    -------
    nn.Module
        With ``features(x) -> (N, C, h, w)``, ``num_features = C`` and ``input_spec``.
    """
    key = str(name).strip().lower().replace("-", "_")
    if key not in _BACKBONES:
        close = difflib.get_close_matches(key, list(_BACKBONES), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown backbone {name!r}.{hint} Available: {', '.join(available_backbones())}."
        )
    if pretrained == "default":
        pretrained = DEFAULT_WEIGHTS[key]
    try:
        return _BACKBONES[key](pretrained, num_classes=0, **options)
    except TypeError as err:
        raise ValueError(f"bad options {options} for backbone {key!r}: {err}") from err


class GlobalPool(nn.Module):
    """Pool a feature map (N, C, h, w) to (N, C): ``"max"``, ``"avg"`` or ``"avg+max"`` (sum)."""

    def __init__(self, mode: str = "max") -> None:
        super().__init__()
        if mode not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {mode!r}.")
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "max":
            return torch.amax(x, dim=(2, 3))
        if self.mode == "avg":
            return torch.mean(x, dim=(2, 3))
        return torch.amax(x, dim=(2, 3)) + torch.mean(x, dim=(2, 3))

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}"


class EmbeddingModel(nn.Module):
    """``L2Normalize(Linear(GlobalPool(backbone.features(x))))``, float32 embeddings of size ``dim``.

    Parameters
    ----------
    backbone : nn.Module
        Has ``features(x)`` returning (N, C, h, w) and ``num_features = C``.
    dim : int or None
        Embedding size ``d``; ``None`` keeps the C pooled features (no Linear layer).
    pooling : {"max", "avg", "avg+max"}
        Global pooling.
    freeze_bn : bool
        Keep the backbone's BatchNorm layers in eval mode whenever the model trains (running
        statistics frozen, affine parameters trained).
    normalize : bool
        End with L2 normalisation.

    Attributes
    ----------
    backbone, pool, embedding, norm : nn.Module
    input_spec : InputSpec
        The backbone's expected input (colour order, range, mean, std).

    Examples
    --------
    >>> from dmlbook.models import resnet18
    >>> model = EmbeddingModel(resnet18(width=16), dim=32)
    >>> x = model(torch.randn(2, 3, 32, 32))
    >>> x.shape, bool(torch.allclose(x.norm(dim=1), torch.ones(2)))
    (torch.Size([2, 32]), True)
    """

    def __init__(
        self,
        backbone: nn.Module,
        dim: int | None = 512,
        *,
        pooling: str = "max",
        freeze_bn: bool = False,
        normalize: bool = True,
    ) -> None:
        super().__init__()
        if not hasattr(backbone, "features") or not hasattr(backbone, "num_features"):
            raise TypeError(
                "backbone must have features(x) -> (N, C, h, w) and num_features = C, e.g. "
                f"build_backbone('resnet50'); got {type(backbone).__name__}."
            )
        self.backbone = backbone
        self.pool = GlobalPool(pooling)
        channels = int(backbone.num_features)
        if dim is None:
            self.embedding: nn.Module = nn.Identity()
            self.dim = channels
        else:
            self.dim = check_positive_int(dim, "dim")
            self.embedding = nn.Linear(channels, self.dim)
            # As Proxy-Anchor's public code: Kaiming normal (fan out), zero bias.
            nn.init.kaiming_normal_(self.embedding.weight, mode="fan_out")
            nn.init.zeros_(self.embedding.bias)
        self.norm = L2Normalize() if normalize else nn.Identity()
        self.freeze_bn = bool(freeze_bn)
        self._backbone_frozen = False
        self.input_spec: InputSpec = getattr(backbone, "input_spec", InputSpec())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embeddings (N, dim) in float32.

        Under bf16 autocast the backbone runs in bf16; the pooled features, the Linear layer and
        the normalisation are computed in float32, so that embeddings keep their precision.
        """
        pooled = self.pool(self.backbone.features(x)).float()
        with torch.autocast(pooled.device.type, enabled=False):
            return self.norm(self.embedding(pooled))

    def train(self, mode: bool = True) -> EmbeddingModel:
        """Set training mode; frozen BatchNorm (and a frozen backbone) stay in eval mode."""
        super().train(mode)
        if mode and self._backbone_frozen:
            self.backbone.eval()
        elif mode and self.freeze_bn:
            for m in self.backbone.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.eval()
        return self

    def freeze_backbone(self, frozen: bool = True) -> None:
        """Train only the head (Liu et al.: the first 5 epochs), or everything again.

        A frozen backbone gets no gradients and runs in eval mode (its BatchNorm statistics stay
        as they are).
        """
        self._backbone_frozen = bool(frozen)
        for p in self.backbone.parameters():
            p.requires_grad_(not frozen)
        self.train(self.training)

    @property
    def backbone_frozen(self) -> bool:
        """Whether :meth:`freeze_backbone` is in effect."""
        return self._backbone_frozen

    def head_parameters(self) -> list[nn.Parameter]:
        """Parameters of the new layers (the Linear embedding)."""
        return list(self.embedding.parameters())

    def param_groups(self, lr: float, head_lr_mult: float = 1.0) -> list[dict[str, Any]]:
        """Optimiser groups: backbone at ``lr``, head at ``lr * head_lr_mult``.

        Each group carries a ``"name"`` (``"backbone"`` or ``"head"``) and its ``lr``; empty
        groups are left out.
        """
        head = self.head_parameters()
        ids = {id(p) for p in head}
        body = [p for p in self.parameters() if id(p) not in ids]
        groups = [
            {"name": "backbone", "params": body, "lr": float(lr)},
            {"name": "head", "params": head, "lr": float(lr) * float(head_lr_mult)},
        ]
        return [g for g in groups if g["params"]]
