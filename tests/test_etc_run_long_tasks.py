"""Tests of etc_model.run_long_tasks / etc_model.long_task_heads: the cloze loss and metrics,
the supporting-sentence F1 / exact match and the classification accuracy / macro F1 against
hand-made references, one tiny train + eval + predict job from a lifted checkpoint per task
(cloze, classify), and one-line errors."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf import common
import modeling
from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool
from conftest import write_random_bert_checkpoint
from etc_model import bert_windows
from etc_model import create_long_tasks
from etc_model import etc_estimator
from etc_model import etc_modeling
from etc_model import lift_bert_checkpoint as lift
from etc_model import long_task_heads as heads
from etc_model import run_long_tasks
from realformer_tf import pretraining_data
from realformer_tf import sliding_window
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
  # Thresholds between the distinct real logits -3 -2 -1 0.5 1 2: at -1.5 example 0 predicts
  # -1 2 0.5 (F1 0.8), example 1 predicts 1 -1 (F1 1), example 2 every sentence (F1 4/7): the
  # best mean (-4: 0.679, -2.5: 0.724, -0.25: 0.722, 0.75: 0.611). R-precision: the top 2 of
  # each are 2 0.5 (both inserted), 1 -1 (both), sentences 2 and 3 (the tie in order: one).
  ranking = heads.supporting_ranking_metrics(logits, gold, ids)
  assert ranking["best_threshold"] == -1.5
  assert ranking["best_threshold_f1"] == pytest.approx((0.8 + 1 + 4.0 / 7) / 3)
  assert ranking["r_precision"] == pytest.approx(2.5 / 3)
  assert heads.supporting_metrics(logits, gold, ids, threshold=-1.5)["f1"] == pytest.approx(
      ranking["best_threshold_f1"])
  # Equal logits: every sentence (threshold 0) or none (2) are the only choices.
  flat = heads.supporting_ranking_metrics(np.ones_like(logits), gold, ids)
  assert flat["best_threshold"] == 0.0 and flat["best_threshold_f1"] == pytest.approx(
      heads.supporting_metrics(np.ones_like(logits), gold, ids)["f1"])
  # No inserted sentence: F1 0 at every threshold; of equal F1s the higher threshold (none).
  none = heads.supporting_ranking_metrics(np.array([[1.0, 2.0]]), np.array([[0, 0]]),
                                          np.array([[5, 5]]))
  assert none == {"best_threshold": 3.0, "best_threshold_f1": 0.0, "r_precision": None}
  # Random examples with tied logits against every threshold tried one by one.
  rng = np.random.RandomState(5)
  many_ids = (rng.rand(40, 12) < 0.8).astype(np.int32) * 7
  many_labels = (rng.rand(40, 12) < 0.35).astype(np.int32)
  many_logits = np.round(rng.randn(40, 12), 1)  # many equal logits
  ranking = heads.supporting_ranking_metrics(many_logits, many_labels, many_ids)
  values = np.unique(many_logits[many_ids > 0])
  tried = np.concatenate([[values[0] - 1], (values[:-1] + values[1:]) / 2, [values[-1] + 1]])
  f1s = [heads.supporting_metrics(many_logits, many_labels, many_ids, threshold=t)["f1"]
         for t in tried]
  assert ranking["best_threshold_f1"] == pytest.approx(max(f1s), abs=1e-12)
  assert ranking["best_threshold"] == pytest.approx(
      max(t for t, f in zip(tried, f1s) if f >= max(f1s) - 1e-12))
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


def test_classify_metrics_and_head_by_hand():
  names = ["austen", "melville", "wells"]
  logits = np.array([[2.0, 1.0, 0.0],   # predicts 0, gold 0
                     [0.0, 3.0, 1.0],   # predicts 1, gold 0
                     [0.0, 1.0, 4.0],   # predicts 2, gold 2
                     [5.0, 1.0, 0.0],   # predicts 0, gold 1
                     [1.0, 0.0, 0.0]])  # predicts 0, gold 0
  labels = np.array([[0], [0], [2], [1], [0]])
  metrics = heads.classify_metrics(logits, labels, names)
  assert metrics["examples"] == 5 and metrics["accuracy"] == pytest.approx(0.6)
  # Per class F1 = 2tp / (2tp + fp + fn): austen 2*2/(4+1+1), melville 0, wells 2/2.
  assert metrics["macro_f1"] == pytest.approx((4.0 / 6 + 0 + 1) / 3)
  assert metrics["majority_share"] == pytest.approx(0.6)
  assert metrics["per_class"] == {
      "austen": {"examples": 3, "predicted": 3, "correct": 2, "f1": pytest.approx(4.0 / 6)},
      "melville": {"examples": 1, "predicted": 1, "correct": 0, "f1": 0.0},
      "wells": {"examples": 1, "predicted": 1, "correct": 1, "f1": 1.0}}
  want_loss = np.mean([np.log(np.exp(row).sum()) - row[y] for row, y in zip(logits, labels[:, 0])])
  assert metrics["loss"] == pytest.approx(want_loss, rel=1e-12)
  # A class never gold nor predicted is left out of the macro mean.
  assert heads.classify_metrics(logits[:3], labels[:3], names + ["verne"])["macro_f1"] == (
      pytest.approx((2.0 / 3 + 0 + 1) / 3))
  lines = run_long_tasks.prediction_lines("classify", {"logits": logits, "label": labels}, names)
  assert [(l["predicted_label"], l["gold_label"]) for l in lines[:2]] == [
      ("austen", "austen"), ("melville", "austen")]
  assert all(abs(sum(l["probabilities"]) - 1) < 1e-4 for l in lines)
  # The TF head: logits = mean of the real global tokens' outputs times W^T plus b, by NumPy.
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  ids = np.array([[5, 5, 0, 0, 0], [5, 5, 5, 5, 0]])
  global_output = np.random.RandomState(2).randn(2, 5, 32).astype(np.float32)
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    loss, _, got_logits = heads.classify_head(tf.constant(global_output), tf.constant(ids),
                                              tf.constant([[1], [2]]), 3, config, False)
    variables = {v.op.name: v for v in tf1.global_variables()}
    assert sorted(variables) == ["cls/long_tasks/classify/output_bias",
                                 "cls/long_tasks/classify/output_weights"]
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      sess.run(variables["cls/long_tasks/classify/output_bias"].assign([0.5, -1.0, 2.0]))
      loss, got_logits, weights = sess.run(
          [loss, got_logits, variables["cls/long_tasks/classify/output_weights"]])
  pooled = np.stack([global_output[0, :2].mean(0), global_output[1, :4].mean(0)])
  np.testing.assert_allclose(got_logits, pooled @ weights.T + [0.5, -1.0, 2.0], atol=1e-5)
  assert loss == pytest.approx(heads.classify_loss(got_logits, [1, 2]), rel=1e-5)


def test_stack_rows_fills_arrays_of_the_final_size():
  rng = np.random.RandomState(0)
  rows = [{"logits": rng.randn(5).astype(np.float32), "label": np.int32(i)} for i in range(4)]
  want = {key: np.stack([row[key] for row in rows]) for key in rows[0]}
  got = run_long_tasks.stack_rows(iter(rows), 4, "dev.tfrecord")
  assert sorted(got) == sorted(want)
  for key in want:
    assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape
    np.testing.assert_array_equal(got[key], want[key])
  # Fewer or more rows than the file's records, or a row of another shape, is an error (never
  # a silently short or broadcast output).
  for count, message in ((5, "gave 4 rows for its 5 records"), (3, "more rows than its 3")):
    with pytest.raises(ValueError, match=message):
      run_long_tasks.stack_rows(iter(rows), count, "dev.tfrecord")
  ragged = rows[:2] + [{"logits": np.zeros(1, np.float32), "label": np.int32(2)}]
  with pytest.raises(ValueError, match=r"row 2 has logits of shape \(1,\), the first \(5,\)"):
    run_long_tasks.stack_rows(iter(ragged), 3, "dev.tfrecord")

def test_classify_label_vocabulary_checks(tmp_path):
  records = tmp_path / "classify_dev.tfrecord"
  with tf.io.TFRecordWriter(str(records)) as writer:
    for label in (0, 2):
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}))
                   .SerializeToString())
  saved = tmp_path / "out" / run_long_tasks.LABELS_NAME
  saved.parent.mkdir()
  saved.write_text(json.dumps(["a", "b", "c"]))
  check = lambda labels: run_long_tasks.check_label_vocabulary(
      labels, "d", [str(records)], {"--output_dir=o": str(saved), "--init_checkpoint=i": "none"})
  assert check(["a", "b", "c"]) == ["a", "b", "c"]
  with pytest.raises(common.UsageError, match=r"^--data_dir=d: its 3 classify_labels differ "
                     r"from the 3 of the model in --output_dir=o \(classify_labels.json; first "
                     r"difference: 'x' vs 'c'\)$"):
    check(["a", "b", "x"])
  with pytest.raises(common.UsageError, match=r"^--data_dir=d: classify_dev.tfrecord has label "
                     r"2, outside the 2 classify_labels of its long_tasks.json$"):
    check(["a", "b"])
  with pytest.raises(common.UsageError, match=r"has no classify_labels \(data of an earlier"):
    check(None)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp("etc_long_tasks_run")
  _corpus(str(root / "corpus.txt"))
  tokenizer = pretraining_data.make_tokenizer(VOCAB, True)
  summary = create_long_tasks.create_long_tasks(
      [str(root / "corpus.txt")], str(root / "data"), tokenizer,
      _settings(tokenizer, max_seq_length=L, max_global_seq_length=G, max_candidates=C),
      extra_settings={"vocab_file": VOCAB})
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
  bert_config = _tiny_bert_config(tmp_path)
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
  # The job scored with --padding=longest (the default); max_length gives the same metrics.
  run_tool(None, _args(data, "cloze", out, ["--do_eval", "--keep_best", "--padding=max_length"]))
  fixed = json.loads((out / "eval_results.json").read_text())
  assert fixed["checkpoint"] == results["checkpoint"]
  metrics = [k for k, v in fixed.items() if isinstance(v, float) and k != "eval_seconds"]
  assert "accuracy" in metrics and "loss" in metrics
  for key in metrics:
    assert fixed[key] == pytest.approx(results[key], abs=1e-5), key
  # The sliding-window BERT baseline from the same BERT weights: every bert/ variable loaded,
  # its head new, and eval_results.json with the ETC job's keys.
  bert_out = tmp_path / "bert_out"
  result = run_tool(None, _args(data, "cloze", bert_out, _bert_flags(bert_config) + [
      "--init_checkpoint=%s" % (tmp_path / "bert.ckpt"), "--do_train", "--do_eval",
      "--num_train_steps=2", "--eval_every_steps=2", "--keep_best"]))
  loaded = re.search(r"init_checkpoint \S+: (\d+) variables loaded, (\d+) not in checkpoint: "
                     r"(.*)", result.output)
  assert loaded and int(loaded.group(1)) == len(tf.train.list_variables(
      str(tmp_path / "bert.ckpt"))), result.output[-3000:]
  assert sorted(loaded.group(3).split(", ")) == ["cls/long_tasks_bert/cloze/output_bias:0",
                                                 "cls/long_tasks_bert/cloze/output_weights:0"]
  bert_results = json.loads((bert_out / "eval_results.json").read_text())
  assert sorted(bert_results) == sorted(results)
  assert (results["model"], results["window_length"]) == ("etc", None)
  assert (bert_results["model"], bert_results["window_length"]) == ("bert_windows", 24)
  assert bert_results["examples"] == examples["dev"] and bert_results["global_step"] == 2
  assert bert_results["most_recent_accuracy"] == results["most_recent_accuracy"]
  assert json.loads((bert_out / "bert_config.json").read_text())["hidden_size"] == 32


def _tiny_bert_config(directory):
  """Writes TINY_BERT_CONFIG to directory/bert_config.json; returns its path."""
  path = directory / "bert_config.json"
  path.write_text(json.dumps(TINY_BERT_CONFIG))
  return path


def _bert_flags(bert_config):
  return ["--model=bert_windows", "--bert_config_file=%s" % bert_config, "--window_length=24",
          "--window_stride=11"]


def test_bert_windows_cut_max_context_and_mentions_by_hand():
  # 11 tokens in windows of 8 ([CLS] 6 tokens [SEP]), stride 3: (0, 6), (3, 6), (6, 5), the
  # last ending at the text's end; the static windows of a 20-token input start 0, 3, ..., 15.
  assert bert_windows.window_starts(20, 8, 3) == [0, 3, 6, 9, 12, 15]
  with tf.Graph().as_default():
    chosen = bert_windows.token_windows(tf.constant([[5] * 11 + [0] * 9]), 8, 3)
    with tf1.Session() as sess:
      window, position = (a[0] for a in sess.run(chosen))
  # Most context, min(left, right) then the longer window then the first: token 3 in window 0
  # (2 vs 0), 4 a tie (1 vs 1, both 6 long: the first), 5 window 1 (0 vs 2), 7 window 1 (1 vs 1,
  # 6 long vs 5), 8 window 2 (0 vs 2). Positions count [CLS] as 0; the padding is 0, 0.
  assert window.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2] + [0] * 9
  assert position.tolist() == [1, 2, 3, 4, 5, 3, 4, 5, 3, 4, 5] + [0] * 9
  text = list(range(5, 16))  # ids 5..15
  candidates = [[7, 8, 9, 5, 9, 7, 6, 8, 7, 8, 103, 4]]  # candidate 0: 7 8, candidate 1: 9
  sentences = [[0, 0, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3]]
  with tf.Graph().as_default():
    ids = tf.constant([text + [0] * 9, [5, 6] + [0] * 18])
    inputs = bert_windows.window_inputs(ids, 8, 3, 101, 102)
    mentions = bert_windows.candidate_mentions(
        tf.constant([c + [0] * 4 for c in candidates]), tf.constant([s + [0] * 4
                                                                     for s in sentences]),
        tf.constant([[1, 1, 0]]))
    with tf1.Session() as sess:
      (input_ids, input_mask, num_tokens), mentions = sess.run([inputs, mentions])
  assert num_tokens.tolist() == [11, 2] and input_ids.shape == (2, 6, 8)
  assert input_ids[0, :3].tolist() == [[101, 5, 6, 7, 8, 9, 10, 102],
                                       [101, 8, 9, 10, 11, 12, 13, 102],
                                       [101, 11, 12, 13, 14, 15, 102, 0]]
  assert input_ids[1, 0].tolist() == [101, 5, 6, 102, 0, 0, 0, 0]
  # Padding windows: all 0, masked.
  assert not input_ids[0, 3:].any() and not input_ids[1, 1:].any()
  assert input_mask.sum(axis=2).tolist() == [[8, 8, 7, 0, 0, 0], [4, 0, 0, 0, 0, 0]]
  # Candidate 0 (7 8) at 0-1 (its own pieces) and 8-9, not the lone 7 or 8; candidate 1 (9) at
  # 2 and 4; candidate 2 is padding (sentence 2 is the context, not a candidate).
  assert mentions[0].astype(int).tolist() == [
      [1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0] + [0] * 4,
      [0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0] + [0] * 4, [0] * 16]
  # encode reads each token from BERT's output of its window at its position (the same
  # weights run on the windows' rows directly).
  config = dict(TINY_BERT_CONFIG, hidden_size=8, num_hidden_layers=1, intermediate_size=16,
                max_position_embeddings=8)
  windowed = bert_windows.BertWindowsConfig(modeling.BertConfig.from_dict(config), 8, 3, 101, 102)
  with tf.Graph().as_default():
    token_output = bert_windows.encode(windowed, tf.constant([text + [0] * 9]), False)
    with tf1.variable_scope("", reuse=True):
      direct = modeling.BertModel(
          windowed.bert_config, False, tf.constant(input_ids[0, :3]),
          tf.constant(input_mask[0, :3]), scope="bert").get_sequence_output()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      token_output, direct = sess.run([token_output, direct])
  np.testing.assert_allclose(token_output[0, :11], direct[window[:11], position[:11]], atol=1e-6)


@pytest.mark.parametrize("max_seq_length,window_length,stride",
                         [(20, 8, 3), (40, 12, 10), (33, 7, 1), (16, 18, 4), (132, 120, 114)])
def test_bert_windows_token_windows_are_the_librarys_choice(max_seq_length, window_length, stride):
  """The graph's window of every token of inputs of every length is
  sliding_window.max_context_window's (the last case: a tie that floating point would break the
  other way, sliding_window's docstring)."""
  lengths = list(range(max_seq_length + 1))
  token_ids = np.array([[7] * n + [0] * (max_seq_length - n) for n in lengths], np.int32)
  with tf.Graph().as_default():
    chosen = bert_windows.token_windows(tf.constant(token_ids), window_length, stride)
    with tf1.Session() as sess:
      window, position = sess.run(chosen)
  for row, n in enumerate(lengths):
    spans = sliding_window.windows(n, window_length - 2, stride)
    want = [sliding_window.max_context_window(spans, t) for t in range(n)]
    assert window[row, :n].tolist() == want, n
    assert position[row, :n].tolist() == [t - spans[w].start + 1 for t, w in enumerate(want)]
    assert not window[row, n:].any() and not position[row, n:].any()


