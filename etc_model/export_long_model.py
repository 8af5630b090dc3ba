# coding=utf-8
r"""Exports a fine-tuned long-context model (etc_model.run_long_tasks) as a SavedModel: raw text
for the corpus tasks (cloze, supporting, classify), serialized records for Table 8's tasks.

  python -m etc_model.export_long_model --task=cloze --checkpoint=cloze_out \
      --data_dir=long_tasks --vocab_file=data/vocab.txt --output_dir=cloze_export

SentencePiece: for a --data_dir made with create_long_tasks --spm_model_file (long_tasks.json
records it; --spm_model_file overrides the path), the SavedModel tokenises with tensorflow-text's
SentencepieceTokenizer, the model file an asset, as serving.BertPreprocessor does: its ids are
FullTokenizer(spm_model_file=...)'s. A cloze question's blank is written as the data's
blank_token; the graph puts a placeholder word there, tokenises the whole sentence and replaces
the placeholder's pieces by the blank id, which gives the pieces long_tasks gives around the
blank (exactly so when no piece of the model joins letters with the punctuation or space
around them: SentencePiece's split_by_unicode_script, on by default and in build_vocab.py).

--checkpoint is a run_long_tasks --output_dir (its latest checkpoint) or a checkpoint prefix;
its etc_config.json (or --etc_config_file) is the model, and --data_dir's long_tasks.json the
settings the records were made with (L, G, candidates, the global / candidate / blank tokens,
do_lower_case; classify: the label vocabulary). The SavedModel (tf.saved_model.load in a fresh
TF 2.15 process after `import tensorflow_text`) tokenises in the graph as
tokenization.FullTokenizer does (export_hub's BasicTokenizer as tensorflow-text ops and
WordPiece), builds exactly the record long_tasks builds (one global token per sentence,
etc_inputs.make_sentence_global_inputs' packing and truncation, the side inputs with
etc_inputs' TF ops) and runs EtcModel and the task's head of long_task_heads: its outputs equal
run_long_tasks' Estimator predictions on the records long_tasks makes from the same text.

A document is given as its sentences, string [batch, sentences] ("" pads a shorter document,
and a sentence with no word piece is skipped as long_tasks skips it): sentence splitting stays
with the caller (the records are made from the corpus' one-sentence lines). Signatures:

  serving_default, cloze:
    in:  sentences [batch, S] (the context), question [batch] (the question sentence, each
         mention of the answer written as the blank token of the data, "[MASK]" by default),
         candidates [batch, K] (names, K <= max_candidates; "" pads)
    out: scores [batch, K] (the cloze head's logits; padding MASKED_LOGIT), probabilities
         [batch, K] (softmax over the real candidates), answer_index int32 [batch], answer
         string [batch], context_sentences int32 [batch] (the context read: the latest
         sentences that fit with the candidates and the question, as long_tasks' windows end
         at the question)
  serving_default, supporting:
    in:  sentences [batch, S]
    out: logits, probabilities [batch, S] (per input sentence; 0 where not read), labels int32
         [batch, S] (1 inserted, 0 not, -1 not read: empty or past L / G), sentences_read int32
  serving_default, classify:
    in:  sentences [batch, S]
    out: logits, probabilities [batch, num_labels], label_index int32 [batch], label string
         [batch], sentences_read int32 [batch]
  features: the same inputs -> the record's int32 features (token_ids, sentence_ids,
    long_breakpoints [batch, L], global_token_ids, global_breakpoints [batch, G]; cloze also
    candidate_mask [batch, C]), to compare with long_tasks' records.

Truncation: the sentences are packed in order while they fit L word pieces and G global tokens
(the first sentence cut to L), as make_sentence_global_inputs does; a cloze context is cut from
the front instead (the question and the candidates stay). Beside the SavedModel:
long_model.json (task, L, G, candidates, tokens, do_lower_case, labels), etc_config.json.

Table 8's tasks (--task=wikihop, hotpotqa, nq, openkp), as the official etcmodel exports them:

  python -m etc_model.export_long_model --task=wikihop --checkpoint=wikihop_out \
      --data_dir=wikihop_data --output_dir=wikihop_export

serving_default takes examples, string [batch], serialized tf.Example records exactly as
create_wikihop / create_hotpotqa / create_nq / create_openkp write them, and returns the head's
outputs as run_long_tasks' predictions name them (RECORD_OUTPUTS): wikihop logits [batch, C],
candidate_mask [batch, C] and prediction int32 [batch] (the best real candidate); hotpotqa
sp_logits [batch, G], answer_type_logits [batch, 3], begin_logits / end_logits [batch, L],
global_token_ids [batch, G]; nq answer_type_logits [batch, 5] and la_start / la_end / sa_start /
sa_end _logits [batch, L]; openkp ngram_logits [batch, 5, L]. The graph parses the records with
long_task_heads.feature_lengths, adds the side inputs run_long_tasks' input_fn adds
(long_task_heads.add_task_side_inputs: WikiHop's with --candidate_ignore_hard_g2l /
--query_ignore_hard_g2l / --enable_l2g_linking as the run was tuned (the run's
wikihop_side_inputs.json; the flags, which must agree, for a run without one), HotpotQA's
with the data's [CLS] id) and runs EtcModel
(OpenKP's visual-feature embeddings added) and the head: its outputs equal run_long_tasks'
predictions on the same records, and the task's decoders (wikihop.predictions_from_outputs,
hotpotqa.split_predictions, nq.split_predictions, openkp.split_predictions) read them. L, G
(WikiHop: C) come from --data_dir's summary (wikihop.json, hotpotqa.json, nq.json, openkp.json);
a data directory of another task is one line.

The export computes in float32 (a --precision=bf16 / fp16 run's float32 variables; its
Estimator predictions differ by that precision). A further task of long_task_heads adds an
entry to SIGNATURES (its serving inputs) and a LongTaskModel method of its name (its outputs
from the head's logits).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import common
from realformer_tf import serving
from realformer_tf import export_utils
import tokenization
from etc_model import etc_estimator
from etc_model import etc_inputs
from etc_model import etc_modeling
from etc_model import hotpotqa
from etc_model import long_task_heads as heads
from etc_model import long_tasks
from etc_model import nq
from etc_model import openkp
from etc_model import wikihop

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

CONFIG_NAME = "etc_config.json"
LABELS_NAME = "classify_labels.json"
EXPORT_CONFIG = "long_model.json"
RECORD_FEATURES = heads.COMMON_FEATURES


def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_enum("task", None, sorted(SIGNATURES) + list(RECORD_TASKS),
                    "The task the checkpoint was tuned for.")
  flags.DEFINE_string("checkpoint", None,
                      "A run_long_tasks --output_dir (its latest checkpoint) or a checkpoint "
                      "prefix.")
  flags.DEFINE_string("data_dir", None,
                      "The create_long_tasks --output_dir the model was tuned on (its "
                      "long_tasks.json: lengths, tokens, do_lower_case, classify labels); "
                      "--task=wikihop / hotpotqa / nq / openkp: its create_ command's "
                      "--output_dir (L and G from its summary).")
  flags.DEFINE_string("vocab_file", None,
                      "The WordPiece vocabulary (default: long_tasks.json's vocab_file).")
  flags.DEFINE_string("spm_model_file", None,
                      "The SentencePiece model of a SentencePiece-based --data_dir (default: "
                      "long_tasks.json's spm_model_file).")
  flags.DEFINE_string("etc_config_file", None,
                      "The ETC config (default: etc_config.json beside the checkpoint).")
  flags.DEFINE_string("output_dir", None, "The SavedModel directory to write.")
  flags.DEFINE_bool("overwrite", False,
                    "Replace an earlier export of ours at --output_dir (never anything else).")
  flags.DEFINE_bool("candidate_ignore_hard_g2l", False,
                    "--task=wikihop: as run_long_tasks' flag the model was tuned with.")
  flags.DEFINE_bool("query_ignore_hard_g2l", False,
                    "--task=wikihop: as run_long_tasks' flag the model was tuned with.")
  flags.DEFINE_bool("enable_l2g_linking", True,
                    "--task=wikihop: as run_long_tasks' flag the model was tuned with.")


class WordpieceIds(tf.Module):
  """The official FullTokenizer's ids as TF ops (export_hub's BasicTokenizer, WordPiece).

  serving.BertPreprocessor's tokenizer without its packing functions (which the long model
  does not use and which would be traced and saved too).
  """

  def __init__(self, vocab_file, do_lower_case):
    """Builds the vocabulary table (keys and ids as tokenization.load_vocab).

    Args:
      vocab_file: the WordPiece vocabulary (stored as an asset).
      do_lower_case: lower-case and strip accents.
    """
    super(WordpieceIds, self).__init__()
    import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
    reference = tokenization.FullTokenizer(vocab_file, do_lower_case)
    if "[UNK]" not in reference.vocab:
      common.fail("--vocab_file=%s: has no [UNK] token" % vocab_file)
    self.vocab_file = tf.saved_model.Asset(vocab_file)
    tokens = list(reference.vocab.keys())
    self.table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant(tokens), tf.constant([reference.vocab[t] for t in tokens], tf.int64)),
                                           default_value=-1)
    self._wordpiece = tf_text.WordpieceTokenizer(
        self.table, suffix_indicator="##", max_bytes_per_word=4 * serving.MAX_CHARS_PER_WORD,
        token_out_type=tf.int64, unknown_token="[UNK]", split_unknown_characters=False)
    self._lower = bool(do_lower_case)

  def __call__(self, text):
    """string [n] -> int32 RaggedTensor [n, (words), (pieces)] (graph code, no tf.function)."""
    words = serving.wordpiece_words(text, self._lower)
    return tf.cast(self._wordpiece.tokenize(words), tf.int32)

  def ids(self, text):
    """string [n] -> int32 RaggedTensor [n, (pieces)]."""
    return self(text).merge_dims(1, 2)


# The letters tried for the word written in place of each blank marker of a SentencePiece
# question (any letter the model knows does: its pieces become the blank; SentencePiece does not
# join letters with the punctuation around them, but it would join an unknown letter with an
# unknown character next to it).
PLACEHOLDER_LETTERS = "xaeioXAEIO"


class SentencepieceIds(tf.Module):
  """FullTokenizer(spm_model_file=...)'s ids as TF ops (tensorflow-text's SentencepieceTokenizer).

  As serving.BertPreprocessor's SentencePiece tokenizer: the model file is an asset of the
  SavedModel, the text is lower-cased (without stripping accents) with do_lower_case, then
  SentencePiece gives the ids.
  """

  def __init__(self, spm_model_file, do_lower_case):
    """Loads the model.

    Args:
      spm_model_file: the SentencePiece model (stored as an asset).
      do_lower_case: lower-case the text first.
    """
    super(SentencepieceIds, self).__init__()
    import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
    reference = tokenization.FullTokenizer(None, do_lower_case, spm_model_file=spm_model_file)
    self.sp_model_file = tf.saved_model.Asset(spm_model_file)
    with tf.io.gfile.GFile(spm_model_file, "rb") as f:
      self._sp = tf_text.SentencepieceTokenizer(model=f.read(), out_type=tf.int32)
    self._lower = bool(do_lower_case)
    sp = reference.sp_model
    marker = sp.PieceToId(long_tasks.WORD_START)
    self._marker_id = -1 if sp.IsUnknown(marker) else int(marker)
    known = [c for c in PLACEHOLDER_LETTERS if not sp.IsUnknown(sp.PieceToId(c)) and
             (c.islower() or not do_lower_case)]
    self.placeholder = (known or ["x"])[0]

  def _text(self, text):
    text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
    return serving.lower_text(text, strip_accents=False) if self._lower else text

  def ids(self, text):
    """string [n] -> int32 RaggedTensor [n, (pieces)]."""
    return self._sp.tokenize(self._text(text))

  def blanked(self, question, blank_token, blank_token_id):
    """The ids of the question with each blank_token as one blank id, as long_tasks makes them.

    long_tasks tokenises the whole question sentence (with the answer's name) and replaces the
    pieces of each mention of it (tokenize_sentence: the pieces over its characters, with a
    word-start marker alone before them) by one blank id. Here each blank marker is written as a
    letter the model knows (self.placeholder), the text tokenised whole, and the pieces over each
    placeholder (with a marker alone before them) replaced likewise: the pieces around a blank
    are the same.

    Args:
      question: string [batch].
      blank_token: the marker in the text ("[MASK]").
      blank_token_id: its id.

    Returns:
      int32 RaggedTensor [batch, (pieces)].
    """
    parts = tf.strings.split(question, sep=blank_token)
    lowered = self._text(parts.flat_values)
    row = parts.value_rowids()
    # A placeholder after every part but a row's last.
    is_span = (tf.range(tf.size(lowered, out_type=tf.int64)) - tf.gather(parts.row_starts(), row)
               < tf.gather(parts.row_lengths(), row) - 1)
    width = len(self.placeholder.encode("utf-8"))
    with_placeholders = tf.where(is_span, lowered + self.placeholder, lowered)
    # (A ragged reduce_join with a separator leaves out the separator after an empty part.)
    text = tf.strings.reduce_join(parts.with_flat_values(with_placeholders), axis=1)
    # The placeholders' byte spans in their row's text.
    lengths = tf.strings.length(with_placeholders, unit="BYTE")
    part_ends = tf.cumsum(lengths)
    row_begin = tf.gather(part_ends - lengths, tf.gather(parts.row_starts(), row))
    span_row = tf.boolean_mask(row, is_span)
    span_end = tf.cast(tf.boolean_mask(part_ends - row_begin, is_span), tf.int64)
    span_start = span_end - width
    ids, begins, ends = self._sp.tokenize_with_offsets(text)
    piece_row = ids.value_rowids()
    overlap = ((piece_row[:, tf.newaxis] == span_row[tf.newaxis]) &
               (tf.cast(ends.flat_values, tf.int64)[:, tf.newaxis] > span_start[tf.newaxis]) &
               (tf.cast(begins.flat_values, tf.int64)[:, tf.newaxis] < span_end[tf.newaxis]))
    # A column of False: argmax needs one even when the batch has no blank at all.
    overlap = tf.concat([overlap, tf.zeros([tf.shape(overlap)[0], 1], tf.bool)], axis=1)
    covered = tf.reduce_any(overlap, axis=1)
    span_of = tf.where(covered, tf.argmax(tf.cast(overlap, tf.int32), axis=1), -1)
    position = tf.range(tf.size(piece_row, out_type=tf.int64)) - tf.gather(ids.row_starts(),
                                                                          piece_row)
    previous = tf.where(position > 0, tf.roll(span_of, 1, axis=0), -1)
    first = covered & tf.not_equal(span_of, previous)
    last_in_row = position == tf.gather(ids.row_lengths(), piece_row) - 1
    before_first = tf.logical_and(tf.logical_not(last_in_row), tf.roll(first, -1, axis=0))
    marker = before_first & tf.logical_not(covered) & tf.equal(ids.flat_values, self._marker_id)
    keep = (tf.logical_not(covered) | first) & tf.logical_not(marker)
    values = tf.where(first, tf.constant(blank_token_id, tf.int32), ids.flat_values)
    return tf.ragged.boolean_mask(ids.with_flat_values(values), ids.with_flat_values(keep))


def tokenize_rows(tokenizer, text):
  """Token ids of every string of a [batch, n] tensor: int32 RaggedTensor [batch, n, (p)].

  Args:
    tokenizer: WordpieceIds or SentencepieceIds of the vocabulary.
    text: string Tensor [batch, n].

  Returns:
    int32 RaggedTensor [batch, n, (pieces)].
  """
  flat = tf.reshape(text, [-1])
  pieces = tokenizer.ids(flat)
  shape = tf.shape(text, out_type=tf.int64)
  # nrows: with no column the batch size is not implied by the (empty) values.
  return tf.RaggedTensor.from_uniform_row_length(pieces, shape[1], nrows=shape[0])


def drop_empty(sentences):
  """[batch, (n), (p)] without the sentences of no piece (long_tasks skips them)."""
  return tf.ragged.boolean_mask(sentences, sentences.row_lengths(axis=2) > 0)


def pack_sentences(sentences, long_len, global_len, global_token_id):
  """etc_inputs.make_sentence_global_inputs of one example per row, as TF ops.

  Sentences go in whole while L and G last; the first sentence that does not fit ends the
  packing (the first one is cut to L instead).

  Args:
    sentences: int32 RaggedTensor [batch, (sentences), (pieces)], no empty sentence.
    long_len: L.
    global_len: G.
    global_token_id: every sentence's global token id.

  Returns:
    (dict of int32 token_ids, sentence_ids, long_breakpoints [batch, L], global_token_ids,
    global_breakpoints [batch, G]; int32 [batch] number of sentences packed).
  """
  lengths = sentences.row_lengths(axis=2)
  dense = lengths.to_tensor()
  count = sentences.row_lengths()
  index = tf.range(tf.shape(dense, out_type=tf.int64)[1])[tf.newaxis]
  keep = ((index < count[:, tf.newaxis]) & (index < global_len) &
          ((index == 0) | (tf.cumsum(dense, axis=1) <= long_len)))
  kept = tf.where(keep, tf.minimum(dense, long_len), tf.zeros_like(dense))
  # Per piece: its position in its sentence, the pieces kept of that sentence, the sentence.
  inner = sentences.values
  row = inner.value_rowids()
  position = tf.range(tf.size(inner.flat_values, out_type=tf.int64)) - tf.gather(
      inner.row_starts(), row)
  kept_per_sentence = tf.RaggedTensor.from_tensor(kept, lengths=count).flat_values
  sentence_index = tf.RaggedTensor.from_tensor(
      tf.broadcast_to(index, tf.shape(dense, out_type=tf.int64)), lengths=count).flat_values
  merged = sentences.merge_dims(1, 2)
  mask = merged.with_flat_values(position < tf.gather(kept_per_sentence, row))
  token_ids = tf.ragged.boolean_mask(merged, mask).to_tensor(0, shape=[None, long_len])
  sentence_ids = tf.ragged.boolean_mask(
      merged.with_flat_values(tf.cast(tf.gather(sentence_index, row), tf.int32)),
      mask).to_tensor(0, shape=[None, long_len])
  num_packed = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)
  total = tf.cast(tf.reduce_sum(kept, axis=1), tf.int32)
  features = {
      "token_ids": tf.cast(token_ids, tf.int32),
      "sentence_ids": sentence_ids,
      # one_hot of -1 (nothing packed) is all zeros.
      "long_breakpoints": tf.one_hot(total - 1, long_len, dtype=tf.int32),
      "global_token_ids": tf.where(tf.range(global_len)[tf.newaxis] < num_packed[:, tf.newaxis],
                                   global_token_id, 0),
      "global_breakpoints": tf.one_hot(num_packed - 1, global_len, dtype=tf.int32),
  }
  return features, num_packed


def piece_positions(ragged):
  """Each piece's position in its innermost row, the same layout as `ragged` (last dim)."""
  inner = ragged.values if ragged.ragged_rank > 1 else ragged
  row = inner.value_rowids()
  position = tf.range(tf.size(inner.flat_values, out_type=tf.int64)) - tf.gather(
      inner.row_starts(), row)
  return ragged.with_flat_values(position)


def blanked_question(tokenizer, question, blank_token, blank_token_id):
  """The question's pieces with each blank_token written in the text as the one blank id.

  long_tasks tokenises the text between the answer's mentions on its own and puts one
  blank_token_id for each mention: the text is split at the marker and the parts tokenised.

  SentencePiece (SentencepieceIds): SentencepieceIds.blanked (the parts would not tokenise as
  the whole sentence does).

  Args:
    tokenizer: WordpieceIds or SentencepieceIds of the vocabulary.
    question: string [batch].
    blank_token: the marker ("[MASK]").
    blank_token_id: its id.

  Returns:
    int32 RaggedTensor [batch, (pieces)].
  """
  if isinstance(tokenizer, SentencepieceIds):
    return tokenizer.blanked(question, blank_token, blank_token_id)
  parts = tf.strings.split(question, sep=blank_token)
  pieces = tokenizer.ids(parts.flat_values)
  part_index = tf.range(tf.size(parts.flat_values, out_type=tf.int64)) - tf.gather(
      parts.row_starts(), parts.value_rowids())
  blank_after = tf.cast(part_index < tf.gather(parts.row_lengths(), parts.value_rowids()) - 1,
                        tf.int64)
  blanks = tf.RaggedTensor.from_row_lengths(
      tf.fill([tf.reduce_sum(blank_after)], tf.constant(blank_token_id, tf.int32)), blank_after)
  with_blanks = tf.concat([pieces, blanks], axis=1)
  return tf.RaggedTensor.from_row_lengths(with_blanks, parts.row_lengths()).merge_dims(1, 2)


def last_fitting(sentences, room_long, room_global):
  """The latest sentences of each row that fit: [batch, (n), (p)] -> its suffix per row.

  Args:
    sentences: int32 RaggedTensor [batch, (n), (pieces)].
    room_long: int64 [batch], pieces left for them.
    room_global: int64 [batch], sentences left for them.

  Returns:
    (the kept suffix, int32 [batch] its number of sentences).
  """
  dense = sentences.row_lengths(axis=2).to_tensor()
  count = sentences.row_lengths()
  index = tf.range(tf.shape(dense, out_type=tf.int64)[1])[tf.newaxis]
  valid = index < count[:, tf.newaxis]
  keep = (valid & (tf.cumsum(dense, axis=1, reverse=True) <= room_long[:, tf.newaxis]) &
          (count[:, tf.newaxis] - index <= room_global[:, tf.newaxis]))
  mask = tf.RaggedTensor.from_tensor(keep, lengths=count)
  return (tf.ragged.boolean_mask(sentences, mask),
          tf.reduce_sum(tf.cast(keep, tf.int32), axis=1))


def input_positions(nonempty, packed_index_limit):
  """For each input sentence, its global token (or -1 when empty or not packed).

  Args:
    nonempty: bool [batch, S], the sentence has pieces.
    packed_index_limit: int32 [batch], the sentences packed.

  Returns:
    int32 [batch, S].
  """
  index = tf.cumsum(tf.cast(nonempty, tf.int32), axis=1) - 1
  return tf.where(nonempty & (index < packed_index_limit[:, tf.newaxis]), index, -1)


class LongTaskModel(tf.Module):
  """The raw-text long-context model (see the module docstring)."""

  def __init__(self, task, config, variables, tokenizer, settings, label_names=None):
    """Holds the weights, the tokenizer and the record settings.

    Args:
      task: a name of SIGNATURES.
      config: EtcConfig.
      variables: dict name -> tf.Variable (export_utils.variables_from_checkpoint).
      tokenizer: WordpieceIds or SentencepieceIds of the vocabulary.
      settings: long_tasks.json's settings (max_seq_length, max_global_seq_length,
        max_candidates, max_candidate_pieces, global_token_id, candidate_token_id,
        blank_token, blank_token_id).
      label_names: classify: the label vocabulary.
    """
    super(LongTaskModel, self).__init__()
    self._task = task
    self._config = config
    self._variables = variables
    self.weights = list(variables.values())
    self.tokenizer = tokenizer
    self._settings = dict(settings)
    self._label_names = label_names
    if label_names:
      self.label_table = tf.constant(label_names)

  def _encode(self, features):
    """EtcModel and the task's head over packed features; returns the head's logits."""
    long_len = self._settings["max_seq_length"]
    global_len = self._settings["max_global_seq_length"]
    batch = tf.shape(features["token_ids"])[0]
    inputs = etc_estimator.add_side_inputs(dict(features), self._config, long_len, global_len)
    inputs.setdefault("label", tf.zeros([batch, 1], tf.int32))
    inputs["sentence_labels"] = tf.zeros([batch, global_len], tf.int32)
    with export_utils.in_variables(self._variables):
      return build_head(self._task, self._config, inputs,
                        len(self._label_names) if self._label_names else None)

  def cloze_features(self, sentences, question, candidates):
    """The cloze record of raw text: (features dict, kept candidates bool [batch, K], context)."""
    s = self._settings
    long_len, global_len = s["max_seq_length"], s["max_global_seq_length"]
    cands = tokenize_rows(self.tokenizer, candidates)
    cands = tf.ragged.boolean_mask(cands, piece_positions(cands) < s["max_candidate_pieces"])
    has_pieces = cands.row_lengths(axis=2) > 0
    # [batch, K] also for an empty batch (whose ragged rows would give [0, 0]).
    nonempty = has_pieces.to_tensor(False)
    nonempty = tf.pad(nonempty, [[0, 0], [0, tf.shape(candidates)[1] - tf.shape(nonempty)[1]]])
    cands = drop_empty(cands)
    num_c = cands.row_lengths()
    # Requests the head cannot answer fail instead of getting an answer that means nothing:
    # no candidate (the answer would be ""), no blank (nothing asks for a candidate).
    blanks = tf.strings.split(question, sep=s["blank_token"]).row_lengths() - 1
    checks = [
        tf.debugging.assert_less_equal(
            num_c, tf.constant(s["max_candidates"], tf.int64),
            message="more candidates than the model's max_candidates=%d" % s["max_candidates"]),
        tf.debugging.assert_positive(
            num_c, message="a request without candidates (every row needs one that is not "
                           "empty)"),
        tf.debugging.assert_positive(
            blanks, message="a question without the blank token %s (each mention of the "
                            "answer is written as %s)" % (s["blank_token"], s["blank_token"])),
    ]
    with tf.control_dependencies(checks):
      num_c = tf.identity(num_c)
    query = blanked_question(self.tokenizer, question, s["blank_token"], s["blank_token_id"])
    query = drop_empty(tf.expand_dims(query, 1))
    context = drop_empty(tokenize_rows(self.tokenizer, sentences))
    used = tf.reduce_sum(cands.row_lengths(axis=2), axis=1) + tf.reduce_sum(
        query.row_lengths(axis=2), axis=1)
    context, context_count = last_fitting(context, long_len - used,
                                          global_len - num_c - query.row_lengths())
    features, _ = pack_sentences(tf.concat([cands, context, query], axis=1), long_len,
                                 global_len, s["global_token_id"])
    is_candidate = tf.range(global_len)[tf.newaxis] < tf.cast(num_c, tf.int32)[:, tf.newaxis]
    features["global_token_ids"] = tf.where(
        is_candidate, s["candidate_token_id"], features["global_token_ids"])
    features["candidate_mask"] = tf.cast(is_candidate[:, :s["max_candidates"]], tf.int32)
    return features, nonempty, context_count

  def sentence_features(self, sentences):
    """The supporting / classify record of raw sentences: (features, global index [batch, S])."""
    s = self._settings
    tokens = tokenize_rows(self.tokenizer, sentences)
    nonempty = (tokens.row_lengths(axis=2) > 0).to_tensor(False)
    features, packed = pack_sentences(drop_empty(tokens), s["max_seq_length"],
                                      s["max_global_seq_length"], s["global_token_id"])
    return features, input_positions(nonempty, packed), packed

  def cloze(self, sentences, question, candidates):
    features, nonempty, context_count = self.cloze_features(sentences, question, candidates)
    logits = self._encode(features)
    index = tf.maximum(tf.cumsum(tf.cast(nonempty, tf.int32), axis=1) - 1, 0)
    scores = tf.where(nonempty, tf.gather(logits, index, batch_dims=1), heads.MASKED_LOGIT)
    answer_index = tf.argmax(scores, axis=1, output_type=tf.int32)
    return {"scores": scores, "probabilities": tf.nn.softmax(scores),
            "answer_index": answer_index,
            "answer": tf.gather(candidates, answer_index, batch_dims=1),
            "context_sentences": context_count}

  def supporting(self, sentences):
    features, where, packed = self.sentence_features(sentences)
    logits = self._encode(features)
    read = where >= 0
    per_sentence = tf.where(read, tf.gather(logits, tf.maximum(where, 0), batch_dims=1), 0.0)
    return {"logits": per_sentence,
            "probabilities": tf.where(read, tf.sigmoid(per_sentence), 0.0),
            "labels": tf.where(read, tf.cast(per_sentence > 0, tf.int32), -1),
            "sentences_read": packed}

  def classify(self, sentences):
    features, _, packed = self.sentence_features(sentences)
    logits = self._encode(features)
    label_index = tf.argmax(logits, axis=1, output_type=tf.int32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits),
            "label_index": label_index, "label": tf.gather(self.label_table, label_index),
            "sentences_read": packed}

  def signatures(self):
    """{"serving_default": the task's text signature, "features": its record's features}."""
    specs = SIGNATURES[self._task]

    @tf.function(input_signature=specs, autograph=False)
    def serve(*args):
      return getattr(self, self._task)(*args)

    @tf.function(input_signature=specs, autograph=False)
    def features(*args):
      if self._task == "cloze":
        return self.cloze_features(*args)[0]
      return self.sentence_features(*args)[0]

    return {"serving_default": serve.get_concrete_function(),
            "features": features.get_concrete_function()}


