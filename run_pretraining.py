# coding=utf-8
"""Pre-trains BERT / RealFormer (MLM + NSP) on TPUEstimator, or on CPU/GPU with tf.distribute.

On TensorFlow 2.15 it trains with the Estimator; on a TensorFlow without it (2.16 and later),
with realformer_tf.tf2_training: the same flags (--use_tpu through TPUStrategy, several workers,
--precision=bf16 and fp16 as there; --iterations_per_loop refused), checkpoints and output files
(docs/compatibility.md, "Training without the Estimator").

Reads the TFRecords written by create_pretraining_data.py (or the official BERT script). The
official flags keep their meaning; new ones: --residual_attention / --layer_norm_type (override
the config; the config actually used is saved in output_dir), --distribution_strategy with
--num_gpus, --gradient_accumulation_steps, --keep_checkpoint_max, --seed, --precision
(fp32 | bf16 | fp16 compute, float32 variables), --use_xla, --fused_optimizer.

Resume: run the same command again. Training continues from the last checkpoint in output_dir
and ends at num_train_steps. SIGTERM / SIGINT stop training cleanly after the current step and
save a checkpoint first, then the job exits 143 / 130 without evaluating or writing its summary
(a stopped job never looks finished); after SIGKILL the steps since the last saved checkpoint
(--save_checkpoints_steps) are redone. One job at a time may use an output_dir (a lock file
there names the holder). An output_dir holding a checkpoint made for initialising (converted,
slimmed, an official release: no optimizer slots or global_step) is one line before any work:
pass it as --init_checkpoint with a new output_dir. An --init_checkpoint must supply every bert/
variable (one of another model, e.g. an ETC checkpoint, is one line unless
--allow_unmatched_init); the heads may start fresh.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import model_config
import modeling
from realformer_tf import pretraining_data
from realformer_tf import pretraining_utils
from realformer_tf import tf2_training

tf1 = tf.compat.v1

def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string(
      "bert_config_file", None,
      "The config json file corresponding to the pre-trained BERT model. "
      "This specifies the model architecture.")
  flags.DEFINE_string("input_file", None,
                      "Input TF example files (can be a glob or comma separated).")
  flags.DEFINE_string(
      "eval_input_file", None,
      "Held-out TF example files for --do_eval (glob or comma separated); default --input_file.")
  flags.DEFINE_string(
      "output_dir", None,
      "The output directory where the model checkpoints will be written.")
  flags.DEFINE_string(
      "init_checkpoint", None,
      "Initial checkpoint (usually from a pre-trained BERT model).")
  flags.DEFINE_integer(
      "max_seq_length", 128,
      "The maximum total input sequence length after WordPiece tokenization. "
      "Must match the data generation.")
  flags.DEFINE_integer(
      "max_predictions_per_seq", 20,
      "Maximum number of masked LM predictions per sequence. Must match data generation.")
  flags.DEFINE_bool("do_train", False, "Whether to run training.")
  flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
  flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
  flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
  flags.DEFINE_integer("num_train_steps", 100000, "Number of optimizer updates.")
  flags.DEFINE_integer(
      "num_warmup_steps", None,
      "Number of warmup updates. Default: min(10000, a tenth of --num_train_steps), so long "
      "runs keep the official 10,000 and short ones warm up for a tenth of their steps.")
  flags.DEFINE_integer(
      "max_eval_steps", None,
      "Evaluate this many batches of a repeating --eval_input_file (the official meaning, whose "
      "default was 100). Default: every record once.")
  flags.DEFINE_integer(
      "vocab_size", None,
      "The model's vocab_size, instead of --bert_config_file's (e.g. a config template over "
      "data made with your own vocab). Training from scratch, a vocab_size that differs from "
      "the data's vocab (as create_pretraining_data.py recorded it) is an error unless given "
      "here (a larger one on purpose, e.g. a multiple of 128 for TPU).")
  flags.DEFINE_integer(
      "gradient_accumulation_steps", 1,
      "Micro-batches of --train_batch_size averaged per optimizer update (the effective batch "
      "is their product). The global step counts micro-batches.")
  flags.DEFINE_integer("num_cpu_devices", 1,
                       "Split the CPU into this many logical devices (to run "
                       "--distribution_strategy=mirrored on a machine without GPUs).")
  estimator_utils.define_estimator_flags()
  model_config.define_model_override_flags()


FLAGS = flags.FLAGS

# The shared estimator_utils.MODEL_FN_FLAGS this script implements.
SUPPORTED_MODEL_FN_FLAGS = ("precision", "fused_optimizer")


def model_fn_builder(bert_config, init_checkpoint, learning_rate, num_train_steps,
                     num_warmup_steps, use_tpu, use_one_hot_embeddings,
                     gradient_accumulation_steps=1, total_steps=None, train_batch_size=None,
                     extra_hooks=(), progress_hook=None, precision="fp32",
                     fused_optimizer=False, keep_checkpoint_max=5, allow_unmatched_init=False):
  """Returns `model_fn` closure for TPUEstimator (MLM + NSP).

  extra_hooks are added to the training hooks off TPU (e.g. a WeightsDigestHook); progress_hook
  is the estimator_utils.ProgressHook to use (one is made when None), so the caller can read
  its steady rate. precision ("fp32", "bf16", "fp16") is the compute dtype of the encoder and
  the MLM head (variables stay float32; "fp16" trains with dynamic loss scaling, and its
  checkpoint saver, keeping keep_checkpoint_max, also resumes fp32 / bf16 checkpoints);
  fused_optimizer uses optimization.create_optimizer(fused=True). The train op comes from
  estimator_utils.create_train_op, which all the training scripts share.
  """
  compute_dtype = modeling.get_compute_dtype(precision)

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    """The `model_fn` for TPUEstimator."""
    input_ids = features["input_ids"]
    masked_lm_ids = features["masked_lm_ids"]
    masked_lm_weights = features["masked_lm_weights"]
    next_sentence_labels = features["next_sentence_labels"]

    is_training = (mode == tf1.estimator.ModeKeys.TRAIN)

    (total_loss, masked_lm_loss, masked_lm_example_loss, masked_lm_log_probs,
     next_sentence_loss, next_sentence_example_loss,
     next_sentence_log_probs) = _pretraining_graph(features, is_training, bert_config,
                                                   use_one_hot_embeddings, compute_dtype)

    tvars = tf1.trainable_variables()
    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(
        init_checkpoint, use_tpu, tvars, allow_unmatched=allow_unmatched_init)

    output_spec = None
    if mode == tf1.estimator.ModeKeys.TRAIN:
      # fp16: dynamic loss scaling and the saver that also resumes fp32 / bf16 checkpoints.
      train_op = estimator_utils.create_train_op(
          total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
          precision=compute_dtype, fused_optimizer=fused_optimizer,
          keep_checkpoint_max=keep_checkpoint_max,
          gradient_accumulation_steps=gradient_accumulation_steps)
      hooks = []
      if not use_tpu:
        _training_summaries(features, masked_lm_loss, masked_lm_log_probs, next_sentence_loss)
        # Used as a library (the official arguments only), the step count and batch size come
        # from num_train_steps and the estimator's params / the batch's static shape.
        hooks.append(progress_hook or estimator_utils.ProgressHook(
            total_steps if total_steps is not None
            else num_train_steps * gradient_accumulation_steps,
            train_batch_size or (params or {}).get("batch_size") or
            tf.compat.dimension_value(input_ids.shape[0])))
        hooks.append(estimator_utils.StopOnSignalHook())
        hooks.extend(extra_hooks)
      output_spec = tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode,
          loss=total_loss,
          train_op=train_op,
          training_hooks=hooks,
          scaffold_fn=scaffold_fn)
    elif mode == tf1.estimator.ModeKeys.EVAL:
      eval_metrics = (metric_fn, [
          masked_lm_example_loss, masked_lm_log_probs, masked_lm_ids,
          masked_lm_weights, next_sentence_example_loss,
          next_sentence_log_probs, next_sentence_labels
      ])
      output_spec = tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode,
          loss=total_loss,
          eval_metrics=eval_metrics,
          scaffold_fn=scaffold_fn)
    else:
      raise ValueError("Only TRAIN and EVAL modes are supported: %s" % (mode))

    return output_spec

  return model_fn


def _pretraining_graph(features, is_training, bert_config, use_one_hot_embeddings,
                       compute_dtype=None):
  """model_fn_builder's graph: BERT, the masked-LM and next-sentence heads and their losses.

  Args:
    features: dict of the pre-training features (input_fn_builder's).
    is_training: dropout on.
    bert_config: modeling.BertConfig.
    use_one_hot_embeddings: one-hot embedding lookups (TPU).
    compute_dtype: the encoder's compute dtype (None: float32).

  Returns:
    (total_loss, masked_lm_loss, masked_lm_example_loss [batch * max_predictions],
    masked_lm_log_probs [batch * max_predictions, vocab], next_sentence_loss,
    next_sentence_example_loss [batch], next_sentence_log_probs [batch, 2]).
  """
  model = modeling.BertModel(
      config=bert_config,
      is_training=is_training,
      input_ids=features["input_ids"],
      input_mask=features["input_mask"],
      token_type_ids=features["segment_ids"],
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype)

  (masked_lm_loss, masked_lm_example_loss, masked_lm_log_probs) = get_masked_lm_output(
      bert_config, model.get_sequence_output(), model.get_embedding_table(),
      features["masked_lm_positions"], features["masked_lm_ids"],
      features["masked_lm_weights"], compute_dtype=compute_dtype)

  (next_sentence_loss, next_sentence_example_loss,
   next_sentence_log_probs) = get_next_sentence_output(
       bert_config, model.get_pooled_output(), features["next_sentence_labels"])

  total_loss = masked_lm_loss + next_sentence_loss
  return (total_loss, masked_lm_loss, masked_lm_example_loss, masked_lm_log_probs,
          next_sentence_loss, next_sentence_example_loss, next_sentence_log_probs)


def _training_summaries(features, masked_lm_loss, masked_lm_log_probs, next_sentence_loss):
  """The TensorBoard scalars of a training step (tf.compat.v1 summaries, on both engines).

  Args:
    features: dict of the pre-training features.
    masked_lm_loss: float32 scalar.
    masked_lm_log_probs: [batch * max_predictions, vocab].
    next_sentence_loss: float32 scalar.
  """
  mlm_accuracy = pretraining_utils.masked_lm_accuracy(
      masked_lm_log_probs, features["masked_lm_ids"], features["masked_lm_weights"])
  tf1.summary.scalar("masked_lm_accuracy", mlm_accuracy)
  tf1.summary.scalar("masked_lm_loss", masked_lm_loss)
  tf1.summary.scalar("next_sentence_loss", next_sentence_loss)


def _engine_model_fn(bert_config, use_one_hot_embeddings, compute_dtype=None):
  """The tf2_training.Engine model function: (total loss, what metric_fn reads per example);
  compute_dtype as _pretraining_graph's (--precision=bf16)."""
  def model_fn(features, is_training):
    (total_loss, masked_lm_loss, masked_lm_example_loss, masked_lm_log_probs,
     next_sentence_loss, next_sentence_example_loss, next_sentence_log_probs) = _pretraining_graph(
         features, is_training, bert_config, use_one_hot_embeddings, compute_dtype)
    if is_training:
      _training_summaries(features, masked_lm_loss, masked_lm_log_probs, next_sentence_loss)
    batch_shape = tf.shape(features["masked_lm_ids"])
    return total_loss, {
        "masked_lm_example_loss": tf.reshape(masked_lm_example_loss, batch_shape),
        "masked_lm_predictions": tf.reshape(
            tf.argmax(masked_lm_log_probs, axis=-1, output_type=tf.int32), batch_shape),
        "masked_lm_ids": features["masked_lm_ids"],
        "masked_lm_weights": features["masked_lm_weights"],
        "next_sentence_example_loss": next_sentence_example_loss,
        "next_sentence_predictions": tf.argmax(next_sentence_log_probs, axis=-1,
                                               output_type=tf.int32),
        "next_sentence_labels": tf.reshape(features["next_sentence_labels"], [-1]),
    }
  return model_fn


# Moved to estimator_utils (every fine-tuning script's fp16 jobs use it); kept under this name.
LossScaleOptionalSaver = estimator_utils.LossScaleOptionalSaver


def metric_fn(masked_lm_example_loss, masked_lm_log_probs, masked_lm_ids,
              masked_lm_weights, next_sentence_example_loss,
              next_sentence_log_probs, next_sentence_labels):
  """Computes the loss and accuracy of the model (MLM and NSP)."""
  masked_lm_log_probs = tf.reshape(masked_lm_log_probs, [-1, masked_lm_log_probs.shape[-1]])
  masked_lm_predictions = tf.argmax(masked_lm_log_probs, axis=-1, output_type=tf.int32)
  masked_lm_example_loss = tf.reshape(masked_lm_example_loss, [-1])
  masked_lm_ids = tf.reshape(masked_lm_ids, [-1])
  masked_lm_weights = tf.reshape(masked_lm_weights, [-1])
  masked_lm_accuracy = tf1.metrics.accuracy(
      labels=masked_lm_ids,
      predictions=masked_lm_predictions,
      weights=masked_lm_weights)
  masked_lm_mean_loss = tf1.metrics.mean(
      values=masked_lm_example_loss, weights=masked_lm_weights)

  next_sentence_log_probs = tf.reshape(
      next_sentence_log_probs, [-1, next_sentence_log_probs.shape[-1]])
  next_sentence_predictions = tf.argmax(next_sentence_log_probs, axis=-1, output_type=tf.int32)
  next_sentence_labels = tf.reshape(next_sentence_labels, [-1])
  next_sentence_accuracy = tf1.metrics.accuracy(
      labels=next_sentence_labels, predictions=next_sentence_predictions)
  next_sentence_mean_loss = tf1.metrics.mean(values=next_sentence_example_loss)

  return {
      "masked_lm_accuracy": masked_lm_accuracy,
      "masked_lm_loss": masked_lm_mean_loss,
      "next_sentence_accuracy": next_sentence_accuracy,
      "next_sentence_loss": next_sentence_mean_loss,
  }


def get_masked_lm_output(bert_config, input_tensor, output_weights, positions,
                         label_ids, label_weights, compute_dtype=None):
  """Get loss and log probs for the masked LM.

  Args:
    bert_config: BertConfig.
    input_tensor: float [batch, seq, hidden], the sequence output.
    output_weights: float [vocab, hidden], the word embedding table (tied output).
    positions: int [batch, max_predictions_per_seq].
    label_ids: int [batch, max_predictions_per_seq].
    label_weights: float [batch, max_predictions_per_seq], 1.0 real, 0.0 padding.
    compute_dtype: (optional) dtype of the head's matmuls (modeling.masked_lm_logits); the
      log probs and losses are float32.

  Returns:
    (loss scalar, per-prediction loss [batch * max_predictions_per_seq],
     log probs [batch * max_predictions_per_seq, vocab]).
  """
  logits = modeling.masked_lm_logits(bert_config, input_tensor, output_weights, positions,
                                     compute_dtype=compute_dtype)
  log_probs = tf.nn.log_softmax(logits, axis=-1)

  label_ids = tf.reshape(label_ids, [-1])
  label_weights = tf.reshape(label_weights, [-1])

  # The `positions` tensor might be zero-padded (if the sequence is too
  # short to have the maximum number of predictions). The `label_weights`
  # tensor has a value of 1.0 for every real prediction and 0.0 for the
  # padding predictions.
  # -log p(label), the official -sum(log_probs * one_hot(label)), read with a gather from the
  # log_probs the metrics need anyway: no [n, vocab] one-hots; equal up to float rounding
  # (tests/test_run_pretraining.py checks it with NumPy), and its gradient is the one autodiff
  # gives, bit for bit, from fewer passes over [n, vocab] (label_log_probs).
  per_example_loss = -label_log_probs(logits, log_probs, label_ids)
  numerator = tf.reduce_sum(label_weights * per_example_loss)
  denominator = tf.reduce_sum(label_weights) + 1e-5
  loss = numerator / denominator

  return (loss, per_example_loss, log_probs)


def label_log_probs(logits, log_probs, label_ids):
  """log_probs at the labels, with the gradient to the logits written out.

  Autodiff of gather(log_softmax(logits)) scatters the gradient into a dense [n, vocab] zero
  matrix (an UnsortedSegmentSum: the largest single op of the demo's CPU step) and then runs
  log_softmax's backward, grad - sum(grad) * exp(log_probs), over it: five passes over
  [n, vocab]. Each row of that grad has one non-zero, g at the label, so the result is
  -g * exp(log_probs), plus g at the label: two passes and a scatter of n values. It is the
  same float arithmetic (sum(grad) is g exactly, 0 - x is -x, g - x is g + -x): when the loss
  is log_probs' only differentiable use (training: log_probs feed only metrics), the gradient
  is autodiff's bit for bit, up to the sign of zeros (tests/test_run_pretraining.py;
  bench/bench_demo_step.py compares the losses of every step); another use of log_probs keeps
  its own autodiff gradient, added to this one (equal to rounding). The gradient is attached as
  modeling.layer_norm attaches its own (an IdentityN whose gradient is overridden); eagerly,
  autodiff gives the same values.

  Args:
    logits: float32 [n, vocab].
    log_probs: float32 [n, vocab], tf.nn.log_softmax(logits).
    label_ids: int [n].

  Returns:
    float32 [n]: log_probs[i, label_ids[i]].
  """
  label_ids = tf.cast(label_ids, tf.int32)
  picked = tf.gather(log_probs, label_ids[:, None], axis=1, batch_dims=1)[:, 0]
  rows = tf.stack([tf.range(tf.shape(label_ids)[0]), label_ids], axis=1)

  def grad(unused_op, dpicked, *unused_grads):
    """d(loss)/d(picked, logits): None for picked, so autodiff does not also go through it."""
    dlogits = tf.exp(log_probs) * -dpicked[:, None]
    return None, tf.tensor_scatter_nd_add(dlogits, rows, dpicked)

  with tf1.get_default_graph().gradient_override_map(
      {"IdentityN": modeling.register_gradient(grad)}):
    return tf.identity_n([picked, logits])[0]


def get_next_sentence_output(bert_config, input_tensor, labels):
  """Get loss and log probs for the next sentence prediction.

  Args:
    bert_config: BertConfig.
    input_tensor: float [batch, hidden], the pooled output.
    labels: int [batch, 1] or [batch]; 0 = B follows A, 1 = B is random.

  Returns:
    (loss scalar, per-example loss [batch], log probs [batch, 2]).
  """
  # Simple binary classification. Note that 0 is "next sentence" and 1 is
  # "random sentence". This weight matrix is not used after pre-training.
  with tf1.variable_scope("cls/seq_relationship"):
    output_weights = tf1.get_variable(
        "output_weights",
        shape=[2, bert_config.hidden_size],
        initializer=modeling.create_initializer(bert_config.initializer_range))
    output_bias = tf1.get_variable(
        "output_bias", shape=[2], initializer=tf1.zeros_initializer())

    logits = tf.matmul(input_tensor, output_weights, transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    labels = tf.reshape(labels, [-1])
    one_hot_labels = tf.one_hot(labels, depth=2, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    loss = tf.reduce_mean(per_example_loss)
    return (loss, per_example_loss, log_probs)


# Kept here under its official name for code that imports it from run_pretraining.
gather_indexes = modeling.gather_indexes


def input_fn_builder(input_files, max_seq_length, max_predictions_per_seq, is_training,
                     num_cpu_threads=4, seed=None, skip_batches=0, repeat=True,
                     drop_remainder=True):
  """Creates an `input_fn` closure to be passed to TPUEstimator.

  Args:
    input_files: list of TFRecord paths.
    max_seq_length: length of input_ids / input_mask / segment_ids.
    max_predictions_per_seq: length of the masked_lm_* features.
    is_training: repeat and shuffle when True.
    num_cpu_threads: parallel readers / decoders.
    seed: shuffle seed (deterministic order for a given seed).
    skip_batches: batches of the training stream already consumed (the step a resumed job
      starts at), so that with a seed a resumed job sees exactly the batches the
      uninterrupted one would have.
    repeat: (evaluation) repeat the records for ever, as the official code does for its fixed
      number of eval steps; False reads each record once.
    drop_remainder: drop a last partial batch (training always; evaluation on TPU).

  Returns:
    input_fn(params) -> tf.data.Dataset of feature dicts with batch params["batch_size"].
  """

  def input_fn(params):
    """The actual input function."""
    batch_size = params["batch_size"]

    name_to_features = {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }

    # For training, we want a lot of parallel reading and shuffling.
    # For eval, we want no shuffling and parallel reading doesn't matter.
    if is_training:
      d = tf.data.Dataset.from_tensor_slices(tf.constant(input_files))
      d = d.repeat()
      d = d.shuffle(buffer_size=len(input_files), seed=seed)

      # `cycle_length` is the number of parallel files that get read.
      cycle_length = min(num_cpu_threads, len(input_files))

      # `sloppy` mode means that the interleaving is not exact. This adds
      # even more randomness to the training pipeline.
      d = d.interleave(
          tf.data.TFRecordDataset,
          cycle_length=cycle_length,
          num_parallel_calls=tf.data.AUTOTUNE,
          deterministic=seed is not None)
      d = d.shuffle(buffer_size=100, seed=seed)
      if skip_batches:
        # Records, not batches: skipping before parsing costs only the reads.
        d = d.skip(skip_batches * batch_size)
    else:
      d = tf.data.TFRecordDataset(input_files)
      if repeat:
        # Since we evaluate for a fixed number of steps we don't want to encounter
        # out-of-range exceptions.
        d = d.repeat()

    # We must `drop_remainder` on training because the TPU requires fixed
    # size dimensions. For eval, we assume we are evaluating on the CPU or GPU
    # and we *don't* want to drop the remainder, otherwise we wont cover
    # every sample.
    d = d.map(lambda record: estimator_utils.decode_record(record, name_to_features),
              num_parallel_calls=num_cpu_threads)
    d = d.batch(batch_size, drop_remainder=drop_remainder or is_training)
    return estimator_utils.without_autotune(d.prefetch(2))

  return input_fn


# Moved to pretraining_utils (shared with etc_model/run_pretraining.py); kept under these names.
weights_digest = pretraining_utils.weights_digest
WeightsDigestHook = pretraining_utils.WeightsDigestHook


def head_shapes(bert_config):
  """{variable name: shape} of the masked-LM and next-sentence heads (for check_resume).

  Built in a scratch graph (nothing is computed): an ALBERT-style embedding_size or a Pre-LN
  config changes them as model_fn's heads.
  """
  with tf.Graph().as_default():
    input_ids = tf1.placeholder(tf.int32, [1, 2])
    model = modeling.BertModel(bert_config, False, input_ids)
    body = {v.op.name for v in tf1.global_variables()}
    positions = tf1.placeholder(tf.int32, [1, 1])
    get_masked_lm_output(bert_config, model.get_sequence_output(), model.get_embedding_table(),
                         positions, positions, tf1.placeholder(tf.float32, [1, 1]))
    get_next_sentence_output(bert_config, model.get_pooled_output(),
                             tf1.placeholder(tf.int32, [1, 1]))
    return {v.op.name: v.shape.as_list() for v in tf1.global_variables()
            if v.op.name not in body}


def _check_flags():
  if not FLAGS.do_train and not FLAGS.do_eval:
    common.fail("at least one of --do_train or --do_eval must be true")
  for name in ("bert_config_file", "input_file", "output_dir"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  for name in ("max_seq_length", "max_predictions_per_seq", "train_batch_size",
               "eval_batch_size", "num_train_steps", "gradient_accumulation_steps"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s must be >= 1, got %d" % (name, getattr(FLAGS, name)))
  if FLAGS.num_warmup_steps is not None and not (
      0 <= FLAGS.num_warmup_steps <= FLAGS.num_train_steps):
    common.fail("--num_warmup_steps=%d must be in [0, --num_train_steps=%d]" %
                (FLAGS.num_warmup_steps, FLAGS.num_train_steps))
  for name in ("max_eval_steps", "vocab_size"):
    if getattr(FLAGS, name) is not None and getattr(FLAGS, name) < 1:
      common.fail("--%s must be >= 1, got %d" % (name, getattr(FLAGS, name)))


def check_data_vocab_size(bert_config, input_files, vocab_size_flag, config_file):
  """Fails with one line when a model trained from scratch does not fit its data's vocab.

  The data's vocab size is what create_pretraining_data.py recorded in its summary beside the
  TFRecords (data without one is not checked). A config vocab_size above it would train an
  embedding table with rows no id reaches (a config template over your own, smaller vocab);
  one below it cannot embed the data's ids.

  Args:
    bert_config: the model's BertConfig (--vocab_size applied).
    input_files: the training TFRecords.
    vocab_size_flag: --vocab_size (None when the config's value is used): a larger size given
      here is deliberate.
    config_file: --bert_config_file, for the message.
  """
  sizes = {}
  for path in input_files:
    summary = pretraining_data.data_summary(path)
    if summary and isinstance(summary.get("vocab_size"), int):
      sizes.setdefault(summary["vocab_size"], path)
  if not sizes:
    return
  data_size = max(sizes)
  where = "--input_file: %s was made with a %d-entry vocab" % (sizes[data_size], data_size)
  model_size = bert_config.vocab_size
  if model_size < data_size:
    common.fail("%s, but the model's vocab_size is %d (%s): its ids would not fit; pass "
                "--vocab_size=%d" % (where, model_size, "--vocab_size" if vocab_size_flag
                                     else "--bert_config_file=%s" % config_file,
                                     data_size))
  if model_size > data_size and vocab_size_flag is None:
    common.fail("%s, but --bert_config_file=%s has vocab_size %d (an embedding %.1fx too big); "
                "pass --vocab_size=%d (or a larger --vocab_size on purpose, e.g. a multiple of "
                "128 for TPU)" % (where, config_file, model_size,
                                  model_size / float(data_size), data_size))


def _check_vocab_ids(input_files, bert_config, records_per_file=64):
  """Fails before training when token ids in the TFRecords reach the config's vocab_size.

  Such ids (data made with a bigger vocab than the model's) would fail inside an embedding
  gather deep in training. The first records of each file are checked.

  Args:
    input_files: TFRecord paths.
    bert_config: the model's BertConfig.
    records_per_file: how many records of each file to read.
  """
  for path in input_files:
    for i, record in enumerate(tf1.io.tf_record_iterator(path)):
      if i >= records_per_file:
        break
      features = tf.train.Example.FromString(record).features.feature
      for key in ("input_ids", "masked_lm_ids"):
        ids = features[key].int64_list.value if key in features else []
        if ids and max(ids) >= bert_config.vocab_size:
          common.fail("--input_file: %s has %s up to %d but vocab_size=%d in "
                      "--bert_config_file; it was made with a bigger vocab than the model's" %
                      (path, key, max(ids), bert_config.vocab_size))


def _expected_lengths(max_seq_length, max_predictions_per_seq):
  """{feature: (length, what sets it)} of the pre-training records, for check_tfrecord_lengths.

  Args:
    max_seq_length: --max_seq_length.
    max_predictions_per_seq: --max_predictions_per_seq.

  Returns:
    dict.
  """
  seq_flag = "--max_seq_length=%d" % max_seq_length
  pred_flag = "--max_predictions_per_seq=%d" % max_predictions_per_seq
  return {
      "input_ids": (max_seq_length, seq_flag),
      "input_mask": (max_seq_length, seq_flag),
      "segment_ids": (max_seq_length, seq_flag),
      "masked_lm_positions": (max_predictions_per_seq, pred_flag),
      "masked_lm_ids": (max_predictions_per_seq, pred_flag),
      "masked_lm_weights": (max_predictions_per_seq, pred_flag),
      "next_sentence_labels": (1, "next_sentence_labels must have length 1"),
  }


def _configure_cpu_devices(count):
  """Splits the CPU into `count` logical devices; must run before TensorFlow starts."""
  if count <= 1:
    return
  cpus = tf.config.list_physical_devices("CPU")
  tf.config.set_logical_device_configuration(
      cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)])


def _check_engine_flags():
  """One-line errors for the device, precision and distribution flags: on the TF2 engine those
  only the Estimator implements (tf2_training.check_flags), on both the combinations
  estimator_utils refuses."""
  if not estimator_utils.has_estimator():
    tf2_training.check_flags(FLAGS, "run_pretraining.py", multi_worker=True,
                             precisions=tf2_training.ENGINE_PRECISIONS, xla=True, tpu=True)
  estimator_utils.validate_estimator_flags(FLAGS)
  estimator_utils.check_supported(FLAGS, SUPPORTED_MODEL_FN_FLAGS)


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  _check_flags()
  _check_engine_flags()
  _configure_cpu_devices(FLAGS.num_cpu_devices)
  # The TF2 engine's strategy, before any TensorFlow operation runs (a multi-worker one must).
  strategy = None if estimator_utils.has_estimator() else tf2_training.command_strategy(FLAGS)
  tf2_training.check_multi_worker_job(strategy, FLAGS.do_train)

  bert_config = model_config.load_config(FLAGS.bert_config_file, FLAGS,
                                            max_seq_length=FLAGS.max_seq_length)
  if FLAGS.vocab_size:
    bert_config.vocab_size = FLAGS.vocab_size
  input_files = common.expand_input_files(FLAGS.input_file, "input_file")
  expected_lengths = _expected_lengths(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)
  estimator_utils.check_tfrecord_lengths(input_files, expected_lengths, "input_file")
  eval_files = input_files
  if FLAGS.eval_input_file:
    eval_files = common.expand_input_files(FLAGS.eval_input_file, "eval_input_file")
    estimator_utils.check_tfrecord_lengths(eval_files, expected_lengths, "eval_input_file")

  common.check_output_dir(FLAGS.output_dir)
  _check_vocab_ids(input_files + (eval_files if eval_files is not input_files else []),
                   bert_config)
  label = pretraining_utils.task_label()
  lock = common.OutputDirLock(FLAGS.output_dir, label=label).acquire()
  # Compared before anything is written there: a resume with another model is one line.
  # A checkpoint made for initialising (converted, slimmed, an official release: no optimizer
  # slots, or no heads) too.
  resume_step = estimator_utils.check_resume(FLAGS.output_dir, bert_config,
                                             extra_shapes=head_shapes(bert_config),
                                             restore=estimator_utils.restore_mode(FLAGS.do_train))
  if FLAGS.do_train and not resume_step and not FLAGS.init_checkpoint:
    check_data_vocab_size(bert_config, input_files, FLAGS.vocab_size, FLAGS.bert_config_file)
  if FLAGS.do_eval and not FLAGS.do_train:
    checkpoint_utils.require_trained_weights(
        "--do_eval", [("output_dir", FLAGS.output_dir), ("init_checkpoint", FLAGS.init_checkpoint)],
        allow_random_eval=FLAGS.allow_random_eval, give_flag="init_checkpoint")
  if pretraining_utils.is_chief():  # (every worker of a multi-worker job has the same config)
    model_config.save_config(bert_config, FLAGS.output_dir)
  tf1.logging.info("*** Input files: %d (%s%s)", len(input_files), input_files[0],
                   ", ..." if len(input_files) > 1 else "")
  tf1.logging.info("*** Model: %d layers, hidden %d, residual_attention=%s, layer_norm_type=%s",
                   bert_config.num_hidden_layers, bert_config.hidden_size,
                   bert_config.residual_attention, bert_config.layer_norm_type)

  total_steps = FLAGS.num_train_steps * FLAGS.gradient_accumulation_steps
  num_warmup_steps = FLAGS.num_warmup_steps
  if num_warmup_steps is None:
    num_warmup_steps = pretraining_utils.default_warmup_steps(FLAGS.num_train_steps)
    if FLAGS.do_train:
      tf1.logging.info("Warm-up: %d of %d steps (--num_warmup_steps default: min(%d, a tenth))",
                       num_warmup_steps, FLAGS.num_train_steps,
                       pretraining_utils.OFFICIAL_WARMUP_STEPS)
  if not estimator_utils.has_estimator():
    _run_engine(FLAGS, strategy, bert_config, input_files, eval_files, resume_step,
                num_warmup_steps, label)
    lock.release()
    return
  digest_hook = WeightsDigestHook()
  progress_hook = estimator_utils.ProgressHook(total_steps, FLAGS.train_batch_size)
  model_fn = model_fn_builder(
      bert_config=bert_config,
      init_checkpoint=FLAGS.init_checkpoint,
      allow_unmatched_init=FLAGS.allow_unmatched_init,
      learning_rate=FLAGS.learning_rate,
      num_train_steps=FLAGS.num_train_steps,
      num_warmup_steps=num_warmup_steps,
      use_tpu=FLAGS.use_tpu,
      use_one_hot_embeddings=FLAGS.use_tpu,
      gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
      total_steps=total_steps,
      train_batch_size=FLAGS.train_batch_size,
      extra_hooks=[digest_hook],
      progress_hook=progress_hook,
      **estimator_utils.precision_kwargs(FLAGS))
  estimator = estimator_utils.make_estimator(
      model_fn, FLAGS, FLAGS.output_dir,
      train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
      supported_flags=SUPPORTED_MODEL_FN_FLAGS)

  summary = {"residual_attention": bert_config.residual_attention,
             "layer_norm_type": bert_config.layer_norm_type,
             "precision": FLAGS.precision, "use_xla": FLAGS.use_xla,
             "fused_optimizer": FLAGS.fused_optimizer}
  if FLAGS.do_train:
    tf1.logging.info("***** Running training *****")
    tf1.logging.info("  Batch size = %d x %d accumulation", FLAGS.train_batch_size,
                     FLAGS.gradient_accumulation_steps)
    train_input_fn = input_fn_builder(
        input_files=input_files,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        is_training=True,
        seed=FLAGS.seed,
        skip_batches=estimator_utils.resume_skip_batches(resume_step, FLAGS))
    start = time.time()
    start_step = resume_step
    if start_step:
      tf1.logging.info("Resuming from step %d of %d in %s", start_step, total_steps,
                       FLAGS.output_dir)
    pretraining_utils.train_to_step(estimator, train_input_fn, total_steps,
                                    FLAGS.distribution_strategy)
    end_step = estimator_utils.latest_global_step(FLAGS.output_dir)
    # Stopped by a signal: the checkpoint is saved; no summary, no eval, exit 130 / 143.
    common.STOP_SIGNALS.exit_if_stopped(
        "checkpoint saved at step %d of %d; rerun the same command to resume" %
        (end_step, total_steps))
    if end_step < total_steps and pretraining_utils.is_chief():
      common.fail("training ended at step %d of %d (no summary written); rerun the same "
                  "command to resume" % (end_step, total_steps))
    elapsed = time.time() - start
    steps_done = end_step - (start_step or 0)
    summary.update({
        "global_step": end_step,
        "num_train_steps": total_steps,
        "train_seconds": round(elapsed, 1),
        "train_steps_per_sec": round(steps_done / elapsed, 3) if elapsed > 0 else None,
        # After the first step (graph building and warm-up excluded): what a longer run gets.
        "steady_steps_per_sec": (round(progress_hook.last_rate, 3)
                                 if progress_hook.last_rate else None),
        "train_examples_per_sec": (round(steps_done * FLAGS.train_batch_size / elapsed, 2)
                                   if elapsed > 0 else None),
    })
    summary["checkpoint"] = tf1.train.latest_checkpoint(FLAGS.output_dir)
    summary["weights_digest"] = digest_hook.digest
    common.write_json_atomic(
        os.path.join(FLAGS.output_dir, "train_summary_%s.json" % label), summary)
    tf1.logging.info("Training done: %s", json.dumps(summary, sort_keys=True))

  if FLAGS.do_eval and pretraining_utils.is_chief():
    tf1.logging.info("***** Running evaluation *****")
    tf1.logging.info("  Batch size = %d", FLAGS.eval_batch_size)
    # By default every record once (a last partial batch too, except on TPU, whose batches
    # have a static shape); --max_eval_steps: that many batches of the repeated records.
    eval_once = FLAGS.max_eval_steps is None
    eval_input_fn = input_fn_builder(
        input_files=eval_files,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        is_training=False,
        repeat=not eval_once,
        drop_remainder=FLAGS.use_tpu or not eval_once)
    result = estimator.evaluate(input_fn=eval_input_fn, steps=FLAGS.max_eval_steps)
    common.STOP_SIGNALS.exit_if_stopped("evaluation was not written; rerun to evaluate")
    result.update(pretraining_utils.eval_counts(eval_files, FLAGS.eval_batch_size,
                                                FLAGS.max_eval_steps, FLAGS.use_tpu))
    tf1.logging.info("Evaluated %d examples (%d records in --eval_input_file)",
                     result["eval_examples"], result["eval_records"])
    estimator_utils.write_eval_results(FLAGS.output_dir, result)
  lock.release()


def _run_engine(flag_values, strategy, bert_config, input_files, eval_files, resume_step,
                num_warmup_steps, label):
  """--do_train / --do_eval with tf2_training.Engine (a TensorFlow without the Estimator): the
  checkpoints, train_summary_<label>.json and eval_results of the Estimator's path.

  Args:
    flag_values: the parsed flags, as main read and checked them.
    strategy: tf2_training.make_strategy's strategy of --distribution_strategy.
    bert_config: the job's BertConfig.
    input_files: the training TFRecords.
    eval_files: the evaluation TFRecords.
    resume_step: the global step of the checkpoint the job resumes from (0 for none).
    num_warmup_steps: the warm-up, resolved.
    label: the train_summary file's label.
  """
  engine = tf2_training.Engine(
      _engine_model_fn(bert_config, tf2_training.is_tpu_strategy(strategy),
                       modeling.get_compute_dtype(flag_values.precision)),
      flag_values.output_dir,
      strategy=strategy, train_batch_size=flag_values.train_batch_size,
      learning_rate=flag_values.learning_rate, num_train_steps=flag_values.num_train_steps,
      num_warmup_steps=num_warmup_steps, init_checkpoint=flag_values.init_checkpoint,
      allow_unmatched_init=flag_values.allow_unmatched_init, seed=flag_values.seed,
      save_checkpoints_steps=flag_values.save_checkpoints_steps,
      keep_checkpoint_max=flag_values.keep_checkpoint_max,
      log_every_n_steps=flag_values.log_every_n_steps,
      fused_optimizer=flag_values.fused_optimizer,
      gradient_accumulation_steps=flag_values.gradient_accumulation_steps,
      use_xla=flag_values.use_xla,
      loss_scale=estimator_utils.loss_scale_for(flag_values.precision))
  summary = {"residual_attention": bert_config.residual_attention,
             "layer_norm_type": bert_config.layer_norm_type,
             "precision": flag_values.precision, "use_xla": flag_values.use_xla,
             "fused_optimizer": flag_values.fused_optimizer}
  # The global step counts micro-batches, as on the Estimator.
  total_steps = flag_values.num_train_steps * flag_values.gradient_accumulation_steps
  if flag_values.do_train:
    tf1.logging.info("***** Running training *****")
    tf1.logging.info("  Batch size = %d x %d accumulation", flag_values.train_batch_size,
                     flag_values.gradient_accumulation_steps)
    if resume_step:
      tf1.logging.info("Resuming from step %d of %d in %s", resume_step, total_steps,
                       flag_values.output_dir)
    start = time.time()
    result = engine.train(
        lambda skip_batches: input_fn_builder(
            input_files=input_files, max_seq_length=flag_values.max_seq_length,
            max_predictions_per_seq=flag_values.max_predictions_per_seq, is_training=True,
            seed=flag_values.seed, skip_batches=skip_batches), total_steps)
    common.STOP_SIGNALS.exit_if_stopped(
        "checkpoint saved at step %d of %d; rerun the same command to resume" %
        (result.global_step, total_steps))
    elapsed = time.time() - start
    steps_done = result.global_step - (resume_step or 0)
    summary.update({
        "global_step": result.global_step,
        "num_train_steps": total_steps,
        "train_seconds": round(elapsed, 1),
        "train_steps_per_sec": round(steps_done / elapsed, 3) if elapsed > 0 else None,
        "steady_steps_per_sec": (round(result.steps_per_second, 3)
                                 if result.steps_per_second else None),
        "train_examples_per_sec": (round(steps_done * flag_values.train_batch_size / elapsed, 2)
                                   if elapsed > 0 else None),
        "checkpoint": tf1.train.latest_checkpoint(flag_values.output_dir),
        "weights_digest": pretraining_utils.weights_digest(engine.variable_values()),
    })
    common.write_json_atomic(
        os.path.join(flag_values.output_dir, "train_summary_%s.json" % label), summary)
    tf1.logging.info("Training done: %s", json.dumps(summary, sort_keys=True))
  # A multi-worker job evaluates on its chief, as the Estimator's does.
  if flag_values.do_eval and engine.is_chief:
    tf1.logging.info("***** Running evaluation *****")
    tf1.logging.info("  Batch size = %d", flag_values.eval_batch_size)
    eval_once = flag_values.max_eval_steps is None
    # On TPU full batches only (static shapes), as the Estimator's.
    eval_input_fn = input_fn_builder(
        input_files=eval_files, max_seq_length=flag_values.max_seq_length,
        max_predictions_per_seq=flag_values.max_predictions_per_seq, is_training=False,
        repeat=not eval_once, drop_remainder=engine.on_tpu or not eval_once)
    pretraining_utils.evaluate_with_engine(
        engine, eval_input_fn, eval_files, flag_values.eval_batch_size,
        flag_values.max_eval_steps, flag_values.output_dir, drop_remainder=engine.on_tpu)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
