"""Tests of etc_model/lift_bert_checkpoint.py: BERT -> ETC names, counts, and equal outputs."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf import common
import modeling
from conftest import TINY_BERT_CONFIG, write_random_bert_checkpoint
from etc_model import etc_modeling
from etc_model import lift_bert_checkpoint as lift

tf1 = tf.compat.v1


def test_lifted_etc_equals_bert_with_a_full_window_and_no_relative_ids(tmp_path):
  # A window covering the whole input, absolute positions lifted, no relative ids, the long
  # tokens on BERT's segment 0 and a global token nobody attends to: ETC's long rows compute
  # BERT's attention, so the two agree (with relative ids they would not: BERT has none).
  bert_config = dict(TINY_BERT_CONFIG, residual_attention="sum")
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(bert_config))
  prefix = write_random_bert_checkpoint(str(config_file), str(tmp_path / "bert.ckpt"))
  result = lift.lift_bert_checkpoint(prefix, str(tmp_path / "etc"), seed=3, local_radius=12,
                                     max_absolute_position_embeddings=64)
  layers = bert_config["num_hidden_layers"]
  # Per layer (shared q/k/v, the ETC default): q, k, v, long and global output projections,
  # 2 attention LayerNorms, 2 dense + 1 LayerNorm (2 variables each); embeddings: word,
  # segment (rows 0-1 of 16), long and global positions, 2 LayerNorms (2 each).
  assert len(result["mapped"]) + len(result["partial"]) == layers * 20 + 8
  assert [p.split(" ")[0] for p in result["partial"]] == [
      "etc_document_bert/segment_emb_lookup/embedding_table"]
  assert len(result["new"]) == layers * 4 and all("relative_" in n for n in result["new"])
  assert result["unused"] == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
  etc_config = etc_modeling.EtcConfig.from_json_file(str(tmp_path / "etc" / "etc_config.json"))
  assert etc_config.residual_attention == "sum" and etc_config.local_radius == 12

  seq = 10
  rng = np.random.RandomState(0)
  ids = rng.randint(0, bert_config["vocab_size"], [2, seq]).astype(np.int32)
  with tf.Graph().as_default():
    bert = modeling.BertModel(modeling.BertConfig.from_dict(bert_config), False,
                              tf.constant(ids))
    etc = etc_modeling.EtcModel(etc_config, is_training=False)
    long_output, _ = etc(token_ids=tf.constant(ids), global_token_ids=tf.zeros([2, 1], tf.int32),
                         segment_ids=tf.zeros([2, seq], tf.int32),
                         l2g_att_mask=tf.zeros([2, seq, 1], tf.int32))
    tf1.train.init_from_checkpoint(prefix, {"bert/": "bert/"})
    tf1.train.init_from_checkpoint(result["output_checkpoint"],
                                   {"etc_document_bert/": "etc_document_bert/"})
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      want, got = sess.run([bert.get_sequence_output(), long_output])
  np.testing.assert_allclose(got, want, atol=2e-5)


def test_refuses_mismatched_configs(tmp_path):
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(TINY_BERT_CONFIG))
  prefix = write_random_bert_checkpoint(str(config_file), str(tmp_path / "bert.ckpt"))
  etc_file = tmp_path / "etc_config.json"
  etc_file.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 3,
                                  "num_attention_heads": 2, "intermediate_size": 64}))
  with pytest.raises(common.UsageError, match="'num_hidden_layers' is 3, the BERT config"):
    lift.lift_bert_checkpoint(prefix, str(tmp_path / "out"), etc_config_file=str(etc_file))
  with pytest.raises(common.UsageError, match="--local_radius cannot be combined"):
    lift.lift_bert_checkpoint(prefix, str(tmp_path / "out"), etc_config_file=str(etc_file),
                              local_radius=4)
  assert not os.path.exists(tmp_path / "out")


def test_refuses_a_checkpoint_that_is_not_the_configs_bert(tmp_path):
  """An ETC checkpoint, or a BERT of fewer layers than its config says, would be "lifted" into
  random ETC weights (all or the upper layers): one line instead, and nothing written."""
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(TINY_BERT_CONFIG))
  prefix = write_random_bert_checkpoint(str(config_file), str(tmp_path / "bert.ckpt"))
  lifted = lift.lift_bert_checkpoint(prefix, str(tmp_path / "etc"))
  with pytest.raises(common.UsageError, match=r"^--bert_checkpoint=\S+: holds none of BERT's "
                     r"variables .*its top-level scopes are etc_document_bert\), so there is "
                     r"nothing to lift"):
    lift.lift_bert_checkpoint(lifted["output_checkpoint"], str(tmp_path / "out"),
                              bert_config_file=str(config_file))
  deeper = tmp_path / "bert3_config.json"
  deeper.write_text(json.dumps(dict(TINY_BERT_CONFIG, num_hidden_layers=3)))
  with pytest.raises(common.UsageError, match=r"^--bert_checkpoint=\S+: lacks 16 of the 52 BERT "
                     r"variables the ETC config maps \(bert/encoder/layer_2/"):
    lift.lift_bert_checkpoint(prefix, str(tmp_path / "out"), bert_config_file=str(deeper))
  assert not os.path.exists(tmp_path / "out")


def test_overwrite_never_deletes_an_input_config(tmp_path):
  """--overwrite of an earlier output that holds the --bert_config_file read would delete it."""
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(TINY_BERT_CONFIG))
  prefix = write_random_bert_checkpoint(str(config_file), str(tmp_path / "bert.ckpt"))
  out = tmp_path / "etc"
  lift.lift_bert_checkpoint(prefix, str(out))
  inside = out / "bert_config.json"
  inside.write_text(config_file.read_text())
  with pytest.raises(common.UsageError, match=r"^--output_dir=\S+: would replace \S+"
                     r"bert_config.json, which the job needs"):
    lift.lift_bert_checkpoint(prefix, str(out), bert_config_file=str(inside), overwrite=True)
  assert inside.read_text() == config_file.read_text()
