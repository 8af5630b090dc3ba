"""run_classifier extensions: evaluation during training (history, early stopping, the best
checkpoint), class weights, multi-label tasks and long documents in windows.

Unit tests compare with hand-computed values; the end-to-end runs (tiny BERT, subprocesses) use
real text: the shipped SST-2 slice (movie-review sentences) and the demo corpus documents.
"""

import json
import os
import re
import signal
import textwrap
import types

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, run_tool, start_tool
from conftest import last_error_line, write_random_bert_checkpoint

from realformer_tf import classifier_outputs as co
from realformer_tf import classifier_tasks as ct
from realformer_tf import common
from realformer_tf import glue_metrics as gm
import modeling
from realformer_tf import classifier_features as cf
import run_classifier as rc
from realformer_tf import sliding_window as sw
import tokenization
from realformer_tf import training_eval as te

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
SST2_SLICE = os.path.join(REPO_DIR, "data", "sst2_slice")
DEMO_CORPUS = os.path.join(REPO_DIR, "data", "demo_corpus", "train.txt")


# ----------------------------------------------------------------------------------------------
# Multi-label metrics and the threshold search, by hand.


def test_multilabel_metrics_hand_computed():
  # 4 examples x 3 labels (a, b, c).
  labels = [[1, 0, 1],
            [0, 1, 0],
            [1, 1, 0],
            [0, 0, 0]]
  preds = [[1, 0, 0],
           [0, 1, 1],
           [1, 0, 0],
           [0, 0, 0]]
  # a: tp 2 fp 0 fn 0 -> F1 1.  b: tp 1 fp 0 fn 1 -> 2/3.  c: tp 0 fp 1 fn 1 -> 0.
  tp, fp, fn = gm.multilabel_counts(preds, labels)
  assert (tp.tolist(), fp.tolist(), fn.tolist()) == ([2, 1, 0], [0, 0, 1], [0, 1, 1])
  assert gm.per_label_f1(preds, labels) == pytest.approx([1.0, 2.0 / 3.0, 0.0])
  # micro: tp 3, fp 1, fn 2 -> 6 / (6 + 1 + 2) = 2/3; macro: (1 + 2/3 + 0) / 3 = 5/9.
  assert gm.micro_f1(preds, labels) == pytest.approx(2.0 / 3.0)
  assert gm.macro_f1(preds, labels) == pytest.approx(5.0 / 9.0)
  # Exact sets: examples 0 no, 1 no, 2 no, 3 yes.
  assert gm.subset_accuracy(preds, labels) == 0.25
  report = gm.multilabel_metrics(preds, labels, ["a", "b", "c"])
  assert report["micro_precision"] == pytest.approx(0.75)
  assert report["micro_recall"] == pytest.approx(0.6)
  assert (report["f1_a"], report["f1_c"]) == (1.0, 0.0)
  assert gm.compute_metrics(gm.MULTILABEL_METRICS, preds, labels) == pytest.approx(
      {"micro_f1": 2.0 / 3.0, "macro_f1": 5.0 / 9.0, "subset_accuracy": 0.25})
  # A label neither gold nor predicted: F1 0 (scikit-learn's zero_division=0).
  assert gm.per_label_f1([[0, 1]], [[0, 1]]) == [0.0, 1.0]
  with pytest.raises(ValueError, match=r"\[n, num_labels\]"):
    gm.micro_f1([1, 0], [1, 0])


def test_best_threshold_hand_computed():
  probabilities = [[0.9, 0.2],
                   [0.6, 0.7],
                   [0.4, 0.1],
                   [0.3, 0.35]]
  labels = [[1, 0],
            [0, 1],
            [1, 0],
            [0, 1]]
  # 4 gold. Sorted: .9(1) .7(1) .6(0) .4(1) .35(1) .3(0) .2(0) .1(0).
  # Cuts (tp, predicted): .9 (1,1) F1 2/5; .7 (2,2) 4/6; .6 (2,3) 4/7; .4 (3,4) 6/8;
  # .35 (4,5) 8/9 <- best; .3 (4,6) 8/10; .2 (4,7) 8/11; .1 (4,8) 8/12.
  threshold, f1 = gm.best_threshold(probabilities, labels)
  assert f1 == pytest.approx(8.0 / 9.0)
  assert threshold == pytest.approx((0.35 + 0.3) / 2)
  predicted = np.array(probabilities) >= threshold
  assert gm.micro_f1(predicted, labels) == pytest.approx(8.0 / 9.0)
  # Ties: equal probabilities go to the same side; the lowest cut halves the lowest value.
  assert gm.best_threshold([[0.5, 0.5]], [[1, 0]]) == pytest.approx((0.25, 2.0 / 3.0))
  assert gm.best_threshold([[0.5]], [[0]]) == (1.0, 0.0)


# ----------------------------------------------------------------------------------------------
# Class weights.


def _tsv_task(task_type="classification", labels=None):
  task = ct.make_tsv_task("text", None, "label", task_type=task_type, label_list=labels)
  return task


