"""Bool inputs whose bytes are not 0 or 1 (the breaker, 2026-12-06, evening): memory viewed as bool may hold any
byte, eager reads each byte but 0 as True, and the generated code read the byte's value (runtime/bool_bytes.py)."""

import re

import pytest
import torch

import aotcuda


class Masked(torch.nn.Module):
    """A mask multiplied in, and a mask that picks rows of a 2-row table (whose bounds check Inductor drops: it knows
    a bool is 0 or 1)."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(2, 4))

    def forward(self, x, mask):
        return x * mask, self.table[mask[:, 0].long()]


@pytest.fixture(scope="module")
def masked_pt2(tmp_path_factory):
    batch = torch.export.Dim("batch", min=1, max=64)
    path = str(tmp_path_factory.mktemp("masked") / "masked.pt2")
    with pytest.warns(UserWarning, match="mask"):  # its values reach an index lowering cannot bound: said, as before
        aotcuda.lower(Masked(), (torch.randn(3, 4), torch.ones(3, 4, dtype=torch.bool)), device="cpu",
                      package_path=path, dynamic_shapes=({0: batch}, {0: batch}))
    return path


def bytes_as_bool(values, shape) -> torch.Tensor:
    return torch.frombuffer(bytearray(values), dtype=torch.bool).reshape(shape)


def test_a_bool_input_holding_a_byte_but_0_or_1_is_refused_naming_it(masked_pt2):
    """Before: mask bytes of 255 and 7 picked rows 255 and 7 of the 2-row table, where eager picks row 1: memory
    past the weights, handed to the caller."""
    x = torch.randn(4, 4)
    with aotcuda.load(masked_pt2) as program:
        for mask, byte, where in ((bytes_as_bool([1, 0, 255, 1] * 4, (4, 4)), 255, "(0, 2)"),
                                  (bytes_as_bool([1] * 17 + [0, 7, 1], (5, 4))[1:], 7, "(3, 2)")):
            with pytest.raises(aotcuda.InputError, match=rf"input 'mask' \(#1\) is a torch.bool tensor holding the byte "
                                                         rf"{byte} at {re.escape(where)}, where a bool holds 0 or 1.*"
                                                         r"tensor.view\(torch.uint8\) != 0"):
                program(x, mask)
            fixed = mask.view(torch.uint8) != 0  # the advice, followed, runs as eager
            product, rows = program(x, fixed)
            torch.testing.assert_close(product, x * mask)
            torch.testing.assert_close(rows, program.execute([x, fixed])[1])
        # a mask in another layout is copied into the exported one, which reads each byte as eager does: as before
        transposed = bytes_as_bool([0] * 13 + [7, 1, 1], (4, 4)).t()
        torch.testing.assert_close(program(x, transposed)[0], x * transposed)
        ones = torch.ones(4, 4, dtype=torch.bool)
        torch.testing.assert_close(program(x, ones)[0], x)
        ones.resize_(8, 4)  # the check leaves the caller's storage as it was (tensor.numpy() makes it fixed in size)


def test_an_additive_float_mask_is_told_how_to_compare_not_to_cast(masked_pt2):
    """A new user's Hugging Face-style additive mask (0 kept, -inf masked) for a bool mask was told
    `pass tensor.to(torch.bool)`; following it made -inf True and 0 False, and the program ran on the inverted mask
    (their attention block: 1.04 off eager, no error). The advice now says what the cast does and that the
    additive mask's kept places are `tensor == 0`, which, followed, gives eager's answer for the bool mask."""
    torch.manual_seed(0)
    x, keep = torch.randn(4, 4), torch.rand(4, 4) > 0.5
    additive = torch.zeros(4, 4).masked_fill(~keep, float("-inf"))
    with aotcuda.load(masked_pt2) as program:
        with pytest.raises(aotcuda.InputError, match=r"input 'mask' \(#1\) has dtype torch.float32") as caught:
            program(x, additive)
        advice = str(caught.value)
        assert not advice.endswith("pass tensor.to(torch.bool)") and "makes every nonzero value True" in advice
        assert "`tensor == 0`" in advice
        product, rows = program(x, additive == 0)  # the advice, followed
        torch.testing.assert_close(product, Masked().forward(x, keep)[0])
        assert not torch.equal(program(x, additive.to(torch.bool))[0], product)  # the cast: the inverted mask


def test_a_package_without_a_signature_checks_its_bool_inputs_too(masked_pt2, tmp_path):
    """AOTInductor's own checks (all a package without aotcuda's signature has) compare a bool input's dtype and
    sizes, not its bytes: where the signature cannot say which inputs are bool, each call looks at every input's."""
    import zipfile

    unsigned = tmp_path / "masked_unsigned.pt2"
    with zipfile.ZipFile(masked_pt2) as source, zipfile.ZipFile(unsigned, "w") as target:
        for info in source.infolist():
            if not info.filename.endswith("aotcuda/signature.json"):
                target.writestr(info, source.read(info))
    x = torch.randn(4, 4)
    with aotcuda.load(unsigned) as program:
        assert program.input_specs is None
        with pytest.raises(aotcuda.InputError, match=r"input '\w+' \(#1\) is a torch.bool tensor holding the byte 255"):
            program.execute([x, bytes_as_bool([1, 0, 255, 1] * 4, (4, 4))])
        torch.testing.assert_close(program.execute([x, torch.ones(4, 4, dtype=torch.bool)])[0], x)


_WRITER = """
import ctypes, sys, numpy
ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL when the test's process ends
memory = numpy.memmap(sys.argv[1], dtype=numpy.uint8, mode="r+")
while True:
    memory[int(sys.argv[2])] = 255
    memory[int(sys.argv[2])] = 1
"""


@pytest.mark.skipif(not hasattr(torch, "from_file"), reason="needs torch.from_file")
def test_a_bool_input_another_process_writes_is_never_read_past_the_check(masked_pt2, tmp_path):
    """The bool check reads the caller's memory, and the run then reads that memory again in place: another process
    writing a shared mask (torch.from_file(shared=True), share_memory_(), an mmap) put 255 there after the check had
    seen 1, and the program picked row 255 of the 2-row table (memory past the weights; with a (2, 2**20) table the
    process ended, SIGSEGV in the container's run). The index-range check reads a private copy, which the run then
    reads (runtime/index_ranges.py); a bool input needs the same. Eager reads 1 and 255 alike, as True: row 1."""
    import subprocess
    import sys
    import time

    path = tmp_path / "mask"
    path.write_bytes(bytes([1]) * 64 * 4)
    mask = torch.from_file(str(path), shared=True, size=64 * 4, dtype=torch.bool).view(64, 4)
    x = torch.randn(64, 4)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(5 * 4)])  # mask[5, 0]
    wrong = ran = 0
    try:
        with aotcuda.load(masked_pt2) as program:
            expected = program(x, torch.ones(64, 4, dtype=torch.bool))[1][5]  # table row 1
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not wrong:
                try:
                    rows = program(x, mask)[1]
                except aotcuda.InputError:  # the check saw 255: refused, right
                    continue
                ran += 1
                wrong += not torch.equal(rows[5], expected)
    finally:
        writer.kill()
        writer.wait()
    assert ran, "no call ran: the writer never left the mask at 1 long enough"
    assert not wrong, f"a run read mask[5, 0] as a row past the 2-row table after the check passed ({ran} runs)"
