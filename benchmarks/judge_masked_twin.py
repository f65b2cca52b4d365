"""The leakage judge against the masked twin (issue 68): today's contrastive judge beside the
fixes, on the same seeded claims and the same 1.5B margins.

    python benchmarks/judge_masked_twin.py --quick             # demo: 6 control claims, 2 releases x 3 docs
    python benchmarks/judge_masked_twin.py --sets demo         # demo: 16 control claims, 4 releases x 8 docs x 2
    python benchmarks/judge_masked_twin.py --sets tab          # TAB: the same on the 30 shortest test documents

**Control** (built by the attack itself, ``ClaimLinkerAttack._control_pairs``): ``--control``
seeded identifying claims, each asked against its own original (true leakage 1), another original
(~0), its reference record (sets the contrastive threshold) and its **masked twin** (its own evidence
with spaCy's specific details masked: suppressed, labelled, starred in turn; true leakage 0). Every
question is asked in two forms: the **plain** question ("Does the passage state this fact?") and the
**details** question (the claim's specific details named). Rules, on the same margins:

* ``contrast``: the default before issue 68 (plain question, threshold from the reference records);
* ``details-question``: the details question, threshold from its reference margins;
* ``masked-reference``: the plain question, the threshold from the masked twins' margins (for a
  masked twin, from the *other* twins': leave one out, so no twin is judged by a threshold it set);
* ``gate + reference``: ``contrast`` counted only where the passage states one of the claim's
  details in so many words (``stated_details``);
* ``details`` (the attack's new default): the gate and the masked-twin threshold.

**Releases**: ``--docs`` seeded documents of each release, ``--claims`` seeded identifying claims
each, judged against the sentence of the document's own sanitized version most related to them (no
linking errors). Leakage is the mean over documents of the share of claims stated. The **template
share** is the share of ``contrast``'s stated claims whose passage states none of their details.
Intervals: 95% cluster bootstrap over the documents.

Seconds per question on the answer cache given (``--cache``; a fresh file, so cold, unless given).
Data: ../shared/data/tab (not part of the repository). Writes --out (JSON), prints Markdown.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attackers.claim_linker import ClaimLinkerAttack, SentenceSplitter  # noqa: E402
from attackers.claim_linker.judge import yesno_margin  # noqa: E402
from attackers.claim_linker.reference import null_threshold, stated_details  # noqa: E402
from audit.core.data import Corpus, Release, Scenario  # noqa: E402
from audit.io.loaders import load_corpus, load_release_file  # noqa: E402
from audit.models.embed import Embedder  # noqa: E402

from tab import TAB  # noqa: E402

SPECS = {"0.5b": "qwen2.5-coder-0.5b", "1.5b": "qwen2.5-coder-1.5b"}
RULES = ("contrast", "details-question", "masked-reference", "gate + reference", "details")
RELEASE_RULES = ("contrast", "masked-reference", "gate + reference", "details")
TAB_RELEASES = "Manual_Entity,Manual_Supression,spaCy_Entity,Presidio_Entity"
DEMO_RELEASES = "suppressed,labels,spacy_ner,presidio"


class Margins:
    """The model's yes/no margins, each question asked once; seconds and count of new questions."""

    def __init__(self, llm):
        self.llm, self.memo, self.seconds, self.asked = llm, {}, 0.0, 0

    def __call__(self, evidence: str, claim: str, details: tuple[str, ...] = ()) -> float:
        key = (evidence, claim, details)
        if key not in self.memo:
            t = time.perf_counter()
            self.memo[key] = yesno_margin(self.llm, evidence, claim, details=details or None)
            self.seconds += time.perf_counter() - t
            self.asked += 1
        return self.memo[key]


def build_attack(originals: Corpus, embedder, seed: int, control: int) -> ClaimLinkerAttack:
    attack = ClaimLinkerAttack(embedder=embedder, paraphrase=False, seed=seed, judge_check=control)
    attack._splitter = SentenceSplitter(clauses=False)
    attack.fit(Scenario(originals=originals, releases=(Release("identity", originals),)))
    return attack


def mean(xs) -> float | None:
    xs = list(xs)
    return round(sum(xs) / len(xs), 3) if xs else None