def test_bert_windows_graphs_have_static_shapes_except_the_cloze():
  """What TPUs need: no Python in the graph, every tensor's shape known when it is built (the
  cloze matches mentions over a run-time length: --use_tpu refuses it)."""
  config = bert_windows.BertWindowsConfig(modeling.BertConfig.from_dict(
      dict(TINY_BERT_CONFIG, hidden_size=8, num_hidden_layers=1, intermediate_size=16)),
                                          12, 5, 101, 102)
  for task in bert_windows.TASKS:
    with tf.Graph().as_default() as graph:
      features = {name: tf1.placeholder(tf.int32, [2, length]) for name, length in
                  heads.feature_lengths(task, 32, 8, 4).items()}
      bert_windows.build_model(task, config, features, True, num_labels=3)
      dynamic = sorted(set(
          op.type for op in graph.get_operations() for t in op.outputs
          if op.type in ("PyFunc", "EagerPyFunc") or not t.shape.is_fully_defined()))
    assert bool(dynamic) == (task == "cloze"), (task, dynamic)


def test_bert_windows_embedding_adder_reaches_each_token_in_every_window(tmp_path):
  """A per-token input embedding (OpenKP's visual features) is added in every window holding the
  token: adding word_embeddings[y] - word_embeddings[x] to input x encodes as input y."""
  rng = np.random.RandomState(4)
  values = rng.randn(2, 20, 3).astype(np.float32)
  lengths = [11, 2]
  token_ids = np.zeros([2, 20], np.int32)
  for row, length in enumerate(lengths):
    token_ids[row, :length] = rng.randint(5, 50, size=length)
  with tf.Graph().as_default():
    laid_out = bert_windows.window_token_values(tf.constant(values), tf.constant(token_ids), 8, 3)
    with tf1.Session() as sess:
      laid_out = sess.run(laid_out)
  assert laid_out.shape == (2, 6, 8, 3)
  # Windows (0, 6), (3, 6), (6, 5) of the 11 tokens, (0, 2) of the 2: position p of window k
  # holds token start_k + p - 1; [CLS], [SEP], padding and padding windows get 0.
  want = np.zeros_like(laid_out)
  for row, windows in enumerate([[(0, 6), (3, 6), (6, 5)], [(0, 2)]]):
    for k, (start, length) in enumerate(windows):
      want[row, k, 1:length + 1] = values[row, start:start + length]
  np.testing.assert_array_equal(laid_out, want)

  config = dict(TINY_BERT_CONFIG, hidden_size=8, num_hidden_layers=1, intermediate_size=16,
                max_position_embeddings=8)
  windowed = bert_windows.BertWindowsConfig(modeling.BertConfig.from_dict(config), 8, 3, 101, 102)
  other_ids = np.where(token_ids > 0, rng.randint(5, 50, size=token_ids.shape), 0).astype(np.int32)
  checkpoint = str(tmp_path / "bert.ckpt")

  def encoded(ids, adder=None, save=False):
    """One graph each (BertModel's scope is "bert"): the first saves its random weights, the
    others restore them."""
    with tf.Graph().as_default():
      output = bert_windows.encode(windowed, tf.constant(ids), False, long_embedding_adder=(
          None if adder is None else tf.constant(adder)))
      saver = tf1.train.Saver()
      with tf1.Session() as sess:
        if save:
          sess.run(tf1.global_variables_initializer())
          saver.save(sess, checkpoint)
        else:
          saver.restore(sess, checkpoint)
        return sess.run(output)

  as_other = encoded(other_ids, save=True)
  table = tf.train.load_variable(checkpoint, "bert/embeddings/word_embeddings")
  added = encoded(token_ids, (table[other_ids] - table[token_ids]) *
                  (token_ids > 0)[:, :, np.newaxis])
  plain = encoded(token_ids)
  for row, length in enumerate(lengths):
    np.testing.assert_allclose(added[row, :length], as_other[row, :length], atol=1e-5)
    assert np.abs(plain[row, :length] - as_other[row, :length]).max() > 1e-2



