"""The prefix trie: residual masses (UniqueRandomizer's Fig. 2), WOR draws that follow the
sequential without-replacement law, and removal that keeps masses exact."""

import math

import pytest
import torch
from oracles import PrefixRecording, WithoutConcat, random_markov, tiny_gpt2, tiny_lstm

from seqq import queries as Q
from seqq.estimators.engine.batch import prepare
from seqq.estimators.engine.categorical import logsumexp_
from seqq.estimators.engine.trie import Trie
from seqq.estimators.engine.trie.gumbel import top_per_group, top_truncated_gumbel
from seqq.estimators.engine.trie.residual import (
    changed_children,
    residual_masses,
    residual_proposal,
)
from seqq.estimators.engine.trie.row_blocks import RowBlocks
from seqq.estimators.engine.trie.without_replacement import top_children
from seqq.models import MarkovModel
from seqq.models.batching import set_chunk_rows

PAD = 3


class Fig2Program:
    """004's Fig. 2 program as a sequence model over {0, 1, 2, PAD}, padded to length 4: a length
    index i ~ [0.5, 0.4, 0.1], then i middle bits ~ [0.75, 0.25], then a final bit ~ [0.1, 0.9]."""

    vocab_size = 4

    def _log_probs(self, prefix: tuple) -> torch.Tensor:
        if not prefix:
            probs = [0.5, 0.4, 0.1, 0.0]
        elif len(prefix) <= prefix[0]:
            probs = [0.75, 0.25, 0.0, 0.0]
        elif len(prefix) == prefix[0] + 1:
            probs = [0.1, 0.9, 0.0, 0.0]
        else:
            probs = [0.0, 0.0, 0.0, 1.0]
        return torch.tensor(probs, dtype=torch.float64).log()

    def initial_state(self, histories):
        return torch.stack([self._log_probs(()) for _ in histories]), [() for _ in histories]

    def step(self, state, tokens):
        state = [p + (int(t),) for p, t in zip(state, tokens.tolist(), strict=True)]
        return torch.stack([self._log_probs(p) for p in state]), state

    def select(self, state, index):
        return [state[i] for i in index.tolist()]

    def concat(self, states):
        return [p for s in states for p in s]


def fig2_trie(replicas: int = 1, seed: int = 0) -> Trie:
    query = Q.product([None, None, None, [0, 1, PAD]])  # restricted last position: length 4,
    # and q = p because symbol 2 has probability 0 there
    return Trie(prepare(Fig2Program(), [[0]] * replicas, [query] * replicas, seed))


def path_node(trie: Trie, path: list[int]) -> int:
    node = torch.tensor([0])
    for depth, token in enumerate(path):
        if depth:
            trie.expand(depth, node)
        node = trie.child_nodes(depth, node, torch.tensor([token]))
    return int(node)


def test_fig2_masses_after_removing_the_first_trace():
    trie = fig2_trie()
    leaf = path_node(trie, [1, 0, 1, PAD])
    assert math.exp(trie.levels[4].log_q[leaf]) == pytest.approx(0.27)
    trie.remove([(4, torch.tensor([leaf]))])
    assert math.exp(trie.root_residual()[0]) == pytest.approx(0.73)
    children = trie.residual_logits(0, torch.tensor([0])).exp()[0]
    assert children.tolist() == pytest.approx([0.5, 0.13, 0.1, 0.0])


def test_removing_every_trace_empties_the_trie_exactly():
    trie = fig2_trie()
    traces = [[0, b, PAD, PAD] for b in (0, 1)]
    traces += [[1, m, b, PAD] for m in (0, 1) for b in (0, 1)]
    traces += [[2, m1, m2, b] for m1 in (0, 1) for m2 in (0, 1) for b in (0, 1)]
    assert len(traces) == 14
    leaves = torch.tensor([path_node(trie, t) for t in traces])
    total = torch.logsumexp(trie.levels[4].log_q[leaves], 0).exp().item()
    assert total == pytest.approx(1.0, abs=1e-12)
    trie.remove([(4, leaves[:7])])
    assert math.exp(trie.root_residual()[0]) == pytest.approx(
        1 - torch.logsumexp(trie.levels[4].log_q[leaves[:7]], 0).exp().item(), rel=1e-12)
    trie.remove([(4, leaves[7:])])
    assert trie.root_residual()[0] == -math.inf


