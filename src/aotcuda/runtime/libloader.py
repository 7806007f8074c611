"""dlopen of the shared library inside an AOTI package, in a way that cannot crash on load.

Why this exists (root cause, seen on the project's H200 machine with torch 2.11+cu130, 2026-11-30):
the `.wrapper.so` that AOTInductor builds for CUDA defines and exports some of the C++ runtime's own
internal symbols, among them `std::locale::_Impl::_S_id_ctype` and `std::ctype<char>::id`, while it takes
others (`std::collate<char>::id`) from libstdc++. Python loads torch, and with it libstdc++, with
RTLD_LOCAL, so libstdc++ is not in the process's global symbol scope. When the `.so` is then opened, the
dynamic linker resolves its references in its own scope first: the facet ids it uses for `std::regex`
are its private copies, different from the ids libstdc++ registered in the global locale, and
`std::use_facet` inside `torch::aot_inductor::parse_device_str` (called by the model container's
constructor) reads garbage and segfaults. `LD_PRELOAD=libstdc++.so.6` hid the problem by putting
libstdc++ first in the global scope. We do the same from inside the process: before opening the `.so`,
we re-open the libstdc++ that is already loaded with RTLD_GLOBAL | RTLD_NOLOAD, which promotes it to the
global scope (no second copy is loaded), so every reference of the `.so` to those symbols binds to
libstdc++. RTLD_DEEPBIND does the opposite (binds the `.so` to itself first) and crashed the same way.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import struct

from aotcuda import switches
from aotcuda.errors import PackageError, clipped

_CXX_RUNTIME = "libstdc++.so.6"
_promoted = False


def promote_cxx_runtime_to_global_scope() -> bool:
    """Make the libstdc++ already loaded by torch visible to libraries opened later.

    Returns True when libstdc++ is now in the global scope, False when this process has no libstdc++
    loaded under that name (e.g. a torch built against another C++ runtime); then nothing is changed.
    Idempotent and cheap after the first call.
    """
    global _promoted
    if _promoted:
        return True
    import torch  # noqa: F401  (torch's own load brings the libstdc++ we must promote, not another copy)

    try:
        ctypes.CDLL(_CXX_RUNTIME, mode=os.RTLD_NOW | os.RTLD_GLOBAL | os.RTLD_NOLOAD)
    except OSError:
        return False
    _promoted = True
    return True


def elf_bytes_needed(path: str) -> int | None:
    """How many bytes an ELF file must have to hold every segment and its section-header table, read from
    its headers; None when the file does not start with an ELF header (dlopen then reports it).

    Why: dlopen maps a library's segments without checking that the file holds them all, so a truncated
    .so loads fine and dies with SIGBUS (the whole process) at its first run, when a missing page is read.
    """
    with open(path, "rb") as f:
        header = f.read(64)
        if len(header) < 52 or header[:4] != b"\x7fELF" or header[4] not in (1, 2) or header[5] not in (1, 2):
            return None
        order = "<" if header[5] == 1 else ">"
        if header[4] == 2:  # ELFCLASS64
            phoff, shoff = struct.unpack_from(order + "QQ", header, 0x20)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", header, 0x36)
            entry = order + "IIQQQQ"  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz
            offset_field, size_field = 2, 5
        else:  # ELFCLASS32
            phoff, shoff = struct.unpack_from(order + "II", header, 0x1C)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", header, 0x2A)
            entry = order + "IIIIII"  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz
            offset_field, size_field = 1, 4
        needed = max(phoff + phnum * phentsize, shoff + shnum * shentsize if shoff else 0)
        if needed > os.fstat(f.fileno()).st_size:
            return needed  # a table past the end (an offset of 2**64 - 1 is not even a position seek takes)
        if phnum and phentsize < struct.calcsize(entry):
            raise ValueError(f"its program headers are {phentsize} bytes each, fewer than the "
                             f"{struct.calcsize(entry)} an entry of its class needs")
        used = struct.calcsize(entry)
        if phentsize <= (56 if header[4] == 2 else 32):  # an Elf64_Phdr / Elf32_Phdr (within the file: checked above)
            f.seek(phoff)
            table, stride = f.read(phnum * phentsize), phentsize
        else:  # larger entries: the bytes used of each (the table whole took up to 4 GiB of memory)
            table, stride = b"".join(_read_at(f, phoff + index * phentsize, used) for index in range(phnum)), used
        for index in range(min(phnum, len(table) // stride)):
            fields = struct.unpack_from(entry, table, index * stride)
            needed = max(needed, fields[offset_field] + fields[size_field])
    return needed


# The compilers' record of their command line in a library's debug information (DW_AT_producer, in .debug_str):
# "GNU C++20 12.2.0 -march=rocketlake -mavx512f ... -g1 -O3 ...". Inductor compiles with -g1, so every package's
# library holds it; what it lists is what the library's code may use, whatever the package's metadata says.
_PRODUCER = re.compile(rb"GNU C(?:\+\+)?\w* \d[\w.]* ([^\0]{0,16384})")
_MAX_DEBUG_STRINGS = 64 << 20  # .debug_str of a package's library: ~600 KB for a small program


def compiled_machine_flags(path: str) -> frozenset[str] | None:
    """The ``-m`` options the library's code was compiled with (``-mavx512f``, ``-mamx-tile``; ``-mno-...`` left
    out), read from the compilers' record in its ``.debug_str`` section; None where it holds none (a library built
    without debug information, stripped, or no ELF file: dlopen says why). Reads only the ELF and section headers
    and that section, each bounded by the file's size (a hostile header is no section)."""
    with open(path, "rb") as f:
        sections = _sections(f)
        for name, _, offset, length in sections or ():
            if name == b".debug_str" and length <= _MAX_DEBUG_STRINGS:
                f.seek(offset)
                found = {flag.decode("ascii", "replace") for record in _PRODUCER.findall(f.read(length))
                         for flag in record.split() if flag.startswith(b"-m") and not flag.startswith(b"-mno-")}
                return frozenset(found) if found else None
    return None


