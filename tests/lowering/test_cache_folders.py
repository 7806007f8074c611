"""Inductor's cache folder must be this user's alone: whoever can write into it writes the package (review 12).

Found by the breaker: with TORCHINDUCTOR_CACHE_DIR (or the default /tmp/torchinductor_<user>, made first by
someone else) a 0777 folder of uid 65534, that user replaced the wrapper source Inductor had cached between two
lowerings of one model, and the second package's library held their constructor, which ran at aotcuda.load.
"""

import errno
import os
import stat
import time
import zipfile

import pytest
import torch

import aotcuda
from aotcuda.errors import PackageError
from aotcuda.shared_folders import _own_group, unsafe_folder
from posix_acls import access_acl

OTHER_USER = 65534  # nobody


class Tiny(torch.nn.Module):
    def forward(self, x):
        return x * 3 + 1


def _owned_by_another_user(path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file of another user needs root")
    os.lchown(path, OTHER_USER, OTHER_USER)


def test_lower_refuses_a_cache_folder_another_user_owns_before_compiling(tmp_path, monkeypatch):
    planted = tmp_path / "torchinductor_victim"
    planted.mkdir()
    planted.chmod(0o777)
    _owned_by_another_user(planted)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(planted))
    with pytest.raises(PackageError, match=r"Inductor's cache folder .* is owned by uid 65534.*TORCHINDUCTOR_CACHE_DIR"):
        aotcuda.lower(Tiny(), (torch.randn(2, 4),), device="cpu", package_path=tmp_path / "tiny.pt2")
    assert os.listdir(planted) == [] and not (tmp_path / "tiny.pt2").exists()  # nothing compiled, nothing written
    from aotcuda.lowering.cache_folders import check_cache_folders

    monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", "1")  # the user vouches for everyone who can write there
    check_cache_folders()


def test_a_folder_others_can_write_or_replace_is_named(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert unsafe_folder(str(private)) is None
    assert unsafe_folder(str(private / "not" / "made" / "yet")) is None  # made later by Inductor, in ours

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o757)
    assert "writable by other users (mode 0o757)" in unsafe_folder(str(shared))
    shared.chmod(0o775)  # umask 002: group-writable, for the user's own private group only
    if _own_group(os.getegid()):
        assert unsafe_folder(str(shared)) is None
    if os.geteuid() == 0:
        os.chown(shared, -1, OTHER_USER)  # a group other users are in
        assert "writable by other users (mode 0o775)" in unsafe_folder(str(shared))

    open_parent = tmp_path / "open"
    open_parent.mkdir()
    open_parent.chmod(0o777)
    (open_parent / "cache").mkdir(mode=0o700)
    assert "not sticky" in unsafe_folder(str(open_parent / "cache"))  # they can rename ours away
    open_parent.chmod(0o777 | stat.S_ISVTX)  # as /tmp: only the owner renames
    assert unsafe_folder(str(open_parent / "cache")) is None


def test_a_folder_a_posix_acl_lets_others_write_into_is_named(tmp_path):
    """breakproc (2026-12-07): a folder of the user's private group whose ACL names another user or group with write
    read as this user's alone (its group bits, the ACL's mask, were taken for the private group's)."""
    for named, said in (({"user": OTHER_USER}, f"uid {OTHER_USER}"), ({"group": OTHER_USER}, f"gid {OTHER_USER}")):
        folder = tmp_path / f"shared_by_acl_{said.replace(' ', '_')}"
        folder.mkdir()
        folder.chmod(0o755)
        os.setxattr(folder, "system.posix_acl_access", access_acl(**named))
        expected = f"writable by {said} through a POSIX ACL (mode 0o775" if _own_group(folder.stat().st_gid) \
            else "writable by other users (mode 0o775)"
        assert expected in unsafe_folder(str(folder))
        assert expected in unsafe_folder(str(folder), sticky_ok=True)
        assert "through a POSIX ACL" in unsafe_folder(str(folder / "cache")) or "other users" in unsafe_folder(
            str(folder / "cache"))
        if _own_group(folder.stat().st_gid):  # sticky: the named user cannot rename what is ours in it
            folder.chmod(0o1775)
            assert unsafe_folder(str(folder / "cache")) is None
            assert "through a POSIX ACL" in unsafe_folder(str(folder))  # but may write into the folder itself
        os.removexattr(folder, "system.posix_acl_access")
        folder.chmod(0o755)
        assert unsafe_folder(str(folder)) is None


