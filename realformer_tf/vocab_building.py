"""Vocabulary building: WordPiece vocabs learned by byte-pair merges, SentencePiece models
(build_vocab.py is the command; translation/create_translation_data.py trains its
SentencePiece model here too).

WordPiece (build_wordpiece_vocab): the text goes through tokenization.BasicTokenizer (cleaning,
optional lower-casing and accent stripping, punctuation split) and the resulting word counts
train byte-pair-encoding style merges (learn_wordpieces): every word starts as its characters
("c", "##h", "##a", ...), and the most frequent adjacent pair of symbols in the corpus is merged
into a new piece ("ch", then "cha", "##at", ...) until the vocab is full. A piece that does not
start a word carries the "##" prefix, as in BERT. The vocab is, in this order:

  [PAD] [UNK] [CLS] [SEP] [MASK]        the special tokens, always first
  [unused0] ... [unusedN-1]             num_unused of them
  every character seen >= min_frequency times, then the same with "##"
  the learned pieces, in merge order

exactly vocab_size tokens (if the corpus runs out of pairs occurring at least min_frequency
times, the rest is filled with further [unusedK] and a warning is logged).

SentencePiece (build_sentencepiece): trains a model on the non-empty lines of the text with one
of the special-id layouts of SPM_ID_LAYOUTS (BERT's, or the translation model's).

The text is read by read_text_blocks through the shared reader, text_input.TextReader (gzip
files decompressed, a file with too many undecodable bytes refused, over-long lines cut at
whitespace).
"""

import collections
import heapq
import io

from absl import logging
import tensorflow as tf

from realformer_tf import common
from realformer_tf import text_input
import tokenization

# Longer words are [UNK] for WordpieceTokenizer, so they are not learned from.
_MAX_WORD_CHARS = 200
_READ_BLOCK = 1 << 22


def read_text_blocks(input_files, max_input_bytes=0, log_fn=None,
                     max_line_chars=text_input.DEFAULT_MAX_LINE_CHARS,
                     max_bad_fraction=text_input.DEFAULT_MAX_BAD_FRACTION):
  """Yields the input text in blocks of whole lines, up to max_input_bytes.

  Args:
    input_files: list of paths (plain or gzip text).
    max_input_bytes: stop after this many bytes of text (at a line end); 0 = no cap.
    log_fn: progress logger (defaults to tf logging).
    max_line_chars: longer lines are cut at whitespace (text_input.TextReader).
    max_bad_fraction: a file with a larger share of undecodable bytes is an error.

  Yields:
    str blocks, each a run of whole lines (undecodable bytes dropped).
  """
  total = sum(tf.io.gfile.stat(p).length for p in input_files)
  if max_input_bytes:
    total = min(total, max_input_bytes)
  meter = common.ProgressMeter(total / 1e6, unit="MB", log_fn=log_fn or logging.info)
  meter.update(0.0)
  reader = text_input.TextReader(max_line_chars, max_bad_fraction, read_block=_READ_BLOCK)
  done = 0
  block = []
  block_bytes = 0

  def progress():
    # Bytes of text against a cap; otherwise bytes of the files on disk (gzip: compressed).
    return (done if max_input_bytes else reader.disk_bytes_done) / 1e6

  for line in reader.read_files(input_files):
    if max_input_bytes and done + len(line) > max_input_bytes:
      reader.check_partial()
      break
    done += len(line)
    block.append(line)
    block_bytes += len(line)
    if block_bytes >= _READ_BLOCK:
      yield tokenization.convert_to_unicode(b"".join(block))
      block, block_bytes = [], 0
      meter.update(progress())
  if block:
    yield tokenization.convert_to_unicode(b"".join(block))
  meter.update(progress(), force=True)


