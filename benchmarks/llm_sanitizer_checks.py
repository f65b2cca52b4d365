"""Issue 49: the LLM sanitizers' validation, before and after, from one set of LLM answers.

Validation is a post-processing of what the model proposed, so every "before" and "after" here
comes from the same answers: each sanitizer runs once with validation off, then again with it
on through the same answer cache (the second run asks the model nothing new, which the script
checks, except INTACT's truth scores, which are new log-probability requests).

* **Prompt families on TAB** (``--docs`` documents, the shortest of the 127 test documents with
  ``--shortest``, else the first): precision and recall of the masked characters against the
  manual TAB mentions, before and after validation; the share of masked characters; the
  self-check (words masked, masks on stop words, documents with nothing proposed) and the
  proposals rejected by reason. Word frequencies come from all 127 originals
  (``frequency_corpus``: what sanitizing the whole collection would use).
* **Demo population** (``--demo`` documents of ``anonaudit demo-data``'s population, seed 0):
  the same, with the population's own spans as gold and its 40 documents for frequencies.
* **INTACT** (``--intact-demo`` demo documents, their spans, ``most_specific`` selection so no
  attack runs): every candidate the model proposed, before and after the truth check, with how
  it was judged; with ``--labels FILE`` (hand labels: ``{"original || candidate": true/false}``),
  the truthful share of the candidates before and after.

    python benchmarks/llm_sanitizer_checks.py --quick                     # ~1 min: 0.5B, 1 doc each
    python benchmarks/llm_sanitizer_checks.py --docs 5 --shortest --families mvm,ppdp --demo 10 \\
        --intact-demo 3 --labels benchmarks/data/intact_truth_labels_demo.json --cache c.sqlite --out o.json

Outputs quote TAB text and are not committed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prompt_anonymizer_tab import precision_recall  # noqa: E402
from tab import bench_llm, labelled_originals, machine, parser, write_out  # noqa: E402

from audit.core.data import Corpus, Document  # noqa: E402


def bare(corpus: Corpus) -> Corpus:
    """The documents without their gold spans (what a sanitizer reads)."""
    return Corpus([Document(d.id, d.text, d.subject) for d in corpus], name=corpus.name)


def masked_share(release, originals: Corpus) -> float:
    """Share of the originals' non-space characters that the release masked."""
    total = sum(sum(not c.isspace() for c in d.text) for d in originals)
    masked = 0
    for doc in release:
        text = originals[doc.id].text
        chars = {i for s in doc.spans if s.orig_start is not None for i in range(s.orig_start, s.orig_end)}
        masked += sum(1 for i in chars if not text[i].isspace())
    return masked / max(1, total)


def prompt_rows(llm, docs: Corpus, gold: Corpus, reference: Corpus, families: list[str], seed: int,
                what: str) -> list[dict]:
    """Before and after validation for each family, the second from the first's answers."""
    from defenders.prompt_anonymizer import PromptAnonymizer

    rows = []
    for family in families:
        for validate in (False, True):
            calls = llm.stats["backend_calls"]
            t0 = time.perf_counter()
            san = PromptAnonymizer(family=family, llm=llm, seed=seed, validate=validate,
                                   frequency_corpus=reference, progress=False)
            name = f"{what} {family} {'after' if validate else 'before'}"
            rel = san.sanitize(docs, name=name)
            sent = llm.stats["backend_calls"] - calls
            if validate and sent:
                raise SystemExit(f"{name}: validation asked the model {sent} new question(s); it must not")
            stats = san.stats()
            check = stats["self_check"][name]
            rejected = {k[len("rejected_"):]: v for k, v in stats["counts"].items() if k.startswith("rejected_")}
            row = {"release": name, "family": family, "validated": validate, **precision_recall(rel, gold),
                   "masked_chars": masked_share(rel, gold), "words_masked": check["share_words_changed"],
                   "masks_on_stop_words": check["share_masks_on_stop_words"],
                   "nothing_proposed": check.get("documents_nothing_proposed", 0),
                   "person_in_clear": check["documents_person_in_clear"],
                   "proposed": stats["counts"].get("terms_proposed", 0), "rejected": rejected,
                   "warnings": check["warnings"], "seconds": time.perf_counter() - t0, "llm_calls": sent,
                   "examples_masked": sorted({s.original for d in rel for s in d.spans if s.original})[:25]}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "examples_masked"}), flush=True)
    return rows


