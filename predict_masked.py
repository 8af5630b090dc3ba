# coding=utf-8
r"""Fill-mask prediction: the top-k word pieces for every [MASK] of a sentence, from the MLM head.

    python predict_masked.py --init_checkpoint=out/realformer --vocab_file=data/vocab.txt \
      --text="the man went to the [MASK] to buy milk ." [--text=...] [--top_k=5] \
      [--output_file=predictions.jsonl]
    python predict_masked.py --input_file=sentences.txt --hub_encoder=hub/encoder \
      --vocab_file=data/vocab.txt

The model: a pre-training checkpoint with the masked-LM head `cls/predictions/*` (ours from
run_pretraining.py, an official Google BERT one, or a Hugging Face *ForMaskedLM / *ForPreTraining
model converted with convert_hf_checkpoint.py), run in a tf.compat.v1 Session with
modeling.BertModel and modeling.masked_lm_logits (the head run_pretraining.py trains and the
exporters serve); or, with --hub_encoder, an encoder exported by
`export_hub.py --mode=encoder --with_mlm` (its `mlm` sub-object), which gives the same answers.
Fine-tuned checkpoints (run_classifier.py, run_squad.py) and encoder-only conversions (e.g.
sentence-transformers models such as all-MiniLM-L6-v2) have no MLM head: a one-line error says so.

Input: one sentence per line of --input_file (blank lines are skipped; line numbers in messages
and in the output are the file's, 1-based), or one or more --text flags. A sentence is a single
segment (no "text_a ||| text_b" pairs: a line holding "|||" is refused). Every sentence needs at
least one `[MASK]`, written exactly so (capitals, brackets). The text between masks is tokenized
with the checkpoint's WordPiece tokenizer as separate words (brackets are punctuation for BERT, so
text touching a [MASK] never becomes a `##` continuation of it), then [CLS] ... [SEP]. A sentence
longer than --max_seq_length word pieces (default: the model's max_position_embeddings) is an
error, never truncated (truncation could drop a [MASK]).

Prediction, and how pieces become words (WordPiece "##" rule):
  - All [MASK]s of a sentence are predicted together in one forward pass, each position with its
    own softmax over the whole vocabulary (as in BERT pre-training): `candidates` are the top-k
    word pieces of that position, most probable first, with their probabilities (they sum to at
    most 1; special tokens are not filtered out).
  - `joined`: for each run of consecutive [MASK] positions, the word(s) its argmax pieces form: a
    piece starting with "##" continues the word before it (the previous mask's piece, or for the
    first mask of a run the input word before the run), any other piece starts a new word. So
    "[MASK] [MASK]" -> play, ##ing gives "playing"; -> new, york gives "new york"; "the walk
    [MASK]" -> ##ing gives "walking". Printed when it joins something (runs of two or more
    masks, or a leading "##" piece); always in the JSON.
  - `filled`: the input text with each [MASK] replaced by its argmax piece: a "##" piece is glued
    to the text before it (whitespace dropped, "##" removed), any other piece replaces the
    [MASK] as a word (a space is put between two [MASK]s written without one). The rest of the
    text is kept as given (not lower-cased).

Output: human-readable lines on stdout; with --output_file, also JSON lines (written under a
temporary name, renamed when complete), one per sentence:

    {"line": 3, "text": "...", "tokens": ["[CLS]", ..., "[SEP]"],
     "masks": [{"position": 5, "candidates": [{"token": "store", "probability": 0.41}, ...]}],
     "joined": [{"positions": [5], "word": "store"}], "filled": "..."}

`line` is the 1-based line of --input_file (or the 1-based index of the --text flag) and
`position` the index of the [MASK] in `tokens` (0 is [CLS]), as masked_lm_positions.

--padding=longest | max_length | bucket (batch_padding.define_padding_flag; default longest):
how long a batch's sequences are, with --init_checkpoint and --hub_encoder alike. longest: the
batch's longest sentence rounded up to a multiple of 8 (at most --max_seq_length); max_length:
every batch to --max_seq_length (the official full padding; by default the model's
max_position_embeddings, so slow); bucket: the longest rounded up to 32, 64, ... or
--max_seq_length (batch_padding.padding_buckets: few shapes). Padding is masked out of
attention, so the probabilities are the same to float32 round-off (< 1e-5) whichever is used;
batches and the output order are the same too. The summary line says how many positions were
computed for how many word pieces.
Beside it, `<output_file>.checkpoint.json` records the weights: {"checkpoint": prefix,
"global_step": N} (for --hub_encoder: those its export_info.json names, and "hub_encoder").
The output and its sidecar are renamed into place together; both are checked before any work
against every input (sentences, vocab, config, every checkpoint file of the model's directory,
every file of --hub_encoder).

No trained weights (no --init_checkpoint / --hub_encoder, or an encoder exported from random
weights) stop with one line unless --allow_random_eval (then --bert_config_file and
--vocab_file are required and the weights are a seeded random initialisation).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import contextlib
import json
import os
import sys

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import batch_padding
from realformer_tf import serving
from realformer_tf import export_utils
from realformer_tf import batch_inference
from realformer_tf import model_config
import modeling
import tokenization

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

MASK = "[MASK]"
PAIR_SEPARATOR = "|||"
# The masked-LM head's variables (modeling.masked_lm_logits).
MLM_HEAD_SCOPE = "cls/predictions/"
NO_MLM_HEAD = ("has no masked-LM head (no cls/predictions/* variables), so it cannot fill masks: "
               "use a pre-training checkpoint (run_pretraining.py, an official BERT one, or a "
               "converted Hugging Face *ForMaskedLM / *ForPreTraining model); fine-tuned "
               "checkpoints (run_classifier.py, run_squad.py) and encoder-only models (e.g. "
               "sentence-transformers) have none")


def define_flags():
  """Defines the tool's flags (not at import time, so tests and other tools can import it)."""
  flags.DEFINE_string("input_file", None,
                      "Text file, one sentence with [MASK]s per line (blank lines skipped).")
  flags.DEFINE_multi_string("text", None,
                            "A sentence with [MASK]s (repeat the flag for several); instead of "
                            "--input_file.")
  flags.DEFINE_string("output_file", None, "Also write JSON lines here (optional).")
  flags.DEFINE_string("init_checkpoint", None,
                      "Pre-training checkpoint prefix or model directory (its latest "
                      "checkpoint), with the MLM head cls/predictions/*.")
  flags.DEFINE_string("hub_encoder", None,
                      "Instead of --init_checkpoint: a SavedModel written by export_hub.py "
                      "--mode=encoder --with_mlm.")
  flags.DEFINE_string("bert_config_file", None,
                      "bert_config.json (default: the one beside --init_checkpoint, or in "
                      "--hub_encoder's directory).")
  flags.DEFINE_string("vocab_file", None,
                      "WordPiece vocab the model was trained with (default: vocab.txt beside "
                      "--init_checkpoint when there is one).")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case (and strip accents from) the input.")
  flags.DEFINE_integer("max_seq_length", None,
                       "Longest sentence in word pieces, [CLS] and [SEP] included; a longer "
                       "one is an error (never truncated). Default: the model's "
                       "max_position_embeddings. Batches are padded as --padding says.")
  flags.DEFINE_integer("top_k", 5, "Candidates shown per [MASK].")
  flags.DEFINE_integer("batch_size", 32, "Sentences per forward pass.")
  model_config.define_model_override_flags()
  checkpoint_utils.define_trained_weights_flags(random_eval=True, unmatched_init=False)
  batch_padding.define_padding_flag(
      default_help="Default: longest (max_length pads every batch to --max_seq_length, by "
                   "default the model's max_position_embeddings).")


