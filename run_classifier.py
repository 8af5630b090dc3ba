# coding=utf-8
"""BERT / RealFormer fine-tuning on GLUE tasks and on users' own TSV files.

Extends the official google-research/bert run_classifier.py: all nine GLUE tasks read exactly as
distributed (CoLA, SST-2, MRPC, STS-B with a regression head, QQP, MNLI matched + mismatched, QNLI,
RTE, WNLI), XNLI as the official script reads it, a generic `tsv` task, users' own
`DataProcessor`s, GLUE metrics computed exactly in Python, GLUE submission files, a cache of
tokenised features, and a SavedModel export.

  python run_classifier.py --task_name=sst-2 --data_dir=glue/SST-2 \
    --vocab_file=vocab.txt --bert_config_file=bert_config.json \
    --init_checkpoint=bert_model.ckpt --max_seq_length=128 \
    --do_train --do_eval --do_predict --output_dir=out/sst2 \
    [--residual_attention=none|sum|mean] [--export_dir=out/sst2_export]

  XNLI (data_dir holds XNLI-MT 1.0's multinli/ folder and XNLI 1.0's xnli.dev.tsv):
    python run_classifier.py --task_name=xnli --xnli_language=zh --data_dir=$XNLI_DIR ...

Official library API. Code written against the official script as a library (the TF-Hub
notebook, tutorials, the `bert-tensorflow` package) runs unchanged: InputExample,
PaddingInputExample, InputFeatures, DataProcessor (and XnliProcessor, MnliProcessor,
MrpcProcessor, ColaProcessor), convert_single_example, convert_examples_to_features,
file_based_convert_examples_to_features, file_based_input_fn_builder, input_fn_builder,
create_model and model_fn_builder have the official signatures and results; our additions are
keyword arguments with defaults (e.g. is_regression=True for a single-output MSE head).

This file holds the official API and the job; the rest is in library modules whose names it
re-exports: classifier_tasks (examples, DataProcessors, the task table, the TSV reader, class
weights), feature_cache (the tokenised features reused across jobs), classifier_outputs (dev
metrics, pooled windows, submission files), training_eval (evaluation during training, early
stopping, the best checkpoint) and sliding_window (the long-document windows).

Your own DataProcessor with main(), without editing this file, either way:

  1. --processor=MODULE:CLASS (MODULE is imported from the current directory or PYTHONPATH; a
     path to a .py file works too). Its get_labels() gives the labels, --task_name is optional
     (it names the task in logs and caches):
       python run_classifier.py --processor=my_processors:SentimentProcessor \
         --data_dir=my_data --do_train --do_eval ...
  2. Register it from your own script and run our main():
       import run_classifier
       class SentimentProcessor(run_classifier.DataProcessor): ...
       run_classifier.register_processor("sentiment", SentimentProcessor)
       if __name__ == "__main__":
         run_classifier.run()   # defines our flags, then runs main() as this script does
     then: python my_script.py --task_name=sentiment --data_dir=... --do_train ...

A processor task is a classification task scored by accuracy; its dev set is get_dev_examples,
and --do_predict writes the official test_results.tsv (class probabilities per line) plus
test_predictions.tsv (guid<TAB>predicted label).

Evaluation during training, early stopping, the best checkpoint:

  python run_classifier.py --task_name=sst-2 ... --do_train --do_eval \
    --eval_every_steps=500 --early_stopping_patience=3 --keep_best --export_dir=out/sst2_best

  --eval_every_steps=N trains to each multiple of N (and to the last step), scores that
  checkpoint on the (first) dev file and adds the evaluation to output_dir/eval_history.jsonl
  (one line per step: step, metric, score, metrics, best_step, best_score,
  evals_without_improvement, time; rewritten atomically) and to TensorBoard
  (output_dir/eval_history, eval/<metric>). The main metric is the first of the task's metrics
  (glue_metrics.TASK_METRICS; micro_f1 for multi-label). --early_stopping_patience=K stops
  after K evaluations without a higher main metric. --keep_best copies the best checkpoint to
  output_dir/best/ (best.json: step, metric, score, metrics); --do_eval, --do_predict and
  --export_dir then use it. A killed job (exit 130 / 143) resumes from its last checkpoint with
  its history and best. The chunks read the training stream one training call reads: the same
  weights as without evaluation. eval_results.json then also has scored_checkpoint ("last" or
  "best"), scored_step, best_step, best_score, main_metric, last_step, last_score,
  early_stopped, num_evaluations, planned_train_steps (the schedule) and num_train_steps (the
  step training ended at: the schedule's last, or the early-stopping step).

Class weights (single-label classification): --class_weights=auto (inverse frequency over the
training labels, normalised to mean 1) or w1,w2,... in label order (labels.txt). An example's
cross-entropy is multiplied by its class's weight; eval_results.json reports class_weight_<label>.

Multi-label (--task_name=tsv --task_type=multilabel): the label column holds a
--label_separator-joined list (default ","; empty: no label). A sigmoid per label with binary
cross-entropy; dev metrics micro_f1 (the main metric), macro_f1, subset_accuracy, micro
precision / recall and f1_<label> at --multilabel_threshold (default 0.5). --tune_threshold
also reports the single threshold of the best dev micro F1 (eval_tuned_*), saves it to
threshold.json and uses it for --do_predict (the submission lists the predicted labels) and
--export_dir (the SavedModel returns probabilities [batch, num_labels] and predicted_labels).

Long documents (--long_document=window): text_a is split into windows of max_seq_length - 2
tokens (a pair: - 3, and text_b, cut to half of that, is in every window), --doc_stride apart
(default half a window). In training every window is an example with its document's label (an
epoch has as many steps as windows / batch); in eval and predict a document's window logits are
pooled (--window_pooling=mean|max) into one prediction. The SavedModel scores one window
(classifier_config.json records the windowing to apply and pool outside it).

Mixed precision (as run_pretraining.py): --precision=bf16|fp16 runs the encoder's matmuls in
bfloat16 / float16 (fp16 with dynamic loss scaling); variables, checkpoints, the head's logits
and the losses stay float32, so a checkpoint of any precision is evaluated, predicted or resumed
in any other. --fused_optimizer applies AdamW with the fused Adam kernel. The SavedModel export
is float32.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import contextlib
import json
import os
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import checkpoint_utils
import classifier_outputs
import classifier_tasks
import common
import estimator_utils
from realformer_tf import batch_padding
import export_utils
import feature_cache
import model_config
import modeling
import sliding_window
import tokenization
import training_eval

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

# The shared estimator_utils.MODEL_FN_FLAGS this script implements.
SUPPORTED_MODEL_FN_FLAGS = ("precision", "fused_optimizer")


_FLAGS_DEFINED = []


def define_flags():
  """Defines the command-line flags (official names plus the extensions); a second call is a
  no-op (a user's script may call it before run())."""
  if _FLAGS_DEFINED:
    return
  _FLAGS_DEFINED.append(True)
  _define_official_flags()
  estimator_utils.define_estimator_flags()
  model_config.define_model_override_flags()
  _define_task_flags()
  _define_extension_flags()


def _define_official_flags():
  """The official script's flags (same names, defaults and meaning)."""
  # Required parameters (as the official script).
  flags.DEFINE_string(
      "data_dir", None,
      "The input data dir. Should contain the .tsv files (or other data files) for the task.")
  flags.DEFINE_string(
      "bert_config_file", None,
      "The config json file corresponding to the pre-trained BERT model. "
      "This specifies the model architecture.")
  flags.DEFINE_string("task_name", None,
                      "The name of the task to train: %s, or a name given to "
                      "register_processor (optional with --processor)." % ", ".join(TASK_NAMES))
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary file that the BERT model was trained on.")
  flags.DEFINE_string(
      "output_dir", None,
      "The output directory where the model checkpoints, cached features and results go.")

  # Other parameters (official).
  flags.DEFINE_string(
      "init_checkpoint", None,
      "Initial checkpoint (usually from a pre-trained BERT model).")
  flags.DEFINE_bool(
      "do_lower_case", True,
      "Whether to lower case the input text. Should be True for uncased "
      "models and False for cased models.")
  flags.DEFINE_integer(
      "max_seq_length", 128,
      "The maximum total input sequence length after WordPiece tokenization. "
      "Sequences longer than this will be truncated, and sequences shorter "
      "than this will be padded.")
  flags.DEFINE_bool("do_train", False, "Whether to run training.")
  flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
  flags.DEFINE_bool("do_predict", False,
                    "Whether to run the model in inference mode on the test set and write the "
                    "GLUE submission file.")
  flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
  flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
  flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
  flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
  flags.DEFINE_float(
      "warmup_proportion", 0.1,
      "Proportion of training to perform linear learning rate warmup for. "
      "E.g., 0.1 = 10% of training.")


def _define_task_flags():
  """Extensions: the tokenizer, the export, the tsv task's columns and labels, class weights."""
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece model; when given it replaces --vocab_file's WordPiece.")
  flags.DEFINE_string(
      "export_dir", None,
      "Write a SavedModel here (serving_default: int32 input_ids/input_mask/segment_ids "
      "[batch, max_seq_length] -> probabilities and predicted_label, or predictions for "
      "regression), from the trained model, else the latest checkpoint in --output_dir, else "
      "--init_checkpoint.")
  flags.DEFINE_bool(
      "overwrite", False,
      "Replace an earlier export of ours at --export_dir (never anything else: another "
      "directory, a file, checkpoints or this job's inputs and --output_dir are refused).")
  flags.DEFINE_string(
      "text_a_column", None,
      "--task_name=tsv: column of the first text (0-based index, or a header name with "
      "--has_header).")
  flags.DEFINE_string("text_b_column", None,
                      "--task_name=tsv: optional column of the second text (pairs).")
  flags.DEFINE_string("label_column", None,
                      "--task_name=tsv: column of the label (may be absent in test.tsv).")
  flags.DEFINE_bool("has_header", True,
                    "--task_name=tsv: the first line of each file is a header.")
  flags.DEFINE_enum("task_type", "classification",
                    ["classification", "regression", "multilabel"],
                    "--task_name=tsv: classification (softmax), regression (MSE) or multilabel "
                    "(a sigmoid per label, binary cross-entropy; the label column holds a "
                    "--label_separator-joined list, possibly empty) head.")
  flags.DEFINE_string("label_separator", ",",
                      "--task_type=multilabel: separator of the labels in the label column.")
  flags.DEFINE_float("multilabel_threshold", 0.5,
                     "--task_type=multilabel: a label is predicted when its probability is >= "
                     "this (dev metrics, submissions, the SavedModel's predicted_labels).")
  flags.DEFINE_bool("tune_threshold", False,
                    "--task_type=multilabel with --do_eval: also search the threshold that "
                    "maximises micro-F1 on the dev set (reported as eval_tuned_*, saved to "
                    "threshold.json) and use it for --do_predict and --export_dir.")
  flags.DEFINE_string(
      "class_weights", None,
      "Single-label classification: weight of each class in the loss, 'auto' (inverse "
      "frequency over the training labels, normalised to mean 1) or w1,w2,... in label order.")
  flags.DEFINE_string(
      "label_list", None,
      "--task_name=tsv: comma-separated labels (default: the sorted labels found in "
      "train.tsv, or labels.txt written into --output_dir by training).")
  flags.DEFINE_string(
      "processor", None,
      "Your own DataProcessor subclass as MODULE:CLASS (MODULE imported from the current "
      "directory or PYTHONPATH, or a path to a .py file); its get_labels() gives the labels.")


def _define_extension_flags():
  """Extensions: evaluation during training, long documents, padding, XNLI's language."""
  training_eval.define_flags()
  flags.DEFINE_enum(
      "long_document", "truncate", ["truncate", "window"],
      "Texts longer than --max_seq_length: truncate (official), or window: split text_a into "
      "windows --doc_stride tokens apart; every window of a training document carries its "
      "label, eval / predict pool a document's window logits (--window_pooling).")
  flags.DEFINE_integer(
      "doc_stride", None,
      "--long_document=window: tokens between window starts (default: half the window; at "
      "most the window, max_seq_length - 2, or - 3 with a text_b).")
  flags.DEFINE_enum("window_pooling", "mean", ["mean", "max"],
                    "--long_document=window: how a document's window logits are pooled.")
  batch_padding.define_padding_flag(extra_help=(
      "Evaluation and prediction with longest or bucket also sort the examples by length "
      "within windows of %d batches (batches of similar lengths: less padding) and put the "
      "outputs back in the file's order." % SORT_WINDOW_BATCHES))
  flags.DEFINE_bool(
      "group_by_length", False,
      "Training: batches of examples of similar length (the shuffled stream is cut into windows "
      "of %d batches, each window sorted by length and cut into batches, whose order is "
      "shuffled with --seed). With --padding=longest (the training default; "
      "bucket with --use_xla) a batch costs about its longest example, so training is faster; "
      "the batch composition changes (other batches than a run without the flag, hence other "
      "results). Seeded and resumable: a resumed job reads the same batches in the same order "
      "as an uninterrupted one." % GROUP_WINDOW_BATCHES)
  flags.DEFINE_string(
      "xnli_language", "zh",
      "--task_name=xnli: language of the XNLI-MT training file "
      "(multinli/multinli.train.<language>.tsv) and of the xnli.dev.tsv rows evaluated.")


# ----------------------------------------------------------------------------------------------
# Examples, DataProcessors and tasks live in classifier_tasks; the official names (and the
# task API users call) stay importable from here.

InputExample = classifier_tasks.InputExample
PaddingInputExample = classifier_tasks.PaddingInputExample
DataProcessor = classifier_tasks.DataProcessor
XnliProcessor = classifier_tasks.XnliProcessor
MnliProcessor = classifier_tasks.MnliProcessor
MrpcProcessor = classifier_tasks.MrpcProcessor
ColaProcessor = classifier_tasks.ColaProcessor
Layout = classifier_tasks.Layout
TaskFile = classifier_tasks.TaskFile
Task = classifier_tasks.Task
MultiLabelMap = classifier_tasks.MultiLabelMap
GLUE_TASKS = classifier_tasks.GLUE_TASKS
TASK_NAMES = classifier_tasks.TASK_NAMES
normalize_task_name = classifier_tasks.normalize_task_name
make_tsv_task = classifier_tasks.make_tsv_task
register_processor = classifier_tasks.register_processor
load_processor_class = classifier_tasks.load_processor_class
make_processor_task = classifier_tasks.make_processor_task
get_task = classifier_tasks.get_task
ReadStats = classifier_tasks.ReadStats
read_tsv_lines = classifier_tasks.read_tsv_lines
read_examples = classifier_tasks.read_examples
split_multilabel = classifier_tasks.split_multilabel
task_examples = classifier_tasks.task_examples
collect_labels = classifier_tasks.collect_labels
resolve_tsv_labels = classifier_tasks.resolve_tsv_labels
# name -> DataProcessor class or factory (the same dict: register_processor adds to it).
_PROCESSORS = classifier_tasks.PROCESSORS


class InputFeatures(object):
  """A single set of features of data."""

  def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_id = label_id
    self.is_real_example = is_real_example


# ----------------------------------------------------------------------------------------------
# Features (official conversion) and their cache.


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Truncates a sequence pair in place to the maximum length."""
  # This is a simple heuristic which will always truncate the longer sequence one token at a
  # time. This makes more sense than truncating an equal percent of tokens from each, since if
  # one sequence is very short then each token that's truncated likely contains more
  # information than a longer sequence.
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_length:
      break
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
  """Converts a single `InputExample` into a single `InputFeatures` (official).

  [CLS] a [SEP] (b [SEP]), the pair truncated by _truncate_seq_pair to max_seq_length - 3,
  zero-padded; a PaddingInputExample gives all zeros with is_real_example=False. A text_b
  without tokens makes a single-sentence example, as in the official code.

  Args:
    ex_index: position of the example (the first five are logged).
    example: InputExample or PaddingInputExample.
    label_list: the labels (class id = position in the list), as in the official code. Ours
      besides: None for regression (the label is a float) or a dict label -> id; both use the
      packing main() uses (see _convert_single_example).
    max_seq_length: sequence length of the features.
    tokenizer: tokenization.FullTokenizer.

  Returns:
    InputFeatures with input_ids/input_mask/segment_ids of length max_seq_length.
  """
  if label_list is None or isinstance(label_list, dict):
    return _convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer)
  label_map = {}
  for (i, label) in enumerate(label_list):
    label_map[label] = i
  return _convert_single_example(ex_index, example, label_map, max_seq_length, tokenizer,
                                 empty_b_is_single=True)


def _convert_single_example(ex_index, example, label_map, max_seq_length, tokenizer,
                            empty_b_is_single=False):
  """The conversion behind convert_single_example and main(): on ids, with a label map and
  regression labels.

  By default (main(), and serving.pack_inputs which packs the same way) a text_b that is
  given but has no tokens (empty or white space) keeps the pair budget (max_seq_length - 3)
  and adds no second [SEP]; with empty_b_is_single (the official public function) it is a
  single sentence (max_seq_length - 2).

  Args:
    ex_index: position of the example (the first five are logged).
    example: InputExample or PaddingInputExample.
    label_map: dict label -> id, or None for regression (the label is the float).
    max_seq_length: sequence length of the features.
    tokenizer: tokenization.FullTokenizer.
    empty_b_is_single: the official treatment of a text_b without tokens.

  Returns:
    InputFeatures with input_ids/input_mask/segment_ids of length max_seq_length.
  """
  if isinstance(example, PaddingInputExample):
    return InputFeatures(
        input_ids=[0] * max_seq_length,
        input_mask=[0] * max_seq_length,
        segment_ids=[0] * max_seq_length,
        label_id=_dummy_label_id(label_map),
        is_real_example=False)

  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  ids_a = tokenizer.tokenize_to_ids(example.text_a)
  ids_b = None
  if example.text_b is not None:
    ids_b = tokenizer.tokenize_to_ids(example.text_b)
    if empty_b_is_single and not ids_b:
      ids_b = None
  if ids_b is not None:
    # Modifies `ids_a` and `ids_b` in place so that the total length is less than the
    # specified length. Account for [CLS], [SEP], [SEP] with "- 3".
    _truncate_seq_pair(ids_a, ids_b, max_seq_length - 3)
  else:
    # Account for [CLS] and [SEP] with "- 2".
    if len(ids_a) > max_seq_length - 2:
      ids_a = ids_a[0:(max_seq_length - 2)]

  feature = _pack_features(cls_id, sep_id, ids_a, ids_b, max_seq_length,
                           _example_label_id(example, label_map))
  if ex_index < 5:
    _log_feature(example, feature, tokenizer)
  return feature


def _pack_features(cls_id, sep_id, ids_a, ids_b, max_seq_length, label_id):
  """[CLS] a [SEP] (b [SEP]) with its mask and segment ids, zero-padded to max_seq_length.

  Args:
    cls_id: id of [CLS].
    sep_id: id of [SEP].
    ids_a: token ids of the first text (already fitted to the length).
    ids_b: token ids of the second text, or None / [] (no second segment).
    max_seq_length: sequence length.
    label_id: the label id (int, float, or multi-hot list).

  Returns:
    InputFeatures.
  """
  # The convention in BERT is:
  # (a) For sequence pairs:
  #  tokens:   [CLS] is this jack ##son ##ville ? [SEP] no it is not . [SEP]
  #  type_ids: 0     0  0    0    0     0       0 0     1  1  1  1   1 1
  # (b) For single sequences:
  #  tokens:   [CLS] the dog is hairy . [SEP]
  #  type_ids: 0     0   0   0  0     0 0
  input_ids = [cls_id] + list(ids_a) + [sep_id]
  segment_ids = [0] * len(input_ids)
  if ids_b:
    input_ids += list(ids_b) + [sep_id]
    segment_ids += [1] * (len(ids_b) + 1)

  # The mask has 1 for real tokens and 0 for padding tokens. Only real tokens are attended to.
  input_mask = [1] * len(input_ids)
  padding = max_seq_length - len(input_ids)
  input_ids += [0] * padding
  input_mask += [0] * padding
  segment_ids += [0] * padding
  return InputFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                       label_id=label_id, is_real_example=True)


def _dummy_label_id(label_map):
  """The label id of padding and of test examples without labels (the official label 0)."""
  if label_map is None:
    return 0.0
  if isinstance(label_map, MultiLabelMap):
    return [0] * len(label_map)
  return 0


def _example_label_id(example, label_map):
  """An example's label id: class id, float (regression) or multi-hot list (MultiLabelMap)."""
  if example.label is None:
    # Test files have no labels: a dummy id, as the official code's label_list[0].
    return _dummy_label_id(label_map)
  if label_map is None:
    return float(example.label)
  if isinstance(label_map, MultiLabelMap):
    multi_hot = [0] * len(label_map)
    for label in example.label:
      if label not in label_map:
        common.fail("example %s: label %r is not one of the labels %s" %
                    (example.guid, label, ", ".join(str(x) for x in label_map)))
      multi_hot[label_map[label]] = 1
    return multi_hot
  if example.label not in label_map:
    common.fail("example %s: label %r is not one of the labels %s" %
                (example.guid, example.label, ", ".join(str(x) for x in label_map)))
  return label_map[example.label]


def _log_feature(example, feature, tokenizer):
  """Logs one converted example (the official script logs the first five)."""
  length = sum(feature.input_mask)
  tf1.logging.info("*** Example ***")
  tf1.logging.info("guid: %s", example.guid)
  tf1.logging.info("tokens: %s", " ".join(
      tokenization.printable_text(t)
      for t in tokenizer.convert_ids_to_tokens(feature.input_ids[:length])))
  tf1.logging.info("input_ids: %s", " ".join(str(x) for x in feature.input_ids))
  tf1.logging.info("input_mask: %s", " ".join(str(x) for x in feature.input_mask))
  tf1.logging.info("segment_ids: %s", " ".join(str(x) for x in feature.segment_ids))
  tf1.logging.info("label: %s (id = %s)", example.label, feature.label_id)


# ----------------------------------------------------------------------------------------------
# Long documents: windows over text_a (--long_document=window).


# The sliding window is sliding_window.windows (run_squad's and run_ner's too); kept under the
# names this script has had.
DocWindow = sliding_window.Window


def document_windows(num_tokens, window_length, doc_stride):
  """Windows of <= window_length tokens, doc_stride apart, covering a text (sliding_window).

  Args:
    num_tokens: the text's number of tokens.
    window_length: tokens per window (>= 1).
    doc_stride: tokens between window starts (>= 1; a stride beyond the window length is
      capped at it, so no token is skipped).

  Returns:
    list of DocWindow(start, length); one empty window for an empty text.
  """
  return sliding_window.windows(num_tokens, window_length, doc_stride, empty_text_window=True)


def window_length_for(max_seq_length, has_text_b):
  """Tokens of text_a a window holds at most: max_seq_length - 2 ([CLS] a [SEP]), - 3 with a
  second text (whose own tokens then come off as well)."""
  return max_seq_length - (3 if has_text_b else 2)


def convert_example_to_windows(ex_index, example, label_map, max_seq_length, tokenizer,
                               doc_stride):
  """Converts one example into the features of its windows over text_a.

  Every window is [CLS] a-window [SEP] (b [SEP]) with the example's label; text_b (if any) is
  kept in every window, cut to at most (max_seq_length - 3) // 2 tokens. A text that fits is
  one window, the same feature the truncating conversion gives.

  Args:
    ex_index: position of the example (the first five are logged).
    example: InputExample or PaddingInputExample (one all-zero window).
    label_map: as _convert_single_example.
    max_seq_length: sequence length of the features.
    tokenizer: tokenization.FullTokenizer.
    doc_stride: tokens between window starts.

  Returns:
    list of InputFeatures, in text order.
  """
  if isinstance(example, PaddingInputExample):
    return [_convert_single_example(ex_index, example, label_map, max_seq_length, tokenizer)]
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  ids_a = tokenizer.tokenize_to_ids(example.text_a)
  ids_b = None
  window_length = window_length_for(max_seq_length, False)
  if example.text_b is not None:
    ids_b = tokenizer.tokenize_to_ids(example.text_b)[:(max_seq_length - 3) // 2]
    window_length = window_length_for(max_seq_length, True) - len(ids_b)
  label_id = _example_label_id(example, label_map)
  features = []
  for window in document_windows(len(ids_a), window_length, doc_stride):
    features.append(_pack_features(cls_id, sep_id,
                                   ids_a[window.start:window.start + window.length], ids_b,
                                   max_seq_length, label_id))
  if ex_index < 5:
    tf1.logging.info("%s: %d token(s) of text_a -> %d window(s)", example.guid, len(ids_a),
                     len(features))
    _log_feature(example, features[0], tokenizer)
  return features


def file_based_convert_examples_to_windows(examples, label_map, max_seq_length, tokenizer,
                                           output_file, doc_stride, pad_records_to_multiple=1):
  """Writes the windows of every example to a TFRecord (official features), atomically.

  Args:
    examples: list of InputExample / PaddingInputExample.
    label_map: as _convert_single_example.
    max_seq_length: sequence length.
    tokenizer: tokenization.FullTokenizer.
    output_file: TFRecord path; written under a temporary name then renamed.
    doc_stride: tokens between window starts.
    pad_records_to_multiple: append padding examples (one all-zero window each) until the
      number of records is a multiple of this (TPU eval / predict batches).

  Returns:
    list of ints: the number of windows (records, in order) of each example, the padding
    examples appended included.
  """
  tmp_file = common.temp_path(output_file)
  meter = common.ProgressMeter(len(examples), unit="examples", min_interval_s=10.0)
  counts = []
  try:
    with tf.io.TFRecordWriter(tmp_file) as writer:
      for ex_index, example in enumerate(examples):
        features = convert_example_to_windows(ex_index, example, label_map, max_seq_length,
                                              tokenizer, doc_stride)
        for feature in features:
          writer.write(features_to_tf_example(feature).SerializeToString())
        counts.append(len(features))
        if ex_index % 1000 == 0:
          meter.update(ex_index)
      while sum(counts) % pad_records_to_multiple:
        feature = _convert_single_example(len(counts), PaddingInputExample(), label_map,
                                          max_seq_length, tokenizer)
        writer.write(features_to_tf_example(feature).SerializeToString())
        counts.append(1)
    tf.io.gfile.rename(tmp_file, output_file, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_file):
      tf.io.gfile.remove(tmp_file)
  meter.update(len(examples), force=True)
  return counts


def features_to_tf_example(feature):
  """Serialises InputFeatures as the official tf.train.Example."""
  def int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  def float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))

  out = collections.OrderedDict()
  out["input_ids"] = int_feature(feature.input_ids)
  out["input_mask"] = int_feature(feature.input_mask)
  out["segment_ids"] = int_feature(feature.segment_ids)
  if isinstance(feature.label_id, float):
    out["label_ids"] = float_feature([feature.label_id])
  elif isinstance(feature.label_id, (list, tuple)):
    out["label_ids"] = int_feature(feature.label_id)  # multi-hot [num_labels]
  else:
    out["label_ids"] = int_feature([feature.label_id])
  out["is_real_example"] = int_feature([int(feature.is_real_example)])
  return tf.train.Example(features=tf.train.Features(feature=out))


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file):
  """Converts a set of `InputExample`s to a TFRecord file (official features), atomically.

  Features: input_ids, input_mask, segment_ids [max_seq_length], label_ids [1] and
  is_real_example [1], all int64 (label_ids float for regression).

  Args:
    examples: list of InputExample / PaddingInputExample.
    label_list: the labels (class id = position), as convert_single_example takes them (ours
      besides: None for regression, float label_ids; or a dict label -> id).
    max_seq_length: sequence length.
    tokenizer: tokenization.FullTokenizer.
    output_file: TFRecord path; written under a temporary name then renamed.
  """
  tmp_file = "%s.tmp-%d" % (output_file, os.getpid())
  meter = common.ProgressMeter(len(examples), unit="examples", min_interval_s=10.0)
  try:
    with tf.io.TFRecordWriter(tmp_file) as writer:
      for ex_index, example in enumerate(examples):
        feature = convert_single_example(ex_index, example, label_list, max_seq_length,
                                         tokenizer)
        writer.write(features_to_tf_example(feature).SerializeToString())
        if ex_index % 1000 == 0:
          meter.update(ex_index)
    tf.io.gfile.rename(tmp_file, output_file, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_file):
      tf.io.gfile.remove(tmp_file)
  meter.update(len(examples), force=True)


