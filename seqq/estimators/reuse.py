"""Reuse across horizons (§4.3): the whole hitting-time distribution p(τ(A) = k), k = 1..K, from
one set of samples. A sample drawn from q over (V∖A)^{K−1} is, cut at k−1, a sample for horizon
k, and the last factor p(A | x_<k) is read off the same model call."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from seqq.estimators.engine.batch import prepare
from seqq.estimators.engine.categorical import Categorical
from seqq.estimators.engine.rollout import conditional, restrict
from seqq.estimators.engine.summary import segment_mean
from seqq.estimators.estimate import Estimate
from seqq.models.protocol import SequenceModel
from seqq.queries import Symbols, Vocabulary, hitting_time


@torch.inference_mode()
def hitting_time_distribution(model: SequenceModel, history: Sequence[int], a: Symbols, K: int,
                              samples: int = 1000, seed: int | None = None,
                              vocab: Vocabulary | None = None) -> list[Estimate]:
    """Estimates of p(τ(A)=k | history) for k = 1..K; costs 1 + S·(K−1) calls in all, and the
    estimate for k reports the 1 + S·(k−1) calls its prefix of the run used."""
    query = hitting_time(a, K, vocab)
    batch = prepare(model, [history], [query], seed)
    hit = batch.domain(batch.lattice.depth.new_tensor([K - 1]))[0]  # A: the chain's last node
    S = samples
    rows = torch.zeros(S, dtype=torch.long)
    log_probs = batch.root_log_probs[rows.to(batch.device)]
    state = batch.counter.select(batch.root_state, rows.to(batch.device))
    log_w = torch.zeros(S, dtype=torch.float64)  # log Π_{j<k} p(V∖A | x_<j)
    neg_log_q = torch.zeros(S, dtype=torch.float64)
    estimates = []
    for k in range(1, K + 1):
        hit_logits, log_hit = restrict(log_probs, hit.expand_as(log_probs))
        q_hit = conditional(hit_logits, log_hit)
        hit_entropy = torch.where(q_hit > -torch.inf, -q_hit.exp() * q_hit, 0.0).sum(-1).cpu()
        log_mean, var, _ = segment_mean(log_w + log_hit.double().cpu(), rows, 1)
        estimates.append(Estimate(
            method="importance", value=log_mean.exp().item(), log_value=log_mean.item(),
            stderr=var.sqrt().item() if S > 1 else None, model_calls=int(batch.counter.calls[0]),
            is_lower_bound=False, entropy=(neg_log_q + hit_entropy).mean().item(),
            num_samples=S, extras={"horizon": k}))
        if k == K:
            break
        miss = Categorical.from_logits(log_probs, (~hit).expand_as(log_probs))
        log_miss, drawn = miss.log_total(), miss.sample(batch.generator)
        log_w += log_miss.double().cpu()
        picked = log_probs.gather(1, drawn[:, None])[:, 0]
        neg_log_q -= torch.where(torch.isneginf(log_miss), 0.0, picked - log_miss).double().cpu()
        log_probs, state = batch.counter.step(state, drawn)
    return estimates
