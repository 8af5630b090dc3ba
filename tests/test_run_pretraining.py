"""Tests for run_pretraining.py: MLM/NSP math, end-to-end create -> train -> eval, bad TFRecords,
resume after SIGKILL, gradient accumulation, mirrored on two CPU replicas, and two workers."""

import json
import os
import signal
import socket
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool, start_tool
import convert_hf_checkpoint
from realformer_tf import estimator_utils
import modeling
import run_pretraining
from realformer_tf import pretraining_utils

tf1 = tf.compat.v1
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")

TINY_CONFIG = dict(TINY_BERT_CONFIG, residual_attention="sum", layer_norm_type="post")
SEQ = 32
PREDS = 5


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  """A tiny pre-training set made by create_pretraining_data.py, plus a tiny config."""
  root = tmp_path_factory.mktemp("pretrain")
  lines = []
  rng = np.random.RandomState(0)
  words = ("the king said that a whale was seen near the ship and the captain laughed at "
           "her brother while the sea rose over old stone walls").split()
  for doc in range(60):
    for _ in range(rng.randint(2, 8)):
      lines.append(" ".join(rng.choice(words, rng.randint(4, 14))) + ".")
    lines.append("")
  (root / "text.txt").write_text("\n".join(lines))
  run_tool("create_pretraining_data.py", [
      "--input_file=%s" % (root / "text.txt"), "--output_file=%s" % (root / "data.tfrecord"),
      "--vocab_file=%s" % VOCAB, "--max_seq_length=%d" % SEQ,
      "--max_predictions_per_seq=%d" % PREDS, "--dupe_factor=2", "--num_workers=1"])
  (root / "bert_config.json").write_text(json.dumps(TINY_CONFIG))
  return root


def _train_args(data_dir, output_dir, steps, extra=()):
  """run_pretraining.py flags for a tiny run on the data_dir set."""
  return ["--input_file=%s" % (data_dir / "data.tfrecord"),
          "--output_dir=%s" % output_dir, "--bert_config_file=%s" % (data_dir / "bert_config.json"),
          "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % PREDS,
          "--train_batch_size=8", "--num_train_steps=%d" % steps, "--num_warmup_steps=2",
          "--learning_rate=1e-3", "--save_checkpoints_steps=10"] + list(extra)


def test_masked_lm_and_next_sentence_losses_match_numpy():
  config = modeling.BertConfig.from_dict(dict(TINY_CONFIG, vocab_size=50))
  rng = np.random.RandomState(0)
  sequence = rng.randn(2, 6, 32).astype(np.float32)
  table = rng.randn(50, 32).astype(np.float32)
  positions = np.array([[1, 4, 0], [2, 0, 0]], np.int32)
  label_ids = np.array([[7, 9, 0], [3, 0, 0]], np.int32)
  weights = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
  pooled = rng.randn(2, 32).astype(np.float32)
  nsp_labels = np.array([[0], [1]], np.int32)
  with tf.Graph().as_default():
    mlm_loss, _, mlm_log_probs = run_pretraining.get_masked_lm_output(
        config, tf.constant(sequence), tf.constant(table), tf.constant(positions),
        tf.constant(label_ids), tf.constant(weights))
    nsp_loss, _, nsp_log_probs = run_pretraining.get_next_sentence_output(
        config, tf.constant(pooled), tf.constant(nsp_labels))
    names = sorted(v.op.name for v in tf1.global_variables())
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      values = {v.op.name: sess.run(v) for v in tf1.global_variables()}
      got = sess.run([mlm_loss, mlm_log_probs, nsp_loss])
  assert names == sorted([
      "cls/predictions/output_bias", "cls/predictions/transform/LayerNorm/beta",
      "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/dense/bias",
      "cls/predictions/transform/dense/kernel", "cls/seq_relationship/output_bias",
      "cls/seq_relationship/output_weights"])
  # NumPy: gather, dense + gelu, LayerNorm, tied output embedding, weighted mean CE.
  gathered = sequence[np.arange(2)[:, None], positions].reshape(-1, 32).astype(np.float64)
  h = gathered @ values["cls/predictions/transform/dense/kernel"] + \
      values["cls/predictions/transform/dense/bias"]
  h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
  h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-12)
  logits = h @ table.T + values["cls/predictions/output_bias"]
  log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                                                                keepdims=True)) \
      - logits.max(-1, keepdims=True)
  per_example = -log_probs[np.arange(6), label_ids.reshape(-1)]
  want_mlm = (per_example * weights.reshape(-1)).sum() / (weights.sum() + 1e-5)
  np.testing.assert_allclose(got[1], log_probs, atol=1e-4)
  np.testing.assert_allclose(got[0], want_mlm, rtol=1e-5)
  nsp_logits = pooled @ values["cls/seq_relationship/output_weights"].T + \
      values["cls/seq_relationship/output_bias"]
  nsp_lp = nsp_logits - np.log(np.exp(nsp_logits).sum(-1, keepdims=True))
  np.testing.assert_allclose(got[2], -nsp_lp[[0, 1], [0, 1]].mean(), rtol=1e-5)


