"""A compact inverted index of word n-grams, built with vectorised numpy.

The phrase-search attack and the delinker sanitizer ask one question millions of
times: "in how many documents of the collection does this phrase occur, and
which?". This package answers it from a folder of three numpy arrays:

* ``keys``     sorted ``uint64`` hashes of every distinct n-gram (n = 1..max_n);
* ``offsets``  CSR offsets: the documents of ``keys[i]`` are ``postings[offsets[i]:offsets[i+1]]``;
* ``postings`` ``uint32`` document numbers, sorted within each list (so lists intersect fast).

plus ``docs.json`` (id, subject and source of every document number) and
``config.json`` saying what built it (tokeniser, max_n, hashing, collection
fingerprint). :meth:`NgramIndex.load` memory-maps the arrays, so a large index
opens instantly and is shared between processes through the page cache.

Tokenisation (:class:`Tokenizer`) works on the text's code points as one numpy
array, without a Python loop per word: word characters are letters and digits;
``- ' ’ . / , : &`` between two word characters stay inside a token ("36110/97",
"non-governmental", "1,000", "e.g"); everything else separates tokens.
Sentence boundaries are rules, not a parser: a newline, or ``.``/``!``/``?``
followed by a token that starts with a capital letter, unless the token before
the full stop is a known abbreviation ("Mr.", "no.", "Art.", ...) or a single
letter (an initial). That is much faster than spaCy for millions of words and
errs towards keeping sentences together; n-grams never cross a boundary.

Hashing: each code point (lower-cased; ’ folded to ', Unicode hyphens to -) has
a fixed pseudo-random 64-bit value; a token's hash is the polynomial of those
values mod 2^64 (vectorised with prefix sums), finalised with splitmix64; an
n-gram's hash is the polynomial of its token hashes plus n times a constant.
The stored hash keeps ``b = hash_bits`` bits (see the config): the build packs
each ``(hash, document)`` pair into one ``uint64`` (the document number takes
the hash's lowest bits) so that one plain ``np.sort`` orders pairs by hash then
document; up to 8 more bits are kept by first routing pairs to 2^t buckets by
their top bits. b >= 52 up to 2^20 documents (``min_hash_bits``, default 52;
b = 64 - ceil(log2 D) + 8 beyond; b = 64 - ceil(log2 D) when that is already
>= min_hash_bits, e.g. 57 bits for 127 documents). Treating hashes as random,
a phrase absent from the collection matches one of its N distinct n-grams with
probability about N / 2^b per lookup: at b = 52, 2e-10 for N = 10^6 (TAB-sized)
and 2e-8 for N = 10^8 (~70 M words), i.e. one spurious candidate per ~10,000
documents of 5,000 n-grams at that size; two distinct n-grams of the collection
share a hash with probability about N^2 / 2^(b+1) (about one merged pair among
10^8). Negligible next to the attack's other errors; ``min_hash_bits=64`` keeps
more bits (with buckets) for very large collections.

Size: about 48 MB per million words for the saved index (8-byte key and 4-byte
offset per distinct n-gram, 4-byte document number per posting; most 3- to
7-grams occur once); the build peaks at under twice that: each chunk's keys are
deduplicated as soon as they are made, the merge frees each chunk's keys as it copies
them, and the CSR arrays are carved out of the merged keys in place (figures in
benchmarks/README.md).

Import the index from this package, ``from attackers.phrase_search.index import NgramIndex``
(the phrase-search attack and sanitizers such as a delinker share it); its modules are
:mod:`~attackers.phrase_search.index.tokenizer` (tokens and sentence boundaries),
:mod:`~attackers.phrase_search.index.hashing` (token and n-gram hashes),
:mod:`~attackers.phrase_search.index.build` (the sorted, packed keys and the CSR arrays),
:mod:`~attackers.phrase_search.index.storage` (save and load) and
:mod:`~attackers.phrase_search.index.query` (:class:`NgramIndex` and its queries).
"""

from attackers.phrase_search.index.build import FORMAT, DocInfo, collection_fingerprint
from attackers.phrase_search.index.hashing import Ngrams, iter_ngram_hashes, ngram_hashes
from attackers.phrase_search.index.query import NgramIndex, RareNgram, TextNgrams, minimal_set
from attackers.phrase_search.index.tokenizer import ABBREVIATIONS, TOKENIZER_NAME, Tokenizer, Tokens

__all__ = ["ABBREVIATIONS", "FORMAT", "TOKENIZER_NAME", "DocInfo", "NgramIndex", "Ngrams", "RareNgram", "TextNgrams",
           "Tokenizer", "Tokens", "collection_fingerprint", "iter_ngram_hashes", "minimal_set", "ngram_hashes"]
