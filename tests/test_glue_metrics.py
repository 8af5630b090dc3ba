"""glue_metrics against hand-computed values and independent formulas."""

import math

import numpy as np
import pytest

from realformer_tf import glue_metrics as gm


def test_accuracy_hand_computed():
  assert gm.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
  assert gm.accuracy([2, 0, 1], [2, 0, 1]) == 1.0
  assert gm.accuracy([], []) == 0.0


def test_f1_positive_class_hand_computed():
  # tp=2 (positions 0, 3), fp=1 (1), fn=1 (4): precision = recall = 2/3.
  preds = [1, 1, 0, 1, 0, 0]
  labels = [1, 0, 0, 1, 1, 0]
  assert gm.confusion_counts(preds, labels) == (2, 1, 1, 2)
  assert gm.f1_score(preds, labels) == pytest.approx(2.0 / 3.0, abs=1e-12)
  # tp=1, fp=2, fn=0: P=1/3, R=1, F1 = 2*(1/3)/(4/3) = 0.5.
  assert gm.f1_score([1, 1, 1, 0], [1, 0, 0, 0]) == pytest.approx(0.5, abs=1e-12)
  # No true positive -> 0, and F1 is of class 1 only (class 0 perfect here).
  assert gm.f1_score([0, 0, 0], [1, 0, 0]) == 0.0


def test_matthews_hand_computed():
  # tp=2, fp=1, fn=1, tn=2: (4 - 1) / sqrt(3*3*3*3) = 1/3.
  assert gm.matthews_corrcoef([1, 1, 0, 1, 0, 0], [1, 0, 0, 1, 1, 0]) == pytest.approx(
      1.0 / 3.0, abs=1e-12)
  # tp=2, fp=1, fn=0, tn=1: (2*1 - 0) / sqrt(3*2*2*1) = 2/sqrt(12).
  assert gm.matthews_corrcoef([1, 1, 1, 0], [1, 0, 1, 0]) == pytest.approx(
      2.0 / math.sqrt(12.0), abs=1e-12)
  assert gm.matthews_corrcoef([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
  assert gm.matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
  # A constant prediction has an empty marginal: 0 by convention (as scikit-learn).
  assert gm.matthews_corrcoef([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0


def test_matthews_large_counts_no_overflow():
  rng = np.random.RandomState(0)
  labels = rng.randint(0, 2, size=200000)
  preds = np.where(rng.rand(200000) < 0.8, labels, 1 - labels)
  tp, fp, fn, tn = gm.confusion_counts(preds, labels)
  expected = (tp * tn - fp * fn) / math.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
  assert gm.matthews_corrcoef(preds, labels) == pytest.approx(expected, abs=1e-12)
  # For a binary task MCC equals the Pearson correlation of the 0/1 vectors.
  assert gm.matthews_corrcoef(preds, labels) == pytest.approx(
      np.corrcoef(preds, labels)[0, 1], abs=1e-9)


def test_pearson_hand_computed():
  # x-mean = [-1, 0, 1], y-mean = [-4/3, -1/3, 5/3]: r = 3 / sqrt(2 * 42/9) = 9 / sqrt(84).
  assert gm.pearson_corr([1, 2, 3], [1, 2, 4]) == pytest.approx(9.0 / math.sqrt(84.0),
                                                                  abs=1e-12)
  assert gm.pearson_corr([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
  assert gm.pearson_corr([1, 1, 1], [1, 2, 3]) == 0.0  # constant side


def test_pearson_matches_numpy_corrcoef():
  rng = np.random.RandomState(1)
  x = rng.randn(500)
  y = 0.3 * x + rng.randn(500)
  assert gm.pearson_corr(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)


def test_rankdata_average_ties():
  np.testing.assert_array_equal(gm.rankdata([10, 20, 10, 30, 20, 20]),
                                [1.5, 4.0, 1.5, 6.0, 4.0, 4.0])
  np.testing.assert_array_equal(gm.rankdata([3.0, 1.0, 2.0]), [3.0, 1.0, 2.0])
  np.testing.assert_array_equal(gm.rankdata([5, 5, 5]), [2.0, 2.0, 2.0])


def test_spearman_with_ties_hand_computed():
  # ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]: r = 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10).
  assert gm.spearman_corr([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(3.0 / math.sqrt(10.0),
                                                                        abs=1e-12)
  # Monotone but non-linear: Spearman 1, Pearson below 1.
  x = [1, 2, 3, 4, 5]
  y = [1, 4, 9, 16, 1000]
  assert gm.spearman_corr(x, y) == pytest.approx(1.0)
  assert gm.pearson_corr(x, y) < 0.9


def test_spearman_without_ties_matches_textbook_formula():
  rng = np.random.RandomState(2)
  x = rng.permutation(50).astype(float)
  y = rng.permutation(50).astype(float)
  d = x - y  # already ranks 0..49
  n = 50
  expected = 1.0 - 6.0 * np.sum(d * d) / (n * (n * n - 1))
  assert gm.spearman_corr(x, y) == pytest.approx(expected, abs=1e-12)


def test_compute_metrics_and_task_table():
  results = gm.compute_metrics(("accuracy", "f1"), [1, 1, 0, 1, 0, 0], [1, 0, 0, 1, 1, 0])
  assert results == {"accuracy": pytest.approx(4.0 / 6.0), "f1": pytest.approx(2.0 / 3.0)}
  assert gm.TASK_METRICS["cola"] == ("mcc",)
  assert gm.TASK_METRICS["sts-b"] == ("pearson", "spearman")
  with pytest.raises(ValueError):
    gm.compute_metrics(("auc",), [1], [1])
  with pytest.raises(ValueError):
    gm.accuracy([1, 0], [1])
