# coding=utf-8
r"""Training-step speed of the Table 7 variants side by side: ADMIN, RealFormer (mean / sum), Pre-LN.

The same real Multi30K batches (token budget --max_tokens, bucketed by length as in training) are
fed to every variant's training graph (run_translation.model_fn_builder: model, label-smoothed
loss, Adam); the variants are timed interleaved, --steps steps each per round, so machine load
falls on all of them alike. Prints, per variant, the median step time, steps/s, target tokens/s
and the step-time ratio to ADMIN (median over rounds of the round medians, with its range): the
speed column of paper/table7.md under equal conditions, which the runs' own tokens/s
(measured while other jobs shared the machine) are not.

  bash run.sh bench bench_translation_step                       # configs/nmt_multi30k_6l.json
  bash run.sh bench bench_translation_step --train_file=output/table7/data/train.tfrecord \
      --variants=admin,realformer_mean --rounds=5

Without --train_file, create_translation_data.py makes the TFRecords from the Multi30K training
text (../shared/data/nmt/multi30k, a SentencePiece model of the config's vocab size) in a
temporary directory first (about a minute).
"""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import reproduction
from realformer_tf import subprocess_utils
from translation import nmt_modeling
from translation import run_translation
from translation import translation_input
from translation import translation_records

tf1 = tf.compat.v1
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_string("config_file", os.path.join("configs", "nmt_multi30k_6l.json"),
                    "NmtConfig of the model (its layer_norm_type / residual_attention are "
                    "replaced by each variant's).")
flags.DEFINE_string("variants", "admin,realformer_mean,realformer_sum,pre_ln",
                    "Comma list of reproduce_table7 variants: %s." % ", ".join(
                        nmt_modeling.TABLE7_VARIANTS))
flags.DEFINE_string("train_file", None, "Training TFRecords (create_translation_data.py); "
                    "default: made here from the Multi30K training text.")
flags.DEFINE_integer("max_tokens", 4096, "Token budget of a batch.")
flags.DEFINE_integer("num_batches", 16, "Distinct batches cycled through (all variants get the "
                     "same ones).")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds.")
flags.DEFINE_integer("steps", 8, "Timed training steps per variant per round.")
flags.DEFINE_integer("warmup", 3, "Untimed steps per variant before the first round.")
FLAGS = flags.FLAGS

MULTI30K = ("nmt", "multi30k")


def make_train_file(work_dir, vocab_size):
  """TFRecords of the Multi30K En-De training pairs, with a SentencePiece model trained here.

  Returns:
    path of the TFRecord file.
  """
  data = os.path.join(common.shared_data_dir(), *MULTI30K)
  output = os.path.join(work_dir, "train.tfrecord")
  cmd = reproduction.tool_command("translation/create_translation_data.py", [
      "--source_file=%s" % os.path.join(data, "train.en.gz"),
      "--target_file=%s" % os.path.join(data, "train.de.gz"),
      "--spm_model=%s" % os.path.join(work_dir, "spm.model"),
      "--train_spm_vocab_size=%d" % vocab_size, "--output_file=%s" % output])
  print("Making the training TFRecords (translation/create_translation_data.py on %s) ..." %
        os.path.relpath(data, REPO), flush=True)
  log = os.path.join(work_dir, "create.log")
  if subprocess_utils.run_child(cmd, log, cwd=REPO).returncode != 0:
    common.fail("translation/create_translation_data.py failed; see %s" % log)
  return output


def read_batches(train_file, max_tokens, num_batches):
  """The first num_batches training batches (shuffled, bucketed) as numpy dicts.

  Returns:
    list of {"source_ids", "target_input_ids", "target_ids": int32 [batch, length]}.
  """
  input_fn = translation_input.input_fn_builder([train_file], max_tokens,
                                                translation_records.DEFAULT_MAX_LENGTH, True)
  with tf.Graph().as_default():
    features = tf1.data.make_one_shot_iterator(input_fn({})).get_next()
    with tf1.Session() as sess:
      return [sess.run(features) for _ in range(num_batches)]


