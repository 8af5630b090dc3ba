# coding=utf-8
"""Create masked LM / next sentence TFRecords for BERT pre-training, fast and in flat memory.

Same flags, same instance recipe and the same tf.train.Example features as the official
google-research/bert create_pretraining_data.py (the files are interchangeable with the official
run_pretraining.py, both ways), but:

- Streaming: the input is read in chunks of whole documents (a blank line or the end of a file ends
  a document). The corpus is never held in memory: the main process reads the text and writes the
  shards, a pool of --num_workers forked processes turns chunks into serialized examples, and at
  most 2 * num_workers chunks are in flight, so the peak memory depends on --chunk_mb,
  --shuffle_buffer and the worker count, not on the corpus size.
- Deterministic: chunk boundaries depend only on the input and the flags (never on the worker
  count), chunk i is processed with random generators seeded from (random_seed, i), and the results
  are written in chunk order. The output bytes are identical for a given input, seed and flags,
  whatever --num_workers is.
- Safe input: gzip files are read decompressed; a file with more than --max_bad_fraction of
  undecodable bytes (binary, or compressed otherwise) is a one-line error, not garbage instances;
  lines longer than --max_line_chars are cut at whitespace (memory stays flat; the summary counts
  them); earlier outputs of ours (TFRecords, summaries) and vocab files among the inputs, and an
  output that is an input or matches an --input_file glob, are refused before anything is written.
- Safe output: shards are written under hidden temporary names (`.NAME.tmp-<pid>`, which no glob
  `NAME*` matches) and renamed when complete; the summary is `NAME.summary.json` for
  --output_file=NAME.EXT (see summary_path_for: `--input_file=NAME.EXT*` never matches it).
  SIGINT / SIGTERM stop the run within a second (polled at every line and document, and while
  waiting for the workers), end the workers, remove the temporaries and exit 130 / 143; after a
  SIGKILL a rerun removes the dead run's temporaries. There is no partial resume (shards are
  written round-robin and renamed together at the end): a rerun starts over and, the output
  being deterministic, writes the same bytes as an uninterrupted run.
- A dead worker stops the run: a worker process that ends without answering (SIGKILL from the
  out-of-memory killer) is seen within half a second (OrderedPool); the run ends the other
  workers, removes the temporaries and exits 1 with one line naming the worker, its signal and
  the chunk it was processing. The chunk is not retried: a worker killed for memory would most
  likely be killed again, and the job's output must not depend on which process the kernel
  chose.
- Bounded lengths: --max_seq_length is at most the model's position table
  (max_position_embeddings of --bert_config_file, 512 without it) and --max_predictions_per_seq
  at most --max_seq_length, checked before any work (one line, exit 2).
- Fast: instances are token ranges into one array per chunk (no per-token Python work), masking and
  the tf.train.Example serialization are vectorized with numpy over all instances of a chunk (the
  protobuf bytes are assembled directly; they parse to the same tf.train.Example as the official
  code builds). On the 2-core machine: ~3-4 MB of text per second with dupe_factor 5 (official:
  0.12).

Trade-offs against the official script (which loads the whole corpus: 831 MB for 5 MB of text):
- NSP negatives ("B is random", 50%) are drawn from the other documents of the same chunk, which
  holds up to --nsp_buffer_docs documents and about --chunk_mb MB of text (about 20-500 documents of
  the shared corpus), instead of from the whole corpus. Negatives therefore come from nearby
  documents of the input (often the same source): a somewhat harder NSP task than the official
  uniform draw, and the pool is bounded, which is what keeps the memory flat. A larger
  --chunk_mb/--nsp_buffer_docs widens the pool at the cost of worker memory (and of parallelism on
  small inputs). A chunk with a single document takes its "random" B from that document, as the
  official script does for a one-document corpus. As in the official script, a chunk of one segment
  always gets a random B, so slightly more than 50% of the labels are "random" (0.55 on the shared
  corpus).
- The official script shuffles all instances of the corpus. Here the instances of a chunk (all
  dupe_factor passes) are shuffled together, then go through a shuffle buffer of --shuffle_buffer
  examples (like tf.data's shuffle) before being written round-robin to the output shards: the
  dupe_factor masked copies of a text end up within a few thousand examples of each other instead of
  anywhere in the output.
- A document longer than 16 * --chunk_mb is split at a line boundary into several documents.
- Each input file starts a new document (the official script continues the last document of the
  previous file when that file does not end with a blank line).
- The random choices follow the official distributions (80/10/10 masking, whole-word groups,
  truncation from the front or the back with p=0.5, short_seq_prob) but use other random streams, so
  the output is not byte-identical to the official script's for the same seed.

Library API: the official module's functions are here with the official names, signatures and
semantics, so that code written against the official create_pretraining_data.py as a library runs
unchanged: TrainingInstance, MaskedLmInstance, create_training_instances,
create_instances_from_document, create_masked_lm_predictions, truncate_seq_pair,
write_instance_to_example_files, create_int_feature, create_float_feature. They hold the corpus in
memory and make the official random draws in the official order: the same random.Random(seed) gives
the same instances as the official script. The official FLAGS.do_whole_word_mask is a keyword
argument `do_whole_word_mask=False` (no flag needs to be parsed); write_instance_to_example_files
writes each file under a hidden temporary name and renames it when all are complete. The command
above does not use them (it runs the streaming pipeline); both share the instance recipe
(_document_pairs).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import gc
import json
import multiprocessing
import multiprocessing.connection
import os
import pickle
import queue
import random
import re
import signal
import sys
import threading
import time
import traceback

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

import common
import mlm_masking
import model_config
import text_input
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

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")

# Whitespace tokens cached per worker by the tokenizer: the cache is cleared when full, so this
# bounds its memory (a few MB per worker) while Zipf's law keeps the hit rate high.
TOKENIZER_CACHE_SIZE = 1 << 15

# The position table of the official BERT configs (and of every config in configs/): the bound
# of --max_seq_length when no --bert_config_file says otherwise.
DEFAULT_MAX_POSITION_EMBEDDINGS = 512

# A document is split when a chunk holds this many times --chunk_mb without a document end.
_HARD_CHUNK_FACTOR = 16

_SUMMARY_INT_KEYS = ("documents", "empty_documents_skipped", "one_sentence_documents", "lines",
                     "lines_with_undecodable_bytes", "undecodable_bytes", "long_lines_split",
                     "long_line_pieces", "input_tokens", "instances", "tokens",
                     "non_special_tokens", "masked_tokens", "masked_as_mask", "masked_as_random",
                     "masked_as_kept", "random_next", "input_bytes")


# ---------------------------------------------------------------------------------------------
# Instance creation: the official recipe, shared by the id pipeline and the official API.
# ---------------------------------------------------------------------------------------------


def _document_pairs(all_bounds, document_index, max_seq_length, short_seq_prob, uniform, randint):
  """Yields the official A / B segment choices for one pass over one document.

  The official create_instances_from_document loop on segment lengths only: both the id pipeline
  (_create_id_instances_from_document) and the official API (create_instances_from_document) run
  it, each with its own random primitives, and build their instances from the choices. It is a
  generator so that the caller draws its truncation and masking for an instance from the same
  generator at the same point as the official code (before the next instance's draws).

  Args:
    all_bounds: sequence of documents; a document is a list of S + 1 increasing offsets, segment
      (line) i having bounds[i + 1] - bounds[i] > 0 tokens.
    document_index: int, the document to use.
    max_seq_length: int, the sequence length including [CLS] and two [SEP].
    short_seq_prob: float, probability of a random shorter target length.
    uniform: function() -> float uniform on [0, 1).
    randint: function(a, b) -> int uniform on [a, b].

  Yields:
    (a_first, a_end, b_document, b_first, b_end, is_random_next): segments [a_first, a_end) of
    `document_index` are A, segments [b_first, b_end) of `b_document` are B (not truncated yet).
  """
  bounds = all_bounds[document_index]
  # Account for [CLS], [SEP], [SEP]
  max_num_tokens = max_seq_length - 3
  # Usually fill the whole sequence; sometimes use a shorter one to reduce the mismatch between
  # pre-training and fine-tuning.
  target_seq_length = max_num_tokens
  if uniform() < short_seq_prob:
    target_seq_length = randint(2, max_num_tokens)

  # Split into A and B at "sentence" (line) boundaries so that NSP is not trivial.
  # The current chunk is the segments first..i.
  first = 0
  i = 0
  num_segments = len(bounds) - 1
  while i < num_segments:
    current_length = bounds[i + 1] - bounds[first]
    if i == num_segments - 1 or current_length >= target_seq_length:
      chunk_segments = i + 1 - first
      # `a_end` is how many segments of the chunk go into the `A` (first) sentence.
      a_end = 1
      if chunk_segments >= 2:
        a_end = randint(1, chunk_segments - 1)
      len_a = bounds[first + a_end] - bounds[first]
      if chunk_segments == 1 or uniform() < 0.5:
        target_b_length = target_seq_length - len_a
        # Try to pick a document other than this one.
        for _ in range(10):
          random_document_index = randint(0, len(all_bounds) - 1)
          if random_document_index != document_index:
            break
        random_bounds = all_bounds[random_document_index]
        random_start = randint(0, len(random_bounds) - 2)
        # B: whole segments from random_start until it reaches target_b_length (at least one).
        b_end = random_start + 1
        last = len(random_bounds) - 1
        while b_end < last and random_bounds[b_end] - random_bounds[random_start] < target_b_length:
          b_end += 1
        # The segments not used for B are "put back" so that they don't go to waste.
        i -= chunk_segments - a_end
        yield first, first + a_end, random_document_index, random_start, b_end, True
      else:
        yield first, first + a_end, document_index, first + a_end, i + 1, False
      first = i + 1
    i += 1


def _truncation(len_a, len_b, max_num_tokens, rng):
  """Tokens to drop (front_a, back_a, front_b, back_b) so that len_a + len_b <= max_num_tokens.

  Same distribution as the official truncate_seq_pair (which pops one token at a time from the
  longer list, tokens_b on ties, from the front or the back with p=0.5), in O(1) random draws.
  """
  excess = len_a + len_b - max_num_tokens
  if excess <= 0:
    return 0, 0, 0, 0
  pops_a = pops_b = 0
  if len_a > len_b:
    d = min(excess, len_a - len_b)
    pops_a += d
    excess -= d
  elif len_b > len_a:
    d = min(excess, len_b - len_a)
    pops_b += d
    excess -= d
  pops_b += (excess + 1) // 2
  pops_a += excess // 2
  front_a = bin(rng.getrandbits(pops_a)).count("1") if pops_a else 0
  front_b = bin(rng.getrandbits(pops_b)).count("1") if pops_b else 0
  return front_a, pops_a - front_a, front_b, pops_b - front_b


def _create_id_instances_from_document(all_documents, document_index, max_seq_length,
                                       short_seq_prob, rng, instances):
  """Creates one pass of NSP instances for one document, for the id pipeline.

  The official recipe (_document_pairs) with documents given as segment boundaries into one flat
  token array, and an instance as two token ranges of that array, so that no token list is
  copied here. Its random draws are not the official ones: randint(a, b) is
  a + int(random() * (b - a + 1)) (uniform up to 2**-53) and truncation is _truncation.

  Args:
    all_documents: list of documents; a document is a list of S + 1 increasing offsets: segment
      (line) i is tokens[doc[i]:doc[i + 1]] (all segments non-empty).
    document_index: int, the document to use.
    max_seq_length: int, the sequence length including [CLS] and two [SEP].
    short_seq_prob: float, probability of a random shorter target length.
    rng: random.Random.
    instances: list to which (a_start, a_len, b_start, b_len, is_random_next) tuples are appended.
  """
  uniform = rng.random
  randint = lambda a, b: a + int(uniform() * (b - a + 1))
  bounds = all_documents[document_index]
  max_num_tokens = max_seq_length - 3
  for a_first, a_end, b_document, b_first, b_end, is_random_next in _document_pairs(
      all_documents, document_index, max_seq_length, short_seq_prob, uniform, randint):
    b_bounds = all_documents[b_document]
    a_start = bounds[a_first]
    len_a = bounds[a_end] - a_start
    b_start = b_bounds[b_first]
    len_b = b_bounds[b_end] - b_start
    front_a, back_a, front_b, back_b = _truncation(len_a, len_b, max_num_tokens, rng)
    instances.append((a_start + front_a, len_a - front_a - back_a,
                      b_start + front_b, len_b - front_b - back_b, is_random_next))


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
  writer = ShardWriter(output_files, shuffle_buffer=0, seed=0)
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
  """Documents of token lists seen as segment offsets (for _document_pairs), made when asked.

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
  for a_first, a_end, b_document, b_first, b_end, is_random_next in _document_pairs(
      _SegmentBounds(all_documents), document_index, max_seq_length, short_seq_prob,
      rng.random, rng.randint):
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
# Fast tf.train.Example serialization (protobuf wire format written directly).
# ---------------------------------------------------------------------------------------------


def _varint(value):
  """Protobuf base-128 varint encoding of a non-negative int."""
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


_NUM_SMALL_VARINTS = 1 << 14
_SMALL_VARINTS = [_varint(i) for i in range(_NUM_SMALL_VARINTS)]


def _encode_varint_rows(values):
  """Encodes each row of a non-negative int array as packed varints.

  Args:
    values: int array [N, W], values < 2**35.

  Returns:
    (blob bytes, offsets list [N + 1]): row i is blob[offsets[i]:offsets[i + 1]].
  """
  n, width = values.shape
  max_value = int(values.max()) if values.size else 0
  max_bytes = 1
  while max_value >= (1 << (7 * max_bytes)):
    max_bytes += 1
  if max_bytes == 1:
    return values.astype(np.uint8).tobytes(), list(range(0, n * width + 1, width))
  v = values.astype(np.int32 if max_bytes <= 4 else np.int64)
  parts = np.empty((n, width, max_bytes), np.uint8)
  keep = np.empty((n, width, max_bytes), bool)
  keep[:, :, 0] = True
  for j in range(max_bytes):
    # Byte j holds bits 7j..7j+6, with the high bit set when another byte follows.
    more = v >= (1 << (7 * (j + 1))) if j + 1 < max_bytes else np.zeros_like(keep[:, :, 0])
    parts[:, :, j] = ((v >> (7 * j)) & 0x7F) | (more.view(np.uint8) << 7)
    if j + 1 < max_bytes:
      keep[:, :, j + 1] = more
  blob = parts[keep].tobytes()
  offsets = np.zeros([n + 1], np.int64)
  np.cumsum(np.count_nonzero(keep.reshape(n, -1), axis=1), out=offsets[1:])
  return blob, offsets.tolist()


class ExampleSerializer(object):
  """Builds tf.train.Example bytes with the official pre-training features, without protobufs.

  Wire format: Example.features(1) -> Features.feature(1) map entries {key(1), value(2): Feature};
  Feature.int64_list(3) / float_list(2) -> packed repeated value(1).
  """

  def __init__(self):
    self._cache = {}

  def _prefix(self, name, kind, payload_len):
    """Bytes that precede a packed payload of `payload_len` bytes in the Features map entry."""
    key = (name, kind, payload_len)
    prefix = self._cache.get(key)
    if prefix is None:
      list_len = 1 + len(_varint(payload_len)) + payload_len
      feature_tag = b"\x1a" if kind == "int" else b"\x12"
      feature_len = 1 + len(_varint(list_len)) + list_len
      key_part = b"\x0a" + _varint(len(name)) + name.encode("ascii")
      entry_len = len(key_part) + 1 + len(_varint(feature_len)) + feature_len
      prefix = (b"\x0a" + _varint(entry_len) + key_part + b"\x12" + _varint(feature_len) +
                feature_tag + _varint(list_len) + b"\x0a" + _varint(payload_len))
      self._cache[key] = prefix
    return prefix

  def serialize_batch(self, input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids,
                      masked_lm_weights, next_sentence_labels):
    """Serializes N examples.

    Args:
      input_ids, input_mask, segment_ids: int arrays [N, max_seq_length].
      masked_lm_positions, masked_lm_ids: int arrays [N, max_predictions_per_seq].
      masked_lm_weights: float array [N, max_predictions_per_seq].
      next_sentence_labels: int array [N].

    Returns:
      List of N serialized tf.train.Example byte strings.
    """
    n, seq_len = input_ids.shape
    num_pred = masked_lm_positions.shape[1]
    ids_blob, ids_off = _encode_varint_rows(input_ids)
    pos_blob, pos_off = _encode_varint_rows(masked_lm_positions)
    mid_blob, mid_off = _encode_varint_rows(masked_lm_ids)
    # The fixed-size features (0/1 values are one varint byte each) form one [N, F] byte matrix.
    prefix = self._prefix

    def const(name, kind, payload_len):
      return np.broadcast_to(np.frombuffer(prefix(name, kind, payload_len), np.uint8),
                             (n, len(prefix(name, kind, payload_len))))

    fixed = np.concatenate([
        const("input_mask", "int", seq_len), input_mask.astype(np.uint8),
        const("segment_ids", "int", seq_len), segment_ids.astype(np.uint8),
        const("masked_lm_weights", "float", 4 * num_pred),
        masked_lm_weights.astype("<f4").view(np.uint8).reshape(n, 4 * num_pred),
        const("next_sentence_labels", "int", 1),
        next_sentence_labels.astype(np.uint8).reshape(n, 1)], axis=1)
    fixed_len = fixed.shape[1]
    fixed_blob = fixed.tobytes()
    ids_prefix = {}
    pos_prefix = {}
    mid_prefix = {}
    out = []
    for i in range(n):
      a, b = ids_off[i], ids_off[i + 1]
      c, d = pos_off[i], pos_off[i + 1]
      e, f = mid_off[i], mid_off[i + 1]
      p_ids = ids_prefix.get(b - a) or ids_prefix.setdefault(
          b - a, prefix("input_ids", "int", b - a))
      p_pos = pos_prefix.get(d - c) or pos_prefix.setdefault(
          d - c, prefix("masked_lm_positions", "int", d - c))
      p_mid = mid_prefix.get(f - e) or mid_prefix.setdefault(
          f - e, prefix("masked_lm_ids", "int", f - e))
      body = b"".join((p_ids, ids_blob[a:b], fixed_blob[i * fixed_len:(i + 1) * fixed_len],
                       p_pos, pos_blob[c:d], p_mid, mid_blob[e:f]))
      size = len(body)
      out.append(b"\x0a" + (_SMALL_VARINTS[size] if size < _NUM_SMALL_VARINTS else _varint(size))
                 + body)
    return out


# ---------------------------------------------------------------------------------------------
# Chunk processing (runs in the worker processes).
# ---------------------------------------------------------------------------------------------

Settings = collections.namedtuple("Settings", [
    "max_seq_length", "max_predictions_per_seq", "random_seed", "dupe_factor", "masked_lm_prob",
    "short_seq_prob", "do_whole_word_mask"])


class ChunkProcessor(object):
  """Turns a chunk of raw text (whole documents) into serialized tf.train.Examples."""

  def __init__(self, tokenizer, settings, should_stop=None):
    """Builds the processor.

    Args:
      tokenizer: tokenization.FullTokenizer.
      settings: Settings.
      should_stop: function() -> bool polled at every line and document (True raises Stopped),
        or None (a pool's worker: the pool ends it).
    """
    self.settings = settings
    self.should_stop = should_stop or (lambda: False)
    vocab = tokenizer.vocab
    for token in ("[CLS]", "[SEP]", "[MASK]"):
      if token not in vocab:
        common.fail("--vocab_file: the vocabulary has no %s token" % token)
    self.special_ids = {"cls": vocab["[CLS]"], "sep": vocab["[SEP]"], "mask": vocab["[MASK]"]}
    self.vocab_size = max(vocab.values()) + 1
    self.subword_table = None
    if settings.do_whole_word_mask:
      self.subword_table = np.zeros([self.vocab_size], dtype=bool)
      for token, index in vocab.items():
        if token.startswith("##"):
          self.subword_table[index] = True
    fast = getattr(tokenizer, "tokenize_to_ids", None)
    if fast is None:
      fast = lambda text: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
    self.tokenize_to_ids = fast
    self.serializer = ExampleSerializer()

  def read_documents(self, raw, stats):
    """Decodes and tokenizes raw text.

    Undecodable bytes become U+FFFD (which the tokenizer drops); TextReader counted them.

    Args:
      raw: bytes, whole lines.
      stats: Counter, updated.

    Returns:
      (tokens int32 array of all ids, documents): a document is a list of S + 1 offsets into tokens,
      segment (non-empty line) i being tokens[doc[i]:doc[i + 1]].
    """
    # "\n" is never part of a bad sequence, so replacing keeps the lines as they were.
    lines = raw.decode("utf-8", errors="replace").split("\n")
    flat = []
    documents = []
    current = [0]
    had_text = False
    tokenize = self.tokenize_to_ids
    should_stop = self.should_stop
    num_lines = 0
    for line in lines:
      if should_stop():
        raise Stopped()
      line = line.strip()
      if not line:
        if len(current) > 1:
          documents.append(current)
        elif had_text:
          stats["empty_documents_skipped"] += 1
        current = [len(flat)]
        had_text = False
        continue
      num_lines += 1
      had_text = True
      ids = tokenize(line)
      if ids:
        flat.extend(ids)
        current.append(len(flat))
    if len(current) > 1:
      documents.append(current)
    elif had_text:
      stats["empty_documents_skipped"] += 1
    stats["lines"] += num_lines
    stats["input_tokens"] += len(flat)
    stats["documents"] += len(documents)
    stats["one_sentence_documents"] += sum(1 for d in documents if len(d) == 2)
    return np.array(flat, dtype=np.int32), documents

  def process(self, chunk_index, raw):
    """Processes one chunk.

    Args:
      chunk_index: int, position of the chunk in the input (seeds the random generators).
      raw: bytes, whole lines of input text.

    Returns:
      (list of serialized tf.train.Example bytes, stats Counter).
    """
    s = self.settings
    stats = collections.Counter()
    stats["input_bytes"] = len(raw)
    seed_seq = np.random.SeedSequence([s.random_seed, chunk_index])
    py_seed, np_seed = seed_seq.generate_state(2, dtype=np.uint64)
    rng = random.Random(int(py_seed))
    np_rng = np.random.default_rng(int(np_seed))

    tokens, documents = self.read_documents(raw, stats)
    if not documents:
      return [], stats
    pairs = []
    for _ in range(s.dupe_factor):
      for document_index in range(len(documents)):
        if self.should_stop():
          raise Stopped()
        _create_id_instances_from_document(documents, document_index, s.max_seq_length,
                                           s.short_seq_prob, rng, pairs)
    # Shuffle the instances of this chunk (all dupe_factor passes) together.
    pairs = np.array(pairs, dtype=np.int64)[np_rng.permutation(len(pairs))]
    a_start, len_a, b_start, len_b, labels = pairs.T
    n = len(pairs)
    seq_len = s.max_seq_length
    lengths = len_a + len_b + 3
    # "[CLS] A [SEP] B [SEP]" gathered from the token array.
    col = np.arange(seq_len)[None, :]
    end_a = (len_a + 1)[:, None]  # position of the first [SEP]
    end_b = (lengths - 1)[:, None]  # position of the second [SEP]
    in_a = (col >= 1) & (col < end_a)
    in_b = (col > end_a) & (col < end_b)
    index = np.where(in_a, a_start[:, None] + col - 1, b_start[:, None] + col - end_a - 1)
    index = np.where(in_a | in_b, index, 0)
    input_ids = np.where(in_a | in_b, tokens[index], 0).astype(np.int32)
    input_ids[:, 0] = self.special_ids["cls"]
    input_ids[(col == end_a) | (col == end_b)] = self.special_ids["sep"]
    input_mask = col < lengths[:, None]
    segment_ids = (col > end_a) & input_mask

    positions, label_ids, num_masked, kinds = mlm_masking.create_id_masked_lm_predictions(
        input_ids, lengths, s.masked_lm_prob, s.max_predictions_per_seq, self.special_ids,
        self.vocab_size, self.subword_table, np_rng)
    weights = (np.arange(s.max_predictions_per_seq)[None, :] < num_masked[:, None])
    records = self.serializer.serialize_batch(
        input_ids, input_mask, segment_ids, positions, label_ids, weights.astype(np.float32),
        labels)

    stats["instances"] += n
    stats["tokens"] += int(lengths.sum())
    stats["non_special_tokens"] += int(lengths.sum()) - 3 * n
    stats["masked_tokens"] += int(num_masked.sum())
    stats["masked_as_mask"] += kinds[0]
    stats["masked_as_random"] += kinds[1]
    stats["masked_as_kept"] += kinds[2]
    stats["random_next"] += int(labels.sum())
    return records, stats


_WORKER = None


def _init_worker(tokenizer, settings, should_stop=None):
  """Builds the per-process ChunkProcessor."""
  global _WORKER
  _WORKER = ChunkProcessor(tokenizer, settings, should_stop)


def _init_pool_worker(tokenizer, settings):
  """Worker set-up: signals, then the per-process ChunkProcessor."""
  # Ctrl-C reaches the whole process group: only the main process handles it (it stops the pool).
  # SIGTERM (what the pool's close sends) ends a worker at once, whatever the parent installed.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  _die_with_parent()
  _init_worker(tokenizer, settings)


def _die_with_parent():
  """Linux: a worker gets SIGTERM when the main process dies, even by SIGKILL (no orphans)."""
  parent = os.getppid()
  try:
    import ctypes  # pylint: disable=g-import-not-at-top
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError):
    return
  if os.getppid() != parent:  # the parent died before prctl
    os._exit(1)  # pylint: disable=protected-access


