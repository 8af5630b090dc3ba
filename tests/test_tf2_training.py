"""Training on the newest TensorFlow: the tf.distribute engine (realformer_tf.tf2_training).

Without the Estimator (TF >= 2.16) run_classifier and run_pretraining train (evaluate, predict)
with tf2_training.Engine over the modeling.py graph the Estimator runs on TF 2.15. On the newest
TF (`bash run.sh test-latest`) these tests check:
- one job on both engines (the TF 2.15 side in a subprocess of $REALFORMER_TF215_PYTHON): the
  same loss at every step, eval metrics, predictions and checkpoints (names, the checkpoints
  kept, values), for run_classifier and for run_pretraining (MLM + NSP, from scratch); a
  classifier checkpoint of either engine resumes on the other to the other's weights;
- a job stopped by SIGTERM and killed by SIGKILL, then rerun, ends with the uninterrupted job's
  weights, Adam slots and step, bit for bit;
- MirroredStrategy over two logical CPUs ends with the single-device weights (evaluation during
  training on the way);
- the Estimator-only flags and an init checkpoint of another model are one-line errors;
- run_pretraining with --gradient_accumulation_steps=2 on both engines: the same losses,
  checkpoints (with the `<var>/grad_accum` accumulators) and TensorBoard scalars, and a job
  stopped inside an accumulation resumes on the other engine to the other's weights;
- --use_xla (XLA auto-clustering) gives the losses without it.
On both TFs, in process: the name-based checkpoints (save_checkpoint, restore_checkpoint),
check_flags, the engine's steps against optimization.py's math in NumPy (with gradient
accumulation too; on two replicas in a subprocess) and the TensorBoard scalars it writes.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, kill_when, last_error_line, run_tool
from conftest import start_tool, tf215_python, tool_env, write_random_bert_checkpoint
from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import tf2_training

SST2 = os.path.join(REPO_DIR, "tests", "fixtures", "glue", "SST-2")
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
NEWEST_TF = not estimator_utils.has_estimator()
newest_tf_only = pytest.mark.skipif(
    not NEWEST_TF, reason="TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")
# 8 training examples in batches of 4 for 5 epochs: 10 steps, checkpoints 0, 4, 8 and 10.
NUM_STEPS = 10
CHECKPOINTS = ["model.ckpt-0", "model.ckpt-4", "model.ckpt-8", "model.ckpt-10"]
# Float32 rounding between the two engines (and TF versions): measured 0 for the losses and
# metrics, 6e-8 for the predictions, 1.2e-7 for the weights on an AVX2 CPU; on an AVX-512 CPU
# the two versions' oneDNN builds pick different kernels, up to 1.5e-5 apart (run_squad's logits
# after 5 steps, run_long_tasks' weights after 6 Adam steps, on an AMD EPYC). An engine's bug
# (a schedule, a dropout, a gradient) shows at 1e-3 and more.
ROUNDING = 5e-5
# bfloat16 compute (8 significant bits) on both engines: measured 6.4e-7 for the weights after
# 4 steps, 2.6e-7 for the eval loss.
BF16_ROUNDING = 1e-3

# Run by TF 2.15 as `-c ESTIMATOR_WITH_STEP_LOSSES MODULE FLAGS...`: the command MODULE
# (run_classifier, run_pretraining), its model_fn also logging the loss of every training step
# (the Estimator off TPU logs only the last one).
ESTIMATOR_WITH_STEP_LOSSES = r"""
import importlib
import sys
from absl import app
import tensorflow as tf
from realformer_tf import common

tf1 = tf.compat.v1
command = importlib.import_module(sys.argv[1])
official_builder = command.model_fn_builder


def model_fn_builder(*args, **kwargs):
  model_fn = official_builder(*args, **kwargs)

  def logged(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    if mode == tf1.estimator.ModeKeys.TRAIN:
      hook = tf1.train.LoggingTensorHook({"loss": spec.loss}, every_n_iter=1)
      spec = spec._replace(training_hooks=tuple(spec.training_hooks) + (hook,))
    return spec
  return logged


command.model_fn_builder = model_fn_builder
command.define_flags()
app.run(lambda argv: common.run_main(command.main, argv), argv=sys.argv[:1] + sys.argv[2:])
"""

# run_classifier.py without any dropout (the classifier head's fixed 0.1 included: other
# replicas draw other masks), on a CPU split into two logical devices when the first argument is
# --two_cpus (for --distribution_strategy=mirrored).
WITHOUT_DROPOUT = r"""
import sys
import tensorflow as tf
if sys.argv[1] == "--two_cpus":
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import modeling
modeling.dropout = lambda input_tensor, dropout_prob, **kwargs: input_tensor
import run_classifier
run_classifier.run(sys.argv[:1] + sys.argv[2:])
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  """A tiny RealFormer config (dropout 0.1) and a random BERT checkpoint without a classifier
  head (the head starts from random weights)."""
  root = tmp_path_factory.mktemp("tf2_engine_model")
  config = dict(TINY_BERT_CONFIG, residual_attention="sum")
  (root / "bert_config.json").write_text(json.dumps(config))
  (root / "init").mkdir()
  checkpoint = write_random_bert_checkpoint(str(root / "bert_config.json"),
                                            str(root / "init" / "bert_model.ckpt"))
  return root, checkpoint


def _job_args(model, output_dir, extra=()):
  root, checkpoint = model
  return ["--task_name=sst-2", "--data_dir=%s" % SST2, "--vocab_file=%s" % VOCAB,
          "--bert_config_file=%s" % (root / "bert_config.json"), "--init_checkpoint=%s" % checkpoint,
          "--output_dir=%s" % output_dir, "--max_seq_length=32", "--train_batch_size=4",
          "--eval_batch_size=3", "--predict_batch_size=2", "--learning_rate=1e-3",
          "--num_train_epochs=5", "--save_checkpoints_steps=4", "--keep_checkpoint_max=10",
          "--log_every_n_steps=1"] + list(extra)


def _run215(python, args, timeout=300):
  """Runs `python args...` (TF 2.15) in the repository; returns the CompletedProcess."""
  result = subprocess.run([python] + [str(a) for a in args], cwd=REPO_DIR, env=tool_env(),
                          capture_output=True, text=True, timeout=timeout)
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def _side_by_side(python, args, script, tool_args, env=None):
  """Runs `python args...` (TF 2.15, or this Python) in the background while run_tool runs
  `script tool_args...`: two independent jobs side by side, half the wall time on two cores
  for the same work.

  Args:
    python: the background job's interpreter.
    args: its arguments (after the interpreter).
    script: run_tool's script (None: tool_args is the whole command after this Python).
    tool_args: run_tool's arguments.
    env: extra environment variables of both jobs.

  Returns:
    (the background job's stderr, run_tool's stderr); both must exit with status 0.
  """
  with tempfile.TemporaryFile("w+") as log:
    proc = subprocess.Popen([python] + [str(a) for a in args], cwd=REPO_DIR,
                            env=tool_env(env), stdout=subprocess.DEVNULL, stderr=log, text=True)
    try:
      tool_log = run_tool(script, tool_args, env=env).stderr
    finally:
      returncode = proc.wait(timeout=300)
    log.seek(0)
    background_log = log.read()
  assert returncode == 0, background_log[-3000:]
  return background_log, tool_log


def _step_losses(log):
  """The training loss of every step, in order, from `loss = ...` log lines."""
  return [float(x) for x in re.findall(r"^INFO:tensorflow:loss = ([-+0-9.eE]+|nan|inf)", log,
                                       re.M)]


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


def _scalar_events(output_dir):
  """{tag: [(step, value), ...] in the order of the steps} of the scalar summaries in
  output_dir's events files (one per engine or Estimator call)."""
  scalars = {}
  for path in sorted(tf.io.gfile.glob(os.path.join(str(output_dir), "events.out.tfevents.*"))):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        number = (value.simple_value if value.WhichOneof("value") == "simple_value"
                  else float(tf.make_ndarray(value.tensor)))
        scalars.setdefault(value.tag, []).append((event.step, number))
  return {tag: sorted(points) for tag, points in scalars.items()}


def _read_floats(path):
  with open(str(path)) as f:
    return np.array([[float(x) for x in line.split("\t")] for line in f.read().splitlines()])


@pytest.fixture(scope="module")
def both_engines(tmp_path_factory, model):
  """The same train / eval / predict job on the Estimator (TF 2.15) and the TF2 engine."""
  python215 = tf215_python()
  root = tmp_path_factory.mktemp("both_engines")
  modes = ["--do_train", "--do_eval", "--do_predict"]
  estimator_log, tf2_log = _side_by_side(
      python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "run_classifier"] +
      _job_args(model, root / "estimator", modes),
      "run_classifier.py", _job_args(model, root / "tf2", modes))
  return {"estimator": root / "estimator", "tf2": root / "tf2",
          "estimator_log": estimator_log, "tf2_log": tf2_log, "python215": python215}


