"""Tests for beam_search.py: a toy model over fixed random tables, decoded by TensorFlow and by
an exhaustive NumPy search / a plain-Python reimplementation of the same beam search.

The toy model scores the token at step i from tables indexed by the step and the last id, plus
(stateful=True) the running sum of consumed ids and the id consumed one step earlier, both kept
in fixed-shape states ("sum" [n], a "history" cache [n, decode_length] written at position i),
plus a per-row bias state [n, vocab]. A beam search that reorders its states wrongly scores
different prefixes than the NumPy references, which recompute everything from the prefix.
"""

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

import modeling
from translation import beam_search

tf1 = tf.compat.v1

EOS = 2
SUM_MODULUS = 5


# ---------------------------------------------------------------- the toy model, twice


def _tables(vocab, length, seed, stateful=True):
  """Random logit tables: by (step, last id), by (id sum mod 5), by previous id."""
  rng = np.random.RandomState(seed)
  tables = {
      "step": rng.normal(0.0, 1.5, size=(length, vocab, vocab)).astype(np.float32),
      "sum": rng.normal(0.0, 1.5, size=(SUM_MODULUS, vocab)).astype(np.float32),
      "prev": rng.normal(0.0, 1.5, size=(vocab, vocab)).astype(np.float32),
  }
  if not stateful:
    tables["sum"][:] = 0.0
    tables["prev"][:] = 0.0
  return tables


def _row_biases(batch, vocab, seed):
  return np.random.RandomState(seed + 1000).normal(0.0, 1.0, size=(batch, vocab)).astype(
      np.float32)


def _tf_model(tables, max_step=None):
  """symbols_to_logits_fn over the tables; max_step asserts the loop never runs past it."""
  step_table = tf.constant(tables["step"])
  sum_table = tf.constant(tables["sum"])
  prev_table = tf.constant(tables["prev"])
  length = tables["step"].shape[0]

  def symbols_to_logits_fn(ids, i, states):
    history = states["cache"]["history"] + tf.expand_dims(ids, 1) * tf.one_hot(
        i, length, dtype=tf.int32)
    running_sum = states["sum"] + ids
    prev = tf.gather(history, tf.maximum(i - 1, 0), axis=1)
    logits = (tf.gather(tf.gather(step_table, i), ids)
              + tf.gather(sum_table, running_sum % SUM_MODULUS)
              + tf.gather(prev_table, prev)
              + states["bias"])
    if max_step is not None:
      with tf.control_dependencies([tf1.assert_less_equal(i, max_step)]):
        logits = tf.identity(logits)
    return logits, {"sum": running_sum, "cache": {"history": history}, "bias": states["bias"]}

  return symbols_to_logits_fn


def _tf_states(bias, length):
  """Initial states [batch, ...] of the toy model for per-row biases [batch, vocab]."""
  batch = modeling.get_shape_list(bias)[0]
  return {"sum": tf.zeros([batch], tf.int32),
          "cache": {"history": tf.zeros([batch, length], tf.int32)},
          "bias": bias}


def _np_log_probs(tables, bias, consumed):
  """float64 log-probs of the next token after `consumed` (initial id, then generated ids)."""
  i = len(consumed) - 1
  logits = (tables["step"][i, consumed[-1]].astype(np.float64)
            + tables["sum"][sum(consumed) % SUM_MODULUS]
            + tables["prev"][consumed[max(i - 1, 0)]]
            + bias)
  top = np.max(logits)
  return logits - top - np.log(np.sum(np.exp(logits - top)))


def _penalty(length, alpha):
  return ((5.0 + length) / 6.0) ** alpha


# ---------------------------------------------------------------- NumPy references


