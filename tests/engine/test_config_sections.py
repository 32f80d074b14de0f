"""Tests of dmlbook.engine.config_sections: the sections' defaults, declared once."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pandas as pd
import pytest
import torch

from dmlbook.engine import config_sections as sections
from dmlbook.engine.config import Config, load_config
from dmlbook.training.optim import make_optimizer

PAPER_RESULTS = Path(__file__).resolve().parents[2] / "dmlbook" / "data" / "paper_results.csv"


def test_recall_ks_are_the_sets_the_ms_paper_reports():
    """Wang et al. 2019, Tables 3-5, as transcribed in paper_results.csv."""
    table = pd.read_csv(PAPER_RESULTS, comment="#")
    ms = table[(table["paper"] == "wang2019_ms") & table["metric"].str.startswith("R@")]
    names = {"cub": "CUB-200-2011", "cars": "Cars-196", "sop": "SOP", "inshop": "In-Shop"}
    assert set(sections.RECALL_KS) == set(names)
    for key, dataset in names.items():
        printed = sorted({int(m[2:]) for m in ms.loc[ms["dataset"] == dataset, "metric"]})
        assert sections.RECALL_KS[key] == tuple(printed), key


def test_optimiser_settings_reach_torch_with_its_own_defaults():
    settings = sections.OptimConfig().settings()
    assert set(settings) == {"weight_decay", "momentum", "nesterov", "betas", "eps"}
    adam = inspect.signature(torch.optim.Adam).parameters  # torch's defaults, not ours
    assert (
        tuple(settings["betas"]) == adam["betas"].default and settings["eps"] == adam["eps"].default
    )
    assert settings["weight_decay"] == adam["weight_decay"].default == 0
    assert settings["momentum"] == 0.9 and settings["nesterov"] is False  # the papers' SGD
    group = make_optimizer([torch.nn.Parameter(torch.ones(2))], "adam", 1e-3, **settings)
    assert group.param_groups[0]["betas"] == (0.9, 0.999)
    a, b = sections.OptimConfig(), sections.OptimConfig()
    a.betas.append(0.0)
    assert b.betas == [0.9, 0.999]  # a mutable default is never shared between configs


SECTIONS = {
    "data": sections.DataConfig, "model": sections.ModelConfig, "loss": sections.LossConfig,
    "optim": sections.OptimConfig, "train": sections.TrainConfig,
}  # fmt: skip


def test_a_file_that_spells_out_every_default_loads_to_those_defaults():
    """Every key a section declares can be written in a config file and reads back unchanged."""
    assert [f.name for f in dataclasses.fields(Config)][-5:] == list(SECTIONS)
    document = {name: dataclasses.asdict(cls()) for name, cls in SECTIONS.items()}
    document["train"]["iterations"] = 5  # the one value without a default (or epochs)
    cfg = load_config(document)
    for name in SECTIONS:
        assert dataclasses.asdict(getattr(cfg, name)) == document[name], name
    with pytest.raises(sections.ConfigError, match="unknown key 'optim.betas2'"):
        load_config(dict(document, optim={"betas2": [0.9, 0.99]}))
    assert issubclass(sections.ConfigError, ValueError)  # `except ValueError` catches it
