"""Random affine distortions of small images (Omniglot's 28 x 28 characters), batched.

Koch, Zemel and Salakhutdinov (2015), "Siamese Neural Networks for One-shot Image Recognition"
(ICML Deep Learning Workshop), Sec. 4.2, train their one-shot Omniglot network on affine
distortions of the drawings: a transformation with rotation ``theta`` in [-10, 10] degrees, shears
``rho_x, rho_y`` in [-0.3, 0.3], scales ``s_x, s_y`` in [0.8, 1.2] and translations ``t_x, t_y``
in [-2, 2] pixels, each component included with probability 0.5. :class:`RandomAffine` draws one
such transformation per image and applies the whole batch in one ``grid_sample`` call, so it is
cheap next to a training step and runs on whatever device the batch is on.

It is what :func:`dmlbook.training.fit` calls as ``augment(x, generator)``::

    fit(model, loss, train, test, augment=RandomAffine())          # Koch et al.'s ranges
    fit(model, loss, train, test, augment=RandomAffine.shifts(2))  # translations only

The forward map of image ``i`` sends a point ``p`` (pixel units, origin at the image centre,
``x`` to the right, ``y`` down) to ``A_i p + t_i`` with

    A = R(theta) @ [[1, rho_x], [rho_y, 1]] @ diag(s_x, s_y),

so a translation ``t = (2, 0)`` moves the drawing two pixels to the right. The output samples the
input at ``A^{-1} (q - t)`` (bilinear, zeros outside, ``align_corners=False``), which for a whole
number of pixels of translation and no other component is an exact shift (``torch.roll`` with
zeros filled in). Random numbers come only from the generator passed in (a CPU generator, also
for a batch on a GPU, as :mod:`dmlbook.data.batches.augment`), a fixed ``7 + 7`` per image, so a batch's
distortions are a function of the generator's state alone.

Chapters 1, 9 and 15 train with it; tests in ``tests/data/batches/test_affine.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...core.validation import is_number

__all__ = ["KOCH_RANGES", "RandomAffine", "affine_matrices"]

#: Koch et al. (2015), Sec. 4.2: the ranges of their affine distortions (degrees, shear
#: factors, scale factors, pixels) and the probability of including each component.
KOCH_RANGES = {"rotate": 10.0, "shear": 0.3, "scale": (0.8, 1.2), "shift": 2.0, "p": 0.5}


def _non_negative(name: str, value: object) -> float:
    if not is_number(value) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (it bounds a symmetric range), got {value!r}.")
    return float(value)


def _scale_range(scale: object) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in scale)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(
            f"scale must be a pair (low, high), e.g. (0.8, 1.2), got {scale!r}."
        ) from None
    if not (0 < lo <= hi and math.isfinite(hi)):
        raise ValueError(f"scale must satisfy 0 < low <= high, got {scale!r}.")
    return lo, hi


def affine_matrices(
    theta: torch.Tensor,
    shear: torch.Tensor,
    scale: torch.Tensor,
) -> torch.Tensor:
    """The linear parts ``A = R(theta) @ Shear(rho_x, rho_y) @ diag(s_x, s_y)``, batched.

    Parameters
    ----------
    theta : Tensor of shape (B,)
        Rotation angles in radians (counter-clockwise on screen, where ``y`` points down).
    shear : Tensor of shape (B, 2)
        ``(rho_x, rho_y)``: ``x' = x + rho_x y`` and ``y' = y + rho_y x``.
    scale : Tensor of shape (B, 2)
        ``(s_x, s_y)``.

    Returns
    -------
    Tensor of shape (B, 2, 2)
    """
    c, s = torch.cos(theta), torch.sin(theta)
    rotation = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)
    one = torch.ones_like(theta)
    shearing = torch.stack(
        [torch.stack([one, shear[:, 0]], -1), torch.stack([shear[:, 1], one], -1)], -2
    )
    return rotation @ shearing @ torch.diag_embed(scale)


class RandomAffine:
    """One random affine distortion per image (Koch et al. 2015, Sec. 4.2), as ``fit``'s augment.

    The defaults are Koch et al.'s ranges (:data:`KOCH_RANGES`).

    Parameters
    ----------
    rotate : float
        Rotations are drawn uniformly from ``[-rotate, rotate]`` degrees.
    shear : float
        Each shear factor ``rho_x``, ``rho_y`` from ``[-shear, shear]``.
    scale : (float, float)
        Each scale factor ``s_x``, ``s_y`` from ``[low, high]``.
    shift : float
        Each translation ``t_x``, ``t_y`` from ``[-shift, shift]`` pixels.
    p : float
        Probability that each of the four components (rotation, shear, scale, translation) is
        applied to an image; otherwise it is the identity for that image. Koch et al.: 0.5.
    whole_pixels : bool
        Round translations to whole pixels (then a translation alone is an exact shift).

    Examples
    --------
    >>> x = torch.zeros(4, 1, 28, 28)
    >>> RandomAffine()(x, torch.Generator().manual_seed(0)).shape
    torch.Size([4, 1, 28, 28])
    """

    def __init__(
        self,
        rotate: float = KOCH_RANGES["rotate"],
        shear: float = KOCH_RANGES["shear"],
        scale: tuple[float, float] = KOCH_RANGES["scale"],
        shift: float = KOCH_RANGES["shift"],
        p: float = KOCH_RANGES["p"],
        whole_pixels: bool = False,
    ) -> None:
        self.rotate = _non_negative("rotate", rotate)
        self.shear = _non_negative("shear", shear)
        self.scale = _scale_range(scale)
        self.shift = _non_negative("shift", shift)
        self.p = _non_negative("p", p)
        if self.p > 1:
            raise ValueError(f"p is a probability, it must lie in [0, 1], got {p!r}.")
        self.whole_pixels = bool(whole_pixels)

    @classmethod
    def shifts(cls, pixels: float = 2.0) -> RandomAffine:
        """Translations only, by whole pixels within ``[-pixels, pixels]``, applied to every image."""
        return cls(rotate=0.0, shear=0.0, scale=(1.0, 1.0), shift=pixels, p=1.0, whole_pixels=True)

    def __repr__(self) -> str:
        return (
            f"RandomAffine(rotate={self.rotate:g}, shear={self.shear:g}, "
            f"scale=({self.scale[0]:g}, {self.scale[1]:g}), shift={self.shift:g}, p={self.p:g}"
            + (", whole_pixels=True)" if self.whole_pixels else ")")
        )

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw ``n`` transformations: linear parts ``(n, 2, 2)`` and translations ``(n, 2)``.

        Float64 tensors on the CPU; translations in pixels. Every image uses 14 numbers of the
        generator (7 values and 7 include-or-not draws, four of them used), whatever the settings.
        """
        u = torch.rand(n, 7, generator=generator, dtype=torch.float64, device=generator.device)
        keep = torch.rand(n, 7, generator=generator, dtype=torch.float64, device=generator.device)
        u, keep = u.cpu(), (keep.cpu() < self.p).double()
        sym = 2 * u - 1  # uniform in [-1, 1]
        theta = math.radians(self.rotate) * sym[:, 0] * keep[:, 0]
        shear = self.shear * sym[:, 1:3] * keep[:, 1:2]
        lo, hi = self.scale
        scale = 1 + (lo + (hi - lo) * u[:, 3:5] - 1) * keep[:, 3:4]
        shift = self.shift * sym[:, 5:7] * keep[:, 5:6]
        if self.whole_pixels:
            shift = torch.round(shift)
        return affine_matrices(theta, shear, scale), shift

    def __call__(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Distort a batch ``(B, C, H, W)`` of float images; the result has the same shape."""
        if not isinstance(images, torch.Tensor) or images.ndim != 4:
            shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images)
            raise ValueError(f"images must be a (B, C, H, W) tensor, got {shape}.")
        if not torch.is_floating_point(images):
            raise TypeError(
                f"images must be floating point (e.g. Omniglot's inks in [0, 1]), got "
                f"{images.dtype}; convert with images.float() first."
            )
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}.")
        b, _, h, w = images.shape
        linear, shift = self.sample(b, generator)
        # output pixel q samples the input at A^{-1} (q - t); affine_grid works in coordinates
        # normalised to [-1, 1] (x by w / 2, y by h / 2), so conjugate by that scaling
        inverse = torch.linalg.inv(linear)
        half = torch.tensor([w / 2, h / 2], dtype=torch.float64)
        norm_inverse = inverse * half[None, None, :] / half[None, :, None]
        offset = -(inverse @ shift[:, :, None])[:, :, 0] / half
        grid_theta = torch.cat([norm_inverse, offset[:, :, None]], dim=2)
        grid_theta = grid_theta.to(images.device, images.dtype)
        grid = F.affine_grid(grid_theta, list(images.shape), align_corners=False)
        return F.grid_sample(
            images, grid, mode="bilinear", padding_mode="zeros", align_corners=False
        )
