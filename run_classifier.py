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

import common
import estimator_utils
import export_utils
import glue_metrics
import modeling
import optimization
import tokenization

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

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
  flags.DEFINE_enum("task_type", "classification", ["classification", "regression"],
                    "--task_name=tsv: classification (softmax) or regression (MSE) head.")
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
               reader_options=None, processor=None, label_values=None):
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

  @property
  def num_labels(self):
    return 1 if self.is_regression else len(self.labels)

  @property
  def label_map(self):
    """{label as the examples carry it: class id}, or None for regression."""
    if self.is_regression:
      return None
    values = self.label_values if self.label_values is not None else self.labels
    return {label: i for i, label in enumerate(values)}


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
                  task_type="classification", label_list=None):
  """A task for users' own TSV files: data_dir/{train,dev,test}.tsv with chosen columns.

  Args:
    text_a_column: column of the first text: 0-based index, or a header name.
    text_b_column: optional column of the second text.
    label_column: column of the label (optional in test.tsv).
    has_header: the first line of each file is a header.
    task_type: "classification" or "regression".
    label_list: list of label strings, or None to take the sorted labels of train.tsv
      (resolved by resolve_tsv_labels).

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
  options = {"text_a_column": str(text_a_column), "text_b_column": text_b_column,
             "label_column": str(label_column), "has_header": bool(has_header),
             "task_type": task_type}
  return Task(
      "tsv", None if is_regression else label_list,
      train=TaskFile("train.tsv", "train", "train", layout),
      dev=[TaskFile("dev.tsv", "eval", "", layout)],
      test=[TaskFile("test.tsv", "predict", "predictions.tsv", test_layout)],
      metrics=("pearson", "spearman") if is_regression else ("accuracy",),
      is_regression=is_regression, reader_options=options)


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
                         fv.task_type, label_list)
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
        label_id=0.0 if label_map is None else 0,
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

  # The convention in BERT is:
  # (a) For sequence pairs:
  #  tokens:   [CLS] is this jack ##son ##ville ? [SEP] no it is not . [SEP]
  #  type_ids: 0     0  0    0    0     0       0 0     1  1  1  1   1 1
  # (b) For single sequences:
  #  tokens:   [CLS] the dog is hairy . [SEP]
  #  type_ids: 0     0   0   0  0     0 0
  input_ids = [cls_id] + ids_a + [sep_id]
  segment_ids = [0] * len(input_ids)
  if ids_b:
    input_ids += ids_b + [sep_id]
    segment_ids += [1] * (len(ids_b) + 1)

  # The mask has 1 for real tokens and 0 for padding tokens. Only real tokens are attended to.
  input_mask = [1] * len(input_ids)
  padding = max_seq_length - len(input_ids)
  input_ids += [0] * padding
  input_mask += [0] * padding
  segment_ids += [0] * padding

  if example.label is None:
    # Test files have no labels: a dummy id, as the official code's label_list[0].
    label_id = 0.0 if label_map is None else 0
  elif label_map is None:
    label_id = float(example.label)
  else:
    if example.label not in label_map:
      common.fail("example %s: label %r is not one of the labels %s" %
                  (example.guid, example.label, ", ".join(str(x) for x in label_map)))
    label_id = label_map[example.label]
  if ex_index < 5:
    tf1.logging.info("*** Example ***")
    tf1.logging.info("guid: %s", example.guid)
    tf1.logging.info("tokens: %s", " ".join(
        tokenization.printable_text(t)
        for t in tokenizer.convert_ids_to_tokens(input_ids[:len(segment_ids) - padding])))
    tf1.logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
    tf1.logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
    tf1.logging.info("segment_ids: %s", " ".join(str(x) for x in segment_ids))
    tf1.logging.info("label: %s (id = %s)", example.label, label_id)

  return InputFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                       label_id=label_id, is_real_example=True)


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
                      spm_model_file, pad_to_multiple=1, examples_digest=None):
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
                    vocab_file, do_lower_case, spm_model_file, pad_to_multiple=1):
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

  Returns:
    dict with "file", "num_examples" (real), "num_padded" (records in the file), "reused".
  """
  info, key = feature_cache_key(
      input_file, vocab_file, do_lower_case, max_seq_length, task, task.labels, spm_model_file,
      pad_to_multiple, examples_digest=None if input_file else examples_digest(examples))
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
      return dict(file=cache_file, num_examples=meta["num_examples"],
                  num_padded=meta["num_padded"], reused=True)
    old = meta.get("inputs") or {}
    changed = [name for name in info if old.get(name) != info[name]]
    reason = "inputs changed: %s" % (", ".join(changed) if changed else "example count")
  num_real = len(examples)
  padded = list(examples)
  while len(padded) % pad_to_multiple != 0:
    padded.append(PaddingInputExample())
  tf1.logging.info("Writing features to %s (%s): %d examples (%d with padding)", cache_file,
                   reason, num_real, len(padded))
  start = time.time()
  # A label map (or None): main()'s own conversion, see _convert_single_example.
  file_based_convert_examples_to_features(padded, task.label_map, max_seq_length, tokenizer,
                                          cache_file)
  common.write_json_atomic(sidecar, {"key": key, "inputs": info, "num_examples": num_real,
                                     "num_padded": len(padded),
                                     "seconds": round(time.time() - start, 2)})
  return dict(file=cache_file, num_examples=num_real, num_padded=len(padded), reused=False)


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder,
                                is_regression=False, seed=None, skip_batches=0):
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

  Returns:
    input_fn(params) -> tf.data.Dataset of int32 feature dicts, batch params["batch_size"].
  """
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }

  def input_fn(params):
    """The actual input function."""
    batch_size = params["batch_size"]
    # For training, we want a lot of parallel reading and shuffling.
    # For eval, we want no shuffling and parallel reading doesn't matter.
    d = tf.data.TFRecordDataset(input_file)
    if is_training:
      d = d.repeat()
      d = d.shuffle(buffer_size=100, seed=seed)
      if skip_batches:
        d = d.skip(skip_batches * batch_size)
    d = d.map(lambda record: estimator_utils.decode_record(record, name_to_features))
    d = d.batch(batch_size=batch_size, drop_remainder=drop_remainder)
    return d

  return input_fn


# ----------------------------------------------------------------------------------------------
# Model.


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                 num_labels, use_one_hot_embeddings, is_regression=False):
  """Creates a classification (or regression) model on BERT's pooled output (official).

  Args:
    bert_config: modeling.BertConfig.
    is_training: dropout on (BERT's and 0.1 on the pooled output).
    input_ids: int32 [batch, seq].
    input_mask: int32 [batch, seq].
    segment_ids: int32 [batch, seq].
    labels: int32 [batch] (float32 for regression), or None (no loss: serving).
    num_labels: number of classes (1 for regression).
    use_one_hot_embeddings: one-hot embedding lookup (TPU).
    is_regression: single output with MSE loss.

  Returns:
    (loss, per_example_loss [batch], logits [batch, num_labels], probabilities
    [batch, num_labels] for classification or predictions [batch] for regression). The losses
    are None when labels is None.
  """
  model = modeling.BertModel(
      config=bert_config,
      is_training=is_training,
      input_ids=input_ids,
      input_mask=input_mask,
      token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings)

  # In the demo, we are doing a simple classification task on the entire segment.
  #
  # If you want to use the token-level output, use model.get_sequence_output() instead.
  output_layer = model.get_pooled_output()

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
    else:
      outputs = tf.nn.softmax(logits, axis=-1)
    if labels is None:
      return None, None, logits, outputs

    if is_regression:
      per_example_loss = tf.square(outputs - tf.cast(labels, tf.float32))
    else:
      log_probs = tf.nn.log_softmax(logits, axis=-1)
      one_hot_labels = tf.one_hot(labels, depth=num_labels, dtype=tf.float32)
      per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    loss = tf.reduce_mean(per_example_loss)

    return (loss, per_example_loss, logits, outputs)


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate, num_train_steps,
                     num_warmup_steps, use_tpu, use_one_hot_embeddings, is_regression=False,
                     extra_predictions=False):
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
    extra_predictions: (ours) PREDICT also returns per_example_loss, label_ids and
      is_real_example (main() computes the dev metrics from them).

  Returns:
    model_fn(features, labels, mode, params) -> TPUEstimatorSpec.
  """

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
        use_one_hot_embeddings, is_regression)

    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(init_checkpoint, use_tpu)

    if mode == tf1.estimator.ModeKeys.TRAIN:
      train_op = optimization.create_optimizer(
          total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu)
      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=total_loss, train_op=train_op, scaffold_fn=scaffold_fn)

    if mode == tf1.estimator.ModeKeys.EVAL:
      def metric_fn(per_example_loss, label_ids, logits, is_real_example):
        if is_regression:
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
                         is_real_example=is_real_example)
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


