"""The memory a new allocation of this process may take on the CPU: the machine's, its cgroup's, its rlimits'.

``psutil.virtual_memory().available`` is the machine's (/proc/meminfo's MemAvailable), which a process does not get
where a limit of its own is lower: a container's memory cgroup (Docker's ``--memory``, a Kubernetes pod's limit, a
Ray worker under a job's limit), whose excess the kernel answers with the OOM killer (SIGKILL, no error), or an
address-space limit (``ulimit -v``), whose excess fails the allocation. A bound that read the machine's alone let a
call's 16-byte expanded input be copied into 2 GiB inside a 1.5 GiB cgroup on a machine with 20 GiB free: the
process was killed (the amplification breaker, 2026-12-07). Nothing here raises: a limit that cannot be read
bounds nothing.
"""

from __future__ import annotations

import os

# Where this process's cgroups are read: /proc's files, and the mount points /proc/self/mountinfo names (tests point
# these at a tree of their own).
PROC_SELF = "/proc/self"
_UNLIMITED_V1 = 1 << 62  # cgroup v1 writes "no limit" as PAGE_COUNTER_MAX pages in bytes, 9223372036854771712


def available_cpu_bytes() -> int:
    """The least of: the machine's available memory, the room left under each memory cgroup this process is in
    (its own and every one above it, v1 and v2; reclaimable file pages counted as room), and the room left under
    its address-space and data-size rlimits."""
    import psutil

    rooms = [psutil.virtual_memory().available]
    rooms.extend(_cgroup_rooms())
    rooms.extend(_rlimit_rooms())
    return max(0, min(rooms))


def _read(path: str, most: int = 1 << 16) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read(most)
    except OSError:
        return None


def _number(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) < 40 else None


def _stat(folder: str, *keys: str) -> int:
    """The first of ``keys`` found in the folder's memory.stat (bytes), else 0."""
    found = {}
    for line in (_read(os.path.join(folder, "memory.stat")) or "").splitlines():
        key, _, value = line.partition(" ")
        found[key] = _number(value)
    return next((found[key] for key in keys if found.get(key) is not None), 0)


def _memory_mounts() -> list[tuple[str, str, int]]:
    """(mount point, the cgroup path its root is, version) of each cgroup file system holding the memory controller."""
    mounts = []
    for line in (_read(f"{PROC_SELF}/mountinfo", 1 << 22) or "").splitlines():
        fields = line.split(" ")
        if " - " not in line or len(fields) < 5:
            continue
        fs_type, _, super_options = line.split(" - ", 1)[1].partition(" ")
        options = super_options.split(" ", 1)[-1].split(",")
        if fs_type == "cgroup2":
            mounts.append((_unescaped(fields[4]), _unescaped(fields[3]), 2))
        elif fs_type == "cgroup" and "memory" in options:
            mounts.append((_unescaped(fields[4]), _unescaped(fields[3]), 1))
    return mounts


def _unescaped(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _own_paths() -> dict[int, str]:
    """{version: this process's cgroup path} for the memory hierarchy (v1) and the unified one (v2)."""
    paths = {}
    for line in (_read(f"{PROC_SELF}/cgroup") or "").splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            paths.setdefault(2, path)
        elif "memory" in controllers.split(","):
            paths[1] = path
    return paths


def _cgroup_rooms() -> list[int]:
    rooms = []
    paths = _own_paths()
    for mount, root, version in _memory_mounts():
        path = paths.get(version)
        if path is None:
            continue
        mount = os.path.normpath(mount)
        relative = os.path.relpath(path, root) if _within(path, root) else "."
        folder = os.path.normpath(os.path.join(mount, relative))
        if not _within(folder, mount):  # a path string prefix is no folder's (/cgroup/mem and /cgroup/memory/x)
            folder = mount
        while True:  # the process's own cgroup, then each above it up to the mount's root
            room = _folder_room(folder, version)
            if room is not None:
                rooms.append(room)
            parent = os.path.dirname(folder)
            if folder == mount or parent == folder:
                break
            folder = parent
    return rooms


def _within(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([os.path.normpath(path), os.path.normpath(folder)]) == os.path.normpath(folder)
    except ValueError:  # one relative, one absolute
        return False


def _folder_room(folder: str, version: int) -> int | None:
    if version == 2:
        limit, usage = _number(_read(os.path.join(folder, "memory.max"))), \
            _number(_read(os.path.join(folder, "memory.current")))
        reclaimable = _stat(folder, "inactive_file")
    else:
        limit, usage = _number(_read(os.path.join(folder, "memory.limit_in_bytes"))), \
            _number(_read(os.path.join(folder, "memory.usage_in_bytes")))
        reclaimable = _stat(folder, "total_inactive_file", "inactive_file")
    if limit is None or usage is None or limit >= _UNLIMITED_V1:  # "max", unreadable, or no limit
        return None
    return limit - usage + reclaimable


def _rlimit_rooms() -> list[int]:
    """The room under RLIMIT_AS (less the address space mapped, VmSize) and RLIMIT_DATA (less VmData)."""
    status = {}
    for line in (_read(f"{PROC_SELF}/status") or "").splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[-1] == "kB":
            status[key] = _number(parts[0])
    try:
        import resource
    except ImportError:  # no rlimits on this system
        return []
    rooms = []
    for limit_name, used_key in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        try:
            soft, _ = resource.getrlimit(getattr(resource, limit_name))
        except (AttributeError, ValueError, OSError):
            continue
        used = status.get(used_key)
        if soft != resource.RLIM_INFINITY and soft >= 0 and used is not None:
            rooms.append(soft - used * 1024)
    return rooms
