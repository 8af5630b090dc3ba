"""Independent float64 NumPy reference of the encoder-decoder translation model (no TensorFlow).

Written from docs/translation.md only (the contract), without reading nmt_modeling.py, so that tests
can compare the TF model against it. Inference math: there is no dropout anywhere.

Weights are a dict from the doc's variable names to arrays (kernels in TF [in, out] layout), e.g.
'embeddings/word_embeddings', 'encoder/layer_0/attention/self/query/kernel',
'decoder/layer_1/cross_attention/output/omega'. `config` is a dict (or an object with attributes)
with the NmtConfig fields of the doc.

Conventions (the doc's, plus how this file reads the points the doc leaves open):

Embedding: x = E[ids] * sqrt(D) + P[0..len-1] (the same table E for source and target; pad
  positions are embedded too, they are only masked as attention keys). P: half = D / 2,
  inv_freq[i] = exp(-i ln(10000) / max(half - 1, 1)), P[p, :half] = sin(p inv_freq),
  P[p, half:] = cos(p inv_freq). (The max(., 1) only matters for D = 2, where the doc's formula
  divides by zero; it is tensor2tensor's guard.)

Attention (`attention`): q = from Wq + bq, k = to Wk + bk, v = to Wv + bv; s = q k^T / sqrt(H)
  [B, N, F, T]; s += s_prev when the chain hands on scores (residual 'sum' / 'mean', layer > 0);
  handed-on scores = s (before the mask and the mean's division); softmax input = s / (l + 1) for
  'mean' (l = 0-based layer index in that chain), s otherwise, plus -10000 where the mask is 0;
  context = probs v with the heads concatenated [B, F, D]; then the caller applies
  '<sub-layer>/output/dense'. With residual 'none' the scores returned are the layer's own s.

Three independent score chains: encoder self-attention (mask: source ids != 0 on the key axis),
  decoder self-attention (mask: causal, key j visible to query i iff j <= i; no target padding
  mask: padding is on the right, so real queries never see it), cross-attention (mask: source
  ids != 0 on the key axis). The decoder's two chains both use the decoder layer index as l.

Sub-layers (x: input, f: attention incl. its output dense, or the FFN dense_2(act(dense_1(x)))):
  post:  LN(x + f(x))
  admin: LN(x * omega + f(x))          omega: the [D] variable '<sub-layer>/output/omega'
  pre:   x + f(LN(x)), and each stack ends with '{encoder,decoder}/final_layer_norm'.
  The LayerNorm of a sub-layer is '<sub-layer>/output/LayerNorm' in all three cases (for pre it
  is the LN applied to the sub-layer's input). Sub-layer name prefixes:
    encoder/layer_L/attention     (Q/K/V under encoder/layer_L/attention/self)
    encoder/layer_L               (FFN: intermediate/dense, output/dense, output/LayerNorm, output/omega)
    decoder/layer_L/self_attention  (Q/K/V under .../self_attention/self)
    decoder/layer_L/cross_attention (Q/K/V under .../cross_attention/source; Q from the decoder
                                     state (LN'd for pre), K/V from the final encoder output,
                                     i.e. after encoder/final_layer_norm for pre, never LN'd again)
    decoder/layer_L               (FFN)
Logits: h E^T (no output bias), h the final decoder output.

ADMIN profile (`admin_profile`): always uses the admin sub-layer math LN(x * omega_i + f(x)) with
  the scalar omega_i = r (the weights' omega variables, if any, are ignored; gamma/beta and all
  other variables are the weights'). r starts at 1 for each stack; after sub-layer i
  r = sqrt(Var[x * omega_i] + Var[f_i(x)]) where each Var is ONE population variance over all
  elements (positions x features pooled) of the non-padding positions: source ids != 0 for the
  encoder, target_input_ids != 0 for the decoder (bos = 2, so position 0 counts). The encoder runs
  first and the decoder's cross-attention reads the profiled encoder's output. Accepted for
  layer_norm_type 'post' and 'admin' (the math is the same); 'pre' has no omega and raises.

Label smoothing (`label_smoothed_loss`): fairseq / tensor2tensor convention, the eps mass spread
  uniformly over all V classes including the gold one:
  loss_t = -(1 - eps) log p(y_t) - eps / V * sum_v log p(v), averaged over targets != pad_id.
"""

