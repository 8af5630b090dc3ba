# coding=utf-8
"""The demo's pre-training step (run_pretraining's model_fn and AdamW) under process-level
settings, side by side: threads, oneDNN on / off and its instruction set, other code checkouts.

Settings that TensorFlow or oneDNN read once per process (intra-op threads, TF_ENABLE_ONEDNN_OPTS,
ONEDNN_MAX_CPU_ISA, ...) cannot be compared inside one process, so every variant is a worker
process of its own. The workers build their graph, then run in lockstep: each round, every
worker in turn runs --steps_per_round steps while the others wait idle on their pipe, so machine
load affects all alike; ratios are medians of per-round ratios. Each worker also reports its loss
at every step: variants of one seed and input that report the same losses ran the same numerics.

A variant is "base" or items joined by "+":
  intra=N / inter=N    the session's intra_op / inter_op_parallelism_threads (default 0: TF's
                       choice, as run_pretraining's Estimator)
  input=tfrecord       batches from --input_file through run_pretraining.input_fn_builder (the
                       job's pipeline; default: one constant batch, as bench_training_step)
  dropout=nn           tf.nn.dropout instead of modeling.dropout's step-seeded stateless masks
                       (with drop=P or --dropout: the demo pre-trains without dropout)
  fused=0|1 / xla=1    run_pretraining's --fused_optimizer (default: --fused_optimizer, on as in
                       the demo) / --use_xla (XLA clusters the element-wise ops,
                       estimator_utils.XLA_CPU_FLAGS)
  cpus=0[:1...]        run the worker on these CPUs only (sched_setaffinity before TensorFlow
                       starts; e.g. cpus=0+intra=2+inter=2: two threads sharing one core)
  repo=PATH            import the model code from another checkout (a before / after of a fix)
  batch=N / seq=N / preds=N / config=FILE / drop=P
                       this variant's batch size, sequence length, masked positions, config or
                       dropout (default: the flags'; input=tfrecord needs --input_file of its
                       seq / preds)
  NAME=VALUE           an environment variable of the worker (upper-case NAME), e.g.
                       TF_ENABLE_ONEDNN_OPTS=0, ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI,
                       ONEDNN_VERBOSE=1 (its lines go to the worker's log in --worker_log_dir)

The step's cost in GFLOP is counted from the graph (every MatMul / BatchMatMulV2, forward and
backward, from static shapes); GFLOP/s = that / the median step time. --numpy_gemm first prints
NumPy's float32 1024^3 matmul rate with 1 and 2 threads (what a machine's cores can do).

  python bench/bench_demo_step.py --variants=base,intra=1,inter=1
  python bench/bench_demo_step.py --variants=base,ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI,TF_ENABLE_ONEDNN_OPTS=0
  python bench/bench_demo_step.py --input_file=output/demo/data/train.tfrecord --variants=base,input=tfrecord

The machine may be shared: `uptime` is printed before and after; compare the ratios.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import contextlib
import json
import os
import re
import subprocess
import sys
import time

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A repo=PATH worker imports the model code of that checkout.
sys.path.insert(0, os.environ.get("BENCH_DEMO_STEP_REPO", REPO_DIR))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np

FLAGS = flags.FLAGS
ENV_ITEM = re.compile(r"^[A-Z][A-Z0-9_]*=")
# Variant items that set a flag of the worker.
VARIANT_FLAGS = {"batch": "batch_size", "seq": "seq_length", "preds": "max_predictions",
                 "config": "bert_config_file", "drop": "dropout"}
CPU_FLAGS_OF_NOTE = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("bert_config_file",
                      os.path.join(REPO_DIR, "configs", "bert_demo_ffn256.json"),
                      "Model (default: the demo's).")
  flags.DEFINE_float("dropout", 0.0,
                     "hidden_dropout_prob and attention_probs_dropout_prob of the model (the "
                     "demo pre-trains without: run_demo --pretrain_dropout); -1: the config's.")
  flags.DEFINE_bool("fused_optimizer", True,
                    "run_pretraining's --fused_optimizer (on in the demo); a fused=0|1 variant "
                    "item overrides it.")
  flags.DEFINE_integer("batch_size", 32, "Examples per step (the demo's 32).")
  flags.DEFINE_integer("seq_length", 64, "Sequence length (the demo's 64).")
  flags.DEFINE_integer("max_predictions", 10, "Masked positions per sequence (the demo's 10).")
  flags.DEFINE_string("input_file", None, "TFRecords of create_pretraining_data.py at "
                      "--seq_length / --max_predictions, for input=tfrecord variants.")
  flags.DEFINE_list("variants", ["base", "intra=1", "inter=1"], "Variants (module docstring).")
  flags.DEFINE_integer("rounds", 8, "Lockstep rounds.")
  flags.DEFINE_integer("steps_per_round", 4, "Steps of each variant per round.")
  flags.DEFINE_integer("warmup_steps", 3, "Untimed steps of each variant first.")
  flags.DEFINE_integer("seed", 12345, "Graph seed (initialisation, dropout) and input seed.")
  flags.DEFINE_bool("numpy_gemm", False, "First print NumPy's float32 1024^3 matmul GFLOP/s.")
  flags.DEFINE_string("worker_log_dir", None,
                      "Where each worker's stderr and other output go (default: discarded).")
  flags.DEFINE_string("worker", None, "Internal: run as the worker of this variant.")


# ---------------------------------------------------------------------------------------------
# Variants.


def parse_variant(spec):
  """A variant spec -> dict(env=..., intra=int, inter=int, input=str, dropout=str, repo=str)."""
  parsed = {"env": {}, "intra": 0, "inter": 0, "input": "constant", "dropout": "step",
            "repo": None, "flags": {}, "fused": None, "xla": False, "cpus": None}
  if spec == "base":
    return parsed
  for item in spec.split("+"):
    key, sep, value = item.partition("=")
    if not sep:
      raise app.UsageError("--variants: %r in %r is not KEY=VALUE" % (item, spec))
    if ENV_ITEM.match(item):
      parsed["env"][key] = value
    elif key in ("intra", "inter"):
      parsed[key] = int(value)
    elif key == "input" and value in ("constant", "tfrecord"):
      parsed["input"] = value
    elif key == "dropout" and value == "nn":
      parsed["dropout"] = value
    elif key in ("fused", "xla") and value in ("0", "1"):
      parsed[key] = value == "1"
    elif key == "cpus":
      parsed["cpus"] = sorted(int(c) for c in value.split(":"))
    elif key == "repo":
      parsed["repo"] = os.path.abspath(value)
    elif key in VARIANT_FLAGS:
      parsed["flags"][VARIANT_FLAGS[key]] = (
          os.path.abspath(value) if key == "config" else float(value) if key == "drop"
          else int(value))
    else:
      raise app.UsageError("--variants: unknown item %r in %r" % (item, spec))
  return parsed


# ---------------------------------------------------------------------------------------------
# The worker.


def matmul_gflop(graph):
  """GFLOP of one run of every MatMul / BatchMatMulV2 in graph (static shapes), forward+backward.

  Args:
    graph: a training graph (the gradients are ops of it).

  Returns:
    float.
  """
  total = 0
  for op in graph.get_operations():
    if op.type not in ("MatMul", "BatchMatMulV2"):
      continue
    a, b = op.inputs[0].shape.as_list(), op.inputs[1].shape.as_list()
    if op.type == "MatMul":
      transpose_a, transpose_b = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    else:
      transpose_a, transpose_b = op.get_attr("adj_x"), op.get_attr("adj_y")
    m, k = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
    n = b[-2] if transpose_b else b[-1]
    total += 2 * int(np.prod(a[:-2] or [1])) * m * k * n
  return total / 1e9


@contextlib.contextmanager
def _nn_dropout(modeling):
  """modeling.dropout as tf.nn.dropout while a graph is built (to measure the stateless cost)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
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


