# coding=utf-8
r"""Initialises an ETC checkpoint from a BERT checkpoint ("lifting", as the paper lifted RoBERTa).

  python -m etc_model.lift_bert_checkpoint --bert_checkpoint=bert_dir \
      --output_dir=etc_lifted [--etc_config_file=etc_config.json] [--local_radius=84 ...]

Any BERT checkpoint with the official names works: google-research/bert's, ours (any
`residual_attention`), or a Hugging Face model converted with convert_hf_checkpoint.py. The
mapping follows the names of the official etcmodel (which ships no lifting script):

  bert/embeddings/word_embeddings        -> token_emb_lookup/embedding_table (shared by global
                                            tokens)
  bert/embeddings/token_type_embeddings  -> segment_emb_lookup/embedding_table (rows 0..T-1; ETC's
                                            default segment ids are 1 for long, 0 for global tokens)
  bert/embeddings/position_embeddings    -> position_emb_lookup_long / _global (rows 0..P-1; only
                                            with max_absolute_position_embeddings > 0)
  bert/embeddings/LayerNorm              -> long_emb_layer_norm and global_emb_layer_norm
  layer_i/attention/self/query           -> long_query_projection (and global_query_projection)
  layer_i/attention/self/key, value      -> l2l_ (and l2g_, g2g_, g2l_) key / value projections
  layer_i/attention/output/dense         -> long_output_projection (and global_output_projection)
  layer_i/attention/output/LayerNorm     -> fused_att_layer_i/layer_norm_0 and layer_norm_1
  layer_i/intermediate/dense, output/dense, output/LayerNorm
                                         -> feed_forward_layer_i/dense_layers/layer_0, layer_1,
                                            layer_norm (or both long_ and global_ copies)

BERT's masked-LM head (cls/predictions/*) is copied under its own names when its shapes fit:
it is the head `python -m etc_model.run_pretraining` trains.

New (initialised as ETC initialises them): the relative attention tables, table rows beyond
BERT's, an ALBERT-style embedding projection. Unused: the pooler, the NSP head
(cls/seq_relationship), a Pre-LN BERT's final LayerNorm, optimizer slots and global_step. The
counts of mapped / new / unused variables are printed.

Without --etc_config_file the ETC config is the BERT config's sizes (vocab, hidden, layers,
heads, intermediate, activation, dropouts, initializer range, residual_attention) with ETC's
defaults for the rest, overridable by --local_radius, --relative_pos_max_distance,
--relative_vocab_size, --max_absolute_position_embeddings and --residual_attention. The output
directory gets the checkpoint, `etc_config.json` and the vocab.txt found beside the BERT
checkpoint.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import re

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils
import modeling
from realformer_tf import checkpoint_slimming
from etc_model import etc_modeling

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

ETC_CONFIG_FILENAME = "etc_config.json"  # official input_utils.MODEL_CONFIG_FILENAME
CHECKPOINT_NAME = "model.ckpt"
COMPANION_FILES = ("vocab.txt",)
# ETC-only config keys a flag may set when no --etc_config_file is given.
ETC_FLAG_KEYS = ("local_radius", "relative_pos_max_distance", "relative_vocab_size",
                 "max_absolute_position_embeddings")

_LAYER = re.compile(r"^(?:long_|global_)?(fused_att_layer|feed_forward_layer)_(\d+)/(.*)$")
_FUSED_SOURCES = (
    (re.compile(r"^fused_global_local_att/(long|global)_query_projection/linear/(kernel|bias)$"),
     "attention/self/query/%s", 2),
    (re.compile(r"^fused_global_local_att/(l2l|l2g|g2g|g2l)_key_projection/linear/(kernel|bias)$"),
     "attention/self/key/%s", 2),
    (re.compile(r"^fused_global_local_att/(l2l|l2g|g2g|g2l)_value_projection/linear/"
                r"(kernel|bias)$"), "attention/self/value/%s", 2),
    (re.compile(r"^fused_global_local_att/(long|global)_output_projection/(kernel|bias)$"),
     "attention/output/dense/%s", 2),
    (re.compile(r"^layer_norm_([01])/(gamma|beta)$"), "attention/output/LayerNorm/%s", 2),
)
_FEED_FORWARD_SOURCES = (
    (re.compile(r"^dense_layers/layer_0/(kernel|bias)$"), "intermediate/dense/%s", 1),
    (re.compile(r"^dense_layers/layer_1/(kernel|bias)$"), "output/dense/%s", 1),
    (re.compile(r"^layer_norm/(gamma|beta)$"), "output/LayerNorm/%s", 1),
)
_EMBEDDING_SOURCES = {
    "token_emb_lookup/embedding_table": "bert/embeddings/word_embeddings",
    "segment_emb_lookup/embedding_table": "bert/embeddings/token_type_embeddings",
    "position_emb_lookup_long/embedding_table": "bert/embeddings/position_embeddings",
    "position_emb_lookup_global/embedding_table": "bert/embeddings/position_embeddings",
}
# Tables whose leading rows are copied when the sizes differ.
_ROW_COPIED = ("segment_emb_lookup/embedding_table", "position_emb_lookup_long/embedding_table",
               "position_emb_lookup_global/embedding_table")


def define_flags():
  """Defines the tool's flags (not at import time, so tests can import the module)."""
  flags.DEFINE_string("bert_checkpoint", None, "BERT checkpoint prefix or model directory.")
  flags.DEFINE_string("bert_config_file", None, "BERT config (default: bert_config.json beside "
                      "the checkpoint).")
  flags.DEFINE_string("etc_config_file", None, "ETC config of the lifted model (default: the "
                      "BERT sizes with ETC defaults and the flags below).")
  flags.DEFINE_string("output_dir", None, "New directory for the ETC checkpoint and config.")
  flags.DEFINE_integer("local_radius", None, "ETC local_radius (default 84).")
  flags.DEFINE_integer("relative_pos_max_distance", None, "default 12.")
  flags.DEFINE_integer("relative_vocab_size", None, "default 32.")
  flags.DEFINE_integer("max_absolute_position_embeddings", None, "default 0 (relative "
                       "positions only); > 0 lifts BERT's position table too.")
  flags.DEFINE_string("residual_attention", None, "none | sum | mean (default: the BERT "
                      "config's).")
  flags.DEFINE_integer("seed", 12345, "Seed of the new variables' initialisation.")
  flags.DEFINE_bool("overwrite", False, "Replace an earlier output of this tool at --output_dir.")


