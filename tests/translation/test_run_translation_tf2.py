"""translation.run_translation on the newest TensorFlow: the tf.distribute engine.

Without the Estimator (TF >= 2.16) run_translation trains, evaluates, decodes and exports with
realformer_tf.tf2_training.Engine over model_fn_builder's graph code. On the newest TF (`bash
run.sh test-latest`) these tests check:
- one job on both engines (the TF 2.15 Estimator in a subprocess of $REALFORMER_TF215_PYTHON;
  a tiny model without dropout): post-LN with residual attention, trained, evaluated, decoded
  and exported, gives the same loss at every step, the same eval_results, translations.txt (and
  its sidecar), bleu.json and checkpoints (names, Adam slots, global_step); ADMIN with the
  inverse square root schedule, clipping, weight decay, gradient accumulation and dropout gives
  the same losses, profile and checkpoints (gradient accumulators included), and a checkpoint of
  either engine resumes on the other to the other's weights;
- the engine's SavedModel translates as the engine decoded;
- the flags only the Estimator implements are one-line errors before any work;
- in process: the engine's optimizer settings against optimization.py's math in NumPy, and the
  NumPy evaluation metric against the Estimator's tf.compat.v1.metrics.mean.
Everything is skipped on TF 2.15 (the Estimator trains there: tests/translation/
test_run_translation.py).
"""

import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, last_error_line, run_tool, tf215_python, tool_env
from realformer_tf import estimator_utils
from realformer_tf import tf2_training
from test_run_translation import TINY_NMT_CONFIG, nmt_data  # pylint: disable=unused-import
from test_tf2_training import ESTIMATOR_WITH_STEP_LOSSES, _state, _step_losses, _values
from translation import run_translation

pytestmark = pytest.mark.skipif(
    estimator_utils.has_estimator(),
    reason="TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")

tf1 = tf.compat.v1
# run_translation on TF 2.15, its Estimator also logging every step's loss.
ESTIMATOR_JOB = ["-c", ESTIMATOR_WITH_STEP_LOSSES, "translation.run_translation"]

NUM_STEPS = 6
CHECKPOINTS = ["model.ckpt-0", "model.ckpt-3", "model.ckpt-6"]
# Float32 rounding between the two engines (and TF versions). Measured: 0 for the eval metrics
# (and the same translations and bleu.json), 4.8e-7 (one float32 step) for the step losses, 0
# for the initial weights and 1.2e-7 for the trained ones but the attention key biases
# (KEY_BIAS).
ROUNDING = 1e-5
# The attention key biases get a gradient of 0 up to float32 rounding (softmax is invariant to
# them): Adam (epsilon 1e-8) turns that rounding into steps of either sign, not the same on the
# two engines (measured up to 6.6e-5 after 6 steps), without any effect on the loss or the
# translations.
KEY_BIAS = ("/key/bias",)
# Post-LN with residual attention, no dropout: train, evaluate, decode and export.
POST_LN = dict(TINY_NMT_CONFIG, layer_norm_type="post", residual_attention="mean",
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
               activation_dropout_prob=0.0)
# ADMIN with dropout on: both engines draw the same masks (modeling.dropout keys them on the
# global step and op names, among them the embeddings' at the graph's root).
ADMIN = dict(TINY_NMT_CONFIG, layer_norm_type="admin", residual_attention="sum")
assert ADMIN["hidden_dropout_prob"] > 0 and ADMIN["attention_probs_dropout_prob"] > 0
# The files of a --do_eval --do_predict job (with references).
RESULT_FILES = ("eval_results.json", "eval_results.txt", "translations.txt",
                "translations.txt.checkpoint.json", "bleu.json", "train_summary.json")

def _config_file(root, config, name):
  path = root / name
  path.write_text(json.dumps(config))
  return path


