"""Input normalisation of the backbones: channel order, value range, mean and standard deviation.

* ResNet (torchvision): RGB in [0, 1], ImageNet mean (0.485, 0.456, 0.406), std (0.229, 0.224,
  0.225).
* BN-Inception (the Caffe port ``bn_inception-52deb4733.pth`` used by MS, DRO, Proxy-Anchor):
  **BGR**, range [0, 255], mean (104, 117, 128) for (B, G, R), std 1.

The transforms of :mod:`dmlbook.data.batches.augment` end with one of these; tested in
``tests/data/batches/test_normalization.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

__all__ = ["BN_INCEPTION", "IMAGENET", "Normalization", "normalization_for"]


@dataclass(frozen=True)
class Normalization:
    """How a backbone expects its input: channel order, value range, mean and std.

    ``out[c] = (x[order[c]] * max_value / 255 - mean[c]) / std[c]`` for an RGB input ``x`` in
    [0, 255].

    Parameters
    ----------
    channels : {"RGB", "BGR"}
        Channel order of the output.
    max_value : float
        Value that a 255 pixel maps to before the mean is subtracted (1.0 or 255.0).
    mean, std : tuple of 3 floats
        Per output channel, in the output order and range.
    """

    channels: str
    max_value: float
    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    def __post_init__(self) -> None:
        if self.channels not in ("RGB", "BGR"):
            raise ValueError(f"channels must be 'RGB' or 'BGR', got {self.channels!r}.")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError("mean and std need 3 values each, std positive.")
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))
        object.__setattr__(self, "max_value", float(self.max_value))

    def coefficients(
        self, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(a, b)`` of shape (1, 3, 1, 1) with ``out = x_ordered * a + b``."""
        std = torch.tensor(self.std, dtype=torch.float64)
        a = (self.max_value / 255.0) / std
        b = -torch.tensor(self.mean, dtype=torch.float64) / std
        return (
            a.to(device=device, dtype=dtype).view(1, 3, 1, 1),
            b.to(device=device, dtype=dtype).view(1, 3, 1, 1),
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise an RGB batch ``(B, 3, H, W)`` with values in [0, 255] (``uint8`` or float).

        One fused multiply-add per channel writes straight into the float32 output (the channel
        reversal for BGR costs nothing extra).
        """
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"expected a batch of shape (B, 3, H, W), got {tuple(x.shape)}.")
        dtype = x.dtype if torch.is_floating_point(x) else torch.float32
        a, b = _scalars(self, x.device, dtype)
        out = torch.empty(x.shape, dtype=dtype, device=x.device)
        for c in range(3):
            src = 2 - c if self.channels == "BGR" else c  # output channel c reads input channel src
            torch.addcmul(b[c], x[:, src], a[c], out=out[:, c])
        return out


@lru_cache(maxsize=32)
def _scalars(
    norm: Normalization, device: torch.device, dtype: torch.dtype
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """The per-channel ``a, b`` of ``norm`` as 0-d tensors on ``device``, made once per device."""
    a, b = norm.coefficients(device, dtype)
    return a.flatten().unbind(0), b.flatten().unbind(0)


#: torchvision ResNet (and most ImageNet models): RGB in [0, 1], ImageNet mean and std.
IMAGENET = Normalization("RGB", 1.0, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
#: BN-Inception Caffe port (``bn_inception-52deb4733.pth``): BGR in [0, 255], mean (104, 117, 128).
BN_INCEPTION = Normalization("BGR", 255.0, (104.0, 117.0, 128.0), (1.0, 1.0, 1.0))


def normalization_for(backbone: str | Normalization) -> Normalization:
    """The :class:`Normalization` of a backbone name (or a :class:`Normalization` as is).

    ``"bn_inception"`` (any name containing ``inception``) -> :data:`BN_INCEPTION`;
    ``"resnet50"``, ``"resnet18"``, ``"imagenet"`` (names starting with ``resnet``) ->
    :data:`IMAGENET`.

    Raises
    ------
    ValueError
        For another name.
    """
    if isinstance(backbone, Normalization):
        return backbone
    if not isinstance(backbone, str):
        raise TypeError(
            f"backbone must be a name or a Normalization, got {type(backbone).__name__}."
        )
    key = backbone.strip().lower().replace("-", "_")
    if "inception" in key:
        return BN_INCEPTION
    if key.startswith("resnet") or key == "imagenet":
        return IMAGENET
    raise ValueError(
        f"No input normalisation known for backbone {backbone!r}; use 'bn_inception', "
        "'resnet50' or 'imagenet', or pass a Normalization(channels, max_value, mean, std)."
    )
