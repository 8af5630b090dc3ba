# coding=utf-8
"""The features of run_classifier's examples, their cache and their input pipelines.

The conversion of an `InputExample` into BERT's fixed-length features (`convert_example`: the
official [CLS] a [SEP] (b [SEP]) packing, on ids, with a label map for classification, floats
for regression and multi-hot lists for multi-label tasks), the windows of a long text_a
(`--long_document=window`: `document_windows`, `convert_example_to_windows`,
`resolve_doc_stride`), the official tf.train.Example of a feature and the TFRecord writers, the
feature cache (`cached_features`, over feature_cache), and the batching run_classifier's
input_fn adds to the official one: training batches of similar lengths
(`length_grouped_batches`, --group_by_length), evaluation batches sorted by length
(`length_sorted_batches`) and the training shuffle buffer (`train_shuffle_buffer`).

run_classifier's official functions (`convert_single_example`,
`file_based_convert_examples_to_features`, `file_based_input_fn_builder`) call into this
module; no flag is read here.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import os

import numpy as np
import tensorflow as tf

from realformer_tf import classifier_outputs
from realformer_tf import classifier_tasks
from realformer_tf import common
from realformer_tf import feature_cache
from realformer_tf import sliding_window
import tokenization

tf1 = tf.compat.v1


# ----------------------------------------------------------------------------------------------
# Features (the official conversion).


class InputFeatures(object):
  """A single set of features of data."""

  def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_id = label_id
    self.is_real_example = is_real_example


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Truncates a sequence pair in place to the maximum length."""
  # This is a simple heuristic which will always truncate the longer sequence one token at a
  # time. This makes more sense than truncating an equal percent of tokens from each, since if
  # one sequence is very short then each token that's truncated likely contains more
  # information than a longer sequence.
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_length:
      break
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def convert_example(ex_index, example, label_map, max_seq_length, tokenizer,
                    empty_b_is_single=False):
  """The conversion behind run_classifier.convert_single_example and its job: on ids, with a
  label map, regression and multi-label labels.

  By default (the job, and serving.pack_inputs which packs the same way) a text_b that is
  given but has no tokens (empty or white space) keeps the pair budget (max_seq_length - 3)
  and adds no second [SEP]; with empty_b_is_single (the official public function) it is a
  single sentence (max_seq_length - 2).

  Args:
    ex_index: position of the example (the first five are logged).
    example: InputExample or PaddingInputExample.
    label_map: dict label -> id, or None for regression (the label is the float).
    max_seq_length: sequence length of the features.
    tokenizer: tokenization.FullTokenizer.
    empty_b_is_single: the official treatment of a text_b without tokens.

  Returns:
    InputFeatures with input_ids/input_mask/segment_ids of length max_seq_length.
  """
  if isinstance(example, classifier_tasks.PaddingInputExample):
    return InputFeatures(
        input_ids=[0] * max_seq_length,
        input_mask=[0] * max_seq_length,
        segment_ids=[0] * max_seq_length,
        label_id=_dummy_label_id(label_map),
        is_real_example=False)

  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  ids_a = tokenizer.tokenize_to_ids(example.text_a)
  ids_b = None
  if example.text_b is not None:
    ids_b = tokenizer.tokenize_to_ids(example.text_b)
    if empty_b_is_single and not ids_b:
      ids_b = None
  if ids_b is not None:
    # Modifies `ids_a` and `ids_b` in place so that the total length is less than the
    # specified length. Account for [CLS], [SEP], [SEP] with "- 3".
    truncate_seq_pair(ids_a, ids_b, max_seq_length - 3)
  else:
    # Account for [CLS] and [SEP] with "- 2".
    if len(ids_a) > max_seq_length - 2:
      ids_a = ids_a[0:(max_seq_length - 2)]

  feature = _pack_features(cls_id, sep_id, ids_a, ids_b, max_seq_length,
                           _example_label_id(example, label_map))
  if ex_index < 5:
    _log_feature(example, feature, tokenizer)
  return feature


