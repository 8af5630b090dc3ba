# coding=utf-8
"""Pre-training step time (forward + backward + AdamW, MLM + NSP heads): ours vs official BERT.

Every variant is built in its own graph and session in one process, and the variants are
interleaved round by round (each round runs --steps_per_round steps of every variant in turn),
so machine load affects all of them alike; ratios are medians of per-round ratios.

The official google-research/bert code is the `bert-tensorflow` PyPI package (its modeling.py,
optimization.py and the MLM / NSP heads of run_pretraining.py). It is fetched once with
`pip download --no-deps` into --cache_dir (git-ignored) and its source is loaded from the
wheel in memory, rewritten for TF 2.15 (tf.contrib.layers.layer_norm replaced by the same
moments + batch_normalization it computes); it is never installed or imported by our modules.
Without network or pip the bench runs ours only and says so.

Variants: "official", or LN:RESIDUAL ("post:none", "pre:none", "post:sum", ...) with optional
options joined by "+": xla (XLA auto-clustering, as --use_xla), fused (--fused_optimizer), bf16 /
fp16 (--precision), nndropout (tf.nn.dropout instead of the step-seeded stateless dropout; to
measure its cost only), tfrecord (fed from TFRecords through run_pretraining's input pipeline,
as --input=tfrecord). --use_xla / --precision / --fused_optimizer / --input apply to every one
of ours.

  python bench/bench_training_step.py                        # BERT-Small and Tiny, batch 8, seq 128
  python bench/bench_training_step.py --use_xla --fused_optimizer
  python bench/bench_training_step.py --configs=small --variants=official,post:none,post:none+xla
  python bench/bench_training_step.py --configs=small --variants=post:none,post:none+tfrecord

The TF2 engine: each of ours' variants that realformer_tf.tf2_training.Engine runs (options:
ENGINE_OPTIONS) also runs as its twin "[TF2 engine]" (what run_pretraining.py trains with on
TensorFlow >= 2.16), in a child process of --engine_python (the newest TF's interpreter;
default the repository's .venv-tf-latest) that times the engine's tf.function step on the same
model, batch and seed, interleaved round by round with the others over a pipe; "engine/Est" is
its step time over its Estimator twin's (median of per-round ratios). The engine reads its
constant batch from a tf.data iterator (the Estimator's graph has it as constants).

  python bench/bench_training_step.py --configs=tiny --variants=post:none,post:sum \
      --engine_python=.venv-tf-latest/bin/python

--profile: instead of the variants table, where the time of a step goes. The official code and
one of ours (--profile_variant, post:none = the exact fp32 default) are timed interleaved as
above, then --profile_steps steps of each (interleaved, after one discarded traced step) are
traced (RunOptions FULL_TRACE, RunMetadata.step_stats of the CPU device). Each executed node's
time (its all_end_rel_micros: start to done) is summed per op category (OP_CATEGORIES below);
the median over the traced steps is printed as ms per step, share of the traced op sum, and
ours / official (median of per-step ratios); then the matmul-only bound (ours' matmul ms /
official's op sum) and the top op types. With 2 cores, ops of one step run concurrently
(inter-op parallelism), so the op sum can exceed the step's wall time; the wall time and the
busy time (union of the op intervals) are printed beside it. Tracing slows a step a little, so
compare categories, not the traced walls.

  python bench/bench_training_step.py --profile --configs=small,tiny
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import ast
import collections
import contextlib
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
import types
import zipfile

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from realformer_tf import estimator_utils  # pylint: disable=g-import-not-at-top
import modeling  # pylint: disable=g-import-not-at-top
import run_pretraining  # pylint: disable=g-import-not-at-top

tf1 = tf.compat.v1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OFFICIAL_PACKAGE = "bert-tensorflow==1.0.4"
VARIANT_OPTIONS = ("xla", "fused", "bf16", "fp16", "nndropout", "tfrecord")
# The options of a variant that tf2_training.Engine also runs.
ENGINE_OPTIONS = frozenset(["fused", "xla"])
# The newest TF's interpreter run.sh sets up (relative to the repository).
LATEST_PYTHON = os.path.join(".venv-tf-latest", "bin", "python")


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_list("configs", ["small", "tiny"],
                    "Sizes (configs/bert_<size>_post_ln.json), or config files (*.json, e.g. "
                    "configs/bert_demo.json; a variant's LN:RESIDUAL replaces the file's).")
  flags.DEFINE_list("variants", ["official", "post:none", "post:sum", "post:mean", "pre:none"],
                    "official, or layer_norm_type:residual_attention[+option...] (options: %s)."
                    % ", ".join(VARIANT_OPTIONS))
  flags.DEFINE_integer("batch_size", 8, "Examples per step.")
  flags.DEFINE_integer("seq_length", 128, "Sequence length.")
  flags.DEFINE_integer("max_predictions", 20, "Masked positions per sequence.")
  flags.DEFINE_integer("rounds", 10, "Interleaved rounds.")
  flags.DEFINE_integer("steps_per_round", 3, "Steps of each variant per round.")
  flags.DEFINE_integer("warmup_steps", 3, "Untimed steps per variant first.")
  flags.DEFINE_enum("input", "constant", ["constant", "tfrecord"],
                    "Feed steps from constant tensors, or from TFRecords through "
                    "run_pretraining.input_fn_builder (then the pipeline alone is timed too).")
  flags.DEFINE_bool("use_xla", False, "XLA auto-clustering for all of ours (as --use_xla).")
  flags.DEFINE_enum("precision", "fp32", ["fp32", "bf16", "fp16"], "Ours' compute dtype.")
  flags.DEFINE_bool("fused_optimizer", False, "Ours with the fused AdamW kernel.")
  flags.DEFINE_string("cache_dir", os.path.join(REPO_DIR, ".bench_cache"),
                      "Where the official package's wheel is kept (git-ignored).")
  flags.DEFINE_bool("profile", False,
                    "Trace steps of the official code and --profile_variant and print the time "
                    "per op category side by side (--variants is not used).")
  flags.DEFINE_string("profile_variant", "post:none",
                      "The variant of ours that --profile compares with the official code.")
  flags.DEFINE_integer("profile_steps", 25, "Traced steps per code with --profile.")
  flags.DEFINE_integer("profile_top", 15,
                       "With --profile, also list this many op types taking most time (0: none).")
  flags.DEFINE_string("engine_python", LATEST_PYTHON,
                      "The Python of the newest TensorFlow (relative paths from the repository) "
                      "that times each variant's tf2_training.Engine twin; empty or missing: "
                      "the Estimator variants only (said in the output).")
  flags.DEFINE_string("engine_child", None,
                      "Internal: run as the engine's timing process of this variant spec "
                      "(steps asked on stdin, their times written to stdout).")


FLAGS = flags.FLAGS


# ---------------------------------------------------------------------------------------------
# The official code, loaded from the bert-tensorflow wheel without installing it.


def official_wheel(cache_dir):
  """Path of the bert-tensorflow wheel in cache_dir, downloading it once; (None, why) if not."""
  found = sorted(glob.glob(os.path.join(cache_dir, "bert_tensorflow-*.whl")))
  if found:
    return found[-1], None
  os.makedirs(cache_dir, exist_ok=True)
  cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
         "-q", "-d", cache_dir, OFFICIAL_PACKAGE]
  try:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
  except (OSError, subprocess.SubprocessError) as e:
    return None, "pip download %s failed (%s)" % (OFFICIAL_PACKAGE, e)
  found = sorted(glob.glob(os.path.join(cache_dir, "bert_tensorflow-*.whl")))
  if proc.returncode != 0 or not found:
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    return None, "pip download %s failed: %s" % (OFFICIAL_PACKAGE,
                                                 lines[-1] if lines else proc.returncode)
  return found[-1], None


def _contrib_layers_shim():
  """A module with tf.contrib.layers.layer_norm as TF 1.15 computed it (same variables)."""
  shim = types.ModuleType("official_contrib_layers")

  def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None,
                 variables_collections=None, outputs_collections=None, trainable=True,
                 begin_norm_axis=1, begin_params_axis=-1, scope=None):
    del center, scale, variables_collections, outputs_collections  # always on / unused here
    with tf1.variable_scope(scope, "LayerNorm", [inputs], reuse=reuse):
      inputs = tf.convert_to_tensor(inputs)
      rank = inputs.shape.ndims
      if begin_norm_axis < 0:
        begin_norm_axis += rank
      params_shape = inputs.shape[begin_params_axis:]
      dtype = inputs.dtype.base_dtype
      beta = tf1.get_variable("beta", params_shape, dtype, tf1.zeros_initializer(),
                              trainable=trainable)
      gamma = tf1.get_variable("gamma", params_shape, dtype, tf1.ones_initializer(),
                               trainable=trainable)
      mean, variance = tf.nn.moments(inputs, list(range(begin_norm_axis, rank)), keepdims=True)
      outputs = tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                          variance_epsilon=1e-12)
      outputs.set_shape(inputs.shape)
      return activation_fn(outputs) if activation_fn else outputs

  shim.layer_norm = layer_norm
  return shim


def load_official(wheel):
  """Loads the official modeling, optimization and pre-training heads from the wheel.

  Args:
    wheel: path of the bert-tensorflow wheel.

  Returns:
    (modeling, optimization, heads) modules; heads has get_masked_lm_output,
    get_next_sentence_output and gather_indexes of the official run_pretraining.py (its flag
    definitions and main are left out).
  """
  with zipfile.ZipFile(wheel) as z:
    source = {name: z.read("bert/%s.py" % name).decode("utf-8")
              for name in ("modeling", "optimization", "run_pretraining")}
  contrib_import = "from tensorflow.contrib import layers as contrib_layers"
  if contrib_import not in source["modeling"]:
    raise ValueError("%s: modeling.py has no line %r to replace" % (wheel, contrib_import))
  official_modeling = types.ModuleType("official_bert_modeling")
  official_modeling.__dict__["contrib_layers"] = _contrib_layers_shim()
  _exec_into(official_modeling, source["modeling"].replace(contrib_import, "pass"), "modeling")
  official_optimization = types.ModuleType("official_bert_optimization")
  _exec_into(official_optimization, source["optimization"], "optimization")
  tree = ast.parse(source["run_pretraining"])
  wanted = ("get_masked_lm_output", "get_next_sentence_output", "gather_indexes")
  tree.body = [node for node in tree.body
               if isinstance(node, ast.FunctionDef) and node.name in wanted]
  heads = types.ModuleType("official_bert_run_pretraining")
  heads.__dict__.update(tf=tf1, modeling=official_modeling, optimization=official_optimization)
  _exec_into(heads, tree, "run_pretraining")
  return official_modeling, official_optimization, heads


def _exec_into(module, source, name):
  """Runs source (text or an AST) in module's namespace, as bert-tensorflow's bert/<name>.py."""
  code = compile(source, "bert-tensorflow/bert/%s.py" % name, "exec")
  exec(code, module.__dict__)  # pylint: disable=exec-used


# ---------------------------------------------------------------------------------------------
# Inputs.


def random_examples(vocab_size, rng):
  """One batch of random pre-training features as NumPy arrays."""
  b, s, p = FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions
  return {
      "input_ids": rng.randint(0, vocab_size, (b, s)).astype(np.int32),
      "input_mask": np.ones((b, s), np.int32),
      "segment_ids": np.repeat([[0] * (s // 2) + [1] * (s - s // 2)], b, 0).astype(np.int32),
      "masked_lm_positions": rng.randint(1, s, (b, p)).astype(np.int32),
      "masked_lm_ids": rng.randint(0, vocab_size, (b, p)).astype(np.int32),
      "masked_lm_weights": np.ones((b, p), np.float32),
      "next_sentence_labels": rng.randint(0, 2, (b, 1)).astype(np.int32),
  }


def write_tfrecord(path, vocab_size, num_batches=32):
  """Writes num_batches batches of random examples in create_pretraining_data's format."""
  rng = np.random.RandomState(1)
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(num_batches):
      batch = random_examples(vocab_size, rng)
      for i in range(FLAGS.batch_size):
        feature = {}
        for name, values in batch.items():
          row = values[i].reshape(-1)
          if row.dtype == np.float32:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=row))
          else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=row))
        writer.write(tf.train.Example(
            features=tf.train.Features(feature=feature)).SerializeToString())