def test_auto_class_weights_hand_computed():
  task = _tsv_task(labels=["neg", "pos"])
  examples = [rc.InputExample("train-%d" % i, "x", label=y)
              for i, y in enumerate(["neg", "neg", "neg", "pos"])]
  # n / (C * count): 4/6 and 4/2 -> mean 4/3 -> [0.5, 1.5].
  assert ct.resolve_class_weights("auto", task, examples) == pytest.approx([0.5, 1.5])
  assert ct.resolve_class_weights("2,0.5", task, examples) == [2.0, 0.5]
  assert ct.resolve_class_weights(None, task, examples) is None
  three = ct.auto_class_weights([1, 2, 5], ["a", "b", "c"])
  assert np.mean(three) == pytest.approx(1.0)
  # Inverse frequency: w_a / w_c = 5.
  assert three[0] / three[2] == pytest.approx(5.0)


@pytest.mark.parametrize("spec,message", [
    ("1,2,3", "--class_weights=1,2,3: 3 weight(s) for the 2 labels of task tsv (neg, pos)"),
    ("1,-2", "--class_weights=1,-2: every weight must be a finite number > 0"),
    ("heavy", "--class_weights=heavy: expected 'auto' or one number per label"),
])
def test_class_weight_errors_are_one_line(spec, message):
  task = _tsv_task(labels=["neg", "pos"])
  with pytest.raises(common.UsageError) as e:
    ct.resolve_class_weights(spec, task, None)
  assert str(e.value).startswith(message) and "\n" not in str(e.value)
  with pytest.raises(common.UsageError, match="label 'pos' has no training example"):
    ct.resolve_class_weights("auto", task, [rc.InputExample("t-0", "x", label="neg")])


def _tiny_config():
  return modeling.BertConfig.from_dict(TINY_BERT_CONFIG)


def _head_losses(labels, num_labels, **kwargs):
  """per_example_loss and logits of create_model on random ids (a fresh graph)."""
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(3)
    ids = tf.constant(np.random.RandomState(0).randint(1, 1000, size=(len(labels), 6)),
                      dtype=tf.int32)
    _, per_example, logits, outputs = rc.create_model(
        _tiny_config(), False, ids, tf.ones_like(ids), tf.zeros_like(ids),
        tf.constant(labels, dtype=tf.int32), num_labels, False, **kwargs)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return sess.run([per_example, logits, outputs])


def test_weighted_and_multilabel_losses_match_numpy():
  per_example, logits, _ = _head_losses([0, 1, 1], 2, class_weights=[0.5, 1.5])
  log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
  want = -log_probs[np.arange(3), [0, 1, 1]] * np.array([0.5, 1.5, 1.5])
  np.testing.assert_allclose(per_example, want, rtol=1e-5)
  labels = [[1, 0, 1], [0, 0, 0]]
  per_example, logits, probabilities = _head_losses(labels, 3, is_multilabel=True)
  p = 1.0 / (1.0 + np.exp(-logits))
  np.testing.assert_allclose(probabilities, p, rtol=1e-5)
  y = np.array(labels, dtype=np.float64)
  want = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p), axis=1)
  np.testing.assert_allclose(per_example, want, rtol=1e-4)


# ----------------------------------------------------------------------------------------------
# Multi-label files.


def test_multilabel_reader_and_unknown_label(tmp_path):
  (tmp_path / "train.tsv").write_text(
      "text\ttags\nA wonderful film .\tpositive, film\nDull .\tnegative\nNo tags here\t\n"
      "Twice\tfilm,film|x\n")
  task = ct.make_tsv_task("text", None, "tags", task_type="multilabel", label_separator=",")
  assert task.metrics[0] == "micro_f1" and task.is_multilabel
  assert ct.collect_labels(task, str(tmp_path)) == ["film", "film|x", "negative", "positive"]
  task.labels = ["film", "negative", "positive"]
  (tmp_path / "dev.tsv").write_text("text\ttags\nGood .\tpositive\nSo so .\tfilm,neutral\n")
  with pytest.raises(common.UsageError) as e:
    ct.read_examples(task, task.dev[0], str(tmp_path), "dev")
  message = str(e.value)
  assert message.startswith("%s:3: label 'neutral' is not one of the tsv labels" %
                            (tmp_path / "dev.tsv")), message
  assert "\n" not in message
  (tmp_path / "dev.tsv").write_text("text\ttags\nGood .\tpositive , film\nNone .\t\n")
  examples, _ = ct.read_examples(task, task.dev[0], str(tmp_path), "dev")
  assert [e.label for e in examples] == [("positive", "film"), ()]
  tokenizer = tokenization.FullTokenizer(VOCAB, True)
  feature = rc.convert_single_example(0, examples[0], task.label_map, 8, tokenizer)
  assert feature.label_id == [1, 0, 1]
  assert rc.convert_single_example(0, examples[1], task.label_map, 8, tokenizer).label_id == [
      0, 0, 0]
  assert cf.features_to_tf_example(feature).features.feature["label_ids"].int64_list.value == [
      1, 0, 1]


# ----------------------------------------------------------------------------------------------
# Long documents: windows and pooling.