# ----------------------------------------------------------------------------------------------
# Input.


class Example(object):
  """One sentence, tokenized: `tokens` ([CLS] ... [SEP]), `ids` and the [MASK] `positions`."""

  def __init__(self, line, where, text, tokens, ids, positions):
    self.line = line          # 1-based input line (or --text index)
    self.where = where        # "--input_file=x line 3" / "--text #2", for messages
    self.text = text
    self.tokens = tokens
    self.ids = ids
    self.positions = positions


def read_sentences(input_file=None, texts=None):
  """The sentences to fill, as (line, where, text) triples.

  Args:
    input_file: text file, one sentence per line (UTF-8; undecodable bytes dropped as
      tokenization.convert_to_unicode does); blank lines are skipped.
    texts: list of sentences from --text (used when input_file is None).

  Returns:
    list of (1-based line or --text index, description for messages, stripped text).
  """
  sentences = []
  if input_file:
    with tf.io.gfile.GFile(input_file, "rb") as f:
      for index, raw in enumerate(f):
        text = tokenization.convert_to_unicode(raw).strip()
        if text:
          sentences.append((index + 1, "--input_file=%s line %d" % (input_file, index + 1),
                            text))
    if not sentences:
      common.fail("--input_file=%s: has no sentence (only blank lines)" % input_file)
  else:
    for index, text in enumerate(texts or ()):
      text = tokenization.convert_to_unicode(text).strip()
      if not text:
        common.fail("--text #%d: is empty" % (index + 1))
      sentences.append((index + 1, "--text #%d" % (index + 1), text))
  return sentences