def test_bert_windows_classify_head_against_numpy():
  """The document is the mean of its real tokens' states; dense -> labels; softmax CE."""
  rng = np.random.RandomState(3)
  token_output = rng.randn(2, 6, 8).astype(np.float32)
  token_ids = np.array([[5, 6, 7, 0, 0, 0], [9, 9, 9, 9, 9, 2]], np.int32)
  labels = np.array([[2], [0]], np.int32)
  config = bert_windows.BertWindowsConfig(modeling.BertConfig.from_dict(
      dict(TINY_BERT_CONFIG, hidden_size=8)), 8, 3, 101, 102)
  with tf.Graph().as_default():
    loss, per_example, logits = bert_windows.classify_head(
        tf.constant(token_output), {"token_ids": tf.constant(token_ids),
                                    "label": tf.constant(labels)}, config, False, num_labels=3)
    shapes = {v.op.name: v.shape.as_list() for v in tf1.global_variables()}
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      loss, per_example, logits, (weights, bias) = sess.run(
          [loss, per_example, logits, tf1.global_variables()])
  assert shapes == {"cls/long_tasks_bert/classify/output_weights": [3, 8],
                    "cls/long_tasks_bert/classify/output_bias": [3]}
  # Padding (token id 0) is not pooled: the first document is the mean of its 3 tokens.
  pooled = np.stack([token_output[0, :3].mean(axis=0), token_output[1].mean(axis=0)])
  np.testing.assert_allclose(logits, pooled @ weights.T + bias, atol=1e-5)
  assert loss == pytest.approx(heads.classify_loss(logits, labels), abs=1e-5)
  assert per_example.shape == (2,)
  with tf.Graph().as_default(), pytest.raises(ValueError, match="needs num_labels"):
    bert_windows.build_model("classify", config, {"token_ids": tf.constant(token_ids)}, False)

