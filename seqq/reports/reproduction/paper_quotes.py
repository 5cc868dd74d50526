"""The paper's sentences that docs/reproduction.md quotes, copied verbatim from its text (LaTeX
math as plain text), so a test can check every quotation marked as the paper's against them
without the paper itself: a quote is the paper's when each of its parts between "…" lies in one
of these sentences (`quoted`). Add a sentence here, copied from the paper, before quoting it."""

from __future__ import annotations

import re

QUOTES = (
    # Fig. 1 caption
    "Importance sampling query estimates maintain a 6x reduction in variance relative to naive "
    "model sampling for the same computation budget.",
    # Fig. 3 caption
    "As query path space grows with K, beam search quickly fails to bound ground truth while "
    "sampling remains robust, with the hybrid consistently outperforming all other methods, "
    "especially for large values of K.",
    # §5, Fig. 3
    "Across the 4 datasets the error increases systematically as K increases.",
    "However, beam search is significantly less robust than the other methods for 3 of the 4 "
    "datasets: the error rate increases more rapidly in a non-linear fashion compared to "
    "importance sampling and hybrid.",
    "The hybrid method systematically outperforms importance sampling along across all 4 "
    "datasets and for all values of K.",
    # §5, Table 2
    "The resulting high entropy causes beam search to fail to match surrogate ground truth given "
    "the computation budgets (consistent with earlier experiments), with a median RAE of 82% "
    "(for K=4 and a budget of O(10^3)).",
    "By contrast, importance sampling's median RAE under the same setting is 13%, a 6x "
    "reduction.",
    # App. G.2, Figs 10, 11
    "Fig. 10 (median error) and Fig. 11 (mean error), show that increasing the computation "
    "budget by an order of magnitude roughly corresponds to a three times reduction in RAE for "
    "both importance sampling and the hybrid method.",
    "For the provided budgets, the query estimates resulting from naive model sampling are "
    "consistently 0, resulting in an RAE of 1.",
    "This is likely because many of the ground truth probabilities for these queries have "
    "values on the order of 10^{-1} or smaller.",
    # App. G.6, Fig. 14
    "We observe that for many datasets, a query horizon of k = 30 is largely sufficient to "
    "reduce the remaining probability to under 10%.",
    "One notable exception is the Mobile Apps dataset, which, due to its lower entropy and high "
    "self-transition rate, maintains a much longer query horizon.",
    # Tables 4, 5 captions (App. H)
    "Average KL Divergence (relative entropy) between pseudo-ground truth and importance "
    "sampling estimates for 100 queries taken from Shakespeare dataset.",
)


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def quoted(quote: str) -> bool:
    """Whether every part of `quote` between "…" lies in one of the paper's `QUOTES` (case and
    spacing aside)."""
    sentences = [_plain(q) for q in QUOTES]
    parts = [_plain(p) for p in quote.split("…") if p.strip()]
    return bool(parts) and all(any(p in s for s in sentences) for p in parts)
