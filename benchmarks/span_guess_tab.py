"""Span guessing on TAB (ECHR): recovery rate per release, per source of guesses, throughput.

Compares the releases of the INTACT paper on the same seeded sample of manually
annotated spans (all five files sanitize the same 7,340 TAB spans, so each sampled
span is attacked once per release):

* Manual_Entity        — entity-type labels ([PERSON], [DATETIME], ...)
* Manual_INTACT        — INTACT's selected replacements
* INTACT most_specific — the most specific generated candidate for every span
* INTACT least_specific — the least specific candidate
* Manual_Dou           — Dou et al.'s abstractions

Two adversaries (``--knowledge``, issue 44):

* ``background`` (default): holds the public background (``--background``, by default the full
  public judgments ``TAB_test_BK=Public.json``, one per person; it is not told whose document it
  reads); it finds the best-matching people and ranks their entities of the span's type by
  context fit. No LLM. Two variants on the same spans: *before* (the best person only, no prior)
  and *after* (the ``--people`` best, weighted by their posterior, mixed with the label prior the
  baseline knows). Reported beside them: each source alone (background, the same people's most
  frequent candidates, the prior), per label, and the *ceiling*: spans whose original is among
  the right person's candidates at all (the auditor knows whose document it is).
* ``context``: the LLM guesses from the sanitized document alone (issue 6); every release is
  evaluated twice, the second pass answered from the LLM cache.

``--tri`` also builds a TRI-format file (``name``, ``public_knowledge``, one column per method)
from a demo population at run time in a temporary folder (never committed) and attacks its
releases through the TRI loader, whose releases carry no spans (they are aligned with the originals).

    python benchmarks/span_guess_tab.py --quick                      # 12 spans, Manual_Entity, background
    python benchmarks/span_guess_tab.py --sample 200 --releases Manual_Entity --tri --demo  # the issue-44 figures
    python benchmarks/span_guess_tab.py --knowledge context --sample 40 --llm qwen2.5-coder-1.5b

Numbers depend heavily on the machine's load (2 shared CPU cores here).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from attackers.span_guess import SpanGuessAttack
from audit.core.data import Corpus, Document, Release, Scenario, Span, span_order
from audit.io.loaders import load_corpus, load_release_file

from tab import TAB  # noqa: E402  (the benchmarks' one helper module: ../shared/data/tab beside the checkout)
RELEASES = {
    "Manual_Entity": "TAB_test_Manual_Entity.json",
    "Manual_INTACT": "TAB_test_Manual_INTACT.json",
    "INTACT_most_specific": "TAB_test_Manual_INTACT_202408_most_specific.json",
    "INTACT_least_specific": "TAB_test_Manual_INTACT_202408_least_specific.json",
    "Manual_Dou": "TAB_test_Manual_Dou.json",
}


def labelled_originals(data: Path) -> Corpus:
    """TAB originals with the manual mentions as gold spans (label = TAB entity type)."""
    texts = load_corpus(data / "bks" / "TAB_test_BK=Original.json")
    entity = json.loads((data / "anonymizations" / RELEASES["Manual_Entity"]).read_text())
    docs = []
    for doc in texts:
        spans = [Span(s, e, label=lab) for s, e, lab in entity.get(doc.id, [])]
        docs.append(Document(doc.id, doc.text, subject=doc.subject, spans=tuple(sorted(spans, key=span_order))))
    return Corpus(docs, name="TAB_test", source=texts.source)


def paired_tests(outcomes: dict[str, dict[tuple, bool]]) -> list[dict]:
    """Every pair of releases on the spans both attacked: how many spans only one of them gave
    away, and the two-sided exact sign (McNemar) test on those discordant spans. The same spans
    are attacked in every release, so this is far more sensitive than comparing two rates."""
    from audit.core.stats import sign_test

    names = list(outcomes)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            common = outcomes[a].keys() & outcomes[b].keys()
            only_a = sum(outcomes[a][k] and not outcomes[b][k] for k in common)
            only_b = sum(outcomes[b][k] and not outcomes[a][k] for k in common)
            p = sign_test(only_a, only_b)
            out.append({"a": a, "b": b, "spans": len(common), "only_a": only_a, "only_b": only_b, "p": round(p, 4)})
    return out


#: the two background adversaries measured on the same spans (issue 44): before and after
VARIANTS = {"before": {"people": 1, "prior": False}, "after": {}}


def run_variants(attack: SpanGuessAttack, scenario: Scenario, release: Release, people: int,
                 ceiling: bool = True) -> dict:
    """Both background variants on ``release`` (the same attack object, so people are parsed once),
    each with its per-label table; ``ceiling``: also which originals the right person's background
    holds at all."""
    out, spans = {}, {}
    for name, kw in VARIANTS.items():
        attack.people, attack.prior = kw.get("people", people), kw.get("prior", True)
        t = time.perf_counter()
        (res,) = attack.evaluate(scenario, release)
        out[name] = _row(res, time.perf_counter() - t)
        out[name]["people"], out[name]["prior"] = attack.people, attack.prior
        spans[name] = _outcomes(res)
        _print(out[name], name)
    # the baseline's guesses are the prior's: its per-span hits are the "prior" source's
    spans["baseline"] = {(d.id, s.get("orig_start", s["start"]), s.get("orig_end", s["end"])):
                         "prior" in s.get("recovered_by_source", []) for d in res.documents for s in d.facts["spans"]}
    out["paired"] = [p for p in paired_tests(spans) if "after" in (p["a"], p["b"])]
    print("   paired:", out["paired"], flush=True)
    held = reachable(attack, scenario, release, res) if ceiling else {}
    out["per_label"] = per_label_sources(res, held)
    out["ceiling"] = (sum(held.values()) / len(held)) if held else None
    print("   per label:", out["per_label"], "ceiling", out["ceiling"], flush=True)
    attack.people, attack.prior = people, True
    out["_outcomes"] = _outcomes(res)
    return out


def reachable(attack: SpanGuessAttack, scenario: Scenario, release: Release, res) -> dict[tuple, bool]:
    """For each attacked span: is its original among the candidates of the right person's
    background (of the span's type, by the matcher)? The ceiling of any background adversary."""
    from attackers.span_guess.background import Context

    bg = attack.background(scenario)
    matcher = attack.matcher(scenario)
    texts = {d.id: d.text for d in release}
    subjects = {d.id: d.subject or getattr(scenario.originals.get(d.id), "subject", None) for d in release}
    out = {}
    for d in res.documents:
        for sp in d.facts["spans"]:
            person = subjects.get(d.id)
            text = texts[d.id]
            dist = bg.distribution(person, sp["label"], Context.of(text, sp["start"], sp["end"]),
                                   exclude=[text[sp["start"]:sp["end"]]]) if bg.has(person) else {}
            cands = [c for _, c in dist.values()]
            matcher.analyse_many(cands)
            out[(d.id, sp["start"], sp["end"])] = matcher.first_match(sp["original"] or "", cands, sp["label"]) is not None
    return out


def per_label_sources(res, held: dict[tuple, bool]) -> dict[str, dict]:
    """Per label: spans, what each source recovered, the baseline's hits and the ceiling."""
    out: dict[str, dict] = {}
    for d in res.documents:
        for sp in d.facts["spans"]:
            row = out.setdefault(sp["label"], {"spans": 0, "ceiling": 0})
            row["spans"] += 1
            row["ceiling"] += held.get((d.id, sp["start"], sp["end"]), False)
            for name in sp.get("recovered_by_source", []):
                row[name] = row.get(name, 0) + 1
    for label, v in res.details["per_label"].items():
        out[label]["baseline"] = round(v["baseline"] * v["spans"])
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["spans"]))