def _demo_documents():
  """The demo corpus documents (real text), each a string."""
  with open(DEMO_CORPUS, encoding="utf-8") as f:
    return [" ".join(block.split("\n")) for block in f.read().split("\n\n") if block.strip()]


def test_windows_cover_a_real_document(vocab_file):
  tokenizer = tokenization.FullTokenizer(vocab_file, True)
  text = max(_demo_documents()[:60], key=len)
  ids = tokenizer.tokenize_to_ids(text)
  assert len(ids) > 100
  label_map = {"no": 0, "yes": 1}
  example = rc.InputExample("dev-0", text, label="yes")
  features = cf.convert_example_to_windows(0, example, label_map, 32, tokenizer, doc_stride=20)
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  # Windows of 30 tokens, 20 apart, the last one ending at the end of the text.
  starts = list(range(0, len(ids) - 30, 20)) + [None]
  assert len(features) == len(starts)
  for i, feature in enumerate(features):
    length = sum(feature.input_mask)
    body = feature.input_ids[1:length - 1]
    start = i * 20
    want = ids[start:start + 30]
    assert feature.input_ids[0] == cls_id and feature.input_ids[length - 1] == sep_id
    assert body == want and feature.label_id == 1
  assert (len(features) - 2) * 20 + 30 < len(ids) <= (len(features) - 1) * 20 + 30
  # A text that fits: one window, the same feature as the truncating conversion.
  short = rc.InputExample("dev-1", "A fine film .", label="no")
  single = cf.convert_example_to_windows(0, short, label_map, 32, tokenizer, doc_stride=20)
  same = rc.convert_single_example(0, short, label_map, 32, tokenizer)
  assert len(single) == 1 and single[0].input_ids == same.input_ids
  # A pair: text_b (cut to (32 - 3) // 2 = 14 tokens) in every window after text_a's window.
  pair = rc.InputExample("dev-2", text, "is this a dictionary entry about " + text[:200],
                         label="no")
  features = cf.convert_example_to_windows(0, pair, label_map, 32, tokenizer, doc_stride=10)
  b_ids = tokenizer.tokenize_to_ids(pair.text_b)[:14]
  assert len(b_ids) == 14 and len(features) > 2
  for i, feature in enumerate(features):
    length = sum(feature.input_mask)
    # [CLS] a-window (15 tokens, 10 apart) [SEP] b [SEP]
    assert feature.input_ids[1:length - 16] == ids[i * 10:i * 10 + 15]
    assert feature.input_ids[length - 15:length] == b_ids + [sep_id]
    assert feature.segment_ids[:length] == [0] * (length - 15) + [1] * 15
  assert cf.document_windows(0, 5, 3) == [sw.Window(0, 0)]
  assert cf.document_windows(7, 5, 9) == [sw.Window(0, 5), sw.Window(5, 2)]


def test_pool_window_outputs_by_hand():
  task = _tsv_task(labels=["a", "b"])
  outputs = [{"logits": np.array([1.0, 0.0]), "label_ids": 1, "is_real_example": 1.0},
             {"logits": np.array([-1.0, 2.0]), "label_ids": 1, "is_real_example": 1.0},
             {"logits": np.array([0.5, 0.5]), "label_ids": 0, "is_real_example": 1.0}]
  mean = co.pool_window_outputs(task, outputs, [2, 1], "mean", class_weights=[1.0, 3.0])
  # Document 0: mean logits (0, 1): p = (1, e) / (1 + e); loss = -log p1 * weight 3.
  e = np.exp(1.0)
  np.testing.assert_allclose(mean[0]["probabilities"], [1 / (1 + e), e / (1 + e)])
  assert mean[0]["per_example_loss"] == pytest.approx(3.0 * np.log((1 + e) / e))
  assert (mean[0]["num_windows"], mean[1]["num_windows"]) == (2, 1)
  np.testing.assert_allclose(mean[1]["probabilities"], [0.5, 0.5])
  maxed = co.pool_window_outputs(task, outputs, [2, 1], "max")
  np.testing.assert_allclose(maxed[0]["logits"], [1.0, 2.0])
  with pytest.raises(RuntimeError, match="predicted 3 windows, expected 4"):
    co.pool_window_outputs(task, outputs, [2, 2])


def test_training_shuffle_buffer_holds_whole_documents():
  # A document's windows are consecutive: the buffer holds 100 documents' worth of windows.
  assert cf.train_shuffle_buffer({"windows": None, "num_records": 50, "num_examples": 50}) == 100
  assert cf.train_shuffle_buffer({"windows": [9, 9], "num_records": 900,
                                  "num_examples": 100}) == 900
  assert cf.train_shuffle_buffer({"windows": [1, 1], "num_records": 20,
                                  "num_examples": 20}) == 100


# ----------------------------------------------------------------------------------------------
# Flag checks (one line each), with the flags as a namespace.


def _flags(**overrides):
  values = dict(eval_every_steps=0, do_train=True, early_stopping_patience=0, keep_best=False,
                task_type="classification", processor=None, task_name="tsv",
                multilabel_threshold=0.5, tune_threshold=False, doc_stride=None,
                long_document="truncate", class_weights=None, max_seq_length=32,
                padding=None, use_tpu=False, group_by_length=False)
  values.update(overrides)
  return types.SimpleNamespace(**values)


