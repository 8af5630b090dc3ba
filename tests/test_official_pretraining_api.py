"""The official create_pretraining_data.py library API, used as a user of the official code uses it.

google-research/bert's create_pretraining_data.py is also a library: TrainingInstance,
create_training_instances, create_instances_from_document, create_masked_lm_predictions,
truncate_seq_pair, write_instance_to_example_files, create_int_feature, create_float_feature.
These tests call them with the official signatures and check them against the official rules:
hand-computed instances on a tiny corpus (with a scripted random generator that also checks the
order of the draws), an independent re-implementation of the official algorithm written here
(the same random.Random(seed) must give exactly the same instances), statistics over the demo
corpus, and the TFRecords read back by hand and by run_pretraining.input_fn_builder.
"""

import glob
import gzip
import logging
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG
import create_pretraining_data
import modeling
import run_pretraining
import tokenization

HELDOUT = os.path.join(REPO_DIR, "data", "demo_corpus", "heldout.txt")
DEMO_TRAIN = os.path.join(REPO_DIR, "data", "demo_corpus", "train.txt")
FEATURES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights", "next_sentence_labels")


@pytest.fixture(scope="module")
def tokenizer():
  vocab_file = os.path.join(REPO_DIR, "data", "vocab.txt")
  return tokenization.FullTokenizer(vocab_file, do_lower_case=True)


@pytest.fixture(scope="module")
def train_text(tmp_path_factory):
  """The 1 MB slice at the top of the demo's train.txt: its first 555 documents."""
  with open(DEMO_TRAIN, encoding="utf-8") as f:
    documents = f.read().split("\n\n")[:555]
  path = tmp_path_factory.mktemp("official_pretraining_api") / "train.txt"
  path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def train_instances(tokenizer, train_text):
  """The official call on ~0.9 MB of real text: about 2,800 instances."""
  rng = random.Random(12345)
  return create_pretraining_data.create_training_instances(
      [train_text], tokenizer, 128, 1, 0.1, 0.15, 20, rng)


def as_tuple(instance):
  return (list(instance.tokens), list(instance.segment_ids), list(instance.masked_lm_positions),
          list(instance.masked_lm_labels), bool(instance.is_random_next))


def original_tokens(instance):
  """The instance's tokens before masking (labels put back at the masked positions)."""
  tokens = list(instance.tokens)
  for position, label in zip(instance.masked_lm_positions, instance.masked_lm_labels):
    tokens[position] = label
  return tokens


# ----------------------------------------------------------------------------------------------
# Reference: the official algorithm re-written here on plain lists, from the official rules.
# ----------------------------------------------------------------------------------------------


def ref_truncate(tokens_a, tokens_b, max_num_tokens, rng):
  # Pop from the longer list (B on ties), front or back with one draw each.
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    if rng.random() < 0.5:
      del longer[0]
    else:
      longer.pop()


def ref_mask(tokens, masked_lm_prob, max_predictions, vocab_words, rng, whole_word):
  groups = []
  for i, token in enumerate(tokens):
    if token in ("[CLS]", "[SEP]"):
      continue
    if whole_word and groups and token.startswith("##"):
      groups[-1].append(i)
    else:
      groups.append([i])
  rng.shuffle(groups)
  wanted = min(max_predictions, max(1, int(round(len(tokens) * masked_lm_prob))))
  output = list(tokens)
  chosen = []
  for group in groups:
    if len(chosen) >= wanted:
      break
    if len(chosen) + len(group) > wanted:
      continue
    for i in group:
      if rng.random() < 0.8:
        output[i] = "[MASK]"
      elif rng.random() >= 0.5:
        output[i] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
      chosen.append(i)
  chosen.sort()
  return output, chosen, [tokens[i] for i in chosen]


