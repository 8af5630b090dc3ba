# coding=utf-8
"""TF2 SavedModels of BERT / RealFormer in the TF-Hub BERT layout, and their raw-text parts.

The library behind export_hub.py and run_classifier.py --export_dir (and the raw-text exports
of run_ner, predict_masked and etc_model.export_long_model): encoder (`BertEncoder`,
`BertMaskedLM`), preprocessor (`BertPreprocessor`: tensorflow-text WordPiece / SentencePiece whose
ids equal tokenization.FullTokenizer, `pack_inputs`) and classifier (`BertClassifier`: raw text
in, long texts truncated or windowed and pooled as run_classifier does (`document_windows`,
`pool_windows`), and run_classifier's int32 features in as `serving_ids`) tf.Modules, the
`export_*` functions that save them atomically with export_info.json, and the readers of what a
run_classifier output directory records about its task.

The models are tf.Modules whose tf.functions run the modeling.py graph code (tf.compat.v1
variable scopes) with a custom getter that hands out tf.Variables created from the checkpoint,
so the variable names are the checkpoint names and the math is exactly modeling.BertModel's.
Only the "serve" tag is written; there are no TPU-specific ops. export_hub.py's docstring
describes each SavedModel's signatures.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os

import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import model_config
import modeling
from realformer_tf import batch_padding
import tokenization

tf1 = tf.compat.v1

MODES = ("encoder", "preprocessor", "classifier")
TASK_TYPES = ("classification", "regression", "multilabel")

# Written into every export with weights: mode, checkpoint record, classifier task.
EXPORT_INFO = "export_info.json"

# The graph-level seed of --allow_random_eval weights (the same random model on every run).
RANDOM_WEIGHTS_SEED = export_utils.RANDOM_WEIGHTS_SEED

# run_classifier.py's default --multilabel_threshold.
DEFAULT_MULTILABEL_THRESHOLD = 0.5
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")

# A classifier export's signature for clients that tokenise themselves: int32 ID_INPUTS
# [batch, seq_length] (run_classifier's features) -> the outputs of run_classifier's former
# integer-input SavedModel.
ID_SIGNATURE = "serving_ids"
ID_INPUTS = ("input_ids", "input_mask", "segment_ids")
# --long_document=window: how a text's window logits are pooled (run_classifier's choices).
WINDOW_POOLINGS = ("mean", "max")

# Official WordpieceTokenizer.max_input_chars_per_word: longer words become [UNK].
MAX_CHARS_PER_WORD = 200


def read_export_info(export_dir):
  """The EXPORT_INFO dict of an export (None for an export without one, e.g. an older one).

  Args:
    export_dir: a SavedModel directory written by this tool.

  Returns:
    dict or None.
  """
  path = os.path.join(export_dir, EXPORT_INFO)
  if not tf.io.gfile.exists(path):
    return None
  try:
    with tf.io.gfile.GFile(path) as f:
      info = json.load(f)
  except (ValueError, tf.errors.OpError) as e:
    common.fail("%s: not valid JSON (%s)" % (path, str(e).splitlines()[0]))
  if not isinstance(info, dict):
    common.fail("%s: not a JSON object" % path)
  return info


def export_info(mode, checkpoint_path, **extra):
  """The EXPORT_INFO text: mode, checkpoint_utils.checkpoint_record(checkpoint_path), extra."""
  info = dict(mode=mode, **checkpoint_utils.checkpoint_record(checkpoint_path))
  info.update(extra)
  return json.dumps(info, indent=2, sort_keys=True) + "\n"


def _checkpoint_dir(checkpoint_path):
  return os.path.dirname(checkpoint_path) or "."


def default_config_file(bert_config_file, checkpoint_path):
  """--bert_config_file, else bert_config.json beside the checkpoint (None when neither)."""
  if bert_config_file or not checkpoint_path:
    return bert_config_file or None
  return os.path.join(_checkpoint_dir(checkpoint_path), "bert_config.json")


def resolve_bert_config(bert_config_file, checkpoint_path, flag_values=None):
  """Loads --bert_config_file (default: bert_config.json beside the checkpoint).

  Args:
    bert_config_file: path or None.
    checkpoint_path: resolved checkpoint prefix (None: random weights, the flag is required).
    flag_values: FLAGS with --residual_attention / --layer_norm_type overrides (or None).

  Returns:
    A validated modeling.BertConfig.
  """
  if not bert_config_file and not checkpoint_path:
    common.fail("--bert_config_file is required (no --init_checkpoint to find it beside)")
  if not bert_config_file:
    bert_config_file = os.path.join(_checkpoint_dir(checkpoint_path), "bert_config.json")
    if not tf.io.gfile.exists(bert_config_file):
      common.fail("--bert_config_file is required (no bert_config.json beside %s)" %
                  checkpoint_path)
  return model_config.load_config(bert_config_file, flag_values)


# ----------------------------------------------------------------------------------------------
# Encoder.


def _int32(tensor):
  return tf.cast(tensor, tf.int32) if tensor.dtype != tf.int32 else tensor


def encoder_graph(bert_config, inputs, training=False, with_attention=False):
  """Runs modeling.BertModel on TF-Hub style inputs (variables from the current scope).

  Args:
    bert_config: modeling.BertConfig.
    inputs: dict with int `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq].
    training: Python bool, dropout on.
    with_attention: also return attention_scores / attention_probs.

  Returns:
    (outputs dict: pooled_output [batch, hidden], sequence_output [batch, seq, hidden],
    encoder_outputs list of [batch, seq, hidden], default; the BertModel).
  """
  # A request's ids outside the tables, or longer than the position table, fail with a message
  # naming the input (a token type id outside the table would select no embedding at all).
  inputs = export_utils.range_checked(inputs, bert_config)
  # An explicit scope name (not the default_name) keeps the variable names "bert/..." on every
  # trace: default names are made unique per graph, and a tf.function traces several graphs.
  model = modeling.BertModel(
      config=bert_config, is_training=training,
      input_ids=_int32(inputs["input_word_ids"]), input_mask=_int32(inputs["input_mask"]),
      token_type_ids=_int32(inputs["input_type_ids"]), scope="bert")
  outputs = {"pooled_output": model.get_pooled_output(),
             "sequence_output": model.get_sequence_output(),
             "encoder_outputs": list(model.get_all_encoder_layers()),
             "default": model.get_pooled_output()}
  if with_attention:
    outputs["attention_scores"] = list(model.get_attention_scores())
    outputs["attention_probs"] = list(model.get_attention_probs())
  return outputs, model


def mlm_logits_graph(bert_config, sequence_output, embedding_table, positions):
  """The masked-LM head (modeling.masked_lm_logits), logits shaped per example.

  Args:
    bert_config: modeling.BertConfig.
    sequence_output: float [batch, seq, hidden].
    embedding_table: float [vocab, hidden] (tied output weights).
    positions: int32 [batch, n].

  Returns:
    float [batch, n, vocab] logits (before the softmax).
  """
  batch_size = modeling.get_shape_list(sequence_output, expected_rank=3)[0]
  num_positions = modeling.get_shape_list(positions, expected_rank=2)[1]
  logits = modeling.masked_lm_logits(bert_config, sequence_output, embedding_table, positions)
  return tf.reshape(logits, [batch_size, num_positions, bert_config.vocab_size])


def _encoder_specs(with_positions=False):
  specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in ENCODER_INPUTS}
  if with_positions:
    specs["masked_lm_positions"] = tf.TensorSpec([None, None], tf.int32,
                                                 name="masked_lm_positions")
  return specs


def _flatten_outputs(outputs):
  """Signature outputs must be a flat dict of tensors: lists become name_<i>."""
  flat = {}
  for name, value in outputs.items():
    if isinstance(value, (list, tuple)):
      for i, tensor in enumerate(value):
        flat["%s_%d" % (name, i)] = tensor
    else:
      flat[name] = value
  return flat


class _Reusable(tf.Module):
  """A tf.Module with the attributes of TF-Hub's Reusable SavedModel API.

  `variables`, `trainable_variables` and `regularization_losses` are plain saved lists (tf.Module
  computes the first two on the fly, which a loaded SavedModel would not have), so
  hub.KerasLayer finds the weights and can fine-tune them.
  """
  variables = None
  trainable_variables = None
  regularization_losses = None

  def _set_variables(self, variables):
    ordered = [variables[name] for name in sorted(variables)]
    self.variables = ordered
    self.trainable_variables = [v for v in ordered if v.trainable]
    self.regularization_losses = []


class BertEncoder(_Reusable):
  """The encoder SavedModel: call(inputs dict, training=False) -> outputs dict (TF-Hub layout)."""

  def __init__(self, bert_config, variables, with_attention=False):
    """Wraps existing variables.

    Args:
      bert_config: modeling.BertConfig.
      variables: dict name -> tf.Variable with every bert/* variable (variables_from_checkpoint).
      with_attention: also output attention_scores and attention_probs.
    """
    super(BertEncoder, self).__init__()
    self._bert_config = bert_config
    self._with_attention = with_attention
    self._variables = variables
    self._set_variables({k: v for k, v in variables.items() if k.startswith("bert/")})

  @tf.function
  def __call__(self, inputs, training=False):
    """Runs the encoder.

    Args:
      inputs: dict of int32 `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq].
      training: Python bool; dropout (as in the config) when True.

    Returns:
      dict: pooled_output [batch, hidden], sequence_output [batch, seq, hidden],
      encoder_outputs (list per layer), default (= pooled_output); with_attention:
      attention_scores / attention_probs (lists per layer, [batch, heads, seq, seq]).
    """
    with export_utils.in_variables(self._variables):
      outputs, _ = encoder_graph(self._bert_config, inputs, training, self._with_attention)
    return outputs

  @tf.function
  def serve(self, input_word_ids, input_mask, input_type_ids):
    """serving_default: the same outputs, lists flattened to encoder_outputs_<i> etc."""
    return _flatten_outputs(self(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                                      input_type_ids=input_type_ids), training=False))

  def trace(self):
    """Traces __call__ for training False/True; returns the serving signatures."""
    for training in (False, True):
      self.__call__.get_concrete_function(_encoder_specs(), training=training)
    specs = _encoder_specs()
    return {"serving_default": self.serve.get_concrete_function(
        *[specs[name] for name in ENCODER_INPUTS])}


class BertMaskedLM(_Reusable):
  """The `mlm` sub-object: the encoder inputs + masked_lm_positions -> mlm_logits."""

  def __init__(self, bert_config, variables):
    """Wraps existing variables (the encoder's and cls/predictions/*)."""
    super(BertMaskedLM, self).__init__()
    self._bert_config = bert_config
    self._variables = variables
    self._set_variables(variables)

  @tf.function
  def __call__(self, inputs, training=False):
    """Runs encoder and MLM head.

    Args:
      inputs: dict of int32 `input_word_ids`, `input_mask`, `input_type_ids` [batch, seq] and
        `masked_lm_positions` [batch, n].
      training: Python bool, dropout on.

    Returns:
      The encoder's outputs plus `mlm_logits` float [batch, n, vocab_size].
    """
    with export_utils.in_variables(self._variables):
      outputs, model = encoder_graph(self._bert_config, inputs, training)
      outputs["mlm_logits"] = mlm_logits_graph(
          self._bert_config, model.get_sequence_output(), model.get_embedding_table(),
          _int32(inputs["masked_lm_positions"]))
    return outputs

  def trace(self):
    for training in (False, True):
      self.__call__.get_concrete_function(_encoder_specs(True), training=training)


def build_encoder(bert_config, checkpoint_path, with_mlm=False, with_attention=False):
  """Creates the encoder module (and its `mlm` sub-object) from a checkpoint.

  Args:
    bert_config: modeling.BertConfig.
    checkpoint_path: checkpoint prefix (None: seeded random weights, --allow_random_eval).
    with_mlm: add `mlm` (needs cls/predictions/* in the checkpoint).
    with_attention: output attention scores and probabilities.

  Returns:
    (BertEncoder, signatures dict for tf.saved_model.save).
  """
  def build():
    inputs = {name: tf1.placeholder(tf.int32, [None, None]) for name in ENCODER_INPUTS}
    _, model = encoder_graph(bert_config, inputs)
    if with_mlm:
      mlm_logits_graph(bert_config, model.get_sequence_output(), model.get_embedding_table(),
                       tf1.placeholder(tf.int32, [None, None]))
  variables = export_utils.model_variables(build, checkpoint_path)
  encoder = BertEncoder(bert_config, variables, with_attention)
  signatures = encoder.trace()
  if with_mlm:
    encoder.mlm = BertMaskedLM(bert_config, variables)
    encoder.mlm.trace()
  return encoder, signatures


# ----------------------------------------------------------------------------------------------
# Preprocessor.


def clean_text(text):
  """The official BasicTokenizer text cleaning and CJK padding, as TF string ops.

  Args:
    text: string Tensor (any shape) of UTF-8 text.

  Returns:
    string Tensor: invalid UTF-8 dropped (as bytes.decode("utf-8", "ignore")), \\t \\n \\r and
    Zs as spaces, NUL / U+FFFD / Cc / Cf dropped, spaces around CJK ideographs.
  """
  text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
  text = tf.strings.regex_replace(text, r"[\t\n\r\p{Zs}]", " ")
  text = tf.strings.regex_replace(text, r"[\p{Cc}\p{Cf}\x{FFFD}]", "")
  return tf.strings.regex_replace(text, "(%s)" % export_utils.CJK_PATTERN, r" \1 ")


def lower_text(text, strip_accents):
  """Python-style str.lower(), then (WordPiece) NFD and removal of combining marks (Mn)."""
  text = tf.strings.lower(text, encoding="utf-8")
  if strip_accents:
    import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
    text = tf_text.normalize_utf8(text, "NFD")
    text = tf.strings.regex_replace(text, r"\p{Mn}", "")
  return text


def wordpiece_words(text, do_lower_case):
  """The official BasicTokenizer as TF ops: strings [batch] -> words RaggedTensor [batch, (w)].

  Words longer than MAX_CHARS_PER_WORD characters are replaced by "[UNK]" (which the WordPiece
  lookup maps to the [UNK] id), as the official WordpieceTokenizer does.

  Known differences from tokenization.BasicTokenizer (rare; measured on the shared corpus):
  the Unicode tables are ICU's / RE2's instead of Python's unicodedata (characters assigned in
  different Unicode versions can be classified differently), and lower-casing and accent
  stripping are applied to the whole text instead of per whitespace token (the same except
  for a few context-dependent mappings such as the Greek final sigma).

  Args:
    text: string Tensor [batch].
    do_lower_case: Python bool.

  Returns:
    string RaggedTensor [batch, (words)].
  """
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  text = clean_text(text)
  if do_lower_case:
    text = lower_text(text, strip_accents=True)
  punct = export_utils.PUNCT_PATTERN
  words = tf_text.regex_split(text, "%s|%s" % (export_utils.SPACE_PATTERN, punct), punct)
  too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
  return words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))


