# coding=utf-8
"""Classification tasks: the official examples and DataProcessors, the task table, the TSV reader.

What run_classifier.py trains on, without the job: InputExample / PaddingInputExample and the
official DataProcessor API (XnliProcessor, MnliProcessor, MrpcProcessor, ColaProcessor, users'
own through register_processor or --processor=MODULE:CLASS), the nine GLUE tasks laid out as the
benchmark distributes them (Task, TaskFile, Layout), the generic `tsv` task (make_tsv_task,
multi-label included), and the reader that checks every row (read_examples: one-line errors
naming the file and line). run_classifier re-exports the official names, so code written against
the official script keeps importing them from there.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import csv
import hashlib
import importlib
import importlib.util
import os
import sys

import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import glue_metrics
import tokenization

tf1 = tf.compat.v1


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
PROCESSORS = {"xnli": XnliProcessor}
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
  PROCESSORS[key] = processor_cls
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
  if name in PROCESSORS:
    processor = _instantiate(PROCESSORS[name])
    if name == "xnli" and PROCESSORS[name] is XnliProcessor:
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
              (task_name, ", ".join(sorted(set(TASK_NAMES) | set(PROCESSORS)))))


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


def _layout_columns(layout, header, path, num_columns, split):
  """{"text_a", "text_b", "label", "index": column index or None} of a file's layout; a column
  beyond the file's is a one-line error (a test file's label column: no labels)."""
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
  return cols


def _parse_label(task, raw_label, label_set, where):
  """One row's label: a float (regression), a tuple of labels (multi-label) or the string;
  one-line errors (naming `where`, file:line) for a label outside label_set (None: any)."""
  if task.is_regression:
    try:
      label = float(raw_label)
    except ValueError:
      common.fail("%s: label %r is not a number (%s is a regression task)" %
                  (where, raw_label, task.name))
    if not np.isfinite(label):
      common.fail("%s: label %r is not finite" % (where, raw_label))
    return label
  labels = split_multilabel(raw_label, task.label_separator) if task.is_multilabel else [
      raw_label]
  for one in labels:
    if label_set is not None and one not in label_set:
      common.fail("%s: label %r is not one of the %s labels (%s)" %
                  (where, one, task.name, ", ".join(task.labels)))
  return labels if task.is_multilabel else raw_label


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
  label_set = set(task.labels) if (check_labels and task.labels is not None) else None
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
      cols = _layout_columns(layout, header, path, num_columns, split)
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
      label = _parse_label(task, fields[cols["label"]].strip(), label_set,
                           "%s:%d" % (path, line_number))
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


def split_description(task, task_file):
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
