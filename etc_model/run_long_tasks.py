# coding=utf-8
r"""Fine-tunes ETC / RealFormer-ETC on the long-context tasks (cloze with candidates, supporting
sentences, long-document classification) of etc_model.create_long_tasks.

  python -m etc_model.run_long_tasks --task=cloze --data_dir=long_tasks \
      --etc_config_file=etc_out/etc_config.json --init_checkpoint=etc_out/model.ckpt-100000 \
      --output_dir=cloze_out --do_train --do_eval --do_predict \
      --max_seq_length=4096 --max_global_seq_length=256 --max_candidates=10 \
      [--residual_attention=sum] [--eval_every_steps=500 --early_stopping_patience=3 --keep_best]

Reads <data_dir>/<task>_{train,dev,test}.tfrecord (long_tasks.FEATURE_SHAPES_DOC); the side
inputs are computed in the input pipeline as etc_model.run_pretraining does. The model is
EtcModel (--init_checkpoint: a BERT lifted by etc_model.lift_bert_checkpoint or an ETC
pre-trained by etc_model.run_pretraining; residual_attention from the config, or the
--residual_attention override) and a head of etc_model.long_task_heads under cls/long_tasks/:
  cloze       a score per candidate global token, softmax cross-entropy over the candidates;
  supporting  a binary logit per sentence global token, sigmoid cross-entropy;
  classify    the mean of the real global tokens' outputs -> dense -> softmax over the labels
              (the book / author of the window; the label vocabulary is <data_dir>/long_tasks.json's
              classify_labels, kept in <output_dir>/classify_labels.json: another vocabulary
              there, or a record's label outside it, is one line).
  wikihop     WikiHop records of etc_model.create_wikihop (the official etcmodel features and
              head: a score per candidate global token, softmax cross-entropy); the side inputs
              are the official multi-hop ones (wikihop.add_side_inputs, with
              --candidate_ignore_hard_g2l, --query_ignore_hard_g2l, --enable_l2g_linking).
              eval_results.json's accuracy is the official one over every example of the dev
              file (an example without a record, skipped by create_wikihop, counts as wrong;
              record_accuracy is over the records); --do_eval also writes dev_predictions.json
              and --do_predict test_predictions.json, {id: answer}, the official submission
              format (etc_model.wikihop_evaluate scores them against a QAngaroo file).
  hotpotqa    HotpotQA records of etc_model.create_hotpotqa (the official etcmodel features and
              head: a supporting-fact logit per global token, answer type span / yes / no from
              the [CLS] global token, begin / end logits per long token; the mean of the four
              official losses); side inputs hotpotqa.add_side_inputs ([CLS] ignores the hard
              g2l mask). eval_results.json holds the official scores (em, f1, sp_em, sp_f1,
              joint_em, joint_f1, ... of hotpot_evaluate_v1, over every example of the dev
              file; the main metric joint_f1) beside answer_type_accuracy and sp_label_f1 over
              the records; --do_eval writes dev_predictions.json and --do_predict
              test_predictions.json, {"answer": {id: text}, "sp": {id: [[title, sent_id],
              ...]}}, the official submission format (etc_model.hotpotqa_evaluate scores them),
              the facts at --sp_threshold, span answers of at most --max_answer_length pieces,
              the text from the data's vocabulary copy (with a SentencePiece model, the context
              text the span's pieces cover; etc_model.hotpotqa.predict_example).
  nq          Natural Questions records of etc_model.create_nq (one per document window; the
              official etcmodel features and head: long / short answer start and end logits
              per long token, five answer types null / yes / no / long / short from the long
              [CLS]; the mean of the five official losses); the standard side inputs.
              eval_results.json holds the official scores of nq_eval over every example of
              the dev file (long- / short-best-threshold-f1, -precision, -recall, the
              thresholds, recall-at-precision>=0.5 / 0.75 / 0.9, and long- / short-answer-f1
              ... over every prediction; the main metric long-best-threshold-f1) beside
              answer_type_accuracy and the positions' accuracies over the records; --do_eval
              writes dev_predictions.json and --do_predict test_predictions.json, {"predictions":
              [...]}, the official prediction format (etc_model.nq_evaluate scores them), the
              windows of an example joined by etc_model.nq.predict_example (short answers of
              fewer than --max_short_answer_length document tokens).
  openkp      OpenKP records of etc_model.create_openkp (one per document; the official etcmodel
              features and n-gram head: the word pieces summed into words, a logit for each
              n-gram of 1 to 5 words, softmax cross-entropy against the labelled keyphrases'
              first occurrences; the official visual-feature embeddings added to each VDOM
              element's global token and its long tokens); the standard side inputs (one
              global token per VDOM element); always --padding=max_length (a word's index is
              not bounded by its pieces' positions). eval_results.json holds the official
              OpenKP scores over every document of the dev file (F1@1, P@1, R@1, F1@3, ...,
              R@5; the main metric F1@3; a document without a record predicts nothing) beside
              best_ngram_accuracy over the records; --do_eval writes dev_predictions.jsonl
              and --do_predict test_predictions.jsonl: one line per document, {"url",
              "KeyPhrases": [[keyphrase], ...] (the 5 best distinct n-grams, lower-cased, best
              first), "scores": [logit, ...]}, the official candidate format
              (etc_model.openkp_evaluate scores them).
The task dispatch is long_task_heads' tables (HEADS, METRICS, PREDICTION_LINES, and
EMBEDDING_ADDERS for openkp's visual features).

--model=bert_windows is the baseline users would otherwise pick (etc_model.bert_windows, every
task): the official BertModel (--bert_config_file; --init_checkpoint a BERT checkpoint,
variables under bert/) over windows of --window_length tokens ([CLS] and [SEP] included)
--window_stride apart, each token read from its most-central window, and a head under
cls/long_tasks_bert/ (cloze: the blank's state against the mean of each
candidate's mentions, bilinear; supporting: the mean of each sentence's tokens -> a logit;
classify: the mean of every real token -> the labels; wikihop: the query's mean against the
mean of each candidate's linked tokens, bilinear; hotpotqa: the ETC head over each global
token's long tokens; nq and openkp: the ETC head over the token states, OpenKP's visual
embeddings added to each element's tokens' input embeddings). The same flags, evaluation,
resume, early stopping and files, with the same keys (model, window_length, window_stride: None
for ETC).

--do_eval scores the dev set exactly (Estimator.predict or the engine's, metrics in NumPy) and
writes eval_results.json (with the checkpoint and step scored): cloze accuracy overall and by
answer_distance bucket beside the most-frequent / most-recent baselines of the records;
supporting sentence-level F1 / precision / recall and exact match (all sentences of an example
right), HotpotQA's sp_* definitions, at probability 0.5, and the threshold-free best_threshold /
best_threshold_f1 (the logit threshold with the best F1 on the split) and r_precision
(long_task_heads.supporting_ranking_metrics); the test results of a job that also evaluated add
f1_at_dev_threshold / exact_match_at_dev_threshold, at the dev split's best threshold; classify
accuracy, macro F1, the majority share and per-class counts (with the label list).
--do_predict writes test_predictions.jsonl (one line per test record; its checkpoint in
test_predictions.jsonl.checkpoint.json) and test_results.json (the same metrics on the test
split, whose records carry their labels).

As run_classifier: --eval_every_steps / --early_stopping_patience / --keep_best (training_eval:
eval_history.jsonl, best/), exact resume (rerun the same command; a checkpoint of another model
in --output_dir is one line before anything is written), one job per --output_dir (lock file),
SIGINT / SIGTERM: checkpoint, exit 130 / 143 without results, --seed, progress lines,
--allow_random_eval / --allow_unmatched_init (an --init_checkpoint must supply every variable of
the encoder, ETC's or BERT's; the task head starts fresh). --precision=bf16 / fp16 runs the
encoder (ETC's or BERT's) in that dtype with float32 variables (the same checkpoints in every
precision), heads and losses float32; fp16 trains with dynamic loss scaling
(estimator_utils.create_train_op).

TensorFlow 2.15 trains with the Estimator. TF 2.16 and later (no Estimator) train, evaluate and
predict with realformer_tf.tf2_training.Engine over the same graph: the same flags, checkpoints
(official names, Adam slots, global_step: a job continues on either engine), eval_results,
test_results, predictions files and sidecars, the same loss at every step to float32 rounding;
the flags only the Estimator implements (TPU, the distribution strategies other than mirrored
and multi_worker_mirrored) are one-line errors there; --precision=bf16 and fp16 train as on the
Estimator, and several workers (multi_worker_mirrored) train without --eval_every_steps.
Variables the task's loss does not reach (ETC's last layer's long outputs under a global-token
head, BERT's pooler under
bert_windows) stay untrained on both engines: no Adam slots, their --init_checkpoint values.

--padding=longest (the default of evaluation and prediction; training keeps max_length, as
ETC draws its dropout masks over the batch's shape) cuts each batch to its longest real long
input and its longest real global input (cut_batch: rounded up to a multiple of 8, of the
sparse layout's block local_radius + 1, at least the cloze candidates) and computes the side
inputs for the cut batch: every real token's output, so the logits, eval_results.json and the
predictions, equal the max_length job's to float rounding (the supporting logits of global
padding are 0 instead of a value nobody reads). bucket rounds the lengths up to
batch_padding.padding_buckets; on TPU max_length. --model=bert_windows: max_length only.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import batch_padding
from realformer_tf import model_config
from realformer_tf import tf2_training
import modeling
from realformer_tf import training_eval
from etc_model import bert_windows
from etc_model import etc_estimator
from etc_model import etc_modeling
from etc_model import hotpotqa
from etc_model import long_task_heads as heads
from etc_model import long_tasks
from etc_model import nq
from etc_model import openkp
from etc_model import wikihop

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

SCRIPT = "etc_model.run_long_tasks"
CONFIG_NAME = "etc_config.json"
SUPPORTED_MODEL_FN_FLAGS = ("precision", "fused_optimizer")
SPLITS = ("train", "dev", "test")
PREDICTIONS_NAME = "test_predictions.jsonl"
# --task=wikihop: the answers {id: answer} of the dev / test split, the official submission format;
# --task=hotpotqa: {"answer": {id: text}, "sp": {id: [[title, sent_id], ...]}}, likewise;
# --task=nq: {"predictions": [...]}, the official NQ format; --task=openkp: JSON lines
# {"url", "KeyPhrases", "scores"} (DEV_LINES_NAME; the test split's in PREDICTIONS_NAME).
DEV_ANSWERS_NAME = "dev_predictions.json"
DEV_LINES_NAME = "dev_predictions.jsonl"
TEST_ANSWERS_NAME = "test_predictions.json"
MODELS = ("etc", "bert_windows")
LABELS_NAME = "classify_labels.json"


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_enum("task", None, list(heads.TASKS), "The long-context task.")
  flags.DEFINE_string("data_dir", None,
                      "The --output_dir of etc_model.create_long_tasks "
                      "(<task>_{train,dev,test}.tfrecord).")
  flags.DEFINE_string("etc_config_file", None, "The ETC config json file (official keys).")
  flags.DEFINE_string("output_dir", None, "Where the checkpoints and results are written.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint (a lifted BERT or an ETC-pretrained model).")
  flags.DEFINE_integer("max_seq_length", 4096, "Long input length L; must match the data.")
  flags.DEFINE_integer("max_global_seq_length", 256,
                       "Global input length G; must match the data.")
  flags.DEFINE_integer("max_candidates", 10, "Cloze: candidates C; must match the data.")
  flags.DEFINE_bool("do_train", False, "Whether to train on <task>_train.tfrecord.")
  flags.DEFINE_bool("do_eval", False, "Whether to score <task>_dev.tfrecord.")
  flags.DEFINE_bool("do_predict", False, "Whether to predict <task>_test.tfrecord.")
  flags.DEFINE_integer("train_batch_size", 8, "Total batch size for training.")
  flags.DEFINE_integer("eval_batch_size", 8,
                       "Total batch size of the Estimator's EVAL mode (the dev set is scored "
                       "through predict, in batches of --predict_batch_size).")
  flags.DEFINE_integer("predict_batch_size", 8,
                       "Total batch size for scoring the dev set and predicting the test set.")
  flags.DEFINE_float("learning_rate", 3e-5, "The initial learning rate for Adam.")
  flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.")
  flags.DEFINE_integer("num_train_steps", 0,
                       "Optimizer updates; 0: --num_train_epochs over the training records.")
  flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps with a linear warm-up.")
  training_eval.define_flags("the main metric: cloze accuracy, supporting f1, classify "
                             "accuracy, wikihop accuracy, hotpotqa joint_f1, nq "
                             "long-best-threshold-f1, openkp F1@3")
  flags.DEFINE_enum("residual_attention", None, list(modeling.RESIDUAL_ATTENTION_TYPES),
                    "Overrides residual_attention in --etc_config_file (none | sum | mean).")
  flags.DEFINE_bool("use_hard_g2l_mask", None,
                    "Overrides use_hard_g2l_mask in --etc_config_file: a global token attends "
                    "only to its own long tokens (--nouse_hard_g2l_mask: to every long token); "
                    "unset: the file's. Saved in the output's etc_config.json.")
  flags.DEFINE_enum("att_implementation", "auto", list(etc_modeling.ATT_IMPLEMENTATIONS),
                    "Layout of the long rows' attention: auto, full or sparse.")
  flags.DEFINE_enum("model", "etc", list(MODELS),
                    "etc: EtcModel (--etc_config_file); bert_windows: the baseline, BERT over "
                    "sliding windows (--bert_config_file, etc_model.bert_windows).")
  flags.DEFINE_string("bert_config_file", None,
                      "--model=bert_windows: the BERT config json (--init_checkpoint is then a "
                      "BERT checkpoint, official names).")
  flags.DEFINE_integer("window_length", 512,
                       "--model=bert_windows: tokens per window, [CLS] and [SEP] included "
                       "(<= the BERT's max_position_embeddings).")
  flags.DEFINE_integer("window_stride", 256,
                       "--model=bert_windows: tokens between window starts.")
  batch_padding.define_padding_flag(
      default_help="Default: longest for evaluation and prediction (bucket with --use_xla), "
      "max_length for training (ETC draws its dropout masks over the batch's shape) and on TPU.",
      extra_help="Here each batch is cut to its longest real long input (the last long "
      "breakpoint or token; rounded up to a multiple of 8, or of the sparse layout's block "
      "local_radius + 1) and its longest real global input (at least --max_candidates for "
      "cloze), the side inputs computed for the cut batch; --att_implementation=auto picks the "
      "layout from --max_seq_length as a max_length job does. --model=bert_windows: "
      "max_length only (its window count is static).")
  flags.DEFINE_bool("candidate_ignore_hard_g2l", False,
                    "--task=wikihop: under the config's use_hard_g2l_mask, the candidates' global "
                    "tokens still see every long token (the official run_wikihop flag).")
  flags.DEFINE_bool("query_ignore_hard_g2l", False,
                    "--task=wikihop: likewise the question's global tokens.")
  flags.DEFINE_bool("enable_l2g_linking", True,
                    "--task=wikihop: a candidate's mentions in the documents get the relative id "
                    "of its own sentence towards its global token.")
  flags.DEFINE_float("sp_threshold", hotpotqa.DEFAULT_SP_THRESHOLD,
                     "--task=hotpotqa: a title or sentence is a predicted supporting fact when "
                     "its probability is at least this (the official default 0.5).")
  flags.DEFINE_integer("max_answer_length", hotpotqa.DEFAULT_MAX_ANSWER_LENGTH,
                       "--task=hotpotqa: the most word pieces of a predicted span answer.")
  flags.DEFINE_integer("max_short_answer_length", nq.DEFAULT_MAX_SHORT_ANSWER_LENGTH,
                       "--task=nq: a predicted short answer's end is fewer than this many "
                       "document tokens after its start (the official max_short_answer_len).")
  estimator_utils.define_estimator_flags()


# The flags of --task=wikihop's side inputs (wikihop.add_side_inputs keyword arguments), kept
# in the output directory (long_task_heads.SIDE_INPUTS_NAME).
WIKIHOP_SIDE_INPUT_FLAGS = heads.WIKIHOP_SIDE_INPUT_OPTIONS
# The flags of --task=hotpotqa's answers (hotpotqa.split_metrics keyword arguments).
HOTPOTQA_ANSWER_FLAGS = ("sp_threshold", "max_answer_length")
# The flags of --task=nq's answers (nq.split_metrics keyword arguments).
NQ_ANSWER_FLAGS = ("max_short_answer_length",)
# The command that writes a task's records.
DATA_COMMANDS = {wikihop.TASK: "create_wikihop", hotpotqa.TASK: "create_hotpotqa",
                 nq.TASK: "create_nq", openkp.TASK: "create_openkp"}
# The tasks whose words are not bounded by their pieces' positions: batches keep max_length.
MAX_LENGTH_TASKS = (openkp.TASK,)


def data_command(task):
  """The etc_model command that writes the records of `task`."""
  return DATA_COMMANDS.get(task, "create_long_tasks")


def task_files(data_dir, task):
  """{split: <data_dir>/<task>_<split>.tfrecord}."""
  return {split: os.path.join(data_dir, "%s_%s.tfrecord" % (task, split)) for split in SPLITS}


def count_records(path):
  """The number of records in a TFRecord file."""
  return sum(1 for _ in tf1.io.tf_record_iterator(path))


class RecordCounts(object):
  """count_records of the files a job reads, each file read once (the scorers, the training
  schedule and every prediction's stack_rows ask for the same counts)."""

  def __init__(self):
    self._counts = {}

  def __call__(self, path):
    if path not in self._counts:
      self._counts[path] = count_records(path)
    return self._counts[path]


def stack_rows(rows, count, path):
  """Stacks a prediction's per-example rows into one array per output, filled in place.

  The arrays are allocated once at their final size: the peak memory is the outputs' (plus one
  row), not twice that as stacking a list of every row would be (NQ keeps several [L] logits
  of every window of the dev set).

  Args:
    rows: iterable of dicts output name -> numpy value of one example (Estimator.predict's or
      the engine's), in the file's order.
    count: the number of rows there must be (the file's records).
    path: the record file (errors).

  Returns:
    dict output name -> numpy array [count, ...].
  """
  stacked = None
  filled = 0
  for row in rows:
    if stacked is None:
      stacked = {key: np.empty((count,) + np.shape(value), np.asarray(value).dtype)
                 for key, value in row.items()}
    if filled == count:
      raise ValueError("%s: the prediction gave more rows than its %d records" % (path, count))
    for key, value in row.items():
      if np.shape(value) != stacked[key].shape[1:]:   # assignment would broadcast
        raise ValueError("%s: prediction row %d has %s of shape %s, the first %s" % (
            path, filled, key, np.shape(value), stacked[key].shape[1:]))
      stacked[key][filled] = value
    filled += 1
  if filled != count:
    raise ValueError("%s: the prediction gave %d rows for its %d records" % (
        path, filled, count))
  return stacked


def layout_for(att_implementation, max_seq_length):
  """The long rows' layout of a job: "auto" decided from max_seq_length, as EtcModel decides it
  from a static long length (so a batch cut by --padding=longest keeps the max_length layout).

  Args:
    att_implementation: "auto", "full" or "sparse" (--att_implementation).
    max_seq_length: L.

  Returns:
    "full" or "sparse".
  """
  if att_implementation != "auto":
    return att_implementation
  return ("full" if max_seq_length <= etc_modeling.FULL_ATTENTION_MAX_LONG_LENGTH
          else "sparse")


def _last_real_position(breakpoints, token_ids):
  """1 + the last position of a batch holding a breakpoint or a non-padding id (0 if none)."""
  real = tf.cast(tf.logical_or(tf.not_equal(breakpoints, 0), tf.not_equal(token_ids, 0)),
                 tf.int32)
  positions = tf.range(1, tf.shape(real)[1] + 1, dtype=tf.int32)
  return tf.reduce_max(real * positions)


def cut_lengths(batch, config, max_seq_length, max_global_seq_length, min_global_length=1,
                att_implementation="auto", bucket=False):
  """The long and global lengths a batch is cut to (--padding=longest / bucket).

  Long: the last real long position (a long breakpoint or a non-zero token id: after it the
  example id of etc_inputs is 0, so no real token attends there) plus one, rounded up to a
  multiple of batch_padding.PADDING_MULTIPLE, or of the sparse layout's block local_radius + 1
  (the blocked layout's own unit). Global: likewise from the global breakpoints and ids, at
  least min_global_length, rounded up to a multiple of PADDING_MULTIPLE. bucket: each rounded up
  to batch_padding.padding_buckets of its maximum instead. Never more than the maxima.

  Args:
    batch: dict with token_ids, long_breakpoints [batch, L], global_token_ids,
      global_breakpoints [batch, G].
    config: EtcConfig (local_radius).
    max_seq_length: L.
    max_global_seq_length: G.
    min_global_length: the global tokens a head reads by index (cloze: the C candidates).
    att_implementation: the job's --att_implementation (layout_for).
    bucket: --padding=bucket.

  Returns:
    (long length, global length): int32 scalar Tensors.
  """
  long_multiple = batch_padding.PADDING_MULTIPLE
  if layout_for(att_implementation, max_seq_length) == "sparse":
    long_multiple = config.local_radius + 1
  long_length = batch_padding.padded_length(
      _last_real_position(batch["long_breakpoints"], batch["token_ids"]), max_seq_length,
      long_multiple, batch_padding.padding_buckets(max_seq_length) if bucket else None)
  global_length = batch_padding.padded_length(
      tf.maximum(_last_real_position(batch["global_breakpoints"], batch["global_token_ids"]),
                 min_global_length), max_global_seq_length, batch_padding.PADDING_MULTIPLE,
      batch_padding.padding_buckets(max_global_seq_length) if bucket else None)
  return long_length, global_length


def cut_batch(batch, task, config, max_seq_length, max_global_seq_length, max_candidates,
              att_implementation="auto", bucket=False):
  """Cuts a batch of stored features to its real long and global inputs (cut_lengths).

  Args:
    batch: dict of the task's stored features (heads.feature_lengths), batched.
    task: a name of heads.TASKS.
    config: EtcConfig.
    max_seq_length: L.
    max_global_seq_length: G.
    max_candidates: C (cloze: the global tokens kept at least).
    att_implementation: the job's --att_implementation.
    bucket: --padding=bucket.

  Returns:
    dict like batch, the [L] features [batch, long length], the [G] ones [batch, global length].
  """
  long_length, global_length = cut_lengths(
      batch, config, max_seq_length, max_global_seq_length,
      max_candidates if task in heads.CANDIDATE_TASKS else 1, att_implementation, bucket)
  cut = dict(batch)
  task_features = heads.INPUT_FEATURES[task] + heads.LABEL_FEATURES[task]
  long_names = list(etc_estimator.LONG_FEATURES) + [
      name for name, size in task_features if size == "L"]
  for name in long_names:
    cut[name] = batch[name][:, :long_length]
  global_names = list(etc_estimator.GLOBAL_FEATURES) + [
      name for name, size in task_features if size == "G"]
  for name in global_names:
    cut[name] = batch[name][:, :global_length]
  return cut


def _pad_to_length(tensor, length, value=0):
  """[batch, n] -> [batch, length], `value` after n (predictions of a cut batch stack with the
  rest)."""
  tensor = tf.pad(tensor, [[0, 0], [0, length - tf.shape(tensor)[1]]], constant_values=value)
  tensor.set_shape([None, length])
  return tensor


def input_fn_builder(input_file, task, config, max_seq_length, max_global_seq_length,
                     max_candidates, is_training, seed=None, skip_batches=0,
                     drop_remainder=None, padding="max_length", att_implementation="auto",
                     num_records=None, side_input_options=None):
  """Creates an `input_fn` over one task's records, with the side inputs.

  Args:
    input_file: TFRecord path.
    task: a name of long_task_heads.TASKS.
    config: EtcConfig (for the side inputs).
    max_seq_length: L.
    max_global_seq_length: G.
    max_candidates: C.
    is_training: shuffle the whole file (seeded, a new order each epoch), repeat and skip
      `skip_batches` when True.
    seed: shuffle seed.
    skip_batches: batches already consumed by a resumed job (see estimator_utils).
    drop_remainder: drop a last partial batch (default: when training).
    padding: "max_length": every batch [batch, L] / [batch, G]; "longest": each batch cut to
      its real long and global inputs (cut_batch, ETC only); "bucket": those rounded up to
      batch_padding.padding_buckets.
    att_implementation: the job's --att_implementation (the long length's rounding).
    num_records: the file's record count (training's shuffle buffer) when the caller has
      counted it; counted here otherwise.
    side_input_options: --task=wikihop: the keyword arguments of wikihop.add_side_inputs
      (WIKIHOP_SIDE_INPUT_FLAGS); --task=hotpotqa: those of hotpotqa.add_side_inputs
      (cls_token_id).

  Returns:
    input_fn(params) -> tf.data.Dataset of feature dicts with batch params["batch_size"].
  """
  lengths = heads.feature_lengths(task, max_seq_length, max_global_seq_length, max_candidates)
  name_to_features = {name: tf.io.FixedLenFeature([length], tf.int64)
                      for name, length in lengths.items()}
  if drop_remainder is None:
    drop_remainder = is_training

  def input_fn(params):
    """The actual input function."""
    batch_size = params["batch_size"]
    d = tf.data.TFRecordDataset(input_file)
    if is_training:
      # The whole file in the buffer: the records are in chapter (so book) order, and a
      # small buffer would feed one book at a time. Seeded: same order on resume.
      d = d.shuffle(buffer_size=max(1, num_records or count_records(input_file)), seed=seed,
                    reshuffle_each_iteration=True).repeat()
      if skip_batches:
        d = d.skip(skip_batches * batch_size)
    d = d.map(lambda record: estimator_utils.decode_record(record, name_to_features))
    d = d.batch(batch_size, drop_remainder=drop_remainder)
    if not isinstance(config, bert_windows.BertWindowsConfig):  # ETC's side inputs
      add_side_inputs = lambda batch, long_len, global_len: heads.add_task_side_inputs(
          task, batch, config, long_len, global_len, side_input_options)
      if padding == "max_length":
        d = d.map(lambda batch: add_side_inputs(batch, max_seq_length, max_global_seq_length))
      else:  # the side inputs of the cut batch (its own lengths)
        d = d.map(lambda batch: add_side_inputs(cut_batch(
            batch, task, config, max_seq_length, max_global_seq_length, max_candidates,
            att_implementation, bucket=padding == "bucket"), None, None))
    return d.prefetch(2)

  return input_fn


def build_model(task, config, features, is_training, use_one_hot_embeddings=False,
                att_implementation="auto", num_labels=None, compute_dtype=None):
  """EtcModel and the task's head (long_task_heads).

  Args:
    task: a name of long_task_heads.TASKS.
    config: EtcConfig.
    features: dict with the stored features and the side inputs.
    is_training: dropout on.
    use_one_hot_embeddings: TPU embedding lookups.
    att_implementation: "auto", "full" or "sparse".
    num_labels: classify: the size of the label vocabulary.
    compute_dtype: None (float32), a --precision name or a dtype: the encoder's compute dtype
      (EtcModel's / BertModel's); variables, head and loss stay float32.

  Returns:
    (loss, per-example loss [batch], logits: cloze [batch, C], supporting [batch, G], classify
    [batch, num_labels], hotpotqa a dict of them (long_task_heads.hotpotqa_head)).
  """
  if isinstance(config, bert_windows.BertWindowsConfig):  # --model=bert_windows
    return bert_windows.build_model(task, config, features, is_training,
                                    use_one_hot_embeddings=use_one_hot_embeddings,
                                    compute_dtype=compute_dtype, num_labels=num_labels)
  model = etc_modeling.EtcModel(config, is_training=is_training,
                                use_one_hot_embeddings=use_one_hot_embeddings,
                                compute_dtype=compute_dtype)
  long_adder, global_adder = heads.embedding_adders(task, features, config)
  long_output, global_output = etc_estimator.encode(
      model, features, att_implementation=att_implementation,
      long_embedding_adder=long_adder, global_embedding_adder=global_adder)
  return heads.task_head(task, global_output, features, config, is_training,
                         num_labels=num_labels, long_output=long_output)


def encoder_scopes(config):
  """The encoder an --init_checkpoint must supply: ETC's, or --model=bert_windows' BERT."""
  family = "bert" if isinstance(config, bert_windows.BertWindowsConfig) else "etc"
  return checkpoint_utils.ENCODER_SCOPES[family]


def model_fn_builder(task, config, init_checkpoint, learning_rate, num_train_steps,
                     num_warmup_steps, use_tpu, train_batch_size=None, fused_optimizer=False,
                     keep_checkpoint_max=5, att_implementation="auto", num_labels=None,
                     precision="fp32", max_global_seq_length=None, allow_unmatched_init=False,
                     max_seq_length=None):
  """Returns the `model_fn` closure for TPUEstimator (TRAIN, EVAL: the loss, PREDICT).

  precision ("fp32", "bf16", "fp16") is the encoder's compute dtype (build_model); "fp16"
  trains with dynamic loss scaling (estimator_utils.create_train_op). max_global_seq_length:
  PREDICT's per-global-token outputs (supporting logits, global_token_ids, sentence_labels) are
  padded back to this length with zeros (batches cut by --padding=longest stack together);
  max_seq_length: likewise the per-long-token outputs (hotpotqa's begin / end logits, padded
  with long_task_heads.MASKED_LOGIT).
  """
  compute_dtype = modeling.get_compute_dtype(precision)

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    """The `model_fn` for TPUEstimator."""
    is_training = (mode == tf1.estimator.ModeKeys.TRAIN)
    loss, per_example, logits = build_model(
        task, config, features, is_training, use_one_hot_embeddings=use_tpu,
        att_implementation=att_implementation, num_labels=num_labels,
        compute_dtype=compute_dtype)
    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(
        init_checkpoint, use_tpu, tf1.trainable_variables(),
        encoder_scopes=encoder_scopes(config), allow_unmatched=allow_unmatched_init)
    if mode == tf1.estimator.ModeKeys.TRAIN:
      train_op = estimator_utils.create_train_op(
          loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
          precision=compute_dtype, fused_optimizer=fused_optimizer,
          keep_checkpoint_max=keep_checkpoint_max)
      hooks = []
      if not use_tpu:
        hooks = [estimator_utils.ProgressHook(num_train_steps, train_batch_size),
                 estimator_utils.StopOnSignalHook()]
      return tf1.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op,
                                                training_hooks=hooks, scaffold_fn=scaffold_fn)
    if mode == tf1.estimator.ModeKeys.EVAL:
      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=loss, scaffold_fn=scaffold_fn,
          eval_metrics=(lambda x: {"loss": tf1.metrics.mean(x)}, [per_example]))
    predictions = _predictions(task, config, features, per_example, logits,
                               max_global_seq_length, max_seq_length)
    return tf1.estimator.tpu.TPUEstimatorSpec(mode=mode, predictions=predictions,
                                              scaffold_fn=scaffold_fn)

  return model_fn


