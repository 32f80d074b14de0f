"""Second derivatives of every registered loss: ``torch.autograd.gradgradcheck`` in float64 for
every setting of its choices (uncertainty sets, base losses, forms, reductions, mining and
normalisation switches), or the explicit refusal of :mod:`dmlbook.losses.first_order` where
the loss holds part of its gradient fixed (issue 38: DRO's chi-square ``p*`` gave a wrong
Hessian silently).

The settings are found from the registry (a bool: both values; a string: the choices its error
message lists), so a new loss or choice is checked without editing this file. Every
combination of the choices that the registry accepts is checked (395 settings, 16 s of CPU
measured at load 20).
"""

from __future__ import annotations

import itertools
import re

import pytest
import torch

from dmlbook.losses import available_losses, get_loss, loss_parameters
from dmlbook.losses import dro as dro_module
from dmlbook.losses.dro import dro_loss
from dmlbook.losses.first_order import FIRST_ORDER, first_order_only, second_derivative_refusal


def choices(name: str) -> dict[str, list]:
    out = {}
    for param, default in loss_parameters(name).items():
        if isinstance(default, bool):
            out[param] = [True, False]
        elif isinstance(default, str):
            with pytest.raises(ValueError) as refused:
                get_loss(name, **{param: "no such choice"})
            listed = re.findall(r"'([^']*)'", str(refused.value))
            out[param] = [v for v in listed if v != "no such choice"]
            assert default in out[param], f"{name}.{param}: choices not found in {refused.value}"
    return out


def settings() -> list[tuple[str, dict]]:
    found = []
    for name in available_losses():
        ch = choices(name)
        combos = [dict(zip(ch, c, strict=True)) for c in itertools.product(*ch.values())]
        found += [(name, hp) for hp in combos if _accepted(name, hp)]
    return found


def _accepted(name: str, hp: dict) -> bool:
    """Whether the registry builds a module with ``hp`` (``reduction="none"`` is a function's)."""
    try:
        get_loss(name, **hp)
    except ValueError:
        return False
    return True


SETTINGS = settings()
X = torch.randn(9, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
Y = torch.arange(9) // 3


@pytest.mark.parametrize(("name", "hp"), SETTINGS, ids=[f"{n}-{hp}" for n, hp in SETTINGS])
def test_second_derivative_is_right_or_refused(name, hp):
    module = get_loss(name, **hp)
    x = X.clone().requires_grad_(True)

    def fn(x):
        return module(x, Y).sum()

    (grad,) = torch.autograd.grad(fn(x), x, create_graph=True)  # the first derivative works
    assert torch.isfinite(grad).all()
    why = second_derivative_refusal(module)
    if why is None:
        assert torch.autograd.gradgradcheck(fn, (x,))
    else:
        with pytest.raises(RuntimeError, match="has a first derivative only"):
            grad.pow(2).sum().backward()


@pytest.mark.parametrize("rho", [0.1, 1.0, 10.0])
def test_chi2_dro_refuses_the_hessian_it_used_to_get_wrong(rho, monkeypatch):
    S = torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) / 3
    S = ((S + S.T) / 2).clamp(-1, 1).requires_grad_(True)
    y = torch.arange(8) // 2

    def fn(S):
        return dro_loss(S, y, uncertainty="chi2", rho=rho, margin=0.5)

    assert torch.autograd.gradcheck(fn, (S,))  # the first derivative is right (Danskin)
    with pytest.raises(RuntimeError, match="uncertainty='kl'"):
        torch.autograd.gradgradcheck(fn, (S,))
    monkeypatch.setattr(dro_module, "CHI2", None)  # without the refusal: a wrong Hessian
    assert not torch.autograd.gradgradcheck(fn, (S,), raise_exception=False)


def test_first_order_only_passes_the_gradient_and_refuses_the_second():
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad((first_order_only(x, "no Hessian here") ** 3).sum(), x)
    assert torch.equal(g, 3 * x.detach() ** 2)
    (g,) = torch.autograd.grad((first_order_only(x, "no Hessian here") * 2).sum(), x,
                               create_graph=True)  # fmt: skip
    with pytest.raises(RuntimeError, match="no Hessian here"):  # even a constant gradient
        g.sum().backward()
    assert first_order_only(x, None) is x


def test_every_entry_of_the_table_is_a_registered_loss_class():
    classes = {type(get_loss(name)).__name__ for name in available_losses()}
    assert set(FIRST_ORDER) <= classes


def test_first_order_only_adds_nothing_where_no_gradient_flows():
    """A tensor that needs no gradient, or any tensor under ``torch.no_grad`` (evaluation), comes
    back as itself: no autograd node is built."""
    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    assert first_order_only(x, "no Hessian here") is x
    x.requires_grad_(True)
    with torch.no_grad():
        assert first_order_only(x, "no Hessian here") is x


def test_refusal_messages_are_whole_sentences_naming_the_loss():
    """Two of the table's messages, word for word: the loss and its setting, why, and (for the
    chi-square DRO) the setting that has a true second derivative."""
    from dmlbook.losses import get_loss

    pair_p = (
        "pair_p has a first derivative only: the paper's weights are numbers without gradient "
        "(Liu et al., footnote 6), so a second derivative (a Hessian, a gradient penalty) would "
        "miss how they move with the embeddings. Refused rather than wrong."
    )
    chi2 = (
        "dro with uncertainty='chi2' has a first derivative only: its p* is solved by sorting and "
        "held fixed (Danskin's theorem: dF/dl = p*), so a second derivative (a Hessian, a "
        "gradient penalty) would miss how p* would move with the embeddings. Refused rather than "
        "wrong; uncertainty='kl' (a closed form) has a true second derivative."
    )
    assert second_derivative_refusal(get_loss("pair_p")) == pair_p
    assert second_derivative_refusal(get_loss("dro", uncertainty="chi2")) == chi2
