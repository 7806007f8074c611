"""Transforms whose length is dynamic (bounded by its Dim's max), against eager at several lengths.

Two regimes (spectral/dynamic.py): a max ≤ 64 runs one DFT product with its table built in the graph; a
larger max runs Bluestein at the power of two ≥ 2·max − 1 (float32: max 4096 → 8192, issue 13's bound;
float64: max 600 → 2048, to keep the rewrite's time down). Each program holds r2c, c2c forward and
inverse and c2r to an even and an odd length from a half spectrum of another dynamic size, across the
three normalizations; lengths include odd ones, the bound itself and lengths far below it. Tolerance: |error| ≤ rtol · max|eager|, rtol 1e-5 (float32),
1e-10 (float64).

The Hyena-style long convolution (rfft of input and filter at n = 2L, product, irfft, slice to L, with L
the dynamic sequence length) is lowered once on the CPU with aotcuda.lower and run with aotcuda.load at
four lengths (one AOTInductor compile).
"""

import pytest
import torch

import aotcuda
from aotcuda.passes import ReplaceComplexWithRealPass

from .helpers import assert_no_complex, export, ops_in

aten = torch.ops.aten
FFT_OPS = {aten._fft_r2c.default, aten._fft_c2c.default, aten._fft_c2r.default}
RTOL = {torch.float32: 1e-5, torch.float64: 1e-10}
Dim = torch.export.Dim


class EveryKind(torch.nn.Module):
    """rfft (ortho) of x, fft (backward) and ifft (forward) of z, irfft of h to the even length
    2·(bins − 1) (ortho) and to the odd 2·bins − 1 (backward)."""

    def forward(self, x, z, h):
        z, h = torch.view_as_complex(z), torch.view_as_complex(h)
        return (torch.view_as_real(torch.fft.rfft(x, norm="ortho")),
                torch.view_as_real(torch.fft.fft(z)),
                torch.view_as_real(torch.fft.ifft(z, norm="forward")),
                torch.fft.irfft(h, norm="ortho"),
                torch.fft.irfft(h, n=2 * h.shape[-1] - 1))


def every_kind_inputs(n, bins, dtype):
    return (torch.randn(3, n, dtype=dtype), torch.randn(3, n, 2, dtype=dtype), torch.randn(3, bins, 2, dtype=dtype))


def assert_relative(actual, expected, rtol, what=""):
    assert actual.shape == expected.shape, what
    error = ((actual - expected).abs().max() / expected.abs().max()).item()
    assert error <= rtol, f"{what}: relative error {error:.2e}"


CASES = {  # max → lengths tried (n, bins of h)
    48: [(48, 24), (7, 3), (20, 6), (33, 16)],
    600: [(600, 300), (331, 166), (9, 4)],
    4096: [(4096, 2048), (1031, 515), (400, 180), (9, 4)],
}


@pytest.mark.parametrize("bound, dtype", [(48, torch.float32), (48, torch.float64), (4096, torch.float32),
                                          (600, torch.float64)],
                         ids=["in_graph_table-float32", "in_graph_table-float64", "bluestein_8192-float32",
                              "bluestein_2048-float64"])
