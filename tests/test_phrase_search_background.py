"""Phrase search over the public background (issue 19): the same adversary as TRIR's, searching
the background for the rare phrases a release kept, names each document's subject; reported
on TRIR's scale as ``phrase_search_reid``, from the Python API and the command line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from attackers.phrase_search import PhraseSearchAttack
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.errors import AnonauditError

FILLER = "The actor appeared in several films over the years."


def background() -> Corpus:
    docs = [
        Document("ann-1", f"{FILLER} Ann grew up on a sheep farm near Tromsø.", subject="ann"),
        Document("ann-2", f"{FILLER} She won the silver lantern award in 1998.", subject="ann"),
        Document("bob-1", f"{FILLER} Bob studied violin at a conservatory in Ghent.", subject="bob"),
        Document("bob-2", f"{FILLER} He toured with the harbour light orchestra.", subject="bob"),
        Document("cy-1", f"{FILLER} Cy was a lifeguard before acting.", subject="cy"),
    ]
    return Corpus(docs, name="bg", source="bg.jsonl")


def release() -> Release:
    docs = [
        # a phrase from two of Ann's documents: about one person, so it names her
        Document("r1", "PERSON grew up on a sheep farm and later won the silver lantern award.", subject="ann"),
        # Bob's phrases are masked away; only the filler everyone shares is left
        Document("r2", f"{FILLER} PERSON trained in a school in GPE.", subject="bob"),
        # a phrase from Bob's text in a document about Cy: points to someone else
        Document("r3", "PERSON toured with the harbour light orchestra once.", subject="cy"),
        # about a person the background does not know: listed, not scored
        Document("r4", "PERSON grew up on a sheep farm.", subject="dora"),
    ]
    return Release("ner", Corpus(docs, name="ner"), aligned=False)


def test_background_search_names_subjects_on_trirs_scale():
    rel = release()
    scenario = Scenario(background=background(), releases=(rel,))
    attack = PhraseSearchAttack()  # auto: no originals, so the background
    (head,) = attack.evaluate(scenario, rel)
    assert head.name == "phrase_search_reid"
    by = {d.id: d for d in head.documents}
    assert [by[i].success for i in ("r1", "r2", "r3", "r4")] == [True, False, False, None]
    assert head.n == 3 and head.value == pytest.approx(1 / 3)
    assert head.baseline == pytest.approx(1 / 3)  # chance: one of three people
    assert head.details["population"] == 3 and head.details["not_in_background"] == 1
    assert by["r1"].facts["guess"] == "ann" and "guess" in by["r1"].private
    assert by["r3"].summary == "Its rare phrases point to someone else"
    assert by["r2"].summary.startswith("No phrase of it is found about fewer than 2 people")


def test_phrases_shared_by_one_persons_documents_count_once():
    """Two documents of the same person share a phrase: it is still about one person."""
    rel = Release("r", Corpus([Document("x", "The actor appeared in several films over the years.", subject="ann")],
                              name="r"), aligned=False)
    bg = Corpus([Document("a1", "The actor appeared in several films over the years.", subject="ann"),
                 Document("a2", "The actor appeared in several films over the years.", subject="ann"),
                 Document("b1", "Bob is a violinist.", subject="bob")], name="bg")
    (head,) = PhraseSearchAttack().evaluate(Scenario(background=bg, releases=(rel,)), rel)
    assert head.value == 1.0


def test_against_chooses_the_collection_and_says_what_is_missing():
    rel = release()
    originals = Corpus([Document(d.id, d.text, subject=d.subject) for d in rel.corpus], name="orig")
    both = Scenario(originals=originals, background=background(), releases=(rel,))
    names = [r.name for r in PhraseSearchAttack().evaluate(both, rel)]
    assert names == ["phrase_search", "phrase_search.ngram_residual"]  # auto: originals first
    assert [r.name for r in PhraseSearchAttack(against="background").evaluate(both, rel)] == ["phrase_search_reid"]
    with pytest.raises(AnonauditError, match="--background"):
        PhraseSearchAttack(against="background").fit(Scenario(originals=originals, releases=(rel,)))
    with pytest.raises(AnonauditError, match="--originals"):
        PhraseSearchAttack(against="originals").fit(Scenario(background=background(), releases=(rel,)))
    with pytest.raises(AnonauditError, match="against must be"):
        PhraseSearchAttack(against="web")
    no_subject = Corpus([Document("z", "text")], name="bg", source="bg.jsonl")
    with pytest.raises(AnonauditError, match="bg.jsonl.*'z' has no subject"):
        PhraseSearchAttack().fit(Scenario(background=no_subject, releases=(rel,)))


def _write(path, docs):
    path.write_text("".join(json.dumps({"id": d.id, "text": d.text, "subject": d.subject}) + "\n" for d in docs))
    return path


def test_cli_phrase_search_with_background(tmp_path):
    from anonaudit.cli import main

    bg = _write(tmp_path / "bg.jsonl", background())
    rel = _write(tmp_path / "ner.jsonl", release().corpus)
    out = tmp_path / "results.json"
    res = CliRunner().invoke(main, ["attack", "phrase-search", "--background", str(bg), "--release", str(rel),
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    results = json.loads(out.read_text())["results"]
    (head,) = [r for r in results if r["release"] == "ner"]
    assert head["name"] == "phrase_search_reid" and head["n"] == 3
    assert head["value"] == pytest.approx(1 / 3)
    none = CliRunner().invoke(main, ["attack", "phrase-search", "--release", str(rel), "--out", str(out)])
    assert none.exit_code == 2 and "--background or --originals" in none.output
    helped = CliRunner().invoke(main, ["attack", "phrase-search", "--help"])
    assert "--background" in helped.output and "--against" in helped.output


def test_cli_phrase_search_with_a_tri_file_uses_its_releases_not_its_dev_column(tmp_path):
    from anonaudit.cli import main

    rows = [{"name": "ann", "public_knowledge": "Ann grew up on a sheep farm near Tromsø.",
             "spacy": "PERSON grew up on a sheep farm near GPE.", "dev_abstract": "PERSON grew up on a farm."},
            {"name": "bob", "public_knowledge": "Bob studied violin at a conservatory in Ghent.",
             "spacy": "PERSON studied violin at a conservatory in GPE.", "dev_abstract": "PERSON studied."}]
    tri = tmp_path / "tri.json"
    tri.write_text(json.dumps(rows))
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["attack", "phrase-search", "--tri", str(tri), "--out", str(out)])
    assert res.exit_code == 0, res.output
    results = json.loads(out.read_text())["results"]
    assert {(r["name"], r["release"]) for r in results} == {("phrase_search_reid", "spacy")}
    assert results[0]["value"] == 1.0
