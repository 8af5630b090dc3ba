"""Tests for create_translation_data.py, translation_records.py and translation_input.py
(TFRecords -> token batches)."""

import collections
import gzip
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from conftest import last_error_line, run_tool, shared_path
from realformer_tf import common
import create_pretraining_data
from realformer_tf import vocab_building
from translation import create_translation_data as ctd
from translation import translation_input
from translation import translation_records

WORDS_SRC = ["A", "man", "dog", "runs", "in", "the", "park", "Two", "women", "sit", "on", "a",
             "bench", "."]
WORDS_TGT = ["Ein", "Mann", "Hund", "läuft", "im", "Park", "Zwei", "Frauen", "sitzen", "auf",
             "einer", "Bank", "."]


def _write_lines(path, lines, gz=False):
  data = "".join(line + "\n" for line in lines).encode("utf-8")
  if gz:
    data = gzip.compress(data)
  with open(path, "wb") as f:
    f.write(data)
  return path


def _sentences(words, n, seed):
  rng = random.Random(seed)
  return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(n)]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
  """A tiny joint SentencePiece model with the translation ids (pad 0, unk 1, bos 2, eos 3)."""
  directory = tmp_path_factory.mktemp("spm")
  src = _write_lines(str(directory / "train.en"), _sentences(WORDS_SRC, 300, 1))
  tgt = _write_lines(str(directory / "train.de"), _sentences(WORDS_TGT, 300, 2))
  path = str(directory / "joint.model")
  vocab_building.build_sentencepiece([src, tgt], 60, path, do_lower_case=False, id_layout="nmt",
                                  log_fn=lambda s: None)
  return path