def test_every_kind_of_dynamic_length_against_eager(bound, dtype):
    n, bins = Dim("n", min=2, max=bound), Dim("bins", min=2, max=bound // 2)
    module = EveryKind()
    ep = export(module, every_kind_inputs(16, 5, dtype), dynamic_shapes=({1: n}, {1: n}, {1: bins}))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    assert not FFT_OPS & ops_in(new)
    for length, half in CASES[bound]:
        fresh = every_kind_inputs(length, half, dtype)
        for i, (actual, expected) in enumerate(zip(new.module()(*fresh), module(*fresh))):
            assert_relative(actual, expected, RTOL[dtype], f"n={length}, output {i}")


def test_a_dynamic_length_above_the_direct_bound_warns_that_every_call_costs_the_bound():
    """A new user lowered an rfft with a Dim max of 128 and was not told that every call costs what length 128
    costs (README, docs/ops.md: 'Dynamic dims'); a max of at most 16 (a product of the call's own length, with a
    small table) is quiet."""
    module = torch.nn.Module()
    module.forward = lambda x: torch.view_as_real(torch.fft.rfft(x))
    for bound, warned in ((16, False), (128, True)):
        said = _dynamic_fft_warnings(module, bound)
        assert bool(said) == warned, said
    assert "at most 128" in said[0] and "two length-256 transforms a row" in said[0]


def _dynamic_fft_warnings(module, bound):
    import warnings

    ep = export(module, (torch.randn(2, 16),), dynamic_shapes=({1: Dim("n", min=2, max=bound)},))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ReplaceComplexWithRealPass(strict=True)(ep)
    return [str(w.message) for w in caught if "FFT of dynamic length" in str(w.message)]


def test_a_dynamic_length_of_the_direct_form_above_16_warns_of_its_table_on_every_call():
    """The eighth new user (2026-12-07): a dynamic length with max 64 ran 15-20× eager at n = 64 on the CPU (its
    [2n, 2·(n//2 + 1)] table built on every call; the measurements are at spectral/dynamic.py's QUIET_DIRECT_BOUND), while
    lower() warned only for a max above 64."""
    module = torch.nn.Module()
    module.forward = lambda x: torch.view_as_real(torch.fft.rfft(x))
    assert _dynamic_fft_warnings(module, 16) == []
    said = _dynamic_fft_warnings(module, 64)
    assert len(said) == 1 and "at most 64" in said[0], said
    assert "builds its [2n, 2·(n//2 + 1)] DFT table (about 2·n²" in said[0], said  # an rfft's table: its bins only
    assert "~20× eager's FFT" in said[0] and "lower one program per length" in said[0], said


def test_rfft2_with_one_dynamic_dim_against_eager():
    """A dynamic dim and a static one in one transform: the 1/√N normalization is symbolic."""
    module = torch.nn.Module()
    module.forward = lambda x: torch.view_as_real(torch.fft.rfft2(x, norm="ortho"))
    ep = export(module, (torch.randn(2, 12, 10),), dynamic_shapes=({1: Dim("rows", min=2, max=200)},))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    for rows in (12, 131):
        x = torch.randn(2, rows, 10)
        assert_relative(new.module()(x), module(x), 1e-5, f"rows={rows}")


class DynamicMixer(torch.nn.Module):
    """An FNet mixer (fft2 over a dynamic seq and a static hidden dim, real part), an ortho ifft of a pair along
    its middle dim and an rfft along the middle dim of x: every dynamic transform along a dim that is not last."""

    def forward(self, x, z):
        return (torch.fft.fft2(x, dim=(-2, -1)).real,
                torch.view_as_real(torch.fft.ifft(torch.view_as_complex(z), dim=1, norm="ortho")),
                torch.view_as_real(torch.fft.rfft(x, dim=1)))


def _kernel_lengths(program):
    """The transform length n of every aotcuda::fft_rows_cpu op of the program, in graph order."""
    return [node.args[2] for node in program.graph.nodes if node.target is torch.ops.aotcuda.fft_rows_cpu.default]


@pytest.mark.parametrize("bound", [128, 100])
def test_a_dynamic_length_on_the_cpu_runs_bluestein_in_the_cpu_kernel_where_the_dim_is(bound):
    """A float32 dynamic length above the direct bound on the CPU: both of Bluestein's length-m transforms are
    aotcuda::fft_rows_cpu ops (m the CPU kernel's cheapest length ≥ 2·max − 1: 256 for 128, 200 for 100), read along
    the dim where it is. Before (session 41), DFT products of the power of two: an FNet mixer over a dynamic seq
    (max 128) took 15× the library at seq 128, 5× after (docs/performance.md). Against eager at fresh lengths, the bound and odd ones; then
    the mixer compiled (its C++ kernels over a dynamic batch of rows), once."""
    from aotcuda.passes.complex_to_real.spectral.plan import cpu_bluestein_length

    module, hidden = DynamicMixer(), 12
    seq, seq2 = Dim("seq", min=2, max=bound), Dim("seq2", min=2, max=bound)
    ep = export(module, (torch.randn(3, 16, hidden), torch.randn(2, 16, 5, 2)), dynamic_shapes=({1: seq}, {1: seq2}))
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    assert_no_complex(new)
    m = cpu_bluestein_length(bound)
    assert m == {128: 256, 100: 200}[bound]
    assert sorted(_kernel_lengths(new)) == [hidden] + [m] * 6, _kernel_lengths(new)
    for length in (bound, 97, 7):
        fresh = (torch.randn(3, length, hidden), torch.randn(2, length, 5, 2))
        for i, (actual, expected) in enumerate(zip(new.module()(*fresh), module(*fresh))):
            assert_relative(actual, expected, RTOL[torch.float32], f"seq={length}, output {i}")
    if bound != 128:
        return
    mixer = torch.nn.Module()  # the FNet mixer alone: three C++ kernels to compile, not seven
    mixer.forward = lambda x: torch.fft.fft2(x, dim=(-2, -1)).real
    ep = export(mixer, (torch.randn(3, 16, hidden),), dynamic_shapes=({1: seq},))
    compiled = torch.compile(ReplaceComplexWithRealPass(strict=True)(ep).module(), dynamic=True)
    with torch.no_grad():
        for length in (128, 61):
            x = torch.randn(3, length, hidden)
            assert_relative(compiled(x), mixer(x), RTOL[torch.float32], f"compiled, seq={length}")


class HyenaConvolution(torch.nn.Module):
    """Hyena's long convolution y = irfft(rfft(u, 2L) · rfft(k, 2L))[..., :L] plus a skip term."""

    def __init__(self, channels: int):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(channels, 1))

    def forward(self, u, k):
        length = u.shape[-1]
        spectrum = torch.fft.rfft(u, n=2 * length) * torch.fft.rfft(k, n=2 * length)
        return torch.fft.irfft(spectrum, n=2 * length)[..., :length] + u * self.bias