@pytest.mark.slow
def test_classify_train_eval_predict(data, tmp_path):
  out = tmp_path / "out"
  run_tool(None, _args(data, "classify", out, ["--do_train", "--do_eval", "--do_predict",
                                               "--num_train_steps=2", "--nouse_hard_g2l_mask"]))
  # --nouse_hard_g2l_mask overrides the file's hard g2l mask; the output's config says so.
  assert TINY_ETC_CONFIG["use_hard_g2l_mask"]
  saved_config = json.loads((out / run_long_tasks.CONFIG_NAME).read_text())
  assert saved_config["use_hard_g2l_mask"] is False
  assert saved_config["residual_attention"] == TINY_ETC_CONFIG["residual_attention"]
  labels = data["summary"]["classify_labels"]
  examples = data["summary"]["examples"]["classify"]
  assert json.loads((out / run_long_tasks.LABELS_NAME).read_text()) == labels
  results = json.loads((out / "eval_results.json").read_text())
  assert results["examples"] == examples["dev"] and results["global_step"] == 2
  assert results["labels"] == labels and results["task"] == "classify"
  assert sum(c["examples"] for c in results["per_class"].values()) == examples["dev"]
  assert results["majority_share"] == pytest.approx(
      data["summary"]["classify_baselines"]["dev"]["split_majority_share"], abs=1e-4)
  # The predictions file names the labels; its accuracy is that of test_results.json.
  lines = [json.loads(line) for line in
           (out / "test_predictions.jsonl").read_text().splitlines()]
  test = json.loads((out / "test_results.json").read_text())
  assert len(lines) == examples["test"] == test["examples"]
  assert all(l["gold_label"] == labels[l["label"]] and len(l["probabilities"]) == len(labels)
             for l in lines)
  assert np.mean([l["predicted_label"] == l["gold_label"] for l in lines]) == pytest.approx(
      test["accuracy"])


