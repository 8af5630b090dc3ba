"""Converts a Hugging Face BERT directory (safetensors) into a BERT TF checkpoint, and back.

Forward (default):
  python convert_hf_checkpoint.py --hf_dir=path/to/hf_model --output_dir=path/to/bert_dir

  reads   hf_dir/config.json, hf_dir/model.safetensors (or sharded model-0000x-of-0000y.safetensors with
          model.safetensors.index.json), hf_dir/vocab.txt (or the WordPiece vocab inside tokenizer.json)
  writes  output_dir/bert_model.ckpt.{index,data-00000-of-00001}, output_dir/checkpoint,
          output_dir/bert_config.json, output_dir/vocab.txt
  with the official BERT variable names, so the result loads like a Google BERT checkpoint
  (--init_checkpoint=output_dir/bert_model.ckpt --bert_config_file=output_dir/bert_config.json).

Reverse (--reverse):
  python convert_hf_checkpoint.py --reverse --tf_checkpoint=path/to/bert_model.ckpt --output_dir=hf_out

  reads a BERT TF checkpoint (optimizer slots such as adam_m/adam_v and global_step are skipped) plus
  bert_config.json and vocab.txt next to it (or --bert_config_file / --vocab_file), writes
  output_dir/{config.json, model.safetensors, vocab.txt} with Hugging Face names. Only models that
  Hugging Face's BertModel can run are accepted (residual_attention "none", layer_norm_type "post").

Weights are read with safetensors' NumPy API (no PyTorch): pytorch_model.bin is refused with a one-line
error. Mapping (an optional "bert." prefix is stripped): see `hf_to_tf_name`. Linear weights [out, in]
are transposed to TF kernels [in, out]; cls.seq_relationship.weight [2, H] stays [2, H] (the official
"output_weights" layout). Buffers (embeddings.position_ids) and the MLM decoder weight tied to the word
embeddings are skipped; every other tensor without a BERT name is listed in one warning line.
Task heads (classifier.*, qa_outputs.*) are NOT carried over: fine-tuning code creates its own.

Activation: Hugging Face "gelu" is the exact erf GELU -> "gelu_exact"; "gelu_new", "gelu_pytorch_tanh"
and "gelu_fast" are the tanh approximation -> "gelu" (official BERT's gelu); "relu" and "tanh" as is.
--hidden_act overrides the value written to bert_config.json.

LayerNorm epsilon: the BERT TF model uses 1e-12. A checkpoint trained with another epsilon is refused
(its outputs would differ slightly) unless --allow_layer_norm_eps_mismatch, which only warns.
"""

import json
import os
import re
import shutil
import struct
import sys

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np

from realformer_tf import common

FLAGS = flags.FLAGS

def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("hf_dir", None, "Hugging Face model directory (config.json, model.safetensors, "
                      "vocab.txt). Input of the forward conversion.")
  flags.DEFINE_string("output_dir", None, "Directory to write the converted model to (created).")
  flags.DEFINE_enum("hidden_act", None, ["gelu", "gelu_exact", "relu", "tanh"],
                    "Override the activation written to bert_config.json (gelu = tanh approximation, "
                    "gelu_exact = erf).")
  flags.DEFINE_bool("allow_layer_norm_eps_mismatch", False,
                    "Convert even if config.json's layer_norm_eps is not 1e-12 (warns).")
  flags.DEFINE_bool("overwrite", False, "Replace a converted model already in --output_dir.")
  flags.DEFINE_bool("reverse", False, "Convert a BERT TF checkpoint (--tf_checkpoint) to Hugging Face "
                    "safetensors in --output_dir.")
  flags.DEFINE_string("tf_checkpoint", None, "Reverse mode: checkpoint prefix (dir/bert_model.ckpt) or a "
                      "directory holding one.")
  flags.DEFINE_string("bert_config_file", None, "Reverse mode: bert_config.json (default: next to the "
                      "checkpoint).")
  flags.DEFINE_string("vocab_file", None, "Reverse mode: vocab.txt (default: next to the checkpoint).")


CKPT_NAME = "bert_model.ckpt"
BERT_LAYER_NORM_EPS = 1e-12

