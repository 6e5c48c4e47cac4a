"""Parity check of the tiny-mlp example boxes (scrollcase's parity protocol).

scrollcase runs this once per accelerator of the recipe's ``parity.accelerators``:

    python -I checks/parity.py --accelerator {cpu|cuda|metal} --output-dir DIR

(also told through SCROLLCASE_ACCELERATOR / SCROLLCASE_PARITY_OUTPUT).  It runs a small MLP with a
fixed seed on that device and saves its outputs as float32 to DIR/outputs.npz, and DIR/meta.json
naming the device it really ran on, so a silent CPU fallback fails the gate.  It needs torch only:
the .npz is written with zipfile, so the box does not have to ship numpy.

One source, many copies: this script is scrollcase/data/parity_example.py in the scrollcase repository,
and each example recipe carries a byte-identical copy as checks/parity.py (a recipe folder stays
self-contained: no links, no ``..``).  Edit the source, then run ``python scripts/sync-parity-examples``;
tests/unit/parity/test_example.py fails while a copy differs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

TORCH_DEVICE = {"cpu": "cpu", "cuda": "cuda", "metal": "mps"}
ACCELERATOR_OF = {"cpu": "cpu", "cuda": "cuda", "mps": "metal"}
SEED = 20240601
BATCH, FEATURES, HIDDEN, CLASSES = 64, 32, 128, 10


def npy_bytes(shape: tuple[int, ...], values: list[float]) -> bytes:
    """A little-endian float32 array in .npy format 1.0 (what numpy.save writes)."""
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * (pad % 64) + "\n"
    prefix = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header))
    return prefix + header.encode("latin1") + struct.pack(f"<{len(values)}f", *values)


def save_npz(path: Path, arrays: dict[str, tuple[tuple[int, ...], list[float]]]) -> None:
    """Uncompressed .npz (like numpy.savez), written in place like meta.json: scrollcase empties the
    output folder before the run and reads it only after this script exits 0, so a half-written file
    is never taken for outputs (and a zip's directory, written last, makes it unreadable anyway)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, (shape, values) in arrays.items():
            archive.writestr(f"{name}.npy", npy_bytes(shape, values))


def pick_device(torch: Any, accelerator: str) -> Any:
    """The asked device, or exit with why it is unusable (never fall back quietly)."""
    if accelerator == "cuda" and not torch.cuda.is_available():
        sys.exit(
            f"parity: cuda requested but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})"
        )
    if accelerator == "metal" and not torch.backends.mps.is_available():
        sys.exit(f"parity: metal requested but torch.backends.mps.is_available() is False (torch {torch.__version__})")
    return torch.device(TORCH_DEVICE[accelerator])


def run_model(torch: Any, device: Any) -> dict[str, Any]:
    """Deterministic: weights and inputs are made on the CPU from a fixed seed, then moved."""
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, CLASSES),
    ).eval()
    inputs = torch.randn(BATCH, FEATURES, generator=torch.Generator().manual_seed(SEED))
    model, inputs = model.to(device), inputs.to(device)
    with torch.inference_mode():
        hidden = model[1](model[0](inputs))
        logits = model[2:](hidden)
        probabilities = torch.softmax(logits, dim=-1)
    return {"hidden": hidden, "logits": logits, "probabilities": probabilities}


def device_name(torch: Any, device: Any) -> str:
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    if device.type == "mps":
        return "Apple GPU (mps)"
    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accelerator", choices=sorted(TORCH_DEVICE), default=os.environ.get("SCROLLCASE_ACCELERATOR"))
    parser.add_argument("--output-dir", type=Path, default=os.environ.get("SCROLLCASE_PARITY_OUTPUT"))
    args = parser.parse_args()
    if args.accelerator is None or args.output_dir is None:
        parser.error("--accelerator and --output-dir are required")
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        sys.exit(f"parity: torch is not importable in {sys.executable}: {exc}")
    # Full float32 on every device: TF32 matmuls would differ from the CPU by ~1e-3.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = pick_device(torch, args.accelerator)
    outputs = run_model(torch, device)
    ran_on = {t.device.type for t in outputs.values()}
    saved = {
        name: (tuple(t.shape), t.detach().to("cpu", torch.float32).reshape(-1).tolist()) for name, t in outputs.items()
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    save_npz(args.output_dir / "outputs.npz", saved)
    meta = {
        "accelerator": ACCELERATOR_OF.get(ran_on.pop(), "unknown") if len(ran_on) == 1 else "mixed",
        "device": device_name(torch, device),
        "torch": torch.__version__,
        "torchCuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    (args.output_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
