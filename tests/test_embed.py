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


def test_an_embedder_whose_executor_computes_the_vectors_loads_no_model_itself(tmp_path, minilm, monkeypatch):
    """On a cluster the driver only reads and writes the vector cache: the model is loaded by
    the workers, not by the driver as well (seconds and the model's memory on a head node)."""
    import audit.models.embed as embed
    from audit.core.executor import LocalExecutor

    loads = []
    real_load = embed._load
    monkeypatch.setattr(embed, "_load", lambda *a: loads.append(a) or real_load(*a))
    texts = ["one sentence", "another one", "one sentence"]
    a = Embedder("minilm", cache=tmp_path / "emb.sqlite", executor=LocalExecutor())
    assert loads == []
    got = a.encode(texts)
    assert len(loads) == 1 and a.dim == 384  # the worker's model; the dimension from its vectors
    assert np.array_equal(got, minilm.encode(texts))
    b = Embedder("minilm", cache=tmp_path / "emb.sqlite", executor=LocalExecutor())
    assert np.array_equal(b.encode(texts[:2]), got[:2]) and b.encode([]).shape == (0, 384)
    assert len(loads) == 1 and b.stats == {"hits": 2, "misses": 0}  # all from the cache: nothing loaded
    c = Embedder("minilm", executor=LocalExecutor())
    assert c.encode([]).shape == (0, 384) and len(loads) == 2  # no vector to tell the dimension: the model does
