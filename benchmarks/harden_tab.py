"""``anonaudit harden`` (issue 20) on the demo population and on TAB: what each round closes and
what it costs, against sanitizing the whole document with the delinker or INTACT.

Datasets (``--datasets demo,tab``):

* ``demo``: the synthetic population (``--demo-n`` people, seed ``--seed``), release
  ``--demo-release`` (default ``generalized``: names masked, places and dates replaced by coarser
  truthful terms, so both kinds of repair have work), the first ``--demo-docs`` documents;
* ``tab``: the first ``--docs`` TAB test documents of ``spaCy_Entity`` (spaCy's entities replaced
  by their type); the adversary searches all 127 originals.

The loop is the real one (:class:`audit.pipeline.harden.Harden` on an audit spec written to a
scratch folder): phrase search (k = 2) and span guessing (``--loop-spans`` spans per round,
``--guesses`` guesses) attack each round; their evidence goes to the delinker (linking phrases)
and INTACT (recovered spans); the gate is ``phrase_search <= 0`` and ``span_guess <= 0`` on the
point estimate, so the loop runs until nothing is found or ``--max-rounds``.

Every release (the input, each round, and with ``--baselines``: the delinker over the whole
input release, INTACT over the whole original with the input's spans) is then measured the same
way: phrase-search linkage at arity 1 and <= 3 against the whole collection, span-guess recovery on
one fixed sample of ``--guess-spans`` spans of the input, TPI/TPS and embedding similarity
(:func:`tab.utility`), the share of the input's characters changed, and LLM tokens per document
(the loop's attack tokens apart from its repair tokens).

    python benchmarks/harden_tab.py --docs 20 --out harden_tab.json                 # 1.5B, CPU
    python benchmarks/harden_tab.py --quick     # a smoke run: one TAB document, the 0.5B, one round
    python benchmarks/harden_tab.py --llm openai:MODEL@http://host:8000/v1 --docs 20
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tab import (bench_llm, labelled_originals, linkage, machine, parser, published, sample_spans,  # noqa: E402
                 span_recovery, utility, write_out)


def demo_data(args):
    """(collection, originals with gold spans, input release) of the demo population."""
    from audit.core.data import Corpus, Release
    from anonaudit.demo.population import development_population

    data = development_population(n=args.demo_n, seed=args.seed)
    rel = data.releases[args.demo_release]
    docs = list(rel.corpus)[:args.demo_docs]
    ids = [d.id for d in docs]
    originals = Corpus([data.originals[i] for i in ids], name="demo")
    return data.originals, originals, Release(f"demo:{args.demo_release}", Corpus(docs, name="input"))


def tab_data(args):
    """(collection, originals with gold spans, input release) of the first TAB test documents."""
    from audit.core.data import Corpus

    full = labelled_originals(args.data)
    ids = full.ids[:args.docs]
    rel = published("tab:spaCy_Entity", "TAB_test_spaCy_Entity.json", full, ids, args.data)
    return full, Corpus([full[i] for i in ids], name="TAB"), rel


@contextlib.contextmanager
def shared_llm(llm, spec: str):
    """Every component of the loop that asks the run's resources for ``spec`` (or the default
    model) gets the benchmark's LLM, with its answer cache and token counts."""
    from audit.models.resources import Resources

    own = Resources.llm

    def pick(self, wanted=None, **kw):
        return llm if wanted in (None, spec) or wanted is llm else own(self, wanted, **kw)

    Resources.llm = pick
    try:
        yield
    finally:
        Resources.llm = own


def changed_share(before, after) -> float:
    """Share of the input's characters that a release changed (token alignment)."""
    from audit.core.align import align

    total = changed = 0
    for d in before:
        new = after.corpus.get(d.id)
        total += len(d.text)
        if new is not None:
            changed += sum((s.orig_end or 0) - (s.orig_start or 0) for s in align(d.text, new.text))
    return changed / max(1, total)


