"""The claim linker's semantic-leakage judges side by side, on the same seeded claims.

    python benchmarks/claim_linker_judge.py --quick     # 8 control claims, 2 TAB documents x 2 releases
    python benchmarks/claim_linker_judge.py             # 16 control claims per data set, 4 TAB docs x 4 releases

Questions (every judge answers the same ones, built by the attack itself):

* **control**: ``--control`` seeded claims of the originals (never the attacker's aux claims),
  each against the sentences of its own document most related to it (true leakage 1) and
  against another original's (true leakage ~0): ``ClaimLinkerAttack._control_pairs``. On TAB
  (the ``--pool`` shortest test documents) and on the demo's synthetic population.
* **releases**: on TAB, the same ``--docs`` seeded documents in every release (identity,
  entity labels, suppression, an NER release), up to ``--claims`` seeded non-aux claims each,
  judged against the sentences of *that document's* sanitized version most related to them
  (the true match, so that linking errors do not blur the judges' comparison).

Judges: ``yesno:MODEL`` (log P(Yes) vs log P(No), the attack's default), ``yesno-cal:MODEL``
(that margin minus the margin with the content-free passage "N/A": the attack's
``yesno-calibrated``), ``yesno-strict:MODEL`` (a stricter question, :data:`STRICT`, swapped into
the judge for that row only), ``rating:MODEL`` / ``rating3:MODEL`` (one generated word of
same/similar/no, greedy / mode of 3: the earlier judge), ``minilm`` (cosine of the claim and its
best evidence sentence >= 0.5: a cheap reference without an LLM). MODEL is 0.5b or 1.5b. ``--reference`` names the
judge whose decisions the others are compared with (Cohen's kappa, % agreement) on the TAB
release questions. Seconds per claim are measured on a cold answer cache (``--cache`` is a
fresh file per run unless given), on the machine as it is (say how busy it was).

Data: ../shared/data/tab (not part of the repository). Writes --out (JSON), prints Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from attackers.claim_linker import ClaimLinkerAttack, SentenceSplitter  # noqa: E402
from attackers.claim_linker.judge import (  # noqa: E402
    NULL_PASSAGE, judge_request, margin_rating, mode_rating, parse_verdict, yesno_margin,
)
from audit.core.data import Corpus, Release, Scenario  # noqa: E402
from audit.io.loaders import load_corpus, load_release_file  # noqa: E402
from audit.models.embed import Embedder  # noqa: E402

from attackers.claim_linker.judge import _YESNO_SYSTEM as PLAIN  # noqa: E402

#: A stricter question: the same details, none left out or hidden (candidate).
STRICT = (
    "You check what a passage tells its reader about a person or a case. Given a passage and a fact, answer "
    "Yes only if the passage states this fact with the same details (who, what, when, where, how much). Answer "
    "No if the passage does not mention it, tells a similar fact with other details, or leaves out or hides a "
    "detail of the fact (a gap, or a placeholder such as [PERSON], [DATE], DATETIME or ***). Answer Yes or No."
)
TAB = ROOT.parent / "shared" / "data" / "tab"
SPECS = {"0.5b": "qwen2.5-coder-0.5b", "1.5b": "qwen2.5-coder-1.5b"}


def build_attack(originals: Corpus, releases: tuple[Release, ...], embedder, seed: int, control: int):
    attack = ClaimLinkerAttack(embedder=embedder, paraphrase=False, seed=seed, judge_check=control)
    attack._splitter = SentenceSplitter(clauses=False)
    attack.fit(Scenario(originals=originals, releases=releases))
    return attack


def release_items(attack, originals: Corpus, release: Release, ids: list[str], claims_per_doc: int, seed: int):
    """``(doc id, evidence, claim)`` for up to ``claims_per_doc`` seeded non-aux claims of each
    original in ``ids``, against its own sanitized version in ``release``."""
    items = []
    by_id = {d.id: d for d in release.corpus}
    pos = {d.id: k for k, d in enumerate(originals)}
    for doc_id in ids:
        i = pos[doc_id]
        aux = set(attack.aux_index_[doc_id])
        ks = [k for k in range(len(attack.orig_claims_[i])) if k not in aux]
        ks = sorted(random.Random(f"{seed}:claims:{doc_id}").sample(ks, min(claims_per_doc, len(ks))))
        claims = [attack.orig_claims_[i][k].text for k in ks]
        doc = by_id[doc_id]
        (rel_claims,) = attack._get_splitter().split([doc])
        vecs = attack._get_embedder().encode([c.text for c in rel_claims]) if rel_claims else None
        evidence, _ = attack._evidence(claims, doc, rel_claims, vecs)
        items += [(doc_id, ev, c) for ev, c in zip(evidence, claims)]
    return items


class Judge:
    """One candidate: ``decide(items) -> (decisions 1/2/3, scores)`` and its seconds per claim."""

    def __init__(self, name: str, cache: Path, embedder):
        self.name, self.cache, self.embedder = name, cache, embedder
        self.kind, _, size = name.partition(":")
        self.llm = None
        self.seconds = 0.0
        self.asked = 0
        self.load_seconds = 0.0

    def _model(self):
        if self.llm is None:
            from audit.models.specs import load_llm

            t = time.perf_counter()
            self.llm = load_llm(SPECS[self.name.split(":")[1]], cache_path=self.cache)
            self.load_seconds = time.perf_counter() - t
        return self.llm

    def decide(self, items: list[tuple[str, str]]) -> tuple[list[int | None], list[float]]:
        t = time.perf_counter()
        if self.kind == "minilm":
            out = self._minilm(items)
        elif self.kind in ("yesno", "yesno-cal", "yesno-strict"):
            llm = self._model()
            from attackers.claim_linker import judge as judge_module

            judge_module._YESNO_SYSTEM = STRICT if self.kind == "yesno-strict" else PLAIN
            margins = [yesno_margin(llm, ev, c) for ev, c in items]
            if self.kind == "yesno-cal":  # against the same question with a content-free passage
                margins = [m - yesno_margin(llm, NULL_PASSAGE, c) for m, (_, c) in zip(margins, items)]
            out = [margin_rating(m) for m in margins], margins
        else:  # rating / rating3 (mode of 3: greedy + 2 sampled)
            llm = self._model()
            reps = 3 if self.kind == "rating3" else 1
            reqs = [judge_request(ev, c, seed=r, temperature=0.0 if r == 0 else 0.7)
                    for ev, c in items for r in range(reps)]
            verdicts = [parse_verdict(a) for a in llm.complete_batch(reqs)]
            ratings = [mode_rating(verdicts[k * reps:(k + 1) * reps]) for k in range(len(items))]
            out = ratings, [float(r or 0) for r in ratings]
        self.seconds += time.perf_counter() - t
        self.asked += len(items)
        return out

    def _minilm(self, items):
        """Cosine of the claim and its best evidence sentence (split at periods); 'stated' at >= 0.5."""
        scores = []
        for ev, c in items:
            sents = [s.strip() for s in ev.replace("\n", " ").split(". ") if s.strip()] or [""]
            vecs = self.embedder.encode([c, *sents])
            scores.append(float(np.max(vecs[1:] @ vecs[0])))
        return [1 if s >= 0.5 else 3 for s in scores], scores


def stated(r: int | None) -> int:
    return 1 if r == 1 else 0


def kappa(a: list[int], b: list[int]) -> tuple[float, float]:
    """Cohen's kappa and % agreement of two binary decision lists."""
    n = len(a)
    agree = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return (1.0 if pe == 1 else (agree - pe) / (1 - pe)), agree


