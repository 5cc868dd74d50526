"""(m) Judges on SmolLM2: what a ground truth of a given precision costs at V = 49,152.

Read from a `large_lm` sweep folder whose truths the trie judge computed (`rule=sampled`:
importance sampling through the prefix trie held within its byte cap, `seqq.sweeps.rejudge`
or the sweep itself), with the peak memory its processes recorded (`runs.jsonl`). Both judges
draw i.i.d. paths from the same restricted proposal, so at the same number of samples their
relative standard errors are equal in distribution; only their calls differ. The rolled-out
rule (`sampled` before the trie, paths rolled out one by one) pays K − 1 calls a path (and one
for the history), the trie pays each distinct prefix once. So each truth gives both costs at
its own relative SE, and, scaled by (SE / target)² — linear in samples, which overstates the
trie's (its calls grow more slowly than its samples) — at the target's.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import pandas as pd

from benchmarks.report import Section, table
from seqq.results.store import read_parts

TARGET = 0.025  # the relative SE Table 2's truths are judged to (issue 57)
LABEL = re.compile(r"=(\d+)$")  # tau(a)=K


def truths(sweep: Path) -> pd.DataFrame:
    """The sweep's importance-sampled truths with their K, trie calls and rolled-out calls."""
    files = glob.glob(str(sweep / "ground_truth" / "*.parquet"))
    if not files:
        raise FileNotFoundError(f"no ground truth under {sweep}; run the sweep or "
                                "`python -m seqq.sweeps.rejudge` first")
    rows = read_parts(files).drop_duplicates()  # old parts' truth kinds read as today's
    # (the committed file of re-judged truths lies beside the parts it was consolidated from)
    rows = rows[(rows.kind == "estimated") & (rows.samples > 0)].copy()
    rows["K"] = rows.label.str.extract(LABEL, expand=False).astype(int)
    rows["rolled_out"] = (rows.K - 1) * rows.samples + 1
    scale = (rows.rel_stderr / TARGET) ** 2
    rows["trie_at_target"] = rows.model_calls * scale
    rows["rolled_out_at_target"] = (rows.K - 1) * rows.samples * scale + 1
    return rows


def peak_memory(sweep: Path) -> pd.DataFrame:
    """Each recorded invocation's peak memory and time."""
    path = sweep / "runs.jsonl"
    if not path.exists():
        return pd.DataFrame()
    runs = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines() if line])
    return runs[runs.get("peak_rss_gb", pd.Series(dtype=float)).notna()] if "peak_rss_gb" in runs \
        else pd.DataFrame()


def run(sweep: Path) -> Section:
    rows = truths(sweep)
    body = [__doc__.split(") ", 1)[1].strip(), "", f"Sweep folder: `{sweep}`.", ""]
    per_k = []
    for K, part in rows.groupby("K"):
        ratio = part.rolled_out_at_target / part.trie_at_target
        per_k.append([K, len(part), f"{part.samples.median():,.0f}",
                      f"{part.rel_stderr.median():.4f}", int((part.rel_stderr > 0.2).sum()),
                      f"{part.model_calls.median():,.0f}", f"{part.rolled_out.median():,.0f}",
                      f"{(part.rolled_out / part.model_calls).median():.2f}×",
                      f"{part.trie_at_target.median():,.0f}",
                      f"{part.rolled_out_at_target.median():,.0f}", f"{ratio.median():.2f}×",
                      int((part.samples >= 100_000).sum())])
    body += table(["K", "truths", "samples (median)", "relative SE (median)", "above 20 %",
                   "trie calls (median)", "rolled-out calls, same samples (median)",
                   "rolled-out / trie (median)", f"trie calls at {TARGET:.1%} SE (median)",
                   f"rolled-out calls at {TARGET:.1%} SE (median)", "ratio at equal SE",
                   "truths at 100,000 samples"], per_k)
    runs = peak_memory(sweep)
    if not runs.empty:
        body += ["", "Processes (`runs.jsonl`):", "",
                 *table(["tag", "commit", "status", "threads", "wall", "CPU", "truths computed",
                         "peak memory"],
                        [[r.get("tag"), str(r.get("git_commit", ""))[:7], r.get("status"),
                          r.get("threads"),
                          f"{r.get('wall_s', 0):,.0f} s", f"{r.get('cpu_s', 0):,.0f} s",
                          r.get("truths_computed", "-"), f"{r['peak_rss_gb']:.2f} GB"]
                         for r in runs.to_dict("records")])]
    return Section("m", "Judges on SmolLM2: calls at equal relative SE, peak memory", body)
