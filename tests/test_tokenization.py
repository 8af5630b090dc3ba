"""Tests for tokenization.py: exactness against a textbook copy of the official algorithm.

`RefFullTokenizer` below is an independent, deliberately straightforward
char-by-char implementation of google-research/bert's tokenization algorithm
(no regexes, no caches, no shortcuts). The fast tokenizer must give the same
tokens on every line of the shared 1 MB corpus sample, on random strings drawn
from tricky Unicode classes, and on hand-made cases; a few cases also have
hand-computed expected tokens with the real bert-base-uncased vocab.
"""

import collections
import os
import random
import sys
import unicodedata

import pytest

from realformer_tf import common
import tokenization
from conftest import shared_path


# ----------------------------------------------------------------------------
# Independent reference: the official algorithm, written the slow obvious way.
# ----------------------------------------------------------------------------

def ref_load_vocab(path):
  vocab = collections.OrderedDict()
  index = 0
  with open(path, "rb") as f:
    for raw in f:  # binary readline splits on b"\n" only
      vocab[raw.decode("utf-8", "ignore").strip()] = index
      index += 1
  return vocab


def ref_is_whitespace(c):
  if c in (" ", "\t", "\n", "\r"):
    return True
  return unicodedata.category(c) == "Zs"


def ref_is_control(c):
  if c in ("\t", "\n", "\r"):
    return False
  return unicodedata.category(c) in ("Cc", "Cf")


def ref_is_punctuation(c):
  cp = ord(c)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(c).startswith("P")


def ref_is_chinese(cp):
  ranges = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
            (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
            (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
  return any(lo <= cp <= hi for lo, hi in ranges)


def ref_whitespace_tokenize(text):
  text = text.strip()
  return text.split() if text else []


class RefBasicTokenizer(object):

  def __init__(self, do_lower_case=True):
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    if isinstance(text, bytes):
      text = text.decode("utf-8", "ignore")
    cleaned = []
    for c in text:
      if ord(c) == 0 or ord(c) == 0xfffd or ref_is_control(c):
        continue
      cleaned.append(" " if ref_is_whitespace(c) else c)
    spaced = []
    for c in cleaned:
      if ref_is_chinese(ord(c)):
        spaced.extend([" ", c, " "])
      else:
        spaced.append(c)
    split_tokens = []
    for token in ref_whitespace_tokenize("".join(spaced)):
      if self.do_lower_case:
        token = token.lower()
        token = "".join(c for c in unicodedata.normalize("NFD", token)
                        if unicodedata.category(c) != "Mn")
      words = []
      start_new_word = True
      for c in token:
        if ref_is_punctuation(c):
          words.append([c])
          start_new_word = True
        else:
          if start_new_word:
            words.append([])
          start_new_word = False
          words[-1].append(c)
      split_tokens.extend("".join(w) for w in words)
    return ref_whitespace_tokenize(" ".join(split_tokens))


class RefWordpieceTokenizer(object):

  def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word

  def tokenize(self, text):
    output = []
    for token in ref_whitespace_tokenize(text):
      chars = list(token)
      if len(chars) > self.max_input_chars_per_word:
        output.append(self.unk_token)
        continue
      is_bad = False
      start = 0
      sub_tokens = []
      while start < len(chars):
        end = len(chars)
        cur = None
        while start < end:
          substr = "".join(chars[start:end])
          if start > 0:
            substr = "##" + substr
          if substr in self.vocab:
            cur = substr
            break
          end -= 1
        if cur is None:
          is_bad = True
          break
        sub_tokens.append(cur)
        start = end
      if is_bad:
        output.append(self.unk_token)
      else:
        output.extend(sub_tokens)
    return output


class RefFullTokenizer(object):

  def __init__(self, vocab, do_lower_case=True):
    self.vocab = vocab
    self.basic = RefBasicTokenizer(do_lower_case)
    self.wordpiece = RefWordpieceTokenizer(vocab)

  def tokenize(self, text):
    out = []
    for token in self.basic.tokenize(text):
      out.extend(self.wordpiece.tokenize(token))
    return out


# ----------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------

def _small_vocab(tmp_path, tokens, name="vocab.txt"):
  path = str(tmp_path / name)
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in tokens))
  return path


SMALL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "want", "##want",
                "##ed", "wa", "un", "runn", "##ing", ",", "low", "lowest", ".",
                "!", "'", "t", "don", "hello", "world", "Hello", "##s", "a",
                "##a", "é", "e", "##é", "ß", "你", "好", "σ", "##σ", "##ς"]