def ref_document(docs, index, max_seq_length, short_seq_prob, masked_lm_prob, max_predictions,
                 vocab_words, rng, whole_word):
  doc = docs[index]
  max_num_tokens = max_seq_length - 3
  target = max_num_tokens
  if rng.random() < short_seq_prob:
    target = rng.randint(2, max_num_tokens)
  out = []
  chunk = []
  length = 0
  i = 0
  while i < len(doc):
    chunk.append(doc[i])
    length += len(doc[i])
    if i == len(doc) - 1 or length >= target:
      a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
      tokens_a = sum(chunk[:a_end], [])
      tokens_b = []
      is_random_next = len(chunk) == 1 or rng.random() < 0.5
      if is_random_next:
        for _ in range(10):
          other = rng.randint(0, len(docs) - 1)
          if other != index:
            break
        start = rng.randint(0, len(docs[other]) - 1)
        for segment in docs[other][start:]:
          tokens_b += segment
          if len(tokens_b) >= target - len(tokens_a):
            break
        i -= len(chunk) - a_end
      else:
        tokens_b = sum(chunk[a_end:], [])
      ref_truncate(tokens_a, tokens_b, max_num_tokens, rng)
      tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
      segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
      tokens, positions, labels = ref_mask(tokens, masked_lm_prob, max_predictions, vocab_words,
                                           rng, whole_word)
      out.append((tokens, segment_ids, positions, labels, is_random_next))
      chunk = []
      length = 0
    i += 1
  return out


def ref_training_instances(paths, tokenizer, max_seq_length, dupe_factor, short_seq_prob,
                           masked_lm_prob, max_predictions, rng, whole_word=False):
  docs = [[]]
  for path in paths:
    with open(path, encoding="utf-8", newline="\n") as f:
      for line in f:
        line = line.strip()
        if not line:
          docs.append([])
        elif tokenizer.tokenize(line):
          docs[-1].append(tokenizer.tokenize(line))
  docs = [d for d in docs if d]
  rng.shuffle(docs)
  vocab_words = list(tokenizer.vocab.keys())
  out = []
  for _ in range(dupe_factor):
    for index in range(len(docs)):
      out += ref_document(docs, index, max_seq_length, short_seq_prob, masked_lm_prob,
                          max_predictions, vocab_words, rng, whole_word)
  rng.shuffle(out)
  return out


# ----------------------------------------------------------------------------------------------
# Hand-computed instances: a scripted generator makes every draw known.
# ----------------------------------------------------------------------------------------------


class ScriptedRng(object):
  """random() always `value`, randint(a, b) always a, shuffle keeps the order; logs each draw."""

  def __init__(self, value):
    self.value = value
    self.calls = []

  def random(self):
    self.calls.append("random")
    return self.value

  def randint(self, a, b):
    self.calls.append(("randint", a, b))
    return a

  def shuffle(self, x):
    self.calls.append(("shuffle", len(x)))


# Two documents of one-piece words: segments of 3, 3, 3, 2 tokens, then one of 10.
TINY_DOCS = [["apple river stone", "cloud green house", "table window garden", "paper music"],
             ["silver gold iron copper water fire earth wind rain snow"]]


def write_tiny_corpus(tmp_path, tokenizer):
  for doc in TINY_DOCS:
    for line in doc:
      assert tokenizer.tokenize(line) == line.split()  # every word is one vocab entry
  path = tmp_path / "tiny.txt"
  # A leading blank line and two blank lines between the documents: no empty documents.
  path.write_text("\n" + "\n\n\n".join("\n".join(doc) for doc in TINY_DOCS) + "\n")
  return str(path)


