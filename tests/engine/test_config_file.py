"""Tests of dmlbook.engine.config_file: a config file is read as given, or refused in one line.

What PyYAML would accept silently (a key given twice: the last one wins) or fail on with a
traceback (1,000 levels of nesting: ``RecursionError``), and files that are not UTF-8 text, each
give one :class:`ConfigError` naming the file and, for YAML, the line. The lines expected are
counted by hand in the documents below. Cheap: no training, a few milliseconds each.
"""

from __future__ import annotations

import pytest

from dmlbook.engine import ConfigError, load_config
from dmlbook.engine.config_file import MAX_DEPTH, find_config, load_yaml, read_file

TWO_OPTIM_SECTIONS = """\
name: twice
optim: {name: adam, lr: 0.003, milestones: [0.4, 0.8]}
train: {iterations: 10}
optim: {name: sgd, lr: 0.5}
"""

NESTED_KEY_TWICE = """\
name: nested
loss:
  name: multi_similarity
  params:
    alpha: 2.0
    beta: 40.0
    alpha: 3.0
"""


@pytest.mark.parametrize(
    "text, line, first, key",
    [(TWO_OPTIM_SECTIONS, 4, 2, "optim"), (NESTED_KEY_TWICE, 7, 5, "alpha")],
    ids=["section", "nested-key"],
)
def test_a_key_given_twice_is_refused_with_the_file_and_the_line(tmp_path, text, line, first, key):
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line {line}: the key {key!r} is given twice")
    assert f"first on line {first}" in message and "\n" not in message


def test_a_key_given_twice_in_a_set_value_or_a_toml_file(tmp_path):
    with pytest.raises(ConfigError, match=r"--set value .*the key 'a' is given twice"):
        load_config({"name": "x"}, ["loss.params={a: 1, a: 2}"])
    path = tmp_path / "twice.toml"
    path.write_text('name = "x"\n[train]\niterations = 10\n[train]\nepochs = 2\n')
    with pytest.raises(ConfigError, match=rf"^{path} is not valid TOML: .*line 4"):
        read_file(path)


def test_a_yaml_merge_key_is_refused_with_the_line(tmp_path):
    """``<<: {name: z}`` beside ``name: tiny`` keeps ``tiny`` silently in YAML: refused."""
    path = tmp_path / "merge.yaml"
    path.write_text("name: tiny\n<<: {name: z}\n")
    with pytest.raises(ConfigError, match=r"merge.yaml, line 2: the YAML merge key << is not"):
        load_config(path)


def test_same_keys_in_different_mappings_are_fine():
    values = load_yaml("a: {x: 1}\nb: {x: 2}\nc: [{x: 3}, {x: 4}]\n", "test")
    assert values == {"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}]}


@pytest.mark.parametrize("style", ["flow", "block"])
def test_nesting_1000_levels_deep_is_one_line_not_a_recursion_error(tmp_path, style):
    path = tmp_path / "deep.yaml"
    if style == "flow":  # 2 KB: "a: [[[[...]]]]" on line 4
        text, line = "name: deep\nloss:\n  params:\n    a: " + "[" * 1000 + "]" * 1000 + "\n", 4
    else:  # one key per line, each indented one step more: the value of k{i} is a mapping
        text = "name: deep\n" + "".join(" " * i + f"k{i}:\n" for i in range(1000))
        # The top mapping is level 1, the value of k{i} level i + 2 and starts on the line of
        # k{i + 1}, line i + 3: level MAX_DEPTH + 1 starts on line MAX_DEPTH + 2.
        line = MAX_DEPTH + 2
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        read_file(path)
    assert str(caught.value) == (
        f"{path}, line {line}: lists and mappings are nested more than {MAX_DEPTH} levels deep; "
        "a config needs a few (section, key, value)."
    )


def test_nesting_up_to_the_limit_is_read():
    text = "a: " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
    value = load_yaml(text, "test")["a"]
    for _ in range(MAX_DEPTH - 2):
        value = value[0]
    assert value == [1]
    with pytest.raises(ConfigError, match="nested more than"):
        load_yaml("a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH, "test")


@pytest.mark.parametrize("suffix", [".yaml", ".toml"])
def test_a_file_that_is_not_utf8_names_the_file(tmp_path, suffix):
    text = "name: u16\n" if suffix == ".yaml" else 'name = "u16"\n'
    path = tmp_path / f"u16{suffix}"
    path.write_text(text, encoding="utf-16")  # what some Windows editors save
    with pytest.raises(ConfigError) as caught:
        read_file(path)
    assert str(caught.value) == (
        f"config file {path} is not UTF-8 text (it is UTF-16); save it as UTF-8 (in most "
        "editors: Save As, encoding UTF-8)."
    )
    path.write_bytes(text.encode("latin-1") + b"description: caf\xe9\n")
    with pytest.raises(ConfigError, match=rf"config file {path} is not UTF-8 text \(invalid "):
        read_file(path)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: bom\ndescription: caf\xc3\xa9\n")
    assert read_file(path) == {"name": "bom", "description": "caf\u00e9"}


def test_shipped_configs_are_found_by_name():
    path = find_config("synthetic_ms_cpu")
    assert path.name == "synthetic_ms_cpu.yaml" and read_file(path)["name"] == "synthetic_ms_cpu"