# Hugging Face hidden_act -> this project's hidden_act.
HF_TO_BERT_ACT = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
}
BERT_TO_HF_ACT = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh"}

_LINEAR = r"attention\.self\.(?:query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense"
_LN = r"attention\.output\.LayerNorm|output\.LayerNorm"
_LN_SUFFIX = {"weight": "gamma", "gamma": "gamma", "bias": "beta", "beta": "beta"}

# HF tensors that are not weights of the BERT TF model and are skipped without a warning.
_SKIPPED = ("embeddings.position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias")


def hf_to_tf_name(hf_name):
  """Maps one Hugging Face BERT tensor name to its official BERT TF variable name.

  Args:
    hf_name: e.g. "bert.encoder.layer.3.attention.self.query.weight" (the "bert." prefix is optional).

  Returns:
    (tf_name, transpose): transpose is True for Linear weights ([out, in] -> kernel [in, out]).
    (None, False) if the tensor has no BERT TF counterpart.
  """
  name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
  m = re.fullmatch(r"embeddings\.(word|position|token_type)_embeddings\.weight", name)
  if m:
    return "bert/embeddings/%s_embeddings" % m.group(1), False
  m = re.fullmatch(r"embeddings\.LayerNorm\.(weight|bias|gamma|beta)", name)
  if m:
    return "bert/embeddings/LayerNorm/" + _LN_SUFFIX[m.group(1)], False
  m = re.fullmatch(r"encoder\.layer\.(\d+)\.(%s)\.(weight|bias)" % _LINEAR, name)
  if m:
    scope = "bert/encoder/layer_%s/%s" % (m.group(1), m.group(2).replace(".", "/"))
    if m.group(3) == "weight":
      return scope + "/kernel", True
    return scope + "/bias", False
  m = re.fullmatch(r"encoder\.layer\.(\d+)\.(%s)\.(weight|bias|gamma|beta)" % _LN, name)
  if m:
    return "bert/encoder/layer_%s/%s/%s" % (m.group(1), m.group(2).replace(".", "/"),
                                            _LN_SUFFIX[m.group(3)]), False
  m = re.fullmatch(r"pooler\.dense\.(weight|bias)", name)
  if m:
    return ("bert/pooler/dense/kernel", True) if m.group(1) == "weight" else (
        "bert/pooler/dense/bias", False)
  # Pre-training heads (BertForPreTraining / BertForMaskedLM names, with the "bert." prefix stripped
  # only from the encoder; the heads are never prefixed).
  m = re.fullmatch(r"cls\.predictions\.transform\.dense\.(weight|bias)", hf_name)
  if m:
    return ("cls/predictions/transform/dense/kernel", True) if m.group(1) == "weight" else (
        "cls/predictions/transform/dense/bias", False)
  m = re.fullmatch(r"cls\.predictions\.transform\.LayerNorm\.(weight|bias|gamma|beta)", hf_name)
  if m:
    return "cls/predictions/transform/LayerNorm/" + _LN_SUFFIX[m.group(1)], False
  if hf_name == "cls.predictions.bias":
    return "cls/predictions/output_bias", False
  if hf_name == "cls.seq_relationship.weight":
    return "cls/seq_relationship/output_weights", False  # official layout is [2, H]: no transpose
  if hf_name == "cls.seq_relationship.bias":
    return "cls/seq_relationship/output_bias", False
  return None, False


