"""Per-pair base losses of the DRO framework: the margin loss and the binomial loss on ``S``.

The DRO paper ("A Simple and Effective Framework for Pairwise Deep Metric Learning", seed 003)
treats deep metric learning as binary classification of pairs: every pair ``(i, j)`` of the batch
gets its own loss ``l_ij`` (Sec. 3, "Preliminaries"), and the uncertainty set of Eq. 1 decides how
the pairs are weighted. Its tables use two base losses, the subscripts ``M`` and ``B``:

* margin (Wu et al. 2017; DRO Sec. 3.3): ``l_ij = [m + y_ij (lambda - S_ij)]_+``;
* binomial (Yi et al.; Wang et al. 2019, Eq. 9 per pair): ``log(1 + e^{alpha (lambda - S_ij)})``
  on a positive pair and ``log(1 + e^{beta (S_ij - lambda)})`` on a negative pair.

Erratum (named in ``book/12_dro.ipynb``, 12.1): the preliminaries define ``y_ij in {0, 1}``, but
the margin loss needs ``y_ij in {+1, -1}`` (the supplement's Eq. 19 writes ``y_ij = -1``): with
``y_ij = 0`` every negative pair would have the constant loss ``m`` and no gradient. This module
uses ``+1`` for a positive pair and ``-1`` for a negative pair.

Self-pairs: the paper's footnote 1 counts the ``B^2`` pairs including ``(i, i)``; dmlbook's label
masks (:func:`dmlbook.pairs.resolve_masks`) leave them out. For the margin loss with
``m + lambda <= 1`` a self-pair (``S_ii = 1``) has zero loss, so nothing changes once zero-loss
pairs are dropped; for the binomial loss it would add a constant-weight positive pair.

Chapter: ``book/12_dro.ipynb`` (12.1). Tests: ``tests/losses/test_pair_losses.py``; the loops
of :mod:`dmlbook.reference.dro` are the reference.
"""

from __future__ import annotations

import torch

from ..pairs import check_choice, check_positive, softplus

__all__ = ["BASE_LOSSES", "base_loss_slope", "pair_losses"]

#: The base losses of the paper's tables: ``"margin"`` (subscript M), ``"binomial"`` (B).
BASE_LOSSES = ("margin", "binomial")


def pair_losses(
    S: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    base: str = "margin",
    margin: float = 0.2,
    threshold: float = 0.5,
    alpha: float = 2.0,
    beta: float = 50.0,
) -> torch.Tensor:
    """The (B, B) matrix of per-pair losses ``l_ij``; 0 (with gradient 0) off ``pos | neg``.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities.
    pos, neg : bool Tensor of shape (B, B)
        The positive (``y_ij = +1``) and negative (``y_ij = -1``) pairs.
    base : {"margin", "binomial"}
        ``"margin"``: ``[m + y_ij (lambda - S_ij)]_+`` (DRO Sec. 3.3, Eq. 19);
        ``"binomial"``: ``softplus(alpha (lambda - S_ij))`` on positives,
        ``softplus(beta (S_ij - lambda))`` on negatives (Wang et al. 2019, Eq. 9, one pair).
    margin : float
        ``m`` of the margin loss (the paper's Table 2 uses 0.2); unused by the binomial loss.
    threshold : float
        ``lambda``, the similarity both losses bend at (0.5 in Table 2).
    alpha, beta : float
        Slopes of the binomial loss (> 0); unused by the margin loss.

    Returns
    -------
    Tensor of shape (B, B)
    """
    check_choice(base, BASE_LOSSES, "base")
    pair = pos | neg
    if base == "margin":  # one hinge for both signs: y (lambda - S) with y = +1 / -1
        t = threshold - S
        return torch.where(pair, torch.relu(margin + torch.where(pos, t, -t)), 0.0)
    lp = softplus(check_positive(alpha, "alpha") * (threshold - S))
    ln = softplus(check_positive(beta, "beta") * (S - threshold))
    return torch.where(pos, lp, torch.where(neg, ln, 0.0))


def base_loss_slope(
    S: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    base: str = "margin",
    margin: float = 0.2,
    threshold: float = 0.5,
    alpha: float = 2.0,
    beta: float = 50.0,
) -> torch.Tensor:
    """``dl_ij / dS_ij`` in closed form (no autograd): what Lemma 1 multiplies by ``p*_ij``.

    Margin loss: ``-y_ij`` where the hinge is open (``l_ij > 0``), else 0. Binomial loss:
    ``-alpha sigma(alpha (lambda - S_ij))`` on a positive pair, ``beta sigma(beta (S_ij - lambda))``
    on a negative one. Zero off ``pos | neg``. The tests compare autograd of every DRO loss with
    ``p* * base_loss_slope`` (``tests/losses/test_dro.py``).
    """
    check_choice(base, BASE_LOSSES, "base")
    zero = torch.zeros_like(S)
    if base == "margin":
        t = threshold - S  # the same rounding as pair_losses
        sp = torch.where(margin + t > 0, -torch.ones_like(S), zero)
        sn = torch.where(margin + (-t) > 0, torch.ones_like(S), zero)
    else:
        sp = -alpha * torch.sigmoid(alpha * (threshold - S))
        sn = beta * torch.sigmoid(beta * (S - threshold))
    return torch.where(pos, sp, torch.where(neg, sn, zero))