def etc_config_from_bert(bert_config, **overrides):
  """The ETC config of a lifted BERT: its sizes, ETC defaults for the rest, `overrides`.

  Args:
    bert_config: modeling.BertConfig.
    **overrides: EtcConfig keys (None values are ignored).

  Returns:
    A validated EtcConfig.
  """
  values = {"vocab_size": bert_config.vocab_size, "hidden_size": bert_config.hidden_size,
            "num_hidden_layers": bert_config.num_hidden_layers,
            "num_attention_heads": bert_config.num_attention_heads,
            "intermediate_size": bert_config.intermediate_size,
            "hidden_act": bert_config.hidden_act,
            "hidden_dropout_prob": bert_config.hidden_dropout_prob,
            "attention_probs_dropout_prob": bert_config.attention_probs_dropout_prob,
            "initializer_range": bert_config.initializer_range,
            "residual_attention": bert_config.residual_attention,
            "use_pre_activation_order": bert_config.layer_norm_type == "pre"}
  values.update({k: v for k, v in overrides.items() if v is not None})
  return etc_modeling.EtcConfig.from_dict(values, source="lifted ETC config")


def bert_source(etc_name):
  """The BERT variable an ETC variable is lifted from, or None (a new variable).

  Args:
    etc_name: ETC variable name without ':0' (`etc_document_bert/...`).

  Returns:
    The BERT checkpoint name, or None.
  """
  name = etc_name.split("/", 1)[1]
  if name in _EMBEDDING_SOURCES:
    return _EMBEDDING_SOURCES[name]
  match = re.match(r"^(long|global)_emb_layer_norm/(gamma|beta)$", name)
  if match:
    return "bert/embeddings/LayerNorm/%s" % match.group(2)
  prefix = "global_local_transformer_layers/"
  if not name.startswith(prefix):
    return None
  match = _LAYER.match(name[len(prefix):])
  if not match:
    return None
  kind, index, rest = match.groups()
  sources = _FUSED_SOURCES if kind == "fused_att_layer" else _FEED_FORWARD_SOURCES
  for pattern, template, group in sources:
    part = pattern.match(rest)
    if part:
      return "bert/encoder/layer_%s/%s" % (index, template % part.group(group))
  return None  # relative tables


