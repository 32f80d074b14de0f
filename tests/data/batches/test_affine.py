"""Tests of dmlbook.data.batches.affine: Koch et al.'s random affine distortions, batched.

Expected values come from independent constructions: a shift written as index arithmetic, a
quarter turn as ``torch.rot90``, a mirror as ``torch.flip``, and the matrix product written out
by hand.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.data.batches.affine import KOCH_RANGES, RandomAffine, affine_matrices


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def images(b: int = 6, size: int = 28, seed: int = 0) -> torch.Tensor:
    return torch.rand(b, 1, size, size, generator=gen(seed), dtype=torch.float64)


def shifted(x: torch.Tensor, tx: int, ty: int) -> torch.Tensor:
    """``x`` moved ``tx`` pixels right and ``ty`` down, zeros filled in (index arithmetic)."""
    out = torch.zeros_like(x)
    h, w = x.shape[-2:]
    for y in range(h):
        for col in range(w):
            sy, sx = y - ty, col - tx
            if 0 <= sy < h and 0 <= sx < w:
                out[..., y, col] = x[..., sy, sx]
    return out


def test_defaults_are_koch_et_al():
    aug = RandomAffine()
    assert (aug.rotate, aug.shear, aug.scale, aug.shift, aug.p) == (10.0, 0.3, (0.8, 1.2), 2.0, 0.5)
    assert KOCH_RANGES["p"] == 0.5


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(8, 20))
def test_whole_pixel_shifts_are_exact_shifts(seed, size):
    x = images(3, size, seed)
    aug = RandomAffine.shifts(3)
    linear, shift = aug.sample(3, gen(seed))
    torch.testing.assert_close(linear, torch.eye(2, dtype=torch.float64).expand(3, 2, 2))
    out = aug(x, gen(seed))
    for i in range(3):
        tx, ty = (int(v) for v in shift[i])
        assert abs(tx) <= 3 and abs(ty) <= 3
        torch.testing.assert_close(out[i], shifted(x[i], tx, ty), atol=1e-12, rtol=0)


def test_quarter_turn_and_mirror_match_torch():
    x = images(2, 12)
    quarter = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)  # R(90 degrees)
    aug = RandomAffine(rotate=0.0, shear=0.0, scale=(1.0, 1.0), shift=0.0, p=0.0)
    aug.sample = lambda n, g: (quarter.expand(n, 2, 2), torch.zeros(n, 2, dtype=torch.float64))
    # counter-clockwise on screen: the top row becomes the left column, read bottom to top
    torch.testing.assert_close(aug(x, gen()), torch.rot90(x, 1, dims=(2, 3)), atol=1e-12, rtol=0)
    mirror = torch.tensor([[-1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    aug.sample = lambda n, g: (mirror.expand(n, 2, 2), torch.zeros(n, 2, dtype=torch.float64))
    torch.testing.assert_close(aug(x, gen()), torch.flip(x, dims=(3,)), atol=1e-12, rtol=0)


def test_matrices_are_rotation_shear_scale_written_out():
    theta = torch.tensor([0.3], dtype=torch.float64)
    shear = torch.tensor([[0.2, -0.1]], dtype=torch.float64)
    scale = torch.tensor([[0.9, 1.1]], dtype=torch.float64)
    c, s = math.cos(0.3), math.sin(0.3)
    rot = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    she = torch.tensor([[1.0, 0.2], [-0.1, 1.0]], dtype=torch.float64)
    sca = torch.tensor([[0.9, 0.0], [0.0, 1.1]], dtype=torch.float64)
    torch.testing.assert_close(affine_matrices(theta, shear, scale)[0], rot @ she @ sca)


def test_draws_stay_in_range_and_each_component_is_skipped_about_half_the_time():
    aug = RandomAffine()
    n = 4000
    linear, shift = aug.sample(n, gen(3))
    assert shift.abs().max() <= 2.0
    identity_shift = (shift == 0).all(dim=1).double().mean().item()
    assert abs(identity_shift - 0.5) < 0.04  # p = 0.5: half the images are not translated
    det = torch.linalg.det(linear)
    # |det| = s_x s_y (1 - rho_x rho_y): within the extremes of the ranges
    assert det.min() >= 0.8**2 * (1 - 0.3**2) - 1e-12
    assert det.max() <= 1.2**2 * (1 + 0.3**2) + 1e-12


def test_same_generator_state_same_batch_and_shape_kept():
    x = images(5).float()
    a = RandomAffine()(x, gen(7))
    b = RandomAffine()(x, gen(7))
    assert a.shape == x.shape and a.dtype == x.dtype
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert not torch.equal(a, RandomAffine()(x, gen(8)))


def test_probability_zero_is_the_identity():
    x = images(4)
    out = RandomAffine(p=0.0)(x, gen())
    torch.testing.assert_close(out, x, atol=1e-12, rtol=0)


def test_ink_is_kept_roughly_under_small_distortions():
    x = torch.zeros(64, 1, 28, 28)
    x[:, :, 10:18, 13:15] = 1.0  # a vertical stroke in the middle
    out = RandomAffine()(x, gen())
    ratio = out.sum(dim=(1, 2, 3)) / x.sum(dim=(1, 2, 3))
    assert ratio.min() > 0.55 and ratio.max() < 1.6  # area scales by |det| in [0.58, 1.57]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rotate": -1}, "rotate must be >= 0"),
        ({"shear": float("nan")}, "shear must be a finite number"),
        ({"scale": (1.2, 0.8)}, "scale must satisfy"),
        ({"scale": 1.0}, "scale must be a pair"),
        ({"p": 1.5}, "p is a probability"),
    ],
)
def test_bad_settings_say_what_is_wrong(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RandomAffine(**kwargs)


def test_bad_images_say_what_is_wrong():
    aug = RandomAffine()
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        aug(torch.zeros(28, 28), gen())
    with pytest.raises(TypeError, match="floating point"):
        aug(torch.zeros(2, 1, 28, 28, dtype=torch.uint8), gen())
    with pytest.raises(TypeError, match="torch.Generator"):
        aug(torch.zeros(2, 1, 28, 28), 0)


def test_works_as_fit_augment():
    from dmlbook.models import SmallCNN
    from dmlbook.training import fit

    g = gen(1)
    x = torch.rand(40, 1, 12, 12, generator=g)
    y = torch.arange(8).repeat_interleave(5)
    torch.manual_seed(0)
    model = SmallCNN(in_channels=1, dim=8, width=2, stride=1)
    from dmlbook.losses import get_loss

    history = fit(
        model, get_loss("contrastive"), (x, y), (x, y), epochs=1, batch_size=20, k=5,
        progress=False, augment=RandomAffine(),
    )  # fmt: skip
    assert len(history) == 2 and history["R@1"].notna().all()


def test_numpy_integer_ranges_are_accepted():
    """Issue 38: rotate=numpy.int64(5) is 5 degrees, as rotate=5 is; True is refused."""
    import numpy as np

    assert RandomAffine(rotate=np.int64(5), shift=np.uint8(1)).rotate == 5.0
    with pytest.raises(ValueError, match="rotate must be a finite number"):
        RandomAffine(rotate=True)