def tokenize_with_masks(text, tokenizer, max_seq_length, where="text"):
  """Tokenizes a sentence holding [MASK]s into [CLS] pieces [SEP] and the mask positions.

  The text between the [MASK] markers is tokenized piece by piece (each as separate words).

  Args:
    text: the sentence.
    tokenizer: tokenization.FullTokenizer (WordPiece).
    max_seq_length: longest allowed sequence, [CLS] and [SEP] included.
    where: the sentence's origin, for the one-line errors.

  Returns:
    (tokens, ids, positions): lists; positions index tokens.
  """
  if PAIR_SEPARATOR in text:
    common.fail("%s: holds '%s'; sentence pairs are not supported, give one sentence per "
                "line" % (where, PAIR_SEPARATOR))
  chunks = text.split(MASK)
  if len(chunks) == 1:
    hint = " (write it in capitals)" if MASK.lower() in text.lower() else ""
    common.fail("%s: has no %s to predict%s: %r" % (where, MASK, hint, _shorten(text)))
  tokens = ["[CLS]"]
  positions = []
  for i, chunk in enumerate(chunks):
    if i:
      positions.append(len(tokens))
      tokens.append(MASK)
    tokens.extend(tokenizer.tokenize(chunk))
  tokens.append("[SEP]")
  if len(tokens) > max_seq_length:
    common.fail("%s: is %d word pieces with [CLS] and [SEP], longer than --max_seq_length=%d; "
                "shorten it or raise --max_seq_length (sentences are never truncated, which "
                "could drop a %s)" % (where, len(tokens), max_seq_length, MASK))
  return tokens, tokenizer.convert_tokens_to_ids(tokens), positions


def _shorten(text, limit=60):
  return text if len(text) <= limit else text[:limit - 3] + "..."


def make_examples(sentences, tokenizer, max_seq_length):
  """Tokenizes every sentence (all are checked before the model runs).

  Args:
    sentences: list of (line, where, text) from read_sentences.
    tokenizer: tokenization.FullTokenizer.
    max_seq_length: as tokenize_with_masks.

  Returns:
    list of Example.
  """
  examples = []
  for line, where, text in sentences:
    tokens, ids, positions = tokenize_with_masks(text, tokenizer, max_seq_length, where)
    examples.append(Example(line, where, text, tokens, ids, positions))
  return examples


def pad_positions(positions_list):
  """Pads the mask positions of a batch to its largest count (padding: position 0, ignored).

  Args:
    positions_list: list of B lists of positions.

  Returns:
    int32 [B, n].
  """
  n = max(len(p) for p in positions_list)
  out = np.zeros([len(positions_list), n], np.int32)
  for i, positions in enumerate(positions_list):
    out[i, :len(positions)] = positions
  return out


# ----------------------------------------------------------------------------------------------
# The model: a checkpoint in a Session, or an exported TF-Hub encoder.


def check_mlm_head(checkpoint, flag_name="init_checkpoint"):
  """Fails with one line when the checkpoint has no cls/predictions/* variables.

  Args:
    checkpoint: checkpoint prefix.
    flag_name: the flag that named it.
  """
  try:
    names = [name for name, _ in tf.train.list_variables(checkpoint)]
  except (tf.errors.OpError, ValueError) as e:
    common.fail("--%s=%s: not a readable TensorFlow checkpoint (%s)" %
                (flag_name, checkpoint, str(getattr(e, "message", e)).splitlines()[0]))
  if not any(name.startswith(MLM_HEAD_SCOPE) for name in names):
    common.fail("--%s=%s: %s" % (flag_name, checkpoint, NO_MLM_HEAD))