def make_features(vocab_size, tfrecord):
  """Constant features, or the next batch of run_pretraining's input pipeline over tfrecord."""
  if tfrecord is None:
    return {k: tf.constant(v) for k, v in random_examples(vocab_size,
                                                          np.random.RandomState(0)).items()}
  input_fn = run_pretraining.input_fn_builder(
      [tfrecord], FLAGS.seq_length, FLAGS.max_predictions, is_training=True, seed=1)
  dataset = input_fn({"batch_size": FLAGS.batch_size})
  return tf1.data.make_one_shot_iterator(dataset).get_next()


# ---------------------------------------------------------------------------------------------
# Variants.


def config_path(size):
  """The config file of a --configs entry: a *.json path as given, else bert_<size>_post_ln."""
  if size.endswith(".json"):
    return size if os.path.isabs(size) else os.path.join(REPO_DIR, size)
  return os.path.join(REPO_DIR, "configs", "bert_%s_post_ln.json" % size)


@contextlib.contextmanager
def _nn_dropout():
  """modeling.dropout as tf.nn.dropout while a graph is built (to measure the stateless cost)."""
  original = modeling.dropout

  def nn_dropout(input_tensor, dropout_prob, **unused_kwargs):  # seq_axes, ...: mask shape only
    if not dropout_prob:
      return input_tensor
    return tf.nn.dropout(input_tensor, rate=dropout_prob)

  modeling.dropout = nn_dropout
  try:
    yield
  finally:
    modeling.dropout = original


