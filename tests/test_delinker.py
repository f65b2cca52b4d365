"""The delinker sanitizer on small hand-made collections, with a scripted LLM (one slow test
with the embedded 0.5B model)."""

from __future__ import annotations

import json
import re

import pytest

from attackers.phrase_search import DEFAULT_PLACEHOLDER_PATTERN, PhraseSearchAttack
from audit.ngrams import NgramIndex
from audit.core.data import REPHRASED, Corpus, Document, Release, Scenario, Span, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.registry import registry
from audit.models.llm import ScriptedLLM
from defenders.delinker import REDACTION, Delinker, parse_plain, parse_rewrites

COMMON = "The Court held a hearing on the matter. The applicant complained about the length of the proceedings."

TEXTS = {
    "a": f"{COMMON} Later Anna visited Oslo yesterday evening. She met her lawyer in the old harbour district.",
    "b": f"{COMMON} Later Anna visited Paris yesterday evening. She met her lawyer at the station.",
    "c": f"{COMMON} Later Bob visited Paris yesterday evening. She met her lawyer at the station.",
}

MARK = re.compile(r"\[\[(.*?)\]\]")


def originals() -> Corpus:
    return Corpus([Document(i, t, subject=i) for i, t in TEXTS.items()], name="originals")


def deidentified(orig: Corpus) -> Release:
    """Names masked as [PERSON] (the de-identifier's spans, recorded on the release)."""
    spans = {}
    for doc in orig:
        spans[doc.id] = [Span(m.start(), m.end(), "PERSON", replacement="[PERSON]")
                         for m in re.finditer(r"\b(Anna|Bob)\b", doc.text)]
    return sanitize_corpus(orig, spans, name="masked")


def marked(req) -> list[str]:
    return MARK.findall(req.messages[-1][1])


def _spelled(n: int) -> str:
    """A number in words ("one three"), so that no rewording invents a digit."""
    return " ".join("zero one two three four five six seven eight nine".split()[int(c)] for c in str(n))


def rewriter(new=lambda phrase: f"some place {_spelled(len(phrase))}"):
    """A scripted LLM that rewords every marked phrase with ``new(phrase)``."""
    return ScriptedLLM(lambda req: json.dumps(
        {"reasoning": "r", "rewrites": [{"marked": m, "new": new(m)} for m in marked(req)]}))


def delink(release: Release, llm, **params) -> tuple[Delinker, Release]:
    params.setdefault("collection", originals())
    d = Delinker(llm=llm, progress=False, **params)
    return d, d.sanitize(release.corpus, name="delinked")


def check_offsets(before: Release, after: Release) -> None:
    """Every recorded span is where it says; the de-identifier's spans are unchanged but for
    their offsets; undoing the rewrites gives the de-identified text back."""
    orig = originals()
    for doc in after:
        src = before.corpus[doc.id]
        for s in doc.spans:
            assert doc.text[s.start:s.end] == s.replacement, (doc.id, s)
        deid = [s for s in doc.spans if s.label not in (REPHRASED, "REDACTED")]
        assert [(s.original, s.orig_start, s.orig_end, s.replacement) for s in deid] == \
               [(s.original, s.orig_start, s.orig_end, s.replacement) for s in src.spans]
        rewrites = [s for s in doc.spans if s.label in (REPHRASED, "REDACTED")]
        text = doc.text
        for s in sorted(rewrites, key=lambda s: -s.start):
            text = text[:s.start] + s.original + text[s.end:]
            # the rewritten words come verbatim from the original document
            assert orig[doc.id].text[s.orig_start:s.orig_end] == s.original
        assert text == src.text


