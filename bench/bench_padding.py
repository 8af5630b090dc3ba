# coding=utf-8
"""run_classifier --padding=longest (and --group_by_length) against --padding=max_length, and
the raw-text classifier SavedModel bucketed against fixed-length: examples/s and latency, side
by side.

The SST-2 slice in data/sst2_slice (train.tsv 9,065 and dev.tsv 500 movie-review sentences,
mean 28 word pieces; the figures of docs/benchmarks.md were taken when train.tsv held its first 2,000) is
written once as run_classifier's official fixed-length TFRecord features at --max_seq_length,
and read through run_classifier.file_based_input_fn_builder
(the job's input pipeline, --padding=longest slicing each batch) into its model_fn (the short
columns with BERT's skip_padding, run_classifier's default with longest: the encoder computes
only the real tokens; --noskip_padding times them without):

  train     TRAIN mode (forward, backward, Adam), shuffled train.tsv, --train_batch_size;
  eval      PREDICT mode with the dev metrics' extra outputs (what --do_eval runs), dev.tsv,
            --eval_batch_size;
  predict   the same on dev.tsv at --predict_batch_size (what --do_predict runs).

Training has a third column, grouped: --group_by_length with --padding=longest (its training
default), the batches of each window of 50 sorted by length (other batches than the two
others: faster, and a documented change of the batch composition). Evaluation and prediction
have a third column too, sorted: what run_classifier runs by default (--padding=longest with
sort_by_length: examples sorted by length within windows of 128 batches, outputs put back in
file order; the same outputs to float rounding); longest is the same without sorting. Their
rounds are whole passes over dev.tsv (a sorted pass goes from the shortest batches to the
longest, so a part of one would not be a fair sample): examples/s = 500 / a pass's seconds.

  serve     the raw-text classifier SavedModel (export_hub --mode=classifier, random weights)
            saved twice, --padding=bucket (its default) and max_length, loaded back:
            milliseconds per request of 1 text (a 10-word sentence) and of 32 dev sentences.

Each (job, padding) has its own graph and session, built once. The paddings are timed
interleaved, round by round (each round runs --batches_per_round batches of each in turn), so
machine load affects all alike; a ratio is the median of the per-round ratios. Estimator's
own per-call overhead is left out (the same for every padding).

  bash run.sh bench bench_padding                    # BERT-Tiny and BERT-Small
  bash run.sh bench bench_padding --configs=tiny --rounds=5

The machine is shared: `uptime` is printed before and after; compare the ratios, not the
absolute figures.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from realformer_tf import classifier_tasks
from realformer_tf import serving
import modeling
import padding_harness
import run_classifier as rc
import tokenization

tf1 = tf.compat.v1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Columns: the fixed length, the job's short padding (longest; the SavedModel's bucket), and
# for training --group_by_length (with longest).
PADDINGS = ("max_length", "longest", "grouped")
JOBS = ("train", "eval", "predict", "serve")
# The third column of evaluation and prediction (sort_by_length), instead of grouped.
SORTED = "sorted"
SHORT_TEXT = "A gripping and beautifully shot film that I would gladly see again"  # 10 words


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_list("configs", ["tiny", "small"], "Sizes (configs/bert_<size>_post_ln.json).")
  flags.DEFINE_list("jobs", list(JOBS), "Any of train, eval, predict.")
  flags.DEFINE_integer("max_seq_length", 128, "The features' fixed length.")
  flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
  flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.")
  flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size (run_classifier's).")
  flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
  flags.DEFINE_integer("batches_per_round", 8, "Training batches of each padding per round "
                       "(evaluation and prediction: one pass over dev.tsv).")
  flags.DEFINE_bool("fused_optimizer", False, "Train with run_classifier's --fused_optimizer "
                    "(every column alike).")
  flags.DEFINE_bool("skip_padding", True, "The short columns' BERT skips the padding rows "
                    "(run_classifier's default with --padding=longest).")
  flags.DEFINE_string("data_dir", os.path.join("data", "sst2_slice"),
                      "SST-2 layout directory (train.tsv, dev.tsv), relative to the repository.")


FLAGS = flags.FLAGS


def write_records(task, split, path, tokenizer):
  """Writes one split as the official fixed-length features; returns the number of examples."""
  task_file = task.train if split == "train" else task.dev[0]
  examples = classifier_tasks.task_examples(task, task_file,
                                            os.path.join(REPO_DIR, FLAGS.data_dir), split)
  rc.file_based_convert_examples_to_features(examples, task.labels, FLAGS.max_seq_length,
                                             tokenizer, path)
  return len(examples)


def make_runner(config, task, job, padding, record, batch_size):
  """One (config, job, column) of run_classifier's input pipeline and model_fn."""
  training = job == "train"
  input_fn = rc.file_based_input_fn_builder(
      record, FLAGS.max_seq_length, is_training=training, drop_remainder=training, seed=1,
      padding="longest" if padding in ("grouped", SORTED) else padding,
      group_by_length=padding == "grouped", sort_by_length=padding == SORTED)
  model_fn = rc.model_fn_builder(config, task.num_labels, None, learning_rate=2e-5,
                                 num_train_steps=10 ** 6, num_warmup_steps=0, use_tpu=False,
                                 use_one_hot_embeddings=False, extra_predictions=True,
                                 max_seq_length=FLAGS.max_seq_length,
                                 fused_optimizer=FLAGS.fused_optimizer,
                                 skip_padding=padding != "max_length" and FLAGS.skip_padding)
  return padding_harness.GraphRunner(input_fn, model_fn, training, batch_size)