def test_load_spm_checks_the_translation_ids(spm_model, tmp_path):
  sp = translation_records.load_spm(spm_model)
  assert [sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()] == [0, 1, 2, 3]
  assert [sp.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
  # A BERT-layout model ([PAD]=0 [UNK]=1, no bos/eos) is refused with one line.
  src = _write_lines(str(tmp_path / "t.txt"), _sentences(WORDS_SRC, 200, 3))
  bert_model = str(tmp_path / "bert.model")
  vocab_building.build_sentencepiece([src], 36, bert_model, do_lower_case=False,
                                  log_fn=lambda s: None)
  with pytest.raises(common.UsageError, match=r"special ids bos=-1 eos=-1 pad=0 unk=1, the "
                     r"translation model needs bos=2 eos=3 pad=0 unk=1"):
    translation_records.load_spm(bert_model)
  with pytest.raises(common.UsageError, match="not a SentencePiece model"):
    translation_records.load_spm(src)
  with pytest.raises(common.UsageError, match="file does not exist"):
    translation_records.load_spm(str(tmp_path / "missing.model"))


def test_encode_pair_appends_eos_and_keeps_case(spm_model):
  sp = translation_records.load_spm(spm_model)
  source_ids, target_ids = translation_records.encode_pair(sp, "Two women sit",
                                                           "Zwei Frauen sitzen")
  assert source_ids == sp.encode("Two women sit") + [3]
  assert target_ids == sp.encode("Zwei Frauen sitzen") + [3]
  assert sp.decode(source_ids[:-1]) == "Two women sit"
  assert sp.decode(target_ids[:-1]) == "Zwei Frauen sitzen"
  assert translation_records.UNK_ID not in source_ids + target_ids
  assert translation_records.PAD_ID not in source_ids


def test_read_parallel_polls_the_stop_at_every_line_pair(tmp_path):
  # Skipped pairs (empty lines) and the extra lines of a longer file are polled too: a file of
  # empty lines used to be read to its end after SIGTERM.
  src = _write_lines(str(tmp_path / "s.txt"), [""] * 300 + ["a b"])
  tgt = _write_lines(str(tmp_path / "t.txt"), ["A B"] * 301 + ["C D"] * 300)

  def stop_after(polls):
    calls = []

    def should_stop():
      calls.append(1)
      return len(calls) > polls
    return should_stop, calls

  for polls in (10, 400):  # among the empty pairs; among the target's extra lines
    should_stop, calls = stop_after(polls)
    with pytest.raises(ctd.Stopped):
      list(ctd.read_parallel(src, tgt, strict=False, should_stop=should_stop))
    assert len(calls) == polls + 1
  should_stop, calls = stop_after(10 ** 6)
  stats = collections.Counter()
  assert len(list(ctd.read_parallel(src, tgt, stats, strict=False,
                                    should_stop=should_stop))) == 1
  assert stats["extra_target_lines"] == 300 and stats["empty_pairs"] == 300


def test_read_parallel_counts_empty_and_extra_lines(tmp_path):
  src = _write_lines(str(tmp_path / "s.txt"), ["a b", "", "c d", "e f", "g h", "i j"])
  tgt = _write_lines(str(tmp_path / "t.gz"), ["A B", "B", "  ", "E F", "G H"], gz=True)
  stats = collections.Counter()
  pairs = list(ctd.read_parallel(src, tgt, stats, strict=False))
  assert pairs == [(0, "a b", "A B"), (3, "e f", "E F"), (4, "g h", "G H")]
  assert stats["source_lines"] == 6 and stats["target_lines"] == 5
  assert stats["pairs_read"] == 5 and stats["extra_source_lines"] == 1
  assert stats["extra_target_lines"] == 0
  assert stats["empty_source_lines"] == 1 and stats["empty_target_lines"] == 1
  assert stats["empty_pairs"] == 2
  # The other way round: the target is longer.
  stats = collections.Counter()
  assert len(list(ctd.read_parallel(tgt, src, stats, strict=False))) == 3
  assert stats["extra_target_lines"] == 1 and stats["target_lines"] == 6
  # Misaligned files are an error by default (one deleted line shifts every pair).
  with pytest.raises(common.UsageError, match=r"^--target_file=.*t\.gz: has 5 lines but "
                     r"--source_file=.*s\.txt has 6: the files are not line-aligned"):
    list(ctd.read_parallel(src, tgt))


@pytest.mark.parametrize("read_block", [1 << 22, 7])
def test_cut_lines_stay_aligned(tmp_path, read_block):
  # TextReader cuts lines over max_line_chars into pieces (while streaming with a small
  # read_block); each cut line must still count as exactly one line.
  lines = ["short", "a very long line that will be cut", "x" * 50, "tail", "y z " * 9, "end"]
  path = _write_lines(str(tmp_path / "f.txt"), lines)
  reader = create_pretraining_data.TextReader(max_line_chars=10, read_block=read_block)
  assert list(ctd._aligned_lines(reader, path)) == ["short", None, None, "tail", None, "end"]
  assert reader.stats["long_lines_split"] == 3
  # The last line long and without its "\n".
  with open(path, "a") as f:
    f.write("q" * 35)
  reader = create_pretraining_data.TextReader(max_line_chars=10, read_block=read_block)
  assert list(ctd._aligned_lines(reader, path))[-2:] == ["end", None]


def test_create_translation_data_writes_and_counts(spm_model, tmp_path):
  sp = translation_records.load_spm(spm_model)
  long_source = "Two women sit on a bench in the park ."
  assert len(long_source) < 39
  assert len(translation_records.encode_pair(sp, long_source, "")[0]) > 12
  source = ["A man runs", long_source, "", "A dog", "the park", "x" * 40]
  target = ["Ein Mann läuft", "Zwei Frauen", "Ein Hund", "", "Park", "Bank"]
  src = _write_lines(str(tmp_path / "s.en"), source)
  tgt = _write_lines(str(tmp_path / "t.de"), target + ["extra"])
  out = str(tmp_path / "out" / "train.tfrecord")
  summary_path = create_pretraining_data.summary_path_for(out)
  summary = ctd.create_translation_data(src, tgt, sp, out, max_length=12, strict=False,
                                        summary_path=summary_path, max_line_chars=39,
                                        log_fn=lambda s: None)
  # Kept: pairs 0 and 4. Skipped: 1 (source over 12 ids), 2 and 3 (empty), 5 (cut line).
  assert summary["instances"] == 2 and summary["pairs_read"] == 6
  assert summary["over_long_pairs"] == 2 and summary["cut_lines"] == 1
  assert summary["empty_pairs"] == 2 and summary["line_count_mismatch"]
  assert (summary["source_lines"], summary["target_lines"]) == (6, 7)
  with open(summary_path) as f:
    assert json.load(f) == summary
  assert sorted(os.listdir(str(tmp_path / "out"))) == ["train.summary.json", "train.tfrecord"]
  # The records hold pieces + eos, unpadded.
  records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(out)]
  got = [(list(e.features.feature["source_ids"].int64_list.value),
          list(e.features.feature["target_ids"].int64_list.value)) for e in records]
  assert got == [translation_records.encode_pair(sp, "A man runs", "Ein Mann läuft"),
                 translation_records.encode_pair(sp, "the park", "Park")]
  assert summary["source_tokens"] == sum(len(s) for s, _ in got)
  # An output that is a TFRecord is refused as text input (create_pretraining_data's check).
  with pytest.raises(common.UsageError, match="TFRecord"):
    create_pretraining_data.check_text_inputs([out], "source_file")


