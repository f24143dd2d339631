"""How many threads llama.cpp decodes with by default: one per physical core this process may use.

That is llama.cpp's own default (``cpu_get_num_math`` in its tools and llama-server). llama-cpp-python
instead defaults to half the logical CPUs, which assumes two hardware threads per core: on a VM whose
vCPUs are cores (``Thread(s) per core: 1``) it leaves half of them idle. Measured on a 2-core VM
(``benchmarks/decode_threads.py --rounds 7``: plain llama-cpp-python, the default model, 48 tokens
after a 100-token prompt): 67.1 ms a token with 1 thread, 37.1 ms with 2.

Example:
    >>> physical_cores() >= 1
    True
"""

from __future__ import annotations

import os
from pathlib import Path

_TOPOLOGY = Path("/sys/devices/system/cpu")


def _usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: every CPU
        return list(range(os.cpu_count() or 1))


def physical_cores(topology: Path = _TOPOLOGY) -> int:
    """The physical cores among the CPUs this process may run on (hardware threads of one core count
    once); where the topology cannot be read, half the logical CPUs, as llama-cpp-python assumes."""
    cpus = _usable_cpus()
    cores: set[str] = set()
    for cpu in cpus:
        try:
            cores.add((topology / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip())
        except OSError:
            return max(1, len(cpus) // 2)
    return max(1, len(cores))
