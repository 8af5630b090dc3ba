# coding=utf-8
"""Pre-training step time (forward + backward + AdamW, MLM + NSP heads) per model variant.

Variants share one process and are interleaved round by round (each round runs --steps_per_round
steps of every variant in turn), so machine load affects all of them alike. Prints ms/step,
examples/s and the ratios against Post-LN without residual attention.

  python bench/bench_training_step.py                       # BERT-Small and tiny, batch 8, seq 128
  python bench/bench_training_step.py --configs=base --rounds=3
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import modeling  # pylint: disable=g-import-not-at-top
import optimization  # pylint: disable=g-import-not-at-top
import run_pretraining  # pylint: disable=g-import-not-at-top

tf1 = tf.compat.v1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_list("configs", ["small", "tiny"], "Sizes (configs/bert_<size>_post_ln.json).")
  flags.DEFINE_list("variants", ["post:none", "post:sum", "post:mean", "pre:none"],
                    "layer_norm_type:residual_attention pairs to compare.")
  flags.DEFINE_integer("batch_size", 8, "Examples per step.")
  flags.DEFINE_integer("seq_length", 128, "Sequence length.")
  flags.DEFINE_integer("max_predictions", 20, "Masked positions per sequence.")
  flags.DEFINE_integer("rounds", 5, "Interleaved rounds.")
  flags.DEFINE_integer("steps_per_round", 5, "Steps of each variant per round.")
  flags.DEFINE_integer("warmup_steps", 3, "Untimed steps per variant first.")


FLAGS = flags.FLAGS


class Variant(object):
  """One model variant in its own graph and session, with fixed random inputs."""

  def __init__(self, size, layer_norm_type, residual_attention):
    self.name = "%s %s-LN %s" % (size, layer_norm_type, residual_attention)
    config = modeling.BertConfig.from_json_file(
        os.path.join(REPO_DIR, "configs", "bert_%s_post_ln.json" % size))
    config.layer_norm_type = layer_norm_type
    config.residual_attention = residual_attention
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf1.set_random_seed(0)
      rng = np.random.RandomState(0)
      b, s, p = FLAGS.batch_size, FLAGS.seq_length, FLAGS.max_predictions
      features = {
          "input_ids": tf.constant(rng.randint(0, config.vocab_size, (b, s)), tf.int32),
          "input_mask": tf.constant(np.ones((b, s)), tf.int32),
          "segment_ids": tf.constant(np.repeat([[0] * (s // 2) + [1] * (s - s // 2)], b, 0),
                                     tf.int32),
          "masked_lm_positions": tf.constant(rng.randint(1, s, (b, p)), tf.int32),
          "masked_lm_ids": tf.constant(rng.randint(0, config.vocab_size, (b, p)), tf.int32),
          "masked_lm_weights": tf.constant(np.ones((b, p)), tf.float32),
          "next_sentence_labels": tf.constant(rng.randint(0, 2, (b, 1)), tf.int32),
      }
      model_fn = run_pretraining.model_fn_builder(
          config, None, 1e-4, 1000, 100, use_tpu=False, use_one_hot_embeddings=False,
          total_steps=1000, train_batch_size=b)
      spec = model_fn(features, None, tf1.estimator.ModeKeys.TRAIN, {})
      self.train_op = spec.train_op
      self.loss = spec.loss
      session_config = tf1.ConfigProto(intra_op_parallelism_threads=0,
                                       inter_op_parallelism_threads=0)
      self.session = tf1.Session(graph=self.graph, config=session_config)
      self.session.run(tf1.global_variables_initializer())
    self.times = []

  def run(self, steps, timed=True):
    for _ in range(steps):
      start = time.perf_counter()
      self.session.run(self.train_op)
      if timed:
        self.times.append(time.perf_counter() - start)


def main(_):
  print("batch %d, seq %d, %d rounds x %d steps per variant, interleaved; TF %s, %d CPUs" %
        (FLAGS.batch_size, FLAGS.seq_length, FLAGS.rounds, FLAGS.steps_per_round,
         tf.__version__, os.cpu_count()))
  for size in FLAGS.configs:
    variants = []
    for spec in FLAGS.variants:
      layer_norm_type, residual_attention = spec.split(":")
      variants.append(Variant(size, layer_norm_type, residual_attention))
    for v in variants:
      v.run(FLAGS.warmup_steps, timed=False)
    for _ in range(FLAGS.rounds):
      for v in variants:
        v.run(FLAGS.steps_per_round)
    base = np.median(variants[0].times)
    print("\n%-26s %10s %10s %12s %10s" % ("variant (" + size + ")", "ms/step", "p90 ms",
                                           "examples/s", "vs first"))
    for v in variants:
      median = np.median(v.times)
      print("%-26s %10.1f %10.1f %12.1f %10.3f" % (
          v.name, 1000 * median, 1000 * np.percentile(v.times, 90),
          FLAGS.batch_size / median, median / base))
      v.session.close()


if __name__ == "__main__":
  define_flags()
  app.run(main)
