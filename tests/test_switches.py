"""aotcuda.switches: every AOTCUDA_* variable is declared once and read one way; every value that is not
a spelling of the switch is refused by name, never taken as a silent default."""

import pathlib
import re

import pytest

import aotcuda
from aotcuda import switches

SOURCE = pathlib.Path(aotcuda.__file__).parent


@pytest.mark.parametrize("text, value", [("1", True), ("on", True), ("TRUE", True), ("yes", True),
                                         ("0", False), ("off", False), ("False", False), ("no", False)])
def test_a_flag_reads_each_spelling(monkeypatch, text, value):
    monkeypatch.setenv("AOTCUDA_DEBUG", text)
    assert switches.flag("AOTCUDA_DEBUG") is value


def test_an_unset_or_empty_flag_is_its_default(monkeypatch):
    monkeypatch.delenv("AOTCUDA_PASS_SPEEDUPS", raising=False)
    assert switches.flag("AOTCUDA_PASS_SPEEDUPS") is True
    monkeypatch.setenv("AOTCUDA_PASS_SPEEDUPS", " ")
    assert switches.flag("AOTCUDA_PASS_SPEEDUPS") is True


@pytest.mark.parametrize("text", ["2", "maybe", "enable"])
def test_a_flag_refuses_other_values_by_name(monkeypatch, text):
    monkeypatch.setenv("AOTCUDA_DEBUG", text)
    with pytest.raises(ValueError, match=rf"AOTCUDA_DEBUG='{text}' is not a flag; set it to 1 \(on\) or 0 \(off\)"):
        switches.flag("AOTCUDA_DEBUG")


def test_a_bad_switch_is_an_aotcuda_error_quoted_clipped(monkeypatch):
    from aotcuda.errors import AotcudaError, SwitchError

    monkeypatch.setenv("AOTCUDA_DEBUG", "x" * 1_000_000)
    with pytest.raises(SwitchError) as caught:
        switches.flag("AOTCUDA_DEBUG")
    assert isinstance(caught.value, AotcudaError) and isinstance(caught.value, ValueError)
    assert len(str(caught.value)) < 300


def test_numbers_keep_their_type_and_refuse_what_is_not_one(monkeypatch):
    monkeypatch.setenv("AOTCUDA_MAX_ENTRIES", "12")
    assert switches.number("AOTCUDA_MAX_ENTRIES") == 12
    monkeypatch.setenv("AOTCUDA_MAX_COMPRESSION_RATIO", "2.5")
    assert switches.number("AOTCUDA_MAX_COMPRESSION_RATIO") == 2.5
    for bad in ("ten", "-1", "nan"):
        monkeypatch.setenv("AOTCUDA_MAX_COMPRESSION_RATIO", bad)
        with pytest.raises(ValueError, match="AOTCUDA_MAX_COMPRESSION_RATIO=.* is not a number of at least 0"):
            switches.number("AOTCUDA_MAX_COMPRESSION_RATIO")
    # The breaker, 2026-12-06: float() reads "1e-400" as 0.0, which lifted the ratio limit where the value asked for
    # the strictest one, and "inf" (or "1e999") as no limit; each is refused by name.
    for bad, reads in (("1e-400", "0.0, and 0 lifts the limit"), ("inf", "inf, and a limit must end"),
                       ("1e999", "inf, and a limit must end")):
        monkeypatch.setenv("AOTCUDA_MAX_COMPRESSION_RATIO", bad)
        with pytest.raises(ValueError, match=rf"AOTCUDA_MAX_COMPRESSION_RATIO='{bad}' is not a finite number that a "
                                             rf"float holds \(it reads as {reads}\)"):
            switches.number("AOTCUDA_MAX_COMPRESSION_RATIO")
    # An integer switch of 310 digits read, and the proxy's minimum send rate times the seconds waited raised
    # OverflowError in every connection's send watch (which then stopped: a slow reader was never cut off)
    monkeypatch.setenv("AOTCUDA_SERVE_MIN_SEND_RATE", "1" + "0" * 309)
    with pytest.raises(ValueError, match=r"AOTCUDA_SERVE_MIN_SEND_RATE='1000.* is not a finite number that a float "
                                         r"holds \(it has 310 digits, past 1.79769e\+308\)"):
        switches.number("AOTCUDA_SERVE_MIN_SEND_RATE")
    monkeypatch.setenv("AOTCUDA_SERVE_MIN_SEND_RATE", "1" + "0" * 307)  # within a float: a rate no one reaches
    assert switches.number("AOTCUDA_SERVE_MIN_SEND_RATE") * 0.5 == 5e306
    for zero in ("0", "0.0", "0e-400", "-0"):  # 0 written as 0 still lifts it
        monkeypatch.setenv("AOTCUDA_MAX_COMPRESSION_RATIO", zero)
        assert switches.number("AOTCUDA_MAX_COMPRESSION_RATIO") == 0


