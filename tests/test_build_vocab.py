"""Tests for build_vocab.py and realformer_tf/vocab_building.py: layout, exact size, [UNK] rate,
determinism, BPE vs a naive one."""

import collections
import os

import pytest

from realformer_tf import common
from realformer_tf import vocab_building
import tokenization
from conftest import last_error_line, run_tool, shared_path

SLICE_BYTES = 200000


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory):
  """The first ~200 KB (whole lines) of the shared 1 MB sample."""
  with open(shared_path("sample_1mb.txt"), "rb") as f:
    data = f.read(SLICE_BYTES)
  data = data[:data.rfind(b"\n") + 1]
  path = tmp_path_factory.mktemp("slice") / "slice.txt"
  path.write_bytes(data)
  return str(path)


def _write_vocab(tmp_path, tokens, name="vocab.txt"):
  path = str(tmp_path / name)
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in tokens))
  return path


def naive_bpe(word_counts, num_pieces, min_frequency):
  """Textbook BPE: recount every pair before each merge (same tie-break rule).

  Symbols are numbered as vocab_building does (alphabet, then its ## forms, then
  new pieces in order); the most frequent pair wins, ties to the smallest
  (left id, right id).
  """
  words = [(w, c) for w, c in word_counts.items() if 0 < len(w) <= 200]
  char_counts = collections.Counter()
  for w, c in words:
    for ch in w:
      char_counts[ch] += c
  alphabet = sorted([ch for ch in char_counts if char_counts[ch] >= min_frequency],
                    key=lambda ch: (-char_counts[ch], ch))
  syms = alphabet + ["##" + ch for ch in alphabet]
  seqs = [([syms.index(w[0])] + [syms.index("##" + ch) for ch in w[1:]], c)
          for w, c in words if all(ch in alphabet for ch in w)]
  pieces = []
  while len(pieces) < num_pieces:
    pairs = collections.Counter()
    for seq, c in seqs:
      for i in range(len(seq) - 1):
        pairs[(seq[i], seq[i + 1])] += c
    if not pairs:
      break
    best = min(pairs, key=lambda p: (-pairs[p], p))
    if pairs[best] < min_frequency:
      break
    new = syms[best[0]] + syms[best[1]][2:]
    if new not in syms:
      syms.append(new)
      pieces.append(new)
    new_id = syms.index(new)
    merged = []
    for seq, c in seqs:
      out, i = [], 0
      while i < len(seq):
        if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
          out.append(new_id)
          i += 2
        else:
          out.append(seq[i])
          i += 1
      merged.append((out, c))
    seqs = merged
  return alphabet, pieces


def test_hand_computed_merges():
  counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
  alphabet, pieces = vocab_building.learn_wordpieces(counts, 7, min_frequency=1)
  # char counts: e 17, w 16, s 9, t 9, l 7, o 7, n 6, d 3, i 3, r 2
  assert alphabet == list("ewstlondir")
  # (##e,##s)=9 ties (##s,##t)=9 -> smaller ids first; then ##est; (l,##o)=7
  # ties (##o,##w)=7 -> lo, low; then the pairs of newest (6 each), ties to
  # the smallest ids: n=6 ##e=10 ##w=11, new pieces ##es=20 ##est=21 lo=22
  # low=23 ne=24, so (n,##e) -> ne, then (##w,##est) before (ne,##w).
  assert pieces == ["##es", "##est", "lo", "low", "ne", "##west", "newest"]
  # min_frequency=3 drops "r" (2) and so "lower"; ##es=18 ##est=19 now, and
  # the 6-count pairs of newest go first, then low (5), then widest (3).
  alphabet, pieces = vocab_building.learn_wordpieces(counts, 100, min_frequency=3)
  assert alphabet == list("ewstlondi")
  assert pieces == ["##es", "##est", "ne", "##west", "newest", "lo", "low", "wi",
                    "##dest", "widest"]
  # min_frequency=6: only e w s t l o n remain, so only low (5) and newest (6)
  # are learned from, and only newest's pairs (6) merge, ties to the smallest
  # ids: n=6 ##e=7 ##w=8 ##s=9 ##t=10 ne=14 ##es=15 ##wes=16.
  _, pieces = vocab_building.learn_wordpieces(counts, 100, min_frequency=6)
  assert pieces == ["ne", "##es", "##wes", "newes", "newest"]


