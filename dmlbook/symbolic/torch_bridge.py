"""From symbolic weights to numbers on a real batch: ``to_torch``, per-anchor weights, ``batch_weights``.

A symbolic weight is written for one anchor with ``P`` positives and ``N`` negatives. A real batch
has anchors with different ``P`` and ``N``; :class:`AnchorWeightFunction` builds (and caches) the
symbolic weights for each ``(P, N)`` it meets, and :func:`batch_weights` runs it over the anchors
of a batch to assemble the ``B x B`` matrix of ``dL/dS_ij`` that autograd computes. Everything is
float64: this is a verification tool, not a training path.
Tests: ``tests/symbolic/test_torch_bridge.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import sympy as sp
import torch
from sympy.printing.pytorch import TorchPrinter

from ..core.validation import as_labels
from ..losses.base import resolve_masks
from .differentiate import pair_weights
from .symbols import AnchorSimilarities, anchor_similarities

__all__ = [
    "AnchorWeightFunction",
    "batch_weights",
    "to_torch",
    "weights_from_closed_form",
    "weights_from_loss",
]

ArgGroup = sp.Basic | Sequence[sp.Basic] | sp.MatrixBase


def _numeric_constants_as_floats(expr: sp.Expr) -> sp.Expr:
    """Replace constant sub-expressions (``sqrt(2)``, ``exp(3)``, ``E``) by floats.

    The torch printer would otherwise emit ``torch.exp(3)``, which fails on a Python number.
    """

    def is_constant_call(e: sp.Basic) -> bool:
        return (
            isinstance(e, sp.Expr)
            and not e.is_Number
            and e.is_number
            and not e.free_symbols
            and (isinstance(e, sp.Function | sp.Pow | sp.NumberSymbol))
        )

    return expr.replace(is_constant_call, lambda e: sp.Float(sp.N(e, 20), 20))


class _Float64TorchPrinter(TorchPrinter):
    """SymPy's torch printer with every ``Piecewise`` branch made a float64 tensor.

    ``torch.where(cond, 1, 0)`` would be an int64 tensor, and an integer tensor times a Python
    float is float32: a silent loss of precision in a float64 check.
    """

    def _print_Piecewise(self, expr: sp.Piecewise) -> str:
        value, cond = expr.args[0].args
        rest = sp.Piecewise(*expr.args[1:]) if len(expr.args) > 1 else sp.S.Zero
        on, off = (f"torch.as_tensor({self._print(e)}, dtype=torch.float64)" for e in (value, rest))
        return f"torch.where({self._print(cond)}, {on}, {off})"


def _torch_ready(expr: sp.Expr) -> sp.Expr:
    expr = sp.sympify(expr).doit()
    expr = expr.replace(lambda e: isinstance(e, sp.Heaviside), lambda e: e.rewrite(sp.Piecewise))
    expr = expr.replace(lambda e: isinstance(e, sp.Max | sp.Min), lambda e: e.rewrite(sp.Piecewise))
    return _numeric_constants_as_floats(expr)


def _group_shape(group: ArgGroup) -> tuple[int, ...]:
    if isinstance(group, sp.MatrixBase):
        return tuple(group.shape)
    if isinstance(group, sp.Basic):
        return ()
    return (len(group),)


def _group_entries(group: ArgGroup) -> list[tuple[tuple[int, ...], sp.Basic]]:
    if isinstance(group, sp.MatrixBase):
        return [((i, j), group[i, j]) for i in range(group.rows) for j in range(group.cols)]
    if isinstance(group, sp.Basic):
        return [((), group)]
    return [((k,), s) for k, s in enumerate(group)]


def _flattened(
    expr: sp.Expr | Sequence[sp.Expr] | sp.MatrixBase,
) -> tuple[tuple[int, ...], list[sp.Expr]]:
    """``(shape, entries)`` of what :func:`to_torch` evaluates: ``()``, ``(n,)`` or ``(r, c)``."""
    if isinstance(expr, sp.MatrixBase):
        out_shape: tuple[int, ...] = tuple(expr.shape)
        flat = list(expr)
    elif isinstance(expr, list | tuple):
        out_shape = (len(expr),)
        flat = list(expr)
    else:
        out_shape = ()
        flat = [expr]
    return out_shape, flat


def _argument_layout(
    groups: list[ArgGroup],
) -> tuple[dict[sp.Basic, sp.Symbol], list[list[tuple[tuple[int, ...], sp.Symbol]]]]:
    """Plain stand-in symbols for the argument symbols, and where each sits in its argument.

    Returns ``(plain, layout)``: ``plain`` maps each argument symbol to a plain real symbol
    ``_a<n>`` (lambdify needs plain names); ``layout[g]`` lists ``(index, stand-in)`` for the
    symbolic entries of group ``g`` (numbers, such as a unit diagonal, are skipped).
    """
    plain: dict[sp.Basic, sp.Symbol] = {}
    layout: list[list[tuple[tuple[int, ...], sp.Symbol]]] = []
    for g in groups:
        entries = []
        for where, s in _group_entries(g):
            if s.is_number:
                continue
            if not isinstance(s, sp.Symbol | sp.Indexed):
                raise TypeError(f"arguments must be symbols, got {s!r} ({type(s).__name__}).")
            x = plain.setdefault(s, sp.Symbol(f"_a{len(plain)}", real=True))
            entries.append((where, x))
        layout.append(entries)
    return plain, layout


def to_torch(
    expr: sp.Expr | Sequence[sp.Expr] | sp.MatrixBase,
    args: Sequence[ArgGroup],
    values: Mapping[sp.Symbol, float] | None = None,
) -> Callable[..., torch.Tensor]:
    """Lambdify a symbolic expression (or a list or matrix of them) into a torch function.

    Parameters
    ----------
    expr : Expr, sequence of Expr, or Matrix
        What to evaluate. The result has the shape of ``expr`` as trailing dimensions: a scalar
        for an ``Expr``, ``(n,)`` for a sequence of ``n``, ``(r, c)`` for a Matrix.
    args : sequence
        One entry per argument of the returned function. A ``Symbol`` is a scalar argument; a
        sequence of symbols (e.g. ``a.pos``) is a vector argument whose last dimension indexes
        it; a Matrix of symbols (e.g. :func:`batch_similarities`) is a matrix argument. Entries
        of a group that are numbers (the unit diagonal) are ignored.
    values : mapping, optional
        ``{symbol: number}`` substituted first, typically the hyper-parameters.

    Returns
    -------
    callable
        ``f(*tensors) -> Tensor`` in float64. Leading (batch) dimensions of the inputs broadcast.
        Hinges map to ``torch.relu`` and active-region indicators ``1[x > 0]`` to
        ``(x > 0).double()``, so at a kink the function reports what torch's autograd reports.

    Raises
    ------
    ValueError
        If ``expr`` has a free symbol that is neither an argument nor given a value.
    """
    out_shape, flat = _flattened(expr)
    subs = {sp.sympify(k): sp.sympify(v) for k, v in (values or {}).items()}
    groups = list(args)
    plain, layout = _argument_layout(groups)
    ready = [_torch_ready(sp.sympify(e).subs(subs)).xreplace(plain) for e in flat]
    known = set(plain.values())
    missing = sorted({str(s) for e in ready for s in e.free_symbols if s not in known})
    if missing:
        raise ValueError(
            f"free symbols {', '.join(missing)} are neither arguments nor given in values=; "
            "pass their numbers, e.g. values={alpha: 2.0}."
        )
    flat_args = [x for entries in layout for _, x in entries]
    fn = sp.lambdify(flat_args, ready, modules="torch", printer=_Float64TorchPrinter)
    shapes = [_group_shape(g) for g in groups]

    def evaluate(*tensors: torch.Tensor | float) -> torch.Tensor:
        if len(tensors) != len(groups):
            raise TypeError(f"expected {len(groups)} arguments, got {len(tensors)}.")
        columns: list[torch.Tensor] = []
        batch_shapes = []
        for t, shape, entries in zip(tensors, shapes, layout, strict=True):
            t = torch.as_tensor(t, dtype=torch.float64)
            if tuple(t.shape[t.ndim - len(shape) :]) != shape or t.ndim < len(shape):
                raise ValueError(
                    f"an argument has shape {tuple(t.shape)}; its trailing dimensions must be "
                    f"{shape} to match the symbols it stands for."
                )
            batch_shapes.append(t.shape[: t.ndim - len(shape)])
            columns.extend(t[(..., *where)] for where, _ in entries)
        batch = torch.broadcast_shapes(*batch_shapes) if batch_shapes else torch.Size()
        outs = [torch.as_tensor(o, dtype=torch.float64) for o in fn(*columns)]
        outs = [o.expand(torch.broadcast_shapes(batch, o.shape)) for o in outs]
        if not outs:
            return torch.zeros((*batch, *out_shape), dtype=torch.float64)
        stacked = torch.stack(torch.broadcast_tensors(*outs), dim=-1)
        return stacked.reshape(*stacked.shape[:-1], *out_shape)

    return evaluate


class AnchorWeightFunction:
    """Per-anchor symbolic pair weights, evaluated on tensors: ``f(s_pos, s_neg) -> (w_pos, w_neg)``.

    The weights are the signed ``dL_i/dS_ij`` of one anchor's loss ``L_i``, built symbolically
    for the anchor's own ``P`` and ``N`` the first time that pair of sizes is met (then cached).
    Build one with :func:`weights_from_loss` or :func:`weights_from_closed_form`.
    """

    def __init__(
        self,
        build: Callable[[AnchorSimilarities], object],
        values: Mapping[sp.Symbol, float] | None,
        kind: Literal["loss", "signed", "magnitudes"],
    ) -> None:
        if kind not in ("loss", "signed", "magnitudes"):
            raise ValueError(f"kind must be 'loss', 'signed' or 'magnitudes', got {kind!r}.")
        self._build = build
        self._values = dict(values or {})
        self._kind = kind
        self._cache: dict[tuple[int, int], Callable[..., torch.Tensor]] = {}

    def expressions(
        self, P: int, N: int
    ) -> tuple[AnchorSimilarities, list[sp.Expr], list[sp.Expr]]:
        """The anchor symbols and the signed symbolic weights of its positives and negatives."""
        a = anchor_similarities(P, N)
        if self._kind == "loss":
            w = pair_weights(self._build(a), a)
            return a, [w[s] for s in a.pos], [w[s] for s in a.neg]
        built = self._build(a)
        if not (isinstance(built, tuple | list) and len(built) == 2):
            raise TypeError("a closed form must return (positive weights, negative weights).")
        w_pos, w_neg = (list(map(sp.sympify, part)) for part in built)
        if len(w_pos) != P or len(w_neg) != N:
            raise ValueError(
                f"the closed form returned {len(w_pos)} positive and {len(w_neg)} negative "
                f"weights for an anchor with P={P}, N={N}; return one weight per pair."
            )
        if self._kind == "magnitudes":
            w_pos = [-w for w in w_pos]
        return a, w_pos, w_neg

    def __call__(
        self, s_pos: torch.Tensor, s_neg: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        s_pos = torch.as_tensor(s_pos, dtype=torch.float64)
        s_neg = torch.as_tensor(s_neg, dtype=torch.float64)
        P, N = int(s_pos.shape[-1]), int(s_neg.shape[-1])
        if (P, N) not in self._cache:
            a, w_pos, w_neg = self.expressions(P, N)
            self._cache[(P, N)] = to_torch([*w_pos, *w_neg], [a.pos, a.neg], self._values)
        w = self._cache[(P, N)](s_pos, s_neg)
        return w[..., :P], w[..., P:]


def weights_from_loss(
    anchor_loss: Callable[[AnchorSimilarities], sp.Expr],
    values: Mapping[sp.Symbol, float] | None = None,
) -> AnchorWeightFunction:
    """Per-anchor weights derived by differentiating a one-anchor loss (:func:`pair_weights`).

    Parameters
    ----------
    anchor_loss : callable
        ``anchor_loss(a) -> Expr``: the loss of one anchor with similarities ``a.pos``, ``a.neg``.
    values : mapping, optional
        Numbers for the hyper-parameter symbols.
    """
    return AnchorWeightFunction(anchor_loss, values, "loss")


def weights_from_closed_form(
    anchor_weights: Callable[[AnchorSimilarities], tuple[Sequence[sp.Expr], Sequence[sp.Expr]]],
    values: Mapping[sp.Symbol, float] | None = None,
    *,
    magnitudes: bool = True,
) -> AnchorWeightFunction:
    """Per-anchor weights from a paper's closed form, e.g. MS's ``w^+, w^-`` (Wang et al. 2019, Eq. 13-14).

    Parameters
    ----------
    anchor_weights : callable
        ``anchor_weights(a) -> (w_pos, w_neg)``, one expression per positive and per negative.
    values : mapping, optional
        Numbers for the hyper-parameter symbols.
    magnitudes : bool
        The closed form gives the GPW weights ``|dL/dS_ij|`` of Eq. 3 (default). The sign
        convention is then applied: positives get ``-w`` (pulled), negatives ``+w`` (pushed).
        Pass ``False`` for a closed form that is already the signed derivative.
    """
    return AnchorWeightFunction(anchor_weights, values, "magnitudes" if magnitudes else "signed")


def batch_weights(
    anchor_fn: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    S: torch.Tensor,
    labels: torch.Tensor,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Assemble the ``B x B`` matrix of ``dL/dS_ij`` from per-anchor weights.

    Row ``i`` holds anchor ``i``'s weights: ``anchor_fn(S[i, pos_i], S[i, neg_i])`` with the
    columns taken in increasing order, which is the order of the symbols ``s^+_1, s^+_2, ...``.
    Entries that are no pair of the anchor (the diagonal, pairs removed by a mask) are 0.
    The loop over anchors is deliberate: this is a float64 verification tool.

    Parameters
    ----------
    anchor_fn : callable
        E.g. an :class:`AnchorWeightFunction`.
    S : Tensor of shape (B, B)
    labels : Tensor of shape (B,)
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Mined pairs; they narrow the label masks exactly as in the losses.

    Returns
    -------
    Tensor of shape (B, B), float64
        The weights of ``sum_i L_i``; multiply by the loss's batch reduction (e.g. ``1/B``).
    """
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"S must be a square (B, B) similarity matrix, got shape {tuple(S.shape)}."
        )
    y = as_labels(labels)
    if y.shape[0] != S.shape[0]:
        raise ValueError(f"S has {S.shape[0]} rows but labels has {y.shape[0]} entries.")
    S64 = S.detach().to(torch.float64)
    pos, neg = resolve_masks(y.to(S.device), pos_mask, neg_mask, tuple(S.shape))
    W = torch.zeros_like(S64)
    for i in range(S64.shape[0]):
        p_idx, n_idx = pos[i].nonzero().flatten(), neg[i].nonzero().flatten()
        w_pos, w_neg = anchor_fn(S64[i, p_idx], S64[i, n_idx])
        W[i, p_idx] = torch.as_tensor(w_pos, dtype=torch.float64)
        W[i, n_idx] = torch.as_tensor(w_neg, dtype=torch.float64)
    return W
