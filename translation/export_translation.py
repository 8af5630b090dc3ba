# coding=utf-8
r"""Exports a translation checkpoint (nmt_modeling.py) as a raw-text SavedModel.

The SavedModel does everything run_translation.py --do_predict does, inside the graph: source
strings -> SentencePiece pieces + eos -> encoder and beam search (greedy for beam_size 1) over
the cached decoder -> the detokenised best hypothesis. Its signatures `translate` and
`serving_default` take `source`, string [batch], and return translation, score, length,
reached_max_length and source_truncated: translation/translation_serving.py (the library this
command and run_translation.py --export_dir export with) says what each holds.

beam_size, length_penalty, max_decode_length and max_source_length are fixed at export time
(translation_config.json records them; max_source_length 0: no limit, and one over-long string
can then exhaust the server's memory). The export is self-contained: the SentencePiece model is
an asset (assets/<name>.model) and nmt_config.json / translation_config.json lie beside
saved_model.pb.

  python -m translation.export_translation --checkpoint=out/nmt \
      --spm_model=out/nmt/spm_en_de.model \
      --export_dir=out/nmt_export [--config_file=configs/nmt.json] [--beam_size=4] \
      [--length_penalty=0.6] [--max_decode_length=128] [--max_source_length=256] [--overwrite]

  (or run_translation.py ... --export_dir=out/nmt_export at the end of a job)

Loading (any fresh TF 2.15 process; `import tensorflow_text` first, it registers the
SentencePiece ops):

  import tensorflow_text  # noqa
  translator = tf.saved_model.load("out/nmt_export")
  out = translator.signatures["translate"](source=tf.constant(["A man rides a bike."]))
  out["translation"].numpy()[0].decode("utf-8")
"""

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils
from translation import decoding
from translation import translation_serving

tf1 = tf.compat.v1
FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags (called under __main__ so that every module imports together)."""
  flags.DEFINE_string("checkpoint", None, "Checkpoint prefix or directory (its latest one).")
  flags.DEFINE_string("spm_model", None, "The joint SentencePiece model the job was trained "
                      "with (stored in the export).")
  flags.DEFINE_string("config_file", None, "NmtConfig JSON (default: nmt_config.json beside the "
                      "checkpoint, as run_translation.py writes it).")
  flags.DEFINE_string("export_dir", None, "SavedModel directory to write (new, or an earlier "
                      "export of ours with --overwrite).")
  decoding.define_decoding_flags()
  flags.DEFINE_bool("overwrite", False, "Replace an earlier export of ours at --export_dir.")


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  for name in ("checkpoint", "spm_model", "export_dir"):
    if not getattr(FLAGS, name):
      common.fail("--%s is required" % name)
  checkpoint = export_utils.resolve_checkpoint(FLAGS.checkpoint, "checkpoint")
  config = translation_serving.load_config(FLAGS.config_file, checkpoint)
  translation_serving.export(
      config, checkpoint, FLAGS.spm_model, FLAGS.export_dir, beam_size=FLAGS.beam_size,
      length_penalty=FLAGS.length_penalty, max_decode_length=FLAGS.max_decode_length,
      max_source_length=FLAGS.max_source_length, overwrite=FLAGS.overwrite,
      protected_paths=[FLAGS.config_file])


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