def test_hand_computed_instances_and_draw_order(tmp_path, tokenizer):
  """random() = 0.9: never short, real next B, truncation from the back, masks become random
  words; randint = its lower bound: A is one segment, random words are vocab_words[0]."""
  path = write_tiny_corpus(tmp_path, tokenizer)
  rng = ScriptedRng(0.9)
  instances = create_pretraining_data.create_training_instances(
      [path], tokenizer, 11, 1, 0.1, 0.15, 20, rng)
  pad = list(tokenizer.vocab.keys())[0]
  assert pad == "[PAD]"
  # max_num_tokens = 8, round(11 * 0.15) = 2 predictions: the first two candidates.
  expected = [
      # Doc 1, segments a b c (9 tokens >= 8): A = a, real next B = b c, one pop from B's back.
      ("[CLS] [PAD] [PAD] stone [SEP] cloud green house table window [SEP]".split(),
       [0] * 5 + [1] * 6, [1, 2], ["apple", "river"], False),
      # Segment d ends the document: one segment, so B is random: doc 1 again after 10 tries
      # (randint(0, 1) = 0 is this document), from its first segment until >= 8 - 2 tokens.
      ("[CLS] [PAD] [PAD] [SEP] apple river stone cloud green house [SEP]".split(),
       [0] * 4 + [1] * 7, [1, 2], ["paper", "music"], True),
      # Doc 2: one 10-token segment, random B = doc 1's first segment; 5 pops from A's back.
      ("[CLS] [PAD] [PAD] iron copper water [SEP] apple river stone [SEP]".split(),
       [0] * 7 + [1] * 4, [1, 2], ["silver", "gold"], True),
  ]
  assert [as_tuple(x) for x in instances] == expected

  v = len(tokenizer.vocab)
  mask_two_random_words = [("shuffle", 8)] + ["random", "random", ("randint", 0, v - 1)] * 2
  assert rng.calls == (
      [("shuffle", 2)] +  # the documents
      ["random", ("randint", 1, 2), "random", "random"] + mask_two_random_words +
      [("randint", 0, 1)] * 10 + [("randint", 0, 3)] + mask_two_random_words +
      ["random", ("randint", 0, 1), ("randint", 0, 3)] + ["random"] * 5 +
      mask_two_random_words +
      [("shuffle", 3)])  # the instances