class Variant(object):
  """One variant's training graph and session, fed the shared batches."""

  def __init__(self, name, config):
    self.name = name
    self.label = nmt_modeling.TABLE7_VARIANTS[name][0]
    self.round_medians = []
    self.times = []
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf1.set_random_seed(1)
      tf1.train.get_or_create_global_step()
      self.placeholders = {key: tf1.placeholder(tf.int32, [None, None], name=key)
                           for key in ("source_ids", "target_input_ids", "target_ids")}
      # omega stays at 1 without a profile: the profile changes values, not the work.
      model_fn = run_translation.model_fn_builder(config, learning_rate=1e-3,
                                                  num_train_steps=1000, num_warmup_steps=100)
      spec = model_fn(self.placeholders, None, tf1.estimator.ModeKeys.TRAIN, {})
      self.train_op = spec.train_op
      self.session = tf1.Session(graph=self.graph)
      self.session.run(tf1.global_variables_initializer())
    self.next_batch = 0

  def run(self, batches, steps, timed=True):
    """Runs `steps` training steps on the next batches (cycled)."""
    times = []
    for _ in range(steps):
      batch = batches[self.next_batch % len(batches)]
      self.next_batch += 1
      feed = {self.placeholders[k]: batch[k] for k in self.placeholders}
      start = time.perf_counter()
      self.session.run(self.train_op, feed)
      times.append(time.perf_counter() - start)
    if timed:
      self.times.extend(times)
      self.round_medians.append(float(np.median(times)))


def variant_config(base, name):
  """A copy of base with the variant's layer_norm_type and residual_attention."""
  _, layer_norm_type, residual_attention = nmt_modeling.TABLE7_VARIANTS[name]
  config = nmt_modeling.NmtConfig.from_dict(base.to_dict())
  config.layer_norm_type = layer_norm_type
  config.residual_attention = residual_attention
  return config


def print_table(variants, target_tokens_per_step):
  base = variants[0]
  print("\n%-20s %14s %9s %16s %22s" % ("variant", "median step ms", "steps/s",
                                        "target tokens/s", "step time / %s" % base.label))
  for v in variants:
    median = float(np.median(v.times))
    ratios = np.array(v.round_medians) / np.array(base.round_medians)
    print("%-20s %14.1f %9.2f %16.0f %9.3f (%.3f-%.3f)" % (
        v.label, 1000 * median, 1.0 / median, target_tokens_per_step / median,
        float(np.median(ratios)), float(ratios.min()), float(ratios.max())))


def main(_):
  names = [n for n in FLAGS.variants.split(",") if n]
  unknown = [n for n in names if n not in nmt_modeling.TABLE7_VARIANTS]
  if unknown or not names:
    common.fail("--variants=%s: unknown %s (known: %s)" % (
        FLAGS.variants, ",".join(unknown) or "(none given)",
        ", ".join(nmt_modeling.TABLE7_VARIANTS)))
  config_path = (FLAGS.config_file if os.path.exists(FLAGS.config_file)
                 else os.path.join(REPO, FLAGS.config_file))
  if not os.path.exists(config_path):
    common.fail("--config_file=%s: no such file" % FLAGS.config_file)
  base = nmt_modeling.NmtConfig.from_json_file(config_path)
  with tempfile.TemporaryDirectory() as work_dir:
    train_file = FLAGS.train_file or make_train_file(work_dir, base.vocab_size)
    if not os.path.exists(train_file):
      common.fail("--train_file=%s: no such file" % train_file)
    batches = read_batches(train_file, FLAGS.max_tokens, FLAGS.num_batches)
  target_tokens = float(np.mean([np.count_nonzero(b["target_ids"]) for b in batches]))
  print("Model: %s (%dL-%dL, hidden %d, vocab %d); %d batches of <= %d tokens, %.0f target "
        "tokens a batch on average; %d rounds x %d steps, interleaved" % (
            FLAGS.config_file, base.num_encoder_layers, base.num_decoder_layers,
            base.hidden_size, base.vocab_size, len(batches), FLAGS.max_tokens, target_tokens,
            FLAGS.rounds, FLAGS.steps), flush=True)
  variants = [Variant(n, variant_config(base, n)) for n in names]
  for v in variants:
    v.run(batches, FLAGS.warmup, timed=False)
  for round_index in range(FLAGS.rounds):
    # Alternate the order so no variant always runs first after the others' cache traffic.
    order = variants if round_index % 2 == 0 else variants[::-1]
    for v in order:
      v.run(batches, FLAGS.steps)
    print("round %d/%d: %s" % (round_index + 1, FLAGS.rounds, ", ".join(
        "%s %.0f ms" % (v.name, 1000 * v.round_medians[-1]) for v in variants)), flush=True)
  print_table(variants, target_tokens)


if __name__ == "__main__":
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