def test_a_link_or_a_folder_of_another_user_on_the_way_is_named(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(private)
    assert unsafe_folder(str(link)) is None  # our own link to our own folder
    _owned_by_another_user(link)
    assert f"symbolic link {str(link)!r} of uid 65534" in unsafe_folder(str(link / "cache"))

    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    (theirs / "cache").mkdir(mode=0o700)
    _owned_by_another_user(theirs)
    assert "owned by uid 65534" in unsafe_folder(str(theirs / "cache"))  # its owner can swap ours


def test_a_file_or_fifo_at_the_cache_path_is_named_not_raised_raw(tmp_path, monkeypatch):
    """A file or FIFO where the cache folder goes made torch's own makedirs raise a raw FileExistsError (after export
    on main; now before it, in our words)."""
    fifo = tmp_path / "cache"
    os.mkfifo(fifo)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(fifo))
    with pytest.raises(PackageError, match=r"Inductor's cache folder '.*cache' cannot be made \(File exists\); set "
                                           r"TORCHINDUCTOR_CACHE_DIR"):
        aotcuda.lower(Tiny(), (torch.randn(2, 4),), device="cpu", package_path=tmp_path / "tiny.pt2")
    assert unsafe_folder(str(fifo)) == "is not a folder"



def test_a_file_at_the_cache_path_is_named_when_torch_imports_its_compiler(tmp_path):
    """The breaker (2026-12-05): torch makes Inductor's cache folder as it imports its compiler (torch._dynamo's
    package cache, at module level), before check_cache_folders runs, and every import of aotcuda.lowering imports
    it: in a fresh process, a file where the folder goes (the default /tmp/torchinductor_<user>, which another user
    may put there first) made `aotcuda lower`, `demo`, `inspect` and `run --device` end in a raw FileExistsError
    traceback, and `aotcuda.lower` raise it (then an AssertionError at the next try). Each now names the folder."""
    import subprocess
    import sys

    planted = tmp_path / "torchinductor_victim"
    planted.write_text("not a folder")
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(planted)}
    named = f"Inductor's cache folder '{planted}' cannot be made (File exists); set TORCHINDUCTOR_CACHE_DIR"
    lowered = subprocess.run([sys.executable, "-m", "aotcuda", "lower", "aotcuda.models.attention:attention_block",
                              "-o", str(tmp_path / "block.pt2"), "--device", "cpu"],
                             capture_output=True, text=True, env=environment, timeout=300)
    assert lowered.returncode == 1 and named in lowered.stderr and "Traceback" not in lowered.stderr, lowered.stderr
    assert not (tmp_path / "block.pt2").exists()
    script = ("import aotcuda\nfor _ in range(2):\n    try:\n        aotcuda.lower\n"
              "    except aotcuda.PackageError as error:\n        print(error)\n")
    called = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment, timeout=300)
    assert called.stdout.count(named) == 2, called.stdout + called.stderr

def test_a_dot_dot_after_a_link_is_judged_where_the_kernel_takes_it(tmp_path):
    """Breaker 2: the check made the path absolute with os.path.abspath, which drops ``link/..`` as text, where the
    kernel follows the link first and ``..`` then leads to the target's folder: ``home/safe/../cache`` (safe a link of
    this user's to ``shared/sub``) passed as ``home/cache``, and Inductor wrote into ``shared``, 0777 and another
    user's. Now the path is judged as the kernel resolves it."""
    shared, home = tmp_path / "shared", tmp_path / "home"
    (shared / "sub").mkdir(parents=True)
    shared.chmod(0o777)
    home.mkdir(mode=0o700)
    (home / "safe").symlink_to(shared / "sub")
    assert os.path.realpath(home / "safe" / ".." / "cache") == str(shared / "cache")
    problem = unsafe_folder(f"{home}/safe/../cache")
    assert problem is not None and "shared" in problem, problem
    assert unsafe_folder(str(shared / "cache")) == problem