class Variant(object):
  """One variant in its own graph and session."""

  def __init__(self, size, spec, official, tfrecord):
    self.spec = spec
    self.times = []
    self.round_medians = []
    config = modeling.BertConfig.from_json_file(config_path(size))
    options = set()
    if spec != "official":
      base, _, extra = spec.partition("+")
      options = set(o for o in extra.split("+") if o)
      unknown = options - set(VARIANT_OPTIONS)
      if unknown:
        raise app.UsageError("--variants: unknown option(s) %s in %s" % (sorted(unknown), spec))
      if FLAGS.use_xla:
        options.add("xla")
      if FLAGS.fused_optimizer:
        options.add("fused")
      if FLAGS.precision != "fp32" and not options & {"bf16", "fp16"}:
        options.add(FLAGS.precision)
      if FLAGS.input == "tfrecord":
        options.add("tfrecord")
      config.layer_norm_type, config.residual_attention = base.split(":")
    self.options = options
    self.name = spec if spec == "official" else "%s-LN %s%s" % (
        config.layer_norm_type, config.residual_attention,
        "".join(" +" + o for o in sorted(options)))
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf1.set_random_seed(0)
      # As under Estimator: the global step exists before the model (step-seeded dropout).
      tf1.train.get_or_create_global_step()
      use_tfrecord = "tfrecord" in options or FLAGS.input == "tfrecord"  # official too
      features = make_features(config.vocab_size, tfrecord if use_tfrecord else None)
      if spec == "official":
        self.train_op = _official_train_op(official, config, features)
      else:
        with _nn_dropout() if "nndropout" in options else contextlib.nullcontext():
          precision = "bf16" if "bf16" in options else ("fp16" if "fp16" in options else "fp32")
          model_fn = run_pretraining.model_fn_builder(
              config, None, 1e-4, 1000, 100, use_tpu=False, use_one_hot_embeddings=False,
              total_steps=1000, train_batch_size=FLAGS.batch_size, precision=precision,
              fused_optimizer="fused" in options)
          spec_out = model_fn(features, None, tf1.estimator.ModeKeys.TRAIN, {})
          self.train_op = spec_out.train_op
      session_config = estimator_utils.session_config(
          _Flags(use_xla="xla" in options)) or tf1.ConfigProto()
      self.session = tf1.Session(graph=self.graph, config=session_config)
      self.session.run(tf1.global_variables_initializer())

  def run(self, steps, timed=True):
    times = []
    for _ in range(steps):
      start = time.perf_counter()
      self.session.run(self.train_op)
      times.append(time.perf_counter() - start)
    if timed:
      self.times.extend(times)
      self.round_medians.append(np.median(times))


