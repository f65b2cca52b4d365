"""``anonaudit harden``: the evidence of the attacks becomes repair targets, a round repairs
exactly them, the loop stops on a passing gate, bad input is a clear error (toy attacks and a
scripted LLM), and one slow run with the embedded models on demo data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from anonaudit.cli import main
from audit.core.data import REPHRASED, Corpus, Document, Release, Span, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.core.interfaces import Attack, Metric
from audit.core.registry import Registry
from audit.core.evidence import (SPAN, TEXT, RepairTarget, context_targets, sentence_around, set_replacements,
                               shift_position, targets_from_results, targets_of, unchanged_spans)
from audit.core.results import Finding, Highlight, Result, ResultsFile
from audit.core.stats import mean_interval, risk
from audit.io.loaders import load_corpus
from audit.models.llm import ScriptedLLM
from audit.pipeline.harden import Harden
from audit.pipeline.runner import load_spec

# =========================================================================== toy data

ORIGINALS = {
    "a": "Anna moved to Bergen in 2001. She kept a lighthouse near the old harbour district for years.",
    "b": "Bob moved to Paris in 2003. He worked at a bank for years.",
    "c": "Carl moved to Rome in 2005. He worked at a bank for years and liked Rome.",
}
#: What a sanitizer replaced, and with what (an INTACT-like release: generalisations).
REPLACED = {"Anna": ("PERSON", "[PERSON]"), "Bob": ("PERSON", "[PERSON]"), "Carl": ("PERSON", "[PERSON]"),
            "Bergen": ("LOC", "a Norwegian city"), "Paris": ("LOC", "a European capital"),
            "Rome": ("LOC", "an Italian city"), "2001": ("DATE", "[DATE]"), "2003": ("DATE", "[DATE]"),
            "2005": ("DATE", "[DATE]")}
#: The phrase the toy text attack links by, and the replacements the toy guesser sees through.
PHRASE = "lighthouse near the old harbour district"
GIVEAWAYS = ("a Norwegian city", "an Italian city")
#: INTACT candidates the scripted LLM proposes, most specific first.
CANDIDATES = {"Bergen": ["a Norwegian city", "a Nordic city", "a European city"],
              "Rome": ["an Italian city", "a Mediterranean city", "a European city"]}


def write_data(root: Path) -> None:
    docs = []
    for i, text in ORIGINALS.items():
        spans = [{"start": m.start(), "end": m.end(), "label": REPLACED[m.group()][0]}
                 for m in re.finditer("|".join(REPLACED), text)]
        docs.append({"id": i, "text": text, "subject": i, "spans": spans})
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data" / "originals.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    orig = load_corpus(str(root / "data" / "originals.jsonl"))
    rel = sanitize_corpus(orig, {d.id: [Span(s.start, s.end, s.label, replacement=REPLACED[d.text[s.start:s.end]][1])
                                        for s in d.spans] for d in orig}, name="ours")
    (root / "data" / "ours.jsonl").write_text("".join(json.dumps(d.to_dict()) + "\n" for d in rel))


class ToyPhrase(Attack):
    """Links a document when it still contains a watched phrase (a 'text' evidence)."""

    name = "toy_phrase"

    def __init__(self, phrase: str = PHRASE, warn: bool = False):
        self.phrase = phrase
        self.warn = warn

    def evaluate(self, scenario, release):
        docs = []
        for d in release:
            i = d.text.find(self.phrase)
            docs.append(Finding(d.id, success=i >= 0, highlights=[Highlight(i, i + len(self.phrase), "ngram")]
                                if i >= 0 else ()))
        hits = sum(f.success for f in docs)
        details = {"warning": "the attacker failed its own check"} if self.warn else {}
        return [Result.from_risk(self.name, release.name, risk(hits, len(docs), 0.0), documents=docs,
                                 details=details)]


class ToyGuess(Attack):
    """Recovers a replaced span whose replacement is one of GIVEAWAYS (a 'span' evidence)."""

    name = "toy_guess"

    def __init__(self, giveaways: list[str] | tuple[str, ...] = GIVEAWAYS, docs: list[str] | None = None):
        self.giveaways, self.docs = tuple(giveaways), docs

    def evaluate(self, scenario, release):
        docs = []
        for d in release:
            # by the text, so that it works on a release that records no replacement; only the
            # first mention is "recovered": the repair must still fix every mention
            found = [(d.text.find(g), g) for g in self.giveaways if g in d.text
                     and (self.docs is None or d.id in self.docs)]
            docs.append(Finding(d.id, success=bool(found),
                                highlights=[Highlight(found[0][0], found[0][0] + len(found[0][1]), "span")]
                                if found else ()))
        hits = sum(f.success for f in docs)
        return [Result.from_risk(self.name, release.name, risk(hits, len(docs), 0.0), documents=docs)]


class ToySame(Metric):
    """Share of the original's characters found at the same offset in the release (crude utility)."""

    name = "toy_same"

    def evaluate(self, scenario, release):
        vals = []
        for d in release:
            o = scenario.originals[d.id].text
            vals.append(sum(a == b for a, b in zip(o, d.text)) / max(1, len(o)))
        mean, ci = mean_interval(vals)
        return [Result("utility", self.name, release.name, mean, ci, len(vals))]


