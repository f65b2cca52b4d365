"""The attacker's auxiliary information: the few claims of each original it knows, reworded.

:func:`select_aux` chooses them (random with a seed, first or last) and
:func:`paraphrase_documents` has the LLM reword them, since facts rarely reach an
adversary word for word: one request per document for its few claims together (a JSON array),
the system prompt evaluated once and reused. :func:`paraphrase_claims` asks once a claim (the
design before; benchmarks/claim_linker_paraphrase.py measures the two side by side).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, get_args

from attackers.claim_linker.claims import Claim, word_count
from audit.core.text import word_tokens

if TYPE_CHECKING:
    from audit.models.llm import LLM


#: How the attacker's known claims are chosen among a document's claims.
AuxSelect = Literal["random", "first", "last"]
AUX_SELECT: tuple[str, ...] = get_args(AuxSelect)


def select_aux(claims: Sequence[Claim], k: int, how: str, rng: random.Random) -> list[int]:
    """Indices of the ``k`` claims the attacker knows (all of them if there are fewer)."""
    n = len(claims)
    k = min(k, n)
    if how == "first":
        return list(range(k))
    if how == "last":
        return list(range(n - k, n))
    if how == "random":
        return sorted(rng.sample(range(n), k))
    from audit.core.errors import AnonauditError

    raise AnonauditError(f"unknown aux selection {how!r} (use one of {', '.join(AUX_SELECT)})")


_PARA_SYSTEM = (
    "You paraphrase facts. Say the same thing with different words and sentence structure. "
    "Keep every piece of information, add nothing, and keep placeholders such as [PERSON] unchanged."
)
_PREFIX = re.compile(r"^\s*(?:paraphrase[d]?(?:\s+(?:fact|text|version))?|rewritten|answer|fact)\s*:\s*", re.IGNORECASE)


def paraphrase_request(claim: str, seed: int):
    from audit.models.llm import ChatRequest

    user = f'Paraphrase this fact. Answer with a JSON string.\n\nFact: {claim}'
    return ChatRequest.make([{"role": "system", "content": _PARA_SYSTEM}, {"role": "user", "content": user}],
                            temperature=0.0, max_tokens=96, seed=seed,
                            json_schema={"type": "string", "minLength": 3})


def parse_paraphrase(answer: str) -> str:
    """The paraphrase in an answer: a JSON string, ``{"...": "..."}``, or the first line
    with any "Paraphrase:" prefix and quotes removed. Empty when nothing usable."""
    text = answer.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, str):
        text = data
    elif isinstance(data, dict):
        text = next((v for v in data.values() if isinstance(v, str)), "")
    elif isinstance(data, list) and data and isinstance(data[0], str):
        text = data[0]
    else:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not (ln.strip().endswith(":") and word_count(ln) <= 6)]
        text = lines[0] if lines else ""
    text = _PREFIX.sub("", text).strip().strip('"').strip("'").strip()
    return " ".join(text.split()) if word_count(text) >= 2 else ""


def paraphrase_claims(llm: LLM, claims: Sequence[str], *, seed: int = 0,
                      progress: bool = False) -> tuple[list[str], int]:
    """Paraphrase each claim; returns ``(paraphrases, failures)``. A claim whose answer
    cannot be used, or only repeats it, is kept as it is (and counted as a failure)."""
    if not claims:
        return [], 0
    answers = llm.complete_batch([paraphrase_request(c, seed) for c in claims],
                                 progress=progress and "claim linker, paraphrasing claims")
    out, failed = [], 0
    for claim, answer in zip(claims, answers):
        para = parse_paraphrase(answer)
        if not para or word_tokens(para) == word_tokens(claim):
            failed += 1
            para = claim
        out.append(para)
    return out, failed


def paraphrase_group_request(claims: Sequence[str], seed: int):
    """One request for a document's few claims, answered as a JSON array of as many strings
    (the system prompt, shared by every document, is declared a shared prefix)."""
    from audit.models.llm import ChatRequest

    facts = "\n".join(f"{n}. {c}" for n, c in enumerate(claims, 1))
    user = (f"Paraphrase each of these {len(claims)} facts on its own. Answer with a JSON array of "
            f"{len(claims)} strings, the paraphrase of fact 1 first.\n\nFacts:\n{facts}")
    return ChatRequest.make([{"role": "system", "content": _PARA_SYSTEM}, {"role": "user", "content": user}],
                            temperature=0.0, max_tokens=96 * len(claims), seed=seed, shared=(1,),
                            json_schema={"type": "array", "minItems": len(claims), "maxItems": len(claims),
                                         "items": {"type": "string", "minLength": 3}})


_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_paraphrase_group(answer: str, k: int) -> list[str]:
    """The ``k`` paraphrases in an answer to :func:`paraphrase_group_request`, ``""`` for each
    one that is missing or unusable. An array cut short (the token limit) keeps its whole strings."""
    try:
        data = json.loads(answer.strip())
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        data = []
        for m in _JSON_STRING.finditer(answer):
            try:
                data.append(json.loads(f'"{m.group(1)}"'))
            except json.JSONDecodeError:
                data.append("")
    items = [parse_paraphrase(json.dumps(x)) if isinstance(x, str) else "" for x in data[:k]]
    return items + [""] * (k - len(items))


def paraphrase_documents(llm: LLM, groups: Sequence[Sequence[str]], *, seed: int = 0,
                         progress: bool = False) -> tuple[list[list[str]], int]:
    """Paraphrase each document's claims in one request; returns ``(paraphrases per document,
    failures)``. A claim whose paraphrase is missing, unusable or only repeats it is kept as it
    is (and counted as a failure), as in :func:`paraphrase_claims`."""
    asked = [i for i, g in enumerate(groups) if g]
    answers = llm.complete_batch([paraphrase_group_request(groups[i], seed) for i in asked],
                                 progress=progress and "claim linker, paraphrasing claims") if asked else []
    out: list[list[str]] = [[] for _ in groups]
    failed = 0
    for i, answer in zip(asked, answers):
        for claim, para in zip(groups[i], parse_paraphrase_group(answer, len(groups[i]))):
            if not para or word_tokens(para) == word_tokens(claim):
                failed += 1
                para = claim
            out[i].append(para)
    return out, failed