def _pack_features(cls_id, sep_id, ids_a, ids_b, max_seq_length, label_id):
  """[CLS] a [SEP] (b [SEP]) with its mask and segment ids, zero-padded to max_seq_length.

  Args:
    cls_id: id of [CLS].
    sep_id: id of [SEP].
    ids_a: token ids of the first text (already fitted to the length).
    ids_b: token ids of the second text, or None / [] (no second segment).
    max_seq_length: sequence length.
    label_id: the label id (int, float, or multi-hot list).

  Returns:
    InputFeatures.
  """
  # The convention in BERT is:
  # (a) For sequence pairs:
  #  tokens:   [CLS] is this jack ##son ##ville ? [SEP] no it is not . [SEP]
  #  type_ids: 0     0  0    0    0     0       0 0     1  1  1  1   1 1
  # (b) For single sequences:
  #  tokens:   [CLS] the dog is hairy . [SEP]
  #  type_ids: 0     0   0   0  0     0 0
  input_ids = [cls_id] + list(ids_a) + [sep_id]
  segment_ids = [0] * len(input_ids)
  if ids_b:
    input_ids += list(ids_b) + [sep_id]
    segment_ids += [1] * (len(ids_b) + 1)

  # The mask has 1 for real tokens and 0 for padding tokens. Only real tokens are attended to.
  input_mask = [1] * len(input_ids)
  padding = max_seq_length - len(input_ids)
  input_ids += [0] * padding
  input_mask += [0] * padding
  segment_ids += [0] * padding
  return InputFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                       label_id=label_id, is_real_example=True)


def _dummy_label_id(label_map):
  """The label id of padding and of test examples without labels (the official label 0)."""
  if label_map is None:
    return 0.0
  if isinstance(label_map, classifier_tasks.MultiLabelMap):
    return [0] * len(label_map)
  return 0


def _example_label_id(example, label_map):
  """An example's label id: class id, float (regression) or multi-hot list (MultiLabelMap)."""
  if example.label is None:
    # Test files have no labels: a dummy id, as the official code's label_list[0].
    return _dummy_label_id(label_map)
  if label_map is None:
    return float(example.label)
  if isinstance(label_map, classifier_tasks.MultiLabelMap):
    multi_hot = [0] * len(label_map)
    for label in example.label:
      if label not in label_map:
        common.fail("example %s: label %r is not one of the labels %s" %
                    (example.guid, label, ", ".join(str(x) for x in label_map)))
      multi_hot[label_map[label]] = 1
    return multi_hot
  if example.label not in label_map:
    common.fail("example %s: label %r is not one of the labels %s" %
                (example.guid, example.label, ", ".join(str(x) for x in label_map)))
  return label_map[example.label]


def _log_feature(example, feature, tokenizer):
  """Logs one converted example (the official script logs the first five)."""
  length = sum(feature.input_mask)
  tf1.logging.info("*** Example ***")
  tf1.logging.info("guid: %s", example.guid)
  tf1.logging.info("tokens: %s", " ".join(
      tokenization.printable_text(t)
      for t in tokenizer.convert_ids_to_tokens(feature.input_ids[:length])))
  tf1.logging.info("input_ids: %s", " ".join(str(x) for x in feature.input_ids))
  tf1.logging.info("input_mask: %s", " ".join(str(x) for x in feature.input_mask))
  tf1.logging.info("segment_ids: %s", " ".join(str(x) for x in feature.segment_ids))
  tf1.logging.info("label: %s (id = %s)", example.label, feature.label_id)


# ----------------------------------------------------------------------------------------------
# Long documents: windows over text_a (--long_document=window).


def document_windows(num_tokens, window_length, doc_stride):
  """Windows of <= window_length tokens, doc_stride apart, covering a text (sliding_window).

  Args:
    num_tokens: the text's number of tokens.
    window_length: tokens per window (>= 1).
    doc_stride: tokens between window starts (>= 1; a stride beyond the window length is
      capped at it, so no token is skipped).

  Returns:
    list of sliding_window.Window(start, length); one empty window for an empty text.
  """
  return sliding_window.windows(num_tokens, window_length, doc_stride, empty_text_window=True)


def window_length_for(max_seq_length, has_text_b):
  """Tokens of text_a a window holds at most: max_seq_length - 2 ([CLS] a [SEP]), - 3 with a
  second text (whose own tokens then come off as well)."""
  return max_seq_length - (3 if has_text_b else 2)