def serving_build_fn(bert_config, num_labels, is_regression):
  """Returns build_fn(placeholders) -> serving outputs, for export_utils.export_saved_model.

  Outputs: `probabilities` float32 [batch, num_labels] and `predicted_label` int32 [batch]; for
  regression `predictions` float32 [batch].
  """
  def build_fn(placeholders):
    _, _, _, outputs = create_model(
        bert_config, False, placeholders["input_ids"], placeholders["input_mask"],
        placeholders["segment_ids"], None, num_labels, False, is_regression)
    if is_regression:
      return {"predictions": tf.identity(outputs, name="predictions")}
    return {"probabilities": tf.identity(outputs, name="probabilities"),
            "predicted_label": tf.argmax(outputs, axis=-1, output_type=tf.int32,
                                         name="predicted_label")}
  return build_fn


# ----------------------------------------------------------------------------------------------
# Evaluation and submission files.


def dev_metrics(task, outputs, num_examples):
  """GLUE metrics from Estimator.predict outputs on a dev set.

  Args:
    task: Task.
    outputs: list of prediction dicts (per example, padding included at the end).
    num_examples: number of real examples (the first ones).

  Returns:
    dict: metric name -> value, plus "loss" (mean per-example loss) and "num_examples".
  """
  outputs = [o for o in outputs[:num_examples]]
  labels = np.array([o["label_ids"] for o in outputs])
  if task.is_regression:
    predictions = np.array([o["predictions"] for o in outputs], dtype=np.float64)
  else:
    predictions = np.array([int(np.argmax(o["probabilities"])) for o in outputs])
  results = glue_metrics.compute_metrics(task.metrics, predictions, labels)
  losses = np.array([o["per_example_loss"] for o in outputs], dtype=np.float64)
  results["loss"] = float(losses.mean()) if losses.size else 0.0
  results["num_examples"] = len(outputs)
  return results


