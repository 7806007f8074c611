"""Programs and package builders shared by the runtime tests (the fixtures live in conftest.py).

A package is built with ``torch._inductor.aoti_compile_and_package`` directly (not aotcuda.lower, so that
these tests depend on the runtime alone), and gets aotcuda's signature entry from its ExportedProgram.
"""

import json
import shutil
import zipfile

import torch

from aotcuda.lowering.signature import signature_from_exported_program
from aotcuda.package_format import write_signature


class Twice(torch.nn.Module):
    """Returns one tensor in two non-adjacent slots: AOTI writes one handle into slots 0 and 2."""

    def forward(self, x):
        y = x * 2
        return y.detach(), x + 1, y.detach()


class Structured(torch.nn.Module):
    """A weight, a nested keyword input, a constant keyword (exported as use_cache=False, as transformers
    models are) and a nested output structure."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, extra, use_cache=True):
        h = self.lin(x) if not use_cache else self.lin(x) + 1  # the value changes the answer
        return {"h": h, "pair": (extra["scale"] * h, x.sum(-1))}


class Scaled(torch.nn.Module):
    """Python-scalar arguments with defaults, each of which changes the answer (the new-user trial's model)."""

    def forward(self, x, scale: float = 1.0, use_relu: bool = False):
        y = x * scale
        return y.relu() if use_relu else y


BATCH = torch.export.Dim("batch", min=2, max=64)


def build_package(module, args, path, *, kwargs=None, dynamic_shapes=None, signed=True, device="cpu",
                  inductor_configs=None):
    """Export, compile and package ``module``; add the aotcuda signature unless signed=False."""
    ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
    torch._inductor.aoti_compile_and_package(ep, package_path=str(path), inductor_configs=inductor_configs)
    if signed:
        write_signature(path, signature_from_exported_program(ep, device, module=module))
    return str(path)


def twice_package(path, device="cpu", signed=True):
    x = torch.randn(3, 4, device=device)
    return build_package(Twice(), (x,), path, dynamic_shapes=({0: BATCH},), signed=signed, device=device)


class Stateful(torch.nn.Module):
    """Mutated state of every shape class, a mutated input (a cache passed as an argument) and an index.

    Buffers: 0-d, one element (a step counter), small (4,), large (64, 64), non-contiguous (a transposed
    (6, 8)); each call updates all of them and returns what they hold, so that each call's outputs show
    whether the state persisted. ``cache`` is written in place (``cache += x``); ``x[idx]`` reads rows by
    index (an index out of range makes the generated code raise).
    """

    def __init__(self):
        super().__init__()
        self.register_buffer("step0", torch.zeros(()))
        self.register_buffer("step1", torch.zeros(1))
        self.register_buffer("small", torch.zeros(4))
        self.register_buffer("large", torch.zeros(64, 64))
        self.register_buffer("strided", torch.zeros(6, 8).t())

    def forward(self, x, cache, idx):
        self.step0.add_(1)
        self.step1.add_(1)
        self.small.add_(x[0])
        self.large.add_(x[1, 0])
        self.strided.mul_(0.5).add_(x[2, 1])
        cache.add_(x)
        return x[idx] * self.step1, self.step0 * 1, self.small * 1, self.large.sum(), self.strided * 1


def stateful_inputs():
    return torch.randn(4, 4), torch.randn(4, 4), torch.tensor([0, 3])


def stateful_package(path, device="cpu"):
    """Stateful, lowered with aotcuda.lower (functionalized, the 1-element-buffer workaround applied)."""
    import aotcuda

    torch.manual_seed(0)
    args = tuple(t.to(device) for t in stateful_inputs())
    return aotcuda.lower(Stateful().to(device), args, device=device, package_path=str(path)).package_path


def with_edited_signature(source, target, edit, stored: bool = False):
    """A copy of the package at `source`, written to `target` entry by entry, whose aotcuda signature is
    ``edit(signature)``'s change of the stored one (edit changes the dict in place). Each entry keeps its ZipInfo
    (its compression), or with `stored` every entry is stored, not deflated (so that what bounds a signature's size
    is not the archive's ratio check alone). Returns target."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("aotcuda/signature.json"):
                signature = json.loads(data)
                edit(signature)
                data = json.dumps(signature).encode()
            zout.writestr(info.filename if stored else info, data)
    return target


def cerr_muted() -> bool:
    """Whether std::cerr's badbit is set (AOTCUDA_FOREIGN_WRITES' mute), read by libstdc++'s own basic_ios::bad() on
    the stream's basic_ios (a virtual base, at the offset its vtable records: libloader._cerr_state_setter)."""
    import ctypes
    import os

    cxx = ctypes.CDLL("libstdc++.so.6", mode=os.RTLD_NOW | os.RTLD_NOLOAD)
    cerr = ctypes.addressof(ctypes.c_void_p.in_dll(cxx, "_ZSt4cerr"))
    vtable = ctypes.c_void_p.from_address(cerr).value
    ios = cerr + ctypes.c_ssize_t.from_address(vtable - 3 * ctypes.sizeof(ctypes.c_void_p)).value
    bad = cxx._ZNKSt9basic_iosIcSt11char_traitsIcEE3badEv
    bad.restype, bad.argtypes = ctypes.c_bool, [ctypes.c_void_p]
    return bad(ios)


def with_raw_entry_name(source, target, raw_name: bytes, data: bytes = b"x"):
    """A copy of the package at ``source`` with one more entry whose name, in its local header and its directory
    record, is ``raw_name`` as it is (zipfile's writer cuts a name at a NUL; a hostile archive need not)."""
    placeholder = b"Z" * len(raw_name)
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info))
        zout.writestr(placeholder.decode(), data)
    raw = open(target, "rb").read()
    local, record = raw.rfind(b"PK\x03\x04"), raw.rfind(b"PK\x01\x02")
    assert raw[local + 30:local + 30 + len(raw_name)] == placeholder == raw[record + 46:record + 46 + len(raw_name)]
    raw = (raw[:local + 30] + raw_name + raw[local + 30 + len(raw_name):record + 46] + raw_name
           + raw[record + 46 + len(raw_name):])
    with open(target, "wb") as out:
        out.write(raw)
    return str(target)


def with_folder_data(source, target, size: int):
    """A copy of the package with a folder entry (``twice/notes/``, a name ending in '/') that holds ``size`` zero bytes,
    deflated: zipfile's writer stores none in a folder, a hostile archive may."""
    shutil.copyfile(source, target)
    info = zipfile.ZipInfo("twice/notes/")
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(target, "a") as archive, archive.open(info, "w") as entry:
        for _ in range(size >> 20):
            entry.write(bytes(1 << 20))
    return target
