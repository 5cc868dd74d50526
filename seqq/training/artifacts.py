"""What a run leaves in its folder: metrics CSV, loss curve, and the facts needed to redo it."""

from __future__ import annotations

import csv
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("seqq", "torch", "numpy", "pandas", "transformers", "hydra-core", "omegaconf")


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
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_run_info(path: Path, **facts) -> None:
    info = dict(facts, versions=versions(), git_commit=git_commit(), host=platform.node())
    path.write_text(json.dumps(info, indent=2, default=str) + "\n")
