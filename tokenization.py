"""Tokenization classes: the google-research/bert WordPiece algorithm, made fast.

The public API and the output are those of the official `tokenization.py`
(`BasicTokenizer` -> `WordpieceTokenizer`, wrapped by `FullTokenizer`). Only the
speed differs: the official char-by-char implementation runs at ~0.15 MB/s,
this one at several MB/s on one core, with identical tokens. How:

  * Text cleaning (drop NUL, U+FFFD and control/format chars, pad CJK chars
    with spaces) is done with one regex search: printable ASCII text (the
    common case) needs no cleaning at all; otherwise the few distinct special
    characters are classified once (memoised) and removed/padded with one
    `str.translate`.
  * After cleaning, every step of the official algorithm (lower-casing, accent
    stripping, punctuation splitting, WordPiece) acts on one whitespace token
    at a time, so `FullTokenizer` caches whitespace token -> word pieces
    (and -> ids for `tokenize_to_ids`) in a bounded per-instance dict.
  * A cache miss on an ASCII token uses `str.lower` and a regex split on
    ASCII punctuation (for ASCII, NFD accent stripping is the identity and the
    official punctuation test is exactly "not a letter or digit"); a non-ASCII
    token goes through the exact official per-character code.
  * Greedy longest-match-first WordPiece starts at the longest vocab entry
    length instead of the whole word (a longer substring cannot match).

tests/test_tokenization.py checks equality with an independent textbook
reimplementation of the official algorithm on the shared corpus sample and on
hand-made edge cases; bench/bench_tokenization.py measures the speed-up.

SentencePiece: `FullTokenizer(vocab_file, do_lower_case, spm_model_file=...)`
tokenizes with a SentencePiece model instead (the text is lower-cased first
when do_lower_case). Its vocab and ids are the model's own pieces. The BERT
special tokens must be pieces of the model so that `convert_tokens_to_ids`
resolves them: build_vocab.py --model_type=sentencepiece trains the model with
[PAD]=0 and [UNK]=1 as its pad/unk pieces and [CLS], [SEP], [MASK] (and any
[unusedN]) as control symbols (ids 2, 3, 4, ...), which raw text can never
produce, just as WordPiece splits a literal "[SEP]" in text into "[", "sep", "]".
"""

import collections
import re
import unicodedata

from absl import flags
import tensorflow as tf

from realformer_tf import common

# Special tokens every BERT vocab needs, in the order build_vocab.py writes them.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Default bound on the per-instance token caches (entries); the cache is
# cleared when it grows past this (roughly 250 bytes per entry).
DEFAULT_CACHE_SIZE = 500000

# The official tokenization.py's flag (bert-tensorflow 1.0.4), for its library API: [unusedN]
# tokens of the vocab pass through whole. The tools here refuse it (checked_tokenizer): their
# feature caches and exported tokenizers do not know it.
flags.DEFINE_bool(
    "preserve_unused_tokens", False,
    "If True, Wordpiece tokenization will not be applied to words in the vocab.")

_UNUSED_TOKEN_RE = re.compile(r"^\[unused\d+\]$")


def _preserving_unused_tokens():
  """The value of --preserve_unused_tokens (readable before the flags are parsed)."""
  return flags.FLAGS["preserve_unused_tokens"].value