def _brute_force(tables, bias, initial_id, length, alpha, beam_size):
  """Every hypothesis: ending in eos (first eos) or cut at `length`; ranked like beam_search.

  Returns:
    (ids [beam_size, length], scores [beam_size], lengths [beam_size]) of the finished
    hypotheses best first, then the cut ones best first, then empty slots.
  """
  finished, cut = [], []

  def expand(prefix, log_prob):
    log_probs = _np_log_probs(tables, bias, [initial_id] + prefix)
    for token in range(len(log_probs)):
      total = log_prob + log_probs[token]
      if total == -np.inf:
        continue
      seq = prefix + [token]
      if token == EOS:
        finished.append((total / _penalty(len(seq), alpha), seq))
      elif len(seq) == length:
        cut.append((total / _penalty(length, alpha), seq))
      else:
        expand(seq, total)

  expand([], 0.0)
  ranked = (sorted(finished, key=lambda x: -x[0]) + sorted(cut, key=lambda x: -x[0]))[:beam_size]
  return _pack(ranked, beam_size, length)


def _pack(ranked, beam_size, length):
  ids = np.zeros((beam_size, length), np.int32)
  scores = np.full(beam_size, -np.inf)
  lengths = np.zeros(beam_size, np.int32)
  for k, (score, seq) in enumerate(ranked):
    ids[k, :len(seq)] = seq
    scores[k] = score
    lengths[k] = len(seq)
  return ids, scores, lengths


def _numpy_beam_search(tables, bias, initial_id, beam_size, length, alpha):
  """Plain-Python alive / finished beam search (2 * beam_size candidates a step), no early stop.

  Returns:
    (ids [beam_size, length], scores [beam_size], lengths [beam_size]), as beam_search.
  """
  alive = [(0.0, [])]
  finished = []
  for i in range(length):
    candidates = []
    for log_prob, seq in alive:
      log_probs = _np_log_probs(tables, bias, [initial_id] + seq)
      candidates.extend((log_prob + lp, seq + [token]) for token, lp in enumerate(log_probs))
    candidates = [c for c in candidates if c[0] > -np.inf]
    top = sorted(candidates, key=lambda x: -x[0])[:2 * beam_size]
    alive = [c for c in top if c[1][-1] != EOS][:beam_size]
    finished += [(lp / _penalty(i + 1, alpha), seq) for lp, seq in top if seq[-1] == EOS]
    finished = sorted(finished, key=lambda x: -x[0])[:beam_size]
    if not alive:
      break
  cut = [(lp / _penalty(length, alpha), seq) for lp, seq in alive if len(seq) == length]
  return _pack((finished + cut)[:beam_size], beam_size, length)


def _numpy_greedy(tables, bias, initial_id, length):
  seq = []
  for _ in range(length):
    token = int(np.argmax(_np_log_probs(tables, bias, [initial_id] + seq)))
    seq.append(token)
    if token == EOS:
      break
  ids = np.zeros(length, np.int32)
  ids[:len(seq)] = seq
  return ids, len(seq)


def _path_log_prob(tables, bias, initial_id, seq):
  total = 0.0
  for i, token in enumerate(seq):
    total += _np_log_probs(tables, bias, [initial_id] + list(seq[:i]))[token]
  return total


# ---------------------------------------------------------------- running the TF decoders


def _run_beam(tables, initial_ids, bias, beam_size, alpha, stop_early=True, max_step=None,
              dynamic_batch=True):
  """beam_search in a tf.compat.v1 graph and Session; returns NumPy (ids, scores, lengths)."""
  length, vocab = tables["step"].shape[0], tables["step"].shape[2]
  with tf.Graph().as_default():
    batch = None if dynamic_batch else len(initial_ids)
    ids_in = tf1.placeholder(tf.int32, [batch])
    bias_in = tf1.placeholder(tf.float32, [batch, vocab])
    outputs = beam_search.beam_search(
        _tf_model(tables, max_step), ids_in, beam_size, length, vocab, alpha,
        states=_tf_states(bias_in, length), eos_id=EOS, stop_early=stop_early)
    with tf1.Session() as sess:
      return sess.run(outputs, {ids_in: initial_ids, bias_in: bias})


