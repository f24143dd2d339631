"""The AMX guard for native llama.cpp builds (hammer_plugins/support/compiler_flags.py): it must recognise
GCC 12's short ``ldtilecfg`` operand, which crashed both our builds on an AMX machine, and leave
compilers with a correct header alone."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hammer_plugins.support import compiler_flags as _compiler_flags

GCC12 = '''extern __inline void
__attribute__((__gnu_inline__, __always_inline__, __artificial__))
_tile_loadconfig (const void *__config)
{
  __asm__ volatile ("ldtilecfg\\t%X0" :: "m" (*((const void **)__config)));
}
'''
# The same intrinsic with an operand that covers the whole 64-byte configuration.
WHOLE = GCC12.replace("(*((const void **)__config))", "(*((const char (*)[64])__config))")


def fake_compiler(tmp_path: Path, header: str | None) -> str:
    """A `c++` that answers -print-file-name with a header holding ``header`` (or, for None, a bare name)."""
    target = tmp_path / "amxtileintrin.h"
    if header is not None:
        target.write_text(header)
    script = tmp_path / "fake-c++"
    answer = target if header is not None else "include/amxtileintrin.h"
    script.write_text(f"#!/bin/sh\necho {answer}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.mark.parametrize(("header", "expected"), [(GCC12, _compiler_flags.NO_AMX), (WHOLE, ()), (None, ())])
def test_amx_is_left_out_only_where_the_header_is_faulty(tmp_path: Path, header: str | None, expected: tuple[str, ...]) -> None:
    assert _compiler_flags.safe_native_flags(fake_compiler(tmp_path, header)) == expected


def test_a_missing_compiler_needs_no_flags() -> None:
    assert _compiler_flags.safe_native_flags("no-such-compiler-here") == ()