class _Flags(object):
  """Stand-in for FLAGS with one attribute, for estimator_utils.session_config."""

  def __init__(self, use_xla):
    self.use_xla = use_xla


# ---------------------------------------------------------------------------------------------
# The TF2 engine (tf2_training.Engine) in a child process of the newest TensorFlow.


def pretraining_model_fn(config):
  """The Engine model function of the pre-training graph the Estimator variants time: BertModel
  and the MLM + NSP heads of run_pretraining (their official library API)."""
  def model_fn(features, is_training):
    model = modeling.BertModel(
        config=config, is_training=is_training, input_ids=features["input_ids"],
        input_mask=features["input_mask"], token_type_ids=features["segment_ids"],
        use_one_hot_embeddings=False)
    masked_lm_loss = run_pretraining.get_masked_lm_output(
        config, model.get_sequence_output(), model.get_embedding_table(),
        features["masked_lm_positions"], features["masked_lm_ids"],
        features["masked_lm_weights"])[0]
    next_sentence_loss = run_pretraining.get_next_sentence_output(
        config, model.get_pooled_output(), features["next_sentence_labels"])[0]
    return masked_lm_loss + next_sentence_loss, {}
  return model_fn


def engine_child(spec):
  """The engine's timing process: builds the variant `spec` (LN:RESIDUAL[+option...]) of
  FLAGS.configs[0] on tf2_training.Engine, prints `ready TF <version>`, then for each line N on
  stdin runs N steps and prints their seconds on one line; N <= 0 or end of input ends it."""
  from realformer_tf import tf2_training  # pylint: disable=g-import-not-at-top
  config = modeling.BertConfig.from_json_file(config_path(FLAGS.configs[0]))
  base, _, extra = spec.partition("+")
  options = set(o for o in extra.split("+") if o)
  config.layer_norm_type, config.residual_attention = base.split(":")
  features = random_examples(config.vocab_size, np.random.RandomState(0))
  with tempfile.TemporaryDirectory() as tmp:
    # The Estimator variants' schedule (model_fn_builder above), graph seed 0.
    engine = tf2_training.Engine(
        pretraining_model_fn(config), tmp, train_batch_size=FLAGS.batch_size,
        learning_rate=1e-4, num_train_steps=1000, num_warmup_steps=100, seed=0,
        fused_optimizer="fused" in options, use_xla="xla" in options)
    run_step = engine.step_runner(lambda params: tf.data.Dataset.from_tensors(features).repeat())
    print("ready TF %s" % tf.__version__, flush=True)
    for line in sys.stdin:
      steps = int(line)
      if steps <= 0:
        break
      times = []
      for _ in range(steps):
        start = time.perf_counter()
        run_step()
        times.append(time.perf_counter() - start)
      print(" ".join("%.6f" % t for t in times), flush=True)


