"""Tests for create_pretraining_data.py (its pipeline: realformer_tf/pretraining_data.py, its pool:
realformer_tf/ordered_pool.py): masking statistics, layout, determinism, format, bad input.

The official algorithm (google-research/bert create_pretraining_data.py) is re-implemented here on
plain lists as an independent reference; the fast version is compared with it statistically (the
random streams differ by design) and checked for its exact invariants.
"""

import bz2
import collections
import glob
import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import last_error_line, process_alive, REPO_DIR, run_tool, shared_path, start_tool
from conftest import TINY_BERT_CONFIG
from realformer_tf import common
import create_pretraining_data as cpd
from realformer_tf import ordered_pool
from realformer_tf import pretraining_data
from realformer_tf import text_input
import tokenization

SCRIPT = "create_pretraining_data.py"

WORDS = ("the a of and to in is was he she it that king queen ship whale sea captain said "
         "unaffable tokenization hippopotamuses embiggens quizzically paradoxical xylophones "
         "lighthouse harpooneer extraordinarily misunderstanding").split()


def make_text(num_docs, seed, max_lines=12, one_line_every=0):
  """Deterministic documents of sentences (one per line), blank line between documents."""
  rng = random.Random(seed)
  docs = []
  for d in range(num_docs):
    num_lines = 1 if one_line_every and d % one_line_every == 0 else rng.randint(1, max_lines)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 25))) + "."
             for _ in range(num_lines)]
    docs.append("\n".join(lines))
  return "\n\n".join(docs) + "\n"


@pytest.fixture(scope="module")
def tokenizer():
  path = os.path.join(REPO_DIR, "data", "vocab.txt")
  if not os.path.exists(path):
    path = shared_path("vocab", "bert_uncased_vocab.txt")
  return tokenization.FullTokenizer(path, do_lower_case=True)


