"""Packages signed with a key (aotcuda.package_tags): under the key, load takes the package it signed and refuses
one without a tag, of another key, or with any entry it reads edited since (the package breaker's edited
signature, which ended the process with SIGSEGV, first of all); without a key, a signed package loads as before.

The Twice package is compiled once (the runtime's shared fixture) and signed by re-packing copies of it; one
test lowers a small model with a key through aotcuda.lower."""

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch
from click.testing import CliRunner
from runtime_programs import Twice, with_edited_signature

from aotcuda.errors import PackageError, SigningKeyError
from aotcuda.package_tags import sign_package, signing_key
from aotcuda.runtime.archive import ArchiveLimits
from aotcuda.runtime.program import load


def key_file(folder, name="aotcuda.key", size=32, mode=0o600):
    path = folder / name
    path.write_bytes(os.urandom(size))
    path.chmod(mode)
    return str(path)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    return key_file(folder, "right.key"), key_file(folder, "other.key")


@pytest.fixture(scope="module")
def signed_pt2(twice_pt2, keys, tmp_path_factory):
    """A copy of the Twice package, signed with the right key."""
    path = tmp_path_factory.mktemp("signed") / "twice.pt2"
    shutil.copyfile(twice_pt2, path)
    sign_package(path, keys[0])
    return str(path)


def assert_like_eager(program, batches=(2, 5, 64)):
    for batch in batches:
        x = torch.randn(batch, 4)
        for got, want in zip(program(x), Twice()(x), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def edited_entry(source, target, suffix, edit):
    """A copy of the package at ``source`` whose one entry ending in ``suffix`` holds ``edit(its bytes)``."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, edit(data) if info.filename.endswith(suffix) else data)
    return str(target)


def json_edit(change):
    def edit(data):
        value = json.loads(data)
        change(value)
        return json.dumps(value).encode()
    return edit


def widened(signature):
    """The package breaker's edit: x (batch in [2, 2**31], 1), outputs (batch, 4)."""
    batch = {"expr": "s77", "min": 2, "max": 2**31}
    signature["inputs"][0].update(shape=[batch, 1], strides=[1, 1])
    for spec in signature["outputs"]:
        spec["shape"] = [batch, 4]


def flipped_byte(data):
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1:]


EDITS = {  # what is edited: (entry suffix, edit of its bytes)
    "signature shape range": ("aotcuda/signature.json", json_edit(widened)),
    "signature dtype": ("aotcuda/signature.json",
                        json_edit(lambda s: s["inputs"][0].update(dtype="float64"))),
    "metadata ISA": ("wrapper_metadata.json", json_edit(lambda m: m.update(AOTI_CPU_ISA="AVX2"))),
    "metadata device": ("wrapper_metadata.json", json_edit(lambda m: m.update(AOTI_DEVICE_KEY="cuda"))),
    "library bytes": ("wrapper.so", flipped_byte),
}


def test_a_signed_package_loads_under_its_key_and_matches_eager(signed_pt2, keys):
    with open(keys[0], "rb") as file:
        as_bytes = file.read()
    for key in (keys[0], as_bytes):  # a key file's path, or the key's bytes
        with load(signed_pt2, signing_key=key) as program:
            assert_like_eager(program)


@pytest.mark.parametrize("edit", list(EDITS))
def test_each_entry_edited_after_signing_is_refused_under_the_key(signed_pt2, keys, tmp_path, edit):
    suffix, change = EDITS[edit]
    path = edited_entry(signed_pt2, tmp_path / "edited.pt2", suffix, change)
    # an edit of another length is refused by its size, before anything is read; one of the same, by its digest
    with pytest.raises(PackageError, match=r"was altered after it was signed: its entries \['twice/[^]]*"
                                           + suffix.replace(".", r"\.") + r"'\] (are not what was signed\. Nothing "
                                           r"of it was used \(its model library was not opened\)|declare other sizes "
                                           r"than were signed \([^)]*\)\. Nothing of it was extracted or used)\. Lower "
                                           r"the model again with the key"):
        load(path, signing_key=keys[0])


