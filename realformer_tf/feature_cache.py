# coding=utf-8
"""The cache of tokenised classifier features: a TFRecord reused while its inputs are the same.

run_classifier writes each split's features once to output_dir/<split>.tf_record with a sidecar
<split>.tf_record.json holding a key: the input file's size and mtime (or the examples' digest
for a DataProcessor), the vocab, case, length, task, labels, padding and windowing. A later job
(or an evaluation during training) with the same key reuses the file; any change rewrites it.
paper/sweep.py copies the caches between runs of the same data.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import hashlib
import json
import os
import time

import tensorflow as tf

from realformer_tf import classifier_tasks
from realformer_tf import common

tf1 = tf.compat.v1

# Bumped when the cached TFRecord layout or the conversion changes.
FEATURE_CACHE_VERSION = 1


def _file_signature(path):
  """Path, size and mtime of a file (None when no path)."""
  if not path:
    return None
  stat = tf.io.gfile.stat(path)
  return {"path": os.path.abspath(path) if "://" not in path else path,
          "size": int(stat.length), "mtime_ns": int(stat.mtime_nsec)}


def feature_cache_key(input_file, vocab_file, do_lower_case, max_seq_length, task, label_list,
                      spm_model_file, pad_to_multiple=1, examples_digest=None, doc_stride=None):
  """What the cached features depend on, and its hash.

  Args:
    input_file: the task file read.
    vocab_file: WordPiece vocab (None with spm_model_file).
    do_lower_case: tokenizer setting.
    max_seq_length: sequence length.
    task: Task (name and reader options).
    label_list: label strings or None.
    spm_model_file: SentencePiece model or None.
    pad_to_multiple: examples padded to a multiple of this (TPU eval/predict), 1 = none.
    examples_digest: hash of the examples themselves (DataProcessor tasks, whose files are
      unknown), or None.
    doc_stride: --long_document=window's stride, or None (truncation; not in the key, so
      caches written before windows existed stay valid).

  Returns:
    (dict of the inputs, hex sha256 of its canonical JSON).
  """
  info = collections.OrderedDict([
      ("version", FEATURE_CACHE_VERSION),
      ("input_file", _file_signature(input_file)),
      ("vocab_file", None if spm_model_file else _file_signature(vocab_file)),
      ("do_lower_case", bool(do_lower_case)),
      ("max_seq_length", int(max_seq_length)),
      ("task", task.name),
      ("reader_options", task.reader_options),
      ("label_list", list(label_list) if label_list is not None else None),
      ("spm_model_file", _file_signature(spm_model_file)),
      ("pad_to_multiple", int(pad_to_multiple)),
  ])
  if examples_digest is not None:
    info["examples_digest"] = examples_digest
  if doc_stride is not None:
    info["long_document"] = {"mode": "window", "doc_stride": int(doc_stride)}
  key = hashlib.sha256(json.dumps(info, sort_keys=True).encode("utf-8")).hexdigest()
  return info, key


def examples_digest(examples):
  """sha256 of the guids, texts and labels of a list of InputExamples."""
  h = hashlib.sha256()
  for e in examples:
    h.update(json.dumps([e.guid, e.text_a, e.text_b, e.label], default=repr).encode("utf-8"))
    h.update(b"\n")
  return h.hexdigest()


def cached_features(examples, input_file, cache_file, write_features, task, max_seq_length,
                    vocab_file, do_lower_case, spm_model_file, pad_to_multiple=1,
                    doc_stride=None):
  """Returns the TFRecord of `examples`' features, reusing `cache_file` when its key matches.

  The sidecar `cache_file + ".json"` holds the key and what it was computed from; it is written
  after the TFRecord, so a sidecar with a matching key means a complete file.

  Args:
    examples: list of InputExample (already read from input_file).
    input_file: the file they were read from (its size and mtime are part of the key), or
      None when a DataProcessor gave them (their digest is part of the key instead).
    cache_file: TFRecord path in output_dir.
    write_features: function (padded examples, output_file) that writes their TFRecord and
      returns the number of windows (records) of each example, or None (one record each).
    task: classifier_tasks.Task.
    max_seq_length: sequence length.
    vocab_file: vocab path (key).
    do_lower_case: tokenizer setting (key).
    spm_model_file: SentencePiece model path or None (key).
    pad_to_multiple: pad the examples with PaddingInputExample to a multiple of this.
    doc_stride: --long_document=window's stride (key; the examples are not padded, the
      writer pads the records), or None.

  Returns:
    dict with "file", "num_examples" (real), "num_padded" (examples with padding), "reused",
    "num_records" (features in the file) and "windows" (windows per padded example, or None
    without windowing).
  """
  info, key = feature_cache_key(
      input_file, vocab_file, do_lower_case, max_seq_length, task, task.labels, spm_model_file,
      pad_to_multiple, examples_digest=None if input_file else examples_digest(examples),
      doc_stride=doc_stride)
  sidecar = cache_file + ".json"
  reason = "no cached features"
  if tf.io.gfile.exists(cache_file) and tf.io.gfile.exists(sidecar):
    try:
      with tf.io.gfile.GFile(sidecar) as f:
        meta = json.load(f)
    except (ValueError, tf.errors.OpError):
      meta = {}
    if meta.get("key") == key and meta.get("num_examples") == len(examples):
      tf1.logging.info("Reusing cached features %s (%d examples, key %s)", cache_file,
                       len(examples), key[:12])
      windows = meta.get("windows")
      return dict(file=cache_file, num_examples=meta["num_examples"],
                  num_padded=meta["num_padded"], reused=True, windows=windows,
                  num_records=sum(windows) if windows else meta["num_padded"])
    old = meta.get("inputs") or {}
    changed = [name for name in info if old.get(name) != info[name]]
    reason = "inputs changed: %s" % (", ".join(changed) if changed else "example count")
  num_real = len(examples)
  padded = list(examples)
  while doc_stride is None and len(padded) % pad_to_multiple != 0:
    padded.append(classifier_tasks.PaddingInputExample())
  tf1.logging.info("Writing features to %s (%s): %d examples (%d with padding)", cache_file,
                   reason, num_real, len(padded))
  start = time.time()
  windows = write_features(padded, cache_file)
  if windows is not None:
    tf1.logging.info("%s: %d windows for %d examples (%d longer than one window)", cache_file,
                     sum(windows), len(padded), sum(1 for n in windows if n > 1))
  num_padded = len(windows) if windows is not None else len(padded)
  meta = {"key": key, "inputs": info, "num_examples": num_real, "num_padded": num_padded,
          "seconds": round(time.time() - start, 2)}
  if windows is not None:
    meta["windows"] = windows
  common.write_json_atomic(sidecar, meta)
  return dict(file=cache_file, num_examples=num_real, num_padded=num_padded, reused=False,
              windows=windows, num_records=sum(windows) if windows else num_padded)
