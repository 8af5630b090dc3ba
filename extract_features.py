# coding=utf-8
r"""Extracts pre-computed feature vectors (and sentence embeddings) from BERT / RealFormer.

Command-line compatible with the official google-research/bert extract_features.py: the same
flags, the same input format and the same JSON-lines output, so a command written for the
official script runs unchanged:

    python extract_features.py --input_file=input.txt --output_file=output.jsonl \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 \
      --max_seq_length=128 --batch_size=8

Input (--input_file): one example per line, either a sentence or a pair "text_a ||| text_b"
(split at the last " ||| ", as the official regex `^(.*) \|\|\| (.*)$` does). Lines are
stripped. An empty line is kept, as the official script keeps it: it becomes "[CLS] [SEP]", so
output line i always belongs to input line i; the number of such lines is reported. Lines longer
than --max_seq_length word pieces are truncated as the official script does (a single sentence
keeps its first max_seq_length - 2 pieces; a pair drops pieces from the end of the longer side
until it fits in max_seq_length - 3), and the number of truncated lines is reported.

Output (--output_file, JSON lines), one line per input line:

    {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1,
      "values": [0.123456, ...]}, ...]}, ...]}

"linex_index" is spelt as the official script spells it; "features" has one entry per word
piece of the example ([CLS] ... [SEP], no padding); "layers" one entry per --layers index, in
the order given; the values are `round(float(x), 6)` of the float32 activations, as the
official. Layer indexes are Python list indexes into model.get_all_encoder_layers(): 0 is the
first Transformer layer, -1 the last (for Pre-LN the last entry is after the final LayerNorm).

Additions:
  --embeddings_file=out.npy   float32 array [num_lines, hidden_size], row i for input line i.
  --pooling=mean | cls        Sentence embedding of a line, from the element-wise mean of the
                              --layers outputs (pass --layers=-1 for the last layer alone):
                                mean: the average of that over the real tokens (input_mask = 1:
                                      [CLS], the word pieces and [SEP]; padding never counts);
                                cls:  its [CLS] (first position) vector.
                              Default mean. --output_file may be left out when only
                              embeddings are wanted.
  --init_checkpoint           a checkpoint prefix or a directory (its latest checkpoint): a
                              pre-trained model (bert/* variables), or a run_classifier.py /
                              run_squad.py output directory (head and optimizer variables are
                              ignored). Every variable of the model must be in it. Without it
                              the job stops (no trained weights) unless --allow_random_eval
                              (then --bert_config_file is required; the weights are a seeded
                              random initialisation).
  --bert_config_file          optional when the checkpoint's directory has bert_config.json.
  --residual_attention, --layer_norm_type   override the config (as in the training scripts).
  <output>.checkpoint.json    written beside each output: {"checkpoint": prefix, "global_step":
                              N} of the weights that produced it (null for random weights).

Every output (and its sidecar) is checked against every input before any work: the input and
vocab files, the config, and every file of the checkpoint's directory that a checkpoint is made
of (its `checkpoint` state file, graph.pbtxt, every checkpoint's shards). An empty
--input_file is a one-line error. The outputs are renamed into place together, only when every
one of them is complete; a failing write (a full disk, ...) is one line naming the file.

Large inputs are streamed: the input is read --batch_size lines at a time, and the JSON lines
and embedding rows are written as they are computed (under temporary names, renamed when
complete), with progress (lines/s and time remaining).

--padding=longest | max_length | bucket (batch_padding.define_padding_flag; default longest):
how long a batch's sequences are. longest: the batch's longest line rounded up to a multiple of
8 (at most --max_seq_length); max_length: every batch to --max_seq_length (the official full
padding); bucket: the longest line rounded up to 32, 64, ... or --max_seq_length
(batch_padding.padding_buckets: few shapes, for XLA). Padding is masked out of attention and
never written, so the outputs of the three are the same up to float32 round-off (a few ulps;
measured < 1e-6); the shorter paddings compute less. The summary says how many positions were
computed for how many word pieces.

The model runs in a tf.compat.v1 Session on the local CPU or GPU. --use_tpu, --master and
--num_tpu_cores are accepted so official command lines run, and ignored (with a warning).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import re
import sys

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import batch_padding
from realformer_tf import export_utils
from realformer_tf import model_config
import modeling
from realformer_tf import batch_inference
import tokenization

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

POOLING_TYPES = ("mean", "cls")

# The official pair separator: the last " ||| " of the stripped line.
_PAIR_RE = re.compile(r"^(.*) \|\|\| (.*)$")


# `extract_features.NAME` for a helper that moved into the library: one line naming its new place.
__getattr__ = common.moved_names_getattr(__name__, batch_inference)


def define_flags():
  """Defines the command-line flags; called by __main__ only, so tests can import the module."""
  # Official flags (same names, defaults and meaning).
  flags.DEFINE_string("input_file", None,
                      "Text file: one sentence per line, or 'text_a ||| text_b' per line.")
  flags.DEFINE_string("output_file", None,
                      "JSON-lines output, one line per input line (optional when "
                      "--embeddings_file is given).")
  flags.DEFINE_string("layers", "-1,-2,-3,-4",
                      "Comma-separated encoder layer indexes (-1 = last layer, 0 = first).")
  flags.DEFINE_string(
      "bert_config_file", None,
      "The config json file corresponding to the pre-trained BERT model. This specifies the "
      "model architecture. Default: bert_config.json beside --init_checkpoint.")
  flags.DEFINE_integer(
      "max_seq_length", 128,
      "The maximum total input sequence length after WordPiece tokenization. Sequences longer "
      "than this will be truncated (and counted).")
  flags.DEFINE_string(
      "init_checkpoint", None,
      "Checkpoint prefix or model directory (its latest checkpoint): pre-trained or fine-tuned.")
  flags.DEFINE_string("vocab_file", None,
                      "The vocabulary file that the BERT model was trained on.")
  flags.DEFINE_bool(
      "do_lower_case", True,
      "Whether to lower case the input text. Should be True for uncased models and False for "
      "cased models.")
  flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
  flags.DEFINE_bool("use_tpu", False,
                    "Accepted for compatibility; this tool runs on the local CPU/GPU.")
  flags.DEFINE_string("master", None, "Accepted for compatibility (TPU only); ignored.")
  flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility (TPU only); ignored.")
  flags.DEFINE_bool(
      "use_one_hot_embeddings", False,
      "If True, tf.one_hot will be used for embedding lookups, otherwise "
      "tf.nn.embedding_lookup will be used.")
  model_config.define_model_override_flags()

  # Extensions.
  flags.DEFINE_string(
      "embeddings_file", None,
      "Also write sentence embeddings here: a .npy float32 array [num_lines, hidden_size].")
  flags.DEFINE_enum(
      "pooling", None, list(POOLING_TYPES),
      "Sentence embedding of --embeddings_file, from the mean of the --layers outputs: mean "
      "(over the real tokens, padding excluded; the default) or cls (the [CLS] vector).")
  checkpoint_utils.define_trained_weights_flags(random_eval=True, unmatched_init=False)
  batch_padding.define_padding_flag(
      default_help="Default: longest (--use_tpu is ignored: this tool runs on the local "
                   "CPU/GPU).")


def resolve_padding(flag_values):
  """--padding of a run: the flag, longest by default (one of batch_padding.PADDING_MODES).

  No TPU rule applies (batch_padding.check_padding_flag refuses longest / bucket with
  --use_tpu): this tool accepts --use_tpu only to run official command lines, and ignores it.

  Args:
    flag_values: FLAGS or a namespace (padding may be absent: longest).

  Returns:
    str.
  """
  padding = getattr(flag_values, "padding", None) or "longest"
  if padding not in batch_padding.PADDING_MODES:
    common.fail("--padding=%s: must be one of %s" % (
        padding, ", ".join(batch_padding.PADDING_MODES)))
  return padding


class ExtractStats(object):
  """What a run saw: counts of lines by kind, for the summary and the warnings."""

  def __init__(self):
    self.lines = 0
    self.pair_lines = 0
    self.empty_lines = 0
    self.truncated_lines = 0
    self.first_truncated = None     # 1-based line number
    self.undecodable_lines = 0
    self.first_undecodable = None   # 1-based line number
    self.word_pieces = 0            # real positions ([CLS] and [SEP]s included)
    self.positions = 0              # positions computed: batch size x padded length, summed

  def as_dict(self):
    return dict(self.__dict__)


def parse_layers(spec, num_hidden_layers):
  """Parses --layers into a list of ints, checked against the model's depth.

  Args:
    spec: comma-separated integers, e.g. "-1,-2,-3,-4".
    num_hidden_layers: the model's number of layers L.

  Returns:
    The list of ints in the given order (each in [-L, L-1], Python list indexes into
    get_all_encoder_layers()).
  """
  parts = [p.strip() for p in (spec or "").split(",")]
  try:
    indexes = [int(p) for p in parts]
  except ValueError:
    indexes = None
  if not indexes:
    common.fail("--layers=%s: expected comma-separated integers such as -1,-2,-3,-4" % spec)
  for index in indexes:
    if not -num_hidden_layers <= index < num_hidden_layers:
      common.fail("--layers=%s: layer %d is out of range for a model with num_hidden_layers=%d "
                  "(use %d..%d; -1 is the last layer)" %
                  (spec, index, num_hidden_layers, -num_hidden_layers, num_hidden_layers - 1))
  return indexes


def count_lines(input_file):
  """Number of lines the extractor will read from `input_file` (same reader, one pass).

  Args:
    input_file: text file path.

  Returns:
    int.
  """
  count = 0
  with tf.io.gfile.GFile(input_file, "rb") as f:
    for _ in f:
      count += 1
  return count


def read_lines(input_file, stats):
  """Yields (line_index, text_a, text_b) for each line, as the official read_examples.

  Args:
    input_file: text file, UTF-8 (undecodable bytes are dropped as
      tokenization.convert_to_unicode does, and the lines counted in `stats`).
    stats: ExtractStats, updated.

  Yields:
    (int, str, str or None): 0-based line index, first text, second text of a "a ||| b" line.
  """
  with tf.io.gfile.GFile(input_file, "rb") as f:
    for index, raw in enumerate(f):
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError:
        stats.undecodable_lines += 1
        if stats.first_undecodable is None:
          stats.first_undecodable = index + 1
        line = tokenization.convert_to_unicode(raw)
      line = line.strip()
      m = _PAIR_RE.match(line)
      if m is None:
        yield index, line, None
      else:
        yield index, m.group(1), m.group(2)


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Truncates a pair in place to `max_length` pieces: always from the longer side's end."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def convert_line(text_a, text_b, tokenizer, max_seq_length):
  """Turns one input line into BERT tokens and segment ids, as the official converter.

  Args:
    text_a: first text.
    text_b: second text or None.
    tokenizer: tokenization.FullTokenizer.
    max_seq_length: maximum number of word pieces, [CLS] and [SEP]s included.

  Returns:
    (tokens, input_ids, input_type_ids, truncated): lists of equal length (no padding) and
    whether the line had to be truncated. A pair whose second text has no word piece is a
    single sentence (the official rule).
  """
  tokens_a = tokenizer.tokenize(text_a)
  tokens_b = tokenizer.tokenize(text_b) if text_b else None
  if tokens_b:
    truncated = len(tokens_a) + len(tokens_b) > max_seq_length - 3
    _truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
  else:
    truncated = len(tokens_a) > max_seq_length - 2
    tokens_a = tokens_a[:max_seq_length - 2]
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  input_type_ids = [0] * len(tokens)
  if tokens_b:
    tokens += tokens_b + ["[SEP]"]
    input_type_ids += [1] * (len(tokens_b) + 1)
  return tokens, tokenizer.convert_tokens_to_ids(tokens), input_type_ids, truncated


def json_line(line_index, tokens, layer_values, layer_indexes):
  """One official-format JSON line.

  Args:
    line_index: 0-based input line number ("linex_index").
    tokens: the example's n word pieces.
    layer_values: list (one per entry of layer_indexes) of float32 arrays [n, hidden_size].
    layer_indexes: the --layers ints.

  Returns:
    str, ending in a newline.
  """
  rows = [values.tolist() for values in layer_values]   # Python floats, exact float32 values
  features = []
  for t, token in enumerate(tokens):
    layers = [{"index": layer_index, "values": [round(x, 6) for x in rows[j][t]]}
              for j, layer_index in enumerate(layer_indexes)]
    features.append({"token": token, "layers": layers})
  return json.dumps({"linex_index": line_index, "features": features}) + "\n"


def build_graph(bert_config, layer_indexes, want_layers, pooling, use_one_hot_embeddings=False,
                padding="longest", max_seq_length=None):
  """Builds the inference graph (no dropout) in the current default graph.

  Args:
    bert_config: modeling.BertConfig.
    layer_indexes: the --layers ints.
    want_layers: whether to fetch the per-token layer outputs (for the JSON lines).
    pooling: None (no embeddings), "mean" or "cls".
    use_one_hot_embeddings: passed to BertModel.
    padding: --padding: the fed [batch, max_seq_length] inputs are sliced to the batch's
      padded length in the graph (batch_inference.trimmed_inputs); "max_length" keeps them whole.
    max_seq_length: the fed length (needed unless padding is max_length).

  Returns:
    (placeholders, fetches): placeholders is a dict input_ids / input_mask / input_type_ids ->
    int32 placeholder [batch, max_seq_length]; fetches a dict with "layer_%d" -> float32
    [batch, S, hidden] for each distinct layer (non-negative index) when want_layers,
    "embeddings" -> float32 [batch, hidden] when pooling is set, and "length" -> int32 S, the
    padded length the model ran at.
  """
  placeholders = {name: tf1.placeholder(tf.int32, [None, None], name=name)
                  for name in ("input_ids", "input_mask", "input_type_ids")}
  inputs = batch_inference.trimmed_inputs(placeholders, padding, max_seq_length)
  model = modeling.BertModel(
      config=bert_config, is_training=False, input_ids=inputs["input_ids"],
      input_mask=inputs["input_mask"], token_type_ids=inputs["input_type_ids"],
      use_one_hot_embeddings=use_one_hot_embeddings,
      # longest: the encoder computes the real tokens only (padding rows are never written).
      skip_padding=padding == "longest")
  all_layers = model.get_all_encoder_layers()
  num_layers = len(all_layers)
  fetches = {}
  if want_layers:
    for index in sorted(set(i % num_layers for i in layer_indexes)):
      fetches["layer_%d" % index] = all_layers[index]
  if pooling:
    # The element-wise mean of the chosen layers (repeats count as given), [B, S, H].
    chosen = tf.add_n([all_layers[i] for i in layer_indexes]) / float(len(layer_indexes))
    if pooling == "cls":
      embeddings = chosen[:, 0, :]
    else:
      mask = tf.cast(inputs["input_mask"], chosen.dtype)[:, :, None]
      # Every example has at least [CLS] and [SEP], so the count is never 0.
      embeddings = tf.reduce_sum(chosen * mask, axis=1) / tf.reduce_sum(mask, axis=1)
    fetches["embeddings"] = embeddings
  fetches["length"] = tf.shape(inputs["input_ids"])[1]
  return placeholders, fetches


def _write_npy_header(f, num_rows, width):
  """Writes a .npy (version 1.0) header for a C-order float32 array [num_rows, width]."""
  np.lib.format.write_array_header_1_0(
      f, {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False,
          "shape": (num_rows, width)})


def extract_features(input_file, checkpoint, bert_config, tokenizer, layer_indexes,
                     output_file=None, embeddings_file=None, pooling="mean",
                     max_seq_length=128, batch_size=32, use_one_hot_embeddings=False,
                     log_fn=None, padding="longest"):
  """Streams `input_file` through the model, writing JSON lines and/or embeddings.

  Both outputs (and their `.checkpoint.json` sidecars) are written under temporary names
  beside their final ones and renamed together when all are complete
  (batch_inference.atomic_outputs); nothing but the current batch is held in memory.

  Args:
    input_file: text file, one example per line (see the module docstring).
    checkpoint: checkpoint prefix (all model variables must be in it), or None for seeded
      random weights (--allow_random_eval).
    bert_config: modeling.BertConfig (with any overrides applied).
    tokenizer: tokenization.FullTokenizer.
    layer_indexes: list of ints (checked with parse_layers).
    output_file: JSON-lines path or None.
    embeddings_file: .npy path or None.
    pooling: "mean" or "cls" (used with embeddings_file).
    max_seq_length: maximum word pieces per example, [CLS] and [SEP]s included (>= 3).
    batch_size: examples per forward pass.
    use_one_hot_embeddings: passed to BertModel.
    log_fn: function(str) for progress; tf logging by default.
    padding: --padding (resolve_padding): "longest", "max_length" or "bucket".

  Returns:
    ExtractStats.
  """
  if not output_file and not embeddings_file:
    common.fail("--output_file or --embeddings_file: give at least one")
  log_fn = log_fn or tf1.logging.info
  stats = ExtractStats()

  graph = tf.Graph()
  with graph.as_default():
    if checkpoint is None:
      tf1.set_random_seed(batch_inference.RANDOM_WEIGHTS_SEED)
    placeholders, fetches = build_graph(
        bert_config, layer_indexes, bool(output_file), pooling if embeddings_file else None,
        use_one_hot_embeddings, padding, max_seq_length)
    load_weights = batch_inference.weights_loader(checkpoint)
  graph.finalize()
  num_lines = count_lines(input_file)
  if not num_lines:
    common.fail("--input_file=%s: is empty (no line to extract features from)" % input_file)
  num_layers = bert_config.num_hidden_layers
  meter = common.ProgressMeter(num_lines, unit="lines", log_fn=log_fn)
  meter.update(0)   # the rate counts from here: includes the first batch

  record = json.dumps(checkpoint_utils.checkpoint_record(checkpoint), sort_keys=True) + "\n"
  with tf1.Session(graph=graph) as sess:
    load_weights(sess)
    # On any error (or Ctrl-C) every temporary is removed and no final name appears; the
    # outputs are renamed into place together, only when all are complete.
    with batch_inference.atomic_outputs([
        (output_file, "w"), (embeddings_file, "wb"),
        (output_file and checkpoint_utils.sidecar_path(output_file), "w"),
        (embeddings_file and checkpoint_utils.sidecar_path(embeddings_file), "w")]) as writers:
      jsonl_writer, npy_writer = writers[:2]
      if npy_writer:
        # The row count is known from the first pass, so the header goes first and the rows
        # stream after it (no memmap: works on any tf.io.gfile path).
        _write_npy_header(npy_writer, num_lines, bert_config.hidden_size)

      def run_batch(batch):
        line_indexes, tokens_list, ids_list, type_ids_list = zip(*batch)
        # Fed at the full length; the graph slices to --padding's length
        # (batch_inference.trimmed_inputs).
        input_ids, input_mask, input_type_ids = batch_inference.pad_batch(
            ids_list, type_ids_list, max_seq_length)
        out = sess.run(fetches, {placeholders["input_ids"]: input_ids,
                                 placeholders["input_mask"]: input_mask,
                                 placeholders["input_type_ids"]: input_type_ids})
        stats.positions += len(batch) * int(out["length"])
        stats.word_pieces += sum(len(tokens) for tokens in tokens_list)
        if jsonl_writer:
          for b, (line_index, tokens) in enumerate(zip(line_indexes, tokens_list)):
            values = [out["layer_%d" % (i % num_layers)][b, :len(tokens)]
                      for i in layer_indexes]
            jsonl_writer.write(json_line(line_index, tokens, values, layer_indexes))
        if npy_writer:
          npy_writer.write(np.ascontiguousarray(out["embeddings"], "<f4").tobytes())

      batch = []
      for line_index, text_a, text_b in read_lines(input_file, stats):
        tokens, ids, type_ids, truncated = convert_line(text_a, text_b, tokenizer,
                                                        max_seq_length)
        stats.lines += 1
        stats.empty_lines += int(not text_a and not text_b)
        stats.pair_lines += int(1 in type_ids)
        if truncated:
          stats.truncated_lines += 1
          if stats.first_truncated is None:
            stats.first_truncated = line_index + 1
        if line_index < 5:   # As the official script, show the first examples.
          log_fn("line %d: tokens: %s; input_type_ids: %s" % (
              line_index, " ".join(tokens), " ".join(str(t) for t in type_ids)))
        batch.append((line_index, tokens, ids, type_ids))
        if len(batch) == batch_size:
          run_batch(batch)
          batch = []
          meter.update(stats.lines)
      if batch:
        run_batch(batch)
      meter.update(stats.lines, force=True)
      if stats.lines != num_lines:
        common.fail("--input_file=%s: changed while it was read (%d lines, then %d)" %
                    (input_file, num_lines, stats.lines))
      for sidecar in writers[2:]:
        if sidecar:
          sidecar.write(record)
  return stats


def _checkpoint_prefix(path):
  """Turns a checkpoint's own file name (model.ckpt.index, .data-00000-of-00001) into its prefix."""
  m = re.match(r"^(.*)\.(index|meta|data-\d+-of-\d+)$", path or "")
  if m and tf.io.gfile.exists(m.group(1) + ".index"):
    return m.group(1)
  return path