def test_sends_exactly_the_linking_ngrams_and_leaves_masks_alone():
    orig = originals()
    release = deidentified(orig)
    llm = rewriter()
    d, out = delink(release, llm, chunk_sentences=1)
    index = NgramIndex.from_corpora([("collection", orig)])
    sent = [m for req in llm.calls for m in marked(req)]
    expected = []
    for doc in release:
        blocked = [(s.start, s.end) for s in doc.spans]
        blocked += [m.span() for m in re.finditer(DEFAULT_PLACEHOLDER_PATTERN, doc.text)]
        expected += [r.text for r in index.rare_ngrams(doc.text, 2, blocked=blocked)]
    assert sorted(sent) == sorted(expected)  # one round: every request is round 1
    assert "Oslo" in expected and not any("PERSON" in e for e in expected)
    # one request per chunk (sentence) with something to rewrite; the masks are shown, never marked
    assert all(len(marked(r)) >= 1 for r in llm.calls)
    assert any("[PERSON]" in r.messages[-1][1] for r in llm.calls)
    check_offsets(release, out)
    # b and c read the same once their names are masked: nothing links them, nothing is sent
    assert [doc.meta["delinker"]["rounds"] for doc in out] == [1, 0, 0]
    assert out.corpus["c"].text == release.corpus["c"].text
    assert d.stats()["delinker"]["delinked"]["spans_sent"] == len(expected)


def test_a_registered_detector_masks_bare_documents_before_delinking(monkeypatch):
    """``detector=NAME``: any registered detector, found by name; the delinker masks what it finds in
    documents that record no replacement, then delinks them as it would a de-identified release."""
    from audit.core.interfaces import Detector

    class Names(Detector):
        name = "toy_names"

        def detect(self, texts):
            return [[Span(m.start(), m.end(), "PERSON") for m in re.finditer(r"\b(Anna|Bob)\b", t)] for t in texts]

    monkeypatch.setattr(registry, "_classes", {k: dict(v) for k, v in registry._classes.items()})
    registry.register("detector")(Names)
    orig = originals()
    _, via_detector = delink(Release("bare", orig), rewriter(), detector="toy_names", chunk_sentences=1)
    _, via_release = delink(deidentified(orig), rewriter(), chunk_sentences=1)
    assert [(d.text, d.spans) for d in via_detector] == [(d.text, d.spans) for d in via_release]
    assert "Anna" not in via_detector.corpus["a"].text
    # a document that records its replacements is left as it is
    assert Delinker(detector="toy_names").deidentified(deidentified(orig).corpus)["a"].text == \
        deidentified(orig).corpus["a"].text
    with pytest.raises(AnonauditError, match="delinker: detector: unknown detector 'nope'"):
        Delinker(detector="nope")


def test_after_delinking_phrase_search_no_longer_links():
    orig = originals()
    release = deidentified(orig)
    attack = PhraseSearchAttack(arity=1)
    before, _ = attack.evaluate(Scenario(originals=orig, releases=(release,)), release)
    assert before.value > 0
    _, out = delink(release, rewriter())
    after, _ = PhraseSearchAttack(arity=1).evaluate(Scenario(originals=orig, releases=(out,)), out)
    assert after.value == 0.0
    assert all(f.facts["rare_ngrams"] == 0 for f in after.documents)
    # the rewritten words stay visible to the attacker (only masks are blocked)
    doc = out.corpus["a"]
    assert any(s.label == REPHRASED for s in doc.spans) and "some place" in doc.text


def test_rounds_repeat_until_nothing_links_then_stop():
    orig = originals()
    release = deidentified(orig)

    def script(req):  # round 1 refuses (answers the same words), round 2 rewords
        ms = marked(req)
        new = (lambda m: m) if req.temperature == 0.0 else (lambda m: f"elsewhere {_spelled(len(m))}")
        return json.dumps({"reasoning": "r", "rewrites": [{"marked": m, "new": new(m)} for m in ms]})

    llm = ScriptedLLM(script)
    d, out = delink(release, llm, max_rounds=3, retry_temperature=0.5)
    assert [doc.meta["delinker"]["rounds"] for doc in out] == [2, 0, 0]
    assert {r.temperature for r in llm.calls} == {0.0, 0.5} and {r.seed for r in llm.calls} == {0, 1}
    assert all(doc.meta["delinker"]["still_linking"] == 0 for doc in out)
    assert all(doc.meta["delinker"]["redacted"] == 0 for doc in out)
    totals = d.stats()["delinker"]["delinked"]
    assert totals["llm_requests"] == len(llm.calls) and totals["max_rounds_used"] == 2
    check_offsets(release, out)
    # nothing links at all: no LLM call, the document comes back unchanged
    unchanged = sanitize_corpus(Corpus([Document("b", TEXTS["b"])]), {}, name="x")
    llm2 = rewriter()
    _, out2 = delink(unchanged, llm2, collection=Corpus([Document("b", TEXTS["b"]), Document("b2", TEXTS["b"])]))
    assert llm2.calls == [] and out2.corpus["b"].text == TEXTS["b"] and out2.corpus["b"].spans == ()


