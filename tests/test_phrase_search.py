"""Phrase-search linkage and its n-gram index, on small hand-made collections."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.ngrams import NgramIndex, Tokenizer
from audit.ngrams.build import FORMAT, MULTI
from audit.ngrams.storage import ARRAYS
from attackers.phrase_search import PhraseSearchAttack
from audit.core.data import Corpus, Document, Release, Scenario, Span, sanitize_corpus
from audit.core.errors import AnonauditError

COMMON = "The Court held a hearing on the matter. The applicant complained about the length of the proceedings."


def corpus(texts: dict[str, str], subjects: dict[str, str] | None = None) -> Corpus:
    subjects = subjects or {}
    return Corpus([Document(i, t, subject=subjects.get(i, i)) for i, t in texts.items()], name="originals")


def span_of(text: str, phrase: str, replacement: str | None = None) -> Span:
    start = text.index(phrase)
    return Span(start, start + len(phrase), label="X", replacement=replacement)


def run(originals: Corpus, release: Release, **params):
    attack = PhraseSearchAttack(**params)
    scenario = Scenario(originals=originals, releases=(release,))
    attack.fit(scenario)
    head, residual = attack.evaluate(scenario, release)
    return head, residual, {d.id: d for d in head.documents}


def visit_collection() -> Corpus:
    return corpus({
        "a": f"{COMMON} Later she visited Oslo yesterday evening.",
        "b": f"{COMMON} Later she visited Paris yesterday evening.",
        "c": f"{COMMON} Later she visited Paris yesterday evening.",
    })


def test_a_unique_phrase_links_its_document_with_evidence():
    orig = visit_collection()
    release = sanitize_corpus(orig, {}, name="unchanged")
    head, _, docs = run(orig, release)
    assert docs["a"].facts["outcome"] == "linked"
    # b and c are identical: every phrase occurs in 2 documents, so k=2 cannot single either out
    assert docs["b"].facts["outcome"] == docs["c"].facts["outcome"] == "unlinked"
    assert head.value == pytest.approx(1 / 3) and head.n == 3 and head.baseline == pytest.approx(1 / 3)
    ev = docs["a"].facts["evidence"][0]
    g = ev["ngrams"][0]
    text = orig["a"].text
    assert g["text"].lower() == "oslo" and g["df"] == 1 and ev["docs"] == ["a"]
    assert text[g["start"]:g["end"]] == g["text"]
    assert any(h.kind == "ngram" and text[h.start:h.end] == "Oslo" for h in docs["a"].highlights)
    # the typed finding: linked = success, a plain summary, the source's identity private
    assert (docs["a"].success, docs["b"].success) == (True, False)
    assert docs["a"].summary == "Linked to its source by 1 rare phrase, e.g. \u201cOslo\u201d"
    assert {"truth", "guess", "evidence"} <= docs["a"].private


def test_a_mask_blocks_the_phrase_that_would_link():
    orig = visit_collection()
    text = orig["a"].text
    for replacement in ("[LOC]", "LOCATION", ""):
        release = sanitize_corpus(orig, {"a": [span_of(text, "Oslo", replacement)]}, name="masked")
        head, residual, docs = run(orig, release)
        assert docs["a"].facts["outcome"] == "unlinked", replacement
        assert docs["a"].facts["evidence"] == []
        assert head.value == 0.0
        # the original's only uniquely-linking n-gram ("oslo") is gone
        assert residual.value == 0.0 and residual.details["original_rare_ngrams"] >= 1


def test_ngrams_never_span_a_deleted_span():
    # "visited yesterday" exists verbatim in b; in a it appears only once "Oslo" is deleted,
    # so an n-gram crossing the deletion would wrongly link a to b
    orig = corpus({
        "a": f"{COMMON} Later she visited Oslo yesterday evening.",
        "b": f"{COMMON} Later she visited yesterday evening.",
        "c": f"{COMMON} Later she visited Paris yesterday evening.",
    })
    release = sanitize_corpus(orig, {"a": [span_of(orig["a"].text, "Oslo ", "")]}, name="suppressed")
    assert "visited yesterday" in release.corpus["a"].text
    _, _, docs = run(orig, release)
    assert docs["a"].facts["outcome"] == "unlinked" and docs["a"].facts["evidence"] == []
    # without the span record the attacker would be fooled: the check above is not vacuous
    _, _, docs = run(orig, release, use_spans=False)
    assert docs["a"].facts["outcome"] == "wrong"


def combo_collection() -> Corpus:
    p1 = "Bright lanterns hung over the quiet harbour."
    p2 = "Seven sailors repaired a torn net slowly."
    p3 = "Gulls circled the old stone lighthouse."
    return corpus({"a": f"{p1} {p2}", "b": f"{p1} {p3}", "c": f"{p2} {p3}"})


def test_only_a_combination_of_two_common_phrases_links():
    orig = combo_collection()
    release = sanitize_corpus(orig, {}, name="unchanged")
    head1, _, docs1 = run(orig, release, arity=1)
    assert head1.value == 0.0 and all(d.facts["rare_ngrams"] == 0 for d in docs1.values())
    head2, _, docs2 = run(orig, release, arity=2)
    assert head2.value == 1.0
    ev = docs2["a"].facts["evidence"][0]
    assert ev["kind"] == "combination2" and ev["docs"] == ["a"] and ev["correct"]
    assert all(g["df"] == 2 for g in ev["ngrams"])
    phrases = " | ".join(g["text"].lower() for g in ev["ngrams"])
    assert "harbour" in phrases or "lanterns" in phrases or "quiet" in phrases or "bright" in phrases
    assert head2.details["linked_by_combination_only"] == 3


def test_arity_three_finds_a_triple_when_no_pair_links():
    # every pair of the phrases x, y, z co-occurs in two documents; only a has all three
    x, y, z = "Amber foxes ran.", "Cobalt owls sang.", "Crimson bears slept."
    orig = corpus({"a": f"{x} {y} {z}", "b": f"{x} {y}", "c": f"{y} {z}", "d": f"{x} {z}",
                   "e": f"{x} {y}", "f": f"{y} {z}", "g": f"{x} {z}"})
    release = sanitize_corpus(orig, {}, name="unchanged")
    _, _, docs2 = run(orig, release, arity=2)
    assert docs2["a"].facts["outcome"] == "unlinked"
    _, _, docs3 = run(orig, release, arity=3)
    assert docs3["a"].facts["outcome"] == "linked"
    assert docs3["a"].facts["evidence"][0]["kind"] == "combination3"


def test_k_changes_the_outcome():
    orig = combo_collection()
    release = sanitize_corpus(orig, {}, name="unchanged")
    head2, _, _ = run(orig, release, k=2)
    head3, _, docs3 = run(orig, release, k=3)
    assert head2.value == 0.0
    assert head3.value == 1.0  # each phrase occurs in 2 < 3 documents, one of them the original
    assert docs3["a"].facts["evidence"][0]["ngrams"][0]["df"] == 2


def test_placeholders_are_never_part_of_an_ngram():
    # the words person, sensitive, code_0 and redacted occur only in b, so an n-gram
    # built from a placeholder would (wrongly) link the released a to b
    orig = corpus({
        "a": f"{COMMON} Mr Smith was here.",
        "b": f"{COMMON} The person was sensitive about code_0 and redacted nothing.",
        "c": f"{COMMON} Mr Smith was here.",
    })
    released = Document("a", f"{COMMON} Mr [PERSON] was *** SENSITIVE CODE_0 REDACTED here.")
    release = Release("plain", Corpus([released], name="plain"))
    attack = PhraseSearchAttack()
    scenario = Scenario(originals=orig, releases=(release,))
    attack.fit(scenario)
    tn = attack.index_.ngrams(released.text, attack.blocked_ranges(released))
    seen = [released.text[s:e] for s, e in zip(tn.char_start, tn.char_end)]
    assert seen and not any(w in g for g in seen for w in ("PERSON", "***", "SENSITIVE", "CODE_0", "REDACTED"))
    assert not any("was here" in g for g in seen)  # "was *** ... here" must not bridge the placeholders
    head, _ = attack.evaluate(scenario, release)
    assert head.documents[0].facts["outcome"] == "unlinked"
    # with no placeholder pattern, the same text does link to the wrong document
    attack2 = PhraseSearchAttack(placeholder_pattern=None).fit(scenario)
    assert attack2.evaluate(scenario, release)[0].documents[0].facts["outcome"] == "wrong"


def test_a_wrong_link_is_counted_as_wrong():
    orig = corpus({
        "a": f"{COMMON} Later she visited Oslo yesterday evening.",
        "b": f"{COMMON} Later she visited Bergen yesterday evening.",
        "c": f"{COMMON} Later she visited Paris yesterday evening.",
    })
    # a rewrite that does not record its edits put a surrogate that is unique to b into a
    rewritten = Document("a", orig["a"].text.replace("Oslo", "Bergen"), subject="a")
    release = Release("rewrite", Corpus([rewritten, orig["b"], orig["c"]], name="rewrite"))
    head, _, docs = run(orig, release)
    assert docs["a"].facts["outcome"] == "wrong"
    assert docs["a"].facts["evidence"][0]["docs"] == ["b"] and not docs["a"].facts["evidence"][0]["correct"]
    assert docs["b"].facts["outcome"] == "linked" and docs["c"].facts["outcome"] == "linked"
    assert head.details["wrong_links"] == 1 and head.details["linked"] == 2
    assert head.value == pytest.approx(2 / 3)


def test_unaligned_release_uses_the_subject_as_ground_truth():
    orig = corpus({"a": f"{COMMON} Later she visited Oslo yesterday evening.",
                   "b": f"{COMMON} Later she visited Paris yesterday evening."},
                  subjects={"a": "Alice", "b": "Bob"})
    synth = Corpus([Document("s1", "In the end she visited Oslo yesterday evening.", subject="Alice"),
                    Document("s2", "She had visited Oslo yesterday evening.", subject="Bob"),
                    Document("s3", "She visited Oslo.", subject="Carol")], name="synthetic")  # no source
    release = Release("synthetic", synth, aligned=False)
    head, _, docs = run(orig, release)
    assert docs["s1"].facts["outcome"] == "linked" and docs["s1"].facts["truth"] == ["a"]
    assert docs["s2"].facts["outcome"] == "wrong" and docs["s2"].success is False
    assert docs["s2"].summary == "Its rare phrases point to other documents, not to its source"
    assert docs["s3"].facts["outcome"] == "unscored" and docs["s3"].success is None and head.n == 2
    assert "subject" in head.details["ground_truth"]


def test_residual_counts_uniquely_linking_ngrams_still_present():
    orig = visit_collection()
    same = sanitize_corpus(orig, {}, name="same")
    _, residual, _ = run(orig, same)
    assert residual.value == 1.0 and residual.name == "phrase_search.ngram_residual"
    assert residual.details["original_rare_ngrams"] == 1  # minimal set for a: just "oslo"
    # n counts the documents the n-grams come from, not the n-grams (cluster bootstrap)
    assert residual.n == residual.details["documents"] and residual.details["trial_unit"] == "n-grams"
    assert residual.details["tiny_sample"] is True and residual.ci[0] < 0.9


def test_ngrams_do_not_cross_sentences_and_phrase_api():
    index = NgramIndex.build([f"{COMMON} She went to Oslo. Yesterday it rained.",
                              f"{COMMON} She went to Rome yesterday."], ids=["a", "b"])
    assert index.document_frequency("oslo") == 1
    assert index.document_frequency("Oslo yesterday") == 0  # crosses a sentence boundary
    assert index.document_frequency("the applicant complained") == 2
    assert index.document_frequency("The APPLICANT complained") == 2  # case folded
    assert index.postings("rome yesterday").tolist() == [1]
    assert index.document_frequency("a phrase that is not there") == 0
    rare = index.rare_ngrams("Then she went to Oslo and Rome.", k=2)
    assert {r.text for r in rare} == {"Oslo", "Rome"} and all(r.df == 1 for r in rare)
    # abbreviations do not end sentences: "Mr. Smith" stays one phrase
    tok = Tokenizer()
    toks = tok.tokenize("Mr. Smith arrived. Then he left.")
    assert toks.seg.tolist() == [0, 0, 0, 1, 1, 1]


def reference_tokens(text: str, lowercase: bool = True, doc_starts: tuple[int, ...] = ()):
    """The tokeniser's rules (package docstring, "Tokenisation" and "Hashing") read plainly, one
    character at a time, in Python integers: ``(start, end, hash, starts_segment)`` per token."""
    from audit.ngrams.hashing import CHAR_MULT, MIX1, MIX2
    from audit.ngrams.tokenizer import ABBREVIATIONS, JOINERS, NEWLINES, TERMINALS, _tables

    value = _tables(lowercase)["value"]
    mask = (1 << 64) - 1

    def mix(x: int) -> int:
        x ^= x >> 30
        x = x * MIX1 & mask
        x ^= x >> 27
        x = x * MIX2 & mask
        return x ^ x >> 31

    def word(i: int) -> bool:
        return 0 <= i < len(text) and ord(text[i]) < 0xFFFF and text[i].isalnum()

    inword = [word(i) or (text[i] in JOINERS and word(i - 1) and word(i + 1)) for i in range(len(text))]
    spans, i = [], 0
    while i < len(text):
        if inword[i]:
            j = i
            while j < len(text) and inword[j]:
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    out = []
    for t, (s, e) in enumerate(spans):
        h = sum(int(value[ord(c)]) * pow(CHAR_MULT, k, 1 << 64) for k, c in enumerate(text[s:e])) & mask
        gap = text[spans[t - 1][1]:s] if t else text[:s]
        # a document starts at the first token at or after its offset
        new = any(c in NEWLINES for c in gap) or any((spans[t - 1][0] if t else -1) < d <= s for d in doc_starts)
        if t and any(c in TERMINALS for c in gap) and ord(text[s]) < 0xFFFF and text[s].isupper():
            before = text[spans[t - 1][0]:spans[t - 1][1]]
            initial = len(before) == 1 and not before.isdigit()
            abbreviations = ABBREVIATIONS if lowercase else ABBREVIATIONS + [a.title() for a in ABBREVIATIONS]
            known = (before.lower() if lowercase else before) in abbreviations
            new = new or not (initial or known)
        out.append((s, e, mix(h), new))
    return out


#: pieces of text that exercise every rule: joiners, full stops, newlines, capitals (and
#: capitals whose lower case is two characters), abbreviations, initials, digits, astral
#: characters; and any character at all
PIECES = st.sampled_from(list("ab C.\n'’-,9Äé!?/&:İß\u2028\u2010\x0b") + [
    "Mr", "e.g", "J", "😀", "Etc", "No", " Mr. Smith", " J. Smith", " 9. Then", " no. Then", " x. Then",
    " Vs. Ab", "! É", ". İ"]) | st.characters()


@given(text=st.lists(PIECES, max_size=30).map("".join),
       lowercase=st.booleans(), cuts=st.lists(st.integers(0, 60), max_size=3))
@settings(max_examples=400, deadline=None, derandomize=True)
def test_tokenizer_follows_its_rules_character_by_character(text, lowercase, cuts):
    """The compiled tokeniser (one pass over the code points) against the rules read plainly:
    the same tokens, hashes and segments, whatever the characters."""
    doc_starts = tuple(sorted({c for c in cuts if c <= len(text)}))
    toks = Tokenizer(lowercase=lowercase).tokenize(text, doc_starts=np.array(doc_starts, dtype=np.int64))
    expected = reference_tokens(text, lowercase, doc_starts)
    assert list(zip(toks.start.tolist(), toks.end.tolist(), toks.hash.tolist())) == [t[:3] for t in expected]
    if len(toks):
        starts_segment = np.concatenate(([expected[0][3]], np.diff(toks.seg) > 0))
        assert starts_segment.tolist() == [t[3] for t in expected]


def brute_force_df(texts: list[str], max_n: int) -> dict[tuple[int, ...], set[int]]:
    """A plain dict-of-sets index of the same n-grams (token hashes as words)."""
    tok = Tokenizer()
    out: dict[tuple[int, ...], set[int]] = defaultdict(set)
    for d, text in enumerate(texts):
        t = tok.tokenize(text)
        h, seg = t.hash.tolist(), t.seg.tolist()
        for i in range(len(h)):
            for n in range(1, max_n + 1):
                if i + n > len(h) or seg[i + n - 1] != seg[i]:
                    break
                out[tuple(h[i:i + n])].add(d)
    return out


@pytest.mark.parametrize("route_bits", [0, 10])  # 10 buckets' bits: more than a 40-bit index's directory has
# chunk_chars: 3,000 (about 100 documents a chunk) or all 700 in one (one hash table of repeats,
# reused from document to document: each document's pairs must stay its own, also after the
# documents' marks in the table wrap, at the 256th and 511th)
@pytest.mark.parametrize("n_docs,min_hash_bits,chunk_chars", [(40, 56, 3000), (700, 56, 3000), (700, 56, 10**6),
                                                              (700, 52, 3000), (700, 40, 3000)])
def test_index_agrees_with_a_plain_dict_of_sets(n_docs, min_hash_bits, chunk_chars, route_bits, monkeypatch):
    import audit.ngrams.build as build

    monkeypatch.setattr(build, "ROUTE_BITS", route_bits)
    rng = np.random.default_rng(n_docs)
    vocab = [f"w{i}" for i in range(60)]
    texts = []
    for _ in range(n_docs):
        sents = [" ".join(rng.choice(vocab, size=rng.integers(2, 9))) for _ in range(rng.integers(1, 4))]
        texts.append(". ".join(s.capitalize() for s in sents) + ".")
    index = NgramIndex.build(texts, max_n=4, min_hash_bits=min_hash_bits, chunk_chars=chunk_chars)
    truth = brute_force_df(texts, 4)
    assert index.config["n_ngrams"] == len(truth)
    assert index.config["n_postings"] == sum(len(v) for v in truth.values())
    tok = Tokenizer()
    for d in rng.choice(n_docs, size=10, replace=False):
        tn = index.ngrams(texts[d])
        t = tok.tokenize(texts[d])
        h = t.hash.tolist()
        for i in range(len(tn)):
            key = tuple(h[tn.first[i]:tn.last[i] + 1])
            assert tn.df[i] == len(truth[key])
            docs = index.postings_at(tn.post_ref[i], tn.df[i])
            assert docs.tolist() == sorted(truth[key])


def test_a_document_whose_mark_comes_round_again_keeps_its_own_ngrams():
    """A chunk finds each document's repeated n-grams in one hash table whose slots carry the
    document's mark (1 to 255); the 256th document of a chunk takes mark 1 again, and must not
    read the 1st one's entries as its own (the table is cleared when the marks wrap)."""
    filler = ["..."] * 254  # no words: nothing written over the first document's slots
    texts = ["Zeta gamma.", *filler, "Zeta gamma.", *filler, "Zeta gamma."]  # documents 0, 255 and 510
    index = NgramIndex.build(texts, chunk_chars=10**6)  # one chunk, one table
    assert index.postings("zeta gamma").tolist() == [0, 255, 510]
    assert index.postings("zeta").tolist() == [0, 255, 510]


