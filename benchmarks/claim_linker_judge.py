"""The claim linker's leakage judge: the plain yes/no rule beside the contrastive one, on the
same seeded claims (issue 44).

    python benchmarks/claim_linker_judge.py --quick   # 1.5B, 6 identifying control claims, 2 TAB documents x 2 claims
    python benchmarks/claim_linker_judge.py           # 1.5B, 16 control claims, 8 TAB documents x 3 claims

Every question is asked once of the model (``yesno_margin``: log P(Yes) - log P(No) for "Does
the passage state this fact?"), and the rules are applied to the same margins:

* **plain** (the judge before issue 44's second pass): stated when the margin is > 0;
* **per-claim**: stated when the margin is > 0 and larger than the margin the same claim gets on
  its reference record, the other original most like it (a matched negative; measured, rejected);
* **contrast** (the attack's default now): stated when the margin exceeds the threshold set by the
  control: the conformal 90% quantile (here with 16 claims: the largest) of the margins the
  control's claims get on their reference records, and 0
  (``attackers/claim_linker/reference.py``). The releases use the threshold of the TAB
  control on identifying claims.

Claims: **all** = the earlier control's draw (any claim the attacker does not hold);
**identifying** = only claims with a specific detail (spaCy entity, number) that no other
original nearly repeats; the attack's control and scoring now use these. Both controls are built
by the attack itself (``ClaimLinkerAttack._control_pairs``): each claim against its own original
(true leakage 1) and another original (true leakage ~0), with one reference record for both (the
closest original other than the two). On TAB (the ``--pool`` shortest test documents) and on the
demo's synthetic population.

Releases: on TAB, ``--docs`` seeded documents, up to ``--claims`` seeded identifying claims each,
judged against the sentences of that document's own sanitized version most related to them
(identity, entity labels, suppression, an NER release), so linking errors do not enter.
Reference decisions for agreement (Cohen's kappa, % agreement): the other rule, and a lexical
one (every specific detail of the claim appears verbatim in the passage), which on span-masking
releases is close to the truth of whether the claim's details survived.

Seconds per question are measured on the answer cache given (``--cache``; a fresh file, so cold,
unless given), the contrastive rule's include its reference questions. Say how busy the machine
was. Data: ../shared/data/tab (not part of the repository). Writes --out (JSON), prints Markdown.
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
from attackers.claim_linker.reference import null_threshold  # noqa: E402
from attackers.claim_linker.judge import yesno_margin  # noqa: E402
from audit.core.data import Corpus, Release, Scenario  # noqa: E402
from audit.io.loaders import load_corpus, load_release_file  # noqa: E402
from audit.models.embed import Embedder  # noqa: E402

from tab import TAB  # noqa: E402  (the benchmarks' one helper module, beside this script)

SPECS = {"0.5b": "qwen2.5-coder-0.5b", "1.5b": "qwen2.5-coder-1.5b"}


def build_attack(originals: Corpus, embedder, seed: int, control: int, identifying: bool):
    attack = ClaimLinkerAttack(embedder=embedder, paraphrase=False, seed=seed, judge_check=control,
                               judge="contrast", identifying=identifying)
    attack._splitter = SentenceSplitter(clauses=False)
    attack.fit(Scenario(originals=originals, releases=(Release("identity", originals),)))
    return attack


class Margins:
    """The model's yes/no margins, each question asked once; seconds and count of new questions."""

    def __init__(self, llm):
        self.llm, self.memo, self.seconds, self.asked = llm, {}, 0.0, 0

    def __call__(self, evidence: str, claim: str) -> float:
        key = (evidence, claim)
        if key not in self.memo:
            t = time.perf_counter()
            self.memo[key] = yesno_margin(self.llm, evidence, claim)
            self.seconds += time.perf_counter() - t
            self.asked += 1
        return self.memo[key]


def control(attack, originals, margins: Margins) -> dict:
    own, other, _masked, refs, dropped = attack._control_pairs(originals, dense=True, references=True)
    t0, n0 = margins.seconds, margins.asked
    m_own = [margins(ev, c) for ev, c in own]
    m_oth = [margins(ev, c) for ev, c in other]
    m_ref = [margins(r, c) for r, (_, c) in zip(refs, own)]
    threshold = null_threshold(m_ref)
    out = {"claims": len(own), "left_out": dict(dropped), "margins": {"own": m_own, "other": m_oth, "ref": m_ref},
           "threshold": round(threshold, 3), "new_questions": margins.asked - n0,
           "seconds_per_claim": round((margins.seconds - t0) / max(1, len(own)), 2)}
    for rule in RULES:
        o = [decide(rule, m, r, threshold) for m, r in zip(m_own, m_ref)]
        x = [decide(rule, m, r, threshold) for m, r in zip(m_oth, m_ref)]
        out[rule] = {"own": mean(o), "other": mean(x), "passed": mean(o) >= 0.8 and mean(x) <= 0.2}
    out["auc_plain"] = auc(m_own, m_oth)
    out["auc_per_claim"] = auc([m - r for m, r in zip(m_own, m_ref)], [m - r for m, r in zip(m_oth, m_ref)])
    return out


