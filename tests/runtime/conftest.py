"""Packages shared by the runtime tests: each AOTInductor compile costs ~10-40 s, so build each once."""

import pytest
import torch
from runtime_programs import Structured, build_package, twice_package


@pytest.fixture(scope="session")
def twice_pt2(tmp_path_factory):
    """The Twice program for the CPU, batch dim dynamic in [2, 64], with an aotcuda signature."""
    return twice_package(tmp_path_factory.mktemp("twice") / "twice.pt2")


@pytest.fixture(scope="session")
def twice_unsigned_pt2(tmp_path_factory, twice_pt2):
    """The same package without the signature entry (as torch writes it): only count/device checks."""
    import zipfile

    path = tmp_path_factory.mktemp("twice_unsigned") / "twice.pt2"
    with zipfile.ZipFile(twice_pt2) as source, zipfile.ZipFile(path, "w") as target:
        for info in source.infolist():
            if not info.filename.endswith("aotcuda/signature.json"):
                target.writestr(info, source.read(info))
    return str(path)


@pytest.fixture(scope="session")
def structured_pt2(tmp_path_factory):
    torch.manual_seed(0)
    module = Structured().eval()
    args = (torch.randn(5, 4),)
    kwargs = {"extra": {"scale": torch.randn(5, 3)}, "use_cache": False}
    path = build_package(module, args, tmp_path_factory.mktemp("structured") / "structured.pt2", kwargs=kwargs)
    return path, module


@pytest.fixture(scope="session")
def stateful_pt2(tmp_path_factory):
    """The Stateful program (runtime_programs.Stateful) for the CPU, through aotcuda.lower."""
    from runtime_programs import stateful_package

    return stateful_package(tmp_path_factory.mktemp("stateful") / "stateful.pt2")


@pytest.fixture(scope="session")
def scaled_pt2(tmp_path_factory):
    """Scaled lowered by aotcuda.lower with the keywords scale=2.0, use_relu=True (neither forward's default)."""
    import aotcuda
    from runtime_programs import Scaled

    path = tmp_path_factory.mktemp("scaled") / "scaled.pt2"
    aotcuda.lower(Scaled(), (torch.randn(3, 4),), {"scale": 2.0, "use_relu": True}, device="cpu", package_path=path)
    return str(path)


@pytest.fixture(scope="session")
def scaled_default_pt2(tmp_path_factory):
    """Scaled exported with scale=1.0 (its default) passed positionally, use_relu left at its default."""
    from runtime_programs import Scaled

    return build_package(Scaled(), (torch.randn(3, 4), 1.0), tmp_path_factory.mktemp("scaled1") / "scaled.pt2")
