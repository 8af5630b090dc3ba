"""run_ner.py on the newest TensorFlow: the tf.distribute engine (realformer_tf.tf2_training).

Without the Estimator (TF >= 2.16) run_ner trains, evaluates and predicts with
tf2_training.Engine over the graph the Estimator runs on TF 2.15. On the newest TF
(`bash run.sh test-latest`), on a slice of the real WNUT 2017 data with a tiny random BERT:
- one --do_train --do_eval --do_predict job on both engines (the TF 2.15 side in a subprocess
  of $REALFORMER_TF215_PYTHON): the same loss at every step, entity-level scores, predictions
  and checkpoints (names with the Adam slots and global_step, the checkpoints kept, values);
  a checkpoint of either engine resumes on the other to the other's weights and scores;
- the job's outputs here: results files, predictions.conll, word_logits.npz and the raw-text
  SavedModel, whose tags and word logits are the predictions';
- the flags only the Estimator implements are one-line errors.
On TF 2.15 every test here skips (tests/test_run_ner.py covers the Estimator's job).
"""

import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool, shared_path
from conftest import tf215_python, write_random_bert_checkpoint
from realformer_tf import estimator_utils
from test_tf2_training import ESTIMATOR_WITH_STEP_LOSSES
from test_tf2_training import _max_difference, _run215, _state, _step_losses, _values

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
NEWEST_TF = not estimator_utils.has_estimator()
newest_tf_only = pytest.mark.skipif(
    not NEWEST_TF, reason="TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")
# 24 training sentences (26 windows) in batches of 4 for 1 epoch: 6 steps, checkpoints 0, 3, 6.
NUM_STEPS = 6
CHECKPOINTS = ["model.ckpt-0", "model.ckpt-3", "model.ckpt-6"]
# Float32 rounding between the two engines (and TF versions): measured 0 for the step losses
# and the scores but eval_loss (9e-9), 1.8e-7 for the word logits, 7.8e-8 for the weights.
ROUNDING = 1e-5

def _slice(src, dst, count):
  """The first `count` sentences of a CoNLL file (their lines byte-exact, a blank line after
  each); returns them as lists of lines without line ends."""
  blocks, current = [], []
  with open(src, "rb") as f:
    for line in f:
      if line.strip():
        current.append(line)
      elif current:
        blocks.append(current)
        current = []
  if current:
    blocks.append(current)
  blocks = blocks[:count]
  with open(dst, "wb") as f:
    f.write(b"".join(b"".join(block) + b"\n" for block in blocks))
  return [[line.decode("utf-8").rstrip("\r\n") for line in block] for block in blocks]


@pytest.fixture(scope="module")
def wnut(tmp_path_factory):
  """Slices of WNUT 2017, a tiny RealFormer config (dropout 0.1: the masks are step-seeded on
  both engines) and a random BERT checkpoint without the tagging layer (random on both)."""
  src = shared_path("ner", "wnut17")
  root = tmp_path_factory.mktemp("ner_tf2")
  data = root / "data"
  data.mkdir()
  _slice(os.path.join(src, "train.conll"), str(data / "train.conll"), 24)
  _slice(os.path.join(src, "dev.conll"), str(data / "dev.conll"), 10)
  test = _slice(os.path.join(src, "test.conll"), str(data / "test.conll"), 12)
  (root / "bert_config.json").write_text(json.dumps(dict(TINY_BERT_CONFIG,
                                                         residual_attention="sum")))
  checkpoint = write_random_bert_checkpoint(str(root / "bert_config.json"),
                                            str(root / "init" / "bert_model.ckpt"))
  return {"root": root, "data": data, "checkpoint": checkpoint, "test": test}


def _args(wnut, output_dir, extra=()):
  return ["--data_dir=%s" % wnut["data"], "--vocab_file=%s" % VOCAB,
          "--bert_config_file=%s" % (wnut["root"] / "bert_config.json"),
          "--init_checkpoint=%s" % wnut["checkpoint"], "--output_dir=%s" % output_dir,
          "--max_seq_length=32", "--doc_stride=10", "--train_batch_size=4",
          "--eval_batch_size=8", "--predict_batch_size=8", "--learning_rate=1e-3",
          "--num_train_epochs=1", "--save_checkpoints_steps=3", "--keep_checkpoint_max=10",
          "--log_every_n_steps=1"] + list(extra)


MODES = ["--do_train", "--do_eval", "--do_predict", "--output_word_logits"]


@pytest.fixture(scope="module")
def tf2_job(wnut):
  """The train / eval / predict / export job on the TF2 engine."""
  if not NEWEST_TF:
    pytest.skip("TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")
  out, export = wnut["root"] / "tf2", wnut["root"] / "tf2_export"
  log = run_tool("run_ner.py", _args(wnut, out, MODES + ["--export_dir=%s" % export])).stderr
  return {"out": out, "export": export, "log": log}


