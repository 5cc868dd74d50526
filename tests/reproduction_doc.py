"""The committed reproduction doc and its CSVs as the reproduction tests read them: where they
are, and how a generated block or a summary-table row is cut out of a doc's text."""

from __future__ import annotations

from conftest import REPO

from seqq.reports.reproduction.markdown import SUMMARY_BLOCK, begin, end

FOLDER = REPO / "docs" / "reproduction"
DOC = (REPO / "docs" / "reproduction.md").read_text()


def doc_block(text: str, name: str) -> str:
    """The block `name` of a doc's text, from its BEGIN marker to its END marker."""
    return text[text.index(begin(name)):text.index(end(name))]


def summary_line(text: str, title: str) -> str:
    """The summary table's row of the experiment `title`."""
    return next(line for line in doc_block(text, SUMMARY_BLOCK).splitlines()
                if line.startswith(f"| {title} |"))
