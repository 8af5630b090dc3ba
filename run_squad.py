# coding=utf-8
# Copyright 2018 The Google AI Language Team Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""Run BERT / RealFormer on SQuAD 1.1 and SQuAD 2.0.

The official google-research/bert algorithm (reader, doc spans, max-context, n-best,
get_final_text, null-score handling, output files and variable names), with:

  * --residual_attention / --layer_norm_type overrides of the config (RealFormer);
  * no crash on odd data: training answers that cannot be found in the context, questions
    without answers and bad answer offsets are logged and counted; a question with no valid
    span at all gets a well-defined prediction instead of an IndexError / AttributeError;
  * built-in scoring: when --predict_file carries gold answers, the official v1.1 / v2.0 rules
    (squad_evaluate.py) are applied and eval_results.{json,txt} written to --output_dir;
  * progress with rate and time remaining, all output files written atomically;
  * --export_dir: a SavedModel (serving_default: int32 input_ids / input_mask / segment_ids
    [batch, max_seq_length] -> start_logits, end_logits [batch, max_seq_length]), float32;
  * --precision=bf16|fp16 (BERT's matmuls in bfloat16 / float16, fp16 with dynamic loss
    scaling; variables, checkpoints, the span logits and the loss float32, as
    run_pretraining.py) and --fused_optimizer.

On TensorFlow 2.15 it trains and predicts with the Estimator; on a TensorFlow without it (2.16
and later), with realformer_tf.tf2_training (tf.distribute): the same flags (--use_tpu through
TPUStrategy, several workers through --distribution_strategy=multi_worker_mirrored; --precision=bf16
and fp16 as there; --iterations_per_loop refused), checkpoints and output files
(docs/compatibility.md, "Training without the Estimator").
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import io
import json
import math
import os
import random

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import batch_padding
from realformer_tf import export_utils
from realformer_tf import model_config
import modeling
from realformer_tf import sliding_window
from realformer_tf import squad_scoring
from realformer_tf import tf2_training
import tokenization

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

# The shared estimator_utils.MODEL_FN_FLAGS this script implements.
SUPPORTED_MODEL_FN_FLAGS = ("precision", "fused_optimizer")

# The training engines: the Estimator (TensorFlow <= 2.15) and, on a TensorFlow without it,
# tf2_training.Engine (tf.distribute; docs/compatibility.md).
ENGINE_ESTIMATOR = "estimator"
ENGINE_TF2 = "tf2"

# Starting value of the feature unique ids (as in the official code).
FIRST_UNIQUE_ID = 1000000000

# null_odds.json value for a question with no valid non-null span anywhere (v2): "no answer"
# wins at every sensible threshold. Finite, so that the file stays strict JSON.
NO_SPAN_NULL_ODDS = 1e6


def define_flags():
  """Defines the official run_squad.py flags plus this project's (call once)."""
  flags.DEFINE_string(
      "bert_config_file", None,
      "The config json file corresponding to the pre-trained BERT model. "
      "This specifies the model architecture.")
  flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
  flags.DEFINE_string("output_dir", None,
                      "The output directory where the model checkpoints will be written.")
  flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
  flags.DEFINE_string("predict_file", None,
                      "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint (usually from a pre-trained BERT model).")
  flags.DEFINE_bool("do_lower_case", True,
                    "Whether to lower case the input text. Should be True for uncased "
                    "models and False for cased models.")
  flags.DEFINE_integer(
      "max_seq_length", 384,
      "The maximum total input sequence length after WordPiece tokenization. Sequences "
      "longer than this will be truncated, and sequences shorter than this will be padded.")
  flags.DEFINE_integer("doc_stride", 128,
                       "When splitting up a long document into chunks, how much stride to "
                       "take between chunks.")
  flags.DEFINE_integer("max_query_length", 64,
                       "The maximum number of tokens for the question. Questions longer than "
                       "this will be truncated to this length.")
  flags.DEFINE_bool("do_train", False, "Whether to run training.")
  flags.DEFINE_bool("do_predict", False, "Whether to run eval on the dev set.")
  flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
  flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.")
  flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
  flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
  flags.DEFINE_float("warmup_proportion", 0.1,
                     "Proportion of training to perform linear learning rate warmup for. "
                     "E.g., 0.1 = 10% of training.")
  flags.DEFINE_integer("n_best_size", 20,
                       "The total number of n-best predictions to generate in the "
                       "nbest_predictions.json output file.")
  flags.DEFINE_integer("max_answer_length", 30,
                       "The maximum length of an answer that can be generated. This is needed "
                       "because the start and end predictions are not conditioned on one "
                       "another.")
  flags.DEFINE_bool("verbose_logging", False,
                    "If true, all of the warnings related to data processing will be printed. "
                    "A number of warnings are expected for a normal SQuAD evaluation.")
  flags.DEFINE_bool("version_2_with_negative", False,
                    "If true, the SQuAD examples contain some that do not have an answer.")
  flags.DEFINE_float("null_score_diff_threshold", 0.0,
                     "If null_score - best_non_null is greater than the threshold predict null.")
  flags.DEFINE_string("export_dir", None,
                      "If set, export the fine-tuned model (latest checkpoint in --output_dir, "
                      "else --init_checkpoint) as a SavedModel here.")
  flags.DEFINE_bool("overwrite", False,
                    "Replace an earlier export of ours at --export_dir (never anything else: "
                    "another directory, a file, checkpoints or this job's inputs and "
                    "--output_dir are refused).")
  flags.DEFINE_bool("output_raw_logits", False,
                    "With --do_predict: also write raw_logits.npz (unique_ids, start_logits, "
                    "end_logits per feature) to --output_dir, e.g. for ensembling.")
  batch_padding.define_padding_flag(
      default_help="Default: max_length. SQuAD windows are mostly full (a context longer than "
      "the window fills it), so longest saves compute only on short contexts; and the "
      "official n-best search ranks every computed position, padding included: under "
      "max_length a padding position beyond a batch's longest window can take one of the "
      "--n_best_size places that a real token takes under longest, so nbest_predictions (and "
      "rarely a prediction) may differ. With longest, raw_logits.npz has -inf at the "
      "positions not computed (bucket: the same, rounded up to a bucket).")
  estimator_utils.define_estimator_flags()
  model_config.define_model_override_flags()


# ----------------------------------------------------------------------------------------------
# Reading SQuAD JSON
# ----------------------------------------------------------------------------------------------


class SquadExample(object):
  """A single training/test example for simple sequence classification.

  For examples without an answer, the start and end position are -1.
  """

  def __init__(self,
               qas_id,
               question_text,
               doc_tokens,
               orig_answer_text=None,
               start_position=None,
               end_position=None,
               is_impossible=False):
    self.qas_id = qas_id
    self.question_text = question_text
    self.doc_tokens = doc_tokens
    self.orig_answer_text = orig_answer_text
    self.start_position = start_position
    self.end_position = end_position
    self.is_impossible = is_impossible

  def __str__(self):
    return self.__repr__()

  def __repr__(self):
    s = "qas_id: %s" % (tokenization.printable_text(self.qas_id))
    s += ", question_text: %s" % (tokenization.printable_text(self.question_text))
    s += ", doc_tokens: [%s]" % (" ".join(self.doc_tokens))
    if self.start_position is not None:
      s += ", start_position: %d" % (self.start_position)
      s += ", end_position: %d" % (self.end_position)
      s += ", is_impossible: %r" % (self.is_impossible)
    return s


class InputFeatures(object):
  """A single set of features of data (one doc span of one example)."""

  def __init__(self,
               unique_id,
               example_index,
               doc_span_index,
               tokens,
               token_to_orig_map,
               token_is_max_context,
               input_ids,
               input_mask,
               segment_ids,
               start_position=None,
               end_position=None,
               is_impossible=None):
    self.unique_id = unique_id
    self.example_index = example_index
    self.doc_span_index = doc_span_index
    self.tokens = tokens
    self.token_to_orig_map = token_to_orig_map
    self.token_is_max_context = token_is_max_context
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.start_position = start_position
    self.end_position = end_position
    self.is_impossible = is_impossible


def _is_whitespace(c):
  """The official reader's white space (includes U+202F, narrow no-break space)."""
  return c == " " or c == "\t" or c == "\r" or c == "\n" or ord(c) == 0x202F


def split_context(paragraph_text):
  """Splits a context on white space, keeping the char -> word alignment.

  Args:
    paragraph_text: str.

  Returns:
    (doc_tokens, char_to_word_offset): the whitespace tokens, and for every character of
    `paragraph_text` the index of the token it belongs to (the preceding one for white space,
    -1 for leading white space).
  """
  doc_tokens = []
  char_to_word_offset = []
  prev_is_whitespace = True
  for c in paragraph_text:
    if _is_whitespace(c):
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        doc_tokens.append(c)
      else:
        doc_tokens[-1] += c
      prev_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def load_squad_json(input_file, flag_name):
  """Reads a SQuAD JSON file; a one-line UsageError if it is missing or malformed.

  Args:
    input_file: path.
    flag_name: the flag that named it, for messages.

  Returns:
    The parsed JSON object (a dict with a "data" list).
  """
  common.require_file(input_file, flag_name)
  try:
    with tf.io.gfile.GFile(input_file, "r") as reader:
      dataset_json = json.load(reader)
  except (ValueError, UnicodeDecodeError) as e:
    common.fail("--%s=%s: not valid JSON (%s)" % (flag_name, input_file, e))
  if not isinstance(dataset_json, dict) or not isinstance(dataset_json.get("data"), list):
    common.fail("--%s=%s: not SQuAD JSON (no top-level \"data\" list)" % (flag_name, input_file))
  return dataset_json


