"""ResNet (He et al. 2016) with torchvision's parameter names, written from the architecture.

The network is a stem, four stages of residual blocks and a classifier::

    conv1   7x7, 64, stride 2 -> bn1 -> relu -> maxpool 3x3, stride 2
    layer1  blocks at width  64, stride 1      (56 x 56 for a 224 input)
    layer2  blocks at width 128, stride 2      (28 x 28)
    layer3  blocks at width 256, stride 2      (14 x 14)
    layer4  blocks at width 512, stride 2      ( 7 x  7)
    avgpool global average -> fc  Linear(512 * expansion, num_classes)

ResNet-50 uses 3, 4, 6, 3 *bottleneck* blocks (``conv1`` 1x1 -> ``conv2`` 3x3 -> ``conv3`` 1x1 to
4 x width, each followed by BatchNorm). As in torchvision ("ResNet v1.5") the stride of a stage
sits on the 3x3 convolution, not on the first 1x1. The first block of a stage projects the shortcut
with ``downsample = Sequential(conv 1x1 with the stride, BatchNorm)``, hence the keys
``layer2.0.downsample.0.weight`` and ``layer2.0.downsample.1.running_mean``. Convolutions have no
bias. ResNet-18 uses 2, 2, 2, 2 *basic* blocks (two 3x3 convolutions). The names and shapes of the
state dict equal torchvision's, so its ImageNet weights load unchanged; ResNet-50 has 25,557,032
parameters with the 1000-class classifier.

The DML papers start from the V1 ImageNet weights (76.1 % top-1; :data:`RESNET50_V1_URL`), not
torchvision's later V2 weights (80.9 %), which would be an unfair backbone for comparisons.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..core.validation import is_integer
from .embedding import check_positive_int
from .pretrained import InputSpec, load_pretrained

__all__ = [
    "ResNet",
    "Bottleneck",
    "BasicBlock",
    "resnet18",
    "resnet50",
    "RESNET18_URL",
    "RESNET50_V1_URL",
    "RESNET_INPUT",
]

#: torchvision's ImageNet weights (V1 recipe; 76.1 % top-1). Older name: resnet50-19c8e357.pth.
RESNET50_V1_URL = "https://download.pytorch.org/models/resnet50-0676ba61.pth"
RESNET18_URL = "https://download.pytorch.org/models/resnet18-f37072fd.pth"
#: RGB in [0, 1], normalised with the ImageNet mean and standard deviation.
RESNET_INPUT = InputSpec()


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (ResNet-18/34)."""

    expansion = 1

    def __init__(self, in_channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(width, out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.downsample = _shortcut(in_channels, out, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + identity)


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride) -> 1x1 expand to 4 x width, plus the shortcut."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _shortcut(in_channels, out, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


def _shortcut(in_channels: int, out: int, stride: int) -> nn.Sequential | None:
    """Projection shortcut when the shape changes, else ``None`` (identity)."""
    if stride == 1 and in_channels == out:
        return None
    return nn.Sequential(
        nn.Conv2d(in_channels, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out)
    )


class ResNet(nn.Module):
    """A ResNet with torchvision's module names.

    Parameters
    ----------
    block : type
        :class:`Bottleneck` or :class:`BasicBlock`.
    layers : sequence of 4 ints
        Blocks per stage, ``(3, 4, 6, 3)`` for ResNet-50.
    num_classes : int
        Classifier outputs; ``0`` replaces ``fc`` by the identity, so that :meth:`forward` returns
        the pooled features (``num_features`` of them).
    width : int
        Channels of the stem and the first stage (64 in the paper). A smaller width gives a fast
        network for CPU experiments; its weights are not compatible with torchvision's.

    Attributes
    ----------
    num_features : int
        Channels of :meth:`features` (2048 for ResNet-50).
    input_spec : InputSpec
        RGB, ImageNet mean and standard deviation.

    Examples
    --------
    A narrow ResNet-18 (``resnet18(width=16)`` builds the same) returning its pooled features:

    >>> net = ResNet(BasicBlock, (2, 2, 2, 2), num_classes=0, width=16)
    >>> net(torch.randn(2, 3, 32, 32)).shape, net.num_features
    (torch.Size([2, 128]), 128)
    """

    input_spec = RESNET_INPUT

    def __init__(
        self,
        block: type[Bottleneck] | type[BasicBlock],
        layers: tuple[int, int, int, int],
        num_classes: int = 1000,
        width: int = 64,
    ) -> None:
        super().__init__()
        if len(layers) != 4:
            raise ValueError(f"layers must give the blocks of 4 stages, got {layers!r}.")
        width = check_positive_int(width, "width")
        if not is_integer(num_classes) or num_classes < 0:
            raise ValueError(f"num_classes must be an int >= 0, got {num_classes!r}.")
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        channels = width
        for i, n_blocks in enumerate(layers):
            stage_width = width * 2**i
            stride = 1 if i == 0 else 2
            blocks = []
            for j in range(check_positive_int(n_blocks, f"layers[{i}]")):
                blocks.append(block(channels, stage_width, stride if j == 0 else 1))
                channels = stage_width * block.expansion
            self.add_module(f"layer{i + 1}", nn.Sequential(*blocks))
        self.num_features = channels
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes) if num_classes else nn.Identity()
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The last feature map, shape (N, num_features, H/32, W/32)."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"ResNet expects images of shape (N, 3, H, W), got {tuple(x.shape)}.")
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores (N, num_classes), or pooled features when ``num_classes=0``."""
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


def _build(
    block: type[Bottleneck] | type[BasicBlock],
    layers: tuple[int, int, int, int],
    pretrained: str | Path | None,
    num_classes: int,
    width: int,
    check_hash: bool,
) -> ResNet:
    model = ResNet(block, layers, num_classes=num_classes, width=width)
    if pretrained is not None:
        if width != 64:
            raise ValueError(f"pretrained weights need width=64, got width={width}.")
        ignore = () if num_classes == 1000 else ("fc.",)
        model.load_report = load_pretrained(model, pretrained, ignore=ignore, check_hash=check_hash)
    return model


def resnet50(
    pretrained: str | Path | None = None,
    *,
    num_classes: int = 1000,
    width: int = 64,
    check_hash: bool = True,
) -> ResNet:
    """ResNet-50: bottleneck blocks (3, 4, 6, 3); 25,557,032 parameters with 1000 classes.

    Parameters
    ----------
    pretrained : str or Path, optional
        A torchvision-format state dict: file path or URL, e.g. :data:`RESNET50_V1_URL`.
    num_classes : int
        ``1000`` keeps the ImageNet classifier; ``0`` drops it (its weights are then ignored).
    width : int
        Stem width; 64 for the standard network.
    check_hash : bool
        Verify the SHA-256 prefix in a downloaded file's name (torchvision's naming).
    """
    return _build(Bottleneck, (3, 4, 6, 3), pretrained, num_classes, width, check_hash)


def resnet18(
    pretrained: str | Path | None = None,
    *,
    num_classes: int = 1000,
    width: int = 64,
    check_hash: bool = True,
) -> ResNet:
    """ResNet-18: basic blocks (2, 2, 2, 2); 11,689,512 parameters with 1000 classes.

    Parameters as in :func:`resnet50` (:data:`RESNET18_URL` for the ImageNet weights).
    """
    return _build(BasicBlock, (2, 2, 2, 2), pretrained, num_classes, width, check_hash)