# The feature cache (feature_cache); its key under the names run_classifier has always had.
FEATURE_CACHE_VERSION = feature_cache.FEATURE_CACHE_VERSION
feature_cache_key = feature_cache.feature_cache_key
examples_digest = feature_cache.examples_digest


def cached_features(examples, input_file, cache_file, tokenizer, task, max_seq_length,
                    vocab_file, do_lower_case, spm_model_file, pad_to_multiple=1,
                    doc_stride=None):
  """Returns the TFRecord of `examples`' features, reusing `cache_file` when its key matches.

  Args:
    examples: list of InputExample (already read from input_file).
    input_file: the file they were read from, or None when a DataProcessor gave them.
    cache_file: TFRecord path in output_dir.
    tokenizer: tokenization.FullTokenizer.
    task: Task.
    max_seq_length: sequence length.
    vocab_file: vocab path (key).
    do_lower_case: tokenizer setting (key).
    spm_model_file: SentencePiece model path or None (key).
    pad_to_multiple: pad the examples with PaddingInputExample to a multiple of this (with
      windows: the records).
    doc_stride: --long_document=window: write every example's windows this far apart
      (file_based_convert_examples_to_windows); None: one truncated feature per example.

  Returns:
    feature_cache.cached_features's dict (file, num_examples, num_padded, reused, num_records,
    windows).
  """
  def write_features(padded, output_file):
    if doc_stride is None:
      # A label map (or None): main()'s own conversion, see _convert_single_example.
      file_based_convert_examples_to_features(padded, task.label_map, max_seq_length,
                                              tokenizer, output_file)
      return None
    # On TPU the windows (the records) are padded to a multiple of the batch size.
    return file_based_convert_examples_to_windows(padded, task.label_map, max_seq_length,
                                                  tokenizer, output_file, doc_stride,
                                                  pad_records_to_multiple=pad_to_multiple)

  return feature_cache.cached_features(
      examples, input_file, cache_file, write_features, task, max_seq_length, vocab_file,
      do_lower_case, spm_model_file, pad_to_multiple=pad_to_multiple, doc_stride=doc_stride)


