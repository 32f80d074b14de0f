"""Tests of :func:`dmlbook.training.fit` (:mod:`dmlbook.training.in_memory`) on the digits: history layout, learning, determinism, failures."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

from dmlbook.data import load_dataset
from dmlbook.losses import ContrastiveLoss
from dmlbook.models import EmbeddingMLP
from dmlbook.training import cosine_factor, fit

# The digits train split has only 5 classes (0-4): P x K batches need P <= 5.
FAST = dict(batch_size=50, k=10, progress=False)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", "train"), load_dataset("digits", "test")


def _model(seed: int = 0, dim: int = 8) -> EmbeddingMLP:
    torch.manual_seed(seed)
    return EmbeddingMLP(in_features=64, hidden=(32,), dim=dim)


def test_history_layout(digits):
    train, test = digits
    history = fit(_model(), ContrastiveLoss(0.5), train, test, epochs=2, ks=(1, 4), **FAST)
    assert isinstance(history, pd.DataFrame)
    assert list(history.columns) == ["epoch", "loss", "R@1", "R@4", "seconds"]
    assert history["epoch"].tolist() == [0, 1, 2]
    assert math.isnan(history["loss"].iloc[0])  # evaluated before any training
    assert history["loss"].iloc[1:].notna().all()
    assert history[["R@1", "R@4"]].stack().between(0, 1).all()
    assert (history["R@4"] >= history["R@1"]).all()
    assert history["seconds"].is_monotonic_increasing
    assert history.attrs["interrupted"] is False
    assert history.attrs["epochs_done"] == 2


def test_every_batch_loss_is_recorded_and_averages_to_the_epoch_loss(digits):
    train, _ = digits
    losses = []

    class Recorded(ContrastiveLoss):
        def forward(self, embeddings, labels):
            value = super().forward(embeddings, labels)
            losses.append(value.item())
            return value

    history = fit(_model(), Recorded(0.5), train, epochs=3, eval_every=3, **FAST)
    steps = history.attrs["step_loss"]
    assert steps == losses and len(steps) % 3 == 0  # every batch, in order
    per_epoch = len(steps) // 3
    assert history["loss"].iloc[-1] == pytest.approx(sum(steps[-per_epoch:]) / per_epoch)


def test_without_test_set_and_eval_every(digits):
    train, _ = digits
    history = fit(_model(), ContrastiveLoss(), train, epochs=3, eval_every=2, **FAST)
    assert list(history.columns) == ["epoch", "loss", "seconds"]
    assert history["epoch"].tolist() == [0, 2, 3]  # the last epoch is always evaluated


def test_training_improves_recall_on_held_out_images(digits):
    """Contrastive training lifts R@1 on unseen images of the training classes.

    The digits *test* split (unseen classes 5-9) is not used here on purpose: raw pixels already
    reach R@1 = 99% on it and a randomly initialised 32-d MLP about 96%, and training on five
    classes does not reliably raise that (it often lowers it). Held-out images of the seen
    classes with an 8-d embedding (about 80% at initialisation) make a test that can fail only if
    training is broken.
    """
    train, _ = digits
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(0))
    fit_idx, held_idx = order[: len(train) // 2], order[len(train) // 2 :]
    part = (train.inputs[fit_idx], train.labels[fit_idx])
    held = (train.inputs[held_idx], train.labels[held_idx])
    history = fit(_model(seed=1), ContrastiveLoss(0.5), part, held, epochs=4, ks=(1,), **FAST)
    r1 = history["R@1"]
    assert r1.iloc[-1] > r1.iloc[0] + 0.05, history
    assert r1.iloc[-1] > 0.9, history
    assert history["loss"].iloc[-1] < history["loss"].iloc[1]


def test_identical_seeds_give_identical_histories(digits):
    train, test = digits
    runs = [
        fit(_model(seed=3), ContrastiveLoss(0.5), train, test, epochs=2, seed=7, **FAST)
        for _ in range(2)
    ]
    a, b = (run.drop(columns="seconds") for run in runs)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    other = fit(_model(seed=3), ContrastiveLoss(0.5), train, test, epochs=2, seed=8, **FAST)
    assert not other["loss"].iloc[1:].equals(a["loss"].iloc[1:])  # the seed matters


def test_nan_loss_raises_a_clear_error(digits):
    train, _ = digits

    def nan_loss(embeddings, labels):
        return embeddings.sum() * float("nan")

    with pytest.raises(FloatingPointError, match=r"loss became nan at epoch 1, batch 1; lower lr"):
        fit(_model(), nan_loss, train, epochs=2, **FAST)


class _InterruptOn:
    """A contrastive loss that raises KeyboardInterrupt (like Ctrl-C) on its n-th call."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0
        self.loss = ContrastiveLoss(0.5)

    def __call__(self, embeddings, labels):
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return self.loss(embeddings, labels)