def count_words(blocks, do_lower_case):
  """Counts the BasicTokenizer words of the text.

  Args:
    blocks: iterable of str.
    do_lower_case: passed to BasicTokenizer.

  Returns:
    collections.Counter word -> count.
  """
  basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  # Cleaning is char-local, so whole blocks can be cleaned and split at once;
  # the per-token steps then run once per distinct whitespace token.
  token_counts = collections.Counter()
  for block in blocks:
    token_counts.update(basic.whitespace_tokens(block))
  word_counts = collections.Counter()
  for token, count in token_counts.items():
    for word in basic.split_token(token):
      word_counts[word] += count
  return word_counts


def _learnable_words(word_counts):
  """(word, count) pairs to learn from, most frequent first (ties by word).

  Args:
    word_counts: dict word -> count.

  Returns:
    List of (word, count); empty words and words over _MAX_WORD_CHARS are left out.
  """
  return sorted(((w, c) for w, c in word_counts.items() if 0 < len(w) <= _MAX_WORD_CHARS),
                key=lambda x: (-x[1], x[0]))


def _char_alphabet(words, min_frequency):
  """The characters seen at least min_frequency times, most frequent first (ties by character).

  Args:
    words: (word, count) pairs.
    min_frequency: minimum character count.

  Returns:
    List of characters.
  """
  char_counts = collections.Counter()
  for word, count in words:
    for ch in word:
      char_counts[ch] += count
  return sorted((ch for ch, c in char_counts.items() if c >= min_frequency),
                key=lambda ch: (-char_counts[ch], ch))


class _Symbols(object):
  """The symbols of the merges (characters, their "##" forms, learned pieces) and their ids.

  Ids are given in order of first use; the merge ties go to the smallest (left, right) ids.
  """

  def __init__(self, alphabet):
    self.names = []
    self.ids = {}
    for ch in alphabet:
      self.id_of(ch)
    for ch in alphabet:
      self.id_of("##" + ch)

  def id_of(self, name):
    """The id of symbol `name`, numbered next when it is new."""
    i = self.ids.get(name)
    if i is None:
      i = self.ids[name] = len(self.names)
      self.names.append(name)
    return i

  def merged_name(self, pair):
    """The piece a merge of `pair` makes: "ch" + "##a" -> "cha" (the "##" of the right goes)."""
    return self.names[pair[0]] + self.names[pair[1]][2:]


def _encode_words(words, alphabet, symbols):
  """Each word as symbol ids ("c", "##h", "##a", ...), with its count.

  Args:
    words: (word, count) pairs.
    alphabet: the characters kept.
    symbols: _Symbols of the alphabet.

  Returns:
    (seqs, counts): lists of id lists and of counts. A word with a character outside the
    alphabet is left out (it would be [UNK] anyway).
  """
  known = set(alphabet)
  seqs = []
  counts = []
  for word, count in words:
    if not all(ch in known for ch in word):
      continue
    seqs.append([symbols.ids[word[0]]] + [symbols.ids["##" + ch] for ch in word[1:]])
    counts.append(count)
  return seqs, counts


def _count_pairs(seqs, counts):
  """Counts the adjacent symbol pairs of all words.

  Args:
    seqs: words as symbol-id lists.
    counts: the count of each word.

  Returns:
    (pair_counts, where): defaultdict pair -> count (weighted by the word counts), and
    defaultdict pair -> set of indices of the words that hold it.
  """
  pair_counts = collections.defaultdict(int)
  where = collections.defaultdict(set)
  for w, seq in enumerate(seqs):
    count = counts[w]
    for pair in zip(seq, seq[1:]):
      pair_counts[pair] += count
      where[pair].add(w)
  return pair_counts, where


def _pop_best_pair(heap, pair_counts):
  """Pops the most frequent pair (ties: smallest ids) whose heap entry is current.

  Counts change after each merge and the heap is updated lazily: an entry whose count fell is
  queued again with its count; one whose count rose already has a newer entry.

  Args:
    heap: heapq of (-count, pair).
    pair_counts: the current counts.

  Returns:
    (pair, count), or None when the heap is empty.
  """
  while heap:
    neg, pair = heapq.heappop(heap)
    actual = pair_counts.get(pair, 0)
    if actual == -neg:
      return pair, actual
    if 0 < actual < -neg:
      heapq.heappush(heap, (-actual, pair))
  return None