@pytest.mark.slow
def test_both_engines_give_the_same_losses_metrics_predictions_and_checkpoints(both_engines):
  est, tf2 = both_engines["estimator"], both_engines["tf2"]
  # The same loss at every step (dropout 0.1 included: the masks are keyed on the same op
  # names and global step), hence the same batches in the same order.
  est_losses, tf2_losses = (_step_losses(both_engines[k]) for k in ("estimator_log", "tf2_log"))
  assert len(est_losses) == len(tf2_losses) == NUM_STEPS, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=ROUNDING)
  assert "train: step %d/%d" % (NUM_STEPS, NUM_STEPS) in both_engines["tf2_log"]
  # Dev metrics and predictions.
  est_results, tf2_results = (json.loads((d / "eval_results.json").read_text())
                              for d in (est, tf2))
  assert tf2_results["global_step"] == est_results["global_step"] == NUM_STEPS
  assert tf2_results["eval_accuracy"] == est_results["eval_accuracy"]
  assert tf2_results["eval_loss"] == pytest.approx(est_results["eval_loss"], abs=ROUNDING)
  assert tf2_results["checkpoint"] == str(tf2 / "model.ckpt-10")
  assert "eval_accuracy = " in (tf2 / "eval_results.txt").read_text()
  np.testing.assert_allclose(_read_floats(tf2 / "test_results.tsv"),
                             _read_floats(est / "test_results.tsv"), rtol=0, atol=ROUNDING)
  assert (tf2 / "SST-2.tsv").read_text() == (est / "SST-2.tsv").read_text()
  # The checkpoints: the same ones kept, with the same names and shapes (weights, Adam slots,
  # global_step); the initial weights equal (the head's random ones included), the trained
  # ones to rounding.
  assert _state(tf2) == _state(est) == CHECKPOINTS
  for name in CHECKPOINTS:
    names = tf.train.list_variables(str(tf2 / name))
    assert names == tf.train.list_variables(str(est / name)), name
  assert {"global_step", "output_weights", "output_weights/adam_m", "output_weights/adam_v",
          "bert/pooler/dense/kernel/adam_v"} <= {n for n, _ in names}
  assert _max_difference(_values(tf2 / "model.ckpt-0"), _values(est / "model.ckpt-0")) == 0
  assert _max_difference(_values(tf2 / "model.ckpt-10"),
                         _values(est / "model.ckpt-10")) <= ROUNDING


def _as_stopped_at(source, target, step, checkpoints=CHECKPOINTS):
  """A copy of output directory `source` (whose checkpoints are `checkpoints`) as a job stopped
  after checkpoint `step` left it."""
  shutil.copytree(str(source), str(target))
  kept = [name for name in checkpoints if int(name.rsplit("-", 1)[1]) <= step]
  for entry in os.listdir(str(target)):
    later = entry.startswith("model.ckpt-") and entry.split(".")[1] not in (
        name.split(".")[1] for name in kept)
    if later or entry.startswith(("eval_results", "test_results", "SST-2.tsv")):
      os.remove(str(target / entry))
  tf.compat.v1.train.update_checkpoint_state(str(target), kept[-1],
                                             all_model_checkpoint_paths=kept)