def toy_registry() -> Registry:
    reg = Registry()
    reg._entry_points_loaded = True
    reg.register("attack")(ToyPhrase)
    reg.register("attack")(ToyGuess)
    reg.register("metric")(ToySame)
    import defenders.baselines as b
    from defenders.delinker import Delinker
    from defenders.intact import IntactSanitizer

    for cls in (b.LabelMasking, Delinker, IntactSanitizer):
        reg.register("sanitizer")(cls)
    return reg


MARK = re.compile(r"\[\[(.*?)\]\]")


def scripted(rewrite=lambda phrase: "seaside building", candidates=CANDIDATES) -> ScriptedLLM:
    """Answers the delinker's rewrite requests (``Passage:``) and INTACT's candidate requests
    (``Sentence:``)."""

    def answer(req):
        last = req.messages[-1][1]
        marked = MARK.findall(last)
        if last.startswith("Passage:"):
            return json.dumps({"reasoning": "r", "rewrites": [{"marked": m, "new": rewrite(m)} for m in marked]})
        return json.dumps(candidates.get(marked[0], []))

    return ScriptedLLM(answer)


def make_spec(root: Path, gate=None, **over) -> Path:
    write_data(root)
    data = {"title": "harden", "seed": 0, "out": "out", "originals": "data/originals.jsonl",
            "releases": [{"name": "ours", "path": "data/ours.jsonl"}, {"name": "masked", "sanitizer": "labels"}],
            "attacks": ["toy_phrase", "toy_guess"],
            "gate": gate if gate is not None else {"max": {"toy_phrase": 0.0, "toy_guess": 0.0}, "on_point": True}}
    data.update(over)
    path = root / "audit.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def harden(root: Path, llm, *, on_failure: str = "redact", **kw) -> Harden:
    reg = toy_registry()
    spec = load_spec(root / "audit.yaml", registry=reg)
    params = {"delinker": {"llm": llm, "cache": False, "on_failure": on_failure},
              "intact": {"llm": llm, "cache": False}}
    return Harden(spec, kw.pop("release", "ours"), registry=reg, repair_params=params, progress=False, echo=None, **kw)


# =========================================================================== evidence -> targets


def released(text_spans: list[tuple[str, str | None, str]]) -> Document:
    """A released document from pieces ``(text, original or None, label)``."""
    text, spans, orig_pos = "", [], 0
    for piece, original, label in text_spans:
        if original is not None:
            spans.append(Span(len(text), len(text) + len(piece), label, replacement=piece, original=original,
                              orig_start=orig_pos, orig_end=orig_pos + len(original)))
            orig_pos += len(original)
        else:
            orig_pos += len(piece)
        text += piece
    return Document("d", text, spans=tuple(spans))


def test_a_highlight_inside_a_replacement_is_a_span_target_and_words_around_masks_are_text_targets():
    doc = released([("She met ", None, ""), ("[PERSON]", "Olga", "PERSON"), (" at the old harbour, ", None, ""),
                    ("a Norwegian city", "Bergen", "LOC"), (".", None, "")])
    loc = doc.spans[1]
    sentence = (0, len(doc.text))
    out = targets_of(doc, [(loc.start, loc.end, "span_guess", "span"), (*sentence, "trir", "window")])
    spans = [t for t in out if t.kind == SPAN]
    texts = [doc.text[t.start:t.end] for t in out if t.kind == TEXT]
    assert [(t.start, t.end, t.attacks) for t in spans] == [(loc.start, loc.end, ("span_guess",))]
    # the window minus both replacements, trimmed to words: the masks are never reworded
    assert texts == ["She met", "at the old harbour"]
    assert all(t.attacks == ("trir",) for t in out if t.kind == TEXT)
    # a lone function word between two masks is not worth a rewording
    doc = released([("[PERSON]", "Olga", "PERSON"), (" of ", None, ""), ("[ORG]", "Acme", "ORG")])
    assert targets_of(doc, [(0, len(doc.text), "trir", "window")]) == []


def test_only_successful_findings_about_the_document_itself_give_targets():
    doc = released([("He sold boats in the old harbour district.", None, "")])
    hl = (Highlight(21, 41, "ngram"),)
    results = [Result("attack", "phrase_search", "r", 1.0, documents=[
        Finding("d", success=False, highlights=hl),                      # not linked: nothing to repair
        Finding("x", success=True, highlights=hl)]),                     # not a document of this release
        Result("attack", "claim_linker", "r", 1.0, documents=[
            Finding("d", success=True, highlights=hl, highlights_in="other")]),  # evidence in another record
        Result("utility", "tps", "r", 0.9, documents=[Finding("d", success=True, highlights=hl)])]
    assert targets_from_results({"d": doc}, results) == {}
    results.append(Result("attack", "phrase_search", "r", 1.0,
                          documents=[Finding("d", success=True, highlights=hl)]))
    found = targets_from_results({"d": doc}, results)
    assert [(doc.text[t.start:t.end], t.kind) for t in found["d"]] == [("old harbour district", TEXT)]
    assert targets_from_results({"d": doc}, results, attacks=["trir"]) == {}


