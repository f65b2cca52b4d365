"""Span guessing: can an LLM guess back what a sanitizer replaced?

The inference attack of INTACT (Pilán et al., section 3.2): the adversary reads the
sanitized document, knows which spans were replaced or masked, and asks an
instruction-tuned LLM for ``p`` guesses of the original words of each span, given
the replacement and the rest of the document. A span is *recovered* when one of
the guesses MATCHes the original. It measures whether a generalisation such as
"a European capital" still gives "Warsaw" away.

Three reusable pieces (INTACT's candidate selection reuses the first two):

* :class:`SpanGuesser` — builds the one-shot prompt (the target span marked
  ``[[...]]`` in the document, the context trimmed around it to fit the model),
  asks for a JSON array of ``p`` strings (enforced by the backend where it can be),
  and parses lists in any common format as the fallback (:func:`parse_guesses`);
* :class:`Matcher` / :func:`match` / :func:`match_reason` — the MATCH function;
* :class:`SpanGuessAttack` — the registered attack: spans from the release (its
  recorded replacements, else an alignment with the original), a seeded sample,
  recovery rate overall and per entity label with cluster-bootstrap intervals over
  documents (the spans of one document share its context), beside a naive
  context-free baseline; a guesser below that baseline is flagged as too weak.

The MATCH rules are in :mod:`~attackers.span_guess.matcher`; the prompt and the answer
parser in :mod:`~attackers.span_guess.guesser`; the attack in :mod:`~attackers.span_guess.attack`.
"""

from attackers.span_guess.attack import SpanGuessAttack
from attackers.span_guess.guesser import SpanGuesser, parse_guesses
from attackers.span_guess.matcher import (DATE_LABELS, NE_LABELS, Matcher, corpus_matcher, default_matcher, match,
                                          match_reason)

__all__ = ["DATE_LABELS", "NE_LABELS", "Matcher", "SpanGuessAttack", "SpanGuesser", "corpus_matcher",
           "default_matcher", "match", "match_reason", "parse_guesses"]
