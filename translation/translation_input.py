# coding=utf-8
"""Input pipeline of the translation model: TFRecords of create_translation_data.py -> batches.

Each record holds `source_ids` (pieces + eos) and `target_ids` (pieces + eos), int64, of any
length. input_fn_builder(...) returns an Estimator-style `input_fn(params)` whose dataset yields

  {"source_ids":       int32 [batch, src_len]   pieces + eos, 0-padded on the right
   "target_input_ids": int32 [batch, tgt_len]   bos (2) + pieces, 0-padded (decoder input)
   "target_ids":       int32 [batch, tgt_len]   pieces + eos, 0-padded (decoder target)}

(plus "example_index": int32 [batch], the record's 0-based position in the input files in
order, with with_example_index=True; -1 for the padding examples of the fixed-shape eval).

Two batching modes:
- Token budget (default; GPU / CPU): examples are grouped into buckets of similar length
  (max(source length, target length); bucket upper bounds grow by `length_bucket_step`, as in
  tensor2tensor) and each bucket's batch size is max_tokens // (its longest length), so every
  batch has batch_size * max(src_len, tgt_len) <= max_tokens. Batches are padded to their own
  longest example.
- Fixed shape (TPU: use_tpu=True or params["use_tpu"]): every tensor is padded to max_length and
  every batch has params["batch_size"] rows (TPUEstimator sets it; else batch_size, else
  max_tokens // max_length); a last partial batch is dropped in training. In evaluation it is
  completed with all-padding examples (source, target all 0: no loss weight where the model
  masks target 0) instead, so that nothing is dropped.

Training reads the files in order, shuffles examples with a buffer seeded by `seed` (the same
seed gives the same batches), repeats forever and skips examples longer than max_length.
Evaluation is one pass over the files in order, dropping nothing: a record longer than max_length
is an error (InvalidArgumentError naming the limit) instead of a silently lost sentence.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import tensorflow as tf

from realformer_tf import common

tf1 = tf.compat.v1

# The ids of docs/translation.md.
PAD_ID = 0
BOS_ID = 2
EOS_ID = 3

FEATURE_NAMES = ("source_ids", "target_input_ids", "target_ids")
_RECORD_FEATURES = {"source_ids": tf.io.VarLenFeature(tf.int64),
                    "target_ids": tf.io.VarLenFeature(tf.int64)}


def parse_translation_record(record):
  """Parses one serialized example into the model's (unpadded) features.

  Args:
    record: scalar string Tensor (a create_translation_data.py record).

  Returns:
    dict with int32 vectors "source_ids" [src_len], "target_input_ids" [tgt_len] (bos + the
    target's pieces) and "target_ids" [tgt_len].
  """
  parsed = tf.io.parse_single_example(record, _RECORD_FEATURES)
  source = tf.cast(tf.sparse.to_dense(parsed["source_ids"]), tf.int32)
  target = tf.cast(tf.sparse.to_dense(parsed["target_ids"]), tf.int32)
  # target = pieces + eos, so bos + pieces is bos + target[:-1]: both have the same length.
  target_input = tf.concat([tf.constant([BOS_ID], tf.int32), target[:-1]], axis=0)
  return {"source_ids": source, "target_input_ids": target_input, "target_ids": target}


def example_length(features):
  """max(source length, target length) of one unbatched example: an int32 scalar Tensor."""
  return tf.maximum(tf.shape(features["source_ids"])[0], tf.shape(features["target_ids"])[0])


def default_bucket_boundaries(max_length, min_length=8, length_bucket_step=1.1):
  """Exclusive upper length bounds of the buckets, the last one max_length + 1.

  Bounds grow geometrically by length_bucket_step (at least by 1) from min_length, as in
  tensor2tensor's data_reader, so that padding wastes at most about 10% of a batch.

  Args:
    max_length: the longest example (in ids).
    min_length: the first bound (examples shorter than it share the first bucket).
    length_bucket_step: float > 1.

  Returns:
    Strictly increasing list of ints ending with max_length + 1.
  """
  if length_bucket_step <= 1.0:
    raise ValueError("length_bucket_step must be > 1, got %r" % length_bucket_step)
  bounds = []
  x = max(2, int(min_length))
  while x <= max_length:
    bounds.append(x)
    x = max(x + 1, int(x * length_bucket_step))
  bounds.append(max_length + 1)
  return bounds


def bucket_batch_sizes(boundaries, max_tokens):
  """Batch size of each bucket: max_tokens // (longest length in it).

  Args:
    boundaries: exclusive upper bounds (default_bucket_boundaries); bucket i holds lengths
      [boundaries[i-1], boundaries[i]), and one more bucket holds lengths >= boundaries[-1].
    max_tokens: the token budget of a batch.

  Returns:
    List of len(boundaries) + 1 ints >= 1 (the last bucket, beyond max_length, gets 1: it is
    never filled, see input_fn_builder).
  """
  return [max(1, max_tokens // (bound - 1)) for bound in boundaries] + [1]


def _checked_boundaries(boundaries, max_length):
  """Explicit bucket bounds, made to end at max_length + 1."""
  bounds = sorted(set(int(b) for b in boundaries if 2 <= int(b) <= max_length))
  return bounds + [max_length + 1]


def _fixed_batch_size(params, batch_size, max_tokens, max_length):
  size = params.get("batch_size") or batch_size or max_tokens // max_length
  if size < 1:
    common.fail("--max_tokens=%d: smaller than --max_length=%d (no example fits a batch)" %
                (max_tokens, max_length))
  return int(size)


def _padding_example(max_length, with_index):
  """An all-padding example (its target is all pad: no loss weight)."""
  zeros = tf.zeros([max_length], tf.int32)
  example = {name: zeros for name in FEATURE_NAMES}
  if with_index:
    example["example_index"] = tf.constant(-1, tf.int32)
  return example


def input_fn_builder(input_files, max_tokens, max_length, is_training, seed=12345,
                     bucket_boundaries=None, length_bucket_step=1.1, min_bucket_length=8,
                     shuffle_buffer=10000, use_tpu=False, batch_size=None, skip_batches=0,
                     with_example_index=False, num_parallel_calls=tf.data.AUTOTUNE):
  """Builds the translation input_fn (see the module docstring for the batches it yields).

  Args:
    input_files: list of TFRecord paths (create_translation_data.py), read in this order.
    max_tokens: token budget of a batch: batch_size * max(src_len, tgt_len) <= max_tokens
      (token-budget mode); in fixed-shape mode the default batch size is
      max_tokens // max_length.
    max_length: the longest source / target (ids); training skips longer examples, evaluation
      fails on them; the fixed-shape mode pads to it.
    is_training: repeat and shuffle (seeded) instead of one pass in file order.
    seed: the shuffle seed (training).
    bucket_boundaries: explicit exclusive upper bounds of the length buckets (None:
      default_bucket_boundaries(max_length, min_bucket_length, length_bucket_step)); bounds
      above max_length are dropped and max_length + 1 is added.
    length_bucket_step: growth of the default bucket bounds.
    min_bucket_length: the first default bucket bound.
    shuffle_buffer: examples in the training shuffle buffer.
    use_tpu: fixed shapes (also when params["use_tpu"] is true, as TPUEstimator sets it).
    batch_size: fixed-shape batch size when params has no "batch_size".
    skip_batches: batches to skip at the start (a resumed training job, see
      estimator_utils.resume_skip_batches); the order is deterministic, so the skipped batches
      are the ones already trained on.
    with_example_index: add the int32 feature "example_index" [batch].
    num_parallel_calls: parallel record parsing (the order stays deterministic).

  Returns:
    input_fn(params) -> tf.data.Dataset of feature dicts.
  """
  input_files = list(input_files)
  if not input_files:
    common.fail("--input_file: no translation TFRecord files")
  if max_length < 2:
    common.fail("--max_length=%d: must be >= 2" % max_length)
  if bucket_boundaries:
    boundaries = _checked_boundaries(bucket_boundaries, max_length)
  else:
    boundaries = default_bucket_boundaries(max_length, min_bucket_length, length_bucket_step)

  def input_fn(params):
    """The dataset (params: "use_tpu" and "batch_size" are read when present)."""
    params = params or {}
    fixed = bool(use_tpu or params.get("use_tpu"))
    if not fixed and max_tokens < max_length:
      common.fail("--max_tokens=%d: smaller than --max_length=%d (the longest examples would "
                  "not fit a batch)" % (max_tokens, max_length))
    d = tf.data.TFRecordDataset(input_files)
    if with_example_index:
      d = d.enumerate().map(lambda i, record: (tf.cast(i, tf.int32), record))
    else:
      d = d.map(lambda record: (tf.constant(0, tf.int32), record))
    if is_training:
      d = d.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()

    def parse(index, record):
      features = parse_translation_record(record)
      if with_example_index:
        features["example_index"] = index
      return features

    d = d.map(parse, num_parallel_calls=num_parallel_calls)
    if is_training:
      d = _skip_over_long(d, max_length)
    else:
      d = d.map(lambda f: _assert_within(f, max_length))

    if fixed:
      size = _fixed_batch_size(params, batch_size, max_tokens, max_length)
      shapes = {name: [max_length] for name in FEATURE_NAMES}
      if with_example_index:
        shapes["example_index"] = []
      if not is_training:
        # Padding examples complete the last batch, so drop_remainder drops only padding.
        pad = tf.data.Dataset.from_tensors(_padding_example(max_length, with_example_index))
        d = d.map(lambda f: _pad_to(f, max_length)).concatenate(pad.repeat(size - 1))
      d = d.padded_batch(size, padded_shapes=shapes, drop_remainder=True)
    else:
      d = _token_budget_batches(d, boundaries, max_tokens)
    if is_training and skip_batches:
      d = d.skip(skip_batches)
    return d.prefetch(tf.data.AUTOTUNE)

  return input_fn


def _skip_over_long(dataset, max_length):
  """Training's filter: the examples whose source or target is longer than max_length go."""
  return dataset.filter(lambda f: example_length(f) <= max_length)


def _token_budget_batches(dataset, boundaries, max_tokens):
  """Length-bucketed batches of at most max_tokens (batch * longest length) tokens each."""
  return dataset.bucket_by_sequence_length(
      element_length_func=example_length,
      bucket_boundaries=boundaries,
      bucket_batch_sizes=bucket_batch_sizes(boundaries, max_tokens),
      drop_remainder=False)


def count_epoch_batches(input_files, max_tokens, max_length, min_bucket_length=8,
                        length_bucket_step=1.1):
  """Batches in one pass over input_files as training batches them (what an epoch is).

  Training skips the examples longer than max_length and buckets the rest with the token budget
  (input_fn_builder's defaults for the bucket bounds); this counts one such pass in file order.

  Args:
    input_files: list of TFRecord paths (create_translation_data.py).
    max_tokens: token budget of a batch.
    max_length: the longest source / target (ids) trained on.
    min_bucket_length, length_bucket_step: as in input_fn_builder.

  Returns:
    int, the number of batches.
  """
  boundaries = default_bucket_boundaries(max_length, min_bucket_length, length_bucket_step)
  with tf.Graph().as_default():
    dataset = tf.data.TFRecordDataset(list(input_files)).map(parse_translation_record)
    dataset = _skip_over_long(dataset, max_length)
    count = _token_budget_batches(dataset, boundaries, max_tokens).reduce(
        tf.constant(0, tf.int64), lambda n, _: n + 1)
    with tf.compat.v1.Session() as session:
      return int(session.run(count))


def _assert_within(features, max_length):
  """The example unchanged, or an InvalidArgumentError when it is longer than max_length."""
  check = tf.debugging.assert_less_equal(
      example_length(features), max_length,
      message="a translation record is longer than --max_length=%d ids (evaluation drops "
              "nothing; raise --max_length or rewrite the data)" % max_length)
  with tf.control_dependencies([check]):
    return {name: tf.identity(t) for name, t in features.items()}


def _pad_to(features, max_length):
  """Pads the id vectors of one example to [max_length] (for concatenation with padding)."""
  out = dict(features)
  for name in FEATURE_NAMES:
    t = features[name]
    out[name] = tf.pad(t, [[0, max_length - tf.shape(t)[0]]])
    out[name].set_shape([max_length])
  return out


def check_translation_tfrecords(input_files, vocab_size=None, max_length=None, max_records=1000,
                                flag_name="input_file"):
  """Fails before training when the first records of a file do not fit the model.

  Checks the first max_records records of each file: both features present and non-empty,
  ending with eos, every id in [1, vocab_size) (0 is padding, never inside a sequence) and,
  with max_length, no longer than it.

  Args:
    input_files: list of TFRecord paths.
    vocab_size: the model's vocabulary size (None: ids are not range-checked).
    max_length: the longest allowed sequence (None: not checked).
    max_records: records checked per file.
    flag_name: the flag naming the files, for messages.

  Returns:
    dict with "records_checked", "max_source_length", "max_target_length", "max_id".
  """
  stats = {"records_checked": 0, "max_source_length": 0, "max_target_length": 0, "max_id": 0}
  for path in input_files:
    common.require_file(path, flag_name)
    try:
      records = list(_first_records(path, max_records))
    except tf.errors.OpError as e:
      common.fail("--%s: %s is not a readable TFRecord file (%s)" %
                  (flag_name, path, e.message.splitlines()[0]))
    if not records:
      common.fail("--%s: %s has no records" % (flag_name, path))
    for number, record in enumerate(records):
      example = tf.train.Example.FromString(record).features.feature
      where = "--%s: %s record %d" % (flag_name, path, number)
      for name in ("source_ids", "target_ids"):
        if name not in example or example[name].WhichOneof("kind") != "int64_list":
          common.fail("%s has no int64 feature '%s' (not written by "
                      "create_translation_data.py?)" % (where, name))
        ids = list(example[name].int64_list.value)
        if not ids or ids[-1] != EOS_ID:
          common.fail("%s: %s does not end with eos (%d)" % (where, name, EOS_ID))
        low, high = min(ids), max(ids)
        if low < 1 or (vocab_size is not None and high >= vocab_size):
          common.fail("%s: %s holds id %d, outside [1, vocab_size=%s)" % (
              where, name, low if low < 1 else high, vocab_size))
        if max_length is not None and len(ids) > max_length:
          common.fail("%s: %s has %d ids, more than --max_length=%d" % (where, name, len(ids),
                                                                       max_length))
        key = "max_source_length" if name == "source_ids" else "max_target_length"
        stats[key] = max(stats[key], len(ids))
        stats["max_id"] = max(stats["max_id"], high)
      stats["records_checked"] += 1
  return stats


def _first_records(path, max_records):
  for number, record in enumerate(tf1.io.tf_record_iterator(path)):
    if number >= max_records:
      return
    yield record