@pytest.mark.slow
def test_a_checkpoint_of_either_engine_resumes_on_the_other(both_engines, model, tmp_path):
  est, tf2 = both_engines["estimator"], both_engines["tf2"]
  # The Estimator's step-4 checkpoint, continued by the TF2 engine, while the TF2 engine's is
  # continued by the Estimator.
  est_then_tf2, tf2_then_est = tmp_path / "estimator_then_tf2", tmp_path / "tf2_then_estimator"
  _as_stopped_at(est, est_then_tf2, 4)
  _as_stopped_at(tf2, tf2_then_est, 4)
  _, log = _side_by_side(
      both_engines["python215"], [os.path.join(REPO_DIR, "run_classifier.py")] +
      _job_args(model, tf2_then_est, ["--do_train"]),
      "run_classifier.py", _job_args(model, est_then_tf2, ["--do_train"]))
  assert "Restoring %s (step 4)" % (est_then_tf2 / "model.ckpt-4") in log
  assert len(_step_losses(log)) == NUM_STEPS - 4
  assert _max_difference(_values(est_then_tf2 / "model.ckpt-10"),
                         _values(est / "model.ckpt-10")) <= ROUNDING
  assert _max_difference(_values(tf2_then_est / "model.ckpt-10"),
                         _values(tf2 / "model.ckpt-10")) <= ROUNDING


def _checkpoint_step(output_dir):
  """The step of the latest checkpoint the state file names (0 when there is none)."""
  state = tf.compat.v1.train.get_checkpoint_state(str(output_dir))
  return int(state.model_checkpoint_path.rsplit("-", 1)[1]) if state else 0


@newest_tf_only
@pytest.mark.slow
def test_stopped_and_killed_job_reruns_to_the_uninterrupted_weights(model, tmp_path):
  # 200 steps (checkpoints every 20): time to stop and kill it on the way.
  extra = ["--do_train", "--num_train_epochs=100", "--save_checkpoints_steps=20",
           "--log_every_n_steps=50"]
  # The uninterrupted job runs side by side with the interrupted one.
  reference = tmp_path / "reference"
  with tempfile.TemporaryFile("w+") as reference_log:
    reference_job = start_tool("run_classifier.py", _job_args(model, reference, extra),
                               stderr=reference_log)
    try:
      out = tmp_path / "out"
      args = _job_args(model, out, extra)
      # SIGTERM: the step finishes, a checkpoint of that step is written, exit 143.
      status, err = kill_when("run_classifier.py", args, lambda: _checkpoint_step(out) >= 20,
                              signal.SIGTERM)
      assert status == 143, err[-3000:]
      assert "interrupted (signal 15)" in err
      stopped_at = _checkpoint_step(out)
      assert 20 <= stopped_at < 200
      # SIGKILL later: the rerun continues from the last checkpoint.
      status, err = kill_when("run_classifier.py", args,
                              lambda: _checkpoint_step(out) >= stopped_at + 40, signal.SIGKILL)
      assert status == -signal.SIGKILL, err[-3000:]
      assert "Restoring %s (step %d)" % (out / ("model.ckpt-%d" % stopped_at), stopped_at) in err
      killed_at = _checkpoint_step(out)
      assert stopped_at < killed_at < 200
      log = run_tool("run_classifier.py", args).stderr
      assert "Restoring %s (step %d)" % (out / ("model.ckpt-%d" % killed_at), killed_at) in log
    finally:
      returncode = reference_job.wait(timeout=300)
    reference_log.seek(0)
    assert returncode == 0, reference_log.read()[-3000:]
  # Exactly the uninterrupted weights, Adam slots and step: the skipped batches and the
  # step-seeded dropout masks are those the uninterrupted job saw.
  assert _checkpoint_step(out) == 200
  assert _max_difference(_values(out / "model.ckpt-200"),
                         _values(reference / "model.ckpt-200")) == 0


@newest_tf_only
@pytest.mark.slow
def test_mirrored_on_two_cpus_ends_with_the_single_device_weights(model, tmp_path):
  # The single-device job also evaluates every 4 steps (--keep_best): it trains in chunks,
  # each resumed from the last one's checkpoint, and still ends where the mirrored job does.
  single, mirrored = tmp_path / "single", tmp_path / "mirrored"
  # The same global batch of 4: 2 examples on each replica (the two jobs side by side).
  single_log, log = _side_by_side(
      sys.executable, ["-c", WITHOUT_DROPOUT, "--one_cpu"] + _job_args(
          model, single, ["--do_train", "--do_eval", "--eval_every_steps=4", "--keep_best"]),
      None, ["-c", WITHOUT_DROPOUT, "--two_cpus"] + _job_args(
          model, mirrored, ["--do_train", "--do_eval", "--distribution_strategy=mirrored"]))
  assert "2 replicas in sync: 2 examples per replica per step" in log
  assert len(_step_losses(log)) == len(_step_losses(single_log)) == NUM_STEPS
  np.testing.assert_allclose(_step_losses(log), _step_losses(single_log), rtol=0,
                             atol=ROUNDING)
  assert _max_difference(_values(mirrored / "model.ckpt-10"),
                         _values(single / "model.ckpt-10")) <= ROUNDING
  single_results, mirrored_results = (json.loads((d / "eval_results.json").read_text())
                                      for d in (single, mirrored))
  assert mirrored_results["eval_accuracy"] == single_results["eval_accuracy"]
  # Evaluation during training: the history of steps 4, 8, 10 and the best of them, scored.
  history = [json.loads(line) for line in (single / "eval_history.jsonl").read_text().splitlines()]
  assert [entry["step"] for entry in history] == [4, 8, 10]
  best = json.loads((single / "best" / "best.json").read_text())
  assert (single_results["scored_checkpoint"], single_results["scored_step"]) == (
      "best", best["step"])
  if best["step"] == 10:
    assert single_results["eval_loss"] == pytest.approx(mirrored_results["eval_loss"],
                                                        abs=ROUNDING)


@newest_tf_only
def test_estimator_only_flags_and_foreign_init_checkpoint_are_one_line_errors(model, tmp_path):
  out = tmp_path / "out"
  result = run_tool("run_classifier.py", _job_args(
      model, out, ["--do_train", "--iterations_per_loop=10"]), expect_rc=2)
  line = last_error_line(result)
  assert line.startswith("error: --iterations_per_loop=10: implemented by the Estimator only "
                         "(TensorFlow "
                         "2.15); run_classifier.py on TF %s trains with tf.distribute" %
                         tf.__version__), line
  assert "`bash run.sh python run_classifier.py ...`" in line
  assert "Traceback" not in result.stderr and not out.exists()
  # An init checkpoint of another model: the Estimator's check, the same line.
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("encoder/layer_0/attention/kernel", [4, 4])
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      foreign = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "nmt" / "model.ckpt-7"))
  args = _job_args(model, out, ["--do_train"])
  args = [a for a in args if not a.startswith("--init_checkpoint")]
  result = run_tool("run_classifier.py", args + ["--init_checkpoint=%s" % foreign], expect_rc=2)
  assert last_error_line(result).startswith(
      "error: --init_checkpoint=%s: supplies none of the model's 41 variables (missing: "
      "bert/embeddings/word_embeddings" % foreign)
  assert not [p for p in os.listdir(out) if p.startswith("model.ckpt")]