def new_etc_values(etc_config, seed):
  """Builds the ETC graph and returns every variable's initial value (ETC's initialisers).

  Args:
    etc_config: EtcConfig.
    seed: graph-level random seed.

  Returns:
    dict name (no ':0') -> numpy value, in creation order.
  """
  with tf.Graph().as_default():
    tf1.set_random_seed(seed)
    model = etc_modeling.EtcModel(etc_config, is_training=False)
    model(token_ids=tf.zeros([1, 2], tf.int32), global_token_ids=tf.zeros([1, 1], tf.int32))
    variables = tf1.global_variables()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      values = sess.run(variables)
  return {v.name[:-2]: value for v, value in zip(variables, values)}


def lift_values(bert_values, etc_config, seed=12345, source="--bert_checkpoint"):
  """Maps BERT values onto the ETC variables.

  Args:
    bert_values: dict BERT variable name -> numpy value.
    etc_config: EtcConfig of the lifted model.
    seed: seed of the new variables' initialisation.
    source: what the BERT values came from, for error messages.

  Returns:
    (dict ETC name -> value, report dict: "mapped" (ETC names), "partial" (tables whose leading
     rows were copied), "new" (ETC names), "head" (BERT's MLM head variables, copied under
     their own names), "unused" (BERT names), "optimizer" (BERT optimizer slots and
     global_step, never lifted)).
  """
  values = new_etc_values(etc_config, seed)
  check_bert_sources(bert_values, values, source)
  report = {"mapped": [], "partial": [], "new": [], "unused": [], "optimizer": []}
  used = set()
  for name, initial in values.items():
    bert_name = bert_source(name)
    if bert_name is None or bert_name not in bert_values:
      report["new"].append(name)
      continue
    bert_value = bert_values[bert_name]
    short_name = name.split("/", 1)[1]
    if bert_value.shape != initial.shape:
      if (short_name in _ROW_COPIED and bert_value.ndim == 2 and
          bert_value.shape[1] == initial.shape[1]):
        rows = min(bert_value.shape[0], initial.shape[0])
        lifted = initial.copy()
        lifted[:rows] = bert_value[:rows]
        values[name] = lifted
        report["partial"].append("%s (%d of %d rows)" % (name, rows, initial.shape[0]))
        used.add(bert_name)
        continue
      if short_name == "token_emb_lookup/embedding_table":
        report["new"].append(name)  # an ALBERT-style embedding_size: nothing to lift
        continue
      common.fail("%s: %s has shape %s, the ETC variable %s needs %s (do the BERT config and "
                  "the ETC config agree?)" % (source, bert_name, list(bert_value.shape), name,
                                               list(initial.shape)))
    values[name] = bert_value.astype(initial.dtype)
    report["mapped"].append(name)
    used.add(bert_name)
  report["head"] = []
  head_shapes = masked_lm_head_shapes(etc_config)
  for name in sorted(bert_values):
    # BERT's MLM head under its own names: the head etc_model.run_pretraining trains.
    if name in head_shapes and list(bert_values[name].shape) == head_shapes[name]:
      values[name] = bert_values[name].astype("float32")
      report["head"].append(name)
      used.add(name)
  for name in sorted(set(bert_values) - used):
    key = "optimizer" if checkpoint_slimming.STRIP_PATTERN.search(name) else "unused"
    report[key].append(name)
  return values, report