def test_documents_are_delinked_together_with_the_same_release():
    """Each round's requests of a batch of documents go out in one batch (concurrently on a
    server, to the workers on a cluster); documents with nothing left to fix drop out; the
    release and its counts are those of one document at a time."""
    texts = {f"d{i}": f"{COMMON} Later Anna visited {place} yesterday. She met her lawyer in the {spot}."
             for i, (place, spot) in enumerate([("Oslo", "harbour"), ("Lima", "market"), ("Kyiv", "park"),
                                                ("Pune", "library")])}
    collection = Corpus([Document(i, t, subject=i) for i, t in texts.items()], name="originals")
    release = sanitize_corpus(collection, {i: [Span(m.start(), m.end(), "PERSON", replacement="[PERSON]")
                                               for m in re.finditer(r"\bAnna\b", t)] for i, t in texts.items()},
                              name="masked")

    def script(req):  # round 1: d1 and d3 refused (same words), the others reworded; round 2 rewords
        ms = marked(req)
        stuck = req.temperature == 0.0 and ("Lima" in req.messages[-1][1] or "Pune" in req.messages[-1][1])
        return json.dumps({"reasoning": "r", "rewrites": [{"marked": m, "new": m if stuck else f"somewhere {_spelled(len(m))}"}
                                                          for m in ms]})

    out = {}
    for batch in (1, 3, 16):
        llm = ScriptedLLM(script)
        sizes = []
        real = llm.complete_batch
        llm.complete_batch = lambda reqs, **kw: sizes.append(len(reqs)) or real(reqs, **kw)  # type: ignore[method-assign]
        d, rel = delink(release, llm, collection=collection, batch=batch, retry_temperature=0.5)
        out[batch] = ([doc.to_dict() for doc in rel], d.stats()["delinker"]["delinked"], sizes, len(llm.calls))
    assert out[1][0] == out[3][0] == out[16][0] and out[1][1] == out[3][1] == out[16][1]
    assert [doc["meta"]["delinker"]["rounds"] for doc in out[16][0]] == [1, 2, 1, 2]
    sizes, calls = out[16][2], out[16][3]
    assert len(sizes) == 2 and sizes[0] > sizes[1] > 0 and sum(sizes) == calls == out[1][3]
    assert len(out[1][2]) > len(out[3][2]) > 2  # one document at a time: a batch per document and round
    with pytest.raises(AnonauditError, match="batch"):
        Delinker(collection=collection, batch=0)


def test_what_the_llm_cannot_fix_is_redacted_or_kept():
    orig = originals()
    release = deidentified(orig)
    useless = ScriptedLLM(lambda req: "I cannot help with that.")
    d, out = delink(release, useless, max_rounds=2)
    a = out.corpus["a"]
    meta = a.meta["delinker"]
    assert meta["rounds"] == 2 and meta["redacted"] >= 1 and meta["still_linking"] == 0
    assert "Oslo" not in a.text and REDACTION in a.text
    red = [s for s in a.spans if s.label == "REDACTED"]
    assert red and all(s.replacement == REDACTION for s in red) and "Oslo" in {s.original for s in red}
    check_offsets(release, out)
    assert d.stats()["delinker"]["delinked"]["redacted"] == sum(doc.meta["delinker"]["redacted"] for doc in out)
    after, _ = PhraseSearchAttack().evaluate(Scenario(originals=orig, releases=(out,)), out)
    assert after.value == 0.0

    _, kept = delink(release, ScriptedLLM(lambda req: "no"), max_rounds=1, on_failure="keep")
    a = kept.corpus["a"]
    assert a.text == release.corpus["a"].text and a.meta["delinker"]["still_linking"] >= 1
    assert a.meta["delinker"]["redacted"] == 0