def test_an_entry_added_or_removed_after_signing_is_refused_under_the_key(signed_pt2, keys, tmp_path):
    added = tmp_path / "added.pt2"
    shutil.copyfile(signed_pt2, added)
    with zipfile.ZipFile(added, "a") as archive:
        archive.writestr("twice/data/aotinductor/model/extra.so.json", b"{}")
    with pytest.raises(PackageError, match=r"its entries \['twice/data/aotinductor/model/extra\.so\.json'\] were not "
                                           "signed"):
        load(added, signing_key=keys[0])
    removed = tmp_path / "removed.pt2"
    with zipfile.ZipFile(signed_pt2) as zin, zipfile.ZipFile(removed, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith("aotcuda/signature.json"):
                zout.writestr(info, zin.read(info))
    with pytest.raises(PackageError, match=r"its signed entries \['twice/aotcuda/signature\.json'\] are missing"):
        load(removed, signing_key=keys[0])


def test_an_unsigned_package_and_another_keys_are_refused_under_the_key(twice_pt2, signed_pt2, keys):
    with pytest.raises(PackageError, match=r"is not signed with a key \(it has no aotcuda/tag\.json\), and a signing "
                                           r"key was given \(the key file .*right\.key'\): only a package signed with "
                                           r"it is loaded.* Lower the model again with the key"):
        load(twice_pt2, signing_key=keys[0])
    other = signing_key(keys[1])
    with pytest.raises(PackageError, match=rf"was signed with another key \(key id {signing_key(keys[0]).key_id}\) "
                                           rf"than the one given \(the key file .*other\.key', key id {other.key_id}\)"):
        load(signed_pt2, signing_key=keys[1])


def test_an_altered_or_damaged_tag_is_refused_under_the_key(signed_pt2, keys, tmp_path):
    """The tag entry is package JSON: bounded before it is parsed, every field of its form; a list of entries
    changed to match an edited entry, under the tag of the right key's id, is refused as altered."""
    def relisted(tag):
        tag["entries"]["twice/aotcuda/signature.json"]["sha256"] = "0" * 64
    path = edited_entry(signed_pt2, tmp_path / "relisted.pt2", "aotcuda/tag.json", json_edit(relisted))
    with pytest.raises(PackageError, match=r"its aotcuda/tag\.json does not match the entries it lists under the key "
                                           r"given .*: the tag or its list was altered after signing"):
        load(path, signing_key=keys[0])
    damaged = {
        b"[]": r"is a list, not a JSON object",
        b"[" * 100 + b"]" * 100: r"nests more than the 64 levels",
        b'{"format": "aotcuda.tag", "version": 3}': r"has format 'aotcuda\.tag' version 3 algorithm None, where "
                                                    r"this aotcuda reads aotcuda\.tag version 1 or 2 hmac-sha256",
        json.dumps({"format": "aotcuda.tag", "version": 1, "algorithm": "hmac-sha256", "key_id": "x" * 16,
                    "entries": {}, "tag": "0" * 64}).encode(): r"has a key_id 'xxxxxxxxxxxxxxxx' that is not 16 "
                                                                r"hexadecimal digits",
        json.dumps({"format": "aotcuda.tag", "version": 1, "algorithm": "hmac-sha256", "key_id": "0" * 16,
                    "entries": {"a": 5}, "tag": "0" * 64}).encode(): r"gives the entry 'a' a digest that is not a "
                                                                     r"SHA-256",
        json.dumps({"format": "aotcuda.tag", "version": 2, "algorithm": "hmac-sha256", "key_id": "0" * 16,
                    "entries": {"a": "0" * 64}, "tag": "0" * 64}).encode(): r"gives the entry 'a' '0000.*, not an "
                                                                           r'object of its "sha256" and "size"',
        json.dumps({"format": "aotcuda.tag", "version": 2, "algorithm": "hmac-sha256", "key_id": "0" * 16,
                    "entries": {"a": {"sha256": "0" * 64, "size": -1}}, "tag": "0" * 64}).encode():
            r"gives the entry 'a' a size -1 that is not a number of bytes",
    }
    for number, (data, message) in enumerate(damaged.items()):
        path = edited_entry(signed_pt2, tmp_path / f"damaged{number}.pt2", "aotcuda/tag.json", lambda _: data)
        with pytest.raises(PackageError, match=message):
            load(path, signing_key=keys[0])
    with zipfile.ZipFile(signed_pt2) as archive:
        size = archive.getinfo("twice/aotcuda/tag.json").file_size
    assert size > 1024  # the Twice package's tag, ~140 bytes an entry; bounded as the signature is
    with pytest.raises(PackageError, match=r"aotcuda/tag\.json.*AOTCUDA_MAX_SIGNATURE_BYTES"):
        load(signed_pt2, signing_key=keys[0], limits=ArchiveLimits(max_signature_bytes=1024))


def test_a_signed_package_loads_without_a_key_as_before(signed_pt2, monkeypatch):
    monkeypatch.delenv("AOTCUDA_SIGNING_KEY_FILE", raising=False)
    with load(signed_pt2) as program:
        assert_like_eager(program)


@pytest.mark.parametrize("mode, who", [(0o644, "read"), (0o640, "read"), (0o606, "read or written")])
def test_a_key_file_others_may_read_is_refused_naming_chmod_600(tmp_path, mode, who):
    path = key_file(tmp_path, mode=mode)
    with pytest.raises(SigningKeyError, match=rf"may be {who} by other users than its owner \(mode -.*\): a key "
                                              rf"others can read signs packages for them too\. Run chmod 600 {path}"):
        signing_key(path)


def test_a_key_file_of_another_user_is_refused(tmp_path, monkeypatch):
    """A key file of mode 600 owned by another user: that user may write their own key into it. A server run as root
    read uid 1000's key file (mode 600) and took what uid 1000 signed. As root, the file is chowned to uid 1000;
    otherwise this process is made to say another uid than its own file's. A root-owned file stays usable (a secret
    the kubelet mounts)."""
    path = key_file(tmp_path)
    if os.geteuid() == 0:
        os.chown(path, 1000, 1000)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(path).st_uid + 4242)
    owner = os.stat(path).st_uid
    with pytest.raises(SigningKeyError, match=rf"belongs to another user \(uid {owner}\), who may read it and write "
                                              r"another key into it.*chown and chmod 600"):
        signing_key(path)
    if os.geteuid() == 0:
        os.chown(path, 0, 0)
        assert signing_key(path).source == f"the key file {path!r}"


@pytest.mark.parametrize("secret", ["~a\0" + "s" * 40, "abc\ud800" + "s" * 40, "~" + "\ud800" * 40])
def test_a_key_str_no_file_system_takes_is_a_signing_key_error_that_hides_it(secret):
    """A str key that is no file name: "~a\0..." raised a raw ValueError from expanduser's user lookup, one with a
    lone surrogate a raw UnicodeEncodeError, whose ``object`` is the whole str, the key itself."""
    with pytest.raises(SigningKeyError) as caught:
        signing_key(secret)
    assert secret not in str(caught.value) and secret[3:] not in str(caught.value)
    assert caught.value.__cause__ is None and (caught.value.__context__ is None or caught.value.__suppress_context__)


def test_a_short_key_and_a_key_that_is_no_file_are_refused(tmp_path, signed_pt2):
    with pytest.raises(SigningKeyError, match=r"holds 31 bytes; a signing key has at least 32 random bytes"):
        signing_key(key_file(tmp_path, size=31))
    with pytest.raises(SigningKeyError, match=r"signing_key \(bytes\) holds 8 bytes"):
        load(signed_pt2, signing_key=b"password")
    secret = "correct horse battery staple, used as the key"  # a str names a file: one that is no file is not shown
    with pytest.raises(SigningKeyError, match=rf"a str of {len(secret)} characters, read as a key file's path: no file "
                                              r"is there, and it is not shown") as caught:
        load(signed_pt2, signing_key=secret)
    assert secret not in str(caught.value)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(SigningKeyError, match=r"is a FIFO.*not a regular file"):
        signing_key(str(tmp_path / "fifo"))
    with pytest.raises(TypeError, match="a SigningKey is not pickled"):
        pickle.dumps(signing_key(b"k" * 32))


def test_the_switch_names_the_key_file_at_each_load(signed_pt2, twice_pt2, keys, monkeypatch):
    monkeypatch.setenv("AOTCUDA_SIGNING_KEY_FILE", keys[0])
    with load(signed_pt2) as program:
        assert_like_eager(program, (3,))
    with pytest.raises(PackageError, match=r"key was given \(AOTCUDA_SIGNING_KEY_FILE=.*right\.key'\)"):
        load(twice_pt2)


@pytest.mark.parametrize("value", ["", "  "])
def test_the_switch_set_to_nothing_is_refused_not_read_as_no_key(twice_pt2, value, monkeypatch):
    """AOTCUDA_SIGNING_KEY_FILE="" (a deploy script's =$KEY with KEY unset) was read as unset: an unsigned package
    loaded, and serve planned replicas without a key, with nothing said. Now the set-but-empty switch is refused."""
    monkeypatch.setenv("AOTCUDA_SIGNING_KEY_FILE", value)
    with pytest.raises(SigningKeyError, match=r"AOTCUDA_SIGNING_KEY_FILE is set but empty .*packages would load "
                                              r"unchecked\. Set it to the key file's path, or unset it"):
        load(twice_pt2)
    pytest.importorskip("ray.serve")
    from aotcuda.serving.server import ServeOptions, replica_key_file

    with pytest.raises(SigningKeyError, match=r"AOTCUDA_SIGNING_KEY_FILE is set but empty"):
        replica_key_file(ServeOptions())


EDITED_CALL = textwrap.dedent("""
    import sys, torch
    from aotcuda import PackageError, load
    try:
        program = load(sys.argv[1])
    except PackageError as exc:
        print("refused:", exc)
        sys.exit(0)
    program(torch.randn(2**24, 1))  # what the edited signature takes: (batch in [2, 2**31], 1)
    print("ran")
""")