def constant_features(vocab_size, seed):
  """One batch of random pre-training features (constant tensors)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(seed)
  b, s, p = FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions
  values = {
      "input_ids": rng.randint(0, vocab_size, (b, s)),
      "input_mask": np.ones((b, s)),
      "segment_ids": np.repeat([[0] * (s // 2) + [1] * (s - s // 2)], b, 0),
      "masked_lm_positions": rng.randint(1, s, (b, p)),
      "masked_lm_ids": rng.randint(0, vocab_size, (b, p)),
      "next_sentence_labels": rng.randint(0, 2, (b, 1)),
  }
  features = {k: tf.constant(v.astype(np.int32)) for k, v in values.items()}
  features["masked_lm_weights"] = tf.constant(np.ones((b, p), np.float32))
  return features


def run_worker(spec):
  """Builds the variant's step, then serves "run N" lines on stdin with a JSON line each."""
  variant = parse_variant(spec)
  if variant["cpus"] is not None:
    os.sched_setaffinity(0, variant["cpus"])
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import modeling  # pylint: disable=g-import-not-at-top
  import run_pretraining  # pylint: disable=g-import-not-at-top
  tf1 = tf.compat.v1
  config = modeling.BertConfig.from_json_file(FLAGS.bert_config_file)
  if FLAGS.dropout >= 0:
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = FLAGS.dropout
  fused = FLAGS.fused_optimizer if variant["fused"] is None else variant["fused"]
  graph = tf.Graph()
  with graph.as_default():
    tf1.set_random_seed(FLAGS.seed)
    tf1.train.get_or_create_global_step()  # as under Estimator (step-seeded dropout)
    if variant["input"] == "tfrecord":
      input_fn = run_pretraining.input_fn_builder(
          [FLAGS.input_file], FLAGS.seq_length, FLAGS.max_predictions, is_training=True,
          seed=FLAGS.seed)
      dataset = input_fn({"batch_size": FLAGS.batch_size})
      features = tf1.data.make_one_shot_iterator(dataset).get_next()
    else:
      features = constant_features(config.vocab_size, FLAGS.seed)
    with (_nn_dropout(modeling) if variant["dropout"] == "nn" else contextlib.nullcontext()):
      # The demo's schedule (run_demo: 5,000 steps at 1e-3, 500 warm-up).
      model_fn = run_pretraining.model_fn_builder(
          config, None, 1e-3, 5000, 500, use_tpu=False, use_one_hot_embeddings=False,
          total_steps=5000, train_batch_size=FLAGS.batch_size, fused_optimizer=fused)
      spec_out = model_fn(features, None, tf1.estimator.ModeKeys.TRAIN,
                          {"batch_size": FLAGS.batch_size})
    gflop = matmul_gflop(graph)
    # The Estimator's default session config, with the variant's thread counts.
    session_config = tf1.ConfigProto(allow_soft_placement=True,
                                     intra_op_parallelism_threads=variant["intra"],
                                     inter_op_parallelism_threads=variant["inter"])
    session_config.graph_options.rewrite_options.meta_optimizer_iterations = (
        session_config.graph_options.rewrite_options.ONE)
    if variant["xla"]:
      session_config.graph_options.optimizer_options.global_jit_level = (
          tf1.OptimizerOptions.ON_1)
    session = tf1.Session(graph=graph, config=session_config)
    session.run(tf1.global_variables_initializer())
    fetches = [spec_out.train_op, spec_out.loss]
    for _ in range(FLAGS.warmup_steps):
      session.run(fetches)
  print(json.dumps({"ready": True, "gflop": gflop, "tf": tf.__version__,
                    "onednn": _onednn_enabled()}), flush=True)
  for line in sys.stdin:
    words = line.split()
    if not words or words[0] != "run":
      break
    times, losses = [], []
    cpu_start = time.process_time()
    for _ in range(int(words[1])):
      start = time.perf_counter()
      _, loss = session.run(fetches)
      times.append(time.perf_counter() - start)
      losses.append(float(loss))
    print(json.dumps({"times": times, "losses": losses,
                      "cpu": (time.process_time() - cpu_start) / len(times)}), flush=True)
  session.close()