def test_no_package_is_written_into_a_temporary_folder_another_user_could_replace(tmp_path, monkeypatch):
    """lower() without package_path, and the demo, write the package into a new 0700 folder of TMPDIR, and the
    demo then loads it from there: where TMPDIR is writable by others without the sticky bit (a shared scratch
    folder), another user renames that folder away and puts their own at its path (the breaker measured it on the
    folder serve makes for Ray, 2026-12-06), so the package written and loaded would be theirs. Refused before the
    export, with the fix; a package_path of the user's own is taken as before; AOTCUDA_TRUST_SHARED_FOLDERS=1 too."""
    import tempfile

    from aotcuda.demo import run_demo

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.delenv("AOTCUDA_TRUST_SHARED_FOLDERS", raising=False)
    (tmp_path / "inductor").mkdir(mode=0o700)  # Inductor's cache elsewhere, of this user's alone
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    says = r"will not write {} into the temporary folder '.*shared': it is writable by other users and not sticky"
    with pytest.raises(PackageError, match=says.format("the package")):
        aotcuda.lower(Tiny(), (torch.randn(2, 4),), device="cpu")
    with pytest.raises(PackageError, match=says.format("the demo's package")):
        run_demo("cpu")
    assert os.listdir(shared) == []  # nothing made there
    from aotcuda.lowering.cache_folders import check_temporary_folder

    shared.chmod(0o1777)  # sticky, as /tmp
    check_temporary_folder("the package")
    shared.chmod(0o777)
    monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", "1")
    check_temporary_folder("the package")


def test_a_cache_folder_mounted_noexec_is_refused_before_compiling(tmp_path, monkeypatch, noexec_mount):
    """Found by the breaker (2026-12-06, evening): with TMPDIR (so Inductor's cache folder) on a file system mounted
    noexec, lower() wrote a package without a word, every CPU kernel compiled without vector instructions (its
    metadata: AOTI_CPU_ISA INVALID_VEC_ISA): Inductor probes the CPU by loading a library it builds there, which the
    mount refuses. Now refused before compiling, naming the mount and the fix (the user's vouching for the folder's
    writers changes nothing here). The mount flag is statvfs's answer for the folder: mounting needs privileges; a
    real noexec tmpfs gave the same refusal."""
    from aotcuda.lowering.cache_folders import check_cache_folders

    cache = tmp_path / "inductor"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    noexec_mount(cache)
    for trusted in ("0", "1"):
        monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", trusted)
        with pytest.raises(PackageError, match=r"will not compile: Inductor's cache folder '.*inductor' is on a file "
                                               r"system mounted noexec.*compiled without them\. Set "
                                               r"TORCHINDUCTOR_CACHE_DIR to a folder on a file system that allows "
                                               r"running code"):
            check_cache_folders("cpu")
    check_cache_folders("cuda")  # a CUDA lowering: left as it was (its kernels are not the CPU probe's)
    noexec_mount(None)
    check_cache_folders()


