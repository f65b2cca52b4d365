"""Where anonaudit keeps its files (assembled models, LLM cache, trained attackers).

``ANONAUDIT_HOME`` overrides the location; otherwise ``$XDG_CACHE_HOME/anonaudit``
or ``~/.cache/anonaudit``. Nothing here is global state: each call reads the
environment, so tests can point it at a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    env = os.environ.get("ANONAUDIT_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "anonaudit"


def subdir(name: str) -> Path:
    """A folder under :func:`home`, created on first use."""
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path
