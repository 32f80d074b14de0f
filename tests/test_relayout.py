"""``tools/relayout.py``, the script that moves the package into its layers (issue 37).

The rewriting is checked on small sources whose expected text is written out by hand (imports
absolute and relative, ``from . import x``, a module that changes its name, a face's ``_LAZY``
strings, dotted names and paths in prose, a notebook's JSON format), each rewritten twice: the
second pass must change nothing. The whole script runs once on a throwaway git repository
(``slow``: it starts git and ruff). The real mapping is checked against the layers' declaration
and the package as it is: a module that it does not place fails here, as the script would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import relayout  # noqa: E402  (tools/ is not a package)
from layers import PACKAGES, Layer  # noqa: E402

FILES = {
    "dmlbook/pairs.py": "dmlbook/core/pairs.py",
    "dmlbook/notebook.py": "dmlbook/chapters/notebook.py",
    "dmlbook/surgery/loss.py": "dmlbook/losses/gradient_surgery.py",
    "tests/test_pairs.py": "tests/core/test_pairs.py",
    "tests/surgery/test_loss.py": "tests/losses/test_gradient_surgery.py",
}
BEFORE = {  # every module there is before the move
    "dmlbook",
    "dmlbook.pairs",
    "dmlbook.notebook",
    "dmlbook.losses",
    "dmlbook.losses.base",
    "dmlbook.surgery",
    "dmlbook.surgery.loss",
    "dmlbook.surgery.gradient",
    "tests.test_pairs",
    "tests.cases",
    "tests.surgery.test_loss",
    "tests.surgery.strategies",
}
AFTER = {relayout.dotted(FILES.get(m.replace(".", "/") + ".py", m)) for m in BEFORE} | {
    "dmlbook.core",
    "dmlbook.chapters",
}


def twice(source: str, old: str, kind: str = "python") -> str:
    """Rewrite ``source`` at ``old``, then rewrite the result where it now is: no change."""
    new = FILES.get(old, old)
    if kind == "text":
        once = relayout.Rewriter(FILES, BEFORE).text(source)
        again = relayout.Rewriter(FILES, AFTER).text(once)
    else:
        once = getattr(relayout.Rewriter(FILES, BEFORE), kind)(source, old, new)
        again = getattr(relayout.Rewriter(FILES, AFTER), kind)(once, new, new)
    assert again == once, "a second run changed the text"
    return once


def test_relative_imports_are_re_expressed_from_the_new_folder():
    source = (
        "from .pairs import masked_mean  # the pair algebra\n"
        "from .losses.base import PairLoss\n"
        "from . import notebook\n"
    )
    assert twice(source, "dmlbook/__init__.py") == (
        "from .core.pairs import masked_mean  # the pair algebra\n"
        "from .losses.base import PairLoss\n"
        "from .chapters import notebook\n"
    )
    moved = "from ..losses.base import PairLoss\nfrom .gradient import Fn\nfrom ..pairs import x\n"
    assert twice(moved, "dmlbook/surgery/loss.py") == (
        "from .base import PairLoss\nfrom ..surgery.gradient import Fn\nfrom ..core.pairs import x\n"
    )


def test_a_module_that_changes_its_name_keeps_its_binding_and_one_statement_splits():
    face = "def f():\n    from ..surgery import loss, gradient\n"  # inside a function too
    assert twice(face, "dmlbook/losses/__init__.py") == (
        "def f():\n    from . import gradient_surgery as loss\n    from ..surgery import gradient\n"
    )
    chapter = "from dmlbook import notebook, pairs as p\nimport dmlbook.pairs\n"
    assert twice(chapter, "book/01_x.ipynb") == (
        "from dmlbook.chapters import notebook\nfrom dmlbook.core import pairs as p\n"
        "import dmlbook.core.pairs\n"
    )


def test_lazy_strings_dotted_names_and_paths():
    face = '_LAZY = {"setup": ".notebook", "x": ".losses.base", "y": "..py"}\n'
    assert twice(face, "dmlbook/__init__.py") == (
        '_LAZY = {"setup": ".chapters.notebook", "x": ".losses.base", "y": "..py"}\n'
    )
    regex = 'READERS = ["surgery/loss.py"]\nre.sub(r"dmlbook\\.pairs\\.masks\\(", "", x)\n'
    assert twice(regex, "tools/x.py") == (
        'READERS = ["losses/gradient_surgery.py"]\nre.sub(r"dmlbook\\.core\\.pairs\\.masks\\(", "", x)\n'
    )
    prose = (
        "See dmlbook.pairs.masked_mean (`dmlbook/pairs.py`, tested in tests/test_pairs.py), "
        "not dmlbook.pairs_extra nor mydmlbook/pairs.py; dmlbook.surgery stays.\n"
    )
    assert twice(prose, "README.md", "text") == (
        "See dmlbook.core.pairs.masked_mean (`dmlbook/core/pairs.py`, tested in "
        "tests/core/test_pairs.py), not dmlbook.pairs_extra nor mydmlbook/pairs.py; "
        "dmlbook.surgery stays.\n"
    )
    test = "ROOT = Path(__file__).resolve().parent.parent\nfrom dmlbook.pairs import masks\n"
    assert twice(test, "tests/test_pairs.py") == (  # one folder deeper: one level more
        "ROOT = Path(__file__).resolve().parents[2]\nfrom dmlbook.core.pairs import masks\n"
    )
    other = "from .strategies import unit_batches\n"  # tests/ is no package: from its root
    assert (
        twice(other, "tests/surgery/test_loss.py")
        == "from surgery.strategies import unit_batches\n"
    )
    helper = "from .cases import B\nfrom ..surgery.gradient import C\nH = Path(__file__).parent\n"
    assert twice(helper, "dmlbook/surgery/loss.py") == (
        "from ..surgery.cases import B\nfrom ..surgery.gradient import C\n"
        "H = Path(__file__).parent\n"  # its own folder: FIXUPS says, where it matters
    )


def test_a_notebook_keeps_its_json_format_and_its_outputs_follow():
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["`dmlbook.notebook` sets up ü\n"]},
            {
                "cell_type": "code",
                "metadata": {"tags": ["nbval-ignore-output"], "otter": "import dmlbook.pairs"},
                "source": ["%matplotlib inline\n", "from dmlbook.notebook import setup"],
                "outputs": [
                    {"name": "stdout", "output_type": "stream", "text": ["dmlbook.pairs\n"]}
                ],
                "execution_count": 1,
            },
        ],
        "metadata": {"otter": {"tests": "from dmlbook.notebook import setup"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    out = twice(text, "book/01_x.ipynb", "notebook")
    expected = json.loads(text)
    expected["cells"][0]["source"] = ["`dmlbook.chapters.notebook` sets up ü\n"]
    expected["cells"][1]["source"] = [
        "%matplotlib inline\n",
        "from dmlbook.chapters.notebook import setup",
    ]
    expected["cells"][1]["outputs"][0]["text"] = ["dmlbook.core.pairs\n"]
    expected["cells"][1]["metadata"]["otter"] = "import dmlbook.core.pairs"  # tests otter embeds
    expected["metadata"]["otter"]["tests"] = "from dmlbook.chapters.notebook import setup"
    assert out == json.dumps(expected, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    with pytest.raises(SystemExit, match="round-trip"):
        relayout.Rewriter(FILES, BEFORE).notebook(json.dumps(nb), "x.ipynb", "x.ipynb")


def test_the_mapping_refuses_a_new_name_that_begins_with_an_old_one():
    with pytest.raises(AssertionError, match="begins with"):
        relayout.check_mapping({"dmlbook/data/omniglot.py": "dmlbook/data/omniglot/omniglot.py"})
    relayout.check_mapping(relayout.MOVES)


def test_the_real_mapping_places_every_module_in_a_declared_layer():
    lost, missing = relayout.unplaced()
    assert lost == [] and missing == [], (
        f"extend tools/relayout.py's MOVES: not placed {lost}, at neither path {missing}"
    )
    for new in [*relayout.MOVES.values(), *(f"{f}/x.py" for f in relayout.STAY_FOLDERS)]:
        assert relayout.dotted(new.rsplit("/", 1)[0]) in PACKAGES, new


@pytest.mark.slow
def test_apply_moves_rewrites_refuses_and_is_idempotent(tmp_path):
    """On a throwaway repository: git mv, rewritten imports, the new folders' ``__init__.py``,
    a fixup; a second run changes nothing; an unplaced module stops the script, naming it."""
    files = {
        "dmlbook/__init__.py": '_LAZY = {"setup": ".notebook"}\n',
        "dmlbook/notebook.py": 'from .pairs import masks\n\nHERE = "parent"\n',
        "dmlbook/pairs.py": "def masks():\n    pass\n",
        "tests/test_notebook.py": "from dmlbook.notebook import HERE\n",
        "README.md": "`dmlbook/notebook.py` and dmlbook.pairs.masks\n",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "before"], cwd=tmp_path, check=True)
    layout = {
        "moves": {"dmlbook/notebook.py": "dmlbook/book/notebook.py", "dmlbook/pairs.py": "dmlbook/core/pairs.py"},
        "stay_folders": (),
        "stay_files": ("dmlbook/__init__.py",),
        "layers": (
            Layer("dmlbook.core", "core", "the pairs"),
            Layer("dmlbook.book", "book", "the notebook"),
            Layer("dmlbook", "face", "the face"),
        ),
    }  # fmt: skip
    fixup = {"dmlbook/book/notebook.py": (('"parent"', '"parents[1]"'),)}
    written = relayout.apply(tmp_path, fixup, **layout)
    assert "dmlbook/core/__init__.py" in written and "tests/book/__init__.py" in written
    assert (tmp_path / "dmlbook/book/notebook.py").read_text() == (
        'from ..core.pairs import masks\n\nHERE = "parents[1]"\n'
    )
    assert (tmp_path / "dmlbook/__init__.py").read_text() == '_LAZY = {"setup": ".book.notebook"}\n'
    assert (tmp_path / "tests/book/test_notebook.py").read_text() == (
        "from dmlbook.book.notebook import HERE\n"
    )
    assert (tmp_path / "README.md").read_text() == (
        "`dmlbook/book/notebook.py` and dmlbook.core.pairs.masks\n"
    )
    assert (tmp_path / "dmlbook/core/__init__.py").read_text() == '"""Core: the pairs."""\n'
    assert not (tmp_path / "dmlbook/notebook.py").exists()
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "after"], cwd=tmp_path, check=True)
    assert relayout.apply(tmp_path, fixup, **layout) == []
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True)
    assert status.stdout == b""
    (tmp_path / "dmlbook/extra.py").write_text("")
    with pytest.raises(SystemExit, match="not placed: dmlbook/extra.py"):
        relayout.apply(tmp_path, fixup, **layout)