def _process_chunk(args):
  """Pool task: (chunk_index, raw bytes) -> (chunk_index, blob, record lengths, stats)."""
  chunk_index, raw = args
  records, stats = _WORKER.process(chunk_index, raw)
  lengths = [len(r) for r in records]
  return chunk_index, b"".join(records), lengths, dict(stats)


# ---------------------------------------------------------------------------------------------
# The worker pool: forked processes, results in task order, a dead worker stops the run.
# ---------------------------------------------------------------------------------------------


class WorkerDied(Exception):
  """A worker process ended without answering (e.g. SIGKILL from the out-of-memory killer).

  Attributes:
    pid: the worker's process id.
    exitcode: its exit status as multiprocessing reports it (-N: killed by signal N), or None.
    task_number: the task it was running (the chunk index here) or, when it ran none, the
      first task sent to it and lost; None when it held no task.
    running: whether it was running task_number (else it had not begun it, or its answer was
      lost with it).
  """

  def __init__(self, pid, exitcode, task_number, running=True):
    self.pid = pid
    self.exitcode = exitcode
    self.task_number = task_number
    self.running = running
    super(WorkerDied, self).__init__(self.describe())

  def describe(self, task_name="task"):
    """E.g. "worker process 1234 died (signal 9, SIGKILL: out of memory?) while processing
    task 17"."""
    if self.exitcode is not None and self.exitcode < 0:
      signum = -self.exitcode
      try:
        name = signal.Signals(signum).name
      except ValueError:
        name = "unknown signal"
      how = "died (signal %d, %s%s)" % (signum, name,
                                        ": out of memory?" if signum == signal.SIGKILL else "")
    elif self.exitcode is not None:
      how = "exited with status %d" % self.exitcode
    else:
      how = "stopped answering"
    if self.task_number is None:
      return "worker process %d %s while it held no %s" % (self.pid, how, task_name)
    return "worker process %d %s %s %s %d" % (
        self.pid, how, "while processing" if self.running else "before handing back", task_name,
        self.task_number)