def test_a_precompiled_header_folder_others_can_write_is_refused_with_a_private_cache(tmp_path, monkeypatch):
    """The breaker (2026-12-06, process): torch keeps its precompiled headers in ``$TMPDIR/torchinductor_<user>/
    precompiled_headers`` (codecache ``_HEADER_DIR``, fixed at its import) whatever TORCHINDUCTOR_CACHE_DIR says, and
    compiles the header it finds at a header's hash path (a name the same for every user of one torch) into every
    wrapper: with a private TORCHINDUCTOR_CACHE_DIR (aotcuda's own advice) and that folder 0777 in a sticky /tmp,
    uid 65534's planted header went into the package and its constructor ran at load. Refused now before compiling,
    naming the folder and the fix (TMPDIR); the on-disk caches torch unpickles from the default folder alike."""
    import tempfile

    import torch._inductor.codecache as codecache

    from aotcuda.lowering.cache_folders import check_cache_folders

    sticky = tmp_path / "st"  # a stand-in for /tmp
    sticky.mkdir()
    sticky.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(sticky))
    monkeypatch.delenv("AOTCUDA_TRUST_SHARED_FOLDERS", raising=False)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(private))
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    headers = os.path.join(default_cache_dir(), "precompiled_headers")
    monkeypatch.setattr(codecache, "_HEADER_DIR", headers)
    check_cache_folders("cpu")  # made here, as torch makes them: this user's alone
    assert os.path.isdir(headers)
    os.chmod(headers, 0o777)  # as another user who made it first would leave it
    with pytest.raises(PackageError, match=r"will not compile: torch's precompiled-header folder '.*precompiled_headers"
                                           r"' is writable by other users .*Start the process with TMPDIR set to a "
                                           r"folder of your own"):
        check_cache_folders("cpu")
    os.chmod(headers, 0o700)
    os.chmod(default_cache_dir(), 0o777)
    with pytest.raises(PackageError, match=r"torch's default cache folder '.*torchinductor_.*' is writable by other"):
        check_cache_folders("cuda")
    monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", "1")
    check_cache_folders("cpu")


def test_a_cache_folder_holding_entries_others_may_write_is_refused(tmp_path, monkeypatch):
    """breakproc (2026-12-07): the rule judged the cache folder and the folders above it; torch makes its default one
    0755, which others may pass through, and a lowering run with umask 000 left 35 entries in it that others may write
    (sources 0666, folders and libraries 0777): uid 65534 appended to a cached wrapper source, which Inductor compiles
    as it finds it. Such entries, and entries another user owns, are refused until fixed."""
    from aotcuda.lowering.cache_folders import check_cache_folders

    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o755)  # as torch makes /tmp/torchinductor_<user>
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    check_cache_folders()
    source = cache / "cw" / "cwxyz.wrapper.cpp"
    source.parent.mkdir()
    source.write_text("// a cached source")
    source.chmod(0o666)  # what umask 000 leaves
    with pytest.raises(PackageError, match=r"will not compile: Inductor's cache folder '.*cache' holds 1 entry another "
                                           r"user owns or may write \(e.g. '.*cwxyz.wrapper.cpp', mode 0o666; .*chmod -R "
                                           r"go-w it"):
        check_cache_folders()
    source.chmod(0o644)
    source.parent.chmod(0o777)
    with pytest.raises(PackageError, match=r"holds 1 entry .*'.*/cw', mode 0o777"):
        check_cache_folders()
    source.parent.chmod(0o755)
    check_cache_folders()
    if os.geteuid() == 0:  # an entry another user owns: they may rewrite it whatever its mode
        os.lchown(source, OTHER_USER, OTHER_USER)
        with pytest.raises(PackageError, match=r"holds 1 entry .*cwxyz.wrapper.cpp', owned by uid 65534"):
            check_cache_folders()


def test_a_umask_that_lets_others_write_is_refused(tmp_path, monkeypatch):
    """breakproc (2026-12-07): under umask 000 every file and folder Inductor makes in its cache is writable by others
    (the test above): refused before the compile makes them."""
    from aotcuda.lowering.cache_folders import check_cache_folders

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    check_cache_folders()
    before = os.umask(0)
    try:
        with pytest.raises(PackageError, match=r"will not compile: this process's umask is 000, so the sources and "
                                               r"libraries Inductor writes in its cache folder .* would be writable by "
                                               r"other users.*Run with umask 022"):
            check_cache_folders()
        monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", "1")
        check_cache_folders()
    finally:
        os.umask(before)