RULES = ("plain", "per-claim", "contrast")


def decide(rule: str, margin: float, ref: float, threshold: float) -> int:
    if rule == "plain":
        return int(margin > 0)
    if rule == "per-claim":
        return int(margin > 0 and margin > ref)
    return int(margin > threshold)


def mean(xs) -> float | None:
    xs = list(xs)
    return round(sum(xs) / len(xs), 3) if xs else None


def auc(pos: list[float], neg: list[float]) -> float:
    """P(score of an own-document question > score of an other-document one), ties half."""
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return round(wins / max(1, len(pos) * len(neg)), 3)


def kappa(a: list[int], b: list[int]) -> tuple[float | None, float]:
    """Cohen's kappa and % agreement of two binary decision lists."""
    n = len(a)
    agree = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return (None if pe == 1 else round((agree - pe) / (1 - pe), 3)), round(agree, 3)


def release_questions(attack, originals: Corpus, releases: list[Release], ids: list[str], per_doc: int, seed: int):
    """``{release: [(doc id, claim index, evidence, claim, reference evidence)]}`` for up to
    ``per_doc`` seeded identifying claims of each original in ``ids``, against its own version."""
    pos = {d.id: k for k, d in enumerate(originals)}
    picked = {}
    for doc_id in ids:
        ks, _ = attack._judged_claims(originals, pos[doc_id])
        picked[doc_id] = sorted(random.Random(f"{seed}:claims:{doc_id}").sample(ks, min(per_doc, len(ks))))
    out = {}
    for rel in releases:
        by_id = {d.id: d for d in rel.corpus}
        rows = []
        for doc_id in ids:
            i, doc = pos[doc_id], by_id[doc_id]
            claims = [attack.orig_claims_[i][k].text for k in picked[doc_id]]
            (cands,) = attack._get_splitter().split([doc])
            vecs = attack._get_embedder().encode([c.text for c in cands]) if cands else None
            evidence, _ = attack._evidence(claims, doc, cands, vecs)
            rows += [(doc_id, k, ev, c, attack._reference(originals, i, k, set()))
                     for k, ev, c in zip(picked[doc_id], evidence, claims)]
        out[rel.name] = rows
    return out


def lexical(attack, originals: Corpus, doc_id: str, k: int, evidence: str) -> int:
    """1 when every specific detail of the claim appears verbatim in the evidence."""
    details = attack._details(originals.ids.index(doc_id))[k]
    text = " ".join(evidence.lower().split())
    return int(all(" ".join(d.lower().split()) in text for d in details))


def demo_originals(n: int, seed: int) -> Corpus:
    from anonaudit.demo.population import write

    folder = Path(tempfile.mkdtemp(prefix="judge-demo-"))
    write(folder, n=n, seed=seed)
    return load_corpus(folder / "originals.jsonl", name="originals")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="6 control claims (identifying only), 2 documents x 2 claims, 2 releases: about 50 questions")
    ap.add_argument("--data", default=str(TAB))
    ap.add_argument("--model", default="1.5b", choices=sorted(SPECS))
    ap.add_argument("--releases", default="Manual_Entity,Manual_Supression")
    ap.add_argument("--pool", type=int, default=30, help="TAB: the N shortest test documents")
    ap.add_argument("--docs", type=int, default=8, help="TAB documents scored per release")
    ap.add_argument("--claims", type=int, default=3, help="identifying claims per scored document")
    ap.add_argument("--control", type=int, default=16, help="control claims per data set")
    ap.add_argument("--demo-n", type=int, default=40, help="people in the demo population (its control)")
    ap.add_argument("--cache", default=None, help="LLM answer cache (default: a fresh file: cold timings)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="claim_linker_judge.json")
    args = ap.parse_args()
    if args.quick:
        args.control, args.docs, args.claims, args.releases = 6, 2, 2, "Manual_Entity"
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="judge-cache-")) / "llm.sqlite"
    from audit.models.specs import load_llm

    margins = Margins(load_llm(SPECS[args.model], cache_path=cache))
    embedder = Embedder()
    data = Path(args.data)
    everyone = load_corpus(data / "bks" / "TAB_test_BK=Original.json", name="originals")
    keep = {d.id for d in sorted(everyone, key=lambda d: len(d.text))[: args.pool]}
    originals = Corpus([d for d in everyone if d.id in keep], name="originals")
    demo = demo_originals(args.demo_n, args.seed)
    report: dict = {"args": vars(args), "control": {}, "releases": {}, "agreement": {}}
    attack = None
    for label, corpus in (("tab", originals), ("demo", demo)):
        for claims in ("identifying",) if args.quick else ("all", "identifying"):
            attack = build_attack(corpus, embedder, args.seed, args.control, claims == "identifying")
            report["control"][f"{label}, {claims}"] = row = control(attack, corpus, margins)
            print(label, claims, {k: row[k] for k in ("claims", "left_out", "plain", "contrast")}, file=sys.stderr)
            Path(args.out).write_text(json.dumps(report, indent=1))
    judge_releases(report, args, data, everyone, originals, embedder, margins)
    report["seconds_total"] = round(margins.seconds, 1)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(markdown(report))


