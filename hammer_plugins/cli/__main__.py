"""``python -m hammer_plugins.cli``: the ``hammer`` command."""

if __name__ == "__main__":
    from hammer_plugins.cli.main import console_main

    console_main()
