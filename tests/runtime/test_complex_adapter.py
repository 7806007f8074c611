"""Complex inputs, outputs and mutated complex state through aotcuda.lower(device="cpu") + aotcuda.load.

One AOTInductor CPU compile, shared by every test that runs a package: a module with a complex64 input,
a real input, a complex32 input (all with one dynamic batch dim), complex64/real/complex32 outputs and two
complex buffers mutated every call (mul_ and copy_). The unit tests of the boundary need no compile.
"""

import copy

import pytest
import torch

import aotcuda
from aotcuda.errors import InputError, PackageError
from aotcuda.runtime.complex_adapter import ComplexAdapter, split_signature, viewable_as_complex
from aotcuda.runtime.package import read_signature

F32 = dict(rtol=1e-5, atol=1e-5)
F16 = dict(rtol=1e-3, atol=1e-3)  # complex32: float16 pairs (Inductor skips eager's intermediate roundings)


class Boundary(torch.nn.Module):
    """z: complex64 [B, 4], x: float32 [B], h: complex32 [B, 4]; state and acc: complex64 [4], updated in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.randn(4, dtype=torch.complex64))
        self.register_buffer("rot", torch.polar(torch.ones(4), torch.rand(4)))
        self.register_buffer("acc", torch.zeros(4, dtype=torch.complex64))

    def forward(self, z, x, h):
        self.state.mul_(self.rot)
        y = z * x.unsqueeze(-1) + self.state
        self.acc.copy_(self.acc * 0.5 + y.sum(0) * 0.1)
        return y, (y.abs() * x.unsqueeze(-1)).sum(-1), h * h + h, self.acc * 1j


def inputs(batch: int):
    return (torch.randn(batch, 4, dtype=torch.complex64), torch.randn(batch),
            torch.randn(batch, 4, dtype=torch.complex64).to(torch.complex32))


def assert_outputs_match(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        tol = F16 if e.dtype == torch.complex32 else F32
        to_real = lambda t: torch.view_as_real(t).float() if t.is_complex() else t  # noqa: E731
        torch.testing.assert_close(to_real(g), to_real(e), **tol)


@pytest.fixture(scope="module")
def lowered():
    model = Boundary()
    eager = copy.deepcopy(model)  # steps its own copy of the state, call for call with the package
    batch = torch.export.Dim("b", min=2, max=64)
    result = aotcuda.lower(model, inputs(3), dynamic_shapes=({0: batch}, {0: batch}, {0: batch}), device="cpu")
    return result, eager


@pytest.fixture(scope="module")
def program(lowered):
    with lowered[0].load() as program:
        yield program


def test_package_signature_records_the_complex_inputs_and_outputs(lowered):
    signature = read_signature(lowered[0].package_path)
    assert [s["complex"] for s in signature["inputs"]] == ["complex64", None, "complex32"]
    assert [s["complex"] for s in signature["outputs"]] == ["complex64", None, "complex32", "complex64"]
    z = signature["inputs"][0]
    assert z["dtype"] == "float32" and z["shape"][1:] == [4, 2] and z["shape"][0]["min"] == 2
    assert signature["inputs"][2]["dtype"] == "float16"


def test_inspect_shows_complex_tensors_as_the_caller_passes_them(lowered):
    """`aotcuda inspect` speaks as Program's specs do: complex64 of shape S, not the package's pair S + [2]."""
    from click.testing import CliRunner

    from aotcuda.cli import main

    result = CliRunner().invoke(main, ["inspect", lowered[0].package_path])
    assert result.exit_code == 0, result.output
    lines = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") == 5}
    assert "complex64 (float32 pairs inside)" in lines["z"] and "∈[2, 64], 4]" in lines["z"]
    assert "complex32 (float16 pairs inside)" in lines["h"]
    assert "float32" in lines["x"] and "pairs" not in lines["x"]
    assert "complex64 (float32 pairs inside)" in lines["out[0]"] and "4, 2]" not in lines["out[0]"]


def test_program_specs_speak_in_the_callers_terms(program):
    z, x, h = program.input_specs
    assert (z.dtype, z.rank, z.dims[1].size, z.dims[0].max) == (torch.complex64, 2, 4, 64)
    assert (x.dtype, x.rank) == (torch.float32, 1) and (h.dtype, h.rank) == (torch.complex32, 2)
    assert [s.dtype for s in program.output_specs] == [torch.complex64, torch.float32, torch.complex32,
                                                       torch.complex64]


def test_mutated_state_and_outputs_match_eager_over_consecutive_calls(lowered, program):
    eager = lowered[1]
    for batch in (3, 5, 2, 9):  # the dynamic batch dim changes between calls; the state carries over
        args = inputs(batch)
        assert_outputs_match(program(*args), eager(*args))


def test_complex_outputs_are_views_of_the_pairs(lowered, program):
    args = inputs(4)
    lowered[1](*args)  # every call of the package steps eager's copy of the state too
    y, _, hh, acc = program(*args)
    for out in (y, hh, acc):
        assert out.is_complex() and out._is_view()
        assert viewable_as_complex(torch.view_as_real(out))


def test_conjugate_and_non_contiguous_inputs(lowered, program):
    eager = lowered[1]
    z = torch.randn(4, 6, dtype=torch.complex64).t()[:, :5].conj()  # transposed, sliced, conjugate bit
    x, h = torch.randn(6)[::1], torch.randn(4, 6, dtype=torch.complex64).to(torch.complex32).t()
    assert z.is_conj() and not z.is_contiguous() and not h.is_contiguous()
    assert_outputs_match(program(z[:5], x[:5], h[:5]), eager(z[:5], x[:5], h[:5]))


def test_caller_provided_complex_output_buffers(lowered, program):
    eager = lowered[1]
    args = inputs(3)
    buffers = [torch.empty(3, 4, dtype=torch.complex64), torch.empty(3), torch.empty(3, 4, dtype=torch.complex32),
               torch.empty(4, dtype=torch.complex64)]
    got = program.execute(list(args), outputs=buffers)
    assert all(g is b for g, b in zip(got, buffers))
    assert_outputs_match(got, eager(*args))


@pytest.mark.parametrize("bad, message", [
    (lambda z: torch.view_as_real(z), "dtype torch.float32, but the program was exported with torch.complex64"),
    (lambda z: z[:, :3], "dim 1 is 3, but the program was exported with size 4"),
    (lambda z: z.to(torch.complex128), "torch.complex128"),
])
def test_bad_complex_inputs_are_named_in_the_callers_terms(program, bad, message):
    z, x, h = inputs(3)
    with pytest.raises(InputError, match="input 'z'") as info:
        program(bad(z), x, h)
    assert message in str(info.value)


# ---- the boundary alone (no compile) ------------------------------------------------------------------


def pair_spec(name, shape, strides, dtype="float32", complex_dtype="complex64"):
    return {"name": name, "dtype": dtype, "device": "cpu", "shape": shape, "contiguous": True,
            "strides": strides, "complex": complex_dtype}


def test_split_signature_halves_strides_and_drops_the_pair_dim():
    symbolic = {"expr": "s0", "min": 2, "max": 8}
    signature = {"inputs": [pair_spec("z", [symbolic, 3, 2], [{"expr": "6*s0", "min": 12, "max": 48}, 2, 1]),
                            pair_spec("x", [3], [1], complex_dtype=None)],
                 "outputs": [pair_spec("y", [3, 2], [2, 1], "float16", "complex32")]}
    user, boundary = split_signature(signature)
    z = user["inputs"][0]
    assert z["dtype"] == "complex64" and z["shape"] == [symbolic, 3] and z["complex"] is None
    assert z["strides"] == [{"expr": "3*s0", "min": 6, "max": 24}, 1]
    assert user["inputs"][1] == signature["inputs"][1] and signature["inputs"][0]["shape"][-1] == 2  # not mutated
    assert user["outputs"][0]["dtype"] == "complex32" and user["outputs"][0]["shape"] == [3]
    assert boundary == ComplexAdapter(frozenset({0}), frozenset({0}))


def test_split_signature_without_complex_entries_adapts_nothing():
    signature = {"inputs": [pair_spec("x", [3], [1], complex_dtype=None)], "outputs": []}
    assert split_signature(signature) == (signature, None) and split_signature(None) == (None, None)


@pytest.mark.parametrize("spec", [
    pair_spec("z", [3, 2], [2, 1], dtype="float64"),           # complex64 is a float32 pair
    pair_spec("z", [3, 4], [4, 1]),                            # no trailing pair dim
    pair_spec("z", [3, 2], [2, 1], complex_dtype="complex7"),  # not a complex dtype
    pair_spec("z", [3, 2], [3, 1]),                            # odd stride
])
def test_split_signature_refuses_a_damaged_complex_field(spec):
    with pytest.raises(PackageError, match="z"):
        split_signature({"inputs": [spec], "outputs": []}, "pkg.pt2")


def test_inputs_become_pairs_without_copying():
    boundary = ComplexAdapter(frozenset({0}), frozenset())
    z = torch.randn(3, 4, dtype=torch.complex64)
    pair, x = boundary.inputs_as_pairs([z, torch.randn(3)])
    assert pair.dtype == torch.float32 and pair.shape == (3, 4, 2) and pair.data_ptr() == z.data_ptr()
    conj = boundary.inputs_as_pairs([z.conj(), x])[0]
    torch.testing.assert_close(conj[..., 1], -z.imag)


def test_outputs_become_complex_views_and_odd_layouts_a_copy():
    boundary = ComplexAdapter(frozenset(), frozenset({0, 1, 2}))
    pair = torch.randn(3, 4, 2)
    odd = torch.randn(3, 5)[:, 1:3]  # a [3, 2] pair at an odd storage offset
    y, same, z = boundary.outputs_as_complex([pair, pair, odd])
    assert y.data_ptr() == pair.data_ptr() and y is same  # slots sharing a pair share one complex tensor
    assert not viewable_as_complex(odd) and z.dtype == torch.complex64
    torch.testing.assert_close(torch.view_as_real(z), odd)


@pytest.mark.cuda
def test_cuda_package_with_complex_io_and_state_matches_eager():
    model = Boundary()
    eager = copy.deepcopy(model).cuda()
    batch = torch.export.Dim("b", min=2, max=64)
    on_cuda = lambda args: tuple(a.cuda() for a in args)  # noqa: E731
    lowered = aotcuda.lower(model, on_cuda(inputs(3)), dynamic_shapes=({0: batch}, {0: batch}, {0: batch}),
                            device="cuda")
    with lowered.load() as program:
        for batch_size in (3, 6, 2):
            args = on_cuda(inputs(batch_size))
            assert_outputs_match(program(*args), eager(*args))
