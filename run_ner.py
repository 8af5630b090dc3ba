# coding=utf-8
r"""BERT / RealFormer token classification (named-entity recognition) on CoNLL-style files.

  python run_ner.py --data_dir=ner/wnut17 --vocab_file=vocab.txt \
    --bert_config_file=bert_config.json --init_checkpoint=bert_model.ckpt \
    --do_train --do_eval --do_predict --output_dir=out/wnut17 \
    [--max_seq_length=128] [--doc_stride=64] [--tag_scheme=auto|bio|iob1|bioes] \
    [--residual_attention=none|sum|mean] [--export_dir=out/wnut17_export]

Input. One word a line, a blank (or white-space only) line between sentences: `token<TAB>tag`,
`token tag`, or CoNLL-2003's four columns (`EU NNP B-NP B-ORG`: the token is the first column, the
tag the last); `-DOCSTART-` lines are skipped. --data_dir holds train / dev / test files under
one of the names in DATA_FILE_NAMES (train.conll, dev.conll, test.conll, ...), or name them with
--train_file / --dev_file / --test_file. A test file may have no tags at all (one column): its
gold tags are written as "O". Tags are BIO (IOB2), IOB1 or BIOES (--tag_scheme, default: detected
from the files, ner_metrics.detect_scheme); every file is read with conlleval's rules and the
model is trained on BIO labels; predictions are written back in the files' scheme.

Labels. The entity types of the training file (plus --labels) give the label set O, B-<type>,
I-<type> (labels.txt in --output_dir). A dev / test tag of another type is a one-line error
naming the file and line, unless --labels lists the type.

Words and windows. Each word is split into word pieces (tokenization.FullTokenizer); its first
piece carries its label, the other pieces have label weight 0 (no loss, no prediction). A sentence
longer than the window (--max_seq_length - 2 pieces) is cut into overlapping windows, --doc_stride
pieces apart (sliding_window.windows), and every word is trained and predicted once, from the
window where its first piece has the most context (run_squad's max-context rule, see
max_context_window). A word without any word piece (e.g. only a variation selector or a control
character) cannot be placed: it is counted (num_unplaced_words in the results and the log) and
predicted O. No word is dropped: predictions.conll has every word of the input.

Model. modeling.BertModel's sequence output -> dropout 0.1 (modeling.dropout) -> a dense layer
`cls/ner/output_weights` [num_labels, hidden], `cls/ner/output_bias` [num_labels]; the loss is the
cross-entropy of the weighted (first-piece) positions. Any BERT checkpoint works: ours, Google's,
or a Hugging Face model converted by convert_hf_checkpoint.py. --precision=bf16|fp16 runs BERT's
matmuls in bfloat16 / float16 (fp16 with dynamic loss scaling) as run_pretraining.py does; the
variables, checkpoints, the tagging layer, logits and loss stay float32 (the export is float32).
--fused_optimizer applies AdamW with the fused Adam kernel.

Outputs in --output_dir:
  eval_results.{json,txt}  (--do_eval) entity precision / recall / F1 with the conlleval rules,
                           overall and per type (eval_type_<type>_f1, ...), token accuracy,
                           eval_loss, eval_num_words, eval_num_unplaced_words, global_step and,
                           after training, num_train_steps; written last.
  predictions.conll        (--do_predict) `token gold predicted` per word (the conlleval layout;
                           tab-separated if a token contains white space), a blank line after
                           each sentence, the tokens exactly as in the test file.
  test_results.{json,txt}  (--do_predict on a tagged test file) the same scores, test_ prefix.
  word_logits.npz          (--output_word_logits) per-word logits [words, labels] (NaN rows for
                           unplaced words), sentence_lengths, labels.
  labels.txt, ner_config.json, bert_config.json, checkpoints.

Export (--export_dir): a SavedModel (tf.saved_model.load in a fresh process after
`import tensorflow_text`) whose serving_default takes raw text, string `text` [batch], and runs
the whole pipeline in the graph: words split on white space and punctuation as
tokenization.BasicTokenizer does (tensorflow-text, as export_hub.py's preprocessor), WordPiece,
the same windows and max-context choice, the model, and the conlleval reading of the predicted
tags; a request's windows run at the length of its longest window rounded up to a bucket (16,
32, 64, ... or max_seq_length: batch_padding.padding_buckets), with the fixed-length export's
outputs to float rounding (--padding=max_length exports the fixed-length model).
Outputs, padded per batch: words, word_starts, word_ends (character offsets into the text,
end exclusive), tags (in the training files' scheme), word_logits, num_words; entities (the text
of each predicted entity), entity_types, entity_starts, entity_ends, num_entities. A second
signature `token_logits` takes int32 input_ids / input_mask / segment_ids [batch,
max_seq_length] and returns logits [batch, max_seq_length, num_labels] and predicted_label.

On TensorFlow 2.15 it trains with the Estimator; on a TensorFlow without it (2.16 and later),
with realformer_tf.tf2_training (tf.distribute): the same flags (--use_tpu through TPUStrategy,
several workers through --distribution_strategy=multi_worker_mirrored; --precision=bf16 and
fp16 as there; --iterations_per_loop refused), checkpoints (a checkpoint of either resumes on the
other) and output files (docs/compatibility.md, "Training without the Estimator").
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import contextlib
import io
import json
import os
import random
import re
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import batch_padding
from realformer_tf import serving
from realformer_tf import export_utils
from realformer_tf import model_config
import modeling
from realformer_tf import ner_metrics
from realformer_tf import sliding_window
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

# File names looked for in --data_dir, in order (the first one found is used).
DATA_FILE_NAMES = collections.OrderedDict([
    ("train", ["train.conll", "train.txt", "train.tsv", "train.bio", "eng.train"]),
    ("dev", ["dev.conll", "dev.txt", "valid.txt", "validation.txt", "dev.tsv", "dev.bio",
             "eng.testa"]),
    ("test", ["test.conll", "test.txt", "test.tsv", "test.bio", "eng.testb"]),
])
_SPLIT_MODES = {"train": "--do_train", "dev": "--do_eval", "test": "--do_predict"}
HEAD_SCOPE = "cls/ner"
NER_CONFIG = "ner_config.json"
# Dropout on the sequence output before the tagging layer (as the official classifier's 0.1).
HEAD_DROPOUT = 0.1


def define_flags():
  """Defines the command-line flags (call once, before app.run)."""
  flags.DEFINE_string("data_dir", None,
                      "Directory with the train / dev / test files (names: %s)." % "; ".join(
                          "%s: %s" % (k, ", ".join(v)) for k, v in DATA_FILE_NAMES.items()))
  flags.DEFINE_string("train_file", None, "Training file (overrides --data_dir's).")
  flags.DEFINE_string("dev_file", None, "Dev file for --do_eval (overrides --data_dir's).")
  flags.DEFINE_string("test_file", None,
                      "Test file for --do_predict (overrides --data_dir's); may have no tags.")
  flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pre-trained model.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab of the pre-trained model.")
  flags.DEFINE_string("output_dir", None, "Checkpoints, labels, results and predictions.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint: a pre-trained BERT, or a run_ner checkpoint to "
                      "evaluate, predict with or export (its labels.txt beside it).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
  flags.DEFINE_integer("max_seq_length", 128,
                       "Word pieces per window, [CLS] and [SEP] included; longer sentences are "
                       "split into overlapping windows.")
  flags.DEFINE_integer("doc_stride", None,
                       "Word pieces between the starts of a sentence's windows (default: half "
                       "the window, (max_seq_length - 2) // 2); must be smaller than the window.")
  flags.DEFINE_bool("do_train", False, "Fine-tune on the training file.")
  flags.DEFINE_bool("do_eval", False, "Score the dev file (eval_results.json).")
  flags.DEFINE_bool("do_predict", False, "Tag the test file (predictions.conll).")
  flags.DEFINE_integer("train_batch_size", 32, "Windows per training step.")
  flags.DEFINE_integer("eval_batch_size", 8, "Windows per evaluation batch.")
  flags.DEFINE_integer("predict_batch_size", 8, "Windows per prediction batch.")
  flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of Adam.")
  flags.DEFINE_float("num_train_epochs", 3.0, "Epochs over the training windows.")
  flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the steps with linear warm-up.")
  flags.DEFINE_enum("tag_scheme", "auto", ["auto"] + list(ner_metrics.SCHEMES),
                    "Tag scheme of the files: bio (IOB2), iob1, bioes, or auto (detected).")
  flags.DEFINE_string("labels", None,
                      "Comma-separated entity types (or tags such as B-PER) allowed besides "
                      "those of the training file: added to a new model's labels, and "
                      "accepted (scored) in dev / test files.")
  flags.DEFINE_string("export_dir", None,
                      "Write a raw-text SavedModel here (from the latest checkpoint in "
                      "--output_dir, else --init_checkpoint).")
  flags.DEFINE_bool("overwrite", False,
                    "Replace an earlier export of ours at --export_dir (never anything else).")
  flags.DEFINE_bool("output_word_logits", False,
                    "With --do_predict: also write word_logits.npz (per-word logits).")
  batch_padding.define_padding_flag()
  estimator_utils.define_estimator_flags()
  model_config.define_model_override_flags()


# ----------------------------------------------------------------------------------------------
# Reading CoNLL files.


class Sentence(object):
  """One sentence of a CoNLL file."""

  def __init__(self, words, tags, line_numbers):
    """Constructs a Sentence.

    Args:
      words: list of str, the tokens exactly as in the file (surrounding white space stripped).
      tags: list of str tags, or None for an untagged (test) file.
      line_numbers: list of int, the 1-based line of each word.
    """
    self.words = words
    self.tags = tags
    self.line_numbers = line_numbers


class ConllFile(object):
  """The sentences of one file and how it was laid out."""

  def __init__(self, path, flag_name, sentences, tagged, num_columns, num_docstarts):
    self.path = path
    self.flag_name = flag_name
    self.sentences = sentences
    self.tagged = tagged
    self.num_columns = num_columns
    self.num_docstarts = num_docstarts

  @property
  def num_words(self):
    return sum(len(s.words) for s in self.sentences)


# Column separators of a line without a tab: ASCII white space only, as conlleval (Perl's \s on
# bytes). str.split() would also split a token at a no-break space, U+2028, U+0085, ...: one
# column more on that line, and an error blaming the wrong line when it is the first.
_ASCII_SPACE = " \t\n\r\f\v"
_ASCII_SPACE_RE = re.compile("[%s]+" % re.escape(_ASCII_SPACE))
# More columns than any CoNLL layout has: not a token line (a file without line breaks?).
MAX_COLUMNS = 64


def _fields(line):
  """The columns of a line: split on tabs if it has one, else on ASCII white space."""
  if "\t" in line:
    fields = [field.strip(_ASCII_SPACE) for field in line.split("\t")]
  else:
    fields = _ASCII_SPACE_RE.split(line.strip(_ASCII_SPACE))
  while fields and not fields[-1]:
    fields.pop()
  return fields


_LINE_END = re.compile(b"\r\n|\r|\n")


def _lines(f, chunk_size=1 << 20):
  """(1-based number, bytes) of the lines of a binary file, without their line ends.

  A line ends at \\n, \\r\\n or a lone \\r (old Mac files), as in Python's universal newlines.
  The file is read in chunks: GFile's line iteration deletes every \\r, which joins the
  lines of a CR-only file into one.

  Args:
    f: a file opened in binary mode.
    chunk_size: bytes per read.

  Yields:
    (line number, line bytes).
  """
  number = 0
  pending = []  # the pieces of a line that goes on in the next chunk
  held_cr = b""
  while True:
    chunk = f.read(chunk_size)
    data = held_cr + chunk
    held_cr = b""
    if chunk and data.endswith(b"\r"):
      data, held_cr = data[:-1], b"\r"  # maybe the first half of a \r\n
    parts = _LINE_END.split(data)
    last = parts.pop()
    if parts:
      parts[0] = b"".join(pending) + parts[0]
      pending = []
    pending.append(last)  # (only the new chunk is scanned: a long line costs no rescans)
    for part in parts:
      number += 1
      yield number, part
    if not chunk:
      tail = b"".join(pending)
      if tail:
        number += 1
        yield number, tail
      return


def read_conll(path, flag_name, allow_untagged=False):
  """Reads a CoNLL-style file into sentences.

  Bytes that are not UTF-8 are kept (surrogate escapes), so the words can be written back
  exactly; a UTF-8 byte-order mark at the start is dropped.

  Args:
    path: the file.
    flag_name: the flag that named it (messages).
    allow_untagged: accept a file whose lines all have one column (a test file without tags).

  Returns:
    ConllFile. Every bad line is a one-line UsageError naming path:line.
  """
  common.require_file(path, flag_name)
  sentences = []
  words, tags, lines = [], [], []
  num_columns = None
  first_line = None
  num_docstarts = 0

  def flush():
    if words:
      sentences.append(Sentence(list(words), list(tags) if num_columns > 1 else None,
                                list(lines)))
      del words[:], tags[:], lines[:]

  with tf.io.gfile.GFile(path, "rb") as f:
    for number, raw in _lines(f):
      if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
      line = raw.decode("utf-8", "surrogateescape")
      if not line.strip(_ASCII_SPACE):
        flush()
        continue
      fields = _fields(line)
      if len(fields) > MAX_COLUMNS:
        common.fail("%s:%d: %d columns, more than %d (the line starts %r): not a CoNLL "
                    "token line" % (path, number, len(fields), MAX_COLUMNS, line[:20]))
      if not fields[0]:
        common.fail("%s:%d: no token before the tab (%r)" % (path, number, line[:80]))
      if fields[0].startswith("-DOCSTART-"):
        num_docstarts += 1
        flush()
        continue
      if num_columns is None:
        num_columns, first_line = len(fields), number
        if num_columns == 1 and not allow_untagged:
          common.fail("%s:%d: one column (%r): a token without a tag; expected token<TAB>tag, "
                      "token tag, or CoNLL-2003's columns with the tag last" %
                      (path, number, line[:80]))
      elif len(fields) != num_columns:
        if len(fields) == 1:
          common.fail("%s:%d: one column (%r): a token without a tag (line %d has %d columns)" %
                      (path, number, line[:80], first_line, num_columns))
        common.fail("%s:%d: %d columns (%r), but line %d has %d" % (
            path, number, len(fields), line[:80], first_line, num_columns))
      words.append(fields[0])
      tags.append(fields[-1])
      lines.append(number)
  flush()
  if not sentences:
    common.fail("--%s=%s: no sentences (an empty file%s)" % (
        flag_name, path, ", or only -DOCSTART- lines" if num_docstarts else ""))
  conll = ConllFile(path, flag_name, sentences, num_columns > 1, num_columns, num_docstarts)
  tf1.logging.info("%s: %d sentences, %d words, %d column(s)%s%s", path, len(sentences),
                   conll.num_words, num_columns, "" if conll.tagged else " (no tags)",
                   ", %d -DOCSTART- line(s) skipped" % num_docstarts if num_docstarts else "")
  return conll


def resolve_scheme(flag_scheme, conll_files, saved_scheme=None):
  """The tag scheme of a job: --tag_scheme, else detected from its tagged files.

  Args:
    flag_scheme: "auto" or one of ner_metrics.SCHEMES.
    conll_files: the ConllFiles read by the job.
    saved_scheme: the scheme recorded in --output_dir (used when no file has tags), or None.

  Returns:
    A scheme name.
  """
  tagged = [f for f in conll_files if f.tagged]
  if flag_scheme != "auto":
    scheme = flag_scheme
  elif not tagged:
    return saved_scheme or "bio"
  else:
    scheme = ner_metrics.detect_scheme(s.tags for f in tagged for s in f.sentences)
  if scheme == "bio":
    # An entity that starts with I- is an error in BIO (read as conlleval does: the start of
    # an entity); a few of them do not make the files IOB1 (ner_metrics.detect_scheme).
    stray = []
    for conll in tagged:
      counts = ner_metrics.scheme_evidence(s.tags for s in conll.sentences)
      if counts["i_starts"]:
        s, w = counts["first_i_start"]
        stray.append("%s: %d (first at line %d)" % (
            conll.path, counts["i_starts"], conll.sentences[s].line_numbers[w]))
    if stray:
      tf1.logging.warning(
          "Tag scheme BIO%s, but some entities start with an I- tag, which BIO never has "
          "(read as entity starts, as conlleval does): %s. If the files are IOB1, pass "
          "--tag_scheme=iob1", " (detected: more B- tags than I- starts)"
          if flag_scheme == "auto" else "", "; ".join(stray))
  return scheme


def check_tags(conll_file, scheme, detected):
  """Fails with path:line on the first tag that is not a tag of `scheme`.

  Args:
    conll_file: ConllFile.
    scheme: the job's scheme.
    detected: whether the scheme was detected (--tag_scheme=auto), for the message.
  """
  if not conll_file.tagged:
    return
  pattern = ner_metrics.tag_pattern(scheme)
  for sentence in conll_file.sentences:
    for tag, number in zip(sentence.tags, sentence.line_numbers):
      if not pattern.match(tag):
        common.fail("%s:%d: tag %r is not a %s tag (%s)%s" % (
            conll_file.path, number, tag, ner_metrics.SCHEME_NAMES[scheme],
            ner_metrics.tag_help(scheme),
            "; the scheme was detected from the files, see --tag_scheme" if detected
            else "; --tag_scheme=%s" % scheme))


def entity_types(conll_file):
  """The set of entity types in a tagged file's tags."""
  types = set()
  if conll_file.tagged:
    for sentence in conll_file.sentences:
      for tag in sentence.tags:
        if tag != "O":
          types.add(ner_metrics.split_tag(tag)[1])
  return types


