# coding=utf-8
r"""Creates long-document masked-LM TFRecords for ETC pre-training (one global token a sentence).

  python -m etc_model.create_pretraining_data --input_file=corpus.txt \
      --output_file=etc_data/train.tfrecord --vocab_file=vocab.txt \
      --max_seq_length=4096 --max_global_seq_length=256 --max_predictions_per_seq=640

Input: the format of the top-level create_pretraining_data.py (one sentence per line, a blank
line between documents; gzip read decompressed), read by the shared `text_input.TextReader`
(undecodable-byte limit, over-long lines cut) and tokenised by the top-level pipeline's checked
tokenizer (`realformer_tf.pretraining_data.make_tokenizer`, i.e. tokenization.checked_tokenizer).
Each input file starts a new document.

Records (ETC's long-input layout, `etc_inputs.make_sentence_global_inputs`): the sentences of
the corpus are packed in order into long inputs of --max_seq_length word pieces with one global
token (--global_token) per sentence, at most --max_global_seq_length of them. A document that
does not fit goes on in the next record; several short documents share a record, separated by
breakpoints (a token attends only to tokens and global tokens of its own document). A sentence
longer than --max_seq_length is cut into pieces, each with its own global token (counted).

Masking: the official BERT recipe on the long tokens (`masked_lm_prob` of the real tokens, at most
--max_predictions_per_seq, 80% [MASK] / 10% random token / 10% kept; --do_whole_word_mask),
through the top-level script's vectorised masking. Record i of pass p (--dupe_factor passes over
the input, each with other masks) is masked with numpy's generator seeded by
(--random_seed, p, i): the output bytes depend only on the input and the flags.

Features of each tf.train.Example (int64 unless said; the side inputs are NOT stored: the
training input pipeline computes the masks and relative ids from the breakpoints and sentence
ids with etc_inputs' TF ops, which keeps a record at about 3 * L + G + 3 * P numbers):
  token_ids [L]            long word pieces after masking (padding 0)
  sentence_ids [L]         index of each long token's global token (padding 0)
  long_breakpoints [L]     1 at the last long token of each packed document piece
  global_token_ids [G]     --global_token for each sentence, padding 0
  global_breakpoints [G]   1 at the last global token of each packed document piece
  masked_lm_positions [P], masked_lm_ids [P], masked_lm_weights [P] (float)

Lengths, checked before any work (one line, exit 2; etc_records.check_lengths): G <= L (a global
token stands for at least one long token); L <= MAX_LONG_SEQ_LENGTH (65,536) unless
--allow_long_inputs (ETC's relative positions set no bound of their own, and every record is
padded to L); with --etc_config_file of absolute positions, L and G fit
max_absolute_position_embeddings (and the vocab ids fit its vocab_size).

Output: one TFRecord file written under a hidden temporary name and renamed when complete, and
the counted summary `NAME.summary.json` (`text_input.summary_path_for`). The text streams through
one line at a time and one record is held at a time (a document of any size included), so
memory does not grow with the input. SIGINT / SIGTERM (polled at every sentence and record)
stop the run, remove the temporary and exit 130 / 143; a rerun starts over (same bytes).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import json
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import mlm_masking
from realformer_tf import pretraining_data
from realformer_tf import text_input
from etc_model import etc_inputs
from etc_model import etc_modeling
from etc_model import etc_records

FLAGS = flags.FLAGS

_SUMMARY_INT_KEYS = ("documents", "lines", "sentences", "long_sentences_split", "records",
                     "long_tokens", "global_tokens", "masked_tokens", "masked_as_mask",
                     "masked_as_random", "masked_as_kept", "input_bytes")


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("input_file", None,
                      "Input raw text file (or comma-separated list of files and globs).")
  flags.DEFINE_string("output_file", None, "Output TFRecord file.")
  flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary of the model.")
  flags.DEFINE_string("spm_model_file", None,
                      "Optional SentencePiece model for the tokenizer (instead of --vocab_file).")
  flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
  flags.DEFINE_bool("do_whole_word_mask", False,
                    "Mask whole words (all their word pieces) rather than single pieces.")
  flags.DEFINE_integer("max_seq_length", 4096, "Long input length L (word pieces).")
  flags.DEFINE_integer("max_global_seq_length", 256,
                       "Global input length G: at most this many sentences per record.")
  flags.DEFINE_integer("max_predictions_per_seq", 640,
                       "Maximum number of masked LM predictions per record.")
  flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
  flags.DEFINE_integer("random_seed", 12345, "Random seed for the masks.")
  flags.DEFINE_integer("dupe_factor", 1,
                       "Passes over the input, each with other masks (the same records).")
  flags.DEFINE_string("global_token", "[unused0]",
                      "The vocabulary token of every sentence's global token.")
  flags.DEFINE_string("etc_config_file", None,
                      "Optional: the ETC config of the model the data is for. With absolute "
                      "positions (max_absolute_position_embeddings > 0) the lengths must fit "
                      "its table; the vocab ids must fit its vocab_size.")
  etc_records.define_length_flags()
  text_input.define_input_flags()


class LongRecordPacker(object):
  """Packs tokenised sentences into ETC long inputs (one global token per sentence).

  Sentences stream in: add_sentence for each sentence of a document in order, end_document at
  its end (add_document does both for a whole document), then finish(). Each call returns the
  records that became full, as the `etc_inputs.make_sentence_global_inputs` dicts plus "length"
  (real long tokens). Memory holds one record's sentences at most, whatever the document's size.
  """

  def __init__(self, long_seq_len, global_seq_len, global_token_id, stats):
    """Builds a packer.

    Args:
      long_seq_len: L.
      global_seq_len: G.
      global_token_id: the id of every global token.
      stats: collections.Counter updated with sentences, long_sentences_split, records,
        long_tokens, global_tokens.
    """
    self.long_seq_len = long_seq_len
    self.global_seq_len = global_seq_len
    self.global_token_id = global_token_id
    self.stats = stats
    self._pieces = []  # finished document pieces of the record being filled: lists of sentences
    self._piece = []  # the current document's sentences in the record being filled
    self._long_used = 0
    self._globals_used = 0

  def _record(self):
    """The record of the pieces gathered so far (and resets)."""
    record = etc_inputs.make_sentence_global_inputs(
        self._pieces, self.long_seq_len, self.global_seq_len, self.global_token_id)
    length = int(record["input_mask"].sum())
    # Everything gathered fits by construction: the packer never truncates.
    assert length == self._long_used, (length, self._long_used)
    record["length"] = length
    self.stats["records"] += 1
    self.stats["long_tokens"] += length
    self.stats["global_tokens"] += int(record["global_input_mask"].sum())
    self._pieces, self._long_used, self._globals_used = [], 0, 0
    return record

  def add_sentence(self, sentence):
    """Adds one sentence (token ids) of the current document; returns the records it completed.

    A sentence longer than L is cut into pieces of L, each a sentence with its own global token.
    """
    records = []
    if not sentence:
      return records
    self.stats["sentences"] += 1
    if len(sentence) > self.long_seq_len:
      self.stats["long_sentences_split"] += 1
    for start in range(0, len(sentence), self.long_seq_len):
      part = sentence[start:start + self.long_seq_len]
      if (self._long_used + len(part) > self.long_seq_len or
          self._globals_used + 1 > self.global_seq_len):
        if self._piece:
          self._pieces.append(self._piece)
        records.append(self._record())
        self._piece = []  # the document goes on in the next record
      self._piece.append(part)
      self._long_used += len(part)
      self._globals_used += 1
    return records

  def end_document(self):
    """Ends the current document (its last piece gets a breakpoint in the record)."""
    if self._piece:
      self._pieces.append(self._piece)
    self._piece = []

  def add_document(self, sentences):
    """Adds one document (a list of token-id lists); returns the records completed by it."""
    records = []
    for sentence in sentences:
      records.extend(self.add_sentence(sentence))
    self.end_document()
    return records

  def finish(self):
    """The last, partly filled record (a list of 0 or 1 records)."""
    self.end_document()
    return [self._record()] if self._pieces else []


def _int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(values).tolist()))


def serialize_record(record, positions, label_ids, num_masked):
  """One tf.train.Example (see the module docstring for the features), serialized.

  Args:
    record: a LongRecordPacker record with token_ids already masked.
    positions: int [P] masked positions (zero-padded).
    label_ids: int [P] original ids there.
    num_masked: real predictions among the P.

  Returns:
    bytes.
  """
  weights = np.zeros([len(positions)], np.float32)
  weights[:num_masked] = 1.0
  features = collections.OrderedDict()
  for name in etc_records.LONG_FEATURES + etc_records.GLOBAL_FEATURES:
    features[name] = _int_feature(record[name])
  features["masked_lm_positions"] = _int_feature(positions)
  features["masked_lm_ids"] = _int_feature(label_ids)
  features["masked_lm_weights"] = tf.train.Feature(
      float_list=tf.train.FloatList(value=weights.tolist()))
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


class Masker(object):
  """The official 80/10/10 masking of a record's long tokens (top-level vectorised code)."""

  def __init__(self, tokenizer, masked_lm_prob, max_predictions_per_seq, do_whole_word_mask,
               random_seed):
    vocab = tokenizer.vocab
    if "[MASK]" not in vocab:
      common.fail("--vocab_file: the vocabulary has no [MASK] token")
    # No [CLS] / [SEP] in ETC's long tokens: no id is excluded from masking (-1 matches none).
    self.special_ids = {"cls": -1, "sep": -1, "mask": vocab["[MASK]"]}
    self.vocab_size = max(vocab.values()) + 1
    self.subword_table = None
    if do_whole_word_mask:
      self.subword_table = np.zeros([self.vocab_size], dtype=bool)
      for token, index in vocab.items():
        if token.startswith("##"):
          self.subword_table[index] = True
    self.masked_lm_prob = masked_lm_prob
    self.max_predictions_per_seq = max_predictions_per_seq
    self.random_seed = random_seed

  def mask(self, record, pass_index, record_index, stats):
    """Masks record["token_ids"] (a copy); returns the serialized example."""
    record = dict(record)
    ids = record["token_ids"][np.newaxis].copy()
    rng = np.random.default_rng([self.random_seed, pass_index, record_index])
    # pylint: disable=protected-access
    positions, labels, num_masked, kinds = mlm_masking.create_id_masked_lm_predictions(
        ids, np.array([record["length"]]), self.masked_lm_prob, self.max_predictions_per_seq,
        self.special_ids, self.vocab_size, self.subword_table, rng)
    # pylint: enable=protected-access
    record["token_ids"] = ids[0]
    stats["masked_tokens"] += int(num_masked[0])
    for key, count in zip(("masked_as_mask", "masked_as_random", "masked_as_kept"), kinds):
      stats[key] += count
    return serialize_record(record, positions[0], labels[0], int(num_masked[0]))