def tf_to_hf_name(tf_name, with_prefix):
  """Inverse of `hf_to_tf_name`.

  Args:
    tf_name: official BERT TF variable name.
    with_prefix: prefix encoder names with "bert." (BertForPreTraining layout).

  Returns:
    (hf_name, transpose), or (None, False) for variables without a Hugging Face counterpart.
  """
  prefix = "bert." if with_prefix else ""
  m = re.fullmatch(r"bert/embeddings/(word|position|token_type)_embeddings", tf_name)
  if m:
    return prefix + "embeddings.%s_embeddings.weight" % m.group(1), False
  m = re.fullmatch(r"bert/embeddings/LayerNorm/(gamma|beta)", tf_name)
  if m:
    return prefix + "embeddings.LayerNorm." + ("weight" if m.group(1) == "gamma" else "bias"), False
  m = re.fullmatch(r"bert/encoder/layer_(\d+)/(.+)/(kernel|bias|gamma|beta)", tf_name)
  if m:
    scope = m.group(2).replace("/", ".")
    if not re.fullmatch(_LINEAR + "|" + _LN, scope):
      return None, False
    suffix = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}[m.group(3)]
    return prefix + "encoder.layer.%s.%s.%s" % (m.group(1), scope, suffix), m.group(3) == "kernel"
  m = re.fullmatch(r"bert/pooler/dense/(kernel|bias)", tf_name)
  if m:
    return prefix + "pooler.dense." + ("weight" if m.group(1) == "kernel" else "bias"), (
        m.group(1) == "kernel")
  table = {
      "cls/predictions/transform/dense/kernel": ("cls.predictions.transform.dense.weight", True),
      "cls/predictions/transform/dense/bias": ("cls.predictions.transform.dense.bias", False),
      "cls/predictions/transform/LayerNorm/gamma": ("cls.predictions.transform.LayerNorm.weight", False),
      "cls/predictions/transform/LayerNorm/beta": ("cls.predictions.transform.LayerNorm.bias", False),
      "cls/predictions/output_bias": ("cls.predictions.bias", False),
      "cls/seq_relationship/output_weights": ("cls.seq_relationship.weight", False),
      "cls/seq_relationship/output_bias": ("cls.seq_relationship.bias", False),
  }
  return table.get(tf_name, (None, False))


def expected_shapes(bert_config):
  """Official BERT variable shapes of the encoder and pooler for a bert_config dict.

  Args:
    bert_config: dict with vocab_size, hidden_size, num_hidden_layers, intermediate_size,
      max_position_embeddings, type_vocab_size.

  Returns:
    dict name -> shape tuple (post-LN model, no pre-training heads).
  """
  h, i = bert_config["hidden_size"], bert_config["intermediate_size"]
  shapes = {
      "bert/embeddings/word_embeddings": (bert_config["vocab_size"], h),
      "bert/embeddings/position_embeddings": (bert_config["max_position_embeddings"], h),
      "bert/embeddings/token_type_embeddings": (bert_config["type_vocab_size"], h),
      "bert/embeddings/LayerNorm/gamma": (h,),
      "bert/embeddings/LayerNorm/beta": (h,),
  }
  for n in range(bert_config["num_hidden_layers"]):
    pre = "bert/encoder/layer_%d/" % n
    for scope in ("attention/self/query", "attention/self/key", "attention/self/value",
                  "attention/output/dense"):
      shapes[pre + scope + "/kernel"] = (h, h)
      shapes[pre + scope + "/bias"] = (h,)
    shapes[pre + "intermediate/dense/kernel"] = (h, i)
    shapes[pre + "intermediate/dense/bias"] = (i,)
    shapes[pre + "output/dense/kernel"] = (i, h)
    shapes[pre + "output/dense/bias"] = (h,)
    for scope in ("attention/output/LayerNorm", "output/LayerNorm"):
      shapes[pre + scope + "/gamma"] = (h,)
      shapes[pre + scope + "/beta"] = (h,)
  return shapes