def test_label_log_probs_gradient_is_autodiffs_bit_for_bit():
  # Its written-out gradient against autodiff through gather(log_softmax), with a padding
  # prediction (weight 0); bit for bit when the loss is log_probs' only differentiable use (as
  # in training), to rounding when another use of log_probs adds its own gradient.
  rng = np.random.RandomState(3)
  logits_value = (rng.randn(7, 50) * 4).astype(np.float32)
  other_value = rng.randn(7, 50).astype(np.float32)
  labels = [3, 49, 0, 3, 17, 8, 22]
  with tf.Graph().as_default():
    label_ids = tf.constant(labels)
    weights = tf.constant([1, 1, 1, 0, 1, 1, 1], tf.float32)
    logits = tf.constant(logits_value)
    log_probs = tf.nn.log_softmax(logits)
    other_use = 0.1 * tf.reduce_sum(log_probs * other_value)
    fetches = []
    for picked in (run_pretraining.label_log_probs(logits, log_probs, label_ids),
                   tf.gather(log_probs, label_ids[:, None], axis=1, batch_dims=1)[:, 0]):
      loss = -tf.reduce_sum(weights * picked) / (tf.reduce_sum(weights) + 1e-5)
      fetches += [picked, tf.gradients(loss, [logits])[0],
                  tf.gradients(loss + other_use, [logits])[0]]
    with tf1.Session() as sess:
      ours, ours_grad, ours_grad2, autodiff, autodiff_grad, autodiff_grad2 = sess.run(fetches)
  want = logits_value - np.log(np.exp(logits_value).sum(-1, keepdims=True))
  np.testing.assert_allclose(ours, want[np.arange(7), labels], atol=1e-5)
  np.testing.assert_array_equal(ours, autodiff)
  assert ours_grad.dtype == np.float32 and np.abs(ours_grad).max() > 0
  # + 0.0 turns -0.0 into 0.0: the two may differ in the sign of zeros only.
  np.testing.assert_array_equal((ours_grad + 0.0).view(np.int32),
                                (autodiff_grad + 0.0).view(np.int32))
  np.testing.assert_allclose(ours_grad2, autodiff_grad2, rtol=1e-6, atol=1e-8)
  assert np.abs(ours_grad2 - ours_grad).max() > 1e-3  # the other use's gradient is there


def test_input_pipeline_runs_without_tf_data_autotuning(data_dir):
  # Closing a session waits for tf.data's autotuning thread to wake (up to 60 s after a few
  # minutes of training): the pipeline turns it off (estimator_utils.without_autotune).
  for is_training in (True, False):
    input_fn = run_pretraining.input_fn_builder([str(data_dir / "data.tfrecord")], SEQ, PREDS,
                                                is_training, seed=1)
    with tf.Graph().as_default():
      dataset = input_fn({"batch_size": 4})
      assert dataset.options().autotune.enabled is False, is_training
      batch = tf1.data.make_one_shot_iterator(dataset).get_next()
      with tf1.Session() as sess:
        assert sess.run(batch)["input_ids"].shape == (4, SEQ)


