"""Tests of dmlbook.engine.config: the shipped configs, clear errors, overrides, hostile input.

The shipped configs load (by path or bare name) and follow their papers' recipes; a bad key or
value gives one :class:`ConfigError` that names it. Under hostile and random input: YAML
aliases, and a fuzz. The fuzz writes random documents (random keys and values in the config's sections, and random
text) and random ``--set`` overrides; loading must give a :class:`Config` or one
:class:`ConfigError`, never another exception.
"""

from __future__ import annotations

import string
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_run import tiny_config

from dmlbook.core.reproducibility import seed_everything
from dmlbook.engine import RECALL_KS, Config, ConfigError, find_config, load_config, train
from dmlbook.engine.build import milestones

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))

BILLION_LAUGHS = """\
name: laughs
loss:
  name: multi_similarity
  params:
    a: &a [x, x, x, x, x, x, x, x, x, x]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
"""


def test_yaml_aliases_are_refused_with_the_line(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(BILLION_LAUGHS)  # 10^8 leaves once written out (--dry-run, checkpoints)
    with pytest.raises(ConfigError, match=r"laughs.yaml, line 6: the YAML alias \*a"):
        load_config(path)
    with pytest.raises(ConfigError, match="alias"):
        load_config({"name": "x"}, ["loss.params={a: &a [1], b: *a}"])


def test_seed_out_of_range_is_a_config_error():
    with pytest.raises(ConfigError, match=r"train.seed must be an integer in \[0, 2\*\*32\)"):
        load_config({"train": {"seed": 2**70, "iterations": 10}})
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*64\)"):
        seed_everything(2**70)


