"""--precision=fp16 on the TF2 engine (realformer_tf.tf2_training): the Estimator's dynamic loss
scaling (optimization.create_optimizer(loss_scale="dynamic")).

On both TFs, in process: the engine's steps of a float16 model against create_optimizer's graph,
the Estimator's train op (skipped overflow steps, the halving and the doubling of the scale, with
and without gradient accumulation), and checkpoints moving between fp16 and fp32 jobs. On the
newest TF (`bash run.sh test-latest`), one run_classifier job in fp16 on both engines (TF 2.15's
Estimator in a subprocess): the same losses and checkpoints, loss scale included; the
Estimator's checkpoint with an overflowing loss scale resumed on the engine: the steps are
skipped and the scale halves.
"""

import argparse
import json

import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY_BERT_CONFIG, run_tool, tf215_python
from conftest import write_random_bert_checkpoint
from realformer_tf import checkpoint_slimming
from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import tf2_training
import optimization
from test_tf2_training import ESTIMATOR_WITH_STEP_LOSSES
from test_tf2_training import _as_stopped_at, _job_args, _run215, _scalar_events, _state
from test_tf2_training import _step_losses, _values
from test_tf2_training import _linear_input_fn_for, _linear_model_fn, numpy_adamw_steps

tf1 = tf.compat.v1

SCALE = optimization.LOSS_SCALE_VARIABLE
GOOD_STEPS = optimization.LOSS_SCALE_GOOD_STEPS_VARIABLE
# float16 compute, TF 2.15's Estimator against TF 2.21's engine: measured 1.2e-7 for the step
# losses and 2.7e-7 for the Adam slots after 6 steps (TF 2.15's engine: 0 for the losses).
FP16_ROUNDING = 1e-5
# The weights after 6 steps at learning rate 1e-3: measured 4.1e-5 (1.6e-6 between the two
# engines on TF 2.15): the TFs' float16 kernels round differently, and Adam turns the gradient
# difference of an element with almost no gradient into up to a learning rate's step.
FP16_WEIGHT_ROUNDING = 2e-4


def _float16_linear_model_fn(features, is_training):  # pylint: disable=unused-argument
  """test_tf2_training's linear regression with its matmul in float16: at the initial loss
  scale its gradient overflows float16 (max 65504) on the first steps."""
  with tf1.variable_scope("dense"):
    kernel = tf1.get_variable("kernel", [3, 1],
                              initializer=tf1.truncated_normal_initializer(stddev=0.5))
    bias = tf1.get_variable("bias", [1], initializer=tf1.zeros_initializer())
  product = tf.matmul(tf.cast(features["x"], tf.float16), tf.cast(kernel, tf.float16))
  prediction = (tf.cast(product, tf.float32) + bias)[:, 0]
  return tf.reduce_mean(tf.square(prediction - features["y"])), {"prediction": prediction}


def _estimator_graph_steps(initial_checkpoint, steps, accumulation_steps):
  """create_optimizer(loss_scale="dynamic")'s steps of the float16 linear model in a TF1 graph
  (what the Estimator runs), from the weights of initial_checkpoint.

  Returns:
    list of {name: value} of every global variable after each step (steps + 1 entries).
  """
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    dataset = _linear_input_fn_for(0)({"batch_size": 4})
    features = tf1.data.make_one_shot_iterator(dataset).get_next()
    loss, _ = _float16_linear_model_fn(features, True)
    model_variables = tf1.trainable_variables()
    train_op = optimization.create_optimizer(
        loss, 0.1, 8, 2, False, gradient_accumulation_steps=accumulation_steps,
        loss_scale="dynamic")
    variables = {v.op.name: v for v in tf1.global_variables()}
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      tf1.train.Saver(model_variables).restore(sess, initial_checkpoint)
      history = [sess.run(variables)]
      for _ in range(steps):
        sess.run(train_op)
        history.append(sess.run(variables))
  return history


@pytest.mark.parametrize("accumulation_steps", [1, 2])
def test_engine_loss_scaling_is_create_optimizers(tmp_path, monkeypatch, accumulation_steps):
  # Doubling after 3 finite updates instead of 2000: both sides read the module's constant.
  monkeypatch.setattr(optimization, "LOSS_SCALE_GROWTH_STEPS", 3)
  steps = 8 * accumulation_steps
  engine = tf2_training.Engine(
      _float16_linear_model_fn, str(tmp_path), train_batch_size=4, learning_rate=0.1,
      num_train_steps=8, num_warmup_steps=2, save_checkpoints_steps=1,
      keep_checkpoint_max=steps + 1, gradient_accumulation_steps=accumulation_steps,
      loss_scale="dynamic")
  assert engine.train(_linear_input_fn_for, steps).global_step == steps
  want = _estimator_graph_steps(str(tmp_path / "model.ckpt-0"), steps, accumulation_steps)
  scales = []
  for step in range(steps + 1):
    got = _values(tmp_path / ("model.ckpt-%d" % step))
    assert sorted(got) == sorted(want[step]), step
    for name in (SCALE, GOOD_STEPS, "global_step"):
      assert got[name] == want[step][name], (step, name, got[name], want[step][name])
      assert got[name].dtype == want[step][name].dtype, name
    for name in want[step]:
      np.testing.assert_allclose(got[name], want[step][name], rtol=1e-6, atol=1e-7,
                                 err_msg="%s at step %d" % (name, step))
    scales.append(float(got[SCALE]))
  # The run covers the rules: an overflow halves the scale and leaves the weights and the Adam
  # slots as they were, 3 finite updates in a row double it.
  initial = optimization.LOSS_SCALE_INITIAL
  updates = scales[::accumulation_steps]
  assert updates[:6] == [initial, initial / 2, initial / 4, initial / 4, initial / 4,
                         initial / 2], scales
  first, second = (_values(tmp_path / ("model.ckpt-%d" % (k * accumulation_steps)))
                   for k in (1, 2))
  for name in ("dense/kernel", "dense/kernel/adam_m", "dense/kernel/adam_v"):
    np.testing.assert_array_equal(second[name], first[name], err_msg=name)
  assert int(second["global_step"]) == 2 * accumulation_steps


