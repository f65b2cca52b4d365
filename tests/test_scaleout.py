"""Scale-out (issue #21): the executor abstraction, the phrase index built through it and in
hash-partitioned shards, the executor in the audit spec, the command line and the provenance.

Non-slow tests use :class:`PicklingExecutor`, a local executor that sends every worker and
group through pickle as Ray would, so the distributed code paths run in CI without a cluster.
The tests marked slow start a real local Ray (2 CPUs, 500 MB object store) once per module and
check that an audit on it gives the results of the local executor.
"""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attackers.phrase_search import PhraseSearchAttack
from audit.ngrams import NgramIndex
from audit.ngrams.shards import ShardedNgramIndex, build_sharded
from audit.ngrams.storage import ARRAYS
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.errors import AnonauditError
from audit.runtime.executor import LocalExecutor
from audit.pipeline.executors import _pack, _unpack
from anonaudit.demo.population import write as write_demo
from audit.models.embed import Embedder
from audit.models.resources import Resources

ROOT = Path(__file__).resolve().parents[1]


class PicklingExecutor(LocalExecutor):
    """Runs here, but as a distributed executor would: the worker and every group are pickled
    and unpickled first, and components take their distributed paths."""

    kind = "pickling"
    distributed = True

    def __init__(self, threads: int | None = None):
        super().__init__()
        self.threads = threads

    def _run(self, worker, groups, **kw):
        worker = pickle.loads(pickle.dumps(worker))
        if self.threads and hasattr(worker, "threads"):  # as a Ray actor with this many CPUs is told
            worker.threads = self.threads
        out = []
        for o in super()._run(worker, [pickle.loads(pickle.dumps(g)) for g in groups], **kw):
            packed, raw = _pack(list(o))  # as the Ray executor sends a group's outputs back
            raw = np.array(raw)
            raw.flags.writeable = False  # read in place from the cluster's memory
            out.append(_unpack(pickle.loads(pickle.dumps(packed)), raw, not getattr(worker, "readonly_outputs", False)))
        return out


def _texts(n: int = 1500, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(250)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(0, 50))) + ". Then " +
            " ".join(rng.choice(words) for _ in range(4)) for _ in range(n)]


def _same_index(a: NgramIndex, b: NgramIndex, probes: list[str]) -> None:
    assert a.config["n_ngrams"] == b.config["n_ngrams"] and a.config["n_postings"] == b.config["n_postings"]
    for t in probes:
        x, y = a.ngrams(t), b.ngrams(t)
        assert np.array_equal(x.df, y.df)
        sel = np.flatnonzero(x.df > 0)
        px, ox = x.gather_postings(a, sel)
        py, oy = y.gather_postings(b, sel)
        assert np.array_equal(px, py) and np.array_equal(ox, oy)
        for i in sel[:3]:
            assert x.rare(a, i) == y.rare(b, i)


# --------------------------------------------------------------------------- the executor


def test_local_executor_maps_exact_groups_in_order_and_sets_up_once():
    calls = []

    class Worker:
        def setup(self):
            calls.append("setup")

        def __call__(self, group):
            calls.append(len(group))
            return [x * 2 for x in group]

    ex = LocalExecutor()
    assert ex.map(Worker(), range(10), group=4, label="double") == [x * 2 for x in range(10)]
    assert calls == ["setup", 4, 4, 2]
    assert ex.timings["double"]["items"] == 10 and ex.map(Worker(), [], group=4) == []
    with pytest.raises(RuntimeError, match="returned 1 outputs for 2 items"):
        ex.map(lambda g: g[:1], [1, 2], group=2)


def test_outputs_travel_back_with_their_large_arrays_out_of_band():
    """A group's outputs come back equal, their large arrays beside the pickle (not copied into
    it); read-only views of what arrived only for a worker that says it takes them."""
    big, small = np.arange(100_000, dtype=np.uint64), np.arange(10, dtype=np.int32)
    outputs = [(3, big, {"small": small, "text": "x"}), None, [big[::2].copy(), big[:5]]]
    packed, raw = _pack(outputs)
    assert len(packed) < 2_000 and raw.nbytes == big.nbytes + big[::2].nbytes  # big[:5] is small
    raw = np.array(raw)
    raw.flags.writeable = False
    for copy in (True, False):
        back = _unpack(packed, raw, copy)
        assert back[0][0] == 3 and back[0][2]["text"] == "x" and back[1] is None
        for a, b in ((back[0][1], big), (back[0][2]["small"], small), (back[2][0], big[::2]), (back[2][1], big[:5])):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert back[0][1].flags.writeable is copy and back[0][2]["small"].flags.writeable
    empty = _pack([1, "two"])
    assert len(empty[1]) == 0 and _unpack(*empty, True) == [1, "two"]


# --------------------------------------------------------------------------- the index


@pytest.mark.parametrize("threads", [None, 3])  # 3: each chunk cut into runs extracted on a worker's threads
@pytest.mark.parametrize("min_hash_bits", [52, 56])  # 56: buckets (t_bits > 0) on a small collection
def test_index_built_by_workers_is_the_local_index(min_hash_bits, threads):
    texts = _texts()
    local = NgramIndex.build(texts, min_hash_bits=min_hash_bits, chunk_chars=15_000)
    remote = NgramIndex.build(texts, min_hash_bits=min_hash_bits, chunk_chars=15_000,
                              executor=PicklingExecutor(threads))
    for name in ARRAYS:
        assert np.array_equal(getattr(local, name), getattr(remote, name))
    assert local.config["n_tokens"] == remote.config["n_tokens"]


