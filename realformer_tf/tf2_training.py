# coding=utf-8
"""Training and inference without the Estimator: modeling.py's graph code in a tf.distribute loop.

TensorFlow 2.16 removed the Estimator. `Engine` is the training engine of the commands there
(run_classifier.py, run_pretraining.py; the Estimator stays theirs on TF 2.15), written as
TensorFlow's migration guide and Model Garden write a TF2 loop: tf.functions, `strategy.run`, a
distributed dataset.
The model is the commands' own tf.compat.v1 graph code (modeling.BertModel with the official
scope names) run inside those tf.functions, its tf.compat.v1.get_variable calls answered with
tf.Variables the engine created once under the strategy (export_utils.in_variables, the shim
realformer_tf/serving.py's SavedModels use). So:

- Checkpoints are name-based, in the tf.compat.v1 Saver's format (`model.ckpt-<step>.index` /
  `.data-*` and the `checkpoint` state file): the official variable names, the `<var>/adam_m`
  and `<var>/adam_v` slots of optimization.AdamWeightDecayOptimizer and `global_step`, as the
  Estimator writes them. A checkpoint of either engine resumes on the other.
- An init checkpoint is loaded by the Estimator's own code (estimator_utils.
  init_checkpoint_scaffold_fn in a scratch TF1 graph): the same shape and encoder-coverage
  checks (checkpoint_utils.check_init_matches), the same assignment map.
- A training step is optimization.create_optimizer's: the gradients of the loss, clipping to
  global norm 1.0, AdamWeightDecayOptimizer (weight decay 0.01, no decay for LayerNorm / bias)
  at optimization.learning_rate_schedule's rate (linear warm-up, linear decay to 0), then
  global_step + 1. On one device these are the Estimator's ops in its order: the same losses
  to float32 rounding. The optimizer's settings are create_optimizer's keyword arguments
  (beta_2, epsilon, weight_decay_rate, clip_norm, schedule) with BERT's values by default
  (translation/run_translation.py passes its Adam (0.9, 0.98) and its schedule).
- Gradient accumulation (gradient_accumulation_steps=N) is create_optimizer's too: global_step
  counts micro-batches, each adds its gradient to `<var>/grad_accum` (in the checkpoints, as the
  Estimator writes them: a job stopped inside an accumulation resumes on either engine), every
  N-th applies the mean of the N gradients, clipped, at the rate of update global_step // N
  and zeroes the accumulators. A checkpoint without accumulators (from a job without
  accumulation) resumes only at a step that starts an accumulation.
- A loss scale (loss_scale="dynamic": --precision=fp16, a float16 model) is create_optimizer's
  dynamic loss scaling through optimization.py's own functions (loss_scale_and_update,
  scaled_gradients, clip_gradients): the gradients of loss * scale, divided by the scale; an
  update whose gradients are not finite changes no weight and no Adam slot (global_step still
  counts the step) and halves the scale, LOSS_SCALE_GROWTH_STEPS finite updates in a row double
  it. Its state is the Estimator's `loss_scale` (float32) and `loss_scale_good_steps` (int64) in
  the checkpoints, so a fp16 job continues on either engine; a checkpoint without them (a fp32 or
  bf16 job's) resumes in fp16 with the initial scale (estimator_utils.LossScaleOptionalSaver's
  rule), and a job without a loss scale ignores them. One device only, as the Estimator's fp16.
- With several replicas (MirroredStrategy, TPUStrategy) the gradients are averaged over the
  global batch before they are clipped, so N replicas make one device's update for the same
  global batch (the Estimator's MirroredStrategy clips each replica's gradient instead). Each
  replica reads its share of the global batch from the one input pipeline, so a resumed job
  skips exactly the batches trained so far.
- The random initial weights (what init_checkpoint does not supply, e.g. a classifier head)
  are the Estimator's: the same graph seed and the same sequence of op seeds.
- Dropout masks are step-seeded (modeling.dropout keys them on the graph seed, the op's name and
  the global step): a resumed job draws the masks of an uninterrupted one, and on one device the
  masks of the Estimator (the replica's ops have the Estimator graph's names). Other replicas
  draw other masks (their ops are named replica_<i>/...).

XLA (use_xla, --use_xla) is the Estimator's: XLA auto-clustering of the training step (the
session config's global_jit_level ON_1; on CPU the fusible ops of estimator_utils.XLA_CPU_FLAGS,
which TensorFlow reads from TF_XLA_FLAGS at start-up). Auto-clustering leaves the stateless
random ops to TensorFlow (XLA draws other numbers), so dropout keeps its masks: the same losses
as without XLA to float32 rounding. (A step compiled whole, tf.function(jit_compile=True), would
draw other masks: another run, not the Estimator's.)

TensorBoard: training writes the Estimator's scalars into output_dir (a tf.summary events file
beside the Estimator's, tf.compat.v1 Summary protos as its are): `loss`, `learning_rate` (the
step's rate) and the model function's own tf.compat.v1.summary.scalar calls (run_pretraining's
masked_lm_accuracy, ...; the first replica's), at the step the Estimator's SummarySaverHook
gives them (the global step after the update), plus `global_step/sec` (the tag of the
Estimator's StepCounterHook, which the project's Estimator off TPU leaves to its progress
line). They are written at each step that logs its loss (every log_every_n_steps and a
train()'s last; the Estimator: every 100 steps), global_step/sec from the second step of a
train() on (the first one traces the step).

Evaluation and prediction run on one device (as the Estimator's --distribution_strategy does),
on TPU under the strategy. TPUStrategy needs static shapes (every batch [batch, max_seq_length],
drop_remainder; predict() pads a last partial batch with zero rows it does not yield, as
TPUEstimator.predict does) and has not run on a TPU here. No flag is read here: `check_flags`
refuses, in one line, the flags of a command that only the Estimator implements.

A command makes its strategy first thing in main (command_strategy: --use_tpu with --tpu_name /
--master, or --distribution_strategy): a MultiWorkerMirroredStrategy must exist before the
process runs any TensorFlow operation. In a multi-worker job every worker trains (each reads its
share of the input pipeline's batches) and the chief alone writes into --output_dir: the
checkpoints and events (Engine.is_chief), and the command's own files, evaluation, predictions
and exports (worker_settings: another worker writes its feature caches into a private directory
and evaluates nothing). A job the workers could not run alike is one line
(check_multi_worker_job): no training, or evaluations during training whose best-checkpoint and
early-stopping decisions the chief alone would take.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import atexit
import collections
import contextlib
import os
import shutil
import tempfile
import time
import warnings

import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import export_utils
from realformer_tf import pretraining_utils
import optimization

tf1 = tf.compat.v1

# The strategies of make_strategy: one device, the local GPUs (or logical CPUs), the workers of
# TF_CONFIG, a TPU.
STRATEGIES = ("none", "mirrored", "multi_worker_mirrored", "tpu")

# Flags of estimator_utils.define_estimator_flags that only the Estimator implements, with their
# "off" value (check_flags refuses any other; use_xla and precision where the command passes
# them to the engine: check_flags' xla and precisions).
ESTIMATOR_ONLY_FLAGS = collections.OrderedDict([
    ("use_tpu", False), ("tpu_name", None), ("tpu_zone", None), ("gcp_project", None),
    ("master", None), ("num_tpu_cores", 8), ("iterations_per_loop", 1000),
    ("use_xla", False), ("precision", "fp32")])
# --distribution_strategy values the engine runs; MULTI_WORKER where the command makes its
# strategy before any TensorFlow operation (check_flags' multi_worker).
ENGINE_DISTRIBUTION_STRATEGIES = ("none", "mirrored")
# --precision values a command's engine model function can compute in (check_flags' precisions):
# bfloat16 needs only the model's compute dtype; float16 also the Estimator's dynamic loss
# scaling (the command passes Engine(loss_scale=estimator_utils.loss_scale_for(precision))).
ENGINE_PRECISIONS = ("fp32", "bf16", "fp16")
MULTI_WORKER = "multi_worker_mirrored"
# The Estimator's TPU flags that make the engine's TPUStrategy where a command takes them
# (check_flags' tpu; command_strategy). --iterations_per_loop stays the Estimator's: the engine
# runs one step per call of its tf.function (no inner loop of several steps).
ENGINE_TPU_FLAGS = ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores")

CHECKPOINT_NAME = "model.ckpt"
GLOBAL_STEP = "global_step"
ADAM_SLOTS = ("adam_m", "adam_v")
# optimization.create_optimizer's gradient accumulator of a variable: `<var>/grad_accum`.
GRAD_ACCUM = "grad_accum"
CLIP_NORM = 1.0

# A variable the model function creates: its shape, dtype and whether it is trained.
VariableSpec = collections.namedtuple("VariableSpec", ["shape", "dtype", "trainable"])
# What Engine.train returns: the global step reached and the steady steps per second (None when
# too few steps ran to measure one).
TrainResult = collections.namedtuple("TrainResult", ["global_step", "steps_per_second"])


def check_flags(flag_values, script, multi_worker=False, precisions=("fp32",), xla=False,
                tpu=False):
  """One line for a flag set on the command line that only the Estimator engine implements.

  Args:
    flag_values: the parsed flags (those of estimator_utils.define_estimator_flags).
    script: the command's name for the message, e.g. "run_classifier.py".
    multi_worker: the command runs --distribution_strategy=multi_worker_mirrored on the engine
      (it makes the strategy before any TensorFlow operation).
    precisions: the --precision values the command's engine model function computes in (bf16
      needs only the model's compute dtype; fp16 also the Estimator's dynamic loss scaling:
      Engine's loss_scale).
    xla: the command passes --use_xla to the Engine (use_xla).
    tpu: the command makes its strategy with command_strategy (--use_tpu: TPUStrategy).
  """
  for name, off in ESTIMATOR_ONLY_FLAGS.items():
    value = getattr(flag_values, name, off)
    if ((name == "precision" and value in precisions) or (name == "use_xla" and xla) or
        (tpu and name in ENGINE_TPU_FLAGS)):
      continue
    if value != off:
      shown = "--%s" % name if value is True else "--%s=%s" % (name, value)
      common.fail(
          "%s: implemented by the Estimator only (TensorFlow %s); %s on TF %s trains with "
          "tf.distribute without it: run it in the project's TF %s environment (`bash run.sh "
          "python %s ...`)" % (shown, estimator_utils.ESTIMATOR_TF_VERSION, script,
                               tf.__version__, estimator_utils.ESTIMATOR_TF_VERSION, script))
  strategy = getattr(flag_values, "distribution_strategy", "none")
  supported = ENGINE_DISTRIBUTION_STRATEGIES + ((MULTI_WORKER,) if multi_worker else ())
  if strategy not in supported:
    common.fail("--distribution_strategy=%s: implemented by the Estimator only (TensorFlow %s); "
                "%s on TF %s runs %s" % (strategy, estimator_utils.ESTIMATOR_TF_VERSION, script,
                                         tf.__version__, " or ".join(supported)))


def make_strategy(name="none", num_gpus=None, tpu_address=None, tpu_zone=None, gcp_project=None):
  """The tf.distribute strategy of the engine.

  Args:
    name: "none" (the default strategy: one device), "mirrored" (all local GPUs, or num_gpus;
      on a machine without GPUs the logical CPUs the process configured, reduced on one
      device: estimator_utils.make_distribution_strategy) or "tpu".
    num_gpus: "mirrored": the number of GPUs (None: all).
    tpu_address: "tpu": the TPU's name or grpc:// address (TPUClusterResolver).
    tpu_zone, gcp_project: "tpu": the zone and Cloud project of a TPU given by name (None:
      TPUClusterResolver's defaults, from the metadata of the VM it runs on).

  Returns:
    tf.distribute.Strategy.
  """
  if name == "none":
    return tf.distribute.get_strategy()
  if name in ("mirrored", MULTI_WORKER):
    # multi_worker_mirrored: the workers of TF_CONFIG, which must be created before the
    # process runs any TensorFlow operation (a command makes it first thing in main).
    return estimator_utils.make_distribution_strategy(name, num_gpus)
  if name == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=tpu_address, zone=tpu_zone, project=gcp_project)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise ValueError("strategy %r: not one of %s" % (name, ", ".join(STRATEGIES)))


def is_tpu_strategy(strategy):
  """Whether `strategy` runs on TPU cores (static shapes, one-hot embeddings)."""
  return isinstance(strategy, tf.distribute.TPUStrategy)


# ----------------------------------------------------------------------------------------------
# A command's strategy and what each worker of a multi-worker job does.


def command_strategy(flag_values):
  """The engine's strategy of a command's device flags (after check_flags).

  A command makes it first thing in main, before any TensorFlow operation: a
  MultiWorkerMirroredStrategy must exist before the process's runtime starts, and TPUStrategy
  connects the runtime to the TPU.

  Args:
    flag_values: the parsed flags: --use_tpu with --tpu_name (and --tpu_zone, --gcp_project)
      or --master (the TPU's grpc:// address, as the Estimator's RunConfig takes it),
      --num_tpu_cores (checked against the TPU's); else --distribution_strategy and --num_gpus.

  Returns:
    tf.distribute.Strategy.
  """
  if not getattr(flag_values, "use_tpu", False):
    return make_strategy(flag_values.distribution_strategy, flag_values.num_gpus)
  shown = ("--tpu_name=%s" % flag_values.tpu_name if flag_values.tpu_name
           else "--master=%s" % flag_values.master)
  try:
    if flag_values.tpu_name:
      strategy = make_strategy("tpu", tpu_address=flag_values.tpu_name,
                               tpu_zone=flag_values.tpu_zone,
                               gcp_project=flag_values.gcp_project)
    else:
      strategy = make_strategy("tpu", tpu_address=flag_values.master)
  except (tf.errors.OpError, ValueError, RuntimeError) as e:
    # A TPU that does not exist or cannot be reached (the resolver's lookup, the connection).
    lines = (getattr(e, "message", None) or str(e)).strip().splitlines()
    common.fail("%s: cannot connect to the TPU (%s)" % (shown, lines[0] if lines
                                                          else type(e).__name__))
  cores = strategy.num_replicas_in_sync
  if cores != flag_values.num_tpu_cores:
    # The Estimator shards over --num_tpu_cores; the engine over every core of the TPU.
    common.fail("--num_tpu_cores=%d: the TPU %s has %d cores; pass --num_tpu_cores=%d" % (
        flag_values.num_tpu_cores, flag_values.tpu_name or flag_values.master, cores, cores))
  return strategy


def is_multi_worker(strategy):
  """Whether `strategy` trains over the workers of TF_CONFIG (MultiWorkerMirroredStrategy)."""
  return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def is_chief_worker(strategy):
  """Whether this process writes a command's outputs: a single process, or the chief (worker 0
  of a cluster without one) of a multi-worker job.

  Args:
    strategy: the engine's strategy (None: the Estimator's job, a single process here).
  """
  return pretraining_utils.is_chief() if is_multi_worker(strategy) else True


def check_multi_worker_job(strategy, do_train, evaluation_flags=()):
  """One line for a job that the workers of a multi-worker strategy could not run alike.

  A multi-worker job trains on every worker; its chief alone then evaluates, predicts and
  exports (worker_settings). Without training, the other workers would have nothing to do
  while the chief's model waits for them; an evaluation during training decides the best
  checkpoint and early stopping on the chief, which the other workers would not follow.

  Args:
    strategy: the engine's strategy.
    do_train: the job trains.
    evaluation_flags: [(flag as shown, whether it is set)] of the command's evaluation during
      training.
  """
  if not is_multi_worker(strategy):
    return
  if not do_train:
    common.fail("--distribution_strategy=%s: needs --do_train (several workers train one "
                "model); evaluate or predict on one worker with --distribution_strategy=none" %
                MULTI_WORKER)
  for shown, is_set in evaluation_flags:
    if is_set:
      common.fail("%s: not with --distribution_strategy=%s (the evaluations during training "
                  "would decide the best checkpoint and early stopping on the chief alone); "
                  "evaluate after training (--do_eval)" % (shown, MULTI_WORKER))


def worker_output_dir(output_dir, strategy):
  """The directory this process writes a command's outputs into.

  The output_dir itself on the chief; on another worker of a multi-worker job a private
  temporary directory, removed when the process exits: what the command writes beside the
  training (feature caches, configs, label lists) cannot race with the chief's files. The Engine
  of every worker keeps output_dir, where all read the checkpoint they resume from and the
  chief alone writes checkpoints and events.

  Args:
    output_dir: --output_dir.
    strategy: the engine's strategy (None: the Estimator's job).

  Returns:
    str.
  """
  if is_chief_worker(strategy):
    return output_dir
  scratch = tempfile.mkdtemp(prefix="realformer-%s-" % pretraining_utils.task_label())
  atexit.register(shutil.rmtree, scratch, True)
  tf1.logging.info("Worker %s: writes its own files into %s (the chief writes --output_dir)",
                   pretraining_utils.task_label(), scratch)
  return scratch


def worker_settings(settings, **chief_only):
  """A command's job settings as this process runs them.

  The chief (or a single process) runs them as they are. Another worker of a multi-worker job
  trains only: its output_dir is worker_output_dir's private directory, and what the chief alone
  does (evaluation, prediction, export) is off. The engine's checkpoints stay in the settings'
  model_dir (--output_dir) on every worker.

  Args:
    settings: the command's JobSettings namedtuple, with the fields output_dir and strategy
      (the engine's, or None for the Estimator's job).
    **chief_only: the fields of what the chief alone does, with their value on another worker
      (e.g. do_predict=False, export_dir=None).

  Returns:
    The settings of this process.
  """
  if is_chief_worker(settings.strategy):
    return settings
  return settings._replace(
      output_dir=worker_output_dir(settings.output_dir, settings.strategy), **chief_only)


# ----------------------------------------------------------------------------------------------
# Name-based checkpoints (the tf.compat.v1 Saver's format) of tf.Variables.


def save_checkpoint(variables, output_dir, step, keep_checkpoint_max=5):
  """Writes `variables` as output_dir/model.ckpt-<step> and names it in the state file.

  The values are saved into a temporary directory and merged into place (the sharded Saver's
  way), then the `checkpoint` state file is replaced atomically, then checkpoints beyond the
  newest keep_checkpoint_max are deleted: a kill at any point leaves a state file naming
  complete checkpoints.

  Args:
    variables: dict checkpoint name -> tf.Variable (a distributed one is read from its first
      replica).
    output_dir: the model directory.
    step: the global step (the file name's suffix).
    keep_checkpoint_max: checkpoints kept (the newest ones).

  Returns:
    The checkpoint prefix written.
  """
  prefix = os.path.join(output_dir, "%s-%d" % (CHECKPOINT_NAME, step))
  tmp_dir = common.temp_path(os.path.join(output_dir, CHECKPOINT_NAME))
  tf.io.gfile.makedirs(tmp_dir)
  shard = os.path.join(tmp_dir, "part-00000-of-00001")
  names = sorted(variables)
  with tf.device("CPU:0"):
    tf.raw_ops.SaveV2(prefix=shard, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[variables[name].read_value() for name in names])
    tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=[shard], destination_prefix=prefix,
                                  delete_old_dirs=True)
  if tf.io.gfile.exists(tmp_dir):
    tf.io.gfile.rmtree(tmp_dir)
  name = os.path.basename(prefix)
  kept = [p for p in _state_checkpoints(output_dir) if p != name] + [name]
  kept, dropped = kept[-keep_checkpoint_max:], kept[:-keep_checkpoint_max]
  # Relative names, as the Estimator's Saver writes them (save_relative_paths).
  tf1.train.update_checkpoint_state(output_dir, name, all_model_checkpoint_paths=kept)
  for old in dropped:
    for path in tf.io.gfile.glob(os.path.join(output_dir, old) + ".*"):
      tf.io.gfile.remove(path)
  tf1.logging.info("Saved checkpoint %s", prefix)
  return prefix


def _state_checkpoints(output_dir):
  """The checkpoint names (relative to output_dir) the state file lists, oldest first."""
  state = tf1.train.get_checkpoint_state(output_dir)
  if state is None:
    return []
  return [os.path.basename(p) for p in state.all_model_checkpoint_paths]


def remove_stale_checkpoint_temps(output_dir):
  """Removes the temporary directories of save_checkpoint left by a killed job."""
  return common.remove_stale_temps(os.path.join(output_dir, CHECKPOINT_NAME))


def restore_checkpoint(variables, checkpoint):
  """Assigns each variable its value in a name-based checkpoint.

  Call it under the variables' strategy scope (a distributed variable gets the value on every
  replica).

  Args:
    variables: dict checkpoint name -> tf.Variable.
    checkpoint: the checkpoint prefix.
  """
  reader = tf.train.load_checkpoint(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  missing = [name for name in sorted(variables) if name not in shapes]
  if missing:
    common.fail("checkpoint %s: lacks %s%s that this job restores" % (
        checkpoint, missing[0], " and %d more" % (len(missing) - 1) if len(missing) > 1 else ""))
  for name in sorted(variables):
    variable = variables[name]
    if list(shapes[name]) != variable.shape.as_list():
      common.fail("checkpoint %s: %s has shape %s there but %s in this job's model" % (
          checkpoint, name, list(shapes[name]), variable.shape.as_list()))
    variable.assign(np.asarray(reader.get_tensor(name)).astype(
        variable.dtype.base_dtype.as_numpy_dtype))


# ----------------------------------------------------------------------------------------------
# The optimizer.


class _AdamWeightDecay(optimization.AdamWeightDecayOptimizer):
  """optimization.AdamWeightDecayOptimizer for a tf.distribute loop: its slots are made before
  the first step (so a checkpoint restores them), and it applies gradients that are already
  the global batch's (no second reduction across replicas)."""

  def create_slots(self, variables):
    """Creates the `adam_m` / `adam_v` slots of `variables` (under the strategy's scope)."""
    with tf.init_scope():
      self._create_slots(variables)

  def apply_global_gradients(self, grads_and_vars, learning_rate, apply_now=None):
    """Applies one AdamW update from replica context; every replica passes the same gradients.

    Args:
      grads_and_vars: list of (gradient, variable): the gradient of the global batch.
      learning_rate: float32 scalar Tensor, this step's rate.
      apply_now: None, or a bool scalar Tensor: the update happens only when it is True
        (gradient accumulation: the last micro-batch of each group).

    Returns:
      The update op.
    """
    def update(variable, grad, rate, condition):
      self.learning_rate = rate
      self.set_apply_condition(condition)
      return self._resource_apply_dense(grad, variable)

    def apply(strategy, grads_and_vars, learning_rate, apply_now):
      ops = []
      for grad, variable in grads_and_vars:
        ops.extend(strategy.extended.update(variable, update,
                                            args=(grad, learning_rate, apply_now), group=False))
      return tf.group(ops)

    return tf.distribute.get_replica_context().merge_call(
        apply, args=(list(grads_and_vars), learning_rate, apply_now))


