# coding=utf-8
"""What the padding benches share: a graph per (job, padding), SavedModel requests, interleaving.

bench_padding.py (run_classifier, the raw-text classifier SavedModel) and bench_padding_ner.py
(run_ner, the NER SavedModel) time `--padding=max_length` against the short paddings the same
way: each column has its own graph and session built once (GraphRunner) or its own loaded
SavedModel (ServeRunner), and the columns take turns round by round (interleaved), so machine
load affects all alike; ratios are medians of the per-round ratios (ratio_to_max_length).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import subprocess
import time

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


class GraphRunner(object):
  """One (job, padding) of an Estimator input_fn + model_fn: its graph, session and batches."""

  def __init__(self, input_fn, model_fn, training, batch_size, length_name="input_ids"):
    """Builds the graph: input_fn's batches into model_fn in TRAIN or PREDICT mode.

    Args:
      input_fn: an Estimator input_fn (params["batch_size"]).
      model_fn: an Estimator model_fn.
      training: TRAIN mode (fetch the train op) or PREDICT (fetch the predictions; the input
        repeats).
      batch_size: examples per batch.
      length_name: the [batch, length] feature whose length self.lengths records.
    """
    self.batch_size = batch_size
    self.graph = tf.Graph()
    mode = tf1.estimator.ModeKeys.TRAIN if training else tf1.estimator.ModeKeys.PREDICT
    with self.graph.as_default():
      tf1.set_random_seed(1)
      tf1.train.get_or_create_global_step()
      dataset = input_fn({"batch_size": batch_size})
      if not training:
        dataset = dataset.repeat()
      features = tf1.data.make_one_shot_iterator(dataset.prefetch(1)).get_next()
      spec = model_fn(features, None, mode, {})
      self.fetch = [spec.train_op] if training else spec.predictions
      self.length = tf.shape(features[length_name])[1]
      self.session = tf1.Session(graph=self.graph)
      self.session.run(tf1.global_variables_initializer())
    self.lengths = []

  def run(self, batches):
    """Runs `batches` batches (their padded lengths go to self.lengths); returns seconds."""
    start = time.time()
    for _ in range(batches):
      _, length = self.session.run([self.fetch, self.length])
      self.lengths.append(int(length))
    return time.time() - start

  def close(self):
    self.session.close()


class ServeRunner(object):
  """One padding of a raw-text SavedModel, loaded back; requests taken in turn."""

  def __init__(self, model_dir, requests, input_name, output_name):
    """Loads the serving signature.

    Args:
      model_dir: the SavedModel.
      requests: list of lists of strings (one request each).
      input_name: the signature's string input (e.g. "sentence", "text").
      output_name: the output fetched (e.g. "probabilities", "tags").
    """
    self.serve = tf.saved_model.load(model_dir).signatures["serving_default"]
    self.requests = [tf.constant(r) for r in requests]
    self.input_name = input_name
    self.output_name = output_name
    self.lengths = []

  def run(self, batches):
    """Runs `batches` requests; returns seconds."""
    start = time.time()
    for i in range(batches):
      request = {self.input_name: self.requests[i % len(self.requests)]}
      self.serve(**request)[self.output_name].numpy()
    return time.time() - start

  def close(self):
    pass


def interleaved(runners, rounds, batches):
  """Times the runners in turn, after 2 warm-up batches each.

  Args:
    runners: dict column -> GraphRunner or ServeRunner.
    rounds: rounds; each runs `batches` batches of every runner.
    batches: batches per runner per round.

  Returns:
    dict column -> [seconds per round].
  """
  for runner in runners.values():
    runner.run(2)  # warm-up
    runner.lengths = []
  seconds = {column: [] for column in runners}
  for _ in range(rounds):
    for column in runners:
      seconds[column].append(runners[column].run(batches))
  return seconds


def ratio_to_max_length(seconds, column):
  """The median over rounds of max_length's time over the column's ("-" without it)."""
  if column not in seconds:
    return "-"
  return "%.2fx" % np.median([m / c for m, c in zip(seconds["max_length"], seconds[column])])


def uptime():
  """The `uptime` line (the machine's load), or a note when there is none."""
  try:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
  except OSError:
    return "(uptime unavailable)"
