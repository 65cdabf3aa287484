"""Test support: the CLI runners, moto fixtures and guards, the hand-built ledger, podman and Slurm helpers, and the
fake Google servers (fakes/). Imported as `support.<module>`: pyproject's `pythonpath = ["tests"]` puts tests/ on
sys.path; the moto fixtures are registered as a plugin by tests/conftest.py."""