def test_wor_draws_follow_the_sequential_law():
    # P(s1 = a, s2 = b) = q_a · q_b / (1 − q_a): check both marginals over many replicas
    R = 4000
    trie = fig2_trie(R, seed=3)
    depths, leaves, branch = trie.sample_without_replacement(torch.full((R,), 2))
    assert torch.equal(torch.bincount(branch, minlength=R), torch.full((R,), 2))
    q = trie.node_values(depths, leaves, "log_q").exp().view(R, 2)
    first_mass = q[:, 0]
    # E[q(s1)] = Σ q², E[q(s2)] = Σ_a q_a Σ_{b≠a} q_b² / (1 − q_a), with the 14 trace masses
    masses = torch.tensor([0.5 * 0.1, 0.5 * 0.9] + [0.4 * m * f for m in (0.75, 0.25)
                                                   for f in (0.1, 0.9)]
                          + [0.1 * m1 * m2 * f for m1 in (0.75, 0.25) for m2 in (0.75, 0.25)
                             for f in (0.1, 0.9)], dtype=torch.float64)
    assert masses.sum().item() == pytest.approx(1.0)
    second = sum(a * ((masses**2).sum() - a**2) / (1 - a) for a in masses)
    for observed, expected in ((first_mass, (masses**2).sum()), (q[:, 1], second)):
        se = observed.std() / math.sqrt(R)
        assert abs(observed.mean() - expected) <= 4 * se
    assert (q[:, 0] != q[:, 1]).any() and not (leaves.view(R, 2)[:, 0] == leaves.view(R, 2)[:, 1]).any()


def test_residual_walks_follow_q_without_the_removed_traces():
    """After removing two traces, i.i.d. residual walks (touched nodes from their residual,
    untouched ones from their proposal) hit each other trace with its share of the rest of q
    (χ² over the 12 traces left) and never a removed one."""
    trie = fig2_trie()
    traces = [[0, b, PAD, PAD] for b in (0, 1)]
    traces += [[1, m, b, PAD] for m in (0, 1) for b in (0, 1)]
    traces += [[2, m1, m2, b] for m1 in (0, 1) for m2 in (0, 1) for b in (0, 1)]
    leaves = torch.tensor([path_node(trie, t) for t in traces])
    removed = torch.tensor([1, 3])  # [0, 1, PAD, PAD] and [1, 0, 1, PAD]: q = 0.45 and 0.27
    trie.remove([(4, leaves[removed])])
    rows = 20_000
    depth, leaf = trie.walk(torch.zeros(rows, dtype=torch.long), policy="residual")
    assert bool((depth == 4).all())
    counts = (leaf[:, None] == leaves[None]).sum(0).double()
    assert counts.sum() == rows and counts[removed].sum() == 0
    left = torch.ones(len(traces), dtype=torch.bool)
    left[removed] = False
    q = trie.levels[4].log_q[leaves].exp()
    expected = q[left] / q[left].sum() * rows
    statistic = float(((counts[left] - expected) ** 2 / expected).sum())
    assert statistic < 35.0  # χ² with 11 degrees of freedom: P(> 35) ≈ 2.5e-4


def test_wor_draws_never_repeat_across_rounds_and_exhaust_q():
    model = random_markov(4, 1, seed=2)
    trie = Trie(prepare(model, [[0]], [Q.hitting_time(1, 3)], seed=0))  # 3·3 = 9 paths
    seen = []
    for _ in range(5):
        depths, leaves, _ = trie.sample_without_replacement(torch.tensor([2]))
        trie.remove([(3, leaves)])
        seen += leaves.tolist()
    assert len(seen) == len(set(seen)) == 9
    assert trie.root_residual()[0] == -math.inf