def read_squad_examples(input_file, is_training, version_2_with_negative=False, stats=None,
                        flag_name="train_file"):
  """Reads a SQuAD json file into a list of SquadExample.

  Training examples whose answer text cannot be recovered from the whitespace-tokenised
  context ("Could not find answer", usually odd Unicode or an annotation inside a word),
  whose answer offset is out of range, or which have no answer without being marked
  impossible are skipped, logged and counted in `stats`, as the official code skips the
  first kind. A training question with several answers uses the first (as SQuAD train has one).

  Args:
    input_file: path of a SQuAD JSON file.
    is_training: whether to read answer positions (training) or not (prediction).
    version_2_with_negative: honour "is_impossible" (SQuAD 2.0).
    stats: optional collections.Counter, incremented with "answer_not_found",
      "bad_answer_offset", "no_answer_skipped", "several_answers_used_first", "impossible".
    flag_name: the flag naming the file, for error messages.

  Returns:
    A list of SquadExample.
  """
  dataset_json = load_squad_json(input_file, flag_name)
  if stats is None:
    stats = collections.Counter()
  examples = []
  try:
    for entry in dataset_json["data"]:
      for paragraph in entry["paragraphs"]:
        paragraph_text = paragraph["context"]
        doc_tokens, char_to_word_offset = split_context(paragraph_text)

        for qa in paragraph["qas"]:
          qas_id = qa["id"]
          question_text = qa["question"]
          start_position = None
          end_position = None
          orig_answer_text = None
          is_impossible = False
          if is_training:
            if version_2_with_negative:
              is_impossible = bool(qa.get("is_impossible", False))
            answers = qa.get("answers") or []
            if not is_impossible:
              if not answers:
                stats["no_answer_skipped"] += 1
                tf1.logging.warning(
                    "Question %s has no answer%s: skipped", qas_id,
                    "" if version_2_with_negative else
                    " (SQuAD 2.0 data? use --version_2_with_negative)")
                continue
              if len(answers) > 1:
                stats["several_answers_used_first"] += 1
              answer = answers[0]
              orig_answer_text = answer["text"]
              answer_offset = answer["answer_start"]
              answer_length = len(orig_answer_text)
              if (not isinstance(answer_offset, int) or answer_offset < 0 or
                  answer_length == 0 or
                  answer_offset + answer_length > len(char_to_word_offset)):
                stats["bad_answer_offset"] += 1
                tf1.logging.warning("Answer of %s is outside the context (answer_start=%r, "
                                    "length %d, context length %d): skipped", qas_id,
                                    answer_offset, answer_length, len(char_to_word_offset))
                continue
              start_position = max(char_to_word_offset[answer_offset], 0)
              end_position = char_to_word_offset[answer_offset + answer_length - 1]
              # Only add answers where the text can be exactly recovered from the
              # document. If this CAN'T happen it's likely due to weird Unicode
              # stuff so we will just skip the example.
              #
              # Note that this means for training mode, every example is NOT
              # guaranteed to be preserved.
              actual_text = " ".join(doc_tokens[start_position:(end_position + 1)])
              cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(orig_answer_text))
              if not cleaned_answer_text or actual_text.find(cleaned_answer_text) == -1:
                stats["answer_not_found"] += 1
                tf1.logging.warning("Could not find answer: '%s' vs. '%s'", actual_text,
                                    cleaned_answer_text)
                continue
            else:
              stats["impossible"] += 1
              start_position = -1
              end_position = -1
              orig_answer_text = ""

          examples.append(SquadExample(
              qas_id=qas_id,
              question_text=question_text,
              doc_tokens=doc_tokens,
              orig_answer_text=orig_answer_text,
              start_position=start_position,
              end_position=end_position,
              is_impossible=is_impossible))
  except (KeyError, TypeError, AttributeError) as e:
    common.fail("--%s=%s: not SQuAD JSON (%s: %s)" % (flag_name, input_file,
                                                      type(e).__name__, e))
  skipped = (stats["answer_not_found"] + stats["bad_answer_offset"] +
             stats["no_answer_skipped"])
  if skipped:
    tf1.logging.warning(
        "%s: %d training questions skipped (%d answers not found in the context, %d bad "
        "answer offsets, %d without an answer)", input_file, skipped,
        stats["answer_not_found"], stats["bad_answer_offset"], stats["no_answer_skipped"])
  return examples


# ----------------------------------------------------------------------------------------------
# Features
# ----------------------------------------------------------------------------------------------

# The official sliding window (its _DocSpan loop), shared with run_ner and run_classifier's long
# documents: sliding_window.windows; kept under run_squad's names.
DocSpan = sliding_window.Window


