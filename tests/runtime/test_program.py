"""Program on the CPU: outputs against eager, shared storage, caller outputs, input checks, fault injection."""

import gc
import os

import pytest
import torch

import aotcuda.runtime.handles as handles_module
import aotcuda.runtime.program as program_module
from aotcuda.errors import InputError, OutputError, PackageError, RuntimeCallError
from aotcuda.runtime.program import load

from runtime_programs import Twice


def storage(t):
    return t.untyped_storage().data_ptr()


def assert_twice_outputs(outputs, x):
    expected = Twice()(x)
    assert len(outputs) == 3
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # Slots 0 and 2 are one tensor in eager (two detached views of y); they must share a storage here too.
    assert storage(expected[0]) == storage(expected[2])
    assert storage(outputs[0]) == storage(outputs[2])
    assert storage(outputs[1]) != storage(outputs[0])


@pytest.fixture(scope="module")
def twice(twice_pt2):
    with load(twice_pt2) as program:
        yield program


@pytest.fixture
def counting_release(monkeypatch):
    """Count releases of output handles (and still release them for real)."""
    released = []

    def release(handle):
        released.append(handle)
        real_release(handle)

    real_release = program_module.delete_handle
    for module in (program_module, handles_module):  # a failed run's releases live in handles.py
        monkeypatch.setattr(module, "delete_handle", release)
    return released


@pytest.fixture
def counting_adoption(monkeypatch):
    """Record every batch of handles that tensors take over (each adoption is the handle's one release)."""
    adopted = []

    def steal(handles, record=None):
        adopted.append(list(handles))
        return real_steal(handles, record)

    real_steal = program_module.steal_handles
    monkeypatch.setattr(program_module, "steal_handles", steal)
    return adopted


def test_twice_runs_three_times_like_eager(twice):
    for batch in (3, 7, 64):
        x = torch.randn(batch, 4)
        assert_twice_outputs(twice(x), x)


def test_shared_slots_are_adopted_once(twice, counting_adoption, counting_release):
    x = torch.randn(5, 4)
    assert_twice_outputs(twice(x), x)
    assert len(counting_adoption) == 1 and len(counting_adoption[0]) == 2  # 3 slots, 2 distinct handles
    assert len(set(counting_adoption[0])) == 2
    assert counting_release == []