@contextlib.contextmanager
def _xla_autoclustering(enabled=True):
  """While it is entered, tf.functions called run with XLA auto-clustering (what the Estimator's
  --use_xla session config asks: global_jit_level ON_1), then the previous setting is back.

  Args:
    enabled: False: no change.
  """
  if not enabled:
    yield
    return
  previous = tf.config.optimizer.get_jit()
  tf.config.optimizer.set_jit("autoclustering")
  try:
    yield
  finally:
    tf.config.optimizer.set_jit(previous)


# The flag set estimator_utils.session_config reads, for its check that XLA clusters CPU ops.
_XlaFlags = collections.namedtuple("_XlaFlags", ["use_xla"])


# ----------------------------------------------------------------------------------------------
# The engine.


def _pipeline_share(dataset, context):
  """This worker's share of the one input pipeline's per-replica batches.

  A step takes the pipeline's next num_replicas batches, replica r the r-th: with several
  workers (one pipeline each) worker w keeps every n-th batch from its w-th, so the workers
  together train on the batches one process would (and a resumed job skips the same ones).

  Args:
    dataset: the input_fn's dataset of per-replica batches (every worker builds the same one).
    context: the tf.distribute.InputContext.

  Returns:
    tf.data.Dataset.
  """
  if context.num_input_pipelines == 1:
    return dataset
  return dataset.shard(context.num_input_pipelines, context.input_pipeline_id)


