"""run_squad.py on the newest TensorFlow: the tf.distribute engine (realformer_tf.tf2_training).

Without the Estimator (TF >= 2.16) run_squad trains and predicts with tf2_training.Engine over the
graph of model_fn_builder. On the newest TF (`bash run.sh test-latest`) these tests check:
- one SQuAD 2.0 job on both engines (the TF 2.15 Estimator in a subprocess of
  $REALFORMER_TF215_PYTHON; tiny RealFormer, dropout 0): the same loss at every step, the same
  predictions.json, nbest_predictions.json, null_odds.json and eval_results, the same checkpoints
  (names, Adam slots, global_step, none for BERT's pooler, which the span head leaves without a
  gradient); a checkpoint of either engine resumes on the other to the other's weights;
- prediction from a fine-tuned --init_checkpoint gives the logits of the --export_dir SavedModel;
- the flags only the Estimator implements are one-line errors before any work.
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool, tf215_python
from conftest import tool_env
from realformer_tf import estimator_utils
from test_run_squad import _squad_checkpoint
from test_tf2_training import ESTIMATOR_WITH_STEP_LOSSES, ROUNDING

SQUAD_V2 = os.path.join(REPO_DIR, "tests", "fixtures", "squad", "tiny-v2.0.json")
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
newest_tf_only = pytest.mark.skipif(
    estimator_utils.has_estimator(),
    reason="TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")
# 5 training questions in batches of 2 for 2 epochs: 5 steps, checkpoints 0, 2, 4 and 5.
NUM_STEPS = 5
CHECKPOINTS = ["model.ckpt-0", "model.ckpt-2", "model.ckpt-4", "model.ckpt-5"]
# The files a --do_predict job writes for SQuAD 2.0.
PREDICTION_FILES = ("predictions.json", "nbest_predictions.json", "null_odds.json")


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
  """A tiny RealFormer config without dropout."""
  path = tmp_path_factory.mktemp("squad_tf2_model") / "bert_config.json"
  path.write_text(json.dumps(dict(TINY_BERT_CONFIG, residual_attention="sum",
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)))
  return path


def _job_args(config_file, output_dir, modes=("--do_train", "--do_predict")):
  """run_squad.py flags of the tiny SQuAD 2.0 job (random initial weights: no init
  checkpoint, every weight is a seeded random one)."""
  return ["--vocab_file=%s" % VOCAB, "--bert_config_file=%s" % config_file,
          "--output_dir=%s" % output_dir, "--train_file=%s" % SQUAD_V2,
          "--predict_file=%s" % SQUAD_V2, "--version_2_with_negative", "--max_seq_length=64",
          "--doc_stride=32", "--max_query_length=16", "--train_batch_size=2",
          "--predict_batch_size=4", "--num_train_epochs=2", "--learning_rate=1e-3",
          "--save_checkpoints_steps=2", "--keep_checkpoint_max=10",
          "--log_every_n_steps=1"] + list(modes)


def _run215(python, args):
  """Runs `python args...` (TF 2.15) in the repository; returns its stderr."""
  result = subprocess.run([python] + [str(a) for a in args], cwd=REPO_DIR, env=tool_env(),
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stderr


def _step_losses(log):
  """The training loss of every step, in order, from `loss = ...` log lines."""
  return [float(line.split("loss = ")[1].split()[0].rstrip(","))
          for line in log.splitlines() if line.startswith("INFO:tensorflow:loss = ")]


def _values(prefix):
  """{name: value} of a checkpoint."""
  reader = tf.train.load_checkpoint(str(prefix))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _max_difference(got, want):
  """The largest absolute difference of two {name: value} maps with the same names."""
  assert sorted(got) == sorted(want)
  return max(float(np.max(np.abs(got[n].astype(np.float64) - want[n]))) for n in want)


def _state(output_dir):
  """The checkpoints a state file lists (relative names), oldest first."""
  state = tf.compat.v1.train.get_checkpoint_state(str(output_dir))
  return [os.path.basename(p) for p in state.all_model_checkpoint_paths]


def _read_json(path):
  with open(str(path), encoding="utf-8") as f:
    return json.load(f)


@pytest.fixture(scope="module")
def both_engines(tmp_path_factory, config_file):
  """The same train + predict job on the Estimator (TF 2.15) and on the TF2 engine."""
  python215 = tf215_python()
  root = tmp_path_factory.mktemp("squad_both_engines")
  estimator_log = _run215(python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "run_squad"] +
                          _job_args(config_file, root / "estimator"))
  engine_log = run_tool("run_squad.py", _job_args(config_file, root / "tf2")).stderr
  return {"estimator": root / "estimator", "tf2": root / "tf2", "python215": python215,
          "estimator_log": estimator_log, "tf2_log": engine_log}


@pytest.mark.slow
def test_both_engines_give_the_same_losses_predictions_and_checkpoints(both_engines):
  est, tf2 = both_engines["estimator"], both_engines["tf2"]
  # The same loss at every step: the same initial weights, batches and updates.
  est_losses, tf2_losses = (_step_losses(both_engines[k]) for k in ("estimator_log", "tf2_log"))
  assert len(est_losses) == len(tf2_losses) == NUM_STEPS, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=ROUNDING)
  assert "train: step %d/%d" % (NUM_STEPS, NUM_STEPS) in both_engines["tf2_log"]
  # The predictions: the same answers and n-best texts, scores to float32 rounding.
  for name in PREDICTION_FILES:
    assert (tf2 / name).exists() and (est / name).exists(), name
    assert _read_json(tf2 / (name + ".checkpoint.json")) == {
        "checkpoint": str(tf2 / "model.ckpt-5"), "global_step": NUM_STEPS}, name
  assert _read_json(tf2 / "predictions.json") == _read_json(est / "predictions.json")
  est_nbest, tf2_nbest = (_read_json(d / "nbest_predictions.json") for d in (est, tf2))
  assert sorted(tf2_nbest) == sorted(est_nbest)
  for qid, entries in est_nbest.items():
    assert [e["text"] for e in tf2_nbest[qid]] == [e["text"] for e in entries], qid
    for key in ("probability", "start_logit", "end_logit"):
      np.testing.assert_allclose([e[key] for e in tf2_nbest[qid]], [e[key] for e in entries],
                                 rtol=0, atol=ROUNDING, err_msg="%s %s" % (qid, key))
  est_odds, tf2_odds = (_read_json(d / "null_odds.json") for d in (est, tf2))
  assert sorted(tf2_odds) == sorted(est_odds)
  np.testing.assert_allclose([tf2_odds[q] for q in sorted(est_odds)],
                             [est_odds[q] for q in sorted(est_odds)], rtol=0, atol=ROUNDING)
  # The scores, the step reached and the checkpoint scored.
  est_results, tf2_results = (_read_json(d / "eval_results.json") for d in (est, tf2))
  assert sorted(tf2_results) == sorted(est_results)
  for key, value in est_results.items():
    if key == "checkpoint":
      assert tf2_results[key] == str(tf2 / "model.ckpt-5")
    else:
      assert tf2_results[key] == pytest.approx(value, abs=ROUNDING), key
  assert tf2_results["global_step"] == tf2_results["num_train_steps"] == NUM_STEPS
  assert "exact = " in (tf2 / "eval_results.txt").read_text()
  # The checkpoints: the same ones kept, the same names and shapes (weights, Adam slots,
  # global_step; BERT's pooler without slots, as the Estimator's optimizer skips it); the
  # random initial weights bit for bit, the trained ones to rounding.
  assert _state(tf2) == _state(est) == CHECKPOINTS
  for name in CHECKPOINTS:
    names = tf.train.list_variables(str(tf2 / name))
    assert names == tf.train.list_variables(str(est / name)), name
  names = {n for n, _ in names}
  assert {"global_step", "cls/squad/output_weights/adam_m", "cls/squad/output_bias/adam_v",
          "bert/embeddings/word_embeddings/adam_m", "bert/pooler/dense/kernel"} <= names
  assert not [n for n in names if n.startswith("bert/pooler/") and "/adam_" in n]
  assert _max_difference(_values(tf2 / "model.ckpt-0"), _values(est / "model.ckpt-0")) == 0
  assert _max_difference(_values(tf2 / "model.ckpt-5"),
                         _values(est / "model.ckpt-5")) <= ROUNDING


def _as_stopped_at(source, target, step):
  """A copy of output directory `source` as a training job stopped after checkpoint `step`
  left it (no later checkpoint, no prediction files)."""
  shutil.copytree(str(source), str(target))
  kept = [name for name in CHECKPOINTS if int(name.rsplit("-", 1)[1]) <= step]
  dropped = [name + "." for name in CHECKPOINTS if name not in kept]
  for entry in os.listdir(str(target)):
    if entry.startswith(tuple(dropped) + PREDICTION_FILES + ("eval",)):
      os.remove(str(target / entry))
  tf.compat.v1.train.update_checkpoint_state(str(target), kept[-1],
                                             all_model_checkpoint_paths=kept)


@pytest.mark.slow
def test_a_checkpoint_of_either_engine_resumes_on_the_other(both_engines, config_file,
                                                            tmp_path):
  est, tf2 = both_engines["estimator"], both_engines["tf2"]
  # The Estimator's step-2 checkpoint, continued by the TF2 engine.
  resumed = tmp_path / "estimator_then_tf2"
  _as_stopped_at(est, resumed, 2)
  log = run_tool("run_squad.py", _job_args(config_file, resumed, ["--do_train"])).stderr
  assert "Restoring %s (step 2)" % (resumed / "model.ckpt-2") in log
  assert len(_step_losses(log)) == NUM_STEPS - 2
  assert _state(resumed) == CHECKPOINTS
  assert _max_difference(_values(resumed / "model.ckpt-5"),
                         _values(est / "model.ckpt-5")) <= ROUNDING
  # The TF2 engine's, continued by the Estimator.
  resumed = tmp_path / "tf2_then_estimator"
  _as_stopped_at(tf2, resumed, 2)
  _run215(both_engines["python215"], [os.path.join(REPO_DIR, "run_squad.py")] +
          _job_args(config_file, resumed, ["--do_train"]))
  assert _max_difference(_values(resumed / "model.ckpt-5"),
                         _values(tf2 / "model.ckpt-5")) <= ROUNDING


@newest_tf_only
def test_engine_predictions_are_the_exported_models_logits(config_file, tmp_path):
  checkpoint = _squad_checkpoint(config_file, tmp_path / "finetuned" / "model.ckpt")
  out, export_dir = tmp_path / "out", tmp_path / "export"
  args = _job_args(config_file, out, ["--do_predict", "--output_raw_logits",
                                      "--init_checkpoint=%s" % checkpoint,
                                      "--export_dir=%s" % export_dir])
  run_tool("run_squad.py", args)
  for name in PREDICTION_FILES + ("raw_logits.npz", "eval_results.json"):
    assert (out / name).exists(), name
  assert not [n for n in os.listdir(out) if n.startswith("model.ckpt")]
  results = _read_json(out / "eval_results.json")
  assert (results["checkpoint"], results["total"]) == (checkpoint, 5)
  # The engine's logits (the prediction graph in a tf.function over tf.Variables) are the
  # SavedModel's (a TF1 graph restored by a Saver), feature by feature.
  served = _served_logits(export_dir, out / "eval.tf_record")
  raw = np.load(out / "raw_logits.npz")
  np.testing.assert_array_equal(served["unique_ids"], raw["unique_ids"])
  assert raw["start_logits"].shape == (5, 64)
  for name in ("start_logits", "end_logits"):
    np.testing.assert_allclose(raw[name], served[name], rtol=0, atol=1e-5, err_msg=name)


def _served_logits(export_dir, record_file):
  """The SavedModel's logits for the features of a run_squad eval.tf_record.

  Returns:
    {"unique_ids" [features], "start_logits", "end_logits" [features, 64]}.
  """
  serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
  spec = {name: tf.io.FixedLenFeature([64], tf.int64)
          for name in ("input_ids", "input_mask", "segment_ids")}
  spec["unique_ids"] = tf.io.FixedLenFeature([], tf.int64)
  outputs = {"unique_ids": [], "start_logits": [], "end_logits": []}
  for batch in tf.data.TFRecordDataset(str(record_file)).map(
      lambda record: tf.io.parse_single_example(record, spec)).batch(3):
    served = serve(**{name: tf.cast(batch[name], tf.int32)
                      for name in ("input_ids", "input_mask", "segment_ids")})
    outputs["unique_ids"].append(batch["unique_ids"].numpy())
    for name in ("start_logits", "end_logits"):
      outputs[name].append(served[name].numpy())
  return {name: np.concatenate(values) for name, values in outputs.items()}


@newest_tf_only
@pytest.mark.parametrize("flag,shown", [
    (["--iterations_per_loop=10"], "--iterations_per_loop=10"),
])
def test_estimator_only_flags_are_one_line_errors(config_file, tmp_path, flag, shown):
  out = tmp_path / "out"
  result = run_tool("run_squad.py", _job_args(config_file, out) + flag, expect_rc=2)
  line = last_error_line(result)
  assert line.startswith("error: %s: implemented by the Estimator only (TensorFlow 2.15); "
                         "run_squad.py on TF %s" % (shown, tf.__version__)), line
  assert "Traceback" not in result.stderr and not out.exists()
