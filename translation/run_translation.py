# coding=utf-8
r"""Trains, evaluates, decodes and scores the translation RealFormer (nmt_modeling.py).

    python -m translation.create_translation_data ...  # text -> TFRecords (+ joint SentencePiece)
    python -m translation.run_translation --do_train --train_file=train.tfrecord \
        --spm_model=spm.model --config_file=configs/nmt_multi30k.json --output_dir=out/nmt
    python average_checkpoints.py --checkpoint_dir=out/nmt --num_last=5 --output_dir=out/avg
    python -m translation.run_translation --do_predict --output_dir=out/nmt --checkpoint=out/avg \
        --spm_model=spm.model --predict_source_file=test.en --predict_reference_file=test.de

Training runs on Estimator / TPUEstimator (estimator_utils.make_estimator: the same
--distribution_strategy and TPU flags as run_pretraining) on TensorFlow 2.15, and on a
TensorFlow without the Estimator (>= 2.16) on realformer_tf/tf2_training.Engine over the same
graph (ENGINE_TF2: the same checkpoints, results and flags but the Estimator-only ones,
tf2_training.check_flags, --use_tpu among them; several workers train on both), with
token-budget batches (translation_input.py), label smoothing, Adam (0.9, 0.98), warm-up then
linear decay (the paper) or inverse square root (ADMIN), gradient accumulation, a checkpoint per
epoch, exact resume after a kill, and progress in target tokens/s with the time remaining. With
--layer_norm_type=admin a new job first profiles the initial model on a training batch
(ADMIN's initialisation) and keeps the profile in output_dir/admin_profile.json.

--do_eval scores the dev TFRecords (loss and perplexity per target token). --do_predict decodes
raw source sentences with batched beam search (or greedy, --beam_size=1), writes detokenised
translations, and with references bleu.json (sacreBLEU BLEU / chrF and the tokenised,
compound-split BLEU of the NMT literature). --export_dir writes a SavedModel that takes raw
source strings and returns translations. Sources longer than --max_source_length ids are cut,
counted and logged.

Evaluation, decoding and export read --checkpoint, else the output_dir's latest checkpoint, else
--init_checkpoint; with none of them (or a checkpoint of another model) the job stops with one
line before any work, unless --allow_random_eval (evaluation and decoding only). Results record
the checkpoint and its global step (eval_results, bleu.json, translations.txt.checkpoint.json).
"""

import collections
import gzip
import json
import os
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import export_utils
from realformer_tf import model_config
from realformer_tf import tf2_training
import optimization
from translation import decoding
from translation import nmt_modeling
from translation import translation_input
from translation import translation_metrics
from translation import translation_records
from translation import translation_serving

tf1 = tf.compat.v1
FLAGS = flags.FLAGS

CONFIG_NAME = decoding.CONFIG_NAME  # nmt_config.json
PROFILE_NAME = "admin_profile.json"
SUMMARY_NAME = "train_summary.json"
BLEU_NAME = "bleu.json"
# An --init_checkpoint initialises the whole encoder-decoder (e.g. an averaged checkpoint).
ENCODER_SCOPES = checkpoint_utils.ENCODER_SCOPES["translation"]
TRANSLATIONS_NAME = "translations.txt"
# Decoding cuts longer sources (--max_source_length): twice training's default --max_length.
DEFAULT_MAX_SOURCE_LENGTH = decoding.DEFAULT_MAX_SOURCE_LENGTH
# Shared flags this model_fn does not implement (estimator_utils.check_supported refuses them).
SUPPORTED_MODEL_FN_FLAGS = ()
SCRIPT = "translation.run_translation"

# The training engines: the Estimator (TensorFlow <= 2.15) and, on a TensorFlow without it,
# tf2_training.Engine (tf.distribute over model_fn_builder's graph code).
ENGINE_ESTIMATOR = "estimator"
ENGINE_TF2 = "tf2"


# The decoding graph and the checkpoint checks live in translation/decoding.py (shared with
# export_translation); the names stay importable from here.
define_decoding_flags = decoding.define_decoding_flags
model_variable_specs = decoding.model_variable_specs
check_checkpoint = decoding.check_checkpoint
translate_graph = decoding.translate_graph
encode_sources = decoding.encode_sources