def test_set_replacements_moves_later_spans_and_positions_between_them():
    doc = released([("In ", None, ""), ("a Norwegian city", "Bergen", "LOC"), (" on ", None, ""),
                    ("[DATE]", "1 May", "DATE"), (" he left.", None, "")])
    new = set_replacements(doc, {0: "a Nordic city"})
    assert new.text == "In a Nordic city on [DATE] he left."
    assert [new.text[s.start:s.end] for s in new.spans] == ["a Nordic city", "[DATE]"]
    assert new.spans[0].original == "Bergen" and new.spans[0].orig_start == 3
    pos = doc.text.index(" he left")
    assert new.text[shift_position(doc, new, pos):].startswith(" he left")


# =========================================================================== repairers


def test_the_delinker_rewords_exactly_the_given_ranges_and_a_later_round_absorbs_its_rephrasing():
    from defenders.delinker import Delinker

    orig = Document("d", "Anna kept a lighthouse near the old harbour district for years.")
    rel = sanitize_corpus(Corpus([orig]), {"d": [Span(0, 4, "PERSON", replacement="[PERSON]")]}, name="r")
    doc = rel.corpus["d"]
    i = doc.text.index("old harbour")
    llm = scripted(rewrite=lambda m: {"old harbour district": "waterfront area",
                                      "near the waterfront area": "by the sea"}.get(m, "x"))
    d = Delinker(llm=llm, cache=False, progress=False)
    once = d.rewrite(doc, [(i, i + len("old harbour district")), (0, 8)], rnd=1)  # [PERSON] is never sent
    assert once.text == "[PERSON] kept a lighthouse near the waterfront area for years."
    assert [MARK.findall(c.messages[-1][1]) for c in llm.calls] == [["old harbour district"]]
    # round 2: a target overlapping the first rephrasing takes it whole; the record says what the
    # original text was, before both rewrites
    j = once.text.index("near the")
    twice = d.rewrite(once, [(j, j + len("near the waterfront"))], rnd=2)
    assert twice.text == "[PERSON] kept a lighthouse by the sea for years."
    reph = [s for s in twice.spans if s.label == REPHRASED]
    assert len(reph) == 1 and reph[0].original == "near the old harbour district"
    assert orig.text[reph[0].orig_start:reph[0].orig_end] == reph[0].original
    assert Release("h", Corpus([twice])).doubts_against(Corpus([orig])) == []
    assert llm.calls[-1].seed == 1  # a later round samples another answer


def test_a_later_round_takes_an_earlier_rephrasing_whole_or_not_at_all():
    """Seen on TAB (round 3 of 20 judgments): a target that reached into an earlier rephrasing
    without covering it (the rephrasing ended with punctuation, which a target is trimmed of, or
    it reached a mask) rewrote part of it, and the release had two records crossing each other,
    which its own loader then refused. A target now takes an earlier rephrasing whole, or leaves
    it alone where taking it whole would reach a mask."""
    from audit.io.records import crossing_pairs
    from defenders.delinker import Delinker
    from defenders.delinker.sanitizer import whole_rephrasings

    orig = Document("d", "Anna kept a lighthouse near the old harbour district for years.")
    rel = sanitize_corpus(Corpus([orig]), {"d": [Span(0, 4, "PERSON", replacement="[PERSON]")]}, name="r")
    doc = rel.corpus["d"]
    i = doc.text.index("old harbour")
    llm = scripted(rewrite=lambda m: {"old harbour district": "waterfront (east).",
                                      "kept a lighthouse near the waterfront (east).": "ran a beacon by the sea"
                                      }.get(m, "had a seaside building"))
    d = Delinker(llm=llm, cache=False, progress=False)
    once = d.rewrite(doc, [(i, i + len("old harbour district"))], rnd=1)
    assert once.text == "[PERSON] kept a lighthouse near the waterfront (east). for years."
    # the attack's phrase ends inside the rephrasing "waterfront (east)."
    j, k = once.text.index("kept"), once.text.index(" (east)")
    twice = d.rewrite(once, [(j, k)], rnd=2)
    assert list(crossing_pairs(twice.spans)) == []
    assert all(twice.text[x.start:x.end] == x.replacement for x in twice.spans)  # every record where it says
    assert MARK.findall(llm.calls[-1].messages[-1][1]) == ["kept a lighthouse near the waterfront (east)."]
    assert twice.text == "[PERSON] ran a beacon by the sea for years."
    reph = [s for s in twice.spans if s.label == REPHRASED]
    assert len(reph) == 1 and reph[0].original == "kept a lighthouse near the old harbour district"
    assert Release("h", Corpus([twice])).doubts_against(Corpus([orig])) == []
    # the rule on ranges: grow over a rephrasing (and the next one it then reaches), or, where
    # that would reach a blocked range (a mask, a placeholder), give the rephrasing's part up
    movable = [Span(10, 20, REPHRASED), Span(25, 30, REPHRASED)]
    assert whole_rephrasings([(12, 26)], movable, blocked=[]) == [(10, 30)]
    assert whole_rephrasings([(0, 12)], movable, blocked=[]) == [(0, 20)]
    assert whole_rephrasings([(0, 12)], movable, blocked=[(15, 16)]) == [(0, 10)]
    assert whole_rephrasings([(22, 27)], movable, blocked=[(29, 31)]) == [(22, 25)]
    assert whole_rephrasings([(12, 18)], movable, blocked=[(19, 19)]) == []  # inside one that cannot be whole
    assert whole_rephrasings([(0, 5), (21, 24)], movable, blocked=[]) == [(0, 5), (21, 24)]  # untouched


