"""End to end: the gpuplan CLI as a user runs it, in child processes, and whole flows across many packages
(launch -> watch -> books, crash recovery, each provider end to end)."""