def check_bert_sources(bert_values, etc_values, source):
  """One line unless the BERT values hold every variable the ETC variables are lifted from.

  A checkpoint of another model (an ETC checkpoint, a translation model) would otherwise be
  "lifted" into a randomly initialised ETC, and a BERT of fewer layers than its config into an
  ETC whose upper layers are random.

  Args:
    bert_values: dict BERT variable name -> value.
    etc_values: dict ETC variable name -> initial value (new_etc_values).
    source: what the BERT values came from, for the message.
  """
  wanted = sorted(set(bert_source(name) for name in etc_values) - {None})
  missing = [name for name in wanted if name not in bert_values]
  if not missing:
    return
  if len(missing) == len(wanted):
    seen = sorted(set(name.split("/", 1)[0] for name in bert_values))
    common.fail("%s: holds none of BERT's variables (bert/embeddings/..., bert/encoder/...; its "
                "top-level scopes are %s), so there is nothing to lift; give a BERT "
                "checkpoint (an ETC checkpoint needs no lifting)" % (
                    source, ", ".join(seen[:5]) or "none"))
  common.fail("%s: lacks %d of the %d BERT variables the ETC config maps (%s%s); do the BERT "
              "config and the checkpoint agree (num_hidden_layers)?" % (
                  source, len(missing), len(wanted), ", ".join(missing[:3]),
                  ", ..." if len(missing) > 3 else ""))


def masked_lm_head_shapes(etc_config):
  """{name: shape} of BERT's MLM head (`cls/predictions/*`) on this ETC's token table.

  etc_model.run_pretraining builds this head (its transform projects to the token table's
  width, embedding_size when set); a BERT checkpoint's head of these shapes is lifted as is.
  """
  width = etc_config.embedding_size or etc_config.hidden_size
  return {"cls/predictions/transform/dense/kernel": [etc_config.hidden_size, width],
          "cls/predictions/transform/dense/bias": [width],
          "cls/predictions/transform/LayerNorm/gamma": [width],
          "cls/predictions/transform/LayerNorm/beta": [width],
          "cls/predictions/output_bias": [etc_config.vocab_size]}


def write_checkpoint(values, prefix):
  """Writes a name-based (tf.compat.v1.train.Saver format) checkpoint of `values`."""
  names = sorted(values)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(values[n]) for n in names])