def control(attack, originals, margins: Margins) -> dict:
    """Margins of both question forms on own / other / reference / masked, and each rule's rates."""
    own, other, masked, refs, dropped = attack._control_pairs(originals, dense=True, references=True)
    twin_of = {claim: ev for ev, claim in masked}
    t0, n0 = margins.seconds, margins.asked
    m: dict[str, dict[str, list[float]]] = {}
    for form in ("plain", "details"):
        det = (lambda c: tuple(attack._details_of(c))) if form == "details" else (lambda c: ())
        m[form] = {"own": [margins(ev, c, det(c)) for ev, c in own],
                   "other": [margins(ev, c, det(c)) for ev, c in other],
                   "ref": [margins(r, c, det(c)) for r, (_, c) in zip(refs, own)],
                   "masked": [margins(ev, c, det(c)) for ev, c in masked]}
    th = {form: null_threshold(m[form]["ref"]) for form in m}
    passages = {"own": own, "other": other, "masked": masked}

    def loo(k: int) -> float:  # the masked-twin threshold for masked twin k: the other twins' margins
        return null_threshold(m["plain"]["masked"][:k] + m["plain"]["masked"][k + 1:])

    full = null_threshold(m["plain"]["masked"])
    out = {"claims": len(own), "masked_claims": len(masked), "left_out": dict(dropped),
           "thresholds": {"reference, plain": round(th["plain"], 3), "reference, details": round(th["details"], 3),
                          "masked twins, plain": round(full, 3)},
           "new_questions": margins.asked - n0, "seconds": round(margins.seconds - t0, 1), "rules": {},
           "margins": {f: {k: [round(x, 3) for x in v] for k, v in d.items()} for f, d in m.items()},
           "masked_examples": [{"claim": c, "twin": ev} for ev, c in masked[:6]]}
    for rule in RULES:
        rates = {}
        for part, pairs in passages.items():
            stated = []
            for k, (ev, c) in enumerate(pairs):
                gate = bool(stated_details(attack._details_of(c), ev))
                plain, det = m["plain"][part][k], m["details"][part][k]
                stated.append(decide(rule, plain, det, gate, th, loo(k) if part == "masked" else full))
            rates[part] = mean(stated)
        rates["passed"] = bool(rates["own"] is not None and rates["own"] >= 0.8 and rates["other"] <= 0.2
                               and (rates["masked"] is None or rates["masked"] <= 0.2))
        out["rules"][rule] = rates
    out["twin_of"] = len(twin_of)
    return out


def decide(rule: str, plain: float, det: float, gate: bool, th: dict[str, float], masked_th: float) -> int:
    if rule == "contrast":
        return int(plain > th["plain"])
    if rule == "details-question":
        return int(det > th["details"])
    if rule == "masked-reference":
        return int(plain > masked_th)
    if rule == "gate + reference":
        return int(gate and plain > th["plain"])
    return int(gate and plain > masked_th)


def releases_rows(attack, originals: Corpus, releases: list[Release], args, margins: Margins, th: dict) -> dict:
    """Each release's leakage under every rule that needs no more than the plain margins and the
    details margins of gated claims; the template share of ``contrast``'s leaks; examples."""
    pos = {d.id: k for k, d in enumerate(originals)}
    rng = random.Random(f"{args.seed}:docs")
    candidates = [d.id for d in originals if attack._judged_claims(originals, pos[d.id])[0]]
    ids = sorted(rng.sample(candidates, min(args.docs, len(candidates))))
    out = {"docs": ids}
    for rel in releases:
        by_id = {d.id: d for d in rel.corpus}
        per_doc: dict[str, dict[str, list[int]]] = {r: {} for r in RELEASE_RULES}
        leaks, t0, n0 = [], margins.seconds, margins.asked
        for doc_id in ids:
            i = pos[doc_id]
            ks = attack._judged_claims(originals, i)[0]
            ks = sorted(random.Random(f"{args.seed}:claims:{doc_id}").sample(ks, min(args.claims, len(ks))))
            claims = [attack.orig_claims_[i][k].text for k in ks]
            (cands,) = attack._get_splitter().split([by_id[doc_id]])
            vecs = attack._get_embedder().encode([c.text for c in cands]) if cands else None
            evidence, _ = attack._evidence(claims, by_id[doc_id], cands, vecs)
            for ev, c in zip(evidence, claims):
                details = tuple(attack._details_of(c))
                stated = stated_details(details, ev)
                plain = margins(ev, c)
                d = {rule: decide(rule, plain, 0.0, bool(stated), th, th["masked"]) for rule in RELEASE_RULES}
                for rule, v in d.items():
                    per_doc[rule].setdefault(doc_id, []).append(v)
                if d["contrast"] or d["details"]:
                    leaks.append({"claim": c, "evidence": ev[:240], "details": list(details), "stated": stated,
                                  "contrast": d["contrast"], "details_rule": d["details"]})
        n_contrast = sum(x["contrast"] for x in leaks)
        out[rel.name] = {
            **{rule: mean(mean(v) for v in docs.values()) for rule, docs in per_doc.items()},
            "ci": {rule: interval([mean(v) for v in docs.values()], args.seed) for rule, docs in per_doc.items()},
            "claims": sum(len(v) for v in per_doc["contrast"].values()),
            "stated": {rule: sum(sum(v) for v in docs.values()) for rule, docs in per_doc.items()},
            "template_share": (round(sum(x["contrast"] and not x["stated"] for x in leaks) / n_contrast, 3)
                               if n_contrast else None),
            "new_questions": margins.asked - n0, "seconds": round(margins.seconds - t0, 1), "leaks": leaks[:8]}
        print(rel.name, {k: v for k, v in out[rel.name].items() if k != "leaks"}, file=sys.stderr)
    return out


