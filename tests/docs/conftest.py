"""The docs' tooling (scripts/docsite: generators, the console-block runner) on sys.path for these tests."""

from __future__ import annotations

import sys
from pathlib import Path

DOCSITE = Path(__file__).resolve().parents[2] / "scripts" / "docsite"
if str(DOCSITE) not in sys.path:
    sys.path.insert(0, str(DOCSITE))
