"""Judging a committed results CSV again (`seqq.sweeps.rejudge`): new truths per shard, stored
as computed (a rerun computes nothing), then merged into the CSV with RAEs recomputed."""

from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import compose_sweep, tiny_overrides

from seqq.data import load_dataset
from seqq.models import LSTMNet
from seqq.models.checkpoint import save_checkpoint
from seqq.reports.tables import load_results
from seqq.sweeps import rejudge, sweep


@pytest.mark.slow
def test_a_csv_judged_again_in_shards_gets_finer_truths_and_their_raes(tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = LSTMNet(vocab_size=9, hidden_size=8, num_layers=1, dropout=0.0)
    save_checkpoint(tmp_path / "ckpt" / "synthetic_reviews_lstm.pt", net,
                    load_dataset("synthetic_reviews", vocab_size=9, num_sequences=40).vocab)
    base = [o for o in tiny_overrides(tmp_path, "lm") if "model." not in o and
            "ground_truth." not in o] + [
        f"checkpoint_dir={tmp_path / 'ckpt'}", "model.device=cpu", "sweep.ks=[4]",
        "levels.S=[30]", "ground_truth.exact_max_calls=0", "ground_truth.rule=sampled",
        "ground_truth.s_low=50", "ground_truth.s_step=50", "ground_truth.s_high=4000",
        "sweep.refine_truth=null"]
    rows = load_results([str(sweep.run(compose_sweep([*base, "ground_truth.rel_tol=0.5"]))
                             / "results")])
    csv = tmp_path / "committed.csv"
    rows[["history_id", "K", "method", "estimate", "truth", "truth_kind", "truth_rel_stderr",
          "rae", "entropy"]].to_csv(csv, index=False)
    finer = [*base, "ground_truth.rel_tol=0.05"]
    computed = [rejudge.compute(csv, [*finer, "sweep.shards=2", f"sweep.shard={i}"])
                for i in (0, 1)]
    truths = rows.drop_duplicates(["history_id", "K"])
    assert sum(computed) == len(truths) and min(computed) > 0
    assert rejudge.compute(csv, [*finer, "sweep.shards=2", "sweep.shard=0"]) == 0  # stored

    assert rejudge.merge(csv, finer) == len(rows)
    merged = pd.read_csv(csv)
    assert (merged.truth_rel_stderr < 0.05).all()
    assert (merged.truth_rel_stderr < rows.truth_rel_stderr.to_numpy()).mean() > 0.8
    assert merged.truth_rule.str.contains("below 0.05").all()
    torch.testing.assert_close(torch.tensor(merged.rae.to_numpy()),
                               torch.tensor((merged.estimate / merged.truth - 1).abs().to_numpy()),
                               rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(torch.tensor(merged.estimate.to_numpy()),  # written to 6 digits
                               torch.tensor(rows.estimate.to_numpy()), rtol=1e-5, atol=0.0)
