"""Packages made from a lowered one with an edit of their aotcuda signature (hostile and damaged cases)."""

import json
import zipfile


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