def define_flags():
  """Defines the flags (called under __main__ so that every module imports together)."""
  estimator_utils.define_estimator_flags()
  flags.DEFINE_string("config_file", None,
                      "NmtConfig JSON (docs/translation.md); a job with a checkpoint reuses the "
                      "output_dir's nmt_config.json.")
  flags.DEFINE_enum("residual_attention", None, ["none", "sum", "mean"],
                    "Overrides residual_attention of --config_file (all three chains).")
  flags.DEFINE_enum("layer_norm_type", None, list(nmt_modeling.LAYER_NORM_TYPES),
                    "Overrides layer_norm_type of --config_file (post | pre | admin).")
  flags.DEFINE_string("spm_model", None, "The joint SentencePiece model of the data.")
  flags.DEFINE_string("train_file", None, "Training TFRecords (create_translation_data.py; "
                      "comma-separated globs).")
  flags.DEFINE_string("dev_file", None, "Dev TFRecords for --do_eval.")
  flags.DEFINE_string("output_dir", None, "Checkpoints, config, profile and results.")
  flags.DEFINE_string("init_checkpoint", None, "Initial weights (e.g. an averaged checkpoint).")
  flags.DEFINE_string("checkpoint", None, "Checkpoint (prefix or directory) to evaluate, decode "
                      "and export (default: the latest in --output_dir).")
  flags.DEFINE_bool("do_train", False, "Train.")
  flags.DEFINE_bool("do_eval", False, "Loss and perplexity on --dev_file.")
  flags.DEFINE_bool("do_predict", False, "Translate --predict_source_file.")
  flags.DEFINE_integer("max_tokens", 4096, "Token budget of a batch (batch * longest length).")
  flags.DEFINE_integer("max_length", 128, "Longest source / target (ids with eos) in training.")
  flags.DEFINE_integer("num_train_steps", None, "Optimizer updates (or --num_train_epochs).")
  flags.DEFINE_float("num_train_epochs", None, "Epochs over --train_file (the steps are counted "
                     "with the batching of the first epoch).")
  flags.DEFINE_float("learning_rate", 5e-4, "Peak learning rate.")
  flags.DEFINE_integer("warmup_steps", 4000, "Warm-up updates.")
  flags.DEFINE_enum("lr_schedule", "linear", list(optimization.LEARNING_RATE_SCHEDULES),
                    "After warm-up: linear decay to 0 (the paper) or inverse square root (ADMIN).")
  flags.DEFINE_float("adam_beta2", 0.98, "Adam's second-moment decay.")
  flags.DEFINE_float("adam_epsilon", 1e-8, "Adam's epsilon.")
  flags.DEFINE_float("weight_decay", 0.0, "Decoupled weight decay.")
  flags.DEFINE_float("clip_norm", 0.0, "Global-norm gradient clipping (0: none).")
  flags.DEFINE_float("label_smoothing", 0.1, "Label smoothing epsilon.")
  flags.DEFINE_integer("gradient_accumulation_steps", 1, "Batches averaged per update.")
  flags.DEFINE_bool("save_every_epoch", True, "With --num_train_epochs: a checkpoint at the end "
                    "of each epoch (unless --save_checkpoints_steps is given).")
  flags.DEFINE_string("admin_profile", None, "ADMIN profile to initialise omega from (default: "
                      "output_dir/admin_profile.json, made on the first training batch).")
  flags.DEFINE_string("predict_source_file", None, "Raw source sentences, one a line (gzip ok).")
  flags.DEFINE_string("predict_reference_file", None, "Raw references, line-aligned (bleu.json).")
  flags.DEFINE_string("predict_output_file", None,
                      "Translations (default: output_dir/translations.txt).")
  flags.DEFINE_string("target_language", "de", "Target language code (Moses tokenizer of the "
                      "tokenised BLEU).")
  flags.DEFINE_integer("predict_batch_size", 32, "Sentences per decoding batch.")
  define_decoding_flags()
  flags.DEFINE_string("export_dir", None, "Write a raw-text SavedModel here.")
  flags.DEFINE_bool("overwrite", False, "Replace an existing export of ours at --export_dir.")


# ----------------------------------------------------------------------------- config
def load_nmt_config(output_dir, config_file, overrides):
  """The job's NmtConfig: the output_dir's saved config if there is a checkpoint, else the file.

  Args:
    output_dir: the job's directory.
    config_file: --config_file (may be None when output_dir has a config).
    overrides: dict field -> value (None values ignored).

  Returns:
    nmt_modeling.NmtConfig.
  """
  saved = os.path.join(output_dir, CONFIG_NAME) if output_dir else None
  has_checkpoint = bool(output_dir and tf.io.gfile.isdir(output_dir)
                        and tf1.train.latest_checkpoint(output_dir))
  path, flag = model_config.shipped_config_path(config_file), "config_file"
  if not path:
    if not (saved and tf.io.gfile.exists(saved)):
      common.fail("--config_file is required (no %s in --output_dir)" % CONFIG_NAME)
    path, flag = saved, "output_dir"
  common.require_file(path, flag)
  try:
    config = nmt_modeling.NmtConfig.from_json_file(path)
    for key, value in overrides.items():
      if value is not None:
        setattr(config, key, value)
    config.validate(path)
  except ValueError as e:
    common.fail(str(e))
  if has_checkpoint and saved and tf.io.gfile.exists(saved) and path != saved:
    previous = nmt_modeling.NmtConfig.from_json_file(saved).to_dict()
    changed = [k for k in nmt_modeling.PROFILE_CONFIG_FIELDS
               if previous.get(k) != config.to_dict().get(k)]
    if changed:
      common.fail("--output_dir=%s: holds a model with %s; this job asks for %s (use a new "
                  "--output_dir)" % (output_dir,
                                     ", ".join("%s=%r" % (k, previous[k]) for k in changed),
                                     ", ".join("%s=%r" % (k, getattr(config, k))
                                               for k in changed)))
  return config


# ----------------------------------------------------------------------------- checkpoints
def check_init_checkpoint(config, init_checkpoint, allow_unmatched=False):
  """Before any work: one line when --init_checkpoint cannot initialise the model.

  The checks of estimator_utils.init_checkpoint_scaffold_fn (the one model_fn runs), on the
  model built in a scratch graph: shapes and dtypes, and a checkpoint lacking any of the
  encoder-decoder's variables (another model's, e.g. a BERT checkpoint, or another config's)
  unless allow_unmatched (--allow_unmatched_init).
  """
  with tf.Graph().as_default():
    ids = tf1.placeholder(tf.int32, [None, None])
    nmt_modeling.NmtModel(config, True, ids, ids)
    estimator_utils.init_checkpoint_scaffold_fn(init_checkpoint, use_tpu=False,
                                                encoder_scopes=ENCODER_SCOPES,
                                                allow_unmatched=allow_unmatched)


