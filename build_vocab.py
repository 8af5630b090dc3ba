r"""Builds a BERT vocabulary (WordPiece or SentencePiece) from text files.

WordPiece (default): the text goes through tokenization.BasicTokenizer
(cleaning, optional lower-casing and accent stripping, punctuation split) and
the resulting word counts train byte-pair-encoding style merges: every word
starts as its characters ("c", "##h", "##a", ...), and the most frequent
adjacent pair of symbols in the corpus is merged into a new piece ("ch",
then "cha", "##at", ...) until the vocab is full. A piece that does not start a
word carries the "##" prefix, as in BERT. The output is one token a line:

  [PAD] [UNK] [CLS] [SEP] [MASK]        the special tokens, always first
  [unused0] ... [unusedN-1]             if --num_unused=N
  every character seen >= --min_frequency times, then the same with "##"
  the learned pieces, in merge order

exactly --vocab_size lines (if the corpus runs out of pairs occurring at least
--min_frequency times, the rest is filled with further [unusedK] and a warning
is logged). tokenization.FullTokenizer(vocab_file=output_file,
do_lower_case=<same flag>) then tokenizes with it (greedy longest match).

SentencePiece (--model_type=sentencepiece): trains a SentencePiece model
(--spm_algorithm=unigram|bpe) on the lines of text (lower-cased when
--do_lower_case) with [PAD]=0, [UNK]=1 as its pad/unk pieces and [CLS],
[SEP], [MASK] (and [unusedN]) as control symbols (ids 2, 3, 4, ...); writes
<spm_model_prefix>.model and the vocab (its pieces in id order) to
--output_file. Use it with FullTokenizer(None, do_lower_case,
spm_model_file=<spm_model_prefix>.model).

  python build_vocab.py --input_file=../shared/data/sample_1mb.txt \
      --output_file=out/vocab_8k.txt --vocab_size=8000

The input is read as create_pretraining_data.py reads it (one shared reader,
text_input.TextReader): gzip files decompressed, a file with more
than --max_bad_fraction undecodable bytes refused, lines over --max_line_chars
cut at whitespace. An output that is an input (or matches an --input_file glob)
and inputs that are not text (TFRecords, our summaries, a vocab file) are
one-line errors before anything is read.
"""

import os
import time

from absl import app
from absl import flags
from absl import logging
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import common
from realformer_tf import vocab_building
from realformer_tf import text_input

FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("input_file", None,
                      "Text files: comma-separated list of file names or globs.")
  flags.DEFINE_string("output_file", None, "Vocab file to write (one token a line).")
  flags.DEFINE_integer("vocab_size", 8000, "Exact number of lines of the vocab.")
  flags.DEFINE_bool("do_lower_case", True,
                    "Lower-case the text (and strip accents for WordPiece).")
  flags.DEFINE_integer("num_unused", 0,
                       "Number of [unusedN] placeholder tokens after the specials.")
  flags.DEFINE_integer("min_frequency", 2,
                       "WordPiece: minimum count of a character or of a merged "
                       "pair to enter the vocab.")
  flags.DEFINE_integer("max_input_bytes", 0,
                       "Read at most this many bytes of input (whole lines); "
                       "0 reads everything.")
  flags.DEFINE_enum("model_type", "wordpiece", ["wordpiece", "sentencepiece"],
                    "Kind of vocabulary to build.")
  flags.DEFINE_string("spm_model_prefix", None,
                      "SentencePiece: writes <prefix>.model.")
  flags.DEFINE_enum("spm_algorithm", "unigram", ["unigram", "bpe"],
                    "SentencePiece model type.")
  # --max_bad_fraction, --max_line_chars: the shared input policy.
  text_input.define_input_flags()


