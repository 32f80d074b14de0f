"""Tests of dmlbook.engine.evaluation: embedding a split, Recall@K of a model and a checkpoint."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_run import tiny_config
from torch import nn

from dmlbook.data import register_dataset
from dmlbook.data.generated import synthetic
from dmlbook.data.registry import _REGISTRY
from dmlbook.engine import load_config, train
from dmlbook.engine.build import build_model
from dmlbook.engine.data import Splits, normalization
from dmlbook.engine.evaluation import embed_source, evaluate_model
from dmlbook.evaluate import retrieval_metrics
from dmlbook.models.pretrained import InputSpec
from dmlbook.training import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


class _Source:
    """What evaluation reads of a split: ``device``, ``labels``, ``eval_batches``, ``len``."""

    def __init__(self, inputs: torch.Tensor, labels: torch.Tensor) -> None:
        self.inputs, self.labels, self.device = inputs, labels, torch.device("cpu")

    def __len__(self) -> int:
        return len(self.labels)

    def eval_batches(self, batch_size, bounds=None):
        start, end = bounds or (0, len(self))
        for i in range(start, end, batch_size):
            yield self.inputs[i : min(i + batch_size, end)]


def test_embedding_keeps_the_order_and_the_models_mode():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Dropout(0.5))  # dropout: only eval mode is exact
    x, labels = torch.randn(11, 5), torch.arange(11) % 3
    emb = embed_source(model, _Source(x, labels), batch_size=4)
    assert model.training  # back in its mode
    assert torch.equal(emb, model[0](x).detach())  # in order, dropout off
    metrics = evaluate_model(model, Splits(train=None, test=_Source(x, labels)), (1, 2))
    expected = retrieval_metrics(model[0](x).detach(), labels, (1, 2))
    assert "P@1" not in metrics and expected["P@1"] == expected["R@1"]
    assert metrics == {k: pytest.approx(v) for k, v in expected.items() if k != "P@1"}


@pytest.fixture
def query_gallery_dataset():
    """A registered data set with train / query / gallery splits (the In-Shop protocol)."""

    def load(split: str, **_: object):
        ds = synthetic.load(
            "train" if split == "train" else "test", num_classes=16, images_per_class=6, cache=False
        )
        if split == "train":
            return ds
        return ds.subset(torch.arange(len(ds))[(torch.arange(len(ds)) % 2) == (split == "query")])

    register_dataset("qg_tiny", load, splits=("train", "query", "gallery"))
    yield "qg_tiny"
    _REGISTRY.pop("qg_tiny")


def test_query_gallery_protocol(tmp_path, query_gallery_dataset):
    data = {"dataset": "qg_tiny", "options": {}, "test_split": "query", "gallery_split": "gallery"}
    result = train(
        load_config(tiny_config(tmp_path / "run", data=data)), progress=False, verbose=False
    )
    meta = json.loads((result.out_dir / "run.json").read_text())
    assert meta["best"]["selected_on"] == "query/gallery"
    assert (meta["test_images"], meta["gallery_images"]) == (24, 24)
    # recompute the last row independently: embed both splits, rank queries against the gallery
    cfg = result.config
    model = build_model(cfg, pretrained=False)
    model.load_state_dict(load_checkpoint(result.out_dir / "last.pt")["model"])
    model.eval()
    spec = InputSpec()
    with torch.no_grad():
        q, g = (_REGISTRY["qg_tiny"].loader(s) for s in ("query", "gallery"))
        norm = normalization(spec)
        eq, eg = (model(norm((d.inputs * 255).round())) for d in (q, g))
    expected = retrieval_metrics(eq, q.labels, (1, 2, 4), gallery=eg, gallery_labels=g.labels)
    last = result.history.iloc[-1]
    for key in ("R@1", "R@2", "R@4", "MAP@R"):
        assert last[key] == pytest.approx(expected[key], abs=1e-9), key
