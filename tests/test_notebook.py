"""dmlbook.notebook: setup() and show_source()."""

from __future__ import annotations

import ast

import pytest

from dmlbook.losses import TripletLoss, contrastive_loss
from dmlbook.notebook import show_source


def shown(capsys, obj, **kwargs) -> str:
    assert show_source(obj, **kwargs) is None  # a cell ending in show_source(f) shows it once
    return capsys.readouterr().out.removesuffix("\n")


def test_show_source_keeps_the_code_and_a_one_line_docstring(capsys):
    text = shown(capsys, contrastive_loss)
    assert text.startswith("def contrastive_loss(")
    assert '"""Mean of Wang et al. 2019, Eq. 4' in text
    assert "----------" not in text and "return reduce(per_pair" in text
    ast.parse(text)  # still valid Python


def test_show_source_docstring_choices(capsys):
    full = shown(capsys, contrastive_loss, docstring="full")
    bare = shown(capsys, contrastive_loss, docstring="none")
    assert "----------" in full and '"""' not in bare
    assert bare.splitlines()[-1] == full.splitlines()[-1]
    assert shown(capsys, TripletLoss).startswith(("class TripletLoss", "@dataclass"))


def test_show_source_refuses_what_it_cannot_show():
    with pytest.raises(ValueError, match="docstring must be"):
        show_source(contrastive_loss, docstring="short")
    with pytest.raises(TypeError, match="defined in a source file"):
        show_source(len)
