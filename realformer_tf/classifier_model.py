# coding=utf-8
"""The classifier on BERT's pooled output: its graph, its variables and its SavedModel export.

`create_model` builds what run_classifier.create_model (the official function) returns: the
head (output_weights / output_bias, float32 in every precision) over modeling.BertModel's pooled
output, with a softmax, a sigmoid per label (multi-label) or one regression output, and the
losses (class weights for single-label classification). `head_shapes` and
`model_variable_names` name its variables (resume and eval-weights checks); `export_classifier`
writes the SavedModel of `run_classifier.py --export_dir` (serving.export_classifier: raw text
in by default, the integer inputs as `serving_ids`) with its labels and configs;
`serving_build_fn` is the TF1 graph of the former integer-only export, the reference of
`serving_ids`. No flag is read here.
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
from realformer_tf import serving
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
# The SavedModel of --export_dir: raw text (serving.BertClassifier) and the integer inputs.


def serving_build_fn(bert_config, num_labels, is_regression, is_multilabel=False,
                     threshold=0.5):
  """Returns build_fn(placeholders) -> serving outputs, for export_utils.export_saved_model.

  The TF1 graph of the integer-input SavedModel run_classifier exported before its export
  became serving.BertClassifier (whose `serving_ids` signature has these inputs and outputs):
  kept as the reference that signature is tested against.

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


def task_has_text_b(task):
  """Whether the task's training layout has a second text (a sentence-pair task); False for a
  DataProcessor, whose layout is unknown."""
  layout = task.train.layout
  return layout is not None and layout.text_b is not None


def serving_task(task, threshold=0.5, threshold_source=None):
  """The task as serving.export_classifier takes it (serving.resolve_classifier_task's dict).

  Args:
    task: classifier_tasks.Task.
    threshold: multi-label: the probability from which a label is predicted.
    threshold_source: multi-label: where the threshold comes from (export_info.json).

  Returns:
    dict: task_type, num_labels, labels, threshold, threshold_source, label_separator, evidence.
  """
  if task.is_regression:
    task_type = "regression"
  elif task.is_multilabel:
    task_type = "multilabel"
  else:
    task_type = "classification"
  multilabel = task_type == "multilabel"
  return {"task_type": task_type, "num_labels": task.num_labels,
          "labels": None if task.is_regression else list(task.labels),
          "threshold": float(threshold) if multilabel else None,
          "threshold_source": (threshold_source or "--multilabel_threshold") if multilabel
                              else None,
          "label_separator": task.label_separator if multilabel else None,
          "evidence": "run_classifier.py --task_name=%s" % task.name}


def export_classifier(task, bert_config, export_dir, checkpoint, max_seq_length, vocab_file=None,
                      spm_model_file=None, do_lower_case=True, overwrite=False,
                      protected_paths=(), threshold=0.5, extra_config=None, doc_stride=None,
                      window_pooling="mean", threshold_source=None, padding="bucket"):
  """Writes the classifier SavedModel (serving.export_classifier) plus labels and configs.

  One SavedModel, two ways in: `serving_default` takes raw text (`sentence`, and `sentence2`
  for a sentence-pair task; the tokenizer is in the graph) -> probabilities, predicted_label,
  predicted_label_name, label_names; `serving_single` / `serving_pair` always; and
  `serving_ids` takes the int32 features a client made itself (input_ids, input_mask,
  segment_ids [batch, max_seq_length]) -> probabilities and predicted_label (regression:
  predictions; multi-label: probabilities, predicted_labels), the outputs of the integer
  SavedModel this export used to be. Float32 whatever precision trained the model.

  Args:
    task: classifier_tasks.Task (labels, regression or not).
    bert_config: modeling.BertConfig used for the model.
    export_dir: SavedModel directory; an existing one only if it is an earlier export of ours
      and overwrite is set (anything else is refused, see common.check_export_dir).
    checkpoint: checkpoint prefix or directory holding bert/* and output_weights/output_bias.
    max_seq_length: the packed length of raw text and the length of the int32 inputs.
    vocab_file: WordPiece vocab (the graph's tokenizer; also copied beside the SavedModel).
    spm_model_file: SentencePiece model instead (the graph's tokenizer; copied beside).
    do_lower_case: lower-case the text (the graph's tokenizer; noted in
      classifier_config.json).
    overwrite: replace an earlier export of ours at export_dir.
    protected_paths: paths export_dir must not be or contain (output_dir, inputs).
    threshold: multi-label tasks: the probability from which `predicted_labels` is 1.
    extra_config: more keys for classifier_config.json.
    doc_stride: (ours) --long_document=window's stride: the raw-text signatures window long
      texts and pool the window logits in the graph; `serving_ids` scores the one window it is
      given (classifier_config.json records the windowing). None: long texts are truncated.
    window_pooling: (ours) with doc_stride: "mean" or "max".
    threshold_source: (ours) multi-label: where the threshold comes from (export_info.json).
    padding: (ours) the raw-text signatures' padding: "bucket" (a request packed to its
      longest text, rounded up to 16, 32, ...: the same outputs to float rounding) or
      "max_length".

  Returns:
    The checkpoint prefix that was exported.
  """
  if not checkpoint:
    common.fail("--export_dir=%s: nothing to export: no checkpoint in --output_dir and no "
                "--init_checkpoint" % export_dir)
  checkpoint = export_utils.resolve_checkpoint(checkpoint)
  pair_input = task_has_text_b(task)
  text_inputs = ["sentence", "sentence2"] if pair_input else ["sentence"]
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
      # `outputs` are those of serving_ids (the integer export's), as before it had the others.
      "outputs": outputs,
      "signatures": {"serving_default": text_inputs, "serving_single": ["sentence"],
                     "serving_pair": ["sentence", "sentence2"],
                     serving.ID_SIGNATURE: list(serving.ID_INPUTS)}}
  if task.is_multilabel:
    classifier_config.update(is_multilabel=True, threshold=float(threshold),
                             label_separator=task.label_separator)
  if doc_stride is not None:
    # The raw-text signatures window and pool; an id client windows and pools itself.
    classifier_config.update(
        long_document="window", doc_stride=int(doc_stride), window_pooling=window_pooling,
        windowed_signatures=["serving_default", "serving_pair", "serving_single"],
        one_window_signatures=[serving.ID_SIGNATURE])
  classifier_config.update(extra_config or {})
  extra_files = {"classifier_config.json": json.dumps(classifier_config, indent=2) + "\n"}
  if spm_model_file:
    with tf.io.gfile.GFile(spm_model_file, "rb") as f:
      extra_files[os.path.basename(spm_model_file)] = f.read()
  elif vocab_file:
    with tf.io.gfile.GFile(vocab_file) as f:
      extra_files["vocab.txt"] = f.read()
  serving.export_classifier(
      bert_config, checkpoint, export_dir, vocab_file=vocab_file, do_lower_case=do_lower_case,
      spm_model_file=spm_model_file, seq_length=max_seq_length, pair_input=pair_input,
      overwrite=overwrite, task=serving_task(task, threshold, threshold_source),
      protected_paths=protected_paths, padding=padding, doc_stride=doc_stride,
      window_pooling=window_pooling, extra_files=extra_files)
  return checkpoint