def _pretraining_args(root, output_dir):
  return ["--input_file=%s" % (root / "data.tfrecord"), "--output_dir=%s" % output_dir,
          "--bert_config_file=%s" % (root / "bert_config.json"), "--max_seq_length=32",
          "--max_predictions_per_seq=5", "--train_batch_size=8", "--eval_batch_size=8",
          "--num_train_steps=8", "--num_warmup_steps=2", "--learning_rate=1e-3",
          "--save_checkpoints_steps=4", "--keep_checkpoint_max=10", "--log_every_n_steps=1",
          "--do_train", "--do_eval"]


@pytest.fixture(scope="module")
def pretraining_data(tmp_path_factory):
  """A directory with pre-training records (data.tfrecord, written by TF 2.15's
  create_pretraining_data.py) and a tiny RealFormer bert_config.json."""
  python215 = tf215_python()
  root = tmp_path_factory.mktemp("pretraining_data")
  rng = np.random.RandomState(0)
  words = ("the king said that a whale was seen near the ship and the captain laughed at "
           "her brother while the sea rose over old stone walls").split()
  documents = ["\n".join(" ".join(rng.choice(words, rng.randint(4, 14))) + "."
                         for _ in range(rng.randint(2, 8))) for _ in range(30)]
  (root / "text.txt").write_text("\n\n".join(documents) + "\n")
  _run215(python215, [os.path.join(REPO_DIR, "create_pretraining_data.py"),
                      "--input_file=%s" % (root / "text.txt"),
                      "--output_file=%s" % (root / "data.tfrecord"), "--vocab_file=%s" % VOCAB,
                      "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=1",
                      "--num_workers=1"])
  (root / "bert_config.json").write_text(json.dumps(dict(TINY_BERT_CONFIG,
                                                         residual_attention="sum")))
  return root


@pytest.mark.slow
def test_pretraining_on_both_engines_gives_the_same_losses_metrics_and_checkpoints(
    pretraining_data, tmp_path):
  python215 = tf215_python()
  # From scratch: every initial weight is a seeded random one.
  est, tf2 = tmp_path / "estimator", tmp_path / "tf2"
  est_log, tf2_log = _side_by_side(
      python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "run_pretraining"] +
      _pretraining_args(pretraining_data, est),
      "run_pretraining.py", _pretraining_args(pretraining_data, tf2))
  est_losses, tf2_losses = _step_losses(est_log), _step_losses(tf2_log)
  assert len(est_losses) == len(tf2_losses) == 8, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=ROUNDING)
  # The MLM and NSP metrics of the evaluation (and Estimator.evaluate's mean loss).
  est_results, tf2_results = (json.loads((d / "eval_results.json").read_text())
                              for d in (est, tf2))
  assert sorted(tf2_results) == sorted(est_results)
  for key in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
              "next_sentence_loss", "loss"):
    assert tf2_results[key] == pytest.approx(est_results[key], abs=ROUNDING), key
  for key in ("global_step", "eval_examples", "eval_records"):
    assert tf2_results[key] == est_results[key], key
  est_summary, tf2_summary = (json.loads((d / "train_summary_local.json").read_text())
                              for d in (est, tf2))
  assert tf2_summary["global_step"] == est_summary["global_step"] == 8
  assert sorted(tf2_summary) == sorted(est_summary)
  # The checkpoints: names (the heads' cls/* and their Adam slots), the random initial
  # weights bit for bit, the trained ones to rounding.
  assert _state(tf2) == _state(est) == ["model.ckpt-0", "model.ckpt-4", "model.ckpt-8"]
  names = tf.train.list_variables(str(tf2 / "model.ckpt-8"))
  assert names == tf.train.list_variables(str(est / "model.ckpt-8"))
  assert {"cls/predictions/output_bias/adam_m", "cls/seq_relationship/output_weights"} <= {
      n for n, _ in names}
  assert _max_difference(_values(tf2 / "model.ckpt-0"), _values(est / "model.ckpt-0")) == 0
  assert _max_difference(_values(tf2 / "model.ckpt-8"),
                         _values(est / "model.ckpt-8")) <= ROUNDING
  _check_same_scalars(est, tf2)


def _check_same_scalars(est, tf2):
  """The TensorBoard scalars of both engines' jobs: the Estimator's tags (the model's own
  included) in the TF2 engine's events, and their values at the step the Estimator wrote them
  (its first: every 100 steps)."""
  est_scalars, tf2_scalars = _scalar_events(est), _scalar_events(tf2)
  assert {"loss", "learning_rate", "masked_lm_accuracy", "masked_lm_loss",
          "next_sentence_loss"} <= set(est_scalars)
  assert set(tf2_scalars) == set(est_scalars) | {"global_step/sec"}
  for tag, points in est_scalars.items():
    assert [step for step, _ in points] == [1], (tag, points)
    got = dict(tf2_scalars[tag])
    assert got[1] == pytest.approx(points[0][1], abs=ROUNDING), tag
  # The TF2 engine logs every step (--log_every_n_steps=1): all but the first have a rate.
  assert [step for step, _ in tf2_scalars["loss"]] == list(range(1, 9))
  assert [step for step, _ in tf2_scalars["global_step/sec"]] == list(range(2, 9))
  assert all(rate > 0 for _, rate in tf2_scalars["global_step/sec"])


# ----------------------------------------------------------------------------------------------
# The library, on both TFs.