def test_combinations_send_their_shortest_member():
    texts = {"a": "The cat sat quietly. The dog barked loudly.",
             "b": "The cat sat quietly. The bird sang.",
             "c": "The fish swam. The dog barked loudly."}
    orig = Corpus([Document(i, t) for i, t in texts.items()])
    release = sanitize_corpus(orig[:1], {}, name="plain")  # only a; the collection has all three
    llm = rewriter(lambda m: "an animal did something")
    _, single = delink(release, rewriter(), collection=orig, arity=1)
    assert single.corpus["a"].text == texts["a"]  # no single phrase links
    _, out = delink(release, llm, collection=orig, arity=2)
    sent = [m for r in llm.calls for m in marked(r)]
    assert sent and all(m.lower() in {"the cat sat quietly", "the dog barked loudly"} for m in sent)
    res, _ = PhraseSearchAttack(arity=2).evaluate(Scenario(originals=orig, releases=(out,)), out)
    assert res.documents[0].facts["outcome"] != "linked"
    check_offsets_for(orig, release, out)


def check_offsets_for(orig, release, out):
    for doc in out:
        for s in doc.spans:
            assert doc.text[s.start:s.end] == s.replacement
            assert orig[doc.id].text[s.orig_start:s.orig_end] == s.original


def test_plain_variant_rewrites_chunks_without_marks_and_keeps_masks():
    orig = originals()
    release = deidentified(orig)

    def script(req):
        passage = req.messages[-1][1].removeprefix("Passage:\n")
        return json.dumps({"reasoning": "r", "rewritten": passage.replace("Oslo", "a northern city")
                           .replace("Paris", "a big city").replace("harbour", "port")})

    llm = ScriptedLLM(script)
    d, out = delink(release, llm, plain=True, max_rounds=2)
    assert llm.calls and not any("[[" in r.messages[-1][1] for r in llm.calls)
    assert any("{{1}}" in r.messages[-1][1] and "[PERSON]" not in r.messages[-1][1] for r in llm.calls)
    a = out.corpus["a"]
    assert "a northern city" in a.text and "[PERSON]" in a.text
    check_offsets(release, out)
    assert all(doc.meta["delinker"]["redacted"] == 0 for doc in out)  # the baseline never redacts
    # an answer that loses a marker is not used
    assert parse_plain('{"rewritten": "no markers here"}', 1) is None
    assert parse_plain('{"reasoning": "", "rewritten": "x {{1}} y"}', 1) == ["x ", " y"]


def test_parse_rewrites_matches_by_text_then_position_and_rejects_copies():
    ans = json.dumps({"reasoning": "r", "rewrites": [{"marked": "b phrase", "new": "B"},
                                                     {"marked": "?", "new": "A"}]})
    assert parse_rewrites(ans, ["a phrase", "b phrase"]) == [None, "B"]  # "A" lands on a taken slot
    ans = json.dumps({"rewrites": [{"marked": "a phrase", "new": "A phrase"}, {"marked": "b", "new": "another"}]})
    assert parse_rewrites(ans, ["a phrase", "b"]) == [None, "another"]
    assert parse_rewrites("chatter {not json", ["x"]) == [None]
    assert parse_rewrites('["one", "two"]', ["x", "y"]) == [None, None]


def test_registered_validated_and_needs_a_collection():
    assert registry.get("sanitizer", "delinker") is Delinker
    with pytest.raises(AnonauditError, match="arity"):
        Delinker(arity=4)
    with pytest.raises(AnonauditError, match="collection"):
        Delinker(llm=rewriter(), progress=False).sanitize(originals())