@pytest.mark.parametrize("overrides,message", [
    (dict(eval_every_steps=5, do_train=False),
     "--eval_every_steps=5: evaluates during training; it needs --do_train"),
    (dict(early_stopping_patience=2), "--early_stopping_patience=2: needs --eval_every_steps"),
    (dict(keep_best=True), "--keep_best: needs --eval_every_steps with --do_train"),
    (dict(task_type="multilabel", task_name="sst-2"),
     "--task_type=multilabel: only for --task_name=tsv"),
    (dict(tune_threshold=True), "--tune_threshold: only for --task_type=multilabel"),
    (dict(doc_stride=8), "--doc_stride=8: only used with --long_document=window"),
    (dict(padding="longest", use_tpu=True), "--padding=longest: not with --use_tpu"),
    (dict(padding="bucket", use_tpu=True), "--padding=bucket: not with --use_tpu"),
    (dict(group_by_length=True, do_train=False), "--group_by_length: groups training batches"),
])
def test_flag_errors_are_one_line(monkeypatch, overrides, message):
  monkeypatch.setattr(rc, "FLAGS", _flags(**overrides))
  with pytest.raises(common.UsageError) as e:
    rc._check_extension_flags()
  assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_stride_and_task_flag_errors(monkeypatch):
  task = _tsv_task(labels=["a", "b"])
  monkeypatch.setattr(rc, "FLAGS", _flags(long_document="window", doc_stride=31))
  with pytest.raises(common.UsageError) as e:
    rc._check_task_flags(task)
  assert str(e.value) == ("--doc_stride=31: larger than the window (30 tokens of text_a at "
                          "--max_seq_length=32), which would skip text between windows")
  monkeypatch.setattr(rc, "FLAGS", _flags(long_document="window", doc_stride=30))
  assert rc._check_task_flags(task) is None  # checks only: the stride is resolve_doc_stride's
  assert cf.resolve_doc_stride(task, "window", 32, 30) == 30
  assert cf.resolve_doc_stride(task, "window", 32) == 15  # half the window
  # Truncation: no windows.
  assert cf.resolve_doc_stride(task, "truncate", 32) is None
  # A pair task: the window is what text_b leaves, (32 - 3) - (32 - 3) // 2 = 15.
  monkeypatch.setattr(rc, "FLAGS", _flags(long_document="window", doc_stride=16))
  with pytest.raises(common.UsageError, match=r"--doc_stride=16: larger than the window \(15"):
    rc._check_task_flags(ct.get_task("mrpc"))
  monkeypatch.setattr(rc, "FLAGS", _flags(class_weights="auto"))
  with pytest.raises(common.UsageError, match="only for single-label classification"):
    rc._check_task_flags(ct.get_task("sts-b"))


def test_auto_class_weights_without_data_dir_is_one_line(tmp_path, tiny):
  # An export-only job needs no --data_dir; --class_weights=auto then has no training labels to
  # count: one line, as when --data_dir has no training file.
  config, checkpoint = tiny
  proc = run_tool("run_classifier.py", [
      "--task_name=sst-2", "--vocab_file=%s" % VOCAB, "--bert_config_file=%s" % config,
      "--init_checkpoint=%s" % checkpoint, "--output_dir=%s" % (tmp_path / "out"),
      "--export_dir=%s" % (tmp_path / "export"), "--max_seq_length=32",
      "--class_weights=auto"], expect_rc=2)
  assert last_error_line(proc) == (
      "error: --class_weights=auto: needs the training labels (the task's training set is "
      "missing or empty)")
  assert "Traceback" not in proc.output and not (tmp_path / "export").exists()


# ----------------------------------------------------------------------------------------------
# The history file.


