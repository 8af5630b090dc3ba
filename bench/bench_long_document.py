# coding=utf-8
"""Long documents: --long_document=window against truncation, on real novels.

Task: which of two authors wrote a passage: Jane Austen (Emma, Mansfield Park, Northanger Abbey,
Persuasion, Pride and Prejudice, Sense and Sensibility) or Charles Dickens (Great
Expectations), from the shared corpus (corpus/novels_austen_melville_wells_verne_dickens.txt,
one sentence per line, a blank line between documents; documents 1-251 are Austen's, 398-491
Dickens's, the ones between Melville, Wells and Verne). A passage is --passage_words
consecutive words of one document; the evidence (vocabulary, names, style) is spread over the
whole passage, and truncation keeps only its first --max_seq_length - 2 tokens. Train and dev
passages come from different documents (every 5th document is dev), the same number per
author.

For each of --seeds, four runs of run_classifier.py on the same data, model and initial
checkpoint:

  truncate          trained and evaluated on the first window only (the official behaviour),
                    with as many training steps as the windowed run (more epochs);
  window/mean       every window of a training passage carries its label; dev logits pooled
                    by mean over the passage's windows;
  window/max        the same model, max pooling;
  window->truncate  the same windowed model scored on the first window only: what training on
                    every window gives by itself; the rest of the gain is the pooling at
                    evaluation.

  bash run.sh bench bench_long_document [--encoder_dir=out/minilm_tf] [--max_seq_length=32]

Measured on the project's 2-core CPU (2 min 13 s for the three seeds), accuracy on 200 dev
passages (9.1 windows each) after 345 steps of batch 32:

  truncate 0.815 (0.825 / 0.800 / 0.820), window/mean 0.982 (0.990 / 0.990 / 0.965),
  window/max 0.922 (0.965 / 0.980 / 0.820), window->truncate 0.857 (0.860 / 0.855 / 0.855).

--encoder_dir: a directory with bert_config.json, vocab.txt and a checkpoint (e.g. the MiniLM
converted with convert_hf_checkpoint.py); default a random tiny BERT trained from scratch.
"""

import json
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

from realformer_tf import common

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOVELS = os.path.join("corpus", "novels_austen_melville_wells_verne_dickens.txt")
# Documents (1-based, blank-line separated) of each author in NOVELS.
AUTHORS = {"austen": (1, 251), "dickens": (398, 491)}
TINY = {"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 128,
        "type_vocab_size": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02}

flags.DEFINE_string("encoder_dir", None,
                    "bert_config.json + vocab.txt + checkpoint (default: a random tiny BERT).")
flags.DEFINE_integer("max_seq_length", 32, "Window length (tokens, [CLS] and [SEP] included).")
flags.DEFINE_integer("doc_stride", None, "Stride (default: max_seq_length - 2, no overlap).")
flags.DEFINE_integer("passage_words", 200, "Words per passage.")
flags.DEFINE_integer("train_per_author", 300, "Training passages per author.")
flags.DEFINE_integer("dev_per_author", 100, "Dev passages per author.")
flags.DEFINE_float("epochs", 2.0, "Epochs over the windows of the windowed run.")
flags.DEFINE_float("learning_rate", 1e-3, "Learning rate.")
flags.DEFINE_integer("batch_size", 32, "Training batch size.")
flags.DEFINE_string("seeds", "1,2,3",
                    "Model seeds (initial checkpoint of the tiny BERT, head, dropout, order); "
                    "the passages are the same for every seed.")
flags.DEFINE_string("work_dir", None, "Where to write data and models (default: a temporary "
                    "directory, removed).")
FLAGS = flags.FLAGS


def read_documents(path):
  """Documents of the corpus file: lists of sentences, in order."""
  documents, current = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line:
        current.append(line)
      elif current:
        documents.append(current)
        current = []
  if current:
    documents.append(current)
  return documents


def passages(documents, first, last, words_per_passage):
  """Consecutive passages of `words_per_passage` words from documents first..last (1-based);
  returns {document number: [passage, ...]}."""
  out = {}
  for number in range(first, last + 1):
    words = " ".join(documents[number - 1]).split()
    out[number] = [" ".join(words[i:i + words_per_passage])
                   for i in range(0, len(words) - words_per_passage + 1, words_per_passage)]
  return out


def build_task(data_dir, rng):
  """Writes train.tsv / dev.tsv (text<TAB>author); returns the counts."""
  documents = read_documents(os.path.join(common.shared_data_dir(), NOVELS))
  rows = {"train": [], "dev": []}
  for author, (first, last) in sorted(AUTHORS.items()):
    by_doc = passages(documents, first, last, FLAGS.passage_words)
    split = {"train": [], "dev": []}
    for number, texts in by_doc.items():
      split["dev" if number % 5 == 0 else "train"].extend(texts)
    for name, wanted in (("train", FLAGS.train_per_author), ("dev", FLAGS.dev_per_author)):
      texts = split[name]
      if len(texts) < wanted:
        raise SystemExit("%s has only %d %s passages" % (author, len(texts), name))
      chosen = rng.choice(len(texts), wanted, replace=False)
      rows[name].extend((texts[i], author) for i in sorted(chosen))
  os.makedirs(data_dir, exist_ok=True)
  for name, items in rows.items():
    order = rng.permutation(len(items))
    with open(os.path.join(data_dir, name + ".tsv"), "w", encoding="utf-8") as f:
      f.write("text\tauthor\n")
      for i in order:
        f.write("%s\t%s\n" % items[i])
  return {name: len(items) for name, items in rows.items()}