def make_doc_spans(num_doc_tokens, max_tokens_for_doc, doc_stride):
  """The official sliding window: spans of <= max_tokens_for_doc tokens, `doc_stride` apart.

  Args:
    num_doc_tokens: number of WordPiece tokens of the context.
    max_tokens_for_doc: window length.
    doc_stride: step between window starts.

  Returns:
    list of DocSpan(start, length); the last ends at the end of the document (none for an
    empty document).
  """
  return sliding_window.windows(num_doc_tokens, max_tokens_for_doc, doc_stride)


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training, output_fn, log_first_n=20):
  """Turns examples into features: [CLS] query [SEP] doc-span [SEP], one per doc span.

  Args:
    examples: list of SquadExample.
    tokenizer: tokenization.FullTokenizer.
    max_seq_length: sequence length (padded with 0).
    doc_stride: step between doc spans.
    max_query_length: questions are truncated to this many tokens.
    is_training: compute start/end positions (0 = [CLS] for impossible or out-of-span).
    output_fn: called with each InputFeatures.
    log_first_n: log the features of the first examples.

  Returns:
    The number of features produced.
  """
  if max_seq_length <= max_query_length + 3:
    raise ValueError("max_seq_length (%d) must be greater than max_query_length (%d) + 3" %
                     (max_seq_length, max_query_length))
  unique_id = FIRST_UNIQUE_ID
  meter = common.ProgressMeter(len(examples), unit="examples", min_interval_s=10.0)

  for (example_index, example) in enumerate(examples):
    query_tokens = tokenizer.tokenize(example.question_text)

    if len(query_tokens) > max_query_length:
      query_tokens = query_tokens[0:max_query_length]

    tok_to_orig_index = []
    orig_to_tok_index = []
    all_doc_tokens = []
    for (i, token) in enumerate(example.doc_tokens):
      orig_to_tok_index.append(len(all_doc_tokens))
      sub_tokens = tokenizer.tokenize(token)
      for sub_token in sub_tokens:
        tok_to_orig_index.append(i)
        all_doc_tokens.append(sub_token)

    tok_start_position = None
    tok_end_position = None
    if is_training and example.is_impossible:
      tok_start_position = -1
      tok_end_position = -1
    if is_training and not example.is_impossible:
      tok_start_position = orig_to_tok_index[example.start_position]
      if example.end_position < len(example.doc_tokens) - 1:
        tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
      else:
        tok_end_position = len(all_doc_tokens) - 1
      (tok_start_position, tok_end_position) = _improve_answer_span(
          all_doc_tokens, tok_start_position, tok_end_position, tokenizer,
          example.orig_answer_text)

    # The -3 accounts for [CLS], [SEP] and [SEP]
    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3

    # We can have documents that are longer than the maximum sequence length.
    # To deal with this we do a sliding window approach, where we take chunks
    # of the up to our max length with a stride of `doc_stride`.
    doc_spans = make_doc_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)

    for (doc_span_index, doc_span) in enumerate(doc_spans):
      tokens = []
      token_to_orig_map = {}
      token_is_max_context = {}
      segment_ids = []
      tokens.append("[CLS]")
      segment_ids.append(0)
      for token in query_tokens:
        tokens.append(token)
        segment_ids.append(0)
      tokens.append("[SEP]")
      segment_ids.append(0)

      for i in range(doc_span.length):
        split_token_index = doc_span.start + i
        token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]

        is_max_context = _check_is_max_context(doc_spans, doc_span_index, split_token_index)
        token_is_max_context[len(tokens)] = is_max_context
        tokens.append(all_doc_tokens[split_token_index])
        segment_ids.append(1)
      tokens.append("[SEP]")
      segment_ids.append(1)

      input_ids = tokenizer.convert_tokens_to_ids(tokens)

      # The mask has 1 for real tokens and 0 for padding tokens. Only real
      # tokens are attended to.
      input_mask = [1] * len(input_ids)

      # Zero-pad up to the sequence length.
      padding = max_seq_length - len(input_ids)
      input_ids += [0] * padding
      input_mask += [0] * padding
      segment_ids += [0] * padding

      assert len(input_ids) == max_seq_length
      assert len(input_mask) == max_seq_length
      assert len(segment_ids) == max_seq_length

      start_position = None
      end_position = None
      if is_training and not example.is_impossible:
        # For training, if our document chunk does not contain an annotation
        # we throw it out, since there is nothing to predict.
        doc_start = doc_span.start
        doc_end = doc_span.start + doc_span.length - 1
        out_of_span = not (tok_start_position >= doc_start and tok_end_position <= doc_end)
        # An answer that tokenises to nothing (end before start) has no span either.
        if out_of_span or tok_end_position < tok_start_position:
          start_position = 0
          end_position = 0
        else:
          doc_offset = len(query_tokens) + 2
          start_position = tok_start_position - doc_start + doc_offset
          end_position = tok_end_position - doc_start + doc_offset

      if is_training and example.is_impossible:
        start_position = 0
        end_position = 0

      if example_index < log_first_n:
        tf1.logging.info("*** Example ***")
        tf1.logging.info("unique_id: %s", unique_id)
        tf1.logging.info("example_index: %s", example_index)
        tf1.logging.info("doc_span_index: %s", doc_span_index)
        tf1.logging.info("tokens: %s", " ".join(
            [tokenization.printable_text(x) for x in tokens]))
        tf1.logging.info("token_to_orig_map: %s", " ".join(
            ["%d:%d" % (x, y) for (x, y) in token_to_orig_map.items()]))
        tf1.logging.info("token_is_max_context: %s", " ".join(
            ["%d:%s" % (x, y) for (x, y) in token_is_max_context.items()]))
        tf1.logging.info("input_ids: %s", " ".join([str(x) for x in input_ids]))
        tf1.logging.info("input_mask: %s", " ".join([str(x) for x in input_mask]))
        tf1.logging.info("segment_ids: %s", " ".join([str(x) for x in segment_ids]))
        if is_training and example.is_impossible:
          tf1.logging.info("impossible example")
        if is_training and not example.is_impossible:
          answer_text = " ".join(tokens[start_position:(end_position + 1)])
          tf1.logging.info("start_position: %d", start_position)
          tf1.logging.info("end_position: %d", end_position)
          tf1.logging.info("answer: %s", tokenization.printable_text(answer_text))

      feature = InputFeatures(
          unique_id=unique_id,
          example_index=example_index,
          doc_span_index=doc_span_index,
          tokens=tokens,
          token_to_orig_map=token_to_orig_map,
          token_is_max_context=token_is_max_context,
          input_ids=input_ids,
          input_mask=input_mask,
          segment_ids=segment_ids,
          start_position=start_position,
          end_position=end_position,
          is_impossible=example.is_impossible)

      # Run callback
      output_fn(feature)

      unique_id += 1
    meter.update(example_index + 1, extra="(%d features)" % (unique_id - FIRST_UNIQUE_ID))
  return unique_id - FIRST_UNIQUE_ID


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
  """Returns tokenized answer spans that better match the annotated answer.

  The SQuAD annotations are character based. We first project them to whitespace-tokenized
  words, then, after WordPiece tokenization, look for the sub-span whose tokens equal the
  tokenized answer: in "(1895-1943)." the answer "1895" becomes the single token "1895".
  An annotation inside a word ("Japan" in "Japanese") keeps the whole word.

  Args:
    doc_tokens: WordPiece tokens of the context.
    input_start: first token of the whole-word span.
    input_end: last token of the whole-word span.
    tokenizer: FullTokenizer.
    orig_answer_text: the annotated answer.

  Returns:
    (start, end) token indices.
  """
  tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))

  for new_start in range(input_start, input_end + 1):
    for new_end in range(input_end, new_start - 1, -1):
      text_span = " ".join(doc_tokens[new_start:(new_end + 1)])
      if text_span == tok_answer_text:
        return (new_start, new_end)

  return (input_start, input_end)


def _check_is_max_context(doc_spans, cur_span_index, position):
  """Checks if this is the 'max context' doc span for the token.

  A token in several overlapping spans is scored only in the span where it has the most
  context: the largest min(left context, right context) + 0.01 * span length. The official
  float code, kept for the official features: sliding_window.max_context_window is the same
  rule in exact arithmetic, which differs on rare exact ties (see sliding_window).

  Args:
    doc_spans: list of DocSpan.
    cur_span_index: index of the span being built.
    position: token index in the document.

  Returns:
    bool.
  """
  best_score = None
  best_span_index = None
  for (span_index, doc_span) in enumerate(doc_spans):
    end = doc_span.start + doc_span.length - 1
    if position < doc_span.start:
      continue
    if position > end:
      continue
    num_left_context = position - doc_span.start
    num_right_context = end - position
    score = min(num_left_context, num_right_context) + 0.01 * doc_span.length
    if best_score is None or score > best_score:
      best_score = score
      best_span_index = span_index

  return cur_span_index == best_span_index


class FeatureWriter(object):
  """Writes InputFeatures to a TFRecord file (under a temporary name until close())."""

  def __init__(self, filename, is_training):
    self.filename = filename
    self.is_training = is_training
    self.num_features = 0
    self._tmp_filename = "%s.tmp-%d" % (filename, os.getpid())
    self._writer = tf.io.TFRecordWriter(self._tmp_filename)

  def process_feature(self, feature):
    """Writes an InputFeatures as a tf.train.Example."""
    self.num_features += 1

    def create_int_feature(values):
      return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    features = collections.OrderedDict()
    features["unique_ids"] = create_int_feature([feature.unique_id])
    features["input_ids"] = create_int_feature(feature.input_ids)
    features["input_mask"] = create_int_feature(feature.input_mask)
    features["segment_ids"] = create_int_feature(feature.segment_ids)

    if self.is_training:
      features["start_positions"] = create_int_feature([feature.start_position])
      features["end_positions"] = create_int_feature([feature.end_position])
      features["is_impossible"] = create_int_feature([1 if feature.is_impossible else 0])

    tf_example = tf.train.Example(features=tf.train.Features(feature=features))
    self._writer.write(tf_example.SerializeToString())

  def close(self):
    """Finishes the file and gives it its final name."""
    self._writer.close()
    tf.io.gfile.rename(self._tmp_filename, self.filename, overwrite=True)

  def abort(self):
    """Closes and removes the unfinished file."""
    self._writer.close()
    if tf.io.gfile.exists(self._tmp_filename):
      tf.io.gfile.remove(self._tmp_filename)


def write_features(examples, tokenizer, filename, is_training, max_seq_length, doc_stride,
                   max_query_length, keep_features=False):
  """Converts examples and writes them to a TFRecord atomically.

  Args:
    examples: list of SquadExample.
    tokenizer: FullTokenizer.
    filename: output TFRecord path.
    is_training: training features (with positions).
    max_seq_length: --max_seq_length.
    doc_stride: --doc_stride.
    max_query_length: --max_query_length.
    keep_features: also return the InputFeatures (needed to write predictions).

  Returns:
    (number of features, list of InputFeatures or None).
  """
  writer = FeatureWriter(filename=filename, is_training=is_training)
  kept = [] if keep_features else None

  def output_fn(feature):
    if kept is not None:
      kept.append(feature)
    writer.process_feature(feature)

  try:
    convert_examples_to_features(
        examples=examples,
        tokenizer=tokenizer,
        max_seq_length=max_seq_length,
        doc_stride=doc_stride,
        max_query_length=max_query_length,
        is_training=is_training,
        output_fn=output_fn)
  except BaseException:
    writer.abort()
    raise
  writer.close()
  return writer.num_features, kept


# ----------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 use_one_hot_embeddings, compute_dtype=None):
  """Creates the span model: BERT sequence output -> start and end logits.

  Args:
    bert_config: modeling.BertConfig.
    is_training: dropout on or off.
    input_ids: int32 [batch_size, seq_length].
    input_mask: int32 [batch_size, seq_length].
    segment_ids: int32 [batch_size, seq_length].
    use_one_hot_embeddings: one-hot embedding lookup (TPU).
    compute_dtype: (ours) BERT's compute dtype (modeling.BertModel; "fp32" / "bf16" / "fp16"
      or a dtype, None: float32). The span layer and its logits are float32 in all.

  Returns:
    (start_logits, end_logits), each float32 [batch_size, seq_length]. The head's variables
    are "cls/squad/output_weights" [2, hidden] and "cls/squad/output_bias" [2] (official).
  """
  model = modeling.BertModel(
      config=bert_config,
      is_training=is_training,
      input_ids=input_ids,
      input_mask=input_mask,
      token_type_ids=segment_ids,
      use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype)

  # The head is float32 in every precision (BertModel's outputs are; no op when already so).
  final_hidden = tf.cast(model.get_sequence_output(), tf.float32)

  final_hidden_shape = modeling.get_shape_list(final_hidden, expected_rank=3)
  batch_size = final_hidden_shape[0]
  seq_length = final_hidden_shape[1]
  hidden_size = final_hidden_shape[2]

  output_weights = tf1.get_variable(
      "cls/squad/output_weights", [2, hidden_size],
      initializer=tf1.truncated_normal_initializer(stddev=0.02))

  output_bias = tf1.get_variable("cls/squad/output_bias", [2], initializer=tf1.zeros_initializer())

  final_hidden_matrix = tf.reshape(final_hidden, [batch_size * seq_length, hidden_size])
  logits = tf.matmul(final_hidden_matrix, output_weights, transpose_b=True)
  logits = tf.nn.bias_add(logits, output_bias)

  logits = tf.reshape(logits, [batch_size, seq_length, 2])
  logits = tf.transpose(logits, [2, 0, 1])

  unstacked_logits = tf.unstack(logits, axis=0)

  (start_logits, end_logits) = (unstacked_logits[0], unstacked_logits[1])

  return (start_logits, end_logits)