def test_minimal_set_is_the_greedy_choice_shortest_then_leftmost():
    from audit.ngrams import minimal_set

    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(12)]
    texts = [" ".join(rng.choice(words, size=40)) + "." for _ in range(30)]
    index = NgramIndex.build(texts, max_n=5)
    for trial in range(200):
        tn = index.ngrams(texts[trial % len(texts)])
        cand = rng.choice(len(tn), size=int(rng.integers(0, min(60, len(tn)))), replace=False)
        kept, taken = [], set()
        for c in sorted(cand.tolist(), key=lambda c: (tn.n[c], tn.first[c])):  # a plain reading
            tokens = set(range(int(tn.first[c]), int(tn.last[c]) + 1))
            if not tokens & taken:
                kept.append(c)
                taken |= tokens
        expected = sorted(kept, key=lambda c: (tn.first[c], tn.n[c]))
        assert minimal_set(tn, cand).tolist() == expected


def test_chunk_runs_are_given_back_bucket_by_bucket_and_only_those_laid_out():
    """The build keeps each chunk's pairs in a memory map and gives its pages back as the layout
    passes their buckets: what is given back reads as zeros (the memory went back to the
    system), the buckets not yet laid out keep their keys."""
    import mmap

    from audit.ngrams.build import MappedRuns

    store = MappedRuns()
    counts = np.array([3000, 5, 4000, 2000])  # bucket 1 shares pages with its neighbours
    keys = np.arange(1, counts.sum() + 1, dtype=np.uint64)
    pieces = store.add(keys, counts)
    assert [len(p) for p in pieces] == counts.tolist() and np.array_equal(np.concatenate(pieces), keys)
    store.release(1)
    page_keys = mmap.PAGESIZE // 8
    gone = (3005 // page_keys) * page_keys  # the whole pages before the end of bucket 1
    everything = np.concatenate(pieces)
    assert not everything[:gone].any()
    assert np.array_equal(everything[gone:], keys[gone:])  # the rest of bucket 1's page, buckets 2 and 3
    store.release(3)
    assert not np.concatenate(pieces)[:(len(keys) * 8 // mmap.PAGESIZE) * page_keys].any()


def test_a_run_written_into_a_map_of_its_own_is_kept_there_not_copied():
    import mmap

    from audit.ngrams.build import MappedRuns

    store = MappedRuns()
    keys = store.empty(5000)
    keys[:] = np.arange(5000, dtype=np.uint64)
    pieces = store.add(keys, np.array([2000, 3000]))
    assert all(np.shares_memory(p, keys) for p in pieces) and not store.fresh
    copied = store.add(np.arange(10, dtype=np.uint64), np.array([10, 0]))  # an array of the heap: copied
    assert np.array_equal(copied[0], np.arange(10)) and len(store.runs) == 2
    store.release(1)
    whole_pages = keys.nbytes // mmap.PAGESIZE * (mmap.PAGESIZE // 8)
    assert not keys[:whole_pages].any() and keys[-1] == 4999  # given back: the pages of the map it was written in


def test_index_is_the_same_on_one_thread_or_two_with_its_pairs_mapped_or_in_the_heap(monkeypatch):
    import mmap

    import audit.ngrams.build as build
    import audit.ngrams.layout as layout

    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice([f"w{i}" for i in range(80)], size=rng.integers(5, 60))) + "." for _ in range(2000)]
    # on two threads the layout sorts buckets ahead of the one it lays out, each in an array of its own
    single = NgramIndex.build(texts, chunk_chars=4000, workers=1)
    mapped = NgramIndex.build(texts, chunk_chars=4000, workers=2)
    monkeypatch.setattr(build.MappedRuns, "MAX_MAPS", 0)  # more chunks than maps allowed: pieces in the heap
    heap = NgramIndex.build(texts, chunk_chars=4000, workers=2)
    # the index's own arrays without maps either (a system without them, or a reservation refused)
    monkeypatch.setattr(layout, "_MAP_FLAGS", -1)
    grown = NgramIndex.build(texts, chunk_chars=4000, workers=2)
    assert grown.keys.base is None and isinstance(mapped.keys.base.obj, mmap.mmap)
    for name in ("directory", "keys", "first", "multi_offsets", "multi_docs"):
        assert np.array_equal(getattr(mapped, name), getattr(single, name)), name
        assert np.array_equal(getattr(mapped, name), getattr(heap, name)), name
        assert np.array_equal(getattr(mapped, name), getattr(grown, name)), name
    # a map holds no more than its values once the build is done
    assert len(mapped.keys.base.obj) == mapped.keys.nbytes
    assert len(mapped.multi_docs.base.obj) == mapped.multi_docs.nbytes


def test_saved_index_reloads_identically_and_is_reused(tmp_path, monkeypatch):
    orig = visit_collection()
    index = NgramIndex.build([d.text for d in orig], ids=orig.ids, subjects=orig.subjects)
    index.save(tmp_path / "idx")
    loaded = NgramIndex.load(tmp_path / "idx")
    assert isinstance(loaded.keys, np.memmap) and isinstance(loaded.multi_docs, np.memmap)
    for name in ARRAYS:
        assert np.array_equal(getattr(index, name), getattr(loaded, name))
    assert loaded.docs == index.docs and loaded.config == index.config
    for phrase in ("oslo", "visited paris yesterday", "the court held", "nothing here"):
        assert loaded.document_frequency(phrase) == index.document_frequency(phrase)
    cfg = json.loads((tmp_path / "idx" / "config.json").read_text())
    assert cfg["max_n"] == 7 and cfg["tokenizer"]["lowercase"] is True and len(cfg["collection_fingerprint"]) == 64

    # the attack saves its index once and reuses it when the collection matches
    release = sanitize_corpus(orig, {}, name="r")
    scenario = Scenario(originals=orig, releases=(release,))
    first = PhraseSearchAttack(index_dir=str(tmp_path / "attack_idx")).fit(scenario).evaluate(scenario, release)
    monkeypatch.setattr(NgramIndex, "build", classmethod(lambda cls, *a, **k: pytest.fail("index rebuilt")))
    second = PhraseSearchAttack(index_dir=str(tmp_path / "attack_idx")).fit(scenario).evaluate(scenario, release)
    strip = lambda rs: [{**r.to_dict(), "details": {**r.details, "seconds": 0}} for r in rs]  # noqa: E731
    assert strip(first) == strip(second)
    # a different collection is not served from the stale index
    other = corpus({"x": "Completely different words here.", "y": "And more of them."})
    monkeypatch.undo()
    PhraseSearchAttack(index_dir=str(tmp_path / "attack_idx")).fit(Scenario(originals=other))
    assert NgramIndex.load(tmp_path / "attack_idx").docs.ids == ["x", "y"]


def test_determinism():
    orig = combo_collection()
    release = sanitize_corpus(orig, {"b": [span_of(orig["b"].text, "Gulls", "[ANIMAL]")]}, name="r")
    a = [r.to_dict() for r in run(orig, release, arity=3)[:2]]
    b = [r.to_dict() for r in run(orig, release, arity=3)[:2]]
    for x in a + b:
        x["details"].pop("seconds", None)
    assert a == b
    i1 = NgramIndex.build([d.text for d in orig])
    i2 = NgramIndex.build([d.text for d in orig])
    for name in ARRAYS:
        assert np.array_equal(getattr(i1, name), getattr(i2, name))


def test_bad_parameters_are_user_errors():
    with pytest.raises(AnonauditError):
        PhraseSearchAttack(arity=4)
    with pytest.raises(AnonauditError):
        PhraseSearchAttack(k=0)
    with pytest.raises(AnonauditError):
        PhraseSearchAttack(placeholder_pattern="[unclosed")
    with pytest.raises(AnonauditError):
        PhraseSearchAttack().fit(Scenario(originals=None))
    for bits in (32, 64):  # a directory of 0 or 2^32 entries
        with pytest.raises(AnonauditError, match="min_hash_bits must be between 40 and 56"):
            NgramIndex.build(["a b c"], min_hash_bits=bits)


def test_an_index_saved_by_an_older_version_is_refused_or_rebuilt(tmp_path):
    """An index folder in another format gets a one-line error naming the folder and what to do;
    the attack, whose ``index_dir`` is its own cache, builds over it."""
    orig = visit_collection()
    folder = tmp_path / "idx"
    NgramIndex.build([d.text for d in orig]).save(folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "format": "anonaudit.ngram_index/1"}))
    with pytest.raises(AnonauditError, match=r"idx: unsupported index format 'anonaudit.ngram_index/1'.*rebuild"):
        NgramIndex.load(folder)
    release = sanitize_corpus(orig, {}, name="r")
    scenario = Scenario(originals=orig, releases=(release,))
    PhraseSearchAttack(index_dir=str(folder)).fit(scenario).evaluate(scenario, release)
    assert NgramIndex.load(folder).config["format"] == FORMAT