import math

import numpy as np

LAYER_NORM_EPSILON = 1e-12
MASK_ADDER = -10000.0
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

_erf = np.frompyfunc(math.erf, 1, 1)


# ---------------------------------------------------------------------------------------------------
# Small pieces.
# ---------------------------------------------------------------------------------------------------


def _cfg(config, key, default=None):
  if isinstance(config, dict):
    value = config.get(key, default)
  else:
    value = getattr(config, key, default)
  return default if value is None else value


def get_activation(name):
  """hidden_act name -> NumPy function ("relu" default; gelu = tanh approximation as modeling.py)."""
  name = (name or "relu").lower()
  table = {
      "relu": lambda x: np.maximum(x, 0.0),
      "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
      "gelu_exact": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64)),
      "tanh": np.tanh,
      "linear": lambda x: x,
  }
  if name not in table:
    raise ValueError("unsupported hidden_act %r" % name)
  return table[name]


def _settings(config):
  hidden = int(_cfg(config, "hidden_size"))
  heads = int(_cfg(config, "num_attention_heads"))
  residual = str(_cfg(config, "residual_attention", "none")).lower()
  ln_type = str(_cfg(config, "layer_norm_type", "post")).lower()
  if residual not in ("none", "sum", "mean"):
    raise ValueError("residual_attention must be none, sum or mean, got %r" % residual)
  if ln_type not in ("post", "pre", "admin"):
    raise ValueError("layer_norm_type must be post, pre or admin, got %r" % ln_type)
  if hidden % heads:
    raise ValueError("hidden_size %d not divisible by num_attention_heads %d" % (hidden, heads))
  return {
      "hidden": hidden,
      "heads": heads,
      "residual": residual,
      "ln_type": ln_type,
      "act": get_activation(_cfg(config, "hidden_act", "relu")),
      "enc_layers": int(_cfg(config, "num_encoder_layers")),
      "dec_layers": int(_cfg(config, "num_decoder_layers")),
  }


def _w(weights, name):
  return np.asarray(weights[name], dtype=np.float64)


def _dense(weights, prefix, x):
  return x @ _w(weights, prefix + "/kernel") + _w(weights, prefix + "/bias")


def sinusoid_positions(length, hidden_size):
  """Sinusoidal position table of the doc.

  Args:
    length: number of positions (0 .. length - 1).
    hidden_size: D (even).

  Returns:
    float64 [length, D]: sines in the first half, cosines in the second.
  """
  if hidden_size % 2:
    raise ValueError("hidden_size must be even for sinusoid positions, got %d" % hidden_size)
  half = hidden_size // 2
  inv_freq = np.exp(-np.arange(half, dtype=np.float64) * math.log(10000.0) / max(half - 1, 1))
  angles = np.arange(length, dtype=np.float64)[:, None] * inv_freq[None, :]
  return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def layer_norm(x, gamma, beta, epsilon=LAYER_NORM_EPSILON):
  """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis (population variance)."""
  x = np.asarray(x, dtype=np.float64)
  mean = x.mean(axis=-1, keepdims=True)
  var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
  return (x - mean) / np.sqrt(var + epsilon) * np.asarray(gamma, np.float64) + np.asarray(
      beta, np.float64)


def _ln(weights, prefix, x):
  return layer_norm(x, _w(weights, prefix + "/gamma"), _w(weights, prefix + "/beta"))


