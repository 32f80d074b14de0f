"""Tests of dmlbook.engine.config under hostile and random input: YAML aliases, and a fuzz.

The fuzz writes random documents (random keys and values in the config's sections, and random
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

from dmlbook.engine import Config, ConfigError, load_config
from dmlbook.reproducibility import seed_everything

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
