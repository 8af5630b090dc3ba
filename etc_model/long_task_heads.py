# coding=utf-8
"""The heads, losses and exact metrics of the long-context tasks (etc_model.long_tasks).

Cloze with candidates (WikiHop's form): the candidates are the first max_candidates global
tokens; each candidate's global output gets a score (dense -> 1), the scores of padding
candidates are MASKED_LOGIT, and the loss is the softmax cross-entropy over the candidates.
Supporting sentences (HotpotQA's supporting-fact form): every sentence's global output gets a
binary logit (dense -> 1); the loss is the sigmoid cross-entropy averaged over the real global
tokens (global_token_ids != 0). Variables: cls/long_tasks/{cloze,supporting}/output_weights
[1, hidden] and output_bias [1] (the official classifier head's layout).
Long-document classification (the book / author of a window): the global outputs are pooled by
their mean over the real global tokens (one per sentence: the records have no [CLS]-like global
token, and the mean weighs every sentence of the window alike, where the first global token
would be the first sentence's), then dropout -> dense -> softmax over the labels; variables
cls/long_tasks/classify/output_weights [num_labels, hidden] and output_bias [num_labels] (the
official classifier's shapes). The label vocabulary is create_long_tasks' classify_labels.

WikiHop (etc_model.wikihop, the official etcmodel head): the candidates are the first
max_candidates global tokens; each candidate's global output goes through the official final
layer (LayerNorm(x + dropout(dense(act(dense(x)))))) and gets a score (output_weights [1,
hidden], output_bias [1]); padding candidates score MASKED_LOGIT; softmax cross-entropy over the
candidates, averaged over the examples with an answer (label >= 0). Variables under
cls/long_tasks/wikihop/ (transform/dense_0, transform/dense_1, transform/layer_norm,
output_weights, output_bias).

HotpotQA (etc_model.hotpotqa, the official etcmodel head, span answers): a supporting-fact
logit per global token, three answer-type logits (span / yes / no) on the first global token
([CLS]) and begin / end logits per long token, no dropout; the loss is the mean of the official
four (sigmoid cross-entropy summed over the global tokens, the type's and the begin's and end's
softmax cross-entropies), each averaged over the examples that have its label. Variables under
cls/long_tasks/hotpotqa/ with the official names (supporting_facts_output_weights [1, hidden],
answer_type_output_weights [3, hidden], answer_span_output_weights [2, hidden] and their
biases). The head reads the long output too (LONG_OUTPUT_TASKS) and returns a dict of logits;
the official scores are etc_model.hotpotqa's, hotpotqa_metrics the records' own.

Natural Questions (etc_model.nq, the official etcmodel run_nq_lib head): four logits per long
token (long answer start / end, short answer start / end: dense -> 4) and five answer-type
logits (null, yes, no, long, short) on the first long token ([CLS]), no dropout; the loss is
the mean of the five softmax cross-entropies (each position over the long tokens, a label 0 for
an answer not in the window). Variables under cls/long_tasks/nq/ with the official names
(long_output_weights [4, hidden], long_output_bias [4], answer_type_output_weights [5,
hidden], answer_type_output_bias [5]); the official scores are etc_model.nq's, nq_metrics the
records' own.

OpenKP (etc_model.openkp, the official etcmodel run_finetuning_lib head): the long outputs of a
word's pieces are summed into the word's vector (pieces beyond the last long breakpoint left
out), LayerNorm; for n = 1 .. 5 a convolution over n words (valid, GELU), LayerNorm and a dense
-> 1 without bias give the logit of the n words from each word; n-grams past the document's
words get -10000. The loss is the softmax cross-entropy over all [5, L] n-grams against the
labels' first occurrences (mass 1 shared by the labelled n-grams, plus the official additive
smoothing 1e-4 over all), averaged over the batch. Variables under cls/long_tasks/openkp/ with
the official names (word_emb_layer_norm, {n}gram_conv/kernel [n, hidden, hidden] and bias,
{n}gram_layer_norm, logit_dense{n-1}/kernel [hidden, 1]); the official scores are
etc_model.openkp's, openkp_metrics the records' own. Its visual features enter the encoder
(EMBEDDING_ADDERS: openkp_embedding_adders, the official embeddings of each VDOM element added
to its global token and its long tokens' input embeddings).

Metrics are computed in NumPy over the whole evaluation set (no streaming approximation):
cloze_metrics (accuracy overall and per long_tasks.DISTANCE_BUCKETS bucket beside the
most-frequent / most-recent baselines read from the records), supporting_metrics
(HotpotQA's sp_f1 / sp_em: per-example precision, recall, F1 and exact match, averaged) and
classify_metrics (accuracy, macro F1, per-class counts).

The tables HEADS, METRICS and PREDICTION_LINES (task -> function, one signature per table) are
how a caller dispatches on the task (task_head, task_metrics, prediction_lines): a further task
adds an entry to each and to TASKS / MAIN_METRIC / INPUT_FEATURES / LABEL_FEATURES.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import json
import os

import numpy as np
import tensorflow as tf

import modeling
from realformer_tf import common
from etc_model import etc_estimator
from etc_model import hotpotqa
from etc_model import long_tasks
from etc_model import openkp
from etc_model import wikihop

tf1 = tf.compat.v1

TASKS = ("cloze", "supporting", "classify", "wikihop", "hotpotqa", "nq", "openkp")
MAIN_METRIC = {"cloze": "accuracy", "supporting": "f1", "classify": "accuracy",
               "wikihop": "accuracy", "hotpotqa": "joint_f1", "nq": "long-best-threshold-f1",
               "openkp": "F1@3"}
# The tasks whose head needs the label vocabulary of the data (long_tasks.json).
LABEL_VOCABULARY_TASKS = ("classify",)
SCOPE = "cls/long_tasks"
# The score of a padding candidate: exp() of it is 0 in float32.
MASKED_LOGIT = -1e9
COMMON_FEATURES = long_tasks.PACKED_FEATURES
# Per task: (feature name, length key) of the further model inputs the records add ("L": the
# long length, "G": the global length); the model reads them, predictions do not return them.
INPUT_FEATURES = {
    "cloze": (), "supporting": (), "classify": (),
    "wikihop": (("paragraph_ids", "L"), ("segment_ids", "L"), ("l2g_linked_ids", "L"),
                ("global_segment_ids", "G")),
    "hotpotqa": (("paragraph_ids", "L"), ("segment_ids", "L"), ("global_segment_ids", "G")),
    "nq": (),
    "openkp": (("word_ids", "L"), ("num_words", 1)) + tuple(
        (name, "G") for name in openkp.VISUAL_FEATURES),
}
# Per task: (feature name, length key) of the label features the records add ("C": the
# candidates, "G": the global length, 1: a scalar).
LABEL_FEATURES = {
    "cloze": (("candidate_mask", "C"), ("label", 1), ("blank_position", 1),
              ("answer_distance", 1), ("most_frequent", 1), ("most_recent", 1)),
    "supporting": (("sentence_labels", "G"), ("inserted_start", 1), ("inserted_count", 1)),
    "classify": (("label", 1),),
    "wikihop": (("candidate_mask", "C"), ("label", 1)),
    "hotpotqa": (("supporting_facts", "G"), ("answer_type", 1), ("answer_begin", 1),
                 ("answer_end", 1)),
    "nq": (("answer_type", 1), ("la_start", 1), ("la_end", 1), ("sa_start", 1), ("sa_end", 1)),
    "openkp": (("label_start", 3), ("label_length", 3)),
}
# The tasks whose candidates are the first max_candidates global tokens (candidate_mask [C]).
CANDIDATE_TASKS = ("cloze", "wikihop")
# The tasks whose head also reads the long output (task_head's long_output).
LONG_OUTPUT_TASKS = ("hotpotqa", "nq", "openkp")
# Per task: the outputs with one logit per long token (padded back to L after a cut batch).
LONG_LOGITS = {"hotpotqa": ("begin_logits", "end_logits"),
               "nq": ("la_start_logits", "la_end_logits", "sa_start_logits", "sa_end_logits")}
# HotpotQA's answer types (span, yes, no: etc_model.hotpotqa.ANSWER_TYPES).
NUM_ANSWER_TYPES = 3
# Natural Questions' answer types (null, yes, no, long, short: etc_model.nq.ANSWER_TYPES) and
# its per-token outputs (etc_model.nq.LABELS).
NQ_ANSWER_TYPES = 5
NQ_POSITIONS = ("la_start", "la_end", "sa_start", "sa_end")
# OpenKP: the longest keyphrase scored (the official kp_max_length) and the official additive
# smoothing of the n-gram labels (additive_smoothing_mass).
OPENKP_MAX_PHRASE_WORDS = 5
OPENKP_SMOOTHING_MASS = 1e-4


# --task=wikihop's side-input options (wikihop.add_side_inputs' keyword arguments; run_long_tasks'
# flags of the same names). A run keeps them in its output directory (SIDE_INPUTS_NAME): the
# model's outputs depend on them, so an export or a resume reads them from there.
WIKIHOP_SIDE_INPUT_OPTIONS = ("candidate_ignore_hard_g2l", "query_ignore_hard_g2l",
                              "enable_l2g_linking")
SIDE_INPUTS_NAME = "wikihop_side_inputs.json"


def add_task_side_inputs(task, features, config, long_len, global_len, side_input_options=None):
  """The side inputs of a task's batch: WikiHop's and HotpotQA's multi-hop ones, else
  etc_estimator's.

  Args:
    task: a name of TASKS.
    features: dict of batched int32 record features.
    config: EtcConfig.
    long_len: L.
    global_len: G.
    side_input_options: wikihop: {WIKIHOP_SIDE_INPUT_OPTIONS: value}; hotpotqa:
      {"cls_token_id": id}; else None.

  Returns:
    The dict with the side inputs.
  """
  if task == wikihop.TASK:
    return wikihop.add_side_inputs(features, config, long_len, global_len,
                                   **(side_input_options or {}))
  if task == hotpotqa.TASK:
    return hotpotqa.add_side_inputs(features, config, long_len, global_len,
                                    **(side_input_options or {}))
  return etc_estimator.add_side_inputs(features, config, long_len, global_len)


def read_side_inputs(run_dir):
  """The WikiHop side-input options a run was tuned with ({option: bool}), or None when the
  directory has no SIDE_INPUTS_NAME."""
  path = os.path.join(run_dir, SIDE_INPUTS_NAME)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, "r") as f:
    return json.loads(f.read())


def check_side_inputs(run_dir, options):
  """One line when a run directory's WikiHop side-input options (SIDE_INPUTS_NAME) differ from
  those of `options` ({option: bool}, the job's flags): the model was tuned with other inputs.

  Returns:
    The run's options, or None when it kept none.
  """
  saved = read_side_inputs(run_dir)
  for name in WIKIHOP_SIDE_INPUT_OPTIONS:
    if saved is not None and name in options and saved.get(name) != options[name]:
      common.fail("--%s=%s: the run in %s was tuned with --%s=%s (its %s)" % (
          name, str(options.get(name)).lower(), run_dir, name, str(saved.get(name)).lower(),
          SIDE_INPUTS_NAME))
  return saved


def feature_lengths(task, max_seq_length, max_global_seq_length, max_candidates):
  """{feature name: length} of a task's records (long_tasks.FEATURE_SHAPES_DOC).

  Args:
    task: a name of TASKS.
    max_seq_length: L.
    max_global_seq_length: G.
    max_candidates: C (cloze).

  Returns:
    OrderedDict of every stored feature's length.
  """
  lengths = collections.OrderedDict()
  for name in COMMON_FEATURES[:3]:
    lengths[name] = max_seq_length
  for name in COMMON_FEATURES[3:]:
    lengths[name] = max_global_seq_length
  sizes = {"L": max_seq_length, "G": max_global_seq_length, "C": max_candidates}
  for name, size in INPUT_FEATURES[task] + LABEL_FEATURES[task]:
    lengths[name] = sizes.get(size, size)
  return lengths


def _dense_to_one(inputs, config, is_training, task):
  """dense -> 1 over [batch, n, hidden] under cls/long_tasks/<task>; returns [batch, n]."""
  hidden = config.hidden_size
  with tf1.variable_scope("%s/%s" % (SCOPE, task)):
    output_weights = tf1.get_variable(
        "output_weights", [1, hidden],
        initializer=tf1.truncated_normal_initializer(stddev=config.initializer_range))
    output_bias = tf1.get_variable("output_bias", [1], initializer=tf1.zeros_initializer())
  if is_training:
    inputs = modeling.dropout(inputs, config.hidden_dropout_prob)
  return tf.einsum("bnh,h->bn", inputs, output_weights[0]) + output_bias[0]


def cloze_head(global_output, candidate_mask, labels, config, is_training):
  """Scores of the candidate global tokens and the softmax cross-entropy over them.

  Args:
    global_output: float32 [batch, G, hidden].
    candidate_mask: int [batch, C], 1 for a real candidate (candidates: global tokens 0..C-1).
    labels: int [batch] or [batch, 1], the answer's candidate index.
    config: EtcConfig (hidden_size, initializer_range, hidden_dropout_prob).
    is_training: dropout on.

  Returns:
    (loss scalar, per-example loss [batch], masked logits [batch, C]).
  """
  num_candidates = tf.compat.dimension_value(candidate_mask.shape[-1])
  logits = _dense_to_one(global_output[:, :num_candidates, :], config, is_training, "cloze")
  logits = tf.where(candidate_mask > 0, logits, tf.fill(tf.shape(logits), MASKED_LOGIT))
  labels = tf.reshape(labels, [-1])
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  return tf.reduce_mean(per_example), per_example, logits


def wikihop_head(global_output, candidate_mask, labels, config, is_training):
  """The official WikiHop head: a score per candidate global token, softmax cross-entropy.

  Args:
    global_output: float32 [batch, G, hidden].
    candidate_mask: int [batch, C], 1 for a real candidate (candidates: global tokens 0..C-1).
    labels: int [batch] or [batch, 1], the answer's candidate index (-1: no answer, no loss).
    config: EtcConfig (hidden_size, intermediate_size, hidden_act, initializer_range,
      hidden_dropout_prob).
    is_training: dropout on.

  Returns:
    (loss scalar: mean over the examples with an answer, per-example loss [batch] (0 without
    an answer), masked logits [batch, C]).
  """
  num_candidates = tf.compat.dimension_value(candidate_mask.shape[-1])
  candidates = global_output[:, :num_candidates, :]
  initializer = modeling.create_initializer(config.initializer_range)
  with tf1.variable_scope("%s/wikihop" % SCOPE):
    # The official final layer (etcmodel's ResidualBlock, post-LN order).
    with tf1.variable_scope("transform"):
      inner = modeling.dense_layer(candidates, config.intermediate_size,
                                   activation=modeling.get_activation(config.hidden_act),
                                   kernel_initializer=initializer, name="dense_0")
      inner = modeling.dense_layer(inner, config.hidden_size, kernel_initializer=initializer,
                                   name="dense_1")
      if is_training:
        inner = modeling.dropout(inner, config.hidden_dropout_prob)
      candidates = modeling.layer_norm(candidates + inner, "layer_norm")
    output_weights = tf1.get_variable("output_weights", [1, config.hidden_size],
                                      initializer=initializer)
    output_bias = tf1.get_variable("output_bias", [1], initializer=tf1.zeros_initializer())
  logits = tf.einsum("bnh,h->bn", candidates, output_weights[0]) + output_bias[0]
  logits = tf.where(candidate_mask > 0, logits, tf.fill(tf.shape(logits), MASKED_LOGIT))
  loss, per_example = answered_softmax_loss(logits, labels)
  return loss, per_example, logits


def answered_softmax_loss(logits, labels):
  """Softmax cross-entropy over the candidates of the records with an answer (WikiHop's loss).

  Args:
    logits: float32 [batch, C], padding candidates at MASKED_LOGIT.
    labels: int [batch] or [batch, 1], the answer's candidate index (-1: no answer, no loss).

  Returns:
    (loss scalar: the mean over the records with an answer, per-example loss [batch], 0
    without an answer).
  """
  labels = tf.reshape(labels, [-1])
  answered = tf.cast(labels >= 0, tf.float32)
  cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.maximum(labels, 0), logits=logits)
  return _weighted_mean(cross_entropy, answered), cross_entropy * answered


def wikihop_metrics(logits, candidate_mask, labels):
  """Exact metrics of WikiHop records: accuracy and loss over the records with an answer.

  The prediction is the arg-max real candidate (the first of equal scores). The official
  accuracy over every example of the data (skipped ones wrong) is etc_model.wikihop's.

  Args:
    logits: float [n, C].
    candidate_mask: int [n, C].
    labels: int [n] (or [n, 1]); -1 for a record without an answer.

  Returns:
    dict: records, answered (records with an answer), record_accuracy and loss (over those;
    None without any).
  """
  labels = np.asarray(labels).reshape(-1)
  answered = labels >= 0
  masked = np.where(np.asarray(candidate_mask) > 0, np.asarray(logits, np.float64), -np.inf)
  correct = masked.argmax(axis=1) == labels
  return {
      "records": int(len(labels)), "answered": int(answered.sum()),
      "record_accuracy": float(np.mean(correct[answered])) if answered.any() else None,
      "loss": (cloze_loss(np.asarray(logits)[answered], np.asarray(candidate_mask)[answered],
                          labels[answered]) if answered.any() else None),
  }


def _weighted_mean(values, weights):
  """sum(values * weights) / max(sum(weights), 1) over a batch [batch]."""
  return tf.reduce_sum(values * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)


def hotpotqa_head(long_output, global_output, features, config, is_training, scope=SCOPE):
  """The official HotpotQA head (etcmodel run_finetuning_lib, span answers) and its loss.

  A supporting-fact logit per global token (dense -> 1), three answer-type logits (span / yes /
  no) from the first global token ([CLS]), begin and end logits per long token (dense -> 2).
  Loss: the mean of the four official losses, each averaged over the examples that have its
  label: the sigmoid cross-entropy summed over the global tokens (examples with a
  supporting-fact label), the answer type's softmax cross-entropy (answer_type >= 0) and the
  begin's and the end's softmax cross-entropy over the long tokens (answer_begin >= 0). The
  training records all have every label (create_hotpotqa's filter): the official loss.

  Args:
    long_output: float32 [batch, L, hidden].
    global_output: float32 [batch, G, hidden].
    features: dict with supporting_facts [batch, G], answer_type, answer_begin, answer_end
      [batch, 1].
    config: EtcConfig (hidden_size, initializer_range).
    is_training: unused (the official head has no dropout).
    scope: the variables' scope (<scope>/hotpotqa/...; the BERT-window baseline's own).

  Returns:
    (loss scalar, per-example loss [batch], logits dict: sp_logits [batch, G],
    answer_type_logits [batch, 3], begin_logits / end_logits [batch, L]).
  """
  del is_training
  initializer = tf1.truncated_normal_initializer(stddev=config.initializer_range)
  hidden = config.hidden_size
  with tf1.variable_scope("%s/hotpotqa" % scope):
    sp_weights = tf1.get_variable("supporting_facts_output_weights", [1, hidden],
                                  initializer=initializer)
    sp_bias = tf1.get_variable("supporting_facts_output_bias", [1],
                               initializer=tf1.zeros_initializer())
    type_weights = tf1.get_variable("answer_type_output_weights", [NUM_ANSWER_TYPES, hidden],
                                    initializer=initializer)
    type_bias = tf1.get_variable("answer_type_output_bias", [NUM_ANSWER_TYPES],
                                 initializer=tf1.zeros_initializer())
    span_weights = tf1.get_variable("answer_span_output_weights", [2, hidden],
                                    initializer=initializer)
    span_bias = tf1.get_variable("answer_span_output_bias", [2],
                                 initializer=tf1.zeros_initializer())
  sp_logits = tf.einsum("bgh,h->bg", global_output, sp_weights[0]) + sp_bias[0]
  type_logits = tf.matmul(global_output[:, 0, :], type_weights, transpose_b=True) + type_bias
  span_logits = tf.einsum("blh,kh->kbl", long_output, span_weights) + span_bias[:, None, None]
  begin_logits, end_logits = span_logits[0], span_logits[1]

  sp_labels = tf.cast(features["supporting_facts"], tf.float32)
  answer_type = tf.reshape(features["answer_type"], [-1])
  begin = tf.reshape(features["answer_begin"], [-1])
  end = tf.reshape(features["answer_end"], [-1])
  sp_weight = tf.cast(tf.reduce_any(sp_labels > 0, axis=1), tf.float32)
  type_weight = tf.cast(answer_type >= 0, tf.float32)
  span_weight = tf.cast(begin >= 0, tf.float32)
  sp_ce = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=sp_labels,
                                                                logits=sp_logits), axis=1)
  type_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.maximum(answer_type, 0), logits=type_logits)
  begin_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(begin, 0),
                                                            logits=begin_logits)
  end_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(end, 0),
                                                          logits=end_logits)
  loss = (_weighted_mean(sp_ce, sp_weight) + _weighted_mean(type_ce, type_weight) +
          _weighted_mean(begin_ce, span_weight) + _weighted_mean(end_ce, span_weight)) / 4.0
  per_example = (sp_ce * sp_weight + type_ce * type_weight +
                 (begin_ce + end_ce) * span_weight) / 4.0
  logits = {"sp_logits": sp_logits, "answer_type_logits": type_logits,
            "begin_logits": begin_logits, "end_logits": end_logits}
  return loss, per_example, logits


def hotpotqa_metrics(outputs):
  """Record-level HotpotQA metrics (the official scores are etc_model.hotpotqa's).

  Args:
    outputs: stacked predict outputs (hotpotqa_head's logits, the label features and
      global_token_ids).

  Returns:
    dict: records, answer_type_accuracy (arg-max type over the records with a known type; None
    without any), sp_label_f1 (supporting_metrics' per-record F1 of the supporting-fact labels
    over the real global tokens: paragraph and title labels included, logit > 0).
  """
  answer_type = np.asarray(outputs["answer_type"]).reshape(-1)
  known = answer_type >= 0
  predicted = np.asarray(outputs["answer_type_logits"]).argmax(axis=1)
  return {
      "records": int(len(answer_type)),
      "answer_type_accuracy": (float(np.mean(predicted[known] == answer_type[known]))
                               if known.any() else None),
      "sp_label_f1": supporting_metrics(outputs["sp_logits"], outputs["supporting_facts"],
                                        outputs["global_token_ids"])["f1"],
  }


def nq_head(long_output, features, config, is_training, scope=SCOPE):
  """The official Natural Questions head (etcmodel run_nq_lib) and its loss.

  Args:
    long_output: float32 [batch, L, hidden].
    features: dict with answer_type, la_start, la_end, sa_start, sa_end [batch, 1].
    config: EtcConfig (hidden_size, initializer_range).
    is_training: unused (the official head has no dropout).
    scope: the variables' scope (<scope>/nq/...; the BERT-window baseline's own).

  Returns:
    (loss scalar: the mean of the five cross-entropies, per-example loss [batch], logits dict:
    la_start_logits, la_end_logits, sa_start_logits, sa_end_logits [batch, L],
    answer_type_logits [batch, 5]).
  """
  del is_training
  initializer = tf1.truncated_normal_initializer(stddev=config.initializer_range)
  hidden = config.hidden_size
  with tf1.variable_scope("%s/nq" % scope):
    long_weights = tf1.get_variable("long_output_weights", [len(NQ_POSITIONS), hidden],
                                    initializer=initializer)
    long_bias = tf1.get_variable("long_output_bias", [len(NQ_POSITIONS)],
                                 initializer=tf1.zeros_initializer())
    type_weights = tf1.get_variable("answer_type_output_weights", [NQ_ANSWER_TYPES, hidden],
                                    initializer=initializer)
    type_bias = tf1.get_variable("answer_type_output_bias", [NQ_ANSWER_TYPES],
                                 initializer=tf1.zeros_initializer())
  position_logits = (tf.einsum("blh,kh->kbl", long_output, long_weights) +
                     long_bias[:, None, None])
  type_logits = tf.matmul(long_output[:, 0, :], type_weights, transpose_b=True) + type_bias
  logits = {"answer_type_logits": type_logits}
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.maximum(tf.reshape(features["answer_type"], [-1]), 0), logits=type_logits)
  for k, name in enumerate(NQ_POSITIONS):
    logits[name + "_logits"] = position_logits[k]
    per_example += tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.reshape(features[name], [-1]), logits=position_logits[k])
  per_example /= float(len(NQ_POSITIONS) + 1)
  return tf.reduce_mean(per_example), per_example, logits


def nq_metrics(outputs):
  """Record-level Natural Questions metrics (the official scores are etc_model.nq's).

  Args:
    outputs: stacked predict outputs (nq_head's logits and the label features).

  Returns:
    dict: records, answer_type_accuracy (arg-max type over the records with a type; None
    without any), and per position the accuracy of the arg-max long token over the records
    whose window holds that answer (label > 0; None without any).
  """
  answer_type = np.asarray(outputs["answer_type"]).reshape(-1)
  known = answer_type >= 0
  predicted = np.asarray(outputs["answer_type_logits"]).argmax(axis=1)
  metrics = {"records": int(len(answer_type)),
             "answer_type_accuracy": (float(np.mean(predicted[known] == answer_type[known]))
                                      if known.any() else None)}
  for name in NQ_POSITIONS:
    labels = np.asarray(outputs[name]).reshape(-1)
    inside = labels > 0
    best = np.asarray(outputs[name + "_logits"]).argmax(axis=1)
    metrics[name + "_accuracy"] = (float(np.mean(best[inside] == labels[inside]))
                                   if inside.any() else None)
  return metrics


def word_vectors(long_output, word_ids, long_breakpoints):
  """Sums the long outputs of each word's pieces (the official batch_segment_sum_embeddings).

  Args:
    long_output: float32 [batch, L, hidden].
    word_ids: int [batch, L]: the word of each piece.
    long_breakpoints: int [batch, L]: 1 at the last real piece (later positions are padding).

  Returns:
    float32 [batch, L, hidden]: entry w is the sum over word w's pieces (0 for a word without
    pieces and past the words).
  """
  batch, length = tf.shape(long_output)[0], tf.shape(long_output)[1]
  # 1 up to and including the breakpoint: the real pieces.
  after = tf.cumsum(tf.cast(long_breakpoints, tf.float32), axis=1, exclusive=True)
  real = tf.cast(tf.equal(after, 0.0), long_output.dtype)
  segments = tf.cast(word_ids, tf.int32) + tf.range(batch)[:, None] * length
  summed = tf.math.unsorted_segment_sum(long_output * real[:, :, None], segments,
                                        batch * length)
  return tf.reshape(summed, tf.shape(long_output))


def openkp_ngram_labels(label_start, label_length, length,
                        smoothing_mass=OPENKP_SMOOTHING_MASS):
  """The official make_ngram_labels: label probabilities over the [5, L] n-grams.

  Args:
    label_start: int [batch, 3]: the first word of each keyphrase label, -1 for none.
    label_length: int [batch, 3]: its words (1 .. 5), -1 for none.
    length: L (a scalar).
    smoothing_mass: the mass added over all n-grams (at least 1e-6, as officially).

  Returns:
    float32 [batch, 5 * L], each row summing to 1 (n-gram k, start s at k * L + s).
  """
  phrase = tf.one_hot(tf.cast(label_length, tf.int32) - 1, OPENKP_MAX_PHRASE_WORDS)
  start = tf.one_hot(tf.cast(label_start, tf.int32), length)
  combined = tf.reshape(tf.einsum("bnk,bnl->bkl", phrase, start),
                        [-1, OPENKP_MAX_PHRASE_WORDS * length])
  labels = combined / (tf.reduce_sum(combined, axis=-1, keepdims=True) + 1e-6)
  labels += max(smoothing_mass, 1e-6) / tf.cast(OPENKP_MAX_PHRASE_WORDS * length, tf.float32)
  return labels / tf.reduce_sum(labels, axis=-1, keepdims=True)


def _scaled(values, low, high):
  """The official DenseFeatureScaler: clipped to [low, high], then mapped linearly to [-1, 1]."""
  middle, half = (high + low) / 2.0, (high - low) / 2.0
  return (tf.clip_by_value(values, low, high) - middle) / half


def openkp_embedding_adders(features, config, scope=SCOPE):
  """The official OpenKP visual-feature embeddings (etcmodel openkp run_finetuning_lib's
  _create_global_visual_feature_embeddings, use_visual_features_in_global and _in_long).

  Each global token (VDOM element) gets the sum of the embeddings of its indicator cross
  (block / heading / bold), its font id and its parent's font id and of the dense projection
  (dense -> GELU, dense -> GELU) of its 8 scaled coordinates and 5 other indicators; each long
  token gets its element's sum. Variables under cls/long_tasks/openkp/ with the official names
  (indicator_cross_emb_lookup, font_id_emb_lookup, parent_font_id_emb_lookup /embedding_table,
  dense_feature_projection, dense_feature_layer2 /kernel, bias).

  Args:
    features: dict with openkp.VISUAL_FEATURES [batch, G] and sentence_ids [batch, L].
    config: EtcConfig (hidden_size, initializer_range).
    scope: the variables' scope (<scope>/openkp/...; the BERT-window baseline's own).

  Returns:
    (long adder float32 [batch, L, hidden], global adder float32 [batch, G, hidden]).
  """
  hidden = config.hidden_size
  initializer = tf1.truncated_normal_initializer(stddev=config.initializer_range)
  with tf1.variable_scope("%s/openkp" % scope):
    adder = 0.0
    for name, table, size in (
        ("indicator_cross", "indicator_cross_emb_lookup", 2 ** len(openkp.CROSSED_INDICATORS)),
        ("font_ids", "font_id_emb_lookup", openkp.FONT_ID_VOCAB_SIZE),
        ("parent_font_ids", "parent_font_id_emb_lookup", openkp.FONT_ID_VOCAB_SIZE)):
      with tf1.variable_scope(table):
        embeddings = tf1.get_variable("embedding_table", [size, hidden], initializer=initializer)
      adder += tf.gather(embeddings, tf.cast(features[name], tf.int32))
    dense = []
    for name in openkp.COORDINATE_FEATURES:
      low, high = openkp.COORDINATE_RANGES[name.replace("parent_", "", 1)]
      pixels = tf.cast(features[name], tf.float32) / float(openkp.COORDINATE_SCALE)
      dense.append(_scaled(pixels, low, high))
    dense += [tf.cast(features[name], tf.float32) for name in openkp.DENSE_INDICATORS]
    dense = modeling.dense_layer(tf.stack(dense, axis=-1), hidden, activation=modeling.gelu,
                                 kernel_initializer=initializer,
                                 name="dense_feature_projection")
    adder += modeling.dense_layer(dense, hidden, activation=modeling.gelu,
                                  kernel_initializer=initializer, name="dense_feature_layer2")
  long_adder = tf.gather(adder, tf.cast(features["sentence_ids"], tf.int32), batch_dims=1)
  return long_adder, adder


# Per task: features, config -> (long, global) embedding adders of the encoder's input.
EMBEDDING_ADDERS = {"openkp": openkp_embedding_adders}


def embedding_adders(task, features, config):
  """The task's additions to the encoder's long and global input embeddings (EMBEDDING_ADDERS),
  or (None, None)."""
  if task not in EMBEDDING_ADDERS:
    return None, None
  return EMBEDDING_ADDERS[task](features, config)


def openkp_head(long_output, features, config, is_training, scope=SCOPE):
  """The official OpenKP n-gram head (etcmodel openkp run_finetuning_lib) and its loss.

  Args:
    long_output: float32 [batch, L, hidden].
    features: dict with word_ids, long_breakpoints [batch, L], num_words [batch, 1],
      label_start, label_length [batch, 3].
    config: EtcConfig (hidden_size, initializer_range).
    is_training: unused (the official head has no dropout).
    scope: the variables' scope (<scope>/openkp/...; the BERT-window baseline's own).

  Returns:
    (loss scalar, per-example loss [batch], {"ngram_logits": [batch, 5, L]}).
  """
  del is_training
  hidden = config.hidden_size
  long_output = tf.cast(long_output, tf.float32)
  length = tf.shape(long_output)[1]
  words = tf.range(length)[None, :]
  num_words = tf.reshape(tf.cast(features["num_words"], tf.int32), [-1, 1])
  ngram_logits = []
  with tf1.variable_scope("%s/openkp" % scope):
    vectors = modeling.layer_norm(
        word_vectors(long_output, features["word_ids"], features["long_breakpoints"]),
        name="word_emb_layer_norm")
    for i in range(OPENKP_MAX_PHRASE_WORDS):
      with tf1.variable_scope("%dgram_conv" % (i + 1)):
        kernel = tf1.get_variable(
            "kernel", [i + 1, hidden, hidden],
            initializer=tf1.truncated_normal_initializer(stddev=0.02 / np.sqrt(i + 1)))
        bias = tf1.get_variable("bias", [hidden], initializer=tf1.zeros_initializer())
      conv = modeling.gelu(tf.nn.conv1d(vectors, kernel, stride=1, padding="VALID") + bias)
      conv = modeling.layer_norm(conv, name="%dgram_layer_norm" % (i + 1))
      with tf1.variable_scope("logit_dense%d" % i):
        weights = tf1.get_variable("kernel", [hidden, 1],
                                   initializer=tf1.truncated_normal_initializer(stddev=0.02))
      logits = tf.pad(tf.squeeze(tf.einsum("blh,ho->blo", conv, weights), -1), [[0, 0], [0, i]])
      # The n-grams inside the document's words.
      inside = tf.cast(words + i < num_words, tf.float32)
      ngram_logits.append(logits * inside - 10000.0 * (1.0 - inside))
  ngram_logits = tf.stack(ngram_logits, axis=1)
  labels = openkp_ngram_labels(features["label_start"], features["label_length"], length)
  per_example = tf.nn.softmax_cross_entropy_with_logits(
      labels=labels, logits=tf.reshape(ngram_logits, tf.shape(labels)))
  return tf.reduce_mean(per_example), per_example, {"ngram_logits": ngram_logits}


def openkp_metrics(outputs):
  """Record-level OpenKP metrics (the official scores are etc_model.openkp's).

  Args:
    outputs: stacked predict outputs (ngram_logits [records, 5, L], the label features).

  Returns:
    dict: records, and best_ngram_accuracy: the share of the records with a label whose best
    n-gram is one of their labels (None without any).
  """
  logits = np.asarray(outputs["ngram_logits"])
  starts = np.asarray(outputs["label_start"])
  lengths = np.asarray(outputs["label_length"])
  best = logits.reshape(len(logits), -1).argmax(axis=1)
  best_length, best_start = np.unravel_index(best, logits.shape[1:])
  labelled = lengths[:, 0] > 0
  right = [(best_start[i], best_length[i] + 1) in set(zip(starts[i], lengths[i]))
           for i in np.nonzero(labelled)[0]]
  return {"records": int(len(logits)),
          "best_ngram_accuracy": float(np.mean(right)) if right else None}


def _openkp_line(outputs, i, label_names):  # pylint: disable=unused-argument
  logits = np.asarray(outputs["ngram_logits"][i])
  length, start = np.unravel_index(int(logits.argmax()), logits.shape)
  return {"index": i, "best_start": int(start), "best_length": int(length) + 1,
          "best_logit": round(float(logits[length, start]), 6)}


def supporting_head(global_output, global_token_ids, sentence_labels, config, is_training):
  """Per-sentence binary logits on the global tokens and their sigmoid cross-entropy.

  Args:
    global_output: float32 [batch, G, hidden].
    global_token_ids: int [batch, G]; 0 is the global padding (no sentence).
    sentence_labels: int [batch, G], 1 at an inserted sentence's global token.
    config: EtcConfig.
    is_training: dropout on.

  Returns:
    (loss scalar: mean over the real global tokens, per-example loss [batch], logits [batch, G]).
  """
  logits = _dense_to_one(global_output, config, is_training, "supporting")
  mask = tf.cast(global_token_ids > 0, tf.float32)
  ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(sentence_labels, tf.float32),
                                               logits=logits) * mask
  per_example = tf.reduce_sum(ce, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
  loss = tf.reduce_sum(ce) / tf.maximum(tf.reduce_sum(mask), 1.0)
  return loss, per_example, logits


def cloze_loss(logits, candidate_mask, labels):
  """NumPy: mean softmax cross-entropy over the real candidates.

  Args:
    logits: float [n, C] (padding candidates' values are ignored).
    candidate_mask: int [n, C].
    labels: int [n].

  Returns:
    float.
  """
  logits = np.where(np.asarray(candidate_mask) > 0, np.asarray(logits, np.float64), -np.inf)
  top = logits.max(axis=1, keepdims=True)
  log_norm = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
  picked = logits[np.arange(len(labels)), np.asarray(labels)]
  return float(np.mean(log_norm - picked))


def _cloze_group(correct, most_frequent, most_recent):
  return {"examples": int(len(correct)), "accuracy": float(np.mean(correct)),
          "most_frequent_accuracy": float(np.mean(most_frequent)),
          "most_recent_accuracy": float(np.mean(most_recent))}


def cloze_metrics(logits, candidate_mask, labels, answer_distance, most_frequent, most_recent):
  """Exact cloze metrics: accuracy overall and by answer_distance bucket, beside the baselines.

  Args:
    logits: float [n, C].
    candidate_mask: int [n, C].
    labels: int [n], the answers' candidate indices.
    answer_distance: int [n], word pieces from the blank to the answer's last mention.
    most_frequent: int [n], the most-frequent baseline's candidate index.
    most_recent: int [n], the most-recent baseline's.

  Returns:
    Flat dict: examples, accuracy, most_frequent_accuracy, most_recent_accuracy, loss, and per
    non-empty bucket b (long_tasks.distance_bucket) distance_<b>_{examples, accuracy,
    most_frequent_accuracy, most_recent_accuracy}.
  """
  labels = np.asarray(labels).reshape(-1)
  masked = np.where(np.asarray(candidate_mask) > 0, logits, -np.inf)
  correct = masked.argmax(axis=1) == labels
  freq = np.asarray(most_frequent).reshape(-1) == labels
  recent = np.asarray(most_recent).reshape(-1) == labels
  metrics = _cloze_group(correct, freq, recent)
  metrics["loss"] = cloze_loss(logits, candidate_mask, labels)
  buckets = np.array([long_tasks.distance_bucket(int(d))
                      for d in np.asarray(answer_distance).reshape(-1)])
  for bucket in sorted(set(buckets.tolist()), key=lambda b: int(b.split("-")[0].rstrip("+"))):
    at = buckets == bucket
    for key, value in _cloze_group(correct[at], freq[at], recent[at]).items():
      metrics["distance_%s_%s" % (bucket, key)] = value
  return metrics


def supporting_metrics(logits, sentence_labels, global_token_ids, threshold=0.0):
  """Exact supporting-sentence metrics (HotpotQA's sp_f1 / sp_em, averaged over examples).

  A sentence is predicted inserted when its logit > threshold. Per example: precision = tp /
  (tp + fp) (0 without predictions), recall = tp / (tp + fn) (0 without gold), F1 their
  harmonic mean (0 when both are 0), exact match 1 when every sentence is right.

  Args:
    logits: float [n, G].
    sentence_labels: int [n, G].
    global_token_ids: int [n, G]; 0 marks the global padding (not a sentence).
    threshold: logit threshold (0.0: probability 0.5).

  Returns:
    dict: examples, f1, precision, recall, exact_match (per-example means), micro_f1 (over all
    sentences), sentence_accuracy, inserted_share (gold) and predicted_share.
  """
  real = np.asarray(global_token_ids) > 0
  gold = (np.asarray(sentence_labels) > 0) & real
  pred = (np.asarray(logits) > threshold) & real
  tp = (gold & pred).sum(axis=1).astype(np.float64)
  fp = (~gold & pred).sum(axis=1).astype(np.float64)
  fn = (gold & ~pred).sum(axis=1).astype(np.float64)
  precision = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1), 0.0)
  recall = np.where(tp + fn > 0, tp / np.maximum(tp + fn, 1), 0.0)
  f1 = np.where(precision + recall > 0,
                2 * precision * recall / np.maximum(precision + recall, 1e-12), 0.0)
  micro_denominator = 2 * tp.sum() + fp.sum() + fn.sum()
  return {
      "examples": int(len(tp)),
      "f1": float(f1.mean()), "precision": float(precision.mean()),
      "recall": float(recall.mean()), "exact_match": float(np.mean(fp + fn == 0)),
      "micro_f1": float(2 * tp.sum() / micro_denominator) if micro_denominator else 0.0,
      "sentence_accuracy": float((gold == pred)[real].mean()),
      "inserted_share": float(gold.sum() / max(1, real.sum())),
      "predicted_share": float(pred.sum() / max(1, real.sum())),
  }


def supporting_ranking_metrics(logits, sentence_labels, global_token_ids):
  """Supporting-sentence metrics that do not depend on the 0.5 threshold.

  best_threshold: the logit threshold (a sentence is predicted when its logit > it) with the
  highest mean per-example F1 on these examples (supporting_metrics' F1), as nq_eval's
  best-threshold figures; of equal F1s the higher threshold wins. The thresholds tried lie
  halfway between consecutive distinct logits, below the lowest (every sentence) and above
  the highest (none). r_precision: per example with an inserted sentence, the share of
  inserted sentences among its k highest logits, k its number of inserted sentences (ties:
  the earlier sentence first); a random order scores k / (its sentences) on average.

  Args:
    logits: float [n, G].
    sentence_labels: int [n, G].
    global_token_ids: int [n, G]; 0 marks the global padding (not a sentence).

  Returns:
    dict: best_threshold, best_threshold_f1, r_precision (None without an inserted sentence).
  """
  logits = np.asarray(logits, np.float64)
  real = np.asarray(global_token_ids) > 0
  gold = (np.asarray(sentence_labels) > 0) & real
  if not real.any():
    return {"best_threshold": 0.0, "best_threshold_f1": 0.0, "r_precision": None}
  threshold, f1 = _best_f1_threshold(logits, gold, real)
  precisions = []
  for row_logits, row_gold, row_real in zip(logits, gold, real):
    inserted = int(row_gold.sum())
    if inserted:
      order = np.argsort(-row_logits[row_real], kind="stable")[:inserted]
      precisions.append(float(row_gold[row_real][order].mean()))
  return {"best_threshold": threshold, "best_threshold_f1": f1,
          "r_precision": float(np.mean(precisions)) if precisions else None}


def _best_f1_threshold(logits, gold, real):
  """supporting_ranking_metrics' best threshold and its mean F1, in one sweep.

  The real sentences are taken from the highest logit down; each one taken changes only its
  example's F1 (2 tp / (tp + fp + gold), supporting_metrics' F1), so the mean F1 after each
  distinct logit is a running sum of those changes: O(sentences log sentences).

  Args:
    logits: float64 [n, G].
    gold: bool [n, G], the inserted real sentences.
    real: bool [n, G], the real sentences (at least one).

  Returns:
    (threshold, mean F1) as floats.
  """
  rows = np.nonzero(real)[0]
  values, is_gold = logits[real], gold[real]
  order = np.argsort(-values, kind="stable")
  values, rows, is_gold = values[order], rows[order], is_gold[order]
  # Each taken sentence's example counts so far (tp, taken), in the order taken.
  by_row = np.lexsort((np.arange(len(rows)), rows))
  row_sorted = rows[by_row]
  first = np.ones(len(rows), bool)
  first[1:] = row_sorted[1:] != row_sorted[:-1]
  group_start = np.maximum.accumulate(np.where(first, np.arange(len(rows)), 0))
  gold_sorted = is_gold[by_row].astype(np.int64)
  cumulative = np.cumsum(gold_sorted)
  tp = cumulative - (cumulative - gold_sorted)[group_start]
  taken = np.arange(len(rows)) - group_start + 1
  gold_count = gold.sum(axis=1)[row_sorted]
  f1_after = 2.0 * tp / (taken + gold_count)
  f1_before = np.where(first, 0.0, np.roll(f1_after, 1))
  change = np.empty(len(rows))
  change[by_row] = f1_after - f1_before
  # The mean F1 once every sentence of each distinct logit is taken, highest logit first;
  # rounded so that equal F1s reached by different sums compare equal.
  last = np.ones(len(values), bool)
  last[:-1] = values[:-1] != values[1:]
  f1 = np.round(np.concatenate([[0.0], np.cumsum(change)[last]]) / len(logits), 12)
  below = values[last]
  thresholds = np.concatenate([[below[0] + 1.0], (below[:-1] + below[1:]) / 2.0,
                               [below[-1] - 1.0]])
  best = int(np.argmax(f1))  # the first best: the highest threshold
  return float(thresholds[best]), float(f1[best])


def classify_head(global_output, global_token_ids, labels, num_labels, config, is_training):
  """Mean of the real global tokens' outputs -> dense -> softmax cross-entropy over the labels.

  Args:
    global_output: float32 [batch, G, hidden].
    global_token_ids: int [batch, G]; 0 is the global padding (not pooled).
    labels: int [batch] or [batch, 1], the label index.
    num_labels: the size of the label vocabulary.
    config: EtcConfig (hidden_size, initializer_range, hidden_dropout_prob).
    is_training: dropout on.

  Returns:
    (loss scalar, per-example loss [batch], logits [batch, num_labels]).
  """
  hidden = config.hidden_size
  mask = tf.cast(global_token_ids > 0, global_output.dtype)[:, :, None]
  pooled = tf.reduce_sum(global_output * mask, axis=1) / tf.maximum(
      tf.reduce_sum(mask, axis=1), 1.0)
  with tf1.variable_scope("%s/classify" % SCOPE):
    output_weights = tf1.get_variable(
        "output_weights", [num_labels, hidden],
        initializer=tf1.truncated_normal_initializer(stddev=config.initializer_range))
    output_bias = tf1.get_variable("output_bias", [num_labels],
                                   initializer=tf1.zeros_initializer())
  if is_training:
    pooled = modeling.dropout(pooled, config.hidden_dropout_prob)
  logits = tf.nn.bias_add(tf.matmul(pooled, output_weights, transpose_b=True), output_bias)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.reshape(labels, [-1]), logits=logits)
  return tf.reduce_mean(per_example), per_example, logits


def classify_loss(logits, labels):
  """NumPy: the mean softmax cross-entropy of classify_head's logits [n, K] and labels [n]."""
  logits = np.asarray(logits, np.float64)
  labels = np.asarray(labels).reshape(-1)
  top = logits.max(axis=1, keepdims=True)
  log_norm = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
  return float(np.mean(log_norm - logits[np.arange(len(labels)), labels]))


def classify_metrics(logits, labels, label_names):
  """Exact classification metrics: accuracy, macro F1 and per-class counts.

  Macro F1 is the mean of the per-class F1 = 2 tp / (2 tp + fp + fn) over the classes that
  occur among the gold labels or the predictions (scikit-learn's f1_score(average="macro")).

  Args:
    logits: float [n, K].
    labels: int [n] (or [n, 1]), the gold label indices.
    label_names: the K label names (the data's label vocabulary).

  Returns:
    dict: examples, accuracy, macro_f1, loss, majority_share (the share of the most frequent
    gold label: the accuracy of the best constant answer) and per_class {name: {examples,
    predicted, correct, f1}} for every class that occurs among the gold labels or predictions.
  """
  labels = np.asarray(labels).reshape(-1)
  predicted = np.asarray(logits).argmax(axis=1)
  num_labels = len(label_names)
  gold_count = np.bincount(labels, minlength=num_labels)
  pred_count = np.bincount(predicted, minlength=num_labels)
  correct = np.bincount(labels[predicted == labels], minlength=num_labels)
  present = np.nonzero(gold_count + pred_count)[0]
  f1 = 2.0 * correct / np.maximum(gold_count + pred_count, 1)
  per_class = collections.OrderedDict(
      (label_names[k], {"examples": int(gold_count[k]), "predicted": int(pred_count[k]),
                        "correct": int(correct[k]), "f1": float(f1[k])}) for k in present)
  return {
      "examples": int(len(labels)),
      "accuracy": float(np.mean(predicted == labels)),
      "macro_f1": float(f1[present].mean()),
      "loss": classify_loss(logits, labels),
      "majority_share": float(gold_count.max() / float(len(labels))),
      "per_class": per_class,
  }


def supporting_loss(logits, sentence_labels, global_token_ids):
  """NumPy: the sigmoid cross-entropy averaged over the real global tokens (supporting_head)."""
  real = np.asarray(global_token_ids) > 0
  x = np.asarray(logits, np.float64)
  z = np.asarray(sentence_labels, np.float64)
  ce = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
  return float(ce[real].sum() / max(1, real.sum()))


# Dispatch tables: task -> function. HEADS: (global_output [batch, G, hidden], features (the
# records' features by name), config, is_training, num_labels) -> (loss, per-example loss,
# logits). METRICS: (stacked predict outputs, label_names) -> metrics dict. PREDICTION_LINES:
# (stacked outputs, example index, label_names) -> one JSON-able dict of the predictions file.
HEADS = {
    "cloze": lambda out, f, config, training, num_labels: cloze_head(
        out, f["candidate_mask"], f["label"], config, training),
    "supporting": lambda out, f, config, training, num_labels: supporting_head(
        out, f["global_token_ids"], f["sentence_labels"], config, training),
    "classify": lambda out, f, config, training, num_labels: classify_head(
        out, f["global_token_ids"], f["label"], num_labels, config, training),
    "wikihop": lambda out, f, config, training, num_labels: wikihop_head(
        out, f["candidate_mask"], f["label"], config, training),
    "hotpotqa": lambda out, f, config, training, num_labels, long_output: hotpotqa_head(
        long_output, out, f, config, training),
    "nq": lambda out, f, config, training, num_labels, long_output: nq_head(
        long_output, f, config, training),
    "openkp": lambda out, f, config, training, num_labels, long_output: openkp_head(
        long_output, f, config, training),
}


def _supporting_metrics_and_loss(outputs, label_names):  # pylint: disable=unused-argument
  metrics = supporting_metrics(outputs["logits"], outputs["sentence_labels"],
                               outputs["global_token_ids"])
  metrics.update(supporting_ranking_metrics(outputs["logits"], outputs["sentence_labels"],
                                            outputs["global_token_ids"]))
  metrics["loss"] = supporting_loss(outputs["logits"], outputs["sentence_labels"],
                                    outputs["global_token_ids"])
  return metrics


METRICS = {
    "cloze": lambda o, label_names: cloze_metrics(
        o["logits"], o["candidate_mask"], o["label"], o["answer_distance"], o["most_frequent"],
        o["most_recent"]),
    "supporting": _supporting_metrics_and_loss,
    "classify": lambda o, label_names: classify_metrics(o["logits"], o["label"], label_names),
    "wikihop": lambda o, label_names: wikihop_metrics(o["logits"], o["candidate_mask"],
                                                      o["label"]),
    "hotpotqa": lambda o, label_names: hotpotqa_metrics(o),
    "nq": lambda o, label_names: nq_metrics(o),
    "openkp": lambda o, label_names: openkp_metrics(o),
}


def _cloze_line(outputs, i, label_names):  # pylint: disable=unused-argument
  logits = outputs["logits"][i]
  num = int(outputs["candidate_mask"][i].sum())
  scores = logits[:num] - logits[:num].max()
  probs = np.exp(scores) / np.exp(scores).sum()
  return {"index": i, "prediction": int(np.argmax(logits[:num])),
          "label": int(outputs["label"][i][0]),
          "answer_distance": int(outputs["answer_distance"][i][0]),
          "probabilities": [round(float(p), 6) for p in probs]}


def _supporting_line(outputs, i, label_names):  # pylint: disable=unused-argument
  logits = outputs["logits"][i]
  num = int((outputs["global_token_ids"][i] > 0).sum())
  probs = 1.0 / (1.0 + np.exp(-logits[:num].astype(np.float64)))
  return {"index": i,
          "predicted_sentences": [int(g) for g in np.nonzero(logits[:num] > 0)[0]],
          "gold_sentences": [int(g) for g in np.nonzero(outputs["sentence_labels"][i][:num])[0]],
          "probabilities": [round(float(p), 6) for p in probs]}


def _classify_line(outputs, i, label_names):
  logits = np.asarray(outputs["logits"][i], np.float64)
  probs = np.exp(logits - logits.max())
  probs /= probs.sum()
  prediction, label = int(np.argmax(logits)), int(outputs["label"][i][0])
  return {"index": i, "prediction": prediction, "label": label,
          "predicted_label": label_names[prediction], "gold_label": label_names[label],
          "probabilities": [round(float(p), 6) for p in probs]}


def _wikihop_line(outputs, i, label_names):  # pylint: disable=unused-argument
  logits = np.asarray(outputs["logits"][i], np.float64)
  num = int(outputs["candidate_mask"][i].sum())
  probs = np.exp(logits[:num] - logits[:num].max())
  probs /= probs.sum()
  return {"index": i, "prediction": int(np.argmax(logits[:num])),
          "label": int(outputs["label"][i][0]),
          "probabilities": [round(float(p), 6) for p in probs]}


def _hotpotqa_line(outputs, i, label_names):  # pylint: disable=unused-argument
  logits = np.asarray(outputs["answer_type_logits"][i], np.float64)
  probs = np.exp(logits - logits.max())
  probs /= probs.sum()
  num = int((outputs["global_token_ids"][i] > 0).sum())
  return {"index": i, "answer_type": int(np.argmax(logits)),
          "label": int(outputs["answer_type"][i][0]),
          "answer_type_probabilities": [round(float(p), 6) for p in probs],
          "supporting_global_tokens": [
              int(g) for g in np.nonzero(outputs["sp_logits"][i][:num] >= 0)[0]]}


def _nq_line(outputs, i, label_names):  # pylint: disable=unused-argument
  logits = np.asarray(outputs["answer_type_logits"][i], np.float64)
  probs = np.exp(logits - logits.max())
  probs /= probs.sum()
  line = {"index": i, "answer_type": int(np.argmax(logits)),
          "label": int(outputs["answer_type"][i][0]),
          "answer_type_probabilities": [round(float(p), 6) for p in probs]}
  for name in NQ_POSITIONS:
    line[name] = int(np.argmax(outputs[name + "_logits"][i]))
  return line


PREDICTION_LINES = {"cloze": _cloze_line, "supporting": _supporting_line,
                    "classify": _classify_line, "wikihop": _wikihop_line,
                    "hotpotqa": _hotpotqa_line, "nq": _nq_line, "openkp": _openkp_line}


def task_head(task, global_output, features, config, is_training, num_labels=None,
              long_output=None):
  """The task's head over the encoder's global output (HEADS; LONG_OUTPUT_TASKS also read the
  long output).

  Args:
    task: a name of TASKS.
    global_output: float32 [batch, G, hidden].
    features: dict of the records' features (LABEL_FEATURES[task] and global_token_ids).
    config: EtcConfig.
    is_training: dropout on.
    num_labels: the label vocabulary's size (LABEL_VOCABULARY_TASKS), else unused.
    long_output: float32 [batch, L, hidden] (LONG_OUTPUT_TASKS), else unused.

  Returns:
    (loss scalar, per-example loss [batch], logits: cloze and wikihop [batch, C], supporting
    [batch, G], classify [batch, num_labels], hotpotqa a dict (hotpotqa_head)).
  """
  if task in LONG_OUTPUT_TASKS:
    return HEADS[task](global_output, features, config, is_training, num_labels, long_output)
  return HEADS[task](global_output, features, config, is_training, num_labels)


def task_metrics(task, outputs, label_names=None):
  """The exact metrics of stacked predict outputs ("logits" and the label features) (METRICS)."""
  return METRICS[task](outputs, label_names)


def prediction_lines(task, outputs, label_names=None):
  """One JSON-able dict per example of stacked predict outputs (PREDICTION_LINES)."""
  count = len(outputs["logits"] if "logits" in outputs else outputs["global_token_ids"])
  return [PREDICTION_LINES[task](outputs, i, label_names) for i in range(count)]