def hf_config_to_bert_config(hf_config, hidden_act=None, allow_eps_mismatch=False, source="config.json"):
  """Builds this project's bert_config dict from a Hugging Face BERT config.json dict.

  Args:
    hf_config: parsed config.json.
    hidden_act: optional override of the converted activation (our names).
    allow_eps_mismatch: warn instead of failing when layer_norm_eps != 1e-12.
    source: file name for error messages.

  Returns:
    dict with the BertConfig fields plus residual_attention "none" and layer_norm_type "post".
  """
  model_type = hf_config.get("model_type", "bert")
  if model_type != "bert":
    common.fail("%s: model_type %r is not supported (BERT only)" % (source, model_type))
  pos_type = hf_config.get("position_embedding_type", "absolute")
  if pos_type != "absolute":
    common.fail("%s: position_embedding_type %r is not supported (absolute only)" % (source, pos_type))
  for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size"):
    if not isinstance(hf_config.get(key), int):
      common.fail("%s: %s is missing or not an integer" % (source, key))
  if hf_config["hidden_size"] % hf_config["num_attention_heads"]:
    common.fail("%s: hidden_size %d is not a multiple of num_attention_heads %d" % (
        source, hf_config["hidden_size"], hf_config["num_attention_heads"]))
  hf_act = hf_config.get("hidden_act", "gelu")
  if hidden_act is None:
    if not isinstance(hf_act, str) or hf_act.lower() not in HF_TO_BERT_ACT:
      common.fail("%s: hidden_act %r is not supported (one of %s; or pass --hidden_act)" % (
          source, hf_act, ", ".join(sorted(HF_TO_BERT_ACT))))
    hidden_act = HF_TO_BERT_ACT[hf_act.lower()]
  eps = float(hf_config.get("layer_norm_eps", BERT_LAYER_NORM_EPS))
  if abs(eps - BERT_LAYER_NORM_EPS) > 1e-15:
    message = "%s: layer_norm_eps is %g but the BERT TF model uses 1e-12" % (source, eps)
    if not allow_eps_mismatch:
      common.fail(message + " (pass --allow_layer_norm_eps_mismatch to convert anyway)")
    _warn(message + "; outputs will differ slightly")
  return {
      "vocab_size": hf_config["vocab_size"],
      "hidden_size": hf_config["hidden_size"],
      "num_hidden_layers": hf_config["num_hidden_layers"],
      "num_attention_heads": hf_config["num_attention_heads"],
      "intermediate_size": hf_config["intermediate_size"],
      "hidden_act": hidden_act,
      "hidden_dropout_prob": float(hf_config.get("hidden_dropout_prob", 0.1)),
      "attention_probs_dropout_prob": float(hf_config.get("attention_probs_dropout_prob", 0.1)),
      "max_position_embeddings": int(hf_config.get("max_position_embeddings", 512)),
      "type_vocab_size": int(hf_config.get("type_vocab_size", 2)),
      "initializer_range": float(hf_config.get("initializer_range", 0.02)),
      "residual_attention": "none",
      "layer_norm_type": "post",
  }


def bert_config_to_hf_config(bert_config, architecture, source="bert_config.json"):
  """Inverse of `hf_config_to_bert_config` (fails for models Hugging Face BERT cannot run)."""
  residual = bert_config.get("residual_attention", "none")
  ln_type = bert_config.get("layer_norm_type", "post")
  if residual != "none" or ln_type != "post":
    common.fail("%s: residual_attention=%r, layer_norm_type=%r: Hugging Face BertModel only runs "
                "residual_attention none with post-LN" % (source, residual, ln_type))
  act = bert_config.get("hidden_act", "gelu")
  if act not in BERT_TO_HF_ACT:
    common.fail("%s: hidden_act %r has no Hugging Face equivalent" % (source, act))
  hf = {
      "architectures": [architecture],
      "model_type": "bert",
      "hidden_act": BERT_TO_HF_ACT[act],
      "layer_norm_eps": BERT_LAYER_NORM_EPS,
      "pad_token_id": 0,
      "position_embedding_type": "absolute",
  }
  for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
              "max_position_embeddings", "type_vocab_size", "initializer_range"):
    if key in bert_config:
      hf[key] = bert_config[key]
  return hf


def _warn(message):
  sys.stderr.write("warning: %s\n" % message)


def _read_safetensors_raw(path):
  """Reads a safetensors file without safetensors' NumPy API (used for bfloat16, which NumPy lacks).

  Returns:
    dict name -> float32/int array (bfloat16 widened to float32 exactly).
  """
  dtypes = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
            "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
  with open(path, "rb") as f:
    (header_len,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(header_len))
    data = f.read()
  out = {}
  for name, info in header.items():
    if name == "__metadata__":
      continue
    begin, end = info["data_offsets"]
    buf = data[begin:end]
    if info["dtype"] == "BF16":
      bits = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
      value = bits.view(np.float32)
    elif info["dtype"] in dtypes:
      value = np.frombuffer(buf, dtype=np.dtype(dtypes[info["dtype"]]).newbyteorder("<"))
    else:
      common.fail("%s: tensor %s has unsupported dtype %s" % (path, name, info["dtype"]))
    out[name] = value.reshape(info["shape"]).copy()
  return out