def build_graph(bert_config, top_k, with_probabilities=False, padding="longest",
                max_seq_length=None):
  """Builds the fill-mask graph (no dropout) in the current default graph.

  Args:
    bert_config: modeling.BertConfig.
    top_k: candidates per position.
    with_probabilities: also fetch the whole softmax.
    padding: --padding: the fed [batch, max_seq_length] inputs are sliced to the batch's padded
      length in the graph (batch_inference.trimmed_inputs); "max_length" keeps them whole.
    max_seq_length: the fed length (needed unless padding is max_length).

  Returns:
    (placeholders, fetches): placeholders input_ids / input_mask / input_type_ids (int32
    [batch, max_seq_length]) and masked_lm_positions (int32 [batch, n]); fetches top_ids int32
    and top_probabilities float32 [batch, n, top_k] (and probabilities [batch, n, vocab]), and
    length: int32, the padded length the model ran at.
  """
  placeholders = {name: tf1.placeholder(tf.int32, [None, None], name=name)
                  for name in ("input_ids", "input_mask", "input_type_ids",
                               "masked_lm_positions")}
  inputs = batch_inference.trimmed_inputs(placeholders, padding, max_seq_length)
  model = modeling.BertModel(
      config=bert_config, is_training=False, input_ids=inputs["input_ids"],
      input_mask=inputs["input_mask"], token_type_ids=inputs["input_type_ids"],
      # longest: the encoder computes the real tokens only ([MASK]s are real tokens).
      skip_padding=padding == "longest")
  positions = placeholders["masked_lm_positions"]
  logits = modeling.masked_lm_logits(bert_config, model.get_sequence_output(),
                                     model.get_embedding_table(), positions)
  shape = tf.shape(positions)
  logits = tf.reshape(logits, [shape[0], shape[1], bert_config.vocab_size])
  fetches = probabilities_and_top_k(logits, top_k, with_probabilities)
  fetches["length"] = tf.shape(inputs["input_ids"])[1]
  return placeholders, fetches


def probabilities_and_top_k(logits, top_k, with_probabilities=False):
  """Softmax over the vocabulary and its top-k (shared by both model paths).

  Args:
    logits: float32 [batch, n, vocab].
    top_k: candidates per position.
    with_probabilities: also return the whole softmax.

  Returns:
    dict top_ids int32 [batch, n, top_k], top_probabilities float32 [batch, n, top_k]
    (most probable first; ties: lower id first), and probabilities [batch, n, vocab].
  """
  probabilities = tf.nn.softmax(logits, axis=-1)
  top = tf.math.top_k(probabilities, k=top_k, sorted=True)
  out = {"top_ids": top.indices, "top_probabilities": top.values}
  if with_probabilities:
    out["probabilities"] = probabilities
  return out


def _feed(examples, max_seq_length):
  """A batch zero-padded to max_seq_length (--padding then slices it: trimmed_inputs)."""
  input_ids, input_mask, input_type_ids = batch_inference.pad_batch(
      [e.ids for e in examples], [[0] * len(e.ids) for e in examples], max_seq_length)
  return {"input_ids": input_ids, "input_mask": input_mask, "input_type_ids": input_type_ids,
          "masked_lm_positions": pad_positions([e.positions for e in examples])}


class CheckpointPredictor(object):
  """modeling.BertModel + the MLM head in a tf.compat.v1 Session, restored from a checkpoint."""

  def __init__(self, checkpoint, bert_config, top_k, with_probabilities=False,
               padding="longest", max_seq_length=None):
    """Builds the graph and restores every variable (bert/* and cls/predictions/*).

    Args:
      checkpoint: checkpoint prefix (with the MLM head; see check_mlm_head), or None for
        seeded random weights (--allow_random_eval).
      bert_config: modeling.BertConfig (overrides applied).
      top_k: candidates per position.
      with_probabilities: also return the whole softmax (tests).
      padding: --padding ("longest", "max_length" or "bucket").
      max_seq_length: the longest sentence; default the model's max_position_embeddings.
    """
    self.max_seq_length = max_seq_length or bert_config.max_position_embeddings
    self.positions = 0   # positions computed: batch size x padded length, summed
    self.graph = tf.Graph()
    with self.graph.as_default():
      if checkpoint is None:
        tf1.set_random_seed(batch_inference.RANDOM_WEIGHTS_SEED)
      self.placeholders, self.fetches = build_graph(bert_config, top_k, with_probabilities,
                                                    padding, self.max_seq_length)
      load_weights = batch_inference.weights_loader(checkpoint)
    self.graph.finalize()
    self.session = tf1.Session(graph=self.graph)
    with self.graph.as_default():
      load_weights(self.session)

  def predict(self, examples):
    """Runs one batch. Returns the fetches as NumPy arrays [batch, n, ...] (see build_graph)."""
    feed = _feed(examples, self.max_seq_length)
    out = self.session.run(self.fetches,
                           {self.placeholders[name]: value for name, value in feed.items()})
    self.positions += len(examples) * int(out.pop("length"))
    return out

  def close(self):
    self.session.close()


