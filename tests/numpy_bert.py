"""Independent NumPy reference of the BERT / RealFormer encoder forward pass (no TensorFlow).

Written from the paper (He et al. 2021, §3: the residual attention equations) and the official BERT math, without
looking at this repository's modeling.py, so that tests can compare the TF model against it.

Two entry points:
- `bert_forward(params, config, ...)`: parameters keyed by the official BERT TF checkpoint variable
  names (kernels in TF [in, out] layout); supports `residual_attention` in {none, sum, mean} and
  `layer_norm_type` in {post, pre}.
- `hf_bert_forward(hf_tensors, hf_config, ...)`: a second, separately written forward on Hugging Face
  BERT tensor names and layout (Linear weights [out, in]), post-LN only. Used to check the HF -> TF
  converter end to end without going through its name mapping.

Conventions of `bert_forward` (the TF model must follow the same ones):

Embeddings: word + token_type + position (rows 0..S-1), then LayerNorm
  ('bert/embeddings/LayerNorm/{gamma,beta}', epsilon 1e-12). As in official BERT, this LayerNorm is
  applied for BOTH layer_norm_type values (pre-LN keeps it too).

Attention (per layer n, per head; Q, K, V from 'attention/self/{query,key,value}'):
  S_n = Q K^T / sqrt(d_head)                       [B, N, F, T]
  none: A_n = S_n;  sum/mean: A_0 = S_0, A_n = S_n + A_{n-1} (running SUM of scaled scores, no mask)
  softmax input = A_n (none, sum) or A_n / (n + 1) (mean), plus mask adder (1 - mask[b, t]) * -10000.
  Returned per layer: attention_scores[n] = A_n (what is handed to layer n + 1), attention_probs[n] =
  the softmax output.

Post-LN layer (official BERT):
  a = dense_o(Attn(x))                              'attention/output/dense'
  x = LN_a(x + a)                                   'attention/output/LayerNorm'
  f = dense_2(act(dense_1(x)))                      'intermediate/dense', 'output/dense'
  x = LN_f(x + f)                                   'output/LayerNorm'
  all_encoder_layers[n] = x after layer n; sequence_output = all_encoder_layers[-1].

Pre-LN layer (GPT-2 style; same variable names, no new ones except the final LN):
  x = x + dense_o(Attn(LN_a(x)))                    LN_a = 'attention/output/LayerNorm'
  x = x + dense_2(act(dense_1(LN_f(x))))            LN_f = 'output/LayerNorm'
  After the last layer one final LayerNorm with variables 'bert/encoder/final_layer_norm/{gamma,beta}'.
  all_encoder_layers[n] = raw residual stream after layer n for n < L - 1; the LAST entry is the final
  LayerNorm applied to the residual stream after layer L - 1; sequence_output = all_encoder_layers[-1].

Pooler: pooled_output = tanh(sequence_output[:, 0] @ kernel + bias) with 'bert/pooler/dense/*'.

hidden_act: "gelu" = tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) (official BERT's
gelu), "gelu_exact" = 0.5x(1 + erf(x / sqrt(2))) (Hugging Face's "gelu"), "relu", "tanh".
"""

import math

import numpy as np

LAYER_NORM_EPSILON = 1e-12
MASK_ADDER = -10000.0
FINAL_LAYER_NORM = "bert/encoder/final_layer_norm"

_erf = np.frompyfunc(math.erf, 1, 1)


def gelu_tanh(x):
  """Official BERT `gelu`: the tanh approximation."""
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_exact(x):
  """Exact GELU 0.5 x (1 + erf(x / sqrt(2))) (Hugging Face's "gelu"), evaluated with math.erf."""
  return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))).astype(x.dtype)


