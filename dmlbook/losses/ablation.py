"""The loss family of Wang et al. 2019, Table 2: each ablation row as a configured loss module.

Chapter: ``book/10_multi_similarity.ipynb``, 10.7 "Table 2, re-run on `synthetic`". Proof: each
row's weights are those of its parent loss (Chapters 5, 6, 10). Tests: ``tests/losses/test_ablation.py``.
The study around it (the paper's numbers, reading and summarising results) is
:mod:`dmlbook.studies.ms_ablation`.

Table 2 of the MS paper trains eight pair-based losses on Cars-196 (64-d embeddings) to isolate
what each of the three similarities (Sec. 4.1) contributes to pair weighting:
=============== ==== ==================================================================
name            sim. what it is in dmlbook
=============== ==== ==================================================================
Binomial        S    :func:`~dmlbook.losses.binomial_deviance_loss` (Eq. 9), all pairs
LiftedStruct*   N    :func:`~dmlbook.losses.lifted_star_loss` (Eq. 16), all pairs
MS mining       P    :func:`~dmlbook.losses.ms_mining_loss`: MS-mined pairs, equal weights
BinLifted       SN   :func:`~dmlbook.losses.binlifted_loss` (supplement Eq. 10), all pairs
MS weighting    SN   :func:`~dmlbook.losses.multi_similarity_loss` with ``mining=False``
Binomial_m      SP   binomial deviance on the MS-mined pairs (Eq. 11-12)
LiftedStruct*_m NP   LiftedStruct* on the MS-mined pairs
MS              SNP  the MS loss (Eq. 11-15)
=============== ==== ==================================================================

The subscript m marks the rows in which MS mining selects the pairs before the weighting
(Table 2 caption): those variants pass the masks of :func:`~dmlbook.mining.ms_mining_masks` to
the same loss function.
BinLifted is listed with S and N only, so it is run without mining. The per-anchor reductions
are each loss's own (binomial and LiftedStruct* average over the anchors that have a pair, MS
over all ``B`` anchors); with Adam a constant factor on the loss changes nothing that matters.

:func:`ablation_loss` returns a configured :class:`~dmlbook.losses.PairLoss` by Table 2 name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..core.declaration import declared
from ..core.pairs import Mask
from ..mining.multi_similarity import ms_mining_masks
from .base import PairLoss
from .binomial import binlifted_loss, binomial_deviance_loss
from .lifted import lifted_star_loss
from .multi_similarity import MSMiningLoss, MultiSimilarityLoss, multi_similarity_loss

__all__ = [
    "TABLE_2",
    "Table2Variant",
    "MinedPairLoss",
    "ablation_loss",
    "table_2_names",
    "table_2_variant",
]


@dataclass(frozen=True)
class Table2Variant:
    """One row of Wang et al. 2019, Table 2.

    Attributes
    ----------
    name : str
        The row's name in the paper.
    similarities : str
        The similarities its weighting considers, as the paper's second column ("S", "SN", ...).
    mined : bool
        Whether the MS mining step (Eq. 11-12) selects the pairs first.
    description : str
        What dmlbook runs for it.
    """

    name: str
    similarities: str
    mined: bool
    description: str


#: The eight rows of Table 2, in the paper's order.
TABLE_2: tuple[Table2Variant, ...] = (
    Table2Variant("Binomial", "S", False, "binomial deviance, Eq. 9, all pairs"),
    Table2Variant("LiftedStruct*", "N", False, "LiftedStruct*, Eq. 16, all pairs"),
    Table2Variant("MS mining", "P", True, "MS-mined pairs (Eq. 11-12), all weights equal"),
    Table2Variant("BinLifted", "SN", False, "BinLifted, supplement Eq. 10, all pairs"),
    Table2Variant("MS weighting", "SN", False, "MS weights (Eq. 13-15), all pairs"),
    Table2Variant("Binomial_m", "SP", True, "binomial deviance on MS-mined pairs"),
    Table2Variant("LiftedStruct*_m", "NP", True, "LiftedStruct* on MS-mined pairs"),
    Table2Variant("MS", "SNP", True, "the MS loss, Eq. 11-15"),
)


def _key(name: str) -> str:
    return name.strip().lower().replace(" ", "_").replace("-", "_")


_BY_KEY = {_key(v.name): v for v in TABLE_2}
_BY_KEY.update(
    {
        "liftedstruct": _BY_KEY["liftedstruct*"],
        "lifted_star": _BY_KEY["liftedstruct*"],
        "liftedstruct_m": _BY_KEY["liftedstruct*_m"],
        "lifted_star_m": _BY_KEY["liftedstruct*_m"],
        "multi_similarity": _BY_KEY["ms"],
    }
)


def table_2_names() -> tuple[str, ...]:
    """The eight Table 2 names, in the paper's order."""
    return tuple(v.name for v in TABLE_2)


def table_2_variant(name: str) -> Table2Variant:
    """The Table 2 row of ``name`` (see :func:`ablation_loss` for the accepted spellings)."""
    if not isinstance(name, str):
        raise TypeError(f"a Table 2 name must be a str, got {type(name).__name__}.")
    key = _key(name)
    if key not in _BY_KEY:
        raise ValueError(
            f"unknown Table 2 variant {name!r}; use one of {', '.join(map(repr, table_2_names()))}."
        )
    return _BY_KEY[key]