def _linear_engine(output_dir, loss_scale):
  return tf2_training.Engine(_linear_model_fn, str(output_dir), train_batch_size=4,
                             learning_rate=0.1, num_train_steps=8, num_warmup_steps=2,
                             save_checkpoints_steps=3, loss_scale=loss_scale)


def test_fp16_and_fp32_jobs_resume_each_others_checkpoints(tmp_path):
  # The float32 linear model never overflows: a power-of-two scale changes no update, so the
  # job trained in turn with and without a loss scale makes optimization.py's steps.
  assert _linear_engine(tmp_path, "dynamic").train(_linear_input_fn_for, 4).global_step == 4
  fp16_checkpoint = _values(tmp_path / "model.ckpt-4")
  assert (fp16_checkpoint[SCALE], fp16_checkpoint[GOOD_STEPS]) == (
      optimization.LOSS_SCALE_INITIAL, 4)
  assert fp16_checkpoint[SCALE].dtype == np.float32
  assert fp16_checkpoint[GOOD_STEPS].dtype == np.int64
  # fp32 resumes it (the loss scale is left behind), fp16 resumes that with a new loss scale.
  _linear_engine(tmp_path, None).train(_linear_input_fn_for, 6)
  assert SCALE not in _values(tmp_path / "model.ckpt-6")
  _linear_engine(tmp_path, "dynamic").train(_linear_input_fn_for, 8)
  got = _values(tmp_path / "model.ckpt-8")
  assert (got[SCALE], got[GOOD_STEPS]) == (optimization.LOSS_SCALE_INITIAL, 2)
  want = numpy_adamw_steps(_values(tmp_path / "model.ckpt-0"), 8, 0.1, 8, 2)
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_engine_accepts_fp16_and_keeps_the_estimators_refusals():
  flags = argparse.Namespace(**dict(
      tf2_training.ESTIMATOR_ONLY_FLAGS, precision="fp16", distribution_strategy="none",
      num_gpus=None, save_checkpoints_steps=1, keep_checkpoint_max=1))
  tf2_training.check_flags(flags, "run_classifier.py", precisions=tf2_training.ENGINE_PRECISIONS)
  estimator_utils.validate_estimator_flags(flags)
  flags.distribution_strategy = "mirrored"
  tf2_training.check_flags(flags, "run_classifier.py", precisions=tf2_training.ENGINE_PRECISIONS)
  with pytest.raises(common.UsageError, match=r"^--precision=fp16 \(dynamic loss scaling\) is "
                     r"not supported with --distribution_strategy=mirrored"):
    estimator_utils.validate_estimator_flags(flags)
  with pytest.raises(ValueError, match="loss_scale must be None, 'dynamic' or a positive"):
    _linear_engine("unused", "static")
  # The library refuses what the commands' flags refuse: loss scaling over several replicas.
  two_replicas = argparse.Namespace(num_replicas_in_sync=2)
  with pytest.raises(ValueError, match=r"loss scaling runs on one device \(2 replicas here\)"):
    tf2_training.Engine(_linear_model_fn, "unused", strategy=two_replicas, loss_scale="dynamic")


# ----------------------------------------------------------------------------------------------
# run_classifier in fp16 on both engines (the newest TF, with TF 2.15 in a subprocess).

# 8 training examples in batches of 4 for 3 epochs: 6 steps, checkpoints 0, 3 and 6.
FP16_STEPS = 6
FP16_CHECKPOINTS = ["model.ckpt-0", "model.ckpt-3", "model.ckpt-6"]
# A loss scale at which any gradient above 5e-7 overflows float16: the steps are skipped.
OVERFLOWING_SCALE = 2.0 ** 40