def read_sentences(input_files, tokenizer, reader, stats):
  """Yields the sentences of the input files in order, and None at the end of each document.

  One line at a time (memory holds one line, whatever the size of a document). A line without
  word pieces is no sentence; a document without sentences is skipped.

  Args:
    input_files: text files.
    tokenizer: tokenization.FullTokenizer.
    reader: text_input.TextReader.
    stats: Counter (documents, lines).

  Yields:
    A list of token ids (a sentence), or None (the end of a document).
  """
  tokenize = getattr(tokenizer, "tokenize_to_ids", None)
  if tokenize is None:
    tokenize = lambda text: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
  for path in input_files:
    in_document = False
    for raw in reader.read_lines(path):
      line = raw.decode("utf-8", errors="replace").strip()
      if not line:
        if in_document:
          stats["documents"] += 1
          yield None
        in_document = False
        continue
      stats["lines"] += 1
      ids = tokenize(line)
      if ids:
        in_document = True
        yield ids
    if in_document:
      stats["documents"] += 1
      yield None


def _pass_records(input_files, tokenizer, reader, packer, should_stop):
  """Yields the records of one pass over the input, polling should_stop at every sentence.

  Raises:
    pretraining_data.Stopped: should_stop() said so.
  """
  for sentence in read_sentences(input_files, tokenizer, reader, packer.stats):
    if should_stop():
      raise pretraining_data.Stopped()
    if sentence is None:
      packer.end_document()
      continue
    for record in packer.add_sentence(sentence):
      yield record
  for record in packer.finish():
    yield record