def _has_a_line(input_file):
  """Whether `input_file` holds at least one byte (one line for the reader)."""
  with tf.io.gfile.GFile(input_file, "rb") as f:
    return bool(f.read(1))


def run(flag_values, log_fn=None):
  """Checks the flags, loads config, tokenizer and checkpoint, and extracts.

  Args:
    flag_values: FLAGS, or any object with the same attributes (tests use a namespace).
    log_fn: function(str) for progress; tf logging by default.

  Returns:
    (ExtractStats, summary dict with the resolved paths).
  """
  fv = flag_values
  output_file = fv.output_file or None
  embeddings_file = getattr(fv, "embeddings_file", None) or None
  pooling = getattr(fv, "pooling", None)
  common.require_file(fv.input_file, "input_file")
  if not output_file and not embeddings_file:
    common.fail("--output_file is required (or --embeddings_file, for sentence embeddings only)")
  if pooling and not embeddings_file:
    common.fail("--pooling=%s: needs --embeddings_file (where the sentence embeddings go)" %
                pooling)
  pooling = pooling or "mean"
  if pooling not in POOLING_TYPES:
    common.fail("--pooling=%s: must be one of %s" % (pooling, ", ".join(POOLING_TYPES)))
  padding = resolve_padding(fv)
  if fv.batch_size < 1:
    common.fail("--batch_size=%d: must be >= 1" % fv.batch_size)
  if fv.max_seq_length < 3:
    common.fail("--max_seq_length=%d: must be >= 3 ([CLS] A [SEP] B [SEP] needs room)" %
                fv.max_seq_length)
  if getattr(fv, "use_tpu", False):
    sys.stderr.write("warning: --use_tpu: ignored; this tool runs in a Session on the local "
                     "CPU/GPU (--master and --num_tpu_cores are ignored too)\n")
  checkpoint = None
  if fv.init_checkpoint:
    checkpoint = export_utils.resolve_checkpoint(_checkpoint_prefix(fv.init_checkpoint))
    try:
      tf.train.load_checkpoint(checkpoint)
    except (tf.errors.OpError, ValueError) as e:
      common.fail("--init_checkpoint=%s: not a readable TensorFlow checkpoint (%s)" %
                  (fv.init_checkpoint, str(getattr(e, "message", e)).splitlines()[0]))
  else:
    # No trained weights: one line naming the flag, unless --allow_random_eval.
    checkpoint_utils.require_trained_weights(
        "extract_features", [("init_checkpoint", None)],
        allow_random_eval=bool(getattr(fv, "allow_random_eval", False)))
  config_file = batch_inference.resolve_config_file(fv.bert_config_file, fv.init_checkpoint,
                                                    checkpoint)
  bert_config = model_config.load_config(config_file, fv, fv.max_seq_length)
  layer_indexes = parse_layers(fv.layers, bert_config.num_hidden_layers)

  inputs = [fv.input_file, fv.vocab_file, config_file]
  if checkpoint:
    # The state file and every checkpoint's shards of the directory, not only the one read.
    inputs += (checkpoint_utils.checkpoint_files(fv.init_checkpoint) +
               checkpoint_utils.checkpoint_files(checkpoint) +
               tf.io.gfile.glob(checkpoint + ".*"))
  batch_inference.check_outputs(
      [(output_file, "output_file"), (embeddings_file, "embeddings_file")], inputs)
  if not _has_a_line(fv.input_file):
    common.fail("--input_file=%s: is empty (no line to extract features from)" % fv.input_file)

  tokenizer = tokenization.checked_tokenizer(
      fv.vocab_file, fv.do_lower_case, init_checkpoint=fv.init_checkpoint,
      vocab_size=bert_config.vocab_size, config_name=config_file)
  for special in ("[CLS]", "[SEP]"):
    if special not in tokenizer.vocab:
      common.fail("--vocab_file=%s: has no %s token" % (fv.vocab_file, special))

  stats = extract_features(
      fv.input_file, checkpoint, bert_config, tokenizer, layer_indexes,
      output_file=output_file, embeddings_file=embeddings_file, pooling=pooling,
      max_seq_length=fv.max_seq_length, batch_size=fv.batch_size,
      use_one_hot_embeddings=getattr(fv, "use_one_hot_embeddings", False), log_fn=log_fn,
      padding=padding)
  summary = {"padding": padding, "checkpoint": checkpoint, "bert_config_file": config_file,
             "residual_attention": bert_config.residual_attention,
             "layer_norm_type": bert_config.layer_norm_type, "layers": layer_indexes,
             "output_file": output_file, "embeddings_file": embeddings_file,
             "pooling": pooling if embeddings_file else None,
             "embeddings_shape": [stats.lines, bert_config.hidden_size]}
  return stats, summary