@pytest.fixture(scope="module")
def estimator_job(wnut, tf2_job):  # pylint: disable=unused-argument
  """The same job on the Estimator (TF 2.15), without the export."""
  python215 = tf215_python()
  out = wnut["root"] / "estimator"
  log = _run215(python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "run_ner"] +
                _args(wnut, out, MODES)).stderr
  return {"out": out, "log": log, "python215": python215}


def _results(output_dir, name):
  return json.loads((output_dir / ("%s.json" % name)).read_text())


def _assert_same_scores(got, want, prefix):
  """The same scores (every `prefix` key: exact, the loss to rounding) and steps."""
  keys = sorted(k for k in want if k.startswith(prefix))
  assert keys == sorted(k for k in got if k.startswith(prefix))
  assert len(keys) > 20 and prefix + "type_person_f1" in keys
  for key in keys:
    if key == "eval_loss":
      assert got[key] == pytest.approx(want[key], abs=ROUNDING)
    else:
      assert got[key] == want[key], key
  assert got["global_step"] == want["global_step"]


@pytest.mark.slow
def test_both_engines_give_the_same_losses_scores_predictions_and_checkpoints(
    wnut, tf2_job, estimator_job):
  est, tf2 = estimator_job["out"], tf2_job["out"]
  # The same loss at every step (the head's dropout 0.1 and BERT's included: the masks are
  # keyed on the same op names and global step), hence the same batches in the same order.
  est_losses, tf2_losses = _step_losses(estimator_job["log"]), _step_losses(tf2_job["log"])
  assert len(est_losses) == len(tf2_losses) == NUM_STEPS, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=ROUNDING)
  assert "train: step %d/%d" % (NUM_STEPS, NUM_STEPS) in tf2_job["log"]
  # Entity-level scores of the dev and the (tagged) test file, from the same checkpoint step.
  for name, prefix in (("eval_results", "eval_"), ("test_results", "test_")):
    got, want = _results(tf2, name), _results(est, name)
    assert sorted(got) == sorted(want), name
    _assert_same_scores(got, want, prefix)
    assert got["global_step"] == got["num_train_steps"] == NUM_STEPS
    assert got["checkpoint"] == str(tf2 / "model.ckpt-6")
  assert "eval_f1 = " in (tf2 / "eval_results.txt").read_text()
  # The predictions: the same tags, word logits to rounding; each names its checkpoint.
  assert (tf2 / "predictions.conll").read_bytes() == (est / "predictions.conll").read_bytes()
  got, want = np.load(str(tf2 / "word_logits.npz")), np.load(str(est / "word_logits.npz"))
  np.testing.assert_array_equal(got["sentence_lengths"], want["sentence_lengths"])
  np.testing.assert_array_equal(got["labels"], want["labels"])
  np.testing.assert_allclose(got["logits"], want["logits"], rtol=0, atol=ROUNDING)
  assert json.loads((tf2 / "predictions.conll.checkpoint.json").read_text()) == {
      "checkpoint": str(tf2 / "model.ckpt-6"), "global_step": NUM_STEPS}
  for name in ("labels.txt", "ner_config.json", "bert_config.json"):
    assert (tf2 / name).read_text() == (est / name).read_text(), name
  # The checkpoints: the same ones kept, with the same names and shapes (weights, Adam slots,
  # global_step); the initial weights equal (the tagging layer's random ones included), the
  # trained ones to rounding.
  assert _state(tf2) == _state(est) == CHECKPOINTS
  for name in CHECKPOINTS:
    names = tf.train.list_variables(str(tf2 / name))
    assert names == tf.train.list_variables(str(est / name)), name
  names = {n for n, _ in names}
  assert {"global_step", "cls/ner/output_weights", "cls/ner/output_weights/adam_m",
          "cls/ner/output_bias/adam_v", "bert/encoder/layer_1/output/dense/kernel/adam_v",
          "bert/pooler/dense/kernel"} <= names
  # BERT's pooler gets no gradient from the tagging loss: no Adam slots, its initial values.
  assert not [n for n in names if n.startswith("bert/pooler/") and "adam" in n]
  init = tf.train.load_checkpoint(wnut["checkpoint"])
  np.testing.assert_array_equal(_values(tf2 / "model.ckpt-6")["bert/pooler/dense/kernel"],
                                init.get_tensor("bert/pooler/dense/kernel"))
  assert _max_difference(_values(tf2 / "model.ckpt-0"), _values(est / "model.ckpt-0")) == 0
  assert _max_difference(_values(tf2 / "model.ckpt-6"),
                         _values(est / "model.ckpt-6")) <= ROUNDING


def _as_stopped_at(source, target, step):
  """A copy of output directory `source` as a job stopped after checkpoint `step` left it."""
  shutil.copytree(str(source), str(target))
  kept = [name for name in CHECKPOINTS if int(name.rsplit("-", 1)[1]) <= step]
  for entry in os.listdir(str(target)):
    later = entry.startswith("model.ckpt-") and entry.split(".")[1] not in (
        name.split(".")[1] for name in kept)
    if later or entry.startswith(("eval_results", "test_results", "predictions", "word_logits")):
      os.remove(str(target / entry))
  tf.compat.v1.train.update_checkpoint_state(str(target), kept[-1],
                                             all_model_checkpoint_paths=kept)