HYENA_MAX = 2048  # n = 2L up to 4096: Bluestein at 8192
HYENA_LENGTHS = (300, 2048, 8, 1001)


def hyena_dynamic_shapes():
    length = Dim("length", min=8, max=HYENA_MAX)
    return ({2: length}, {1: length})


@pytest.fixture(scope="module")
def hyena_program(tmp_path_factory):
    module = HyenaConvolution(4)
    lowered = aotcuda.lower(module, (torch.randn(2, 4, 64), torch.randn(4, 64)),
                            dynamic_shapes=hyena_dynamic_shapes(), device="cpu",
                            package_path=tmp_path_factory.mktemp("aoti") / "hyena.pt2")
    return module, lowered


@pytest.mark.slow
def test_hyena_convolution_lowered_on_cpu_matches_eager(hyena_program):
    module, lowered = hyena_program
    assert lowered.fallback_kernels == []
    program = lowered.load()
    for length in HYENA_LENGTHS:
        u, k = torch.randn(2, 4, length), torch.randn(4, length)
        with torch.no_grad():
            expected = module(u, k)
        assert_relative(program(u, k), expected, 1e-5, f"L={length}")


@pytest.mark.cuda
def test_hyena_convolution_lowered_on_cuda_matches_eager(tmp_path):
    module = HyenaConvolution(4).cuda()
    lowered = aotcuda.lower(module, (torch.randn(2, 4, 64), torch.randn(4, 64)),
                            dynamic_shapes=hyena_dynamic_shapes(), device="cuda", package_path=tmp_path / "h.pt2")
    program = lowered.load()
    for length in HYENA_LENGTHS:
        u, k = torch.randn(2, 4, length, device="cuda"), torch.randn(4, length, device="cuda")
        with torch.no_grad():
            expected = module(u, k)
        assert_relative(program(u, k), expected, 1e-5, f"L={length}")