def test_incremental_bpe_matches_naive(slice_file):
  with open(slice_file, encoding="utf-8") as f:
    text = f.read()[:60000]
  counts = vocab_building.count_words([text], do_lower_case=True)
  fast = vocab_building.learn_wordpieces(counts, 150, min_frequency=2)
  assert fast == naive_bpe(counts, 150, 2)
  assert len(fast[1]) == 150


def test_count_words_matches_basic_tokenizer():
  text = "Héllo, World! hello\tworld\nCafé 你好 don't\x00x\n"
  counts = vocab_building.count_words([text[:20], text[20:]], do_lower_case=True)
  basic = tokenization.BasicTokenizer(do_lower_case=True)
  assert counts == collections.Counter(basic.tokenize(text[:20]) +
                                       basic.tokenize(text[20:]))
  assert counts["hello"] == 2 and counts["你"] == 1


def test_read_text_blocks_whole_lines(tmp_path, monkeypatch):
  lines = ["line %d é %s" % (i, "x" * (i % 13)) for i in range(300)]
  data = ("\n".join(lines) + "\n").encode("utf-8")
  path = tmp_path / "t.txt"
  path.write_bytes(data)
  monkeypatch.setattr(vocab_building, "_READ_BLOCK", 7)  # force chunk carry-over
  log = lambda s: None
  assert "".join(vocab_building.read_text_blocks([str(path)], 0, log)) == data.decode()
  capped = "".join(vocab_building.read_text_blocks([str(path), str(path)], 1000, log))
  assert len(capped.encode()) <= 1000 and len(capped.encode()) > 950
  assert capped.endswith("\n") and data.decode().startswith(capped)
  # A file without a final newline still yields its last line.
  path.write_bytes(b"a\nb")
  assert "".join(vocab_building.read_text_blocks([str(path)], 0, log)) == "a\nb"


def test_wordpiece_vocab_layout_size_unk_rate(slice_file, tmp_path):
  log = lambda s: None
  tokens = vocab_building.build_wordpiece_vocab([slice_file], 3000, num_unused=10,
                                             log_fn=log)
  assert len(tokens) == 3000 and len(set(tokens)) == 3000
  assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert tokens[5:15] == ["[unused%d]" % i for i in range(10)]
  singles = [t for t in tokens[15:] if len(t) == 1]
  assert singles and set("etaoinsrhdl") <= set(singles)
  assert all("##" + ch in tokens for ch in singles)
  assert not any(t.startswith("[unused") for t in tokens[15:])
  path = _write_vocab(tmp_path, tokens)
  tok = tokenization.FullTokenizer(path, do_lower_case=True)
  assert tokenization.check_vocab_case(tok.vocab, True) is None
  with open(slice_file, encoding="utf-8") as f:
    lines = f.read().split("\n")
  pieces = [p for line in lines for p in tok.tokenize(line)]
  n_words = sum(len(tok.basic_tokenizer.tokenize(line)) for line in lines)
  unk_rate = pieces.count("[UNK]") / len(pieces)
  assert unk_rate < 0.01, unk_rate
  # A real subword vocab: most words are one piece, none explode into chars.
  assert len(pieces) < 1.5 * n_words
  # Frequent words are whole tokens.
  assert tok.tokenize("The and of") == ["the", "and", "of"]


def test_cased_vocab_keeps_case(slice_file):
  tokens = vocab_building.build_wordpiece_vocab([slice_file], 2000, do_lower_case=False,
                                             log_fn=lambda s: None)
  assert "The" in tokens and "the" in tokens
  assert tokenization.check_vocab_case(tokens, False) is None


def test_deterministic_and_too_small(slice_file):
  log = lambda s: None
  a = vocab_building.build_wordpiece_vocab([slice_file], 1500, log_fn=log)
  b = vocab_building.build_wordpiece_vocab([slice_file], 1500, log_fn=log)
  assert a == b
  # A smaller vocab is a prefix of the larger one (same merges, in order).
  c = vocab_building.build_wordpiece_vocab([slice_file], 1000, log_fn=log)
  assert a[:1000] == c
  with pytest.raises(common.UsageError, match=r"^--vocab_size=50: too small .* needs at least \d+"):
    vocab_building.build_wordpiece_vocab([slice_file], 50, log_fn=log)
  with pytest.raises(common.UsageError, match=r"^--vocab_size=7: too small"):
    vocab_building.build_wordpiece_vocab([slice_file], 7, num_unused=5, log_fn=log)


