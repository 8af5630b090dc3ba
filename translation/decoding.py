# coding=utf-8
"""The translation model's decoding graph and checkpoint checks (library, no flags parsed here).

Shared by run_translation.py (--do_predict, --do_eval, --export_dir) and the raw-text SavedModel
of translation_serving.py (export_translation.py; it runs the very graph code of the Estimator's
PREDICT mode):
translate_graph (beam / greedy search over nmt_modeling's cached decoder), encode_sources (the
source ids and how an over-long source is cut), model_variable_specs / check_checkpoint (a
checkpoint of another model is one line before any work), define_decoding_flags.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

from absl import flags
import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils
from translation import beam_search
from translation import nmt_modeling

tf1 = tf.compat.v1

CONFIG_NAME = "nmt_config.json"
DEFAULT_MAX_SOURCE_LENGTH = 256


def define_decoding_flags():
  """The beam-search flags, shared by --do_predict and export_translation.py."""
  flags.DEFINE_integer("beam_size", 4, "Beam size (1: greedy).")
  flags.DEFINE_float("length_penalty", 0.6, "GNMT length-penalty alpha (0: none).")
  flags.DEFINE_integer("max_decode_length", 128, "Most target pieces generated (eos included).")
  flags.DEFINE_integer("max_source_length", DEFAULT_MAX_SOURCE_LENGTH,
                       "Longest source decoded, in ids (pieces + eos): a longer source is cut to "
                       "its first N-1 pieces + eos, counted and logged (one over-long line would "
                       "otherwise exhaust memory). 0: no limit.")


def model_variable_specs(config):
  """{name: (shape, trainable)} of every variable the model has (export_utils' format)."""
  def build():
    ids = tf1.placeholder(tf.int32, [None, None])
    nmt_modeling.NmtModel(config, False, ids, ids)
  return export_utils.collect_variable_specs(build)


def check_checkpoint(specs, checkpoint, flag_name="checkpoint", extra_names=()):
  """One line naming the first variable the checkpoint lacks or holds with another shape.

  Shared by run_translation.py (--do_eval / --do_predict / --export_dir) and
  translation_serving.export: a checkpoint of another model (a BERT one, another config) is refused
  before any work, not with a NotFoundError traceback from the restore.

  Args:
    specs: {name: (shape, trainable)} of the model (model_variable_specs).
    checkpoint: checkpoint prefix.
    flag_name: the flag that named it.
    extra_names: more variables the restore needs (the Estimator's "global_step").
  """
  try:
    shapes = dict(tf1.train.list_variables(checkpoint))
  except (tf.errors.OpError, ValueError) as e:
    common.fail("--%s=%s: not a readable TensorFlow checkpoint (%s)" % (
        flag_name, checkpoint, (str(getattr(e, "message", e)).splitlines() or [""])[0]))
  missing = [name for name in list(specs) + list(extra_names) if name not in shapes]
  if missing:
    common.fail("--%s=%s: lacks %d variable(s) of the translation model: %s (not a "
                "run_translation.py checkpoint of this --config_file?)" % (
                    flag_name, checkpoint, len(missing), ", ".join(missing[:5])))
  for name, (shape, _) in specs.items():
    if list(shapes[name]) != list(shape):
      common.fail("--%s=%s: variable %s has shape %s there but %s in the model of the "
                  "config (check --config_file)" % (flag_name, checkpoint, name,
                                                    list(shapes[name]), list(shape)))


def translate_graph(config, source_ids, beam_size, length_penalty, max_decode_length):
  """Beam search (greedy for beam_size 1) over the model; variables under the caller's scope.

  Args:
    config: NmtConfig.
    source_ids: int32 [batch, src] (pieces + eos, 0-padded).
    beam_size: int.
    length_penalty: GNMT alpha.
    max_decode_length: int, the most generated tokens.

  Returns:
    {"ids": int32 [batch, max_decode_length] (0 after eos), "length": int32 [batch],
     "score": float32 [batch]}.
  """
  encoder_output = nmt_modeling.encode(config, source_ids, False)
  cache = nmt_modeling.init_decoder_cache(config, encoder_output, max_decode_length)
  batch_size = tf.shape(source_ids)[0]
  initial_ids = tf.fill([batch_size], nmt_modeling.BOS_ID)

  def symbols_to_logits(ids, step, states):
    return nmt_modeling.decode_step(config, ids, step, states)

  if beam_size == 1:
    ids, lengths = beam_search.greedy_search(symbols_to_logits, initial_ids, max_decode_length,
                                             states=cache, eos_id=nmt_modeling.EOS_ID)
    return {"ids": ids, "length": lengths, "score": tf.zeros([batch_size])}
  ids, scores, lengths = beam_search.beam_search(
      symbols_to_logits, initial_ids, beam_size, max_decode_length, config.vocab_size,
      length_penalty, states=cache, eos_id=nmt_modeling.EOS_ID)
  return {"ids": ids[:, 0], "length": lengths[:, 0], "score": scores[:, 0]}


def encode_sources(sp, lines, max_source_length=0):
  """The model's source ids of each line: its pieces + eos, cut to `max_source_length` ids.

  A longer source keeps its first max_source_length - 1 pieces and eos (the `translate`
  signature of translation_serving's SavedModel cuts the same way).

  Args:
    sp: SentencePieceProcessor (translation_records.load_spm).
    lines: source sentences (str).
    max_source_length: the most ids per source (pieces + eos); 0 or None: no limit.

  Returns:
    (ids, num_cut): list of lists of int, and how many sources were cut.
  """
  ids = []
  num_cut = 0
  for line in lines:
    pieces = sp.encode(line)
    if max_source_length and len(pieces) + 1 > max_source_length:
      pieces = pieces[:max_source_length - 1]
      num_cut += 1
    ids.append(pieces + [nmt_modeling.EOS_ID])
  return ids, num_cut
