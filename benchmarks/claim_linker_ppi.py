"""The claim linker's leakage, prediction-powered against every document judged (issue 69).

    python benchmarks/claim_linker_ppi.py --quick                  # 12 people, one release (~2 min cold)
    python benchmarks/claim_linker_ppi.py --modes ppi,plain        # the demo population: 40 people
    python benchmarks/claim_linker_ppi.py --modes full,full-population --cache SAME   # then the exact figures
    python benchmarks/claim_linker_ppi.py --tab Manual_Entity --tab-docs 10 --modes ppi --paraphrase
                                                                   # a slice of a TAB release, projected
    python benchmarks/claim_linker_ppi.py --tab Manual_Entity,Manual_Dou,spaCy_Entity --tab-docs 30 \
        --modes full,ppi --target 0.10 --paraphrase --cache SAME   # side by side on 3 releases

On the development population of the demo (40 people; releases ``labels``, ``generalized``,
``suppressed``), the claim linker with the embedded 1.5B judge, the attack's defaults otherwise
(but no paraphrasing unless ``--paraphrase``), in one of four modes per run (the same seed, so the same links and the same seeded order):

* ``ppi``: the standard budget (±0.05), every linked document scored by the cheap predictor,
  the judge on a seeded sample (the default now);
* ``plain``: the same target with ``score_predictor=none`` (the plain sequential sample);
* ``full``: ``--budget full`` (every document judged: the exact figure about this release);
* ``full-population``: every document judged, the interval about documents like these (the
  one an all-judged figure has for the comparison "each inside the other's interval").

``--tab NAME[,NAME...]``: a seeded slice of ``--tab-docs`` TAB test judgments (../shared/data/tab) and
the releases NAME of them instead (in the order given), with the projection to the whole release (the stages that
grow with the text by characters, the judge by the documents it would judge at the target).
``--target``: the half-width the ``ppi`` and ``plain`` modes sample to (the standard budget's 0.05
unless given; a slice of 30 needs every document judged at 0.05).

The predictor table (issue 69 item 2): in the ``full`` modes (every document judged), each of the
cheap features (its mean over a document's claims) and the fitted predictor (cross-fitted by
document) against the judge's leakage of the same documents: Pearson's r, and the share of the
judge's questions that a predictor of that r saves at the same half-width (r squared: PPI's
residual variance is (1 - r^2) times the plain sample's, for a large release and a tuned lambda;
none below 0, as lambda is clipped to [0, 1]).

Per release: the figure and its interval, documents judged and scored, the judge's questions
(``llm_requests``), the predictor's correlation with the judge on the judged documents (document
level) and lambda, the seconds of scoring (``timings.score``: the judge, its control once, the
predictor) and the LLM's backend calls and cache hits. Runs sharing ``--cache`` share answers:
the first is cold, later ones reuse what it asked (their questions are still counted). Say how busy
the machine was. Writes --out (JSON, one key per mode, merged into an existing file), prints Markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from anonaudit.demo.population import development_population  # noqa: E402
from attackers.claim_linker import ClaimLinkerAttack  # noqa: E402
from audit.core.data import Scenario  # noqa: E402
from audit.models.embed import Embedder  # noqa: E402
from audit.models.specs import load_llm  # noqa: E402

MODES = {"ppi": {}, "plain": {"score_predictor": "none"}, "full": {"score_target": None},
         "full-population": {"score_target": None, "score_estimand": "population"}}


def predictor_table(attack, release: str) -> dict | None:
    """Each feature's and the fitted predictor's correlation with the judge on the judged documents
    (every one in the full modes), and the share of questions r squared saves; None without a fit."""
    import numpy as np

    from attackers.claim_linker import powered
    from audit.core.ppi import PredictorUnavailable, agreement

    predict, values = attack.powered_inputs_.get(release, (None, {}))
    if not isinstance(predict, powered.LeakagePredictor):
        return None
    judged = [d for d in predict.order if d in values]
    y = [float(np.mean(values[d])) for d in judged]
    rows = {d: [r for r, o in enumerate(predict.claim_doc) if o == d] for d in judged}
    table = {}
    for j, name in enumerate(powered.FEATURES):
        r = agreement(y, [float(predict.features[rows[d], j].mean()) for d in judged])
        table[name] = None if r is None else {"r": round(r, 3), "saves": round(max(r, 0.0) ** 2, 3)}
    try:
        scores = predict(values)
        r = agreement(y, [scores[d] for d in judged])
        table["fitted (cross-fitted logistic regression)"] = None if r is None else {"r": round(r, 3),
                                                                                      "saves": round(max(r, 0.0) ** 2, 3)}
    except PredictorUnavailable as exc:
        table["fitted (cross-fitted logistic regression)"] = {"unavailable": str(exc)}
    return {"documents": len(judged), "leakage_sd": round(float(np.std(y)), 4), "predictors": table}


def run_mode(mode: str, scenario: Scenario, llm, embedder, seed: int, paraphrase: bool,
             target: float | None = None) -> dict:
    params = dict(MODES[mode])
    if target is not None and "score_target" not in params:
        params["score_target"] = target
    attack = ClaimLinkerAttack(llm=llm, embedder=embedder, seed=seed, progress=True, paraphrase=paraphrase,
                               **params)
    before = dict(llm.stats)
    started = time.perf_counter()
    attack.fit(scenario)
    out = {"fit_seconds": round(time.perf_counter() - started, 1), "releases": {}}
    for rel in scenario.releases:
        t = time.perf_counter()
        link, sem, _ = attack.evaluate(scenario, rel)
        d, e = sem.details, sem.details["estimate"]
        out["releases"][rel.name] = {
            "value": round(sem.value, 4), "ci": [round(c, 4) for c in sem.ci], "made": d["made"],
            "judged": e["judged"], "scored": e["scored"], "questions": d["llm_requests"],
            "agreement": e["agreement"], "lambda": e["lambda"], "fallback": e["fallback"],
            "judge": d["judge"], "control_passed": (d["judge_check"] or {}).get("passed"),
            "seconds": round(time.perf_counter() - t, 1),
            "score_seconds": round(attack.stats()["timings"][rel.name].get("score", 0.0), 1),
            "timings": {k: round(v, 1) for k, v in attack.stats()["timings"][rel.name].items()},
            "claims_left_out": d["claims_left_out"], "rating_counts": d["rating_counts"],
            "once_seconds": round(getattr(attack, "once_seconds_", 0.0), 1),
            "linkage": round(link.value, 4), "paraphrase_failures": link.details["paraphrase_failures"]}
        if mode.startswith("full"):
            out["releases"][rel.name]["predictor_table"] = predictor_table(attack, rel.name)
        print(mode, rel.name, out["releases"][rel.name], file=sys.stderr, flush=True)
    out["llm"] = {k: llm.stats[k] - before.get(k, 0) for k in llm.stats}
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def tab_slice(names: list[str], docs: int, seed: int) -> tuple[Scenario, int, list[str]]:
    """A seeded slice of ``docs`` TAB test judgments and the releases ``names`` of them (in that
    order); the whole test set's size is kept in ``TAB_TOTAL`` for the projection."""
    import random

    from audit.core.data import Corpus, Release
    from audit.io.loaders import load_corpus, load_release_file

    tab = ROOT.parent / "shared" / "data" / "tab"
    originals = load_corpus(tab / "bks" / "TAB_test_BK=Original.json", name="originals")
    keep = sorted(random.Random(seed).sample([d.id for d in originals], docs))
    TAB_TOTAL.update(documents=len(originals), characters=sum(len(d.text) for d in originals),
                     slice_characters=sum(len(originals[i].text) for i in keep), slice=keep)
    releases = []
    for name in names:
        (release,) = load_release_file(tab / "anonymizations" / f"TAB_test_{name}.json", name=name,
                                       originals=originals)
        releases.append(Release(name, Corpus([release.corpus[i] for i in keep], name=name),
                                sanitizer=release.sanitizer, source=release.source))
    return Scenario(originals=Corpus([originals[i] for i in keep], name="originals"), releases=tuple(releases)), \
        docs, names