class _Logged:
    """INTACT's truth check, recording every candidate and its verdict."""

    log: list[dict] = []

    @classmethod
    def install(cls):
        import defenders.intact.sanitizer as module
        from defenders.intact.truth import TruthCheck, rule_verdict

        class Logging(TruthCheck):
            def keep(self, original, label, sentence, candidates, counts):
                kept = super().keep(original, label, sentence, candidates, counts)
                for c in candidates:
                    how = "rule" if rule_verdict(original, c, label) is not None else "model"
                    cls.log.append({"original": original, "label": label, "candidate": c, "kept": c in kept,
                                    "judged_by": how, "sentence": sentence})
                return kept

        module.TruthCheck = Logging


def intact_rows(llm, docs: Corpus, seed: int, labels: dict[str, bool] | None) -> dict:
    """INTACT's candidates on ``docs`` (with spans) before and after the truth check."""
    from defenders.intact import IntactSanitizer

    _Logged.install()
    t0 = time.perf_counter()
    before = IntactSanitizer(selection="most_specific", llm=llm, seed=seed, check_truth=False, progress=False)
    before.sanitize(docs, name="before")
    calls = llm.stats["backend_calls"]
    after = IntactSanitizer(selection="most_specific", llm=llm, seed=seed, check_truth=True, progress=False)
    after.sanitize(docs, name="after")
    counts = after.stats()["counts"]["after"]
    out = {"entities": counts["entities"], "llm_entities": counts["candidate_requests"],
           "candidates": len(_Logged.log), "kept": sum(c["kept"] for c in _Logged.log),
           "by_rule": counts["truth_checked_rule"], "by_model": counts["truth_checked_model"],
           "untruthful_rule": counts["untruthful_rule"], "untruthful_model": counts["untruthful_model"],
           "fallbacks_before": before.stats()["counts"]["before"]["fallbacks"], "fallbacks_after": counts["fallbacks"],
           "logprob_calls": llm.stats["backend_calls"] - calls, "seconds": time.perf_counter() - t0,
           "candidates_list": _Logged.log}
    if labels is not None:
        judged = [c for c in _Logged.log if f"{c['original']} || {c['candidate']}" in labels]
        truth = [labels[f"{c['original']} || {c['candidate']}"] for c in judged]
        kept = [t for c, t in zip(judged, truth) if c["kept"]]
        dropped = [t for c, t in zip(judged, truth) if not c["kept"]]
        out |= {"labelled": len(judged), "truthful_before": sum(truth) / max(1, len(truth)),
                "truthful_after": sum(kept) / max(1, len(kept)),
                "dropped_untrue": sum(1 for t in dropped if not t), "dropped_true": sum(1 for t in dropped if t),
                "kept_untrue": sum(1 for t in kept if not t)}
    print(json.dumps({k: v for k, v in out.items() if k != "candidates_list"}), flush=True)
    return out


def main() -> None:
    ap = parser(__doc__, 5, "TAB test documents",
                quick={"families": "mvm", "demo": 2, "intact_demo": 1, "shortest": True})
    ap.add_argument("--shortest", action="store_true", help="take the shortest TAB documents, not the first")
    ap.add_argument("--families", default="mvm,ppdp")
    ap.add_argument("--demo", type=int, default=10, help="documents of the demo population")
    ap.add_argument("--intact-demo", type=int, default=3, help="demo documents INTACT sanitizes (0: none)")
    ap.add_argument("--labels", type=Path, default=None, help="hand labels of INTACT's candidates (JSON)")
    args = ap.parse_args()
    from anonaudit.demo.population import generate

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    llm = bench_llm(args, "checks-bench-")
    print(f"machine: {machine()}", flush=True)
    figures: dict = {"machine_start": machine()}
    ids: list[str] = []
    if args.docs:
        full = labelled_originals(args.data, outer=True)
        chosen = sorted(full, key=lambda d: len(d.text))[:args.docs] if args.shortest else list(full)[:args.docs]
        gold = Corpus(chosen, name="tab")
        ids = gold.ids
        print(f"TAB: {len(gold)} documents, {sum(len(d.text) for d in gold)} characters", flush=True)
        figures["tab"] = prompt_rows(llm, bare(gold), gold, bare(full), families, args.seed, "TAB")
    demo = generate(40, args.seed).originals
    if args.demo:
        gold = Corpus(list(demo)[:args.demo], name="demo")
        figures["demo"] = prompt_rows(llm, bare(gold), gold, bare(demo), families, args.seed, "demo")
    if args.intact_demo:
        labels = json.loads(args.labels.read_text()) if args.labels else None
        figures["intact"] = intact_rows(llm, Corpus(list(demo)[-args.intact_demo:], name="demo"), args.seed, labels)
    figures["machine_end"] = machine()
    print(f"machine: {machine()}", flush=True)
    write_out(args, llm, ids, **figures)
    llm.close()


if __name__ == "__main__":
    main()
