"""Self-checks of the exercises of Chapters 10-15 and the appendix (:mod:`.registry`).

Chapters: ``book/10_multi_similarity.ipynb`` to ``book/15_fair_comparison.ipynb`` and
``book/90_papers_numbers.ipynb``, their last section. Tests: ``tests/exercises/test_advanced.py``.
Numbers quoted from the papers are read from :func:`dmlbook.papers.paper_results.load_paper_results`,
as the chapters read them; the rest is recomputed from the statement and the package.
"""

from __future__ import annotations

import math

import pandas as pd
import sympy as sp
import torch
from scipy import stats

from ..core.similarity import cosine_similarity
from ..mining import ms_mining_masks
from ..papers.paper_results import load_paper_results, recall_not_monotone
from ..surgery.gradient import SurgerySpec, designed_gradient
from ..surgery.triplets import ephn_triplets
from .registry import WrongForm, call, close, exercise, expression, numbers, proved


def _r1(paper: str, table: str, dataset: str | None = None) -> pd.Series:
    df = load_paper_results()
    sel = (df.paper == paper) & (df.table == table) & (df.metric == "R@1")
    if dataset:
        sel &= df.dataset == dataset
    return df[sel].set_index("method")["value"].astype(float)


@exercise("10.1", "the weight, a number", "Section 10.2 (Eq. 13) and Section 10.3's Case 1")
def _single_negative(answer: object) -> bool:
    beta, lam, s = 50.0, 0.5, 0.6
    e = math.exp(beta * (s - lam))
    return close(numbers(answer, 1), [e / (1 + e)], 1e-3)


@exercise(
    "10.2",
    "((positives, negatives) at epsilon 0, (positives, negatives) at epsilon 0.3)",
    "Section 10.1 (Eq. 11-12)",
)
def _mining_counts(answer: object) -> bool:
    g = torch.Generator().manual_seed(0)  # the batch of 10.1, built as the chapter builds it
    S = cosine_similarity(torch.randn(60, 8, generator=g, dtype=torch.float64))
    y = torch.arange(60) // 5
    want = []
    for eps in (0.0, 0.3):
        p, n = ms_mining_masks(S, y, eps)
        want += [int(p.sum()), int(n.sum())]
    return close(numbers(answer, 4), want, 0.0)


@exercise(
    "10.3",
    "(points MS mining adds to Binomial, points it adds to LiftedStruct*)",
    "Section 10.7 (Table 2)",
)
def _table2_gains(answer: object) -> bool:
    r1 = _r1("wang2019_ms", "Table 2", "Cars-196")
    want = [r1["Binomial_m"] - r1["Binomial"], r1["LiftedStruct*_m"] - r1["LiftedStruct*"]]
    return close(numbers(answer, 2), want, 0.051)


@exercise("11.2", "the ratio anchor value / batch value, a number", "Section 11.3 (normalisation)")
def _normalisation_ratio(answer: object) -> bool:
    classes, per_class = 4, 3  # the batch S12, y12 of 11.4: every anchor mines the same counts
    batch = classes * per_class
    # per anchor each weight is 1/count, per batch 1/(B * count): the sums differ by B
    return close(numbers(answer, 1), [float(batch)], 1e-3)


@exercise("11.3", "F, an expression in Dp, Dn1, Dn2, p and m", "Section 11.3 (Eq. 21)")
def _triplet_p_loss(answer: object) -> bool:
    p, m, Dp, t1, t2 = sp.symbols("p m Dp t1 t2", positive=True)
    Dn1, Dn2 = sp.symbols("Dn1 Dn2", real=True)
    F = expression(answer, {"Dp": Dp, "Dn1": Dn1, "Dn2": Dn2, "p": p, "m": m})
    active = {Dn1: Dp + m - t1, Dn2: Dp + m - t2}  # both triplets active: t_k > 0
    grads = [sp.diff(F, v).subs(active) for v in (Dp, Dn1, Dn2)]
    want = [lambda: t1**p + t2**p, lambda: -(t1**p), lambda: -(t2**p)]
    return all(proved(g, w) for g, w in zip(grads, want, strict=True))


@exercise(
    "11.4",
    "(normalisation gain at p,q = 0,0, head gain at 0,0, normalisation gain at 0,1, head gain "
    "at 0,1) in points",
    "Section 11.7 (Section IV against its tables)",
)
def _table3_gains(answer: object) -> bool:
    r1 = _r1("liu_gpw", "Table III", "CUB-200-2011")
    want = []
    for pq in ("0,0", "0,1"):
        v0, v1, v2 = (r1[f"pair-based power {v} p,q={pq}"] for v in ("v0", "v1", "v2"))
        want += [v1 - v0, v2 - v1]
    return close(numbers(answer, 4), want, 0.051)