def model_files(work_dir, seed):
  """(bert_config.json, vocab.txt, init checkpoint) of the encoder used."""
  if FLAGS.encoder_dir:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return (os.path.join(FLAGS.encoder_dir, "bert_config.json"),
            os.path.join(FLAGS.encoder_dir, "vocab.txt"),
            tf.train.latest_checkpoint(FLAGS.encoder_dir))
  sys.path.insert(0, os.path.join(REPO, "tests"))
  from conftest import write_random_bert_checkpoint  # pylint: disable=g-import-not-at-top
  config = os.path.join(work_dir, "bert_config.json")
  with open(config, "w") as f:
    json.dump(TINY, f)
  checkpoint = write_random_bert_checkpoint(
      config, os.path.join(work_dir, "init%d" % seed, "model.ckpt"), seed=seed)
  return config, os.path.join(REPO, "data", "vocab.txt"), checkpoint


def run(args):
  """Runs run_classifier.py; returns (seconds, eval_results dict)."""
  start = time.time()
  proc = subprocess.run([sys.executable, os.path.join(REPO, "run_classifier.py")] + args,
                        cwd=REPO, capture_output=True, text=True,
                        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
  if proc.returncode != 0:
    raise SystemExit("run_classifier.py failed (%d):\n%s" % (proc.returncode,
                                                             proc.stderr[-3000:]))
  output_dir = [a for a in args if a.startswith("--output_dir=")][0].split("=", 1)[1]
  with open(os.path.join(output_dir, "eval_results.json")) as f:
    return time.time() - start, json.load(f)


def run_arms(work_dir, data_dir, counts, seed):
  """The four runs of one seed; returns [(name, eval_results, seconds)] and the windowing."""
  config, vocab, checkpoint = model_files(work_dir, seed)
  stride = FLAGS.doc_stride or FLAGS.max_seq_length - 2
  base = ["--task_name=tsv", "--text_a_column=text", "--label_column=author",
          "--data_dir=%s" % data_dir, "--vocab_file=%s" % vocab, "--bert_config_file=%s" % config,
          "--init_checkpoint=%s" % checkpoint, "--max_seq_length=%d" % FLAGS.max_seq_length,
          "--train_batch_size=%d" % FLAGS.batch_size, "--eval_batch_size=64",
          "--learning_rate=%g" % FLAGS.learning_rate, "--save_checkpoints_steps=100000",
          "--seed=%d" % seed,
          "--do_lower_case=%s" % ("false" if "cased" in vocab and "uncased" not in vocab
                                  else "true")]
  window = ["--long_document=window", "--doc_stride=%d" % stride]
  window_dir = os.path.join(work_dir, "window%d" % seed)
  rows = []
  seconds, results = run(base + window + ["--output_dir=%s" % window_dir, "--do_train",
                                          "--do_eval", "--num_train_epochs=%g" % FLAGS.epochs])
  steps = results["num_train_steps"]
  windows_per_passage = results["eval_num_windows"] / results["eval_num_examples"]
  rows.append(("window/mean", results, seconds))
  # The truncating run gets the same number of steps: its epochs are over one window each.
  train_windows = steps * FLAGS.batch_size / FLAGS.epochs
  truncate_epochs = FLAGS.epochs * train_windows / counts["train"]
  seconds, truncated = run(base + ["--output_dir=%s" % os.path.join(work_dir, "truncate%d" % seed),
                                   "--do_train", "--do_eval",
                                   "--num_train_epochs=%g" % truncate_epochs])
  rows.insert(0, ("truncate", truncated, seconds))
  seconds, results = run(base + window + ["--output_dir=%s" % window_dir, "--do_eval",
                                          "--window_pooling=max"])
  rows.append(("window/max", results, seconds))
  seconds, results = run(base + ["--output_dir=%s" % window_dir, "--do_eval"])
  rows.append(("window->truncate", results, seconds))
  return rows, stride, windows_per_passage


def main(_):
  rng = np.random.RandomState(0)
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_long_document_")
  data_dir = os.path.join(work_dir, "data")
  counts = build_task(data_dir, rng)
  seeds = [int(x) for x in FLAGS.seeds.split(",") if x.strip()]
  by_seed = {}
  for seed in seeds:
    by_seed[seed], stride, windows_per_passage = run_arms(work_dir, data_dir, counts, seed)

  print("Authorship (Austen vs Dickens), %d-word passages: %d train / %d dev (balanced, from "
        "different documents), max_seq_length=%d, doc_stride=%d, %.1f windows per dev "
        "passage; %s" % (
            FLAGS.passage_words, counts["train"], counts["dev"], FLAGS.max_seq_length, stride,
            windows_per_passage,
            "encoder %s" % FLAGS.encoder_dir if FLAGS.encoder_dir else
            "random tiny BERT (2 layers x 64) trained from scratch"))
  names = [name for name, _, _ in by_seed[seeds[0]]]
  print("%-18s %s %9s %11s %8s" % ("run", " ".join("acc(s=%d)" % s for s in seeds),
                                   "mean acc", "train steps", "seconds"))
  for i, name in enumerate(names):
    accuracies = [by_seed[s][i][1]["eval_accuracy"] for s in seeds]
    steps = by_seed[seeds[0]][i][1].get("num_train_steps", "-")
    seconds = np.mean([by_seed[s][i][2] for s in seeds])
    print("%-18s %s %9.3f %11s %8.1f" % (name, " ".join("%9.3f" % a for a in accuracies),
                                         np.mean(accuracies), steps, seconds))
  if not FLAGS.work_dir:
    import shutil  # pylint: disable=g-import-not-at-top
    shutil.rmtree(work_dir)


if __name__ == "__main__":
  app.run(main)
