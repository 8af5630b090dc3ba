# coding=utf-8
r"""Exports BERT/RealFormer checkpoints as TF2 SavedModels in the TF-Hub BERT layout.

Three kinds of SavedModel (--mode, several comma-separated modes in one call write
<export_dir>/<mode> each):

  encoder       int32 `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq] ->
                `pooled_output` [batch, hidden], `sequence_output` [batch, seq, hidden],
                `encoder_outputs` (list, one [batch, seq, hidden] per layer), `default`
                (= pooled_output). --with_attention adds `attention_scores` / `attention_probs`
                (lists per layer, [batch, heads, seq, seq]); --with_mlm adds an `mlm` sub-object
                (the three inputs + `masked_lm_positions` [batch, n] -> `mlm_logits`
                [batch, n, vocab], from the cls/predictions weights of a pre-training checkpoint).
                Fine-tunable: hub.KerasLayer(path, trainable=True).
  preprocessor  string [batch] -> the three int32 inputs [batch, --seq_length] (--padding=bucket:
                [batch, the call's longest input rounded up to 16, 32, 64, ...]); sub-objects
                `tokenize` (strings -> RaggedTensor of ids [batch, (words), (pieces)], SentencePiece:
                [batch, (pieces)]) and `bert_pack_inputs(segments, seq_length=...)`. Built with
                tensorflow-text so that the ids equal tokenization.FullTokenizer (see
                `wordpiece_words` for the few remaining differences).
  classifier    raw text -> `probabilities` [batch, num_labels], `predicted_label`,
                `predicted_label_name`, `label_names` (regression: `predictions` [batch]) from a
                run_classifier checkpoint (output_weights / output_bias on the pooled output).
                A request's texts are packed to their longest rounded up to 16, 32, 64, ... or
                --seq_length (--padding=bucket, the default: outputs equal to the fixed-length
                model's to float rounding, less compute on short texts); --padding=max_length
                packs every request to --seq_length.
                A multi-label run (run_classifier --task_type=multilabel, recognised from what
                its output directory records, or --task_type=multilabel): `probabilities` are
                a sigmoid per label, `predicted_labels` int32 [batch, num_labels] (1 where the
                probability >= the threshold), `predicted_label_names` (those labels joined by
                the task's --label_separator) and `label_names`. The threshold: the
                --multilabel_threshold flag, else the one --tune_threshold saved for this
                checkpoint (threshold.json), else the --multilabel_threshold the run was
                evaluated with (eval_results.json), else 0.5; export_info.json says which.
                `serving_ids` takes run_classifier's int32 features instead (`input_ids`,
                `input_mask`, `segment_ids` [batch, --seq_length]) -> `probabilities` and
                `predicted_label` (regression: `predictions`; multi-label: `probabilities`,
                `predicted_labels`): the signature of a client that tokenises itself.
                Texts longer than --seq_length are truncated, or with --long_document=window
                (the default for a run that records it in eval_results.json) cut into windows
                --doc_stride tokens apart whose logits are pooled (--window_pooling), as
                run_classifier evaluates; serving_ids scores the one window it is given.

Usage:
  python export_hub.py --mode=encoder --bert_config_file=bert_config.json \
      --init_checkpoint=model_dir --export_dir=out/hub/encoder [--with_mlm] [--with_attention]
  python export_hub.py --mode=preprocessor --vocab_file=vocab.txt --do_lower_case \
      --export_dir=out/hub/preprocessor [--seq_length=128] [--spm_model_file=...]
  python export_hub.py --mode=classifier --bert_config_file=... --init_checkpoint=glue_out \
      --vocab_file=vocab.txt --export_dir=out/hub/classifier [--label_list=a,b] [--pair_input]

Loading (any fresh TF 2.15 process; models with a preprocessor need `import tensorflow_text`
first, which registers its ops):

  encoder = hub.KerasLayer(path, trainable=True)  # or tf.saved_model.load(path)
  outputs = encoder(dict(input_word_ids=ids, input_mask=mask, input_type_ids=type_ids))

The models are tf.Modules whose tf.functions run the modeling.py graph code (tf.compat.v1
variable scopes) with a custom getter that hands out tf.Variables created from the checkpoint,
so the variable names are the checkpoint names and the math is exactly modeling.BertModel's.
Only the "serve" tag is written; there are no TPU-specific ops.

Every export with weights holds export_info.json: the mode, {"checkpoint": prefix,
"global_step": N} of the weights (null for random weights) and, for a classifier, the task
(task_type, labels, threshold and where it came from). No --init_checkpoint (or one that
supplies none of the model's variables) stops with one line unless --allow_random_eval (then
--bert_config_file is required, a classifier needs --label_list, and the weights are a seeded
random initialisation).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import model_config
from realformer_tf import serving
import tokenization

tf1 = tf.compat.v1

FLAGS = flags.FLAGS


# `export_hub.NAME` for a serving helper that moved into the library: one line naming its place.
__getattr__ = common.moved_names_getattr(__name__, serving)


def define_flags():
  """Defines the tool's flags (not at import time, so tests and other tools can import it)."""
  flags.DEFINE_string("mode", "encoder",
                      "Comma-separated list of encoder, preprocessor, classifier. With several, "
                      "each is written to <export_dir>/<mode>.")
  flags.DEFINE_string("export_dir", None, "SavedModel directory to write (new, or an earlier "
                      "export of ours with --overwrite).")
  flags.DEFINE_bool("overwrite", False, "Replace an earlier export of ours at --export_dir "
                    "(anything else there is refused).")
  flags.DEFINE_string("bert_config_file", None,
                      "bert_config.json (default: the one beside --init_checkpoint).")
  flags.DEFINE_string("init_checkpoint", None, "Checkpoint prefix or model directory.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab (preprocessor, classifier).")
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece model instead of --vocab_file (as tokenization.py).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case (and strip accents from) the input.")
  flags.DEFINE_integer("seq_length", 128, "Default sequence length of the preprocessor.")
  flags.DEFINE_enum(
      "padding", None, ["max_length", "bucket"],
      "max_length: every call's inputs [batch, --seq_length] (the TF-Hub preprocessor's "
      "shape); bucket: a call's inputs padded to its longest text rounded up to 16, 32, 64, "
      "... or --seq_length (less encoder compute on short texts, the same outputs at every "
      "real token to float rounding; for consumers that take any length). bert_pack_inputs "
      "with an explicit seq_length is always that long. Default: max_length for the "
      "preprocessor, bucket for the classifier (its outputs do not depend on the length; "
      "max_length exports the fixed-length model).")
  flags.DEFINE_bool("with_mlm", False, "Encoder: add the `mlm` sub-object (cls/predictions).")
  flags.DEFINE_bool("with_attention", False,
                    "Encoder: also output attention_scores and attention_probs per layer.")
  flags.DEFINE_string("label_list", None,
                      "Classifier: comma-separated label names (default: labels.txt beside the "
                      "checkpoint, else 0..num_labels-1).")
  flags.DEFINE_bool("pair_input", False,
                    "Classifier: serving_default takes `sentence` and `sentence2` (sentence-pair "
                    "task); serving_single and serving_pair are always written.")
  flags.DEFINE_enum("task_type", None, list(serving.TASK_TYPES),
                    "Classifier: the run_classifier task type of the checkpoint (default: what "
                    "its output directory records; else regression for one output, "
                    "classification otherwise). multilabel exports a sigmoid per label.")
  flags.DEFINE_float("multilabel_threshold", None,
                     "Classifier, multi-label: a label is predicted when its probability is >= "
                     "this (default: the run's tuned threshold.json for this checkpoint, else "
                     "the threshold it was evaluated with, else 0.5).")
  flags.DEFINE_enum("long_document", None, ["truncate", "window"],
                    "Classifier: texts longer than --seq_length are truncated, or (window) cut "
                    "into windows --doc_stride tokens apart whose logits are pooled "
                    "(--window_pooling), as run_classifier --long_document=window evaluates "
                    "(default: what the run's eval_results.json records, else truncate). "
                    "serving_ids always scores the one window it is given.")
  flags.DEFINE_integer("doc_stride", None,
                       "Classifier, --long_document=window: tokens between window starts "
                       "(default: the run's, else half a window).")
  flags.DEFINE_enum("window_pooling", None, list(serving.WINDOW_POOLINGS),
                    "Classifier, --long_document=window: how a text's window logits are pooled "
                    "(default: the run's, else mean).")
  model_config.define_model_override_flags()
  checkpoint_utils.define_trained_weights_flags(random_eval=True, unmatched_init=False)


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  modes = [m.strip() for m in FLAGS.mode.split(",") if m.strip()]
  for mode in modes:
    if mode not in serving.MODES:
      common.fail("--mode=%s: unknown mode %r (use %s)" % (FLAGS.mode, mode,
                                                           ", ".join(serving.MODES)))
  if not modes:
    common.fail("--mode is empty")
  if not FLAGS.export_dir:
    common.fail("--export_dir is required")
  if FLAGS.seq_length < 3:
    common.fail("--seq_length=%d: needs room for [CLS] and [SEP]" % FLAGS.seq_length)
  if "classifier" not in modes:
    for name in ("task_type", "multilabel_threshold", "long_document", "doc_stride",
                 "window_pooling"):
      if getattr(FLAGS, name) is not None:
        common.fail("--%s: only for --mode=classifier" % name)

  def out_dir(mode):
    return FLAGS.export_dir if len(modes) == 1 else os.path.join(FLAGS.export_dir, mode)

  checkpoint = bert_config = task = None
  doc_stride, window_pooling = None, "mean"
  if "encoder" in modes or "classifier" in modes:
    if FLAGS.init_checkpoint:
      checkpoint = export_utils.resolve_checkpoint(FLAGS.init_checkpoint)
    else:
      # No trained weights: one line naming the flag, unless --allow_random_eval.
      checkpoint_utils.require_trained_weights("export_hub.py --mode=%s" % FLAGS.mode,
                                               [("init_checkpoint", None)],
                                               allow_random_eval=FLAGS.allow_random_eval)
    bert_config = serving.resolve_bert_config(FLAGS.bert_config_file, checkpoint, FLAGS)
    if checkpoint and not any(name.startswith("bert/")
                              for name, _ in tf.train.list_variables(checkpoint)):
      # Another model's checkpoint (e.g. a translation one): said before any export.
      common.fail("--init_checkpoint=%s: supplies none of the model's bert/* variables (a "
                  "checkpoint of another model?), so there are no trained weights to export; "
                  "give a checkpoint of this model (random weights only deliberately: "
                  "--allow_random_eval and no --init_checkpoint)" % checkpoint)
  if "preprocessor" in modes or "classifier" in modes:
    tokenization.checked_tokenizer(
        FLAGS.vocab_file, FLAGS.do_lower_case, checkpoint, FLAGS.spm_model_file,
        vocab_size=bert_config.vocab_size if bert_config else None)
  # Everything the exports read: the checkpoint's whole directory state (state file, every
  # checkpoint's shards), the config, vocab / SentencePiece model and the run's labels.
  protected = [checkpoint, FLAGS.vocab_file, FLAGS.spm_model_file,
               serving.default_config_file(FLAGS.bert_config_file, checkpoint)]
  protected += checkpoint_utils.checkpoint_files(FLAGS.init_checkpoint)
  protected += checkpoint_utils.checkpoint_files(checkpoint)
  protected += [os.path.join(d, "labels.txt") for d in serving.run_directories(checkpoint)]
  # Every target is checked before the first (slow) export.
  for mode in modes:
    common.check_export_dir(out_dir(mode), "export_dir", FLAGS.overwrite, protected)
  if "classifier" in modes:
    # The task (a multi-label run!) is known before any export.
    task = serving.resolve_classifier_task(checkpoint, FLAGS.label_list, FLAGS.task_type,
                                           FLAGS.multilabel_threshold)
    doc_stride, window_pooling, source = serving.resolve_windowing(
        checkpoint, FLAGS.seq_length, FLAGS.pair_input, FLAGS.long_document, FLAGS.doc_stride,
        FLAGS.window_pooling)
    if doc_stride is not None:
      tf1.logging.info("Long texts: windows %d tokens apart, %s-pooled (%s)", doc_stride,
                       window_pooling, source)
  for mode in modes:
    if mode == "encoder":
      serving.export_encoder(bert_config, checkpoint, out_dir(mode), FLAGS.with_mlm,
                             FLAGS.with_attention, FLAGS.overwrite, protected)
    elif mode == "preprocessor":
      serving.export_preprocessor(out_dir(mode), FLAGS.vocab_file, FLAGS.do_lower_case,
                                  FLAGS.spm_model_file, FLAGS.seq_length, FLAGS.overwrite,
                                  protected, padding=FLAGS.padding or "max_length")
    else:
      serving.export_classifier(bert_config, checkpoint, out_dir(mode), FLAGS.vocab_file,
                                FLAGS.do_lower_case, FLAGS.spm_model_file, FLAGS.seq_length,
                                FLAGS.label_list, FLAGS.pair_input, FLAGS.overwrite, task,
                                protected, padding=FLAGS.padding or "bucket",
                                doc_stride=doc_stride, window_pooling=window_pooling)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