def settings(**kw):
  base = dict(max_seq_length=64, max_predictions_per_seq=10, random_seed=7, dupe_factor=3,
              masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
  base.update(kw)
  return pretraining_data.Settings(**base)


def run(tmp_path, tokenizer, text, name="out.tfrecord", num_workers=1, **kw):
  """Writes `text` (str or bytes) to a file and runs the library entry point on it."""
  inp = tmp_path / (name + ".txt")
  inp.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
  out = str(tmp_path / name)
  opts = {k: kw.pop(k) for k in ("chunk_mb", "nsp_buffer_docs", "shuffle_buffer",
                                  "max_line_chars", "max_bad_fraction") if k in kw}
  summary = pretraining_data.create_pretraining_data([str(inp)], [out], tokenizer, settings(**kw),
                                                     num_workers=num_workers, log_fn=lambda s: None,
                                                     summary_path=cpd.summary_path_for(out), **opts)
  return out, summary


# ----------------------------------------------------------------------------------------------
# Reference: the official algorithm on lists (independent of the vectorized implementation).
# ----------------------------------------------------------------------------------------------


def ref_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


def ref_instances_from_document(all_documents, document_index, max_seq_length, short_seq_prob,
                                rng):
  document = all_documents[document_index]
  max_num_tokens = max_seq_length - 3
  target_seq_length = max_num_tokens
  if rng.random() < short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)
  instances = []
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = rng.randint(1, len(current_chunk) - 1)
        tokens_a = []
        for j in range(a_end):
          tokens_a.extend(current_chunk[j])
        tokens_b = []
        if len(current_chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          for _ in range(10):
            random_document_index = rng.randint(0, len(all_documents) - 1)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = rng.randint(0, len(random_document) - 1)
          for j in range(random_start, len(random_document)):
            tokens_b.extend(random_document[j])
            if len(tokens_b) >= target_b_length:
              break
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          for j in range(a_end, len(current_chunk)):
            tokens_b.extend(current_chunk[j])
        ref_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        instances.append((tokens_a, tokens_b, is_random_next))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def ref_masked_lm(tokens, masked_lm_prob, max_predictions_per_seq, whole_word, rng):
  """Official create_masked_lm_predictions; returns the sorted masked positions."""
  cand_indexes = []
  for (i, token) in enumerate(tokens):
    if token in ("[CLS]", "[SEP]"):
      continue
    if whole_word and cand_indexes and token.startswith("##"):
      cand_indexes[-1].append(i)
    else:
      cand_indexes.append([i])
  rng.shuffle(cand_indexes)
  num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
  masked = []
  for index_set in cand_indexes:
    if len(masked) >= num_to_predict:
      break
    if len(masked) + len(index_set) > num_to_predict:
      continue
    masked.extend(index_set)
  return sorted(masked)


def original_tokens(ex):
  """input_ids with the masked positions restored to their labels."""
  ids = ex["input_ids"].copy()
  k = int(ex["masked_lm_weights"].sum())
  ids[ex["masked_lm_positions"][:k]] = ex["masked_lm_ids"][:k]
  return ids


# ----------------------------------------------------------------------------------------------
# Instance creation and truncation vs the reference.
# ----------------------------------------------------------------------------------------------


def _truncated_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Truncated copies of a pair, with the id pipeline's draws (pretraining_data._truncation)."""
  front_a, back_a, front_b, back_b = pretraining_data._truncation(len(tokens_a), len(tokens_b),
                                                                  max_num_tokens, rng)
  return (tokens_a[front_a:len(tokens_a) - back_a], tokens_b[front_b:len(tokens_b) - back_b])


def test_truncation_matches_official_distribution():
  rng = random.Random(0)
  ref_rng = random.Random(1)
  for len_a, len_b, max_num in [(10, 3, 8), (3, 10, 8), (6, 6, 7), (50, 40, 20), (1, 30, 5),
                                (7, 7, 14)]:
    ours_front, ref_front = [], []
    for _ in range(3000):
      a, b = list(range(len_a)), list(range(100, 100 + len_b))
      ta, tb = _truncated_pair(a, b, max_num, rng)
      ra, rb = list(a), list(b)
      ref_truncate_seq_pair(ra, rb, max_num, ref_rng)
      # The kept lengths are deterministic and must match exactly.
      assert (len(ta), len(tb)) == (len(ra), len(rb))
      # Kept tokens are a contiguous run of the original.
      assert ta == a[ta[0]:ta[0] + len(ta)] if ta else True
      ours_front.append((ta[0] if ta else 0, tb[0] - 100 if tb else 0))
      ref_front.append((ra[0] if ra else 0, rb[0] - 100 if rb else 0))
    ours, ref = np.mean(ours_front, axis=0), np.mean(ref_front, axis=0)
    assert np.allclose(ours, ref, atol=0.25 + 0.05 * ref), (len_a, len_b, max_num, ours, ref)


def test_instances_match_official_statistics():
  rng = random.Random(3)
  docs = [[[rng.randint(1000, 2000) for _ in range(rng.randint(1, 40))]
           for _ in range(rng.randint(1, 10))] for _ in range(30)]
  # Our representation: a flat token array and per-document offsets.
  flat, bounds_docs = [], []
  for doc in docs:
    bounds = [len(flat)]
    for seg in doc:
      flat.extend(seg)
      bounds.append(len(flat))
    bounds_docs.append(bounds)

  def stats(instances):
    la = np.array([x[0] for x in instances], float)
    lb = np.array([x[1] for x in instances], float)
    rnd = np.array([x[2] for x in instances], float)
    return np.array([len(instances) / passes, la.mean(), lb.mean(), rnd.mean(),
                     np.mean(la + lb == 61)])

  passes = 150
  ours, ref = [], []
  our_rng, ref_rng = random.Random(11), random.Random(12)
  for _ in range(passes):
    for d in range(len(docs)):
      out = []
      pretraining_data._create_id_instances_from_document(bounds_docs, d, 64, 0.1, our_rng, out)
      for a_start, len_a, b_start, len_b, is_random in out:
        assert len_a >= 1 and len_b >= 1 and len_a + len_b <= 61
        a_tokens = flat[a_start:a_start + len_a]
        # A lies inside document d; a real next B starts inside d too.
        assert bounds_docs[d][0] <= a_start and a_start + len_a <= bounds_docs[d][-1]
        if not is_random:
          assert bounds_docs[d][0] <= b_start and b_start + len_b <= bounds_docs[d][-1]
          assert b_start >= a_start + len_a
        ours.append((len_a, len_b, is_random, a_tokens))
      ref.extend(ref_instances_from_document(docs, d, 64, 0.1, ref_rng))
  ours_stats = stats([(x[0], x[1], x[2]) for x in ours])
  ref_stats = stats([(len(a), len(b), r) for a, b, r in ref])
  # instances per pass, mean len A, mean len B, random fraction, fraction full
  assert np.allclose(ours_stats, ref_stats, rtol=0.04, atol=0.01), (ours_stats, ref_stats)


# ----------------------------------------------------------------------------------------------
# Masking.
# ----------------------------------------------------------------------------------------------


def test_masking_statistics(tmp_path, tokenizer):
  out, summary = run(tmp_path, tokenizer, make_text(150, 1), dupe_factor=4)
  examples = pretraining_data.read_examples(out)
  assert len(examples) == summary["instances"] > 1500
  vocab = tokenizer.vocab
  cls_id, sep_id, mask_id = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
  kinds = collections.Counter()
  masked = real = 0
  for ex in examples:
    length = int(ex["input_mask"].sum())
    k = int(ex["masked_lm_weights"].sum())
    # Exactly the official count: min(max_predictions, max(1, round(len * 0.15))).
    assert k == min(10, max(1, int(round(length * 0.15))))
    pos = ex["masked_lm_positions"][:k]
    assert list(pos) == sorted(set(pos.tolist()))
    orig = original_tokens(ex)
    seps = np.nonzero(orig[:length] == sep_id)[0]
    special = {0, int(np.sum(ex["segment_ids"][:length] == 0) - 1), length - 1}
    assert orig[0] == cls_id and orig[length - 1] == sep_id
    assert not special & set(pos.tolist()), "[CLS]/[SEP] masked"
    assert cls_id not in ex["masked_lm_ids"][:k] and sep_id not in ex["masked_lm_ids"][:k]
    assert len(seps) == 2
    for p, label in zip(pos, ex["masked_lm_ids"][:k]):
      token = ex["input_ids"][p]
      kinds["mask" if token == mask_id else "kept" if token == label else "random"] += 1
    masked += k
    real += length - 3
  total = sum(kinds.values())
  assert abs(kinds["mask"] / total - 0.8) < 0.02
  assert abs(kinds["kept"] / total - 0.1) < 0.015
  assert abs(kinds["random"] / total - 0.1) < 0.015
  assert 0.13 < masked / real < 0.17
  assert summary["masked_tokens"] == masked
  assert abs(summary["masked_fraction"] - masked / real) < 1e-9


def _word_groups(orig, length, inv_vocab):
  """Official whole-word candidate groups (a ## piece joins the previous candidate)."""
  groups = []
  for i in range(length):
    token = inv_vocab[int(orig[i])]
    if token in ("[CLS]", "[SEP]"):
      continue
    if groups and token.startswith("##"):
      groups[-1].append(i)
    else:
      groups.append([i])
  return groups


def test_whole_word_masking(tmp_path, tokenizer):
  inv = tokenizer.inv_vocab
  ref_rng = random.Random(5)
  for wwm in (True, False):
    out, _ = run(tmp_path, tokenizer, make_text(80, 2), name="w%d.tfrecord" % wwm, dupe_factor=3,
                 do_whole_word_mask=wwm)
    split_groups = 0
    counts, ref_counts = [], []
    for ex in pretraining_data.read_examples(out):
      length = int(ex["input_mask"].sum())
      k = int(ex["masked_lm_weights"].sum())
      masked = set(ex["masked_lm_positions"][:k].tolist())
      orig = original_tokens(ex)
      num_to_predict = min(10, max(1, int(round(length * 0.15))))
      assert k <= num_to_predict
      for group in _word_groups(orig, length, inv):
        hit = len(masked & set(group))
        split_groups += 0 < hit < len(group)
      counts.append(k)
      tokens = [inv[int(t)] for t in orig[:length]]
      ref_counts.append(len(ref_masked_lm(tokens, 0.15, 10, wwm, ref_rng)))
    if wwm:
      assert split_groups == 0
      # Same number of masked tokens on average as the official greedy (skips oversized groups).
      assert abs(np.mean(counts) - np.mean(ref_counts)) < 0.05 * np.mean(ref_counts)
    else:
      assert split_groups > 50  # the check above can fail
      assert counts == ref_counts


# ----------------------------------------------------------------------------------------------
# Layout, format, determinism.
# ----------------------------------------------------------------------------------------------


def test_layout_and_nsp_balance(tmp_path, tokenizer):
  out, summary = run(tmp_path, tokenizer, make_text(200, 4), dupe_factor=2)
  examples = pretraining_data.read_examples(out)
  sep_id = tokenizer.vocab["[SEP]"]
  labels = []
  for ex in examples:
    length = int(ex["input_mask"].sum())
    assert list(ex["input_mask"]) == [1] * length + [0] * (64 - length)
    assert not ex["input_ids"][length:].any() and not ex["segment_ids"][length:].any()
    seg = ex["segment_ids"][:length]
    first_sep = int(np.sum(seg == 0)) - 1
    # 0 for [CLS] A [SEP], then 1 for B [SEP]; A and B non-empty.
    assert list(seg) == [0] * (first_sep + 1) + [1] * (length - first_sep - 1)
    assert first_sep >= 2 and length - first_sep - 2 >= 1
    assert original_tokens(ex)[first_sep] == sep_id
    k = int(ex["masked_lm_weights"].sum())
    assert list(ex["masked_lm_weights"]) == [1.0] * k + [0.0] * (10 - k)
    assert not ex["masked_lm_positions"][k:].any() and not ex["masked_lm_ids"][k:].any()
    labels.append(int(ex["next_sentence_labels"][0]))
  # 50% random plus the one-segment chunks (always random), as in the official script.
  assert 0.47 < np.mean(labels) < 0.62
  assert abs(summary["nsp_random_fraction"] - np.mean(labels)) < 1e-9


def test_tfrecord_spec_and_official_parser(tmp_path, tokenizer):
  out, _ = run(tmp_path, tokenizer, make_text(20, 5), dupe_factor=1)
  record = next(iter(tf.data.TFRecordDataset(out))).numpy()
  example = tf.train.Example.FromString(record)
  feats = example.features.feature
  assert sorted(feats.keys()) == sorted(pretraining_data.FEATURE_NAMES)
  lengths = {"input_ids": 64, "input_mask": 64, "segment_ids": 64, "masked_lm_positions": 10,
             "masked_lm_ids": 10, "masked_lm_weights": 10, "next_sentence_labels": 1}
  for name, n in lengths.items():
    kind = "float_list" if name == "masked_lm_weights" else "int64_list"
    assert feats[name].WhichOneof("kind") == kind
    assert len(getattr(feats[name], kind).value) == n
  # The parsing spec of the official run_pretraining.py input_fn_builder.
  spec = {name: tf.io.FixedLenFeature([n], tf.float32 if name == "masked_lm_weights" else tf.int64)
          for name, n in lengths.items()}
  dataset = tf.data.TFRecordDataset(out).map(lambda r: tf.io.parse_single_example(r, spec))
  count = sum(1 for _ in dataset)
  assert count == len(pretraining_data.read_examples(out))


def test_serializer_equals_tf_example():
  rng = np.random.default_rng(0)
  n, seq, pred = 6, 16, 5
  ids = rng.integers(0, 1 << 30, (n, seq))  # multi-byte varints up to 5 bytes
  ids[0] = 0
  mask = rng.integers(0, 2, (n, seq))
  seg = rng.integers(0, 2, (n, seq))
  pos = rng.integers(0, 300, (n, pred))
  mids = rng.integers(0, 30522, (n, pred))
  w = rng.integers(0, 2, (n, pred)).astype(np.float32)
  nsl = rng.integers(0, 2, n)
  records = pretraining_data.ExampleSerializer().serialize_batch(ids, mask, seg, pos, mids, w, nsl)
  for i, record in enumerate(records):
    def ints(v):
      return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))
    expected = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": ints(ids[i]), "input_mask": ints(mask[i]), "segment_ids": ints(seg[i]),
        "masked_lm_positions": ints(pos[i]), "masked_lm_ids": ints(mids[i]),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=list(w[i]))),
        "next_sentence_labels": ints([nsl[i]])}))
    assert tf.train.Example.FromString(record) == expected
    assert len(record) == len(expected.SerializeToString())