def demo_scenario(tmp: Path, seed: int, n: int) -> Scenario:
    """The demo population (``anonaudit demo-data --n N``) written under ``tmp``: its labels and
    suppressed releases."""
    from anonaudit.demo.population import write

    write(tmp, n=n, seed=seed)
    originals = load_corpus(tmp / "originals.jsonl")
    background = load_corpus(tmp / "background.jsonl")
    releases = [load_release_file(tmp / "releases" / f"{m}.jsonl", name=m, originals=originals)[0]
                for m in ("labels", "suppressed")]
    return Scenario(originals=originals, background=background, releases=tuple(releases))


def demo_check(seed: int, n: int, people: int) -> dict:
    """The demo population: every span of its labels and suppressed releases."""
    with tempfile.TemporaryDirectory(prefix="span-guess-demo-") as tmp:
        scenario = demo_scenario(Path(tmp), seed, n)
        attack = SpanGuessAttack(guesses=5, people=people, knowledge="background", progress=False).fit(scenario)
        return {"people": n, "seed": seed, "releases": {r.name: _drop(run_variants(attack, scenario, r, people))
                                                        for r in scenario.releases}}


def _drop(row: dict) -> dict:
    row.pop("_outcomes", None)
    return row


def tri_scenario(tmp: Path, seed: int, n: int) -> tuple[Scenario, int]:
    """A TRI-format file made under ``tmp`` from a demo population (people and distractors; each
    person's background documents joined as ``public_knowledge``), read by the TRI loader; and
    how many people its releases hold."""
    from anonaudit.demo.population import write
    from audit.io.loaders import load_tri

    data = write(tmp / "demo", n=n, seed=seed)
    originals = load_corpus(tmp / "demo" / "originals.jsonl")
    background = load_corpus(tmp / "demo" / "background.jsonl")
    pk: dict[str, list[str]] = {}
    for d in background:
        pk.setdefault(d.subject or d.id, []).append(d.text)
    methods = {m: {d.subject: d.text for d in load_corpus(tmp / "demo" / "releases" / f"{m}.jsonl")}
               for m in ("labels", "suppressed")}
    rows = [{"name": person, "public_knowledge": "\n\n".join(texts),
             **{m: t[person] for m, t in methods.items() if person in t}} for person, texts in pk.items()]
    path = tmp / "tri.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    bg, releases = load_tri(path)
    # the originals keyed as the TRI file keys its rows (by name)
    orig = Corpus([Document(d.subject, d.text, subject=d.subject) for d in originals], name="originals")
    return Scenario(originals=orig, background=bg, releases=tuple(releases)), len(data.originals)