class HubPredictor(object):
  """The `mlm` sub-object of an encoder exported by export_hub.py --mode=encoder --with_mlm."""

  def __init__(self, export_dir, top_k, with_probabilities=False, flag_name="hub_encoder",
               padding="longest", max_seq_length=None):
    """Loads the SavedModel (tf.saved_model.load, eager).

    Args:
      export_dir: the export directory.
      top_k: candidates per position.
      with_probabilities: also return the whole softmax (tests).
      flag_name: the flag that named it, for messages.
      padding: --padding ("longest", "max_length" or "bucket").
      max_seq_length: the longest sentence (setup's: --max_seq_length or the config's
        max_position_embeddings); None: each batch's longest sentence (max_length pads to it).
    """
    if not tf.io.gfile.exists(os.path.join(export_dir, "saved_model.pb")):
      common.fail("--%s=%s: no SavedModel there (saved_model.pb)" % (flag_name, export_dir))
    self.encoder = tf.saved_model.load(export_dir)
    if not hasattr(self.encoder, "mlm"):
      common.fail("--%s=%s: the encoder has no `mlm` sub-object (masked-LM head); export it "
                  "with export_hub.py --mode=encoder --with_mlm from a pre-training "
                  "checkpoint" % (flag_name, export_dir))
    self.top_k = top_k
    self.with_probabilities = with_probabilities
    self.padding = padding
    self.max_seq_length = max_seq_length
    self.positions = 0   # positions computed: batch size x padded length, summed

  def predict(self, examples):
    """Runs one batch. Returns NumPy arrays as CheckpointPredictor.predict."""
    max_seq_length = self.max_seq_length or max(len(e.ids) for e in examples)
    feed = batch_inference.trimmed_inputs(
        {name: tf.constant(value) for name, value in _feed(examples, max_seq_length).items()},
        self.padding, max_seq_length)
    self.positions += len(examples) * int(feed["input_ids"].shape[1])
    logits = self.encoder.mlm({
        "input_word_ids": feed["input_ids"],
        "input_mask": feed["input_mask"],
        "input_type_ids": feed["input_type_ids"],
        "masked_lm_positions": feed["masked_lm_positions"]})["mlm_logits"]
    out = probabilities_and_top_k(logits, self.top_k, self.with_probabilities)
    return {name: value.numpy() for name, value in out.items()}

  def close(self):
    pass


# ----------------------------------------------------------------------------------------------
# Words from pieces.


def join_pieces(pieces):
  """Joins WordPiece pieces into text: "##x" continues the word before it, others start one.

  Args:
    pieces: list of str.

  Returns:
    str, e.g. ["new", "york"] -> "new york", ["play", "##ing"] -> "playing".
  """
  text = ""
  for piece in pieces:
    if piece.startswith("##") and len(piece) > 2:
      text += piece[2:]
    else:
      text += (" " if text else "") + piece
  return text


def mask_runs(positions):
  """Groups sorted mask positions into runs of consecutive positions: [[3, 4], [7]]."""
  runs = []
  for position in positions:
    if runs and position == runs[-1][-1] + 1:
      runs[-1].append(position)
    else:
      runs.append([position])
  return runs


def joined_words(tokens, positions, best_pieces):
  """The word(s) each run of consecutive masks forms with its argmax pieces (module docstring).

  Args:
    tokens: the sentence's tokens ([CLS] ... [SEP]).
    positions: the mask positions (sorted).
    best_pieces: the argmax piece of each position.

  Returns:
    list of dicts {"positions": [...], "word": str, "joins": bool}; joins tells whether pieces
    were merged (several masks, or a leading "##" piece continuing the input word before it).
  """
  best = dict(zip(positions, best_pieces))
  out = []
  for run in mask_runs(positions):
    pieces = [best[p] for p in run]
    prefix = []
    if pieces[0].startswith("##") and len(pieces[0]) > 2:
      # Continue the input word before the run: its pieces back to its first one.
      i = run[0] - 1
      while i > 0 and tokens[i] != MASK and tokens[i] not in ("[CLS]", "[SEP]"):
        prefix.insert(0, tokens[i])
        if not tokens[i].startswith("##"):
          break
        i -= 1
    out.append({"positions": list(run), "word": join_pieces(prefix + pieces),
                "joins": len(run) > 1 or bool(prefix)})
  return out