def test_check_flags_refuses_what_only_the_estimator_implements():
  defaults = dict(tf2_training.ESTIMATOR_ONLY_FLAGS, distribution_strategy="none")
  tf2_training.check_flags(argparse.Namespace(**defaults), "run_classifier.py")
  tf2_training.check_flags(argparse.Namespace(**dict(defaults, distribution_strategy="mirrored")),
                           "run_classifier.py")
  # What a command passes on to the engine (its xla and precisions) is not refused.
  tf2_training.check_flags(argparse.Namespace(**dict(defaults, use_xla=True)), "run_classifier.py",
                           xla=True)
  tf2_training.check_flags(argparse.Namespace(**dict(defaults, precision="bf16")),
                           "run_pretraining.py", precisions=tf2_training.ENGINE_PRECISIONS)
  cases = {"use_tpu": (True, "--use_tpu"), "tpu_name": ("t1", "--tpu_name=t1"),
           "use_xla": (True, "--use_xla"),
           "master": ("grpc://m", "--master=grpc://m"), "num_tpu_cores": (32, "--num_tpu_cores=32"),
           "iterations_per_loop": (100, "--iterations_per_loop=100"),
           "precision": ("bf16", "--precision=bf16"),
           "tpu_zone": ("z", "--tpu_zone=z"), "gcp_project": ("p", "--gcp_project=p")}
  assert set(cases) == set(tf2_training.ESTIMATOR_ONLY_FLAGS)
  for name, (value, shown) in cases.items():
    with pytest.raises(common.UsageError) as e:
      tf2_training.check_flags(argparse.Namespace(**dict(defaults, **{name: value})),
                               "run_classifier.py")
    assert str(e.value).startswith("%s: implemented by the Estimator only" % shown), name
  with pytest.raises(common.UsageError, match="^--distribution_strategy=multi_worker_mirrored: "
                     "implemented by the Estimator only"):
    tf2_training.check_flags(argparse.Namespace(
        **dict(defaults, distribution_strategy="multi_worker_mirrored")), "run_classifier.py")
  # A command that makes its strategy at start-up runs several workers.
  tf2_training.check_flags(argparse.Namespace(
      **dict(defaults, distribution_strategy="multi_worker_mirrored")), "run_pretraining.py",
                           multi_worker=True)


def test_name_based_checkpoints_are_the_tf1_savers(tmp_path):
  out = str(tmp_path)
  kernel = np.arange(6, dtype=np.float32).reshape(2, 3)
  variables = {"bert/dense/kernel": tf.Variable(kernel),
               "bert/dense/kernel/adam_m": tf.Variable(np.full((2, 3), 0.5, np.float32)),
               "global_step": tf.Variable(4, dtype=tf.int64)}
  for step in (0, 4, 8):
    prefix = tf2_training.save_checkpoint(variables, out, step, keep_checkpoint_max=2)
  assert prefix == os.path.join(out, "model.ckpt-8")
  # The newest two kept, named relative to the directory (as the Estimator's Saver does).
  assert _state(out) == ["model.ckpt-4", "model.ckpt-8"]
  assert 'model_checkpoint_path: "model.ckpt-8"' in (tmp_path / "checkpoint").read_text()
  assert sorted(os.listdir(out)) == ["checkpoint", "model.ckpt-4.data-00000-of-00001",
                                     "model.ckpt-4.index", "model.ckpt-8.data-00000-of-00001",
                                     "model.ckpt-8.index"]
  assert tf.train.list_variables(prefix) == [("bert/dense/kernel", [2, 3]),
                                             ("bert/dense/kernel/adam_m", [2, 3]),
                                             ("global_step", [])]
  # The tf.compat.v1 Saver of a graph (the Estimator's) restores it by name.
  with tf.Graph().as_default():
    graph_kernel = tf.compat.v1.get_variable("bert/dense/kernel", [2, 3])
    with tf.compat.v1.Session() as sess:
      tf.compat.v1.train.Saver([graph_kernel]).restore(sess, prefix)
      np.testing.assert_array_equal(sess.run(graph_kernel), kernel)
  # Restored into other variables; a missing name or another shape is one line.
  fresh = {name: tf.Variable(tf.zeros_like(v)) for name, v in variables.items()}
  tf2_training.restore_checkpoint(fresh, prefix)
  np.testing.assert_array_equal(fresh["bert/dense/kernel"].numpy(), kernel)
  assert int(fresh["global_step"].numpy()) == 4
  with pytest.raises(common.UsageError, match=r"^checkpoint .*model.ckpt-8: lacks "
                     r"output_bias that this job restores$"):
    tf2_training.restore_checkpoint(dict(fresh, output_bias=tf.Variable([0.0])), prefix)
  with pytest.raises(common.UsageError, match=r"bert/dense/kernel has shape \[2, 3\] there but "
                     r"\[3, 2\] in this job's model$"):
    tf2_training.restore_checkpoint({"bert/dense/kernel": tf.Variable(tf.zeros([3, 2]))},
                                    prefix)


# A linear regression with tf.compat.v1 variables: its step has a closed form (numpy_adamw_steps).
FEATURES = np.random.RandomState(3).normal(size=(12, 3)).astype(np.float32)
TARGETS = (FEATURES @ np.array([2.0, -1.0, 0.5], np.float32) + 3.0).astype(np.float32)


def _linear_model_fn(features, is_training):  # pylint: disable=unused-argument
  with tf.compat.v1.variable_scope("dense"):
    kernel = tf.compat.v1.get_variable(
        "kernel", [3, 1], initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.5))
    bias = tf.compat.v1.get_variable("bias", [1], initializer=tf.compat.v1.zeros_initializer())
  prediction = (tf.matmul(features["x"], kernel) + bias)[:, 0]
  return tf.reduce_mean(tf.square(prediction - features["y"])), {"prediction": prediction}


def _linear_input_fn_for(skip_batches):
  def input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices({"x": FEATURES, "y": TARGETS}).repeat()
    return dataset.batch(params["batch_size"], drop_remainder=True).skip(skip_batches)
  return input_fn