def lift_bert_checkpoint(bert_checkpoint, output_dir, bert_config_file=None, etc_config_file=None,
                         seed=12345, overwrite=False, **etc_overrides):
  """Writes the lifted ETC checkpoint and its config into `output_dir` (atomically).

  Args:
    bert_checkpoint: BERT checkpoint prefix or directory.
    output_dir: new directory.
    bert_config_file: BERT config (default: bert_config.json beside the checkpoint).
    etc_config_file: ETC config; default `etc_config_from_bert` with `etc_overrides`.
    seed: seed of the new variables.
    overwrite: replace an earlier output of this tool.
    **etc_overrides: EtcConfig keys (ETC_FLAG_KEYS, residual_attention); not with
      etc_config_file.

  Returns:
    dict: output_checkpoint, etc_config (EtcConfig) and the `lift_values` report.
  """
  prefix = export_utils.resolve_checkpoint(bert_checkpoint, "bert_checkpoint")
  if not output_dir:
    common.fail("--output_dir is required")
  output_dir = output_dir.rstrip("/")
  if bert_config_file is None:
    bert_config_file = os.path.join(os.path.dirname(prefix), "bert_config.json")
  common.require_file(bert_config_file, "bert_config_file")
  try:
    bert_config = modeling.BertConfig.from_json_file(bert_config_file)
    if etc_config_file:
      given = sorted(k for k, v in etc_overrides.items() if v is not None)
      if given:
        common.fail("--etc_config_file=%s: --%s cannot be combined with it (edit the file)" %
                    (etc_config_file, given[0]))
      common.require_file(etc_config_file, "etc_config_file")
      etc_config = etc_modeling.EtcConfig.from_json_file(etc_config_file)
    else:
      etc_config = etc_config_from_bert(bert_config, **etc_overrides)
  except common.UsageError:
    raise
  except ValueError as e:
    common.fail(str(e))
  for key in ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size"):
    if getattr(etc_config, key) != getattr(bert_config, key):
      common.fail("--etc_config_file=%s: '%s' is %s, the BERT config %s has %s" %
                  (etc_config_file, key, getattr(etc_config, key), bert_config_file,
                   getattr(bert_config, key)))
  # The configs are inputs too: an --overwrite of the directory they lie in would delete them.
  inputs = [prefix, bert_config_file, etc_config_file]
  common.check_export_dir(output_dir, "output_dir", overwrite, inputs, holds_checkpoints=True)

  reader = tf.train.load_checkpoint(prefix)
  bert_values = {name: export_utils.read_tensor(reader, name, prefix)
                 for name in reader.get_variable_to_shape_map()}
  values, report = lift_values(bert_values, etc_config, seed, "--bert_checkpoint=%s" % prefix)
  with common.atomic_directory(output_dir, "output_dir", overwrite, inputs,
                               holds_checkpoints=True) as tmp_dir:
    tf.io.gfile.makedirs(tmp_dir)
    write_checkpoint(values, os.path.join(tmp_dir, CHECKPOINT_NAME))
    tf1.train.update_checkpoint_state(tmp_dir, CHECKPOINT_NAME,
                                      all_model_checkpoint_paths=[CHECKPOINT_NAME])
    with tf.io.gfile.GFile(os.path.join(tmp_dir, ETC_CONFIG_FILENAME), "w") as f:
      f.write(etc_config.to_json_string())
    for companion in COMPANION_FILES:
      source = os.path.join(os.path.dirname(prefix), companion)
      if tf.io.gfile.exists(source):
        tf.io.gfile.copy(source, os.path.join(tmp_dir, companion), overwrite=True)
  return dict(report, output_checkpoint=os.path.join(output_dir, CHECKPOINT_NAME),
              etc_config=etc_config, bert_checkpoint=prefix)


def summary_lines(result):
  """The printed report: counts, then the new and unused names."""
  lines = ["%s -> %s: mapped %d ETC variables (%d of them partly: leading rows), new %d, "
           "unused BERT variables %d (optimizer state skipped: %d)" % (
               result["bert_checkpoint"], result["output_checkpoint"],
               len(result["mapped"]) + len(result["partial"]), len(result["partial"]),
               len(result["new"]), len(result["unused"]), len(result["optimizer"]))]
  if result.get("head"):
    lines.append("  and the MLM head (cls/predictions, for etc_model.run_pretraining): %d "
                 "variables" % len(result["head"]))
  lines += ["  partly mapped: %s" % name for name in result["partial"]]
  lines += ["  new: %s" % name for name in result["new"]]
  lines += ["  unused: %s" % name for name in result["unused"]]
  return lines


def main(_):
  overrides = {key: getattr(FLAGS, key) for key in ETC_FLAG_KEYS + ("residual_attention",)}
  result = lift_bert_checkpoint(FLAGS.bert_checkpoint, FLAGS.output_dir, FLAGS.bert_config_file,
                                FLAGS.etc_config_file, FLAGS.seed, FLAGS.overwrite, **overrides)
  print("\n".join(summary_lines(result)))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