def _check_flags():
  """Fails with one line naming the flag when a flag is missing or out of range."""
  if not FLAGS.input_file:
    common.fail("--input_file is required")
  if not FLAGS.output_file:
    common.fail("--output_file is required")
  if FLAGS.vocab_size <= 0:
    common.fail("--vocab_size=%d: must be positive" % FLAGS.vocab_size)
  if FLAGS.num_unused < 0:
    common.fail("--num_unused=%d: must be >= 0" % FLAGS.num_unused)
  if FLAGS.min_frequency < 1:
    common.fail("--min_frequency=%d: must be >= 1" % FLAGS.min_frequency)
  if FLAGS.max_input_bytes < 0:
    common.fail("--max_input_bytes=%d: must be >= 0" % FLAGS.max_input_bytes)
  text_input.validate_input_flags(FLAGS.max_bad_fraction, FLAGS.max_line_chars)
  if FLAGS.model_type == "sentencepiece" and not FLAGS.spm_model_prefix:
    common.fail("--spm_model_prefix is required with --model_type=sentencepiece")


def _spm_model_file(model_type, spm_model_prefix, output_file):
  """<--spm_model_prefix>.model, or None for WordPiece; fails when it is --output_file.

  Args:
    model_type: --model_type.
    spm_model_prefix: --spm_model_prefix.
    output_file: --output_file.

  Returns:
    the SentencePiece model's path, or None.
  """
  if model_type != "sentencepiece":
    return None
  spm_model_file = spm_model_prefix + ".model"
  if os.path.realpath(spm_model_file) == os.path.realpath(output_file):
    common.fail("--output_file=%s: is also the SentencePiece model "
                "(--spm_model_prefix); the vocab would replace it" % output_file)
  return spm_model_file


def _input_files(input_file):
  """The files of --input_file (names and globs); each must exist.

  Args:
    input_file: --input_file.

  Returns:
    list of paths.
  """
  input_files = common.expand_input_files(input_file)
  for path in input_files:
    common.require_file(path, "input_file")
  return input_files


def _check_outputs_and_inputs(outputs, input_file, input_files):
  """Refuses, before anything is read, an output that is an input and an input that is no text.

  No output may replace an input or be read back as text by a rerun, and no input may be an
  earlier output (a vocab, TFRecords).

  Args:
    outputs: the files this run writes.
    input_file: --input_file.
    input_files: the expanded --input_file.
  """
  text_input.check_outputs_not_inputs(outputs, input_file, input_files)
  text_input.check_text_inputs(input_files)


def _prepare_outputs(outputs, output_file, spm_model_prefix):
  """Removes killed writers' temporaries of the outputs and creates their directories.

  Args:
    outputs: the files this run writes.
    output_file: --output_file.
    spm_model_prefix: --spm_model_prefix (None for WordPiece).
  """
  for path in outputs:
    common.remove_stale_temps(path)
  for path in (output_file, spm_model_prefix):
    if path and os.path.dirname(path):
      tf.io.gfile.makedirs(os.path.dirname(path))


def main(_):
  _check_flags()
  input_files = _input_files(FLAGS.input_file)
  spm_model_file = _spm_model_file(FLAGS.model_type, FLAGS.spm_model_prefix, FLAGS.output_file)
  outputs = [FLAGS.output_file] + ([spm_model_file] if spm_model_file else [])
  _check_outputs_and_inputs(outputs, FLAGS.input_file, input_files)
  start = time.time()
  log = logging.info
  _prepare_outputs(outputs, FLAGS.output_file, FLAGS.spm_model_prefix)
  if FLAGS.model_type == "wordpiece":
    tokens = vocab_building.build_wordpiece_vocab(
        input_files, FLAGS.vocab_size, FLAGS.do_lower_case, FLAGS.num_unused,
        FLAGS.min_frequency, FLAGS.max_input_bytes, log, FLAGS.max_line_chars,
        FLAGS.max_bad_fraction)
  else:
    tokens = vocab_building.build_sentencepiece(
        input_files, FLAGS.vocab_size, spm_model_file, FLAGS.do_lower_case,
        FLAGS.num_unused, FLAGS.spm_algorithm, FLAGS.max_input_bytes, log,
        FLAGS.max_line_chars, FLAGS.max_bad_fraction)
    log("wrote %s" % spm_model_file)
  with common.atomic_output(FLAGS.output_file) as f:
    f.write("".join(t + "\n" for t in tokens))
  log("wrote %s: %d tokens in %.1f s" %
      (FLAGS.output_file, len(tokens), time.time() - start))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