@exercise("12.1", "the value, a number or an exact expression", "Section 12.3 (the closed forms)")
def _kl_value(answer: object) -> bool:
    want = sp.log((sp.E + 1) / 2)
    if isinstance(answer, (sp.Basic, str)):
        return proved(expression(answer, {}), lambda: sp.log((sp.E + 1) / 2))
    return close(numbers(answer, 1), [float(want)], 1e-3)


@exercise("12.2", "(value at K = 2, value at K = 10)", "Section 12.2 (Eq. 1's uncertainty sets)")
def _topk(answer: object) -> bool:
    losses = sorted((0.9, 0.5, 0.3, 0.1), reverse=True)
    want = [sum(losses[:K]) / K for K in (2, 10)]
    return close(numbers(answer, 2), want, 1e-3)


@exercise("12.3", "c+, an expression in lambda, m and l0", "Section 12.6 (pseudo pairs)")
def _pseudo_pair(answer: object) -> bool:
    lam, m, l0 = sp.symbols("lambda m l0", real=True)
    c = expression(answer, {"lambda": lam, "m": m, "l0": l0})
    # l_ij = m + lambda - S_ij (margin loss, hinge open): e^{alpha(l0 - l_ij)} = e^{alpha(S - c)}
    S = sp.Symbol("S", real=True)
    return proved(S - c, lambda: l0 - (m + lam - S))


@exercise(
    "12.4",
    "the share of gradient on negatives, a number (or one per B)",
    "Section 12.4 (the imbalance argument)",
)
def _topk_share(answer: object) -> bool:
    try:
        shares = numbers(answer, 1)
    except WrongForm:
        shares = numbers(answer, len(list(answer)))  # one per batch size
    # K = 2B of the largest losses; on the untrained network of 12.4 the negatives' margin losses
    # are the larger and number more than 2B at every B of the table: every kept pair is negative
    return close(shares, [1.0] * len(shares), 1e-3)


@exercise(
    "12.5",
    "(points over MS, points over LS) at R@1",
    "Section 12.8 (the paper's own numbers)",
)
def _dro_gains(answer: object) -> bool:
    r1 = _r1("dro", "Table 2", "CUB-200-2011")
    best = r1["DRO-KL-G gamma=0.01"]
    return close(numbers(answer, 2), [best - r1["MS"], best - r1["LS"]], 0.051)


@exercise("13.1", "the constant c, a number", "Section 13.3 (Table 1, row by row)")
def _surgery_scale(answer: object) -> bool:
    s = sp.Symbol("S_ap", real=True)
    D = sp.sqrt(2 - 2 * s)
    # d(D^2)/dD = 2D = c * T^con * P^euc with T^con = 1/2 and P^euc = D
    c = sp.simplify(sp.diff(D**2, s) / sp.diff(D, s) / (sp.Rational(1, 2) * D))
    return close(numbers(answer, 1), [float(c)], 1e-9)


@exercise(
    "13.4",
    'the learning rate of each direction, a dict {"euc": lr, "cos": lr, "euc-orth": lr, '
    '"cos-orth": lr}',
    "Section 13.8 (the paper's numbers, checked against themselves)",
)
def _best_learning_rates(answer: object) -> bool:
    if not isinstance(answer, dict):
        raise WrongForm("not a dict from direction to learning rate")
    app = _r1("xuan2020", "Appendix Table 1", "Cars-196")
    want = {}
    for direction in ("euc", "cos", "euc-orth", "cos-orth"):
        rows = app[app.index.str.startswith(f"direction e^{direction}, ")]
        want[direction] = float(rows.idxmax().rsplit("lr ", 1)[1])
    got = {str(k).replace("_", "-"): v for k, v in answer.items()}
    if set(got) != set(want):
        raise WrongForm(f"the keys must be {', '.join(want)}")
    return all(close(numbers(got[d], 1), [want[d]], 1e-9) for d in want)


@exercise(
    "13.3",
    "a function ell(S_ap, S_an) returning one loss per triplet (tensors in, tensor out)",
    "Section 13.6 (which fields are gradients of a loss)",
)
def _surgery_loss(fn: object) -> bool:
    g = torch.Generator().manual_seed(13)
    spec = SurgerySpec(pair_weight="lin", scale=2.0)
    for B, d in ((12, 5), (20, 8)):
        x = torch.randn(B, d, generator=g, dtype=torch.float64)
        f = torch.nn.functional.normalize(x, dim=1).requires_grad_(True)
        y = torch.arange(B) // 4
        t = ephn_triplets(f.detach() @ f.detach().T, y)
        S = f @ f.T
        loss = call(fn, S[t.a, t.p], S[t.a, t.n])
        if not isinstance(loss, torch.Tensor) or loss.numel() not in (1, len(t)):
            raise WrongForm("ell must return a tensor: one loss per triplet")
        (auto,) = torch.autograd.grad(loss.mean(), f)
        mine, _ = designed_gradient(f.detach(), y, spec)
        if not torch.allclose(auto, mine, atol=1e-10):
            return False
    return True