# --group_by_length: examples are sorted by length within windows of this many batches.
GROUP_WINDOW_BATCHES = 50


def length_grouped_batches(records, decode_fn, batch_size, seed, skip_batches=0,
                           window_batches=GROUP_WINDOW_BATCHES, mask_name="input_mask"):
  """Batches of examples of similar length (--group_by_length), seeded and resumable.

  The (shuffled, repeated) record stream is cut into windows of window_batches * batch_size
  examples; each window is sorted by length (stable) and cut into window_batches batches, which
  are put in an order drawn from (seed, the window's index) with a stateless random op. The
  stream is thus a pure function of the records and the seed: skipping k batches (a resumed
  job) skips k // window_batches windows of records before decoding them, then k %
  window_batches batches, and continues exactly as the uninterrupted stream.

  Args:
    records: tf.data.Dataset of serialized examples, infinite (repeated, shuffled).
    decode_fn: serialized example -> dict of fixed-shape Tensors.
    batch_size: examples per batch.
    seed: int, the batch order's seed.
    skip_batches: batches to skip (resume).
    window_batches: batches per sorted window.
    mask_name: the [seq_length] 0/1 feature whose sum is an example's length.

  Returns:
    tf.data.Dataset of feature dicts [batch_size, ...] (a static batch dimension).
  """
  window = window_batches * batch_size
  skip_windows, skip_rest = divmod(int(skip_batches), window_batches)
  if skip_windows:
    records = records.skip(skip_windows * window)
  d = records.map(decode_fn).batch(window, drop_remainder=True).enumerate(start=skip_windows)
  seed = tf.constant(0 if seed is None else seed, tf.int64)

  def window_to_batches(index, examples):
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(examples[mask_name], 0), tf.int32), axis=1)
    order = tf.argsort(lengths, stable=True)
    draw = tf.random.stateless_uniform([window_batches], seed=tf.stack([seed, index]))
    batch_order = tf.argsort(draw, stable=True)
    batches = {}
    for name, value in examples.items():
      value = tf.gather(value, order)
      value = tf.reshape(value, [window_batches, batch_size] + value.shape[1:].as_list())
      batches[name] = tf.gather(value, batch_order)
    return tf.data.Dataset.from_tensor_slices(batches)

  d = d.flat_map(window_to_batches)
  return d.skip(skip_rest) if skip_rest else d


# Evaluation / prediction with --padding=longest or bucket: examples are sorted by length within
# windows of this many batches (length_sorted_batches); the outputs are put back in file order.
SORT_WINDOW_BATCHES = 128