def parse_labels_flag(value):
  """--labels: entity types, or tags (B-PER, S-PER, ...) whose types are taken; O is ignored.

  Returns:
    set of type strings.
  """
  types = set()
  for item in (value or "").split(","):
    item = item.strip()
    if not item or item == "O":
      continue
    prefix, type_ = ner_metrics.split_tag(item)
    types.add(type_ if prefix in ("B", "I", "E", "S") and type_ else item)
  return types


def label_list(types):
  """The model's labels: O, then B-<type>, I-<type> for each type (sorted)."""
  labels = ["O"]
  for type_ in sorted(types):
    labels += ["B-" + type_, "I-" + type_]
  return labels


def label_types(labels):
  """The entity types of a label list."""
  return set(ner_metrics.split_tag(label)[1] for label in labels if label != "O")


def check_types(conll_file, allowed, source):
  """Fails with path:line on the first tag whose type is not in `allowed`.

  Args:
    conll_file: a dev or test ConllFile.
    allowed: set of entity types the job knows.
    source: where the known types come from (message).
  """
  if not conll_file.tagged:
    return
  for sentence in conll_file.sentences:
    for tag, number in zip(sentence.tags, sentence.line_numbers):
      if tag != "O" and ner_metrics.split_tag(tag)[1] not in allowed:
        common.fail("%s:%d: tag %r has entity type %r, which is not one of the model's (%s, "
                    "from %s); add it to --labels to score it anyway" % (
                        conll_file.path, number, tag, ner_metrics.split_tag(tag)[1],
                        ", ".join(sorted(allowed)) or "none", source))


def bio_label_ids(tags, label_map):
  """Label ids of one sentence's gold tags: read as entities, written as BIO, looked up.

  Args:
    tags: the sentence's tags (any scheme).
    label_map: dict BIO label -> id.

  Returns:
    list of ids, -1 for a label the model does not have (not trained on, not scored by loss).
  """
  return [label_map.get(label, -1) for label in ner_metrics.convert_tags(tags, "bio")]


# ----------------------------------------------------------------------------------------------
# Word pieces and windows.


# The window where a piece has the most context: run_squad's rule, computed exactly (integers,
# as max_context_graph), so the Python and the exported graph's choices agree even on ties.
max_context_window = sliding_window.max_context_window


def window_assignments(first_pieces, num_pieces, window, doc_stride):
  """Cuts a sentence's pieces into windows and gives each word the window that predicts it.

  Args:
    first_pieces: per word, the index of its first piece, or -1 for a word without pieces.
    num_pieces: number of pieces of the sentence.
    window: pieces per window (max_seq_length - 2).
    doc_stride: pieces between window starts (< window).

  Returns:
    (doc_spans, assigned): sliding_window.windows, and per window the list of
    (position in the window's input, 1 + piece offset for [CLS], word index) of the words it
    predicts. Every word with pieces is in exactly one list; words without pieces in none.
  """
  doc_spans = sliding_window.windows(num_pieces, window, doc_stride)
  assigned = [[] for _ in doc_spans]
  for word, piece in enumerate(first_pieces):
    if piece < 0:
      continue
    index = sliding_window.max_context_window(doc_spans, piece)
    assigned[index].append((piece - doc_spans[index].start + 1, word))
  return doc_spans, assigned


class WindowFeature(object):
  """One window of one sentence: the model's inputs and which words it predicts."""

  def __init__(self, sentence_index, input_ids, input_mask, segment_ids, label_ids,
               label_weights, word_positions):
    self.sentence_index = sentence_index
    self.input_ids = input_ids
    self.input_mask = input_mask
    self.segment_ids = segment_ids
    self.label_ids = label_ids
    self.label_weights = label_weights
    # [(position in input_ids, word index in the sentence)] of the words predicted here.
    self.word_positions = word_positions