@pytest.mark.parametrize("on_failure", ["redact", "keep"])
def test_a_phrase_refused_again_in_a_later_round_is_redacted_unless_kept(on_failure):
    from defenders.delinker import Delinker
    from defenders.delinker.prompts import REDACTION

    doc = Document("d", "She kept a lighthouse near the old harbour district for years.")
    i = doc.text.index("old harbour")
    rng = [(i, i + len("old harbour district"))]
    llm = scripted(rewrite=lambda m: m)  # a copy of the phrase: never a usable rewording
    d = Delinker(llm=llm, cache=False, progress=False, on_failure=on_failure)
    first = d.rewrite(doc, rng, rnd=1)  # the first refusal keeps the words for another try
    assert first.text == doc.text and first.meta["delinker"]["refused"] == 1
    assert first.meta["delinker"]["redacted"] == 0
    again = d.rewrite(first, rng, rnd=2)
    if on_failure == "keep":
        assert again.text == doc.text and again.meta["delinker"]["redacted"] == 0
    else:
        assert again.text == f"She kept a lighthouse near the {REDACTION} for years."
        assert again.meta["delinker"]["redacted"] == 1
        red = [s for s in again.spans if s.original == "old harbour district"]
        assert len(red) == 1 and again.text[red[0].start:red[0].end] == REDACTION
        assert Release("h", Corpus([again])).doubts_against(Corpus([doc])) == []


def test_intact_generalises_a_recovered_span_one_level_and_every_mention_with_it(tmp_path):
    from defenders.intact import IntactSanitizer

    write_data(tmp_path)
    rel = Release("ours", load_corpus(str(tmp_path / "data" / "ours.jsonl")))
    doc = rel.corpus["c"]
    first = next(s for s in doc.spans if s.replacement == "an Italian city")
    target = targets_of(doc, [(first.start, first.end, "toy_guess", "span")])
    llm = scripted()
    intact = IntactSanitizer(llm=llm, cache=False, progress=False)
    out = intact.repair(rel, {"c": target}, name="ours.harden1")
    new = out.corpus["c"]
    assert new.text == "[PERSON] moved to a Mediterranean city in [DATE]. He worked at a bank for years and " \
                       "liked a Mediterranean city."
    assert [s.original for s in new.spans if s.replacement == "a Mediterranean city"] == ["Rome", "Rome"]
    assert [out.corpus[i].text for i in "ab"] == [rel.corpus[i].text for i in "ab"]
    assert intact.next_level("a European city", CANDIDATES["Rome"], "LOC") == "[LOC]"   # last level: the label
    assert intact.next_level("somewhere", CANDIDATES["Rome"], "LOC") == "[LOC]"         # level unknown: the label
    assert intact.at_label("[PERSON]", "PERSON") and intact.at_label("PERSON_2", "PERSON")
    assert intact.at_label("", "LOC") and not intact.at_label("a city", "LOC")


def test_intact_repair_asks_for_several_documents_at_once_and_the_batch_does_not_change_the_release(tmp_path):
    from defenders.intact import IntactSanitizer

    write_data(tmp_path)
    rel = Release("ours", load_corpus(str(tmp_path / "data" / "ours.jsonl")))
    targets = {}
    for i in "ac":
        doc = rel.corpus[i]
        s = next(s for s in doc.spans if s.replacement in GIVEAWAYS)
        targets[i] = targets_of(doc, [(s.start, s.end, "toy_guess", "span")])
    out, calls = {}, {}
    for batch in (1, 32):
        llm = scripted()
        real = llm.complete_batch
        calls[batch] = []
        llm.complete_batch = lambda reqs, _c=calls[batch], **kw: _c.append(len(reqs)) or real(reqs, **kw)  # type: ignore[method-assign]
        intact = IntactSanitizer(llm=llm, cache=False, progress=False, batch=batch)
        out[batch] = intact.repair(rel, targets, name="ours.harden1")
        assert intact.stats()["counts"]["ours.harden1"]["repair"]["candidate_requests"] == 2
    assert calls == {1: [1, 1], 32: [2]}  # Bergen's and Rome's candidates: one request each
    assert [d.to_dict() for d in out[1].corpus] == [d.to_dict() for d in out[32].corpus]
    assert out[32].corpus["a"].text.startswith("[PERSON] moved to a Nordic city")
    assert out[32].corpus["b"].text == rel.corpus["b"].text


# =========================================================================== the loop


