"""What a model library's own bytes say about the instructions it needs (runtime/libloader.py, devices.library_isa),
on ELF files made here: the compilers' record of the flags, and the AMX tile configuration load in its code."""

from __future__ import annotations

import struct

import pytest

from aotcuda.runtime import devices, libloader

LDTILECFG = bytes.fromhex("c4e2784984247001")  # ldtilecfg 0x170(%rsp), as Inductor's AMX microkernel compiles
CODE = bytes.fromhex("554889e5") + b"\x90" * 40 + bytes.fromhex("5dc3")  # push rbp; mov rbp,rsp; nops; pop; ret
PRODUCER = b"GNU C++20 12.2.0 -march=sapphirerapids -mavx512f -mavx512vnni -mamx-tile -mamx-bf16 -g1 -O3\0"

SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4


def elf(path, sections: dict[str, tuple[int, bytes]], machine: int = 62):
    """An ELF64 little-endian shared object of ``machine`` (62: x86-64) with ``sections``: name -> (flags, bytes)."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name in [*sections, ".shstrtab"])
    body, headers = b"", [bytes(64)]
    offset = 64
    for name, (flags, data) in [*sections.items(), (".shstrtab", (0, names))]:
        headers.append(struct.pack("<IIQQQQIIQQ", names.index(name.encode() + b"\0"), 1, flags, 0, offset + len(body),
                                   len(data), 0, 0, 1, 0))
        body += data
    table = 64 + len(body)
    header = (b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, table, 0, 64,
                                                               0, 0, 64, len(headers), len(headers) - 1))
    path.write_bytes(header + body + b"".join(headers))
    return str(path)


def library(path, code: bytes, producer: bytes | None = PRODUCER, rodata: bytes = b"\0" * 16, machine: int = 62):
    sections = {".text": (SHF_ALLOC | SHF_EXECINSTR, code), ".rodata": (SHF_ALLOC, rodata)}
    if producer is not None:
        sections[".debug_str"] = (0, b"_ZN5torch3fooEv\0" + producer)
    return elf(path, sections, machine)


class Counted:
    """A file that counts the bytes read from it into ``read`` (one entry a read)."""

    def __init__(self, file, read: list):
        self.file, self.read_sizes = file, read

    def read(self, size=-1):
        piece = self.file.read(size)
        self.read_sizes.append(len(piece))
        return piece

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.file.close()


def counted_reads(monkeypatch) -> list:
    """The sizes of libloader's reads from the files it opens, from here on."""
    read, real_open = [], open
    monkeypatch.setattr(libloader, "open", lambda *args: Counted(real_open(*args), read), raising=False)
    return read


def test_the_amx_tile_configuration_load_in_the_code_is_amx_tile(tmp_path):
    """Found by the package breaker: AOTI_CPU_ISA edited to drop AMX_TILE loaded a library with AMX kernels on a CPU
    without AMX (its first AMX kernel: SIGILL), since the library's -mamx-tile was not read (-march=native gives it
    on any AMX host, whether or not Inductor wrote an AMX kernel). The instructions tell it: a library whose code
    holds LDTILECFG is AMX_TILE, whatever its metadata says; the same code without it is not."""
    with_amx = library(tmp_path / "amx.so", CODE[:4] + LDTILECFG + CODE[4:])
    without = library(tmp_path / "plain.so", CODE)
    assert libloader.holds_amx_instructions(with_amx) and not libloader.holds_amx_instructions(without)
    assert devices.library_isa(with_amx) == ["AVX512", "AVX512_VNNI", "AMX_TILE"]
    assert devices.library_isa(without) == ["AVX512", "AVX512_VNNI"]


@pytest.mark.parametrize("encoding", ["c4e2784900", "c4c278490424", "c4a278490418", "c482784984047001000000",
                                      "c4e278490510000000"])
def test_each_register_form_of_ldtilecfg_is_found(tmp_path, encoding):
    """(%rax), (%r12), (%rax,%r11), 0x170(%r12,%r8), 0x10(%rip), as GNU as encodes them: the VEX prefix's X and B
    bits change with the registers."""
    assert libloader.holds_amx_instructions(library(tmp_path / "amx.so", CODE + bytes.fromhex(encoding)))