@pytest.mark.slow
def test_bert_windows_supporting_train_eval_predict(data, tmp_path):
  bert_config = _tiny_bert_config(tmp_path)
  out = tmp_path / "out"
  run_tool(None, _args(data, "supporting", out, _bert_flags(bert_config) + [
      "--do_train", "--do_eval", "--do_predict", "--num_train_steps=2"]))
  examples = data["summary"]["examples"]["supporting"]
  results = json.loads((out / "eval_results.json").read_text())
  assert results["examples"] == examples["dev"] and results["global_step"] == 2
  assert results["task"] == "supporting" and results["model"] == "bert_windows"
  # One logit a sentence: the predictions file's sentences give test_results.json's F1.
  lines = [json.loads(line) for line in
           (out / "test_predictions.jsonl").read_text().splitlines()]
  test = json.loads((out / "test_results.json").read_text())
  assert len(lines) == examples["test"] == test["examples"]
  f1 = []
  for line in lines:
    tp = len(set(line["predicted_sentences"]) & set(line["gold_sentences"]))
    p = tp / max(1, len(line["predicted_sentences"]))
    r = tp / max(1, len(line["gold_sentences"]))
    f1.append(2 * p * r / (p + r) if p + r else 0.0)
  assert np.mean(f1) == pytest.approx(test["f1"])
  assert all(line["gold_sentences"] for line in lines)
  # The test split is also scored at the dev split's best threshold.
  assert test["dev_threshold"] == results["best_threshold"]
  assert 0.0 <= test["f1_at_dev_threshold"] <= 1.0 and 0.0 < test["r_precision"] <= 1.0


