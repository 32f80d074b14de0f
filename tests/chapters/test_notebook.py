"""dmlbook.chapters.notebook: setup(), show_source() and check_close()."""

from __future__ import annotations

import ast

import pytest

from dmlbook.chapters.notebook import check_close, show_signature, show_source
from dmlbook.losses import TripletLoss, contrastive_loss, dro_loss


def shown(capsys, obj, **kwargs) -> str:
    assert show_source(obj, **kwargs) is None  # a cell ending in show_source(f) shows it once
    return capsys.readouterr().out.removesuffix("\n")


def test_show_source_keeps_the_code_and_a_one_line_docstring(capsys):
    text = shown(capsys, contrastive_loss)
    assert text.startswith("@declared\ndef contrastive_loss(")
    assert '"""Mean of Wang et al. 2019, Eq. 4' in text
    assert "----------" not in text and "return reduce(per_pair" in text
    ast.parse(text)  # still valid Python
    # the signature as written (the frame's S, labels and masks bare), packed into one line
    assert text.splitlines()[1] == (
        "def contrastive_loss(S, labels, margin: Cosine = 0.5, *, pos_mask, neg_mask) -> torch.Tensor:"
    )
    # a long signature is packed into lines of at most 100 characters, the same parameters
    long = shown(capsys, dro_loss).splitlines()
    header = long[
        1 : next(i for i, line in enumerate(long) if line.endswith(") -> torch.Tensor:")) + 1
    ]
    assert len(header) > 1 and all(len(line) <= 100 for line in long)
    names = ast.parse("\n".join(long)).body[0].args
    assert [a.arg for a in names.args + names.kwonlyargs][-3:] == [
        "drop_zero",
        "pos_mask",
        "neg_mask",
    ]


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


def test_check_close_passes_within_the_tolerance_and_names_what_is_off():
    pd = pytest.importorskip("pandas")
    check_close(29.3, 29.8, 0.5, "R@1 (%)")  # |difference| = tol passes
    check_close(pd.Series({"MS": 29.0, "LS": 21.3}), {"MS": 29.8, "LS": 21.3}, 1.0)
    with pytest.raises(AssertionError) as err:
        check_close(
            {"MS": 26.0, "LS": 21.3, "DRO": float("nan")},
            {"MS": 29.8, "LS": 21.3, "DRO": 1},
            1.0,
            "R@1 (%)",
        )
    message = str(err.value)
    assert "R@1 (%) [MS] = 26, expected 29.8 +- 1" in message and "[DRO] = nan" in message
    assert "[LS]" not in message  # only what is off is named
    with pytest.raises(AssertionError, match=r"^loss = 0.2, expected 0.1 \+- 0.01"):
        check_close(0.2, 0.1, 0.01, "loss")


def test_check_close_refuses_a_tolerance_or_value_it_cannot_use():
    for tol in (0, -1.0, float("nan"), "1", True):
        with pytest.raises(ValueError, match="tol must be a positive number"):
            check_close(1.0, 1.0, tol)
    with pytest.raises(TypeError, match="value must be one too"):
        check_close(1.0, {"MS": 1.0}, 0.1)
    with pytest.raises(KeyError):
        check_close({"LS": 1.0}, {"MS": 1.0}, 0.1)


@pytest.mark.slow
def test_importing_dmlbook_first_makes_idle_threads_sleep_and_setup_picks_threads():
    """OMP_WAIT_POLICY must be set before torch loads its OpenMP runtime (read once, at load)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    probe = (
        "import os, warnings\n"
        "{first}\n"
        "import dmlbook, torch\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    dmlbook.setup(threads=2)\n"
        "print(os.environ.get('OMP_WAIT_POLICY'), dmlbook.OMP_POLICY_TOO_LATE, "
        "torch.get_num_threads(), len(w))\n"
    )
    out = {}
    for case, first in (("dmlbook first", ""), ("torch first", "import torch")):
        proc = subprocess.run([sys.executable, "-c", probe.format(first=first)], env=env,
                              capture_output=True, text=True, check=True)  # fmt: skip
        out[case] = proc.stdout.split()
    cpus = min(2, len(os.sched_getaffinity(0)))
    assert out["dmlbook first"] == ["PASSIVE", "False", str(cpus), "0"]
    # too late to change the runtime: one thread (nothing idles) and a warning saying why
    assert out["torch first"] == ["None", "True", "1", "1"]


def test_chapter_threads_is_at_most_the_cpus_available():
    import os

    from dmlbook.chapters.notebook import chapter_threads

    assert chapter_threads(10_000) == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="threads must be a positive int"):
        chapter_threads(0)


def test_show_signature_names_the_declared_ranges(capsys):
    assert show_signature(TripletLoss) is None
    text = capsys.readouterr().out.strip()
    assert text.startswith("TripletLoss(margin: NonNegative = 0.1, *, form: Form = 'similarity',")
    assert "mining: Literal['all', 'batch_hard', 'semihard'] = 'all')" in text
    assert "Annotated" not in text  # the range's name, not its expansion
    show_signature(contrastive_loss)
    out = capsys.readouterr().out
    assert "margin: Cosine = 0.5" in out and "pos_mask: Mask = None" in out
    from dmlbook.losses import binomial_weights  # declared like=binomial_deviance_loss

    show_signature(binomial_weights)
    out = capsys.readouterr().out
    assert "alpha: Scale = 2.0" in out and "neg_mask: Mask = None" in out


def test_numpy_integer_threads_and_tolerances_are_accepted():
    """Issue 38: chapter_threads(numpy.int64(1)) is chapter_threads(1); a tolerance of
    numpy.int64(1) is a positive number; True is refused for both."""
    import numpy as np

    from dmlbook.chapters.notebook import chapter_threads, check_close

    assert chapter_threads(np.int64(1)) == chapter_threads(1)
    check_close(1.5, 1.0, np.int64(1))
    with pytest.raises(ValueError, match="threads must be a positive int"):
        chapter_threads(True)
    with pytest.raises(ValueError, match="tol must be a positive number"):
        check_close(1.5, 1.0, True)
