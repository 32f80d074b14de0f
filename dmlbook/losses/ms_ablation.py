"""The ablation family of Wang et al. 2019, Table 2, as named loss configurations.

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
(Table 2 caption): those variants pass the masks of :func:`~dmlbook.losses.ms_mining_masks` to
the same loss function.
BinLifted is listed with S and N only, so it is run without mining. The per-anchor reductions
are each loss's own (binomial and LiftedStruct* average over the anchors that have a pair, MS
over all ``B`` anchors); with Adam a constant factor on the loss changes nothing that matters.

:func:`ablation_loss` returns a configured :class:`~dmlbook.losses.PairLoss` by Table 2 name;
:data:`PAPER_TABLE_2` holds the paper's Recall@K numbers; :func:`summarize_ablation` puts
measured results beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .base import PairLoss, check_positive
from .binomial import binlifted_loss, binomial_deviance_loss
from .lifted import lifted_star_loss
from .multi_similarity import MSMiningLoss, MultiSimilarityLoss, _check_epsilon, ms_mining_masks

__all__ = [
    "PAPER_TABLE_2",
    "TABLE_2",
    "Table2Variant",
    "MinedPairLoss",
    "ablation_loss",
    "paper_table_2",
    "read_ablation_csv",
    "summarize_ablation",
    "table_2_names",
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

#: Wang et al. 2019, Table 2: Recall@1, 2, 4, 8 (%) on Cars-196, embedding size 64.
PAPER_TABLE_2: dict[str, tuple[float, float, float, float]] = {
    "Binomial": (71.9, 80.0, 86.4, 91.0),
    "LiftedStruct*": (69.7, 79.3, 86.2, 91.0),
    "MS mining": (67.0, 77.4, 84.7, 90.0),
    "BinLifted": (70.4, 79.5, 86.2, 91.1),
    "MS weighting": (73.2, 81.5, 87.6, 92.6),
    "Binomial_m": (74.6, 83.8, 89.7, 94.1),
    "LiftedStruct*_m": (72.2, 81.7, 88.0, 92.4),
    "MS": (77.3, 85.3, 90.5, 94.2),
}

_KS = (1, 2, 4, 8)


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


def _variant(name: str) -> Table2Variant:
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
        Its hyper-parameters.
    mining : bool
        Mine with :func:`~dmlbook.losses.ms_mining_masks` first and pass the masks on.
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
        self.mining = bool(mining)
        self.epsilon = _check_epsilon(epsilon)
        self.name = name or getattr(loss_fn, "__name__", "loss")

    def loss_on_similarity(
        self,
        S: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if self.mining:
            pos_mask, neg_mask = ms_mining_masks(
                S, labels, self.epsilon, pos_mask=pos_mask, neg_mask=neg_mask
            )
        return self.loss_fn(S, labels, **self.hparams, pos_mask=pos_mask, neg_mask=neg_mask)

    def extra_repr(self) -> str:
        hp = ", ".join(f"{k}={v}" for k, v in self.hparams.items())
        mined = f", epsilon={self.epsilon}" if self.mining else ""
        return f"{self.name}: {hp}, mining={self.mining}{mined}"


def ablation_loss(
    name: str,
    *,
    alpha: float = 2.0,
    beta: float = 50.0,
    margin: float = 0.5,
    epsilon: float = 0.1,
) -> PairLoss:
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
    v = _variant(name)
    alpha = check_positive(alpha, "alpha")
    beta = check_positive(beta, "beta")
    epsilon = _check_epsilon(epsilon)
    margin = float(margin)
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


def paper_table_2() -> pd.DataFrame:
    """Wang et al. 2019, Table 2 as a table: index the variant, columns ``sim``, ``R@1`` .. ``R@8``."""
    rows = [
        {
            "variant": v.name,
            "sim": v.similarities,
            **dict(zip([f"R@{k}" for k in _KS], PAPER_TABLE_2[v.name], strict=True)),
        }
        for v in TABLE_2
    ]
    return pd.DataFrame(rows).set_index("variant")


def summarize_ablation(results: pd.DataFrame, ks: tuple[int, ...] = _KS) -> pd.DataFrame:
    """Mean +- std over seeds of an ablation run, beside the paper's Table 2.

    Parameters
    ----------
    results : DataFrame
        One row per (variant, seed) with columns ``variant`` (Table 2 names; the ``loss`` column
        of :func:`dmlbook.experiments.compare_losses` is accepted instead) and ``R@K``
        (fractions in [0, 1] or percentages; fractions are converted to %).
    ks : tuple of int
        The ``K`` to show.

    Returns
    -------
    DataFrame
        Index: the variants in Table 2 order (those present). Columns: ``sim``, ``seeds``, and
        for each ``K`` the measured ``R@K`` as ``"mean ± std"`` (percent, one decimal) beside the
        paper's ``R@K (paper)``; plus ``rank`` (by measured mean R@1, 1 = best) and
        ``rank (paper)``. The numeric means and stds are in ``frame.attrs["mean"]`` and
        ``frame.attrs["std"]``.
    """
    if "variant" not in results.columns and "loss" in results.columns:
        results = results.rename(columns={"loss": "variant"})
    if "variant" not in results.columns:
        raise ValueError(
            "results needs a 'variant' column with Table 2 names (or the 'loss' column of "
            "dmlbook.experiments.compare_losses)."
        )
    missing = [f"R@{k}" for k in ks if f"R@{k}" not in results.columns]
    if missing:
        raise ValueError(f"results lacks the columns {missing}.")
    df = results.copy()
    df["variant"] = [_variant(n).name for n in df["variant"]]
    cols = [f"R@{k}" for k in ks]
    if float(df[cols].to_numpy().max()) <= 1.0:
        df[cols] = df[cols] * 100.0
    order = [n for n in table_2_names() if n in set(df["variant"])]
    grouped = df.groupby("variant")[cols]
    mean = grouped.mean().loc[order]
    std = grouped.std(ddof=1).fillna(0.0).loc[order]
    count = grouped.size().loc[order]
    paper = paper_table_2().loc[order]
    out = pd.DataFrame(index=pd.Index(order, name="variant"))
    out["sim"] = paper["sim"]
    out["seeds"] = count
    for c in cols:
        out[c] = [f"{m:.1f} ± {s:.1f}" for m, s in zip(mean[c], std[c], strict=True)]
        if c in paper.columns:
            out[f"{c} (paper)"] = paper[c].map(lambda x: f"{x:.1f}")
    out["rank"] = mean[cols[0]].rank(ascending=False, method="min").astype(int)
    if cols[0] in paper.columns:
        out["rank (paper)"] = paper[cols[0]].rank(ascending=False, method="min").astype(int)
    out.attrs["mean"] = mean
    out.attrs["std"] = std
    return out


def read_ablation_csv(path: str | Path) -> pd.DataFrame:
    """Read a results file written by ``bench/ms_ablation.py``.

    Parameters
    ----------
    path : str or Path
        A CSV whose leading ``#`` lines describe the machine and the protocol.

    Returns
    -------
    DataFrame
        One row per run (columns ``study``, ``variant``, ``dim``, ``seed``, ``epochs``,
        ``train_loss``, ``R@1`` .. ``R@8``, ...); ``frame.attrs["header"]`` holds the ``#`` lines
        (without the ``#``).

    Raises
    ------
    FileNotFoundError
        With the command that produces the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist; run `python bench/ms_ablation.py` from the repository root "
            "to produce it."
        )
    header = []
    with path.open() as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            header.append(line[1:].strip())
    frame = pd.read_csv(path, comment="#")
    frame.attrs["header"] = header
    return frame