def test_a_round_repairs_exactly_the_evidence_and_the_loop_stops_when_the_gate_passes(tmp_path):
    make_spec(tmp_path)
    llm = scripted()
    outcome = harden(tmp_path, llm, max_rounds=3).run()
    assert [r.release for r in outcome.rounds] == ["ours", "ours.harden1"]
    assert [r.gate for r in outcome.rounds] == ["fail", "pass"]
    assert outcome.stopped == "passed" and outcome.exit_code == 0
    first = outcome.rounds[0]
    assert first.exposed == 2 and first.targets == {"span": 2, "text": 1}
    assert first.by_attack == {"toy_guess": 2, "toy_phrase": 1}

    before = {d.id: d for d in load_corpus(str(tmp_path / "data" / "ours.jsonl"))}
    after = {d.id: d for d in outcome.final}
    # b had no evidence: untouched
    assert after["b"].text == before["b"].text and after["b"].spans == before["b"].spans
    # a: its linking phrase reworded, its recovered city one level more general, nothing else
    assert after["a"].text == ("[PERSON] moved to a Nordic city in [DATE]. She kept a seaside building for years.")
    reph = [s for s in after["a"].spans if s.label == REPHRASED]
    assert [s.original for s in reph] == [PHRASE]
    # c: both mentions of Rome generalised; the text between them untouched
    assert after["c"].text.count("a Mediterranean city") == 2 and "an Italian city" not in after["c"].text
    # the LLM was asked about exactly the evidence: one phrase, two entities
    sent = [MARK.findall(c.messages[-1][1]) for c in llm.calls]
    assert sorted(map(tuple, sent)) == sorted([("Bergen",), (PHRASE,), ("Rome",)])

    rf = ResultsFile.load(tmp_path / "out" / "results.json")
    for name in ("ours", "ours.harden1"):
        assert rf.get("toy_phrase", name) is not None and rf.get("toy_guess", name) is not None
    assert rf.get("toy_phrase", "ours.harden1").value == 0.0
    assert rf.get("toy_phrase", "masked") is None  # only the hardened release's rounds are attacked
    manifest = json.loads((tmp_path / "out" / "harden" / "ours.json").read_text())
    assert manifest["stopped"] == "passed" and [r["release"] for r in manifest["rounds"]] == ["ours", "ours.harden1"]
    assert manifest["rounds"][0]["repair"]["text"]["delinker"]["rewritten"] == 1
    assert manifest["rounds"][0]["repair"]["span"]["counts"]["repair"]["generalised"] == 2


def test_a_release_that_records_no_replacement_is_aligned_with_the_originals_first(tmp_path):
    make_spec(tmp_path)
    plain = [{"id": d["id"], "text": d["text"]} for d in map(json.loads, (tmp_path / "data" / "ours.jsonl").open())]
    (tmp_path / "data" / "ours.jsonl").write_text("".join(json.dumps(d) + "\n" for d in plain))
    outcome = harden(tmp_path, scripted(), max_rounds=3).run()
    assert outcome.stopped == "passed" and outcome.rounds[0].targets == {"span": 2, "text": 1}
    a = outcome.final.corpus["a"]
    assert a.text == "[PERSON] moved to a Nordic city in [DATE]. She kept a seaside building for years."
    assert {s.original for s in a.spans} >= {"Anna", "Bergen", PHRASE}


def test_a_registered_detector_labels_the_replacements_of_a_release_that_records_none(tmp_path):
    """``Harden(detector=NAME)``: any registered detector, found by name, labels what alignment finds."""
    from audit.core.interfaces import Detector

    seen = []

    class Gazetteer(Detector):
        name = "toy_gazetteer"

        def detect(self, texts):
            seen.extend(texts)
            return [[Span(m.start(), m.end(), REPLACED[m.group()][0]) for m in re.finditer("|".join(REPLACED), t)]
                    for t in texts]

    make_spec(tmp_path)
    plain = [{"id": d["id"], "text": d["text"]} for d in map(json.loads, (tmp_path / "data" / "ours.jsonl").open())]
    (tmp_path / "data" / "ours.jsonl").write_text("".join(json.dumps(d) + "\n" for d in plain))
    reg = toy_registry()
    reg.register("detector")(Gazetteer)
    spec = load_spec(tmp_path / "audit.yaml", registry=reg)
    params = {"delinker": {"llm": scripted(), "cache": False}, "intact": {"llm": scripted(), "cache": False}}
    outcome = Harden(spec, "ours", registry=reg, repair_params=params, progress=False, echo=None, max_rounds=3,
                     detector="toy_gazetteer").run()
    assert sorted(seen) == sorted(ORIGINALS.values())
    assert outcome.stopped == "passed" and outcome.rounds[0].targets == {"span": 2, "text": 1}
    assert outcome.final.corpus["a"].text == "[PERSON] moved to a Nordic city in [DATE]. She kept a seaside building for years."
    with pytest.raises(AnonauditError, match="--detector: unknown detector 'nope'"):
        harden(tmp_path, scripted(), detector="nope")


def test_each_round_records_its_utility_and_what_its_repair_cost(tmp_path):
    make_spec(tmp_path)
    outcome = harden(tmp_path, scripted(), max_rounds=3, metrics=["toy_same"]).run()
    before, after = (r.utility["toy_same"] for r in outcome.rounds)
    assert 0 < after < before < 1  # the repairs changed text: the price shows
    rf = ResultsFile.load(tmp_path / "out" / "results.json")
    assert rf.get("toy_same", "ours.harden1").value == after
    with pytest.raises(AnonauditError, match="metric 'nope'"):
        harden(tmp_path, scripted(), metrics=["nope"])


