"""Real agent sessions against ``hammer serve --openai``: Claude Code and Codex CLI, first session, second session in
the same HOME, and a session after a server restart, with plain llama.cpp's cold evaluation of the same number of
prompt tokens beside them (the floor for first contact).

Each client runs as a user runs it, in its default mode, one question per session (``claude -p`` and
``codex exec``), against ``hammer serve --openai --n-ctx 32768`` with the default flags otherwise, on an empty prefix
cache folder at the start. The server is stopped with Ctrl-C after the second session and started again on the same
folder for the third. Per session: the wall time of the client's process. Per request (the server's access log):
the time, the time to first token, the prompt tokens, how many the caches served and how many were evaluated.

The floor: ``llama_cpp.Llama`` on the same model, context and threads, evaluating the first request's number of
prompt tokens in a fresh context (the cost of prompt evaluation depends on the count and positions, not on which
tokens). The first session's target is at most 1.1x the floor plus the model's answer (the time after the first
token, summed over the session's requests).

Usage (the agent CLIs from scripts/install_agent_clis.sh)::

    .venv/bin/python benchmarks/agent_sessions.py --client claude \\
        --json docs/benchmarks/agent-prompts/agent_cli_claude_code.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from record import run_facts, write_record  # noqa: E402

from hammer_plugins.launch import free_port  # noqa: E402
from hammer_plugins.support.cache_location import cache_dir  # noqa: E402

KEY = "sessions-key"
QUESTION = "What is 2 + 2?"
LINE = re.compile(r"POST /v1/(?:messages|responses)\S* door=(\w+) status=(\d+) time=([\d.]+)s(?: ttft=([\d.]+)s)?"
                  r"(?: prompt=(\d+) cached=(\d+) completion=(\d+) answer=(\w+))?")


@contextlib.contextmanager
def serve(n_ctx: int, folder: Path, log: Path) -> Iterator[str]:
    """``hammer serve --openai`` on the prefix cache ``folder``, its output in ``log``, until Ctrl-C; its base URL."""
    port = free_port()
    env = {**os.environ, "HAMMER_PREFIX_CACHE_DIR": str(folder)}
    with open(log, "a") as out:
        process = subprocess.Popen([sys.executable, "-m", "hammer_plugins.cli", "serve", "--openai", "--n-ctx",
                                    str(n_ctx), "--api-key", KEY, "--port", str(port)], env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()["loaded"]:
                    break
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)  # a disk write in progress finishes first


def npm_binary(name: str) -> str:
    path = cache_dir() / "npm" / "node_modules" / ".bin" / name
    if not path.exists():
        raise SystemExit(f"{path} is missing. Fix: bash scripts/install_agent_clis.sh")
    return str(path)


def run_client(client: str, base_url: str, home: Path, bare: bool = False) -> dict[str, Any]:
    """One session of ``client`` in ``home`` (its working folder ``home/work``): wall time, exit code, its answer."""
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
    if client == "claude":
        argv = [npm_binary("claude"), "-p", *(["--bare"] if bare else []), QUESTION, "--output-format", "json",
                "--max-turns", "3"]
        env |= {"ANTHROPIC_BASE_URL": base_url.removesuffix("/v1"), "ANTHROPIC_API_KEY": KEY,
                "ANTHROPIC_MODEL": "hammer", "ANTHROPIC_SMALL_FAST_MODEL": "hammer",
                "ANTHROPIC_DEFAULT_HAIKU_MODEL": "hammer", "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    else:
        (home / "codex").mkdir(exist_ok=True)
        provider = (f'model_providers.hammer={{name="hammer", base_url="{base_url}", wire_api="responses", '
                    'env_key="HAMMER_KEY"}')
        argv = [npm_binary("codex"), "exec", "--skip-git-repo-check", "--json", "-c", provider, "-c",
                "model_provider=hammer", "-m", "hammer", QUESTION]
        env |= {"CODEX_HOME": str(home / "codex"), "HAMMER_KEY": KEY}
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    return {"wall_s": round(wall, 2), "exit_code": done.returncode, "stdout_tail": done.stdout[-600:],
            "stderr_tail": done.stderr[-300:]}


def requests_in(log: Path, skip: int) -> tuple[list[dict[str, Any]], int]:
    """The model requests in the server log after its first ``skip`` lines (and the log's line count)."""
    time.sleep(1.0)  # a request's access line is written as its stream ends, as the client exits
    lines = log.read_text().splitlines()
    rows = []
    for line in lines[skip:]:
        match = LINE.search(line)
        if match is None:
            continue
        door, status, total, ttft, prompt, cached, completion, answer = match.groups()
        if prompt is None:  # refused before the model (a 400 shows where a client's request was not understood)
            rows.append({"door": door, "status": int(status), "time_s": float(total)})
            continue
        rows.append({"door": door, "status": int(status), "time_s": float(total),
                     "ttft_s": float(ttft) if ttft else None, "prompt_tokens": int(prompt),
                     "cached_tokens": int(cached), "evaluated_tokens": int(prompt) - int(cached),
                     "completion_tokens": int(completion), "answer": answer})
    return rows, len(lines)


def floor_seconds(n_tokens: int, n_ctx: int) -> float:
    """Plain llama.cpp: a fresh context of ``n_ctx`` evaluating ``n_tokens`` prompt tokens, as the server's threads."""
    import llama_cpp

    from hammer_plugins.models.source import default_model_path
    from hammer_plugins.support.cpu_threads import physical_cores

    llama = llama_cpp.Llama(model_path=str(default_model_path()), n_ctx=n_ctx, n_threads=physical_cores(),
                            verbose=False)
    text = " ".join(f"Line {i}: read the files, keep changes small, run the tests, explain why." for i in range(4000))
    tokens = llama.tokenize(text.encode(), add_bos=False)[:n_tokens]
    assert len(tokens) == n_tokens
    started = time.perf_counter()
    llama.eval(tokens)
    seconds = time.perf_counter() - started
    llama.close()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", choices=["claude", "codex"], required=True)
    parser.add_argument("--n-ctx", type=int, default=32768)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--bare", action="store_true", help="Claude Code in its scripted mode (claude -p --bare)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="agent-sessions-"))
    folder, home, log = scratch / "prefix-kv", scratch / "home", scratch / "server.log"
    sessions: list[dict[str, Any]] = []
    seen = 0
    for server_run, names in ((1, ["first session", "second session"]), (2, ["after a restart"])):
        with serve(args.n_ctx, folder, log) as base_url:
            for name in names:
                session = {"session": name, "server": server_run, **run_client(args.client, base_url, home, args.bare)}
                session["requests"], seen = requests_in(log, seen)
                sessions.append(session)
                print(json.dumps({k: v for k, v in session.items() if not k.endswith("_tail")}), flush=True)
        seen = len(log.read_text().splitlines())
    first = [r for r in sessions[0]["requests"] if "prompt_tokens" in r]  # what the model answered
    floor = floor_seconds(first[0]["prompt_tokens"], args.n_ctx) if first else float("nan")
    answer = sum(r["time_s"] - (r["ttft_s"] or r["time_s"]) for r in first)
    refused = sum(r["status"] != 200 for s in sessions for r in s["requests"])
    summary = {"floor_s": round(floor, 2), "floor_prompt_tokens": first[0]["prompt_tokens"] if first else None,
               "first_session_answer_s": round(answer, 2),
               "first_session_target_s": round(1.1 * floor + answer, 2),
               "requests_refused": refused, **{f"{s['session']} wall_s": s["wall_s"] for s in sessions}}
    print(json.dumps(summary))
    write_record(args.json, {**run_facts("benchmarks/agent_sessions.py"), "client": args.client, "bare": args.bare,
                             "n_ctx": args.n_ctx,
                             "question": QUESTION, "load_average": os.getloadavg(), "summary": summary,
                             "sessions": sessions,
                             "note": "measured under the shared model lock: work that runs no model may have run "
                                     "beside it on the 2 cores"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