def format_prediction(task, output):
  """The submission string of one prediction: the label string, or the STS-B score."""
  if task.is_regression:
    value = float(output["predictions"])
    if task.name == "sts-b":
      value = min(5.0, max(0.0, value))
    return "%.3f" % value
  return task.labels[int(np.argmax(output["probabilities"]))]


def write_submission(path, task, examples, outputs):
  """Writes `index<TAB>prediction` lines with a header, atomically.

  The index is the example's index (the test file's index column), else its guid (examples of
  a DataProcessor).
  """
  with common.atomic_output(path) as writer:
    writer.write("index\tprediction\n")
    for example, output in zip(examples, outputs):
      index = getattr(example, "index", None)
      if index is None:
        index = example.guid
      writer.write("%s\t%s\n" % (index, format_prediction(task, output)))


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


def _require_task_files(task, data_dir):
  """Fails before any work if a file the requested modes need is missing."""
  needed = []
  if FLAGS.do_train:
    needed.append((task.train, "--do_train"))
  if FLAGS.do_eval:
    needed.extend((f, "--do_eval") for f in task.dev)
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


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  _check_flags()
  task = get_task(FLAGS.task_name, FLAGS)
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
  if FLAGS.do_train:
    # One training job per directory: two would interleave checkpoints and overwrite each
    # other's results.
    with common.OutputDirLock(FLAGS.output_dir, "output_dir"):
      _run_job(task, bert_config, tokenizer)
  else:
    _run_job(task, bert_config, tokenizer)