def test_a_group_another_user_has_as_primary_group_is_no_private_group(tmp_path, monkeypatch):
    """breakproc (2026-12-07): the group file lists a group's secondary members only, so a group named as the user with
    no member listed was taken for the user's private group even where another user's passwd entry makes it their
    primary group: a folder group-writable for it passed as the user's alone, though that user may write into it.
    (Editing the system's passwd needs privileges: its enumeration stands in.)"""
    import pwd

    from aotcuda import shared_folders

    own_gid = os.getegid()
    if not _own_group(own_gid):  # the user has no private group here: a group write bit is refused anyway
        return
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    os.chown(shared, -1, own_gid)
    assert unsafe_folder(str(shared)) is None
    entries = pwd.getpwall()
    other = pwd.struct_passwd(("mallory", "x", 4242, own_gid, "", "/home/mallory", "/bin/sh"))
    forget = getattr(shared_folders, "_own_group_of", None)  # the answers kept per group
    monkeypatch.setattr(pwd, "getpwall", lambda: [*entries, other])
    forget and forget.cache_clear()
    try:
        assert "writable by other users (mode 0o775)" in (unsafe_folder(str(shared)) or "")
    finally:
        monkeypatch.undo()
        forget and forget.cache_clear()


WEIGHT = 1234.5678  # a value whose bytes are found where the weights are


def _holding_the_weights(folder) -> list[str]:
    pattern = torch.full((8,), WEIGHT).numpy().tobytes()
    found = []
    for here, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(here, name)
            with open(path, "rb") as file:
                if pattern in file.read():
                    found.append(path)
    return found


def _readable_by_others(path: str, root: str) -> bool:
    """Whether the group or other users may read ``path`` from ``root`` down: every folder on the way searchable by
    them, the file readable (the folders above ``root`` are the test's own, private)."""
    folders, here = [], os.path.dirname(path)
    while True:
        folders.append(here)
        if here == root:
            break
        here = os.path.dirname(here)
    return any(all(os.stat(folder).st_mode & search for folder in folders) and os.stat(path).st_mode & read
               for search, read in ((stat.S_IXGRP, stat.S_IRGRP), (stat.S_IXOTH, stat.S_IROTH)))


def test_the_weights_a_lowering_leaves_in_inductors_cache_are_no_other_users_to_read(tmp_path, monkeypatch):
    """fixopen (2026-12-07): AOTInductor links the weights into the library it leaves in Inductor's cache folder, which
    torch makes 0755 (its folders and the library alike): any local user could copy them. A folder the user chose keeps
    its mode; the folder of the program's files is made 0700 after the compile. The package still matches eager."""
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o755)  # as torch makes /tmp/torchinductor_<user>, or a user their own
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    model = torch.nn.Linear(32, 32)
    with torch.no_grad():
        model.weight.fill_(WEIGHT)
    path = tmp_path / "linear.pt2"
    aotcuda.lower(model, (torch.randn(2, 32),), device="cpu", package_path=path)
    holding = _holding_the_weights(cache)
    assert holding, "the library holds the weights"
    from aotcuda.lowering.private_weights import program_folders

    # the folder is found from the package, without a look into the cache's other folders (fix39)
    assert program_folders(str(path), str(cache)) == sorted({str(cache / os.path.relpath(p, cache).split(os.sep)[0])
                                                             for p in holding})
    assert [p for p in holding if _readable_by_others(p, str(cache))] == []
    assert stat.S_IMODE(cache.stat().st_mode) == 0o755
    x = torch.randn(2, 32)
    with aotcuda.load(path) as program:
        torch.testing.assert_close(program(x), model(x), rtol=1e-5, atol=1e-2)


