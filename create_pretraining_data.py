# coding=utf-8
r"""Create masked LM / next sentence TFRecords for BERT pre-training, fast and in flat memory.

  python create_pretraining_data.py --input_file='my_text/*.txt' --vocab_file=vocab.txt \
    --output_file=out/pretrain.tfrecord --max_seq_length=128 --max_predictions_per_seq=20

Same flags, instance recipe and tf.train.Example features as google-research/bert's script (the
files are interchangeable both ways). The corpus is streamed in chunks of whole documents through
--num_workers processes, so memory stays flat; the output bytes depend only on the input, seed and
flags (not on the worker count); shards are written under temporary names and renamed when
complete, with NAME.summary.json beside them. Input: one sentence per line, a blank line between
documents; gzip is read decompressed. Where the recipe differs from the official script (NSP
negatives from the same chunk, a bounded shuffle): docs/pretraining.md.

As a library, the official functions keep their names, signatures and random draws
(TrainingInstance, create_training_instances, create_instances_from_document,
create_masked_lm_predictions, truncate_seq_pair, write_instance_to_example_files, ...); the command
itself runs the streaming pipeline of realformer_tf/pretraining_data.py.
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
from realformer_tf import model_config
from realformer_tf import ordered_pool
from realformer_tf import pretraining_data
from realformer_tf import text_input
import tokenization


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("input_file", None,
                      "Input raw text file (or comma-separated list of files and globs).")
  flags.DEFINE_string(
      "output_file", None,
      "Output TF example file (or comma-separated list of files). A single name with "
      "--num_output_shards=N > 1 is written as NAME-00000-of-0000N, ...")
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary file that the BERT model was trained on.")
  flags.DEFINE_string("spm_model_file", None,
                      "Optional SentencePiece model for the tokenizer (then --vocab_file is not "
                      "needed: the vocabulary is the model's pieces).")
  flags.DEFINE_bool(
      "do_lower_case", True,
      "Whether to lower case the input text. Should be True for uncased "
      "models and False for cased models.")
  flags.DEFINE_bool(
      "do_whole_word_mask", False,
      "Whether to use whole word masking rather than per-WordPiece masking.")
  flags.DEFINE_integer("max_seq_length", 128,
                       "Maximum sequence length: at most the model's position table, "
                       "max_position_embeddings of --bert_config_file (512 without it).")
  flags.DEFINE_string("bert_config_file", None,
                      "Optional: the config of the model the data is for. --max_seq_length is "
                      "checked against its max_position_embeddings (without it: at most 512, "
                      "the official configs' table) and the vocab ids against its vocab_size.")
  flags.DEFINE_integer("max_predictions_per_seq", 20,
                       "Maximum number of masked LM predictions per sequence.")
  flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
  flags.DEFINE_integer(
      "dupe_factor", 10,
      "Number of times to duplicate the input data (with different masks).")
  flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
  flags.DEFINE_float(
      "short_seq_prob", 0.1,
      "Probability of creating sequences which are shorter than the "
      "maximum length.")
  flags.DEFINE_integer("num_workers", 0,
                       "Worker processes (0 = all cores). The output does not depend on it.")
  flags.DEFINE_integer("num_output_shards", 1,
                       "With a single --output_file name: number of shards to write round-robin.")
  flags.DEFINE_integer(
      "nsp_buffer_docs", 1000,
      "At most this many documents per chunk; NSP random segments are drawn from the other documents "
      "of the same chunk (the official script draws from the whole corpus).")
  flags.DEFINE_float("chunk_mb", 0.25,
                     "Target MB of input text per chunk (unit of parallel work and NSP pool).")
  flags.DEFINE_integer("shuffle_buffer", 10000,
                       "Examples held in the output shuffle buffer (0 = write in chunk order).")
  define_input_flags()


FLAGS = flags.FLAGS

# The position table of the official BERT configs (and of every config in configs/): the bound
# of --max_seq_length when no --bert_config_file says otherwise.
DEFAULT_MAX_POSITION_EMBEDDINGS = 512


# ---------------------------------------------------------------------------------------------
# The official library API (google-research/bert create_pretraining_data.py): token strings,
# the whole corpus in memory, the official random draws. Code written against the official
# module runs on this one unchanged and, for the same random.Random(seed), gets the same
# instances as the official script (our tokenizer gives the official tokens).
# ---------------------------------------------------------------------------------------------


class TrainingInstance(object):
  """A single training instance (sentence pair)."""

  def __init__(self, tokens, segment_ids, masked_lm_positions, masked_lm_labels,
               is_random_next):
    """Builds an instance.

    Args:
      tokens: list of str, "[CLS] A [SEP] B [SEP]" after masking.
      segment_ids: list of int, 0 for [CLS] A [SEP], 1 for B [SEP].
      masked_lm_positions: list of int, the masked positions, increasing.
      masked_lm_labels: list of str, the original tokens at those positions.
      is_random_next: bool, whether B was drawn from a random document.
    """
    self.tokens = tokens
    self.segment_ids = segment_ids
    self.is_random_next = is_random_next
    self.masked_lm_positions = masked_lm_positions
    self.masked_lm_labels = masked_lm_labels

  def __str__(self):
    # The official text, line for line.
    return ("tokens: %s\n" % " ".join(tokenization.printable_text(x) for x in self.tokens) +
            "segment_ids: %s\n" % " ".join(str(x) for x in self.segment_ids) +
            "is_random_next: %s\n" % self.is_random_next +
            "masked_lm_positions: %s\n" % " ".join(str(x) for x in self.masked_lm_positions) +
            "masked_lm_labels: %s\n" % " ".join(tokenization.printable_text(x)
                                                for x in self.masked_lm_labels) +
            "\n")

  def __repr__(self):
    return self.__str__()


MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])


def create_int_feature(values):
  """A tf.train.Feature holding `values` as an int64 list."""
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def create_float_feature(values):
  """A tf.train.Feature holding `values` as a float list."""
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def write_instance_to_example_files(instances, tokenizer, max_seq_length,
                                    max_predictions_per_seq, output_files):
  """Writes `TrainingInstance`s as tf.train.Examples with the official features.

  Features: input_ids, input_mask, segment_ids (zero-padded to max_seq_length),
  masked_lm_positions, masked_lm_ids, masked_lm_weights (1.0 per prediction; zero-padded to
  max_predictions_per_seq), next_sentence_labels (1 = B is random). Instance i goes to
  output_files[i % len(output_files)], as in the official code. Unlike the official code, each
  file is written under a hidden temporary name (common.temp_path) and renamed when all are
  complete, so a failed or interrupted call leaves no file that looks finished; temporaries
  of killed writers are removed first.

  Args:
    instances: iterable of TrainingInstance.
    tokenizer: tokenization.FullTokenizer (its vocab gives the ids).
    max_seq_length: int, the padded sequence length.
    max_predictions_per_seq: int, the padded number of predictions.
    output_files: list of TFRecord paths.

  Returns:
    The number of examples written (the official function returns None).

  Raises:
    ValueError: an instance longer than max_seq_length or with more than
      max_predictions_per_seq predictions (the official code asserts the first and writes the
      second with a feature length that training then fails to parse).
  """
  output_files = list(output_files)
  if not output_files:
    raise ValueError("write_instance_to_example_files: no output_files")
  for path in output_files:
    common.remove_stale_temps(path)
  writer = pretraining_data.ShardWriter(output_files, shuffle_buffer=0, seed=0)
  try:
    for inst_index, instance in enumerate(instances):
      input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
      num_tokens = len(input_ids)
      if num_tokens > max_seq_length or len(instance.segment_ids) != num_tokens:
        raise ValueError("instance %d: %d tokens and %d segment ids, expected the same number, "
                         "at most max_seq_length=%d" % (inst_index, num_tokens,
                                                         len(instance.segment_ids),
                                                         max_seq_length))
      padding = [0] * (max_seq_length - num_tokens)
      input_mask = [1] * num_tokens + padding
      segment_ids = list(instance.segment_ids) + padding
      input_ids = list(input_ids) + padding

      num_predictions = len(instance.masked_lm_positions)
      if (num_predictions > max_predictions_per_seq or
          len(instance.masked_lm_labels) != num_predictions):
        raise ValueError("instance %d: %d masked positions and %d labels, expected the same "
                         "number, at most max_predictions_per_seq=%d" % (
                             inst_index, num_predictions, len(instance.masked_lm_labels),
                             max_predictions_per_seq))
      prediction_padding = [0] * (max_predictions_per_seq - num_predictions)
      masked_lm_positions = list(instance.masked_lm_positions) + prediction_padding
      masked_lm_ids = (list(tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)) +
                       prediction_padding)
      masked_lm_weights = [1.0] * num_predictions + [0.0] * len(prediction_padding)
      next_sentence_label = 1 if instance.is_random_next else 0

      features = collections.OrderedDict()
      features["input_ids"] = create_int_feature(input_ids)
      features["input_mask"] = create_int_feature(input_mask)
      features["segment_ids"] = create_int_feature(segment_ids)
      features["masked_lm_positions"] = create_int_feature(masked_lm_positions)
      features["masked_lm_ids"] = create_int_feature(masked_lm_ids)
      features["masked_lm_weights"] = create_float_feature(masked_lm_weights)
      features["next_sentence_labels"] = create_int_feature([next_sentence_label])
      tf_example = tf.train.Example(features=tf.train.Features(feature=features))
      writer.add(tf_example.SerializeToString())

      if inst_index < 20:
        logging.info("*** Example ***")
        logging.info("tokens: %s", " ".join(tokenization.printable_text(x)
                                            for x in instance.tokens))
        for name, feature in features.items():
          values = feature.int64_list.value or feature.float_list.value
          logging.info("%s: %s", name, " ".join(str(x) for x in values))
    writer.close()
  except BaseException:
    writer.abort()
    raise
  logging.info("Wrote %d total instances", writer.written)
  return writer.written


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor,
                              short_seq_prob, masked_lm_prob, max_predictions_per_seq, rng,
                              do_whole_word_mask=False):
  """Creates `TrainingInstance`s from raw text, as the official function.

  Input format: one sentence per line, a blank line between documents. All files are read into
  memory as one list of documents (lists of segments: the non-empty token lists of the lines; a
  file that does not end with a blank line continues its last document into the next file, as
  in the official code); empty documents are removed; then, with the official draws in the
  official order: rng.shuffle(all_documents), dupe_factor passes of
  create_instances_from_document over every document, rng.shuffle(instances). The same
  random.Random(seed) therefore gives the same instances as the official script.

  The files are read through TextReader (the input policy of the command): gzip files are read
  decompressed, a file with more than 1% undecodable bytes is a common.UsageError, lines of
  over 1,000,000 characters are cut at whitespace. On ordinary text this is the official reading.

  Args:
    input_files: list of text file paths (any tf.io.gfile path).
    tokenizer: tokenization.FullTokenizer.
    max_seq_length: int, the sequence length including [CLS] and two [SEP] (>= 5).
    dupe_factor: int, the number of passes (each with other masks and pairs).
    short_seq_prob: float, probability of a random shorter target length per document pass.
    masked_lm_prob: float, share of the tokens to predict.
    max_predictions_per_seq: int, the most predictions per instance.
    rng: random.Random.
    do_whole_word_mask: bool, the official --do_whole_word_mask flag (mask all the word pieces
      of a word together).

  Returns:
    List of TrainingInstance.
  """
  all_documents = [[]]
  reader = TextReader()
  for input_file in input_files:
    for line in reader.read_lines(input_file):
      line = tokenization.convert_to_unicode(line).strip()
      # Empty lines are document delimiters.
      if not line:
        all_documents.append([])
        continue
      tokens = tokenizer.tokenize(line)
      if tokens:
        all_documents[-1].append(tokens)

  # Remove empty documents.
  all_documents = [x for x in all_documents if x]
  rng.shuffle(all_documents)

  vocab_words = list(tokenizer.vocab.keys())
  instances = []
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      instances.extend(create_instances_from_document(
          all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
          max_predictions_per_seq, vocab_words, rng, do_whole_word_mask=do_whole_word_mask))

  rng.shuffle(instances)
  return instances


class _SegmentBounds(object):
  """Documents of token lists seen as segment offsets (for document_pairs), made when asked.

  Only the documents the recipe looks at (this one and the random B documents) are measured,
  so a call costs what the official loop costs, not a pass over the corpus.
  """

  def __init__(self, all_documents):
    self._documents = all_documents

  def __len__(self):
    return len(self._documents)

  def __getitem__(self, index):
    bounds = [0]
    for segment in self._documents[index]:
      bounds.append(bounds[-1] + len(segment))
    return bounds


def create_instances_from_document(all_documents, document_index, max_seq_length,
                                   short_seq_prob, masked_lm_prob, max_predictions_per_seq,
                                   vocab_words, rng, do_whole_word_mask=False):
  """Creates `TrainingInstance`s for a single document, as the official function.

  The document is cut into chunks of whole segments of about the target length (max_seq_length
  - 3, or with probability short_seq_prob a random length in [2, max_seq_length - 3]); each
  chunk is split at a random segment boundary into A and B, and with probability 0.5 (always
  for a one-segment chunk) B is replaced by segments from a random other document, the unused
  segments being put back. A and B are truncated to max_seq_length - 3 tokens
  (truncate_seq_pair), laid out as [CLS] A [SEP] B [SEP] and masked
  (create_masked_lm_predictions). The random draws are the official ones, in the official
  order.

  Args:
    all_documents: list of documents; a document is a list of segments, each a non-empty list
      of tokens (str).
    document_index: int, the document to use.
    max_seq_length: int, the sequence length including [CLS] and two [SEP] (>= 5).
    short_seq_prob: float, probability of a random shorter target length.
    masked_lm_prob: float, share of the tokens to predict.
    max_predictions_per_seq: int, the most predictions per instance.
    vocab_words: list of str, the random replacements (the official code passes the whole
      vocabulary, list(tokenizer.vocab.keys())).
    rng: random.Random.
    do_whole_word_mask: bool, mask whole words (see create_masked_lm_predictions).

  Returns:
    List of TrainingInstance.
  """
  document = all_documents[document_index]
  max_num_tokens = max_seq_length - 3
  instances = []
  pairs = pretraining_data.document_pairs(_SegmentBounds(all_documents), document_index,
                                         max_seq_length, short_seq_prob, rng.random, rng.randint)
  for a_first, a_end, b_document, b_first, b_end, is_random_next in pairs:
    tokens_a = [token for segment in document[a_first:a_end] for token in segment]
    tokens_b = [token for segment in all_documents[b_document][b_first:b_end]
                for token in segment]
    truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
    if not tokens_a or not tokens_b:
      raise ValueError("document %d: an empty A or B segment (max_seq_length=%d must be >= 5 "
                       "and segments non-empty)" % (document_index, max_seq_length))

    tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    tokens, masked_lm_positions, masked_lm_labels = create_masked_lm_predictions(
        tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
        do_whole_word_mask=do_whole_word_mask)
    instances.append(TrainingInstance(
        tokens=tokens, segment_ids=segment_ids, is_random_next=is_random_next,
        masked_lm_positions=masked_lm_positions, masked_lm_labels=masked_lm_labels))
  return instances


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words,
                                 rng, do_whole_word_mask=False):
  """Creates the predictions for the masked LM objective, as the official function.

  num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)));
  the candidates (every token but [CLS] and [SEP]; with whole-word masking a "##" piece joins
  the previous candidate's group) are shuffled and taken in that order while they fit; each
  chosen token becomes [MASK] 80% of the time, stays itself 10%, becomes a random entry of
  vocab_words 10%.

  Args:
    tokens: list of str, [CLS] A [SEP] B [SEP].
    masked_lm_prob: float.
    max_predictions_per_seq: int.
    vocab_words: list of str, the random replacements.
    rng: random.Random.
    do_whole_word_mask: bool, the official --do_whole_word_mask flag, here an argument so that
      no flag needs to be parsed.

  Returns:
    (output_tokens, masked_lm_positions, masked_lm_labels): the masked copy of tokens, the
    masked positions in increasing order and the original tokens there.
  """
  cand_indexes = []
  for i, token in enumerate(tokens):
    if token == "[CLS]" or token == "[SEP]":
      continue
    # Whole-word masking: a "##" piece continues the previous word. The training code does not
    # change: each piece is still predicted on its own.
    if do_whole_word_mask and cand_indexes and token.startswith("##"):
      cand_indexes[-1].append(i)
    else:
      cand_indexes.append([i])

  rng.shuffle(cand_indexes)

  output_tokens = list(tokens)
  num_to_predict = min(max_predictions_per_seq,
                       max(1, int(round(len(tokens) * masked_lm_prob))))

  masked_lms = []
  covered_indexes = set()
  for index_set in cand_indexes:
    if len(masked_lms) >= num_to_predict:
      break
    # A whole word that would exceed the number of predictions is skipped.
    if len(masked_lms) + len(index_set) > num_to_predict:
      continue
    if any(index in covered_indexes for index in index_set):
      continue
    for index in index_set:
      covered_indexes.add(index)
      # 80% of the time [MASK], 10% the original token, 10% a random word.
      if rng.random() < 0.8:
        masked_token = "[MASK]"
      elif rng.random() < 0.5:
        masked_token = tokens[index]
      else:
        masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
      output_tokens[index] = masked_token
      masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))

  masked_lms = sorted(masked_lms, key=lambda x: x.index)
  masked_lm_positions = [p.index for p in masked_lms]
  masked_lm_labels = [p.label for p in masked_lms]
  return (output_tokens, masked_lm_positions, masked_lm_labels)


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Truncates a pair of token lists in place to at most max_num_tokens in total (official).

  One token at a time is dropped from the longer list (tokens_b on ties), from the front or the
  back with probability 0.5 each: one rng.random() per token dropped, as the official code.

  Args:
    tokens_a: list, modified in place.
    tokens_b: list, modified in place.
    max_num_tokens: int, the maximum total length.
    rng: random.Random.
  """
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    # Sometimes from the front, sometimes from the back, to avoid biases.
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


# ---------------------------------------------------------------------------------------------
# Reading text input and the input / output checks: text_input.py, the library every
# text-reading tool shares (build_vocab, translation/create_translation_data,
# etc_model/create_pretraining_data). The names stay importable from here.
# ---------------------------------------------------------------------------------------------

DEFAULT_MAX_BAD_FRACTION = text_input.DEFAULT_MAX_BAD_FRACTION
DEFAULT_MAX_LINE_CHARS = text_input.DEFAULT_MAX_LINE_CHARS
SUMMARY_SUFFIX = text_input.SUMMARY_SUFFIX
TextReader = text_input.TextReader
define_input_flags = text_input.define_input_flags
validate_input_flags = text_input.validate_input_flags
non_text_kind = text_input.non_text_kind
check_text_inputs = text_input.check_text_inputs
matches_pattern = text_input.matches_pattern
check_outputs_not_inputs = text_input.check_outputs_not_inputs
summary_path_for = text_input.summary_path_for


# ---------------------------------------------------------------------------------------------
# The command: its flag checks and main (the pipeline: realformer_tf/pretraining_data.py).
# ---------------------------------------------------------------------------------------------


def check_lengths(max_seq_length, max_predictions_per_seq, bert_config_file=None):
  """Fails with one line when a length is impossible for the model, before any work.

  A sequence longer than the model's position table cannot be trained on (every example is
  padded to max_seq_length: a huge value only makes the job grow until memory runs out). The
  table is max_position_embeddings of bert_config_file or, without one, the 512 of the
  official BERT configs.

  Args:
    max_seq_length: --max_seq_length.
    max_predictions_per_seq: --max_predictions_per_seq (at most max_seq_length: one
      prediction per token at most).
    bert_config_file: --bert_config_file, or None.

  Returns:
    The modeling.BertConfig of bert_config_file, or None.
  """
  if max_seq_length < 5:
    common.fail("--max_seq_length=%d: must be >= 5" % max_seq_length)
  config = None
  if bert_config_file:
    config = model_config.load_config(bert_config_file, max_seq_length=max_seq_length)
  elif max_seq_length > DEFAULT_MAX_POSITION_EMBEDDINGS:
    common.fail("--max_seq_length=%d: longer than the %d positions of the official BERT configs; "
                "pass --bert_config_file=<the model's config> to allow up to its "
                "max_position_embeddings" % (max_seq_length, DEFAULT_MAX_POSITION_EMBEDDINGS))
  if max_predictions_per_seq < 1:
    common.fail("--max_predictions_per_seq=%d: must be >= 1" % max_predictions_per_seq)
  if max_predictions_per_seq > max_seq_length:
    common.fail("--max_predictions_per_seq=%d: must be <= --max_seq_length=%d" %
                (max_predictions_per_seq, max_seq_length))
  return config


def _validate_flags():
  """Checks the numeric flags; fails with a one-line error."""
  if FLAGS.dupe_factor < 1:
    common.fail("--dupe_factor=%d: must be >= 1" % FLAGS.dupe_factor)
  if not 0.0 < FLAGS.masked_lm_prob <= 1.0:
    common.fail("--masked_lm_prob=%g: must be in (0, 1]" % FLAGS.masked_lm_prob)
  if not 0.0 <= FLAGS.short_seq_prob <= 1.0:
    common.fail("--short_seq_prob=%g: must be in [0, 1]" % FLAGS.short_seq_prob)
  if FLAGS.num_workers < 0:
    common.fail("--num_workers=%d: must be >= 0" % FLAGS.num_workers)
  if FLAGS.nsp_buffer_docs < 2:
    common.fail("--nsp_buffer_docs=%d: must be >= 2" % FLAGS.nsp_buffer_docs)
  if FLAGS.chunk_mb <= 0:
    common.fail("--chunk_mb=%g: must be > 0" % FLAGS.chunk_mb)
  validate_input_flags(FLAGS.max_bad_fraction, FLAGS.max_line_chars)


def main(_):
  logging.set_verbosity(logging.INFO)
  for name in ("input_file", "output_file"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  config = check_lengths(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                         FLAGS.bert_config_file)
  _validate_flags()
  if FLAGS.spm_model_file:
    common.require_file(FLAGS.spm_model_file, "spm_model_file")
  else:
    common.require_file(FLAGS.vocab_file, "vocab_file")
  input_files = common.expand_input_files(FLAGS.input_file, "input_file")
  output_names = [name.strip() for name in FLAGS.output_file.split(",") if name.strip()]
  output_files = pretraining_data.output_paths(FLAGS.output_file, FLAGS.num_output_shards)
  summary_file = summary_path_for(FLAGS.output_file)
  # Before anything is written: no output may replace an input (corpus, vocab) or be read
  # back as text by a rerun, and no input may be an earlier output of ours.
  check_outputs_not_inputs(output_files + [summary_file], FLAGS.input_file, input_files,
                           [FLAGS.vocab_file, FLAGS.spm_model_file])
  check_text_inputs(input_files)
  try:
    tokenizer = pretraining_data.make_tokenizer(
        FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.spm_model_file,
        vocab_size=config.vocab_size if config else None,
        config_name="--bert_config_file=%s" % FLAGS.bert_config_file)
  except (UnicodeDecodeError, ValueError, KeyError, IndexError) as e:
    if isinstance(e, common.UsageError):
      raise
    common.fail("--vocab_file=%s: cannot be read as a vocabulary (%s)" % (FLAGS.vocab_file, e))
  settings = pretraining_data.Settings(
      max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor,
      masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
      do_whole_word_mask=FLAGS.do_whole_word_mask)
  flag = "spm_model_file" if FLAGS.spm_model_file else "vocab_file"
  for token in ("[CLS]", "[SEP]", "[MASK]"):
    if token not in tokenizer.vocab:
      common.fail("--%s=%s: the vocabulary has no %s token" % (flag, getattr(FLAGS, flag), token))
  num_workers = FLAGS.num_workers or os.cpu_count() or 1

  logging.info("*** Reading from %d input files (%s) ***", len(input_files),
               ", ".join(input_files[:5]) + (" ..." if len(input_files) > 5 else ""))
  logging.info("*** Writing to %s ***", ", ".join(output_files))
  pretraining_data.remove_stale_outputs(output_names, output_files, summary_file,
                                        log_fn=logging.info)
  # SIGINT / SIGTERM: stop after the current chunk, remove the temporaries, exit 130 / 143.
  common.STOP_SIGNALS.install()
  try:
    summary = pretraining_data.create_pretraining_data(
        input_files, output_files, tokenizer, settings, num_workers=num_workers,
        chunk_mb=FLAGS.chunk_mb, nsp_buffer_docs=FLAGS.nsp_buffer_docs,
        shuffle_buffer=FLAGS.shuffle_buffer, summary_path=summary_file, log_fn=logging.info,
        extra_settings={"vocab_file": FLAGS.vocab_file, "spm_model_file": FLAGS.spm_model_file,
                        "do_lower_case": FLAGS.do_lower_case,
                        "bert_config_file": FLAGS.bert_config_file},
        max_bad_fraction=FLAGS.max_bad_fraction, max_line_chars=FLAGS.max_line_chars,
        stop_signals=common.STOP_SIGNALS)
  except pretraining_data.Stopped:
    common.STOP_SIGNALS.exit_if_stopped(
        "stopped before the end; nothing was written and the temporary files were removed "
        "(rerun the same command to start again)")
    raise
  except ordered_pool.WorkerDied as e:
    # Not a usage error (exit 1, as a full disk): the machine ran out of something.
    sys.stderr.write("error: %s of --input_file=%s; nothing was written (the temporary files "
                     "were removed); rerun, or use --num_workers=1 or a smaller --chunk_mb\n" % (
                         e.describe("chunk"), FLAGS.input_file))
    sys.stderr.flush()
    sys.exit(1)
  printable = {k: v for k, v in summary.items() if k not in ("input_files", "output_files")}
  print(json.dumps(printable, indent=2, sort_keys=True))
  print("Wrote %d instances to %d file(s); summary: %s" % (
      summary["instances"], len(output_files), summary_file))
  if summary["long_lines_split"]:
    logging.warning("%d lines longer than --max_line_chars=%d were cut into %d pieces",
                    summary["long_lines_split"], FLAGS.max_line_chars,
                    summary["long_line_pieces"])
  if summary["undecodable_bytes"]:
    logging.warning("%d undecodable bytes (in %d lines) were replaced",
                    summary["undecodable_bytes"], summary["lines_with_undecodable_bytes"])
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
