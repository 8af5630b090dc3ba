# coding=utf-8
"""ETC (blocked sparse layout) against BERT full attention: time and peak memory per step vs length.

One training step is forward + backward + an SGD update of a loss on the encoder's outputs
(no MLM head: the encoders alone), batch 1, dropout on (step-seeded, as in training). Variants:

  etc:none        ETC, att_implementation="sparse" (blocks of local_radius + 1 tokens), one
                  global token per --tokens_per_global long tokens (sentences of that length,
                  hard g2l mask, relative ids, as etc_inputs makes them);
  etc:sum         the same with residual attention "sum" (RealFormer's running sums);
  etc:sum+recompute  the same with grad_checkpointing_period=1 (activations recomputed in the
                  backward pass);
  bert:none       modeling.BertModel (full [L, L] attention), same width / depth / heads.

Memory: every (variant, length) point runs in a child process of its own, which reports its
resident set: the peak (ru_maxrss) over its steps and that peak minus the RSS just before the
first step (what the step itself allocates: activations, gradients). A point whose child dies
(e.g. killed for memory) or exceeds --max_bert_length is reported as not run.

Time: the process CPU time of a step (median of --steps after one warm-up step), with
--threads=1 thread per op and one op at a time (default), so that it measures the step's work
whatever else loads the machine (the wall time is printed beside it). The ratio
sum / none, the figure RealFormer-ETC must keep near 1 (goal <= 1.05), is measured again with
both models in one child per length, interleaved round by round (--rounds rounds of --steps
steps each), so load from other processes affects both alike: the median of per-round ratios.

  bash run.sh bench bench_etc                                   # 512 .. 8192, a few minutes
  bash run.sh bench bench_etc --lengths=512,1024 --png=/tmp/etc.png

Prints a table and the ratios; --png writes the plot (matplotlib, in requirements.txt),
--json the figures. Measured on the project's 2-core CPU (loaded by other jobs, 25 min; the
docs/benchmarks.md has the table and docs/etc_bench.png): sum / none 0.988 to 1.028
from 512 to 8,192 tokens; BERT / ETC 1.86x the time and 3.1x the memory at 4,096.
"""

import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np

from realformer_tf import common

VARIANTS = ("etc:none", "etc:sum", "etc:sum+recompute", "bert:none")

FLAGS = flags.FLAGS


def define_flags():
  """Defines the bench's flags (called under __main__ only)."""
  flags.DEFINE_string("lengths", "512,1024,2048,4096,8192", "Long input lengths.")
  flags.DEFINE_string("variants", ",".join(VARIANTS), "Comma-separated subset of %s." %
                      ", ".join(VARIANTS))
  flags.DEFINE_integer("hidden_size", 128, "Width of both models.")
  flags.DEFINE_integer("num_hidden_layers", 4, "Depth of both models.")
  flags.DEFINE_integer("num_attention_heads", 2, "Attention heads of both models.")
  flags.DEFINE_integer("local_radius", 84, "ETC's local radius (the paper's 84).")
  flags.DEFINE_integer("tokens_per_global", 32, "Long tokens per ETC global token (sentence).")
  flags.DEFINE_integer("max_bert_length", 4096, "Longest input BERT is run on (its memory is "
                       "quadratic in the length).")
  flags.DEFINE_integer("threads", 1, "intra_op / inter_op_parallelism_threads of a session.")
  flags.DEFINE_integer("steps", 3, "Timed steps per point (after one warm-up step).")
  flags.DEFINE_integer("rounds", 5, "Interleaved rounds of the sum / none ratio.")
  flags.DEFINE_integer("point_timeout", 600, "Seconds a child may take.")
  flags.DEFINE_string("png", None, "Write the plot here (.png).")
  flags.DEFINE_string("json", None, "Write the figures here (.json).")
  # Internal: a child's job ("point" or "ratio").
  flags.DEFINE_string("child", None, "Internal: run one measurement and print its JSON.")
  flags.DEFINE_integer("child_length", 0, "Internal.")
  flags.DEFINE_string("child_variants", "", "Internal.")


def _current_rss_mb():
  """Resident set size of this process now, MB (Linux /proc)."""
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2.0 ** 20


