# coding=utf-8
"""CPU-scale reproduction of the RealFormer paper's Table 7 (machine translation) on Multi30K.

The paper (§4.2, Table 7, Appendix A.2) trains 6L-6L Transformers with ADMIN's Post-LN initialisation on
WMT'14 En-De and adds RealFormer's residual attention (running mean). Here the same comparison
runs at CPU scale on Multi30K En->De (29K pairs): ADMIN and RealFormer (mean) first, then
RealFormer (sum) and Pre-LN (Post-LN optional), with the same data, steps, learning rate and
seeds, and a report with test BLEU, dev perplexity, speed and training-loss curves beside the
paper's numbers.

Steps (each skipped when its output is complete, so an interrupted run resumes; SIGINT / SIGTERM
stop the running child cleanly and exit 130 / 143 without a final report):
  1. create_translation_data.py: a joint SentencePiece model (--spm_vocab_size pieces) on the
     training text, then <output_dir>/data/{train,val}.tfrecord.
  2. Per run (<output_dir>/runs/<variant>_seed<seed>/, in --variants / --seeds order, two
     variants at a time over all seeds so the core comparison finishes first):
     run_translation.py --do_train --do_eval (log train.log), average_checkpoints.py of the last
     --num_average checkpoints into averaged/ (average.log), run_translation.py --do_predict of
     the test set with the averaged weights (predict.log) -> bleu.json, translations.txt.
     A run is done when bleu.json exists and train_summary.json is at its target step; a
     trained run without bleu.json is averaged and decoded again.
  3. <output_dir>/report.md (after each newly finished run, marked partial until all are; with
     --report_only from whatever is finished), its figure and curve CSV in
     <output_dir>/report_images/. The settings of the first invocation and the sha256 and size
     of every data file it read are kept in <output_dir>/reproduce_table7.json; a rerun with
     other training or decoding flags, or after a data file was edited in place, is refused
     (more --variants or --seeds are fine). One invocation at a time writes there (lock file
     .lock-reproduce_table7).

  python -m paper.reproduce_table7 --output_dir=output/table7
  python -m paper.reproduce_table7 --output_dir=output/table7 --plan_only  # status
  python -m paper.reproduce_table7 --output_dir=output/table7 --report_only
  python -m paper.reproduce_table7 --tiny_test --output_dir=/tmp/t7   # CI-sized
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import csv
import glob
import gzip
import io
import json
import os
import re
import shutil
import sys

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np

from realformer_tf import common
from realformer_tf import reproduction
from realformer_tf import subprocess_utils
from translation import nmt_modeling

REPO_DIR = common.REPO_DIR
FLAGS = flags.FLAGS

# variant -> (label, layer_norm_type, residual_attention).
VARIANTS = nmt_modeling.TABLE7_VARIANTS
DEFAULT_VARIANTS = "admin,realformer_mean,realformer_sum,pre_ln"
# Runs go in groups of this many variants, each group over all seeds (see run_order).
VARIANT_GROUP = 2

# The paper's Table 7: WMT'14 En-De 6L-6L test BLEU (tokenised, compound-split).
PAPER_TABLE7 = collections.OrderedDict([
    ("post_ln", 27.80), ("pre_ln", 27.27), ("admin", 27.90), ("realformer_mean", 28.17)])
PAPER_ADMIN_AUTHORS_RUN = 28.06

REPORT_NAME = "report.md"
RECORD_NAME = "reproduce_table7.json"   # the settings and data contents of the first invocation
LOCK_LABEL = "reproduce_table7"          # the lock file .lock-reproduce_table7 in --output_dir
TRAIN_SUMMARY = "train_summary.json"
EVAL_RESULTS = "eval_results.json"
BLEU_JSON = "bleu.json"
# run_translation.TokenProgressHook's line: "train: step 49/952 steps, 0.58 steps/s, ...".
PROGRESS_LINE = re.compile(r"train: step (\d+)/(\d+) steps, ([\d.]+) steps/s")
# run_translation's "One epoch = 136 batches of <= 4096 tokens: ..." (its checkpoint period).
EPOCH_LINE = re.compile(r"One epoch = (\d+) batches")

# --tiny_test: the first lines of each file, a 2L-2L H32 model, a few steps.
TINY_TRAIN_LINES = 300
TINY_EVAL_LINES = 16
TINY_SPM_VOCAB = 256
TINY_MODEL = dict(hidden_size=32, num_encoder_layers=2, num_decoder_layers=2,
                  num_attention_heads=2, intermediate_size=64)


def define_flags():
  """Defines the command-line flags; called by __main__ only, so tests can import the module."""
  flags.DEFINE_string("output_dir", None, "Work directory: data/, runs/, report.md.")
  flags.DEFINE_string("data_dir", None, "Multi30K directory with <split>.<lang>.gz (default: "
                      "nmt/multi30k of the shared data, see common.shared_data_dir).")
  flags.DEFINE_string("source_language", "en", "Source language code (file suffix).")
  flags.DEFINE_string("target_language", "de", "Target language code (file suffix; the Moses "
                      "tokenizer of the tokenised BLEU).")
  flags.DEFINE_string("test_set", "test_2016_flickr", "Test split decoded from its raw .gz files.")
  flags.DEFINE_string("variants", DEFAULT_VARIANTS,
                      "Ordered list of %s. Runs go two variants at a time over all --seeds "
                      "(default: admin s1, realformer_mean s1, admin s2, realformer_mean s2, "
                      "realformer_sum s1, pre_ln s1, ...)." % ", ".join(VARIANTS))
  flags.DEFINE_string("seeds", "1,2", "Comma list of seeds; every variant is trained with each.")
  flags.DEFINE_integer("spm_vocab_size", 8000, "Pieces of the joint SentencePiece model.")
  flags.DEFINE_string("config_file", os.path.join("configs", "nmt_multi30k_6l.json"),
                      "NmtConfig JSON (relative to the repository or absolute); "
                      "layer_norm_type and residual_attention come from the variant.")
  # The defaults are the recipe of paper/table7.md. Its first recipe
  # (--config_file=configs/nmt_multi30k_6l_dropout03.json --max_tokens=4096 --learning_rate=1e-3
  # --warmup_steps=400 --num_train_epochs=7) left the models far from converged (BLEU ~10).
  flags.DEFINE_float("num_train_epochs", 5, "Epochs per run (a checkpoint per epoch).")
  flags.DEFINE_integer("max_tokens", 2048, "Token budget of a training batch.")
  flags.DEFINE_float("learning_rate", 1.5e-3, "Peak learning rate (warm-up, then linear decay).")
  flags.DEFINE_integer("warmup_steps", 250, "Warm-up updates.")
  flags.DEFINE_integer("keep_checkpoint_max", 10, "Checkpoints kept per run.")
  flags.DEFINE_integer("num_average", 3, "average_checkpoints.py --num_last: the last N "
                       "checkpoints are averaged for decoding.")
  flags.DEFINE_integer("beam_size", 4, "Beam size of the test decoding.")
  flags.DEFINE_float("length_penalty", 0.6, "GNMT length penalty of the test decoding.")
  flags.DEFINE_integer("max_decode_length", 80, "Most target pieces generated.")
  flags.DEFINE_integer("predict_batch_size", 64, "Sentences per decoding batch.")
  flags.DEFINE_float("curve_smoothing", 0.6, "EMA weight of the smoothed training-loss curves "
                     "(TensorBoard's smoothing, debiased; 0: none).")
  flags.DEFINE_bool("plan_only", False, "Print the plan, what is done and the time left; "
                    "write nothing.")
  flags.DEFINE_bool("report_only", False, "Write the report from the finished runs; train "
                    "nothing.")
  flags.DEFINE_bool("tiny_test", False, "CI mode: the first %d training lines, a tiny model "
                    "written by the driver, admin and realformer_mean, one seed, a few steps."
                    % TINY_TRAIN_LINES)


# ---------------------------------------------------------------------------------------------
# Settings.
# ---------------------------------------------------------------------------------------------


class Settings(collections.namedtuple("Settings", [
    "data_dir", "source_language", "target_language", "test_set", "variants", "seeds",
    "spm_vocab_size", "config_file", "num_train_epochs", "max_tokens", "learning_rate",
    "warmup_steps", "keep_checkpoint_max", "num_average", "beam_size", "length_penalty",
    "max_decode_length", "predict_batch_size", "curve_smoothing", "tiny_test"])):
  """What the reproduction trains and measures (the flags of the same names).

  data_dir and config_file are absolute; variants is a list of VARIANTS keys; seeds a list of
  ints. With tiny_test, tiny_settings() points data_dir and config_file at the copies in the
  output directory.
  """
  __slots__ = ()


# The settings every run of one output directory must share (the record of the first
# invocation); the list of variants and seeds may grow, decoding batch size and smoothing may
# change.
RECORDED_KEYS = ("source_language", "target_language", "test_set", "spm_vocab_size",
                 "num_train_epochs", "max_tokens", "learning_rate", "warmup_steps",
                 "keep_checkpoint_max", "num_average", "beam_size", "length_penalty",
                 "max_decode_length", "tiny_test")


def _split_list(text):
  return [x.strip() for x in text.split(",") if x.strip()]


def settings_from_flags():
  """The Settings the flags ask for (--tiny_test shrinks them to a CI-sized run)."""
  try:
    seeds = [int(x) for x in _split_list(FLAGS.seeds)]
  except ValueError:
    common.fail("--seeds=%s: not a comma list of integers" % FLAGS.seeds)
  settings = Settings(
      data_dir=os.path.abspath(FLAGS.data_dir or os.path.join(common.shared_data_dir(), "nmt",
                                                              "multi30k")),
      source_language=FLAGS.source_language, target_language=FLAGS.target_language,
      test_set=FLAGS.test_set, variants=_split_list(FLAGS.variants), seeds=seeds,
      spm_vocab_size=FLAGS.spm_vocab_size,
      config_file=resolve_config_file(FLAGS.config_file),
      num_train_epochs=FLAGS.num_train_epochs, max_tokens=FLAGS.max_tokens,
      learning_rate=FLAGS.learning_rate, warmup_steps=FLAGS.warmup_steps,
      keep_checkpoint_max=FLAGS.keep_checkpoint_max, num_average=FLAGS.num_average,
      beam_size=FLAGS.beam_size, length_penalty=FLAGS.length_penalty,
      max_decode_length=FLAGS.max_decode_length, predict_batch_size=FLAGS.predict_batch_size,
      curve_smoothing=FLAGS.curve_smoothing, tiny_test=FLAGS.tiny_test)
  if FLAGS.tiny_test:
    settings = settings._replace(
        variants=["admin", "realformer_mean"], seeds=settings.seeds[:1],
        spm_vocab_size=TINY_SPM_VOCAB, num_train_epochs=0.5, warmup_steps=4, num_average=2,
        max_decode_length=12)
  check_settings(settings)
  return settings


def resolve_config_file(path):
  """--config_file as an absolute path: as given when it exists, else under the repository."""
  if os.path.exists(path):
    return os.path.abspath(path)
  return os.path.join(REPO_DIR, path)


def tiny_settings(settings, out_dir):
  """--tiny_test: the Settings of the run, whose data and config live in the output directory."""
  return settings._replace(data_dir=os.path.join(out_dir, "tiny_data"),
                           config_file=os.path.join(out_dir, "tiny_config.json"))


def check_settings(settings):
  """Fails with one line naming the flag when a setting is out of range or an input is missing."""
  unknown = [v for v in settings.variants if v not in VARIANTS]
  if unknown or not settings.variants:
    common.fail("--variants=%s: unknown %s (known: %s)" % (
        ",".join(settings.variants), ",".join(unknown) or "(empty)", ", ".join(VARIANTS)))
  if len(set(settings.variants)) != len(settings.variants):
    common.fail("--variants=%s: repeated variant" % ",".join(settings.variants))
  if not settings.seeds:
    common.fail("--seeds is empty")
  if len(set(settings.seeds)) != len(settings.seeds):
    common.fail("--seeds=%s: repeated seed" % ",".join(map(str, settings.seeds)))
  for key in ("spm_vocab_size", "max_tokens", "keep_checkpoint_max", "num_average", "beam_size",
              "max_decode_length", "predict_batch_size"):
    if getattr(settings, key) < 1:
      common.fail("--%s=%d: must be >= 1" % (key, getattr(settings, key)))
  if settings.num_average > settings.keep_checkpoint_max:
    common.fail("--num_average=%d: more than --keep_checkpoint_max=%d checkpoints are kept" % (
        settings.num_average, settings.keep_checkpoint_max))
  if settings.warmup_steps < 0:
    common.fail("--warmup_steps=%d: must be >= 0" % settings.warmup_steps)
  for key in ("num_train_epochs", "learning_rate"):
    if getattr(settings, key) <= 0:
      common.fail("--%s=%g: must be > 0" % (key, getattr(settings, key)))
  if not 0 <= settings.curve_smoothing < 1:
    common.fail("--curve_smoothing=%g: must be in [0, 1)" % settings.curve_smoothing)
  common.require_file(settings.config_file, "config_file")
  if not os.path.isdir(settings.data_dir):
    common.fail("--data_dir=%s: not a directory" % settings.data_dir)
  for path, _ in source_files(settings).values():
    common.require_file(path, "data_dir")


def source_files(settings, data_dir=None):
  """{split: (source .gz, target .gz)} of train, val and the test set in data_dir."""
  data_dir = data_dir or settings.data_dir
  return collections.OrderedDict(
      (split, tuple(os.path.join(data_dir, "%s.%s.gz" % (split, lang))
                    for lang in (settings.source_language, settings.target_language)))
      for split in ("train", "val", settings.test_set))


def settings_record(settings):
  """The JSON record of the settings an output directory was made with."""
  record = {key: getattr(settings, key) for key in RECORDED_KEYS}
  record["config_file"] = reproduction.display_path(settings.config_file, "config_file")
  with open(settings.config_file) as f:
    record["config"] = json.load(f)
  return record


def input_files(settings):
  """The data files a reproduction reads (train, val and the test set of --data_dir).

  Args:
    settings: Settings naming the data the user gave (with --tiny_test: the files the driver
      copies the first lines of, not the copies).

  Returns:
    list of reproduction.InputFile.
  """
  paths = [path for pair in source_files(settings).values() for path in pair]
  return reproduction.input_files("data_dir", paths)


def check_record(out_dir, settings, write):
  """Fails when out_dir was made with other settings or data contents; records them if new.

  Args:
    out_dir: --output_dir.
    settings: Settings naming the data and --config_file the user gave (with --tiny_test: not
      tiny_settings' copies, which derive from them).
    write: write the record if it is missing (not for --plan_only / --report_only).
  """
  reproduction.check_settings_record(out_dir, settings_record(settings), RECORD_NAME, write,
                                     inputs=input_files(settings))


# ---------------------------------------------------------------------------------------------
# Layout and state of the runs.
# ---------------------------------------------------------------------------------------------


def run_order(variants, seeds, group=VARIANT_GROUP):
  """[(variant, seed)]: `group` variants at a time, each group over all seeds.

  With the defaults: admin 1, realformer_mean 1, admin 2, realformer_mean 2, realformer_sum 1,
  pre_ln 1, realformer_sum 2, pre_ln 2 (the core comparison is finished first).
  """
  runs = []
  for start in range(0, len(variants), group):
    for seed in seeds:
      runs += [(variant, seed) for variant in variants[start:start + group]]
  return runs


def run_name(variant, seed):
  return "%s_seed%d" % (variant, seed)


def run_dir_of(out_dir, variant, seed):
  """<output_dir>/runs/<variant>_seed<seed>."""
  return os.path.join(out_dir, "runs", run_name(variant, seed))


def data_paths(out_dir):
  """The data files of <output_dir>/data."""
  data = os.path.join(out_dir, "data")
  return {"dir": data, "spm": os.path.join(data, "spm.model"),
          "train": os.path.join(data, "train.tfrecord"),
          "val": os.path.join(data, "val.tfrecord")}


def summary_path(tfrecord):
  """create_translation_data.py's summary beside a TFRecord (x.tfrecord -> x.summary.json)."""
  return os.path.splitext(tfrecord)[0] + ".summary.json"


def data_part_done(tfrecord):
  """Whether a TFRecord and its summary (written last) exist."""
  return os.path.exists(tfrecord) and os.path.exists(summary_path(tfrecord))


def data_done(out_dir):
  """Whether spm.model, train and val TFRecords (with summaries) exist."""
  paths = data_paths(out_dir)
  return os.path.exists(paths["spm"]) and all(data_part_done(paths[p]) for p in ("train", "val"))


def train_complete(run_dir):
  """Whether train_summary.json says the run reached its target step."""
  summary = reproduction.read_json(os.path.join(run_dir, TRAIN_SUMMARY))
  return bool(summary) and summary.get("global_step") is not None and (
      summary.get("global_step") == summary.get("global_step_target"))


def eval_complete(run_dir):
  """Whether eval_results.json is of the run's final checkpoint."""
  summary = reproduction.read_json(os.path.join(run_dir, TRAIN_SUMMARY)) or {}
  results = reproduction.read_json(os.path.join(run_dir, EVAL_RESULTS))
  return bool(results) and results.get("global_step") == summary.get("global_step")


def run_done(run_dir):
  """The done marker: bleu.json exists and train_summary.json is at its target step."""
  return os.path.exists(os.path.join(run_dir, BLEU_JSON)) and train_complete(run_dir)


def rewind_to_epoch_checkpoint(run_dir):
  """A run stopped between two epochs resumes from the last epoch's checkpoint.

  A stopped training saves the step it reached (the TF2 engine does) and the resumed one then
  saves an epoch from there: the averaged checkpoints would not be one per epoch. The epoch is
  train.log's "One epoch = N batches" (reproduction.rewind_to_checkpoint).

  Returns:
    The step the run resumes from, or None when nothing was changed.
  """
  path = os.path.join(run_dir, "train.log")
  if not os.path.exists(path):
    return None
  with open(path, errors="replace") as f:
    epochs = [int(m.group(1)) for m in EPOCH_LINE.finditer(f.read())]
  if not epochs or epochs[-1] < 1:
    return None
  return reproduction.rewind_to_checkpoint(run_dir, lambda step: step % epochs[-1] == 0)


def last_progress(run_dir):
  """(step, total, steps/s) of the last progress line of train.log, or None."""
  path = os.path.join(run_dir, "train.log")
  if not os.path.exists(path):
    return None
  found = None
  with open(path, errors="replace") as f:
    for line in f:
      match = PROGRESS_LINE.search(line)
      if match:
        found = (int(match.group(1)), int(match.group(2)), float(match.group(3)))
  return found


RunState = collections.namedtuple("RunState", [
    "status",          # "done", "trained" (to average and decode), "partly trained", "not started"
    "step",            # last known step (0 when unknown)
    "total",           # target step, or None when not known yet
    "steps_per_sec",   # measured rate, or None
    "post_seconds",    # done runs: seconds from the end of training to bleu.json, or None
])


def run_state(run_dir):
  """What is finished of a run, from its files (no TensorFlow)."""
  summary = reproduction.read_json(os.path.join(run_dir, TRAIN_SUMMARY)) or {}
  progress = last_progress(run_dir)
  rate = progress[2] if progress and progress[2] > 0 else None
  total = summary.get("global_step_target") or (progress[1] if progress else None)
  if rate is None and summary.get("train_seconds") and summary.get("global_step"):
    rate = summary["global_step"] / float(summary["train_seconds"])  # a rough fallback
  if train_complete(run_dir):
    status = "done" if run_done(run_dir) else "trained"
    post = None
    bleu = os.path.join(run_dir, BLEU_JSON)
    if status == "done":
      post = max(0.0, os.path.getmtime(bleu) - os.path.getmtime(
          os.path.join(run_dir, TRAIN_SUMMARY)))
    return RunState(status, summary["global_step"], total, rate, post)
  step = progress[0] if progress else 0
  started = progress is not None or bool(glob.glob(os.path.join(run_dir, "model.ckpt-*.index")))
  return RunState("partly trained" if started else "not started", step, total, rate, None)


# ---------------------------------------------------------------------------------------------
# The plan.
# ---------------------------------------------------------------------------------------------


def estimate_seconds_left(states):
  """Estimated seconds to finish every run, from the measured rates.

  Args:
    states: {(variant, seed): RunState}.

  Returns:
    (seconds or None when no rate or step count is known yet, a phrase saying what it covers).
  """
  totals = [s.total for s in states.values() if s.total]
  rates = collections.defaultdict(list)
  for (variant, _), s in states.items():
    if s.steps_per_sec:
      rates[variant].append(s.steps_per_sec)
  all_rates = [r for rs in rates.values() for r in rs]
  if not totals or not all_rates:
    return None, "unknown until a run has logged its step count and speed"
  total = max(totals)   # every run has the same data and batching
  posts = [s.post_seconds for s in states.values() if s.post_seconds is not None]
  post = float(np.mean(posts)) if posts else None
  seconds = 0.0
  for (variant, _), s in states.items():
    if s.status == "done":
      continue
    if s.status != "trained":
      rate = float(np.mean(rates[variant] or all_rates))
      seconds += max(0, (s.total or total) - s.step) / rate
    seconds += post or 0.0
  what = "training at the measured steps/s%s" % (
      " + %s per run for evaluation, averaging and decoding (measured)" %
      common.format_duration(post) if post is not None else
      "; evaluation and decoding not measured yet, not included")
  return seconds, what


def plan_lines(settings, out_dir):
  """The plan: data, every run in order with its state, and the estimated time left."""
  runs = run_order(settings.variants, settings.seeds)
  states = collections.OrderedDict(
      (run, run_state(run_dir_of(out_dir, *run))) for run in runs)
  done = sum(s.status == "done" for s in states.values())
  lines = [
      "Plan: %d runs (%s), %g epochs, max_tokens %d, LR %g, warm-up %d, average of last %d, "
      "beam %d, length penalty %g" % (
          len(runs), ", ".join("%s s%d" % r for r in runs), settings.num_train_epochs,
          settings.max_tokens, settings.learning_rate, settings.warmup_steps,
          settings.num_average, settings.beam_size, settings.length_penalty),
      "Data: %s" % ("done" if data_done(out_dir) else "to make (create_translation_data.py)"),
  ]
  for run, s in states.items():
    detail = s.status
    if s.status == "partly trained":
      detail += ", step %d/%s" % (s.step, s.total or "?")
    elif s.status == "trained":
      detail += ", to average and decode"
    if s.steps_per_sec and s.status != "not started":
      detail += " (%.2f steps/s)" % s.steps_per_sec
    lines.append("  %s: %s" % (run_name(*run), detail))
  seconds, what = estimate_seconds_left(states)
  lines.append("Done: %d of %d runs. Estimated time left: %s (%s)" % (
      done, len(runs), "n/a" if seconds is None else common.format_duration(seconds), what))
  return lines


# ---------------------------------------------------------------------------------------------
# Running the tools.
# ---------------------------------------------------------------------------------------------


def _log(message):
  sys.stderr.write("reproduce_table7: %s\n" % message)
  sys.stderr.flush()


def write_tiny_inputs(source_settings, tiny):
  """--tiny_test: the first lines of every split and the shrunk config (tiny's paths).

  Args:
    source_settings: Settings naming the real data_dir and --config_file.
    tiny: tiny_settings(...): where the copies go.
  """
  os.makedirs(tiny.data_dir, exist_ok=True)
  for split, pair in source_files(source_settings).items():
    lines = TINY_TRAIN_LINES if split == "train" else TINY_EVAL_LINES
    for path in pair:
      target = os.path.join(tiny.data_dir, os.path.basename(path))
      if os.path.exists(target):
        continue
      with gzip.open(path, "rt", encoding="utf-8") as f:
        head = [line for _, line in zip(range(lines), f)]
      with common.atomic_output(target, "wb") as f:
        f.write(gzip.compress("".join(head).encode("utf-8"), mtime=0))
  with open(source_settings.config_file) as f:
    config = json.load(f)
  config.update(TINY_MODEL, vocab_size=tiny.spm_vocab_size)
  common.write_json_atomic(tiny.config_file, config)


def prepare_data(runner, settings, out_dir):
  """create_translation_data.py for train (training the SentencePiece model) and val."""
  paths = data_paths(out_dir)
  os.makedirs(paths["dir"], exist_ok=True)
  sources = source_files(settings)
  for part in ("train", "val"):
    if data_part_done(paths[part]):
      continue
    _log("making %s" % reproduction.display_path(paths[part], output_dir=out_dir))
    runner.run("create_%s" % part, "translation/create_translation_data.py", [
        "--source_file=%s" % sources[part][0], "--target_file=%s" % sources[part][1],
        "--spm_model=%s" % paths["spm"],
        "--train_spm_vocab_size=%d" % settings.spm_vocab_size,
        "--output_file=%s" % paths[part]])
  summary = reproduction.read_json(summary_path(paths["train"]))
  if summary.get("vocab_size") not in (None, settings.spm_vocab_size):
    common.fail("--spm_vocab_size=%d: %s holds a SentencePiece model of %d pieces (use a new "
                "--output_dir)" % (settings.spm_vocab_size, paths["spm"], summary["vocab_size"]))


def train_args(settings, out_dir, run_dir, variant, seed):
  """run_translation.py --do_train --do_eval flags of one run (the driver's recipe)."""
  paths = data_paths(out_dir)
  _, layer_norm_type, residual_attention = VARIANTS[variant]
  return [
      "--do_train", "--do_eval",
      "--train_file=%s" % paths["train"], "--dev_file=%s" % paths["val"],
      "--config_file=%s" % settings.config_file,
      "--layer_norm_type=%s" % layer_norm_type,
      "--residual_attention=%s" % residual_attention,
      "--seed=%d" % seed,
      "--output_dir=%s" % run_dir,
      "--num_train_epochs=%g" % settings.num_train_epochs,
      "--max_tokens=%d" % settings.max_tokens,
      "--learning_rate=%g" % settings.learning_rate,
      "--warmup_steps=%d" % settings.warmup_steps,
      "--keep_checkpoint_max=%d" % settings.keep_checkpoint_max,
  ]


def eval_args(out_dir, run_dir):
  """run_translation.py --do_eval of a trained run whose evaluation did not finish."""
  return ["--do_eval", "--dev_file=%s" % data_paths(out_dir)["val"], "--output_dir=%s" % run_dir]


def average_args(settings, run_dir):
  """average_checkpoints.py flags: the last --num_average checkpoints into <run>/averaged."""
  return ["--checkpoint_dir=%s" % run_dir, "--num_last=%d" % settings.num_average,
          "--output_dir=%s" % os.path.join(run_dir, "averaged")]


def predict_args(settings, out_dir, run_dir):
  """run_translation.py --do_predict flags: the test set with the averaged weights."""
  source, target = source_files(settings)[settings.test_set]
  return [
      "--do_predict", "--output_dir=%s" % run_dir,
      "--checkpoint=%s" % os.path.join(run_dir, "averaged"),
      "--spm_model=%s" % data_paths(out_dir)["spm"],
      "--predict_source_file=%s" % source, "--predict_reference_file=%s" % target,
      "--beam_size=%d" % settings.beam_size,
      "--length_penalty=%g" % settings.length_penalty,
      "--max_decode_length=%d" % settings.max_decode_length,
      "--predict_batch_size=%d" % settings.predict_batch_size,
      "--target_language=%s" % settings.target_language,
  ]


def complete_run(settings, out_dir, variant, seed):
  """Trains, evaluates, averages and decodes one run; skipped when done.

  Returns:
    True when something was run, False when the run was already done.
  """
  run_dir = run_dir_of(out_dir, variant, seed)
  if run_done(run_dir):
    return False
  common.STOP_SIGNALS.exit_if_stopped(reproduction.RESUME_MESSAGE)
  os.makedirs(run_dir, exist_ok=True)
  runner = reproduction.Runner(run_dir)   # train.log, average.log, predict.log
  bleu = os.path.join(run_dir, BLEU_JSON)
  if not train_complete(run_dir):
    if os.path.exists(bleu):
      os.remove(bleu)   # of an earlier, other training: never report it with this one
    resumed = rewind_to_epoch_checkpoint(run_dir)
    if resumed is not None:
      _log("%s seed %d resumes from the epoch checkpoint of step %d" % (variant, seed, resumed))
    _log("training %s seed %d" % (variant, seed))
    runner.run("train", "translation/run_translation.py",
               train_args(settings, out_dir, run_dir, variant, seed))
    if not train_complete(run_dir):
      common.fail("%s: run_translation.py exited 0 but %s is not at its target step; rerun to "
                  "resume" % (run_dir, TRAIN_SUMMARY))
  elif not eval_complete(run_dir):
    # Trained, stopped during the evaluation: evaluate only (a --do_train rerun would replace
    # the training speed in train_summary.json by that of an empty process).
    runner.run("eval", "translation/run_translation.py", eval_args(out_dir, run_dir))
  _log("averaging and decoding %s seed %d" % (variant, seed))
  averaged = os.path.join(run_dir, "averaged")
  if os.path.exists(averaged):
    shutil.rmtree(averaged)
  runner.run("average", "average_checkpoints.py", average_args(settings, run_dir))
  runner.run("predict", "translation/run_translation.py", predict_args(settings, out_dir, run_dir))
  if not run_done(run_dir):
    common.fail("%s: run_translation.py --do_predict exited 0 without %s" % (run_dir, BLEU_JSON))
  return True


# ---------------------------------------------------------------------------------------------
# Results and learning curves.
# ---------------------------------------------------------------------------------------------


def read_loss_curve(run_dir, tag="loss"):
  """The training loss per step from the event files in run_dir (not eval/), of either engine.

  A resumed run has one file per process, and the steps after its last checkpoint twice: the
  later file (by name, which starts with the wall time) wins.

  Returns:
    ([steps], [losses]) in step order.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  by_step = {}
  for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
    try:
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag != tag:
            continue
          if value.HasField("simple_value"):
            by_step[int(event.step)] = float(value.simple_value)
          elif value.HasField("tensor"):
            by_step[int(event.step)] = float(tf.make_ndarray(value.tensor))
    except tf.errors.DataLossError:
      pass   # a file being written: its complete records were read
  steps = sorted(by_step)
  return steps, [by_step[s] for s in steps]


def smooth(values, weight):
  """TensorBoard's debiased exponential moving average (weight 0: the values themselves)."""
  out, last, norm = [], 0.0, 0.0
  for v in values:
    last = weight * last + (1 - weight) * v
    norm = weight * norm + (1 - weight)
    out.append(last / norm if norm else v)
  return out


def collect_results(settings, out_dir, with_curves=True):
  """Everything the report shows, per run (variant, seed) in run order.

  Returns:
    OrderedDict {(variant, seed): {"state": RunState, "done": bool, "bleu", "train", "eval":
    dicts (None when missing), "curve": (steps, losses)}}.
  """
  results = collections.OrderedDict()
  train_data = reproduction.read_json(summary_path(data_paths(out_dir)["train"]))
  for variant, seed in run_order(settings.variants, settings.seeds):
    run_dir = run_dir_of(out_dir, variant, seed)
    done = run_done(run_dir)
    state = run_state(run_dir)
    train = reproduction.read_json(os.path.join(run_dir, TRAIN_SUMMARY)) if done else None
    if train and train.get("target_tokens_per_second") is None:
      derived = derived_tokens_per_second(train, state, train_data)
      if derived is not None:
        train = dict(train, target_tokens_per_second=derived, tokens_per_second_derived=True)
    results[(variant, seed)] = {
        "state": state, "done": done,
        "bleu": reproduction.read_json(os.path.join(run_dir, BLEU_JSON)) if done else None,
        "train": train,
        "eval": reproduction.read_json(os.path.join(run_dir, EVAL_RESULTS)) if done else None,
        "curve": read_loss_curve(run_dir) if with_curves else ([], []),
    }
  return results


def derived_tokens_per_second(train, state, train_data):
  """Target tokens/s of a run whose train_summary.json records none.

  run_translation.py's TF2 engine (TF >= 2.16), as its Estimator under a distribution strategy,
  counts steps, not target tokens: the steps/s of the run's last progress line times the
  training data's target tokens per batch (one epoch's target tokens over its batches: the mean
  batch of a run of whole epochs).

  Args:
    train: the run's train_summary.json (epoch_batches).
    state: its RunState (steps_per_sec).
    train_data: create_translation_data.py's summary of the training data (target_tokens).

  Returns:
    float, or None when one of the figures is missing.
  """
  batches = train.get("epoch_batches")
  tokens = (train_data or {}).get("target_tokens")
  if not (state.steps_per_sec and batches and tokens):
    return None
  return state.steps_per_sec * tokens / float(batches)


# ---------------------------------------------------------------------------------------------
# The report.
# ---------------------------------------------------------------------------------------------


def _label(variant):
  return VARIANTS[variant][0]


def _fmt(x, digits=2):
  return "n/a" if x is None else ("%." + str(digits) + "f") % x


def _pm(values, digits=2):
  """"mean ± sample std" of the values (the mean alone for one, n/a for none)."""
  mean, std = reproduction.mean_std(values)
  if mean is None:
    return "n/a"
  return _fmt(mean, digits) + ("" if std is None else (" ± " + _fmt(std, digits)))


def _finished(results, variant, key, field):
  """[(seed, value)] of the finished runs of `variant` (value None when the field is missing)."""
  out = []
  for (v, seed), r in results.items():
    if v == variant and r["done"]:
      value = (r[key] or {}).get(field)
      out.append((seed, None if value is None else float(value)))
  return out


def _per_seed(pairs, digits=2):
  return ", ".join("s%d %s" % (seed, _fmt(value, digits)) for seed, value in pairs) or "n/a"


def _values(pairs):
  return [value for _, value in pairs]


def _paper_cell(variant):
  if variant == "admin":
    return "%.2f (authors' run %.2f)" % (PAPER_TABLE7["admin"], PAPER_ADMIN_AUTHORS_RUN)
  if variant in PAPER_TABLE7:
    return "%.2f" % PAPER_TABLE7[variant]
  return "n/a (the paper uses mean for NMT)"


def _header_lines(settings, results):
  done = sum(r["done"] for r in results.values())
  total = len(results)
  lines = [
      "# Reproducing Table 7 (machine translation) at CPU scale: Multi30K %s→%s\n" % (
          settings.source_language, settings.target_language),
      "Written by `paper/reproduce_table7.py` from the run directories `<output_dir>/runs/"
      "<variant>_seed<seed>/` (bleu.json, eval_results.json, train_summary.json, event files).\n",
  ]
  if done == total:
    lines.append("All %d runs finished.\n" % total)
  else:
    lines.append("**Partial report: %d of %d runs finished.** Means are over the finished seeds "
                 "only; the missing runs are listed under \"Missing runs\".\n" % (done, total))
  return lines


def _bleu_lines(settings, results):
  test_sizes = [r["bleu"].get("num_sentences") for r in results.values() if r["done"]]
  lines = [
      "## Test BLEU (%s%s)\n" % (settings.test_set, ", %d sentences" % test_sizes[0]
                                 if test_sizes and test_sizes[0] else ""),
      "Averaged weights (last %d checkpoints), beam %d, length penalty %g. sacreBLEU: 13a "
      "tokenisation of the detokenised output; tokenised BLEU: Moses-tokenised with compound "
      "splitting (the paper's convention). Dev perplexity: the final (not averaged) checkpoint "
      "on val, per target piece, no label smoothing. Mean ± sample std over the finished "
      "seeds, then each seed.\n" % (settings.num_average, settings.beam_size,
                                    settings.length_penalty),
      "| model | sacreBLEU | per seed | tokenised compound-split BLEU | per seed | chrF | "
      "dev perplexity | seeds finished | paper: WMT'14 En-De 6L-6L BLEU (other data and "
      "scale) |",
      "|---|---|---|---|---|---|---|---|---|",
  ]
  for variant in settings.variants:
    bleu = _finished(results, variant, "bleu", "bleu")
    tok = _finished(results, variant, "bleu", "tokenized_compound_split_bleu")
    chrf = _finished(results, variant, "bleu", "chrf")
    ppl = _finished(results, variant, "eval", "eval_perplexity")
    lines.append("| %s | %s | %s | %s | %s | %s | %s | %d/%d | %s |" % (
        _label(variant), _pm(_values(bleu)), _per_seed(bleu), _pm(_values(tok)),
        _per_seed(tok), _pm(_values(chrf)), _pm(_values(ppl), 3), len(bleu),
        len(settings.seeds), _paper_cell(variant)))
  lines += [
      "",
      "The paper's column is WMT'14 En-De (4.5M sentence pairs, newstest2014), hidden 512, "
      "50 epochs, the average of the last 25 checkpoints: compare orderings and gaps, not "
      "values. Its Post-LN, Pre-LN, ADMIN and RealFormer rows are 27.80, 27.27, 27.90 (the "
      "authors' own ADMIN run, same setup as RealFormer: 28.06) and 28.17.\n",
  ]
  return lines


def paired_deltas(results, variant, baseline, key, field):
  """{seed: value(variant) - value(baseline)} over the seeds where both runs finished."""
  a = dict(_finished(results, variant, key, field))
  b = dict(_finished(results, baseline, key, field))
  return collections.OrderedDict((seed, a[seed] - b[seed]) for seed in sorted(a)
                                 if seed in b and a[seed] is not None and b[seed] is not None)


def _delta_lines(settings, results):
  lines = ["## RealFormer (mean) − ADMIN, paired by seed\n"]
  if "admin" not in settings.variants or "realformer_mean" not in settings.variants:
    return lines + ["_Not measured: --variants lacks admin or realformer_mean._\n"]
  columns = (("bleu", "bleu", "sacreBLEU", 2),
             ("bleu", "tokenized_compound_split_bleu", "tokenised BLEU", 2),
             ("eval", "eval_perplexity", "dev perplexity", 3))
  deltas = [paired_deltas(results, "realformer_mean", "admin", key, field)
            for key, field, _, _ in columns]
  seeds = sorted(set(deltas[0]) | set(deltas[1]) | set(deltas[2]))
  if not seeds:
    return lines + ["_No seed has both runs finished yet._\n"]
  lines += ["| seed | " + " | ".join(c[2] for c in columns) + " |",
            "|---|" + "---|" * len(columns)]
  for seed in seeds:
    lines.append("| %d | %s |" % (seed, " | ".join(
        "n/a" if seed not in d else ("%+." + str(c[3]) + "f") % d[seed]
        for d, c in zip(deltas, columns))))
  lines.append("| mean | %s |" % " | ".join(
      _signed_pm(list(d.values()), c[3]) for d, c in zip(deltas, columns)))
  lines += [
      "",
      "Paper (WMT'14 En-De 6L-6L, tokenised BLEU): RealFormer − ADMIN = %+.2f against the "
      "published ADMIN (%.2f), %+.2f against the authors' own ADMIN run (%.2f).\n" % (
          PAPER_TABLE7["realformer_mean"] - PAPER_TABLE7["admin"], PAPER_TABLE7["admin"],
          PAPER_TABLE7["realformer_mean"] - PAPER_ADMIN_AUTHORS_RUN, PAPER_ADMIN_AUTHORS_RUN),
  ]
  return lines


def _signed_pm(values, digits):
  mean, std = reproduction.mean_std(values)
  if mean is None:
    return "n/a"
  text = ("%+." + str(digits) + "f") % mean
  return text + ("" if std is None else (" ± %." + str(digits) + "f") % std)


def _speed_lines(settings, results):
  lines = [
      "## Training speed\n",
      "From train_summary.json: target tokens per second after the first step, and the wall "
      "seconds of training (for a run resumed after a stop: of its last process). The paper "
      "(Table 11): ADMIN and RealFormer train equally fast on GPUs (e.g. 9.3 h vs 9.4 h).\n",
      "| model | target tokens/s | relative to ADMIN | train seconds (per seed) | steps |",
      "|---|---|---|---|---|",
  ]
  speeds = {v: reproduction.mean_std(_values(_finished(
      results, v, "train", "target_tokens_per_second")))[0] for v in settings.variants}
  for variant in settings.variants:
    secs = _finished(results, variant, "train", "train_seconds")
    steps = sorted(set(int(x) for x in _values(_finished(results, variant, "train",
                                                         "global_step")) if x is not None))
    relative = "n/a"
    if speeds.get("admin") and speeds[variant]:
      relative = "%.3f" % (speeds[variant] / speeds["admin"])
    lines.append("| %s | %s | %s | %s | %s |" % (
        _label(variant), _fmt(speeds[variant], 0), relative, _per_seed(secs, 0),
        ", ".join(map(str, steps)) or "n/a"))
  lines.append("")
  derived = ["%s s%d" % (_label(variant), seed) for (variant, seed), r in results.items()
             if r["done"] and (r["train"] or {}).get("tokens_per_second_derived")]
  if derived:
    lines.append("Target tokens/s of %s: the training counted steps, not tokens "
                 "(run_translation.py on the TF2 engine of TF >= 2.16, or under a distribution "
                 "strategy): the steps/s of its last progress line times the training data's "
                 "target tokens per batch (one epoch's target tokens over its batches).\n" %
                 ", ".join(derived))
  return lines


def curve_rows(settings, results):
  """CSV rows (run, variant, seed, step, loss, smoothed_loss) of every run's loss curve."""
  rows = []
  for (variant, seed), r in results.items():
    steps, losses = r["curve"]
    for step, loss, smoothed in zip(steps, losses, smooth(losses, settings.curve_smoothing)):
      rows.append((run_name(variant, seed), variant, seed, step, loss, smoothed))
  return rows


def write_curve_csv(path, rows):
  buf = io.StringIO()
  writer = csv.writer(buf, lineterminator="\n")
  writer.writerow(["run", "variant", "seed", "step", "loss", "smoothed_loss"])
  for row in rows:
    writer.writerow(list(row[:4]) + ["%.6g" % row[4], "%.6g" % row[5]])
  with common.atomic_output(path) as f:
    f.write(buf.getvalue())


def loss_figure(path, settings, results):
  """One smoothed training-loss line per run: colour by variant, line style by seed."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, ax = plt.subplots(figsize=(7.5, 4.2))
  colors = {v: "C%d" % i for i, v in enumerate(VARIANTS)}
  styles = ["-", "--", ":", "-."]
  for (variant, seed), r in results.items():
    steps, losses = r["curve"]
    if not steps:
      continue
    ax.plot(steps, smooth(losses, settings.curve_smoothing), color=colors[variant],
            linestyle=styles[settings.seeds.index(seed) % len(styles)],
            marker="o" if len(steps) < 3 else None, markersize=3,
            label="%s s%d%s" % (_label(variant), seed, "" if r["done"] else " (unfinished)"))
  ax.set_xlabel("step")
  ax.set_ylabel("training loss (label-smoothed, smoothed %.2f)" % settings.curve_smoothing)
  ax.legend(fontsize=8)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  common.write_figure_png(fig, path)


def _curve_lines(settings, results, images):
  lines = ["## Training loss\n"]
  with_curve = [(run, r) for run, r in results.items() if r["curve"][0]]
  if not with_curve:
    return lines + ["_No run has logged a training loss yet._\n"]
  lines += [
      "![training loss](%s/training_loss.png)\n" % images,
      "The label-smoothed training loss of each run from its TensorBoard event files (tag "
      "`loss`: every 100 steps on the Estimator of TF 2.15, every --log_every_n_steps and at "
      "the last step on the TF2 engine of TF >= 2.16), smoothed with a debiased EMA of weight "
      "%g; the points are in "
      "`%s/training_loss.csv` (run, variant, seed, step, loss, smoothed_loss).\n" % (
          settings.curve_smoothing, images),
      "| run | points | last step | last loss | last smoothed loss |",
      "|---|---|---|---|---|",
  ]
  for (variant, seed), r in with_curve:
    steps, losses = r["curve"]
    lines.append("| %s s%d%s | %d | %d | %.3f | %.3f |" % (
        _label(variant), seed, "" if r["done"] else " (unfinished)", len(steps), steps[-1],
        losses[-1], smooth(losses, settings.curve_smoothing)[-1]))
  return lines + [""]


def _missing_lines(results):
  lines = ["## Missing runs\n"]
  missing = [(run, r["state"]) for run, r in results.items() if not r["done"]]
  if not missing:
    return lines + ["None.\n"]
  for (variant, seed), state in missing:
    detail = state.status
    if state.status == "partly trained":
      detail += " (step %d of %s)" % (state.step, state.total or "?")
    elif state.status == "trained":
      detail += " (not yet averaged and decoded)"
    lines.append("- %s seed %d (`%s`): %s" % (_label(variant), seed, run_name(variant, seed),
                                             detail))
  return lines + [""]


def _settings_lines(settings, out_dir, results):
  paths = data_paths(out_dir)
  train = reproduction.read_json(summary_path(paths["train"])) or {}
  val = reproduction.read_json(summary_path(paths["val"])) or {}
  with open(settings.config_file) as f:
    config = json.load(f)
  config_name = reproduction.display_path(settings.config_file, "config_file", out_dir)
  epoch_batches = sorted(set(r["train"].get("epoch_batches") for r in results.values()
                             if r["done"] and r["train"].get("epoch_batches")))
  steps = sorted(set(r["train"].get("num_train_steps") for r in results.values()
                     if r["done"] and r["train"].get("num_train_steps")))
  signatures = sorted(set((r["bleu"].get("bleu_signature"), r["bleu"].get(
      "tokenized_compound_split_bleu_signature")) for r in results.values() if r["done"]))
  data_dir = reproduction.display_path(settings.data_dir, "data_dir", out_dir)
  rows = [
      ("data", "%s%s: train %s pairs, val %s, test `%s` (raw .gz), %s→%s" % (
          data_dir, " (tiny test: the first %d / %d lines)" % (TINY_TRAIN_LINES, TINY_EVAL_LINES)
          if settings.tiny_test else "", _fmt_count(train.get("instances")),
          _fmt_count(val.get("instances")), settings.test_set, settings.source_language,
          settings.target_language)),
      ("vocabulary", "joint SentencePiece (unigram), %d pieces, trained on the training text "
                     "(`<output_dir>/data/spm.model`)" % settings.spm_vocab_size),
      ("model", "`%s`%s: %dL-%dL, hidden %d, %d heads, feed-forward %d, dropout %g / attention "
                "%g / activation %g; layer norm and residual attention from the variant" % (
                    config_name, " shrunk for --tiny_test" if settings.tiny_test else "",
                    config.get("num_encoder_layers"), config.get("num_decoder_layers"),
                    config.get("hidden_size"), config.get("num_attention_heads"),
                    config.get("intermediate_size"), config.get("hidden_dropout_prob"),
                    config.get("attention_probs_dropout_prob"),
                    config.get("activation_dropout_prob", 0.0))),
      ("variants", "; ".join("%s = layer_norm_type %s, residual_attention %s" % (
          (_label(v),) + VARIANTS[v][1:]) for v in settings.variants)),
      ("training", "%g epochs (%s batches per epoch, %s updates) of at most %d tokens; Adam "
                   "(0.9, 0.98), peak LR %g after %d warm-up steps, then linear decay; label "
                   "smoothing 0.1; seeds %s" % (
                       settings.num_train_epochs, ", ".join(map(str, epoch_batches)) or "?",
                       ", ".join(map(str, steps)) or "?", settings.max_tokens,
                       settings.learning_rate, settings.warmup_steps,
                       ", ".join(map(str, settings.seeds)))),
      ("checkpoints", "one per epoch (at most %d kept); the last %d averaged "
                      "(average_checkpoints.py)" % (settings.keep_checkpoint_max,
                                                    settings.num_average)),
      ("decoding", "beam %d, length penalty %g, at most %d pieces, batches of %d" % (
          settings.beam_size, settings.length_penalty, settings.max_decode_length,
          settings.predict_batch_size)),
      ("metrics", "; ".join("sacreBLEU `%s`, tokenised `%s`" % s for s in signatures) or
       "n/a"),
      ("run order", ", ".join("%s s%d" % run for run in results)),
  ]
  lines = ["## Settings\n", "| setting | value |", "|---|---|"]
  lines += ["| %s | %s |" % row for row in rows]
  return lines + [""]


def _fmt_count(x):
  return "?" if x is None else "{:,}".format(int(x))


def write_report(settings, out_dir, results=None):
  """Writes <output_dir>/report.md (atomically) and its figure and CSV in report_images/.

  Inputs are named relative to the repository or the output directory, never by absolute path.

  Args:
    settings: Settings.
    out_dir: --output_dir.
    results: collect_results(...) (read here when None).

  Returns:
    The report's path.
  """
  results = results if results is not None else collect_results(settings, out_dir)
  report_path = os.path.join(out_dir, REPORT_NAME)
  images = reproduction.image_dir_name(report_path)
  image_dir = os.path.join(out_dir, images)
  os.makedirs(image_dir, exist_ok=True)
  rows = curve_rows(settings, results)
  write_curve_csv(os.path.join(image_dir, "training_loss.csv"), rows)
  if rows:
    loss_figure(os.path.join(image_dir, "training_loss.png"), settings, results)
  lines = (_header_lines(settings, results) + _bleu_lines(settings, results) +
           _delta_lines(settings, results) + _speed_lines(settings, results) +
           _curve_lines(settings, results, images) + _missing_lines(results) +
           _settings_lines(settings, out_dir, results))
  text = reproduction.portable_text("\n".join(lines) + "\n", out_dir)
  with common.atomic_output(report_path) as f:
    f.write(text)
  return report_path


# ---------------------------------------------------------------------------------------------
# Main.
# ---------------------------------------------------------------------------------------------


def main(_):
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  if FLAGS.plan_only and FLAGS.report_only:
    common.fail("--plan_only and --report_only: give one of them")
  settings = settings_from_flags()
  out_dir = os.path.abspath(FLAGS.output_dir)
  common.check_output_dir(out_dir)
  source_settings = settings
  if FLAGS.tiny_test:
    settings = tiny_settings(settings, out_dir)
  if FLAGS.plan_only:  # reads, writes nothing: no lock
    check_record(out_dir, source_settings, write=False)
    print("\n".join(plan_lines(settings, out_dir)))
    return
  # The lock before anything is read or written there (the record, the tiny inputs, a stage).
  common.OutputDirLock(out_dir, "output_dir", label=LOCK_LABEL).acquire()
  if FLAGS.report_only:
    check_record(out_dir, source_settings, write=False)
    print("Wrote %s" % write_report(settings, out_dir))
    return

  subprocess_utils.install_signal_forwarding()
  check_record(out_dir, source_settings, write=True)
  if FLAGS.tiny_test:
    write_tiny_inputs(source_settings, settings)
  prepare_data(reproduction.Runner(os.path.join(out_dir, "logs")), settings, out_dir)
  print("\n".join(plan_lines(settings, out_dir)))
  sys.stdout.flush()
  runs = run_order(settings.variants, settings.seeds)
  for k, (variant, seed) in enumerate(runs):
    if complete_run(settings, out_dir, variant, seed) and k < len(runs) - 1:
      write_report(settings, out_dir)   # partial results as they come
  common.STOP_SIGNALS.exit_if_stopped(reproduction.RESUME_MESSAGE)
  print("Wrote %s" % write_report(settings, out_dir))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