class EngineVariant(object):
  """The tf2_training.Engine twin of an Estimator variant, timed in a child process."""

  def __init__(self, size, twin, python, log_dir):
    """Starts the child (it builds the model before answering).

    Args:
      size: the --configs entry.
      twin: the Estimator Variant (its options are passed on).
      python: the newest TF's interpreter.
      log_dir: where the child's stderr goes (shown when it fails).
    """
    self.spec = twin.spec
    self.twin = twin
    self.name = "%s [TF2 engine]" % twin.name
    self.times = []
    self.round_medians = []
    base = twin.spec.split("+")[0]
    child_spec = "+".join([base] + sorted(twin.options))
    self._log = os.path.join(log_dir, "engine_%d.log" % id(self))
    with open(self._log, "w") as log:
      self._process = subprocess.Popen(
          [python, os.path.abspath(__file__), "--engine_child=%s" % child_spec,
           "--configs=%s" % size, "--batch_size=%d" % FLAGS.batch_size,
           "--seq_length=%d" % FLAGS.seq_length,
           "--max_predictions=%d" % FLAGS.max_predictions],
          cwd=REPO_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    self.tf_version = self._read_line().split()[-1]  # "ready TF <version>"

  def _read_line(self):
    line = self._process.stdout.readline()
    if not line:
      with open(self._log) as log:
        tail = log.read()[-3000:]
      raise RuntimeError("the TF2 engine's timing process ended (exit %s):\n%s" % (
          self._process.wait(), tail))
    return line.strip()

  def run(self, steps, timed=True):
    self._process.stdin.write("%d\n" % steps)
    self._process.stdin.flush()
    times = [float(t) for t in self._read_line().split()]
    if timed:
      self.times.extend(times)
      self.round_medians.append(np.median(times))

  def close(self):
    self._process.stdin.write("0\n")
    self._process.stdin.close()
    self._process.wait(timeout=60)


def engine_python():
  """The newest TF's interpreter from --engine_python (absolute), or (None, why not)."""
  if not FLAGS.engine_python:
    return None, "--engine_python is empty"
  path = os.path.join(REPO_DIR, FLAGS.engine_python)
  if not os.path.exists(path):
    return None, "--engine_python=%s does not exist" % FLAGS.engine_python
  return path, None


def _official_train_op(official, config, features):
  """The official pre-training graph: BertModel + MLM / NSP heads + official create_optimizer."""
  official_modeling, official_optimization, heads = official
  official_config = official_modeling.BertConfig.from_dict(
      {k: v for k, v in config.to_dict().items()
       if k not in ("residual_attention", "layer_norm_type")})
  model = official_modeling.BertModel(
      config=official_config, is_training=True, input_ids=features["input_ids"],
      input_mask=features["input_mask"], token_type_ids=features["segment_ids"],
      use_one_hot_embeddings=False)
  masked_lm_loss = heads.get_masked_lm_output(
      official_config, model.get_sequence_output(), model.get_embedding_table(),
      features["masked_lm_positions"], features["masked_lm_ids"],
      features["masked_lm_weights"])[0]
  next_sentence_loss = heads.get_next_sentence_output(
      official_config, model.get_pooled_output(), features["next_sentence_labels"])[0]
  return official_optimization.create_optimizer(
      masked_lm_loss + next_sentence_loss, 1e-4, 1000, 100, False)


def time_input_pipeline(tfrecord, vocab_size, steps=200):
  """Batches per second of run_pretraining's input pipeline alone (no model)."""
  with tf.Graph().as_default():
    batch = make_features(vocab_size, tfrecord)
    with tf1.Session() as sess:
      for _ in range(10):
        sess.run(batch)
      start = time.perf_counter()
      for _ in range(steps):
        sess.run(batch)
      return steps / (time.perf_counter() - start)


def _ratio(variant, base):
  """Median over rounds of variant's round median / base's round median."""
  if base is None:
    return float("nan")
  return float(np.median(np.array(variant.round_medians) / np.array(base.round_medians)))


# ---------------------------------------------------------------------------------------------
# --profile: time per op category, ours vs official.

# Op category of an executed node: the first row whose op-type pattern and node-name pattern
# (re.search; None matches anything) both match. Element-wise ops (Mul, AddV2, Sum, ...) appear in
# every part of the model, so they are told apart by the name scope they were built in; a backward
# op is named gradients/<forward name>_grad/..., so it falls in its forward op's category. The op
# types are the executed ones, after Grappler and the oneDNN rewrite (_MklMatMul, _MklEinsum, ...).
BIAS_ADD = "<bias add>"  # node-name rule: an add of a bias variable, or the gradient of one
OP_CATEGORIES = (
    # (category, op type, node name)
    ("executor", r"^(NoOp|Const|_Arg|_Retval|_Recv|_Send|Assert)$", None),
    # MatMul, BatchMatMulV2, Einsum (the official tf.layers.dense on [batch, seq, hidden]), Conv2D
    # and their oneDNN forms: _MklMatMul, _MklNativeFusedMatMul (+ bias, + activation),
    # _MklBatchMatMulV2, _MklFusedBatchMatMulV2 (+ attention mask), _MklEinsum, _FusedMatMul.
    ("matmul", r"MatMul|Einsum|Conv", None),
    # RandomUniform / StatelessRandomUniformV2, then the mask compare, select, scale and gradients.
    ("dropout", r"Random", None),
    ("dropout", None, r"dropout"),
    # Embedding and masked-position gathers; UnsortedSegmentSum turns the sparse gradient of the
    # word embeddings into a dense one (they are also the MLM output matrix).
    ("gather / scatter", r"Gather|Scatter|UnsortedSegment|SparseSegment", None),
    # Gradient clipping and AdamW with its variable reads and assigns. The official optimizer builds
    # its update ops unscoped (mul, add, Sqrt, truediv, AssignVariableOp at the top level).
    ("optimizer (clip + AdamW)", None,
     r"^(AdamWeightDecayOptimizer|clip_by_global_norm|global_norm|PolynomialDecay)/|^[^/]+$"),
    ("variable reads", r"VariableOp$|^VarHandleOp$", None),
    # Bias adds: BiasAdd / BiasAddGrad, and adds of a bias variable found in the graph (the
    # official dense layers add the bias with `+`; see bias_add_names). Ours' forward bias adds
    # are fused into _MklNativeFusedMatMul, so they count as matmul.
    ("bias add + gradient", r"^BiasAdd", None),
    ("bias add + gradient", None, BIAS_ADD),
    ("LayerNorm", None, r"LayerNorm"),  # moments / reductions and element-wise, both directions
    ("GELU", None, r"/intermediate/|/transform/dense/"),  # tanh-approximation element-wise
    ("MLM / NSP loss", None, r"^(gradients/)?(cls/|SparseSoftmaxCrossEntropyWithLogits)"),
    ("transpose / reshape",
     r"Transpose|Reshape|ExpandDims|Squeeze|Pad|Slice|Tile|Concat|Pack|Unpack|Split|Identity",
     None),
    ("attention softmax", None, r"attention/self/"),  # softmax, score scale and mask add
    ("gradient sums (AddN)", r"^AddN$", None),
    ("other", None, None),  # residual and embedding adds, the pooler's tanh, ...
)
_CATEGORY_RULES = [(c, t and re.compile(t), n if n in (None, BIAS_ADD) else re.compile(n))
                   for c, t, n in OP_CATEGORIES]
CATEGORY_ORDER = tuple(collections.OrderedDict((c, None) for c, _, _ in OP_CATEGORIES))
_GRADIENT_OF = re.compile(r"^gradients/(.+)_grad/")


def bias_add_names(graph):
  """Names of the adds in graph that add a bias variable (a read of a .../*bias variable)."""
  names = set()
  for op in graph.get_operations():
    if op.type not in ("Add", "AddV2"):
      continue
    for tensor in op.inputs:
      source = tensor.op
      while source.type in ("Reshape", "Identity", "Cast") and source.inputs:
        source = source.inputs[0].op
      if source.type == "ReadVariableOp" and source.inputs[0].op.name.endswith("bias"):
        names.add(op.name)
  return names


def op_category(op_type, node_name, bias_adds=frozenset()):
  """The OP_CATEGORIES category of one executed node (bias_adds: from bias_add_names)."""
  gradient_of = _GRADIENT_OF.match(node_name)
  is_bias_add = node_name in bias_adds or bool(gradient_of and gradient_of.group(1) in bias_adds)
  for category, type_re, name_re in _CATEGORY_RULES:
    if type_re is not None and not type_re.search(op_type):
      continue
    if name_re is BIAS_ADD:
      if is_bias_add:
        return category
    elif name_re is None or name_re.search(node_name):
      return category
  return "other"


def _op_type(node_stats):
  """Op type from a NodeExecStats' timeline_label ("name = OpType(inputs)")."""
  label = node_stats.timeline_label
  if " = " in label:
    return label.split(" = ", 1)[1].split("(", 1)[0].strip()
  return label.split(":", 1)[0] or node_stats.node_name


def _union_micros(intervals):
  """Total length of the union of (start, end) intervals."""
  total, end_so_far = 0, None
  for start, end in sorted(intervals):
    if end_so_far is None or start > end_so_far:
      total += end - start
      end_so_far = end
    elif end > end_so_far:
      total += end - end_so_far
      end_so_far = end
  return total


class StepProfile(object):
  """Per-category and per-op-type time of the traced steps of one variant."""

  def __init__(self, variant):
    self.variant = variant
    self.bias_adds = bias_add_names(variant.graph)
    self.steps = []  # per traced step: Counter category -> microseconds
    self.op_steps = []  # per traced step: Counter (category, op type) -> microseconds
    self.busy = []  # per step: microseconds in which at least one op ran
    self.walls = []  # per step: seconds

  def trace(self):
    """Runs one traced step and records its op times."""
    options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE)
    metadata = tf1.RunMetadata()
    start = time.perf_counter()
    self.variant.session.run(self.variant.train_op, options=options, run_metadata=metadata)
    self.walls.append(time.perf_counter() - start)
    step, by_op, intervals = collections.Counter(), collections.Counter(), []
    for device in metadata.step_stats.dev_stats:
      if "CPU" not in device.device.upper():
        continue
      for node in device.node_stats:
        op_type = _op_type(node)
        category = op_category(op_type, node.node_name, self.bias_adds)
        step[category] += node.all_end_rel_micros
        by_op[(category, op_type)] += node.all_end_rel_micros
        intervals.append((node.all_start_micros, node.all_start_micros + node.all_end_rel_micros))
    self.steps.append(step)
    self.op_steps.append(by_op)
    self.busy.append(_union_micros(intervals))

  def ms(self, category=None):
    """Median over steps of one category's op sum, or of the whole op sum (None), in ms."""
    return float(np.median([(sum(step.values()) if category is None else step[category])
                            for step in self.steps])) / 1000.0

  def op_ms(self, key):
    """Median over steps of one (category, op type)'s op sum, in ms."""
    return float(np.median([step[key] for step in self.op_steps])) / 1000.0