@pytest.mark.slow
def test_end_to_end_train_and_eval_with_override(data_dir, tmp_path):
  out = tmp_path / "out"
  result = run_tool("run_pretraining.py", _train_args(
      data_dir, out, 12, ["--do_train", "--do_eval", "--max_eval_steps=3",
                          "--residual_attention=mean", "--gradient_accumulation_steps=2"]))
  saved = json.loads((out / "bert_config.json").read_text())
  assert saved["residual_attention"] == "mean" and saved["hidden_size"] == 32
  results = json.loads((out / "eval_results.json").read_text())
  for key in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
              "next_sentence_loss"):
    assert np.isfinite(results[key]), key
  assert 0.0 <= results["masked_lm_accuracy"] <= 1.0
  # 12 updates of 2 accumulated micro-batches each.
  assert results["global_step"] == 24
  assert "masked_lm_accuracy = " in (out / "eval_results.txt").read_text()
  summary = json.loads((out / "train_summary_local.json").read_text())
  assert summary["global_step"] == 24 and summary["weights_digest"]
  assert summary["steady_steps_per_sec"] > 0
  assert "steps/s" in result.stderr and "remaining" in result.stderr


def test_tfrecord_length_mismatch_is_a_one_line_error(data_dir, tmp_path):
  args = _train_args(data_dir, tmp_path / "out", 5, ["--do_train"])
  args = [a.replace("--max_seq_length=%d" % SEQ, "--max_seq_length=48") for a in args]
  result = run_tool("run_pretraining.py", args, expect_rc=2)
  last = last_error_line(result)
  assert last.startswith("error: --input_file:") and "input_ids of length 32" in last
  assert "--max_seq_length=48" in last


def test_missing_inputs_are_one_line_errors(data_dir, tmp_path):
  result = run_tool("run_pretraining.py",
                    _train_args(data_dir, tmp_path / "o", 5, ["--do_train"]) +
                    ["--input_file=%s" % (tmp_path / "nothing*.tfrecord")], expect_rc=2)
  assert "matches no file" in last_error_line(result)
  bad_config = tmp_path / "bad.json"
  bad_config.write_text(json.dumps(dict(TINY_CONFIG, num_layers=3)))
  result = run_tool("run_pretraining.py",
                    _train_args(data_dir, tmp_path / "o", 5, ["--do_train"]) +
                    ["--bert_config_file=%s" % bad_config], expect_rc=2)
  assert "unknown config key 'num_layers'" in last_error_line(result)


@pytest.mark.slow
def test_mirrored_on_two_cpu_replicas(data_dir, tmp_path):
  out = tmp_path / "out"
  result = run_tool("run_pretraining.py", _train_args(
      data_dir, out, 4, ["--do_train", "--distribution_strategy=mirrored",
                         "--num_cpu_devices=2"]))
  assert "2 replicas in sync: 4 examples per replica per step" in result.stderr
  assert json.loads((out / "train_summary_local.json").read_text())["global_step"] == 4


def _free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


@pytest.mark.slow
def test_two_workers_multi_worker_mirrored_end_identical(data_dir, tmp_path):
  out = tmp_path / "out"
  ports = _free_ports(2)
  cluster = {"worker": ["127.0.0.1:%d" % p for p in ports]}
  args = _train_args(data_dir, out, 4, ["--do_train",
                                        "--distribution_strategy=multi_worker_mirrored"])
  procs = []
  for index in range(2):
    tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    procs.append(start_tool("run_pretraining.py", args, env={"TF_CONFIG": tf_config}))
  errors = [p.communicate(timeout=300)[1] for p in procs]
  for p, err in zip(procs, errors):
    assert p.returncode == 0, err[-3000:]
  summaries = [json.loads((out / ("train_summary_worker_%d.json" % i)).read_text())
               for i in range(2)]
  assert summaries[0]["global_step"] == summaries[1]["global_step"] == 4
  assert summaries[0]["weights_digest"] == summaries[1]["weights_digest"]
  assert summaries[0]["weights_digest"] is not None


