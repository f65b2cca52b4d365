from collections import Counter

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from anonaudit.demo.population import generate


def test_deterministic_given_seed():
    a, b = generate(n=12, seed=3), generate(n=12, seed=3)
    assert [d.to_dict() for d in a.originals] == [d.to_dict() for d in b.originals]
    assert [d.to_dict() for d in a.background] == [d.to_dict() for d in b.background]
    c = generate(n=12, seed=4)
    assert [d.text for d in a.originals] != [d.text for d in c.originals]


def test_gold_spans_and_subjects():
    data = generate(n=20, seed=0)
    for doc in data.originals:
        assert doc.subject and doc.spans
        labels = {s.label for s in doc.spans}
        assert {"PERSON", "DATETIME", "LOC", "ORG", "CODE"} <= labels
        for s in doc.spans:
            assert doc.text[s.start:s.end].strip() == doc.text[s.start:s.end] != ""
            assert s.identifier_type in {"DIRECT", "QUASI", "NO_MASK"}
    # The population is larger than the release.
    released = {d.subject for d in data.originals}
    public = {d.subject for d in data.background}
    assert released < public and len(public) == 30
    assert Counter(d.subject for d in data.background).most_common()[-1][1] == 3


def test_releases_record_every_replacement():
    data = generate(n=10, seed=1)
    for name, marker in (("suppressed", ""), ("labels", "[")):
        release = data.releases[name]
        assert release.aligned and len(release) == 10
        for doc, orig in zip(release, data.originals):
            masked = [s for s in orig.spans if s.identifier_type != "NO_MASK"]
            assert len(doc.spans) == len(masked)
            for s in doc.spans:
                assert doc.text[s.start:s.end] == s.replacement and s.replacement.startswith(marker)
                assert orig.text[s.orig_start:s.orig_end] == s.original
            assert orig.spans[0].entity_id and all(
                orig.text[s.start:s.end] not in doc.text for s in orig.spans if s.label == "CODE")


def test_distinct_people_at_scale():
    data = generate(n=200, seed=0)
    texts = [d.text for d in data.originals]
    assert len(set(texts)) == 200
    names = Counter(p.name for p in data.people)
    assert names.most_common(1)[0][1] == 1
    profiles = {(p.occupation, p.hobby, p.event) for p in data.people}
    assert len(profiles) >= 0.97 * len(data.people)


def _reidentification_rate(queries, background):
    """Share of queries whose nearest background document (TF-IDF cosine) is about their subject."""
    vec = TfidfVectorizer(sublinear_tf=True).fit([d.text for d in background] + [d.text for d in queries])
    sims = (vec.transform([d.text for d in queries]) @ vec.transform([d.text for d in background]).T).toarray()
    best = np.asarray(sims).argmax(axis=1)
    return np.mean([background[int(j)].subject == q.subject for q, j in zip(queries, best)])


def test_signal_exists_and_suppression_removes_much_but_not_all():
    data = generate(n=60, seed=0)
    chance = 1 / len({d.subject for d in data.background})
    raw = _reidentification_rate(list(data.originals), list(data.background))
    suppressed = _reidentification_rate(list(data.releases["suppressed"]), list(data.background))
    assert raw > 0.8
    assert suppressed < raw - 0.2
    assert suppressed > 5 * chance


def test_development_population_has_the_releases_where_masking_matters():
    from anonaudit.demo.population import development_population

    data = development_population(6, seed=2)
    assert set(data.releases) == {"suppressed", "labels", "generalized", "dev"}
    people = {p.id: p for p in data.people}
    for doc in data.releases["generalized"].corpus:
        p = people[doc.subject]
        assert p.name not in doc.text and p.city not in doc.text and p.employer not in doc.text
        assert p.country in doc.text  # a city becomes its country: truthful, coarser
        assert p.hobby in doc.text  # left in place, as annotators often do
    dev = data.releases["dev"].corpus
    assert [d.subject for d in dev] == [d.subject for d in data.originals]
    assert not set(d.id for d in dev) & set(d.id for d in data.originals)
    assert all(d.text != o.text for d, o in zip(dev, data.releases["labels"].corpus))  # other wording
    assert "[PERSON]" in dev[0].text
    again = development_population(6, seed=2)
    assert [d.text for d in again.releases["dev"].corpus] == [d.text for d in dev]