def test_determinism_and_worker_independence(tmp_path, tokenizer):
  text = make_text(300, 6)
  kw = dict(dupe_factor=2, chunk_mb=0.004, shuffle_buffer=500)  # several chunks
  a, sa = run(tmp_path, tokenizer, text, name="a.tfrecord", **kw)
  b, _ = run(tmp_path, tokenizer, text, name="b.tfrecord", **kw)
  c, _ = run(tmp_path, tokenizer, text, name="c.tfrecord", num_workers=2, **kw)
  d, _ = run(tmp_path, tokenizer, text, name="d.tfrecord", random_seed=8, **kw)
  data = [open(p, "rb").read() for p in (a, b, c, d)]
  assert data[0] == data[1] == data[2]
  assert data[0] != data[3]
  assert sa["instances"] > 500


# ----------------------------------------------------------------------------------------------
# Bad input, edge cases, atomic output, summary, CLI.
# ----------------------------------------------------------------------------------------------


def test_undecodable_bytes_counted_not_fatal(tmp_path, tokenizer):
  text = make_text(10, 7).encode("utf-8")
  bad = b"caf\xe9 au lait \xff\xfe here.\nthe sea \xc3 was.\n"
  legit = "a real replacement char \ufffd stays.\n".encode("utf-8")  # not counted
  out, summary = run(tmp_path, tokenizer, text + b"\n" + bad + legit + b"\n" + text)
  assert summary["lines_with_undecodable_bytes"] == 2
  assert summary["instances"] == len(pretraining_data.read_examples(out)) > 0
  assert summary["documents"] == 21


def test_empty_and_one_sentence_documents(tmp_path, tokenizer):
  out, summary = run(tmp_path, tokenizer, b"", name="empty.tfrecord")
  assert summary["instances"] == 0 and summary["documents"] == 0
  assert os.path.exists(out) and pretraining_data.read_examples(out) == []
  # Blank-only lines, control-only lines (no tokens), and one-line documents.
  text = "\n\n   \n" + "\x07\x08\n\n" + "\n\n".join("the whale %d said." % i for i in range(40))
  out, summary = run(tmp_path, tokenizer, text, name="one.tfrecord", dupe_factor=2)
  assert summary["documents"] == 40 and summary["one_sentence_documents"] == 40
  assert summary["empty_documents_skipped"] == 1
  examples = pretraining_data.read_examples(out)
  # As in the official script, a one-segment chunk gets a random B.
  assert len(examples) == 80 and all(ex["next_sentence_labels"][0] == 1 for ex in examples)


def test_very_long_line_and_chunking(tmp_path, tokenizer):
  long_line = " ".join(["lighthouse"] * 20000) + "\n"
  text = make_text(5, 8) + "\n" + long_line + "\n" + make_text(5, 9)
  out, summary = run(tmp_path, tokenizer, text, dupe_factor=1, chunk_mb=0.001)
  assert summary["documents"] == 11
  assert all(int(ex["input_mask"].sum()) <= 64 for ex in pretraining_data.read_examples(out))


def test_failure_leaves_no_finished_file(tmp_path, tokenizer):
  inp = tmp_path / "in.txt"
  inp.write_text(make_text(300, 10))
  out = str(tmp_path / "fail.tfrecord")
  with pytest.raises(RuntimeError):
    pretraining_data.create_pretraining_data(
        [str(inp)], [out + "-a", out + "-b"], tokenizer, settings(), chunk_mb=0.004,
        log_fn=lambda s: None, summary_path=out + ".summary.json", _fail_after_chunks=2)
  assert os.listdir(tmp_path) == ["in.txt"]


