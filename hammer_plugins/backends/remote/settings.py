"""The server backend's settings and counters, and the kinds of server it knows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from hammer_plugins.prompt.render import STOP_SEQUENCES

ServerKind = Literal["auto", "llama_cpp_python", "llama_server", "vllm", "openai"]
GrammarProtocol = Literal["auto", "llama_cpp", "vllm", "vllm_guided", "none"]
TokenCounting = Literal["server", "estimate"]

# Hammer is a Qwen2.5 fine-tune speaking ChatML: these end an assistant turn.
DEFAULT_STOP = list(STOP_SEQUENCES)
# Hammer 2.1's (Qwen2.5's) trained context; used only when the server does not say (llama-cpp-python).
ASSUMED_CONTEXT_WINDOW = 32768


# --------------------------------------------------------------------------------------- settings
class ServerBackendSettings(BaseModel):
    """Settings of :class:`OpenAICompatibleBackend`; every field can be passed to its constructor.

    Example:
        >>> ServerBackendSettings(base_url="http://127.0.0.1:8000/v1/").base_url
        'http://127.0.0.1:8000'
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="Server root or its /v1 URL; default $HAMMER_SERVER_URL.")
    model: str | None = Field(None, description="Model name the server serves; None: the only one it lists.")
    api_key: SecretStr | None = Field(None, description="Bearer token; default $HAMMER_SERVER_API_KEY.")
    timeout: float = Field(120.0, gt=0, description="Longest silence allowed (seconds): queueing and time to first token.")
    connect_timeout: float = Field(5.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10, description="Retries of connection failures and 429/502/503/504.")
    retry_backoff: float = Field(0.5, ge=0, description="First retry delay; doubles each retry, with jitter.")
    max_backoff: float = Field(8.0, ge=0, description="Cap on one retry delay, Retry-After included.")
    server_kind: ServerKind = "auto"
    grammar_protocol: GrammarProtocol = "auto"
    verify_grammar: bool = Field(True, description="Probe once that the server applies grammars.")
    context_window: int | None = Field(None, gt=0, description="Overrides what the server reports.")
    token_counting: TokenCounting = "server"
    max_connections: int = Field(64, ge=1)
    stop: list[str] = Field(default_factory=lambda: list(DEFAULT_STOP))
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Merged into every completion request.")
    headers: dict[str, str] = Field(default_factory=dict)
    trust_env: bool = Field(True, description="Honour HTTP(S)_PROXY / NO_PROXY and SSL_CERT_FILE.")

    @field_validator("base_url")
    @classmethod
    def _normalize_url(cls, value: str) -> str:
        url = value.strip().rstrip("/")
        if not re.match(r"^https?://[^/]+", url):
            raise ValueError(f"base_url must start with http:// or https://, got {value!r} (e.g. 'http://127.0.0.1:8080')")
        # Users copy either the server root or the OpenAI-style ".../v1" URL; endpoints hang off the root.
        return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass
class ServerStats:
    """Counters of one backend: HTTP requests sent (retries included), retries, finished completions,
    failed ones, and completions in flight now and at most at once (how much concurrency was real)."""

    requests: int = 0
    retries: int = 0
    completions: int = 0
    errors: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0