@pytest.mark.parametrize("threads", [None, 2])
def test_index_built_by_workers_with_huge_documents_is_the_local_index(monkeypatch, threads):
    """A document over the window size is a chunk of its own, read in windows, whose keys come
    bucket by bucket already: a worker puts them in their place in its group's array as they are."""
    import audit.ngrams.windows as windows

    monkeypatch.setattr(windows, "WINDOW_CHARS", 900)
    texts = _texts(400)
    texts[10], texts[11], texts[300] = " ".join(texts[:40]), " ".join(texts[40:60]), " ".join(texts[100:150])
    assert min(len(texts[i]) for i in (10, 11, 300)) > 900
    from audit.ngrams.build import chunk_bounds, _chunks_per_group

    assert _chunks_per_group(len(chunk_bounds(texts, 1_500))) == 2  # groups of two chunks, a huge one among them
    local = NgramIndex.build(texts, chunk_chars=1_500)
    remote = NgramIndex.build(texts, chunk_chars=1_500, executor=PicklingExecutor(threads))
    for name in ARRAYS:
        assert np.array_equal(getattr(local, name), getattr(remote, name))


def test_driver_loads_its_layout_kernel_beside_the_workers_with_the_types_it_lays_out_with(monkeypatch):
    """On a cluster this process only lays the buckets out; its kernel loads while the workers
    extract (numba's start is about a second in a fresh process), and that load must be the
    very overload the layout then calls, not one for other argument types."""
    from audit.ngrams import build
    from audit.ngrams.kernels import kernels

    load, loads = build.load_layout_kernel, []
    monkeypatch.setattr(build, "load_layout_kernel", lambda: loads.append(load()))
    load()
    NgramIndex.build(_texts(200), executor=PicklingExecutor())
    assert loads == [None]  # loaded on the cluster's path
    assert len(kernels().lay_out.signatures) == 1  # what it loaded is what the layout called


def test_a_fresh_process_loads_every_kernel_from_the_disk_cache(tmp_path):
    """Every Ray worker and every new run is a fresh process: the kernels it calls (build,
    tokeniser, lookups, minimal sets) must come from numba's disk cache, not be compiled again
    (about 2 s a process when a kernel's cache entry never matched)."""
    code = ("import json, numpy as np; from audit.ngrams import NgramIndex;"
            "from audit.ngrams.kernels import kernels;"
            "from audit.ngrams.query import minimal_set;"
            "idx = NgramIndex.build(['Dr. Smith sat on the mat. He left.', 'A dog ran. Mr. Jones came.']);"
            "tns = list(idx.iter_ngrams('Dr. Smith sat on the mat. A dog ran.'));"
            "[idx.lookup(t.hash) for t in tns]; [minimal_set(t, np.arange(min(3, len(t.hash)))) for t in tns];"
            "k = kernels();"
            "print(json.dumps({n: sum(getattr(k, n).stats.cache_misses.values()) for n in vars(k)}))")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env=env) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    first, second = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert set(first) == {"scan_tokens", "doc_pairs", "by_bucket", "lay_out", "find", "keep_free"}
    assert all(first.values())  # compiled into the empty cache folder...
    assert second == dict.fromkeys(first, 0)  # ...and loaded from it by the next process


@pytest.mark.parametrize("min_hash_bits", [52, 56])
@pytest.mark.parametrize("shards", [1, 2, 16])
def test_sharded_index_gives_the_single_index_answers(tmp_path, shards, min_hash_bits):
    texts = _texts()
    single = NgramIndex.build(texts, min_hash_bits=min_hash_bits)
    sharded = build_sharded(tmp_path / "idx", texts, shards=shards, min_hash_bits=min_hash_bits,
                            chunk_chars=15_000, executor=PicklingExecutor())
    assert isinstance(sharded, ShardedNgramIndex) and not (tmp_path / "idx" / "spill").exists()
    assert sum(sharded.config["shard_ngrams"]) == single.config["n_ngrams"]
    probes = texts[:150] + ["w1 w2 nothing like this", "", "Then w3 w4."]
    _same_index(single, sharded, probes)
    reopened = ShardedNgramIndex.load(tmp_path / "idx")
    _same_index(single, reopened, probes[:20])
    assert single.postings("w7 w8") .tolist() == reopened.postings("w7 w8").tolist()
    assert pickle.loads(pickle.dumps(reopened)).document_frequency("w9") == single.document_frequency("w9")


def test_sharded_index_refuses_bad_shard_counts_and_broken_shards(tmp_path):
    with pytest.raises(AnonauditError, match="power of two"):
        build_sharded(tmp_path / "x", ["a b"], shards=3)
    with pytest.raises(AnonauditError, match="power of two"):
        PhraseSearchAttack(shards=6)
    with pytest.raises(AnonauditError, match="512 shards need at least 41 hash bits; this index keeps 40"):
        build_sharded(tmp_path / "z", ["a b"], shards=512, min_hash_bits=40)
    idx = build_sharded(tmp_path / "y", _texts(200), shards=2)
    np.save(tmp_path / "y" / "shard-0001" / "keys.npy", np.zeros(3, dtype=np.uint64))
    broken = ShardedNgramIndex.load(tmp_path / "y")
    with pytest.raises(AnonauditError, match="rebuild it"):
        broken.lookup(np.array([2**63 + 5, 5], dtype=np.uint64))
    assert idx.n_docs == 200


def _scenario(n: int = 60, seed: int = 3) -> tuple[Scenario, Release]:
    rng = random.Random(seed)
    words = [f"v{i}" for i in range(15)]
    originals = Corpus([Document(f"d{i}", " ".join(rng.choice(words) for _ in range(40)) + ".", subject=f"p{i}")
                        for i in range(n)], name="originals")
    released = [Document(d.id, " ".join(w if rng.random() > 0.75 else "[X]" for w in d.text.split()),
                         subject=d.subject) for d in originals]
    release = Release("masked", Corpus(released, name="masked"))
    return Scenario(originals=originals, releases=(release,)), release