def _merge_in_word(seq, pair, new_id):
  """`seq` with every occurrence of `pair` (left to right, not overlapping) replaced by new_id.

  Returns:
    The new id list, or None when `pair` does not occur (a stale index entry).
  """
  a, b = pair
  n = len(seq)
  out = []
  i = 0
  merged = False
  while i < n:
    if i + 1 < n and seq[i] == a and seq[i + 1] == b:
      out.append(new_id)
      i += 2
      merged = True
    else:
      out.append(seq[i])
      i += 1
  return out if merged else None


def _apply_merge(pair, new_id, seqs, counts, pair_counts, where):
  """Merges `pair` into new_id in every word that holds it, updating the pair counts.

  Args:
    pair: the (left id, right id) merged.
    new_id: the id of the merged symbol.
    seqs: words as symbol-id lists (updated in place).
    counts: the count of each word.
    pair_counts: pair -> count (updated in place; `pair` is removed).
    where: pair -> word indices (updated in place).

  Returns:
    The set of pairs the merge created or counted again (to queue with their new counts).
  """
  changed = set()
  for w in where.pop(pair, ()):
    seq = seqs[w]
    out = _merge_in_word(seq, pair, new_id)
    if out is None:
      continue
    count = counts[w]
    for p in zip(seq, seq[1:]):
      pair_counts[p] -= count
    for p in zip(out, out[1:]):
      pair_counts[p] += count
      where[p].add(w)
      changed.add(p)
    seqs[w] = out
  pair_counts.pop(pair, None)
  return changed


def _queue_changed_pairs(heap, pair_counts, changed, merged_pair):
  """Queues the pairs a merge changed with their new counts (not the merged one)."""
  for p in changed:
    if p != merged_pair and pair_counts[p] > 0:
      heapq.heappush(heap, (-pair_counts[p], p))


def learn_wordpieces(word_counts, num_pieces, min_frequency, log_fn=None):
  """Learns WordPiece tokens by BPE merges on word counts.

  Args:
    word_counts: dict word -> count (words without whitespace).
    num_pieces: stop after this many new pieces (beyond the alphabet).
    min_frequency: minimum character count for the alphabet and minimum pair
      count for a merge.
    log_fn: progress logger.

  Returns:
    (alphabet, pieces): alphabet is the list of characters kept (most frequent
    first), pieces the learned multi-character tokens in merge order (with
    "##" for pieces that do not start a word).
  """
  words = _learnable_words(word_counts)
  alphabet = _char_alphabet(words, min_frequency)
  if num_pieces <= 0:
    return alphabet, []
  symbols = _Symbols(alphabet)
  seqs, counts = _encode_words(words, alphabet, symbols)
  pair_counts, where = _count_pairs(seqs, counts)
  heap = [(-c, p) for p, c in pair_counts.items()]
  heapq.heapify(heap)
  meter = common.ProgressMeter(num_pieces, unit="pieces", log_fn=log_fn or logging.info)
  meter.start(0)
  pieces = []
  while len(pieces) < num_pieces:
    best = _pop_best_pair(heap, pair_counts)
    if best is None or best[1] < min_frequency:
      break
    pair = best[0]
    name = symbols.merged_name(pair)
    # The same string can come from two different pairs: a piece enters the vocab once.
    if name not in symbols.ids:
      pieces.append(name)
    new_id = symbols.id_of(name)
    changed = _apply_merge(pair, new_id, seqs, counts, pair_counts, where)
    _queue_changed_pairs(heap, pair_counts, changed, pair)
    meter.update(len(pieces), prefix="learned ")
  return alphabet, pieces


