"""MiniLM sentence embeddings: normalised, meaningful, cached on disk (slow: real model)."""

from __future__ import annotations

import numpy as np
import pytest

from audit.models.embed import Embedder

pytestmark = pytest.mark.slow


def test_minilm_vectors_are_unit_and_meaningful(minilm):
    texts = ["The applicant was born in 1962 in Zagreb.",
             "Born in Zagreb in 1962, the applicant ...",
             "Quarterly revenue of the chip maker rose sharply.",
             ""]
    v = minilm.encode(texts, batch_size=2)
    assert v.dtype == np.float32 and v.shape == (4, minilm.dim) == (4, 384)
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert minilm.encode([]).shape == (0, 384)


def test_disk_cache_reuses_vectors(tmp_path, minilm):
    path = tmp_path / "emb.sqlite"
    a = Embedder("minilm", cache=path)
    first = a.encode(["one sentence", "another one", "one sentence"])
    assert a.stats == {"hits": 0, "misses": 2}
    b = Embedder("minilm", cache=path)
    again = b.encode(["another one", "one sentence"])
    assert b.stats == {"hits": 2, "misses": 0}
    assert np.allclose(again, first[[1, 0]], atol=1e-6)
    assert np.allclose(first, minilm.encode(["one sentence", "another one", "one sentence"]), atol=1e-5)


class _Recording:
    """A local executor that records what it was asked to map (the worker runs in this process)."""

    distributed = True

    def __init__(self):
        from audit.runtime.executor import LocalExecutor

        self.local, self.calls = LocalExecutor(), []

    def map(self, worker, items, **kw):
        self.calls.append(list(items))
        return self.local.map(worker, items, **kw)


def test_an_embedder_whose_executor_computes_the_vectors_loads_no_model_itself(tmp_path, minilm, monkeypatch):
    """On a cluster the driver only reads and writes the vector cache: a call with more than one
    step of texts is embedded by the workers, and the driver loads no model as well (seconds and
    the model's memory on a head node)."""
    import audit.models.embed as embed

    loads = []
    real_load = embed._load
    monkeypatch.setattr(embed, "_load", lambda *a: loads.append(a) or real_load(*a))
    monkeypatch.setattr(Embedder, "STEP", 2)
    texts = ["one sentence", "another one", "a third", "one sentence"]
    ex = _Recording()
    a = Embedder("minilm", cache=tmp_path / "emb.sqlite", executor=ex)
    assert loads == []
    got = a.encode(texts, batch_size=1)
    assert ex.calls == [texts[:3]]  # the three distinct texts, two steps: on the workers
    assert len(loads) == 1 and a._model is None and a.dim == 384  # the worker's model; the dimension from its vectors
    assert np.array_equal(got, minilm.encode(texts, batch_size=1))
    b = Embedder("minilm", cache=tmp_path / "emb.sqlite", executor=ex)
    assert np.array_equal(b.encode(texts[:2]), got[:2]) and b.encode([]).shape == (0, 384)
    assert len(loads) == 1 and b.stats == {"hits": 2, "misses": 0}  # all from the cache: nothing loaded
    c = Embedder("minilm", executor=ex)
    assert c.encode([]).shape == (0, 384) and len(loads) == 2  # no vector to tell the dimension: the model does


def test_an_embedder_embeds_one_step_here_rather_than_start_a_cluster_stage(tmp_path, minilm, monkeypatch):
    """An attack that embeds a document's few sentences at a time would start a stage on the
    cluster for each (seconds of a fresh worker and its model load, for milliseconds of work):
    a call with one step of texts or fewer is embedded here, the model loaded once, with the
    vectors the workers would give."""
    import audit.models.embed as embed

    loads = []
    real_load = embed._load
    monkeypatch.setattr(embed, "_load", lambda *a: loads.append(a) or real_load(*a))
    monkeypatch.setattr(Embedder, "STEP", 2)
    ex = _Recording()
    e = Embedder("minilm", executor=ex)
    first = e.encode(["one sentence", "another one", "one sentence"], batch_size=1)
    second = e.encode(["a third"], batch_size=1)
    assert ex.calls == [] and len(loads) == 1 and e._model is not None  # both here, one load
    assert np.array_equal(first, minilm.encode(["one sentence", "another one", "one sentence"], batch_size=1))
    assert np.array_equal(second, minilm.encode(["a third"], batch_size=1))
    many = ["w%d is a word" % i for i in range(5)]
    assert np.array_equal(e.encode(many, batch_size=1), minilm.encode(many, batch_size=1))
    assert ex.calls == [many] and len(loads) == 2  # three steps: the workers (here, this process again)


def test_an_interrupted_call_keeps_the_steps_it_finished(tmp_path, minilm, monkeypatch):
    """Embedding a long background takes minutes: each step is kept as it is done, so a call that
    is stopped midway embeds only the rest when run again, with the same vectors."""
    import audit.models.embed as embed

    monkeypatch.setattr(Embedder, "STEP", 2)
    texts = ["w%d is a word" % i for i in range(5)]
    real, steps = embed._encode, []

    def stopped_after_two(model, chunk, batch_size, *precision):
        if len(steps) == 2:
            raise KeyboardInterrupt
        steps.append(chunk)
        return real(model, chunk, batch_size, *precision)

    monkeypatch.setattr(embed, "_encode", stopped_after_two)
    a = Embedder("minilm", cache=tmp_path / "emb.sqlite")
    with pytest.raises(KeyboardInterrupt):
        a.encode(texts, batch_size=1)
    monkeypatch.setattr(embed, "_encode", real)
    b = Embedder("minilm", cache=tmp_path / "emb.sqlite")
    got = b.encode(texts, batch_size=1)
    assert b.stats == {"hits": 4, "misses": 1}  # the two finished steps came from the cache
    assert np.array_equal(got, minilm.encode(texts, batch_size=1))


def test_bf16_vectors_agree_with_fp32_and_are_cached_apart(tmp_path, minilm):
    """MiniLM in bfloat16 autocast (span guessing's ``auto`` where the CPU computes it natively):
    the same directions as float32 to within 1e-3 of cosine, unit rows, and kept under a key of
    their own (a bf16 embedder never reads float32 rows, nor the other way round); ``auto`` is
    one of the two; an unknown precision is refused. ~2 s (a second model load)."""
    from audit.core.errors import AnonauditError

    texts = ["The applicant was born in 1962 in Zagreb.", "The Court held a hearing on 3 May 2001.",
             "Mr K. lodged a complaint with the Ministry of the Interior in Warsaw."]
    path = tmp_path / "emb.sqlite"
    fp32 = Embedder("minilm", cache=path)
    bf16 = Embedder("minilm", cache=path, precision="bf16")
    a, b = fp32.encode(texts), bf16.encode(texts)
    assert bf16.stats == {"hits": 0, "misses": 3} and bf16.identity == fp32.identity + ":bf16"
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert (a * b).sum(axis=1).min() > 0.999 and not np.array_equal(a, b)
    assert np.array_equal(a, minilm.encode(texts))
    assert Embedder("minilm", cache=False, precision="auto").precision in ("fp32", "bf16")
    with pytest.raises(AnonauditError, match="precision"):
        Embedder("minilm", cache=False, precision="fp16")
