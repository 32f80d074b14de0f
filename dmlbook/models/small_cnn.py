"""A small convolutional network that embeds images (32x32 by default) fast on a CPU.

``stride=1`` is the variant for small images with thin strokes (Omniglot's 28 x 28 characters):
the first convolution keeps the full resolution and a 2 x 2 max-pooling halves it afterwards,
so the network sees every pixel of a 1-3 pixel stroke before it subsamples, at little extra
cost (the later blocks, which dominate the cost, run at the same sizes). Chapters 1, 9 and 15
train it on Omniglot; tests in ``tests/models/test_small_cnn.py``.

The weights and activations are kept in channels-last memory order (N, H, W, C), the layout
PyTorch's CPU convolutions (oneDNN) run fastest for these small shapes: a training step costs
about 0.6-0.9x and an embedding pass about 0.35-0.5x of the CPU time of the default (N, C, H, W)
order, with AVX2 kernels as with AVX-512 ones (``bench/step_layout.py``, results in
``bench/results/step_layout_cpu.md``). The numbers it computes are the same up to float32
rounding.
"""

from __future__ import annotations

import torch
from torch import nn

from ..core.validation import is_integer
from .embedding import L2Normalize, check_positive_int

__all__ = ["SmallCNN"]

#: The network halves the height and width three times, so an input must be at least this large.
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
    the network accept any image at least 8 pixels on a side. With ``stride=1`` the first stage
    runs at the input's resolution and is followed by a 2 x 2 max-pooling: for a 28 x 28
    character the stages run at 28, 14 and 7 pixels instead of 14, 14 and 7.

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
    stride : {2, 1}
        How the first stage subsamples: a stride-2 convolution (2, the default, for 32 x 32 RGB
        images), or a stride-1 convolution followed by 2 x 2 max-pooling (1, for small images
        with thin strokes such as Omniglot's characters; about 1.3x the cost at ``width=8``).

    Examples
    --------
    >>> model = SmallCNN(dim=64)
    >>> model(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 64])
    >>> SmallCNN(in_channels=1, width=32, stride=1)(torch.zeros(2, 1, 28, 28)).shape
    torch.Size([2, 64])
    """

    def __init__(
        self,
        in_channels: int = 3,
        dim: int = 64,
        width: int = 32,
        normalize: bool = True,
        stride: int = 2,
    ) -> None:
        super().__init__()
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.dim = check_positive_int(dim, "dim")
        self.width = check_positive_int(width, "width")
        self.normalize = bool(normalize)
        if not is_integer(stride) or stride not in (1, 2):
            raise ValueError(
                f"stride must be 2 (a stride-2 first convolution) or 1 (full resolution, then "
                f"max-pooling; for small images such as Omniglot's), got {stride!r}."
            )
        self.stride = int(stride)
        w = self.width
        stem = [_block(self.in_channels, w, stride=stride)]
        if stride == 1:
            stem.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(
            *stem,
            _block(w, 2 * w),
            nn.MaxPool2d(2),
            _block(2 * w, 4 * w),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(4 * w, self.dim)
        self.norm = L2Normalize() if self.normalize else nn.Identity()
        self.to(memory_format=torch.channels_last)  # the convolutions' weights (module docstring)

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
        x = x.contiguous(memory_format=torch.channels_last)
        return self.norm(self.head(self.features(x)))