def test_summary_json(tmp_path, tokenizer):
  text = make_text(60, 11)
  out, summary = run(tmp_path, tokenizer, text, dupe_factor=2)
  with open(cpd.summary_path_for(out)) as f:
    saved = json.load(f)
  assert saved == json.loads(json.dumps(summary))
  nonblank = [l for l in text.split("\n") if l.strip()]
  assert saved["documents"] == 60 and saved["lines"] == len(nonblank)
  assert saved["input_tokens"] == sum(len(tokenizer.tokenize(l)) for l in nonblank)
  assert saved["instances"] == len(pretraining_data.read_examples(out))
  assert saved["settings"]["dupe_factor"] == 2 and saved["settings"]["max_seq_length"] == 64
  for key in ("masked_fraction", "nsp_random_fraction", "elapsed_s", "mb_per_s",
              "lines_with_undecodable_bytes", "empty_documents_skipped", "one_sentence_documents",
              "tokens", "masked_kind_fractions"):
    assert key in saved
  assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


def test_shared_sample(tmp_path, tokenizer):
  sample = shared_path("sample_1mb.txt")
  out = str(tmp_path / "sample.tfrecord")
  summary = pretraining_data.create_pretraining_data([sample], [out], tokenizer, settings(
      max_seq_length=128, max_predictions_per_seq=20, dupe_factor=1), log_fn=lambda s: None)
  assert summary["documents"] == 616 and summary["lines_with_undecodable_bytes"] == 0
  assert 0.145 < summary["masked_fraction"] < 0.16
  assert 0.5 < summary["nsp_random_fraction"] < 0.6
  assert abs(summary["masked_kind_fractions"]["mask"] - 0.8) < 0.01


# CLI (subprocesses: each pays the TensorFlow import).


def test_cli_sharded_output(tmp_path, vocab_file):
  for i in range(2):
    (tmp_path / ("in%d.txt" % i)).write_text(make_text(40, 20 + i))
  out = str(tmp_path / "out" / "data.tfrecord")
  run_tool(SCRIPT, ["--input_file=%s/in*.txt" % tmp_path, "--output_file=" + out,
                    "--vocab_file=" + vocab_file, "--max_seq_length=64",
                    "--max_predictions_per_seq=10", "--dupe_factor=2", "--num_output_shards=3",
                    "--num_workers=2"], timeout=120)
  shards = sorted(glob.glob(out + "-*"))
  assert [os.path.basename(s) for s in shards] == [
      "data.tfrecord-%05d-of-00003" % i for i in range(3)]
  counts = [len(pretraining_data.read_examples(s)) for s in shards]
  # The summary is out/data.summary.json: `--input_file=<output_file>*` never picks it up.
  assert sorted(glob.glob(out + "*")) == shards
  with open(str(tmp_path / "out" / "data.summary.json")) as f:
    summary = json.load(f)
  assert sum(counts) == summary["instances"] and max(counts) - min(counts) <= 1
  assert summary["documents"] == 80
  assert not [n for n in os.listdir(tmp_path / "out") if ".tmp-" in n]


def test_cli_bad_inputs_one_line_exit_2(tmp_path, vocab_file):
  (tmp_path / "in.txt").write_text("hello there.\n")
  r = run_tool(SCRIPT, ["--input_file=%s/in.txt" % tmp_path, "--output_file=%s/o" % tmp_path,
                        "--vocab_file=%s/missing_vocab.txt" % tmp_path], expect_rc=2, timeout=120)
  assert last_error_line(r).startswith("error: --vocab_file=")
  assert "Traceback" not in r.stderr
  r = run_tool(SCRIPT, ["--input_file=%s/nothing*.txt" % tmp_path,
                        "--output_file=%s/o" % tmp_path, "--vocab_file=" + vocab_file],
               expect_rc=2, timeout=120)
  assert "matches no file" in last_error_line(r) and "Traceback" not in r.stderr
  assert not os.path.exists(str(tmp_path / "o"))


def test_lengths_bounded_by_the_position_table(tmp_path):
  assert cpd.check_lengths(512, 20) is None
  with pytest.raises(common.UsageError, match="^--max_seq_length=513: longer than the 512 "):
    cpd.check_lengths(513, 20)
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps(dict(TINY_BERT_CONFIG, max_position_embeddings=1024)))
  assert cpd.check_lengths(1024, 20, str(config)).max_position_embeddings == 1024
  with pytest.raises(common.UsageError, match="^--max_seq_length=1025 is longer than "
                     "max_position_embeddings=1024 in "):
    cpd.check_lengths(1025, 20, str(config))
  with pytest.raises(common.UsageError, match=r"^--max_predictions_per_seq=65: must be <= "
                     "--max_seq_length=64$"):
    cpd.check_lengths(64, 65)


def test_cli_huge_lengths_refused_in_one_line_before_any_work(tmp_path, vocab_file):
  # Before, --max_seq_length=100000000 grew to GBs over many minutes (each example is padded).
  # (--max_predictions_per_seq: test_lengths_bounded_by_the_position_table.)
  (tmp_path / "in.txt").write_text(make_text(20, 40))
  out_dir = tmp_path / "out"
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps(TINY_BERT_CONFIG))  # 64 positions, 30,522 ids
  small_vocab = tmp_path / "small_config.json"
  small_vocab.write_text(json.dumps(dict(TINY_BERT_CONFIG, vocab_size=1000)))
  base = ["--input_file=%s/in.txt" % tmp_path, "--output_file=%s/o.tfrecord" % out_dir,
          "--vocab_file=" + vocab_file]
  cases = [
      (["--max_seq_length=100000000"],
       "error: --max_seq_length=100000000: longer than the 512 positions of the official BERT "
       "configs; pass --bert_config_file=<the model's config> to allow up to its "
       "max_position_embeddings"),
      (["--max_seq_length=65", "--bert_config_file=%s" % config],
       "error: --max_seq_length=65 is longer than max_position_embeddings=64 in %s" % config),
      (["--max_seq_length=64", "--bert_config_file=%s" % small_vocab],
       "error: vocab file %s: has ids up to 30521 but vocab_size=1000 in --bert_config_file=%s; "
       "use the vocab the model was trained with" % (vocab_file, small_vocab)),
  ]
  for args, line in cases:
    start = time.time()
    r = run_tool(SCRIPT, base + args, expect_rc=2, timeout=60)
    assert last_error_line(r) == line
    assert "Traceback" not in r.stderr and time.time() - start < 45
    assert not out_dir.exists()


