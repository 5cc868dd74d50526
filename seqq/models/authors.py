"""The paper authors' trained LSTMs, shipped with seqq (`seqq/resources/models/authors/`, MIT
licence, see its README), so `model=authors` works from any directory.

Their checkpoints are plain `state_dict`s of a one-hot-input 2-layer LSTM (`rnn.*`) with a linear
head (`out_transform.*`). One-hot input times the first layer's weights is a column lookup, so an
`LSTMNet` whose embedding is the identity matrix computes exactly the authors' network; the
weights are copied into one and served by the same `LSTMModel` adapter as seqq's own LSTMs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from seqq.errors import ModelLoadError
from seqq.models.lstm import LSTMModel, LSTMNet
from seqq.paths import shipped

AUTHORS_DIR = shipped("models/authors")
AUTHORS_DATASETS = ("shakespeare", "moocs")
HIDDEN_SIZE, NUM_LAYERS, DROPOUT = 128, 2, 0.3  # the authors' training setup


def vocab_file(dataset: str, root: str | Path = AUTHORS_DIR) -> Path:
    """The JSON list of the symbols of the authors' `dataset` model, id = position."""
    return Path(root) / f"{dataset}_vocab.json"


def authors_files(dataset: str, root: str | Path = AUTHORS_DIR) -> tuple[Path, Path]:
    """(weights, vocabulary) files of the authors' model for `dataset`, checked to exist."""
    if dataset not in AUTHORS_DATASETS:
        raise ModelLoadError(f"the paper authors published no model for dataset {dataset!r}; "
                             f"model=authors exists for {', '.join(AUTHORS_DATASETS)}")
    files = Path(root) / f"authors_{dataset}_lstm.pt", vocab_file(dataset, root)
    for path in files:
        if not path.is_file():
            raise ModelLoadError(f"{path} not found; set model.root to the folder holding the "
                                 f"authors' models (seqq ships them in {AUTHORS_DIR})")
    return files


def authors_vocab(dataset: str, root: str | Path = AUTHORS_DIR) -> list[str]:
    """The symbols of the authors' `dataset` model by id (`<BOS>` included)."""
    return json.loads(authors_files(dataset, root)[1].read_text(encoding="utf-8"))


def _net(state: dict[str, torch.Tensor], vocab_size: int, path: Path) -> LSTMNet:
    net = LSTMNet(vocab_size, HIDDEN_SIZE, NUM_LAYERS, DROPOUT, embedding_size=vocab_size)
    renamed = {("lstm." + k[len("rnn."):] if k.startswith("rnn.") else
                "head." + k[len("out_transform."):] if k.startswith("out_transform.") else k): v
               for k, v in state.items()}
    renamed["embed.weight"] = torch.eye(vocab_size)  # one-hot input
    try:
        net.load_state_dict(renamed)
    except RuntimeError as e:
        raise ModelLoadError(f"{path} is not an authors' LSTM with a {vocab_size}-symbol "
                             f"vocabulary: {str(e).splitlines()[0]}") from e
    return net


def load_authors(dataset: str, root: str | Path = AUTHORS_DIR,
                 device: str | torch.device | None = None,
                 vocab: Sequence[str] | None = None) -> LSTMModel:
    """The authors' LSTM for `dataset`; pass the dataset's `vocab` to check that its ids mean
    the model's symbols."""
    weights, _ = authors_files(dataset, root)
    symbols = authors_vocab(dataset, root)
    if vocab is not None and list(vocab) != symbols:
        raise ModelLoadError(
            f"the dataset's {len(vocab)}-symbol vocabulary is not the authors' {dataset} "
            f"vocabulary ({len(symbols)} symbols, <BOS> = {symbols.index('<BOS>')}); load the "
            f"dataset with dataset.options.vocab={vocab_file(dataset, root)} (model=authors "
            "sets it)")
    state = torch.load(weights, map_location="cpu", weights_only=True)
    return LSTMModel(_net(state, len(symbols), weights), device, vocab=symbols)

