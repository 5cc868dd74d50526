"""`seqq train`'s work: one run per kind of model (`runs.py`: train the LSTM, fit an HPYP,
score a pretrained LM), the LSTM's training loop (`trainer.py`), held-out scoring
(`scoring.py`) and the run-folder artefacts (`artifacts.py`; the checkpoint format is the
model's: `seqq.models.checkpoint`)."""