@pytest.mark.parametrize("encoding", ["c4e27849c0", "c4e2794984247001", "c4e2684984247001", "c4e278494c2470"])
def test_neighbouring_encodings_are_not_taken_for_it(tmp_path, encoding):
    """TILERELEASE (ModRM of a register), STTILECFG (pp 01), a vvvv other than 1111 and a ModRM.reg other than 000
    are not LDTILECFG."""
    assert not libloader.holds_amx_instructions(library(tmp_path / "other.so", CODE + bytes.fromhex(encoding)))


def test_only_code_sections_are_searched(tmp_path):
    """The encoding in data (constants, strings, debug information) is no instruction."""
    path = library(tmp_path / "data.so", CODE, rodata=b"\0" * 8 + LDTILECFG)
    assert not libloader.holds_amx_instructions(path) and devices.library_isa(path) == ["AVX512", "AVX512_VNNI"]


def test_a_library_compiled_without_amx_is_not_searched_and_one_without_a_record_is(tmp_path):
    """The compiler emits no AMX instruction without -mamx-tile (its intrinsics need the target), so a library whose
    record lacks it is not searched (no refusal of it for bytes that only look like one); a library without a record
    (no debug information) is searched, since nothing says it could not hold them."""
    no_flag = library(tmp_path / "avx512.so", CODE + LDTILECFG, producer=PRODUCER.replace(b" -mamx-tile", b""))
    assert devices.library_isa(no_flag) == ["AVX512", "AVX512_VNNI"]
    no_record = library(tmp_path / "stripped.so", CODE + LDTILECFG, producer=None)
    assert libloader.compiled_machine_flags(no_record) is None and devices.library_isa(no_record) == ["AMX_TILE"]


def test_an_encoding_across_two_reads_is_found(tmp_path, monkeypatch):
    """The code is read in chunks (bounded memory for a library of any size): an encoding that straddles two of them
    is found all the same."""
    monkeypatch.setattr(libloader, "_SCAN_CHUNK", 16)
    for start in range(10, 18):
        code = b"\x90" * start + LDTILECFG + b"\x90" * 30
        assert libloader.holds_amx_instructions(library(tmp_path / f"amx{start}.so", code)), start


def test_another_machines_library_is_not_searched(tmp_path):
    """The encoding means LDTILECFG on x86-64 only (183: aarch64, whose library dlopen refuses here anyway)."""
    assert not libloader.holds_amx_instructions(library(tmp_path / "arm.so", CODE + LDTILECFG, machine=183))


def test_hostile_section_headers_are_no_section(tmp_path):
    """A code section that says it runs past the file is not read (nor any table past it)."""
    path = tmp_path / "long.so"
    library(path, CODE + LDTILECFG)
    data = bytearray(path.read_bytes())
    (table,) = struct.unpack_from("<Q", data, 0x28)
    struct.pack_into("<Q", data, table + 64 + 32, 1 << 40)  # .text's sh_size
    path.write_bytes(bytes(data))
    assert not libloader.holds_amx_instructions(str(path))


def test_code_that_many_section_headers_claim_is_read_once(tmp_path, monkeypatch):
    """Found by the breaker (2026-12-06, evening): every section header marked executable was searched on its own, so
    65,535 headers each claiming an 8 MB library's whole body made a load read it 65,535 times (past 60 s; the
    package then refused, its signature naming another library, and the library never opened). Overlapping sections
    are read once."""
    path = tmp_path / "many.so"
    library(path, b"\x90" * (1 << 16))
    data = bytearray(path.read_bytes())
    (table,) = struct.unpack_from("<Q", data, 0x28)
    text = bytes(data[table + 64:table + 128])  # .text's header, repeated: each claims the whole code
    count = struct.unpack_from("<H", data, 0x3C)[0]
    copies = 4000
    data[table + 64 * count:] = b""
    data += text * copies
    struct.pack_into("<H", data, 0x3C, count + copies)
    path.write_bytes(bytes(data))
    read = counted_reads(monkeypatch)
    assert not libloader.holds_amx_instructions(str(path))
    assert sum(read) < 2 * len(data), sum(read)  # the code once, and the headers (on the code before: 4,001 times)