def compute_span_loss(logits, positions):
  """Mean cross-entropy of `positions` under softmax(logits).

  Args:
    logits: float [batch_size, seq_length].
    positions: int [batch_size].

  Returns:
    float scalar.
  """
  seq_length = modeling.get_shape_list(logits)[1]
  one_hot_positions = tf.one_hot(positions, depth=seq_length, dtype=tf.float32)
  log_probs = tf.nn.log_softmax(logits, axis=-1)
  return -tf.reduce_mean(tf.reduce_sum(one_hot_positions * log_probs, axis=-1))


def model_fn_builder(bert_config, init_checkpoint, learning_rate, num_train_steps,
                     num_warmup_steps, use_tpu, use_one_hot_embeddings, precision="fp32",
                     fused_optimizer=False, keep_checkpoint_max=5, allow_unmatched_init=False):
  """Returns the `model_fn` closure for TPUEstimator (TRAIN and PREDICT modes).

  Our additions: precision ("fp32", "bf16", "fp16") is BERT's compute dtype (create_model);
  precision, fused_optimizer and keep_checkpoint_max go to estimator_utils.create_train_op
  (fp16: dynamic loss scaling and a saver that also resumes fp32 / bf16 checkpoints).
  """
  compute_dtype = modeling.get_compute_dtype(precision)

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    """The `model_fn` for TPUEstimator."""
    tf1.logging.info("*** Features ***")
    for name in sorted(features.keys()):
      tf1.logging.info("  name = %s, shape = %s", name, features[name].shape)

    unique_ids = features["unique_ids"]
    input_ids = features["input_ids"]
    input_mask = features["input_mask"]
    segment_ids = features["segment_ids"]

    is_training = (mode == tf1.estimator.ModeKeys.TRAIN)

    (start_logits, end_logits) = create_model(
        bert_config=bert_config,
        is_training=is_training,
        input_ids=input_ids,
        input_mask=input_mask,
        segment_ids=segment_ids,
        use_one_hot_embeddings=use_one_hot_embeddings,
        compute_dtype=compute_dtype)

    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(
        init_checkpoint, use_tpu, allow_unmatched=allow_unmatched_init)

    if mode == tf1.estimator.ModeKeys.TRAIN:
      total_loss = _span_loss(start_logits, end_logits, features)

      train_op = estimator_utils.create_train_op(
          total_loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
          precision=precision, fused_optimizer=fused_optimizer,
          keep_checkpoint_max=keep_checkpoint_max)

      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode,
          loss=total_loss,
          train_op=train_op,
          scaffold_fn=scaffold_fn)
    if mode == tf1.estimator.ModeKeys.PREDICT:
      predictions = {
          "unique_ids": unique_ids,
          "start_logits": start_logits,
          "end_logits": end_logits,
      }
      return tf1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, predictions=predictions, scaffold_fn=scaffold_fn)
    raise ValueError("Only TRAIN and PREDICT modes are supported: %s" % (mode))

  return model_fn


def _span_loss(start_logits, end_logits, features):
  """model_fn_builder's training loss: the mean of the start and end cross-entropies."""
  start_loss = compute_span_loss(start_logits, features["start_positions"])
  end_loss = compute_span_loss(end_logits, features["end_positions"])
  return (start_loss + end_loss) / 2.0


def _engine_model_fn(bert_config, use_one_hot_embeddings, compute_dtype=None):
  """model_fn_builder's graph as a tf2_training.Engine model function.

  Args:
    bert_config: modeling.BertConfig.
    use_one_hot_embeddings: one-hot embedding lookups (TPUStrategy).
    compute_dtype: BERT's compute dtype (create_model's; None: float32).

  Returns:
    model_fn(features, is_training) -> (loss, predictions): the span loss (None for features
    without start_positions / end_positions: prediction) and the PREDICT outputs unique_ids
    [batch], start_logits and end_logits [batch, seq_length].
  """
  def model_fn(features, is_training):
    start_logits, end_logits = create_model(
        bert_config=bert_config,
        is_training=is_training,
        input_ids=features["input_ids"],
        input_mask=features["input_mask"],
        segment_ids=features["segment_ids"],
        use_one_hot_embeddings=use_one_hot_embeddings,
        compute_dtype=compute_dtype)
    loss = None
    if "start_positions" in features:
      loss = _span_loss(start_logits, end_logits, features)
    return loss, {"unique_ids": features["unique_ids"], "start_logits": start_logits,
                  "end_logits": end_logits}

  return model_fn


def input_fn_builder(input_file, seq_length, is_training, drop_remainder, seed=None,
                     skip_batches=0, padding="max_length"):
  """Creates an `input_fn` closure (reads params["batch_size"]) over a feature TFRecord.

  Our additions to the official arguments: seed (shuffle order), skip_batches (the batches
  a resumed job already trained on; see estimator_utils.resume_skip_batches) and padding
  ("longest": each batch sliced to its longest window, batch_padding.trim_batch_to_longest).
  """

  name_to_features = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
  }

  if is_training:
    name_to_features["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    name_to_features["end_positions"] = tf.io.FixedLenFeature([], tf.int64)

  batched_fn = estimator_utils.tfrecord_input_fn(
      input_file, name_to_features, is_training, drop_remainder, seed, skip_batches,
      num_parallel_calls=tf.data.AUTOTUNE, padding=padding)

  def input_fn(params):
    """The actual input function."""
    return batched_fn(params).prefetch(tf.data.AUTOTUNE)

  return input_fn


# ----------------------------------------------------------------------------------------------
# Predictions
# ----------------------------------------------------------------------------------------------

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])

_PrelimPrediction = collections.namedtuple(  # pylint: disable=invalid-name
    "PrelimPrediction",
    ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])

_NbestPrediction = collections.namedtuple(  # pylint: disable=invalid-name
    "NbestPrediction", ["text", "start_logit", "end_logit"])