def build_wordpiece_vocab(input_files, vocab_size, do_lower_case=True,
                          num_unused=0, min_frequency=2, max_input_bytes=0,
                          log_fn=None,
                          max_line_chars=text_input.DEFAULT_MAX_LINE_CHARS,
                          max_bad_fraction=text_input.DEFAULT_MAX_BAD_FRACTION):
  """Builds the list of WordPiece vocab tokens (see the module docstring).

  Args:
    input_files: list of text files.
    vocab_size: exact number of tokens to return.
    do_lower_case: as for the tokenizer that will use the vocab.
    num_unused: number of [unusedN] tokens after the specials.
    min_frequency: minimum count of a character or merged pair.
    max_input_bytes: read at most this much text (0 = all).
    log_fn: progress logger.
    max_line_chars: longer lines are cut at whitespace.
    max_bad_fraction: a file with a larger share of undecodable bytes is an error.

  Returns:
    list of vocab_size token strings.
  """
  log_fn = log_fn or logging.info
  head = list(tokenization.SPECIAL_TOKENS) + [
      "[unused%d]" % i for i in range(num_unused)]
  if vocab_size < len(head):
    common.fail("--vocab_size=%d: too small for the %d special and unused "
                "tokens" % (vocab_size, len(head)))
  word_counts = count_words(read_text_blocks(input_files, max_input_bytes, log_fn,
                                             max_line_chars, max_bad_fraction),
                            do_lower_case)
  log_fn("%d distinct words, %d words in all" %
         (len(word_counts), sum(word_counts.values())))
  alphabet = _char_alphabet(_learnable_words(word_counts), min_frequency)
  needed = len(head) + 2 * len(alphabet)
  if vocab_size < needed:
    common.fail("--vocab_size=%d: too small for the %d special/unused tokens and "
                "the %d characters seen >= %d times (with their ## forms): needs "
                "at least %d (or raise --min_frequency)" %
                (vocab_size, len(head), len(alphabet), min_frequency, needed))
  alphabet, pieces = learn_wordpieces(word_counts, vocab_size - needed,
                                      min_frequency, log_fn)
  tokens = head + alphabet + ["##" + ch for ch in alphabet] + pieces
  if len(tokens) < vocab_size:
    extra = vocab_size - len(tokens)
    logging.warning(
        "--vocab_size=%d: the corpus has no more pairs occurring >= %d times; "
        "filled the last %d entries with [unusedN]" %
        (vocab_size, min_frequency, extra))
    tokens += ["[unused%d]" % i for i in range(num_unused, num_unused + extra)]
  assert len(tokens) == vocab_size and len(set(tokens)) == vocab_size
  return tokens


def _spm_sentences(input_files, max_input_bytes, do_lower_case, log_fn, max_line_chars,
                   max_bad_fraction):
  """The non-empty lines of the input, stripped (lower-cased with do_lower_case)."""
  for block in read_text_blocks(input_files, max_input_bytes, log_fn, max_line_chars,
                                max_bad_fraction):
    if do_lower_case:
      block = block.lower()
    for line in block.split("\n"):
      line = line.strip()
      if line:
        yield line


def _spm_control_symbols(num_unused):
  """[CLS], [SEP], [MASK] and the [unusedN]: SentencePiece control symbols (ids 2, 3, 4, ...)."""
  return ["[CLS]", "[SEP]", "[MASK]"] + ["[unused%d]" % i for i in range(num_unused)]


def _keeping_input_errors(lines, input_errors):
  """Yields `lines`; a UsageError ends them and is appended to input_errors.

  An error raised inside the iterator would surface from the C++ trainer as a generic
  RuntimeError: it is kept and raised after the trainer returns.

  Args:
    lines: iterator of str.
    input_errors: list the error is appended to.

  Yields:
    The lines.
  """
  try:
    for line in lines:
      yield line
  except common.UsageError as e:
    input_errors.append(e)


# SentencePiece special-id layouts (trainer arguments): BERT's ([PAD]=0, [UNK]=1, then the
# control symbols [CLS], [SEP], [MASK], ...) and the translation model's (docs/translation.md:
# pad=0, unk=1, bos=2, eos=3, no control symbols).
SPM_ID_LAYOUTS = {
    "bert": dict(pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]", unk_piece="[UNK]"),
    "nmt": dict(pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece="<pad>", unk_piece="<unk>",
                bos_piece="<s>", eos_piece="</s>"),
}