def pack_inputs(segments, seq_length, cls_id, sep_id, buckets=None):
  """BERT packing of one or two tokenized segments, truncated as run_classifier does.

  tensorflow_text.RoundRobinTrimmer hands out the budget one token per segment in turn, which
  leaves the same lengths as the official _truncate_seq_pair (drop from the longer segment,
  from segment B on a tie): both keep min(len, budget - other) with the budget split
  ceil/floor between A and B when both are long.

  Unlike tensorflow_text.combine_segments, an empty segment B adds no [SEP] (run_classifier's
  `if ids_b:`), so an empty `sentence2` packs like the official features.

  Args:
    segments: list of 1 or 2 int RaggedTensors [batch, (tokens)] or [batch, (words), (pieces)].
    seq_length: int or int32 scalar Tensor.
    cls_id: id of [CLS].
    sep_id: id of [SEP].
    buckets: (ours) None, or batch_padding.padding_buckets(seq_length): pad to the batch's
      longest packed input rounded up to one of these instead of seq_length (the inputs
      sliced: only padding is cut).

  Returns:
    dict of int32 input_word_ids, input_mask, input_type_ids [batch, seq_length] (buckets:
    [batch, bucket length]).
  """
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  if len(segments) not in (1, 2):
    raise ValueError("pack_inputs: 1 or 2 segments, got %d" % len(segments))
  flat = []
  for segment in segments:
    if segment.shape.rank == 3:
      segment = segment.merge_dims(-2, -1)
    flat.append(tf.cast(segment, tf.int32))
  budget = seq_length - (len(flat) + 1)
  trimmed = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(flat)
  nrows = trimmed[0].nrows()
  cls = tf.RaggedTensor.from_tensor(tf.fill([nrows, 1], tf.constant(cls_id, tf.int32)))
  sep = tf.RaggedTensor.from_tensor(tf.fill([nrows, 1], tf.constant(sep_id, tf.int32)))
  first = tf.concat([cls, trimmed[0], sep], axis=1)
  ids, type_ids = first, tf.zeros_like(first)
  if len(trimmed) == 2:
    # As run_classifier (and the official code): an empty segment B gets no [SEP] of its own.
    second_sep = tf.RaggedTensor.from_row_lengths(
        sep.flat_values[:tf.reduce_sum(tf.minimum(trimmed[1].row_lengths(), 1))],
        tf.minimum(trimmed[1].row_lengths(), 1))
    second = tf.concat([trimmed[1], second_sep], axis=1)
    ids = tf.concat([first, second], axis=1)
    type_ids = tf.concat([type_ids, tf.ones_like(second)], axis=1)
  if buckets:
    seq_length = batch_padding.padded_length(tf.reduce_max(ids.row_lengths()), seq_length,
                                             buckets=buckets)
  word_ids, mask = tf_text.pad_model_inputs(ids, max_seq_length=seq_length)
  type_ids, _ = tf_text.pad_model_inputs(type_ids, max_seq_length=seq_length)
  return {"input_word_ids": tf.cast(word_ids, tf.int32),
          "input_mask": tf.cast(mask, tf.int32),
          "input_type_ids": tf.cast(type_ids, tf.int32)}