def test_runs_out_of_pairs_pads_with_unused(tmp_path):
  path = tmp_path / "tiny.txt"
  path.write_text("aa ab ba\naa ab ba\n")
  tokens = vocab_building.build_wordpiece_vocab([str(path)], 20, num_unused=1,
                                             log_fn=lambda s: None)
  assert len(tokens) == 20 and len(set(tokens)) == 20
  # 5 specials, [unused0], a b ##a ##b, the 3 pairs seen twice, then padding.
  assert tokens[5:13] == ["[unused0]", "a", "b", "##a", "##b", "aa", "ab", "ba"]
  assert tokens[13:] == ["[unused%d]" % i for i in range(1, 8)]


@pytest.mark.slow
def test_cli_wordpiece_and_errors(slice_file, tmp_path):
  out = tmp_path / "new_dir" / "vocab.txt"
  r = run_tool("build_vocab.py", ["--input_file=%s" % slice_file, "--output_file=%s" % out,
                                  "--vocab_size=1200", "--max_input_bytes=100000"])
  assert r.returncode == 0, r.stderr
  lines = out.read_text(encoding="utf-8").split("\n")
  assert lines[-1] == "" and len(lines) == 1201 and lines[0] == "[PAD]"
  assert not [p for p in os.listdir(out.parent) if ".tmp-" in p]
  r = run_tool("build_vocab.py", ["--input_file=%s" % slice_file, "--output_file=%s" % out,
                                  "--vocab_size=40"], expect_rc=2)
  assert r.returncode == 2
  assert last_error_line(r).startswith("error: --vocab_size=40: too small")
  r = run_tool("build_vocab.py", ["--input_file=%s" % (tmp_path / "nope*.txt"),
                                  "--output_file=%s" % out], expect_rc=2)
  assert r.returncode == 2 and "nope*.txt matches no file" in r.stderr


def test_sentencepiece_round_trip(slice_file, tmp_path):
  import sentencepiece as spm
  prefix = str(tmp_path / "spm")
  pieces = vocab_building.build_sentencepiece([slice_file], 1500, prefix + ".model",
                                           num_unused=2, log_fn=lambda s: None)
  assert len(pieces) == 1500
  assert pieces[:7] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]",
                        "[unused1]"]
  again = vocab_building.build_sentencepiece([slice_file], 1500, prefix + "2.model",
                                          num_unused=2, log_fn=lambda s: None)
  assert again == pieces
  with open(prefix + ".model", "rb") as a, open(prefix + "2.model", "rb") as b:
    assert a.read() == b.read()
  tok = tokenization.FullTokenizer(None, do_lower_case=True,
                                   spm_model_file=prefix + ".model")
  assert tok.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) == [
      0, 1, 2, 3, 4]
  assert tok.convert_ids_to_tokens([2, 3, 4]) == ["[CLS]", "[SEP]", "[MASK]"]
  assert len(tok.vocab) == 1500 and tok.inv_vocab[4] == "[MASK]"
  # Literal special tokens in text are ordinary text, as with WordPiece.
  assert 3 not in tok.tokenize_to_ids("a [SEP] b")
  sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
  with open(slice_file, encoding="utf-8") as f:
    lines = [l for l in f.read().split("\n") if l.strip()][:500]
  n_unk = n = 0
  for line in lines:
    tokens = tok.tokenize(line)
    ids = tok.tokenize_to_ids(line)
    assert tok.convert_tokens_to_ids(tokens) == ids
    n += len(ids)
    n_unk += ids.count(1)
    if line.isascii():
      assert sp.decode(ids) == " ".join(line.lower().split())
  assert n_unk / n < 0.01