def _model_text(word):
  """A word as the tokenizer sees it: bytes that are not UTF-8 dropped (as convert_to_unicode)."""
  try:
    word.encode("utf-8")
    return word
  except UnicodeEncodeError:
    return word.encode("utf-8", "surrogateescape").decode("utf-8", "ignore")


def sentence_pieces(tokenizer, words):
  """Word-piece ids of a sentence and the first piece of each word.

  Args:
    tokenizer: tokenization.FullTokenizer.
    words: list of word strings.

  Returns:
    (piece ids, first_pieces): first_pieces[i] is the index of word i's first piece, or -1
    when the tokenizer gives it no piece at all.
  """
  piece_ids = []
  first_pieces = []
  for word in words:
    ids = tokenizer.tokenize_to_ids(_model_text(word))
    first_pieces.append(len(piece_ids) if ids else -1)
    piece_ids.extend(ids)
  return piece_ids, first_pieces


class FeatureStats(object):
  """Counts of a file's conversion into windows."""

  def __init__(self):
    self.num_sentences = 0
    self.num_words = 0
    self.num_unplaced_words = 0
    self.num_windows = 0
    self.num_split_sentences = 0
    self.first_unplaced = []

  def log(self, path):
    tf1.logging.info(
        "%s: %d sentences, %d words -> %d windows (%d sentence(s) longer than one window)",
        path, self.num_sentences, self.num_words, self.num_windows, self.num_split_sentences)
    if self.num_unplaced_words:
      tf1.logging.warning(
          "%s: %d word(s) have no word piece and cannot be placed in a window; they are "
          "predicted O (first at line(s) %s)", path, self.num_unplaced_words,
          ", ".join(str(x) for x in self.first_unplaced))


def convert_sentences(sentences, tokenizer, label_map, max_seq_length, doc_stride,
                      with_labels, path=""):
  """Turns sentences into window features.

  Args:
    sentences: list of Sentence.
    tokenizer: tokenization.FullTokenizer.
    label_map: dict BIO label -> id.
    max_seq_length: sequence length of a window's input.
    doc_stride: pieces between window starts.
    with_labels: fill label_ids / label_weights from the gold tags (training).
    path: the file, for the log.

  Returns:
    (list of WindowFeature, only windows that predict at least one word; FeatureStats).
  """
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  window = max_seq_length - 2
  features = []
  stats = FeatureStats()
  meter = common.ProgressMeter(len(sentences), unit="sentences", min_interval_s=10.0)
  for sentence_index, sentence in enumerate(sentences):
    piece_ids, first_pieces = sentence_pieces(tokenizer, sentence.words)
    label_ids = None
    if with_labels:
      label_ids = bio_label_ids(sentence.tags, label_map)
    doc_spans, assigned = window_assignments(first_pieces, len(piece_ids), window, doc_stride)
    stats.num_sentences += 1
    stats.num_words += len(sentence.words)
    unplaced = [i for i, p in enumerate(first_pieces) if p < 0]
    stats.num_unplaced_words += len(unplaced)
    for i in unplaced:
      if len(stats.first_unplaced) < 5:
        stats.first_unplaced.append(sentence.line_numbers[i])
    if len(doc_spans) > 1:
      stats.num_split_sentences += 1
    for span, positions in zip(doc_spans, assigned):
      if not positions:
        continue  # Every word of this window is predicted from another one.
      input_ids = [cls_id] + piece_ids[span.start:span.start + span.length] + [sep_id]
      input_mask = [1] * len(input_ids)
      padding = max_seq_length - len(input_ids)
      input_ids += [0] * padding
      input_mask += [0] * padding
      row_ids = [0] * max_seq_length
      row_weights = [0.0] * max_seq_length
      if label_ids is not None:
        for position, word in positions:
          if label_ids[word] >= 0:
            row_ids[position] = label_ids[word]
            row_weights[position] = 1.0
      features.append(WindowFeature(sentence_index, input_ids, input_mask,
                                    [0] * max_seq_length, row_ids, row_weights, positions))
    if sentence_index % 200 == 0:
      meter.update(sentence_index)
      common.STOP_SIGNALS.exit_if_stopped()
  stats.num_windows = len(features)
  stats.log(path)
  return features, stats


def write_features(features, output_file):
  """Writes window features as a TFRecord (a temporary name, then renamed).

  Features: input_ids, input_mask, segment_ids, label_ids int64 and label_weights float
  [max_seq_length].
  """
  common.remove_stale_temps(output_file)
  tmp_file = common.temp_path(output_file)

  def int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  try:
    with tf.io.TFRecordWriter(tmp_file) as writer:
      for feature in features:
        record = collections.OrderedDict()
        record["input_ids"] = int_feature(feature.input_ids)
        record["input_mask"] = int_feature(feature.input_mask)
        record["segment_ids"] = int_feature(feature.segment_ids)
        record["label_ids"] = int_feature(feature.label_ids)
        record["label_weights"] = tf.train.Feature(
            float_list=tf.train.FloatList(value=list(feature.label_weights)))
        writer.write(tf.train.Example(
            features=tf.train.Features(feature=record)).SerializeToString())
    tf.io.gfile.rename(tmp_file, output_file, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_file):
      tf.io.gfile.remove(tmp_file)


def input_fn_builder(input_file, seq_length, is_training, drop_remainder, seed=None,
                     skip_batches=0, padding="max_length"):
  """An input_fn (batch size from params["batch_size"]) over a window TFRecord.

  Args:
    input_file: TFRecord of write_features.
    seq_length: its max_seq_length.
    is_training: repeat and shuffle (seeded).
    drop_remainder: drop a last partial batch (TPU).
    seed: shuffle seed.
    skip_batches: batches a resumed job already trained on (estimator_utils.resume_skip_batches).
    padding: "max_length": every batch [batch, seq_length]; "longest": each batch sliced to its
      longest window (batch_padding.trim_batch_to_longest), labels and weights too.

  Returns:
    input_fn(params) -> tf.data.Dataset of int32 / float32 feature dicts.
  """
  name_to_features = {
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "label_weights": tf.io.FixedLenFeature([seq_length], tf.float32),
  }

  return estimator_utils.tfrecord_input_fn(input_file, name_to_features, is_training,
                                           drop_remainder, seed, skip_batches,
                                           padding=padding, seq_names=tuple(name_to_features))


# ----------------------------------------------------------------------------------------------
# Model.


def ner_logits(sequence_output, num_labels, is_training):
  """The tagging layer on BERT's sequence output.

  Args:
    sequence_output: float [batch, seq, hidden].
    num_labels: number of labels.
    is_training: dropout 0.1 on the sequence output (modeling.dropout, step-seeded).

  Returns:
    float32 [batch, seq, num_labels] logits. Variables: cls/ner/output_weights [num_labels,
    hidden], cls/ner/output_bias [num_labels].
  """
  # float32 in every precision (BertModel's outputs are; no op when already so).
  sequence_output = tf.cast(sequence_output, tf.float32)
  batch_size, seq_length, hidden_size = modeling.get_shape_list(sequence_output,
                                                                expected_rank=3)
  with tf1.variable_scope(HEAD_SCOPE):
    output_weights = tf1.get_variable(
        "output_weights", [num_labels, hidden_size],
        initializer=tf1.truncated_normal_initializer(stddev=0.02))
    output_bias = tf1.get_variable("output_bias", [num_labels],
                                   initializer=tf1.zeros_initializer())
  if is_training:
    # seq_axes: under modeling.full_length_dropout the mask is drawn at the full length.
    sequence_output = modeling.dropout(sequence_output, HEAD_DROPOUT, seq_axes=(1,))
  flat = tf.reshape(sequence_output, [batch_size * seq_length, hidden_size])
  logits = tf.nn.bias_add(tf.matmul(flat, output_weights, transpose_b=True), output_bias)
  return tf.reshape(logits, [batch_size, seq_length, num_labels])


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, num_labels,
                 use_one_hot_embeddings, compute_dtype=None, skip_padding=False):
  """BERT and the tagging layer.

  Args:
    bert_config: modeling.BertConfig.
    is_training: dropout on.
    input_ids, input_mask, segment_ids: int32 [batch, seq].
    num_labels: number of labels.
    use_one_hot_embeddings: one-hot embedding lookup (TPU).
    compute_dtype: BERT's compute dtype (modeling.BertModel; "fp32" / "bf16" / "fp16" or a
      dtype, None: float32); the tagging layer is float32 in all.
    skip_padding: BERT computes the real tokens only (modeling.BertModel's skip_padding; not
      for TPU / XLA): the same logits at real positions to float rounding.

  Returns:
    float32 [batch, seq, num_labels] logits.
  """
  model = modeling.BertModel(
      config=bert_config, is_training=is_training, input_ids=input_ids, input_mask=input_mask,
      token_type_ids=segment_ids, use_one_hot_embeddings=use_one_hot_embeddings,
      compute_dtype=compute_dtype, skip_padding=skip_padding)
  return ner_logits(model.get_sequence_output(), num_labels, is_training)


def masked_loss(logits, label_ids, label_weights):
  """Mean cross-entropy over the weighted positions (the words' first pieces).

  Args:
    logits: float [batch, seq, num_labels].
    label_ids: int32 [batch, seq].
    label_weights: float [batch, seq], 1 at a word's first piece in its window, else 0.

  Returns:
    float scalar (0 for a batch without any weighted position).
  """
  num_labels = modeling.get_shape_list(logits, expected_rank=3)[2]
  log_probs = tf.nn.log_softmax(logits, axis=-1)
  one_hot = tf.one_hot(label_ids, depth=num_labels, dtype=tf.float32)
  per_position = -tf.reduce_sum(one_hot * log_probs, axis=-1)
  weights = tf.cast(label_weights, tf.float32)
  return tf.reduce_sum(per_position * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate, num_train_steps,
                     num_warmup_steps, use_tpu, use_one_hot_embeddings, precision="fp32",
                     fused_optimizer=False, keep_checkpoint_max=5, max_seq_length=None,
                     skip_padding=False, allow_unmatched_init=False):
  """The model_fn for TPUEstimator: TRAIN (masked loss, AdamW) and PREDICT ({"logits"}).

  precision ("fp32", "bf16", "fp16") is BERT's compute dtype (create_model); precision,
  fused_optimizer and keep_checkpoint_max go to estimator_utils.create_train_op (fp16: dynamic
  loss scaling and a saver that also resumes fp32 / bf16 checkpoints). With max_seq_length
  (the features' --max_seq_length) the dropout masks (BERT's and the head's) are drawn at that
  length (modeling.full_length_dropout): a training batch padded to its longest window
  (--padding=longest) drops what the max_length batch drops. skip_padding: BERT computes the
  real tokens only (create_model; not for TPU / XLA).
  """
  compute_dtype = modeling.get_compute_dtype(precision)

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    is_training = mode == tf1.estimator.ModeKeys.TRAIN
    with (modeling.full_length_dropout(max_seq_length) if max_seq_length
          else contextlib.nullcontext()):
      logits = create_model(bert_config, is_training, features["input_ids"],
                            features["input_mask"], features["segment_ids"], num_labels,
                            use_one_hot_embeddings, compute_dtype=compute_dtype,
                            skip_padding=skip_padding)
    scaffold_fn = estimator_utils.init_checkpoint_scaffold_fn(
        init_checkpoint, use_tpu, allow_unmatched=allow_unmatched_init)
    if mode == tf1.estimator.ModeKeys.TRAIN:
      loss = masked_loss(logits, features["label_ids"], features["label_weights"])
      train_op = estimator_utils.create_train_op(
          loss, learning_rate, num_train_steps, num_warmup_steps, use_tpu,
          precision=precision, fused_optimizer=fused_optimizer,
          keep_checkpoint_max=keep_checkpoint_max)
      return tf1.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op,
                                                scaffold_fn=scaffold_fn)
    if mode == tf1.estimator.ModeKeys.PREDICT:
      return tf1.estimator.tpu.TPUEstimatorSpec(mode=mode, predictions={"logits": logits},
                                                scaffold_fn=scaffold_fn)
    raise ValueError("Only TRAIN and PREDICT modes are supported: %s" % mode)

  return model_fn