_SENTENCES = tf.TensorSpec([None, None], tf.string, name="sentences")
# Per task: the serving inputs (LongTaskModel has a method of the task's name).
SIGNATURES = {
    "cloze": [_SENTENCES, tf.TensorSpec([None], tf.string, name="question"),
              tf.TensorSpec([None, None], tf.string, name="candidates")],
    "supporting": [_SENTENCES],
    "classify": [_SENTENCES],
}


def build_head(task, config, features, num_labels=None):
  """EtcModel (inference) and the task's head over features with side inputs; the logits.

  As run_long_tasks' build_model: the task's embedding additions (OpenKP's visual features,
  long_task_heads.embedding_adders), the long rows' layout decided from the static L.
  """
  model = etc_modeling.EtcModel(config, is_training=False)
  long_adder, global_adder = heads.embedding_adders(task, features, config)
  long_output, global_output = etc_estimator.encode(
      model, features, long_embedding_adder=long_adder, global_embedding_adder=global_adder)
  return heads.task_head(task, global_output, features, config, False, num_labels=num_labels,
                         long_output=long_output)[2]


def _placeholder_build(task, config, settings, num_labels):
  """Builds the model and head over placeholders (to learn the variables)."""
  long_len = settings["max_seq_length"]
  global_len = settings["max_global_seq_length"]
  extra = {name: (tf.int32, [1, length]) for name, length in heads.feature_lengths(
      task, long_len, global_len, settings["max_candidates"]).items()
           if name not in heads.COMMON_FEATURES}
  extra.setdefault("label", (tf.int32, [1, 1]))
  extra.setdefault("sentence_labels", (tf.int32, [1, global_len]))
  features = etc_estimator.placeholder_features(config, long_len, global_len, extra)
  build_head(task, config, features, num_labels)