@pytest.mark.slow
def test_sentencepiece_cli(slice_file, tmp_path):
  out = tmp_path / "spm_vocab.txt"
  r = run_tool("build_vocab.py", ["--input_file=%s" % slice_file, "--output_file=%s" % out,
                                  "--vocab_size=800", "--model_type=sentencepiece",
                                  "--spm_algorithm=bpe",
                                  "--spm_model_prefix=%s" % (tmp_path / "m")])
  assert r.returncode == 0, r.stderr
  lines = out.read_text(encoding="utf-8").splitlines()
  assert len(lines) == 800 and lines[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  tok = tokenization.FullTokenizer(str(out), spm_model_file=str(tmp_path / "m.model"))
  assert list(tok.vocab) == lines
  r = run_tool("build_vocab.py", ["--input_file=%s" % slice_file, "--output_file=%s" % out,
                                  "--vocab_size=500000", "--model_type=sentencepiece",
                                  "--spm_model_prefix=%s" % (tmp_path / "m")], expect_rc=2)
  assert r.returncode == 2
  assert last_error_line(r).startswith("error: --vocab_size=500000: sentencepiece")


# The input policy shared with create_pretraining_data.py (one reader), and the
# output/input checks.


def test_read_text_blocks_gzip_bad_bytes_long_lines(tmp_path):
  import gzip  # pylint: disable=g-import-not-at-top
  log = lambda s: None
  text = "".join("line %d caf\u00e9 here\n" % i for i in range(500))
  plain, gz = tmp_path / "t.txt", tmp_path / "t.txt.gz"
  plain.write_text(text, encoding="utf-8")
  gz.write_bytes(gzip.compress(text.encode("utf-8")))
  assert "".join(vocab_building.read_text_blocks([str(gz)], 0, log)) == text
  assert vocab_building.build_wordpiece_vocab([str(gz)], 60, log_fn=log) == (
      vocab_building.build_wordpiece_vocab([str(plain)], 60, log_fn=log))
  # Before the fix a binary file became "words" (bad bytes were dropped silently).
  binary = tmp_path / "b.bin"
  binary.write_bytes(bytes(range(256)) * 200 + b"\n")  # the 128 bytes >= 0x80: not UTF-8
  with pytest.raises(common.UsageError,
                     match=r"^--input_file: %s: 50\.0%% of its 51201 bytes "
                     r"\(25600\)" % binary):
    list(vocab_building.read_text_blocks([str(plain), str(binary)], 0, log))
  # Also when --max_input_bytes stops inside the bad file.
  # 11 clean bytes, then lines of 256 bytes with 128 bad ones: 117 lines fit in 30000
  # bytes, the share counts the 118 read (15104 of 11 + 118 * 256 bytes).
  with pytest.raises(common.UsageError, match=r"50\.0% of the 30219 bytes read \(15104\)"):
    list(vocab_building.read_text_blocks([str(binary)], 30000, log, max_bad_fraction=0.4))
  # An over-long line is cut at whitespace into lines of at most max_line_chars.
  plain.write_text("ab cd " * 1000 + "\nend\n")
  lines = "".join(vocab_building.read_text_blocks([str(plain)], 0, log,
                                               max_line_chars=100)).split("\n")
  assert max(len(l) for l in lines) <= 100 and len(lines) == 63 and lines[-2:] == ["end", ""]
  assert vocab_building.count_words(["\n".join(lines)], True) == {"ab": 1000, "cd": 1000, "end": 1}


def test_sentencepiece_bad_input_is_usage_error(tmp_path):
  binary = tmp_path / "b.bin"
  binary.write_bytes(bytes(range(256)) * 200)
  with pytest.raises(common.UsageError, match="^--input_file: .*b.bin: .* not UTF-8 text"):
    vocab_building.build_sentencepiece([str(binary)], 100, str(tmp_path / "m.model"),
                                    log_fn=lambda s: None)
  assert not os.path.exists(str(tmp_path / "m.model"))


def test_cli_output_is_input_or_earlier_output_refused(slice_file, tmp_path):
  corpus = tmp_path / "corpus.txt"
  with open(slice_file, "rb") as f:
    data = f.read(20000)
  corpus.write_bytes(data)
  # Before the fix the corpus was replaced by the vocab.
  r = run_tool("build_vocab.py", ["--input_file=%s" % corpus, "--output_file=%s" % corpus,
                                  "--vocab_size=300"], expect_rc=2)
  assert r.returncode == 2 and "Traceback" not in r.stderr
  assert last_error_line(r) == (
      "error: --output_file=%s: is also an input; writing it would replace that input" % corpus)
  assert corpus.read_bytes() == data
  # A glob that matches the vocab of an earlier run (not text: refused, naming it).
  _write_vocab(tmp_path, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"],
               name="old_vocab.txt")
  r = run_tool("build_vocab.py", ["--input_file=%s/*.txt" % tmp_path,
                                  "--output_file=%s/v/vocab.txt" % tmp_path,
                                  "--vocab_size=300"], expect_rc=2)
  assert r.returncode == 2
  assert last_error_line(r) == (
      "error: --input_file: %s/old_vocab.txt is a BERT vocab file, not text; leave it out of "
      "--input_file" % tmp_path)
  assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "old_vocab.txt"]
