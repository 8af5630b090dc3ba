# coding=utf-8
"""Pre-training plumbing shared by run_pretraining.py (BERT) and etc_model/run_pretraining.py.

The parts of a pre-training job that do not depend on the model: who this process is in a
TF_CONFIG cluster (task_label, is_chief), the training loop (train_to_step, through
train_and_evaluate under multi_worker_mirrored), the weights digest every worker writes in its
summary (weights_digest, WeightsDigestHook), the MLM accuracy of one batch for training
summaries, the default warm-up (default_warmup_steps), what an evaluation scored
(eval_counts) and the evaluation on the TF2 engine (engine_metrics, evaluate_with_engine).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import hashlib
import json
import os

import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import estimator_utils

tf1 = tf.compat.v1


def masked_lm_accuracy(masked_lm_log_probs, masked_lm_ids, masked_lm_weights):
  """Weighted MLM accuracy of one batch (for training summaries).

  Args:
    masked_lm_log_probs: float Tensor [batch * max_predictions, vocab_size].
    masked_lm_ids: int Tensor [batch, max_predictions].
    masked_lm_weights: float Tensor [batch, max_predictions] (0 for padding predictions).

  Returns:
    float32 scalar Tensor.
  """
  predictions = tf.argmax(masked_lm_log_probs, axis=-1, output_type=tf.int32)
  labels = tf.reshape(masked_lm_ids, [-1])
  weights = tf.reshape(masked_lm_weights, [-1])
  correct = tf.cast(tf.equal(predictions, labels), tf.float32) * weights
  return tf.reduce_sum(correct) / (tf.reduce_sum(weights) + 1e-5)


def weights_digest(named_values):
  """A short hash of model variables (to compare workers or runs).

  Args:
    named_values: dict variable name -> array.

  Returns:
    hex string (16 chars) over the sorted names and float32 bytes of the values.
  """
  digest = hashlib.sha256()
  for name in sorted(named_values):
    digest.update(name.encode("utf-8"))
    digest.update(np.asarray(named_values[name], np.float32).tobytes())
  return digest.hexdigest()[:16]


class WeightsDigestHook(tf1.train.SessionRunHook):
  """At the end of training, hashes this process's own copy of the trainable variables."""

  def __init__(self):
    self.digest = None
    self._variables = None

  def begin(self):
    self._variables = {v.op.name: v for v in tf1.trainable_variables()}

  def end(self, session):
    names = sorted(self._variables)
    values = session.run([self._variables[n] for n in names])
    self.digest = weights_digest(dict(zip(names, values)))


def tf_config():
  """The TF_CONFIG environment variable as a dict ({} when unset).

  Returns:
    dict.
  """
  return json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")


def task_label():
  """This process's name in the cluster: 'chief_0' / 'worker_1' from TF_CONFIG, or 'local'.

  Returns:
    str (names its lock holder and its train_summary_<label>.json).
  """
  task = tf_config().get("task") or {}
  if not task:
    return "local"
  return "%s_%s" % (task.get("type", "worker"), task.get("index", 0))


def is_chief():
  """Whether this process evaluates and checks the final step.

  Returns:
    True for a single process, the chief, or worker 0 of a cluster without a chief.
  """
  config = tf_config()
  task = config.get("task") or {}
  if not task or task.get("type") == "chief":
    return True
  has_chief = bool((config.get("cluster") or {}).get("chief"))
  return task.get("type") == "worker" and int(task.get("index", 0)) == 0 and not has_chief


def train_to_step(estimator, train_input_fn, total_steps, distribution_strategy="none"):
  """Trains to total_steps; with multi_worker_mirrored through train_and_evaluate.

  Args:
    estimator: what estimator_utils.make_estimator returned.
    train_input_fn: the training input_fn.
    total_steps: the global step to train to.
    distribution_strategy: the --distribution_strategy value.
  """
  if distribution_strategy == "multi_worker_mirrored":
    # Estimator runs multi-worker training only through train_and_evaluate.
    train_fn = estimator.wrap_input_fn(train_input_fn, tf1.estimator.ModeKeys.TRAIN)
    eval_fn = estimator.wrap_input_fn(train_input_fn, tf1.estimator.ModeKeys.EVAL)
    train_spec = tf1.estimator.TrainSpec(input_fn=train_fn, max_steps=total_steps)
    eval_spec = tf1.estimator.EvalSpec(input_fn=eval_fn, steps=1,
                                       start_delay_secs=10 ** 9, throttle_secs=10 ** 9)
    tf1.estimator.train_and_evaluate(estimator.estimator, train_spec, eval_spec)
  else:
    estimator.train(input_fn=train_input_fn, max_steps=total_steps)


# The official default of --num_warmup_steps: what a long run warms up for.
OFFICIAL_WARMUP_STEPS = 10000


