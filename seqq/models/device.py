"""The one place that turns a `device=` setting into a torch device."""

from __future__ import annotations

import torch

from seqq.errors import ConfigError

AUTO = "auto"


def resolve_device(name: str | torch.device | None = AUTO) -> torch.device:
    """`auto` (or None): the GPU when torch sees one, else the CPU; otherwise the named device,
    refused up front when it is not a device name or not present on this machine."""
    if name is None or name == AUTO:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"device={name!r} is not a torch device; use auto, cpu or cuda") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={name} but torch sees no CUDA GPU here; use device=auto or cpu")
    return device