TRICKY_CASES = [
    "",
    "   \t\n  ",
    "Héllò, World!",
    "HÉLLÒ wörld Ångström naïve café",
    "你好world 你好，世界! 日本語テキスト 한국어",
    "a\x00b c\ufffdd e\u200bf g\x0ch i\x0bj k\x1fl m\x7fn o\x85p",
    "tabs\tand\nnewlines\r\nand\u2028line\u2029separators",
    "no\u00a0break\u3000ideographic\u2009thin\u202fnarrow\u1680ogham",
    "don't U.S.A. $5.00 e-mail (x)[y]{z} <a@b.c> ~^`|\\ #hash _under_",
    "“curly quotes” ‘single’ — em–dash … ellipsis «guillemets» ¿qué? ¡sí!",
    "ΣΑΣ ΟΔΟΣ Σ σς İstanbul DŽ ǅ ﬁne ﬀ straße ΐ",
    "e\u0301 \u0301\u0302 a\u0308b combining ̈ alone",
    "a" * 200,
    "a" * 201,
    "b" * 199 + "é",
    "x" * 250 + " short " + "y" * 201 + "é",
    "unaffable running wanted lowest",
    "[CLS] [SEP] [MASK] ##ed ## #",
    "emoji 😀👍🏽 math ∑∫√ ∞ ≠ ≤ arrows → ⇒ symbols © ® ™ § ¶ °",
    "digits ١٢٣ ４５６ ½ ² Ⅻ",
    "ΑΣ\x00Α ΑΣ\u200bΑ ΑΣ你 final sigma across removed chars",
    "\u4dff\u4e00\u9fff\ua000 \u33ff\u3400\u4dbf \uf8ff\uf900\ufaff\ufb00 \U0002a6df\U0002a6e0",
    "\ud7ff\ue000 private use \U000f0000 and CJK ext \U00020000\U0002a700\U0002f800",
]


def _assert_same(fast, ref, text):
  got = fast.tokenize(text)
  want = ref.tokenize(text)
  assert got == want, "text %r: fast %r != reference %r" % (text, got, want)
  assert fast.tokenize_to_ids(text) == fast.convert_tokens_to_ids(want), text


# ----------------------------------------------------------------------------
# Tests
# ----------------------------------------------------------------------------

def test_hand_computed_tokens_real_vocab(vocab_file):
  tok = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  cases = {
      "unaffable": ["una", "##ffa", "##ble"],
      "Héllò, World!": ["hello", ",", "world", "!"],
      "don't": ["don", "'", "t"],
      "U.S.A.": ["u", ".", "s", ".", "a", "."],
      "$5.00": ["$", "5", ".", "00"],
      "a\x00b a\u200bb": ["ab", "ab"],  # NUL and zero-width space (Cf) removed
      "a\tb\nc": ["a", "b", "c"],
      "": [],
      "a" * 201: ["[UNK]"],
  }
  for text, want in cases.items():
    assert tok.tokenize(text) == want, text
  # Ids of the hand-computed tokens are their line numbers in the vocab file.
  with open(vocab_file, encoding="utf-8") as f:
    lines = [l.rstrip("\n") for l in f]
  ids = tok.tokenize_to_ids("Héllò, World!")
  assert [lines[i] for i in ids] == ["hello", ",", "world", "!"]
  assert tok.convert_ids_to_tokens(ids) == ["hello", ",", "world", "!"]


def test_tricky_cases_match_reference(vocab_file, tmp_path):
  small = _small_vocab(tmp_path, SMALL_TOKENS)
  for path in (vocab_file, small):
    vocab = ref_load_vocab(path)
    for lower in (True, False):
      fast = tokenization.FullTokenizer(path, do_lower_case=lower)
      ref = RefFullTokenizer(vocab, do_lower_case=lower)
      for text in TRICKY_CASES:
        _assert_same(fast, ref, text)
        # Twice: the second call answers from the cache.
        _assert_same(fast, ref, text)
        assert fast.tokenize(text.encode("utf-8")) == ref.tokenize(text)


def test_case_and_accents_kept_without_lower_case(tmp_path):
  path = _small_vocab(tmp_path, SMALL_TOKENS)
  tok = tokenization.FullTokenizer(path, do_lower_case=False)
  assert tok.tokenize("Hello hello") == ["Hello", "hello"]
  assert tok.tokenize("é e\u0301") == ["é", "[UNK]"]  # no NFD when cased
  assert tokenization.BasicTokenizer(False).tokenize("HÉllo") == ["HÉllo"]
  assert tokenization.BasicTokenizer(True).tokenize("HÉllo") == ["hello"]


