"""Fixes from later torch releases that aotcuda applies while it compiles, on the torches that lack them.

Each fix is one function, applied by `backports()` around the compile step only (never at import), and
only where the installed torch misses it, detected by the fixed code's own marker rather than by a
version number. Each says which torch PR has it, what fails without it, and the first release we checked
that has it. Remove a fix when the oldest torch aotcuda claims has it.

| fix                                   | fails without it (torch 2.11)                        | has it   |
|---------------------------------------|------------------------------------------------------|----------|
| while_loop_mutated_carries            | scan / map / a while_loop that writes a carried      | 2.13     |
|                                       | buffer in place: InductorError: AssertionError in    |          |
|                                       | codegen_while_loop (pytorch#183657)                  |          |
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator


def _mutated_carry_names(while_loop) -> dict[str, str]:
    """{name of a buffer the loop body writes in place: the name of the MutationOutput that stands for it}."""
    return {mutated: output.get_name()
            for output in getattr(while_loop, "mutation_outputs", ())
            for mutated in output.get_mutation_names()}


def carried_outputs(while_loop) -> list:
    """One output buffer per carried input of an Inductor WhileLoop, in carried-input order.

    A carried input the body writes in place (the buffer Inductor's scan/map → while_loop decomposition
    preallocates for the stacked outputs) is carried by its MutationOutput; every other one by the next
    of ``while_loop.outputs``. torch 2.11's C++ wrapper paired carried inputs with ``outputs`` alone, so a
    loop with a mutated carry lost its last carried inputs (the subgraph then has more inputs than the
    wrapper passes: the AssertionError).
    """
    mutation_outputs = {output.get_name(): output for output in getattr(while_loop, "mutation_outputs", ())}
    mutated = _mutated_carry_names(while_loop)
    plain = iter(while_loop.outputs)
    result = []
    for carried in while_loop.carried_inputs:
        name, seen = carried.get_name(), set()
        while name in mutated and name not in seen:  # a mutation of a mutation: follow it to the last
            seen.add(name)
            name = mutated[name]
        result.append(mutation_outputs[name] if name in mutation_outputs else next(plain))
    return result


def _while_loop_mutated_carries() -> contextlib.AbstractContextManager:
    """pytorch#183657: the C++ wrapper (AOTInductor's, CPU and CUDA) carries a loop's mutated buffers.

    Without it, torch 2.11 fails to compile every program with a scan that stacks outputs, a map, or a
    while_loop whose body writes a carried tensor in place. The fix gives torch's own codegen_while_loop
    the loop's outputs in carried-input order for the duration of that call.
    """
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu

    if hasattr(CppWrapperCpu, "_get_while_loop_carried_output_names"):  # torch's own fix is there
        return contextlib.nullcontext()
    original = CppWrapperCpu.codegen_while_loop

    @functools.wraps(original)
    def codegen_while_loop(self, while_loop, *args, **kwargs):
        outputs = while_loop.outputs
        while_loop.outputs = carried_outputs(while_loop)
        try:
            return original(self, while_loop, *args, **kwargs)
        finally:
            while_loop.outputs = outputs

    return _patched(CppWrapperCpu, "codegen_while_loop", codegen_while_loop)


@contextlib.contextmanager
def _patched(owner, name: str, value) -> Iterator[None]:
    original = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


BACKPORTS = (_while_loop_mutated_carries,)


@contextlib.contextmanager
def backports() -> Iterator[None]:
    """Every fix of BACKPORTS that the installed torch lacks, applied for the duration of the block."""
    with contextlib.ExitStack() as stack:
        for fix in BACKPORTS:
            stack.enter_context(fix())
        yield
