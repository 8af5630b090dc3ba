# coding=utf-8
"""Scoring a classifier checkpoint: dev-set metrics and test-set predictions.

`Inference` runs Estimator.predict of run_classifier's model_fn on any checkpoint (the latest,
the best, or each one evaluated during training), puts the outputs of length-sorted batches back
in the file's order, pools the windows of a long document into one prediction, and computes the
dev metrics exactly in Python (classifier_outputs). The caller supplies the Estimator and the
input of a file (the job decides how they are built: flags, feature cache, padding); no flag is
read here.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

from realformer_tf import classifier_outputs


class Inference(object):
  """Dev-set evaluation and test-set prediction through Estimator.predict on any checkpoint,
  windows pooled per document.

  Each Estimator (one per batch size) and each file's features and input_fn are built once per
  job: the evaluations during training reuse them.
  """

  def __init__(self, task, estimator_for, inference_input, eval_batch_size, predict_batch_size,
               window_pooling="mean", class_weights=None, multilabel_threshold=0.5,
               tune_threshold=False):
    """Keeps the job's model and input builders.

    Args:
      task: classifier_tasks.Task.
      estimator_for: batch_size -> the Estimator whose predict() runs the job's model_fn in
        batches of that size.
      inference_input: (task_file, examples, batch_size, purpose) -> (cache dict of
        classifier_features.cached_features, input_fn) of a dev or test file; purpose is
        "evaluation" or "prediction" (for the log).
      eval_batch_size: the batch size of evaluate().
      predict_batch_size: the batch size of predict().
      window_pooling: "mean" or "max": how a document's window logits are pooled.
      class_weights: the loss weights of the classes (the pooled windows' loss), or None.
      multilabel_threshold: multi-label tasks: the probability from which a label is
        predicted (dev metrics).
      tune_threshold: multi-label tasks: also search the threshold of the best dev micro-F1
        (dev_metrics' eval_tuned_*).
    """
    self.task = task
    self.class_weights = class_weights
    self._estimator_for = estimator_for
    self._inference_input = inference_input
    self._eval_batch_size = eval_batch_size
    self._predict_batch_size = predict_batch_size
    self._window_pooling = window_pooling
    self._multilabel_threshold = multilabel_threshold
    self._tune_threshold = tune_threshold
    self._estimators = {}
    self._inputs = {}

  def _estimator(self, batch_size):
    if batch_size not in self._estimators:
      self._estimators[batch_size] = self._estimator_for(batch_size)
    return self._estimators[batch_size]

  def outputs(self, task_file, examples, checkpoint, batch_size, purpose):
    """Per-example prediction dicts (windows pooled) and the cache dict of the file.

    Args:
      task_file: classifier_tasks.TaskFile of a dev or test file.
      examples: its InputExamples.
      checkpoint: checkpoint prefix (None: the latest in the Estimator's model_dir).
      batch_size: the prediction batch size.
      purpose: "evaluation" or "prediction".

    Returns:
      (list of per-example dicts in the file's order, padding examples included; the cache
      dict of the file's features).
    """
    key = (task_file.cache_name, batch_size)
    if key not in self._inputs:
      # Cached once per job: evaluations during training reuse the features and input_fn.
      self._inputs[key] = self._inference_input(task_file, examples, batch_size, purpose)
    cache, input_fn = self._inputs[key]
    outputs = list(self._estimator(batch_size).predict(input_fn=input_fn,
                                                       checkpoint_path=checkpoint))
    # Length-sorted batches (--padding=longest / bucket): back in the file's order.
    outputs = classifier_outputs.in_file_order(outputs)
    if cache["windows"] is not None:
      outputs = classifier_outputs.pool_window_outputs(
          self.task, outputs, cache["windows"], self._window_pooling, self.class_weights)
    return outputs, cache

  def evaluate(self, dev_file, examples, checkpoint):
    """dev_metrics of `checkpoint` (None: the latest in the model_dir) on one dev file."""
    outputs, cache = self.outputs(dev_file, examples, checkpoint, self._eval_batch_size,
                                  "evaluation")
    metrics = classifier_outputs.dev_metrics(self.task, outputs, cache["num_examples"],
                                             threshold=self._multilabel_threshold,
                                             tune_threshold=self._tune_threshold)
    if cache["windows"] is not None:
      metrics["num_windows"] = int(sum(cache["windows"][:cache["num_examples"]]))
    return metrics

  def predict(self, test_file, examples, checkpoint):
    """Per-example prediction dicts of the real examples of a test file."""
    outputs, cache = self.outputs(test_file, examples, checkpoint, self._predict_batch_size,
                                  "prediction")
    return outputs[:cache["num_examples"]]