# The feature (and prediction) Engine.predict adds on TPU to an input of partial batches: 1 for
# an example, 0 for a padding row (_full_batches).
_REAL_ROWS = "engine_real_rows"


def _has_dynamic_batch(feature_spec):
  """Whether an input's batches have an unknown size but static example shapes (a last
  partial batch: what _full_batches regroups)."""
  shapes = [spec.shape for spec in feature_spec.values()]
  return (any(shape.rank and shape[0] is None for shape in shapes) and
          all(shape[1:].is_fully_defined() for shape in shapes if shape.rank))


def _full_batches(dataset, batch_size):
  """`dataset`'s examples in full batches of batch_size, the last one padded with zero rows
  (TPUStrategy needs static shapes; TPUEstimator.predict pads so too).

  Args:
    dataset: tf.data.Dataset of feature dicts in batches (examples of static shapes).
    batch_size: the batch size.

  Returns:
    tf.data.Dataset of feature dicts [batch_size, ...] with the _REAL_ROWS feature [batch_size]
    (1 for an example, 0 for a padding row).
  """
  examples = dataset.unbatch().map(
      lambda features: dict(features, **{_REAL_ROWS: tf.constant(1, tf.int32)}))
  padding = tf.data.Dataset.from_tensors(
      {name: tf.zeros(spec.shape, spec.dtype) for name, spec in examples.element_spec.items()})
  # At most batch_size - 1 padding rows fill the last batch; the rest are dropped with it.
  return examples.concatenate(padding.repeat(batch_size - 1)).batch(batch_size,
                                                                    drop_remainder=True)