def preserve_token(token, vocab):
  """Returns True if the token should forgo tokenization and be preserved (official rule).

  Args:
    token: one whitespace token of cleaned text.
    vocab: the vocab (a container of tokens).

  Returns:
    True with --preserve_unused_tokens for an [unusedN] token of the vocab.
  """
  if not _preserving_unused_tokens():
    return False
  if token not in vocab:
    return False
  return bool(_UNUSED_TOKEN_RE.search(token))


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Checks that the casing config is consistent with the checkpoint name.

  Like the official check, this only knows the names of the released Google
  BERT checkpoints (path ".../<model_name>/bert_model.ckpt"); other paths pass.

  Args:
    do_lower_case: value of the --do_lower_case flag.
    init_checkpoint: value of the --init_checkpoint flag (may be empty).

  Raises:
    common.UsageError (a ValueError), one line naming --do_lower_case, when a
    known uncased model is used with do_lower_case=False or a known cased
    model with do_lower_case=True.
  """
  if not init_checkpoint:
    return

  m = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
  if m is None:
    return

  model_name = m.group(1)

  lower_models = [
      "uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
      "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"
  ]

  cased_models = [
      "cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
      "multi_cased_L-12_H-768_A-12"
  ]

  if model_name in lower_models and not do_lower_case:
    actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
  elif model_name in cased_models and do_lower_case:
    actual_flag, case_name, opposite_flag = "True", "cased", "False"
  else:
    return
  common.fail(
      "--do_lower_case=%s: --init_checkpoint=%s looks like a %s model (%s), so "
      "pass --do_lower_case=%s to tokenize as it was pre-trained" %
      (actual_flag, init_checkpoint, case_name, model_name, opposite_flag))


def convert_to_unicode(text):
  """Converts `text` to a str (bytes are decoded as UTF-8, bad bytes dropped).

  Args:
    text: str or bytes.

  Returns:
    The text as str.
  """
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "ignore")
  raise ValueError("Unsupported string type: %s" % (type(text)))


def printable_text(text):
  """Returns text encoded in a way suitable for print or `tf.logging` (a str)."""
  return convert_to_unicode(text)


def load_vocab(vocab_file):
  """Loads a vocabulary file (one token a line) into an ordered dict.

  As in the official code, each line is stripped of surrounding whitespace and
  the id of a token is its line number. A token listed twice is a one-line
  error naming both lines (the official code silently gave it the later id).

  Args:
    vocab_file: path of the vocab file (any tf.io.gfile path).

  Returns:
    collections.OrderedDict token (str) -> id (int).
  """
  if not vocab_file:
    common.fail("vocab file: no path given")
  if not tf.io.gfile.exists(vocab_file):
    common.fail("vocab file %s: does not exist" % vocab_file)
  if tf.io.gfile.isdir(vocab_file):
    common.fail("vocab file %s: is a directory, expected a file" % vocab_file)
  with tf.io.gfile.GFile(vocab_file, "rb") as reader:
    data = convert_to_unicode(reader.read())
  # Split on "\n" only, as readline() does (str.splitlines would also split on
  # \x1c, \x85, \u2028, ...).
  lines = data.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  vocab = collections.OrderedDict()
  for index, line in enumerate(lines):
    token = line.strip()
    if token in vocab:
      # A repeated token would get two ids and leave one id unreachable; ids past the
      # model's vocab_size follow (a gather error deep in training).
      common.fail("vocab file %s: token %r is on line %d and again on line %d (a vocab lists "
                  "each token once)" % (vocab_file, token, vocab[token] + 1, index + 1))
    vocab[token] = index
  if not vocab:
    common.fail("vocab file %s: is empty" % vocab_file)
  return vocab


def check_vocab_case(vocab, do_lower_case, vocab_file="vocab"):
  """Checks that a vocab fits the --do_lower_case setting.

  Rule (counting the vocab entries that contain a cased letter, ignoring
  "[...]" special tokens and the "##" prefix):
    * do_lower_case=False with a vocab that has no upper-case entry at all (an
      uncased vocab): every capitalised word would become pieces or [UNK]
      -> error (common.UsageError).
    * do_lower_case=True with more than 1% upper-case entries (a cased vocab):
      lower-casing the input loses nothing critical, but those entries can
      never be produced and it is usually a mistake -> warning (logged and
      returned).
    * Otherwise (or a vocab without cased letters, e.g. Chinese) -> None.

  Args:
    vocab: dict token -> id (as from load_vocab), or any iterable of tokens.
    do_lower_case: the --do_lower_case setting.
    vocab_file: name used in the messages.

  Returns:
    None, or the one-line warning string.
  """
  n_cased = 0
  n_upper = 0
  for token in vocab:
    if token.startswith("[") and token.endswith("]"):
      continue
    if token.startswith("##"):
      token = token[2:]
    if token.lower() != token.upper():  # contains a cased letter
      n_cased += 1
      if token != token.lower():
        n_upper += 1
  if n_cased == 0:
    return None
  if not do_lower_case and n_upper == 0:
    common.fail(
        "--do_lower_case=False: vocab %s has no upper-case entries (an uncased "
        "vocab), so capitalised words would become pieces or [UNK]; pass "
        "--do_lower_case=True" % vocab_file)
  if do_lower_case and n_upper > 0.01 * n_cased:
    message = (
        "--do_lower_case=True: vocab %s looks cased (%d of %d entries with "
        "letters have upper case); they will never be used, pass "
        "--do_lower_case=False if the model was trained cased" %
        (vocab_file, n_upper, n_cased))
    tf.compat.v1.logging.warning(message)
    return message
  return None


def check_vocab_size(vocab, vocab_size, vocab_file="vocab", config_name="bert_config"):
  """Fails when the vocab has ids the model's embedding table cannot hold.

  Args:
    vocab: dict token -> id (as from load_vocab).
    vocab_size: the model config's vocab_size.
    vocab_file: name used in the message.
    config_name: the config file, for the message.
  """
  if vocab_size is None or not vocab:
    return
  largest = max(vocab.values())
  if largest >= vocab_size:
    common.fail("vocab file %s: has ids up to %d but vocab_size=%d in %s; use the vocab the "
                "model was trained with" % (vocab_file, largest, vocab_size, config_name))


def checked_tokenizer(vocab_file, do_lower_case, init_checkpoint=None, spm_model_file=None,
                      vocab_size=None, config_name="bert_config"):
  """The one tokenizer set-up check every tool that tokenises runs, then a FullTokenizer.

  Checks, each a one-line common.UsageError: the vocab file exists and lists each token once;
  --do_lower_case fits a released checkpoint's name and the vocab's casing; no id reaches the
  model's vocab_size.

  Args:
    vocab_file: --vocab_file.
    do_lower_case: --do_lower_case.
    init_checkpoint: --init_checkpoint (or None).
    spm_model_file: --spm_model_file for a SentencePiece model (or None).
    vocab_size: the model config's vocab_size (or None to skip that check).
    config_name: the config file, for messages.

  Returns:
    A FullTokenizer.
  """
  if _preserving_unused_tokens():
    common.fail("--preserve_unused_tokens=true: only the tokenization library API (FullTokenizer) "
                "implements it, not this tool")
  validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
  if spm_model_file:
    tokenizer = FullTokenizer(vocab_file, do_lower_case, spm_model_file=spm_model_file)
  else:
    if not vocab_file:
      common.fail("--vocab_file is required")
    if not tf.io.gfile.exists(vocab_file):
      common.fail("--vocab_file=%s: file does not exist" % vocab_file)
    tokenizer = FullTokenizer(vocab_file, do_lower_case)
    check_vocab_case(tokenizer.vocab, do_lower_case, vocab_file)
  check_vocab_size(tokenizer.vocab, vocab_size, vocab_file or spm_model_file, config_name)
  return tokenizer


def convert_by_vocab(vocab, items):
  """Converts a sequence of tokens or ids using the vocab (a dict).

  Args:
    vocab: dict item -> item.
    items: sequence of keys of vocab.

  Returns:
    list of vocab[item].
  """
  return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
  """Converts tokens to ids with a token -> id dict."""
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
  """Converts ids to tokens with an id -> token dict."""
  return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
  """Runs basic whitespace cleaning and splitting on a piece of text.

  Args:
    text: str.

  Returns:
    list of the whitespace-separated tokens (str.split semantics).
  """
  text = text.strip()
  if not text:
    return []
  return text.split()


# Characters that are not printable ASCII nor \t \n \r: the only ones text
# cleaning can touch. Printable ASCII text without them needs no cleaning.
_SPECIAL_CHAR_RE = re.compile(r"[^\x20-\x7e\t\n\r]")
# For an ASCII token: runs of letters/digits, and every other char alone (all
# non-alphanumeric printable ASCII is punctuation for BERT).
_ASCII_PIECE_RE = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]")

# char -> replacement in cleaned text ("" drop, " " whitespace, " c " CJK), or
# None to keep it. Memoised across instances; only filled with chars seen.
_CLEAN_ACTION = {}
_PUNCT_MEMO = {}


def _clean_action(char):
  """What the official _clean_text + _tokenize_chinese_chars do to `char`."""
  action = _CLEAN_ACTION.get(char, 0)
  if action != 0:
    return action
  cp = ord(char)
  if cp == 0 or cp == 0xfffd or _is_control(char):
    action = ""
  elif _is_whitespace(char):
    action = " "
  elif _is_chinese_cp(cp):
    action = " %s " % char
  else:
    action = None
  _CLEAN_ACTION[char] = action
  return action


def _clean_and_split(text):
  """Official cleaning + CJK padding + whitespace split, done fast.

  Args:
    text: str.

  Returns:
    list of whitespace tokens, exactly the official `orig_tokens`.
  """
  if _SPECIAL_CHAR_RE.search(text) is None:
    return text.split()
  table = {}
  for char in set(_SPECIAL_CHAR_RE.findall(text)):
    action = _clean_action(char)
    if action is not None:
      table[ord(char)] = action
  if table:
    text = text.translate(table)
  return text.split()


class BasicTokenizer(object):
  """Runs basic tokenization (punctuation splitting, lower casing, etc.)."""

  def __init__(self, do_lower_case=True, vocab=tuple()):
    """Constructs a BasicTokenizer.

    Args:
      do_lower_case: Whether to lower case the input (and strip accents).
      vocab: A container of tokens to not mutate during tokenization (with
        --preserve_unused_tokens, see preserve_token).
    """
    self.do_lower_case = do_lower_case
    self.vocab = vocab

  def tokenize(self, text):
    """Tokenizes a piece of text.

    Args:
      text: str or bytes.

    Returns:
      list of str tokens (words and single punctuation characters).
    """
    output = []
    if self.vocab and _preserving_unused_tokens():
      # Checked on the token as written: no up-front lower-casing.
      for token in _clean_and_split(convert_to_unicode(text)):
        output.extend([token] if preserve_token(token, self.vocab) else self.split_token(token))
      return output
    for token in self.whitespace_tokens(text):
      output.extend(self.split_token(token))
    return output

  def whitespace_tokens(self, text):
    """The cleaned whitespace tokens of `text` (lower-cased when pure ASCII).

    Lower-casing an all-ASCII text up front is exactly what the per-token
    lower-casing would do, and lets caches share entries across casings.

    Args:
      text: str or bytes.

    Returns:
      list of str; `split_token` of each gives the basic tokens.
    """
    text = convert_to_unicode(text)
    if self.do_lower_case and text.isascii():
      text = text.lower()
    return _clean_and_split(text)

  def split_token(self, token):
    """The official per-token steps: lower case, strip accents, split punctuation.

    Args:
      token: one whitespace token of cleaned text.

    Returns:
      list of str basic tokens.
    """
    if token.isascii():
      if self.do_lower_case:
        token = token.lower()
      # NFD is the identity on ASCII and no ASCII char is a combining mark.
      return _ASCII_PIECE_RE.findall(token)
    if self.do_lower_case:
      token = token.lower()
      token = self._run_strip_accents(token)
    output = []
    for piece in self._run_split_on_punc(token):
      # The official code re-splits " ".join(pieces) on whitespace.
      output.extend(piece.split())
    return output

  def _run_strip_accents(self, text):
    """Strips accents from a piece of text (NFD, then drop category Mn)."""
    text = unicodedata.normalize("NFD", text)
    if text.isascii():
      return text
    return "".join(c for c in text if unicodedata.category(c) != "Mn")

  def _run_split_on_punc(self, text):
    """Splits punctuation on a piece of text: each punctuation char alone."""
    output = []
    current = []
    for char in text:
      if _is_punctuation(char):
        if current:
          output.append("".join(current))
          current = []
        output.append(char)
      else:
        current.append(char)
    if current:
      output.append("".join(current))
    return output

  def _tokenize_chinese_chars(self, text):
    """Adds whitespace around any CJK character."""
    return "".join(" %s " % c if _is_chinese_cp(ord(c)) else c for c in text)

  def _is_chinese_char(self, cp):
    """Checks whether cp is the codepoint of a CJK character."""
    return _is_chinese_cp(cp)

  def _clean_text(self, text):
    """Removes invalid characters and turns whitespace into spaces."""
    output = []
    for char in text:
      cp = ord(char)
      if cp == 0 or cp == 0xfffd or _is_control(char):
        continue
      output.append(" " if _is_whitespace(char) else char)
    return "".join(output)


class WordpieceTokenizer(object):
  """Runs WordPiece tokenization (greedy longest-match-first)."""

  def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
    """Constructs a WordpieceTokenizer.

    Args:
      vocab: dict token -> id (only membership is used).
      unk_token: token emitted for a word that cannot be tokenized.
      max_input_chars_per_word: longer words become unk_token.
    """
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word
    # No substring longer than the longest entry can match, so the greedy
    # search may start there instead of at the end of the word.
    self._max_piece_len = max([len(t) for t in vocab] + [1])

  def tokenize(self, text):
    """Tokenizes a piece of text into its word pieces.

    For example: input = "unaffable" -> output = ["un", "##aff", "##able"].

    Args:
      text: a single token or whitespace separated tokens, already passed
        through `BasicTokenizer`.

    Returns:
      A list of wordpiece tokens.
    """
    output_tokens = []
    for token in whitespace_tokenize(convert_to_unicode(text)):
      output_tokens.extend(self.tokenize_word(token))
    return output_tokens

  def tokenize_word(self, word):
    """Word pieces of one whitespace-free word (a list; [unk_token] if none)."""
    vocab = self.vocab
    n = len(word)
    if n > self.max_input_chars_per_word:
      return [self.unk_token]
    if word in vocab:
      return [word]
    max_len = self._max_piece_len
    start = 0
    pieces = []
    while start < n:
      end = min(n, start + max_len)
      while start < end:
        sub = word[start:end] if start == 0 else "##" + word[start:end]
        if sub in vocab:
          break
        end -= 1
      else:
        return [self.unk_token]
      pieces.append(sub)
      start = end
    return pieces


class FullTokenizer(object):
  """Runs end-to-end tokenization (basic + WordPiece, or SentencePiece)."""

  def __init__(self, vocab_file, do_lower_case=True, spm_model_file=None,
               cache_size=DEFAULT_CACHE_SIZE):
    """Constructs a FullTokenizer.

    Args:
      vocab_file: WordPiece vocab file (ignored when spm_model_file is given).
      do_lower_case: lower-case (and, for WordPiece, strip accents from) input.
      spm_model_file: optional SentencePiece model; see the module docstring.
      cache_size: entries kept in each token cache before it is cleared.
    """
    self.do_lower_case = do_lower_case
    self.sp_model = None
    self._cache_size = cache_size
    self._token_cache = {}
    self._id_cache = {}
    if spm_model_file:
      import sentencepiece as spm  # pylint: disable=g-import-not-at-top
      if not tf.io.gfile.exists(spm_model_file):
        common.fail("spm model file %s: does not exist" % spm_model_file)
      with tf.io.gfile.GFile(spm_model_file, "rb") as f:
        proto = f.read()
      self.sp_model = spm.SentencePieceProcessor()
      try:
        self.sp_model.LoadFromSerializedProto(proto)
      except Exception as e:  # pylint: disable=broad-except
        common.fail("spm model file %s: not a SentencePiece model (%s)" %
                    (spm_model_file, str(e).splitlines()[0] if str(e) else e))
      self.vocab = collections.OrderedDict(
          (self.sp_model.IdToPiece(i), i)
          for i in range(self.sp_model.GetPieceSize()))
      self.basic_tokenizer = None
      self.wordpiece_tokenizer = None
    else:
      self.vocab = load_vocab(vocab_file)
      self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case, vocab=self.vocab)
      self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
    self.inv_vocab = {v: k for k, v in self.vocab.items()}

  def _spm_text(self, text):
    text = convert_to_unicode(text)
    return text.lower() if self.do_lower_case else text

  def _pieces(self, token):
    """Word pieces of one cleaned whitespace token (cached), as a tuple."""
    pieces = []
    wordpiece = self.wordpiece_tokenizer.tokenize_word
    for word in self.basic_tokenizer.split_token(token):
      pieces.extend(wordpiece(word))
    pieces = tuple(pieces)
    cache = self._token_cache
    if len(cache) >= self._cache_size:
      cache.clear()
    cache[token] = pieces
    return pieces

  def _ids(self, token):
    """Ids of the word pieces of one cleaned whitespace token (cached)."""
    pieces = self._token_cache.get(token) or self._pieces(token)
    vocab = self.vocab
    ids = tuple([vocab[p] for p in pieces])
    cache = self._id_cache
    if len(cache) >= self._cache_size:
      cache.clear()
    cache[token] = ids
    return ids

  def tokenize(self, text):
    """Tokenizes text into word pieces.

    Args:
      text: str or bytes.

    Returns:
      list of str tokens, identical to the official FullTokenizer.tokenize.
    """
    if self.sp_model is not None:
      return self.sp_model.encode(self._spm_text(text), out_type=str)
    if _preserving_unused_tokens():
      return self._tokenize_preserving_unused(text)
    get = self._token_cache.get
    miss = self._pieces
    # A cached empty tuple (a token of only combining marks) is falsy and
    # merely recomputed.
    return [p for token in self.basic_tokenizer.whitespace_tokens(text)
            for p in (get(token) or miss(token))]

  def tokenize_to_ids(self, text):
    """Tokenizes text straight to ids: convert_tokens_to_ids(tokenize(text)).

    Args:
      text: str or bytes.

    Returns:
      list of int ids.
    """
    if self.sp_model is not None:
      return self.sp_model.encode(self._spm_text(text))
    if _preserving_unused_tokens():
      return convert_by_vocab(self.vocab, self._tokenize_preserving_unused(text))
    get = self._id_cache.get
    miss = self._ids
    return [i for token in self.basic_tokenizer.whitespace_tokens(text)
            for i in (get(token) or miss(token))]

  def _tokenize_preserving_unused(self, text):
    """tokenize with --preserve_unused_tokens: [unusedN] vocab tokens kept whole."""
    get = self._token_cache.get
    miss = self._pieces
    output = []
    for token in _clean_and_split(convert_to_unicode(text)):
      if preserve_token(token, self.vocab):
        output.append(token)
      else:
        output.extend(get(token) or miss(token))
    return output

  def convert_tokens_to_ids(self, tokens):
    """Converts tokens to ids (SentencePiece: unknown pieces get the unk id)."""
    if self.sp_model is not None:
      return [self.sp_model.PieceToId(printable_text(t)) for t in tokens]
    return convert_by_vocab(self.vocab, tokens)

  def convert_ids_to_tokens(self, ids):
    """Converts ids to tokens."""
    if self.sp_model is not None:
      return [self.sp_model.IdToPiece(int(i)) for i in ids]
    return convert_by_vocab(self.inv_vocab, ids)


def _is_chinese_cp(cp):
  """Checks whether cp is in the CJK Unicode blocks the official code pads."""
  # The official ranges: CJK Unified Ideographs and extensions A-E, and the
  # CJK Compatibility Ideographs (+ supplement). Hangul, kana etc. are not in.
  return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or
          (0x20000 <= cp <= 0x2A6DF) or (0x2A700 <= cp <= 0x2B73F) or
          (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF) or
          (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))


def _is_whitespace(char):
  """Checks whether `char` is a whitespace character (\\t \\n \\r or Zs)."""
  if char == " " or char == "\t" or char == "\n" or char == "\r":
    return True
  return unicodedata.category(char) == "Zs"


def _is_control(char):
  """Checks whether `char` is a control character (Cc or Cf, not \\t \\n \\r)."""
  if char == "\t" or char == "\n" or char == "\r":
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
  """Checks whether `char` is punctuation: non-alnum ASCII or category P*."""
  result = _PUNCT_MEMO.get(char)
  if result is None:
    cp = ord(char)
    # All non-letter/number ASCII counts, e.g. "^", "$" and "`" which are not
    # in the Unicode punctuation class.
    result = ((33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or
              (123 <= cp <= 126) or unicodedata.category(char).startswith("P"))
    _PUNCT_MEMO[char] = result
  return result