def _peak_rss_mb():
  """Peak resident set size of this process so far, MB (ru_maxrss is in KB on Linux)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _Step(object):
  """One variant's graph, session and train op at one length."""

  def __init__(self, variant, length, settings):
    """Builds the graph and initialises the variables.

    Args:
      variant: one of VARIANTS.
      length: long input length.
      settings: dict of the model / timing flags (`_settings()`).
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import modeling  # pylint: disable=g-import-not-at-top
    from etc_model import etc_inputs  # pylint: disable=g-import-not-at-top
    from etc_model import etc_modeling  # pylint: disable=g-import-not-at-top
    tf1 = tf.compat.v1
    family, options = variant.split(":")
    hidden = settings["hidden_size"]
    common_config = dict(hidden_size=hidden, num_hidden_layers=settings["num_hidden_layers"],
                         num_attention_heads=settings["num_attention_heads"],
                         intermediate_size=4 * hidden, hidden_dropout_prob=0.1,
                         attention_probs_dropout_prob=0.1)
    rng = np.random.RandomState(0)
    vocab_size = 1000
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf1.train.get_or_create_global_step()
      if family == "etc":
        radius = settings["local_radius"]
        config = etc_modeling.EtcConfig(
            vocab_size=vocab_size, local_radius=radius,
            residual_attention=options.split("+")[0],
            grad_checkpointing_period=1 if "recompute" in options else 0, **common_config)
        per_global = settings["tokens_per_global"]
        global_len = max(1, length // per_global)
        sentences = [list(rng.randint(5, vocab_size, per_global))
                     for _ in range(length // per_global + 1)]
        row = etc_inputs.make_sentence_global_inputs([sentences], length, global_len,
                                                     global_token_id=1)
        side = etc_inputs.make_global_local_transformer_side_inputs(
            row["long_breakpoints"][np.newaxis], row["global_breakpoints"][np.newaxis],
            row["sentence_ids"][np.newaxis], radius, config.relative_pos_max_distance,
            use_hard_g2l_mask=True)
        feed = {k: tf.constant(v, tf.int32) for k, v in side.items() if v is not None}
        model = etc_modeling.EtcModel(config, is_training=True)
        output = model(token_ids=tf.constant(row["token_ids"][np.newaxis]),
                       global_token_ids=tf.constant(row["global_token_ids"][np.newaxis]),
                       att_implementation="sparse", **feed)[0]
      else:
        config = modeling.BertConfig(vocab_size=vocab_size, max_position_embeddings=length,
                                     residual_attention=options, **common_config)
        model = modeling.BertModel(config, is_training=True,
                                   input_ids=tf.constant(rng.randint(5, vocab_size,
                                                                     [1, length])))
        output = model.get_sequence_output()
      weights = tf.constant(rng.normal(size=[1, length, hidden]).astype(np.float32))
      loss = tf.reduce_mean(output * weights)
      self.train_op = tf1.train.GradientDescentOptimizer(1e-3).minimize(
          loss, global_step=tf1.train.get_global_step())
      # One thread per op and one op at a time by default: the process CPU time of a step is
      # then its work, whatever else loads the machine.
      session_config = tf1.ConfigProto(
          intra_op_parallelism_threads=settings["threads"],
          inter_op_parallelism_threads=settings["threads"])
      self.session = tf1.Session(graph=self.graph, config=session_config)
      self.session.run(tf1.global_variables_initializer())

  def run(self, steps):
    """Runs `steps` steps; returns the (CPU seconds, wall seconds) of each."""
    times = []
    for _ in range(steps):
      cpu, wall = time.process_time(), time.time()
      self.session.run(self.train_op)
      times.append((time.process_time() - cpu, time.time() - wall))
    return times


def _child_point(variant, length, settings):
  """One (variant, length) in this process: CPU / wall ms per step and memory.

  Args:
    variant: one of VARIANTS.
    length: long input length.
    settings: `_settings()`.

  Returns:
    dict variant, length, ms (CPU), wall_ms, peak_rss_mb, step_mb.
  """
  step = _Step(variant, length, settings)
  before = _current_rss_mb()
  step.run(1)  # warm-up: the first run allocates and plans
  times = np.array(step.run(settings["steps"]))
  peak = _peak_rss_mb()
  return {"variant": variant, "length": length, "ms": 1000.0 * float(np.median(times[:, 0])),
          "wall_ms": 1000.0 * float(np.median(times[:, 1])), "peak_rss_mb": peak,
          "step_mb": peak - before}


def _child_ratio(variants, length, settings):
  """Interleaved rounds of two variants in this process.

  Args:
    variants: [denominator, numerator] variants.
    length: long input length.
    settings: `_settings()`.

  Returns:
    dict variants, length, ratio (median of the per-round ratios of CPU ms per step), ratios.
  """
  steps = [_Step(variant, length, settings) for variant in variants]
  for step in steps:
    step.run(1)
  ratios = []
  for _ in range(settings["rounds"]):
    medians = [float(np.median(np.array(step.run(settings["steps"]))[:, 0]))
               for step in steps]
    ratios.append(medians[1] / medians[0])
  return {"variants": variants, "length": length, "ratio": float(np.median(ratios)),
          "ratios": ratios}


def _settings():
  return {name: getattr(FLAGS, name) for name in (
      "hidden_size", "num_hidden_layers", "num_attention_heads", "local_radius",
      "tokens_per_global", "steps", "rounds", "threads")}


def _run_child(job, length, variants):
  """Runs this script as a child for one job; its JSON result, or None if it died."""
  cmd = [sys.executable, os.path.abspath(__file__), "--child=%s" % job,
         "--child_length=%d" % length, "--child_variants=%s" % ",".join(variants)]
  cmd += ["--%s=%s" % (name, value) for name, value in _settings().items()]
  try:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=FLAGS.point_timeout)
  except subprocess.TimeoutExpired:
    print("  %s %s at %d: over %d s, not run" % (job, ",".join(variants), length,
                                                 FLAGS.point_timeout), flush=True)
    return None
  lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
  if proc.returncode != 0 or not lines:
    tail = (proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode])[-1]
    print("  %s %s at %d: failed (exit status %d: %s)" % (
        job, ",".join(variants), length, proc.returncode, tail[:200]), flush=True)
    return None
  return json.loads(lines[-1])


def plot(points, ratios, lengths, path):
  """Writes CPU ms per step and step memory against length (log-log), one line per variant.

  Args:
    points: list of `_child_point` results.
    ratios: list of `_child_ratio` results (their medians go in the title).
    lengths: the x ticks.
    path: output .png.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
  for variant in sorted({p["variant"] for p in points}, key=VARIANTS.index):
    mine = sorted((p for p in points if p["variant"] == variant), key=lambda p: p["length"])
    xs = [p["length"] for p in mine]
    axes[0].plot(xs, [p["ms"] for p in mine], marker="o", label=variant)
    axes[1].plot(xs, [p["step_mb"] for p in mine], marker="o", label=variant)
  for ax, label in ((axes[0], "CPU ms per training step"), (axes[1], "MB allocated by a step")):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(length) for length in lengths])
    ax.set_xlabel("input length (long tokens)")
    ax.set_ylabel(label)
    ax.grid(True, which="both", alpha=0.3)
  axes[0].legend(fontsize=8)
  summary = ", ".join("%d: %.3f" % (r["length"], r["ratio"]) for r in ratios)
  fig.suptitle("ETC sparse (r=%d, 1 global / %d tokens) vs BERT, hidden %d, %d layers; "
               "sum/none %s" % (FLAGS.local_radius, FLAGS.tokens_per_global, FLAGS.hidden_size,
                                FLAGS.num_hidden_layers, summary), fontsize=7)
  fig.tight_layout()
  common.write_figure_png(fig, path)


