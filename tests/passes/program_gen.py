"""Random programs for the property-based tests of ReplaceComplexWithRealPass (see test_properties.py).

A program is a list of steps `v_k = op(args)`, each op drawn from the pass's rule registry through the
per-op table in op_gen.py. Programs take real tensors only (complex program inputs are refused by
design): each complex input is made inside forward by view_as_complex, torch.complex, torch.polar or a
cast, from real tensors drawn in fixed ranges. Every step result is an output: complex ones through a
drawn read-out (view_as_real, real, imag or abs).

Inputs stay away from the singularities of the ops that amplify error (division, reciprocal, log,
angle, sgn, sqrt and fractional powers): a value is "safe" when it is built so that |z| >= 0.5 and
|angle z| <= 2.5 (away from 0 and from the branch cut on the negative real axis), and those ops take
only safe operands. Safety is structural (how a value was made), not a property of one example, so it
holds on fresh inputs too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
from hypothesis import strategies as st

COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}
SAFE_MAGNITUDE, SAFE_ANGLE = (0.5, 2.0), 2.5


# ---- the program ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Ref:
    """An earlier value of the program (an input's value or a step's result) used as an argument."""

    index: int

    def __repr__(self):
        return f"v{self.index}"


@dataclasses.dataclass(frozen=True)
class Const:
    """A constant tensor argument (index tensors, masks), stored as a buffer of the module."""

    index: int

    def __repr__(self):
        return f"c{self.index}"


@dataclasses.dataclass(frozen=True)
class Raw:
    """A real tensor of the program's signature, drawn uniformly in [low, high) (bool: fair coin)."""

    shape: tuple
    dtype: torch.dtype
    low: float = -1.0
    high: float = 1.0

    def fresh(self, generator: torch.Generator) -> torch.Tensor:
        if self.dtype == torch.bool:
            return torch.rand(self.shape, generator=generator) < 0.5
        u = torch.rand(self.shape, generator=generator, dtype=torch.float64)
        return (self.low + (self.high - self.low) * u).to(self.dtype)


# How an input value is made inside forward from its raw tensors.
MAKERS: dict[str, Callable] = {
    "view_as_complex": lambda x: torch.view_as_complex(x),
    "complex": lambda re, im: torch.complex(re, im),
    "polar": lambda magnitude, angle: torch.polar(magnitude, angle),
    "to_complex64": lambda x: x.to(torch.complex64),
    "to_complex128": lambda x: x.to(torch.complex128),
    "real": lambda x: x,
}


def cast_maker(dtype: torch.dtype) -> str:
    """The maker that casts a real input of `dtype` to its complex dtype."""
    return "to_complex64" if dtype == torch.float32 else "to_complex128"


@dataclasses.dataclass(frozen=True)
class Input:
    maker: str
    raws: tuple[Raw, ...]

    def __repr__(self):
        return f"{self.maker}({', '.join(f'{list(r.shape)}:{str(r.dtype)[6:]}' for r in self.raws)})"


@dataclasses.dataclass(frozen=True)
class Step:
    """`target(*args, **kwargs)`; `output` says how its result is returned (None: not an output)."""

    target: Callable
    args: tuple
    kwargs: dict
    readout: str | None

    def __repr__(self):
        name = getattr(self.target, "__name__", repr(self.target))
        args = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{name}({', '.join(args)})"


@dataclasses.dataclass
class Program:
    """`nodes` in creation order: v_k is the k-th node's value (an input's, or a step's result; None for
    a step that returns nothing). Inputs may be created mid-program (an operand a step needed)."""

    nodes: list
    constants: list[torch.Tensor]

    @property
    def inputs(self) -> list[Input]:
        return [n for n in self.nodes if isinstance(n, Input)]

    @property
    def steps(self) -> list[Step]:
        return [n for n in self.nodes if isinstance(n, Step)]

    def __repr__(self):
        lines = [f"v{i} = {n!r}" + (f"  -> {n.readout}" if isinstance(n, Step) and n.readout else "")
                 for i, n in enumerate(self.nodes)]
        return "Program(\n  " + "\n  ".join(lines) + "\n)"

    def raws(self) -> list[Raw]:
        return [r for inp in self.inputs for r in inp.raws]

    def fresh_inputs(self, seed: int) -> tuple[torch.Tensor, ...]:
        generator = torch.Generator().manual_seed(seed)
        return tuple(r.fresh(generator) for r in self.raws())

def resolve(value, values: list, constants: list):
    if isinstance(value, Ref):
        return values[value.index]
    if isinstance(value, Const):
        return constants[value.index]
    if isinstance(value, (list, tuple)):
        return type(value)(resolve(v, values, constants) for v in value)
    return value