def fill_text(text, best_pieces):
  """The text with each [MASK] replaced by its argmax piece (module docstring's rule).

  Args:
    text: the sentence with len(best_pieces) [MASK] markers.
    best_pieces: one piece per marker, in order.

  Returns:
    str.
  """
  chunks = text.split(MASK)
  out = chunks[0]
  for i, piece in enumerate(best_pieces):
    if piece.startswith("##") and len(piece) > 2:
      out = out.rstrip() + piece[2:]
    else:
      if i and not chunks[i] and out and not out[-1].isspace():
        out += " "   # "[MASK][MASK]" filled with two whole words
      out += piece
    out += chunks[i + 1]
  return out


def result_record(example, top_ids, top_probabilities, inv_vocab):
  """The output of one sentence (the JSON line's object).

  Args:
    example: Example.
    top_ids: int [n_padded, top_k] for this example (padding rows past its masks ignored).
    top_probabilities: float [n_padded, top_k].
    inv_vocab: dict id -> token.

  Returns:
    dict line, text, tokens, masks, joined, filled.
  """
  masks = []
  best = []
  for j, position in enumerate(example.positions):
    candidates = [{"token": inv_vocab.get(int(i), "[id %d]" % int(i)),
                   "probability": float(p)}
                  for i, p in zip(top_ids[j], top_probabilities[j])]
    masks.append({"position": position, "candidates": candidates})
    best.append(candidates[0]["token"])
  joined = joined_words(example.tokens, example.positions, best)
  return {"line": example.line, "text": example.text, "tokens": example.tokens,
          "masks": masks,
          "joined": [{"positions": j["positions"], "word": j["word"]} for j in joined],
          "filled": fill_text(example.text, best),
          "_joins": [j for j in joined if j["joins"]]}


def format_record(record, where):
  """Human-readable lines of one result.

  Args:
    record: from result_record.
    where: the sentence's origin ("line 3").

  Returns:
    str (several lines, ending in a newline).
  """
  lines = ["%s: %s" % (where, record["text"])]
  for j, mask in enumerate(record["masks"]):
    lines.append("  [MASK] %d (position %d): %s" % (
        j + 1, mask["position"], "  ".join(
            "%s %s" % (c["token"], format_probability(c["probability"]))
            for c in mask["candidates"])))
  for joined in record["_joins"]:
    lines.append("  joined (positions %s): %s" % (
        ",".join(str(p) for p in joined["positions"]), joined["word"]))
  lines.append("  filled: %s" % record["filled"])
  return "\n".join(lines) + "\n"


def format_probability(p):
  """4 decimals, or 2 significant digits below 0.001 (a near-uniform model shows as such)."""
  return "%.4f" % p if p >= 1e-3 else "%.1e" % p


def json_line(record):
  """The JSON line of a result (without the printing-only keys)."""
  return json.dumps({k: v for k, v in record.items() if not k.startswith("_")},
                    ensure_ascii=False) + "\n"


def predict(predictor, examples, inv_vocab, batch_size, log_fn=None):
  """Runs the examples through the model in batches; yields one record per example, in order.

  Args:
    predictor: CheckpointPredictor or HubPredictor.
    examples: list of Example.
    inv_vocab: dict id -> token.
    batch_size: sentences per forward pass.
    log_fn: progress function(str), or None for none.

  Yields:
    result_record dicts.
  """
  # Progress (rate, time remaining) only for inputs of more than one batch.
  meter = None
  if log_fn and len(examples) > batch_size:
    meter = common.ProgressMeter(len(examples), unit="sentences", log_fn=log_fn)
    meter.update(0)
  for start in range(0, len(examples), batch_size):
    batch = examples[start:start + batch_size]
    out = predictor.predict(batch)
    for b, example in enumerate(batch):
      yield result_record(example, out["top_ids"][b], out["top_probabilities"][b], inv_vocab)
    if meter:
      meter.update(start + len(batch))


# ----------------------------------------------------------------------------------------------
# Command line.


def _default_beside(path_flag, directory, name):
  """`path_flag` if given, else directory/name when that exists, else None."""
  if path_flag:
    return path_flag
  candidate = os.path.join(directory, name)
  return candidate if tf.io.gfile.exists(candidate) else None