def _onednn_enabled():
  """Whether this TensorFlow runs oneDNN ops (None when it cannot say)."""
  try:
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
    return bool(_pywrap_util_port.IsMklEnabled())
  except (ImportError, AttributeError):
    return None


# ---------------------------------------------------------------------------------------------
# The coordinator.


class Worker(object):
  """One variant's worker process."""

  def __init__(self, index, spec):
    self.spec = spec
    variant = parse_variant(spec)
    env = dict(os.environ, **variant["env"])
    if variant["repo"]:
      env["BENCH_DEMO_STEP_REPO"] = variant["repo"]
    if variant["xla"]:
      # Read when TensorFlow starts, before the worker's code runs.
      from realformer_tf import estimator_utils  # pylint: disable=g-import-not-at-top
      env["TF_XLA_FLAGS"] = " ".join(
          [env.get("TF_XLA_FLAGS", "")] + list(estimator_utils.XLA_CPU_FLAGS)).strip()
    args = [sys.executable, os.path.abspath(__file__), "--worker=%s" % spec]
    args += ["--%s=%s" % (name, variant["flags"].get(name, getattr(FLAGS, name))) for name in (
        "bert_config_file", "batch_size", "seq_length", "max_predictions", "dropout",
        "fused_optimizer", "warmup_steps", "seed")]
    self.batch_size = variant["flags"].get("batch_size", FLAGS.batch_size)
    if FLAGS.input_file:
      args.append("--input_file=%s" % FLAGS.input_file)
    self.log = None  # stderr, and the lines on stdout that are not the protocol's
    if FLAGS.worker_log_dir:
      os.makedirs(FLAGS.worker_log_dir, exist_ok=True)
      self.log = open(os.path.join(FLAGS.worker_log_dir, "worker_%d.log" % index), "w")
    self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=self.log or subprocess.DEVNULL, env=env, text=True,
                                 bufsize=1)
    self.info = None
    self.times, self.losses, self.round_medians, self.round_cpu = [], [], [], []

  def read(self):
    """The worker's next JSON line (skipping anything else it printed)."""
    while True:
      line = self.proc.stdout.readline()
      if not line:
        raise RuntimeError("variant %s: its worker exited (--worker_log_dir=DIR keeps its "
                           "stderr)" % self.spec)
      if line.startswith("{"):
        return json.loads(line)
      if self.log:  # e.g. ONEDNN_VERBOSE's lines
        self.log.write(line)

  def run(self, steps):
    self.proc.stdin.write("run %d\n" % steps)
    result = self.read()
    self.times.extend(result["times"])
    self.losses.extend(result["losses"])
    self.round_medians.append(float(np.median(result["times"])))
    self.round_cpu.append(result["cpu"])

  def close(self):
    try:
      self.proc.stdin.write("quit\n")
      self.proc.stdin.close()
    except (BrokenPipeError, OSError):
      pass
    try:
      self.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:  # a worker slow to exit: its figures are in already
      self.proc.kill()
      self.proc.wait(timeout=60)
    if self.log:
      self.log.close()


