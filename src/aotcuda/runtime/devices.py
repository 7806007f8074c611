"""Which device a loaded package runs on, checked against the package and this machine."""

from __future__ import annotations

import os

import torch

from aotcuda.errors import Advice, PackageError
from aotcuda.runtime.package import ExtractedPackage

__all__ = ["resolve_device"]

_DEVICE_TYPES = ("cpu", "cuda")  # what the runtime drives (streams, CUDA graphs, handles)


def resolve_device(package: ExtractedPackage, device) -> torch.device:
    """The device a Program of ``package`` runs on: ``device`` (default: the package's device type, on CUDA the
    current device), checked against the package and this machine.

    Raises PackageError naming the fix when the package was built for another device type or for a device
    type aotcuda does not run, or when the device is not here (no CUDA, an index past the visible devices).
    """
    package_type = package.device_type
    if not package_type:
        raise PackageError(f"{package.path!r}: the model's metadata names no device (no AOTI_DEVICE_KEY); "
                           "the package is damaged or not from AOTInductor, lower the model again")
    if package_type not in _DEVICE_TYPES:
        raise PackageError(f"{package.path!r} was built for {package_type!r}; aotcuda runs packages built for "
                           f"{' or '.join(_DEVICE_TYPES)}: lower the model again with one of those devices")
    try:
        wanted = torch.device(device) if device is not None else torch.device(package_type)
    except (RuntimeError, TypeError) as exc:
        raise PackageError(f"device={device!r} is not a device ({exc}); pass e.g. 'cpu' or 'cuda:0'") from exc
    if wanted.type != package_type:
        raise PackageError(f"the package was built for {package_type} and cannot run on {wanted}; "
                           f"load it with device={package_type!r}, or lower the model again with device={wanted.type!r}",
                           advice=(Advice("device", package_type), Advice("device", wanted.type, relower=True)))
    if wanted.type == "cuda":
        if not torch.cuda.is_available():
            raise PackageError(f"{package.path!r} was built for CUDA, but torch sees no CUDA device here; run it "
                               "on a machine with a CUDA GPU, or lower the model again with device='cpu'",
                               advice=(Advice("device", "cpu", relower=True),))
        if wanted.index is None:
            wanted = torch.device("cuda", torch.cuda.current_device())
        count = torch.cuda.device_count()
        if wanted.index >= count:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            raise PackageError(f"device={str(wanted)!r}, but torch sees {count} CUDA device(s) here (cuda:0"
                               f"{'' if count == 1 else f' to cuda:{count - 1}'}"
                               f"{'' if visible is None else f'; CUDA_VISIBLE_DEVICES={visible!r}'}); pass one of those")
    return wanted
