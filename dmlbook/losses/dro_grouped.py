"""DRO-KL with sampled pairs (Sec. 3.2), grouped KL-DRO (Eq. 7, "DRO-KL-G") with its pseudo
pairs, and HAP2S_E: the DRO paper's variants beyond the plain sets of Eq. 1.

KL sampling (Sec. 3.2, :func:`dro_kl_sampled_loss`): instead of weighting every pair by ``p* =
softmax(l / gamma)``, draw pairs from ``p*`` and average their losses.

Eq. 7 groups ``p`` per anchor and per sign and regularises each group towards its own uniform
distribution:

    F = max_p sum_i [ sum_{P_i u N_i} p_ij l_ij - gamma_i^+ KL(p_i^+ || 1/P_i) - gamma_i^- KL(p_i^- || 1/N_i) ]
        s.t. sum_{P_i} p_ij = 1, sum_{N_i} p_ij = 1,

whose closed form (supplement Eq. 15-18) is, per anchor,

    F_i = gamma^+ log((1/P_i) sum_{P_i} e^{l_ij/gamma^+}) + gamma^- log((1/N_i) sum_{N_i} e^{l_ij/gamma^-})

with ``p*`` the softmax of ``l/gamma`` inside each group. With the margin loss, every hinge open
and ``gamma = 1`` its gradient is the lifted-structure loss's (Eq. 6, 22), but only where the
LS hinge of Eq. 3 is open (an erratum, proved in :mod:`dmlbook.symbolic.dro`).

Pseudo pairs (supplement 6.1.2, Eq. 23-25): each group gets one more element with a fixed loss
``l_0`` (the paper takes ``l_0 = 0``). Its weight is ``e^{l_ij/gamma} / (e^{l_0/gamma} + sum
e^{l_ik/gamma})``; with ``gamma^+ = 1/alpha``, ``gamma^- = 1/beta`` and open hinges these are the
MS weights (Wang et al. 2019, Eq. 13-14) with the thresholds ``lambda + m - l_0`` on positives
and ``lambda - m + l_0`` on negatives. The paper's ``l_0 = 0`` therefore needs ``m = 0`` to give MS
with one ``lambda`` (erratum); ``l_0 = m`` (the loss of a pair at ``S = lambda``) gives MS's
weights with ``lambda`` for every ``m``.

HAP2S_E (Yu et al. 2018; supplement 6.1.3, Eq. 30-32): per anchor, the hinge of a triplet made
of the softmax-weighted (weights held constant) positive and negative similarities.

Chapter: ``book/12_dro.ipynb`` (12.4-12.6). Proofs: :mod:`dmlbook.symbolic.dro`. Reference
loops: :mod:`dmlbook.reference.dro`. Tests: ``tests/losses/test_dro_grouped.py``,
``tests/losses/test_dro.py`` (sampling).
"""

from __future__ import annotations

import math
from typing import Annotated

import torch

from ..core.declaration import declared
from ..core.pairs import Mask, pair_sets, reduce
from ..core.validation import Number, Real, Scale
from .base import PairLoss
from .dro import Base, dro_candidates, dro_loss, pair_losses

#: Pairs drawn per step by :func:`dro_kl_sampled_loss`.
Draws = Annotated[int, Number(1, 10**7, "pairs drawn per step", integer=True)]

__all__ = [
    "DROGroupedLoss",
    "DROSampledLoss",
    "HAP2SLoss",
    "dro_kl_grouped_loss",
    "dro_kl_sampled_loss",
    "dro_kl_grouped_weights",
    "hap2s_e_loss",
]


# Defaults: those of dmlbook.losses.dro (Table 2's m = 0.2, lambda = 0.5; gamma = 0.1, one of
# the swept values {1, 0.1, 0.01, 0.001}; zero-loss pairs removed, Sec. 4.2.1).


@declared(like=dro_loss)
def dro_kl_sampled_loss(
    S,
    labels,
    num_samples: Draws,
    generator: torch.Generator,
    base,
    gamma,
    margin,
    threshold,
    alpha,
    beta,
    *,
    drop_zero,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """DRO-KL with pairs sampled from ``p*`` (Sec. 3.2): mean loss of ``num_samples`` draws.

    The ``num_samples`` pairs are drawn with replacement from ``p* = softmax(l / gamma)`` (held
    fixed) with ``generator``; the result's gradient is an unbiased estimate of
    ``sum p*_ij grad l_ij``, the gradient of DRO-KL (Lemma 1). Its *value* is a sample mean of
    losses, not ``F``. ``tests/losses/test_dro.py`` checks that the mean of the estimates
    converges to the exact gradient.
    """
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            "generator must be a torch.Generator (e.g. torch.Generator().manual_seed(0)), so the "
            f"draws are reproducible; got {type(generator).__name__}."
        )
    base_loss = dict(base=base, margin=margin, threshold=threshold, alpha=alpha, beta=beta)
    l, cand, _, _ = dro_candidates(S, labels, pos_mask, neg_mask, drop_zero, **base_loss)
    if not bool(cand.any()):
        return (S * 0).sum()
    p = torch.softmax(torch.where(cand, l.detach() / gamma, -math.inf).reshape(-1), 0)  # p*
    idx = torch.multinomial(p.to(generator.device), num_samples, True, generator=generator)
    return l.reshape(-1)[idx.to(l.device)].mean()


