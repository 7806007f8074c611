"""A forward that returns a constant float (``return y, 2.5``), refused before compiling.

Python-number outputs are recorded in the signature and given back as numbers (``lowering/signature.py``'s
``_scalar_spec``), and a constant int, a bool, None and a SymFloat (``x.shape[0] / 2``) compile. A constant float
does not: Inductor's ``GraphLowering.output`` asserts each output is a buffer, a sympy expression, an int or None
(torch 2.13), so lower() ended in a raw ``InductorError: AssertionError`` printing the graph's buffers, after the
export and decompositions. It is refused here with the output's name and the fix, before the compile.
"""

from __future__ import annotations

from torch.export import ExportedProgram

from aotcuda.lowering.signature import output_names, user_output_args


def check_constant_float_outputs(ep: ExportedProgram) -> None:
    """Raise ValueError naming the first output of ``ep`` that is a constant Python float, and the fix."""
    outputs = user_output_args(ep)
    constants = [index for index, output in enumerate(outputs) if isinstance(output, float)]
    if not constants:
        return
    names = output_names(ep)
    index = constants[0]
    name = names[index] if len(names) == len(outputs) else f"output #{index}"
    raise ValueError(f"forward returns the constant float {outputs[index]!r} at {name}: AOTInductor cannot compile "
                     "a constant float output (an int, a bool, None and a size expression such as x.shape[0] / 2 "
                     "can be). Return it from outside the model, or as a tensor (torch.tensor(2.5)), then lower "
                     "again.")