def run_loop(args, llm, collection, release, work: Path):
    """The harden loop on ``release``: its rounds (as releases) and their records."""
    import yaml

    from audit.core.data import Release
    from audit.io.loaders import save_jsonl
    from audit.pipeline.harden import Harden, round_name
    from audit.pipeline.releases import read_release_jsonl
    from audit.pipeline.runner import load_spec

    save_jsonl(collection, work / "originals.jsonl")
    save_jsonl(release.corpus, work / "input.jsonl")
    spec = {"title": f"harden {release.name}", "seed": args.seed, "out": "out", "originals": "originals.jsonl",
            "releases": [{"name": "input", "path": "input.jsonl"}],
            # every linking phrase is evidence (the report's default keeps 10 per document)
            "attacks": [{"name": "phrase_search", "params": {"k": 2, "arity": args.arity, "max_evidence": 100_000}},
                        {"name": "span_guess", "params": {"guesses": args.guesses, "context_tokens": 384,
                                                          **({"sample": args.loop_spans} if args.loop_spans else {})}}],
            "models": {"llm": args.llm},
            "gate": {"max": {"phrase_search": 0.0, "span_guess": 0.0}, "on_point": True}}
    (work / "audit.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    h = Harden(load_spec(work / "audit.yaml"), "input", max_rounds=args.max_rounds,
               repair_params={"delinker": {"llm": llm}, "intact": {"llm": llm}}, progress=True)
    t0 = time.perf_counter()
    with shared_llm(llm, args.llm):
        outcome = h.run()
    seconds = time.perf_counter() - t0
    made = {m["release"]: m["path"] for m in json.loads(h.manifest_path.read_text())["made"]}
    rounds = []
    for r in outcome.rounds:
        rel = release if r.number == 0 else read_release_jsonl(Path(made[round_name("input", r.number)]), r.release)
        rounds.append((Release(f"{release.name} round {r.number}", rel.corpus, aligned=True), r))
    return rounds, outcome, seconds