def run_steps(program: Program, raw_inputs, constants) -> list:
    """Every value of the program (inputs' values, then step results), computed with torch ops."""
    values, raws = [], iter(raw_inputs)
    for node in program.nodes:
        if isinstance(node, Input):
            values.append(MAKERS[node.maker](*(next(raws) for _ in node.raws)))
        else:
            args = resolve(node.args, values, constants)
            kwargs = {k: resolve(v, values, constants) for k, v in node.kwargs.items()}
            values.append(node.target(*args, **kwargs))
    return values


READOUTS = {
    "view_as_real": torch.view_as_real,
    "real": torch.real,
    "imag": torch.imag,
    "abs": torch.abs,
    "as_is": lambda t: t,
}


class ProgramModule(torch.nn.Module):
    """forward(*raw real tensors) → the read-outs of every step result marked as an output."""

    def __init__(self, program: Program):
        super().__init__()
        self.program = program
        for i, c in enumerate(program.constants):
            self.register_buffer(f"c{i}", c)

    def constants(self) -> list[torch.Tensor]:
        return [getattr(self, f"c{i}") for i in range(len(self.program.constants))]

    def forward(self, *raw_inputs):
        values = run_steps(self.program, raw_inputs, self.constants())
        return tuple(READOUTS[node.readout](value) for node, value in zip(self.program.nodes, values)
                     if isinstance(node, Step) and node.readout is not None)

    def error_scale(self, *raw_inputs) -> tuple[float, torch.dtype]:
        """The largest |value| of any tensor the program computes (the scale of its rounding errors) and
        the real dtype of its least precise one (float32 if any value is float32 or complex64, which
        creation ops and scalar-only `where` make even in a complex128 program)."""
        largest, dtype = 1.0, torch.float64
        for v in run_steps(self.program, raw_inputs, self.constants()):
            for t in v if isinstance(v, (list, tuple)) else [v]:
                if isinstance(t, torch.Tensor) and (t.is_complex() or t.is_floating_point()):
                    if t.dtype in (torch.float32, torch.complex64):
                        dtype = torch.float32
                    if t.numel():
                        largest = max(largest, float(t.detach().abs().max()))
        return largest, dtype


# ---- drawing values -----------------------------------------------------------------------------------


@dataclasses.dataclass
class Value:
    """A value of the program being drawn: its example (computed eagerly while drawing) and safety."""

    ref: Ref
    example: torch.Tensor
    safe: bool = False

    @property
    def is_complex(self) -> bool:
        return self.example.is_complex()

    @property
    def shape(self) -> tuple:
        return tuple(self.example.shape)

    @property
    def ndim(self) -> int:
        return self.example.ndim


sizes = st.sampled_from([1, 1, 2, 3, 4])


@st.composite
def shapes(draw, min_ndim=0, max_ndim=3) -> tuple:
    return tuple(draw(st.lists(sizes, min_size=min_ndim, max_size=max_ndim)))


@st.composite
def broadcast_shapes(draw, shape: tuple) -> tuple:
    """A shape that broadcasts against `shape`: trailing dims kept or set to 1, leading ones dropped."""
    kept = draw(st.integers(0, len(shape)))
    tail = shape[len(shape) - kept:]
    return tuple(draw(st.sampled_from([s, 1])) for s in tail)