def test_wordpiece_greedy_and_unknown(tmp_path):
  vocab = tokenization.load_vocab(_small_vocab(tmp_path, SMALL_TOKENS))
  wp = tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=10)
  assert wp.tokenize("unwanted running") == ["un", "##want", "##ed", "runn",
                                             "##ing"]
  assert wp.tokenize("unwantedX") == ["[UNK]"]  # one missing piece -> whole word
  assert wp.tokenize("aaaaaaaaaa") == ["a"] + ["##a"] * 9
  assert wp.tokenize("aaaaaaaaaaa") == ["[UNK]"]  # 11 chars > 10
  assert wp.tokenize("") == []
  # The longest vocab entry must still match as a prefix of a longer word.
  vocab2 = {"[UNK]": 0, "abcdefgh": 1, "##x": 2, "a": 3}
  wp2 = tokenization.WordpieceTokenizer(vocab2)
  assert wp2.tokenize("abcdefghx abcdefgh") == ["abcdefgh", "##x", "abcdefgh"]
  assert wp2.tokenize("abcdefghxx") == ["abcdefgh", "##x", "##x"]


def test_random_unicode_strings_match_reference(vocab_file, tmp_path):
  rng = random.Random(1234)
  pools = [
      "abcdefghijKLMNOPxyz0123456789", " \t\n\r", ".,;:'\"!?()[]{}-_$#@^`|~\\/*+<=>%&",
      "\x00\x01\x07\x0b\x0c\x1b\x1c\x1f\x7f\x85\ufffd\u200b\u200d\u2060\ufeff\u00ad",
      "\u00a0\u1680\u2000\u2007\u200a\u202f\u205f\u3000\u2028\u2029\u180e",
      "\u0300\u0301\u0308\u0327\u20dd\u0903", "éÉàÀçÇñÑöÖøØåÅßæÆœŒıİĳǅǈΣσςΐ",
      "你好世界中文豈\U00020001\U0002b740\U0002f801", "ぁアｱ한ㄱ",
      "“”‘’«»—–…¿¡§¶·•†‡‰′″‹›", "€£¥©®™°±×÷∑√∞≠≤→⇒😀", "١٢٣４５６½²Ⅻﬁﬀ",
  ]
  extra = list("abcxyz") + ["##" + c for c in "abcxyz"]
  small = _small_vocab(tmp_path, SMALL_TOKENS + [t for t in extra if t not in SMALL_TOKENS])
  texts = []
  for _ in range(3000):
    n = rng.randint(0, 30)
    texts.append("".join(rng.choice(rng.choice(pools)) for _ in range(n)))
  for path in (vocab_file, small):
    vocab = ref_load_vocab(path)
    for lower in (True, False):
      fast = tokenization.FullTokenizer(path, do_lower_case=lower)
      ref = RefFullTokenizer(vocab, do_lower_case=lower)
      for text in texts:
        _assert_same(fast, ref, text)


def test_sample_corpus_matches_reference(vocab_file):
  """Every line of the shared 1 MB sample, both casings (~15 s)."""
  with open(shared_path("sample_1mb.txt"), encoding="utf-8") as f:
    lines = f.read().split("\n")
  vocab = ref_load_vocab(vocab_file)
  fast = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  ref = RefFullTokenizer(vocab, do_lower_case=True)
  n_tokens = 0
  for line in lines:
    want = ref.tokenize(line)
    assert fast.tokenize(line) == want, line
    n_tokens += len(want)
  assert n_tokens > 200000
  # Cased run on a deterministic sample of lines (cased is what differs).
  fast_cased = tokenization.FullTokenizer(vocab_file, do_lower_case=False)
  ref_cased = RefFullTokenizer(vocab, do_lower_case=False)
  for line in lines[::7]:
    assert fast_cased.tokenize(line) == ref_cased.tokenize(line), line
  # Non-ASCII lines get extra scrutiny in both modes.
  for line in [l for l in lines if not l.isascii()]:
    assert fast_cased.tokenize(line) == ref_cased.tokenize(line), line