def read_settings(data_dir):
  """long_tasks.json of a create_long_tasks --output_dir: (settings, classify labels or None)."""
  path = os.path.join(data_dir, long_tasks.SUMMARY_NAME)
  common.require_file(path, "data_dir")
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      summary = json.loads(f.read())
    settings = summary["settings"]
    labels = long_tasks.read_classify_labels(data_dir)
  except (ValueError, KeyError, TypeError) as e:
    common.fail("--data_dir=%s: %s cannot be read (%s)" % (data_dir, long_tasks.SUMMARY_NAME, e))
  missing = [k for k in ("max_seq_length", "max_global_seq_length", "max_candidates",
                         "max_candidate_pieces", "global_token_id", "candidate_token_id",
                         "blank_token_id") if k not in settings]
  if missing:
    common.fail("--data_dir=%s: the settings of its %s lack %s" %
                (data_dir, long_tasks.SUMMARY_NAME, ", ".join(missing)))
  check_settings(settings, "--data_dir=%s: its %s" % (data_dir, long_tasks.SUMMARY_NAME))
  return settings, labels


def check_settings(settings, where):
  """One line unless the lengths and token ids are ones create_long_tasks could have written.

  A value it never writes (0, a string, G > L, more candidates than global tokens) would build
  a graph that fails deep inside TensorFlow or a SavedModel that reads nothing.

  Args:
    settings: long_tasks.json's settings.
    where: the file, for messages.
  """
  for key in ("max_seq_length", "max_global_seq_length", "max_candidates",
              "max_candidate_pieces"):
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      common.fail("%s: %s=%r is not a whole number >= 1" % (where, key, value))
  for key in ("global_token_id", "candidate_token_id", "blank_token_id"):
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
      common.fail("%s: %s=%r is not a token id" % (where, key, value))
  if settings["max_global_seq_length"] > settings["max_seq_length"]:
    common.fail("%s: max_global_seq_length=%d is more than max_seq_length=%d" % (
        where, settings["max_global_seq_length"], settings["max_seq_length"]))
  # A cloze record's global tokens: the candidates, at least one question sentence.
  if settings["max_candidates"] >= settings["max_global_seq_length"]:
    common.fail("%s: max_candidates=%d leaves no global token of max_global_seq_length=%d for "
                "the question" % (where, settings["max_candidates"],
                                  settings["max_global_seq_length"]))
  if settings["max_candidates"] * settings["max_candidate_pieces"] >= settings["max_seq_length"]:
    common.fail("%s: max_candidates=%d times max_candidate_pieces=%d leaves no room in "
                "max_seq_length=%d" % (where, settings["max_candidates"],
                                       settings["max_candidate_pieces"],
                                       settings["max_seq_length"]))