def test_create_translation_data_on_multi30k(tmp_path):
  """The CLI on the first 200 lines of the real multi30k en-de: a joint spm is trained."""
  lines = {}
  for lang in ("en", "de"):
    with gzip.open(shared_path("nmt", "multi30k", "train.%s.gz" % lang), "rt",
                   encoding="utf-8") as f:
      lines[lang] = [next(f).rstrip("\n") for _ in range(200)]
  src = _write_lines(str(tmp_path / "train.en.gz"), lines["en"], gz=True)
  tgt = _write_lines(str(tmp_path / "train.de.gz"), lines["de"], gz=True)
  model = str(tmp_path / "spm" / "joint.model")
  out = str(tmp_path / "data" / "train.tfrecord")
  proc = run_tool("translation/create_translation_data.py", [
      "--source_file=" + src, "--target_file=" + tgt, "--spm_model=" + model,
      "--train_spm_vocab_size=500", "--output_file=" + out, "--allow_unequal_lines"])
  assert "Wrote 200 pairs of 200 lines" in proc.stdout
  sp = translation_records.load_spm(model)
  assert sp.get_piece_size() == 500
  # Case preserved: capitalised pieces exist and every sentence decodes back unchanged.
  assert any(sp.id_to_piece(i).lstrip("\u2581")[:1].isupper() for i in range(4, 500))
  examples = list(translation_input.input_fn_builder([out], 4096, 128, False,
                                                     with_example_index=True)({}))
  decoded = {}
  for batch in examples:
    for i, index in enumerate(batch["example_index"].numpy()):
      ids = [t for t in batch["target_ids"][i].numpy().tolist() if t]
      assert ids[-1] == translation_records.EOS_ID
      decoded[int(index)] = sp.decode(ids[:-1])
  assert [decoded[i] for i in range(200)] == [" ".join(l.split()) for l in lines["de"]]
  with open(create_pretraining_data.summary_path_for(out)) as f:
    summary = json.load(f)
  assert summary["instances"] == 200 and summary["vocab_size"] == 500
  assert summary["settings"]["strict"] is False  # --allow_unequal_lines reached the library
  assert summary["source_unk_pieces"] == 0 and summary["target_unk_pieces"] == 0
  stats = translation_input.check_translation_tfrecords([out], vocab_size=500, max_length=128)
  assert stats["records_checked"] == 200
  # Deterministic: the library with the trained model writes the same bytes (a rerun reuses
  # the model and rewrites the file).
  again = str(tmp_path / "again.tfrecord")
  ctd.create_translation_data(src, tgt, sp, again, log_fn=lambda s: None)
  with open(out, "rb") as f1, open(again, "rb") as f2:
    assert f1.read() == f2.read()


def _mismatched_files(tmp_path):
  src = _write_lines(str(tmp_path / "s.txt"), ["a b", "c d"])
  tgt = _write_lines(str(tmp_path / "t.txt"), ["A B"])
  return src, tgt


def test_cli_line_count_mismatch_is_an_error_and_writes_nothing(spm_model, tmp_path):
  """Misaligned files, without a flag and with the old --strict: one line."""
  src, tgt = _mismatched_files(tmp_path)
  args = ["--source_file=" + src, "--target_file=" + tgt, "--spm_model=" + spm_model,
          "--output_file=" + str(tmp_path / "o.tfrecord")]
  proc = run_tool("translation/create_translation_data.py", args, expect_rc=2)
  assert last_error_line(proc) == (
      "error: --target_file=%s: has 1 lines but --source_file=%s has 2: the files are not "
      "line-aligned (nothing written); pass --allow_unequal_lines to keep the pairs of the "
      "first 1 lines" % (tgt, src))
  assert sorted(os.listdir(str(tmp_path))) == ["s.txt", "t.txt"]  # nothing written
  # The same file as source and target, before anything is read.
  proc = run_tool("translation/create_translation_data.py",
                  args[:1] + ["--target_file=" + src] + args[2:], expect_rc=2)
  assert last_error_line(proc) == ("error: --target_file=%s: is also --source_file; give the "
                                   "target-language file line-aligned with it" % src)
  assert sorted(os.listdir(str(tmp_path))) == ["s.txt", "t.txt"]