# ----------------------------------------------------------------------------- model_fn
def model_fn_builder(config, init_checkpoint=None, admin_profile=None, learning_rate=5e-4,
                     num_train_steps=None, num_warmup_steps=0, lr_schedule="linear",
                     label_smoothing=0.1, gradient_accumulation_steps=1, clip_norm=0.0,
                     adam_beta2=0.98, adam_epsilon=1e-8, weight_decay=0.0, use_tpu=False,
                     beam_size=4, length_penalty=0.6, max_decode_length=128,
                     allow_unmatched_init=False):
  """The model_fn for (TPU)Estimator: TRAIN, EVAL (loss, perplexity) and PREDICT (beam search).

  Features: "source_ids" int32 [batch, src]; TRAIN / EVAL also "target_input_ids" and
  "target_ids" int32 [batch, tgt]; PREDICT passes "example_index" int32 [batch] through.
  PREDICT returns {"ids": int32 [batch, max_decode_length] (best hypothesis, 0 after eos),
  "length", "score", "example_index"}.
  """

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    source_ids = features["source_ids"]
    # init_checkpoint_scaffold_fn maps the checkpoint onto the variables that exist when it is
    # called: always after the model is built (before it, it would load nothing).
    if mode == tf1.estimator.ModeKeys.PREDICT:
      predictions = translate_graph(config, source_ids, beam_size, length_penalty,
                                    max_decode_length)
      predictions["example_index"] = features["example_index"]
      scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(
          init_checkpoint, use_tpu, encoder_scopes=ENCODER_SCOPES,
          allow_unmatched=allow_unmatched_init)
      return tf1.estimator.tpu.TPUEstimatorSpec(mode=mode, predictions=predictions,
                                                scaffold_fn=scaffold_fn)
    is_training = mode == tf1.estimator.ModeKeys.TRAIN
    model = nmt_modeling.NmtModel(config, is_training, source_ids,
                                  features["target_input_ids"], admin_profile=admin_profile)
    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(
        init_checkpoint, use_tpu, encoder_scopes=ENCODER_SCOPES,
        allow_unmatched=allow_unmatched_init)
    loss, nll_sum, num_tokens = nmt_modeling.label_smoothed_loss(
        model.logits, features["target_ids"], label_smoothing if is_training else 0.0)
    if is_training:
      tf.identity(num_tokens, name="num_target_tokens")
      train_op = estimator_utils.create_train_op(
          loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
          gradient_accumulation_steps=gradient_accumulation_steps,
          clip_norm=clip_norm if clip_norm > 0 else 1e30, schedule=lr_schedule,
          beta_2=adam_beta2, epsilon=adam_epsilon, weight_decay_rate=weight_decay)
      return tf1.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op,
                                                scaffold_fn=scaffold_fn)

    def metric_fn(nll_sum, num_tokens):
      per_token = nll_sum / tf.maximum(num_tokens, 1.0)
      mean_nll = tf1.metrics.mean(per_token, weights=num_tokens)
      total = tf1.metrics.mean(num_tokens)
      return {"eval_nll_per_token": mean_nll, "eval_mean_batch_tokens": total}

    return tf1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=loss, scaffold_fn=scaffold_fn,
        eval_metrics=(metric_fn, [tf.reshape(nll_sum, [1]), tf.reshape(num_tokens, [1])]))

  return model_fn


def engine_model_fn(config, admin_profile=None, label_smoothing=0.1, beam_size=4,
                    length_penalty=0.6, max_decode_length=128):
  """model_fn_builder's graph as a tf2_training.Engine model function.

  Args:
    config: NmtConfig.
    admin_profile: ADMIN's omega initial values (the training model's), or None.
    label_smoothing: the training loss's epsilon (evaluation: none).
    beam_size, length_penalty, max_decode_length: decoding (translate_graph).

  Returns:
    model_fn(features, is_training) -> (loss, predictions). Features with "target_ids"
    (training, evaluation): the label-smoothed loss (training) or the mean nll per target token,
    and {"nll_sum": float32 [1], "num_tokens": float32 [1]} (what model_fn_builder's metric_fn
    sums up). Features without (decoding: "source_ids", "example_index"): no loss and
    model_fn_builder's PREDICT outputs ids [batch, max_decode_length], length, score and
    example_index [batch].
  """
  def model_fn(features, is_training):
    source_ids = features["source_ids"]
    if "target_ids" not in features:
      predictions = translate_graph(config, source_ids, beam_size, length_penalty,
                                    max_decode_length)
      predictions["example_index"] = features["example_index"]
      return None, predictions
    model = nmt_modeling.NmtModel(config, is_training, source_ids,
                                  features["target_input_ids"], admin_profile=admin_profile)
    loss, nll_sum, num_tokens = nmt_modeling.label_smoothed_loss(
        model.logits, features["target_ids"], label_smoothing if is_training else 0.0)
    return loss, {"nll_sum": tf.reshape(nll_sum, [1]), "num_tokens": tf.reshape(num_tokens, [1])}

  return model_fn


def mean_nll_per_token(nll_sums, token_counts):
  """The eval_nll_per_token of model_fn_builder's metric_fn, from its per-batch values.

  tf.compat.v1.metrics.mean(nll_sum / max(num_tokens, 1), weights=num_tokens) in float32 NumPy,
  batch by batch as the metric's total and count variables accumulate.

  Args:
    nll_sums: per batch, the float32 sum of the target tokens' nll.
    token_counts: per batch, the float32 number of target tokens.

  Returns:
    float: the mean nll per target token (0.0 without any token, as the metric's div_no_nan).
  """
  total, count = np.float32(0.0), np.float32(0.0)
  for nll_sum, num_tokens in zip(nll_sums, token_counts):
    nll_sum, num_tokens = np.float32(nll_sum), np.float32(num_tokens)
    per_token = np.float32(nll_sum / np.maximum(num_tokens, np.float32(1.0)))
    total = np.float32(total + np.float32(per_token * num_tokens))
    count = np.float32(count + num_tokens)
  return float(total / count) if count else 0.0


# ----------------------------------------------------------------------------- ADMIN profile
def make_admin_profile(config, input_fn, seed, path):
  """ADMIN's initialisation: profiles the seed's initial model on the first training batch.

  The model's variables are name-seeded (nmt_modeling), so this graph starts from exactly the
  weights the Estimator's training graph (same graph seed) will start from.

  Args:
    config: NmtConfig (layer_norm_type "admin").
    input_fn: the training input_fn.
    seed: the graph seed of the training job (--seed).
    path: where to write the profile JSON (atomically).

  Returns:
    {"encoder": [float], "decoder": [float]}.
  """
  with tf.Graph().as_default():
    tf1.set_random_seed(seed)
    features = tf1.data.make_one_shot_iterator(input_fn({})).get_next()
    omegas = nmt_modeling.admin_profile_tensors(config, features["source_ids"],
                                                features["target_input_ids"])
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      values = session.run(omegas)
  document = nmt_modeling.profile_document(config, values, seed=seed)
  common.write_json_atomic(path, document)
  tf1.logging.info("ADMIN profile (encoder %s, decoder %s) written to %s",
                   " ".join("%.3f" % v for v in document["encoder"]),
                   " ".join("%.3f" % v for v in document["decoder"]), path)
  return {"encoder": document["encoder"], "decoder": document["decoder"]}


