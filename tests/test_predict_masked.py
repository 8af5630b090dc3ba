"""Tests for predict_masked.py (fill-mask) on a tiny random RealFormer with an MLM head.

- Probabilities against tests/numpy_bert.py (an independent NumPy forward, float64, one unpadded
  sentence at a time) plus the MLM head written out in NumPy: the whole softmax to 1e-5 (it sums
  to 1), the top-k ids in order, top-k probabilities that sum to at most 1; batching and padding
  change nothing.
- The piece -> word rules (join_pieces, joined_words, fill_text) on hand-made cases.
- The TF-Hub path: an encoder exported by export_hub.py --with_mlm gives the checkpoint's top-k
  and probabilities to 1e-5; the command line writes the same JSON lines.
- The one-line errors, in process and through the command line (exit status 2).
- Real models: the shared all-MiniLM-L6-v2 converted with convert_hf_checkpoint.py keeps no MLM
  head (a sentence-transformers encoder), which is the head-less error; a tiny model pre-trained
  for a few steps with run_pretraining.py on data/demo_corpus predicts the corpus's most frequent
  pieces (what a model learns first), far more confidently than its random initialisation.
"""

import collections
import io
import json
import os
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf import common
import convert_hf_checkpoint
from realformer_tf import serving
import modeling
import numpy_bert
import predict_masked as pm
import tokenization
from conftest import (REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool, shared_path,
                      write_random_bert_checkpoint)

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
DEMO_TRAIN = os.path.join(REPO_DIR, "data", "demo_corpus", "train.txt")
ATOL = 1e-5
CONFIG = dict(TINY_BERT_CONFIG, residual_attention="sum")
# Different lengths and numbers of masks, so one batch exercises padding of both.
SENTENCES = [
    "The man went to the [MASK] to buy some milk.",
    "[MASK] is the capital of [MASK] [MASK].",
    "a [MASK][MASK] b",
    "She was [MASK] unaffable and paradoxical, said the captain of the ship.",
]


@pytest.fixture(scope="module")
def tokenizer():
  return tokenization.FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  """A checkpoint with bert/* and cls/predictions/* from numpy_bert.random_params (seeded).

  Returns:
    (model directory, checkpoint prefix, params dict, modeling.BertConfig).
  """
  d = str(tmp_path_factory.mktemp("mlm_model"))
  params = numpy_bert.random_params(CONFIG, seed=5, with_heads=True)
  prefix = os.path.join(d, "model.ckpt")
  convert_hf_checkpoint.write_tf_checkpoint(params, prefix)
  with open(os.path.join(d, "bert_config.json"), "w") as f:
    json.dump(CONFIG, f)
  return d, prefix, params, modeling.BertConfig.from_dict(CONFIG)


def numpy_mlm_probabilities(params, config, ids, positions):
  """The MLM head in NumPy (float64) on numpy_bert's sequence output: [n, vocab] softmax.

  transform: dense + activation + LayerNorm; logits = h E^T + output_bias (E the tied word
  embeddings), written from the official BERT pre-training head.
  """
  out = numpy_bert.bert_forward(params, config, np.array([ids]), dtype=np.float64)
  p = {k: v.astype(np.float64) for k, v in params.items()}
  h = out["sequence_output"][0][positions]
  h = numpy_bert.get_activation(config["hidden_act"])(
      h @ p["cls/predictions/transform/dense/kernel"] + p["cls/predictions/transform/dense/bias"])
  h = numpy_bert.layer_norm(h, p["cls/predictions/transform/LayerNorm/gamma"],
                            p["cls/predictions/transform/LayerNorm/beta"])
  logits = h @ p["bert/embeddings/word_embeddings"].T + p["cls/predictions/output_bias"]
  return numpy_bert.softmax(logits)


def _flags(**kw):
  """A namespace with the tool's flag defaults (what setup() reads)."""
  base = dict(input_file=None, text=None, output_file=None, init_checkpoint=None,
              hub_encoder=None, bert_config_file=None, vocab_file=VOCAB, do_lower_case=True,
              max_seq_length=None, top_k=5, batch_size=32, residual_attention=None,
              layer_norm_type=None, allow_random_eval=False, padding=None)
  base.update(kw)
  return types.SimpleNamespace(**base)


def _examples(tokenizer, sentences=SENTENCES):
  return pm.make_examples([(i + 1, "--text #%d" % (i + 1), s) for i, s in enumerate(sentences)],
                          tokenizer, 64)