def test_top_per_group_matches_a_full_sort():
    """The WOR rounds' selection: each group's `count[g]` largest finite values, grouped by g
    and in decreasing order, whatever order the groups arrive in."""
    generator = torch.Generator().manual_seed(0)
    for trial in range(50):
        n, groups = 1 + trial * 3, 1 + trial % 4
        values = torch.randn(n, generator=generator, dtype=torch.float64)
        values[torch.rand(n, generator=generator) < 0.3] = -math.inf
        group = torch.randint(groups, (n,), generator=generator)
        count = torch.randint(0, 8, (groups,), generator=generator)
        expected = [i for g in range(groups) for i in sorted(
            (i for i in range(n) if group[i] == g and math.isfinite(values[i])),
            key=lambda i: -values[i])[:int(count[g])]]
        assert top_per_group(values, group, count).tolist() == expected


def test_levels_grown_by_many_small_walks_stay_consistent():
    """Walks append nodes and rows to shared levels (growing buffers, lookup keys merged in):
    after many small walks every field has one entry per node / expanded row, no (parent,
    symbol) is stored twice, the lookup order is the sorted keys, and each row's cached
    log p(V_k | prefix) matches its log-probs."""
    model = random_markov(5, 1, seed=1)
    query = Q.hitting_time(2, 4)
    batch = prepare(model, [[0], [1]], [query, query], seed=0)
    trie = Trie(batch)
    for _ in range(8):
        trie.walk(torch.tensor([0, 1, 1]))
    for level in trie.levels[1:]:
        nodes = (level.branch, level.lattice_node, level.parent, level.token, level.log_p,
                 level.log_q, level.log_w, level.log_m, level.row)
        assert {len(x) for x in nodes} == {level.size}
        expanded = level.row[level.row >= 0]
        assert sorted(expanded.tolist()) == list(range(len(level.log_probs)))
        assert {len(x) for x in (level.log_mass, level.chunk, level.index)} == {len(expanded)}
        keys = level.parent * model.vocab_size + level.token
        assert len(torch.unique(keys)) == level.size
        if level.keys is not None:
            assert torch.equal(level.keys, torch.sort(keys).values)
            assert torch.equal(keys[level.order], level.keys)
        open_nodes = (level.row >= 0).nonzero().flatten()
        allowed = batch.domain(level.lattice_node[open_nodes])
        log_probs = level.log_probs.index_select(level.row[open_nodes]).double()
        expected = torch.logsumexp(torch.where(allowed, log_probs, -torch.inf), -1)
        torch.testing.assert_close(level.log_mass[level.row[open_nodes]], expected)


def test_each_prefix_costs_one_model_call_whatever_draws_reach_it():
    """Rounds without replacement, walks from q and walks from the residual share the trie's
    expanded prefixes: the model evaluates each prefix once (a recording wrapper sees no
    prefix twice), one evaluation per expanded node, as the batch's counter says; once every
    prefix of Q's tree is expanded, further draws call the model no more."""
    model = PrefixRecording(random_markov(3, 1, seed=4))
    trie = Trie(prepare(model, [[0], [2]], [Q.hitting_time(1, 3)] * 2, seed=0))
    depths, leaves, _ = trie.sample_without_replacement(torch.tensor([4, 4]))  # every path
    assert bool((depths == 3).all()) and len(leaves) == 8
    expanded = sum(int((level.row >= 0).sum()) for level in trie.levels)
    assert expanded == model.rows == 2 + 2 * (2 + 4) and model.distinct()
    assert int(trie.batch.task_calls().sum()) == model.rows
    trie.walk(torch.arange(2).repeat(50))
    trie.remove([(3, leaves[:3])])
    trie.walk(torch.arange(2).repeat(50), policy="residual")
    trie.sample_without_replacement(torch.tensor([2, 2]))
    assert model.rows == expanded and model.distinct()