def test_eval_history_best_patience_and_resume(tmp_path):
  history = te.EvalHistory(str(tmp_path), "accuracy", 0)
  for step, score in [(5, 0.6), (10, 0.7), (15, 0.7), (20, 0.65)]:
    entry = history.make_entry(step, {"accuracy": score, "loss": 1.0 - score})
    history.add(entry)
  assert [(e["step"], e["best_step"], e["evals_without_improvement"])
          for e in history.entries] == [(5, 5, 0), (10, 10, 0), (15, 10, 1), (20, 10, 2)]
  assert history.best()["step"] == 10  # an equal score is no improvement
  assert history.evals_without_improvement() == 2
  lines = (tmp_path / te.HISTORY_FILE).read_text().splitlines()
  assert [json.loads(l)["step"] for l in lines] == [5, 10, 15, 20]
  # Resumed from the checkpoint of step 12: the lines of 15 and 20 belong to a lost model.
  resumed = te.EvalHistory(str(tmp_path), "accuracy", 12)
  assert [e["step"] for e in resumed.entries] == [5, 10]
  assert [json.loads(l)["step"] for l in
          (tmp_path / te.HISTORY_FILE).read_text().splitlines()] == [5, 10]
  # The same step again replaces its line (no duplicate).
  resumed.add(resumed.make_entry(10, {"accuracy": 0.7}))
  assert [e["step"] for e in te.EvalHistory(str(tmp_path), "accuracy", 99).entries] == [5, 10]
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_save_best_checkpoint_replaces_the_previous(tmp_path):
  out = tmp_path / "out"
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps(TINY_BERT_CONFIG))
  first = write_random_bert_checkpoint(str(config), str(out / "model.ckpt-5"), seed=1)
  second = write_random_bert_checkpoint(str(config), str(out / "model.ckpt-10"), seed=2)
  te.save_best_checkpoint(str(out), first, 5, "accuracy", 0.5, {"accuracy": 0.5})
  te.save_best_checkpoint(str(out), second, 10, "accuracy", 0.75, {"accuracy": 0.75})
  best = te.read_best_checkpoint(str(out))
  assert (best["step"], best["score"], best["checkpoint"]) == (10, 0.75, "model.ckpt-10")
  assert sorted(os.listdir(out / "best")) == [
      "best.json", "checkpoint", "model.ckpt-10.data-00000-of-00001", "model.ckpt-10.index"]
  name = "bert/embeddings/word_embeddings"
  np.testing.assert_array_equal(tf.train.load_variable(best["path"], name),
                                tf.train.load_variable(second, name))
  assert tf.train.latest_checkpoint(str(out / "best")) == best["path"]


# ----------------------------------------------------------------------------------------------
# End-to-end runs on real text (tiny BERT).


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  root = tmp_path_factory.mktemp("features_tiny")
  config = root / "bert_config.json"
  config.write_text(json.dumps(TINY_BERT_CONFIG))
  return str(config), write_random_bert_checkpoint(str(config), str(root / "init" / "bert.ckpt"))


def _sst2_rows(name, count):
  with open(os.path.join(SST2_SLICE, name), encoding="utf-8") as f:
    return [line.rsplit("\t", 1) for line in f.read().splitlines()[1:count + 1]]


@pytest.fixture(scope="module")
def sst2_imbalanced(tmp_path_factory):
  """96 training sentences (72 negative, 24 positive) and 40 dev sentences of the SST-2 slice."""
  root = tmp_path_factory.mktemp("sst2_imbalanced")
  rows = _sst2_rows("train.tsv", 400)
  negative = [r for r in rows if r[1] == "0"][:72]
  positive = [r for r in rows if r[1] == "1"][:24]
  train = [r for pair in zip(negative[::3], negative[1::3], negative[2::3], positive)
           for r in pair]
  (root / "train.tsv").write_text("sentence\tlabel\n" + "".join("%s\t%s\n" % tuple(r)
                                                                 for r in train))
  (root / "dev.tsv").write_text("sentence\tlabel\n" + "".join(
      "%s\t%s\n" % tuple(r) for r in _sst2_rows("dev.tsv", 40)))
  return root


def _early_stopping_args(data, tiny, out, export=None):
  config, checkpoint = tiny
  args = ["--task_name=sst-2", "--data_dir=%s" % data, "--vocab_file=%s" % VOCAB,
          "--bert_config_file=%s" % config, "--init_checkpoint=%s" % checkpoint,
          "--output_dir=%s" % out, "--max_seq_length=32", "--train_batch_size=8",
          "--eval_batch_size=40", "--learning_rate=2e-3", "--num_train_epochs=1",
          "--do_train", "--do_eval", "--eval_every_steps=3", "--early_stopping_patience=1",
          "--keep_best", "--class_weights=auto"]
  return args + (["--export_dir=%s" % export] if export else [])


def _history(out):
  lines = (out / te.HISTORY_FILE).read_text().splitlines()
  return [json.loads(line) for line in lines]


def _without_time(entries):
  return [{k: v for k, v in e.items() if k != "time"} for e in entries]


@pytest.fixture(scope="module")
def early_stopping_run(tmp_path_factory, tiny, sst2_imbalanced):
  root = tmp_path_factory.mktemp("early_stopping")
  out, export = root / "out", root / "export"
  log = run_tool("run_classifier.py", _early_stopping_args(sst2_imbalanced, tiny, out,
                                                            export)).output
  return out, export, log


