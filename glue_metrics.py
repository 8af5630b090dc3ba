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
    metric_names: iterable of "accuracy", "f1", "mcc", "pearson", "spearman".
    predictions: array [n] (label ids, or floats for pearson/spearman).
    labels: array [n].

  Returns:
    dict name -> float.
  """
  functions = {"accuracy": accuracy, "f1": f1_score, "mcc": matthews_corrcoef,
               "pearson": pearson_corr, "spearman": spearman_corr}
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