def test_rows_at_distinct_nodes_draw_from_their_own_node():
    """Deep in a walk every row is at its own node, and the walk draws one symbol per node and
    hands it to that node's row. A Markov chain that picks x1 uniformly, then x2 = f(x1) with
    probability ≈ 1, shows any row that got another node's draw: its x2 is not f(x1)."""
    V = 30
    f = torch.tensor([0] + [(c * 7) % (V - 1) + 1 for c in range(1, V)])
    transition = torch.full((V, V), 1e-12, dtype=torch.float64)
    transition[0, 1:] = 1.0
    transition[torch.arange(1, V), f[1:]] = 1.0
    model = MarkovModel(transition, order=1)
    query = Q.product([None, list(range(1, V))])
    shuffled = 0
    for seed in range(12):
        trie = Trie(prepare(model, [[0]], [query], seed))
        depth, leaf = trie.walk(torch.zeros(8, dtype=torch.long))
        assert (depth == 2).all()
        x1 = trie.levels[1].token[trie.levels[2].parent[leaf]]
        assert torch.equal(trie.levels[2].token[leaf], f[x1])
        distinct = len(torch.unique(x1)) == len(x1)
        shuffled += distinct and not bool((x1[1:] > x1[:-1]).all())
    assert shuffled >= 2  # walks whose rows were at distinct nodes, out of the nodes' order


def test_row_blocks_read_like_the_joined_matrix():
    """Rows kept as blocks (of mixed dtypes, one empty) read exactly as the concatenated
    matrix would, in any row order and with repeats."""
    generator = torch.Generator().manual_seed(0)
    parts = [torch.randn(n, 5, generator=generator) for n in (3, 0, 1, 4)]
    parts[2] = parts[2].double()
    blocks = RowBlocks(parts[0])
    for part in parts[1:]:
        blocks.append(part)
    joined = torch.cat(parts)
    rows = torch.tensor([7, 0, 3, 3, 5, 2, 7])
    columns = torch.tensor([0, 4, 1, 2, 3, 0, 4])
    assert len(blocks) == len(joined) == 8
    assert torch.equal(blocks.index_select(rows), joined[rows])
    assert torch.equal(blocks.pick(rows, columns), joined[rows, columns])
    assert torch.equal(blocks.whole(), joined)
    assert blocks.index_select(torch.zeros(0, dtype=torch.long)).shape == (0, 5)


@pytest.mark.parametrize("removed", [False, True], ids=["untouched", "touched"])
def test_top_children_from_float32_weights_match_the_float64_residual_rows(removed):
    """Below half the vocabulary, a node takes its block masses from its residual's float32
    weights (its proposal's, with each changed child's set to its residual) and builds only
    the opened blocks' logits. With the same noise that gives the top k of its float64
    residual row: the same symbols, the same keys up to float32 rounding of the weights;
    and a removed leaf is never among them."""
    model = random_markov(300, 1, seed=5)
    trie = Trie(prepare(model, [[0], [7]], [Q.hitting_time(3, 4)] * 2, seed=0))
    depth, k = 1, 60  # 60 of 150 blocks of 2 symbols are opened
    nodes = trie.child_nodes(0, torch.tensor([0, 0, 1]), torch.tensor([4, 250, 9]))
    trie.expand(depth, nodes)
    if removed:  # the 3 likeliest children of each node; of the first, one subtree only
        best = trie.residual_logits(depth, nodes).topk(3, -1).indices
        children = trie.child_nodes(depth, nodes.repeat_interleave(3), best.flatten())
        trie.expand(depth + 1, children[:1])
        grandchild = trie.child_nodes(depth + 1, children[:1], torch.tensor([5]))
        trie.remove([(depth + 1, children[1:]), (depth + 2, grandchild)])
        assert len(changed_children(trie, depth, nodes)[0]) == 9
    bound = torch.tensor([-0.5, -2.0, -1.0], dtype=torch.float64)
    trie.batch.generator.manual_seed(11)
    top, token = top_children(trie, depth, nodes, bound, k)
    logits = trie.residual_logits(depth, nodes)
    expected, expected_token = top_truncated_gumbel(logits, bound,
                                                    torch.Generator().manual_seed(11), k)
    assert torch.equal(token, expected_token)
    torch.testing.assert_close(top, expected, rtol=0, atol=1e-5)
    assert not bool(torch.isin(token, torch.tensor([3])).any())  # the hit ends, not allowed
    if removed:
        assert not (token[:, None, :] == best[:, 1:, None]).any()  # removed: never drawn