@pytest.fixture()
def doc_groups_of_4(monkeypatch):
    """Phrase search's documents in groups of 4, so that a small release makes several groups
    and goes to the workers (a release of one group is attacked here)."""
    import attackers.phrase_search.attack as attack_module

    monkeypatch.setattr(attack_module, "DOC_GROUP", 4)


def test_phrase_search_on_workers_and_in_shards_finds_what_it_finds_locally(tmp_path, doc_groups_of_4):
    scenario, release = _scenario()

    def run(executor, **kw):
        with Resources(executor=executor) as res:
            attack = PhraseSearchAttack(arity=2, **kw).use(res)
            out = [r.to_dict() for r in attack.fit(scenario).evaluate(scenario, release)]
            attack.close()
            out[0]["details"]["index"].pop("dir")  # where it was kept, not what it found
            return out

    local = run(LocalExecutor())
    assert 0 < local[0]["value"] < 1 and local[0]["details"]["linked_by_combination_only"]  # something to compare
    assert run(PicklingExecutor()) == local
    assert run(PicklingExecutor(), shards=4) == local
    assert run(LocalExecutor(), shards=8, index_dir=str(tmp_path / "idx")) == local
    assert (tmp_path / "idx" / "shard-0007").is_dir()
    assert run(LocalExecutor(), shards=8, index_dir=str(tmp_path / "idx")) == local  # reused from the folder


@pytest.mark.parametrize("against", ["originals", "background"])
def test_phrase_search_workers_get_only_their_documents_originals(monkeypatch, against, doc_groups_of_4):
    """A worker gets the fitted attack without the collection's originals (a million texts to
    every worker) and each document with the originals of its truth; it finds what a local run
    finds, against the background too (a person's several public texts as one), and for
    documents read in windows."""
    import audit.ngrams.windows as windows

    monkeypatch.setattr(windows, "WINDOW_CHARS", 150)  # about half the documents are read in windows
    scenario, release = _scenario()
    if against == "background":
        rng = random.Random(5)
        extra = [Document(f"x{i}", " ".join(rng.choice(["v1", "v2", "v16", "v17"]) for _ in range(30)) + ".",
                          subject=f"p{i}") for i in range(0, 60, 3)]
        background = Corpus([*(Document(f"b{d.id}", d.text, subject=d.subject) for d in scenario.originals), *extra],
                            name="background")
        scenario = Scenario(background=background, releases=(release,))
    sent = []

    class Recording(PicklingExecutor):
        def _run(self, worker, groups, **kw):
            if type(worker).__name__ == "DocumentWorker":  # not the index's workers
                sent.append(pickle.dumps(worker))
            return super()._run(worker, groups, **kw)

    def run(executor):
        with Resources(executor=executor) as res:
            attack = PhraseSearchAttack(arity=2, against=against).use(res)
            out = [r.to_dict() for r in attack.fit(scenario).evaluate(scenario, release)]
            return out, attack

    local, attack = run(LocalExecutor())
    assert any(len(d.text) > 150 for d in release.corpus) and local[0]["value"] > 0
    assert run(Recording())[0] == local
    (worker,) = sent
    texts = [d.text for d in attack._originals]
    assert len(texts) == 60 and not any(t.encode() in worker for t in texts)
    import attackers.phrase_search.attack as attack_module

    monkeypatch.setattr(attack_module, "DOC_GROUP", 60)  # the release is one group: attacked here
    assert run(Recording())[0] == local and len(sent) == 1


# --------------------------------------------------------------------------- spec, command line, provenance


def _spec(demo: Path, **extra) -> dict:
    return {"title": "scale", "seed": 0, "out": "out", "originals": "data/originals.jsonl",
            "releases": [{"name": "labels", "path": "data/releases/labels.jsonl"}],
            "attacks": [{"name": "phrase_search", "params": {"arity": 2}}], **extra}


@pytest.fixture()
def demo(tmp_path):
    write_demo(tmp_path / "data", n=8, seed=2)
    return tmp_path


def test_spec_executor_is_validated_with_every_problem(demo):
    from audit.pipeline.spec import parse_spec

    spec = parse_spec(_spec(demo), base=demo)
    assert spec.executor.kind == "local"
    pytest.importorskip("ray", reason="the ray executor's spec check needs Ray (pip install 'anonaudit[ray]')")
    spec = parse_spec(_spec(demo, executor={"kind": "ray", "address": "ray://head:10001", "workers": 3}), base=demo)
    assert (spec.executor.kind, spec.executor.address, spec.executor.workers) == ("ray", "ray://head:10001", 3)
    assert parse_spec(_spec(demo, executor="ray"), base=demo).executor.address == "auto"
    with pytest.raises(AnonauditError) as err:
        parse_spec(_spec(demo, executor={"kind": "spark", "workers": 0, "nodes": 2}), base=demo)
    msg = str(err.value)
    assert "executor.kind" in msg and "executor.workers" in msg and "executor.nodes" in msg


def test_ray_executor_without_ray_installed_says_how_to_install_it(demo, monkeypatch):
    import importlib.util

    from audit.pipeline.spec import parse_spec

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(AnonauditError, match=r"needs Ray: pip install 'anonaudit\[ray\]'"):
        parse_spec(_spec(demo, executor="ray"), base=demo)
    assert parse_spec(_spec(demo, executor="local"), base=demo).executor.kind == "local"


