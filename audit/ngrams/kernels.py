"""The index's loops over characters, tokens and pairs, compiled with numba: a text's tokens
(spans, hashes, sentence boundaries) in one pass over its code points, a chunk's distinct
packed (n-gram, document) keys in one pass over its tokens (each document's repeats found in a
hash table that stays in cache) and one more that places them bucket after bucket, and a
bucket's layout into the index's arrays in one pass over its sorted pairs.

Written as array expressions in numpy, the same work took a dozen passes over every character
and about twenty over every token or pair, each with its temporary array: 115 ns a word against
33 ns compiled for the first two (benchmarks/README.md). The kernels release the GIL, so the build's threads run them
side by side. They are compiled on first use (about 1.5 s) and cached on disk beside their
module (``_compiled``), or in numba's user-wide cache where that folder cannot be written, so a
fresh process (a Ray worker) loads them in a fraction of a second; numba is imported only
then, so importing the index costs nothing.

What they compute is defined in the package docstring ("Tokenisation", "Hashing"); the tests
hold them to a plain Python reading of the same rules (``tests/test_phrase_search.py``).
"""

from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace


@lru_cache(maxsize=1)
def kernels() -> SimpleNamespace:
    """The compiled kernels, ``scan_tokens``, ``doc_pairs``, ``by_bucket``, ``lay_out``, ``find``
    and ``keep_free`` (compiled, or loaded from the cache, on the first call of each; defined in
    :mod:`audit.ngrams._compiled`, imported here on first use)."""
    from audit.ngrams import _compiled as c

    return SimpleNamespace(scan_tokens=c.scan_tokens, doc_pairs=c.doc_pairs, by_bucket=c.by_bucket,
                           lay_out=c.lay_out, find=c.find, keep_free=c.keep_free)