def check_vocab_fits(reference, vocab_file, config, settings, flag_name="vocab_file"):
  """One line when the vocabulary has ids the model's token table lacks.

  A word of such an id would fail every request that holds it (an index outside the table), or
  on some devices read zeros; the vocabulary belongs to another model.

  Args:
    reference: tokenization.FullTokenizer of vocab_file.
    vocab_file: its path, for the message.
    config: EtcConfig.
    settings: long_tasks.json's settings (the special token ids).
    flag_name: the flag that gave vocab_file ("spm_model_file" for a SentencePiece model).
  """
  if len(reference.vocab) > config.vocab_size:
    common.fail("--%s=%s: has %d tokens but the model's vocab_size is %d (the vocabulary "
                "of another model?)" % (flag_name, vocab_file, len(reference.vocab),
                                          config.vocab_size))
  for key in ("global_token_id", "candidate_token_id", "blank_token_id"):
    if settings[key] >= config.vocab_size:
      common.fail("the data's %s: %s=%d is not below the model's vocab_size=%d" % (
          long_tasks.SUMMARY_NAME, key, settings[key], config.vocab_size))


def check_task(task, checkpoint, num_labels=None):
  """One line unless the checkpoint holds the task's head (of num_labels labels)."""
  shapes = dict(tf.train.list_variables(checkpoint))
  # A head's variables are under cls/long_tasks/<task>/ (not all heads have an output_bias).
  tuned = sorted(t for t in heads.TASKS
                 if any(name.startswith("%s/%s/" % (heads.SCOPE, t)) for name in shapes))
  bias = "%s/%s/output_bias" % (heads.SCOPE, task)
  if task not in tuned:
    common.fail("--task=%s: checkpoint %s has no %s head (%s)" % (
        task, checkpoint, task, "it was tuned for --task=%s" % ",".join(tuned) if tuned else
        "no long-task head: fine-tune it with etc_model.run_long_tasks first"))
  if num_labels is not None and list(shapes[bias]) != [num_labels]:
    common.fail("--task=%s: checkpoint %s has %d labels but the label vocabulary has %d" %
                (task, checkpoint, shapes[bias][0], num_labels))