def resolve_doc_stride(task, long_document, max_seq_length, doc_stride=None):
  """The stride of --long_document=window for the task: doc_stride, by default half a window.

  A window holds max_seq_length - 2 tokens of text_a (a pair task: - 3, less the up to
  (max_seq_length - 3) // 2 tokens of text_b every window keeps). A stride larger than that
  would skip text between windows: a one-line error, as is a length that leaves no window.

  Args:
    task: Task (its training layout says whether it has a text_b).
    long_document: --long_document ("truncate" or "window").
    max_seq_length: --max_seq_length.
    doc_stride: --doc_stride, or None (half a window).

  Returns:
    int, or None without --long_document=window.
  """
  if long_document != "window":
    return None
  layout = task.train.layout
  has_text_b = layout is not None and layout.text_b is not None
  window = window_length_for(max_seq_length, has_text_b)
  if has_text_b:
    # text_b keeps up to half the budget in every window.
    window -= (max_seq_length - 3) // 2
  if window < 1:
    common.fail("--long_document=window: --max_seq_length=%d leaves no room for a window" %
                max_seq_length)
  if doc_stride is None:
    return max(1, window // 2)
  if doc_stride > window:
    common.fail("--doc_stride=%d: larger than the window (%d tokens of text_a at "
                "--max_seq_length=%d), which would skip text between windows" %
                (doc_stride, window, max_seq_length))
  return doc_stride


def convert_example_to_windows(ex_index, example, label_map, max_seq_length, tokenizer,
                               doc_stride):
  """Converts one example into the features of its windows over text_a.

  Every window is [CLS] a-window [SEP] (b [SEP]) with the example's label; text_b (if any) is
  kept in every window, cut to at most (max_seq_length - 3) // 2 tokens. A text that fits is
  one window, the same feature the truncating conversion gives.

  Args:
    ex_index: position of the example (the first five are logged).
    example: InputExample or PaddingInputExample (one all-zero window).
    label_map: as convert_example.
    max_seq_length: sequence length of the features.
    tokenizer: tokenization.FullTokenizer.
    doc_stride: tokens between window starts.

  Returns:
    list of InputFeatures, in text order.
  """
  if isinstance(example, classifier_tasks.PaddingInputExample):
    return [convert_example(ex_index, example, label_map, max_seq_length, tokenizer)]
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  ids_a = tokenizer.tokenize_to_ids(example.text_a)
  ids_b = None
  window_length = window_length_for(max_seq_length, False)
  if example.text_b is not None:
    ids_b = tokenizer.tokenize_to_ids(example.text_b)[:(max_seq_length - 3) // 2]
    window_length = window_length_for(max_seq_length, True) - len(ids_b)
  label_id = _example_label_id(example, label_map)
  features = []
  for window in document_windows(len(ids_a), window_length, doc_stride):
    features.append(_pack_features(cls_id, sep_id,
                                   ids_a[window.start:window.start + window.length], ids_b,
                                   max_seq_length, label_id))
  if ex_index < 5:
    tf1.logging.info("%s: %d token(s) of text_a -> %d window(s)", example.guid, len(ids_a),
                     len(features))
    _log_feature(example, features[0], tokenizer)
  return features


def file_based_convert_examples_to_windows(examples, label_map, max_seq_length, tokenizer,
                                           output_file, doc_stride, pad_records_to_multiple=1):
  """Writes the windows of every example to a TFRecord (official features), atomically.

  Args:
    examples: list of InputExample / PaddingInputExample.
    label_map: as convert_example.
    max_seq_length: sequence length.
    tokenizer: tokenization.FullTokenizer.
    output_file: TFRecord path; written under a temporary name then renamed.
    doc_stride: tokens between window starts.
    pad_records_to_multiple: append padding examples (one all-zero window each) until the
      number of records is a multiple of this (TPU eval / predict batches).

  Returns:
    list of ints: the number of windows (records, in order) of each example, the padding
    examples appended included.
  """
  tmp_file = common.temp_path(output_file)
  meter = common.ProgressMeter(len(examples), unit="examples", min_interval_s=10.0)
  counts = []
  try:
    with tf.io.TFRecordWriter(tmp_file) as writer:
      for ex_index, example in enumerate(examples):
        features = convert_example_to_windows(ex_index, example, label_map, max_seq_length,
                                              tokenizer, doc_stride)
        for feature in features:
          writer.write(features_to_tf_example(feature).SerializeToString())
        counts.append(len(features))
        if ex_index % 1000 == 0:
          meter.update(ex_index)
      while sum(counts) % pad_records_to_multiple:
        feature = convert_example(len(counts), classifier_tasks.PaddingInputExample(),
                                  label_map, max_seq_length, tokenizer)
        writer.write(features_to_tf_example(feature).SerializeToString())
        counts.append(1)
    tf.io.gfile.rename(tmp_file, output_file, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_file):
      tf.io.gfile.remove(tmp_file)
  meter.update(len(examples), force=True)
  return counts


# ----------------------------------------------------------------------------------------------
# TFRecords and their cache.


def features_to_tf_example(feature):
  """Serialises InputFeatures as the official tf.train.Example."""
  def int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  def float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))

  out = collections.OrderedDict()
  out["input_ids"] = int_feature(feature.input_ids)
  out["input_mask"] = int_feature(feature.input_mask)
  out["segment_ids"] = int_feature(feature.segment_ids)
  if isinstance(feature.label_id, float):
    out["label_ids"] = float_feature([feature.label_id])
  elif isinstance(feature.label_id, (list, tuple)):
    out["label_ids"] = int_feature(feature.label_id)  # multi-hot [num_labels]
  else:
    out["label_ids"] = int_feature([feature.label_id])
  out["is_real_example"] = int_feature([int(feature.is_real_example)])
  return tf.train.Example(features=tf.train.Features(feature=out))


