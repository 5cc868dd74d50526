"""What a training run leaves in its folder besides its provenance: metrics CSV and loss curve."""

from __future__ import annotations

import csv
from pathlib import Path


def write_metrics(rows: list[dict], path: Path) -> None:
    if not rows:
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot_curves(rows: list[dict], path: Path, title: str) -> None:
    """Loss and accuracy per epoch, with the unigram baseline the model must beat."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    if not rows:
        return
    epochs = [r["epoch"] for r in rows]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, [r["train_loss"] for r in rows], "o-", label="train")
    ax_loss.plot(epochs, [r["val_loss"] for r in rows], "o-", label="validation")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy (nats)", title="loss")
    ax_acc.plot(epochs, [r["train_accuracy"] for r in rows], "o-", label="train")
    ax_acc.plot(epochs, [r["val_accuracy"] for r in rows], "o-", label="validation")
    ax_acc.axhline(rows[0]["unigram_accuracy"], color="gray", ls="--", label="unigram baseline")
    ax_acc.set(xlabel="epoch", ylabel="next-symbol accuracy", title="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.legend()
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
