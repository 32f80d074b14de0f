"""Tests of dmlbook.data.batches.augment: batched random resized crop, flip, center crop, normalisation.

The normalisation constants themselves are tested in ``test_normalization.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.data.batches.augment import (
    CropParams,
    EvalTransform,
    Normalization,
    TrainTransform,
    center_crop_boxes,
    crop_resize,
    normalization_for,
    random_resized_crop_boxes,
)


def batch(b: int = 6, size: int = 64, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (b, 3, size, size), generator=g, dtype=torch.uint8)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------------
# value ranges after the normalisation of each backbone
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backbone", ["resnet50", "bn_inception"])
def test_value_ranges(backbone):
    norm = normalization_for(backbone)
    for aug in (
        TrainTransform(32, normalization=backbone),
        EvalTransform(32, normalization=backbone),
    ):
        black = aug(torch.zeros(2, 3, 48, 48, dtype=torch.uint8), gen())
        white = aug(torch.full((2, 3, 48, 48), 255, dtype=torch.uint8), gen())
        a, b = norm.coefficients()
        torch.testing.assert_close(black, b.expand_as(black))
        torch.testing.assert_close(white, (255 * a + b).expand_as(white))
        x = aug(batch(4, 48), gen())
        assert x.dtype == torch.float32 and x.shape == (4, 3, 32, 32)
        lo, hi = torch.minimum(b, 255 * a + b), torch.maximum(b, 255 * a + b)
        assert bool((x >= lo - 1e-4).all()) and bool((x <= hi + 1e-4).all())


# ------------------------------------------------------------------------------------------
# crop windows
# ------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    h=st.integers(8, 300),
    w=st.integers(8, 300),
    s0=st.floats(0.05, 1.0),
    s1=st.floats(0.05, 1.0),
    seed=st.integers(0, 2**31),
)
def test_crop_scale_bounds(h, w, s0, s1, seed):
    scale = (min(s0, s1), max(s0, s1))
    ratio = (3 / 4, 4 / 3)
    regions = torch.tensor([[5.0, 7.0, h, w]]).expand(64, 4)
    boxes = random_resized_crop_boxes(regions, scale, ratio, gen(seed))
    top, left, bh, bw = boxes.unbind(1)
    assert bool((bh >= 1).all() and (bw >= 1).all())
    assert bool((top >= 5).all() and (left >= 7).all())
    assert bool((top + bh <= 5 + h).all() and (left + bw <= 7 + w).all())
    assert bool((top == top.round()).all() and (bh == bh.round()).all())
    # a drawn window (not the fallback) has its area fraction and aspect ratio in range, up to
    # the rounding of its sides to whole pixels
    fallback = center_fallback(h, w, ratio)
    drawn = ~((bh == fallback[2]) & (bw == fallback[3]))
    area = bh * bw / (h * w)
    slack_area = (bh + bw + 1) / (h * w)
    assert bool((area[drawn] >= scale[0] - slack_area[drawn]).all())
    assert bool((area[drawn] <= scale[1] + slack_area[drawn]).all())
    r = bw / bh
    assert bool((r[drawn] >= ratio[0] * (1 - 1 / bh[drawn]) - 1 / bh[drawn]).all())
    assert bool((r[drawn] <= ratio[1] * (1 + 1 / bh[drawn]) + 1 / bh[drawn]).all())


def center_fallback(h: int, w: int, ratio) -> tuple[int, int, int, int]:
    """torchvision's fallback window ``(top, left, height, width)``."""
    in_ratio = w / h
    if in_ratio < min(ratio):
        fh, fw = round(w / min(ratio)), w
    elif in_ratio > max(ratio):
        fh, fw = h, round(h * max(ratio))
    else:
        fh, fw = h, w
    return (h - fh) // 2, (w - fw) // 2, fh, fw


def test_crop_fallback_when_nothing_fits():
    """A 10 x 100 strip cannot hold a square of 90% of its area: the centered fallback."""
    regions = torch.tensor([[0.0, 0.0, 10.0, 100.0]]).expand(5, 4)
    boxes = random_resized_crop_boxes(regions, (0.9, 1.0), (1.0, 1.0), gen())
    assert boxes.tolist() == [[0.0, 45.0, 10.0, 10.0]] * 5