class DROSampledLoss(PairLoss):
    """Module form of :func:`dro_kl_sampled_loss`; registered as ``"dro_kl_sampled"``.

    The module owns a ``torch.Generator`` (:attr:`generator`, on the CPU) seeded with ``seed``
    when first used, so two modules built alike draw the same pairs. ``num_samples = 160``
    matches the number of pairs top-K keeps at ``B = 80``; the paper does not print its sample
    size (dmlbook's choice).
    """

    loss_function = staticmethod(dro_kl_sampled_loss)

    @staticmethod
    def module_options(
        *,
        num_samples: Draws = 160,
        seed: Annotated[int, Number(0, 2**63 - 1, "a seed", integer=True)] = 0,
    ) -> None:
        """The module's defaults for the draws and the seed of its generator."""

    @property
    def generator(self) -> torch.Generator:
        """The module's ``torch.Generator``, seeded with ``seed`` on first use."""
        if "_generator" not in self.__dict__:
            self.__dict__["_generator"] = torch.Generator().manual_seed(self.seed)
        return self.__dict__["_generator"]

    def mine(
        self, S: torch.Tensor, labels: torch.Tensor, pos_mask: Mask, neg_mask: Mask
    ) -> dict[str, object]:
        """No miner: the masks as given, and the module's generator for the draws."""
        return {"pos_mask": pos_mask, "neg_mask": neg_mask, "generator": self.generator}


def _groups(S, labels, pos_mask, neg_mask, drop_zero, **base_loss):
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    l = pair_losses(S, pos, neg, **base_loss)
    if drop_zero:
        pos, neg = pos & (l.detach() > 0), neg & (l.detach() > 0)
    return l, pos, neg


def _group_logits(l: torch.Tensor, mask: torch.Tensor, gamma: float, l0: float | None):
    """``(z, empty)``: ``l / gamma`` on each anchor's group (``-inf`` off it), the pseudo pair's
    ``l_0 / gamma`` as one more column, and the anchors whose group is empty (their row of
    ``z`` is 0, so that a log-sum-exp or soft-max over it stays finite)."""
    z = torch.where(mask, l / gamma, torch.full_like(l, -math.inf))
    if l0 is not None:  # the pseudo pair: no group is empty
        z = torch.cat([z, torch.full_like(l[:, :1], l0 / gamma)], dim=1)
    empty = ~mask.any(dim=1) if l0 is None else torch.zeros_like(mask[:, 0])
    return torch.where(empty[:, None], torch.zeros_like(z), z), empty


def _group_value(l: torch.Tensor, mask: torch.Tensor, gamma: float, l0: float | None):
    """Per anchor ``gamma log((1/n_i) [e^{l_0/gamma}] + sum_{mask} e^{l/gamma})``; 0 if empty."""
    z, empty = _group_logits(l, mask, gamma, l0)
    count = mask.sum(dim=1).to(l.dtype) + (l0 is not None)
    lse = torch.logsumexp(z, dim=1)
    return torch.where(empty, torch.zeros_like(lse), gamma * (lse - count.clamp_min(1).log()))


