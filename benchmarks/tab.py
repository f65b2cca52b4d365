"""The benchmarks' helper module (scripts import it as ``tab``, from beside them): where the TAB
(ECHR) data is (:data:`TAB`), the originals with the manual mentions as gold spans, the published
span files restricted to a few documents, and the measurements every sanitizer benchmark reports
(utility, phrase-search linkage, span-guess recovery on a fixed sample of spans, LLM cost).

Not a test fixture: the TAB data lives in ``../shared/data/tab`` and is never committed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Document, Release, Scenario, Span, outermost, span_order
from audit.io.loaders import load_corpus, load_release_file

TAB = Path(__file__).resolve().parents[2] / "shared" / "data" / "tab"


def labelled_originals(data: Path = TAB, *, outer: bool = False) -> Corpus:
    """The 127 TAB test originals with the manual mentions of ``TAB_test_Manual_Entity.json`` as
    gold spans (label = TAB entity type). ``outer``: keep only the outermost of nested spans."""
    texts = load_corpus(data / "bks" / "TAB_test_BK=Original.json")
    entity = json.loads((data / "anonymizations" / "TAB_test_Manual_Entity.json").read_text())
    docs = []
    for doc in texts:
        spans = [Span(s, e, label=lab) for s, e, lab in entity.get(doc.id, [])]
        if outer:
            spans, _ = outermost(spans)
        docs.append(Document(doc.id, doc.text, subject=doc.subject, spans=tuple(sorted(spans, key=span_order))))
    return Corpus(docs, name="TAB_test", source=texts.source)


def first_docs(corpus: Corpus, n: int) -> Corpus:
    """The first ``n`` documents in the file's order (the issues' "first N TAB test documents")."""
    return Corpus(list(corpus)[:n], name=corpus.name, source=corpus.source)


def published(name: str, file: str, originals: Corpus, ids: list[str], data: Path = TAB) -> Release:
    """A published span file applied to the originals, restricted to the documents ``ids``."""
    (rel,) = load_release_file(data / "anonymizations" / file, name=name, originals=originals)
    return dataclasses.replace(rel, corpus=Corpus([rel.corpus[i] for i in ids], name=name, source=rel.corpus.source))


# ----------------------------------------------------------------------------- measurements


def utility(originals: Corpus, releases: list[Release], metrics=("tpi", "tps", "similarity")) -> dict[str, dict]:
    """TPI/TPS (causal IC of the embedded 0.5B, cached on disk per document) and embedding
    similarity of every release, against ``originals`` (with gold spans)."""
    from audit.core.registry import registry
    from audit.metrics import UtilityContext

    ctx = UtilityContext(originals, llm="transformers:qwen2.5-coder-0.5b", context_tokens=256, progress=False)
    scenario = Scenario(originals=originals, releases=tuple(releases))
    objs = [registry.create("metric", m, context=ctx) for m in metrics]
    out: dict[str, dict] = {}
    for rel in releases:
        out[rel.name] = {}
        for obj in objs:
            res = obj.evaluate(scenario, rel)[0]
            out[rel.name][obj.name] = {"value": res.value, "ci": list(res.ci) if res.ci else None}
    return out


def linkage(collection: Corpus, releases: list[Release], arities=(1, 3)) -> dict[str, dict]:
    """Phrase-search linkage (k = 2) of each release against the collection of ``collection``
    (all 127 originals): share of documents linked to their source, and the share of
    uniquely-linking n-grams left."""
    from attackers.phrase_search import PhraseSearchAttack

    scenario = Scenario(originals=collection, releases=tuple(releases))
    out: dict[str, dict] = {r.name: {} for r in releases}
    for arity in arities:
        attack = PhraseSearchAttack(k=2, arity=arity)
        attack.fit(scenario)
        for rel in releases:
            head, residual = attack.evaluate(scenario, rel)
            out[rel.name][f"a{arity}"] = {"linked": head.details["linked"], "n": head.n, "rate": head.value,
                                          "ci": list(head.ci), "residual": residual.value}
    return out


def sample_spans(release: Release, n: int, seed: int) -> set[tuple[str, int, int]]:
    """A seeded sample of (document, original start, original end) among the recorded spans."""
    keys = sorted({(d.id, s.orig_start, s.orig_end) for d in release for s in d.spans if (s.original or "").strip()})
    return set(random.Random(seed).sample(keys, min(n, len(keys))))


def restrict(release: Release, keys: set[tuple[str, int, int]]) -> Release:
    """The same release with only the spans ``keys`` recorded (the text keeps every replacement)."""
    docs = [d.with_spans([s for s in d.spans if (d.id, s.orig_start, s.orig_end) in keys]) for d in release]
    docs = [d for d in docs if d.spans]
    return Release(release.name, Corpus(docs, name=release.name), aligned=True, source=release.source)


def span_recovery(llm, originals: Corpus, releases: list[Release], keys: set[tuple[str, int, int]], *,
                  guesses: int = 5, context_tokens: int = 384, seed: int = 0) -> dict[str, dict]:
    """Span-guessing recovery on the same sampled spans of every release (a span a release does
    not record, e.g. a span it left in clear, is not attacked there)."""
    from attackers.span_guess import SpanGuessAttack

    attack = SpanGuessAttack(llm=llm, guesses=guesses, context_tokens=context_tokens, seed=seed, ner=False,
                             progress=True)
    scenario = Scenario(originals=originals, releases=tuple(releases))
    attack.fit(scenario)
    out = {}
    for rel in releases:
        t = time.perf_counter()
        (res,) = attack.evaluate(scenario, restrict(rel, keys))
        spans = [s for d in res.documents for s in d.facts["spans"]]
        out[rel.name] = {"recovered": res.value, "ci": list(res.ci), "n": res.n, "baseline": res.baseline,
                         "seconds": round(time.perf_counter() - t, 1),
                         "outcomes": {f"{d.id}:{s['orig_start']}:{s['orig_end']}": bool(s["recovered"])
                                      for d in res.documents for s in d.facts["spans"]},
                         "examples": [(s["original"], s["replacement"], s["guesses"][:3]) for s in spans
                                      if s["recovered"]][:5]}
    return out


#: The LLM of every ``--quick`` run: the fast embedded one.
QUICK_LLM = "qwen2.5-coder-0.5b"


def parser(doc: str, docs: int, docs_help: str = "the first N TAB test documents", *,
           quick: dict[str, Any] | None = None):
    """The options every sanitizer benchmark takes; each script adds its own. ``--quick`` (a smoke
    run of the script: one TAB document, the fast embedded LLM) sets ``docs`` to 1, ``llm`` to
    :data:`QUICK_LLM` and the script's own ``quick`` settings once the options are parsed."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def parse_args(self, *a: Any, **k: Any) -> Any:  # type: ignore[override]
            args = super().parse_args(*a, **k)
            if args.quick:
                for key, value in {"docs": 1, "llm": QUICK_LLM, **(quick or {})}.items():
                    setattr(args, key, value)
            return args

    ap = Parser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"a smoke run: one document, {QUICK_LLM}" + (f", {quick}" if quick else ""))
    ap.add_argument("--data", type=Path, default=TAB)
    ap.add_argument("--docs", type=int, default=docs, help=docs_help)
    ap.add_argument("--llm", default="qwen2.5-coder-1.5b")
    ap.add_argument("--threads", type=int, default=None,
                    help="llama.cpp threads (default: all cores; 1 suffers less when another job shares the cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=None, help="LLM answer cache (default: a fresh file)")
    ap.add_argument("--out", type=Path, default=None, help="write every figure as JSON here")
    return ap


def bench_llm(args, prefix: str, parallel: int = 1):
    """The benchmark's LLM behind an answer cache: ``--cache``, else a fresh file (cold costs).
    ``parallel`` > 1 lets llama.cpp decode requests together (answers cached apart)."""
    import tempfile

    from audit.models.specs import load_llm

    cache = args.cache or Path(tempfile.mkdtemp(prefix=prefix)) / "llm.sqlite"
    print(f"LLM answer cache: {cache}", flush=True)
    return load_llm(args.llm, cache=True, cache_path=cache, n_ctx=4096, n_parallel=parallel,
                    n_threads=args.threads, deterministic=parallel == 1)


class LLMCost:
    """What one sanitizer run cost the LLM, per document, read from the cached LLM's counters.

    ``requests`` counts every request the method made (answered by the cache or not), ``sent``
    those that reached the model in this run. The tokens per document are the tokens of the
    sent requests scaled to all requests: with a cold cache they are exact, with a warm
    ``--cache`` (a resumed run) they are the cold cost estimated from the requests that were
    sent, never the cached requests counted as free. ``None`` when nothing was sent. The
    seconds per document are scaled the same way (a cache hit costs next to nothing).
    """

    def __init__(self, llm):
        self.llm = llm
        self.stats, self.usage = dict(llm.stats), dict(llm.usage)

    def per_doc(self, docs: int, seconds: float | None = None) -> dict[str, Any]:
        stats, usage = self.llm.stats, self.llm.usage
        requests = (stats["hits"] + stats["misses"]) - (self.stats["hits"] + self.stats["misses"])
        sent = stats["backend_calls"] - self.stats["backend_calls"]
        spent = {k: usage[k] - self.usage.get(k, 0) for k in usage}
        tokens = {k: v / sent * requests / docs for k, v in spent.items()} if sent else None
        out = {"llm_requests_per_doc": requests / docs, "llm_requests_sent": sent,
               "tokens_per_doc": tokens, "tokens_per_doc_estimated": bool(sent) and sent < requests}
        if seconds is not None:
            out["seconds_per_doc"] = seconds / docs * (requests / sent if sent else 1.0)
            out["seconds_measured"] = seconds
        return out


def cost_cells(row: dict[str, Any]) -> tuple[str, str, str]:
    """A table row's LLM requests / doc, tokens / doc (prompt + gen) and s / doc cells."""
    if "llm_requests_per_doc" not in row:
        return ("–", "–", "–")
    t = row["tokens_per_doc"]
    ran = "" if t is None or t.get("prompt_evaluated", t["prompt_tokens"]) >= t["prompt_tokens"] else \
        f" ({t['prompt_evaluated']:,.0f} evaluated)"
    est = " (est.)" if row["tokens_per_doc_estimated"] else ""
    tokens = "(all cached)" if t is None else f"{t['prompt_tokens']:,.0f}{ran} + {t['completion_tokens']:,.0f}{est}"
    seconds = "–" if t is None else f"{row['seconds_per_doc']:.0f}{est}"  # all cached: no cold cost known
    return (f"{row['llm_requests_per_doc']:.1f}", tokens, seconds)


def cost_json(row: dict[str, Any]) -> str:
    """A row's LLM cost (requests, tokens and seconds per document) as one line of JSON."""
    return json.dumps({k: v for k, v in row.items() if k.startswith(("llm_", "tokens_", "seconds_"))})


def write_out(args, llm, ids: list[str], **figures: Any) -> None:
    """Write the run's settings and figures as JSON to ``--out`` (when given)."""
    if args.out:
        settings = {k: str(v) for k, v in vars(args).items()}
        args.out.write_text(json.dumps({"llm": llm.identity, "docs": ids, "args": settings, **figures}, indent=1,
                                       ensure_ascii=False))


def load_avg() -> list[float]:
    """This machine's load averages (1, 5 and 15 minutes), rounded: how busy it was."""
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict[str, Any]:
    """What a reader needs to weigh the seconds: cores and the load while the benchmark ran."""
    return {"cpus": os.cpu_count(), "load_avg": load_avg()}


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table: the first column left-aligned (names), the others right-aligned (figures);
    cells are printed as they are given (format them first)."""
    lines = ["| " + " | ".join(header) + " |", "| --- | " + " | ".join("---:" for _ in header[1:]) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