def tri_check(seed: int, n: int, guesses: int, people: int) -> dict:
    """The TRI-format file, attacked through the TRI loader."""
    with tempfile.TemporaryDirectory(prefix="span-guess-tri-") as tmp:
        scenario, in_release = tri_scenario(Path(tmp), seed, n)
        attack = SpanGuessAttack(guesses=guesses, people=people, knowledge="background", progress=False)
        attack.fit(scenario)
        return {"people_in_background": len(scenario.background), "people_in_release": in_release,
                "releases": {rel.name: _drop(run_variants(attack, scenario, rel, people)) for rel in scenario.releases}}


def slice_scenario(data: Path, background: str, release: str, docs: int) -> tuple[Scenario, Release]:
    """The first ``docs`` judgments (gold spans), their people's background and their documents of ``release``."""
    every = labelled_originals(data)
    rel = load_release_file(data / "anonymizations" / RELEASES[release], name=release, originals=every)[0]
    originals = Corpus(list(every)[:docs], name=every.name)
    people, ids = {d.subject for d in originals}, set(originals.ids)
    bg = load_corpus(data / "bks" / background)
    bg = Corpus([d for d in bg if d.subject in people], name=bg.name)
    rel = Release(rel.name, Corpus([d for d in rel.corpus if d.id in ids], name=rel.corpus.name), aligned=True)
    return Scenario(originals=originals, background=bg, releases=(rel,)), rel


def precision_check(args: argparse.Namespace) -> dict:
    """MiniLM's arithmetic side by side (``--precisions``): on a slice (``--docs`` judgments, their people's
    background, every span of the first ``--releases``), per precision, the seconds MiniLM takes over the
    background (vectors cached by precision: run with an empty ``ANONAUDIT_HOME`` for cold seconds), the
    attack's seconds, its figure and per span the person found and the guesses; then each precision's
    agreement with the first: the background vectors' cosine, the same person, the same guesses."""
    from attackers.span_guess.background import sentences
    from audit.models.embed import Embedder

    scenario, rel = slice_scenario(args.data, args.background, args.releases.split(",")[0], args.docs)
    texts = [c for d in scenario.background for c in sentences(d.text)]
    Embedder("minilm", cache=False)  # torch's and sentence-transformers' imports outside the timings
    runs: dict[str, dict] = {}
    for precision in args.precisions.split(","):
        attack = SpanGuessAttack(guesses=args.guesses, people=args.people, knowledge="background", target=None,
                                 ner=False, progress=False, dense_precision=precision).fit(scenario)
        t = time.perf_counter()
        embedder = attack.background(scenario).embedder
        embed_s = time.perf_counter() - t
        t = time.perf_counter()
        (res,) = attack.evaluate(scenario, rel)
        spans = [(s["background_person"], tuple(s["guesses"])) for d in res.documents for s in d.facts["spans"]]
        runs[precision] = {"embedder": embedder.identity, "sentences": len(texts), "embed_s": round(embed_s, 1),
                           "attack_s": round(time.perf_counter() - t, 1), "recovered": res.value, "ci": res.ci,
                           "spans": len(spans), "_spans": spans, "_vectors": embedder.encode(texts)}
        print(precision, {k: v for k, v in runs[precision].items() if not k.startswith("_")}, flush=True)
    first = dict(next(iter(runs.values())))
    for row in runs.values():
        cos = (row.pop("_vectors") * first["_vectors"]).sum(axis=1)
        row["cosine_min"], row["cosine_mean"] = round(float(cos.min()), 6), round(float(cos.mean()), 6)
        pairs = list(zip(row.pop("_spans"), first["_spans"]))
        row["same_person"] = sum(a[0] == b[0] for a, b in pairs)
        row["same_guesses"] = sum(a[1] == b[1] for a, b in pairs)
    out = {"docs": args.docs, "release": rel.name, "background_documents": len(scenario.background), "runs": runs}
    print(json.dumps(out, indent=1), flush=True)
    return out


