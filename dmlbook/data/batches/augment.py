"""Batched image augmentation on tensors, on whatever device the batch is on.

The input is a batch of cached ``uint8`` images ``(B, 3, S, S)`` (RGB, from
:class:`~dmlbook.data.cache.image_cache.CachedImageDataset`, where ``S`` is the resize size, e.g. 256).
The transforms reproduce the torchvision pipelines of the deep metric learning codes:

``TrainTransform`` (MS, Wang et al. 2019, and DRO: ``Resize(256)`` ->
``RandomResizedCrop(227, scale=(0.16, 1))`` -> ``RandomHorizontalFlip()`` -> normalise)
    A crop window is drawn per image exactly as ``torchvision.transforms.RandomResizedCrop``
    draws it (Szegedy et al. 2015, "Going Deeper with Convolutions", Sec. 6: area fraction uniform
    in ``scale``, log aspect ratio uniform in ``log(ratio)``, 10 attempts, then a center-crop
    fallback), the window is resampled to ``crop x crop`` and mirrored with probability 1/2.
    Crop, resize and flip are *one* ``torch.nn.functional.grid_sample`` call over the batch with
    one sampling grid per image (bilinear, ``align_corners=False``), which computes exactly
    ``F.interpolate(window, crop, mode="bilinear", align_corners=False)`` for each window. Unlike PIL it does not antialias; the windows are at most ~1.3x larger than
    the output here (mostly they are upsampled), so the difference is small.
``EvalTransform`` (``Resize(256)`` -> ``CenterCrop(227)`` -> normalise)
    For cached images of side ``S == resize`` this is an exact slice with torchvision's
    rounding of the offset; otherwise the equivalent window is resampled.

Random numbers come only from the ``torch.Generator`` passed in (``2 * 10 + 3`` per image), so a
batch's augmentation is a deterministic function of the generator state. Pass a **CPU** generator
also when the batch is on a GPU: the windows are computed on the CPU and copied to the device
without waiting for it, while a CUDA generator would need a device sync per batch to read its
numbers back.

Normalisation follows the backbone's pretraining (:mod:`dmlbook.data.batches.normalization`:
ImageNet statistics in RGB for ResNet, Caffe's BGR 0-255 means for BN-Inception).

With a cache built with ``fit="pad"``, pass the batch's ``regions`` so that crops stay inside
the image pixels.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ...core.validation import is_integer
from .normalization import BN_INCEPTION, IMAGENET, Normalization, normalization_for

__all__ = [
    "BN_INCEPTION",
    "IMAGENET",
    "CropParams",
    "EvalTransform",
    "Normalization",
    "TrainTransform",
    "center_crop_boxes",
    "crop_resize",
    "normalization_for",
    "random_resized_crop_boxes",
]


class CropParams(NamedTuple):
    """Per-image crop windows ``(top, left, height, width)`` in pixels and flip flags."""

    boxes: torch.Tensor
    flips: torch.Tensor


def _check_images(images: torch.Tensor) -> None:
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}.")
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(
            f"images must be a batch of shape (B, 3, H, W), got {tuple(images.shape)}; permute "
            "(B, H, W, 3) arrays with .permute(0, 3, 1, 2)."
        )
    if images.dtype != torch.uint8:
        raise TypeError(
            f"images must be uint8 (0-255, as read from the image cache), got {images.dtype}."
        )


def _regions(images: torch.Tensor, regions: torch.Tensor | None) -> torch.Tensor:
    """``(B, 4)`` float64 CPU regions; default the whole image."""
    b, _, h, w = images.shape
    if regions is None:
        return torch.tensor([[0.0, 0.0, h, w]], dtype=torch.float64).expand(b, 4)
    regions = torch.as_tensor(regions)
    if regions.shape != (b, 4):
        raise ValueError(
            f"regions must have shape ({b}, 4) (top, left, height, width), got {tuple(regions.shape)}."
        )
    return regions.detach().to("cpu", torch.float64)


def _check_range(name: str, pair: tuple[float, float], low: float) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in pair)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high), got {pair!r}.") from None
    if not (low < lo <= hi) or not math.isfinite(hi):
        raise ValueError(f"{name} must satisfy {low} < low <= high, got {pair!r}.")
    return lo, hi


def random_resized_crop_boxes(
    regions: torch.Tensor,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    generator: torch.Generator,
    attempts: int = 10,
) -> torch.Tensor:
    """Draw one ``RandomResizedCrop`` window per image, vectorised.

    Follows ``torchvision.transforms.RandomResizedCrop.get_params`` (Szegedy et al. 2015, Sec. 6):
    up to ``attempts`` draws of an area fraction ``s ~ U(scale)`` and a log aspect ratio
    ``log r ~ U(log ratio)``, giving ``w = round(sqrt(s A r))``, ``h = round(sqrt(s A / r))``;
    the first draw that fits the region is placed at a uniform integer offset; if none fits,
    the largest centered window with a clamped aspect ratio is taken. All images use the same
    number of random numbers (``2 * attempts + 2``), so the result depends only on the generator.

    Parameters
    ----------
    regions : Tensor of shape (B, 4)
        ``(top, left, height, width)`` of each image's pixels.
    scale, ratio : (float, float)
        Area fraction and aspect-ratio (width / height) ranges.
    generator : torch.Generator

    Returns
    -------
    Tensor of shape (B, 4), float64 on the CPU
        ``(top, left, height, width)`` of each window, in the coordinates of the batch.
    """
    regions = regions.to("cpu", torch.float64)
    b = regions.shape[0]
    dev = generator.device
    u_area = torch.rand(b, attempts, generator=generator, device=dev, dtype=torch.float64).cpu()
    u_ratio = torch.rand(b, attempts, generator=generator, device=dev, dtype=torch.float64).cpu()
    u_pos = torch.rand(b, 2, generator=generator, device=dev, dtype=torch.float64).cpu()
    top0, left0, height, width = regions.unbind(1)
    area = (height * width)[:, None]
    target = area * (scale[0] + (scale[1] - scale[0]) * u_area)
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = torch.exp(log_lo + (log_hi - log_lo) * u_ratio)
    w = torch.round(torch.sqrt(target * aspect))
    h = torch.round(torch.sqrt(target / aspect))
    fits = (w > 0) & (h > 0) & (w <= width[:, None]) & (h <= height[:, None])
    first = torch.argmax(fits.to(torch.int8), dim=1)
    found = fits.any(dim=1)
    w_sel = w.gather(1, first[:, None]).squeeze(1)
    h_sel = h.gather(1, first[:, None]).squeeze(1)
    top = torch.floor(u_pos[:, 0] * (height - h_sel + 1)).clamp(max=height - h_sel)
    left = torch.floor(u_pos[:, 1] * (width - w_sel + 1)).clamp(max=width - w_sel)
    # fallback: central crop with the aspect ratio clamped to the range
    in_ratio = width / height
    fb_w = torch.where(
        in_ratio < min(ratio),
        width,
        torch.where(in_ratio > max(ratio), torch.round(height * max(ratio)), width),
    )
    fb_h = torch.where(in_ratio < min(ratio), torch.round(width / min(ratio)), height)
    fb_top = torch.div(height - fb_h, 2, rounding_mode="floor")
    fb_left = torch.div(width - fb_w, 2, rounding_mode="floor")
    out = torch.stack(
        [
            top0 + torch.where(found, top, fb_top),
            left0 + torch.where(found, left, fb_left),
            torch.where(found, h_sel, fb_h),
            torch.where(found, w_sel, fb_w),
        ],
        dim=1,
    )
    return out


def center_crop_boxes(regions: torch.Tensor, fraction: float) -> torch.Tensor:
    """Centered square windows of side ``fraction * min(height, width)`` of each region.

    With ``fraction = crop / resize`` this is the window of ``Resize(resize)`` ->
    ``CenterCrop(crop)`` in the region's coordinates.

    Returns
    -------
    Tensor of shape (B, 4), float64
        ``(top, left, side, side)``.
    """
    regions = regions.to("cpu", torch.float64)
    top0, left0, height, width = regions.unbind(1)
    side = fraction * torch.minimum(height, width)
    return torch.stack([top0 + (height - side) / 2, left0 + (width - side) / 2, side, side], dim=1)


def crop_resize(
    images: torch.Tensor,
    boxes: torch.Tensor,
    size: int,
    flips: torch.Tensor | None = None,
) -> torch.Tensor:
    """Resample window ``boxes[i]`` of image ``i`` to ``size x size``, mirrored where ``flips[i]``.

    One ``grid_sample`` over the batch (bilinear, ``align_corners=False``): output pixel ``j``
    samples the input at pixel coordinate ``left + (j + 0.5) * width / size - 0.5`` (pixel
    centres at integers), clamped to the window ``[left, left + width - 1]``. For an integer window
    this is exactly ``F.interpolate(window, size, mode="bilinear", align_corners=False)``; the clamp
    keeps pixels outside the window (e.g. padding) out of the result.

    Parameters
    ----------
    images : Tensor of shape (B, 3, H, W)
        ``uint8`` or float; runs on its device.
    boxes : Tensor of shape (B, 4)
        ``(top, left, height, width)`` in pixels (may be fractional).
    size : int
        Output side.
    flips : Tensor of shape (B,), bool, optional
        Mirror left-right.

    Returns
    -------
    Tensor of shape (B, 3, size, size), float32 (values in the input's range).
    """
    _, _, h_in, w_in = images.shape
    dev = images.device
    boxes = boxes.to(dev, torch.float32, non_blocking=True)  # tiny host tensor: no device sync
    top, left, h, w = (t[:, None] for t in boxes.unbind(1))
    steps = torch.arange(size, device=dev, dtype=torch.float32)[None, :] + 0.5
    px = torch.minimum(torch.maximum(left + steps * (w / size) - 0.5, left), left + w - 1)
    py = torch.minimum(torch.maximum(top + steps * (h / size) - 0.5, top), top + h - 1)
    if flips is not None:
        px = torch.where(flips.to(dev, torch.bool, non_blocking=True)[:, None], px.flip(1), px)
    gx = (2 * px + 1) / w_in - 1  # normalised coordinates, align_corners=False
    gy = (2 * py + 1) / h_in - 1
    grid = torch.stack(torch.broadcast_tensors(gx[:, None, :], gy[:, :, None]), dim=-1)
    x = images if torch.is_floating_point(images) else images.float()
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def _check_size(value: int, name: str) -> int:
    if not is_integer(value) or value < 1:
        raise ValueError(f"{name} must be a positive int (pixels), got {value!r}.")
    return int(value)


class TrainTransform:
    """Random resized crop + horizontal flip + normalisation of a ``uint8`` batch, batched.

    Parameters
    ----------
    crop : int
        Output side (224 for ResNet-50; MS and DRO use 227 with BN-Inception).
    scale : (float, float)
        Area fraction range of the crop window; MS uses (0.16, 1.0) (the default here),
        torchvision's default is (0.08, 1.0).
    ratio : (float, float)
        Aspect ratio (width / height) range, default (3/4, 4/3).
    flip : bool
        Mirror each image with probability 1/2.
    normalization : str or Normalization
        A backbone name for :func:`normalization_for` (``"resnet50"``, ``"bn_inception"``) or a
        :class:`Normalization`.

    Examples
    --------
    A batch of uint8 images (a cache's ``batch.images``; ``regions=batch.regions`` where the
    images were stored with padding) to random crops of side 32, normalised for BN-Inception:

    >>> aug = TrainTransform(32, normalization="bn_inception")
    >>> images = torch.randint(0, 256, (4, 3, 40, 40), dtype=torch.uint8)
    >>> x = aug(images, torch.Generator().manual_seed(0))
    >>> x.shape, x.dtype
    (torch.Size([4, 3, 32, 32]), torch.float32)
    """

    def __init__(
        self,
        crop: int = 224,
        *,
        scale: tuple[float, float] = (0.16, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        flip: bool = True,
        normalization: str | Normalization = "resnet50",
    ) -> None:
        self.crop = _check_size(crop, "crop")
        self.scale = _check_range("scale", scale, 0.0)
        if self.scale[1] > 1.0:
            raise ValueError(
                f"scale must lie in (0, 1] (a fraction of the image area), got {scale!r}."
            )
        self.ratio = _check_range("ratio", ratio, 0.0)
        self.flip = bool(flip)
        self.normalization = normalization_for(normalization)

    def sample(self, regions: torch.Tensor, generator: torch.Generator) -> CropParams:
        """Draw the crop windows and flips of a batch whose image regions are ``regions``."""
        if not isinstance(generator, torch.Generator):
            raise TypeError(
                "pass a torch.Generator (e.g. torch.Generator().manual_seed(0)); the augmentation "
                f"uses no global random state. Got {type(generator).__name__}."
            )
        boxes = random_resized_crop_boxes(regions, self.scale, self.ratio, generator)
        u_flip = torch.rand(
            regions.shape[0], generator=generator, device=generator.device, dtype=torch.float64
        ).cpu()
        flips = (u_flip < 0.5) if self.flip else torch.zeros(regions.shape[0], dtype=torch.bool)
        return CropParams(boxes, flips)

    def apply(self, images: torch.Tensor, params: CropParams) -> torch.Tensor:
        """Crop, resize, flip and normalise ``images`` with drawn ``params``."""
        _check_images(images)
        out = crop_resize(images, params.boxes, self.crop, params.flips)
        return self.normalization(out)

    def __call__(
        self,
        images: torch.Tensor,
        generator: torch.Generator,
        *,
        regions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Augment a batch.

        Parameters
        ----------
        images : Tensor of shape (B, 3, H, W), uint8
            RGB, on any device; the result is on the same device.
        generator : torch.Generator
            Source of all random numbers (CPU or the batch's device).
        regions : Tensor of shape (B, 4), optional
            ``(top, left, height, width)`` of the image pixels (``Batch.regions``); default the
            whole image.

        Returns
        -------
        Tensor of shape (B, 3, crop, crop), float32, normalised.
        """
        _check_images(images)
        params = self.sample(_regions(images, regions), generator)
        return self.apply(images, params)

    def __repr__(self) -> str:
        return (
            f"TrainTransform(crop={self.crop}, scale={self.scale}, ratio=({self.ratio[0]:.4g}, "
            f"{self.ratio[1]:.4g}), flip={self.flip}, normalization={self.normalization.channels}"
            f"/{self.normalization.max_value:g})"
        )


class EvalTransform:
    """``Resize(resize)`` -> ``CenterCrop(crop)`` -> normalisation of a ``uint8`` batch.

    Parameters
    ----------
    crop : int
        Output side (224, or 227 for BN-Inception as in MS).
    resize : int, optional
        Short side the crop is taken from, in the units of the original pipeline (256). Default:
        the side of the input images (the cache size), which makes the crop an exact slice.
    normalization : str or Normalization
        As for :class:`TrainTransform`.
    """

    def __init__(
        self,
        crop: int = 224,
        *,
        resize: int | None = None,
        normalization: str | Normalization = "resnet50",
    ) -> None:
        self.crop = _check_size(crop, "crop")
        self.resize = None if resize is None else _check_size(resize, "resize")
        if self.resize is not None and self.crop > self.resize:
            raise ValueError(f"crop={crop} is larger than resize={resize}; use crop <= resize.")
        self.normalization = normalization_for(normalization)

    def __call__(
        self,
        images: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        regions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Center-crop and normalise a batch (``generator`` is accepted and ignored).

        Returns
        -------
        Tensor of shape (B, 3, crop, crop), float32, normalised.
        """
        _check_images(images)
        _, _, h, w = images.shape
        resize = self.resize if self.resize is not None else min(h, w)
        if self.crop > resize:
            raise ValueError(
                f"crop={self.crop} is larger than the images ({h}x{w}); build the cache with a "
                f"size >= {self.crop} or pass a smaller crop."
            )
        reg = _regions(images, regions)
        full = bool((reg == torch.tensor([0.0, 0.0, h, w], dtype=torch.float64)).all())
        if full and resize == min(h, w) and h == w:
            top = int(round((h - self.crop) / 2.0))  # torchvision CenterCrop rounding
            left = int(round((w - self.crop) / 2.0))
            out = images[:, :, top : top + self.crop, left : left + self.crop]  # uint8 view
        else:
            boxes = center_crop_boxes(reg, self.crop / resize)
            out = crop_resize(images, boxes, self.crop)
        return self.normalization(out)

    def __repr__(self) -> str:
        return (
            f"EvalTransform(crop={self.crop}, resize={self.resize}, "
            f"normalization={self.normalization.channels}/{self.normalization.max_value:g})"
        )
