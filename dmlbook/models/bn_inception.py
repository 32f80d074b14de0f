"""BN-Inception (Ioffe & Szegedy 2015) with the key names of the widely used pretrained port.

The deep metric learning papers of this book (MS, Liu et al., DRO) fine-tune this network from the
ImageNet weights that Cadene's ``pretrainedmodels`` ported from Caffe
(``bn_inception-52deb4733.pth``). Its state dict uses the Caffe layer names, e.g.
``conv1_7x7_s2.weight``, ``conv1_7x7_s2_bn.running_mean``, ``inception_3a_double_3x3_1.bias``,
``inception_5b_pool_proj_bn.weight`` and ``last_linear.weight``; this module registers its layers
under exactly those names, so the file loads without renaming.

Every unit is ``Conv (with bias) -> BatchNorm -> ReLU``. After a stem (7x7/2 conv, 3x3/2 max pool,
1x1 and 3x3 convs, 3x3/2 max pool: 192 x 28 x 28 for a 224 input) come ten Inception blocks with
four branches: ``1x1``; ``3x3_reduce -> 3x3``; ``double_3x3_reduce -> double_3x3_1 ->
double_3x3_2``; ``pool -> pool_proj``. Blocks 3c and 4e halve the resolution: their 3x3 and
double_3x3_2 convolutions have stride 2, their pool branch is a 3x3/2 max pool without projection,
and they have no 1x1 branch. The table below (Ioffe & Szegedy 2015, Fig. 5, as laid out in the
port) gives the output channels; max pools use ``ceil_mode=True`` as in Caffe.

=====  =====  ====  =========  ===  ==============  =========  ==========  =====
block  input  1x1   3x3 red.   3x3  double red.     double     pool        out
=====  =====  ====  =========  ===  ==============  =========  ==========  =====
3a     192    64    64         64   64              96         avg + 32    256
3b     256    64    64         96   64              96         avg + 64    320
3c     320    -     128        160  64              96         max /2      576
4a     576    224   64         96   96              128        avg + 128   576
4b     576    192   96         128  96              128        avg + 128   576
4c     576    160   128        160  128             160        avg + 128   608
4d     608    96    128        192  160             192        avg + 128   608
4e     608    -     128        192  192             256        max /2      1056
5a     1056   352   192        320  160             224        avg + 128   1024
5b     1024   352   192        320  192             224        max + 128   1024
=====  =====  ====  =========  ===  ==============  =========  ==========  =====

Input: BGR, 0-255, mean ``[104, 117, 128]``, std 1, 224 crops (:data:`BN_INCEPTION_INPUT`); the
1024-channel output is 7 x 7. With the 1000-class ``last_linear`` the network has 11,295,240
parameters, 69 convolutions and 485 state-dict entries (416 without the ``num_batches_tracked``
counters, which the port's file lacks).

Two pitfalls of copies in circulation are handled on load: older files store BatchNorm tensors
as ``[1, C]`` (squeezed here, :func:`squeeze_bn`), and the port declares BatchNorm
``momentum=0.9``, Caffe's convention, which in PyTorch's convention replaces 90 % of the ImageNet
statistics by batch statistics at every training step. Here the momentum is PyTorch's default 0.1.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..core.validation import is_integer
from .pretrained import InputSpec, StateDict, load_pretrained

__all__ = ["BNInception", "bn_inception", "squeeze_bn", "BN_INCEPTION_URL", "BN_INCEPTION_INPUT"]

#: The pretrained port (SHA-256 prefix 52deb4733) used by the MS, DRO and Proxy-Anchor code.
BN_INCEPTION_URL = "http://data.lip6.fr/cadene/pretrainedmodels/bn_inception-52deb4733.pth"
#: Caffe preprocessing: BGR, range 0-255, mean subtracted, no division.
BN_INCEPTION_INPUT = InputSpec(color="BGR", scale=255.0, mean=(104.0, 117.0, 128.0), std=(1.0,) * 3)

# block: (input, 1x1, 3x3 reduce, 3x3, double reduce, double 3x3, pool kind, pool projection)
BLOCKS: dict[str, tuple[int, int, int, int, int, int, str, int]] = {
    "3a": (192, 64, 64, 64, 64, 96, "avg", 32),
    "3b": (256, 64, 64, 96, 64, 96, "avg", 64),
    "3c": (320, 0, 128, 160, 64, 96, "max/2", 0),
    "4a": (576, 224, 64, 96, 96, 128, "avg", 128),
    "4b": (576, 192, 96, 128, 96, 128, "avg", 128),
    "4c": (576, 160, 128, 160, 128, 160, "avg", 128),
    "4d": (608, 96, 128, 192, 160, 192, "avg", 128),
    "4e": (608, 0, 128, 192, 192, 256, "max/2", 0),
    "5a": (1056, 352, 192, 320, 160, 224, "avg", 128),
    "5b": (1024, 352, 192, 320, 192, 224, "max", 128),
}


def _pool(kind: str) -> nn.Module:
    if kind == "avg":
        return nn.AvgPool2d(3, stride=1, padding=1, ceil_mode=True, count_include_pad=True)
    if kind == "max":
        return nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True)
    return nn.MaxPool2d(3, stride=2, ceil_mode=True)  # "max/2"


class BNInception(nn.Module):
    """BN-Inception with the Caffe-port names (see the module docstring for the layer table).

    Parameters
    ----------
    num_classes : int
        Outputs of ``last_linear``; ``0`` replaces it by the identity, so that :meth:`forward`
        returns the 1024 pooled features.
    bn_momentum : float
        PyTorch BatchNorm momentum (weight of the batch statistics in the running average).

    Attributes
    ----------
    num_features : int
        1024, the channels of :meth:`features`.
    input_spec : InputSpec
        BGR, 0-255, Caffe means.
    """

    input_spec = BN_INCEPTION_INPUT
    num_features = 1024

    def __init__(self, num_classes: int = 1000, bn_momentum: float = 0.1) -> None:
        super().__init__()
        if not is_integer(num_classes) or num_classes < 0:
            raise ValueError(f"num_classes must be an int >= 0, got {num_classes!r}.")
        if not 0.0 < float(bn_momentum) <= 0.5:
            raise ValueError(
                f"bn_momentum={bn_momentum} is not a sane PyTorch momentum (0 < m <= 0.5); the "
                "port's 0.9 is Caffe's convention and wipes the ImageNet statistics."
            )
        self._momentum = float(bn_momentum)
        self._unit("conv1_7x7_s2", 3, 64, 7, stride=2)
        self.pool1_3x3_s2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self._unit("conv2_3x3_reduce", 64, 64, 1)
        self._unit("conv2_3x3", 64, 192, 3)
        self.pool2_3x3_s2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        for block, (c_in, c1, r3, c3, rd, cd, pool, proj) in BLOCKS.items():
            p = f"inception_{block}_"
            stride = 2 if pool == "max/2" else 1
            if c1:
                self._unit(p + "1x1", c_in, c1, 1)
            self._unit(p + "3x3_reduce", c_in, r3, 1)
            self._unit(p + "3x3", r3, c3, 3, stride=stride)
            self._unit(p + "double_3x3_reduce", c_in, rd, 1)
            self._unit(p + "double_3x3_1", rd, cd, 3)
            self._unit(p + "double_3x3_2", cd, cd, 3, stride=stride)
            setattr(self, p + "pool", _pool(pool))
            if proj:
                self._unit(p + "pool_proj", c_in, proj, 1)
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.last_linear = nn.Linear(1024, num_classes) if num_classes else nn.Identity()

    def _unit(self, name: str, c_in: int, c_out: int, kernel: int, stride: int = 1) -> None:
        """Register ``name`` (a biased convolution) and ``name_bn``, as in the port."""
        conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2)
        setattr(self, name, conv)
        setattr(self, name + "_bn", nn.BatchNorm2d(c_out, eps=1e-5, momentum=self._momentum))

    def _cbr(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """``relu(bn(conv(x)))`` for the unit called ``name``."""
        return torch.relu(getattr(self, name + "_bn")(getattr(self, name)(x)))

    def _block(self, block: str, x: torch.Tensor) -> torch.Tensor:
        p = f"inception_{block}_"
        branches = []
        if BLOCKS[block][1]:
            branches.append(self._cbr(p + "1x1", x))
        branches.append(self._cbr(p + "3x3", self._cbr(p + "3x3_reduce", x)))
        y = self._cbr(p + "double_3x3_reduce", x)
        branches.append(self._cbr(p + "double_3x3_2", self._cbr(p + "double_3x3_1", y)))
        pooled = getattr(self, p + "pool")(x)
        branches.append(self._cbr(p + "pool_proj", pooled) if BLOCKS[block][7] else pooled)
        return torch.cat(branches, 1)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The last feature map, shape (N, 1024, 7, 7) for 224 x 224 inputs."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(
                f"BNInception expects BGR images of shape (N, 3, H, W), got {tuple(x.shape)}."
            )
        bad = [side for side in x.shape[2:] if (side + 1) % 32 > 7]
        if bad:
            raise ValueError(
                f"BNInception (like the Caffe port) needs image sides of 32k-1 to 32k+6 pixels, "
                f"e.g. 224 or 227, so that the pooled and strided branches of blocks 3c and 4e "
                f"have the same size; got {tuple(x.shape[2:])}."
            )
        x = self.pool1_3x3_s2(self._cbr("conv1_7x7_s2", x))
        x = self._cbr("conv2_3x3", self._cbr("conv2_3x3_reduce", x))
        x = self.pool2_3x3_s2(x)
        for block in BLOCKS:
            x = self._block(block, x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores (N, num_classes), or the pooled features when ``num_classes=0``."""
        return self.last_linear(torch.flatten(self.global_pool(self.features(x)), 1))


