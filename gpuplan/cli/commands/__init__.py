"""One module per CLI command (group); registered by name in gpuplan.cli.COMMANDS and imported lazily."""