def length_sorted_batches(examples, batch_size, window_batches=SORT_WINDOW_BATCHES,
                          mask_name="input_mask", index_name=classifier_outputs.EXAMPLE_INDEX):
  """Evaluation / prediction batches of examples of similar length, each with its file index.

  The stream is cut into windows of window_batches * batch_size examples (the last may be
  shorter); each window is sorted by length (stable, shortest first) and cut into batches, so
  a batch padded to its longest example (--padding=longest) holds little padding. The number of
  batches is that of the file's order (only the last may be partial); every example gets
  index_name (int32, its 0-based position in the stream), which model_fn passes on to the
  predictions and classifier_outputs.in_file_order uses to restore the file's order. Whole
  windows are indexed, sorted and sliced (no per-example tf.data step).

  Args:
    examples: finite tf.data.Dataset of decoded feature dicts (fixed shapes), in file order.
    batch_size: examples per batch.
    window_batches: batches per sorted window.
    mask_name: the [seq_length] 0/1 feature whose sum is an example's length.
    index_name: the feature that carries the example's index.

  Returns:
    tf.data.Dataset of feature dicts [batch, ...] (batch dimension not static), index_name
    [batch].
  """
  window = window_batches * batch_size

  def window_to_batches(window_index, features):
    size = tf.shape(features[mask_name])[0]
    features = dict(features)
    features[index_name] = tf.cast(window_index, tf.int32) * window + tf.range(size)
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(features[mask_name], 0), tf.int32), axis=1)
    order = tf.argsort(lengths, stable=True)
    features = {name: tf.gather(value, order) for name, value in features.items()}
    return tf.data.Dataset.range(0, tf.cast(size, tf.int64), batch_size).map(
        lambda start: {name: value[start:start + batch_size]
                       for name, value in features.items()})

  return examples.batch(window).enumerate().flat_map(window_to_batches)


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder,
                                is_regression=False, seed=None, skip_batches=0,
                                multilabel_num_labels=None, shuffle_buffer=100,
                                padding="max_length", group_by_length=False,
                                group_window_batches=GROUP_WINDOW_BATCHES,
                                sort_by_length=False, sort_window_batches=SORT_WINDOW_BATCHES):
  """Creates an `input_fn` closure to be passed to TPUEstimator (official).

  Args:
    input_file: TFRecord of file_based_convert_examples_to_features.
    seq_length: the max_seq_length it was written with.
    is_training: repeat and shuffle.
    drop_remainder: drop a last partial batch (TPU needs fixed shapes).
    is_regression: (ours) float label_ids.
    seed: (ours) shuffle seed.
    skip_batches: (ours) the batches a resumed job already trained on; see
      estimator_utils.resume_skip_batches.
    multilabel_num_labels: (ours) multi-label tasks: label_ids is a multi-hot
      [multilabel_num_labels] vector.
    shuffle_buffer: (ours) training shuffle buffer (records); the official 100 by default.
    padding: (ours) "max_length" (official): every batch [batch, seq_length]; "longest": each
      batch sliced to its longest example rounded up to a multiple of 8
      (batch_padding.trim_batch_to_longest): the same batches in the same order, outputs
      equal to float rounding, less compute on padding; "bucket": that length rounded up to
      batch_padding.padding_buckets(seq_length) (few shapes, for XLA). Not for TPU (static
      shapes).
    group_by_length: (ours) training: batches of examples of similar length
      (length_grouped_batches over the shuffled stream; skip_batches counts its batches).
    group_window_batches: (ours) group_by_length's window, in batches.
    sort_by_length: (ours) evaluation / prediction: batches of examples of similar length
      (length_sorted_batches), each example with its index in the file
      (classifier_outputs.EXAMPLE_INDEX), for classifier_outputs.in_file_order.
    sort_window_batches: (ours) sort_by_length's window, in batches.

  Returns:
    input_fn(params) -> tf.data.Dataset of int32 feature dicts, batch params["batch_size"].
  """
  if padding not in batch_padding.PADDING_MODES:
    raise ValueError("padding=%r: not one of %s" % (padding, batch_padding.PADDING_MODES))
  buckets = batch_padding.padding_buckets(seq_length) if padding == "bucket" else None
  if group_by_length and not is_training:
    raise ValueError("group_by_length: only for training (evaluation keeps the file's order)")
  if sort_by_length and (is_training or drop_remainder):
    raise ValueError("sort_by_length: only for evaluation and prediction, without "
                     "drop_remainder (group_by_length for training; TPU: max_length)")
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }
  if multilabel_num_labels:
    name_to_features["label_ids"] = tf.io.FixedLenFeature([multilabel_num_labels], tf.int64)

  def input_fn(params):
    """The actual input function."""
    batch_size = params["batch_size"]
    # For training, we want a lot of parallel reading and shuffling.
    # For eval, we want no shuffling and parallel reading doesn't matter.
    d = tf.data.TFRecordDataset(input_file)
    if is_training:
      d = d.repeat()
      d = d.shuffle(buffer_size=shuffle_buffer, seed=seed)
      if group_by_length:
        d = length_grouped_batches(
            d, lambda record: estimator_utils.decode_record(record, name_to_features),
            batch_size, seed, skip_batches, group_window_batches)
      elif skip_batches:
        d = d.skip(skip_batches * batch_size)
    if not group_by_length:
      d = d.map(lambda record: estimator_utils.decode_record(record, name_to_features))
      if sort_by_length:
        d = length_sorted_batches(d, batch_size, sort_window_batches)
      else:
        d = d.batch(batch_size=batch_size, drop_remainder=drop_remainder)
    if padding != "max_length":
      d = d.map(lambda batch: batch_padding.trim_batch_to_longest(batch, seq_length,
                                                                  buckets=buckets))
    return d

  return input_fn


# ----------------------------------------------------------------------------------------------
# Model.


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                 num_labels, use_one_hot_embeddings, is_regression=False, is_multilabel=False,
                 class_weights=None, compute_dtype=None, skip_padding=False):
  """Creates a classification (or regression) model on BERT's pooled output (official).

  Args:
    bert_config: modeling.BertConfig.
    is_training: dropout on (BERT's and 0.1 on the pooled output).
    input_ids: int32 [batch, seq].
    input_mask: int32 [batch, seq].
    segment_ids: int32 [batch, seq].
    labels: int32 [batch] (float32 for regression, multi-hot int32 [batch, num_labels] for
      multi-label), or None (no loss: serving).
    num_labels: number of classes (1 for regression).
    use_one_hot_embeddings: one-hot embedding lookup (TPU).
    is_regression: (ours) single output with MSE loss.
    is_multilabel: (ours) a sigmoid per label; the loss of an example is the mean of its
      labels' binary cross-entropies.
    class_weights: (ours) single-label classification: list of num_labels floats; an
      example's cross-entropy is multiplied by its class's weight. None: all 1.
    compute_dtype: (ours) BERT's compute dtype (modeling.BertModel; "fp32" / "bf16" / "fp16"
      or a dtype, None: float32). The output layer, logits and losses are float32 in all.
    skip_padding: (ours) BERT computes the real tokens only (modeling.BertModel's
      skip_padding; not for TPU / XLA): the same outputs to float rounding, less compute.

  Returns:
    (loss, per_example_loss [batch], logits [batch, num_labels], probabilities
    [batch, num_labels] for classification (independent sigmoids for multi-label) or
    predictions [batch] for regression). The losses are None when labels is None.
  """
  model = modeling.BertModel(
      config=bert_config,
      is_training=is_training,
      input_ids=input_ids,
      input_mask=input_mask,
      token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype,
      skip_padding=skip_padding)

  # In the demo, we are doing a simple classification task on the entire segment.
  #
  # If you want to use the token-level output, use model.get_sequence_output() instead.
  # The head is float32 in every precision (BertModel's outputs are; no op when already so).
  output_layer = tf.cast(model.get_pooled_output(), tf.float32)

  hidden_size = output_layer.shape[-1]

  output_weights = tf1.get_variable(
      "output_weights", [num_labels, hidden_size],
      initializer=tf1.truncated_normal_initializer(stddev=0.02))

  output_bias = tf1.get_variable(
      "output_bias", [num_labels], initializer=tf1.zeros_initializer())

  with tf1.variable_scope("loss"):
    if is_training:
      # I.e., 0.1 dropout
      output_layer = modeling.dropout(output_layer, 0.1)

    logits = tf.matmul(output_layer, output_weights, transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)
    if is_regression:
      outputs = tf.squeeze(logits, axis=-1)
    elif is_multilabel:
      outputs = tf.nn.sigmoid(logits)
    else:
      outputs = tf.nn.softmax(logits, axis=-1)
    if labels is None:
      return None, None, logits, outputs

    if is_regression:
      per_example_loss = tf.square(outputs - tf.cast(labels, tf.float32))
    elif is_multilabel:
      per_example_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.cast(labels, tf.float32), logits=logits), axis=-1)
    else:
      log_probs = tf.nn.log_softmax(logits, axis=-1)
      one_hot_labels = tf.one_hot(labels, depth=num_labels, dtype=tf.float32)
      per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
      if class_weights is not None:
        per_example_loss *= tf.gather(tf.constant(class_weights, dtype=tf.float32), labels)
    loss = tf.reduce_mean(per_example_loss)

    return (loss, per_example_loss, logits, outputs)


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate, num_train_steps,
                     num_warmup_steps, use_tpu, use_one_hot_embeddings, is_regression=False,
                     extra_predictions=False, is_multilabel=False, class_weights=None,
                     precision="fp32", fused_optimizer=False, keep_checkpoint_max=5,
                     max_seq_length=None, skip_padding=False):
  """Returns `model_fn` closure for TPUEstimator (official).

  TRAIN: Adam with warm-up (optimization.create_optimizer). EVAL: eval_metrics eval_accuracy and
  eval_loss weighted by is_real_example (eval_loss only for regression). PREDICT: predictions
  {"probabilities": [batch, num_labels]} ({"predictions": [batch]} for regression).

  Args:
    bert_config: modeling.BertConfig.
    num_labels: number of classes.
    init_checkpoint: checkpoint to initialise from (BERT and any head variables it has), or
      None.
    learning_rate: peak learning rate.
    num_train_steps: total training steps (the learning rate decays to 0 there).
    num_warmup_steps: linear warm-up steps.
    use_tpu: TPU (restore in a scaffold, TPU optimizer).
    use_one_hot_embeddings: one-hot embedding lookups (TPU).
    is_regression: (ours) single output with MSE loss.
    extra_predictions: (ours) PREDICT also returns per_example_loss, label_ids, logits and
      is_real_example (main() computes the dev metrics from them and pools windows' logits).
    is_multilabel: (ours) sigmoid per label (create_model); EVAL reports eval_loss only.
    class_weights: (ours) per-class loss weights (create_model).
    precision: (ours) "fp32", "bf16" or "fp16": BERT's compute dtype (create_model); fp16
      trains with dynamic loss scaling (estimator_utils.create_train_op).
    fused_optimizer: (ours) AdamW with the fused Adam kernel (create_train_op).
    keep_checkpoint_max: (ours) checkpoints kept by the fp16 saver (create_train_op).
    max_seq_length: (ours) the features' --max_seq_length: BERT's dropout masks are drawn at
      that length (modeling.full_length_dropout), so a training batch padded to its longest
      example (--padding=longest) drops what the max_length batch drops. None: the official
      masks over the batch's shape (equal to these at max_seq_length).
    skip_padding: (ours) BERT skips the padding rows (create_model); not for TPU / XLA.

  Returns:
    model_fn(features, labels, mode, params) -> TPUEstimatorSpec.
  """
  compute_dtype = modeling.get_compute_dtype(precision)

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    """The `model_fn` for TPUEstimator."""
    tf1.logging.info("*** Features ***")
    for name in sorted(features.keys()):
      tf1.logging.info("  name = %s, shape = %s", name, features[name].shape)

    input_ids = features["input_ids"]
    input_mask = features["input_mask"]
    segment_ids = features["segment_ids"]
    label_ids = features["label_ids"]
    is_real_example = None
    if "is_real_example" in features:
      is_real_example = tf.cast(features["is_real_example"], dtype=tf.float32)
    else:
      # input_fn_builder's in-memory features have no such key: every example is real.
      is_real_example = tf.ones(tf.shape(label_ids), dtype=tf.float32)

    is_training = (mode == tf1.estimator.ModeKeys.TRAIN)

    with (modeling.full_length_dropout(max_seq_length) if max_seq_length
          else contextlib.nullcontext()):
      (total_loss, per_example_loss, logits, outputs) = create_model(
          bert_config, is_training, input_ids, input_mask, segment_ids, label_ids, num_labels,
          use_one_hot_embeddings, is_regression, is_multilabel=is_multilabel,
          class_weights=class_weights, compute_dtype=compute_dtype, skip_padding=skip_padding)

    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(init_checkpoint, use_tpu)

    if mode == tf1.estimator.ModeKeys.TRAIN:
      train_op = estimator_utils.create_train_op(
          total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
          precision=precision, fused_optimizer=fused_optimizer,
          keep_checkpoint_max=keep_checkpoint_max)
      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=total_loss, train_op=train_op, scaffold_fn=scaffold_fn)

    if mode == tf1.estimator.ModeKeys.EVAL:
      def metric_fn(per_example_loss, label_ids, logits, is_real_example):
        if is_regression or is_multilabel:
          return {"eval_loss": tf1.metrics.mean(values=per_example_loss,
                                                weights=is_real_example)}
        predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
        accuracy = tf1.metrics.accuracy(
            labels=label_ids, predictions=predictions, weights=is_real_example)
        loss = tf1.metrics.mean(values=per_example_loss, weights=is_real_example)
        return {
            "eval_accuracy": accuracy,
            "eval_loss": loss,
        }

      eval_metrics = (metric_fn, [per_example_loss, label_ids, logits, is_real_example])
      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=total_loss, eval_metrics=eval_metrics, scaffold_fn=scaffold_fn)

    if is_regression:
      predictions = {"predictions": outputs}
    else:
      predictions = {"probabilities": outputs}
    if extra_predictions:
      predictions.update(per_example_loss=per_example_loss, label_ids=label_ids,
                         is_real_example=is_real_example, logits=logits)
    if classifier_outputs.EXAMPLE_INDEX in features:
      # Length-sorted batches (sort_by_length): in_file_order restores the file's order.
      predictions[classifier_outputs.EXAMPLE_INDEX] = features[classifier_outputs.EXAMPLE_INDEX]
    return tf1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, predictions=predictions, scaffold_fn=scaffold_fn)

  return model_fn