def _predictions(task, config, features, per_example, logits, max_global_seq_length=None,
                 max_seq_length=None):
  """The PREDICT outputs of build_model (what task_metrics and prediction_lines read).

  Args:
    task: a name of long_task_heads.TASKS.
    config: EtcConfig or bert_windows.BertWindowsConfig.
    features: the model's input features (the labels and global_token_ids are passed through).
    per_example: the per-example loss [batch].
    logits: build_model's logits (a Tensor, or hotpotqa's dict of them).
    max_global_seq_length: ETC: the per-global-token outputs are padded back to this length
      with zeros (batches cut by --padding=longest stack together); None: left as they are.
    max_seq_length: ETC hotpotqa and nq: likewise the per-long-token logits
      (heads.LONG_LOGITS), with MASKED_LOGIT.

  Returns:
    dict name -> Tensor [batch, ...]: logits (or hotpotqa's), example_loss, the label features
    and global_token_ids.
  """
  predictions = dict(logits) if isinstance(logits, dict) else {"logits": logits}
  predictions["example_loss"] = per_example
  for name, _ in heads.LABEL_FEATURES[task]:
    predictions[name] = features[name]
  predictions["global_token_ids"] = features["global_token_ids"]
  if max_global_seq_length and not isinstance(config, bert_windows.BertWindowsConfig):
    global_names = ["global_token_ids"] + [
        name for name, size in heads.LABEL_FEATURES[task] if size == "G"]
    if task == "supporting":
      global_names.append("logits")
    if task == hotpotqa.TASK:
      global_names.append("sp_logits")
    for name in global_names:
      predictions[name] = _pad_to_length(predictions[name], max_global_seq_length)
    if max_seq_length:
      for name in heads.LONG_LOGITS.get(task, ()):
        predictions[name] = _pad_to_length(predictions[name], max_seq_length,
                                           heads.MASKED_LOGIT)
  return predictions


