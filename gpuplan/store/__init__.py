"""The books: SQLAlchemy 2.0 models, the engine/session factory and schema upgrades through Alembic.

Import gpuplan.store.db / gpuplan.store.models explicitly; this package's __init__ stays empty so that
importing it costs nothing.
"""