def resolve_admin_profile(settings, config, train_input_fn, resume_step):
  """The omega initial values of an ADMIN job (None for other layer-norm types).

  A given --admin_profile is checked against the config and seed; otherwise a new job profiles
  (make_admin_profile) and a resumed one rereads output_dir's profile (its omegas are in the
  checkpoint anyway). With --init_checkpoint the checkpoint's omegas are used.
  """
  if config.layer_norm_type != "admin" or settings.init_checkpoint:
    return None
  path = settings.admin_profile or os.path.join(settings.output_dir, PROFILE_NAME)
  if settings.admin_profile or tf.io.gfile.exists(path):
    common.require_file(path, "admin_profile")
    try:
      return nmt_modeling.read_admin_profile(path, config, seed=settings.seed)
    except ValueError as e:
      common.fail("--admin_profile=%s" % e if settings.admin_profile else str(e))
  if resume_step:
    tf1.logging.warning("%s is missing; the checkpoint's omegas are used", path)
    return None
  if train_input_fn is None:
    return None
  return make_admin_profile(config, train_input_fn, settings.seed, path)


# ----------------------------------------------------------------------------- training
class TokenProgressHook(tf1.train.SessionRunHook):
  """Logs steps/s, target tokens/s and time remaining (common.ProgressMeter)."""

  def __init__(self, total_steps, every_n_secs=10.0):
    self._meter = common.ProgressMeter(total_steps, unit="steps", min_interval_s=every_n_secs,
                                       log_fn=tf1.logging.info)
    self._total_steps = total_steps
    self._tokens = 0.0
    self._started = None
    self.tokens_per_second = None

  def begin(self):
    self._fetches = {"step": tf1.train.get_global_step()}
    try:
      self._fetches["tokens"] = tf1.get_default_graph().get_tensor_by_name(
          "num_target_tokens:0")
    except KeyError:
      # Under a tf.distribute strategy the tensor lives in a replica's scope: steps/s only.
      pass

  def before_run(self, run_context):
    return tf1.train.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    step = int(run_values.results["step"]) + 1
    if self._meter.start_done is None:
      # The first step includes graph warm-up: rates count from after it.
      self._meter.start(step)
      self._started = time.time()
      return
    extra = ""
    if "tokens" in run_values.results:
      self._tokens += float(run_values.results["tokens"])
      elapsed = max(time.time() - self._started, 1e-9)
      self.tokens_per_second = self._tokens / elapsed
      extra = "(%.0f target tokens/s)" % self.tokens_per_second
    self._meter.update(step, extra=extra, force=step >= self._total_steps,
                       prefix="train: step ")


def train(settings, config, train_files, resume_step):
  """Profiles (ADMIN), then trains to the target step; returns the train summary dict."""
  if settings.num_train_steps:
    num_train_steps = settings.num_train_steps
    epoch_batches = None
  else:
    epoch_batches = translation_input.count_epoch_batches(train_files, settings.max_tokens,
                                                          settings.max_length)
    num_train_steps = max(1, int(round(epoch_batches * settings.num_train_epochs
                                       / settings.gradient_accumulation_steps)))
    if settings.save_every_epoch and not settings.save_checkpoints_steps_given:
      # The estimators' RunConfig reads it from the flag values.
      settings.flag_values.save_checkpoints_steps = epoch_batches
    tf1.logging.info("One epoch = %d batches of <= %d tokens: %d updates for %g epochs",
                     epoch_batches, settings.max_tokens, num_train_steps, settings.num_train_epochs)
  total_global_steps = num_train_steps * settings.gradient_accumulation_steps
  profile_input_fn = translation_input.input_fn_builder(
      train_files, settings.max_tokens, settings.max_length, is_training=True, seed=settings.seed)
  admin_profile = resolve_admin_profile(settings, config, profile_input_fn, resume_step)
  with common.atomic_output(os.path.join(settings.output_dir, CONFIG_NAME)) as f:
    f.write(config.to_json_string())
  start = time.time()
  if settings.engine == ENGINE_TF2:
    tokens_per_second = _train_engine(settings, config, train_files, admin_profile,
                                      num_train_steps, total_global_steps)
  else:
    tokens_per_second = _train_estimator(settings, config, train_files, admin_profile,
                                         num_train_steps, resume_step)
  common.STOP_SIGNALS.exit_if_stopped()
  return {"num_train_steps": num_train_steps, "global_step_target": total_global_steps,
          "epoch_batches": epoch_batches, "train_seconds": round(time.time() - start, 1),
          "target_tokens_per_second": tokens_per_second,
          "global_step": estimator_utils.latest_global_step(settings.output_dir)}