def _run_greedy(tables, initial_ids, bias):
  length = tables["step"].shape[0]
  with tf.Graph().as_default():
    outputs = beam_search.greedy_search(
        _tf_model(tables), tf.constant(initial_ids, tf.int32), length,
        states=_tf_states(tf.constant(bias), length), eos_id=EOS)
    with tf1.Session() as sess:
      return sess.run(outputs)


def _assert_rows_match(got, want_rows):
  ids, scores, lengths = got
  for row, (want_ids, want_scores, want_lengths) in enumerate(want_rows):
    np.testing.assert_array_equal(lengths[row], want_lengths, err_msg="row %d" % row)
    np.testing.assert_array_equal(ids[row], want_ids, err_msg="row %d" % row)
    np.testing.assert_allclose(scores[row], want_scores, rtol=0, atol=1e-5,
                               err_msg="row %d" % row)


def _assert_well_formed(ids, lengths):
  """eos (if any) only at length - 1, zeros after; empty slots all zero."""
  for seq, n in zip(ids.reshape(-1, ids.shape[-1]), lengths.reshape(-1)):
    assert not np.any(seq[:max(n - 1, 0)] == EOS)
    assert np.all(seq[n:] == beam_search.PAD_ID)


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("stateful", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 0.8])
def test_exhaustive_beam_equals_brute_force(stateful, alpha):
  vocab, length = 5, 4
  tables = _tables(vocab, length, seed=3, stateful=stateful)
  initial_ids = np.array([0, 3, 4], np.int32)
  bias = _row_biases(3, vocab, seed=3)
  beam_size = vocab ** length  # Never drops a prefix: the whole ranking is exact.
  got = _run_beam(tables, initial_ids, bias, beam_size, alpha)
  want = [_brute_force(tables, bias[b], initial_ids[b], length, alpha, beam_size)
          for b in range(3)]
  _assert_rows_match(got, want)
  # 85 hypotheses end in eos (1 + 4 + 16 + 64), 256 are cut at length 4, the rest is empty.
  assert np.all(got[2][:, :85] <= length) and np.all(got[2][:, 85:341] == length)
  assert np.all(got[1][:, 341:] == -np.inf) and np.all(got[2][:, 341:] == 0)
  _assert_well_formed(got[0], got[2])


@pytest.mark.parametrize("beam_size,alpha", [(1, 0.6), (2, 0.0), (3, 0.6), (4, 1.2)])
def test_beam_search_matches_numpy_reimplementation(beam_size, alpha):
  vocab, length = 7, 6
  tables = _tables(vocab, length, seed=beam_size)
  initial_ids = np.array([1, 5, 6], np.int32)
  bias = _row_biases(3, vocab, seed=beam_size)
  got = _run_beam(tables, initial_ids, bias, beam_size, alpha)
  want = [_numpy_beam_search(tables, bias[b], initial_ids[b], beam_size, length, alpha)
          for b in range(3)]
  _assert_rows_match(got, want)
  _assert_well_formed(got[0], got[2])


def test_stop_early_does_not_change_results():
  vocab, length = 6, 8
  tables = _tables(vocab, length, seed=11)
  tables["step"][:, :, EOS] += 1.0  # Finished sets fill up, so the early stop can trigger.
  initial_ids = np.array([0, 4], np.int32)
  bias = _row_biases(2, vocab, seed=11)
  early = _run_beam(tables, initial_ids, bias, 3, 0.6, stop_early=True)
  full = _run_beam(tables, initial_ids, bias, 3, 0.6, stop_early=False)
  for a, b in zip(early, full):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("alpha,step1_logits", [
    (0.0, [-10.0, -10.0, 0.0, -10.0, 3.0]),  # Best finished beats the best alive log-prob...
    (2.0, [-10.0, -10.0, 0.0, -10.0, 0.0]),  # ...the worst one beats it but not its bound.
])
def test_stop_early_waits_until_the_worst_finished_is_unbeatable(alpha, step1_logits):
  """After step 1 the finished set (beam 2) is full, {[2], [1, 2]}, and would stop a search
  that compared the wrong numbers; [1, 4, 2] (finished at step 2) must replace [1, 2]."""
  vocab, length = 5, 4
  tables = _tables(vocab, length, seed=29, stateful=False)
  tables["step"][:] = 0.0
  tables["step"][0, 0] = [-10.0, 4.0, 5.0, 0.0, -10.0]
  tables["step"][1, 1] = step1_logits
  tables["step"][2, 4, EOS] = 5.0
  bias = np.zeros((1, vocab), np.float32)
  initial_ids = np.array([0], np.int32)
  want = _brute_force(tables, bias[0], 0, length, alpha, 2)
  np.testing.assert_array_equal(want[0], [[2, 0, 0, 0], [1, 4, 2, 0]])
  for stop_early in (True, False):
    _assert_rows_match(_run_beam(tables, initial_ids, bias, 2, alpha, stop_early=stop_early),
                       [want])


