"""Find a model's config.json: a file, a model directory, or a Hub id already in the local Hugging Face cache.

No network: `--model-config meta-llama/Llama-3.1-8B` reads the snapshot `huggingface-cli download` (or any
transformers `from_pretrained`) left in the cache, at $HF_HUB_CACHE, else $HF_HOME/hub, else
~/.cache/huggingface/hub (huggingface_hub's documented cache layout: models--{org}--{name}/snapshots/{revision}/,
https://huggingface.co/docs/huggingface_hub/guides/manage-cache). The newest snapshot with a config.json wins.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache directory, as huggingface_hub resolves it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def cached_config(model_id: str, cache: Path | None = None) -> Path | None:
    """config.json of `model_id` (org/name) in the local cache; None if it was never downloaded."""
    root = (cache or hub_cache_dir()) / f"models--{model_id.replace('/', '--')}" / "snapshots"
    if not root.is_dir():
        return None
    found = [p / "config.json" for p in root.iterdir() if (p / "config.json").is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def resolve_config_path(spec: str | Path) -> Path:
    """The config.json `spec` names: the file itself, `<dir>/config.json`, or a cached Hub id.

    Raises ValueError with a one-line message when none of them exists.
    """
    from gpuplan.paths import expand_user

    path = expand_user(spec)
    try:
        path.exists()
    except OSError as exc:  # a name over 255 bytes (ENAMETOOLONG), a path through a file: no such config
        raise ValueError(f"model config {str(spec)[:80]}...: {exc.strerror}") from None
    if path.is_file():
        return path
    if path.is_dir():
        if (path / "config.json").is_file():
            return path / "config.json"
        raise ValueError(f"model config: {path} has no config.json")
    text = str(spec)
    if _HUB_ID.match(text):
        cached = cached_config(text)
        if cached is not None:
            return cached
        raise ValueError(f"model config {text!r} is neither a file nor in the Hugging Face cache at "
                         f"{hub_cache_dir()} (download it first: huggingface-cli download {text} config.json)")
    raise ValueError(f"model config {path} does not exist")
