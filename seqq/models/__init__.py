"""Autoregressive models behind one batched protocol (`SequenceModel`)."""

from seqq.models.counting import CallCounter
from seqq.models.lstm import LSTMModel, LSTMNet
from seqq.models.markov import MarkovModel
from seqq.models.protocol import SequenceModel, State
from seqq.models.temperature import TemperatureModel

__all__ = [
    "CallCounter",
    "LSTMModel",
    "LSTMNet",
    "MarkovModel",
    "SequenceModel",
    "State",
    "TemperatureModel",
]