@exercise(
    "14.1", "the factor on the true gradient, an expression in G (processes)", "Section 14.10"
)
def _gather_scale(answer: object) -> bool:
    G = sp.Symbol("G", integer=True, positive=True)
    # each process: G slices summed by the all-gather's backward, times the 1/G scale; DDP then
    # averages over G processes
    return proved(expression(answer, {"G": G}), lambda: G * (1 / G) / G)


@exercise(
    "14.2",
    "(fits one A100 40GB: True or False, A100 40GB GPUs needed)",
    "Section 14.11 (a dry run before the GPU)",
)
def _dry_run(answer: object) -> bool:
    fits, gpus = numbers(answer, 2)
    usable_gib = 37.3  # the dry run's usable memory of an A100 40GB (Section 14.11)
    float32_gib = 42.5  # the dry run's estimate for one GPU, printed by the command it runs
    need = math.ceil(float32_gib / usable_gib)
    return fits == float(float32_gib <= usable_gib) and gpus == need


@exercise(
    "14.3",
    "(utilisation u, predicted images/s for ms_cub_bninception)",
    "Section 14.11 (the calibration and dry-run tables)",
)
def _roofline(answer: object) -> bool:
    u, speed = numbers(answer, 2)
    implied = 2470 / 12_800  # the calibration table: measured / roofline images/s at u = 1
    at_u = 1910 * implied / 0.03  # the dry-run table's row, scaled from u = 0.03
    return close([u], [implied], 0.05) and close([speed], [at_u], 0.05)


@exercise(
    "14.4",
    "the global batch sizes that work, a set of numbers",
    "Section 14.10 (several GPUs: one global batch)",
)
def _batch_sizes(answer: object) -> bool:
    try:
        got = {int(b) for b in answer}
    except (TypeError, ValueError):
        raise WrongForm("not a set of batch sizes") from None
    K, gpus = 5, 3
    want = {b for b in range(70, 91) if b % K == 0 and (b // K) % gpus == 0}
    return got == want


@exercise(
    "15.2",
    "(half-width in units of s with 3 seeds, seeds for at most s, seeds for at most s/2)",
    "Section 15.2 (the protocol)",
)
def _seed_counts(answer: object) -> bool:
    width, n1, n2 = numbers(answer, 3)

    def seeds(target: float) -> int:
        return next(n for n in range(2, 1000) if stats.t.ppf(0.975, n - 1) / n**0.5 <= target)

    three = stats.t.ppf(0.975, 2) / 3**0.5
    return close([width], [three], 5e-3) and (n1, n2) == (seeds(1.0), seeds(0.5))


@exercise(
    "90.1",
    "(R@1 of MS, R@1 of DRO-KL_M, the difference, whether DRO-KL_M's row is monotone)",
    "the appendix's Check 1",
)
def _dro_table1(answer: object) -> bool:
    ms, kl, gap, monotone = numbers(answer, 4)
    r1 = _r1("dro", "Table 1", "CUB-200-2011")
    df = load_paper_results()
    row = df[(df.paper == "dro") & (df.table == "Table 1") & (df.method == "DRO-KL_M")]
    rises = bool(recall_not_monotone(row).empty)
    want = [r1["MS(Wang et al. (2019))"], r1["DRO-KL_M"]]
    return close([ms, kl, gap], want + [want[1] - want[0]], 0.051) and monotone == float(rises)


@exercise(
    "90.2",
    "(absolute improvement in points, relative improvement in percent)",
    "the appendix's Check 3",
)
def _improvement(answer: object) -> bool:
    new, old = 67.7, 65.7  # the statement's two numbers
    return close(numbers(answer, 2), [new - old, 100 * (new - old) / old], 0.051)


@exercise(
    "90.3",
    "a function falling(df) returning the rows (or keys) whose Recall@K falls",
    "the appendix's Check 1",
)
def _falling(fn: object) -> bool:
    df = load_paper_results()
    key = ["paper", "table", "dataset", "method", "backbone", "dim", "batch"]
    want = {tuple(r) for r in recall_not_monotone(df)[key].astype(str).to_numpy()}
    got = call(fn, df.copy())
    if not isinstance(got, pd.DataFrame) or not set(key) <= set(got.columns):
        raise WrongForm("falling(df) must return a DataFrame with the table's columns")
    return {tuple(r) for r in got[key].astype(str).to_numpy()} == want