def _train_args(data, config_file, output_dir, extra=(), num_train_steps=NUM_STEPS):
  return ["--do_train", "--train_file=%s" % (data / "train.tfrecord"),
          "--config_file=%s" % config_file, "--output_dir=%s" % output_dir,
          "--num_train_steps=%d" % num_train_steps, "--warmup_steps=4", "--learning_rate=3e-3",
          "--max_tokens=512", "--save_checkpoints_steps=3", "--keep_checkpoint_max=10",
          "--log_every_n_steps=1"] + list(extra)


def _full_job_args(data, config_file, output_dir, export=True):
  """Train, evaluate, decode (beam 3) and (export) export."""
  export_flags = (["--export_dir=%s" % (output_dir.parent / (output_dir.name + "_export"))]
                  if export else [])
  return _train_args(data, config_file, output_dir) + export_flags + [
      "--do_eval", "--dev_file=%s" % (data / "dev.tfrecord"), "--do_predict",
      "--spm_model=%s" % (data / "spm.model"),
      "--predict_source_file=%s" % (data / "test.en"),
      "--predict_reference_file=%s" % (data / "test.de"), "--max_decode_length=16",
      "--beam_size=3"]


def _admin_job_args(data, config_file, output_dir, num_train_steps):
  """ADMIN's recipe: inverse square root schedule; clipping, weight decay and gradient
  accumulation (2 batches per update) switched on."""
  return _train_args(data, config_file, output_dir, [
      "--lr_schedule=inverse_sqrt", "--clip_norm=0.5", "--weight_decay=0.01",
      "--adam_epsilon=1e-7", "--gradient_accumulation_steps=2"], num_train_steps)


