"""The errata convention (dmlbook/papers/errata.py) and the errata page tools/book.py builds from it."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlbook.papers.errata import (
    Erratum,
    ErratumFormatError,
    collect,
    errata_in,
    errata_page,
    heading_slug,
    parse_cell,
)

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("book_tool", ROOT / "tools" / "book.py")
book_tool = sys.modules.get("book_tool") or importlib.util.module_from_spec(spec)
if "book_tool" not in sys.modules:
    sys.modules["book_tool"] = book_tool
    spec.loader.exec_module(book_tool)

GOOD = """:::{admonition} Erratum — Liu et al., Eq. 20
:class: erratum
**Printed:** $\\max$ of the negatives.

**Correct:** $\\min$ of the
negatives.

**Proof:** the tiny batch.
:::"""

# What the chapters mark, read off the chapters' own prose (grep "erratum", "misprint", "typo",
# "printed" in book/): the chapter and the (paper, place) of each erratum. A new erratum cell
# must be added here too, so that one deleted by accident is noticed.
EXPECTED = {
    ("04_triplet.ipynb", "Liu et al.", "Eq. 20"),
    ("05_lifted_structure.ipynb", "Wang et al. 2019", "text after Table 1 (on Eq. 8)"),
    ("05_lifted_structure.ipynb", "Liu et al.", "Eq. 14"),
    ("07_npair.ipynb", "Wang et al. 2019", "supplement Eq. 1 (NCA)"),
    ("08_three_similarities.ipynb", "Wang et al. 2019", "Sec. 4.1 (Figure 2, middle)"),
    ("10_multi_similarity.ipynb", "Liu et al.", "Eq. 39"),
    ("10_multi_similarity.ipynb", "MS blog post", "definition of the weight"),
    ("10_multi_similarity.ipynb", "MS blog post", '"Self Similarity" and "Hard Positive Mining"'),
    ("08_three_similarities.ipynb", "Wang et al. 2019", "supplement Eq. 5 (the histogram's nodes)"),
    (
        "08_three_similarities.ipynb",
        "Wang et al. 2019",
        "supplement Sec. 2 (reading of the histogram weights)",
    ),
    (
        "11_liu_weighting.ipynb",
        "Liu et al.",
        "Table III (triplet-based exponential weighting, alpha = 5)",
    ),
    ("13_gradient_surgery.ipynb", "Xuan & Pless", "Eq. 17 and Table 1 (Circle loss)"),
    ("13_gradient_surgery.ipynb", "Xuan & Pless", "Table 1 (the MS loss row)"),
    (
        "13_gradient_surgery.ipynb",
        "Xuan & Pless",
        "appendix Sec. 2 (the relative term of a negative pair)",
    ),
    ("13_gradient_surgery.ipynb", "Xuan & Pless", "appendix Sec. 4 (MS's batch size on SOP)"),
    ("13_gradient_surgery.ipynb", "Xuan & Pless", "Table 5 (bold in the SOP R@10 column)"),
    ("13_gradient_surgery.ipynb", "Xuan & Pless", "appendix Sec. 3 (a missing table number)"),
    (
        "13_gradient_surgery.ipynb",
        "Xuan & Pless",
        "appendix Tables 1-3 (the spread of one setting)",
    ),
    ("14_training_at_scale.ipynb", "Wang et al. 2019", "supplement Tables 1-2 (captions)"),
    ("13_gradient_surgery.ipynb", "Xuan & Pless", "Table 1 (SC triplet row)"),
    ("13_gradient_surgery.ipynb", "Xuan & Pless", "Eq. 19"),
    ("13_gradient_surgery.ipynb", "Xuan & Pless", "appendix Eq. 3"),
    ("12_dro.ipynb", "DRO paper", "Sec. 3 (labels of pairs)"),
    ("12_dro.ipynb", "DRO paper", "Sec. 3.1 (chi-square formula)"),
    ("12_dro.ipynb", "DRO paper", "Sec. 3.3 (recovery of the LS gradient)"),
    ("12_dro.ipynb", "DRO paper", "supplement Eq. 19 and Eq. 22"),
    ("12_dro.ipynb", "DRO paper", "supplement Eq. 25 (recovery of MS)"),
    ("12_dro.ipynb", "DRO paper", "supplement Eq. 34 (HAP2S_E)"),
    ("90_papers_numbers.ipynb", "DRO paper", "Sec. 4.2.3 (pair counts)"),
    ("90_papers_numbers.ipynb", "DRO paper", "Sec. 4 (In-Shop training classes)"),
    ("12_dro.ipynb", "DRO paper", "Eq. 3 and supplement Eq. 8 (lambda of the LS loss)"),
    ("12_dro.ipynb", "DRO paper", "Eq. 2-3 and supplement Eq. 9 (the anchor index)"),
    ("12_dro.ipynb", "DRO paper", "supplement Eq. 11 and Eq. 14 (the groups' divergence)"),
    ("12_dro.ipynb", "DRO paper", "supplement Eq. 27 (the factor of Eq. 9)"),
    ("12_dro.ipynb", "DRO paper", "supplement Eq. 30-31 (indices of HAP2S)"),
    ("90_papers_numbers.ipynb", "DRO paper", "Table 4 (DRO-KL-G at gamma = 0.01)"),
    ("90_papers_numbers.ipynb", "DRO paper", "Table 1 (the MS row on CUB-200-2011)"),
    ("90_papers_numbers.ipynb", "DRO paper", "Table 3 (the FashionNet, ABE and DRO-TopK_A rows)"),
    ("90_papers_numbers.ipynb", "DRO paper", "Sec. 4.2.2 (the ratio at B = 320)"),
    ("90_papers_numbers.ipynb", "DRO paper", "Table 2 (Cars-196 rows quoted from Wang et al.)"),
    ("90_papers_numbers.ipynb", "Wang et al. 2019", "Sec. 5.1 (LiftedStruct*_m at recall@1)"),
    ("90_papers_numbers.ipynb", "Wang et al. 2019", "Sec. 5.3 (In-Shop against ABE)"),
    ("90_papers_numbers.ipynb", "Wang et al. 2019", "Sec. 5.3 (CUB-200-2011 against Proxy-NCA)"),
}


def test_a_well_formed_cell_parses_into_its_fields():
    e = parse_cell(GOOD, "04_triplet.ipynb", 7)
    assert (e.paper, e.where, e.title) == ("Liu et al.", "Eq. 20", "Liu et al., Eq. 20")
    assert (e.printed, e.correct, e.proof) == (
        "$\\max$ of the negatives.",
        "$\\min$ of the negatives.",
        "the tiny batch.",
    )
    assert (e.chapter, e.cell) == ("04_triplet.ipynb", 7)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (GOOD.replace(":::{admonition} Erratum — ", ":::{note} "), "starts with"),
        (GOOD.removesuffix(":::"), "close the erratum"),
        (GOOD.replace("Liu et al., Eq. 20", "Liu et al. Eq. 20"), "<paper>, <place>"),
        (GOOD.replace("**Proof:**", "**Why:**"), "Printed, Correct"),
        (GOOD.replace("**Correct:**", "**Kind:**"), "found Printed, Proof"),
        (GOOD.replace("the tiny batch.", ""), "Proof are empty"),
    ],
)
def test_malformed_cells_are_refused_with_the_fix(source, message):
    with pytest.raises(ErratumFormatError, match="04_x.ipynb, cell 3") as err:
        parse_cell(source, "04_x.ipynb", 3)
    assert message in str(err.value)


words = st.text(
    st.characters(whitelist_categories=("L", "N"), whitelist_characters=" .$\\"), min_size=1
)


@given(paper=words, place=words, printed=words, correct=words, proof=words)
def test_any_text_round_trips_through_a_cell(paper, place, printed, correct, proof):
    paper, place = paper.replace(",", "").strip() or "P", place.strip() or "Eq. 1"
    printed, correct, proof = (" ".join(x.split()) or "x" for x in (printed, correct, proof))
    source = (
        f":::{{admonition}} Erratum — {paper}, {place}\n:class: erratum\n**Printed:** {printed}\n\n"
        f"**Correct:** {correct}\n\n**Proof:** {proof}\n:::"
    )
    e = parse_cell(source, "01_a.ipynb", 0)
    assert (e.paper, e.where, e.printed, e.correct, e.proof) == (
        paper,
        place,
        printed,
        correct,
        proof,
    )


def test_every_chapter_erratum_parses_and_the_set_is_the_expected_one():
    found = collect(book_tool.chapters())
    assert {(e.chapter, e.paper, e.where) for e in found} == EXPECTED


def test_the_page_lists_every_erratum_with_its_chapter():
    found = collect(book_tool.chapters())
    page = errata_page(found)
    for e in found:
        stem = Path(e.chapter).stem
        assert f"### {e.where}" in page
        assert f"- **Printed:** {e.printed}" in page and f"- **Correct:** {e.correct}" in page
        assert e.section, f"{e.chapter}: erratum {e.where} lies under no heading"
        assert f"]({stem}.ipynb#{heading_slug(e.section)}))" in page
    assert page.count("### ") == len(found) and f"{len(found)} errata in" in page


#: Errata whose proof cites a section of their chapter other than the one they stand in, and why.
PROVED_ELSEWHERE = {
    ("12_dro.ipynb", "supplement Eq. 27 (the factor of Eq. 9)"): "read in 12.6, whose recovery it "
    "concerns; the SymPy check is 12.5's",
}


def test_each_erratum_stands_in_the_section_its_proof_cites():
    """The page links an erratum to the section it stands in (the last heading above it): where
    its proof cites a section of the same chapter ("13.5 The weights as maps ..."), that must be
    the one, or a heading placed after the proof sends the reader to the wrong section."""
    wrong = []
    for e in collect(book_tool.chapters()):
        number = e.chapter[:2].lstrip("0")
        cited = set(re.findall(rf'"({number}\.\d+) [^"]+"', e.proof))
        here = e.section.split(" ", 1)[0]
        if cited and here not in cited and (e.chapter, e.where) not in PROVED_ELSEWHERE:
            wrong.append(f"{e.chapter} {e.where}: stands in {here}, proof cites {sorted(cited)}")
    assert not wrong, wrong


def test_the_build_writes_the_page_and_lists_it_after_the_chapters(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A chapter"), nbformat.v4.new_markdown_cell(GOOD)]
    nbformat.write(nb, tmp_path / "01_a.ipynb")
    (tmp_path / "_config.yml").write_text((ROOT / "book" / "_config.yml").read_text())
    out = tmp_path / "out"
    out.mkdir()
    nbformat.write(nb, out / "01_a.ipynb")
    book_tool.prepare(tmp_path, out, [out / "01_a.ipynb"], None, api=False)
    page = (out / "errata.md").read_text()
    assert "### Eq. 20" in page and "([A chapter](01_a.ipynb#a-chapter))" in page
    assert (out / "_toc.yml").read_text().splitlines()[-2:] == ["- file: 01_a", "- file: errata"]


def test_an_empty_book_says_so():
    assert "No erratum cells" in errata_page([])
    assert isinstance(Erratum("p", "w", "a", "b", "c", "x.ipynb", 0).title, str)


def test_an_erratum_inside_a_prose_cell_is_refused_not_lost(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Some prose first.\n\n" + GOOD)]
    nbformat.write(nb, tmp_path / "01_a.ipynb")
    with pytest.raises(ErratumFormatError, match="cell 0: move the erratum admonition"):
        errata_in(tmp_path / "01_a.ipynb")


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("14.9 The loss chapters", "149-the-loss-chapters"),
        # the anchor of the rendered Chapter 12 (the maths of a heading is not in its slug)
        (
            "12.6 Pseudo pairs and MS; HAP2S$_E$ (supplement 6.1.2-6.1.3)",
            "126-pseudo-pairs-and-ms-hap2s-supplement-612-613",
        ),
        ("2.1 A loss is a function of $\\mathbf{S}$", "21-a-loss-is-a-function-of-"),
    ],
)
def test_heading_slug_is_the_anchor_myst_makes(heading, expected):
    from markdown_it import MarkdownIt
    from markdown_it.tree import SyntaxTreeNode
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from myst_parser.mdit_to_docutils.base import compute_unique_slug

    tree = SyntaxTreeNode(MarkdownIt().use(dollarmath_plugin).parse("## " + heading))
    assert compute_unique_slug(tree.children[0], []) == expected  # MyST's own slug
    assert heading_slug(heading) == expected