class _Tokenize(tf.Module):
  """The `tokenize` sub-object: strings [batch] -> RaggedTensor of int32 token ids."""

  def __init__(self, tokenize_fn):
    super(_Tokenize, self).__init__()
    self._tokenize_fn = tokenize_fn

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, text):
    """WordPiece: [batch, (words), (pieces)]; SentencePiece: [batch, (pieces)]."""
    return self._tokenize_fn(text)


class _PackInputs(tf.Module):
  """The `bert_pack_inputs` sub-object: list of tokenized segments -> the encoder inputs."""

  def __init__(self, cls_id, sep_id, default_seq_length):
    super(_PackInputs, self).__init__()
    self._cls_id = cls_id
    self._sep_id = sep_id
    self._default_seq_length = default_seq_length

  @tf.function
  def __call__(self, segments, seq_length=None):
    """Packs [CLS] A [SEP] (B [SEP]) truncated to seq_length (int32 scalar, default --seq_length)."""
    if seq_length is None:
      seq_length = tf.constant(self._default_seq_length, tf.int32)
    return self._pack(list(segments), seq_length)

  @tf.function
  def _pack(self, segments, seq_length):
    return pack_inputs(segments, seq_length, self._cls_id, self._sep_id)

  def trace(self, ragged_rank):
    """Traces one- and two-segment calls with and without an explicit seq_length."""
    spec = tf.RaggedTensorSpec([None] + [None] * ragged_rank, tf.int32, ragged_rank=ragged_rank)
    for num_segments in (1, 2):
      segments = [spec] * num_segments
      # The call without seq_length reuses the traced _pack: one real trace per segment count.
      self.__call__.get_concrete_function(segments, tf.TensorSpec([], tf.int32))
      self.__call__.get_concrete_function(segments)