def engine_model_fn(task, config, att_implementation="full", num_labels=None,
                    max_global_seq_length=None, max_seq_length=None,
                    use_one_hot_embeddings=False, compute_dtype=None):
  """model_fn_builder's graph as a tf2_training.Engine model function.

  Args:
    task, config, att_implementation, num_labels, max_global_seq_length, max_seq_length: as
      model_fn_builder.
    use_one_hot_embeddings: TPU embedding lookups.
    compute_dtype: the encoder's compute dtype (build_model's; None: float32).

  Returns:
    model_fn(features, is_training) -> (the mean loss, _predictions' dict).
  """
  def model_fn(features, is_training):
    loss, per_example, logits = build_model(
        task, config, features, is_training, use_one_hot_embeddings=use_one_hot_embeddings,
        att_implementation=att_implementation, num_labels=num_labels,
        compute_dtype=compute_dtype)
    return loss, _predictions(task, config, features, per_example, logits,
                              max_global_seq_length, max_seq_length)

  return model_fn


def variable_shapes(task, config, max_seq_length, max_global_seq_length, max_candidates,
                    att_implementation="auto", num_labels=None):
  """{variable name: shape} of the model and head this job builds (nothing is computed)."""
  if isinstance(config, bert_windows.BertWindowsConfig):
    return bert_windows.variable_shapes(task, config, heads.feature_lengths(
        task, max_seq_length, max_global_seq_length, max_candidates), num_labels=num_labels)
  extra = {name: (tf.int32, [1, length]) for name, length in heads.feature_lengths(
      task, max_seq_length, max_global_seq_length, max_candidates).items()
           if name not in heads.COMMON_FEATURES}
  with tf.Graph().as_default():
    features = etc_estimator.placeholder_features(config, max_seq_length,
                                                  max_global_seq_length, extra=extra)
    build_model(task, config, features, False, att_implementation=att_implementation,
                num_labels=num_labels)
    return {v.op.name: v.shape.as_list() for v in tf1.global_variables()}


