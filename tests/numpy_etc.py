"""Independent float64 NumPy reference of the ETC encoder with residual attention (no TensorFlow).

Written from the math of ETC (Ainslie et al. 2020) and the official etcmodel variable names, as one
dense attention over the concatenated [long ; global] sequence: every layer materialises the full
[L + G, L + G] logits, with the local window, the four masks and the four relative-id tensors
placed in it, so nothing of the dense / blocked layouts of etc_model/etc_modeling.py is reused.

Conventions (the TF model must follow them):

Embeddings: long = tok[token_ids] (-> 'token_emb_lookup/projection' when embedding_size differs)
  + seg[segment_ids] (+ 'position_emb_lookup_long' rows), LayerNorm 'long_emb_layer_norm'; global
  likewise with the same token table, 'position_emb_lookup_global', 'global_emb_layer_norm'.

Attention of layer n (one [L + G, L + G] matrix; row i a long token for i < L, a global token
after; column j likewise):
  query  q_i  = long_query(x_i) for long rows, global_query(x_i) for global rows;
  key    k_ij = l2l_key / l2g_key / g2l_key / g2g_key (x_j) by the (row, column) kinds (values
         alike);
  id     r_ij = l2l_ids[i, j - i + radius] (long-long within the window), l2g / g2l / g2g ids;
  mask   m_ij = l2l_mask[i, j - i + radius] within the window (0 outside), l2g / g2l / g2g masks;
  S_n[i, j] = (q_i . k_ij + q_i . E_row[r_ij] + b_row[r_ij]) / sqrt(d)   (E, b: the long rows'
    'long_qkv_attention/qkv_relative_attention' tables or the global rows' 'global_qkv_attention')
  A_n = S_n (none) or S_n + A_{n-1} (sum / mean; A_n is handed on, before mask and division)
  P = softmax(A_n / (n + 1 if mean else 1) - 10000 (1 - m)) over j;  context_i = sum_j P_ij v_ij
  output = long_output_projection / global_output_projection (context).
Residual blocks: post-LN x = LN(x + f(x)); pre-activation x = x + f(LN(x)), no final LayerNorm.
Attention LayerNorms 'fused_att_layer_n/layer_norm_0' (long) and 'layer_norm_1' (global);
feed-forward 'feed_forward_layer_n' (shared) or 'long_' / 'global_feed_forward_layer_n':
  'dense_layers/layer_1'(act('dense_layers/layer_0'(x))), LayerNorm 'layer_norm'.
"""

import math

import numpy as np

from numpy_bert import get_activation, layer_norm, softmax

MASK_ADDER = -10000.0
ROOT = "etc_document_bert/"
LAYERS = ROOT + "global_local_transformer_layers/"


def _projection_scopes(config):
  """Official projection scope of each role under the sharing flags (etcmodel attention.py)."""
  qkv, kv = config.get("share_qkv_projections", True), config.get("share_kv_projections", False)
  scopes = {}
  scopes["long_query"] = "long_query_projection"
  for kind in ("key", "value"):
    scopes["l2l_" + kind] = "l2l_%s_projection" % kind
    scopes["l2g_" + kind] = "%s_%s_projection" % ("l2l" if (qkv or kv) else "l2g", kind)
    if qkv:
      scopes["g2g_" + kind] = scopes["g2l_" + kind] = "l2l_%s_projection" % kind
    else:
      scopes["g2g_" + kind] = "g2g_%s_projection" % kind
      scopes["g2l_" + kind] = "g2g_%s_projection" % kind if kv else "g2l_%s_projection" % kind
  scopes["global_query"] = "long_query_projection" if qkv else "global_query_projection"
  scopes["long_output"] = "long_output_projection"
  scopes["global_output"] = ("long_output_projection"
                             if config.get("share_att_output_projection", False)
                             else "global_output_projection")
  return scopes


