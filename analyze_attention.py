# coding=utf-8
r"""Attention analyses of the RealFormer paper (§5) and Kobayashi et al. (2021) context mixing.

Runs one or more BERT / RealFormer checkpoints (graph mode, is_training=False) over held-out
text or pre-training TFRecords and measures, per token:

1. Attention entropy (paper Fig. 4/5). For query token i of layer l, head h:
     H = -sum_j p_j ln p_j        (natural log, nats)
   The paper's colour thresholds 4.5 / 1.5 and values up to ~5 at 512 tokens (ln 512 = 6.24,
   log2 512 = 9) fit the natural log. Violin plots: one row per layer (top layer first), heads
   of a row ordered by median entropy, coloured by median: red > 4.5, yellow 1.5-4.5, blue < 1.5.

2. Cross-layer Jensen-Shannon divergence (paper Fig. 6) between head h of layer l and head h of
   layer l-1, per query token:
     JSD(P, Q) = 0.5 KL(P || M) + 0.5 KL(Q || M),  M = (P + Q) / 2,  log base 2
   so that 0 <= JSD <= 1 (the paper's 0-1 range and thresholds 0.25 / 0.75). Rows = layers
   1..L-1 (top first); colours: blue < 0.25, yellow 0.25-0.75, red > 0.75.

3. Context-mixing ratios (Kobayashi et al. 2021, "Incorporating Residual and Normalization Layers into Analysis of Masked Language Models") per layer and token type
   ([CLS], [SEP], [MASK], normal). With per-head value-output maps
     f^h(x) = (x W_V^h + b_V^h) W_O^h      (W_O^h: the rows of the output dense for head h)
   the attention block is y_i = sum_h sum_j alpha^h_ij f^h(x_j) + b_O + x_i. Let
     P_i = sum_h alpha^h_ii f^h(x_i)          (the token's attention to itself)
     C_i = sum_h sum_{j!=i} alpha^h_ij f^h(x_j) (the context part)
   and the estimators r = context / (context + preserving):
     ATTN-W      mean_h sum_{j!=i} alpha^h_ij
     ATTN-N      |C_i| / (|C_i| + |P_i|)
     ATTNRES-W   0.5 * mean_h sum_{j!=i} alpha^h_ij     (residual as 0.5 A + 0.5 I)
     ATTNRES-N   |C_i| / (|C_i| + |P_i + x_i|)
     ATTNRESLN-N |g(C_i)| / (|g(C_i)| + |g(P_i + x_i)|), g(z) = (z - mean(z)) / s(y_i) * gamma
   with s(y_i) = sqrt(var(y_i) + 1e-12) the std of the whole LayerNorm input, so that
   LN(y_i) = g(C_i) + g(P_i + x_i) + [g(b_O) + beta] exactly. The output bias b_O and beta are a
   token-independent bias term: as Kobayashi et al. they count neither as context nor as
   preserving (b_V stays inside f^h, where it belongs to the attended token).
   Which x, which LN:
   - Post-LN and RealFormer (residual attention only changes alpha): x is the layer input and
     the LN is the block's own 'attention/output/LayerNorm'.
   - Pre-LN: the block is y = x + ATTN(LN_a(x)) with no LN after it, so f^h acts on LN_a(x_j)
     (f^h(x_j) := (LN_a(x_j) W_V^h + b_V^h) W_O^h), the residual is the raw x_i, and
     ATTNRESLN-N uses the NEXT LayerNorm that reads y ('output/LayerNorm', the FFN's input LN).
     The residual stream itself carries y un-normalised, so for Pre-LN this estimator describes
     what the FFN sees, not the layer output; the report labels it "(next LN)".
   Padding positions are never counted, neither as queries nor as keys (the model masks keys).

4. Spearman rho (average ranks for ties) between a word piece's frequency rank in
   --frequency_corpus (rank 1 = most frequent) and its mean ATTNRES-N ratio, over word pieces
   that occur in the analysed tokens (special tokens excluded) and in the frequency corpus;
   per layer and for the mean over layers.

5. Expansion rate of each head's value-output map, an affine map of R^d (d = hidden size)
   f^h(x) = x W^h + b^h with W^h = W_V^h W_O^h (d x d) and b^h = b_V^h W_O^h, written as the
   (d+1) x (d+1) linear map on row vectors [x, 1]:
       M^h = [[W^h, 0], [b^h, 1]]
   rate(f^h) = sqrt(sum_k sigma_k(M^h)^2 / (d + 1)) = ||M^h||_F / sqrt(d + 1), the root mean
   square of M's d + 1 singular values, so the identity map has rate 1. The paper's formula has
   sqrt(d); Kobayashi et al.'s released code (expansion_rate_attn_f.py) divides by sqrt(d + 1),
   which we follow. Their BERT-base 0.88 is for the layer's whole map sum_h f^h, reported here
   as "whole layer map"; the per-head rates are extra. (Pre-LN: the map after LN_a.)

Memory: the per-token values are kept per (model, layer, head) in fixed-size reservoirs
(Algorithm R, at most --max_tokens_per_head values each), so memory does not grow with
--num_examples. Medians are exact while a head has seen at most --max_tokens_per_head tokens,
otherwise the median of a uniform random sample of that size (error ~1/sqrt(size) in quantile).
Means and the mixing ratios are exact running sums.

Outputs (--output_dir): report.md, entropy.png, jsd.png (one column per model, side by side),
entropy_medians.{json,csv}, jsd_medians.{json,csv}, mixing.{json,csv}, summary.json.

  python analyze_attention.py --init_checkpoint=out/post_ln,out/realformer \
      --labels=Post-LN,RealFormer --vocab_file=data/vocab.txt \
      --input_text=heldout.txt --num_examples=8192 --output_dir=analysis
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import csv
import io
import json
import math
import os
import sys
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import glue_metrics
from realformer_tf.glue_metrics import rankdata
import modeling
import tokenization

tf1 = tf.compat.v1

def define_flags():
  """Defines the command-line flags; called by __main__ only, so tests can import the module."""
  flags.DEFINE_string("init_checkpoint", None,
                      "Checkpoint prefix or directory (latest checkpoint), or a comma list of them "
                      "to compare side by side.")
  flags.DEFINE_string("labels", None,
                      "Comma list of names for the models (default: directory names).")
  flags.DEFINE_string("bert_config_file", None,
                      "Config JSON (one, or a comma list matching --init_checkpoint); default "
                      "bert_config.json beside each checkpoint.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab of the models.")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (uncased models).")
  flags.DEFINE_string("input_text", None,
                      "Text, one sentence a line, blank line between documents (files or globs).")
  flags.DEFINE_string("input_tfrecord", None, "Pre-training TFRecords (files or globs).")
  flags.DEFINE_integer("num_examples", 8192, "Examples to analyse (the paper: 8,192).")
  flags.DEFINE_integer("batch_size", 32, "Examples per forward pass.")
  flags.DEFINE_integer("max_seq_length", 128, "Sequence length for --input_text.")
  flags.DEFINE_float("mask_prob", 0.15,
                     "--input_text only: probability that a normal token is replaced by [MASK] "
                     "(so [MASK] tokens can be analysed as in pre-training).")
  flags.DEFINE_integer("seed", 12345, "Seed for masking and reservoir sampling.")
  flags.DEFINE_integer("max_tokens_per_head", 200000,
                       "Reservoir size per (model, layer, head) for medians and violins.")
  flags.DEFINE_string("frequency_corpus", None,
                      "Text (files or globs) to count word-piece frequencies for the Spearman "
                      "correlation; default --input_text; none: skipped.")
  flags.DEFINE_float("frequency_max_mb", 20.0, "Read at most this many MB of --frequency_corpus.")
  flags.DEFINE_string("output_dir", None, "Where the report, plots and tables go.")

FLAGS = flags.FLAGS

ESTIMATORS = ("ATTN-W", "ATTN-N", "ATTNRES-W", "ATTNRES-N", "ATTNRESLN-N")
TOKEN_TYPES = ("all", "normal", "[MASK]", "[CLS]", "[SEP]")
ENTROPY_THRESHOLDS = (1.5, 4.5)   # blue below, red above, yellow between
JSD_THRESHOLDS = (0.25, 0.75)
COLOURS = ("#4a7fd4", "#f2c12e", "#d9443a")   # blue, yellow, red
LN_EPSILON = 1e-12
PLOT_POINTS_PER_HEAD = 3000

# Paper / Kobayashi et al. reference values, quoted in the report.
KOBAYASHI_BERT_BASE = {"ATTN-W": 97.1, "ATTN-N": 85.2, "ATTNRES-W": 48.6, "ATTNRES-N": 22.3,
                       "ATTNRESLN-N": 18.8}


# ---------------------------------------------------------------------------------------------
# Pure NumPy measures (tested against hand-computed values).
# ---------------------------------------------------------------------------------------------


def attention_entropy(probs):
  """Entropy in nats of attention distributions over the last axis.

  Args:
    probs: float array [..., T], rows summing to 1 (zeros allowed: 0 ln 0 = 0).

  Returns:
    float64 array [...].
  """
  p = np.asarray(probs, np.float64)
  logp = np.log(np.where(p > 0, p, 1.0))
  return -np.sum(p * logp, axis=-1)


def jensen_shannon(p, q):
  """Jensen-Shannon divergence (log base 2, in [0, 1]) between distributions on the last axis.

  Args:
    p: float array [..., T].
    q: float array of the same shape.

  Returns:
    float64 array [...].
  """
  p = np.asarray(p, np.float64)
  q = np.asarray(q, np.float64)
  m = 0.5 * (p + q)

  def kl(a):
    safe = np.where(a > 0, a, 1.0)
    return np.sum(a * (np.log2(safe) - np.log2(np.where(a > 0, m, 1.0))), axis=-1)

  return np.clip(0.5 * kl(p) + 0.5 * kl(q), 0.0, 1.0)


def layer_norm_np(x, gamma, beta, epsilon=LN_EPSILON):
  """LayerNorm over the last axis, as modeling.layer_norm (biased variance, epsilon 1e-12)."""
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


def layer_attention_params(params, layer, layer_norm_type="post"):
  """Collects one layer's attention-block weights from a checkpoint dict.

  Args:
    params: dict official variable name -> array (a reader over the checkpoint works too).
    layer: layer index.
    layer_norm_type: "post" or "pre".

  Returns:
    dict with value_kernel [d, d], value_bias [d], output_kernel [d, d], output_bias [d],
    ln_gamma/ln_beta (the LN applied to y = x + ATTN: 'attention/output/LayerNorm' for Post-LN,
    the next LN 'output/LayerNorm' for Pre-LN) and, for Pre-LN, in_ln_gamma/in_ln_beta (LN_a).
  """
  pre = "bert/encoder/layer_%d/" % layer
  get = lambda name: np.asarray(params[pre + name], np.float64)
  out = {
      "value_kernel": get("attention/self/value/kernel"),
      "value_bias": get("attention/self/value/bias"),
      "output_kernel": get("attention/output/dense/kernel"),
      "output_bias": get("attention/output/dense/bias"),
  }
  if layer_norm_type == "pre":
    out["in_ln_gamma"] = get("attention/output/LayerNorm/gamma")
    out["in_ln_beta"] = get("attention/output/LayerNorm/beta")
    out["ln_gamma"] = get("output/LayerNorm/gamma")
    out["ln_beta"] = get("output/LayerNorm/beta")
  else:
    out["ln_gamma"] = get("attention/output/LayerNorm/gamma")
    out["ln_beta"] = get("attention/output/LayerNorm/beta")
  return out


def mixing_ratios(x, probs, layer_params, num_heads):
  """Per-token context-mixing ratios of one attention block (see the module docstring).

  Args:
    x: float [B, T, d], the layer input (the residual stream entering the block).
    probs: float [B, N, T, T], attention probabilities alpha (padded keys have 0 weight).
    layer_params: dict from `layer_attention_params`.
    num_heads: N.

  Returns:
    dict estimator name -> float64 [B, T] ratios in [0, 1] (also for padded queries: mask them).
  """
  x = np.asarray(x, np.float64)
  probs = np.asarray(probs, np.float64)
  batch, seq, d = x.shape
  head = d // num_heads
  attn_in = x
  if "in_ln_gamma" in layer_params:
    attn_in = layer_norm_np(x, layer_params["in_ln_gamma"], layer_params["in_ln_beta"])
  w_o = layer_params["output_kernel"]
  # V^h_j = attn_in_j W_V^h + b_V^h; f^h(x_j) = V^h_j W_O^h.
  values = (attn_in @ layer_params["value_kernel"] + layer_params["value_bias"]).reshape(
      batch, seq, num_heads, head)
  # sum_h sum_j alpha^h_ij f^h(x_j) = concat_h(sum_j alpha^h_ij V^h_j) W_O.
  mixed = np.einsum("bnij,bjnd->bind", probs, values).reshape(batch, seq, d) @ w_o
  diag = np.einsum("bnii->bni", probs)                       # alpha^h_ii, [B, N, T]
  self_part = (values * diag.transpose(0, 2, 1)[..., None]).reshape(batch, seq, d) @ w_o
  context = mixed - self_part                                 # C_i
  preserve_res = self_part + x                                # P_i + x_i
  y = mixed + layer_params["output_bias"] + x                 # the LN input

  def g(z):
    # The LN's linear map for this token: centre z, divide by the std of the whole input y.
    s = np.sqrt(y.var(-1, keepdims=True) + LN_EPSILON)
    return (z - z.mean(-1, keepdims=True)) / s * layer_params["ln_gamma"]

  norm = lambda z: np.linalg.norm(z, axis=-1)
  ratio = lambda c, p: c / np.maximum(c + p, 1e-30)
  weight_context = 1.0 - diag.mean(axis=1)                    # mean_h sum_{j!=i} alpha^h_ij
  c_norm = norm(context)
  return {
      "ATTN-W": weight_context,
      "ATTN-N": ratio(c_norm, norm(self_part)),
      "ATTNRES-W": 0.5 * weight_context,
      "ATTNRES-N": ratio(c_norm, norm(preserve_res)),
      "ATTNRESLN-N": ratio(norm(g(context)), norm(g(preserve_res))),
  }


def affine_expansion_rate(kernel, bias):
  """Expansion rate of the affine map x -> x kernel + bias on R^d (row vectors).

  The map is written as the (d+1) x (d+1) linear map M = [[kernel, 0], [bias, 1]] on [x, 1];
  rate = sqrt(sum_k sigma_k(M)^2 / (d + 1)), the root mean square of M's singular values
  sigma_k (1 for the identity map; Kobayashi et al.'s code uses the same d + 1 divisor).

  Args:
    kernel: [d, d].
    bias: [d].

  Returns:
    float.
  """
  kernel = np.asarray(kernel, np.float64)
  d = kernel.shape[0]
  m = np.zeros((d + 1, d + 1))
  m[:d, :d] = kernel
  m[d, :d] = bias
  m[d, d] = 1.0
  sigma = np.linalg.svd(m, compute_uv=False)
  return float(np.sqrt(np.sum(sigma ** 2) / (d + 1)))


def expansion_rates(layer_params, num_heads):
  """Expansion rates of one layer's value-output maps.

  Args:
    layer_params: dict from `layer_attention_params`.
    num_heads: N.

  Returns:
    (per_head list of N floats for f^h, float for the whole map sum_h f^h).
  """
  w_v = layer_params["value_kernel"]
  b_v = layer_params["value_bias"]
  w_o = layer_params["output_kernel"]
  d = w_v.shape[0]
  head = d // num_heads
  rates = []
  for h in range(num_heads):
    sl = slice(h * head, (h + 1) * head)
    rates.append(affine_expansion_rate(w_v[:, sl] @ w_o[sl, :], b_v[sl] @ w_o[sl, :]))
  return rates, affine_expansion_rate(w_v @ w_o, b_v @ w_o)


class Reservoir(object):
  """Fixed-size uniform sample of a stream of floats (Algorithm R), plus exact count and sum."""

  def __init__(self, capacity, seed=0):
    self.capacity = int(capacity)
    self.values = np.zeros([self.capacity], np.float32)
    self.count = 0
    self.total = 0.0
    self._rng = np.random.RandomState(seed)

  def add(self, values):
    """Adds a 1-D array of values to the stream."""
    values = np.asarray(values, np.float32).ravel()
    n = len(values)
    if n == 0:
      return
    self.total += float(np.sum(values, dtype=np.float64))
    free = max(0, self.capacity - self.count)
    take = min(free, n)
    if take:
      self.values[self.count:self.count + take] = values[:take]
    rest = values[take:]
    if len(rest):
      # Element k (0-based over the stream) replaces slot r ~ U{0..k} when r < capacity.
      ks = np.arange(self.count + take, self.count + n, dtype=np.float64)
      slots = np.floor(self._rng.random_sample(len(rest)) * (ks + 1)).astype(np.int64)
      keep = slots < self.capacity
      # Later stream elements must win on repeated slots, as in the sequential algorithm.
      idx = slots[keep]
      vals = rest[keep]
      _, last = np.unique(idx[::-1], return_index=True)
      last = len(idx) - 1 - last
      self.values[idx[last]] = vals[last]
    self.count += n

  def sample(self):
    """The kept values (all of them while count <= capacity)."""
    return self.values[:min(self.count, self.capacity)]

  def median(self):
    s = self.sample()
    return float(np.median(s)) if len(s) else float("nan")

  def mean(self):
    return self.total / self.count if self.count else float("nan")


def colour_for(median, thresholds):
  """Blue / yellow / red by the paper's thresholds (low, high)."""
  if median < thresholds[0]:
    return "blue"
  if median > thresholds[1]:
    return "red"
  return "yellow"


# ---------------------------------------------------------------------------------------------
# Inputs.
# ---------------------------------------------------------------------------------------------


class DecodeStats(object):
  """Counts the input lines that were not valid UTF-8 (and where the first one was)."""

  def __init__(self):
    self.lines = 0
    self.first = None

  def decode(self, raw, where):
    """Decodes one line of bytes as UTF-8, replacing what is not UTF-8 (counted).

    As create_pretraining_data does. The tokenizer drops the replacement character U+FFFD, so
    the word pieces are those of tokenization.convert_to_unicode (which ignores such bytes),
    and a latin-1 file gives a count instead of a UnicodeDecodeError traceback.

    Args:
      raw: bytes of one line.
      where: "file:line", remembered for the first undecodable line.

    Returns:
      The line as str.
    """
    try:
      return raw.decode("utf-8")
    except UnicodeDecodeError:
      self.lines += 1
      if self.first is None:
        self.first = where
      return raw.decode("utf-8", errors="replace")

  def warn(self, flag_name):
    """Writes one "warning: ..." line to stderr when some line was not UTF-8."""
    if self.lines:
      sys.stderr.write("warning: --%s: %d line(s) are not valid UTF-8 (first: %s); their "
                       "undecodable bytes were dropped\n" % (flag_name, self.lines, self.first))
      sys.stderr.flush()


def read_documents(paths, decode_stats=None):
  """Yields documents (lists of non-empty lines) from text files; blank lines separate them.

  Args:
    paths: text files (UTF-8; other bytes are replaced and counted in decode_stats).
    decode_stats: DecodeStats, updated (or None).

  Yields:
    Lists of str lines.
  """
  decode_stats = decode_stats or DecodeStats()
  for path in paths:
    doc = []
    with tf.io.gfile.GFile(path, "rb") as f:
      for number, raw in enumerate(f, 1):
        line = decode_stats.decode(raw, "%s:%d" % (path, number)).strip()
        if not line:
          if doc:
            yield doc
          doc = []
        else:
          doc.append(line)
    if doc:
      yield doc


def text_examples(paths, tokenizer, max_seq_length, mask_prob, seed, decode_stats=None):
  """Builds BERT inputs from text: [CLS] A [SEP] B [SEP] from consecutive sentences.

  Consecutive sentences of a document are packed until max_seq_length - 3 word pieces; a pack
  of two or more sentences is split at the sentence boundary nearest its middle into segments
  A and B, a single sentence gives [CLS] A [SEP]. Over-long sentences are truncated. Normal
  tokens become [MASK] with probability mask_prob.

  Args:
    paths: text files.
    tokenizer: FullTokenizer.
    max_seq_length: S.
    mask_prob: masking probability.
    seed: random seed.
    decode_stats: DecodeStats counting the lines that are not UTF-8 (or None).

  Yields:
    (input_ids, segment_ids) lists of ints (unpadded).
  """
  vocab = tokenizer.vocab
  cls_id, sep_id, mask_id = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
  rng = np.random.RandomState(seed)
  budget = max_seq_length - 3

  def emit(sentences):
    if len(sentences) > 1:
      total = sum(len(s) for s in sentences)
      acc, cut, best = 0, 1, None
      for k in range(1, len(sentences)):
        acc += len(sentences[k - 1])
        if best is None or abs(acc - total / 2.0) < best:
          best, cut = abs(acc - total / 2.0), k
      a = [t for s in sentences[:cut] for t in s]
      b = [t for s in sentences[cut:] for t in s]
      ids = [cls_id] + a + [sep_id] + b + [sep_id]
      segs = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    else:
      a = sentences[0][:max_seq_length - 2]
      ids = [cls_id] + a + [sep_id]
      segs = [0] * len(ids)
    if mask_prob > 0:
      for k, t in enumerate(ids):
        if t not in (cls_id, sep_id) and rng.random_sample() < mask_prob:
          ids[k] = mask_id
    return ids, segs

  for doc in read_documents(paths, decode_stats):
    pack, size = [], 0
    for line in doc:
      ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
      if not ids:
        continue
      ids = ids[:budget]
      if pack and size + len(ids) > budget:
        yield emit(pack)
        pack, size = [], 0
      pack.append(ids)
      size += len(ids)
    if pack:
      yield emit(pack)


def tfrecord_examples(paths):
  """Yields (input_ids, segment_ids) of the real (input_mask = 1) tokens of pre-training records."""
  for path in paths:
    for record in tf1.io.tf_record_iterator(path):
      feats = tf.train.Example.FromString(record).features.feature
      ids = list(feats["input_ids"].int64_list.value)
      mask = list(feats["input_mask"].int64_list.value)
      segs = list(feats["segment_ids"].int64_list.value)
      n = int(sum(mask))
      yield ids[:n], segs[:n]


def batches(examples, batch_size, seq_length, num_examples):
  """Pads examples into numpy batches.

  Yields:
    (input_ids, input_mask, segment_ids), int32 arrays [b, seq_length] (b <= batch_size).
  """
  buf = []
  seen = 0
  for ids, segs in examples:
    if seen >= num_examples:
      break
    buf.append((ids[:seq_length], segs[:seq_length]))
    seen += 1
    if len(buf) == batch_size:
      yield _pad(buf, seq_length)
      buf = []
  if buf:
    yield _pad(buf, seq_length)


def _pad(buf, seq_length):
  ids = np.zeros([len(buf), seq_length], np.int32)
  mask = np.zeros_like(ids)
  segs = np.zeros_like(ids)
  for k, (i, s) in enumerate(buf):
    ids[k, :len(i)] = i
    mask[k, :len(i)] = 1
    segs[k, :len(s)] = s
  return ids, mask, segs


def count_frequencies(paths, tokenizer, max_bytes, decode_stats=None):
  """Word-piece id counts over (at most max_bytes of) text files.

  Args:
    paths: text files (UTF-8; other bytes are replaced and counted in decode_stats).
    tokenizer: FullTokenizer.
    max_bytes: stop after this many bytes.
    decode_stats: DecodeStats, updated (or None).

  Returns:
    collections.Counter word-piece id -> count.
  """
  decode_stats = decode_stats or DecodeStats()
  counts = collections.Counter()
  read = 0
  for path in paths:
    with tf.io.gfile.GFile(path, "rb") as f:
      for number, raw in enumerate(f, 1):
        read += len(raw)
        if read > max_bytes:
          return counts
        line = decode_stats.decode(raw, "%s:%d" % (path, number)).strip()
        if line:
          counts.update(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
  return counts


def frequency_ranks(counts):
  """Frequency rank per word-piece id (1 = most frequent; ties share their average rank)."""
  ids = np.array(sorted(counts), np.int64)
  freq = np.array([counts[i] for i in ids], np.float64)
  ranks = rankdata(-freq)
  return dict(zip(ids.tolist(), ranks.tolist()))


# ---------------------------------------------------------------------------------------------
# Model runs.
# ---------------------------------------------------------------------------------------------


class ModelStats(object):
  """Streaming statistics of one model: reservoirs, mixing sums, per-word-piece ratio sums."""

  def __init__(self, config, capacity, seed, vocab_size):
    self.num_layers = config.num_hidden_layers
    self.num_heads = config.num_attention_heads
    self.entropy = [[Reservoir(capacity, seed + 1000 * l + h) for h in range(self.num_heads)]
                    for l in range(self.num_layers)]
    self.jsd = [[Reservoir(capacity, seed + 500000 + 1000 * l + h)
                 for h in range(self.num_heads)] for l in range(self.num_layers)]
    shape = [self.num_layers, len(TOKEN_TYPES), len(ESTIMATORS)]
    self.mix_sum = np.zeros(shape, np.float64)
    self.mix_count = np.zeros(shape[:2], np.int64)
    self.piece_sum = np.zeros([self.num_layers, vocab_size], np.float64)
    self.piece_count = np.zeros([vocab_size], np.int64)
    self.tokens = 0
    self.examples = 0

  def update(self, input_ids, query_mask, token_type, layer_inputs, probs, layer_params,
             special_ids):
    """Adds one batch.

    Args:
      input_ids: [B, T] ints.
      query_mask: [B, T] bool, real tokens.
      token_type: [B, T] index into TOKEN_TYPES[1:] (0 normal, 1 [MASK], 2 [CLS], 3 [SEP]).
      layer_inputs: list of L arrays [B, T, d].
      probs: list of L arrays [B, N, T, T].
      layer_params: list of L dicts (layer_attention_params).
      special_ids: ids excluded from the per-word-piece statistics.
    """
    self.examples += input_ids.shape[0]
    self.tokens += int(query_mask.sum())
    normal_pieces = query_mask & ~np.isin(input_ids, list(special_ids))
    piece_ids = input_ids[normal_pieces]
    np.add.at(self.piece_count, piece_ids, 1)
    prev = None
    for l in range(self.num_layers):
      p = probs[l]
      ent = attention_entropy(p)                     # [B, N, T]
      for h in range(self.num_heads):
        self.entropy[l][h].add(ent[:, h][query_mask])
      if prev is not None:
        jsd = jensen_shannon(p, prev)
        for h in range(self.num_heads):
          self.jsd[l][h].add(jsd[:, h][query_mask])
      prev = p
      ratios = mixing_ratios(layer_inputs[l], p, layer_params[l], self.num_heads)
      stacked = np.stack([ratios[e] for e in ESTIMATORS], -1)   # [B, T, E]
      for t in range(len(TOKEN_TYPES)):
        sel = query_mask if t == 0 else (query_mask & (token_type == t - 1))
        self.mix_sum[l, t] += stacked[sel].sum(0)
        self.mix_count[l, t] += int(sel.sum())
      np.add.at(self.piece_sum[l], piece_ids, ratios["ATTNRES-N"][normal_pieces])

  def mixing_means(self):
    """[L, token types, estimators] mean ratios (NaN where a type never occurred)."""
    with np.errstate(invalid="ignore", divide="ignore"):
      return self.mix_sum / self.mix_count[..., None]


def token_types(input_ids, special):
  """0 normal, 1 [MASK], 2 [CLS], 3 [SEP] per token (indexes TOKEN_TYPES[1:])."""
  out = np.zeros(input_ids.shape, np.int32)
  out[input_ids == special["[MASK]"]] = 1
  out[input_ids == special["[CLS]"]] = 2
  out[input_ids == special["[SEP]"]] = 3
  return out


def analyze_model(checkpoint, config, batch_iter_fn, special, capacity, seed, log_fn=None,
                  total_examples=None):
  """Runs one model over the batches and gathers its statistics.

  Args:
    checkpoint: checkpoint prefix.
    config: modeling.BertConfig.
    batch_iter_fn: function returning an iterator of (input_ids, input_mask, segment_ids).
    special: dict token -> id for [CLS], [SEP], [MASK], [PAD].
    capacity: reservoir size per head.
    seed: seed for the reservoirs.
    log_fn: progress logger.
    total_examples: for the progress line.

  Returns:
    (ModelStats, expansion dict {"per_head": [L][N], "layer": [L]}).
  """
  log_fn = log_fn or tf1.logging.info
  reader = tf.train.load_checkpoint(checkpoint)
  names = set(reader.get_variable_to_shape_map())

  class _Params(dict):
    def __missing__(self, key):
      if key not in names:
        common.fail("--init_checkpoint=%s: variable %s missing" % (checkpoint, key))
      value = reader.get_tensor(key)
      self[key] = value
      return value

  params = _Params()
  layer_params = [layer_attention_params(params, l, config.layer_norm_type)
                  for l in range(config.num_hidden_layers)]
  expansion = {"per_head": [], "layer": []}
  for lp in layer_params:
    per_head, whole = expansion_rates(lp, config.num_attention_heads)
    expansion["per_head"].append(per_head)
    expansion["layer"].append(whole)

  stats = ModelStats(config, capacity, seed, config.vocab_size)
  graph = tf.Graph()
  with graph.as_default():
    ids_ph = tf1.placeholder(tf.int32, [None, None], "input_ids")
    mask_ph = tf1.placeholder(tf.int32, [None, None], "input_mask")
    seg_ph = tf1.placeholder(tf.int32, [None, None], "segment_ids")
    model = modeling.BertModel(config=config, is_training=False, input_ids=ids_ph,
                               input_mask=mask_ph, token_type_ids=seg_ph)
    layers = model.get_all_encoder_layers()
    # Layer l's input: the embeddings, then the previous layer's output (for Pre-LN the raw
    # residual stream; only the last entry carries the final LN, and it is never an input).
    inputs = [model.get_embedding_output()] + layers[:-1]
    fetches = {"inputs": inputs, "probs": model.get_attention_probs()}
    tvars = tf1.global_variables()
    modeling.init_from_checkpoint(checkpoint, tvars, log_fn=lambda s: None)
    init = tf1.global_variables_initializer()
  meter = common.ProgressMeter(total_examples, unit="examples", log_fn=log_fn)
  with tf1.Session(graph=graph) as sess:
    sess.run(init)
    for input_ids, input_mask, segment_ids in batch_iter_fn():
      out = sess.run(fetches, {ids_ph: input_ids, mask_ph: input_mask, seg_ph: segment_ids})
      query_mask = input_mask.astype(bool)
      stats.update(input_ids, query_mask, token_types(input_ids, special), out["inputs"],
                   out["probs"], layer_params,
                   [special[k] for k in ("[CLS]", "[SEP]", "[MASK]", "[PAD]")])
      meter.update(stats.examples)
  meter.update(stats.examples, force=True)
  return stats, expansion


# ---------------------------------------------------------------------------------------------
# Tables, plots, report.
# ---------------------------------------------------------------------------------------------


def head_table(reservoirs, first_layer, thresholds):
  """Rows {layer, head, median, mean, count, rank, colour} for each (layer >= first_layer, head).

  rank: the head's position when the layer's heads are ordered by median (0 = lowest).
  """
  rows = []
  for l in range(first_layer, len(reservoirs)):
    medians = [r.median() for r in reservoirs[l]]
    order = np.argsort(medians, kind="mergesort")
    rank = {int(h): k for k, h in enumerate(order)}
    for h, r in enumerate(reservoirs[l]):
      rows.append({"layer": l, "head": h, "median": medians[h], "mean": r.mean(),
                   "count": r.count, "rank": rank[h], "colour": colour_for(medians[h], thresholds)})
  return rows


def _fmt(x, digits=3):
  if x is None or (isinstance(x, float) and math.isnan(x)):
    return "n/a"
  return ("%." + str(digits) + "f") % x


def write_csv(path, header, rows):
  """Writes rows (lists) with a header, atomically."""
  buf = io.StringIO()
  writer = csv.writer(buf, lineterminator="\n")
  writer.writerow(header)
  for row in rows:
    writer.writerow(row)
  with common.atomic_output(path) as f:
    f.write(buf.getvalue())


def violin_figure(path, labels, tables, reservoirs_list, first_layer, thresholds, title, ylabel):
  """Fig. 4 / Fig. 6 layout: rows = layers (top first), one column per model, heads by median.

  Args:
    path: PNG path (written atomically).
    labels: model names.
    tables: per model, rows of `head_table`.
    reservoirs_list: per model, [L][N] reservoirs.
    first_layer: 0 for entropy, 1 for JSD.
    thresholds: colour thresholds.
    title: figure title.
    ylabel: y axis label.
  """
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  num_layers = max(len(r) for r in reservoirs_list)
  rows = max(1, num_layers - first_layer)
  cols = len(labels)
  max_heads = max(len(r[0]) for r in reservoirs_list)
  fig, axes = plt.subplots(rows, cols, figsize=(max(4.5, 0.45 * max_heads + 1.5) * cols,
                                                1.6 * rows + 1.3), squeeze=False)
  colour_of = {"blue": COLOURS[0], "yellow": COLOURS[1], "red": COLOURS[2]}
  rng = np.random.RandomState(0)
  for c, (label, table, reservoirs) in enumerate(zip(labels, tables, reservoirs_list)):
    for r in range(rows):
      layer = len(reservoirs) - 1 - r
      ax = axes[r][c]
      if layer < first_layer:
        ax.axis("off")
        continue
      entries = sorted([t for t in table if t["layer"] == layer], key=lambda t: t["rank"])
      data, colours, names = [], [], []
      for t in entries:
        sample = reservoirs[layer][t["head"]].sample()
        if len(sample) > PLOT_POINTS_PER_HEAD:
          sample = sample[rng.choice(len(sample), PLOT_POINTS_PER_HEAD, replace=False)]
        if len(sample) < 2 or np.ptp(sample) == 0:
          sample = np.concatenate([sample, sample + 1e-6]) if len(sample) else np.array([0, 1e-6])
        data.append(sample)
        colours.append(colour_of[t["colour"]])
        names.append(str(t["head"]))
      parts = ax.violinplot(data, showmedians=True, showextrema=False)
      for body, colour in zip(parts["bodies"], colours):
        body.set_facecolor(colour)
        body.set_edgecolor("black")
        body.set_alpha(0.85)
      parts["cmedians"].set_color("black")
      ax.set_xticks(range(1, len(names) + 1))
      ax.set_xticklabels(names, fontsize=7)
      ax.tick_params(axis="y", labelsize=7)
      ax.set_ylabel("L%d" % layer, fontsize=8)
      if r == 0:
        ax.set_title(label, fontsize=10)
      if r == rows - 1:
        ax.set_xlabel("head (ordered by median %s)" % ylabel, fontsize=8)
  fig.suptitle(title, fontsize=11)
  fig.tight_layout(rect=(0, 0, 1, 1.0 - 0.55 / (1.6 * rows + 1.3)))
  common.write_figure_png(fig, path)


def mixing_figure(path, labels, mixing):
  """Per-layer mean mixing ratio (all tokens) of each estimator; one panel per estimator."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, len(ESTIMATORS), figsize=(3.0 * len(ESTIMATORS), 3.0))
  for e, (est, ax) in enumerate(zip(ESTIMATORS, axes)):
    for label in labels:
      means = mixing[label]["means"]
      ax.plot(range(len(means)), [100 * means[l][0][e] for l in range(len(means))], marker="o",
              label=label)
    ax.set_title(est, fontsize=9)
    ax.set_xlabel("layer", fontsize=8)
    ax.set_ylim(0, 100)
    ax.tick_params(labelsize=7)
  axes[0].set_ylabel("mixing ratio (%)", fontsize=8)
  axes[-1].legend(fontsize=7)
  fig.tight_layout()
  common.write_figure_png(fig, path)


def _nanmean(values):
  values = [v for v in values if v is not None and not math.isnan(v)]
  return float(np.mean(values)) if values else float("nan")


def spearman_table(stats, ranks):
  """Spearman rho of frequency rank vs mean ATTNRES-N per word piece, per layer and overall.

  Returns:
    dict with "per_layer" (list of floats), "mean_over_layers" (rho of the layer-averaged
    ratio) and "num_pieces".
  """
  if not ranks:
    return {"per_layer": [], "mean_over_layers": float("nan"), "num_pieces": 0}
  seen = np.nonzero(stats.piece_count)[0]
  seen = [i for i in seen.tolist() if i in ranks]
  if not seen:
    return {"per_layer": [], "mean_over_layers": float("nan"), "num_pieces": 0}
  idx = np.array(seen, np.int64)
  r = np.array([ranks[i] for i in seen], np.float64)
  means = stats.piece_sum[:, idx] / stats.piece_count[idx][None, :]
  return {"per_layer": [spearman(r, means[l]) for l in range(means.shape[0])],
          "mean_over_layers": spearman(r, means.mean(0)), "num_pieces": len(seen)}


def spearman(a, b):
  """Spearman's rho with average ranks for ties; NaN when undefined (constant or < 2 values)."""
  return glue_metrics.spearman_corr(a, b, degenerate=float("nan"))


def write_outputs(output_dir, labels, configs, all_stats, expansions, spearmans, meta):
  """Writes the tables, plots, summary.json and report.md.

  Returns:
    The summary dict (also written as summary.json).
  """
  tf.io.gfile.makedirs(output_dir)
  ent_tables = [head_table(s.entropy, 0, ENTROPY_THRESHOLDS) for s in all_stats]
  jsd_tables = [head_table(s.jsd, 1, JSD_THRESHOLDS) for s in all_stats]

  def head_json(tables):
    out = {}
    for label, table in zip(labels, tables):
      layers = collections.OrderedDict()
      for t in table:
        layers.setdefault("layer_%d" % t["layer"], []).append(t["median"])
      out[label] = {"medians": layers,
                    "median_of_medians": _nanmean([float(np.median(v)) for v in layers.values()])
                    if layers else float("nan"),
                    "heads": table}
    return out

  head_header = ["model", "layer", "head", "median", "mean", "count", "rank_in_layer", "colour"]
  for name, tables in (("entropy_medians", ent_tables), ("jsd_medians", jsd_tables)):
    common.write_json_atomic(os.path.join(output_dir, name + ".json"),
                             _clean_json(head_json(tables)))
    write_csv(os.path.join(output_dir, name + ".csv"), head_header,
              [[label, t["layer"], t["head"], "%.6f" % t["median"], "%.6f" % t["mean"],
                t["count"], t["rank"], t["colour"]]
               for label, table in zip(labels, tables) for t in table])

  mixing = collections.OrderedDict()
  mix_rows = []
  for label, s, exp, sp in zip(labels, all_stats, expansions, spearmans):
    means = s.mixing_means()
    overall = {est: _nanmean([means[l, 0, e] for l in range(s.num_layers)])
               for e, est in enumerate(ESTIMATORS)}
    by_type = {tt: {est: _nanmean([means[l, t, e] for l in range(s.num_layers)])
                    for e, est in enumerate(ESTIMATORS)} for t, tt in enumerate(TOKEN_TYPES)}
    mixing[label] = {"means": means.tolist(), "counts": s.mix_count.tolist(),
                     "mean_over_layers": overall, "by_token_type": by_type,
                     "spearman_freq_rank_vs_attnres_n": sp,
                     "expansion_rate": {"per_head": exp["per_head"], "layer": exp["layer"],
                                        "mean_per_head": float(np.mean(exp["per_head"]))}}
    for l in range(s.num_layers):
      for t, tt in enumerate(TOKEN_TYPES):
        for e, est in enumerate(ESTIMATORS):
          mix_rows.append([label, l, tt, est, "%.6f" % means[l, t, e], int(s.mix_count[l, t])])
  mix_json = {"estimators": list(ESTIMATORS), "token_types": list(TOKEN_TYPES),
              "layout": "means[layer][token_type][estimator]", "models": mixing}
  common.write_json_atomic(os.path.join(output_dir, "mixing.json"), _clean_json(mix_json))
  write_csv(os.path.join(output_dir, "mixing.csv"),
            ["model", "layer", "token_type", "estimator", "mean_ratio", "count"], mix_rows)

  violin_figure(os.path.join(output_dir, "entropy.png"), labels, ent_tables,
                [s.entropy for s in all_stats], 0, ENTROPY_THRESHOLDS,
                "Attention entropy (nats) per token\ncolour by median: red > 4.5, "
                "yellow 1.5-4.5, blue < 1.5", "entropy")
  violin_figure(os.path.join(output_dir, "jsd.png"), labels, jsd_tables,
                [s.jsd for s in all_stats], 1, JSD_THRESHOLDS,
                "JSD (log2), head i of layer L vs layer L-1\ncolour by median: blue < 0.25, "
                "yellow 0.25-0.75, red > 0.75", "JSD")
  mixing_figure(os.path.join(output_dir, "mixing.png"), labels, mixing)

  summary = {"labels": labels, "meta": meta,
             "entropy_median_of_heads": {
                 label: [float(np.median([t["median"] for t in table if t["layer"] == l]))
                         for l in range(s.num_layers)]
                 for label, table, s in zip(labels, ent_tables, all_stats)},
             "jsd_median_of_heads": {
                 label: [float(np.median([t["median"] for t in table if t["layer"] == l]))
                         for l in range(1, s.num_layers)]
                 for label, table, s in zip(labels, jsd_tables, all_stats)},
             "mixing_mean_over_layers": {label: mixing[label]["mean_over_layers"]
                                         for label in labels},
             "spearman": {label: mixing[label]["spearman_freq_rank_vs_attnres_n"]
                          for label in labels},
             "expansion_rate_mean_per_head": {
                 label: mixing[label]["expansion_rate"]["mean_per_head"] for label in labels}}
  summary = _clean_json(summary)
  common.write_json_atomic(os.path.join(output_dir, "summary.json"), summary)
  report = render_report(labels, configs, all_stats, ent_tables, jsd_tables, mixing, meta)
  with common.atomic_output(os.path.join(output_dir, "report.md")) as f:
    f.write(report)
  return summary


def _clean_json(obj):
  """NaN -> None, numpy scalars -> Python (JSON has no NaN)."""
  if isinstance(obj, dict):
    return {str(k): _clean_json(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [_clean_json(v) for v in obj]
  if isinstance(obj, (np.floating, float)):
    v = float(obj)
    return None if math.isnan(v) or math.isinf(v) else v
  if isinstance(obj, np.integer):
    return int(obj)
  return obj


def render_report(labels, configs, all_stats, ent_tables, jsd_tables, mixing, meta,
                  image_prefix=""):
  """The markdown report (tables of medians and ratios, links to the PNGs).

  Args:
    labels, configs, all_stats, ent_tables, jsd_tables, mixing, meta: as in write_outputs.
    image_prefix: path prefix of the PNGs relative to where the markdown will live.

  Returns:
    Markdown text.
  """
  out = []
  w = out.append
  w("# Attention analysis\n")
  w("Input: %s; %s examples, %s tokens per model (padding excluded). Entropy in nats (natural "
    "log), JSD in bits (log base 2, 0..1). Medians from reservoirs of at most %d tokens per "
    "head (exact below that).\n" % (meta.get("input"), meta.get("examples"), meta.get("tokens"),
                                   meta.get("max_tokens_per_head", 0)))
  if meta.get("lines_with_undecodable_bytes"):
    w("%d input line(s) were not valid UTF-8; their undecodable bytes were dropped.\n" %
      meta["lines_with_undecodable_bytes"])
  w("| model | checkpoint | layers | hidden | heads | layer_norm_type | residual_attention |")
  w("|---|---|---|---|---|---|---|")
  for label, config, ckpt in zip(labels, configs, meta.get("checkpoints", [""] * len(labels))):
    w("| %s | `%s` | %d | %d | %d | %s | %s |" % (
        label, ckpt, config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
        config.layer_norm_type, config.residual_attention))
  w("")
  w("## Attention entropy (paper Fig. 4)\n")
  w("![entropy](%sentropy.png)\n" % image_prefix)
  w("Median entropy of each head, heads of a layer ordered by median (top layer first); "
    "B/Y/R = blue < 1.5, yellow 1.5-4.5, red > 4.5.\n")
  w(_head_median_table(labels, ent_tables, all_stats, 0))
  w("## Cross-layer JSD (paper Fig. 6)\n")
  w("![jsd](%sjsd.png)\n" % image_prefix)
  w("Median JSD between head i of layer L and head i of layer L-1 (ordered by median); "
    "B/Y/R = blue < 0.25, yellow 0.25-0.75, red > 0.75.\n")
  w(_head_median_table(labels, jsd_tables, all_stats, 1))
  w("## Context mixing (Kobayashi et al. 2021)\n")
  w("![mixing](%smixing.png)\n" % image_prefix)
  w("Mean mixing ratio (%) over all tokens and layers. Kobayashi et al.'s BERT-base values: " +
    ", ".join("%s %.1f" % (k, v) for k, v in KOBAYASHI_BERT_BASE.items()) + ". Pre-LN rows: "
    "ATTNRESLN-N goes through the next LayerNorm (the FFN's input LN), see the docstring.\n")
  w("| model | token type | " + " | ".join(ESTIMATORS) + " |")
  w("|---|---|" + "---|" * len(ESTIMATORS))
  for label in labels:
    by_type = mixing[label]["by_token_type"]
    for tt in TOKEN_TYPES:
      w("| %s | %s | %s |" % (label, tt, " | ".join(
          _fmt(100 * by_type[tt][e] if by_type[tt][e] is not None else float("nan"), 1)
          for e in ESTIMATORS)))
  w("")
  w("Per layer, all tokens (%):\n")
  w("| model | layer | " + " | ".join(ESTIMATORS) + " |")
  w("|---|---|" + "---|" * len(ESTIMATORS))
  for label in labels:
    means = mixing[label]["means"]
    for l in range(len(means)):
      w("| %s | %d | %s |" % (label, l, " | ".join(_fmt(100 * v, 1) for v in means[l][0])))
  w("")
  w("## Frequency and expansion rate\n")
  w("Spearman rho between a word piece's frequency rank (1 = most frequent, from %s) and its "
    "mean ATTNRES-N ratio (Kobayashi et al.: about -0.84 for BERT-base). Expansion rate of the "
    "value-output maps, ||[[W,0],[b,1]]||_F / sqrt(d + 1) (1 = the identity map; Kobayashi et "
    "al.: BERT-base whole layer map, mean over layers 0.88).\n" % meta.get("frequency_corpus"))
  w("| model | word pieces | rho (mean over layers) | rho per layer | expansion rate per head "
    "(mean) | per layer (mean over heads) | whole layer map |")
  w("|---|---|---|---|---|---|---|")
  for label in labels:
    sp = mixing[label]["spearman_freq_rank_vs_attnres_n"]
    ex = mixing[label]["expansion_rate"]
    w("| %s | %d | %s | %s | %s | %s | %s |" % (
        label, sp["num_pieces"], _fmt(sp["mean_over_layers"]),
        ", ".join(_fmt(v) for v in sp["per_layer"]) or "n/a", _fmt(ex["mean_per_head"]),
        ", ".join(_fmt(float(np.mean(h))) for h in ex["per_head"]),
        ", ".join(_fmt(v) for v in ex["layer"])))
  w("")
  return "\n".join(out) + "\n"


def _head_median_table(labels, tables, all_stats, first_layer):
  lines = ["| model | layer | medians (heads ordered by median: head=median colour) |",
           "|---|---|---|"]
  for label, table, s in zip(labels, tables, all_stats):
    for l in range(s.num_layers - 1, first_layer - 1, -1):
      entries = sorted([t for t in table if t["layer"] == l], key=lambda t: t["rank"])
      lines.append("| %s | %d | %s |" % (label, l, " ".join(
          "h%d=%s%s" % (t["head"], _fmt(t["median"], 2), t["colour"][0].upper())
          for t in entries)))
  return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Main.
# ---------------------------------------------------------------------------------------------


def _split(value):
  return [v.strip() for v in (value or "").split(",") if v.strip()]


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  if not FLAGS.init_checkpoint:
    common.fail("--init_checkpoint is required")
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  common.check_output_dir(FLAGS.output_dir, "output_dir")
  # One analysis per directory: two would leave a mix of each other's report, plots and tables.
  common.OutputDirLock(FLAGS.output_dir, "output_dir").acquire()
  if bool(FLAGS.input_text) == bool(FLAGS.input_tfrecord):
    common.fail("--input_text or --input_tfrecord: give exactly one of them")
  for name in ("num_examples", "batch_size", "max_seq_length", "max_tokens_per_head"):
    if getattr(FLAGS, name) < 1:
      common.fail("--%s=%d: must be >= 1" % (name, getattr(FLAGS, name)))
  if not 0.0 <= FLAGS.mask_prob < 1.0:
    common.fail("--mask_prob=%g: must be in [0, 1)" % FLAGS.mask_prob)
  common.require_file(FLAGS.vocab_file, "vocab_file")

  checkpoints_in = _split(FLAGS.init_checkpoint)
  checkpoints = [export_utils.resolve_checkpoint(c) for c in checkpoints_in]
  labels = _split(FLAGS.labels) or [
      os.path.basename(os.path.normpath(c if tf.io.gfile.isdir(c) else os.path.dirname(c)))
      for c in checkpoints_in]
  if len(labels) != len(checkpoints):
    common.fail("--labels=%s: %d labels for %d checkpoints" %
                (FLAGS.labels, len(labels), len(checkpoints)))
  if len(set(labels)) != len(labels):
    common.fail("--labels=%s: labels must be distinct" % ",".join(labels))
  config_files = _split(FLAGS.bert_config_file)
  if not config_files:
    config_files = [os.path.join(os.path.dirname(c), "bert_config.json") for c in checkpoints]
  elif len(config_files) == 1:
    config_files = config_files * len(checkpoints)
  elif len(config_files) != len(checkpoints):
    common.fail("--bert_config_file: %d files for %d checkpoints" %
                (len(config_files), len(checkpoints)))
  configs = []
  for path in config_files:
    common.require_file(path, "bert_config_file")
    try:
      configs.append(modeling.BertConfig.from_json_file(path))
    except ValueError as e:
      common.fail("--bert_config_file: %s" % e)

  # The smallest vocab_size of the models bounds the ids (the same vocab feeds all of them).
  smallest = min(range(len(configs)), key=lambda k: configs[k].vocab_size)
  tokenizer = tokenization.checked_tokenizer(
      FLAGS.vocab_file, FLAGS.do_lower_case, init_checkpoint=checkpoints_in[0],
      vocab_size=configs[smallest].vocab_size, config_name=config_files[smallest])
  for checkpoint in checkpoints_in[1:]:
    # checked_tokenizer takes one checkpoint name; the others get its casing check too.
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, checkpoint)
  special = {}
  for tok in ("[PAD]", "[CLS]", "[SEP]", "[MASK]"):
    if tok not in tokenizer.vocab:
      common.fail("--vocab_file=%s: no %s token" % (FLAGS.vocab_file, tok))
    special[tok] = tokenizer.vocab[tok]

  text_decode_stats = [DecodeStats()]   # of the latest pass over --input_text
  freq_decode_stats = DecodeStats()
  if FLAGS.input_text:
    text_files = common.expand_input_files(FLAGS.input_text, "input_text")
    seq_length = FLAGS.max_seq_length

    def source():
      # Every model reads the same examples: the count of the latest pass is that of each.
      text_decode_stats[0] = DecodeStats()
      return text_examples(text_files, tokenizer, seq_length, FLAGS.mask_prob, FLAGS.seed,
                           text_decode_stats[0])
    input_desc = "text %s" % ", ".join(text_files)
  else:
    record_files = common.expand_input_files(FLAGS.input_tfrecord, "input_tfrecord")
    first = next(iter(tf1.io.tf_record_iterator(record_files[0])), None)
    if first is None:
      common.fail("--input_tfrecord=%s: empty file" % record_files[0])
    seq_length = len(tf.train.Example.FromString(first).features.feature["input_ids"]
                     .int64_list.value)
    source = lambda: tfrecord_examples(record_files)
    input_desc = "TFRecords %s" % ", ".join(record_files)
  for path, config in zip(config_files, configs):
    if seq_length > config.max_position_embeddings:
      common.fail("sequence length %d exceeds max_position_embeddings %d of %s" % (
          seq_length, config.max_position_embeddings, path))

  freq_files = FLAGS.frequency_corpus or FLAGS.input_text
  ranks = {}
  if freq_files and freq_files.lower() != "none":
    start = time.time()
    counts = count_frequencies(common.expand_input_files(freq_files, "frequency_corpus"),
                               tokenizer, int(FLAGS.frequency_max_mb * 1e6), freq_decode_stats)
    freq_decode_stats.warn("frequency_corpus" if FLAGS.frequency_corpus else "input_text")
    for tok in special.values():
      counts.pop(tok, None)
    ranks = frequency_ranks(counts)
    tf1.logging.info("Frequency corpus: %d word pieces, %d distinct (%.1f s)",
                     sum(counts.values()), len(counts), time.time() - start)

  batch_fn = lambda: batches(source(), FLAGS.batch_size, seq_length, FLAGS.num_examples)
  all_stats, expansions, spearmans = [], [], []
  for label, ckpt, config in zip(labels, checkpoints, configs):
    tf1.logging.info("Analysing %s (%s)", label, ckpt)
    stats, expansion = analyze_model(ckpt, config, batch_fn, special, FLAGS.max_tokens_per_head,
                                     FLAGS.seed, total_examples=FLAGS.num_examples)
    if stats.examples == 0:
      common.fail("%s: no examples" % input_desc)
    all_stats.append(stats)
    expansions.append(expansion)
    spearmans.append(spearman_table(stats, ranks))
  text_decode_stats[0].warn("input_text")
  meta = {"input": input_desc, "examples": all_stats[0].examples, "tokens": all_stats[0].tokens,
          "max_tokens_per_head": FLAGS.max_tokens_per_head, "checkpoints": checkpoints,
          "seq_length": seq_length,
          "frequency_corpus": freq_files if ranks else "none (Spearman skipped)",
          # Lines that were not UTF-8 (their bad bytes dropped): of the analysed input, and
          # of the frequency corpus.
          "lines_with_undecodable_bytes": text_decode_stats[0].lines,
          "frequency_corpus_lines_with_undecodable_bytes": freq_decode_stats.lines}
  write_outputs(FLAGS.output_dir, labels, configs, all_stats, expansions, spearmans, meta)
  print("Wrote %s (report.md, entropy.png, jsd.png, mixing.png, *.csv, *.json)" %
        FLAGS.output_dir)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
