"""Peak memory of the phrase-search attack on one huge document (issue 17: bounded memory).

Builds a synthetic collection of one ``--mb`` MB document (random words from a 5,000-word
vocabulary, sentences of 8-30 words, numbers mixed in) plus 50 ordinary documents, and a
release that masks every 40th word with ``[PERSON]``; then runs the phrase-search attack
(index build = ``fit``, then ``evaluate``) in a fresh process and reports its peak resident
memory (``ru_maxrss``) and the time of each step.

    python benchmarks/huge_document.py [--mb 20] [--json out.json]
    python benchmarks/huge_document.py --quick     # a 0.3 MB document: seconds, a smoke test
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time


def make_text(n_chars: int, seed: int) -> str:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
             for _ in range(5000)]
    parts: list[str] = []
    size = 0
    while size < n_chars:
        words = [rng.choice(vocab) if rng.random() > 0.05 else str(rng.randint(1, 99999))
                 for _ in range(rng.randint(8, 30))]
        sentence = " ".join(words).capitalize() + ". "
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)[:n_chars]


def child(mb: float) -> dict:
    from attackers.phrase_search import PhraseSearchAttack
    from audit.core.data import Corpus, Document, Scenario, sanitize_corpus
    from audit.core.data import Span

    t0 = time.perf_counter()
    big = make_text(int(mb * 1_000_000), seed=1)
    docs = [Document("huge", big, subject="huge")] + [
        Document(f"d{i}", make_text(3000, seed=100 + i), subject=f"d{i}") for i in range(50)]
    originals = Corpus(docs, name="originals")
    spans = {}
    for d in docs:
        starts = [i + 1 for i, c in enumerate(d.text) if c == " "][::40]
        out = []
        for s in starts:
            e = d.text.find(" ", s)
            if e > s:
                out.append(Span(s, e, "PERSON", replacement="[PERSON]"))
        spans[d.id] = out
    release = sanitize_corpus(originals, spans, name="masked")
    del spans
    setup = time.perf_counter() - t0
    rss_setup = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    attack = PhraseSearchAttack(progress=False)
    t1 = time.perf_counter()
    scenario = Scenario(originals=originals, releases=(release,))
    attack.fit(scenario)
    fit_s = time.perf_counter() - t1
    rss_fit = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t2 = time.perf_counter()
    (head, *_rest) = attack.evaluate(scenario, release)
    eval_s = time.perf_counter() - t2
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"mb": mb, "characters": len(big), "setup_seconds": round(setup, 1), "fit_seconds": round(fit_s, 1),
            "evaluate_seconds": round(eval_s, 1), "peak_rss_mb_after_setup": round(rss_setup),
            "peak_rss_mb_after_fit": round(rss_fit), "peak_rss_mb": round(rss),
            "linked": head.value, "n": head.n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true", help="a 0.3 MB document (a smoke test of the script)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.mb = 0.3
    if args.child:
        print(json.dumps(child(args.mb)))
        return
    out = subprocess.run([sys.executable, __file__, "--child", "--mb", str(args.mb)], capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