def numpy_adamw_steps(values, steps, learning_rate, num_train_steps, num_warmup_steps,
                      batch_size=4, accumulation_steps=1):
  """optimization.py's training steps of the linear model, in float64 NumPy.

  Gradients of the mean squared error, clipping to global norm 1, linear warm-up then linear
  decay, Adam without bias correction, weight decay 0.01 for the kernel (not the bias). With
  gradient accumulation every step adds its (unclipped) gradient to an accumulator, and every
  accumulation_steps-th applies their mean, clipped, at the rate of update step //
  accumulation_steps.

  Args:
    values: {"dense/kernel" [3, 1], "dense/bias" [1]} at step 0.
    steps: the number of steps (micro-batches).
    learning_rate, num_train_steps, num_warmup_steps: the schedule (in updates).
    batch_size: examples per step (in order, repeated).
    accumulation_steps: micro-batches per update.

  Returns:
    {name: value} after `steps` steps, with the `/adam_m`, `/adam_v` slots, global_step and
    (accumulation_steps > 1) the `/grad_accum` accumulators.
  """
  params = {name: values[name].astype(np.float64) for name in ("dense/kernel", "dense/bias")}
  slots = {name + suffix: np.zeros_like(value) for name, value in params.items()
           for suffix in ("/adam_m", "/adam_v")}
  accumulators = {name: np.zeros_like(value) for name, value in params.items()}
  for step in range(steps):
    rows = [(step * batch_size + i) % len(FEATURES) for i in range(batch_size)]
    x, y = FEATURES[rows].astype(np.float64), TARGETS[rows].astype(np.float64)
    residual = x @ params["dense/kernel"][:, 0] + params["dense/bias"][0] - y
    grads = {"dense/kernel": (2.0 / batch_size * x.T @ residual)[:, None],
             "dense/bias": np.array([2.0 / batch_size * residual.sum()])}
    for name, grad in grads.items():
      accumulators[name] = accumulators[name] + grad
    if (step + 1) % accumulation_steps:
      continue
    grads = {name: total / accumulation_steps for name, total in accumulators.items()}
    accumulators = {name: np.zeros_like(value) for name, value in params.items()}
    norm = np.sqrt(sum((g ** 2).sum() for g in grads.values()))
    grads = {name: g / max(norm, 1.0) for name, g in grads.items()}
    update_step = step // accumulation_steps
    if update_step < num_warmup_steps:
      rate = learning_rate * update_step / num_warmup_steps
    else:
      rate = learning_rate * (1.0 - min(update_step, num_train_steps) / num_train_steps)
    for name, grad in grads.items():
      m = slots[name + "/adam_m"] = 0.9 * slots[name + "/adam_m"] + 0.1 * grad
      v = slots[name + "/adam_v"] = 0.999 * slots[name + "/adam_v"] + 0.001 * grad ** 2
      update = m / (np.sqrt(v) + 1e-6)
      if name == "dense/kernel":
        update += 0.01 * params[name]
      params[name] = params[name] - rate * update
  if accumulation_steps > 1:
    slots.update((name + "/grad_accum", total) for name, total in accumulators.items())
  return dict(params, global_step=np.int64(steps), **slots)


def _linear_engine(output_dir, **kwargs):
  return tf2_training.Engine(_linear_model_fn, str(output_dir), train_batch_size=4,
                             learning_rate=0.1, num_train_steps=8, num_warmup_steps=2,
                             save_checkpoints_steps=3, **kwargs)


def test_engine_steps_are_optimization_pys_and_resume_exactly(tmp_path):
  # 4 steps, then a new engine (a rerun) resumes from checkpoint 4 to step 8.
  engine = _linear_engine(tmp_path)
  assert engine.train(_linear_input_fn_for, 4).global_step == 4
  assert _state(tmp_path) == ["model.ckpt-0", "model.ckpt-3", "model.ckpt-4"]
  assert _linear_engine(tmp_path).train(_linear_input_fn_for, 8).global_step == 8
  assert _state(tmp_path)[-1] == "model.ckpt-8"
  got = _values(tmp_path / "model.ckpt-8")
  assert sorted(got) == ["dense/bias", "dense/bias/adam_m", "dense/bias/adam_v", "dense/kernel",
                         "dense/kernel/adam_m", "dense/kernel/adam_v", "global_step"]
  want = numpy_adamw_steps(_values(tmp_path / "model.ckpt-0"), 8, 0.1, 8, 2)
  assert int(got["global_step"]) == 8
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
  # Predictions of the checkpoint, example by example (as Estimator.predict yields them).
  outputs = list(engine.predictor(5).predict(
      lambda params: tf.data.Dataset.from_tensor_slices(
          {"x": FEATURES, "y": TARGETS}).batch(params["batch_size"])))
  assert len(outputs) == 12 and set(outputs[0]) == {"prediction"}
  np.testing.assert_allclose([o["prediction"] for o in outputs],
                             FEATURES @ got["dense/kernel"][:, 0] + got["dense/bias"][0],
                             rtol=1e-5)
  # The fused Adam kernel: each update ~6e-6 relatively larger (optimization.py).
  fused = tmp_path / "fused"
  _linear_engine(fused, fused_optimizer=True).train(_linear_input_fn_for, 8)
  for name in ("dense/kernel", "dense/bias"):
    np.testing.assert_allclose(_values(fused / "model.ckpt-8")[name], got[name], rtol=1e-4)


def accumulating_linear_engine(output_dir, accumulation_steps=2, strategy=None):
  """The linear model's engine with gradient accumulation: 4 updates, checkpoints every 3 steps."""
  return tf2_training.Engine(_linear_model_fn, str(output_dir), strategy=strategy,
                             train_batch_size=4, learning_rate=0.1, num_train_steps=4,
                             num_warmup_steps=1, save_checkpoints_steps=3,
                             gradient_accumulation_steps=accumulation_steps)


def test_engine_accumulates_gradients_as_optimization_py_and_resumes_inside_an_accumulation(
    tmp_path):
  # 2 micro-batches per update, 4 updates: 8 steps. Stopped at step 3 (inside an accumulation:
  # its checkpoint holds the gradient of step 2), then a new engine resumes to step 8.
  engine = accumulating_linear_engine
  assert engine(tmp_path, 2).train(_linear_input_fn_for, 3).global_step == 3
  initial = _values(tmp_path / "model.ckpt-0")
  assert sorted(initial) == [
      "dense/bias", "dense/bias/adam_m", "dense/bias/adam_v", "dense/bias/grad_accum",
      "dense/kernel", "dense/kernel/adam_m", "dense/kernel/adam_v", "dense/kernel/grad_accum",
      "global_step"]
  got = _values(tmp_path / "model.ckpt-3")
  want = numpy_adamw_steps(initial, 3, 0.1, 4, 1, accumulation_steps=2)
  assert np.abs(got["dense/kernel/grad_accum"]).sum() > 0
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
  assert engine(tmp_path, 2).train(_linear_input_fn_for, 8).global_step == 8
  got = _values(tmp_path / "model.ckpt-8")
  want = numpy_adamw_steps(initial, 8, 0.1, 4, 1, accumulation_steps=2)
  assert sorted(got) == sorted(want)
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
  # Each update is the mean of two micro-batches: not the steps without accumulation.
  plain = numpy_adamw_steps(initial, 8, 0.1, 4, 1)
  assert np.abs(got["dense/kernel"] - plain["dense/kernel"]).max() > 1e-3
  # A checkpoint without accumulators resumes at the start of an accumulation only.
  without = tmp_path / "without"
  engine(without, 1).train(_linear_input_fn_for, 3)
  with pytest.raises(common.UsageError, match=r"^checkpoint .*model.ckpt-3: lacks the gradient "
                     r"accumulators \(dense/\w+/grad_accum\) of its step 3, inside an "
                     r"accumulation of 2 micro-batches"):
    engine(without, 2).train(_linear_input_fn_for, 8)
  engine(without, 1).train(_linear_input_fn_for, 4)
  assert engine(without, 2).train(_linear_input_fn_for, 6).global_step == 6
  assert np.abs(_values(without / "model.ckpt-6")["dense/kernel/grad_accum"]).max() == 0