def main(_):
  if FLAGS.child:
    variants = FLAGS.child_variants.split(",")
    if FLAGS.child == "point":
      result = _child_point(variants[0], FLAGS.child_length, _settings())
    else:
      result = _child_ratio(variants, FLAGS.child_length, _settings())
    print(json.dumps(result), flush=True)
    return
  try:
    lengths = [int(x) for x in FLAGS.lengths.split(",")]
  except ValueError:
    common.fail("--lengths=%s: must be comma-separated integers" % FLAGS.lengths)
  if not lengths or min(lengths) < 1:
    common.fail("--lengths=%s: must be positive" % FLAGS.lengths)
  variants = FLAGS.variants.split(",")
  for variant in variants:
    if variant not in VARIANTS:
      common.fail("--variants=%s: unknown variant %r (known: %s)" % (
          FLAGS.variants, variant, ", ".join(VARIANTS)))
  for name in ("threads", "steps", "rounds", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "local_radius", "tokens_per_global"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d: must be >= 1" % (name, getattr(FLAGS, name)))
  if FLAGS.hidden_size % FLAGS.num_attention_heads:
    common.fail("--hidden_size=%d: not a multiple of --num_attention_heads=%d" % (
        FLAGS.hidden_size, FLAGS.num_attention_heads))
  for name in ("png", "json"):
    if getattr(FLAGS, name):
      common.check_output_path(getattr(FLAGS, name), name)
  start = time.time()
  points, ratios = [], []
  for length in lengths:
    for variant in variants:
      if variant.startswith("bert") and length > FLAGS.max_bert_length:
        print("  %s at %d: over --max_bert_length=%d, not run" % (
            variant, length, FLAGS.max_bert_length), flush=True)
        continue
      result = _run_child("point", length, [variant])
      if result:
        points.append(result)
        print("  %-18s %5d  %9.1f CPU ms (wall %9.1f)  peak RSS %7.0f MB  step %7.0f MB" % (
            variant, length, result["ms"], result["wall_ms"], result["peak_rss_mb"],
            result["step_mb"]), flush=True)
    if "etc:none" in variants and "etc:sum" in variants:
      result = _run_child("ratio", length, ["etc:none", "etc:sum"])
      if result:
        ratios.append(result)
        print("  etc sum/none at %d, interleaved: %.3f (rounds %s)" % (
            length, result["ratio"], " ".join("%.3f" % r for r in result["ratios"])),
              flush=True)

  print("\nETC sparse (local_radius %d, one global token per %d long tokens) vs BERT full "
        "attention; hidden %d, %d layers, %d heads, batch 1, forward + backward + SGD; "
        "%d thread(s) per session on %d CPU cores; %s" % (
            FLAGS.local_radius, FLAGS.tokens_per_global, FLAGS.hidden_size,
            FLAGS.num_hidden_layers, FLAGS.num_attention_heads, FLAGS.threads, os.cpu_count(),
            common.format_duration(time.time() - start)))
  by_key = {(p["variant"], p["length"]): p for p in points}
  header = "%-8s" % "length" + "".join("%22s" % v for v in variants)
  print("\nCPU ms per step (MB allocated by the step)\n" + header)
  for length in lengths:
    cells = []
    for variant in variants:
      p = by_key.get((variant, length))
      cells.append("%22s" % ("%.0f (%.0f)" % (p["ms"], p["step_mb"]) if p else "not run"))
    print("%-8d" % length + "".join(cells))
  print("\nratios          " + "".join("%9d" % length for length in lengths))
  rows = [("etc sum/none", lambda n: [r["ratio"] for r in ratios if r["length"] == n])]
  for name, num, den, key in (("sum/none memory", "etc:sum", "etc:none", "step_mb"),
                              ("recompute/sum ms", "etc:sum+recompute", "etc:sum", "ms"),
                              ("recompute/sum mem", "etc:sum+recompute", "etc:sum", "step_mb"),
                              ("bert/etc:none ms", "bert:none", "etc:none", "ms"),
                              ("bert/etc:none mem", "bert:none", "etc:none", "step_mb")):
    rows.append((name, lambda n, num=num, den=den, key=key: (
        [by_key[num, n][key] / by_key[den, n][key]]
        if (num, n) in by_key and (den, n) in by_key else [])))
  for name, values in rows:
    cells = []
    for length in lengths:
      value = values(length)
      cells.append("%9s" % ("%.3f" % value[0] if value else "-"))
    print("%-16s" % name + "".join(cells))
  if FLAGS.json:
    common.write_json_atomic(FLAGS.json, {"points": points, "ratios": ratios,
                                          "settings": _settings(), "cpu_count": os.cpu_count()})
  if FLAGS.png and points:
    plot(points, ratios, lengths, FLAGS.png)
    print("wrote %s" % FLAGS.png)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
