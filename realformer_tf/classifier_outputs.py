# coding=utf-8
"""What a classifier's predictions become: dev metrics, pooled windows, submission files.

Computed in Python from Estimator.predict outputs (run_classifier): their file order again after
length-sorted batches (in_file_order), the exact GLUE metrics of a dev set (glue_metrics;
multi-label micro / macro F1 at a threshold, optionally tuned), a long document's window
outputs pooled into one prediction (--long_document=window), and the GLUE submission
(index<TAB>prediction) and official test_results.tsv files.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import numpy as np

from realformer_tf import common
from realformer_tf import glue_metrics


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


# Length-sorted prediction batches (realformer_tf.classifier_features.length_sorted_batches)
# carry each record's 0-based index in its TFRecord file through the model_fn's predictions under
# this name.
EXAMPLE_INDEX = "example_index"


def in_file_order(outputs, index_name=EXAMPLE_INDEX):
  """Estimator.predict outputs of length-sorted batches, put back in the file's record order.

  Args:
    outputs: list of prediction dicts; each has index_name (its record's index in the file),
      or none has it (the batches kept the file's order: returned as given).
    index_name: the key of the index.

  Returns:
    list of the prediction dicts without index_name, the i-th that of record i.
  """
  if not outputs or index_name not in outputs[0]:
    return outputs
  ordered = [None] * len(outputs)
  for output in outputs:
    index = int(output.pop(index_name))
    if not 0 <= index < len(ordered) or ordered[index] is not None:
      raise RuntimeError("prediction of record %d: not one of %d records, or twice" %
                         (index, len(ordered)))
    ordered[index] = output
  return ordered


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