def _feed(connection, outbox):
  """Sends the pickled messages put in `outbox` over `connection` until None (a thread).

  Whoever puts never waits on the pipe: the parent does not wait for a busy worker to take its
  next task, and a worker goes on to its next task while the parent is busy writing. Messages
  are pickled by whoever puts them, so that a pickling error surfaces there, not in this thread.
  """
  while True:
    message = outbox.get()
    if message is None:
      return
    try:
      connection.send_bytes(message)
    except OSError:  # the other side is gone (the pool sees a worker's end by its sentinel)
      return


def _worker_loop(task_reader, result_writer, current, fn, initializer, initargs):
  """A worker process: initializer(*initargs), then fn(task) for each task until None.

  Messages: tasks (number, argument); results (number, True, fn(argument)) or
  (number, False, exception). `current` (shared memory, readable after this process is killed)
  holds the number of the task being run, -1 between tasks.
  """
  initializer(*initargs)
  results = queue.Queue()
  sender = threading.Thread(target=_feed, args=(result_writer, results), daemon=True)
  sender.start()
  while True:
    try:
      task = pickle.loads(task_reader.recv_bytes())
    except (EOFError, OSError):  # the parent is gone
      break
    if task is None:
      break
    number, argument = task
    current.value = number
    try:
      result = _pickled((number, True, fn(argument)))
    except Exception as e:  # pylint: disable=broad-except
      try:
        result = _pickled((number, False, e))
      except Exception:  # pylint: disable=broad-except
        # An error that does not pickle reaches the parent as its traceback.
        result = _pickled((number, False, RuntimeError("".join(
            traceback.format_exception(type(e), e, e.__traceback__)))))
    current.value = -1
    results.put(result)
  results.put(None)
  sender.join()