class MinedPairLoss(PairLoss):
    """A pair loss, optionally preceded by MS mining (the subscript m of Table 2).

    Parameters
    ----------
    loss_fn : callable
        A pure loss ``loss_fn(S, labels, **hparams, pos_mask=..., neg_mask=...)`` such as
        :func:`~dmlbook.losses.binomial_deviance_loss`.
    hparams : mapping
        Its hyper-parameters; a :func:`~dmlbook.core.declaration.declared` function's are
        checked here, once, and an unknown name is refused here.
    mining : bool
        Mine with :func:`~dmlbook.mining.ms_mining_masks` first and pass the masks on.
    epsilon : float
        The mining margin.
    name : str
        Shown by ``repr``.
    """

    def __init__(
        self,
        loss_fn: Callable[..., torch.Tensor],
        hparams: Mapping[str, Any] | None = None,
        *,
        mining: bool = True,
        epsilon: float = 0.1,
        name: str = "",
    ) -> None:
        super().__init__()
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}.")
        self.loss_fn = loss_fn
        self.hparams = dict(hparams or {})
        check = getattr(loss_fn, "check", None)  # a declared loss: its settings checked once
        if check is not None:
            inspect.signature(loss_fn).bind_partial(**self.hparams)  # an unknown name: TypeError
            checked = check(**self.hparams)
            self.hparams = {name: checked[name] for name in self.hparams}
        self.mining = bool(mining)
        self.epsilon = ms_mining_masks.check(epsilon=epsilon)["epsilon"]
        self.name = name or getattr(loss_fn, "__name__", "loss")

    def mine(
        self, S: torch.Tensor, labels: torch.Tensor, pos_mask: Mask, neg_mask: Mask
    ) -> dict[str, Mask]:
        """MS mining (Eq. 11-12) of the candidates, when ``mining``."""
        if self.mining:  # epsilon was checked at construction
            pos_mask, neg_mask = ms_mining_masks.trusted(
                S, labels, self.epsilon, pos_mask=pos_mask, neg_mask=neg_mask
            )
        return {"pos_mask": pos_mask, "neg_mask": neg_mask}

    def loss_on_similarity(
        self, S: torch.Tensor, labels: torch.Tensor, *, pos_mask: Mask = None, neg_mask: Mask = None
    ) -> torch.Tensor:
        """``loss_fn`` with its hyper-parameters (checked at construction), on the mined pairs."""
        masks = self.mine(S, labels, pos_mask, neg_mask)
        return getattr(self.loss_fn, "trusted", self.loss_fn)(S, labels, **self.hparams, **masks)

    def extra_repr(self) -> str:
        hp = ", ".join(f"{k}={v}" for k, v in self.hparams.items())
        mined = f", epsilon={self.epsilon}" if self.mining else ""
        return f"{self.name}: {hp}, mining={self.mining}{mined}"


@declared(like=multi_similarity_loss)  # the MS loss's alpha, beta, lambda and epsilon
def ablation_loss(name: str, *, alpha, beta, margin, epsilon) -> PairLoss:
    """The loss of one row of Wang et al. 2019, Table 2, configured.

    Parameters
    ----------
    name : str
        A Table 2 name (:func:`table_2_names`; case, spaces and ``-``/``_`` are ignored, and
        ``"lifted_star"``, ``"lifted_star_m"``, ``"multi_similarity"`` are accepted).
    alpha, beta : float
        Shared by every row that has them (binomial, LiftedStruct*, BinLifted, MS); the paper
        uses ``alpha = 2``, ``beta = 50``.
    margin : float
        ``lambda`` of binomial, BinLifted and MS (LiftedStruct* and MS mining have none); the
        paper states ``lambda = 1``, the authors' code uses 0.5 (the default here).
    epsilon : float
        The MS mining margin of the mined rows (paper: 0.1).

    Returns
    -------
    PairLoss
        Call it as ``loss(embeddings, labels)``.

    Examples
    --------
    >>> ablation_loss("Binomial_m", margin=0.5)
    MinedPairLoss(Binomial_m: alpha=2.0, beta=50.0, margin=0.5, mining=True, epsilon=0.1)
    """
    v = table_2_variant(name)
    base = v.name.removesuffix("_m")
    if base == "MS":
        return MultiSimilarityLoss(alpha, beta, margin, epsilon, mining=True)
    if base == "MS weighting":
        return MultiSimilarityLoss(alpha, beta, margin, epsilon, mining=False)
    if base == "MS mining":
        return MSMiningLoss(epsilon, mining=True)
    if base == "Binomial":
        fn, hp = binomial_deviance_loss, {"alpha": alpha, "beta": beta, "margin": margin}
    elif base == "LiftedStruct*":
        fn, hp = lifted_star_loss, {"alpha": alpha, "beta": beta}
    else:  # BinLifted
        fn, hp = binlifted_loss, {"alpha": alpha, "beta": beta, "margin": margin}
    return MinedPairLoss(fn, hp, mining=v.mined, epsilon=epsilon, name=v.name)
