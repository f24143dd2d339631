"""``hammer serve --print-command`` prints the llama-server command line and never builds llama-server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_print_command_with_nothing_built_names_the_cache_path_and_says_so(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(60))  # only the header is read to print the command
    cache = tmp_path / "cache"
    # No llama-server on PATH nor in the cache: the build would take minutes, the print must not start it.
    env = {**os.environ, "PATH": str(tmp_path), "HAMMER_CACHE_DIR": str(cache)}
    env.pop("HAMMER_LLAMA_SERVER", None)
    done = subprocess.run([sys.executable, "-m", "hammer_plugins.cli", "serve", "--model-path", str(model),
                           "--parallel", "2", "--print-command"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    command = done.stdout.split()
    assert Path(command[0]).parent.parent == cache / "llama-server" and command[0].endswith("/llama-server")
    assert command[command.index("--model") + 1] == str(model) and command[command.index("--parallel") + 1] == "2"
    assert "no llama-server is built yet" in done.stderr and "builds it on first use" in done.stderr
    assert not Path(command[0]).exists() and "building" not in done.stderr.lower()