def test_one_document_phrases_take_no_posting_list():
    """The index's size: an n-gram found in one document keeps that document in ``first``;
    only the others have posting lists, and lookups and gathers read both the same way."""
    texts = ["alpha beta gamma. shared words here.", "delta epsilon. shared words here.", "zeta eta theta."]
    index = NgramIndex.build(texts)
    multi = np.asarray(index.first) >= MULTI
    assert multi.sum() == len(index.multi_offsets) - 1 == 6  # shared, words, here and their 2- and 3-grams
    assert len(index.multi_docs) == 12 and index.config["n_postings"] == (~multi).sum() + 12
    tn = index.ngrams("shared words here. zeta eta.")
    docs, owner = tn.gather_postings(index, np.flatnonzero(tn.df > 0))
    assert [sorted(docs[owner == i].tolist()) for i in range(owner.max() + 1)] == \
        [index.postings(tn.text[a:b]).tolist() for a, b in zip(tn.char_start[tn.df > 0], tn.char_end[tn.df > 0])]
    assert index.postings("shared words").tolist() == [0, 1] and index.postings("zeta eta").tolist() == [2]


def test_registered_under_its_name():
    from audit.core.registry import registry

    assert registry.get("attack", "phrase-search") is PhraseSearchAttack


def test_cli_end_to_end(tmp_path):
    from click.testing import CliRunner

    from anonaudit.cli import main

    orig = visit_collection()
    orig_path = tmp_path / "originals.jsonl"
    orig_path.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in orig))
    text = orig["a"].text
    s = text.index("Oslo")
    spans_path = tmp_path / "masked.json"
    spans_path.write_text(json.dumps({"a": [[s, s + 4, "[LOC]"]]}))
    extra_path = tmp_path / "extra.jsonl"
    extra_path.write_text(json.dumps({"id": "z", "text": f"{COMMON} He visited Paris yesterday evening."}) + "\n")
    out = tmp_path / "results.json"
    args = ["attack", "phrase-search", "--originals", str(orig_path), "--release", f"masked={spans_path}",
            "--release", f"plain={orig_path}", "--k", "2", "--arity", "2", "--index", str(tmp_path / "idx"),
            "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    by = {(r["name"], r["release"]): r for r in data["results"]}
    assert by[("phrase_search", "plain")]["value"] == pytest.approx(1 / 3)
    assert by[("phrase_search", "masked")]["value"] == 0.0
    assert ("phrase_search.ngram_residual", "masked") in by
    assert (tmp_path / "idx" / "config.json").is_file()
    assert "phrase_search" in res.output
    # with the extra corpus the collection is a superset: b and c stay unlinkable, a still links
    res = CliRunner().invoke(main, args[:-2] + ["--corpus", str(extra_path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    r = {x["release"]: x for x in json.loads(out.read_text())["results"] if x["name"] == "phrase_search"}
    assert r["plain"]["details"]["collection_size"] == 4 and r["plain"]["baseline"] == pytest.approx(1 / 4)
    # a user error is one readable line, not a traceback
    res = CliRunner().invoke(main, args[:-2] + ["--k", "0", "--out", str(out)])
    assert res.exit_code != 0 and "parameter 'k' must be a whole number of at least 1, got 0" in res.output


def test_a_rephrased_span_stays_searchable_unlike_a_mask():
    # a rewrite recorded with label REPHRASED (the delinker's) shows new words the attacker can
    # search: it is not blocked like a replaced span, so unchanged rare words in it still link
    from audit.core.data import REPHRASED

    orig = visit_collection()
    text = orig["a"].text
    start = text.index("Oslo yesterday")
    span = Span(start, start + len("Oslo yesterday"), label=REPHRASED, replacement="Oslo the other day")
    release = sanitize_corpus(orig, {"a": [span]}, name="rephrased")
    _, _, docs = run(orig, release)
    assert docs["a"].facts["outcome"] == "linked"
    masked = sanitize_corpus(orig, {"a": [Span(span.start, span.end, label="X", replacement="Oslo the other day")]},
                             name="masked")
    _, _, docs = run(orig, masked)
    assert docs["a"].facts["outcome"] == "unlinked"


# --------------------------------------------------------------------------- huge documents, in windows


def _wordy(n_words: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    vocab = ["alpha", "Beta", "Mr.", "no.", "J.", "Oslo", "1,000", "e.g", "36110/97", "the", "and", "Bob",
             "end.", "Start", "river", "stone", "quiet", "Maria", "\n"] + [f"w{i}" for i in range(300)]
    return " ".join(rng.choice(vocab) for _ in range(n_words)).replace(" \n ", "\n")


def test_windows_give_exactly_the_ngrams_of_the_whole_text():
    texts = [_wordy(4000, s) for s in range(3)]
    index = NgramIndex.build(texts, max_n=5)
    for t in [*texts, _wordy(6000, 9)]:
        blocked = [(i, i + 4) for i in range(7, len(t), 997)]
        whole = index.ngrams(t, blocked)
        parts = list(index.iter_ngrams(t, blocked, window_chars=700))
        assert len(parts) > 10
        rows = lambda tn: sorted(zip(tn.hash.tolist(), tn.char_start.tolist(), tn.char_end.tolist(),  # noqa: E731
                                     tn.df.tolist(), tn.n.tolist()))
        assert rows(whole) == sorted(r for p in parts for r in rows(p))


@pytest.mark.parametrize("min_hash_bits", [48, 56])  # no hash bits moved out of the key, 2 of them
def test_sorting_in_buckets_builds_the_same_index(min_hash_bits, monkeypatch):
    """Issue 21: routing pairs to 2^r buckets by their top hash bits (merged and laid out apart,
    on several threads) is a speed-up only: the arrays are those of one sort of every pair."""
    import audit.ngrams.build as build

    texts = [_wordy(300, i) for i in range(700)] + [_wordy(4000, 7)]
    monkeypatch.setattr(build, "ROUTE_BITS", 0)
    one = NgramIndex.build(texts, max_n=5, min_hash_bits=min_hash_bits, chunk_chars=20_000)
    assert one.config["route_bits"] == build.Packing.for_collection(len(texts), min_hash_bits).t_bits
    for bits, workers in ((3, 1), (8, 2), (12, 2)):
        monkeypatch.setattr(build, "ROUTE_BITS", bits)
        routed = NgramIndex.build(texts, max_n=5, min_hash_bits=min_hash_bits, chunk_chars=20_000, workers=workers)
        assert routed.config["route_bits"] == bits
        for field in ARRAYS:
            assert np.array_equal(np.asarray(getattr(one, field)), np.asarray(getattr(routed, field))), (bits, field)


def test_index_of_a_huge_document_built_in_windows_is_the_same(monkeypatch):
    import audit.ngrams.windows as windows

    texts = [_wordy(300, 1), _wordy(5000, 2), _wordy(200, 3), _wordy(4000, 4)]
    whole = NgramIndex.build(texts, max_n=5)
    monkeypatch.setattr(windows, "WINDOW_CHARS", 900)
    windowed = NgramIndex.build(texts, max_n=5)
    for field in ARRAYS:
        assert np.array_equal(np.asarray(getattr(whole, field)), np.asarray(getattr(windowed, field)))
    assert whole.config["n_tokens"] == windowed.config["n_tokens"]


def test_a_huge_document_is_attacked_in_windows_with_the_same_outcome(monkeypatch):
    import audit.ngrams.windows as windows

    originals = corpus({f"d{i}": _wordy(3000, 10 + i) for i in range(4)})
    masked = {d.id: [span_of(d.text, "Maria", "[PERSON]")] if "Maria" in d.text else [] for d in originals}
    release = sanitize_corpus(originals, masked, name="masked")
    whole, whole_residual, _ = run(originals, release, arity=2)
    monkeypatch.setattr(windows, "WINDOW_CHARS", 1500)
    windowed, windowed_residual, _ = run(originals, release, arity=2)
    assert whole.value == windowed.value == 1.0
    for a, b in zip(whole.documents, windowed.documents):
        assert b.facts["read_in_windows"] and "read_in_windows" not in a.facts
        for fact in ("outcome", "linked_by", "guess", "visible_ngrams", "rare_ngrams", "truth"):
            assert a.facts[fact] == b.facts[fact], fact
        # minimal sets are taken per window: a phrase across a window's edge may count twice
        assert abs(a.facts["original_rare_still_present"] - b.facts["original_rare_still_present"]) <= \
            0.02 * a.facts["original_rare_still_present"] + 5
        assert len(b.facts["evidence"]) == len(a.facts["evidence"])
