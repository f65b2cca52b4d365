"""INTACT: replace each personal detail with a truthful generalisation that an LLM cannot invert.

After "INTACT: truthful sanitization" (Algorithm 1), with our own prompts:

1. **Spans.** The spans to sanitize are the documents' annotations (gold spans), or what a
   registered detector finds (``detector="spacy_ner"``, ``"presidio"`` or any plugin's, found through the
   registry's ``detector`` kind). Overlapping spans
   keep the outermost one, exactly as :func:`audit.core.data.sanitize_corpus` does (nested
   mentions such as ``Serco Limited ("Serco")`` are sanitized as the outer span).
2. **Entities.** Mentions are grouped per document by ``entity_id`` when the span has one, else
   by their text (case-insensitive); later mentions reuse the first mention's replacement.
3. **Candidates.** ``PERSON`` and ``CODE`` entities become placeholders numbered per label and
   document in order of first mention (``PERSON_1``, ``PERSON_2``, ``CODE_1``); dates in a
   standard format ("12 March 1999", "March 12, 1999", "March 1999", "1999-03-12", "1999")
   get rule-based generalisations (month year, year, part of the decade, decade, century)
   without the LLM; every other entity gets one LLM request with its sentence, the span
   marked, asking for ``candidates`` replacements that are true of the original, from the
   most to the least specific (a JSON array, enforced by schema where the backend can).
   Candidates that contain the original, or the original text of any span of the document,
   are dropped (counted as ``dropped_candidates``), and so are those untrue of the original
   (:mod:`defenders.intact.truth`: years and numbers by rule, the rest by the model's
   log-probabilities of "Yes" and "No"; ``check_truth=False`` keeps them).
4. **Selection.** ``most_specific`` / ``least_specific`` take the first / last candidate.
   ``attack`` runs the inference attack of the paper: the current document, with the
   replacements already chosen, the most specific candidate for the entities still to come
   and the candidate under test for this entity, goes to the span-guessing prompt of
   :mod:`attackers.span_guess` for ``guesses`` guesses; a candidate is risky when a guess
   recovers the original under the MATCH rules. The first candidate that is not risky wins;
   when all are (or no answer could be parsed) the entity gets its label (``[LOC]``).

Every LLM request goes through ``resources_of(self).llm(self.llm)`` (the answer cache), seeded
with ``seed``; the requests of one step are sent as one batch. :meth:`IntactSanitizer.stats`
gives the counts of each release (entities, requests, fallbacks, unparsable answers).
"""

from defenders.intact.dates import date_generalisations
from defenders.intact.sanitizer import PLACEHOLDER_LABELS, SELECTIONS, IntactSanitizer, Selection

__all__ = ["PLACEHOLDER_LABELS", "SELECTIONS", "IntactSanitizer", "Selection", "date_generalisations"]