class Builder:
    """The program under construction: its inputs, steps, constants and the pool of values so far."""

    def __init__(self, draw, real_dtype: torch.dtype, mixed: bool):
        self.draw, self.real_dtype, self.mixed = draw, real_dtype, mixed
        self.nodes: list = []
        self.constants: list[torch.Tensor] = []
        self.examples: list = []
        self.pool: list[Value] = []
        self.generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))

    def dtype(self) -> torch.dtype:
        """The real dtype of a new input: the program's, or either in a mixed-precision program."""
        if self.mixed:
            return self.draw(st.sampled_from([torch.float32, torch.float64]))
        return self.real_dtype

    # -- inputs
    def new_input(self, shape: tuple, *, complex_: bool = True, safe: bool | None = None,
                  dtype: torch.dtype | None = None, unit_box: bool = False) -> Value:
        """A new program input of `shape`: complex (made by a drawn maker) or real; safe if asked; with
        `unit_box`, complex and made from parts drawn in [-1, 1) (see in_unit_box)."""
        draw, dtype = self.draw, dtype or self.dtype()
        safe = False if unit_box else draw(st.booleans()) if safe is None else safe
        magnitude = Raw(shape, dtype, *SAFE_MAGNITUDE)
        if not complex_:
            inp = Input("real", (magnitude if safe else Raw(shape, dtype),))
        elif safe:
            inp = draw(st.sampled_from([
                Input("polar", (magnitude, Raw(shape, dtype, -SAFE_ANGLE, SAFE_ANGLE))),
                Input("complex", (magnitude, Raw(shape, dtype, -2.0, 2.0))),  # re >= 0.5: angle < pi/2
                Input(cast_maker(dtype), (magnitude,)),
            ]))
        else:
            makers = [
                Input("view_as_complex", (Raw((*shape, 2), dtype),)),
                Input("complex", (Raw(shape, dtype), Raw(shape, dtype))),
                Input("polar", (Raw(shape, dtype, 0.0, 2.0), Raw(shape, dtype, -math.pi, math.pi))),
                Input(cast_maker(dtype), (Raw(shape, dtype),)),
            ]
            inp = draw(st.sampled_from([m for m in makers if not (unit_box and m.maker == "polar")]))
        example = MAKERS[inp.maker](*(r.fresh(self.generator) for r in inp.raws))
        self.nodes.append(inp)
        return self._add(example, safe, pooled=True, is_input=True)

    def constant(self, tensor: torch.Tensor) -> Const:
        self.constants.append(tensor)
        return Const(len(self.constants) - 1)

    def mask(self, shape: tuple) -> Const:
        return self.constant(torch.rand(shape, generator=self.generator) < 0.5)

    # -- steps
    def step(self, target: Callable, *args, safe: bool = False, pooled: bool = True, readout=True,
             **kwargs) -> Value | list[Value] | None:
        """Append `target(*args, **kwargs)`; its result joins the pool (each element of a list result)."""
        values = self._values()
        example = target(*resolve(args, values, self.constants),
                         **{k: resolve(v, values, self.constants) for k, v in kwargs.items()})
        out = self.draw_readout(example) if readout else None
        self.nodes.append(Step(target, args, kwargs, out))
        return self._add(example, safe, pooled)

    def draw_readout(self, example) -> str | None:
        if isinstance(example, torch.Tensor) and example.is_complex():
            return self.draw(st.sampled_from(["view_as_real", "real", "imag", "abs"]))
        if isinstance(example, torch.Tensor) or isinstance(example, (list, tuple)) and example and all(
                isinstance(t, torch.Tensor) and not t.is_complex() for t in example):
            return "as_is"
        return None  # a list of complex tensors: its elements are read out by the steps that use them

    def _values(self) -> list:
        return self.examples

    def _add(self, example, safe: bool, pooled: bool, is_input: bool = False):
        self.examples.append(example)
        ref = Ref(len(self.examples) - 1)
        if not isinstance(example, torch.Tensor):
            return None
        value = Value(ref, example, safe)
        if pooled and (example.is_complex() or example.is_floating_point()):
            self.pool.append(value)
        return value

    # -- picking operands
    def pick(self, *, complex_: bool | None = True, safe: bool = False,
             where: Callable[[Value], bool] = lambda v: True) -> Value | None:
        """A pool value with the properties asked for, or None."""
        candidates = [v for v in self.pool if (complex_ is None or v.is_complex == complex_)
                      and (v.safe or not safe) and where(v)]
        return self.draw(st.sampled_from(candidates)) if candidates else None

    def operand(self, shape: tuple, *, complex_: bool | None = None, safe: bool = False) -> Value:
        """A value that broadcasts against `shape`: from the pool, or a new input."""
        if complex_ is None:
            complex_ = self.draw(st.booleans())
        fits = lambda v: _broadcasts(v.shape, shape)
        found = self.pick(complex_=complex_, safe=safe, where=fits) if self.draw(st.booleans()) else None
        return found or self.new_input(self.draw(broadcast_shapes(shape)), complex_=complex_,
                                       safe=True if safe else None)

    def in_unit_box(self) -> Value:
        """A complex value whose parts lie in [-1, 1) by construction, on fresh inputs too: a program input made
        from parts drawn there (view_as_complex, complex or a cast; not polar, whose magnitude reaches 2), or a
        new one. For the functions with poles or branch cuts just outside that box (tan, tanh, the inverse
        functions, log1p, sigmoid), whose error a value computed by earlier steps could amplify."""
        def boxed(v: Value) -> bool:
            node = self.nodes[v.ref.index]
            return (isinstance(node, Input) and node.maker != "polar"
                    and all(r.low >= -1 and r.high <= 1 for r in node.raws))

        return self.pick(where=boxed) or self.new_input(self.draw(shapes()), unit_box=True)

    def program(self) -> Program:
        return Program(self.nodes, self.constants)


def _broadcasts(a: tuple, b: tuple) -> bool:
    try:
        return tuple(torch.broadcast_shapes(a, b)) == tuple(b)
    except RuntimeError:
        return False


@st.composite
def programs(draw, max_ops: int = 8, ops=None) -> Program:
    """A random program of 1..max_ops steps drawn from `ops` (default: every generated registry op)."""
    from op_gen import GENERATORS

    ops = sorted(ops or GENERATORS, key=str)
    precision = draw(st.sampled_from(["complex64", "complex128", "mixed"]))
    builder = Builder(draw, torch.float64 if precision == "complex128" else torch.float32,
                      mixed=precision == "mixed")
    builder.new_input(draw(shapes()), complex_=True)
    n_ops = draw(st.integers(1, max_ops))
    while sum(isinstance(n, Step) for n in builder.nodes) < n_ops:
        GENERATORS[draw(st.sampled_from(ops))](builder)
    return builder.program()