def test_cli_directory_input_is_one_line(tmp_path, vocab_file):
  (tmp_path / "corpus").mkdir()
  (tmp_path / "corpus" / "a.txt").write_text(make_text(20, 41))
  (tmp_path / "corpus" / "more").mkdir()
  base = ["--output_file=%s/o.tfrecord" % tmp_path, "--vocab_file=" + vocab_file]
  r = run_tool(SCRIPT, base + ["--input_file=%s/corpus" % tmp_path], expect_rc=2, timeout=120)
  assert last_error_line(r) == ("error: --input_file=%s/corpus: is a directory (give files or a "
                                "glob like %s/corpus/*)" % (tmp_path, tmp_path))
  assert "Traceback" not in r.stderr
  # A glob that matches a directory among the files: named too.
  r = run_tool(SCRIPT, base + ["--input_file=%s/corpus/*" % tmp_path], expect_rc=2, timeout=120)
  assert last_error_line(r) == (
      "error: --input_file=%s/corpus/*: matches the directory %s/corpus/more (give files or a "
      "glob like %s/corpus/more/*)" % (tmp_path, tmp_path, tmp_path))
  assert sorted(os.listdir(tmp_path)) == ["corpus"]


# ----------------------------------------------------------------------------------------------
# Input policy (shared with build_vocab.py): gzip, undecodable share, over-long lines.
# ----------------------------------------------------------------------------------------------


def ref_cut_line(text, limit):
  """Reference on str: cut at the last space/tab within limit + 1 characters, else hard cut."""
  pieces = []
  while len(text) > limit:
    window = text[:limit + 1]
    space = max(window.rfind(" "), window.rfind("\t"))
    if space > 0:
      pieces.append(text[:space])
      text = text[space + 1:]
    else:
      pieces.append(text[:limit])
      text = text[limit:]
  return pieces + [text]


def test_cut_long_line_matches_reference():
  rng = random.Random(0)
  words = ["a", "bb", "ccc", "\u00e9t\u00e9", "\u65e5\u672c\u8a9e", "x" * 30, "\U0001f600"]
  for _ in range(300):
    sep = rng.choice([" ", "\t", ""])
    text = sep.join(rng.choice(words) for _ in range(rng.randint(0, 200)))
    limit = rng.randint(1, 50)
    pieces, rest = text_input._cut_long_line(text.encode("utf-8"), limit)
    assert [p.decode("utf-8") for p in pieces + [rest]] == ref_cut_line(text, limit)


def test_reader_streams_long_line_in_pieces(tmp_path):
  # One 3 MB line without any newline: before the fix it was held (and tokenized) whole.
  text = " ".join("w%d" % (i % 997) for i in range(700000))
  path = tmp_path / "long.txt"
  path.write_text(text)
  reader = cpd.TextReader(max_line_chars=100000, read_block=1 << 16)
  lines = reader.read_lines(str(path))
  first = next(lines)
  # The first piece comes out long before the line ends: memory does not grow with the line.
  assert reader.disk_bytes_done < len(text) // 10
  pieces = [first] + list(lines)
  assert [p.rstrip(b"\n").decode() for p in pieces] == ref_cut_line(text, 100000)
  assert all(p.endswith(b"\n") for p in pieces[:-1]) and not pieces[-1].endswith(b"\n")
  assert reader.stats["long_lines_split"] == 1
  # 3,417,xxx characters: 35 pieces just under 100,000 characters each.
  assert reader.stats["long_line_pieces"] == len(pieces) == 35 == len(text) // 100000 + 1
  # Default limit (1M characters): split as well.
  assert len(list(cpd.TextReader(read_block=1 << 20).read_lines(str(path)))) == 4


def test_long_line_split_in_pipeline(tmp_path, tokenizer):
  long_line = " ".join(["lighthouse"] * 3000)  # 32999 characters
  text = make_text(5, 8) + "\n" + long_line + "\n" + make_text(5, 9)
  out, summary = run(tmp_path, tokenizer, text, dupe_factor=1, max_line_chars=5000)
  assert summary["long_lines_split"] == 1
  assert summary["long_line_pieces"] == len(ref_cut_line(long_line, 5000)) == 7
  nonblank = [l for l in text.split("\n") if l.strip()]
  assert summary["lines"] == len(nonblank) - 1 + 7
  # The long line and the first document after it form one document (no blank line between).
  assert summary["documents"] == 10
  assert summary["instances"] == len(pretraining_data.read_examples(out))


def test_gzip_input_same_output_as_plain(tmp_path, tokenizer):
  text = make_text(120, 12).encode("utf-8")
  plain, gz = tmp_path / "c.txt", tmp_path / "c.txt.gz"
  plain.write_bytes(text)
  gz.write_bytes(gzip.compress(text))
  outputs = []
  for name, inp in (("p.tfrecord", plain), ("g.tfrecord", gz)):
    out = str(tmp_path / name)
    summary = pretraining_data.create_pretraining_data(
        [str(inp)], [out], tokenizer, settings(dupe_factor=2), chunk_mb=0.004,
        log_fn=lambda s: None)
    outputs.append((open(out, "rb").read(), summary))
  (plain_bytes, plain_summary), (gz_bytes, gz_summary) = outputs
  assert gz_bytes == plain_bytes and gz_summary["instances"] == plain_summary["instances"] > 100
  assert gz_summary["input_bytes"] == plain_summary["input_bytes"]
  assert gz_summary["undecodable_bytes"] == 0


@pytest.mark.parametrize("kind", ["random", "gzip_of_random", "bzip2", "corrupt_gzip"])
def test_undecodable_input_refused(tmp_path, tokenizer, kind):
  rng = np.random.default_rng(1)
  garbage = rng.integers(0, 256, 300000, dtype=np.uint8).tobytes()
  data = {"random": garbage,
          "gzip_of_random": gzip.compress(garbage + garbage * 4),  # 1.5 MB once decompressed
          "bzip2": bz2.compress(make_text(300, 13).encode()),
          "corrupt_gzip": gzip.compress(make_text(50, 14).encode())[:-30]}[kind]
  inp = tmp_path / ("in." + kind)
  inp.write_bytes(data)
  out = str(tmp_path / "o.tfrecord")
  # Before the fix: rc 0 and instances made of replacement characters.
  with pytest.raises(common.UsageError) as e:
    pretraining_data.create_pretraining_data([str(inp)], [out], tokenizer, settings(),
                                             log_fn=lambda s: None,
                                             summary_path=cpd.summary_path_for(out))
  message = str(e.value)
  assert message.startswith("--input_file: %s: " % inp) and "\n" not in message
  if kind == "corrupt_gzip":
    assert "not a readable gzip file" in message
  else:
    assert "of its" in message and "--max_bad_fraction=0.01" in message
    share = float(message.split("%")[0].split()[-1])
    assert 15.0 < share <= 100.0
  assert os.listdir(tmp_path) == [inp.name]


def test_binary_file_fails_early(tmp_path):
  path = tmp_path / "big.bin"
  path.write_bytes(np.random.default_rng(2).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes())
  reader = cpd.TextReader(read_block=1 << 14)
  with pytest.raises(common.UsageError, match=r": at least \d+\.\d% of its 1048576 bytes"):
    for _ in reader.read_lines(str(path)):
      pass
  # It stopped once the share was sure to exceed 1%, long before the end of the file.
  assert reader.disk_bytes_done <= 1 << 16