def read_hf_weights(hf_dir):
  """Loads all tensors of a Hugging Face model directory with NumPy (no PyTorch).

  Args:
    hf_dir: directory with model.safetensors, or model.safetensors.index.json and its shards.

  Returns:
    dict HF name -> np.ndarray.
  """
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  single = os.path.join(hf_dir, "model.safetensors")
  index = os.path.join(hf_dir, "model.safetensors.index.json")
  if os.path.isfile(single):
    files = [single]
  elif os.path.isfile(index):
    with open(index) as f:
      files = [os.path.join(hf_dir, s) for s in sorted(set(json.load(f)["weight_map"].values()))]
    for path in files:
      if not os.path.isfile(path):
        common.fail("--hf_dir=%s: shard %s listed in model.safetensors.index.json is missing" % (
            hf_dir, os.path.basename(path)))
  else:
    others = [n for n in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack")
              if os.path.exists(os.path.join(hf_dir, n))]
    found = " (found %s)" % ", ".join(others) if others else ""
    common.fail("--hf_dir=%s: no model.safetensors%s; only safetensors weights are supported "
                "(save the model with safe_serialization=True)" % (hf_dir, found))
  tensors = {}
  for path in files:
    try:
      part = load_file(path)
    except Exception as e:  # pylint: disable=broad-except
      if "bf16" in str(e).lower() or "bfloat16" in str(e).lower():
        part = _read_safetensors_raw(path)
      else:
        common.fail("%s: cannot read safetensors file: %s" % (path, str(e).splitlines()[0]))
    tensors.update(part)
  return tensors


def read_vocab_lines(hf_dir):
  """Returns the vocabulary (list of tokens in id order) from vocab.txt or tokenizer.json."""
  vocab_txt = os.path.join(hf_dir, "vocab.txt")
  if os.path.isfile(vocab_txt):
    with open(vocab_txt, encoding="utf-8") as f:
      return [line.rstrip("\n") for line in f]
  tok_json = os.path.join(hf_dir, "tokenizer.json")
  if os.path.isfile(tok_json):
    with open(tok_json, encoding="utf-8") as f:
      model = json.load(f).get("model", {})
    if model.get("type") == "WordPiece" and isinstance(model.get("vocab"), dict):
      by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
      if [i for _, i in by_id] != list(range(len(by_id))):
        common.fail("%s: WordPiece vocab ids are not 0..N-1" % tok_json)
      return [tok for tok, _ in by_id]
    common.fail("%s: not a WordPiece tokenizer; BERT needs vocab.txt" % tok_json)
  common.fail("--hf_dir=%s: no vocab.txt (nor a WordPiece tokenizer.json)" % hf_dir)


