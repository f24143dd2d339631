"""One configuration for every entry point: the engine's settings, declared once.

``ChatHammer`` and ``HammerLLM`` inherit :class:`EngineSettings` (so both adapters take the same
field names, defaults and validation, server options included), the ``hammer`` command builds one
from its options (:func:`add_engine_arguments`, :meth:`EngineSettings.from_args`), and every entry
point turns it into an engine the same way (:meth:`EngineSettings.build_engine`), sharing one engine per
configuration in the process (engines are light; the loaded model is shared by backend settings).

Example:
    >>> settings = EngineSettings(max_tokens=128, mask_names=True)
    >>> engine = settings.build_engine()
    >>> engine is EngineSettings(max_tokens=128, mask_names=True).build_engine(), engine.mask_names
    (True, True)
"""

from __future__ import annotations

import argparse
import threading
import types
import typing
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretStr

from hammer_plugins.backends.registry import SERVER_OPTIONS, find_backend
from hammer_plugins.engine.fields import DEFAULTS, EngineFields

if TYPE_CHECKING:
    from hammer_plugins.engine import HammerEngine



class EngineSettings(EngineFields):
    """Every setting of a :class:`~hammer_plugins.HammerEngine` (declared once, in
    :class:`~hammer_plugins.engine.fields.EngineFields`), and the engine they build.

    Example:
        >>> EngineSettings(backend="server", base_url="http://127.0.0.1:8080/v1").engine_options()["base_url"]
        'http://127.0.0.1:8080/v1'
    """

    def engine_options(self, model: str | None = None) -> dict[str, Any]:
        """The keyword arguments of :class:`~hammer_plugins.HammerEngine` for these settings.

        ``model`` (a per-call override) replaces ``model`` and ``model_path``. Server options are
        passed only to a backend that reads them (the registry's ``options``: the server backend).
        """
        options: dict[str, Any] = {name: getattr(self, name) for name in _ENGINE_FIELDS}
        if model:
            options.update(model=model, model_path=None)
        options.update(self.model_kwargs)
        reads = find_backend(self.backend).options if isinstance(self.backend, str) else ()
        options.update({k: getattr(self, k) for k in SERVER_OPTIONS if k in reads and getattr(self, k) is not None})
        return options

    def identifying_params(self) -> dict[str, Any]:
        """What tells this configured model from another in a framework's traces and caches (LangChain's
        ``_identifying_params``): every engine setting but the server's options (a key among them) and
        ``model_kwargs``; a backend object by its name."""
        params: dict[str, Any] = {name: getattr(self, name) for name in _ENGINE_FIELDS}
        if not isinstance(self.backend, str):
            params["backend"] = self.backend.name
        return params

    def build_engine(self, model: str | None = None) -> HammerEngine:
        """The engine for these settings (one per configuration in the process: its caches are kept)."""
        from hammer_plugins.engine import HammerEngine

        options = self.engine_options(model)
        key = repr(sorted((k, _key_part(v)) for k, v in options.items()))
        with _LOCK:
            engine = _ENGINES.get(key)
            if engine is not None:
                _ENGINES.move_to_end(key)
                return engine
        engine = HammerEngine(**options)
        with _LOCK:
            _ENGINES[key] = engine
            while len(_ENGINES) > 64:
                _ENGINES.popitem(last=False)
        return engine

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EngineSettings:
        """The settings of the ``hammer`` command's engine options (:func:`add_engine_arguments`)."""
        names = {**{name: dest for name, (_, dest, _) in ENGINE_FLAGS.items()}, "prefix_cache": "prefix_cache",
                 "cache_ram": "cache_ram", "on_refusal": "on_refusal"}
        return cls(**{name: getattr(args, dest) for name, dest in names.items() if hasattr(args, dest)})


def _key_part(value: Any) -> Any:
    """A value as part of an engine's cache key: equal settings give equal keys, objects by identity."""
    if isinstance(value, SecretStr):
        return ("secret", value.get_secret_value())
    if isinstance(value, str | int | float | bool | None):
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict | list | tuple):
        return ("value", repr(value))
    return ("object", id(value))