def test_bad_fraction_threshold(tmp_path, tokenizer):
  text = b"the sea was calm today.\n" * 120 + b"\n" + b"the ship sailed on.\n" * 80
  bad_line = b"caf\xe9 \xff\xfe au lait.\n"  # 3 undecodable bytes
  data = text + b"\n" + bad_line * 40
  bad_share = 120 / len(data)
  assert 0.01 < bad_share < 0.05
  inp = tmp_path / "in.txt"
  inp.write_bytes(data)
  out = str(tmp_path / "o.tfrecord")
  with pytest.raises(common.UsageError, match=r"^--input_file: %s: %.1f%% of its %d bytes \(120\)"
                     % (inp, 100 * bad_share, len(data))):
    pretraining_data.create_pretraining_data([str(inp)], [out], tokenizer, settings(),
                                             log_fn=lambda s: None)
  summary = pretraining_data.create_pretraining_data([str(inp)], [out], tokenizer, settings(),
                                                     log_fn=lambda s: None, max_bad_fraction=0.05)
  assert summary["undecodable_bytes"] == 120 and summary["lines_with_undecodable_bytes"] == 40


# ----------------------------------------------------------------------------------------------
# Outputs vs inputs, earlier outputs among the inputs, summary name, temporaries.
# ----------------------------------------------------------------------------------------------


def test_non_text_inputs_refused(tmp_path, tokenizer, vocab_file):
  text = tmp_path / "corpus.txt"
  text.write_text(make_text(30, 16))
  out, _ = run(tmp_path, tokenizer, make_text(30, 16), name="old.tfrecord")
  summary = cpd.summary_path_for(out)
  braces = tmp_path / "braces.txt"
  braces.write_text('{"instances": 3}\nnot json at all\n')
  cpd.check_text_inputs([str(text), str(braces)])  # text passes
  for path, kind in ((out, "a TFRecord file"), (summary, "a summary JSON"),
                     (vocab_file, "a BERT vocab file")):
    with pytest.raises(common.UsageError) as e:
      cpd.check_text_inputs([str(text), path])
    assert str(e.value).startswith("--input_file: %s is %s" % (path, kind))
  # TFRecord framing check vs TF's own writer, and no false positive on text.
  tf_path = str(tmp_path / "tf.rec")
  with tf.io.TFRecordWriter(tf_path) as w:
    w.write(b"x" * 300)
  assert cpd.non_text_kind(tf_path).startswith("a TFRecord")
  rng = random.Random(0)
  for i in range(200):
    (tmp_path / "t.txt").write_bytes(bytes(rng.randrange(256) for _ in range(16)))
    assert cpd.non_text_kind(str(tmp_path / "t.txt")) is None


def test_outputs_not_inputs(tmp_path):
  corpus = tmp_path / "data" / "a.txt"
  corpus.parent.mkdir()
  corpus.write_text("x\n")
  inputs = [str(corpus)]
  ok = str(tmp_path / "out" / "a.tfrecord")
  cpd.check_outputs_not_inputs([ok], str(tmp_path / "data" / "*.txt"), inputs)
  cases = [([str(corpus)], str(corpus), "is also an input"),
           ([str(tmp_path / "data" / "b.txt")], str(tmp_path / "data" / "*.txt"), "matches"),
           ([str(tmp_path / "data" / "x.tfrecord")], str(tmp_path / "data" / "*"), "matches"),
           ([str(tmp_path / "data" / ".." / "data" / "a.txt")], str(corpus), "also an input")]
  for outputs, patterns, expected in cases:
    with pytest.raises(common.UsageError, match="^--output_file=.*" + expected):
      cpd.check_outputs_not_inputs(outputs, patterns, inputs)
  with pytest.raises(common.UsageError, match="is also an input"):
    cpd.check_outputs_not_inputs([str(tmp_path / "v.txt")], str(corpus), inputs,
                                 [str(tmp_path / "v.txt")])
  # "*" does not cross "/": a file in a sub-directory is not matched.
  assert not cpd.matches_pattern(str(tmp_path / "data" / "sub" / "b.txt"),
                                 str(tmp_path / "data" / "*.txt"))


@pytest.mark.parametrize("names", ["x.tfrecord", "x", "x.s", "summ", "summary-x", "_x,s",
                                   "d/x.tfrecord,d/x.tfrecord2"])
def test_summary_never_matched_by_output_glob(tmp_path, names):
  outputs = [str(tmp_path / n) for n in names.split(",")]
  summary = cpd.summary_path_for(",".join(outputs))
  assert os.path.dirname(summary) == os.path.dirname(outputs[0])
  os.makedirs(os.path.dirname(summary), exist_ok=True)
  for path in outputs + [summary] + pretraining_data.output_paths(outputs[0], 3):
    open(path, "w").close()
  for path in outputs:
    assert summary not in glob.glob(path + "*")
  if names == "x.tfrecord":
    assert summary == str(tmp_path / "x.summary.json")


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait(timeout=60)
  return proc.pid


def test_temporaries_hidden_and_stale_ones_removed(tmp_path):
  out = str(tmp_path / "x.tfrecord")
  shards = pretraining_data.output_paths(out, 2)
  writer = pretraining_data.ShardWriter(shards, 0, 1)
  writer.add(b"record")
  # While writing: nothing matches the README's glob NAME-* (nor NAME*).
  assert glob.glob(out + "*") == []
  temps = os.listdir(tmp_path)
  assert len(temps) == 2 and all(n.startswith(".") and common.is_temp_path(n) for n in temps)
  writer.abort()
  assert os.listdir(tmp_path) == []
  # Left by killed runs: hidden and old visible temporaries, other shard counts, old summary.
  dead = _dead_pid()
  stale = [".x.tfrecord-00001-of-00002.tmp-%d" % dead, "x.tfrecord-00000-of-00002.tmp-%d" % dead,
           "x.tfrecord-00003-of-00004.tmp-%d" % dead, ".x.summary.json.tmp-%d" % dead]
  keep = ["x.tfrecord-00003-of-00004.tmp-%d" % os.getppid(), "other.txt.tmp-%d" % dead,
          "x.tfrecord-00000-of-00002"]
  for name in stale + keep:
    (tmp_path / name).write_text("partial")
  (tmp_path / "x.tfrecord.summary.json").write_text(json.dumps(
      {"instances": 1, "input_files": [], "output_files": [], "settings": {}}))
  removed = pretraining_data.remove_stale_outputs([out], shards, cpd.summary_path_for(out),
                                                  log_fn=lambda s: 0)
  assert sorted(os.path.basename(p) for p in removed) == sorted(
      stale + ["x.tfrecord.summary.json"])
  assert sorted(os.listdir(tmp_path)) == sorted(keep)


