"""Tests for slim_checkpoint.py and realformer_tf/checkpoint_slimming.py: optimizer state stripped,
outputs unchanged (fp32) or close (fp16)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import last_error_line, run_tool
from realformer_tf import estimator_utils
from realformer_tf import export_utils
import modeling
import optimization
from realformer_tf import checkpoint_slimming

tf1 = tf.compat.v1


def _config():
  return modeling.BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=37,
                             max_position_embeddings=16, type_vocab_size=2,
                             residual_attention="sum", layer_norm_type="pre")


INPUTS = {"ids": np.array([[2, 7, 9, 3, 0], [2, 5, 11, 40, 3]], np.int32),
          "mask": np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], np.int32)}


def _train_checkpoint(model_dir, gradient_accumulation_steps=1):
  """Two AdamW steps on a tiny model; returns the prefix and the trained model's outputs."""
  with tf.Graph().as_default():
    tf1.set_random_seed(3)
    ids = tf.constant(INPUTS["ids"])
    model = modeling.BertModel(_config(), False, ids, tf.constant(INPUTS["mask"]))
    loss = tf.reduce_mean(tf.square(model.get_pooled_output() - 0.3))
    train_op = optimization.create_optimizer(
        loss, 1e-2, 10, 1, False, gradient_accumulation_steps=gradient_accumulation_steps)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      for _ in range(2 * gradient_accumulation_steps):
        sess.run(train_op)
      outputs = sess.run(model.get_sequence_output())
      prefix = tf1.train.Saver().save(sess, os.path.join(model_dir, "model.ckpt"),
                                      global_step=tf1.train.get_global_step())
  with open(os.path.join(model_dir, "bert_config.json"), "w") as f:
    f.write(_config().to_json_string())
  return prefix, outputs


def _restore_outputs(prefix):
  """A fresh graph-mode BertModel restored from `prefix` with a plain Saver."""
  with tf.Graph().as_default():
    model = modeling.BertModel(_config(), False, tf.constant(INPUTS["ids"]),
                               tf.constant(INPUTS["mask"]))
    with tf1.Session() as sess:
      tf1.train.Saver().restore(sess, prefix)
      return sess.run(model.get_sequence_output())


def test_slim_fp32_restores_identically(tmp_path):
  prefix, trained = _train_checkpoint(str(tmp_path / "train"), gradient_accumulation_steps=2)
  names = [n for n, _ in tf.train.list_variables(prefix)]
  assert any(n.endswith("/adam_m") for n in names) and "global_step" in names
  assert any(n.endswith("/grad_accum") for n in names)
  report = checkpoint_slimming.slim_checkpoint(str(tmp_path / "train"), str(tmp_path / "slim"))
  out_prefix = report["output_checkpoint"]
  assert out_prefix == str(tmp_path / "slim" / os.path.basename(prefix))
  kept = [n for n, _ in tf.train.list_variables(out_prefix)]
  assert not [n for n in kept if n.endswith(("adam_m", "adam_v", "grad_accum"))]
  assert "global_step" not in kept
  assert len(kept) == report["num_kept"] == 41
  assert report["num_stripped"] == len(names) - 41
  # Three copies (weights, m, v, + accumulators) -> one: well under half the size.
  assert report["bytes_after"] < 0.3 * report["bytes_before"]
  assert report["bytes_after"] == checkpoint_slimming.checkpoint_bytes(out_prefix)
  np.testing.assert_array_equal(_restore_outputs(out_prefix), trained)
  assert tf1.train.latest_checkpoint(str(tmp_path / "slim")) == out_prefix
  assert os.path.exists(str(tmp_path / "slim" / "bert_config.json"))
  with pytest.raises(ValueError, match="pass --overwrite"):
    checkpoint_slimming.slim_checkpoint(prefix, str(tmp_path / "slim"))
  again = checkpoint_slimming.slim_checkpoint(prefix, str(tmp_path / "slim"), overwrite=True)
  assert again["num_kept"] == 41