def _train_spm_model(sentences, input_errors, vocab_size, algorithm, control_symbols,
                     id_layout="bert", flag_name="vocab_size"):
  """Trains a SentencePiece model in memory.

  Args:
    sentences: iterator of training lines (from _keeping_input_errors).
    input_errors: its list of kept input errors (the first is raised).
    vocab_size: number of pieces (specials included).
    algorithm: "unigram" or "bpe".
    control_symbols: _spm_control_symbols(...) (empty for the "nmt" layout).
    id_layout: a key of SPM_ID_LAYOUTS: the special pieces and their ids.
    flag_name: the flag that gave vocab_size, for messages.

  Returns:
    The serialized model (bytes). Fails with one line when the trainer refuses.
  """
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  model = io.BytesIO()
  try:
    spm.SentencePieceTrainer.train(
        sentence_iterator=sentences,
        model_writer=model,
        vocab_size=vocab_size,
        model_type=algorithm,
        control_symbols=control_symbols,
        **SPM_ID_LAYOUTS[id_layout],
        character_coverage=1.0,
        max_sentence_length=1 << 16,
        num_threads=1,  # one thread keeps the model deterministic
        minloglevel=1)
  except RuntimeError as e:
    if input_errors:
      raise input_errors[0]
    message = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
    common.fail("--%s=%d: sentencepiece training failed: %s" %
                (flag_name, vocab_size, message))
  if input_errors:
    raise input_errors[0]
  return model.getvalue()


def _spm_pieces(proto):
  """The pieces of a serialized SentencePiece model, in id order."""
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  sp = spm.SentencePieceProcessor()
  sp.LoadFromSerializedProto(proto)
  return [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]


def build_sentencepiece(input_files, vocab_size, spm_model_file,
                        do_lower_case=True, num_unused=0, algorithm="unigram",
                        max_input_bytes=0, log_fn=None,
                        max_line_chars=text_input.DEFAULT_MAX_LINE_CHARS,
                        max_bad_fraction=text_input.DEFAULT_MAX_BAD_FRACTION,
                        id_layout="bert", flag_name="vocab_size"):
  """Trains a SentencePiece model; writes it to spm_model_file.

  Args:
    input_files: list of text files.
    vocab_size: number of pieces of the model (specials included).
    spm_model_file: where to write the model (atomically).
    do_lower_case: lower-case the training text (FullTokenizer does the same).
    num_unused: number of [unusedN] control symbols after [MASK].
    algorithm: "unigram" or "bpe".
    max_input_bytes: read at most this much text (0 = all).
    log_fn: progress logger.
    max_line_chars: longer lines are cut at whitespace.
    max_bad_fraction: a file with a larger share of undecodable bytes is an error.
    id_layout: "bert" (default: [PAD]=0, [UNK]=1, control symbols [CLS] [SEP] [MASK]
      [unusedN]) or "nmt" (<pad>=0, <unk>=1, <s>=2, </s>=3 and no control symbols, the
      translation model's ids; num_unused must be 0). See SPM_ID_LAYOUTS.
    flag_name: the flag that gave vocab_size, for messages.

  Returns:
    list of the vocab_size pieces in id order.
  """
  if id_layout not in SPM_ID_LAYOUTS:
    raise ValueError("id_layout must be one of %s, got %r" % (sorted(SPM_ID_LAYOUTS), id_layout))
  if id_layout != "bert" and num_unused:
    raise ValueError("num_unused is only for the 'bert' id layout")
  input_errors = []
  sentences = _keeping_input_errors(
      _spm_sentences(input_files, max_input_bytes, do_lower_case, log_fn or logging.info,
                     max_line_chars, max_bad_fraction), input_errors)
  control_symbols = _spm_control_symbols(num_unused) if id_layout == "bert" else []
  proto = _train_spm_model(sentences, input_errors, vocab_size, algorithm, control_symbols,
                           id_layout, flag_name)
  with common.atomic_output(spm_model_file, "wb") as f:
    f.write(proto)
  return _spm_pieces(proto)