@pytest.mark.slow
def test_a_checkpoint_of_either_engine_resumes_on_the_other(wnut, tf2_job, estimator_job,
                                                            tmp_path):
  est, tf2 = estimator_job["out"], tf2_job["out"]
  # The Estimator's step-3 checkpoint, continued (and scored) by the TF2 engine: the
  # Estimator's final weights and scores.
  resumed = tmp_path / "estimator_then_tf2"
  _as_stopped_at(est, resumed, 3)
  log = run_tool("run_ner.py", _args(wnut, resumed, ["--do_train", "--do_eval"])).stderr
  assert "Restoring %s (step 3)" % (resumed / "model.ckpt-3") in log
  assert len(_step_losses(log)) == NUM_STEPS - 3
  assert _max_difference(_values(resumed / "model.ckpt-6"),
                         _values(est / "model.ckpt-6")) <= ROUNDING
  _assert_same_scores(_results(resumed, "eval_results"), _results(est, "eval_results"),
                      "eval_")
  # The TF2 engine's, continued by the Estimator.
  resumed = tmp_path / "tf2_then_estimator"
  _as_stopped_at(tf2, resumed, 3)
  _run215(estimator_job["python215"], [os.path.join(REPO_DIR, "run_ner.py")] +
          _args(wnut, resumed, ["--do_train"]))
  assert _max_difference(_values(resumed / "model.ckpt-6"),
                         _values(tf2 / "model.ckpt-6")) <= ROUNDING


@pytest.mark.slow
def test_train_eval_predict_export_on_the_newest_tf(wnut, tf2_job):
  out, log = tf2_job["out"], tf2_job["log"]
  # The engine's progress, checkpoints and TensorBoard scalars, no Estimator graph files.
  assert "Saved checkpoint %s" % (out / "model.ckpt-6") in log
  assert _state(out) == CHECKPOINTS
  assert [p for p in os.listdir(str(out)) if p.startswith("events.")]
  assert not [p for p in os.listdir(str(out)) if p.startswith("graph.pbtxt")]
  results = _results(out, "eval_results")
  for key in ("eval_f1", "eval_precision", "eval_recall", "eval_accuracy", "eval_loss",
              "eval_num_words", "eval_num_unplaced_words", "eval_type_person_f1"):
    assert key in results, key
  assert 0.0 <= results["eval_f1"] <= 1.0 and results["eval_accuracy"] > 0.5
  # predictions.conll: `token gold predicted` per word of the test file, in its order.
  predicted = (out / "predictions.conll").read_text(encoding="utf-8").split("\n\n")
  assert predicted[-1] == "" and len(predicted) == len(wnut["test"]) + 1
  for lines, sentence in zip(wnut["test"], predicted):
    rows = [row.split(" ") for row in sentence.split("\n")]
    assert [row[:2] for row in rows] == [line.split("\t") for line in lines]
  assert _results(out, "test_results")["test_num_words"] == sum(map(len, wnut["test"]))
  # The raw-text SavedModel (written on this TF) tags a sentence as the predictions do: a
  # test sentence whose words are what the export's BasicTokenizer splits.
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  tagger = tf.saved_model.load(str(tf2_job["export"])).signatures["serving_default"]
  npz = np.load(str(out / "word_logits.npz"))
  word_logits = np.split(npz["logits"], np.cumsum(npz["sentence_lengths"])[:-1])
  plain = [i for i, lines in enumerate(wnut["test"])
           if all(re.match(r"^[A-Za-z0-9]+\t", line) for line in lines)]
  assert plain
  for i in plain:
    words = [line.split("\t")[0] for line in wnut["test"][i]]
    served = tagger(text=tf.constant([" ".join(words)]))
    assert [w.decode() for w in served["words"].numpy()[0]] == words
    rows = predicted[i].split("\n")
    assert [t.decode() for t in served["tags"].numpy()[0]] == [r.split(" ")[2] for r in rows]
    np.testing.assert_allclose(served["word_logits"].numpy()[0], word_logits[i], rtol=1e-5,
                               atol=1e-5)


@newest_tf_only
def test_estimator_only_flags_are_one_line_errors(wnut, tmp_path):
  out = tmp_path / "out"
  result = run_tool("run_ner.py", _args(wnut, out, ["--do_train", "--iterations_per_loop=10"]),
                    expect_rc=2)
  line = last_error_line(result)
  assert line.startswith("error: --iterations_per_loop=10: implemented by the Estimator only "
                         "(TensorFlow 2.15); run_ner.py on TF %s trains with tf.distribute" %
                         tf.__version__), line
  assert "`bash run.sh python run_ner.py ...`" in line
  assert "Traceback" not in result.stderr and not out.exists()