def get_activation(name):
  """Maps a hidden_act name to a NumPy function.

  Args:
    name: "gelu" (tanh approximation), "gelu_exact" (erf), "relu", "tanh" or "linear".

  Returns:
    A function of one array.
  """
  name = (name or "linear").lower()
  table = {
      "gelu": gelu_tanh,
      "gelu_exact": gelu_exact,
      "relu": lambda x: np.maximum(x, 0),
      "tanh": np.tanh,
      "linear": lambda x: x,
  }
  if name not in table:
    raise ValueError("unsupported hidden_act %r" % name)
  return table[name]


def layer_norm(x, gamma, beta, epsilon=LAYER_NORM_EPSILON):
  """LayerNorm over the last axis with the population variance (as TF's layer_norm).

  Args:
    x: [..., H].
    gamma, beta: [H].
    epsilon: added to the variance.

  Returns:
    [..., H].
  """
  mean = x.mean(axis=-1, keepdims=True)
  var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
  return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


def softmax(x):
  """Numerically stable softmax over the last axis."""
  x = x - x.max(axis=-1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=-1, keepdims=True)


def mean_pool(sequence_output, mask):
  """Masked mean over the sequence (sentence-transformers style pooling).

  Args:
    sequence_output: [B, S, H].
    mask: [B, S], 1 for real tokens.

  Returns:
    [B, H].
  """
  mask = np.asarray(mask, dtype=sequence_output.dtype)[:, :, None]
  return (sequence_output * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)


def _cfg(config, key, default=None):
  if isinstance(config, dict):
    return config.get(key, default)
  return getattr(config, key, default)


def _dense(params, prefix, x, dtype):
  return x @ params[prefix + "/kernel"].astype(dtype) + params[prefix + "/bias"].astype(dtype)


def _ln(params, prefix, x, dtype):
  return layer_norm(x, params[prefix + "/gamma"].astype(dtype), params[prefix + "/beta"].astype(dtype))


