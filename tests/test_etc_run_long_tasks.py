"""Tests of etc_model.run_long_tasks / etc_model.long_task_heads: the cloze loss and metrics and
the supporting-sentence F1 / exact match against hand-made references, one tiny train + eval +
predict job from a lifted checkpoint, and a one-line error."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import create_pretraining_data as bert_data
from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool
from conftest import write_random_bert_checkpoint
from etc_model import create_long_tasks
from etc_model import etc_modeling
from etc_model import lift_bert_checkpoint as lift
from etc_model import long_task_heads as heads
from etc_model import run_long_tasks
from test_etc_long_tasks import _corpus, _settings

tf1 = tf.compat.v1
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
L, G, C = 64, 12, 4
TINY_ETC_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "intermediate_size": 64, "local_radius": 8,
                   "relative_pos_max_distance": 4, "relative_vocab_size": 12,
                   "residual_attention": "sum", "use_hard_g2l_mask": True}


def test_cloze_loss_and_metrics_against_numpy_by_hand():
  logits = np.array([[2.0, 1.0, 0.5, 9.0],    # padding candidate 3 ignored: argmax 0
                     [0.0, 3.0, 1.0, -1.0],   # argmax 1
                     [1.0, 1.0, 4.0, 0.0],    # argmax 2
                     [0.5, 0.2, 0.1, 0.0]])   # argmax 0
  mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0]])
  labels = np.array([0, 2, 2, 1])
  # NumPy reference: log-sum-exp over the real candidates minus the answer's logit.
  want_loss = np.mean([np.log(np.exp(row[m > 0]).sum()) - row[y]
                       for row, m, y in zip(logits, mask, labels)])
  metrics = heads.cloze_metrics(logits, mask, labels, answer_distance=[5, 130, 600, 3000],
                                most_frequent=[0, 0, 2, 0], most_recent=[1, 2, 2, 1])
  assert metrics["accuracy"] == 0.5 and metrics["examples"] == 4
  assert metrics["most_frequent_accuracy"] == 0.5 and metrics["most_recent_accuracy"] == 0.75
  assert metrics["loss"] == pytest.approx(want_loss, rel=1e-12)
  # One example per long_tasks bucket: right, wrong, right, wrong.
  assert [metrics["distance_%s_accuracy" % b] for b in ("0-127", "128-511", "512-2047",
                                                        "2048+")] == [1.0, 0.0, 1.0, 0.0]
  assert metrics["distance_2048+_most_recent_accuracy"] == 1.0
  # The TF head: its loss is that of its masked logits (padding at MASKED_LOGIT), by NumPy.
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    global_output = tf.constant(np.random.RandomState(0).randn(4, G, 32), tf.float32)
    loss, per_example, got_logits = heads.cloze_head(
        global_output, tf.constant(mask), tf.constant(labels[:, None]), config, False)
    names = sorted(v.op.name for v in tf1.global_variables())
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      loss, per_example, got_logits = sess.run([loss, per_example, got_logits])
  assert names == ["cls/long_tasks/cloze/output_bias", "cls/long_tasks/cloze/output_weights"]
  assert np.all(got_logits[mask == 0] == heads.MASKED_LOGIT)
  assert loss == pytest.approx(heads.cloze_loss(got_logits, mask, labels), rel=1e-5)
  assert per_example.shape == (4,)


def test_supporting_f1_and_exact_match_by_hand():
  ids = np.array([[5, 5, 5, 5, 0], [5, 5, 5, 0, 0], [5, 5, 5, 5, 5]])
  gold = np.array([[0, 1, 1, 0, 0], [1, 1, 0, 0, 0], [0, 0, 0, 1, 1]])
  # Example 0: exactly right. Example 1: predicts sentence 0 only (p 1, r 1/2) and a padding
  # token (ignored). Example 2: predicts 2 and 3 (p 1/2, r 1/2).
  logits = np.array([[-1.0, 2.0, 0.5, -3.0, 9.0], [1.0, -1.0, -2.0, -1.0, 5.0],
                     [-1.0, -1.0, 1.0, 1.0, -1.0]])
  metrics = heads.supporting_metrics(logits, gold, ids)
  assert metrics["examples"] == 3
  assert metrics["exact_match"] == pytest.approx(1.0 / 3)
  assert metrics["precision"] == pytest.approx((1 + 1 + 0.5) / 3)
  assert metrics["recall"] == pytest.approx((1 + 0.5 + 0.5) / 3)
  assert metrics["f1"] == pytest.approx((1 + 2.0 / 3 + 0.5) / 3)
  # Micro: tp 2 + 1 + 1, fp 0 + 0 + 1, fn 0 + 1 + 1.
  assert metrics["micro_f1"] == pytest.approx(8.0 / (8 + 1 + 2))
  assert metrics["sentence_accuracy"] == pytest.approx((4 + 2 + 3) / 12.0)
  # The loss skips the global padding.
  real = ids > 0
  x = logits[real]
  z = gold[real]
  want = np.mean(-z * np.log(1 / (1 + np.exp(-x))) - (1 - z) * np.log(1 - 1 / (1 + np.exp(-x))))
  assert heads.supporting_loss(logits, gold, ids) == pytest.approx(want, rel=1e-9)
  # The TF head's loss is the NumPy one of its logits; the predictions file lists the sentences.
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    global_output = tf.constant(np.random.RandomState(1).randn(3, 5, 32), tf.float32)
    loss, _, got_logits = heads.supporting_head(global_output, tf.constant(ids),
                                                tf.constant(gold), config, False)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      loss, got_logits = sess.run([loss, got_logits])
  assert loss == pytest.approx(heads.supporting_loss(got_logits, gold, ids), rel=1e-5)
  lines = run_long_tasks.prediction_lines("supporting", {
      "logits": logits, "sentence_labels": gold, "global_token_ids": ids})
  assert [(l["predicted_sentences"], l["gold_sentences"]) for l in lines] == [
      ([1, 2], [1, 2]), ([0], [0, 1]), ([2, 3], [3, 4])]
  assert [len(l["probabilities"]) for l in lines] == [4, 3, 5]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp("etc_long_tasks_run")
  _corpus(str(root / "corpus.txt"))
  tokenizer = bert_data.make_tokenizer(VOCAB, True)
  summary = create_long_tasks.create_long_tasks(
      [str(root / "corpus.txt")], str(root / "data"), tokenizer,
      _settings(tokenizer, max_seq_length=L, max_global_seq_length=G, max_candidates=C))
  (root / "etc_config.json").write_text(json.dumps(TINY_ETC_CONFIG))
  return {"root": root, "summary": summary}


def _args(data, task, out, extra=()):
  root = data["root"]
  return ["-m", "etc_model.run_long_tasks", "--task=%s" % task,
          "--data_dir=%s" % (root / "data"), "--etc_config_file=%s" % (root / "etc_config.json"),
          "--output_dir=%s" % out, "--max_seq_length=%d" % L, "--max_global_seq_length=%d" % G,
          "--max_candidates=%d" % C, "--train_batch_size=4", "--eval_batch_size=4",
          "--predict_batch_size=4", "--learning_rate=1e-3",
          "--save_checkpoints_steps=100"] + list(extra)


@pytest.mark.slow
def test_cloze_train_eval_predict_from_a_lifted_checkpoint(data, tmp_path):
  bert_config = tmp_path / "bert_config.json"
  bert_config.write_text(json.dumps(TINY_BERT_CONFIG))
  write_random_bert_checkpoint(str(bert_config), str(tmp_path / "bert.ckpt"))
  lifted = lift.lift_bert_checkpoint(str(tmp_path / "bert.ckpt"), str(tmp_path / "lifted"),
                                     etc_config_file=str(data["root"] / "etc_config.json"))
  out = tmp_path / "out"
  result = run_tool(None, _args(data, "cloze", out, [
      "--init_checkpoint=%s" % lifted["output_checkpoint"], "--do_train", "--do_eval",
      "--do_predict", "--num_train_steps=2", "--eval_every_steps=2", "--keep_best"]))
  # Every ETC variable comes from the lifted BERT; only the head's two are new.
  loaded = re.search(r"init_checkpoint \S+: (\d+) variables loaded, (\d+) not in checkpoint: "
                     r"(.*)", result.output)
  assert loaded and int(loaded.group(2)) == 2, result.output[-3000:]
  assert sorted(loaded.group(3).split(", ")) == ["cls/long_tasks/cloze/output_bias:0",
                                                 "cls/long_tasks/cloze/output_weights:0"]
  examples = data["summary"]["examples"]["cloze"]
  results = json.loads((out / "eval_results.json").read_text())
  assert results["examples"] == examples["dev"] and results["global_step"] == 2
  assert results["checkpoint"] == str(out / "best" / "model.ckpt-2")
  assert results["scored_checkpoint"] == "best" and results["num_evaluations"] == 1
  # The baselines of the records are those create_long_tasks counted.
  dev_baselines = data["summary"]["cloze_baselines"]["dev"]
  assert results["most_recent_accuracy"] == pytest.approx(
      dev_baselines["most_recent_accuracy"], abs=1e-4)
  history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().split("\n")
             if line]
  assert [h["step"] for h in history] == [2]
  assert history[0]["score"] == results["accuracy"]
  # The predictions file: one line per test record, its accuracy that of test_results.json.
  lines = [json.loads(line) for line in
           (out / "test_predictions.jsonl").read_text().splitlines()]
  test = json.loads((out / "test_results.json").read_text())
  assert len(lines) == examples["test"] == test["examples"]
  assert np.mean([l["prediction"] == l["label"] for l in lines]) == pytest.approx(
      test["accuracy"])
  assert all(abs(sum(l["probabilities"]) - 1) < 1e-4 for l in lines)
  sidecar = json.loads((out / "test_predictions.jsonl.checkpoint.json").read_text())
  assert sidecar == {"checkpoint": results["checkpoint"], "global_step": 2}
  assert not (out / ".lock-local").exists()


def test_records_of_other_lengths_are_one_line(data, tmp_path):
  result = run_tool(None, _args(data, "supporting", tmp_path / "out", [
      "--do_train", "--max_global_seq_length=16"]), expect_rc=2)
  assert last_error_line(result) == (
      "error: --data_dir: %s has global_token_ids of length %d but --max_global_seq_length=16"
      % (data["root"] / "data" / "supporting_train.tfrecord", G))
  assert not (tmp_path / "out").exists()