class RoundTrip(torch.nn.Module):
    def forward(self, x):
        return torch.fft.irfft(torch.fft.rfft(x) * 2, n=x.shape[-1])


def test_the_bluestein_warning_names_the_users_dim_and_is_said_once():
    """A new user's report: `--dynamic x:1:16:1024` on irfft(rfft(x) * 2, n=x.shape[-1]) was refused ("the guard
    Eq(Mod(...), 0) does not hold at x_1 = 16", a guard that holds at every length), and with n*2 the warning said
    "2*s69" of a length they had named n, twice (one for each transform)."""
    import warnings

    from aotcuda.lowering.pipeline import before_compile

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before_compile(RoundTrip(), (torch.randn(2, 256),), dynamic_shapes=({1: Dim("n", min=16, max=1024)},))
    said = [str(w.message) for w in caught if "an FFT of dynamic length" in str(w.message)]
    assert len(said) == 1 and "(n, at most 1024)" in said[0], said


class SpectralConv2d(torch.nn.Module):
    """A Fourier neural operator's layer (fourth new user, 2026-12-06): the low modes of rfft2 over dynamic H and W
    times complex weights, written into a zero spectrum, and irfft2 back."""

    def __init__(self, channels=2, modes=3):
        super().__init__()
        self.modes = modes
        self.w1 = torch.nn.Parameter(torch.randn(channels, channels, modes, modes, dtype=torch.cfloat) / 4)
        self.w2 = torch.nn.Parameter(torch.randn(channels, channels, modes, modes, dtype=torch.cfloat) / 4)

    def forward(self, x):
        b, c, h, w = x.shape
        m = self.modes
        xf = torch.fft.rfft2(x)
        out = torch.zeros(b, c, h, w // 2 + 1, dtype=torch.cfloat)
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :m, :m], self.w1)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -m:, :m], self.w2)
        return torch.fft.irfft2(out, s=(h, w))


def test_a_fourier_neural_operator_over_dynamic_height_and_width_has_only_binary_products():
    """Its rewritten program held ``operator.mul(32, sym_max_6, sym_sum)`` (make_fx rebuilds a size from sympy with
    one operator.mul for all of a product's factors), and lowering ended in Inductor's re-trace with ``TypeError: mul
    expected 2 arguments, got 3``; the program's own module() failed the same way. Now each product is binary
    (``symbols.binary_arithmetic``), and the program matches eager at other sizes."""
    import operator

    torch.manual_seed(0)
    module = SpectralConv2d()
    dims = {0: Dim("b", min=1, max=4), 2: Dim("h", min=8, max=32), 3: Dim("w", min=8, max=32)}
    ep = torch.export.export(module, (torch.randn(2, 2, 16, 16),), dynamic_shapes=(dims,)).run_decompositions()
    new = ReplaceComplexWithRealPass(strict=True)(ep)
    nary = [n.name for m in new.graph_module.modules() if isinstance(m, torch.fx.GraphModule)
            for n in m.graph.nodes if n.op == "call_function" and n.target is operator.mul and len(n.args) > 2]
    assert nary == []
    for shape in ((3, 2, 20, 12), (1, 2, 32, 9)):
        x = torch.randn(shape)
        assert_relative(new.module()(x), module(x), 1e-5, f"shape={shape}")


class TwoDynamicFFTs(torch.nn.Module):
    def forward(self, x, y):
        a = torch.fft.rfft(x).abs()  # the direct form's warning (max 64)
        b = torch.fft.fft(y).abs()  # Bluestein's (max 128)
        return a, b