class BertPreprocessor(tf.Module):
  """The preprocessor SavedModel: strings [batch] -> encoder inputs [batch, seq_length]."""

  def __init__(self, vocab_file=None, do_lower_case=True, spm_model_file=None, seq_length=128,
               padding="max_length"):
    """Builds the tokenizer tables from the vocab (or SentencePiece model).

    Args:
      vocab_file: WordPiece vocab (one token a line, id = line number, as load_vocab).
      do_lower_case: lower-case (WordPiece: and strip accents).
      spm_model_file: SentencePiece model (then vocab_file is ignored).
      seq_length: default sequence length of __call__ and bert_pack_inputs.
      padding: (ours) __call__'s padding: "max_length" ([batch, seq_length]) or "bucket"
        (a call's longest input rounded up to batch_padding.padding_buckets from
        SERVING_SMALLEST_BUCKET; see pack_inputs).
    """
    super(BertPreprocessor, self).__init__()
    if padding not in ("max_length", "bucket"):
      raise ValueError("padding=%r: max_length or bucket" % padding)
    self._buckets = batch_padding.padding_buckets(
        seq_length, batch_padding.SERVING_SMALLEST_BUCKET) if padding == "bucket" else None
    import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
    reference = tokenization.FullTokenizer(vocab_file, do_lower_case, spm_model_file)
    cls_id, sep_id = reference.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    if spm_model_file and (reference.sp_model.IsUnknown(cls_id) or
                           reference.sp_model.IsUnknown(sep_id)):
      common.fail("--spm_model_file=%s: has no [CLS] / [SEP] pieces (build it with "
                  "build_vocab.py --model_type=sentencepiece)" % spm_model_file)
    self.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False, name="do_lower_case")
    self.seq_length = seq_length
    self.cls_id = int(cls_id)
    self.sep_id = int(sep_id)
    self.vocab_size = len(reference.vocab)
    lower = bool(do_lower_case)
    if spm_model_file:
      self.sp_model_file = tf.saved_model.Asset(spm_model_file)
      with tf.io.gfile.GFile(spm_model_file, "rb") as f:
        self._sp = tf_text.SentencepieceTokenizer(model=f.read(), out_type=tf.int32)

      def tokenize_fn(text):
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
        if lower:
          text = lower_text(text, strip_accents=False)
        return self._sp.tokenize(text)
      ragged_rank = 1
    else:
      self.vocab_file = tf.saved_model.Asset(vocab_file)
      # Keys and ids exactly as tokenization.load_vocab (stripped lines, id = line number).
      tokens = list(reference.vocab.keys())
      ids = [reference.vocab[t] for t in tokens]
      self._table = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(tf.constant(tokens), tf.constant(ids, tf.int64)),
          default_value=-1)
      unk = "[UNK]"
      if unk not in reference.vocab:
        common.fail("--vocab_file=%s: has no [UNK] token" % vocab_file)
      self._wordpiece = tf_text.WordpieceTokenizer(
          self._table, suffix_indicator="##", max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
          token_out_type=tf.int64, unknown_token=unk, split_unknown_characters=False)

      def tokenize_fn(text):
        words = wordpiece_words(text, lower)
        return tf.cast(self._wordpiece.tokenize(words), tf.int32)
      ragged_rank = 2
    self.tokenize = _Tokenize(tokenize_fn)
    self.bert_pack_inputs = _PackInputs(self.cls_id, self.sep_id, seq_length)
    self.bert_pack_inputs.trace(ragged_rank)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, text):
    """Single sentences [batch] -> dict of int32 [batch, seq_length] encoder inputs."""
    return pack_inputs([self.tokenize(text)], self.seq_length, self.cls_id, self.sep_id,
                       buckets=self._buckets)

  def signatures(self):
    return {"serving_default": self.__call__.get_concrete_function()}


# ----------------------------------------------------------------------------------------------
# Raw-text classifier.


def run_directories(checkpoint_path):
  """The run_classifier output directories that describe a checkpoint: its own directory, and
  for a --keep_best copy (<output_dir>/best/) the output directory above it too.

  Args:
    checkpoint_path: resolved checkpoint prefix (None gives []).

  Returns:
    list of directories, nearest first.
  """
  if not checkpoint_path:
    return []
  directory = _checkpoint_dir(checkpoint_path)
  directories = [directory]
  if (os.path.basename(os.path.normpath(directory)) == "best" and
      tf.io.gfile.exists(os.path.join(directory, "best.json"))):
    directories.append(os.path.dirname(os.path.normpath(directory)) or ".")
  return directories


def _read_json(path):
  """The JSON object in `path`, or None when it is missing or unreadable (records are hints)."""
  try:
    with tf.io.gfile.GFile(path) as f:
      value = json.load(f)
  except (ValueError, tf.errors.OpError):
    return None
  return value if isinstance(value, dict) else None


def recorded_classifier_task(checkpoint_path):
  """What a run_classifier output directory records about its task.

  run_classifier.py writes, beside its checkpoints: feature caches `<split>.tf_record.json`
  whose inputs.reader_options hold --task_type and --label_separator (--task_name=tsv);
  threshold.json (multi-label --tune_threshold); eval_results.json (eval_threshold and
  eval_micro_f1 only for multi-label tasks; long_document, doc_stride and window_pooling for
  --long_document=window); best/best.json (the main metric, micro_f1 for multi-label).

  Args:
    checkpoint_path: resolved checkpoint prefix.

  Returns:
    dict: task_type ("multilabel", "regression", "classification" or None when nothing says),
    evidence (the file that says so), label_separator (or None), tuned (threshold.json's dict
    or None), eval_threshold (float or None), windowing (--long_document=window: dict of
    doc_stride, window_pooling and path; else None).
  """
  found = {"task_type": None, "evidence": None, "label_separator": None, "tuned": None,
           "eval_threshold": None, "windowing": None}

  def note(task_type, path):
    if found["task_type"] is None or (task_type == "multilabel" and
                                      found["task_type"] != "multilabel"):
      found["task_type"], found["evidence"] = task_type, path

  for directory in run_directories(checkpoint_path):
    for path in sorted(tf.io.gfile.glob(os.path.join(directory, "*.tf_record.json"))):
      meta = _read_json(path) or {}
      options = (meta.get("inputs") or {}).get("reader_options") or {}
      if isinstance(options, dict) and options.get("task_type") in TASK_TYPES:
        note(options["task_type"], path)
        if options.get("label_separator") and found["label_separator"] is None:
          found["label_separator"] = options["label_separator"]
    path = os.path.join(directory, "threshold.json")
    tuned = _read_json(path) if tf.io.gfile.exists(path) else None
    if tuned is not None and found["tuned"] is None:
      found["tuned"] = dict(tuned, path=path)
      note("multilabel", path)
    path = os.path.join(directory, "eval_results.json")
    results = _read_json(path) if tf.io.gfile.exists(path) else None
    if results and ("eval_micro_f1" in results or "eval_threshold" in results):
      note("multilabel", path)
      if found["eval_threshold"] is None and isinstance(results.get("eval_threshold"),
                                                        (int, float)):
        found["eval_threshold"] = float(results["eval_threshold"])
    if (results and results.get("long_document") == "window" and found["windowing"] is None and
        isinstance(results.get("doc_stride"), int) and
        results.get("window_pooling") in WINDOW_POOLINGS):
      found["windowing"] = {"doc_stride": results["doc_stride"],
                            "window_pooling": results["window_pooling"], "path": path}
    path = os.path.join(directory, "best", "best.json")
    best = _read_json(path) if tf.io.gfile.exists(path) else None
    if best and best.get("metric") == "micro_f1":
      note("multilabel", path)
  return found


def classifier_head_size(checkpoint_path):
  """num_labels of a run_classifier checkpoint's head (output_bias), or a one-line error."""
  shapes = dict(tf.train.list_variables(checkpoint_path))
  if "output_bias" not in shapes or "output_weights" not in shapes:
    common.fail("--init_checkpoint=%s: no output_weights / output_bias (not a run_classifier "
                "checkpoint)" % checkpoint_path)
  return shapes["output_bias"][0]