def bert_forward(params, config, input_ids, input_mask=None, token_type_ids=None, dtype=np.float64):
  """Runs the BERT / RealFormer encoder in NumPy (see the module docstring for the exact conventions).

  Args:
    params: dict from official BERT TF checkpoint variable names to arrays.
    config: dict (or object) with hidden_size, num_hidden_layers, num_attention_heads,
      intermediate_size, hidden_act, and optionally residual_attention ("none" | "sum" | "mean",
      default "none") and layer_norm_type ("post" | "pre", default "post").
    input_ids: int [B, S].
    input_mask: int [B, S] (1 real, 0 padding); default all ones.
    token_type_ids: int [B, S]; default all zeros.
    dtype: computation dtype (np.float64 by default, np.float32 to mimic TF fp32).

  Returns:
    dict with
      embedding_output: [B, S, H];
      all_encoder_layers: list of L arrays [B, S, H];
      sequence_output: [B, S, H];
      pooled_output: [B, H] (None when the params have no pooler);
      attention_scores: list of L arrays [B, N, F, T] (scores handed to the next layer, before mask);
      attention_probs: list of L arrays [B, N, F, T].
  """
  input_ids = np.asarray(input_ids)
  batch, seq = input_ids.shape
  if input_mask is None:
    input_mask = np.ones_like(input_ids)
  if token_type_ids is None:
    token_type_ids = np.zeros_like(input_ids)
  input_mask = np.asarray(input_mask)
  token_type_ids = np.asarray(token_type_ids)

  hidden = int(_cfg(config, "hidden_size"))
  num_layers = int(_cfg(config, "num_hidden_layers"))
  num_heads = int(_cfg(config, "num_attention_heads"))
  act = get_activation(_cfg(config, "hidden_act", "gelu"))
  residual = (_cfg(config, "residual_attention", "none") or "none").lower()
  ln_type = (_cfg(config, "layer_norm_type", "post") or "post").lower()
  if residual not in ("none", "sum", "mean"):
    raise ValueError("residual_attention must be none, sum or mean, got %r" % residual)
  if ln_type not in ("post", "pre"):
    raise ValueError("layer_norm_type must be post or pre, got %r" % ln_type)
  if hidden % num_heads:
    raise ValueError("hidden_size %d not divisible by num_attention_heads %d" % (hidden, num_heads))
  head = hidden // num_heads

  p = lambda name: params[name].astype(dtype)
  emb = (p("bert/embeddings/word_embeddings")[input_ids]
         + p("bert/embeddings/token_type_embeddings")[token_type_ids]
         + p("bert/embeddings/position_embeddings")[:seq][None, :, :])
  emb = _ln(params, "bert/embeddings/LayerNorm", emb, dtype)

  # Additive mask over the key axis, broadcast over heads and query positions.
  adder = ((1.0 - input_mask.astype(dtype)) * MASK_ADDER)[:, None, None, :]

  def split_heads(t):  # [B, S, H] -> [B, N, S, d]
    return t.reshape(batch, seq, num_heads, head).transpose(0, 2, 1, 3)

  x = emb
  prev_scores = None
  all_layers, all_scores, all_probs = [], [], []
  for n in range(num_layers):
    pre = "bert/encoder/layer_%d/" % n
    attn_in = _ln(params, pre + "attention/output/LayerNorm", x, dtype) if ln_type == "pre" else x
    q = split_heads(_dense(params, pre + "attention/self/query", attn_in, dtype))
    k = split_heads(_dense(params, pre + "attention/self/key", attn_in, dtype))
    v = split_heads(_dense(params, pre + "attention/self/value", attn_in, dtype))
    scores = (q @ k.transpose(0, 1, 3, 2)) * dtype(1.0 / math.sqrt(head))
    if residual != "none" and prev_scores is not None:
      scores = scores + prev_scores
    softmax_in = scores / dtype(n + 1) if residual == "mean" else scores
    probs = softmax(softmax_in + adder)
    prev_scores = scores
    ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
    attn_out = _dense(params, pre + "attention/output/dense", ctx, dtype)
    if ln_type == "post":
      x = _ln(params, pre + "attention/output/LayerNorm", x + attn_out, dtype)
      ffn = _dense(params, pre + "output/dense",
                   act(_dense(params, pre + "intermediate/dense", x, dtype)), dtype)
      x = _ln(params, pre + "output/LayerNorm", x + ffn, dtype)
    else:
      x = x + attn_out
      ffn_in = _ln(params, pre + "output/LayerNorm", x, dtype)
      x = x + _dense(params, pre + "output/dense",
                     act(_dense(params, pre + "intermediate/dense", ffn_in, dtype)), dtype)
    all_layers.append(x)
    all_scores.append(scores)
    all_probs.append(probs)

  if ln_type == "pre":
    all_layers[-1] = _ln(params, FINAL_LAYER_NORM, all_layers[-1], dtype)
  sequence_output = all_layers[-1]
  pooled = None
  if "bert/pooler/dense/kernel" in params:
    pooled = np.tanh(_dense(params, "bert/pooler/dense", sequence_output[:, 0], dtype))
  return {
      "embedding_output": emb,
      "all_encoder_layers": all_layers,
      "sequence_output": sequence_output,
      "pooled_output": pooled,
      "attention_scores": all_scores,
      "attention_probs": all_probs,
  }


