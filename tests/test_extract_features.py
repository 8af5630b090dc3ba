"""Tests for extract_features.py on a tiny random BERT (2 layers, hidden 32, the real vocab).

The JSON lines and the .npy embeddings are compared with tests/numpy_bert.py (an independent
NumPy forward pass, float64, one unpadded example at a time) on real SST-2 sentences: token
lists against tokenization.FullTokenizer, values to 1e-5 after the 6-decimal rounding, pair
lines with their segment ids, cls / mean pooling computed by hand with the mask, RealFormer
residual attention, a fine-tuned-style model directory, streaming in small batches, and the
one-line errors (in process, and through the command line).
"""

import collections
import errno
import io
import json
import os
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf import common
import extract_features as ef
import modeling
import numpy_bert
import tokenization
from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool

tf1 = tf.compat.v1
SST2_TRAIN = os.path.join(REPO_DIR, "data", "sst2_slice", "train.tsv")
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
ATOL = 1e-5


def _sentences(n, start=0):
  """The first n SST-2 training sentences (after `start`)."""
  with open(SST2_TRAIN, encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t")[0] for line in f][1:]
  return rows[start:start + n]


def _save_checkpoint(params, prefix, global_step=None):
  """Saves {name: array} as a TF checkpoint (Saver format, with a `checkpoint` state file)."""
  with tf.Graph().as_default():
    for name, value in sorted(params.items()):
      tf1.Variable(value, name=name)
    saver = tf1.train.Saver()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return saver.save(sess, prefix, global_step=global_step)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  """A pre-trained-style checkpoint (bert/* only) with bert_config.json beside it.

  The weights are numpy_bert.random_params (attention far from uniform), so that residual
  attention, segment ids and padding all change the values well beyond the tolerance.
  """
  d = str(tmp_path_factory.mktemp("tiny_bert"))
  config_file = os.path.join(d, "bert_config.json")
  with open(config_file, "w") as f:
    json.dump(TINY_BERT_CONFIG, f)
  params = numpy_bert.random_params(TINY_BERT_CONFIG, seed=3)
  checkpoint = _save_checkpoint(params, os.path.join(d, "bert_model.ckpt"))
  return types.SimpleNamespace(dir=d, config_file=config_file, checkpoint=checkpoint,
                               params=params,
                               tokenizer=tokenization.FullTokenizer(VOCAB, do_lower_case=True))


def _flags(**overrides):
  """The tool's flags as a namespace (defaults as the command line's)."""
  values = dict(input_file=None, output_file=None, layers="-1,-2,-3,-4", bert_config_file=None,
                max_seq_length=64, init_checkpoint=None, vocab_file=VOCAB, do_lower_case=True,
                batch_size=32, use_tpu=False, master=None, num_tpu_cores=8,
                use_one_hot_embeddings=False, residual_attention=None, layer_norm_type=None,
                embeddings_file=None, pooling=None, allow_random_eval=False, padding=None)
  values.update(overrides)
  return types.SimpleNamespace(**values)


def _write_lines(path, lines):
  with open(str(path), "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in lines))
  return str(path)


def _read_jsonl(path):
  with open(str(path), encoding="utf-8") as f:
    return [json.loads(line, object_pairs_hook=collections.OrderedDict) for line in f]


def _expected_tokens(tokenizer, text_a, text_b, max_seq_length):
  """[CLS] a [SEP] (b [SEP]) and segment ids; single sentences truncated to max - 2."""
  a = tokenizer.tokenize(text_a)
  b = tokenizer.tokenize(text_b) if text_b else []
  if b:
    assert len(a) + len(b) <= max_seq_length - 3, "test pairs are chosen to fit"
    return ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"], [0] * (len(a) + 2) + [1] * (len(b) + 1)
  a = a[:max_seq_length - 2]
  return ["[CLS]"] + a + ["[SEP]"], [0] * (len(a) + 2)


def _reference_layers(model, tokens, type_ids, config_overrides=None):
  """numpy_bert's all_encoder_layers for one unpadded example: list of [n, H] float64."""
  config = dict(TINY_BERT_CONFIG, **(config_overrides or {}))
  ids = np.array([model.tokenizer.convert_tokens_to_ids(tokens)])
  out = numpy_bert.bert_forward(model.params, config, ids, np.ones_like(ids),
                                np.array([type_ids]))
  return [layer[0] for layer in out["all_encoder_layers"]]


def _check_line(record, index, tokens, ref_layers, layer_indexes):
  """One JSON line against the expected tokens and the reference values."""
  assert list(record.keys()) == ["linex_index", "features"]
  assert record["linex_index"] == index
  assert [f["token"] for f in record["features"]] == tokens
  every_value = [v for f in record["features"] for layer in f["layers"] for v in layer["values"]]
  assert any(round(v, 5) != v for v in every_value)   # 6 decimals kept, not fewer
  for t, feature in enumerate(record["features"]):
    assert list(feature.keys()) == ["token", "layers"]
    assert [layer["index"] for layer in feature["layers"]] == layer_indexes
    for layer, layer_index in zip(feature["layers"], layer_indexes):
      assert list(layer.keys()) == ["index", "values"]
      values = layer["values"]
      assert all(round(v, 6) == v for v in values)   # the official 6-decimal rounding
      np.testing.assert_allclose(values, ref_layers[layer_index][t], rtol=0, atol=ATOL)


def test_jsonl_and_mean_embeddings_match_numpy_reference(model, tmp_path):
  singles = _sentences(6)
  pair_a, pair_b = _sentences(2, start=40)
  long_line = " ".join(_sentences(3, start=10))
  lines = singles + ["%s ||| %s" % (pair_a, pair_b), "", long_line]
  max_seq_length = 60
  input_file = _write_lines(tmp_path / "in.txt", lines)
  out, emb = str(tmp_path / "out.jsonl"), str(tmp_path / "emb.npy")
  stats, summary = ef.run(_flags(
      input_file=input_file, output_file=out, embeddings_file=emb, layers="-1,0",
      init_checkpoint=model.checkpoint, max_seq_length=max_seq_length, batch_size=4))

  texts = [(s, None) for s in singles] + [(pair_a, pair_b), ("", None), (long_line, None)]
  expected_truncated = sum(len(model.tokenizer.tokenize(a)) > max_seq_length - 2
                           for a, b in texts if b is None)
  assert expected_truncated >= 1   # the long line
  assert (stats.lines, stats.pair_lines, stats.empty_lines, stats.truncated_lines) == (
      len(lines), 1, 1, expected_truncated)
  assert summary["bert_config_file"] == model.config_file   # found beside the checkpoint

  records = _read_jsonl(out)
  embeddings = np.load(emb)
  assert embeddings.shape == (len(lines), TINY_BERT_CONFIG["hidden_size"])
  assert embeddings.dtype == np.float32
  assert len(records) == len(lines)
  for i, ((text_a, text_b), record) in enumerate(zip(texts, records)):
    tokens, type_ids = _expected_tokens(model.tokenizer, text_a, text_b, max_seq_length)
    ref = _reference_layers(model, tokens, type_ids)
    _check_line(record, i, tokens, ref, [-1, 0])
    # Mean pooling: the mean of layers -1 and 0, averaged over every real token.
    np.testing.assert_allclose(embeddings[i], ((ref[-1] + ref[0]) / 2).mean(axis=0),
                               rtol=0, atol=ATOL)
    if text_b is not None:
      assert type_ids.count(1) == len(model.tokenizer.tokenize(text_b)) + 1
      # The segment ids matter: with all zeros the values would be far off.
      wrong = _reference_layers(model, tokens, [0] * len(tokens))
      assert np.abs(wrong[-1] - ref[-1]).max() > 1e-3
  assert records[len(singles) + 1]["features"][0]["token"] == "[CLS]"
  assert len(records[len(singles) + 1]["features"]) == 2   # empty line: [CLS] [SEP]
  assert len(records[-1]["features"]) == max_seq_length     # truncated
  assert sorted(os.listdir(str(tmp_path))) == [
      "emb.npy", "emb.npy.checkpoint.json", "in.txt", "out.jsonl", "out.jsonl.checkpoint.json"]
  # Each output says which weights produced it.
  for name in ("emb.npy", "out.jsonl"):
    with open(str(tmp_path / (name + ".checkpoint.json"))) as f:
      assert json.load(f) == {"checkpoint": model.checkpoint, "global_step": None}

  # --padding (default longest: each batch of 4 to its longest line, rounded up to 8); the
  # official full padding and the buckets (32 or 60 here) give the same outputs to 1e-5.
  lengths = [len(_expected_tokens(model.tokenizer, a, b, max_seq_length)[0]) for a, b in texts]
  batches = [lengths[i:i + 4] for i in range(0, len(lengths), 4)]
  assert len(set(lengths)) > 5 and any(max(b) < 32 for b in batches)   # ragged
  padded = {"longest": [min(-(-max(b) // 8) * 8, max_seq_length) for b in batches],
            "max_length": [max_seq_length] * len(batches),
            "bucket": [32 if max(b) <= 32 else max_seq_length for b in batches]}
  assert (stats.word_pieces, stats.positions) == (
      sum(lengths), sum(len(b) * p for b, p in zip(batches, padded["longest"])))
  for padding in ("max_length", "bucket"):
    other_out, other_emb = str(tmp_path / (padding + ".jsonl")), str(tmp_path / (padding + ".npy"))
    other, summary = ef.run(_flags(
        input_file=input_file, output_file=other_out, embeddings_file=other_emb, layers="-1,0",
        init_checkpoint=model.checkpoint, max_seq_length=max_seq_length, batch_size=4,
        padding=padding))
    assert summary["padding"] == padding
    assert (other.word_pieces, other.positions) == (
        sum(lengths), sum(len(b) * p for b, p in zip(batches, padded[padding])))
    np.testing.assert_allclose(np.load(other_emb), embeddings, rtol=0, atol=ATOL)
    for record, other_record in zip(records, _read_jsonl(other_out), strict=True):
      assert [f["token"] for f in other_record["features"]] == [
          f["token"] for f in record["features"]]
      np.testing.assert_allclose(
          [[layer["values"] for layer in f["layers"]] for f in other_record["features"]],
          [[layer["values"] for layer in f["layers"]] for f in record["features"]],
          rtol=0, atol=ATOL)


def test_cls_embeddings_only_in_padded_batch(model, tmp_path):
  lines = _sentences(5, start=20) + ["a short one ||| and its pair"]
  input_file = _write_lines(tmp_path / "in.txt", lines)
  emb = str(tmp_path / "cls.npy")
  stats, _ = ef.run(_flags(input_file=input_file, embeddings_file=emb, pooling="cls",
                           layers="-2", init_checkpoint=model.checkpoint, batch_size=6))
  assert stats.lines == len(lines)
  # No JSON lines.
  assert sorted(os.listdir(str(tmp_path))) == ["cls.npy", "cls.npy.checkpoint.json", "in.txt"]
  embeddings = np.load(emb)
  assert embeddings.shape == (len(lines), 32)
  for i, line in enumerate(lines):
    text_a, _, text_b = line.partition(" ||| ")
    tokens, type_ids = _expected_tokens(model.tokenizer, text_a, text_b or None, 64)
    ref = _reference_layers(model, tokens, type_ids)
    np.testing.assert_allclose(embeddings[i], ref[-2][0], rtol=0, atol=ATOL)


def test_mean_pooling_excludes_padding(model, tmp_path):
  # A short line batched with a long one: its mean must not see the long line's padding.
  short, long_line = "a cat .", _sentences(1, start=30)[0]
  input_file = _write_lines(tmp_path / "in.txt", [short, long_line])
  emb = str(tmp_path / "e.npy")
  ef.run(_flags(input_file=input_file, embeddings_file=emb, layers="-1",
                init_checkpoint=model.checkpoint))
  tokens, type_ids = _expected_tokens(model.tokenizer, short, None, 64)
  ref = _reference_layers(model, tokens, type_ids)[-1]
  np.testing.assert_allclose(np.load(emb)[0], ref.mean(axis=0), rtol=0, atol=ATOL)


def test_residual_attention_flag_is_honoured(model, tmp_path):
  lines = _sentences(3, start=50)
  input_file = _write_lines(tmp_path / "in.txt", lines)
  outputs = {}
  for residual in ("none", "sum"):
    out = str(tmp_path / ("%s.jsonl" % residual))
    _, summary = ef.run(_flags(input_file=input_file, output_file=out, layers="-1",
                               init_checkpoint=model.checkpoint, residual_attention=residual))
    assert summary["residual_attention"] == residual
    outputs[residual] = _read_jsonl(out)
  for i, line in enumerate(lines):
    tokens, type_ids = _expected_tokens(model.tokenizer, line, None, 64)
    ref_sum = _reference_layers(model, tokens, type_ids, {"residual_attention": "sum"})
    _check_line(outputs["sum"][i], i, tokens, ref_sum, [-1])
    got_none = np.array([f["layers"][0]["values"] for f in outputs["none"][i]["features"]])
    got_sum = np.array([f["layers"][0]["values"] for f in outputs["sum"][i]["features"]])
    assert np.abs(got_sum - got_none).max() > 1e-3   # same weights, another model


def test_finetuned_model_directory(model, tmp_path):
  # A run_classifier-style output dir: extra head / optimizer variables, a `checkpoint` file,
  # and the bert_config.json it trained with (here RealFormer, residual_attention=mean).
  out_dir = tmp_path / "finetuned"
  out_dir.mkdir()
  config = dict(TINY_BERT_CONFIG, residual_attention="mean")
  with open(str(out_dir / "bert_config.json"), "w") as f:
    json.dump(config, f)
  extra = {"output_weights": np.ones([2, 32], np.float32),
           "output_bias": np.zeros([2], np.float32),
           "bert/embeddings/word_embeddings/adam_m": np.zeros([30522, 32], np.float32),
           "global_step": np.int64(7)}
  _save_checkpoint(dict(model.params, **extra), str(out_dir / "model.ckpt"), global_step=7)

  lines = _sentences(2, start=60)
  input_file = _write_lines(tmp_path / "in.txt", lines)
  out = str(tmp_path / "out.jsonl")
  _, summary = ef.run(_flags(input_file=input_file, output_file=out, layers="-1,-2",
                             init_checkpoint=str(out_dir)))
  assert summary["checkpoint"] == str(out_dir / "model.ckpt-7")
  assert summary["residual_attention"] == "mean"
  with open(out + ".checkpoint.json") as f:
    assert json.load(f) == {"checkpoint": str(out_dir / "model.ckpt-7"), "global_step": 7}
  for i, (line, record) in enumerate(zip(lines, _read_jsonl(out))):
    tokens, type_ids = _expected_tokens(model.tokenizer, line, None, 64)
    ref = _reference_layers(model, tokens, type_ids, {"residual_attention": "mean"})
    _check_line(record, i, tokens, ref, [-1, -2])


def test_streaming_small_batches_equal_one_batch(model, tmp_path):
  lines = _sentences(300, start=100)
  input_file = _write_lines(tmp_path / "in.txt", lines)
  results = {}
  logged = []
  for batch_size in (7, 300):
    out = str(tmp_path / ("b%d.jsonl" % batch_size))
    emb = str(tmp_path / ("b%d.npy" % batch_size))
    stats, _ = ef.run(_flags(input_file=input_file, output_file=out, embeddings_file=emb,
                             layers="-1", init_checkpoint=model.checkpoint,
                             batch_size=batch_size), log_fn=logged.append)
    assert stats.lines == 300
    results[batch_size] = (_read_jsonl(out), np.load(emb))
  (small_json, small_emb), (big_json, big_emb) = results[7], results[300]
  assert [r["linex_index"] for r in small_json] == list(range(300))
  for a, b in zip(small_json, big_json):
    assert [f["token"] for f in a["features"]] == [f["token"] for f in b["features"]]
    va = np.array([f["layers"][0]["values"] for f in a["features"]])
    vb = np.array([f["layers"][0]["values"] for f in b["features"]])
    # Other padding lengths change the float32 summation order only.
    np.testing.assert_allclose(va, vb, rtol=0, atol=3e-6)
  np.testing.assert_allclose(small_emb, big_emb, rtol=0, atol=3e-6)
  assert any("/300 lines" in line and "lines/s" in line for line in logged)
  assert not [n for n in os.listdir(str(tmp_path)) if common.is_temp_path(n)]


@pytest.mark.parametrize("overrides, message", [
    (dict(layers="-1,-3"), "--layers=-1,-3: layer -3 is out of range for a model with "
                           "num_hidden_layers=2"),
    (dict(layers="2"), "layer 2 is out of range"),
    (dict(layers="last"), "--layers=last: expected comma-separated integers"),
    (dict(output_file="IN"), "--output_file=IN: is also an input"),
    (dict(embeddings_file="OUT"), "--embeddings_file=OUT: is also --output_file"),
    (dict(output_file=None), "--output_file is required (or --embeddings_file"),
    (dict(pooling="cls"), "--pooling=cls: needs --embeddings_file"),
    (dict(input_file="/nonexistent/in.txt"), "--input_file=/nonexistent/in.txt: file does not "
                                             "exist"),
    (dict(max_seq_length=65), "--max_seq_length=65 is longer than max_position_embeddings=64"),
    (dict(init_checkpoint="/nonexistent/ckpt"), "--init_checkpoint=/nonexistent/ckpt: no "
                                                "checkpoint there"),
    (dict(init_checkpoint="CONFIG"), "--init_checkpoint=CONFIG: not a readable TensorFlow "
                                     "checkpoint"),
    (dict(layer_norm_type="pre"), "lacks 2 variable(s) the model needs"),
])
def test_one_line_errors(model, tmp_path, overrides, message):
  input_file = _write_lines(tmp_path / "in.txt", ["hello world"])
  out = str(tmp_path / "out.jsonl")
  values = dict(input_file=input_file, output_file=out, layers="-1",
                init_checkpoint=model.checkpoint)
  values.update(overrides)
  for key in ("output_file", "embeddings_file"):
    if values.get(key) == "IN":
      values[key] = input_file
    if values.get(key) == "OUT":
      values[key] = out
  if values["init_checkpoint"] == "CONFIG":
    values["init_checkpoint"] = values["bert_config_file"] = model.config_file
  message = message.replace("IN", input_file).replace("OUT", out).replace(
      "CONFIG", model.config_file)
  with pytest.raises(common.UsageError) as e:
    ef.run(_flags(**values))
  assert message in str(e.value)
  assert "\n" not in str(e.value)
  assert not os.path.exists(out)


def test_config_needed_when_not_beside_checkpoint(model, tmp_path):
  alone = tmp_path / "alone"
  alone.mkdir()
  for name in os.listdir(model.dir):
    if name.startswith("bert_model.ckpt"):
      os.symlink(os.path.join(model.dir, name), str(alone / name))
  input_file = _write_lines(tmp_path / "in.txt", ["hello"])
  with pytest.raises(common.UsageError, match="--bert_config_file is required: there is no "
                                              "bert_config.json beside"):
    ef.run(_flags(input_file=input_file, output_file=str(tmp_path / "o.jsonl"), layers="-1",
                  init_checkpoint=str(alone / "bert_model.ckpt")))


@pytest.fixture(scope="module")
def training_dir(model, tmp_path_factory):
  """A model directory as training leaves it: two checkpoints (steps 5 and 9), the state file."""
  d = tmp_path_factory.mktemp("training_dir")
  with tf.Graph().as_default():
    for name, value in sorted(model.params.items()):
      tf1.Variable(value, name=name)
    saver = tf1.train.Saver()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      for step in (5, 9):
        saver.save(sess, str(d / "model.ckpt"), global_step=step)
  shutil.copy(model.config_file, str(d / "bert_config.json"))
  return d


def _contents(directory):
  return {name: (directory / name).read_bytes() for name in sorted(os.listdir(str(directory)))}


@pytest.mark.parametrize("flag, target", [
    ("output_file", "checkpoint"), ("embeddings_file", "checkpoint"),
    ("output_file", "model.ckpt-5.index"),   # another checkpoint of the directory than the one read
    ("embeddings_file", "model.ckpt-9.data-00000-of-00001"), ("output_file", "model.ckpt-9.meta")])
@pytest.mark.parametrize("as_prefix", [False, True])
def test_outputs_never_replace_checkpoint_files(training_dir, tmp_path, flag, target, as_prefix):
  """An --output_file naming the checkpoint directory's state file is refused, the file kept."""
  input_file = _write_lines(tmp_path / "in.txt", ["hello world"])
  before = _contents(training_dir)
  init = str(training_dir / "model.ckpt-9") if as_prefix else str(training_dir)
  values = dict(input_file=input_file, output_file=str(tmp_path / "out.jsonl"), layers="-1",
                init_checkpoint=init)
  values[flag] = str(training_dir / target)
  with pytest.raises(common.UsageError) as e:
    ef.run(_flags(**values))
  assert str(e.value) == ("--%s=%s: is also an input; writing it would replace that input" %
                          (flag, training_dir / target))
  assert _contents(training_dir) == before


def test_sidecar_clash_is_refused(model, tmp_path):
  input_file = _write_lines(tmp_path / "in.txt", ["hello"])
  out = str(tmp_path / "out.jsonl")
  with pytest.raises(common.UsageError, match="its sidecar .* is also --output_file"):
    ef.run(_flags(input_file=input_file, output_file=str(tmp_path / "e.npy.checkpoint.json"),
                  embeddings_file=str(tmp_path / "e.npy"), layers="-1",
                  init_checkpoint=model.checkpoint))
  with pytest.raises(common.UsageError, match="is also the sidecar of --output_file"):
    ef.run(_flags(input_file=input_file, output_file=out, embeddings_file=out +
                  ".checkpoint.json", layers="-1", init_checkpoint=model.checkpoint))
  assert sorted(os.listdir(str(tmp_path))) == ["in.txt"]


def test_empty_input_is_one_line_before_any_output(model, tmp_path):
  """An empty input is one line, and no output (.npy included) appears."""
  empty = tmp_path / "empty.txt"
  empty.write_text("")
  out, emb = str(tmp_path / "out.jsonl"), str(tmp_path / "emb.npy")
  message = "--input_file=%s: is empty (no line to extract features from)" % empty
  with pytest.raises(common.UsageError) as e:
    ef.run(_flags(input_file=str(empty), output_file=out, embeddings_file=emb, layers="-1",
                  init_checkpoint=model.checkpoint))
  assert str(e.value) == message
  # The library function says the same (before it opens any output).
  with pytest.raises(common.UsageError) as e:
    ef.extract_features(str(empty), model.checkpoint, modeling.BertConfig.from_dict(
        TINY_BERT_CONFIG), model.tokenizer, [-1], output_file=out, embeddings_file=emb)
  assert str(e.value) == message
  assert sorted(os.listdir(str(tmp_path))) == ["empty.txt"]


def test_failing_output_leaves_nothing_in_place(model, tmp_path, monkeypatch):
  """A write error (disk full) on one output is one line naming that
  file, and no output is renamed into place (the .npy was, when the JSON lines failed)."""
  input_file = _write_lines(tmp_path / "in.txt", _sentences(3))
  out, emb = str(tmp_path / "out.jsonl"), str(tmp_path / "emb.npy")
  real_gfile = tf.io.gfile.GFile

  class FullDisk(real_gfile):
    """The JSON lines' temporary cannot be flushed when it is closed: the disk is full."""

    def close(self):
      super(FullDisk, self).close()
      if os.path.basename(self.name).startswith(".out.jsonl.tmp-"):
        raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(tf.io.gfile, "GFile", FullDisk)
  stderr = io.StringIO()
  monkeypatch.setattr("sys.stderr", stderr)
  with pytest.raises(SystemExit) as e:
    common.run_main(lambda argv: ef.run(_flags(
        input_file=input_file, output_file=out, embeddings_file=emb, layers="-1",
        init_checkpoint=model.checkpoint)), [])
  assert e.value.code == 1
  assert stderr.getvalue() == "error: %s: No space left on device (errno 28)\n" % out
  assert sorted(os.listdir(str(tmp_path))) == ["in.txt"]   # no output, no temporary


def test_no_trained_weights_is_one_line_unless_allowed(model, tmp_path):
  """Features from no trained weights stop with one line naming the flag."""
  input_file = _write_lines(tmp_path / "in.txt", _sentences(2))
  emb = str(tmp_path / "emb.npy")
  with pytest.raises(common.UsageError) as e:
    ef.run(_flags(input_file=input_file, embeddings_file=emb, layers="-1",
                  bert_config_file=model.config_file))
  assert str(e.value).startswith("extract_features: no trained weights")
  assert "--init_checkpoint" in str(e.value) and "--allow_random_eval" in str(e.value)
  # A checkpoint of another model (here a translation-style one) supplies none of the weights.
  foreign = _save_checkpoint({"encoder/layer_0/kernel": np.zeros([4, 4], np.float32)},
                             str(tmp_path / "nmt" / "model.ckpt"), global_step=3)
  with pytest.raises(common.UsageError) as e:
    ef.run(_flags(input_file=input_file, embeddings_file=emb, layers="-1",
                  bert_config_file=model.config_file, init_checkpoint=str(tmp_path / "nmt")))
  assert str(e.value).startswith("--init_checkpoint=%s: supplies none of the model's 39 "
                                 "variables" % foreign)
  assert not os.path.exists(emb)
  # Deliberately: seeded random weights (the same on every run), recorded as such.
  with pytest.raises(common.UsageError, match="--bert_config_file is required"):
    ef.run(_flags(input_file=input_file, embeddings_file=emb, layers="-1",
                  allow_random_eval=True))
  runs = []
  for name in ("a.npy", "b.npy"):
    ef.run(_flags(input_file=input_file, embeddings_file=str(tmp_path / name), layers="-1",
                  bert_config_file=model.config_file, allow_random_eval=True))
    runs.append(np.load(str(tmp_path / name)))
    with open(str(tmp_path / (name + ".checkpoint.json"))) as f:
      assert json.load(f) == {"checkpoint": None, "global_step": None}
  np.testing.assert_array_equal(runs[0], runs[1])
  assert runs[0].shape == (2, 32) and np.abs(runs[0]).max() > 0.1


def _cli(args, timeout=120):
  """extract_features.py with `args` (conftest.run_tool; the exit status is the test's)."""
  return run_tool("extract_features.py", args, expect_rc=None, timeout=timeout,
                  env={"TF_CPP_MIN_LOG_LEVEL": "3"})


@pytest.mark.slow
def test_cli_official_flags_and_errors(model, tmp_path):
  lines = _sentences(4, start=70) + ["first part ||| second part"]
  input_file = _write_lines(tmp_path / "in.txt", lines)
  out = str(tmp_path / "out.jsonl")
  official = ["--input_file=" + input_file, "--vocab_file=" + VOCAB,
              "--bert_config_file=" + model.config_file, "--init_checkpoint=" + model.checkpoint,
              "--do_lower_case=True", "--max_seq_length=64", "--batch_size=8",
              "--use_tpu=False", "--use_one_hot_embeddings=True"]
  proc = _cli(official + ["--output_file=" + out, "--layers=-1,-2", "--padding=bucket"])
  assert proc.returncode == 0, proc.stderr
  assert "Extracted 5 line(s) (1 pairs, 0 truncated, 0 empty)" in proc.stderr
  longest = max(len(_expected_tokens(model.tokenizer, *line.partition(" ||| ")[::2], 64)[0])
                for line in lines)
  assert "--padding=bucket: %d positions computed for " % (
      5 * (32 if longest <= 32 else 64)) in proc.stderr   # one batch, buckets 32 and 64
  for i, (line, record) in enumerate(zip(lines, _read_jsonl(out))):
    text_a, _, text_b = line.partition(" ||| ")
    tokens, type_ids = _expected_tokens(model.tokenizer, text_a, text_b or None, 64)
    _check_line(record, i, tokens, _reference_layers(model, tokens, type_ids), [-1, -2])

  # The official default --layers=-1,-2,-3,-4 does not fit a 2-layer model: one line, exit 2.
  proc = _cli(official + ["--output_file=" + str(tmp_path / "x.jsonl")])
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == (
      "error: --layers=-1,-2,-3,-4: layer -3 is out of range for a model with "
      "num_hidden_layers=2 (use -2..1; -1 is the last layer)")
  assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr

  before = open(input_file).read()
  proc = _cli(official + ["--output_file=" + input_file, "--layers=-1"])
  assert proc.returncode == 2
  assert proc.stderr.strip() == ("error: --output_file=%s: is also an input; writing it would "
                                 "replace that input" % input_file)
  assert open(input_file).read() == before

  # The checkpoint directory's state file: refused, unchanged.
  state = os.path.join(model.dir, "checkpoint")
  before = open(state).read()
  proc = _cli([a for a in official if not a.startswith("--init_checkpoint=")] + [
      "--init_checkpoint=" + model.dir, "--layers=-1", "--embeddings_file=" + state])
  assert proc.returncode == 2
  assert last_error_line(proc) == ("error: --embeddings_file=%s: is also an input; writing it "
                                   "would replace that input" % state)
  assert open(state).read() == before