def _div(a, b):
  return a / b if b else float("nan")


def _paired_ratio(ours_profile, official_profile, ours_key=None, official_key="same"):
  """Median over traced steps i of ours' step i / official's step i (they ran back to back).

  Keys are categories (None: the whole op sum); official_key "same" means ours_key.
  """
  if official_profile is None:
    return float("nan")
  official_key = ours_key if official_key == "same" else official_key

  def value(step, key):
    return sum(step.values()) if key is None else step[key]

  ratios = [_div(value(o, ours_key), value(f, official_key))
            for o, f in zip(ours_profile.steps, official_profile.steps)]
  return float(np.median(ratios))


def print_profile(size, ours, official, ours_profile, official_profile):
  """Prints the per-category table, the totals and the matmul-only bound."""
  profiles = [p for p in (ours_profile, official_profile) if p is not None]
  steps = len(ours_profile.walls)
  print("\nprofile (%s): %s vs official, %d traced steps each (FULL_TRACE, interleaved, after "
        "the timed rounds and 1 traced step discarded); ms per step = median over the traced "
        "steps of the sum of each executed op's time (all_end_rel_micros); %% of the "
        "traced op sum" % (size, ours.name, steps))
  print("%-26s %9s %6s %12s %6s %14s" % ("category", "ours ms", "%", "official ms", "%",
                                         "ours/official"))
  ours_total = ours_profile.ms()
  official_total = official_profile.ms() if official_profile else float("nan")
  for category in CATEGORY_ORDER:
    if not any(step[category] for p in profiles for step in p.steps):
      continue
    o = ours_profile.ms(category)
    f = official_profile.ms(category) if official_profile else float("nan")
    print("%-26s %9.2f %5.1f%% %12.2f %5.1f%% %14.3f" % (
        category, o, 100 * _div(o, ours_total), f, 100 * _div(f, official_total),
        _paired_ratio(ours_profile, official_profile, category)))
  print("%-26s %9.2f %6s %12.2f %6s %14.3f" % (
      "traced op sum", ours_total, "", official_total, "",
      _paired_ratio(ours_profile, official_profile)))
  rows = [("busy (union of op spans)", lambda p: np.median(p.busy) / 1000.0),
          ("wall, traced steps", lambda p: 1000 * np.median(p.walls))]
  for label, value in rows:
    o = value(ours_profile)
    f = value(official_profile) if official_profile else float("nan")
    print("%-26s %9.2f %6s %12.2f %6s %14.3f" % (label, o, "", f, "", _div(o, f)))
  o = 1000 * np.median(ours.times)
  f = 1000 * np.median(official.times) if official else float("nan")
  print("%-26s %9.2f %6s %12.2f %6s %14.3f" % ("wall, untraced (median)", o, "", f, "",
                                               _ratio(ours, official)))
  print("(medians over steps, so the rows need not add up to the op sum; ours/official = median "
        "of per-step ratios of back-to-back steps. 2 cores: ops of a step overlap (inter-op "
        "parallelism), so the op sum can exceed the busy and wall times. Untraced: the %d x %d "
        "timed steps, ratio = median of per-round ratios.)" % (
            FLAGS.rounds, FLAGS.steps_per_round))
  matmul = ours_profile.ms("matmul")
  print("matmul share of the traced op sum: ours %.1f%%, official %.1f%%" % (
      100 * _div(matmul, ours_total),
      100 * _div(official_profile.ms("matmul"), official_total) if official_profile
      else float("nan")))
  print("bound, if everything but the matmuls were free in ours: ours_matmul_ms / "
        "official_total_ms = %.2f / %.2f = %.3f (medians; median of per-step ratios %.3f); "
        "scaled to the untraced walls (ours' matmul share x ours' wall / official's wall): "
        "%.3f" % (matmul, official_total, _div(matmul, official_total),
                  _paired_ratio(ours_profile, official_profile, "matmul", None),
                  _div(matmul, ours_total) * _ratio(ours, official)))
  print("for 0.80 (op sums): ours' non-matmul op time would have to fall from %.2f to %.2f ms "
        "(%+.0f%%), with its matmuls as they are" % (
            ours_total - matmul, 0.8 * official_total - matmul,
            100 * _div(0.8 * official_total - ours_total, ours_total - matmul)))
  if FLAGS.profile_top > 0:
    print("\ntop %d op types by time (%s), median ms per step:" % (FLAGS.profile_top, size))
    print("%-36s %-26s %9s %12s" % ("op type", "category", "ours", "official"))
    keys = set(key for p in profiles for step in p.op_steps for key in step)
    top = sorted(keys, key=lambda key: -max(p.op_ms(key) for p in profiles))
    for key in top[:FLAGS.profile_top]:
      print("%-36s %-26s %9.2f %12.2f" % (
          key[1], key[0], ours_profile.op_ms(key),
          official_profile.op_ms(key) if official_profile else float("nan")))


