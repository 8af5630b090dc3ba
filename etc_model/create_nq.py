# coding=utf-8
r"""Writes Natural Questions records for ETC, with the official etcmodel feature layout.

  python -m etc_model.create_nq --train_file="simplified-nq-train.jsonl.gz" \
      --dev_file="nq-dev-0?.jsonl.gz" --vocab_file=models/minilm/vocab.txt \
      --output_dir=nq_data [--max_seq_length=4096 --max_global_seq_length=230 --doc_stride=2048]

With a SentencePiece vocabulary, --spm_model_file=spm.model instead of --vocab_file; the special
tokens (--cls_token, --sep_token, --question_token, --candidate_token, --html_start_token,
--html_end_token: [CLS], [SEP], [unused34], [unused0], [unused102], [unused103] by default) must
be pieces of it. Each document token is encoded alone (lower-cased first with --do_lower_case),
as with WordPiece; an answer's first piece is never the word-start marker standing alone ("\u2581")
when its token has another piece (etc_model.nq's docstring).

Inputs: --train_file, --dev_file and --test_file (any of them; each NQ JSON lines, gzipped or
not, a comma-separated list or a quoted glob; the simplified format (document_text) or the
original one (document_tokens); etc_model.nq has the fields; a file to predict may lack
"annotations"). Every file is read and checked before anything is written: a line that is not
JSON, a record without one of the fields or with a value of another shape, a span with start
>= end or past the document's end, or a repeated example_id is one line naming the file and
the line (exit 2). The files are streamed, never held in memory.

Outputs in --output_dir (each written under a temporary name and renamed when complete, the
summary last):
  nq_<split>.tfrecord: one record per window of each example (etc_model.nq has the layout:
    [CLS], question pieces, [SEP], the window's pieces of the top-level candidates, [SEP];
    global [CLS], question tokens, one token per candidate; answer type and long / short
    answer positions of the first annotation). Training keeps the official down-sampling of
    windows without an answer (--include_unknown_rate, --include_unknown_rate_for_unanswerable,
    --seed); dev and test keep every window;
  nq_<split>.examples.jsonl: one line per example, in input order: id, record (its first
    record's index, or null), num_records and annotations (what the official scores are made
    from; null in the train split's file, which is never scored);
  nq_vocab.txt: a copy of --vocab_file, or nq_spm.model: a copy of --spm_model_file (the
    records' vocabulary beside them; decoding reads the records' document tokens, not it);
  nq.json: the settings (vocab_file or spm_model_file), the special tokens and their ids and
    per split the counts (examples, windows, records, windows without an answer left out,
    answer types, question pieces cut by --max_question_length, candidates without their own
    global token because G was full, document tokens without word pieces, answers with no word
    piece in the input and answers whose first or last token had none) and the mean and
    largest document lengths in pieces.
A rerun with the same flags writes the same bytes. SIGINT / SIGTERM stop at the next example,
remove the file being written and exit 130 / 143 without nq.json; a rerun starts over.
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
from etc_model import nq

FLAGS = flags.FLAGS

SPLITS = nq.SPLITS
# The counts of convert_example's info summed per split, in the summary's order.
COUNTS = ("windows", "records", "null_windows_dropped", "question_pieces_cut",
          "candidates_without_global_token", "tokens_without_pieces", "answers_without_pieces",
          "answer_ends_moved")


# What each special token stands for (its flag: --<kind>_token).
SPECIAL_TOKEN_ROLES = collections.OrderedDict([
    ("cls", "[CLS] (the long input's first token and the first global token)"),
    ("sep", "[SEP] (after the question and after the document)"),
    ("question", "the question's global tokens"),
    ("candidate", "the long-answer candidates' global tokens"),
    ("html_start", "an HTML start tag"), ("html_end", "an HTML end tag")])


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  for split in SPLITS:
    flags.DEFINE_string("%s_file" % split, None,
                        "NQ JSON lines of the %s split (gzipped or not; comma-separated files "
                        "or a glob)%s." % (split, " (annotations optional)"
                                           if split == "test" else ""))
  flags.DEFINE_string("output_dir", None, "Where the records and nq.json go.")
  flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary of the model.")
  flags.DEFINE_string("spm_model_file", None,
                      "The SentencePiece model of the model, instead of --vocab_file ([CLS], "
                      "[SEP] and the special tokens must be pieces of it: build_vocab.py "
                      "--model_type=sentencepiece --num_unused=4 makes [unused0] ... "
                      "[unused3]).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (an uncased vocabulary; with "
                    "--spm_model_file the text is lower-cased before SentencePiece).")
  for kind, token in nq.SPECIAL_TOKENS.items():
    flags.DEFINE_string("%s_token" % kind, token,
                        "The vocabulary token (or SentencePiece piece) of %s." %
                        SPECIAL_TOKEN_ROLES[kind])
  flags.DEFINE_integer("max_seq_length", nq.DEFAULT_MAX_SEQ_LENGTH,
                       "Long input length L (word pieces).")
  flags.DEFINE_integer("max_global_seq_length", nq.DEFAULT_MAX_GLOBAL_SEQ_LENGTH,
                       "Global input length G ([CLS], question tokens, candidates).")
  flags.DEFINE_integer("doc_stride", nq.DEFAULT_DOC_STRIDE,
                       "Document word pieces between the starts of two windows.")
  flags.DEFINE_integer("max_question_length", nq.DEFAULT_MAX_QUESTION_LENGTH,
                       "The most question word pieces (longer questions are cut, counted).")
  flags.DEFINE_float("include_unknown_rate", 1.0,
                     "Training: the share of windows without an answer kept (official).")
  flags.DEFINE_float("include_unknown_rate_for_unanswerable", None,
                     "Training: likewise for examples without any answer (default: 4 x "
                     "--include_unknown_rate, the official default).")
  flags.DEFINE_integer("seed", 12345, "Seed of the training down-sampling.")
  etc_records.define_length_flags()


def _never():
  return False


def split_files(paths):
  """{split: patterns} of the split files given ({split: --<split>_file value, maybe empty})."""
  return collections.OrderedDict((split, paths[split]) for split in SPLITS if paths.get(split))


def output_files(output_dir, splits, sentencepiece=False):
  """The files this tool writes for `splits` (the summary last; the vocabulary's copy is the
  SentencePiece model's with `sentencepiece`)."""
  paths = []
  for split in splits:
    paths += [nq.record_file(output_dir, split), nq.examples_file(output_dir, split)]
  copy = nq.SPM_NAME if sentencepiece else nq.VOCAB_NAME
  return paths + [os.path.join(output_dir, copy), os.path.join(output_dir, nq.SUMMARY_NAME)]


class _SplitCounts(object):
  """The summary's counts of one split, summed as its examples are converted."""

  def __init__(self):
    self.examples = 0
    self.counts = collections.OrderedDict((name, 0) for name in COUNTS)
    self.answer_types = collections.Counter()
    self.pieces = []

  def add(self, info):
    self.examples += 1
    for name in COUNTS:
      self.counts[name] += info[name]
    self.answer_types[info["answer_type"]] += 1
    self.pieces.append(info["document_pieces"])

  def statistics(self):
    stats = collections.OrderedDict([("examples", self.examples)])
    stats.update(self.counts)
    stats["answer_types"] = collections.OrderedDict(
        [(name, self.answer_types[i]) for i, name in enumerate(nq.ANSWER_TYPES)] +
        [("unannotated", self.answer_types[-1])])
    stats["mean_document_pieces"] = (round(sum(self.pieces) / float(len(self.pieces)), 2)
                                     if self.pieces else None)
    stats["max_document_pieces"] = max(self.pieces or [0])
    return stats


def convert_split(examples, tokenize_word, ids, settings, is_training, lines, counts,
                  should_stop=_never, total=None, log_prefix="", word_start_id=None):
  """Yields the records of one split's examples, filling `lines` and `counts` on the way.

  Args:
    examples: iterable of nq.Example.
    tokenize_word: long_tasks.make_tokenize_word's function.
    ids: nq.special_token_ids of the vocabulary.
    settings: the lengths and rates (nq.convert_example).
    is_training: the official down-sampling (the train split).
    lines: list the examples file's lines are appended to.
    counts: the split's _SplitCounts.
    should_stop: polled at every example; True raises pretraining_data.Stopped.
    total: the number of examples (progress lines), or None.
    log_prefix: progress lines start with it.
    word_start_id: SentencePiece's word-start marker piece (nq.convert_example), or None.

  Yields:
    record feature dicts.
  """
  rng = nq.training_rng(settings["seed"]) if is_training else None
  meter = common.ProgressMeter(total, unit="examples", log_fn=logging.info) if total else None
  num_records = 0
  for n, example in enumerate(examples):
    if should_stop():
      raise pretraining_data.Stopped()
    records, info = nq.convert_example(example, tokenize_word, ids, settings,
                                       is_training=is_training, rng=rng,
                                       word_start_id=word_start_id)
    lines.append(nq.example_line(example, num_records, info, with_annotations=not is_training))
    counts.add(info)
    num_records += len(records)
    for record in records:
      yield record
    if meter:
      meter.update(n + 1, prefix=log_prefix)


def check_split(patterns, split):
  """Reads and checks every line of a split's files (nothing kept); returns the count."""
  return sum(1 for _ in nq.iter_examples(patterns, "%s_file" % split,
                                         require_annotations=split != "test"))


def create_nq(inputs, output_dir, tokenizer, vocab_file, settings, extra_settings=None,
              should_stop=_never, special_tokens=None):
  """Writes every split's records and examples file, the vocabulary copy, then nq.json.

  Args:
    inputs: {split: file patterns} (each read and checked first: check_split).
    output_dir: the output directory (created).
    tokenizer: tokenization.FullTokenizer (WordPiece or SentencePiece).
    vocab_file: its vocabulary file, or its SentencePiece model with a SentencePiece tokenizer
      (copied into output_dir: nq.VOCAB_NAME or nq.SPM_NAME).
    settings: dict with the lengths, rates, seed and do_lower_case (nq.convert_example).
    extra_settings: more settings to record (input files, ...).
    should_stop: polled at every example and record; True raises pretraining_data.Stopped
      (the file being written is removed; nq.json is not written).
    special_tokens: {kind: token} in nq.SPECIAL_TOKENS' order (None: nq.SPECIAL_TOKENS;
      check_special_tokens checks the flags' choice).

  Returns:
    The summary written to nq.json.
  """
  special_tokens = special_tokens or nq.SPECIAL_TOKENS
  sentencepiece = getattr(tokenizer, "sp_model", None) is not None
  try:
    ids = nq.special_token_ids(tokenizer.vocab, special_tokens)
  except KeyError as e:
    common.fail("--%s: has no %s, an NQ special token" % (
        "spm_model_file" if sentencepiece else "vocab_file", e))
  totals = collections.OrderedDict(
      (split, check_split(patterns, split)) for split, patterns in inputs.items())
  tokenize_word = long_tasks.make_tokenize_word(tokenizer)
  tf.io.gfile.makedirs(output_dir)
  statistics = collections.OrderedDict()
  for split, patterns in inputs.items():
    lines, counts = [], _SplitCounts()
    records = convert_split(
        nq.iter_examples(patterns, "%s_file" % split, require_annotations=split != "test"),
        tokenize_word, ids, settings, split == "train", lines, counts, should_stop,
        total=totals[split], log_prefix="%s: " % split,
        word_start_id=long_tasks.word_start_id(tokenizer))
    long_tasks.write_split_files(nq.record_file(output_dir, split),
                                 nq.examples_file(output_dir, split), records, lines,
                                 should_stop)
    statistics[split] = counts.statistics()
  copy_vocabulary(vocab_file, os.path.join(output_dir,
                                           nq.SPM_NAME if sentencepiece else nq.VOCAB_NAME),
                  sentencepiece)
  summary = collections.OrderedDict()
  summary["settings"] = dict(settings, **(extra_settings or {}))
  summary["special_tokens"] = collections.OrderedDict(
      (kind, {"token": special_tokens[kind], "id": ids[kind]}) for kind in ids)
  summary["splits"] = statistics
  summary["features"] = nq.feature_lengths(settings["max_seq_length"],
                                           settings["max_global_seq_length"])
  common.write_json_atomic(os.path.join(output_dir, nq.SUMMARY_NAME), summary)
  return summary


def copy_vocabulary(path, output_path, sentencepiece):
  """Copies the vocabulary (or the SentencePiece model, bytes) to output_path, atomically."""
  mode = "rb" if sentencepiece else "r"
  with tf.io.gfile.GFile(path, mode) as f:
    content = f.read()
  with common.atomic_output(output_path, mode.replace("r", "w")) as f:
    f.write(content)


def check_special_tokens(tokenizer, tokens, source):
  """Checks the special tokens in the vocabulary: one line naming the flag of one it lacks or
  whose id is 0 (the records' padding).

  Args:
    tokenizer: tokenization.FullTokenizer (WordPiece or SentencePiece).
    tokens: {kind: token} in nq.SPECIAL_TOKENS' order (the flag of each: --<kind>_token).
    source: long_tasks.vocabulary_flag's text.

  Returns:
    The tokens.
  """
  long_tasks.special_token_ids(tokenizer, collections.OrderedDict(
      ("%s_token" % kind, token) for kind, token in tokens.items()), source)
  return tokens


def _validate_flags():
  """One-line errors for impossible flag values."""
  if not split_files({split: getattr(FLAGS, "%s_file" % split) for split in SPLITS}):
    common.fail("at least one of --train_file, --dev_file or --test_file is required")
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  etc_records.check_lengths(FLAGS.max_seq_length, FLAGS.max_global_seq_length,
                            FLAGS.allow_long_inputs)
  if FLAGS.max_question_length < 0:
    common.fail("--max_question_length=%d: must be >= 0" % FLAGS.max_question_length)
  if FLAGS.max_global_seq_length < FLAGS.max_question_length + 2:
    common.fail("--max_global_seq_length=%d: must be >= --max_question_length + 2 = %d "
                "(the global tokens of [CLS], the question's pieces and [SEP])" %
                (FLAGS.max_global_seq_length, FLAGS.max_question_length + 2))
  doc_len = FLAGS.max_seq_length - FLAGS.max_question_length - 3
  if not 1 <= FLAGS.doc_stride <= doc_len:
    common.fail("--doc_stride=%d: must be in [1, %d] (--max_seq_length - "
                "--max_question_length - 3: windows leave no document piece out)" %
                (FLAGS.doc_stride, doc_len))
  for name in ("include_unknown_rate", "include_unknown_rate_for_unanswerable"):
    value = getattr(FLAGS, name)
    if value is not None and value < 0:
      common.fail("--%s=%g: must be >= 0" % (name, value))


def main(_):
  logging.set_verbosity(logging.INFO)
  _validate_flags()
  source = long_tasks.vocabulary_flag(FLAGS.vocab_file, FLAGS.spm_model_file)
  vocabulary = FLAGS.spm_model_file or FLAGS.vocab_file
  inputs = split_files({split: getattr(FLAGS, "%s_file" % split) for split in SPLITS})
  common.check_output_dir(FLAGS.output_dir)
  input_paths = [path for split, patterns in inputs.items()
                 for path in common.expand_input_files(patterns, "%s_file" % split)]
  outputs = output_files(FLAGS.output_dir, inputs, sentencepiece=bool(FLAGS.spm_model_file))
  for path in outputs:
    common.check_not_input(path, input_paths + [vocabulary], "output_dir")
  tokenizer = long_tasks.load_tokenizer(FLAGS.vocab_file, FLAGS.spm_model_file,
                                        FLAGS.do_lower_case)
  special_tokens = check_special_tokens(tokenizer, collections.OrderedDict(
      (kind, getattr(FLAGS, "%s_token" % kind)) for kind in nq.SPECIAL_TOKENS), source)
  unanswerable_rate = FLAGS.include_unknown_rate_for_unanswerable
  settings = collections.OrderedDict([
      ("max_seq_length", FLAGS.max_seq_length),
      ("max_global_seq_length", FLAGS.max_global_seq_length),
      ("doc_stride", FLAGS.doc_stride), ("max_question_length", FLAGS.max_question_length),
      ("include_unknown_rate", FLAGS.include_unknown_rate),
      ("include_unknown_rate_for_unanswerable",
       4 * FLAGS.include_unknown_rate if unanswerable_rate is None else unanswerable_rate),
      ("seed", FLAGS.seed), ("do_lower_case", FLAGS.do_lower_case)])
  summary = long_tasks.run_data_job(
      outputs, nq.SUMMARY_NAME, lambda should_stop: create_nq(
          inputs, FLAGS.output_dir, tokenizer, vocabulary, settings,
          extra_settings={"vocab_file": FLAGS.vocab_file, "spm_model_file": FLAGS.spm_model_file,
                          "input_files": dict(inputs)},
          should_stop=should_stop, special_tokens=special_tokens))
  long_tasks.print_split_summary(summary, FLAGS.output_dir)
  for split, stats in summary["splits"].items():
    if stats["question_pieces_cut"] or stats["candidates_without_global_token"]:
      logging.warning("%s: %d question word pieces cut by --max_question_length=%d; %d "
                      "candidates without their own global token (G=%d was full: their pieces "
                      "belong to the last global token)", split, stats["question_pieces_cut"],
                      FLAGS.max_question_length, stats["candidates_without_global_token"],
                      FLAGS.max_global_seq_length)
    if stats["answers_without_pieces"]:
      logging.warning("%s: %d answers have no word piece in the input (outside the top-level "
                      "candidates or without pieces): their windows have no answer label",
                      split, stats["answers_without_pieces"])
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