def test_local_run_records_the_executor_and_imports_no_ray(demo):
    (demo / "audit.yaml").write_text(json.dumps(_spec(demo)))
    code = ("import sys, json; from audit.pipeline.runner import Audit, load_spec;"
            f"o = Audit(load_spec({str(demo / 'audit.yaml')!r}), progress=False, echo=None).run();"
            "print(json.dumps(o.results.provenance['executor'])); print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    prov, imported = out.stdout.strip().splitlines()[-2:]
    assert json.loads(prov)["kind"] == "local" and json.loads(prov)["workers"] == 1
    assert json.loads(prov)["stages"] == {}
    assert imported == "False"


def test_unreachable_ray_address_is_a_clear_error(demo):
    pytest.importorskip("ray", reason="the ray executor needs Ray (pip install 'anonaudit[ray]')")
    from click.testing import CliRunner

    from anonaudit.cli import main

    (demo / "audit.yaml").write_text(json.dumps(_spec(demo)))
    res = CliRunner().invoke(main, ["run", str(demo / "audit.yaml"), "--ray-address", "127.0.0.1:9",
                                    "--no-report"])
    assert res.exit_code == 2, res.output
    assert "cannot reach the Ray cluster at 127.0.0.1:9" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["run", str(demo / "audit.yaml"), "--ray-address", "nonsense", "--no-report"])
    assert res.exit_code == 2 and "HOST:PORT" in res.output
    assert not (demo / "out" / "results.json").exists()  # nothing ran


def test_a_local_ray_that_does_not_start_is_a_clear_error(monkeypatch):
    """Ray raises a bare Exception when its node times out starting (a loaded machine): the user
    gets one line naming the problem, not Ray's traceback."""
    ray = pytest.importorskip("ray", reason="the ray executor needs Ray (pip install 'anonaudit[ray]')")
    from audit.pipeline.executors import RayExecutor

    def timed_out(*a, **kw):
        raise Exception("The current node timed out during startup. This could happen because ...")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", timed_out)
    with pytest.raises(AnonauditError, match="could not start a Ray on this machine: The current node timed out"):
        RayExecutor("local").start()
    with pytest.raises(AnonauditError, match="cannot connect to the Ray cluster at auto: The current node"):
        RayExecutor("auto").start()


def test_a_gpu_worker_asks_only_for_cpus_a_gpu_node_has(monkeypatch):
    """A stage's workers share the CPUs of the nodes they can run on: a worker that needs a GPU
    (TRIR's training) must not ask for the CPUs of a larger node without one, or Ray could never
    place it and the run would wait forever."""
    from types import SimpleNamespace

    from audit.pipeline.executors import RayExecutor

    nodes = [{"Alive": True, "Resources": {"CPU": 64.0}}, {"Alive": True, "Resources": {"CPU": 16.0, "GPU": 1.0}},
             {"Alive": False, "Resources": {"CPU": 128.0, "GPU": 8.0}}]
    queries = []
    ex = RayExecutor("auto")
    ex._ray = SimpleNamespace(nodes=lambda: queries.append(1) or nodes, __version__="x")
    monkeypatch.setattr(ex, "start", lambda: ex)
    assert ex.cpus_per_worker(1, 1.0, num_gpus=1.0) == 16.0  # the GPU node's, not the 64 of the other
    assert ex.cpus_per_worker(1, 1.0) == 64.0  # a CPU worker alone: the largest node's
    assert ex.cpus_per_worker(8, 1.0) == 10.0  # 80 CPUs shared by 8
    assert ex.cpus_per_worker(100, 2.0) == 2.0  # never below what the stage needs
    # the provenance's cluster: the live nodes only, from one query of Ray's state
    queries.clear()
    assert ex.info() == {"kind": "ray", "address": "auto", "nodes": 2, "cpus": 80, "gpus": 1, "workers": 80,
                         "ray": "x"}
    assert len(queries) == 1


def _dense_links(executor, approx_threshold: int, n_queries: int = 500):
    """The dense linker's links for ``n_queries`` people's 3 aux claims each (500: 1,500 claims, two
    search groups) over 900 claims, with ``executor`` (None: searched here)."""
    from attackers.claim_linker import DenseLinker
    from tests.test_claim_linker import BagOfWords, claims_of

    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(300)]
    docs, claims = [], []
    for d in range(300):
        sentences = [" ".join(rng.choices(vocab, k=6)) for _ in range(3)]
        docs.append(Document(f"d{d}", " ".join(sentences)))
        claims.append(claims_of(f"d{d}", sentences))
    queries = [[" ".join(rng.choices(vocab, k=5)) for _ in range(3)] for _ in range(n_queries)]
    linker = DenseLinker(BagOfWords(dim=256), approx_threshold=approx_threshold, executor=executor)
    linker.index(docs, claims)
    return linker.link(queries), linker.info["index"]


@pytest.mark.parametrize("approx_threshold", [10**6, 100])
def test_faiss_search_on_workers_finds_what_it_finds_here(approx_threshold):
    here, kind = _dense_links(None, approx_threshold)
    ex = PicklingExecutor(threads=2)
    there, _ = _dense_links(ex, approx_threshold)
    assert kind == ("flat" if approx_threshold > 900 else "hnsw")
    assert there == here and any(link.doc >= 0 for link in here)
    assert ex.timings["claim linker: faiss search"]["items"] == 1500  # two groups: on the workers


def test_faiss_search_of_one_group_stays_here():
    """300 people's 900 aux claims make one search group: searched here, where the index is,
    rather than on a cluster stage started for milliseconds of work; the same links."""
    ex = PicklingExecutor(threads=2)
    here, _ = _dense_links(None, 10**6, n_queries=300)
    assert _dense_links(ex, 10**6, n_queries=300)[0] == here
    assert "claim linker: faiss search" not in ex.timings


# --------------------------------------------------------------------------- on a real local Ray (slow)


# --------------------------------------------------------------------------- information content


def _ic_corpus() -> Corpus:
    from tests.test_utility import COURT

    texts = [COURT, "The court in Istanbul dismissed the application on 3 May.",
             "An application was lodged against Turkey.", "", COURT.replace("Turkey", "the court")] * 3
    return Corpus([Document(f"d{i}", t) for i, t in enumerate(texts)], name="originals")