@pytest.mark.slow
def test_real_small_model_gives_a_well_formed_release(small_llm):
    orig = Corpus([Document("a", "Anna moved to Oslo in 2003. She worked at the fish market near the harbour."),
                   Document("b", "Bob moved to Paris in 2005. He worked at the bakery near the station.")],
                  name="originals")
    # public texts that share most of the wording, so only a few phrases link
    extra = Corpus([Document("x1", "Carl moved to Bergen in 2003. She worked at the fish market near the station."),
                    Document("x2", "Dina moved to Oslo in 2010. He worked at the bakery near the harbour."),
                    Document("x3", "Eve moved to Paris in 2010. He worked at the bakery near the harbour.")])
    release = deidentified(orig)
    d, out = delink(release, small_llm, collection=orig, extra_corpus=extra, max_rounds=2)
    for doc in out:
        src = release.corpus[doc.id]
        for s in doc.spans:
            assert doc.text[s.start:s.end] == s.replacement
        assert [s.original for s in doc.spans if s.label == "PERSON"] == [s.original for s in src.spans]
        assert doc.meta["delinker"]["still_linking"] == 0
    check_offsets_for(orig, release, out)
    totals = d.stats()["delinker"]["delinked"]
    assert totals["llm_requests"] >= 1 and totals["spans_sent"] >= 1
    print({doc.id: (doc.text, doc.meta["delinker"]) for doc in out})


def test_unusable_rephrasings_are_refused_and_many_spans_are_split_over_requests():
    from defenders.delinker import usable_rewrite

    assert usable_rewrite("Oslo", "a Nordic capital")
    for bad in ("near [Oslo]", "near Oslo", "OSLO", "x" * 40, "two\nlines", "{{1}}"):
        assert not usable_rewrite("Oslo", bad), bad
    orig = originals()
    release = deidentified(orig)
    llm = rewriter()
    _, out = delink(release, llm, chunk_sentences=10, max_spans=1)
    assert all(len(marked(r)) == 1 for r in llm.calls) and len(llm.calls) > 1
    assert out.corpus["a"].meta["delinker"]["llm_requests"] == len(llm.calls)
    check_offsets(release, out)


# --------------------------------------------------------------------------- validation (issue 49)

@pytest.mark.parametrize(("original", "new", "found"), [
    ("ran a small bakery", "had a food business", []),
    ("ran a small bakery", "ran 3 bakeries", ["3"]),
    ("ran a small bakery", "had a shop in Lyon", ["Lyon"]),
    ("The regional court upheld", "Appellate judges confirmed", []),  # starts a sentence, as the phrase does
    ("the court in Lyon", "a tribunal in Lyon", []),
    ("for 12 years", "for over 12 years", []),
    ("on 5,000 euros", "on 5000 euros", []),
])
def test_a_rewording_invents_no_number_or_name(original, new, found):
    from defenders.delinker.rewording_checks import invented

    assert invented(original, new) == found


def test_invented_facts_and_rewordings_that_link_by_themselves_are_rejected():
    orig = originals()
    release = deidentified(orig)

    def new(phrase):
        return {"Oslo": "a city in Norway", "harbour": "harbour district"}.get(phrase, "a place of 7 kinds")

    d, out = delink(release, rewriter(new), max_rounds=1)
    counts = d.stats()["delinker"]["delinked"]
    assert counts["rejected_invented"] >= 2  # "Norway" and the 7 are in no marked phrase
    assert "Norway" not in out.corpus["a"].text and " 7 " not in out.corpus["a"].text
    assert "[REDACTED]" in out.corpus["a"].text  # what no valid rewording replaced is redacted
    # "district" is a word of one document only: a rewording holding it links by itself
    from defenders.delinker.rewording_checks import links_alone

    assert links_alone(d.index(), "harbour district", 2) and not links_alone(d.index(), "the station", 2)


def test_delinker_self_check_counts_reworded_words_and_warns_when_most_is_rewritten():
    orig = originals()
    release = deidentified(orig)
    d, out = delink(release, rewriter())
    check = d.stats()["delinker"]["delinked"]["self_check"]
    assert check["documents"] == 3 and 0 < check["share_words_changed"] < 0.5
    assert check["documents_nothing_proposed"] == 0 and d.warnings("delinked") == []
    refuser = ScriptedLLM(lambda req: json.dumps({"reasoning": "r", "rewrites": []}))
    d2, _ = delink(release, refuser, max_rounds=1)
    assert d2.stats()["delinker"]["delinked"]["self_check"]["documents_nothing_proposed"] == 1
    assert d2.stats()["delinker"]["delinked"]["rejected_unusable"] >= 1