def test_case_mismatch_and_duplicate_vocab_refused(tmp_path, vocab_file):
  # Before the fix: --do_lower_case=False with the uncased vocab was accepted (8.8% [UNK]).
  with pytest.raises(common.UsageError, match="^--do_lower_case=False: vocab .* no upper-case"):
    pretraining_data.make_tokenizer(vocab_file, False)
  tok = pretraining_data.make_tokenizer(vocab_file, True)
  assert tok.tokenize("The Lighthouse") == ["the", "lighthouse"]
  dup = tmp_path / "dup_vocab.txt"
  dup.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nsea\nthe\n")
  with pytest.raises(common.UsageError, match="'the' is on line 6 and again on line 8"):
    pretraining_data.make_tokenizer(str(dup), True)


# CLI: refusals before anything is written, signals, kill and rerun.


def test_cli_output_is_input_refused(tmp_path, vocab_file):
  corpus = tmp_path / "corpus.txt"
  text = make_text(20, 17)
  corpus.write_text(text)
  # Before the fix the corpus was replaced by TFRecords.
  r = run_tool(SCRIPT, ["--input_file=%s" % corpus, "--output_file=%s" % corpus,
                        "--vocab_file=" + vocab_file], expect_rc=2, timeout=120)
  assert "Traceback" not in r.stderr
  assert last_error_line(r) == (
      "error: --output_file=%s: is also an input; writing it would replace that input" % corpus)
  assert corpus.read_text() == text and os.listdir(tmp_path) == ["corpus.txt"]
  # --do_lower_case=False with the uncased vocab.
  r = run_tool(SCRIPT, ["--input_file=%s" % corpus, "--output_file=%s/o.tfrecord" % tmp_path,
                        "--vocab_file=" + vocab_file, "--do_lower_case=false"],
               expect_rc=2, timeout=120)
  assert last_error_line(r).startswith("error: --do_lower_case=False: vocab ")
  assert os.listdir(tmp_path) == ["corpus.txt"]


def test_cli_glob_with_earlier_output_refused(tmp_path, tokenizer, vocab_file):
  (tmp_path / "in").mkdir()
  (tmp_path / "in" / "a.txt").write_text(make_text(20, 18))
  out = str(tmp_path / "in" / "old.tfrecord-00001-of-00002")
  pretraining_data.create_pretraining_data([str(tmp_path / "in" / "a.txt")], [out], tokenizer,
                                           settings(), log_fn=lambda s: None)
  r = run_tool(SCRIPT, ["--input_file=%s/in/*" % tmp_path,
                        "--output_file=%s/new.tfrecord" % tmp_path, "--vocab_file=" + vocab_file],
               expect_rc=2, timeout=120)
  assert "Traceback" not in r.stderr
  last = last_error_line(r)
  assert last.startswith("error: --input_file: %s is a TFRecord file" % out), last
  assert not os.path.exists(str(tmp_path / "new.tfrecord"))


def _children(pid):
  """Pids of the live child processes of `pid` (from /proc)."""
  out = []
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        with open("/proc/%s/stat" % entry) as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if int(fields[1]) == pid and fields[0] != "Z":
        out.append(int(entry))
  return out


def _start_and_wait_for_temps(args, out_dir, timeout=60, **popen_kwargs):
  proc = start_tool(SCRIPT, args, **popen_kwargs)
  deadline = time.time() + timeout
  while time.time() < deadline and proc.poll() is None:
    if any(common.is_temp_path(n) for n in os.listdir(out_dir)):
      return proc
    time.sleep(0.02)
  proc.kill()
  _, err = proc.communicate(timeout=60)
  pytest.fail("the run ended before it could be signalled: %s" % err[-2000:])


def _pids_gone(pids, timeout=10):
  deadline = time.time() + timeout
  while any(process_alive(p) for p in pids):
    if time.time() > deadline:
      return False
    time.sleep(0.1)
  return True


def _wait_for_children(pid, count, timeout=10):
  deadline = time.time() + timeout
  while len(_children(pid)) < count and time.time() < deadline:
    time.sleep(0.05)
  return _children(pid)


@pytest.mark.slow
@pytest.mark.parametrize("sig,workers,to_group", [(signal.SIGTERM, 2, False),
                                                 (signal.SIGINT, 1, False),
                                                 (signal.SIGINT, 2, True)])
def test_cli_signal_stops_cleanly(tmp_path, vocab_file, sig, workers, to_group):
  (tmp_path / "big.txt").write_text(make_text(4000, 30) * 2)
  out_dir = tmp_path / "out"
  out_dir.mkdir()
  out = str(out_dir / "s.tfrecord")
  # to_group: Ctrl-C in a terminal signals the tool and its workers together.
  proc = _start_and_wait_for_temps(
      ["--input_file=%s/big.txt" % tmp_path, "--output_file=" + out, "--num_output_shards=2",
       "--vocab_file=" + vocab_file, "--dupe_factor=10", "--num_workers=%d" % workers], out_dir,
      start_new_session=to_group)
  workers_pids = _wait_for_children(proc.pid, workers if workers > 1 else 0)
  time.sleep(0.3)
  if to_group:
    os.killpg(proc.pid, sig)
  else:
    proc.send_signal(sig)
  try:
    _, stderr = proc.communicate(timeout=60)
  except subprocess.TimeoutExpired:
    proc.kill()
    raise
  assert proc.returncode == 128 + sig, stderr[-2000:]
  assert "interrupted (signal %d)" % sig in stderr
  assert os.listdir(out_dir) == []  # no output, no temporary
  assert len(workers_pids) == (workers if workers > 1 else 0)
  assert _pids_gone(workers_pids)


@pytest.mark.slow
def test_cli_kill_then_rerun_is_identical(tmp_path, tokenizer, vocab_file):
  text = make_text(2500, 31)
  (tmp_path / "in.txt").write_text(text)
  out_dir = tmp_path / "out"
  out_dir.mkdir()
  out = str(out_dir / "k.tfrecord")
  flags_ = ["--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=8",
            "--random_seed=7", "--chunk_mb=0.05", "--num_output_shards=2"]
  args = ["--input_file=%s/in.txt" % tmp_path, "--output_file=" + out,
          "--vocab_file=" + vocab_file] + flags_
  proc = _start_and_wait_for_temps(args + ["--num_workers=2"], out_dir)
  workers_pids = _wait_for_children(proc.pid, 2)
  assert len(workers_pids) == 2
  time.sleep(0.1)
  proc.send_signal(signal.SIGKILL)
  proc.wait(timeout=60)
  assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
  temps = [n for n in os.listdir(out_dir) if common.is_temp_path(n)]
  assert temps and all(n.startswith(".") for n in temps), os.listdir(out_dir)
  # What the README's glob picks up after the kill: nothing (the temporaries are hidden).
  assert glob.glob(out + "-*") == []
  assert _pids_gone(workers_pids), "workers outlived the killed main process"
  r = run_tool(SCRIPT, args + ["--num_workers=1"], timeout=120)
  assert "left by an earlier run" in r.stderr
  assert sorted(os.listdir(out_dir)) == ["k.summary.json", "k.tfrecord-00000-of-00002",
                                         "k.tfrecord-00001-of-00002"]
  # Same bytes as an uninterrupted run with the same settings (made in-process).
  ref = str(tmp_path / "ref.tfrecord")
  pretraining_data.create_pretraining_data(
      [str(tmp_path / "in.txt")], pretraining_data.output_paths(ref, 2), tokenizer,
      settings(dupe_factor=8), chunk_mb=0.05, log_fn=lambda s: None)
  for i in range(2):
    with open(pretraining_data.output_paths(out, 2)[i], "rb") as a, \
        open(pretraining_data.output_paths(ref, 2)[i], "rb") as b:
      assert a.read() == b.read()