def convert_hf_tensors(hf_tensors, bert_config, source="model.safetensors"):
  """Renames and transposes Hugging Face tensors into official BERT TF variables.

  Args:
    hf_tensors: dict HF name -> array.
    bert_config: the converted config (for shape checks).
    source: file name for messages.

  Returns:
    (params, unknown): params maps TF names to float32 arrays; unknown lists HF names that were not
    converted and are not known to be safe to drop.
  """
  params, unknown, origin = {}, [], {}
  word = None
  for hf_name in sorted(hf_tensors):
    value = np.asarray(hf_tensors[hf_name])
    tf_name, transpose = hf_to_tf_name(hf_name)
    if tf_name is None:
      if hf_name not in _SKIPPED and not hf_name.endswith(".position_ids"):
        unknown.append(hf_name)
      continue
    if tf_name in params:
      common.fail("%s: both %s and %s map to %s" % (source, origin[tf_name], hf_name, tf_name))
    if not np.issubdtype(value.dtype, np.floating):
      common.fail("%s: tensor %s has dtype %s, expected floating point" % (source, hf_name, value.dtype))
    value = value.astype(np.float32)
    if transpose:
      if value.ndim != 2:
        common.fail("%s: %s has shape %s, expected a 2-D Linear weight" % (source, hf_name, value.shape))
      value = np.ascontiguousarray(value.T)
    params[tf_name] = value
    origin[tf_name] = hf_name
    if tf_name == "bert/embeddings/word_embeddings":
      word = value

  # Tied MLM decoder: fine to drop only if it really is the word embedding matrix.
  for hf_name in hf_tensors:
    if hf_name == "cls.predictions.decoder.weight" and word is not None:
      if not np.array_equal(np.asarray(hf_tensors[hf_name], np.float32), word):
        unknown.append(hf_name + " (untied from the word embeddings)")
    if hf_name == "cls.predictions.decoder.bias":
      if "cls/predictions/output_bias" not in params:
        params["cls/predictions/output_bias"] = np.asarray(hf_tensors[hf_name], np.float32)
      elif not np.array_equal(np.asarray(hf_tensors[hf_name], np.float32),
                              params["cls/predictions/output_bias"]):
        unknown.append(hf_name + " (differs from cls.predictions.bias)")

  want = expected_shapes(bert_config)
  for name, shape in sorted(want.items()):
    if name not in params:
      common.fail("%s: missing weight for %s (config.json says %d layers)" % (
          source, name, bert_config["num_hidden_layers"]))
    if tuple(params[name].shape) != shape:
      common.fail("%s: %s has shape %s, config.json implies %s" % (
          source, origin.get(name, name), tuple(params[name].shape), shape))
  extra_layers = sorted(n for n in params if n.startswith("bert/encoder/") and n not in want)
  if extra_layers:
    common.fail("%s: %s is beyond num_hidden_layers=%d in config.json" % (
        source, origin[extra_layers[0]], bert_config["num_hidden_layers"]))
  return params, unknown


def write_tf_checkpoint(params, ckpt_prefix):
  """Writes `params` as a TF1 checkpoint with exactly these variable names.

  Values are fed through placeholders, so the graph stays small whatever the model size.

  Args:
    params: dict TF variable name -> np.ndarray.
    ckpt_prefix: e.g. dir/bert_model.ckpt. Also writes dir/checkpoint (relative path).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    variables, assigns, feeds = {}, [], {}
    for name in sorted(params):
      value = params[name]
      var = tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.as_dtype(value.dtype),
                                      initializer=tf.compat.v1.zeros_initializer(), use_resource=True)
      placeholder = tf.compat.v1.placeholder(tf.as_dtype(value.dtype), shape=value.shape)
      assigns.append(var.assign(placeholder))
      feeds[placeholder] = value
      variables[name] = var
    saver = tf.compat.v1.train.Saver(var_list=variables, save_relative_paths=True)
    with tf.compat.v1.Session() as sess:
      sess.run(assigns, feed_dict=feeds)
      saver.save(sess, ckpt_prefix, write_meta_graph=False)


def read_tf_checkpoint(ckpt_prefix):
  """Reads every variable of a TF checkpoint into a dict name -> np.ndarray."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(ckpt_prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _verify_checkpoint(params, ckpt_prefix):
  """Reads the written checkpoint back; fails unless names, shapes and values are identical."""
  back = read_tf_checkpoint(ckpt_prefix)
  if set(back) != set(params):
    common.fail("%s: read back %d variables, wrote %d" % (ckpt_prefix, len(back), len(params)))
  for name, value in params.items():
    if back[name].shape != value.shape or not np.array_equal(back[name], value):
      common.fail("%s: variable %s differs after reading back" % (ckpt_prefix, name))


def _prepare_output_dir(output_dir, final_names, overwrite):
  """Creates output_dir and a private temp dir inside it; refuses to clobber without --overwrite."""
  if not output_dir:
    common.fail("--output_dir is required")
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    common.fail("--output_dir=%s: exists and is not a directory" % output_dir)
  os.makedirs(output_dir, exist_ok=True)
  present = [n for n in final_names if os.path.exists(os.path.join(output_dir, n))]
  if present and not overwrite:
    common.fail("--output_dir=%s: already holds %s (pass --overwrite to replace)" % (
        output_dir, present[0]))
  tmp_dir = os.path.join(output_dir, ".tmp-convert-%d" % os.getpid())
  shutil.rmtree(tmp_dir, ignore_errors=True)
  os.makedirs(tmp_dir)
  return tmp_dir