def test_each_dynamic_fft_warning_names_its_line_of_the_model_and_points_there():
    """A new user (nu40): the warning was shown at aotcuda's rules/fft.py:79 and named no line of the model, so in a
    model with several FFTs they could not tell which one it meant."""
    import inspect
    import os
    import warnings

    from aotcuda.lowering.pipeline import before_compile

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before_compile(TwoDynamicFFTs(), (torch.randn(2, 16), torch.randn(2, 16)),
                       dynamic_shapes=({1: Dim("n", min=2, max=64)}, {1: Dim("m", min=2, max=128)}))
    said = [w for w in caught if "an FFT of dynamic length" in str(w.message)]
    first = inspect.getsourcelines(TwoDynamicFFTs.forward)[1] + 1
    where = os.path.relpath(__file__)
    assert len(said) == 2, [str(w.message) for w in said]
    for warning, length, line in zip(said, ("(n, at most 64)", "(m, at most 128)"), (first, first + 1)):
        assert f"{length} at {where}:{line} (in forward) " in str(warning.message), str(warning.message)
        assert (warning.filename, warning.lineno) == (__file__, line), (warning.filename, warning.lineno)


def _real_forms():
    """Transforms of a real x whose last dim n is dynamic: (name, forward, x of length n)."""
    vr = torch.view_as_real
    return [
        ("rfft", lambda x: vr(torch.fft.rfft(x)), lambda n, dtype: torch.randn(3, n, dtype=dtype)),
        ("rfft_ortho", lambda x: vr(torch.fft.rfft(x, norm="ortho")), lambda n, dtype: torch.randn(3, n, dtype=dtype)),
        ("rfft_along_dim1", lambda x: vr(torch.fft.rfft(x.transpose(1, 2), dim=1)),
         lambda n, dtype: torch.randn(2, 3, n, dtype=dtype)),
        ("rfft2", lambda x: vr(torch.fft.rfft2(x)), lambda n, dtype: torch.randn(2, 4, n, dtype=dtype)),
        ("rfftn", lambda x: vr(torch.fft.rfftn(x, norm="forward")), lambda n, dtype: torch.randn(2, 3, 5, n, dtype=dtype)),
        # ihfft's result is a conjugate view, which view_as_real refuses in eager as in export: resolve_conj first.
        ("ihfft", lambda x: vr(torch.fft.ihfft(x).resolve_conj()), lambda n, dtype: torch.randn(3, n, dtype=dtype)),
        ("irfft_of_rfft_to_n", lambda x: torch.fft.irfft(torch.fft.rfft(x) * 2, n=x.shape[-1]),
         lambda n, dtype: torch.randn(3, n, dtype=dtype)),
        # ifft(norm="ortho") of a dynamic length exports from a CPU example, not from a meta one: torch 2.13 traces a
        # meta input through torch/_refs/fft.py's _apply_norm, whose math.sqrt(signal_numel) makes n a constant
        # ("specialized it to be a constant (8)"), for fft, ifft, rfft and irfft alike. torch's, and aotcuda.lower
        # refuses meta examples anyway (lowering/options.py).
        ("ifft_ortho", lambda x: vr(torch.fft.ifft(torch.view_as_complex(x), norm="ortho")),
         lambda n, dtype: torch.randn(3, n, 2, dtype=dtype)),
    ]