@declared
def dro_kl_grouped_loss(
    S,
    labels,
    gamma_pos: Scale = 0.1,
    gamma_neg: Scale = 0.1,
    base: Base = "margin",
    margin: Real = 0.2,
    threshold: Real = 0.5,
    alpha: Scale = 2.0,
    beta: Scale = 50.0,
    *,
    pseudo_pairs: bool = False,
    pseudo_loss: Real = 0.0,
    drop_zero: bool = True,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """DRO-KL-G, the closed form of Eq. 7 (or Eq. 23 with ``pseudo_pairs``).

    Parameters
    ----------
    gamma_pos, gamma_neg : float
        ``gamma_i^+`` and ``gamma_i^-`` (the same for every anchor), > 0.
    base, margin, threshold, alpha, beta
        The per-pair loss, as in :func:`dmlbook.losses.dro.dro_loss`.
    pseudo_pairs : bool
        Add one pseudo pair of loss ``pseudo_loss`` to every group (supplement Eq. 23).
    pseudo_loss : float
        ``l_0``; 0 in the paper, ``margin`` recovers MS's weights exactly (see module notes).
    drop_zero : bool
        Remove zero-loss pairs (Sec. 4.2.1).
    reduction : {"mean", "sum", "none"}
        ``"sum"`` is Eq. 7 as printed (a sum over anchors); ``"mean"`` averages over the anchors
        with at least one real pair; ``"none"`` returns the (B,) anchor values.

    Returns
    -------
    Tensor
        An empty group contributes 0 (with pseudo pairs: ``l_0``, a constant).
    """
    base_loss = dict(base=base, margin=margin, threshold=threshold, alpha=alpha, beta=beta)
    l, pos, neg = _groups(S, labels, pos_mask, neg_mask, drop_zero, **base_loss)
    l0 = pseudo_loss if pseudo_pairs else None
    per = _group_value(l, pos, gamma_pos, l0) + _group_value(l, neg, gamma_neg, l0)
    return reduce(per, reduction, pos.any(dim=1) | neg.any(dim=1))


@declared(like=dro_kl_grouped_loss)
def dro_kl_grouped_weights(
    S,
    labels,
    gamma_pos,
    gamma_neg,
    base,
    margin,
    threshold,
    alpha,
    beta,
    *,
    pseudo_pairs,
    pseudo_loss,
    drop_zero,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """``p*`` of Eq. 7 (supplement Eq. 19, or Eq. 25 with pseudo pairs), a detached (B, B) matrix.

    ``p*_ij = e^{l_ij/gamma} / ([e^{l_0/gamma}] + sum_{k in group} e^{l_ik/gamma})``, computed
    with the group maximum subtracted. The pseudo pair's own weight is not in the matrix.
    """
    base_loss = dict(base=base, margin=margin, threshold=threshold, alpha=alpha, beta=beta)
    l, pos, neg = _groups(S, labels, pos_mask, neg_mask, drop_zero, **base_loss)
    l = l.detach()
    out = torch.zeros_like(l)
    for mask, gamma in ((pos, gamma_pos), (neg, gamma_neg)):
        z, _ = _group_logits(l, mask, gamma, pseudo_loss if pseudo_pairs else None)
        out = torch.where(mask, torch.softmax(z, dim=1)[:, : l.shape[1]], out)
    return out


@declared
def hap2s_e_loss(
    S, labels, margin: Real = 0.2, gamma: Scale = 0.1, *, reduction, pos_mask, neg_mask
) -> torch.Tensor:
    """HAP2S with exponential weights (supplement Eq. 30-32; Yu et al. 2018).

    Per anchor with a positive and a negative: ``[S^-_i - S^+_i + m]_+`` where
    ``S^+_i = sum_{P_i} q^+_ij S_ij / sum q^+`` with ``q^+ = e^{-S/gamma}`` and
    ``S^-_i = sum_{N_i} q^-_ij S_ij / sum q^-`` with ``q^- = e^{S/gamma}``; the weights ``q`` are
    constants for the gradient (the paper's remark below Eq. 32). ``reduction="mean"`` averages
    over those anchors (Eq. 30's ``1/B`` when every anchor has both). Yu et al. (2018) is not
    among the book's sources; ``margin = 0.2`` and ``gamma = 0.1`` are dmlbook's choices (the
    DRO paper prints none).
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    valid = pos.any(dim=1) & neg.any(dim=1)
    ninf = torch.full_like(S, -math.inf)
    safe = valid[:, None]
    qp = torch.softmax(torch.where(safe & pos, -S.detach() / gamma, ninf).where(safe, 0), 1)
    qn = torch.softmax(torch.where(safe & neg, S.detach() / gamma, ninf).where(safe, 0), 1)
    sp = (torch.where(pos, qp, 0) * S).sum(dim=1)
    sn = (torch.where(neg, qn, 0) * S).sum(dim=1)
    per = torch.relu(sn - sp + margin)
    return reduce(per, reduction, valid)


class DROGroupedLoss(PairLoss):
    """Module form of :func:`dro_kl_grouped_loss` (Eq. 7); registered as ``"dro_kl_g"``."""

    loss_function = staticmethod(dro_kl_grouped_loss)


class HAP2SLoss(PairLoss):
    """Module form of :func:`hap2s_e_loss` (supplement Eq. 30-32); registered as ``"hap2s_e"``."""

    loss_function = staticmethod(hap2s_e_loss)
