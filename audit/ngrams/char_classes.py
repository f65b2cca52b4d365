"""The tokenizer's character classes (the "Tokenisation" section of the package docstring): one
byte a code point in the tokenizer's table (:mod:`audit.ngrams.tokenizer`), read by the compiled
scan (:mod:`audit.ngrams._compiled`)."""

#: Character classes: one byte a code point in the tokenizer's table, these its bits.
WORD, JOIN, TERM, NL = 1, 2, 4, 8
#: Code points beyond the Basic Multilingual Plane read the table's last entry (in no class).
CLIP = 0xFFFF
