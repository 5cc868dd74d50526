"""Fig. 1: a large language model's hitting time of the end of a sentence (GPT-2 in the paper;
seqq's stand-in SmolLM2-135M), not run here yet."""

from __future__ import annotations

from seqq.reports.reproduction.reproduce import NotRun

EXPERIMENT = NotRun(
    title="Fig. 1", models="GPT-2 (seqq: SmolLM2-135M)",
    why=("not run: it needs no ground truth, but SmolLM2 steps ~100 rows/s on one CPU "
         "thread here, ~1 h per run of IS and naive sampling over K ≤ 30 on 4 prefixes "
         "and tens of runs for a variance; the protocol (end-of-sentence hitting time) "
         "waits for a GPU"))
