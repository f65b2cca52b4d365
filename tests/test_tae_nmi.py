"""TAE's NMI (issue 58) on a 12-document, three-topic corpus with a hashing embedder (the real
MiniLM path is the one of ``nmi``, in tests/test_utility.py): TAE's ks, the best-silhouette
clustering, mask marks removed before embedding, and our ``nmi`` beside it."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from audit.core.data import Corpus, Document, Scenario, Span, sanitize_corpus
from audit.core.errors import AnonauditError
from audit.metrics import UtilityContext
from audit.metrics.tae_clustering import MASK_MARKS, TAENMIMetric, k_grid, mark_pattern, without_marks
from audit.models.nlp import Spacy

TOPICS = ["The striker scored twice as the football club {w} won the league match.",
          "The court dismissed the appeal of {w} and the applicant paid the legal costs.",
          "Bake the bread dough of {w} in a hot oven with butter and flour."]
NAMES = ["Oslo", "Bergen", "Tromso", "Bodo"]


class WordEmbedder:
    """Bag-of-words hashing vectors (unit rows): documents sharing words get close vectors."""

    def encode(self, texts, batch_size=64, progress=False):
        out = np.zeros((len(texts), 128))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 128] += 1
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out


def _corpus() -> Corpus:
    return Corpus([Document(f"d{t}{n}", s.format(w=w)) for t, s in enumerate(TOPICS) for n, w in enumerate(NAMES)],
                  name="orig")


def _run(originals, release, ctx=None, **kw):
    ctx = ctx or UtilityContext(originals, embedder=WordEmbedder(), spacy=Spacy(), cache=False)
    metric = TAENMIMetric(context=ctx, n_tries_per_clustering=5, **kw)
    return metric.evaluate(Scenario(originals=originals, releases=(release,)), release)[0]


def _names_as(originals, replacement):
    return sanitize_corpus(originals, {d.id: [Span(d.text.index(w), d.text.index(w) + len(w), replacement=replacement)
                                              for w in NAMES if w in d.text] for d in originals}, name=replacement)


def test_tae_ks_are_doubled_from_min_k_and_stay_below_the_documents():
    assert k_grid(2, 32, 2, 127) == [2, 4, 8, 16, 32]
    assert k_grid(2, 32, 2, 12) == [2, 4, 8] and k_grid(3, 10, 1, 12) == [3]


def test_a_release_identical_to_the_originals_scores_one_at_the_best_silhouette_k():
    originals = _corpus()
    r = _run(originals, sanitize_corpus(originals, {}, name="same"))
    assert r.value == pytest.approx(1.0) and r.name == "tae_nmi" and r.details["tae_name"] == "NMI"
    assert set(r.details["silhouettes"]) == {"2", "4", "8"}
    best = max(r.details["silhouettes"], key=r.details["silhouettes"].get)
    assert r.details["k"] == int(best) and len(r.details["runs"]) == 5 and r.n == 12


def test_mask_marks_are_removed_before_embedding_so_labels_cluster_as_suppression():
    originals = _corpus()
    ctx = UtilityContext(originals, embedder=WordEmbedder(), spacy=Spacy(), cache=False)
    labels, gone = _run(originals, _names_as(originals, "LOC"), ctx), _run(originals, _names_as(originals, ""), ctx)
    assert labels.details["mask_marks_removed_in"] == 12 and labels.value == gone.value
    kept = _run(originals, _names_as(originals, "LOC"), ctx, remove_mask_marks=False)
    assert kept.details["mask_marks_removed_in"] is None
    # a replacement that is not a mark is embedded as written
    assert _run(originals, _names_as(originals, "a town"), ctx).details["mask_marks_removed_in"] == 0


def test_only_replacements_that_are_marks_are_removed_with_their_index_and_brackets():
    pattern = mark_pattern(MASK_MARKS)
    assert all(pattern.fullmatch(m) for m in ("PERSON", "ORG_3", "[DATE_TIME]", "<LOC>"))
    assert not any(pattern.fullmatch(m) for m in ("UK", "a person", "PERSONAL", "Person"))
    orig = Document("d", "THE LAW. Mr Smith met Jones in Oslo.")
    rel = sanitize_corpus(Corpus([orig]), {"d": [Span(12, 17, replacement="PERSON_1"), Span(22, 27, replacement="a man"),
                                                 Span(31, 35, replacement="[LOC]")]}, name="r").corpus["d"]
    assert rel.text == "THE LAW. Mr PERSON_1 met a man in [LOC]."
    assert without_marks(rel, [s for s in rel.spans], pattern) == "THE LAW. Mr met a man in ."


def test_too_few_documents_for_min_k_is_an_error_naming_it():
    originals = Corpus([Document("a", "one text"), Document("b", "another text")], name="o")
    with pytest.raises(AnonauditError, match="more documents than min_k"):
        _run(originals, sanitize_corpus(originals, {}, name="same"))
