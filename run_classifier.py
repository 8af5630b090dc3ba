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
import csv
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import checkpoint_utils
import common
import estimator_utils
import export_utils
import glue_metrics
import modeling
import tokenization

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

# The shared estimator_utils.MODEL_FN_FLAGS this script implements.
SUPPORTED_MODEL_FN_FLAGS = ("precision", "fused_optimizer")

# Bumped when the cached TFRecord layout or the conversion changes.
FEATURE_CACHE_VERSION = 1


_FLAGS_DEFINED = []


def define_flags():
  """Defines the command-line flags (official names plus the extensions); a second call is a
  no-op (a user's script may call it before run())."""
  if _FLAGS_DEFINED:
    return
  _FLAGS_DEFINED.append(True)
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
  estimator_utils.define_estimator_flags()
  estimator_utils.define_model_override_flags()

  # Extensions.
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
  flags.DEFINE_integer(
      "eval_every_steps", 0,
      "With --do_train: evaluate on the dev set every N steps (and at the last step), append "
      "each evaluation to output_dir/eval_history.jsonl and TensorBoard "
      "(output_dir/eval_history). 0: off.")
  flags.DEFINE_integer(
      "early_stopping_patience", 0,
      "With --eval_every_steps: stop training after this many evaluations without an "
      "improvement of the task's main metric. 0: off.")
  flags.DEFINE_bool(
      "keep_best", False,
      "With --eval_every_steps: copy the best checkpoint (main metric) to output_dir/best/ "
      "(best.json: step and score); --do_eval, --do_predict and --export_dir then use it.")
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
  flags.DEFINE_enum(
      "padding", None, list(estimator_utils.PADDING_CHOICES),
      "longest: each batch is padded to its longest example rounded up to a multiple of 8 "
      "(same batches and order; outputs equal to float rounding, less compute on padding; "
      "training dropout masks are drawn over the shorter batch, so a training run with "
      "dropout gets other draws); max_length: every batch to --max_seq_length (official). "
      "Default: longest for evaluation and prediction, max_length for training and on TPU "
      "(static shapes).")
  flags.DEFINE_string(
      "label_list", None,
      "--task_name=tsv: comma-separated labels (default: the sorted labels found in "
      "train.tsv, or labels.txt written into --output_dir by training).")
  flags.DEFINE_string(
      "processor", None,
      "Your own DataProcessor subclass as MODULE:CLASS (MODULE imported from the current "
      "directory or PYTHONPATH, or a path to a .py file); its get_labels() gives the labels.")
  flags.DEFINE_string(
      "xnli_language", "zh",
      "--task_name=xnli: language of the XNLI-MT training file "
      "(multinli/multinli.train.<language>.tsv) and of the xnli.dev.tsv rows evaluated.")


# ----------------------------------------------------------------------------------------------
# Examples and task files.


class InputExample(object):
  """A single training/test example for simple sequence classification."""

  def __init__(self, guid, text_a, text_b=None, label=None, index=None):
    """Constructs an InputExample.

    Args:
      guid: Unique id for the example ("<split>-<n>").
      text_a: string. The untokenized text of the first sequence.
      text_b: (Optional) string. The untokenized text of the second sequence.
      label: (Optional) string (classification) or float (regression); None for test files.
      index: (Optional) the id written into a submission file (the test file's index column,
        or the row number).
    """
    self.guid = guid
    self.text_a = text_a
    self.text_b = text_b
    self.label = label
    self.index = index


class PaddingInputExample(object):
  """Fake example so the num input examples is a multiple of the batch size.

  When running eval/predict on the TPU, we need to pad the number of examples to be a multiple
  of the batch size, because the TPU requires a fixed batch size. The alternative is to drop the
  last batch, which is bad because it means the entire output data won't be generated.

  We use this class instead of `None` because treating `None` as padding batches could cause
  silent errors.
  """


class InputFeatures(object):
  """A single set of features of data."""

  def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_id = label_id
    self.is_real_example = is_real_example


# ----------------------------------------------------------------------------------------------
# The official DataProcessor API (users subclass it; main() runs one with --processor or
# register_processor). Same guids, columns and labels as the official processors.


class DataProcessor(object):
  """Base class for data converters for sequence classification data sets."""

  def get_train_examples(self, data_dir):
    """Gets a collection of `InputExample`s for the train set."""
    raise NotImplementedError()

  def get_dev_examples(self, data_dir):
    """Gets a collection of `InputExample`s for the dev set."""
    raise NotImplementedError()

  def get_test_examples(self, data_dir):
    """Gets a collection of `InputExample`s for prediction."""
    raise NotImplementedError()

  def get_labels(self):
    """Gets the list of labels for this data set."""
    raise NotImplementedError()

  @classmethod
  def _read_tsv(cls, input_file, quotechar=None):
    """Reads a tab separated value file.

    Args:
      input_file: path (any tf.io.gfile path).
      quotechar: csv quote character; None (the default) keeps quotes as text.

    Returns:
      list of rows, each a list of str fields (the header row included).
    """
    with tf.io.gfile.GFile(input_file, "r") as f:
      return list(csv.reader(f, delimiter="\t", quotechar=quotechar))


class XnliProcessor(DataProcessor):
  """Processor for the XNLI data set (XNLI-MT 1.0 training files, XNLI 1.0 dev/test).

  data_dir holds multinli/multinli.train.<language>.tsv (premise, hypo, label; "contradictory"
  is renamed "contradiction") and xnli.dev.tsv / xnli.test.tsv (all languages; the rows of
  `language` are kept: column 0 language, 1 gold label, 6 sentence1, 7 sentence2).
  """

  def __init__(self):
    self.language = "zh"

  def get_train_examples(self, data_dir):
    """See base class."""
    lines = self._read_tsv(
        os.path.join(data_dir, "multinli", "multinli.train.%s.tsv" % self.language))
    examples = []
    for (i, line) in enumerate(lines):
      if i == 0:
        continue  # header
      guid = "train-%d" % i
      text_a = tokenization.convert_to_unicode(line[0])
      text_b = tokenization.convert_to_unicode(line[1])
      label = tokenization.convert_to_unicode(line[2])
      # The MT training files spell the class differently from the dev set.
      if label == tokenization.convert_to_unicode("contradictory"):
        label = tokenization.convert_to_unicode("contradiction")
      examples.append(InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
    return examples

  def get_dev_examples(self, data_dir):
    """See base class."""
    return self._xnli_examples(os.path.join(data_dir, "xnli.dev.tsv"), "dev")

  def get_test_examples(self, data_dir):
    """The xnli.test.tsv rows of `language` (an addition: the official class has none)."""
    return self._xnli_examples(os.path.join(data_dir, "xnli.test.tsv"), "test")

  def get_labels(self):
    """See base class."""
    return ["contradiction", "entailment", "neutral"]

  def _xnli_examples(self, path, set_type):
    """Examples of one language from an XNLI 1.0 file (guid = "<set>-<line index>")."""
    lines = self._read_tsv(path)
    examples = []
    for (i, line) in enumerate(lines):
      if i == 0:
        continue
      guid = "%s-%d" % (set_type, i)
      language = tokenization.convert_to_unicode(line[0])
      if language != tokenization.convert_to_unicode(self.language):
        continue
      text_a = tokenization.convert_to_unicode(line[6])
      text_b = tokenization.convert_to_unicode(line[7])
      label = tokenization.convert_to_unicode(line[1])
      examples.append(InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
    return examples


class MnliProcessor(DataProcessor):
  """Processor for the MultiNLI data set (GLUE version)."""

  def get_train_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")

  def get_dev_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "dev_matched.tsv")),
                                 "dev_matched")

  def get_test_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "test_matched.tsv")),
                                 "test")

  def get_labels(self):
    """See base class."""
    return ["contradiction", "entailment", "neutral"]

  def _create_examples(self, lines, set_type):
    """Creates examples for the training and dev sets (guid from the index column)."""
    examples = []
    for (i, line) in enumerate(lines):
      if i == 0:
        continue
      guid = "%s-%s" % (set_type, tokenization.convert_to_unicode(line[0]))
      text_a = tokenization.convert_to_unicode(line[8])
      text_b = tokenization.convert_to_unicode(line[9])
      if set_type == "test":
        label = "contradiction"  # A dummy: test files have no labels.
      else:
        label = tokenization.convert_to_unicode(line[-1])
      examples.append(InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
    return examples


class MrpcProcessor(DataProcessor):
  """Processor for the MRPC data set (GLUE version)."""

  def get_train_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")

  def get_dev_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

  def get_test_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "test.tsv")), "test")

  def get_labels(self):
    """See base class."""
    return ["0", "1"]

  def _create_examples(self, lines, set_type):
    """Creates examples for the training and dev sets."""
    examples = []
    for (i, line) in enumerate(lines):
      if i == 0:
        continue
      guid = "%s-%s" % (set_type, i)
      text_a = tokenization.convert_to_unicode(line[3])
      text_b = tokenization.convert_to_unicode(line[4])
      if set_type == "test":
        label = "0"
      else:
        label = tokenization.convert_to_unicode(line[0])
      examples.append(InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label))
    return examples


class ColaProcessor(DataProcessor):
  """Processor for the CoLA data set (GLUE version)."""

  def get_train_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")

  def get_dev_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

  def get_test_examples(self, data_dir):
    """See base class."""
    return self._create_examples(self._read_tsv(os.path.join(data_dir, "test.tsv")), "test")

  def get_labels(self):
    """See base class."""
    return ["0", "1"]

  def _create_examples(self, lines, set_type):
    """Creates examples for the training and dev sets."""
    examples = []
    for (i, line) in enumerate(lines):
      # Only the test set has a header.
      if set_type == "test" and i == 0:
        continue
      guid = "%s-%s" % (set_type, i)
      if set_type == "test":
        text_a = tokenization.convert_to_unicode(line[1])
        label = "0"
      else:
        text_a = tokenization.convert_to_unicode(line[3])
        label = tokenization.convert_to_unicode(line[1])
      examples.append(InputExample(guid=guid, text_a=text_a, text_b=None, label=label))
    return examples