def _publish(tmp_dir, output_dir, order):
  """Renames the finished files from tmp_dir into output_dir (data first, index/state/config last)."""
  names = sorted(os.listdir(tmp_dir), key=lambda n: (order(n), n))
  for name in names:
    os.replace(os.path.join(tmp_dir, name), os.path.join(output_dir, name))
  return names


def convert_forward(hf_dir, output_dir, hidden_act=None, allow_eps_mismatch=False, overwrite=False):
  """Converts a Hugging Face BERT directory into output_dir (see the module docstring).

  Returns:
    dict summary: num_tensors, num_params, unknown (list), files (list).
  """
  if not hf_dir:
    common.fail("--hf_dir is required")
  if not os.path.isdir(hf_dir):
    common.fail("--hf_dir=%s: not a directory" % hf_dir)
  config_path = os.path.join(hf_dir, "config.json")
  common.require_file(config_path, "hf_dir")
  try:
    with open(config_path, encoding="utf-8") as f:
      hf_config = json.load(f)
  except ValueError as e:
    common.fail("%s: not valid JSON: %s" % (config_path, e))
  bert_config = hf_config_to_bert_config(hf_config, hidden_act, allow_eps_mismatch, config_path)
  vocab = read_vocab_lines(hf_dir)
  if len(vocab) > bert_config["vocab_size"]:
    common.fail("--hf_dir=%s: vocab has %d tokens but vocab_size is %d" % (
        hf_dir, len(vocab), bert_config["vocab_size"]))
  if len(vocab) < bert_config["vocab_size"]:
    _warn("vocab has %d tokens, vocab_size is %d (extra embedding rows are unused)" % (
        len(vocab), bert_config["vocab_size"]))
  hf_tensors = read_hf_weights(hf_dir)
  params, unknown = convert_hf_tensors(hf_tensors, bert_config,
                                       source=os.path.join(hf_dir, "model.safetensors"))
  del hf_tensors
  if unknown:
    _warn("%d Hugging Face tensors not converted (no BERT TF name): %s" % (
        len(unknown), ", ".join(unknown)))
  if "bert/pooler/dense/kernel" not in params:
    _warn("no pooler weights: pooled_output will start from a random initialisation")

  final = [CKPT_NAME + ".index", CKPT_NAME + ".data-00000-of-00001", "bert_config.json", "vocab.txt"]
  tmp_dir = _prepare_output_dir(output_dir, final, overwrite)
  try:
    write_tf_checkpoint(params, os.path.join(tmp_dir, CKPT_NAME))
    _verify_checkpoint(params, os.path.join(tmp_dir, CKPT_NAME))
    with open(os.path.join(tmp_dir, "bert_config.json"), "w") as f:
      f.write(json.dumps(bert_config, indent=2, sort_keys=True) + "\n")
    with open(os.path.join(tmp_dir, "vocab.txt"), "w", encoding="utf-8") as f:
      f.write("".join(tok + "\n" for tok in vocab))
    if overwrite:
      # Stale shards of an earlier, differently sharded checkpoint would confuse readers.
      for name in os.listdir(output_dir):
        if name.startswith(CKPT_NAME + ".data-") and not os.path.exists(os.path.join(tmp_dir, name)):
          os.remove(os.path.join(output_dir, name))
    files = _publish(tmp_dir, output_dir, lambda n: (
        0 if ".data-" in n else 1 if n.endswith(".index") else 2 if n != "checkpoint" else 3))
  finally:
    shutil.rmtree(tmp_dir, ignore_errors=True)
  return {
      "num_tensors": len(params),
      "num_params": int(sum(v.size for v in params.values())),
      "unknown": unknown,
      "files": files,
      "bert_config": bert_config,
  }


def _resolve_checkpoint(path):
  """--tf_checkpoint as a prefix: a prefix, a directory's latest, or its bert_model.ckpt."""
  from realformer_tf import export_utils  # pylint: disable=g-import-not-at-top
  if not path:
    common.fail("--tf_checkpoint is required with --reverse")
  if os.path.isdir(path) and os.path.exists(os.path.join(path, CKPT_NAME + ".index")) and \
      not os.path.exists(os.path.join(path, "checkpoint")):
    # A converted model directory has no `checkpoint` state file.
    return os.path.join(path, CKPT_NAME)
  return export_utils.resolve_checkpoint(path, "tf_checkpoint")