# Not used by main(), but by the TF-Hub notebook, tutorials and code written against the
# official script.
def input_fn_builder(features, seq_length, is_training, drop_remainder, is_regression=False):
  """Creates an in-memory `input_fn` closure to be passed to TPUEstimator (official).

  Holds every feature as a constant in the graph: for demos and small data sets only (the
  file-based builder scales).

  Args:
    features: list of InputFeatures (convert_examples_to_features).
    seq_length: their max_seq_length.
    is_training: repeat and shuffle.
    drop_remainder: drop a last partial batch.
    is_regression: (ours) float32 label_ids.

  Returns:
    input_fn(params) -> tf.data.Dataset of dicts input_ids, input_mask, segment_ids int32
    [batch, seq_length] and label_ids [batch] (no is_real_example, as the official one).
  """
  all_input_ids = []
  all_input_mask = []
  all_segment_ids = []
  all_label_ids = []

  for feature in features:
    all_input_ids.append(feature.input_ids)
    all_input_mask.append(feature.input_mask)
    all_segment_ids.append(feature.segment_ids)
    all_label_ids.append(feature.label_id)

  def input_fn(params):
    """The actual input function."""
    batch_size = params["batch_size"]

    num_examples = len(features)

    # Constants, not Dataset.from_generator: a py_func does not run on TPU.
    d = tf.data.Dataset.from_tensor_slices({
        "input_ids": tf.constant(all_input_ids, shape=[num_examples, seq_length],
                                 dtype=tf.int32),
        "input_mask": tf.constant(all_input_mask, shape=[num_examples, seq_length],
                                  dtype=tf.int32),
        "segment_ids": tf.constant(all_segment_ids, shape=[num_examples, seq_length],
                                   dtype=tf.int32),
        "label_ids": tf.constant(all_label_ids, shape=[num_examples],
                                 dtype=tf.float32 if is_regression else tf.int32),
    })

    if is_training:
      d = d.repeat()
      d = d.shuffle(buffer_size=100)

    d = d.batch(batch_size=batch_size, drop_remainder=drop_remainder)
    return d

  return input_fn


# Not used by main(), but by the TF-Hub notebook, tutorials and code written against the
# official script.
def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
  """Converts a set of `InputExample`s to a list of `InputFeatures` (official).

  Args:
    examples: list of InputExample / PaddingInputExample.
    label_list: the labels (class id = position); see convert_single_example.
    max_seq_length: sequence length.
    tokenizer: tokenization.FullTokenizer.

  Returns:
    list of InputFeatures, one per example.
  """
  features = []
  for (ex_index, example) in enumerate(examples):
    if ex_index % 10000 == 0:
      tf1.logging.info("Writing example %d of %d", ex_index, len(examples))

    feature = convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer)

    features.append(feature)
  return features


def serving_build_fn(bert_config, num_labels, is_regression, is_multilabel=False,
                     threshold=0.5):
  """Returns build_fn(placeholders) -> serving outputs, for export_utils.export_saved_model.

  Outputs: `probabilities` float32 [batch, num_labels] and `predicted_label` int32 [batch]; for
  regression `predictions` float32 [batch]; for multi-label `probabilities` (a sigmoid per
  label) and `predicted_labels` int32 [batch, num_labels] (1 where probability >= threshold).
  """
  def build_fn(placeholders):
    _, _, _, outputs = create_model(
        bert_config, False, placeholders["input_ids"], placeholders["input_mask"],
        placeholders["segment_ids"], None, num_labels, False, is_regression,
        is_multilabel=is_multilabel)
    if is_regression:
      return {"predictions": tf.identity(outputs, name="predictions")}
    if is_multilabel:
      return {"probabilities": tf.identity(outputs, name="probabilities"),
              "predicted_labels": tf.cast(outputs >= threshold, tf.int32,
                                          name="predicted_labels")}
    return {"probabilities": tf.identity(outputs, name="probabilities"),
            "predicted_label": tf.argmax(outputs, axis=-1, output_type=tf.int32,
                                         name="predicted_label")}
  return build_fn


# ----------------------------------------------------------------------------------------------
# Evaluation and submission files.


# Dev metrics, pooled windows and the submission files (classifier_outputs), under the names
# this script has had.
dev_metrics = classifier_outputs.dev_metrics
pool_window_outputs = classifier_outputs.pool_window_outputs
predicted_labels = classifier_outputs.predicted_labels
format_prediction = classifier_outputs.format_prediction
write_submission = classifier_outputs.write_submission
write_test_results = classifier_outputs.write_test_results


# ----------------------------------------------------------------------------------------------
# Main.


def _check_flags():
  """One-line errors for missing or inconsistent flags."""
  for name in ("task_name", "output_dir", "bert_config_file"):
    if name == "task_name" and FLAGS.processor:
      continue  # The processor's class names the task.
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  common.check_output_dir(FLAGS.output_dir, "output_dir")
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
    common.fail("--do_train, --do_eval, --do_predict: at least one of them (or --export_dir) "
                "must be set")
  if FLAGS.max_seq_length < 3:
    common.fail("--max_seq_length=%d: must be at least 3 ([CLS] a [SEP])" %
                FLAGS.max_seq_length)
  for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d: must be >= 1" % (name, getattr(FLAGS, name)))
  if FLAGS.do_train and FLAGS.num_train_epochs <= 0:
    common.fail("--num_train_epochs=%s: must be > 0" % FLAGS.num_train_epochs)
  if not 0.0 <= FLAGS.warmup_proportion < 1.0:
    common.fail("--warmup_proportion=%s: must be in [0, 1)" % FLAGS.warmup_proportion)
  if FLAGS.spm_model_file:
    common.require_file(FLAGS.spm_model_file, "spm_model_file")
  else:
    common.require_file(FLAGS.vocab_file, "vocab_file")
  if (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict) and not FLAGS.data_dir:
    common.fail("--data_dir is required with --do_train/--do_eval/--do_predict")
  if FLAGS.data_dir and not tf.io.gfile.isdir(FLAGS.data_dir):
    common.fail("--data_dir=%s: not a directory" % FLAGS.data_dir)
  _check_extension_flags()


def _check_extension_flags():
  """One-line errors for the evaluation-during-training, multi-label, class-weight and
  long-document flags (those that need no task)."""
  batch_padding.check_padding_flag(FLAGS)
  if getattr(FLAGS, "group_by_length", False) and not FLAGS.do_train:
    common.fail("--group_by_length: groups training batches; it needs --do_train")
  training_eval.check_flags(FLAGS)
  if FLAGS.task_type == "multilabel" and (
      FLAGS.processor or normalize_task_name(FLAGS.task_name) != "tsv"):
    common.fail("--task_type=multilabel: only for --task_name=tsv")
  if not 0.0 <= FLAGS.multilabel_threshold <= 1.0:
    common.fail("--multilabel_threshold=%s: must be in [0, 1]" % FLAGS.multilabel_threshold)
  if FLAGS.tune_threshold and FLAGS.task_type != "multilabel":
    common.fail("--tune_threshold: only for --task_type=multilabel")
  if FLAGS.doc_stride is not None:
    if FLAGS.long_document != "window":
      common.fail("--doc_stride=%d: only used with --long_document=window" % FLAGS.doc_stride)
    if FLAGS.doc_stride < 1:
      common.fail("--doc_stride=%d: must be >= 1" % FLAGS.doc_stride)


def _check_task_flags(task):
  """One-line errors for flags that do not fit the task (--class_weights, the window of
  --long_document=window)."""
  if FLAGS.class_weights and (task.is_regression or task.is_multilabel):
    common.fail("--class_weights=%s: only for single-label classification (task %s is %s)" %
                (FLAGS.class_weights, task.name,
                 "regression" if task.is_regression else "multi-label"))
  resolve_doc_stride(task)


