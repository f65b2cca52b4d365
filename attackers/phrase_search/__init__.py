"""Phrase-search linkage: link a sanitized document back to its source by searching its phrases.

The threat (Lison & Anderson, "Protecting de-identified documents from
search-based linkage attacks"): an adversary holds the original collection, or
a superset of it, takes phrases that survived sanitization and searches for
them. A phrase (or a combination of phrases) found in fewer than ``k``
documents narrows the source down to fewer than ``k`` candidates: the
sanitized text is linked. No model is needed, so this is the cheapest strong
attack a data owner must expect.

How it runs (:class:`PhraseSearchAttack`):

1. ``fit`` builds (or loads from ``index_dir``) an :class:`~audit.ngrams.NgramIndex`
   of word n-grams (n <= ``max_n``, lower-cased, never crossing a sentence)
   over the originals plus the optional ``extra_corpus``.
2. For each released document, the attacker sees only the text between
   replacements: n-grams never include a replaced span recorded in
   ``Document.spans`` nor a placeholder token (``placeholder_pattern``: ``[PERSON]``,
   ``***``, ``SENSITIVE``, ``REDACTED``, ``CODE_0``, ...).
3. Arity 1: every visible n-gram with document frequency ``1 <= df < k`` is a
   link to its posting list. Evidence keeps the paper's minimal set: the
   shortest such n-grams first, dropping any that overlaps a kept one.
4. Arity 2 and 3 (only for documents not already linked, unless
   ``exhaustive``): combinations of common n-grams whose posting lists
   intersect in fewer than ``k`` documents. Pruning keeps this tractable on
   long documents and large collections: only n-grams with
   ``k <= df <= df_cap`` are candidates (a phrase in thousands of documents
   rarely narrows anything down), one per distinct phrase, and greedily the
   ``max_candidates`` rarest that do not overlap each other; pair and triple
   intersection sizes are then counted at once with 0/1 matrix products over
   the documents shared by at least two (three) candidates. A triple is only
   reported when none of its pairs links alone (it is minimal).

A document is **linked** when some candidate set (posting list or
intersection) has fewer than ``k`` documents and contains its original; it is
a **wrong link** when it has such candidate sets but none contains the
original. Ground truth: the original with the same id for aligned releases;
for unaligned releases (synthetic rewrites, where ids need not match), any
original about the document's ``subject`` (or the same id when no subject is
given); a document with neither is reported but not scored. The collection
may hold several documents per subject (an extra corpus of public texts), but
only the originals count as the right answer. Risk = linked fraction with a Wilson interval against the chance
baseline ``(k - 1) / |collection|`` (a guesser naming k - 1 documents at random; ``1 / |collection|``
at the default k = 2). The paper's n-gram-level figure is reported as
``phrase_search.ngram_residual``: of the original's uniquely-linking n-grams
(its minimal set of n-grams with df < k), the share still present in the
sanitized text, with a cluster-bootstrap interval over documents (n = documents).

Modules: :mod:`~attackers.phrase_search.attack` (the attack),
:mod:`~attackers.phrase_search.combinations` (phrase combinations),
:mod:`~attackers.phrase_search.linking` (what links a text: shared with the delinker sanitizer); the n-gram
index is the engine's shared layer :mod:`audit.ngrams`.
"""

from attackers.phrase_search.attack import DEFAULT_PLACEHOLDER_PATTERN, PhraseSearchAttack
from attackers.phrase_search.combinations import Combination, combination_candidates, rare_combinations
from attackers.phrase_search.linking import Links, blocked_ranges, linking_ngrams, rare_indices

__all__ = ["DEFAULT_PLACEHOLDER_PATTERN", "Combination", "Links", "PhraseSearchAttack", "blocked_ranges",
           "combination_candidates", "linking_ngrams", "rare_combinations", "rare_indices"]