def _pickled(message):
  return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


class _Worker(object):
  """One worker process, the parent's ends of its two pipes and the tasks it holds."""

  def __init__(self, process, tasks, results, current):
    self.process = process
    self.tasks = tasks
    self.results = results
    self.current = current  # the task it runs, -1 between tasks (shared memory)
    self.held = collections.deque()  # task numbers sent and not answered, in order
    self.outbox = queue.Queue()
    self.sender = threading.Thread(target=_feed, args=(tasks, self.outbox), daemon=True)


class OrderedPool(object):
  """Forked worker processes that run fn over tasks and hand the results back in task order.

  multiprocessing.Pool cannot tell that a worker died: it starts a replacement and waits for
  ever for the lost task's result. Here each worker has its own pipes and its exit is seen
  (process sentinel, end of file on its pipe) within POLL_S seconds and raised as WorkerDied,
  naming the worker and the task it was running. At most max_in_flight tasks are out (sent and
  not yet handed back), so memory stays flat whatever the number of tasks.

  Usage:
    pool = OrderedPool(2, fn, initializer, initargs)
    try:
      for result in pool.imap(tasks, max_in_flight=4, should_stop=...):
        ...
    finally:
      pool.close()  # the workers are ended and reaped
  """

  POLL_S = 0.5

  def __init__(self, num_workers, fn, initializer=lambda: None, initargs=()):
    """Starts the workers (forked where the platform can: they inherit initargs unpickled).

    Args:
      num_workers: int >= 1.
      fn: the task function (run in the workers).
      initializer: run once in each worker first (with initargs).
      initargs: tuple.
    """
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    self._workers = []
    try:
      for _ in range(num_workers):
        task_reader, task_writer = ctx.Pipe(duplex=False)
        result_reader, result_writer = ctx.Pipe(duplex=False)
        current = ctx.RawValue("q", -1)
        process = ctx.Process(target=_worker_loop, daemon=True,
                              args=(task_reader, result_writer, current, fn, initializer,
                                    initargs))
        process.start()
        # Only the worker keeps its ends: when it dies, its result pipe reads as ended.
        task_reader.close()
        result_writer.close()
        self._workers.append(_Worker(process, task_writer, result_reader, current))
      # Threads only once every worker is forked (a fork copies no thread, but their locks).
      for worker in self._workers:
        worker.sender.start()
    except BaseException:
      self.close()
      raise

  @property
  def pids(self):
    """The worker process ids."""
    return [worker.process.pid for worker in self._workers]

  def imap(self, tasks, max_in_flight, should_stop=None):
    """Yields fn(task) for each task, in order.

    Args:
      tasks: iterable of task arguments (read only as far as max_in_flight allows).
      max_in_flight: int >= 1, the most tasks sent and not yet handed back.
      should_stop: function() -> bool, polled while waiting; True raises Stopped.

    Yields:
      The results, in the order of `tasks`.

    Raises:
      WorkerDied: a worker ended (its task is lost: nothing more is yielded).
      Stopped: should_stop() said so.
      The exception fn raised for a task (a common.UsageError as it is).
    """
    should_stop = should_stop or (lambda: False)
    tasks = iter(tasks)
    done = {}  # task number -> result, received out of order
    next_number = 0  # the next result to hand back
    sent = 0
    exhausted = False
    while True:
      while not exhausted and sent - next_number < max_in_flight:
        task = next(tasks, _NO_TASK)
        if task is _NO_TASK:
          exhausted = True
          break
        self._send(min(self._workers, key=lambda w: len(w.held)), sent, task)
        sent += 1
      if next_number in done:
        result = done.pop(next_number)
        next_number += 1
        yield result
        continue
      if exhausted and next_number == sent:
        return
      self._receive(done)
      if should_stop():
        raise Stopped()

  def _send(self, worker, number, task):
    message = _pickled((number, task))
    worker.held.append(number)
    worker.outbox.put(message)

  def _receive(self, done):
    """Waits up to POLL_S for results or a worker's end; adds results to `done`."""
    by_wait_object = {}
    for worker in self._workers:
      by_wait_object[worker.results] = worker
      by_wait_object[worker.process.sentinel] = worker
    ready = multiprocessing.connection.wait(list(by_wait_object), self.POLL_S)
    # Results first: a worker may have answered just before it was killed.
    for worker in self._workers:
      if worker.results in ready:
        try:
          number, ok, value = pickle.loads(worker.results.recv_bytes())
        except (EOFError, OSError):  # ended, perhaps in the middle of a message
          self._died(worker)
        worker.held.remove(number)
        if not ok:
          raise value
        done[number] = value
    for worker in self._workers:
      if worker.process.sentinel in ready:
        self._died(worker)

  def _died(self, worker):
    """Raises WorkerDied for `worker` (reaped first, for its exit status)."""
    worker.process.join(timeout=5)
    current = worker.current.value
    if current >= 0:
      raise WorkerDied(worker.process.pid, worker.process.exitcode, current)
    # Between two tasks: the first task it held and did not answer is lost.
    try:
      while worker.results.poll():
        number = pickle.loads(worker.results.recv_bytes())[0]
        if number in worker.held:
          worker.held.remove(number)
    except (EOFError, OSError):
      pass
    raise WorkerDied(worker.process.pid, worker.process.exitcode,
                     worker.held[0] if worker.held else None, running=False)

  def close(self):
    """Ends the workers (SIGTERM, SIGKILL after 5 s), reaps them and closes the pipes."""
    for worker in self._workers:
      if worker.process.is_alive():
        worker.process.terminate()
    for worker in self._workers:
      worker.process.join(timeout=5)
      if worker.process.is_alive():
        worker.process.kill()
        worker.process.join()
      # The sender thread ends on None, or on the broken pipe of its ended worker.
      worker.outbox.put(None)
      if worker.sender.is_alive():
        worker.sender.join(timeout=5)
      worker.tasks.close()
      worker.results.close()
    self._workers = []


