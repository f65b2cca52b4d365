"""The four prompt families (and the inference prompt of the iterative variant)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal


Family = Literal["mvm", "sparks", "student", "ppdp"]
FAMILIES: tuple[str, ...] = ("mvm", "sparks", "student", "ppdp")

#: JSON schema of every answer: a list of strings.
TERMS_SCHEMA: dict[str, Any] = {"type": "array", "items": {"type": "string"}}


# =========================================================================== prompts
# One small function per family: (document, note) -> messages. ``note`` is empty unless the
# document was split into chunks (then it says which part this is, and about whom).

def _with_note(note: str, text: str) -> str:
    return f"{note}\n{text}" if note else text


def mvm_messages(document: str, note: str = "") -> list[dict[str, str]]:
    """Zero-shot, system + user: every token linked to the person (all attributes)."""
    return [
        {"role": "system", "content": "You are a concise assistant. Answer briefly and never explain."},
        {"role": "user", "content": (
            "Find every token (words, dates and numbers included) of the person description below that "
            "could be tied to the person it describes, so that the text would be anonymous once those "
            "tokens are taken out. Answer with a JSON list of these tokens. "
            + (f"{note} " if note else "") + f"Person description: {document}")},
    ]


_SPARKS_TYPES = (
    "a. names of people, with nicknames, aliases, user names and initials;",
    "b. numbers and codes that single something out: social security, telephone, passport or licence "
    "plate numbers and the like;",
    "c. places: towns, districts, regions, countries, and named infrastructure such as stations, "
    "bridges or stops;",
    "d. names of organisations: firms, schools and universities, public bodies, prisons, hospitals, "
    "charities, churches and so on;",
    "e. demographic traits: mother tongue, origin, ethnicity, job title, rank, education, looks, "
    "medical diagnosis, distinguishing marks, age;",
    "f. a particular date (such as 3 October 2018), time of day (such as 9:48 AM) or duration (such "
    "as 18 years);",
    "g. a meaningful quantity, such as a percentage or a sum of money;",
    "h. anything else that describes an individual and fits none of the types above.",
)


def sparks_messages(document: str, note: str = "") -> list[dict[str, str]]:
    """Zero-shot, user only: the eight PII types with descriptions; the text is a STATEMENT."""
    types = "\n".join(f"   {t}" for t in _SPARKS_TYPES)
    return [{"role": "user", "content": (
        "INSTRUCTIONS:\n"
        "1. In the statement given below (marked STATEMENT), find all personally identifiable "
        f"information. It covers:\n{types}\n"
        "2. Give this personally identifiable information as a JSON list of strings.\n\n"
        "TASK:\n" + _with_note(note, f'STATEMENT = """{document}"""'))}]


_STUDENT_EXAMPLE = (
    "Hi all, I made a Discord server for our study group, join here: https://discord.gg/k7Qm2xZp. "
    "We will go through the weekly problem sets of 'Statistics for Data Science' together every "
    "Thursday evening, in English. Anyone taking the course is welcome, hope to see you there!"
)
_STUDENT_ANSWER = ["https://discord.gg/k7Qm2xZp"]


def student_messages(document: str, note: str = "") -> list[dict[str, str]]:
    """One-shot, user only: NER-like PII types of a de-identification task and one example."""
    return [{"role": "user", "content": (
        "Give a JSON list of the personally identifiable information (PII) in the text you are given: "
        "names, company names, where people come from, where they live now, addresses and social media "
        "links. If the text has no PII, give an empty list.\n\n"
        f"For instance, for this input:\n\n{_STUDENT_EXAMPLE}\n\n"
        f"the output has to be:\n\n{json.dumps(_STUDENT_ANSWER)}\n\n"
        "Now do the same for this text:\n" + _with_note(note, document))}]


_PPDP_EXAMPLE = (
    "Colleagues say that Maria Keller was a better mentor than researcher. Her former student Novak "
    "credits Keller's supervision for his 2011 prize nomination. Keller left Uppsala University "
    "abruptly in 2015, and nobody knows why."
)
_PPDP_ANSWER = ["Maria Keller", "mentor", "researcher", "student", "Novak", "Keller's", "supervision",
                "2011", "prize nomination", "Keller", "left", "Uppsala University", "abruptly", "2015",
                "nobody knows why"]


def ppdp_messages(document: str, note: str = "") -> list[dict[str, str]]:
    """One-shot, system + user + example answer: every attribute (not only named entities),
    every occurrence, the text marked as TEXT."""
    task = (
        "Find every text span (words, dates and numbers included) of the TEXT below that gives an "
        "attribute of the person it is about. Answer with a JSON list of those spans, each copied "
        "verbatim from TEXT (formatting included). Be sure to list every occurrence of such spans, "
        "and also their synonyms, related words, variants and more specific forms. Do not stop at "
        "named entities: any span at all can be an attribute.\n\n"
    )
    return [
        {"role": "system", "content": "You are an expert assistant. Give no explanations, and make your "
                                      "answers as long as they need to be."},
        {"role": "user", "content": f"{task}TEXT:\n{_PPDP_EXAMPLE}"},
        {"role": "assistant", "content": json.dumps(_PPDP_ANSWER)},
        {"role": "user", "content": _with_note(note, f"TEXT:\n{document}")},
    ]


PROMPTS: dict[str, Callable[[str, str], list[dict[str, str]]]] = {
    "mvm": mvm_messages, "sparks": sparks_messages, "student": student_messages, "ppdp": ppdp_messages,
}


def inference_messages(masked: str, replacement: str, note: str = "") -> list[dict[str, str]]:
    """The iterative rounds' question: what does the masked text still give away?"""
    how = (f"some words were replaced by {replacement}" if replacement.strip()
           else "some words were deleted")
    return [
        {"role": "system", "content": "You are an expert in re-identifying people from anonymized texts. "
                                      "Give no explanations."},
        {"role": "user", "content": (
            f"In the TEXT below, {how} to anonymize it. Read it as an adversary would: what can you "
            "still infer about the person it is about? Answer with a JSON list of the words and phrases, "
            "copied verbatim from TEXT, that still reveal or hint at who the person is or describe them. "
            "Answer [] if nothing is left.\n\n" + _with_note(note, f"TEXT:\n{masked}"))},
    ]