def create_pretraining_data(input_files, output_file, tokenizer, settings, summary_path=None,
                            log_fn=None, stop_signals=None, extra_settings=None):
  """Writes the long-input TFRecord file and returns the summary dict.

  Args:
    input_files: text files.
    output_file: the TFRecord path (written under common.temp_path, then renamed).
    tokenizer: tokenization.FullTokenizer.
    settings: dict with max_seq_length, max_global_seq_length, max_predictions_per_seq,
      masked_lm_prob, random_seed, dupe_factor, global_token, do_whole_word_mask,
      max_bad_fraction, max_line_chars.
    summary_path: where to write the summary JSON (None: not written).
    log_fn: progress lines (default: absl logging.info).
    stop_signals: common.StopSignals or None, polled at every sentence and record; when
      stopped, the temporary is removed and the function returns None.
    extra_settings: more settings to record in the summary.

  Returns:
    The summary dict, or None when stopped.
  """
  log_fn = log_fn or logging.info
  should_stop = (lambda: stop_signals.stopped) if stop_signals is not None else (lambda: False)
  start = time.time()
  input_bytes = sum(tf.io.gfile.stat(p).length for p in input_files)
  meter = common.ProgressMeter(input_bytes * settings["dupe_factor"] / 1e6, unit="MB",
                               log_fn=log_fn)
  meter.update(0.0)
  stats = collections.Counter()
  global_token_id = tokenizer.vocab[settings["global_token"]]
  masker = Masker(tokenizer, settings["masked_lm_prob"], settings["max_predictions_per_seq"],
                  settings["do_whole_word_mask"], settings["random_seed"])
  tmp_path = common.temp_path(output_file)
  try:
    with tf.io.TFRecordWriter(tmp_path) as writer:
      for pass_index in range(settings["dupe_factor"]):
        pass_stats = collections.Counter()
        reader = text_input.TextReader(settings["max_line_chars"], settings["max_bad_fraction"])
        packer = LongRecordPacker(settings["max_seq_length"], settings["max_global_seq_length"],
                                  global_token_id, pass_stats)
        done_before = input_bytes * pass_index
        for index, record in enumerate(_pass_records(input_files, tokenizer, reader, packer,
                                                     should_stop)):
          writer.write(masker.mask(record, pass_index, index, stats))
          meter.update((done_before + reader.disk_bytes_done) / 1e6,
                       extra="(%d records)" % (stats["records"] + pass_stats["records"]))
          if should_stop():
            raise pretraining_data.Stopped()
        # Records and tokens count every pass; the input (documents, lines, ...) once.
        for key in ("records", "long_tokens", "global_tokens"):
          stats[key] += pass_stats.pop(key, 0)
        if pass_index == 0:
          stats.update(pass_stats)
          for key in ("undecodable_bytes", "lines_with_undecodable_bytes", "long_lines_split",
                      "long_line_pieces"):
            stats[key] += reader.stats[key]
    if not stats["records"]:
      common.fail("--input_file=%s: no text in it (no record written)" % ",".join(input_files))
    tf.io.gfile.rename(tmp_path, output_file, overwrite=True)
  except pretraining_data.Stopped:
    return None
  finally:
    if tf.io.gfile.exists(tmp_path):
      tf.io.gfile.remove(tmp_path)
  meter.update(meter.total, force=True, extra="(%d records)" % stats["records"])
  stats["input_bytes"] = input_bytes
  summary = {key: int(stats[key]) for key in sorted(set(_SUMMARY_INT_KEYS) | set(stats))}
  # `instances` (as the top-level summary) marks the file as a summary for check_text_inputs.
  summary["instances"] = summary["records"]
  summary["input_files"] = list(input_files)
  summary["output_files"] = [output_file]
  summary["settings"] = dict(settings, **(extra_settings or {}))
  # What etc_model.run_pretraining's CPC masks sentences with (the vocabulary's [MASK]).
  summary["mask_token_id"] = int(masker.special_ids["mask"])
  summary["seconds"] = round(time.time() - start, 2)
  summary["mean_long_tokens_per_record"] = round(
      stats["long_tokens"] / float(stats["records"]), 1)
  if summary_path:
    common.write_json_atomic(summary_path, summary)
  return summary