def test_torchs_default_cache_folder_is_made_private_before_the_compile(tmp_path, monkeypatch):
    """torch's default folder ($TMPDIR/torchinductor_<user>, 0755 as torch makes it) is made 0700 once checked, so the
    weights the compile writes there are never reachable by others, not even while it runs; a folder the user chose
    (TORCHINDUCTOR_CACHE_DIR) keeps its mode."""
    import tempfile

    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from aotcuda.lowering.cache_folders import check_cache_folders

    temp = tmp_path / "tmp"
    temp.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delenv("AOTCUDA_TRUST_SHARED_FOLDERS", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # torch sets it to the default at its first look
    check_cache_folders("cpu")
    assert str(temp) in default_cache_dir() and stat.S_IMODE(os.stat(default_cache_dir()).st_mode) == 0o700
    os.chmod(default_cache_dir(), 0o755)
    monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", "1")  # trusted writers are no licence to read the weights
    check_cache_folders("cpu")
    assert stat.S_IMODE(os.stat(default_cache_dir()).st_mode) == 0o700
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    chosen.chmod(0o755)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(chosen))
    check_cache_folders("cpu")
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o755


@pytest.mark.parametrize("root_mode, folder_mode, after", [
    (0o755, 0o755, 0o700),  # one user's chosen cache: the group's access goes too
    (0o2775, 0o2775, 0o2770),  # a team's shared cache (group-writable, setgid): the group keeps it, others lose it
], ids=["one user's cache", "a team's cache"])
def test_a_programs_folder_in_a_chosen_cache_keeps_what_its_group_shares(tmp_path, monkeypatch, root_mode, folder_mode,
                                                                         after):
    """review (2026-12-07): the folder of a program's files in a cache the user chose was made 0700 after the compile,
    also where that cache is a team's (group-writable, setgid): the folder's name is the hash of the generated code, so
    another member lowering the same model writes into the same folder, and their compile failed with PermissionError.
    Now others lose their access, the group keeps its own where the cache is the group's to write, and setgid stays."""
    from aotcuda.lowering.private_weights import make_program_files_private

    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(root_mode)
    folder = cache / "cabc123"
    folder.mkdir()
    folder.chmod(folder_mode)
    (folder / "cabc123.wrapper.so").write_bytes(b"weights")
    other = cache / "cother"  # another program's folder: left as it is
    other.mkdir()
    other.chmod(0o755)
    package = tmp_path / "model.pt2"
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("model/data/aotinductor/model/cabc123.wrapper.so", b"weights")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    assert make_program_files_private(str(package)) == [str(folder)]
    assert stat.S_IMODE(folder.stat().st_mode) == after
    assert stat.S_IMODE(other.stat().st_mode) == 0o755


def _program_in_a_cache(tmp_path, others: int, note: str | None = None, names=("cwrap.wrapper.so",)):
    """A cache folder of ``others`` folders of other programs (0755) and the program's ``cprog`` (0755, holding its
    wrapper source and library), and a package whose kernel source opens with torch's line naming ``note`` (by
    default the program's wrapper source) and which lists ``names`` among its compile's files."""
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o755)
    for index in range(others):
        folder = cache / f"cother{index}"
        folder.mkdir()
        folder.chmod(0o755)
        (folder / f"cother{index}.wrapper.so").write_bytes(b"their weights")
    program = cache / "cprog"
    program.mkdir()
    program.chmod(0o755)
    (program / "cwrap.wrapper.cpp").write_text("// the wrapper")
    (program / "cwrap.wrapper.so").write_bytes(b"weights")
    package = tmp_path / "model.pt2"
    note = str(program / "cwrap.wrapper.cpp") if note is None else note
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("model/data/aotinductor/model/ckern.kernel.cpp",
                         f"// Triton kernels are embedded as comments in {note}\n\nextern \"C\" void k() {{}}\n")
        for name in names:
            archive.writestr(f"model/data/aotinductor/model/{name}", b"weights")
    return cache, program, package


@pytest.mark.parametrize("root_mode, folder_mode, after", [(0o755, 0o755, 0o700), (0o2775, 0o2775, 0o2770)],
                         ids=["one user's cache", "a team's cache"])
