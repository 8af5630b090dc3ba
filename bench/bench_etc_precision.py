# coding=utf-8
"""ETC training step in fp32 / bf16 / fp16 (--precision of etc_model.run_pretraining), on a CPU.

One step is etc_model.run_pretraining's TRAIN model_fn (ETC + the MLM head, Adam, fp16 with
dynamic loss scaling) on a fixed batch of sentence-packed inputs (side inputs from
etc_estimator.add_side_inputs), dropout on. Every precision's graph is built in one process and
stepped round by round, interleaved; the time of a step is the process CPU time with
--threads=1 thread per op (default), so that load from other processes changes it little (the
wall time is printed beside it). Prints the median step of each precision and its ratio to
fp32's.

  bash run.sh bench bench_etc_precision                       # the tests' tiny ETC, ~1 min
  bash run.sh bench bench_etc_precision --size=small --rounds=5

Sizes: tiny (the tests' ETC: hidden 32, 2 layers, 2 heads, L = 64, G = 8, batch 2, vocab 30,522)
and small (hidden 256, 2 layers, 4 heads, L = 512, G = 64, batch 4, vocab 8,000). docs/benchmarks.md
has the figures measured here. fp16 is slow on a CPU (float16 matmuls
have no oneDNN kernel): left out unless --precisions names it.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from realformer_tf import common
from etc_model import etc_estimator
from etc_model import etc_modeling
from etc_model import run_pretraining as etc_run

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "local_radius": 8, "relative_pos_max_distance": 4,
        "relative_vocab_size": 12, "residual_attention": "sum", "use_hard_g2l_mask": True}
# name -> (config, (batch, L, G, predictions per record))
SIZES = {
    "tiny": (TINY, (2, 64, 8, 10)),
    "small": (dict(TINY, vocab_size=8000, hidden_size=256, num_attention_heads=4,
                   intermediate_size=1024), (4, 512, 64, 40)),
}
SENTENCE_LENGTH = 8


def define_flags():
  """Defines the bench's flags (called under __main__ only)."""
  flags.DEFINE_enum("size", "tiny", sorted(SIZES), "Model and input size.")
  flags.DEFINE_string("precisions", "fp32,bf16", "Comma-separated --precision values.")
  flags.DEFINE_integer("rounds", 21, "Interleaved rounds (one step of each precision each).")
  flags.DEFINE_integer("warmup", 3, "Untimed steps of each precision first.")
  flags.DEFINE_integer("threads", 1, "intra_op / inter_op_parallelism_threads of a session.")


def make_features(batch, long_len, global_len, predictions, vocab_size, rng):
  """A fixed batch: sentences of SENTENCE_LENGTH tokens, one global token each.

  Args:
    batch: records.
    long_len: L.
    global_len: G.
    predictions: masked positions per record.
    vocab_size: token ids are drawn below it.
    rng: numpy RandomState.

  Returns:
    dict of int32 / float32 constant Tensors, the features etc_model.run_pretraining reads.
  """
  sentence_ids = np.minimum(np.arange(long_len) // SENTENCE_LENGTH, global_len - 1)
  long_breakpoints = np.zeros(long_len, np.int32)
  long_breakpoints[np.r_[np.nonzero(np.diff(sentence_ids))[0], long_len - 1]] = 1
  global_breakpoints = np.zeros(global_len, np.int32)
  global_breakpoints[sentence_ids.max()] = 1
  values = {
      "token_ids": rng.randint(5, vocab_size, (batch, long_len)),
      "sentence_ids": np.tile(sentence_ids, (batch, 1)),
      "long_breakpoints": np.tile(long_breakpoints, (batch, 1)),
      "global_token_ids": np.tile((np.arange(global_len) <= sentence_ids.max()).astype(int),
                                  (batch, 1)),
      "global_breakpoints": np.tile(global_breakpoints, (batch, 1)),
      "masked_lm_positions": np.stack([rng.choice(long_len, predictions, replace=False)
                                       for _ in range(batch)]),
      "masked_lm_ids": rng.randint(5, vocab_size, (batch, predictions)),
  }
  features = {k: tf.constant(v.astype(np.int32)) for k, v in values.items()}
  features["masked_lm_weights"] = tf.ones([batch, predictions])
  return features


def build_step(config_dict, shape, precision, threads):
  """A session and the train op of one precision's TRAIN graph.

  Args:
    config_dict: EtcConfig keys.
    shape: (batch, L, G, predictions).
    precision: "fp32", "bf16" or "fp16".
    threads: session parallelism.

  Returns:
    (tf1.Session, train op).
  """
  graph = tf.Graph()
  with graph.as_default():
    tf1.set_random_seed(0)
    tf1.train.get_or_create_global_step()
    config = etc_modeling.EtcConfig.from_dict(config_dict)
    batch, long_len, global_len, predictions = shape
    features = etc_estimator.add_side_inputs(
        make_features(batch, long_len, global_len, predictions, config.vocab_size,
                      np.random.RandomState(0)), config, long_len, global_len)
    model_fn = etc_run.model_fn_builder(config, None, 1e-3, 1000, 10, False,
                                        train_batch_size=batch, precision=precision)
    spec = model_fn(features, None, tf1.estimator.ModeKeys.TRAIN, {})
    session = tf1.Session(graph=graph, config=tf1.ConfigProto(
        intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads))
    session.run(tf1.global_variables_initializer())
  return session, spec.train_op


def main(_):
  precisions = [p for p in FLAGS.precisions.split(",") if p]
  for precision in precisions:
    if precision not in ("fp32", "bf16", "fp16"):
      common.fail("--precisions=%s: %r is not one of fp32, bf16, fp16" %
                  (FLAGS.precisions, precision))
  if "fp32" not in precisions:
    common.fail("--precisions=%s: fp32 is needed (the ratios are to it)" % FLAGS.precisions)
  for name in ("rounds", "threads"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d: must be >= 1" % (name, getattr(FLAGS, name)))
  config_dict, shape = SIZES[FLAGS.size]
  steps = {p: build_step(config_dict, shape, p, FLAGS.threads) for p in precisions}
  for session, train_op in steps.values():
    for _ in range(FLAGS.warmup):
      session.run(train_op)
  cpu = {p: [] for p in precisions}
  wall = {p: [] for p in precisions}
  for _ in range(FLAGS.rounds):
    for precision, (session, train_op) in steps.items():
      start_cpu, start_wall = time.process_time(), time.perf_counter()
      session.run(train_op)
      cpu[precision].append(time.process_time() - start_cpu)
      wall[precision].append(time.perf_counter() - start_wall)
  print("ETC training step, size %s (batch, L, G, P = %s), %d thread(s), median of %d rounds, "
        "load average %.1f" % (FLAGS.size, shape, FLAGS.threads, FLAGS.rounds,
                               os.getloadavg()[0]))
  print("%-6s %12s %12s %14s" % ("", "cpu ms", "wall ms", "cpu / fp32"))
  base = np.median(cpu["fp32"])
  for precision in precisions:
    print("%-6s %12.1f %12.1f %14.2f" % (precision, 1000 * np.median(cpu[precision]),
                                          1000 * np.median(wall[precision]),
                                          np.median(cpu[precision]) / base))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