def setup(fv, with_probabilities=False):
  """Checks the flags and loads tokenizer and model (every input check before the model runs).

  Args:
    fv: FLAGS, or any object with the same attributes (tests use a namespace).
    with_probabilities: predictors also return the whole softmax (tests).

  Returns:
    (predictor, examples, tokenizer, summary dict).
  """
  texts = [t for t in (getattr(fv, "text", None) or [])]
  if fv.input_file and texts:
    common.fail("--input_file and --text: give one of them, not both")
  if not fv.input_file and not texts:
    common.fail("--input_file or --text is required (sentences with %s)" % MASK)
  if fv.input_file:
    common.require_file(fv.input_file, "input_file")
  if fv.top_k < 1:
    common.fail("--top_k=%d: must be >= 1" % fv.top_k)
  if fv.batch_size < 1:
    common.fail("--batch_size=%d: must be >= 1" % fv.batch_size)
  if fv.max_seq_length is not None and fv.max_seq_length < 3:
    common.fail("--max_seq_length=%d: must be >= 3 ([CLS] [MASK] [SEP])" % fv.max_seq_length)
  batch_padding.check_padding_flag(fv)
  padding = batch_padding.effective_padding(fv)
  hub_dir = getattr(fv, "hub_encoder", None)
  allow_random_eval = bool(getattr(fv, "allow_random_eval", False))
  if fv.init_checkpoint and hub_dir:
    common.fail("give one model: --init_checkpoint (a pre-training checkpoint) or "
                "--hub_encoder (an export_hub.py --with_mlm encoder), not both")
  if not fv.init_checkpoint and not hub_dir:
    # No trained weights: one line naming the flag, unless --allow_random_eval.
    checkpoint_utils.require_trained_weights(
        "predict_masked", [("init_checkpoint", None), ("hub_encoder", None)],
        allow_random_eval=allow_random_eval)

  checkpoint = None
  record = checkpoint_utils.checkpoint_record(None)
  if hub_dir:
    if not tf.io.gfile.isdir(hub_dir):
      common.fail("--hub_encoder=%s: not a directory" % hub_dir)
    for key in ("residual_attention", "layer_norm_type"):
      if getattr(fv, key, None):
        common.fail("--%s: does not apply to --hub_encoder (the exported graph is fixed)" % key)
    config_file = fv.bert_config_file or os.path.join(hub_dir, "bert_config.json")
    if not tf.io.gfile.exists(config_file):
      common.fail("--bert_config_file is required: no bert_config.json in --hub_encoder=%s" %
                  hub_dir)
    model_dir = hub_dir
    record = dict(hub_encoder_record(hub_dir, allow_random_eval), hub_encoder=hub_dir)
  elif fv.init_checkpoint:
    checkpoint = export_utils.resolve_checkpoint(fv.init_checkpoint)
    check_mlm_head(checkpoint)
    config_file = batch_inference.resolve_config_file(fv.bert_config_file, fv.init_checkpoint,
                                                      checkpoint)
    model_dir = (fv.init_checkpoint if tf.io.gfile.isdir(fv.init_checkpoint)
                 else os.path.dirname(checkpoint) or ".")
    record = checkpoint_utils.checkpoint_record(checkpoint)
  else:   # --allow_random_eval
    config_file = batch_inference.resolve_config_file(fv.bert_config_file, None, None)
    model_dir = None
  bert_config = model_config.load_config(config_file, None if hub_dir else fv,
                                            fv.max_seq_length)
  max_seq_length = fv.max_seq_length or bert_config.max_position_embeddings
  if fv.top_k > bert_config.vocab_size:
    common.fail("--top_k=%d: larger than vocab_size=%d" % (fv.top_k, bert_config.vocab_size))

  vocab_file = _default_beside(fv.vocab_file, model_dir, "vocab.txt") if model_dir else (
      fv.vocab_file)
  if not vocab_file:
    common.fail("--vocab_file is required (no vocab.txt beside the model)")
  tokenizer = tokenization.checked_tokenizer(
      vocab_file, fv.do_lower_case, init_checkpoint=fv.init_checkpoint,
      vocab_size=bert_config.vocab_size, config_name=config_file)
  for special in ("[CLS]", "[SEP]", MASK):
    if special not in tokenizer.vocab:
      common.fail("--vocab_file=%s: has no %s token" % (vocab_file, special))

  output_file = getattr(fv, "output_file", None)
  if output_file:
    inputs = [fv.input_file, vocab_file, config_file]
    if checkpoint:
      # The state file and every checkpoint's shards of the directory, not only the one read.
      inputs += (checkpoint_utils.checkpoint_files(fv.init_checkpoint) +
                 checkpoint_utils.checkpoint_files(checkpoint) +
                 tf.io.gfile.glob(checkpoint + ".*"))
    if hub_dir:
      inputs += [hub_dir] + [os.path.join(root, name)
                             for root, _, names in tf.io.gfile.walk(hub_dir) for name in names]
    batch_inference.check_outputs([(output_file, "output_file")], inputs)

  examples = make_examples(read_sentences(fv.input_file, texts), tokenizer, max_seq_length)
  if hub_dir:
    predictor = HubPredictor(hub_dir, fv.top_k, with_probabilities, padding=padding,
                             max_seq_length=max_seq_length)
  else:
    predictor = CheckpointPredictor(checkpoint, bert_config, fv.top_k, with_probabilities,
                                    padding=padding, max_seq_length=max_seq_length)
  summary = {"padding": padding, "word_pieces": sum(len(e.ids) for e in examples),
             "model": hub_dir or checkpoint or "random weights (--allow_random_eval)",
             "bert_config_file": config_file, "max_seq_length": max_seq_length,
             "vocab_file": vocab_file, "sentences": len(examples),
             "masks": sum(len(e.positions) for e in examples), "output_file": output_file,
             "record": record}
  return predictor, examples, tokenizer, summary


