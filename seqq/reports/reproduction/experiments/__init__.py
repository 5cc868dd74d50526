"""One module per experiment of the paper, each ending with `EXPERIMENT = ...` (its
declaration, with its claims, figure, caption and section); `registry.py` finds them all."""