def save_classifiers(config, tmp, vocab_file):
  """The raw-text classifier SavedModel (random weights), max_length and bucket (under the
  "longest" column); returns {column: directory}."""
  dirs = {}
  for column, padding in (("max_length", "max_length"), ("longest", "bucket")):
    dirs[column] = os.path.join(tmp, "classifier_" + padding)
    serving.export_classifier(config, None, dirs[column], vocab_file, True, None,
                              FLAGS.max_seq_length, label_list="0,1", padding=padding)
  return dirs


def main(_):
  print("uptime before: %s" % padding_harness.uptime())
  task = classifier_tasks.get_task("sst-2")
  tokenizer = tokenization.FullTokenizer(os.path.join(REPO_DIR, "data", "vocab.txt"), True)
  batch_sizes = {"train": FLAGS.train_batch_size, "eval": FLAGS.eval_batch_size,
                 "predict": FLAGS.predict_batch_size}
  vocab_file = os.path.join(REPO_DIR, "data", "vocab.txt")
  with tempfile.TemporaryDirectory() as tmp:
    records = {}
    counts = {}
    for split in ("train", "dev"):
      records[split] = os.path.join(tmp, split + ".tf_record")
      counts[split] = write_records(task, split, records[split], tokenizer)
      print("%s.tsv: %d examples at max_seq_length %d" % (split, counts[split],
                                                          FLAGS.max_seq_length))
    dev_texts = [e.text_a for e in classifier_tasks.task_examples(
        task, task.dev[0], os.path.join(REPO_DIR, FLAGS.data_dir), "dev")]
    print("%-6s %-8s %5s %13s %15s %7s %13s %7s %7s" % (
        "config", "job", "batch", "max_length", "longest/bucket", "ratio", "grouped/sorted",
        "ratio", "length"))
    for size in FLAGS.configs:
      config = modeling.BertConfig.from_json_file(
          os.path.join(REPO_DIR, "configs", "bert_%s_post_ln.json" % size))
      for job in FLAGS.jobs:
        if job == "serve":
          dirs = save_classifiers(config, tmp, vocab_file)
          cases = ((1, [[SHORT_TEXT]]),
                   (32, [dev_texts[i:i + 32] for i in range(0, 32 * 8, 32)]))
          for batch, requests in cases:
            runners = {p: padding_harness.ServeRunner(dirs[p], requests, "sentence",
                                                      "probabilities") for p in dirs}
            seconds = padding_harness.interleaved(runners, FLAGS.rounds,
                                                  FLAGS.batches_per_round)
            ms = {p: 1000 * np.median(seconds[p]) / FLAGS.batches_per_round for p in dirs}
            print("%-6s %-8s %5d %10.1f ms %12.1f ms %7s %13s %7s %7s" % (
                size, job, batch, ms["max_length"], ms["longest"],
                padding_harness.ratio_to_max_length(seconds, "longest"), "-", "-", "-"), flush=True)
          continue
        record = records["train" if job == "train" else "dev"]
        columns = PADDINGS if job == "train" else PADDINGS[:2] + (SORTED,)
        runners = {p: make_runner(config, task, job, p, record, batch_sizes[job]) for p in columns}
        if job == "train":
          batches = FLAGS.batches_per_round
          examples = batches * batch_sizes[job]
        else:   # one pass over dev.tsv per round (the input repeats)
          batches = -(-counts["dev"] // batch_sizes[job])
          examples = counts["dev"]
        seconds = padding_harness.interleaved(runners, FLAGS.rounds, batches)
        rate = {p: "%.1f ex/s" % (examples / np.median(seconds[p])) for p in columns}
        lengths = [np.mean(runners[p].lengths) for p in columns[1:]]
        print("%-6s %-8s %5d %13s %15s %7s %13s %7s %7s" % (
            size, job, batch_sizes[job], rate["max_length"], rate["longest"],
            padding_harness.ratio_to_max_length(seconds, "longest"), rate[columns[2]],
            padding_harness.ratio_to_max_length(seconds, columns[2]),
            "/".join("%.1f" % l for l in lengths)), flush=True)
        for runner in runners.values():
          runner.close()
  print("uptime after: %s" % padding_harness.uptime())


if __name__ == "__main__":
  define_flags()
  app.run(main)
