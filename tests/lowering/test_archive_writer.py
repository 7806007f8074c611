"""A package write that fails (a full disk, a file-size limit) is a PackageError, never an abort.

Found by the process breaker (2026-12-06): `aotcuda lower` into a 64 KiB tmpfs printed torch's `RuntimeError:
[enforce fail at inline_container.cc:672] . unexpected pos 128 vs 0`, then ended in `terminate called after
throwing an instance of 'c10::Error'` (SIGABRT, exit 134); through the API, the caller's next gc.collect() aborted.
torch's PT2ArchiveWriter.__exit__ never reached close() when a write failed, and the C++ writer's destructor threw.
"""

import os
import subprocess
import sys

from aotcuda.lowering import torch_fixes
from aotcuda.lowering.archive_writer import archive_writer_finished_on_failure

# A file-size limit stands for the full disk (no mount needed): each write past it fails with EFBIG, as a full
# disk's fail with ENOSPC; torch's writer meets both the same way.
SCRIPT = """
import gc, os, resource, signal, sys
import torch
from aotcuda.errors import PackageError
from aotcuda.lowering import pipeline
from aotcuda.lowering.archive_writer import archive_writer_finished_on_failure

class Tiny(torch.nn.Module):
    def forward(self, x):
        return x + 1

ep = torch.export.export(Tiny(), (torch.randn(2),))

def writes_a_package(ep, package_path, inductor_configs):  # AOTInductor's packaging, without its compile
    from torch.export.pt2_archive._package import PT2ArchiveWriter
    with PT2ArchiveWriter(package_path) as writer:
        writer.write_bytes("tiny/data/aotinductor/model/tiny.wrapper.so", bytes(1 << 20))

torch._inductor.aoti_compile_and_package = writes_a_package
private = os.path.join(sys.argv[1], ".tiny.pt2.1.x.partial")
os.mkdir(private)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
try:
    with archive_writer_finished_on_failure():
        pipeline._compile(ep, os.path.join(private, "tiny.pt2"), {})
except PackageError as exc:
    print("PackageError:", exc)
gc.collect()
print("alive")
"""


def test_a_package_write_that_fails_is_a_package_error_not_an_abort(tmp_path):
    cache = tmp_path / "inductor"
    cache.mkdir(mode=0o700)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0 and "terminate called" not in done.stderr, (done.returncode, done.stderr[-2000:])
    said = done.stdout
    assert f"PackageError: could not write the package into '{tmp_path}'" in said, said
    assert "free) or use a folder with room" in said and "(ulimit -f; it is 65536 bytes)" in said, said
    assert said.rstrip().endswith("alive")


def test_the_fix_is_entered_around_the_compile():
    assert any(fix.apply is archive_writer_finished_on_failure and "compile" in fix.steps for fix in torch_fixes.FIXES)


def test_a_folder_without_room_for_the_weights_is_refused_before_the_compile(tmp_path, monkeypatch):
    """The minutes of compile ended in a write that failed: a folder with less room than the program's weights (which
    the package holds) is said before it now, and nothing is compiled."""
    import shutil

    import pytest
    import torch

    import aotcuda
    from aotcuda.errors import PackageError

    class Weighty(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(256, 1024))  # 1 MiB
            self.same = self.table  # tied: counted once

        def forward(self, x):
            return x @ self.table

    def compiled(*args, **kwargs):
        raise AssertionError("compiled")

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compiled)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=600_000))
    with pytest.raises(PackageError, match=r"will not compile: the package's folder '.*' has 600,000 bytes free, less "
                                           r"than the program's weights \(1,048,576 bytes\)"):
        aotcuda.lower(Weighty().eval(), (torch.randn(2, 256),), device="cpu", package_path=tmp_path / "w.pt2")
    assert os.listdir(tmp_path) == []


def test_a_cache_folder_without_room_for_the_weights_is_refused_before_the_compile(tmp_path, monkeypatch):
    """Inductor's cache folder holds the weights twice during the compile (their object file and the library), and
    only the package's folder was checked: a Linear(1024, 1024) lowered with its cache on a 2 MiB tmpfs ended in
    a bare "C++ compile error" after the compile (the file-system breaker, 2026-12-06). It is said before it now."""
    import shutil

    import pytest
    import torch
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    import aotcuda
    from aotcuda.errors import PackageError

    def compiled(*args, **kwargs):
        raise AssertionError("compiled")

    usage, cache = shutil.disk_usage(tmp_path), os.path.realpath(cache_dir())
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compiled)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(
        free=600_000 if os.path.realpath(path) == cache else 1 << 40))
    with pytest.raises(PackageError, match=r"will not compile: Inductor's cache folder '.*' has 600,000 bytes free, "
                                           r"less than the [\d,]+ bytes the compile writes there \(the program's "
                                           r"weights, 1,048,576 bytes, twice: their object file and the library"):
        aotcuda.lower(torch.nn.Linear(256, 1024, bias=False).eval(), (torch.randn(2, 256),), device="cpu",
                      package_path=tmp_path / "w.pt2")
    assert os.listdir(tmp_path) == []
    # weights torch keeps out of the link (past 2 GB, force_mmap_weights, a binary blob) are there once
    with pytest.raises(PackageError, match=r"weights, 1,048,576 bytes, once: appended to the library, or in a file"):
        aotcuda.lower(torch.nn.Linear(256, 1024, bias=False).eval(), (torch.randn(2, 256),), device="cpu",
                      package_path=tmp_path / "w.pt2", inductor_configs={"aot_inductor.force_mmap_weights": True})