SECTIONS = ["name", "description", "data", "model", "loss", "optim", "train"]
KEYS = st.one_of(
    st.sampled_from(
        ["dataset", "lr", "name", "params", "iterations", "batch_size", "k", "seed", "crop",
         "milestones", "options", "pretrained", "dim", "epochs", "margin", "out_dir"]
    ),
    st.text(string.ascii_letters + "_.", max_size=8),
)  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)
DOCUMENTS = st.dictionaries(st.one_of(st.sampled_from(SECTIONS), KEYS), VALUES, max_size=6)
OVERRIDES = st.lists(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(
        ["train.seed", "optim.lr", "loss.params.margin", "name", "data", "train.k", "x.y"]),
        st.text(max_size=10)), max_size=3,
)  # fmt: skip
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _loads_or_config_error(text: str, overrides: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            assert isinstance(load_config(path, overrides), Config)
        except ConfigError as err:
            assert "\n" not in str(err).strip() or "YAML" in str(err)


@FUZZ
@given(DOCUMENTS, OVERRIDES)
def test_fuzz_random_configs_load_or_raise_config_error(document, overrides):
    _loads_or_config_error(yaml.safe_dump(document, allow_unicode=True), overrides)


@FUZZ
@given(st.text(alphabet=st.sampled_from(list(":-[]{}&*!|>#'\" \n\tab1.")), max_size=60))
def test_fuzz_random_text_loads_or_raises_config_error(text):
    _loads_or_config_error(text, [])


def test_a_list_of_numbers_is_named_in_plain_words():
    with pytest.raises(ConfigError, match=r"optim.milestones must be a list of integers or "
                       r"numbers, got 0.5 \(float\)"):  # fmt: skip
        load_config(tiny_config(Path("/tmp/unused")), ["optim.milestones=0.5"])


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "3\n"])
@pytest.mark.parametrize("extra", [{"overrides": ["train.iterations=3"]}, {"data_dir": "/d"}, {}])
def test_a_file_that_is_no_mapping_is_one_config_error_with_set_or_data_too(tmp_path, text, extra):
    """``--set`` and ``--data`` write into the values: a list or a scalar at the top is refused
    first, naming the file, instead of failing inside the override."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"c\.yaml: a config must be a mapping of sections"):
        load_config(path, **extra)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_are_valid(path):
    cfg = load_config(path)
    assert cfg.name == path.stem
    assert cfg.ks == cfg.train.ks or cfg.ks == RECALL_KS.get(cfg.data.dataset, cfg.ks)
    from dmlbook.engine.build import build_loss

    build_loss(cfg)


def test_headline_configs_follow_the_recipes():
    cub = load_config(ROOT / "configs/ms_cub_bninception.yaml")
    assert (cub.train.batch_size, cub.train.k, cub.model.dim) == (80, 5, 512)
    assert (cub.optim.lr, cub.optim.weight_decay, cub.train.iterations) == (3e-5, 5e-4, 3000)
    assert milestones(cub, 3000) == [1200, 2400] and cub.ks == (1, 2, 4, 8, 16, 32)
    assert cub.model.freeze_bn and cub.model.pooling == "max" and cub.data.crop == 227
    sop = load_config(ROOT / "configs/ms_sop_bninception.yaml")
    assert sop.train.batch_size == 1000 and sop.ks == (1, 10, 100, 1000)
    inshop = load_config(ROOT / "configs/ms_inshop_bninception.yaml")
    assert inshop.ks == (1, 10, 20, 30, 40, 50)
    assert (inshop.data.test_split, inshop.data.gallery_split) == ("query", "gallery")
    liu = load_config(ROOT / "configs/liu_cub_bninception.yaml")
    assert (liu.optim.head_lr_mult, liu.optim.freeze_backbone_epochs, liu.train.epochs) == (
        10,
        5,
        20,
    )


def test_config_errors_are_clear(tmp_path):
    base = tiny_config(tmp_path / "run")
    with pytest.raises(ConfigError, match=r"unknown key 'optim.lrr'\. Did you mean 'lr'\?"):
        load_config(base, ["optim.lrr=0.1"])
    with pytest.raises(ConfigError, match=r"unknown key 'trian'\. Did you mean 'train'\?"):
        load_config(dict(base, trian={}))
    with pytest.raises(ConfigError, match=r"train.k must be an integer, got 'four'"):
        load_config(base, ["train.k=four"])
    with pytest.raises(ConfigError, match=r"optim.lr must be a number, got \[1\]"):
        load_config(base, ["optim.lr=[1]"])
    with pytest.raises(ConfigError, match="not a multiple of train.k=4; use e.g. 16 or 20"):
        load_config(base, ["train.batch_size=18"])
    with pytest.raises(ConfigError, match="exactly one of train.iterations and train.epochs"):
        load_config(base, ["train.epochs=3"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="Shipped configs \\(by name\\): .*ms_cub_bninception, "):
        load_config("ms_cub_bninceptoin")

    with pytest.raises(ConfigError, match="--set expects"):
        load_config(base, ["optim.lr"])
    with pytest.raises(ConfigError, match="model.pooling"):
        load_config(base, ["model.pooling=sum"])
    with pytest.raises(ConfigError, match="data folder .* does not exist"):
        train(load_config(base, data_dir=tmp_path / "nowhere"), progress=False)
    with pytest.raises(ConfigError, match="loss: unknown loss 'multi_sim'"):
        train(load_config(base, ["loss.name=multi_sim"]), progress=False)


def test_shipped_configs_load_by_bare_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_config("ms_cub_bninception") == ROOT / "configs" / "ms_cub_bninception.yaml"
    assert load_config("liu_cub_bninception").name == "liu_cub_bninception"
    (tmp_path / "mine.yaml").write_text("name: mine\ntrain: {iterations: 5}\n")
    assert load_config("mine.yaml").name == "mine"  # ordinary paths work as before
    with pytest.raises(ConfigError, match="does not exist"):
        find_config("configs/ms_cub_bninception")  # a path without suffix is not a name


def test_yaml_floats_overrides_and_toml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path / "run")).replace("0.001", "1e-3"))
    cfg = load_config(path, ["optim.weight_decay=5e-4", "train.ks=[1, 2]", "loss.params.beta=40"])
    assert cfg.optim.lr == 1e-3 and cfg.optim.weight_decay == 5e-4  # "1e-3" read as a float
    assert cfg.ks == (1, 2) and cfg.loss.params == {"beta": 40}
    toml = tmp_path / "c.toml"
    toml.write_text('name = "t"\n[train]\niterations = 5\n[optim]\nlr = 2e-4\n')
    cfg = load_config(toml)
    assert cfg.train.iterations == 5 and cfg.optim.lr == 2e-4
    assert load_config({"train": {"epochs": 2}}).ks == (1, 2, 4, 8)
    assert isinstance(cfg, Config) and cfg.to_dict()["optim"]["lr"] == 2e-4


# ------------------------------------------------------------------------------------------
# Counts and milestones within sane bounds (issue 45)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "train, match",
    [
        ({"iterations": 10**30}, r"train.iterations must be a positive integer of at most "
         r"1,000,000,000 \(10\^9\), got 1,000,000,000,000,000,000,000,000,000,000"),
        ({"iterations": 10**9 + 1}, "train.iterations must be a positive integer of at most"),
        ({"epochs": 10**12}, "train.epochs must be a positive integer of at most"),
        ({"epochs": 10**5, "epoch_iters": 10**5}, r"train.epochs x train.epoch_iters = "
         r"10,000,000,000 iterations, more than 1,000,000,000"),
        ({"iterations": 10, "log_every": 10**10}, "train.log_every must be a positive integer"),
    ],
)  # fmt: skip
def test_train_counts_beyond_a_billion_are_refused(train, match):
    with pytest.raises(ConfigError, match=match):
        load_config({"train": train})


def test_a_billion_iterations_is_still_accepted():
    assert load_config({"train": {"iterations": 10**9}}).train.iterations == 10**9


@pytest.mark.parametrize(
    "given, why",
    [
        ([1.5], "1.5 is neither a fraction in (0, 1) nor a whole iteration"),
        ([0.4, float("nan")], "nan is neither a fraction in (0, 1) nor a whole iteration"),
        ([float("inf")], "inf is neither a fraction in (0, 1) nor a whole iteration"),
        ([0], "0 is neither a fraction in (0, 1) nor a whole iteration"),
        ([-100], "-100 is neither a fraction in (0, 1) nor a whole iteration"),
        ([1.0], None),  # iteration 1 (whole), within the 3,000 iterations
        ([0.5, 100], "fractions and iterations are mixed"),
        ([0.8, 0.4], "the fractions of the run do not increase"),
        ([0.5, 0.5], "the fractions of the run do not increase"),
        ([2400, 1200], "the iterations do not increase"),
        ([0.4, 0.8], None),
        ([1200, 2400], None),
    ],
)
def test_milestones_are_increasing_fractions_or_whole_iterations(given, why):
    values = {"optim": {"milestones": given}, "train": {"iterations": 3000}}
    if why is None:
        assert load_config(values).optim.milestones == given
        return
    with pytest.raises(ConfigError) as caught:
        load_config(values)
    assert str(caught.value) == (
        "optim.milestones must be increasing fractions of the run in (0, 1) (e.g. [0.4, 0.8]) or "
        f"increasing whole iterations (e.g. [1200, 2400]), got {given}: {why}."
    )


def test_milestones_beyond_the_run_are_refused_before_it_starts():
    with pytest.raises(ConfigError, match=r"optim.milestones \[1200, 4000\] lie beyond the run's "
                       "train.iterations=3,000"):  # fmt: skip
        load_config({"optim": {"milestones": [1200, 4000]}, "train": {"iterations": 3000}})
    # with epochs the length is known once the data is: checked when the run is built
    assert load_config({"optim": {"milestones": [4000]}, "train": {"epochs": 2}})


def test_numpy_integers_fill_int_and_float_fields_as_python_numbers():
    """Issue 38: a value read from a numpy array (numpy.int64) fills an int field as an int."""
    import numpy as np

    from dmlbook.engine.config import _coerce

    for v in (np.int64(3), np.uint16(3), np.int8(3)):
        got = _coerce(v, int, "train.k")
        assert got == 3 and type(got) is int
        assert _coerce(v, float, "optim.lr") == 3.0
    with pytest.raises(ConfigError):
        _coerce(True, int, "train.k")