#: The whole TAB test set, for the projection of a --tab slice.
TAB_TOTAL: dict[str, int] = {}


def markdown(report: dict) -> str:
    lines = ["| release | mode | leakage | 95% interval | judged / scored | questions | corr | lambda | score s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for mode, res in report.items():
        if not isinstance(res, dict) or "releases" not in res:
            continue
        for rel, r in res["releases"].items():
            corr = "" if r["agreement"] is None else f"{r['agreement']:.2f}"
            lines.append(f"| {rel} | {mode} | {r['value']:.3f} | {r['ci'][0]:.3f}-{r['ci'][1]:.3f} | "
                         f"{r['judged']} / {r['scored']} | {r['questions']} | {corr} | {r['lambda']:.2f} | "
                         f"{r['score_seconds']} |")
    for mode, res in report.items():
        for rel, r in (res.get("releases") or {}).items() if isinstance(res, dict) else ():
            t = r.get("predictor_table")
            if t:
                lines.append(f"\npredictors, {rel} ({mode}; {t['documents']} documents, leakage sd {t['leakage_sd']}):")
                lines += [f"- {name}: " + (f"r {v['r']}, saves {v['saves']}" if v and "r" in v else str(v))
                          for name, v in t["predictors"].items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="12 people, the labels release, modes ppi and full")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--releases", default="labels,generalized,suppressed")
    ap.add_argument("--modes", default="ppi,plain,full,full-population")
    ap.add_argument("--llm", default=None, help="LLM spec (default: the embedded 1.5B)")
    ap.add_argument("--cache", default=None, help="answer cache (default: a fresh file: cold)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--paraphrase", action="store_true",
                    help="reword the attacker's claims with the LLM (the attack's default; ~5 s a claim on 2 "
                         "busy cores, and the judge's questions do not depend on it beyond which records link)")
    ap.add_argument("--tab", default=None, help="TAB test releases, comma-separated (e.g. Manual_Entity) "
                                                 "instead of the demo")
    ap.add_argument("--target", type=float, default=None, help="half-width of the ppi and plain modes (0.05)")
    ap.add_argument("--tab-docs", type=int, default=10, help="judgments in the --tab slice (seeded)")
    ap.add_argument("--out", default="claim_linker_ppi.json")
    args = ap.parse_args()
    n, names, modes = (12, ["labels"], ["ppi", "full"]) if args.quick else \
        (args.n, args.releases.split(","), args.modes.split(","))
    if args.tab:
        scenario, n, names = tab_slice(args.tab.split(","), args.tab_docs, args.seed)
    else:
        demo = development_population(n=n, seed=args.seed)
        scenario = Scenario(originals=demo.originals, releases=tuple(demo.releases[r] for r in names))
    cache = args.cache or str(Path(tempfile.mkdtemp()) / "llm.sqlite")
    llm = load_llm(args.llm, cache_path=cache)
    embedder = Embedder()
    out = Path(args.out)
    report = json.loads(out.read_text()) if out.exists() else {}
    for mode in modes:
        report[mode] = run_mode(mode, scenario, llm, embedder, args.seed, args.paraphrase, args.target)
        report[mode].update(cache=cache, n=n, paraphrase=args.paraphrase, release_names=names,
                            **({"tab": dict(TAB_TOTAL)} if args.tab else {}))
        out.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(markdown(report))


if __name__ == "__main__":
    main()
