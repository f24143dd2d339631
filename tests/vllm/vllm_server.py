"""The running vLLM server the tests share (started by conftest.py's ``vllm_server`` fixture)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class VllmServer:
    """A running vLLM server: ``base_url`` ends in ``/v1``; ``root`` is the server's own routes."""

    root: str
    api_key: str
    model: str
    log: Path
    process: subprocess.Popen[bytes] | None  # None: a server started elsewhere (HAMMER_VLLM_URL)

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"
