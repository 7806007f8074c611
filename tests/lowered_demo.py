"""One CPU lowering of the demo attention block per test session, shared by test_lowering and test_cli.

The sequence length is dynamic (2..128) so that the same package also covers dynamic shapes.
"""

import atexit
import functools
import shutil
import tempfile

import torch

import aotcuda
from aotcuda.models import attention_block

SEQ_RANGE = (2, 128)


@functools.lru_cache(maxsize=None)
def lowered_demo():
    """(LoweredProgram, eager model, example x) — compiled once per process."""
    folder = tempfile.mkdtemp(prefix="aotcuda-test-demo-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    model, (x,) = attention_block(device="cpu", dtype=torch.float32, batch=2, seq=16)
    seq = torch.export.Dim("seq", min=SEQ_RANGE[0], max=SEQ_RANGE[1])
    lowered = aotcuda.lower(model, (x,), device="cpu", package_path=f"{folder}/attention_block.pt2",
                            dynamic_shapes={"x": {1: seq}})
    return lowered, model, x
