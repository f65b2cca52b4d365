"""Fuzzing every reader of user input: a clear ``AnonauditError``, never another exception.

Hypothesis generates malformed inputs for each reader a user's file reaches: corpus and
release files in every format (raw bytes, and JSON shaped almost like each format), span
files applied to originals, results files (valid ones mutated), audit specs (YAML text and
mappings shaped almost like a spec), gate thresholds and ``--release NAME=FILE`` values.
Each must either load or raise :class:`~audit.core.errors.AnonauditError` (a message naming
the file and the problem); any other exception is a bug the user would see as a traceback.

Examples per reader: ``ANONAUDIT_FUZZ_EXAMPLES`` (default 60, so the suite stays quick; the
README gives the figure of a long run).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the fuzz suite needs hypothesis: pip install -e '.[test]'")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from audit.core.data import Corpus, Document, Span  # noqa: E402
from audit.core.errors import AnonauditError  # noqa: E402

EXAMPLES = int(os.environ.get("ANONAUDIT_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("ANONAUDIT_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])

ORIGINALS = Corpus([Document("a", "Alice Smith lives in Oslo.", subject="alice",
                             spans=(Span(0, 11, "PERSON"),)),
                    Document("b", "Bob Jones works in Bergen.", subject="bob")], name="originals")

#: JSON values, small and nested, with the awkward ones (empty, huge numbers, unicode, nulls).
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
                    st.sampled_from(["", "id", "text", "a", "b", "spans", "start", "end", "\ufeff", "\x00"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8) | st.sampled_from(
        ["id", "text", "subject", "spans", "start", "end", "label", "doc_id", "annotations", "name",
         "public_knowledge", "original", "orig_start", "orig_end", "replacement", "entity_mentions"]), inner,
        max_size=5)), max_leaves=25)


def check(call, *args, **kwargs):
    """Run a reader: it may succeed or raise AnonauditError, nothing else."""
    try:
        return call(*args, **kwargs)
    except AnonauditError as exc:
        assert str(exc).strip(), "an error must say what is wrong"
        return None


def _write(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as fh:
        fh.write(data)
    return path


EXTENSIONS = ["x.jsonl", "x.json", "x.csv", "x.tsv", "x.txt", "x"]
FORMATS = [None, "jsonl", "csv", "json-map", "json-list", "tab", "tri", "spans"]


# --------------------------------------------------------------------------- corpora and releases


@FUZZ
@given(raw=st.binary(max_size=400), name=st.sampled_from(EXTENSIONS), fmt=st.sampled_from(FORMATS))
def test_any_bytes_as_a_corpus_or_release(raw, name, fmt):
    from audit.io.loaders import load_corpus, load_release_file

    with tempfile.TemporaryDirectory() as tmp:
        path = _write(tmp, name, raw)
        check(load_corpus, path, fmt)
        check(load_release_file, path, originals=ORIGINALS, format=fmt)


@FUZZ
@given(data=values, name=st.sampled_from(EXTENSIONS), fmt=st.sampled_from(FORMATS), lines=st.booleans())
def test_json_shaped_almost_like_a_format(data, name, fmt, lines):
    from audit.io.loaders import load_corpus, load_release_file

    if lines and isinstance(data, list):
        text = "".join(json.dumps(x) + "\n" for x in data)
    else:
        text = json.dumps(data)
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(tmp, name, text.encode("utf-8"))
        check(load_corpus, path, fmt)
        check(load_release_file, path, originals=ORIGINALS, format=fmt)
        check(load_release_file, path, format=fmt)


#: Cells of a CSV with what breaks one: quotes, delimiters, line breaks, spaces.
csv_text = st.text(alphabet='ab ,"\n\t\r', max_size=60)
columns = st.dictionaries(st.sampled_from(["id", "text", "subject", "spans", "bogus"]),
                          st.one_of(st.none(), st.integers(), st.sampled_from(["id", "text", "subject", "body", "x", ""])),
                          max_size=4)


@FUZZ
@given(raw=csv_text, name=st.sampled_from(["x.csv", "x.tsv", "x.jsonl"]), cols=columns)
def test_csv_like_text_with_named_columns(raw, name, cols):
    from audit.io.loaders import load_corpus

    with tempfile.TemporaryDirectory() as tmp:
        path = _write(tmp, name, ("id,text,subject\n" + raw).encode("utf-8"))
        check(load_corpus, path, columns=cols)


@FUZZ
@given(cells=st.lists(st.text(alphabet='ab ,"\n', min_size=1, max_size=20).filter(lambda t: t.strip()),
                      min_size=1, max_size=6))
def test_a_csv_quoted_as_csv_writes_it_loads_whole(cells):
    """Quoted fields over several lines, with quotes and delimiters inside: never refused as an
    unclosed quote, and no row is lost (the strict reading refuses only broken quoting)."""
    import csv as csvlib
    import io

    from audit.io.loaders import load_corpus

    out = io.StringIO()
    writer = csvlib.writer(out, lineterminator="\n")
    writer.writerow(["id", "text"])
    writer.writerows([f"d{i}", cell] for i, cell in enumerate(cells))
    with tempfile.TemporaryDirectory() as tmp:
        corpus = load_corpus(_write(tmp, "x.csv", out.getvalue().encode("utf-8")))
        assert [d.text for d in corpus] == cells


span_items = st.lists(st.one_of(
    st.lists(st.one_of(st.integers(-5, 40), st.text(max_size=6), st.none()), max_size=4),
    values), max_size=6)


@FUZZ
@given(spans=st.dictionaries(st.sampled_from(["a", "b", "c", ""]), span_items, max_size=3))
def test_span_files_applied_to_originals(spans):
    from audit.io.loaders import load_release_file

    with tempfile.TemporaryDirectory() as tmp:
        path = _write(tmp, "spans.json", json.dumps(spans).encode())
        releases = check(load_release_file, path, originals=ORIGINALS, format="spans")
        if releases:  # what loaded is consistent: every replacement records its original text
            for doc in releases[0].corpus:
                original = ORIGINALS[doc.id].text
                for sp in doc.spans:
                    assert original[sp.orig_start:sp.orig_end] == sp.original


@FUZZ
@given(docs=st.lists(st.fixed_dictionaries({"id": st.sampled_from(["a", "b", "c"]), "text": st.text(max_size=30)},
                                           optional={"spans": st.lists(st.one_of(
                                               st.lists(st.integers(-3, 35), max_size=3),
                                               st.fixed_dictionaries({"start": st.integers(-3, 35),
                                                                      "end": st.integers(-3, 35)},
                                                                     optional={"original": st.text(max_size=5),
                                                                               "orig_start": st.integers(-3, 35),
                                                                               "orig_end": st.integers(-3, 35)})),
                                               max_size=4),
                                               "subject": values}), max_size=4))
def test_jsonl_releases_with_odd_spans(docs):
    from audit.io.loaders import load_release_file

    with tempfile.TemporaryDirectory() as tmp:
        path = _write(tmp, "rel.jsonl", "".join(json.dumps(d) + "\n" for d in docs).encode())
        releases = check(load_release_file, path, originals=ORIGINALS)
        if releases:
            check(releases[0].doubts_against, ORIGINALS)


# --------------------------------------------------------------------------- results files


GOOD_RESULT = {"kind": "attack", "name": "x", "release": "r", "value": 0.5, "ci": [0.1, 0.9], "n": 3,
               "baseline": 0.1, "beats_baseline": True, "details": {"a": 1},
               "documents": [{"id": "d", "success": True, "highlights": [{"start": 0, "end": 3, "kind": "k"}],
                              "private": ["x"], "x": "secret"}]}


@st.composite
def mutated_results(draw):
    result = json.loads(json.dumps(GOOD_RESULT))
    for _ in range(draw(st.integers(1, 4))):
        target = draw(st.sampled_from(["top", "doc", "hl"]))
        obj = {"top": result, "doc": result["documents"][0] if isinstance(result.get("documents"), list)
               and result["documents"] and isinstance(result["documents"][0], dict) else result,
               "hl": result}[target]
        key = draw(st.sampled_from(sorted(obj) + ["extra"]))
        if draw(st.booleans()):
            obj.pop(key, None)
        else:
            obj[key] = draw(values)
    provenance = draw(st.one_of(st.just({}), values, st.fixed_dictionaries(
        {"command": st.just("run"), "releases": st.dictionaries(st.text(max_size=5), st.one_of(
            values, st.fixed_dictionaries(
                {"path": st.sampled_from(["releases/r.jsonl", "../x.jsonl", "/etc/hostname", "", "."]),
                 "sha256": st.one_of(st.none(), st.text(max_size=64))})), max_size=3)})))
    top = {"schema": "anonaudit.results/1", "provenance": provenance,
           "results": draw(st.sampled_from(["list", "object", "value"]))}
    top["results"] = {"list": [result], "object": {"r": result}, "value": result}[top["results"]]
    return top


@FUZZ
@given(data=mutated_results())
def test_mutated_results_files(data):
    from audit.core.results import ResultsFile

    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "releases"))
        _write(tmp, "releases/r.jsonl", b'{"id": "d", "text": "abc"}\n{"id": ')  # a truncated copy
        path = _write(tmp, "results.json", json.dumps(data).encode())
        rf = check(ResultsFile.load, path)
        if rf is not None:  # what loads can be rendered and gated without another error
            from audit.pipeline.gate import evaluate, parse_threshold
            from reports.render import load_release_texts, render

            check(load_release_texts, path, rf)
            render(rf)
            check(evaluate, rf, [parse_threshold("x=0.5", "max")])


@FUZZ
@given(raw=st.binary(max_size=300))
def test_any_bytes_as_a_results_file(raw):
    from audit.core.results import ResultsFile

    with tempfile.TemporaryDirectory() as tmp:
        check(ResultsFile.load, _write(tmp, "results.json", raw))


# --------------------------------------------------------------------------- specs, thresholds, options


SPEC_KEYS = ["title", "seed", "out", "originals", "background", "corpora", "releases", "attacks", "metrics",
             "models", "sampling", "gate", "report", "bogus"]


@st.composite
def almost_specs(draw):
    spec = {"originals": "originals.jsonl", "releases": [{"name": "r", "path": "originals.jsonl"}],
            "attacks": ["phrase_search"]}
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(SPEC_KEYS))
        spec[key] = draw(st.one_of(values, st.lists(st.one_of(st.text(max_size=8), values), max_size=3),
                                   st.just({"max": {"phrase_search": 2}}), st.just([{"name": "a=b", "path": "x"}])))
    return spec


@FUZZ
@given(spec=almost_specs())
def test_spec_mappings_shaped_almost_like_a_spec(spec):
    from audit.pipeline.spec import parse_spec

    with tempfile.TemporaryDirectory() as tmp:
        from audit.io.loaders import save_jsonl

        save_jsonl(ORIGINALS, Path(tmp) / "originals.jsonl")
        check(parse_spec, spec, base=Path(tmp), source="audit.yaml")


@FUZZ
@given(text=st.text(max_size=200), ext=st.sampled_from([".yaml", ".toml", ".yml"]))
def test_any_text_as_a_spec_file(text, ext):
    from audit.pipeline.spec import load_spec

    with tempfile.TemporaryDirectory() as tmp:
        path = _write(tmp, "audit" + ext, text.encode("utf-8", "surrogatepass"))
        check(load_spec, path)


@FUZZ
@given(text=st.text(max_size=30), side=st.sampled_from(["max", "min"]))
def test_gate_thresholds(text, side):
    from audit.pipeline.gate import parse_threshold

    th = check(parse_threshold, text, side)
    if th is not None:
        assert 0.0 <= th.value <= 1.0 and th.name


@FUZZ
@given(text=st.text(max_size=30))
def test_release_option_values(text):
    from audit.io.loaders import parse_release_spec

    name, path = parse_release_spec(text)
    assert name is None or ("=" not in name and "/" not in name and name.strip())
    assert path is not None
