# coding=utf-8
"""The raw-text translation SavedModel: a translation checkpoint (nmt_modeling.py) with its
SentencePiece model, exported for serving (translation/export_translation.py is the command;
run_translation.py --export_dir exports through export too).

The SavedModel does everything run_translation.py --do_predict does, inside the graph:

  source strings [batch]
    -> SentencePiece pieces + eos (tensorflow-text, the job's .model), 0-padded [batch, src]
    -> the encoder, then beam search (greedy for beam_size 1) over the cached decoder
       (decoding.translate_graph: the very graph code of the Estimator's PREDICT mode)
    -> the best hypothesis without its eos, detokenised with the same SentencePiece model.

Signatures `translate` and `serving_default` (the same function) take `source`, string [batch],
and return:

  translation          string [batch]   the detokenised best hypothesis
  score                float32 [batch]  its beam score: summed log-probabilities divided by the
                                        GNMT length penalty (0 for greedy, beam_size 1, as the
                                        Estimator's predictions)
  length               int32 [batch]    generated pieces, eos included
  reached_max_length   bool [batch]     no eos within max_decode_length (the translation is cut)
  source_truncated     bool [batch]     the source had more than max_source_length ids (pieces +
                                        eos): its first max_source_length - 1 pieces were
                                        translated (as decoding.encode_sources cuts)

beam_size, length_penalty, max_decode_length and max_source_length are fixed at export time
(translation_config.json records them, translation_config_text; max_source_length 0: no limit,
and one over-long string can then exhaust the server's memory). The export is self-contained:
the SentencePiece model is an asset (assets/<name>.model) and nmt_config.json /
translation_config.json lie beside saved_model.pb.

Variables are tf.Variables read from the checkpoint (export_utils.variables_from_checkpoint) and
handed to nmt_modeling's tf.compat.v1.get_variable calls by name (export_utils.in_variables), so
the math is exactly the Estimator's.
"""

import json
import os

import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import model_config
from translation import decoding
from translation import nmt_modeling
from translation import translation_records

tf1 = tf.compat.v1

CONFIG_NAME = decoding.CONFIG_NAME  # nmt_config.json
TRANSLATION_CONFIG_NAME = "translation_config.json"
SIGNATURE_NAMES = ("translate", "serving_default")


class Translator(tf.Module):
  """The raw-text translation SavedModel (see the module docstring)."""

  def __init__(self, config, variables, spm_model_path, beam_size, length_penalty,
               max_decode_length, max_source_length=0):
    """Wraps existing variables and the SentencePiece model.

    Args:
      config: nmt_modeling.NmtConfig.
      variables: dict name -> tf.Variable with every model variable
        (export_utils.variables_from_checkpoint).
      spm_model_path: the SentencePiece .model (stored as an asset and built into the graph).
      beam_size: int >= 1 (1: greedy).
      length_penalty: GNMT alpha.
      max_decode_length: int >= 1, the most generated pieces (eos included).
      max_source_length: the most source ids (pieces + eos) translated; 0: no limit.
    """
    super(Translator, self).__init__()
    import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
    self._config = config
    self._variables = variables
    self._beam_size = int(beam_size)
    self._length_penalty = float(length_penalty)
    self._max_decode_length = int(max_decode_length)
    self._max_source_length = int(max_source_length)
    self.spm_model_file = tf.saved_model.Asset(spm_model_path)
    with tf.io.gfile.GFile(spm_model_path, "rb") as f:
      self._sp = tf_text.SentencepieceTokenizer(model=f.read(), out_type=tf.int32)

  def encode_source(self, source):
    """Raw strings [batch] -> (int32 [batch, src], bool [batch]).

    The ids are pieces + eos, 0-padded (docs/translation.md), cut to max_source_length ids as
    decoding.encode_sources cuts them; the bool says which sources were cut.
    """
    # Invalid UTF-8 would make SentencePiece fail the whole batch: U+FFFD instead.
    source = tf.strings.unicode_transcode(source, "UTF-8", "UTF-8", errors="replace",
                                          replacement_char=0xFFFD)
    pieces = self._sp.tokenize(source)
    truncated = tf.zeros([tf.shape(source)[0]], tf.bool)
    if self._max_source_length:
      keep = self._max_source_length - 1
      truncated = pieces.row_lengths() > keep
      pieces = pieces[:, :keep]
    eos = tf.fill([tf.shape(source)[0], 1], nmt_modeling.EOS_ID)
    with_eos = tf.concat([pieces, tf.RaggedTensor.from_tensor(eos)], axis=1)
    return with_eos.to_tensor(default_value=nmt_modeling.PAD_ID), truncated

  def decode_target(self, ids, length):
    """Best hypotheses -> (strings [batch], ended-with-eos bool [batch]).

    Args:
      ids: int32 [batch, max_decode_length], generated pieces, eos included, 0 after it.
      length: int32 [batch], pieces up to and including eos.
    """
    last = tf.gather(ids, tf.maximum(length - 1, 0), batch_dims=1)
    ended = tf.logical_and(length > 0, tf.equal(last, nmt_modeling.EOS_ID))
    # As run_translation.translate_lines: ids[:length], without the final eos.
    pieces = tf.RaggedTensor.from_tensor(ids, lengths=length - tf.cast(ended, tf.int32))
    return self._sp.detokenize(pieces), ended

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="source")])
  def translate(self, source):
    """Raw source sentences [batch] -> translation, score, length, reached_max_length,
    source_truncated."""
    source_ids, source_truncated = self.encode_source(source)
    with export_utils.in_variables(self._variables):
      best = decoding.translate_graph(self._config, source_ids, self._beam_size,
                                      self._length_penalty, self._max_decode_length)
    length = tf.cast(best["length"], tf.int32)
    translation, ended = self.decode_target(tf.cast(best["ids"], tf.int32), length)
    return {"translation": translation,
            "score": tf.cast(best["score"], tf.float32),
            "length": length,
            "reached_max_length": tf.logical_not(ended),
            "source_truncated": source_truncated}

  def signatures(self):
    translate = self.translate.get_concrete_function()
    return {name: translate for name in SIGNATURE_NAMES}