def param_shapes(config, with_heads=False):
  """Official BERT checkpoint variable names and shapes for `config`.

  Args:
    config: dict with vocab_size, hidden_size, num_hidden_layers, intermediate_size,
      max_position_embeddings, type_vocab_size and optionally layer_norm_type.
    with_heads: also the pre-training heads (cls/predictions/*, cls/seq_relationship/*).

  Returns:
    dict name -> shape tuple. Pre-LN adds 'bert/encoder/final_layer_norm/{gamma,beta}'.
  """
  h = int(_cfg(config, "hidden_size"))
  i = int(_cfg(config, "intermediate_size"))
  shapes = {
      "bert/embeddings/word_embeddings": (int(_cfg(config, "vocab_size")), h),
      "bert/embeddings/token_type_embeddings": (int(_cfg(config, "type_vocab_size", 2)), h),
      "bert/embeddings/position_embeddings": (int(_cfg(config, "max_position_embeddings", 512)), h),
      "bert/embeddings/LayerNorm/gamma": (h,),
      "bert/embeddings/LayerNorm/beta": (h,),
      "bert/pooler/dense/kernel": (h, h),
      "bert/pooler/dense/bias": (h,),
  }
  for n in range(int(_cfg(config, "num_hidden_layers"))):
    pre = "bert/encoder/layer_%d/" % n
    for name in ("query", "key", "value"):
      shapes[pre + "attention/self/%s/kernel" % name] = (h, h)
      shapes[pre + "attention/self/%s/bias" % name] = (h,)
    shapes[pre + "attention/output/dense/kernel"] = (h, h)
    shapes[pre + "attention/output/dense/bias"] = (h,)
    shapes[pre + "intermediate/dense/kernel"] = (h, i)
    shapes[pre + "intermediate/dense/bias"] = (i,)
    shapes[pre + "output/dense/kernel"] = (i, h)
    shapes[pre + "output/dense/bias"] = (h,)
    for ln in ("attention/output/LayerNorm", "output/LayerNorm"):
      shapes[pre + ln + "/gamma"] = (h,)
      shapes[pre + ln + "/beta"] = (h,)
  if (_cfg(config, "layer_norm_type", "post") or "post").lower() == "pre":
    shapes[FINAL_LAYER_NORM + "/gamma"] = (h,)
    shapes[FINAL_LAYER_NORM + "/beta"] = (h,)
  if with_heads:
    shapes["cls/predictions/transform/dense/kernel"] = (h, h)
    shapes["cls/predictions/transform/dense/bias"] = (h,)
    shapes["cls/predictions/transform/LayerNorm/gamma"] = (h,)
    shapes["cls/predictions/transform/LayerNorm/beta"] = (h,)
    shapes["cls/predictions/output_bias"] = (int(_cfg(config, "vocab_size")),)
    shapes["cls/seq_relationship/output_weights"] = (2, h)
    shapes["cls/seq_relationship/output_bias"] = (2,)
  return shapes


def random_params(config, seed=0, with_heads=False, dtype=np.float32):
  """A full random parameter dict with official names and shapes, scaled so tests are sensitive.

  Kernels have std 1/sqrt(fan_in) (attention scores of order 1, so softmax is far from uniform and
  residual attention changes the result); biases std 0.1; embeddings std 1; LayerNorm gammas
  1 + 0.2 * N(0, 1) and betas 0.1 * N(0, 1), so a swapped or missing LayerNorm is visible.

  Args:
    config: as for `param_shapes`.
    seed: random seed.
    with_heads: also create the pre-training head variables.
    dtype: dtype of the arrays (float32 like a real checkpoint).

  Returns:
    dict name -> array.
  """
  rng = np.random.RandomState(seed)
  params = {}
  for name, shape in sorted(param_shapes(config, with_heads).items()):
    if name.endswith("/gamma"):
      value = 1.0 + 0.2 * rng.randn(*shape)
    elif name.endswith("/beta") or name.endswith("/bias"):
      value = 0.1 * rng.randn(*shape)
    elif name.endswith("/kernel"):
      value = rng.randn(*shape) / math.sqrt(shape[0])
    elif name == "cls/seq_relationship/output_weights":
      value = rng.randn(*shape) / math.sqrt(shape[1])
    else:  # embeddings
      value = rng.randn(*shape)
    params[name] = value.astype(dtype)
  return params


# ---------------------------------------------------------------------------------------------------
# Second, separately written forward on Hugging Face names and layout (for the converter test).
# ---------------------------------------------------------------------------------------------------


def _hf_act(name):
  name = name.lower()
  if name == "gelu":
    return gelu_exact
  if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
    return gelu_tanh
  if name == "relu":
    return lambda t: np.maximum(t, 0)
  if name == "tanh":
    return np.tanh
  raise ValueError("unsupported Hugging Face hidden_act %r" % name)


