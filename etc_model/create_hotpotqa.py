# coding=utf-8
r"""Writes HotpotQA records for ETC, with the official etcmodel feature layout.

  python -m etc_model.create_hotpotqa --train_file=hotpot_train_v1.1.json \
      --dev_file=hotpot_dev_distractor_v1.json --vocab_file=models/minilm/vocab.txt \
      --output_dir=hotpotqa_data [--max_seq_length=4096 --max_global_seq_length=230]

With a SentencePiece vocabulary, --spm_model_file=spm.model instead of --vocab_file; the global
tokens ([CLS], and --sentence_token, --question_token, --paragraph_token: [unused0], [unused2],
[unused4] by default) must be pieces of it. The question, each title and each sentence is
encoded whole (lower-cased first with --do_lower_case) and an answer span is the run of pieces
whose characters overlap the answer's (etc_model.hotpotqa's docstring).

Inputs: --train_file, --dev_file and --test_file (any of them; each a HotpotQA JSON list of
{"_id", "question", "context", "answer", "supporting_facts", "type", "level"}, distractor or
fullwiki; the test file's records may lack "answer" and "supporting_facts"). Every file is read
and checked before anything is written: a file that is not JSON, a record without one of the
keys or with a value of another shape (a context that is not [[title, [sentences]], ...],
supporting facts that are not [title, integer] pairs), or a repeated _id is one line naming the
file and the record (exit 2).

Outputs in --output_dir (each written under a temporary name and renamed when complete, the
summary last):
  hotpotqa_<split>.tfrecord: one record per example (etc_model.hotpotqa has the layout: [CLS],
    question pieces, titles and sentences in the long input; [CLS], one global token per
    question word piece, per paragraph and per title / sentence; supporting-fact labels per
    global token, answer type and span). Training keeps the official filter: an example whose
    kept input has no supporting-fact label or whose span answer is not found in it gets no
    record; dev and test examples always get one;
  hotpotqa_<split>.examples.jsonl: one line per example of the input file, in its order: id,
    record (the record's index, or null), skipped (why there is no record), answer,
    supporting_facts and context (what the answers and the official scores are made from;
    null in the train split's file, which is never decoded);
  hotpotqa_vocab.txt: a copy of --vocab_file (run_long_tasks turns word pieces back into text
    with it), or hotpotqa_spm.model: a copy of --spm_model_file (run_long_tasks reads the
    answer's text from the context through its piece offsets);
  hotpotqa.json: the settings, the global tokens' ids, and per split the counts (examples,
    records, skipped by reason, answer types, span answers not found in the kept input,
    supporting facts outside their context, examples cut and the question pieces / titles /
    sentences and word pieces left out because L or G was full, how many of them for G) and
    the mean and largest
    long / global lengths.
A rerun with the same flags writes the same bytes. SIGINT / SIGTERM stop at the next example,
remove the file being written and exit 130 / 143 without hotpotqa.json; a rerun starts over.
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
from etc_model import hotpotqa
from etc_model import long_tasks

FLAGS = flags.FLAGS

SPLITS = hotpotqa.SPLITS


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  for split in SPLITS:
    flags.DEFINE_string("%s_file" % split, None,
                        "The HotpotQA JSON file of the %s split%s." % (
                            split, " (records may lack \"answer\" and \"supporting_facts\")"
                            if split == "test" else ""))
  flags.DEFINE_string("output_dir", None, "Where the records and hotpotqa.json go.")
  flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary of the model.")
  flags.DEFINE_string("spm_model_file", None,
                      "The SentencePiece model of the model, instead of --vocab_file ([CLS] and "
                      "the global tokens must be pieces of it: build_vocab.py "
                      "--model_type=sentencepiece --num_unused=5 makes [unused0] ... "
                      "[unused4]).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (an uncased vocabulary; with "
                    "--spm_model_file the text is lower-cased before SentencePiece).")
  for kind, token in hotpotqa.GLOBAL_TOKENS.items():
    if kind != "cls":
      flags.DEFINE_string("%s_token" % kind, token,
                          "The vocabulary token (or SentencePiece piece) of the %s global "
                          "tokens." % kind)
  flags.DEFINE_integer("max_seq_length", hotpotqa.DEFAULT_MAX_SEQ_LENGTH,
                       "Long input length L (word pieces).")
  flags.DEFINE_integer("max_global_seq_length", hotpotqa.DEFAULT_MAX_GLOBAL_SEQ_LENGTH,
                       "Global input length G ([CLS], question pieces, paragraphs, titles, "
                       "sentences).")
  etc_records.define_length_flags()


def _never():
  return False


def split_files(paths):
  """{split: path} of the split files given ({split: --<split>_file value, maybe empty})."""
  return collections.OrderedDict((split, paths[split]) for split in SPLITS if paths.get(split))


def output_files(output_dir, splits, sentencepiece=False):
  """The files this tool writes for `splits` (the summary last; the vocabulary's copy is the
  SentencePiece model's with `sentencepiece`)."""
  paths = []
  for split in splits:
    paths += [hotpotqa.record_file(output_dir, split), hotpotqa.examples_file(output_dir, split)]
  copy = hotpotqa.SPM_NAME if sentencepiece else hotpotqa.VOCAB_NAME
  return paths + [os.path.join(output_dir, copy),
                  os.path.join(output_dir, hotpotqa.SUMMARY_NAME)]


def _mean(values):
  return round(sum(values) / float(len(values)), 2) if values else None


def split_statistics(examples, infos, records):
  """The summary's counts of one split.

  Args:
    examples: the split's hotpotqa.Example list.
    infos: convert_example's info of each.
    records: the record features made (in order).

  Returns:
    OrderedDict of counts and lengths.
  """
  made = [info for info in infos if info["skipped"] is None]
  stats = collections.OrderedDict()
  stats["examples"] = len(examples)
  stats["records"] = len(records)
  stats["skipped"] = collections.OrderedDict(sorted(collections.Counter(
      info["skipped"] for info in infos if info["skipped"]).items()))
  types = collections.Counter(info["answer_type"] for info in made)
  stats["answer_types"] = collections.OrderedDict(
      [(name, types[i]) for i, name in enumerate(hotpotqa.ANSWER_TYPES)] +
      [("unknown", types[-1])])
  stats["span_answers_not_found"] = sum(
      1 for e, info in zip(examples, infos)
      if info["skipped"] is None and e.answer is not None and
      hotpotqa.answer_type_of(e.answer) == 0 and not info["answer_found"])
  stats["supporting_facts_outside_context"] = sum(
      len(hotpotqa.facts_outside_context(e)) for e in examples)
  stats["truncated_examples"] = sum(1 for info in made if info["dropped_parts"])
  stats["dropped_parts"] = sum(info["dropped_parts"] for info in made)
  stats["dropped_parts_global_full"] = sum(info["dropped_global_full"] for info in made)
  stats["dropped_word_pieces"] = sum(info["dropped_pieces"] for info in made)
  stats["mean_paragraphs"] = _mean([len(e.context) for e in examples])
  for key in ("long_tokens", "global_tokens"):
    stats["mean_" + key] = _mean([info[key] for info in made])
    stats["max_" + key] = max([info[key] for info in made] or [0])
  return stats


def convert_split(examples, tokenizer, ids, settings, is_training, should_stop=_never,
                  log_prefix=""):
  """The records, examples file lines and statistics of one split.

  Args:
    examples: hotpotqa.Example list.
    tokenizer: the FullTokenizer (WordPiece or SentencePiece).
    ids: hotpotqa.global_token_ids of the vocabulary.
    settings: the lengths (hotpotqa.convert_example).
    is_training: the official training filter (the train split).
    should_stop: polled at every example; True raises pretraining_data.Stopped.
    log_prefix: progress lines start with it.

  Returns:
    (records: list of feature dicts, lines: list of example_line dicts, statistics).
  """
  tokenize = hotpotqa.make_tokenize(tokenizer)
  records, lines, infos = [], [], []
  meter = common.ProgressMeter(len(examples), unit="examples", log_fn=logging.info)
  for n, example in enumerate(examples):
    if should_stop():
      raise pretraining_data.Stopped()
    features, info = hotpotqa.convert_example(example, tokenize, tokenizer.tokenize, ids,
                                              settings, is_training=is_training)
    lines.append(hotpotqa.example_line(example, len(records) if features else None, info,
                                       with_context=not is_training))
    infos.append(info)
    if features:
      records.append(features)
    meter.update(n + 1, prefix=log_prefix)
  return records, lines, split_statistics(examples, infos, records)


def create_hotpotqa(examples_by_split, output_dir, tokenizer, vocab_file, settings,
                    extra_settings=None, should_stop=_never, global_tokens=None):
  """Writes every split's records and examples file, the vocabulary copy, then hotpotqa.json.

  Args:
    examples_by_split: {split: hotpotqa.Example list} (checked: hotpotqa.read_examples).
    output_dir: the output directory (created).
    tokenizer: tokenization.FullTokenizer (WordPiece or SentencePiece).
    vocab_file: its vocabulary file, or its SentencePiece model with a SentencePiece tokenizer
      (copied into output_dir: hotpotqa.VOCAB_NAME or hotpotqa.SPM_NAME).
    settings: dict with max_seq_length, max_global_seq_length, do_lower_case.
    extra_settings: more settings to record (input files, ...).
    should_stop: polled at every example and record; True raises pretraining_data.Stopped
      (the file being written is removed; hotpotqa.json is not written).
    global_tokens: {kind: token} of the global tokens (None: hotpotqa.GLOBAL_TOKENS).

  Returns:
    The summary written to hotpotqa.json.
  """
  global_tokens = global_tokens or hotpotqa.GLOBAL_TOKENS
  try:
    ids = hotpotqa.global_token_ids(tokenizer.vocab, global_tokens)
  except KeyError as e:
    common.fail("the vocabulary has no %s, a HotpotQA global token" % e)
  converted = collections.OrderedDict()
  for split, examples in examples_by_split.items():
    converted[split] = convert_split(examples, tokenizer, ids, settings, split == "train",
                                     should_stop, log_prefix="%s: " % split)
  tf.io.gfile.makedirs(output_dir)
  for split, (records, lines, _) in converted.items():
    long_tasks.write_split_files(hotpotqa.record_file(output_dir, split),
                                 hotpotqa.examples_file(output_dir, split), records, lines,
                                 should_stop)
  copy_vocabulary(vocab_file, output_dir, hotpotqa.is_sentencepiece(tokenizer))
  summary = collections.OrderedDict()
  summary["settings"] = dict(settings, **(extra_settings or {}))
  summary["global_tokens"] = collections.OrderedDict(
      (kind, {"token": global_tokens[kind], "id": ids[kind]}) for kind in ids)
  summary["splits"] = collections.OrderedDict(
      (split, stats) for split, (_, _, stats) in converted.items())
  summary["features"] = hotpotqa.feature_lengths(settings["max_seq_length"],
                                                 settings["max_global_seq_length"])
  common.write_json_atomic(os.path.join(output_dir, hotpotqa.SUMMARY_NAME), summary)
  return summary


def copy_vocabulary(path, output_dir, sentencepiece):
  """Copies the vocabulary (or the SentencePiece model, bytes) into output_dir, atomically."""
  mode = "rb" if sentencepiece else "r"
  with tf.io.gfile.GFile(path, mode) as f:
    content = f.read()
  name = hotpotqa.SPM_NAME if sentencepiece else hotpotqa.VOCAB_NAME
  with common.atomic_output(os.path.join(output_dir, name), mode.replace("r", "w")) as f:
    f.write(content)


def _validate_flags():
  """One-line errors for impossible flag values."""
  if not split_files({split: getattr(FLAGS, "%s_file" % split) for split in SPLITS}):
    common.fail("at least one of --train_file, --dev_file or --test_file is required")
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  etc_records.check_lengths(FLAGS.max_seq_length, FLAGS.max_global_seq_length,
                            FLAGS.allow_long_inputs)


def global_tokens_from_flags(tokenizer, source):
  """{kind: token} of the global tokens from the flags, each checked in the vocabulary (one
  line naming the flag, or --vocab_file / --spm_model_file for [CLS])."""
  tokens = collections.OrderedDict(
      (kind, getattr(FLAGS, "%s_token" % kind) if kind != "cls" else token)
      for kind, token in hotpotqa.GLOBAL_TOKENS.items())
  if tokens["cls"] not in tokenizer.vocab:
    common.fail("%s: has no %s, HotpotQA's [CLS] global token" % (source, tokens["cls"]))
  long_tasks.special_token_ids(tokenizer, collections.OrderedDict(
      ("%s_token" % kind, token) for kind, token in tokens.items() if kind != "cls"), source)
  return tokens


def main(_):
  logging.set_verbosity(logging.INFO)
  _validate_flags()
  source = long_tasks.vocabulary_flag(FLAGS.vocab_file, FLAGS.spm_model_file)
  vocabulary = FLAGS.spm_model_file or FLAGS.vocab_file
  inputs = split_files({split: getattr(FLAGS, "%s_file" % split) for split in SPLITS})
  common.check_output_dir(FLAGS.output_dir)
  outputs = output_files(FLAGS.output_dir, inputs, sentencepiece=bool(FLAGS.spm_model_file))
  for path in outputs:
    common.check_not_input(path, list(inputs.values()) + [vocabulary], "output_dir")
  # Every file is read and checked before anything is written.
  examples = collections.OrderedDict(
      (split, hotpotqa.read_examples(path, "--%s_file=%s" % (split, path),
                                     require_answer=split != "test"))
      for split, path in inputs.items())
  tokenizer = long_tasks.load_tokenizer(FLAGS.vocab_file, FLAGS.spm_model_file,
                                        FLAGS.do_lower_case)
  global_tokens = global_tokens_from_flags(tokenizer, source)
  settings = collections.OrderedDict([
      ("max_seq_length", FLAGS.max_seq_length),
      ("max_global_seq_length", FLAGS.max_global_seq_length),
      ("do_lower_case", FLAGS.do_lower_case)])
  summary = long_tasks.run_data_job(
      outputs, hotpotqa.SUMMARY_NAME, lambda should_stop: create_hotpotqa(
          examples, FLAGS.output_dir, tokenizer, vocabulary, settings,
          extra_settings={"vocab_file": FLAGS.vocab_file, "spm_model_file": FLAGS.spm_model_file,
                          "input_files": dict(inputs)},
          should_stop=should_stop, global_tokens=global_tokens))
  long_tasks.print_split_summary(summary, FLAGS.output_dir)
  for split, stats in summary["splits"].items():
    if stats["truncated_examples"]:
      logging.warning("%s: %d examples cut to fit L=%d / G=%d: %d question pieces, titles or "
                      "sentences (%d word pieces) left out, %d of them because G was full, the "
                      "rest because they were longer than what was left of L", split,
                      stats["truncated_examples"], FLAGS.max_seq_length,
                      FLAGS.max_global_seq_length, stats["dropped_parts"],
                      stats["dropped_word_pieces"], stats["dropped_parts_global_full"])
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