def auc(pos: list[float], neg: list[float]) -> float:
    """P(score of an own-document question > score of an other-document one), ties half."""
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def leak(ratings: list[int | None]) -> float | None:
    valid = [r for r in ratings if r is not None]
    return None if not valid else 1.0 - sum((r - 1) / 2 for r in valid) / len(valid)


def demo_originals(n: int, seed: int) -> Corpus:
    from audit.demo.data import write

    folder = Path(tempfile.mkdtemp(prefix="judge-demo-"))
    write(folder, n=n, seed=seed)
    return load_corpus(folder / "originals.jsonl", name="originals")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 control claims, 2 documents x 2 releases, yes/no only")
    ap.add_argument("--data", default=str(TAB))
    ap.add_argument("--judges", default="minilm,yesno:0.5b,yesno:1.5b,rating:1.5b")
    ap.add_argument("--reference", default="rating:1.5b", help="judge the others are compared with")
    ap.add_argument("--releases", default="Manual_Entity,Manual_Supression,St.NER3_Entity")
    ap.add_argument("--pool", type=int, default=30, help="TAB: the N shortest test documents")
    ap.add_argument("--docs", type=int, default=4, help="TAB documents scored per release")
    ap.add_argument("--claims", type=int, default=5, help="claims per scored document")
    ap.add_argument("--control", type=int, default=16, help="control claims per data set")
    ap.add_argument("--demo-n", type=int, default=40, help="people in the demo population (its control)")
    ap.add_argument("--cache", default=None, help="LLM answer cache (default: a fresh file: cold timings)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="claim_linker_judge.json")
    args = ap.parse_args()
    if args.quick:
        args.control, args.docs, args.releases = 8, 2, "Manual_Entity"
        args.judges, args.reference = "minilm,yesno:0.5b,yesno:1.5b", "yesno:1.5b"
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="judge-cache-")) / "llm.sqlite"
    # ------------------------------------------------------------------ questions
    data = Path(args.data)
    everyone = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="originals")
    keep = {d.id for d in sorted(everyone, key=lambda d: len(d.text))[: args.pool]}
    originals = Corpus([d for d in everyone if d.id in keep], name="originals")
    releases = [Release("identity", originals)]
    for name in args.releases.split(","):
        rel = load_release_file(data / "anonymizations" / f"TAB_test_{name}.json", name=name, originals=everyone)[0]
        releases.append(Release(name, Corpus([d for d in rel.corpus if d.id in keep], name=name)))
    embedder = Embedder()
    judges = [Judge(name, cache, embedder) for name in args.judges.split(",")]
    attack = build_attack(originals, tuple(releases), embedder, args.seed, args.control)
    own, other = attack._control_pairs(originals, dense=True)
    ids = sorted(random.Random(f"{args.seed}:docs").sample(originals.ids, args.docs))
    rel_items = {r.name: release_items(attack, originals, r, ids, args.claims, args.seed) for r in releases}
    demo = demo_originals(args.demo_n, args.seed)
    dattack = build_attack(demo, (Release("identity", demo),), embedder, args.seed, args.control)
    d_own, d_other = dattack._control_pairs(demo, dense=True)
    report: dict = {"args": vars(args), "tab_docs": ids, "control": {}, "releases": {}, "agreement": {},
                    "examples": {}}

    # ------------------------------------------------------------------ judging
    flat_rel = [(ev, c) for name in rel_items for _, ev, c in rel_items[name]]
    decisions: dict[str, list[int | None]] = {}
    for j in judges:
        row = {}
        for label, (o, x) in {"tab": (own, other), "demo": (d_own, d_other)}.items():
            r_own, s_own = j.decide(o)
            r_oth, s_oth = j.decide(x)
            if label == "tab":
                s_tab = ([round(v, 4) for v in s_own], [round(v, 4) for v in s_oth])
            row[label] = {"own": leak(r_own), "other": leak(r_oth), "auc": round(auc(s_own, s_oth), 3),
                          "claims": len(o)}
        report["control"][j.name] = row
        ratings, scores = j.decide(flat_rel)
        decisions[j.name] = ratings
        report.setdefault("scores", {})[j.name] = {"tab_own": s_tab[0], "tab_other": s_tab[1],
                                                   "releases": [round(x, 4) for x in scores]}
        pos = 0
        for name, items in rel_items.items():
            part = ratings[pos:pos + len(items)]
            per_doc = {}
            for (doc_id, _, _), r in zip(items, part):
                per_doc.setdefault(doc_id, []).append(r)
            vals = [leak(v) for v in per_doc.values() if leak(v) is not None]
            report["releases"].setdefault(name, {})[j.name] = {
                "leakage": round(sum(vals) / len(vals), 3) if vals else None, "claims": len(items),
                "stated": sum(stated(r) for r in part)}
            pos += len(items)
        report.setdefault("seconds_per_claim", {})[j.name] = round(j.seconds / max(1, j.asked), 3)
        report.setdefault("load_seconds", {})[j.name] = round(j.load_seconds, 1)
        print(j.name, json.dumps(row), f"{j.seconds / max(1, j.asked):.2f} s/claim", file=sys.stderr)
        Path(args.out).write_text(json.dumps(report, indent=1))
    ref = decisions.get(args.reference)
    if ref is not None:
        for name, dec in decisions.items():
            k, agree = kappa([stated(r) for r in dec], [stated(r) for r in ref])
            report["agreement"][name] = {"kappa": round(k, 3) if not math.isnan(k) else None,
                                         "agreement": round(agree, 3), "n": len(ref)}
    report["examples"] = [{"evidence": ev[:300], "claim": c, **{n: d[k] for n, d in decisions.items()}}
                          for k, (ev, c) in enumerate(flat_rel[:: max(1, len(flat_rel) // 12)])]
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(markdown(report))


def markdown(report: dict) -> str:
    names = list(report["control"])
    lines = ["| judge | TAB own | TAB other | TAB AUC | demo own | demo other | demo AUC | s/claim | "
             + " | ".join(report["releases"]) + " | kappa vs ref | agreement |",
             "|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(report["releases"]) + "---:|---:|"]
    for n in names:
        c = report["control"][n]
        rels = " | ".join(f"{report['releases'][r][n]['leakage']}" for r in report["releases"])
        ag = report["agreement"].get(n, {})
        lines.append(f"| {n} | {c['tab']['own']:.3f} | {c['tab']['other']:.3f} | {c['tab']['auc']} | "
                     f"{c['demo']['own']:.3f} | {c['demo']['other']:.3f} | {c['demo']['auc']} | "
                     f"{report['seconds_per_claim'][n]} | {rels} | {ag.get('kappa')} | {ag.get('agreement')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
