"""How each method is shown: its colour in every figure, whether it is one of the paper's three
methods, the figures drawn from its runs alone, and its README row's words.

These are the reports' concerns, so they live here, keyed by method name, and `Method`
(`seqq.estimators.method`) declares only what a method computes, guarantees and takes: the
estimators know nothing of figures or the README. Every built-in method has an entry (tested);
a method registered from elsewhere (a user's, a test's toy) is shown with `UNLISTED`: a spare
colour, in no paper figure, a blank README description.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Presentation:
    """One method as the reports and the README show it."""

    computes: str  # the README table's "what it computes"
    bounds: str = ""  # the README table's "bounds `lower`/`upper`": what they are, if any
    colour: str | None = None  # its colour in every figure (else one from a spare palette)
    in_paper: bool = False  # one of the paper's three methods (Fig. 3-11)
    figures: tuple[str, ...] = ()  # report figures drawn from its runs alone (`figures.py`)


UNLISTED = Presentation(computes="")

_BEAM_BOUNDS = "p(B), p(B) + 1 − q(B)"
PRESENTATION: dict[str, Presentation] = {
    "exact": Presentation(
        computes="enumeration of Q, refused above `max_calls` (the cost is known in advance)",
        bounds="= value", colour="k"),
    "naive": Presentation(computes="Monte Carlo from p", colour="C4"),
    "uniform": Presentation(computes="Monte Carlo uniform over Q (Eq. 7)", colour="C3"),
    "importance": Presentation(
        computes="IS under the query-restricted proposal q (paper Eq. 5–9), drawn through the "
        "prefix trie", colour="C1", in_paper=True),
    "twisted": Presentation(
        computes="IS steered by a surrogate's backward messages (exact weights), through the "
        "prefix trie"),
    "beam": Presentation(computes="top-B beam search", bounds=_BEAM_BOUNDS, colour="C2",
                         in_paper=True),
    "coverage_beam": Presentation(computes="coverage beam search (Thm. 1)", bounds=_BEAM_BOUNDS,
                                  colour="C5", figures=("beam_sizes",)),
    "tail_beam": Presentation(computes="tail-splitting beam search", bounds=_BEAM_BOUNDS,
                              colour="C6"),
    "hybrid": Presentation(
        computes="the paper's beam + IS hybrid (App. D), tail samples through the trie",
        bounds="p(B), p(B) + 1 − q(B) (untwisted)", colour="C0", in_paper=True),
    "smc": Presentation(
        computes="SMC on q (or on the twisted proposal) with ESS-triggered systematic "
        "resampling"),
    "randomized_beam": Presentation(
        computes="randomized beam search: top-K1 kept, K2 sampled from the rest (randomized "
        "DP)"),
    "wor": Presentation(
        computes="sampling without replacement over Q (UniqueRandomizer), sum-and-sample; "
        "exact on exhaustion", bounds="p(S), p(S) + 1 − q(S) (untwisted)"),
    "hindsight_gumbel": Presentation(
        computes="Hindsight-Gumbel estimator over WOR draws, single or repeated",
        bounds="p(S), p(S) + 1 − q(S)"),
    "mixture": Presentation(
        computes="a union too large to compile (`Q.union(..., compile=False)`): per-part "
        "proposals, balance-heuristic MIS"),
    "klm": Presentation(
        computes="a union too large to compile: per-part proposals, Karp–Luby–Madras weights"),
    "gams": Presentation(
        computes="generalised adaptive multilevel splitting: paths from the model, cut and "
        "copied by a score (the surrogate's, else uniform), no weights"),
}


def presentation(method: str) -> Presentation:
    """How `method` is shown: its entry, or `UNLISTED` for a method registered elsewhere."""
    return PRESENTATION.get(method, UNLISTED)


def colours() -> dict[str, str]:
    """Each method's own colour, for those that have one (`plotting.method_colors` adds the
    rest)."""
    return {name: p.colour for name, p in PRESENTATION.items() if p.colour}


def paper_methods() -> list[str]:
    """The paper's three methods (Fig. 3-11), in the table's order."""
    return [name for name, p in PRESENTATION.items() if p.in_paper]


def drawn_in(figure: str) -> list[str]:
    """The methods whose runs alone `figure` draws (their `figures`)."""
    return [name for name, p in PRESENTATION.items() if figure in p.figures]