def test_tokenize_to_ids_and_small_cache(vocab_file):
  with open(shared_path("sample_1mb.txt"), encoding="utf-8") as f:
    lines = f.read().split("\n")[:3000]
  big = tokenization.FullTokenizer(vocab_file)
  tiny = tokenization.FullTokenizer(vocab_file, cache_size=50)  # clears often
  for line in lines:
    tokens = big.tokenize(line)
    ids = big.convert_tokens_to_ids(tokens)
    assert big.tokenize_to_ids(line) == ids
    assert tiny.tokenize(line) == tokens
    assert tiny.tokenize_to_ids(line) == ids
    assert big.convert_ids_to_tokens(ids) == tokens
  assert len(tiny._token_cache) <= 50 and len(tiny._id_cache) <= 50


def test_whitespace_and_control_classes_consistent():
  # The fast path relies on str.split() splitting on every char the official
  # code turns into a space, and on everything else str.split() splits on
  # being removed by cleaning or being \u2028/\u2029 (which the official
  # whitespace_tokenize also splits on).
  for cp in range(sys.maxunicode + 1):
    c = chr(cp)
    if ref_is_whitespace(c):
      assert c.isspace(), hex(cp)
    elif c.isspace():
      assert ref_is_control(c) or cp in (0x2028, 0x2029), hex(cp)


def test_helpers():
  assert tokenization.convert_to_unicode(b"caf\xc3\xa9\xff") == "café"
  assert tokenization.printable_text(b"abc") == "abc"
  with pytest.raises(ValueError):
    tokenization.convert_to_unicode(3)
  assert tokenization.whitespace_tokenize("  a b\t c\n") == ["a", "b", "c"]
  assert tokenization.whitespace_tokenize("   ") == []
  vocab = {"a": 0, "b": 1}
  assert tokenization.convert_tokens_to_ids(vocab, ["b", "a"]) == [1, 0]
  assert tokenization.convert_ids_to_tokens({0: "a", 1: "b"}, [0, 1]) == ["a", "b"]


def test_load_vocab(tmp_path, vocab_file):
  path = str(tmp_path / "v.txt")
  with open(path, "wb") as f:
    f.write(b"[PAD]\n  b  \r\nc\x1cd\nlast")
  vocab = tokenization.load_vocab(path)
  assert list(vocab.items()) == [("[PAD]", 0), ("b", 1), ("c\x1cd", 2), ("last", 3)]
  assert vocab == ref_load_vocab(path)
  real = tokenization.load_vocab(vocab_file)
  assert len(real) == 30522 and real["[PAD]"] == 0 and real["[MASK]"] == 103
  assert real == ref_load_vocab(vocab_file)
  with pytest.raises(common.UsageError, match="does_not_exist.txt: does not exist"):
    tokenization.FullTokenizer(str(tmp_path / "does_not_exist.txt"))


def test_validate_case_matches_checkpoint():
  f = tokenization.validate_case_matches_checkpoint
  f(True, "")
  f(True, "/x/uncased_L-12_H-768_A-12/bert_model.ckpt")
  f(False, "/x/cased_L-12_H-768_A-12/bert_model.ckpt")
  f(False, "/x/my_model/bert_model.ckpt")  # unknown name: not checked
  f(False, "/x/checkpoints/all-MiniLM-L6-v2")
  with pytest.raises(ValueError, match=r"^--do_lower_case=False: .*--do_lower_case=True"):
    f(False, "/x/uncased_L-12_H-768_A-12/bert_model.ckpt")
  with pytest.raises(common.UsageError, match=r"^--do_lower_case=True: "):
    f(True, "gs://b/multi_cased_L-12_H-768_A-12/bert_model.ckpt")
  try:
    f(True, "/x/cased_L-24_H-1024_A-16/bert_model.ckpt")
  except common.UsageError as e:
    assert "\n" not in str(e)


def test_check_vocab_case(vocab_file):
  uncased = tokenization.load_vocab(vocab_file)
  assert tokenization.check_vocab_case(uncased, True) is None
  with pytest.raises(common.UsageError, match="^--do_lower_case=False: vocab v.txt"):
    tokenization.check_vocab_case(uncased, False, "v.txt")
  cased = ["[PAD]", "[UNK]", "The", "the", "##ing", "Paris", "a", "b"]
  msg = tokenization.check_vocab_case(cased, True, "c.txt")
  assert msg.startswith("--do_lower_case=True: vocab c.txt looks cased") and "\n" not in msg
  assert tokenization.check_vocab_case(cased, False) is None
  assert tokenization.check_vocab_case(["[PAD]", "你", "##好", "1"], False) is None