def _half_spectrum_forms():
    """Transforms to a real signal of length n from a half spectrum h (a pair) of dynamic length: (name, forward,
    h for an output of length n, or None where the form makes no such n)."""
    vc = torch.view_as_complex

    def even(n, dtype):
        return torch.randn(3, n // 2 + 1, 2, dtype=dtype) if n % 2 == 0 else None

    def odd(n, dtype):
        return torch.randn(3, (n + 1) // 2, 2, dtype=dtype) if n % 2 else None
    return [("irfft_even", lambda h: torch.fft.irfft(vc(h)), even),
            ("irfft_odd", lambda h: torch.fft.irfft(vc(h), n=2 * h.shape[-2] - 1), odd),
            ("hfft_even", lambda h: torch.fft.hfft(vc(h), norm="ortho"), even),
            ("hfft_odd", lambda h: torch.fft.hfft(vc(h), n=2 * h.shape[-2] - 1), odd)]


SHORT_LENGTHS = (2, 3, 4, 5, 17, 64)
BLUESTEIN_CHECKED = {"rfft", "rfft_along_dim1", "rfft2", "irfft_of_rfft_to_n"}  # the forms that cut bins there


@pytest.mark.parametrize("bound, dtype", [(64, torch.float32), (128, torch.float32), (128, torch.float64)],
                         ids=["in_graph_table", "bluestein_cpu_kernel", "bluestein_gemm-float64"])
def test_every_real_transform_of_a_dynamic_length_from_two_against_eager(bound, dtype):
    """rfft, rfft2 and rfftn over a batch of rows with `Dim("n", min=2)` were refused at n = 2 by the rewritten
    program (`Guard failed: 2 * x.size()[1] != 2 + 2 * (x.size()[1] // 2)`): the n//2 + 1 bins were cut from all n
    as a view, and make_fx's metadata asked whether that view is contiguous, true at n = 2 only
    (spectral/dynamic.py's r2c_along). Every real-input and real-output form, odd and even n, against eager at a
    max of 64 (the in-graph table); Bluestein's two forms (a max of 128) with the r2c forms only."""
    for name, forward, make in _real_forms():
        if bound > 64 and name not in BLUESTEIN_CHECKED:
            continue
        module = torch.nn.Module()
        module.forward = forward
        last = make(8, dtype).dim() - (2 if name == "ifft_ortho" else 1)
        ep = torch.export.export(module, (make(8, dtype),), dynamic_shapes=({last: Dim("n", min=2, max=bound)},),
                                 # irfft(rfft(x), n=x.shape[-1]) over rows: torch's own guard
                                 # (3 + 3*(n//2)) % (1 + n//2) == 0, true at every n, refuses the export otherwise
                                 prefer_deferred_runtime_asserts_over_guards=True).run_decompositions()
        new = ReplaceComplexWithRealPass(strict=True)(ep)
        assert_no_complex(new)
        for n in sorted({*SHORT_LENGTHS, bound}):
            x = make(n, dtype)
            assert_relative(new.module()(x), module(x), RTOL[dtype], f"{name}, n={n}")
    if bound > 64:
        return
    for name, forward, make in _half_spectrum_forms():
        module = torch.nn.Module()
        module.forward = forward
        example = make(14, dtype) if make(14, dtype) is not None else make(15, dtype)
        ep = export(module, (example,), dynamic_shapes=({1: Dim("bins", min=2, max=bound // 2 + 1)},))
        new = ReplaceComplexWithRealPass(strict=True)(ep)
        for n in SHORT_LENGTHS:
            h = make(n, dtype)
            if h is not None:
                actual = new.module()(h)
                assert actual.shape[-1] == n, name
                assert_relative(actual, module(h), RTOL[dtype], f"{name}, n={n}")


def _one_bin_forms():
    vc = torch.view_as_complex
    return [("irfft", lambda h: torch.fft.irfft(vc(h))),
            ("irfft_ortho", lambda h: torch.fft.irfft(vc(h), norm="ortho")),
            ("hfft", lambda h: torch.fft.hfft(vc(h))),
            ("hfft_forward", lambda h: torch.fft.hfft(vc(h), norm="forward"))]


def _asserts_in(ep) -> int:
    return len(ep.graph.find_nodes(op="call_function", target=aten._assert_scalar.default))


@pytest.mark.parametrize("bound", [33, 65], ids=["in_graph_table", "bluestein"])
def test_an_inverse_real_transform_of_one_bin_is_refused_with_eagers_words_not_a_zero_division(bound):
    """irfft/hfft of a half spectrum of dynamic bins with `Dim("bins", min=1)`: at one bin the output length
    2·(bins − 1) is 0, and the rewritten program raised ZeroDivisionError (the 1/n normalization, `1 / mul`), or
    whatever a length-0 table gave, where eager refuses ("Invalid number of data points (0) specified"). Now a
    run-time check names the zero points and the fix; other bin counts match eager, and a Dim of min=2 gets no
    check."""
    for name, forward in _one_bin_forms():
        module = torch.nn.Module()
        module.forward = forward
        example = torch.randn(3, 5, 2)
        new = ReplaceComplexWithRealPass(strict=True)(
            export(module, (example,), dynamic_shapes=({1: Dim("bins", min=1, max=bound)},)))
        for bins in (2, 3, 9, bound):
            h = torch.randn(3, bins, 2)
            assert_relative(new.module()(h), module(h), RTOL[torch.float32], f"{name}, bins={bins}")
        h = torch.randn(3, 1, 2)
        with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\)"):
            module(h)
        with pytest.raises(RuntimeError, match=r"zero points.*Invalid number of data points \(0\).*n=\.\.\..*at least "
                                               r"2 bins.*min=2"):
            new.module()(h)
        at_two = ReplaceComplexWithRealPass(strict=True)(
            export(module, (example,), dynamic_shapes=({1: Dim("bins", min=2, max=bound)},)))
        assert _asserts_in(at_two) == 0, name


@pytest.mark.parametrize("bound", [64, 128], ids=["in_graph_table", "bluestein_cpu_kernel"])
def test_fft_of_a_real_input_forms_all_bins_as_a_complex_fft_does(bound, monkeypatch):
    """fft of a real x gives n bins as a SymInt other than x.shape[-1]: dynamic.py took "all n" from `outputs is n`,
    so it built a second arange for the bins of its table, or cut Bluestein's chirp to n, each redundant
    (review42a). "All n" is None down to the table and the chirp now; the result matches eager."""
    from aotcuda.passes.complex_to_real.spectral import dynamic, tables

    asked, chirps_cut = [], []
    c2c_values, first = tables.c2c_values, dynamic._first
    monkeypatch.setattr(tables, "c2c_values", lambda n, inverse, device=None, outputs=None: (
        asked.append(outputs), c2c_values(n, inverse, device, outputs))[1])

    def spied_first(chirp, *rest):
        kept = first(chirp, *rest)
        chirps_cut.append(kept is not chirp)
        return kept
    monkeypatch.setattr(dynamic, "_first", spied_first)
    module = torch.nn.Module()
    module.forward = lambda x: torch.view_as_real(torch.fft.fft(x))
    ep = torch.export.export(module, (torch.randn(3, 8),), dynamic_shapes=({1: Dim("n", min=2, max=bound)},))
    new = ReplaceComplexWithRealPass(strict=True)(ep.run_decompositions()).module()
    assert asked and all(outputs is None for outputs in asked), asked  # the table (and Bluestein's static plan's)
    assert chirps_cut == ([] if bound <= 64 else [False])
    for n in (2, 7, bound):
        x = torch.randn(3, n)
        assert_relative(new(x), module(x), RTOL[torch.float32], f"n={n}")

@pytest.mark.parametrize("n", [1, 2, 7, 16])
def test_a_table_of_the_first_bins_is_the_first_columns_of_the_whole_table(n):
    from aotcuda.passes.complex_to_real.spectral.tables import c2c_values

    for inverse in (False, True):
        whole = c2c_values(n, inverse)
        assert whole.shape == (2 * n, 2 * n)
        for k in {1, n // 2 + 1, n}:
            assert torch.equal(c2c_values(n, inverse, outputs=k), whole[:, :2 * k]), (n, inverse, k)
