# coding=utf-8
r"""Writes the long-context tasks (cloze with candidates, supporting sentences, long-document
classification) to TFRecords.

  python -m etc_model.create_long_tasks \
      --input_file=../shared/data/corpus/novels_austen_melville_wells_verne_dickens.txt \
      --output_dir=long_tasks --vocab_file=data/vocab.txt \
      --max_seq_length=4096 --max_global_seq_length=256

With a SentencePiece vocabulary, --spm_model_file=spm.model instead of --vocab_file: the
special tokens (--global_token, --candidate_token, --blank_token) must be pieces of the model
(build_vocab.py --model_type=sentencepiece makes [MASK] and, with --num_unused, [unusedN]), and
each sentence's ids are exactly the whole sentence's SentencePiece ids (long_tasks.
tokenize_sentence finds the names' pieces by SentencePiece's offsets).

The input is cut into chapters, whole chapters are assigned to train / dev / test per book
(seeded), and each chapter's windows give the examples of every task (etc_model.long_tasks has
the rules: headings, books, names, windows, candidates, baselines, inserted runs, labels).

Outputs in --output_dir (each written under a hidden temporary name and renamed when complete):
  {cloze,supporting,classify}_{train,dev,test}.tfrecord (long_tasks.FEATURE_SHAPES_DOC lists
    the features; classify: one example per window of a chapter, labelled with the chapter's
    book or, --classify_label=author, its author; the train records in a seeded random order,
    dev and test in chapter order), and
  long_tasks.json: the settings (vocab, lengths, seed, ...), the chapters per split per book,
    the examples per task and split, the baselines' cloze accuracy, the classification label
    vocabulary (classify_labels: a record's label is an index into it) with the examples per
    label and split, and the majority-class baselines per split.
A rerun with the same flags writes byte-identical files (nothing depends on time or order of
work). Bad flags and missing files: one line (exit 2); the lengths are bounded as in
etc_model.create_pretraining_data (etc_records.check_lengths: G <= L, L <= 65,536 unless
--allow_long_inputs). SIGINT / SIGTERM (polled at every line, chapter and record) stop the run,
remove the file being written and exit 130 / 143 without long_tasks.json; a rerun starts over.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import json
import os
import sys

from absl import app
from absl import flags
from absl import logging
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import common
from realformer_tf import pretraining_data
from realformer_tf import text_input
from etc_model import etc_records
from etc_model import long_tasks

FLAGS = flags.FLAGS

SPLITS = ("train", "dev", "test")
TASKS = ("cloze", "supporting", "classify")
SUMMARY_NAME = long_tasks.SUMMARY_NAME


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("input_file", None,
                      "Input text (one sentence per line, blank line between documents; "
                      "comma-separated files and globs).")
  flags.DEFINE_string("output_dir", None, "Where the TFRecords and long_tasks.json go.")
  flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary of the model.")
  flags.DEFINE_string("spm_model_file", None,
                      "The SentencePiece model of the model, instead of --vocab_file (the "
                      "special tokens must be pieces of it: build_vocab.py "
                      "--model_type=sentencepiece --num_unused=2 makes [unused0], [unused1]).")
  flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
  flags.DEFINE_integer("max_seq_length", 4096, "Long input length L (word pieces).")
  flags.DEFINE_integer("max_global_seq_length", 256,
                       "Global input length G: candidates plus one global token a sentence.")
  flags.DEFINE_string("global_token", "[unused0]",
                      "The vocabulary token (or SentencePiece piece) of every sentence's global "
                      "token.")
  flags.DEFINE_string("candidate_token", "[unused1]",
                      "The vocabulary token (or piece) of every cloze candidate's global token.")
  flags.DEFINE_string("blank_token", "[MASK]",
                      "The vocabulary token (or piece) that replaces the cloze answer.")
  flags.DEFINE_integer("max_candidates", 10, "At most this many cloze candidates.")
  flags.DEFINE_integer("max_candidate_pieces", 4,
                       "A candidate's name is cut to this many word pieces.")
  flags.DEFINE_integer("min_name_count", 3,
                       "A name occurs at least this many times in its chapter.")
  flags.DEFINE_integer("min_context_tokens", 1024,
                       "Examples need at least this many context word pieces.")
  flags.DEFINE_integer("cloze_window_stride", 0,
                       "Cloze: a window every this many sentences (overlapping contexts, more "
                       "questions per chapter; a question is asked once); 0: the next window "
                       "starts after the question.")
  flags.DEFINE_integer("inserted_sentences", 3,
                       "Supporting sentences: the length of the inserted run.")
  flags.DEFINE_enum("classify_label", "book", list(long_tasks.CLASSIFY_LABEL_KINDS),
                    "Classification: label a window with its chapter's book or author.")
  flags.DEFINE_float("dev_fraction", 0.1, "Share of each book's chapters for dev.")
  flags.DEFINE_float("test_fraction", 0.1, "Share of each book's chapters for test.")
  flags.DEFINE_integer("random_seed", 12345, "Seed of the splits and of every example.")
  etc_records.define_length_flags()
  text_input.define_input_flags()


def _never():
  return False


def read_text_documents(input_files, reader, should_stop=_never):
  """Yields (path, document) for each document (a list of stripped non-empty lines).

  Args:
    input_files: text files.
    reader: text_input.TextReader.
    should_stop: function() -> bool polled at every line; True raises pretraining_data.Stopped.
  """
  for path in input_files:
    document = []
    for raw in reader.read_lines(path):
      if should_stop():
        raise pretraining_data.Stopped()
      line = raw.decode("utf-8", errors="replace").strip()
      if line:
        document.append(line)
      elif document:
        yield path, document
        document = []
    if document:
      yield path, document


def build_examples(input_files, tokenizer, settings, should_stop=_never):
  """Chapters, splits and both tasks' examples.

  Args:
    input_files: text files.
    tokenizer: tokenization.FullTokenizer.
    settings: dict of the flags' values and token ids (see main).
    should_stop: function() -> bool polled at every line and chapter; True raises
      pretraining_data.Stopped.

  Returns:
    (chapters, splits, examples, labels): examples[task][split] is a list of feature dicts;
    labels the classification label vocabulary (sorted).
  """
  reader = text_input.TextReader(settings["max_line_chars"], settings["max_bad_fraction"])
  chapters = []
  by_file = collections.OrderedDict()
  for path, document in read_text_documents(input_files, reader, should_stop):
    by_file.setdefault(path, []).append(document)
  for path, documents in by_file.items():
    chapters.extend(long_tasks.documents_to_chapters(documents, os.path.basename(path)))
  splits = long_tasks.split_chapters(chapters, settings["dev_fraction"],
                                     settings["test_fraction"], settings["random_seed"])
  tokenize = long_tasks.tokenize_fn(tokenizer)
  tokenized = []
  for chapter in chapters:
    if should_stop():
      raise pretraining_data.Stopped()
    tokenized.append(long_tasks.tokenize_chapter(chapter, tokenize, settings["min_name_count"]))
  examples = {task: {split: [] for split in SPLITS} for task in TASKS}
  kind = settings.get("classify_label", "book")
  labels = sorted(set(long_tasks.chapter_label(c, kind) for c in chapters))
  label_ids = {label: i for i, label in enumerate(labels)}
  donors = {split: [(c, t[1]) for c, t, s in zip(chapters, tokenized, splits)
                    if s == split and len(t[1]) >= settings["inserted_sentences"]]
            for split in SPLITS}
  for chapter, (_, sentences), split in zip(chapters, tokenized, splits):
    if should_stop():
      raise pretraining_data.Stopped()
    examples["cloze"][split].extend(long_tasks.make_cloze_examples(
        chapter, sentences, settings, settings["random_seed"]))
    others = [d for d in donors[split] if d[0] is not chapter]
    examples["supporting"][split].extend(long_tasks.make_supporting_examples(
        chapter, sentences, others, settings, settings["random_seed"]))
    title = long_tasks.title_page_lines(chapter.sentences)
    if title:  # the lines naming the book and its author are left out of its windows
      _, sentences = long_tasks.tokenize_chapter(
          long_tasks.Chapter(chapter.book, chapter.index, chapter.sentences[title:]), tokenize,
          settings["min_name_count"])
    examples["classify"][split].extend(long_tasks.make_classify_examples(
        chapter, sentences, label_ids[long_tasks.chapter_label(chapter, kind)], settings))
  # Labels follow the books in chapter order: the training records go in a seeded order.
  examples["classify"]["train"] = long_tasks.shuffle_examples(
      examples["classify"]["train"], settings["random_seed"], "classify")
  return chapters, splits, examples, labels



def _accuracies(examples):
  n = float(len(examples))
  return {
      "examples": len(examples),
      "most_frequent_accuracy": round(
          sum(e["most_frequent"] == e["label"] for e in examples) / n, 4),
      "most_recent_accuracy": round(
          sum(e["most_recent"] == e["label"] for e in examples) / n, 4),
  }


def cloze_baselines(examples):
  """The baselines' accuracy on cloze examples, overall and by answer_distance bucket.

  Args:
    examples: list of cloze feature dicts.

  Returns:
    dict: examples, most_frequent_accuracy, most_recent_accuracy, mean_candidates,
    mean_answer_distance and by_distance {bucket: the first three}.
  """
  if not examples:
    return {"examples": 0}
  result = _accuracies(examples)
  n = float(len(examples))
  result["mean_candidates"] = round(sum(sum(e["candidate_mask"]) for e in examples) / n, 2)
  result["mean_answer_distance"] = round(sum(e["answer_distance"][0] for e in examples) / n, 1)
  buckets = collections.OrderedDict()
  for example in sorted(examples, key=lambda e: e["answer_distance"][0]):
    bucket = long_tasks.distance_bucket(example["answer_distance"][0])
    buckets.setdefault(bucket, []).append(example)
  result["by_distance"] = collections.OrderedDict(
      (name, _accuracies(group)) for name, group in buckets.items())
  return result


def classify_baselines(examples, labels):
  """The majority-class baselines of classification examples, per split.

  Args:
    examples: {split: list of classify feature dicts}.
    labels: the label vocabulary.

  Returns:
    {split: dict}: examples, classes (labels present), majority_label (the train split's most
    frequent label; ties: the first in the vocabulary) and majority_accuracy (its share of the
    split: always predicting it), split_majority_label / split_majority_share (the split's own
    most frequent label, an upper bound for any constant answer).
  """
  def counts(split):
    return collections.Counter(e["label"][0] for e in examples[split])
  train = counts("train")
  majority = min(train, key=lambda i: (-train[i], i)) if train else None
  result = collections.OrderedDict()
  for split in SPLITS:
    count = counts(split)
    n = len(examples[split])
    entry = collections.OrderedDict([("examples", n), ("classes", len(count))])
    if n and majority is not None:
      entry["majority_label"] = labels[majority]
      entry["majority_accuracy"] = round(count[majority] / float(n), 4)
    if n:
      own = min(count, key=lambda i: (-count[i], i))
      entry["split_majority_label"] = labels[own]
      entry["split_majority_share"] = round(count[own] / float(n), 4)
    result[split] = entry
  return result


def label_counts(examples, labels):
  """{label: {split: examples}} of classification examples (every label of the vocabulary)."""
  result = collections.OrderedDict(
      (label, collections.OrderedDict((split, 0) for split in SPLITS)) for label in labels)
  for split in SPLITS:
    for example in examples[split]:
      result[labels[example["label"][0]]][split] += 1
  return result


def inserted_share(examples):
  """Share of the sentences (real global tokens) that are inserted, over supporting examples."""
  sentences = sum(sum(1 for g in e["global_token_ids"] if g) for e in examples)
  return round(sum(sum(e["sentence_labels"]) for e in examples) / float(max(1, sentences)), 4)


def create_long_tasks(input_files, output_dir, tokenizer, settings, extra_settings=None,
                      should_stop=_never):
  """Writes both tasks' TFRecords and long_tasks.json; returns the summary dict.

  Args:
    input_files: text files.
    output_dir: the output directory (created).
    tokenizer: tokenization.FullTokenizer.
    settings: dict (see main).
    extra_settings: more settings to record (vocab_file, ...).
    should_stop: function() -> bool polled at every line, chapter and record; True raises
      pretraining_data.Stopped (the record file being written is removed, long_tasks.json is not
      written: the directory does not look finished).

  Returns:
    The summary written to long_tasks.json.
  """
  chapters, splits, examples, labels = build_examples(input_files, tokenizer, settings,
                                                      should_stop)
  if not any(examples[task][split] for task in TASKS for split in SPLITS):
    common.fail("--input_file=%s: no example could be made (%d chapters; lower "
                "--min_context_tokens=%d?)" % (",".join(input_files), len(chapters),
                                               settings["min_context_tokens"]))
  tf.io.gfile.makedirs(output_dir)
  for task in TASKS:
    for split in SPLITS:
      long_tasks.write_records(os.path.join(output_dir, "%s_%s.tfrecord" % (task, split)),
                    examples[task][split], should_stop)
  recorded = dict(settings, **(extra_settings or {}))
  summary = collections.OrderedDict()
  summary["settings"] = recorded
  summary["input_files"] = list(input_files)
  summary["chapters_per_split"] = long_tasks.split_counts(chapters, splits)
  summary["examples"] = {task: {split: len(examples[task][split]) for split in SPLITS}
                         for task in TASKS}
  summary["cloze_baselines"] = {split: cloze_baselines(examples["cloze"][split])
                                for split in SPLITS}
  summary["supporting_inserted_share"] = {split: inserted_share(examples["supporting"][split])
                                          for split in SPLITS}
  summary["classify_label"] = settings.get("classify_label", "book")
  summary["classify_labels"] = labels
  summary["classify_label_counts"] = label_counts(examples["classify"], labels)
  summary["classify_baselines"] = classify_baselines(examples["classify"], labels)
  summary["features"] = long_tasks.FEATURE_SHAPES_DOC.strip().splitlines()
  common.write_json_atomic(os.path.join(output_dir, SUMMARY_NAME), summary)
  return summary


def _validate_flags():
  """One-line errors for impossible flag values."""
  for name in ("input_file", "output_dir"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  etc_records.check_lengths(FLAGS.max_seq_length, FLAGS.max_global_seq_length,
                            FLAGS.allow_long_inputs)
  for name in ("max_candidate_pieces", "min_name_count", "inserted_sentences"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d: must be >= 1" % (name, getattr(FLAGS, name)))
  if FLAGS.max_candidates < 2:
    common.fail("--max_candidates=%d: must be >= 2" % FLAGS.max_candidates)
  if FLAGS.max_candidates * FLAGS.max_candidate_pieces >= FLAGS.max_seq_length:
    common.fail("--max_candidates=%d: times --max_candidate_pieces=%d leaves no room in "
                "--max_seq_length=%d" % (FLAGS.max_candidates, FLAGS.max_candidate_pieces,
                                         FLAGS.max_seq_length))
  if FLAGS.max_candidates >= FLAGS.max_global_seq_length:
    common.fail("--max_candidates=%d: must be < --max_global_seq_length=%d" %
                (FLAGS.max_candidates, FLAGS.max_global_seq_length))
  if FLAGS.min_context_tokens < 0:
    common.fail("--min_context_tokens=%d: must be >= 0" % FLAGS.min_context_tokens)
  if FLAGS.cloze_window_stride < 0:
    common.fail("--cloze_window_stride=%d: must be >= 0" % FLAGS.cloze_window_stride)
  for name in ("dev_fraction", "test_fraction"):
    if not 0.0 <= getattr(FLAGS, name) < 1.0:
      common.fail("--%s=%g: must be in [0, 1)" % (name, getattr(FLAGS, name)))
  if FLAGS.dev_fraction + FLAGS.test_fraction >= 1.0:
    common.fail("--dev_fraction=%g: plus --test_fraction=%g leaves no training chapters" %
                (FLAGS.dev_fraction, FLAGS.test_fraction))
  text_input.validate_input_flags(FLAGS.max_bad_fraction, FLAGS.max_line_chars)


def main(_):
  logging.set_verbosity(logging.INFO)
  _validate_flags()
  source = long_tasks.vocabulary_flag(FLAGS.vocab_file, FLAGS.spm_model_file)
  vocabulary = FLAGS.spm_model_file or FLAGS.vocab_file
  input_files = common.expand_input_files(FLAGS.input_file, "input_file")
  common.check_output_dir(FLAGS.output_dir)
  outputs = [os.path.join(FLAGS.output_dir, "%s_%s.tfrecord" % (task, split))
             for task in TASKS for split in SPLITS]
  for path in outputs + [os.path.join(FLAGS.output_dir, SUMMARY_NAME)]:
    common.check_not_input(path, input_files + [vocabulary], "output_dir")
  text_input.check_text_inputs(input_files)
  tokenizer = long_tasks.load_tokenizer(FLAGS.vocab_file, FLAGS.spm_model_file,
                                       FLAGS.do_lower_case)
  ids = long_tasks.special_token_ids(tokenizer, collections.OrderedDict(
      (flag, getattr(FLAGS, flag)) for flag in ("global_token", "candidate_token", "blank_token")),
                                     source)
  settings = {
      "max_seq_length": FLAGS.max_seq_length,
      "max_global_seq_length": FLAGS.max_global_seq_length,
      "max_candidates": FLAGS.max_candidates,
      "max_candidate_pieces": FLAGS.max_candidate_pieces,
      "min_name_count": FLAGS.min_name_count,
      "min_context_tokens": FLAGS.min_context_tokens,
      "cloze_window_stride": FLAGS.cloze_window_stride,
      "inserted_sentences": FLAGS.inserted_sentences,
      "classify_label": FLAGS.classify_label,
      "dev_fraction": FLAGS.dev_fraction, "test_fraction": FLAGS.test_fraction,
      "random_seed": FLAGS.random_seed,
      "global_token": FLAGS.global_token, "candidate_token": FLAGS.candidate_token,
      "blank_token": FLAGS.blank_token,
      "max_bad_fraction": FLAGS.max_bad_fraction, "max_line_chars": FLAGS.max_line_chars,
  }
  settings.update(ids)
  logging.info("*** Reading %d input file(s); writing %s ***", len(input_files),
               FLAGS.output_dir)
  # SIGINT / SIGTERM: stop at the next line, chapter or record, remove the temporary, exit
  # 130 / 143 without long_tasks.json.
  summary = long_tasks.run_data_job(
      outputs + [os.path.join(FLAGS.output_dir, SUMMARY_NAME)], SUMMARY_NAME,
      lambda should_stop: create_long_tasks(
          input_files, FLAGS.output_dir, tokenizer, settings,
          extra_settings={"vocab_file": FLAGS.vocab_file, "spm_model_file": FLAGS.spm_model_file,
                        "do_lower_case": FLAGS.do_lower_case},
          should_stop=should_stop))
  printable = {k: v for k, v in summary.items() if k not in ("input_files", "features")}
  print(json.dumps(printable, indent=2))
  print("Wrote %s in %s" % (", ".join("%s %s: %d" % (task, split, summary["examples"][task][split])
                                      for task in TASKS for split in SPLITS),
                            FLAGS.output_dir))
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