def report(stats, summary, max_seq_length, out=None):
  """Writes the summary and the warnings (truncated, empty, undecodable lines), one line each.

  Args:
    stats: ExtractStats.
    summary: dict from run().
    max_seq_length: --max_seq_length, for the message.
    out: stream; stderr by default.
  """
  out = out or sys.stderr
  if stats.truncated_lines:
    out.write("warning: %d line(s) longer than --max_seq_length=%d word pieces were truncated "
              "(first: line %d)\n" % (stats.truncated_lines, max_seq_length,
                                      stats.first_truncated))
  if stats.empty_lines:
    out.write("note: %d empty line(s) were kept as '[CLS] [SEP]' (as the official script), so "
              "output line i is input line i\n" % stats.empty_lines)
  if stats.undecodable_lines:
    out.write("warning: %d line(s) are not valid UTF-8 (first: line %d); their undecodable "
              "bytes were dropped\n" % (stats.undecodable_lines, stats.first_undecodable))
  written = []
  if summary["output_file"]:
    written.append("%s (JSON lines, layers %s)" % (
        summary["output_file"], ",".join(str(i) for i in summary["layers"])))
  if summary["embeddings_file"]:
    written.append("%s (float32 %s, %s pooling)" % (
        summary["embeddings_file"], summary["embeddings_shape"], summary["pooling"]))
  out.write("Extracted %d line(s) (%d pairs, %d truncated, %d empty) with %s "
            "(residual_attention=%s, layer_norm_type=%s): wrote %s; --padding=%s: %d positions "
            "computed for %d word pieces\n" % (
                stats.lines, stats.pair_lines, stats.truncated_lines, stats.empty_lines,
                summary["checkpoint"] or "random weights (--allow_random_eval)",
                summary["residual_attention"],
                summary["layer_norm_type"], " and ".join(written), summary["padding"],
                stats.positions, stats.word_pieces))
  out.flush()


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  stats, summary = run(FLAGS)
  report(stats, summary, FLAGS.max_seq_length)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
