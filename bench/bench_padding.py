# coding=utf-8
"""run_classifier --padding=longest against --padding=max_length: examples/s, side by side.

The SST-2 slice in data/sst2_slice (train.tsv 2,000 and dev.tsv 500 movie-review sentences,
mean 28 word pieces) is written once as run_classifier's official fixed-length TFRecord
features at --max_seq_length, and read through run_classifier.file_based_input_fn_builder
(the job's input pipeline, --padding=longest slicing each batch) into its model_fn:

  train     TRAIN mode (forward, backward, Adam), shuffled train.tsv, --train_batch_size;
  eval      PREDICT mode with the dev metrics' extra outputs (what --do_eval runs), dev.tsv,
            --eval_batch_size;
  predict   the same on dev.tsv at --predict_batch_size (what --do_predict runs).

Each (job, padding) has its own graph and session, built once. The two paddings are timed
interleaved, round by round (each round runs --batches_per_round batches of each in turn), so
machine load affects both alike; the ratio is the median of the per-round ratios. Estimator's
own per-call overhead is left out (the same for both paddings).

  bash run.sh bench bench_padding                    # BERT-Tiny and BERT-Small
  bash run.sh bench bench_padding --configs=tiny --rounds=5

The machine is shared: `uptime` is printed before and after; compare the ratios, not the
absolute figures.
"""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

import modeling
import run_classifier as rc
import tokenization

tf1 = tf.compat.v1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PADDINGS = ("max_length", "longest")
JOBS = ("train", "eval", "predict")


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_list("configs", ["tiny", "small"], "Sizes (configs/bert_<size>_post_ln.json).")
  flags.DEFINE_list("jobs", list(JOBS), "Any of train, eval, predict.")
  flags.DEFINE_integer("max_seq_length", 128, "The features' fixed length.")
  flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
  flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.")
  flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size (run_classifier's).")
  flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
  flags.DEFINE_integer("batches_per_round", 8, "Batches of each padding per round.")
  flags.DEFINE_string("data_dir", os.path.join("data", "sst2_slice"),
                      "SST-2 layout directory (train.tsv, dev.tsv), relative to the repository.")


FLAGS = flags.FLAGS


def write_records(task, split, path, tokenizer):
  """Writes one split as the official fixed-length features; returns the number of examples."""
  task_file = task.train if split == "train" else task.dev[0]
  examples = rc.task_examples(task, task_file, os.path.join(REPO_DIR, FLAGS.data_dir), split)
  rc.file_based_convert_examples_to_features(examples, task.labels, FLAGS.max_seq_length,
                                             tokenizer, path)
  return len(examples)


class Runner(object):
  """One (config, job, padding): its graph, session and batch iterator."""

  def __init__(self, config, task, job, padding, record, batch_size):
    self.batch_size = batch_size
    self.graph = tf.Graph()
    training = job == "train"
    mode = tf1.estimator.ModeKeys.TRAIN if training else tf1.estimator.ModeKeys.PREDICT
    with self.graph.as_default():
      tf1.set_random_seed(1)
      input_fn = rc.file_based_input_fn_builder(
          record, FLAGS.max_seq_length, is_training=training, drop_remainder=training, seed=1,
          padding=padding)
      dataset = input_fn({"batch_size": batch_size})
      if not training:
        dataset = dataset.repeat()
      features = tf1.data.make_one_shot_iterator(dataset.prefetch(1)).get_next()
      model_fn = rc.model_fn_builder(config, task.num_labels, None, learning_rate=2e-5,
                                     num_train_steps=10 ** 6, num_warmup_steps=0, use_tpu=False,
                                     use_one_hot_embeddings=False, extra_predictions=True)
      spec = model_fn(features, None, mode, {})
      self.fetch = [spec.train_op] if training else spec.predictions
      self.length = tf.shape(features["input_ids"])[1]
      self.session = tf1.Session(graph=self.graph)
      self.session.run(tf1.global_variables_initializer())
    self.lengths = []

  def run(self, batches):
    """Runs `batches` batches; returns seconds."""
    start = time.time()
    for _ in range(batches):
      _, length = self.session.run([self.fetch, self.length])
      self.lengths.append(int(length))
    return time.time() - start


def uptime():
  try:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
  except OSError:
    return "(uptime unavailable)"


def main(_):
  print("uptime before: %s" % uptime())
  task = rc.get_task("sst-2")
  tokenizer = tokenization.FullTokenizer(os.path.join(REPO_DIR, "data", "vocab.txt"), True)
  batch_sizes = {"train": FLAGS.train_batch_size, "eval": FLAGS.eval_batch_size,
                 "predict": FLAGS.predict_batch_size}
  with tempfile.TemporaryDirectory() as tmp:
    records = {}
    for split in ("train", "dev"):
      records[split] = os.path.join(tmp, split + ".tf_record")
      count = write_records(task, split, records[split], tokenizer)
      print("%s.tsv: %d examples at max_seq_length %d" % (split, count, FLAGS.max_seq_length))
    print("%-6s %-8s %6s %14s %14s %8s %11s" % ("config", "job", "batch", "max_length ex/s",
                                                "longest ex/s", "ratio", "mean length"))
    for size in FLAGS.configs:
      config = modeling.BertConfig.from_json_file(
          os.path.join(REPO_DIR, "configs", "bert_%s_post_ln.json" % size))
      for job in FLAGS.jobs:
        record = records["train" if job == "train" else "dev"]
        runners = {p: Runner(config, task, job, p, record, batch_sizes[job]) for p in PADDINGS}
        for runner in runners.values():
          runner.run(2)  # warm-up
          runner.lengths = []
        seconds = {p: [] for p in PADDINGS}
        for _ in range(FLAGS.rounds):
          for padding in PADDINGS:
            seconds[padding].append(runners[padding].run(FLAGS.batches_per_round))
        examples = FLAGS.batches_per_round * batch_sizes[job]
        rate = {p: examples / np.median(seconds[p]) for p in PADDINGS}
        ratio = np.median([m / l for m, l in zip(seconds["max_length"], seconds["longest"])])
        print("%-6s %-8s %6d %14.1f %14.1f %7.2fx %11.1f" % (
            size, job, batch_sizes[job], rate["max_length"], rate["longest"], ratio,
            np.mean(runners["longest"].lengths)), flush=True)
        for runner in runners.values():
          runner.session.close()
  print("uptime after: %s" % uptime())


if __name__ == "__main__":
  define_flags()
  app.run(main)
