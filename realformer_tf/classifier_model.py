# coding=utf-8
"""The classifier on BERT's pooled output: its graph, its variables and its SavedModel export.

`create_model` builds what run_classifier.create_model (the official function) returns: the
head (output_weights / output_bias, float32 in every precision) over modeling.BertModel's pooled
output, with a softmax, a sigmoid per label (multi-label) or one regression output, and the
losses (class weights for single-label classification). `head_shapes` and
`model_variable_names` name its variables (resume and eval-weights checks), `serving_build_fn`
and `export_classifier` write the integer-input SavedModel of `run_classifier.py --export_dir`
with its labels and configs. No flag is read here.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os

import tensorflow as tf

from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import export_utils
import modeling

tf1 = tf.compat.v1


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                 num_labels, use_one_hot_embeddings, is_regression=False, is_multilabel=False,
                 class_weights=None, compute_dtype=None, skip_padding=False):
  """Creates a classification (or regression) model on BERT's pooled output.

  run_classifier.create_model (the official function) is this graph.

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
    is_regression: single output with MSE loss.
    is_multilabel: a sigmoid per label; the loss of an example is the mean of its labels'
      binary cross-entropies.
    class_weights: single-label classification: list of num_labels floats; an example's
      cross-entropy is multiplied by its class's weight. None: all 1.
    compute_dtype: BERT's compute dtype (modeling.BertModel; "fp32" / "bf16" / "fp16" or a
      dtype, None: float32). The output layer, logits and losses are float32 in all.
    skip_padding: BERT computes the real tokens only (modeling.BertModel's skip_padding; not
      for TPU / XLA): the same outputs to float rounding, less compute.

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


def head_shapes(task, bert_config):
  """{variable name: shape} of the classifier head create_model adds on top of BERT.

  Args:
    task: classifier_tasks.Task (its number of labels).
    bert_config: modeling.BertConfig.

  Returns:
    {"output_weights": [num_labels, hidden_size], "output_bias": [num_labels]}.
  """
  return {"output_weights": [task.num_labels, bert_config.hidden_size],
          "output_bias": [task.num_labels]}


def model_variable_names(bert_config):
  """The names of the model's variables (BERT and the classifier head)."""
  return set(estimator_utils.bert_variable_shapes(bert_config)) | {"output_weights",
                                                                    "output_bias"}


# ----------------------------------------------------------------------------------------------
# The integer-input SavedModel (--export_dir).


def serving_build_fn(bert_config, num_labels, is_regression, is_multilabel=False,
                     threshold=0.5):
  """Returns build_fn(placeholders) -> serving outputs, for export_utils.export_saved_model.

  Outputs: `probabilities` float32 [batch, num_labels] and `predicted_label` int32 [batch]; for
  regression `predictions` float32 [batch]; for multi-label `probabilities` (a sigmoid per
  label) and `predicted_labels` int32 [batch, num_labels] (1 where probability >= threshold).

  Args:
    bert_config: modeling.BertConfig.
    num_labels: number of classes (1 for regression).
    is_regression: single output (create_model).
    is_multilabel: a sigmoid per label (create_model).
    threshold: multi-label: the probability from which a label is predicted.

  Returns:
    build_fn({"input_ids", "input_mask", "segment_ids": int32 [batch, seq]}) -> dict of the
    outputs above.
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


def export_classifier(task, bert_config, export_dir, checkpoint, max_seq_length, vocab_file=None,
                      spm_model_file=None, do_lower_case=True, overwrite=False,
                      protected_paths=(), threshold=0.5, extra_config=None):
  """Writes the classifier as a SavedModel (serving_default) plus labels and configs.

  Args:
    task: classifier_tasks.Task (labels, regression or not).
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
