"""Every experiment of the paper that docs/reproduction.md lists, found in `experiments/`.

Each module there ends with `EXPERIMENT = ...`: an `Experiment` (read from a sweep's query
results), an `OwnRows` (read from rows of its own: a `kl` sweep's KL rows, a `fig1` sweep's
runs) or a `NotRun` (only its summary row).
The registry imports every module of that package, as `seqq/estimators/registry.py` does for
methods, so adding an experiment is one new module: its declaration, claims, figure, caption
and section. `seqq report --experiment`, the summary table's rows, `make reproduction`
(`python -m seqq.reports.reproduction.registry`), `make paper-sweeps` (`… --sweeps`) and
`make reproduction-claims` all read what is found here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from collections.abc import Sequence

import seqq.reports.reproduction.experiments as experiment_modules
from seqq.reports.reproduction.reproduce import Experiment, NotRun, OwnRows

Declared = Experiment | OwnRows | NotRun


def paper_order(title: str) -> tuple[bool, int, str]:
    """The paper's order of its figures, then its tables: "Fig. 4a" < "Figs 4b, 13" < "Figs 5,
    6" < "Table 2" < "Tables 4, 5"."""
    found = re.match(r"(Fig|Table)s?\.? (\d+)(\w?)", title)
    if not found:
        raise ValueError(f"an experiment's title names the paper's figure or table: {title!r}")
    return found[1] == "Table", int(found[2]), found[3]


def discover() -> list[Declared]:
    """The `EXPERIMENT` of every module of `experiments/`, in the paper's order."""
    found = [importlib.import_module(f"{experiment_modules.__name__}.{module.name}").EXPERIMENT
             for module in pkgutil.iter_modules(experiment_modules.__path__)]
    titles = [e.title for e in found]
    if len(set(titles)) < len(titles):
        raise ValueError(f"two experiment modules declare the same title: {sorted(titles)}")
    return sorted(found, key=lambda e: paper_order(e.title))


def summary_rows(declared: Sequence[Declared]) -> dict[str, tuple[str, str, str]]:
    """The summary table's rows by title, in the paper's order, before any export."""
    return {e.title: e.pending_row for e in declared}


def make_entries(declared: Sequence[Declared]) -> list[str]:
    """`<sweep>:<folder>:<names>:<models>` per sweep, for `make reproduction`: its experiments
    exported from one load of `<sweep>-paper/<folder>`, those that own CSVs before those that
    link them, keeping the models they reproduce on."""
    by_sweep: dict[tuple[str, str, str], list[Declared]] = {}
    for e in declared:
        if not isinstance(e, NotRun):
            kept = e.models if isinstance(e, Experiment) else e.kept
            by_sweep.setdefault((e.sweep, e.results, kept), []).append(e)
    return [f"{sweep}:{folder}:" + ",".join(
                e.name for e in sorted(group, key=lambda e: bool(getattr(e, "csv", ""))))
            + f":{kept}" for (sweep, folder, kept), group in by_sweep.items()]


def sweep_entries(declared: Sequence[Declared]) -> list[str]:
    """`<preset> <where> <overrides>` per sweep, for `make paper-sweeps`: where it runs (the
    authors' LSTMs, or datasets) and its overrides, as the experiments reading it declare them
    (they must agree)."""
    runs: dict[str, tuple[str, str]] = {}
    for e in declared:
        if isinstance(e, NotRun):
            continue
        run = (e.sweep_on, e.sweep_args)
        if runs.setdefault(e.sweep, run) != run:
            raise ValueError(f"the experiments reading the {e.sweep} sweep declare it run two "
                             f"ways: {runs[e.sweep]} and {run} ({e.title}); make them agree")
    return [f"{sweep} {on} {args}".rstrip() for sweep, (on, args) in runs.items()]


DECLARED = discover()
EXPERIMENTS = {e.name: e for e in DECLARED if isinstance(e, Experiment)}
OWN_ROWS = {e.name: e for e in DECLARED if isinstance(e, OwnRows)}
SUMMARY = summary_rows(DECLARED)

if __name__ == "__main__":  # --sweeps: `make paper-sweeps`'s list; else `make reproduction`'s
    print("\n".join(sweep_entries(DECLARED) if "--sweeps" in sys.argv[1:]
                    else make_entries(DECLARED)))
