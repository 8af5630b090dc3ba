# coding=utf-8
"""etc_model.run_long_tasks --padding=longest (and bucket) against max_length: evaluation
examples/s of an ETC on the long-context tasks' dev records, side by side.

The records are etc_model.create_long_tasks' from the shared corpus's novels file at
--max_seq_length / --max_global_seq_length (written once into a temporary directory, or
--data_dir's), read through run_long_tasks.input_fn_builder (the job's input pipeline:
--padding=longest cuts each batch to its real long and global inputs and computes the side
inputs for the cut batch) into its model_fn in PREDICT mode (what --do_eval and --do_predict
run), random weights of an ETC of --hidden_size / --num_layers with local_radius
--local_radius. Each (task, padding) has its own graph and session; the paddings are timed
interleaved, round by round (bench/padding_harness.py), so machine load affects all alike; the
ratio is the median of the per-round ratios.

  bash run.sh bench bench_padding_long                        # cloze and supporting at 512
  bash run.sh bench bench_padding_long --tasks=cloze --rounds=5

Prints the records' real lengths, then per task and padding the mean long length fed to the
model, examples/s and the ratio to max_length. The machine is shared: `uptime` is
printed before and after; compare the ratios, not the absolute figures.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from realformer_tf import common
import padding_harness
from etc_model import etc_modeling
from etc_model import run_long_tasks

tf1 = tf.compat.v1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PADDINGS = ("max_length", "longest", "bucket")
NOVELS = "novels_austen_melville_wells_verne_dickens.txt"

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_list("tasks", ["cloze", "supporting"], "Tasks whose dev records are scored.")
  flags.DEFINE_list("paddings", list(PADDINGS), "Paddings compared (max_length first).")
  flags.DEFINE_integer("max_seq_length", 512, "Long length L of the records.")
  flags.DEFINE_integer("max_global_seq_length", 48, "Global length G of the records.")
  flags.DEFINE_integer("min_context_tokens", 256, "create_long_tasks' --min_context_tokens.")
  flags.DEFINE_string("data_dir", None,
                      "create_long_tasks' output at these lengths (default: written into a "
                      "temporary directory from the shared corpus's novels).")
  flags.DEFINE_integer("hidden_size", 256, "ETC width (heads of 64).")
  flags.DEFINE_integer("num_layers", 4, "ETC layers.")
  flags.DEFINE_integer("local_radius", 84, "ETC local radius (the official 84).")
  flags.DEFINE_integer("predict_batch_size", 8, "run_long_tasks' --predict_batch_size.")
  flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
  flags.DEFINE_integer("batches_per_round", 4, "Batches of each padding per round.")


def make_data(output_dir):
  """create_long_tasks over the shared novels at the bench's lengths (a child process)."""
  subprocess.run([sys.executable, "-m", "etc_model.create_long_tasks",
                  "--vocab_file=data/vocab.txt",
                  "--input_file=%s" % os.path.join(common.shared_data_dir(), "corpus", NOVELS),
                  "--output_dir=%s" % output_dir, "--max_seq_length=%d" % FLAGS.max_seq_length,
                  "--max_global_seq_length=%d" % FLAGS.max_global_seq_length,
                  "--min_context_tokens=%d" % FLAGS.min_context_tokens],
                 cwd=REPO_DIR, check=True, capture_output=True)


def real_lengths(path):
  """Each record's real long and global length (last breakpoint or non-zero id, plus one)."""
  lengths = []
  for record in tf1.io.tf_record_iterator(path):
    feature = tf.train.Example.FromString(record).features.feature
    values = lambda name: np.array(feature[name].int64_list.value)
    lengths.append([
        np.nonzero((values(ids) != 0) | (values(breaks) != 0))[0][-1] + 1
        for ids, breaks in (("token_ids", "long_breakpoints"),
                            ("global_token_ids", "global_breakpoints"))])
  return np.array(lengths)