def _ic_models(root: Path) -> dict[str, Path]:
    """Tiny model folders the estimators load by path: a causal LM (transformers) and a
    masked LM, both with the same word-piece tokenizer."""
    import torch
    from transformers import BertTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from tests.test_utility import _tiny_mlm

    masked, causal = root / "masked", root / "causal"
    masked.mkdir()
    _tiny_mlm(masked)
    tok = BertTokenizerFast.from_pretrained(masked)
    tok.bos_token = "[CLS]"
    tok.save_pretrained(causal)
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=32, max_position_embeddings=128)
    Qwen2ForCausalLM(cfg).save_pretrained(causal)
    return {"masked": masked, "causal": causal}


@pytest.mark.parametrize("kind", ["causal", "masked"])
def test_information_content_on_workers_is_what_this_process_computes(tmp_path, kind, monkeypatch):
    """The scorer of TPI and TPS on a distributed executor: the documents go to the workers,
    round after round, each worker loading the model once, and come back with the values, the
    estimator's identity (one pass, as here) and the cache of a local run."""
    from audit.metrics import ic as ic_module
    from audit.metrics.ic import CausalIC, ICCache, MaskedIC, corpus_ic
    from audit.metrics.terms import TermExtractor
    from audit.models.nlp import Spacy
    from audit.models.specs import load_llm

    folder = str(_ic_models(tmp_path)[kind])
    corpus, extract = _ic_corpus(), TermExtractor(Spacy())
    ex = PicklingExecutor(threads=1)
    with Resources(executor=ex, llm_cache_path=tmp_path / "llm.sqlite") as res:
        if kind == "causal":
            here_est = CausalIC(load_llm(folder, cache=False), context_tokens=16)
            there_est = CausalIC(res.llm(folder), context_tokens=16)
        else:
            here_est, there_est = MaskedIC(folder, every=3), MaskedIC(folder, every=3)
        assert there_est.identity == here_est.identity and there_est.worker() is not None
        here = corpus_ic(corpus, here_est, extract)
        cache = ICCache(there_est.identity, tmp_path / "ic")
        monkeypatch.setattr(ic_module, "IC_ROUND", 4)  # 15 documents: 4 rounds, each saved
        there = corpus_ic(corpus, there_est, extract, cache=cache, executor=ex)
    stage = ex.timings["information content"]
    assert stage["calls"] == 4 and stage["items"] == sum(1 for d in corpus if d.text)
    assert there.keys() == here.keys()
    for doc_id, (terms, ic) in here.items():
        assert there[doc_id][0] == terms and np.array_equal(there[doc_id][1], ic)
    # saved as it came back: a later run reads every document from the cache
    again = ICCache(there_est.identity, tmp_path / "ic")
    assert all(again.get(d.text) is not None for d in corpus)


@pytest.fixture(scope="module")
def ray_executor():
    pytest.importorskip("ray", reason="the Ray tests need Ray (pip install 'anonaudit[ray]')")
    from audit.pipeline.executors import RayExecutor

    ex = RayExecutor("local", num_cpus=2, object_store_memory=500 * 2**20, workers=2).start()
    yield ex
    ex.close()


class _Square:
    def setup(self):
        self.ready = True

    def __call__(self, group):
        assert self.ready
        return [(x * x, __import__("attackers").__file__) for x in group]


class _Threads:
    threads = None  # set by the executor: the CPUs this worker has

    def __call__(self, group):
        return [self.threads for _ in group]


class _Dies:
    def __call__(self, group):
        import os

        os._exit(3)


class _LightSquare(_Square):
    light_setup = True  # runs as Ray tasks, setup() before every group
    threads = None

    def __call__(self, group):
        return [(x, self.threads) for x, _ in super().__call__(group)]


class _LightDies(_Dies):
    light_setup = True


@pytest.mark.slow
def test_ray_executor_maps_in_order_and_says_what_it_ran_on(ray_executor):
    out = ray_executor.map(_Square(), list(range(200)), group=7, label="square")
    assert [x for x, _ in out] == [x * x for x in range(200)]
    assert {Path(f).resolve().parents[1] for _, f in out} == {ROOT}  # the workers run this checkout
    info = ray_executor.info()
    assert (info["kind"], info["nodes"], info["cpus"], info["workers"]) == ("ray", 1, 2, 2)
    # a worker's threads are its share of the cluster: one group takes one worker and both CPUs
    assert ray_executor.map(_Threads(), [0], group=1) == [2]
    assert ray_executor.map(_Threads(), list(range(6)), group=1) == [1] * 6


@pytest.mark.slow
def test_ray_runs_a_worker_with_light_setup_as_tasks_in_order(ray_executor):
    out = ray_executor.map(_LightSquare(), list(range(50)), group=3, label="light square")
    assert out == [(x * x, 1) for x in range(50)]  # set up for every group, two workers of one CPU
    assert ray_executor.map(_LightSquare(), [4], group=1) == [(16, 2)]


@pytest.mark.slow
def test_ray_builds_the_same_index_single_and_sharded(ray_executor, tmp_path):
    texts = _texts(800)
    local = NgramIndex.build(texts, chunk_chars=10_000, min_hash_bits=56)
    remote = NgramIndex.build(texts, chunk_chars=10_000, min_hash_bits=56, executor=ray_executor)
    for name in ARRAYS:
        assert np.array_equal(getattr(local, name), getattr(remote, name))
    sharded = build_sharded(tmp_path / "idx", texts, shards=4, chunk_chars=10_000, min_hash_bits=56,
                            executor=ray_executor)
    _same_index(local, sharded, texts[:50])