def write_feature_records(examples, convert, output_file):
  """Writes one feature per example to a TFRecord file (official features), atomically.

  Features: input_ids, input_mask, segment_ids [max_seq_length], label_ids [1] and
  is_real_example [1], all int64 (label_ids float for regression, [num_labels] for
  multi-label).

  Args:
    examples: list of InputExample / PaddingInputExample.
    convert: (ex_index, example) -> InputFeatures.
    output_file: TFRecord path; written under a temporary name then renamed.
  """
  tmp_file = "%s.tmp-%d" % (output_file, os.getpid())
  meter = common.ProgressMeter(len(examples), unit="examples", min_interval_s=10.0)
  try:
    with tf.io.TFRecordWriter(tmp_file) as writer:
      for ex_index, example in enumerate(examples):
        feature = convert(ex_index, example)
        writer.write(features_to_tf_example(feature).SerializeToString())
        if ex_index % 1000 == 0:
          meter.update(ex_index)
    tf.io.gfile.rename(tmp_file, output_file, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_file):
      tf.io.gfile.remove(tmp_file)
  meter.update(len(examples), force=True)


def cached_features(examples, input_file, cache_file, tokenizer, task, max_seq_length,
                    vocab_file, do_lower_case, spm_model_file, pad_to_multiple=1,
                    doc_stride=None):
  """Returns the TFRecord of `examples`' features, reusing `cache_file` when its key matches.

  Args:
    examples: list of InputExample (already read from input_file).
    input_file: the file they were read from, or None when a DataProcessor gave them.
    cache_file: TFRecord path in output_dir.
    tokenizer: tokenization.FullTokenizer.
    task: Task.
    max_seq_length: sequence length.
    vocab_file: vocab path (key).
    do_lower_case: tokenizer setting (key).
    spm_model_file: SentencePiece model path or None (key).
    pad_to_multiple: pad the examples with PaddingInputExample to a multiple of this (with
      windows: the records).
    doc_stride: --long_document=window: write every example's windows this far apart
      (file_based_convert_examples_to_windows); None: one truncated feature per example.

  Returns:
    feature_cache.cached_features's dict (file, num_examples, num_padded, reused, num_records,
    windows).
  """
  def write_features(padded, output_file):
    label_map = task.label_map
    if doc_stride is None:
      # The job's conversion with the task's label map (convert_example).
      write_feature_records(
          padded, lambda ex_index, example: convert_example(ex_index, example, label_map,
                                                            max_seq_length, tokenizer),
          output_file)
      return None
    # On TPU the windows (the records) are padded to a multiple of the batch size.
    return file_based_convert_examples_to_windows(padded, label_map, max_seq_length,
                                                  tokenizer, output_file, doc_stride,
                                                  pad_records_to_multiple=pad_to_multiple)

  return feature_cache.cached_features(
      examples, input_file, cache_file, write_features, task, max_seq_length, vocab_file,
      do_lower_case, spm_model_file, pad_to_multiple=pad_to_multiple, doc_stride=doc_stride)


# ----------------------------------------------------------------------------------------------
# Input pipelines: the shuffle buffer, batches of similar lengths.


def train_shuffle_buffer(train_cache):
  """The training shuffle buffer: the official 100 records, or with windows 100 examples'
  worth of them (a document's windows are consecutive in the file; a 100-record buffer would
  fill batches with the windows of a few documents, all of one label)."""
  if not train_cache["windows"]:
    return 100
  return max(100, int(np.ceil(100.0 * train_cache["num_records"] /
                              max(1, train_cache["num_examples"]))))