def task_metrics(task, outputs, label_names=None):
  """The exact metrics of stacked predict outputs (long_task_heads.METRICS)."""
  return heads.task_metrics(task, outputs, label_names)


def prediction_lines(task, outputs, label_names=None):
  """One JSON-able dict per example of stacked predict outputs (the predictions file)."""
  return heads.prediction_lines(task, outputs, label_names)


def at_dev_threshold(outputs, threshold):
  """Supporting test metrics at the dev split's best threshold (chosen on dev, applied here).

  Args:
    outputs: the test split's stacked predict outputs (logits, sentence_labels,
      global_token_ids).
    threshold: the dev metrics' best_threshold (a logit).

  Returns:
    dict: dev_threshold, f1_at_dev_threshold, exact_match_at_dev_threshold.
  """
  metrics = heads.supporting_metrics(outputs["logits"], outputs["sentence_labels"],
                                     outputs["global_token_ids"], threshold=threshold)
  return {"dev_threshold": threshold, "f1_at_dev_threshold": metrics["f1"],
          "exact_match_at_dev_threshold": metrics["exact_match"]}


def check_label_vocabulary(labels, data_dir, files, saved_paths):
  """Classify: one line unless the data's label vocabulary fits its records and the model.

  Args:
    labels: the data's label vocabulary (long_tasks.read_classify_labels), or None.
    data_dir: the --data_dir (for messages).
    files: the TFRecord paths the job reads (every record's label is checked).
    saved_paths: {flag description: path} of the classify_labels.json files of models the job
      resumes or starts from (a missing file is skipped).

  Returns:
    labels.
  """
  if labels is None:
    common.fail("--data_dir=%s: its %s has no classify_labels (data of an earlier version: "
                "write it again with etc_model.create_long_tasks)" %
                (data_dir, long_tasks.SUMMARY_NAME))
  for path in files:
    for record in tf1.io.tf_record_iterator(path):
      label = tf.train.Example.FromString(record).features.feature["label"].int64_list.value[0]
      if not 0 <= label < len(labels):
        common.fail("--data_dir=%s: %s has label %d, outside the %d classify_labels of its %s" %
                    (data_dir, os.path.basename(path), label, len(labels),
                     long_tasks.SUMMARY_NAME))
  for described, path in saved_paths.items():
    if not tf.io.gfile.exists(path):
      continue
    with tf.io.gfile.GFile(path, "r") as f:
      saved = json.loads(f.read())
    if saved != labels:
      common.fail("--data_dir=%s: its %d classify_labels differ from the %d of the model in %s "
                  "(%s; first difference: %r vs %r)" %
                  (data_dir, len(labels), len(saved), described, LABELS_NAME,
                   *next(((a, b) for a, b in zip(labels + [None], saved + [None]) if a != b))))
  return labels


