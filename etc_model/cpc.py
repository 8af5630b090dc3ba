# coding=utf-8
"""ETC's Contrastive Predictive Coding (CPC) loss on the sentence-level global tokens.

ETC (Ainslie et al. 2020, "ETC: Encoding Long and Structured Inputs in Transformers", section
3.4) pre-trains with masked LM plus an adaptation of CPC (van den Oord et al. 2018) in place of
BERT's next-sentence prediction: in an input of n sentences (one global "sentence summary"
token each) all the long tokens of a subset of the sentences are masked, their global tokens
stay, and the model is trained so that the hidden representation of a masked sentence's global
token is close to that of a global summary token that sees the unmasked sentence and nothing
else, with a noise-contrastive (InfoNCE) loss as in van den Oord et al.

Here, per batch of records:
  1. `select_sentences`: up to `max_sentences` sentences of each record, ceil(rate * n) of its
     n sentences, drawn by a stateless random function of a given [2] seed (the training job
     passes modeling.step_dropout_seed: the draw depends only on the global step, so a
     resumed job draws what the uninterrupted job drew).
  2. `masked_long_inputs`: the long token ids with every token of the chosen sentences
     replaced by one id (the [MASK] id of the vocabulary), and the MLM weights of predictions
     inside those sentences set to 0 (their tokens are gone).
  3. `sentence_inputs`: each chosen sentence alone (its first `max_sentence_length` tokens, the
     MLM's masked tokens put back: `unmasked_token_ids`) as an ETC input of its own: those long
     tokens and one global token, the side inputs from etc_inputs (the same config: local
     radius, relative ids, hard masks).
  4. The same EtcModel (same weights) encodes the masked records and the lone sentences; the
     query of a chosen sentence is the final global output of its global token in the masked
     record, its key the final global output of the lone sentence's global token.
  5. `info_nce`: each query's softmax over the keys of all chosen sentences of the batch (the
     other chosen sentences, of its own record and of the others, are the negatives);
     loss = mean over the chosen sentences of -log p(own key); accuracy = the share whose
     own key scores highest.

Stated by the paper: the masked sentences' tokens are masked, their global tokens stay; the
target is the representation of a global token that sees the unmasked sentence and nothing
else; an NCE loss as in CPC. Chosen here (the paper's pre-training appendix was not available
to us to check): the same encoder for both sides (no second model, no new variables, so a
checkpoint trained with or without CPC resumes either way); the score is the dot product
scaled by 1 / sqrt(hidden_size) (CPC's log-bilinear score without a learned matrix; scaled as
attention scores are: unrelated LayerNorm-ed outputs score with unit variance); in-batch
negatives;
ceil(rate * n) sentences a record (default rate 0.1 in run_pretraining), at most
`max_sentences`; gradients flow into both sides.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import math

import tensorflow as tf

from etc_model import etc_estimator
from etc_model import etc_inputs

# A logit for the keys of empty slots: far below any real score, finite (no inf - inf = NaN).
_MASKED_LOGIT = -1e9


def sentence_spans(sentence_ids, long_breakpoints, global_seq_len):
  """Where each sentence's long tokens are (sentences are contiguous runs of sentence ids).

  Args:
    sentence_ids: int32 [batch, long_seq_len], the global token of each long token (padding 0).
    long_breakpoints: int32 [batch, long_seq_len], 1 at the last long token of each document
      piece (padding follows the last one).
    global_seq_len: G.

  Returns:
    (start int32 [batch, G], length int32 [batch, G] (0 for a padding global token),
     real int32 [batch, long_seq_len] (1 on the real long tokens)).
  """
  real = tf.cast(etc_inputs.example_ids_from_breakpoints_tf(long_breakpoints) > 0, tf.int32)
  # [batch, L, G]: long token t belongs to sentence g.
  member = tf.cast(tf.equal(sentence_ids[:, :, tf.newaxis],
                            tf.range(global_seq_len, dtype=sentence_ids.dtype)), tf.int32)
  member *= real[:, :, tf.newaxis]
  length = tf.reduce_sum(member, axis=1)
  start = tf.argmax(member, axis=1, output_type=tf.int32)  # the first member (0 when none)
  return start, length, real


def select_sentences(sentence_length, rate, max_sentences, seed):
  """Chooses the sentences to mask: ceil(rate * n) of the n of a record, at most max_sentences.

  Args:
    sentence_length: int32 [batch, G], long tokens of each sentence (0: no sentence).
    rate: Python float in (0, 1], the fraction of a record's sentences masked (rounded up).
    max_sentences: Python int M <= G, the slots per record.
    seed: int [2] stateless seed (e.g. modeling.step_dropout_seed).

  Returns:
    (chosen int32 [batch, M]: the global index of the sentence in each slot,
     valid float32 [batch, M]: 1 for a filled slot, 0 for an empty one).
  """
  exists = sentence_length > 0
  count = tf.reduce_sum(tf.cast(exists, tf.int32), axis=1)
  wanted = tf.cast(tf.math.ceil(rate * tf.cast(count, tf.float32)), tf.int32)
  wanted = tf.minimum(wanted, max_sentences)
  scores = tf.random.stateless_uniform(tf.shape(sentence_length), seed=seed)
  # The M lowest scores of the existing sentences first; missing ones (score 2) last.
  scores = tf.where(exists, scores, tf.fill(tf.shape(scores), 2.0))
  _, chosen = tf.math.top_k(-scores, k=max_sentences, sorted=True)
  valid = tf.range(max_sentences)[tf.newaxis, :] < wanted[:, tf.newaxis]
  return chosen, tf.cast(valid, tf.float32)


def masked_long_inputs(token_ids, sentence_ids, real, chosen, valid, mask_token_id,
                       global_seq_len, masked_lm_positions=None, masked_lm_weights=None):
  """The long input with the chosen sentences masked out.

  Args:
    token_ids: int32 [batch, L].
    sentence_ids: int32 [batch, L].
    real: int32 [batch, L], 1 on the real long tokens (sentence_spans).
    chosen: int32 [batch, M] (select_sentences).
    valid: float32 [batch, M].
    mask_token_id: the id every token of a chosen sentence becomes.
    global_seq_len: G.
    masked_lm_positions: optional int32 [batch, P].
    masked_lm_weights: optional float32 [batch, P].

  Returns:
    (token_ids int32 [batch, L] masked, masked int32 [batch, L] (1 on the masked tokens),
     masked_lm_weights float32 [batch, P] with 0 inside the masked sentences, or None).
  """
  # [batch, G]: 1 for the chosen sentences (an empty slot adds nothing).
  picked = tf.reduce_max(tf.one_hot(chosen, global_seq_len, dtype=tf.float32) *
                         valid[:, :, tf.newaxis], axis=1)
  masked = tf.cast(tf.gather(picked, sentence_ids, batch_dims=1) > 0, tf.int32) * real
  new_ids = tf.where(masked > 0, tf.fill(tf.shape(token_ids), tf.cast(mask_token_id,
                                                                      token_ids.dtype)),
                     token_ids)
  weights = None
  if masked_lm_positions is not None:
    hit = tf.gather(masked, masked_lm_positions, batch_dims=1)
    weights = masked_lm_weights * (1.0 - tf.cast(hit, masked_lm_weights.dtype))
  return new_ids, masked, weights


def unmasked_token_ids(token_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
  """The records' long tokens with the masked-LM predictions' original ids put back.

  Args:
    token_ids: int32 [batch, L] (with the MLM's [MASK] / random / kept tokens).
    masked_lm_positions: int32 [batch, P] (distinct where the weight is > 0).
    masked_lm_ids: int32 [batch, P], the original ids.
    masked_lm_weights: float32 [batch, P], 0 for padding predictions.

  Returns:
    int32 [batch, L]: the text as it was before the MLM masking.
  """
  seq_len = tf.compat.dimension_value(token_ids.shape[1]) or tf.shape(token_ids)[1]
  # [batch, P, L]: prediction p is at long position t.
  hit = tf.one_hot(masked_lm_positions, seq_len, dtype=tf.int32)
  hit *= tf.cast(masked_lm_weights > 0, tf.int32)[:, :, tf.newaxis]
  original = tf.reduce_sum(hit * tf.cast(masked_lm_ids, tf.int32)[:, :, tf.newaxis], axis=1)
  return tf.where(tf.reduce_max(hit, axis=1) > 0, tf.cast(original, token_ids.dtype), token_ids)


def sentence_inputs(token_ids, global_token_ids, start, length, chosen, config,
                    max_sentence_length):
  """Each chosen sentence alone as an ETC input (one global token), with its side inputs.

  Args:
    token_ids: int32 [batch, L], the long tokens (unmasked_token_ids: the original text).
    global_token_ids: int32 [batch, G].
    start: int32 [batch, G] (sentence_spans).
    length: int32 [batch, G].
    chosen: int32 [batch, M].
    config: EtcConfig (local_radius, relative_pos_max_distance, hard masks).
    max_sentence_length: Python int S: a sentence's tokens past S are cut.

  Returns:
    feature dict of batch * M inputs (for etc_estimator.encode): token_ids [batch * M, S],
    global_token_ids [batch * M, 1], their breakpoints and sentence ids, the side inputs.
  """
  seq_len = tf.shape(token_ids)[1]
  sent_start = tf.gather(start, chosen, batch_dims=1)  # [batch, M]
  # An empty slot keeps one token: every input has a long token (its loss weight is 0).
  sent_len = tf.maximum(tf.minimum(tf.gather(length, chosen, batch_dims=1),
                                   max_sentence_length), 1)
  offsets = tf.range(max_sentence_length)
  positions = tf.minimum(sent_start[:, :, tf.newaxis] + offsets, seq_len - 1)
  inside = offsets[tf.newaxis, tf.newaxis, :] < sent_len[:, :, tf.newaxis]
  ids = tf.where(inside, tf.gather(token_ids, positions, batch_dims=1),
                 tf.zeros_like(positions))  # [batch, M, S]
  num = tf.shape(chosen)[0] * tf.shape(chosen)[1]
  ids = tf.reshape(ids, [num, max_sentence_length])
  breakpoints = tf.reshape(tf.one_hot(sent_len - 1, max_sentence_length, dtype=tf.int32),
                           [num, max_sentence_length])
  global_ids = tf.reshape(tf.gather(global_token_ids, chosen, batch_dims=1), [num, 1])
  static_num = None
  if chosen.shape.is_fully_defined():
    static_num = chosen.shape[0] * chosen.shape[1]
  ids.set_shape([static_num, max_sentence_length])
  global_ids.set_shape([static_num, 1])
  # One sentence (id 0) under one global token: the records' side-input rules, from its
  # breakpoints.
  return etc_estimator.add_side_inputs(
      {"token_ids": ids, "global_token_ids": global_ids, "long_breakpoints": breakpoints,
       "global_breakpoints": tf.ones([num, 1], tf.int32), "sentence_ids": tf.zeros_like(ids)},
      config, max_sentence_length, 1)


def info_nce(queries, keys, valid):
  """InfoNCE over the chosen sentences of a batch: each query must pick its own key.

  Args:
    queries: float32 [N, hidden], the masked sentences' global outputs in their records.
    keys: float32 [N, hidden], the lone sentences' global outputs (row i: query i's sentence).
    valid: float32 [N], 1 for a real slot (empty slots are neither queries nor negatives).

  Returns:
    (loss scalar (mean over the valid rows; 0 when there are none),
     per-row loss float32 [N], correct float32 [N] (1 where the own key scores highest)).
  """
  hidden = tf.compat.dimension_value(queries.shape[-1])
  logits = tf.matmul(queries, keys, transpose_b=True) / math.sqrt(hidden)
  logits = tf.where(valid[tf.newaxis, :] > 0, logits,
                    tf.fill(tf.shape(logits), _MASKED_LOGIT))
  labels = tf.range(tf.shape(logits)[0])
  per_row = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels),
                    tf.float32)
  loss = tf.reduce_sum(valid * per_row) / tf.maximum(tf.reduce_sum(valid), 1.0)
  return loss, per_row, correct


def cpc_loss(model, features, config, mask_token_id, rate, max_sentences,
             max_sentence_length, seed, att_implementation="auto"):
  """Masks sentences, runs `model` on the masked records and the lone sentences, InfoNCE.

  Args:
    model: an etc_modeling.EtcModel (called twice; its variables are shared).
    features: dict of batched features: token_ids, global_token_ids, sentence_ids,
      long_breakpoints [batch, L] / [batch, G], the records' side inputs, and optionally
      masked_lm_positions / masked_lm_ids / masked_lm_weights [batch, P].
    config: EtcConfig (for the lone sentences' side inputs).
    mask_token_id: the id the masked sentences' tokens become.
    rate: fraction of a record's sentences masked (rounded up).
    max_sentences: M, at most this many a record.
    max_sentence_length: S, a lone sentence's tokens past S are cut.
    seed: int [2] stateless seed of the sentence choice.
    att_implementation: the records' attention layout.

  Returns:
    dict: long_output [batch, L, hidden] and global_output [batch, G, hidden] of the masked
    records, masked_lm_weights [batch, P] (0 inside the masked sentences) when given,
    cpc_loss scalar, cpc_example_loss / cpc_correct / cpc_weights float32 [batch, M],
    masked_tokens int32 [batch, L].
  """
  global_seq_len = tf.compat.dimension_value(features["global_token_ids"].shape[1])
  start, length, real = sentence_spans(features["sentence_ids"], features["long_breakpoints"],
                                       global_seq_len)
  chosen, valid = select_sentences(length, rate, max_sentences, seed)
  token_ids, masked, mlm_weights = masked_long_inputs(
      features["token_ids"], features["sentence_ids"], real, chosen, valid, mask_token_id,
      global_seq_len, features.get("masked_lm_positions"), features.get("masked_lm_weights"))
  long_output, global_output = etc_estimator.encode(model, features, token_ids=token_ids,
                                                    att_implementation=att_implementation)
  original = features["token_ids"]
  if "masked_lm_positions" in features:
    original = unmasked_token_ids(original, features["masked_lm_positions"],
                                  features["masked_lm_ids"], features["masked_lm_weights"])
  lone = sentence_inputs(original, features["global_token_ids"], start, length, chosen, config,
                         max_sentence_length)
  _, lone_global = etc_estimator.encode(model, lone)
  hidden = tf.compat.dimension_value(global_output.shape[-1])
  queries = tf.reshape(tf.gather(global_output, chosen, batch_dims=1), [-1, hidden])
  keys = tf.reshape(lone_global[:, 0, :], [-1, hidden])
  flat_valid = tf.reshape(valid, [-1])
  loss, per_row, correct = info_nce(queries, keys, flat_valid)
  shape = tf.shape(chosen)
  return {"long_output": long_output, "global_output": global_output,
          "masked_lm_weights": mlm_weights, "cpc_loss": loss,
          "cpc_example_loss": tf.reshape(per_row, shape),
          "cpc_correct": tf.reshape(correct, shape), "cpc_weights": valid,
          "masked_tokens": masked}