def test_keyboard_interrupt_returns_history_so_far(digits, capsys):
    train, test = digits
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    history = fit(model, _InterruptOn(3), train, test, epochs=3, **FAST)
    assert history.attrs["interrupted"] is True
    assert history.attrs["epochs_done"] == 0
    assert history["epoch"].tolist() == [0]
    assert list(history.columns) == ["epoch", "loss", "R@1", "R@2", "R@4", "R@8", "seconds"]
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "interrupted at epoch 1, batch 3" in out
    # the two steps taken before the interrupt are kept
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    assert model.training  # mode restored


def test_keyboard_interrupt_in_second_epoch_keeps_first_epoch(digits, capsys):
    train, test = digits
    per_epoch = len(train) // FAST["batch_size"]
    history = fit(_model(), _InterruptOn(per_epoch + 2), train, test, epochs=3, **FAST)
    assert history["epoch"].tolist() == [0, 1]
    assert history.attrs["interrupted"] is True and history.attrs["epochs_done"] == 1
    assert "epoch 2, batch 2" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["adamw", "sgd", "SGD"])
def test_other_optimizers_and_grad_clip(digits, name):
    train, _ = digits
    history = fit(
        _model(), ContrastiveLoss(), train, epochs=1, optimizer=name, grad_clip=1.0,
        batches_per_epoch=3, weight_decay=1e-4, **FAST,
    )  # fmt: skip
    assert history.attrs["optimizer"] == name.lower()
    assert len(history) == 2


def test_invalid_arguments_raise_before_training(digits):
    train, test = digits
    model = _model()
    with pytest.raises(ValueError, match="Unknown optimizer 'rmsprop'; use one of adam, adamw"):
        fit(model, ContrastiveLoss(), train, test, optimizer="rmsprop", **FAST)
    with pytest.raises(ValueError, match="epochs must be a positive int"):
        fit(model, ContrastiveLoss(), train, epochs=0, **FAST)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        fit(model, "contrastive", train, **FAST)
    with pytest.raises(TypeError, match=r"train must be a dataset with \.inputs and \.labels"):
        fit(model, ContrastiveLoss(), train.inputs, **FAST)
    with pytest.raises(ValueError, match="one label per input"):
        fit(model, ContrastiveLoss(), (train.inputs, train.labels[:-1]), **FAST)
    with pytest.raises(ValueError, match="lr must be a positive"):
        fit(model, ContrastiveLoss(), train, lr=0.0, **FAST)
    with pytest.raises(ValueError, match="grad_clip"):
        fit(model, ContrastiveLoss(), train, grad_clip=-1.0, **FAST)
    with pytest.raises(ValueError, match="P=6 distinct classes"):  # from PKSampler
        fit(model, ContrastiveLoss(), train, batch_size=60, k=10, progress=False)
    with pytest.raises(TypeError, match="scalar tensor"):
        fit(model, lambda e, y: e.sum(1), train, epochs=1, **FAST)


def test_augment_gets_every_batch_and_the_seeded_generator(digits):
    train, _ = digits
    seen = []

    def augment(x, generator):
        seen.append((x.shape, isinstance(generator, torch.Generator)))
        return x + 0.01 * torch.randn(x.shape, generator=generator)

    fit(_model(), ContrastiveLoss(), train, epochs=2, batches_per_epoch=4, augment=augment, **FAST)
    assert seen == [((50, 64), True)] * 8