def default_warmup_steps(num_train_steps):
  """--num_warmup_steps when not given: the official 10,000, or a tenth of a shorter run."""
  return min(OFFICIAL_WARMUP_STEPS, num_train_steps // 10)


def eval_counts(eval_files, batch_size, max_eval_steps, drop_remainder):
  """How many examples an evaluation scored, and how many records its files hold.

  Args:
    eval_files: the evaluation TFRecords.
    batch_size: --eval_batch_size.
    max_eval_steps: --max_eval_steps (None: every record once).
    drop_remainder: a last partial batch was dropped (TPU).

  Returns:
    {"eval_examples": N, "eval_records": M}: with --max_eval_steps N counts repeated records
    again (N may exceed M).
  """
  records = sum(1 for path in eval_files for _ in tf1.io.tf_record_iterator(path))
  if max_eval_steps is not None:
    examples = max_eval_steps * batch_size
  else:
    examples = records // batch_size * batch_size if drop_remainder else records
  return {"eval_examples": examples, "eval_records": records}


def engine_metrics(batches):
  """The Estimator's pre-training eval metrics, from the tf2_training engine's batches.

  Sums over every batch as the tf.compat.v1.metrics of the model_fns' metric_fn do: the MLM
  metrics weighted by masked_lm_weights, the next-sentence ones over the examples, CPC's
  weighted by cpc_weights, and `loss` the batches' mean loss (Estimator.evaluate's loss).

  Args:
    batches: iterable of (the batch's mean loss, dict of per-example numpy arrays
      [batch, ...]): masked_lm_example_loss, masked_lm_predictions, masked_lm_ids,
      masked_lm_weights; optionally next_sentence_example_loss, next_sentence_predictions,
      next_sentence_labels; optionally cpc_example_loss, cpc_correct, cpc_weights
      (tf2_training.Engine.predict_batches).

  Returns:
    dict: loss, masked_lm_accuracy, masked_lm_loss, and next_sentence_accuracy /
    next_sentence_loss, cpc_accuracy / cpc_loss when the batches have them.
  """
  sums = collections.defaultdict(float)
  keys = set()
  for loss, values in batches:
    keys.update(values)
    weights = values["masked_lm_weights"].astype(np.float64)
    sums["batches"] += 1
    sums["loss"] += loss
    sums["masked_lm_weight"] += weights.sum()
    sums["masked_lm_correct"] += (
        weights * (values["masked_lm_predictions"] == values["masked_lm_ids"])).sum()
    sums["masked_lm_loss"] += (weights * values["masked_lm_example_loss"]).sum()
    if "next_sentence_labels" in values:
      labels = values["next_sentence_labels"]
      sums["next_sentence_count"] += len(labels)
      sums["next_sentence_correct"] += (values["next_sentence_predictions"] == labels).sum()
      sums["next_sentence_loss"] += values["next_sentence_example_loss"].astype(np.float64).sum()
    if "cpc_weights" in values:
      cpc_weights = values["cpc_weights"].astype(np.float64)
      sums["cpc_weight"] += cpc_weights.sum()
      sums["cpc_correct"] += (cpc_weights * values["cpc_correct"]).sum()
      sums["cpc_loss"] += (cpc_weights * values["cpc_example_loss"]).sum()
  metrics = {
      "loss": sums["loss"] / max(sums["batches"], 1),
      "masked_lm_accuracy": sums["masked_lm_correct"] / max(sums["masked_lm_weight"], 1e-30),
      "masked_lm_loss": sums["masked_lm_loss"] / max(sums["masked_lm_weight"], 1e-30),
  }
  if "next_sentence_labels" in keys:
    count = max(sums["next_sentence_count"], 1)
    metrics["next_sentence_accuracy"] = sums["next_sentence_correct"] / count
    metrics["next_sentence_loss"] = sums["next_sentence_loss"] / count
  if "cpc_weights" in keys:
    metrics["cpc_accuracy"] = sums["cpc_correct"] / max(sums["cpc_weight"], 1e-30)
    metrics["cpc_loss"] = sums["cpc_loss"] / max(sums["cpc_weight"], 1e-30)
  return metrics


def evaluate_with_engine(engine, input_fn, eval_files, batch_size, max_eval_steps, output_dir,
                         drop_remainder):
  """A pre-training job's --do_eval on the tf2_training engine: engine_metrics of the latest
  checkpoint, its global step and eval_counts, written as the Estimator's eval_results.

  Args:
    engine: the tf2_training.Engine.
    input_fn: the evaluation input_fn.
    eval_files: the evaluation TFRecords (eval_counts).
    batch_size: --eval_batch_size.
    max_eval_steps: --max_eval_steps (None: every record once).
    output_dir: the model directory (its latest checkpoint; eval_results go there).
    drop_remainder: the input drops a last partial batch (eval_counts).

  Returns:
    The results written.
  """
  result = engine_metrics(engine.predict_batches(input_fn, batch_size=batch_size,
                                                 steps=max_eval_steps))
  common.STOP_SIGNALS.exit_if_stopped("evaluation was not written; rerun to evaluate")
  result["global_step"] = estimator_utils.latest_global_step(output_dir)
  result.update(eval_counts(eval_files, batch_size, max_eval_steps, drop_remainder))
  tf1.logging.info("Evaluated %d examples (%d records in --eval_input_file)",
                   result["eval_examples"], result["eval_records"])
  estimator_utils.write_eval_results(output_dir, result)
  return result
