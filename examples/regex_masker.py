"""A sanitizer in a few lines, for `anonaudit bench --command "python examples/regex_masker.py {input} {output}"`.

Reads the documents (JSONL: id, text, ...) and writes a span file {id: [[start, end, replacement], ...]}:
capitalised words that do not start a sentence, numbers and e-mail addresses become [MASK].
"""

import json
import re
import sys

PATTERN = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|\d[\d,./-]*|(?<=[a-z,;] )[A-Z][a-z]+(?: [A-Z][a-z]+)*")

source, target = sys.argv[1], sys.argv[2]
spans = {}
with open(source, encoding="utf-8") as fh:
    for line in fh:
        doc = json.loads(line)
        spans[doc["id"]] = [[m.start(), m.end(), "[MASK]"] for m in PATTERN.finditer(doc["text"])]
with open(target, "w", encoding="utf-8") as fh:
    json.dump(spans, fh)
