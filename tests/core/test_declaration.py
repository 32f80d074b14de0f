"""Tests of dmlbook.core.declaration: hyper-parameters declared in a signature, checked once,
shared with like=, and the frame (loss_frame) given to the parameters written bare."""

from __future__ import annotations

import inspect
from typing import Literal

import pytest
import torch

from dmlbook.core.declaration import declared, hyper_parameters
from dmlbook.core.validation import Real, Scale
from dmlbook.losses import get_loss

X = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
Y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


def test_a_declared_function_checks_once_and_trusts_the_calls_it_makes(monkeypatch):
    """Issue 37: each family's checks run once. pair_power_loss calls pair_weighted_loss, which
    calls pair_weights, all three declared: one call checks its arguments once; a module checks
    at construction and its forward checks nothing."""
    import dmlbook.core.declaration as declaration
    from dmlbook.core.similarity import cosine_similarity
    from dmlbook.losses import pair_power_loss

    calls = []
    real = declaration.check_argument
    monkeypatch.setattr(declaration, "check_argument", lambda *a: calls.append(a[0]) or real(*a))
    S = cosine_similarity(X.double())
    pair_power_loss(S, Y, 0.0, 0.8, p=2.0)
    assert sorted(calls) == ["neg_margin", "p", "pos_margin"]  # each once, no default
    calls.clear()
    module = get_loss("pair_p", p=2.0)
    assert "p" in calls
    calls.clear()
    module(X, Y)
    assert calls == []


def test_every_declared_default_is_in_its_own_range():
    """A call trusts the defaults it declares; each is checked here, against its annotation."""
    import dmlbook.losses as losses
    from dmlbook.core.declaration import hyper_parameters

    declared = [f for f in map(losses.__dict__.get, losses.__all__) if hasattr(f, "trusted")]
    assert len(declared) > 25
    for f in declared:
        defaults = {
            n: p.default for n, p in hyper_parameters(f).items() if p.default is not p.empty
        }
        assert f.check(**defaults) == {**defaults, **f.check()}, f.__name__


def test_like_gives_bare_parameters_the_other_declaration_and_its_rules():
    """Issue 37: a family that reuses another's hyper-parameters says so once. The bare
    parameters of a ``like=`` function take the annotation, the default and the rules of the
    other; what it writes itself stays its own; a bare name the other lacks is refused."""

    def ordered(low: float, high: float) -> None:
        if low > high:
            raise ValueError("low > high")

    @declared(rules=(ordered,))
    def root(S, low: Real = 0.0, high: Real = 1.0, *, scale: Scale = 2.0, flag: bool = False):
        return (low, high, scale, flag)

    @declared(like=root)
    def sibling(S, low, high, *, scale: Scale = 5.0, flag):
        return (low, high, scale, flag)

    @declared(like=root)
    def part(S, *, scale, flag):
        return (scale, flag)

    assert sibling(None) == (0.0, 1.0, 5.0, False)  # root's defaults, its own scale
    assert part(None) == (2.0, False)
    assert sibling(None, 0.5, high=0.75, flag=True) == (0.5, 0.75, 5.0, True)
    params = inspect.signature(sibling).parameters
    assert params["low"].annotation is Real and params["flag"].annotation is bool
    assert list(hyper_parameters(sibling)) == ["low", "high", "scale", "flag"]
    with pytest.raises(ValueError, match="low > high"):  # root's rule came along
        sibling(None, 0.9, 0.1)
    with pytest.raises(ValueError, match="scale must be a finite number"):
        part(None, scale=0.0)
    with pytest.raises(TypeError, match="flag must be True or False"):
        sibling(None, flag="yes")
    with pytest.raises(TypeError, match=r"\['other'\] are not declared by root nor by loss_frame"):

        @declared(like=root)
        def stray(S, other):
            return other


def test_bare_frame_parameters_take_the_declaration_of_loss_frame():
    """Issue 37: the frame every loss shares (S, labels, reduction, the miner's masks) is declared
    once; a declared function names it bare and gets its annotation and default; any other bare
    name is refused."""

    @declared
    def f(S, labels, margin: Real = 1.0, *, reduction, pos_mask, neg_mask, triplet_mask):
        return margin, reduction, pos_mask, neg_mask, triplet_mask

    params = inspect.signature(f).parameters
    assert [p.name for p in params.values()][:2] == ["S", "labels"]
    assert params["S"].annotation is torch.Tensor and params["S"].default is params["S"].empty
    assert params["labels"].annotation is torch.Tensor
    assert params["reduction"].annotation == Literal["mean", "sum", "none"]
    assert params["reduction"].default == "mean"
    for mask in ("pos_mask", "neg_mask", "triplet_mask"):
        assert params[mask].annotation == (torch.Tensor | None) and params[mask].default is None
        assert params[mask].kind is params[mask].KEYWORD_ONLY
    assert f(None, None) == (1.0, "mean", None, None, None)
    assert list(hyper_parameters(f)) == ["margin", "reduction"]
    with pytest.raises(ValueError, match="reduction must be one of 'mean', 'sum', 'none'"):
        f(None, None, reduction="average")
    with pytest.raises(TypeError, match=r"\['x'\] are not declared by loss_frame"):

        @declared
        def stray(S, x):
            return x


def test_the_losses_signatures_spell_out_the_frame_they_declare_bare():
    """What a reader of ``help(circle_loss)`` sees: the frame's annotations and defaults, written
    out here by hand (Sun et al.'s gamma = 80, m = 0.4 are the function's own)."""
    from dmlbook.losses import circle_loss

    params = inspect.signature(circle_loss).parameters
    kinds = {p.name: (p.kind.name, p.default) for p in params.values()}
    assert kinds == {
        "S": ("POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        "labels": ("POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        "gamma": ("POSITIONAL_OR_KEYWORD", 80.0),
        "margin": ("POSITIONAL_OR_KEYWORD", 0.4),
        "detach_weights": ("KEYWORD_ONLY", True),
        "reduction": ("KEYWORD_ONLY", "mean"),
        "pos_mask": ("KEYWORD_ONLY", None),
        "neg_mask": ("KEYWORD_ONLY", None),
    }
    assert params["S"].annotation is torch.Tensor and params["labels"].annotation is torch.Tensor