def hub_encoder_record(hub_dir, allow_random_eval=False):
  """checkpoint_record of the weights an export_hub.py encoder was exported from.

  Its export_info.json names them; an encoder exported from random weights
  (export_hub.py --allow_random_eval) is refused unless allow_random_eval. An older export
  without the file records an unknown checkpoint.

  Args:
    hub_dir: --hub_encoder.
    allow_random_eval: --allow_random_eval.

  Returns:
    dict checkpoint / global_step (None when unknown or random).
  """
  info = serving.read_export_info(hub_dir)
  if info is None:
    return {"checkpoint": None, "global_step": None}
  record = {"checkpoint": info.get("checkpoint"), "global_step": info.get("global_step")}
  if not record["checkpoint"]:
    if not allow_random_eval:
      common.fail("--hub_encoder=%s: was exported from random weights (its %s names no "
                  "checkpoint), so it would fill masks with a randomly initialised model; give "
                  "an encoder exported from a trained checkpoint, or pass --allow_random_eval "
                  "to do that deliberately" % (hub_dir, serving.EXPORT_INFO))
    tf1.logging.warning("--hub_encoder=%s: random weights (--allow_random_eval)", hub_dir)
  return record


def run(fv, out=None, log_fn=None):
  """The whole job: predictions printed to `out` and written to --output_file.

  Args:
    fv: FLAGS or a namespace with the same attributes.
    out: stream for the human-readable lines (stdout by default).
    log_fn: progress function(str), or None.

  Returns:
    (list of result records, summary dict).
  """
  out = out or sys.stdout
  predictor, examples, tokenizer, summary = setup(fv)
  output_file = summary["output_file"]
  records = []
  with contextlib.ExitStack() as stack:
    stack.callback(predictor.close)
    writer = sidecar = None
    if output_file:
      # On any error (or Ctrl-C) the temporaries are removed and no final name appears; the
      # output and its sidecar are renamed into place together.
      writer, sidecar = stack.enter_context(batch_inference.atomic_outputs(
          [(output_file, "w"), (checkpoint_utils.sidecar_path(output_file), "w")]))
    records_iter = predict(predictor, examples, tokenizer.inv_vocab, fv.batch_size, log_fn)
    for example, record in zip(examples, records_iter):
      out.write(format_record(record, example.where))
      out.flush()
      if writer:
        writer.write(json_line(record))
      records.append(record)
    if sidecar:
      sidecar.write(json.dumps(summary["record"], sort_keys=True) + "\n")
  summary["positions"] = predictor.positions
  return records, summary


def main(_):
  tf1.logging.set_verbosity(tf1.logging.WARN)
  _, summary = run(FLAGS, log_fn=lambda line: sys.stderr.write("progress: %s\n" % line))
  sys.stderr.write("Filled %d [MASK](s) in %d sentence(s) with %s%s; --padding=%s: %d positions "
                   "computed for %d word pieces\n" % (
                       summary["masks"], summary["sentences"], summary["model"],
                       "; wrote %s" % summary["output_file"] if summary["output_file"] else "",
                       summary["padding"], summary["positions"], summary["word_pieces"]))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
