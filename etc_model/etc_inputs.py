# coding=utf-8
"""ETC side inputs: global-local attention masks and relative attention ids.

The semantics of the official google-research `etcmodel/feature_utils.py` and
`etcmodel/models/input_utils.py`, in two forms:
  NumPy (the official function names: `make_global_local_transformer_side_inputs`, ...), for
    data preparation and tests;
  TF ops (the same names with `_tf`), for an input pipeline or a model_fn;
and make_multihop_side_inputs_tf, those of a multi-hop QA input (the official
`multihop_utils.make_global_local_transformer_side_inputs`: WikiHop, HotpotQA).

The conventions (as the official code):
  long_breakpoints / global_breakpoints: 1 at the last token of each packed example;
    example ids = reversed cumulative sum (padding gets 0, the last example 1, ...).
  sentence_ids: for each long token, the index of its sentence's global token.
  l2l_att_mask [batch, long, 2r + 1]: window index k is the key at offset k - r; 1 when that key
    exists and belongs to the same example.
  g2g / l2g / g2l masks: same example; use_hard_g2l_mask: a global token sees only its own
    sentence's long tokens; use_hard_l2g_mask: a long token sees only its sentence's global token.
  Relative ids (relative_pos_max_distance D > 0): l2l and g2g clipped distances (0 same position,
    1..D to the right, D+1..2D to the left); l2g / g2l: 2D + 1 for another sentence, 2D + 2 for
    the token's own sentence (the two extra ids of the official model's relative vocabulary).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import numpy as np
import tensorflow as tf

SIDE_INPUT_NAMES = ("l2l_att_mask", "g2g_att_mask", "l2g_att_mask", "g2l_att_mask",
                    "l2l_relative_att_ids", "g2g_relative_att_ids", "l2g_relative_att_ids",
                    "g2l_relative_att_ids")


def relative_position_vocab_size(max_distance):
  """Ids used by clipped relative positions: 2 * max_distance + 1 (official generator)."""
  return 2 * max_distance + 1


def relative_offset_ids(offsets, max_distance):
  """Official `RelativePositionGenerator` id of each key offset (key - query position).

  Args:
    offsets: int array of offsets.
    max_distance: clipping distance D (>= 0).

  Returns:
    int32 array: 0 for offset 0, min(o, D) to the right, D + min(-o, D) to the left.
  """
  offsets = np.asarray(offsets)
  return np.where(offsets >= 0, np.minimum(offsets, max_distance),
                  max_distance + np.minimum(-offsets, max_distance)).astype(np.int32)


def make_relative_att_ids(seq_len, max_distance, batch_size=1):
  """int32 [batch, seq_len, seq_len] relative position ids for full attention."""
  positions = np.arange(seq_len)
  ids = relative_offset_ids(positions[np.newaxis, :] - positions[:, np.newaxis], max_distance)
  return np.tile(ids[np.newaxis], [batch_size, 1, 1])


def make_local_relative_att_ids(seq_len, local_radius, max_distance, batch_size=1):
  """int32 [batch, seq_len, 2 * local_radius + 1] relative position ids of the local window."""
  pattern = relative_offset_ids(np.arange(-local_radius, local_radius + 1), max_distance)
  return np.tile(pattern[np.newaxis, np.newaxis], [batch_size, seq_len, 1])


def make_segmented_att_mask(segment_ids):
  """int32 [batch, seq, seq]: 1 where query and key have the same segment id."""
  segment_ids = np.asarray(segment_ids)
  return (segment_ids[:, :, np.newaxis] == segment_ids[:, np.newaxis, :]).astype(np.int32)


def make_local_segmented_att_mask(segment_ids, local_radius):
  """int32 [batch, seq, 2 * local_radius + 1]: the window key exists and has the same segment.

  Args:
    segment_ids: int [batch, seq].
    local_radius: window radius r (>= 1).

  Returns:
    mask[b, i, k] = 1 iff 0 <= i + k - r < seq and segment_ids[b, i + k - r] == segment_ids[b, i].
  """
  segment_ids = np.asarray(segment_ids)
  seq_len = segment_ids.shape[1]
  keys = np.arange(seq_len)[:, np.newaxis] + np.arange(-local_radius, local_radius + 1)
  inside = (keys >= 0) & (keys < seq_len)
  key_segments = segment_ids[:, np.clip(keys, 0, seq_len - 1)]
  same = key_segments == segment_ids[:, :, np.newaxis]
  return (same & inside[np.newaxis]).astype(np.int32)


def example_ids_from_breakpoints(breakpoints):
  """Packed-example ids: reversed cumulative sum of the ending breakpoints (padding: 0)."""
  breakpoints = np.asarray(breakpoints)
  return np.cumsum(breakpoints[:, ::-1], axis=1)[:, ::-1]


def make_global_local_transformer_side_inputs(long_breakpoints, global_breakpoints,
                                              sentence_ids, local_radius,
                                              relative_pos_max_distance,
                                              use_hard_g2l_mask=False, use_hard_l2g_mask=False):
  """The 8 side inputs of `EtcModel` from breakpoints and sentence ids (NumPy).

  Args:
    long_breakpoints: int [batch, long_seq_len], 1 at the last long token of each example.
    global_breakpoints: int [batch, global_seq_len], 1 at the last global token of each example.
    sentence_ids: int [batch, long_seq_len], the global token (sentence) of each long token.
    local_radius: the model's local radius.
    relative_pos_max_distance: D; 0 for no relative ids (they are None then).
    use_hard_g2l_mask: a global token attends only to its sentence's long tokens.
    use_hard_l2g_mask: a long token attends only to its sentence's global token.

  Returns:
    dict of the 8 `SIDE_INPUT_NAMES` (int32 arrays, relative ids None when D is 0).
  """
  return make_global_local_transformer_side_inputs_from_example_ids(
      example_ids_from_breakpoints(long_breakpoints),
      example_ids_from_breakpoints(global_breakpoints), sentence_ids, local_radius,
      relative_pos_max_distance, use_hard_g2l_mask, use_hard_l2g_mask)


def make_global_local_transformer_side_inputs_from_example_ids(
    long_example_ids, global_example_ids, sentence_ids, local_radius,
    relative_pos_max_distance, use_hard_g2l_mask=False, use_hard_l2g_mask=False):
  """As `make_global_local_transformer_side_inputs`, from example ids (NumPy).

  Args:
    long_example_ids: int [batch, long_seq_len] (padding a distinct id).
    global_example_ids: int [batch, global_seq_len].
    sentence_ids: int [batch, long_seq_len].
    local_radius: the model's local radius.
    relative_pos_max_distance: D (0: no relative ids).
    use_hard_g2l_mask: see above.
    use_hard_l2g_mask: see above.

  Returns:
    dict of the 8 side inputs.
  """
  long_example_ids = np.asarray(long_example_ids)
  global_example_ids = np.asarray(global_example_ids)
  sentence_ids = np.asarray(sentence_ids)
  batch_size, long_seq_len = long_example_ids.shape
  global_seq_len = global_example_ids.shape[1]
  side = {name: None for name in SIDE_INPUT_NAMES}
  side["l2l_att_mask"] = make_local_segmented_att_mask(long_example_ids, local_radius)
  side["g2g_att_mask"] = make_segmented_att_mask(global_example_ids)
  l2g_mask = (long_example_ids[:, :, np.newaxis] ==
              global_example_ids[:, np.newaxis, :]).astype(np.int32)
  g2l_mask = l2g_mask.transpose(0, 2, 1)
  # [batch, long, global]: the long token belongs to the global token's sentence.
  own_sentence = (sentence_ids[:, :, np.newaxis] ==
                  np.arange(global_seq_len)[np.newaxis, np.newaxis, :]).astype(np.int32)
  if use_hard_g2l_mask:
    g2l_mask = g2l_mask * own_sentence.transpose(0, 2, 1)
  if use_hard_l2g_mask:
    l2g_mask = l2g_mask * own_sentence
  side["l2g_att_mask"], side["g2l_att_mask"] = l2g_mask, np.ascontiguousarray(g2l_mask)
  if relative_pos_max_distance > 0:
    offset = relative_position_vocab_size(relative_pos_max_distance)
    side["l2l_relative_att_ids"] = make_local_relative_att_ids(
        long_seq_len, local_radius, relative_pos_max_distance, batch_size)
    side["g2g_relative_att_ids"] = make_relative_att_ids(global_seq_len,
                                                         relative_pos_max_distance, batch_size)
    side["l2g_relative_att_ids"] = own_sentence + offset
    side["g2l_relative_att_ids"] = np.ascontiguousarray(own_sentence.transpose(0, 2, 1)) + offset
  return side


def make_sentence_global_inputs(examples, long_seq_len, global_seq_len, global_token_id,
                                pad_token_id=0):
  """Packs examples (lists of tokenised sentences) with one global token per sentence.

  Examples are packed in order while they fit: sentences go in whole while the long and global
  budgets last; the first sentence that does not fit ends the packing (the first sentence of an
  example is truncated to the room left instead). Each packed example's last long and global
  token carries a breakpoint. Empty sentences are skipped.

  Args:
    examples: list of examples, each a list of sentences, each a list of token ids.
    long_seq_len: L, the long input length.
    global_seq_len: G, the global input length.
    global_token_id: the token id of every sentence's global token.
    pad_token_id: id of the padding tokens.

  Returns:
    dict of int32 arrays: token_ids [L], global_token_ids [G], sentence_ids [L] (padding 0),
    long_breakpoints [L], global_breakpoints [G], input_mask [L], global_input_mask [G].
  """
  token_ids, sentence_ids, long_breaks = [], [], []
  global_count, global_breaks = 0, []
  full = False
  for example in examples:
    added = 0
    for sentence in example:
      if not sentence:
        continue
      room = long_seq_len - len(token_ids)
      if global_count >= global_seq_len or room <= 0 or (len(sentence) > room and added):
        full = True
        break
      piece = list(sentence[:room])
      token_ids.extend(piece)
      sentence_ids.extend([global_count] * len(piece))
      global_count += 1
      added += 1
    if added:
      long_breaks.append(len(token_ids) - 1)
      global_breaks.append(global_count - 1)
    if full or len(token_ids) >= long_seq_len or global_count >= global_seq_len:
      break

  def padded(values, length, fill):
    return np.asarray(list(values) + [fill] * (length - len(values)), np.int32)

  long_breakpoints = np.zeros([long_seq_len], np.int32)
  long_breakpoints[long_breaks] = 1
  global_breakpoints = np.zeros([global_seq_len], np.int32)
  global_breakpoints[global_breaks] = 1
  return {
      "token_ids": padded(token_ids, long_seq_len, pad_token_id),
      "global_token_ids": padded([global_token_id] * global_count, global_seq_len, pad_token_id),
      "sentence_ids": padded(sentence_ids, long_seq_len, 0),
      "long_breakpoints": long_breakpoints,
      "global_breakpoints": global_breakpoints,
      "input_mask": padded([1] * len(token_ids), long_seq_len, 0),
      "global_input_mask": padded([1] * global_count, global_seq_len, 0),
  }


# TF ops: the same side inputs inside a graph (input pipeline or model_fn).


def example_ids_from_breakpoints_tf(breakpoints):
  """TF version of `example_ids_from_breakpoints`."""
  return tf.cumsum(tf.convert_to_tensor(breakpoints), axis=-1, reverse=True)


def make_segmented_att_mask_tf(segment_ids):
  """TF version of `make_segmented_att_mask`."""
  segment_ids = tf.convert_to_tensor(segment_ids)
  return tf.cast(tf.equal(segment_ids[:, :, tf.newaxis], segment_ids[:, tf.newaxis, :]),
                 tf.int32)


def make_local_segmented_att_mask_tf(segment_ids, local_radius):
  """TF version of `make_local_segmented_att_mask`."""
  segment_ids = tf.convert_to_tensor(segment_ids)
  seq_len = tf.shape(segment_ids)[1]
  keys = tf.range(seq_len)[:, tf.newaxis] + tf.range(-local_radius, local_radius + 1)
  inside = (keys >= 0) & (keys < seq_len)
  key_segments = tf.gather(segment_ids, tf.clip_by_value(keys, 0, seq_len - 1), axis=1)
  same = tf.equal(key_segments, segment_ids[:, :, tf.newaxis])
  return tf.cast(same & inside[tf.newaxis], tf.int32)


def _relative_offset_ids_tf(offsets, max_distance):
  return tf.where(offsets >= 0, tf.minimum(offsets, max_distance),
                  max_distance + tf.minimum(-offsets, max_distance))


def make_global_local_transformer_side_inputs_tf(long_breakpoints, global_breakpoints,
                                                 sentence_ids, local_radius,
                                                 relative_pos_max_distance,
                                                 use_hard_g2l_mask=False,
                                                 use_hard_l2g_mask=False):
  """TF version of `make_global_local_transformer_side_inputs` (int32 tensors).

  Args:
    long_breakpoints: int32 [batch, long_seq_len].
    global_breakpoints: int32 [batch, global_seq_len].
    sentence_ids: int32 [batch, long_seq_len].
    local_radius: the model's local radius.
    relative_pos_max_distance: D (0: no relative ids).
    use_hard_g2l_mask: a global token attends only to its sentence's long tokens.
    use_hard_l2g_mask: a long token attends only to its sentence's global token.

  Returns:
    dict of the 8 side inputs (relative ids None when D is 0).
  """
  long_example_ids = example_ids_from_breakpoints_tf(long_breakpoints)
  global_example_ids = example_ids_from_breakpoints_tf(global_breakpoints)
  sentence_ids = tf.convert_to_tensor(sentence_ids)
  batch_size, long_seq_len = tf.shape(long_example_ids)[0], tf.shape(long_example_ids)[1]
  global_seq_len = tf.shape(global_example_ids)[1]
  side = {name: None for name in SIDE_INPUT_NAMES}
  side["l2l_att_mask"] = make_local_segmented_att_mask_tf(long_example_ids, local_radius)
  side["g2g_att_mask"] = make_segmented_att_mask_tf(global_example_ids)
  l2g_mask = tf.cast(tf.equal(long_example_ids[:, :, tf.newaxis],
                              global_example_ids[:, tf.newaxis, :]), tf.int32)
  own_sentence = tf.cast(tf.equal(sentence_ids[:, :, tf.newaxis],
                                  tf.range(global_seq_len, dtype=sentence_ids.dtype)
                                  [tf.newaxis, tf.newaxis, :]), tf.int32)
  g2l_mask = tf.transpose(l2g_mask, [0, 2, 1])
  if use_hard_g2l_mask:
    g2l_mask *= tf.transpose(own_sentence, [0, 2, 1])
  if use_hard_l2g_mask:
    l2g_mask *= own_sentence
  side["l2g_att_mask"], side["g2l_att_mask"] = l2g_mask, g2l_mask
  if relative_pos_max_distance > 0:
    distance = relative_pos_max_distance
    window = _relative_offset_ids_tf(tf.range(-local_radius, local_radius + 1), distance)
    side["l2l_relative_att_ids"] = tf.tile(window[tf.newaxis, tf.newaxis],
                                           [batch_size, long_seq_len, 1])
    positions = tf.range(global_seq_len)
    full = _relative_offset_ids_tf(positions[tf.newaxis, :] - positions[:, tf.newaxis], distance)
    side["g2g_relative_att_ids"] = tf.tile(full[tf.newaxis], [batch_size, 1, 1])
    offset = relative_position_vocab_size(distance)
    side["l2g_relative_att_ids"] = own_sentence + offset
    side["g2l_relative_att_ids"] = tf.transpose(own_sentence, [0, 2, 1]) + offset
  return side


def make_multihop_side_inputs_tf(long_paragraph_breakpoints, long_paragraph_ids,
                                 long_sentence_ids, global_paragraph_breakpoints, local_radius,
                                 relative_pos_max_distance, use_hard_g2l_mask=False,
                                 ignore_hard_g2l_mask=None, use_hard_l2g_mask=False,
                                 l2g_linked_ids=None):
  """The side inputs of a multi-hop QA input (WikiHop, HotpotQA), as the official
  `multihop_utils.make_global_local_transformer_side_inputs` (one example per row, no packing).

  The long input is cut into paragraphs (long_paragraph_breakpoints: each candidate, the
  question, each document), and the global input likewise (global_paragraph_breakpoints: each
  candidate's global token, the question's, each document's paragraph token with its sentence
  tokens). Local attention stays inside a paragraph; every real long / global token sees every
  real global token (and the other way round) unless a hard mask says otherwise; padding sees
  padding only.

  Args:
    long_paragraph_breakpoints: int [batch, long_seq_len], 1 at each paragraph's last token.
    long_paragraph_ids: int [batch, long_seq_len], the global index of each long token's
      paragraph token (-1 for none: candidates, question, padding).
    long_sentence_ids: int [batch, long_seq_len], the global index of each long token's
      sentence token (each candidate and each question word piece is a sentence; padding -1).
    global_paragraph_breakpoints: int [batch, global_seq_len], 1 at the last global token of
      each global paragraph.
    local_radius: the model's local radius.
    relative_pos_max_distance: D (0: no relative ids).
    use_hard_g2l_mask: a global token sees only the long tokens of its sentence or paragraph
      (or everything, where ignore_hard_g2l_mask is 1).
    ignore_hard_g2l_mask: int [batch, global_seq_len] or None: 1 for global tokens that see
      every real long token under the hard g2l mask.
    use_hard_l2g_mask: a long token sees only its sentence's and its paragraph's global tokens.
    l2g_linked_ids: int [batch, long_seq_len] or None: the global index each long token is
      linked to (-1: none), e.g. a candidate's mentions to the candidate's global token.

  Returns:
    dict of the 8 side inputs (relative ids None when D is 0). Relative ids: l2l and g2g
    clipped distances 0..2D, g2g pairs in different global paragraphs 2D + 3 (the third
    reserved id); l2g / g2l 2D + 2 for a long token of the global token's sentence or
    paragraph, or linked to it, else 2D + 1.
  """
  long_paragraph_breakpoints = tf.convert_to_tensor(long_paragraph_breakpoints)
  global_paragraph_breakpoints = tf.convert_to_tensor(global_paragraph_breakpoints)
  long_paragraph_ids = tf.convert_to_tensor(long_paragraph_ids)
  long_sentence_ids = tf.convert_to_tensor(long_sentence_ids)
  long_segments = example_ids_from_breakpoints_tf(long_paragraph_breakpoints)
  global_segments = example_ids_from_breakpoints_tf(global_paragraph_breakpoints)
  long_real = tf.minimum(long_segments, 1)
  global_real = tf.minimum(global_segments, 1)
  batch_size, long_seq_len = tf.shape(long_segments)[0], tf.shape(long_segments)[1]
  global_seq_len = tf.shape(global_segments)[1]
  side = {name: None for name in SIDE_INPUT_NAMES}
  side["l2l_att_mask"] = make_local_segmented_att_mask_tf(long_segments, local_radius)
  side["g2g_att_mask"] = make_segmented_att_mask_tf(global_real)
  l2g_mask = tf.cast(tf.equal(long_real[:, :, tf.newaxis], global_real[:, tf.newaxis, :]),
                     tf.int32)
  g2l_mask = tf.transpose(l2g_mask, [0, 2, 1])
  global_range = tf.range(global_seq_len, dtype=long_sentence_ids.dtype)[tf.newaxis,
                                                                          tf.newaxis, :]
  # [batch, long, global]: the long token is in the global token's sentence / paragraph.
  in_sentence = tf.equal(long_sentence_ids[:, :, tf.newaxis], global_range)
  in_paragraph = tf.equal(tf.cast(long_paragraph_ids, long_sentence_ids.dtype)[:, :, tf.newaxis],
                          global_range)
  belongs = tf.logical_or(in_sentence, in_paragraph)
  if use_hard_g2l_mask:
    hard = tf.transpose(belongs, [0, 2, 1])
    if ignore_hard_g2l_mask is not None:
      ignore = tf.equal(tf.convert_to_tensor(ignore_hard_g2l_mask), 1)[:, :, tf.newaxis]
      hard = tf.logical_or(hard, ignore)
    g2l_mask *= tf.cast(hard, tf.int32)
  if use_hard_l2g_mask:
    l2g_mask *= tf.cast(belongs, tf.int32)
  side["l2g_att_mask"], side["g2l_att_mask"] = l2g_mask, g2l_mask
  if relative_pos_max_distance > 0:
    distance = relative_pos_max_distance
    window = _relative_offset_ids_tf(tf.range(-local_radius, local_radius + 1), distance)
    side["l2l_relative_att_ids"] = tf.tile(window[tf.newaxis, tf.newaxis],
                                           [batch_size, long_seq_len, 1])
    positions = tf.range(global_seq_len)
    full = _relative_offset_ids_tf(positions[tf.newaxis, :] - positions[:, tf.newaxis], distance)
    offset = relative_position_vocab_size(distance)
    other_paragraph = tf.not_equal(global_segments[:, :, tf.newaxis],
                                   global_segments[:, tf.newaxis, :])
    side["g2g_relative_att_ids"] = tf.where(other_paragraph, offset + 2, full[tf.newaxis])
    related = belongs
    if l2g_linked_ids is not None:
      linked = tf.cast(tf.convert_to_tensor(l2g_linked_ids), long_sentence_ids.dtype)
      related = tf.logical_or(related, tf.equal(linked[:, :, tf.newaxis], global_range))
    related = tf.cast(related, tf.int32)
    side["l2g_relative_att_ids"] = related + offset
    side["g2l_relative_att_ids"] = tf.transpose(related, [0, 2, 1]) + offset
  return side


def with_side_inputs(features, side, local_radius, long_seq_len, global_seq_len):
  """`features` plus the side inputs that are not None, as int32 with their static shapes.

  Args:
    features: dict of batched record features (token_ids [batch, L] gives the batch size).
    side: dict of side inputs (l2l_* [batch, L, 2 * local_radius + 1], g2g_* [batch, G, G],
      l2g_* [batch, L, G], g2l_* [batch, G, L]; None for one the layout does not use).
    local_radius: the config's local_radius.
    long_seq_len: L, or None (a batch cut to its own length).
    global_seq_len: G, or None.

  Returns:
    A new dict.
  """
  batch = tf.compat.dimension_value(features["token_ids"].shape[0])
  window = 2 * local_radius + 1
  shapes = {"l2l": [batch, long_seq_len, window], "g2g": [batch, global_seq_len, global_seq_len],
            "l2g": [batch, long_seq_len, global_seq_len],
            "g2l": [batch, global_seq_len, long_seq_len]}
  out = dict(features)
  for name, value in side.items():
    if value is not None:
      value = tf.cast(value, tf.int32)
      value.set_shape(shapes[name[:3]])
      out[name] = value
  return out