def compute_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length,
                        do_lower_case, version_2_with_negative=False,
                        null_score_diff_threshold=0.0, verbose_logging=False):
  """The official n-best search and answer selection.

  For each example, every (start, end) pair among the n_best_size best start and end logits
  of each of its features is a candidate if both ends lie in the document part of the
  feature, the start token has its max context there, end >= start and the length is at most
  max_answer_length. Candidates are ranked by start_logit + end_logit, mapped back to the
  original text with get_final_text, and de-duplicated by text.

  SQuAD 2.0: the null score is the smallest start_logits[0] + end_logits[0] over the
  features; the prediction is "" iff null score - best non-null score > threshold, and that
  difference is the question's null odds. A question without any valid non-null candidate is
  predicted "" with null odds NO_SPAN_NULL_ODDS (the official code crashes there: its n-best
  then holds only ""). SQuAD 1.1: a question without any candidate gets the official nonce
  answer "empty".

  Args:
    all_examples: list of SquadExample.
    all_features: list of InputFeatures of those examples.
    all_results: iterable of RawResult (logits as lists or arrays of floats).
    n_best_size: candidates kept per example.
    max_answer_length: longest answer in tokens.
    do_lower_case: how the text was tokenised (for get_final_text).
    version_2_with_negative: SQuAD 2.0 null answers.
    null_score_diff_threshold: SQuAD 2.0 threshold.
    verbose_logging: log alignment failures of get_final_text.

  Returns:
    (all_predictions, all_nbest_json, scores_diff_json): OrderedDicts keyed by question id:
    answer text; list of {"text", "probability", "start_logit", "end_logit"}; null odds
    (SQuAD 2.0 only, else empty).
  """
  example_index_to_features = collections.defaultdict(list)
  for feature in all_features:
    example_index_to_features[feature.example_index].append(feature)

  unique_id_to_result = {}
  for result in all_results:
    unique_id_to_result[result.unique_id] = result

  all_predictions = collections.OrderedDict()
  all_nbest_json = collections.OrderedDict()
  scores_diff_json = collections.OrderedDict()

  for (example_index, example) in enumerate(all_examples):
    features = example_index_to_features[example_index]

    prelim_predictions = []
    # keep track of the minimum score of null start+end of position 0
    score_null = 1000000  # large and positive
    min_null_feature_index = 0  # the paragraph slice with min null score
    null_start_logit = 0  # the start logit at the slice with min null score
    null_end_logit = 0  # the end logit at the slice with min null score
    for (feature_index, feature) in enumerate(features):
      result = unique_id_to_result[feature.unique_id]
      start_logits = [float(x) for x in result.start_logits]
      end_logits = [float(x) for x in result.end_logits]
      start_indexes = _get_best_indexes(start_logits, n_best_size)
      end_indexes = _get_best_indexes(end_logits, n_best_size)
      # if we could have irrelevant answers, get the min score of irrelevant
      if version_2_with_negative:
        feature_null_score = start_logits[0] + end_logits[0]
        if feature_null_score < score_null:
          score_null = feature_null_score
          min_null_feature_index = feature_index
          null_start_logit = start_logits[0]
          null_end_logit = end_logits[0]
      for start_index in start_indexes:
        for end_index in end_indexes:
          # We could hypothetically create invalid predictions, e.g., predict
          # that the start of the span is in the question. We throw out all
          # invalid predictions.
          if start_index >= len(feature.tokens):
            continue
          if end_index >= len(feature.tokens):
            continue
          if start_index not in feature.token_to_orig_map:
            continue
          if end_index not in feature.token_to_orig_map:
            continue
          if not feature.token_is_max_context.get(start_index, False):
            continue
          if end_index < start_index:
            continue
          length = end_index - start_index + 1
          if length > max_answer_length:
            continue
          prelim_predictions.append(
              _PrelimPrediction(
                  feature_index=feature_index,
                  start_index=start_index,
                  end_index=end_index,
                  start_logit=start_logits[start_index],
                  end_logit=end_logits[end_index]))

    if version_2_with_negative and features:
      prelim_predictions.append(
          _PrelimPrediction(
              feature_index=min_null_feature_index,
              start_index=0,
              end_index=0,
              start_logit=null_start_logit,
              end_logit=null_end_logit))
    prelim_predictions = sorted(
        prelim_predictions, key=lambda x: (x.start_logit + x.end_logit), reverse=True)

    seen_predictions = {}
    nbest = []
    for pred in prelim_predictions:
      if len(nbest) >= n_best_size:
        break
      if pred.start_index > 0:  # this is a non-null prediction
        final_text = _prediction_text(example, features[pred.feature_index], pred,
                                      do_lower_case, verbose_logging)
        if final_text in seen_predictions:
          continue

        seen_predictions[final_text] = True
      else:
        final_text = ""
        seen_predictions[final_text] = True

      nbest.append(
          _NbestPrediction(text=final_text, start_logit=pred.start_logit,
                           end_logit=pred.end_logit))

    # if we didn't include the empty option in the n-best, include it
    if version_2_with_negative and features:
      if "" not in seen_predictions:
        nbest.append(
            _NbestPrediction(text="", start_logit=null_start_logit, end_logit=null_end_logit))
    # In very rare edge cases we could have no valid predictions. So we
    # just create a nonce prediction in this case to avoid failure.
    if not nbest:
      nbest.append(_NbestPrediction(text="" if version_2_with_negative else "empty",
                                    start_logit=0.0, end_logit=0.0))

    total_scores = []
    best_non_null_entry = None
    for entry in nbest:
      total_scores.append(entry.start_logit + entry.end_logit)
      if not best_non_null_entry:
        if entry.text:
          best_non_null_entry = entry

    probs = _compute_softmax(total_scores)

    nbest_json = []
    for (i, entry) in enumerate(nbest):
      output = collections.OrderedDict()
      output["text"] = entry.text
      output["probability"] = probs[i]
      output["start_logit"] = entry.start_logit
      output["end_logit"] = entry.end_logit
      nbest_json.append(output)

    if not version_2_with_negative:
      all_predictions[example.qas_id] = nbest_json[0]["text"]
    elif best_non_null_entry is None:
      # Only the null answer is possible (no valid span in any feature).
      scores_diff_json[example.qas_id] = NO_SPAN_NULL_ODDS
      all_predictions[example.qas_id] = ""
    else:
      # predict "" iff the null score - the score of best non-null > threshold
      score_diff = score_null - best_non_null_entry.start_logit - (
          best_non_null_entry.end_logit)
      scores_diff_json[example.qas_id] = score_diff
      if score_diff > null_score_diff_threshold:
        all_predictions[example.qas_id] = ""
      else:
        all_predictions[example.qas_id] = best_non_null_entry.text

    all_nbest_json[example.qas_id] = nbest_json

  return all_predictions, all_nbest_json, scores_diff_json


def _prediction_text(example, feature, pred, do_lower_case, verbose_logging):
  """The original-text answer of a non-null candidate span (official de-tokenisation)."""
  tok_tokens = feature.tokens[pred.start_index:(pred.end_index + 1)]
  orig_doc_start = feature.token_to_orig_map[pred.start_index]
  orig_doc_end = feature.token_to_orig_map[pred.end_index]
  orig_tokens = example.doc_tokens[orig_doc_start:(orig_doc_end + 1)]
  tok_text = " ".join(tok_tokens)

  # De-tokenize WordPieces that have been split off.
  tok_text = tok_text.replace(" ##", "")
  tok_text = tok_text.replace("##", "")

  # Clean whitespace
  tok_text = tok_text.strip()
  tok_text = " ".join(tok_text.split())
  orig_text = " ".join(orig_tokens)

  return get_final_text(tok_text, orig_text, do_lower_case, verbose_logging)


def _write_json(path, obj):
  """Writes JSON the way the official script does (indent 4, key order kept), atomically."""
  with common.atomic_output(path) as writer:
    writer.write(json.dumps(obj, indent=4) + "\n")


def write_predictions(all_examples, all_features, all_results, n_best_size, max_answer_length,
                      do_lower_case, output_prediction_file, output_nbest_file,
                      output_null_log_odds_file, version_2_with_negative=False,
                      null_score_diff_threshold=0.0, verbose_logging=False):
  """Writes predictions.json, nbest_predictions.json and (SQuAD 2.0) null_odds.json.

  Args: as compute_predictions, plus the three output paths (written atomically).

  Returns:
    compute_predictions' (all_predictions, all_nbest_json, scores_diff_json).
  """
  tf1.logging.info("Writing predictions to: %s", output_prediction_file)
  tf1.logging.info("Writing nbest to: %s", output_nbest_file)
  all_predictions, all_nbest_json, scores_diff_json = compute_predictions(
      all_examples, all_features, all_results, n_best_size, max_answer_length, do_lower_case,
      version_2_with_negative, null_score_diff_threshold, verbose_logging)
  _write_json(output_prediction_file, all_predictions)
  _write_json(output_nbest_file, all_nbest_json)
  if version_2_with_negative:
    _write_json(output_null_log_odds_file, scores_diff_json)
  return all_predictions, all_nbest_json, scores_diff_json


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
  """Projects the tokenized prediction back to the original text.

  `orig_text` is the whitespace-token span that the predicted WordPiece span came from, and
  may contain extra characters: for pred_text "steve smith" and orig_text "Steve Smith's" we
  want "Steve Smith" (not the normalised pred_text, which lost case and accents). The
  official heuristic: basic-tokenize orig_text, find pred_text in it, and if the two agree
  character for character once spaces are removed, map the match back onto orig_text.
  Whenever that fails, return orig_text.

  Args:
    pred_text: de-tokenized prediction (WordPieces joined, normalised by the tokenizer).
    orig_text: the original whitespace tokens of the span, joined with single spaces.
    do_lower_case: how the tokenizer normalised.
    verbose_logging: log why an alignment failed.

  Returns:
    The answer text.
  """

  def _strip_spaces(text):
    ns_chars = []
    ns_to_s_map = collections.OrderedDict()
    for (i, c) in enumerate(text):
      if c == " ":
        continue
      ns_to_s_map[len(ns_chars)] = i
      ns_chars.append(c)
    ns_text = "".join(ns_chars)
    return (ns_text, ns_to_s_map)

  # We first tokenize `orig_text`, strip whitespace from the result
  # and `pred_text`, and check if they are the same length. If they are
  # NOT the same length, the heuristic has failed. If they are the same
  # length, we assume the characters are one-to-one aligned.
  tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)

  tok_text = " ".join(tokenizer.tokenize(orig_text))

  start_position = tok_text.find(pred_text)
  if start_position == -1:
    if verbose_logging:
      tf1.logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
    return orig_text
  end_position = start_position + len(pred_text) - 1

  (orig_ns_text, orig_ns_to_s_map) = _strip_spaces(orig_text)
  (tok_ns_text, tok_ns_to_s_map) = _strip_spaces(tok_text)

  if len(orig_ns_text) != len(tok_ns_text):
    if verbose_logging:
      tf1.logging.info("Length not equal after stripping spaces: '%s' vs '%s'", orig_ns_text,
                       tok_ns_text)
    return orig_text

  # We then project the characters in `pred_text` back to `orig_text` using
  # the character-to-character alignment.
  tok_s_to_ns_map = {}
  for (i, tok_index) in tok_ns_to_s_map.items():
    tok_s_to_ns_map[tok_index] = i

  orig_start_position = None
  if start_position in tok_s_to_ns_map:
    ns_start_position = tok_s_to_ns_map[start_position]
    if ns_start_position in orig_ns_to_s_map:
      orig_start_position = orig_ns_to_s_map[ns_start_position]

  if orig_start_position is None:
    if verbose_logging:
      tf1.logging.info("Couldn't map start position")
    return orig_text

  orig_end_position = None
  if end_position in tok_s_to_ns_map:
    ns_end_position = tok_s_to_ns_map[end_position]
    if ns_end_position in orig_ns_to_s_map:
      orig_end_position = orig_ns_to_s_map[ns_end_position]

  if orig_end_position is None:
    if verbose_logging:
      tf1.logging.info("Couldn't map end position")
    return orig_text

  output_text = orig_text[orig_start_position:(orig_end_position + 1)]
  return output_text


