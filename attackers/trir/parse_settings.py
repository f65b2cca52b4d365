"""spaCy's parse of each text, once: what the TRIR attacker's text preparation reads of it.

The parse and its cache are shared with span guessing and live in :mod:`audit.models.parses`
(:class:`Parse`, :class:`ParseCache`); what is TRIR's own is the pipeline it parses with.
"""

from __future__ import annotations

from audit.models.parses import Parse, ParseCache

__all__ = ["DISABLED_PIPES", "Parse", "ParseCache"]

#: Pipes left out of the pipeline. None: without the dependency parser, which the preparation
#: does not read, spaCy is ~15% faster, but a few lemmas change (TAB: 2 of ~4,000 tokens of a
#: court judgment, "having" → "have"), so the attacker would no longer be the same.
DISABLED_PIPES: tuple[str, ...] = ()