def softmax(x):
  """Numerically stable softmax over the last axis."""
  x = x - x.max(axis=-1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
  """Numerically stable log-softmax over the last axis (float64)."""
  x = np.asarray(x, dtype=np.float64)
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def embed(weights, config, ids):
  """E[ids] * sqrt(D) + P[position]: [B, L] int -> [B, L, D] float64."""
  ids = np.asarray(ids)
  hidden = int(_cfg(config, "hidden_size"))
  table = _w(weights, "embeddings/word_embeddings")
  return table[ids] * math.sqrt(hidden) + sinusoid_positions(ids.shape[1], hidden)[None]


def padding_mask(from_len, key_ids):
  """[B, from_len, T] mask: 1 where key_ids != pad (same for every query)."""
  keys = (np.asarray(key_ids) != PAD_ID).astype(np.float64)
  return np.repeat(keys[:, None, :], from_len, axis=1)


def causal_mask(batch, length):
  """[B, L, L] mask: key j visible to query i iff j <= i."""
  return np.repeat(np.tril(np.ones((length, length)))[None], batch, axis=0)


# ---------------------------------------------------------------------------------------------------
# Attention and sub-layers.
# ---------------------------------------------------------------------------------------------------


def attention(weights, prefix, from_x, to_x, mask, prev_scores, divisor, num_heads):
  """Multi-head attention of the doc, up to (not including) the output dense.

  Args:
    weights: variable dict.
    prefix: where query/key/value live, e.g. "encoder/layer_0/attention/self",
      "decoder/layer_1/self_attention/self", "decoder/layer_0/cross_attention/source".
    from_x: [B, F, D] (queries).
    to_x: [B, T, D] (keys and values).
    mask: [B, F, T] of 1 (visible) / 0 (adder -10000).
    prev_scores: None or [B, N, F, T], the previous layer's handed-on scores of the same chain
      (added to this layer's scaled scores).
    divisor: None or a number; the softmax input is scores / divisor (the 'mean' variant's l + 1).
    num_heads: N.

  Returns:
    (context [B, F, D] with heads concatenated, handed-on scores [B, N, F, T] before the mask and
    before the division).
  """
  from_x = np.asarray(from_x, np.float64)
  to_x = np.asarray(to_x, np.float64)
  batch, from_len, hidden = from_x.shape
  to_len = to_x.shape[1]
  head = hidden // num_heads

  def split(t, length):  # [B, L, D] -> [B, N, L, H]
    return t.reshape(batch, length, num_heads, head).transpose(0, 2, 1, 3)

  q = split(_dense(weights, prefix + "/query", from_x), from_len)
  k = split(_dense(weights, prefix + "/key", to_x), to_len)
  v = split(_dense(weights, prefix + "/value", to_x), to_len)
  scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(head)
  if prev_scores is not None:
    scores = scores + np.asarray(prev_scores, np.float64)
  logits = scores if divisor is None else scores / float(divisor)
  adder = (1.0 - np.asarray(mask, np.float64))[:, None, :, :] * MASK_ADDER
  probs = softmax(logits + adder)
  context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, from_len, hidden)
  return context, scores


class _Profiler(object):
  """ADMIN profiling state of one stack: r, the recorded omegas and the non-padding positions."""

  def __init__(self, keep):
    self.keep = np.asarray(keep, bool)  # [B, L]
    self.r = 1.0
    self.omegas = []

  def step(self, x, fx):
    omega = self.r
    self.omegas.append(float(omega))
    var_x = np.var((x * omega)[self.keep])
    var_f = np.var(fx[self.keep])
    self.r = math.sqrt(var_x + var_f)
    return omega


def _sublayer(weights, s, name, x, fn, profiler=None):
  """Residual sub-layer '<name>' (LN '<name>/output/LayerNorm', omega '<name>/output/omega')."""
  ln_name = name + "/output/LayerNorm"
  if s["ln_type"] == "pre":
    return x + fn(_ln(weights, ln_name, x))
  fx = fn(x)
  if profiler is not None:
    omega = profiler.step(x, fx)
  elif s["ln_type"] == "admin":
    omega = _w(weights, name + "/output/omega")
  else:
    omega = 1.0
  return _ln(weights, ln_name, x * omega + fx)