def _get_best_indexes(logits, n_best_size):
  """Indices of the n_best_size largest logits, best first."""
  index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
  return [index for index, _ in index_and_score[:n_best_size]]


def _compute_softmax(scores):
  """Computes softmax probability over raw logits (a list of floats)."""
  if not scores:
    return []
  max_score = max(scores)
  exp_scores = [math.exp(score - max_score) for score in scores]
  total_sum = sum(exp_scores)
  return [x / total_sum for x in exp_scores]


# ----------------------------------------------------------------------------------------------
# Export
# ----------------------------------------------------------------------------------------------


def serving_input_specs(max_seq_length):
  """The SavedModel's inputs: name -> (dtype, shape)."""
  return collections.OrderedDict(
      (name, (tf.int32, [None, max_seq_length]))
      for name in ("input_ids", "input_mask", "segment_ids"))


def export_model(bert_config, checkpoint_path, export_dir, max_seq_length, vocab_file=None,
                 do_lower_case=True, version_2_with_negative=False, overwrite=False,
                 protected_paths=()):
  """Exports the span model as a SavedModel (serving_default signature) plus its configs.

  Args:
    bert_config: modeling.BertConfig.
    checkpoint_path: fine-tuned checkpoint (prefix or directory) with the cls/squad head.
    export_dir: output directory; an existing one only if it is an earlier export of ours and
      overwrite is set (anything else is refused, see common.check_export_dir).
    max_seq_length: sequence length of the int32 inputs.
    vocab_file: copied into the export as vocab.txt.
    do_lower_case: noted in squad_config.json.
    version_2_with_negative: noted in squad_config.json.
    overwrite: replace an earlier export of ours at export_dir.
    protected_paths: paths export_dir must not be or contain (output_dir, inputs).

  Returns:
    The checkpoint prefix that was exported.
  """

  def build_fn(placeholders):
    start_logits, end_logits = create_model(
        bert_config=bert_config,
        is_training=False,
        input_ids=placeholders["input_ids"],
        input_mask=placeholders["input_mask"],
        segment_ids=placeholders["segment_ids"],
        use_one_hot_embeddings=False)
    return {"start_logits": start_logits, "end_logits": end_logits}

  extra_files = {
      "bert_config.json": bert_config.to_json_string(),
      "squad_config.json": json.dumps({
          "max_seq_length": max_seq_length,
          "do_lower_case": bool(do_lower_case),
          "version_2_with_negative": bool(version_2_with_negative),
          "inputs": list(serving_input_specs(max_seq_length)),
          "outputs": ["start_logits", "end_logits"]}, indent=2) + "\n",
  }
  if vocab_file:
    with tf.io.gfile.GFile(vocab_file) as f:
      extra_files["vocab.txt"] = f.read()
  return export_utils.export_saved_model(build_fn, checkpoint_path, export_dir,
                                         serving_input_specs(max_seq_length),
                                         extra_files=extra_files, overwrite=overwrite,
                                         protected_paths=protected_paths,
                                         bert_config=bert_config)


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------


def _full_length(logits, max_seq_length):
  """A feature's logits as a list of max_seq_length floats (--padding=longest computed only the
  batch's length: -inf at the positions beyond, never an answer)."""
  values = [float(x) for x in logits.flat]
  return values + [float("-inf")] * (max_seq_length - len(values))


def validate_flags_or_throw(bert_config):
  """One-line errors for flags that cannot work (the official checks and a few more)."""
  del bert_config  # max_seq_length is checked by model_config.load_config.
  if not FLAGS.do_train and not FLAGS.do_predict and not FLAGS.export_dir:
    common.fail("--do_train, --do_predict or --export_dir: at least one is needed")
  if FLAGS.do_train:
    common.require_file(FLAGS.train_file, "train_file")
  if FLAGS.do_predict:
    common.require_file(FLAGS.predict_file, "predict_file")
  batch_padding.check_padding_flag(FLAGS)
  if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
    common.fail("--max_seq_length=%d must be greater than --max_query_length (%d) + 3" %
                (FLAGS.max_seq_length, FLAGS.max_query_length))
  for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length",
               "train_batch_size", "predict_batch_size"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d must be >= 1" % (name, getattr(FLAGS, name)))
  if FLAGS.num_train_epochs <= 0 and FLAGS.do_train:
    common.fail("--num_train_epochs=%g must be > 0" % FLAGS.num_train_epochs)
  if not 0.0 <= FLAGS.warmup_proportion < 1.0:
    common.fail("--warmup_proportion=%g must be in [0, 1)" % FLAGS.warmup_proportion)


