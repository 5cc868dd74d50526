"""Machinery the methods share: batches, budgets, proposals, the prefix trie, twists, summaries."""