def test_a_rerun_reuses_every_round_and_asks_the_llm_nothing(tmp_path):
    make_spec(tmp_path)
    harden(tmp_path, scripted(), max_rounds=3).run()
    again = scripted()
    outcome = harden(tmp_path, again, max_rounds=3).run()
    assert outcome.stopped == "passed" and again.calls == []
    assert outcome.rounds[0].repair.get("reused") is True


def test_the_loop_stops_when_a_repair_changes_nothing_and_the_gate_still_fails(tmp_path):
    make_spec(tmp_path)
    # every rewording copies the phrase (refused) and the delinker keeps refused phrases: round 1
    # generalises the cities but keeps the phrase, and round 2 would change nothing, so the loop
    # stops there with the gate failing
    outcome = harden(tmp_path, scripted(rewrite=lambda m: m), max_rounds=3, on_failure="keep").run()
    assert [r.gate for r in outcome.rounds] == ["fail", "fail"]
    assert outcome.stopped == "unchanged" and outcome.exit_code == 1
    assert PHRASE in outcome.final.corpus["a"].text


def test_a_phrase_the_model_keeps_refusing_is_redacted_in_the_next_round_and_the_gate_passes(tmp_path):
    make_spec(tmp_path)
    outcome = harden(tmp_path, scripted(rewrite=lambda m: m), max_rounds=3).run()
    assert [r.gate for r in outcome.rounds] == ["fail", "fail", "pass"]
    assert outcome.stopped == "passed" and outcome.exit_code == 0
    assert PHRASE not in outcome.final.corpus["a"].text


def test_an_inconclusive_gate_stops_the_loop_with_exit_3(tmp_path):
    """Once nothing fails but an attacker doubts itself, repairs cannot help: stop and say so."""
    make_spec(tmp_path, attacks=[{"name": "toy_phrase", "warn": True}, "toy_guess"])
    outcome = harden(tmp_path, scripted(), max_rounds=3).run()
    assert [r.gate for r in outcome.rounds] == ["fail", "inconclusive"]
    assert outcome.stopped == "inconclusive" and outcome.exit_code == 3


def test_max_rounds_bounds_the_loop(tmp_path):
    make_spec(tmp_path)
    outcome = harden(tmp_path, scripted(), max_rounds=1, attacks=["toy_guess"]).run()
    # only the guesser's evidence is repaired: the phrase still links after the one round
    assert [r.release for r in outcome.rounds] == ["ours", "ours.harden1"]
    assert outcome.stopped == "max_rounds" and outcome.exit_code == 1
    assert PHRASE in outcome.final.corpus["a"].text and "a Nordic city" in outcome.final.corpus["a"].text


def test_a_recovered_label_cannot_say_less_so_the_words_of_its_sentence_are_reworded(tmp_path):
    """[DATE] is already the label: INTACT leaves it, and the delinker rewords its sentence's
    words around it (the context that gave it away), never the masks in it."""
    make_spec(tmp_path, attacks=[{"name": "toy_guess", "giveaways": ["[DATE]"], "docs": ["a"]}],
              gate={"max": {"toy_guess": 0.0}, "on_point": True})
    llm = scripted(rewrite=lambda m: "went to live in")
    outcome = harden(tmp_path, llm, max_rounds=1).run()
    first = outcome.rounds[0]
    assert first.targets == {"span": 1} and first.repair["span"]["to_context"] == 1
    assert first.repair["span"]["counts"]["repair"]["at_label"] == 1
    a = outcome.final.corpus["a"]
    assert a.text.startswith("[PERSON] went to live in a Norwegian city in [DATE]. She kept a lighthouse")
    # the delinker was asked about exactly the words of that sentence ("in" alone says nothing),
    # nothing after it
    assert [m for c in llm.calls for m in MARK.findall(c.messages[-1][1])] == ["moved to"]
    assert [outcome.final.corpus[i].text for i in "bc"] == [d.text for d in load_corpus(
        str(tmp_path / "data" / "ours.jsonl")) if d.id in "bc"]


def test_the_sentence_around_a_span_and_its_context_targets():
    doc = released([("[PERSON]", "Anna", "PERSON"), (" moved to ", None, ""), ("[LOC]", "Bergen", "LOC"),
                    (" in 2001. She kept a lighthouse.\nNext line", None, "")])
    loc = doc.spans[1]
    assert doc.text[slice(*sentence_around(doc.text, loc.start, loc.end))] == "[PERSON] moved to [LOC] in 2001."
    target = targets_of(doc, [(loc.start, loc.end, "guess", "span")])
    ctx = context_targets(doc, target)
    assert [(doc.text[t.start:t.end], t.kind, t.attacks, t.evidence) for t in ctx] == [
        ("moved to", TEXT, ("guess",), ("context",)), ("in 2001", TEXT, ("guess",), ("context",))]
    # a span a repair changed is not left as it was; one it kept is, at its new offsets
    after = set_replacements(doc, {0: "a woman"})
    assert unchanged_spans(doc, after, target) == [
        RepairTarget("d", after.spans[1].start, after.spans[1].end, SPAN, ("guess",), ("span",))]
    assert unchanged_spans(doc, set_replacements(doc, {1: "a city"}), target) == []