def _engine_model_fn(bert_config, num_labels, use_one_hot_embeddings, max_seq_length=None,
                     skip_padding=False, compute_dtype=None):
  """model_fn_builder's graph as a tf2_training.Engine model function.

  Args:
    bert_config, num_labels, use_one_hot_embeddings, max_seq_length, skip_padding: as
      model_fn_builder.
    compute_dtype: BERT's compute dtype (create_model's; None: float32).

  Returns:
    model_fn(features, is_training) -> (the masked loss in training, else None;
    {"logits": float32 [batch, seq, num_labels]}).
  """
  def model_fn(features, is_training):
    with (modeling.full_length_dropout(max_seq_length) if max_seq_length
          else contextlib.nullcontext()):
      logits = create_model(bert_config, is_training, features["input_ids"],
                            features["input_mask"], features["segment_ids"], num_labels,
                            use_one_hot_embeddings, compute_dtype=compute_dtype,
                            skip_padding=skip_padding)
    loss = None
    if is_training:
      loss = masked_loss(logits, features["label_ids"], features["label_weights"])
    return loss, {"logits": logits}

  return model_fn


def model_variable_names(bert_config):
  """The names of the model's variables (BERT and the tagging layer)."""
  return set(estimator_utils.bert_variable_shapes(bert_config)) | {
      HEAD_SCOPE + "/output_weights", HEAD_SCOPE + "/output_bias"}


def head_shapes(num_labels, bert_config):
  """{variable name: shape} of the tagging layer (for estimator_utils.check_resume)."""
  return {HEAD_SCOPE + "/output_weights": [num_labels, bert_config.hidden_size],
          HEAD_SCOPE + "/output_bias": [num_labels]}


# ----------------------------------------------------------------------------------------------
# From window predictions to words, tags and scores.


def gather_word_logits(sentences, features, outputs, num_labels):
  """Each word's logits, from the window that predicts it.

  Args:
    sentences: list of Sentence.
    features: the WindowFeatures of these sentences.
    outputs: Estimator.predict dicts ({"logits": [seq, num_labels]}), one per feature.
    num_labels: number of labels.

  Returns:
    list (per sentence) of float32 arrays [words, num_labels]; NaN rows for unplaced words.
  """
  if len(outputs) != len(features):
    raise RuntimeError("predicted %d of %d windows" % (len(outputs), len(features)))
  result = [np.full((len(s.words), num_labels), np.nan, dtype=np.float32) for s in sentences]
  for feature, output in zip(features, outputs):
    logits = output["logits"]
    for position, word in feature.word_positions:
      result[feature.sentence_index][word] = logits[position]
  return result


def predicted_tags(word_logits, labels, scheme):
  """Predicted tags of one sentence in `scheme` (the argmax labels read with conlleval's rules).

  Args:
    word_logits: float [words, num_labels] (NaN rows: unplaced words, predicted O).
    labels: the model's BIO labels.
    scheme: output scheme.

  Returns:
    list of tag strings.
  """
  bio = ["O" if np.isnan(row[0]) else labels[int(np.argmax(row))] for row in word_logits]
  return ner_metrics.convert_tags(bio, scheme)


def word_loss(word_logits, sentences, label_map):
  """Mean cross-entropy of the gold labels of the placed words the model has labels for."""
  total, count = 0.0, 0
  for logits, sentence in zip(word_logits, sentences):
    for row, gold in zip(logits, bio_label_ids(sentence.tags, label_map)):
      if gold < 0 or np.isnan(row[0]):
        continue
      shifted = row.astype(np.float64) - np.max(row)
      total -= shifted[gold] - np.log(np.sum(np.exp(shifted)))
      count += 1
  return total / count if count else 0.0


def write_predictions_conll(path, conll_file, tags):
  """Writes `token gold predicted` lines, a blank line after each sentence (atomically).

  Args:
    path: output file.
    conll_file: the ConllFile predicted (its words are written exactly; gold "O" without tags).
    tags: per sentence, the predicted tags.

  Returns:
    The column separator used (" ", or "\\t" when a token contains white space).
  """
  sep = " "
  if any(len(w.split()) != 1 for s in conll_file.sentences for w in s.words):
    sep = "\t"
    tf1.logging.warning("%s: some tokens contain white space: %s is tab-separated "
                        "(conlleval -d '\\t')", conll_file.path, path)
  with common.atomic_output(path, "wb") as f:
    for sentence, predicted in zip(conll_file.sentences, tags):
      gold = sentence.tags or ["O"] * len(sentence.words)
      text = "".join(sep.join(fields) + "\n" for fields in zip(sentence.words, gold, predicted))
      f.write((text + "\n").encode("utf-8", "surrogateescape"))
  return sep


def write_word_logits(path, word_logits, labels):
  """word_logits.npz: logits [words, labels] (file order), sentence_lengths, labels."""
  buf = io.BytesIO()
  np.savez(buf, logits=np.concatenate(word_logits, axis=0) if word_logits else
           np.zeros((0, len(labels)), np.float32),
           sentence_lengths=np.array([len(x) for x in word_logits], dtype=np.int64),
           labels=np.array(labels))
  with common.atomic_output(path, "wb") as f:
    f.write(buf.getvalue())


# ----------------------------------------------------------------------------------------------
# Raw-text SavedModel.

# Word separators of tokenization.BasicTokenizer after its cleaning: \t \n \r, Zs and the
# characters str.split() splits on besides (U+2028, U+2029). Other control characters are not
# separators: BasicTokenizer deletes them, joining what surrounds them.
_SEPARATORS = r"[ \t\n\r\p{Zs}\x{2028}\x{2029}]"
# What BasicTokenizer's cleaning deletes from a word (NUL and U+FFFD are Cc / So+special).
_DELETED = r"[\p{Cc}\p{Cf}\x{FFFD}]"
_PREFIX_IDS = {"O": 0, "B": 1, "I": 2}


def split_text_graph(text, do_lower_case):
  """BasicTokenizer's words as TF ops, with their offsets into the text.

  Args:
    text: string [batch], valid UTF-8.
    do_lower_case: Python bool (lower-case, NFD, strip accents before WordPiece).

  Returns:
    (words, normalized, begin, end): RaggedTensors [batch, (words)] of the words as in the text,
    the words as WordPiece sees them, and their byte offsets (int64, end exclusive). A word
    that the cleaning leaves empty (only control characters, format characters, lone accents)
    is dropped, as BasicTokenizer drops it.
  """
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  keep = "%s|%s" % (export_utils.PUNCT_PATTERN, export_utils.CJK_PATTERN)
  # regex_split ends a text at its first NUL; U+0001 is as deleted as NUL and has its byte
  # length, so the offsets stay those of the text.
  split_text = tf.strings.regex_replace(text, "\\x00", "\x01")
  _, begin, end = tf_text.regex_split_with_offsets(
      split_text, "%s|%s" % (_SEPARATORS, keep), keep)
  words = begin.with_flat_values(tf.strings.substr(
      tf.gather(text, begin.value_rowids()), begin.flat_values,
      end.flat_values - begin.flat_values, unit="BYTE"))
  normalized = tf.strings.regex_replace(words.flat_values, _DELETED, "")
  if do_lower_case:
    normalized = serving.lower_text(normalized, strip_accents=True)
  too_long = (tf.strings.length(normalized, unit="UTF8_CHAR") >
              serving.MAX_CHARS_PER_WORD)
  normalized = tf.where(too_long, "[UNK]", normalized)
  kept = words.with_flat_values(tf.strings.length(normalized) > 0)
  normalized = words.with_flat_values(normalized)
  return (tf.ragged.boolean_mask(words, kept), tf.ragged.boolean_mask(normalized, kept),
          tf.ragged.boolean_mask(begin, kept), tf.ragged.boolean_mask(end, kept))


def char_offsets_graph(text, byte_offsets):
  """Byte offsets [batch, (n)] into UTF-8 text -> character (code point) offsets, int32."""
  big = tf.constant(np.iinfo(np.int64).max, tf.int64)
  _, char_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
  starts = char_starts.to_tensor(default_value=big)
  starts = tf.concat([starts, tf.fill([tf.shape(starts)[0], 1], big)], axis=1)
  dense = byte_offsets.to_tensor(default_value=0)
  chars = tf.searchsorted(starts, dense, side="left", out_type=tf.int32)
  return tf.RaggedTensor.from_tensor(chars, lengths=byte_offsets.row_lengths()).flat_values


def windows_graph(piece_ids, max_seq_length, doc_stride, cls_id, sep_id):
  """Every text's windows, as convert_sentences cuts them (sliding_window.windows).

  Args:
    piece_ids: int32 RaggedTensor [batch, (pieces)].
    max_seq_length: Python int, the window's input length.
    doc_stride: Python int.
    cls_id, sep_id: Python ints.

  Returns:
    dict: input_ids / input_mask / segment_ids int32 [windows, max_seq_length]; text, start,
    length int32 [windows]. A text has 1 + ceil(max(0, pieces - window) / stride) windows.
  """
  window = max_seq_length - 2
  num_pieces = tf.cast(piece_ids.row_lengths(), tf.int32)
  num_windows = 1 + (tf.maximum(num_pieces - window, 0) + doc_stride - 1) // doc_stride
  window_text = tf.repeat(tf.range(tf.shape(num_pieces)[0]), num_windows)
  start = tf.ragged.range(num_windows).flat_values * doc_stride
  length = tf.minimum(tf.gather(num_pieces, window_text) - start, window)
  position = tf.range(window)[tf.newaxis, :]
  valid = position < length[:, tf.newaxis]
  first = tf.cast(tf.gather(piece_ids.row_starts(), window_text), tf.int32)
  flat_index = first[:, tf.newaxis] + start[:, tf.newaxis] + position
  # One spare id, so that the gather is valid when there are no pieces at all.
  flat_ids = tf.concat([piece_ids.flat_values, [0]], axis=0)
  ids = tf.where(valid, tf.gather(flat_ids, tf.where(valid, flat_index, 0)), 0)
  count = tf.shape(ids)[0]
  input_ids = tf.concat([tf.fill([count, 1], cls_id), ids, tf.zeros([count, 1], tf.int32)],
                        axis=1)
  input_ids += tf.one_hot(length + 1, max_seq_length, dtype=tf.int32) * sep_id
  input_mask = tf.cast(tf.range(max_seq_length)[tf.newaxis, :] < (length + 2)[:, tf.newaxis],
                       tf.int32)
  return {"input_ids": input_ids, "input_mask": input_mask,
          "segment_ids": tf.zeros_like(input_ids), "text": window_text, "start": start,
          "length": length, "flat_index": flat_index, "valid": valid}