def test_batch_rows_are_independent():
  vocab, length = 6, 5
  tables = _tables(vocab, length, seed=5)
  initial_ids = np.array([3, 0, 5], np.int32)
  bias = _row_biases(3, vocab, seed=5)
  together = _run_beam(tables, initial_ids, bias, 3, 0.6)
  for row in range(3):
    alone = _run_beam(tables, initial_ids[row:row + 1], bias[row:row + 1], 3, 0.6)
    np.testing.assert_array_equal(together[0][row], alone[0][0])
    np.testing.assert_allclose(together[1][row], alone[1][0], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(together[2][row], alone[2][0])


def test_eos_ends_hypotheses_and_pads_with_zero():
  vocab, length = 6, 6
  tables = _tables(vocab, length, seed=7)
  # eos is near certain at step 1 after an even id and at step 2 always: lengths 2 or 3.
  tables["step"][1, 0::2, EOS] += 20.0
  tables["step"][2, :, EOS] += 20.0
  initial_ids = np.array([0, 1, 3], np.int32)
  bias = _row_biases(3, vocab, seed=7)
  # Every finished set is full and unbeatable after step 2: the loop must not run step 3.
  ids, scores, lengths = _run_beam(tables, initial_ids, bias, 3, 0.6, max_step=2)
  assert set(lengths.reshape(-1)) == {2, 3}
  np.testing.assert_array_equal(ids[np.arange(3)[:, None], np.arange(3)[None], lengths - 1],
                                np.full((3, 3), EOS))
  _assert_well_formed(ids, lengths)
  want = [_numpy_beam_search(tables, bias[b], initial_ids[b], 3, length, 0.6) for b in range(3)]
  _assert_rows_match((ids, scores, lengths), want)

  greedy_ids, greedy_lengths = _run_greedy(tables, initial_ids, bias)
  assert set(greedy_lengths) <= {2, 3}
  for row in range(3):
    want_ids, want_length = _numpy_greedy(tables, bias[row], initial_ids[row], length)
    np.testing.assert_array_equal(greedy_ids[row], want_ids)
    assert greedy_lengths[row] == want_length


@pytest.mark.parametrize("eos_step", [None, 2])
def test_beam_one_equals_greedy(eos_step):
  vocab, length = 6, 5
  tables = _tables(vocab, length, seed=13)
  # eos is never the runner-up token (so beam 1 keeps no other finished hypothesis): impossible
  # everywhere (-inf), or certain at eos_step.
  tables["step"][:, :, EOS] = -np.inf
  if eos_step is not None:
    tables["step"][eos_step, :, EOS] = 40.0
  initial_ids = np.array([0, 3, 5], np.int32)
  bias = _row_biases(3, vocab, seed=13)
  ids, scores, lengths = _run_beam(tables, initial_ids, bias, 1, 0.6)
  greedy_ids, greedy_lengths = _run_greedy(tables, initial_ids, bias)
  np.testing.assert_array_equal(ids[:, 0], greedy_ids)
  np.testing.assert_array_equal(lengths[:, 0], greedy_lengths)
  np.testing.assert_array_equal(greedy_lengths, length if eos_step is None else eos_step + 1)
  for row in range(3):
    want_ids, _ = _numpy_greedy(tables, bias[row], initial_ids[row], length)
    np.testing.assert_array_equal(greedy_ids[row], want_ids)
    seq = want_ids[:greedy_lengths[row]]
    want_score = (_path_log_prob(tables, bias[row], initial_ids[row], seq)
                  / _penalty(len(seq), 0.6))
    assert abs(scores[row, 0] - want_score) < 1e-5


def test_rows_without_eos_return_cut_hypotheses():
  vocab, length = 5, 4
  tables = _tables(vocab, length, seed=17)
  tables["step"][:, :, EOS] = -np.inf
  initial_ids = np.array([1, 4], np.int32)
  bias = _row_biases(2, vocab, seed=17)
  got = _run_beam(tables, initial_ids, bias, 4, 0.5)
  want = [_brute_force(tables, bias[b], initial_ids[b], length, 0.5, 4) for b in range(2)]
  _assert_rows_match(got, want)
  assert np.all(got[2] == length)


def test_tf_function_with_xla_and_saved_model(tmp_path):
  vocab, length, beam_size, alpha = 6, 5, 3, 0.6
  tables = _tables(vocab, length, seed=19)
  initial_ids = np.array([0, 2, 5], np.int32)
  bias = _row_biases(3, vocab, seed=19)
  want = [_numpy_beam_search(tables, bias[b], initial_ids[b], beam_size, length, alpha)
          for b in range(3)]
  model = _tf_model(tables)

  def decode(ids, row_bias):
    return beam_search.beam_search(model, ids, beam_size, length, vocab, alpha,
                                   states=_tf_states(row_bias, length), eos_id=EOS)

  xla = tf.function(decode, jit_compile=True)
  _assert_rows_match([t.numpy() for t in xla(tf.constant(initial_ids), tf.constant(bias))],
                     want)

  module = tf.Module()
  module.decode = tf.function(decode, input_signature=[
      tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, vocab], tf.float32)])
  tf.saved_model.save(module, str(tmp_path / "decoder"))
  loaded = tf.saved_model.load(str(tmp_path / "decoder"))
  _assert_rows_match([t.numpy() for t in loaded.decode(tf.constant(initial_ids),
                                                        tf.constant(bias))], want)
  ids, scores, lengths = loaded.decode(tf.constant(initial_ids[1:]), tf.constant(bias[1:]))
  _assert_rows_match([ids.numpy(), scores.numpy(), lengths.numpy()], want[1:])