def main() -> None:
    ap = parser(__doc__, 20, "the first N documents of spaCy_Entity",
                quick={"datasets": "tab", "max_rounds": 1, "loop_spans": 3, "guess_spans": 3, "guesses": 2,
                       "baselines": "none", "no_utility": True})
    ap.add_argument("--datasets", default="demo,tab")
    ap.add_argument("--demo-n", type=int, default=40, help="people in the demo population (its collection)")
    ap.add_argument("--demo-docs", type=int, default=20, help="demo documents hardened")
    ap.add_argument("--demo-release", default="generalized", choices=("generalized", "labels", "suppressed"))
    ap.add_argument("--max-rounds", type=int, default=3)
    ap.add_argument("--arity", type=int, default=1, help="phrase-search arity inside the loop")
    ap.add_argument("--loop-spans", type=int, default=30, help="spans span guessing attacks per round (0: all)")
    ap.add_argument("--guess-spans", type=int, default=30, help="spans sampled for the before/after recovery")
    ap.add_argument("--guesses", type=int, default=5)
    ap.add_argument("--baselines", default="delinker,intact", help="whole-document sanitizers to compare ('none')")
    ap.add_argument("--no-utility", action="store_true", help="skip TPI/TPS/similarity (they load a 0.5B scorer)")
    args = ap.parse_args()

    from audit.core.data import Corpus, Document, Release, Span
    from audit.runtime.progress import stage
    from defenders.delinker import Delinker
    from defenders.intact import IntactSanitizer

    llm = bench_llm(args, "harden-bench-")
    figures: dict[str, dict] = {}
    all_ids: list[str] = []
    for dataset in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        collection, originals, source = (demo_data if dataset == "demo" else tab_data)(args)
        n = len(source)
        all_ids += [f"{dataset}:{i}" for i in source.corpus.ids]
        print(f"\n== {dataset}: {n} documents of {source.name}; collection {len(collection)} originals", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"harden-{dataset}-") as tmp:
            rounds, outcome, loop_s = run_loop(args, llm, collection, source, Path(tmp))
        releases = [rel for rel, _ in rounds]
        costs: dict[str, dict] = {}
        for rel, r in rounds:
            rep = r.repair or {}
            tok = rep.get("llm_tokens", {})
            costs[rel.name] = {"gate": r.gate, "targets": dict(r.targets), "by_attack": dict(r.by_attack),
                               "exposed_docs": r.exposed,
                               "attack_tokens_per_doc": {k: v / n for k, v in r.attack_tokens.items()},
                               "repair_tokens_per_doc": {k: v / n for k, v in tok.items()},
                               "repair": {k: v for k, v in rep.items() if k in ("text", "span")}}
        print(f"loop stopped: {outcome.stopped} after {len(rounds) - 1} round(s), {loop_s / n:.0f} s/doc "
              f"({machine()})", flush=True)
        for base in [b.strip() for b in args.baselines.split(",") if b.strip() and b.strip() != "none"]:
            with stage(f"{base} over the whole document"):
                before = dict(llm.usage)
                t0 = time.perf_counter()
                if base == "delinker":
                    san = Delinker(collection=collection, llm=llm, seed=args.seed, arity=args.arity)
                    rel = san.sanitize(source.corpus, name=f"{source.name} delinker (whole)")
                else:
                    # INTACT on the originals, replacing the spans the input release replaced
                    spans = {d.id: [Span(s.orig_start, s.orig_end, s.label, s.entity_id, s.identifier_type)
                                    for s in d.spans if s.orig_start is not None and s.orig_end is not None
                                    and s.orig_end > s.orig_start]
                             for d in source}
                    base_docs = Corpus([Document(o.id, o.text, o.subject, tuple(spans.get(o.id, ()))) for o in originals],
                                       name="intact-input")
                    san = IntactSanitizer(llm=llm, seed=args.seed, guesses=args.guesses)
                    rel = san.sanitize(base_docs, name=f"{source.name} intact (whole)")
                seconds = time.perf_counter() - t0
                spent = {k: (llm.usage[k] - before[k]) / n for k in before}
                costs[rel.name] = {"sanitizer_tokens_per_doc": spent, "seconds_per_doc": seconds / n,
                                   "stats": json.loads(json.dumps(san.stats(), default=str))}
                releases.append(Release(rel.name, rel.corpus, aligned=True))
                san.close()
        with stage("phrase-search linkage"):
            links = linkage(collection, releases, arities=sorted({1, 3}))
        keys = sample_spans(source, args.guess_spans, args.seed)
        with stage(f"span-guess recovery on {len(keys)} sampled spans"):
            recovery = span_recovery(llm, originals, releases, keys, guesses=args.guesses, seed=args.seed)
        util = {} if args.no_utility else utility(originals, releases)
        rows = []
        for rel in releases:
            rows.append({"release": rel.name, "linked_a1": links[rel.name]["a1"]["rate"],
                         "linked_a3": links[rel.name]["a3"]["rate"], "residual_a1": links[rel.name]["a1"]["residual"],
                         "recovered": recovery[rel.name]["recovered"], "recovered_n": recovery[rel.name]["n"],
                         "changed_chars": changed_share(source, rel),
                         **{m: v["value"] for m, v in util.get(rel.name, {}).items()}, **costs.get(rel.name, {})})
        print(f"\n| {dataset} release | linked a=1 | linked a≤3 | spans recovered | chars changed | TPI | TPS | "
              "similarity | targets (text/span) | tokens/doc: attacks + repair (or sanitizer) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            att = r.get("attack_tokens_per_doc", {})
            rep = r.get("repair_tokens_per_doc") or r.get("sanitizer_tokens_per_doc") or {}
            tk = (f"{sum(att.values()):.0f} + {sum(rep.values()):.0f}" if att else f"{sum(rep.values()):.0f}")
            tg = r.get("targets")
            print(f"| {r['release']} | {r['linked_a1']:.2f} | {r['linked_a3']:.2f} | {r['recovered']:.2f} "
                  f"(n={r['recovered_n']}) | {r['changed_chars']:.3f} | {r.get('tpi', float('nan')):.3f} | "
                  f"{r.get('tps', float('nan')):.3f} | {r.get('similarity', float('nan')):.3f} | "
                  f"{(str(tg.get('text', 0)) + '/' + str(tg.get('span', 0))) if tg else '–'} | {tk} |", flush=True)
        figures[dataset] = {"rows": rows, "stopped": outcome.stopped, "loop_seconds_per_doc": loop_s / n,
                            "machine": machine()}
    write_out(args, llm, all_ids, **figures)
    llm.close()


if __name__ == "__main__":
    main()