def test_caller_outputs_each_get_their_own_copy(twice):
    x = torch.randn(6, 4)
    buffers = [torch.full((6, 4), float("nan")) for _ in range(3)]
    returned = twice.execute([x], buffers)
    assert all(r is b for r, b in zip(returned, buffers))
    expected = Twice()(x)
    for got, want in zip(buffers, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert len({storage(b) for b in buffers}) == 3


def test_structured_inputs_and_outputs_match_eager(structured_pt2):
    path, module = structured_pt2
    with load(path) as program:
        for _ in range(2):
            x, scale = torch.randn(5, 4), torch.randn(5, 3)
            got = program(x, extra={"scale": scale}, use_cache=False)  # left out, eager would use True: refused
            want = module(x, extra={"scale": scale}, use_cache=False)  # as exported
            assert set(got) == {"h", "pair"} and isinstance(got["pair"], tuple)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_noncontiguous_input_is_made_contiguous(twice):
    x = torch.randn(4, 10).t()  # shape (10, 4), strides (1, 10)
    assert not x.is_contiguous()
    assert_twice_outputs(twice(x), x)


def test_read_only_info(twice, twice_pt2):
    assert twice.package_path == twice_pt2
    assert twice.device == torch.device("cpu")
    assert (twice.num_inputs, twice.num_outputs) == (1, 3)
    spec = twice.input_specs[0]
    assert spec.name == "x" and spec.dtype == torch.float32 and spec.rank == 2
    assert (spec.dims[0].min, spec.dims[0].max, spec.dims[1].size) == (2, 64, 4)
    assert [s.dtype for s in twice.output_specs] == [torch.float32] * 3
    assert not twice.cuda_graphs


def test_specs_and_errors_name_dims_as_the_user_did(twice):
    """The package was exported with Dim("batch"): its specs and errors say batch, not torch's s77."""
    dim = twice.input_specs[0].dims[0]
    assert dim.user_expr == "batch" and dim.expr != "batch" and str(dim) == "batch in [2, 64]"
    assert all(spec.dims[0].user_expr == "batch" for spec in twice.output_specs)
    with pytest.raises(InputError, match=r"outside the exported range \[2, 64\] of batch;"):
        twice(torch.randn(1, 4))


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda: (), r"takes 1 positional argument\(s\) \(x\), got 0"),
        (lambda: (torch.randn(3, 4), torch.randn(3, 4)), r"takes 1 positional argument\(s\) \(x\), got 2"),
        (lambda: ([1.0, 2.0],), r"input 'x' \(#0\) must be a torch.Tensor, got list; .*torch.as_tensor\(value, dtype=torch.float32\)"),
        (lambda: (torch.randn(3, 4, dtype=torch.float64),), r"input 'x' \(#0\) has dtype torch.float64.*torch.float32"),
        (lambda: (torch.randn(3, 4, dtype=torch.complex64),),  # .to(float32) would drop the imaginary part
         r"has dtype torch.complex64.*takes a real tensor.*would drop the imaginary part.*torch.view_as_real"),
        (lambda: (torch.randn(3, 4, 1),), r"input 'x' \(#0\) has 3 dims.*takes 2"),
        (lambda: (torch.randn(3, 5),), r"input 'x' \(#0\) dim 1 is 5.*size 4.*torch.export.Dim"),
        (lambda: (torch.randn(1, 4),), r"input 'x' \(#0\) dim 0 is 1, outside the exported range \[2, 64\]"),
        (lambda: (torch.randn(65, 4),), r"dim 0 is 65, outside the exported range \[2, 64\].*wider"),
        (lambda: (torch.empty(3, 4, device="meta"),), r"input 'x' \(#0\) is on meta.*runs on cpu.*\.to\("),
    ],
)
def test_bad_inputs_are_rejected_before_running_and_the_program_stays_usable(twice, monkeypatch, make_args, message):
    def must_not_run(*args, **kwargs):
        raise AssertionError("the container ran on rejected inputs")

    with monkeypatch.context() as patch:
        patch.setattr(twice._container, "run", must_not_run)
        with pytest.raises(InputError, match=message):
            twice(*make_args())
    x = torch.randn(4, 4)
    assert_twice_outputs(twice(x), x)


def test_non_tensor_flat_input_is_rejected(twice):
    with pytest.raises(InputError, match=r"input 'x' \(#0\) must be a torch.Tensor, got int"):
        twice.execute([3])


def test_wrong_caller_output_is_rejected_before_running(twice, monkeypatch, counting_release):
    x = torch.randn(5, 4)
    good = [torch.empty(5, 4) for _ in range(3)]
    cases = [
        ([torch.empty(5, 4), torch.empty(4, 4), torch.empty(5, 4)], r"output buffer #1 .* shape \(4, 4\).*\(5, 4\)"),
        ([torch.empty(5, 4), torch.empty(5, 4), torch.empty(5, 4, dtype=torch.int32)], r"#2 .*dtype torch.int32"),
        (good[:2], r"3 outputs, got 2 output buffers"),
        ([torch.empty(5, 4, device="meta")] + good[1:], r"#0 is on meta"),
    ]
    for buffers, message in cases:
        with monkeypatch.context() as patch:
            patch.setattr(twice._container, "run", lambda *a, **k: pytest.fail("ran before rejecting outputs"))
            with pytest.raises(OutputError, match=message):
                twice.execute([x], buffers)
    assert counting_release == []
    twice.execute([x], good)
    for got, want in zip(good, Twice()(x)):
        torch.testing.assert_close(got, want)


def test_wrong_caller_output_of_an_unsigned_package_is_caught_after_the_run(twice_unsigned_pt2, counting_adoption,
                                                                             counting_release):
    with load(twice_unsigned_pt2) as program:
        assert program.input_specs is None
        x = torch.randn(5, 4)
        with pytest.raises(OutputError, match=r"output buffer #2 .*shape \(5, 3\).*\(5, 4\)"):
            program.execute([x], [torch.empty(5, 4), torch.empty(5, 4), torch.empty(5, 3)])
        # The run's 3 slots held 2 handles; tensors took over each once, and nothing was released twice.
        assert [len(batch) for batch in counting_adoption] == [2] and counting_release == []
        assert_twice_outputs(program(x), x)