def resolve_classifier_task(checkpoint_path, label_list=None, task_type=None, threshold=None):
  """The task a classifier export serves: its type, labels and (multi-label) threshold.

  The task type comes from --task_type, else from what the checkpoint's output directory
  records (recorded_classifier_task), else from the head (one output: regression). A
  --task_type that contradicts the records is an error: a multi-label head exported as a
  softmax classifier would serve wrong probabilities.

  Args:
    checkpoint_path: resolved checkpoint prefix, or None (random weights: the labels come from
      label_list).
    label_list: --label_list (comma-separated) or None.
    task_type: --task_type or None.
    threshold: --multilabel_threshold or None.

  Returns:
    dict: task_type, num_labels, labels (None for regression), threshold and threshold_source
    (multi-label; else None), label_separator (multi-label), evidence (the record used).
  """
  recorded = recorded_classifier_task(checkpoint_path)
  if task_type and recorded["task_type"] and task_type != recorded["task_type"]:
    common.fail("--task_type=%s: the checkpoint's run was a %s task (%s)" %
                (task_type, recorded["task_type"], recorded["evidence"]))
  kind = task_type or recorded["task_type"]
  if checkpoint_path:
    num_labels = classifier_head_size(checkpoint_path)
  elif kind == "regression":
    num_labels = 1
  else:
    if not label_list:
      common.fail("--label_list is required for a classifier from random weights "
                  "(--allow_random_eval and no --init_checkpoint): it gives the classes")
    num_labels = len([x for x in label_list.split(",") if x.strip()])
  kind = kind or ("regression" if num_labels == 1 else "classification")
  if kind == "regression" and num_labels != 1:
    common.fail("--task_type=regression: the checkpoint's head has %d outputs (regression has "
                "1)" % num_labels)
  if threshold is not None and kind != "multilabel":
    common.fail("--multilabel_threshold=%g: only for a multi-label classifier (this one is %s)"
                % (threshold, kind))
  task = {"task_type": kind, "num_labels": num_labels, "evidence": recorded["evidence"],
          "labels": None if kind == "regression" else read_label_names(
              label_list, checkpoint_path, num_labels),
          "threshold": None, "threshold_source": None, "label_separator": None}
  if kind == "multilabel":
    task["label_separator"] = recorded["label_separator"] or ","
    step = checkpoint_utils.checkpoint_step(checkpoint_path) if checkpoint_path else None
    tuned = recorded["tuned"]
    tuned_here = bool(tuned) and tuned.get("checkpoint_step") == step and isinstance(
        tuned.get("threshold"), (int, float))
    if threshold is not None:
      source = "--multilabel_threshold"
    elif tuned_here:
      threshold, source = float(tuned["threshold"]), "%s (tuned on dev)" % tuned["path"]
    else:
      if tuned:
        tf1.logging.warning("%s was tuned for the checkpoint of step %s, not this one (step "
                            "%s): not used", tuned["path"], tuned.get("checkpoint_step"), step)
      if recorded["eval_threshold"] is not None:
        threshold, source = recorded["eval_threshold"], "eval_threshold of eval_results.json"
      else:
        threshold, source = DEFAULT_MULTILABEL_THRESHOLD, "default"
    if not 0.0 <= threshold <= 1.0:
      common.fail("--multilabel_threshold=%g: must be in [0, 1]" % threshold)
    task.update(threshold=float(threshold), threshold_source=source)
  return task