def _on_device_of(variable, tensor):
  """`tensor` placed on the device of this replica's copy of `variable`."""
  with tf.device(variable.device):
    return tf.identity(tensor)


def _trained_variable_names(loss, trainable_variables):
  """The names of the trainable variables a training step updates: those the loss has a
  gradient for, as optimization.create_optimizer's AdamWeightDecayOptimizer updates (and gives
  Adam slots to) only those. A variable the model builds but the loss never reads (BERT's pooler
  under a span or tagging head) keeps its initial or init_checkpoint value, without slots.

  Args:
    loss: the model function's loss Tensor, or None (a prediction input without labels: every
      trainable variable counts).
    trainable_variables: the graph's trainable variables.

  Returns:
    set of variable names.
  """
  if loss is None:
    return set(v.op.name for v in trainable_variables)
  grads = tf.gradients(ys=loss, xs=trainable_variables)
  return set(v.op.name for v, g in zip(trainable_variables, grads) if g is not None)


class Engine(object):
  """Trains a tf.compat.v1 graph model function with tf.distribute and predicts with it.

  The model function is `model_fn(features, is_training) -> (loss, predictions)`: it builds the
  model with tf.compat.v1 variables (as an Estimator model_fn does) from a dict of feature
  Tensors; loss is a float32 scalar (the mean over this replica's batch; None when there are no
  labels) and predictions a dict of Tensors [batch, ...]. The engine creates the variables once,
  on the first train() or predict(); every call restores its weights from a checkpoint (or the
  initial weights), as each Estimator call does.
  """

  def __init__(self, model_fn, output_dir, strategy=None, train_batch_size=32,
               learning_rate=5e-5, num_train_steps=None, num_warmup_steps=0,
               init_checkpoint=None, allow_unmatched_init=False, encoder_scopes=None,
               seed=12345, save_checkpoints_steps=1000, keep_checkpoint_max=5,
               log_every_n_steps=10, fused_optimizer=False, gradient_accumulation_steps=1,
               use_xla=False, beta_2=0.999, epsilon=1e-6, weight_decay_rate=0.01,
               clip_norm=CLIP_NORM, schedule="linear", loss_scale=None,
               examples_per_step=True):
    """Keeps the job's settings (nothing is built yet).

    Args:
      model_fn: the model function (class docstring).
      output_dir: the model directory (its checkpoints).
      strategy: tf.distribute.Strategy (make_strategy; None: the default one).
      train_batch_size: the global training batch (all replicas).
      learning_rate: the peak learning rate.
      num_train_steps: the schedule's last step (the rate decays to 0 there).
      num_warmup_steps: linear warm-up steps.
      init_checkpoint: checkpoint the weights start from (BERT and any head variables it
        has), or None (random weights).
      allow_unmatched_init: accept an init_checkpoint lacking encoder variables
        (checkpoint_utils.check_init_matches).
      encoder_scopes: the model's encoder scopes for that check (None: every family's).
      seed: the graph seed of the random initial weights, the input's shuffling and dropout.
      save_checkpoints_steps: steps between checkpoints (one is also written at step 0 of a new
        job and at the end of each train()).
      keep_checkpoint_max: checkpoints kept.
      log_every_n_steps: steps between the `loss = ..., step = ...` lines.
      fused_optimizer: AdamWeightDecayOptimizer(fused=True).
      gradient_accumulation_steps: micro-batches of train_batch_size averaged per update
        (optimization.create_optimizer's; the global step counts micro-batches, so
        num_train_steps updates take num_train_steps * gradient_accumulation_steps steps).
      use_xla: XLA auto-clustering of the training step (the Estimator's --use_xla; on CPU
        the process must start with estimator_utils.XLA_CPU_FLAGS in TF_XLA_FLAGS, or train()
        says so in one line).
      beta_2, epsilon, weight_decay_rate: AdamWeightDecayOptimizer's (as
        optimization.create_optimizer passes them; BERT's by default).
      clip_norm: the global-norm clipping threshold of the gradients.
      schedule: the learning rate after warm-up, optimization.learning_rate_schedule's
        "linear" (decay to 0 at num_train_steps) or "inverse_sqrt".
      loss_scale: optimization.create_optimizer's: None, "dynamic" (a float16 model:
        estimator_utils.loss_scale_for(precision)) or a fixed positive number. On one device
        only, as the Estimator's --precision=fp16.
      examples_per_step: the progress line shows examples/s (train_batch_size per step); False
        where a batch is not a number of examples (translation's token-budget batches).
    """
    if gradient_accumulation_steps < 1:
      raise ValueError("gradient_accumulation_steps must be >= 1, got %d" %
                       gradient_accumulation_steps)
    optimization.check_loss_scale(loss_scale)
    self._model_fn = model_fn
    self.output_dir = output_dir
    self.strategy = strategy or tf.distribute.get_strategy()
    self.train_batch_size = train_batch_size
    self._examples_per_step = examples_per_step
    self._learning_rate = learning_rate
    self._num_train_steps = num_train_steps
    self._num_warmup_steps = num_warmup_steps
    self._init_checkpoint = init_checkpoint
    self._allow_unmatched_init = allow_unmatched_init
    self._encoder_scopes = encoder_scopes
    self._seed = seed
    self._save_checkpoints_steps = save_checkpoints_steps
    self._keep_checkpoint_max = keep_checkpoint_max
    self._log_every_n_steps = log_every_n_steps
    self._fused_optimizer = fused_optimizer
    self._accumulation_steps = gradient_accumulation_steps
    self._use_xla = use_xla
    self._adam_settings = {"beta_2": beta_2, "epsilon": epsilon,
                           "weight_decay_rate": weight_decay_rate}
    self._clip_norm = clip_norm
    self._schedule = schedule
    self._loss_scale = loss_scale
    if loss_scale is not None and self.num_replicas > 1:
      raise ValueError("loss_scale=%r: loss scaling runs on one device (%d replicas here), as "
                       "the Estimator's --precision=fp16" % (loss_scale, self.num_replicas))
    self._loss_scale_variables = {}
    self._specs = None
    self._variables = None
    self._trainable = None
    self._global_step = None
    self._optimizer = None
    self._accumulators = {}
    self._summary_writer = None
    self._train_step = None
    self._predict_steps = {}

  @property
  def num_replicas(self):
    """Replicas in sync: the per-replica batches one training step reads from the input."""
    return self.strategy.num_replicas_in_sync

  @property
  def is_chief(self):
    """Whether this process writes the job's checkpoints and TensorBoard events: a single
    process, or the chief (worker 0 of a cluster without one) of a multi-worker job."""
    return is_chief_worker(self.strategy)

  @property
  def _multi_worker(self):
    return is_multi_worker(self.strategy)

  @property
  def on_tpu(self):
    """Whether the strategy runs on TPU cores (static shapes; one-hot embedding lookups)."""
    return is_tpu_strategy(self.strategy)

  # -- variables --------------------------------------------------------------------------

  def _load(self, feature_spec, checkpoint, with_slots=True):
    """Gives the variables the weights of `checkpoint`, or the initial weights when it is None.

    The first call creates the model's variables, global_step and the optimizer slots under the
    strategy (from the model function built in a scratch graph).

    Args:
      feature_spec: dict feature name -> tf.TensorSpec (an input's element_spec).
      checkpoint: a checkpoint prefix, or None: the initial weights (init_checkpoint and random
        ones; zero slots, global_step 0).
      with_slots: restore the optimizer slots too (training).
    """
    values = None
    if self._variables is None:
      self._specs, values = self._scratch_model(feature_spec, initial_values=not checkpoint)
      self._create_variables(values)
    elif not checkpoint:
      _, values = self._scratch_model(feature_spec, initial_values=True)
      with self.strategy.scope():
        for name, variable in self._variables.items():
          variable.assign(values[name])
        for slot in list(self._slot_variables().values()) + list(self._accumulators.values()):
          slot.assign(tf.zeros_like(slot))
        self._global_step.assign(0)
        self._reset_loss_scale()
    if checkpoint:
      with self.strategy.scope():
        variables = self.checkpoint_variables(with_slots)
        if with_slots:
          variables = self._without_absent_accumulators(variables, checkpoint)
          variables = self._without_absent_loss_scale(variables, checkpoint)
        restore_checkpoint(variables, checkpoint)

  def _without_absent_accumulators(self, variables, checkpoint):
    """`variables` less the gradient accumulators `checkpoint` lacks, which are zeroed.

    A checkpoint of a job without accumulation has none: it resumes at a step that starts an
    accumulation (the accumulators are zero there); at any other step it is one line.

    Args:
      variables: dict checkpoint name -> tf.Variable (checkpoint_variables()).
      checkpoint: the checkpoint prefix.

    Returns:
      dict: the variables to restore.
    """
    reader = tf.train.load_checkpoint(checkpoint)
    present = reader.get_variable_to_shape_map()
    absent = [name for name in self._accumulators if name not in present]
    if not absent or GLOBAL_STEP not in present:
      return variables  # (restore_checkpoint names what a checkpoint lacks.)
    step = int(reader.get_tensor(GLOBAL_STEP))
    if step % self._accumulation_steps:
      common.fail("checkpoint %s: lacks the gradient accumulators (%s) of its step %d, inside an "
                  "accumulation of %d micro-batches: resume it with the gradient accumulation "
                  "it was trained with" % (checkpoint, absent[0], step, self._accumulation_steps))
    for name in absent:
      self._accumulators[name].assign(tf.zeros_like(self._accumulators[name]))
    return {name: v for name, v in variables.items() if name not in absent}

  def _without_absent_loss_scale(self, variables, checkpoint):
    """`variables` less the loss-scale state when `checkpoint` lacks it, which starts afresh.

    estimator_utils.LossScaleOptionalSaver's rule: the checkpoint of a fp32 or bf16 job (no
    loss scale) resumes in fp16 with the initial loss scale.

    Args:
      variables: dict checkpoint name -> tf.Variable (checkpoint_variables()).
      checkpoint: the checkpoint prefix.

    Returns:
      dict: the variables to restore.
    """
    present = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
    if all(name in present for name in self._loss_scale_variables):
      return variables
    tf1.logging.info("%s has no loss scale (trained in another precision): the loss scale "
                     "starts at %g", checkpoint, optimization.LOSS_SCALE_INITIAL)
    self._reset_loss_scale()
    return {name: v for name, v in variables.items() if name not in self._loss_scale_variables}

  def _loss_scale_initial_values(self):
    """{name: numpy value} of optimization.loss_scale_and_update's variables at the start of a
    job (none without a dynamic loss scale)."""
    if self._loss_scale != "dynamic":
      return {}
    with tf.Graph().as_default():
      optimization.loss_scale_and_update(self._loss_scale)
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        return sess.run({v.op.name: v for v in tf1.global_variables()})

  def _create_loss_scale_variables(self):
    """The dynamic loss scale's `loss_scale` and `loss_scale_good_steps` (optimization.py's
    names, dtypes and initial values), under the strategy's scope."""
    return collections.OrderedDict(
        (name, tf.Variable(value, name=name, trainable=False,
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA))
        for name, value in sorted(self._loss_scale_initial_values().items()))

  def _reset_loss_scale(self):
    """Gives the loss-scale variables their initial values (a new job's)."""
    for name, value in self._loss_scale_initial_values().items():
      self._loss_scale_variables[name].assign(value)

  def _create_variables(self, values=None):
    """Creates the model's variables (values, or zeros), global_step 0 and zero Adam slots."""
    with self.strategy.scope():
      self._variables = collections.OrderedDict(
          (name, tf.Variable(values[name] if values else tf.zeros(spec.shape, spec.dtype),
                             name=name, trainable=spec.trainable))
          for name, spec in self._specs.items())
      self._global_step = tf.Variable(
          0, dtype=tf.int64, name=GLOBAL_STEP, trainable=False,
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self._trainable = [self._variables[name] for name, spec in self._specs.items()
                         if spec.trainable]
      self._optimizer = _AdamWeightDecay(
          learning_rate=self._learning_rate, beta_1=0.9,
          exclude_from_weight_decay=optimization.DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
          fused=self._fused_optimizer, **self._adam_settings)
      self._optimizer.create_slots(self._trainable)
      self._accumulators = self._create_accumulators()
      self._loss_scale_variables = self._create_loss_scale_variables()

  def _create_accumulators(self):
    """optimization.create_optimizer's `<var>/grad_accum` of each trained variable (none without
    accumulation): zeros, one per replica. Each replica sums its own gradients (the mean over
    its share of the batch); a checkpoint holds the replicas' mean, the global batch's sum, so
    it resumes on any number of replicas (the Estimator's MirroredStrategy saves the replicas'
    sum instead)."""
    accumulators = collections.OrderedDict()
    if self._accumulation_steps == 1:
      return accumulators
    for variable in self._trainable:
      name = "%s/%s" % (variable.name.split(":")[0], GRAD_ACCUM)
      accumulators[name] = tf.Variable(
          tf.zeros(variable.shape, tf.float32), name=name, trainable=False,
          synchronization=tf.VariableSynchronization.ON_READ,
          aggregation=tf.VariableAggregation.MEAN)
    return accumulators

  def _scratch_model(self, feature_spec, initial_values):
    """Builds the model function in a scratch TF1 graph.

    Args:
      feature_spec: dict feature name -> tf.TensorSpec.
      initial_values: also compute the initial weights: random (graph seed `seed`) and what
        init_checkpoint supplies, loaded by estimator_utils.init_checkpoint_scaffold_fn (its
        checks included).

    Returns:
      (OrderedDict name -> VariableSpec in creation order, dict name -> numpy value or None).
    """
    with tf.Graph().as_default():
      tf1.set_random_seed(self._seed)
      # Created first, as the Estimator does: dropout is then stateless here too, so the
      # seedless initializers draw the op seeds of the Estimator's graph (the same random
      # weights for what init_checkpoint does not supply).
      global_step = tf1.train.get_or_create_global_step()
      features = {name: tf1.placeholder(spec.dtype, spec.shape, name=name)
                  for name, spec in feature_spec.items() if name != _REAL_ROWS}
      loss, _ = self._model_fn(features, True)
      trainable = _trained_variable_names(loss, tf1.trainable_variables())
      variables = [v for v in tf1.global_variables() if v is not global_step]
      specs = collections.OrderedDict(
          (v.op.name, VariableSpec(v.shape.as_list(), v.dtype.base_dtype, v.op.name in trainable))
          for v in variables)
      if not initial_values:
        return specs, None
      estimator_utils.init_checkpoint_scaffold_fn(
          self._init_checkpoint, False, allow_unmatched=self._allow_unmatched_init,
          encoder_scopes=self._encoder_scopes)
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        values = sess.run({v.op.name: v for v in variables})
    return specs, values

  def _slot_variables(self):
    """{`<var>/adam_m`, `<var>/adam_v`: slot variable}, the names optimization.py gives them."""
    slots = {}
    for variable in self._trainable:
      name = variable.name.split(":")[0]
      for slot_name in ADAM_SLOTS:
        slots["%s/%s" % (name, slot_name)] = self._optimizer.get_slot(variable, slot_name)
    return slots

  def checkpoint_variables(self, with_slots=True):
    """The name -> variable map of the engine's checkpoints (after the first train/predict).

    Args:
      with_slots: include the optimizer slots (training restores them; prediction does not).

    Returns:
      dict: the model variables, `global_step` and (with_slots) `<var>/adam_m`, `<var>/adam_v`,
      with gradient accumulation `<var>/grad_accum` and with a dynamic loss scale `loss_scale`
      and `loss_scale_good_steps`.
    """
    variables = dict(self._variables)
    variables[GLOBAL_STEP] = self._global_step
    if with_slots:
      variables.update(self._slot_variables())
      variables.update(self._accumulators)
      variables.update(self._loss_scale_variables)
    return variables

  # -- training ---------------------------------------------------------------------------

  def train(self, input_fn_for, max_steps):
    """Trains from the latest checkpoint in output_dir (or the initial weights) to max_steps.

    Checkpoints at step 0 of a new job, every save_checkpoints_steps and at the end. On SIGINT
    / SIGTERM (common.STOP_SIGNALS) the step finishes, a checkpoint is written and train()
    returns early: the caller then calls common.STOP_SIGNALS.exit_if_stopped().

    Args:
      input_fn_for: skip_batches -> input_fn(params) -> tf.data.Dataset of feature dicts in
        batches of params["batch_size"] (per replica), repeated; the input skips its first
        skip_batches batches (those of the steps already trained: an exact resume).
      max_steps: the global step to train to.

    Returns:
      TrainResult.
    """
    common.STOP_SIGNALS.install()
    tf.random.set_seed(self._seed)
    if self.train_batch_size % self.num_replicas:
      common.fail("--train_batch_size=%d is not divisible by the %d replicas of the "
                  "distribution strategy" % (self.train_batch_size, self.num_replicas))
    self._check_xla()
    per_replica = self.train_batch_size // self.num_replicas
    if self.num_replicas > 1:
      tf1.logging.info("%d replicas in sync: %d examples per replica per step",
                       self.num_replicas, per_replica)
    tf.io.gfile.makedirs(self.output_dir)
    if self.is_chief:
      remove_stale_checkpoint_temps(self.output_dir)
    latest = tf1.train.latest_checkpoint(self.output_dir)
    start_step = (int(tf.train.load_checkpoint(latest).get_tensor(GLOBAL_STEP))
                  if latest else 0)
    input_fn = input_fn_for(start_step * self.num_replicas)
    feature_spec = input_fn({"batch_size": per_replica}).element_spec
    self._check_static_shapes(feature_spec, "training")
    if latest:
      tf1.logging.info("Restoring %s (step %d)", latest, start_step)
    self._load(feature_spec, latest)
    if not latest:
      self._save_checkpoint(0)
    if start_step >= max_steps:
      return TrainResult(start_step, None)
    dataset = self.strategy.distribute_datasets_from_function(
        lambda context: _pipeline_share(input_fn({
            "batch_size": context.get_per_replica_batch_size(self.train_batch_size)}), context))
    return self._train_loop(iter(dataset), start_step, max_steps)

  def _save_checkpoint(self, step):
    """save_checkpoint of the engine's variables at `step`, written by the chief only.

    Every worker of a multi-worker job reads the values, in the same order: reading a gradient
    accumulator (per-replica, averaged on read) is a collective operation all of them join.
    """
    variables = self.checkpoint_variables()
    if self.is_chief:
      save_checkpoint(variables, self.output_dir, step, self._keep_checkpoint_max)
    else:
      for name in sorted(variables):
        variables[name].read_value()

  def step_runner(self, input_fn):
    """A function that runs one training step, for a benchmark: no checkpoint, log or summary.

    The first call of step_runner (or train) creates the initial weights; steps count on from
    the weights and global step the engine has.

    Args:
      input_fn: input_fn(params) -> tf.data.Dataset of feature dicts in batches of
        params["batch_size"] (per replica), repeated.

    Returns:
      run() -> float: runs the next step (the first one traces the tf.function) and returns its
      loss.
    """
    self._check_xla()
    per_replica = self.train_batch_size // self.num_replicas
    if self._variables is None:
      self._load(input_fn({"batch_size": per_replica}).element_spec, None)
    self._trace_train_step()
    iterator = iter(self.strategy.distribute_datasets_from_function(
        lambda context: input_fn({"batch_size": context.get_per_replica_batch_size(
            self.train_batch_size)})))
    no_summaries = tf.constant(False)

    def run():
      with _xla_autoclustering(self._use_xla):
        return float(self._train_step(iterator, no_summaries)[0])
    return run

  def _check_xla(self):
    """With use_xla, the Estimator's one line when XLA would cluster no CPU op in this process
    (TF_XLA_FLAGS read before estimator_utils.set_xla_cpu_flags set it)."""
    if self._use_xla:
      estimator_utils.session_config(_XlaFlags(use_xla=True))

  def _trace_train_step(self):
    """Makes the training step's tf.function (traced on its first call) and the summary writer."""
    if self._train_step is not None:
      return
    # The model is graph code (no Python control flow on Tensors): autograph's rewriting of
    # every function it calls would only cost tracing time.
    self._train_step = tf.function(self._distributed_step, autograph=False)
    # One writer for the engine's life: the traced step keeps the writer it was traced with.
    self._summary_writer = (tf.summary.create_file_writer(self.output_dir) if self.is_chief
                            else tf.summary.create_noop_writer())

  def _train_loop(self, iterator, step, max_steps):
    """Runs the steps from `step` to max_steps (or a stop signal); checkpoints as train()."""
    self._trace_train_step()
    total_steps = (self._num_train_steps * self._accumulation_steps if self._num_train_steps
                   else max_steps)
    progress = estimator_utils.ProgressHook(
        total_steps, self.train_batch_size if self._examples_per_step else None)
    last_saved = step
    rate_origin = None  # (step, time) global_step/sec counts from: after the first step's tracing
    while step < max_steps and not common.STOP_SIGNALS.stopped:
      logged = (step + 1) % self._log_every_n_steps == 0 or step + 1 == max_steps
      with _xla_autoclustering(self._use_xla):
        loss, learning_rate = self._train_step(iterator, tf.constant(logged))
      loss = float(loss)
      step += 1
      if not np.isfinite(loss):
        common.fail("training: the loss is %s at step %d (diverged; try a lower "
                    "--learning_rate)" % (loss, step))
      # ProgressHook is the Estimator's progress line (steps/s, time remaining); it takes the
      # step before the one that ran, as its after_run reads it from the session.
      progress.after_run(None, tf1.train.SessionRunValues(results=step - 1, options=None,
                                                          run_metadata=None))
      if logged:
        tf1.logging.info("loss = %s, step = %d", np.float32(loss), step)
        rate_origin = self._write_summaries(step, loss, float(learning_rate), rate_origin)
      if rate_origin is None:
        rate_origin = (step, time.time())
      if step - last_saved >= self._save_checkpoints_steps:
        self._save_checkpoint(step)
        last_saved = step
    self._summary_writer.flush()
    if step != last_saved:
      self._save_checkpoint(step)
    return TrainResult(step, progress.last_rate)

  def _write_summaries(self, step, loss, learning_rate, rate_origin):
    """Writes the Estimator's scalars of `step` (under the default summary writer).

    Args:
      step: the global step after the update (the events' step).
      loss: the step's loss (the global batch's mean).
      learning_rate: the step's rate.
      rate_origin: (step, time) global_step/sec counts from, or None (none written).

    Returns:
      The next rate_origin: (step, now).
    """
    scalars = [("loss", loss), ("learning_rate", learning_rate)]
    now = time.time()
    if rate_origin is not None and now > rate_origin[1] and step > rate_origin[0]:
      scalars.append(("global_step/sec", (step - rate_origin[0]) / (now - rate_origin[1])))
    # tf.compat.v1 Summary protos (simple_value), as the Estimator writes them: TensorBoard
    # shows both engines' runs alike, and the TensorBoard package is not needed.
    summary = tf1.Summary(value=[tf1.Summary.Value(tag=tag, simple_value=value)
                                 for tag, value in scalars])
    with self._summary_writer.as_default():
      tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=step)
    return step, now

  def _distributed_step(self, iterator, record_summaries):
    """One training step on every replica.

    Args:
      iterator: the distributed dataset's iterator.
      record_summaries: bool scalar Tensor: write the model function's summaries of this step.

    Returns:
      (the global batch's mean loss, the step's learning rate).
    """
    graph = tf1.get_default_graph()
    if not graph.get_collection(tf1.GraphKeys.GLOBAL_STEP):
      # modeling.dropout keys its masks on the graph's global step: step-seeded dropout.
      graph.add_to_collection(tf1.GraphKeys.GLOBAL_STEP, self._global_step)
    # The Estimator's step of the summaries: the global step after the update. Made in a
    # scope of its own: an op at the graph's root before the model would shift the model's
    # root op names (`add` -> `add_1`), on which modeling.dropout keys its masks.
    with tf.name_scope("summary_step"):
      summary_step = self._global_step + 1
    # No default writer here: the model's tf.compat.v1.summary calls make Summary protos (in
    # the graph's SUMMARIES collection, the first replica's), as in the Estimator's graph.
    with warnings.catch_warnings():
      # tf.compat.v1.summary without a default writer in TF2 warns that it makes a TF1 summary
      # op: what the engine collects and writes.
      warnings.filterwarnings("ignore", message="Cannot activate TF2 compatibility support")
      losses, learning_rates = self.strategy.run(self._replica_step, args=(next(iterator),))
    summaries = graph.get_collection(tf1.GraphKeys.SUMMARIES)
    if summaries and not self.on_tpu:
      with self._summary_writer.as_default(), tf.summary.record_if(record_summaries):
        tf.summary.experimental.write_raw_pb(tf.stack(summaries), step=summary_step)
    self._global_step.assign_add(1)
    return (self.strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None),
            self.strategy.experimental_local_results(learning_rates)[0])

  def _replica_step(self, features):
    """The model and optimization.create_optimizer's update on one replica's batch: returns
    (the replica's loss, the learning rate).

    With a loss scale, create_optimizer's too: the gradients of the scaled loss are unscaled
    (and accumulated), a step whose gradients are not finite updates no weight or slot (the
    global step still counts it), and a dynamic scale adapts after each update.
    """
    with export_utils.in_variables(self._variables):
      loss, _ = self._model_fn(features, True)
    scale, scale_update = self._loss_scale_ops()
    grads = optimization.scaled_gradients(loss, self._trainable, scale)
    untrained = [v.name for v, g in zip(self._trainable, grads) if g is None]
    if untrained:
      # The variables were made from an input without labels (_trained_variable_names).
      raise ValueError("the loss has no gradient for %s: predict() before train() in one "
                       "engine; train first" % ", ".join(untrained[:3]))
    apply_now = None
    if self._accumulation_steps > 1:
      grads, apply_now = self._accumulate(grads)
    if self.num_replicas > 1:
      if self._multi_worker:
        # Collective all-reduce takes its destinations from the values' devices: each gradient
        # on its variable's (the graph code places no op).
        grads = [_on_device_of(variable, grad) for variable, grad in zip(self._trainable, grads)]
      # The global batch's gradient, clipped as one device clips it.
      grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN,
                                                             grads)
    grads, finite = optimization.clip_gradients(grads, self._clip_norm,
                                                skip_non_finite=scale is not None)
    # The schedule counts updates; the global step counts micro-batches.
    learning_rate = optimization.learning_rate_schedule(
        self._global_step // self._accumulation_steps, self._learning_rate,
        self._num_train_steps, self._num_warmup_steps, schedule=self._schedule)
    apply_condition = apply_now
    if finite is not None:
      apply_condition = finite if apply_now is None else tf.logical_and(apply_now, finite)
    update = self._optimizer.apply_global_gradients(list(zip(grads, self._trainable)),
                                                    learning_rate, apply_condition)
    if scale_update is not None:
      # After the update, as create_optimizer's train op runs it.
      with tf.control_dependencies([update]):
        scale_update(finite, apply_now)
    return loss, learning_rate

  def _loss_scale_ops(self):
    """optimization.loss_scale_and_update over the engine's loss-scale variables, and the
    Estimator's `loss_scale` summary: (scale, update_fn), or (None, None) without scaling."""
    if self._loss_scale is None:
      return None, None
    with export_utils.in_variables(self._loss_scale_variables):
      scale, scale_update = optimization.loss_scale_and_update(self._loss_scale)
    if not self.on_tpu:
      tf1.summary.scalar("loss_scale", scale)
    return scale, scale_update

  def _accumulate(self, grads):
    """Adds this micro-batch's gradients to the accumulators (optimization.create_optimizer's).

    Args:
      grads: list of dense gradients, one per trained variable.

    Returns:
      (mean_grads, apply_now): the mean of the accumulated gradients (what the update applies
      when apply_now) and a bool scalar that is True on the last micro-batch of each group,
      after which the accumulators are zero.
    """
    apply_now = tf.equal((self._global_step + 1) % self._accumulation_steps, 0)
    mean_grads = []
    for grad, variable in zip(grads, self._trainable):
      accumulator = self._accumulators["%s/%s" % (variable.name.split(":")[0], GRAD_ACCUM)]
      total = accumulator.read_value() + grad
      assign = accumulator.assign(tf.where(apply_now, tf.zeros_like(total), total))
      # Using the mean runs the accumulator update first.
      with tf.control_dependencies([assign]):
        mean_grads.append(total / float(self._accumulation_steps))
    return mean_grads, apply_now

  def _check_static_shapes(self, feature_spec, purpose):
    """On TPU, one line when an input has a dimension of unknown size."""
    if not self.on_tpu:
      return
    for name, spec in sorted(feature_spec.items()):
      if not spec.shape.is_fully_defined():
        common.fail("TPUStrategy needs static shapes: the %s input's %s is %s (pad every batch "
                    "to --max_seq_length: --padding=max_length, drop_remainder)" %
                    (purpose, name, spec.shape))

  # -- prediction -------------------------------------------------------------------------

  def predict(self, input_fn, checkpoint_path=None, batch_size=8):
    """Yields the model's predictions example by example, as Estimator.predict does.

    Args:
      input_fn: input_fn(params) -> tf.data.Dataset of feature dicts in batches of
        params["batch_size"], read once.
      checkpoint_path: the weights (None: the latest checkpoint in output_dir; without one,
        the initial weights: init_checkpoint / random, with a warning).
      batch_size: the batch size (global; on TPU split over the cores).

    Yields:
      dict prediction name -> numpy value of one example.
    """
    if self.on_tpu and _has_dynamic_batch(input_fn({"batch_size": batch_size}).element_spec):
      # A last partial batch: padded to a full one, its padding rows not yielded.
      partial_input_fn = input_fn
      input_fn = lambda params: _full_batches(partial_input_fn(params), params["batch_size"])
    for _, outputs in self.predict_batches(input_fn, checkpoint_path, batch_size):
      real_rows = outputs.pop(_REAL_ROWS, None)
      for i in range(len(next(iter(outputs.values())))):
        if real_rows is None or real_rows[i]:
          yield {name: value[i] for name, value in outputs.items()}

  def predict_batches(self, input_fn, checkpoint_path=None, batch_size=8, steps=None):
    """Yields the model's loss and predictions batch by batch (what an evaluation sums up).

    Args:
      input_fn, checkpoint_path, batch_size: as predict().
      steps: read at most this many batches (None: the whole input).

    Yields:
      (the batch's loss as a float, or None when the model has none; dict prediction name ->
      numpy value [batch, ...]).
    """
    tf.random.set_seed(self._seed)
    dataset = input_fn({"batch_size": batch_size})
    if steps is not None:
      dataset = dataset.take(steps)
    feature_spec = dataset.element_spec
    self._check_static_shapes(feature_spec, "prediction")
    checkpoint = checkpoint_path or tf1.train.latest_checkpoint(self.output_dir)
    if not checkpoint:
      tf1.logging.warning("No checkpoint in %s: predicting with the initial weights",
                          self.output_dir)
    self._load(feature_spec, checkpoint, with_slots=False)
    predict_step = self._predict_step(feature_spec)
    if self.on_tpu:
      dataset = self.strategy.experimental_distribute_dataset(dataset)
    for batch in dataset:
      loss, outputs = predict_step(batch)
      yield (None if loss is None else float(loss),
             {name: value.numpy() for name, value in outputs.items()})

  def _predict_step(self, feature_spec):
    """The tf.function of one prediction batch for inputs of feature_spec (traced once):
    features -> (loss or None, predictions)."""
    key = tuple(sorted((name, str(spec)) for name, spec in feature_spec.items()))
    if key not in self._predict_steps:
      def replica_predict(features):
        features = dict(features)
        real_rows = features.pop(_REAL_ROWS, None)  # (predict's padding on TPU)
        with export_utils.in_variables(self._variables):
          loss, outputs = self._model_fn(features, False)
        if real_rows is not None:
          outputs = dict(outputs, **{_REAL_ROWS: real_rows})
        return loss, outputs

      if self.on_tpu:
        def step(features):
          loss, outputs = self.strategy.run(replica_predict, args=(features,))
          if loss is not None:
            loss = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, loss, axis=None)
          return loss, {name: tf.concat(self.strategy.experimental_local_results(value), axis=0)
                        for name, value in outputs.items()}
        self._predict_steps[key] = tf.function(step, autograph=False)
      else:
        self._predict_steps[key] = tf.function(replica_predict, input_signature=[feature_spec],
                                                autograph=False)
    return self._predict_steps[key]

  def variable_values(self, trainable_only=True):
    """{name: numpy value} of the model's variables now (a distributed one's first replica).

    Args:
      trainable_only: only the trained variables (what pretraining_utils.weights_digest hashes).

    Returns:
      dict name -> numpy array.
    """
    with self.strategy.scope():
      return {name: variable.read_value().numpy() for name, variable in self._variables.items()
              if variable.trainable or not trainable_only}

  def predictor(self, batch_size):
    """An object whose predict(input_fn, checkpoint_path=None) predicts in batches of
    batch_size (what classifier_inference.Inference asks of an Estimator)."""
    return _Predictor(self, batch_size)


class _Predictor(object):
  """Engine.predict at one batch size, with Estimator.predict's arguments."""

  def __init__(self, engine, batch_size):
    self._engine = engine
    self._batch_size = batch_size

  def predict(self, input_fn, checkpoint_path=None):
    return self._engine.predict(input_fn, checkpoint_path, self._batch_size)