@pytest.mark.slow
def test_audit_on_ray_has_the_results_of_a_local_audit(ray_executor, demo, monkeypatch, doc_groups_of_4):
    from audit.pipeline.runner import Audit
    from audit.pipeline.spec import parse_spec

    data = _spec(demo, metrics=["similarity"])
    data["attacks"] = [{"name": "phrase_search", "params": {"arity": 2, "shards": 2}}]
    # steps of 2 texts: the demo's few embed in several groups, which go to the workers (one
    # step would be embedded here); the local run embeds the same steps
    monkeypatch.setattr(Embedder, "STEP", 2)
    # each run with caches of its own, so the Ray run's vectors are computed on its workers
    monkeypatch.setenv("ANONAUDIT_HOME", str(demo / "home-ray"))
    on_ray = Audit(parse_spec({**data, "out": "ray"}, base=demo), progress=False, echo=None,
                   executor=ray_executor).run()
    monkeypatch.setenv("ANONAUDIT_HOME", str(demo / "home-local"))
    local = Audit(parse_spec({**data, "out": "local"}, base=demo), progress=False, echo=None).run()

    def body(o):
        return json.dumps(json.loads(o.path.read_text())["results"], sort_keys=True)

    assert body(local) == body(on_ray)
    prov = on_ray.results.provenance["executor"]
    assert (prov["kind"], prov["nodes"], prov["cpus"]) == ("ray", 1, 2)
    assert {"sharded index: n-grams", "phrase search: documents", "embedding"} <= set(prov["stages"])
    assert local.results.provenance["executor"]["kind"] == "local"


@pytest.mark.slow
def test_faiss_search_on_ray_finds_what_it_finds_here(ray_executor):
    here, _ = _dense_links(None, 10**6)
    there, _ = _dense_links(ray_executor, 10**6)
    assert there == here
    assert ray_executor.timings["claim linker: faiss search"]["items"] == 1500


#: How far a 2-worker training's loss per epoch may be from the local one's, relative: measured
#: 0.10% and 0.002% (epochs 1 and 2; 2026-12-08, 2-core AMD EPYC, bf16), so 1% is ten times that.
TWO_WORKER_LOSS_TOLERANCE = 0.01


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_trir_trains_data_parallel_on_ray_train_and_a_killed_training_resumes(ray_executor, tmp_path, monkeypatch):
    """Issues 48 and 71: with a Ray executor, TRIR fine-tunes on Ray Train, checkpointing each epoch
    to the storage the user names; a training whose worker dies after epoch 1 is restarted by Ray
    Train from that checkpoint. On one worker, killed and resumed, it trains the local attacker bit
    for bit (same curve, same weights). On 2 workers of one thread it walks the local epochs (same
    windows, same steps) to figures within a measured tolerance (each worker computes its slice of
    every batch, padded on its own, its dropout drawn on its slice, the gradients summed across
    workers: another draw, not bit-identical), and a killed 2-worker training resumes to the
    uninterrupted one's bits (every worker's random state is checkpointed). A tiny BERT keeps it short:
    107 s (3 Ray Train trainings and a local one; 2026-12-08, 2-core AMD EPYC, heavy lock, load 1.8)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from attackers.trir import TRIRAttack, resolve_base
    from audit.pipeline.ray_train import FAIL_AFTER_EPOCH_ENV
    from anonaudit.demo.population import generate

    base = tmp_path / "tiny-bert"
    tok = AutoTokenizer.from_pretrained(resolve_base(None))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(base)
    tok.save_pretrained(base)
    data = generate(5, seed=1, background_per_person=2, extra_people=1)
    scenario = Scenario(originals=data.originals, background=data.background, dev=data.releases["suppressed"])
    tiny = dict(base=str(base), budget="fast", augment_ner=False, window=32, overlap=8, epochs=2, patience=5,
                batch_size=8, learning_rate=1e-3, seed=0, num_threads=1, progress=False)

    def history(attack):  # the epochs' losses and dev accuracies, not their timings
        return [{k: v for k, v in epoch.items() if k != "seconds"} for epoch in attack.trained_.info["history"]]

    def weights(attack):
        return attack.trained_.model.state_dict()

    def same(a, b):
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    local = TRIRAttack(cache_dir=str(tmp_path / "local"), **tiny).fit(scenario)
    with Resources(executor=ray_executor) as res:
        # one worker, killed after epoch 1 and resumed by Ray Train: the local attacker, bit for bit
        monkeypatch.setattr(ray_executor, "workers", 1)
        monkeypatch.setenv(FAIL_AFTER_EPOCH_ENV, f"1:{tmp_path / 'failed-once-1'}")
        one = TRIRAttack(cache_dir=str(tmp_path / "one"), **tiny).use(res).fit(scenario)
        assert (tmp_path / "failed-once-1").is_file() and one.trained_.info["resumed_from_epoch"] == 1
        assert one.trained_.info["ray_train"]["workers"] == 1
        assert history(one) == history(local) and same(weights(one), weights(local))

        monkeypatch.setattr(ray_executor, "workers", 2)
        monkeypatch.delenv(FAIL_AFTER_EPOCH_ENV)
        whole = TRIRAttack(cache_dir=str(tmp_path / "a"), **tiny).use(res).fit(scenario)
        info = whole.trained_.info
        assert info["ray_train"]["workers"] == 2 and info["ray_train"]["threads_per_worker"] == 1
        assert len(info["history"]) == 2 and all("dev_accuracy" in h for h in info["history"])
        assert info["cache_key"] != local.trained_.info["cache_key"]  # a local run's attacker is kept apart
        assert not (tmp_path / "a" / "checkpoints").exists()  # the default storage goes once the attacker is saved
        # 2 workers against the local training: the same epochs, windows and passes; the losses within
        # TOLERANCE of the local ones
        for mine, theirs in zip(history(whole), history(local), strict=True):
            assert (mine["epoch"], mine["windows"], mine["passes"]) == (theirs["epoch"], theirs["windows"],
                                                                         theirs["passes"])
            assert abs(mine["loss"] - theirs["loss"]) <= TWO_WORKER_LOSS_TOLERANCE * theirs["loss"], (mine, theirs)

        monkeypatch.setenv(FAIL_AFTER_EPOCH_ENV, f"1:{tmp_path / 'failed-once'}")
        storage = tmp_path / "storage"
        killed = TRIRAttack(cache_dir=str(tmp_path / "b"), checkpoint_dir=str(storage), **tiny).use(res).fit(scenario)
        assert (tmp_path / "failed-once").is_file()  # worker 0 died after epoch 1 ...
        assert killed.trained_.info["resumed_from_epoch"] == 1  # ... and the training resumed from its checkpoint
        assert any(p.name.startswith("checkpoint") for p in storage.rglob("*"))  # the storage the user named
        assert history(killed) == history(whole) and same(weights(killed), weights(whole))
        # the arithmetic the workers agreed on is in the checkpoint (a resume keeps it) and the record
        from attackers.trir.encoder import native_bf16

        agreed = "bf16" if native_bf16("cpu") else "fp32"
        (saved,) = [p for p in storage.rglob("state.pt") if "checkpoint" in str(p)]
        assert torch.load(saved, weights_only=True)["train_precision"] == agreed
        assert killed.trained_.info["settings"]["train_precision"] == agreed
        # issue 71: the checkpoint Ray Train kept is in the one format a local training writes (sealed,
        # keyed, naming where it trained), read by the same reader; a local training refuses it
        from audit.runtime.checkpoints import read_state

        key = killed.trained_.info["cache_key"]
        kept = read_state(saved.parent, key=key, trainer="ray-train:2x1")
        assert kept is not None and kept["train_precision"] == agreed and "final_model" in kept
        with pytest.raises(AnonauditError, match="written by a training on ray-train:2x1 and this one trains on local"):
            read_state(saved.parent, key=key, trainer="local")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["causal", "masked"])
def test_information_content_on_ray_is_what_the_run_computes(ray_executor, tmp_path, kind):
    """On a local Ray, each worker loads the scorer (a causal LM folder through the run's LLM
    layer, or a masked LM) and gives the run's own values; the run's process loads no causal
    scorer of its own for that. (The embedded 0.5B scorer takes
    1.5 min to load through transformers here, twice in such a test: tiny models instead.)"""
    from audit.metrics.ic import CausalIC, MaskedIC, corpus_ic
    from audit.metrics.terms import TermExtractor
    from audit.models.nlp import Spacy

    folder = str(_ic_models(tmp_path)[kind])
    corpus, extract = _ic_corpus(), TermExtractor(Spacy())
    with Resources(executor=ray_executor, llm_cache_path=tmp_path / "llm.sqlite") as res:
        est = CausalIC(res.llm(folder), context_tokens=16) if kind == "causal" else MaskedIC(folder, every=3)
        assert est.worker() is not None and (kind == "masked" or est.uses_one_pass)
        there = corpus_ic(corpus, est, extract, executor=ray_executor)
        if kind == "causal":  # the workers scored: the run never loaded its own copy
            assert not est.llm.backend.local.loaded
        here = corpus_ic(corpus, est, extract)  # the run's own copy of the model
    assert ray_executor.timings["information content"]["items"] >= sum(1 for d in corpus if d.text)
    for doc_id, (terms, ic) in here.items():
        assert there[doc_id][0] == terms and np.array_equal(there[doc_id][1], ic)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_worker_that_dies_is_a_clear_error(ray_executor, monkeypatch):
    monkeypatch.setattr("audit.pipeline.executors.MAX_RETRIES", 0)  # the same error, without two restarts first
    for worker in (_Dies(), _LightDies()):  # an actor's process, a task's
        with pytest.raises(AnonauditError, match="a Ray worker died during 'dying'.*run the same command again"):
            ray_executor.map(worker, [1, 2, 3], group=1, label="dying")


# --------------------------------------------------------------------------- LLM requests on workers


def answer(request) -> str:
    """A scripted model's answer (module level: it travels to workers)."""
    return "echo " + str(request.messages[-1][1])


