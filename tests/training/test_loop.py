"""Tests of dmlbook.training.loop.Trainer, the one training loop of fit and the engine."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from dmlbook.training import Stop, Trainer, make_optimizer


class ScaledSquare(nn.Module):
    """``scale * mean((emb - y)^2)`` with a trained ``scale``: a loss with a parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, emb: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.scale * ((emb - y.float()[:, None]) ** 2).mean()


def _setup(seed: int = 0, **kwargs) -> Trainer:
    torch.manual_seed(seed)
    model, loss = nn.Linear(3, 2), ScaledSquare()
    opt = make_optimizer([*model.parameters(), *loss.parameters()], "sgd", 0.1, momentum=0.5)
    return Trainer(model, loss, opt, **kwargs)


def _batches(epoch: int, skip: int):
    g = torch.Generator().manual_seed(epoch)
    data = [(torch.randn(4, 3, generator=g), torch.arange(4) % 2) for _ in range(3)]
    yield from data[skip:]


def test_step_is_one_sgd_update_at_the_scheduled_lr():
    trainer = _setup(lr_factor=lambda i: 0.5 ** (i + 1))  # first step: no momentum yet
    w0, b0 = (p.detach().clone() for p in trainer.model.parameters())
    x, y = next(_batches(1, 0))
    # the same update by hand: gradient of 2 * mean((x W^T + b - y)^2)
    w, b = w0.clone().requires_grad_(), b0.clone().requires_grad_()
    (2.0 * ((x @ w.T + b - y.float()[:, None]) ** 2).mean()).backward()
    loss = trainer.step(x, y)
    assert trainer.lr == pytest.approx(0.05) and not loss.requires_grad
    assert torch.allclose(trainer.model.weight, w0 - 0.05 * w.grad)
    assert torch.allclose(trainer.model.bias, b0 - 0.05 * b.grad)


def test_run_counts_epochs_and_calls_the_hooks_in_order():
    trainer, events = _setup(), []
    trainer.run(
        7, _batches,
        on_step=lambda loss: events.append(("step", trainer.pos.iteration)),
        on_epoch_end=lambda e: events.append(("epoch", e)),
    )  # fmt: skip
    steps = [("step", i) for i in range(1, 8)]
    assert events == steps[:3] + [("epoch", 1)] + steps[3:6] + [("epoch", 2)] + steps[6:] + [
        ("epoch", 3)
    ]
    assert (trainer.pos.iteration, trainer.pos.epoch, trainer.pos.batch) == (7, 3, 0)


def test_checkpoint_restore_continues_exactly(tmp_path):
    straight = _setup(evaluator=lambda: {"R@1": 0.5})
    straight.evaluate()
    straight.run(8, _batches)
    stopped, calls = _setup(evaluator=lambda: {"R@1": 0.5}), {"n": 0}
    stopped.evaluate()

    def stop_after_five() -> bool:
        calls["n"] += 1
        return calls["n"] > 5

    with pytest.raises(Stop):
        stopped.run(8, _batches, should_stop=stop_after_five)
    assert (stopped.pos.iteration, stopped.pos.epoch, stopped.pos.batch) == (5, 1, 2)
    stopped.checkpoint(tmp_path / "last.pt", note="extra entries are kept")
    resumed = _setup(seed=1, evaluator=lambda: {"R@1": 0.5})  # other initial weights
    assert resumed.restore(tmp_path / "last.pt")["note"] == "extra entries are kept"
    resumed.run(8, _batches)
    for a, b in zip(straight.params, resumed.params, strict=True):  # model, loss
        assert torch.equal(a, b)
    assert [r["iteration"] for r in resumed.history] == [0]
    assert math.isnan(resumed.history[0]["loss"]) and resumed.history[0]["R@1"] == 0.5


def test_bad_losses_and_empty_epochs_are_reported():
    trainer = _setup(check_finite=True)
    trainer.loss_fn = lambda emb, y: emb.sum() * float("nan")
    with pytest.raises(FloatingPointError, match="loss became nan at epoch 1, batch 1; lower lr"):
        trainer.run(2, _batches)
    trainer.loss_fn = lambda emb, y: emb.sum(1)
    with pytest.raises(TypeError, match=r"scalar tensor, got shape \(4,\); reduce it with"):
        trainer.run(2, _batches)
    with pytest.raises(RuntimeError, match="epoch 1 has no batches"):
        _setup().run(2, lambda epoch, skip: iter(()))
