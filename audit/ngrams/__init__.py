"""A compact inverted index of word n-grams, built with vectorised numpy and two compiled loops.

The phrase-search attack and the delinker sanitizer ask one question millions of
times: "in how many documents of the collection does this phrase occur, and
which?". This package answers it from a folder of five numpy arrays. It is a shared layer of
the engine, below the plugins that use it (it imports only :mod:`audit.core` and
:mod:`audit.runtime`):

* ``directory``     for each value of a hash's top ``hash_bits - 32`` bits, where its keys start
  (2^(hash_bits - 32) + 1 entries: 4 MB at the default 52 bits);
* ``keys``          ``uint32``: the next 32 hash bits of every distinct n-gram (n = 1..max_n),
  sorted within each directory entry;
* ``first``         ``uint32`` per key: the n-gram's one document, or, flagged with the top bit
  (:data:`~audit.ngrams.build.MULTI`), the number of its posting list;
* ``multi_offsets`` and ``multi_docs``: the posting lists (sorted document numbers) of the n-grams
  found in two documents or more, in CSR form.

plus ``docs.json`` (id, subject and source of every document number) and
``config.json`` saying what built it (tokeniser, max_n, hashing, collection
fingerprint). :meth:`NgramIndex.load` memory-maps the arrays, so a large index
opens instantly and is shared between processes through the page cache. A lookup
reads the directory entry of the hash's top bits and halves the few keys under it
(a few dozen at most) for all needles at once.

Tokenisation (:class:`Tokenizer`) reads the text's code points as one numpy array in one
compiled pass (:mod:`~audit.ngrams.kernels`): word characters are letters and digits;
``- ' ’ . / , : &`` between two word characters stay inside a token ("36110/97",
"non-governmental", "1,000", "e.g"); everything else separates tokens.
Sentence boundaries are rules, not a parser: a newline, or ``.``/``!``/``?``
followed by a token that starts with a capital letter, unless the token before
the full stop is a known abbreviation ("Mr.", "no.", "Art.", ...) or a single
letter (an initial). That is much faster than spaCy for millions of words and
errs towards keeping sentences together; n-grams never cross a boundary.

Hashing: each code point (lower-cased; ’ folded to ', Unicode hyphens to -) has
a fixed pseudo-random 64-bit value; a token's hash is the polynomial of those
values mod 2^64, finalised with splitmix64; an
n-gram's hash is the polynomial of its token hashes plus n times a constant.
The index keeps the hash's top ``b = hash_bits`` bits (see the config): ``min_hash_bits``
(default 52, between 40 and 56), or fewer when the collection has more than 2^20
documents: the build packs each ``(hash, document)`` pair into one ``uint64`` (the
document number takes the hash's lowest bits) so that one plain ``np.sort`` orders pairs
by hash then document, and up to 8 more bits are kept by first routing pairs to
buckets by their top bits (b = 64 - ceil(log2 D) + 8 beyond 2^20 documents, e.g. 48 bits
for 16 M documents). Treating hashes as random,
a phrase absent from the collection matches one of its N distinct n-grams with
probability about N / 2^b per lookup: at b = 52, 2e-10 for N = 10^6 (TAB-sized)
and 2e-8 for N = 10^8 (~25 M words), i.e. one spurious candidate per ~10,000
documents of 5,000 n-grams at that size; two distinct n-grams of the collection
share a hash with probability about N^2 / 2^(b+1) (about one merged pair among
10^8). Negligible next to the attack's other errors; ``min_hash_bits=56`` keeps
more bits for very large collections (a directory of 64 MB).

Size: about 38 MB per million words for the index (a 4-byte key and a 4-byte
``first`` per distinct n-gram; most n-grams of 3 words and more occur in one document, whose
number is ``first`` itself, so only the others have posting lists). The build holds each
chunk's distinct pairs (8 bytes each, about 42 MB per million words) and lays out each
bucket of them into the index as it frees it, so its peak is about the pairs'
size (figures in benchmarks/README.md).

Import the index from this package, ``from audit.ngrams import NgramIndex``
(the phrase-search attack and sanitizers such as a delinker share it); its modules are
:mod:`~audit.ngrams.tokenizer` (tokens and sentence boundaries),
:mod:`~audit.ngrams.hashing` (token and n-gram hashes),
:mod:`~audit.ngrams.kernels` (the tokeniser's and the build's compiled loops),
:mod:`~audit.ngrams.build` (the sorted, packed keys and the CSR arrays),
:mod:`~audit.ngrams.storage` (save and load) and
:mod:`~audit.ngrams.query` (:class:`NgramIndex` and its queries).
"""

from audit.ngrams.build import FORMAT, DocInfo, collection_fingerprint
from audit.ngrams.hashing import Ngrams, iter_ngram_hashes, ngram_hashes
from audit.ngrams.query import NgramIndex, RareNgram, TextNgrams, minimal_set
from audit.ngrams.tokenizer import ABBREVIATIONS, TOKENIZER_NAME, Tokenizer, Tokens

__all__ = ["ABBREVIATIONS", "FORMAT", "TOKENIZER_NAME", "DocInfo", "NgramIndex", "Ngrams", "RareNgram", "TextNgrams",
           "Tokenizer", "Tokens", "collection_fingerprint", "iter_ngram_hashes", "minimal_set", "ngram_hashes"]