@pytest.mark.slow
def test_eval_every_steps_early_stopping_keep_best(early_stopping_run):
  out, export, _ = early_stopping_run
  history = _history(out)
  steps = [e["step"] for e in history]
  # 96 examples / batch 8 = 12 steps: evaluations every 3 steps (and at the last).
  assert steps == sorted(set(steps)) and steps[0] == 3 and all(s % 3 == 0 for s in steps)
  scores = [e["metrics"]["accuracy"] for e in history]
  assert [e["score"] for e in history] == scores
  # The best is the earliest maximum; patience 1 stops at the first evaluation without a higher
  # score after it (unless the last step came first).
  best_index = int(np.argmax(scores))
  expected_stop, best_so_far, since = None, None, 0
  for step, score in zip(steps, scores):
    if best_so_far is None or score > best_so_far:
      best_so_far, since = score, 0
    else:
      since += 1
    if since >= 1 and step < 12:
      expected_stop = step
      break
  stopped = expected_stop is not None
  assert steps[-1] == (expected_stop if stopped else 12)
  results = json.loads((out / "eval_results.json").read_text())
  assert results["early_stopped"] == stopped
  assert results["num_train_steps"] == steps[-1] == results["global_step"]
  assert results["planned_train_steps"] == 12
  assert (results["best_step"], results["best_score"]) == (steps[best_index],
                                                           scores[best_index])
  assert (results["main_metric"], results["scored_checkpoint"]) == ("accuracy", "best")
  assert results["scored_step"] == steps[best_index]
  # The record names the best checkpoint's copy, not the latest one.
  assert (results["checkpoint"], results["checkpoint_step"]) == (
      str(out / "best" / ("model.ckpt-%d" % steps[best_index])), steps[best_index])
  # The final evaluation scored the best checkpoint again: the same numbers as its history line.
  assert results["eval_accuracy"] == scores[best_index]
  assert results["eval_loss"] == history[best_index]["metrics"]["loss"]
  # --class_weights=auto on 72 negative / 24 positive: 96/144, 96/48 -> mean 1: 0.5, 1.5.
  assert results["class_weight_0"] == pytest.approx(0.5)
  assert results["class_weight_1"] == pytest.approx(1.5)
  best = json.loads((out / "best" / "best.json").read_text())
  assert (best["step"], best["score"], best["metric"]) == (steps[best_index],
                                                           scores[best_index], "accuracy")
  # TensorBoard: one eval/accuracy point per evaluation.
  events = tf.io.gfile.glob(str(out / "eval_history" / "events.out.tfevents.*"))
  points = {}
  for path in events:
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == "eval/accuracy":
          points[event.step] = float(tf.make_ndarray(value.tensor))
  assert sorted(points) == steps
  assert [points[s] for s in steps] == pytest.approx(scores)
  # The export is the best checkpoint's model: its record names it, and its head's weights are
  # that checkpoint's (the raw-text SavedModel stores them under object paths).
  info = json.loads((export / "export_info.json").read_text())
  assert os.path.abspath(info["checkpoint"]) == str(out / "best" / best["checkpoint"])
  assert info["global_step"] == best["step"]
  exported = str(export / "variables" / "variables")
  for name in ("output_bias", "output_weights"):
    want = tf.train.load_variable(str(out / "best" / best["checkpoint"]), name)
    same_shape = [tf.train.load_variable(exported, n) for n, shape in
                  tf.train.list_variables(exported) if tuple(shape) == want.shape]
    assert any(np.array_equal(v, want) for v in same_shape), name


@pytest.mark.slow
def test_sigterm_during_evaluated_training_resumes_with_history(early_stopping_run, tiny,
                                                               sst2_imbalanced, tmp_path):
  reference, _, _ = early_stopping_run
  out = tmp_path / "out"
  args = _early_stopping_args(sst2_imbalanced, tiny, out)
  proc = start_tool("run_classifier.py", args)
  try:
    for line in proc.stderr:
      # Training resumed after the first evaluation: stop it in its second chunk.
      if "Evaluation at step 3:" in line:
        proc.send_signal(signal.SIGTERM)
        break
    rest = proc.communicate(timeout=120)[1]
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == 143, rest[-3000:]
  assert not (out / "eval_results.json").exists()
  first = _history(out)
  assert [e["step"] for e in first][0] == 3
  assert not (out / ".lock-local").exists()
  run_tool("run_classifier.py", args)
  # The rerun kept the history, repeated no step, and ended as the uninterrupted run.
  assert _without_time(_history(out)) == _without_time(_history(reference))
  assert _without_time(_history(out)[:len(first)]) == _without_time(first)
  got = json.loads((out / "eval_results.json").read_text())
  want = json.loads((reference / "eval_results.json").read_text())
  for key in ("eval_accuracy", "eval_loss", "best_step", "global_step", "early_stopped"):
    assert got[key] == want[key], key


def _multilabel_rows(name, count, with_tags=True):
  """SST-2 slice sentences tagged positive / negative, plus "film" when they name one."""
  rows = []
  for text, label in _sst2_rows(name, count):
    tags = ["positive" if label == "1" else "negative"]
    if re.search(r"\b(film|movie)s?\b", text.lower()):
      tags.append("film")
    rows.append((text, "|".join(tags) if with_tags else ""))
  return rows


RELOAD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # registers the raw-text signatures' ops
    export_dir, record, seq, texts_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    loaded = tf.saved_model.load(export_dir)
    spec = {k: tf.io.FixedLenFeature([seq], tf.int64)
            for k in ("input_ids", "input_mask", "segment_ids")}
    feats = {k: [] for k in spec}
    for r in tf.data.TFRecordDataset(record):
      ex = tf.io.parse_single_example(r, spec)
      for k in spec:
        feats[k].append(ex[k].numpy())
    ids = loaded.signatures["serving_ids"](
        **{k: tf.constant(np.stack(v).astype(np.int32)) for k, v in feats.items()})
    text = loaded.signatures["serving_default"](
        sentence=tf.constant(json.load(open(texts_file))))
    print("RESULT " + json.dumps({name: {k: v.numpy().tolist() for k, v in out.items()}
                                  for name, out in (("ids", ids), ("text", text))},
                                 default=lambda b: b.decode("utf-8")))