def profile_size(size, official):
  """--profile for one config: untraced interleaved timing, then traced steps of both codes."""
  variants = [Variant(size, FLAGS.profile_variant, official, None)]
  if official is not None:
    variants.append(Variant(size, "official", official, None))
  for v in variants:
    v.run(FLAGS.warmup_steps, timed=False)
  for _ in range(FLAGS.rounds):
    for v in variants:
      v.run(FLAGS.steps_per_round)
  for v in variants:
    StepProfile(v).trace()  # the first traced step is slower; discarded
  profiles = [StepProfile(v) for v in variants]
  for _ in range(FLAGS.profile_steps):
    for p in profiles:
      p.trace()
  print_profile(size, variants[0], variants[1] if official is not None else None,
                profiles[0], profiles[1] if official is not None else None)
  for v in variants:
    v.session.close()


def main(_):
  if FLAGS.engine_child:
    engine_child(FLAGS.engine_child)
    return
  if FLAGS.profile:
    if FLAGS.profile_steps < 1:
      raise app.UsageError("--profile_steps=%d: must be at least 1" % FLAGS.profile_steps)
    if FLAGS.input != "constant" or FLAGS.profile_variant.split("+")[0] == "official":
      raise app.UsageError("--profile compares one of ours (--profile_variant) with the official "
                           "code on constant inputs (not --input=tfrecord)")
  official, why = None, None
  if "official" in FLAGS.variants or FLAGS.profile:
    wheel, why = official_wheel(FLAGS.cache_dir)
    if wheel:
      try:
        official = load_official(wheel)
      except Exception as e:  # pylint: disable=broad-except
        why = "%s could not be loaded: %s" % (os.path.basename(wheel), e)
  specs = [v for v in FLAGS.variants if v != "official" or official is not None]
  print("batch %d, seq %d, %d masked; %d rounds x %d steps per variant, interleaved; TF %s, "
        "%d CPUs, oneDNN %s, input %s" % (
            FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions, FLAGS.rounds,
            FLAGS.steps_per_round, tf.__version__, os.cpu_count(),
            os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"), FLAGS.input))
  if official is not None:
    print("official: %s (%s), loaded from the wheel with tf.contrib.layers.layer_norm shimmed"
          % (OFFICIAL_PACKAGE, os.path.relpath(wheel, REPO_DIR)))
  elif "official" in FLAGS.variants or FLAGS.profile:
    print("NOTE: official BERT not measured (%s); ours only" % why)
  if FLAGS.profile:
    for size in FLAGS.configs:
      profile_size(size, official)
    return
  python, why_no_engine = engine_python()
  if python is None:
    print("NOTE: the TF2 engine not measured (%s)" % why_no_engine)
  with tempfile.TemporaryDirectory() as tmp:
    for size in FLAGS.configs:
      tfrecord = None
      if FLAGS.input == "tfrecord" or any("tfrecord" in spec for spec in specs):
        vocab_size = modeling.BertConfig.from_json_file(config_path(size)).vocab_size
        tfrecord = os.path.join(tmp, "%s.tfrecord" % os.path.basename(size))
        write_tfrecord(tfrecord, vocab_size)
        print("input pipeline alone (run_pretraining.input_fn_builder, batch %d): %.1f "
              "batches/s" % (FLAGS.batch_size, time_input_pipeline(tfrecord, vocab_size)))
      variants = []
      for spec in specs:
        variants.append(Variant(size, spec, official, tfrecord))
        if (python and spec != "official" and variants[-1].options <= ENGINE_OPTIONS
            and FLAGS.input == "constant"):
          variants.append(EngineVariant(size, variants[-1], python, tmp))
      engine_versions = sorted(set(v.tf_version for v in variants if hasattr(v, "tf_version")))
      if engine_versions:
        print("TF2 engine: tf2_training.Engine on TF %s (%s)" % (
            ", ".join(engine_versions), FLAGS.engine_python))
      for v in variants:
        v.run(FLAGS.warmup_steps, timed=False)
      for _ in range(FLAGS.rounds):
        for v in variants:
          v.run(FLAGS.steps_per_round)
      official_v = next((v for v in variants if v.spec == "official"), None)
      ours_none = next((v for v in variants if v.spec.split("+")[0] == "post:none"), None)
      print("\n%-48s %9s %9s %11s %12s %11s %11s" % (
          "variant (%s)" % size, "ms/step", "p90 ms", "examples/s", "vs official",
          "vs post:none", "engine/Est"))
      for v in variants:
        median = np.median(v.times)
        print("%-48s %9.1f %9.1f %11.1f %12.3f %11.3f %11.3f" % (
            v.name, 1000 * median, 1000 * np.percentile(v.times, 90),
            FLAGS.batch_size / median, _ratio(v, official_v),
            _ratio(v, ours_none) if v.spec != "official" else float("nan"),
            _ratio(v, v.twin) if isinstance(v, EngineVariant) else float("nan")))
      for v in variants:
        if isinstance(v, EngineVariant):
          v.close()
        else:
          v.session.close()


if __name__ == "__main__":
  define_flags()
  estimator_utils.set_xla_cpu_flags()  # before app.run, where TensorFlow reads TF_XLA_FLAGS
  app.run(main)