def translation_config_text(checkpoint, spm_model_path, beam_size, length_penalty,
                            max_decode_length, max_source_length=0):
  """translation_config.json: the decoding settings fixed in the export."""
  return json.dumps({"beam_size": beam_size, "length_penalty": length_penalty,
                     "max_decode_length": max_decode_length,
                     "max_source_length": max_source_length,
                     "spm_model": os.path.basename(spm_model_path),
                     "checkpoint": os.path.basename(checkpoint),
                     "signatures": list(SIGNATURE_NAMES)}, indent=2, sort_keys=True) + "\n"


def export(config, checkpoint, spm_model_path, export_dir, beam_size=4, length_penalty=0.6,
           max_decode_length=128, overwrite=False, protected_paths=(),
           max_source_length=decoding.DEFAULT_MAX_SOURCE_LENGTH):
  """Writes the raw-text translation SavedModel (see the module docstring).

  Args:
    config: nmt_modeling.NmtConfig of the checkpoint.
    checkpoint: checkpoint prefix or directory (its latest checkpoint).
    spm_model_path: the joint SentencePiece model (pad 0, unk 1, bos 2, eos 3; vocab_size pieces).
    export_dir: new directory, or an earlier export of ours with overwrite.
    beam_size: int >= 1 (1: greedy).
    length_penalty: GNMT alpha.
    max_decode_length: int >= 1, the most generated pieces (eos included).
    overwrite: replace an earlier export of ours.
    protected_paths: paths the export must never replace (the job's output_dir, ...).
    max_source_length: the most source ids (pieces + eos) translated, longer sources are cut;
      0: no limit.

  Returns:
    The checkpoint prefix exported.
  """
  checkpoint = export_utils.resolve_checkpoint(checkpoint, "checkpoint")
  for name, value in (("beam_size", beam_size), ("max_decode_length", max_decode_length)):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
      common.fail("--%s=%r: must be an integer >= 1" % (name, value))
  if (isinstance(max_source_length, bool) or not isinstance(max_source_length, int)
      or max_source_length < 0 or max_source_length == 1):
    common.fail("--max_source_length=%r: must be an integer >= 2 (one piece + eos), or 0 (no "
                "limit)" % (max_source_length,))
  protected = list(protected_paths) + [checkpoint, spm_model_path]
  common.check_export_dir(export_dir, "export_dir", overwrite, protected)
  sp = translation_records.load_spm(spm_model_path, "spm_model")
  if sp.GetPieceSize() != config.vocab_size:
    common.fail("--spm_model=%s: %d pieces, the model's vocab_size is %d" % (
        spm_model_path, sp.GetPieceSize(), config.vocab_size))
  # The checks run_translation.py runs on --checkpoint too.
  specs = decoding.model_variable_specs(config)
  decoding.check_checkpoint(specs, checkpoint)
  variables = export_utils.variables_from_checkpoint(specs, checkpoint)
  translator = Translator(config, variables, spm_model_path, beam_size, length_penalty,
                          max_decode_length, max_source_length)
  extra = {CONFIG_NAME: config.to_json_string(),
           TRANSLATION_CONFIG_NAME: translation_config_text(
               checkpoint, spm_model_path, beam_size, length_penalty, max_decode_length,
               max_source_length)}
  export_utils.save_atomically(translator, export_dir, translator.signatures(), extra,
                               overwrite, protected)
  tf1.logging.info("Exported the translation model %s (beam %d, length penalty %g, max %d "
                   "pieces, sources cut at %s ids) to %s", checkpoint, beam_size, length_penalty,
                   max_decode_length, max_source_length or "no limit of", export_dir)
  return checkpoint


def load_config(config_file, checkpoint):
  """--config_file, else nmt_config.json beside the checkpoint; one line when bad or missing."""
  if not config_file:
    config_file = os.path.join(os.path.dirname(checkpoint) or ".", CONFIG_NAME)
    if not tf.io.gfile.exists(config_file):
      common.fail("--config_file is required (no %s beside %s)" % (CONFIG_NAME, checkpoint))
  config_file = model_config.shipped_config_path(config_file)
  common.require_file(config_file, "config_file")
  try:
    return nmt_modeling.NmtConfig.from_json_file(config_file)
  except ValueError as e:
    common.fail("--config_file=%s" % e)
