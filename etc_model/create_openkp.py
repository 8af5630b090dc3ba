# coding=utf-8
r"""Writes OpenKP records for ETC, with the official etcmodel feature layout.

  python -m etc_model.create_openkp --train_file=OpenKPTrain.jsonl --dev_file=OpenKPDev.jsonl \
      --test_file=OpenKPEvalPublic.jsonl --vocab_file=models/minilm/vocab.txt \
      --output_dir=openkp_data [--max_seq_length=4096 --max_global_seq_length=512]

With a SentencePiece vocabulary, --spm_model_file=spm.model instead of --vocab_file: each word
is encoded alone (lower-cased first with --do_lower_case), as the official generator tokenizes
it; a word-start marker piece standing alone ("\u2581") belongs to the word it starts. The
keyphrases are read back from the words, never from the pieces, so no copy of the vocabulary
is needed beside the records.

Inputs: --train_file, --dev_file and --test_file (any of them; each OpenKP JSON lines, gzipped
or not; etc_model.openkp has the fields; the test file may lack KeyPhrases). Every file is read
and checked before anything is written: a line that is not JSON, a document without url, text
or VDOM, VDOM elements whose texts are not the text's words in order, KeyPhrases that are not
lists of words, or (train and dev) a document without a keyphrase is one line naming the file
and the line (exit 2). A url on several lines counts by its last line (as the official scorer
reads the file; the earlier lines are counted as duplicate_urls). The files are streamed.

Outputs in --output_dir (each written under a temporary name and renamed when complete, the
summary last):
  openkp_<split>.tfrecord: one record per document (etc_model.openkp has the layout: the word
    pieces of the VDOM elements' words, one global token per element, each word's index, the
    first occurrence of up to 3 keyphrases). The input ends before the first element that
    does not fit (G elements, L word pieces or L words): counted per cause. Training leaves out
    a document with no keyphrase in its input (as officially; counted);
  openkp_<split>.examples.jsonl: one line per document, in input order: url, record (its index,
    or null), words (those of its input: the keyphrases are made of them) and key_phrases (what
    the official scores are made from); both null in the train split's file, never scored;
  openkp.json: the settings (vocab_file or spm_model_file) and per split the counts
    (documents, records, documents cut by G or by L, words and elements cut, keyphrases not in
    the input / longer than 5 words / beyond the 3 label slots, documents without a label or
    without word pieces, duplicate urls).
A rerun with the same flags writes the same bytes. SIGINT / SIGTERM stop at the next document,
remove the file being written and exit 130 / 143 without openkp.json; a rerun starts over.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import os
import sys

from absl import app
from absl import flags
from absl import logging
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import common
from realformer_tf import pretraining_data
from etc_model import etc_records
from etc_model import long_tasks
from etc_model import openkp

FLAGS = flags.FLAGS

SPLITS = openkp.SPLITS


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  for split in SPLITS:
    flags.DEFINE_string("%s_file" % split, None,
                        "OpenKP JSON lines of the %s split (gzipped or not)%s." % (
                            split, " (KeyPhrases optional)" if split == "test" else ""))
  flags.DEFINE_string("output_dir", None, "Where the records and openkp.json go.")
  flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary of the model.")
  flags.DEFINE_string("spm_model_file", None,
                      "The SentencePiece model of the model, instead of --vocab_file.")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (an uncased vocabulary; with "
                    "--spm_model_file the text is lower-cased before SentencePiece).")
  flags.DEFINE_integer("max_seq_length", openkp.DEFAULT_MAX_SEQ_LENGTH,
                       "Long input length L (word pieces; also the most words).")
  flags.DEFINE_integer("max_global_seq_length", openkp.DEFAULT_MAX_GLOBAL_SEQ_LENGTH,
                       "Global input length G (VDOM elements).")
  etc_records.define_length_flags()


def _never():
  return False


def output_files(output_dir, splits):
  """The files this tool writes for `splits` (the summary last)."""
  paths = []
  for split in splits:
    paths += [openkp.record_file(output_dir, split), openkp.examples_file(output_dir, split)]
  return paths + [os.path.join(output_dir, openkp.SUMMARY_NAME)]


def _source(split, path):
  return "--%s_file=%s" % (split, path)


def check_split(path, split):
  """Reads and checks every line of a split's file (nothing kept); returns the document count,
  the duplicate url lines and the line of each url that counts (openkp.last_lines)."""
  last_line, duplicates = openkp.last_lines(path, _source(split, path))
  documents, _ = openkp.iter_split_documents(path, _source(split, path), split != "test",
                                             last_line)
  return sum(1 for _ in documents), duplicates, last_line


def convert_split(documents, tokenize_word, settings, is_training, lines, counts,
                  should_stop=_never, total=None, log_prefix=""):
  """Yields the records of one split's documents, filling `lines` and `counts` on the way.

  Args:
    documents: iterable of openkp.Document.
    tokenize_word: word -> its word-piece ids.
    settings: the lengths (openkp.convert_document).
    is_training: documents without a label in their input get no record.
    lines: list the examples file's lines are appended to.
    counts: OrderedDict of openkp.COUNTS (and documents), summed.
    should_stop: polled at every document; True raises pretraining_data.Stopped.
    total: the number of documents (progress lines), or None.
    log_prefix: progress lines start with it.

  Yields:
    record feature dicts.
  """
  meter = common.ProgressMeter(total, unit="documents", log_fn=logging.info) if total else None
  num_records = 0
  for n, document in enumerate(documents):
    if should_stop():
      raise pretraining_data.Stopped()
    record, info = openkp.convert_document(document, tokenize_word, settings, is_training)
    lines.append(openkp.example_line(document, num_records if record else None, info["words"],
                                     scored=not is_training))
    counts["documents"] += 1
    for name in openkp.COUNTS:
      counts[name] += info[name]
    if record:
      num_records += 1
      yield record
    if meter:
      meter.update(n + 1, prefix=log_prefix)


def create_openkp(inputs, output_dir, tokenizer, settings, extra_settings=None,
                  should_stop=_never):
  """Writes every split's records and examples file, then openkp.json.

  Args:
    inputs: {split: file} (each read and checked first: check_split).
    output_dir: the output directory (created).
    tokenizer: tokenization.FullTokenizer (WordPiece or SentencePiece).
    settings: dict with the lengths and do_lower_case (openkp.convert_document).
    extra_settings: more settings to record (vocabulary, input files).
    should_stop: polled at every document and record; True raises pretraining_data.Stopped
      (the file being written is removed; openkp.json is not written).

  Returns:
    The summary written to openkp.json.
  """
  checked = collections.OrderedDict(
      (split, check_split(path, split)) for split, path in inputs.items())
  tokenize_word = long_tasks.make_tokenize_word(tokenizer)
  tf.io.gfile.makedirs(output_dir)
  statistics = collections.OrderedDict()
  for split, path in inputs.items():
    lines = []
    counts = collections.OrderedDict([("documents", 0)] +
                                     [(name, 0) for name in openkp.COUNTS])
    documents, _ = openkp.iter_split_documents(path, _source(split, path), split != "test",
                                               checked[split][2])
    records = convert_split(documents, tokenize_word, settings, split == "train", lines, counts,
                            should_stop, total=checked[split][0], log_prefix="%s: " % split)
    long_tasks.write_split_files(openkp.record_file(output_dir, split),
                                 openkp.examples_file(output_dir, split), records, lines,
                                 should_stop)
    counts["duplicate_urls"] = checked[split][1]
    statistics[split] = counts
  summary = collections.OrderedDict()
  summary["settings"] = dict(settings, **(extra_settings or {}))
  summary["splits"] = statistics
  summary["features"] = openkp.feature_lengths(settings["max_seq_length"],
                                               settings["max_global_seq_length"])
  common.write_json_atomic(os.path.join(output_dir, openkp.SUMMARY_NAME), summary)
  return summary


def _validate_flags():
  """One-line errors for impossible flag values."""
  if not any(getattr(FLAGS, "%s_file" % split) for split in SPLITS):
    common.fail("at least one of --train_file, --dev_file or --test_file is required")
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  etc_records.check_lengths(FLAGS.max_seq_length, FLAGS.max_global_seq_length,
                            FLAGS.allow_long_inputs)


def main(_):
  logging.set_verbosity(logging.INFO)
  _validate_flags()
  vocabulary = FLAGS.spm_model_file or FLAGS.vocab_file
  long_tasks.vocabulary_flag(FLAGS.vocab_file, FLAGS.spm_model_file)
  inputs = collections.OrderedDict(
      (split, getattr(FLAGS, "%s_file" % split)) for split in SPLITS
      if getattr(FLAGS, "%s_file" % split))
  for split, path in inputs.items():
    common.require_file(path, "%s_file" % split)
  common.check_output_dir(FLAGS.output_dir)
  outputs = output_files(FLAGS.output_dir, inputs)
  for path in outputs:
    common.check_not_input(path, list(inputs.values()) + [vocabulary], "output_dir")
  tokenizer = long_tasks.load_tokenizer(FLAGS.vocab_file, FLAGS.spm_model_file,
                                        FLAGS.do_lower_case)
  settings = collections.OrderedDict([
      ("max_seq_length", FLAGS.max_seq_length),
      ("max_global_seq_length", FLAGS.max_global_seq_length),
      ("do_lower_case", FLAGS.do_lower_case)])
  summary = long_tasks.run_data_job(
      outputs, openkp.SUMMARY_NAME, lambda should_stop: create_openkp(
          inputs, FLAGS.output_dir, tokenizer, settings,
          extra_settings={"vocab_file": FLAGS.vocab_file, "spm_model_file": FLAGS.spm_model_file,
                          "input_files": dict(inputs)},
          should_stop=should_stop))
  long_tasks.print_split_summary(summary, FLAGS.output_dir, unit="documents")
  for split, stats in summary["splits"].items():
    if stats["cut_by_global_length"] or stats["cut_by_long_length"]:
      logging.warning("%s: %d documents cut by --max_global_seq_length=%d (VDOM elements), %d "
                      "by --max_seq_length=%d (word pieces or words): %d words left out",
                      split, stats["cut_by_global_length"], FLAGS.max_global_seq_length,
                      stats["cut_by_long_length"], FLAGS.max_seq_length, stats["words_cut"])
    if stats["key_phrases_not_in_input"] or stats["key_phrases_too_long"]:
      logging.warning("%s: %d keyphrases not in the input, %d longer than %d words: no label",
                      split, stats["key_phrases_not_in_input"], stats["key_phrases_too_long"],
                      openkp.MAX_PHRASE_WORDS)
    if stats["duplicate_urls"]:
      logging.warning("%s: %d lines repeat an earlier line's url: the last line of each url "
                      "counts", split, stats["duplicate_urls"])
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