_NO_TASK = object()


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
# Input streaming, output writing (main process).
# ---------------------------------------------------------------------------------------------


def iter_chunks(input_files, chunk_bytes, max_docs, reader=None):
  """Streams the input files as chunks of whole documents.

  A chunk ends at the first document end (blank line or end of file) once it holds `max_docs`
  documents or `chunk_bytes` bytes; a document longer than 16 * chunk_bytes is cut at a line.

  Args:
    input_files: list of paths (tf.io.gfile; plain or gzip text).
    chunk_bytes: int, target bytes per chunk.
    max_docs: int, maximum documents per chunk.
    reader: TextReader (the input policy: gzip, undecodable share, over-long lines), or None
      for one with the default limits.

  Yields:
    bytes, whole lines of text, each ending in "\n" (a file's end is marked by a blank line).
  """
  reader = reader or TextReader()
  hard_limit = _HARD_CHUNK_FACTOR * chunk_bytes
  pending = []
  pending_bytes = 0
  docs = 0
  in_doc = False
  for path in input_files:
    for line in reader.read_lines(path):
      if line[-1:] != b"\n":  # the last line of a file without a final newline
        line += b"\n"
      pending.append(line)
      pending_bytes += len(line)
      if line.strip():
        in_doc = True
        if pending_bytes >= hard_limit:
          yield b"".join(pending)
          pending, pending_bytes, docs, in_doc = [], 0, 0, False
      elif in_doc:
        in_doc = False
        docs += 1
        if docs >= max_docs or pending_bytes >= chunk_bytes:
          yield b"".join(pending)
          pending, pending_bytes, docs = [], 0, 0
    # End of file ends a document.
    pending.append(b"\n")
    pending_bytes += 1
    if in_doc:
      in_doc = False
      docs += 1
      if docs >= max_docs or pending_bytes >= chunk_bytes:
        yield b"".join(pending)
        pending, pending_bytes, docs = [], 0, 0
  if any(line.strip() for line in pending):
    yield b"".join(pending)