def export_long_model(task, checkpoint, config, settings, vocab_file, do_lower_case, output_dir,
                      label_names=None, overwrite=False, protected_paths=(), spm_model_file=None):
  """Writes the raw-text SavedModel of a fine-tuned long-task checkpoint.

  Args:
    task: a name of SIGNATURES.
    checkpoint: checkpoint prefix.
    config: EtcConfig.
    settings: long_tasks.json's settings (read_settings).
    vocab_file: the WordPiece vocabulary (stored as an asset; None with spm_model_file).
    do_lower_case: the tokenizer's setting.
    output_dir: the SavedModel directory (new, or an earlier export of ours with overwrite).
    label_names: classify: the label vocabulary.
    overwrite: replace an earlier export of ours.
    protected_paths: paths the export must never replace.
    spm_model_file: the SentencePiece model of a SentencePiece-based data directory (stored as
      an asset; the graph tokenises with tensorflow-text's SentencepieceTokenizer).

  Returns:
    The LongTaskModel written.
  """
  vocabulary = spm_model_file or vocab_file
  flag_name = "spm_model_file" if spm_model_file else "vocab_file"
  protected = list(protected_paths) + [checkpoint, vocabulary]
  common.check_export_dir(output_dir, "output_dir", overwrite, protected)
  num_labels = len(label_names) if task in heads.LABEL_VOCABULARY_TASKS else None
  check_task(task, checkpoint, num_labels)
  reference = tokenization.FullTokenizer(vocab_file, do_lower_case, spm_model_file=spm_model_file)
  check_vocab_fits(reference, vocabulary, config, settings, flag_name)
  for name in ("global_token", "candidate_token", "blank_token"):
    token = settings.get(name)
    if token is not None and reference.vocab.get(token) != settings[name + "_id"]:
      common.fail("--%s=%s: %s %s is not id %d as in the data's %s" % (
          flag_name, vocabulary, name, token, settings[name + "_id"], long_tasks.SUMMARY_NAME))
  settings = dict(settings)
  settings.setdefault("blank_token", reference.inv_vocab[settings["blank_token_id"]])
  if spm_model_file:
    tokenizer = SentencepieceIds(spm_model_file, do_lower_case)
  else:
    tokenizer = WordpieceIds(vocab_file, do_lower_case)
  variables = export_utils.variables_from_checkpoint(
      export_utils.collect_variable_specs(
          lambda: _placeholder_build(task, config, settings, num_labels)),
      checkpoint, flag_name="checkpoint")
  model = LongTaskModel(task, config, variables, tokenizer, settings,
                        label_names if num_labels else None)
  info = {"task": task, "checkpoint": checkpoint, "do_lower_case": bool(do_lower_case),
          "labels": label_names if num_labels else None,
          "vocabulary": "sentencepiece" if spm_model_file else "wordpiece"}
  for key in ("max_seq_length", "max_global_seq_length", "max_candidates",
              "max_candidate_pieces", "global_token_id", "candidate_token_id", "blank_token",
              "blank_token_id"):
    info[key] = settings[key]
  extra = {EXPORT_CONFIG: json.dumps(info, indent=2, sort_keys=True) + "\n",
           CONFIG_NAME: config.to_json_string()}
  export_utils.save_atomically(model, output_dir, model.signatures(), extra, overwrite,
                               protected, flag_name="output_dir")
  tf1.logging.info("Exported the %s model %s to %s", task, checkpoint, output_dir)
  return model