def interval(values: list[float], seed: int) -> list[float] | None:
    """The 95% cluster-bootstrap interval of a mean over documents (one value each)."""
    from audit.core.stats import cluster_bootstrap

    if not values:
        return None
    lo, hi = cluster_bootstrap([(v, 1) for v in values], seed=seed).ci
    return [round(lo, 2), round(hi, 2)]


def demo_data(args):
    from anonaudit.demo.population import write
    from audit.core.registry import registry

    folder = Path(tempfile.mkdtemp(prefix="judge-demo-"))
    write(folder, n=args.demo_n, seed=args.seed)
    originals = load_corpus(folder / "originals.jsonl", name="originals")
    releases = []
    for name in args.releases.split(","):
        if name in ("suppressed", "labels"):
            releases.append(load_release_file(folder / "releases" / f"{name}.jsonl", name=name,
                                              originals=originals)[0])
        else:
            try:
                releases.append(registry.get("sanitizer", name)().sanitize(originals, name=name))
            except Exception as exc:  # noqa: BLE001 - a sanitizer whose extra is not installed is said, not fatal
                print(f"release {name} skipped: {exc}", file=sys.stderr)
    return originals, releases


def tab_data(args):
    data = Path(args.data)
    everyone = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="originals")
    keep = {d.id for d in sorted(everyone, key=lambda d: len(d.text))[: args.pool]}
    originals = Corpus([d for d in everyone if d.id in keep], name="originals")
    releases = []
    for name in args.releases.split(","):
        rel = load_release_file(data / "anonymizations" / f"TAB_test_{name}.json", name=name, originals=everyone)[0]
        releases.append(Release(name, Corpus([d for d in rel.corpus if d.id in keep], name=name)))
    return originals, releases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="demo only: 6 control claims, 2 releases x 3 docs x 1 claim (fewer when given)")
    ap.add_argument("--sets", default="demo", choices=("demo", "tab"))
    ap.add_argument("--data", default=str(TAB))
    ap.add_argument("--model", default="1.5b", choices=sorted(SPECS))
    ap.add_argument("--releases", default=None, help=f"default: {DEMO_RELEASES} (demo), {TAB_RELEASES} (TAB)")
    ap.add_argument("--pool", type=int, default=30, help="TAB: the N shortest test documents")
    ap.add_argument("--docs", type=int, default=8, help="documents scored per release")
    ap.add_argument("--claims", type=int, default=2, help="identifying claims per scored document")
    ap.add_argument("--control", type=int, default=16, help="control claims")
    ap.add_argument("--demo-n", type=int, default=40, help="people in the demo population")
    ap.add_argument("--cache", default=None, help="LLM answer cache (default: a fresh file: cold timings)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="judge_masked_twin.json")
    args = ap.parse_args()
    if args.quick:
        args.sets, args.control, args.docs, args.claims = "demo", min(args.control, 6), min(args.docs, 3), 1
        args.releases = args.releases or "suppressed,spacy_ner"
    args.releases = args.releases or (DEMO_RELEASES if args.sets == "demo" else TAB_RELEASES)
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="judge-cache-")) / "llm.sqlite"
    from audit.models.specs import load_llm

    margins = Margins(load_llm(SPECS[args.model], cache_path=cache))
    originals, releases = demo_data(args) if args.sets == "demo" else tab_data(args)
    attack = build_attack(originals, Embedder(), args.seed, args.control)
    started = time.time()
    report: dict = {"args": vars(args), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started))}
    report["control"] = ctl = control(attack, originals, margins)
    print({k: ctl[k] for k in ("claims", "masked_claims", "thresholds", "rules")}, file=sys.stderr)
    Path(args.out).write_text(json.dumps(report, indent=1))
    th = {"plain": ctl["thresholds"]["reference, plain"], "details": ctl["thresholds"]["reference, details"],
          "masked": ctl["thresholds"]["masked twins, plain"]}
    report["releases"] = releases_rows(attack, originals, releases, args, margins, th)
    report["seconds_per_question"] = round(margins.seconds / max(1, margins.asked), 2)
    report["questions"] = margins.asked
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(markdown(report))


def markdown(report: dict) -> str:
    c = report["control"]
    lines = [f"| rule ({report['args']['sets']}, {c['claims']} control claims, {c['masked_claims']} twins) | "
             "own | other | masked twin | passes |", "|---|---:|---:|---:|---|"]
    for rule, r in c["rules"].items():
        lines.append(f"| {rule} | {r['own']} | {r['other']} | {r['masked']} | {'yes' if r['passed'] else 'no'} |")
    rel = report["releases"]
    lines += ["", f"| release ({len(rel['docs'])} docs) | claims | " + " | ".join(RELEASE_RULES) +
              " | template share of contrast's leaks |", "|---|---:|" + "---:|" * len(RELEASE_RULES) + "---:|"]
    for name, r in rel.items():
        if name == "docs":
            continue
        cells = " | ".join(f"{r[k]} {r['ci'][k]}" for k in RELEASE_RULES)
        lines.append(f"| {name} | {r['claims']} | {cells} | {r['template_share']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