def test_an_undeclared_switch_is_a_programming_error():
    with pytest.raises(KeyError, match="AOTCUDA_NOPE is not an aotcuda switch"):
        switches.flag("AOTCUDA_NOPE")


def test_no_module_reads_an_aotcuda_variable_itself():
    """Every AOTCUDA_* variable the package names is declared in the table, and only switches.py reads
    the environment for one."""
    named = set()
    for path in SOURCE.rglob("*.py"):
        text = path.read_text()
        named |= set(re.findall(r"\bAOTCUDA_[A-Z_]+[A-Z]\b", text))
        if path.name != "switches.py":
            assert not re.search(r"environ(?:\.get)?[\[(]\s*['\"]AOTCUDA_", text), f"{path} reads an AOTCUDA_ variable"
    assert named <= set(switches.SWITCHES), sorted(named - set(switches.SWITCHES))


def test_the_cli_debug_switch_off_is_off(monkeypatch):
    from aotcuda.cli import _debugging

    monkeypatch.setenv("AOTCUDA_DEBUG", "0")
    assert not _debugging()
    monkeypatch.setenv("AOTCUDA_DEBUG", "1")
    assert _debugging()


def test_the_docs_table_is_generated_from_the_switches():
    usage = (SOURCE.parents[1] / "docs" / "usage.md").read_text()
    assert switches.markdown_table() in usage, "regenerate docs/usage.md's table: aotcuda.switches.markdown_table()"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1, "200", True, None])
def test_archive_limits_given_in_code_take_the_environments_numbers_only(bad):
    """`ArchiveLimits(max_ratio=float("nan"))` lifted the ratio bound in silence (every check is `value > limit`,
    false for a NaN); a string raised a raw TypeError at the first check (the breaker, 2026-12-06)."""
    from aotcuda.runtime.archive import ArchiveLimits

    with pytest.raises(ValueError, match=r"ArchiveLimits\(max_ratio=.*\): a bound is a finite number of at least 0"):
        ArchiveLimits(max_ratio=bad)
    assert ArchiveLimits(max_ratio=0).max_ratio == 0 and ArchiveLimits(max_entries=5).max_entries == 5


def test_numbers_are_read_in_ascii_digits_only(monkeypatch):
    """The process breaker (2026-12-06): `AOTCUDA_MAX_EXTRACT_BYTES=١` (Arabic-Indic one) was 1, and `٠` (zero) lifted
    the limit: int() and float() read any script's digits. Refused by name now, as --dynamic refuses them."""
    for name in ("AOTCUDA_MAX_EXTRACT_BYTES", "AOTCUDA_MAX_COMPRESSION_RATIO"):
        for bad in ("١", "٠", "１２", "1_000", "²", *(("+5",) if name.endswith("BYTES") else ())):
            monkeypatch.setenv(name, bad)
            with pytest.raises(ValueError, match=rf"{name}=.* is not a number of at least 0 in ASCII digits"):
                switches.number(name)
    monkeypatch.setenv("AOTCUDA_MAX_EXTRACT_BYTES", "1000")
    assert switches.number("AOTCUDA_MAX_EXTRACT_BYTES") == 1000