def bench_task(task, data_dir, config, max_candidates):
  """Prints one task's table: padding, mean lengths fed, examples/s, ratio to max_length."""
  path = os.path.join(data_dir, "%s_dev.tfrecord" % task)
  lengths = real_lengths(path)
  print("%s dev: %d records, real long length mean %.0f (min %d, max %d) of %d, global mean "
        "%.1f (max %d) of %d" % (task, len(lengths), lengths[:, 0].mean(), lengths[:, 0].min(),
                                 lengths[:, 0].max(), FLAGS.max_seq_length, lengths[:, 1].mean(),
                                 lengths[:, 1].max(), FLAGS.max_global_seq_length))
  runners = {}
  for padding in FLAGS.paddings:
    model_fn = run_long_tasks.model_fn_builder(
        task, config, None, 1e-4, 1, 0, False,
        att_implementation=run_long_tasks.layout_for("auto", FLAGS.max_seq_length),
        max_global_seq_length=FLAGS.max_global_seq_length)
    input_fn = run_long_tasks.input_fn_builder(
        path, task, config, FLAGS.max_seq_length, FLAGS.max_global_seq_length, max_candidates,
        is_training=False, padding=padding)
    runners[padding] = padding_harness.GraphRunner(input_fn, model_fn, False,
                                                   FLAGS.predict_batch_size,
                                                   length_name="token_ids")
  seconds = padding_harness.interleaved(runners, FLAGS.rounds, FLAGS.batches_per_round)
  print("  %-11s %9s %12s %9s" % ("padding", "mean L", "examples/s", "vs max"))
  for padding, runner in runners.items():
    rate = FLAGS.batches_per_round * FLAGS.predict_batch_size / np.median(seconds[padding])
    print("  %-11s %9.0f %12.2f %9s" % (padding, np.mean(runner.lengths), rate,
                                        padding_harness.ratio_to_max_length(seconds, padding)))
    runner.close()


def main(_):
  if FLAGS.paddings[0] != "max_length":
    common.fail("--paddings=%s: must start with max_length" % ",".join(FLAGS.paddings))
  print("before:", padding_harness.uptime())
  with tempfile.TemporaryDirectory() as tmp:
    data_dir = FLAGS.data_dir
    if not data_dir:
      data_dir = os.path.join(tmp, "long_tasks")
      make_data(data_dir)
    with open(os.path.join(data_dir, "long_tasks.json")) as f:
      settings = json.load(f)["settings"]
    if (settings["max_seq_length"], settings["max_global_seq_length"]) != (
        FLAGS.max_seq_length, FLAGS.max_global_seq_length):
      common.fail("--data_dir=%s: records of %d / %d tokens, not --max_seq_length=%d / "
                  "--max_global_seq_length=%d" % (
                      data_dir, settings["max_seq_length"], settings["max_global_seq_length"],
                      FLAGS.max_seq_length, FLAGS.max_global_seq_length))
    config = etc_modeling.EtcConfig.from_dict({
        "vocab_size": 30522, "hidden_size": FLAGS.hidden_size,
        "num_hidden_layers": FLAGS.num_layers, "num_attention_heads": FLAGS.hidden_size // 64,
        "intermediate_size": 4 * FLAGS.hidden_size, "local_radius": FLAGS.local_radius,
        "relative_pos_max_distance": 12, "relative_vocab_size": 32,
        "max_absolute_position_embeddings": FLAGS.max_seq_length,
        "residual_attention": "sum", "use_hard_g2l_mask": True})
    print("ETC %d layers, hidden %d, local_radius %d, layout %s, batch %d; L=%d, G=%d" % (
        FLAGS.num_layers, FLAGS.hidden_size, FLAGS.local_radius,
        run_long_tasks.layout_for("auto", FLAGS.max_seq_length), FLAGS.predict_batch_size,
        FLAGS.max_seq_length, FLAGS.max_global_seq_length))
    for task in FLAGS.tasks:
      bench_task(task, data_dir, config, settings["max_candidates"])
  print("after:", padding_harness.uptime())


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
