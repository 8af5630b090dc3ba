# coding=utf-8
r"""BERT / RealFormer fine-tuning on GLUE, XNLI and your own sentence(-pair) classification data.

Extends the official google-research/bert run_classifier.py (same flags, same library API):
trains, evaluates on the dev set (GLUE metrics computed exactly), predicts the test set (GLUE
submission files) and exports a SavedModel, for the nine GLUE tasks, XNLI, a TSV file of your
own (--task_name=tsv) or your own DataProcessor (--processor=MODULE:CLASS).

  python run_classifier.py --task_name=sst-2 --data_dir=glue/SST-2 \
    --vocab_file=vocab.txt --bert_config_file=bert_config.json \
    --init_checkpoint=bert_model.ckpt --max_seq_length=128 \
    --do_train --do_eval --do_predict --output_dir=out/sst2 \
    [--residual_attention=none|sum|mean] [--export_dir=out/sst2_export]

  python run_classifier.py --task_name=tsv --data_dir=my_data --text_a_column=review \
    --label_column=sentiment ... --do_train --do_eval --do_predict --output_dir=out/mine

  python run_classifier.py --task_name=xnli --xnli_language=zh --data_dir=$XNLI_DIR ...

On TensorFlow 2.15 it trains with the Estimator; on a TensorFlow without it (2.16 and later),
with realformer_tf.tf2_training (tf.distribute): the same flags (--use_tpu through TPUStrategy,
several workers through --distribution_strategy=multi_worker_mirrored; --precision=bf16 and
fp16 as there; --iterations_per_loop refused), checkpoints and output files (docs/compatibility.md,
"Training without the Estimator").

docs/fine_tuning.md has the rest: tasks and metrics, evaluation during training (early
stopping, the best checkpoint), class weights, multi-label tasks, long documents in windows,
padding, mixed precision, exports, and your own DataProcessor (--processor, or
register_processor() and run() from your own script).

As a library, this module keeps the official API (InputExample, DataProcessor,
convert_single_example, model_fn_builder, ...: docs/fine_tuning.md, "run_classifier as a
library").
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import contextlib
import json
import os
import sys
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import classifier_outputs
from realformer_tf import classifier_tasks
from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import model_config
import modeling
from realformer_tf import batch_padding
from realformer_tf import classifier_features
from realformer_tf import classifier_inference
from realformer_tf import classifier_model
import tokenization
from realformer_tf import tf2_training
from realformer_tf import training_eval

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

# The shared estimator_utils.MODEL_FN_FLAGS this script implements.
SUPPORTED_MODEL_FN_FLAGS = ("precision", "fused_optimizer")

# The training engines: the Estimator (TensorFlow <= 2.15) and, on a TensorFlow without it,
# tf2_training.Engine (tf.distribute; docs/compatibility.md).
ENGINE_ESTIMATOR = "estimator"
ENGINE_TF2 = "tf2"


_FLAGS_DEFINED = []


def define_flags():
  """Defines the command-line flags (official names plus the extensions); a second call is a
  no-op (a user's script may call it before run())."""
  if _FLAGS_DEFINED:
    return
  _FLAGS_DEFINED.append(True)
  _define_official_flags()
  estimator_utils.define_estimator_flags()
  model_config.define_model_override_flags()
  _define_task_flags()
  _define_extension_flags()


def _define_official_flags():
  """The official script's flags (same names, defaults and meaning)."""
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
                      "register_processor (optional with --processor)." %
                      ", ".join(classifier_tasks.TASK_NAMES))
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


def _define_task_flags():
  """Extensions: the tokenizer, the export, the tsv task's columns and labels, class weights."""
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece model; when given it replaces --vocab_file's WordPiece.")
  flags.DEFINE_string(
      "export_dir", None,
      "Write the classifier here as a SavedModel that takes raw text: serving_default "
      "(strings `sentence`, and `sentence2` for a pair task; the tokenizer of --vocab_file / "
      "--spm_model_file is in the graph) -> probabilities, predicted_label, "
      "predicted_label_name, label_names (regression: predictions); serving_ids takes int32 "
      "input_ids/input_mask/segment_ids [batch, max_seq_length] instead. Weights: the best "
      "checkpoint with --keep_best, else the latest in --output_dir, else --init_checkpoint "
      "(docs/fine_tuning.md, \"Exporting a classifier\"; export_hub.py --mode=classifier "
      "builds the same from an --output_dir later).")
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
  flags.DEFINE_enum("task_type", "classification",
                    ["classification", "regression", "multilabel"],
                    "--task_name=tsv: classification (softmax), regression (MSE) or multilabel "
                    "(a sigmoid per label, binary cross-entropy; the label column holds a "
                    "--label_separator-joined list, possibly empty) head.")
  flags.DEFINE_string("label_separator", ",",
                      "--task_type=multilabel: separator of the labels in the label column.")
  flags.DEFINE_float("multilabel_threshold", 0.5,
                     "--task_type=multilabel: a label is predicted when its probability is >= "
                     "this (dev metrics, submissions, the SavedModel's predicted_labels).")
  flags.DEFINE_bool("tune_threshold", False,
                    "--task_type=multilabel with --do_eval: also search the threshold that "
                    "maximises micro-F1 on the dev set (reported as eval_tuned_*, saved to "
                    "threshold.json) and use it for --do_predict and --export_dir.")
  flags.DEFINE_string(
      "class_weights", None,
      "Single-label classification: weight of each class in the loss, 'auto' (inverse "
      "frequency over the training labels, normalised to mean 1) or w1,w2,... in label order.")
  flags.DEFINE_string(
      "label_list", None,
      "--task_name=tsv: comma-separated labels (default: the sorted labels found in "
      "train.tsv, or labels.txt written into --output_dir by training).")
  flags.DEFINE_string(
      "processor", None,
      "Your own DataProcessor subclass as MODULE:CLASS (MODULE imported from the current "
      "directory or PYTHONPATH, or a path to a .py file); its get_labels() gives the labels.")


def _define_extension_flags():
  """Extensions: evaluation during training, long documents, padding, XNLI's language."""
  training_eval.define_flags()
  flags.DEFINE_enum(
      "long_document", "truncate", ["truncate", "window"],
      "Texts longer than --max_seq_length: truncate (official), or window: split text_a into "
      "windows --doc_stride tokens apart; every window of a training document carries its "
      "label, eval / predict (and the --export_dir model's raw-text signatures) pool a "
      "document's window logits (--window_pooling).")
  flags.DEFINE_integer(
      "doc_stride", None,
      "--long_document=window: tokens between window starts (default: half the window; at "
      "most the window, max_seq_length - 2, or - 3 with a text_b).")
  flags.DEFINE_enum("window_pooling", "mean", ["mean", "max"],
                    "--long_document=window: how a document's window logits are pooled.")
  batch_padding.define_padding_flag(extra_help=(
      "Evaluation and prediction with longest or bucket also sort the examples by length "
      "within windows of %d batches (batches of similar lengths: less padding) and put the "
      "outputs back in the file's order." % classifier_features.SORT_WINDOW_BATCHES))
  flags.DEFINE_bool(
      "group_by_length", False,
      "Training: batches of examples of similar length (the shuffled stream is cut into windows "
      "of %d batches, each window sorted by length and cut into batches, whose order is "
      "shuffled with --seed). With --padding=longest (the training default; "
      "bucket with --use_xla) a batch costs about its longest example, so training is faster; "
      "the batch composition changes (other batches than a run without the flag, hence other "
      "results). Seeded and resumable: a resumed job reads the same batches in the same order "
      "as an uninterrupted one." % classifier_features.GROUP_WINDOW_BATCHES)
  flags.DEFINE_string(
      "xnli_language", "zh",
      "--task_name=xnli: language of the XNLI-MT training file "
      "(multinli/multinli.train.<language>.tsv) and of the xnli.dev.tsv rows evaluated.")