def _wait_for_checkpoint(out, min_step, proc, timeout=120):
  deadline = time.time() + timeout
  while time.time() < deadline and proc.poll() is None:
    latest = tf1.train.latest_checkpoint(str(out))
    if latest and int(latest.rsplit("-", 1)[1]) >= min_step:
      return
    time.sleep(0.2)
  raise AssertionError("no checkpoint at step >= %d" % min_step)


@pytest.mark.slow
def test_sigterm_saves_then_exits_143_without_results_and_a_second_job_is_refused(
    data_dir, tmp_path):
  out = tmp_path / "out"
  args = _train_args(data_dir, out, 400, ["--do_train", "--do_eval", "--max_eval_steps=2"])
  proc = start_tool("run_pretraining.py", args)
  _wait_for_checkpoint(out, 10, proc)
  # A second job in the same output_dir while the first runs: one line, nothing written.
  second = run_tool("run_pretraining.py", args, expect_rc=2)
  last = last_error_line(second)
  assert last.startswith("error: --output_dir=") and "in use by another job (pid %d" % proc.pid \
      in last, last
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=120)
  assert proc.returncode == 143, err[-2000:]
  assert "rerun the same command to resume" in err
  stopped_at = int(tf1.train.latest_checkpoint(str(out)).rsplit("-", 1)[1])
  assert 10 <= stopped_at < 400
  # Nothing that looks finished, and the lock is gone.
  assert not (out / "eval_results.json").exists()
  assert not (out / "train_summary_local.json").exists()
  assert not (out / ".lock-local").exists()
  # A lock left by a dead process (SIGKILL) is taken over.
  (out / ".lock-local").write_text(json.dumps({"pid": 2 ** 22 + 12345,
                                               "host": socket.gethostname()}))
  run_tool("run_pretraining.py", _train_args(data_dir, out, stopped_at + 2, ["--do_train"]))
  summary = json.loads((out / "train_summary_local.json").read_text())
  assert summary["global_step"] == summary["num_train_steps"] == stopped_at + 2


def _write_checkpoint(shapes, prefix, seed=0):
  """A checkpoint of random float32 values of `shapes` ({name: shape}); returns the prefix."""
  rng = np.random.RandomState(seed)
  convert_hf_checkpoint.write_tf_checkpoint(
      {name: (0.02 * rng.randn(*shape)).astype(np.float32) for name, shape in shapes.items()},
      prefix)
  return prefix


def _etc_pretraining_checkpoint(prefix):
  """An ETC pre-training checkpoint: ETC's encoder and the masked-LM head BERT shares."""
  config = modeling.BertConfig.from_dict(TINY_CONFIG)
  shapes = {name: shape for name, shape in run_pretraining.head_shapes(config).items()
            if name.startswith("cls/predictions/")}
  shapes.update({"etc_document_bert/token_emb_lookup/embedding_table": [30522, 32],
                 "etc_document_bert/global_local_transformer_layers/long_fused_att_layer_0/"
                 "layer_norm_0/gamma": [32]})
  return _write_checkpoint(shapes, prefix)


def test_an_init_checkpoint_of_another_model_is_one_line(data_dir, tmp_path):
  # An ETC pre-training checkpoint fills the 5 variables of the shared masked-LM head and none
  # of BERT's: it used to train a random BERT after an INFO line.
  etc = _etc_pretraining_checkpoint(str(tmp_path / "etc" / "model.ckpt"))
  out = tmp_path / "out"
  result = run_tool("run_pretraining.py", _train_args(
      data_dir, out, 2, ["--do_train", "--init_checkpoint=%s" % etc]), expect_rc=2)
  assert last_error_line(result) == (
      "error: --init_checkpoint=%s: supplies 5 of the model's 46 variables but none of its 37 "
      "encoder variables (missing: bert/embeddings/word_embeddings, bert/embeddings/"
      "token_type_embeddings, bert/embeddings/position_embeddings, ...); a checkpoint of another "
      "model or config? pass --allow_unmatched_init to train the missing ones from random "
      "weights" % etc)
  assert "Traceback" not in result.output
  assert not [name for name in os.listdir(out) if name.startswith("model.ckpt")]