# LDTILECFG m512 (Intel SDM: VEX.128.NP.0F38.W0 49 !(11):000:bbb): the VEX3 prefix C4; R̄ set (ModRM.reg is 000),
# X̄ and B̄ either way (the address's index and base registers), map 0F38; W0, vvvv 1111, L0, pp 00; opcode 49;
# a ModRM of a memory operand with reg 000. No AMX instruction runs before one (tiles unconfigured are #UD), and
# Inductor's AMX microkernels load their configuration with it (AMXState::configure, _tile_loadconfig).
_LDTILECFG = re.compile(rb"\xc4[\xe2\xc2\xa2\x82]\x78\x49["
                        + b"".join(re.escape(bytes([m])) for m in range(0xC0) if not m & 0x38) + b"]")
_SHF_EXECINSTR, _SHT_NOBITS, _EM_X86_64 = 0x4, 8, 62
_SCAN_CHUNK = 16 << 20


def holds_amx_instructions(path: str) -> bool:
    """Whether the code sections of an x86-64 library hold an AMX tile configuration load (LDTILECFG's encoding in
    a section marked executable), which every AMX kernel runs first. The bytes are searched, not decoded, so the
    encoding met inside another instruction (its immediate or displacement) or across two reads as one too: a
    refusal of a library without AMX where that happens (none in the x86-64 libraries measured: see
    docs/reliability.md), never a library with AMX kernels taken for one without. Reads the ELF and section headers
    and those sections, bounded by the file's size, in chunks; bytes that several sections claim, once (65,535 section
    headers each claiming the whole file made it read the file 65,535 times: minutes of a load, for an 8 MB library,
    before dlopen or any other refusal)."""
    with open(path, "rb") as f:
        header = f.read(20)
        if len(header) < 20 or header[5] != 1 or struct.unpack_from("<H", header, 18)[0] != _EM_X86_64:
            return False
        for offset, length in _code_ranges(_sections(f) or ()):
            f.seek(offset)
            tail = b""
            while length > 0:
                chunk = f.read(min(_SCAN_CHUNK, length))
                if not chunk:
                    break
                length -= len(chunk)
                if _LDTILECFG.search(tail + chunk):
                    return True
                tail = chunk[-4:]  # an encoding across two chunks
    return False


def _code_ranges(sections) -> list[tuple[int, int]]:
    """(offset, size) of the bytes the code sections among ``sections`` hold, sections that overlap joined into one
    range (sections that only touch stay apart, as they were searched)."""
    ranges: list[list[int]] = []
    for start, end in sorted((offset, offset + length) for _, flags, offset, length in sections
                             if flags & _SHF_EXECINSTR and length > 0):
        if ranges and start < ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], end)
        else:
            ranges.append([start, end])
    return [(start, end - start) for start, end in ranges]