def test_failing_run_releases_every_written_handle_once(twice, monkeypatch, counting_release):
    """The container writes its output handles, then reports an error: each handle is released once."""
    real_run = twice._container.run

    def run_then_fail(*args, **kwargs):
        real_run(*args, **kwargs)
        raise RuntimeCallError("running the model failed with AOTIRuntimeError 1: injected")

    x = torch.randn(5, 4)
    with monkeypatch.context() as patch:
        patch.setattr(twice._container, "run", run_then_fail)
        with pytest.raises(RuntimeCallError, match="injected"):
            twice(x)
    assert len(counting_release) == 2 and len(set(counting_release)) == 2  # slots 0 and 2 share one handle
    assert_twice_outputs(twice(x), x)


def test_failing_adoption_releases_every_handle_once(twice, monkeypatch, counting_release):
    def no_memory(handles, record=None):
        raise MemoryError("injected")

    x = torch.randn(5, 4)
    with monkeypatch.context() as patch:
        patch.setattr(program_module, "steal_handles", no_memory)
        with pytest.raises(RuntimeCallError, match="taking over the model's outputs failed: injected"):
            twice(x)
    assert len(counting_release) == 2 and len(set(counting_release)) == 2
    assert_twice_outputs(twice(x), x)


def test_container_error_is_reported_with_its_message(twice_unsigned_pt2):
    """Without a signature, AOTI's own input checks run (AOTI_RUNTIME_CHECK_INPUTS) and report the error."""
    with load(twice_unsigned_pt2) as program:
        with pytest.raises(RuntimeCallError, match=r"running the model failed with AOTIRuntimeError 1: ") as error:
            program(torch.randn(3, 5))
        # torch >= 2.13 hands the C++ message back (AOTInductorGetLastError); 2.11 only prints it on stderr.
        has_last_error = hasattr(program._container._lib, "AOTInductorGetLastError")
        assert ("dim value" if has_last_error else "printed the cause on stderr") in str(error.value)
        x = torch.randn(3, 4)
        assert_twice_outputs(program(x), x)


def test_close_and_context_manager(twice_pt2):
    program = load(twice_pt2)
    folder = program._package.model_dir
    x = torch.randn(3, 4)
    outputs = program(x)
    with program:
        pass
    assert not os.path.exists(folder)
    with pytest.raises(RuntimeCallError, match="closed"):
        program(x)
    program.close()  # idempotent
    assert_twice_outputs(outputs, x)  # outputs outlive the program


def test_garbage_collection_cleans_up(twice_pt2):
    program = load(twice_pt2)
    folder = program._package.model_dir
    del program
    gc.collect()
    assert not os.path.exists(folder)


def test_cuda_graphs_and_cuda_device_are_refused_for_a_cpu_package(twice_pt2):
    with pytest.raises(PackageError, match=r"cuda_graphs=True needs a CUDA package.*cuda_graphs=False"):
        load(twice_pt2, cuda_graphs=True)
    with pytest.raises(PackageError, match=r"built for cpu and cannot run on cuda"):
        load(twice_pt2, device="cuda")


def test_a_device_type_aotcuda_does_not_run_is_not_told_to_lower_for_it(twice_pt2):
    """A new user's load(path, device="mps") was told to "lower the model again with device='mps'", which lower()
    refuses (it lowers for cuda and cpu): the advice named a fix no call takes."""
    for device in ("mps", "meta", torch.device("xpu")):
        with pytest.raises(PackageError, match=r"aotcuda runs packages on cpu or cuda, not \w+; load this one with "
                                               r"device='cpu'") as raised:
            load(twice_pt2, device=device)
        assert "lower the model again" not in str(raised.value)


def test_torch_compile_around_a_program_breaks_the_graph_there_and_matches_eager(twice):
    """Fifth new user (2026-12-06): torch.compile(lambda x: program(x) * 2) ended in InternalTorchDynamoError
    ("'dict' object has no attribute 'node'"): dynamo traced into the runtime. A Program call (and execute) is a
    graph break now, and the code around it is compiled as usual."""
    import torch._dynamo

    torch._dynamo.reset()
    compiled = torch.compile(lambda x: twice(x)[1] * 2 + twice.execute([x])[0], backend="eager")
    for rows in (3, 5):
        x = torch.randn(rows, 4)
        expected = Twice()(x)
        torch.testing.assert_close(compiled(x), expected[1] * 2 + expected[0])
    torch._dynamo.reset()