def test_without_a_gate_the_loop_runs_until_nothing_is_left_to_repair(tmp_path):
    make_spec(tmp_path, gate={})
    outcome = harden(tmp_path, scripted(), max_rounds=3).run()
    assert outcome.stopped == "nothing_to_repair" and [r.gate for r in outcome.rounds] == ["none", "none"]


@pytest.mark.parametrize("kw, message", [
    ({"release": "nope"}, "no release named 'nope'"),
    ({"max_rounds": 0}, "--max-rounds must be between 1 and 20"),
    ({"repairers": {"text": "labels"}}, "sanitizer 'labels' cannot repair text evidence (those that can: delinker)"),
    ({"repairers": {"span": "no_such"}}, "span repairer"),
    ({"attacks": ["trir"]}, "--attack 'trir' is not an attack of the spec"),
])
def test_bad_input_names_the_problem(tmp_path, kw, message):
    make_spec(tmp_path)
    with pytest.raises(AnonauditError, match=re.escape(message)):
        harden(tmp_path, scripted(), **kw)


def test_the_command_writes_the_hardened_release_and_exits_with_the_gate(tmp_path, monkeypatch):
    make_spec(tmp_path)
    llm = scripted()
    reg = toy_registry()
    out = tmp_path / "hardened.jsonl"
    args = ["harden", str(tmp_path / "audit.yaml"), "--release", "ours", "--out", str(out), "--metric", "toy_same",
            "--repair-param", "delinker.cache=false", "--repair-param", "intact.cache=false",
            "--llm", "qwen2.5-coder-0.5b"]
    # the scripted LLM cannot come from the command line: the spec's models.llm is replaced by it
    import audit.models.resources as resources

    monkeypatch.setattr(resources.Resources, "llm", lambda self, spec=None, **kw: llm)
    # OUT/results.json holds a file of another kind: refused, and with --force replaced by the
    # results (it used to fail after round 0, reading it as results)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_text("mine\n")
    res = CliRunner().invoke(main, args, obj={"registry": reg})
    assert res.exit_code == 2 and "is not an anonaudit results file" in res.output, res.output
    res = CliRunner().invoke(main, [*args, "--force"], obj={"registry": reg})
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [d["id"] for d in lines] == ["a", "b", "c"] and PHRASE not in lines[0]["text"]
    assert "ours.harden1" in res.output and "stopped: passed" in res.output
    # the report shows both rounds, with the arrow from the input to the hardened round
    html = (tmp_path / "out" / "report.html").read_text()
    assert "ours.harden1" in html and 'class="harden-path"' in html
    assert ResultsFile.load(tmp_path / "out" / "results.json").provenance["models"]["llm"] == "qwen2.5-coder-0.5b"


def test_the_api_function_hardens_writes_what_it_is_asked_and_says_how_it_ended(tmp_path):
    """``anonaudit.harden``: the loop of the command, its outputs only when asked, one typed answer."""
    import anonaudit

    make_spec(tmp_path)
    llm, reg = scripted(), toy_registry()
    params = {"delinker": {"llm": llm, "cache": False}, "intact": {"llm": llm, "cache": False}}
    out = tmp_path / "hardened.jsonl"
    # every output is checked before any work: the spec's originals as out is refused, nothing runs
    with pytest.raises(AnonauditError, match="this is also the command's input"):
        anonaudit.harden(tmp_path / "audit.yaml", "ours", out=tmp_path / "data" / "originals.jsonl",
                         repair_params=params, registry=reg, progress=False)
    assert not (tmp_path / "out").exists() and not llm.calls
    with pytest.raises(AnonauditError, match="out .*results.json: would overwrite the audit's results file"):
        anonaudit.harden(tmp_path / "audit.yaml", "ours", out=tmp_path / "out" / "results.json", registry=reg)
    done = anonaudit.harden(tmp_path / "audit.yaml", "ours", out=out, metrics=["toy_same"], repair_params=params,
                            registry=reg, progress=False, report=True)
    assert isinstance(done, anonaudit.Hardened) and done.passed
    assert (done.stopped, done.status, done.exit_code) == ("passed", "pass", 0)
    assert [r.release for r in done.rounds] == ["ours", "ours.harden1"] and done.final.name == "ours.harden1"
    assert [json.loads(x)["text"] for x in out.read_text().splitlines()] == [d.text for d in done.final]
    assert done.results_path == tmp_path / "out" / "results.json" and done.report == tmp_path / "out" / "report.html"
    table = done.results.to_list()
    assert {(r["release"], r["name"]) for r in table} >= {("ours.harden1", "toy_phrase"), ("ours", "toy_same")}
    assert str(done).splitlines()[2].startswith("1      ours.harden1") and "ours.harden1" in done.report.read_text()
    # without out= and report=True, only the spec's OUT is written (the rounds, reused)
    (tmp_path / "out" / "report.html").unlink()
    again = anonaudit.harden(str(tmp_path / "audit.yaml"), "ours", repair_params=params, registry=reg,
                             progress=False)
    assert again.out is None and again.report is None and not (tmp_path / "out" / "report.html").exists()
    assert [r.release for r in again.rounds] == ["ours", "ours.harden1"]