def _start215(python, args):
  """Starts `python args...` (TF 2.15) in the repository."""
  return subprocess.Popen([python] + [str(a) for a in args], cwd=REPO_DIR, env=tool_env(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait(proc, timeout=300):
  """The stderr of a finished _start215 process that exited 0."""
  _, stderr = proc.communicate(timeout=timeout)
  assert proc.returncode == 0, stderr[-3000:]
  return stderr


def _on_both_engines(python215, args_for, root):
  """Runs one job on the Estimator (TF 2.15, step losses logged) and on the TF2 engine at the
  same time; returns {"estimator", "tf2": output_dir, "<engine>_log": stderr}."""
  estimator = _start215(python215, ESTIMATOR_JOB +
                        args_for(root / "estimator"))
  try:
    engine_log = run_tool("translation/run_translation.py", args_for(root / "tf2")).stderr
  finally:
    estimator_log = _wait(estimator)
  return {"estimator": root / "estimator", "tf2": root / "tf2", "estimator_log": estimator_log,
          "tf2_log": engine_log, "python215": python215}


def _max_difference(got, want, skip=()):
  """The largest absolute difference of two {name: value} maps with the same names (those
  containing a `skip` string left out)."""
  assert sorted(got) == sorted(want)
  return max(float(np.max(np.abs(got[n].astype(np.float64) - want[n]))) for n in want
             if not any(s in n for s in skip))


def _read_json(path):
  with open(str(path), encoding="utf-8") as f:
    return json.load(f)


def _check_same_losses_and_checkpoints(runs, checkpoints=CHECKPOINTS, num_losses=NUM_STEPS):
  """The same loss at each of the last num_losses steps and the same checkpoints on both
  engines."""
  est, tf2 = runs["estimator"], runs["tf2"]
  est_losses, tf2_losses = (_step_losses(runs[k]) for k in ("estimator_log", "tf2_log"))
  assert len(est_losses) == len(tf2_losses) == num_losses, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=ROUNDING)
  last_step = int(checkpoints[-1].rsplit("-", 1)[1])
  assert "train: step %d/%d" % (last_step, last_step) in runs["tf2_log"]
  assert _state(tf2) == _state(est) == checkpoints
  for name in checkpoints:
    assert tf.train.list_variables(str(tf2 / name)) == tf.train.list_variables(str(est / name))
  names = set(_values(tf2 / checkpoints[-1]))
  assert {"global_step", "encoder/layer_0/attention/self/query/kernel/adam_m",
          "decoder/layer_1/cross_attention/source/value/bias/adam_v"} <= names
  # The initial weights bit for bit, the trained ones to rounding.
  assert _max_difference(_values(tf2 / "model.ckpt-0"), _values(est / "model.ckpt-0")) == 0
  for name in checkpoints:
    assert _max_difference(_values(tf2 / name), _values(est / name), skip=KEY_BIAS) <= ROUNDING
  assert _read_json(tf2 / "nmt_config.json") == _read_json(est / "nmt_config.json")
  est_summary, tf2_summary = (_read_json(d / "train_summary.json") for d in (est, tf2))
  assert sorted(tf2_summary) == sorted(est_summary)
  for key in ("num_train_steps", "global_step_target", "epoch_batches", "global_step"):
    assert tf2_summary[key] == est_summary[key], key
  assert tf2_summary["global_step"] == last_step
  # The engine's progress line counts steps, not target tokens, nor examples: a token-budget
  # batch is not a number of examples.
  assert tf2_summary["target_tokens_per_second"] is None
  assert "examples/s" not in runs["tf2_log"]


@pytest.fixture(scope="module")
def post_ln_runs(nmt_data, tmp_path_factory):
  """The post-LN job (train, eval, decode; export on the engine) on both engines."""
  python215 = tf215_python()
  root = tmp_path_factory.mktemp("nmt_post_ln")
  config_file = _config_file(root, POST_LN, "post_ln.json")
  # The export is the same code on both TFs: only the engine's is checked (served translations).
  return _on_both_engines(
      python215, lambda out: _full_job_args(nmt_data, config_file, out, export=out.name == "tf2"),
      root)


@pytest.mark.slow
def test_both_engines_train_evaluate_and_decode_alike(post_ln_runs):
  runs = post_ln_runs
  est, tf2 = runs["estimator"], runs["tf2"]
  _check_same_losses_and_checkpoints(runs)
  assert _read_json(est / "train_summary.json")["target_tokens_per_second"] > 0
  for name in RESULT_FILES:
    assert (tf2 / name).exists() and (est / name).exists(), name
  record = {"checkpoint": str(tf2 / "model.ckpt-6"), "global_step": NUM_STEPS}
  # The eval metrics (per-batch sums of the metric_fn, accumulated in NumPy as it does).
  est_results, tf2_results = (_read_json(d / "eval_results.json") for d in (est, tf2))
  assert tf2_results == dict(est_results, **record)
  # The same translations of the same weights.
  assert (tf2 / "translations.txt").read_text(encoding="utf-8") == \
      (est / "translations.txt").read_text(encoding="utf-8")
  assert len((tf2 / "translations.txt").read_text(encoding="utf-8").splitlines()) == 13
  assert _read_json(tf2 / "translations.txt.checkpoint.json") == record
  est_bleu, tf2_bleu = (_read_json(d / "bleu.json") for d in (est, tf2))
  assert sorted(tf2_bleu) == sorted(est_bleu)
  for key, value in est_bleu.items():
    if key in record:
      assert tf2_bleu[key] == record[key], key
    elif key != "decode_seconds":
      assert tf2_bleu[key] == value, key


@pytest.mark.slow
def test_the_engines_saved_model_translates_as_the_engine_decoded(post_ln_runs, nmt_data):
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  (SentencePiece ops)
  export_dir = str(post_ln_runs["tf2"]) + "_export"
  translate = tf.saved_model.load(export_dir).signatures["translate"]
  sources = (nmt_data / "test.en").read_text(encoding="utf-8").splitlines()
  served = translate(source=tf.constant(sources))["translation"].numpy()
  decoded = (post_ln_runs["tf2"] / "translations.txt").read_text(encoding="utf-8").splitlines()
  # (The 16-piece decoding limit of the job is the SavedModel's too: nmt_config of the export.)
  assert [t.decode("utf-8") for t in served] == decoded


@pytest.mark.slow
def test_admin_on_both_engines_and_a_checkpoint_of_either_resumes_on_the_other(nmt_data,
                                                                               tmp_path):
  """ADMIN with gradient accumulation, 3 updates (6 batches) on both engines, then each job
  continued to 6 updates on the other engine (the inverse square root schedule does not
  depend on --num_train_steps)."""
  python215 = tf215_python()
  config_file = _config_file(tmp_path, ADMIN, "admin.json")
  first = _on_both_engines(
      python215, lambda out: _admin_job_args(nmt_data, config_file, out, 3), tmp_path)
  # Checkpoint 3 is taken inside an accumulation: its gradient accumulators are not zero.
  _check_same_losses_and_checkpoints(first, CHECKPOINTS)
  est, tf2 = first["estimator"], first["tf2"]
  accumulators = [n for n in _values(tf2 / "model.ckpt-3") if n.endswith("/grad_accum")]
  assert "encoder/layer_0/attention/self/query/kernel/grad_accum" in accumulators
  assert np.any(_values(tf2 / "model.ckpt-3")[accumulators[0]] != 0)
  # The profile of the initial model (a TF1 session on the newest TF too).
  assert _read_json(tf2 / "admin_profile.json") == _read_json(est / "admin_profile.json")
  # The Estimator's checkpoint continued by the TF2 engine and the TF2 engine's by the
  # Estimator, at the same time.
  estimator = _start215(python215, ESTIMATOR_JOB +
                        _admin_job_args(nmt_data, config_file, tf2, 6))
  try:
    log = run_tool("translation/run_translation.py",
                   _admin_job_args(nmt_data, config_file, est, 6)).stderr
  finally:
    estimator_log = _wait(estimator)
  assert "Restoring %s (step 6)" % (est / "model.ckpt-6") in log
  # Named by the engine that trained the batches 7 to 12.
  second = {"estimator": tf2, "tf2": est, "estimator_log": estimator_log, "tf2_log": log}
  _check_same_losses_and_checkpoints(second, CHECKPOINTS + ["model.ckpt-9", "model.ckpt-12"])


@pytest.mark.parametrize("flags,shown", [
    (["--use_tpu", "--tpu_name=grpc://10.0.0.2:8470"], "--use_tpu: implemented by the "
     "Estimator only (TensorFlow 2.15); -m translation.run_translation on TF %s" %
     tf.__version__),
    (["--iterations_per_loop=100"], "--iterations_per_loop=100: implemented by the Estimator "
     "only (TensorFlow 2.15)"),
])
def test_estimator_only_flags_are_one_line_errors(nmt_data, tmp_path, flags, shown):
  out = tmp_path / "out"
  config_file = _config_file(tmp_path, POST_LN, "post_ln.json")
  result = run_tool("translation/run_translation.py",
                    _train_args(nmt_data, config_file, out) + flags, expect_rc=2)
  line = last_error_line(result)
  assert line.startswith("error: " + shown), line
  assert "Traceback" not in result.stderr and not out.exists()


# A linear regression with tf.compat.v1 variables: its steps have a closed form in NumPy.
FEATURES = np.random.RandomState(5).normal(size=(8, 3)).astype(np.float32)
TARGETS = (FEATURES @ np.array([2.0, -1.0, 0.5], np.float32) + 3.0).astype(np.float32)


def _linear_model_fn(features, is_training):  # pylint: disable=unused-argument
  with tf1.variable_scope("dense"):
    kernel = tf1.get_variable("kernel", [3, 1],
                              initializer=tf1.truncated_normal_initializer(stddev=0.5))
    bias = tf1.get_variable("bias", [1], initializer=tf1.zeros_initializer())
  prediction = (tf.matmul(features["x"], kernel) + bias)[:, 0]
  return tf.reduce_mean(tf.square(prediction - features["y"])), {"prediction": prediction}


def _linear_input_fn_for(skip_batches):
  def input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices({"x": FEATURES, "y": TARGETS}).repeat()
    return dataset.batch(params["batch_size"], drop_remainder=True).skip(skip_batches)
  return input_fn


def _numpy_steps(values, steps, learning_rate, warmup, beta_2, epsilon, weight_decay,
                 clip_norm, batch_size=4):
  """optimization.create_optimizer's steps of the linear model with the inverse square root
  schedule, in float64 NumPy: clipping to clip_norm, Adam without bias correction, weight decay
  for the kernel (not the bias).

  Returns:
    {"dense/kernel", "dense/bias"} after `steps` steps.
  """
  params = {name: values[name].astype(np.float64) for name in ("dense/kernel", "dense/bias")}
  m = {name: np.zeros_like(value) for name, value in params.items()}
  v = {name: np.zeros_like(value) for name, value in params.items()}
  for step in range(steps):
    rows = [(step * batch_size + i) % len(FEATURES) for i in range(batch_size)]
    x, y = FEATURES[rows].astype(np.float64), TARGETS[rows].astype(np.float64)
    residual = x @ params["dense/kernel"][:, 0] + params["dense/bias"][0] - y
    grads = {"dense/kernel": (2.0 / batch_size * x.T @ residual)[:, None],
             "dense/bias": np.array([2.0 / batch_size * residual.sum()])}
    norm = np.sqrt(sum((g ** 2).sum() for g in grads.values()))
    grads = {name: g * clip_norm / max(norm, clip_norm) for name, g in grads.items()}
    rate = learning_rate * min(step / warmup, 1.0 / np.sqrt(max(step, 1) / warmup))
    for name, grad in grads.items():
      m[name] = 0.9 * m[name] + 0.1 * grad
      v[name] = beta_2 * v[name] + (1.0 - beta_2) * grad ** 2
      update = m[name] / (np.sqrt(v[name]) + epsilon)
      if name == "dense/kernel":
        update += weight_decay * params[name]
      params[name] = params[name] - rate * update
  return params


def test_engine_takes_create_optimizers_settings(tmp_path):
  settings = {"beta_2": 0.98, "epsilon": 1e-3, "weight_decay_rate": 0.1, "clip_norm": 0.5}
  engine = tf2_training.Engine(_linear_model_fn, str(tmp_path), train_batch_size=4,
                               learning_rate=0.1, num_train_steps=6, num_warmup_steps=2,
                               schedule="inverse_sqrt", **settings)
  assert engine.train(_linear_input_fn_for, 6).global_step == 6
  got = _values(tmp_path / "model.ckpt-6")
  want = _numpy_steps(_values(tmp_path / "model.ckpt-0"), 6, 0.1, 2, settings["beta_2"],
                      settings["epsilon"], settings["weight_decay_rate"], settings["clip_norm"])
  for name, value in want.items():
    np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_mean_nll_per_token_is_the_estimators_metric():
  rng = np.random.RandomState(0)
  token_counts = rng.randint(0, 400, size=9).astype(np.float32)
  token_counts[3] = 0.0  # a batch of padding only
  nll_sums = (token_counts * rng.uniform(1.0, 6.0, size=9)).astype(np.float32)
  with tf.Graph().as_default():
    nll_sum = tf1.placeholder(tf.float32, [1])
    num_tokens = tf1.placeholder(tf.float32, [1])
    per_token = nll_sum / tf.maximum(num_tokens, 1.0)
    value, update = tf1.metrics.mean(per_token, weights=num_tokens)
    with tf1.Session() as session:
      session.run(tf1.local_variables_initializer())
      for batch_sum, batch_tokens in zip(nll_sums, token_counts):
        session.run(update, {nll_sum: [batch_sum], num_tokens: [batch_tokens]})
      want = float(session.run(value))
  assert run_translation.mean_nll_per_token(nll_sums, token_counts) == want
  assert run_translation.mean_nll_per_token([], []) == 0.0