@pytest.mark.slow
def test_bert_windows_classify_train_and_predict(data, tmp_path):
  bert_config = _tiny_bert_config(tmp_path)
  out = tmp_path / "out"
  run_tool(None, _args(data, "classify", out, _bert_flags(bert_config) + [
      "--do_train", "--do_predict", "--num_train_steps=2"]))
  labels = data["summary"]["classify_labels"]
  assert json.loads((out / run_long_tasks.LABELS_NAME).read_text()) == labels
  test = json.loads((out / "test_results.json").read_text())
  assert test["task"] == "classify" and test["model"] == "bert_windows"
  lines = [json.loads(line) for line in
           (out / "test_predictions.jsonl").read_text().splitlines()]
  assert len(lines) == data["summary"]["examples"]["classify"]["test"] == test["examples"]
  assert all(len(l["probabilities"]) == len(labels) for l in lines)
  assert np.mean([l["predicted_label"] == l["gold_label"] for l in lines]) == pytest.approx(
      test["accuracy"])
  # The head's variables are those of bert_windows.classify_head: one row per label.
  variables = dict(tf.train.list_variables(str(out)))
  assert variables["cls/long_tasks_bert/classify/output_weights"] == [len(labels), 32]


def test_records_of_other_lengths_are_one_line(data, tmp_path):
  result = run_tool(None, _args(data, "supporting", tmp_path / "out", [
      "--do_train", "--max_global_seq_length=16"]), expect_rc=2)
  assert last_error_line(result) == (
      "error: --data_dir: %s has global_token_ids of length %d but --max_global_seq_length=16"
      % (data["root"] / "data" / "supporting_train.tfrecord", G))
  assert not (tmp_path / "out").exists()
  # --model=bert_windows: a static window count (--padding=longest), no global tokens, the
  # cloze's run-time shape (--use_tpu): each one line.
  for task, flag, message in (
      ("supporting", "--padding=longest", "--padding=longest: not with --model=bert_windows (its "
       "window count is static, from --max_seq_length; use --padding=max_length)"),
      ("supporting", "--use_hard_g2l_mask", "--use_hard_g2l_mask: only with --model=etc (BERT "
       "windows have no global tokens)"),
      ("cloze", "--use_tpu", "--use_tpu: not with --model=bert_windows --task=cloze (the "
       "candidates' mentions are matched with a shape known only at run time)")):
    result = run_tool(None, _args(data, task, tmp_path / "out", _bert_flags(
        tmp_path / "bert_config.json") + ["--do_eval", flag]), expect_rc=2)
    assert last_error_line(result) == "error: " + message
    assert not (tmp_path / "out").exists()


