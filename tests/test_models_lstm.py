"""A trained tiny LSTM, loaded back from its checkpoint, passes the protocol consistency test:
step-by-step log-probs equal one full forward pass, also after `select` duplicates rows."""

from __future__ import annotations

import torch

from seqq.data import load_dataset
from seqq.models.checkpoint import load_checkpoint
from seqq.models.lstm import LSTMNet
from seqq.models.protocol import SequenceModel
from seqq.training.trainer import Trainer, TrainerConfig


def full_forward(net: LSTMNet, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return torch.log_softmax(net(torch.tensor([ids]))[0][0].float(), -1)


def test_trained_lstm_steps_match_full_forward(tmp_path):
    ds = load_dataset("synthetic_moocs", num_sequences=50, max_length=25)
    torch.manual_seed(0)
    net = LSTMNet(ds.vocab_size, hidden_size=24, num_layers=2, dropout=0.3)
    cfg = TrainerConfig(batch_size=16, max_epochs=1, steps_per_epoch=5, eval_windows=20,
                        progress=False, device="cpu")
    Trainer(ds, net, cfg, window=15, stride=1, best_path=tmp_path / "m.pt",
            last_path=tmp_path / "m.last.pt", log=lambda _: None).run()
    model, vocab = load_checkpoint(tmp_path / "m.pt", device="cpu")
    assert isinstance(model, SequenceModel) and vocab == ds.vocab
    assert not model.net.training  # dropout off for queries

    histories = [ds.test[0][:7], ds.test[1][:3], ds.test[2][:1]]  # different lengths
    logp, state = model.initial_state(histories)
    index = torch.tensor([1, 0, 1, 2])
    logp, state = logp[index], model.select(state, index)
    paths = [list(histories[i]) for i in index.tolist()]
    g = torch.Generator().manual_seed(0)
    for _ in range(4):
        for row, path in enumerate(paths):
            assert torch.allclose(logp[row], full_forward(model.net, path)[-1], atol=1e-5)
        tokens = torch.randint(1, ds.vocab_size, (len(paths),), generator=g)
        logp, state = model.step(state, tokens)
        for path, t in zip(paths, tokens.tolist(), strict=True):
            path.append(t)
    for row, path in enumerate(paths):
        assert torch.allclose(logp[row], full_forward(model.net, path)[-1], atol=1e-5)