def _ffn(weights, s, layer_prefix):
  def fn(x):
    return _dense(weights, layer_prefix + "/output/dense",
                  s["act"](_dense(weights, layer_prefix + "/intermediate/dense", x)))
  return fn


class _Chain(object):
  """One residual-attention score chain."""

  def __init__(self, residual):
    self.residual = residual
    self.prev = None
    self.scores = []

  def args(self, layer):
    prev = self.prev if self.residual != "none" else None
    divisor = layer + 1 if self.residual == "mean" else None
    return prev, divisor

  def hand_on(self, scores):
    self.prev = scores
    self.scores.append(scores)


def _attention_fn(weights, s, name, qkv_prefix, chain, layer, mask, to_x=None):
  def fn(x):
    prev, divisor = chain.args(layer)
    context, scores = attention(weights, qkv_prefix, x, x if to_x is None else to_x, mask, prev,
                                divisor, s["heads"])
    chain.hand_on(scores)
    return _dense(weights, name + "/output/dense", context)
  return fn


# ---------------------------------------------------------------------------------------------------
# Stacks.
# ---------------------------------------------------------------------------------------------------


def _encode(weights, config, source_ids, profiler=None):
  s = _settings(config)
  source_ids = np.asarray(source_ids)
  batch, src_len = source_ids.shape
  mask = padding_mask(src_len, source_ids)
  chain = _Chain(s["residual"])
  x = embed(weights, config, source_ids)
  for layer in range(s["enc_layers"]):
    pre = "encoder/layer_%d" % layer
    x = _sublayer(weights, s, pre + "/attention", x,
                  _attention_fn(weights, s, pre + "/attention", pre + "/attention/self", chain,
                                layer, mask), profiler)
    x = _sublayer(weights, s, pre, x, _ffn(weights, s, pre), profiler)
  if s["ln_type"] == "pre":
    x = _ln(weights, "encoder/final_layer_norm", x)
  return x, chain.scores


def _decode(weights, config, encoder_output, source_ids, target_input_ids, profiler=None):
  s = _settings(config)
  source_ids = np.asarray(source_ids)
  target_input_ids = np.asarray(target_input_ids)
  batch, tgt_len = target_input_ids.shape
  self_mask = causal_mask(batch, tgt_len)
  cross_mask = padding_mask(tgt_len, source_ids)
  self_chain = _Chain(s["residual"])
  cross_chain = _Chain(s["residual"])
  encoder_output = np.asarray(encoder_output, np.float64)
  x = embed(weights, config, target_input_ids)
  for layer in range(s["dec_layers"]):
    pre = "decoder/layer_%d" % layer
    name = pre + "/self_attention"
    x = _sublayer(weights, s, name, x,
                  _attention_fn(weights, s, name, name + "/self", self_chain, layer, self_mask),
                  profiler)
    name = pre + "/cross_attention"
    x = _sublayer(weights, s, name, x,
                  _attention_fn(weights, s, name, name + "/source", cross_chain, layer, cross_mask,
                                to_x=encoder_output), profiler)
    x = _sublayer(weights, s, pre, x, _ffn(weights, s, pre), profiler)
  if s["ln_type"] == "pre":
    x = _ln(weights, "decoder/final_layer_norm", x)
  logits = x @ _w(weights, "embeddings/word_embeddings").T
  return {"decoder_output": x, "logits": logits, "self_attention_scores": self_chain.scores,
          "cross_attention_scores": cross_chain.scores}


def encode(weights, config, source_ids):
  """Encoder forward.

  Args:
    weights: variable dict.
    config: NmtConfig fields (dict or object).
    source_ids: int [B, S], 0 = padding.

  Returns:
    (encoder_output [B, S, D] (after encoder/final_layer_norm for pre), list of the per-layer
    handed-on self-attention scores [B, N, S, S]).
  """
  return _encode(weights, config, source_ids)


