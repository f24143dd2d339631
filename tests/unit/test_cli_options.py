"""The shared model options reach the engine (no model is loaded: the engine is lazy)."""

from __future__ import annotations

from hammer_plugins.cli.main import _engine, build_parser


def test_threads_reach_the_llama_cpp_backend() -> None:
    args = build_parser().parse_args(["call", "hi", "--threads", "2", "--n-ctx", "2048"])
    engine = _engine(args)
    assert engine._backend_options["n_threads"] == 2 and engine._backend_options["n_ctx"] == 2048
    assert not engine.is_loaded


def test_threads_default_to_the_backends_choice() -> None:  # one per physical core: test_cpu_threads.py
    assert _engine(build_parser().parse_args(["call", "hi"]))._backend_options["n_threads"] is None


def test_hammerbench_accepts_threads() -> None:
    args = build_parser().parse_args(["eval", "hammerbench", "--data", "x", "--threads", "2"])
    assert args.threads == 2


def test_evaluator_commands_without_hammer_evals_name_what_to_install(monkeypatch, capsys) -> None:
    # A core-only install (no hammer-evals distribution registers `eval` / `bench`).
    from hammer_plugins.cli import main as cli

    monkeypatch.setattr(cli, "_commands", lambda: [])
    assert cli.main(["eval", "academic", "--limit", "2"]) == 2
    assert cli.main(["bench", "accuracy"]) == 2
    err = capsys.readouterr().err
    assert "Fix: pip install hammer-evals\n" in err and "Fix: pip install 'hammer-evals[bench]'" in err


def test_evaluator_help_without_hammer_evals_names_what_to_install(monkeypatch, capsys) -> None:
    # `hammer eval --help` once answered "unrecognized arguments: --help": the help is what to install.
    from hammer_plugins.cli import main as cli

    monkeypatch.setattr(cli, "_commands", lambda: [])
    for argv, fix in ((["eval", "--help"], "pip install hammer-evals\n"), (["bench", "-h"], "pip install 'hammer-evals[bench]'"),
                      (["bench", "accuracy", "--limit", "1"], "pip install 'hammer-evals[bench]'")):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"Fix: {fix}" in err and "unrecognized" not in err, (argv, err)


def test_unknown_options_of_a_real_command_are_still_refused(capsys) -> None:
    import pytest

    from hammer_plugins.cli import main as cli

    with pytest.raises(SystemExit) as info:
        cli.main(["models", "--bogus"])
    assert info.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_the_top_level_help_says_serve_is_also_the_api_server() -> None:
    """``hammer --help`` is where a newcomer looks first: ``serve`` is Hammer's API server with ``--openai`` (every
    API, the playground), not llama-server alone."""
    from hammer_plugins.cli.main import build_parser

    text = " ".join(build_parser([]).format_help().split())
    serve = text[text.index(" serve "):text.index(" playground ")]
    assert "--openai" in serve and all(api in serve for api in ("OpenAI", "Anthropic", "Ollama")), serve
    assert "llama-server" in serve and "playground" in serve, serve