def test_bad_arguments_are_refused():
  model = _tf_model(_tables(5, 3, seed=1))
  with tf.Graph().as_default():
    ids = tf.constant([0], tf.int32)
    for kwargs, match in [(dict(beam_size=0), "beam_size"),
                          (dict(decode_length=tf.constant(3)), "decode_length"),
                          (dict(vocab_size=1), "vocab_size")]:
      args = dict(beam_size=2, decode_length=3, vocab_size=5)
      args.update(kwargs)
      with pytest.raises(ValueError, match=match):
        beam_search.beam_search(model, ids, alpha=0.0, **args)
    with pytest.raises(ValueError, match="decode_length"):
      beam_search.greedy_search(model, ids, 0)


def test_brute_force_reference_is_consistent():
  """The exhaustive reference ranks eos hypotheses whose probabilities sum as expected."""
  vocab, length = 4, 3
  tables = _tables(vocab, length, seed=23)
  bias = _row_biases(1, vocab, seed=23)[0]
  # All hypotheses (ended by eos or cut) form a complete event space: probabilities sum to 1.
  total = 0.0
  for n in range(1, length + 1):
    for seq in itertools.product(range(vocab), repeat=n):
      if EOS in seq[:-1] or (seq[-1] != EOS and n < length):
        continue
      total += math.exp(_path_log_prob(tables, bias, 1, seq))
  assert abs(total - 1.0) < 1e-9
  _, scores, _ = _brute_force(tables, bias, 1, length, 0.0, vocab ** length)
  assert np.all(np.diff(scores[np.isfinite(scores)][:1 + 3 + 9]) <= 0)
