"""The delinker: rewrite what still links a de-identified document to its source.

A de-identifier hides names, dates and places, but a released document keeps most of its
wording, and the adversary of the phrase-search attack (:mod:`attackers.phrase_search`, after
Lison & Anderson, "Protecting de-identified documents from search-based linkage attacks")
holds the original collection: a phrase, or a combination of phrases, found in fewer than
``k`` of its documents links the release back. The delinker removes those links:

1. The collection the adversary can search (``collection``, plus optional ``extra_corpus``
   documents) is indexed once with the attack's n-gram index
   (:class:`~audit.ngrams.NgramIndex`).
2. For each released document, :func:`attackers.phrase_search.linking.linking_ngrams` (the
   attack's own definition) finds what links: the minimal non-overlapping n-grams (n <=
   ``max_n``) with document frequency < ``k`` and, with ``arity`` 2 or 3, the combinations of
   common n-grams that link together (their shortest member is rewritten). Text inside the
   spans the de-identifier replaced, and placeholder tokens, is never part of an n-gram, so it
   is never rewritten.
3. The document is cut into chunks of ``chunk_sentences`` spaCy sentences. Each chunk with
   something to rewrite goes to the LLM with those spans (at most ``max_spans`` per request;
   more make several requests) marked ``[[like this]]``, two worked
   examples, and a request for a JSON object: a short reasoning, then one truthful rephrasing
   per marked span (a JSON schema enforces it where the backend supports schemas). A
   rephrasing is refused when it copies the phrase's words, holds brackets (small models copy
   the marks), or is much longer (:func:`usable_rewrite`), or invents a number or a name, or
   links by itself (:mod:`defenders.delinker.rewording_checks`); the others are spliced in. The
   requests of a round are sent as one batch.
4. The new text's n-grams are checked against the index again, and what still links is sent
   again (later rounds sample at ``retry_temperature`` with another seed, so a refused
   rewrite is not just replayed from the answer cache), up to ``max_rounds`` rounds.
5. What still links after the last round is replaced by ``[REDACTED]`` (``on_failure="redact"``)
   or kept (``"keep"``), and counted.

``plain=True`` is the paper's baseline: the same model rewrites whole chunks without being
told which spans link (round 1 rewrites every chunk, later rounds the chunks that still
link); the de-identifier's spans are shown as ``{{1}}``, ``{{2}}`` markers the answer must
keep, and nothing is redacted.

Every change is recorded on the released document next to the de-identifier's spans: a span
with label ``REPHRASED`` (:data:`~audit.core.data.REPHRASED`, whose words stay searchable by
the attacks) or ``REDACTED``, its offsets in the new text, ``original`` (the de-identified
text it replaced), ``replacement`` and, when the de-identifier's spans say how, ``orig_start``/
``orig_end`` in the original document. Per-document counts go to ``meta["delinker"]``, run
totals to :meth:`Delinker.stats`.
"""


from defenders.delinker.prompts import REDACTED_LABEL, REDACTION, parse_plain, parse_rewrites, usable_rewrite
from defenders.delinker.sanitizer import Delinker

__all__ = ["REDACTED_LABEL", "REDACTION", "Delinker", "parse_plain", "parse_rewrites", "usable_rewrite"]
