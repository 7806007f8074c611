"""How an AOTInductor package launches its kernels: the launch sites in its generated C++ wrapper, plain
(``launchKernel``) and programmatic dependent (``launchKernelPdl``, lowering/dependent_launch.py).

    python3 benchmarks/scripts/package_launches.py PACKAGE.pt2 [...]
"""

import re
import sys
import zipfile


def launch_sites(path: str) -> dict[str, int]:
    with zipfile.ZipFile(path) as archive:
        sources = [archive.read(n).decode(errors="replace") for n in archive.namelist() if n.endswith(".cpp")]
    text = "\n".join(sources)
    return {"plain": len(re.findall(r"\blaunchKernel\(\s*kernels_\.", text)),
            "dependent": len(re.findall(r"\blaunchKernelPdl\(\s*kernels_\.", text))}


if __name__ == "__main__":
    for package in sys.argv[1:]:
        print(package, launch_sites(package))