def hf_bert_forward(hf_tensors, hf_config, input_ids, input_mask=None, token_type_ids=None,
                    dtype=np.float64):
  """BERT encoder forward on Hugging Face tensors (names like 'encoder.layer.0.attention.self.query.weight').

  Linear weights are [out, in] (PyTorch layout): y = x W^T + b. Attention is computed head by head in a
  Python loop, a different code path from `bert_forward`. Post-LN, no residual attention.

  Args:
    hf_tensors: dict HF name -> array (an optional 'bert.' prefix is accepted).
    hf_config: the parsed config.json dict (hidden_size, num_hidden_layers, num_attention_heads,
      hidden_act, layer_norm_eps).
    input_ids, input_mask, token_type_ids: int [B, S].
    dtype: computation dtype.

  Returns:
    dict with hidden_states (list of L + 1 arrays [B, S, H], embeddings first), sequence_output
    [B, S, H] and pooled_output [B, H] (None without pooler weights).
  """
  t = {}
  for name, value in hf_tensors.items():
    t[name[len("bert."):] if name.startswith("bert.") else name] = value
  w = lambda name: np.asarray(t[name], dtype=dtype)
  eps = float(hf_config.get("layer_norm_eps", 1e-12))
  act = _hf_act(hf_config.get("hidden_act", "gelu"))
  heads = int(hf_config["num_attention_heads"])

  def linear(x, name):
    return np.einsum("bsi,oi->bso", x, w(name + ".weight")) + w(name + ".bias")

  def norm(x, name):
    mu = np.mean(x, axis=-1, keepdims=True)
    sd = np.sqrt(np.mean(np.square(x - mu), axis=-1, keepdims=True) + eps)
    return w(name + ".weight") * ((x - mu) / sd) + w(name + ".bias")

  ids = np.asarray(input_ids)
  seq = ids.shape[1]
  mask = np.ones_like(ids) if input_mask is None else np.asarray(input_mask)
  types = np.zeros_like(ids) if token_type_ids is None else np.asarray(token_type_ids)
  x = (np.take(w("embeddings.word_embeddings.weight"), ids, axis=0)
       + np.take(w("embeddings.token_type_embeddings.weight"), types, axis=0)
       + w("embeddings.position_embeddings.weight")[np.arange(seq)])
  x = norm(x, "embeddings.LayerNorm")
  states = [x]
  bias = np.where(mask[:, None, :] > 0, 0.0, MASK_ADDER).astype(dtype)  # [B, 1, T]
  for n in range(int(hf_config["num_hidden_layers"])):
    pre = "encoder.layer.%d." % n
    q = linear(x, pre + "attention.self.query")
    k = linear(x, pre + "attention.self.key")
    v = linear(x, pre + "attention.self.value")
    d = q.shape[-1] // heads
    outs = []
    for h in range(heads):
      sl = slice(h * d, (h + 1) * d)
      s = np.einsum("bfd,btd->bft", q[..., sl], k[..., sl]) / math.sqrt(d) + bias
      s = np.exp(s - s.max(axis=-1, keepdims=True))
      s = s / s.sum(axis=-1, keepdims=True)
      outs.append(np.einsum("bft,btd->bfd", s, v[..., sl]))
    a = linear(np.concatenate(outs, axis=-1), pre + "attention.output.dense")
    x = norm(a + x, pre + "attention.output.LayerNorm")
    f = linear(act(linear(x, pre + "intermediate.dense")), pre + "output.dense")
    x = norm(f + x, pre + "output.LayerNorm")
    states.append(x)
  pooled = None
  if "pooler.dense.weight" in t:
    pooled = np.tanh(x[:, 0] @ w("pooler.dense.weight").T + w("pooler.dense.bias"))
  return {"hidden_states": states, "sequence_output": x, "pooled_output": pooled}