# A file layout. num_columns: exact number of tab-separated fields a row must have (None: as many
# as the header, or the first row, has). text_a/text_b/label/index: column indices (negative
# counts from the end) or None. header: the expected header fields (documentation and error
# messages; checked by count).
Layout = collections.namedtuple(
    "Layout", ["has_header", "num_columns", "text_a", "text_b", "label", "index", "header"])


class TaskFile(collections.namedtuple("TaskFile", ["file_name", "cache_name", "name", "layout"])):
  """One file of a task: file_name in data_dir, cache_name of its feature TFRecord, and a name
  (metric prefix for dev files, submission file name for test files)."""


class Task(object):
  """A classification or regression task: its files, labels, metrics and submission names."""

  def __init__(self, name, labels, train, dev, test, metrics, is_regression=False,
               reader_options=None, processor=None, label_values=None, is_multilabel=False,
               label_separator=","):
    """Constructs a Task.

    Args:
      name: task name (lower case, e.g. "sst-2").
      labels: list of label strings (class id = position); None for regression.
      train: TaskFile of the training set.
      dev: list of TaskFile (MNLI has matched and mismatched).
      test: list of TaskFile, `name` being the submission file name.
      metrics: metric names of glue_metrics.compute_metrics.
      is_regression: single-output MSE head.
      reader_options: dict of options that change how files are read (part of the cache key).
      processor: a DataProcessor that gives the examples (its TaskFiles have file_name None),
        or None to read the files with read_examples.
      label_values: the processor's labels as get_labels() returns them (they may be ints,
        as in the TF-Hub notebook); `labels` holds their strings. None: `labels`.
      is_multilabel: each example has a set of labels (a tuple of label strings): a sigmoid
        per label with binary cross-entropy.
      label_separator: multi-label tasks: what joins the labels in a file's label column.
    """
    self.name = name
    self.labels = labels
    self.train = train
    self.dev = dev
    self.test = test
    self.metrics = metrics
    self.is_regression = is_regression
    self.reader_options = reader_options or {}
    self.processor = processor
    self.label_values = label_values
    self.is_multilabel = is_multilabel
    self.label_separator = label_separator

  @property
  def num_labels(self):
    return 1 if self.is_regression else len(self.labels)

  @property
  def main_metric(self):
    """The metric early stopping and --keep_best follow (the first of `metrics`)."""
    return self.metrics[0]

  @property
  def label_map(self):
    """{label as the examples carry it: class id} (a MultiLabelMap for multi-label tasks), or
    None for regression."""
    if self.is_regression:
      return None
    values = self.label_values if self.label_values is not None else self.labels
    if self.is_multilabel:
      return MultiLabelMap((label, i) for i, label in enumerate(values))
    return {label: i for i, label in enumerate(values)}


class MultiLabelMap(dict):
  """{label: position} of a multi-label task: the conversion turns an example's labels (a tuple
  of label strings) into a multi-hot label_id [num_labels] instead of one class id."""


def _glue_task(name, labels, train_layout, dev_layout, test_layout, metrics, submission,
               is_regression=False):
  assert tuple(metrics) == glue_metrics.TASK_METRICS[name], name
  return Task(
      name, labels,
      train=TaskFile("train.tsv", "train", "train", train_layout),
      dev=[TaskFile("dev.tsv", "eval", "", dev_layout)],
      test=[TaskFile("test.tsv", "predict", submission, test_layout)],
      metrics=metrics, is_regression=is_regression)


_BINARY = ["0", "1"]
_NLI2 = ["entailment", "not_entailment"]
_MNLI_LABELS = ["contradiction", "entailment", "neutral"]
_MNLI_HEADER = ("index promptID pairID genre sentence1_binary_parse sentence2_binary_parse "
                "sentence1_parse sentence2_parse sentence1 sentence2").split()