# 2 micro-batches per update, 4 updates: 8 global steps, checkpoints 0, 3 (inside an
# accumulation), 6 and 8.
ACCUMULATION_CHECKPOINTS = ["model.ckpt-0", "model.ckpt-3", "model.ckpt-6", "model.ckpt-8"]


def _accumulation_args(root, output_dir):
  return [a for a in _pretraining_args(root, output_dir)
          if not a.startswith(("--num_train_steps", "--num_warmup_steps",
                               "--save_checkpoints_steps", "--do_eval"))] + [
              "--num_train_steps=4", "--num_warmup_steps=1", "--save_checkpoints_steps=3",
              "--gradient_accumulation_steps=2"]


@pytest.mark.slow
def test_gradient_accumulation_on_both_engines_and_resumed_inside_an_accumulation(
    pretraining_data, tmp_path):
  python215 = tf215_python()
  est, tf2 = tmp_path / "estimator", tmp_path / "tf2"
  est_log, tf2_log = _side_by_side(
      python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "run_pretraining"] +
      _accumulation_args(pretraining_data, est),
      "run_pretraining.py", _accumulation_args(pretraining_data, tf2))
  est_losses, tf2_losses = _step_losses(est_log), _step_losses(tf2_log)
  assert len(est_losses) == len(tf2_losses) == 8, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=ROUNDING)
  assert "Batch size = 8 x 2 accumulation" in tf2_log
  _check_same_scalars(est, tf2)
  # The rate of the update the step belongs to (1 warm-up update, then the decay over 4).
  assert [rate for _, rate in _scalar_events(tf2)["learning_rate"]] == pytest.approx(
      [0, 0, 0.75e-3, 0.75e-3, 0.5e-3, 0.5e-3, 0.25e-3, 0.25e-3])
  # The same checkpoints, with the accumulators `<var>/grad_accum`: at step 3 they hold the
  # gradient of step 2, at the end of an accumulation (6, 8) zeros.
  assert _state(tf2) == _state(est) == ACCUMULATION_CHECKPOINTS
  names = tf.train.list_variables(str(tf2 / "model.ckpt-3"))
  assert names == tf.train.list_variables(str(est / "model.ckpt-3"))
  assert {"bert/pooler/dense/kernel/grad_accum", "cls/predictions/output_bias/grad_accum"} <= {
      n for n, _ in names}
  for step in (3, 8):
    tf2_values, est_values = (_values(d / ("model.ckpt-%d" % step)) for d in (tf2, est))
    assert _max_difference(tf2_values, est_values) <= ROUNDING, step
    accumulated = np.abs(tf2_values["bert/pooler/dense/kernel/grad_accum"]).max()
    assert (accumulated > 0) if step == 3 else (accumulated == 0), step
  assert json.loads((tf2 / "train_summary_local.json").read_text())["global_step"] == 8
  # Stopped inside an accumulation (step 3), resumed on the other engine: the other's end
  # (both resumptions side by side).
  est_then_tf2, tf2_then_est = tmp_path / "estimator_then_tf2", tmp_path / "tf2_then_estimator"
  _as_stopped_at(est, est_then_tf2, 3, ACCUMULATION_CHECKPOINTS)
  _as_stopped_at(tf2, tf2_then_est, 3, ACCUMULATION_CHECKPOINTS)
  _, log = _side_by_side(
      python215, [os.path.join(REPO_DIR, "run_pretraining.py")] +
      _accumulation_args(pretraining_data, tf2_then_est),
      "run_pretraining.py", _accumulation_args(pretraining_data, est_then_tf2))
  np.testing.assert_allclose(_step_losses(log), est_losses[3:], rtol=0, atol=ROUNDING)
  assert _max_difference(_values(est_then_tf2 / "model.ckpt-8"),
                         _values(est / "model.ckpt-8")) <= ROUNDING
  assert _max_difference(_values(tf2_then_est / "model.ckpt-8"),
                         _values(tf2 / "model.ckpt-8")) <= ROUNDING


# Run as `-c MIRRORED_ACCUMULATION DIR...` (with tests/ on PYTHONPATH): the linear model with 2
# micro-batches per update on two logical CPUs (MirroredStrategy), in each DIR from its latest
# checkpoint (or from scratch) to step 3 when the directory is empty, then to step 8.
MIRRORED_ACCUMULATION = r"""
import sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import test_tf2_training
for output_dir in sys.argv[1:]:
  fresh = tf.compat.v1.train.latest_checkpoint(output_dir) is None
  for max_steps in ([3, 8] if fresh else [8]):
    engine = test_tf2_training.accumulating_linear_engine(
        output_dir, strategy=test_tf2_training.tf2_training.make_strategy("mirrored"))
    assert engine.num_replicas == 2
    engine.train(test_tf2_training._linear_input_fn_for, max_steps)
"""


@pytest.mark.slow
def test_mirrored_accumulation_is_one_devices_and_resumes_across_replica_counts(tmp_path):
  single = tmp_path / "single"
  accumulating_linear_engine(single).train(_linear_input_fn_for, 8)
  # A one-device checkpoint inside an accumulation (step 3), resumed on two replicas.
  resumed = tmp_path / "single_then_mirrored"
  _as_stopped_at(single, resumed, 3, ACCUMULATION_CHECKPOINTS)
  mirrored = tmp_path / "mirrored"
  mirrored.mkdir()
  run_tool(None, ["-c", MIRRORED_ACCUMULATION, mirrored, resumed],
           env={"PYTHONPATH": os.path.join(REPO_DIR, "tests")})
  # Each replica accumulates its half of the batch; the checkpoint holds the global batch's
  # accumulated gradient, as one device's.
  assert _max_difference(_values(mirrored / "model.ckpt-3"),
                         _values(single / "model.ckpt-3")) <= ROUNDING
  for output_dir in (mirrored, resumed):
    assert _max_difference(_values(output_dir / "model.ckpt-8"),
                           _values(single / "model.ckpt-8")) <= ROUNDING