def reference_get_params(height: int, width: int, scale, ratio, g: torch.Generator):
    """torchvision.transforms.RandomResizedCrop.get_params, transcribed (scalar, per image)."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * float(torch.empty(1).uniform_(scale[0], scale[1], generator=g))
        aspect = math.exp(float(torch.empty(1).uniform_(log_ratio[0], log_ratio[1], generator=g)))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            i = int(torch.randint(0, height - h + 1, size=(1,), generator=g))
            j = int(torch.randint(0, width - w + 1, size=(1,), generator=g))
            return i, j, h, w
    return center_fallback(height, width, ratio)


@pytest.mark.parametrize(("h", "w"), [(256, 256), (256, 341), (100, 400)])
def test_distribution_matches_torchvision(h, w):
    """Window areas, aspect ratios and positions follow torchvision's RandomResizedCrop."""
    n, scale, ratio = 3000, (0.16, 1.0), (3 / 4, 4 / 3)
    ours = random_resized_crop_boxes(
        torch.tensor([[0.0, 0.0, h, w]]).expand(n, 4), scale, ratio, gen(3)
    )
    g = gen(4)
    ref = torch.tensor(
        [reference_get_params(h, w, scale, ratio, g) for _ in range(n)], dtype=torch.float64
    )
    q = torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9], dtype=torch.float64)

    def stats(b):
        area = b[:, 2] * b[:, 3] / (h * w)
        aspect = b[:, 3] / b[:, 2]
        centre = (b[:, 0] + b[:, 2] / 2) / h
        return torch.stack([area.quantile(q), aspect.quantile(q), centre.quantile(q)])

    torch.testing.assert_close(stats(ours), stats(ref), atol=0.04, rtol=0.04)
    area = ours[:, 2] * ours[:, 3] / (h * w)
    assert float(area.min()) > 0.155 and float(area.max()) <= 1.0


def test_center_crop_boxes():
    boxes = center_crop_boxes(torch.tensor([[10.0, 0.0, 100.0, 200.0]]), 0.5)
    assert boxes.tolist() == [[35.0, 75.0, 50.0, 50.0]]


# ------------------------------------------------------------------------------------------
# resampling
# ------------------------------------------------------------------------------------------


def test_crop_resize_equals_interpolate():
    x = batch(3, 40)
    boxes = torch.tensor([[0.0, 0.0, 40.0, 40.0], [5.0, 3.0, 20.0, 30.0], [10.0, 12.0, 17.0, 9.0]])
    out = crop_resize(x, boxes, 24)
    for i, (t, l, h, w) in enumerate(boxes.long().tolist()):
        window = x[i : i + 1, :, t : t + h, l : l + w].float()
        ref = F.interpolate(window, size=(24, 24), mode="bilinear", align_corners=False)
        torch.testing.assert_close(out[i : i + 1], ref, atol=1e-3, rtol=0)


def test_identity_crop_is_exact():
    x = batch(2, 32)
    out = crop_resize(x, torch.tensor([[0.0, 0.0, 32.0, 32.0]] * 2), 32)
    torch.testing.assert_close(out, x.float(), atol=1e-3, rtol=0)


def test_flip_mirrors():
    x = batch(4, 48)
    aug = TrainTransform(32)
    params = aug.sample(torch.tensor([[0.0, 0.0, 48.0, 48.0]]).expand(4, 4), gen(5))
    plain = aug.apply(x, CropParams(params.boxes, torch.zeros(4, dtype=torch.bool)))
    flipped = aug.apply(x, CropParams(params.boxes, torch.ones(4, dtype=torch.bool)))
    torch.testing.assert_close(flipped, plain.flip(-1), atol=1e-4, rtol=0)
    # a flip of the full image is the mirrored image
    full = torch.tensor([[0.0, 0.0, 48.0, 48.0]]).expand(4, 4)
    out = crop_resize(x, full, 48, torch.ones(4, dtype=torch.bool))
    torch.testing.assert_close(out, x.float().flip(-1), atol=1e-3, rtol=0)


def test_flip_probability():
    aug = TrainTransform(16)
    flips = aug.sample(torch.tensor([[0.0, 0.0, 20.0, 20.0]]).expand(4000, 4), gen(1)).flips
    assert abs(float(flips.double().mean()) - 0.5) < 0.03
    assert not TrainTransform(16, flip=False).sample(torch.zeros(10, 4) + 20, gen()).flips.any()