def numpy_gemm_gflops(threads, n=1024, reps=20):
  """NumPy float32 n^3 matmul GFLOP/s (best of 5) in a child with `threads` BLAS threads."""
  code = ("import numpy as np, time\n"
          "a = np.random.rand(%d, %d).astype(np.float32); b = a.T.copy()\n"
          "[a @ b for _ in range(3)]\n"
          "best = 0\n"
          "for _ in range(5):\n"
          "  t = time.perf_counter()\n"
          "  [a @ b for _ in range(%d)]\n"
          "  best = max(best, 2 * %d ** 3 * %d / (time.perf_counter() - t) / 1e9)\n"
          "print(best)\n" % (n, n, reps, n, reps))
  env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
             MKL_NUM_THREADS=str(threads))
  return float(subprocess.check_output([sys.executable, "-c", code], env=env, text=True))


def machine_line():
  """lscpu's model name and the CPU flags of note, from /proc/cpuinfo."""
  model, cpu_flags = "?", set()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name") and model == "?":
          model = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not cpu_flags:
          cpu_flags = set(line.split(":", 1)[1].split())
  except OSError:
    pass
  return "%s, %d CPUs, flags: %s" % (model, os.cpu_count(), " ".join(
      f for f in CPU_FLAGS_OF_NOTE if f in cpu_flags) or "none of %s" % (CPU_FLAGS_OF_NOTE,))