@pytest.fixture(scope="module")
def dropout_free_model(tmp_path_factory):
  """A tiny RealFormer config without dropout and a random BERT checkpoint (no head)."""
  root = tmp_path_factory.mktemp("fp16_model")
  config = dict(TINY_BERT_CONFIG, residual_attention="sum", hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)
  (root / "bert_config.json").write_text(json.dumps(config))
  (root / "init").mkdir()
  checkpoint = write_random_bert_checkpoint(str(root / "bert_config.json"),
                                            str(root / "init" / "bert_model.ckpt"))
  return root, checkpoint


def _fp16_args(model, output_dir):
  return _job_args(model, output_dir, ["--do_train", "--precision=fp16", "--num_train_epochs=3",
                                       "--save_checkpoints_steps=3"])


@pytest.fixture(scope="module")
def fp16_jobs(tmp_path_factory, dropout_free_model):
  """The fp16 job on the Estimator (TF 2.15) and on the TF2 engine."""
  python215 = tf215_python()
  root = tmp_path_factory.mktemp("fp16_jobs")
  est_log = _run215(python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "run_classifier"] +
                    _fp16_args(dropout_free_model, root / "estimator")).stderr
  tf2_log = run_tool("run_classifier.py", _fp16_args(dropout_free_model, root / "tf2")).stderr
  return {"estimator": root / "estimator", "tf2": root / "tf2", "estimator_log": est_log,
          "tf2_log": tf2_log}


def _dtypes(prefix):
  return tf.train.load_checkpoint(str(prefix)).get_variable_to_dtype_map()


@pytest.mark.slow
def test_fp16_job_on_both_engines_gives_the_same_losses_and_checkpoints(fp16_jobs):
  est, tf2 = fp16_jobs["estimator"], fp16_jobs["tf2"]
  est_losses, tf2_losses = (_step_losses(fp16_jobs[k]) for k in ("estimator_log", "tf2_log"))
  assert len(est_losses) == len(tf2_losses) == FP16_STEPS, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=FP16_ROUNDING)
  assert _state(tf2) == _state(est) == FP16_CHECKPOINTS
  for name in FP16_CHECKPOINTS:
    assert _dtypes(tf2 / name) == _dtypes(est / name), name
  assert _dtypes(tf2 / "model.ckpt-6")[SCALE] == tf.float32
  assert _dtypes(tf2 / "model.ckpt-6")[GOOD_STEPS] == tf.int64
  est_values, tf2_values = _values(est / "model.ckpt-6"), _values(tf2 / "model.ckpt-6")
  assert (tf2_values[SCALE], tf2_values[GOOD_STEPS]) == (est_values[SCALE],
                                                         est_values[GOOD_STEPS])
  assert (tf2_values[SCALE], tf2_values[GOOD_STEPS]) == (optimization.LOSS_SCALE_INITIAL, 6)
  # The loss scale's scalar: the Estimator's at its first step (tagged loss_scale_1: its summary
  # op is named beside the variable `loss_scale`), the engine's at every logged step.
  est_scalars, tf2_scalars = _scalar_events(est), _scalar_events(tf2)
  assert est_scalars["loss_scale_1"] == [(1, optimization.LOSS_SCALE_INITIAL)]
  assert tf2_scalars[SCALE] == [(step, optimization.LOSS_SCALE_INITIAL) for step in range(1, 7)]
  for name in est_values:
    slot = name.endswith(tf2_training.ADAM_SLOTS)
    np.testing.assert_allclose(tf2_values[name], est_values[name], rtol=0,
                               atol=FP16_ROUNDING if slot else FP16_WEIGHT_ROUNDING,
                               err_msg=name)


def _with_loss_scale(source, target, scale):
  """A copy of output directory `source` stopped at checkpoint 3, its loss scale set to
  `scale`."""
  _as_stopped_at(source, target, 3, FP16_CHECKPOINTS)
  values = _values(target / "model.ckpt-3")
  values[SCALE] = np.float32(scale)
  checkpoint_slimming.write_checkpoint(values, str(target / "model.ckpt-3"))
  return values


@pytest.mark.slow
def test_fp16_checkpoint_with_an_overflowing_loss_scale_resumes_on_the_engine_skips_and_halves(
    fp16_jobs, dropout_free_model, tmp_path):
  # The Estimator's step-3 checkpoint with an overflowing loss scale, resumed on the TF2 engine
  # (what the Estimator does with such a scale: test_engine_loss_scaling_is_create_optimizers).
  out = tmp_path / "estimator_then_tf2"
  start = _with_loss_scale(fp16_jobs["estimator"], out, OVERFLOWING_SCALE)
  log = run_tool("run_classifier.py", _fp16_args(dropout_free_model, out)).stderr
  assert "Restoring %s (step 3)" % (out / "model.ckpt-3") in log
  assert len(_step_losses(log)) == 3
  got = _values(out / "model.ckpt-6")
  # Three overflows: three halvings, no weight or Adam slot moved, the global step counts on.
  assert (got[SCALE], got[GOOD_STEPS], got["global_step"]) == (OVERFLOWING_SCALE / 8, 0, 6)
  assert sorted(got) == sorted(start)
  for name in start:
    if name not in (SCALE, GOOD_STEPS, "global_step"):
      np.testing.assert_array_equal(got[name], start[name], err_msg=name)