@pytest.mark.parametrize("args, message", [
    (["--release", "nope"], "no release named 'nope'"),
    (["--max-rounds", "0"], "--max-rounds must be between 1 and 20"),
    (["--repair-param", "chunk_sentences=2"], "expected SANITIZER.KEY=VALUE"),
    (["--repair-param", "prompt.family=ppdp"], "parameters given for 'prompt', which is not a repairer"),
    (["--text-repairer", "labels"], "cannot repair text evidence"),
])
def test_the_command_refuses_bad_input_with_exit_2_and_no_traceback(tmp_path, args, message):
    make_spec(tmp_path)
    base = ["harden", str(tmp_path / "audit.yaml"), "--release", "ours", "--out", str(tmp_path / "h.jsonl")]
    res = CliRunner().invoke(main, base + args, obj={"registry": toy_registry()})
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


def test_the_command_refuses_a_missing_spec_and_an_out_folder(tmp_path):
    make_spec(tmp_path)
    reg = toy_registry()
    res = CliRunner().invoke(main, ["harden", str(tmp_path / "none.yaml"), "--release", "ours", "--out",
                                    str(tmp_path / "h.jsonl")], obj={"registry": reg})
    assert res.exit_code == 2 and "none.yaml" in res.output
    res = CliRunner().invoke(main, ["harden", str(tmp_path / "audit.yaml"), "--release", "ours", "--out",
                                    str(tmp_path)], obj={"registry": reg})
    assert res.exit_code == 2 and "is a directory" in res.output


# =========================================================================== real models


@pytest.mark.slow
def test_hardening_a_demo_release_with_the_embedded_models(tmp_path, small_llm):
    """Phrase search and span guessing (0.5B model) on 2 of 4 demo documents; one round repairs
    with the delinker and INTACT; each linked document gets its linking phrases reworded."""
    from audit.core.registry import registry
    from anonaudit.demo.population import write as write_demo

    data = write_demo(tmp_path / "data", n=4, seed=0)
    assert len(data.originals) >= 4
    spec = {"title": "harden e2e", "seed": 0, "out": "out", "originals": "data/originals.jsonl",
            "releases": [{"name": "labels", "path": "data/releases/labels.jsonl"}],
            "attacks": ["phrase_search", {"name": "span_guess", "params": {"sample": 2, "guesses": 2,
                                                                           "context_tokens": 128}}],
            "sampling": {"documents": 2},  # the attacks see 2 documents: only they have evidence
            "gate": {"max": {"phrase_search": 0.0}, "on_point": True}}
    (tmp_path / "audit.yaml").write_text(yaml.safe_dump(spec))
    h = Harden(load_spec(tmp_path / "audit.yaml"), "labels", max_rounds=1, registry=registry,
               repair_params={"delinker": {"llm": small_llm, "max_spans": 6},
                              "intact": {"llm": small_llm, "candidates": 2}},
               progress=False, echo=None)
    # span_guess asks the run's resources for the spec's LLM: give it the session's small model too
    import audit.models.resources as resources

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(resources.Resources, "llm", lambda self, spec=None, **kw: small_llm)
        outcome = h.run()
    r0, r1 = outcome.rounds[0], outcome.rounds[-1]
    assert r0.release == "labels" and r1.release == "labels.harden1"
    assert r0.targets.get("text", 0) > 0  # the demo's label masks leave linking phrases
    assert r0.exposed <= 2 and r1.risks["phrase_search"] <= r0.risks["phrase_search"]
    rf = ResultsFile.load(outcome.path)
    before = {f.id: f for f in rf.get("phrase_search", "labels").documents}
    assert rf.get("phrase_search", "labels.harden1") is not None
    inputs = {d.id: d for d in load_corpus(str(tmp_path / "data" / "releases" / "labels.jsonl"))}
    final = {d.id: d for d in outcome.final}
    originals = load_corpus(str(tmp_path / "data" / "originals.jsonl"))
    # every recorded change (rewordings included) names the original text it replaced
    assert Release("h", Corpus(list(final.values()))).doubts_against(originals) == []
    for doc_id, d in final.items():
        if before.get(doc_id) is not None and before[doc_id].success:
            assert [s for s in d.spans if s.label == REPHRASED], f"{doc_id} was linked but nothing was reworded"
        else:  # not attacked, or nothing found: left exactly as it was
            assert d.text == inputs[doc_id].text


def test_the_privacy_utility_chart_draws_the_path_from_the_input_to_the_last_round():
    from reports.charts import pareto_chart

    heads = [Result("attack", "phrase_search", n, v) for n, v in
             (("ours", 0.8), ("ours.harden1", 0.4), ("ours.harden2", 0.1), ("other", 0.5), ("x.harden1", 0.3))]
    util = [Result("utility", "tps", n, v) for n, v in
            (("ours", 0.9), ("ours.harden1", 0.8), ("ours.harden2", 0.7), ("other", 0.6), ("x.harden1", 0.5))]
    chart = pareto_chart(heads, util, "tps", None, [r.release for r in heads])
    at = {it["release"]: (it["cx"], it["cy"]) for it in chart.items}
    segs = [((s["x1"], s["y1"]), (s["x2"], s["y2"])) for s in chart.paths]
    # ours -> harden1 -> harden2; "x.harden1" has no input in the chart, "other" is no round
    assert segs == [(at["ours"], at["ours.harden1"]), (at["ours.harden1"], at["ours.harden2"])]