def judge_releases(report: dict, args, data: Path, everyone: Corpus, originals: Corpus, embedder, margins) -> None:
    """The release questions under every rule (the TAB identifying control's threshold), their
    leakage per release, and the rules' agreement, into ``report``."""
    attack = build_attack(originals, embedder, args.seed, args.control, True)
    keep = set(originals.ids)
    releases = [Release("identity", originals)]
    for name in args.releases.split(","):
        rel = load_release_file(data / "anonymizations" / f"TAB_test_{name}.json", name=name, originals=everyone)[0]
        releases.append(Release(name, Corpus([d for d in rel.corpus if d.id in keep], name=name)))
    ids = sorted(random.Random(f"{args.seed}:docs").sample(originals.ids, args.docs))
    report["tab_docs"] = ids
    questions = release_questions(attack, originals, releases, ids, args.claims, args.seed)
    t0, n0 = margins.seconds, margins.asked
    decisions: dict[str, list[int]] = {rule: [] for rule in (*RULES, "lexical")}
    threshold = report["control"]["tab, identifying"]["threshold"]
    report["release_margins"] = {}
    for name, rows in questions.items():
        per_doc: dict[str, dict[str, list[int]]] = {}
        report["release_margins"][name] = []
        for doc_id, k, ev, c, ref in rows:
            m, r = margins(ev, c), margins(ref, c)
            report["release_margins"][name].append([doc_id, k, round(m, 4), round(r, 4)])
            d = {rule: decide(rule, m, r, threshold) for rule in RULES}
            d["lexical"] = lexical(attack, originals, doc_id, k, ev)
            for rule, v in d.items():
                per_doc.setdefault(rule, {}).setdefault(doc_id, []).append(v)
                decisions[rule].append(v)
        report["releases"][name] = {rule: {"leakage": mean(mean(v) for v in docs.values()),
                                           "stated": sum(sum(v) for v in docs.values()), "claims": len(rows)}
                                    for rule, docs in per_doc.items()}
        print(name, report["releases"][name], file=sys.stderr)
    n_q = sum(len(r) for r in questions.values())
    report["release_seconds_per_question"] = round((margins.seconds - t0) / max(1, n_q), 2)
    report["release_new_questions"] = margins.asked - n0
    for a, b in (("contrast", "plain"), ("contrast", "lexical"), ("plain", "lexical"), ("per-claim", "lexical")):
        k, agree = kappa(decisions[a], decisions[b])
        report["agreement"][f"{a} vs {b}"] = {"kappa": k, "agreement": agree, "n": len(decisions[a])}
    report["examples"] = [{"release": name, "doc": d, "claim": c, "evidence": ev[:300], "reference": (ref or "")[:300],
                           "margin": round(margins(ev, c), 3), "ref_margin": round(margins(ref, c), 3)}
                          for name, rows in questions.items() for d, _, ev, c, ref in rows[:2]]


def markdown(report: dict) -> str:
    lines = ["| control | claims | left out | plain own / other | per-claim own / other | threshold | "
             "contrast own / other | AUC | s/claim |", "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for name, c in report["control"].items():
        left = ", ".join(f"{v} {k}" for k, v in c["left_out"].items()) or "-"
        cells = " | ".join(f"{c[r]['own']} / {c[r]['other']}" for r in ("plain", "per-claim"))
        lines.append(f"| {name} | {c['claims']} | {left} | {cells} | {c['threshold']} | {c['contrast']['own']} / "
                     f"{c['contrast']['other']} | {c['auc_plain']} | {c['seconds_per_claim']} |")
    lines += ["", "| release (TAB, " + f"{len(report.get('tab_docs', []))} docs) | claims | plain | per-claim | "
              "contrast | lexical |", "|---|---:|---:|---:|---:|---:|"]
    for name, r in report["releases"].items():
        lines.append(f"| {name} | {r['plain']['claims']} | " + " | ".join(
            str(r[k]["leakage"]) for k in (*RULES, "lexical")) + " |")
    lines += ["", "| agreement | kappa | % agreement | n |", "|---|---:|---:|---:|"]
    for name, a in report["agreement"].items():
        lines.append(f"| {name} | {a['kappa']} | {a['agreement']} | {a['n']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