def _share_of_changed_children(trie: Trie, depth: int) -> torch.Tensor:
    """[nodes at depth] the share of each node's q that its changed children (a leaf removed
    at or below them) hold, from the public node fields."""
    level, child = trie.levels[depth], trie.levels[depth + 1]
    changed = trie.removed_below.get(depth + 1, torch.zeros(0, dtype=torch.long))
    parent = child.parent[changed]
    return torch.zeros(level.size, dtype=torch.float64).index_add_(
        0, parent, (child.log_q[changed] - level.log_q[parent]).exp())


def test_residual_masses_are_the_sums_of_the_residual_rows():
    """`remove` finds each parent's residual without building its float64 row: q(node) less
    its changed children's share where that share is at most ½, else by sums over the row. It
    must equal log Σ exp of `residual_logits` at every expanded node to 1e-12 relative mass
    (so log values to 1e-12 absolute), over a vocabulary large enough for the excluded-symbol
    domain, at a root whose domain holds almost no mass, and at nodes all of whose allowed
    children have been removed (mass exactly 0). Nodes with shares on both sides of ½ are
    checked, so both ways are taken; the masses `remove` stored are the ones checked."""
    V = 600
    model = MarkovModel(torch.rand(V, V, generator=torch.Generator().manual_seed(0)) + 0.01, 1)
    model.log_table[7] = -800.0  # after symbol 7, the query's excluded symbol 2 takes all but
    model.log_table[7, 2] = 0.0  # e^-800 (float64 exp underflows the other symbols to 0)
    batch = prepare(model, [[0], [7]], [Q.hitting_time(2, 3)] * 2, seed=0)
    trie = Trie(batch)
    for _ in range(3):
        depths, leaves, _ = trie.sample_without_replacement(torch.tensor([50, 50]))
        trie.remove([(int(d), leaves[depths == d]) for d in torch.unique(depths)])
    checked, shares = 0, []
    for depth, level in enumerate(trie.levels[:-1]):
        nodes = (level.row >= 0).nonzero().flatten()
        if not len(nodes):
            continue
        expected = logsumexp_(trie.residual_logits(depth, nodes)).cpu()
        for got in (residual_masses(trie, depth, nodes), level.log_m[nodes]):
            assert torch.equal(torch.isneginf(got), torch.isneginf(expected))
            finite = torch.isfinite(expected)
            torch.testing.assert_close(got[finite], expected[finite], rtol=0, atol=1e-12)
        shares.append(_share_of_changed_children(trie, depth)[nodes])
        checked += len(nodes)
    assert checked > 100
    share = torch.cat(shares)
    assert bool((share > 0.5).any()) and bool(((share > 0) & (share <= 0.5)).any())
    assert trie.levels[0].log_mass[1] < -700  # the root whose domain holds almost no mass
    # the last step allows only symbol 2: a depth-2 node's one leaf removed leaves it empty
    assert (trie.levels[2].log_m[trie.levels[2].row >= 0] == -math.inf).all()