def output_paths(output_file, num_output_shards):
  """The output shard names from --output_file and --num_output_shards."""
  names = [name.strip() for name in output_file.split(",") if name.strip()]
  if not names:
    common.fail("--output_file is empty")
  if num_output_shards < 1:
    common.fail("--num_output_shards=%d: must be >= 1" % num_output_shards)
  if len(names) == 1 and num_output_shards > 1:
    return ["%s-%05d-of-%05d" % (names[0], i, num_output_shards) for i in range(num_output_shards)]
  if len(names) > 1 and num_output_shards not in (1, len(names)):
    common.fail("--num_output_shards=%d: --output_file already lists %d files" %
                (num_output_shards, len(names)))
  return names


class ShardWriter(object):
  """Writes records round-robin to TFRecord shards, each under common.temp_path, renamed at close.

  The temporaries (`dir/.NAME.tmp-<pid>`) match no glob on the output names (`NAME*`), so a
  killed run never leaves a partial file that training would pick up.
  """

  def __init__(self, paths, shuffle_buffer, seed):
    self.paths = list(paths)
    self.tmp_paths = [common.temp_path(p) for p in self.paths]
    for path in self.paths:
      parent = os.path.dirname(path)
      if parent and not tf.io.gfile.exists(parent):
        tf.io.gfile.makedirs(parent)
    self._writers = [tf.io.TFRecordWriter(p) for p in self.tmp_paths]
    self._next = 0
    self._buffer = []
    self._buffer_size = shuffle_buffer
    self._rng = random.Random(seed)
    self.written = 0

  def _write(self, record):
    self._writers[self._next].write(record)
    self._next = (self._next + 1) % len(self._writers)
    self.written += 1

  def add(self, record):
    """Adds one serialized example (through the shuffle buffer)."""
    if self._buffer_size <= 0:
      self._write(record)
    elif len(self._buffer) < self._buffer_size:
      self._buffer.append(record)
    else:
      j = self._rng.randrange(self._buffer_size)
      self._write(self._buffer[j])
      self._buffer[j] = record

  def add_blob(self, blob, lengths):
    """Adds the serialized examples concatenated in `blob` (sizes in `lengths`), in order."""
    offset = 0
    if self._buffer_size <= 0:
      for length in lengths:
        self._write(blob[offset:offset + length])
        offset += length
      return
    buf, size, randrange = self._buffer, self._buffer_size, self._rng.randrange
    for length in lengths:
      record = blob[offset:offset + length]
      offset += length
      if len(buf) < size:
        buf.append(record)
      else:
        j = randrange(size)
        self._write(buf[j])
        buf[j] = record

  def close(self):
    """Flushes the buffer, closes the shards and renames them to their final names."""
    self._rng.shuffle(self._buffer)
    for record in self._buffer:
      self._write(record)
    self._buffer = []
    for writer in self._writers:
      writer.close()
    for tmp, path in zip(self.tmp_paths, self.paths):
      tf.io.gfile.rename(tmp, path, overwrite=True)

  def abort(self):
    """Closes and deletes the temporary shards (nothing that looks finished is left)."""
    for writer in self._writers:
      try:
        writer.close()
      except Exception:  # pylint: disable=broad-except
        pass
    for tmp in self.tmp_paths:
      if tf.io.gfile.exists(tmp):
        tf.io.gfile.remove(tmp)


