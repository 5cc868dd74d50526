"""The claims judged again from the committed CSVs alone (`make reproduction-claims`): where the
sweeps' results are not at hand, each experiment's panels are rebuilt from its CSVs under
docs/reproduction/, and its claims tables and its summary-table row are rewritten in the doc;
its tables, figures and the rest of its block stay as its last export wrote them. The CSVs hold
every per-query number the claims' tests read, so a referee can rerun them from git alone."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from seqq.reports.reproduction.markdown import find_block, update_summary
from seqq.reports.reproduction.panels import ModelRun
from seqq.reports.reproduction.registry import DECLARED, SUMMARY
from seqq.reports.reproduction.reproduce import Experiment, OwnRows, write_runs

CLAIMS = re.compile(r"The paper's [^\n]*? claims beside seqq's [^\n]*?:\n\n(?:\|[^\n]*\n)+")


def panels(experiment: Experiment, folder: Path) -> list[ModelRun]:
    """The experiment's panels rebuilt from `<csv>_<dataset>_<model>[_<split><v>].csv`."""
    split = re.compile(rf"_{re.escape(experiment.split)}[\d.]+$") if experiment.split else None
    files: dict[str, list[Path]] = {}
    for path in sorted(folder.glob(f"{experiment.csv_name}_*.csv")):
        slug = path.stem.removeprefix(f"{experiment.csv_name}_")
        files.setdefault(split.sub("", slug) if split else slug, []).append(path)
    runs = []
    for slug, paths in files.items():
        dataset, _, model = slug.rpartition("_")
        if experiment.datasets and dataset not in experiment.datasets:
            continue
        rows = experiment.from_csv(_as_results(pd.concat([pd.read_csv(p) for p in paths],
                                                         ignore_index=True)))
        rows = rows.assign(dataset=dataset, model=model, repeat=0, query=experiment.query,
                           budget_rule="")
        if experiment.levels is not None:
            rows = rows[rows.budget_level.isin(experiment.levels)]
        runs.append(ModelRun(dataset, model, slug, experiment.histories, rows, rows.iloc[:0]))
    return runs


def _as_results(csv: pd.DataFrame) -> pd.DataFrame:
    """A CSV's rows with the results' column names the claims read (`export.COLUMNS` reversed);
    what an experiment's own columns say more, its `from_csv` restores."""
    rows = csv.rename(columns={"S": "budget_level", "query": "label"})
    if "budget_level" not in rows:
        rows["budget_level"] = 0
    if "temperature" not in rows:
        rows["temperature"] = 1.0
    rows["options"] = "{}"
    return rows


def rejudge(experiment: Experiment, folder: Path, doc: Path) -> None:
    """Rewrite the experiment's claims tables (one per panel) and its summary row in `doc`; an
    experiment with no committed CSVs yet keeps its row."""
    runs = panels(experiment, folder)
    if not runs:
        return
    text = doc.read_text()
    start, stop = find_block(doc, experiment.block, text)
    block = text[start:stop]
    for run in runs:
        heading = block.index(f"### {run.dataset} · ")
        found = CLAIMS.search(block, heading)
        if found is None:
            raise ValueError(f"{doc}: no claims table under {run.dataset}'s heading in the "
                             f"{experiment.block} block")
        block = block[:found.start()] + experiment.claims(run) + "\n" + block[found.end():]
    doc.write_text(text[:start] + block + text[stop:])
    update_summary(doc, experiment.summary(runs),
                   {t: (t, *row) for t, row in SUMMARY.items()})


def redraw(experiment: Experiment, folder: Path, doc: Path) -> None:
    """Rewrite the experiment's whole block (tables, figures, claims) and its summary row from
    its committed CSVs: for CSVs changed without their sweep's results (Table 2's truths judged
    again, `seqq.sweeps.rejudge`)."""
    runs = panels(experiment, folder)
    if not runs:
        raise ValueError(f"no committed CSVs of {experiment.title} under {folder}")
    write_runs(experiment, runs, folder, doc, SUMMARY, csv=False)


def main(doc: Path, folder: Path, redrawn: Sequence[str] = ()) -> None:
    """Every experiment's claims judged again; those named in `redrawn` drawn again whole."""
    for experiment in DECLARED:
        if getattr(experiment, "name", None) in redrawn:
            redraw(experiment, folder, doc)
            print(f"drawn again from {folder}: {experiment.title}")
            continue
        if isinstance(experiment, Experiment):
            rejudge(experiment, folder, doc)
        elif isinstance(experiment, OwnRows):
            experiment.rejudge(folder, doc, SUMMARY)
        else:
            continue
        print(f"claims judged from {folder}: {experiment.title}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