@pytest.mark.slow
def test_cli_killed_worker_stops_the_run_in_one_line(tmp_path, vocab_file):
  # What the out-of-memory killer does to a worker. Before, multiprocessing.Pool started a
  # replacement and the run waited for ever for the lost chunk.
  (tmp_path / "big.txt").write_text(make_text(4000, 32) * 2)
  out_dir = tmp_path / "out"
  out_dir.mkdir()
  proc = _start_and_wait_for_temps(
      ["--input_file=%s/big.txt" % tmp_path, "--output_file=%s/k.tfrecord" % out_dir,
       "--vocab_file=" + vocab_file, "--dupe_factor=40", "--num_workers=2"], out_dir)
  workers_pids = _wait_for_children(proc.pid, 2)
  assert len(workers_pids) == 2
  os.kill(workers_pids[0], signal.SIGKILL)
  try:
    _, stderr = proc.communicate(timeout=30)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.communicate(timeout=60)
    pytest.fail("the run still waited 30 s after a worker was killed")
  assert proc.returncode == 1, stderr[-2000:]
  last = [line for line in stderr.splitlines() if line.strip()][-1]
  assert re.match(
      r"error: worker process %d died \(signal 9, SIGKILL: out of memory\?\) "
      r"(while processing|before handing back) chunk \d+ of --input_file=%s; nothing was written "
      r"\(the temporary files were removed\); rerun, or use --num_workers=1 or a smaller "
      r"--chunk_mb$" % (
          workers_pids[0], re.escape("%s/big.txt" % tmp_path)), last), last
  assert "Traceback" not in stderr
  assert os.listdir(out_dir) == []  # no output, no temporary
  assert _pids_gone(workers_pids), "a worker outlived the run"


# The pool on its own (task functions of this module run in forked workers).


def _reverse_delay(x):
  time.sleep(0.02 * (6 - x))
  return x * x


def _killed_on_3(x):
  if x == 3:
    os.kill(os.getpid(), signal.SIGKILL)
  time.sleep(0.2)
  return x


def _refused_on_2(x):
  if x == 2:
    common.fail("task %d: refused" % x)
  return x


def _sleep(x):
  time.sleep(30)
  return x


def _unpicklable(x):
  return lambda: x


def test_pool_results_in_order_with_bounded_tasks_out():
  pool = ordered_pool.OrderedPool(2, _reverse_delay)
  read = []

  def tasks():
    for i in range(7):
      read.append(i)
      yield i

  try:
    got = []
    for result in pool.imap(tasks(), max_in_flight=3):
      got.append(result)
      assert len(read) - len(got) <= 2  # at most 3 out, the one just handed back included
    assert got == [i * i for i in range(7)]
  finally:
    pool.close()


def test_pool_worker_killed_is_an_error_naming_it_and_its_task():
  pool = ordered_pool.OrderedPool(2, _killed_on_3)
  pids = pool.pids
  start = time.time()
  try:
    with pytest.raises(ordered_pool.WorkerDied) as died:
      list(pool.imap(range(8), max_in_flight=4))
  finally:
    pool.close()
  assert time.time() - start < 10
  assert died.value.pid in pids and died.value.exitcode == -signal.SIGKILL
  assert died.value.task_number == 3
  assert str(died.value) == ("worker process %d died (signal 9, SIGKILL: out of memory?) while "
                             "processing task 3" % died.value.pid)
  assert not any(process_alive(pid) for pid in pids)


def _half_second(x):
  time.sleep(0.5)
  return x


def test_pool_worker_killed_from_outside_names_the_task_it_ran():
  pool = ordered_pool.OrderedPool(1, _half_second)
  results = pool.imap(range(4), max_in_flight=2)
  try:
    assert next(results) == 0
    time.sleep(0.2)  # well inside task 1
    os.kill(pool.pids[0], signal.SIGKILL)
    with pytest.raises(ordered_pool.WorkerDied) as died:
      next(results)
  finally:
    pool.close()
  assert died.value.task_number == 1 and died.value.running
  assert died.value.describe("chunk") == (
      "worker process %d died (signal 9, SIGKILL: out of memory?) while processing chunk 1" %
      died.value.pid)
  # The other wordings: a task sent and not answered, no task, an exit status.
  assert ordered_pool.WorkerDied(12, -9, 4, running=False).describe("chunk") == (
      "worker process 12 died (signal 9, SIGKILL: out of memory?) before handing back chunk 4")
  assert ordered_pool.WorkerDied(12, 1, None).describe("chunk") == (
      "worker process 12 exited with status 1 while it held no chunk")
  assert str(ordered_pool.WorkerDied(12, -15, 2)) == (
      "worker process 12 died (signal 15, SIGTERM) while processing task 2")


def test_pool_passes_a_task_error_on_and_stops_on_request():
  pool = ordered_pool.OrderedPool(2, _refused_on_2)
  try:
    with pytest.raises(common.UsageError, match="^task 2: refused$"):
      list(pool.imap(range(5), max_in_flight=2))
  finally:
    pool.close()
  # A result that cannot be sent back is an error too (not a result waited for in vain).
  pool = ordered_pool.OrderedPool(1, _unpicklable)
  try:
    with pytest.raises(AttributeError, match="^Can't pickle local object"):
      list(pool.imap(range(2), max_in_flight=2))
  finally:
    pool.close()
  pool = ordered_pool.OrderedPool(2, _sleep)
  pids = pool.pids
  start = time.time()
  try:
    with pytest.raises(ordered_pool.Stopped):
      list(pool.imap(range(5), max_in_flight=2, should_stop=lambda: True))
  finally:
    pool.close()
  # Polled while waiting; close ends the busy workers at once.
  assert time.time() - start < 10
  assert not any(process_alive(pid) for pid in pids)