def test_deterministic_given_generator():
    x = batch(8, 64)
    aug = TrainTransform(40, normalization="bn_inception")
    a, b = aug(x, gen(7)), aug(x, gen(7))
    assert torch.equal(a, b)
    assert not torch.equal(a, aug(x, gen(8)))
    g = gen(7)
    first, second = aug(x, g), aug(x, g)
    assert torch.equal(first, a) and not torch.equal(first, second)


def test_train_transform_respects_regions():
    """With padded cells (fit="pad"), windows stay inside the image pixels."""
    x = torch.zeros(16, 3, 64, 64, dtype=torch.uint8)
    x[:, :, 16:48, :] = 200  # image pixels in rows 16-47, zero padding elsewhere
    regions = torch.tensor([[16, 0, 32, 64]]).expand(16, 4)
    out = TrainTransform(24, normalization=Normalization("RGB", 255.0, (0, 0, 0), (1, 1, 1)))(
        x, gen(), regions=regions
    )
    torch.testing.assert_close(out, torch.full_like(out, 200.0))


def test_eval_center_crop_is_a_slice():
    x = batch(3, 256)
    out = EvalTransform(227, normalization=Normalization("RGB", 255.0, (0, 0, 0), (1, 1, 1)))(x)
    top = int(round((256 - 227) / 2))  # torchvision CenterCrop rounding: 14
    assert top == 14
    assert torch.equal(out, x[:, :, top : top + 227, top : top + 227].float())


def test_eval_with_other_resize_and_regions():
    norm = Normalization("RGB", 255.0, (0, 0, 0), (1, 1, 1))
    x = batch(2, 64)
    out = EvalTransform(32, resize=64, normalization=norm)(x)
    torch.testing.assert_close(out, x[:, :, 16:48, 16:48].float())
    # resize 128 on 64-px cells: the central half of the short side, resampled to 32
    half = EvalTransform(32, resize=128, normalization=norm)(x)
    ref = F.interpolate(
        x[:, :, 24:40, 24:40].float(), size=(32, 32), mode="bilinear", align_corners=False
    )
    torch.testing.assert_close(half, ref, atol=1e-3, rtol=0)
    padded = torch.zeros(2, 3, 64, 64, dtype=torch.uint8)
    padded[:, :, 16:48] = 77
    out = EvalTransform(24, normalization=norm)(padded, regions=torch.tensor([[16, 0, 32, 64]] * 2))
    torch.testing.assert_close(out, torch.full_like(out, 77.0))


def test_input_checks():
    aug = TrainTransform(16)
    with pytest.raises(TypeError, match="torch.Generator"):
        aug(batch(2, 32), None)
    with pytest.raises(TypeError, match="uint8"):
        aug(batch(2, 32).float(), gen())
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        aug(batch(2, 32).permute(0, 2, 3, 1), gen())
    with pytest.raises(ValueError, match="regions"):
        aug(batch(2, 32), gen(), regions=torch.zeros(3, 4))
    with pytest.raises(ValueError, match="scale"):
        TrainTransform(16, scale=(0.5, 1.5))
    with pytest.raises(ValueError, match="scale"):
        TrainTransform(16, scale=(0.0, 1.0))
    with pytest.raises(ValueError, match="crop"):
        TrainTransform(0)
    with pytest.raises(ValueError, match="larger"):
        EvalTransform(300)(batch(1, 256))
    with pytest.raises(ValueError, match="larger than resize"):
        EvalTransform(227, resize=200)


def test_runs_on_the_batch_device():
    """The output lives where the input lives (CUDA when available, else the CPU check)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = batch(4, 64).to(device)
    g = torch.Generator(device=device).manual_seed(0)
    out = TrainTransform(32)(x, g)
    assert out.device.type == device and out.shape == (4, 3, 32, 32)
    assert math.isfinite(float(out.abs().sum()))


def test_numpy_integer_crop_sizes_are_accepted():
    """Issue 38: crop=numpy.int64(8) is a crop of 8 pixels; True is refused."""
    import numpy as np

    from dmlbook.data.batches.augment import EvalTransform

    t = EvalTransform(crop=np.int64(8), resize=np.int32(10))
    assert (t.crop, t.resize) == (8, 10) and type(t.crop) is int
    with pytest.raises(ValueError, match="crop must be a positive int"):
        EvalTransform(crop=True)
