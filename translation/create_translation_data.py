# coding=utf-8
r"""Writes translation TFRecords from line-aligned parallel text (the ids of docs/translation.md).

Line i of --source_file is the translation of line i of --target_file (plain or gzip text, read
transparently). Each pair becomes one tf.train.Example with two variable-length int64 features
(the records of translation/translation_records.py):

  source_ids   SentencePiece pieces of the source line + eos (3)
  target_ids   SentencePiece pieces of the target line + eos (3)

No padding and no bos: translation_input.py adds the decoder input (bos + pieces), pads and
batches. The SentencePiece model (--spm_model) must have pad=0, unk=1, bos=2, eos=3; when it does
not exist and --train_spm_vocab_size=N is given, a joint model of N pieces is trained on the
source and target text first (realformer_tf.vocab_building.build_sentencepiece with the "nmt" id
layout: case preserved, one thread, deterministic) and written to --spm_model, so a rerun reuses
it.

  python -m translation.create_translation_data \
      --source_file=../shared/data/nmt/multi30k/train.en.gz \
      --target_file=../shared/data/nmt/multi30k/train.de.gz \
      --spm_model=output/nmt/spm_en_de.model --train_spm_vocab_size=8000 \
      --output_file=output/nmt/train.tfrecord --max_length=128

Misaligned files are an error: when the two files have different line counts (one deleted
line shifts every later pair), the run stops with one line naming both counts and writes
nothing, unless --allow_unequal_lines asks to keep the pairs of the common prefix. The same file
as source and target is an error too.

Nothing else bad in the input stops the run; each is counted, logged and written to the summary
JSON beside the output (text_input.summary_path_for: `out/train.summary.json`):
- an empty line on either side: the pair is skipped (empty_source_lines, empty_target_lines);
- a pair with more than --max_length ids on a side (pieces + eos): skipped (over_long_pairs);
- a line longer than --max_line_chars characters (cut by the shared TextReader): skipped
  (cut_lines, counted in over_long_pairs too);
- with --allow_unequal_lines, different line counts: the common prefix is kept and both counts
  are reported (line_count_mismatch).

The input policy is text_input.TextReader's (gzip by magic bytes, a file with more
than --max_bad_fraction undecodable bytes refused, undecodable bytes dropped and counted). The
TFRecord and the summary are written under temporary names and renamed when complete; SIGINT /
SIGTERM stop the run without leaving an output (exit 130 / 143); a rerun starts over and writes the
same bytes. An output that is an input is refused before anything is read.
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
import tensorflow as tf

from realformer_tf import common
from realformer_tf import vocab_building
from realformer_tf import text_input
from translation import translation_records

FLAGS = flags.FLAGS

# Counters of the summary (all ints; see the module docstring).
_SUMMARY_INT_KEYS = (
    "source_lines", "target_lines", "pairs_read", "empty_source_lines", "empty_target_lines",
    "empty_pairs", "cut_lines", "over_long_pairs", "extra_source_lines", "extra_target_lines",
    "instances", "source_tokens", "target_tokens", "max_source_length", "max_target_length",
    "source_unk_pieces", "target_unk_pieces", "undecodable_bytes",
    "lines_with_undecodable_bytes")


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("source_file", None, "Source-language text, one sentence a line "
                      "(plain or gzip).")
  flags.DEFINE_string("target_file", None, "Target-language text, line-aligned with "
                      "--source_file (plain or gzip).")
  flags.DEFINE_string("spm_model", None, "SentencePiece model with pad=0, unk=1, bos=2, eos=3; "
                      "trained here when it does not exist and --train_spm_vocab_size is set.")
  flags.DEFINE_integer("train_spm_vocab_size", 0, "When --spm_model does not exist: train a "
                       "joint source+target SentencePiece model of this many pieces "
                       "(0: do not train; a missing --spm_model is an error).")
  flags.DEFINE_enum("spm_algorithm", "unigram", ["unigram", "bpe"],
                    "SentencePiece model type when training one.")
  flags.DEFINE_string("output_file", None, "TFRecord file to write.")
  flags.DEFINE_integer("max_length", translation_records.DEFAULT_MAX_LENGTH,
                       "Longest source or target in ids (pieces + eos); longer pairs are "
                       "skipped and counted.")
  flags.DEFINE_bool("allow_unequal_lines", False,
                    "When the two files have different line counts, keep the pairs of the "
                    "common prefix (counted in the summary) instead of failing: only for files "
                    "known to be aligned line by line up to the shorter one's end.")
  flags.DEFINE_bool("strict", True, "Fail (writing nothing) when the two files have different "
                    "line counts. The default now (kept so that old command lines work); "
                    "--nostrict means --allow_unequal_lines.")
  # --max_bad_fraction, --max_line_chars: the shared input policy.
  text_input.define_input_flags()


def _aligned_lines(reader, path):
  """Yields each line of one file exactly once: stripped text, or None for a line that was cut.

  TextReader cuts a line longer than max_line_chars into several (so that memory stays flat),
  which would shift every following line of a parallel file. Its counters show the cut lines:
  `long_line_pieces` grows before each piece is yielded, and `long_lines_split` grows just
  before the first piece of each cut line. The pieces of one cut line become one None.

  Args:
    reader: text_input.TextReader.
    path: the file.

  Yields:
    str (undecodable bytes dropped, whitespace stripped) or None.
  """
  pieces_seen = reader.stats["long_line_pieces"]
  splits_seen = reader.stats["long_lines_split"]
  for line in reader.read_lines(path):
    if reader.stats["long_line_pieces"] > pieces_seen:
      pieces_seen += 1
      if reader.stats["long_lines_split"] != splits_seen:
        splits_seen = reader.stats["long_lines_split"]
        yield None
      continue
    yield line.decode("utf-8", "ignore").strip()


def read_parallel(source_file, target_file, stats=None, strict=True,
                  max_line_chars=text_input.DEFAULT_MAX_LINE_CHARS,
                  max_bad_fraction=text_input.DEFAULT_MAX_BAD_FRACTION,
                  progress_fn=None, should_stop=None):
  """Reads two line-aligned files; yields the usable pairs and counts the others.

  A pair is skipped (and counted in `stats`) when a side is empty (empty_source_lines,
  empty_target_lines, empty_pairs) or was longer than max_line_chars (cut_lines, and
  over_long_pairs). When one file has more lines, the pairs of the common prefix are yielded,
  the rest of the longer file is read to count it (extra_source_lines / extra_target_lines,
  source_lines / target_lines), and with `strict` (the default) a one-line error names both
  counts once both files are read (misaligned parallel data).

  Args:
    source_file: source text (plain or gzip).
    target_file: target text, line-aligned.
    stats: collections.Counter the counts are added to (None: a private one).
    strict: fail on different line counts (after reading both files to the end); False
      keeps the common prefix (--allow_unequal_lines).
    max_line_chars: longer lines are skipped (TextReader cuts them).
    max_bad_fraction: a file with a larger share of undecodable bytes is an error.
    progress_fn: called now and then with the MB of --source_file read so far.
    should_stop: function() -> bool polled at every line read (skipped ones too); True raises
      Stopped.

  Yields:
    (line_number, source, target): 0-based line number and the stripped sentences.
  """
  stats = collections.Counter() if stats is None else stats
  should_stop = should_stop or (lambda: False)
  readers = [text_input.TextReader(max_line_chars, max_bad_fraction, flag_name=name)
             for name in ("source_file", "target_file")]
  sources = _aligned_lines(readers[0], source_file)
  targets = _aligned_lines(readers[1], target_file)
  done = object()
  number = 0
  while True:
    if should_stop():
      raise Stopped()
    source, target = next(sources, done), next(targets, done)
    if source is done or target is done:
      break
    stats["pairs_read"] += 1
    number += 1
    if progress_fn and number % 1000 == 0:
      progress_fn(readers[0].disk_bytes_done / 1e6)
    if source is None or target is None:
      stats["cut_lines"] += (source is None) + (target is None)
      stats["over_long_pairs"] += 1
      continue
    if not source or not target:
      stats["empty_source_lines"] += not source
      stats["empty_target_lines"] += not target
      stats["empty_pairs"] += 1
      continue
    yield number - 1, source, target
  # The longer file is read to its end: both counts are reported.
  extra_source = (source is not done) + _count_lines(sources, should_stop)
  extra_target = (target is not done) + _count_lines(targets, should_stop)
  stats["extra_source_lines"] += extra_source
  stats["extra_target_lines"] += extra_target
  stats["source_lines"] += number + extra_source
  stats["target_lines"] += number + extra_target
  for reader in readers:
    stats["undecodable_bytes"] += reader.stats["undecodable_bytes"]
    stats["lines_with_undecodable_bytes"] += reader.stats["lines_with_undecodable_bytes"]
  if progress_fn:
    progress_fn(readers[0].disk_bytes_done / 1e6)
  if strict and (extra_source or extra_target):
    common.fail("--target_file=%s: has %d lines but --source_file=%s has %d: the files are not "
                "line-aligned (nothing written); pass --allow_unequal_lines to keep the pairs "
                "of the first %d lines" % (target_file, number + extra_target, source_file,
                                           number + extra_source, number))


def _count_lines(lines, should_stop):
  """The number of lines left in `lines`, polling should_stop at each (True raises Stopped)."""
  count = 0
  for _ in lines:
    if should_stop():
      raise Stopped()
    count += 1
  return count


class Stopped(Exception):
  """Raised inside the pipeline when SIGINT / SIGTERM asked to stop (the temporary is removed)."""


def create_translation_data(source_file, target_file, sp, output_file,
                            max_length=translation_records.DEFAULT_MAX_LENGTH, strict=True,
                            summary_path=None, max_line_chars=text_input.DEFAULT_MAX_LINE_CHARS,
                            max_bad_fraction=text_input.DEFAULT_MAX_BAD_FRACTION,
                            extra_settings=None, log_fn=None, stop_signals=None):
  """Reads, encodes, filters and writes the pairs; returns (and writes) the summary.

  Args:
    source_file: source text (plain or gzip).
    target_file: target text, line-aligned.
    sp: SentencePieceProcessor from translation_records.load_spm.
    output_file: the TFRecord to write.
    max_length: longest source / target in ids (pieces + eos); longer pairs are skipped.
    strict: fail on different line counts (see read_parallel); False keeps the common
      prefix.
    summary_path: where to write the summary JSON (None: not written).
    max_line_chars: longer lines are skipped.
    max_bad_fraction: a file with a larger share of undecodable bytes is an error.
    extra_settings: dict of more settings to record in the summary.
    log_fn: function(str) for progress lines (default: absl logging).
    stop_signals: common.StopSignals polled at every line pair read (None: not polled); a
      stop raises Stopped before anything is renamed into place.

  Returns:
    The summary dict (the counters of _SUMMARY_INT_KEYS, line_count_mismatch, files,
    settings).
  """
  log_fn = log_fn or logging.info
  should_stop = (lambda: stop_signals.stopped) if stop_signals is not None else (lambda: False)
  stats = collections.Counter()
  size_mb = tf.io.gfile.stat(source_file).length / 1e6
  meter = common.ProgressMeter(size_mb, unit="MB", log_fn=log_fn)
  meter.update(0.0)
  start = time.time()

  def encoded():
    for _, source, target in read_parallel(source_file, target_file, stats, strict,
                                           max_line_chars, max_bad_fraction,
                                           progress_fn=meter.update, should_stop=should_stop):
      source_ids, target_ids = translation_records.encode_pair(sp, source, target)
      if len(source_ids) > max_length or len(target_ids) > max_length:
        stats["over_long_pairs"] += 1
        continue
      stats["instances"] += 1
      stats["source_tokens"] += len(source_ids)
      stats["target_tokens"] += len(target_ids)
      stats["max_source_length"] = max(stats["max_source_length"], len(source_ids))
      stats["max_target_length"] = max(stats["max_target_length"], len(target_ids))
      stats["source_unk_pieces"] += source_ids.count(translation_records.UNK_ID)
      stats["target_unk_pieces"] += target_ids.count(translation_records.UNK_ID)
      yield source_ids, target_ids

  written = translation_records.write_translation_tfrecord(encoded(), output_file)
  assert written == stats["instances"]
  meter.update(size_mb, force=True)
  summary = {k: int(stats[k]) for k in _SUMMARY_INT_KEYS}
  summary["line_count_mismatch"] = bool(stats["extra_source_lines"] or
                                        stats["extra_target_lines"])
  summary.update({
      "input_files": [source_file, target_file],
      "output_files": [output_file],
      "vocab_size": sp.get_piece_size(),
      "seconds": round(time.time() - start, 3),
      "settings": dict({"max_length": max_length, "strict": strict,
                        "max_line_chars": max_line_chars, "max_bad_fraction": max_bad_fraction},
                       **(extra_settings or {})),
  })
  if summary_path:
    common.write_json_atomic(summary_path, summary)
  return summary


def report_problems(summary, log_fn=None):
  """Logs one warning line per kind of skipped input (empty, over-long, line counts)."""
  log_fn = log_fn or logging.warning
  if summary["line_count_mismatch"]:
    log_fn("the files have different line counts: source %d, target %d lines; kept the %d "
           "lines of the common prefix (--allow_unequal_lines)" % (
               summary["source_lines"], summary["target_lines"], summary["pairs_read"]))
  if summary["empty_pairs"]:
    log_fn("skipped %d pairs with an empty line (%d empty source, %d empty target lines)" % (
        summary["empty_pairs"], summary["empty_source_lines"], summary["empty_target_lines"]))
  if summary["over_long_pairs"]:
    log_fn("skipped %d pairs longer than --max_length=%d ids (%d lines over "
           "--max_line_chars)" % (summary["over_long_pairs"],
                                  summary["settings"]["max_length"], summary["cut_lines"]))
  if summary["undecodable_bytes"]:
    log_fn("dropped %d undecodable bytes (in %d lines)" % (
        summary["undecodable_bytes"], summary["lines_with_undecodable_bytes"]))


def _check_flags():
  """Fails with one line naming the flag when a flag is missing or out of range."""
  for name in ("source_file", "target_file", "spm_model", "output_file"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  if FLAGS.max_length < 2:
    common.fail("--max_length=%d: must be >= 2 (one piece + eos)" % FLAGS.max_length)
  if FLAGS.train_spm_vocab_size < 0:
    common.fail("--train_spm_vocab_size=%d: must be >= 0" % FLAGS.train_spm_vocab_size)
  if 0 < FLAGS.train_spm_vocab_size < 5:
    common.fail("--train_spm_vocab_size=%d: must be > 4 (pad, unk, bos, eos and pieces)" %
                FLAGS.train_spm_vocab_size)
  text_input.validate_input_flags(FLAGS.max_bad_fraction, FLAGS.max_line_chars)


def _same_file(path_a, path_b):
  """Whether two existing paths are one file (a link or a second name included)."""
  if "://" in path_a or "://" in path_b:
    return path_a.rstrip("/") == path_b.rstrip("/")
  return os.path.samefile(path_a, path_b)


def unequal_lines_allowed(allow_unequal_lines, strict, strict_given):
  """Whether files of different line counts keep their common prefix (else: one line).

  Args:
    allow_unequal_lines: --allow_unequal_lines.
    strict: --strict (True by default; --nostrict is the old spelling of --allow_unequal_lines).
    strict_given: whether --strict / --nostrict was on the command line.

  Returns:
    bool. Fails with one line when --strict and --allow_unequal_lines are both given.
  """
  if allow_unequal_lines and strict and strict_given:
    common.fail("--strict and --allow_unequal_lines contradict each other: give one")
  return allow_unequal_lines or not strict


def _spm_model(input_files, log_fn, path, size, algorithm, max_line_chars, max_bad_fraction):
  """The SentencePiece model of --spm_model, trained first when it is missing (see the flags).

  Args:
    input_files: the source and target text (training a model).
    log_fn: function of one string.
    path: --spm_model.
    size: --train_spm_vocab_size (0: the model must exist).
    algorithm: --spm_algorithm.
    max_line_chars: --max_line_chars.
    max_bad_fraction: --max_bad_fraction.

  Returns:
    the loaded SentencePiece model.
  """
  if tf.io.gfile.exists(path):
    sp = translation_records.load_spm(path)
    if size and sp.get_piece_size() != size:
      common.fail("--spm_model=%s: exists with %d pieces but --train_spm_vocab_size=%d; remove "
                  "it to train a new one or leave out --train_spm_vocab_size" % (
                      path, sp.get_piece_size(), size))
    return sp
  if not size:
    common.fail("--spm_model=%s: file does not exist (pass --train_spm_vocab_size=N to train "
                "one on the source and target text)" % path)
  log_fn("training a joint SentencePiece model of %d pieces on %s -> %s" % (
      size, ", ".join(input_files), path))
  common.remove_stale_temps(path)
  if os.path.dirname(path):
    tf.io.gfile.makedirs(os.path.dirname(path))
  vocab_building.build_sentencepiece(
      input_files, size, path, do_lower_case=False, algorithm=algorithm,
      log_fn=log_fn, max_line_chars=max_line_chars,
      max_bad_fraction=max_bad_fraction, id_layout="nmt",
      flag_name="train_spm_vocab_size")
  return translation_records.load_spm(path)


def main(_):
  logging.set_verbosity(logging.INFO)
  _check_flags()
  strict = not unequal_lines_allowed(FLAGS.allow_unequal_lines, FLAGS.strict,
                                     FLAGS["strict"].present)
  common.require_file(FLAGS.source_file, "source_file")
  common.require_file(FLAGS.target_file, "target_file")
  if _same_file(FLAGS.source_file, FLAGS.target_file):
    common.fail("--target_file=%s: is also --source_file; give the target-language file "
                "line-aligned with it" % FLAGS.target_file)
  input_files = [FLAGS.source_file, FLAGS.target_file]
  summary_file = text_input.summary_path_for(FLAGS.output_file)
  train_spm = not tf.io.gfile.exists(FLAGS.spm_model)
  outputs = [FLAGS.output_file, summary_file] + ([FLAGS.spm_model] if train_spm else [])
  # Before anything is read: no output may replace an input (or the SentencePiece model), and
  # no input may be an earlier output of ours (a TFRecord, a summary).
  for flag_name, path in (("source_file", FLAGS.source_file),
                          ("target_file", FLAGS.target_file)):
    text_input.check_outputs_not_inputs(
        outputs, path, input_files, [] if train_spm else [FLAGS.spm_model],
        input_flag=flag_name)
  common.check_not_input(FLAGS.output_file, [FLAGS.spm_model, summary_file])
  text_input.check_text_inputs([FLAGS.source_file], "source_file")
  text_input.check_text_inputs([FLAGS.target_file], "target_file")
  sp = _spm_model(input_files, logging.info, FLAGS.spm_model, FLAGS.train_spm_vocab_size,
                  FLAGS.spm_algorithm, FLAGS.max_line_chars, FLAGS.max_bad_fraction)
  for path in (FLAGS.output_file, summary_file):
    for removed in common.remove_stale_temps(path):
      logging.info("removed %s (left by an earlier run)", removed)
  logging.info("*** Writing %s (vocab %d, --max_length=%d) ***", FLAGS.output_file,
               sp.get_piece_size(), FLAGS.max_length)
  common.STOP_SIGNALS.install()
  try:
    summary = create_translation_data(
        FLAGS.source_file, FLAGS.target_file, sp, FLAGS.output_file,
        max_length=FLAGS.max_length, strict=strict, summary_path=summary_file,
        max_line_chars=FLAGS.max_line_chars, max_bad_fraction=FLAGS.max_bad_fraction,
        extra_settings={"spm_model": FLAGS.spm_model}, log_fn=logging.info,
        stop_signals=common.STOP_SIGNALS)
  except Stopped:
    common.STOP_SIGNALS.exit_if_stopped(
        "stopped before the end; nothing was written (rerun the same command to start again)")
    raise
  report_problems(summary)
  printable = {k: v for k, v in summary.items() if k not in ("input_files", "output_files")}
  print(json.dumps(printable, indent=2, sort_keys=True))
  print("Wrote %d pairs of %d lines to %s; summary: %s" % (
      summary["instances"], summary["pairs_read"], FLAGS.output_file, summary_file))
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