def resolve_windowing(checkpoint_path, seq_length, pair_input=False, long_document=None,
                      doc_stride=None, window_pooling=None):
  """How a classifier export treats texts longer than seq_length: truncate, or windows.

  --long_document, else what the checkpoint's run records (eval_results.json of a
  --long_document=window run: its stride and pooling), else truncate. The stride defaults to
  the run's, else half a window, as run_classifier's; one larger than the window would skip
  text and is refused, as there.

  Args:
    checkpoint_path: resolved checkpoint prefix, or None.
    seq_length: the export's sequence length.
    pair_input: serving_default takes sentence pairs (the window is what text_b leaves).
    long_document: --long_document ("truncate" / "window") or None (the run's).
    doc_stride: --doc_stride or None.
    window_pooling: --window_pooling or None.

  Returns:
    (doc_stride or None for truncation, window pooling, where the windowing comes from).
  """
  recorded = recorded_classifier_task(checkpoint_path)["windowing"] if checkpoint_path else None
  mode = long_document or ("window" if recorded else "truncate")
  if mode == "truncate":
    for name, value in (("doc_stride", doc_stride), ("window_pooling", window_pooling)):
      if value is not None:
        common.fail("--%s=%s: only with --long_document=window" % (name, value))
    return None, "mean", "--long_document=truncate" if long_document else "default"
  recorded = recorded or {}
  window = seq_length - 2
  if pair_input:
    window = (seq_length - 3) - (seq_length - 3) // 2
  if window < 1:
    common.fail("--long_document=window: --seq_length=%d leaves no room for a window" %
                seq_length)
  source = "flags"
  if doc_stride is None:
    doc_stride = recorded.get("doc_stride") or max(1, window // 2)
    source = recorded.get("path") or "default"
  if doc_stride < 1:
    common.fail("--doc_stride=%d: must be >= 1" % doc_stride)
  if doc_stride > window:
    common.fail("--doc_stride=%d%s: larger than the window (%d tokens of text_a at "
                "--seq_length=%d), which would skip text between windows" % (
                    doc_stride, "" if source == "flags" else " (%s)" % source, window,
                    seq_length))
  return doc_stride, window_pooling or recorded.get("window_pooling") or "mean", source


def read_label_names(label_list, checkpoint_path, num_labels):
  """Label names: --label_list, else labels.txt beside the checkpoint (run_classifier), else ids.

  Args:
    label_list: comma-separated names or None.
    checkpoint_path: resolved checkpoint prefix (a --keep_best copy: labels.txt of its run).
    num_labels: number of classes in the checkpoint's output_bias.

  Returns:
    list of num_labels strings.
  """
  if label_list:
    names = [x.strip() for x in label_list.split(",") if x.strip()]
    source = "--label_list=%s" % label_list
  else:
    candidates = [os.path.join(d, "labels.txt") for d in run_directories(checkpoint_path)]
    path = ([c for c in candidates if tf.io.gfile.exists(c)] + candidates + [None])[0]
    if path is None or not tf.io.gfile.exists(path):
      tf1.logging.warning("No --label_list and no %s: label names are the class ids", path)
      return [str(i) for i in range(num_labels)]
    with tf.io.gfile.GFile(path) as f:
      names = [x.rstrip("\n") for x in f if x.strip()]
    source = path
  if len(names) != num_labels:
    common.fail("%s: %d labels, but the checkpoint's output_bias has %d classes" %
                (source, len(names), num_labels))
  return names


def document_windows(tokens_a, tokens_b, seq_length, doc_stride):
  """run_classifier's --long_document=window over tokenized texts, as TF ops.

  classifier_features.convert_example_to_windows in a graph: text_b (when given) is cut to
  (seq_length - 3) // 2 tokens and kept in every window; text_a is cut into windows of
  seq_length - 2 tokens (with a text_b: seq_length - 3 - its length), doc_stride apart (capped
  at the window), the last one ending at the text's end (sliding_window.windows; an empty text
  is one empty window).

  Args:
    tokens_a: int32 RaggedTensor [batch, (tokens)].
    tokens_b: int32 RaggedTensor [batch, (tokens)], or None (single texts).
    seq_length: Python int, the packed length (>= 4).
    doc_stride: Python int >= 1, tokens between window starts.

  Returns:
    (windows_a int32 RaggedTensor [windows, (tokens)]; windows_b, the window's document's
    text_b [windows, (tokens)], or None; documents int32 [windows]: the batch row each window
    comes from, ascending).
  """
  num_tokens = tokens_a.row_lengths()
  if tokens_b is not None:
    tokens_b = tokens_b[:, :(seq_length - 3) // 2]
    window_length = (seq_length - 3) - tokens_b.row_lengths()
  else:
    window_length = tf.fill(tf.shape(num_tokens), tf.constant(seq_length - 2, num_tokens.dtype))
  step = tf.minimum(window_length, doc_stride)
  # A text that fits is one window; else windows start at 0, step, 2 step, ... until one
  # reaches the end.
  num_windows = tf.where(num_tokens <= window_length, tf.ones_like(num_tokens),
                         (num_tokens - window_length + step - 1) // step + 1)
  documents = tf.repeat(tf.range(tf.size(num_tokens, out_type=num_tokens.dtype)), num_windows)
  starts = tf.ragged.range(num_windows).flat_values * tf.gather(step, documents)
  lengths = tf.minimum(tf.gather(num_tokens, documents) - starts,
                       tf.gather(window_length, documents))
  offsets = tf.gather(tokens_a.row_starts(), documents) + starts
  positions = tf.ragged.range(offsets, offsets + lengths).flat_values
  windows_a = tf.RaggedTensor.from_row_lengths(tf.gather(tokens_a.flat_values, positions),
                                               lengths)
  windows_b = None if tokens_b is None else tf.gather(tokens_b, documents)
  return windows_a, windows_b, tf.cast(documents, tf.int32)


def pool_windows(logits, documents, num_documents, pooling):
  """A document's window logits pooled per class, as classifier_outputs.pool_window_outputs.

  Args:
    logits: float32 [windows, num_labels].
    documents: int32 [windows], the document of each window (every document has one or more).
    num_documents: int32 scalar.
    pooling: "mean" or "max".

  Returns:
    float32 [num_documents, num_labels].
  """
  if pooling == "mean":
    return tf.math.unsorted_segment_mean(logits, documents, num_documents)
  return tf.math.unsorted_segment_max(logits, documents, num_documents)


def _token_ids(tokens):
  """[batch, (words), (pieces)] (WordPiece) or [batch, (pieces)] -> int32 [batch, (tokens)]."""
  if tokens.shape.rank == 3:
    tokens = tokens.merge_dims(-2, -1)
  return tf.cast(tokens, tf.int32)


class BertClassifier(tf.Module):
  """The classifier SavedModel: preprocessor + encoder + run_classifier's head.

  Raw text in (serving_default / serving_single / serving_pair), and the integer inputs of a
  client that tokenises itself (ID_SIGNATURE, `serving_ids`): one model, one set of weights.
  """

  def __init__(self, bert_config, variables, preprocessor, label_names, is_regression,
               is_multilabel=False, threshold=DEFAULT_MULTILABEL_THRESHOLD,
               label_separator=",", padding="bucket", doc_stride=None,
               window_pooling="mean"):
    """Wraps existing variables (bert/*, output_weights, output_bias).

    Args:
      bert_config: modeling.BertConfig.
      variables: dict name -> tf.Variable.
      preprocessor: BertPreprocessor.
      label_names: list of class names (ignored for regression).
      is_regression: one output `predictions` instead of probabilities.
      is_multilabel: a sigmoid per label (run_classifier --task_type=multilabel) instead of
        the softmax.
      threshold: multi-label: a label is predicted when its probability is >= this.
      label_separator: multi-label: joins the names in `predicted_label_names`.
      padding: (ours) "bucket": a request's texts are packed to their longest rounded up to
        batch_padding.padding_buckets(seq_length, SERVING_SMALLEST_BUCKET) (only padding is
        cut: the outputs equal the fixed-length ones to float rounding); "max_length": to the
        preprocessor's seq_length.
      doc_stride: (ours) None: a text longer than seq_length is truncated (run_classifier's
        --long_document=truncate); else the raw-text signatures cut text_a into windows this
        many tokens apart and pool their logits (--long_document=window, document_windows).
        The id signature always scores the one window it is given.
      window_pooling: with doc_stride, how a text's window logits are pooled: "mean" or "max".
    """
    super(BertClassifier, self).__init__()
    if padding not in ("max_length", "bucket"):
      raise ValueError("padding=%r: max_length or bucket" % padding)
    if window_pooling not in WINDOW_POOLINGS:
      raise ValueError("window_pooling=%r: one of %s" % (window_pooling, WINDOW_POOLINGS))
    if doc_stride is not None:
      if doc_stride < 1:
        common.fail("--doc_stride=%d: must be >= 1" % doc_stride)
      if preprocessor.seq_length < 4:
        common.fail("--long_document=window: a sequence length of %d leaves a sentence pair "
                    "no room for a window" % preprocessor.seq_length)
    self._buckets = batch_padding.padding_buckets(
        preprocessor.seq_length, batch_padding.SERVING_SMALLEST_BUCKET) if (
            padding == "bucket") else None
    self._bert_config = bert_config
    self._variables = variables
    self.preprocessor = preprocessor
    self.is_regression = is_regression
    self.is_multilabel = bool(is_multilabel)
    self.doc_stride = doc_stride
    self.window_pooling = window_pooling
    self.label_names = tf.Variable(label_names or [""], trainable=False, name="label_names")
    if self.is_multilabel:
      self.threshold = tf.Variable(float(threshold), trainable=False, name="threshold")
      self.label_separator = label_separator

  def _logits(self, encoder_inputs):
    """run_classifier.create_model's logits in inference mode: float32 [batch, num_labels]."""
    with export_utils.in_variables(self._variables):
      outputs, _ = encoder_graph(self._bert_config, encoder_inputs)
      output_weights = tf1.get_variable("output_weights")
      output_bias = tf1.get_variable("output_bias")
    return tf.nn.bias_add(
        tf.matmul(outputs["pooled_output"], output_weights, transpose_b=True), output_bias)

  def _id_outputs(self, logits):
    """The id signature's outputs (run_classifier's integer export): probabilities and
    predicted_label; regression: predictions; multi-label: probabilities, predicted_labels."""
    if self.is_regression:
      return {"predictions": tf.squeeze(logits, axis=-1)}
    if self.is_multilabel:
      # As run_classifier's multi-label head: independent sigmoids, a label is predicted at
      # probability >= threshold.
      probabilities = tf.nn.sigmoid(logits)
      return {"probabilities": probabilities,
              "predicted_labels": tf.cast(
                  probabilities >= tf.convert_to_tensor(self.threshold), tf.int32)}
    probabilities = tf.nn.softmax(logits, axis=-1)
    return {"probabilities": probabilities,
            "predicted_label": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}

  def _outputs(self, logits):
    """The raw-text signatures' outputs: the id outputs and the labels by name."""
    outputs = self._id_outputs(logits)
    if self.is_regression:
      return outputs
    names = tf.convert_to_tensor(self.label_names)
    # Tiled to [batch, num_labels] so every output has the batch dimension first.
    tiled = tf.tile(names[tf.newaxis, :], [tf.shape(logits)[0], 1])
    outputs["label_names"] = tiled
    if self.is_multilabel:
      # The names joined as in run_classifier's predictions.tsv.
      outputs["predicted_label_names"] = tf.strings.reduce_join(
          tf.ragged.boolean_mask(tiled, outputs["predicted_labels"] > 0), axis=-1,
          separator=self.label_separator)
    else:
      outputs["predicted_label_name"] = tf.gather(names, outputs["predicted_label"])
    return outputs

  def _packed(self, inputs):
    """(encoder inputs of every row, the text of each row or None): see encoder_inputs."""
    segments = [_token_ids(self.preprocessor.tokenize(inputs["sentence"]))]
    if "sentence2" in inputs:
      segments.append(_token_ids(self.preprocessor.tokenize(inputs["sentence2"])))
    documents = None
    if self.doc_stride is not None:
      windows_a, windows_b, documents = document_windows(
          segments[0], segments[1] if len(segments) == 2 else None, self.preprocessor.seq_length,
          self.doc_stride)
      segments = [windows_a] + ([windows_b] if windows_b is not None else [])
    packed = pack_inputs(segments, self.preprocessor.seq_length, self.preprocessor.cls_id,
                         self.preprocessor.sep_id, buckets=self._buckets)
    return packed, documents

  def encoder_inputs(self, inputs):
    """The packed encoder inputs of a request (run eagerly or inside __call__'s graph).

    Args:
      inputs: dict with string `sentence` [batch] and optional `sentence2` [batch].

    Returns:
      dict of int32 input_word_ids, input_mask, input_type_ids [rows, length]: a row per text
      (with doc_stride: per window); length is seq_length, or with padding "bucket" the bucket
      of the request's longest packed input.
    """
    return self._packed(inputs)[0]

  @tf.function
  def __call__(self, inputs):
    """inputs: dict with string `sentence` [batch] and optional `sentence2` [batch]."""
    encoder_inputs, documents = self._packed(inputs)
    logits = self._logits(encoder_inputs)
    if documents is not None:
      logits = pool_windows(logits, documents, tf.shape(inputs["sentence"])[0],
                            self.window_pooling)
    return self._outputs(logits)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentence")])
  def serve_single(self, sentence):
    return self({"sentence": sentence})

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentence"),
                                tf.TensorSpec([None], tf.string, name="sentence2")])
  def serve_pair(self, sentence, sentence2):
    return self({"sentence": sentence, "sentence2": sentence2})

  @tf.function
  def serve_ids(self, input_ids, input_mask, segment_ids):
    """The id signature: run_classifier's integer SavedModel, on the same weights.

    Args:
      input_ids: int32 [batch, seq_length] (tokenization.FullTokenizer +
        run_classifier.convert_single_example); ids outside [0, vocab_size) fail the request.
      input_mask: int32 [batch, seq_length].
      segment_ids: int32 [batch, seq_length]; outside [0, type_vocab_size) fails the request.

    Returns:
      probabilities [batch, num_labels] and predicted_label [batch] (regression: predictions
      [batch]; multi-label: probabilities and predicted_labels [batch, num_labels]).
    """
    checked = export_utils.range_checked(
        {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
        self._bert_config)
    return self._id_outputs(self._logits({"input_word_ids": checked["input_ids"],
                                          "input_mask": checked["input_mask"],
                                          "input_type_ids": checked["segment_ids"]}))

  def signatures(self, pair_input):
    """serving_default (pair_input: serving_pair, else serving_single), serving_single,
    serving_pair and ID_SIGNATURE."""
    single = self.serve_single.get_concrete_function()
    pair = self.serve_pair.get_concrete_function()
    ids = self.serve_ids.get_concrete_function(
        *[tf.TensorSpec([None, self.preprocessor.seq_length], tf.int32, name=name)
          for name in ID_INPUTS])
    return {"serving_default": pair if pair_input else single,
            "serving_single": single, "serving_pair": pair, ID_SIGNATURE: ids}


def build_classifier(bert_config, checkpoint_path, preprocessor, label_list=None, task=None,
                     padding="bucket", doc_stride=None, window_pooling="mean"):
  """Creates the classifier module from a run_classifier checkpoint.

  Args:
    bert_config: modeling.BertConfig.
    checkpoint_path: checkpoint prefix with bert/*, output_weights, output_bias (None: seeded
      random weights, --allow_random_eval; the classes come from label_list).
    preprocessor: BertPreprocessor for the checkpoint's vocab.
    label_list: comma-separated label names or None.
    task: resolve_classifier_task's dict, or None to resolve it here (from the records of the
      checkpoint's run: a multi-label run gives a multi-label classifier).
    padding: BertClassifier's ("bucket" or "max_length").
    doc_stride: BertClassifier's (None: truncate long texts; else windows this far apart).
    window_pooling: BertClassifier's ("mean" or "max").

  Returns:
    (BertClassifier, is_regression, label names).
  """
  if checkpoint_path:
    classifier_head_size(checkpoint_path)   # a run_classifier checkpoint, or one line
  task = task or resolve_classifier_task(checkpoint_path, label_list)
  num_labels = task["num_labels"]
  is_regression = task["task_type"] == "regression"
  if preprocessor.vocab_size > bert_config.vocab_size:
    common.fail("vocab has %d entries but vocab_size=%d in the BERT config" %
                (preprocessor.vocab_size, bert_config.vocab_size))

  def build():
    inputs = {name: tf1.placeholder(tf.int32, [None, None]) for name in ENCODER_INPUTS}
    outputs, _ = encoder_graph(bert_config, inputs)
    # run_classifier.create_model's initializers (used only for random weights).
    tf1.get_variable("output_weights", [num_labels, bert_config.hidden_size],
                     initializer=tf1.truncated_normal_initializer(stddev=0.02))
    tf1.get_variable("output_bias", [num_labels], initializer=tf1.zeros_initializer())
    return outputs
  variables = export_utils.model_variables(build, checkpoint_path)
  names = task["labels"]
  classifier = BertClassifier(
      bert_config, variables, preprocessor, names, is_regression,
      is_multilabel=task["task_type"] == "multilabel",
      threshold=task["threshold"] if task["threshold"] is not None
      else DEFAULT_MULTILABEL_THRESHOLD, label_separator=task["label_separator"] or ",",
      padding=padding, doc_stride=doc_stride, window_pooling=window_pooling)
  return classifier, is_regression, names


# ----------------------------------------------------------------------------------------------
# Saving.


def export_encoder(bert_config, checkpoint_path, export_dir, with_mlm=False,
                   with_attention=False, overwrite=False, protected_paths=()):
  """Writes the encoder SavedModel (and export_info.json). Returns the export directory.

  Args:
    bert_config: modeling.BertConfig.
    checkpoint_path: checkpoint prefix, or None for seeded random weights (the caller checked
      --allow_random_eval).
    export_dir: the SavedModel directory (new, or an earlier export of ours with overwrite).
    with_mlm: add the `mlm` sub-object.
    with_attention: also output the attention scores and probabilities.
    overwrite: replace an earlier export of ours.
    protected_paths: more paths the export must never replace (inputs, checkpoint files).
  """
  protected = [checkpoint_path] + list(protected_paths)
  common.check_export_dir(export_dir, "export_dir", overwrite, protected)
  encoder, signatures = build_encoder(bert_config, checkpoint_path, with_mlm, with_attention)
  extra = {"bert_config.json": bert_config.to_json_string(),
           EXPORT_INFO: export_info("encoder", checkpoint_path, with_mlm=bool(with_mlm),
                                    with_attention=bool(with_attention))}
  export_utils.save_atomically(encoder, export_dir, signatures, extra, overwrite, protected)
  tf1.logging.info("Exported encoder from %s to %s (%d variables%s%s)",
                   checkpoint_path or "random weights", export_dir, len(encoder.variables),
                   ", mlm" if with_mlm else "", ", attention" if with_attention else "")
  return export_dir


def export_preprocessor(export_dir, vocab_file=None, do_lower_case=True, spm_model_file=None,
                        seq_length=128, overwrite=False, protected_paths=(),
                        padding="max_length"):
  """Writes the preprocessor SavedModel (padding: BertPreprocessor's). Returns export_dir."""
  protected = [vocab_file, spm_model_file] + list(protected_paths)
  common.check_export_dir(export_dir, "export_dir", overwrite, protected)
  preprocessor = BertPreprocessor(vocab_file, do_lower_case, spm_model_file, seq_length,
                                  padding=padding)
  export_utils.save_atomically(preprocessor, export_dir, preprocessor.signatures(), None,
                               overwrite, protected)
  tf1.logging.info("Exported preprocessor (%s, lower_case=%s, seq_length=%d) to %s",
                   spm_model_file or vocab_file, do_lower_case, seq_length, export_dir)
  return export_dir


def export_classifier(bert_config, checkpoint_path, export_dir, vocab_file=None,
                      do_lower_case=True, spm_model_file=None, seq_length=128, label_list=None,
                      pair_input=False, overwrite=False, task=None, protected_paths=(),
                      padding="bucket", doc_stride=None, window_pooling="mean",
                      extra_files=None):
  """Writes the classifier SavedModel (and export_info.json). Returns the directory.

  Signatures: serving_default (raw text: `sentence`, with pair_input also `sentence2`),
  serving_single, serving_pair, and ID_SIGNATURE (`serving_ids`: int32 input_ids, input_mask,
  segment_ids [batch, seq_length], the outputs of run_classifier's former integer export).

  Args:
    bert_config: modeling.BertConfig.
    checkpoint_path: run_classifier checkpoint prefix, or None for seeded random weights.
    export_dir: the SavedModel directory.
    vocab_file: WordPiece vocab (or spm_model_file).
    do_lower_case: lower-case the text.
    spm_model_file: SentencePiece model or None.
    seq_length: sequence length of the packed inputs (and of the id signature's inputs).
    label_list: comma-separated label names or None.
    pair_input: serving_default takes sentence pairs.
    overwrite: replace an earlier export of ours.
    task: resolve_classifier_task's dict, or None to resolve it from the checkpoint's run
      (a multi-label run exports sigmoid probabilities and its threshold).
    protected_paths: more paths the export must never replace.
    padding: (ours) "bucket" (a request packed to its longest, bucketed) or "max_length" (to
      seq_length); see BertClassifier.
    doc_stride: (ours) None (long texts truncated) or the stride of the raw-text signatures'
      windows (run_classifier --long_document=window); see BertClassifier.
    window_pooling: (ours) with doc_stride: "mean" or "max".
    extra_files: (ours) more files beside the SavedModel, {name: str or bytes}.
  """
  protected = [checkpoint_path, vocab_file, spm_model_file] + list(protected_paths)
  common.check_export_dir(export_dir, "export_dir", overwrite, protected)
  if seq_length > bert_config.max_position_embeddings:
    common.fail("--seq_length=%d is longer than max_position_embeddings=%d" %
                (seq_length, bert_config.max_position_embeddings))
  if checkpoint_path:
    classifier_head_size(checkpoint_path)
  task = task or resolve_classifier_task(checkpoint_path, label_list)
  preprocessor = BertPreprocessor(vocab_file, do_lower_case, spm_model_file, seq_length)
  classifier, is_regression, names = build_classifier(
      bert_config, checkpoint_path, preprocessor, label_list, task, padding=padding,
      doc_stride=doc_stride, window_pooling=window_pooling)
  signatures = classifier.signatures(pair_input)
  windowing = {}
  if doc_stride is not None:
    windowing = dict(long_document="window", doc_stride=int(doc_stride),
                     window_pooling=window_pooling)
  extra = {"bert_config.json": bert_config.to_json_string(),
           EXPORT_INFO: export_info(
               "classifier", checkpoint_path, task_type=task["task_type"], labels=names,
               threshold=task["threshold"], threshold_source=task["threshold_source"],
               label_separator=task["label_separator"], task_evidence=task["evidence"],
               outputs=sorted(signatures["serving_single"].structured_outputs),
               id_signature=ID_SIGNATURE,
               id_outputs=sorted(signatures[ID_SIGNATURE].structured_outputs),
               seq_length=int(seq_length), pair_input=bool(pair_input), padding=padding,
               **windowing)}
  if names:
    extra["labels.txt"] = "".join(name + "\n" for name in names)
  extra.update(extra_files or {})
  export_utils.save_atomically(classifier, export_dir, signatures, extra, overwrite, protected)
  if is_regression:
    what = "regressor"
  elif task["task_type"] == "multilabel":
    what = "multi-label classifier (labels %s; threshold %g from %s)" % (
        ", ".join(names), task["threshold"], task["threshold_source"])
  else:
    what = "classifier (labels %s)" % ", ".join(names)
  tf1.logging.info("Exported %s from %s to %s (signatures %s)", what,
                   checkpoint_path or "random weights", export_dir, ", ".join(sorted(signatures)))
  return export_dir