def convert_reverse(tf_checkpoint, output_dir, bert_config_file=None, vocab_file=None,
                    overwrite=False):
  """Converts a BERT TF checkpoint into a Hugging Face directory (config.json, model.safetensors, vocab.txt).

  Returns:
    dict summary: num_tensors, num_params, skipped (list), files (list).
  """
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  prefix = _resolve_checkpoint(tf_checkpoint)
  ckpt_dir = os.path.dirname(prefix)
  bert_config_file = bert_config_file or os.path.join(ckpt_dir, "bert_config.json")
  common.require_file(bert_config_file, "bert_config_file")
  with open(bert_config_file, encoding="utf-8") as f:
    bert_config = json.load(f)
  variables = read_tf_checkpoint(prefix)
  with_heads = any(name.startswith("cls/") for name in variables)
  hf_config = bert_config_to_hf_config(
      bert_config, "BertForPreTraining" if with_heads else "BertModel", bert_config_file)
  tensors, skipped = {}, []
  for name in sorted(variables):
    hf_name, transpose = tf_to_hf_name(name, with_heads)
    if hf_name is None:
      skipped.append(name)
      continue
    value = np.asarray(variables[name], np.float32)
    tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
  missing = sorted(set(expected_shapes(bert_config)) - set(variables))
  if missing:
    common.fail("--tf_checkpoint=%s: missing variable %s" % (prefix, missing[0]))
  # Optimizer slots and step counters are expected in pre-training checkpoints: report them briefly.
  slots = [n for n in skipped if re.search(r"(adam_[mv]|Adam(_1)?|Momentum|global_step)$", n)]
  others = [n for n in skipped if n not in slots]
  if slots:
    sys.stderr.write("info: skipped %d optimizer variables (adam_m/adam_v/global_step/...)\n" %
                     len(slots))
  if others:
    _warn("%d TF variables not converted (no Hugging Face name): %s" % (len(others), ", ".join(others)))
  vocab_file = vocab_file or os.path.join(ckpt_dir, "vocab.txt")
  final = ["config.json", "model.safetensors", "vocab.txt"]
  tmp_dir = _prepare_output_dir(output_dir, final, overwrite)
  try:
    save_file(tensors, os.path.join(tmp_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(tmp_dir, "config.json"), "w") as f:
      f.write(json.dumps(hf_config, indent=2, sort_keys=True) + "\n")
    if os.path.isfile(vocab_file):
      shutil.copyfile(vocab_file, os.path.join(tmp_dir, "vocab.txt"))
    else:
      _warn("no vocab file at %s: output has no vocab.txt" % vocab_file)
    files = _publish(tmp_dir, output_dir, lambda n: 0 if n.endswith(".safetensors") else 1)
  finally:
    shutil.rmtree(tmp_dir, ignore_errors=True)
  return {
      "num_tensors": len(tensors),
      "num_params": int(sum(v.size for v in tensors.values())),
      "skipped": skipped,
      "files": files,
  }


def main(_):
  if FLAGS.reverse:
    summary = convert_reverse(FLAGS.tf_checkpoint, FLAGS.output_dir, FLAGS.bert_config_file,
                              FLAGS.vocab_file, FLAGS.overwrite)
    print("wrote %s: %s" % (FLAGS.output_dir, ", ".join(summary["files"])))
  else:
    summary = convert_forward(FLAGS.hf_dir, FLAGS.output_dir, FLAGS.hidden_act,
                              FLAGS.allow_layer_norm_eps_mismatch, FLAGS.overwrite)
    cfg = summary["bert_config"]
    print("wrote %s: %s" % (FLAGS.output_dir, ", ".join(summary["files"])))
    print("model: %d layers, hidden %d, %d heads, intermediate %d, hidden_act %s" % (
        cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"],
        cfg["intermediate_size"], cfg["hidden_act"]))
  print("self-check: %d tensors, %s parameters%s" % (
      summary["num_tensors"], "{:,}".format(summary["num_params"]),
      "" if FLAGS.reverse else ", checkpoint read back identical"))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