def predictor_check(args: argparse.Namespace) -> dict:
    """Span guessing's cheap predictor against its LLM (issue 69, item 2; ``--predictor``): the demo
    population's first ``--docs`` documents of its ``labels`` release, every span guessed by the ``--llm``
    (``knowledge="both"``, every document judged: the exact figure) and by the same attack without it (the
    background ranker mixed with the label prior: the prediction-powered figure's score). Per document:
    spans ``m``, recovered by the LLM adversary ``y`` (both: the interleaved guesses; context: the LLM's own)
    and by the cheap guesser ``f``. Reported: the correlation of ``y`` and ``f`` as the ratio estimator uses
    them (linearised document totals, :func:`audit.core.ppi.ppi_batch`), the residual variance's share that
    the tuned predictor leaves, and the documents (and LLM calls: one per span) a fixed sample needs for
    each half-width on this release, with the predictor and without it."""
    import numpy as np
    from scipy.stats import t as student

    from audit.core.ppi import agreement
    from audit.models.specs import load_llm

    with tempfile.TemporaryDirectory(prefix="span-guess-predictor-") as tmp:
        scenario = demo_scenario(Path(tmp), args.seed, 40)
    rel = next(r for r in scenario.releases if r.name == "labels")
    ids = list(rel.corpus.ids)[:args.docs]
    rel = Release(rel.name, Corpus([rel.corpus[i] for i in ids], name=rel.corpus.name), aligned=True)
    llm = load_llm(args.llm, cache=True, cache_path=args.cache, n_ctx=2048, n_parallel=2)
    attack = SpanGuessAttack(llm=llm, guesses=args.guesses, context_tokens=args.context_tokens, seed=args.seed,
                             target=None, knowledge="both", people=args.people, progress=True).fit(scenario)
    t = time.perf_counter()
    (res,) = attack.evaluate(scenario, rel)
    seconds = time.perf_counter() - t
    rows = {d.id: (len(d.facts["spans"]), sum(s["recovered"] for s in d.facts["spans"]),
                   sum("context_llm" in s["recovered_by_source"] for s in d.facts["spans"]),
                   sum("background_and_prior" in s["recovered_by_source"] for s in d.facts["spans"]))
            for d in res.documents}
    m, y_both, y_ctx, f = (np.array([r[k] for r in rows.values()], float) for k in range(4))
    out = {"docs": len(m), "spans": int(m.sum()), "llm": llm.identity, "seconds": round(seconds, 1),
           "s_per_span": round(seconds / m.sum(), 2), "cheap": round(f.sum() / m.sum(), 4), "modes": {}}
    lin = lambda v: (v - v.sum() / m.sum() * m) / m.mean()  # noqa: E731  (the ratio form's linearisation)
    for mode, y in (("both", y_both), ("context", y_ctx)):
        r = agreement(lin(y), lin(f))
        lam = float(np.clip((lin(y) @ lin(f)) / max(lin(f) @ lin(f), 1e-12), 0.0, 1.0))
        s2_plain, s2_ppi = lin(y).var(ddof=1), (lin(y) - lam * lin(f)).var(ddof=2)
        need = {}
        for h in (0.05, 0.10):
            n = {k: int(np.ceil(1 / (h ** 2 / (student.ppf(0.975, len(m) - 2) ** 2 * s2) + 1 / len(m))))
                 for k, s2 in (("plain", s2_plain), ("ppi", s2_ppi))}
            need[f"{h:.2f}"] = {k: {"documents": v, "llm_calls": round(v * m.mean())} for k, v in n.items()}
        out["modes"][mode] = {"figure": round(y.sum() / m.sum(), 4), "r_linearised": r and round(r, 3),
                              "r_rates": (lambda q: q and round(q, 3))(agreement(y / m, f / m)),
                              "lam": round(lam, 3), "residual_share": round(s2_ppi / s2_plain, 3) if s2_plain else None,
                              "need": need}
    print(json.dumps(out, indent=1), flush=True)
    llm.close()
    return out


