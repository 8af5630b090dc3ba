# coding=utf-8
"""run_ner --padding=longest against max_length on WNUT 2017, and the raw-text NER SavedModel
with bucketed against fixed-length windows: examples/s and latency, side by side.

WNUT 2017 (the shared data's ner/wnut17: train 3,394 and dev 1,009 tweets) is written once as
run_ner's fixed-length window TFRecords at --max_seq_length and read through
run_ner.input_fn_builder (the job's input pipeline, --padding=longest slicing each batch) into
its model_fn, random weights of the config (with longest, BERT computes only the real tokens,
as run_ner's default: modeling.BertModel's skip_padding):

  train     TRAIN mode (forward, backward, Adam) on the train windows, --train_batch_size;
  predict   PREDICT mode on the dev windows, --predict_batch_size (what --do_eval and
            --do_predict run).

Each (job, padding) has its own graph and session; the two paddings are timed interleaved,
round by round, so machine load affects both alike; the ratio is the median of the per-round
ratios (as bench_padding.py).

serve       the raw-text SavedModel (run_ner.NerTagger, random weights), saved twice
            (padding=bucket, the export's default, and padding=max_length) and loaded back:
            milliseconds per request of 1 text (a 10-word sentence) and of 32 dev tweets,
            interleaved in the same way.

  bash run.sh bench bench_padding_ner                     # BERT-Small
  bash run.sh bench bench_padding_ner --configs=tiny,small --rounds=5

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

from realformer_tf import common
from realformer_tf import serving
from realformer_tf import export_utils
import modeling
import padding_harness
import run_ner
import tokenization

tf1 = tf.compat.v1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PADDINGS = ("max_length", "longest")
JOBS = ("train", "predict", "serve")
SHORT_TEXT = "Obama met Merkel in Berlin on Friday to talk about trade"  # 10 words


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_list("configs", ["small"], "Sizes (configs/bert_<size>_post_ln.json).")
  flags.DEFINE_list("jobs", list(JOBS), "Any of train, predict, serve.")
  flags.DEFINE_integer("max_seq_length", 128, "The windows' fixed length.")
  flags.DEFINE_integer("train_batch_size", 32, "Training batch size (run_ner's).")
  flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size (run_ner's).")
  flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
  flags.DEFINE_integer("batches_per_round", 8, "Batches (requests) of each padding per round.")
  flags.DEFINE_string("wnut_dir", None,
                      "WNUT 2017 directory (train.conll, dev.conll); default: ner/wnut17 of "
                      "the shared data.")


FLAGS = flags.FLAGS


def write_records(sentences, path, tokenizer, label_map):
  """Writes sentences as run_ner's fixed-length windows; returns the real pieces per window."""
  features, _ = run_ner.convert_sentences(
      sentences, tokenizer, label_map, FLAGS.max_seq_length, (FLAGS.max_seq_length - 2) // 2,
      with_labels=True)
  run_ner.write_features(features, path)
  return [sum(f.input_mask) for f in features]


def make_runner(config, num_labels, job, padding, record, batch_size):
  """One (config, job, padding) of run_ner's input pipeline and model_fn."""
  training = job == "train"
  input_fn = run_ner.input_fn_builder(record, FLAGS.max_seq_length, is_training=training,
                                      drop_remainder=training, seed=1, padding=padding)
  model_fn = run_ner.model_fn_builder(config, num_labels, None, learning_rate=2e-5,
                                      num_train_steps=10 ** 6, num_warmup_steps=0,
                                      use_tpu=False, use_one_hot_embeddings=False,
                                      max_seq_length=FLAGS.max_seq_length,
                                      skip_padding=padding == "longest")
  return padding_harness.GraphRunner(input_fn, model_fn, training, batch_size)