def _train_estimator(settings, config, train_files, admin_profile, num_train_steps, resume_step):
  """Trains with the (TPU)Estimator to num_train_steps updates; returns the target tokens/s."""
  total_global_steps = num_train_steps * settings.gradient_accumulation_steps
  input_fn = translation_input.input_fn_builder(
      train_files, settings.max_tokens, settings.max_length, is_training=True, seed=settings.seed,
      use_tpu=settings.use_tpu,
      skip_batches=estimator_utils.resume_skip_batches(resume_step, settings.flag_values))
  model_fn = model_fn_builder(
      config, init_checkpoint=settings.init_checkpoint, admin_profile=admin_profile,
      allow_unmatched_init=settings.allow_unmatched_init,
      learning_rate=settings.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=settings.warmup_steps, lr_schedule=settings.lr_schedule,
      label_smoothing=settings.label_smoothing,
      gradient_accumulation_steps=settings.gradient_accumulation_steps,
      clip_norm=settings.clip_norm,
      adam_beta2=settings.adam_beta2, adam_epsilon=settings.adam_epsilon,
      weight_decay=settings.weight_decay, use_tpu=settings.use_tpu)
  batch_size = max(1, settings.max_tokens // settings.max_length)  # fixed-shape (TPU) batches only
  estimator = estimator_utils.make_estimator(model_fn, settings.flag_values, settings.output_dir,
                                             batch_size, supported_flags=SUPPORTED_MODEL_FN_FLAGS)
  hook = TokenProgressHook(total_global_steps)
  estimator.train(input_fn=input_fn, max_steps=total_global_steps,
                  hooks=[hook, estimator_utils.StopOnSignalHook()])
  return hook.tokens_per_second


def _train_engine(settings, config, train_files, admin_profile, num_train_steps,
                  total_global_steps):
  """Trains with tf2_training.Engine to num_train_steps updates, total_global_steps batches (it
  resumes from the latest checkpoint in output_dir itself, skipping the batches trained).

  Returns:
    None: the engine's progress line counts steps, not target tokens.
  """
  engine = _job_engine(settings, engine_model_fn(config, admin_profile, settings.label_smoothing),
                       strategy=settings.strategy, num_train_steps=num_train_steps)
  engine.train(lambda skip_batches: translation_input.input_fn_builder(
      train_files, settings.max_tokens, settings.max_length, is_training=True,
      seed=settings.seed, skip_batches=skip_batches), total_global_steps)
  return None


def _job_engine(settings, model_fn, strategy=None, num_train_steps=None):
  """A tf2_training.Engine over model_fn in --output_dir with the optimizer of model_fn_builder.

  Args:
    settings: JobSettings of job_settings.
    model_fn: engine_model_fn's model function.
    strategy: training's tf.distribute strategy (None: one device, as evaluation and decoding
      run).
    num_train_steps: the updates of a training job (None: evaluation, decoding); with
      --gradient_accumulation_steps N the global step counts N batches per update.

  Returns:
    tf2_training.Engine; it starts a training job from --init_checkpoint (evaluation and
    decoding read their checkpoint).
  """
  flag_values = settings.flag_values
  return tf2_training.Engine(
      model_fn, settings.model_dir, strategy=strategy,
      # Token-budget batches ignore the batch size: one batch per replica and step.
      train_batch_size=strategy.num_replicas_in_sync if strategy else 1, examples_per_step=False,
      learning_rate=settings.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=settings.warmup_steps,
      init_checkpoint=settings.init_checkpoint if num_train_steps else None,
      allow_unmatched_init=settings.allow_unmatched_init, encoder_scopes=ENCODER_SCOPES,
      seed=settings.seed, save_checkpoints_steps=flag_values.save_checkpoints_steps,
      keep_checkpoint_max=flag_values.keep_checkpoint_max,
      log_every_n_steps=flag_values.log_every_n_steps,
      gradient_accumulation_steps=settings.gradient_accumulation_steps,
      use_xla=flag_values.use_xla,
      beta_2=settings.adam_beta2, epsilon=settings.adam_epsilon,
      weight_decay_rate=settings.weight_decay,
      clip_norm=settings.clip_norm if settings.clip_norm > 0 else 1e30,
      schedule=settings.lr_schedule)


def evaluate(settings, config, checkpoint, dev_files):
  """Dev loss and perplexity per target token (no label smoothing) of `checkpoint`.

  Args:
    settings: JobSettings of job_settings.
    config: NmtConfig.
    checkpoint: checkpoint prefix, or None for randomly initialised weights (--allow_random_eval).
    dev_files: the dev TFRecords.

  Returns:
    dict: eval_nll_per_token, eval_perplexity, checkpoint (the prefix evaluated), global_step.
  """
  input_fn = translation_input.input_fn_builder(dev_files, settings.max_tokens, settings.max_length,
                                                is_training=False, use_tpu=settings.use_tpu)
  if settings.engine == ENGINE_TF2:
    # The per-batch sums of model_fn_builder's metric_fn, accumulated as its metric does.
    sums = [outputs for _, outputs in _job_engine(settings, engine_model_fn(config))
            .predict_batches(input_fn, checkpoint)]
    nll = mean_nll_per_token([o["nll_sum"][0] for o in sums], [o["num_tokens"][0] for o in sums])
    global_step = checkpoint_utils.checkpoint_step(checkpoint) if checkpoint else 0
  else:
    model_fn = model_fn_builder(config, use_tpu=settings.use_tpu)
    batch_size = max(1, settings.max_tokens // settings.max_length)
    estimator = estimator_utils.make_estimator(model_fn, settings.flag_values,
                                               settings.output_dir, batch_size, batch_size,
                                               supported_flags=SUPPORTED_MODEL_FN_FLAGS)
    results = estimator.evaluate(input_fn=input_fn, checkpoint_path=checkpoint)
    nll = float(results["eval_nll_per_token"])
    global_step = int(results["global_step"])
  return {"eval_nll_per_token": nll, "eval_perplexity": float(np.exp(nll)),
          "checkpoint": checkpoint, "global_step": global_step}


# ----------------------------------------------------------------------------- decoding
def read_lines(path, flag_name):
  """The lines of a (gzip) text file, without newlines; undecodable text is a one-line error."""
  common.require_file(path, flag_name)
  with tf.io.gfile.GFile(path, "rb") as raw:
    data = raw.read()
  if data[:2] == b"\x1f\x8b":
    data = gzip.decompress(data)
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    common.fail("--%s=%s: not UTF-8 text (byte %d)" % (flag_name, path, e.start))
  # Lines end at "\n" only, as create_translation_data reads them: str.splitlines() would also
  # split at U+2028, U+0085, ... and misalign sources with references.
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  return [line[:-1] if line.endswith("\r") else line for line in lines]


def predict_input_fn_builder(source_ids, batch_size):
  """Batches of encoded sources, sorted by length (less padding); example_index restores order.

  Args:
    source_ids: list of lists of int (pieces + eos).
    batch_size: sentences per batch.

  Returns:
    input_fn(params) -> dataset of {"source_ids" [batch, src], "example_index" [batch]}.
  """
  order = sorted(range(len(source_ids)), key=lambda i: len(source_ids[i]))

  def generator():
    for index in order:
      yield {"source_ids": np.asarray(source_ids[index], np.int32),
             "example_index": np.int32(index)}

  def input_fn(params):
    del params
    dataset = tf.data.Dataset.from_generator(
        generator, output_signature={"source_ids": tf.TensorSpec([None], tf.int32),
                                     "example_index": tf.TensorSpec([], tf.int32)})
    return dataset.padded_batch(batch_size, padded_shapes={"source_ids": [None],
                                                           "example_index": []})

  return input_fn


def translate_lines(settings, config, checkpoint, sp, lines):
  """Translates sentences with the Estimator.

  Args:
    settings: JobSettings of job_settings.
    config: NmtConfig.
    checkpoint: checkpoint prefix, or None for randomly initialised weights.
    sp: the SentencePiece model.
    lines: source sentences.

  Returns:
    (translations, num_cut, num_sources_cut): detokenised translations in input order, how many
    reached --max_decode_length without eos, how many sources were cut to --max_source_length.
  """
  source_ids, sources_cut = encode_sources(sp, lines, settings.max_source_length)
  if sources_cut:
    tf1.logging.warning("%d of %d sources are longer than --max_source_length=%d ids: decoding "
                        "their first %d pieces", sources_cut, len(lines),
                        settings.max_source_length, settings.max_source_length - 1)
  translations = [None] * len(lines)
  meter = common.ProgressMeter(len(lines), unit="sentences", log_fn=tf1.logging.info)
  cut = 0
  done = 0
  for prediction in _decoded(settings, config, checkpoint,
                             predict_input_fn_builder(source_ids, settings.predict_batch_size)):
    length = int(prediction["length"])
    ids = [int(i) for i in prediction["ids"][:length]]
    if ids and ids[-1] == nmt_modeling.EOS_ID:
      ids = ids[:-1]
    else:
      cut += 1
    translations[int(prediction["example_index"])] = sp.decode(ids)
    done += 1
    meter.update(done, prefix="decode: ")
    if common.STOP_SIGNALS.stopped:
      break
  common.STOP_SIGNALS.exit_if_stopped()
  if cut:
    tf1.logging.warning("%d of %d translations reached --max_decode_length=%d without eos",
                        cut, len(lines), settings.max_decode_length)
  return translations, cut, sources_cut


def _decoded(settings, config, checkpoint, input_fn):
  """The beam search's outputs (ids, length, score, example_index) sentence by sentence, on
  the Estimator or the TF2 engine (translate_graph in its tf.function)."""
  if settings.engine == ENGINE_TF2:
    model_fn = engine_model_fn(config, beam_size=settings.beam_size,
                               length_penalty=settings.length_penalty,
                               max_decode_length=settings.max_decode_length)
    return _job_engine(settings, model_fn).predict(input_fn, checkpoint,
                                                   batch_size=settings.predict_batch_size)
  model_fn = model_fn_builder(config, use_tpu=False, beam_size=settings.beam_size,
                              length_penalty=settings.length_penalty,
                              max_decode_length=settings.max_decode_length)
  estimator = estimator_utils.make_estimator(model_fn, settings.flag_values, settings.output_dir,
                                             settings.predict_batch_size,
                                             predict_batch_size=settings.predict_batch_size,
                                             supported_flags=SUPPORTED_MODEL_FN_FLAGS)
  return estimator.predict(input_fn, checkpoint_path=checkpoint, yield_single_examples=True)


def predict(settings, config, checkpoint, sp):
  """Writes the translations (and bleu.json with references); returns the results dict."""
  lines = read_lines(settings.predict_source_file, "predict_source_file")
  references = None
  if settings.predict_reference_file:
    references = read_lines(settings.predict_reference_file, "predict_reference_file")
    if len(references) != len(lines):
      common.fail("--predict_reference_file=%s: %d lines, --predict_source_file has %d" % (
          settings.predict_reference_file, len(references), len(lines)))
  start = time.time()
  translations, cut, sources_cut = translate_lines(settings, config, checkpoint, sp, lines)
  seconds = time.time() - start
  output = predict_output_path(settings)
  parent = os.path.dirname(output)
  if parent:
    tf.io.gfile.makedirs(parent)
  record = checkpoint_utils.checkpoint_record(checkpoint)
  # Which weights produced the translations (the text file cannot say it): the sidecar
  # <file>.checkpoint.json, removed first so that a kill in between leaves none naming others.
  checkpoint_utils.remove_sidecar(output)
  with common.atomic_output(output) as f:
    f.write("".join(t + "\n" for t in translations))
  checkpoint_utils.write_sidecar(output, record)
  tf1.logging.info("Wrote %d translations to %s (%.1f sentences/s)", len(translations), output,
                   len(translations) / max(seconds, 1e-9))
  results = {"num_sentences": len(lines), "num_cut_at_max_decode_length": cut,
             "num_sources_cut_at_max_source_length": sources_cut,
             "max_source_length": settings.max_source_length,
             "decode_seconds": round(seconds, 1), "beam_size": settings.beam_size,
             "length_penalty": settings.length_penalty}
  results.update(record)
  if references is not None:
    scores = translation_metrics.score_translations(translations, references,
                                                    settings.target_language)
    scores.update(results)
    translation_metrics.write_bleu_json(os.path.join(settings.output_dir, BLEU_NAME), scores)
    tf1.logging.info("BLEU %s", json.dumps({k: v for k, v in scores.items()
                                            if "bleu" in k.lower() or "chrf" in k.lower()}))
    return scores
  return results


# ----------------------------------------------------------------------------- main
def _check_flags():
  """One-line errors for missing or contradictory flags."""
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
    common.fail("nothing to do: give --do_train, --do_eval, --do_predict or --export_dir")
  if FLAGS.do_train:
    if not FLAGS.train_file:
      common.fail("--do_train needs --train_file")
    if not FLAGS.num_train_steps and not FLAGS.num_train_epochs:
      common.fail("--do_train needs --num_train_steps or --num_train_epochs")
  if FLAGS.do_eval and not FLAGS.dev_file:
    common.fail("--do_eval needs --dev_file")
  if FLAGS.do_predict and not FLAGS.predict_source_file:
    common.fail("--do_predict needs --predict_source_file")
  if (FLAGS.do_predict or FLAGS.export_dir) and not FLAGS.spm_model:
    common.fail("--do_predict and --export_dir need --spm_model")
  for name in ("max_tokens", "max_length", "beam_size", "max_decode_length",
               "predict_batch_size", "gradient_accumulation_steps"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s must be >= 1, got %d" % (name, getattr(FLAGS, name)))
  if FLAGS.max_source_length == 1 or FLAGS.max_source_length < 0:
    common.fail("--max_source_length must be >= 2 (one piece + eos) or 0 (no limit), got %d" %
                FLAGS.max_source_length)
  if FLAGS.num_train_steps is not None and FLAGS.num_train_steps < 1:
    common.fail("--num_train_steps must be >= 1, got %d" % FLAGS.num_train_steps)
  if FLAGS.num_train_epochs is not None and FLAGS.num_train_epochs <= 0:
    common.fail("--num_train_epochs must be > 0, got %g" % FLAGS.num_train_epochs)
  if not 0.0 <= FLAGS.label_smoothing < 1.0:
    common.fail("--label_smoothing must be in [0, 1), got %g" % FLAGS.label_smoothing)
  if FLAGS.learning_rate <= 0:
    common.fail("--learning_rate must be > 0, got %g" % FLAGS.learning_rate)


def _check_engine_flags():
  """One-line errors for the device, precision and distribution flags: on the TF2 engine those
  only the Estimator implements (tf2_training.check_flags), on both the combinations
  estimator_utils refuses."""
  if not estimator_utils.has_estimator():
    # (No TPU: token-budget batches have no static shape.)
    tf2_training.check_flags(FLAGS, "-m " + SCRIPT, xla=True, multi_worker=True)
  estimator_utils.validate_estimator_flags(FLAGS)
  estimator_utils.check_supported(FLAGS, SUPPORTED_MODEL_FN_FLAGS)


def check_resume(settings, config):
  """The output_dir's checkpoint step; one line if it holds a model of other shapes."""
  return estimator_utils.check_resume_shapes(settings.output_dir, {
      "embeddings/word_embeddings": [config.vocab_size, config.hidden_size],
      "encoder/layer_0/intermediate/dense/kernel": [config.hidden_size,
                                                    config.intermediate_size]})


def _weights_actions(settings):
  """The actions of this job that read trained weights, as the user typed them."""
  return [name for name, on in (("--do_eval", settings.do_eval),
                                ("--do_predict", settings.do_predict),
                                ("--export_dir", settings.export_dir)) if on]


def resolve_checkpoint_flag(settings, config):
  """The checkpoint --do_eval / --do_predict / --export_dir read, checked before any work.

  --checkpoint (prefix or directory); else the output_dir's latest; else --init_checkpoint.
  After --do_train (without --checkpoint) the job reads the output_dir's latest once training
  is done: resolved then (after_training). With none of them: one line naming --checkpoint,
  unless --allow_random_eval (--do_eval / --do_predict of randomly initialised weights; an export
  always needs a checkpoint). A checkpoint of another model (a BERT one, another config) is one
  line (check_checkpoint).

  Args:
    settings: JobSettings of job_settings.
    config: the job's NmtConfig.

  Returns:
    The checkpoint prefix; None for randomly initialised weights or when it is resolved after
    training.
  """
  if settings.checkpoint:
    flag_name, path = "checkpoint", settings.checkpoint
  elif settings.do_train:
    return None
  else:
    sources = [("output_dir", settings.output_dir), ("init_checkpoint", settings.init_checkpoint)]
    if settings.export_dir and not any(checkpoint_utils.is_checkpoint(p) for _, p in sources):
      common.fail("--export_dir=%s: no trained weights to export (no checkpoint in %s); give "
                  "--checkpoint" % (settings.export_dir, ", ".join(
                      "--%s=%s" % (name, path) for name, path in sources if path)))
    found = checkpoint_utils.require_trained_weights(
        " and ".join(_weights_actions(settings)), sources,
        allow_random_eval=settings.allow_random_eval, give_flag="checkpoint")
    if found is None:
      return None
    flag_name, path = found
  prefix = export_utils.resolve_checkpoint(path, flag_name)
  check_checkpoint(model_variable_specs(config), prefix, flag_name,
                   extra_names=[tf1.GraphKeys.GLOBAL_STEP])
  return prefix


def predict_output_path(settings):
  """--predict_output_file, else output_dir/translations.txt."""
  return settings.predict_output_file or os.path.join(settings.output_dir, TRANSLATIONS_NAME)


def check_predict_output(output, inputs, results):
  """One line when the translations file cannot be written or would replace a file of the job.

  Args:
    output: the translations file (predict_output_path(settings)).
    inputs: files and directories the job reads (sources, references, the SentencePiece model,
      configs, checkpoint files: checkpoint_utils.checkpoint_files).
    results: other files the job writes (bleu.json, eval results, ...).
  """
  flag_name = "predict_output_file"
  common.check_output_path(output, flag_name)
  if tf.io.gfile.isdir(output):
    common.fail("--%s=%s: is a directory, expected a file name" % (flag_name, output))
  common.check_not_input(output, inputs, flag_name)
  for path in results:
    if os.path.realpath(output) == os.path.realpath(path):
      common.fail("--%s=%s: this job writes %s there; give another file" % (
          flag_name, output, os.path.basename(path)))


def job_inputs(fv, checkpoint):
  """The files and directories a job reads besides its TFRecords (for check_predict_output).

  Args:
    fv: the job's JobSettings (or FLAGS, or any object with the same attributes).
    checkpoint: the checkpoint prefix the job decodes (None: resolved after training).

  Returns:
    List of paths: the raw text, SentencePiece model, configs, output_dir and its files, and
    the checkpoint files (checkpoint_utils.checkpoint_files) of the checkpoint decoded, of
    --checkpoint, of the output_dir (and the state file names training will write there) and of
    --init_checkpoint.
  """
  output_dir = fv.output_dir
  inputs = [fv.predict_source_file, fv.predict_reference_file, fv.spm_model, fv.config_file,
            fv.admin_profile, output_dir, os.path.join(output_dir, CONFIG_NAME),
            os.path.join(output_dir, PROFILE_NAME)]
  for path in (checkpoint, fv.checkpoint, output_dir, fv.init_checkpoint):
    inputs += checkpoint_utils.checkpoint_files(path)
  inputs += [os.path.join(output_dir, name) for name in ("checkpoint", "graph.pbtxt")]
  return inputs


JobSettings = collections.namedtuple("JobSettings", [
    # Inputs and outputs.
    "output_dir", "train_file", "dev_file", "predict_source_file", "predict_reference_file",
    "predict_output_file", "spm_model", "config_file", "init_checkpoint", "allow_unmatched_init",
    "checkpoint", "allow_random_eval", "admin_profile", "export_dir", "overwrite",
    # What the job does.
    "do_train", "do_eval", "do_predict",
    # The model's overrides of the config file.
    "residual_attention", "layer_norm_type",
    # Batches and the training schedule.
    "max_tokens", "max_length", "num_train_steps", "num_train_epochs",
    "gradient_accumulation_steps", "learning_rate", "warmup_steps", "lr_schedule",
    "label_smoothing", "clip_norm", "adam_beta2", "adam_epsilon", "weight_decay", "seed", "use_tpu",
    # Checkpoints: one per epoch unless --save_checkpoints_steps is given.
    "save_every_epoch", "save_checkpoints_steps_given",
    # Decoding.
    "predict_batch_size", "beam_size", "length_penalty", "max_decode_length", "max_source_length",
    "target_language",
    # The training engine (ENGINE_ESTIMATOR or ENGINE_TF2).
    "engine",
    # The TF2 engine's tf.distribute strategy of training (made first thing in main; None on
    # the Estimator) and the directory of its checkpoints, --output_dir, which every worker of a
    # multi-worker job reads (output_dir is where this process writes:
    # tf2_training.worker_settings).
    "strategy", "model_dir",
    # The whole flag set, for estimator_utils.make_estimator, the engine's strategy and
    # checkpointing (_job_engine) and resume_skip_batches only (train sets its
    # save_checkpoints_steps to an epoch's batches, see save_every_epoch).
    "flag_values",
])


def job_settings(flag_values, strategy=None):
  """The values the job reads, from the parsed flags (after main's checks).

  Args:
    flag_values: the parsed flags (FLAGS).
    strategy: the TF2 engine's strategy (tf2_training.command_strategy), or None.

  Returns:
    JobSettings.
  """
  return common.settings_from_flags(
      JobSettings, flag_values,
      save_checkpoints_steps_given=flag_values["save_checkpoints_steps"].present,
      engine=ENGINE_ESTIMATOR if estimator_utils.has_estimator() else ENGINE_TF2,
      strategy=strategy,
      model_dir=flag_values.output_dir,
      flag_values=flag_values)


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  _check_flags()
  _check_engine_flags()
  # The TF2 engine's strategy, before any TensorFlow operation runs (a multi-worker one must).
  strategy = None if estimator_utils.has_estimator() else tf2_training.command_strategy(FLAGS)
  tf2_training.check_multi_worker_job(strategy, FLAGS.do_train)
  common.check_output_dir(FLAGS.output_dir)
  # A worker other than the chief trains only (tf2_training.worker_settings).
  settings = tf2_training.worker_settings(job_settings(FLAGS, strategy), do_eval=False,
                                          do_predict=False, export_dir=None)
  # Every job takes the lock, evaluation-only ones too, before the directory's config or
  # checkpoint is read: beside a running training job an evaluation would score (and write
  # results for) whichever checkpoint happens to be the latest.
  with common.OutputDirLock(settings.output_dir, "output_dir"):
    _checked_run(settings)


def _checked_run(settings):
  """main's checks of the inputs and the directory (under its lock), then the job."""
  # Every worker of a multi-worker job reads the config of --output_dir (model_dir).
  config = load_nmt_config(settings.model_dir, settings.config_file,
                           {"residual_attention": settings.residual_attention,
                            "layer_norm_type": settings.layer_norm_type})
  sp = None
  if settings.spm_model:
    sp = translation_records.load_spm(settings.spm_model)
    if sp.GetPieceSize() != config.vocab_size:
      common.fail("--spm_model=%s: %d pieces, the model's vocab_size is %d" % (
          settings.spm_model, sp.GetPieceSize(), config.vocab_size))
  if settings.init_checkpoint and not tf1.train.checkpoint_exists(settings.init_checkpoint):
    common.fail("--init_checkpoint=%s: no checkpoint there" % settings.init_checkpoint)
  if settings.do_train and settings.init_checkpoint:
    check_init_checkpoint(config, settings.init_checkpoint, settings.allow_unmatched_init)
  # Which weights evaluation, decoding and export read: none, or another model's, stops here.
  checkpoint = None
  if _weights_actions(settings):
    checkpoint = resolve_checkpoint_flag(settings, config)
  train_files = common.expand_input_files(settings.train_file, "train_file") \
      if settings.do_train else []
  dev_files = common.expand_input_files(settings.dev_file, "dev_file") if settings.do_eval else []
  if settings.do_predict:
    check_predict_output(predict_output_path(settings), job_inputs(settings, checkpoint) +
                         train_files +
                         dev_files,
                         [os.path.join(settings.output_dir, name) for name in (
                             BLEU_NAME, SUMMARY_NAME, "eval_results.txt", "eval_results.json")])
  if train_files or dev_files:
    try:
      translation_input.check_translation_tfrecords(train_files + dev_files,
                                                    vocab_size=config.vocab_size)
    except ValueError as e:
      common.fail(str(e))
  if settings.export_dir:
    common.check_export_dir(settings.export_dir, "export_dir", settings.overwrite,
                            [settings.output_dir])
  common.STOP_SIGNALS.install()
  _run(settings, config, sp, train_files, dev_files, checkpoint)


def _run(settings, config, sp, train_files, dev_files, checkpoint):
  """The job after main's checks: train, eval, predict, export (of `checkpoint`)."""
  tf.io.gfile.makedirs(settings.output_dir)
  if settings.do_train:
    resume_step = check_resume(settings, config)
    summary = train(settings, config, train_files, resume_step)
    common.write_json_atomic(os.path.join(settings.output_dir, SUMMARY_NAME), summary)
    if not settings.checkpoint:
      checkpoint = tf1.train.latest_checkpoint(settings.output_dir)
  final = []
  if settings.do_eval:
    results = evaluate(settings, config, checkpoint, dev_files)
    tf1.logging.info("dev: %s", results)
    final.append(lambda: estimator_utils.write_eval_results(settings.output_dir, results))
  if settings.do_predict:
    predict(settings, config, checkpoint, sp)
  common.STOP_SIGNALS.exit_if_stopped()
  for write in final:
    write()
  if settings.export_dir:
    translation_serving.export(config, checkpoint, settings.spm_model, settings.export_dir,
                               beam_size=settings.beam_size, length_penalty=settings.length_penalty,
                               max_decode_length=settings.max_decode_length,
                               max_source_length=settings.max_source_length,
                               overwrite=settings.overwrite, protected_paths=[settings.output_dir])


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
