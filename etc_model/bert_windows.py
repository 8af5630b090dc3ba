# coding=utf-8
"""BERT over sliding windows, the long-context tasks' baseline (--model=bert_windows of
etc_model.run_long_tasks).

The model users would otherwise pick for inputs longer than BERT's 512 positions: the official
BertModel (variables under bert/, official names: --init_checkpoint is a BERT checkpoint) runs
on overlapping windows of the records' long tokens, and each token is read from the one window
where it is most central. Only the head is new (cls/long_tasks_bert/). The records are those of
etc_model.create_long_tasks (long_tasks.FEATURE_SHAPES_DOC), etc_model.create_wikihop or
etc_model.create_hotpotqa, etc_model.create_nq or etc_model.create_openkp (the official etcmodel
layouts: wikihop.py, hotpotqa.py, nq.py, openkp.py); their global tokens are not read.

Windows. The long input's real tokens (token_ids != 0, packed from position 0) are cut by
sliding_window.windows (the official run_squad loop) into windows of window_length - 2 tokens,
`stride` apart, each fed as [CLS] window [SEP] (segment 0, the rest of the row masked). The
number of windows is static, that of a full max_seq_length input, so the graph runs BERT on a
[batch * windows, window_length] batch; the windows a shorter input does not have are padding
rows, fully masked and never read. A token in several windows is read from the window where it
has the most context (sliding_window.max_context_window, the run_squad / run_classifier rule,
computed exactly in integer graph ops with static shapes: token_windows). Every token thus has
one hidden state [batch, L, hidden], as a model that read the whole input.

Heads (the standard readings of a sliding-window encoder):
  cloze       the blank's hidden state (blank_position) and each candidate's representation,
              the mean of the hidden states of every token of its mentions: the records carry
              no mention positions, so they are found in the graph by matching the candidate's
              word pieces (its "sentence" at the start of the long input, sentence_ids == c)
              against the whole long input (the candidate's own piece run included, so every
              real candidate has one; with an uncased vocabulary the name's lower-case word
              would match too, but long_tasks.find_names takes no word that occurs in lower
              case in the chapter; a run that only begins a longer word matches too). Score:
              bilinear, blank^T W candidate + b (the blank's context against each candidate's
              contexts; the ETC head instead reads each candidate's global token, which attends
              to the whole input). The mask, the softmax cross-entropy over the candidates and
              the padding candidates' MASKED_LOGIT are the ETC head's (long_task_heads).
  supporting  each sentence's representation is the mean of its tokens' hidden states
              (sentence_ids), then dense -> 1 (a binary logit per global token, padding ignored)
              and the ETC head's sigmoid cross-entropy averaged over the real global tokens.
  classify    the document's representation is the mean of its real tokens' hidden states
              (mean pooling, as sentence encoders like MiniLM are trained; BERT's pooler reads
              one window's [CLS] only), then dense -> the labels and softmax cross-entropy, as
              the ETC head (which pools the global tokens instead).
  wikihop     the query's representation is the mean of its tokens' hidden states (segment_ids
              == wikihop.QUESTION_TYPE, at the start of the long input after the candidates),
              each candidate's the mean of the tokens linked to it (l2g_linked_ids == c: its own
              pieces at the start and its mentions in the documents, the records' official
              linking). Score: bilinear, query^T W candidate + b; the ETC WikiHop head's mask,
              softmax cross-entropy and no loss for a record without an answer (label -1).
  hotpotqa    the ETC HotpotQA head itself (long_task_heads.hotpotqa_head: supporting-fact,
              answer-type and span logits, the official losses) over the token states and, in
              place of ETC's global outputs, each global token's tokens: a title, sentence or
              question-piece token is the mean of its long tokens (sentence_ids), a PARAGRAPH
              token the mean of its paragraph's (paragraph_ids), the [CLS] global token the
              record's own [CLS] long token (position 0, where the answer type is read).
  nq          the ETC Natural Questions head itself (long_task_heads.nq_head: the four position
              logits per long token, the answer type from position 0, the record's [CLS]; the
              official mean of five losses) over the token states.
  openkp      the ETC OpenKP head itself (long_task_heads.openkp_head: each word the sum of its
              pieces' states, the n-gram convolutions and the official smoothed loss) over the
              token states; the visual features' embeddings (long_task_heads.
              openkp_embedding_adders, each VDOM element's sum) are added to the input
              embedding of each of the element's tokens in every window that holds it
              (modeling.BertModel's input_embedding_adder; ETC adds them to its long input and
              to the element's global token, which BERT windows do not have).
The heads' logits have the ETC heads' shapes, so run_long_tasks' metrics (long_task_heads
cloze_metrics / supporting_metrics / classify_metrics), predictions and results files are the
same. Variables: cls/long_tasks_bert/cloze/output_weights [hidden, hidden] and output_bias [1];
cls/long_tasks_bert/supporting/output_weights [1, hidden] and output_bias [1];
cls/long_tasks_bert/classify/output_weights [labels, hidden] and output_bias [labels];
cls/long_tasks_bert/wikihop/output_weights [hidden, hidden] and output_bias [1];
cls/long_tasks_bert/hotpotqa/..., nq/... and openkp/...: the ETC heads' variables (OpenKP's
visual-feature embeddings included) and shapes under this scope.

[CLS] / [SEP] are the ids in the vocabulary the records were made with (the vocab_file, or the
spm_model_file of SentencePiece records, in the data directory's summary: long_tasks.json,
wikihop.json, hotpotqa.json, nq.json or openkp.json; special_token_ids).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os

import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import model_config
import modeling
from realformer_tf import sliding_window
import tokenization
from etc_model import hotpotqa
from etc_model import long_task_heads as heads
from etc_model import nq
from etc_model import openkp
from etc_model import wikihop

tf1 = tf.compat.v1

TASKS = ("cloze", "supporting", "classify", "wikihop", "hotpotqa", "nq", "openkp")
SCOPE = "cls/long_tasks_bert"
CONFIG_NAME = "bert_config.json"
SUMMARY_NAME = "long_tasks.json"
# The summary beside a task's records, which names their vocabulary (default SUMMARY_NAME).
SUMMARY_NAMES = {wikihop.TASK: wikihop.SUMMARY_NAME, hotpotqa.TASK: hotpotqa.SUMMARY_NAME,
                 nq.TASK: nq.SUMMARY_NAME, openkp.TASK: openkp.SUMMARY_NAME}


class BertWindowsConfig(object):
  """A modeling.BertConfig and the windows; reads as the BertConfig (hidden_size, vocab_size...).

  Attributes:
    bert_config: the modeling.BertConfig (to_json_string: what run_long_tasks saves).
    window_length: tokens per BERT input, [CLS] and [SEP] included.
    window_stride: tokens between window starts.
    cls_token_id: the vocabulary's [CLS].
    sep_token_id: the vocabulary's [SEP].
  """

  def __init__(self, bert_config, window_length, window_stride, cls_token_id, sep_token_id):
    self.bert_config = bert_config
    self.window_length = window_length
    self.window_stride = window_stride
    self.cls_token_id = cls_token_id
    self.sep_token_id = sep_token_id

  def __getattr__(self, name):
    # Only called for names not set above: the BERT config's.
    if name == "bert_config":
      raise AttributeError(name)
    return getattr(self.bert_config, name)


def special_token_ids(data_dir, flag_name="data_dir", summary_name=SUMMARY_NAME):
  """The [CLS] and [SEP] ids of the vocabulary the records of data_dir were made with.

  Args:
    data_dir: create_long_tasks' --output_dir (its long_tasks.json names the vocab_file, or the
      spm_model_file of SentencePiece records), or that of a task of its own (SUMMARY_NAMES:
      wikihop.json, hotpotqa.json, nq.json, openkp.json).
    flag_name: the flag naming data_dir (errors).
    summary_name: the summary file of data_dir (SUMMARY_NAMES of the task).

  Returns:
    (cls_token_id, sep_token_id).
  """
  path = os.path.join(data_dir, summary_name)
  try:
    with tf.io.gfile.GFile(path) as f:
      settings = json.load(f).get("settings", {})
    spm_model_file = settings.get("spm_model_file")
    vocab_file = spm_model_file or settings.get("vocab_file")
  except (tf.errors.OpError, ValueError, AttributeError) as e:
    common.fail("--%s=%s: cannot read %s for the vocab_file of the records (%s)" % (
        flag_name, data_dir, summary_name, str(e).splitlines()[0] if str(e) else type(e)))
  if not vocab_file or not tf.io.gfile.exists(vocab_file):
    common.fail("--%s=%s: the %s of %s (%s) is not there; --model=bert_windows needs "
                "its [CLS] / [SEP] ids (run from where the records were made)" % (
                    flag_name, data_dir, "spm_model_file" if spm_model_file else "vocab_file",
                    summary_name, vocab_file))
  if spm_model_file:  # the model's pieces ([CLS] / [SEP]: build_vocab.py's control symbols)
    vocab = tokenization.FullTokenizer(None, True, spm_model_file=spm_model_file).vocab
  else:
    vocab = tokenization.load_vocab(vocab_file)
  for token in ("[CLS]", "[SEP]"):
    if token not in vocab:
      common.fail("--%s=%s: %s, the records' vocab_file, has no %s" % (
          flag_name, data_dir, vocab_file, token))
  return vocab["[CLS]"], vocab["[SEP]"]


def load_config(bert_config_file, flag_values, window_length, window_stride, data_dir,
                task=None):
  """The BertWindowsConfig of the flags, checked (one-line errors).

  Args:
    bert_config_file: --bert_config_file.
    flag_values: FLAGS (its --residual_attention overrides the config: model_config.load_config).
    window_length: --window_length (3 .. the config's max_position_embeddings).
    window_stride: --window_stride (1 .. window_length - 2: no token is skipped).
    data_dir: --data_dir (special_token_ids).
    task: --task (which summary of data_dir names the records' vocabulary: SUMMARY_NAMES).

  Returns:
    BertWindowsConfig.
  """
  if not bert_config_file:
    common.fail("--bert_config_file is required with --model=bert_windows")
  bert_config = model_config.load_config(bert_config_file, flag_values)
  if not 3 <= window_length <= bert_config.max_position_embeddings:
    common.fail("--window_length=%d: must be in [3, %d] (max_position_embeddings in "
                "--bert_config_file=%s; [CLS] and [SEP] take 2)" % (
                    window_length, bert_config.max_position_embeddings, bert_config_file))
  if not 1 <= window_stride <= window_length - 2:
    common.fail("--window_stride=%d: must be in [1, %d] (--window_length=%d minus [CLS] and "
                "[SEP]: a longer stride would skip tokens)" % (
                    window_stride, window_length - 2, window_length))
  cls_token_id, sep_token_id = special_token_ids(
      data_dir, summary_name=SUMMARY_NAMES.get(task, SUMMARY_NAME))
  if max(cls_token_id, sep_token_id) >= bert_config.vocab_size:
    common.fail("--bert_config_file=%s: vocab_size=%d has no id %d ([CLS] / [SEP] of the "
                "records' vocabulary)" % (bert_config_file, bert_config.vocab_size,
                                          max(cls_token_id, sep_token_id)))
  return BertWindowsConfig(bert_config, window_length, window_stride, cls_token_id,
                           sep_token_id)


def window_starts(max_seq_length, window_length, stride):
  """The first token of each window of a full max_seq_length input (the static windows).

  Args:
    max_seq_length: L.
    window_length: tokens per BERT input ([CLS] and [SEP] included, so window_length - 2 of
      the long input).
    stride: tokens between window starts.

  Returns:
    list of ints; a shorter input has the first ones (sliding_window.windows' starts do not
    depend on the text's length, only its last window's length does).
  """
  return [w.start for w in sliding_window.windows(max_seq_length, window_length - 2, stride)]


def token_windows(token_ids, window_length, stride):
  """Each token's window (the one where it has the most context) and its position there.

  sliding_window.max_context_window's exact rule in integer graph ops with static shapes: among
  the windows holding token t (window k starts at s_k and has n_k of this input's tokens), the
  largest 100 * min(t - s_k, s_k + n_k - 1 - t) + n_k, the first window on ties.

  Args:
    token_ids: int32 [batch, L] (static L), real tokens first, 0 the padding.
    window_length: tokens per BERT input ([CLS] and [SEP] included).
    stride: tokens between window starts.

  Returns:
    (window, position) int32 [batch, L]: the index of the window and the position in its
    [CLS] window [SEP] input (1 is the window's first token); 0 and 0 for the padding.
  """
  max_seq_length = tf.compat.dimension_value(token_ids.shape[1])
  starts = np.array(window_starts(max_seq_length, window_length, stride), np.int32)
  num_windows = len(starts)
  _, length, _, num_tokens = _window_layout(token_ids, window_length, stride)
  length = length[:, tf.newaxis, :, 0]  # [batch, 1, N]
  token = tf.range(max_seq_length)[tf.newaxis, :, tf.newaxis]  # [1, L, 1]
  left = token - starts[np.newaxis, np.newaxis, :]
  right = length - 1 - left
  holds = tf.logical_and(left >= 0, right >= 0)  # [batch, L, N]
  score = tf.where(holds, 100 * tf.minimum(left, right) + length, -1)
  best = tf.equal(score, tf.reduce_max(score, axis=-1, keepdims=True))
  # The first of the best windows.
  window = tf.reduce_min(tf.where(best, tf.range(num_windows), num_windows), axis=-1)
  real = token[:, :, 0] < num_tokens[:, tf.newaxis]  # [batch, L]
  position = token[:, :, 0] - tf.gather(starts, window) + 1
  return (tf.where(real, window, tf.zeros_like(window)),
          tf.where(real, position, tf.zeros_like(position)))


def _window_layout(token_ids, window_length, stride):
  """Where each window's positions read the long input.

  Args:
    token_ids: int32 [batch, L] (static L), real tokens first, 0 the padding.
    window_length: W, tokens per BERT input.
    stride: tokens between window starts.

  Returns:
    source: NumPy int32 [N, W], the long position of each window position (position p of
      window k holds token start_k + p - 1; clipped into [0, L)).
    length: int32 [batch, N, 1], the real tokens of each window (0 for a padding window).
    valid: bool [batch, N], the windows the input has.
    num_tokens: int32 [batch], the real tokens of each input.
  """
  max_seq_length = tf.compat.dimension_value(token_ids.shape[1])
  starts = np.array(window_starts(max_seq_length, window_length, stride), np.int32)
  content = window_length - 2
  num_tokens = tf.reduce_sum(tf.cast(token_ids > 0, tf.int32), axis=1)
  # Window k exists when window k - 1 did not reach the end of the text (sliding_window).
  reach = np.concatenate([[-1], starts[:-1] + content]).astype(np.int32)
  valid = tf.less(reach[np.newaxis, :], num_tokens[:, tf.newaxis])  # [batch, N]
  length = tf.clip_by_value(num_tokens[:, tf.newaxis] - starts[np.newaxis, :], 0, content)
  length = tf.where(valid, length, tf.zeros_like(length))[:, :, tf.newaxis]  # [batch, N, 1]
  position = np.arange(window_length, dtype=np.int32)
  source = np.clip(starts[:, np.newaxis] + position[np.newaxis, :] - 1, 0, max_seq_length - 1)
  return source, length, valid, num_tokens


def window_token_values(values, token_ids, window_length, stride):
  """Per-token values laid out as the windows' inputs: 0 at [CLS], [SEP] and padding.

  Args:
    values: float32 [batch, L, d] (static L), one row per long token.
    token_ids: int32 [batch, L], real tokens first, 0 the padding.
    window_length: W, tokens per BERT input.
    stride: tokens between window starts.

  Returns:
    float32 [batch, N, W, d]: at each window position its token's row (window_inputs' layout).
  """
  source, length, _, _ = _window_layout(token_ids, window_length, stride)
  position = tf.range(window_length)
  on_token = tf.logical_and(position >= 1, position <= length)  # [batch, N, W]
  return tf.gather(values, source, axis=1) * tf.cast(on_token, values.dtype)[..., tf.newaxis]


def window_inputs(token_ids, window_length, stride, cls_token_id, sep_token_id):
  """The BERT inputs of every window: [CLS] tokens [SEP], padding windows fully masked.

  Args:
    token_ids: int32 [batch, L] (static L), real tokens first, 0 the padding.
    window_length: W, tokens per BERT input.
    stride: tokens between window starts.
    cls_token_id: [CLS].
    sep_token_id: [SEP].

  Returns:
    (input_ids, input_mask) int32 [batch, N, W] (N = len(window_starts(L, W, stride))) and
    num_tokens int32 [batch].
  """
  source, length, valid, num_tokens = _window_layout(token_ids, window_length, stride)
  gathered = tf.gather(token_ids, source, axis=1)  # [batch, N, W]
  position = tf.range(window_length)
  input_ids = tf.where(
      tf.equal(position, 0), cls_token_id,
      tf.where(position <= length, gathered,
               tf.where(tf.equal(position, length + 1), sep_token_id, 0)))
  input_mask = tf.cast(tf.logical_and(position <= length + 1, valid[:, :, tf.newaxis]),
                       tf.int32)
  # Padding windows are all 0 (and masked).
  return tf.cast(input_ids, tf.int32) * input_mask, input_mask, num_tokens


def encode(config, token_ids, is_training, use_one_hot_embeddings=False, compute_dtype=None,
           long_embedding_adder=None):
  """BERT over the windows; each token's hidden state from its most-central window.

  Args:
    config: BertWindowsConfig.
    token_ids: int32 [batch, L].
    is_training: dropout on.
    use_one_hot_embeddings: one-hot embedding lookups.
    compute_dtype: modeling.BertModel's compute_dtype (None: float32).
    long_embedding_adder: float32 [batch, L, hidden] or None: added to each token's input
      embedding in every window holding it (modeling.BertModel's input_embedding_adder;
      [CLS], [SEP] and padding get nothing), as EtcModel adds it to the long input.

  Returns:
    float32 [batch, L, hidden] (padding positions hold some window's [CLS] state: mask them).
  """
  width = config.window_length
  input_ids, input_mask, _ = window_inputs(
      token_ids, width, config.window_stride, config.cls_token_id, config.sep_token_id)
  num_windows = tf.compat.dimension_value(input_ids.shape[1])
  adder = None
  if long_embedding_adder is not None:
    adder = tf.reshape(window_token_values(long_embedding_adder, token_ids, width,
                                           config.window_stride),
                       [-1, width, config.hidden_size])
  model = modeling.BertModel(
      config=config.bert_config, is_training=is_training,
      input_ids=tf.reshape(input_ids, [-1, width]),
      input_mask=tf.reshape(input_mask, [-1, width]),
      token_type_ids=tf.zeros_like(tf.reshape(input_ids, [-1, width])),
      use_one_hot_embeddings=use_one_hot_embeddings, compute_dtype=compute_dtype,
      input_embedding_adder=adder)
  sequence = tf.reshape(model.get_sequence_output(),
                        [-1, num_windows, width, config.hidden_size])
  window, position = token_windows(token_ids, width, config.window_stride)
  return tf.gather_nd(sequence, tf.stack([window, position], axis=-1), batch_dims=1)


def candidate_mentions(token_ids, sentence_ids, candidate_mask):
  """Where each candidate is mentioned: its word pieces matched against the long input.

  Real candidate c's pieces are the real tokens with sentence_ids == c (the start of the long
  input, long_tasks.FEATURE_SHAPES_DOC; beyond the real candidates, sentence_ids number the
  context's sentences); a mention is any run of tokens equal to them.

  Args:
    token_ids: int32 [batch, L].
    sentence_ids: int32 [batch, L].
    candidate_mask: int32 [batch, C] (static C), 1 for a real candidate.

  Returns:
    float32 [batch, C, L]: 1 at every token of a mention of the candidate (its own pieces
    included), 0 for a padding candidate.
  """
  max_seq_length = tf.compat.dimension_value(token_ids.shape[1])
  num_candidates = tf.compat.dimension_value(candidate_mask.shape[-1])
  real = token_ids > 0
  own = tf.logical_and(real[:, tf.newaxis, :], tf.equal(
      sentence_ids[:, tf.newaxis, :], tf.range(num_candidates)[tf.newaxis, :, tf.newaxis]))
  own = tf.logical_and(own, (candidate_mask > 0)[:, :, tf.newaxis])
  own = tf.cast(own, tf.int32)  # [batch, C, L]
  num_pieces = tf.reduce_sum(own, axis=-1)  # [batch, C]
  first = tf.argmax(own, axis=-1, output_type=tf.int32)  # [batch, C]
  offsets = tf.range(tf.maximum(tf.reduce_max(num_pieces), 1))  # [K]
  pieces = tf.gather(token_ids, tf.minimum(first[:, :, tf.newaxis] + offsets,
                                           max_seq_length - 1), batch_dims=1)  # [batch, C, K]
  piece_on = offsets < num_pieces[:, :, tf.newaxis]  # [batch, C, K]
  positions = tf.range(max_seq_length)
  ahead = positions[:, tf.newaxis] + offsets[tf.newaxis, :]  # [L, K]
  following = tf.gather(token_ids, tf.minimum(ahead, max_seq_length - 1), axis=1)  # [b, L, K]
  equal = tf.logical_and(tf.equal(following[:, tf.newaxis], pieces[:, :, tf.newaxis]),
                         (ahead < max_seq_length)[tf.newaxis, tf.newaxis])  # [b, C, L, K]
  starts = tf.reduce_all(tf.logical_or(equal, tf.logical_not(piece_on[:, :, tf.newaxis])), -1)
  starts = tf.logical_and(starts, tf.logical_and((num_pieces > 0)[:, :, tf.newaxis],
                                                 real[:, tf.newaxis, :]))  # [batch, C, L]
  # A token is covered when a mention starts at most (pieces - 1) tokens before it.
  behind = positions[:, tf.newaxis] - offsets[tf.newaxis, :]  # [L, K]
  started = tf.gather(starts, tf.maximum(behind, 0), axis=2)  # [batch, C, L, K]
  started = tf.logical_and(started, tf.logical_and(
      (behind >= 0)[tf.newaxis, tf.newaxis], piece_on[:, :, tf.newaxis, :]))
  return tf.cast(tf.reduce_any(started, axis=-1), tf.float32)


def _head_variables(task, shape, config, bias_size=1):
  with tf1.variable_scope("%s/%s" % (SCOPE, task)):
    output_weights = tf1.get_variable(
        "output_weights", shape,
        initializer=tf1.truncated_normal_initializer(stddev=config.initializer_range))
    output_bias = tf1.get_variable("output_bias", [bias_size],
                                   initializer=tf1.zeros_initializer())
  return output_weights, output_bias


def token_means(token_output, members):
  """The mean hidden state of each group's tokens: float32 [batch, n, hidden] (0 for an empty one).

  Args:
    token_output: float32 [batch, L, hidden].
    members: float32 [batch, n, L], 1 where a token is in the group.
  """
  return tf.einsum("bnl,blh->bnh", members, token_output) / tf.maximum(
      tf.reduce_sum(members, axis=-1), 1.0)[:, :, tf.newaxis]


def bilinear_candidate_logits(task, query, candidates, candidate_mask, config, is_training):
  """query^T W candidate + b for each candidate (cls/long_tasks_bert/<task>/output_weights
  [hidden, hidden], output_bias [1]); padding candidates at MASKED_LOGIT.

  Args:
    task: the head's variable scope name ("cloze", "wikihop").
    query: float32 [batch, hidden].
    candidates: float32 [batch, C, hidden].
    candidate_mask: int [batch, C], 1 for a real candidate.
    config: BertWindowsConfig.
    is_training: dropout on both sides.

  Returns:
    float32 [batch, C].
  """
  output_weights, output_bias = _head_variables(
      task, [config.hidden_size, config.hidden_size], config)
  if is_training:
    query = modeling.dropout(query, config.hidden_dropout_prob)
    candidates = modeling.dropout(candidates, config.hidden_dropout_prob)
  logits = tf.einsum("bh,bch->bc", tf.matmul(query, output_weights), candidates) + output_bias
  return tf.where(candidate_mask > 0, logits, tf.fill(tf.shape(logits), heads.MASKED_LOGIT))


def cloze_head(token_output, features, config, is_training):
  """Bilinear scores of the blank against each candidate's mentions; softmax cross-entropy.

  Args:
    token_output: float32 [batch, L, hidden] (encode).
    features: dict with token_ids, sentence_ids [batch, L], blank_position [batch, 1],
      candidate_mask [batch, C], label [batch, 1].
    config: BertWindowsConfig.
    is_training: dropout on.

  Returns:
    (loss scalar, per-example loss [batch], masked logits [batch, C]: long_task_heads.cloze_head's).
  """
  candidate_mask = features["candidate_mask"]
  mentions = candidate_mentions(features["token_ids"], features["sentence_ids"],
                                candidate_mask)  # [batch, C, L]
  candidates = token_means(token_output, mentions)
  blank = tf.gather(token_output, tf.reshape(features["blank_position"], [-1]), batch_dims=1)
  logits = bilinear_candidate_logits("cloze", blank, candidates, candidate_mask, config,
                                     is_training)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.reshape(features["label"], [-1]), logits=logits)
  return tf.reduce_mean(per_example), per_example, logits


def sentence_means(token_output, token_ids, sentence_ids, num_sentences):
  """Mean hidden state of each sentence's real tokens: float32 [batch, G, hidden] (0 if none)."""
  members = tf.one_hot(sentence_ids, num_sentences, dtype=tf.float32) * tf.cast(
      token_ids > 0, tf.float32)[:, :, tf.newaxis]  # [batch, L, G]
  return token_means(token_output, tf.transpose(members, [0, 2, 1]))


def supporting_head(token_output, features, config, is_training):
  """A binary logit per sentence from the mean of its tokens; sigmoid cross-entropy.

  Args:
    token_output: float32 [batch, L, hidden] (encode).
    features: dict with token_ids, sentence_ids [batch, L], global_token_ids and
      sentence_labels [batch, G].
    config: BertWindowsConfig.
    is_training: dropout on.

  Returns:
    (loss scalar: mean over the real global tokens, per-example loss [batch], logits [batch, G]:
    long_task_heads.supporting_head's).
  """
  global_token_ids = features["global_token_ids"]
  num_sentences = tf.compat.dimension_value(global_token_ids.shape[-1])
  sentences = sentence_means(token_output, features["token_ids"], features["sentence_ids"],
                             num_sentences)
  output_weights, output_bias = _head_variables("supporting", [1, config.hidden_size], config)
  if is_training:
    sentences = modeling.dropout(sentences, config.hidden_dropout_prob)
  logits = tf.einsum("bgh,h->bg", sentences, output_weights[0]) + output_bias[0]
  mask = tf.cast(global_token_ids > 0, tf.float32)
  ce = tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(features["sentence_labels"], tf.float32), logits=logits) * mask
  per_example = tf.reduce_sum(ce, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
  loss = tf.reduce_sum(ce) / tf.maximum(tf.reduce_sum(mask), 1.0)
  return loss, per_example, logits


def classify_head(token_output, features, config, is_training, num_labels):
  """The mean of the real tokens' hidden states -> dense -> softmax cross-entropy over the labels.

  Args:
    token_output: float32 [batch, L, hidden] (encode).
    features: dict with token_ids [batch, L] and label [batch, 1].
    config: BertWindowsConfig.
    is_training: dropout on.
    num_labels: the size of the label vocabulary.

  Returns:
    (loss scalar, per-example loss [batch], logits [batch, num_labels]:
    long_task_heads.classify_head's).
  """
  real = tf.cast(features["token_ids"] > 0, tf.float32)
  pooled = token_means(token_output, real[:, tf.newaxis, :])[:, 0]
  output_weights, output_bias = _head_variables(
      "classify", [num_labels, config.hidden_size], config, bias_size=num_labels)
  if is_training:
    pooled = modeling.dropout(pooled, config.hidden_dropout_prob)
  logits = tf.nn.bias_add(tf.matmul(pooled, output_weights, transpose_b=True), output_bias)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.reshape(features["label"], [-1]), logits=logits)
  return tf.reduce_mean(per_example), per_example, logits


def wikihop_head(token_output, features, config, is_training):
  """Bilinear scores of the query against each candidate's linked tokens; softmax cross-entropy.

  Args:
    token_output: float32 [batch, L, hidden] (encode).
    features: dict with token_ids, segment_ids, l2g_linked_ids [batch, L], candidate_mask
      [batch, C] and label [batch, 1] (-1: no answer).
    config: BertWindowsConfig.
    is_training: dropout on.

  Returns:
    (loss scalar: mean over the records with an answer, per-example loss [batch] (0 without an
    answer), masked logits [batch, C]: long_task_heads.wikihop_head's).
  """
  candidate_mask = features["candidate_mask"]
  num_candidates = tf.compat.dimension_value(candidate_mask.shape[-1])
  real = tf.cast(features["token_ids"] > 0, tf.float32)
  # one_hot of -1 (no link) is all zeros.
  linked = tf.transpose(tf.one_hot(features["l2g_linked_ids"], num_candidates), [0, 2, 1])
  candidates = token_means(token_output, linked * real[:, tf.newaxis, :])
  query_tokens = tf.cast(tf.equal(features["segment_ids"], wikihop.QUESTION_TYPE), tf.float32)
  query = token_means(token_output, (query_tokens * real)[:, tf.newaxis, :])[:, 0]
  logits = bilinear_candidate_logits(wikihop.TASK, query, candidates, candidate_mask, config,
                                     is_training)
  loss, per_example = heads.answered_softmax_loss(logits, features["label"])
  return loss, per_example, logits


def global_token_states(token_output, features):
  """Each HotpotQA global token's state read off the long tokens (ETC's global outputs' place).

  Args:
    token_output: float32 [batch, L, hidden] (encode).
    features: dict with token_ids, sentence_ids, paragraph_ids [batch, L] and global_token_ids
      [batch, G] (hotpotqa.py's layout).

  Returns:
    float32 [batch, G, hidden]: a title / sentence / question-piece token the mean of its long
    tokens (sentence_ids), a PARAGRAPH token the mean of its paragraph's (paragraph_ids), global
    token 0 ([CLS]) the long [CLS] at position 0; 0 for a global token without long tokens.
  """
  num_global = tf.compat.dimension_value(features["global_token_ids"].shape[-1])
  max_seq_length = tf.compat.dimension_value(features["token_ids"].shape[-1])
  real = tf.cast(features["token_ids"] > 0, tf.float32)  # [batch, L]
  members = (tf.one_hot(features["sentence_ids"], num_global) +
             tf.one_hot(features["paragraph_ids"], num_global))  # -1: no row
  members = tf.transpose(members, [0, 2, 1]) * real[:, tf.newaxis, :]  # [batch, G, L]
  cls = tf.one_hot(0, num_global)[:, tf.newaxis] * tf.one_hot(0, max_seq_length)[tf.newaxis]
  return token_means(token_output, members + cls[tf.newaxis] * real[:, tf.newaxis, :1])


def hotpotqa_head(token_output, features, config, is_training):
  """long_task_heads.hotpotqa_head over the token states and global_token_states, under
  cls/long_tasks_bert/hotpotqa."""
  return heads.hotpotqa_head(token_output, global_token_states(token_output, features),
                             features, config, is_training, scope=SCOPE)


def nq_head(token_output, features, config, is_training):
  """long_task_heads.nq_head over the token states, under cls/long_tasks_bert/nq (the answer
  type read at position 0, the record's [CLS])."""
  return heads.nq_head(token_output, features, config, is_training, scope=SCOPE)


def openkp_head(token_output, features, config, is_training):
  """long_task_heads.openkp_head over the token states, under cls/long_tasks_bert/openkp."""
  return heads.openkp_head(token_output, features, config, is_training, scope=SCOPE)


def long_embedding_adder(task, features, config):
  """OpenKP's visual-feature embeddings of each long token (long_task_heads.
  openkp_embedding_adders under cls/long_tasks_bert/openkp), else None: float32 [batch, L,
  hidden]."""
  if task != openkp.TASK:
    return None
  return heads.openkp_embedding_adders(features, config, scope=SCOPE)[0]


def build_model(task, config, features, is_training, use_one_hot_embeddings=False,
                compute_dtype=None, num_labels=None):
  """BERT over the windows and the task's head.

  Args:
    task: a name of TASKS.
    config: BertWindowsConfig.
    features: dict of the records' features (long_tasks.FEATURE_SHAPES_DOC), int32.
    is_training: dropout on.
    use_one_hot_embeddings: one-hot embedding lookups.
    compute_dtype: modeling.BertModel's compute_dtype (None: float32).
    num_labels: classify: the size of the label vocabulary; else unused.

  Returns:
    (loss, per-example loss [batch], logits: cloze and wikihop [batch, C], supporting
    [batch, G], classify [batch, num_labels], hotpotqa, nq and openkp a dict (the
    long_task_heads head's)).
  """
  if task not in TASKS:
    raise ValueError("--model=bert_windows has no task %r (its tasks: %s)" % (
        task, ", ".join(TASKS)))
  if task == "classify" and not num_labels:
    raise ValueError("the classify head needs num_labels, the size of the label vocabulary")
  token_output = encode(config, features["token_ids"], is_training,
                        use_one_hot_embeddings=use_one_hot_embeddings,
                        compute_dtype=compute_dtype,
                        long_embedding_adder=long_embedding_adder(task, features, config))
  if task == "cloze":
    return cloze_head(token_output, features, config, is_training)
  if task == "classify":
    return classify_head(token_output, features, config, is_training, num_labels)
  if task == wikihop.TASK:
    return wikihop_head(token_output, features, config, is_training)
  if task == hotpotqa.TASK:
    return hotpotqa_head(token_output, features, config, is_training)
  if task == nq.TASK:
    return nq_head(token_output, features, config, is_training)
  if task == openkp.TASK:
    return openkp_head(token_output, features, config, is_training)
  return supporting_head(token_output, features, config, is_training)


def variable_shapes(task, config, feature_lengths, num_labels=None):
  """{variable name: shape} of build_model's graph (nothing is computed).

  Args:
    task: a name of TASKS.
    config: BertWindowsConfig.
    feature_lengths: {feature name: length} (long_task_heads.feature_lengths).
    num_labels: classify: the size of the label vocabulary; else unused.

  Returns:
    dict.
  """
  with tf.Graph().as_default():
    features = {name: tf1.placeholder(tf.int32, [1, length])
                for name, length in feature_lengths.items()}
    build_model(task, config, features, False, num_labels=num_labels)
    return {v.op.name: v.shape.as_list() for v in tf1.global_variables()}