def max_context_graph(windows, num_pieces_total):
  """Per piece, the window (and position in it) with the most context: max_context_window.

  Args:
    windows: windows_graph's dict.
    num_pieces_total: int32 scalar, pieces of the whole batch.

  Returns:
    (window, position) int32 [pieces]: position in the window's input ([CLS] = 0).
  """
  valid = windows["valid"]
  length = windows["length"][:, tf.newaxis]
  position = tf.range(tf.shape(valid)[1])[tf.newaxis, :]
  score = 100 * tf.minimum(position, length - 1 - position) + length
  entries = tf.where(valid)
  entry_window = tf.cast(entries[:, 0], tf.int32)
  entry_position = tf.cast(entries[:, 1], tf.int32)
  entry_piece = tf.boolean_mask(windows["flat_index"], valid)
  entry_score = tf.boolean_mask(score, valid)
  best = tf.math.unsorted_segment_max(entry_score, entry_piece, num_pieces_total)
  is_best = tf.equal(entry_score, tf.gather(best, entry_piece))
  # The first window on ties (run_squad's strict ">").
  best_window = tf.math.unsorted_segment_min(
      tf.where(is_best, entry_window, tf.int32.max), entry_piece, num_pieces_total)
  chosen = tf.logical_and(is_best, tf.equal(entry_window, tf.gather(best_window, entry_piece)))
  best_position = tf.math.unsorted_segment_max(
      tf.where(chosen, entry_position, -1), entry_piece, num_pieces_total)
  return best_window, best_position + 1


def chunk_graph(prefix, type_id, row_ids, row_starts, row_limits):
  """conlleval's reading of BIO labels, vectorised over the words of a batch.

  Args:
    prefix: int32 [words]: 0 O, 1 B, 2 I.
    type_id: int32 [words] (0 for O).
    row_ids, row_starts, row_limits: int32: the text of each word, and each text's first word
      and end (exclusive), in the flat word order.

  Returns:
    (start, end, prev_prefix, prev_type) bool / int32 [words]: whether an entity starts / ends
    at each word (ner_metrics.start_of_chunk / end_of_chunk), and the previous word's label.
  """
  index = tf.range(tf.shape(prefix)[0])
  first = tf.equal(index, tf.gather(row_starts, row_ids))
  last = tf.equal(index + 1, tf.gather(row_limits, row_ids))
  prev_prefix = tf.where(first, 0, tf.roll(prefix, 1, axis=0))
  prev_type = tf.where(first, 0, tf.roll(type_id, 1, axis=0))
  next_prefix = tf.where(last, 0, tf.roll(prefix, -1, axis=0))
  next_type = tf.where(last, 0, tf.roll(type_id, -1, axis=0))
  start = tf.logical_or(
      tf.equal(prefix, 1),
      tf.logical_and(tf.equal(prefix, 2),
                     tf.logical_or(tf.equal(prev_prefix, 0), tf.not_equal(prev_type, type_id))))
  end = tf.logical_and(
      tf.not_equal(prefix, 0),
      tf.logical_or(tf.not_equal(next_prefix, 2), tf.not_equal(next_type, type_id)))
  return start, end, prev_prefix, prev_type


def scheme_tags_graph(scheme, prefix, type_names, start, end, prev_prefix, prev_type, type_id):
  """Tag strings in `scheme` from the entity reading (ner_metrics.chunks_to_tags)."""
  inside = tf.not_equal(prefix, 0)
  if scheme == "bio":
    head = tf.where(start, "B-", "I-")
  elif scheme == "bioes":
    head = tf.where(start, tf.where(end, "S-", "B-"), tf.where(end, "E-", "I-"))
  else:
    after_same = tf.logical_and(tf.not_equal(prev_prefix, 0), tf.equal(prev_type, type_id))
    head = tf.where(tf.logical_and(start, after_same), "B-", "I-")
  return tf.where(inside, tf.strings.join([head, type_names]), "O")


def _dense(values, row_ids, nrows, default):
  """Flat per-word (or per-entity) values -> [batch, max] padded with `default`."""
  return tf.RaggedTensor.from_value_rowids(values, tf.cast(row_ids, tf.int64),
                                           nrows=tf.cast(nrows, tf.int64)).to_tensor(default)


