"""A forward that returns a constant float (``return y, 2.5``), refused before compiling.

Python-number outputs are recorded in the signature and given back as numbers (``lowering/signature.py``'s
``_scalar_spec``), and a constant int, a bool, None and a SymFloat (``x.shape[0] / 2``) compile. A constant float
does not: Inductor's ``GraphLowering.output`` asserts each output is a buffer, a sympy expression, an int or None
(torch 2.13), so lower() ended in a raw ``InductorError: AssertionError`` printing the graph's buffers, after the
export and decompositions. It is refused here with the output's name and the fix, before the compile.
"""

from __future__ import annotations

import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from aotcuda.lowering.signature import output_names


def check_constant_float_outputs(ep: ExportedProgram) -> None:
    """Raise ValueError naming the first output of ``ep`` that is a constant Python float, and the fix."""
    outputs = next(node for node in reversed(ep.graph.nodes) if node.op == "output").args[0]
    leaves = pytree.tree_leaves(outputs)
    leaves = leaves[len(leaves) - len(ep.graph_signature.user_outputs):]  # after the inputs and buffers written
    constants = [index for index, leaf in enumerate(leaves) if isinstance(leaf, float)]
    if not constants:
        return
    names = output_names(ep)
    index = constants[0]
    name = names[index] if len(names) == len(leaves) else f"output #{index}"
    raise ValueError(f"forward returns the constant float {leaves[index]!r} at {name}: AOTInductor cannot compile "
                     "a constant float output (an int, a bool, None and a size expression such as x.shape[0] / 2 "
                     "can be). Return it from outside the model, or as a tensor (torch.tensor(2.5)), then lower "
                     "again.")