def test_a_residual_beyond_float64_exp_is_summed_from_its_float64_row():
    """A root whose domain holds e^-800 of p (each of its weights underflows float64's exp)
    and whose changed children hold over half its q: its residual can be found neither as a
    difference nor as a sum of unshifted weights, and comes from its float64 residual row,
    exact and finite."""
    V = 300
    model = MarkovModel(torch.ones(V, V), 1)
    model.log_table[7] = -800.0
    model.log_table[7, 2] = 0.0
    trie = Trie(prepare(model, [[7]], [Q.hitting_time(2, 2)], seed=0))  # x1 ≠ 2, then x2 = 2
    depths, leaves, _ = trie.sample_without_replacement(torch.tensor([200]))
    assert bool((depths == 2).all()) and len(leaves) == 200
    trie.remove([(2, leaves)])
    assert trie.levels[0].log_mass[0] < -745  # below float64 exp's range
    assert float(_share_of_changed_children(trie, 0)[0]) > 0.5
    expected = logsumexp_(trie.residual_logits(0, torch.tensor([0]))).cpu()
    assert math.isfinite(trie.root_residual()[0])
    torch.testing.assert_close(trie.root_residual(), expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(trie.root_residual().exp(),
                               torch.tensor([99 / 299], dtype=torch.float64), rtol=1e-12, atol=0)


class _Float32:
    """A model wrapped to return float32 log-probabilities, as neural models do."""

    def __init__(self, model):
        self.model, self.vocab_size = model, model.vocab_size

    def initial_state(self, histories):
        log_probs, state = self.model.initial_state(histories)
        return log_probs.float(), state

    def step(self, state, tokens):
        log_probs, state = self.model.step(state, tokens)
        return log_probs.float(), state

    def select(self, state, index):
        return self.model.select(state, index)


def test_residuals_below_float32_are_drawn_from_float64_rows():
    """After removing a node's dominant child, its other children hold e^-120 of its mass:
    their float32 weights underflow, so its draws and top children come from the float64
    residual row, never from the removed child and never empty."""
    V = 300
    markov = MarkovModel(torch.ones(V, V), 1)
    markov.log_table[7] = -120.0
    markov.log_table[7, 9] = 0.0
    trie = Trie(prepare(_Float32(markov), [[7]], [Q.hitting_time(3, 3)], seed=0))
    root = torch.tensor([0])
    child = trie.child_nodes(0, root, torch.tensor([9]))
    trie.remove([(1, child)])
    assert residual_proposal(trie, 0, root) is None and math.isfinite(trie.root_residual()[0])
    keys, token = top_children(trie, 0, root, torch.zeros(1, dtype=torch.float64), 10)
    assert torch.isfinite(keys).all() and not (token == 9).any()
    depths, leaves = trie.walk(torch.zeros(200, dtype=torch.long), policy="residual")
    assert (leaves >= 0).all() and (depths == 3).all()
    node = leaves
    for depth in (3, 2):
        node = trie.levels[depth].parent[node]
    assert not (trie.levels[1].token[node] == 9).any()


@pytest.mark.parametrize("network", [tiny_lstm, tiny_gpt2])
@pytest.mark.parametrize("joinable", [True, False])
def test_expansions_across_state_chunks_continue_their_own_prefixes(network, joinable):
    """Walks in many rounds, stepped in chunks of 3 rows, leave each level's states in many
    chunks, and expansions gather their parents from several of them. Every expanded node's
    log-probs must be the model's own p(· | history, prefix), with and without `concat`
    (an LSTM's hidden states, GPT-2's KV caches)."""
    net_model = network(V=4, seed=3)
    joins = []
    if joinable:
        model = net_model
        concat = model.concat
        model.concat = lambda states: joins.append(len(states)) or concat(states)
    else:
        model = WithoutConcat(net_model)
    set_chunk_rows(model, 3)
    history = [1, 2]
    batch = prepare(model, [history], [Q.hitting_time(0, 4)], seed=0)
    trie = Trie(batch)
    for _ in range(8):
        trie.walk(torch.zeros(9, dtype=torch.long))
    assert max(len(level.chunks) for level in trie.levels[1:]) > 3
    assert not joinable or max(joins) > 1  # some chunk gathered rows of several states
    checked = 0
    for depth, level in enumerate(trie.levels[1:], start=1):
        expanded = (level.row >= 0).nonzero().flatten()
        for node in expanded.tolist():
            prefix, at = [], node
            for d in range(depth, 0, -1):
                prefix.append(int(trie.levels[d].token[at]))
                at = int(trie.levels[d].parent[at])
            expected, _ = net_model.initial_state([history + prefix[::-1]])
            row = level.log_probs.index_select(level.row[[node]])
            torch.testing.assert_close(row, expected, rtol=1e-4, atol=1e-4)
            checked += 1
    assert checked >= 20