class NerTagger(tf.Module):
  """The raw-text NER SavedModel: BasicTokenizer words, WordPiece, windows, BERT, tags."""

  def __init__(self, bert_config, variables, preprocessor, labels, scheme, max_seq_length,
               doc_stride, do_lower_case, padding="bucket"):
    """Wraps existing variables (bert/*, cls/ner/*).

    Args:
      bert_config: modeling.BertConfig.
      variables: dict name -> tf.Variable (export_utils.variables_from_checkpoint).
      preprocessor: serving.BertPreprocessor of the vocab (its WordPiece tokenizer is used).
      labels: the model's BIO labels.
      scheme: the scheme the tags are written in.
      max_seq_length: window input length.
      doc_stride: pieces between window starts.
      do_lower_case: lower-case and strip accents.
      padding: "bucket": a request's windows are cut to their longest, rounded up to one of
        batch_padding.padding_buckets (from SERVING_SMALLEST_BUCKET); "max_length": every
        window max_seq_length.
    """
    super(NerTagger, self).__init__()
    if padding not in ("bucket", "max_length"):
      raise ValueError("padding=%r: bucket or max_length" % padding)
    self._buckets = batch_padding.padding_buckets(
        max_seq_length, batch_padding.SERVING_SMALLEST_BUCKET) if padding == "bucket" else None
    self._bert_config = bert_config
    self._variables = variables
    self.preprocessor = preprocessor
    self._labels = list(labels)
    self._scheme = scheme
    self._max_seq_length = max_seq_length
    self._doc_stride = doc_stride
    self._do_lower_case = do_lower_case
    self._types = sorted(label_types(labels))
    self.label_names = tf.Variable(self._labels, trainable=False, name="label_names")

  def _logits(self, input_ids, input_mask, segment_ids):
    with export_utils.in_variables(self._variables):
      outputs, _ = serving.encoder_graph(self._bert_config, {
          "input_word_ids": input_ids, "input_mask": input_mask, "input_type_ids": segment_ids})
      return ner_logits(outputs["sequence_output"], len(self._labels), False)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  def tag(self, text):
    """Raw text [batch] -> words, tags and entities (see the module docstring)."""
    text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)
    batch = tf.shape(text)[0]
    # Some ops fail on an empty batch (searchsorted): one empty text stands in for it, and
    # every output is cut back to `batch` rows.
    text = tf.concat([text, tf.fill([tf.maximum(1 - batch, 0)], "")], axis=0)
    num_texts = tf.shape(text)[0]
    words, normalized, begin, end = split_text_graph(text, self._do_lower_case)
    pieces = self.preprocessor._wordpiece.tokenize(normalized)  # pylint: disable=protected-access
    piece_ids = tf.cast(pieces.merge_dims(1, 2), tf.int32)
    windows = windows_graph(piece_ids, self._max_seq_length, self._doc_stride,
                            self.preprocessor.cls_id, self.preprocessor.sep_id)
    inputs = windows
    if self._buckets:
      # Only padding is cut: the logits of every real position (all that is read below) are
      # the fixed-length ones to float rounding.
      inputs = batch_padding.trim_batch_to_longest(windows, self._max_seq_length,
                                                   buckets=self._buckets)
    logits = self._logits(inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    best_window, best_position = max_context_graph(
        windows, tf.shape(piece_ids.flat_values)[0])
    first_piece = tf.cast(pieces.values.row_starts(), tf.int32)
    word_logits = tf.gather_nd(logits, tf.stack([tf.gather(best_window, first_piece),
                                                 tf.gather(best_position, first_piece)], -1))
    label = tf.argmax(word_logits, axis=-1, output_type=tf.int32)
    prefixes = [_PREFIX_IDS[ner_metrics.split_tag(x)[0]] for x in self._labels]
    type_ids = [0 if x == "O" else 1 + self._types.index(ner_metrics.split_tag(x)[1])
                for x in self._labels]
    prefix = tf.gather(tf.constant(prefixes, tf.int32), label)
    type_id = tf.gather(tf.constant(type_ids, tf.int32), label)
    type_names = tf.gather(tf.constant([""] + self._types), type_id)
    row_ids = tf.cast(words.value_rowids(), tf.int32)
    start, end_, prev_prefix, prev_type = chunk_graph(
        prefix, type_id, row_ids, tf.cast(words.row_starts(), tf.int32),
        tf.cast(words.row_limits(), tf.int32))
    tags = scheme_tags_graph(self._scheme, prefix, type_names, start, end_, prev_prefix,
                             prev_type, type_id)
    char_begin = char_offsets_graph(text, begin)
    char_end = char_offsets_graph(text, end)
    # Entities: the k-th start pairs with the k-th end (entities never overlap).
    start_index = tf.where(start)[:, 0]
    end_index = tf.where(end_)[:, 0]
    entity_row = tf.gather(row_ids, start_index)
    byte_begin = tf.gather(begin.flat_values, start_index)
    byte_end = tf.gather(end.flat_values, end_index)
    entity_text = tf.strings.substr(tf.gather(text, entity_row), byte_begin,
                                    byte_end - byte_begin, unit="BYTE")
    outputs = {
        "words": _dense(words.flat_values, row_ids, num_texts, ""),
        "word_starts": _dense(char_begin, row_ids, num_texts, 0),
        "word_ends": _dense(char_end, row_ids, num_texts, 0),
        "tags": _dense(tags, row_ids, num_texts, ""),
        "word_logits": _dense(word_logits, row_ids, num_texts, 0.0),
        "num_words": tf.cast(words.row_lengths(), tf.int32),
        "entities": _dense(entity_text, entity_row, num_texts, ""),
        "entity_types": _dense(tf.gather(type_names, start_index), entity_row, num_texts, ""),
        "entity_starts": _dense(tf.gather(char_begin, start_index), entity_row, num_texts, 0),
        "entity_ends": _dense(tf.gather(char_end, end_index), entity_row, num_texts, 0),
        "num_entities": tf.math.bincount(entity_row, minlength=num_texts, maxlength=num_texts,
                                         dtype=tf.int32),
    }
    return {name: value[:batch] for name, value in outputs.items()}

  def token_logits(self, input_ids, input_mask, segment_ids):
    """int32 [batch, max_seq_length] inputs -> logits and predicted_label per position."""
    logits = self._logits(input_ids, input_mask, segment_ids)
    return {"logits": logits,
            "predicted_label": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def signatures(self):
    """serving_default (raw text) and token_logits (int32 inputs), traced."""
    specs = [tf.TensorSpec([None, self._max_seq_length], tf.int32, name=name)
             for name in ("input_ids", "input_mask", "segment_ids")]
    self.serve_token_logits = tf.function(self.token_logits, input_signature=specs)
    return {"serving_default": self.tag.get_concrete_function(),
            "token_logits": self.serve_token_logits.get_concrete_function()}


def export_ner(bert_config, checkpoint, export_dir, labels, scheme, vocab_file, do_lower_case,
               max_seq_length, doc_stride, overwrite=False, protected_paths=(),
               padding="bucket"):
  """Writes the raw-text SavedModel (see the module docstring) plus its configs.

  Args:
    bert_config: modeling.BertConfig.
    checkpoint: checkpoint prefix or directory with bert/* and cls/ner/*.
    export_dir: new directory, or an earlier export of ours with overwrite.
    labels: the model's BIO labels.
    scheme: the scheme of the `tags` output.
    vocab_file: WordPiece vocab (stored as an asset).
    do_lower_case: tokenizer setting.
    max_seq_length: window input length.
    doc_stride: pieces between window starts.
    overwrite: replace an earlier export of ours.
    protected_paths: paths the export must never replace.
    padding: "bucket" (a request's windows at their longest, bucketed) or "max_length"
      (NerTagger).

  Returns:
    The checkpoint prefix exported.
  """
  checkpoint = export_utils.resolve_checkpoint(checkpoint, "init_checkpoint")
  protected = list(protected_paths) + [checkpoint, vocab_file]
  common.check_export_dir(export_dir, "export_dir", overwrite, protected)
  shapes = dict(tf.train.list_variables(checkpoint))
  bias = HEAD_SCOPE + "/output_bias"
  if bias not in shapes:
    common.fail("--export_dir=%s: checkpoint %s has no %s (no NER model: train with --do_train "
                "first)" % (export_dir, checkpoint, bias))
  if list(shapes[bias]) != [len(labels)]:
    common.fail("--export_dir=%s: checkpoint %s has %d labels but labels.txt has %d" % (
        export_dir, checkpoint, shapes[bias][0], len(labels)))
  preprocessor = serving.BertPreprocessor(vocab_file, do_lower_case, None, max_seq_length)

  def build():
    inputs = {name: tf1.placeholder(tf.int32, [None, None])
              for name in serving.ENCODER_INPUTS}
    outputs, _ = serving.encoder_graph(bert_config, inputs)
    ner_logits(outputs["sequence_output"], len(labels), False)
  variables = export_utils.variables_from_checkpoint(export_utils.collect_variable_specs(build),
                                                     checkpoint)
  tagger = NerTagger(bert_config, variables, preprocessor, labels, scheme, max_seq_length,
                     doc_stride, do_lower_case, padding=padding)
  extra = {"bert_config.json": bert_config.to_json_string(),
           "labels.txt": "".join(label + "\n" for label in labels),
           NER_CONFIG: ner_config_text(labels, scheme, do_lower_case, max_seq_length,
                                       doc_stride)}
  export_utils.save_atomically(tagger, export_dir, tagger.signatures(), extra, overwrite,
                               protected)
  tf1.logging.info("Exported the NER model %s (labels %s, %s tags) to %s", checkpoint,
                   ", ".join(labels), scheme, export_dir)
  return checkpoint


def ner_config_text(labels, scheme, do_lower_case, max_seq_length, doc_stride):
  """ner_config.json: what a reader needs besides the checkpoint."""
  return json.dumps({"labels": list(labels), "tag_scheme": scheme,
                     "do_lower_case": bool(do_lower_case), "max_seq_length": max_seq_length,
                     "doc_stride": doc_stride}, indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------------------------
# Main.


def window_and_stride(max_seq_length, doc_stride):
  """(window, doc_stride) of the flags; one-line errors for a stride that does not fit.

  Args:
    max_seq_length: --max_seq_length.
    doc_stride: --doc_stride (None: half the window).

  Returns:
    (window in word pieces, stride in word pieces).
  """
  window = max_seq_length - 2
  if doc_stride is None:
    return window, max(1, window // 2)
  if doc_stride < 1:
    common.fail("--doc_stride=%d: must be >= 1" % doc_stride)
  if doc_stride >= window:
    common.fail("--doc_stride=%d: must be smaller than the window of %d word pieces "
                "(--max_seq_length=%d minus [CLS] and [SEP]), or windows would not overlap" %
                (doc_stride, window, max_seq_length))
  return window, doc_stride


JobSettings = collections.namedtuple("JobSettings", [
    # Inputs and outputs.
    "output_dir", "data_dir", "train_file", "dev_file", "test_file", "init_checkpoint",
    "allow_unmatched_init", "bert_config_file", "vocab_file", "do_lower_case", "export_dir",
    "overwrite", "output_word_logits",
    # What the job does.
    "do_train", "do_eval", "do_predict",
    # Tags and labels (--tag_scheme, --labels).
    "tag_scheme", "labels",
    # Windows, sizes and the training schedule.
    "max_seq_length", "doc_stride", "train_batch_size", "eval_batch_size", "predict_batch_size",
    "learning_rate", "num_train_epochs", "warmup_proportion", "seed", "use_tpu",
    # The engine (ENGINE_ESTIMATOR / ENGINE_TF2) and what tf2_training.Engine reads (the
    # Estimator reads them from flag_values).
    "engine", "distribution_strategy", "num_gpus", "save_checkpoints_steps",
    "keep_checkpoint_max", "log_every_n_steps",
    # Padding: --padding as given (the export's), training's and evaluation / prediction's,
    # BERT skipping padding rows.
    "padding", "train_padding", "eval_padding", "skip_padding",
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
    JobSettings (doc_stride resolved: half the window when --doc_stride is not set).
  """
  _, doc_stride = window_and_stride(flag_values.max_seq_length, flag_values.doc_stride)
  return common.settings_from_flags(
      JobSettings, flag_values,
      doc_stride=doc_stride,
      engine=ENGINE_ESTIMATOR if estimator_utils.has_estimator() else ENGINE_TF2,
      # Training as evaluation: model_fn draws dropout masks at --max_seq_length.
      train_padding=batch_padding.effective_padding(flag_values, training=True,
                                                    full_length_dropout=True),
      eval_padding=batch_padding.effective_padding(flag_values),
      skip_padding=batch_padding.skips_padding(flag_values),
      precision_kwargs=estimator_utils.precision_kwargs(flag_values),
      strategy=strategy,
      model_dir=flag_values.output_dir,
      flag_values=flag_values)


def _check_flags():
  """One-line errors for missing or inconsistent flags."""
  for name in ("output_dir", "bert_config_file"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  common.check_output_dir(FLAGS.output_dir, "output_dir")
  if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
    common.fail("--do_train, --do_eval, --do_predict: at least one of them (or --export_dir) "
                "must be set")
  if FLAGS.max_seq_length < 3:
    common.fail("--max_seq_length=%d: must be at least 3 ([CLS] a piece [SEP])" %
                FLAGS.max_seq_length)
  window_and_stride(FLAGS.max_seq_length, FLAGS.doc_stride)
  batch_padding.check_padding_flag(FLAGS)
  for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d: must be >= 1" % (name, getattr(FLAGS, name)))
  if FLAGS.do_train and FLAGS.num_train_epochs <= 0:
    common.fail("--num_train_epochs=%s: must be > 0" % FLAGS.num_train_epochs)
  if not 0.0 <= FLAGS.warmup_proportion < 1.0:
    common.fail("--warmup_proportion=%s: must be in [0, 1)" % FLAGS.warmup_proportion)
  common.require_file(FLAGS.vocab_file, "vocab_file")
  if FLAGS.data_dir and not tf.io.gfile.isdir(FLAGS.data_dir):
    common.fail("--data_dir=%s: not a directory" % FLAGS.data_dir)


def data_file(split, settings):
  """The file of a split: --<split>_file, else the first DATA_FILE_NAMES entry in --data_dir.

  Args:
    split: "train", "dev" or "test".
    settings: JobSettings.

  Returns:
    the file's path (one-line error when there is none).
  """
  explicit = getattr(settings, "%s_file" % split)
  if explicit:
    common.require_file(explicit, "%s_file" % split)
    return explicit
  if not settings.data_dir:
    common.fail("%s needs --%s_file or --data_dir" % (_SPLIT_MODES[split], split))
  for name in DATA_FILE_NAMES[split]:
    path = os.path.join(settings.data_dir, name)
    if tf.io.gfile.exists(path):
      return path
  common.fail("--data_dir=%s: has no %s file (%s), needed by %s; or give --%s_file" % (
      settings.data_dir, split, ", ".join(DATA_FILE_NAMES[split]), _SPLIT_MODES[split], split))


def export_protected_paths(settings):
  """What an --export_dir must never replace: --output_dir and this job's inputs.

  Args:
    settings: JobSettings.

  Returns:
    list of paths.
  """
  return [p for p in (settings.output_dir, settings.init_checkpoint, settings.data_dir,
                      settings.train_file, settings.dev_file, settings.test_file,
                      settings.vocab_file, settings.bert_config_file) if p]


def _read_labels_file(path):
  with tf.io.gfile.GFile(path) as f:
    return [line.rstrip("\n") for line in f if line.strip()]


def _saved_ner_config(output_dir):
  path = os.path.join(output_dir, NER_CONFIG)
  if not tf.io.gfile.exists(path):
    return {}
  try:
    with tf.io.gfile.GFile(path) as f:
      return json.load(f)
  except ValueError:
    return {}


def _check_engine_flags():
  """One-line errors for the device, precision and distribution flags: on the TF2 engine those
  only the Estimator implements (tf2_training.check_flags), on both the combinations
  estimator_utils refuses."""
  if not estimator_utils.has_estimator():
    tf2_training.check_flags(FLAGS, "run_ner.py", xla=True,
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
  tf2_training.check_multi_worker_job(strategy, FLAGS.do_train)
  # A worker other than the chief trains only (tf2_training.worker_settings); it reads the
  # files the chief reads (paths), so both resolve the same tag scheme and labels.
  settings = tf2_training.worker_settings(job_settings(FLAGS, strategy), do_eval=False,
                                          do_predict=False, export_dir=None)
  bert_config = model_config.load_config(FLAGS.bert_config_file, FLAGS, FLAGS.max_seq_length)
  paths = {split: data_file(split, settings) for split, mode in (("train", FLAGS.do_train),
                                                        ("dev", FLAGS.do_eval),
                                                        ("test", FLAGS.do_predict)) if mode}
  tokenizer = tokenization.checked_tokenizer(
      FLAGS.vocab_file, FLAGS.do_lower_case, init_checkpoint=FLAGS.init_checkpoint,
      vocab_size=bert_config.vocab_size, config_name=FLAGS.bert_config_file)
  if FLAGS.init_checkpoint and not tf1.train.checkpoint_exists(FLAGS.init_checkpoint):
    common.fail("--init_checkpoint=%s: no checkpoint there" % FLAGS.init_checkpoint)
  for path in paths.values():
    common.check_not_input(FLAGS.output_dir, [path], "output_dir")
  if FLAGS.export_dir:
    # Checked before any training, so that a bad target costs nothing (and again at export).
    common.check_export_dir(FLAGS.export_dir, "export_dir", FLAGS.overwrite,
                            export_protected_paths(settings))
  # One job per directory, taken before the directory's checkpoint or labels are read: two
  # training jobs would interleave checkpoints and results, and an evaluation beside a training
  # job would score whichever intermediate checkpoint happens to be the latest.
  with common.OutputDirLock(settings.output_dir, "output_dir"):
    eval_weights = None
    if not FLAGS.do_train:
      # Scores of a randomly initialised model would look like a result: no trained weights is
      # one line (unless --allow_random_eval), before any work.
      actions = "/".join(name for name, on in (("--do_eval", FLAGS.do_eval),
                                               ("--do_predict", FLAGS.do_predict),
                                               ("--export_dir", FLAGS.export_dir)) if on)
      eval_weights = checkpoint_utils.require_eval_weights(
          actions, FLAGS.output_dir, FLAGS.init_checkpoint, model_variable_names(bert_config),
          allow_random_eval=FLAGS.allow_random_eval, allow_unmatched=FLAGS.allow_unmatched_init)
    # Every input is read and checked before anything is written.
    inputs = read_inputs(paths, settings)
    _run_job(settings, bert_config, tokenizer, inputs, eval_weights)


JobInputs = collections.namedtuple("JobInputs", ["train", "dev", "test", "scheme", "labels",
                                                 "label_source"])


def read_inputs(paths, settings):
  """Reads the job's files and fixes its scheme and labels (one-line errors for bad inputs).

  Args:
    paths: {"train" / "dev" / "test": path} of the requested modes.
    settings: JobSettings.

  Returns:
    JobInputs (ConllFiles or None, scheme, the model's BIO labels and where they come from).
  """
  train = read_conll(paths["train"], "train_file") if "train" in paths else None
  dev = read_conll(paths["dev"], "dev_file") if "dev" in paths else None
  test = read_conll(paths["test"], "test_file", allow_untagged=True) if "test" in paths else None
  conll_files = [f for f in (train, dev, test) if f is not None]
  saved_config = _saved_ner_config(settings.model_dir)
  scheme = resolve_scheme(settings.tag_scheme, conll_files, saved_config.get("tag_scheme"))
  for conll in conll_files:
    check_tags(conll, scheme, settings.tag_scheme == "auto")
  tf1.logging.info("Tag scheme: %s%s", ner_metrics.SCHEME_NAMES[scheme],
                   " (detected)" if settings.tag_scheme == "auto" else "")
  extra_types = parse_labels_flag(settings.labels)
  labels, label_source = _resolve_labels(train, extra_types, settings)
  if len(labels) < 2:
    common.fail("%s: no entity type at all (every tag is O); nothing to learn" % label_source)
  allowed = label_types(labels) | extra_types
  for conll in (dev, test):
    if conll is not None:
      check_types(conll, allowed, label_source)
  tf1.logging.info("Labels (%d, from %s): %s", len(labels), label_source, ", ".join(labels))
  return JobInputs(train, dev, test, scheme, labels, label_source)


def _resolve_labels(train, extra_types, settings):
  """The model's labels and where they come from.

  The training file's types (plus --labels); without training, labels.txt in --output_dir,
  else labels.txt beside --init_checkpoint (a run_ner checkpoint), else --labels.

  Args:
    train: ConllFile of --do_train, or None.
    extra_types: the entity types of --labels.
    settings: JobSettings.

  Returns:
    (the BIO labels, where they come from).
  """
  if train is not None:
    return label_list(entity_types(train) | extra_types), train.path
  candidates = [os.path.join(settings.output_dir, "labels.txt")]
  if settings.init_checkpoint:
    candidates.append(os.path.join(os.path.dirname(settings.init_checkpoint.rstrip("/")) if
                                   not tf.io.gfile.isdir(settings.init_checkpoint) else
                                   settings.init_checkpoint, "labels.txt"))
  for saved in candidates:
    if tf.io.gfile.exists(saved):
      return _read_labels_file(saved), saved
  if extra_types:
    return label_list(extra_types), "--labels"
  common.fail("no labels: without --do_train the model's labels come from labels.txt in "
              "--output_dir=%s (written by training), beside --init_checkpoint, or --labels" %
              settings.output_dir)


def _run_job(settings, bert_config, tokenizer, inputs, eval_weights=None):
  """Trains / evaluates / predicts / exports as the flags say (after main's checks).

  Args:
    settings: JobSettings.
    bert_config: modeling.BertConfig (with the flag overrides).
    tokenizer: the checked FullTokenizer.
    inputs: JobInputs of read_inputs.
    eval_weights: without --do_train, the checkpoint require_eval_weights found (None: random
      weights, --allow_random_eval).
  """
  common.STOP_SIGNALS.install()
  doc_stride = settings.doc_stride
  labels = inputs.labels
  label_map = {label: i for i, label in enumerate(labels)}

  # Before anything is written there: a checkpoint of another model or label list in
  # --output_dir would otherwise fail deep inside the restore.
  resume_step = estimator_utils.check_resume(
      settings.output_dir, bert_config, label_list=labels,
      extra_shapes=head_shapes(len(labels), bert_config),
      restore=estimator_utils.restore_mode(settings.do_train,
                                           settings.do_eval or settings.do_predict))
  tf.io.gfile.makedirs(settings.output_dir)
  convert = dict(tokenizer=tokenizer, label_map=label_map,
                 max_seq_length=settings.max_seq_length, doc_stride=doc_stride)

  train_features, num_train_steps, num_warmup_steps = _train_features(settings, inputs.train,
                                                                      convert)
  trainer = _job_trainer(settings, bert_config, len(labels), num_train_steps, num_warmup_steps)
  summary = {}
  if inputs.train is not None:
    summary = _train(settings, bert_config, trainer, inputs, train_features,
                     num_train_steps, num_warmup_steps, resume_step)
    del train_features

  # Which weights every result below comes from: the latest checkpoint in --output_dir (the
  # Estimator and the engine restore it), else the --init_checkpoint the model starts from, or
  # None.
  record = checkpoint_utils.checkpoint_record(
      tf1.train.latest_checkpoint(settings.output_dir) or eval_weights)
  final = []  # (writer function) run at the end, eval_results last.
  # (A multi-worker job's other workers read the dev and test files but evaluate nothing.)
  if inputs.dev is not None and settings.do_eval:
    final.append(_evaluate(settings, trainer, inputs, convert, record, summary))
  if inputs.test is not None and settings.do_predict:
    write_test_results = _predict(settings, trainer, inputs, convert, record, summary)
    if write_test_results is not None:
      final.insert(0, write_test_results)

  # A signal during evaluation or prediction: no results file, so the job does not look done.
  common.STOP_SIGNALS.exit_if_stopped()
  for write in final:
    write()

  if settings.export_dir:
    common.STOP_SIGNALS.exit_if_stopped()
    export_ner(bert_config,
               tf1.train.latest_checkpoint(settings.output_dir) or settings.init_checkpoint,
               settings.export_dir, labels, inputs.scheme, settings.vocab_file,
               settings.do_lower_case, settings.max_seq_length, doc_stride,
               overwrite=settings.overwrite,
               protected_paths=export_protected_paths(settings),
               padding="max_length" if settings.padding == "max_length" else "bucket")


def _train_features(settings, train, convert):
  """The training windows (pre-shuffled) and the step counts they give.

  Args:
    settings: JobSettings.
    train: ConllFile of --do_train, or None.
    convert: keyword arguments of convert_sentences.

  Returns:
    (list of WindowFeature, num_train_steps, num_warmup_steps); all None without training.
  """
  if train is None:
    return None, None, None
  features, _ = convert_sentences(train.sentences, with_labels=True, path=train.path, **convert)
  # Pre-shuffled (seeded): the input pipeline's buffer is small.
  random.Random(settings.seed).shuffle(features)
  num_train_steps = max(1, int(len(features) / settings.train_batch_size *
                               settings.num_train_epochs))
  num_warmup_steps = int(num_train_steps * settings.warmup_proportion)
  return features, num_train_steps, num_warmup_steps


def _job_model_fn(settings, bert_config, num_labels, num_train_steps, num_warmup_steps):
  """The job's model_fn, as the flags say.

  Args:
    settings: JobSettings.
    bert_config: modeling.BertConfig.
    num_labels: number of BIO labels.
    num_train_steps: training steps (None without training).
    num_warmup_steps: warm-up steps (None without training).

  Returns:
    model_fn of model_fn_builder.
  """
  return model_fn_builder(
      bert_config=bert_config, num_labels=num_labels, init_checkpoint=settings.init_checkpoint,
      learning_rate=settings.learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps, use_tpu=settings.use_tpu,
      use_one_hot_embeddings=settings.use_tpu, max_seq_length=settings.max_seq_length,
      skip_padding=settings.skip_padding,
      allow_unmatched_init=settings.allow_unmatched_init,
      **settings.precision_kwargs)


def _job_trainer(settings, bert_config, num_labels, num_train_steps, num_warmup_steps):
  """What trains and predicts: the Estimator's model_fn (ENGINE_ESTIMATOR) or a
  tf2_training.Engine over the same graph (ENGINE_TF2).

  Args:
    settings: JobSettings.
    bert_config: modeling.BertConfig.
    num_labels: number of BIO labels.
    num_train_steps: training steps (None without training).
    num_warmup_steps: warm-up steps (None without training).

  Returns:
    model_fn of model_fn_builder, or tf2_training.Engine.
  """
  if settings.engine == ENGINE_ESTIMATOR:
    return _job_model_fn(settings, bert_config, num_labels, num_train_steps, num_warmup_steps)
  strategy = settings.strategy
  on_tpu = tf2_training.is_tpu_strategy(strategy)
  return tf2_training.Engine(
      _engine_model_fn(bert_config, num_labels, on_tpu, max_seq_length=settings.max_seq_length,
                       compute_dtype=modeling.get_compute_dtype(
                           settings.precision_kwargs["precision"]),
                       skip_padding=settings.skip_padding and not on_tpu),
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


def _make_estimator(model_fn, settings, predict_batch_size):
  """estimator_utils.make_estimator of the job's model_fn in --output_dir."""
  return estimator_utils.make_estimator(model_fn, settings.flag_values, settings.output_dir,
                                        settings.train_batch_size, settings.eval_batch_size,
                                        predict_batch_size=predict_batch_size,
                                        supported_flags=SUPPORTED_MODEL_FN_FLAGS)


def _write_model_files(settings, bert_config, labels, scheme):
  """Writes bert_config.json, labels.txt and ner_config.json beside the checkpoints.

  Args:
    settings: JobSettings.
    bert_config: modeling.BertConfig.
    labels: the model's BIO labels.
    scheme: the tag scheme.
  """
  model_config.save_config(bert_config, settings.output_dir)
  with common.atomic_output(os.path.join(settings.output_dir, "labels.txt")) as f:
    f.write("".join(label + "\n" for label in labels))
  with common.atomic_output(os.path.join(settings.output_dir, NER_CONFIG)) as f:
    f.write(ner_config_text(labels, scheme, settings.do_lower_case, settings.max_seq_length,
                            settings.doc_stride))


def _train(settings, bert_config, trainer, inputs, train_features, num_train_steps,
           num_warmup_steps, resume_step):
  """Writes the training windows and the model's files, then trains (exits on a signal).

  Args:
    settings: JobSettings.
    bert_config: modeling.BertConfig.
    trainer: the Estimator's model_fn, or the tf2_training.Engine (_job_trainer).
    inputs: JobInputs of read_inputs.
    train_features: the training windows of _train_features.
    num_train_steps: training steps.
    num_warmup_steps: warm-up steps.
    resume_step: check_resume's step of the checkpoint resumed from (None: a fresh start).

  Returns:
    {"train_seconds", "num_train_steps"}: the training summary of the results files.
  """
  train_file = os.path.join(settings.output_dir, "train.tf_record")
  write_features(train_features, train_file)
  _write_model_files(settings, bert_config, inputs.labels, inputs.scheme)
  train_padding = settings.train_padding
  tf1.logging.info("***** Running training *****")
  tf1.logging.info("  Num windows = %d, batch size = %d, steps = %d (warm-up %d), "
                   "--padding=%s", len(train_features), settings.train_batch_size,
                   num_train_steps, num_warmup_steps, train_padding)

  def input_fn_for(skip_batches):
    return input_fn_builder(train_file, settings.max_seq_length, is_training=True,
                            drop_remainder=True, seed=settings.seed, skip_batches=skip_batches,
                            padding=train_padding)

  start = time.time()
  # On SIGINT / SIGTERM the step finishes, the engine checkpoints, and the job exits 130 / 143
  # below without writing any result that would make it look finished.
  if settings.engine == ENGINE_TF2:
    # The engine resumes from the latest checkpoint, skipping the batches trained so far.
    trainer.train(input_fn_for, num_train_steps)
  else:
    estimator = _make_estimator(trainer, settings, settings.predict_batch_size)
    hook = estimator_utils.ProgressHook(num_train_steps, settings.train_batch_size)
    estimator.train(
        input_fn=input_fn_for(estimator_utils.resume_skip_batches(resume_step,
                                                                  settings.flag_values)),
        max_steps=num_train_steps, hooks=[hook, estimator_utils.StopOnSignalHook()])
  common.STOP_SIGNALS.exit_if_stopped()
  # The target beside global_step: a reader (paper/sweep.py) can check the step was reached.
  return {"train_seconds": round(time.time() - start, 1), "num_train_steps": num_train_steps}


def _checkpoint_results(settings, record, summary):
  """The keys every results file shares: the step, the scored checkpoint, the training summary.

  Args:
    settings: JobSettings.
    record: checkpoint_utils.checkpoint_record of the scored weights.
    summary: the training summary of _train ({} without training).

  Returns:
    dict of results keys.
  """
  results = dict(global_step=estimator_utils.latest_global_step(settings.output_dir),
                 checkpoint=record["checkpoint"], checkpoint_step=record["global_step"])
  results.update(summary)
  return results


def _evaluate(settings, trainer, inputs, convert, record, summary):
  """Scores the dev file (logs the report); eval_results is written by the returned function.

  Args:
    settings: JobSettings.
    trainer: the Estimator's model_fn, or the tf2_training.Engine (_job_trainer).
    inputs: JobInputs of read_inputs.
    convert: keyword arguments of convert_sentences.
    record: checkpoint_utils.checkpoint_record of the scored weights.
    summary: the training summary of _train ({} without training).

  Returns:
    A function of no argument that writes eval_results.json / .txt.
  """
  dev, labels = inputs.dev, inputs.labels
  word_logits, stats = _predict_file(settings, trainer, dev, settings.eval_batch_size, "dev",
                                     convert, len(labels))
  tags = [predicted_tags(x, labels, inputs.scheme) for x in word_logits]
  scores = ner_metrics.evaluate([s.tags for s in dev.sentences], tags)
  tf1.logging.info("%s (dev):\n%s", dev.path, ner_metrics.format_report(scores))
  results = ner_metrics.flat_results(scores, "eval_")
  results.update(eval_loss=word_loss(word_logits, dev.sentences, convert["label_map"]),
                 eval_num_sentences=stats.num_sentences, eval_num_words=stats.num_words,
                 eval_num_unplaced_words=stats.num_unplaced_words,
                 eval_num_windows=stats.num_windows)
  results.update(_checkpoint_results(settings, record, summary))
  return lambda: estimator_utils.write_eval_results(settings.output_dir, results)


def _write_predictions(settings, test, tags, word_logits, labels, stats, record):
  """Writes predictions.conll (and word_logits.npz), each with its checkpoint sidecar.

  Args:
    settings: JobSettings.
    test: ConllFile of --do_predict.
    tags: predicted tags, a list per sentence.
    word_logits: per-sentence word logits.
    labels: the model's BIO labels.
    stats: FeatureStats of the test file.
    record: checkpoint_utils.checkpoint_record of the weights.
  """
  predictions = os.path.join(settings.output_dir, "predictions.conll")
  logits_file = os.path.join(settings.output_dir, "word_logits.npz")
  written = [predictions] + ([logits_file] if settings.output_word_logits else [])
  # Which checkpoint produced them: <file>.checkpoint.json, removed first so that a kill
  # between the writes leaves none naming other weights.
  for path in written:
    checkpoint_utils.remove_sidecar(path)
  write_predictions_conll(predictions, test, tags)
  tf1.logging.info("Wrote %d sentences (%d words, %d unplaced, predicted O) to %s",
                   stats.num_sentences, stats.num_words, stats.num_unplaced_words,
                   predictions)
  if settings.output_word_logits:
    write_word_logits(logits_file, word_logits, labels)
  for path in written:
    checkpoint_utils.write_sidecar(path, record)


def _predict(settings, trainer, inputs, convert, record, summary):
  """Tags the test file and writes the predictions; scores it when it is tagged.

  Args:
    settings: JobSettings.
    trainer: the Estimator's model_fn, or the tf2_training.Engine (_job_trainer).
    inputs: JobInputs of read_inputs.
    convert: keyword arguments of convert_sentences.
    record: checkpoint_utils.checkpoint_record of the scored weights.
    summary: the training summary of _train ({} without training).

  Returns:
    A function of no argument that writes test_results.json / .txt, or None (untagged file).
  """
  test, labels = inputs.test, inputs.labels
  word_logits, stats = _predict_file(settings, trainer, test, settings.predict_batch_size,
                                     "test", convert, len(labels))
  tags = [predicted_tags(x, labels, inputs.scheme) for x in word_logits]
  _write_predictions(settings, test, tags, word_logits, labels, stats, record)
  if not test.tagged:
    return None
  scores = ner_metrics.evaluate([s.tags for s in test.sentences], tags)
  tf1.logging.info("%s (test):\n%s", test.path, ner_metrics.format_report(scores))
  test_results = ner_metrics.flat_results(scores, "test_")
  test_results.update(test_num_sentences=stats.num_sentences, test_num_words=stats.num_words,
                      test_num_unplaced_words=stats.num_unplaced_words)
  test_results.update(_checkpoint_results(settings, record, summary))
  return lambda: estimator_utils.write_eval_results(
      settings.output_dir, test_results, name="test_results")


def _predict_file(settings, trainer, conll, batch_size, split, convert, num_labels):
  """Predicts a file's windows (Estimator.predict, or the engine's) with the latest checkpoint
  in --output_dir (else the initial weights).

  Args:
    settings: JobSettings.
    trainer: the Estimator's model_fn, or the tf2_training.Engine (_job_trainer).
    conll: ConllFile.
    batch_size: windows per batch.
    split: "dev" or "test" (TFRecord name, log).
    convert: keyword arguments of convert_sentences.
    num_labels: number of labels.

  Returns:
    (per-sentence word logits, FeatureStats).
  """
  features, stats = convert_sentences(conll.sentences, with_labels=False, path=conll.path,
                                      **convert)
  padded = list(features)
  if settings.use_tpu:
    # TPU batches have a fixed size: pad with empty windows, dropped from the outputs.
    while len(padded) % batch_size:
      padded.append(WindowFeature(-1, [0] * settings.max_seq_length, [0] * settings.max_seq_length,
                                  [0] * settings.max_seq_length, [0] * settings.max_seq_length,
                                  [0.0] * settings.max_seq_length, []))
  record = os.path.join(settings.output_dir, "%s.tf_record" % split)
  write_features(padded, record)
  if settings.engine == ENGINE_TF2:
    predictor = trainer.predictor(batch_size)
  else:
    predictor = _make_estimator(trainer, settings, batch_size)
  padding = settings.eval_padding
  input_fn = input_fn_builder(record, settings.max_seq_length, is_training=False,
                              drop_remainder=settings.use_tpu, padding=padding)
  tf1.logging.info("***** Predicting %s: %d windows (--padding=%s) *****", conll.path,
                   len(features), padding)
  start = time.time()
  meter = common.ProgressMeter(len(padded), unit="windows", min_interval_s=10.0)
  outputs = []
  for output in predictor.predict(input_fn=input_fn):
    outputs.append(output)
    meter.update(len(outputs))
    if common.STOP_SIGNALS.stopped:
      break
  common.STOP_SIGNALS.exit_if_stopped()
  tf1.logging.info("  %s: %d windows in %.1f s", conll.path, len(outputs), time.time() - start)
  return gather_word_logits(conll.sentences, features, outputs[:len(features)],
                            num_labels), stats


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