_ENGINE_FIELDS = tuple(name for name in EngineSettings.model_fields if name not in (*SERVER_OPTIONS, "model_kwargs"))
_ENGINES: OrderedDict[str, HammerEngine] = OrderedDict()
_LOCK = threading.Lock()


def add_concurrency_argument(parser: argparse.ArgumentParser) -> None:
    """``--concurrency N``: questions in flight at once, for evaluators run against a server with N slots.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_concurrency_argument(parser)
        >>> parser.parse_args(["--concurrency", "4"]).concurrency
        4
    """
    parser.add_argument("--concurrency", type=int, default=1, metavar="N",
                        help="questions in flight at once (default: 1). It pays only against a server with N slots "
                             "(`hammer serve --parallel N`), asked through --backend server (hammer eval) or "
                             "--base-url (hammer bench); a local model answers one at a time, and it is ignored")


# The ``hammer`` command's engine flags, read from the declaration (EngineFields: each shown setting's
# json_schema_extra holds its flag, its argparse dest where that differs from its name, and its help). Type,
# choices and default come from the declaration too; a bool setting that is on by default gets a ``--no-...``
# flag that turns it off.
ENGINE_FLAGS: dict[str, tuple[str, str, str | None]] = {
    name: (extra["flag"], extra.get("dest", name), extra.get("flag_help"))
    for name, field in EngineFields.model_fields.items()
    if isinstance(extra := field.json_schema_extra, dict) and "flag" in extra
}


def _union_members(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _choices(annotation: Any) -> list[Any] | None:
    """The values of the ``Literal`` in a field's annotation (``Literal[...] | None`` included)."""
    for member in _union_members(annotation):
        if typing.get_origin(member) is Literal:
            return list(typing.get_args(member))
    return None


def add_setting_argument(parser: argparse.ArgumentParser, name: str, flag: str | None = None, dest: str | None = None,
                         help: str | None = None, default: Any = None) -> None:  # noqa: A002
    """An argparse option for the engine setting ``name``: its type, choices and default come from the
    declaration (:class:`~hammer_plugins.engine.fields.EngineFields`); ``default`` replaces the declared one.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_setting_argument(parser, "n_ctx")
        >>> parser.parse_args([]).n_ctx, parser.parse_args(["--n-ctx", "2048"]).n_ctx
        (8192, 2048)
    """
    field = EngineFields.model_fields[name]
    value = getattr(DEFAULTS, name) if default is None else default
    options: dict[str, Any] = {"dest": dest or name}
    if help is not None:
        options["help"] = help
    if isinstance(value, bool):
        options["action"] = "store_false" if value else "store_true"
    else:
        options["default"] = value
        # A setting that also takes objects (tool_selector) names its flag's choices in its declaration.
        choices = _choices(field.annotation) or (field.json_schema_extra or {}).get("choices")  # type: ignore[union-attr]
        scalar = next((t for t in (int, float) if t in _union_members(field.annotation)), None)
        if choices:
            options["choices"] = choices
        elif scalar is not None:
            options["type"] = scalar
    parser.add_argument(flag or "--" + name.replace("_", "-"), **options)


def add_engine_arguments(parser: argparse.ArgumentParser, max_tokens: int | None = None) -> None:
    """The model and decoding options every ``hammer`` subcommand shares (read by :meth:`EngineSettings.from_args`).

    ``max_tokens`` replaces the declared default, for a command that wants shorter answers.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_engine_arguments(parser)
        >>> EngineSettings.from_args(parser.parse_args(["--threads", "2"])).n_threads
        2
    """
    for name, (flag, dest, help_text) in ENGINE_FLAGS.items():
        add_setting_argument(parser, name, flag, dest, help_text, max_tokens if name == "max_tokens" else None)
    add_prefix_cache_argument(parser)


def add_prefix_cache_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-prefix-cache``: the on-disk KV cache of prompt prefixes is on unless this is given."""
    add_setting_argument(parser, "prefix_cache", "--no-prefix-cache",
                         help="do not keep the KV state of prompt prefixes (the tools block, the instructions) on "
                              "disk for later turns and runs (llama.cpp; kept in $HAMMER_CACHE_DIR/prefix-kv; "
                              "`hammer cache clear` empties it)")
