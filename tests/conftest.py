"""Shared test fixtures: paths to the repo and to ../shared/data (skip when absent)."""

import os
import sys

import pytest

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A 2-layer, 32-wide BERT over the real 30,522-entry vocab: fast end-to-end runs of the scripts.
TINY_BERT_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                    "num_attention_heads": 2, "intermediate_size": 64,
                    "max_position_embeddings": 64, "type_vocab_size": 2, "hidden_act": "gelu",
                    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                    "initializer_range": 0.02}

if REPO_DIR not in sys.path:
  sys.path.insert(0, REPO_DIR)
import common  # pylint: disable=g-import-not-at-top,wrong-import-position

SHARED_DATA_DIR = common.shared_data_dir()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def write_random_bert_checkpoint(config_file, checkpoint_path, seed=1):
  """Saves a randomly initialised BERT (bert/* variables only), as a pre-trained one would be.

  Args:
    config_file: bert_config.json path.
    checkpoint_path: checkpoint prefix to write.
    seed: graph-level random seed.

  Returns:
    The checkpoint prefix written.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import modeling  # pylint: disable=g-import-not-at-top
  config = modeling.BertConfig.from_json_file(config_file)
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(seed)
    ids = tf.compat.v1.placeholder(tf.int32, [None, 8])
    modeling.BertModel(config, False, ids)
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return saver.save(sess, checkpoint_path)


def shared_path(*parts):
  """Returns a path under ../shared/data, or skips the test with the reason if it is absent."""
  path = os.path.join(SHARED_DATA_DIR, *parts)
  if not os.path.exists(path):
    pytest.skip("needs %s (the shared data beside the repo; set REALFORMER_SHARED_DATA)" % path)
  return path


@pytest.fixture
def vocab_file():
  """The bert-base-uncased vocab from ../shared/data, or the copy shipped in data/."""
  shipped = os.path.join(REPO_DIR, "data", "vocab.txt")
  if os.path.exists(shipped):
    return shipped
  return shared_path("vocab", "bert_uncased_vocab.txt")


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "slow: end-to-end runs of whole jobs (deselect with -m 'not slow')")