def test_unequal_lines_flags():
  """--allow_unequal_lines (or the old --nostrict) keeps the common prefix; --strict is the
  default and contradicts --allow_unequal_lines (the CLI: test_create_translation_data_on_multi30k
  and test_cli_line_count_mismatch_is_an_error_and_writes_nothing)."""
  assert not ctd.unequal_lines_allowed(False, True, False)  # the default: an error
  assert not ctd.unequal_lines_allowed(False, True, True)   # --strict (old command lines)
  assert ctd.unequal_lines_allowed(False, False, True)      # --nostrict (old command lines)
  assert ctd.unequal_lines_allowed(True, True, False)       # --allow_unequal_lines
  with pytest.raises(common.UsageError, match="^--strict and --allow_unequal_lines contradict"):
    ctd.unequal_lines_allowed(True, True, True)


def test_cli_refuses_an_output_that_is_an_input(spm_model, tmp_path):
  src, tgt = _mismatched_files(tmp_path)
  proc = run_tool("translation/create_translation_data.py", [
      "--source_file=" + src, "--target_file=" + tgt, "--spm_model=" + spm_model,
      "--output_file=" + tgt], expect_rc=2)
  assert last_error_line(proc).startswith("error: --output_file=%s: " % tgt)
  with open(tgt) as f:
    assert f.read() == "A B\n"


# ---------------------------------------------------------------------------------------------
# translation_input.py
# ---------------------------------------------------------------------------------------------

NUM_EXAMPLES = 157


@pytest.fixture(scope="module")
def examples_file(tmp_path_factory):
  """NUM_EXAMPLES random pairs (1..30 ids each incl. eos; the first source id tells them apart)."""
  rng = np.random.RandomState(0)
  pairs = []
  for i in range(NUM_EXAMPLES):
    src = [4 + i] + rng.randint(4, 400, rng.randint(0, 29)).tolist() + [3]
    tgt = rng.randint(4, 400, rng.randint(0, 30)).tolist() + [3]
    pairs.append((src, tgt))
  path = str(tmp_path_factory.mktemp("tfrecord") / "pairs.tfrecord")
  assert translation_records.write_translation_tfrecord(pairs, path) == NUM_EXAMPLES
  return path, pairs


def _unpad(row):
  row = list(row)
  while row and row[-1] == 0:
    row.pop()
  return row


def _rows(batches):
  """The (source, target) pairs of the batches, checking padding and the decoder input."""
  rows = []
  for batch in batches:
    source = batch["source_ids"].numpy()
    target = batch["target_ids"].numpy()
    target_input = batch["target_input_ids"].numpy()
    assert source.dtype == np.int32 and target.dtype == np.int32
    assert target.shape == target_input.shape and source.shape[0] == target.shape[0]
    for s, t, ti in zip(source, target, target_input):
      s, t = _unpad(s), _unpad(t)
      if not s:  # an all-padding row (fixed-shape evaluation)
        assert not t and not ti.any()
        continue
      # Only zeros after the content, and the decoder input is bos + target[:-1].
      assert 0 not in s and 0 not in t and s[-1] == 3 and t[-1] == 3
      assert ti[:len(t)].tolist() == [2] + t[:-1] and not ti[len(t):].any()
      rows.append((s, t))
  return rows


def test_eval_pass_loses_and_duplicates_nothing_within_the_token_budget(examples_file):
  path, pairs = examples_file
  max_tokens = 64
  batches = list(translation_input.input_fn_builder([path], max_tokens, 32, False)(None))
  for batch in batches:
    size, src_len = batch["source_ids"].shape
    assert size * max(src_len, batch["target_ids"].shape[1]) <= max_tokens
  rows = _rows(batches)
  assert sorted(rows) == sorted(pairs) and len(rows) == NUM_EXAMPLES
  # Batches are padded only to their own longest example.
  assert any(batch["source_ids"].shape[1] < 30 for batch in batches)


def test_example_index_follows_file_order(examples_file):
  path, pairs = examples_file
  batches = translation_input.input_fn_builder([path], 100, 32, False,
                                               with_example_index=True)({})
  for batch in batches:
    for index, row in zip(batch["example_index"].numpy(), batch["source_ids"].numpy()):
      assert _unpad(row) == pairs[index][0]


def test_training_is_seeded_repeats_and_skips_over_long(examples_file):
  path, pairs = examples_file

  def first(seed, n=100, skip=0):
    fn = translation_input.input_fn_builder([path], 80, 20, True, seed=seed, shuffle_buffer=50,
                                            skip_batches=skip)
    return list(fn({}).take(n))

  a, b, c = first(1), first(1), first(2)
  assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x)
  assert not all(x["source_ids"].shape == y["source_ids"].shape and
                 np.array_equal(x["source_ids"], y["source_ids"]) for x, y in zip(a, c))
  rows = _rows(a)
  kept = {tuple(s) for s, t in pairs if max(len(s), len(t)) <= 20}
  assert len(rows) > len(kept)  # repeats
  for batch in a:
    size, src_len = batch["source_ids"].shape
    assert max(src_len, batch["target_ids"].shape[1]) <= 20
    assert size * max(src_len, batch["target_ids"].shape[1]) <= 80
  assert {tuple(s) for s, _ in rows} == kept  # longer ones skipped, none lost (3+ epochs)
  skipped = first(1, n=5, skip=3)
  assert all(np.array_equal(x[k], y[k]) for x, y in zip(skipped, a[3:8]) for k in x)