def _load():
  try:
    return " ".join(open("/proc/loadavg").read().split()[:3])
  except OSError:
    return "?"


def main(_):
  if FLAGS.worker is not None:
    run_worker(FLAGS.worker)
    return
  for spec in FLAGS.variants:
    if parse_variant(spec)["input"] == "tfrecord" and not FLAGS.input_file:
      raise app.UsageError("--variants=%s: input=tfrecord needs --input_file" % spec)
  print("machine: %s" % machine_line())
  print("load average at the start: %s" % _load())
  if FLAGS.numpy_gemm:
    print("NumPy float32 1024^3 matmul: %.0f GFLOP/s with 1 thread, %.0f with 2 (best of 5)" % (
        numpy_gemm_gflops(1), numpy_gemm_gflops(2)))
  workers = [Worker(i, spec) for i, spec in enumerate(FLAGS.variants)]
  try:
    for w in workers:
      w.info = w.read()
    info = workers[0].info
    print("%s, batch %d, seq %d, %d masked, dropout %s, %s optimizer (unless a variant says "
          "otherwise): %.2f GFLOP per step (matmuls, forward + backward); TF %s; %d rounds x %d "
          "steps per variant, lockstep" % (
              os.path.relpath(FLAGS.bert_config_file, REPO_DIR), FLAGS.batch_size,
              FLAGS.seq_length, FLAGS.max_predictions,
              "of the config" if FLAGS.dropout < 0 else "%g" % FLAGS.dropout,
              "fused" if FLAGS.fused_optimizer else "unfused", info["gflop"], info["tf"],
              FLAGS.rounds, FLAGS.steps_per_round))
    for w in workers:
      if w.info["gflop"] != info["gflop"]:
        print("  %s: %.2f GFLOP per step" % (w.spec, w.info["gflop"]))
    for _ in range(FLAGS.rounds):
      for w in workers:
        w.run(FLAGS.steps_per_round)
  finally:
    for w in workers:
      w.close()
  base = workers[0]
  print("\n%-3s %-64s %8s %8s %8s %8s %8s %9s %8s %9s %9s" % (
      "#", "variant", "ms/step", "p90 ms", "steps/s", "ex/s", "GFLOP/s", "vs first", "CPU ms",
      "CPU ratio", "losses as"))
  for i, w in enumerate(workers):
    median = float(np.median(w.times))
    ratio = float(np.median(np.array(w.round_medians) / np.array(base.round_medians)))
    cpu_ratio = float(np.median(np.array(w.round_cpu) / np.array(base.round_cpu)))
    same = next((str(j + 1) for j, other in enumerate(workers[:i])
                 if other.losses == w.losses), "-")
    print("%-3d %-64s %8.1f %8.1f %8.2f %8.0f %8.0f %9.3f %8.1f %9.3f %9s" % (
        i + 1, w.spec[-64:], 1000 * median, 1000 * np.percentile(w.times, 90), 1 / median,
        w.batch_size / median, w.info["gflop"] / median, ratio, 1000 * np.median(w.round_cpu),
        cpu_ratio, same))
  print("(ms/step: median of %d steps; vs first: median over rounds of the round medians' ratio; "
        "CPU ms: the worker's CPU time per step (all threads; median over rounds), less "
        "sensitive to other jobs than the wall time; losses as: the first variant above whose "
        "loss at every step is the same, bit for bit)" % len(base.times))
  print("load average at the end: %s" % _load())


if __name__ == "__main__":
  define_flags()
  app.run(main)