# --group_by_length: examples are sorted by length within windows of this many batches.
GROUP_WINDOW_BATCHES = 50


def length_grouped_batches(records, decode_fn, batch_size, seed, skip_batches=0,
                           window_batches=GROUP_WINDOW_BATCHES, mask_name="input_mask"):
  """Batches of examples of similar length (--group_by_length), seeded and resumable.

  The (shuffled, repeated) record stream is cut into windows of window_batches * batch_size
  examples; each window is sorted by length (stable) and cut into window_batches batches, which
  are put in an order drawn from (seed, the window's index) with a stateless random op. The
  stream is thus a pure function of the records and the seed: skipping k batches (a resumed
  job) skips k // window_batches windows of records before decoding them, then k %
  window_batches batches, and continues exactly as the uninterrupted stream.

  Args:
    records: tf.data.Dataset of serialized examples, infinite (repeated, shuffled).
    decode_fn: serialized example -> dict of fixed-shape Tensors.
    batch_size: examples per batch.
    seed: int, the batch order's seed.
    skip_batches: batches to skip (resume).
    window_batches: batches per sorted window.
    mask_name: the [seq_length] 0/1 feature whose sum is an example's length.

  Returns:
    tf.data.Dataset of feature dicts [batch_size, ...] (a static batch dimension).
  """
  window = window_batches * batch_size
  skip_windows, skip_rest = divmod(int(skip_batches), window_batches)
  if skip_windows:
    records = records.skip(skip_windows * window)
  d = records.map(decode_fn).batch(window, drop_remainder=True).enumerate(start=skip_windows)
  seed = tf.constant(0 if seed is None else seed, tf.int64)

  def window_to_batches(index, examples):
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(examples[mask_name], 0), tf.int32), axis=1)
    order = tf.argsort(lengths, stable=True)
    draw = tf.random.stateless_uniform([window_batches], seed=tf.stack([seed, index]))
    batch_order = tf.argsort(draw, stable=True)
    batches = {}
    for name, value in examples.items():
      value = tf.gather(value, order)
      value = tf.reshape(value, [window_batches, batch_size] + value.shape[1:].as_list())
      batches[name] = tf.gather(value, batch_order)
    return tf.data.Dataset.from_tensor_slices(batches)

  d = d.flat_map(window_to_batches)
  return d.skip(skip_rest) if skip_rest else d


# Evaluation / prediction with --padding=longest or bucket: examples are sorted by length within
# windows of this many batches (length_sorted_batches); the outputs are put back in file order.
SORT_WINDOW_BATCHES = 128


def length_sorted_batches(examples, batch_size, window_batches=SORT_WINDOW_BATCHES,
                          mask_name="input_mask", index_name=classifier_outputs.EXAMPLE_INDEX):
  """Evaluation / prediction batches of examples of similar length, each with its file index.

  The stream is cut into windows of window_batches * batch_size examples (the last may be
  shorter); each window is sorted by length (stable, shortest first) and cut into batches, so
  a batch padded to its longest example (--padding=longest) holds little padding. The number of
  batches is that of the file's order (only the last may be partial); every example gets
  index_name (int32, its 0-based position in the stream), which model_fn passes on to the
  predictions and classifier_outputs.in_file_order uses to restore the file's order. Whole
  windows are indexed, sorted and sliced (no per-example tf.data step).

  Args:
    examples: finite tf.data.Dataset of decoded feature dicts (fixed shapes), in file order.
    batch_size: examples per batch.
    window_batches: batches per sorted window.
    mask_name: the [seq_length] 0/1 feature whose sum is an example's length.
    index_name: the feature that carries the example's index.

  Returns:
    tf.data.Dataset of feature dicts [batch, ...] (batch dimension not static), index_name
    [batch].
  """
  window = window_batches * batch_size

  def window_to_batches(window_index, features):
    size = tf.shape(features[mask_name])[0]
    features = dict(features)
    features[index_name] = tf.cast(window_index, tf.int32) * window + tf.range(size)
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(features[mask_name], 0), tf.int32), axis=1)
    order = tf.argsort(lengths, stable=True)
    features = {name: tf.gather(value, order) for name, value in features.items()}
    return tf.data.Dataset.range(0, tf.cast(size, tf.int64), batch_size).map(
        lambda start: {name: value[start:start + batch_size]
                       for name, value in features.items()})

  return examples.batch(window).enumerate().flat_map(window_to_batches)
