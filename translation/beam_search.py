# coding=utf-8
"""Batched beam search and greedy decoding for an autoregressive model, in graph mode.

Generic over the model: the caller hands in `symbols_to_logits_fn`, which scores the next token
from the last token, the step index and a nested structure of fixed-shape states (typically a
key/value cache preallocated to `decode_length` positions that the model writes at position i).
Every loop variable keeps one shape through the loop, so both decoders run inside a
tf.compat.v1 graph (Session, Estimator model_fn), inside a tf.function (SavedModel export) and
under XLA (`jit_compile=True`, TPU) when the batch size is static.

The search follows tensor2tensor's beam search (alive vs finished hypotheses, 2 * beam_size
candidates a step so that beam_size of them are always non-eos) with these choices of ours:

- Scores are sums of log-probabilities (log_softmax of the logits in float32). A finished
  hypothesis of n tokens (eos included) scores log_prob / ((5 + n) / 6) ** alpha (the GNMT
  length penalty; alpha=0 is none).
- With stop_early, the loop ends once, for every batch row, the finished set is full and its
  worst score beats the best score any alive hypothesis could still reach; the finished sets are
  then final, so stop_early changes the running time, never the result.
- The returned beam holds the finished hypotheses best first; slots the finished set leaves empty
  are filled with the best alive hypotheses cut at decode_length without eos, best first (so a
  row where nothing emitted eos still gets results); a slot that stays empty has score -inf,
  length 0 and ids all 0.
- beam_size=1 is greedy decoding except that a hypothesis ending in eos as the runner-up token
  is kept as finished and returned when it outscores the argmax path.
- The returned ids are the generated tokens only (not initial_ids), eos included, padded with 0
  after eos.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import tensorflow as tf

import modeling

tf1 = tf.compat.v1

PAD_ID = 0
_NEG_INF = float("-inf")


def _check_positive_int(name, value):
  """Raises ValueError unless `value` is a Python int >= 1 (shapes must be static)."""
  if isinstance(value, bool) or not isinstance(value, int) or value < 1:
    raise ValueError("%s must be a Python int >= 1, got %r" % (name, value))


def _length_penalty(length, alpha):
  """GNMT length penalty ((5 + length) / 6) ** alpha.

  Args:
    length: int32 or float32 tensor of hypothesis lengths (tokens, eos included).
    alpha: float or float32 scalar tensor; 0 gives a penalty of 1.

  Returns:
    float32 tensor with the shape of `length`.
  """
  return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def _tile_to_beam(tensor, beam_size):
  """Repeats each batch row beam_size times: [batch, ...] -> [batch * beam_size, ...].

  Row b * beam_size + k of the result is row b of the input (batch-major, beam-minor).
  """
  shape = modeling.get_shape_list(tensor)
  tiled = tf.tile(tf.expand_dims(tensor, 1), [1, beam_size] + [1] * (len(shape) - 1))
  return tf.reshape(tiled, [shape[0] * beam_size] + shape[1:])


def _gather_beams(tensor, beam_indices):
  """Picks beams of each batch row: [batch, n, ...] with [batch, m] indices -> [batch, m, ...]."""
  return tf.gather(tensor, beam_indices, batch_dims=1)


def _gather_flat_states(states, beam_indices, beam_size):
  """Reorders flat [batch * beam_size, ...] states by the chosen source beams.

  Args:
    states: nested structure of tensors [batch * beam_size, ...].
    beam_indices: int32 [batch, beam_size], the source beam (0 .. beam_size - 1) of each new beam.
    beam_size: int.

  Returns:
    The same structure, row b * beam_size + k taken from row b * beam_size + beam_indices[b, k].
  """
  batch = modeling.get_shape_list(beam_indices)[0]
  offsets = tf.expand_dims(tf.range(batch) * beam_size, 1)
  flat_indices = tf.reshape(beam_indices + offsets, [-1])
  return tf.nest.map_structure(lambda t: tf.gather(t, flat_indices), states)


def _log_probs(logits):
  """float32 log_softmax over the last axis of model logits of any float dtype."""
  return tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)


def beam_search(symbols_to_logits_fn,
                initial_ids,
                beam_size,
                decode_length,
                vocab_size,
                alpha,
                states=None,
                eos_id=1,
                stop_early=True):
  """Batched beam search with a GNMT length penalty and alive / finished hypothesis sets.

  The model contract (also what `greedy_search` calls):

    logits, new_states = symbols_to_logits_fn(ids, i, states)

      ids: int32 [batch * beam_size], the last token of each hypothesis (initial_ids at i = 0).
      i: int32 scalar tensor, the step: the token being predicted is output position i
        (0 .. decode_length - 1); `ids` is the token consumed at step i.
      states: the `states` structure, every tensor [batch * beam_size, ...] (row
        b * beam_size + k is beam k of batch row b), as returned by the previous call.
      logits: [batch * beam_size, vocab_size], any float dtype (scored in float32).
      new_states: the same structure with the same shapes and dtypes, after consuming `ids`
        (for example a key/value cache [batch * beam_size, decode_length, ...] written at
        position i). A model that wants the whole prefix keeps an int32
        [batch * beam_size, decode_length] buffer of consumed ids in its states.

    It is traced once, as the body of a while loop. In a tf.compat.v1 graph that trace may create
    the model's variables; a model traced more than once (two decoders, or an encoder pass
    outside the loop) opens its variable scope with reuse=tf.compat.v1.AUTO_REUSE.

  Args:
    symbols_to_logits_fn: the model, as above.
    initial_ids: int32 [batch], the first token fed to the model (e.g. [CLS] or a BOS id).
    beam_size: Python int >= 1.
    decode_length: Python int >= 1, the most tokens generated per hypothesis (eos included).
    vocab_size: Python int >= 2, the last dimension of the logits.
    alpha: float or float32 scalar tensor, the length-penalty exponent (0: none).
    states: None or a nested structure (dict, list, tuple) of tensors [batch, ...]; they are
      tiled to [batch * beam_size, ...] and reordered (gathered) by the chosen beams each step.
    eos_id: int, the token that ends a hypothesis.
    stop_early: stop the loop once no alive hypothesis of any row can enter its row's (full)
      finished set; False always runs decode_length steps. The results are the same.

  Returns:
    (ids, scores, lengths):
      ids: int32 [batch, beam_size, decode_length], generated tokens (initial_ids not included),
        eos included, 0 (PAD_ID) after eos.
      scores: float32 [batch, beam_size]: sum of token log-probabilities divided by the length
        penalty of the hypothesis length. Finished hypotheses come first, best first, then the
        ones cut at decode_length, best first (so a cut hypothesis may score above a finished
        one before it); -inf for an empty slot.
      lengths: int32 [batch, beam_size], tokens up to and including eos; decode_length for a
        hypothesis cut without eos; 0 for an empty slot.
  """
  _check_positive_int("beam_size", beam_size)
  _check_positive_int("decode_length", decode_length)
  _check_positive_int("vocab_size", vocab_size)
  if vocab_size < 2:
    raise ValueError("vocab_size must be >= 2, got %d" % vocab_size)
  with tf1.name_scope("beam_search"):
    initial_ids = tf.convert_to_tensor(initial_ids, dtype=tf.int32)
    batch = modeling.get_shape_list(initial_ids, expected_rank=1)[0]
    states = {} if states is None else states
    flat_states = tf.nest.map_structure(
        lambda t: _tile_to_beam(tf.convert_to_tensor(t), beam_size), states)
    alpha = tf.cast(alpha, tf.float32)
    # A finished score can only fall as the hypothesis grows (log-probs are <= 0), so the best
    # any alive hypothesis can still reach is its log-prob over the largest penalty.
    max_penalty = tf.maximum(_length_penalty(1, alpha), _length_penalty(decode_length, alpha))

    # Beam 0 starts alive with log-prob 0; the others are empty (-inf) so that step 0 does not
    # expand beam_size copies of the same hypothesis.
    alive_log_probs = tf.tile(
        tf.constant([[0.0] + [_NEG_INF] * (beam_size - 1)], tf.float32), [batch, 1])
    alive_last = tf.tile(tf.expand_dims(initial_ids, 1), [1, beam_size])
    alive_seq = tf.zeros([batch, beam_size, decode_length], tf.int32)
    finished_seq = tf.zeros([batch, beam_size, decode_length], tf.int32)
    finished_scores = tf.fill([batch, beam_size], _NEG_INF)
    finished_lengths = tf.zeros([batch, beam_size], tf.int32)

    def _rows_done(alive_log_probs, finished_scores):
      """[batch] bool: nothing alive can change the row's finished set any more."""
      best_alive = alive_log_probs[:, 0] / max_penalty
      finished_full = tf.reduce_all(finished_scores > _NEG_INF, axis=1)
      bound_met = tf.logical_and(finished_full,
                                 tf.reduce_min(finished_scores, axis=1) > best_alive)
      return tf.logical_or(bound_met, tf.equal(alive_log_probs[:, 0], _NEG_INF))

    def _cond(i, alive_seq, alive_log_probs, alive_last, finished_seq, finished_scores,
              finished_lengths, flat_states):
      del alive_seq, alive_last, finished_seq, finished_lengths, flat_states
      if not stop_early:
        return i < decode_length
      return tf.logical_and(
          i < decode_length,
          tf.logical_not(tf.reduce_all(_rows_done(alive_log_probs, finished_scores))))

    def _body(i, alive_seq, alive_log_probs, alive_last, finished_seq, finished_scores,
              finished_lengths, flat_states):
      logits, new_flat_states = symbols_to_logits_fn(
          tf.reshape(alive_last, [-1]), i, flat_states)
      log_probs = tf.reshape(_log_probs(logits), [batch, beam_size, vocab_size])
      candidate_log_probs = tf.expand_dims(alive_log_probs, 2) + log_probs

      # 2 * beam_size candidates: at most beam_size of them end in eos (one per beam), so at
      # least beam_size stay alive.
      top_log_probs, top_indices = tf.math.top_k(
          tf.reshape(candidate_log_probs, [batch, beam_size * vocab_size]), k=2 * beam_size)
      top_beams = top_indices // vocab_size
      top_ids = top_indices % vocab_size
      write_i = tf.one_hot(i, decode_length, dtype=tf.int32)
      top_seq = (_gather_beams(alive_seq, top_beams)
                 + tf.expand_dims(top_ids, 2) * write_i)  # Positions > i stay 0.
      top_eos = tf.equal(top_ids, eos_id)

      # Alive: the best beam_size candidates that did not end in eos.
      alive_candidates = tf.where(top_eos, tf.fill(tf.shape(top_log_probs), _NEG_INF),
                                  top_log_probs)
      new_alive_log_probs, alive_pick = tf.math.top_k(alive_candidates, k=beam_size)
      new_alive_seq = _gather_beams(top_seq, alive_pick)
      new_alive_last = _gather_beams(top_ids, alive_pick)
      new_flat_states = _gather_flat_states(
          new_flat_states, _gather_beams(top_beams, alive_pick), beam_size)

      # Finished: the best beam_size of the old finished set and the candidates ending in eos.
      new_finished = tf.logical_and(top_eos, top_log_probs > _NEG_INF)
      penalised = top_log_probs / _length_penalty(i + 1, alpha)
      all_scores = tf.concat(
          [finished_scores,
           tf.where(new_finished, penalised, tf.fill(tf.shape(penalised), _NEG_INF))], axis=1)
      all_seq = tf.concat([finished_seq, top_seq], axis=1)
      all_lengths = tf.concat(
          [finished_lengths, tf.fill(tf.shape(top_ids), i + 1)], axis=1)
      # top_k puts the lower index first on ties: an old finished hypothesis keeps its place.
      new_finished_scores, finished_pick = tf.math.top_k(all_scores, k=beam_size)
      new_finished_seq = _gather_beams(all_seq, finished_pick)
      new_finished_lengths = _gather_beams(all_lengths, finished_pick)

      return (i + 1, new_alive_seq, new_alive_log_probs, new_alive_last, new_finished_seq,
              new_finished_scores, new_finished_lengths, new_flat_states)

    (steps, alive_seq, alive_log_probs, _, finished_seq, finished_scores, finished_lengths,
     _) = tf1.while_loop(
         _cond, _body,
         [tf.constant(0), alive_seq, alive_log_probs, alive_last, finished_seq, finished_scores,
          finished_lengths, flat_states],
         maximum_iterations=decode_length)

    # Slot k: finished k while the row has that many, then the best alive ones (all of length
    # `steps`, so their order by log-prob is their order by penalised score).
    num_finished = tf.reduce_sum(tf.cast(finished_scores > _NEG_INF, tf.int32), axis=1,
                                 keepdims=True)
    slots = tf.expand_dims(tf.range(beam_size), 0)
    pick = tf.where(slots < num_finished, slots, beam_size + slots - num_finished)
    alive_scores = alive_log_probs / _length_penalty(steps, alpha)
    scores = _gather_beams(tf.concat([finished_scores, alive_scores], axis=1), pick)
    ids = _gather_beams(tf.concat([finished_seq, alive_seq], axis=1), pick)
    lengths = _gather_beams(
        tf.concat([finished_lengths, tf.fill(tf.shape(finished_lengths), steps)], axis=1), pick)
    valid = scores > _NEG_INF
    ids = tf.where(tf.expand_dims(valid, 2), ids, tf.zeros_like(ids))
    lengths = tf.where(valid, lengths, tf.zeros_like(lengths))
    return ids, scores, lengths