# ----------------------------------------------------------------------------------------------
# The official library API. Examples and DataProcessors live in classifier_tasks, the
# conversion in realformer_tf.classifier_features and the model in
# realformer_tf.classifier_model; the official names stay here with the official signatures.

InputExample = classifier_tasks.InputExample
PaddingInputExample = classifier_tasks.PaddingInputExample
DataProcessor = classifier_tasks.DataProcessor
XnliProcessor = classifier_tasks.XnliProcessor
MnliProcessor = classifier_tasks.MnliProcessor
MrpcProcessor = classifier_tasks.MrpcProcessor
ColaProcessor = classifier_tasks.ColaProcessor
InputFeatures = classifier_features.InputFeatures
_truncate_seq_pair = classifier_features.truncate_seq_pair
# Ours: a user's DataProcessor under a --task_name, for run() (docs/fine_tuning.md).
register_processor = classifier_tasks.register_processor


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
      packing the job uses (classifier_features.convert_example).
    max_seq_length: sequence length of the features.
    tokenizer: tokenization.FullTokenizer.

  Returns:
    InputFeatures with input_ids/input_mask/segment_ids of length max_seq_length.
  """
  if label_list is None or isinstance(label_list, dict):
    return classifier_features.convert_example(ex_index, example, label_list, max_seq_length,
                                               tokenizer)
  label_map = {}
  for (i, label) in enumerate(label_list):
    label_map[label] = i
  return classifier_features.convert_example(ex_index, example, label_map, max_seq_length,
                                             tokenizer, empty_b_is_single=True)


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
  classifier_features.write_feature_records(
      examples,
      lambda ex_index, example: convert_single_example(ex_index, example, label_list,
                                                       max_seq_length, tokenizer),
      output_file)


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder,
                                is_regression=False, seed=None, skip_batches=0,
                                multilabel_num_labels=None, shuffle_buffer=100,
                                padding="max_length", group_by_length=False,
                                group_window_batches=classifier_features.GROUP_WINDOW_BATCHES,
                                sort_by_length=False,
                                sort_window_batches=classifier_features.SORT_WINDOW_BATCHES):
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
    multilabel_num_labels: (ours) multi-label tasks: label_ids is a multi-hot
      [multilabel_num_labels] vector.
    shuffle_buffer: (ours) training shuffle buffer (records); the official 100 by default.
    padding: (ours) "max_length" (official): every batch [batch, seq_length]; "longest": each
      batch sliced to its longest example rounded up to a multiple of 8
      (batch_padding.trim_batch_to_longest): the same batches in the same order, outputs
      equal to float rounding, less compute on padding; "bucket": that length rounded up to
      batch_padding.padding_buckets(seq_length) (few shapes, for XLA). Not for TPU (static
      shapes).
    group_by_length: (ours) training: batches of examples of similar length
      (classifier_features.length_grouped_batches over the shuffled stream; skip_batches
      counts its batches).
    group_window_batches: (ours) group_by_length's window, in batches.
    sort_by_length: (ours) evaluation / prediction: batches of examples of similar length
      (classifier_features.length_sorted_batches), each example with its index in the file
      (classifier_outputs.EXAMPLE_INDEX), for classifier_outputs.in_file_order.
    sort_window_batches: (ours) sort_by_length's window, in batches.

  Returns:
    input_fn(params) -> tf.data.Dataset of int32 feature dicts, batch params["batch_size"].
  """
  if padding not in batch_padding.PADDING_MODES:
    raise ValueError("padding=%r: not one of %s" % (padding, batch_padding.PADDING_MODES))
  buckets = batch_padding.padding_buckets(seq_length) if padding == "bucket" else None
  if group_by_length and not is_training:
    raise ValueError("group_by_length: only for training (evaluation keeps the file's order)")
  if sort_by_length and (is_training or drop_remainder):
    raise ValueError("sort_by_length: only for evaluation and prediction, without "
                     "drop_remainder (group_by_length for training; TPU: max_length)")
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }
  if multilabel_num_labels:
    name_to_features["label_ids"] = tf.io.FixedLenFeature([multilabel_num_labels], tf.int64)

  def input_fn(params):
    """The actual input function."""
    batch_size = params["batch_size"]
    # For training, we want a lot of parallel reading and shuffling.
    # For eval, we want no shuffling and parallel reading doesn't matter.
    d = tf.data.TFRecordDataset(input_file)
    if is_training:
      d = d.repeat()
      d = d.shuffle(buffer_size=shuffle_buffer, seed=seed)
      if group_by_length:
        d = classifier_features.length_grouped_batches(
            d, lambda record: estimator_utils.decode_record(record, name_to_features),
            batch_size, seed, skip_batches, group_window_batches)
      elif skip_batches:
        d = d.skip(skip_batches * batch_size)
    if not group_by_length:
      d = d.map(lambda record: estimator_utils.decode_record(record, name_to_features))
      if sort_by_length:
        d = classifier_features.length_sorted_batches(d, batch_size, sort_window_batches)
      else:
        d = d.batch(batch_size=batch_size, drop_remainder=drop_remainder)
    if padding != "max_length":
      d = d.map(lambda batch: batch_padding.trim_batch_to_longest(batch, seq_length,
                                                                  buckets=buckets))
    return estimator_utils.without_autotune(d)

  return input_fn


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                 num_labels, use_one_hot_embeddings, is_regression=False, is_multilabel=False,
                 class_weights=None, compute_dtype=None, skip_padding=False):
  """Creates a classification (or regression) model on BERT's pooled output (official).

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
    is_regression: (ours) single output with MSE loss.
    is_multilabel: (ours) a sigmoid per label; the loss of an example is the mean of its
      labels' binary cross-entropies.
    class_weights: (ours) single-label classification: list of num_labels floats; an
      example's cross-entropy is multiplied by its class's weight. None: all 1.
    compute_dtype: (ours) BERT's compute dtype (modeling.BertModel; "fp32" / "bf16" / "fp16"
      or a dtype, None: float32). The output layer, logits and losses are float32 in all.
    skip_padding: (ours) BERT computes the real tokens only (modeling.BertModel's
      skip_padding; not for TPU / XLA): the same outputs to float rounding, less compute.

  Returns:
    (loss, per_example_loss [batch], logits [batch, num_labels], probabilities
    [batch, num_labels] for classification (independent sigmoids for multi-label) or
    predictions [batch] for regression). The losses are None when labels is None.
  """
  return classifier_model.create_model(
      bert_config, is_training, input_ids, input_mask, segment_ids, labels, num_labels,
      use_one_hot_embeddings, is_regression=is_regression, is_multilabel=is_multilabel,
      class_weights=class_weights, compute_dtype=compute_dtype, skip_padding=skip_padding)


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate, num_train_steps,
                     num_warmup_steps, use_tpu, use_one_hot_embeddings, is_regression=False,
                     extra_predictions=False, is_multilabel=False, class_weights=None,
                     precision="fp32", fused_optimizer=False, keep_checkpoint_max=5,
                     max_seq_length=None, skip_padding=False, allow_unmatched_init=False):
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
    extra_predictions: (ours) PREDICT also returns per_example_loss, label_ids, logits and
      is_real_example (the job computes the dev metrics from them and pools windows' logits).
    is_multilabel: (ours) sigmoid per label (create_model); EVAL reports eval_loss only.
    class_weights: (ours) per-class loss weights (create_model).
    precision: (ours) "fp32", "bf16" or "fp16": BERT's compute dtype (create_model); fp16
      trains with dynamic loss scaling (estimator_utils.create_train_op).
    fused_optimizer: (ours) AdamW with the fused Adam kernel (create_train_op).
    keep_checkpoint_max: (ours) checkpoints kept by the fp16 saver (create_train_op).
    max_seq_length: (ours) the features' --max_seq_length: BERT's dropout masks are drawn at
      that length (modeling.full_length_dropout), so a training batch padded to its longest
      example (--padding=longest) drops what the max_length batch drops. None: the official
      masks over the batch's shape (equal to these at max_seq_length).
    skip_padding: (ours) BERT skips the padding rows (create_model); not for TPU / XLA.

  Returns:
    model_fn(features, labels, mode, params) -> TPUEstimatorSpec.
  """
  compute_dtype = modeling.get_compute_dtype(precision)

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    """The `model_fn` for TPUEstimator."""
    tf1.logging.info("*** Features ***")
    for name in sorted(features.keys()):
      tf1.logging.info("  name = %s, shape = %s", name, features[name].shape)

    is_training = (mode == tf1.estimator.ModeKeys.TRAIN)
    (total_loss, per_example_loss, logits, outputs, label_ids,
     is_real_example) = _classifier_graph(
         features, is_training, bert_config, num_labels, use_one_hot_embeddings,
         is_regression=is_regression, is_multilabel=is_multilabel,
         class_weights=class_weights, compute_dtype=compute_dtype,
         max_seq_length=max_seq_length, skip_padding=skip_padding)

    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(
        init_checkpoint, use_tpu, allow_unmatched=allow_unmatched_init)

    if mode == tf1.estimator.ModeKeys.TRAIN:
      train_op = estimator_utils.create_train_op(
          total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
          precision=precision, fused_optimizer=fused_optimizer,
          keep_checkpoint_max=keep_checkpoint_max)
      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=total_loss, train_op=train_op, scaffold_fn=scaffold_fn)

    if mode == tf1.estimator.ModeKeys.EVAL:
      def metric_fn(per_example_loss, label_ids, logits, is_real_example):
        if is_regression or is_multilabel:
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

    predictions = _classifier_predictions(
        features, outputs, is_regression,
        (per_example_loss, label_ids, is_real_example, logits) if extra_predictions else None)
    return tf1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, predictions=predictions, scaffold_fn=scaffold_fn)

  return model_fn


def _classifier_graph(features, is_training, bert_config, num_labels, use_one_hot_embeddings,
                      is_regression=False, is_multilabel=False, class_weights=None,
                      compute_dtype=None, max_seq_length=None, skip_padding=False):
  """create_model on a batch of run_classifier's features (model_fn_builder's graph).

  Args:
    features: dict of int32 input_ids, input_mask, segment_ids [batch, seq], label_ids
      (create_model's labels) and optionally is_real_example [batch].
    is_training: dropout on.
    bert_config, num_labels, use_one_hot_embeddings, is_regression, is_multilabel,
      class_weights, compute_dtype, max_seq_length, skip_padding: as model_fn_builder.

  Returns:
    (total_loss, per_example_loss [batch], logits [batch, num_labels], outputs (create_model's
    probabilities or predictions), label_ids, is_real_example float32 [batch]).
  """
  label_ids = features["label_ids"]
  if "is_real_example" in features:
    is_real_example = tf.cast(features["is_real_example"], dtype=tf.float32)
  else:
    # input_fn_builder's in-memory features have no such key: every example is real.
    is_real_example = tf.ones(tf.shape(label_ids), dtype=tf.float32)
  with (modeling.full_length_dropout(max_seq_length) if max_seq_length
        else contextlib.nullcontext()):
    (total_loss, per_example_loss, logits, outputs) = create_model(
        bert_config, is_training, features["input_ids"], features["input_mask"],
        features["segment_ids"], label_ids, num_labels, use_one_hot_embeddings, is_regression,
        is_multilabel=is_multilabel, class_weights=class_weights, compute_dtype=compute_dtype,
        skip_padding=skip_padding)
  return total_loss, per_example_loss, logits, outputs, label_ids, is_real_example


def _classifier_predictions(features, outputs, is_regression, extra=None):
  """model_fn_builder's PREDICT outputs.

  Args:
    features: the batch's features.
    outputs: create_model's probabilities (or regression predictions).
    is_regression: name the outputs `predictions` instead of `probabilities`.
    extra: (per_example_loss, label_ids, is_real_example, logits) to add, or None.

  Returns:
    dict name -> Tensor [batch, ...].
  """
  if is_regression:
    predictions = {"predictions": outputs}
  else:
    predictions = {"probabilities": outputs}
  if extra is not None:
    per_example_loss, label_ids, is_real_example, logits = extra
    predictions.update(per_example_loss=per_example_loss, label_ids=label_ids,
                       is_real_example=is_real_example, logits=logits)
  if classifier_outputs.EXAMPLE_INDEX in features:
    # Length-sorted batches (sort_by_length): in_file_order restores the file's order.
    predictions[classifier_outputs.EXAMPLE_INDEX] = features[classifier_outputs.EXAMPLE_INDEX]
  return predictions


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


# ----------------------------------------------------------------------------------------------
# Names this module had that live elsewhere now: an old import fails with one line naming the
# new place.

MOVED = {
    "Layout": "realformer_tf.classifier_tasks.Layout",
    "TaskFile": "realformer_tf.classifier_tasks.TaskFile",
    "Task": "realformer_tf.classifier_tasks.Task",
    "MultiLabelMap": "realformer_tf.classifier_tasks.MultiLabelMap",
    "GLUE_TASKS": "realformer_tf.classifier_tasks.GLUE_TASKS",
    "TASK_NAMES": "realformer_tf.classifier_tasks.TASK_NAMES",
    "normalize_task_name": "realformer_tf.classifier_tasks.normalize_task_name",
    "make_tsv_task": "realformer_tf.classifier_tasks.make_tsv_task",
    "load_processor_class": "realformer_tf.classifier_tasks.load_processor_class",
    "make_processor_task": "realformer_tf.classifier_tasks.make_processor_task",
    "get_task": "realformer_tf.classifier_tasks.get_task",
    "ReadStats": "realformer_tf.classifier_tasks.ReadStats",
    "read_tsv_lines": "realformer_tf.classifier_tasks.read_tsv_lines",
    "read_examples": "realformer_tf.classifier_tasks.read_examples",
    "split_multilabel": "realformer_tf.classifier_tasks.split_multilabel",
    "task_examples": "realformer_tf.classifier_tasks.task_examples",
    "collect_labels": "realformer_tf.classifier_tasks.collect_labels",
    "resolve_tsv_labels": "realformer_tf.classifier_tasks.resolve_tsv_labels",
    "resolve_class_weights": "realformer_tf.classifier_tasks.resolve_class_weights",
    "auto_class_weights": "realformer_tf.classifier_tasks.auto_class_weights",
    "_PROCESSORS": "realformer_tf.classifier_tasks.PROCESSORS",
    "FEATURE_CACHE_VERSION": "realformer_tf.feature_cache.FEATURE_CACHE_VERSION",
    "feature_cache_key": "realformer_tf.feature_cache.feature_cache_key",
    "examples_digest": "realformer_tf.feature_cache.examples_digest",
    "HISTORY_FILE": "realformer_tf.training_eval.HISTORY_FILE",
    "HISTORY_SUMMARY_DIR": "realformer_tf.training_eval.HISTORY_SUMMARY_DIR",
    "BEST_DIR": "realformer_tf.training_eval.BEST_DIR",
    "BEST_FILE": "realformer_tf.training_eval.BEST_FILE",
    "EvalHistory": "realformer_tf.training_eval.EvalHistory",
    "read_best_checkpoint": "realformer_tf.training_eval.read_best_checkpoint",
    "remove_stale_best_temps": "realformer_tf.training_eval.remove_stale_best_temps",
    "save_best_checkpoint": "realformer_tf.training_eval.save_best_checkpoint",
    "dev_metrics": "realformer_tf.classifier_outputs.dev_metrics",
    "pool_window_outputs": "realformer_tf.classifier_outputs.pool_window_outputs",
    "predicted_labels": "realformer_tf.classifier_outputs.predicted_labels",
    "format_prediction": "realformer_tf.classifier_outputs.format_prediction",
    "write_submission": "realformer_tf.classifier_outputs.write_submission",
    "write_test_results": "realformer_tf.classifier_outputs.write_test_results",
    "DocWindow": "realformer_tf.sliding_window.Window",
    "_convert_single_example": "realformer_tf.classifier_features.convert_example",
    "document_windows": "realformer_tf.classifier_features.document_windows",
    "window_length_for": "realformer_tf.classifier_features.window_length_for",
    "resolve_doc_stride": "realformer_tf.classifier_features.resolve_doc_stride",
    "convert_example_to_windows": "realformer_tf.classifier_features.convert_example_to_windows",
    "file_based_convert_examples_to_windows":
        "realformer_tf.classifier_features.file_based_convert_examples_to_windows",
    "features_to_tf_example": "realformer_tf.classifier_features.features_to_tf_example",
    "cached_features": "realformer_tf.classifier_features.cached_features",
    "train_shuffle_buffer": "realformer_tf.classifier_features.train_shuffle_buffer",
    "GROUP_WINDOW_BATCHES": "realformer_tf.classifier_features.GROUP_WINDOW_BATCHES",
    "length_grouped_batches": "realformer_tf.classifier_features.length_grouped_batches",
    "SORT_WINDOW_BATCHES": "realformer_tf.classifier_features.SORT_WINDOW_BATCHES",
    "length_sorted_batches": "realformer_tf.classifier_features.length_sorted_batches",
    "training_padding": "realformer_tf.batch_padding.effective_padding",
    "head_shapes": "realformer_tf.classifier_model.head_shapes",
    "model_variable_names": "realformer_tf.classifier_model.model_variable_names",
    "serving_build_fn": "realformer_tf.classifier_model.serving_build_fn",
    "export_classifier": "realformer_tf.classifier_model.export_classifier",
    "_Inference": "realformer_tf.classifier_inference.Inference",
}


# `run_classifier.NAME` for a name of MOVED: one line naming its new place.
__getattr__ = common.moved_names_getattr(__name__, MOVED)


# ----------------------------------------------------------------------------------------------
# The job's settings: read from the flags once, in main.


JobSettings = collections.namedtuple("JobSettings", [
    # Inputs and outputs.
    "data_dir", "output_dir", "init_checkpoint", "allow_unmatched_init", "bert_config_file",
    "vocab_file", "spm_model_file", "do_lower_case", "export_dir", "overwrite",
    # What the job does.
    "do_train", "do_eval", "do_predict",
    # Sizes and the training schedule.
    "max_seq_length", "train_batch_size", "eval_batch_size", "predict_batch_size",
    "learning_rate", "num_train_epochs", "warmup_proportion", "seed",
    # The training engine (ENGINE_ESTIMATOR or ENGINE_TF2) and its checkpointing and logging.
    "engine", "save_checkpoints_steps", "keep_checkpoint_max", "log_every_n_steps",
    # Devices (the batches a training chunk skips).
    "use_tpu", "num_tpu_cores", "num_gpus", "distribution_strategy",
    # Padding: training's and evaluation / prediction's --padding, BERT skipping padding rows.
    "train_padding", "eval_padding", "skip_padding", "group_by_length",
    # model_fn_builder's precision keyword arguments (--precision, --fused_optimizer).
    "precision_kwargs",
    # Evaluation during training.
    "eval_every_steps", "early_stopping_patience", "keep_best",
    # Task options: class weights, multi-label threshold, long documents.
    "class_weights", "multilabel_threshold", "tune_threshold", "long_document", "doc_stride",
    "window_pooling",
    # The TF2 engine's tf.distribute strategy (made first thing in main; None on the Estimator)
    # and the directory of its checkpoints, --output_dir, which every worker of a multi-worker
    # job reads (output_dir is where this process writes: tf2_training.worker_output_dir).
    "strategy", "model_dir",
    # The whole flag set, for estimator_utils.make_estimator and resume_skip_batches only.
    "flag_values",
])


def job_settings(flag_values, strategy=None):
  """The values the job reads, from the parsed flags (after main's checks).

  Args:
    flag_values: the parsed flags (FLAGS).
    strategy: the TF2 engine's strategy (tf2_training.command_strategy), or None.

  Returns:
    JobSettings.
  """
  return common.settings_from_flags(
      JobSettings, flag_values,
      engine=ENGINE_ESTIMATOR if estimator_utils.has_estimator() else ENGINE_TF2,
      # Training as evaluation: model_fn draws dropout masks at --max_seq_length
      # (modeling.full_length_dropout), so the weights equal a max_length run's to float
      # rounding; bucket with --use_xla, max_length on TPU.
      train_padding=batch_padding.effective_padding(flag_values, training=True,
                                                    full_length_dropout=True),
      eval_padding=batch_padding.effective_padding(flag_values),
      skip_padding=batch_padding.skips_padding(flag_values),
      precision_kwargs=estimator_utils.precision_kwargs(flag_values),
      strategy=strategy,
      model_dir=flag_values.output_dir,
      flag_values=flag_values)


# ----------------------------------------------------------------------------------------------
# Main: the flag checks.


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
  _check_extension_flags()


def _check_extension_flags():
  """One-line errors for the evaluation-during-training, multi-label, class-weight and
  long-document flags (those that need no task)."""
  batch_padding.check_padding_flag(FLAGS)
  if getattr(FLAGS, "group_by_length", False) and not FLAGS.do_train:
    common.fail("--group_by_length: groups training batches; it needs --do_train")
  training_eval.check_flags(FLAGS)
  if FLAGS.task_type == "multilabel" and (
      FLAGS.processor or classifier_tasks.normalize_task_name(FLAGS.task_name) != "tsv"):
    common.fail("--task_type=multilabel: only for --task_name=tsv")
  if not 0.0 <= FLAGS.multilabel_threshold <= 1.0:
    common.fail("--multilabel_threshold=%s: must be in [0, 1]" % FLAGS.multilabel_threshold)
  if FLAGS.tune_threshold and FLAGS.task_type != "multilabel":
    common.fail("--tune_threshold: only for --task_type=multilabel")
  if FLAGS.doc_stride is not None:
    if FLAGS.long_document != "window":
      common.fail("--doc_stride=%d: only used with --long_document=window" % FLAGS.doc_stride)
    if FLAGS.doc_stride < 1:
      common.fail("--doc_stride=%d: must be >= 1" % FLAGS.doc_stride)


def _check_task_flags(task):
  """One-line errors for flags that do not fit the task (--class_weights, the window of
  --long_document=window)."""
  if FLAGS.class_weights and (task.is_regression or task.is_multilabel):
    common.fail("--class_weights=%s: only for single-label classification (task %s is %s)" %
                (FLAGS.class_weights, task.name,
                 "regression" if task.is_regression else "multi-label"))
  classifier_features.resolve_doc_stride(task, FLAGS.long_document, FLAGS.max_seq_length,
                                         FLAGS.doc_stride)


def _require_task_files(task, settings):
  """Fails before any work if a file the requested modes need is missing in --data_dir."""
  needed = []
  if settings.do_train:
    needed.append((task.train, "--do_train"))
  if settings.do_eval or settings.eval_every_steps:
    needed.extend((f, "--do_eval" if settings.do_eval else "--eval_every_steps")
                  for f in task.dev)
  if settings.do_predict:
    needed.extend((f, "--do_predict") for f in task.test)
  for task_file, mode in needed:
    if task_file.file_name is None:
      continue  # A DataProcessor's files: it reports them itself (task_examples).
    path = os.path.join(settings.data_dir, task_file.file_name)
    if not tf.io.gfile.exists(path):
      common.fail("--data_dir=%s: has no %s (needed by %s for task %s)" %
                  (settings.data_dir, task_file.file_name, mode, task.name))


def export_protected_paths(settings):
  """What an --export_dir must never replace: this job's --output_dir and its inputs.

  Args:
    settings: JobSettings.

  Returns:
    List of paths (checkpoint prefixes included) for export_utils.export_saved_model.
  """
  return [p for p in (settings.output_dir, settings.init_checkpoint, settings.data_dir,
                      settings.vocab_file, settings.spm_model_file, settings.bert_config_file)
          if p]


def _eval_actions(settings):
  """The modes of a job that read trained weights, as the user typed them."""
  return "/".join(name for name, on in (("--do_eval", settings.do_eval),
                                        ("--do_predict", settings.do_predict),
                                        ("--export_dir", settings.export_dir)) if on)


def _check_engine_flags():
  """One-line errors for the device, precision and distribution flags: on the TF2 engine those
  only the Estimator implements (tf2_training.check_flags), on both the combinations
  estimator_utils refuses."""
  if not estimator_utils.has_estimator():
    tf2_training.check_flags(FLAGS, "run_classifier.py", xla=True,
                             precisions=tf2_training.ENGINE_PRECISIONS, multi_worker=True,
                             tpu=True)
  estimator_utils.validate_estimator_flags(FLAGS)
  estimator_utils.check_supported(FLAGS, SUPPORTED_MODEL_FN_FLAGS)


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  _check_flags()
  _check_engine_flags()
  # The TF2 engine's strategy, before any TensorFlow operation runs (a multi-worker one must).
  strategy = None if estimator_utils.has_estimator() else tf2_training.command_strategy(FLAGS)
  tf2_training.check_multi_worker_job(
      strategy, FLAGS.do_train, [("--eval_every_steps=%d" % FLAGS.eval_every_steps,
                                  FLAGS.eval_every_steps > 0)])
  # A worker other than the chief trains only (tf2_training.worker_settings).
  settings = tf2_training.worker_settings(job_settings(FLAGS, strategy), do_eval=False,
                                          do_predict=False, export_dir=None)
  task = classifier_tasks.get_task(FLAGS.task_name, FLAGS)
  _check_task_flags(task)  # before the lock: a bad flag leaves nothing behind
  if FLAGS.class_weights and FLAGS.class_weights.strip().lower() != "auto" and task.labels:
    # (A tsv task's labels come later.)
    classifier_tasks.resolve_class_weights(FLAGS.class_weights, task, None)
  bert_config = model_config.load_config(FLAGS.bert_config_file, FLAGS, FLAGS.max_seq_length)
  if FLAGS.data_dir:
    _require_task_files(task, settings)
  tokenizer = tokenization.checked_tokenizer(
      FLAGS.vocab_file, FLAGS.do_lower_case, init_checkpoint=FLAGS.init_checkpoint,
      spm_model_file=FLAGS.spm_model_file, vocab_size=bert_config.vocab_size,
      config_name=FLAGS.bert_config_file)
  if FLAGS.export_dir:
    # Checked before any training, so that a bad target costs nothing (and again at export).
    common.check_export_dir(FLAGS.export_dir, "export_dir", FLAGS.overwrite,
                            export_protected_paths(settings))
  # One job per directory, taken before the directory's checkpoint is read: two training jobs
  # would interleave checkpoints and overwrite each other's results, and an evaluation beside a
  # training job would score whichever intermediate checkpoint happens to be the latest.
  with common.OutputDirLock(settings.output_dir, "output_dir"):
    eval_weights = None
    if not FLAGS.do_train:
      # Scores of a randomly initialised model would look like a result: no trained weights is
      # one line (unless --allow_random_eval), before any work.
      eval_weights = checkpoint_utils.require_eval_weights(
          _eval_actions(settings), FLAGS.output_dir, FLAGS.init_checkpoint,
          classifier_model.model_variable_names(bert_config),
          allow_random_eval=FLAGS.allow_random_eval, allow_unmatched=FLAGS.allow_unmatched_init)
    _run_job(task, bert_config, tokenizer, settings, eval_weights)


# ----------------------------------------------------------------------------------------------
# The job: every value from its arguments (main reads the flags).


def _run_job(task, bert_config, tokenizer, settings, eval_weights=None):
  """Trains / evaluates / predicts / exports as the settings say (after main's checks).

  Args:
    task: classifier_tasks.Task.
    bert_config: modeling.BertConfig (with the flag overrides).
    tokenizer: the checked FullTokenizer.
    settings: JobSettings.
    eval_weights: without --do_train, the checkpoint require_eval_weights found (None: random
      weights, --allow_random_eval).
  """
  if task.name == "tsv" and not task.is_regression:
    classifier_tasks.resolve_tsv_labels(task, settings.data_dir, settings.output_dir)
  doc_stride = classifier_features.resolve_doc_stride(
      task, settings.long_document, settings.max_seq_length, settings.doc_stride)
  tf1.logging.info("Padding: training %s, evaluation / prediction %s%s",
                   settings.train_padding + (" (--group_by_length)" if settings.group_by_length
                                             else ""),
                   settings.eval_padding,
                   " (--use_tpu: static shapes)" if settings.use_tpu else
                   "; BERT skips the padding rows" if settings.skip_padding else "")
  # Before anything is written there: a checkpoint of another model (or label list) in
  # --output_dir would otherwise fail deep inside the restore, after bert_config.json and
  # labels.txt were replaced.
  resume_step = estimator_utils.check_resume(
      settings.output_dir, bert_config,
      label_list=None if task.is_regression else task.labels,
      extra_shapes=classifier_model.head_shapes(task, bert_config),
      restore=estimator_utils.restore_mode(settings.do_train,
                                           settings.do_eval or settings.do_predict))
  tf.io.gfile.makedirs(settings.output_dir)
  cache_args = dict(tokenizer=tokenizer, task=task, max_seq_length=settings.max_seq_length,
                    vocab_file=settings.vocab_file, do_lower_case=settings.do_lower_case,
                    spm_model_file=settings.spm_model_file, doc_stride=doc_stride)
  train_examples, dev_examples, test_examples = _read_job_examples(task, settings)
  # A killed --keep_best job's temporaries (this job holds the directory's lock).
  training_eval.remove_stale_best_temps(settings.output_dir)
  class_weights = _job_class_weights(task, train_examples, settings)
  train_cache = None
  num_train_steps = num_warmup_steps = None
  if settings.do_train:
    train_cache = classifier_features.cached_features(
        train_examples, _task_file_path(settings.data_dir, task.train),
        os.path.join(settings.output_dir, "train.tf_record"), **cache_args)
    # Every window is a training example (one per example without windowing).
    num_train_steps = max(1, int(train_cache["num_records"] / settings.train_batch_size *
                                 settings.num_train_epochs))
    num_warmup_steps = int(num_train_steps * settings.warmup_proportion)
  trainer = _job_trainer(task, bert_config, num_train_steps, num_warmup_steps, class_weights,
                         settings)
  inference = _job_inference(task, trainer, cache_args, class_weights, settings)

  summary = _job_summary(task, class_weights, doc_stride, settings.window_pooling)
  if settings.do_train:
    summary.update(_train(task, bert_config, trainer, train_cache, num_train_steps,
                          num_warmup_steps, resume_step, inference,
                          dev_examples.get(task.dev[0].cache_name), settings))
  scored_checkpoint, scored, best = _scored_checkpoint(settings.output_dir, settings.keep_best)
  # Which weights every result below comes from: the scored checkpoint; without one (no
  # training, nothing in --output_dir) the --init_checkpoint the model starts from, or None.
  record = checkpoint_utils.checkpoint_record(scored_checkpoint or eval_weights)
  threshold = settings.multilabel_threshold
  if settings.do_eval:
    threshold = _evaluate(task, inference, dev_examples, scored_checkpoint, scored, best,
                          record, summary, settings)
  elif settings.tune_threshold and (settings.do_predict or settings.export_dir):
    threshold = _saved_threshold(settings.output_dir, scored_checkpoint)
  if settings.do_predict:
    _predict(task, inference, test_examples, scored_checkpoint, record, threshold,
             settings.output_dir)
  if settings.export_dir:
    common.STOP_SIGNALS.exit_if_stopped()
    threshold_source = None
    if task.is_multilabel:
      threshold_source = "--multilabel_threshold"
      if settings.tune_threshold:
        threshold_source = "%s (tuned on dev)" % os.path.join(settings.output_dir,
                                                             THRESHOLD_FILE)
    classifier_model.export_classifier(
        task, bert_config, settings.export_dir,
        scored_checkpoint or settings.init_checkpoint, settings.max_seq_length,
        vocab_file=settings.vocab_file, spm_model_file=settings.spm_model_file,
        do_lower_case=settings.do_lower_case, overwrite=settings.overwrite,
        protected_paths=export_protected_paths(settings), threshold=threshold,
        doc_stride=doc_stride, window_pooling=settings.window_pooling,
        threshold_source=threshold_source)


def _task_file_path(data_dir, task_file):
  """The path of a task file in --data_dir, or None for a DataProcessor's split."""
  if task_file.file_name is None:
    return None
  return os.path.join(data_dir, task_file.file_name)


def _read_job_examples(task, settings):
  """Reads the examples of every split the job needs, before any training: a bad label costs
  nothing instead of the whole training run.

  Args:
    task: classifier_tasks.Task.
    settings: JobSettings.

  Returns:
    (train_examples or None, {dev cache_name: examples}, {test cache_name: examples}).
  """
  def read(task_file, split, required):
    examples = classifier_tasks.task_examples(task, task_file, settings.data_dir, split)
    if required and not examples:
      common.fail("--data_dir=%s: %s has no usable examples" %
                  (settings.data_dir, classifier_tasks.split_description(task, task_file)))
    return examples

  train_examples = read(task.train, "train", True) if settings.do_train else None
  dev_examples = {}
  if settings.do_eval or settings.eval_every_steps:
    for dev_file in task.dev:
      dev_examples[dev_file.cache_name] = read(dev_file, "dev", True)
  test_examples = {}
  if settings.do_predict:
    for test_file in task.test:
      test_examples[test_file.cache_name] = read(test_file, "test", False)
  return train_examples, dev_examples, test_examples


def _job_class_weights(task, train_examples, settings):
  """The loss weights of --class_weights (None without), logged."""
  if not settings.class_weights:
    return None
  weight_examples = train_examples
  if weight_examples is None and settings.class_weights.strip().lower() == "auto":
    weight_examples = _training_examples_if_any(task, settings.data_dir)
  class_weights = classifier_tasks.resolve_class_weights(settings.class_weights, task,
                                                         weight_examples)
  tf1.logging.info("Class weights: %s", ", ".join(
      "%s=%.4f" % (label, w) for label, w in zip(task.labels, class_weights)))
  return class_weights


def _training_examples_if_any(task, data_dir):
  """The training examples when the task's training set can be read (else None: no
  --data_dir, or no training file in it)."""
  if not data_dir:
    return None
  path = _task_file_path(data_dir, task.train)
  if path is not None and not tf.io.gfile.exists(path):
    return None
  return classifier_tasks.task_examples(task, task.train, data_dir, "train")


def _job_model_fn(task, bert_config, num_train_steps, num_warmup_steps, class_weights,
                  settings):
  """model_fn_builder with the job's settings."""
  return model_fn_builder(
      bert_config=bert_config,
      num_labels=task.num_labels,
      init_checkpoint=settings.init_checkpoint,
      learning_rate=settings.learning_rate,
      num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps,
      use_tpu=settings.use_tpu,
      use_one_hot_embeddings=settings.use_tpu,
      is_regression=task.is_regression,
      extra_predictions=True,
      is_multilabel=task.is_multilabel,
      class_weights=class_weights,
      max_seq_length=settings.max_seq_length,
      skip_padding=settings.skip_padding,
      allow_unmatched_init=settings.allow_unmatched_init,
      **settings.precision_kwargs)


def _job_trainer(task, bert_config, num_train_steps, num_warmup_steps, class_weights, settings):
  """What trains and predicts: the Estimator's model_fn (ENGINE_ESTIMATOR) or a
  tf2_training.Engine over the same graph (ENGINE_TF2)."""
  if settings.engine == ENGINE_ESTIMATOR:
    return _job_model_fn(task, bert_config, num_train_steps, num_warmup_steps, class_weights,
                         settings)
  strategy = settings.strategy
  on_tpu = tf2_training.is_tpu_strategy(strategy)

  def model_fn(features, is_training):
    """model_fn_builder's graph: (loss, its PREDICT outputs with the extra predictions)."""
    (total_loss, per_example_loss, logits, outputs, label_ids,
     is_real_example) = _classifier_graph(
         features, is_training, bert_config, task.num_labels, on_tpu,
         is_regression=task.is_regression, is_multilabel=task.is_multilabel,
         class_weights=class_weights, max_seq_length=settings.max_seq_length,
         skip_padding=settings.skip_padding and not on_tpu,
         compute_dtype=modeling.get_compute_dtype(settings.precision_kwargs["precision"]))
    return total_loss, _classifier_predictions(
        features, outputs, task.is_regression,
        (per_example_loss, label_ids, is_real_example, logits))

  return tf2_training.Engine(
      model_fn, settings.model_dir, strategy=strategy,
      train_batch_size=settings.train_batch_size, learning_rate=settings.learning_rate,
      num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
      init_checkpoint=settings.init_checkpoint,
      allow_unmatched_init=settings.allow_unmatched_init, seed=settings.seed,
      save_checkpoints_steps=settings.save_checkpoints_steps,
      keep_checkpoint_max=settings.keep_checkpoint_max,
      log_every_n_steps=settings.log_every_n_steps,
      fused_optimizer=settings.precision_kwargs["fused_optimizer"],
      use_xla=settings.flag_values.use_xla,
      loss_scale=estimator_utils.loss_scale_for(settings.precision_kwargs["precision"]))


def _make_estimator(model_fn, settings, predict_batch_size):
  """estimator_utils.make_estimator of the job's model_fn in --output_dir."""
  return estimator_utils.make_estimator(
      model_fn, settings.flag_values, settings.output_dir, settings.train_batch_size,
      settings.eval_batch_size, predict_batch_size=predict_batch_size,
      supported_flags=SUPPORTED_MODEL_FN_FLAGS)


def _job_inference(task, trainer, cache_args, class_weights, settings):
  """The job's classifier_inference.Inference (dev metrics, test predictions).

  Args:
    task: classifier_tasks.Task.
    trainer: the Estimator's model_fn, or the tf2_training.Engine (_job_trainer).
    cache_args: the keyword arguments of cached_features shared by every file.
    class_weights: the loss weights, or None.
    settings: JobSettings.

  Returns:
    classifier_inference.Inference.
  """
  if settings.engine == ENGINE_TF2:
    estimator_for = trainer.predictor
  else:
    estimator_for = lambda batch_size: _make_estimator(trainer, settings, batch_size)
  return classifier_inference.Inference(
      task,
      estimator_for,
      lambda task_file, examples, batch_size, purpose: _inference_input(
          task, task_file, examples, cache_args, batch_size, purpose, settings),
      settings.eval_batch_size, settings.predict_batch_size,
      window_pooling=settings.window_pooling, class_weights=class_weights,
      multilabel_threshold=settings.multilabel_threshold,
      tune_threshold=settings.tune_threshold)


def _inference_input(task, task_file, examples, cache_args, batch_size, purpose, settings):
  """Caches the features of a dev or test file and builds its input_fn.

  On TPU the features are padded to a multiple of batch_size so no example is dropped. With
  --padding=longest or bucket the batches hold examples of similar length (sort_by_length:
  far less padding; classifier_inference.Inference restores the file's order).

  Args:
    task: classifier_tasks.Task.
    task_file: the TaskFile being evaluated or predicted.
    examples: its InputExamples.
    cache_args: the keyword arguments of cached_features shared by every file.
    batch_size: eval or predict batch size.
    purpose: "evaluation" or "prediction", for the log.
    settings: JobSettings.

  Returns:
    (cache dict of cached_features, input_fn).
  """
  padding = settings.eval_padding
  cache = classifier_features.cached_features(
      examples, _task_file_path(settings.data_dir, task_file),
      os.path.join(settings.output_dir, task_file.cache_name + ".tf_record"),
      pad_to_multiple=batch_size if settings.use_tpu else 1, **cache_args)
  tf1.logging.info("***** Running %s on %s *****", purpose,
                   classifier_tasks.split_description(task, task_file))
  tf1.logging.info("  Num examples = %d (%d actual, %d padding)%s", cache["num_padded"],
                   cache["num_examples"], cache["num_padded"] - cache["num_examples"],
                   " in %d windows" % cache["num_records"] if cache["windows"] else "")
  input_fn = file_based_input_fn_builder(
      input_file=cache["file"], seq_length=settings.max_seq_length, is_training=False,
      drop_remainder=settings.use_tpu, is_regression=task.is_regression,
      multilabel_num_labels=task.num_labels if task.is_multilabel else None,
      padding=padding, sort_by_length=padding != "max_length")
  return cache, input_fn


def _job_summary(task, class_weights, doc_stride, window_pooling):
  """What eval_results.json records of the job's set-up (class weights, windowing)."""
  summary = {}
  if class_weights is not None:
    for label, weight in zip(task.labels, class_weights):
      summary["class_weight_%s" % label] = weight
  if doc_stride is not None:
    summary.update(long_document="window", doc_stride=doc_stride,
                   window_pooling=window_pooling)
  return summary


def _train(task, bert_config, trainer, train_cache, num_train_steps, num_warmup_steps,
           resume_step, inference, dev_examples, settings):
  """--do_train: writes bert_config.json and labels.txt, then trains (with evaluations when
  --eval_every_steps is set).

  Args:
    task: classifier_tasks.Task.
    bert_config: modeling.BertConfig.
    trainer: the Estimator's model_fn, or the tf2_training.Engine (_job_trainer).
    train_cache: cached_features of the training set.
    num_train_steps: the schedule's last step.
    num_warmup_steps: warm-up steps (logged).
    resume_step: the step of the checkpoint resumed from (None: a new job).
    inference: classifier_inference.Inference (evaluations during training).
    dev_examples: the examples of the first dev file, or None.
    settings: JobSettings.

  Returns:
    dict for eval_results (num_train_steps, train_seconds, and the evaluation summary).
  """
  model_config.save_config(bert_config, settings.output_dir)
  if not task.is_regression:
    with common.atomic_output(os.path.join(settings.output_dir, "labels.txt")) as f:
      f.write("".join(label + "\n" for label in task.labels))
  tf1.logging.info("***** Running training *****")
  tf1.logging.info("  Num examples = %d%s", train_cache["num_examples"],
                   " (%d windows)" % train_cache["num_records"] if train_cache["windows"]
                   else "")
  tf1.logging.info("  Batch size = %d", settings.train_batch_size)
  tf1.logging.info("  Num steps = %d (warm-up %d)", num_train_steps, num_warmup_steps)
  start = time.time()
  if settings.eval_every_steps:
    summary = _train_with_evaluation(task, trainer, train_cache, num_train_steps, resume_step,
                                     inference, dev_examples, settings)
  else:
    rate = _train_to_end(task, trainer, train_cache, num_train_steps, resume_step, settings)
    tf1.logging.info("Training done: %d steps in %s%s", num_train_steps,
                     common.format_duration(time.time() - start),
                     " (%.2f steps/s)" % rate if rate else "")
    # The target beside global_step: a reader (paper/sweep.py) can check the step was reached.
    summary = {"num_train_steps": num_train_steps}
  summary["train_seconds"] = round(time.time() - start, 1)
  return summary


def _train_to_end(task, trainer, train_cache, num_train_steps, resume_step, settings):
  """Trains to num_train_steps in one call of the engine.

  On SIGINT / SIGTERM the step finishes, the engine checkpoints, and the job exits 130 / 143
  here without writing any result that would make it look finished.

  Args:
    task: classifier_tasks.Task.
    trainer: the Estimator's model_fn, or the tf2_training.Engine.
    train_cache: cached_features of the training set.
    num_train_steps: the schedule's last step.
    resume_step: the step of the checkpoint resumed from (None: a new job).
    settings: JobSettings.

  Returns:
    The steady steps per second, or None when too few steps ran to measure it.
  """
  if settings.engine == ENGINE_TF2:
    result = trainer.train(_engine_train_input_fn_for(task, train_cache, settings),
                           num_train_steps)
    common.STOP_SIGNALS.exit_if_stopped()
    return result.steps_per_second
  estimator = _make_estimator(trainer, settings, settings.predict_batch_size)
  train_input_fn = _train_input_fn(
      task, train_cache,
      estimator_utils.resume_skip_batches(resume_step, settings.flag_values), settings)
  hook = estimator_utils.ProgressHook(num_train_steps, settings.train_batch_size)
  estimator.train(input_fn=train_input_fn, max_steps=num_train_steps,
                  hooks=[hook, estimator_utils.StopOnSignalHook()])
  common.STOP_SIGNALS.exit_if_stopped()
  return hook.last_rate


def _engine_train_input_fn_for(task, train_cache, settings):
  """tf2_training.Engine.train's input: skip_batches -> the training input_fn."""
  return lambda skip_batches: _train_input_fn(task, train_cache, skip_batches, settings)


def _train_with_evaluation(task, trainer, train_cache, num_train_steps, resume_step,
                           inference, dev_examples, settings):
  """Trains in chunks of --eval_every_steps, evaluating the dev set after each
  (training_eval.train_with_evaluation).

  The checkpoint of each chunk is scored on the first dev file (its main metric decides the
  best and early stopping). Each chunk's input skips the batches trained so far, so the chunks
  read the stream one uninterrupted training call reads (the same weights, and a killed job
  resumes exactly as without evaluation).

  Args:
    task: classifier_tasks.Task.
    trainer: the Estimator's model_fn, or the tf2_training.Engine.
    train_cache: cached_features of the training set.
    num_train_steps: the schedule's last step.
    resume_step: the step of the checkpoint resumed from (None: a new job).
    inference: classifier_inference.Inference.
    dev_examples: the examples of the first dev file, when already read (else None).
    settings: JobSettings.

  Returns:
    training_eval.train_with_evaluation's summary dict (for eval_results).
  """
  dev_file = task.dev[0]
  dev_examples = dev_examples or classifier_tasks.task_examples(task, dev_file,
                                                                settings.data_dir, "dev")
  if not dev_examples:
    common.fail("--data_dir=%s: %s has no usable examples (needed by --eval_every_steps)" %
                (settings.data_dir, classifier_tasks.split_description(task, dev_file)))
  if settings.engine == ENGINE_TF2:
    def train_to(step, target):  # pylint: disable=unused-argument
      # The engine resumes from the latest checkpoint (that of `step`), skipping its batches.
      trainer.train(_engine_train_input_fn_for(task, train_cache, settings), target)
      common.STOP_SIGNALS.exit_if_stopped()
      return estimator_utils.latest_global_step(settings.output_dir)
  else:
    estimator = _make_estimator(trainer, settings, settings.predict_batch_size)

    def train_to(step, target):
      train_input_fn = _train_input_fn(task, train_cache, _chunk_skip_batches(step, settings),
                                       settings)
      hook = estimator_utils.ProgressHook(num_train_steps, settings.train_batch_size)
      estimator.train(input_fn=train_input_fn, max_steps=target,
                      hooks=[hook, estimator_utils.StopOnSignalHook()])
      common.STOP_SIGNALS.exit_if_stopped()
      return estimator_utils.latest_global_step(settings.output_dir)

  return training_eval.train_with_evaluation(
      settings.output_dir, task.main_metric, num_train_steps, resume_step,
      settings.eval_every_steps, train_to,
      lambda checkpoint: inference.evaluate(dev_file, dev_examples, checkpoint),
      patience=settings.early_stopping_patience, keep_best=settings.keep_best)


def _train_input_fn(task, train_cache, skip_batches, settings):
  """The training input_fn (shuffled with --seed) that skips the batches trained so far."""
  return file_based_input_fn_builder(
      input_file=train_cache["file"], seq_length=settings.max_seq_length, is_training=True,
      drop_remainder=True, is_regression=task.is_regression, seed=settings.seed,
      skip_batches=skip_batches,
      multilabel_num_labels=task.num_labels if task.is_multilabel else None,
      shuffle_buffer=classifier_features.train_shuffle_buffer(train_cache),
      padding=settings.train_padding, group_by_length=settings.group_by_length)


def _chunk_skip_batches(step, settings):
  """Batches a training chunk that starts at `step` skips: those trained so far.

  Without TPU or a distribution strategy the input_fn batch is the global batch, one per step
  (resume_skip_batches: exact). On TPU / under a strategy its batches are per core / replica,
  `replicas` of them per step, so the chunk skips step * replicas of them; on one host or
  worker this continues the stream (several read it each from its start, as a resumed job).
  """
  if not (settings.use_tpu or settings.distribution_strategy != "none"):
    return estimator_utils.resume_skip_batches(step, settings.flag_values)
  replicas = settings.num_tpu_cores if settings.use_tpu else (
      settings.num_gpus or max(1, len(tf.config.list_logical_devices("GPU")) or
                               len(tf.config.list_logical_devices("CPU"))))
  return step * replicas


def _scored_checkpoint(output_dir, keep_best):
  """The checkpoint that --do_eval scores and --do_predict / --export_dir use: the best one
  with --keep_best (when there is one), else the latest.

  Args:
    output_dir: --output_dir.
    keep_best: --keep_best.

  Returns:
    (checkpoint prefix or None, "best" or "last", the best.json dict or None).
  """
  scored_checkpoint, scored = tf1.train.latest_checkpoint(output_dir), "last"
  best = training_eval.read_best_checkpoint(output_dir) if keep_best else None
  if best is not None:
    scored_checkpoint, scored = best["path"], "best"
    tf1.logging.info("--keep_best: using the best checkpoint %s (step %d, %s = %.6g)",
                     best["path"], best["step"], best["metric"], best["score"])
  elif keep_best:
    tf1.logging.warning("--keep_best: no best checkpoint in %s/%s; using the latest",
                        output_dir, training_eval.BEST_DIR)
  return scored_checkpoint, scored, best


THRESHOLD_FILE = "threshold.json"


def _evaluate(task, inference, dev_examples, scored_checkpoint, scored, best, record, summary,
              settings):
  """--do_eval: scores every dev file and writes eval_results.json (and threshold.json with
  --tune_threshold).

  Dev sets go through Estimator.predict (batch --eval_batch_size) and the metrics are computed
  exactly in Python; on TPU the set is padded so no example is dropped.

  Args:
    task: classifier_tasks.Task.
    inference: classifier_inference.Inference.
    dev_examples: {dev cache_name: examples}.
    scored_checkpoint: the checkpoint scored (None: the latest in --output_dir).
    scored: "best" or "last".
    best: the best.json dict, or None.
    record: checkpoint_utils.checkpoint_record of the weights.
    summary: what the job adds to the results (set-up, training).
    settings: JobSettings.

  Returns:
    The multi-label threshold for prediction and export (tuned, or --multilabel_threshold).
  """
  results = {}
  for dev_file in task.dev:
    start = time.time()
    metrics = inference.evaluate(dev_file, dev_examples[dev_file.cache_name],
                                 scored_checkpoint)
    tf1.logging.info("  %s: %d examples in %.1f s",
                     classifier_tasks.split_description(task, dev_file),
                     metrics["num_examples"], time.time() - start)
    prefixes = ["eval_"] if not dev_file.name else ["eval_%s_" % dev_file.name]
    if task.name == "mnli" and not dev_file.name:
      prefixes.append("eval_matched_")
    for prefix in prefixes:
      for key, value in metrics.items():
        results[prefix + key] = value
  results["global_step"] = estimator_utils.latest_global_step(settings.output_dir)
  if scored_checkpoint:
    results["scored_checkpoint"] = scored
    results["scored_step"] = training_eval.checkpoint_step(scored_checkpoint)
  if best is not None:
    results.update(best_step=best["step"], best_score=best["score"], main_metric=best["metric"])
  results.update(checkpoint=record["checkpoint"], checkpoint_step=record["global_step"])
  results.update(summary)
  # A signal during evaluation: no results file, so the job does not look finished.
  common.STOP_SIGNALS.exit_if_stopped()
  threshold = settings.multilabel_threshold
  if settings.tune_threshold:
    threshold = results["eval_tuned_threshold"]
    common.write_json_atomic(os.path.join(settings.output_dir, THRESHOLD_FILE), {
        "threshold": threshold, "micro_f1": results["eval_tuned_micro_f1"],
        "checkpoint_step": results.get("scored_step"), "scored_checkpoint": scored})
  estimator_utils.write_eval_results(settings.output_dir, results)
  return threshold


def _saved_threshold(output_dir, checkpoint):
  """--tune_threshold without --do_eval: the threshold tuned for this checkpoint earlier."""
  path = os.path.join(output_dir, THRESHOLD_FILE)
  step = training_eval.checkpoint_step(checkpoint) if checkpoint else None
  saved = None
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      saved = json.load(f)
  if not saved or saved.get("checkpoint_step") != step:
    common.fail("--tune_threshold: no threshold tuned for the checkpoint of step %s in %s "
                "(run --do_eval with --tune_threshold first)" % (step, path))
  tf1.logging.info("Multi-label threshold %.6g (tuned on dev for step %s, %s)",
                   saved["threshold"], step, path)
  return float(saved["threshold"])


def _predict(task, inference, test_examples, scored_checkpoint, record, threshold, output_dir):
  """--do_predict: the submission file and the official test_results.tsv of every test file,
  each with its checkpoint sidecar.

  Args:
    task: classifier_tasks.Task.
    inference: classifier_inference.Inference.
    test_examples: {test cache_name: examples}.
    scored_checkpoint: the checkpoint used (None: the latest in --output_dir).
    record: checkpoint_utils.checkpoint_record of the weights.
    threshold: multi-label threshold.
    output_dir: --output_dir.
  """
  for test_file in task.test:
    examples = test_examples[test_file.cache_name]
    outputs = inference.predict(test_file, examples, scored_checkpoint)
    if len(outputs) != len(examples):
      raise RuntimeError("predicted %d of %d examples" % (len(outputs), len(examples)))
    common.STOP_SIGNALS.exit_if_stopped()
    submission = os.path.join(output_dir, test_file.name)
    results_name = "test_results.tsv"
    if test_file.cache_name != "predict":
      results_name = "test_results_%s.tsv" % test_file.cache_name.split("_", 1)[1]
    results_path = os.path.join(output_dir, results_name)
    # The official formats have no room for it: which checkpoint produced them is in
    # <file>.checkpoint.json, removed first so a kill in between leaves none that is wrong.
    for path in (submission, results_path):
      checkpoint_utils.remove_sidecar(path)
    classifier_outputs.write_submission(submission, task, examples, outputs, threshold=threshold)
    classifier_outputs.write_test_results(results_path, task, outputs)
    for path in (submission, results_path):
      checkpoint_utils.write_sidecar(path, record)
    tf1.logging.info("Wrote %d predictions to %s and %s", len(outputs), submission,
                     results_name)


def run(argv=None):
  """Defines the flags and runs main() as `python run_classifier.py` does.

  For users' scripts that register_processor() their own DataProcessor first.

  Args:
    argv: command line (default sys.argv).
  """
  define_flags()
  app.run(lambda args: common.run_main(main, args), argv=argv,
          flags_parser=common.flags_parser(FLAGS))


if __name__ == "__main__":
  run()