def _row(res, seconds: float) -> dict:
    by = res.details.get("recovered_by_source", {})
    spans = res.details.get("spans_attacked") or 0  # res.n counts documents (the cluster bootstrap's units)
    return {"release": res.release, "recovered": res.value, "ci": res.ci, "n": spans, "documents": res.n,
            "baseline": res.baseline, "beats_baseline": res.beats_baseline,
            "by_source": {k: v["recovered"] for k, v in by.items()},
            "person_found_rate": res.details.get("person_found_rate"), "warning": res.details.get("warning"),
            "person_in_retrieved_rate": res.details.get("person_in_retrieved_rate"),
            "person_posterior": res.details.get("person_posterior"), "attacker": res.details.get("attacker"),
            "per_label": {k: (v["successes"], v["n"]) for k, v in res.details["per_label"].items()},
            "rules": res.details["rules"], "s": round(seconds, 1),
            "s_per_span": round(seconds / spans, 3) if spans else None,
            "examples": [(s["original"], s["replacement"], s["guesses"][:3], s["rule"])
                         for d in res.documents for s in d.facts["spans"]][:6]}


def _outcomes(res) -> dict[tuple, bool]:
    """(doc, original start, original end) -> recovered, for the paired tests."""
    return {(d.id, s.get("orig_start", s["start"]), s.get("orig_end", s["end"])): s["recovered"]
            for d in res.documents for s in d.facts["spans"]}