def test_llm_requests_on_workers_keep_one_cache_in_the_run(tmp_path):
    from audit.models.answer_cache import CachedLLM
    from audit.models.llm import ChatRequest, ScriptedLLM
    from audit.models.remote import ROUND, LLMWorker, RemoteLLM

    requests = [ChatRequest.make([{"role": "user", "content": f"q{i}"}]) for i in range(40)]
    local = CachedLLM(ScriptedLLM(answer), tmp_path / "local.sqlite")
    expected = local.complete_batch(requests)
    ex = PicklingExecutor()
    driver_side = ScriptedLLM(answer)  # identity and tokeniser only: it must answer nothing
    remote = CachedLLM(RemoteLLM(driver_side, ex, LLMWorker(llm=ScriptedLLM(answer))), tmp_path / "ray.sqlite",
                       chunk_size=ROUND)
    assert remote.complete_batch(requests) == expected
    assert driver_side.calls == [] and ex.timings["LLM requests"]["items"] == 40
    assert remote.stats == {"hits": 0, "misses": 40, "backend_calls": 40}
    again = CachedLLM(RemoteLLM(driver_side, ex, LLMWorker(llm=ScriptedLLM(answer))), tmp_path / "ray.sqlite")
    assert again.complete_batch(requests) == expected and again.stats["backend_calls"] == 0
    assert ex.timings["LLM requests"]["items"] == 40  # every answer came from the run's cache
    few = RemoteLLM(driver_side, ex, LLMWorker(llm=ScriptedLLM(answer)))
    assert few.complete_batch(requests[:3]) == expected[:3] and len(driver_side.calls) == 3  # not worth a stage