def _embed(params, config, ids, segment_ids, position_ids, position_table, norm):
  tok = params[ROOT + "token_emb_lookup/embedding_table"][ids]
  hidden = config["hidden_size"]
  if tok.shape[-1] != hidden:
    tok = tok @ params[ROOT + "token_emb_lookup/projection/kernel"] + \
        params[ROOT + "token_emb_lookup/projection/bias"]
  x = tok + params[ROOT + "segment_emb_lookup/embedding_table"][segment_ids]
  if config.get("max_absolute_position_embeddings", 0):
    x = x + params[ROOT + position_table + "/embedding_table"][position_ids]
  return layer_norm(x, params[ROOT + norm + "/gamma"], params[ROOT + norm + "/beta"])


def _full_side_inputs(long_len, global_len, radius, side):
  """The [B, L + G, L + G] mask and relative ids (or None) of the concatenated sequence."""
  batch = side["l2l_att_mask"].shape[0]
  total = long_len + global_len
  mask = np.zeros([batch, total, total], np.int64)
  ids = np.zeros([batch, total, total], np.int64)
  has_ids = side.get("l2l_relative_att_ids") is not None
  for i in range(long_len):
    for j in range(max(0, i - radius), min(long_len, i + radius + 1)):
      mask[:, i, j] = side["l2l_att_mask"][:, i, j - i + radius]
      if has_ids:
        ids[:, i, j] = side["l2l_relative_att_ids"][:, i, j - i + radius]
  mask[:, :long_len, long_len:] = side["l2g_att_mask"]
  mask[:, long_len:, :long_len] = side["g2l_att_mask"]
  mask[:, long_len:, long_len:] = side["g2g_att_mask"]
  if has_ids:
    ids[:, :long_len, long_len:] = side["l2g_relative_att_ids"]
    ids[:, long_len:, :long_len] = side["g2l_relative_att_ids"]
    ids[:, long_len:, long_len:] = side["g2g_relative_att_ids"]
  return mask, (ids if has_ids else None)