def _make_glue_tasks():
  """The nine GLUE tasks, laid out as the GLUE benchmark distributes them."""
  tasks = {}
  cola_rows = Layout(False, 4, 3, None, 1, None, ["source", "label", "mark", "sentence"])
  tasks["cola"] = _glue_task(
      "cola", _BINARY, cola_rows, cola_rows,
      Layout(True, 2, 1, None, None, 0, ["index", "sentence"]), ("mcc",), "CoLA.tsv")
  sst_rows = Layout(True, 2, 0, None, 1, None, ["sentence", "label"])
  tasks["sst-2"] = _glue_task(
      "sst-2", _BINARY, sst_rows, sst_rows,
      Layout(True, 2, 1, None, None, 0, ["index", "sentence"]), ("accuracy",), "SST-2.tsv")
  mrpc_rows = Layout(True, 5, 3, 4, 0, None,
                     ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"])
  tasks["mrpc"] = _glue_task(
      "mrpc", _BINARY, mrpc_rows, mrpc_rows,
      Layout(True, 5, 3, 4, None, 0, ["index", "#1 ID", "#2 ID", "#1 String", "#2 String"]),
      ("accuracy", "f1"), "MRPC.tsv")
  sts_header = ("index genre filename year old_index source1 source2 sentence1 sentence2"
                .split())
  sts_rows = Layout(True, 10, 7, 8, 9, None, sts_header + ["score"])
  tasks["sts-b"] = _glue_task(
      "sts-b", None, sts_rows, sts_rows, Layout(True, 9, 7, 8, None, 0, sts_header),
      ("pearson", "spearman"), "STS-B.tsv", is_regression=True)
  qqp_rows = Layout(True, 6, 3, 4, 5, None,
                    ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"])
  tasks["qqp"] = _glue_task(
      "qqp", _BINARY, qqp_rows, qqp_rows,
      Layout(True, 3, 1, 2, None, 0, ["id", "question1", "question2"]),
      ("accuracy", "f1"), "QQP.tsv")
  mnli_train = Layout(True, 12, 8, 9, -1, None, _MNLI_HEADER + ["label1", "gold_label"])
  mnli_dev = Layout(True, 16, 8, 9, -1, None,
                    _MNLI_HEADER + ["label1", "label2", "label3", "label4", "label5",
                                    "gold_label"])
  mnli_test = Layout(True, 10, 8, 9, None, 0, _MNLI_HEADER)
  tasks["mnli"] = Task(
      "mnli", _MNLI_LABELS,
      train=TaskFile("train.tsv", "train", "train", mnli_train),
      dev=[TaskFile("dev_matched.tsv", "eval", "", mnli_dev),
           TaskFile("dev_mismatched.tsv", "eval_mismatched", "mismatched", mnli_dev)],
      test=[TaskFile("test_matched.tsv", "predict", "MNLI-m.tsv", mnli_test),
            TaskFile("test_mismatched.tsv", "predict_mismatched", "MNLI-mm.tsv", mnli_test)],
      metrics=("accuracy",))
  for name, labels, submission, columns in (
      ("qnli", _NLI2, "QNLI.tsv", ["index", "question", "sentence"]),
      ("rte", _NLI2, "RTE.tsv", ["index", "sentence1", "sentence2"]),
      ("wnli", _BINARY, "WNLI.tsv", ["index", "sentence1", "sentence2"])):
    rows = Layout(True, 4, 1, 2, 3, None, columns + ["label"])
    tasks[name] = _glue_task(name, labels, rows, rows, Layout(True, 3, 1, 2, None, 0, columns),
                             ("accuracy",), submission)
  return tasks


GLUE_TASKS = _make_glue_tasks()
# name -> DataProcessor class (or a zero-argument factory); register_processor adds users' own.
_PROCESSORS = {"xnli": XnliProcessor}
TASK_NAMES = sorted(list(GLUE_TASKS) + ["xnli"]) + ["tsv"]
_TASK_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b"}


def normalize_task_name(task_name):
  """Lower-cases a task name and maps aliases (sst2 -> sst-2, stsb -> sts-b)."""
  name = (task_name or "").strip().lower()
  return _TASK_ALIASES.get(name, name)


def make_tsv_task(text_a_column, text_b_column=None, label_column=None, has_header=True,
                  task_type="classification", label_list=None, label_separator=","):
  """A task for users' own TSV files: data_dir/{train,dev,test}.tsv with chosen columns.

  Args:
    text_a_column: column of the first text: 0-based index, or a header name.
    text_b_column: optional column of the second text.
    label_column: column of the label (optional in test.tsv).
    has_header: the first line of each file is a header.
    task_type: "classification", "regression" or "multilabel" (the label column holds the
      labels joined by label_separator, possibly none).
    label_list: list of label strings, or None to take the sorted labels of train.tsv
      (resolved by resolve_tsv_labels).
    label_separator: multilabel: what joins the labels of a row.

  Returns:
    A Task named "tsv" (labels may still be None for classification).
  """
  if text_a_column is None or str(text_a_column).strip() == "":
    common.fail("--text_a_column is required with --task_name=tsv")
  if label_column is None or str(label_column).strip() == "":
    common.fail("--label_column is required with --task_name=tsv")
  columns = {"text_a": text_a_column, "text_b": text_b_column, "label": label_column}
  for key, value in columns.items():
    if value is not None and not has_header and not _is_int(value):
      common.fail("--%s_column=%s: a column name needs --has_header; give a 0-based index" %
                  (key, value))
  layout = Layout(has_header, None, text_a_column, text_b_column, label_column, None, None)
  test_layout = layout._replace(label=None)
  is_regression = task_type == "regression"
  is_multilabel = task_type == "multilabel"
  options = {"text_a_column": str(text_a_column), "text_b_column": text_b_column,
             "label_column": str(label_column), "has_header": bool(has_header),
             "task_type": task_type}
  if is_multilabel:
    if not label_separator:
      common.fail("--label_separator must not be empty")
    options["label_separator"] = label_separator
    metrics = glue_metrics.MULTILABEL_METRICS
  elif is_regression:
    metrics = ("pearson", "spearman")
  else:
    metrics = ("accuracy",)
  return Task(
      "tsv", None if is_regression else label_list,
      train=TaskFile("train.tsv", "train", "train", layout),
      dev=[TaskFile("dev.tsv", "eval", "", layout)],
      test=[TaskFile("test.tsv", "predict", "predictions.tsv", test_layout)],
      metrics=metrics, is_regression=is_regression, reader_options=options,
      is_multilabel=is_multilabel, label_separator=label_separator)


def register_processor(name, processor_cls):
  """Makes `--task_name=name` run a DataProcessor (for users' scripts that then run main()).

  A registered name takes precedence over a built-in task of the same name.

  Args:
    name: task name (case-insensitive).
    processor_cls: a DataProcessor subclass, or any zero-argument callable returning an object
      with get_train_examples / get_dev_examples / get_test_examples / get_labels (or such an
      object itself).

  Returns:
    processor_cls.
  """
  key = normalize_task_name(name)
  if not key:
    raise ValueError("register_processor: empty task name")
  if not callable(processor_cls) and not hasattr(processor_cls, "get_labels"):
    raise TypeError("register_processor(%r, ...): expected a DataProcessor class, got %r" %
                    (name, processor_cls))
  _PROCESSORS[key] = processor_cls
  return processor_cls


def load_processor_class(spec):
  """Imports the class named by --processor=MODULE:CLASS (or PATH.py:CLASS).

  Args:
    spec: "module.path:ClassName" (module imported from the current directory or PYTHONPATH)
      or "some/dir/file.py:ClassName".

  Returns:
    The class (or factory) object.
  """
  module_name, sep, attr = (spec or "").rpartition(":")
  if not sep or not module_name or not attr:
    common.fail("--processor=%s: expected MODULE:CLASS, e.g. my_processors:MyProcessor" % spec)
  try:
    if module_name.endswith(".py"):
      if not os.path.isfile(module_name):
        common.fail("--processor=%s: no file %s" % (spec, module_name))
      unique = "_user_processor_%s" % hashlib.sha1(
          os.path.abspath(module_name).encode("utf-8")).hexdigest()[:12]
      module_spec = importlib.util.spec_from_file_location(unique, module_name)
      module = importlib.util.module_from_spec(module_spec)
      sys.modules[unique] = module
      module_spec.loader.exec_module(module)
    else:
      # A script's sys.path starts with its own directory, not the current one the user's
      # module sits in.
      if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
      module = importlib.import_module(module_name)
  except ImportError as e:
    common.fail("--processor=%s: cannot import %s: %s" % (spec, module_name, e))
  if not hasattr(module, attr):
    common.fail("--processor=%s: module %s has no %s" % (spec, module_name, attr))
  return getattr(module, attr)


def make_processor_task(name, processor):
  """A classification Task whose examples come from a DataProcessor.

  Args:
    name: task name (logs, cache keys).
    processor: DataProcessor instance.

  Returns:
    Task with processor set, labels = the strings of processor.get_labels() and accuracy as
    its metric.
  """
  try:
    values = list(processor.get_labels())
  except NotImplementedError:
    common.fail("--task_name=%s: %s has no get_labels()" % (name, type(processor).__name__))
  labels = [tokenization.printable_text(v) if isinstance(v, bytes) else str(v)
            for v in values]
  if len(labels) < 2 or len(set(labels)) != len(labels):
    common.fail("--task_name=%s: %s.get_labels() must give at least two distinct labels, got "
                "%s" % (name, type(processor).__name__, values))
  options = {"processor": "%s.%s" % (type(processor).__module__,
                                     type(processor).__name__)}
  if hasattr(processor, "language"):
    options["language"] = str(processor.language)
  return Task(
      name, labels,
      train=TaskFile(None, "train", "train", None),
      dev=[TaskFile(None, "eval", "", None)],
      test=[TaskFile(None, "predict", "test_predictions.tsv", None)],
      metrics=("accuracy",), reader_options=options, processor=processor,
      label_values=values)


def _instantiate(processor_cls):
  """The processor object of a registered class / factory (an instance is used as is)."""
  return processor_cls() if callable(processor_cls) else processor_cls


def get_task(task_name, flag_values=None):
  """Returns the Task for --task_name (the tsv task takes its columns from flag_values).

  Args:
    task_name: a GLUE task, "xnli", "tsv", or a name given to register_processor.
    flag_values: FLAGS (tsv columns, --processor, --xnli_language), or None.

  Returns:
    Task.
  """
  fv = flag_values
  processor_spec = getattr(fv, "processor", None) if fv is not None else None
  if processor_spec:
    processor = _instantiate(load_processor_class(processor_spec))
    name = (task_name or "").strip().lower() or type(processor).__name__.lower()
    return make_processor_task(name, processor)
  name = normalize_task_name(task_name)
  if name in _PROCESSORS:
    processor = _instantiate(_PROCESSORS[name])
    if name == "xnli" and _PROCESSORS[name] is XnliProcessor:
      processor.language = getattr(fv, "xnli_language", None) or processor.language
    return make_processor_task(name, processor)
  if name in GLUE_TASKS:
    return GLUE_TASKS[name]
  if name == "tsv":
    label_list = None
    if fv.label_list:
      label_list = [x.strip() for x in fv.label_list.split(",") if x.strip()]
      if len(set(label_list)) != len(label_list) or len(label_list) < 2:
        common.fail("--label_list=%s: needs at least two distinct labels" % fv.label_list)
    return make_tsv_task(fv.text_a_column, fv.text_b_column, fv.label_column, fv.has_header,
                         fv.task_type, label_list,
                         label_separator=getattr(fv, "label_separator", ","))
  common.fail("--task_name=%s: unknown task (use one of %s, or --processor=MODULE:CLASS)" %
              (task_name, ", ".join(sorted(set(TASK_NAMES) | set(_PROCESSORS)))))


def _is_int(value):
  try:
    int(str(value))
    return True
  except ValueError:
    return False


class ReadStats(object):
  """Counts of what a file reader kept and skipped."""

  def __init__(self, path):
    self.path = path
    self.rows = 0
    self.examples = 0
    self.skipped_columns = 0
    self.blank = 0
    self.first_skipped_lines = []

  def log(self):
    tf1.logging.info(
        "%s: %d examples from %d rows; skipped %d malformed row(s) (wrong number of columns)%s"
        "%s", self.path, self.examples, self.rows, self.skipped_columns,
        (", first at line(s) %s" % ", ".join(str(x) for x in self.first_skipped_lines))
        if self.first_skipped_lines else "",
        ", %d blank line(s) ignored" % self.blank if self.blank else "")


def read_tsv_lines(path):
  """Yields (line_number, fields) of a tab-separated file, fields split on tabs, no quoting.

  Lines end at "\\n" only (a trailing "\\r" is dropped); bytes that are not UTF-8 are dropped, as
  tokenization.convert_to_unicode does.

  Args:
    path: file path (any tf.io.gfile path).

  Yields:
    (1-based line number, list of str fields); blank lines are yielded with fields None.
  """
  with tf.io.gfile.GFile(path, "rb") as f:
    # Streamed: MNLI's train.tsv is hundreds of MB.
    for number, raw in enumerate(f, 1):
      if raw.endswith(b"\n"):
        raw = raw[:-1]
      if raw.endswith(b"\r"):
        raw = raw[:-1]
      if not raw.strip():
        yield number, None
        continue
      yield number, tokenization.convert_to_unicode(raw).split("\t")


def _resolve_column(column, header, path, what):
  """Turns a column (int index, numeric string, or header name) into an index."""
  if column is None:
    return None
  if isinstance(column, int):
    return column
  if _is_int(column):
    return int(column)
  if header is None:
    common.fail("--%s_column=%s: %s has no header to look the name up in" % (what, column, path))
  if column not in header:
    common.fail("--%s_column=%s: %s has no such column (header: %s)" %
                (what, column, path, ", ".join(header)))
  return header.index(column)


def read_examples(task, task_file, data_dir, split, check_labels=True):
  """Reads one file of a task into InputExamples.

  Rows with the wrong number of columns (e.g. QQP's broken lines) are skipped and counted;
  a label outside the task's label set is a one-line error naming the file and line.

  Args:
    task: Task.
    task_file: TaskFile (its layout says which columns hold what).
    data_dir: directory holding the file.
    split: "train", "dev" or "test" (guid prefix; test files have no labels).
    check_labels: fail on a label outside task.labels (False: keep any label string).

  Returns:
    (list of InputExample, ReadStats).
  """
  path = os.path.join(data_dir, task_file.file_name)
  layout = task_file.layout
  stats = ReadStats(path)
  examples = []
  labels = task.labels
  label_set = set(labels) if (check_labels and labels is not None) else None
  header = None
  num_columns = layout.num_columns
  cols = None
  for line_number, fields in read_tsv_lines(path):
    if fields is None:
      stats.blank += 1
      continue
    if layout.has_header and header is None:
      header = fields
      if num_columns is not None and len(header) != num_columns:
        common.fail(
            "%s:%d: header has %d column(s) (%s), but the %s layout of %s has %d (%s)" %
            (path, line_number, len(header), " | ".join(header[:12]), task.name.upper(),
             task_file.file_name, num_columns, " | ".join(layout.header or [])))
      if num_columns is None:
        num_columns = len(header)
      continue
    if num_columns is None:
      num_columns = len(fields)
    if cols is None:
      cols = {}
      for what in ("text_a", "text_b", "label", "index"):
        index = _resolve_column(getattr(layout, what), header, path, what)
        if index is not None and not -num_columns <= index < num_columns:
          if what == "label" and split == "test":
            index = None  # A user's test file without labels.
          else:
            common.fail("--%s_column=%s: %s has only %d columns" %
                        (what, getattr(layout, what), path, num_columns))
        cols[what] = index
    stats.rows += 1
    if len(fields) != num_columns:
      stats.skipped_columns += 1
      if len(stats.first_skipped_lines) < 5:
        stats.first_skipped_lines.append(line_number)
      continue
    text_a = fields[cols["text_a"]]
    text_b = fields[cols["text_b"]] if cols["text_b"] is not None else None
    label = None
    if split != "test":
      raw_label = fields[cols["label"]].strip()
      if task.is_regression:
        try:
          label = float(raw_label)
        except ValueError:
          common.fail("%s:%d: label %r is not a number (%s is a regression task)" %
                      (path, line_number, raw_label, task.name))
        if not np.isfinite(label):
          common.fail("%s:%d: label %r is not finite" % (path, line_number, raw_label))
      elif task.is_multilabel:
        label = split_multilabel(raw_label, task.label_separator)
        for one in label:
          if label_set is not None and one not in label_set:
            common.fail("%s:%d: label %r is not one of the %s labels (%s)" %
                        (path, line_number, one, task.name, ", ".join(labels)))
      else:
        if label_set is not None and raw_label not in label_set:
          common.fail("%s:%d: label %r is not one of the %s labels (%s)" %
                      (path, line_number, raw_label, task.name, ", ".join(labels)))
        label = raw_label
    index = fields[cols["index"]].strip() if cols["index"] is not None else None
    if index is None:
      index = str(len(examples))
    guid = "%s-%d" % (split, len(examples))
    examples.append(InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label,
                                 index=index))
  stats.examples = len(examples)
  stats.log()
  return examples, stats


def split_multilabel(raw_label, separator=","):
  """The labels of a multi-label row: split on `separator`, stripped, empty parts dropped, the
  first occurrence of a repeated label kept.

  Args:
    raw_label: the label field ("" for an example without labels).
    separator: what joins the labels.

  Returns:
    tuple of label strings.
  """
  labels = []
  for part in raw_label.split(separator):
    part = part.strip()
    if part and part not in labels:
      labels.append(part)
  return tuple(labels)


_PROCESSOR_METHODS = {"train": "get_train_examples", "dev": "get_dev_examples",
                      "test": "get_test_examples"}
_SPLIT_MODES = {"train": "--do_train", "dev": "--do_eval", "test": "--do_predict"}


def task_examples(task, task_file, data_dir, split):
  """The examples of one split: read_examples, or the task's DataProcessor.

  Args:
    task: Task.
    task_file: TaskFile of the split (file_name None for a processor task).
    data_dir: --data_dir.
    split: "train", "dev" or "test".

  Returns:
    list of InputExample.
  """
  if task.processor is None:
    return read_examples(task, task_file, data_dir, split)[0]
  method = _PROCESSOR_METHODS[split]
  what = "%s.%s(%s)" % (type(task.processor).__name__, method, data_dir)
  try:
    examples = getattr(task.processor, method)(data_dir)
  except NotImplementedError:
    common.fail("--task_name=%s: %s is not implemented (needed by %s)" %
                (task.name, what, _SPLIT_MODES[split]))
  except (IOError, OSError, tf.errors.OpError) as e:
    # A missing or unreadable file is one line naming it, not a traceback.
    common.fail("--data_dir=%s: %s failed: %s" % (data_dir, what, str(e).splitlines()[0]))
  examples = list(examples) if examples is not None else []
  tf1.logging.info("%s: %d examples", what, len(examples))
  return examples


def _split_description(task, task_file):
  """What a split is called in messages: its file name, or the processor method."""
  if task_file.file_name is not None:
    return task_file.file_name
  return "%s.%s" % (type(task.processor).__name__, _PROCESSOR_METHODS[
      "train" if task_file is task.train else "dev" if task_file in task.dev else "test"])


def collect_labels(task, data_dir):
  """The sorted set of labels in a task's train.tsv (for the tsv task without --label_list)."""
  examples, _ = read_examples(task, task.train, data_dir, "train", check_labels=False)
  if task.is_multilabel:
    return sorted(set(label for e in examples for label in e.label))
  found = sorted(set(e.label for e in examples))
  return found


def _checked_labels(labels, what):
  if labels is None or len(labels) < 2:
    common.fail("%s: a classification task needs at least two labels, found %s" %
                (what, labels))
  return labels


def resolve_tsv_labels(task, data_dir, output_dir):
  """Fills task.labels for a tsv classification task: --label_list, train.tsv, or labels.txt."""
  if task.is_regression or task.labels is not None:
    return task.labels
  train_path = os.path.join(data_dir, task.train.file_name) if data_dir else None
  if train_path and tf.io.gfile.exists(train_path):
    task.labels = _checked_labels(collect_labels(task, data_dir), train_path)
    tf1.logging.info("Labels from %s: %s", train_path, ", ".join(task.labels))
    return task.labels
  saved = os.path.join(output_dir, "labels.txt")
  if tf.io.gfile.exists(saved):
    with tf.io.gfile.GFile(saved) as f:
      task.labels = _checked_labels([x.rstrip("\n") for x in f if x.strip()], saved)
    tf1.logging.info("Labels from %s: %s", saved, ", ".join(task.labels))
    return task.labels
  common.fail("--task_name=tsv: no --label_list, no %s and no labels.txt in --output_dir=%s "
              "to take the labels from" % (train_path, output_dir))


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

  By default (main(), and export_hub.pack_inputs which packs the same way) a text_b that is
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


DocWindow = collections.namedtuple("DocWindow", ["start", "length"])


def document_windows(num_tokens, window_length, doc_stride):
  """Windows of <= window_length tokens, doc_stride apart, covering a text (as run_squad's
  make_doc_spans: the last window ends at the end of the text).

  Args:
    num_tokens: the text's number of tokens.
    window_length: tokens per window (>= 1).
    doc_stride: tokens between window starts (>= 1; a stride beyond the window length is
      capped at it, so no token is skipped).

  Returns:
    list of DocWindow(start, length); one empty window for an empty text.
  """
  if num_tokens == 0:
    return [DocWindow(0, 0)]
  windows = []
  start = 0
  while start < num_tokens:
    length = min(num_tokens - start, window_length)
    windows.append(DocWindow(start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return windows


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


def _file_signature(path):
  """Path, size and mtime of a file (None when no path)."""
  if not path:
    return None
  stat = tf.io.gfile.stat(path)
  return {"path": os.path.abspath(path) if "://" not in path else path,
          "size": int(stat.length), "mtime_ns": int(stat.mtime_nsec)}


def feature_cache_key(input_file, vocab_file, do_lower_case, max_seq_length, task, label_list,
                      spm_model_file, pad_to_multiple=1, examples_digest=None, doc_stride=None):
  """What the cached features depend on, and its hash.

  Args:
    input_file: the task file read.
    vocab_file: WordPiece vocab (None with spm_model_file).
    do_lower_case: tokenizer setting.
    max_seq_length: sequence length.
    task: Task (name and reader options).
    label_list: label strings or None.
    spm_model_file: SentencePiece model or None.
    pad_to_multiple: examples padded to a multiple of this (TPU eval/predict), 1 = none.
    examples_digest: hash of the examples themselves (DataProcessor tasks, whose files are
      unknown), or None.
    doc_stride: --long_document=window's stride, or None (truncation; not in the key, so
      caches written before windows existed stay valid).

  Returns:
    (dict of the inputs, hex sha256 of its canonical JSON).
  """
  info = collections.OrderedDict([
      ("version", FEATURE_CACHE_VERSION),
      ("input_file", _file_signature(input_file)),
      ("vocab_file", None if spm_model_file else _file_signature(vocab_file)),
      ("do_lower_case", bool(do_lower_case)),
      ("max_seq_length", int(max_seq_length)),
      ("task", task.name),
      ("reader_options", task.reader_options),
      ("label_list", list(label_list) if label_list is not None else None),
      ("spm_model_file", _file_signature(spm_model_file)),
      ("pad_to_multiple", int(pad_to_multiple)),
  ])
  if examples_digest is not None:
    info["examples_digest"] = examples_digest
  if doc_stride is not None:
    info["long_document"] = {"mode": "window", "doc_stride": int(doc_stride)}
  key = hashlib.sha256(json.dumps(info, sort_keys=True).encode("utf-8")).hexdigest()
  return info, key


def examples_digest(examples):
  """sha256 of the guids, texts and labels of a list of InputExamples."""
  h = hashlib.sha256()
  for e in examples:
    h.update(json.dumps([e.guid, e.text_a, e.text_b, e.label], default=repr).encode("utf-8"))
    h.update(b"\n")
  return h.hexdigest()


def cached_features(examples, input_file, cache_file, tokenizer, task, max_seq_length,
                    vocab_file, do_lower_case, spm_model_file, pad_to_multiple=1,
                    doc_stride=None):
  """Returns the TFRecord of `examples`' features, reusing `cache_file` when its key matches.

  The sidecar `cache_file + ".json"` holds the key and what it was computed from; it is written
  after the TFRecord, so a sidecar with a matching key means a complete file.

  Args:
    examples: list of InputExample (already read from input_file).
    input_file: the file they were read from (its size and mtime are part of the key), or
      None when a DataProcessor gave them (their digest is part of the key instead).
    cache_file: TFRecord path in output_dir.
    tokenizer: tokenization.FullTokenizer.
    task: Task.
    max_seq_length: sequence length.
    vocab_file: vocab path (key).
    do_lower_case: tokenizer setting (key).
    spm_model_file: SentencePiece model path or None (key).
    pad_to_multiple: pad the examples with PaddingInputExample to a multiple of this.
    doc_stride: --long_document=window: write every example's windows this far apart
      (file_based_convert_examples_to_windows); None: one truncated feature per example.

  Returns:
    dict with "file", "num_examples" (real), "num_padded" (examples with padding), "reused",
    "num_records" (features in the file) and "windows" (windows per padded example, or None
    without windowing).
  """
  info, key = feature_cache_key(
      input_file, vocab_file, do_lower_case, max_seq_length, task, task.labels, spm_model_file,
      pad_to_multiple, examples_digest=None if input_file else examples_digest(examples),
      doc_stride=doc_stride)
  sidecar = cache_file + ".json"
  reason = "no cached features"
  if tf.io.gfile.exists(cache_file) and tf.io.gfile.exists(sidecar):
    try:
      with tf.io.gfile.GFile(sidecar) as f:
        meta = json.load(f)
    except (ValueError, tf.errors.OpError):
      meta = {}
    if meta.get("key") == key and meta.get("num_examples") == len(examples):
      tf1.logging.info("Reusing cached features %s (%d examples, key %s)", cache_file,
                       len(examples), key[:12])
      windows = meta.get("windows")
      return dict(file=cache_file, num_examples=meta["num_examples"],
                  num_padded=meta["num_padded"], reused=True, windows=windows,
                  num_records=sum(windows) if windows else meta["num_padded"])
    old = meta.get("inputs") or {}
    changed = [name for name in info if old.get(name) != info[name]]
    reason = "inputs changed: %s" % (", ".join(changed) if changed else "example count")
  num_real = len(examples)
  padded = list(examples)
  while doc_stride is None and len(padded) % pad_to_multiple != 0:
    padded.append(PaddingInputExample())
  tf1.logging.info("Writing features to %s (%s): %d examples (%d with padding)", cache_file,
                   reason, num_real, len(padded))
  start = time.time()
  windows = None
  if doc_stride is None:
    # A label map (or None): main()'s own conversion, see _convert_single_example.
    file_based_convert_examples_to_features(padded, task.label_map, max_seq_length, tokenizer,
                                            cache_file)
  else:
    # On TPU the windows (the records) are padded to a multiple of the batch size.
    windows = file_based_convert_examples_to_windows(padded, task.label_map, max_seq_length,
                                                     tokenizer, cache_file, doc_stride,
                                                     pad_records_to_multiple=pad_to_multiple)
    tf1.logging.info("%s: %d windows for %d examples (%d longer than one window)", cache_file,
                     sum(windows), len(padded), sum(1 for n in windows if n > 1))
  num_padded = len(windows) if windows is not None else len(padded)
  meta = {"key": key, "inputs": info, "num_examples": num_real, "num_padded": num_padded,
          "seconds": round(time.time() - start, 2)}
  if windows is not None:
    meta["windows"] = windows
  common.write_json_atomic(sidecar, meta)
  return dict(file=cache_file, num_examples=num_real, num_padded=num_padded, reused=False,
              windows=windows, num_records=sum(windows) if windows else num_padded)


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder,
                                is_regression=False, seed=None, skip_batches=0,
                                multilabel_num_labels=None, shuffle_buffer=100,
                                padding="max_length"):
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
      (estimator_utils.trim_batch_to_longest): the same batches in the same order, outputs
      equal to float rounding, less compute on padding. Not for TPU (static shapes).

  Returns:
    input_fn(params) -> tf.data.Dataset of int32 feature dicts, batch params["batch_size"].
  """
  if padding not in estimator_utils.PADDING_CHOICES:
    raise ValueError("padding=%r: not one of %s" % (padding, estimator_utils.PADDING_CHOICES))
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
      if skip_batches:
        d = d.skip(skip_batches * batch_size)
    d = d.map(lambda record: estimator_utils.decode_record(record, name_to_features))
    d = d.batch(batch_size=batch_size, drop_remainder=drop_remainder)
    if padding == "longest":
      d = d.map(lambda batch: estimator_utils.trim_batch_to_longest(batch, seq_length))
    return d

  return input_fn


# ----------------------------------------------------------------------------------------------
# Model.


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                 num_labels, use_one_hot_embeddings, is_regression=False, is_multilabel=False,
                 class_weights=None, compute_dtype=None):
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
      compute_dtype=compute_dtype)

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
                     precision="fp32", fused_optimizer=False, keep_checkpoint_max=5):
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

    (total_loss, per_example_loss, logits, outputs) = create_model(
        bert_config, is_training, input_ids, input_mask, segment_ids, label_ids, num_labels,
        use_one_hot_embeddings, is_regression, is_multilabel=is_multilabel,
        class_weights=class_weights, compute_dtype=compute_dtype)

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


def dev_metrics(task, outputs, num_examples, threshold=0.5, tune_threshold=False):
  """GLUE metrics from Estimator.predict outputs on a dev set.

  Args:
    task: Task.
    outputs: list of prediction dicts (per example, padding included at the end; pooled per
      document with --long_document=window, see pool_window_outputs).
    num_examples: number of real examples (the first ones).
    threshold: multi-label: a label is predicted when its probability is >= this.
    tune_threshold: multi-label: also report the threshold of the best micro F1
      ("tuned_threshold") and the metrics at it ("tuned_<metric>").

  Returns:
    dict: metric name -> value, plus "loss" (mean per-example loss) and "num_examples"
    (multi-label: per-label "f1_<label>", micro precision / recall and "threshold" as well).
  """
  outputs = [o for o in outputs[:num_examples]]
  labels = np.array([o["label_ids"] for o in outputs])
  if task.is_multilabel:
    probabilities = np.array([o["probabilities"] for o in outputs], dtype=np.float64).reshape(
        len(outputs), task.num_labels)
    labels = labels.reshape(len(outputs), task.num_labels)
    results = glue_metrics.multilabel_metrics(probabilities >= threshold, labels, task.labels)
    results["threshold"] = float(threshold)
    if tune_threshold:
      tuned, _ = glue_metrics.best_threshold(probabilities, labels)
      for key, value in glue_metrics.multilabel_metrics(probabilities >= tuned, labels,
                                                        task.labels).items():
        results["tuned_" + key] = value
      results["tuned_threshold"] = tuned
  else:
    if task.is_regression:
      predictions = np.array([o["predictions"] for o in outputs], dtype=np.float64)
    else:
      predictions = np.array([int(np.argmax(o["probabilities"])) for o in outputs])
    results = glue_metrics.compute_metrics(task.metrics, predictions, labels)
  losses = np.array([o["per_example_loss"] for o in outputs], dtype=np.float64)
  results["loss"] = float(losses.mean()) if losses.size else 0.0
  results["num_examples"] = len(outputs)
  return results


def _log_softmax(logits):
  shifted = logits - np.max(logits)
  return shifted - np.log(np.sum(np.exp(shifted)))


def pool_window_outputs(task, outputs, windows, pooling="mean", class_weights=None):
  """Pools Estimator.predict outputs of windows into one output per document.

  A document's window logits are averaged (mean) or maxed per class (max), then turned into
  probabilities as the model does (softmax, or a sigmoid per label); a regression document's
  prediction is the mean / max of its windows'. Its loss is the model's loss of the pooled
  logits (class weights included).

  Args:
    task: Task.
    outputs: list of prediction dicts, one per window in file order (logits, label_ids,
      is_real_example; the padding windows included).
    windows: number of windows of each (padded) example, in order (cached_features).
    pooling: "mean" or "max".
    class_weights: the loss's class weights, or None.

  Returns:
    list of prediction dicts, one per example: probabilities (or predictions), logits,
    label_ids, is_real_example, per_example_loss and num_windows.
  """
  if sum(windows) != len(outputs):
    raise RuntimeError("predicted %d windows, expected %d" % (len(outputs), sum(windows)))
  pool = np.mean if pooling == "mean" else np.max
  pooled = []
  start = 0
  for count in windows:
    group = outputs[start:start + count]
    start += count
    label = group[0]["label_ids"]
    logits = pool(np.array([o["logits"] for o in group], dtype=np.float64), axis=0)
    out = {"logits": logits, "label_ids": label, "is_real_example": group[0]["is_real_example"],
           "num_windows": count}
    if task.is_regression:
      value = float(pool(np.array([o["predictions"] for o in group], dtype=np.float64)))
      out["predictions"] = value
      out["per_example_loss"] = (value - float(label)) ** 2
    elif task.is_multilabel:
      y = np.asarray(label, dtype=np.float64)
      out["probabilities"] = 1.0 / (1.0 + np.exp(-logits))
      # Binary cross-entropy with logits, stable form (tf.nn.sigmoid_cross_entropy_with_logits).
      out["per_example_loss"] = float(np.mean(
          np.maximum(logits, 0) - logits * y + np.log1p(np.exp(-np.abs(logits)))))
    else:
      log_probs = _log_softmax(logits)
      out["probabilities"] = np.exp(log_probs)
      loss = -float(log_probs[int(label)])
      if class_weights is not None:
        loss *= class_weights[int(label)]
      out["per_example_loss"] = loss
    pooled.append(out)
  return pooled


def predicted_labels(task, output, threshold=0.5):
  """Multi-label: the labels whose probability is >= threshold, in label order."""
  return [label for label, p in zip(task.labels, output["probabilities"]) if p >= threshold]


def format_prediction(task, output, threshold=0.5):
  """The submission string of one prediction: the label string, or the STS-B score (a
  multi-label task: its predicted labels joined by the task's separator)."""
  if task.is_regression:
    value = float(output["predictions"])
    if task.name == "sts-b":
      value = min(5.0, max(0.0, value))
    return "%.3f" % value
  if task.is_multilabel:
    return task.label_separator.join(predicted_labels(task, output, threshold))
  return task.labels[int(np.argmax(output["probabilities"]))]


def write_submission(path, task, examples, outputs, threshold=0.5):
  """Writes `index<TAB>prediction` lines with a header, atomically.

  The index is the example's index (the test file's index column), else its guid (examples of
  a DataProcessor). threshold: multi-label tasks (format_prediction).
  """
  with common.atomic_output(path) as writer:
    writer.write("index\tprediction\n")
    for example, output in zip(examples, outputs):
      index = getattr(example, "index", None)
      if index is None:
        index = example.guid
      writer.write("%s\t%s\n" % (index, format_prediction(task, output, threshold)))


def write_test_results(path, task, outputs):
  """Writes the official test_results.tsv: per example the class probabilities (tab-separated)."""
  with common.atomic_output(path) as writer:
    for output in outputs:
      if task.is_regression:
        writer.write("%s\n" % repr(float(output["predictions"])))
      else:
        writer.write("\t".join(repr(float(p)) for p in output["probabilities"]) + "\n")


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


def effective_padding(training=False):
  """--padding for a training or an evaluation / prediction input.

  By default evaluation and prediction batches are padded to their longest example (no dropout
  there: the same outputs to float rounding) and training batches to --max_seq_length (dropout
  masks are drawn over the batch's shape, so a shorter batch would draw other masks and a run
  would not reproduce a max_length run's numbers); on TPU always max_length (static shapes).

  Args:
    training: whether the input feeds training.

  Returns:
    "longest" or "max_length".
  """
  if FLAGS.padding:
    return FLAGS.padding
  if FLAGS.use_tpu or training:
    return "max_length"
  return "longest"


def _check_extension_flags():
  """One-line errors for the evaluation-during-training, multi-label, class-weight and
  long-document flags (those that need no task)."""
  if getattr(FLAGS, "use_tpu", False) and getattr(FLAGS, "padding", None) == "longest":
    common.fail("--padding=longest: not with --use_tpu (TPU programs need static shapes; use "
                "--padding=max_length)")
  if FLAGS.eval_every_steps < 0:
    common.fail("--eval_every_steps=%d: must be >= 0" % FLAGS.eval_every_steps)
  if FLAGS.eval_every_steps and not FLAGS.do_train:
    common.fail("--eval_every_steps=%d: evaluates during training; it needs --do_train" %
                FLAGS.eval_every_steps)
  if FLAGS.early_stopping_patience < 0:
    common.fail("--early_stopping_patience=%d: must be >= 0" % FLAGS.early_stopping_patience)
  if FLAGS.early_stopping_patience and not FLAGS.eval_every_steps:
    common.fail("--early_stopping_patience=%d: needs --eval_every_steps (the evaluations it "
                "counts)" % FLAGS.early_stopping_patience)
  if FLAGS.keep_best and FLAGS.do_train and not FLAGS.eval_every_steps:
    common.fail("--keep_best: needs --eval_every_steps with --do_train (the evaluations that "
                "pick the best checkpoint)")
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
  """One-line errors for flags that do not fit the task; returns the resolved doc_stride
  (None without --long_document=window)."""
  if FLAGS.class_weights and (task.is_regression or task.is_multilabel):
    common.fail("--class_weights=%s: only for single-label classification (task %s is %s)" %
                (FLAGS.class_weights, task.name,
                 "regression" if task.is_regression else "multi-label"))
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


def resolve_class_weights(spec, task, train_examples):
  """The loss weights of --class_weights, in label order.

  Args:
    spec: "auto", "w1,w2,..." or None / "".
    task: Task (single-label classification).
    train_examples: the training InputExamples ("auto" counts their labels), or None.

  Returns:
    list of floats (one per label), or None for no weighting.
  """
  if not spec:
    return None
  where = "--class_weights=%s" % spec
  label_map = task.label_map
  if spec.strip().lower() == "auto":
    if not train_examples:
      common.fail("%s: needs the training labels (the task's training set is missing or "
                  "empty)" % where)
    counts = [0] * len(label_map)
    for example in train_examples:
      if example.label not in label_map:
        common.fail("%s: training example %s has label %r, not one of %s" % (
            where, example.guid, example.label, ", ".join(task.labels)))
      counts[label_map[example.label]] += 1
    return auto_class_weights(counts, task.labels, where)
  try:
    weights = [float(x) for x in spec.split(",")]
  except ValueError:
    common.fail("%s: expected 'auto' or one number per label (w1,w2,...)" % where)
  if len(weights) != len(task.labels):
    common.fail("%s: %d weight(s) for the %d labels of task %s (%s)" % (
        where, len(weights), len(task.labels), task.name, ", ".join(task.labels)))
  if not all(np.isfinite(w) and w > 0 for w in weights):
    common.fail("%s: every weight must be a finite number > 0" % where)
  return weights


def auto_class_weights(counts, labels, where="--class_weights=auto"):
  """Inverse-frequency weights n / (num_classes * count), normalised to mean 1.

  Args:
    counts: number of training examples of each class.
    labels: the class names (messages).
    where: the flag, for messages.

  Returns:
    list of floats, mean 1.
  """
  counts = np.asarray(counts, dtype=np.float64)
  for label, count in zip(labels, counts):
    if count == 0:
      common.fail("%s: label %r has no training example, so it has no frequency to invert" %
                  (where, label))
  inverse = counts.sum() / (len(counts) * counts)
  return [float(w) for w in inverse / inverse.mean()]


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
  bert_config = estimator_utils.load_config(FLAGS.bert_config_file, FLAGS, FLAGS.max_seq_length)
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
  eval_weights = None
  if not FLAGS.do_train:
    # Scores of a randomly initialised model would look like a result: no trained weights is
    # one line (unless --allow_random_eval), before any work.
    eval_weights = checkpoint_utils.require_eval_weights(
        _eval_actions(), FLAGS.output_dir, FLAGS.init_checkpoint,
        model_variable_names(bert_config))
  # One job per directory: two training jobs would interleave checkpoints and overwrite each
  # other's results, and an evaluation beside a training job would score whichever
  # intermediate checkpoint happens to be the latest.
  with common.OutputDirLock(FLAGS.output_dir, "output_dir"):
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
  doc_stride = _check_task_flags(task)
  tf1.logging.info("Padding: training %s, evaluation / prediction %s%s",
                   effective_padding(training=True), effective_padding(),
                   " (--use_tpu: static shapes)" if FLAGS.use_tpu else "")
  # Before anything is written there: a checkpoint of another model (or label list) in
  # --output_dir would otherwise fail deep inside the restore, after bert_config.json and
  # labels.txt were replaced.
  resume_step = estimator_utils.check_resume(
      FLAGS.output_dir, bert_config, label_list=None if task.is_regression else task.labels,
      extra_shapes=head_shapes(task, bert_config))
  tf.io.gfile.makedirs(FLAGS.output_dir)
  cache_args = dict(tokenizer=tokenizer, task=task, max_seq_length=FLAGS.max_seq_length,
                    vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                    spm_model_file=FLAGS.spm_model_file, doc_stride=doc_stride)

  train_examples = None
  train_cache = None
  num_train_steps = None
  num_warmup_steps = None
  if FLAGS.do_train:
    train_examples = task_examples(task, task.train, FLAGS.data_dir, "train")
    if not train_examples:
      common.fail("--data_dir=%s: %s has no usable examples" %
                  (FLAGS.data_dir, _split_description(task, task.train)))
  # Every dev and test file is read (labels checked) before training: a bad label costs
  # nothing instead of the whole training run.
  dev_examples = {}
  if FLAGS.do_eval or FLAGS.eval_every_steps:
    for dev_file in task.dev:
      dev_examples[dev_file.cache_name] = task_examples(task, dev_file, FLAGS.data_dir, "dev")
      if not dev_examples[dev_file.cache_name]:
        common.fail("--data_dir=%s: %s has no usable examples" %
                    (FLAGS.data_dir, _split_description(task, dev_file)))
  test_examples = {}
  if FLAGS.do_predict:
    for test_file in task.test:
      test_examples[test_file.cache_name] = task_examples(task, test_file, FLAGS.data_dir,
                                                          "test")
  # A killed --keep_best job's temporaries (this job holds the directory's lock).
  remove_stale_best_temps(FLAGS.output_dir)
  class_weights = None
  if FLAGS.class_weights:
    weight_examples = train_examples
    if weight_examples is None and FLAGS.class_weights.strip().lower() == "auto":
      weight_examples = _training_examples_if_any(task)
    class_weights = resolve_class_weights(FLAGS.class_weights, task, weight_examples)
    tf1.logging.info("Class weights: %s", ", ".join(
        "%s=%.4f" % (label, w) for label, w in zip(task.labels, class_weights)))
  if FLAGS.do_train:
    train_cache = cached_features(train_examples, _task_file_path(task.train),
                                  os.path.join(FLAGS.output_dir, "train.tf_record"),
                                  **cache_args)
    # Every window is a training example (one per example without windowing).
    num_train_steps = int(train_cache["num_records"] / FLAGS.train_batch_size *
                          FLAGS.num_train_epochs)
    num_train_steps = max(1, num_train_steps)
    num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)

  model_fn = model_fn_builder(
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
      **estimator_utils.precision_kwargs(FLAGS))
  inference = _Inference(task, model_fn, cache_args, class_weights)

  summary = {}
  if class_weights is not None:
    for label, weight in zip(task.labels, class_weights):
      summary["class_weight_%s" % label] = weight
  if doc_stride is not None:
    summary.update(long_document="window", doc_stride=doc_stride,
                   window_pooling=FLAGS.window_pooling)
  if FLAGS.do_train:
    estimator_utils.save_config(bert_config, FLAGS.output_dir)
    if not task.is_regression:
      with common.atomic_output(os.path.join(FLAGS.output_dir, "labels.txt")) as f:
        f.write("".join(label + "\n" for label in task.labels))
    tf1.logging.info("***** Running training *****")
    tf1.logging.info("  Num examples = %d%s", train_cache["num_examples"],
                     " (%d windows)" % train_cache["num_records"] if doc_stride else "")
    tf1.logging.info("  Batch size = %d", FLAGS.train_batch_size)
    tf1.logging.info("  Num steps = %d (warm-up %d)", num_train_steps, num_warmup_steps)
    start = time.time()
    if FLAGS.eval_every_steps:
      summary.update(_train_with_evaluation(task, model_fn, train_cache, num_train_steps,
                                            resume_step, inference,
                                            dev_examples.get(task.dev[0].cache_name)))
    else:
      estimator = estimator_utils.make_estimator(
          model_fn, FLAGS, FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.eval_batch_size,
          FLAGS.predict_batch_size, supported_flags=SUPPORTED_MODEL_FN_FLAGS)
      train_input_fn = file_based_input_fn_builder(
          input_file=train_cache["file"], seq_length=FLAGS.max_seq_length, is_training=True,
          drop_remainder=True, is_regression=task.is_regression, seed=FLAGS.seed,
          skip_batches=estimator_utils.resume_skip_batches(resume_step, FLAGS),
          multilabel_num_labels=task.num_labels if task.is_multilabel else None,
          shuffle_buffer=train_shuffle_buffer(train_cache),
          padding=effective_padding(training=True))
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
      summary["num_train_steps"] = num_train_steps
    summary["train_seconds"] = round(time.time() - start, 1)

  # The checkpoint that --do_eval scores and --do_predict / --export_dir use: the best one
  # with --keep_best (when there is one), else the latest.
  scored_checkpoint, scored = tf1.train.latest_checkpoint(FLAGS.output_dir), "last"
  best = read_best_checkpoint(FLAGS.output_dir) if FLAGS.keep_best else None
  if best is not None:
    scored_checkpoint, scored = best["path"], "best"
    tf1.logging.info("--keep_best: using the best checkpoint %s (step %d, %s = %.6g)",
                     best["path"], best["step"], best["metric"], best["score"])
  elif FLAGS.keep_best:
    tf1.logging.warning("--keep_best: no best checkpoint in %s/%s; using the latest",
                        FLAGS.output_dir, BEST_DIR)
  # Which weights every result below comes from: the scored checkpoint; without one (no
  # training, nothing in --output_dir) the --init_checkpoint the model starts from, or None.
  record = checkpoint_utils.checkpoint_record(scored_checkpoint or eval_weights)

  threshold = FLAGS.multilabel_threshold
  if FLAGS.do_eval:
    # Dev sets go through Estimator.predict (batch --eval_batch_size) and the metrics are
    # computed exactly in Python; on TPU the set is padded so no example is dropped.
    results = {}
    for dev_file in task.dev:
      examples = dev_examples[dev_file.cache_name]
      start = time.time()
      metrics = inference.evaluate(dev_file, examples, scored_checkpoint)
      tf1.logging.info("  %s: %d examples in %.1f s", _split_description(task, dev_file),
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
      results["scored_step"] = _checkpoint_step(scored_checkpoint)
    if best is not None:
      results.update(best_step=best["step"], best_score=best["score"],
                     main_metric=best["metric"])
    results.update(checkpoint=record["checkpoint"], checkpoint_step=record["global_step"])
    results.update(summary)
    # A signal during evaluation: no results file, so the job does not look finished.
    common.STOP_SIGNALS.exit_if_stopped()
    if FLAGS.tune_threshold:
      threshold = results["eval_tuned_threshold"]
      common.write_json_atomic(os.path.join(FLAGS.output_dir, THRESHOLD_FILE), {
          "threshold": threshold, "micro_f1": results["eval_tuned_micro_f1"],
          "checkpoint_step": results.get("scored_step"), "scored_checkpoint": scored})
    estimator_utils.write_eval_results(FLAGS.output_dir, results)
  elif FLAGS.tune_threshold and (FLAGS.do_predict or FLAGS.export_dir):
    threshold = _saved_threshold(scored_checkpoint)

  if FLAGS.do_predict:
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


def _checkpoint_step(checkpoint):
  """The global step stored in a checkpoint (None when it has none)."""
  try:
    return int(tf1.train.load_variable(checkpoint, "global_step"))
  except (tf.errors.NotFoundError, ValueError):
    return None


THRESHOLD_FILE = "threshold.json"


def _saved_threshold(checkpoint):
  """--tune_threshold without --do_eval: the threshold tuned for this checkpoint earlier."""
  path = os.path.join(FLAGS.output_dir, THRESHOLD_FILE)
  step = _checkpoint_step(checkpoint) if checkpoint else None
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
# Evaluation during training: history, early stopping, the best checkpoint.


HISTORY_FILE = "eval_history.jsonl"
HISTORY_SUMMARY_DIR = "eval_history"
BEST_DIR = "best"
BEST_FILE = "best.json"


class EvalHistory(object):
  """output_dir/eval_history.jsonl: one JSON line per evaluation during training.

  Each line: {"step", "metric" (the task's main metric), "score" (its value), "metrics" (all
  dev metrics), "best_step", "best_score", "evals_without_improvement"}. The file is rewritten
  whole and atomically on every evaluation, one line per step: a rerun after a kill keeps the
  lines of the steps its checkpoints reached and never repeats a step.
  """

  def __init__(self, output_dir, metric, max_step):
    """Loads the history of a job resumed at max_step.

    Args:
      output_dir: the job's --output_dir.
      metric: the main metric (higher is better).
      max_step: the step of the checkpoint the job resumes from (0: a new job). Lines of later
        steps belong to a model that is gone and are dropped.
    """
    self.path = os.path.join(output_dir, HISTORY_FILE)
    self.metric = metric
    by_step = {}
    dropped = 0
    if tf.io.gfile.exists(self.path):
      with tf.io.gfile.GFile(self.path) as f:
        for number, line in enumerate(f, 1):
          if not line.strip():
            continue
          try:
            entry = json.loads(line)
            step = int(entry["step"])
          except (ValueError, KeyError, TypeError):
            tf1.logging.warning("%s:%d: not a history line; dropped", self.path, number)
            dropped += 1
            continue
          if step > max_step:
            dropped += 1
            continue
          by_step[step] = entry
    self.entries = [by_step[step] for step in sorted(by_step)]
    if dropped:
      tf1.logging.warning("%s: dropped %d line(s) beyond the checkpoint of step %d", self.path,
                          dropped, max_step)
      self._write()
    elif self.entries:
      tf1.logging.info("%s: %d evaluation(s) so far, the last at step %d", self.path,
                       len(self.entries), self.entries[-1]["step"])

  def has(self, step):
    return any(entry["step"] == step for entry in self.entries)

  def _score(self, entry):
    score = entry.get("score") if entry.get("metric") == self.metric else None
    if score is None:
      score = entry.get("metrics", {}).get(self.metric)
    return float(score) if score is not None else float("-inf")

  def best(self):
    """The entry of the best score (the earliest of equal ones), or None."""
    best = None
    for entry in self.entries:
      if best is None or self._score(entry) > self._score(best):
        best = entry
    return best

  def evals_without_improvement(self):
    """Evaluations after the best one."""
    best = self.best()
    return 0 if best is None else sum(1 for e in self.entries if e["step"] > best["step"])

  def make_entry(self, step, metrics):
    """The line of an evaluation at `step` (not yet added): best and patience included."""
    entry = {"step": int(step), "metric": self.metric,
             "score": _plain(metrics.get(self.metric)),
             "metrics": {k: _plain(v) for k, v in sorted(metrics.items())}}
    previous = self.best()
    improved = previous is None or self._score(entry) > self._score(previous)
    best = entry if improved else previous
    entry["best_step"] = best["step"]
    entry["best_score"] = best["score"]
    entry["evals_without_improvement"] = 0 if improved else (
        sum(1 for e in self.entries if e["step"] > previous["step"]) + 1)
    entry["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return entry

  def add(self, entry):
    """Adds an entry (replacing one of the same step) and rewrites the file atomically."""
    self.entries = [e for e in self.entries if e["step"] != entry["step"]] + [entry]
    self.entries.sort(key=lambda e: e["step"])
    self._write()

  def _write(self):
    with common.atomic_output(self.path) as f:
      for entry in self.entries:
        f.write(json.dumps(entry, sort_keys=True) + "\n")


def _plain(value):
  """A JSON-friendly Python number (NumPy scalars converted)."""
  return value.item() if hasattr(value, "item") else value


def read_best_checkpoint(output_dir):
  """output_dir/best/best.json with "path" (the checkpoint prefix) added, or None.

  Args:
    output_dir: the job's --output_dir.

  Returns:
    dict with step, metric, score, checkpoint, metrics, path; None when there is no complete
    best checkpoint.
  """
  path = os.path.join(output_dir, BEST_DIR, BEST_FILE)
  if not tf.io.gfile.exists(path):
    return None
  try:
    with tf.io.gfile.GFile(path) as f:
      best = json.load(f)
    prefix = os.path.join(output_dir, BEST_DIR, best["checkpoint"])
  except (ValueError, KeyError, TypeError):
    return None
  if not tf.io.gfile.exists(prefix + ".index"):
    return None
  best["path"] = prefix
  return best


def remove_stale_best_temps(output_dir):
  """Removes the temporaries a killed --keep_best job left in output_dir/best/.

  save_best_checkpoint writes every file under a hidden temporary name first; a job killed
  there leaves e.g. `.best.json.tmp-PID` or `.checkpoint.tmp-PID` (of a dead PID) behind.

  Args:
    output_dir: the job's --output_dir.

  Returns:
    The list of removed paths.
  """
  best_dir = os.path.join(output_dir, BEST_DIR)
  if not tf.io.gfile.isdir(best_dir):
    return []
  finals = set()
  for name in tf.io.gfile.listdir(best_dir):
    name = name.rstrip("/")
    if common.is_temp_path(name):
      head = name.rsplit(common.TEMP_INFIX, 1)[0]
      finals.add(head[1:] if head.startswith(".") else head)
  removed = []
  for final in sorted(finals):
    removed.extend(common.remove_stale_temps(os.path.join(best_dir, final)))
  if removed:
    tf1.logging.warning("--keep_best: removed %d temporary file(s) of a killed job in %s: %s",
                        len(removed), best_dir, ", ".join(os.path.basename(p) for p in removed))
  return removed


def save_best_checkpoint(output_dir, checkpoint, step, metric, score, metrics):
  """Copies a checkpoint into output_dir/best/ and records it in best/best.json.

  The new files are copied under temporary names and renamed, then best.json (and best's
  `checkpoint` state file) are replaced atomically, then the previous best's files removed:
  a kill at any point leaves best.json naming complete files.

  Args:
    output_dir: the job's --output_dir.
    checkpoint: the checkpoint prefix (output_dir/model.ckpt-<step>).
    step: its global step.
    metric: the main metric's name.
    score: its value.
    metrics: all dev metrics of the evaluation.
  """
  best_dir = os.path.join(output_dir, BEST_DIR)
  tf.io.gfile.makedirs(best_dir)
  name = os.path.basename(checkpoint)
  sources = [p for p in tf.io.gfile.glob(checkpoint + ".*")
             if p.endswith(".index") or ".data-" in p]
  if not any(p.endswith(".index") for p in sources):
    raise RuntimeError("checkpoint %s has no .index file" % checkpoint)
  for source in sources:
    target = os.path.join(best_dir, os.path.basename(source))
    common.remove_stale_temps(target)  # a copy a killed job left
    tmp = common.temp_path(target)
    tf.io.gfile.copy(source, tmp, overwrite=True)
    tf.io.gfile.rename(tmp, target, overwrite=True)
  with common.atomic_output(os.path.join(best_dir, "checkpoint")) as f:
    f.write('model_checkpoint_path: "%s"\nall_model_checkpoint_paths: "%s"\n' % (name, name))
  common.write_json_atomic(os.path.join(best_dir, BEST_FILE), {
      "step": int(step), "metric": metric, "score": _plain(score), "checkpoint": name,
      "metrics": {k: _plain(v) for k, v in sorted(metrics.items())}})
  keep = set(os.path.basename(p) for p in sources) | {BEST_FILE, "checkpoint"}
  for entry in tf.io.gfile.listdir(best_dir):
    if entry not in keep and entry.startswith("model.ckpt-"):
      tf.io.gfile.remove(os.path.join(best_dir, entry))
  tf1.logging.info("Best checkpoint: step %d (%s = %.6g), copied to %s", step, metric, score,
                   best_dir)


def _write_summaries(writer, step, metrics):
  """Dev metrics of one evaluation as TensorBoard scalars (eval/<name>)."""
  with writer.as_default():
    for key, value in sorted(metrics.items()):
      if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        tf.summary.scalar("eval/%s" % key, float(value), step=int(step))
  writer.flush()


def _train_with_evaluation(task, model_fn, train_cache, num_train_steps, resume_step,
                           inference, dev_examples=None):
  """Trains in chunks of --eval_every_steps, evaluating the dev set after each.

  The Estimator trains to the next multiple of N (or the last step) and checkpoints there;
  the checkpoint is scored on the first dev file (its main metric decides the best and early
  stopping), the evaluation added to eval_history.jsonl and TensorBoard, and with --keep_best a
  better checkpoint copied to output_dir/best/. Each chunk's input skips the batches trained
  so far, so the chunks read the stream one uninterrupted training call reads (the same
  weights, and a killed job resumes exactly as without evaluation).

  Args:
    task: Task.
    model_fn: the model_fn.
    train_cache: cached_features of the training set.
    num_train_steps: the schedule's last step.
    resume_step: the step of the checkpoint resumed from (None: a new job).
    inference: _Inference.
    dev_examples: the examples of the first dev file, when already read.

  Returns:
    dict for eval_results: num_train_steps (the step training ended at: the schedule's, or
    the early-stopping step), planned_train_steps, eval_every_steps, early_stopped,
    num_evaluations, main_metric, best_step, best_score, last_step, last_score.
  """
  every = FLAGS.eval_every_steps
  patience = FLAGS.early_stopping_patience
  dev_file = task.dev[0]
  dev_examples = dev_examples or task_examples(task, dev_file, FLAGS.data_dir, "dev")
  if not dev_examples:
    common.fail("--data_dir=%s: %s has no usable examples (needed by --eval_every_steps)" %
                (FLAGS.data_dir, _split_description(task, dev_file)))
  step = resume_step or 0
  history = EvalHistory(FLAGS.output_dir, task.main_metric, step)
  best = read_best_checkpoint(FLAGS.output_dir)
  if best is not None and not history.has(best["step"]):
    # A best copied by a model that is gone (or before its line was written: it is scored
    # again below).
    tf1.logging.warning("Removing %s/%s of step %d: not in %s", FLAGS.output_dir, BEST_DIR,
                        best["step"], HISTORY_FILE)
    tf.io.gfile.rmtree(os.path.join(FLAGS.output_dir, BEST_DIR))
  estimator = estimator_utils.make_estimator(
      model_fn, FLAGS, FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.eval_batch_size,
      FLAGS.predict_batch_size, supported_flags=SUPPORTED_MODEL_FN_FLAGS)
  writer = tf.summary.create_file_writer(os.path.join(FLAGS.output_dir, HISTORY_SUMMARY_DIR))
  early_stopped = False
  while True:
    is_eval_step = step > 0 and (step % every == 0 or step >= num_train_steps)
    if is_eval_step and not history.has(step):
      checkpoint = tf1.train.latest_checkpoint(FLAGS.output_dir)
      if checkpoint is None or _checkpoint_step(checkpoint) != step:
        raise RuntimeError("no checkpoint of step %d in %s" % (step, FLAGS.output_dir))
      start = time.time()
      metrics = inference.evaluate(dev_file, dev_examples, checkpoint)
      entry = history.make_entry(step, metrics)
      if FLAGS.keep_best and entry["best_step"] == step:
        save_best_checkpoint(FLAGS.output_dir, checkpoint, step, task.main_metric,
                             entry["score"], metrics)
      history.add(entry)
      _write_summaries(writer, step, metrics)
      tf1.logging.info("Evaluation at step %d: %s = %.6g (best %.6g at step %d; %d evaluation(s) "
                       "without improvement) in %.1f s", step, task.main_metric, entry["score"],
                       entry["best_score"], entry["best_step"],
                       entry["evals_without_improvement"], time.time() - start)
      common.STOP_SIGNALS.exit_if_stopped()
    if step >= num_train_steps:
      break
    if patience and history.evals_without_improvement() >= patience:
      early_stopped = True
      best_entry = history.best()
      tf1.logging.info("Early stopping at step %d: %d evaluation(s) without an improvement of "
                       "%s over %.6g (step %d)", step, patience, task.main_metric,
                       best_entry["score"], best_entry["step"])
      break
    target = min(num_train_steps, (step // every + 1) * every)
    train_input_fn = file_based_input_fn_builder(
        input_file=train_cache["file"], seq_length=FLAGS.max_seq_length, is_training=True,
        drop_remainder=True, is_regression=task.is_regression, seed=FLAGS.seed,
        skip_batches=_chunk_skip_batches(step),
        multilabel_num_labels=task.num_labels if task.is_multilabel else None,
        shuffle_buffer=train_shuffle_buffer(train_cache),
        padding=effective_padding(training=True))
    hook = estimator_utils.ProgressHook(num_train_steps, FLAGS.train_batch_size)
    estimator.train(input_fn=train_input_fn, max_steps=target,
                    hooks=[hook, estimator_utils.StopOnSignalHook()])
    common.STOP_SIGNALS.exit_if_stopped()
    step = estimator_utils.latest_global_step(FLAGS.output_dir)
    if step < target:
      raise RuntimeError("training stopped at step %d before step %d" % (step, target))
  writer.close()
  best_entry, last_entry = history.best(), history.entries[-1]
  summary = {"num_train_steps": step if early_stopped else num_train_steps,
             "planned_train_steps": num_train_steps, "eval_every_steps": every,
             "early_stopped": early_stopped, "num_evaluations": len(history.entries),
             "main_metric": task.main_metric, "best_step": best_entry["step"],
             "best_score": best_entry["score"], "last_step": last_entry["step"],
             "last_score": last_entry["score"]}
  if patience:
    summary["early_stopping_patience"] = patience
  return summary


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

  On TPU the features are padded to a multiple of batch_size so no example is dropped.

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
  cache = cached_features(
      examples, _task_file_path(task_file),
      os.path.join(FLAGS.output_dir, task_file.cache_name + ".tf_record"),
      pad_to_multiple=batch_size if FLAGS.use_tpu else 1, **cache_args)
  tf1.logging.info("***** Running %s on %s *****", purpose,
                   _split_description(task, task_file))
  tf1.logging.info("  Num examples = %d (%d actual, %d padding)%s", cache["num_padded"],
                   cache["num_examples"], cache["num_padded"] - cache["num_examples"],
                   " in %d windows" % cache["num_records"] if cache["windows"] else "")
  input_fn = file_based_input_fn_builder(
      input_file=cache["file"], seq_length=FLAGS.max_seq_length, is_training=False,
      drop_remainder=FLAGS.use_tpu, is_regression=task.is_regression,
      multilabel_num_labels=task.num_labels if task.is_multilabel else None,
      padding=effective_padding())
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
