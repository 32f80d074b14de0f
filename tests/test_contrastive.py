import pytest
import torch

from dmlbook.losses import ContrastiveLoss, contrastive_loss


def brute_force(S, labels, margin):
    total, count = 0.0, 0
    for i in range(len(labels)):
        for j in range(len(labels)):
            if i == j:
                continue
            count += 1
            if labels[i] == labels[j]:
                total += -float(S[i, j])
            else:
                total += max(float(S[i, j]) - margin, 0.0)
    return total / max(count, 1)


def test_matches_equation_4_pair_by_pair():
    g = torch.Generator().manual_seed(1)
    S = torch.rand(6, 6, generator=g, dtype=torch.float64) * 2 - 1
    S = (S + S.T) / 2
    labels = torch.tensor([0, 0, 1, 1, 2, 0])
    for margin in (-0.2, 0.0, 0.4):
        got = float(contrastive_loss(S, labels, margin))
        assert got == pytest.approx(brute_force(S, labels.tolist(), margin), abs=1e-12)


def test_masks_only_narrow_the_label_masks():
    S = torch.full((3, 3), 0.9)
    labels = torch.tensor([0, 0, 1])
    everything = torch.ones(3, 3, dtype=torch.bool)
    assert contrastive_loss(S, labels, 0.5, pos_mask=everything, neg_mask=everything) == (
        contrastive_loss(S, labels, 0.5)
    )
    with pytest.raises(ValueError, match="bool tensor of shape"):
        contrastive_loss(S, labels, 0.5, pos_mask=torch.ones(2, 2, dtype=torch.bool))


def test_single_sample_gives_zero_with_defined_gradient():
    x = torch.randn(1, 4, requires_grad=True)
    loss = ContrastiveLoss()(x, torch.tensor([3]))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(x.grad, torch.zeros_like(x))


def test_module_checks_inputs():
    with pytest.raises(ValueError, match="one label per embedding"):
        ContrastiveLoss()(torch.randn(4, 3), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="must lie in"):
        ContrastiveLoss(margin=2.0)
