# coding=utf-8
"""The translation records (docs/translation.md) and the SentencePiece model that makes them.

A record is one tf.train.Example with two variable-length int64 features (FEATURE_NAMES):
source_ids and target_ids, each the SentencePiece pieces of a sentence followed by eos, without
bos or padding (encode_pair, translation_example; write_translation_tfrecord writes a file of
them atomically). The SentencePiece model must have the translation model's special ids (pad 0,
unk 1, bos 2, eos 3): load_spm checks them. translation/create_translation_data.py writes the
records; translation/translation_input.py batches them; run_translation.py and the SavedModel of
translation/translation_serving.py decode with the same SentencePiece model.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os

import tensorflow as tf

from realformer_tf import common

# The ids of docs/translation.md.
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
# The features of a record.
FEATURE_NAMES = ("source_ids", "target_ids")
# The longest source or target of a record, in ids (pieces + eos), unless a job says otherwise.
DEFAULT_MAX_LENGTH = 128


def load_spm(path, flag_name="spm_model"):
  """Loads a SentencePiece model and checks it has the translation ids (pad 0, unk 1, bos 2, eos 3).

  Args:
    path: the .model file (any tf.io.gfile path).
    flag_name: the flag that named it, for messages.

  Returns:
    sentencepiece.SentencePieceProcessor. Fails with one line when the file is missing, is not
    a SentencePiece model, or has other special ids.
  """
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  common.require_file(path, flag_name)
  with tf.io.gfile.GFile(path, "rb") as f:
    proto = f.read()
  sp = spm.SentencePieceProcessor()
  try:
    sp.LoadFromSerializedProto(proto)
  except (RuntimeError, OSError, TypeError) as e:
    message = (str(e).strip().splitlines() or [repr(e)])[-1]
    common.fail("--%s=%s: not a SentencePiece model (%s)" % (flag_name, path, message))
  ids = {"pad": sp.pad_id(), "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id()}
  want = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
  if ids != want:
    common.fail("--%s=%s: special ids %s, the translation model needs %s (train one with "
                "--train_spm_vocab_size)" % (
                    flag_name, path, " ".join("%s=%d" % (k, ids[k]) for k in sorted(ids)),
                    " ".join("%s=%d" % (k, want[k]) for k in sorted(want))))
  return sp


def encode_pair(sp, source, target):
  """Encodes one sentence pair as the ids of the TFRecord features.

  Args:
    sp: SentencePieceProcessor from load_spm.
    source: source sentence (str).
    target: target sentence (str).

  Returns:
    (source_ids, target_ids): lists of int, each the pieces' ids followed by EOS_ID (no bos,
    no padding).
  """
  return sp.encode(source) + [EOS_ID], sp.encode(target) + [EOS_ID]


def translation_example(source_ids, target_ids):
  """One serialized tf.train.Example with the int64 features source_ids and target_ids."""
  feature = {
      "source_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=source_ids)),
      "target_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=target_ids)),
  }
  return tf.train.Example(
      features=tf.train.Features(feature=feature)).SerializeToString()


def write_translation_tfrecord(examples, output_file):
  """Writes (source_ids, target_ids) pairs to one TFRecord file, atomically.

  The file is written under common.temp_path(output_file) and renamed when every example is
  written; an exception (or a stop) removes the temporary and leaves output_file as it was.

  Args:
    examples: iterable of (source_ids, target_ids) int lists (see encode_pair).
    output_file: the TFRecord path.

  Returns:
    The number of examples written.
  """
  parent = os.path.dirname(output_file)
  if parent:
    tf.io.gfile.makedirs(parent)
  tmp_path = common.temp_path(output_file)
  count = 0
  try:
    with tf.io.TFRecordWriter(tmp_path) as writer:
      for source_ids, target_ids in examples:
        writer.write(translation_example(source_ids, target_ids))
        count += 1
    tf.io.gfile.rename(tmp_path, output_file, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_path):
      tf.io.gfile.remove(tmp_path)
  return count