def _run_job(task, bert_config, tokenizer):
  """Trains / evaluates / predicts / exports as the flags say (after main's checks).

  Args:
    task: Task.
    bert_config: modeling.BertConfig (with the flag overrides).
    tokenizer: the checked FullTokenizer.
  """
  if task.name == "tsv" and not task.is_regression:
    resolve_tsv_labels(task, FLAGS.data_dir, FLAGS.output_dir)
  # Before anything is written there: a checkpoint of another model (or label list) in
  # --output_dir would otherwise fail deep inside the restore, after bert_config.json and
  # labels.txt were replaced.
  resume_step = estimator_utils.check_resume(
      FLAGS.output_dir, bert_config, label_list=None if task.is_regression else task.labels,
      extra_shapes=head_shapes(task, bert_config))
  tf.io.gfile.makedirs(FLAGS.output_dir)
  cache_args = dict(tokenizer=tokenizer, task=task, max_seq_length=FLAGS.max_seq_length,
                    vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                    spm_model_file=FLAGS.spm_model_file)

  train_examples = None
  num_train_steps = None
  num_warmup_steps = None
  if FLAGS.do_train:
    train_examples = task_examples(task, task.train, FLAGS.data_dir, "train")
    if not train_examples:
      common.fail("--data_dir=%s: %s has no usable examples" %
                  (FLAGS.data_dir, _split_description(task, task.train)))
    num_train_steps = int(len(train_examples) / FLAGS.train_batch_size *
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
      extra_predictions=True)

  summary = {}
  if FLAGS.do_train:
    train_file = _task_file_path(task.train)
    cache = cached_features(train_examples, train_file,
                            os.path.join(FLAGS.output_dir, "train.tf_record"), **cache_args)
    estimator_utils.save_config(bert_config, FLAGS.output_dir)
    if not task.is_regression:
      with common.atomic_output(os.path.join(FLAGS.output_dir, "labels.txt")) as f:
        f.write("".join(label + "\n" for label in task.labels))
    tf1.logging.info("***** Running training *****")
    tf1.logging.info("  Num examples = %d", cache["num_examples"])
    tf1.logging.info("  Batch size = %d", FLAGS.train_batch_size)
    tf1.logging.info("  Num steps = %d (warm-up %d)", num_train_steps, num_warmup_steps)
    estimator = estimator_utils.make_estimator(
        model_fn, FLAGS, FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.eval_batch_size,
        FLAGS.predict_batch_size)
    train_input_fn = file_based_input_fn_builder(
        input_file=cache["file"], seq_length=FLAGS.max_seq_length, is_training=True,
        drop_remainder=True, is_regression=task.is_regression, seed=FLAGS.seed,
        skip_batches=estimator_utils.resume_skip_batches(resume_step, FLAGS))
    hook = estimator_utils.ProgressHook(num_train_steps, FLAGS.train_batch_size)
    start = time.time()
    # On SIGINT / SIGTERM the step finishes, the Estimator checkpoints, and the job exits
    # 130 / 143 below without writing any result that would make it look finished.
    estimator.train(input_fn=train_input_fn, max_steps=num_train_steps,
                    hooks=[hook, estimator_utils.StopOnSignalHook()])
    common.STOP_SIGNALS.exit_if_stopped()
    train_seconds = time.time() - start
    tf1.logging.info("Training done: %d steps in %s%s", num_train_steps,
                     common.format_duration(train_seconds),
                     " (%.2f steps/s)" % hook.last_rate if hook.last_rate else "")
    summary["train_seconds"] = round(train_seconds, 1)
    # The target beside global_step: a reader (sweep.py) can check the step was reached.
    summary["num_train_steps"] = num_train_steps

  if FLAGS.do_eval:
    # Dev sets go through Estimator.predict (batch --eval_batch_size) and the metrics are
    # computed exactly in Python; on TPU the set is padded so no example is dropped.
    eval_estimator = estimator_utils.make_estimator(
        model_fn, FLAGS, FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.eval_batch_size)
    results = {}
    for dev_file in task.dev:
      examples = task_examples(task, dev_file, FLAGS.data_dir, "dev")
      if not examples:
        common.fail("--data_dir=%s: %s has no usable examples" %
                    (FLAGS.data_dir, _split_description(task, dev_file)))
      cache, input_fn = _inference_input(task, dev_file, examples, cache_args,
                                         FLAGS.eval_batch_size, "evaluation")
      start = time.time()
      outputs = list(eval_estimator.predict(input_fn=input_fn))
      metrics = dev_metrics(task, outputs, cache["num_examples"])
      tf1.logging.info("  %s: %d examples in %.1f s", _split_description(task, dev_file),
                       cache["num_examples"], time.time() - start)
      prefixes = ["eval_"] if not dev_file.name else ["eval_%s_" % dev_file.name]
      if task.name == "mnli" and not dev_file.name:
        prefixes.append("eval_matched_")
      for prefix in prefixes:
        for key, value in metrics.items():
          results[prefix + key] = value
    results["global_step"] = estimator_utils.latest_global_step(FLAGS.output_dir)
    results.update(summary)
    # A signal during evaluation: no results file, so the job does not look finished.
    common.STOP_SIGNALS.exit_if_stopped()
    estimator_utils.write_eval_results(FLAGS.output_dir, results)

  if FLAGS.do_predict:
    predict_estimator = estimator_utils.make_estimator(
        model_fn, FLAGS, FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.eval_batch_size,
        FLAGS.predict_batch_size)
    for test_file in task.test:
      examples = task_examples(task, test_file, FLAGS.data_dir, "test")
      cache, input_fn = _inference_input(task, test_file, examples, cache_args,
                                         FLAGS.predict_batch_size, "prediction")
      outputs = list(predict_estimator.predict(input_fn=input_fn))[:cache["num_examples"]]
      if len(outputs) != len(examples):
        raise RuntimeError("predicted %d of %d examples" % (len(outputs), len(examples)))
      common.STOP_SIGNALS.exit_if_stopped()
      submission = os.path.join(FLAGS.output_dir, test_file.name)
      write_submission(submission, task, examples, outputs)
      results_name = "test_results.tsv"
      if test_file.cache_name != "predict":
        results_name = "test_results_%s.tsv" % test_file.cache_name.split("_", 1)[1]
      write_test_results(os.path.join(FLAGS.output_dir, results_name), task, outputs)
      tf1.logging.info("Wrote %d predictions to %s and %s", len(outputs), submission,
                       results_name)

  if FLAGS.export_dir:
    common.STOP_SIGNALS.exit_if_stopped()
    export_classifier(task, bert_config, FLAGS.export_dir,
                      tf1.train.latest_checkpoint(FLAGS.output_dir) or FLAGS.init_checkpoint,
                      FLAGS.max_seq_length, vocab_file=FLAGS.vocab_file,
                      spm_model_file=FLAGS.spm_model_file, do_lower_case=FLAGS.do_lower_case,
                      overwrite=FLAGS.overwrite, protected_paths=export_protected_paths())


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
  tf1.logging.info("  Num examples = %d (%d actual, %d padding)", cache["num_padded"],
                   cache["num_examples"], cache["num_padded"] - cache["num_examples"])
  input_fn = file_based_input_fn_builder(
      input_file=cache["file"], seq_length=FLAGS.max_seq_length, is_training=False,
      drop_remainder=FLAGS.use_tpu, is_regression=task.is_regression)
  return cache, input_fn


