"""One GPU per `gpu` worker, enforced: a worker runs its jobs one at a time on the device it
sees, so a worker that sees several (no `CUDA_VISIBLE_DEVICES` choice) would leave all but one
idle and its boots' provenance ambiguous. It refuses to start, saying how to start one per device.
Torch-free until the device count is asked for."""

from __future__ import annotations


def refusal(device_count: int, visible: str | None) -> str | None:
    """Why a gpu worker seeing `device_count` devices must not start, or None when it may."""
    if device_count <= 1:
        return None
    ids = [d.strip() for d in visible.split(",")] if visible else [str(i) for i in range(device_count)]
    chosen = f"CUDA_VISIBLE_DEVICES={visible}" if visible else "CUDA_VISIBLE_DEVICES is not set"
    starts = "\n".join(f"  CUDA_VISIBLE_DEVICES={i} ./dev worker --queues gpu" for i in ids)
    return (
        f"this gpu worker sees {device_count} CUDA devices ({chosen}); a gpu worker uses exactly one. "
        f"Start one worker per device:\n{starts}"
    )


def visible_device_count() -> int:
    """CUDA devices this process can see (0 without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()