# ----------------------------------------------------------------------------- record tasks
# The tasks whose SavedModel reads serialized tf.Example records (those of etc_model.create_*):
# {task: its data module (SUMMARY_NAME: the summary its create_ command writes)}.
RECORD_TASKS = {wikihop.TASK: wikihop, hotpotqa.TASK: hotpotqa, nq.TASK: nq,
                openkp.TASK: openkp}
# The summaries of every data directory this tool reads: {file name: the task of its records}.
DATA_SUMMARIES = dict([(module.SUMMARY_NAME, task) for task, module in RECORD_TASKS.items()] +
                      [(long_tasks.SUMMARY_NAME, "cloze, supporting or classify")])
# run_long_tasks' --task=wikihop side-input flags (wikihop.add_side_inputs' keyword arguments).
WIKIHOP_SIDE_INPUT_FLAGS = heads.WIKIHOP_SIDE_INPUT_OPTIONS
# Per task: the head's outputs (run_long_tasks' PREDICT names) and the record features passed
# through for the decoders.
RECORD_OUTPUTS = {
    wikihop.TASK: (("logits",), ("candidate_mask",)),
    hotpotqa.TASK: (("sp_logits", "answer_type_logits", "begin_logits", "end_logits"),
                    ("global_token_ids",)),
    nq.TASK: (("answer_type_logits",) + nq.POSITION_LOGITS, ()),
    openkp.TASK: (("ngram_logits",), ()),
}


def data_summary(task, data_dir):
  """The summary of a data directory of `task`: one line when it holds another task's data.

  Args:
    task: --task.
    data_dir: --data_dir.

  Returns:
    The path of its summary (RECORD_TASKS' SUMMARY_NAME, or long_tasks.json).
  """
  name = RECORD_TASKS[task].SUMMARY_NAME if task in RECORD_TASKS else long_tasks.SUMMARY_NAME
  path = os.path.join(data_dir, name)
  if tf.io.gfile.exists(path):
    return path
  others = sorted(other for other in DATA_SUMMARIES
                  if other != name and tf.io.gfile.exists(os.path.join(data_dir, other)))
  if others:
    common.fail("--data_dir=%s: has no %s but %s: the records of --task=%s, not --task=%s" % (
        data_dir, name, others[0], DATA_SUMMARIES[others[0]], task))
  command = ("create_%s" % task) if task in RECORD_TASKS else "create_long_tasks"
  common.fail("--data_dir=%s: has no %s (write the data with etc_model.%s)" %
              (data_dir, name, command))


