# coding=utf-8
"""Long-context tasks on whole chapters: chapters, seeded splits, cloze, supporting sentences and
long-document classification.

The library of `python -m etc_model.create_long_tasks` and `python -m etc_model.run_long_tasks`.

Chapters. The input is the corpus format of create_pretraining_data.py (one sentence per line,
a blank line between documents). A chapter is a run of lines of one document that holds no
heading line: a document is cut at every line matching HEADING_PATTERN ("CHAPTER 12.",
"Chapter IV", "BOOK II.", "ACT 3", "SCENE 1."; the heading line itself is dropped). A document
without headings is one chapter (the shared novels are stored as blocks of ~100-200 sentences of
one book, Shakespeare as plays with SCENE headings). A document whose first BYLINE_LINES lines
hold a title-page line (BYLINE_PATTERN: "By Jane Austen", "by H. G. Wells [1898]",
"Jane Austen (1803)", a Gutenberg / etext notice) starts a new book; the book's name is that
line, after the lines above it in the document ("PRIDE AND PREJUDICE / By Jane Austen"; numbered
when it repeats, "By Jane Austen #2"), the file's name before the first one.

Splits. Per book, the chapters are shuffled with numpy's generator seeded by (seed, crc32 of the
book's name) and the first round(test_fraction * n) go to test, the next round(dev_fraction * n)
to dev, the rest to train: a chapter is on one side only and the split does not depend on the
order of the books or on the other books.

Names (the cloze answers: people mostly, places too, as CBT's named entities). In a chapter, a
name is a title-case word (NAME_PATTERN: a capital and
then lower-case letters, "Emma", "Queequeg") that
  - occurs at least min_name_count times in the chapter,
  - occurs at least once not as the first word of its sentence (not sentence-initial-only),
  - never occurs in lower case in the chapter ("Well", "Poor", "There" do), and
  - is not in STOP_WORDS (titles, pronouns, days, months, interjections, nationalities).

Classification labels (make_classify_examples): a window's label is its chapter's book (the
book name above) or, with kind "author", the author named in the book's byline (book_author:
"By Jane Austen #2" and "Jane Austen (1803)" -> "Jane Austen"; a book without a named author,
e.g. the file name or a Gutenberg notice, keeps its book name). The label vocabulary is the
sorted set of the labels of all chapters of the input, whatever their split.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import functools
import gzip
import json
import os
import re
import sys
import zlib

from absl import logging
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import pretraining_data
from etc_model import etc_inputs

HEADING_PATTERN = re.compile(
    r"^\s*(CHAPTER|Chapter|BOOK|Book|ACT|Act|SCENE|Scene)\s+([0-9]+|[IVXLCivxlc]+)\b[.:]?")
BYLINE_PATTERN = re.compile(
    r"^([Bb]y( [A-Z][\w.'-]*)+( \[\d{4}\])?|[A-Z][a-z]+( [A-Z][a-z]+)+ \(\d{4}\)|"
    r".*\b(etext|EBook|Project Gutenberg)\b.*)$")
BYLINE_LINES = 3
NAME_PATTERN = re.compile(r"\b[A-Z][a-z]+\b")
_WORD_PATTERN = re.compile(r"[A-Za-z]+")

STOP_WORDS = frozenset("""
Mr Mrs Miss Ms Sir Madam Madame Lady Lord Dr Doctor Captain Colonel General Major Master Mistress
Uncle Aunt Father Mother Brother Sister Saint St King Queen Prince Princess Duke Earl Professor
God Heaven Lord Christ Christian Providence I Oh Ah Ay Aye Alas Yes No Nay Pray Well Dear Hark
Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June
July August September October November December English French German Dutch Spanish Indian
American British Scotch Irish Latin Greek Roman Italian Thou Thee Thy
""".split())

FEATURE_SHAPES_DOC = """
Cloze records (C = max_candidates, G = max_global_seq_length, L = max_seq_length), int64:
  token_ids [L], sentence_ids [L], long_breakpoints [L], global_token_ids [G],
  global_breakpoints [G]  (etc_inputs.make_sentence_global_inputs layout; the candidates are the
    first global tokens, each over its name's word pieces at the start of the long input)
  candidate_mask [C]      1 for a real candidate
  label [1]               index of the answer among the candidates
  blank_position [1]      long index of the (first) blank token
  answer_distance [1]     word pieces from the blank to the answer's last earlier mention
  most_frequent [1], most_recent [1]   the two baselines' candidate indices
Supporting-sentence records: the same five long / global features and
  sentence_labels [G]     1 at each inserted sentence's global token, 0 else (padding 0)
  inserted_start [1], inserted_count [1]   the run of inserted sentences (global indices)
Classification records: the same five long / global features and
  label [1]               index of the window's book / author in the label vocabulary
    (long_tasks.json: classify_labels)
"""

# The summary create_long_tasks writes beside the records (settings, counts, classify_labels).
SUMMARY_NAME = "long_tasks.json"
# The kinds of classification label (chapter_label).
CLASSIFY_LABEL_KINDS = ("book", "author")
# A byline's author: "By Jane Austen", "by H. G. Wells [1898]", "Jane Austen (1803)".
_AUTHOR_PATTERNS = (
    re.compile(r"^[Bb]y ([A-Z][\w.'-]*(?: [A-Z][\w.'-]*)*)(?: \[\d{4}\])?$"),
    re.compile(r"^([A-Z][a-z]+(?: [A-Z][a-z]+)+) \(\d{4}\)$"))
_BOOK_NUMBER_PATTERN = re.compile(r" #\d+$")

# Buckets of answer_distance (word pieces) for the by-distance breakdown.
DISTANCE_BUCKETS = (128, 512, 2048)
# The packed long / global features every task's record starts with (make_sentence_global_inputs).
PACKED_FEATURES = ("token_ids", "sentence_ids", "long_breakpoints", "global_token_ids",
                   "global_breakpoints")
# Distinct words whose pieces make_tokenize_word keeps (about 100 bytes each).
WORD_CACHE_SIZE = 1 << 18
# SentencePiece's word-start marker (a piece "\u2581the" is the word "the" after a space).
WORD_START = u"\u2581"


def distance_bucket(distance):
  """The name of the answer_distance bucket of `distance` ("0-127", ..., "2048+")."""
  low = 0
  for high in DISTANCE_BUCKETS:
    if distance < high:
      return "%d-%d" % (low, high - 1)
    low = high
  return "%d+" % low


Chapter = collections.namedtuple("Chapter", ["book", "index", "sentences"])


def is_heading(line):
  """Whether a line is a chapter / scene heading (HEADING_PATTERN)."""
  return HEADING_PATTERN.match(line) is not None


def is_byline(line):
  """Whether a line is a title-page line that starts a new book (BYLINE_PATTERN)."""
  return BYLINE_PATTERN.match(line.strip()) is not None


def documents_to_chapters(documents, default_book):
  """Cuts documents into chapters (see the module docstring).

  Args:
    documents: list of documents, each a list of sentence strings (one per line).
    default_book: the book name before the first title page (e.g. the file's name).

  Returns:
    List of Chapter(book, index in its book, sentences), in input order.
  """
  chapters = []
  book = default_book
  seen_books = collections.Counter()
  counts = collections.Counter()
  for document in documents:
    at = next((i for i, l in enumerate(document[:BYLINE_LINES]) if is_byline(l)), None)
    if at is not None:
      # The title above the byline names the book too (Shakespeare's plays share a byline).
      byline = " / ".join(l.strip() for l in document[max(0, at - 1):at + 1])
      seen_books[byline] += 1
      book = byline if seen_books[byline] == 1 else "%s #%d" % (byline, seen_books[byline])
    current = []
    for line in document + [None]:
      if line is None or is_heading(line):
        if current:
          chapters.append(Chapter(book, counts[book], current))
          counts[book] += 1
        current = []
      else:
        current.append(line)
  return chapters


def split_chapters(chapters, dev_fraction, test_fraction, seed):
  """Assigns whole chapters to train / dev / test, per book, seeded.

  Args:
    chapters: list of Chapter.
    dev_fraction: share of each book's chapters for dev.
    test_fraction: share for test.
    seed: int.

  Returns:
    List of "train" / "dev" / "test", one per chapter.
  """
  by_book = collections.OrderedDict()
  for i, chapter in enumerate(chapters):
    by_book.setdefault(chapter.book, []).append(i)
  splits = [None] * len(chapters)
  for book, indices in by_book.items():
    rng = np.random.default_rng([seed, zlib.crc32(book.encode("utf-8"))])
    order = [indices[j] for j in rng.permutation(len(indices))]
    num_test = int(round(test_fraction * len(order)))
    num_dev = int(round(dev_fraction * len(order)))
    for rank, i in enumerate(order):
      splits[i] = ("test" if rank < num_test else
                   "dev" if rank < num_test + num_dev else "train")
  return splits


def split_counts(chapters, splits):
  """{book: {split: chapters}} plus a "total" entry."""
  counts = collections.OrderedDict()
  for chapter, split in zip(chapters, splits):
    for key in (chapter.book, "total"):
      counts.setdefault(key, collections.OrderedDict(
          (name, 0) for name in ("train", "dev", "test")))[split] += 1
  total = counts.pop("total", None)
  if total is not None:
    counts["total"] = total
  return counts


def book_author(book):
  """The author named in a book's byline, or the book name itself when it names none.

  Args:
    book: a book name of documents_to_chapters ("PRIDE AND PREJUDICE / By Jane Austen",
      "By Jane Austen #2", "Jane Austen (1803)", a file name).

  Returns:
    str ("Jane Austen"; "H. G. Wells" for "... / by H. G. Wells [1898]").
  """
  byline = _BOOK_NUMBER_PATTERN.sub("", book).split(" / ")[-1]
  for pattern in _AUTHOR_PATTERNS:
    match = pattern.match(byline)
    if match:
      return match.group(1)
  return book


def chapter_label(chapter, kind):
  """A chapter's classification label: its book ("book") or its book's author ("author")."""
  if kind not in CLASSIFY_LABEL_KINDS:
    raise ValueError("unknown classification label kind %r (one of %s)" %
                     (kind, ", ".join(CLASSIFY_LABEL_KINDS)))
  return chapter.book if kind == "book" else book_author(chapter.book)


def read_classify_labels(data_dir):
  """The classification label vocabulary of a data directory (long_tasks.json), or None.

  Args:
    data_dir: the --output_dir of create_long_tasks.

  Returns:
    list of label names, or None when there is no long_tasks.json or it has no
    classify_labels (data written before the classification task existed).

  Raises:
    ValueError: long_tasks.json is not JSON or classify_labels is not a list of strings.
  """
  path = os.path.join(data_dir, SUMMARY_NAME)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, "r") as f:
    summary = json.loads(f.read())
  labels = summary.get("classify_labels") if isinstance(summary, dict) else None
  if labels is None:
    return None
  if not (isinstance(labels, list) and labels and all(isinstance(l, str) for l in labels)):
    raise ValueError("classify_labels is not a non-empty list of strings")
  return labels


def title_page_lines(sentences):
  """How many leading lines of a chapter are its book's title page (byline and the line above).

  Those lines name the book and its author: the classification examples leave them out.

  Args:
    sentences: the chapter's sentence strings.

  Returns:
    int: 0 when no byline is among the first BYLINE_LINES lines.
  """
  at = next((i for i, l in enumerate(sentences[:BYLINE_LINES]) if is_byline(l)), None)
  return 0 if at is None else at + 1


def first_word(sentence):
  """The first word of a sentence (after quotes and punctuation), or None."""
  match = _WORD_PATTERN.search(sentence)
  return match.group(0) if match else None


def find_names(sentences, min_name_count):
  """The names of a chapter (rule in the module docstring).

  Args:
    sentences: the chapter's sentence strings.
    min_name_count: k, the least number of occurrences.

  Returns:
    Sorted list of names.
  """
  total = collections.Counter()
  inner = collections.Counter()
  lower = set()
  for sentence in sentences:
    first = first_word(sentence)
    for i, match in enumerate(NAME_PATTERN.finditer(sentence)):
      word = match.group(0)
      total[word] += 1
      if not (i == 0 and word == first and sentence.find(word) == match.start()):
        inner[word] += 1
    lower.update(w for w in _WORD_PATTERN.findall(sentence) if w.islower())
  return sorted(w for w, n in total.items()
                if n >= min_name_count and inner[w] and w.lower() not in lower and
                w not in STOP_WORDS)


def tokenize_fn(tokenizer):
  """text -> ids of a FullTokenizer (its fast tokenize_to_ids when it has one).

  A SentencePiece tokenizer (spm_model_file) gives a SentencePieceSpans, which also tells
  where each piece is in the text (tokenize_sentence finds the names' pieces by it).
  """
  if getattr(tokenizer, "sp_model", None) is not None:
    return SentencePieceSpans(tokenizer)
  tokenize = getattr(tokenizer, "tokenize_to_ids", None)
  if tokenize is None:
    tokenize = lambda text: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
  return tokenize


def original_offsets(text, lowered):
  """For each character position of `lowered` (= text.lower()), the position in `text`.

  str.lower maps a few characters to two ("\u0130" -> "i\u0307"); both map to the original one.

  Args:
    text: str.
    lowered: text.lower() (or text itself).

  Returns:
    list of len(lowered) + 1 ints (the last is len(text)).
  """
  if len(lowered) == len(text):
    return list(range(len(text) + 1))
  back = []
  for i, char in enumerate(text):
    back.extend([i] * len(char.lower()))
  back.append(len(text))
  if len(back) != len(lowered) + 1:  # not text.lower(): no character correspondence
    raise ValueError("the lower-cased text has another length than text.lower()")
  return back


class SentencePieceSpans(object):
  """A SentencePiece FullTokenizer's ids of a text, and where each piece is in it.

  Calling it gives FullTokenizer.tokenize_to_ids(text) (the text lower-cased first with
  do_lower_case). pieces_with_spans gives the same ids with each piece's character span in the
  text, from SentencePiece's own offsets (encode_as_immutable_proto): a piece after a space
  starts at that space ("\u2581friend" covers " friend"), the word-start marker alone
  ("\u2581") before a word covers that space or nothing.
  """

  def __init__(self, tokenizer):
    """Args: tokenizer: a tokenization.FullTokenizer with spm_model_file."""
    self._tokenizer = tokenizer
    self._sp = tokenizer.sp_model
    marker = self._sp.PieceToId(WORD_START)
    # The marker alone as a piece (build_vocab's models have it; a model without it: None).
    self.marker_id = None if self._sp.IsUnknown(marker) else marker

  def __call__(self, text):
    return self._tokenizer.tokenize_to_ids(text)

  def pieces_with_spans(self, text):
    """(ids, spans): the ids of __call__ and each piece's [begin, end) character span in text.

    Args:
      text: str.

    Returns:
      (list of int, list of (begin, end)).
    """
    lowered = text.lower() if self._tokenizer.do_lower_case else text
    back = original_offsets(text, lowered)
    pieces = self._sp.encode_as_immutable_proto(lowered).pieces
    return ([p.id for p in pieces],
            [(back[p.begin], back[p.end - 1] + 1 if p.end > p.begin else back[p.begin])
             for p in pieces])


def piece_run(spans, begin, end):
  """The pieces [first, last + 1) whose spans overlap the characters [begin, end), or None."""
  inside = [i for i, (b, e) in enumerate(spans) if e > begin and b < end]
  return (inside[0], inside[-1] + 1) if inside else None


class TokenizedSentence(object):
  """A sentence's word pieces and where each name occurs in them.

  Attributes:
    ids: list of word-piece ids.
    mentions: list of (name, start, end): the name's pieces are ids[start:end].
    name_ids: {name: the ids of the name tokenised on its own} for the names mentioned (a cloze
      candidate's pieces; with WordPiece they are a mention's, with SentencePiece a mention
      after punctuation lacks the word-start marker), or None.
  """

  def __init__(self, ids, mentions, name_ids=None):
    self.ids = ids
    self.mentions = mentions
    self.name_ids = name_ids


def tokenize_sentence(text, names_pattern, tokenize):
  """Tokenises one sentence, recording each name's pieces.

  WordPiece: the sentence is tokenised in pieces cut around the names. The names are bounded by
  \\b (never a letter or digit next to them), where BERT's basic tokenizer splits anyway: the
  ids equal those of the whole sentence.

  SentencePiece (tokenize a SentencePieceSpans): cutting would change the ids (the text after a
  name would start a new word: "Emma's" cut as "Emma" + "'s" gives an extra word-start
  marker), so the whole sentence is tokenised and a name's mention is the run of pieces that
  overlap its characters, with a word-start marker piece ("\u2581") alone right before it (so
  that a blank in place of the mention leaves the same pieces around it whether the model
  writes the marker alone or joined to the name's first piece).

  Args:
    text: the sentence.
    names_pattern: compiled regex matching the chapter's names, or None.
    tokenize: text -> ids (tokenize_fn).

  Returns:
    TokenizedSentence.
  """
  if names_pattern is None:
    return TokenizedSentence(list(tokenize(text)), [])
  if isinstance(tokenize, SentencePieceSpans):
    return _tokenize_sentence_by_spans(text, names_pattern, tokenize)
  ids, mentions, pos = [], [], 0
  name_ids = {}
  for match in names_pattern.finditer(text):
    ids.extend(tokenize(text[pos:match.start()]))
    name_ids[match.group(0)] = list(tokenize(match.group(0)))
    mentions.append((match.group(0), len(ids), len(ids) + len(name_ids[match.group(0)])))
    ids.extend(name_ids[match.group(0)])
    pos = match.end()
  ids.extend(tokenize(text[pos:]))
  return TokenizedSentence(ids, mentions, name_ids)


def _tokenize_sentence_by_spans(text, names_pattern, tokenize):
  """tokenize_sentence with SentencePiece: the whole sentence's ids, mentions by piece spans."""
  ids, spans = tokenize.pieces_with_spans(text)
  mentions, name_ids = [], {}
  for match in names_pattern.finditer(text):
    run = piece_run(spans, match.start(), match.end())
    if run is None:  # no piece covers it (not possible for letters; kept safe)
      continue
    first, end = run
    if first > 0 and ids[first - 1] == tokenize.marker_id:
      first -= 1
    mentions.append((match.group(0), first, end))
    if match.group(0) not in name_ids:
      name_ids[match.group(0)] = list(tokenize(match.group(0)))
  return TokenizedSentence(ids, mentions, name_ids)


def names_regex(names):
  """A regex matching any of the names as a whole word, or None for no names."""
  if not names:
    return None
  return re.compile(r"\b(%s)\b" % "|".join(re.escape(n) for n in sorted(names, key=len,
                                                                         reverse=True)))


def tokenize_chapter(chapter, tokenize, min_name_count):
  """(names, [TokenizedSentence]) of a chapter; empty sentences dropped."""
  names = find_names(chapter.sentences, min_name_count)
  pattern = names_regex(names)
  sentences = [tokenize_sentence(s, pattern, tokenize) for s in chapter.sentences]
  return names, [s for s in sentences if s.ids]


def vocabulary_flag(vocab_file, spm_model_file):
  """The flag naming the vocabulary ("--vocab_file=..." or "--spm_model_file=..."), checked.

  Exactly one of them is given and it is a file: one line otherwise.

  Args:
    vocab_file: --vocab_file (or None).
    spm_model_file: --spm_model_file (or None).

  Returns:
    str, for messages.
  """
  if vocab_file and spm_model_file:
    common.fail("--spm_model_file=%s: give it or --vocab_file=%s, not both (the SentencePiece "
                "model is the vocabulary)" % (spm_model_file, vocab_file))
  if spm_model_file:
    common.require_file(spm_model_file, "spm_model_file")
    return "--spm_model_file=%s" % spm_model_file
  if not vocab_file:
    common.fail("--vocab_file (or --spm_model_file) is required")
  common.require_file(vocab_file, "vocab_file")
  return "--vocab_file=%s" % vocab_file


def make_tokenize_word(tokenizer, cache_size=WORD_CACHE_SIZE):
  """word -> its word-piece ids (the tokenizer's; the last cache_size distinct words cached: a
  whole NQ or OpenKP split has millions of distinct words)."""

  @functools.lru_cache(maxsize=cache_size)
  def tokenize_word(word):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))

  return tokenize_word


def word_start_id(tokenizer):
  """The id of SentencePiece's word-start marker piece standing alone ("\u2581", the space
  before a word whose first characters form no piece with it), or None (a WordPiece tokenizer
  or a model without that piece)."""
  sp = getattr(tokenizer, "sp_model", None)
  if sp is None:
    return None
  marker = sp.PieceToId(WORD_START)
  return None if sp.IsUnknown(marker) else marker


def load_tokenizer(vocab_file, spm_model_file, do_lower_case):
  """The checked FullTokenizer of the vocabulary (WordPiece or SentencePiece); one line if bad."""
  source = vocabulary_flag(vocab_file, spm_model_file)
  try:
    return pretraining_data.make_tokenizer(vocab_file, do_lower_case,
                                           spm_model_file=spm_model_file or None)
  except (UnicodeDecodeError, ValueError, KeyError, IndexError) as e:
    if isinstance(e, common.UsageError):
      raise
    common.fail("%s: cannot be read as a vocabulary (%s)" % (source, e))


def special_token_ids(tokenizer, tokens, source):
  """{flag + "_id": id} of the special tokens; one line for one the vocabulary lacks.

  Args:
    tokenizer: tokenization.FullTokenizer (WordPiece or SentencePiece: vocab holds its pieces).
    tokens: OrderedDict {flag name: token}.
    source: vocabulary_flag's text, for messages.

  Returns:
    dict.
  """
  ids = {}
  is_spm = getattr(tokenizer, "sp_model", None) is not None
  for flag, token in tokens.items():
    if token not in tokenizer.vocab:
      common.fail("--%s=%s: not %s %s" % (flag, token, "a piece of" if is_spm else "in", source))
    if tokenizer.vocab[token] == 0:  # 0 pads the records: a global token of id 0 is not read
      common.fail("--%s=%s: has id 0, the padding id of the records; choose another token of "
                  "%s" % (flag, token, source))
    ids[flag + "_id"] = tokenizer.vocab[token]
  return ids


def example_rng(seed, task, chapter, window):
  """numpy Generator of one example: depends only on the seed and the example's identity."""
  key = zlib.crc32(("%s\t%s\t%d" % (task, chapter.book, chapter.index)).encode("utf-8"))
  return np.random.default_rng([seed, key, window])


def window_end(sentences, start, long_budget, global_budget):
  """The end of the longest run sentences[start:end] within both budgets.

  Args:
    sentences: TokenizedSentences.
    start: the first sentence of the run.
    long_budget: at most this many word pieces.
    global_budget: at most this many sentences.

  Returns:
    end (== start when sentences[start] alone is longer than long_budget).
  """
  end, used = start, 0
  while (end < len(sentences) and end - start < global_budget and
         used + len(sentences[end].ids) <= long_budget):
    used += len(sentences[end].ids)
    end += 1
  return end


def packed_features(record):
  """A record's PACKED_FEATURES as an OrderedDict of int lists (the task adds its labels).

  Args:
    record: dict of arrays of etc_inputs.make_sentence_global_inputs (one example).

  Returns:
    collections.OrderedDict {name: list of int} in PACKED_FEATURES order.
  """
  return collections.OrderedDict(
      (name, [int(v) for v in record[name]]) for name in PACKED_FEATURES)


def _pad(values, length):
  return list(values) + [0] * (length - len(values))


def make_cloze_examples(chapter, sentences, settings, seed):
  """The cloze examples of one chapter (Children's Book Test construction on long windows).

  The chapter is walked in windows of consecutive sentences. A window holds as many sentences
  as fit in the long budget (max_seq_length - max_candidates * max_candidate_pieces, for the
  candidates' pieces) and in the global budget (max_global_seq_length - max_candidates). Its
  question is its latest sentence in the second half of the window that holds a name mentioned
  in an earlier sentence of the window; one of those names (seeded choice) is the answer, and
  every mention of it in the question is replaced by one blank_token_id. The context is the
  window's sentences before the question; the next window starts after the question, or, with
  settings["cloze_window_stride"] = k > 0, k sentences after this window's start (overlapping
  contexts, more questions per chapter; a question already asked is not asked again). A window
  whose context has fewer than min_context_tokens pieces gives no example.

  Candidates: the distinct names mentioned in the context; with more than max_candidates, the
  answer and a seeded sample of the others; in seeded order. Baselines: most_frequent is the
  candidate with the most mentions in the context (ties: the later last mention), most_recent
  the candidate mentioned last. answer_distance is the blank's long position minus that of the
  last piece of the answer's last mention in the context.

  Args:
    chapter: Chapter.
    sentences: its TokenizedSentences (tokenize_chapter: the mentions of its names).
    settings: dict with max_seq_length, max_global_seq_length, max_candidates,
      max_candidate_pieces, min_context_tokens, global_token_id, candidate_token_id,
      blank_token_id; optional cloze_window_stride (0, the default: windows do not overlap).
    seed: int.

  Returns:
    List of dicts of int lists (the cloze features, see FEATURE_SHAPES_DOC), each with
    "answer" and "candidates" (names) for inspection.
  """
  long_len, global_len = settings["max_seq_length"], settings["max_global_seq_length"]
  num_cands, cand_pieces = settings["max_candidates"], settings["max_candidate_pieces"]
  long_budget = long_len - num_cands * cand_pieces
  global_budget = global_len - num_cands
  stride = settings.get("cloze_window_stride", 0)
  examples = []
  start, window, asked = 0, 0, set()
  while start < len(sentences):
    end = window_end(sentences, start, long_budget, global_budget)
    if end == start:  # one sentence longer than the budget: skip it
      start += 1
      continue
    question, answers = None, []
    for q in range(end - 1, start + (end - start) // 2 - 1, -1):
      earlier = set(m[0] for s in sentences[start:q] for m in s.mentions)
      answers = sorted(set(m[0] for m in sentences[q].mentions) & earlier)
      if answers:
        question = q
        break
    if question is None or question in asked:
      start = start + stride if stride else end
      continue
    asked.add(question)
    context = sentences[start:question]
    context_len = sum(len(s.ids) for s in context)
    if context_len >= settings["min_context_tokens"]:
      rng = example_rng(seed, "cloze", chapter, window)
      example = _cloze_example(context, sentences[question], answers, rng, settings)
      if example is not None:
        examples.append(example)
    window += 1
    start = start + stride if stride else question + 1
  return examples


def _cloze_example(context, question, answers, rng, settings):
  """One cloze example (see make_cloze_examples); None when the candidates do not fit."""
  answer = answers[int(rng.integers(len(answers)))]
  count, last = collections.Counter(), {}
  offset = 0
  for sentence in context:
    for name, _, end in sentence.mentions:
      count[name] += 1
      last[name] = offset + end - 1
    offset += len(sentence.ids)
  others = sorted(n for n in count if n != answer)
  if len(others) > settings["max_candidates"] - 1:
    others = [others[i] for i in sorted(rng.choice(len(others), settings["max_candidates"] - 1,
                                                   replace=False))]
  candidates = [answer] + others
  candidates = [candidates[i] for i in rng.permutation(len(candidates))]
  # The question with each mention of the answer as one blank token.
  blanked, pos = [], 0
  for name, begin, end in question.mentions:
    if name == answer:
      blanked.extend(question.ids[pos:begin] + [settings["blank_token_id"]])
      pos = end
  blanked.extend(question.ids[pos:])
  name_ids = {}
  for sentence in context:
    for name, begin, end in sentence.mentions:
      name_ids.setdefault(name, (sentence.name_ids or {}).get(name, sentence.ids[begin:end]))
  cand_ids = [name_ids[c][:settings["max_candidate_pieces"]] for c in candidates]
  # One packed example: the candidates first, each a "sentence" of its name's pieces under its
  # own global token, then the context and the question (all attend to each other).
  record = etc_inputs.make_sentence_global_inputs(
      [cand_ids + [s.ids for s in context] + [blanked]], settings["max_seq_length"],
      settings["max_global_seq_length"], settings["global_token_id"])
  prefix = sum(len(c) for c in cand_ids)
  body = prefix + sum(len(s.ids) for s in context) + len(blanked)
  if int(record["input_mask"].sum()) != body:
    return None
  num_c = len(candidates)
  record["global_token_ids"][:num_c] = settings["candidate_token_id"]
  blank_position = prefix + sum(len(s.ids) for s in context) + blanked.index(
      settings["blank_token_id"])
  recency = {n: last[n] for n in candidates}
  most_recent = max(candidates, key=lambda n: recency[n])
  most_frequent = max(candidates, key=lambda n: (count[n], recency[n]))
  features = packed_features(record)
  features["candidate_mask"] = _pad([1] * num_c, settings["max_candidates"])
  features["label"] = [candidates.index(answer)]
  features["blank_position"] = [blank_position]
  features["answer_distance"] = [blank_position - (prefix + last[answer])]
  features["most_frequent"] = [candidates.index(most_frequent)]
  features["most_recent"] = [candidates.index(most_recent)]
  features["answer"] = answer
  features["candidates"] = candidates
  return features


def chapter_windows(sentences, long_len, global_len):
  """Cuts a chapter's TokenizedSentences into consecutive windows that fit L and G.

  Returns:
    List of (start, end) sentence ranges (a sentence longer than L alone is skipped).
  """
  windows, start = [], 0
  while start < len(sentences):
    end = window_end(sentences, start, long_len, global_len)
    if end == start:
      start += 1
      continue
    windows.append((start, end))
    start = end
  return windows


def make_supporting_examples(chapter, sentences, donors, settings, seed):
  """The supporting-sentence examples of one chapter.

  Each window of the chapter (chapter_windows) with more than inserted_sentences + 1 sentences
  and at least min_context_tokens pieces gets a run of inserted_sentences consecutive sentences
  replaced (seeded position) by as many consecutive sentences of a donor chapter (seeded choice
  among `donors`, another chapter of the same split, seeded start). Sentences at the end of the
  window that no longer fit are dropped. Labels: 1 at the inserted sentences' global tokens.

  Args:
    chapter: Chapter.
    sentences: its TokenizedSentences.
    donors: list of (Chapter, TokenizedSentences) of the same split, other chapters, each with
      at least inserted_sentences sentences.
    settings: dict with max_seq_length, max_global_seq_length, inserted_sentences,
      min_context_tokens, global_token_id.
    seed: int.

  Returns:
    List of dicts of int lists (see FEATURE_SHAPES_DOC), each with "donor" (book, index).
  """
  long_len, global_len = settings["max_seq_length"], settings["max_global_seq_length"]
  k = settings["inserted_sentences"]
  examples = []
  if not donors:
    return examples
  for window, (start, end) in enumerate(chapter_windows(sentences, long_len, global_len)):
    ids = [s.ids for s in sentences[start:end]]
    if len(ids) <= k + 1 or sum(len(s) for s in ids) < settings["min_context_tokens"]:
      continue
    rng = example_rng(seed, "supporting", chapter, window)
    at = int(rng.integers(len(ids) - k + 1))
    donor_chapter, donor_sentences = donors[int(rng.integers(len(donors)))]
    donor_start = int(rng.integers(len(donor_sentences) - k + 1))
    inserted = [s.ids for s in donor_sentences[donor_start:donor_start + k]]
    mixed = ids[:at] + inserted + ids[at + k:]
    labels = [0] * at + [1] * k + [0] * (len(ids) - at - k)
    while sum(len(s) for s in mixed) > long_len:
      mixed.pop()
      labels.pop()
    if sum(labels) < k:  # the inserted run itself did not fit
      continue
    record = etc_inputs.make_sentence_global_inputs([mixed], long_len, global_len,
                                                    settings["global_token_id"])
    features = packed_features(record)
    features["sentence_labels"] = _pad(labels, global_len)
    features["inserted_start"] = [at]
    features["inserted_count"] = [k]
    features["donor"] = (donor_chapter.book, donor_chapter.index)
    examples.append(features)
  return examples


def make_classify_examples(chapter, sentences, label, settings):
  """The long-document classification examples of one chapter: one per window.

  The chapter's windows are chapter_windows' (consecutive sentences filling L and G, one global
  token per sentence); a window of fewer than min_context_tokens word pieces gives no example.
  Every example of the chapter has the chapter's label (chapter_label's index in the label
  vocabulary). Nothing is drawn at random: the split (split_chapters) is the seeded part.

  Args:
    chapter: Chapter.
    sentences: its TokenizedSentences (without its title page: title_page_lines).
    label: int, the index of the chapter's label in the label vocabulary.
    settings: dict with max_seq_length, max_global_seq_length, min_context_tokens,
      global_token_id.

  Returns:
    List of dicts of int lists (see FEATURE_SHAPES_DOC), each with "book" and "window".
  """
  long_len, global_len = settings["max_seq_length"], settings["max_global_seq_length"]
  examples = []
  for window, (start, end) in enumerate(chapter_windows(sentences, long_len, global_len)):
    ids = [s.ids for s in sentences[start:end]]
    if sum(len(s) for s in ids) < max(1, settings["min_context_tokens"]):
      continue
    record = etc_inputs.make_sentence_global_inputs([ids], long_len, global_len,
                                                    settings["global_token_id"])
    features = packed_features(record)
    features["label"] = [int(label)]
    features["book"] = chapter.book
    features["window"] = window
    examples.append(features)
  return examples


def shuffle_examples(examples, seed, task):
  """The examples in a seeded random order (depends only on the seed, the task and their count).

  The classification train records are written in this order: in chapter order (book after
  book) a training job's shuffle buffer would see one label for hundreds of steps.

  Args:
    examples: list.
    seed: int.
    task: the task's name (part of the seed).

  Returns:
    A new list.
  """
  rng = np.random.default_rng([seed, zlib.crc32(("shuffle\t%s" % task).encode("utf-8"))])
  return [examples[i] for i in rng.permutation(len(examples))]


def serialize(features):
  """A tf.train.Example of the int features (other entries, e.g. names, left out), serialized."""
  feature = collections.OrderedDict()
  for name, values in features.items():
    if isinstance(values, list) and all(isinstance(v, int) for v in values):
      feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  # deterministic: map entries in key order, so that a rerun writes the same bytes.
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
      deterministic=True)


def write_split_files(record_path, examples_path, records, lines, should_stop=None):
  """A split's TFRecords (write_records) and its examples file (one JSON line per example,
  read_examples_file reads it), each written atomically.

  Args:
    record_path: the split's TFRecord file.
    examples_path: the split's examples file.
    records: the split's record feature dicts.
    lines: the split's example lines (dicts), in example order.
    should_stop: as write_records'.
  """
  write_records(record_path, records, should_stop)
  with common.atomic_output(examples_path) as f:
    for line in lines:
      f.write(json.dumps(line, sort_keys=False) + "\n")


def run_data_job(output_paths, summary_name, build):
  """Runs a data command's writing: the temporaries of dead writers removed first, SIGINT /
  SIGTERM stopping it at the next example with nothing half-written.

  Args:
    output_paths: the files the job writes (common.remove_stale_temps of each).
    summary_name: the summary file the job writes last (named in the stop message).
    build: function(should_stop) -> the summary dict; raises pretraining_data.Stopped once
      should_stop() is true (the file being written removed).

  Returns:
    build's summary. A stop exits 130 / 143 (common.STOP_SIGNALS) without the summary.
  """
  for path in output_paths:
    for removed in common.remove_stale_temps(path):
      logging.info("removed %s (left by an earlier run)", removed)
  common.STOP_SIGNALS.install()
  try:
    return build(lambda: common.STOP_SIGNALS.stopped)
  except pretraining_data.Stopped:
    common.STOP_SIGNALS.exit_if_stopped(
        "stopped before the end; %s was not written and the temporary file was removed (rerun "
        "the same command to start again)" % summary_name)
    raise


def print_split_summary(summary, output_dir, unit="examples"):
  """Prints a task data command's per-split counts and its one-line result.

  Args:
    summary: the command's summary: "splits" {split: {"records", unit, ...}}.
    output_dir: where the files were written.
    unit: the split count the records come from ("examples", "documents").
  """
  print(json.dumps(summary["splits"], indent=2))
  print("Wrote %s in %s" % (", ".join(
      "%s: %d records of %d %s" % (split, stats["records"], stats[unit], unit)
      for split, stats in summary["splits"].items()), output_dir))


def evaluate_command(argv, tool, evaluate_files, flag_values, unknown_ids_warning):
  """The command line of an official scorer: TOOL DATA.json PREDICTIONS.json [--out_file=F].

  Prints the result JSON (and writes it atomically to --out_file, which must not be an input);
  predictions for ids the data file lacks are warned about in one line.

  Args:
    argv: the command line as absl passes it.
    tool: the command's name, e.g. "etc_model.wikihop_evaluate".
    evaluate_files: function(data_file, prediction_file) -> result dict with "unknown_ids".
    flag_values: the parsed flags (out_file), read once the arguments are checked.
    unknown_ids_warning: the warning's %-format of (prediction file, how many ids, data file).

  Returns:
    The result dict.
  """
  args = argv[1:]
  if len(args) != 2:
    common.fail("usage: python -m %s DATA.json PREDICTIONS.json [--out_file=F] (got %d "
                "positional arguments)" % (tool, len(args)))
  data_file, prediction_file = args
  out_file = flag_values.out_file
  if out_file:
    common.check_not_input(out_file, [data_file, prediction_file], "out_file")
  result = evaluate_files(data_file, prediction_file)
  if result["unknown_ids"]:
    logging.warning(unknown_ids_warning, prediction_file, result["unknown_ids"], data_file)
  if out_file:
    with common.atomic_output(out_file) as f:
      f.write(json.dumps(result) + "\n")
  print(json.dumps(result, indent=2))
  sys.stdout.flush()
  return result


def iter_lines(path):
  """The text lines of a file, streamed, gunzipped when it starts with gzip's magic bytes."""
  with tf.io.gfile.GFile(path, "rb") as f:
    compressed = f.read(2) == b"\x1f\x8b"
    f.seek(0)
    stream = gzip.GzipFile(fileobj=f) if compressed else f
    for line in stream:
      yield line.decode("utf-8")


def load_json(path, source):
  """A JSON file's value; a missing file, a directory or bad JSON is one line naming `source`.

  Args:
    path: the file.
    source: how errors name it ("--dev_file=dev.json", "prediction file p.json").

  Returns:
    The parsed value.
  """
  if not tf.io.gfile.exists(path):
    common.fail("%s: file does not exist" % source)
  if tf.io.gfile.isdir(path):
    common.fail("%s: is a directory, expected a file" % source)
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      return json.loads(f.read().decode("utf-8"))
  except UnicodeDecodeError as e:
    common.fail("%s: not UTF-8 (%s)" % (source, e))
  except ValueError as e:
    common.fail("%s: not valid JSON (%s)" % (source, e))


def read_examples_file(data_dir, examples_path, record_path, num_records, tool,
                       count_key=None):
  """A split's examples file (JSON lines), checked against its records (one line when they
  differ): the lines that have a record must number them 0 .. num_records - 1.

  Args:
    data_dir: the --data_dir (for messages).
    examples_path: the split's examples file.
    record_path: the split's TFRecord file (for messages).
    num_records: the records in record_path.
    tool: the command that writes both, e.g. "etc_model.create_wikihop".
    count_key: None: a line's "record" is its one record; else the line's records are
      "record" .. "record" + line[count_key] - 1 (NQ's windows).

  Returns:
    list of dicts, one per example.
  """
  if not tf.io.gfile.exists(examples_path):
    common.fail("--data_dir=%s: has no %s (write the data with %s)" %
                (data_dir, os.path.basename(examples_path), tool))
  lines = []
  try:
    with tf.io.gfile.GFile(examples_path, "r") as f:
      for line in f:
        if line.strip():
          lines.append(json.loads(line))
  except ValueError as e:
    common.fail("--data_dir=%s: %s is not JSON lines (%s)" %
                (data_dir, os.path.basename(examples_path), e))
  recorded = []
  for line in lines:
    if line.get("record") is not None:
      count = line.get(count_key) if count_key else 1
      valid = isinstance(count, int) and count >= 1  # else never equal to the records
      recorded += list(range(line["record"], line["record"] + count)) if valid else [None]
  if recorded != list(range(num_records)):
    common.fail("--data_dir=%s: %s lists %d records but %s has %d (files of different runs of "
                "%s?)" % (data_dir, os.path.basename(examples_path), len(recorded),
                          os.path.basename(record_path), num_records, tool))
  return lines


def write_records(path, examples, should_stop=None):
  """Writes examples (serialize) to `path` atomically (temporary name, then rename).

  Args:
    path: the TFRecord file to write.
    examples: iterable of feature dicts.
    should_stop: polled at every example; True removes the temporary and raises
      pretraining_data.Stopped. None: never.
  """
  tmp_path = common.temp_path(path)
  try:
    with tf.io.TFRecordWriter(tmp_path) as writer:
      for features in examples:
        if should_stop is not None and should_stop():
          raise pretraining_data.Stopped()
        writer.write(serialize(features))
    tf.io.gfile.rename(tmp_path, path, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_path):
      tf.io.gfile.remove(tmp_path)