def greedy_search(symbols_to_logits_fn, initial_ids, decode_length, states=None, eos_id=1):
  """Batched greedy decoding (argmax each step), stopping when every row has emitted eos.

  Args:
    symbols_to_logits_fn: the model, with the contract documented in `beam_search`, called with
      ids int32 [batch], step i, and states [batch, ...] (no beam dimension); returns logits
      [batch, vocab_size] and the new states.
    initial_ids: int32 [batch], the first token fed to the model.
    decode_length: Python int >= 1, the most tokens generated per row (eos included).
    states: None or a nested structure of tensors [batch, ...].
    eos_id: int, the token that ends a row.

  Returns:
    (ids, lengths):
      ids: int32 [batch, decode_length], generated tokens (initial_ids not included), eos
        included, 0 (PAD_ID) after eos.
      lengths: int32 [batch], tokens up to and including eos, decode_length without eos.
  """
  _check_positive_int("decode_length", decode_length)
  with tf1.name_scope("greedy_search"):
    initial_ids = tf.convert_to_tensor(initial_ids, dtype=tf.int32)
    batch = modeling.get_shape_list(initial_ids, expected_rank=1)[0]
    states = {} if states is None else tf.nest.map_structure(tf.convert_to_tensor, states)

    def _cond(i, ids, last, finished, lengths, states):
      del ids, last, lengths, states
      return tf.logical_and(i < decode_length, tf.logical_not(tf.reduce_all(finished)))

    def _body(i, ids, last, finished, lengths, states):
      logits, new_states = symbols_to_logits_fn(last, i, states)
      chosen = tf.argmax(tf.cast(logits, tf.float32), axis=-1, output_type=tf.int32)
      chosen = tf.where(finished, tf.fill(tf.shape(chosen), PAD_ID), chosen)
      ids += tf.expand_dims(chosen, 1) * tf.one_hot(i, decode_length, dtype=tf.int32)
      ends = tf.logical_and(tf.logical_not(finished), tf.equal(chosen, eos_id))
      lengths = tf.where(ends, tf.fill(tf.shape(lengths), i + 1), lengths)
      return i + 1, ids, chosen, tf.logical_or(finished, ends), lengths, new_states

    _, ids, _, _, lengths, _ = tf1.while_loop(
        _cond, _body,
        [tf.constant(0), tf.zeros([batch, decode_length], tf.int32), initial_ids,
         tf.zeros([batch], tf.bool), tf.fill([batch], decode_length), states],
        maximum_iterations=decode_length)
    return ids, lengths