def test_an_output_dir_holding_a_checkpoint_made_for_initialising_is_one_line(data_dir, tmp_path):
  config = modeling.BertConfig.from_dict(TINY_CONFIG)
  encoder = estimator_utils.bert_variable_shapes(config)
  # A converted Hugging Face model (the encoder only) and an official-style release (encoder
  # and heads, no optimizer slots, no global_step): both go in --init_checkpoint.
  converted = _write_checkpoint(encoder, str(tmp_path / "converted" / "model.ckpt"))
  release = _write_checkpoint(dict(encoder, **run_pretraining.head_shapes(config)),
                              str(tmp_path / "release" / "bert_model.ckpt"))
  for prefix, action, problem in (
      (converted, "--do_train", "it lacks cls/predictions/output_bias and 6 more of this job's "
                                "model; use the config it was trained with, or"),
      (release, "--do_train", "it has no global_step (a checkpoint made for initialising, e.g. "
                              "lifted, converted or slimmed); use"),
      (release, "--do_eval", "it has no global_step (a checkpoint made for initialising, e.g. "
                             "lifted, converted or slimmed); use")):
    directory = os.path.dirname(prefix)
    listing = sorted(os.listdir(directory))
    result = run_tool("run_pretraining.py", _train_args(data_dir, directory, 2, [action]),
                      expect_rc=2)
    assert last_error_line(result) == (
        "error: --output_dir=%s: its checkpoint %s is not a checkpoint of this job: %s a new "
        "--output_dir with --init_checkpoint=%s to start from its weights" % (
            directory, os.path.basename(prefix), problem, prefix)), action
    assert "Traceback" not in result.output
    assert sorted(os.listdir(directory)) == listing


def test_allow_unmatched_init_trains_the_missing_variables_from_random(data_dir, tmp_path):
  etc = _etc_pretraining_checkpoint(str(tmp_path / "etc" / "model.ckpt"))
  out = tmp_path / "out"
  result = run_tool("run_pretraining.py", _train_args(
      data_dir, out, 2, ["--do_train", "--init_checkpoint=%s" % etc, "--allow_unmatched_init"]))
  assert ("WARNING:tensorflow:--init_checkpoint=%s: supplies 5 of the model's 46 variables but "
          "none of its 37 encoder variables" % etc) in result.output
  assert "; 37 encoder variables start from random weights (--allow_unmatched_init)" in (
      result.output)
  assert json.loads((out / "train_summary_local.json").read_text())["global_step"] == 2


@pytest.mark.slow
def test_resume_and_eval_mistakes_are_one_line_errors(data_dir, tmp_path):
  out = tmp_path / "out"
  run_tool("run_pretraining.py", _train_args(data_dir, out, 2, ["--do_train"]))
  config_before = (out / "bert_config.json").read_text()
  wider = tmp_path / "wider.json"
  wider.write_text(json.dumps(dict(TINY_CONFIG, hidden_size=64, intermediate_size=128)))
  result = run_tool("run_pretraining.py", _train_args(data_dir, out, 4, ["--do_train"]) +
                    ["--bert_config_file=%s" % wider], expect_rc=2)
  last = last_error_line(result)
  assert last.startswith("error: --output_dir=") and "of shape [32] but" in last, last
  assert (out / "bert_config.json").read_text() == config_before
  # --do_eval on a directory without a checkpoint would score a random model.
  result = run_tool("run_pretraining.py", _train_args(data_dir, tmp_path / "empty", 2,
                                                      ["--do_eval"]), expect_rc=2)
  assert "--allow_random_eval" in last_error_line(result)
  # Token ids beyond the config's vocab_size.
  small = tmp_path / "small.json"
  small.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=1000)))
  result = run_tool("run_pretraining.py", _train_args(data_dir, tmp_path / "o2", 2,
                                                      ["--do_train"]) +
                    ["--bert_config_file=%s" % small], expect_rc=2)
  assert "vocab_size=1000" in last_error_line(result)
  # output_dir that is a file.
  (tmp_path / "afile").write_text("x")
  result = run_tool("run_pretraining.py", _train_args(data_dir, tmp_path / "afile", 2,
                                                      ["--do_train"]), expect_rc=2)
  assert "is a file" in last_error_line(result)