def test_hand_computed_random_next_puts_segments_back(tmp_path, tokenizer):
  """random() = 0.3: B is always random, so the unused segments of a chunk are used again."""
  path = write_tiny_corpus(tmp_path, tokenizer)
  instances = create_pretraining_data.create_training_instances(
      [path], tokenizer, 11, 1, 0.1, 0.15, 20, ScriptedRng(0.3))
  b_random = "apple river stone cloud green house".split()[1:]  # a + b, one pop from the front
  expected_pairs = [
      ("apple river stone".split(), b_random),  # chunk a b c: A = a, b c put back
      ("cloud green house".split(), b_random),  # chunk b c d: A = b, c d put back
      ("table window garden".split(), b_random),  # chunk c d: A = c, d put back
      ("paper music".split(), "apple river stone cloud green house".split()),  # 8 tokens
      ("fire earth wind rain snow".split(), "apple river stone".split()),  # 5 pops from A
  ]
  assert len(instances) == len(expected_pairs)
  for instance, (tokens_a, tokens_b) in zip(instances, expected_pairs):
    assert original_tokens(instance) == ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
    assert instance.segment_ids == [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    assert instance.is_random_next
    # random() = 0.3 < 0.8: the two predictions are [MASK].
    assert instance.masked_lm_positions == [1, 2]
    assert [instance.tokens[1], instance.tokens[2]] == ["[MASK]", "[MASK]"]


def test_whole_word_masking_is_a_keyword_with_the_official_default(tokenizer):
  tokens = ["[CLS]"] + tokenizer.tokenize("unaffable apple") + ["[SEP]", "river", "[SEP]"]
  assert tokens == ["[CLS]", "una", "##ffa", "##ble", "apple", "[SEP]", "river", "[SEP]"]
  vocab_words = list(tokenizer.vocab.keys())

  def positions(**kwargs):
    # round(8 * 0.3) = 2 predictions; the candidates in their order (shuffle keeps it).
    out = create_pretraining_data.create_masked_lm_predictions(
        tokens, 0.3, 20, vocab_words, ScriptedRng(0.3), **kwargs)
    assert out[0] == [("[MASK]" if i in out[1] else t) for i, t in enumerate(tokens)]
    assert out[2] == [tokens[i] for i in out[1]]
    return out[1]

  # Per piece: the first two pieces. Whole words: "unaffable" (3 pieces) does not fit in 2 and
  # is skipped; "apple" and "river" are taken.
  assert positions() == [1, 2]
  assert positions(do_whole_word_mask=False) == [1, 2]
  assert positions(do_whole_word_mask=True) == [4, 6]


def test_truncate_seq_pair_official_rule():
  tokens_a, tokens_b = list("abcdef"), list("xyz")
  values = iter([0.1, 0.9, 0.7, 0.2])  # front, back, back, front
  rng = ScriptedRng(0.0)
  rng.random = lambda: next(values)
  assert create_pretraining_data.truncate_seq_pair(tokens_a, tokens_b, 5, rng) is None
  # (6, 3): A front -> (5, 3): A back -> (4, 3): A back -> (3, 3): tie, B front -> (3, 2).
  assert (tokens_a, tokens_b) == (list("bcd"), list("yz"))
  untouched = list("ab"), list("c")
  create_pretraining_data.truncate_seq_pair(untouched[0], untouched[1], 3, None)
  assert untouched == (list("ab"), list("c"))


def test_training_instance_text():
  instance = create_pretraining_data.TrainingInstance(
      tokens=["[CLS]", "a", "[MASK]", "[SEP]", "b", "[SEP]"], segment_ids=[0, 0, 0, 0, 1, 1],
      masked_lm_positions=[2], masked_lm_labels=["c"], is_random_next=True)
  text = ("tokens: [CLS] a [MASK] [SEP] b [SEP]\nsegment_ids: 0 0 0 0 1 1\n"
          "is_random_next: True\nmasked_lm_positions: 2\nmasked_lm_labels: c\n\n")
  assert str(instance) == text
  assert repr(instance) == text
  masked = create_pretraining_data.MaskedLmInstance(index=3, label="x")
  assert (masked.index, masked.label) == (3, "x")


# ----------------------------------------------------------------------------------------------
# The same instances as the official algorithm for the same seed.
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed,max_seq_length,short_seq_prob,whole_word", [
    (12345, 128, 0.1, False), (7, 64, 0.5, True)])
def test_same_instances_as_official_algorithm(tmp_path, tokenizer, seed, max_seq_length,
                                              short_seq_prob, whole_word):
  # A second file that does not end with a blank line: its last document continues into the
  # next file, as in the official code.
  first = tmp_path / "first.txt"
  first.write_text("Call me Ishmael.\nSome years ago, never mind how long precisely.\n\n"
                   "The sea was calm.\nThe unaffable harpooneer slept.")
  paths = [str(first), HELDOUT]
  rng = random.Random(seed)
  ours = create_pretraining_data.create_training_instances(
      paths, tokenizer, max_seq_length, 2, short_seq_prob, 0.15, 20, rng,
      do_whole_word_mask=whole_word)
  ref_rng = random.Random(seed)
  ref = ref_training_instances(paths, tokenizer, max_seq_length, 2, short_seq_prob, 0.15, 20,
                               ref_rng, whole_word)
  assert len(ours) == len(ref) > 400
  for i, (instance, expected) in enumerate(zip(ours, ref)):
    assert as_tuple(instance) == expected, i
  # The same number of draws too: the generators end in the same state.
  assert rng.getstate() == ref_rng.getstate()
  # The tiny first file is in there ("harpooneer" is harp ##oon ##eer).
  assert any("##oon" in original_tokens(x) for x in ours)


