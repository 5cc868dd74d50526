"""LSTM training for `seqq train`: the loop, checkpoints, and run-folder artefacts."""
