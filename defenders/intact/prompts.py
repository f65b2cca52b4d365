"""INTACT's prompt for candidate generalisations (one few-shot example, a JSON array answer)."""

from __future__ import annotations


CANDIDATE_SYSTEM = (
    "You help publish documents without exposing personal details. In the sentence below, the words "
    "between double square brackets [[...]] must be replaced. Propose exactly {m} replacements, each a "
    "short phrase that is still TRUE of the bracketed words (a broader category, region, period, range "
    "or description) but says less than they do. Order them from the most specific (closest to the "
    "original) to the least specific (most general). Never repeat the original words or any part of "
    "them.\nAnswer with a JSON array of {m} strings and nothing else."
)
CANDIDATE_EXAMPLE = ("Sentence: She moved to [[Gdansk]] after the war.\nType of detail: LOC\n"
                     "Replacements, most specific first:")
CANDIDATE_EXAMPLE_ANSWER = ["a port city in northern Poland", "a city in Poland", "a city in Central Europe",
                            "a European city", "a city"]


#: Longer "candidates" are explanations or refusals, not replacements.
MAX_CANDIDATE_WORDS = 15


def candidate_user(sentence: str, label: str) -> str:
    """The question about one sentence whose detail is marked ``[[...]]``."""
    kind = f"\nType of detail: {label}" if label else ""
    return f"Sentence: {sentence}{kind}\nReplacements, most specific first:"