def test_the_programs_folder_is_made_private_without_a_look_into_the_caches_other_folders(tmp_path, monkeypatch,
                                                                                         root_mode, folder_mode, after):
    """fix39: after every compile each folder of Inductor's cache was looked into for the package's file names (11 ms
    for 377 folders; 300 here), where the cache folder is private too. The package's kernel source names its folder
    (torch's first line of it); only that one is looked at, and made private as before (a team's cache: its group
    keeps its access, setgid stays)."""
    from aotcuda.lowering.private_weights import make_program_files_private

    cache, program, package = _program_in_a_cache(tmp_path, others=300)
    cache.chmod(root_mode)
    program.chmod(folder_mode)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    looked_at = []
    lstat, scandir = os.lstat, os.scandir
    monkeypatch.setattr(os, "lstat", lambda path, *a, **k: looked_at.append(str(path)) or lstat(path, *a, **k))
    monkeypatch.setattr(os, "scandir", lambda path=".": looked_at.append(str(path)) or scandir(path))
    assert make_program_files_private(str(package)) == [str(program)]
    monkeypatch.undo()
    assert looked_at and [path for path in looked_at if not path.startswith(str(program))] == []
    assert stat.S_IMODE(program.stat().st_mode) == after
    assert {stat.S_IMODE((cache / f"cother{index}").stat().st_mode) for index in range(300)} == {0o755}


@pytest.mark.parametrize("note", [
    "{victim}/cwrap.wrapper.cpp",  # a folder outside the cache
    "{cache}/../victim/cwrap.wrapper.cpp",
    "{cache}/cprog/../../victim/cwrap.wrapper.cpp",
    "{cache}/clink/cwrap.wrapper.cpp",  # a link in the cache to a folder outside it
    "{cache}/../cwrap.wrapper.cpp",
    "{cache}/cprog/cwrap.wrapper.cpp/../../../victim/cwrap.wrapper.cpp",
    "{cache}/cprog/../cwrap.wrapper.cpp",
    "cwrap.wrapper.cpp",
], ids=["outside", "dot-dot above", "dot-dot inside", "link", "the cache's parent", "through the file", "the cache",
        "relative"])
@pytest.mark.parametrize("names", [("cwrap.wrapper.so",), ("cwrap.wrapper.so", "..", ".")], ids=["", "dot names"])
def test_a_package_naming_anything_but_a_folder_of_the_cache_changes_nothing_outside_it(tmp_path, monkeypatch, note,
                                                                                        names):
    """fix39: the folder comes from a file of the package, so a name there that leaves the cache folder (``..``, an
    absolute path, a link) must reach nothing outside it: the whole cache is then looked into, as before, and the
    program's folder still made private."""
    from aotcuda.lowering.private_weights import make_program_files_private

    tmp_path.chmod(0o755)  # the cache folder's parent, which a name ending in '..' gives
    victim = tmp_path / "victim"
    victim.mkdir()
    victim.chmod(0o755)
    (victim / "cwrap.wrapper.cpp").write_text("// another's")
    (victim / "cwrap.wrapper.so").write_bytes(b"another's")
    cache, program, package = _program_in_a_cache(
        tmp_path, others=3, note=note.format(victim=victim, cache=tmp_path / "cache"), names=names)
    (cache / "clink").symlink_to(victim)
    (tmp_path / "cwrap.wrapper.cpp").write_text("// beside the cache")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    assert make_program_files_private(str(package)) == [str(program)]
    assert stat.S_IMODE(victim.stat().st_mode) == 0o755
    assert stat.S_IMODE(cache.stat().st_mode) == 0o755 and stat.S_IMODE(tmp_path.stat().st_mode) == 0o755
    assert {stat.S_IMODE((cache / f"cother{index}").stat().st_mode) for index in range(3)} == {0o755}