def save_taggers(config, labels, tmp, vocab_file):
  """The NER SavedModel (random weights), bucket and max_length; returns {padding: dir}."""

  def build():
    ids = tf1.placeholder(tf.int32, [None, None])
    run_ner.create_model(config, False, ids, ids, ids, len(labels), False)
  variables = export_utils.random_variables(build, export_utils.collect_variable_specs(build))
  preprocessor = serving.BertPreprocessor(vocab_file, True, None, FLAGS.max_seq_length)
  dirs = {}
  for padding, tagger_padding in (("max_length", "max_length"), ("longest", "bucket")):
    tagger = run_ner.NerTagger(config, variables, preprocessor, labels, "bio",
                               FLAGS.max_seq_length, (FLAGS.max_seq_length - 2) // 2, True,
                               padding=tagger_padding)
    dirs[padding] = os.path.join(tmp, "ner_" + tagger_padding)
    tf.saved_model.save(tagger, dirs[padding], signatures=tagger.signatures())
  return dirs


def main(_):
  print("uptime before: %s" % padding_harness.uptime())
  wnut = FLAGS.wnut_dir or os.path.join(common.shared_data_dir(), "ner", "wnut17")
  vocab_file = os.path.join(REPO_DIR, "data", "vocab.txt")
  tokenizer = tokenization.FullTokenizer(vocab_file, True)
  conll = {split: run_ner.read_conll(os.path.join(wnut, split + ".conll"), "wnut_dir")
           for split in ("train", "dev")}
  labels = run_ner.label_list(run_ner.entity_types(conll["train"]))
  label_map = {label: i for i, label in enumerate(labels)}
  dev_texts = [" ".join(s.words) for s in conll["dev"].sentences]
  with tempfile.TemporaryDirectory() as tmp:
    records = {}
    for split in ("train", "dev"):
      records[split] = os.path.join(tmp, split + ".tf_record")
      pieces = write_records(conll[split].sentences, records[split], tokenizer, label_map)
      print("%s.conll: %d windows at max_seq_length %d, mean %.1f pieces (p90 %d, max %d)" % (
          split, len(pieces), FLAGS.max_seq_length, np.mean(pieces),
          np.percentile(pieces, 90), max(pieces)))
    print("%-6s %-8s %6s %16s %16s %8s %11s" % ("config", "job", "batch", "max_length",
                                                "longest/bucket", "ratio", "mean length"))
    for size in FLAGS.configs:
      config = modeling.BertConfig.from_json_file(
          os.path.join(REPO_DIR, "configs", "bert_%s_post_ln.json" % size))
      for job in FLAGS.jobs:
        if job == "serve":
          dirs = save_taggers(config, labels, tmp, vocab_file)
          cases = (("serve", 1, [[SHORT_TEXT]]),
                   ("serve", 32, [dev_texts[i:i + 32] for i in range(0, 32 * 8, 32)]))
          for name, batch, requests in cases:
            runners = {p: padding_harness.ServeRunner(dirs[p], requests, "text", "tags")
                       for p in PADDINGS}
            seconds = padding_harness.interleaved(runners, FLAGS.rounds,
                                                  FLAGS.batches_per_round)
            ms = {p: 1000 * np.median(seconds[p]) / FLAGS.batches_per_round for p in PADDINGS}
            ratio = np.median([m / l for m, l in zip(seconds["max_length"],
                                                     seconds["longest"])])
            print("%-6s %-8s %6d %13.1f ms %13.1f ms %7.2fx %11s" % (
                size, name, batch, ms["max_length"], ms["longest"], ratio, "-"), flush=True)
          continue
        record = records["train" if job == "train" else "dev"]
        batch = FLAGS.train_batch_size if job == "train" else FLAGS.predict_batch_size
        runners = {p: make_runner(config, len(labels), job, p, record, batch) for p in PADDINGS}
        seconds = padding_harness.interleaved(runners, FLAGS.rounds, FLAGS.batches_per_round)
        examples = FLAGS.batches_per_round * batch
        rate = {p: examples / np.median(seconds[p]) for p in PADDINGS}
        ratio = np.median([m / l for m, l in zip(seconds["max_length"], seconds["longest"])])
        print("%-6s %-8s %6d %11.1f ex/s %11.1f ex/s %7.2fx %11.1f" % (
            size, job, batch, rate["max_length"], rate["longest"], ratio,
            np.mean(runners["longest"].lengths)), flush=True)
        for runner in runners.values():
          runner.close()
  print("uptime after: %s" % padding_harness.uptime())


if __name__ == "__main__":
  define_flags()
  app.run(main)
