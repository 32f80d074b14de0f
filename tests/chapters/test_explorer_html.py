"""Tests of dmlbook.chapters.explorer_html: the precomputed grid, and the page driven in headless Chromium.

The browser test opens the explorer's HTML block as a file with every request that is not a
``file://`` one aborted (and recorded), moves a slider the way a reader does (an ``input`` event),
and reads back the weights the page drew: they must be the ones
:func:`dmlbook.chapters.explorer.batch_weights` computes at that setting, and differ from the first
setting's. Needs Chromium (``apt-get install chromium``); skipped without one unless
``DMLBOOK_REQUIRE_BROWSER=1``. Cost: about 5 s (two small grids, one page).
"""

from __future__ import annotations

import pytest
import torch

from dmlbook.chapters.explorer import batch_weights, default_batch, tunable_parameters
from dmlbook.chapters.explorer_html import MAX_SETTINGS, explorer_grid, offline_explorer
from dmlbook.losses import get_loss

GRID = {"margin": [0.2, 0.5, 0.8]}


def test_every_setting_holds_autograds_weights_of_every_pair():
    data = explorer_grid("contrastive", GRID)
    S, labels = default_batch()
    assert len(data["settings"]) == 3 and len(data["S"]) == 32 * 31
    for margin, setting in zip(GRID["margin"], data["settings"], strict=True):
        S_ = S.clone().requires_grad_(True)  # an independent derivative: autograd of the loss
        (grad,) = torch.autograd.grad(
            get_loss("contrastive", margin=margin).loss_on_similarity(S_, labels), S_
        )
        expected = grad.abs()[data["i"], data["j"]]
        assert torch.allclose(torch.tensor(setting["w"], dtype=torch.float64), expected, rtol=1e-5)
        assert setting["summary"].startswith("contrastive(")
    assert data["settings"][0]["w"] != data["settings"][2]["w"]


def test_settings_run_in_product_order_and_bad_grids_are_refused():
    data = explorer_grid("multi_similarity", {"alpha": [1.0, 2.0], "margin": [0.3, 0.7]})
    S, labels = default_batch()
    params = tunable_parameters("multi_similarity") | {"alpha": 2.0, "margin": 0.3}
    expected = batch_weights("multi_similarity", params, S, labels).grad.abs()
    got = torch.tensor(data["settings"][2]["w"], dtype=torch.float64)  # (alpha 2, margin 0.3)
    assert torch.allclose(got, expected[data["i"], data["j"]], rtol=1e-5)
    with pytest.raises(ValueError, match="tunable parameters"):
        explorer_grid("contrastive", {"beta": [1.0]})
    with pytest.raises(ValueError, match="at most"):
        explorer_grid("contrastive", {"margin": [0.01 * k for k in range(MAX_SETTINGS + 1)]})
    with pytest.raises(ValueError, match="not one of"):
        offline_explorer("contrastive", GRID, start={"margin": 0.3})


@pytest.fixture(scope="module")
def browser(chromium) -> str:
    return chromium


def test_moving_a_slider_draws_the_precomputed_weights_of_that_setting(tmp_path, browser):
    from playwright.sync_api import sync_playwright

    explorer = offline_explorer("contrastive", GRID, start={"margin": 0.5})
    page_file = tmp_path / "explorer.html"
    page_file.write_text(f"<!doctype html><html><body>{explorer.html}</body></html>")
    S, labels = default_batch()
    i, j = explorer.data["i"], explorer.data["j"]

    def expected(margin: float) -> torch.Tensor:
        return batch_weights("contrastive", {"margin": margin}, S, labels).grad.abs()[i, j]

    def drawn(page) -> torch.Tensor:
        values = page.eval_on_selector_all(".scatter .pair", "m => m.map(e => e.dataset.w)")
        return torch.tensor([float(v) for v in values], dtype=torch.float64)

    requests = []
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
        page = chromium.new_page()
        page.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith("file:")
                else (requests.append(route.request.url), route.abort())
            ),
        )
        page.goto(page_file.as_uri())
        first = drawn(page)
        summary = page.text_content(".summary")
        page.eval_on_selector(
            "input[data-param=margin]",
            "s => { s.value = 2; s.dispatchEvent(new Event('input')); }",
        )
        moved = drawn(page)
        shown = page.text_content("output.value")
        cells = page.eval_on_selector_all(".map rect", "m => m.map(e => e.dataset.w)")
        chromium.close()
    assert requests == []  # nothing from the network
    assert torch.allclose(first, expected(0.5), rtol=1e-5) and "0.5" in summary
    assert torch.allclose(moved, expected(0.8), rtol=1e-5) and shown == "0.8"
    assert not torch.allclose(moved, first)
    assert torch.allclose(torch.tensor([float(c) for c in cells], dtype=torch.float64), moved)


def test_its_stored_text_is_the_same_on_every_machine():
    """The notebook stores the explorer's ``text/plain`` beside its HTML: no memory address."""
    text = repr(offline_explorer("contrastive", GRID, start={"margin": 0.5}))
    assert "0x" not in text and "contrastive" in text, text
