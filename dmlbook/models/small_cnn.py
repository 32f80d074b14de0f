"""A small convolutional network that embeds images (32x32 by default) fast on a CPU."""

from __future__ import annotations

import torch
from torch import nn

from .embedding import L2Normalize, check_positive_int

__all__ = ["SmallCNN"]

#: Each block halves the height and width, so an input must be at least this large.
MIN_SIDE = 8


def _block(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    """``Conv3x3 -> BatchNorm -> ReLU``; the convolution has no bias since BatchNorm adds one."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class SmallCNN(nn.Module):
    """Three ``Conv -> BatchNorm -> ReLU`` stages, global average pooling, ``Linear`` to ``dim``.

    For a 32x32 input the stages run at 16x16 (``width`` channels; the first convolution has
    stride 2), 8x8 (``2 width``) and 4x4 (``4 width``) resolution. Adaptive average pooling makes
    the network accept any image at least 8 pixels on a side.

    Parameters
    ----------
    in_channels : int
        Channels of the input images (3 for RGB).
    dim : int
        Embedding dimension ``d``.
    width : int
        Channels of the first stage; the later stages use ``2 width`` and ``4 width``.
    normalize : bool
        End with :class:`~dmlbook.models.embedding.L2Normalize` (unit-norm embeddings, so that
        ``<f_i, f_j>`` is the cosine similarity). ``False`` returns the raw features.

    Examples
    --------
    >>> model = SmallCNN(dim=64)
    >>> model(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 64])
    """

    def __init__(
        self, in_channels: int = 3, dim: int = 64, width: int = 32, normalize: bool = True
    ) -> None:
        super().__init__()
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.dim = check_positive_int(dim, "dim")
        self.width = check_positive_int(width, "width")
        self.normalize = bool(normalize)
        w = self.width
        self.features = nn.Sequential(
            _block(self.in_channels, w, stride=2),
            _block(w, 2 * w),
            nn.MaxPool2d(2),
            _block(2 * w, 4 * w),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(4 * w, self.dim)
        self.norm = L2Normalize() if self.normalize else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map images of shape (N, in_channels, H, W) to embeddings of shape (N, dim)."""
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"SmallCNN expects images of shape (N, C, H, W) with C = {self.in_channels}, got "
                f"{tuple(x.shape)}. Reshape flat inputs to images (x.view(N, C, H, W)), or use "
                "EmbeddingMLP for feature vectors."
            )
        if min(x.shape[2], x.shape[3]) < MIN_SIDE:
            raise ValueError(
                f"SmallCNN needs images at least {MIN_SIDE}x{MIN_SIDE} pixels, got "
                f"{x.shape[2]}x{x.shape[3]}; upsample them first."
            )
        return self.norm(self.head(self.features(x)))
