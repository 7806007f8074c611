"""Issue 28 item 2: dims that torch 2.11 specializes and torch 2.13 keeps dynamic.

Two programs, each exported with a dynamic dim, at each of aotcuda's lowering steps in turn, so the step
that specializes the dim is named:
  unet3d_freeu   diffusers' UNet3DConditionModel (tiny config) with FreeU enabled, dynamic frame count
  fnet_einsum    an FNet-style DFT by einsum with a DFT matrix built from the dynamic sequence length

    python benchmarks/scripts/specialized_dims_repro.py --device cuda            # the H200
    python benchmarks/scripts/specialized_dims_repro.py --device cpu             # any machine
    python benchmarks/scripts/specialized_dims_repro.py --device cpu --case fnet_einsum --export-only

Per case it prints: torch.export alone (strict=False) on the device, then aotcuda.lower(); a failure prints
the error's first lines and aotcuda's notes.
"""

from __future__ import annotations

import argparse
import math
import time
import traceback

import torch
from torch.export import Dim


class FNetEinsum(torch.nn.Module):
    """FNet's token mixing as a DFT product: y = Re(F_seq · x · F_hidden), F built from the sizes."""

    def __init__(self, hidden: int = 16):
        super().__init__()
        self.proj = torch.nn.Linear(hidden, hidden)

    @staticmethod
    def dft(n, device):
        k = torch.arange(n, device=device, dtype=torch.float32)
        angle = -2 * math.pi * torch.outer(k, k) / n
        return torch.polar(torch.ones_like(angle), angle)

    def forward(self, x):  # x: [B, S, H]
        b, s, h = x.shape
        mixed = torch.einsum("st,btd,dh->bsh", self.dft(s, x.device), x.to(torch.complex64), self.dft(h, x.device))
        return self.proj(mixed.real)


def fnet_case(device):
    model = FNetEinsum().to(device).eval()
    x = torch.randn(2, 3, 16, device=device)
    return model, (x,), {}, {"x": {1: Dim("seq", min=2, max=64)}}


def unet3d_case(device):
    from diffusers import UNet3DConditionModel

    model = UNet3DConditionModel(
        sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"), up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
        block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8, cross_attention_dim=32,
        attention_head_dim=8).to(device).eval()
    model.enable_freeu(s1=0.9, s2=0.2, b1=1.2, b2=1.4)
    sample = torch.randn(1, 4, 3, 8, 8, device=device)  # [B, C, frames, H, W]
    text = torch.randn(1, 5, 32, device=device)
    kwargs = {"encoder_hidden_states": text, "return_dict": False}
    frames = Dim("frames", min=2, max=16)
    return model, (sample, torch.tensor(10, device=device)), kwargs, {
        "sample": {2: frames}, "timestep": None, "encoder_hidden_states": None, "return_dict": None}


CASES = {"unet3d_freeu": unet3d_case, "fnet_einsum": fnet_case}


def report(title, fn):
    start = time.time()
    try:
        fn()
        print(f"  {title}: OK ({time.time() - start:.0f} s)", flush=True)
        return True
    except Exception as exc:  # noqa: BLE001 - a repro prints every failure
        lines = str(exc).strip().splitlines()
        print(f"  {title}: FAILED ({time.time() - start:.0f} s) {type(exc).__name__}: " + "\n    ".join(lines[:8]))
        for note in getattr(exc, "__notes__", []):
            print("    note:", note)
        if "-v" in __import__("sys").argv:
            traceback.print_exc()
        return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    parser.add_argument("--export-only", action="store_true")
    parser.add_argument("-v", action="store_true", help="print tracebacks")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, device {args.device}")
    for name in args.case or sorted(CASES):
        print(name, flush=True)
        model, inputs, kwargs, dynamic = CASES[name](args.device)
        with torch.no_grad():
            model(*inputs, **kwargs)
            exported = {}
            report("torch.export.export", lambda: exported.setdefault(
                "ep", torch.export.export(model, inputs, kwargs, dynamic_shapes=dynamic, strict=False)))
            if "ep" in exported:
                from aotcuda.lowering.decompositions import decomposition_table

                report("run_decompositions(aotcuda's table)",
                       lambda: exported["ep"].run_decompositions(decomposition_table()))
            if not args.export_only:
                import aotcuda

                report(f"aotcuda.lower(device={args.device!r})",
                       lambda: aotcuda.lower(model, inputs, kwargs, dynamic_shapes=dynamic, device=args.device))


if __name__ == "__main__":
    main()
