"""Whether a folder is this user's alone: nobody else may write into it, nor rename it away and put another in its
place. Used where aotcuda builds or runs code from files in a folder: Inductor's cache (lowering/cache_folders.py) and
the temporary folder a package is extracted to (runtime/package.py).

The rule: the folder and every folder above it belong to this user or root, and none is writable by others, except
a sticky one above it (/tmp: each user's entries stay their own) and, where the caller allows it (a temporary
folder), the folder itself if sticky. A group's write bit counts unless the group is the user's own private group
(umask 002 makes folders group-writable for it) and no POSIX ACL names another user or group with
write (with an ACL, the group bits are its mask). Every symbolic link on the way belongs to this user or root (a
link is replaced by whoever may write its folder, which the same rule covers). This module imports neither torch
nor the rest of aotcuda (``temporary_folder_problem`` reads its switch where it is called).
"""

from __future__ import annotations

import functools
import os
import stat
import tempfile
import warnings

_PASSED_OVER_SAID: set[str] = set()  # the TMPDIR values already warned of in this process


def unsafe_folder(folder: str, sticky_ok: bool = False) -> str | None:
    """Why a user other than this one (or root) could write into ``folder`` or replace it, or None. A folder
    that does not exist yet is judged by the nearest folder above it that does. ``sticky_ok``: the folder may
    be writable by others if it is sticky (a temporary folder such as /tmp, where each user's entries are their
    own), as every folder above it may."""
    trusted = {os.geteuid(), 0}
    path = _absolute(folder)
    foreign = _foreign_link(path)
    if foreign is not None:
        return f"goes through the symbolic link {foreign[0]!r} of uid {foreign[1]}"
    real = os.path.realpath(path)
    below = []
    while not os.path.lexists(real) and os.path.dirname(real) != real:
        below.append(real)
        real = os.path.dirname(real)
    checked = real if not below else None  # the folder itself, when it exists
    if checked and not os.path.isdir(checked):
        return "is not a folder"
    while True:
        try:
            info = os.stat(real)
        except OSError as exc:
            return f"cannot be examined ({exc.strerror or exc} at {real!r})"
        writers = stat.S_IWOTH | (0 if _own_group(info.st_gid) else stat.S_IWGRP)
        shared, sticky, mode = info.st_mode & writers, info.st_mode & stat.S_ISVTX, stat.S_IMODE(info.st_mode)
        if info.st_uid not in trusted:
            return f"is owned by uid {info.st_uid}" if real == checked else \
                f"lies in {real!r}, owned by uid {info.st_uid}"
        acl_writer = _acl_writer(real, info) if info.st_mode & stat.S_IWGRP and not shared else None
        if acl_writer and not (sticky and (sticky_ok or real != checked)):
            where = "is" if real == checked else f"lies in {real!r}, which is"
            return (f"{where} writable by {acl_writer} through a POSIX ACL (mode {mode:#o}; getfacl lists it), so they "
                    "can put files there or rename what is there away")
        if shared and real == checked and not (sticky_ok and sticky):
            return f"is writable by other users{' and not sticky' if sticky_ok else ''} (mode {mode:#o})"
        if shared and not sticky:
            return f"lies in {real!r}, which other users may write into and which is not sticky (mode {mode:#o}), " \
                   "so they can rename it away and put their own in its place"
        if os.path.dirname(real) == real:
            return None
        real = os.path.dirname(real)


def entries_others_may_write(folder: str) -> tuple[int, str, str] | None:
    """(how many, the first found, why) of the entries inside ``folder`` (every depth, links not followed) that a user
    other than this one (or root) owns, or may write (the mode's bits, as ``unsafe_folder`` reads them, its ACL rule
    too), or None where there is none. ``unsafe_folder`` judges a folder and the folders above it; what is inside
    matters where others may pass through it (a 0755 cache folder, as torch makes /tmp/torchinductor_<user>): a
    process run with umask 000 leaves Inductor's sources 0666 and its folders 0777 there (breakproc, 2026-12-07:
    35 such entries after one lowering), and another user may rewrite a source Inductor compiles as it finds it, or a
    library it loads."""
    trusted, count, first = {os.geteuid(), 0}, 0, None
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
            except OSError:  # gone meanwhile
                continue
            writers = stat.S_IWOTH | (0 if _own_group(info.st_gid) else stat.S_IWGRP)
            why = (f"owned by uid {info.st_uid}" if info.st_uid not in trusted else
                   None if stat.S_ISLNK(info.st_mode) else
                   f"mode {stat.S_IMODE(info.st_mode):#o}" if info.st_mode & writers else
                   _acl_writer(path, info) if info.st_mode & stat.S_IWGRP else None)
            if why:
                count += 1
                first = first or (path, why if not why.startswith(("uid", "gid", "someone")) else f"writable by {why}")
    return None if first is None else (count, *first)