def read_examples(path):
  """Reads the records back as dicts of numpy arrays (for tests and inspection)."""
  return pretraining_data.read_examples(path)


def load_config(config_file, flag_name="etc_config_file"):
  """The validated ETC config of --etc_config_file (one-line errors)."""
  common.require_file(config_file, flag_name)
  try:
    config = etc_modeling.EtcConfig.from_json_file(config_file)
    config.validate("--%s=%s" % (flag_name, config_file))
  except ValueError as e:
    common.fail(str(e) if str(e).startswith("--") else "--%s: %s" % (flag_name, e))
  return config


def _validate_flags():
  """One-line errors for impossible flag values; returns the --etc_config_file config or None."""
  for name in ("input_file", "output_file"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  config = load_config(FLAGS.etc_config_file) if FLAGS.etc_config_file else None
  etc_records.check_lengths(FLAGS.max_seq_length, FLAGS.max_global_seq_length,
                            FLAGS.allow_long_inputs, config, FLAGS.etc_config_file)
  for name in ("max_predictions_per_seq", "dupe_factor"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d: must be >= 1" % (name, getattr(FLAGS, name)))
  if FLAGS.max_predictions_per_seq > FLAGS.max_seq_length:
    common.fail("--max_predictions_per_seq=%d: must be <= --max_seq_length=%d" %
                (FLAGS.max_predictions_per_seq, FLAGS.max_seq_length))
  if not 0.0 < FLAGS.masked_lm_prob <= 1.0:
    common.fail("--masked_lm_prob=%g: must be in (0, 1]" % FLAGS.masked_lm_prob)
  text_input.validate_input_flags(FLAGS.max_bad_fraction, FLAGS.max_line_chars)
  return config


def main(_):
  logging.set_verbosity(logging.INFO)
  config = _validate_flags()
  if FLAGS.spm_model_file:
    common.require_file(FLAGS.spm_model_file, "spm_model_file")
  else:
    common.require_file(FLAGS.vocab_file, "vocab_file")
  input_files = common.expand_input_files(FLAGS.input_file, "input_file")
  summary_file = text_input.summary_path_for(FLAGS.output_file)
  text_input.check_outputs_not_inputs([FLAGS.output_file, summary_file], FLAGS.input_file,
                                      input_files, [FLAGS.vocab_file, FLAGS.spm_model_file])
  text_input.check_text_inputs(input_files)
  try:
    tokenizer = pretraining_data.make_tokenizer(
        FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.spm_model_file,
        vocab_size=config.vocab_size if config else None,
        config_name="--etc_config_file=%s" % FLAGS.etc_config_file)
  except (UnicodeDecodeError, ValueError, KeyError, IndexError) as e:
    if isinstance(e, common.UsageError):
      raise
    common.fail("--vocab_file=%s: cannot be read as a vocabulary (%s)" % (FLAGS.vocab_file, e))
  flag = "spm_model_file" if FLAGS.spm_model_file else "vocab_file"
  for token in (FLAGS.global_token, "[MASK]"):
    if token not in tokenizer.vocab:
      common.fail("--global_token=%s: not in --%s=%s" % (token, flag, getattr(FLAGS, flag))
                  if token == FLAGS.global_token else
                  "--%s=%s: the vocabulary has no %s token" % (flag, getattr(FLAGS, flag), token))
  settings = {
      "max_seq_length": FLAGS.max_seq_length,
      "max_global_seq_length": FLAGS.max_global_seq_length,
      "max_predictions_per_seq": FLAGS.max_predictions_per_seq,
      "masked_lm_prob": FLAGS.masked_lm_prob, "random_seed": FLAGS.random_seed,
      "dupe_factor": FLAGS.dupe_factor, "global_token": FLAGS.global_token,
      "do_whole_word_mask": FLAGS.do_whole_word_mask,
      "max_bad_fraction": FLAGS.max_bad_fraction, "max_line_chars": FLAGS.max_line_chars,
  }
  for path in (FLAGS.output_file, summary_file):
    for removed in common.remove_stale_temps(path):
      logging.info("removed %s (left by an earlier run)", removed)
  if os.path.dirname(FLAGS.output_file):
    tf.io.gfile.makedirs(os.path.dirname(FLAGS.output_file))
  logging.info("*** Reading %d input file(s); writing %s ***", len(input_files),
               FLAGS.output_file)
  common.STOP_SIGNALS.install()
  summary = create_pretraining_data(
      input_files, FLAGS.output_file, tokenizer, settings, summary_path=summary_file,
      stop_signals=common.STOP_SIGNALS,
      extra_settings={"vocab_file": FLAGS.vocab_file, "spm_model_file": FLAGS.spm_model_file,
                      "do_lower_case": FLAGS.do_lower_case,
                      "etc_config_file": FLAGS.etc_config_file})
  common.STOP_SIGNALS.exit_if_stopped(
      "stopped before the end; nothing was written and the temporary file was removed "
      "(rerun the same command to start again)")
  printable = {k: v for k, v in summary.items() if k not in ("input_files", "output_files")}
  print(json.dumps(printable, indent=2, sort_keys=True))
  print("Wrote %d records to %s; summary: %s" % (summary["records"], FLAGS.output_file,
                                                  summary_file))
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
