# coding=utf-8
"""The streaming pre-training data pipeline of create_pretraining_data.py (its module docstring
says what the pipeline guarantees and how it differs from the official script).

create_pretraining_data() streams text files in chunks of whole documents (iter_chunks) through
a pool of worker processes (realformer_tf/ordered_pool.py) that turn each chunk into serialized
tf.train.Examples (ChunkProcessor: the official instance recipe, document_pairs, over token ids;
numpy masking, mlm_masking; the protobuf bytes assembled directly, ExampleSerializer), and writes
them in chunk order through a shuffle buffer to TFRecord shards under temporary names
(ShardWriter). Settings are the recipe's settings; Stopped is raised on a requested stop;
remove_stale_outputs clears what killed runs left; read_examples reads the records back;
make_tokenizer is the checked tokenizer with a bounded word cache that every data tool uses
(etc_model's too).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import gc
import json
import os
import random
import re
import signal
import time

from absl import logging
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import mlm_masking
from realformer_tf import ordered_pool
from realformer_tf import text_input
import tokenization

# The features of every example written (the official ones, ExampleSerializer's order).
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")

# Whitespace tokens cached per worker by the tokenizer: the cache is cleared when full, so this
# bounds its memory (a few MB per worker) while Zipf's law keeps the hit rate high.
TOKENIZER_CACHE_SIZE = 1 << 15

# A requested stop: the pool and the pipeline raise the same exception.
Stopped = ordered_pool.Stopped

# A document is split when a chunk holds this many times --chunk_mb without a document end.
_HARD_CHUNK_FACTOR = 16

_SUMMARY_INT_KEYS = ("documents", "empty_documents_skipped", "one_sentence_documents", "lines",
                     "lines_with_undecodable_bytes", "undecodable_bytes", "long_lines_split",
                     "long_line_pieces", "input_tokens", "instances", "tokens",
                     "non_special_tokens", "masked_tokens", "masked_as_mask", "masked_as_random",
                     "masked_as_kept", "random_next", "input_bytes")


# ---------------------------------------------------------------------------------------------
# Instance creation: the official recipe, shared by the id pipeline and the official API
# (create_pretraining_data.create_instances_from_document).
# ---------------------------------------------------------------------------------------------


def document_pairs(all_bounds, document_index, max_seq_length, short_seq_prob, uniform, randint):
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

  The official recipe (document_pairs) with documents given as segment boundaries into one flat
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
  for a_first, a_end, b_document, b_first, b_end, is_random_next in document_pairs(
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
    reader: text_input.TextReader (the input policy: gzip, undecodable share, over-long lines),
      or None for one with the default limits.

  Yields:
    bytes, whole lines of text, each ending in "\n" (a file's end is marked by a blank line).
  """
  reader = reader or text_input.TextReader()
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
  legacy = output_names[0] + text_input.SUMMARY_SUFFIX
  if tf.io.gfile.exists(legacy) and not tf.io.gfile.isdir(legacy) and (
      text_input.non_text_kind(legacy) or "").startswith("a summary"):
    tf.io.gfile.remove(legacy)
    removed.append(legacy)
  for path in removed:
    log_fn("removed %s (left by an earlier run)" % path)
  return removed


def create_pretraining_data(input_files, output_files, tokenizer, settings, num_workers=1,
                            chunk_mb=0.25, nsp_buffer_docs=1000, shuffle_buffer=10000,
                            log_fn=None, summary_path=None, extra_settings=None,
                            max_bad_fraction=text_input.DEFAULT_MAX_BAD_FRACTION,
                            max_line_chars=text_input.DEFAULT_MAX_LINE_CHARS,
                            stop_signals=None, _fail_after_chunks=None):
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
    max_line_chars: int, longer lines are cut into pieces (see text_input.TextReader).
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
  reader = text_input.TextReader(max_line_chars, max_bad_fraction)
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
      pool = ordered_pool.OrderedPool(num_workers, _process_chunk, _init_pool_worker,
                                      (tokenizer, settings))
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
      # The ids' range: run_pretraining checks a new model's vocab_size against it.
      "vocab_size": len(tokenizer.vocab),
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


_SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


def data_summary(tfrecord_path):
  """The summary create_pretraining_data.py wrote beside a TFRecord file (a shard too).

  Args:
    tfrecord_path: one input file of the training command.

  Returns:
    The summary dict, or None when there is none (data made by another tool).
  """
  candidates = [tfrecord_path]
  unsharded = _SHARD_SUFFIX.sub("", tfrecord_path)
  if unsharded != tfrecord_path:
    candidates.insert(0, unsharded)
  for candidate in candidates:
    path = text_input.summary_path_for(candidate)
    if tf.io.gfile.exists(path):
      try:
        with tf.io.gfile.GFile(path) as f:
          summary = json.load(f)
      except (ValueError, tf.errors.OpError):
        return None
      return summary if isinstance(summary, dict) else None
  return None
