"""Comparisons against eager that tests in several folders share (tests/ is on sys.path: tests/conftest.py)."""

import torch


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """‖got − want‖ / ‖want‖ in float64 (a want of all zeros counts as norm 1e-300, not a division by 0)."""
    return ((got.double() - want.double()).norm() / want.double().norm().clamp_min(1e-300)).item()


def check_decode_steps(eager, lowered, tokens: torch.Tensor, steps: int, rtol: float) -> None:
    """Run a decode step of eager and lowered (modules of (tokens [B, 1], position [1]) that carry their KV cache
    in their own buffers) at positions 0..steps-1 and check each logits' relative error; each step's tokens are
    the previous step's greedy choice (eager's argmax)."""
    with torch.no_grad():
        for position in range(steps):
            at = torch.tensor([position])
            want = eager(tokens, at)
            assert relative_error(lowered(tokens, at), want) < rtol, position
            tokens = want.argmax(-1, keepdim=True)


def torch_aoti_load(path):
    """torch's own loader (``torch._inductor.aoti_load_package``), after putting libstdc++ in the global
    symbol scope as ``aotcuda.load`` does: without that, a CUDA package segfaults in its container's
    constructor on torch 2.11+cu130 (the H200's) when no aotcuda package was loaded first in the process
    (root cause in aotcuda/runtime/libloader.py)."""
    from aotcuda.runtime.libloader import promote_cxx_runtime_to_global_scope

    promote_cxx_runtime_to_global_scope()
    return torch._inductor.aoti_load_package(str(path))


class Forward(torch.nn.Module):
    """A module whose forward is ``function(*inputs)``: a program of one function, to export or lower."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *inputs):
        return self.function(*inputs)