def test_gzip_input_gives_the_same_instances(tmp_path, tokenizer):
  packed = tmp_path / "heldout.txt.gz"
  with open(HELDOUT, "rb") as f:
    packed.write_bytes(gzip.compress(f.read()))
  plain = create_pretraining_data.create_training_instances(
      [HELDOUT], tokenizer, 64, 1, 0.1, 0.15, 10, random.Random(3))
  from_gzip = create_pretraining_data.create_training_instances(
      [str(packed)], tokenizer, 64, 1, 0.1, 0.15, 10, random.Random(3))
  assert [as_tuple(x) for x in plain] == [as_tuple(x) for x in from_gzip]


def test_deterministic_for_a_seed(tokenizer):
  def make(seed):
    return [str(x) for x in create_pretraining_data.create_training_instances(
        [HELDOUT], tokenizer, 128, 1, 0.1, 0.15, 20, random.Random(seed))]
  assert make(5) == make(5)
  assert make(5) != make(6)


# ----------------------------------------------------------------------------------------------
# Official semantics over the real corpus (statistics).
# ----------------------------------------------------------------------------------------------


def test_layout_and_masking_rules(train_instances):
  assert len(train_instances) > 2000
  for instance in train_instances:
    tokens = original_tokens(instance)
    n = len(tokens)
    assert n <= 128 and len(instance.segment_ids) == n
    # [CLS] A [SEP] B [SEP], A and B non-empty; segment 0 up to the first [SEP].
    seps = [i for i, t in enumerate(tokens) if t == "[SEP]"]
    assert tokens[0] == "[CLS]" and "[CLS]" not in tokens[1:]
    assert len(seps) == 2 and seps[1] == n - 1 and 2 <= seps[0] <= n - 3
    assert instance.segment_ids == [0] * (seps[0] + 1) + [1] * (n - seps[0] - 1)
    # The official count, positions increasing, never on [CLS] / [SEP].
    positions = instance.masked_lm_positions
    assert len(positions) == min(20, max(1, int(round(n * 0.15))))
    assert positions == sorted(set(positions))
    assert not {0, seps[0], seps[1]} & set(positions)
    assert len(instance.masked_lm_labels) == len(positions)
    # Outside the masked positions the tokens are unchanged.
    assert all(instance.tokens[i] == tokens[i] for i in range(n) if i not in positions)


def test_masking_and_next_sentence_statistics(train_instances, tokenizer):
  kinds = {"mask": 0, "kept": 0, "random": 0}
  masked = total = 0
  for instance in train_instances:
    total += len(instance.tokens)
    for position, label in zip(instance.masked_lm_positions, instance.masked_lm_labels):
      token = instance.tokens[position]
      masked += 1
      # A random word equal to the label (p ~ 1 / 30522) counts as kept: negligible.
      kinds["mask" if token == "[MASK]" else "kept" if token == label else "random"] += 1
  assert masked > 40000
  share = {k: v / masked for k, v in kinds.items()}
  assert abs(share["mask"] - 0.8) < 0.01
  assert abs(share["kept"] - 0.1) < 0.01
  assert abs(share["random"] - 0.1) < 0.01
  # ~15% of the tokens (the capped rounding takes a little off).
  assert 0.13 < masked / total < 0.155
  # NSP: 50% random B, plus the one-segment chunks that always take a random B.
  random_next = np.mean([x.is_random_next for x in train_instances])
  assert 0.5 < random_next < 0.6
  # Random words come from the vocabulary.
  vocab = tokenizer.vocab
  assert all(t in vocab for x in train_instances for t in x.tokens)


def test_short_seq_prob(tokenizer, train_text, train_instances):
  def lengths(short_seq_prob):
    instances = create_pretraining_data.create_training_instances(
        [train_text], tokenizer, 128, 1, short_seq_prob, 0.15, 20, random.Random(12345))
    return np.array([len(x.tokens) for x in instances])

  never, always = lengths(0.0), lengths(1.0)
  official = np.array([len(x.tokens) for x in train_instances])  # short_seq_prob=0.1
  # Without short targets a chunk is cut at >= 125 tokens: most instances are full.
  assert np.mean(never == 128) > 0.6
  # A uniform target in [2, 125] per document pass: shorter instances, and more of them.
  assert np.mean(always == 128) < 0.15
  assert always.mean() < 0.7 * never.mean() and len(always) > 1.5 * len(never)
  assert always.mean() < official.mean() < never.mean()
  assert len(never) < len(official) < len(always)