def export_classifier(task, bert_config, export_dir, checkpoint, max_seq_length, vocab_file=None,
                      spm_model_file=None, do_lower_case=True, overwrite=False,
                      protected_paths=()):
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

  Returns:
    The checkpoint that was exported.
  """
  if not checkpoint:
    common.fail("--export_dir=%s: nothing to export: no checkpoint in --output_dir and no "
                "--init_checkpoint" % export_dir)
  input_specs = {name: (tf.int32, [None, max_seq_length])
                 for name in ("input_ids", "input_mask", "segment_ids")}
  extra_files = {
      "bert_config.json": bert_config.to_json_string(),
      "classifier_config.json": json.dumps({
          "task_name": task.name, "is_regression": task.is_regression,
          "labels": task.labels, "max_seq_length": max_seq_length,
          "do_lower_case": bool(do_lower_case),
          "spm_model_file": os.path.basename(spm_model_file) if spm_model_file else None,
          "outputs": (["predictions"] if task.is_regression
                      else ["probabilities", "predicted_label"])}, indent=2) + "\n",
  }
  if not task.is_regression:
    extra_files["labels.txt"] = "".join(label + "\n" for label in task.labels)
  if vocab_file and not spm_model_file:
    with tf.io.gfile.GFile(vocab_file) as f:
      extra_files["vocab.txt"] = f.read()
  return export_utils.export_saved_model(
      serving_build_fn(bert_config, task.num_labels, task.is_regression), checkpoint,
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
