"""Alembic migration scripts, shipped inside the wheel as gpuplan.migrations."""
