"""Deprecated: the n-gram index moved to :mod:`audit.ngrams` (issue 59), a shared layer below the
plugins, since the delinker uses it as much as phrase search does.

``from attackers.phrase_search.index import NgramIndex`` and its modules
(``attackers.phrase_search.index.shards``...) still work, with a :class:`DeprecationWarning`:
each name here is the object of :mod:`audit.ngrams`, and each module the same module object."""

from __future__ import annotations

import importlib
import sys
import warnings

import audit.ngrams
from audit.ngrams import *  # noqa: F401,F403 - the package's names, at their old path
from audit.ngrams import __all__  # noqa: F401

warnings.warn("attackers.phrase_search.index is deprecated: import the n-gram index from audit.ngrams",
              DeprecationWarning, stacklevel=2)

#: The modules of :mod:`audit.ngrams`, each also known by its old name.
MODULES = ("build", "hashing", "kernels", "layout", "query", "shards", "storage", "tokenizer", "windows")
for _module in MODULES:
    sys.modules[f"{__name__}.{_module}"] = globals()[_module] = importlib.import_module(f"audit.ngrams.{_module}")
del _module, audit