def test_slim_never_replaces_what_it_did_not_write(tmp_path):
  prefix, _ = _train_checkpoint(str(tmp_path / "train"))
  unrelated = tmp_path / "mine"
  unrelated.mkdir()
  (unrelated / "notes.txt").write_text("keep me")
  with pytest.raises(ValueError, match="not written by this project"):
    checkpoint_slimming.slim_checkpoint(prefix, str(unrelated), overwrite=True)
  assert (unrelated / "notes.txt").read_text() == "keep me"
  # The parent of the input checkpoint: refused even with --overwrite, nothing deleted.
  with pytest.raises(ValueError, match="would replace"):
    checkpoint_slimming.slim_checkpoint(prefix, str(tmp_path), overwrite=True)
  assert tf.train.list_variables(prefix)
  file_target = tmp_path / "a_file"
  file_target.write_text("x")
  with pytest.raises(ValueError, match="is a file"):
    checkpoint_slimming.slim_checkpoint(prefix, str(file_target), overwrite=True)
  with pytest.raises(ValueError, match="is a file, not a directory"):
    checkpoint_slimming.slim_checkpoint(prefix, str(file_target / "sub"))


def test_slim_fp16_and_back(tmp_path):
  prefix, trained = _train_checkpoint(str(tmp_path / "train"))
  fp32 = checkpoint_slimming.slim_checkpoint(prefix, str(tmp_path / "slim32"))
  fp16 = checkpoint_slimming.slim_checkpoint(prefix, str(tmp_path / "slim16"), fp16=True)
  reader = tf.train.load_checkpoint(fp16["output_checkpoint"])
  assert set(reader.get_variable_to_dtype_map().values()) == {tf.float16}
  assert fp16["bytes_after"] < 0.6 * fp32["bytes_after"]
  # A float16 checkpoint does not restore into float32 variables...
  with pytest.raises(Exception):
    _restore_outputs(fp16["output_checkpoint"])
  # ... and as --init_checkpoint it is one line that says how to convert it.
  with tf.Graph().as_default():
    config = modeling.BertConfig.from_json_file(os.path.join(str(tmp_path / "train"),
                                                             "bert_config.json"))
    modeling.BertModel(config, False, tf1.placeholder(tf.int32, [1, 4]))
    with pytest.raises(ValueError, match="float16 there but float32 in the model.*--to_fp32"):
      estimator_utils.init_checkpoint_scaffold_fn(fp16["output_checkpoint"], use_tpu=False)
  # ... --to_fp32 makes it restorable, with float16-rounded weights.
  back = checkpoint_slimming.slim_checkpoint(str(tmp_path / "slim16"), str(tmp_path / "back32"),
                                             to_fp32=True)
  restored = _restore_outputs(back["output_checkpoint"])
  error = np.abs(restored - trained).max()
  assert 0 < error < 5e-3, error
  # The TF2 exports read the float16 checkpoint directly (cast on load): the same values.
  specs = {"bert/embeddings/word_embeddings": ([60, 32], True)}
  variables = export_utils.variables_from_checkpoint(specs, fp16["output_checkpoint"])
  word = variables["bert/embeddings/word_embeddings"]
  assert word.dtype == tf.float32
  np.testing.assert_array_equal(
      word.numpy(), tf.train.load_checkpoint(back["output_checkpoint"]).get_tensor(
          "bert/embeddings/word_embeddings"))


def test_cli(tmp_path):
  prefix, _ = _train_checkpoint(str(tmp_path / "train"))
  ok = run_tool("slim_checkpoint.py", ["--input_checkpoint=%s" % prefix,
                                        "--output_dir=%s" % (tmp_path / "out"), "--fp16"],
                timeout=120)
  assert "stripped" in ok.stdout and "float16" in ok.stdout
  bad = run_tool("slim_checkpoint.py", ["--input_checkpoint=%s" % (tmp_path / "nope"),
                                         "--output_dir=%s" % (tmp_path / "out2")],
                 expect_rc=2, timeout=120)
  assert last_error_line(bad).startswith("error: --input_checkpoint=")