def decode_outputs(weights, config, encoder_output, source_ids, target_input_ids):
  """Decoder forward (teacher forcing) with everything: dict with decoder_output [B, T, D],
  logits [B, T, V], self_attention_scores and cross_attention_scores (per-layer handed-on scores)."""
  return _decode(weights, config, encoder_output, source_ids, target_input_ids)


def decode(weights, config, encoder_output, source_ids, target_input_ids):
  """Decoder forward with teacher forcing: logits [B, T, V] (causal self-attention mask, cross
  attention masked by source_ids != 0)."""
  return _decode(weights, config, encoder_output, source_ids, target_input_ids)["logits"]


def forward(weights, config, source_ids, target_input_ids):
  """Full model: logits [B, T, V] = decode(encode(source_ids), target_input_ids)."""
  encoder_output, _ = encode(weights, config, source_ids)
  return decode(weights, config, encoder_output, source_ids, target_input_ids)


def admin_profile(weights, config, source_ids, target_input_ids):
  """ADMIN profile of the doc (see the module docstring).

  Returns:
    {"encoder": [omega per sub-layer: attention_0, ffn_0, attention_1, ...],
     "decoder": [self_0, cross_0, ffn_0, self_1, ...]} (python floats; each list starts with 1.0).
  """
  s = _settings(config)
  if s["ln_type"] == "pre":
    raise ValueError("the ADMIN profile needs layer_norm_type admin (or post), not pre")
  source_ids = np.asarray(source_ids)
  target_input_ids = np.asarray(target_input_ids)
  enc_profiler = _Profiler(source_ids != PAD_ID)
  encoder_output, _ = _encode(weights, config, source_ids, enc_profiler)
  dec_profiler = _Profiler(target_input_ids != PAD_ID)
  _decode(weights, config, encoder_output, source_ids, target_input_ids, dec_profiler)
  return {"encoder": enc_profiler.omegas, "decoder": dec_profiler.omegas}


def omega_names(config):
  """Omega variable names in profile order: {"encoder": [...], "decoder": [...]}."""
  enc, dec = [], []
  for layer in range(int(_cfg(config, "num_encoder_layers"))):
    pre = "encoder/layer_%d" % layer
    enc += [pre + "/attention/output/omega", pre + "/output/omega"]
  for layer in range(int(_cfg(config, "num_decoder_layers"))):
    pre = "decoder/layer_%d" % layer
    dec += [pre + "/self_attention/output/omega", pre + "/cross_attention/output/omega",
            pre + "/output/omega"]
  return {"encoder": enc, "decoder": dec}


def apply_admin_profile(weights, config, profile):
  """A copy of `weights` with each omega variable set to omega_i * ones(D) from `profile`."""
  hidden = int(_cfg(config, "hidden_size"))
  out = dict(weights)
  names = omega_names(config)
  for stack in ("encoder", "decoder"):
    if len(profile[stack]) != len(names[stack]):
      raise ValueError("%s profile has %d values, the config needs %d"
                       % (stack, len(profile[stack]), len(names[stack])))
    for name, value in zip(names[stack], profile[stack]):
      out[name] = np.full((hidden,), value, dtype=np.float32)
  return out


# ---------------------------------------------------------------------------------------------------
# Variables and loss.
# ---------------------------------------------------------------------------------------------------


