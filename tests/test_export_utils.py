"""Tests for export_utils.py: the integer SavedModel refuses ids outside the model's tables."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY_BERT_CONFIG, write_random_bert_checkpoint
from realformer_tf import common
from realformer_tf import export_utils
import modeling


def test_out_of_range_ids_fail_the_request_instead_of_being_ignored(tmp_path):
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(TINY_BERT_CONFIG))
  config = modeling.BertConfig.from_json_file(str(config_file))
  prefix = write_random_bert_checkpoint(str(config_file), str(tmp_path / "m" / "bert_model.ckpt"))

  def build_fn(placeholders):
    model = modeling.BertModel(config, False, placeholders["input_ids"],
                               placeholders["input_mask"], placeholders["segment_ids"])
    return {"pooled": model.get_pooled_output()}

  specs = {name: (tf.int32, [None, 8]) for name in ("input_ids", "input_mask", "segment_ids")}
  export_dir = str(tmp_path / "export")
  export_utils.export_saved_model(build_fn, prefix, export_dir, specs, bert_config=config)
  fn = tf.saved_model.load(export_dir).signatures["serving_default"]
  ids = np.full([1, 8], 7, np.int32)
  ones = np.ones([1, 8], np.int32)
  fn(input_ids=tf.constant(ids), input_mask=tf.constant(ones), segment_ids=tf.constant(ones))
  # type_vocab_size is 2: segment id 2 used to select no embedding at all (one-hot of zeros).
  with pytest.raises(tf.errors.InvalidArgumentError, match="segment_ids must be in"):
    fn(input_ids=tf.constant(ids), input_mask=tf.constant(ones),
       segment_ids=tf.constant(2 * ones))
  with pytest.raises(tf.errors.InvalidArgumentError, match="input_ids must be in"):
    fn(input_ids=tf.constant(ids * 0 + config.vocab_size), input_mask=tf.constant(ones),
       segment_ids=tf.constant(ones))
  assert os.path.exists(os.path.join(export_dir, "realformer_export.json"))


def _truncated_copy(prefix, directory, keep_bytes):
  """A copy of checkpoint `prefix` in `directory` whose data file stops after keep_bytes."""
  os.makedirs(directory)
  copy = os.path.join(directory, os.path.basename(prefix))
  with open(prefix + ".index", "rb") as f, open(copy + ".index", "wb") as g:
    g.write(f.read())
  data = prefix + ".data-00000-of-00001"
  with open(data, "rb") as f, open(copy + ".data-00000-of-00001", "wb") as g:
    g.write(f.read()[:keep_bytes])
  return copy


def test_a_checkpoint_that_cannot_be_read_is_one_line(tmp_path):
  """A file of another format, a checkpoint's own file name, a data file cut short."""
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(TINY_BERT_CONFIG))
  prefix = write_random_bert_checkpoint(str(config_file), str(tmp_path / "run" / "model.ckpt"))
  text = tmp_path / "notes.ckpt"
  text.write_text("not a checkpoint\n")
  with pytest.raises(common.UsageError, match=r"^--checkpoint=%s: not a readable TensorFlow "
                     r"checkpoint \(Unable to open table file" % text):
    export_utils.resolve_checkpoint(str(text), "checkpoint")
  # Its .index (or .data) file names the checkpoint.
  assert export_utils.resolve_checkpoint(prefix + ".index", "checkpoint") == prefix
  assert export_utils.resolve_checkpoint(prefix + ".data-00000-of-00001") == prefix
  # The index is whole, the values are not: one line when a variable is read.
  cut = _truncated_copy(prefix, str(tmp_path / "cut"), 2000)
  assert export_utils.resolve_checkpoint(cut, "checkpoint") == cut
  specs = {name: (shape, True) for name, shape in tf.train.list_variables(prefix)}
  with pytest.raises(common.UsageError, match=r"^checkpoint %s: variable \S+ cannot be read \("
                     r".*\); the data file is cut short or damaged$" % cut):
    export_utils.variables_from_checkpoint(specs, cut, flag_name="checkpoint")
