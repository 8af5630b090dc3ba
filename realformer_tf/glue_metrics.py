# coding=utf-8
"""GLUE metrics in pure NumPy: accuracy, F1, Matthews correlation, Pearson, Spearman.

Definitions follow the GLUE benchmark (the same as scikit-learn / SciPy, which are not needed):
- accuracy: fraction of predictions equal to the labels.
- F1 of the positive class 1 (MRPC, QQP): 2 * precision * recall / (precision + recall), 0 when
  there is no true positive.
- Matthews correlation (CoLA): (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)), 0 when a
  factor of the denominator is 0.
- Pearson correlation; Spearman correlation = Pearson correlation of the ranks, tied values
  getting the average of their ranks. Both 0 when a side is constant.

Multi-label tasks (predictions and labels are 0/1 arrays [n, num_labels]):
- per-label F1 = 2 TP / (2 TP + FP + FN) of that label's column, 0 when the label is neither
  gold nor predicted anywhere (scikit-learn's zero_division=0);
- micro F1: the same formula on TP, FP, FN summed over all labels; macro F1: the mean of the
  per-label F1s; subset accuracy: fraction of examples whose whole label set is right.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import numpy as np


def accuracy(predictions, labels):
  """Fraction of predictions equal to the labels.

  Args:
    predictions: int array [n].
    labels: int array [n].

  Returns:
    float in [0, 1] (0.0 for empty inputs).
  """
  predictions, labels = _pair(predictions, labels)
  if predictions.size == 0:
    return 0.0
  return float(np.mean(predictions == labels))


def confusion_counts(predictions, labels, positive=1):
  """True/false positive/negative counts for a binary task.

  Args:
    predictions: int array [n].
    labels: int array [n].
    positive: the label value counted as positive.

  Returns:
    (tp, fp, fn, tn) as Python ints.
  """
  predictions, labels = _pair(predictions, labels)
  pred_pos = predictions == positive
  label_pos = labels == positive
  tp = int(np.sum(pred_pos & label_pos))
  fp = int(np.sum(pred_pos & ~label_pos))
  fn = int(np.sum(~pred_pos & label_pos))
  tn = int(np.sum(~pred_pos & ~label_pos))
  return tp, fp, fn, tn


def f1_score(predictions, labels, positive=1):
  """F1 of the positive class.

  Args:
    predictions: int array [n].
    labels: int array [n].
    positive: the positive label value (1 for MRPC and QQP).

  Returns:
    float in [0, 1]; 0.0 when there is no true positive.
  """
  tp, fp, fn, _ = confusion_counts(predictions, labels, positive)
  if tp == 0:
    return 0.0
  precision = tp / (tp + fp)
  recall = tp / (tp + fn)
  return float(2.0 * precision * recall / (precision + recall))


def matthews_corrcoef(predictions, labels, positive=1):
  """Matthews correlation coefficient of a binary task (CoLA).

  Args:
    predictions: int array [n].
    labels: int array [n].
    positive: the positive label value.

  Returns:
    float in [-1, 1]; 0.0 when any marginal count is zero.
  """
  tp, fp, fn, tn = confusion_counts(predictions, labels, positive)
  # Python ints: no overflow for large dev sets.
  denominator = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
  if denominator == 0:
    return 0.0
  return float((tp * tn - fp * fn) / np.sqrt(float(denominator)))


def pearson_corr(x, y, degenerate=0.0):
  """Pearson correlation coefficient.

  Args:
    x: float array [n].
    y: float array [n].
    degenerate: the value when either side is constant or n < 2: 0.0 (GLUE scoring, as
      the official scripts report it) or float("nan") (analyses, where "undefined" must not
      read as "uncorrelated").

  Returns:
    float in [-1, 1], or `degenerate`.
  """
  x, y = _pair(x, y, dtype=np.float64)
  if x.size < 2:
    return degenerate
  xc = x - x.mean()
  yc = y - y.mean()
  denominator = np.sqrt(np.sum(xc * xc) * np.sum(yc * yc))
  if denominator == 0.0:
    return degenerate
  return float(np.clip(np.sum(xc * yc) / denominator, -1.0, 1.0))


def rankdata(values):
  """Ranks 1..n, ties getting the average of the ranks they span (like scipy.stats.rankdata).

  Args:
    values: array [n].

  Returns:
    float64 array [n] of ranks.
  """
  values = np.asarray(values).ravel()
  n = values.size
  order = np.argsort(values, kind="mergesort")
  sorted_values = values[order]
  ranks = np.empty(n, dtype=np.float64)
  start = 0
  while start < n:
    end = start + 1
    while end < n and sorted_values[end] == sorted_values[start]:
      end += 1
    # Positions start..end-1 hold equal values: ranks start+1..end, averaged.
    ranks[order[start:end]] = (start + 1 + end) / 2.0
    start = end
  return ranks


def spearman_corr(x, y, degenerate=0.0):
  """Spearman rank correlation (Pearson of average ranks, so ties are handled like SciPy).

  Args:
    x: float array [n].
    y: float array [n].
    degenerate: the value when either side is constant or n < 2 (see pearson_corr).

  Returns:
    float in [-1, 1], or `degenerate`.
  """
  x, y = _pair(x, y, dtype=np.float64)
  return pearson_corr(rankdata(x), rankdata(y), degenerate)


def multilabel_counts(predictions, labels):
  """Per-label true positive, false positive and false negative counts.

  Args:
    predictions: 0/1 (or bool) array [n, num_labels].
    labels: 0/1 (or bool) array [n, num_labels].

  Returns:
    (tp, fp, fn): int64 arrays [num_labels].
  """
  predictions, labels = _matrix_pair(predictions, labels)
  tp = np.sum(predictions & labels, axis=0)
  fp = np.sum(predictions & ~labels, axis=0)
  fn = np.sum(~predictions & labels, axis=0)
  return tp.astype(np.int64), fp.astype(np.int64), fn.astype(np.int64)


def _f1_from_counts(tp, fp, fn):
  denominator = 2 * tp + fp + fn
  return 0.0 if denominator == 0 else float(2.0 * tp / denominator)


def per_label_f1(predictions, labels):
  """F1 of every label column (0 for a label neither gold nor predicted).

  Args:
    predictions: 0/1 array [n, num_labels].
    labels: 0/1 array [n, num_labels].

  Returns:
    list of num_labels floats.
  """
  tp, fp, fn = multilabel_counts(predictions, labels)
  return [_f1_from_counts(int(a), int(b), int(c)) for a, b, c in zip(tp, fp, fn)]


def micro_f1(predictions, labels):
  """F1 of the counts summed over all labels (multi-label).

  Args:
    predictions: 0/1 array [n, num_labels].
    labels: 0/1 array [n, num_labels].

  Returns:
    float in [0, 1] (0 when nothing is gold nor predicted).
  """
  tp, fp, fn = multilabel_counts(predictions, labels)
  return _f1_from_counts(int(tp.sum()), int(fp.sum()), int(fn.sum()))


def macro_f1(predictions, labels):
  """Mean of the per-label F1s (multi-label).

  Args:
    predictions: 0/1 array [n, num_labels].
    labels: 0/1 array [n, num_labels].

  Returns:
    float in [0, 1] (0.0 for no labels).
  """
  scores = per_label_f1(predictions, labels)
  return float(np.mean(scores)) if scores else 0.0


def subset_accuracy(predictions, labels):
  """Fraction of examples whose predicted label set equals the gold set (multi-label).

  Args:
    predictions: 0/1 array [n, num_labels].
    labels: 0/1 array [n, num_labels].

  Returns:
    float in [0, 1] (0.0 for no examples).
  """
  predictions, labels = _matrix_pair(predictions, labels)
  if predictions.shape[0] == 0:
    return 0.0
  return float(np.mean(np.all(predictions == labels, axis=1)))


def multilabel_metrics(predictions, labels, label_names=None):
  """The multi-label report: MULTILABEL_METRICS, micro precision / recall and per-label F1.

  Args:
    predictions: 0/1 array [n, num_labels].
    labels: 0/1 array [n, num_labels].
    label_names: names of the label columns (keys "f1_<name>"); default their indices.

  Returns:
    dict name -> float.
  """
  predictions, labels = _matrix_pair(predictions, labels)
  tp, fp, fn = multilabel_counts(predictions, labels)
  results = {"micro_f1": micro_f1(predictions, labels),
             "macro_f1": macro_f1(predictions, labels),
             "subset_accuracy": subset_accuracy(predictions, labels)}
  tp_sum, fp_sum, fn_sum = int(tp.sum()), int(fp.sum()), int(fn.sum())
  results["micro_precision"] = tp_sum / (tp_sum + fp_sum) if tp_sum + fp_sum else 0.0
  results["micro_recall"] = tp_sum / (tp_sum + fn_sum) if tp_sum + fn_sum else 0.0
  names = label_names if label_names is not None else [str(i) for i in range(tp.size)]
  if len(names) != tp.size:
    raise ValueError("%d label names for %d label columns" % (len(names), tp.size))
  for name, score in zip(names, per_label_f1(predictions, labels)):
    results["f1_%s" % name] = score
  return results


def best_threshold(probabilities, labels):
  """The single threshold (predict a label when its probability >= it) of the best micro F1.

  Exact: every distinct probability is a candidate cut. The threshold returned lies halfway
  between the lowest probability predicted positive and the next lower one (0 below the
  lowest), so a probability recomputed with rounding differences falls on the same side.
  Ties in F1 go to the higher threshold (fewer positives).

  Args:
    probabilities: float array [n, num_labels].
    labels: 0/1 array [n, num_labels].

  Returns:
    (threshold, micro F1 at it). With no gold label at all: (1.0, 0.0).
  """
  probabilities = np.asarray(probabilities, dtype=np.float64).ravel()
  gold = np.asarray(labels).ravel().astype(bool)
  if probabilities.shape != gold.shape:
    raise ValueError("probabilities and labels differ in size: %d vs %d" %
                     (probabilities.size, gold.size))
  total_gold = int(gold.sum())
  if total_gold == 0 or probabilities.size == 0:
    return 1.0, 0.0
  order = np.argsort(-probabilities, kind="mergesort")
  sorted_p = probabilities[order]
  tp = np.cumsum(gold[order])
  predicted = np.arange(1, sorted_p.size + 1)
  # A cut can only fall between distinct values: the last position of each group of ties.
  last_of_group = np.append(sorted_p[1:] != sorted_p[:-1], True)
  f1 = np.where(last_of_group, 2.0 * tp / (predicted + total_gold), -1.0)
  best = int(np.argmax(f1))  # the first maximum: the highest threshold
  below = sorted_p[best + 1] if best + 1 < sorted_p.size else 0.0
  return float((sorted_p[best] + below) / 2.0), float(f1[best])


# The metrics of a multi-label task, the first being its main metric.
MULTILABEL_METRICS = ("micro_f1", "macro_f1", "subset_accuracy")

# Metric names per task, in the order they are reported.
TASK_METRICS = {
    "cola": ("mcc",),
    "sst-2": ("accuracy",),
    "mrpc": ("accuracy", "f1"),
    "sts-b": ("pearson", "spearman"),
    "qqp": ("accuracy", "f1"),
    "mnli": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "tsv": ("accuracy",),
}


def compute_metrics(metric_names, predictions, labels):
  """Computes the named metrics.

  Args:
    metric_names: iterable of "accuracy", "f1", "mcc", "pearson", "spearman", or the
      multi-label "micro_f1", "macro_f1", "subset_accuracy".
    predictions: array [n] (label ids, or floats for pearson/spearman; 0/1 [n, num_labels]
      for the multi-label metrics).
    labels: array [n] ([n, num_labels] for the multi-label metrics).

  Returns:
    dict name -> float.
  """
  functions = {"accuracy": accuracy, "f1": f1_score, "mcc": matthews_corrcoef,
               "pearson": pearson_corr, "spearman": spearman_corr,
               "micro_f1": micro_f1, "macro_f1": macro_f1, "subset_accuracy": subset_accuracy}
  results = {}
  for name in metric_names:
    if name not in functions:
      raise ValueError("unknown metric %r (known: %s)" % (name, ", ".join(sorted(functions))))
    results[name] = functions[name](predictions, labels)
  return results


def _pair(a, b, dtype=None):
  a = np.asarray(a, dtype=dtype).ravel()
  b = np.asarray(b, dtype=dtype).ravel()
  if a.shape != b.shape:
    raise ValueError("predictions and labels differ in length: %d vs %d" % (a.size, b.size))
  return a, b


def _matrix_pair(predictions, labels):
  """Two 0/1 arrays [n, num_labels] of the same shape, as bool."""
  predictions = np.asarray(predictions)
  labels = np.asarray(labels)
  if predictions.ndim == 1 and predictions.size == 0:
    predictions = predictions.reshape(0, labels.shape[-1] if labels.ndim == 2 else 0)
  if labels.ndim == 1 and labels.size == 0:
    labels = labels.reshape(predictions.shape)
  if predictions.ndim != 2 or predictions.shape != labels.shape:
    raise ValueError("multi-label predictions and labels must both be [n, num_labels], got %s "
                     "and %s" % (predictions.shape, labels.shape))
  return predictions.astype(bool), labels.astype(bool)