def read_record_settings(task, data_dir):
  """L, G (and WikiHop's candidates C) of a create_wikihop / hotpotqa / nq / openkp directory.

  Args:
    task: a name of RECORD_TASKS.
    data_dir: --data_dir.

  Returns:
    dict max_seq_length, max_global_seq_length, max_candidates (1 without candidates).
  """
  path = data_summary(task, data_dir)
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      settings = json.loads(f.read())["settings"]
    lengths = {"max_seq_length": settings["max_seq_length"],
               "max_global_seq_length": settings["max_global_seq_length"],
               "max_candidates": (settings["max_candidates"] if task in heads.CANDIDATE_TASKS
                                  else 1)}
  except (ValueError, KeyError, TypeError) as e:
    common.fail("--data_dir=%s: %s cannot be read (%s)" % (data_dir, os.path.basename(path),
                                                           e))
  for key, value in lengths.items():
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      common.fail("--data_dir=%s: its %s: %s=%r is not a whole number >= 1" % (
          data_dir, os.path.basename(path), key, value))
  return lengths


def record_feature_spec(task, lengths):
  """run_long_tasks' record features of a task: {name: FixedLenFeature int64 [length]}."""
  return {name: tf.io.FixedLenFeature([length], tf.int64)
          for name, length in heads.feature_lengths(
              task, lengths["max_seq_length"], lengths["max_global_seq_length"],
              lengths["max_candidates"]).items()}


