"""seqq's benchmark suite: `make bench` (or `python -m benchmarks`) rewrites benchmarks/RESULTS.md.

Sections: (a) estimator throughput against the raw model, measured interleaved in the same run;
(b) end-to-end wall time of `make demo` and the fig3 preset; (c) how cost grows with N, S, K and
V; (d) the cost of ground truth at 1 % relative standard error; (e) the row chunks that keep
big batches at the model's best speed; (f) the paper-size run's own cost, its calls and
recorded time (`make bench-paper-run`), and a timed slice of `make fig3 SIZE=paper` on
Shakespeare with the whole projected from it (`make bench-paper-slice`: it takes minutes);
(g) where one estimate's time goes: the model's share as samples grow, and the estimator's own
time split into a fixed cost and a cost per model call; (h) calibration: how often every method's
95 % interval covers exact answers (Markov and HPYP DP, enumeration on the authors' LSTM, a
tiny GPT-2, a GRU and rare hitting times), flagged shares and median RAE per budget decade, each
run's budget drawn log-uniformly from 200 to 65,536 calls (`make calibration`, run only when
named); (i) the README's `seqq ask` examples end to end, wall
time and peak memory as a user sees them (`--sections i`); (j) rare events at long horizons;
(k) the twisted judge against exact answers and against the paper's committed truths
(`make bench-judge`); (l) the language-model path on SmolLM2-135M: its step, stock decoding,
every estimator and the judge, one process and two shards (`make bench-lm`); (m) the judge on
SmolLM2: calls per truth at equal relative SE, through the trie and rolled out, and the peak
memory of the processes that computed them (`make bench-lm-judges`).
Ratios are what to read: absolute numbers depend on the machine and on whatever else runs on it.
"""