def test_a_section_name_without_its_end_is_read_no_further_than_a_name(tmp_path):
    """Found by the breaker (2026-12-06, evening): a section's name was read up to the next NUL of the names table,
    however far: an 8 MB table without one, named from its second byte by 1,000 section headers, made 1,000 names of
    8 MB each (7.6 GB and 25 s at a load, before dlopen; a package of about 60 KB can hold 65,535 headers over 60 MB:
    terabytes). A name is read to its NUL within _MAX_NAME bytes; the libraries' own names as before."""
    path = tmp_path / "names.so"
    library(path, CODE, rodata=b"\0" * 16)
    data = bytearray(path.read_bytes())
    (table,) = struct.unpack_from("<Q", data, 0x28)
    count, names_index = struct.unpack_from("<HH", data, 0x3C)
    names_at = len(data)
    data += b"A" * (1 << 18)  # a names table of 256 KiB without a NUL
    headers = bytearray(data[table:table + 64 * count])
    struct.pack_into("<QQ", headers, 64 * names_index + 24, names_at, 1 << 18)  # the names table: sh_offset, sh_size
    unnamed = struct.pack("<IIQQQQIIQQ", 1, 1, 0, 0, 0, 1, 0, 0, 1, 0)  # named from the table's second byte
    headers += unnamed * 200
    struct.pack_into("<Q", data, 0x28, len(data))
    struct.pack_into("<H", data, 0x3C, count + 200)
    path.write_bytes(bytes(data + headers))
    with open(path, "rb") as f:
        sections = libloader._sections(f)
    assert len(sections) == count + 200
    assert max(len(name) for name, *_ in sections) <= 256  # libloader._MAX_NAME; on the code before: 262,144 bytes
    assert libloader.compiled_machine_flags(library(tmp_path / "lib.so", CODE)) == frozenset(
        {"-march=sapphirerapids", "-mavx512f", "-mavx512vnni", "-mamx-tile", "-mamx-bf16"})


def test_section_headers_of_a_larger_entry_size_are_read_64_bytes_each(tmp_path):
    """Found by the breaker (2026-12-06, evening): the section header table was read whole, shnum * shentsize bytes, up
    to 65,535 entries of 65,535 bytes (4 GiB in memory, for a library of that size) of which 64 bytes each are read.
    Entries larger than an ELF64 section header are now read 64 bytes each, and understood as before."""
    path = tmp_path / "wide.so"
    library(path, CODE + LDTILECFG)
    data = bytearray(path.read_bytes())
    (table,) = struct.unpack_from("<Q", data, 0x28)
    count = struct.unpack_from("<H", data, 0x3C)[0]
    entries = [bytes(data[table + 64 * index:table + 64 * (index + 1)]) for index in range(count)]
    padding, extra = 4096 - 64, 2000
    unnamed = struct.pack("<IIQQQQIIQQ", 0, 1, 0, 0, 0, 1, 0, 0, 1, 0)
    del data[table:]
    for entry in entries[:-1] + [unnamed] * extra + entries[-1:]:  # the names table's entry stays last
        data += entry + b"\0" * padding
    struct.pack_into("<HHH", data, 0x3A, 4096, count + extra, count + extra - 1)
    path.write_bytes(bytes(data))
    read = []
    with open(path, "rb") as f:
        sections = libloader._sections(Counted(f, read))
    assert [name for name, *_ in sections][:3] == [b"", b".text", b".rodata"] and len(sections) == count + extra
    assert sum(read) < 1 << 20, sum(read)  # on the code before: the 8 MB table whole
    assert libloader.holds_amx_instructions(str(path))


def test_program_headers_of_a_larger_entry_size_are_read_as_far_as_used(tmp_path, monkeypatch):
    """The completeness check (``elf_bytes_needed``, before dlopen) read the program header table whole as well:
    65,535 entries of 65,535 bytes (4 GiB in memory). Larger entries are read as far as the fields it uses."""
    path = tmp_path / "wide_phdr.so"
    library(path, CODE)
    data = bytearray(path.read_bytes())
    phoff, count, width = len(data), 2000, 4096
    segment = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, 64, 64, 4096)  # PT_LOAD of the file's first 64 bytes
    data += (segment + b"\0" * (width - len(segment))) * count
    struct.pack_into("<Q", data, 0x20, phoff)
    struct.pack_into("<HH", data, 0x36, width, count)
    path.write_bytes(bytes(data))
    read = counted_reads(monkeypatch)
    assert libloader.elf_bytes_needed(str(path)) == len(data)
    assert sum(read) < 1 << 20, sum(read)  # on the code before: the 8 MB table whole