class RecordTaskModel(tf.Module):
  """The SavedModel of a Table 8 task: serialized records in, the head's outputs out."""

  def __init__(self, task, config, variables, lengths, side_input_options):
    """Holds the weights and the records' lengths.

    Args:
      task: a name of RECORD_TASKS.
      config: EtcConfig.
      variables: dict name -> tf.Variable (export_utils.variables_from_checkpoint).
      lengths: read_record_settings' dict.
      side_input_options: add_task_side_inputs' options.
    """
    super(RecordTaskModel, self).__init__()
    self._task = task
    self._config = config
    self._variables = variables
    self.weights = list(variables.values())
    self._lengths = dict(lengths)
    self._side_input_options = dict(side_input_options or {})

  def parse(self, examples):
    """string [batch] of records -> their int32 features (a record without one fails)."""
    parsed = tf.io.parse_example(examples, record_feature_spec(self._task, self._lengths))
    return {name: tf.cast(value, tf.int32) for name, value in parsed.items()}

  def outputs(self, examples):
    """The head's outputs of a batch of records (RECORD_OUTPUTS; WikiHop also prediction)."""
    features = self.parse(examples)
    inputs = heads.add_task_side_inputs(self._task, dict(features), self._config,
                                  self._lengths["max_seq_length"],
                                  self._lengths["max_global_seq_length"],
                                  self._side_input_options)
    with export_utils.in_variables(self._variables):
      logits = build_head(self._task, self._config, inputs)
    logits = dict(logits) if isinstance(logits, dict) else {"logits": logits}
    head_names, passed = RECORD_OUTPUTS[self._task]
    out = {name: logits[name] for name in head_names}
    out.update((name, features[name]) for name in passed)
    if self._task == wikihop.TASK:  # the first real candidate of the highest score
      masked = tf.where(features["candidate_mask"] > 0, out["logits"],
                        tf.fill(tf.shape(out["logits"]), -float("inf")))
      out["prediction"] = tf.argmax(masked, axis=1, output_type=tf.int32)
    return out

  def signatures(self):
    """{"serving_default": records -> the head's outputs}."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")],
                 autograph=False)
    def serve(examples):
      return self.outputs(examples)

    return {"serving_default": serve.get_concrete_function()}


def build_record_model(task, config, lengths):
  """Builds the model and the task's head over placeholders of its records (their variables).

  Args:
    task: a name of RECORD_TASKS.
    config: EtcConfig.
    lengths: read_record_settings' dict (max_seq_length, max_global_seq_length,
      max_candidates of the data).
  """
  long_len, global_len = lengths["max_seq_length"], lengths["max_global_seq_length"]
  extra = {name: (tf.int32, [1, length]) for name, length in heads.feature_lengths(
      task, long_len, global_len, lengths["max_candidates"]).items()
           if name not in heads.COMMON_FEATURES}
  features = etc_estimator.placeholder_features(config, long_len, global_len, extra)
  build_head(task, config, features)


def export_record_model(task, checkpoint, config, lengths, output_dir, side_input_options=None,
                        overwrite=False, protected_paths=()):
  """Writes the serialized-record SavedModel of a Table 8 task's fine-tuned checkpoint.

  Args:
    task: a name of RECORD_TASKS.
    checkpoint: checkpoint prefix.
    config: EtcConfig.
    lengths: read_record_settings' dict (L, G, C of the data).
    output_dir: the SavedModel directory (new, or an earlier export of ours with overwrite).
    side_input_options: wikihop: {flag: value} of WIKIHOP_SIDE_INPUT_FLAGS (defaults:
      run_long_tasks'); hotpotqa: {"cls_token_id": the data's [CLS] id}; else None.
    overwrite: replace an earlier export of ours.
    protected_paths: paths the export must never replace.

  Returns:
    The RecordTaskModel written.
  """
  protected = list(protected_paths) + [checkpoint]
  common.check_export_dir(output_dir, "output_dir", overwrite, protected)
  check_task(task, checkpoint)
  variables = export_utils.variables_from_checkpoint(
      export_utils.collect_variable_specs(lambda: build_record_model(task, config, lengths)),
      checkpoint, flag_name="checkpoint")
  model = RecordTaskModel(task, config, variables, lengths, side_input_options)
  signatures = model.signatures()
  info = {"task": task, "checkpoint": checkpoint, "inputs": "examples",
          "outputs": sorted(signatures["serving_default"].structured_outputs),
          "side_input_options": side_input_options or {}}
  info.update(lengths)
  extra = {EXPORT_CONFIG: json.dumps(info, indent=2, sort_keys=True) + "\n",
           CONFIG_NAME: config.to_json_string()}
  export_utils.save_atomically(model, output_dir, signatures, extra, overwrite, protected,
                               flag_name="output_dir")
  tf1.logging.info("Exported the %s model %s to %s", task, checkpoint, output_dir)
  return model


def record_side_input_options(task, data_dir, flag_values, checkpoint=None, given=()):
  """The side-input options of a task's export: WikiHop's (those the run kept beside the
  checkpoint, else the flags'), HotpotQA's [CLS] id of the data.

  Args:
    task: a name of RECORD_TASKS.
    data_dir: --data_dir.
    flag_values: {flag: value} of WIKIHOP_SIDE_INPUT_FLAGS.
    checkpoint: the checkpoint prefix (its run's long_task_heads.SIDE_INPUTS_NAME is read).
    given: the flags of WIKIHOP_SIDE_INPUT_FLAGS given on the command line: one line when one
      differs from the run's.

  Returns:
    dict (long_task_heads.add_task_side_inputs' side_input_options) or None.
  """
  if task == wikihop.TASK:
    saved = beside_checkpoint(checkpoint, heads.SIDE_INPUTS_NAME) if checkpoint else None
    if not saved:
      return dict(flag_values)
    return heads.check_side_inputs(os.path.dirname(saved),
                                   {name: flag_values[name] for name in given})
  if task == hotpotqa.TASK:
    tokenizer, _ = hotpotqa.load_data_tokenizer(data_dir)
    return {"cls_token_id": tokenizer.vocab[hotpotqa.GLOBAL_TOKENS["cls"]]}
  return None


def load_run_config(checkpoint, etc_config_file, max_seq_length, checkpoint_flag):
  """(config file, EtcConfig) of a run: --etc_config_file, else etc_config.json beside the
  checkpoint (checkpoint_flag: --checkpoint as given, for the message)."""
  config_file = etc_config_file or beside_checkpoint(checkpoint, CONFIG_NAME)
  if not config_file:
    common.fail("--etc_config_file is required (no %s beside --checkpoint=%s)" %
                (CONFIG_NAME, checkpoint_flag))
  return config_file, etc_estimator.load_config(config_file, max_seq_length=max_seq_length)


def export_record_job(task, checkpoint, data_dir, output_dir, etc_config_file=None,
                      overwrite=False, wikihop_options=None, checkpoint_flag=None,
                      wikihop_options_given=()):
  """The export of a Table 8 task's run: the data's lengths, the run's config, the side inputs.

  Args:
    task: a name of RECORD_TASKS.
    checkpoint: the checkpoint prefix.
    data_dir: --data_dir (the task's create_ command's output).
    output_dir: --output_dir.
    etc_config_file: --etc_config_file (None: etc_config.json beside the checkpoint).
    overwrite: --overwrite.
    wikihop_options: {flag: value} of WIKIHOP_SIDE_INPUT_FLAGS (wikihop; the run's kept ones
      come first, see record_side_input_options).
    checkpoint_flag: --checkpoint as given (messages).
    wikihop_options_given: the names of WIKIHOP_SIDE_INPUT_FLAGS given on the command line.
  """
  lengths = read_record_settings(task, data_dir)
  config_file, config = load_run_config(checkpoint, etc_config_file, lengths["max_seq_length"],
                                        checkpoint_flag or checkpoint)
  options = record_side_input_options(task, data_dir, wikihop_options or {}, checkpoint,
                                     wikihop_options_given)
  export_record_model(task, checkpoint, config, lengths, output_dir, options,
                      overwrite=overwrite,
                      protected_paths=[config_file, data_summary(task, data_dir)])


def data_vocabulary(vocab_file, spm_model_file, settings, data_dir):
  """(vocab_file, spm_model_file) of the export: the flags', else the data's; one of them None.

  A WordPiece vocabulary for SentencePiece data (or the reverse) is one line: the records'
  ids are the data's vocabulary's.

  Args:
    vocab_file: --vocab_file (or None).
    spm_model_file: --spm_model_file (or None).
    settings: long_tasks.json's settings (vocab_file / spm_model_file as create_long_tasks
      recorded them).
    data_dir: --data_dir, for messages.

  Returns:
    (vocab_file or None, spm_model_file or None), the given one an existing file.
  """
  data_vocab, data_spm = settings.get("vocab_file"), settings.get("spm_model_file")
  if vocab_file and spm_model_file:
    common.fail("--spm_model_file=%s: give it or --vocab_file=%s, not both" %
                (spm_model_file, vocab_file))
  if spm_model_file and data_vocab:
    common.fail("--spm_model_file=%s: --data_dir=%s was made with the WordPiece vocabulary %s "
                "(pass --vocab_file)" % (spm_model_file, data_dir, data_vocab))
  if vocab_file and data_spm:
    common.fail("--vocab_file=%s: --data_dir=%s was made with the SentencePiece model %s (pass "
                "--spm_model_file)" % (vocab_file, data_dir, data_spm))
  spm_model_file = spm_model_file or (None if vocab_file else data_spm)
  if spm_model_file:
    common.require_file(spm_model_file, "spm_model_file")
    return None, spm_model_file
  vocab_file = vocab_file or data_vocab
  if not vocab_file:
    common.fail("--vocab_file is required (--data_dir=%s records none)" % data_dir)
  common.require_file(vocab_file, "vocab_file")
  return vocab_file, None


def beside_checkpoint(checkpoint, name):
  """The run's file `name` beside a checkpoint or in the run directory above best/, or None."""
  directories = [os.path.dirname(checkpoint)]
  if os.path.basename(directories[0]) == "best":  # training_eval's --keep_best copy
    directories.append(os.path.dirname(directories[0]))
  for directory in directories:
    path = os.path.join(directory, name)
    if tf.io.gfile.exists(path):
      return path
  return None


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  for name in ("task", "checkpoint", "data_dir", "output_dir"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  for name in WIKIHOP_SIDE_INPUT_FLAGS:
    if FLAGS.task != wikihop.TASK and FLAGS[name].present:
      common.fail("--%s: only with --task=%s" % (name, wikihop.TASK))
  checkpoint = export_utils.resolve_checkpoint(FLAGS.checkpoint, "checkpoint")
  if FLAGS.task in RECORD_TASKS:
    for name in ("vocab_file", "spm_model_file"):
      if getattr(FLAGS, name):
        common.fail("--%s: not with --task=%s (its records hold the ids)" % (name, FLAGS.task))
    export_record_job(FLAGS.task, checkpoint, FLAGS.data_dir, FLAGS.output_dir,
                      FLAGS.etc_config_file, FLAGS.overwrite,
                      {name: FLAGS[name].value for name in WIKIHOP_SIDE_INPUT_FLAGS},
                      FLAGS.checkpoint,
                      [name for name in WIKIHOP_SIDE_INPUT_FLAGS if FLAGS[name].present])
    return
  data_summary(FLAGS.task, FLAGS.data_dir)
  settings, labels = read_settings(FLAGS.data_dir)
  if FLAGS.task in heads.LABEL_VOCABULARY_TASKS and not labels:
    common.fail("--data_dir=%s: its %s has no classify_labels (data of an earlier version)" %
                (FLAGS.data_dir, long_tasks.SUMMARY_NAME))
  saved_labels = beside_checkpoint(checkpoint, LABELS_NAME)
  if labels and saved_labels:
    with tf.io.gfile.GFile(saved_labels, "r") as f:
      if json.loads(f.read()) != labels:
        common.fail("--data_dir=%s: its classify_labels differ from the model's %s" %
                    (FLAGS.data_dir, saved_labels))
  vocab_file, spm_model_file = data_vocabulary(FLAGS.vocab_file, FLAGS.spm_model_file, settings,
                                               FLAGS.data_dir)
  config_file, config = load_run_config(checkpoint, FLAGS.etc_config_file,
                                        settings["max_seq_length"], FLAGS.checkpoint)
  export_long_model(FLAGS.task, checkpoint, config, settings, vocab_file,
                    settings.get("do_lower_case", True), FLAGS.output_dir, label_names=labels,
                    overwrite=FLAGS.overwrite,
                    protected_paths=[config_file, os.path.join(FLAGS.data_dir,
                                                               long_tasks.SUMMARY_NAME)],
                    spm_model_file=spm_model_file)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