def etc_forward(params, config, token_ids, global_token_ids, segment_ids=None,
                global_segment_ids=None, side=None):
  """Forward pass; returns (long_output [B, L, H], global_output [B, G, H], handed-on scores).

  Args:
    params: dict official variable name (no ':0') -> array.
    config: dict of EtcConfig keys (defaults as the official EtcConfig).
    token_ids: int [B, L].
    global_token_ids: int [B, G].
    segment_ids: int [B, L] (default 1s).
    global_segment_ids: int [B, G] (default 0s).
    side: dict of the 8 side inputs (masks required; relative ids may be None).

  Returns:
    (long_output, global_output, list of per-layer handed-on [B, N, L + G, L + G] scores).
  """
  batch, long_len = token_ids.shape
  global_len = global_token_ids.shape[1]
  radius = config["local_radius"]
  heads = config["num_attention_heads"]
  size = config.get("att_size_per_head") or config["hidden_size"] // heads
  residual = config.get("residual_attention", "none")
  pre = config.get("use_pre_activation_order", False)
  act = get_activation(config.get("hidden_act", "gelu"))
  scopes = _projection_scopes(config)
  p = {k: np.asarray(v, np.float64) for k, v in params.items()}

  if segment_ids is None:
    segment_ids = np.ones_like(token_ids)
  if global_segment_ids is None:
    global_segment_ids = np.zeros_like(global_token_ids)
  x_long = _embed(p, config, token_ids, segment_ids, np.arange(long_len)[None],
                  "position_emb_lookup_long", "long_emb_layer_norm")
  x_glob = _embed(p, config, global_token_ids, global_segment_ids, np.arange(global_len)[None],
                  "position_emb_lookup_global", "global_emb_layer_norm")
  mask, ids = _full_side_inputs(long_len, global_len, radius, side)
  is_long_row = np.arange(long_len + global_len) < long_len

  handed, prev = [], None
  for n in range(config["num_hidden_layers"]):
    fused = LAYERS + "fused_att_layer_%d/" % n
    att = fused + "fused_global_local_att/"

    def ln(x, name):
      return layer_norm(x, p[name + "/gamma"], p[name + "/beta"])

    def proj(role, x):
      scope = att + scopes[role] + "/linear/"
      y = x @ p[scope + "kernel"] + p[scope + "bias"]
      return y.reshape(y.shape[:-1] + (heads, size))

    a_long = ln(x_long, fused + "layer_norm_0") if pre else x_long
    a_glob = ln(x_glob, fused + "layer_norm_1") if pre else x_glob
    total = long_len + global_len
    # [B, L + G, N, d] queries; [B, L + G (rows), L + G (cols), N, d] keys and values.
    q = np.concatenate([proj("long_query", a_long), proj("global_query", a_glob)], 1)
    k = np.zeros([batch, total, total, heads, size])
    v = np.zeros([batch, total, total, heads, size])
    for rows, cols, role, src in ((slice(None, long_len), slice(None, long_len), "l2l", a_long),
                                  (slice(None, long_len), slice(long_len, None), "l2g", a_glob),
                                  (slice(long_len, None), slice(None, long_len), "g2l", a_long),
                                  (slice(long_len, None), slice(long_len, None), "g2g", a_glob)):
      k[:, rows, cols] = proj(role + "_key", src)[:, None]
      v[:, rows, cols] = proj(role + "_value", src)[:, None]
    logits = np.einsum("bihd,bijhd->bhij", q, k)
    if ids is not None:
      for row_kind, table in ((True, att + "long_qkv_attention/qkv_relative_attention/"),
                              (False, att + "global_qkv_attention/")):
        emb, bias = p[table + "relative_emb_table"], p[table + "relative_bias_table"]
        rows = np.where(is_long_row == row_kind)[0]
        # [B, rows, cols, N]: q_i . E[r_ij] + b[r_ij]
        rel = np.einsum("bihd,bijhd->bijh", q[:, rows], emb[ids[:, rows]]) + bias[ids[:, rows]]
        logits[:, :, rows] += rel.transpose(0, 3, 1, 2)
    scores = logits / math.sqrt(size)
    if residual != "none" and prev is not None:
      scores = scores + prev
    prev = scores if residual != "none" else None
    handed.append(prev)
    soft_in = scores / (n + 1) if residual == "mean" else scores
    probs = softmax(soft_in + MASK_ADDER * (1.0 - mask[:, None]))
    context = np.einsum("bhij,bijhd->bihd", probs, v).reshape(batch, total, heads * size)

    def out(role, c):
      scope = att + scopes[role] + "/"
      return c @ p[scope + "kernel"] + p[scope + "bias"]

    y_long = out("long_output", context[:, :long_len])
    y_glob = out("global_output", context[:, long_len:])
    if pre:
      x_long, x_glob = x_long + y_long, x_glob + y_glob
    else:
      x_long = ln(x_long + y_long, fused + "layer_norm_0")
      x_glob = ln(x_glob + y_glob, fused + "layer_norm_1")

    shared = config.get("share_feed_forward_params", True)
    for kind in ("long", "global"):
      scope = LAYERS + ("feed_forward_layer_%d/" % n if shared
                        else "%s_feed_forward_layer_%d/" % (kind, n))
      x = x_long if kind == "long" else x_glob
      h = ln(x, scope + "layer_norm") if pre else x
      h = act(h @ p[scope + "dense_layers/layer_0/kernel"] + p[scope + "dense_layers/layer_0/bias"])
      h = h @ p[scope + "dense_layers/layer_1/kernel"] + p[scope + "dense_layers/layer_1/bias"]
      x = x + h if pre else ln(x + h, scope + "layer_norm")
      if kind == "long":
        x_long = x
      else:
        x_glob = x
  return x_long, x_glob, handed