def _print(r: dict, variant: str = "") -> None:
    print(f"{r['release']:22s} {variant:7s} recovered {r['recovered']:.3f} [{r['ci'][0]:.2f},{r['ci'][1]:.2f}] n={r['n']} "
          f"baseline {r['baseline']:.3f} beats={r['beats_baseline']} by source {r['by_source']} "
          f"person found {r['person_found_rate']}  {r['s']}s ({r['s_per_span']} s/span)"
          + (f"\n    WARNING {r['warning']}" if r.get("warning") else ""), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=TAB)
    ap.add_argument("--sample", type=int, default=200, help="spans attacked per release (a seeded sample)")
    ap.add_argument("--guesses", type=int, default=5)
    ap.add_argument("--knowledge", choices=("background", "context", "both"), default="background")
    ap.add_argument("--background", default="TAB_test_BK=Public.json", help="background file in DATA/bks")
    ap.add_argument("--people", type=int, default=5, help="people whose background is searched per document")
    ap.add_argument("--no-dense", action="store_true", help="find the person by BM25 only (no MiniLM)")
    ap.add_argument("--rank", choices=("fit", "llm"), default="fit",
                    help="background candidates by context fit, or re-ranked by the --llm's log-probabilities")
    ap.add_argument("--context-tokens", type=int, default=384)
    ap.add_argument("--llm", default="qwen2.5-coder-0.5b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--releases", default=",".join(RELEASES), help="comma-separated subset of " + ",".join(RELEASES))
    ap.add_argument("--tri", action="store_true", help="also attack a TRI-format file built from a demo population")
    ap.add_argument("--tri-people", type=int, default=60, help="people in the TRI file's demo population")
    ap.add_argument("--demo", action="store_true", help="also attack the demo population (every span, 40 people)")
    ap.add_argument("--quick", action="store_true",
                    help="12 spans (fewer with --sample), Manual_Entity only (context: 3 guesses, 256 tokens)")
    ap.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    ap.add_argument("--precisions", default=None, metavar="LIST",
                    help="MiniLM's arithmetic side by side on a slice (e.g. fp32,bf16; with --docs): nothing else run")
    ap.add_argument("--predictor", action="store_true",
                    help="the cheap predictor against the --llm on the demo's first --docs documents: nothing else run")
    ap.add_argument("--docs", type=int, default=20,
                    help="--precisions: the first N judgments and their people; --predictor: the first N demo documents")
    ap.add_argument("--cache", type=Path, default=None,
                    help="LLM answer cache (sqlite) to use; default: a fresh one, so the first pass is cold")
    args = ap.parse_args()
    if args.predictor:
        out = predictor_check(args if not args.quick else argparse.Namespace(**{**vars(args), "docs": 2}))
        if args.out:
            args.out.write_text(json.dumps(out, indent=1))
        return
    if args.precisions:
        out = precision_check(args if not args.quick else argparse.Namespace(**{**vars(args), "docs": 2}))
        if args.out:
            args.out.write_text(json.dumps(out, indent=1))
        return
    if args.quick:
        args.sample, args.releases = min(args.sample, 12), "Manual_Entity"
        if args.knowledge != "background":
            args.guesses, args.context_tokens = 3, 256

    t0 = time.perf_counter()
    originals = labelled_originals(args.data)
    names = [n.strip() for n in args.releases.split(",") if n.strip()]
    releases = [load_release_file(args.data / "anonymizations" / RELEASES[n], name=n, originals=originals)[0]
                for n in names]
    background = load_corpus(args.data / "bks" / args.background) if args.knowledge != "context" else None
    load_s = time.perf_counter() - t0

    llm = None
    if args.knowledge != "context":
        print(f"background: {args.background} ({len(background)} people)", flush=True)
    if args.knowledge != "background" or args.rank == "llm":
        from audit.models.specs import load_llm

        cache_path = args.cache or Path(tempfile.mkdtemp(prefix="span-guess-bench-")) / "llm.sqlite"
        print(f"LLM cache: {cache_path}", flush=True)
        llm = load_llm(args.llm, cache=True, cache_path=cache_path, n_ctx=2048, n_parallel=2)
    # the attack's seeded sample of each release's spans (the same spans where the releases replace the
    # same ones); the baseline's and the prior's counts come from the whole release
    attack = SpanGuessAttack(llm=llm, guesses=args.guesses, context_tokens=args.context_tokens, seed=args.seed,
                             sample=args.sample,
                             ner=False, progress=True, knowledge=args.knowledge, people=args.people,
                             dense=not args.no_dense, rank=args.rank)
    scenario = Scenario(originals=originals, background=background, releases=tuple(releases))
    t1 = time.perf_counter()
    attack.fit(scenario)
    if args.knowledge != "context":
        attack.background(scenario)  # the index (and MiniLM over the background sentences), once
    fit_s = time.perf_counter() - t1
    print(f"load {load_s:.1f}s, fit (frequent lemmas, background index) {fit_s:.1f}s", flush=True)

    rows, variants = [], {}
    outcomes: dict[str, dict[tuple, bool]] = {}  # release -> (doc, start, end) -> recovered
    for rel in releases:
        if args.knowledge == "background":
            variants[rel.name] = run_variants(attack, scenario, rel, args.people)
            outcomes[rel.name] = variants[rel.name].pop("_outcomes")
            row = variants[rel.name]["after"]
        else:
            t = time.perf_counter()
            (res,) = attack.evaluate(scenario, rel)
            row = _row(res, time.perf_counter() - t)
            t = time.perf_counter()
            (again,) = attack.evaluate(scenario, rel)
            row["warm_s"] = round(time.perf_counter() - t, 2)
            assert again.value == res.value
            _print(row)
            outcomes[rel.name] = _outcomes(res)
        rows.append(row)

    paired = paired_tests(outcomes)
    for p in paired:
        print(f"{p['a']} vs {p['b']}: recovered only by {p['a']} {p['only_a']}, only by {p['b']} {p['only_b']}, "
              f"exact sign test p = {p['p']:.3f}", flush=True)
    summary = {"knowledge": args.knowledge, "background": args.background if background is not None else None,
               "llm": llm.identity if llm is not None else None, "sample": args.sample, "guesses": args.guesses,
               "people": args.people, "dense": not args.no_dense, "rank": args.rank, "seed": args.seed, "load_s": round(load_s, 1),
               "fit_s": round(fit_s, 1), "releases": rows, "variants": variants, "paired": paired}
    if args.tri:
        t = time.perf_counter()
        summary["tri"] = tri_check(seed=args.seed + 7, n=args.tri_people, guesses=args.guesses, people=args.people)
        summary["tri"]["s"] = round(time.perf_counter() - t, 1)
    if args.demo:
        t = time.perf_counter()
        summary["demo"] = demo_check(seed=args.seed, n=40, people=args.people)
        summary["demo"]["s"] = round(time.perf_counter() - t, 1)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("releases", "tri", "demo", "variants")}, indent=1))
    for r in rows:
        print(r["release"], "per label (recovered, n):", r["per_label"], "rules:", r["rules"])
        for ex in r["examples"]:
            print("   ", ex)
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    if llm is not None:
        llm.close()


if __name__ == "__main__":
    main()