# ----------------------------------------------------------------------------------------------
# Probabilities.


def test_probabilities_match_numpy_reference(model, tokenizer):
  _, prefix, params, config = model
  examples = _examples(tokenizer)
  assert [e.positions for e in examples] == [[6], [1, 6, 7], [2, 3], [3]]
  predictor = pm.CheckpointPredictor(prefix, config, top_k=5, with_probabilities=True)
  try:
    out = predictor.predict(examples)          # one padded batch
    longest = max(len(e.ids) for e in examples)
    assert predictor.positions == 4 * (-(-longest // 8) * 8)   # --padding=longest (default)
    singles = [predictor.predict([e]) for e in examples]
  finally:
    predictor.close()
  # The official full padding (64, max_position_embeddings) and the 32 bucket: the same
  # probabilities to 1e-5.
  assert longest <= 32
  for padding, length in (("max_length", 64), ("bucket", 32)):
    other = pm.CheckpointPredictor(prefix, config, top_k=5, with_probabilities=True,
                                   padding=padding, max_seq_length=64)
    try:
      got = other.predict(examples)
      assert other.positions == 4 * length
    finally:
      other.close()
    np.testing.assert_array_equal(got["top_ids"], out["top_ids"])
    np.testing.assert_allclose(got["probabilities"], out["probabilities"], rtol=0, atol=ATOL)
  checked = 0
  for b, example in enumerate(examples):
    ref = numpy_mlm_probabilities(params, CONFIG, example.ids, example.positions)
    for j in range(len(example.positions)):
      got = out["probabilities"][b, j]
      np.testing.assert_allclose(got, ref[j], atol=ATOL)
      assert abs(got.sum() - 1.0) < 1e-5                       # the whole softmax
      ranked = np.argsort(-ref[j], kind="stable")
      order = ranked[:5]
      # No near-tie among the first six, so the expected order is unambiguous.
      assert np.all(-np.diff(ref[j][ranked[:6]]) > 1e-5)
      np.testing.assert_array_equal(out["top_ids"][b, j], order)
      top = out["top_probabilities"][b, j]
      np.testing.assert_allclose(top, ref[j][order], atol=ATOL)
      assert np.all(np.diff(top) <= 0) and top.sum() <= 1.0 + 1e-6
      # Far from uniform (a test that could not see a wrong head would pass with ~1/30522).
      assert top[0] > 0.05
      # Padding to the batch's longest sentence and mask count changes nothing.
      np.testing.assert_allclose(singles[b]["probabilities"][0, j], got, atol=1e-6)
      checked += 1
  assert checked == 7


def test_records_and_output_format(model, tokenizer):
  _, prefix, _, config = model
  examples = _examples(tokenizer)
  predictor = pm.CheckpointPredictor(prefix, config, top_k=3)
  try:
    records = list(pm.predict(predictor, examples, tokenizer.inv_vocab, batch_size=3))
  finally:
    predictor.close()
  assert len(records) == 4
  second = records[1]
  assert second["line"] == 2 and second["text"] == SENTENCES[1]
  assert [m["position"] for m in second["masks"]] == [1, 6, 7]
  assert all(len(m["candidates"]) == 3 for m in second["masks"])
  best = [m["candidates"][0]["token"] for m in second["masks"]]
  assert second["filled"] == pm.fill_text(SENTENCES[1], best)
  assert second["joined"] == [{"positions": [1], "word": pm.join_pieces(best[:1])},
                              {"positions": [6, 7], "word": pm.join_pieces(best[1:])}]
  text = pm.format_record(second, "--text #2")
  lines = text.splitlines()
  assert lines[0] == "--text #2: " + SENTENCES[1]
  c = second["masks"][0]["candidates"]
  assert lines[1] == "  [MASK] 1 (position 1): %s %s  %s %s  %s %s" % (
      c[0]["token"], pm.format_probability(c[0]["probability"]), c[1]["token"],
      pm.format_probability(c[1]["probability"]), c[2]["token"],
      pm.format_probability(c[2]["probability"]))
  assert pm.format_probability(0.41234) == "0.4123"
  assert pm.format_probability(3.456e-5) == "3.5e-05"
  assert lines[4] == "  joined (positions 6,7): %s" % pm.join_pieces(best[1:])
  assert lines[5] == "  filled: " + second["filled"]
  obj = json.loads(pm.json_line(second))
  assert sorted(obj) == ["filled", "joined", "line", "masks", "text", "tokens"]


# ----------------------------------------------------------------------------------------------
# Pieces -> words.


def test_word_piece_rules(tokenizer):
  assert pm.join_pieces(["play", "##ing"]) == "playing"
  assert pm.join_pieces(["new", "york"]) == "new york"
  assert pm.join_pieces(["un", "##aff", "##able", "man"]) == "unaffable man"
  assert pm.join_pieces(["##s"]) == "s"
  assert pm.mask_runs([2, 3, 5, 7, 8, 9]) == [[2, 3], [5], [7, 8, 9]]

  tokens = ["[CLS]", "the", "un", "##aff", "[MASK]", "[MASK]", "saw", "[MASK]", "[SEP]"]
  joined = pm.joined_words(tokens, [4, 5, 7], ["##able", "##s", "it"])
  assert joined == [{"positions": [4, 5], "word": "unaffables", "joins": True},
                    {"positions": [7], "word": "it", "joins": False}]
  joined = pm.joined_words(tokens, [4, 5, 7], ["big", "##gest", "##s"])
  assert [j["word"] for j in joined] == ["biggest", "saws"]
  # A leading "##" right after [CLS] has no word to continue.
  assert pm.joined_words(["[CLS]", "[MASK]", "[SEP]"], [1], ["##s"])[0]["word"] == "s"

  assert pm.fill_text("The walk[MASK] man.", ["##ing"]) == "The walking man."
  assert pm.fill_text("The walk [MASK] man.", ["##ing"]) == "The walking man."
  assert pm.fill_text("I [MASK] [MASK] it", ["play", "##ed"]) == "I played it"
  assert pm.fill_text("[MASK][MASK] city", ["new", "york"]) == "new york city"
  assert pm.fill_text("[MASK] [MASK] city", ["new", "york"]) == "new york city"
  assert pm.fill_text("To [MASK].", ["paris"]) == "To paris."

  tokens, ids, positions = pm.tokenize_with_masks("Un[MASK]able [MASK]!", tokenizer, 16)
  assert tokens == ["[CLS]", "un", "[MASK]", "able", "[MASK]", "!", "[SEP]"]
  assert positions == [2, 4] and ids == tokenizer.convert_tokens_to_ids(tokens)


# ----------------------------------------------------------------------------------------------
# The TF-Hub encoder and the command line.


@pytest.fixture(scope="module")
def hub_encoder(model, tmp_path_factory):
  _, prefix, _, config = model
  path = str(tmp_path_factory.mktemp("hub") / "encoder")
  serving.export_encoder(config, prefix, path, with_mlm=True)
  return path


@pytest.mark.slow
def test_hub_encoder_equals_checkpoint(model, hub_encoder, tokenizer):
  _, prefix, _, config = model
  examples = _examples(tokenizer)
  ckpt = pm.CheckpointPredictor(prefix, config, top_k=5, with_probabilities=True)
  try:
    want = ckpt.predict(examples)
  finally:
    ckpt.close()
  got = pm.HubPredictor(hub_encoder, top_k=5, with_probabilities=True).predict(examples)
  for b, example in enumerate(examples):
    n = len(example.positions)
    np.testing.assert_array_equal(got["top_ids"][b, :n], want["top_ids"][b, :n])
    np.testing.assert_allclose(got["top_probabilities"][b, :n], want["top_probabilities"][b, :n],
                               atol=ATOL)
    np.testing.assert_allclose(got["probabilities"][b, :n], want["probabilities"][b, :n],
                               atol=ATOL)


@pytest.mark.slow
def test_command_line_hub_encoder_matches_checkpoint(model, hub_encoder, tokenizer, tmp_path):
  model_dir, prefix, _, config = model
  input_file = tmp_path / "sentences.txt"
  # A blank line is skipped; line numbers stay the file's.
  input_file.write_text(SENTENCES[0] + "\n\n" + "\n".join(SENTENCES[1:]) + "\n")
  output_file = tmp_path / "out" / "predictions.jsonl"
  proc = run_tool("predict_masked.py", [
      "--hub_encoder=%s" % hub_encoder, "--vocab_file=%s" % VOCAB,
      "--input_file=%s" % input_file, "--output_file=%s" % output_file, "--top_k=4",
      "--batch_size=3", "--padding=bucket"])
  got = [json.loads(line) for line in output_file.read_text().splitlines()]
  assert [r["line"] for r in got] == [1, 3, 4, 5]
  # No temporary left; the sidecar names the weights the encoder was exported from.
  assert sorted(os.listdir(str(output_file.parent))) == [
      "predictions.jsonl", "predictions.jsonl.checkpoint.json"]
  with open(str(output_file) + ".checkpoint.json") as f:
    assert json.load(f) == {"checkpoint": prefix, "global_step": None,
                            "hub_encoder": hub_encoder}
  assert "--input_file=%s line 3: %s" % (input_file, SENTENCES[1]) in proc.stdout
  assert "Filled 7 [MASK](s) in 4 sentence(s)" in proc.stderr
  # Batches of 3 and 1 sentences, each padded to the 32 bucket (buckets 32, 64).
  pieces = sum(len(e.ids) for e in _examples(tokenizer))
  assert "--padding=bucket: 128 positions computed for %d word pieces" % pieces in proc.stderr

  # The same sentences through the checkpoint in this process (directory -> latest checkpoint).
  want, summary = pm.run(_flags(init_checkpoint=model_dir, input_file=str(input_file),
                                top_k=4), out=io.StringIO())
  assert summary["model"] == prefix and summary["padding"] == "longest"
  # And with the official full padding (to max_position_embeddings, 64), in JSON lines too.
  full_file = tmp_path / "full.jsonl"
  _, full_summary = pm.run(_flags(init_checkpoint=prefix, input_file=str(input_file), top_k=4,
                                  padding="max_length", output_file=str(full_file),
                                  batch_size=3), out=io.StringIO())
  assert full_summary["positions"] == 4 * 64 and summary["positions"] < 4 * 32
  full = [json.loads(line) for line in full_file.read_text().splitlines()]
  assert len(want) == len(got) == len(full)
  for g, w, f in zip(got, want, full):
    assert f["tokens"] == w["tokens"] and f["filled"] == w["filled"]
    np.testing.assert_allclose([c["probability"] for m in f["masks"] for c in m["candidates"]],
                               [c["probability"] for m in w["masks"] for c in m["candidates"]],
                               rtol=0, atol=ATOL)

    assert g["text"] == w["text"] and g["tokens"] == w["tokens"]
    assert g["filled"] == w["filled"] and g["joined"] == w["joined"]
    for gm, wm in zip(g["masks"], w["masks"]):
      assert gm["position"] == wm["position"]
      assert [c["token"] for c in gm["candidates"]] == [c["token"] for c in wm["candidates"]]
      np.testing.assert_allclose([c["probability"] for c in gm["candidates"]],
                                 [c["probability"] for c in wm["candidates"]], atol=ATOL)

  # An encoder exported from random weights (its export_info.json names no checkpoint) fills
  # masks only deliberately.
  random_export = str(tmp_path / "random_encoder")
  shutil.copytree(hub_encoder, random_export)
  info_path = os.path.join(random_export, serving.EXPORT_INFO)
  with open(info_path) as f:
    info = json.load(f)
  with open(info_path, "w") as f:
    json.dump(dict(info, checkpoint=None, global_step=None), f)
  with pytest.raises(common.UsageError) as e:
    pm.setup(_flags(hub_encoder=random_export, text=["a [MASK] b"]))
  assert str(e.value).startswith("--hub_encoder=%s: was exported from random weights" %
                                 random_export)
  assert "--allow_random_eval" in str(e.value)
  _, _, _, summary = pm.setup(_flags(hub_encoder=random_export, text=["a [MASK] b"],
                                     allow_random_eval=True))
  assert summary["record"] == {"checkpoint": None, "global_step": None,
                               "hub_encoder": random_export}


# ----------------------------------------------------------------------------------------------
# Errors.


def test_one_line_errors(model, tmp_path):
  model_dir, prefix, _, _ = model

  def error(**kw):
    with pytest.raises(common.UsageError) as e:
      pm.setup(_flags(**kw))
    message = str(e.value)
    assert "\n" not in message
    return message

  two_lines = tmp_path / "two.txt"
  two_lines.write_text("the [MASK] sat.\nno mask here.\n")
  assert error(init_checkpoint=model_dir, input_file=str(two_lines)) == (
      "--input_file=%s line 2: has no [MASK] to predict: 'no mask here.'" % two_lines)
  assert "(write it in capitals)" in error(init_checkpoint=model_dir, text=["the [mask] sat"])
  assert "sentence pairs are not supported" in error(init_checkpoint=model_dir,
                                                     text=["a [MASK] ||| b"])
  # Too long: never truncated (the [MASK] is last).
  message = error(init_checkpoint=model_dir, text=["a [MASK]", "one two three four [MASK]"],
                  max_seq_length=6)
  assert message.startswith("--text #2: is 7 word pieces with [CLS] and [SEP], longer than "
                            "--max_seq_length=6;") and "never truncated" in message
  assert "longer than max_position_embeddings=64" in error(
      init_checkpoint=model_dir, text=["a [MASK]"], max_seq_length=65)

  # A checkpoint with bert/* only (what fine-tuned and encoder-only checkpoints hold).
  headless = tmp_path / "headless"
  headless.mkdir()
  with open(str(headless / "bert_config.json"), "w") as f:
    json.dump(CONFIG, f)
  write_random_bert_checkpoint(str(headless / "bert_config.json"),
                               str(headless / "model.ckpt"))
  message = error(init_checkpoint=str(headless), text=["a [MASK]"])
  assert message.startswith("--init_checkpoint=%s: has no masked-LM head" %
                            (headless / "model.ckpt"))
  assert "fine-tuned checkpoints (run_classifier.py, run_squad.py)" in message

  # Missing inputs.
  assert error(init_checkpoint=str(tmp_path / "nope"), text=["a [MASK]"]) == (
      "--init_checkpoint=%s: no checkpoint there" % (tmp_path / "nope"))
  assert error(init_checkpoint=model_dir, input_file=str(tmp_path / "none.txt")) == (
      "--input_file=%s: file does not exist" % (tmp_path / "none.txt"))
  assert error(init_checkpoint=model_dir, text=["a [MASK]"],
               vocab_file=str(tmp_path / "v.txt")) == (
                   "--vocab_file=%s: file does not exist" % (tmp_path / "v.txt"))
  assert error(init_checkpoint=model_dir, text=["a [MASK]"], bert_config_file=str(
      tmp_path / "c.json")) == "--bert_config_file=%s: file does not exist" % (tmp_path / "c.json")
  assert error(hub_encoder=str(tmp_path), text=["a [MASK]"]).startswith(
      "--bert_config_file is required: no bert_config.json in --hub_encoder=")
  # No model at all: one line naming the flags, and how to do it deliberately.
  message = error(text=["a [MASK]"])
  assert message.startswith("predict_masked: no trained weights")
  assert "give --init_checkpoint" in message and "--allow_random_eval" in message
  assert error(init_checkpoint=model_dir, hub_encoder=model_dir,
               text=["a [MASK]"]).startswith("give one model:")
  assert error(init_checkpoint=model_dir, text=["a [MASK]"], top_k=0) == (
      "--top_k=0: must be >= 1")
  assert error(init_checkpoint=model_dir, text=["a [MASK]"],
               output_file=prefix + ".index").startswith("--output_file=%s.index: is also an "
                                                         "input" % prefix)
  # The checkpoint directory's state file (read through --init_checkpoint=DIR).
  state = os.path.join(model_dir, "checkpoint")
  assert error(init_checkpoint=model_dir, text=["a [MASK]"], output_file=state) == (
      "--output_file=%s: is also an input; writing it would replace that input" % state)
  # The vocab file, also when it is only found beside the checkpoint.
  assert error(init_checkpoint=prefix, text=["a [MASK]"], output_file=VOCAB).startswith(
      "--output_file=%s: is also an input" % VOCAB)


def test_random_weights_only_deliberately(model, tmp_path):
  """--allow_random_eval fills masks with seeded random weights, recorded as such."""
  model_dir = model[0]
  config_file = os.path.join(model_dir, "bert_config.json")
  with pytest.raises(common.UsageError, match="--bert_config_file is required"):
    pm.setup(_flags(text=["a [MASK] b"], allow_random_eval=True))
  outputs = []
  for name in ("a.jsonl", "b.jsonl"):
    output_file = str(tmp_path / name)
    records, summary = pm.run(_flags(text=["a [MASK] b"], allow_random_eval=True,
                                     bert_config_file=config_file, output_file=output_file),
                              out=io.StringIO())
    assert summary["model"] == "random weights (--allow_random_eval)"
    with open(output_file + ".checkpoint.json") as f:
      assert json.load(f) == {"checkpoint": None, "global_step": None}
    outputs.append(records[0]["masks"])
  assert outputs[0] == outputs[1]   # seeded: the same random model every run


def test_command_line_error_is_one_line(model):
  proc = run_tool("predict_masked.py", [
      "--init_checkpoint=%s" % model[0], "--vocab_file=%s" % VOCAB,
      "--text=the [MASK] sat", "--text=nothing to fill"], expect_rc=2)
  assert last_error_line(proc) == "error: --text #2: has no [MASK] to predict: 'nothing to fill'"
  assert proc.stdout == ""   # every input is checked before the first prediction
  # An --output_file naming the checkpoint directory's state file is refused.
  state = os.path.join(model[0], "checkpoint")
  before = open(state).read()
  proc = run_tool("predict_masked.py", [
      "--init_checkpoint=%s" % model[0], "--vocab_file=%s" % VOCAB, "--text=the [MASK] sat",
      "--output_file=%s" % state], expect_rc=2)
  assert last_error_line(proc) == ("error: --output_file=%s: is also an input; writing it would "
                                   "replace that input" % state)
  assert proc.stdout == "" and open(state).read() == before


# ----------------------------------------------------------------------------------------------
# Real models.


def test_converted_minilm_has_no_mlm_head(tmp_path):
  hf_dir = shared_path("checkpoints", "all-MiniLM-L6-v2")
  out_dir = str(tmp_path / "minilm")
  summary = convert_hf_checkpoint.convert_forward(hf_dir, out_dir)
  names = [name for name, _ in tf.train.list_variables(os.path.join(out_dir, "bert_model.ckpt"))]
  # A sentence-transformers encoder: the conversion keeps bert/* and nothing of cls/*.
  assert summary["num_tensors"] == len(names) == 103
  assert all(name.startswith("bert/") for name in names)
  with pytest.raises(common.UsageError) as e:
    pm.setup(_flags(init_checkpoint=out_dir, vocab_file=None,
                    text=["paris is the [MASK] of france."]))
  assert str(e.value) == "--init_checkpoint=%s: %s" % (
      os.path.join(out_dir, "bert_model.ckpt"), pm.NO_MLM_HEAD)


def _top_pieces(tokenizer, lines, n):
  """The n most frequent word pieces of `lines`."""
  counts = collections.Counter()
  for line in lines:
    counts.update(tokenizer.tokenize(line))
  return [piece for piece, _ in counts.most_common(n)]


@pytest.mark.slow
def test_tiny_pretrained_model_predicts_frequent_pieces(tmp_path, tokenizer):
  from realformer_tf import pretraining_data  # pylint: disable=g-import-not-at-top
  with open(DEMO_TRAIN, encoding="utf-8") as f:
    lines = f.read().splitlines()[:4000]
  text = tmp_path / "train.txt"
  text.write_text("\n".join(lines) + "\n")
  record = str(tmp_path / "train.tfrecord")
  pretraining_data.create_pretraining_data(
      [str(text)], [record], tokenizer,
      pretraining_data.Settings(max_seq_length=32, max_predictions_per_seq=5, random_seed=3,
                                dupe_factor=1, masked_lm_prob=0.15, short_seq_prob=0.1,
                                do_whole_word_mask=False),
      log_fn=lambda s: None)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(CONFIG))
  model_dir = tmp_path / "pretrain"
  run_tool("run_pretraining.py", [
      "--input_file=%s" % record, "--output_dir=%s" % model_dir,
      "--bert_config_file=%s" % config_file, "--max_seq_length=32",
      "--max_predictions_per_seq=5", "--train_batch_size=32", "--num_train_steps=60",
      "--num_warmup_steps=6", "--learning_rate=3e-3", "--save_checkpoints_steps=1000",
      "--do_train"])
  sentences = ["the [MASK] of the sea was calm .", "he said that [MASK] would come ."]

  def top(checkpoint):
    records, _ = pm.run(_flags(init_checkpoint=checkpoint, text=sentences),
                        out=io.StringIO())
    return [m["candidates"] for r in records for m in r["masks"]]

  trained = top(str(model_dir))
  untrained = top(str(model_dir / "model.ckpt-0"))
  frequent = set(_top_pieces(tokenizer, lines, 30))
  for candidates, before in zip(trained, untrained):
    # What a model learns first: the corpus's most frequent pieces (".", ",", "the", ...),
    # with a confidence far above the near-uniform random initialisation (~1/30522).
    assert {c["token"] for c in candidates} <= frequent, candidates
    assert candidates[0]["probability"] > 0.02 > 20 * before[0]["probability"]