def test_padding_cut_lengths_by_hand():
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)  # local_radius 8: blocks of 9
  long_breaks = np.zeros([2, L], np.int32)
  long_breaks[0, 20] = 1  # example 0 ends at 20; example 1's last real token is at 13
  tokens = np.zeros([2, L], np.int32)
  tokens[0, :21] = 7
  tokens[1, :14] = 7
  global_breaks = np.zeros([2, G], np.int32)
  global_breaks[0, 2] = 1
  global_ids = np.zeros([2, G], np.int32)
  global_ids[:, :3] = 5
  batch = {"token_ids": tokens, "long_breakpoints": long_breaks, "global_token_ids": global_ids,
           "global_breakpoints": global_breaks}
  far = dict(batch, token_ids=np.where(np.arange(L) < 61, 7, 0) * np.ones([2, 1], np.int32))
  cases = [  # (batch, att_implementation, bucket, cloze candidates at least): (long, global)
      (batch, "auto", False, 1, (24, 8)),     # 21 -> a multiple of 8 (dense layout, L <= 1024)
      (batch, "sparse", False, 1, (27, 8)),   # 21 -> a multiple of the block 9
      (batch, "auto", True, 1, (32, 12)),     # buckets [32, 64] and [12]
      (batch, "auto", False, 10, (24, 12)),   # 10 candidates: 10 -> 16, at most G
      (far, "auto", False, 1, (64, 8)),       # 61 -> 64 = L
      (far, "sparse", False, 1, (63, 8)),     # 61 -> 63 (7 blocks of 9)
  ]
  with tf.Graph().as_default():
    got = [run_long_tasks.cut_lengths({k: tf.constant(v) for k, v in b.items()}, config, L, G,
                                      min_global, att, bucket)
           for b, att, bucket, min_global, _ in cases]
    with tf1.Session() as sess:
      got = sess.run(got)
  assert [tuple(int(x) for x in g) for g in got] == [c[-1] for c in cases]
  assert run_long_tasks.layout_for("auto", 1024) == "full"
  assert run_long_tasks.layout_for("auto", 1025) == "sparse"