def test_loss_parameters_are_trained(digits):
    train, _ = digits

    class ScaledLoss(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.tensor(1.0))
            self.inner = ContrastiveLoss()

        def forward(self, embeddings, labels):
            return self.scale * self.inner(embeddings, labels) + (self.scale - 2.0) ** 2

    loss = ScaledLoss()
    fit(_model(), loss, train, epochs=1, batches_per_epoch=5, **FAST)
    assert loss.scale.item() != 1.0


def test_progress_bar_follows_tqdm_disable(digits, capsys, monkeypatch):
    train, _ = digits
    kwargs = dict(epochs=1, batch_size=50, k=10, batches_per_epoch=2)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    fit(_model(), ContrastiveLoss(), train, progress=None, **kwargs)
    assert "fit" in capsys.readouterr().err  # on by default
    fit(_model(), ContrastiveLoss(), train, progress=False, **kwargs)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    fit(_model(), ContrastiveLoss(), train, progress=None, **kwargs)
    assert capsys.readouterr().err == ""
    fit(_model(), ContrastiveLoss(), train, progress=True, **kwargs)
    assert "2/2" in capsys.readouterr().err


def test_cosine_decay_lowers_the_learning_rate_to_zero(digits):
    factor = cosine_factor(8)
    assert [round(factor(i), 6) for i in (0, 4, 8)] == [1.0, 0.5, 0.0]
    train, _ = digits
    model = _model()
    opt_lrs = []
    orig = torch.optim.Adam.step

    def step(self, *a, **k):
        opt_lrs.append(self.param_groups[0]["lr"])
        return orig(self, *a, **k)

    torch.optim.Adam.step = step
    try:
        history = fit(model, ContrastiveLoss(), train, epochs=2, batches_per_epoch=4, lr=0.01,
                      lr_decay="cosine", **FAST)  # fmt: skip
    finally:
        torch.optim.Adam.step = orig
    expected = [0.01 * 0.5 * (1 + math.cos(math.pi * i / 8)) for i in range(8)]
    assert opt_lrs == pytest.approx(expected)
    assert history.attrs["lr_decay"] == "cosine"
    with pytest.raises(ValueError, match="lr_decay must be None or 'cosine'"):
        fit(model, ContrastiveLoss(), train, epochs=1, lr_decay="step", **FAST)


def test_a_numpy_integer_k_is_one_recall_k():
    """Issue 38: ks=numpy.int64(4) means (4,), as ks=4 does (it used to fail in tuple())."""
    import numpy as np

    from dmlbook.training.in_memory import _check_args

    model, loss = _model(), ContrastiveLoss(0.5)
    for k in (np.int64(4), np.uint8(4), 4):
        assert _check_args(model, loss, 1, 1, k, None, None, "random", None) == (4,)


def test_evaluation_in_small_batches_records_the_one_batch_recall():
    """fit embeds the test set EVAL_BATCH_CPU samples at a time (a cache-sized batch, for speed);
    the recorded Recall@K must be that of the whole test set embedded in one forward pass, bit for
    bit, for the chapters' SmallCNN (convolutions, BatchNorm in eval mode) as for an MLP."""
    from dmlbook.data import load_dataset
    from dmlbook.evaluate import recall_at_k
    from dmlbook.losses import TripletLoss
    from dmlbook.models import SmallCNN
    from dmlbook.training.in_memory import EVAL_BATCH_CPU

    train, test = load_dataset("synthetic", "train"), load_dataset("synthetic", "test")
    picks = torch.arange(0, 3000, 10)  # 300 test images of all 100 classes: 3 batches of 128
    test_x, test_y = test.inputs[picks], test.labels[picks]
    assert len(picks) > 2 * EVAL_BATCH_CPU
    torch.manual_seed(0)
    model = SmallCNN(dim=16, width=4)
    history = fit(model, TripletLoss(0.1), train, (test_x, test_y), epochs=1,
                  batches_per_epoch=3, **FAST | {"k": 5, "batch_size": 30})  # fmt: skip
    model.eval()
    with torch.no_grad():
        whole = model(test_x)  # one forward pass over all 300
    expected = recall_at_k(whole, test_y, (1, 2, 4, 8))
    assert history.iloc[-1][["R@1", "R@2", "R@4", "R@8"]].tolist() == [
        float(expected[k]) for k in (1, 2, 4, 8)
    ]
