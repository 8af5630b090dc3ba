# coding=utf-8
r"""Pre-trains ETC / RealFormer-ETC with masked LM on long inputs (TPUEstimator, or CPU / GPU).

  python -m etc_model.run_pretraining --etc_config_file=etc_config.json \
      --input_file=etc_data/train.tfrecord --output_dir=etc_out --do_train --do_eval \
      --max_seq_length=4096 --max_global_seq_length=256 --max_predictions_per_seq=640 \
      [--init_checkpoint=models/minilm_etc/model.ckpt] [--residual_attention=sum]

Reads the TFRecords of `python -m etc_model.create_pretraining_data`. The side inputs (local /
global masks, hard g2l / l2g masks, relative ids) are computed in the input pipeline from the
stored breakpoints and sentence ids with etc_inputs' TF ops and the config's local_radius,
relative_pos_max_distance and use_hard_g2l_mask / use_hard_l2g_mask.

The loss is the masked-LM loss on the long tokens. The head is BERT's (`cls/predictions/*`,
run_pretraining.get_masked_lm_output, tied to ETC's token embedding table): the official
etcmodel ships no pre-training code, hence no head names of its own. With an ALBERT-style
`embedding_size` the head's transform projects to embedding_size (as ALBERT's head).

--cpc_loss_weight > 0 adds ETC's Contrastive Predictive Coding loss on the global tokens
(etc_model/cpc.py: ceil(--cpc_sentence_mask_rate * n) of a record's n sentences, at most
--cpc_max_sentences_per_seq, have all their long tokens replaced by [MASK] (the id the data's
summary records, or --cpc_mask_token_id); the
global token of each must pick the same model's encoding of its sentence alone, its first
--cpc_max_sentence_length tokens, among those of the batch's other masked sentences, InfoNCE):
loss = MLM + weight * CPC, MLM predictions inside masked sentences dropped. The choice is a
stateless function of the global step (exact resume holds); eval uses a fixed draw and reports
cpc_loss / cpc_accuracy beside the MLM metrics. No new variables: checkpoints are the same with
or without CPC. The default 0 builds exactly the MLM-only graph. Same records as without CPC.

The training plumbing is the top-level run_pretraining.py's: estimator_utils' TPU / distribution
/ checkpoint flags and make_estimator, create_train_op (optimization.create_optimizer;
--fused_optimizer, --gradient_accumulation_steps), --init_checkpoint through
init_checkpoint_scaffold_fn (a checkpoint of `python -m etc_model.lift_bert_checkpoint`: one
that leaves any of ETC's encoder variables uninitialised, e.g. a BERT checkpoint never lifted,
is one line unless --allow_unmatched_init), exact resume (rerun the same command; a checkpoint
of another model in --output_dir, or one made for initialising such as the lifted checkpoint's
own directory, is a one-line error before anything is written), one job per --output_dir
(lock file), SIGINT / SIGTERM: checkpoint, then exit 130 / 143 without evaluating or writing
the summary.
--precision=bf16 / fp16 runs ETC (etc_modeling.EtcModel's compute_dtype) and the MLM head in that
dtype with float32 variables, softmaxes, LayerNorm statistics and residual-attention running
sums; fp16 trains with dynamic loss scaling (estimator_utils.create_train_op). The checkpoints
are the same in every precision: a job continues in another one.

On TensorFlow >= 2.16 (no Estimator) the same flags train and evaluate with
realformer_tf.tf2_training.Engine over the same graph: the same checkpoints (a job continues on
either engine), train_summary and eval_results, --precision=bf16 and fp16 (the same dynamic
loss scaling and checkpoints) and several workers (--distribution_strategy=multi_worker_mirrored)
included; the Estimator-only flags (TPU) are one-line errors there.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import copy
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
from realformer_tf import pretraining_utils
from realformer_tf import text_input
from realformer_tf import tf2_training
import run_pretraining as bert_pretraining
from etc_model import cpc
from etc_model import etc_estimator
from etc_model import etc_modeling
from etc_model import etc_records

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

SCRIPT = "etc_model.run_pretraining"
CONFIG_NAME = "etc_config.json"
# The shared estimator_utils.MODEL_FN_FLAGS this script implements.
SUPPORTED_MODEL_FN_FLAGS = ("precision", "fused_optimizer")
# --cpc_max_sentences_per_seq / --cpc_max_sentence_length when not given, as far as the
# record's global / long lengths allow.
DEFAULT_CPC_MAX_SENTENCES = 32
DEFAULT_CPC_MAX_SENTENCE_LENGTH = 64


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("etc_config_file", None, "The ETC config json file (official keys).")
  flags.DEFINE_string("input_file", None,
                      "TFRecords of etc_model.create_pretraining_data (glob or comma separated).")
  flags.DEFINE_string("eval_input_file", None,
                      "Held-out TFRecords for --do_eval (glob or comma separated); default "
                      "--input_file.")
  flags.DEFINE_string("output_dir", None, "Where the checkpoints and results are written.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint (e.g. a BERT lifted by etc_model.lift_bert_checkpoint).")
  flags.DEFINE_integer("max_seq_length", 4096, "Long input length L; must match the data.")
  flags.DEFINE_integer("max_global_seq_length", 256,
                       "Global input length G; must match the data.")
  flags.DEFINE_integer("max_predictions_per_seq", 640,
                       "Masked LM predictions per record; must match the data.")
  flags.DEFINE_bool("do_train", False, "Whether to run training.")
  flags.DEFINE_bool("do_eval", False, "Whether to evaluate (masked_lm_accuracy / loss).")
  flags.DEFINE_integer("train_batch_size", 8, "Total batch size for training.")
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
  flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
  flags.DEFINE_integer("num_train_steps", 100000, "Number of optimizer updates.")
  flags.DEFINE_integer(
      "num_warmup_steps", None,
      "Number of warmup updates. Default: min(10000, a tenth of --num_train_steps).")
  flags.DEFINE_integer(
      "max_eval_steps", None,
      "Evaluate this many batches of a repeating --eval_input_file. Default: every record once "
      "(full batches: a last partial one is not scored, and eval_results says how many were).")
  flags.DEFINE_integer(
      "gradient_accumulation_steps", 1,
      "Micro-batches of --train_batch_size averaged per optimizer update (the global step "
      "counts micro-batches).")
  flags.DEFINE_enum("residual_attention", None, list(modeling.RESIDUAL_ATTENTION_TYPES),
                    "Overrides residual_attention in --etc_config_file (none | sum | mean).")
  flags.DEFINE_enum("att_implementation", "auto", list(etc_modeling.ATT_IMPLEMENTATIONS),
                    "Layout of the long rows' attention: auto (dense up to 1024 long tokens), "
                    "full (dense skewed) or sparse (blocked, memory linear in L).")
  flags.DEFINE_float("cpc_loss_weight", 0.0,
                     "Weight of ETC's CPC loss on the global tokens (0: off, MLM only).")
  flags.DEFINE_float("cpc_sentence_mask_rate", 0.1,
                     "CPC: fraction of a record's sentences masked (rounded up).")
  flags.DEFINE_integer("cpc_max_sentences_per_seq", None,
                       "CPC: at most this many masked sentences a record (<= "
                       "--max_global_seq_length: each takes a global token's slot). Default: "
                       "min(%d, --max_global_seq_length)." % DEFAULT_CPC_MAX_SENTENCES)
  flags.DEFINE_integer("cpc_max_sentence_length", None,
                       "CPC: a masked sentence is encoded alone from its first this many tokens "
                       "(the lone pass encodes batch * --cpc_max_sentences_per_seq * this; <= "
                       "--max_seq_length). Default: min(%d, --max_seq_length)." %
                       DEFAULT_CPC_MAX_SENTENCE_LENGTH)
  flags.DEFINE_integer("cpc_mask_token_id", None,
                       "CPC: the id the masked sentences' tokens become. Default: the [MASK] id "
                       "the data's summary records (etc_model.create_pretraining_data writes "
                       "it); a different value is refused.")
  estimator_utils.define_estimator_flags()


def masked_lm_head_config(config):
  """The config the BERT MLM head is built with: hidden_size = the token table's width.

  Args:
    config: EtcConfig.

  Returns:
    A copy whose hidden_size is embedding_size when that is set (the head's transform then
    projects to the embedding width, as ALBERT's), else the config itself.
  """
  if config.embedding_size is None or config.embedding_size == config.hidden_size:
    return config
  head = copy.copy(config)
  head.hidden_size = config.embedding_size
  return head



def input_fn_builder(input_files, config, max_seq_length, max_global_seq_length,
                     max_predictions_per_seq, is_training, num_cpu_threads=4, seed=None,
                     skip_batches=0, repeat=True):
  """Creates an `input_fn` for TPUEstimator over the ETC pre-training records.

  Args:
    input_files: list of TFRecord paths.
    config: EtcConfig (for the side inputs).
    max_seq_length: L.
    max_global_seq_length: G.
    max_predictions_per_seq: P.
    is_training: repeat and shuffle (seeded) when True.
    num_cpu_threads: parallel readers / decoders.
    seed: shuffle seed.
    skip_batches: batches already consumed by a resumed job (see estimator_utils).
    repeat: (evaluation) repeat the records for ever; False reads each record once.

  Returns:
    input_fn(params) -> tf.data.Dataset of feature dicts with batch params["batch_size"].
  """
  name_to_features = {}
  for name in etc_records.LONG_FEATURES:
    name_to_features[name] = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  for name in etc_records.GLOBAL_FEATURES:
    name_to_features[name] = tf.io.FixedLenFeature([max_global_seq_length], tf.int64)
  name_to_features["masked_lm_positions"] = tf.io.FixedLenFeature([max_predictions_per_seq],
                                                                  tf.int64)
  name_to_features["masked_lm_ids"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
  name_to_features["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq],
                                                                tf.float32)

  def input_fn(params):
    """The actual input function."""
    batch_size = params["batch_size"]
    if is_training:
      d = tf.data.Dataset.from_tensor_slices(tf.constant(input_files))
      d = d.repeat()
      d = d.shuffle(buffer_size=len(input_files), seed=seed)
      d = d.interleave(tf.data.TFRecordDataset, cycle_length=min(num_cpu_threads,
                                                                 len(input_files)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
      d = d.shuffle(buffer_size=100, seed=seed)
      if skip_batches:
        d = d.skip(skip_batches * batch_size)
    else:
      d = tf.data.TFRecordDataset(input_files)
      if repeat:
        d = d.repeat()
    d = d.map(lambda record: estimator_utils.decode_record(record, name_to_features),
              num_parallel_calls=num_cpu_threads)
    d = d.batch(batch_size, drop_remainder=True)
    d = d.map(lambda batch: etc_estimator.add_side_inputs(batch, config, max_seq_length,
                                                          max_global_seq_length),
              num_parallel_calls=num_cpu_threads)
    return d.prefetch(2)

  return input_fn


def build_model(config, features, is_training, use_one_hot_embeddings=False,
                att_implementation="auto", compute_dtype=None):
  """ETC + the masked-LM head on the long output.

  Args:
    config: EtcConfig.
    features: dict with token_ids, global_token_ids, the side inputs and masked_lm_*.
    is_training: dropout on.
    use_one_hot_embeddings: TPU embedding lookups.
    att_implementation: "auto", "full" or "sparse".
    compute_dtype: None (float32), a --precision name or a dtype: the compute dtype of ETC
      and of the head's matmuls (variables, loss and log probs stay float32).

  Returns:
    (loss, per-prediction loss [batch * P], log probs [batch * P, vocab]).
  """
  model = etc_modeling.EtcModel(config, is_training=is_training,
                                use_one_hot_embeddings=use_one_hot_embeddings,
                                compute_dtype=compute_dtype)
  long_output, _ = etc_estimator.encode(model, features, att_implementation=att_implementation)
  return bert_pretraining.get_masked_lm_output(
      masked_lm_head_config(config), long_output, model.get_token_embedding_table(),
      features["masked_lm_positions"], features["masked_lm_ids"],
      features["masked_lm_weights"], compute_dtype=compute_dtype)


# The CPC settings of a job (the --cpc_* flags).
CpcOptions = collections.namedtuple(
    "CpcOptions", ["loss_weight", "mask_rate", "max_sentences", "max_sentence_length",
                   "mask_token_id"])


def cpc_seed(features, is_training):
  """The [2] stateless seed of the CPC sentence choice.

  Args:
    features: the batch's features (the seed is keyed on the token_ids tensor).
    is_training: training: modeling.step_dropout_seed (a function of the global step, so a
      resumed job chooses as the uninterrupted one); eval: a fixed seed (every checkpoint is
      scored on the same choice).

  Returns:
    int64 Tensor [2].
  """
  step_seed = modeling.step_dropout_seed(features["token_ids"]) if is_training else None
  if step_seed is None:
    return tf.constant([0, 0], tf.int64)
  return step_seed


def build_model_with_cpc(config, features, is_training, cpc_options, seed,
                         use_one_hot_embeddings=False, att_implementation="auto",
                         compute_dtype=None):
  """ETC + the masked-LM head on the records with CPC's sentences masked, + the CPC loss.

  Args:
    config: EtcConfig.
    features: dict with token_ids, global_token_ids, sentence_ids, long_breakpoints, the side
      inputs and masked_lm_*.
    is_training: dropout on.
    cpc_options: CpcOptions.
    seed: int64 [2] stateless seed of the sentence choice (cpc_seed).
    use_one_hot_embeddings: TPU embedding lookups.
    att_implementation: "auto", "full" or "sparse".
    compute_dtype: as build_model's.

  Returns:
    (loss = MLM + loss_weight * CPC, MLM per-prediction loss [batch * P],
     MLM log probs [batch * P, vocab], the etc_model.cpc.cpc_loss dict (its masked_lm_weights
     [batch, P]: the records' weights, 0 inside the masked sentences)).
  """
  model = etc_modeling.EtcModel(config, is_training=is_training,
                                use_one_hot_embeddings=use_one_hot_embeddings,
                                compute_dtype=compute_dtype)
  out = cpc.cpc_loss(model, features, config, cpc_options.mask_token_id,
                     cpc_options.mask_rate, cpc_options.max_sentences,
                     cpc_options.max_sentence_length, seed,
                     att_implementation=att_implementation)
  mlm_loss, example_loss, log_probs = bert_pretraining.get_masked_lm_output(
      masked_lm_head_config(config), out["long_output"], model.get_token_embedding_table(),
      features["masked_lm_positions"], features["masked_lm_ids"], out["masked_lm_weights"],
      compute_dtype=compute_dtype)
  out["masked_lm_loss"] = mlm_loss
  loss = mlm_loss + cpc_options.loss_weight * out["cpc_loss"]
  return loss, example_loss, log_probs, out


def cpc_metric_fn(cpc_example_loss, cpc_correct, cpc_weights):
  """cpc_loss and cpc_accuracy over the masked sentences (tensors [batch, M])."""
  return {
      "cpc_loss": tf1.metrics.mean(values=cpc_example_loss, weights=cpc_weights),
      "cpc_accuracy": tf1.metrics.mean(values=cpc_correct, weights=cpc_weights),
  }


def metric_fn(masked_lm_example_loss, masked_lm_log_probs, masked_lm_ids, masked_lm_weights):
  """masked_lm_accuracy and masked_lm_loss (weighted by the real predictions)."""
  predictions = tf.argmax(masked_lm_log_probs, axis=-1, output_type=tf.int32)
  masked_lm_ids = tf.reshape(masked_lm_ids, [-1])
  masked_lm_weights = tf.reshape(masked_lm_weights, [-1])
  return {
      "masked_lm_accuracy": tf1.metrics.accuracy(labels=masked_lm_ids, predictions=predictions,
                                                 weights=masked_lm_weights),
      "masked_lm_loss": tf1.metrics.mean(values=tf.reshape(masked_lm_example_loss, [-1]),
                                         weights=masked_lm_weights),
  }


def mlm_and_cpc_metric_fn(masked_lm_example_loss, masked_lm_log_probs, masked_lm_ids,
                          masked_lm_weights, cpc_example_loss, cpc_correct, cpc_weights):
  """metric_fn's MLM metrics and cpc_metric_fn's cpc_loss / cpc_accuracy."""
  metrics = metric_fn(masked_lm_example_loss, masked_lm_log_probs, masked_lm_ids,
                      masked_lm_weights)
  metrics.update(cpc_metric_fn(cpc_example_loss, cpc_correct, cpc_weights))
  return metrics


def model_fn_builder(config, init_checkpoint, learning_rate, num_train_steps, num_warmup_steps,
                     use_tpu, gradient_accumulation_steps=1, total_steps=None,
                     train_batch_size=None, extra_hooks=(), progress_hook=None,
                     fused_optimizer=False, keep_checkpoint_max=5, att_implementation="auto",
                     precision="fp32", cpc_options=None, allow_unmatched_init=False):
  """Returns the `model_fn` closure for TPUEstimator (masked LM on the long tokens).

  The arguments are those of the top-level run_pretraining.model_fn_builder (config an
  EtcConfig; precision "fp32", "bf16" or "fp16": the compute dtype of ETC and the MLM head,
  variables float32, fp16 with dynamic loss scaling), plus att_implementation and
  cpc_options (a CpcOptions with loss_weight > 0 adds the CPC loss; None or weight 0: MLM only,
  the same graph as without the option).
  """
  compute_dtype = modeling.get_compute_dtype(precision)

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    """The `model_fn` for TPUEstimator."""
    is_training = (mode == tf1.estimator.ModeKeys.TRAIN)
    cpc_out = None
    if cpc_options is not None and cpc_options.loss_weight > 0:
      loss, example_loss, log_probs, cpc_out = build_model_with_cpc(
          config, features, is_training, cpc_options,
          cpc_seed(features, is_training),
          use_one_hot_embeddings=use_tpu, att_implementation=att_implementation,
          compute_dtype=compute_dtype)
      # MLM predictions inside the masked sentences do not count.
      features = dict(features, masked_lm_weights=cpc_out["masked_lm_weights"])
    else:
      loss, example_loss, log_probs = build_model(
          config, features, is_training, use_one_hot_embeddings=use_tpu,
          att_implementation=att_implementation, compute_dtype=compute_dtype)
    tvars = tf1.trainable_variables()
    # ETC's encoder must come from the checkpoint (a lifted one); the MLM head may be new.
    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(
        init_checkpoint, use_tpu, tvars, encoder_scopes=checkpoint_utils.ENCODER_SCOPES["etc"],
        allow_unmatched=allow_unmatched_init)
    if mode == tf1.estimator.ModeKeys.TRAIN:
      train_op = estimator_utils.create_train_op(
          loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
          precision=compute_dtype, fused_optimizer=fused_optimizer,
          keep_checkpoint_max=keep_checkpoint_max,
          gradient_accumulation_steps=gradient_accumulation_steps)
      hooks = []
      if not use_tpu:
        tf1.summary.scalar("masked_lm_accuracy", pretraining_utils.masked_lm_accuracy(
            log_probs, features["masked_lm_ids"], features["masked_lm_weights"]))
        tf1.summary.scalar("masked_lm_loss", loss if cpc_out is None
                           else cpc_out["masked_lm_loss"])
        if cpc_out is not None:
          tf1.summary.scalar("cpc_loss", cpc_out["cpc_loss"])
          tf1.summary.scalar("cpc_accuracy", tf.reduce_sum(
              cpc_out["cpc_correct"] * cpc_out["cpc_weights"]) / tf.maximum(
                  tf.reduce_sum(cpc_out["cpc_weights"]), 1.0))
        hooks.append(progress_hook or estimator_utils.ProgressHook(
            total_steps if total_steps is not None
            else num_train_steps * gradient_accumulation_steps,
            train_batch_size or (params or {}).get("batch_size")))
        hooks.append(estimator_utils.StopOnSignalHook())
        hooks.extend(extra_hooks)
      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=loss, train_op=train_op, training_hooks=hooks,
          scaffold_fn=scaffold_fn)
    if mode == tf1.estimator.ModeKeys.EVAL:
      eval_metrics = (metric_fn, [example_loss, log_probs, features["masked_lm_ids"],
                                  features["masked_lm_weights"]])
      if cpc_out is not None:
        eval_metrics = (mlm_and_cpc_metric_fn, {
            "masked_lm_example_loss": example_loss, "masked_lm_log_probs": log_probs,
            "masked_lm_ids": features["masked_lm_ids"],
            "masked_lm_weights": features["masked_lm_weights"],
            "cpc_example_loss": cpc_out["cpc_example_loss"],
            "cpc_correct": cpc_out["cpc_correct"], "cpc_weights": cpc_out["cpc_weights"]})
      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=loss, scaffold_fn=scaffold_fn, eval_metrics=eval_metrics)
    raise ValueError("Only TRAIN and EVAL modes are supported: %s" % mode)

  return model_fn


def engine_model_fn(config, cpc_options=None, att_implementation="auto",
                    use_one_hot_embeddings=False, compute_dtype=None):
  """model_fn_builder's graph as a tf2_training.Engine model function.

  Args:
    config: EtcConfig.
    cpc_options: CpcOptions (loss_weight > 0 adds the CPC loss) or None.
    att_implementation: "auto", "full" or "sparse".
    use_one_hot_embeddings: TPU embedding lookups.
    compute_dtype: as build_model's (--precision=bf16; None: float32).

  Returns:
    model_fn(features, is_training) -> (loss, {name: Tensor [batch, ...]}: what
    pretraining_utils.engine_metrics reads: the MLM per-prediction losses, predictions, ids and
    weights (inside CPC's masked sentences 0), and with CPC cpc_example_loss, cpc_correct,
    cpc_weights).
  """
  def model_fn(features, is_training):
    cpc_out = None
    if cpc_options is not None and cpc_options.loss_weight > 0:
      loss, example_loss, log_probs, cpc_out = build_model_with_cpc(
          config, features, is_training, cpc_options, cpc_seed(features, is_training),
          use_one_hot_embeddings=use_one_hot_embeddings, att_implementation=att_implementation,
          compute_dtype=compute_dtype)
      weights = cpc_out["masked_lm_weights"]
    else:
      loss, example_loss, log_probs = build_model(
          config, features, is_training, use_one_hot_embeddings=use_one_hot_embeddings,
          att_implementation=att_implementation, compute_dtype=compute_dtype)
      weights = features["masked_lm_weights"]
    batch_shape = tf.shape(features["masked_lm_ids"])
    values = {
        "masked_lm_example_loss": tf.reshape(example_loss, batch_shape),
        "masked_lm_predictions": tf.reshape(
            tf.argmax(log_probs, axis=-1, output_type=tf.int32), batch_shape),
        "masked_lm_ids": features["masked_lm_ids"],
        "masked_lm_weights": tf.reshape(weights, batch_shape),
    }
    if cpc_out is not None:
      values.update((name, cpc_out[name])
                    for name in ("cpc_example_loss", "cpc_correct", "cpc_weights"))
    return loss, values
  return model_fn


def variable_shapes(config, max_seq_length, max_global_seq_length, att_implementation="auto"):
  """{variable name: shape} of the model and head this job builds (nothing is computed)."""
  with tf.Graph().as_default():
    features = etc_estimator.placeholder_features(
        config, max_seq_length, max_global_seq_length,
        extra={"masked_lm_positions": (tf.int32, [1, 1]), "masked_lm_ids": (tf.int32, [1, 1]),
               "masked_lm_weights": (tf.float32, [1, 1])})
    build_model(config, features, False, att_implementation=att_implementation)
    return {v.op.name: v.shape.as_list() for v in tf1.global_variables()}


def _check_flags():
  if not FLAGS.do_train and not FLAGS.do_eval:
    common.fail("at least one of --do_train or --do_eval must be true")
  for name in ("etc_config_file", "input_file", "output_dir"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  for name in ("max_seq_length", "max_global_seq_length", "max_predictions_per_seq",
               "train_batch_size", "eval_batch_size", "num_train_steps",
               "gradient_accumulation_steps"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s must be >= 1, got %d" % (name, getattr(FLAGS, name)))
  if FLAGS.max_eval_steps is not None and FLAGS.max_eval_steps < 1:
    common.fail("--max_eval_steps must be >= 1, got %d" % FLAGS.max_eval_steps)
  if FLAGS.num_warmup_steps is not None and not (
      0 <= FLAGS.num_warmup_steps <= FLAGS.num_train_steps):
    common.fail("--num_warmup_steps=%d must be in [0, --num_train_steps=%d]" %
                (FLAGS.num_warmup_steps, FLAGS.num_train_steps))


def data_mask_token_id(input_files):
  """The [MASK] id recorded in the summaries beside `input_files`, or None if none records it.

  Args:
    input_files: list of TFRecord paths (etc_model.create_pretraining_data's --output_file).

  Returns:
    int or None; two different ids among the summaries is a one-line error.
  """
  found = {}
  for path in input_files:
    summary_path = text_input.summary_path_for(path)
    if not tf.io.gfile.exists(summary_path):
      continue
    with tf.io.gfile.GFile(summary_path) as f:
      mask_id = json.load(f).get("mask_token_id")
    if mask_id is not None:
      found.setdefault(int(mask_id), summary_path)
  if len(found) > 1:
    common.fail("--input_file: the data's summaries record different [MASK] ids (%s): records "
                "made with different vocabularies" % ", ".join(
                    "%d in %s" % item for item in sorted(found.items())))
  return next(iter(found), None)


def cpc_options_from_flags(flag_values, vocab_size, data_mask_id=None):
  """The CpcOptions of the --cpc_* flags (one-line errors), or None when CPC is off.

  Args:
    flag_values: FLAGS (cpc_loss_weight, cpc_sentence_mask_rate, cpc_max_sentences_per_seq,
      cpc_max_sentence_length, cpc_mask_token_id, max_seq_length, max_global_seq_length); the
      two maxima None: DEFAULT_CPC_MAX_SENTENCES / _SENTENCE_LENGTH, at most G / L.
    vocab_size: the model's vocab_size (the mask id must be below it).
    data_mask_id: the [MASK] id the data's summary records (data_mask_token_id), or None.

  Returns:
    CpcOptions, or None for --cpc_loss_weight=0.
  """
  weight = flag_values.cpc_loss_weight
  if not weight >= 0.0 or weight == float("inf"):
    common.fail("--cpc_loss_weight=%s: must be a finite number >= 0 (0: no CPC loss)" % weight)
  if weight == 0.0:
    return None
  rate = flag_values.cpc_sentence_mask_rate
  if not 0.0 < rate <= 1.0:
    common.fail("--cpc_sentence_mask_rate=%s: must be in (0, 1]" % rate)
  sentences = flag_values.cpc_max_sentences_per_seq
  if sentences is None:  # each masked sentence needs a global token's slot
    sentences = min(DEFAULT_CPC_MAX_SENTENCES, flag_values.max_global_seq_length)
  if not 1 <= sentences <= flag_values.max_global_seq_length:
    common.fail("--cpc_max_sentences_per_seq=%d: must be in [1, --max_global_seq_length=%d]" %
                (sentences, flag_values.max_global_seq_length))
  length = flag_values.cpc_max_sentence_length
  if length is None:
    length = min(DEFAULT_CPC_MAX_SENTENCE_LENGTH, flag_values.max_seq_length)
  if not 1 <= length <= flag_values.max_seq_length:
    common.fail("--cpc_max_sentence_length=%d: must be in [1, --max_seq_length=%d]" %
                (length, flag_values.max_seq_length))
  mask_id = flag_values.cpc_mask_token_id
  if mask_id is None:
    if data_mask_id is None:
      common.fail("--cpc_mask_token_id: not given, and no summary beside --input_file records "
                  "the data's [MASK] id; pass the [MASK] id of the data's vocabulary")
    mask_id = data_mask_id
  elif data_mask_id is not None and mask_id != data_mask_id:
    common.fail("--cpc_mask_token_id=%d: the data's summary records [MASK] = %d (its "
                "vocabulary's); leave the flag out" % (mask_id, data_mask_id))
  if not 0 <= mask_id < vocab_size:
    common.fail("--cpc_mask_token_id=%d: must be a token id in [0, vocab_size=%d)" %
                (mask_id, vocab_size))
  return CpcOptions(weight, rate, sentences, length, mask_id)


def _expected_lengths(max_seq_length, max_global_seq_length, max_predictions_per_seq):
  """{feature: (length, what sets it)} of the ETC pre-training records (check_tfrecord_lengths).

  Args:
    max_seq_length: --max_seq_length (the long input).
    max_global_seq_length: --max_global_seq_length.
    max_predictions_per_seq: --max_predictions_per_seq.

  Returns:
    dict.
  """
  long_flag = "--max_seq_length=%d" % max_seq_length
  global_flag = "--max_global_seq_length=%d" % max_global_seq_length
  pred_flag = "--max_predictions_per_seq=%d" % max_predictions_per_seq
  expected = {name: (max_seq_length, long_flag) for name in etc_records.LONG_FEATURES}
  expected.update({name: (max_global_seq_length, global_flag)
                   for name in etc_records.GLOBAL_FEATURES})
  expected.update({name: (max_predictions_per_seq, pred_flag)
                   for name in etc_records.PREDICTION_FEATURES})
  return expected


def _check_vocab_ids(input_files, config):
  """One line when the records hold token ids >= the config's vocab_size (first records)."""
  etc_estimator.check_vocab_ids(input_files, config,
                                ("token_ids", "global_token_ids", "masked_lm_ids"))


def _check_engine_flags():
  """One-line errors for the device, precision and distribution flags: on the TF2 engine those
  only the Estimator implements (tf2_training.check_flags), on both the combinations
  estimator_utils refuses."""
  if not estimator_utils.has_estimator():
    tf2_training.check_flags(FLAGS, "-m " + SCRIPT, precisions=tf2_training.ENGINE_PRECISIONS,
                             xla=True, multi_worker=True)
  estimator_utils.validate_estimator_flags(FLAGS)
  estimator_utils.check_supported(FLAGS, SUPPORTED_MODEL_FN_FLAGS, script=SCRIPT)


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  _check_flags()
  _check_engine_flags()
  # The TF2 engine's strategy, before any TensorFlow operation runs (a multi-worker one must).
  strategy = None if estimator_utils.has_estimator() else tf2_training.command_strategy(FLAGS)
  tf2_training.check_multi_worker_job(strategy, FLAGS.do_train)
  # --etc_config_file with the --residual_attention override, validated (one-line errors).
  config = etc_estimator.load_config(FLAGS.etc_config_file, FLAGS.residual_attention,
                                     FLAGS.max_seq_length)
  input_files = common.expand_input_files(FLAGS.input_file, "input_file")
  cpc_options = cpc_options_from_flags(
      FLAGS, config.vocab_size,
      data_mask_token_id(input_files) if FLAGS.cpc_loss_weight else None)
  expected_lengths = _expected_lengths(FLAGS.max_seq_length, FLAGS.max_global_seq_length,
                                       FLAGS.max_predictions_per_seq)
  estimator_utils.check_tfrecord_lengths(input_files, expected_lengths, "input_file")
  eval_files = input_files
  if FLAGS.eval_input_file:
    eval_files = common.expand_input_files(FLAGS.eval_input_file, "eval_input_file")
    estimator_utils.check_tfrecord_lengths(eval_files, expected_lengths, "eval_input_file")
  common.check_output_dir(FLAGS.output_dir)
  _check_vocab_ids(input_files + (eval_files if eval_files is not input_files else []), config)
  label = pretraining_utils.task_label()
  lock = common.OutputDirLock(FLAGS.output_dir, label=label).acquire()
  # Compared before anything is written there: a resume with another model is one line.
  # A checkpoint made for initialising (a lifted one: no optimizer slots) too.
  resume_step = etc_estimator.check_resume(
      FLAGS.output_dir, lambda: variable_shapes(config, FLAGS.max_seq_length,
                                                FLAGS.max_global_seq_length,
                                                FLAGS.att_implementation),
      restore=estimator_utils.restore_mode(FLAGS.do_train))
  if FLAGS.do_eval and not FLAGS.do_train:
    checkpoint_utils.require_trained_weights(
        "--do_eval", [("output_dir", FLAGS.output_dir), ("init_checkpoint", FLAGS.init_checkpoint)],
        allow_random_eval=FLAGS.allow_random_eval, give_flag="init_checkpoint")
  if pretraining_utils.is_chief():  # (every worker of a multi-worker job has the same config)
    model_config.save_config(config, FLAGS.output_dir, name=CONFIG_NAME)
  tf1.logging.info("*** Model: ETC %d layers, hidden %d, local_radius %d, residual_attention=%s; "
                   "L=%d, G=%d", config.num_hidden_layers, config.hidden_size,
                   config.local_radius, config.residual_attention, FLAGS.max_seq_length,
                   FLAGS.max_global_seq_length)

  total_steps = FLAGS.num_train_steps * FLAGS.gradient_accumulation_steps
  num_warmup_steps = FLAGS.num_warmup_steps
  if num_warmup_steps is None:
    num_warmup_steps = pretraining_utils.default_warmup_steps(FLAGS.num_train_steps)
    if FLAGS.do_train:
      tf1.logging.info("Warm-up: %d of %d steps (--num_warmup_steps default: min(%d, a tenth))",
                       num_warmup_steps, FLAGS.num_train_steps,
                       pretraining_utils.OFFICIAL_WARMUP_STEPS)
  summary = {"residual_attention": config.residual_attention,
             "att_implementation": FLAGS.att_implementation, "precision": FLAGS.precision,
             "use_xla": FLAGS.use_xla,
             "fused_optimizer": FLAGS.fused_optimizer, "max_seq_length": FLAGS.max_seq_length,
             "max_global_seq_length": FLAGS.max_global_seq_length}
  if cpc_options is not None:
    summary["cpc"] = dict(cpc_options._asdict())
  if not estimator_utils.has_estimator():
    _run_engine(FLAGS, strategy, config, cpc_options, input_files, eval_files, resume_step,
                num_warmup_steps, label, summary)
    lock.release()
    return
  digest_hook = pretraining_utils.WeightsDigestHook()
  progress_hook = estimator_utils.ProgressHook(total_steps, FLAGS.train_batch_size)
  model_fn = model_fn_builder(
      config=config, init_checkpoint=FLAGS.init_checkpoint, learning_rate=FLAGS.learning_rate,
      allow_unmatched_init=FLAGS.allow_unmatched_init,
      num_train_steps=FLAGS.num_train_steps, num_warmup_steps=num_warmup_steps,
      use_tpu=FLAGS.use_tpu, gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
      total_steps=total_steps, train_batch_size=FLAGS.train_batch_size,
      extra_hooks=[digest_hook], progress_hook=progress_hook,
      att_implementation=FLAGS.att_implementation, cpc_options=cpc_options,
      **estimator_utils.precision_kwargs(FLAGS))
  estimator = estimator_utils.make_estimator(
      model_fn, FLAGS, FLAGS.output_dir, train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=FLAGS.eval_batch_size, supported_flags=SUPPORTED_MODEL_FN_FLAGS)

  if FLAGS.do_train:
    train_input_fn = input_fn_builder(
        input_files, config, FLAGS.max_seq_length, FLAGS.max_global_seq_length,
        FLAGS.max_predictions_per_seq, is_training=True, seed=FLAGS.seed,
        skip_batches=estimator_utils.resume_skip_batches(resume_step, FLAGS))
    if resume_step:
      tf1.logging.info("Resuming from step %d of %d in %s", resume_step, total_steps,
                       FLAGS.output_dir)
    start = time.time()
    # The top-level job's loop (train_and_evaluate under multi_worker_mirrored).
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
    steps_done = end_step - (resume_step or 0)
    summary.update({
        "global_step": end_step, "num_train_steps": total_steps,
        "resumed_from_step": resume_step or 0,
        "train_seconds": round(elapsed, 1),
        "train_steps_per_sec": round(steps_done / elapsed, 3) if elapsed > 0 else None,
        "steady_steps_per_sec": (round(progress_hook.last_rate, 3)
                                 if progress_hook.last_rate else None),
        "checkpoint": tf1.train.latest_checkpoint(FLAGS.output_dir),
        "weights_digest": digest_hook.digest,
    })
    common.write_json_atomic(
        os.path.join(FLAGS.output_dir, "train_summary_%s.json" % label), summary)
    tf1.logging.info("Training done: %s", json.dumps(summary, sort_keys=True))

  if FLAGS.do_eval and pretraining_utils.is_chief():
    # By default every record once, in full batches (ETC's side inputs take static shapes);
    # --max_eval_steps: that many batches of the repeated records.
    eval_input_fn = input_fn_builder(
        eval_files, config, FLAGS.max_seq_length, FLAGS.max_global_seq_length,
        FLAGS.max_predictions_per_seq, is_training=False,
        repeat=FLAGS.max_eval_steps is not None)
    result = estimator.evaluate(input_fn=eval_input_fn, steps=FLAGS.max_eval_steps)
    common.STOP_SIGNALS.exit_if_stopped("evaluation was not written; rerun to evaluate")
    result.update(pretraining_utils.eval_counts(eval_files, FLAGS.eval_batch_size,
                                                FLAGS.max_eval_steps, True))
    tf1.logging.info("Evaluated %d examples (%d records in --eval_input_file)",
                     result["eval_examples"], result["eval_records"])
    estimator_utils.write_eval_results(FLAGS.output_dir, result)
  lock.release()


def _run_engine(flag_values, strategy, config, cpc_options, input_files, eval_files, resume_step,
                num_warmup_steps, label, summary):
  """--do_train / --do_eval with tf2_training.Engine (a TensorFlow without the Estimator): the
  checkpoints, train_summary_<label>.json and eval_results of the Estimator's path.

  Args:
    flag_values: the parsed flags, as main read and checked them.
    strategy: tf2_training.command_strategy's strategy.
    config: the job's EtcConfig.
    cpc_options: CpcOptions or None.
    input_files: the training TFRecords.
    eval_files: the evaluation TFRecords.
    resume_step: the global step of the checkpoint the job resumes from (0 for none).
    num_warmup_steps: the warm-up, resolved.
    label: the train_summary file's label.
    summary: the train summary's settings (completed with the run's figures).
  """
  engine = tf2_training.Engine(
      engine_model_fn(config, cpc_options, flag_values.att_implementation,
                      tf2_training.is_tpu_strategy(strategy),
                      modeling.get_compute_dtype(flag_values.precision)),
      flag_values.output_dir, strategy=strategy, train_batch_size=flag_values.train_batch_size,
      learning_rate=flag_values.learning_rate, num_train_steps=flag_values.num_train_steps,
      num_warmup_steps=num_warmup_steps, init_checkpoint=flag_values.init_checkpoint,
      allow_unmatched_init=flag_values.allow_unmatched_init,
      encoder_scopes=checkpoint_utils.ENCODER_SCOPES["etc"], seed=flag_values.seed,
      save_checkpoints_steps=flag_values.save_checkpoints_steps,
      keep_checkpoint_max=flag_values.keep_checkpoint_max,
      log_every_n_steps=flag_values.log_every_n_steps,
      fused_optimizer=flag_values.fused_optimizer,
      gradient_accumulation_steps=flag_values.gradient_accumulation_steps,
      use_xla=flag_values.use_xla,
      loss_scale=estimator_utils.loss_scale_for(flag_values.precision))
  # The global step counts micro-batches, as the Estimator's.
  total_steps = flag_values.num_train_steps * flag_values.gradient_accumulation_steps
  if flag_values.do_train:
    if resume_step:
      tf1.logging.info("Resuming from step %d of %d in %s", resume_step, total_steps,
                       flag_values.output_dir)
    start = time.time()
    result = engine.train(
        lambda skip_batches: input_fn_builder(
            input_files, config, flag_values.max_seq_length, flag_values.max_global_seq_length,
            flag_values.max_predictions_per_seq, is_training=True, seed=flag_values.seed,
            skip_batches=skip_batches), total_steps)
    common.STOP_SIGNALS.exit_if_stopped(
        "checkpoint saved at step %d of %d; rerun the same command to resume" %
        (result.global_step, total_steps))
    elapsed = time.time() - start
    steps_done = result.global_step - (resume_step or 0)
    summary.update({
        "global_step": result.global_step, "num_train_steps": total_steps,
        "resumed_from_step": resume_step or 0,
        "train_seconds": round(elapsed, 1),
        "train_steps_per_sec": round(steps_done / elapsed, 3) if elapsed > 0 else None,
        "steady_steps_per_sec": (round(result.steps_per_second, 3)
                                 if result.steps_per_second else None),
        "checkpoint": tf1.train.latest_checkpoint(flag_values.output_dir),
        "weights_digest": pretraining_utils.weights_digest(engine.variable_values()),
    })
    common.write_json_atomic(
        os.path.join(flag_values.output_dir, "train_summary_%s.json" % label), summary)
    tf1.logging.info("Training done: %s", json.dumps(summary, sort_keys=True))
  # A multi-worker job evaluates on its chief, as the Estimator's does.
  if flag_values.do_eval and engine.is_chief:
    # As the Estimator's: every record once in full batches by default (the side inputs take
    # static shapes); --max_eval_steps: that many batches of the repeated records.
    eval_input_fn = input_fn_builder(
        eval_files, config, flag_values.max_seq_length, flag_values.max_global_seq_length,
        flag_values.max_predictions_per_seq, is_training=False,
        repeat=flag_values.max_eval_steps is not None)
    pretraining_utils.evaluate_with_engine(
        engine, eval_input_fn, eval_files, flag_values.eval_batch_size,
        flag_values.max_eval_steps, flag_values.output_dir, drop_remainder=True)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