def test_padding_longest_outputs_equal_max_length(data):
  """Eval outputs of batches cut to their real long / global inputs (longest, bucket, the sparse
  layout's blocks) equal the max_length ones to 1e-5, metrics too (random weights)."""
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  runs = (("max_length", "auto"), ("longest", "auto"), ("bucket", "auto"),
          ("longest", "sparse"))
  # Supporting records end at 50 to 63 of L = 64: batches of 1 to have some cut.
  for task, batch_size in (("cloze", 4), ("supporting", 1)):
    path = str(data["root"] / "data" / ("%s_dev.tfrecord" % task))
    last_long = []  # each record's last breakpoint or token, plus one
    for record in tf1.io.tf_record_iterator(path):
      feature = tf.train.Example.FromString(record).features.feature
      real = (np.array(feature["token_ids"].int64_list.value) != 0) | (
          np.array(feature["long_breakpoints"].int64_list.value) != 0)
      last_long.append(np.nonzero(real)[0][-1] + 1)
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      fetches = []
      for padding, att in runs:
        model_fn = run_long_tasks.model_fn_builder(
            task, config, None, 1e-3, 1, 0, False,
            att_implementation=run_long_tasks.layout_for(att, L), max_global_seq_length=G)
        features = tf1.data.make_one_shot_iterator(run_long_tasks.input_fn_builder(
            path, task, config, L, G, C, is_training=False, padding=padding,
            att_implementation=att)({"batch_size": batch_size})).get_next()
        with tf1.variable_scope(tf1.get_variable_scope(), reuse=tf1.AUTO_REUSE):
          spec = model_fn(features, None, tf1.estimator.ModeKeys.PREDICT, {})
        fetches.append((spec.predictions, tf.shape(features["token_ids"])[1],
                        tf.shape(features["global_token_ids"])[1]))
      batches = []
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        try:
          while True:
            batches.append(sess.run(fetches))
        except tf.errors.OutOfRangeError:
          pass
    outputs = [{key: np.concatenate([b[i][0][key] for b in batches])
                for key in batches[0][i][0]} for i in range(len(runs))]
    full = outputs[0]
    real = (full["global_token_ids"] > 0 if task == "supporting" else
            np.ones_like(full["logits"], bool))
    for (padding, att), got in zip(runs[1:], outputs[1:]):
      np.testing.assert_allclose(got["logits"][real], full["logits"][real], atol=1e-5,
                                 err_msg="%s %s %s" % (task, padding, att))
      assert np.array_equal(got["global_token_ids"], full["global_token_ids"])
      metrics = run_long_tasks.task_metrics(task, got)
      for key, value in run_long_tasks.task_metrics(task, full).items():
        assert metrics[key] == pytest.approx(value, abs=1e-5), (task, padding, key)
    # The cut lengths: the last real position of the batch (long: a breakpoint or a token;
    # global: at least the C cloze candidates), rounded up (8; the sparse layout: blocks of 9).
    for i, b in enumerate(batches):
      last_global = max(np.nonzero(b[0][0]["global_token_ids"].any(axis=0))[0][-1] + 1,
                        C if task == "cloze" else 1)
      assert b[1][2] == b[3][2] == min(G, -(-last_global // 8) * 8)
      longest = max(last_long[i * batch_size:(i + 1) * batch_size])
      assert (b[1][1], b[3][1]) == (min(L, -(-longest // 8) * 8), min(L, -(-longest // 9) * 9))
      assert b[0][1] == L and b[2][1] == (32 if longest <= 32 else 64)
    assert min(b[1][1] for b in batches) < L, "no batch was cut: the test data are not ragged"


def test_load_config_overrides_residual_attention_and_hard_g2l(tmp_path):
  path = tmp_path / "etc_config.json"
  path.write_text(json.dumps(TINY_ETC_CONFIG))
  kept = etc_estimator.load_config(str(path))
  assert (kept.residual_attention, kept.use_hard_g2l_mask) == ("sum", True)
  changed = etc_estimator.load_config(str(path), "none", use_hard_g2l_mask=False)
  assert (changed.residual_attention, changed.use_hard_g2l_mask) == ("none", False)
