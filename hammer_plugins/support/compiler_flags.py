"""C/C++ flags that keep the llama.cpp builds we make (llama-cpp-python, llama-server) from crashing.

llama.cpp builds natively (``-march=native``). On a CPU with AMX (Intel Sapphire Rapids and later,
common in cloud VMs) that compiles ggml's AMX matrix kernels, and GCC 12's ``_tile_loadconfig``
(``amxtileintrin.h``) declares that ``ldtilecfg`` reads only 8 bytes of its 64-byte tile
configuration: the optimizer drops the stores that fill the rest, ``ldtilecfg`` loads garbage and the
process dies with a general protection fault at the first batch of a prompt. Measured on a 2-core
Sapphire Rapids VM with GCC 12.2: llama-cpp-python 0.3.36 and llama-server b11434 both crashed on any
prompt over one token (``ggml_backend_amx_mul_mat``); a hand-written AMX test with a full
configuration ran. Where the compiler's header has that declaration, these flags leave AMX out of
the build (prompt evaluation then uses AVX-512, as on any CPU without AMX).

Run as a script it prints the flags (empty when none are needed), for ``scripts/install.sh``::

    python hammer_plugins/support/compiler_flags.py

Example:
    >>> isinstance(safe_native_flags(), tuple)
    True
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

NO_AMX = ("-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")
# The faulty declaration: the memory operand is one pointer (8 bytes), not the 64-byte configuration.
_SHORT_OPERAND = re.compile(r'ldtilecfg[^;]*"m"\s*\(\s*\*\s*\(\s*\(\s*const\s+void\s*\*\s*\*\s*\)')


def _header(compiler: str) -> Path | None:
    try:
        done = subprocess.run([compiler, "-print-file-name=include/amxtileintrin.h"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = Path(done.stdout.strip())
    return path if done.returncode == 0 and path.is_absolute() and path.is_file() else None


@cache
def safe_native_flags(compiler: str | None = None) -> tuple[str, ...]:
    """Flags to add to CFLAGS and CXXFLAGS for a native llama.cpp build with ``compiler``
    (default: ``$CXX``, else ``c++``): :data:`NO_AMX` where its AMX header has GCC 12's fault, else none."""
    compiler = compiler or os.environ.get("CXX") or "c++"
    if shutil.which(compiler) is None:
        return ()
    header = _header(compiler)
    if header is None:
        return ()
    return NO_AMX if _SHORT_OPERAND.search(header.read_text(errors="replace")) else ()


if __name__ == "__main__":
    print(" ".join(safe_native_flags()))
