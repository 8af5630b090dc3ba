# coding=utf-8
"""Estimator plumbing shared by every tool that trains or scores with an Estimator.

One place for: the TPU / distribution / checkpointing flags, building a TPUEstimator (TPU, or
CPU/GPU with use_tpu=False) or an Estimator with a tf.distribute strategy, loading an
init_checkpoint, the train op of --precision / --fused_optimizer (create_train_op, with the
fp16 saver LossScaleOptionalSaver; each tool declares the shared flags its model_fn implements
in SUPPORTED_MODEL_FN_FLAGS), resuming (check_resume, resume_skip_batches), logging progress
with steps/s and time remaining, TFRecord input and length checks, and writing eval results.
The model config (--bert_config_file with its overrides) is model_config's (load_config).

Model functions return `TPUEstimatorSpec` in every mode; with a distribution strategy they are
wrapped to return the equivalent `EstimatorSpec`, so each script has one model_fn.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os
import sys
import time

from absl import flags
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import batch_padding
from realformer_tf import tf_startup
import modeling
import optimization

tf1 = tf.compat.v1

# TensorFlow 2.16 removed the Estimator (and TPUEstimator). The model library and the tools that
# need no training loop import this module on any TensorFlow; the training scripts call
# require_estimator() first, which says in one line which environment to use.
ESTIMATOR_TF_VERSION = "2.15"


def has_estimator():
  """Whether this TensorFlow still has tf.compat.v1.estimator (TF <= 2.15)."""
  try:
    return hasattr(tf1, "estimator") and hasattr(tf1.estimator, "tpu")
  except (ImportError, AttributeError):
    return False


def require_estimator(script=None):
  """Fails with one line when this TensorFlow has no Estimator (TF >= 2.16).

  Args:
    script: the script's file name for the message (default: sys.argv[0]).

  Returns:
    tf.compat.v1.estimator.
  """
  if not has_estimator():
    script = script or os.path.basename(sys.argv[0] or "this script")
    common.fail(
        "%s needs TensorFlow %s (TPUEstimator / Estimator, removed in TF 2.16); this is TF %s: "
        "run it in the project's TF %s environment: `bash run.sh python %s ...` (creates .venv "
        "from requirements.txt)" % (script, ESTIMATOR_TF_VERSION, tf.__version__,
                                     ESTIMATOR_TF_VERSION, script))
  return tf1.estimator

DISTRIBUTION_STRATEGIES = ("none", "mirrored", "multi_worker_mirrored")

# Shared flags that a script's model_fn must implement, with their "off" value. make_estimator
# fails on any of them set in a script that has not declared it (supported_flags), so a script
# never ignores one silently.
MODEL_FN_FLAGS = {"precision": "fp32", "fused_optimizer": False}
# Each tool declares the ones its model_fn implements in a module-level
# SUPPORTED_MODEL_FN_FLAGS tuple; the error names the tools that do (TOOLS_SUPPORTING).
SUPPORTED_FLAGS_NAME = "SUPPORTED_MODEL_FN_FLAGS"
# What --use_xla adds to TF_XLA_FLAGS on a machine without GPUs (tf_startup.XLA_CPU_FLAGS).
XLA_CPU_FLAGS = tf_startup.XLA_CPU_FLAGS


def define_estimator_flags():
  """Defines the official TPU flags plus checkpointing and tf.distribute flags (call once).

  Also prepares TF_XLA_FLAGS for --use_xla (set_xla_cpu_flags): TensorFlow reads it once, before
  the flags are parsed (inside absl's app.run is already too late).
  """
  set_xla_cpu_flags()
  flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")
  flags.DEFINE_string(
      "tpu_name", None,
      "The Cloud TPU to use for training. This should be either the name used when creating "
      "the Cloud TPU, or a grpc://ip.address.of.tpu:8470 url.")
  flags.DEFINE_string(
      "tpu_zone", None,
      "[Optional] GCE zone where the Cloud TPU is located in. If not specified, we will "
      "attempt to automatically detect the GCE project from metadata.")
  flags.DEFINE_string(
      "gcp_project", None,
      "[Optional] Project name for the Cloud TPU-enabled project. If not specified, we will "
      "attempt to automatically detect the GCE project from metadata.")
  flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
  flags.DEFINE_integer(
      "num_tpu_cores", 8, "Only used if `use_tpu` is True. Total number of TPU cores to use.")
  flags.DEFINE_integer("iterations_per_loop", 1000,
                       "How many steps to make in each estimator call.")
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
  flags.DEFINE_integer("keep_checkpoint_max", 5, "How many recent checkpoints to keep.")
  flags.DEFINE_enum(
      "distribution_strategy", "none", list(DISTRIBUTION_STRATEGIES),
      "tf.distribute strategy for CPU/GPU training (through RunConfig train_distribute): none, "
      "mirrored (all local GPUs, or --num_gpus), multi_worker_mirrored (TF_CONFIG).")
  flags.DEFINE_integer("num_gpus", None,
                       "With --distribution_strategy=mirrored: number of GPUs (default: all).")
  flags.DEFINE_integer("seed", 12345, "Random seed for initialisation, dropout and shuffling.")
  flags.DEFINE_integer("log_every_n_steps", 10, "How often to log progress (steps).")
  flags.DEFINE_enum(
      "precision", "fp32", ["fp32", "bf16", "fp16"],
      "Compute dtype of the encoder's matmuls: fp32, bf16 or fp16 (fp16 trains with dynamic "
      "loss scaling). Variables, optimizer slots and checkpoints are float32 in all three; "
      "LayerNorm statistics, softmax and the residual-attention sum stay float32.")
  flags.DEFINE_bool(
      "use_xla", False,
      "CPU/GPU: XLA auto-clustering of the training and eval graphs (session config). On CPU "
      "only element-wise ops are clustered. Same math, different float rounding. TPU programs "
      "are always XLA-compiled, so this is refused with --use_tpu.")
  flags.DEFINE_bool(
      "fused_optimizer", False,
      "Apply AdamW with TensorFlow's fused Adam kernel (one pass per variable): faster; each "
      "update is ~6e-6 relatively larger than the official one (the kernel's float32 "
      "1 - beta_2).")
  # Every job here evaluates / predicts from trained weights and takes an --init_checkpoint.
  checkpoint_utils.define_trained_weights_flags()


def validate_estimator_flags(flag_values):
  """One-line errors for flag combinations that cannot work."""
  if flag_values.use_tpu and flag_values.distribution_strategy != "none":
    common.fail("--distribution_strategy=%s cannot be combined with --use_tpu (TPUEstimator "
                "distributes over TPU cores itself)" % flag_values.distribution_strategy)
  if flag_values.use_tpu and not flag_values.tpu_name and not flag_values.master:
    common.fail("--use_tpu needs --tpu_name (or --master)")
  if flag_values.num_gpus is not None and flag_values.distribution_strategy != "mirrored":
    common.fail("--num_gpus is only used with --distribution_strategy=mirrored")
  for name in ("iterations_per_loop", "save_checkpoints_steps", "keep_checkpoint_max"):
    if getattr(flag_values, name) < 1:
      common.fail("--%s must be >= 1, got %d" % (name, getattr(flag_values, name)))
  use_xla = getattr(flag_values, "use_xla", False)
  precision = getattr(flag_values, "precision", "fp32")
  if flag_values.use_tpu and use_xla:
    common.fail("--use_xla is for CPU/GPU: with --use_tpu the TPU program is always compiled "
                "with XLA")
  if flag_values.use_tpu and getattr(flag_values, "fused_optimizer", False):
    common.fail("--fused_optimizer is for CPU/GPU: with --use_tpu XLA fuses the update already")
  if flag_values.use_tpu and precision == "fp16":
    common.fail("--precision=fp16 is not supported on TPU (use --precision=bf16)")
  if precision == "fp16" and flag_values.distribution_strategy != "none":
    common.fail("--precision=fp16 (dynamic loss scaling) is not supported with "
                "--distribution_strategy=%s yet (use bf16, or one device)" %
                flag_values.distribution_strategy)


def check_supported(flag_values, supported=(), script=None):
  """Fails with one line when a shared flag is set that this script's model_fn ignores.

  Call it right after flag parsing (make_estimator calls it too, as a backstop).

  Args:
    flag_values: absl FLAGS with the flags of define_estimator_flags.
    supported: names from MODEL_FN_FLAGS that this script implements, e.g. ("precision",).
    script: the tool's name in the message (default: sys.argv[0]'s file name; a module run
      with `python -m package.tool` passes its dotted name).
  """
  script = script or os.path.basename(sys.argv[0] or "this script")
  for name, off in sorted(MODEL_FN_FLAGS.items()):
    value = getattr(flag_values, name, off)
    if name not in supported and value != off:
      shown = ("--%s" % name) if value is True else ("--%s=%s" % (name, value))
      common.fail("%s: not supported by %s yet (it is by %s)" % (
          shown, script, ", ".join(TOOLS_SUPPORTING.get(name, ())) or "no tool"))


# The tools whose model_fn implements each shared flag, as they are run (for the error a tool
# gives when it does not). tests/test_precision.py checks this against every tool's
# SUPPORTED_MODEL_FN_FLAGS.
TOOLS_SUPPORTING = {
    "precision": ("run_classifier.py", "run_ner.py", "run_pretraining.py", "run_squad.py",
                  "etc_model.run_long_tasks", "etc_model.run_pretraining"),
    "fused_optimizer": ("run_classifier.py", "run_ner.py", "run_pretraining.py",
                        "run_squad.py", "etc_model.run_long_tasks",
                        "etc_model.run_pretraining"),
}


def precision_kwargs(flag_values):
  """The model_fn_builder keyword arguments that carry --precision and --fused_optimizer.

  Args:
    flag_values: absl FLAGS with the flags of define_estimator_flags.

  Returns:
    dict precision, fused_optimizer and keep_checkpoint_max (the fp16 saver keeps as many
    checkpoints as the Estimator's default one would), for create_train_op.
  """
  return {"precision": flag_values.precision, "fused_optimizer": flag_values.fused_optimizer,
          "keep_checkpoint_max": flag_values.keep_checkpoint_max}


def loss_scale_for(precision):
  """optimization.create_optimizer's loss_scale for a --precision: "dynamic" for fp16, else None.

  Args:
    precision: "fp32", "bf16", "fp16" or a dtype (modeling.get_compute_dtype).
  """
  return "dynamic" if modeling.get_compute_dtype(precision) == tf.float16 else None


def create_train_op(loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
                    precision="fp32", fused_optimizer=False, keep_checkpoint_max=5,
                    **optimizer_kwargs):
  """A model_fn's train op: optimization.create_optimizer as --precision / --fused_optimizer ask.

  fp16 trains with dynamic loss scaling (loss_scale_for) and, off TPU, saves and restores
  through LossScaleOptionalSaver (put in the SAVERS collection, which Estimator uses instead of
  its default Saver, with the same settings), so that it also resumes a fp32 / bf16 job's
  checkpoint. fp32 and bf16 make exactly the graph of create_optimizer without these arguments.

  Args:
    loss: float32 scalar Tensor.
    learning_rate: peak learning rate.
    num_train_steps: number of optimizer updates.
    num_warmup_steps: number of warm-up updates.
    use_tpu: TPU (CrossShardOptimizer; fp16 is refused there by validate_estimator_flags).
    precision: "fp32", "bf16" or "fp16" (the model's compute dtype).
    fused_optimizer: create_optimizer(fused=True).
    keep_checkpoint_max: checkpoints the fp16 saver keeps (--keep_checkpoint_max).
    **optimizer_kwargs: more create_optimizer arguments (gradient_accumulation_steps, ...).

  Returns:
    The train op (which also increments the global step).
  """
  loss_scale = loss_scale_for(precision)
  train_op = optimization.create_optimizer(
      loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu, loss_scale=loss_scale,
      fused=fused_optimizer, **optimizer_kwargs)
  if loss_scale is not None and not use_tpu:
    # Built after the optimizer: it lists the loss-scale variables.
    tf1.add_to_collection(tf1.GraphKeys.SAVERS, LossScaleOptionalSaver(
        sharded=True, max_to_keep=keep_checkpoint_max, keep_checkpoint_every_n_hours=10000,
        defer_build=True, save_relative_paths=True))
  return train_op


class LossScaleOptionalSaver(tf1.train.Saver):
  """A Saver for --precision=fp16 jobs that also restores checkpoints without a loss scale.

  The checkpoint of a fp32 or bf16 job has every variable of a fp16 job but its loss-scale
  state (optimization.LOSS_SCALE_VARIABLE, LOSS_SCALE_GOOD_STEPS_VARIABLE): restoring it into a
  fp16 job restores all the rest and starts the loss scale afresh. Build it after the
  optimizer (it lists the graph's variables then).
  """

  def __init__(self, **kwargs):
    super(LossScaleOptionalSaver, self).__init__(**kwargs)
    names = (optimization.LOSS_SCALE_VARIABLE, optimization.LOSS_SCALE_GOOD_STEPS_VARIABLE)
    self._loss_scale_variables = [v for v in tf1.global_variables() if v.op.name in names]
    self._without_loss_scale = tf1.train.Saver(
        var_list=[v for v in tf1.global_variables() if v.op.name not in names], sharded=True)

  def restore(self, sess, save_path):
    """Restores save_path; without loss-scale state there, initialises it instead."""
    present = set(name for name, _ in tf.train.list_variables(save_path))
    if all(v.op.name in present for v in self._loss_scale_variables):
      return super(LossScaleOptionalSaver, self).restore(sess, save_path)
    tf1.logging.info("%s has no loss scale (trained in another precision): the loss scale "
                     "starts at %g", save_path, optimization.LOSS_SCALE_INITIAL)
    self._without_loss_scale.restore(sess, save_path)
    sess.run([v.initializer for v in self._loss_scale_variables])
    return None


def session_config(flag_values):
  """The session config of make_estimator: Estimator's default, plus XLA with --use_xla.

  Args:
    flag_values: FLAGS with use_xla (absent or False: None, Estimator's own default).

  Returns:
    A tf.compat.v1.ConfigProto, or None.
  """
  if not getattr(flag_values, "use_xla", False):
    return None
  if not tf_startup.has_gpu_devices() and not _xla_clusters_cpu():
    common.fail("--use_xla: XLA auto-clustering is off for the CPU in this process (TensorFlow "
                "read TF_XLA_FLAGS before it was set); start it with TF_XLA_FLAGS='%s'" %
                " ".join(XLA_CPU_FLAGS))
  config = tf1.ConfigProto(allow_soft_placement=True)
  # Estimator's default session config, which a given one replaces.
  config.graph_options.rewrite_options.meta_optimizer_iterations = (
      config.graph_options.rewrite_options.ONE)
  config.graph_options.optimizer_options.global_jit_level = tf1.OptimizerOptions.ON_1
  return config


# Kept under this name: tf_startup sets the flags before TensorFlow lists its devices.
set_xla_cpu_flags = tf_startup.set_xla_cpu_flags


def _xla_clusters_cpu():
  """Whether a session with global_jit_level ON_1 compiles a small element-wise graph."""
  config = tf1.ConfigProto()
  config.graph_options.optimizer_options.global_jit_level = tf1.OptimizerOptions.ON_1
  with tf.Graph().as_default():
    x = tf1.placeholder(tf.float32, [4])
    y = tf.tanh(x * 2.0 + 1.0) * x
    metadata = tf1.RunMetadata()
    with tf1.Session(config=config) as sess:
      sess.run(y, {x: [1.0, 2.0, 3.0, 4.0]},
               options=tf1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
  return any(node.op in ("_XlaCompile", "XlaLaunch", "_XlaRun")
             for graph in metadata.partition_graphs for node in graph.node)


def make_distribution_strategy(name, num_gpus=None):
  """Creates the tf.distribute strategy named by --distribution_strategy (None for "none")."""
  if name == "none":
    return None
  if name == "mirrored":
    devices = None
    if num_gpus:
      devices = ["/gpu:%d" % i for i in range(num_gpus)]
    elif not tf.config.list_physical_devices("GPU"):
      # Several logical CPUs (tests, or a CPU-only demo) if the process configured them.
      cpus = tf.config.list_logical_devices("CPU")
      if len(cpus) > 1:
        # Collective all-reduce between logical CPUs can exhaust a small inter-op thread
        # pool and hang; reducing on one device cannot.
        return tf.distribute.MirroredStrategy(
            devices=[d.name for d in cpus],
            cross_device_ops=tf.distribute.ReductionToOneDevice())
    return tf.distribute.MirroredStrategy(devices=devices)
  if name == "multi_worker_mirrored":
    if not os.environ.get("TF_CONFIG"):
      common.fail("--distribution_strategy=multi_worker_mirrored needs the TF_CONFIG "
                  "environment variable (cluster and task of this worker)")
    return tf.distribute.MultiWorkerMirroredStrategy()
  common.fail("--distribution_strategy=%s: unknown (use one of %s)" %
              (name, ", ".join(DISTRIBUTION_STRATEGIES)))


def make_estimator(model_fn, flag_values, output_dir, train_batch_size, eval_batch_size=8,
                   predict_batch_size=8, params=None, supported_flags=()):
  """Builds a TPUEstimator, or an Estimator with a tf.distribute strategy.

  Args:
    model_fn: an Estimator model_fn returning TPUEstimatorSpec.
    flag_values: absl FLAGS with the flags of define_estimator_flags.
    output_dir: model directory.
    train_batch_size: global training batch size.
    eval_batch_size: global eval batch size.
    predict_batch_size: global predict batch size.
    params: extra params dict passed to model_fn and input_fn.
    supported_flags: the MODEL_FN_FLAGS (e.g. "precision") that model_fn implements; any
      other one set on the command line fails (check_supported).

  Returns:
    The estimator. input_fns read the batch size from params["batch_size"] in every case (per
    replica under a tf.distribute strategy, so that train_batch_size is the global batch).
    With --use_xla its session config turns on XLA auto-clustering (session_config).
  """
  validate_estimator_flags(flag_values)
  check_supported(flag_values, supported_flags)
  config = session_config(flag_values)
  tf1.gfile.MakeDirs(output_dir)
  strategy = make_distribution_strategy(flag_values.distribution_strategy,
                                        flag_values.num_gpus)
  if strategy is None:
    tpu_cluster_resolver = None
    if flag_values.use_tpu and flag_values.tpu_name:
      tpu_cluster_resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
          flag_values.tpu_name, zone=flag_values.tpu_zone, project=flag_values.gcp_project)
    is_per_host = tf1.estimator.tpu.InputPipelineConfig.PER_HOST_V2
    run_config = tf1.estimator.tpu.RunConfig(
        cluster=tpu_cluster_resolver,
        master=flag_values.master,
        model_dir=output_dir,
        tf_random_seed=flag_values.seed,
        save_checkpoints_steps=flag_values.save_checkpoints_steps,
        keep_checkpoint_max=flag_values.keep_checkpoint_max,
        session_config=config,
        # Off TPU, ProgressHook logs steps/s and time remaining instead.
        log_step_count_steps=(flag_values.log_every_n_steps if flag_values.use_tpu else None),
        tpu_config=tf1.estimator.tpu.TPUConfig(
            iterations_per_loop=flag_values.iterations_per_loop,
            num_shards=flag_values.num_tpu_cores,
            per_host_input_for_training=is_per_host))
    # If TPU is not available, this will fall back to normal Estimator on CPU or GPU.
    return tf1.estimator.tpu.TPUEstimator(
        use_tpu=flag_values.use_tpu,
        model_fn=model_fn,
        config=run_config,
        params=params,
        train_batch_size=train_batch_size,
        eval_batch_size=eval_batch_size,
        predict_batch_size=predict_batch_size)

  # Under a strategy each replica pulls its own batches from the dataset: the input_fn batch is
  # per replica, while --train_batch_size stays the total (the official flag's meaning).
  num_replicas = strategy.num_replicas_in_sync
  if train_batch_size % num_replicas:
    common.fail("--train_batch_size=%d is not divisible by the %d replicas of "
                "--distribution_strategy=%s" % (train_batch_size, num_replicas,
                                                 flag_values.distribution_strategy))
  tf1.logging.info("%d replicas in sync: %d examples per replica per step", num_replicas,
                   train_batch_size // num_replicas)
  estimator_lib = require_estimator()
  batch_sizes = {estimator_lib.ModeKeys.TRAIN: train_batch_size // num_replicas,
                 estimator_lib.ModeKeys.EVAL: eval_batch_size,
                 estimator_lib.ModeKeys.PREDICT: predict_batch_size}

  def estimator_model_fn(features, labels, mode, params):
    spec = model_fn(features, labels, mode, dict(params, batch_size=batch_sizes[mode]))
    return spec.as_estimator_spec()

  def wrap_input_fn(input_fn, mode):
    def fn(params=None):
      return input_fn(dict(params or {}, batch_size=batch_sizes[mode]))
    return fn

  run_config = estimator_lib.RunConfig(
      model_dir=output_dir,
      tf_random_seed=flag_values.seed,
      save_checkpoints_steps=flag_values.save_checkpoints_steps,
      keep_checkpoint_max=flag_values.keep_checkpoint_max,
      log_step_count_steps=None,
      session_config=config,
      train_distribute=strategy,
      eval_distribute=None)
  estimator = estimator_lib.Estimator(
      model_fn=estimator_model_fn, config=run_config, params=dict(params or {}))
  return _DistributedEstimatorAdapter(estimator, wrap_input_fn)


class _DistributedEstimatorAdapter(object):
  """Gives a plain Estimator the input_fn(params) convention of TPUEstimator."""

  def __init__(self, estimator, wrap_input_fn):
    self._estimator = estimator
    self._wrap = wrap_input_fn
    self._modes = require_estimator().ModeKeys

  @property
  def estimator(self):
    """The wrapped tf.compat.v1.estimator.Estimator (for train_and_evaluate)."""
    return self._estimator

  def wrap_input_fn(self, input_fn, mode):
    """Returns input_fn adapted to the wrapped Estimator for `mode`."""
    return self._wrap(input_fn, mode)

  def train(self, input_fn, **kwargs):
    return self._estimator.train(self._wrap(input_fn, self._modes.TRAIN), **kwargs)

  def evaluate(self, input_fn, **kwargs):
    return self._estimator.evaluate(self._wrap(input_fn, self._modes.EVAL), **kwargs)

  def predict(self, input_fn, **kwargs):
    return self._estimator.predict(self._wrap(input_fn, self._modes.PREDICT), **kwargs)

  def __getattr__(self, name):
    return getattr(self._estimator, name)


def init_checkpoint_scaffold_fn(init_checkpoint, use_tpu, tvars=None, allow_unmatched=False,
                                encoder_scopes=None):
  """Loads `init_checkpoint` into the graph's variables; returns the TPU scaffold_fn or None.

  Call it after the model's variables exist. Shapes and dtypes must match, and the checkpoint
  must supply every encoder variable of the model (checkpoint_utils.check_init_matches: a
  checkpoint of another model is one line; task heads may start fresh).

  Args:
    init_checkpoint: checkpoint path or None.
    use_tpu: on TPU the restore must happen inside a scaffold function.
    tvars: variables to initialise (default: all trainable).
    allow_unmatched: accept a checkpoint lacking encoder variables (a WARNING counts them): the
      command's --allow_unmatched_init, passed down through its model_fn_builder.
    encoder_scopes: the scope prefixes of the model's encoder (a
      checkpoint_utils.ENCODER_SCOPES entry); None: every family's (the graph holds one).

  Returns:
    scaffold_fn for TPUEstimatorSpec (None when not needed).
  """
  if not init_checkpoint:
    return None
  if not tf1.train.checkpoint_exists(init_checkpoint):
    common.fail("--init_checkpoint=%s: no checkpoint there" % init_checkpoint)
  tvars = tvars if tvars is not None else tf1.trainable_variables()
  try:
    # Shapes and dtypes are compared here, before the TPU scaffold, so a bad checkpoint is
    # one line on every platform.
    assignment_map, _ = modeling.get_assignment_map_from_checkpoint(tvars, init_checkpoint)
  except ValueError as e:
    common.fail("--init_checkpoint=%s: %s" % (init_checkpoint, e))
  # A checkpoint of another model would otherwise train from random with only an INFO line.
  checkpoint_utils.check_init_matches(init_checkpoint, assignment_map, [v.name for v in tvars],
                                      encoder_scopes=encoder_scopes,
                                      allow_unmatched=allow_unmatched)
  if use_tpu:
    def tpu_scaffold():
      modeling.init_from_checkpoint(init_checkpoint, tvars)
      return tf1.train.Scaffold()
    return tpu_scaffold
  modeling.init_from_checkpoint(init_checkpoint, tvars)
  return None


class StopOnSignalHook(tf1.train.SessionRunHook):
  """On SIGTERM / SIGINT (common.STOP_SIGNALS), finishes the current step and stops training.

  The Estimator's saver then writes a checkpoint at that step. The caller must then call
  common.STOP_SIGNALS.exit_if_stopped() before any evaluation or final-results file, so the
  job exits 130 / 143 and never looks finished.
  """

  def begin(self):
    common.STOP_SIGNALS.install()

  def after_run(self, run_context, run_values):
    if common.STOP_SIGNALS.stopped:
      run_context.request_stop()


class ProgressHook(tf1.train.SessionRunHook):
  """Logs steps/s, examples/s and time remaining while training (through common.ProgressMeter).

  Either number may be unknown (None) when the official model_fn_builder / input_fn_builder are
  used as a library: the lines then leave out the time remaining or the examples/s.
  """

  def __init__(self, total_steps, batch_size, every_n_secs=10.0, label="train"):
    """Creates the hook.

    Args:
      total_steps: the global step at which training ends, or None when unknown.
      batch_size: examples per global step (all replicas), or None when unknown.
      every_n_secs: minimum seconds between log lines.
      label: prefix of the log lines.
    """
    self._total_steps = total_steps
    self._batch_size = batch_size
    self._label = label
    self._global_step = None
    self._meter = common.ProgressMeter(total_steps, unit="steps", min_interval_s=every_n_secs,
                                       log_fn=tf1.logging.info)
    self.last_rate = None

  def begin(self):
    self._global_step = tf1.train.get_global_step()

  def before_run(self, run_context):
    return tf1.train.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    step = int(run_values.results) + 1
    meter = self._meter
    if meter.start_done is None:
      # The first step includes graph warm-up: rates count from after it.
      meter.start(step)
      return
    rate = meter.rate_at(step)
    if rate > 0:
      self.last_rate = rate
    extra = "(%.1f examples/s)" % (rate * self._batch_size) if self._batch_size else ""
    meter.update(step, extra=extra,
                 force=self._total_steps is not None and step >= self._total_steps,
                 prefix="%s: step " % self._label)


def write_eval_results(output_dir, results, name="eval_results"):
  """Writes eval results as `<name>.txt` (official "key = value" lines) and `<name>.json`.

  Args:
    output_dir: directory.
    results: dict of metric name -> number.
    name: file name stem.

  Returns:
    The dict written (numbers converted to Python floats / ints).
  """
  clean = {}
  for key in sorted(results):
    value = results[key]
    if hasattr(value, "item"):
      value = value.item()
    clean[key] = value
  with common.atomic_output(os.path.join(output_dir, name + ".txt")) as writer:
    tf1.logging.info("***** %s *****", name)
    for key, value in clean.items():
      tf1.logging.info("  %s = %s", key, value)
      writer.write("%s = %s\n" % (key, value))
  common.write_json_atomic(os.path.join(output_dir, name + ".json"), clean)
  return clean


def check_resume(output_dir, bert_config, label_list=None, extra_shapes=None,
                 flag_name="output_dir", restore="train"):
  """Before a job writes into `output_dir`: fails if its checkpoint is not one this job resumes.

  The Estimator restores the latest checkpoint there; with a different config (or label list),
  or from a checkpoint made for initialising (lifted, converted, slimmed: no optimizer slots, no
  global_step), that restore fails deep inside TensorFlow after bert_config.json / labels.txt
  were already overwritten. This compares first and leaves the directory untouched.

  Args:
    output_dir: the job's model directory.
    bert_config: the BertConfig the job will build.
    label_list: the job's labels (compared with labels.txt there), or None.
    extra_shapes: dict variable name -> shape of the job's other variables (e.g. the
      classifier's output_weights), or None.
    flag_name: the flag that named output_dir.
    restore: what the job restores from it (check_resumable): "train", "estimator" (evaluation
      or prediction) or "variables" (an export reading the model variables alone).

  Returns:
    The global step of the checkpoint found there, or None when there is none.
  """
  latest, ckpt_shapes = _latest_checkpoint_shapes(output_dir)
  where = "--%s=%s" % (flag_name, output_dir)
  if label_list is not None:
    saved = os.path.join(output_dir, "labels.txt")
    if latest and tf.io.gfile.exists(saved):
      with tf.io.gfile.GFile(saved) as f:
        saved_labels = [line.rstrip("\n") for line in f if line.strip()]
      if saved_labels != list(label_list):
        common.fail("%s: holds a model trained on labels %s (labels.txt) but this job has %s; "
                    "use a new --%s" % (where, ",".join(saved_labels), ",".join(label_list),
                                        flag_name))
  if not latest:
    return None
  want = dict(extra_shapes or {})
  want.update(bert_variable_shapes(bert_config))
  _check_shapes(where, latest, ckpt_shapes, want, flag_name)
  layer_prefix = "bert/encoder/layer_"
  ckpt_layers = {int(n[len(layer_prefix):].split("/")[0]) for n in ckpt_shapes
                 if n.startswith(layer_prefix)}
  if ckpt_layers and max(ckpt_layers) + 1 != bert_config.num_hidden_layers:
    common.fail("%s: its checkpoint %s has %d layers but this job's config has %d; use a new "
                "--%s or the config it was trained with" % (
                    where, os.path.basename(latest), max(ckpt_layers) + 1,
                    bert_config.num_hidden_layers, flag_name))
  check_resumable(where, latest, ckpt_shapes, want, flag_name, restore)
  return _checkpoint_step(latest, ckpt_shapes)


def check_resume_shapes(output_dir, want_shapes, flag_name="output_dir", restore="train"):
  """check_resume for any model: fails if output_dir's checkpoint is not one this job resumes.

  A variable of another shape, a variable of the job's model it lacks, and a checkpoint
  without the global_step or optimizer slots the job restores (one made for initialising) are
  each one line (check_resumable).

  Args:
    output_dir: the job's model directory.
    want_shapes: dict variable name -> shape of variables the job's model builds (all of them,
      or some: only these are compared).
    flag_name: the flag that named output_dir.
    restore: what the job restores from it (check_resumable): "train", "estimator" (evaluation
      or prediction) or "variables" (an export reading the model variables alone).

  Returns:
    The global step of the checkpoint found there, or None when there is none.
  """
  latest, ckpt_shapes = _latest_checkpoint_shapes(output_dir)
  if not latest:
    return None
  where = "--%s=%s" % (flag_name, output_dir)
  _check_shapes(where, latest, ckpt_shapes, want_shapes, flag_name)
  check_resumable(where, latest, ckpt_shapes, want_shapes, flag_name, restore)
  return _checkpoint_step(latest, ckpt_shapes)


# What a job restores from the checkpoint in its output directory (check_resumable).
RESTORE_MODES = ("train", "estimator", "variables")


def restore_mode(do_train, estimator_reads=True):
  """The check_resumable mode of a job: "train", else "estimator", else "variables".

  Args:
    do_train: the job trains.
    estimator_reads: without training, the job evaluates or predicts with the Estimator (an
      export alone reads only the model variables).
  """
  if do_train:
    return "train"
  return "estimator" if estimator_reads else "variables"


def check_resumable(where, latest, ckpt_shapes, want_shapes, flag_name="output_dir",
                    restore="train"):
  """One line when checkpoint `latest` could not be restored into this job's graph.

  Every job restores the model variables; the Estimator (training, evaluation, prediction) also
  the global_step, and training the optimizer slots (`<variable>/adam_m`, ...). A checkpoint
  made for initialising (etc_model.lift_bert_checkpoint, convert_hf_checkpoint.py,
  slim_checkpoint.py, an official release) lacks some of those: it belongs in
  --init_checkpoint, with a new output directory.

  Args:
    where: "--output_dir=DIR" for messages.
    latest: the checkpoint prefix found there.
    ckpt_shapes: its variable -> shape map.
    want_shapes: dict variable name -> shape of (some of) the job's model variables.
    flag_name: the flag that named the directory.
    restore: one of RESTORE_MODES: "train", "estimator" (evaluation or prediction through the
      Estimator) or "variables" (the model variables alone, e.g. an export).
  """
  if restore not in RESTORE_MODES:
    raise ValueError("restore=%r: expected one of %s" % (restore, ", ".join(RESTORE_MODES)))
  start_from = ("a new --%s with --init_checkpoint=%s to start from its weights" %
                (flag_name, latest))
  lacking = [name for name in sorted(want_shapes) if name not in ckpt_shapes]
  if lacking:
    common.fail("%s: its checkpoint %s is not a checkpoint of this job: it lacks %s%s of this "
                "job's model; use the config it was trained with, or %s" % (
                    where, os.path.basename(latest), lacking[0],
                    " and %d more" % (len(lacking) - 1) if len(lacking) > 1 else "", start_from))
  # A model variable's slots are named under it (optimization.py: <var>/adam_m, <var>/adam_v).
  parents = {name.rsplit("/", 1)[0] for name in ckpt_shapes}
  reason = None
  if restore != "variables" and "global_step" not in ckpt_shapes:
    reason = "it has no global_step"
  elif restore == "train" and want_shapes and not any(name in parents for name in want_shapes):
    reason = "it has no optimizer slots"
  if reason:
    common.fail("%s: its checkpoint %s is not a checkpoint of this job: %s (a checkpoint made for "
                "initialising, e.g. lifted, converted or slimmed); use %s" % (
                    where, os.path.basename(latest), reason, start_from))


def _latest_checkpoint_shapes(output_dir):
  """(latest checkpoint prefix, its variable -> shape map), or (None, {}) when there is none."""
  latest = tf1.train.latest_checkpoint(output_dir) if tf.io.gfile.isdir(output_dir) else None
  if not latest:
    return None, {}
  return latest, tf1.train.NewCheckpointReader(latest).get_variable_to_shape_map()


def _check_shapes(where, latest, ckpt_shapes, want, flag_name):
  """One line naming the first variable whose checkpoint shape differs from the wanted one."""
  for name in sorted(want):
    if name in ckpt_shapes and list(ckpt_shapes[name]) != list(want[name]):
      common.fail("%s: its checkpoint %s has %s of shape %s but this job's model needs %s; use "
                  "a new --%s or the config it was trained with" % (
                      where, os.path.basename(latest), name, list(ckpt_shapes[name]),
                      list(want[name]), flag_name))


def _checkpoint_step(latest, ckpt_shapes):
  """The checkpoint's global_step, or None when it has none."""
  if "global_step" not in ckpt_shapes:
    return None
  return int(tf.train.load_checkpoint(latest).get_tensor("global_step"))


def resume_skip_batches(resume_step, flag_values):
  """Training batches a resumed job skips: one per global step when one pipeline feeds it.

  With a seeded, shuffled training stream this makes a job resumed at step k read exactly the
  batches the uninterrupted job read from step k on (dropout masks follow the step as well,
  modeling.dropout), so it ends with the same weights. With a distribution strategy or on TPU
  the pipelines are split per worker / host and the stream restarts (logged).

  Args:
    resume_step: global step of the checkpoint being resumed (None or 0 for a new job).
    flag_values: FLAGS with use_tpu and distribution_strategy.

  Returns:
    Number of batches to skip.
  """
  if not resume_step:
    return 0
  if flag_values.use_tpu or flag_values.distribution_strategy != "none":
    tf1.logging.warning("Resuming at step %d: the input stream restarts from its beginning "
                        "(exact data-order resume needs --distribution_strategy=none)",
                        resume_step)
    return 0
  return resume_step


def latest_global_step(output_dir):
  """The global step of the latest checkpoint in output_dir (0 when there is none)."""
  checkpoint = tf1.train.latest_checkpoint(output_dir)
  if not checkpoint:
    return 0
  try:
    return int(tf1.train.load_variable(checkpoint, "global_step"))
  except (tf.errors.NotFoundError, ValueError):
    return 0


def bert_variable_shapes(bert_config):
  """{variable name: shape} of the BertModel a config builds (no values are created).

  Args:
    bert_config: modeling.BertConfig.

  Returns:
    dict name -> list of ints.
  """
  with tf.Graph().as_default():
    input_ids = tf1.placeholder(tf.int32, [1, 2])
    modeling.BertModel(bert_config, False, input_ids)
    return {v.op.name: v.shape.as_list() for v in tf1.global_variables()}


def without_autotune(dataset):
  """dataset with tf.data's autotuning off (the input pipelines of the training scripts).

  Autotuning runs a background thread that sleeps between rounds, the sleep doubling up to 60 s,
  and closing the session waits for that sleep to end (TF 2.15): a job that trained for a few
  minutes sat idle at its end for up to a minute (measured: a session that had read a dataset
  for 70 s took 12 s to close, 0 s without autotuning; the demo's pre-training and fine-tuning
  ~30 s each). Our pipelines set their parallelism themselves (an AUTOTUNE one keeps tf.data's
  starting value); the records and their order do not change.

  Args:
    dataset: tf.data.Dataset.

  Returns:
    The dataset with options.autotune.enabled False.
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  return dataset.with_options(options)


def decode_record(record, name_to_features):
  """Parses one serialized tf.train.Example; int64 features become int32 (the TPU needs int32).

  Args:
    record: scalar string Tensor.
    name_to_features: dict feature name -> tf.io.FixedLenFeature.

  Returns:
    dict feature name -> Tensor.
  """
  example = tf.io.parse_single_example(record, name_to_features)
  for name in list(example.keys()):
    t = example[name]
    if t.dtype == tf.int64:
      t = tf.cast(t, tf.int32)
    example[name] = t
  return example


def tfrecord_input_fn(input_file, name_to_features, is_training, drop_remainder, seed=None,
                      skip_batches=0, num_parallel_calls=None, padding="max_length",
                      seq_names=("input_ids", "input_mask", "segment_ids")):
  """The fine-tuning scripts' input_fn over one feature TFRecord file.

  Training repeats and shuffles (seeded: a deterministic order) and skips the batches a resumed
  job already trained on (see resume_skip_batches); evaluation reads the file once in order.

  Args:
    input_file: TFRecord path.
    name_to_features: dict feature name -> tf.io.FixedLenFeature.
    is_training: repeat and shuffle.
    drop_remainder: drop a last partial batch (TPU).
    seed: shuffle seed.
    skip_batches: batches to skip on resume (training only).
    num_parallel_calls: parallel record decoding (None: sequential).
    padding: "max_length": every batch [batch, max_seq_length]; "longest": each batch sliced to
      its longest example (batch_padding.trim_batch_to_longest over input_mask); "bucket":
      that rounded up to batch_padding.padding_buckets(max_seq_length).
    seq_names: with padding "longest" / "bucket", the [max_seq_length] features to slice.

  Returns:
    input_fn(params) -> tf.data.Dataset of feature dicts, batch params["batch_size"].
  """
  if padding not in batch_padding.PADDING_MODES:
    raise ValueError("padding=%r: not one of %s" % (padding, batch_padding.PADDING_MODES))
  max_length = name_to_features["input_mask"].shape[0]
  buckets = batch_padding.padding_buckets(max_length) if padding == "bucket" else None

  def input_fn(params):
    batch_size = params["batch_size"]
    d = tf.data.TFRecordDataset(input_file)
    if is_training:
      d = d.repeat()
      d = d.shuffle(buffer_size=100, seed=seed)
      if skip_batches:
        # Records, not batches: skipping before parsing costs only the reads.
        d = d.skip(skip_batches * batch_size)
    d = d.map(lambda record: decode_record(record, name_to_features),
              num_parallel_calls=num_parallel_calls)
    d = d.batch(batch_size=batch_size, drop_remainder=drop_remainder)
    if padding != "max_length":
      d = d.map(lambda batch: batch_padding.trim_batch_to_longest(
          batch, max_length, seq_names=seq_names, buckets=buckets))
    return d

  return input_fn


def tfrecord_feature_lengths(input_file):
  """Reads the first record of a TFRecord file; returns {feature name: length}."""
  for record in tf1.io.tf_record_iterator(input_file):
    example = tf.train.Example.FromString(record)
    lengths = {}
    for key, feature in example.features.feature.items():
      kind = feature.WhichOneof("kind")
      lengths[key] = len(getattr(feature, kind).value)
    return lengths
  return None


def check_tfrecord_lengths(input_files, expected, flag_name="input_file"):
  """Fails before training if a TFRecord's feature lengths differ from the flags.

  Args:
    input_files: list of TFRecord paths (the first record of each is checked).
    expected: dict feature name -> (length, flag description), e.g.
      {"input_ids": (128, "--max_seq_length=128")}.
    flag_name: the flag naming the files, for messages.
  """
  for path in input_files:
    try:
      lengths = tfrecord_feature_lengths(path)
    except tf.errors.OpError as e:
      common.fail("--%s: %s is not a readable TFRecord file (%s)" %
                  (flag_name, path, e.message.splitlines()[0]))
    if lengths is None:
      common.fail("--%s: %s has no records" % (flag_name, path))
    for key, (length, described) in expected.items():
      if key not in lengths:
        common.fail("--%s: %s has no feature '%s' (has: %s)" %
                    (flag_name, path, key, ", ".join(sorted(lengths))))
      if lengths[key] != length:
        common.fail("--%s: %s has %s of length %d but %s" %
                    (flag_name, path, key, lengths[key], described))
