# coding=utf-8
r"""Writes WikiHop (QAngaroo) records for ETC, with the official etcmodel feature layout.

  python -m etc_model.create_wikihop --train_file=qangaroo_v1.1/wikihop/train.json \
      --dev_file=qangaroo_v1.1/wikihop/dev.json --vocab_file=models/minilm/vocab.txt \
      --output_dir=wikihop_data [--max_seq_length=4096 --max_global_seq_length=430 \
      --max_candidates=79 --max_num_sentences=200]

With a SentencePiece vocabulary, --spm_model_file=spm.model instead of --vocab_file; the global
tokens (--sentence_token, --question_token, --candidate_token, --paragraph_token: [unused0],
[unused2], [unused3], [unused4] by default) must be pieces of it. The text is lower-cased before
SentencePiece and a candidate's mentions are found by text at word starts on piece boundaries
(etc_model.wikihop's docstring).

Inputs: --train_file, --dev_file and --test_file (any of them; each a QAngaroo JSON list of
{"id", "query", "supports", "candidates", "answer"}; the test file's records may lack "answer",
as the hidden test set's). Every file is read and checked before anything is written: a file
that is not JSON, a record without one of the keys or with a value of another type, a repeated
id, an empty candidate or an answer that is not among the candidates is one line naming the
file and the record (exit 2).

Outputs in --output_dir (each written under a temporary name and renamed when complete, the
summary last):
  wikihop_<split>.tfrecord: one record per example that fits (etc_model.wikihop has the layout:
    candidates, query and documents in the long input, one global token per candidate, query
    word piece, document and sentence, the candidates' mentions linked, candidate_mask, label);
  wikihop_<split>.examples.jsonl: one line per example of the input file, in its order: id,
    candidates, answer, record (the record's index, or null) and skipped (why an example has no
    record: more candidates than --max_candidates, or candidates and query longer than the long
    or global input; the official accuracy counts those as wrong);
  wikihop.json: the settings, the global tokens' ids, and per split the counts (examples,
    records, skipped by reason, truncated examples and sentences, merged duplicate candidates),
    the mean and largest long / global lengths, mentions, and the most-mentioned-candidate
    baseline's accuracy.
A rerun with the same flags writes the same bytes. SIGINT / SIGTERM stop at the next example,
remove the file being written and exit 130 / 143 without wikihop.json; a rerun starts over.
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
from etc_model import wikihop

FLAGS = flags.FLAGS

SPLITS = wikihop.SPLITS


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  for split in SPLITS:
    flags.DEFINE_string("%s_file" % split, None,
                        "The QAngaroo WikiHop JSON file of the %s split%s." % (
                            split, " (records may lack \"answer\")" if split == "test" else ""))
  flags.DEFINE_string("output_dir", None, "Where the records and wikihop.json go.")
  flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary of the model.")
  flags.DEFINE_string("spm_model_file", None,
                      "The SentencePiece model of the model, instead of --vocab_file (the "
                      "global tokens must be pieces of it: build_vocab.py "
                      "--model_type=sentencepiece --num_unused=5 makes [unused0] ... "
                      "[unused4]).")
  flags.DEFINE_bool("do_lower_case", True,
                    "Lower-case the text (required: WikiHop's candidates are lower case and "
                    "their mentions are matched on lower-cased text, as officially; with "
                    "--spm_model_file the text is lower-cased before SentencePiece).")
  for kind, token in wikihop.GLOBAL_TOKENS.items():
    flags.DEFINE_string("%s_token" % kind, token,
                        "The vocabulary token (or SentencePiece piece) of the %s global tokens."
                        % kind)
  flags.DEFINE_integer("max_seq_length", wikihop.DEFAULT_MAX_SEQ_LENGTH,
                       "Long input length L (word pieces).")
  flags.DEFINE_integer("max_global_seq_length", wikihop.DEFAULT_MAX_GLOBAL_SEQ_LENGTH,
                       "Global input length G (candidates, query pieces, documents, sentences).")
  flags.DEFINE_integer("max_candidates", wikihop.DEFAULT_MAX_CANDIDATES,
                       "Candidates C a record holds (an example with more is skipped).")
  flags.DEFINE_integer("max_num_sentences", wikihop.DEFAULT_MAX_NUM_SENTENCES,
                       "The most document sentences an example keeps (the official truncation).")
  etc_records.define_length_flags()


def _never():
  return False


def split_files(paths):
  """{split: path} of the split files given.

  Args:
    paths: {split: the --<split>_file value (may be empty)} for the splits of SPLITS.
  """
  return collections.OrderedDict((split, paths[split]) for split in SPLITS if paths.get(split))


def _split_files_from_flags():
  """{split: --<split>_file} from the parsed flags."""
  return {split: getattr(FLAGS, "%s_file" % split) for split in SPLITS}


def output_files(output_dir, splits):
  """The files this tool writes for `splits` (the summary last)."""
  paths = []
  for split in splits:
    paths += [wikihop.record_file(output_dir, split), wikihop.examples_file(output_dir, split)]
  return paths + [os.path.join(output_dir, wikihop.SUMMARY_NAME)]


def make_tokenize(tokenizer):
  """text -> (word pieces, ids) with the tokenizer (candidate texts cached).

  A SentencePiece tokenizer gives (pieces, ids, spans): each piece's character span in the text
  (wikihop.find_mentions matches the candidates by text and spans).
  """
  cache = {}
  spm_spans = long_tasks.tokenize_fn(tokenizer)
  if not isinstance(spm_spans, long_tasks.SentencePieceSpans):
    spm_spans = None

  def tokenize(text):
    if text not in cache:
      if spm_spans is not None:
        ids, spans = spm_spans.pieces_with_spans(text)
        result = (tokenizer.convert_ids_to_tokens(ids), ids, spans)
      else:
        pieces = tokenizer.tokenize(text)
        result = (pieces, tokenizer.convert_tokens_to_ids(pieces))
      if len(text) > 100:  # documents and long sentences: not repeated
        return result
      cache[text] = result
    return cache[text]

  return tokenize


def _mean(values):
  return round(sum(values) / float(len(values)), 2) if values else None


def split_statistics(examples, infos, records):
  """The summary's counts of one split.

  Args:
    examples: the split's wikihop.Example list.
    infos: convert_example's info of each.
    records: the record features made (in order).

  Returns:
    OrderedDict of counts, means and the most-mentioned baseline.
  """
  made = [info for info in infos if info["skipped"] is None]
  answered = [(e, info) for e, info in zip(examples, infos)
              if info["skipped"] is None and e.answer is not None]
  stats = collections.OrderedDict()
  stats["examples"] = len(examples)
  stats["records"] = len(records)
  stats["answered_records"] = len(answered)
  stats["skipped"] = collections.OrderedDict(sorted(collections.Counter(
      info["skipped"] for info in infos if info["skipped"]).items()))
  stats["merged_duplicate_candidates"] = sum(1 for e in examples if e.duplicates)
  stats["truncated_examples"] = sum(1 for info in made if info["truncated_sentences"])
  stats["truncated_sentences"] = sum(info["truncated_sentences"] for info in made)
  stats["mean_candidates"] = _mean([len(e.candidates) for e in examples])
  stats["max_candidates"] = max([len(e.candidates) for e in examples] or [0])
  stats["mean_documents"] = _mean([len(e.supports) for e in examples])
  for key in ("long_tokens", "global_tokens", "sentences", "mentions"):
    stats["mean_" + key] = _mean([info[key] for info in made])
  stats["max_long_tokens"] = max([info["long_tokens"] for info in made] or [0])
  stats["max_global_tokens"] = max([info["global_tokens"] for info in made] or [0])
  # Baseline: the candidate with the most mentions in the kept sentences (ties: the first).
  stats["most_mentioned_accuracy"] = (round(sum(
      e.candidates[info["most_mentioned"]] == e.answer for e, info in answered) /
                                            float(len(answered)), 4) if answered else None)
  return stats


def convert_split(examples, tokenize, ids, settings, should_stop=_never, log_prefix=""):
  """The records, examples file lines and statistics of one split.

  Args:
    examples: wikihop.Example list.
    tokenize: make_tokenize's function.
    ids: wikihop.global_token_ids of the vocabulary.
    settings: the lengths (wikihop.convert_example).
    should_stop: polled at every example; True raises pretraining_data.Stopped.
    log_prefix: progress lines start with it.

  Returns:
    (records: list of feature dicts, lines: list of example_line dicts, statistics).
  """
  records, lines, infos = [], [], []
  meter = common.ProgressMeter(len(examples), unit="examples", log_fn=logging.info)
  for n, example in enumerate(examples):
    if should_stop():
      raise pretraining_data.Stopped()
    features, info = wikihop.convert_example(example, tokenize, ids, settings)
    lines.append(wikihop.example_line(example, len(records) if features else None, info))
    infos.append(info)
    if features:
      records.append(features)
    meter.update(n + 1, prefix=log_prefix)
  return records, lines, split_statistics(examples, infos, records)


def create_wikihop(examples_by_split, output_dir, tokenizer, settings, extra_settings=None,
                   should_stop=_never, global_tokens=None):
  """Writes every split's records and examples file, then wikihop.json; returns the summary.

  Args:
    examples_by_split: {split: wikihop.Example list} (checked: wikihop.read_examples).
    output_dir: the output directory (created).
    tokenizer: tokenization.FullTokenizer (lower-casing).
    settings: dict with max_seq_length, max_global_seq_length, max_candidates,
      max_num_sentences.
    extra_settings: more settings to record (vocab_file, input files, ...).
    should_stop: polled at every example and record; True raises pretraining_data.Stopped
      (the file being written is removed; wikihop.json is not written).
    global_tokens: {kind: token} of the global tokens (None: wikihop.GLOBAL_TOKENS).

  Returns:
    The summary written to wikihop.json.
  """
  global_tokens = global_tokens or wikihop.GLOBAL_TOKENS
  try:
    ids = wikihop.global_token_ids(tokenizer.vocab, global_tokens)
  except KeyError as e:
    common.fail("the vocabulary has no %s, WikiHop's global token" % e)
  tokenize = make_tokenize(tokenizer)
  converted = collections.OrderedDict()
  for split, examples in examples_by_split.items():
    converted[split] = convert_split(examples, tokenize, ids, settings, should_stop,
                                     log_prefix="%s: " % split)
  tf.io.gfile.makedirs(output_dir)
  for split, (records, lines, _) in converted.items():
    long_tasks.write_split_files(wikihop.record_file(output_dir, split),
                                 wikihop.examples_file(output_dir, split), records, lines,
                                 should_stop)
  summary = collections.OrderedDict()
  summary["settings"] = dict(settings, **(extra_settings or {}))
  summary["global_tokens"] = collections.OrderedDict(
      (kind, {"token": global_tokens[kind], "id": ids[kind]}) for kind in ids)
  summary["splits"] = collections.OrderedDict(
      (split, stats) for split, (_, _, stats) in converted.items())
  summary["features"] = wikihop.feature_lengths(
      settings["max_seq_length"], settings["max_global_seq_length"], settings["max_candidates"])
  common.write_json_atomic(os.path.join(output_dir, wikihop.SUMMARY_NAME), summary)
  return summary


def _validate_flags():
  """One-line errors for impossible flag values."""
  if not split_files(_split_files_from_flags()):
    common.fail("at least one of --train_file, --dev_file or --test_file is required")
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  if not FLAGS.do_lower_case:
    common.fail("--do_lower_case=false: WikiHop's candidates are lower case and their mentions "
                "are matched on lower-cased word pieces (the official code refuses a cased "
                "tokenizer too)")
  etc_records.check_lengths(FLAGS.max_seq_length, FLAGS.max_global_seq_length,
                            FLAGS.allow_long_inputs)
  if not 1 <= FLAGS.max_candidates < FLAGS.max_global_seq_length:
    common.fail("--max_candidates=%d: must be in [1, --max_global_seq_length=%d)" %
                (FLAGS.max_candidates, FLAGS.max_global_seq_length))
  if FLAGS.max_num_sentences < 0:
    common.fail("--max_num_sentences=%d: must be >= 0" % FLAGS.max_num_sentences)


def main(_):
  logging.set_verbosity(logging.INFO)
  _validate_flags()
  source = long_tasks.vocabulary_flag(FLAGS.vocab_file, FLAGS.spm_model_file)
  vocabulary = FLAGS.spm_model_file or FLAGS.vocab_file
  inputs = split_files(_split_files_from_flags())
  common.check_output_dir(FLAGS.output_dir)
  outputs = output_files(FLAGS.output_dir, inputs)
  for path in outputs:
    common.check_not_input(path, list(inputs.values()) + [vocabulary], "output_dir")
  # Every file is read and checked before anything is written.
  examples = collections.OrderedDict(
      (split, wikihop.read_examples(path, "--%s_file=%s" % (split, path),
                                    require_answer=split != "test"))
      for split, path in inputs.items())
  tokenizer = long_tasks.load_tokenizer(FLAGS.vocab_file, FLAGS.spm_model_file, True)
  global_tokens = collections.OrderedDict(
      (kind, getattr(FLAGS, "%s_token" % kind)) for kind in wikihop.GLOBAL_TOKENS)
  long_tasks.special_token_ids(tokenizer, collections.OrderedDict(
      ("%s_token" % kind, token) for kind, token in global_tokens.items()), source)
  settings = collections.OrderedDict([
      ("max_seq_length", FLAGS.max_seq_length),
      ("max_global_seq_length", FLAGS.max_global_seq_length),
      ("max_candidates", FLAGS.max_candidates),
      ("max_num_sentences", FLAGS.max_num_sentences)])
  summary = long_tasks.run_data_job(
      outputs, wikihop.SUMMARY_NAME, lambda should_stop: create_wikihop(
          examples, FLAGS.output_dir, tokenizer, settings,
          extra_settings={"vocab_file": FLAGS.vocab_file, "spm_model_file": FLAGS.spm_model_file,
                          "do_lower_case": True, "input_files": dict(inputs)},
          should_stop=should_stop, global_tokens=global_tokens))
  long_tasks.print_split_summary(summary, FLAGS.output_dir)
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
