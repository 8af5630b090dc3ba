# coding=utf-8
"""Vectorised masked-LM masking: the official create_masked_lm_predictions rules over a batch.

Used by create_pretraining_data.py's id pipeline and etc_model/create_pretraining_data.py:
create_id_masked_lm_predictions masks a batch of id rows in place (whole-word masking with a
table of "##" pieces), with NumPy only.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import numpy as np


def create_id_masked_lm_predictions(input_ids, lengths, masked_lm_prob,
                                    max_predictions_per_seq, special_ids, vocab_size,
                                    subword_table, np_rng):
  """Masks a batch of instances in place, with the official rules.

  Per instance: num_to_predict = min(max_predictions_per_seq, max(1, round(length * prob))); the
  candidates ([CLS]/[SEP] excluded; with whole-word masking a "##" piece joins the previous
  candidate's group) are visited in random order and a group is taken if it still fits; each chosen
  token becomes [MASK] 80%, itself 10%, a uniformly random vocabulary entry 10%.

  Args:
    input_ids: int32 [N, max_seq_length], zero-padded; modified in place.
    lengths: int [N], real lengths.
    masked_lm_prob: float.
    max_predictions_per_seq: int.
    special_ids: dict with "cls", "sep", "mask" ids.
    vocab_size: int, random replacements are drawn from [0, vocab_size).
    subword_table: bool [vocab_size] (True for "##" pieces) for whole-word masking, or None.
    np_rng: numpy Generator.

  Returns:
    (positions [N, P] int32, label_ids [N, P] int32, num_masked [N] int, kinds) where kinds is a
    (mask, random, kept) count tuple.
  """
  n, seq_len = input_ids.shape
  p = max_predictions_per_seq
  cols = np.arange(seq_len)
  real = cols[None, :] < lengths[:, None]
  cand = real & (input_ids != special_ids["cls"]) & (input_ids != special_ids["sep"])
  # Python's round() and np.round both round half to even.
  num_to_predict = np.minimum(p, np.maximum(1, np.round(lengths * masked_lm_prob).astype(np.int64)))

  if subword_table is None:
    chosen = _choose_tokens(cand, num_to_predict, p, np_rng)
  else:
    chosen = _choose_whole_words(input_ids, cand, num_to_predict, subword_table, np_rng)

  mrow, mcol = np.nonzero(chosen)  # row-major: positions come out sorted within each row
  labels = input_ids[mrow, mcol].copy()
  draw = np_rng.random(len(mrow))
  keep_draw = np_rng.random(len(mrow))
  random_ids = np_rng.integers(0, vocab_size, len(mrow))
  as_mask = draw < 0.8
  as_keep = ~as_mask & (keep_draw < 0.5)
  as_random = ~as_mask & ~as_keep
  new_ids = np.where(as_mask, special_ids["mask"], np.where(as_keep, labels, random_ids))
  input_ids[mrow, mcol] = new_ids

  num_masked = chosen.sum(axis=1)
  starts_idx = np.cumsum(num_masked) - num_masked
  slot = np.arange(len(mrow)) - np.repeat(starts_idx, num_masked)
  positions = np.zeros((n, p), np.int32)
  label_ids = np.zeros((n, p), np.int32)
  positions[mrow, slot] = mcol
  label_ids[mrow, slot] = labels
  kinds = (int(as_mask.sum()), int(as_random.sum()), int(as_keep.sum()))
  return positions, label_ids, num_masked, kinds


def _choose_tokens(cand, num_to_predict, max_predictions, np_rng):
  """Per row, num_to_predict candidates chosen uniformly at random (official order: shuffled).

  Args:
    cand: bool [N, L], the maskable positions.
    num_to_predict: int [N], at most max_predictions.
    max_predictions: int.
    np_rng: numpy Generator.

  Returns:
    bool [N, L], the chosen positions.
  """
  n, seq_len = cand.shape
  keys = np_rng.random((n, seq_len), dtype=np.float32)
  keys[~cand] = 2.0
  # The max_predictions smallest keys per row (a random subset of candidates), then their order.
  k = min(max_predictions, seq_len)
  if k < seq_len:
    idx = np.argpartition(keys, k - 1, axis=1)[:, :k]
  else:
    idx = np.broadcast_to(np.arange(seq_len), (n, seq_len))
  sub_keys = np.take_along_axis(keys, idx, axis=1)
  rank = np.argsort(sub_keys, axis=1)
  idx = np.take_along_axis(idx, rank, axis=1)
  sub_keys = np.take_along_axis(sub_keys, rank, axis=1)
  take = (np.arange(k)[None, :] < num_to_predict[:, None]) & (sub_keys < 2.0)
  chosen = np.zeros((n, seq_len), dtype=bool)
  np.put_along_axis(chosen, idx, take, axis=1)
  return chosen & cand


def _choose_whole_words(input_ids, cand, num_to_predict, subword_table, np_rng):
  """Whole-word masking choice, as the official loop over shuffled word groups.

  A "##" piece joins the group of the previous candidate; groups are visited in random order and
  taken while the total stays <= num_to_predict (a group that does not fit is skipped).

  Args:
    input_ids: int [N, L].
    cand: bool [N, L], the maskable positions.
    num_to_predict: int [N].
    subword_table: bool [vocab_size], True for "##" pieces.
    np_rng: numpy Generator.

  Returns:
    bool [N, L], the chosen positions.
  """
  n, seq_len = cand.shape
  cand_before = np.cumsum(cand, axis=1) - cand
  joins = cand & subword_table[input_ids] & (cand_before > 0)
  starts = cand & ~joins
  group_id = np.cumsum(starts, axis=1) * cand  # 1..G at candidates, 0 elsewhere
  num_groups = group_id.max(axis=1) if n else np.zeros([0], np.int64)
  slots = seq_len + 1
  keys = np_rng.random((n, slots))
  keys[np.arange(slots)[None, :] > num_groups[:, None]] = 2.0
  keys[:, 0] = 3.0  # slot 0 is "not a candidate"
  order = np.argsort(keys, axis=1)
  flat_slot = np.arange(n)[:, None] * slots + group_id
  sizes = np.bincount(flat_slot[cand], minlength=n * slots).reshape(n, slots)
  sorted_sizes = np.take_along_axis(sizes, order, axis=1)
  take = np.zeros_like(sorted_sizes, dtype=bool)
  count = np.zeros([n], np.int64)
  for r in range(int(num_groups.max()) if n else 0):
    s = sorted_sizes[:, r]
    t = (s > 0) & (count + s <= num_to_predict)
    take[:, r] = t
    count += s * t
  chosen_group = np.zeros((n, slots), dtype=bool)
  np.put_along_axis(chosen_group, order, take, axis=1)
  chosen_group[:, 0] = False
  return np.take_along_axis(chosen_group, group_id, axis=1) & cand