class Stopped(Exception):
  """Raised when a stop was requested (SIGINT / SIGTERM): the temporaries are removed."""


def remove_stale_outputs(output_names, output_files, summary_file, log_fn=None):
  """Removes what killed earlier runs left beside the outputs: temporaries and an old summary.

  Temporaries of dead writers (common.remove_stale_temps, also those of shards written with
  another --num_output_shards and the visible `NAME.tmp-<pid>` names of older versions, which
  `NAME*` globs matched) and the summary under its old name `<output>.summary.json`, which
  `--input_file=<output>*` fed to training.

  Args:
    output_names: the --output_file names (before sharding).
    output_files: the files about to be written.
    summary_file: the summary about to be written.
    log_fn: function(str) for what was removed.

  Returns:
    The list of removed paths.
  """
  log_fn = log_fn or logging.info
  removed = []
  for path in list(output_files) + [summary_file]:
    removed += common.remove_stale_temps(path)
  for name in output_names:
    directory, base = os.path.split(name)
    shard_temp = re.compile(r"\.?%s-\d{5}-of-\d{5}%s(\d+)$" % (re.escape(base),
                                                            re.escape(common.TEMP_INFIX)))
    if tf.io.gfile.isdir(directory or "."):
      for entry in tf.io.gfile.listdir(directory or "."):
        match = shard_temp.match(entry.rstrip("/"))
        if match and not common.pid_alive(int(match.group(1))):
          path = os.path.join(directory, entry.rstrip("/"))
          tf.io.gfile.remove(path)
          removed.append(path)
  legacy = output_names[0] + SUMMARY_SUFFIX
  if tf.io.gfile.exists(legacy) and not tf.io.gfile.isdir(legacy) and (
      non_text_kind(legacy) or "").startswith("a summary"):
    tf.io.gfile.remove(legacy)
    removed.append(legacy)
  for path in removed:
    log_fn("removed %s (left by an earlier run)" % path)
  return removed


def create_pretraining_data(input_files, output_files, tokenizer, settings, num_workers=1,
                            chunk_mb=0.25, nsp_buffer_docs=1000, shuffle_buffer=10000,
                            log_fn=None, summary_path=None, extra_settings=None,
                            max_bad_fraction=DEFAULT_MAX_BAD_FRACTION,
                            max_line_chars=DEFAULT_MAX_LINE_CHARS, stop_signals=None,
                            _fail_after_chunks=None):
  """Streams input_files into pre-training TFRecords.

  Args:
    input_files: list of text files (one sentence per line, blank line between documents).
    output_files: list of output TFRecord paths (written round-robin).
    tokenizer: tokenization.FullTokenizer.
    settings: Settings.
    num_workers: int, worker processes (1 = in this process). The output does not depend on it.
    chunk_mb: float, target MB of text per chunk.
    nsp_buffer_docs: int, maximum documents per chunk (the NSP negative pool).
    shuffle_buffer: int, examples in the output shuffle buffer.
    log_fn: function(str) for progress lines (default: tf logging).
    summary_path: where to write the JSON summary (None: not written).
    extra_settings: dict of more settings to record in the summary (vocab file, ...).
    max_bad_fraction: float, the largest share of undecodable bytes of an input file.
    max_line_chars: int, longer lines are cut into pieces (see TextReader).
    stop_signals: common.StopSignals (or None): when it reports a signal, the run stops after
      the current chunk, removes its temporaries and raises Stopped.
    _fail_after_chunks: for tests: raise after this many chunks were written.

  Returns:
    The summary dict.
  """
  start = time.time()
  total_bytes = sum(tf.io.gfile.stat(p).length for p in input_files)
  meter = common.ProgressMeter(total_bytes / 1e6, unit="MB", log_fn=log_fn)
  meter.update(0.0)
  stats = collections.Counter()
  reader = TextReader(max_line_chars, max_bad_fraction)
  should_stop = (lambda: stop_signals.stopped) if stop_signals is not None else (lambda: False)
  # Bytes of the files on disk read when each chunk in flight was cut, for the progress lines.
  chunk_positions = collections.deque()

  def numbered_chunks():
    for chunk_index, raw in enumerate(iter_chunks(input_files, max(1, int(chunk_mb * 1e6)),
                                                  max(1, nsp_buffer_docs), reader)):
      chunk_positions.append(reader.disk_bytes_done)
      yield chunk_index, raw

  chunks = numbered_chunks()
  writer = ShardWriter(output_files, shuffle_buffer, settings.random_seed)
  pool = None
  frozen = False
  try:
    if num_workers <= 1:
      # In this process: the stop is polled inside a chunk too (a chunk may take seconds).
      _init_worker(tokenizer, settings, should_stop)
      results = (_process_chunk(c) for c in chunks)
    else:
      # Objects that exist before the fork are never collected in the workers: keep the workers'
      # garbage collector from touching (and so copying) their pages.
      gc.freeze()
      frozen = True
      # Forked: the workers inherit the loaded tokenizer; they only run numpy/Python code.
      pool = OrderedPool(num_workers, _process_chunk, _init_pool_worker, (tokenizer, settings))
      results = pool.imap(chunks, 2 * num_workers, should_stop)
    for chunk_count, (_, blob, lengths, chunk_stats) in enumerate(results):
      if _fail_after_chunks is not None and chunk_count >= _fail_after_chunks:
        raise RuntimeError("simulated failure after %d chunks" % chunk_count)
      writer.add_blob(blob, lengths)
      stats.update(chunk_stats)
      meter.update(chunk_positions.popleft() / 1e6, extra="read, %d instances (%d written)" % (
          stats["instances"], writer.written))
      if should_stop():
        raise Stopped()
    if should_stop():
      raise Stopped()
    writer.close()
  except BaseException:
    writer.abort()
    raise
  finally:
    if pool is not None:
      pool.close()
    if frozen:
      gc.unfreeze()
  elapsed = time.time() - start
  meter.update(total_bytes / 1e6, extra="read, %d instances written" % writer.written,
               force=True)
  for key in ("undecodable_bytes", "lines_with_undecodable_bytes", "long_lines_split",
              "long_line_pieces"):
    stats[key] = reader.stats[key]
  summary = {k: int(stats[k]) for k in _SUMMARY_INT_KEYS}
  summary.update({
      "masked_fraction": (stats["masked_tokens"] / stats["non_special_tokens"]
                          if stats["non_special_tokens"] else 0.0),
      "masked_kind_fractions": {
          k: (stats["masked_as_" + k] / stats["masked_tokens"] if stats["masked_tokens"] else 0.0)
          for k in ("mask", "random", "kept")},
      "nsp_random_fraction": (stats["random_next"] / stats["instances"]
                              if stats["instances"] else 0.0),
      "elapsed_s": round(elapsed, 3),
      "mb_per_s": round(total_bytes / 1e6 / elapsed, 3) if elapsed > 0 else 0.0,
      "input_files": list(input_files),
      "output_files": list(output_files),
      "settings": dict(settings._asdict(), num_workers=num_workers, chunk_mb=chunk_mb,
                       nsp_buffer_docs=nsp_buffer_docs, shuffle_buffer=shuffle_buffer,
                       max_bad_fraction=max_bad_fraction, max_line_chars=max_line_chars,
                       **(extra_settings or {})),
  })
  if summary_path:
    common.write_json_atomic(summary_path, summary)
  return summary