def resolve_doc_stride(task):
  """The stride of --long_document=window for the task: --doc_stride, by default half a window.

  A window holds max_seq_length - 2 tokens of text_a (a pair task: - 3, less the up to
  (max_seq_length - 3) // 2 tokens of text_b every window keeps). A stride larger than that
  would skip text between windows: a one-line error, as is a length that leaves no window.

  Args:
    task: Task (its training layout says whether it has a text_b).

  Returns:
    int, or None without --long_document=window.
  """
  if FLAGS.long_document != "window":
    return None
  layout = task.train.layout
  has_text_b = layout is not None and layout.text_b is not None
  window = window_length_for(FLAGS.max_seq_length, has_text_b)
  if has_text_b:
    # text_b keeps up to half the budget in every window.
    window -= (FLAGS.max_seq_length - 3) // 2
  if window < 1:
    common.fail("--long_document=window: --max_seq_length=%d leaves no room for a window" %
                FLAGS.max_seq_length)
  if FLAGS.doc_stride is None:
    return max(1, window // 2)
  if FLAGS.doc_stride > window:
    common.fail("--doc_stride=%d: larger than the window (%d tokens of text_a at "
                "--max_seq_length=%d), which would skip text between windows" %
                (FLAGS.doc_stride, window, FLAGS.max_seq_length))
  return FLAGS.doc_stride


# The loss weights of --class_weights (classifier_tasks), under this script's names.
resolve_class_weights = classifier_tasks.resolve_class_weights
auto_class_weights = classifier_tasks.auto_class_weights


def _require_task_files(task, data_dir):
  """Fails before any work if a file the requested modes need is missing."""
  needed = []
  if FLAGS.do_train:
    needed.append((task.train, "--do_train"))
  if FLAGS.do_eval or FLAGS.eval_every_steps:
    needed.extend((f, "--do_eval" if FLAGS.do_eval else "--eval_every_steps")
                  for f in task.dev)
  if FLAGS.do_predict:
    needed.extend((f, "--do_predict") for f in task.test)
  for task_file, mode in needed:
    if task_file.file_name is None:
      continue  # A DataProcessor's files: it reports them itself (task_examples).
    path = os.path.join(data_dir, task_file.file_name)
    if not tf.io.gfile.exists(path):
      common.fail("--data_dir=%s: has no %s (needed by %s for task %s)" %
                  (data_dir, task_file.file_name, mode, task.name))


def export_protected_paths():
  """What an --export_dir must never replace: this job's --output_dir and its inputs.

  Returns:
    List of paths (checkpoint prefixes included) for export_utils.export_saved_model.
  """
  return [p for p in (FLAGS.output_dir, FLAGS.init_checkpoint, FLAGS.data_dir,
                      FLAGS.vocab_file, FLAGS.spm_model_file, FLAGS.bert_config_file) if p]


def head_shapes(task, bert_config):
  """{variable name: shape} of the classifier head create_model adds on top of BERT."""
  return {"output_weights": [task.num_labels, bert_config.hidden_size],
          "output_bias": [task.num_labels]}


def model_variable_names(bert_config):
  """The names of the model's variables (BERT and the classifier head)."""
  return set(estimator_utils.bert_variable_shapes(bert_config)) | {"output_weights",
                                                                    "output_bias"}


def _eval_actions():
  """The modes of a job that read trained weights, as the user typed them."""
  return "/".join(name for name, on in (("--do_eval", FLAGS.do_eval),
                                        ("--do_predict", FLAGS.do_predict),
                                        ("--export_dir", FLAGS.export_dir)) if on)


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  estimator_utils.require_estimator()
  _check_flags()
  estimator_utils.validate_estimator_flags(FLAGS)
  estimator_utils.check_supported(FLAGS, SUPPORTED_MODEL_FN_FLAGS)
  task = get_task(FLAGS.task_name, FLAGS)
  _check_task_flags(task)  # before the lock: a bad flag leaves nothing behind
  if FLAGS.class_weights and FLAGS.class_weights.strip().lower() != "auto" and task.labels:
    resolve_class_weights(FLAGS.class_weights, task, None)  # (a tsv task's labels come later)
  bert_config = model_config.load_config(FLAGS.bert_config_file, FLAGS, FLAGS.max_seq_length)
  if FLAGS.data_dir:
    _require_task_files(task, FLAGS.data_dir)
  tokenizer = tokenization.checked_tokenizer(
      FLAGS.vocab_file, FLAGS.do_lower_case, init_checkpoint=FLAGS.init_checkpoint,
      spm_model_file=FLAGS.spm_model_file, vocab_size=bert_config.vocab_size,
      config_name=FLAGS.bert_config_file)
  if FLAGS.export_dir:
    # Checked before any training, so that a bad target costs nothing (and again at export).
    common.check_export_dir(FLAGS.export_dir, "export_dir", FLAGS.overwrite,
                            export_protected_paths())
  # One job per directory, taken before the directory's checkpoint is read: two training jobs
  # would interleave checkpoints and overwrite each other's results, and an evaluation beside a
  # training job would score whichever intermediate checkpoint happens to be the latest.
  with common.OutputDirLock(FLAGS.output_dir, "output_dir"):
    eval_weights = None
    if not FLAGS.do_train:
      # Scores of a randomly initialised model would look like a result: no trained weights is
      # one line (unless --allow_random_eval), before any work.
      eval_weights = checkpoint_utils.require_eval_weights(
          _eval_actions(), FLAGS.output_dir, FLAGS.init_checkpoint,
          model_variable_names(bert_config))
    _run_job(task, bert_config, tokenizer, eval_weights)


def _run_job(task, bert_config, tokenizer, eval_weights=None):
  """Trains / evaluates / predicts / exports as the flags say (after main's checks).

  Args:
    task: Task.
    bert_config: modeling.BertConfig (with the flag overrides).
    tokenizer: the checked FullTokenizer.
    eval_weights: without --do_train, the checkpoint require_eval_weights found (None: random
      weights, --allow_random_eval).
  """
  if task.name == "tsv" and not task.is_regression:
    resolve_tsv_labels(task, FLAGS.data_dir, FLAGS.output_dir)
  doc_stride = resolve_doc_stride(task)
  tf1.logging.info("Padding: training %s, evaluation / prediction %s%s",
                   training_padding() + (" (--group_by_length)" if FLAGS.group_by_length
                                         else ""),
                   batch_padding.effective_padding(FLAGS),
                   " (--use_tpu: static shapes)" if FLAGS.use_tpu else
                   "; BERT skips the padding rows" if batch_padding.skips_padding(FLAGS) else "")
  # Before anything is written there: a checkpoint of another model (or label list) in
  # --output_dir would otherwise fail deep inside the restore, after bert_config.json and
  # labels.txt were replaced.
  resume_step = estimator_utils.check_resume(
      FLAGS.output_dir, bert_config, label_list=None if task.is_regression else task.labels,
      extra_shapes=head_shapes(task, bert_config),
      restore=estimator_utils.restore_mode(FLAGS.do_train, FLAGS.do_eval or FLAGS.do_predict))
  tf.io.gfile.makedirs(FLAGS.output_dir)
  cache_args = dict(tokenizer=tokenizer, task=task, max_seq_length=FLAGS.max_seq_length,
                    vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                    spm_model_file=FLAGS.spm_model_file, doc_stride=doc_stride)
  train_examples, dev_examples, test_examples = _read_job_examples(task)
  # A killed --keep_best job's temporaries (this job holds the directory's lock).
  remove_stale_best_temps(FLAGS.output_dir)
  class_weights = _job_class_weights(task, train_examples)
  train_cache = None
  num_train_steps = num_warmup_steps = None
  if FLAGS.do_train:
    train_cache = cached_features(train_examples, _task_file_path(task.train),
                                  os.path.join(FLAGS.output_dir, "train.tf_record"),
                                  **cache_args)
    # Every window is a training example (one per example without windowing).
    num_train_steps = max(1, int(train_cache["num_records"] / FLAGS.train_batch_size *
                                 FLAGS.num_train_epochs))
    num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
  model_fn = _job_model_fn(task, bert_config, num_train_steps, num_warmup_steps, class_weights)
  inference = _Inference(task, model_fn, cache_args, class_weights)

  summary = _job_summary(task, class_weights, doc_stride)
  if FLAGS.do_train:
    summary.update(_train(task, bert_config, model_fn, train_cache, num_train_steps,
                          num_warmup_steps, resume_step, inference,
                          dev_examples.get(task.dev[0].cache_name)))
  scored_checkpoint, scored, best = _scored_checkpoint()
  # Which weights every result below comes from: the scored checkpoint; without one (no
  # training, nothing in --output_dir) the --init_checkpoint the model starts from, or None.
  record = checkpoint_utils.checkpoint_record(scored_checkpoint or eval_weights)
  threshold = FLAGS.multilabel_threshold
  if FLAGS.do_eval:
    threshold = _evaluate(task, inference, dev_examples, scored_checkpoint, scored, best,
                          record, summary)
  elif FLAGS.tune_threshold and (FLAGS.do_predict or FLAGS.export_dir):
    threshold = _saved_threshold(scored_checkpoint)
  if FLAGS.do_predict:
    _predict(task, inference, test_examples, scored_checkpoint, record, threshold)
  if FLAGS.export_dir:
    common.STOP_SIGNALS.exit_if_stopped()
    classifier_config = {}
    if doc_stride is not None:
      classifier_config.update(long_document="window", doc_stride=doc_stride,
                               window_pooling=FLAGS.window_pooling)
    export_classifier(task, bert_config, FLAGS.export_dir,
                      scored_checkpoint or FLAGS.init_checkpoint,
                      FLAGS.max_seq_length, vocab_file=FLAGS.vocab_file,
                      spm_model_file=FLAGS.spm_model_file, do_lower_case=FLAGS.do_lower_case,
                      overwrite=FLAGS.overwrite, protected_paths=export_protected_paths(),
                      threshold=threshold, extra_config=classifier_config)


def _read_job_examples(task):
  """Reads the examples of every split the job needs, before any training: a bad label costs
  nothing instead of the whole training run.

  Args:
    task: Task.

  Returns:
    (train_examples or None, {dev cache_name: examples}, {test cache_name: examples}).
  """
  def read(task_file, split, required):
    examples = task_examples(task, task_file, FLAGS.data_dir, split)
    if required and not examples:
      common.fail("--data_dir=%s: %s has no usable examples" %
                  (FLAGS.data_dir, classifier_tasks.split_description(task, task_file)))
    return examples

  train_examples = read(task.train, "train", True) if FLAGS.do_train else None
  dev_examples = {}
  if FLAGS.do_eval or FLAGS.eval_every_steps:
    for dev_file in task.dev:
      dev_examples[dev_file.cache_name] = read(dev_file, "dev", True)
  test_examples = {}
  if FLAGS.do_predict:
    for test_file in task.test:
      test_examples[test_file.cache_name] = read(test_file, "test", False)
  return train_examples, dev_examples, test_examples


def _job_class_weights(task, train_examples):
  """The loss weights of --class_weights (None without), logged."""
  if not FLAGS.class_weights:
    return None
  weight_examples = train_examples
  if weight_examples is None and FLAGS.class_weights.strip().lower() == "auto":
    weight_examples = _training_examples_if_any(task)
  class_weights = resolve_class_weights(FLAGS.class_weights, task, weight_examples)
  tf1.logging.info("Class weights: %s", ", ".join(
      "%s=%.4f" % (label, w) for label, w in zip(task.labels, class_weights)))
  return class_weights


def _job_model_fn(task, bert_config, num_train_steps, num_warmup_steps, class_weights):
  """model_fn_builder with the job's flags."""
  return model_fn_builder(
      bert_config=bert_config,
      num_labels=task.num_labels,
      init_checkpoint=FLAGS.init_checkpoint,
      learning_rate=FLAGS.learning_rate,
      num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps,
      use_tpu=FLAGS.use_tpu,
      use_one_hot_embeddings=FLAGS.use_tpu,
      is_regression=task.is_regression,
      extra_predictions=True,
      is_multilabel=task.is_multilabel,
      class_weights=class_weights,
      max_seq_length=FLAGS.max_seq_length,
      skip_padding=batch_padding.skips_padding(FLAGS),
      **estimator_utils.precision_kwargs(FLAGS))


def _job_summary(task, class_weights, doc_stride):
  """What eval_results.json records of the job's set-up (class weights, windowing)."""
  summary = {}
  if class_weights is not None:
    for label, weight in zip(task.labels, class_weights):
      summary["class_weight_%s" % label] = weight
  if doc_stride is not None:
    summary.update(long_document="window", doc_stride=doc_stride,
                   window_pooling=FLAGS.window_pooling)
  return summary


def _train(task, bert_config, model_fn, train_cache, num_train_steps, num_warmup_steps,
           resume_step, inference, dev_examples):
  """--do_train: writes bert_config.json and labels.txt, then trains (with evaluations when
  --eval_every_steps is set).

  Args:
    task: Task.
    bert_config: modeling.BertConfig.
    model_fn: the model_fn.
    train_cache: cached_features of the training set.
    num_train_steps: the schedule's last step.
    num_warmup_steps: warm-up steps (logged).
    resume_step: the step of the checkpoint resumed from (None: a new job).
    inference: _Inference (evaluations during training).
    dev_examples: the examples of the first dev file, or None.

  Returns:
    dict for eval_results (num_train_steps, train_seconds, and the evaluation summary).
  """
  model_config.save_config(bert_config, FLAGS.output_dir)
  if not task.is_regression:
    with common.atomic_output(os.path.join(FLAGS.output_dir, "labels.txt")) as f:
      f.write("".join(label + "\n" for label in task.labels))
  tf1.logging.info("***** Running training *****")
  tf1.logging.info("  Num examples = %d%s", train_cache["num_examples"],
                   " (%d windows)" % train_cache["num_records"] if train_cache["windows"]
                   else "")
  tf1.logging.info("  Batch size = %d", FLAGS.train_batch_size)
  tf1.logging.info("  Num steps = %d (warm-up %d)", num_train_steps, num_warmup_steps)
  start = time.time()
  if FLAGS.eval_every_steps:
    summary = _train_with_evaluation(task, model_fn, train_cache, num_train_steps, resume_step,
                                     inference, dev_examples)
  else:
    estimator = estimator_utils.make_estimator(
        model_fn, FLAGS, FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.eval_batch_size,
        FLAGS.predict_batch_size, supported_flags=SUPPORTED_MODEL_FN_FLAGS)
    train_input_fn = _train_input_fn(
        task, train_cache, estimator_utils.resume_skip_batches(resume_step, FLAGS))
    hook = estimator_utils.ProgressHook(num_train_steps, FLAGS.train_batch_size)
    # On SIGINT / SIGTERM the step finishes, the Estimator checkpoints, and the job exits
    # 130 / 143 below without writing any result that would make it look finished.
    estimator.train(input_fn=train_input_fn, max_steps=num_train_steps,
                    hooks=[hook, estimator_utils.StopOnSignalHook()])
    common.STOP_SIGNALS.exit_if_stopped()
    tf1.logging.info("Training done: %d steps in %s%s", num_train_steps,
                     common.format_duration(time.time() - start),
                     " (%.2f steps/s)" % hook.last_rate if hook.last_rate else "")
    # The target beside global_step: a reader (sweep.py) can check the step was reached.
    summary = {"num_train_steps": num_train_steps}
  summary["train_seconds"] = round(time.time() - start, 1)
  return summary


def _scored_checkpoint():
  """The checkpoint that --do_eval scores and --do_predict / --export_dir use: the best one
  with --keep_best (when there is one), else the latest.

  Returns:
    (checkpoint prefix or None, "best" or "last", the best.json dict or None).
  """
  scored_checkpoint, scored = tf1.train.latest_checkpoint(FLAGS.output_dir), "last"
  best = read_best_checkpoint(FLAGS.output_dir) if FLAGS.keep_best else None
  if best is not None:
    scored_checkpoint, scored = best["path"], "best"
    tf1.logging.info("--keep_best: using the best checkpoint %s (step %d, %s = %.6g)",
                     best["path"], best["step"], best["metric"], best["score"])
  elif FLAGS.keep_best:
    tf1.logging.warning("--keep_best: no best checkpoint in %s/%s; using the latest",
                        FLAGS.output_dir, BEST_DIR)
  return scored_checkpoint, scored, best


def _evaluate(task, inference, dev_examples, scored_checkpoint, scored, best, record, summary):
  """--do_eval: scores every dev file and writes eval_results.json (and threshold.json with
  --tune_threshold).

  Dev sets go through Estimator.predict (batch --eval_batch_size) and the metrics are computed
  exactly in Python; on TPU the set is padded so no example is dropped.

  Args:
    task: Task.
    inference: _Inference.
    dev_examples: {dev cache_name: examples}.
    scored_checkpoint: the checkpoint scored (None: the latest in --output_dir).
    scored: "best" or "last".
    best: the best.json dict, or None.
    record: checkpoint_utils.checkpoint_record of the weights.
    summary: what the job adds to the results (set-up, training).

  Returns:
    The multi-label threshold for prediction and export (tuned, or --multilabel_threshold).
  """
  results = {}
  for dev_file in task.dev:
    start = time.time()
    metrics = inference.evaluate(dev_file, dev_examples[dev_file.cache_name],
                                 scored_checkpoint)
    tf1.logging.info("  %s: %d examples in %.1f s",
                     classifier_tasks.split_description(task, dev_file),
                     metrics["num_examples"], time.time() - start)
    prefixes = ["eval_"] if not dev_file.name else ["eval_%s_" % dev_file.name]
    if task.name == "mnli" and not dev_file.name:
      prefixes.append("eval_matched_")
    for prefix in prefixes:
      for key, value in metrics.items():
        results[prefix + key] = value
  results["global_step"] = estimator_utils.latest_global_step(FLAGS.output_dir)
  if scored_checkpoint:
    results["scored_checkpoint"] = scored
    results["scored_step"] = training_eval.checkpoint_step(scored_checkpoint)
  if best is not None:
    results.update(best_step=best["step"], best_score=best["score"], main_metric=best["metric"])
  results.update(checkpoint=record["checkpoint"], checkpoint_step=record["global_step"])
  results.update(summary)
  # A signal during evaluation: no results file, so the job does not look finished.
  common.STOP_SIGNALS.exit_if_stopped()
  threshold = FLAGS.multilabel_threshold
  if FLAGS.tune_threshold:
    threshold = results["eval_tuned_threshold"]
    common.write_json_atomic(os.path.join(FLAGS.output_dir, THRESHOLD_FILE), {
        "threshold": threshold, "micro_f1": results["eval_tuned_micro_f1"],
        "checkpoint_step": results.get("scored_step"), "scored_checkpoint": scored})
  estimator_utils.write_eval_results(FLAGS.output_dir, results)
  return threshold


def _predict(task, inference, test_examples, scored_checkpoint, record, threshold):
  """--do_predict: the submission file and the official test_results.tsv of every test file,
  each with its checkpoint sidecar.

  Args:
    task: Task.
    inference: _Inference.
    test_examples: {test cache_name: examples}.
    scored_checkpoint: the checkpoint used (None: the latest in --output_dir).
    record: checkpoint_utils.checkpoint_record of the weights.
    threshold: multi-label threshold.
  """
  for test_file in task.test:
    examples = test_examples[test_file.cache_name]
    outputs = inference.predict(test_file, examples, scored_checkpoint)
    if len(outputs) != len(examples):
      raise RuntimeError("predicted %d of %d examples" % (len(outputs), len(examples)))
    common.STOP_SIGNALS.exit_if_stopped()
    submission = os.path.join(FLAGS.output_dir, test_file.name)
    results_name = "test_results.tsv"
    if test_file.cache_name != "predict":
      results_name = "test_results_%s.tsv" % test_file.cache_name.split("_", 1)[1]
    results_path = os.path.join(FLAGS.output_dir, results_name)
    # The official formats have no room for it: which checkpoint produced them is in
    # <file>.checkpoint.json, removed first so a kill in between leaves none that is wrong.
    for path in (submission, results_path):
      checkpoint_utils.remove_sidecar(path)
    write_submission(submission, task, examples, outputs, threshold=threshold)
    write_test_results(results_path, task, outputs)
    for path in (submission, results_path):
      checkpoint_utils.write_sidecar(path, record)
    tf1.logging.info("Wrote %d predictions to %s and %s", len(outputs), submission,
                     results_name)


def train_shuffle_buffer(train_cache):
  """The training shuffle buffer: the official 100 records, or with windows 100 examples'
  worth of them (a document's windows are consecutive in the file; a 100-record buffer would
  fill batches with the windows of a few documents, all of one label)."""
  if not train_cache["windows"]:
    return 100
  return max(100, int(np.ceil(100.0 * train_cache["num_records"] /
                              max(1, train_cache["num_examples"]))))


def _training_examples_if_any(task):
  """The training examples when the task's training set can be read (else None)."""
  path = _task_file_path(task.train)
  if path is not None and not tf.io.gfile.exists(path):
    return None
  return task_examples(task, task.train, FLAGS.data_dir, "train") if FLAGS.data_dir else None


THRESHOLD_FILE = "threshold.json"


def _saved_threshold(checkpoint):
  """--tune_threshold without --do_eval: the threshold tuned for this checkpoint earlier."""
  path = os.path.join(FLAGS.output_dir, THRESHOLD_FILE)
  step = training_eval.checkpoint_step(checkpoint) if checkpoint else None
  saved = None
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      saved = json.load(f)
  if not saved or saved.get("checkpoint_step") != step:
    common.fail("--tune_threshold: no threshold tuned for the checkpoint of step %s in %s "
                "(run --do_eval with --tune_threshold first)" % (step, path))
  tf1.logging.info("Multi-label threshold %.6g (tuned on dev for step %s, %s)",
                   saved["threshold"], step, path)
  return float(saved["threshold"])


class _Inference(object):
  """Dev-set evaluation and test-set prediction through Estimator.predict on any checkpoint,
  windows pooled per document."""

  def __init__(self, task, model_fn, cache_args, class_weights):
    self.task = task
    self.cache_args = cache_args
    self.class_weights = class_weights
    self._model_fn = model_fn
    self._estimators = {}
    self._inputs = {}

  def _estimator(self, batch_size):
    if batch_size not in self._estimators:
      self._estimators[batch_size] = estimator_utils.make_estimator(
          self._model_fn, FLAGS, FLAGS.output_dir, FLAGS.train_batch_size,
          FLAGS.eval_batch_size, predict_batch_size=batch_size,
          supported_flags=SUPPORTED_MODEL_FN_FLAGS)
    return self._estimators[batch_size]

  def outputs(self, task_file, examples, checkpoint, batch_size, purpose):
    """Per-example prediction dicts (windows pooled) and the cache dict of the file."""
    key = (task_file.cache_name, batch_size)
    if key not in self._inputs:
      # Cached once per job: evaluations during training reuse the features and input_fn.
      self._inputs[key] = _inference_input(self.task, task_file, examples, self.cache_args,
                                           batch_size, purpose)
    cache, input_fn = self._inputs[key]
    outputs = list(self._estimator(batch_size).predict(input_fn=input_fn,
                                                       checkpoint_path=checkpoint))
    # Length-sorted batches (--padding=longest / bucket): back in the file's order.
    outputs = classifier_outputs.in_file_order(outputs)
    if cache["windows"] is not None:
      outputs = pool_window_outputs(self.task, outputs, cache["windows"], FLAGS.window_pooling,
                                    self.class_weights)
    return outputs, cache

  def evaluate(self, dev_file, examples, checkpoint):
    """dev_metrics of `checkpoint` (None: the latest in --output_dir) on one dev file."""
    outputs, cache = self.outputs(dev_file, examples, checkpoint, FLAGS.eval_batch_size,
                                  "evaluation")
    metrics = dev_metrics(self.task, outputs, cache["num_examples"],
                          threshold=FLAGS.multilabel_threshold,
                          tune_threshold=FLAGS.tune_threshold)
    if cache["windows"] is not None:
      metrics["num_windows"] = int(sum(cache["windows"][:cache["num_examples"]]))
    return metrics

  def predict(self, test_file, examples, checkpoint):
    """Per-example prediction dicts of the real examples of a test file."""
    outputs, cache = self.outputs(test_file, examples, checkpoint, FLAGS.predict_batch_size,
                                  "prediction")
    return outputs[:cache["num_examples"]]


# ----------------------------------------------------------------------------------------------
# Evaluation during training (training_eval), under the names this script has had.

HISTORY_FILE = training_eval.HISTORY_FILE
HISTORY_SUMMARY_DIR = training_eval.HISTORY_SUMMARY_DIR
BEST_DIR = training_eval.BEST_DIR
BEST_FILE = training_eval.BEST_FILE
EvalHistory = training_eval.EvalHistory
read_best_checkpoint = training_eval.read_best_checkpoint
remove_stale_best_temps = training_eval.remove_stale_best_temps
save_best_checkpoint = training_eval.save_best_checkpoint


def _train_with_evaluation(task, model_fn, train_cache, num_train_steps, resume_step,
                           inference, dev_examples=None):
  """Trains in chunks of --eval_every_steps, evaluating the dev set after each
  (training_eval.train_with_evaluation).

  The checkpoint of each chunk is scored on the first dev file (its main metric decides the
  best and early stopping). Each chunk's input skips the batches trained so far, so the chunks
  read the stream one uninterrupted training call reads (the same weights, and a killed job
  resumes exactly as without evaluation).

  Args:
    task: Task.
    model_fn: the model_fn.
    train_cache: cached_features of the training set.
    num_train_steps: the schedule's last step.
    resume_step: the step of the checkpoint resumed from (None: a new job).
    inference: _Inference.
    dev_examples: the examples of the first dev file, when already read.

  Returns:
    training_eval.train_with_evaluation's summary dict (for eval_results).
  """
  dev_file = task.dev[0]
  dev_examples = dev_examples or task_examples(task, dev_file, FLAGS.data_dir, "dev")
  if not dev_examples:
    common.fail("--data_dir=%s: %s has no usable examples (needed by --eval_every_steps)" %
                (FLAGS.data_dir, classifier_tasks.split_description(task, dev_file)))
  estimator = estimator_utils.make_estimator(
      model_fn, FLAGS, FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.eval_batch_size,
      FLAGS.predict_batch_size, supported_flags=SUPPORTED_MODEL_FN_FLAGS)

  def train_to(step, target):
    train_input_fn = _train_input_fn(task, train_cache, _chunk_skip_batches(step))
    hook = estimator_utils.ProgressHook(num_train_steps, FLAGS.train_batch_size)
    estimator.train(input_fn=train_input_fn, max_steps=target,
                    hooks=[hook, estimator_utils.StopOnSignalHook()])
    common.STOP_SIGNALS.exit_if_stopped()
    return estimator_utils.latest_global_step(FLAGS.output_dir)

  return training_eval.train_with_evaluation(
      FLAGS.output_dir, task.main_metric, num_train_steps, resume_step,
      FLAGS.eval_every_steps, train_to,
      lambda checkpoint: inference.evaluate(dev_file, dev_examples, checkpoint),
      patience=FLAGS.early_stopping_patience, keep_best=FLAGS.keep_best)


def _train_input_fn(task, train_cache, skip_batches):
  """The training input_fn (shuffled with --seed) that skips the batches trained so far."""
  return file_based_input_fn_builder(
      input_file=train_cache["file"], seq_length=FLAGS.max_seq_length, is_training=True,
      drop_remainder=True, is_regression=task.is_regression, seed=FLAGS.seed,
      skip_batches=skip_batches,
      multilabel_num_labels=task.num_labels if task.is_multilabel else None,
      shuffle_buffer=train_shuffle_buffer(train_cache),
      padding=training_padding(), group_by_length=FLAGS.group_by_length)


def training_padding():
  """--padding of the training input: longest (bucket with --use_xla, max_length on TPU), as
  evaluation's: model_fn draws dropout masks at --max_seq_length (modeling.full_length_dropout),
  so the weights equal a max_length run's to float rounding."""
  return batch_padding.effective_padding(FLAGS, training=True, full_length_dropout=True)


def _chunk_skip_batches(step):
  """Batches a training chunk that starts at `step` skips: those trained so far.

  Without TPU or a distribution strategy the input_fn batch is the global batch, one per step
  (resume_skip_batches: exact). On TPU / under a strategy its batches are per core / replica,
  `replicas` of them per step, so the chunk skips step * replicas of them; on one host or
  worker this continues the stream (several read it each from its start, as a resumed job).
  """
  if not (FLAGS.use_tpu or FLAGS.distribution_strategy != "none"):
    return estimator_utils.resume_skip_batches(step, FLAGS)
  replicas = FLAGS.num_tpu_cores if FLAGS.use_tpu else (
      FLAGS.num_gpus or max(1, len(tf.config.list_logical_devices("GPU")) or
                            len(tf.config.list_logical_devices("CPU"))))
  return step * replicas


def _task_file_path(task_file):
  """The path of a task file in --data_dir, or None for a DataProcessor's split."""
  if task_file.file_name is None:
    return None
  return os.path.join(FLAGS.data_dir, task_file.file_name)


def _inference_input(task, task_file, examples, cache_args, batch_size, purpose):
  """Caches the features of a dev or test file and builds its input_fn.

  On TPU the features are padded to a multiple of batch_size so no example is dropped. With
  --padding=longest or bucket the batches hold examples of similar length (sort_by_length:
  far less padding; _Inference.outputs restores the file's order).

  Args:
    task: Task.
    task_file: the TaskFile being evaluated or predicted.
    examples: its InputExamples.
    cache_args: the keyword arguments of cached_features shared by every file.
    batch_size: eval or predict batch size.
    purpose: "evaluation" or "prediction", for the log.

  Returns:
    (cache dict of cached_features, input_fn).
  """
  padding = batch_padding.effective_padding(FLAGS)
  cache = cached_features(
      examples, _task_file_path(task_file),
      os.path.join(FLAGS.output_dir, task_file.cache_name + ".tf_record"),
      pad_to_multiple=batch_size if FLAGS.use_tpu else 1, **cache_args)
  tf1.logging.info("***** Running %s on %s *****", purpose,
                   classifier_tasks.split_description(task, task_file))
  tf1.logging.info("  Num examples = %d (%d actual, %d padding)%s", cache["num_padded"],
                   cache["num_examples"], cache["num_padded"] - cache["num_examples"],
                   " in %d windows" % cache["num_records"] if cache["windows"] else "")
  input_fn = file_based_input_fn_builder(
      input_file=cache["file"], seq_length=FLAGS.max_seq_length, is_training=False,
      drop_remainder=FLAGS.use_tpu, is_regression=task.is_regression,
      multilabel_num_labels=task.num_labels if task.is_multilabel else None,
      padding=padding, sort_by_length=padding != "max_length")
  return cache, input_fn


def export_classifier(task, bert_config, export_dir, checkpoint, max_seq_length, vocab_file=None,
                      spm_model_file=None, do_lower_case=True, overwrite=False,
                      protected_paths=(), threshold=0.5, extra_config=None):
  """Writes the classifier as a SavedModel (serving_default) plus labels and configs.

  Args:
    task: Task (labels, regression or not).
    bert_config: modeling.BertConfig used for the model.
    export_dir: SavedModel directory; an existing one only if it is an earlier export of ours
      and overwrite is set (anything else is refused, see common.check_export_dir).
    checkpoint: checkpoint prefix or directory holding bert/* and output_weights/output_bias.
    max_seq_length: the sequence length of the int32 inputs.
    vocab_file: copied into the export for tokenising (WordPiece).
    spm_model_file: noted in classifier_config.json.
    do_lower_case: noted in classifier_config.json.
    overwrite: replace an earlier export of ours at export_dir.
    protected_paths: paths export_dir must not be or contain (output_dir, inputs).
    threshold: multi-label tasks: the probability from which `predicted_labels` is 1.
    extra_config: more keys for classifier_config.json (e.g. the long-document windowing the
      model was trained with: the SavedModel scores one window).

  Returns:
    The checkpoint that was exported.
  """
  if not checkpoint:
    common.fail("--export_dir=%s: nothing to export: no checkpoint in --output_dir and no "
                "--init_checkpoint" % export_dir)
  input_specs = {name: (tf.int32, [None, max_seq_length])
                 for name in ("input_ids", "input_mask", "segment_ids")}
  if task.is_regression:
    outputs = ["predictions"]
  elif task.is_multilabel:
    outputs = ["probabilities", "predicted_labels"]
  else:
    outputs = ["probabilities", "predicted_label"]
  classifier_config = {
      "task_name": task.name, "is_regression": task.is_regression,
      "labels": task.labels, "max_seq_length": max_seq_length,
      "do_lower_case": bool(do_lower_case),
      "spm_model_file": os.path.basename(spm_model_file) if spm_model_file else None,
      "outputs": outputs}
  if task.is_multilabel:
    classifier_config.update(is_multilabel=True, threshold=float(threshold),
                             label_separator=task.label_separator)
  classifier_config.update(extra_config or {})
  extra_files = {
      "bert_config.json": bert_config.to_json_string(),
      "classifier_config.json": json.dumps(classifier_config, indent=2) + "\n",
  }
  if not task.is_regression:
    extra_files["labels.txt"] = "".join(label + "\n" for label in task.labels)
  if vocab_file and not spm_model_file:
    with tf.io.gfile.GFile(vocab_file) as f:
      extra_files["vocab.txt"] = f.read()
  return export_utils.export_saved_model(
      serving_build_fn(bert_config, task.num_labels, task.is_regression,
                       is_multilabel=task.is_multilabel, threshold=threshold), checkpoint,
      export_dir, input_specs, extra_files=extra_files, overwrite=overwrite,
      protected_paths=protected_paths, bert_config=bert_config)


def run(argv=None):
  """Defines the flags and runs main() as `python run_classifier.py` does.

  For users' scripts that register_processor() their own DataProcessor first.

  Args:
    argv: command line (default sys.argv).
  """
  define_flags()
  app.run(lambda args: common.run_main(main, args), argv=argv)


if __name__ == "__main__":
  run()