def _sections(f) -> list[tuple[bytes, int, int, int]] | None:
    """The sections of the ELF file ``f`` that have bytes in it: (name, flags, offset, size) each, from its section
    header table; None where it is no ELFCLASS64 file or its headers point outside it (a hostile header is no
    section, and no table is read past the file or past 65,535 entries)."""
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    header = f.read(64)
    if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] not in (1, 2):
        return None  # ELFCLASS64 only: the libraries Inductor builds on x86-64 and aarch64
    order = "<" if header[5] == 1 else ">"
    (shoff,) = struct.unpack_from(order + "Q", header, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", header, 0x3A)
    if shentsize < 64 or not 0 < shnum <= 65535 or shstrndx >= shnum or shoff + shnum * shentsize > size:
        return None
    if shentsize == 64:  # every ELF64 file's: the table, in one read
        f.seek(shoff)
        table = f.read(shnum * 64)
    else:  # larger entries, of which the first 64 bytes are read (65,535 of 65,535 bytes: a 4 GiB table in memory)
        table = b"".join(_read_at(f, shoff + index * shentsize, 64) for index in range(shnum))
    headers = [struct.unpack_from(order + "IIQQQQ", table, index * 64) for index in range(shnum)]
    names_offset, names_size = headers[shstrndx][4], headers[shstrndx][5]
    if names_offset + names_size > size or names_size > _MAX_DEBUG_STRINGS:
        return None
    f.seek(names_offset)
    names = f.read(names_size)
    return [(_name_at(names, name), flags, offset, length) for name, kind, flags, _, offset, length in headers
            if kind != _SHT_NOBITS and offset + length <= size]


# The most bytes of a section's name read (".debug_str" is the one looked for): a names table of 8 MB without a NUL,
# named from its second byte by 1,000 section headers, made 1,000 names of 8 MB each (7.6 GB, 25 s, before dlopen).
_MAX_NAME = 256


def _read_at(f, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(size)


def _name_at(names: bytes, start: int) -> bytes:
    end = names.find(b"\0", start, start + _MAX_NAME)
    return names[start:end if end >= 0 else start + _MAX_NAME]


def check_library_complete(path: str) -> None:
    """Raise PackageError when the library file is shorter than its own ELF headers say it is, or when those
    headers cannot be read (a table past the end of the file, entries too small to hold one: a damaged or
    hostile header raised raw ValueError, OSError and struct.error here)."""
    try:
        needed = elf_bytes_needed(path)
    except ValueError as exc:
        raise PackageError(f"the model library {path!r} has damaged ELF headers ({exc}). The package was damaged or "
                           "altered; copy it again, or lower the model again.") from exc
    size = os.path.getsize(path)
    if needed is not None and size < needed:
        raise PackageError(
            f"the model library {path!r} is truncated: it has {size} bytes, its ELF headers need {needed}. "
            "The package was damaged (an interrupted copy or download?); copy it again, or lower the model again."
        )


def open_model_library(path: str) -> ctypes.CDLL:
    """dlopen an AOTInductor `.wrapper.so` (RTLD_NOW | RTLD_LOCAL) after fixing the C++ runtime's scope.

    Raises PackageError naming the file when the library cannot be opened (missing, truncated, corrupt,
    built for another architecture, or with symbols this torch does not provide).
    """
    check_library_complete(path)
    promote_cxx_runtime_to_global_scope()
    try:
        return ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except (OSError, UnicodeDecodeError) as exc:
        # ctypes builds the OSError from dlerror()'s text, which names the path: for a path that is not UTF-8 (a
        # TMPDIR named so) building it raises UnicodeDecodeError instead, which holds that text as bytes
        reason = str(exc) if isinstance(exc, OSError) else exc.object.decode(errors="backslashreplace")
        raise PackageError(
            # repr: the loader's message quotes the file and its symbol names, which are the package's text
            f"cannot open the model library {path!r}: {clipped(repr(reason), 400)}. The package may be corrupt, or "
            "built by another torch version or for another machine; lower the model again with this torch."
        ) from exc


def close_refused_library(library: ctypes.CDLL) -> None:
    """dlclose a library that was opened and then refused, before its refusal is raised: nothing keeps it, and ctypes
    never closes what it opened. A library with no model in it (a valid .so that exports none of AOTInductor's
    functions) stayed mapped for the life of the process, from a file its refusal had removed: each load of such a
    package held its library's bytes on the temporary folder's disk (a 66 KB package whose .so holds 48 MiB of
    zeros: 964 MiB after 20 refused loads). glibc unloads such a library here; one it cannot unload (a model
    library's unique C++ symbols mark it NODELETE) stays mapped, as it would anyway."""
    import _ctypes

    try:
        _ctypes.dlclose(library._handle)
    except OSError:  # dlerror's text: the library stays mapped, as before, and the refusal is what matters
        pass


# --- muting std::cerr (AOTCUDA_FOREIGN_WRITES) ----------------------------------------------------------
#
# The generated code prints every exception of a failed run on std::cerr, and a c10::Error (an index out
# of range, AOTI's own input checks) carries the whole C++ stack trace: 18 lines on stderr for one
# rejected call, which a server logs per call. The same message reaches the caller in the RuntimeCallError
# (AOTInductorGetLastError, the trace cut off). With the switch AOTCUDA_FOREIGN_WRITES on, std::cerr is
# muted during a run: its badbit set, which makes libstdc++ drop what is written to it. That writes
# libstdc++'s state, process-wide: C++ code on other threads that writes to std::cerr while a run is in
# flight is muted too. Off by default: the generated code's lines reach stderr.

_BADBIT = 1  # std::ios_base::badbit in libstdc++
_MADE: list = []  # the mute cxx_error_mute made in this process, for a forked child


def _cerr_state_setter():
    """A function setting std::cerr's iostate (``basic_ios::clear``), or None where libstdc++ is not as
    expected."""
    try:
        cxx = ctypes.CDLL(_CXX_RUNTIME, mode=os.RTLD_NOW | os.RTLD_GLOBAL | os.RTLD_NOLOAD)
        cerr = ctypes.addressof(ctypes.c_void_p.in_dll(cxx, "_ZSt4cerr"))
        clear = cxx._ZNSt9basic_iosIcSt11char_traitsIcEE5clearESt12_Ios_Iostate  # basic_ios<char>::clear
    except (OSError, ValueError, AttributeError):
        return None
    clear.argtypes, clear.restype = [ctypes.c_void_p, ctypes.c_int], None
    # std::ostream's virtual base std::basic_ios sits at the offset its vtable records (Itanium C++ ABI:
    # the virtual-base offset, three words before the address the object's vtable pointer holds).
    vtable = ctypes.c_void_p.from_address(cerr).value
    offset = ctypes.c_ssize_t.from_address(vtable - 3 * ctypes.sizeof(ctypes.c_void_p)).value
    if not 0 < offset < 4096:
        return None
    ios = cerr + offset
    return _direct_state_setter(clear, ios) or functools.partial(clear, ios)


def _direct_state_setter(clear, ios: int):
    """A setter that writes std::cerr's iostate field itself: a foreign call costs a microsecond, twice per
    model run. ``clear(state)`` on a stream with a buffer and no exception mask (std::cerr's) only stores
    the state in ``ios_base::_M_streambuf_state``, which libstdc++ keeps after the vtable pointer,
    precision, width, flags and the exception mask. Used only when the probe below (clear, then read
    back the field) confirms that layout; None otherwise."""
    field = ctypes.c_int.from_address(ios + 3 * ctypes.sizeof(ctypes.c_void_p) + 2 * ctypes.sizeof(ctypes.c_int))
    clear(ios, _BADBIT)
    muted = field.value == _BADBIT
    clear(ios, 0)
    if not (muted and field.value == 0):
        return None
    return functools.partial(setattr, field, "value")


class CerrMute:
    """What a run does to mute std::cerr, inline in ``ModelContainer.run``: ``runs`` holds an entry a muted run in
    flight; the run that makes it non-empty calls ``on()``, the one that empties it ``off()``.

    Inline, not a context manager: Python runs a signal's handler where a Python function begins and where a call
    returns, and a KeyboardInterrupt as ``__exit__`` began left std::cerr muted for good (a lock taken inside could
    stay taken too). The run adds its entry with ``runs += (1,)`` (which calls nothing) right before its ``try``
    and removes one with ``del`` first in its ``finally``, and ``on``/``off`` are C callables (partials of
    ``setattr`` or of libstdc++'s ``clear``): no Python function begins in them, and what a handler raises as they
    return comes after the state is set. No lock: between an entry's change and the ``on``/``off`` call after it
    no call returns and no function begins, so neither a handler nor another thread runs in between (CPython
    switches threads where it runs handlers)."""

    __slots__ = ("runs", "on", "off")

    def __init__(self, set_state) -> None:
        self.runs: list[int] = []
        self.on, self.off = functools.partial(set_state, _BADBIT), functools.partial(set_state, 0)

    def forked(self) -> None:
        """In a forked child: the runs other threads of the parent had in flight never end here, and std::cerr stayed
        muted for good (their entries kept every later run from unmuting)."""
        if self.runs:
            self.runs = []  # a new list: a run of the forking thread itself (a handler's fork) ends on its own
            self.off()


@functools.cache
def cxx_error_mute() -> CerrMute | None:
    """The mute of std::cerr during a run, or None: AOTCUDA_FOREIGN_WRITES is off (the default), or libstdc++ is
    not laid out as expected. Read once, at the first run in a process (like AOTI's own variables: set it before
    the first run)."""
    if not switches.flag("AOTCUDA_FOREIGN_WRITES"):
        return None
    setter = _cerr_state_setter()
    if setter is None:
        return None
    _MADE.append(CerrMute(setter))
    return _MADE[0]


def _unmuted_in_a_child() -> None:
    for mute in _MADE:
        mute.forked()


os.register_at_fork(after_in_child=_unmuted_in_a_child)