def _check_flags():
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
    common.fail("at least one of --do_train, --do_eval or --do_predict must be true")
  for name in ("task", "data_dir", "output_dir"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  if FLAGS.model == "etc" and not FLAGS.etc_config_file:
    common.fail("--etc_config_file is required (--model=etc)")
  if FLAGS.model == "bert_windows" and FLAGS.use_hard_g2l_mask is not None:
    common.fail("--use_hard_g2l_mask: only with --model=etc (BERT windows have no global tokens)")
  if FLAGS.model == "bert_windows" and FLAGS.use_tpu and FLAGS.task == "cloze":
    common.fail("--use_tpu: not with --model=bert_windows --task=cloze (the candidates' mentions "
                "are matched with a shape known only at run time)")
  if FLAGS.model == "bert_windows" and FLAGS.task not in bert_windows.TASKS:
    common.fail("--task=%s: --model=bert_windows has the tasks %s" %
                (FLAGS.task, ", ".join(bert_windows.TASKS)))
  for name in ("max_seq_length", "max_global_seq_length", "max_candidates", "train_batch_size",
               "eval_batch_size", "predict_batch_size"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d: must be >= 1" % (name, getattr(FLAGS, name)))
  if FLAGS.num_train_steps < 0:
    common.fail("--num_train_steps=%d: must be >= 0" % FLAGS.num_train_steps)
  if FLAGS.num_train_epochs <= 0:
    common.fail("--num_train_epochs=%g: must be > 0" % FLAGS.num_train_epochs)
  if not 0.0 <= FLAGS.warmup_proportion <= 1.0:
    common.fail("--warmup_proportion=%g: must be in [0, 1]" % FLAGS.warmup_proportion)
  if (FLAGS.task in heads.CANDIDATE_TASKS and
      FLAGS.max_candidates >= FLAGS.max_global_seq_length):
    common.fail("--max_candidates=%d: must be < --max_global_seq_length=%d" %
                (FLAGS.max_candidates, FLAGS.max_global_seq_length))
  for task, names in ((wikihop.TASK, WIKIHOP_SIDE_INPUT_FLAGS),
                      (hotpotqa.TASK, HOTPOTQA_ANSWER_FLAGS), (nq.TASK, NQ_ANSWER_FLAGS)):
    for name in names:
      if FLAGS.task != task and FLAGS[name].present:
        common.fail("--%s: only with --task=%s" % (name, task))
  for name in WIKIHOP_SIDE_INPUT_FLAGS:
    if FLAGS.model == "bert_windows" and FLAGS[name].present:
      common.fail("--%s: only with --model=etc (BERT windows have no global tokens)" % name)
  if not 0.0 <= FLAGS.sp_threshold <= 1.0:
    common.fail("--sp_threshold=%g: must be in [0, 1]" % FLAGS.sp_threshold)
  if FLAGS.max_answer_length < 1:
    common.fail("--max_answer_length=%d: must be >= 1" % FLAGS.max_answer_length)
  if FLAGS.max_short_answer_length < 1:
    common.fail("--max_short_answer_length=%d: must be >= 1" % FLAGS.max_short_answer_length)
  training_eval.check_flags(FLAGS)
  batch_padding.check_padding_flag(FLAGS)
  if FLAGS.model == "bert_windows" and FLAGS.padding in ("longest", "bucket"):
    common.fail("--padding=%s: not with --model=bert_windows (its window count is static, from "
                "--max_seq_length; use --padding=max_length)" % FLAGS.padding)
  if FLAGS.task in MAX_LENGTH_TASKS and FLAGS.padding in ("longest", "bucket"):
    common.fail("--padding=%s: not with --task=%s (a word's index is not bounded by its pieces' "
                "positions; use --padding=max_length)" % (FLAGS.padding, FLAGS.task))


def _padding(flag_values, training):
  """--padding of a training or an evaluation / prediction input (estimator_utils.
  effective_padding; --model=bert_windows: always max_length)."""
  if flag_values.model == "bert_windows" or flag_values.task in MAX_LENGTH_TASKS:
    return "max_length"
  return batch_padding.effective_padding(flag_values, training=training)


def _needed_files(flag_values):
  """{split: path} of the splits this job reads, each checked to exist."""
  files = task_files(flag_values.data_dir, flag_values.task)
  needed = {}
  if flag_values.do_train:
    needed["train"] = files["train"]
  if flag_values.do_eval or flag_values.eval_every_steps:
    needed["dev"] = files["dev"]
  if flag_values.do_predict:
    needed["test"] = files["test"]
  for split, path in needed.items():
    if not tf.io.gfile.exists(path):
      common.fail("--data_dir=%s: has no %s (write it with etc_model.%s)" %
                  (flag_values.data_dir, os.path.basename(path), data_command(flag_values.task)))
  return needed


def _expected_lengths(flag_values):
  """{feature: (length, what says so)} of the task's records for check_tfrecord_lengths."""
  described = {"L": "--max_seq_length=%d" % flag_values.max_seq_length,
               "G": "--max_global_seq_length=%d" % flag_values.max_global_seq_length,
               "C": "--max_candidates=%d" % flag_values.max_candidates,
               1: "1 (a --task=%s record of etc_model.%s)" % (flag_values.task,
                                                              data_command(flag_values.task)),
               # openkp's label slots.
               openkp.NUM_LABELS: "%d (a --task=%s record of etc_model.%s)" % (
                   openkp.NUM_LABELS, flag_values.task, data_command(flag_values.task))}
  sizes = dict(heads.INPUT_FEATURES[flag_values.task] + heads.LABEL_FEATURES[flag_values.task])
  sizes.update({name: "L" for name in heads.COMMON_FEATURES[:3]})
  sizes.update({name: "G" for name in heads.COMMON_FEATURES[3:]})
  lengths = heads.feature_lengths(flag_values.task, flag_values.max_seq_length,
                                  flag_values.max_global_seq_length, flag_values.max_candidates)
  return {name: (length, described[sizes[name]]) for name, length in lengths.items()}


def _side_input_options(flag_values, cls_token_id=None):
  """--task=wikihop: wikihop.add_side_inputs' keyword arguments from the flags; --task=hotpotqa:
  hotpotqa.add_side_inputs' (the data's [CLS] id); else None."""
  if flag_values.task == hotpotqa.TASK:
    return {"cls_token_id": cls_token_id}
  if flag_values.task != wikihop.TASK:
    return None
  return {name: flag_values[name].value for name in WIKIHOP_SIDE_INPUT_FLAGS}


def wikihop_split_examples(data_dir, files, count=count_records):
  """{record file: its examples file lines} of the dev / test splits a WikiHop job reads
  (count: path -> its record count, e.g. the job's RecordCounts)."""
  return {path: wikihop.read_split_examples(data_dir, split, count(path))
          for split, path in files.items() if split != "train"}


def wikihop_scorers(data_dir, files, count=count_records):
  """{record file: outputs -> ({id: answer}, official metrics)} of a WikiHop job's dev / test
  splits (count: as wikihop_split_examples)."""
  def scorer(lines):
    return lambda outputs: wikihop.split_metrics(outputs["logits"], outputs["candidate_mask"],
                                                 lines)
  return {path: scorer(lines)
          for path, lines in wikihop_split_examples(data_dir, files, count).items()}


def hotpotqa_scorers(data_dir, files, tokenizer, do_lower_case, sp_threshold,
                     max_answer_length, count=count_records):
  """{record file: outputs -> (the official prediction object, official metrics)} of a
  HotpotQA job's dev / test splits (hotpotqa.split_metrics over every example of the split).

  Args:
    data_dir: the --data_dir.
    files: {split: record file} the job reads.
    tokenizer: the data's tokenizer (hotpotqa.load_data_tokenizer).
    do_lower_case: its lower-casing.
    sp_threshold: --sp_threshold.
    max_answer_length: --max_answer_length.
    count: path -> its record count (e.g. the job's RecordCounts).
  """
  def scorer(path, lines):
    records = hotpotqa.read_decoding_features(path)
    return lambda outputs: hotpotqa.split_metrics(
        outputs, records, lines, tokenizer, do_lower_case, sp_threshold=sp_threshold,
        max_answer_length=max_answer_length)
  return {path: scorer(path, hotpotqa.read_split_examples(data_dir, split, count(path)))
          for split, path in files.items() if split != "train"}


def nq_scorers(data_dir, files, max_short_answer_length, count=count_records):
  """{record file: outputs -> (the official prediction object, official metrics)} of a
  Natural Questions job's dev / test splits (nq.split_metrics over every example of the split).

  Args:
    data_dir: the --data_dir.
    files: {split: record file} the job reads.
    max_short_answer_length: --max_short_answer_length.
    count: path -> its record count (e.g. the job's RecordCounts).
  """
  def scorer(path, lines):
    token_pos = nq.read_token_pos(path)
    return lambda outputs: nq.split_metrics(outputs, token_pos, lines,
                                            max_short_answer_length=max_short_answer_length)
  return {path: scorer(path, nq.read_split_examples(data_dir, split, count(path)))
          for split, path in files.items() if split != "train"}


def openkp_scorers(data_dir, files, count=count_records):
  """{record file: outputs -> (prediction lines, official metrics)} of an OpenKP job's dev /
  test splits (openkp.split_metrics over every document of the split; count: path -> its
  record count)."""
  def scorer(lines):
    return lambda outputs: openkp.split_metrics(outputs["ngram_logits"], lines)
  return {path: scorer(openkp.read_split_examples(data_dir, split, count(path)))
          for split, path in files.items() if split != "train"}


class _Inference(object):
  """Estimator.predict (or the TF2 engine's) over a whole split (no example dropped), outputs
  stacked."""

  def __init__(self, flag_values, trainer, config, label_names=None, split_scorers=None,
               side_input_options=None, record_counts=None):
    # The parsed flags (task, lengths, attention layout, prediction batch size).
    self.flag_values = flag_values
    # The Estimator, or the tf2_training.Engine (_job_trainer).
    self.trainer = trainer
    self.config = config
    self.label_names = label_names
    # {record file: outputs -> (answers, official metrics)} (--task=wikihop / hotpotqa).
    self.split_scorers = split_scorers or {}
    self.side_input_options = side_input_options
    # {(file, step): metrics}: the final --do_eval of a checkpoint scored during training (the
    # best one, or the last step) reuses those metrics instead of predicting the file again.
    self.scored = {}
    # {(file, step): {id: answer}} (--task=wikihop), beside `scored`.
    self.answers = {}
    # path -> its record count (the job's RecordCounts): the rows a prediction must give.
    self.record_counts = record_counts or RecordCounts()

  def outputs(self, path, checkpoint):
    flag_values = self.flag_values
    input_fn = input_fn_builder(path, flag_values.task, self.config, flag_values.max_seq_length,
                                flag_values.max_global_seq_length, flag_values.max_candidates,
                                is_training=False, padding=_padding(flag_values, training=False),
                                att_implementation=flag_values.att_implementation,
                                side_input_options=self.side_input_options)
    if isinstance(self.trainer, tf2_training.Engine):
      rows = self.trainer.predict(input_fn, checkpoint_path=checkpoint,
                                  batch_size=flag_values.predict_batch_size)
    else:
      rows = self.trainer.predict(input_fn=input_fn, checkpoint_path=checkpoint,
                                  yield_single_examples=True)
    outputs = stack_rows(rows, self.record_counts(path), path)
    common.STOP_SIGNALS.exit_if_stopped("no results written; rerun to evaluate")
    return outputs

  def metrics(self, path, outputs):
    """The task's metrics of a split's outputs (WikiHop, HotpotQA: with the official ones);
    also returns the official answers (WikiHop {id: answer}, HotpotQA {"answer", "sp"}; else
    None)."""
    metrics = task_metrics(self.flag_values.task, outputs, self.label_names)
    if path not in self.split_scorers:
      return metrics, None
    answers, official = self.split_scorers[path](outputs)
    metrics.update(official)
    return metrics, answers

  def evaluate(self, path, checkpoint):
    key = self._key(path, checkpoint)
    if checkpoint is None or key not in self.scored:
      self.scored[key], self.answers[key] = self.metrics(path, self.outputs(path, checkpoint))
    return dict(self.scored[key])

  def evaluated_answers(self, path, checkpoint):
    """The official answers of the last evaluate(path, checkpoint) (--task=wikihop /
    hotpotqa), or None."""
    return self.answers.get(self._key(path, checkpoint))

  @staticmethod
  def _key(path, checkpoint):
    return (path, checkpoint_utils.checkpoint_step(checkpoint) if checkpoint else None)


def _write_with_sidecar(path, text, record):
  """Writes a result file atomically with its sidecar naming the weights (checkpoint_utils)."""
  checkpoint_utils.remove_sidecar(path)
  with common.atomic_output(path) as f:
    f.write(text)
  checkpoint_utils.write_sidecar(path, record)


def _scored_checkpoint(flag_values):
  """The checkpoint --do_eval / --do_predict use: the best one with --keep_best (when there is
  one), else the latest; (prefix or None, "best" or "last")."""
  latest = tf1.train.latest_checkpoint(flag_values.output_dir)
  best = (training_eval.read_best_checkpoint(flag_values.output_dir) if flag_values.keep_best
          else None)
  if best is not None:
    tf1.logging.info("--keep_best: using the best checkpoint %s (step %d, %s = %.6g)",
                     best["path"], best["step"], best["metric"], best["score"])
    return best["path"], "best"
  return latest, "last"


def _train(flag_values, trainer, config, train_file, num_records, num_train_steps, resume_step,
           inference, dev_file, side_input_options=None):
  """--do_train (with evaluations when --eval_every_steps is set); returns the results dict.

  flag_values: the parsed flags, as main read and checked them.
  trainer: the Estimator, or the tf2_training.Engine (_job_trainer)."""
  def train_input_fn(skip_batches):
    return input_fn_builder(
        train_file, flag_values.task, config, flag_values.max_seq_length,
        flag_values.max_global_seq_length, flag_values.max_candidates, is_training=True,
        seed=flag_values.seed, skip_batches=skip_batches,
        padding=_padding(flag_values, training=True),
        att_implementation=flag_values.att_implementation,
        num_records=num_records, side_input_options=side_input_options)

  def train_to(step, target):
    if isinstance(trainer, tf2_training.Engine):
      # The engine resumes from the latest checkpoint (that of `step`), skipping its batches.
      # The step it reached: on every worker of a multi-worker job (the chief may still be
      # writing its checkpoint).
      reached = trainer.train(train_input_fn, target).global_step
      common.STOP_SIGNALS.exit_if_stopped("checkpoint saved; rerun the same command to resume")
      return reached
    trainer.train(input_fn=train_input_fn(estimator_utils.resume_skip_batches(step, flag_values)),
                  max_steps=target)
    common.STOP_SIGNALS.exit_if_stopped(
        "checkpoint saved; rerun the same command to resume")
    return estimator_utils.latest_global_step(flag_values.output_dir)

  start = time.time()
  if flag_values.eval_every_steps:
    summary = training_eval.train_with_evaluation(
        flag_values.output_dir, heads.MAIN_METRIC[flag_values.task], num_train_steps, resume_step,
        flag_values.eval_every_steps, train_to,
        lambda checkpoint: inference.evaluate(dev_file, checkpoint),
        patience=flag_values.early_stopping_patience, keep_best=flag_values.keep_best)
  else:
    end_step = train_to(resume_step or 0, num_train_steps)
    if end_step < num_train_steps:
      common.fail("training ended at step %d of %d; rerun the same command to resume" %
                  (end_step, num_train_steps))
    summary = {"num_train_steps": num_train_steps}
  summary["train_seconds"] = round(time.time() - start, 1)
  summary["resumed_from_step"] = resume_step or 0
  return summary


def _check_engine_flags():
  """One-line errors for the device, precision and distribution flags: on the TF2 engine those
  only the Estimator implements (tf2_training.check_flags), on both the combinations
  estimator_utils refuses."""
  if not estimator_utils.has_estimator():
    tf2_training.check_flags(FLAGS, "-m " + SCRIPT, xla=True,
                             precisions=tf2_training.ENGINE_PRECISIONS, multi_worker=True)
  estimator_utils.validate_estimator_flags(FLAGS)
  estimator_utils.check_supported(FLAGS, SUPPORTED_MODEL_FN_FLAGS, script=SCRIPT)


def _job_trainer(flag_values, config, num_labels, num_train_steps, num_warmup_steps,
                 strategy=None):
  """What trains and predicts: the Estimator of model_fn_builder's model_fn (TF 2.15), or a
  tf2_training.Engine over the same graph (a TensorFlow without the Estimator).

  Args:
    flag_values: the parsed flags, as main read and checked them.
    config: EtcConfig or bert_windows.BertWindowsConfig.
    num_labels: classify: the size of the label vocabulary; else None.
    num_train_steps: the schedule's last step (0 without --do_train).
    num_warmup_steps: linear warm-up steps.
    strategy: the TF2 engine's strategy (tf2_training.command_strategy).

  Returns:
    tf.compat.v1.estimator.tpu.TPUEstimator or tf2_training.Engine.
  """
  att_implementation = layout_for(flag_values.att_implementation, flag_values.max_seq_length)
  if estimator_utils.has_estimator():
    model_fn = model_fn_builder(
        flag_values.task, config, flag_values.init_checkpoint, flag_values.learning_rate,
        num_train_steps, num_warmup_steps, flag_values.use_tpu,
        train_batch_size=flag_values.train_batch_size,
        allow_unmatched_init=flag_values.allow_unmatched_init,
        att_implementation=att_implementation, num_labels=num_labels,
        max_global_seq_length=flag_values.max_global_seq_length,
        max_seq_length=flag_values.max_seq_length,
        **estimator_utils.precision_kwargs(flag_values))
    return estimator_utils.make_estimator(
        model_fn, flag_values, flag_values.output_dir, flag_values.train_batch_size,
        flag_values.eval_batch_size, flag_values.predict_batch_size,
        supported_flags=SUPPORTED_MODEL_FN_FLAGS)
  return tf2_training.Engine(
      engine_model_fn(flag_values.task, config, att_implementation, num_labels,
                      flag_values.max_global_seq_length, flag_values.max_seq_length,
                      use_one_hot_embeddings=tf2_training.is_tpu_strategy(strategy),
                      compute_dtype=modeling.get_compute_dtype(flag_values.precision)),
      flag_values.output_dir, strategy=strategy, train_batch_size=flag_values.train_batch_size,
      learning_rate=flag_values.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps, init_checkpoint=flag_values.init_checkpoint,
      allow_unmatched_init=flag_values.allow_unmatched_init,
      encoder_scopes=encoder_scopes(config), seed=flag_values.seed,
      save_checkpoints_steps=flag_values.save_checkpoints_steps,
      keep_checkpoint_max=flag_values.keep_checkpoint_max,
      log_every_n_steps=flag_values.log_every_n_steps,
      fused_optimizer=flag_values.fused_optimizer, use_xla=flag_values.use_xla,
      loss_scale=estimator_utils.loss_scale_for(flag_values.precision))


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  _check_flags()
  _check_engine_flags()
  # The TF2 engine's strategy, before any TensorFlow operation runs (a multi-worker one must).
  strategy = None if estimator_utils.has_estimator() else tf2_training.command_strategy(FLAGS)
  tf2_training.check_multi_worker_job(
      strategy, FLAGS.do_train, [("--eval_every_steps=%d" % FLAGS.eval_every_steps,
                                  FLAGS.eval_every_steps > 0)])
  # A worker other than the chief trains only: it writes its files into a private directory
  # and neither evaluates nor predicts (tf2_training.worker_output_dir).
  chief = tf2_training.is_chief_worker(strategy)
  if FLAGS.model == "bert_windows":
    config = bert_windows.load_config(FLAGS.bert_config_file, FLAGS, FLAGS.window_length,
                                      FLAGS.window_stride, FLAGS.data_dir, task=FLAGS.task)
  else:
    config = etc_estimator.load_config(FLAGS.etc_config_file, FLAGS.residual_attention,
                                       FLAGS.max_seq_length,
                                       use_hard_g2l_mask=FLAGS.use_hard_g2l_mask)
  files = _needed_files(FLAGS)
  estimator_utils.check_tfrecord_lengths(list(files.values()), _expected_lengths(FLAGS), "data_dir")
  etc_estimator.check_vocab_ids(list(files.values()), config,
                                ("token_ids", "global_token_ids"), flag_name="data_dir")
  split_scorers, cls_token_id = None, None
  for task, name, least in ((wikihop.TASK, "WikiHop", wikihop.MIN_SEGMENT_VOCAB_SIZE),
                            (hotpotqa.TASK, "HotpotQA", hotpotqa.MIN_SEGMENT_VOCAB_SIZE)):
    if FLAGS.task == task and FLAGS.model == "etc" and config.segment_vocab_size < least:
      common.fail("--etc_config_file=%s: segment_vocab_size=%d, but %s's token types go up "
                  "to %d" % (FLAGS.etc_config_file, config.segment_vocab_size, name, least - 1))
  record_counts = RecordCounts()
  if FLAGS.task == wikihop.TASK:
    split_scorers = wikihop_scorers(FLAGS.data_dir, files, record_counts)
  if FLAGS.task == hotpotqa.TASK:
    tokenizer, do_lower_case = hotpotqa.load_data_tokenizer(FLAGS.data_dir)
    cls_token_id = tokenizer.vocab[hotpotqa.GLOBAL_TOKENS["cls"]]
    split_scorers = hotpotqa_scorers(FLAGS.data_dir, files, tokenizer, do_lower_case,
                                     FLAGS.sp_threshold, FLAGS.max_answer_length, record_counts)
  if FLAGS.task == nq.TASK:
    split_scorers = nq_scorers(FLAGS.data_dir, files, FLAGS.max_short_answer_length,
                               record_counts)
  if FLAGS.task == openkp.TASK:
    split_scorers = openkp_scorers(FLAGS.data_dir, files, record_counts)
  side_input_options = _side_input_options(FLAGS, cls_token_id)
  common.check_output_dir(FLAGS.output_dir)
  write_dir = tf2_training.worker_output_dir(FLAGS.output_dir, strategy)
  # One job per directory, taken before the directory's labels or checkpoint are read.
  lock = common.OutputDirLock(write_dir).acquire()
  label_names = None
  if FLAGS.task in heads.LABEL_VOCABULARY_TASKS:
    try:
      labels = long_tasks.read_classify_labels(FLAGS.data_dir)
    except ValueError as e:
      common.fail("--data_dir=%s: %s cannot be read (%s)" %
                  (FLAGS.data_dir, long_tasks.SUMMARY_NAME, e))
    saved = {"--output_dir=%s" % FLAGS.output_dir: os.path.join(FLAGS.output_dir, LABELS_NAME)}
    if FLAGS.init_checkpoint:
      saved["--init_checkpoint=%s" % FLAGS.init_checkpoint] = os.path.join(
          os.path.dirname(FLAGS.init_checkpoint), LABELS_NAME)
    label_names = check_label_vocabulary(labels, FLAGS.data_dir, list(files.values()), saved)

  def shapes_fn():
    return variable_shapes(FLAGS.task, config, FLAGS.max_seq_length,
                           FLAGS.max_global_seq_length, FLAGS.max_candidates,
                           FLAGS.att_implementation,
                           num_labels=len(label_names) if label_names else None)

  # Before anything is written: an eval / predict job without weights is one line.
  eval_weights = None
  if not FLAGS.do_train:
    eval_weights = checkpoint_utils.require_eval_weights(
        "--do_eval" if FLAGS.do_eval else "--do_predict", FLAGS.output_dir,
        FLAGS.init_checkpoint, list(shapes_fn()), allow_random_eval=FLAGS.allow_random_eval,
        allow_unmatched=FLAGS.allow_unmatched_init, encoder_scopes=encoder_scopes(config))
  # Compared before anything is written there: a resume with another model (or from a
  # checkpoint made for initialising, e.g. a lifted one) is one line.
  resume_step = etc_estimator.check_resume(
      FLAGS.output_dir, shapes_fn, restore=estimator_utils.restore_mode(FLAGS.do_train))
  if FLAGS.task == wikihop.TASK and FLAGS.model == "etc":  # outputs depend on them: kept
    heads.check_side_inputs(write_dir, side_input_options)
    common.write_json_atomic(os.path.join(write_dir, heads.SIDE_INPUTS_NAME), side_input_options)
  training_eval.remove_stale_best_temps(write_dir)
  model_config.save_config(config, write_dir, name=(
      bert_windows.CONFIG_NAME if FLAGS.model == "bert_windows" else CONFIG_NAME))
  if label_names is not None:
    common.write_json_atomic(os.path.join(write_dir, LABELS_NAME), label_names)

  num_train_steps = num_warmup_steps = 0
  if FLAGS.do_train:
    num_records = record_counts(files["train"])
    num_train_steps = FLAGS.num_train_steps or max(1, int(
        num_records / FLAGS.train_batch_size * FLAGS.num_train_epochs))
    num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
    tf1.logging.info("*** Training %s: %d records, batch %d, %d steps (warm-up %d)",
                     FLAGS.task, num_records, FLAGS.train_batch_size, num_train_steps,
                     num_warmup_steps)
  if FLAGS.model == "bert_windows":
    tf1.logging.info("*** Model: BERT %d layers, hidden %d, residual_attention=%s over windows "
                     "of %d tokens, stride %d; L=%d", config.num_hidden_layers,
                     config.hidden_size, config.residual_attention, FLAGS.window_length,
                     FLAGS.window_stride, FLAGS.max_seq_length)
  else:
    tf1.logging.info("*** Model: ETC %d layers, hidden %d, local_radius %d, "
                     "residual_attention=%s; L=%d, G=%d", config.num_hidden_layers,
                     config.hidden_size, config.local_radius, config.residual_attention,
                     FLAGS.max_seq_length, FLAGS.max_global_seq_length)
  trainer = _job_trainer(FLAGS, config, len(label_names) if label_names else None,
                         num_train_steps, num_warmup_steps, strategy)
  inference = _Inference(FLAGS, trainer, config, label_names, split_scorers, side_input_options,
                         record_counts)

  # The same keys for both models (a driver reads both alike); no windows: None.
  windowed = FLAGS.model == "bert_windows"
  summary = {"task": FLAGS.task, "model": FLAGS.model,
             "residual_attention": config.residual_attention,
             "max_seq_length": FLAGS.max_seq_length,
             "max_global_seq_length": FLAGS.max_global_seq_length,
             "window_length": FLAGS.window_length if windowed else None,
             "window_stride": FLAGS.window_stride if windowed else None}
  if label_names is not None:
    summary["labels"] = label_names
  if FLAGS.do_train:
    summary.update(_train(FLAGS, trainer, config, files["train"], num_records, num_train_steps,
                          resume_step, inference, files.get("dev"), side_input_options))
  checkpoint, scored = _scored_checkpoint(FLAGS)
  # Which weights the results come from (no checkpoint in --output_dir: --init_checkpoint).
  record = checkpoint_utils.checkpoint_record(checkpoint or eval_weights)
  dev_metrics = None
  if FLAGS.do_eval and chief:
    start = time.time()
    metrics = inference.evaluate(files["dev"], checkpoint)
    dev_metrics = metrics
    results = dict(summary, **metrics)
    results.update(record)
    results.update(scored_checkpoint=scored, eval_seconds=round(time.time() - start, 1))
    answers = inference.evaluated_answers(files["dev"], checkpoint)
    if answers is not None and FLAGS.task == openkp.TASK:  # JSON lines, one per document
      _write_with_sidecar(os.path.join(FLAGS.output_dir, DEV_LINES_NAME),
                          "".join(json.dumps(line) + "\n" for line in answers), record)
    elif answers is not None:  # the official submission format, for the official scorer
      _write_with_sidecar(os.path.join(FLAGS.output_dir, DEV_ANSWERS_NAME),
                          json.dumps(answers, indent=2) + "\n", record)
    estimator_utils.write_eval_results(FLAGS.output_dir, results)
  if FLAGS.do_predict and chief:
    outputs = inference.outputs(files["test"], checkpoint)
    metrics, answers = inference.metrics(files["test"], outputs)
    if FLAGS.task == "supporting" and dev_metrics is not None:
      metrics.update(at_dev_threshold(outputs, dev_metrics["best_threshold"]))
    lines = prediction_lines(FLAGS.task, outputs, label_names)
    if answers is not None and FLAGS.task == wikihop.TASK:  # each line's id and answer
      for line, (key, answer) in zip(lines, answers.items()):
        line.update(id=key, answer=answer)
    if answers is not None and FLAGS.task == hotpotqa.TASK:  # each line's id, answer, facts
      examples = hotpotqa.read_split_examples(FLAGS.data_dir, "test", len(lines))
      record_ids = [line["id"] for line in examples if line["record"] is not None]
      for line, key in zip(lines, record_ids):
        line.update(id=key, answer=answers["answer"][key], sp=answers["sp"][key])
    if answers is not None and FLAGS.task == nq.TASK:  # each window's example id
      examples = nq.read_split_examples(FLAGS.data_dir, "test", len(lines))
      record_ids = [line["id"] for line in examples for _ in range(line["num_records"])]
      for line, key in zip(lines, record_ids):
        line.update(id=key)
    if answers is not None and FLAGS.task == openkp.TASK:  # one official line per document
      lines, answers = answers, None
    if answers is not None:  # the official submission
      _write_with_sidecar(os.path.join(FLAGS.output_dir, TEST_ANSWERS_NAME),
                          json.dumps(answers, indent=2) + "\n", record)
    _write_with_sidecar(os.path.join(FLAGS.output_dir, PREDICTIONS_NAME),
                        "".join(json.dumps(line) + "\n" for line in lines), record)
    results = dict(summary, **metrics)
    results.update(record)
    results["scored_checkpoint"] = scored
    estimator_utils.write_eval_results(FLAGS.output_dir, results, name="test_results")
  lock.release()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