""")


def _serve(export_dir, record, seq, texts):
  """The export in a fresh TF2 process: serving_ids on the record's features and
  serving_default on the raw texts; {"ids": outputs, "text": outputs} (numpy arrays)."""
  texts_file = os.path.join(os.path.dirname(record), "served_texts.json")
  with open(texts_file, "w") as f:
    json.dump(list(texts), f)
  proc = run_tool(None, ["-c", RELOAD, export_dir, record, seq, texts_file], timeout=120)
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return {name: {k: np.array(v) for k, v in outputs.items()}
          for name, outputs in json.loads(line[len("RESULT "):]).items()}


def _float_rows(path):
  with open(path) as f:
    return np.array([[float(x) for x in line.split("\t")] for line in f.read().splitlines()])


@pytest.mark.slow
def test_multilabel_end_to_end(tmp_path, tiny):
  config, checkpoint = tiny
  data = tmp_path / "data"
  data.mkdir()
  for name, rows in (("train.tsv", _multilabel_rows("train.tsv", 64)),
                     ("dev.tsv", _multilabel_rows("dev.tsv", 30)),
                     # The dev sentences again, as a test file: their probabilities come back.
                     ("test.tsv", _multilabel_rows("dev.tsv", 30, with_tags=False))):
    (data / name).write_text("text\ttags\n" + "".join("%s\t%s\n" % r for r in rows))
  out, export = tmp_path / "out", tmp_path / "export"
  run_tool("run_classifier.py", [
      "--task_name=tsv", "--task_type=multilabel", "--label_separator=|",
      "--text_a_column=text", "--label_column=tags", "--data_dir=%s" % data,
      "--vocab_file=%s" % VOCAB, "--bert_config_file=%s" % config,
      "--init_checkpoint=%s" % checkpoint, "--output_dir=%s" % out, "--max_seq_length=32",
      "--train_batch_size=8", "--eval_batch_size=16", "--predict_batch_size=16",
      "--learning_rate=2e-3", "--num_train_epochs=2", "--do_train", "--do_eval",
      "--do_predict", "--tune_threshold", "--multilabel_threshold=0.4",
      "--export_dir=%s" % export])
  labels = (out / "labels.txt").read_text().split()
  assert labels == ["film", "negative", "positive"]
  gold = np.array([[int(label in tags.split("|")) for label in labels]
                   for _, tags in _multilabel_rows("dev.tsv", 30)])
  probabilities = _float_rows(str(out / "test_results.tsv"))
  assert probabilities.shape == (30, 3)
  results = json.loads((out / "eval_results.json").read_text())
  # Independent recomputation at the flag's threshold: per-label counts by loops.
  predicted = probabilities >= 0.4
  f1s = []
  totals = np.zeros(3)
  for j in range(3):
    tp = sum(1 for i in range(30) if predicted[i, j] and gold[i, j])
    fp = sum(1 for i in range(30) if predicted[i, j] and not gold[i, j])
    fn = sum(1 for i in range(30) if not predicted[i, j] and gold[i, j])
    totals += (tp, fp, fn)
    f1s.append(2.0 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    assert results["eval_f1_%s" % labels[j]] == pytest.approx(f1s[-1], abs=1e-5)
  assert results["eval_micro_f1"] == pytest.approx(
      2 * totals[0] / (2 * totals[0] + totals[1] + totals[2]), abs=1e-5)
  assert results["eval_macro_f1"] == pytest.approx(np.mean(f1s), abs=1e-5)
  assert results["eval_threshold"] == 0.4
  # The tuned threshold beats (or ties) every cut between the probabilities seen.
  tuned = results["eval_tuned_threshold"]
  cuts = np.unique(probabilities)
  best_grid = max(gm.micro_f1(probabilities >= t, gold) for t in cuts)
  assert results["eval_tuned_micro_f1"] == pytest.approx(best_grid, abs=1e-5)
  assert json.loads((out / "threshold.json").read_text())["threshold"] == tuned
  # Submissions use the tuned threshold; the SavedModel gives the same probabilities and
  # predicted_labels at it.
  lines = (out / "predictions.tsv").read_text().splitlines()[1:]
  for line, row in zip(lines, probabilities):
    got = line.split("\t")[1]
    assert got == "|".join(l for l, p in zip(labels, row) if p >= tuned)
  # The export: the raw sentences (serving_default) and their features (serving_ids).
  served = _serve(str(export), str(out / "predict.tf_record"), 32,
                  [text for text, _ in _multilabel_rows("dev.tsv", 30)])
  for name in ("ids", "text"):
    np.testing.assert_allclose(served[name]["probabilities"], probabilities, atol=1e-5)
    np.testing.assert_array_equal(served[name]["predicted_labels"],
                                  served[name]["probabilities"] >= tuned)
  assert set(served["ids"]) == {"probabilities", "predicted_labels"}
  assert served["text"]["predicted_label_names"].tolist() == [l.split("\t")[1] for l in lines]
  exported = json.loads((export / "classifier_config.json").read_text())
  assert exported["threshold"] == tuned and exported["outputs"] == ["probabilities",
                                                                     "predicted_labels"]
  info = json.loads((export / "export_info.json").read_text())
  assert (info["task_type"], info["threshold"], info["label_separator"]) == (
      "multilabel", tuned, "|")
  assert info["threshold_source"] == "%s (tuned on dev)" % (out / "threshold.json")


def _dialogue_task(data, train_docs, dev_docs):
  """Demo corpus documents labelled by whether they hold quoted speech anywhere."""
  docs = _demo_documents()
  rows = [(doc, "dialogue" if '"' in doc else "narration") for doc in docs
          if len(doc) > 250]
  dialogue = [r for r in rows if r[1] == "dialogue"]
  narration = [r for r in rows if r[1] == "narration"]
  half_train, half_dev = train_docs // 2, dev_docs // 2
  train = dialogue[:half_train] + narration[:half_train]
  dev = dialogue[half_train:half_train + half_dev] + narration[half_train:half_train + half_dev]
  for name, subset, labelled in (("train.tsv", train, True), ("dev.tsv", dev, True),
                                 ("test.tsv", dev, False)):
    (data / name).write_text("text\tkind\n" + "".join(
        "%s\t%s\n" % (text.replace("\t", " "), label if labelled else "")
        for text, label in subset))
  return dev


@pytest.mark.slow
def test_long_documents_windowed_end_to_end(tmp_path, tiny):
  config, checkpoint = tiny
  data = tmp_path / "data"
  data.mkdir()
  dev = _dialogue_task(data, 24, 12)
  out, export = tmp_path / "out", tmp_path / "export"
  common_args = [
      "--task_name=tsv", "--text_a_column=text", "--label_column=kind",
      "--data_dir=%s" % data, "--vocab_file=%s" % VOCAB, "--bert_config_file=%s" % config,
      "--init_checkpoint=%s" % checkpoint, "--output_dir=%s" % out, "--max_seq_length=24",
      "--eval_batch_size=16", "--predict_batch_size=16", "--long_document=window"]
  log = run_tool("run_classifier.py", common_args + [
      "--doc_stride=23", "--do_train"], expect_rc=2).output
  assert log.strip().splitlines()[-1] == (
      "error: --doc_stride=23: larger than the window (22 tokens of text_a at "
      "--max_seq_length=24), which would skip text between windows")
  run_tool("run_classifier.py", common_args + [
      "--doc_stride=16", "--train_batch_size=8", "--learning_rate=2e-3",
      "--num_train_epochs=1", "--do_train", "--do_eval", "--do_predict",
      "--export_dir=%s" % export])
  results = json.loads((out / "eval_results.json").read_text())
  train_windows = json.loads((out / "train.tf_record.json").read_text())["windows"]
  assert len(train_windows) == 24 and min(train_windows) > 1
  # Every window is a training example.
  assert results["num_train_steps"] == int(sum(train_windows) / 8 * 1)
  windows = json.loads((out / "predict.tf_record.json").read_text())["windows"]
  assert results["eval_num_examples"] == len(windows) == 12
  assert results["eval_num_windows"] == sum(windows) > 12
  assert (results["long_document"], results["doc_stride"],
          results["window_pooling"]) == ("window", 16, "mean")
  # Pooled probabilities: softmax of the mean window logits. serving_ids scores one window;
  # softmax(mean of log p) over a document's windows is the same thing. The raw-text
  # signature windows and pools in the graph: the pooled probabilities themselves.
  texts = [line.split("\t")[0] for line in (data / "test.tsv").read_text().splitlines()[1:]]
  both = _serve(str(export), str(out / "predict.tf_record"), 24, texts)
  served = both["ids"]["probabilities"]
  assert served.shape == (sum(windows), 2)
  pooled = _float_rows(str(out / "test_results.tsv"))
  np.testing.assert_allclose(both["text"]["probabilities"], pooled, atol=1e-5)
  start = 0
  for i, count in enumerate(windows):
    mean_log = np.mean(np.log(served[start:start + count]), axis=0)
    start += count
    want = np.exp(mean_log) / np.sum(np.exp(mean_log))
    np.testing.assert_allclose(pooled[i], want, atol=1e-4)
  labels = (out / "labels.txt").read_text().split()
  predictions = [l.split("\t")[1] for l in (out / "predictions.tsv").read_text().splitlines()[1:]]
  assert predictions == [labels[int(np.argmax(p))] for p in pooled]
  # Accuracy from the pooled predictions.
  assert results["eval_accuracy"] == pytest.approx(
      np.mean([p == label for p, (_, label) in zip(predictions, dev)]))
  exported = json.loads((export / "classifier_config.json").read_text())
  assert (exported["long_document"], exported["doc_stride"], exported["window_pooling"]) == (
      "window", 16, "mean")
  assert exported["one_window_signatures"] == ["serving_ids"]
  assert both["text"]["predicted_label_name"].tolist() == predictions