def test_the_weights_a_failed_compile_leaves_in_a_chosen_cache_are_no_other_users_to_read(tmp_path, monkeypatch):
    """review39a (2026-12-07): a compile that failed after AOTInductor had linked the library (a full disk while the
    package was written) left its folder and the library 0755 in a chosen cache, the weights readable by every local
    user: the folder was made private only after a success, found from the package. Now every program's folder the
    compile made or changed is made private on any outcome; the compile's own error still comes out, and the cache's
    other folders, and the cache folder itself, keep their modes."""
    import torch._inductor.package

    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o755)
    other = cache / "cother"  # another program's folder, from before this compile
    other.mkdir()
    other.chmod(0o755)
    old = time.time() - 3600
    os.utime(other, (old, old))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch._inductor.package, "package_aoti", full)  # torch imports it at each call
    model = torch.nn.Linear(32, 32)
    with torch.no_grad():
        model.weight.fill_(WEIGHT)
    with pytest.raises(PackageError, match="No space left on device|no room"):
        aotcuda.lower(model, (torch.randn(2, 32),), device="cpu", package_path=tmp_path / "linear.pt2")
    holding = _holding_the_weights(cache)
    assert holding, "the library holds the weights"
    assert [p for p in holding if _readable_by_others(p, str(cache))] == []
    assert stat.S_IMODE(cache.stat().st_mode) == 0o755 and stat.S_IMODE(other.stat().st_mode) == 0o755


@pytest.mark.parametrize("error", [lambda: OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt],
                         ids=["an error", "an interrupt"])
@pytest.mark.parametrize("root_mode, after", [(0o755, 0o700), (0o2775, 0o2770)],
                         ids=["one user's cache", "a team's cache"])
def test_a_compile_that_raises_leaves_no_folder_it_wrote_readable_by_others(tmp_path, monkeypatch, error, root_mode,
                                                                           after):
    """review39a: what a compile raises, KeyboardInterrupt too, comes out as it was, after the program's folders it made
    or changed (a new one, and one it wrote into) are made private by the rule a success follows; a program's folder
    it did not touch, torch's shared folders it wrote into (locks, kernels), a link to a folder elsewhere and the cache
    folder keep their modes. An error of that step is a note on the compile's own error."""
    from aotcuda.lowering import private_weights
    from aotcuda.lowering.private_weights import program_files_kept_private

    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(root_mode)
    old = time.time() - 3600
    untouched, reused, locks = cache / "cuntouched", cache / "creused", cache / "locks"
    for folder in (untouched, reused, locks):
        folder.mkdir()
        folder.chmod(root_mode)
        (folder / f"{folder.name}.wrapper.cpp").write_text("// the wrapper")
        os.utime(folder, (old, old))
    (locks / "locks.wrapper.cpp").unlink()  # torch's, every compile's: no program's folder
    os.utime(locks, (old, old))
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o755)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    raised = error()
    with pytest.raises(type(raised)) as caught:
        with program_files_kept_private(str(tmp_path / "never.pt2")):
            made = cache / "cnew"
            made.mkdir()
            made.chmod(root_mode)
            (made / "cnew.wrapper.cpp").write_text("// the wrapper")
            (made / "cnew.wrapper.so").write_bytes(b"weights")
            (reused / "creused.wrapper.so").write_bytes(b"weights")
            (locks / "cnew.lock").write_bytes(b"")
            kernels = cache / "3g"  # a kernel folder of torch's, shared by every compile
            kernels.mkdir()
            kernels.chmod(root_mode)
            (cache / "clink").symlink_to(outside)
            raise raised
    assert caught.value is raised and not getattr(raised, "__notes__", None)
    assert stat.S_IMODE(made.stat().st_mode) == after and stat.S_IMODE(reused.stat().st_mode) == after
    assert {stat.S_IMODE(folder.stat().st_mode) for folder in (untouched, locks, kernels)} == {root_mode}
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755 and stat.S_IMODE(cache.stat().st_mode) == root_mode

    def broken(before):
        raise OSError(errno.EIO, "Input/output error")

    raised = error()
    monkeypatch.setattr(private_weights, "make_folders_written_since_private", broken)
    with pytest.raises(type(raised)) as caught:
        with program_files_kept_private(str(tmp_path / "never.pt2")):
            raise raised
    assert caught.value is raised
    assert "were not made private (OSError: [Errno 5] Input/output error)" in caught.value.__notes__[-1]