def _python_epoch_batches(pairs, max_tokens, max_length):
  """Batches of one pass of tf.data's bucket_by_sequence_length, simulated in Python."""
  bounds = translation_input.default_bucket_boundaries(max_length)
  sizes = translation_input.bucket_batch_sizes(bounds, max_tokens)
  filled = [0] * len(sizes)
  batches = 0
  for src, tgt in pairs:
    length = max(len(src), len(tgt))
    if length > max_length:
      continue  # training skips over-long pairs
    bucket = sum(length >= b for b in bounds)
    filled[bucket] += 1
    if filled[bucket] == sizes[bucket]:
      batches, filled[bucket] = batches + 1, 0
  return batches + sum(1 for n in filled if n)  # the partial buckets flush at the end


def test_epoch_batches_are_one_pass_of_the_training_batching(examples_file):
  path, pairs = examples_file
  for max_tokens, max_length in ((80, 20), (64, 32), (10000, 32)):
    assert translation_input.count_epoch_batches([path], max_tokens, max_length) == \
        _python_epoch_batches(pairs, max_tokens, max_length), (max_tokens, max_length)


def test_eval_fails_on_an_over_long_record(examples_file):
  path, _ = examples_file
  with pytest.raises(tf.errors.InvalidArgumentError, match="longer than --max_length=20"):
    list(translation_input.input_fn_builder([path], 80, 20, False)({}))


def test_fixed_shape_eval_pads_the_last_batch_and_keeps_everything(examples_file):
  path, pairs = examples_file
  fn = translation_input.input_fn_builder([path], 10000, 32, False, with_example_index=True)
  batches = list(fn({"use_tpu": True, "batch_size": 16}))
  assert len(batches) == -(-NUM_EXAMPLES // 16)
  for batch in batches:
    for name in translation_input.FEATURE_NAMES:
      assert batch[name].shape == (16, 32)
  indices = np.concatenate([b["example_index"].numpy() for b in batches])
  assert sorted(indices[indices >= 0].tolist()) == list(range(NUM_EXAMPLES))
  assert (indices < 0).sum() == 16 * len(batches) - NUM_EXAMPLES
  assert sorted(_rows(batches)) == sorted(pairs)


def test_fixed_shape_training_batches(examples_file):
  path, _ = examples_file
  fn = translation_input.input_fn_builder([path], 8 * 32, 32, True, use_tpu=True)
  for batch in fn({}).take(25):  # past one epoch: the remainder is dropped, never short
    assert batch["source_ids"].shape == (8, 32) and batch["target_ids"].shape == (8, 32)


def test_bucket_boundaries_and_batch_sizes():
  bounds = translation_input.default_bucket_boundaries(128)
  assert bounds[0] == 8 and bounds[-1] == 129
  assert all(b2 > b1 for b1, b2 in zip(bounds, bounds[1:]))
  sizes = translation_input.bucket_batch_sizes(bounds, 4096)
  assert len(sizes) == len(bounds) + 1
  assert sizes[0] == 4096 // 7 and sizes[-2] == 4096 // 128
  assert all(s * (b - 1) <= 4096 for s, b in zip(sizes, bounds))
  with pytest.raises(common.UsageError, match="--max_tokens=16: smaller than --max_length=32"):
    translation_input.input_fn_builder(["x"], 16, 32, False)({})


def test_check_translation_tfrecords(examples_file, tmp_path):
  path, pairs = examples_file
  stats = translation_input.check_translation_tfrecords([path], vocab_size=400 + NUM_EXAMPLES)
  assert stats["records_checked"] == NUM_EXAMPLES
  assert stats["max_id"] == max(max(s + t) for s, t in pairs)
  with pytest.raises(common.UsageError, match=r"holds id \d+, outside \[1, vocab_size=100\)"):
    translation_input.check_translation_tfrecords([path], vocab_size=100)
  bad = str(tmp_path / "bad.tfrecord")
  translation_records.write_translation_tfrecord([([5, 6], [7, 3])], bad)
  with pytest.raises(common.UsageError, match="source_ids does not end with eos"):
    translation_input.check_translation_tfrecords([bad])