def read_examples(paths):
  """Reads pre-training TFRecords back (for tests and inspection).

  Args:
    paths: a path, glob or list of paths.

  Returns:
    List of dicts feature name -> numpy array (int64 or float32), in file order.
  """
  if isinstance(paths, str):
    paths = sorted(tf.io.gfile.glob(paths))
  out = []
  for path in paths:
    for record in tf.data.TFRecordDataset(path):
      example = tf.train.Example.FromString(record.numpy())
      features = {}
      for name, feature in example.features.feature.items():
        if feature.HasField("float_list"):
          features[name] = np.array(feature.float_list.value, np.float32)
        else:
          features[name] = np.array(feature.int64_list.value, np.int64)
      out.append(features)
  return out


def make_tokenizer(vocab_file, do_lower_case, spm_model_file=None, vocab_size=None,
                   config_name="bert_config"):
  """The checked tokenizer, with its word cache bounded to TOKENIZER_CACHE_SIZE (flat memory).

  tokenization.checked_tokenizer refuses (one line) a --do_lower_case that contradicts the
  vocab (e.g. False with an uncased vocab: capitalised words become [UNK]) and a vocab that
  lists a token twice.

  Args:
    vocab_file: WordPiece vocab (unused with spm_model_file).
    do_lower_case: bool.
    spm_model_file: SentencePiece model or None.
    vocab_size: the model config's vocab_size: no id may reach it (None: not checked).
    config_name: the config file that gave vocab_size, for the message.

  Returns:
    A tokenization.FullTokenizer.
  """
  tokenizer = tokenization.checked_tokenizer(vocab_file, do_lower_case,
                                             spm_model_file=spm_model_file,
                                             vocab_size=vocab_size, config_name=config_name)
  # checked_tokenizer takes no cache size: each worker's cache would hold up to 500k words.
  if getattr(tokenizer, "_cache_size", 0) > TOKENIZER_CACHE_SIZE:
    tokenizer._cache_size = TOKENIZER_CACHE_SIZE  # pylint: disable=protected-access
  return tokenizer


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
  validate_input_flags()


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
  output_files = output_paths(FLAGS.output_file, FLAGS.num_output_shards)
  summary_file = summary_path_for(FLAGS.output_file)
  # Before anything is written: no output may replace an input (corpus, vocab) or be read
  # back as text by a rerun, and no input may be an earlier output of ours.
  check_outputs_not_inputs(output_files + [summary_file], FLAGS.input_file, input_files,
                           [FLAGS.vocab_file, FLAGS.spm_model_file])
  check_text_inputs(input_files)
  try:
    tokenizer = make_tokenizer(FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.spm_model_file,
                               vocab_size=config.vocab_size if config else None,
                               config_name="--bert_config_file=%s" % FLAGS.bert_config_file)
  except (UnicodeDecodeError, ValueError, KeyError, IndexError) as e:
    if isinstance(e, common.UsageError):
      raise
    common.fail("--vocab_file=%s: cannot be read as a vocabulary (%s)" % (FLAGS.vocab_file, e))
  settings = Settings(
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
  remove_stale_outputs(output_names, output_files, summary_file, log_fn=logging.info)
  # SIGINT / SIGTERM: stop after the current chunk, remove the temporaries, exit 130 / 143.
  common.STOP_SIGNALS.install()
  try:
    summary = create_pretraining_data(
        input_files, output_files, tokenizer, settings, num_workers=num_workers,
        chunk_mb=FLAGS.chunk_mb, nsp_buffer_docs=FLAGS.nsp_buffer_docs,
        shuffle_buffer=FLAGS.shuffle_buffer, summary_path=summary_file, log_fn=logging.info,
        extra_settings={"vocab_file": FLAGS.vocab_file, "spm_model_file": FLAGS.spm_model_file,
                        "do_lower_case": FLAGS.do_lower_case,
                        "bert_config_file": FLAGS.bert_config_file},
        max_bad_fraction=FLAGS.max_bad_fraction, max_line_chars=FLAGS.max_line_chars,
        stop_signals=common.STOP_SIGNALS)
  except Stopped:
    common.STOP_SIGNALS.exit_if_stopped(
        "stopped before the end; nothing was written and the temporary files were removed "
        "(rerun the same command to start again)")
    raise
  except WorkerDied as e:
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
  app.run(lambda argv: common.run_main(main, argv))