@pytest.mark.slow
def test_the_embedded_llm_on_workers_answers_what_the_run_answers(tmp_path, small_llm, monkeypatch):
    """LLM requests on a cluster, on the real model: the worker loads the embedded model from the
    run's spec (a llama.cpp of its own, with its own threads) and answers a batch there; the
    answers are the ones the run's own model gives. (A batch of 4 is made worth a stage: the
    default's 32 requests, answered twice on one thread, took a minute of CI.)"""
    from audit.models import remote
    from audit.models.llm import ChatRequest
    from audit.models.remote import RemoteLLM

    few = 4
    monkeypatch.setattr(remote, "MIN_REMOTE", few)
    requests = [ChatRequest.make([{"role": "user", "content": f"Say a colour. Number {i}."}], max_tokens=4)
                for i in range(few)]
    ex = PicklingExecutor(threads=1)
    with Resources(executor=ex, llm_cache_path=tmp_path / "run.sqlite") as res:
        llm = res.llm("qwen2.5-coder-0.5b")
        assert isinstance(llm.backend, RemoteLLM)
        got = llm.complete_batch(requests)
    assert ex.timings["LLM requests"]["items"] == few  # one stage, every request on the worker
    assert got == small_llm.complete_batch(requests) and any(a.strip() for a in got)


def test_resources_send_llm_requests_to_a_distributed_executor(tmp_path, monkeypatch):
    from audit.models import specs
    from audit.models.answer_cache import CachedLLM
    from audit.models.llm import ScriptedLLM
    from audit.models.remote import RemoteLLM

    monkeypatch.setattr(specs, "load_llm", lambda spec, cache=True, cache_path=None, **kw:
                        CachedLLM(ScriptedLLM(lambda r: "ok", identity=f"scripted:{spec}"), cache_path, enabled=cache))
    with Resources(executor=PicklingExecutor(), llm_cache_path=tmp_path / "c.sqlite") as res:
        llm = res.llm("some-model")
        assert isinstance(llm, CachedLLM) and isinstance(llm.backend, RemoteLLM)
        assert llm.backend.worker.spec == "some-model" and llm.identity == "scripted:some-model"
    with Resources(llm_cache_path=tmp_path / "c.sqlite") as res:
        assert not isinstance(res.llm("some-model").backend, RemoteLLM)


def test_trir_window_logits_on_workers_are_the_local_ones():
    """TRIR's prediction on a distributed executor: the classifier travels to the workers as its
    config and weights and computes the same batches, so the logits are bit-identical."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from attackers.trir.token_windows import Windows, predict_logits

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2,
                                                     num_attention_heads=2, intermediate_size=64,
                                                     max_position_embeddings=64, num_labels=7))
    rng = random.Random(1)
    windows = Windows()
    for d in range(40):
        windows.ids.append([2] + [rng.randrange(5, 300) for _ in range(rng.randint(3, 50))] + [3])
        windows.doc.append(d // 3)
        windows.chars.append(None)
    here = predict_logits(model, windows, pad_id=0, device="cpu", batch_size=8, progress=False)
    executor = PicklingExecutor()
    there = predict_logits(model, windows, pad_id=0, device="cpu", batch_size=8, progress=False, executor=executor)
    assert here.shape == (40, 7) and np.array_equal(here, there)
    assert executor.timings["TRIR: window logits"]["items"] == 40
    # one batch (a small release) is computed here, where the model is: no stage for it
    few = Windows(windows.ids[:8], windows.doc[:8], windows.chars[:8])
    assert np.array_equal(predict_logits(model, few, pad_id=0, device="cpu", batch_size=8, progress=False,
                                         executor=executor),
                          predict_logits(model, few, pad_id=0, device="cpu", batch_size=8, progress=False))
    assert executor.timings["TRIR: window logits"]["calls"] == 1


def test_spacy_ner_on_workers_finds_what_it_finds_locally():
    """The spaCy NER baseline on a distributed executor: the same batches on the workers, each
    loading the pipeline once, and the same release."""
    from defenders.baselines import SpacyNER

    texts = [f"Maria Lopez moved from Oslo to Lima in {1990 + i} and joined Serco Limited." for i in range(7)]
    corpus = Corpus([Document(f"d{i}", t) for i, t in enumerate(texts)], name="c")
    local = SpacyNER(batch_size=3).use(Resources()).sanitize(corpus)
    executor = PicklingExecutor()
    remote = SpacyNER(batch_size=3).use(Resources(executor=executor)).sanitize(corpus)
    assert [d.to_dict() for d in remote] == [d.to_dict() for d in local]
    assert any(s.label == "GPE" for s in local.corpus["d0"].spans)
    assert executor.timings["spaCy NER"] == {"items": 7, "seconds": executor.timings["spaCy NER"]["seconds"], "calls": 1}


def test_presidio_on_workers_finds_what_it_finds_locally():
    """The Presidio baseline on a distributed executor: each worker loads the analyzer once,
    and the release is the same."""
    pytest.importorskip("presidio_analyzer", reason="Presidio is optional: pip install 'anonaudit[presidio]'")
    from defenders.baselines import PRESIDIO_GROUP, PresidioSanitizer

    texts = [f"Maria Lopez (maria.lopez{i}@example.org, +44 20 7946 09{i:02d}) moved to Lima in {1990 + i}."
             for i in range(PRESIDIO_GROUP + 3)]
    corpus = Corpus([Document(f"d{i}", t) for i, t in enumerate(texts)], name="c")
    local = PresidioSanitizer().use(Resources()).sanitize(corpus)
    executor = PicklingExecutor()
    remote = PresidioSanitizer().use(Resources(executor=executor)).sanitize(corpus)
    assert [d.to_dict() for d in remote] == [d.to_dict() for d in local]
    assert {"PERSON", "EMAIL_ADDRESS"} <= {s.label for s in local.corpus["d0"].spans}
    assert executor.timings["Presidio"]["items"] == len(texts) and executor.timings["Presidio"]["calls"] == 1
