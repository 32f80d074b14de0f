"""The API reference page (tools/api_reference.py): every public name is on it, every example runs.

The names expected are read here from the package itself (each module's ``__all__``, the loss and
data set registries, the command's parser), not from the generator; ``tests/test_book_render.py``
checks that Sphinx rendered an entry for each of them. Every generated example is run again and
must print what the page shows; every doctest of a documented object runs under ``doctest``.
"""

from __future__ import annotations

import doctest
import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import api_reference  # noqa: E402

#: The modules whose ``__all__`` is the public API the page documents.
PUBLIC = (
    "dmlbook.losses",
    "dmlbook.mining",
    "dmlbook.evaluate",
    "dmlbook.models",
    "dmlbook.data",
    "dmlbook.engine.config_sections",
)


def public_names() -> list[tuple[str, str]]:
    return [(m, n) for m in PUBLIC for n in importlib.import_module(m).__all__]


@pytest.fixture(scope="module")
def entries() -> list[api_reference.Entry]:
    return api_reference.entries()


@pytest.fixture(scope="module")
def page(entries) -> str:
    return api_reference.page(entries)


def test_every_public_name_has_an_entry(entries, page):
    targets = {t.rsplit(".", 1)[1] for e in entries for t in e.targets}
    missing = [f"{m}.{n}" for m, n in public_names() if n not in targets]
    assert missing == [], "public names without an entry"
    assert page.count("```{eval-rst}") == sum(len(e.targets) for e in entries)


def test_every_registered_loss_data_set_and_command_has_an_entry(entries):
    from dmlbook.cli import build_parser
    from dmlbook.data import available_datasets
    from dmlbook.losses import available_losses

    titles = {e.title for e in entries}
    assert {f'`get_loss("{n}")`' for n in available_losses()} <= titles
    assert {f'`load_dataset("{n}", split)`' for n in available_datasets()} <= titles
    (commands,) = [a for a in build_parser()._actions if hasattr(a, "choices") and a.choices]
    assert {f"`dmlbook {c}`" for c in commands.choices} | {"`dmlbook`"} <= titles


def test_every_loss_miner_metric_model_section_and_command_has_an_example(entries):
    assert api_reference.missing_examples(entries) == []
    for kind in api_reference.KINDS:
        assert any(e.example or e.doctest for e in entries if e.kind == kind), kind


def test_every_generated_example_runs_and_prints_what_the_page_shows(entries, page):
    for e in entries:
        if e.example:
            assert e.example.rstrip() in page
            assert api_reference.run_example(e.example) == e.output, e.title


def test_every_doctest_on_the_page_passes(entries):
    finder, runner = doctest.DocTestFinder(recurse=False), doctest.DocTestRunner(verbose=False)
    ran = 0
    for target in {t for e in entries for t in e.targets}:
        module, _, name = target.rpartition(".")
        obj = getattr(importlib.import_module(module), name)
        home = sys.modules[getattr(obj, "__module__", module)]
        for test in finder.find(obj, name, globs=dict(vars(home))):
            if test.examples:
                ran += 1
                result = runner.run(test, out=lambda text: None)
                assert result.failed == 0, f"{target}: doctest failed"
    assert ran >= 6, "the docstring examples (get_loss, ms_mining_masks, models) are found"


def test_every_constant_on_the_page_is_documented_where_autodoc_reads_its_comment(page):
    """A constant named under a package that re-exports it shows its type's docstring (``dict``'s,
    which Sphinx reports as three reST errors); under its own module, its ``#:`` comment."""
    from sphinx.pycode import ModuleAnalyzer

    targets = re.findall(r"^\.\. autodata:: (\S+)$", page, flags=re.MULTILINE)
    assert "dmlbook.mining.triplets.TRIPLET_KINDS" in targets
    undocumented = [
        t
        for t in targets
        if ("", t.rpartition(".")[2])
        not in ModuleAnalyzer.for_module(t.rpartition(".")[0]).find_attr_docs()
    ]
    assert undocumented == []
