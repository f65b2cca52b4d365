"""Prompt-based LLM anonymization: an LLM names the terms to mask, every occurrence is masked.

The four prompt families compared in the LLM-anonymization paper (``shared/papers``,
section 3), each kept to its structure, with wording of our own:

* ``mvm`` (after "Man vs the machine") — system + user, zero-shot: every token that can be
  connected to the person described (all of their attributes);
* ``sparks`` (after "Sparks of AGI") — user only, zero-shot: the eight PII types with a
  description each, the text marked as a STATEMENT;
* ``student`` (after "Student de-identification") — user only, one-shot: a short list of
  NER-like PII types of a de-identification task and one worked example inside the message;
* ``ppdp`` (the paper's own prompt, the default) — system + user + an example answer from the
  assistant (one-shot), then the document: every attribute of the person, not only named
  entities, every occurrence, the text marked as TEXT.

Each family asks for a JSON list of strings; where the backend enforces JSON schemas the list
is also asked for as one (an array of strings), and answers are parsed tolerantly either way
(:func:`parse_terms`: JSON, a Python-style list, a list cut off by the token limit, bullets).
Terms that do not occur in the document are counted and ignored: no offset is ever invented.
Every proposed term is validated before it is masked (:mod:`~defenders.prompt_anonymizer.validate`:
no punctuation, stop words or word found in most of the corpus's documents; ``validate=False``
follows the model as the paper does), and each release gets a self-check with a warning when it
degenerates (:mod:`defenders.selfcheck`).
Masking (:func:`find_terms`) is case-insensitive and word-bounded ("Ann" never masks "Annex"),
longest match first; a shorter match inside a kept one is dropped, one that crosses a kept one
widens it to their union (so no character of a proposed term stays visible); every occurrence is
replaced by ``replacement`` ("SENSITIVE", as in the paper) and recorded on the released document
(offsets in the sanitized text, the original text and its offsets) like every sanitizer here.
Recorded spans carry no label: the LLM gives no type (an attack that wants one, such as
``span_guess``, labels them with NER).

How chunking changes the method. The paper sends each document whole. A document longer than
``chunk_tokens`` tokens (the LLM's ``count_tokens``; the base estimate is ~4 characters a token)
is cut at spaCy sentence boundaries into chunks within that budget (a sentence longer than the
budget is cut between words), and each chunk is asked about on its own, with a note saying it is
part i of n of a longer text (and about which subject, when the document has a ``subject``).
The terms of all chunks are pooled and masked over the whole document, so a term found in one
chunk is masked in every chunk. What is lost: the model no longer sees the whole document at
once, so an attribute that reads as personal only together with a distant sentence can be
missed, and a chunk without the person's name may look impersonal. Documents within the budget
get exactly the family's prompt, with no note.

Iterative variant (``rounds > 1``, not in the paper): after masking, the same model reads the
masked text as an adversary would and lists the words still in it that reveal something about
the person; those are masked too (over the original, pooled with the earlier terms), until
``rounds`` rounds were run or a round masks no new character.

All requests of one document's chunks (per round) go to the LLM in one ``complete_batch``,
seeded with ``seed`` and cached by the run's answer cache, so a re-run asks nothing again.
:meth:`PromptAnonymizer.stats` counts requests, approximate prompt/answer tokens (characters / 4),
terms proposed, terms not found in the text, repaired and unparsable answers.
"""


from defenders.prompt_anonymizer.prompts import FAMILIES, PROMPTS, TERMS_SCHEMA, Family
from defenders.prompt_anonymizer.sanitizer import DocumentResult, PromptAnonymizer
from defenders.prompt_anonymizer.parsing import find_terms, pack_chunks, parse_terms

__all__ = ["FAMILIES", "PROMPTS", "TERMS_SCHEMA", "DocumentResult", "Family", "PromptAnonymizer",
           "find_terms", "pack_chunks", "parse_terms"]
