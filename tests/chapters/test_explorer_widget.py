"""Tests of dmlbook.chapters.explorer_widget: the weight explorer's controls driven in-process (the numbers
it shows are dmlbook.chapters.explorer's, tested in tests/chapters/test_explorer.py; tests/test_lab.py drives the
same widget in JupyterLab)."""

from __future__ import annotations

import sys

import pytest
import torch

from dmlbook.chapters.explorer import batch_weights, default_batch
from dmlbook.chapters.explorer_widget import _control, _dependence_html, weight_explorer

ipywidgets = pytest.importorskip("ipywidgets")


@pytest.fixture(scope="module")
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    return default_batch()


@pytest.mark.slow
def test_the_widget_redraws_for_another_loss_and_another_value(batch):
    box = weight_explorer("multi_similarity", batch=batch, beta=10.0)
    chooser, knobs, summary = box.children[:3]
    sliders = {k.description: k for k in knobs.children}
    assert sliders["beta"].value == 10.0 and "multi_similarity(" in summary.value
    chooser.value = "contrastive"
    sliders = {k.description: k for k in knobs.children}
    assert list(sliders) == ["margin"]
    sliders["margin"].value = 0.3
    expected = batch_weights("contrastive", {"margin": 0.3}, *batch).summary()
    assert summary.value == f"<b>{expected}</b>"
    with pytest.raises(ValueError, match="moves margin; not marign"):
        weight_explorer("contrastive", batch=batch, marign=0.3)
    bundle = box._repr_mimebundle_()
    assert bundle["text/plain"] == "weight explorer: contrastive(margin=0.3)"
    assert "image/png" in bundle and "application/vnd.jupyter.widget-view+json" in bundle


def test_a_control_per_hyper_parameter_type_from_zero_to_four_times_the_default():
    box = _control(ipywidgets, "mining", True)
    assert isinstance(box, ipywidgets.Checkbox) and box.value is True
    steps = _control(ipywidgets, "bins", 25)
    assert isinstance(steps, ipywidgets.IntSlider) and (steps.min, steps.max) == (0, 100)
    beta = _control(ipywidgets, "beta", 50.0)
    assert isinstance(beta, ipywidgets.FloatSlider) and (beta.min, beta.max) == (0.0, 200.0)
    assert beta.step == pytest.approx(1.0)  # 200 steps over the range
    small = _control(ipywidgets, "margin", 0.1)
    assert small.max == 1.0  # at least 1: a default of 0.1 still reaches 1
    assert _control(ipywidgets, "offset", -2.0).max == 8.0


def test_table_1_row_marks_our_probe_beside_the_papers_column():
    html = _dependence_html("multi_similarity", {"S": True, "P": False, "N": True})
    rows = html.split("<tr>")[1:]
    assert rows[0].count("<th>Similarity-") == 3
    assert "dmlbook (autograd probe)</td><td>&#10003;</td><td>&ndash;</td><td>&#10003;" in rows[1]
    assert "Wang et al., Table 1 (MS)</td>" + "<td>&#10003;</td>" * 3 in rows[2]
    assert _dependence_html("multi_similarity", None) == ""  # a loss that failed on the batch
    assert len(_dependence_html("not_a_loss", {"S": True}).split("<tr>")) == 3  # no paper row


def test_without_ipywidgets_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets now fails
    with pytest.raises(ImportError, match="pip install ipywidgets"):
        weight_explorer("contrastive")


def test_a_numpy_integer_default_gets_an_integer_slider():
    """Issue 38: a hyper-parameter whose default is numpy.int64(25) gets an IntSlider."""
    import numpy as np

    steps = _control(ipywidgets, "bins", np.int64(25))
    assert isinstance(steps, ipywidgets.IntSlider) and (steps.min, steps.max) == (0, 100)