def _linear_model_with_summary_fn(features, is_training):
  """_linear_model_fn, with a tf.compat.v1 summary of the mean prediction (in training)."""
  loss, predictions = _linear_model_fn(features, is_training)
  if is_training:
    tf.compat.v1.summary.scalar("mean_prediction", tf.reduce_mean(predictions["prediction"]))
  return loss, predictions


def test_engine_writes_the_estimators_tensorboard_scalars_at_the_logging_interval(tmp_path):
  # Steps 1-5, then a new engine (a rerun) to step 8: scalars at the logged steps 3, 5 (a
  # train()'s last), 6 and 8.
  def engine():
    return tf2_training.Engine(_linear_model_with_summary_fn, str(tmp_path), train_batch_size=4,
                               learning_rate=0.1, num_train_steps=8, num_warmup_steps=2,
                               log_every_n_steps=3)

  engine().train(_linear_input_fn_for, 5)
  engine().train(_linear_input_fn_for, 8)
  scalars = _scalar_events(tmp_path)
  assert sorted(scalars) == ["global_step/sec", "learning_rate", "loss", "mean_prediction"]
  logged = [3, 5, 6, 8]
  for tag in ("loss", "learning_rate", "mean_prediction"):
    assert [step for step, _ in scalars[tag]] == logged, tag
  # The rate since the previous point, or since a train()'s first step (its tracing left
  # out): none at step 6, the rerun's first.
  assert [step for step, _ in scalars["global_step/sec"]] == [3, 5, 8]
  assert all(rate > 0 for _, rate in scalars["global_step/sec"])
  # Step s's point is the step that made global step s: its batch, the weights before it, the
  # rate it applied.
  initial = _values(tmp_path / "model.ckpt-0")
  for (step, loss), (_, rate), (_, mean_prediction) in zip(
      scalars["loss"], scalars["learning_rate"], scalars["mean_prediction"]):
    weights = numpy_adamw_steps(initial, step - 1, 0.1, 8, 2)
    rows = [((step - 1) * 4 + i) % len(FEATURES) for i in range(4)]
    prediction = FEATURES[rows] @ weights["dense/kernel"][:, 0] + weights["dense/bias"][0]
    assert loss == pytest.approx(np.mean((prediction - TARGETS[rows]) ** 2), rel=1e-5), step
    assert mean_prediction == pytest.approx(prediction.mean(), rel=1e-5, abs=1e-6), step
    want_rate = 0.1 * ((step - 1) / 2 if step - 1 < 2 else 1 - (step - 1) / 8)
    assert rate == pytest.approx(want_rate, rel=1e-6), step


@newest_tf_only
@pytest.mark.slow
def test_pretraining_with_xla_gives_the_same_losses_as_without(pretraining_data, tmp_path):
  # XLA auto-clustering (the Estimator's --use_xla) leaves dropout's stateless random draws to
  # TensorFlow: the same masks, so the same losses to rounding (dropout 0.1 on).
  args = [a for a in _pretraining_args(pretraining_data, tmp_path / "plain")
          if not a.startswith(("--num_train_steps", "--do_eval"))] + ["--num_train_steps=4"]
  verbose = {"TF_CPP_MIN_LOG_LEVEL": "0"}  # TensorFlow's line when it compiles a cluster
  xla_args = [a.replace(str(tmp_path / "plain"), str(tmp_path / "xla")) for a in args]
  plain, xla = _side_by_side(sys.executable, [os.path.join(REPO_DIR, "run_pretraining.py")] + args,
                             "run_pretraining.py", xla_args + ["--use_xla"], env=verbose)
  assert "Compiled cluster using XLA" in xla and "Compiled cluster using XLA" not in plain
  assert len(_step_losses(xla)) == len(_step_losses(plain)) == 4
  np.testing.assert_allclose(_step_losses(xla), _step_losses(plain), rtol=0, atol=ROUNDING)
  assert _max_difference(_values(tmp_path / "xla" / "model.ckpt-4"),
                         _values(tmp_path / "plain" / "model.ckpt-4")) <= ROUNDING
  assert json.loads((tmp_path / "xla" / "train_summary_local.json").read_text())["use_xla"]


@pytest.mark.slow
def test_pretraining_in_bfloat16_on_both_engines(pretraining_data, tmp_path):
  python215 = tf215_python()
  est, tf2 = tmp_path / "estimator", tmp_path / "tf2"
  bf16 = ["--precision=bf16", "--num_train_steps=4"]
  est_log, tf2_log = _side_by_side(
      python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "run_pretraining"] +
      _pretraining_args(pretraining_data, est) + bf16,
      "run_pretraining.py", _pretraining_args(pretraining_data, tf2) + bf16)
  est_losses, tf2_losses = _step_losses(est_log), _step_losses(tf2_log)
  assert len(est_losses) == len(tf2_losses) == 4, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=BF16_ROUNDING)
  summary = json.loads((tf2 / "train_summary_local.json").read_text())
  assert summary["precision"] == "bf16"
  assert _max_difference(_values(tf2 / "model.ckpt-4"), _values(est / "model.ckpt-4")) <= 1e-3


@pytest.mark.slow
def test_fine_tuning_in_bfloat16_on_both_engines(model, tmp_path):
  python215 = tf215_python()
  est, tf2 = tmp_path / "estimator", tmp_path / "tf2"
  bf16 = ["--do_train", "--do_eval", "--precision=bf16", "--num_train_epochs=2"]
  est_log, tf2_log = _side_by_side(
      python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "run_classifier"] + _job_args(model, est, bf16),
      "run_classifier.py", _job_args(model, tf2, bf16))
  est_losses, tf2_losses = _step_losses(est_log), _step_losses(tf2_log)
  assert len(est_losses) == len(tf2_losses) == 4, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=BF16_ROUNDING)
  est_results, tf2_results = (json.loads((d / "eval_results.json").read_text())
                              for d in (est, tf2))
  assert tf2_results["eval_accuracy"] == est_results["eval_accuracy"]
  assert _max_difference(_values(tf2 / "model.ckpt-4"), _values(est / "model.ckpt-4")) <= 1e-3