def test_default_warmup_is_official_for_long_runs_and_a_tenth_for_short_ones():
  assert pretraining_utils.default_warmup_steps(1000000) == 10000
  assert pretraining_utils.default_warmup_steps(100000) == 10000
  assert pretraining_utils.default_warmup_steps(3000) == 300
  assert pretraining_utils.default_warmup_steps(5) == 0


def test_eval_counts_every_record_once_or_the_repeated_steps(data_dir):
  files = [str(data_dir / "data.tfrecord")]
  records = sum(1 for _ in tf1.io.tf_record_iterator(files[0]))
  assert records % 8  # the last batch is partial: counted, or dropped on TPU
  assert pretraining_utils.eval_counts(files, 8, None, False) == {
      "eval_examples": records, "eval_records": records}
  assert pretraining_utils.eval_counts(files, 8, None, True)["eval_examples"] == records // 8 * 8
  assert pretraining_utils.eval_counts(files, 8, 100, False) == {
      "eval_examples": 800, "eval_records": records}


@pytest.mark.slow
def test_a_short_run_with_defaults_warms_up_and_evaluates_each_record_once(data_dir, tmp_path):
  out = tmp_path / "out"
  args = [a for a in _train_args(data_dir, out, 6, ["--do_train", "--do_eval"])
          if not a.startswith("--num_warmup_steps")]
  result = run_tool("run_pretraining.py", args)
  assert "Warm-up: 0 of 6 steps" in result.output
  results = json.loads((out / "eval_results.json").read_text())
  records = sum(1 for _ in tf1.io.tf_record_iterator(str(data_dir / "data.tfrecord")))
  assert results["eval_examples"] == results["eval_records"] == records
  assert "eval_examples = %d" % records in (out / "eval_results.txt").read_text()


def test_a_config_vocab_size_other_than_the_datas_is_one_line(data_dir, tmp_path):
  # The data was made with data/vocab.txt (30,522 entries, recorded in its summary).
  summary = json.loads((data_dir / "data.summary.json").read_text())
  assert summary["vocab_size"] == 30522
  big = tmp_path / "big_config.json"
  big.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=40000)))
  args = [a.replace(str(data_dir / "bert_config.json"), str(big))
          for a in _train_args(data_dir, tmp_path / "out", 2, ["--do_train"])]
  result = run_tool("run_pretraining.py", args, expect_rc=2)
  assert last_error_line(result) == (
      "error: --input_file: %s was made with a 30522-entry vocab, but --bert_config_file=%s has "
      "vocab_size 40000 (an embedding 1.3x too big); pass --vocab_size=30522 (or a larger "
      "--vocab_size on purpose, e.g. a multiple of 128 for TPU)" % (data_dir / "data.tfrecord",
                                                                    big))
  assert not (tmp_path / "out").exists()
  small = tmp_path / "small_config.json"
  small.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=1000)))
  args = [a.replace(str(data_dir / "bert_config.json"), str(small))
          for a in _train_args(data_dir, tmp_path / "out", 2, ["--do_train", "--vocab_size=30000"])]
  result = run_tool("run_pretraining.py", args, expect_rc=2)
  assert "30522-entry vocab, but the model's vocab_size is 30000 (--vocab_size)" in (
      last_error_line(result))


@pytest.mark.slow
def test_vocab_size_flag_sets_the_models_size(data_dir, tmp_path):
  big = tmp_path / "template.json"
  big.write_text(json.dumps(dict(TINY_CONFIG, vocab_size=40000)))
  out = tmp_path / "out"
  args = [a.replace(str(data_dir / "bert_config.json"), str(big))
          for a in _train_args(data_dir, out, 2, ["--do_train", "--vocab_size=30592"])]
  run_tool("run_pretraining.py", args)  # a larger size given on purpose (a multiple of 128)
  assert json.loads((out / "bert_config.json").read_text())["vocab_size"] == 30592
  shapes = dict(tf.train.list_variables(str(out)))
  assert shapes["bert/embeddings/word_embeddings"] == [30592, 32]
