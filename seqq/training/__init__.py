"""LSTM training for `seqq train`: the loop and the run-folder artefacts (the checkpoint format
is the model's: `seqq.models.checkpoint`)."""