JobSettings = collections.namedtuple("JobSettings", [
    # Inputs and outputs.
    "output_dir", "train_file", "predict_file", "init_checkpoint", "allow_unmatched_init",
    "bert_config_file", "vocab_file", "do_lower_case", "export_dir", "overwrite",
    "output_raw_logits", "verbose_logging",
    # What the job does.
    "do_train", "do_predict", "version_2_with_negative",
    # Features, sizes and the training schedule.
    "max_seq_length", "doc_stride", "max_query_length", "train_batch_size", "predict_batch_size",
    "learning_rate", "num_train_epochs", "warmup_proportion", "seed", "use_tpu",
    # The training engine (ENGINE_ESTIMATOR or ENGINE_TF2), its devices, checkpointing and
    # logging.
    "engine", "distribution_strategy", "num_gpus", "save_checkpoints_steps",
    "keep_checkpoint_max", "log_every_n_steps",
    # Answers: n-best size, answer length, the no-answer threshold (SQuAD 2.0).
    "n_best_size", "max_answer_length", "null_score_diff_threshold",
    # Padding of training's and prediction's batches.
    "train_padding", "predict_padding",
    # model_fn_builder's precision keyword arguments (--precision, --fused_optimizer).
    "precision_kwargs",
    # The TF2 engine's tf.distribute strategy (made first thing in main; None on the Estimator)
    # and the directory of its checkpoints, --output_dir, which every worker of a multi-worker
    # job reads (output_dir is where this process writes: tf2_training.worker_settings).
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
      train_padding=batch_padding.effective_padding(flag_values, training=True),
      predict_padding=batch_padding.effective_padding(flag_values, default="max_length"),
      precision_kwargs=estimator_utils.precision_kwargs(flag_values),
      strategy=strategy,
      model_dir=flag_values.output_dir,
      flag_values=flag_values)


def _feature_sizes(settings):
  """write_features' size keyword arguments of the job."""
  return dict(max_seq_length=settings.max_seq_length, doc_stride=settings.doc_stride,
              max_query_length=settings.max_query_length)


def _predict(settings, trainer, tokenizer, extra_results=None, record=None):
  """Runs --do_predict: features, the model's predictions, output files, scoring.

  Args:
    settings: JobSettings of job_settings.
    trainer: the (TPU)Estimator, or the tf2_training.Engine (_job_trainer).
    tokenizer: the checked FullTokenizer.
    extra_results: dict added to eval_results (e.g. global_step, num_train_steps), or None.
    record: checkpoint_utils.checkpoint_record of the weights: `checkpoint` and
      `checkpoint_step` in eval_results, and <file>.checkpoint.json beside each predictions
      file (their official formats have no room for it).
  """
  record = record or checkpoint_utils.checkpoint_record(None)
  dataset_json = load_squad_json(settings.predict_file, "predict_file")
  eval_examples = read_squad_examples(
      input_file=settings.predict_file, is_training=False,
      version_2_with_negative=settings.version_2_with_negative, flag_name="predict_file")
  if not eval_examples:
    common.fail("--predict_file=%s: no questions" % settings.predict_file)
  # predictions.json is keyed by question id: questions sharing an id get one answer.
  id_counts = squad_scoring.warn_id_problems(
      dataset_json["data"], None, "--predict_file=%s" % settings.predict_file,
      duplicate_note="predictions.json keeps one answer per id (that of the last such "
      "question)")

  eval_record_file = os.path.join(settings.output_dir, "eval.tf_record")
  num_features, eval_features = write_features(eval_examples, tokenizer, eval_record_file,
                                               is_training=False, keep_features=True,
                                               **_feature_sizes(settings))

  tf1.logging.info("***** Running predictions *****")
  tf1.logging.info("  Num orig examples = %d", len(eval_examples))
  tf1.logging.info("  Num split examples = %d", num_features)
  tf1.logging.info("  Batch size = %d", settings.predict_batch_size)

  predict_input_fn = input_fn_builder(
      input_file=eval_record_file,
      seq_length=settings.max_seq_length,
      is_training=False,
      drop_remainder=False,
      padding=settings.predict_padding)

  all_results = []
  meter = common.ProgressMeter(num_features, unit="features", min_interval_s=10.0)
  for result in _predictions(settings, trainer, predict_input_fn):
    all_results.append(
        RawResult(
            unique_id=int(result["unique_ids"]),
            start_logits=_full_length(result["start_logits"], settings.max_seq_length),
            end_logits=_full_length(result["end_logits"], settings.max_seq_length)))
    meter.update(len(all_results))
  meter.update(len(all_results), force=True)
  # A signal during prediction: no output files, so the job does not look finished.
  common.STOP_SIGNALS.exit_if_stopped()

  written = [os.path.join(settings.output_dir, name) for name in (
      "predictions.json", "nbest_predictions.json") + (
          ("null_odds.json",) if settings.version_2_with_negative else ()) + (
              ("raw_logits.npz",) if settings.output_raw_logits else ())]
  # Removed first, so that a kill between the writes leaves no sidecar naming other weights.
  for path in written:
    checkpoint_utils.remove_sidecar(path)
  if settings.output_raw_logits:
    buf = io.BytesIO()
    np.savez(buf,
             unique_ids=np.array([r.unique_id for r in all_results], dtype=np.int64),
             start_logits=np.array([r.start_logits for r in all_results], dtype=np.float32),
             end_logits=np.array([r.end_logits for r in all_results], dtype=np.float32))
    with common.atomic_output(os.path.join(settings.output_dir, "raw_logits.npz"), "wb") as f:
      f.write(buf.getvalue())

  all_predictions, _, scores_diff_json = write_predictions(
      eval_examples, eval_features, all_results, settings.n_best_size, settings.max_answer_length,
      settings.do_lower_case,
      os.path.join(settings.output_dir, "predictions.json"),
      os.path.join(settings.output_dir, "nbest_predictions.json"),
      os.path.join(settings.output_dir, "null_odds.json"),
      version_2_with_negative=settings.version_2_with_negative,
      null_score_diff_threshold=settings.null_score_diff_threshold,
      verbose_logging=settings.verbose_logging)
  for path in written:
    checkpoint_utils.write_sidecar(path, record)

  if squad_scoring.has_gold_answers(dataset_json):
    if settings.version_2_with_negative:
      # The threshold already applied to predictions.json, so EM/F1 are those of the file;
      # best_f1_thresh suggests a --null_score_diff_threshold.
      results = squad_scoring.evaluate_v2(
          dataset_json["data"], all_predictions, na_probs=scores_diff_json,
          na_prob_thresh=settings.null_score_diff_threshold)
    else:
      results = squad_scoring.evaluate_v1(dataset_json["data"], all_predictions)
    results["num_duplicate_question_ids"] = id_counts["num_duplicate_question_ids"]
    results.update(checkpoint=record["checkpoint"], checkpoint_step=record["global_step"])
    results.update(extra_results or {})
    estimator_utils.write_eval_results(settings.output_dir, results)
  else:
    tf1.logging.info("%s has no gold answers: predictions written, not scored",
                     settings.predict_file)


def _predictions(settings, trainer, input_fn):
  """The model's outputs example by example (unique_ids, start_logits, end_logits), from the
  latest checkpoint in --output_dir (else the initial weights).

  Args:
    settings: JobSettings of job_settings.
    trainer: the (TPU)Estimator, or the tf2_training.Engine.
    input_fn: the prediction input_fn.

  Returns:
    Iterator of dicts name -> numpy value.
  """
  if settings.engine == ENGINE_TF2:
    return trainer.predict(input_fn, batch_size=settings.predict_batch_size)
  return trainer.predict(input_fn, yield_single_examples=True)


def export_protected_paths(settings):
  """What an --export_dir must never replace: this job's --output_dir and its inputs.

  Args:
    settings: JobSettings of job_settings.

  Returns:
    List of paths (checkpoint prefixes included) for export_utils.export_saved_model.
  """
  return [p for p in (settings.output_dir, settings.init_checkpoint, settings.train_file,
                      settings.predict_file, settings.vocab_file, settings.bert_config_file) if p]


def model_variable_names(bert_config):
  """The names of the model's variables (BERT and the span head)."""
  return set(estimator_utils.bert_variable_shapes(bert_config)) | set(head_shapes(bert_config))


def head_shapes(bert_config):
  """{variable name: shape} of the span head create_model adds on top of BERT."""
  return {"cls/squad/output_weights": [2, bert_config.hidden_size],
          "cls/squad/output_bias": [2]}


def _check_engine_flags():
  """One-line errors for the device, precision and distribution flags: on the TF2 engine those
  only the Estimator implements (tf2_training.check_flags), on both the combinations
  estimator_utils refuses."""
  if not estimator_utils.has_estimator():
    tf2_training.check_flags(FLAGS, "run_squad.py", xla=True,
                             precisions=tf2_training.ENGINE_PRECISIONS, multi_worker=True,
                             tpu=True)
  estimator_utils.validate_estimator_flags(FLAGS)
  estimator_utils.check_supported(FLAGS, SUPPORTED_MODEL_FN_FLAGS)


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  common.check_output_dir(FLAGS.output_dir, "output_dir")
  common.require_file(FLAGS.vocab_file, "vocab_file")
  _check_engine_flags()
  # The TF2 engine's strategy, before any TensorFlow operation runs (a multi-worker one must).
  strategy = None if estimator_utils.has_estimator() else tf2_training.command_strategy(FLAGS)
  tf2_training.check_multi_worker_job(strategy, FLAGS.do_train)
  bert_config = model_config.load_config(FLAGS.bert_config_file, FLAGS, FLAGS.max_seq_length)
  validate_flags_or_throw(bert_config)
  # A worker other than the chief trains only (tf2_training.worker_settings).
  settings = tf2_training.worker_settings(job_settings(FLAGS, strategy), do_predict=False,
                                          export_dir=None)
  tokenizer = tokenization.checked_tokenizer(
      FLAGS.vocab_file, FLAGS.do_lower_case, init_checkpoint=FLAGS.init_checkpoint,
      vocab_size=bert_config.vocab_size, config_name=FLAGS.bert_config_file)
  if FLAGS.init_checkpoint and not tf1.train.checkpoint_exists(FLAGS.init_checkpoint):
    common.fail("--init_checkpoint=%s: no checkpoint there" % FLAGS.init_checkpoint)
  if FLAGS.export_dir:
    # Checked before any training, so that a bad target costs nothing (and again at export).
    common.check_export_dir(FLAGS.export_dir, "export_dir", FLAGS.overwrite,
                            export_protected_paths(settings))
  # One job per directory, taken before the directory's checkpoint is read: two training jobs
  # would interleave checkpoints and overwrite each other's results, and a prediction beside a
  # training job would score whichever intermediate checkpoint happens to be the latest.
  with common.OutputDirLock(settings.output_dir, "output_dir"):
    eval_weights = None
    if not FLAGS.do_train:
      # Scores of a randomly initialised model would look like a result: no trained weights is
      # one line (unless --allow_random_eval), before any work.
      actions = "/".join(name for name, on in (("--do_predict", FLAGS.do_predict),
                                               ("--export_dir", FLAGS.export_dir)) if on)
      eval_weights = checkpoint_utils.require_eval_weights(
          actions, FLAGS.output_dir, FLAGS.init_checkpoint, model_variable_names(bert_config),
          allow_random_eval=FLAGS.allow_random_eval, allow_unmatched=FLAGS.allow_unmatched_init)
    _run_job(settings, bert_config, tokenizer, eval_weights)


def _run_job(settings, bert_config, tokenizer, eval_weights=None):
  """Trains / predicts / exports as the flags say (after main's checks).

  Args:
    settings: JobSettings of job_settings.
    bert_config: modeling.BertConfig (with the flag overrides).
    tokenizer: the checked FullTokenizer.
    eval_weights: without --do_train, the checkpoint require_eval_weights found (None: random
      weights, --allow_random_eval).
  """
  # Before anything is written there: a checkpoint of another model in --output_dir would
  # otherwise fail deep inside the restore, after bert_config.json was replaced.
  resume_step = estimator_utils.check_resume(settings.output_dir, bert_config,
                                             extra_shapes=head_shapes(bert_config),
                                             restore=estimator_utils.restore_mode(
                                                 settings.do_train, settings.do_predict))
  tf1.gfile.MakeDirs(settings.output_dir)

  train_examples = num_train_steps = num_warmup_steps = None
  if settings.do_train:
    train_examples, num_train_steps, num_warmup_steps = _read_train_examples(settings)
  trainer = _job_trainer(settings, bert_config, num_train_steps, num_warmup_steps)

  train_summary = {}
  if settings.do_train:
    train_record_file = _write_train_features(settings, bert_config, tokenizer, train_examples,
                                              num_train_steps)
    del train_examples  # On disk now: not kept in memory while training.
    train_summary = _train(settings, trainer, train_record_file, num_train_steps, resume_step)

  if settings.do_predict:
    # Which weights the predictions come from: the latest checkpoint in --output_dir (either
    # engine restores it), else the --init_checkpoint the model starts from, or None.
    record = checkpoint_utils.checkpoint_record(
        tf1.train.latest_checkpoint(settings.output_dir) or eval_weights)
    _predict(settings, trainer, tokenizer, train_summary, record)

  if settings.export_dir:
    _export(settings, bert_config)


def _read_train_examples(settings):
  """Reads --train_file for --do_train and works out the training schedule.

  Args:
    settings: JobSettings of job_settings.

  Returns:
    (examples, num_train_steps, num_warmup_steps): the SquadExamples, shuffled with --seed
    (so that the input_fn needs no very large shuffle buffer), and the step counts.
  """
  stats = collections.Counter()
  train_examples = read_squad_examples(
      input_file=settings.train_file, is_training=True,
      version_2_with_negative=settings.version_2_with_negative, stats=stats)
  if not train_examples:
    common.fail("--train_file=%s: no usable training questions" % settings.train_file)
  num_train_steps = int(len(train_examples) / settings.train_batch_size * settings.num_train_epochs)
  if num_train_steps < 1:
    common.fail("--num_train_epochs=%g with --train_batch_size=%d and %d examples gives 0 "
                "training steps" % (settings.num_train_epochs, settings.train_batch_size,
                                    len(train_examples)))
  num_warmup_steps = int(num_train_steps * settings.warmup_proportion)

  # Pre-shuffle the input to avoid having to make a very large shuffle
  # buffer in in the `input_fn`.
  rng = random.Random(settings.seed)
  rng.shuffle(train_examples)
  return train_examples, num_train_steps, num_warmup_steps


def _job_trainer(settings, bert_config, num_train_steps, num_warmup_steps):
  """What trains and predicts: the (TPU)Estimator (ENGINE_ESTIMATOR) or a tf2_training.Engine
  over the same graph (ENGINE_TF2), its model directory --output_dir.

  Args:
    settings: JobSettings of job_settings.
    bert_config: modeling.BertConfig.
    num_train_steps: training steps (None without --do_train).
    num_warmup_steps: warm-up steps (None without --do_train).

  Returns:
    The Estimator, or the tf2_training.Engine.
  """
  if settings.engine == ENGINE_ESTIMATOR:
    return _job_estimator(settings, bert_config, num_train_steps, num_warmup_steps)
  strategy = settings.strategy
  return tf2_training.Engine(
      _engine_model_fn(bert_config, tf2_training.is_tpu_strategy(strategy),
                       modeling.get_compute_dtype(settings.precision_kwargs["precision"])),
      settings.model_dir, strategy=strategy, train_batch_size=settings.train_batch_size,
      learning_rate=settings.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps or 0, init_checkpoint=settings.init_checkpoint,
      allow_unmatched_init=settings.allow_unmatched_init, seed=settings.seed,
      save_checkpoints_steps=settings.save_checkpoints_steps,
      keep_checkpoint_max=settings.keep_checkpoint_max,
      log_every_n_steps=settings.log_every_n_steps,
      fused_optimizer=settings.precision_kwargs["fused_optimizer"],
      use_xla=settings.flag_values.use_xla,
      loss_scale=estimator_utils.loss_scale_for(settings.precision_kwargs["precision"]))


def _job_estimator(settings, bert_config, num_train_steps, num_warmup_steps):
  """The job's model_fn in its (TPU)Estimator.

  Args:
    settings: JobSettings of job_settings.
    bert_config: modeling.BertConfig.
    num_train_steps: training steps (None without --do_train).
    num_warmup_steps: warm-up steps (None without --do_train).

  Returns:
    The Estimator (a TPUEstimator with --use_tpu), its model directory --output_dir.
  """
  model_fn = model_fn_builder(
      bert_config=bert_config,
      init_checkpoint=settings.init_checkpoint,
      learning_rate=settings.learning_rate,
      num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps,
      use_tpu=settings.use_tpu,
      use_one_hot_embeddings=settings.use_tpu,
      allow_unmatched_init=settings.allow_unmatched_init,
      **settings.precision_kwargs)

  # If TPU is not available, this will fall back to normal Estimator on CPU or GPU.
  return estimator_utils.make_estimator(
      model_fn, settings.flag_values, settings.output_dir,
      train_batch_size=settings.train_batch_size,
      predict_batch_size=settings.predict_batch_size,
      supported_flags=SUPPORTED_MODEL_FN_FLAGS)


def _write_train_features(settings, bert_config, tokenizer, train_examples, num_train_steps):
  """Saves bert_config.json and writes the training features to train.tf_record in --output_dir.

  Args:
    settings: JobSettings of job_settings.
    bert_config: modeling.BertConfig, saved beside the checkpoints.
    tokenizer: the checked FullTokenizer.
    train_examples: the shuffled training SquadExamples.
    num_train_steps: training steps (logged).

  Returns:
    The path of the written train.tf_record.
  """
  model_config.save_config(bert_config, settings.output_dir)
  # We write to a file to avoid storing very large constant tensors in memory.
  train_record_file = os.path.join(settings.output_dir, "train.tf_record")
  num_features, _ = write_features(train_examples, tokenizer, train_record_file,
                                   is_training=True, **_feature_sizes(settings))

  tf1.logging.info("***** Running training *****")
  tf1.logging.info("  Num orig examples = %d", len(train_examples))
  tf1.logging.info("  Num split examples = %d", num_features)
  tf1.logging.info("  Batch size = %d", settings.train_batch_size)
  tf1.logging.info("  Num steps = %d", num_train_steps)
  return train_record_file


def _train(settings, trainer, train_record_file, num_train_steps, resume_step):
  """Runs --do_train: trains (or resumes training) up to num_train_steps.

  Args:
    settings: JobSettings of job_settings.
    trainer: the (TPU)Estimator, or the tf2_training.Engine (_job_trainer).
    train_record_file: the features _write_train_features wrote.
    num_train_steps: the step to train to.
    resume_step: the step of the checkpoint training resumes from (check_resume), or None.

  Returns:
    {"global_step", "num_train_steps"}: the step reached and the target, for eval_results (a
    reader such as paper/sweep.py can check they agree).
  """
  # On SIGINT / SIGTERM the step finishes, the engine checkpoints, and the job exits
  # 130 / 143 below without writing any result that would make it look finished.
  if settings.engine == ENGINE_TF2:
    # The engine resumes from the latest checkpoint itself, skipping the batches trained.
    trainer.train(lambda skip_batches: _train_input_fn(settings, train_record_file,
                                                       skip_batches), num_train_steps)
  else:
    train_input_fn = _train_input_fn(
        settings, train_record_file,
        estimator_utils.resume_skip_batches(resume_step, settings.flag_values))
    trainer.train(input_fn=train_input_fn, max_steps=num_train_steps,
                  hooks=[estimator_utils.ProgressHook(num_train_steps,
                                                      settings.train_batch_size),
                         estimator_utils.StopOnSignalHook()])
  common.STOP_SIGNALS.exit_if_stopped()
  return {"global_step": estimator_utils.latest_global_step(settings.output_dir),
          "num_train_steps": num_train_steps}


def _train_input_fn(settings, train_record_file, skip_batches):
  """The training input_fn (shuffled with --seed) that skips the batches trained so far."""
  return input_fn_builder(
      input_file=train_record_file,
      seq_length=settings.max_seq_length,
      is_training=True,
      drop_remainder=True,
      seed=settings.seed,
      skip_batches=skip_batches,
      padding=settings.train_padding)


def _export(settings, bert_config):
  """Runs --export_dir: exports the latest checkpoint in --output_dir (else --init_checkpoint).

  Args:
    settings: JobSettings of job_settings.
    bert_config: modeling.BertConfig of the exported model.
  """
  common.STOP_SIGNALS.exit_if_stopped()
  checkpoint = tf1.train.latest_checkpoint(settings.output_dir) or settings.init_checkpoint
  if not checkpoint:
    common.fail("--export_dir=%s: no checkpoint in --output_dir=%s and no --init_checkpoint "
                "to export" % (settings.export_dir, settings.output_dir))
  export_model(bert_config, checkpoint, settings.export_dir, settings.max_seq_length,
               vocab_file=settings.vocab_file, do_lower_case=settings.do_lower_case,
               version_2_with_negative=settings.version_2_with_negative,
               overwrite=settings.overwrite, protected_paths=export_protected_paths(settings))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