def umask_lets_others_write() -> int | None:
    """This process's umask where it leaves new files and folders writable by others (the other users' write bit, or
    the group's where the group is not the user's private one), else None."""
    mask = _umask()
    group_shared = not mask & stat.S_IWGRP and not _own_group(os.getegid())
    return mask if not mask & stat.S_IWOTH or group_shared else None


def _umask() -> int:
    """This process's umask, read without changing it where Linux shows it (/proc/self/status, Linux 4.7+): setting it
    to read it would give another thread's files of those microseconds another mode. Elsewhere it is set and put back
    at once, to 077 meanwhile (stricter, never looser, than any umask a thread may have)."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def mounted_noexec(folder: str) -> bool:
    """Whether ``folder`` is on a file system mounted noexec (a hardened /tmp, a container's noexec tmpfs), where no
    library made there can be opened: load's model libraries, Inductor's probes of the CPU's vector instructions."""
    try:
        return bool(os.statvfs(folder).f_flag & getattr(os, "ST_NOEXEC", 0))
    except OSError:  # not known: the loader says what it finds
        return False


def unsafe_file(path: str) -> str | None:
    """Why a user other than this one (or root) could put another file at ``path`` (a file that exists), or None: a
    symbolic link on the way to it, its own name included, of another user's (they may point it anywhere), or a folder
    it lies in that they may write into without the sticky bit, or rename away (``unsafe_folder``, a sticky folder
    allowed: each user's entries stay their own)."""
    path = _absolute(path)
    foreign = _foreign_link(path)
    if foreign is not None:
        return f"its path goes through the symbolic link {foreign[0]!r} of uid {foreign[1]}"
    folder = os.path.dirname(os.path.realpath(path))
    problem = unsafe_folder(folder, sticky_ok=True)
    return None if problem is None else f"its folder {folder!r} {problem}"


def _absolute(path) -> str:
    """``path`` made absolute but not normalized: abspath drops "link/.." as text, where the kernel follows the link
    first and ".." then leads to the target's folder ("home/safe/../cache" was judged as "home/cache"; breaker 2)."""
    path = os.fspath(path)
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def _foreign_link(path: str) -> tuple[str, int] | None:
    """The first symbolic link on the way to absolute ``path`` (its own name included) that a user other than this
    one or root owns, with that user's id; None where there is none."""
    trusted = {os.geteuid(), 0}
    for link in _links_on_the_way(path):
        owner = os.lstat(link).st_uid
        if owner not in trusted:
            return link, owner
    return None


def temporary_folder_problem(folder: str) -> str | None:
    """Why another user could write into ``folder`` or replace it, a temporary folder that may be sticky
    (``unsafe_folder(folder, sticky_ok=True)``), or None, also wherever AOTCUDA_TRUST_SHARED_FOLDERS is set: the user
    vouches for everyone who may write there. The rule of every folder aotcuda writes code or packages into and runs
    them from (extraction, lower()'s own folder, signing, Ray's files)."""
    from aotcuda import switches

    return None if switches.flag("AOTCUDA_TRUST_SHARED_FOLDERS") else unsafe_folder(folder, sticky_ok=True)


def temporary_folder() -> str:
    """The temporary folder (``tempfile.gettempdir()``), where load extracts packages and lower() builds and writes
    them, after ``say_if_tmpdir_passed_over``. PackageError where Python finds none it can write a file in (a
    read-only root and a TMPDIR that names no folder: tempfile's raw FileNotFoundError before, break-new 35)."""
    say_if_tmpdir_passed_over()
    try:
        return tempfile.gettempdir()
    except FileNotFoundError as exc:  # no candidate takes a file: a read-only root and a TMPDIR that names no folder
        from aotcuda.errors import PackageError, clipped

        why = clipped(exc.strerror or exc, 400)
        raise PackageError(f"no temporary folder can be written (Python's tempfile: {why}); set TMPDIR to a folder "
                           "of your own that you can write (e.g. mkdir -m 700 ~/tmp, then TMPDIR=~/tmp); nothing was "
                           "written") from None


def say_if_tmpdir_passed_over() -> None:
    """Once per process for each value, a warning where the environment's TMPDIR names a folder Python cannot use
    (missing, a file, not writable or searchable): Python's tempfile passes over it without a word for /tmp, /var/tmp
    or the working directory, and torch's Inductor cache follows it there. A user who set TMPDIR to keep packages and
    builds off a shared or small disk is told that they went elsewhere (the file-system breaker, 2026-12-06)."""
    wanted = os.environ.get("TMPDIR")
    if not wanted or wanted in _PASSED_OVER_SAID:
        return
    try:
        temp = tempfile.gettempdir()
    except FileNotFoundError:  # no folder at all: temporary_folder (or Inductor's cache check) says so
        return
    reason = _unusable_folder(wanted)
    if reason and not _names(wanted, temp):
        _PASSED_OVER_SAID.add(wanted)
        warnings.warn(f"aotcuda: TMPDIR={wanted[:200]!r} {reason}, so Python's tempfile uses {temp!r} instead (for "
                      "extracted packages, builds and Inductor's cache). Make that folder, or set TMPDIR to one you "
                      "can write", stacklevel=3)


def _names(wanted: str, temp: str) -> bool:
    """Whether ``temp``, the folder Python's tempfile chose, is the one TMPDIR's value ``wanted`` names. tempfile makes
    a relative TMPDIR absolute against the working directory of its first call and keeps the answer (gettempdir
    caches it): after a chdir, ``temp`` is still the folder the value named then, where the same value names a missing
    folder now (a false warning, break-new 35). So a relative value names any folder that ends with it (its leading
    ``..`` dropped): a relative TMPDIR passed over for a fallback of the same last names (``tmp`` for /tmp) goes
    without a word."""
    if os.path.realpath(wanted) == os.path.realpath(temp):
        return True
    if os.path.isabs(wanted):
        return False
    tail = os.sep.join(part for part in os.path.normpath(wanted).split(os.sep) if part not in ("..", "."))
    return bool(tail) and os.path.normpath(temp).endswith(os.sep + tail)


def _unusable_folder(folder: str) -> str | None:
    """Why ``folder`` cannot be a temporary folder for this user, or None: tempfile's own test is a file made there."""
    if not os.path.lexists(folder):
        return "does not exist"
    if not os.path.isdir(folder):
        return "is not a folder" if os.path.exists(folder) else "is a symbolic link to nothing"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "is not writable by this user"
    return None


# A POSIX access ACL as Linux stores it (the system.posix_acl_access attribute): a version word (2), then entries of
# (tag, permissions, id), little-endian; the tags of a named user and a named group, and the write permission.
_ACL_VERSION, _ACL_USER, _ACL_GROUP, _ACL_WRITE = 2, 0x02, 0x08, 0x02


def _acl_writer(path: str, info: os.stat_result) -> str | None:
    """"uid N" or "gid N", a user or group other than this user and the folder's own group whom ``path``'s POSIX ACL
    lets write into it, or None. Called where the group write bit is set (with an ACL, it is the ACL's mask, the most
    any named entry gets) and was taken for the user's private group (``_own_group``): the mode bits alone then read
    as "this user's alone" while the ACL lets others in (breakproc, 2026-12-07: a root folder of mode 0775 with
    ``user:65534:rwx`` passed, and uid 65534 wrote into it). A file system without ACLs has none."""
    try:
        acl = os.getxattr(path, "system.posix_acl_access")
    except OSError:  # no ACL (ENODATA), or a file system without them
        return None
    if len(acl) < 4 or int.from_bytes(acl[:4], "little") != _ACL_VERSION:
        return "someone (an ACL of an unknown format)"
    for start in range(4, len(acl) - 7, 8):
        tag, permissions, owner = (int.from_bytes(acl[start:start + 2], "little"),
                                   int.from_bytes(acl[start + 2:start + 4], "little"),
                                   int.from_bytes(acl[start + 4:start + 8], "little"))
        if not permissions & _ACL_WRITE:
            continue
        if tag == _ACL_USER and owner != os.geteuid():
            return f"uid {owner}"
        if tag == _ACL_GROUP and owner != info.st_gid:
            return f"gid {owner}"
    return None


def _own_group(gid: int) -> bool:
    """Whether ``gid`` is this user's private group (the convention of most Linux distributions, with umask 002:
    a group named as the user, the user's own primary group, no other member listed, nor any other user's primary
    group), whose write bit lets in nobody else: a folder made under that umask is group-writable and still this
    user's alone."""
    return _own_group_of(gid, os.geteuid(), os.getegid())


@functools.lru_cache(maxsize=64)  # asked for every entry of a cache folder's walk: ~50 us of lookups each
def _own_group_of(gid: int, uid: int, own_gid: int) -> bool:
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(uid).pw_name, grp.getgrgid(gid)
    except KeyError:  # no name for the user or the group (a container without those entries)
        return False
    if gid != own_gid or group.gr_name != user or not set(group.gr_mem) <= {user}:
        return False
    # the group file lists a group's secondary members only: a user whose primary group it is (its passwd entry) is a
    # member too, and may write where the group may (breakproc, 2026-12-07). Users the system enumerates (getpwall).
    return not any(entry.pw_gid == gid and entry.pw_uid != uid for entry in pwd.getpwall())


def _links_on_the_way(path: str) -> list[str]:
    """The symbolic links met while resolving ``path`` (absolute), each as the path it was met at."""
    links, done, todo, seen = [], os.sep, path.split(os.sep)[1:], 0
    while todo and seen < 40:  # the kernel's own bound on links in a path
        name = todo.pop(0)
        if name in ("", "."):
            continue
        current = os.path.dirname(done) if name == ".." else os.path.join(done, name)
        if name != ".." and os.path.islink(current):
            links.append(current)
            seen += 1
            target = os.readlink(current)
            base = os.sep if os.path.isabs(target) else done
            todo = [part for part in os.path.join(base, target).split(os.sep)[1:]] + todo
            done = os.sep
            continue
        done = current
    return links
