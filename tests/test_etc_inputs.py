"""Tests of etc_model/etc_inputs.py: ETC side inputs against hand-built cases and TF == NumPy."""

import numpy as np
import tensorflow as tf

from etc_model import etc_inputs


def test_relative_ids_match_the_official_examples():
  # etcmodel feature_utils docstrings: max_distance 3.
  np.testing.assert_array_equal(etc_inputs.make_relative_att_ids(6, 3)[0], [
      [0, 1, 2, 3, 3, 3],
      [4, 0, 1, 2, 3, 3],
      [5, 4, 0, 1, 2, 3],
      [6, 5, 4, 0, 1, 2],
      [6, 6, 5, 4, 0, 1],
      [6, 6, 6, 5, 4, 0]])
  local = etc_inputs.make_local_relative_att_ids(4, local_radius=5, max_distance=3, batch_size=2)
  assert local.shape == (2, 4, 11)
  np.testing.assert_array_equal(local[1, 2], [6, 6, 6, 5, 4, 0, 1, 2, 3, 3, 3])


def test_local_segmented_mask_by_hand():
  mask = etc_inputs.make_local_segmented_att_mask(np.array([[0, 0, 1, 1, 1]]), local_radius=1)
  np.testing.assert_array_equal(mask[0], [[0, 1, 1], [1, 1, 0], [0, 1, 1], [1, 1, 1], [1, 1, 0]])


def test_sentence_inputs_and_side_inputs_by_hand():
  packed = etc_inputs.make_sentence_global_inputs([[[5, 6], [7, 8, 9]]], long_seq_len=6,
                                                  global_seq_len=3, global_token_id=1)
  np.testing.assert_array_equal(packed["token_ids"], [5, 6, 7, 8, 9, 0])
  np.testing.assert_array_equal(packed["sentence_ids"], [0, 0, 1, 1, 1, 0])
  np.testing.assert_array_equal(packed["long_breakpoints"], [0, 0, 0, 0, 1, 0])
  np.testing.assert_array_equal(packed["global_token_ids"], [1, 1, 0])
  np.testing.assert_array_equal(packed["global_breakpoints"], [0, 1, 0])

  side = etc_inputs.make_global_local_transformer_side_inputs(
      packed["long_breakpoints"][None], packed["global_breakpoints"][None],
      packed["sentence_ids"][None], local_radius=1, relative_pos_max_distance=1,
      use_hard_g2l_mask=True)
  want = {
      # The padding token (example id 0) sees only itself; nobody sees past the ends.
      "l2l_att_mask": [[0, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 0], [0, 1, 0]],
      "g2g_att_mask": [[1, 1, 0], [1, 1, 0], [0, 0, 1]],
      "l2g_att_mask": [[1, 1, 0]] * 5 + [[0, 0, 1]],
      # Hard g2l: each sentence's global token sees its own tokens only.
      "g2l_att_mask": [[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0]],
      "l2l_relative_att_ids": [[2, 0, 1]] * 6,
      "g2g_relative_att_ids": [[0, 1, 1], [2, 0, 1], [2, 2, 0]],
      # 2D + 1 = 3 for another sentence's global token, 4 for the token's own.
      "l2g_relative_att_ids": [[4, 3, 3]] * 2 + [[3, 4, 3]] * 3 + [[4, 3, 3]],
  }
  for name, value in want.items():
    np.testing.assert_array_equal(side[name][0], value, err_msg=name)
  np.testing.assert_array_equal(side["g2l_relative_att_ids"][0],
                                np.array(want["l2g_relative_att_ids"]).T)
  hard_l2g = etc_inputs.make_global_local_transformer_side_inputs(
      packed["long_breakpoints"][None], packed["global_breakpoints"][None],
      packed["sentence_ids"][None], 1, 0, use_hard_l2g_mask=True)
  np.testing.assert_array_equal(hard_l2g["l2g_att_mask"][0],
                                [[1, 0, 0]] * 2 + [[0, 1, 0]] * 3 + [[0, 0, 0]])
  assert hard_l2g["l2l_relative_att_ids"] is None


def test_packing_two_examples_stops_at_the_first_sentence_that_does_not_fit():
  packed = etc_inputs.make_sentence_global_inputs(
      [[[3, 4, 5]], [[6], [7, 8]], [[9]]], long_seq_len=7, global_seq_len=4,
      global_token_id=2)
  np.testing.assert_array_equal(packed["token_ids"], [3, 4, 5, 6, 7, 8, 9])
  np.testing.assert_array_equal(packed["sentence_ids"], [0, 0, 0, 1, 2, 2, 3])
  np.testing.assert_array_equal(packed["long_breakpoints"], [0, 0, 1, 0, 0, 1, 1])
  np.testing.assert_array_equal(packed["global_breakpoints"], [1, 0, 1, 1])
  cut = etc_inputs.make_sentence_global_inputs([[[3, 4], [5, 6, 7]], [[8]]], long_seq_len=4,
                                               global_seq_len=4, global_token_id=2)
  np.testing.assert_array_equal(cut["token_ids"], [3, 4, 0, 0])
  np.testing.assert_array_equal(cut["global_breakpoints"], [1, 0, 0, 0])
  np.testing.assert_array_equal(cut["input_mask"], [1, 1, 0, 0])


def test_tf_ops_equal_numpy():
  rng = np.random.RandomState(0)
  batch = []
  for _ in range(2):
    examples = [[list(rng.randint(5, 50, rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
                for _ in range(3)]
    batch.append(etc_inputs.make_sentence_global_inputs(examples, 10, 4, global_token_id=1))
  features = {k: np.stack([b[k] for b in batch]) for k in batch[0]}
  args = (features["long_breakpoints"], features["global_breakpoints"],
          features["sentence_ids"], 2, 2, True, True)
  want = etc_inputs.make_global_local_transformer_side_inputs(*args)
  with tf.Graph().as_default():
    got_tensors = etc_inputs.make_global_local_transformer_side_inputs_tf(
        *[tf.constant(a) for a in args[:3]] + list(args[3:]))
    with tf.compat.v1.Session() as sess:
      got = sess.run(got_tensors)
  for name in etc_inputs.SIDE_INPUT_NAMES:
    np.testing.assert_array_equal(got[name], want[name], err_msg=name)