def variable_shapes(config):
  """Every variable name -> shape of the doc for config's layer_norm_type."""
  d = int(_cfg(config, "hidden_size"))
  f = int(_cfg(config, "intermediate_size"))
  ln_type = str(_cfg(config, "layer_norm_type", "post")).lower()
  shapes = {"embeddings/word_embeddings": (int(_cfg(config, "vocab_size")), d)}

  def attn(name, qkv):
    for part in ("query", "key", "value"):
      shapes["%s/%s/%s/kernel" % (name, qkv, part)] = (d, d)
      shapes["%s/%s/%s/bias" % (name, qkv, part)] = (d,)
    shapes[name + "/output/dense/kernel"] = (d, d)
    shapes[name + "/output/dense/bias"] = (d,)
    norm(name)

  def ffn(name):
    shapes[name + "/intermediate/dense/kernel"] = (d, f)
    shapes[name + "/intermediate/dense/bias"] = (f,)
    shapes[name + "/output/dense/kernel"] = (f, d)
    shapes[name + "/output/dense/bias"] = (d,)
    norm(name)

  def norm(name):
    shapes[name + "/output/LayerNorm/gamma"] = (d,)
    shapes[name + "/output/LayerNorm/beta"] = (d,)
    if ln_type == "admin":
      shapes[name + "/output/omega"] = (d,)

  for layer in range(int(_cfg(config, "num_encoder_layers"))):
    pre = "encoder/layer_%d" % layer
    attn(pre + "/attention", "self")
    ffn(pre)
  for layer in range(int(_cfg(config, "num_decoder_layers"))):
    pre = "decoder/layer_%d" % layer
    attn(pre + "/self_attention", "self")
    attn(pre + "/cross_attention", "source")
    ffn(pre)
  if ln_type == "pre":
    for stack in ("encoder", "decoder"):
      shapes[stack + "/final_layer_norm/gamma"] = (d,)
      shapes[stack + "/final_layer_norm/beta"] = (d,)
  return shapes


def random_weights(config, seed=0, dtype=np.float32):
  """Random values for every variable of `variable_shapes(config)`, scaled so tests are sensitive.

  Embeddings N(0, D^-1/2) (so E * sqrt(D) has unit scale and the logits are of order 1); kernels
  N(0, 1/fan_in); biases 0.1 N(0, 1); LayerNorm gamma 1 + 0.2 N(0, 1), beta 0.1 N(0, 1); omega
  (admin only) uniform in [0.6, 1.4] per element (positive, around 1, not constant).

  Returns:
    dict name -> array of `dtype` (float32 like a checkpoint).
  """
  rng = np.random.RandomState(seed)
  hidden = int(_cfg(config, "hidden_size"))
  out = {}
  for name, shape in sorted(variable_shapes(config).items()):
    if name.endswith("/gamma"):
      value = 1.0 + 0.2 * rng.randn(*shape)
    elif name.endswith("/beta") or name.endswith("/bias"):
      value = 0.1 * rng.randn(*shape)
    elif name.endswith("/kernel"):
      value = rng.randn(*shape) / math.sqrt(shape[0])
    elif name.endswith("/omega"):
      value = rng.uniform(0.6, 1.4, size=shape)
    elif name == "embeddings/word_embeddings":
      value = rng.randn(*shape) / math.sqrt(hidden)
    else:
      raise AssertionError(name)
    out[name] = value.astype(dtype)
  return out


def label_smoothed_loss(logits, target_ids, epsilon, pad_id=PAD_ID):
  """Label-smoothed cross entropy, mean over the target tokens != pad_id.

  Convention (fairseq `label_smoothed_nll_loss` with eps_i = eps / V, tensor2tensor): the eps mass
  is spread uniformly over ALL V classes, the gold one included, so per token
    loss = (1 - eps) * (-log p_y) + eps * mean_v(-log p_v)
         = -(1 - eps) log p_y - eps / V * sum_v log p_v.
  (Equivalently the cross entropy against q = (1 - eps) onehot(y) + eps / V.)

  Args:
    logits: [B, T, V].
    target_ids: int [B, T].
    epsilon: smoothing in [0, 1).
    pad_id: targets equal to it are ignored.

  Returns:
    float: the mean loss (0.0 when there is no non-pad target).
  """
  logp = log_softmax(logits)
  target_ids = np.asarray(target_ids)
  keep = target_ids != pad_id
  nll = -np.take_along_axis(logp, target_ids[..., None], axis=-1)[..., 0]
  smooth = -logp.mean(axis=-1)
  per_token = (1.0 - epsilon) * nll + epsilon * smooth
  count = int(keep.sum())
  if count == 0:
    return 0.0
  return float(per_token[keep].sum() / count)