def squeeze_bn(state: StateDict) -> StateDict:
    """Reshape BatchNorm tensors stored as ``[1, C]`` (older copies of the port) to ``[C]``."""
    out = {}
    for key, value in state.items():
        is_bn = "_bn." in key and not key.endswith("num_batches_tracked")
        out[key] = value.reshape(-1) if is_bn and value.ndim == 2 and value.shape[0] == 1 else value
    return out


def bn_inception(
    pretrained: str | Path | None = None,
    *,
    num_classes: int = 1000,
    bn_momentum: float = 0.1,
    check_hash: bool = True,
) -> BNInception:
    """BN-Inception, optionally with pretrained weights in the port's format.

    Parameters
    ----------
    pretrained : str or Path, optional
        File path or URL of a state dict in the port's format (e.g. :data:`BN_INCEPTION_URL`);
        ``[1, C]`` BatchNorm tensors are squeezed and missing ``num_batches_tracked`` counters
        allowed.
    num_classes : int
        ``1000`` keeps ``last_linear``; ``0`` drops it (its weights are then ignored).
    bn_momentum : float
        BatchNorm momentum in PyTorch's convention.
    check_hash : bool
        Verify the SHA-256 prefix in a downloaded file's name.
    """
    model = BNInception(num_classes=num_classes, bn_momentum=bn_momentum)
    if pretrained is not None:
        ignore = () if num_classes == 1000 else ("last_linear.",)
        model.load_report = load_pretrained(
            model, pretrained, convert=squeeze_bn, ignore=ignore, check_hash=check_hash
        )
    return model