# ----------------------------------------------------------------------------------------------
# Writing: the official features, round-robin, atomic; run_pretraining reads them.
# ----------------------------------------------------------------------------------------------


def test_write_and_read_back(tmp_path, tokenizer):
  rng = random.Random(12345)
  instances = create_pretraining_data.create_training_instances(
      [HELDOUT], tokenizer, 128, 2, 0.1, 0.15, 20, rng)
  out_dir = tmp_path / "out"
  outputs = [str(out_dir / "part-1.tfrecord"), str(out_dir / "part-2.tfrecord")]
  create_pretraining_data.write_instance_to_example_files(instances, tokenizer, 128, 20, outputs)
  assert sorted(os.listdir(out_dir)) == ["part-1.tfrecord", "part-2.tfrecord"]  # no temporaries

  records = {path: [tf.train.Example.FromString(r.numpy())
                    for r in tf.data.TFRecordDataset(path)] for path in outputs}
  assert [len(records[p]) for p in outputs] == [(len(instances) + 1) // 2, len(instances) // 2]
  for i, instance in enumerate(instances):
    # Round-robin: instance i is record i // 2 of file i % 2.
    feature = records[outputs[i % 2]][i // 2].features.feature
    assert sorted(feature.keys()) == sorted(FEATURES)
    values = {name: list(feature[name].int64_list.value or feature[name].float_list.value)
              for name in FEATURES}
    n, k = len(instance.tokens), len(instance.masked_lm_positions)
    assert values["input_ids"] == tokenizer.convert_tokens_to_ids(instance.tokens) + [0] * (128 - n)
    assert values["input_mask"] == [1] * n + [0] * (128 - n)
    assert values["segment_ids"] == instance.segment_ids + [0] * (128 - n)
    assert values["masked_lm_positions"] == instance.masked_lm_positions + [0] * (20 - k)
    assert values["masked_lm_ids"] == (tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
                                       + [0] * (20 - k))
    assert values["masked_lm_weights"] == [1.0] * k + [0.0] * (20 - k)
    assert feature["masked_lm_weights"].HasField("float_list")
    assert values["next_sentence_labels"] == [int(instance.is_random_next)]

  # The official training input reads them (eval mode: the files in order).
  input_fn = run_pretraining.input_fn_builder(outputs, 128, 20, is_training=False)
  batch = next(iter(input_fn({"batch_size": 16})))
  for row in range(16):
    instance = instances[2 * row]  # the first records of part-1
    n = len(instance.tokens)
    np.testing.assert_array_equal(batch["input_ids"][row, :n],
                                  tokenizer.convert_tokens_to_ids(instance.tokens))
    np.testing.assert_array_equal(batch["segment_ids"][row, :n], instance.segment_ids)
    assert int(batch["input_mask"][row].numpy().sum()) == n
    assert int(batch["masked_lm_weights"][row].numpy().sum()) == len(
        instance.masked_lm_positions)
    assert int(batch["next_sentence_labels"][row, 0]) == int(instance.is_random_next)


def test_write_is_atomic(tmp_path, tokenizer):
  ok = create_pretraining_data.TrainingInstance(["[CLS]", "a", "[SEP]", "b", "[SEP]"],
                                                [0, 0, 0, 1, 1], [1], ["a"], False)
  too_long = create_pretraining_data.TrainingInstance(["[CLS]"] + ["a"] * 10 + ["[SEP]"],
                                                      [0] * 12, [1], ["a"], False)
  outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  (tmp_path / "a.tfrecord").write_text("earlier")
  with pytest.raises(ValueError, match="max_seq_length=8"):
    create_pretraining_data.write_instance_to_example_files([ok, ok, ok, too_long], tokenizer,
                                                            8, 2, outputs)
  # Nothing replaced, nothing half-written, no temporaries left.
  assert sorted(os.listdir(tmp_path)) == ["a.tfrecord"]
  assert (tmp_path / "a.tfrecord").read_text() == "earlier"
  with pytest.raises(ValueError, match="max_predictions_per_seq=1"):
    create_pretraining_data.write_instance_to_example_files(
        [create_pretraining_data.TrainingInstance(ok.tokens, ok.segment_ids, [1, 3], ["a", "b"],
                                                  True)], tokenizer, 8, 1, outputs)
  assert sorted(os.listdir(tmp_path)) == ["a.tfrecord"]
  # The feature helpers.
  assert list(create_pretraining_data.create_int_feature((1, 2)).int64_list.value) == [1, 2]
  assert list(create_pretraining_data.create_float_feature([0.5]).float_list.value) == [0.5]


# ----------------------------------------------------------------------------------------------
# run_pretraining as a library: the official model_fn_builder / input_fn_builder in the user's
# own TPUEstimator (no batch size or step count given to our hooks).
# ----------------------------------------------------------------------------------------------


class _LogLines(logging.Handler):
  """Collects the messages of TensorFlow's logger (INFO and up) while installed."""

  def __init__(self):
    super(_LogLines, self).__init__(logging.INFO)
    self.lines = []

  def emit(self, record):
    self.lines.append(record.getMessage())

  def __enter__(self):
    self._logger = tf.get_logger()
    self._level = self._logger.level
    self._logger.setLevel(logging.INFO)
    self._logger.addHandler(self)
    return self

  def __exit__(self, *unused):
    self._logger.removeHandler(self)
    self._logger.setLevel(self._level)


def test_run_pretraining_as_a_library(tmp_path, tokenizer):
  """The official library use: our progress and summary hooks with nothing but its arguments."""
  instances = create_pretraining_data.create_training_instances(
      [HELDOUT], tokenizer, 64, 1, 0.1, 0.15, 10, random.Random(3))[:8]
  rec = str(tmp_path / "train.tfrecord")
  create_pretraining_data.write_instance_to_example_files(instances, tokenizer, 64, 10, [rec])
  model_fn = run_pretraining.model_fn_builder(
      bert_config=modeling.BertConfig.from_dict(TINY_BERT_CONFIG),
      init_checkpoint=None,
      learning_rate=1e-4,
      num_train_steps=3,
      num_warmup_steps=1,
      use_tpu=False,
      use_one_hot_embeddings=False)
  run_config = tf.compat.v1.estimator.tpu.RunConfig(
      model_dir=str(tmp_path / "model"),
      save_checkpoints_steps=1000,
      tpu_config=tf.compat.v1.estimator.tpu.TPUConfig(iterations_per_loop=1000, num_shards=8))
  estimator = tf.compat.v1.estimator.tpu.TPUEstimator(
      use_tpu=False, model_fn=model_fn, config=run_config, train_batch_size=4,
      eval_batch_size=4)
  with _LogLines() as log:
    estimator.train(input_fn=run_pretraining.input_fn_builder(
        input_files=[rec], max_seq_length=64, max_predictions_per_seq=10, is_training=True),
        max_steps=3)
  assert estimator.get_variable_value("global_step") == 3
  # The last step's progress line: the step count from num_train_steps, the batch size from
  # the estimator.
  progress = [line for line in log.lines if line.startswith("train: step ")]
  assert progress and progress[-1].startswith("train: step 3/3 steps"), log.lines[-20:]
  assert progress[-1].endswith("examples/s)")
  # The summaries were written.
  events = glob.glob(str(tmp_path / "model" / "events.out.tfevents.*"))
  tags = {value.tag for path in events for event in tf.compat.v1.train.summary_iterator(path)
          for value in event.summary.value}
  assert {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_loss"} <= tags