def test_the_package_breakers_edited_signature_is_refused_under_the_key_not_run(signed_pt2, keys, tmp_path):
    """docs/reliability.md, 'a signature edited to take other inputs': a signed package whose signature was widened
    to (batch in [2, 2**31], 1), called with (2**24, 1), died of SIGSEGV (by default it still does: an unsigned
    package, or no key). Under the key (AOTCUDA_SIGNING_KEY_FILE) load refuses it before the library is opened. In a
    child process: on the code before, the switch was no switch, and the child died (code -11)."""
    path = with_edited_signature(signed_pt2, tmp_path / "edited.pt2", widened)
    env = {**os.environ, "AOTCUDA_SIGNING_KEY_FILE": keys[0]}
    result = subprocess.run([sys.executable, "-c", EDITED_CALL, str(path)], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, f"the child died (code {result.returncode}): {result.stderr[-2000:]}"
    assert "refused: " in result.stdout and "twice/aotcuda/signature.json'] declare other sizes than were signed" in result.stdout


def test_inspect_says_whether_a_package_is_signed_and_checks_a_key(signed_pt2, twice_pt2, keys, tmp_path, monkeypatch):
    from aotcuda.cli import main

    monkeypatch.delenv("AOTCUDA_SIGNING_KEY_FILE", raising=False)
    run = lambda *args: CliRunner().invoke(main, ["inspect", *args], env={"COLUMNS": "400"})  # noqa: E731
    key_id = signing_key(keys[0]).key_id
    result = run(signed_pt2)
    assert result.exit_code == 0, result.output
    assert f"signed with a key: yes (HMAC-SHA256, key id {key_id}; not checked (no key given" in result.output
    result = run(signed_pt2, "--signing-key-file", keys[0])
    assert f"key id {key_id}; checked with the key file" in result.output and "load takes it" in result.output
    assert "signed with a key: no (load with a signing key refuses it)" in run(twice_pt2).output
    edited = edited_entry(signed_pt2, tmp_path / "edited.pt2", "wrapper.so", flipped_byte)
    result = run(edited, "--signing-key-file", keys[0])
    assert result.exit_code == 0 and "refuses it:" in result.output and "wrapper.so'] are not what was signed" in \
        result.output
    result = run(signed_pt2, "--signing-key-file", key_file(tmp_path, mode=0o644))
    assert result.exit_code == 1 and "chmod 600" in result.output


def test_aotcuda_sign_signs_a_published_package_by_rename(twice_pt2, keys, tmp_path, monkeypatch):
    from aotcuda.cli import main

    monkeypatch.delenv("AOTCUDA_SIGNING_KEY_FILE", raising=False)
    path = tmp_path / "twice.pt2"
    shutil.copyfile(twice_pt2, path)
    before = os.stat(path).st_ino
    result = CliRunner().invoke(main, ["sign", str(path)])
    assert result.exit_code == 2 and "no key to sign with: pass --signing-key-file KEY" in result.output
    result = CliRunner().invoke(main, ["sign", str(path), "--signing-key-file", keys[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 0 and f"(key id {signing_key(keys[0]).key_id})" in result.output, result.output
    assert os.stat(path).st_ino != before and os.listdir(tmp_path) == ["twice.pt2"]  # renamed over, nothing left
    with load(path, signing_key=keys[0]) as program:
        assert_like_eager(program, (4,))


def test_aotcuda_sign_of_a_symbolic_link_signs_the_file_it_names_and_keeps_the_link(twice_pt2, keys, tmp_path):
    """`aotcuda sign current.pt2` where current.pt2 -> v7.pt2 renamed the signed copy over the link: current.pt2
    became a file of its own, and v7.pt2 (what the link, and every other path to it, named) stayed unsigned."""
    from aotcuda.cli import main

    target = tmp_path / "v7.pt2"
    shutil.copyfile(twice_pt2, target)
    (tmp_path / "current.pt2").symlink_to("v7.pt2")
    result = CliRunner().invoke(main, ["sign", str(tmp_path / "current.pt2"), "--signing-key-file", keys[0]])
    assert result.exit_code == 0, result.output
    assert os.readlink(tmp_path / "current.pt2") == "v7.pt2" and sorted(os.listdir(tmp_path)) == ["current.pt2", "v7.pt2"]
    with load(target, signing_key=keys[0]) as program:
        assert_like_eager(program, (3,))


def test_aotcuda_sign_refuses_a_folder_others_may_write_into(twice_pt2, keys, tmp_path, monkeypatch):
    """`aotcuda sign` wrote a copy beside the package and opened it again by its name to sign it: in a folder others
    may write into (mode 777, not sticky), another user renamed a package of theirs over the copy in between, and
    it was signed and published under the key. Now such a folder is refused, naming the fix; a sticky one (as /tmp)
    or AOTCUDA_TRUST_SHARED_FOLDERS=1 signs. (The copy is unnamed while it is written now, but it is still renamed
    over the package from a name in the folder, linked just before: here that user's step is made there.)"""
    from aotcuda.cli import main
    from aotcuda import package_tags

    monkeypatch.delenv("AOTCUDA_TRUST_SHARED_FOLDERS", raising=False)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    path = shared / "twice.pt2"
    shutil.copyfile(twice_pt2, path)
    theirs = edited_entry(twice_pt2, tmp_path / "theirs.pt2", "signature.json", json_edit(widened))
    linked = package_tags._linked

    def their_package_renamed_over_the_copy(file, folder):
        name = linked(file, folder)
        os.replace(theirs, name)
        return name

    monkeypatch.setattr(package_tags, "_linked", their_package_renamed_over_the_copy)
    result = CliRunner().invoke(main, ["sign", str(path), "--signing-key-file", keys[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 1 and "is writable by other users and not sticky (mode 0o777)" in result.output and \
        "Move the package into a folder of your own, sign it there" in result.output, result.output
    with pytest.raises(PackageError, match="is not signed with a key"):
        load(path, signing_key=keys[0])
    monkeypatch.setattr(package_tags, "_linked", linked)
    shared.chmod(0o1777)
    assert CliRunner().invoke(main, ["sign", str(path), "--signing-key-file", keys[0]]).exit_code == 0
    with load(path, signing_key=keys[0]) as program:
        assert_like_eager(program, (3,))


@pytest.mark.parametrize("failing, error", [("_open_unnamed", PermissionError(13, "Permission denied")),
                                             ("_write_signed", OSError(28, "No space left on device"))])
def test_aotcuda_sign_that_cannot_write_its_copy_says_so_and_leaves_the_package(twice_pt2, keys, tmp_path, monkeypatch,
                                                                              failing, error):
    """A folder this user may not write into, or a full disk: `aotcuda sign` ended in os's raw error naming only its
    temporary file (`error: PermissionError: [Errno 13] Permission denied: '.../tmpk2v1.pt2'`)."""
    from aotcuda import package_tags
    from aotcuda.cli import main

    path = tmp_path / "twice.pt2"
    shutil.copyfile(twice_pt2, path)
    before = path.read_bytes()
    real = getattr(package_tags, failing)

    def fails(*args, **kwargs):
        if failing == "_write_signed":
            real(*args, **kwargs)
        raise error

    monkeypatch.setattr(package_tags, failing, fails)
    result = CliRunner().invoke(main, ["sign", str(path), "--signing-key-file", keys[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 1 and f"could not sign {str(path)!r}: its signed copy could not be written in " \
        f"{str(tmp_path)!r} ({error.strerror}); the package is as it was" in result.output, result.output
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["twice.pt2"]


def test_a_replica_loads_with_the_key_files_path(signed_pt2, twice_pt2, keys):
    """Serving: the key reaches each replica as its file's path (the key's bytes never travel in Ray's config), and
    serve refuses a package that is not signed with it before Ray starts."""
    pytest.importorskip("ray.serve")
    from aotcuda.serving import deployment
    from aotcuda.serving.server import ServeOptions, _bind, check_package, replica_key_file

    options = ServeOptions(signing_key_file=keys[0])
    assert replica_key_file(options) == os.path.abspath(keys[0])
    bound = _bind(signed_pt2, options, {"num_cpus": 1, "num_gpus": 0}, "0" * 64)._bound_deployment
    with open(keys[0], "rb") as file:
        key = file.read()
    assert bound.init_kwargs["signing_key_file"] == os.path.abspath(keys[0])
    assert key not in pickle.dumps((bound.init_args, bound.init_kwargs))  # the path travels, never the key
    assert check_package(signed_pt2, options) == "cpu"
    with pytest.raises(PackageError, match="is not signed with a key"):
        check_package(twice_pt2, options)
    replica = deployment.ProgramReplica(signed_pt2, signing_key_file=keys[0])
    assert_like_eager(replica.program, (2,))
    replica.program.close()
    with pytest.raises(PackageError, match="was signed with another key"):
        deployment.ProgramReplica(signed_pt2, signing_key_file=keys[1])


def test_serve_checks_the_signature_of_the_version_its_key_check_took(signed_pt2, keys, tmp_path, monkeypatch):
    """serve's driver checked the key on one opening of the package and read the signature it plans with (the device,
    hence the replicas' GPUs; batching; state) from a second: a package another process renamed over the path in
    between, its signature edited to say cuda and not signed, decided the plan ('cuda'). Now both come from one
    opening, the signature's bytes checked against the tag: the signed package's 'cpu'."""
    pytest.importorskip("ray.serve")
    from aotcuda.serving import server
    from aotcuda.serving.server import ServeOptions, check_package

    def to_cuda(signature):
        for spec in signature["inputs"] + signature["outputs"]:
            spec["device"] = "cuda"

    path = tmp_path / "served.pt2"
    shutil.copyfile(signed_pt2, path)
    edited = with_edited_signature(signed_pt2, tmp_path / "edited.pt2", to_cuda)
    checked = server.package_key_id

    def renamed_over_after_the_check(*args, **kwargs):
        result = checked(*args, **kwargs)
        os.replace(edited, path)  # another process publishes an unsigned package at the path now
        return result

    monkeypatch.setattr(server, "package_key_id", renamed_over_after_the_check)
    assert check_package(str(path), ServeOptions(signing_key_file=keys[0])) == "cpu"
    with pytest.raises(PackageError, match=r"its entries \['twice/aotcuda/signature.json'\] declare other sizes than "
                                          r"were signed"):
        check_package(str(path), ServeOptions(signing_key_file=keys[0]))  # the edited one, opened on its own


def test_the_key_check_without_load_refuses_a_bomb_by_the_limits_before_hashing(signed_pt2, keys, tmp_path):
    """package_key_id with a key (serve's check before Ray starts) hashed every entry of the model's folder with no
    limit: 8 GiB of zeros packed in 8 MiB, added to the folder, kept it hashing for 17 s (a zip64 entry may declare
    far more) before it found the entry unsigned, where load refuses it by its ratio at once. Now the names are
    compared first and the entries planned and checked as load plans them before any is hashed; here a signed
    entry's bytes replaced by 256 MiB of zeros (about 1,000x), under its own name."""
    from aotcuda.runtime.package import package_key_id

    path = tmp_path / "bomb.pt2"
    with zipfile.ZipFile(signed_pt2) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target:
        for info in source.infolist():
            if info.filename.endswith(".kernel.cpp"):
                bomb = info.filename
                continue
            target.writestr(info, source.read(info))
        with target.open(bomb, "w", force_zip64=True) as entry:
            for _ in range(16):
                entry.write(bytes(16 << 20))
    for check in (lambda: package_key_id(path, signing_key(keys[0])), lambda: load(path, signing_key=keys[0])):
        # since the tag holds sizes (2026-12-06, evening), refused by the size it declares, before the ratio
        with pytest.raises(PackageError, match=r"its entries \['.*\.kernel\.cpp'\] declare other sizes than were "
                                              r"signed \(268,435,456 bytes where [\d,]+ were signed\)"):
            check()


def test_an_entry_added_under_a_key_is_refused_before_anything_is_extracted(signed_pt2, keys, tmp_path, monkeypatch):
    """Under a key, load extracted every entry (up to the 64 GiB limit, to the temporary folder) before it compared
    names: an unsigned entry added to the model's folder was written out whole, then refused. Its name alone says it
    was not signed: now nothing is extracted."""
    from aotcuda.runtime import package

    path = tmp_path / "added.pt2"
    shutil.copyfile(signed_pt2, path)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("twice/data/aotinductor/model/added.blob", os.urandom(1 << 20))
    extracted = []
    monkeypatch.setattr(package, "copy_entry", lambda archive, info, *rest: extracted.append(info.filename))
    with pytest.raises(PackageError, match=r"its entries \['twice/data/aotinductor/model/added\.blob'\] were not "
                                          r"signed"):
        load(path, signing_key=keys[0])
    assert extracted == []


def with_zeros(source, target, mib):
    """A copy of the package at ``source`` with an entry of ``mib`` MiB of zeros added (beside its model's folder,
    which load does not extract)."""
    shutil.copyfile(source, target)
    with zipfile.ZipFile(target, "a", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("twice/extra/zeros.bin", "w", force_zip64=True) as entry:
            for _ in range(mib // 16):
                entry.write(bytes(16 << 20))
    return str(target)


def test_aotcuda_sign_reads_a_package_within_the_limits_and_in_chunks(signed_pt2, keys, tmp_path, monkeypatch):
    """`aotcuda sign` of an 11 MB package holding 8 GiB of zeros hashed them all and, the package being signed
    already, rewrote it reading each entry whole into memory: MemoryError (under ulimit -v 6 GB). Now a package is
    read as load reads it (its entries within the limits before any is inflated, named by its own path), and an entry
    is copied in chunks: here 256 MiB of zeros, refused by its ratio; with the ratio lifted, signed again in place with
    a few MiB of Python memory, and loaded under the key."""
    import tracemalloc

    from aotcuda.cli import main

    path = with_zeros(signed_pt2, tmp_path / "zeros.pt2", 256)
    result = CliRunner().invoke(main, ["sign", path, "--signing-key-file", keys[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 1 and f"{path!r}: its entry 'twice/extra/zeros.bin' would inflate " \
        "from" in result.output and sorted(os.listdir(tmp_path)) == ["zeros.pt2"], result.output
    monkeypatch.setenv("AOTCUDA_MAX_COMPRESSION_RATIO", "0")
    tracemalloc.start()
    try:
        sign_package(path, keys[0])  # in place, over its tag: the package is rewritten
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak / (1 << 20):.0f} MiB"
    with load(path, signing_key=keys[0]) as program:
        assert_like_eager(program, (7,))


def test_lower_signs_with_the_key_and_refuses_a_bad_key_before_any_work(tmp_path, monkeypatch):
    import aotcuda

    key = key_file(tmp_path)
    with pytest.raises(SigningKeyError, match="chmod 600"):
        aotcuda.lower(torch.nn.Linear(4, 3), (torch.randn(2, 4),), device="cpu", package_path=tmp_path / "m.pt2",
                      signing_key=key_file(tmp_path, "open.key", mode=0o644))
    assert not (tmp_path / "m.pt2").exists()
    shared = tmp_path / "shared"  # a folder others may write into: another user could swap the build before it is
    shared.mkdir()                # signed (test_aotcuda_sign_refuses_a_folder_others_may_write_into): refused at once
    shared.chmod(0o777)
    monkeypatch.delenv("AOTCUDA_TRUST_SHARED_FOLDERS", raising=False)
    with pytest.raises(SigningKeyError, match=r"will not sign .* it is writable by other users and not sticky"):
        aotcuda.lower(torch.nn.Linear(4, 3), (torch.randn(2, 4),), device="cpu", package_path=shared / "m.pt2",
                      signing_key=key)
    assert os.listdir(shared) == []
    monkeypatch.setenv("AOTCUDA_SIGNING_KEY_FILE", key)  # the switch, read at lower()
    model = torch.nn.Linear(4, 3).eval()
    lowered = aotcuda.lower(model, (torch.randn(2, 4),), device="cpu", package_path=tmp_path / "m.pt2")
    monkeypatch.delenv("AOTCUDA_SIGNING_KEY_FILE")
    with load(lowered.package_path, signing_key=key) as program:
        x = torch.randn(2, 4)
        torch.testing.assert_close(program(x), model(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(PackageError, match="was signed with another key"):
        load(lowered.package_path, signing_key=key_file(tmp_path, "other.key"))
    # The result's load() checks under the key it was signed with (no switch set now): it took an unsigned package
    # at its path without a word before (the signing breaker's list)
    assert lowered.signing_key.key_id == signing_key(key).key_id and "SigningKey" not in repr(lowered)
    with lowered.load() as program:
        x = torch.randn(2, 4)
        torch.testing.assert_close(program(x), model(x), rtol=1e-5, atol=1e-6)
    shutil.copyfile(lowered.package_path, tmp_path / "signed.pt2")
    with zipfile.ZipFile(tmp_path / "signed.pt2") as zin, zipfile.ZipFile(lowered.package_path, "w") as zout:
        for info in zin.infolist():  # the same package without its tag
            if not info.filename.endswith("aotcuda/tag.json"):
                zout.writestr(info, zin.read(info))
    with pytest.raises(PackageError, match="is not signed with a key"):
        lowered.load()


def replaced_entry(source, target, suffix, data):
    """A copy of the package at ``source`` whose entry ending in ``suffix`` holds ``data`` (stored), under its name."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            if info.filename.endswith(suffix):
                info.compress_type = zipfile.ZIP_STORED
            zout.writestr(info, data if info.filename.endswith(suffix) else zin.read(info))
    return str(target)


def test_a_signed_entry_replaced_by_a_larger_one_is_refused_by_its_signed_size_before_anything_is_extracted(
        signed_pt2, keys, tmp_path, monkeypatch):
    """The tag held digests alone: a signed entry replaced under its own name by a larger file within the extraction
    limits (here the model library by 16 MiB, stored) was extracted whole, then refused by its digest (the known
    defect of 2026-12-06, evening); serve's check hashed it whole. Now the tag holds each entry's size, and an entry
    whose archive declares another size is refused before anything is extracted or hashed."""
    from aotcuda.runtime import package

    path = replaced_entry(signed_pt2, tmp_path / "larger.pt2", "wrapper.so", os.urandom(16 << 20))
    with zipfile.ZipFile(signed_pt2) as archive:
        so = next(info for info in archive.infolist() if info.filename.endswith("wrapper.so"))
    extracted, hashed = [], []
    real_copy, real_hash = package.copy_entry, package.entry_digest
    monkeypatch.setattr(package, "copy_entry", lambda archive, info, *rest: extracted.append(info.filename) or
                        real_copy(archive, info, *rest))
    monkeypatch.setattr(package, "entry_digest", lambda archive, info, *rest: hashed.append(info.filename) or
                        real_hash(archive, info, *rest))
    message = (r"was altered after it was signed: its entries \['twice/data/aotinductor/model/.*wrapper\.so'\] "
               rf"declare other sizes than were "
               rf"signed \(16,777,216 bytes where {so.file_size:,} were signed\)\. Nothing of it was extracted or used")
    with pytest.raises(PackageError, match=message):
        load(path, signing_key=keys[0])
    from aotcuda.runtime.package import package_key_id

    with pytest.raises(PackageError, match=message):
        package_key_id(path, signing_key(keys[0]))
    assert extracted == [] and hashed == []


def test_an_entry_that_gives_more_than_its_signed_size_is_stopped_there(signed_pt2, keys, tmp_path, monkeypatch):
    """The second bound: were an entry to give more bytes than the tag signs for it (zipfile stops at the size the
    archive declares, which is compared with the tag first, so here that comparison is taken out), its extraction
    stops one byte past the signed size."""
    from aotcuda.runtime import package

    path = replaced_entry(signed_pt2, tmp_path / "larger.pt2", "wrapper.so", bytes(4 << 20))
    written = []
    real_copy = package.copy_entry
    monkeypatch.setattr(package, "check_signed_listing", lambda *args: None)
    monkeypatch.setattr(package, "copy_entry", lambda *args: written.append(real_copy(*args)) or written[-1])
    with zipfile.ZipFile(signed_pt2) as archive:
        size = next(info.file_size for info in archive.infolist() if info.filename.endswith("wrapper.so"))
    with pytest.raises(PackageError, match=rf"its entry '.*wrapper\.so' holds more than the {size:,} bytes that were "
                                          r"signed; its extraction stopped there and nothing of it was used"):
        load(path, signing_key=keys[0])
    assert size + 1 in written and max(written) == size + 1


def test_a_package_signed_before_sizes_were_signed_still_loads_under_its_key(signed_pt2, keys, tmp_path):
    """A tag of version 1 (digests alone, written before 2026-12-06 evening) is read and checked by its digests: its
    HMAC authenticates them as before; `aotcuda sign` writes version 2 over it."""
    from aotcuda.package_tags import TAG_ENTRY, archive_entries

    key = signing_key(keys[0])
    path = tmp_path / "v1.pt2"
    with zipfile.ZipFile(signed_pt2) as source, zipfile.ZipFile(path, "w") as target:
        for info in source.infolist():
            if not info.filename.endswith(TAG_ENTRY):
                target.writestr(info, source.read(info))
    with zipfile.ZipFile(path) as archive:
        digests = {name: listed["sha256"] for name, listed in archive_entries(archive, str(path)).items()}
    tag = {"format": "aotcuda.tag", "version": 1, "algorithm": "hmac-sha256", "key_id": key.key_id,
           "entries": digests, "tag": key.tag(digests, 1)}
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(f"twice/{TAG_ENTRY}", json.dumps(tag))
    with load(path, signing_key=keys[0]) as program:
        assert_like_eager(program, (3,))
    forged = dict(tag, version=2, tag=key.tag(digests, 1))  # a version 1 HMAC is no tag of version 2
    with pytest.raises(PackageError):
        load(edited_entry(path, tmp_path / "forged.pt2", TAG_ENTRY, lambda _: json.dumps(forged).encode()),
             signing_key=keys[0])
    sign_package(path, keys[0])
    with zipfile.ZipFile(path) as archive:
        assert json.loads(archive.read(f"twice/{TAG_ENTRY}"))["version"] == 2
    with load(path, signing_key=keys[0]) as program:
        assert_like_eager(program, (3,))


@pytest.mark.parametrize("signed_before", [False, True])
def test_aotcuda_sign_killed_mid_write_leaves_nothing_beside_the_package(twice_pt2, signed_pt2, keys, tmp_path,
                                                                        signed_before):
    """SIGKILL (the OOM killer) cannot be caught: `aotcuda sign` killed while it wrote its signed copy left that
    copy, `tmpXXXX.pt2`, a package's size, beside the package for good. Now the copy has no name while it is written
    (O_TMPFILE), and goes with the process. Here the child is killed as it writes the tag into the copy (the package
    unsigned: appended; signed already: the archive rewritten)."""
    import signal

    path = tmp_path / "twice.pt2"
    shutil.copyfile(signed_pt2 if signed_before else twice_pt2, path)
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import sys, time, zipfile
        from aotcuda.cli import main
        real = zipfile.ZipFile.writestr
        def slow(self, name, *args, **kwargs):
            if name.endswith("aotcuda/tag.json"):
                print("writing", flush=True)
                time.sleep(60)
            return real(self, name, *args, **kwargs)
        zipfile.ZipFile.writestr = slow
        sys.argv = ["aotcuda", "sign", {str(path)!r}, "--signing-key-file", {keys[0]!r}]
        main()
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        line = child.stdout.readline()
        assert line == "writing\n", (line, child.stderr.read() if child.poll() is not None else "")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
        child.wait()
    assert os.listdir(tmp_path) == ["twice.pt2"] and path.read_bytes() == before


@pytest.mark.parametrize("refused", ["O_TMPFILE", "link"])
def test_aotcuda_sign_where_no_unnamed_file_can_be_made_or_linked_signs_as_before(twice_pt2, keys, tmp_path,
                                                                                  monkeypatch, refused):
    """A file system that takes no O_TMPFILE, or an unnamed copy that cannot be linked: a named copy, as before."""
    import errno

    from aotcuda import package_tags

    path = tmp_path / "twice.pt2"
    shutil.copyfile(twice_pt2, path)
    os.chmod(path, 0o640)
    if refused == "O_TMPFILE":
        monkeypatch.setattr(package_tags, "_open_unnamed", lambda folder: None)
    else:
        def no_link(*args, **kwargs):
            raise OSError(errno.EXDEV, "Invalid cross-device link")

        monkeypatch.setattr(package_tags.os, "link", no_link)
        monkeypatch.setattr("ctypes.CDLL", lambda *args, **kwargs: type("C", (), {"linkat": staticmethod(
            lambda *a: -1)})())
    assert sign_package(path, keys[0], by_rename=True) == signing_key(keys[0]).key_id
    assert os.listdir(tmp_path) == ["twice.pt2"] and os.stat(path).st_mode & 0o777 == 0o640
    with load(path, signing_key=keys[0]) as program:
        assert_like_eager(program, (3,))


def test_a_mistyped_key_file_on_the_command_line_is_named(tmp_path, signed_pt2):
    """Third new user (2026-12-06): `aotcuda run|sign|inspect|lower|serve ... --signing-key-file nope.key` (a mistyped
    path) said `signing_key (a str of 8 characters, read as a key file's path: no file is there, and it is not shown,
    as it may be the key itself): no such file; pass the key as bytes, ...`: the Python argument's words, hiding a
    path the user typed as one. A key *file* option names the file; a str given to signing_key= still is not shown."""
    from aotcuda.cli import main
    from aotcuda.serving.server import ServeOptions, check_package

    missing = str(tmp_path / "nope.key")
    said = (f"the key file '{missing}': no such file; check the path, or make a key file (e.g. head -c 32 "
            "/dev/urandom > aotcuda.key && chmod 600 aotcuda.key)")
    inputs = tmp_path / "inputs.pt"
    torch.save((torch.zeros(2),), inputs)  # the key is checked at load, before the inputs meet the program
    for command in (["inspect", signed_pt2], ["sign", signed_pt2], ["run", signed_pt2, "--inputs", str(inputs)]):
        result = CliRunner().invoke(main, [*command, "--signing-key-file", missing], env={"COLUMNS": "400"})
        assert result.exit_code == 1 and said in result.output, result.output
    with pytest.raises(SigningKeyError) as caught:
        load(signed_pt2, signing_key=__import__("pathlib").Path(missing))
    assert said in str(caught.value)
    with pytest.raises(SigningKeyError) as caught:
        check_package(signed_pt2, ServeOptions(signing_key_file=missing))
    assert said in str(caught.value)


@pytest.mark.parametrize("exchange", ["renameat2", "none"])
def test_aotcuda_sign_keeps_a_package_published_over_the_one_it_read(twice_pt2, keys, tmp_path, monkeypatch,
                                                                     exchange):
    """A deploy that renamed a new package over the path while `aotcuda sign` read the old one (the package breaker,
    2026-12-06, evening): sign then renamed its copy, of the old package, over the new one, which was lost, and the
    old model was published signed in its place. Now the path is compared with the file that was read (exchanged and
    compared after, or, where the file system has no exchange, compared just before the rename): refused, the new
    package left as the deploy put it, nothing beside it."""
    from aotcuda import package_tags
    from aotcuda.errors import PackageChangedError

    path, new = tmp_path / "twice.pt2", tmp_path / "new.pt2"
    shutil.copyfile(twice_pt2, path)
    with zipfile.ZipFile(twice_pt2) as source, zipfile.ZipFile(new, "w") as target:  # another package (v8)
        for info in source.infolist():
            target.writestr(info, source.read(info))
        target.writestr("twice/extra/v8.txt", b"the new model")
    published = new.read_bytes()
    if exchange == "none":
        monkeypatch.setattr(package_tags, "_exchange", lambda first, second: None, raising=False)
    write = package_tags._write_signed

    def deploy_meanwhile(*args):
        os.replace(new, path)  # `mv new.pt2 twice.pt2` while the old one is read
        return write(*args)

    monkeypatch.setattr(package_tags, "_write_signed", deploy_meanwhile)
    with pytest.raises(PackageChangedError, match=r"twice\.pt2' was replaced \(or removed\) while it was signed: "
                                                  r"another process renamed another file over it.*nothing was signed"):
        sign_package(path, keys[0], by_rename=True)
    assert os.listdir(tmp_path) == ["twice.pt2"] and path.read_bytes() == published


def test_aotcuda_sign_drops_the_set_user_id_bits_of_the_package(twice_pt2, keys, tmp_path):
    """The signed copy took the package's whole mode: a package of mode 4755 (another user's upload: bytes before
    a zip's first entry may be an executable, and load takes the zip) became the signer's set-user-ID program,
    root's where root signed it. Now its permission bits alone."""
    from aotcuda.cli import main

    for mode in (0o4755, 0o2750, 0o1644):
        path = tmp_path / f"twice{mode:o}.pt2"
        shutil.copyfile(twice_pt2, path)
        os.chmod(path, mode)
        result = CliRunner().invoke(main, ["sign", str(path), "--signing-key-file", keys[0]])
        assert result.exit_code == 0, result.output
        assert oct(os.stat(path).st_mode & 0o7777) == oct(mode & 0o777)
    with load(path, signing_key=keys[0]) as program:
        assert_like_eager(program, (3,))


def damaged_library(source, target):
    """A copy of the package at ``source`` with one byte of its library's packed data flipped (its sizes as they
    were: only its CRC, or its deflate stream, says so)."""
    data = bytearray(open(source, "rb").read())
    with zipfile.ZipFile(source) as archive:
        info = next(info for info in archive.infolist() if info.filename.endswith("wrapper.so"))
    name_length, extra_length = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    data[info.header_offset + 30 + name_length + extra_length + info.compress_size // 2] ^= 0x10
    open(target, "wb").write(bytes(data))
    return str(target)


def test_a_damaged_entry_is_named_by_sign_and_by_the_key_check_without_load(twice_pt2, signed_pt2, keys, tmp_path):
    """A package whose library's data is damaged (a flipped byte): `aotcuda sign` ended in zipfile's raw `error:
    BadZipFile: Bad CRC-32 for file ...` (a deflated one: `error: error: Error -3 while decompressing data`), and
    the key check of inspect and serve (package_key_id) raised that BadZipFile raw (serve's check: a traceback),
    where load says the package is damaged and how to fix it. Now all say so."""
    from aotcuda.cli import main
    from aotcuda.runtime.package import package_key_id

    unsigned = damaged_library(twice_pt2, tmp_path / "unsigned.pt2")
    result = CliRunner().invoke(main, ["sign", unsigned, "--signing-key-file", keys[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 1 and "unsigned.pt2' is damaged: its entry 'twice/data/aotinductor/model/" in \
        result.output and "Copy the package again, or lower the model again" in result.output, result.output
    assert sorted(os.listdir(tmp_path)) == ["unsigned.pt2"]
    signed = damaged_library(signed_pt2, tmp_path / "signed.pt2")
    with pytest.raises(PackageError, match=r"signed\.pt2' is damaged: its entry 'twice/data/aotinductor/model/.*"
                                          r"wrapper\.so' cannot be read \(.*\); nothing of it was used"):
        package_key_id(signed, signing_key(keys[0]))
    with pytest.raises(PackageError, match=r"is damaged: its entry .*wrapper\.so.* cannot be read"):
        load(signed, signing_key=keys[0])


def test_a_key_file_that_cannot_be_read_is_a_signing_key_error_naming_it(tmp_path, monkeypatch):
    """A key file that opens and then fails its read (a kernel file: /proc/kmsg answers EAGAIN; a disk's EIO) ended
    in os's raw error, naming no key file: `aotcuda sign m.pt2 --signing-key-file /proc/kmsg` printed `error:
    BlockingIOError: [Errno 11] it has no data to read yet ...`, and load(signing_key=...) raised that OSError, not
    the SigningKeyError every other key file problem is."""
    import io

    from aotcuda import package_tags

    path = key_file(tmp_path)
    real = open(path, "rb")

    class Failing(io.RawIOBase):
        def readable(self):
            return True

        def fileno(self):
            return real.fileno()

        def readinto(self, buffer):
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(package_tags, "open_regular", lambda name: io.BufferedReader(Failing()))
    try:
        with pytest.raises(SigningKeyError, match=r"the key file '.*aotcuda\.key' cannot be read \(Input/output "
                                                  r"error\); keep the key in a regular file on disk"):
            signing_key(path)
    finally:
        real.close()


def test_aotcuda_sign_of_an_entry_with_no_name_is_refused(twice_pt2, keys, tmp_path):
    """A directory record whose name is a NUL byte (zipfile reads it as ""): `aotcuda sign` ended in a raw
    `IndexError: string index out of range` (zipfile's is_dir of the empty name; found by fuzzing the package)."""
    from runtime_programs import with_raw_entry_name

    from aotcuda.cli import main

    path = with_raw_entry_name(twice_pt2, tmp_path / "nameless.pt2", b"\0")
    result = CliRunner().invoke(main, ["sign", path, "--signing-key-file", keys[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 1 and "nameless.pt2' holds an entry with no name ('\\x00')" in result.output, \
        result.output
    assert os.listdir(tmp_path) == ["nameless.pt2"]


def test_aotcuda_sign_refuses_a_folder_entry_holding_data_before_inflating_it(signed_pt2, keys, tmp_path):
    """A folder entry (a name ending in '/') is read by no loader, so no size check counted it, but `aotcuda sign` of a
    signed package copies every entry, each inflated and packed again: 4 GiB of zeros packed in 6 MB as `twice/notes/`
    took it 79 s, where a file entry of that ratio is refused at once. Now refused before anything is inflated, as
    load refuses it (test_hostile.py, "a folder entry holding data")."""
    from runtime_programs import with_folder_data

    from aotcuda.cli import main

    path = with_folder_data(signed_pt2, tmp_path / "folder.pt2", 128 << 20)
    before = open(path, "rb").read()
    result = CliRunner().invoke(main, ["sign", str(path), "--signing-key-file", keys[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 1, result.output
    assert "its entry 'twice/notes/' is a folder (its name ends in '/') that holds 134,217,728 bytes of data" in \
        " ".join(result.output.split()), result.output
    assert open(path, "rb").read() == before and os.listdir(tmp_path) == ["folder.pt2"]


def test_a_package_signed_again_keeps_one_zip64_block_an_entry(twice_pt2, keys, tmp_path, monkeypatch):
    """Signing a package signed before copies its entries into a new archive; zipfile's writer gave the local header of
    an entry of 4 GiB or more (a library with its weights appended) the source's zip64 block and one of its own, and
    every load then refused the signed package ("holds the block 0x0001 more than once"). zipfile's limit is made 1 MiB
    here, so that the library's 1.4 MB entry is such an entry (reader and writer alike)."""
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1 << 20)
    path = tmp_path / "zip64.pt2"
    with zipfile.ZipFile(twice_pt2) as source, zipfile.ZipFile(path, "w") as target:
        for info in source.infolist():
            with source.open(info) as reader, target.open(info, "w", force_zip64=info.file_size >= 1 << 20) as writer:
                shutil.copyfileobj(reader, writer)
    with zipfile.ZipFile(path) as archive:
        assert any(info.extra[:2] == b"\x01\x00" and info.file_size >= 1 << 20 for info in archive.infolist())
    for _ in range(2):  # the second signing rewrites the archive (it holds a tag)
        sign_package(path, keys[0], by_rename=True)
    program = load(str(path), signing_key=keys[0])
    x = torch.randn(3, 4)
    assert all(torch.allclose(got, want) for got, want in zip(program(x), Twice()(x)))
    program.close()


def test_a_key_file_another_user_could_replace_is_refused(tmp_path, monkeypatch):
    """The key file's owner and mode were checked on the file opened, not what its path leads to: in a folder other
    users may write into (a group's deploy folder), one of them could put a link there to a file of root's of mode
    0400 whose bytes they know (/sys/firmware/acpi/tables/DSDT: the same on every machine of a kind), which a server
    run as root took as its key, and loaded what they signed with those bytes. Now such a folder, or a link of
    another user's on the way, is refused; a sticky folder (/tmp) is not, nor a folder the switch trusts."""
    monkeypatch.delenv("AOTCUDA_TRUST_SHARED_FOLDERS", raising=False)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    path = key_file(shared)
    with pytest.raises(SigningKeyError, match=r"the key file '.*shared/aotcuda\.key' could be replaced by another "
                                              r"user: its folder '.*shared' is writable by other users and not sticky "
                                              r"\(mode 0o777\).*Keep the key in a folder of your own"):
        signing_key(path)
    shared.chmod(0o1777)  # sticky, as /tmp: each user's entries stay their own
    assert signing_key(path).source == f"the key file {path!r}"
    shared.chmod(0o777)
    monkeypatch.setenv("AOTCUDA_TRUST_SHARED_FOLDERS", "1")
    assert signing_key(path).source == f"the key file {path!r}"
    monkeypatch.delenv("AOTCUDA_TRUST_SHARED_FOLDERS")
    if os.geteuid() == 0:  # a link of another user's to a file of root's: followed before
        shared.chmod(0o1777)
        mine = key_file(tmp_path, "root.key")
        link = shared / "linked.key"
        link.symlink_to(mine)
        os.chown(link, 1000, 1000, follow_symlinks=False)
        with pytest.raises(SigningKeyError, match=r"its path goes through the symbolic link '.*linked\.key' of "
                                                  r"uid 1000"):
            signing_key(str(link))


def test_aotcuda_sign_never_removes_a_package_it_could_not_put_back(twice_pt2, keys, tmp_path, monkeypatch):
    """The exchange above found another package at the path, and putting it back failed (the path removed by a third
    process meanwhile): the file at the temporary name is theirs, not the copy, and is kept, its name said."""
    from aotcuda import package_tags
    from aotcuda.errors import PackageChangedError

    path, new = tmp_path / "twice.pt2", tmp_path / "new.pt2"
    shutil.copyfile(twice_pt2, path)
    new.write_bytes(b"their package")
    write, exchange, calls = package_tags._write_signed, package_tags._exchange, []

    def deploy_meanwhile(*args):
        os.replace(new, path)
        return write(*args)

    def exchange_once(first, second):
        calls.append(first)
        return exchange(first, second) if len(calls) == 1 else False

    monkeypatch.setattr(package_tags, "_write_signed", deploy_meanwhile)
    monkeypatch.setattr(package_tags, "_exchange", exchange_once)
    with pytest.raises(PackageChangedError, match=r"could not be put back and is at '.*\.aotcuda-sign\.\d+\.[0-9a-f]+"
                                                  r"\.pt2': move it back \(mv "):
        sign_package(path, keys[0], by_rename=True)
    assert open(calls[0], "rb").read() == b"their package"


def test_aotcuda_sign_keeps_the_packages_group(twice_pt2, keys, tmp_path):
    """The signed copy took the signer's group: a package of mode 640 of the group a server reads it as (`models`)
    was, once signed, of the signer's own group, and the server could no longer read it. Now the package's group is
    kept where this user may give it (root; a member of the group)."""
    path = tmp_path / "twice.pt2"
    shutil.copyfile(twice_pt2, path)
    groups = [gid for gid in (os.getgroups() if os.geteuid() else [4242]) if gid != os.getegid()]
    if not groups:
        pytest.skip("this user is in no group but its own")
    os.chown(path, -1, groups[0])
    os.chmod(path, 0o640)
    sign_package(path, keys[0], by_rename=True)
    assert (os.stat(path).st_gid, os.stat(path).st_mode & 0o7777) == (groups[0], 0o640)


def test_a_key_files_path_as_bytes_is_refused_not_taken_as_the_key(tmp_path):
    """``signing_key=os.fsencode(path)`` (a path of 32 bytes or more) was taken as the key itself: the path's text,
    which anyone who knows the path could sign packages with, where the file's bytes were meant. Bytes that name a
    file are refused; the path, as a str or a Path, reads the file."""
    import pathlib

    path = key_file(tmp_path)
    assert len(os.fsencode(path)) >= 32
    for value in (os.fsencode(path), bytearray(os.fsencode(path))):
        with pytest.raises(SigningKeyError, match=r"signing_key is bytes \(\d+ of them\), which are taken as the key "
                                                  r"itself, but they name a file: pass a key file's path as a str") \
                as refused:
            signing_key(value)
        assert path not in str(refused.value)
    assert signing_key(pathlib.Path(path)).key_id == signing_key(open(path, "rb").read()).key_id


def test_aotcuda_sign_without_room_for_its_copy_says_so_before_writing(twice_pt2, keys, tmp_path, monkeypatch):
    """`aotcuda sign` wrote its copy (the package's size, its holes as zeros: a sparse package within the ratio
    limit, 330 MB on disk, is a copy of 64 GiB) until the disk was full, failing every process that writes there,
    before it was refused. Now the folder's free space is compared first, as load compares it before extracting."""
    from collections import namedtuple

    from aotcuda import package_tags

    path = tmp_path / "twice.pt2"
    shutil.copyfile(twice_pt2, path)
    before = path.read_bytes()
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(package_tags.shutil, "disk_usage", lambda folder: usage(1 << 40, 1 << 40, 1 << 20))
    written = []
    monkeypatch.setattr(package_tags, "_SignedCopy", lambda folder: written.append(folder))
    with pytest.raises(PackageError, match=r"could not sign '.*twice\.pt2': its signed copy needs [\d,]+ bytes \([\d.]+ MiB\) in "
                                          r"'.*', which has 1,048,576 bytes \(1\.0 MiB\) free; nothing was written, the package is as it was"):
        sign_package(path, keys[0], by_rename=True)
    assert written == [] and os.listdir(tmp_path) == ["twice.pt2"] and path.read_bytes() == before


def test_file_names_the_cli_prints_on_success_are_shown_as_escapes(twice_pt2, keys, tmp_path):
    """`aotcuda sign *.pt2` in a folder of another user's packages printed `signed <name>` raw, and `run --save-outputs`
    its `wrote <path>`: a name holding ESC [ 2 J cleared the terminal, ESC [ 31 m recoloured it (breakcall, 2026-12-07),
    where `inspect` and every refusal already showed a name's control characters as escapes."""
    from aotcuda.cli import main

    evil = tmp_path / "evil\x1b[2J\x1b[31mRED.pt2"
    shutil.copyfile(twice_pt2, evil)
    result = CliRunner().invoke(main, ["sign", str(evil), "--signing-key-file", keys[0]], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "evil\\x1b[2J\\x1b[31mRED.pt2 (key id" in result.output, result.output
    torch.save({"args": (torch.randn(4, 4),)}, tmp_path / "inputs.pt")
    saved = tmp_path / "out\x1b]0;title\x07\x1b[2J.pt"
    result = CliRunner().invoke(main, ["run", str(evil), "--inputs", str(tmp_path / "inputs.pt"), "--save-outputs",
                                       str(saved)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output, result.output
    assert "wrote " + str(tmp_path) + "/out\\x1b]0;title\\x07\\x1b[2J.pt" in result.output, result.output
    assert torch.load(saved)[0].shape == (4, 4)  # written under the name asked, escapes and all
