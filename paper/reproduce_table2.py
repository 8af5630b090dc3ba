# coding=utf-8
"""CPU-scale reproduction of the RealFormer paper's Table 2 (MLM accuracy by backbone).

One command pre-trains Post-LN, Pre-LN (GPT-2 init, automatic with layer_norm_type=pre),
RealFormer (running sum) and RealFormer (running mean) with identical data, steps, batch,
learning rate and seeds on the shared corpus, then analyses their attention side by side and
writes a markdown report with the measured numbers next to the paper's.

Steps (each skipped when its output is complete - the data made with the same settings, a run
at its last step, an evaluation of that very checkpoint, an analysis of the same models - so an
interrupted run resumes; SIGINT / SIGTERM stop the running child cleanly and exit 130 / 143):
  1. Split --corpus (default: corpus/ of the shared data, see common.shared_data_dir) into documents;
     every --heldout_every-th document goes to the held-out text.
  2. create_pretraining_data.py on both texts (once, shared by every run).
  3. Timing probe (a few steps of Post-LN) -> estimated total time; when it exceeds
     --budget_hours, --num_train_steps is scaled down to fit (or the plan is refused when that
     would leave fewer than a quarter of the steps). The plan is stored in plan.json, with the
     sha256 and size of every corpus file and of the vocab: a rerun with other flags, or after
     an input file was edited in place, is refused in one line (use a new --output_dir).
  4. run_pretraining.py per (model, seed), one process for all steps (the LR schedule decays over
     the full --num_train_steps; run_pretraining resumes from its last checkpoint), saving a
     checkpoint every --eval_every steps.
  5. Each saved checkpoint is evaluated on the held-out TFRecords (run_pretraining.py --do_eval on
     a directory whose checkpoint state names it): the learning curves.
  6. analyze_attention.py on the final models of the first seed (side by side).
  7. The report (--report): accuracy table (mean and std over seeds), learning curves, speed,
     attention analyses, and the paper's numbers to compare against. The prose judgement is left
     as a marked placeholder for a human.

  python -m paper.reproduce_table2 --output_dir=table2_out            # default plan, ~3 h on 2 cores
  python -m paper.reproduce_table2 --output_dir=table2_out --plan_only
  python -m paper.reproduce_table2 --tiny_test --output_dir=t2test --report=t2test/R.md
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import functools
import json
import os
import shutil
import sys
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import reproduction
from realformer_tf import subprocess_utils
from realformer_tf import text_input

tf1 = tf.compat.v1

REPO_DIR = common.REPO_DIR
DEFAULT_REPORT = os.path.join(REPO_DIR, "paper", "table2.md")


# The driver helpers shared with paper/reproduce_table7.py live in reproduction.py; the
# names stay importable from here.
display_path = reproduction.display_path
portable_text = reproduction.portable_text
mean_std = reproduction.mean_std
image_dir_name = reproduction.image_dir_name
RESUME_MESSAGE = reproduction.RESUME_MESSAGE
Runner = reproduction.Runner


def define_flags():
  """Defines the command-line flags; called by __main__ only, so tests can import the module."""
  flags.DEFINE_enum("size", "tiny", ["tiny", "mini"],
                    "tiny: L2/H128/A2/I512 (BERT-Tiny); mini: L4/H256/A4/I1024.")
  flags.DEFINE_integer("num_train_steps", 2000, "Training steps per run.")
  flags.DEFINE_integer("train_batch_size", 32, "Batch size.")
  flags.DEFINE_string("seeds", "12345", "Comma list of seeds; every model is trained with each.")
  flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
  flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
  flags.DEFINE_float("learning_rate", 5e-4, "Peak learning rate (AdamW, linear warm-up and decay).")
  flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the steps used for warm-up.")
  flags.DEFINE_integer("eval_every", 500, "Checkpoint and evaluate every this many steps.")
  flags.DEFINE_integer("eval_batch_size", 64, "Eval batch size.")
  flags.DEFINE_integer("max_eval_steps", 0,
                       "Eval batches of the final evaluation (0: the whole held-out set).")
  flags.DEFINE_integer("curve_eval_steps", 20,
                       "Eval batches of the intermediate (learning-curve) evaluations.")
  flags.DEFINE_string("models", "post_ln,pre_ln,realformer_sum,realformer_mean",
                      "Which of post_ln, pre_ln, realformer_sum, realformer_mean to train.")
  flags.DEFINE_string("corpus", None,
                      "Directory of .txt files (or files / globs): one sentence a line, blank "
                      "lines between documents (default: corpus/ of the shared data, "
                      "$REALFORMER_SHARED_DATA or ../shared/data beside the repository).")
  flags.DEFINE_float("max_corpus_mb", 0.0, "Use at most this many MB of the corpus (0: all).")
  flags.DEFINE_integer("heldout_every", 20, "Every n-th document goes to the held-out set.")
  flags.DEFINE_integer("dupe_factor", 1, "create_pretraining_data --dupe_factor for training data.")
  flags.DEFINE_string("vocab_file", os.path.join(REPO_DIR, "data", "vocab.txt"), "WordPiece vocab.")
  flags.DEFINE_integer("analysis_examples", 8192,
                       "Held-out examples for the attention analysis (the paper: 8,192; at most "
                       "the held-out set, ~3,700 examples with the default corpus).")
  flags.DEFINE_string("output_dir", None, "Work directory (data, runs, analysis).")
  flags.DEFINE_string("report", DEFAULT_REPORT,
                      "Markdown report to write (its images go to <report dir>/reproduction/). "
                      "With --tiny_test and this default, the report goes to --output_dir.")
  flags.DEFINE_float("budget_hours", 3.0,
                     "Time budget for the whole plan; 0 disables the timing probe and the check.")
  flags.DEFINE_integer("probe_steps", 20, "Steps per timing-probe segment.")
  flags.DEFINE_integer("parallel_runs", 1,
                       "Training runs at a time (keep 1 for comparable speed numbers).")
  flags.DEFINE_bool("plan_only", False,
                    "Prepare the data, run the timing probe, print the plan, stop.")
  flags.DEFINE_bool("tiny_test", False,
                    "CI mode: ~0.1 MB of text, a 2-layer H32 model, 4 steps, no timing probe.")

FLAGS = flags.FLAGS

MODELS = collections.OrderedDict([
    ("post_ln", ("Post-LN", "post", "none")),
    ("pre_ln", ("Pre-LN", "pre", "none")),
    ("realformer_sum", ("RealFormer (sum)", "post", "sum")),
    ("realformer_mean", ("RealFormer (mean)", "post", "mean")),
])

SIZES = {
    "tiny": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                 intermediate_size=512),
    "mini": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4,
                 intermediate_size=1024),
    "micro": dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                  intermediate_size=64),   # --tiny_test only
}

# The paper's Table 2 (He et al. 2021, §4.1): dev-set MLM accuracy after 1M steps (Post-LN, Pre-LN, RealFormer).
PAPER_TABLE2 = collections.OrderedDict([
    ("Small", (61.57, 61.67, 61.70)),
    ("Base", (70.20, 69.74, 70.42)),
    ("Large", (73.64, 73.21, 73.94)),
    ("xLarge", (73.72, 73.53, 74.76)),
])
# The paper's Table 9: pre-training hours on TPU v3 (Post-LN, Pre-LN, RealFormer).
PAPER_TABLE9 = collections.OrderedDict([
    ("Small", (5.4, 5.3, 5.9)), ("Base", (20, 20, 23)), ("Large", (58, 58, 66)),
    ("xLarge", (136, 137, 137)),
])


# ---------------------------------------------------------------------------------------------
# Settings.
# ---------------------------------------------------------------------------------------------


class Settings(collections.namedtuple("Settings", [
    "size", "num_train_steps", "train_batch_size", "seeds", "max_seq_length",
    "max_predictions_per_seq", "learning_rate", "warmup_proportion", "eval_every",
    "eval_batch_size", "max_eval_steps", "curve_eval_steps", "models", "corpus",
    "max_corpus_mb", "heldout_every", "dupe_factor", "vocab_file", "analysis_examples",
    "probe_steps", "parallel_runs", "final_eval_steps"], defaults=(None,))):
  """What a reproduction trains and measures; every run of it shares these (plan.json).

  Fields (the flags of the same names, after --tiny_test's overrides):
    size: "tiny", "mini" or "micro" (--tiny_test), a key of SIZES.
    num_train_steps: training steps per run (the plan's, once it is fixed).
    train_batch_size: training batch size.
    seeds: list of int seeds; every model is trained with each.
    max_seq_length: sequence length of the data and the models.
    max_predictions_per_seq: masked positions per sequence.
    learning_rate: peak learning rate.
    warmup_proportion: fraction of the steps used for warm-up.
    eval_every: steps between saved (and evaluated) checkpoints.
    eval_batch_size: evaluation batch size.
    max_eval_steps: --max_eval_steps (0: the whole held-out set).
    curve_eval_steps: eval batches of the intermediate (learning-curve) evaluations.
    models: list of MODELS keys to train, in report order.
    corpus: --corpus (a directory, or comma-separated files / globs).
    max_corpus_mb: MB of the corpus used (0: all).
    heldout_every: every n-th document goes to the held-out set.
    dupe_factor: create_pretraining_data --dupe_factor of the training data.
    vocab_file: absolute path of the WordPiece vocab.
    analysis_examples: held-out examples of the attention analysis.
    probe_steps: steps per timing-probe segment.
    parallel_runs: training runs at a time.
    final_eval_steps: derived, not requested: eval batches of the final evaluation (the
      held-out set once, at most max_eval_steps); None until the data exists.
  """
  __slots__ = ()

  def as_dict(self):
    """The settings as plan.json records them ("requested"): derived keys start with "_"."""
    values = collections.OrderedDict(self._asdict())
    values["_final_eval_steps"] = values.pop("final_eval_steps")
    return dict(values)


# How this invocation runs (not recorded in the plan): from the flags, like Settings.
RunOptions = collections.namedtuple("RunOptions", [
    "output_dir",    # absolute --output_dir
    "report_path",   # absolute path of the markdown report
    "budget_hours",  # --budget_hours (0: no timing probe)
    "plan_only",     # --plan_only
    "tiny_test",     # --tiny_test
])


def _settings_from_flags():
  """The Settings the flags ask for (--tiny_test shrinks them to a CI-sized run)."""
  settings = Settings(
      size=FLAGS.size, num_train_steps=FLAGS.num_train_steps,
      train_batch_size=FLAGS.train_batch_size,
      seeds=[int(x) for x in FLAGS.seeds.split(",") if x.strip()],
      max_seq_length=FLAGS.max_seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      learning_rate=FLAGS.learning_rate, warmup_proportion=FLAGS.warmup_proportion,
      eval_every=FLAGS.eval_every, eval_batch_size=FLAGS.eval_batch_size,
      max_eval_steps=FLAGS.max_eval_steps, curve_eval_steps=FLAGS.curve_eval_steps,
      models=[m.strip() for m in FLAGS.models.split(",") if m.strip()],
      corpus=FLAGS.corpus or os.path.join(common.shared_data_dir(), "corpus"),
      max_corpus_mb=FLAGS.max_corpus_mb,
      heldout_every=FLAGS.heldout_every, dupe_factor=FLAGS.dupe_factor,
      vocab_file=os.path.abspath(FLAGS.vocab_file),
      analysis_examples=FLAGS.analysis_examples, probe_steps=FLAGS.probe_steps,
      parallel_runs=FLAGS.parallel_runs)
  if FLAGS.tiny_test:
    settings = settings._replace(
        size="micro", num_train_steps=min(FLAGS.num_train_steps, 4),
        train_batch_size=8, eval_every=4, eval_batch_size=8, max_eval_steps=2,
        curve_eval_steps=2,
        max_corpus_mb=FLAGS.max_corpus_mb or 0.1, analysis_examples=32,
        seeds=settings.seeds[:1], parallel_runs=max(2, FLAGS.parallel_runs),
        max_seq_length=min(FLAGS.max_seq_length, 64),
        max_predictions_per_seq=min(FLAGS.max_predictions_per_seq, 10))
  return settings


def _options_from_flags():
  """The RunOptions of this invocation (--tiny_test writes its report into --output_dir)."""
  output_dir = os.path.abspath(FLAGS.output_dir)
  report_path = FLAGS.report
  if FLAGS.tiny_test and report_path == DEFAULT_REPORT:
    report_path = os.path.join(output_dir, "table2.md")
  return RunOptions(output_dir=output_dir, report_path=os.path.abspath(report_path),
                    budget_hours=FLAGS.budget_hours, plan_only=FLAGS.plan_only,
                    tiny_test=FLAGS.tiny_test)


def read_flags():
  """Builds the Settings and RunOptions from the flags: the one place that reads them.

  Returns:
    (Settings, RunOptions), checked (a bad flag is a one-line error).
  """
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  settings = _settings_from_flags()
  check_settings(settings, FLAGS.budget_hours, FLAGS.seeds, FLAGS.models)
  return settings, _options_from_flags()


def check_settings(settings, budget_hours, seeds_flag, models_flag):
  """Fails with one line naming the flag when a setting is out of range or an input is missing.

  Args:
    settings: Settings.
    budget_hours: --budget_hours.
    seeds_flag: --seeds as typed (named in its errors).
    models_flag: --models as typed.
  """
  if settings.max_eval_steps < 0:
    common.fail("--max_eval_steps=%d: must be >= 0" % settings.max_eval_steps)
  for key in ("num_train_steps", "train_batch_size", "max_seq_length", "max_predictions_per_seq",
              "eval_every", "eval_batch_size", "curve_eval_steps", "heldout_every", "dupe_factor",
              "analysis_examples", "probe_steps", "parallel_runs"):
    if getattr(settings, key) < 1:
      common.fail("--%s=%d: must be >= 1" % (key, getattr(settings, key)))
  if settings.heldout_every < 2:
    common.fail("--heldout_every=%d: must be >= 2" % settings.heldout_every)
  if not settings.seeds:
    common.fail("--seeds is empty")
  if len(set(settings.seeds)) != len(settings.seeds):
    common.fail("--seeds=%s: repeated seed" % seeds_flag)
  unknown = [m for m in settings.models if m not in MODELS]
  if unknown or not settings.models:
    common.fail("--models=%s: unknown %s (known: %s)" % (models_flag, ",".join(unknown),
                                                        ", ".join(MODELS)))
  if not 0 <= settings.warmup_proportion < 1:
    common.fail("--warmup_proportion=%g: must be in [0, 1)" % settings.warmup_proportion)
  if settings.learning_rate <= 0:
    common.fail("--learning_rate=%g: must be > 0" % settings.learning_rate)
  if settings.max_seq_length > 512:
    common.fail("--max_seq_length=%d: at most 512" % settings.max_seq_length)
  if budget_hours < 0:
    common.fail("--budget_hours=%g: must be >= 0" % budget_hours)
  common.require_file(settings.vocab_file, "vocab_file")
  if not _exists(settings.corpus) and not tf.io.gfile.glob(settings.corpus.split(",")[0]):
    common.fail("--corpus=%s: does not exist" % settings.corpus)


def with_final_eval_steps(settings, heldout_instances):
  """Settings with final_eval_steps: the held-out set once, at most --max_eval_steps batches.

  Args:
    settings: Settings.
    heldout_instances: examples in the held-out TFRecords.

  Returns:
    Settings. More batches than the set holds would count examples twice (the eval input
    repeats).
  """
  whole = max(1, heldout_instances // settings.eval_batch_size)
  steps = min(settings.max_eval_steps, whole) if settings.max_eval_steps else whole
  return settings._replace(final_eval_steps=steps)


def curve_eval_count(settings):
  """Eval batches of an intermediate (learning-curve) evaluation."""
  return min(settings.curve_eval_steps, settings.final_eval_steps)


def model_config(size, layer_norm_type, residual_attention, vocab_size):
  """A BERT config dict for one of the sizes and backbones (dropout 0.1 as in the paper)."""
  config = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "initializer_range": 0.02,
            "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": vocab_size,
            "layer_norm_type": layer_norm_type, "residual_attention": residual_attention}
  config.update(SIZES[size])
  if residual_attention != "none":
    # The official RealFormer code reads only this key (and always uses residual attention).
    config["use_running_mean"] = residual_attention == "mean"
  return config


def split_corpus(paths, train_path, heldout_path, heldout_every, max_bytes):
  """Writes every heldout_every-th document (counting over all files) to heldout_path.

  Args:
    paths: input text files (one sentence a line, blank line between documents).
    train_path: output for the training documents.
    heldout_path: output for the held-out documents.
    heldout_every: n.
    max_bytes: stop after this many input bytes (0: no limit); only whole documents are kept.

  Returns:
    dict with documents / bytes counts of both parts.
  """
  stats = {"train_documents": 0, "heldout_documents": 0, "train_bytes": 0, "heldout_bytes": 0}
  with common.atomic_output(train_path) as train, common.atomic_output(heldout_path) as heldout:
    index = 0
    read = 0
    doc = []

    def flush(doc, index):
      if not doc:
        return index
      text = "".join(doc) + "\n"
      part = "heldout" if index % heldout_every == heldout_every - 1 else "train"
      (heldout if part == "heldout" else train).write(text)
      stats[part + "_documents"] += 1
      stats[part + "_bytes"] += len(text)
      return index + 1

    for path in paths:
      with tf.io.gfile.GFile(path, "r") as f:
        for line in f:
          read += len(line)
          if not line.strip():
            index = flush(doc, index)
            doc = []
            if max_bytes and read >= max_bytes:
              break
          else:
            doc.append(line if line.endswith("\n") else line + "\n")
      index = flush(doc, index)
      doc = []
      if max_bytes and read >= max_bytes:
        break
  return stats


# ---------------------------------------------------------------------------------------------
# The plan: time estimates against --budget_hours.
# ---------------------------------------------------------------------------------------------


def estimate_seconds(num_runs, num_steps, steps_per_sec, run_overhead_s, num_evals_per_run,
                     eval_s, analysis_s):
  """Estimated wall time of the training, evaluation and analysis of a plan.

  Args:
    num_runs: models x seeds.
    num_steps: training steps per run.
    steps_per_sec: measured training speed.
    run_overhead_s: fixed cost of one run_pretraining process (start-up, graph, saving).
    num_evals_per_run: checkpoints evaluated per run.
    eval_s: seconds of one evaluation process.
    analysis_s: seconds of the attention analysis (all models).

  Returns:
    Seconds (float).
  """
  per_run = run_overhead_s + num_steps / steps_per_sec + num_evals_per_run * eval_s
  return num_runs * per_run + analysis_s


def fit_steps_to_budget(budget_s, num_runs, requested_steps, eval_every, steps_per_sec,
                        run_overhead_s, eval_s, analysis_s):
  """Largest step count (a multiple of eval_every, at most requested) whose plan fits budget_s.

  Returns:
    The step count, or 0 when not even one eval_every segment fits.
  """
  steps = requested_steps
  while steps > 0:
    evals = len(eval_steps(steps, eval_every)) - 1   # the last eval is in the training process
    if estimate_seconds(num_runs, steps, steps_per_sec, run_overhead_s, evals, eval_s,
                        analysis_s) <= budget_s:
      return steps
    steps = (steps - 1) // eval_every * eval_every
  return 0


def eval_steps(num_steps, eval_every):
  """Checkpoint steps that are evaluated: eval_every, 2 eval_every, ..., num_steps."""
  steps = list(range(eval_every, num_steps, eval_every)) + [num_steps]
  return sorted(set(steps))


def _plan_seconds(num_runs, num_steps, eval_every, probe, analysis_s):
  """estimate_seconds of a plan of num_runs x num_steps with the timing probe's numbers."""
  return estimate_seconds(num_runs, num_steps, probe["steps_per_sec"], probe["run_overhead_s"],
                          len(eval_steps(num_steps, eval_every)) - 1, probe["eval_s"],
                          analysis_s)


def analysis_seconds(settings, heldout_instances):
  """Estimated seconds of the attention analysis of all models.

  ~1 forward + NumPy statistics per example; measured ~100 examples/s for tiny.

  Args:
    settings: Settings.
    heldout_instances: examples in the held-out set (the analysis reads at most these).

  Returns:
    Seconds (float).
  """
  return len(settings.models) * (30 + min(settings.analysis_examples, heldout_instances) / 60.0 *
                                 (1 if settings.size == "tiny" else 4))


# ---------------------------------------------------------------------------------------------
# Running the tools.
# ---------------------------------------------------------------------------------------------


# What the training and evaluation steps share: where things are and how to run a tool.
Workspace = collections.namedtuple("Workspace", [
    "runner",        # Runner
    "out_dir",       # absolute --output_dir
    "data_dir",      # <output_dir>/data: the TFRecords
    "config_paths",  # {model: bert_config.json path}
    "log",           # logging function
])


def _read_json(path):
  with tf.io.gfile.GFile(path, "r") as f:
    return json.loads(f.read())


def _exists(path):
  return tf.io.gfile.exists(path)


def pretrain_args(settings, config_path, data_dir, run_dir, seed, num_steps):
  """Flags of run_pretraining.py for one training run."""
  return [
      "--bert_config_file=%s" % config_path,
      "--input_file=%s" % os.path.join(data_dir, "train.tfrecord"),
      "--eval_input_file=%s" % os.path.join(data_dir, "heldout.tfrecord"),
      "--output_dir=%s" % run_dir,
      # The final checkpoint is evaluated by the training process itself.
      "--do_train", "--do_eval",
      "--train_batch_size=%d" % settings.train_batch_size,
      "--eval_batch_size=%d" % settings.eval_batch_size,
      "--max_eval_steps=%d" % settings.final_eval_steps,
      "--max_seq_length=%d" % settings.max_seq_length,
      "--max_predictions_per_seq=%d" % settings.max_predictions_per_seq,
      "--learning_rate=%g" % settings.learning_rate,
      "--num_train_steps=%d" % num_steps,
      "--num_warmup_steps=%d" % int(round(settings.warmup_proportion * num_steps)),
      "--save_checkpoints_steps=%d" % settings.eval_every,
      "--keep_checkpoint_max=%d" % (len(eval_steps(num_steps, settings.eval_every)) + 2),
      "--seed=%d" % seed,
      "--log_every_n_steps=%d" % max(1, min(50, num_steps // 10)),
  ]


def eval_args(settings, config_path, data_dir, eval_dir, eval_steps_count):
  """Flags of run_pretraining.py to evaluate the checkpoint named in eval_dir's state file."""
  return [
      "--bert_config_file=%s" % config_path,
      "--input_file=%s" % os.path.join(data_dir, "heldout.tfrecord"),
      "--output_dir=%s" % eval_dir,
      "--nodo_train", "--do_eval",
      "--eval_batch_size=%d" % settings.eval_batch_size,
      "--max_eval_steps=%d" % eval_steps_count,
      "--max_seq_length=%d" % settings.max_seq_length,
      "--max_predictions_per_seq=%d" % settings.max_predictions_per_seq,
  ]


def evaluate_checkpoint(runner, settings, config_path, data_dir, run_dir, step, name, final):
  """Evaluates model.ckpt-<step> of run_dir on the held-out data (skipped when done).

  The final step is normally evaluated by the training process (final_eval_steps batches);
  intermediate steps get curve_eval_count batches.

  Args:
    runner: Runner.
    settings: Settings (with final_eval_steps).
    config_path: the model's bert_config.json.
    data_dir: <output_dir>/data.
    run_dir: the training run's output directory.
    step: the checkpoint's global step.
    name: log file stem of the evaluation process.
    final: whether this is the run's last checkpoint.

  Returns:
    dict of eval metrics (eval_results.json).
  """
  final_path = os.path.join(run_dir, "eval_results.json")
  if _exists(final_path) and _read_json(final_path).get("global_step") == step:
    return _read_json(final_path)
  eval_dir = os.path.join(run_dir, "eval", "step_%d" % step)
  result_path = os.path.join(eval_dir, "eval_results.json")
  # Done only when it evaluated this very checkpoint.
  if not (_exists(result_path) and _read_json(result_path).get("global_step") == step):
    ckpt = os.path.abspath(os.path.join(run_dir, "model.ckpt-%d" % step))
    if not _exists(ckpt + ".index"):
      common.fail("%s: checkpoint of step %d is missing (was it deleted?)" % (run_dir, step))
    tf.io.gfile.makedirs(eval_dir)
    # The eval process restores the latest checkpoint of its output_dir: point it at this one.
    tf1.train.update_checkpoint_state(eval_dir, ckpt)
    count = settings.final_eval_steps if final else curve_eval_count(settings)
    runner.run(name, "run_pretraining.py",
               eval_args(settings, config_path, data_dir, eval_dir, count))
  return _read_json(result_path)


# ---------------------------------------------------------------------------------------------
# Data.
# ---------------------------------------------------------------------------------------------


DATA_KEYS = ("corpus", "max_corpus_mb", "heldout_every", "dupe_factor", "vocab_file",
             "max_seq_length", "max_predictions_per_seq")


def data_settings(settings):
  """The settings the data files depend on (recorded in data_stats.json)."""
  return {key: getattr(settings, key) for key in DATA_KEYS}


def data_current(stats, settings, planned, identities=None):
  """Whether data_stats.json describes data made with `settings` from these input contents.

  Args:
    stats: data_stats.json contents (or None).
    settings: Settings.
    planned: plan.json exists (its settings and inputs were already checked against these).
    identities: reproduction.input_identities of input_files(settings) (None: not compared).

  Returns:
    bool. A file without "settings" or "inputs" (older versions) counts only under a plan.
  """
  if not stats or "train_instances" not in stats or "heldout_instances" not in stats:
    return False
  if "settings" not in stats:
    return planned
  if stats["settings"] != data_settings(settings):
    return False
  if identities is None:
    return True
  if "inputs" not in stats:
    return planned
  return stats["inputs"] == identities


def corpus_files(corpus):
  """The text files of --corpus: a directory's *.txt, or comma-separated files / globs."""
  if tf.io.gfile.isdir(corpus):
    paths = sorted(tf.io.gfile.glob(os.path.join(corpus, "*.txt")))
    if not paths:
      common.fail("--corpus=%s: no .txt files" % corpus)
    return paths
  return common.expand_input_files(corpus, "corpus")


def input_files(settings):
  """The input files a reproduction reads: every corpus file and the vocab.

  Args:
    settings: Settings.

  Returns:
    list of reproduction.InputFile (their contents are recorded in plan.json and
    data_stats.json: a file edited in place between two invocations is noticed).
  """
  return (reproduction.input_files("corpus", corpus_files(settings.corpus)) +
          [reproduction.input_file("vocab_file", settings.vocab_file)])


def create_tfrecords(runner, settings, data_dir, part, dupe_factor):
  """Runs create_pretraining_data.py on <data_dir>/<part>.txt.

  Args:
    runner: Runner.
    settings: Settings.
    data_dir: <output_dir>/data.
    part: "train" or "heldout".
    dupe_factor: --dupe_factor of this part.

  Returns:
    The number of instances written to <data_dir>/<part>.tfrecord.
  """
  out = os.path.join(data_dir, part + ".tfrecord")
  runner.run("create_%s" % part, "create_pretraining_data.py", [
      "--input_file=%s" % os.path.join(data_dir, part + ".txt"),
      "--output_file=%s" % out,
      "--vocab_file=%s" % settings.vocab_file,
      "--do_lower_case",
      "--max_seq_length=%d" % settings.max_seq_length,
      "--max_predictions_per_seq=%d" % settings.max_predictions_per_seq,
      "--dupe_factor=%d" % dupe_factor,
      "--random_seed=12345",
  ])
  return _read_json(text_input.summary_path_for(out))["instances"]


def prepare_data(runner, settings, data_dir, log, planned=False, identities=None):
  """Splits the corpus and creates the TFRecords (skipped when current). Returns data stats.

  Args:
    runner: Runner.
    settings: Settings.
    data_dir: <output_dir>/data.
    log: logging function.
    planned: plan.json exists (see data_current).
    identities: reproduction.input_identities of input_files(settings): recorded in the stats,
      and data made from other contents is made again.

  Returns:
    The data_stats.json dict.
  """
  tf.io.gfile.makedirs(data_dir)
  stats_path = os.path.join(data_dir, "data_stats.json")
  if _exists(stats_path):
    stats = _read_json(stats_path)
    if data_current(stats, settings, planned, identities):
      return stats
    log("%s was made with other settings or input contents (e.g. by --plan_only); making the "
        "data again" % stats_path)
  paths = corpus_files(settings.corpus)
  start = time.time()
  stats = split_corpus(paths, os.path.join(data_dir, "train.txt"),
                       os.path.join(data_dir, "heldout.txt"), settings.heldout_every,
                       int(settings.max_corpus_mb * 1e6))
  if not stats["heldout_documents"] or not stats["train_documents"]:
    common.fail("--corpus=%s: too few documents for a held-out split every %d" %
                (settings.corpus, settings.heldout_every))
  log("Corpus split: %s" % json.dumps(stats, sort_keys=True))
  for part, dupe in (("train", settings.dupe_factor), ("heldout", 1)):
    stats[part + "_instances"] = create_tfrecords(runner, settings, data_dir, part, dupe)
  stats["seconds"] = round(time.time() - start, 1)
  stats["corpus_files"] = paths
  stats["settings"] = data_settings(settings)
  if identities is not None:
    stats["inputs"] = identities
  common.write_json_atomic(stats_path, stats)
  return stats


def _vocab_size(vocab_file):
  with tf.io.gfile.GFile(vocab_file, "r") as f:
    return sum(1 for line in f if line.strip())


def write_model_configs(config_dir, settings):
  """Writes the bert_config.json of every backbone in MODELS at the chosen size.

  Args:
    config_dir: <output_dir>/configs.
    settings: Settings.

  Returns:
    {model: config path}.
  """
  vocab_size = _vocab_size(settings.vocab_file)
  tf.io.gfile.makedirs(config_dir)
  config_paths = {}
  for name in MODELS:
    _, ln, res = MODELS[name]
    path = os.path.join(config_dir, "%s.json" % name)
    common.write_json_atomic(path, model_config(settings.size, ln, res, vocab_size))
    config_paths[name] = path
  return config_paths


# ---------------------------------------------------------------------------------------------
# The timing probe and the plan.
# ---------------------------------------------------------------------------------------------


def _train_steps_per_sec(run_dir):
  """The run's steady training rate from its train_summary_local.json (run_pretraining.py).

  steady_steps_per_sec excludes graph building and the first step (what a longer run gets);
  train_steps_per_sec (whole process) is the fallback for summaries written before it existed.

  Returns:
    steps/s, or None.
  """
  summary_path = os.path.join(run_dir, "train_summary_local.json")
  if not _exists(summary_path):
    return None
  summary = _read_json(summary_path)
  return summary.get("steady_steps_per_sec") or summary.get("train_steps_per_sec") or None


def timing_probe(runner, settings, config_path, data_dir, probe_dir):
  """Measures training speed, per-process overhead and eval time on the Post-LN model.

  Two training processes (to P then to 3P steps, resuming): the second's
  train_summary_local.json gives the step rate (its wall-time difference from the first when
  the summary has none), its wall time less its training the fixed overhead; one eval process
  gives eval_s.

  Returns:
    dict steps_per_sec, run_overhead_s, eval_s.
  """
  if _exists(probe_dir):
    shutil.rmtree(probe_dir)
  p = settings.probe_steps
  t1 = runner.run("probe_train_1", "run_pretraining.py",
                  pretrain_args(settings, config_path, data_dir, probe_dir, 1, p))
  t2 = runner.run("probe_train_2", "run_pretraining.py",
                  pretrain_args(settings, config_path, data_dir, probe_dir, 1, 3 * p))
  # The second process trained 2P steps, the first P: their difference is P steps.
  step_s = max(1e-3, (t2 - t1) / float(p))
  overhead = max(0.0, t1 - p * step_s)
  eval_dir = os.path.join(probe_dir, "eval")
  tf.io.gfile.makedirs(eval_dir)
  tf1.train.update_checkpoint_state(
      eval_dir, os.path.abspath(os.path.join(probe_dir, "model.ckpt-%d" % (3 * p))))
  t3 = runner.run("probe_eval", "run_pretraining.py", eval_args(
      settings, config_path, data_dir, eval_dir, curve_eval_count(settings)))
  # The wall-time difference is noisy on a shared machine; prefer the training process's own
  # rate. It includes the process's graph building and first step, so for a short probe it is
  # below the steady rate and the estimate errs on the long side.
  rate = _train_steps_per_sec(probe_dir)
  if rate:
    step_s = 1.0 / rate
    overhead = max(0.0, t2 - 2 * p * step_s)
  shutil.rmtree(probe_dir)
  return {"steps_per_sec": 1.0 / step_s, "run_overhead_s": overhead, "eval_s": t3,
          "probe_steps": p}


def fit_plan_to_budget(probe, settings, budget_hours, budget_s, num_runs, analysis_s, log):
  """Adds the estimates to `probe` and scales the steps down to fit --budget_hours.

  Args:
    probe: timing_probe's dict; gets analysis_s, estimate_s, budget_s and, when the steps are
      scaled down, scaled_estimate_s.
    settings: Settings (num_train_steps: the requested steps).
    budget_hours: --budget_hours.
    budget_s: seconds left of the budget.
    num_runs: models x seeds.
    analysis_s: analysis_seconds(...).
    log: logging function.

  Returns:
    The number of training steps of the plan. Fails when fewer than a quarter of the requested
    steps (or one eval_every segment) would fit.
  """
  requested = settings.num_train_steps
  steps = fit_steps_to_budget(budget_s, num_runs, requested, settings.eval_every,
                              probe["steps_per_sec"], probe["run_overhead_s"], probe["eval_s"],
                              analysis_s)
  estimate = _plan_seconds(num_runs, requested, settings.eval_every, probe, analysis_s)
  probe.update({"analysis_s": analysis_s, "estimate_s": estimate, "budget_s": budget_s})
  log("Timing probe: %.2f steps/s, %.0f s per process, %.0f s per eval; the requested plan "
      "(%d runs x %d steps) needs ~%s, budget %s" % (
          probe["steps_per_sec"], probe["run_overhead_s"], probe["eval_s"], num_runs,
          requested, common.format_duration(estimate), common.format_duration(budget_s)))
  if steps >= requested:
    return requested
  if steps < max(settings.eval_every, requested // 4):
    common.fail("the plan needs ~%s but --budget_hours=%g: use fewer --seeds, a smaller "
                "--num_train_steps or --train_batch_size, or a larger --budget_hours" % (
                    common.format_duration(estimate), budget_hours))
  log("Scaling --num_train_steps from %d to %d to fit --budget_hours=%g" % (
      requested, steps, budget_hours))
  probe["scaled_estimate_s"] = _plan_seconds(num_runs, steps, settings.eval_every, probe,
                                             analysis_s)
  return steps


def new_plan(workspace, settings, options, heldout_instances, num_runs, start_time,
             identities=None):
  """The plan of a first invocation: the settings, and the steps that fit the budget.

  Args:
    workspace: Workspace.
    settings: Settings (with final_eval_steps).
    options: RunOptions; no timing probe with --budget_hours=0 or --tiny_test.
    heldout_instances: examples in the held-out set.
    num_runs: models x seeds.
    start_time: time.time() when this invocation started (the budget counts from it).
    identities: reproduction.input_identities of input_files(settings).

  Returns:
    The plan.json dict: requested (settings), inputs (their identities), num_train_steps,
    probe (or None).
  """
  plan = {"requested": settings.as_dict(), "num_train_steps": settings.num_train_steps,
          "probe": None, "inputs": identities or {}}
  if options.budget_hours > 0 and not options.tiny_test:
    probe = timing_probe(workspace.runner, settings, workspace.config_paths["post_ln"],
                         workspace.data_dir, os.path.join(workspace.out_dir, "probe"))
    budget_s = options.budget_hours * 3600 - (time.time() - start_time)
    plan["num_train_steps"] = fit_plan_to_budget(
        probe, settings, options.budget_hours, budget_s, num_runs,
        analysis_seconds(settings, heldout_instances), workspace.log)
    plan["probe"] = probe
  return plan


def load_plan(plan_path, settings, out_dir, inputs=(), identities=None):
  """The plan of an earlier invocation, or None; fails when it asked for other settings or inputs.

  Args:
    plan_path: <output_dir>/plan.json.
    settings: Settings of this invocation.
    out_dir: --output_dir (named in the error).
    inputs: input_files(settings).
    identities: reproduction.input_identities(inputs) (default: computed here).

  Returns:
    The plan.json dict, or None when there is none. A plan of an earlier version without input
    identities gets this invocation's (written to plan_path; a warning says so).
  """
  if not _exists(plan_path):
    return None
  plan = _read_json(plan_path)
  free = ("num_train_steps", "parallel_runs")   # steps come from the plan itself
  requested = {k: v for k, v in settings.as_dict().items()
               if k not in free and not k.startswith("_")}
  stored = {k: v for k, v in plan["requested"].items()
            if k not in free and not k.startswith("_")}
  if identities is None:
    identities = reproduction.input_identities(inputs)
  changes = reproduction.settings_changes(stored, requested)
  if "inputs" in plan:
    changes += reproduction.input_changes(plan["inputs"], identities, inputs)
  reproduction.refuse_changes(out_dir, changes)
  if "inputs" not in plan:
    sys.stderr.write("warning: %s records no input file contents (an earlier version): the "
                     "input files as they are now are taken as the plan's\n" % plan_path)
    plan["inputs"] = identities
    common.write_json_atomic(plan_path, plan)
  return plan


def print_plan(plan, settings, runs):
  """Prints the one-line plan (runs, steps, batch, size, estimated time) to stdout."""
  print("Plan: %d runs (%s x seeds %s), %d steps each, batch %d, seq %d, size %s%s" % (
      len(runs), ",".join(settings.models), ",".join(map(str, settings.seeds)),
      plan["num_train_steps"], settings.train_batch_size, settings.max_seq_length, settings.size,
      (", estimated %s" % common.format_duration(
          plan["probe"].get("scaled_estimate_s", plan["probe"]["estimate_s"])))
      if plan.get("probe") else ""))
  sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# Training, evaluation and analysis.
# ---------------------------------------------------------------------------------------------


def run_dir_of(out_dir, model, seed):
  """<output_dir>/runs/<model>_s<seed>: the training run's output directory."""
  return os.path.join(out_dir, "runs", "%s_s%d" % (model, seed))


def train_run(workspace, settings, model, seed):
  """Trains one (model, seed) to settings.num_train_steps (skipped when it got there).

  Args:
    workspace: Workspace.
    settings: Settings (num_train_steps: the plan's).
    model: a MODELS key.
    seed: its seed.

  Returns:
    The run's train_summary_local.json dict.
  """
  num_steps = settings.num_train_steps
  run_dir = run_dir_of(workspace.out_dir, model, seed)
  summary_path = os.path.join(run_dir, "train_summary_local.json")
  done = _exists(summary_path) and _read_json(summary_path).get("global_step") == num_steps
  if not done:
    common.STOP_SIGNALS.exit_if_stopped(RESUME_MESSAGE)
    # A run stopped off its curve's steps resumes from the last one (its curve checkpoints).
    curve_steps = eval_steps(num_steps, settings.eval_every)
    resumed = reproduction.rewind_to_checkpoint(run_dir, lambda step: step in curve_steps)
    if resumed is not None:
      workspace.log("%s: resuming from the learning curve's checkpoint of step %d" % (
          run_dir, resumed))
    workspace.log("Training %s seed %d (%d steps)" % (model, seed, num_steps))
    workspace.runner.run("train_%s_s%d" % (model, seed), "run_pretraining.py",
                         pretrain_args(settings, workspace.config_paths[model],
                                       workspace.data_dir, run_dir, seed, num_steps))
  train_summary = _read_json(summary_path) if _exists(summary_path) else {}
  if train_summary.get("global_step") != num_steps:
    common.fail("%s: run_pretraining.py exited 0 but train_summary_local.json has global_step "
                "%s of %d; rerun to resume" % (run_dir, train_summary.get("global_step"),
                                               num_steps))
  return train_summary


def learning_curve(workspace, settings, model, seed):
  """Evaluates every saved checkpoint of a finished run; writes <run dir>/curve.json.

  Args:
    workspace: Workspace.
    settings: Settings (num_train_steps: the plan's).
    model: a MODELS key.
    seed: its seed.

  Returns:
    List of eval metric dicts with their "step", in step order.
  """
  num_steps = settings.num_train_steps
  run_dir = run_dir_of(workspace.out_dir, model, seed)
  curve = []
  for step in eval_steps(num_steps, settings.eval_every):
    metrics = evaluate_checkpoint(workspace.runner, settings, workspace.config_paths[model],
                                  workspace.data_dir, run_dir, step,
                                  "eval_%s_s%d_step%d" % (model, seed, step),
                                  final=step == num_steps)
    curve.append(dict(metrics, step=step))
  common.write_json_atomic(os.path.join(run_dir, "curve.json"), curve)
  return curve


def train_and_evaluate(workspace, settings, run):
  """Trains and evaluates one run (model, seed); returns {"train": summary, "curve": [...]}."""
  model, seed = run
  train_summary = train_run(workspace, settings, model, seed)
  return {"train": train_summary, "curve": learning_curve(workspace, settings, model, seed)}


def train_and_evaluate_all(workspace, settings, runs):
  """Trains and evaluates every run, settings.parallel_runs at a time.

  A failed or stopped run starts no further one; the runs already going are waited for (their
  outputs are kept for the rerun) and then the failure is raised (reproduction.run_in_parallel).

  Args:
    workspace: Workspace.
    settings: Settings (num_train_steps: the plan's).
    runs: [(model, seed)] in report order.

  Returns:
    OrderedDict {(model, seed): train_and_evaluate's dict}, in `runs` order.
  """
  meter = common.ProgressMeter(len(runs), unit="runs", min_interval_s=0, log_fn=workspace.log)
  finished = []

  def log_finished(run, _):
    finished.append(run)
    meter.update(len(finished), extra="(%s seed %d)" % run)

  # Runs are independent; with --parallel_runs > 1 their speeds are not comparable.
  results = reproduction.run_in_parallel(
      runs, functools.partial(train_and_evaluate, workspace, settings), settings.parallel_runs,
      on_done=log_finished)
  common.STOP_SIGNALS.exit_if_stopped(RESUME_MESSAGE)
  return collections.OrderedDict(zip(runs, results))


ANALYSIS_MARKER = "analysed.json"


def analysis_request(settings, out_dir, checkpoints, train_summaries):
  """What the attention analysis covers; a different one makes an earlier analysis stale.

  Args:
    settings: Settings.
    out_dir: --output_dir (checkpoints are recorded relative to it).
    checkpoints: the final checkpoint of each model (first seed), in settings.models order.
    train_summaries: their train_summary_local.json dicts (weights_digest tells a retrained
      model from the one analysed before).

  Returns:
    A JSON-able dict.
  """
  return {"models": list(settings.models), "labels": [MODELS[m][0] for m in settings.models],
          "checkpoints": [os.path.relpath(c, out_dir) for c in checkpoints],
          "weights_digests": [t.get("weights_digest") for t in train_summaries],
          "num_examples": settings.analysis_examples, "size": settings.size,
          "max_seq_length": settings.max_seq_length, "data": data_settings(settings)}


def analysis_done(analysis_dir, request):
  """Whether analysis_dir holds a finished analysis of exactly `request`.

  analyze_attention.py writes summary.json and report.md; ANALYSIS_MARKER (written by this
  script after it succeeded, emptied before it starts) records what was analysed.

  Args:
    analysis_dir: <output_dir>/analysis.
    request: analysis_request(...).

  Returns:
    bool.
  """
  marker = os.path.join(analysis_dir, ANALYSIS_MARKER)
  return (_exists(os.path.join(analysis_dir, "summary.json")) and
          _exists(os.path.join(analysis_dir, "report.md")) and _exists(marker) and
          _read_json(marker) == request)


def analyze_attention_args(workspace, settings, checkpoints, analysis_dir):
  """Flags of analyze_attention.py for the final models, side by side."""
  return [
      "--init_checkpoint=%s" % ",".join(checkpoints),
      "--labels=%s" % ",".join(MODELS[m][0] for m in settings.models),
      "--bert_config_file=%s" % ",".join(workspace.config_paths[m] for m in settings.models),
      "--vocab_file=%s" % settings.vocab_file,
      "--input_tfrecord=%s" % os.path.join(workspace.data_dir, "heldout.tfrecord"),
      "--frequency_corpus=%s" % os.path.join(workspace.data_dir, "train.txt"),
      "--frequency_max_mb=10",
      "--num_examples=%d" % settings.analysis_examples,
      "--output_dir=%s" % analysis_dir,
  ]


def analyze_final_models(workspace, settings, results):
  """Runs the attention analysis of the first seed's final models (skipped when current).

  Args:
    workspace: Workspace.
    settings: Settings (num_train_steps: the plan's).
    results: train_and_evaluate_all's results.

  Returns:
    The analysis directory, <output_dir>/analysis.
  """
  analysis_dir = os.path.join(workspace.out_dir, "analysis")
  seed0 = settings.seeds[0]
  checkpoints = [os.path.join(run_dir_of(workspace.out_dir, m, seed0),
                              "model.ckpt-%d" % settings.num_train_steps)
                 for m in settings.models]
  request = analysis_request(settings, workspace.out_dir, checkpoints,
                             [results[(m, seed0)]["train"] for m in settings.models])
  if not analysis_done(analysis_dir, request):
    tf.io.gfile.makedirs(analysis_dir)
    common.write_json_atomic(os.path.join(analysis_dir, ANALYSIS_MARKER), {})
    workspace.runner.run("analyze_attention", "analyze_attention.py",
                         analyze_attention_args(workspace, settings, checkpoints, analysis_dir))
    common.write_json_atomic(os.path.join(analysis_dir, ANALYSIS_MARKER), request)
  return analysis_dir


# ---------------------------------------------------------------------------------------------
# Main.
# ---------------------------------------------------------------------------------------------


def open_output_dir(out_dir):
  """Creates --output_dir, takes its lock and forwards stop signals to the children.

  One reproduction per directory (the lock is released at exit); a second would train the
  same runs. SIGINT / SIGTERM: the running child saves and stops, then this exits 130 / 143.

  Args:
    out_dir: absolute --output_dir.

  Returns:
    A Runner logging to <output_dir>/logs.
  """
  # Creates the directory (a file in the way is one line naming --output_dir).
  common.OutputDirLock(out_dir, "output_dir", label="reproduce_table2").acquire()
  subprocess_utils.install_signal_forwarding()
  return Runner(os.path.join(out_dir, "logs"))


def record_invocation(plan_path, plan, start_time):
  """Appends this invocation's wall seconds to the plan and writes it.

  Wall time accumulates over invocations, so a resumed or report-only rerun still reports
  what the whole reproduction cost.

  Args:
    plan_path: <output_dir>/plan.json.
    plan: the plan dict (updated in place).
    start_time: time.time() when this invocation started.
  """
  plan.setdefault("invocation_seconds", []).append(round(time.time() - start_time, 1))
  common.write_json_atomic(plan_path, plan)


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  log = lambda msg: tf1.logging.info(msg)
  settings, options = read_flags()
  out_dir = options.output_dir
  # The lock first: nothing of the directory is read or written before it is ours.
  runner = open_output_dir(out_dir)
  data_dir = os.path.join(out_dir, "data")
  start_time = time.time()

  # The plan: settings and input contents that every run must share. A resumed command must
  # ask for the same.
  plan_path = os.path.join(out_dir, "plan.json")
  inputs = input_files(settings)
  identities = reproduction.input_identities(inputs)
  plan = load_plan(plan_path, settings, out_dir, inputs, identities)
  data_stats = prepare_data(runner, settings, data_dir, log, planned=plan is not None,
                            identities=identities)
  settings = with_final_eval_steps(settings, data_stats["heldout_instances"])
  workspace = Workspace(runner, out_dir, data_dir,
                        write_model_configs(os.path.join(out_dir, "configs"), settings), log)
  runs = [(m, seed) for seed in settings.seeds for m in settings.models]
  if plan is None:
    plan = new_plan(workspace, settings, options, data_stats["heldout_instances"], len(runs),
                    start_time, identities)
    if not options.plan_only:
      common.write_json_atomic(plan_path, plan)
  settings = settings._replace(num_train_steps=plan["num_train_steps"])
  print_plan(plan, settings, runs)
  if options.plan_only:
    return

  results = train_and_evaluate_all(workspace, settings, runs)
  analysis_dir = analyze_final_models(workspace, settings, results)
  record_invocation(plan_path, plan, start_time)
  write_report(options.report_path, settings, plan, data_stats, results, analysis_dir,
               plan["invocation_seconds"])
  print("Wrote %s" % options.report_path)


# ---------------------------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------------------------


JUDGEMENT_BEGIN = "<!-- human judgement: begin -->"
JUDGEMENT_END = "<!-- human judgement: end -->"

# The attention analysis's figures, copied next to the report.
ANALYSIS_FIGURES = ("entropy.png", "jsd.png", "mixing.png")


def _pct(x, digits=2):
  return "n/a" if x is None else ("%." + str(digits) + "f") % (100.0 * x)


def _pm(mean, std, scale=100.0, digits=2):
  if mean is None:
    return "n/a"
  text = ("%." + str(digits) + "f") % (scale * mean)
  if std is not None:
    text += (" ± %." + str(digits) + "f") % (scale * std)
  return text


def _fmt_int(x):
  return "{:,}".format(int(round(x)))


def learning_curve_figure(path, settings, results):
  """MLM accuracy and loss on the held-out data vs step (mean over seeds) per model."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
  keys = (("masked_lm_accuracy", "held-out MLM accuracy (%)", 100.0),
          ("masked_lm_loss", "held-out MLM loss", 1.0),
          ("next_sentence_accuracy", "held-out NSP accuracy (%)", 100.0))
  for ax, (key, title, scale) in zip(axes, keys):
    for model in settings.models:
      curves = [results[(model, seed)]["curve"] for seed in settings.seeds]
      steps = [c["step"] for c in curves[0]]
      values = np.array([[c[key] for c in curve] for curve in curves]) * scale
      ax.plot(steps, values.mean(0), marker="o", markersize=3, label=MODELS[model][0])
      if len(curves) > 1:
        ax.fill_between(steps, values.min(0), values.max(0), alpha=0.15)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("step", fontsize=9)
    ax.tick_params(labelsize=8)
  axes[0].legend(fontsize=8)
  fig.tight_layout()
  common.write_figure_png(fig, path)


def _display_corpus(corpus, out_dir):
  """--corpus (a directory, or comma-separated files / globs) as the report names it."""
  return ",".join(display_path(part.strip(), "corpus", out_dir)
                  for part in corpus.split(",") if part.strip())


def write_report_images(image_dir, settings, results, analysis_dir):
  """Draws the learning curves and copies the analysis figures into image_dir.

  Args:
    image_dir: <report dir>/<image_dir_name>.
    settings: Settings.
    results: {(model, seed): {"train": ..., "curve": [...]}}.
    analysis_dir: <output_dir>/analysis (a missing figure is skipped).
  """
  tf.io.gfile.makedirs(image_dir)
  learning_curve_figure(os.path.join(image_dir, "learning_curves.png"), settings, results)
  for name in ANALYSIS_FIGURES:
    src = os.path.join(analysis_dir, name)
    if _exists(src):
      tf.io.gfile.copy(src, os.path.join(image_dir, name), overwrite=True)


def _header_lines(invocation_seconds):
  """The report's title and its wall-time line."""
  return [
      "# Reproducing Table 2 at CPU scale\n",
      "Written by `paper/reproduce_table2.py` (data sections; the judgement block is written by a "
      "human and kept when the report is rewritten). Wall time: %s over %d invocation(s) "
      "(%s).\n" % (common.format_duration(sum(invocation_seconds)), len(invocation_seconds),
                   ", ".join(common.format_duration(x) for x in invocation_seconds)),
  ]


def _probe_row(plan):
  """The "timing probe" row of the setup table (the plan has a probe)."""
  p = plan["probe"]
  scaled = ""
  if "scaled_estimate_s" in p:
    scaled = ", scaled to %d steps (%s)" % (plan["num_train_steps"],
                                             common.format_duration(p["scaled_estimate_s"]))
  return ("timing probe", "%.2f steps/s, %.0f s per process, %.0f s per eval; estimated "
          "%s for the requested %d steps%s" % (
              p["steps_per_sec"], p["run_overhead_s"], p["eval_s"],
              common.format_duration(p["estimate_s"]),
              plan["requested"]["num_train_steps"], scaled))


def _setup_rows(settings, plan, data_stats, out_dir):
  """(setting, value) rows of the setup table."""
  size = SIZES[settings.size]
  rows = [
      ("model size", "%s: %d layers, hidden %d, %d heads, intermediate %d, vocab %s" % (
          settings.size, size["num_hidden_layers"], size["hidden_size"],
          size["num_attention_heads"], size["intermediate_size"],
          os.path.basename(settings.vocab_file))),
      ("models", ", ".join(MODELS[m][0] for m in settings.models)),
      ("steps x batch", "%d x %d (sequence length %d, %d masked positions max)" % (
          plan["num_train_steps"], settings.train_batch_size, settings.max_seq_length,
          settings.max_predictions_per_seq)),
      ("optimiser", "AdamW, peak LR %g, linear warm-up %d%% then linear decay to 0, weight decay "
                    "0.01, dropout 0.1" % (settings.learning_rate,
                                           round(100 * settings.warmup_proportion))),
      ("seeds", ", ".join(map(str, settings.seeds))),
      ("corpus", "%s (%s): %d training documents (%.1f MB, %s instances, dupe_factor %d), "
                 "%d held-out documents (every %d-th; %.1f MB, %s instances)" % (
                     _display_corpus(settings.corpus, out_dir),
                     "first %.1f MB" % settings.max_corpus_mb if settings.max_corpus_mb
                     else "all",
                     data_stats["train_documents"], data_stats["train_bytes"] / 1e6,
                     data_stats.get("train_instances"), settings.dupe_factor,
                     data_stats["heldout_documents"], settings.heldout_every,
                     data_stats["heldout_bytes"] / 1e6, data_stats.get("heldout_instances"))),
      ("evaluation", "held-out TFRecords: final checkpoint on %d batches of %d; learning-curve "
                     "points every %d steps on the first %d batches" % (
                         settings.final_eval_steps, settings.eval_batch_size,
                         settings.eval_every, curve_eval_count(settings))),
  ]
  if plan.get("probe"):
    rows.append(_probe_row(plan))
  return rows


def _setup_lines(settings, plan, data_stats, out_dir):
  """The "Setup" section: a table of what was trained on what."""
  lines = ["## Setup\n", "| setting | value |", "|---|---|"]
  lines += ["| %s | %s |" % row for row in _setup_rows(settings, plan, data_stats, out_dir)]
  return lines + [""]


def _final_evals(settings, results, model):
  """The final evaluation of each seed's run of `model`."""
  return [results[(model, seed)]["curve"][-1] for seed in settings.seeds]


def final_accuracies(settings, results):
  """{model: mean over seeds of the final held-out MLM accuracy}, in settings.models order."""
  return collections.OrderedDict(
      (model, mean_std([c["masked_lm_accuracy"] for c in _final_evals(settings, results,
                                                                       model)])[0])
      for model in settings.models)


def _accuracy_lines(settings, results, num_steps):
  """The held-out accuracy table (the Table 2 measurement)."""
  lines = [
      "## Held-out accuracy (the Table 2 measurement)\n",
      "Final checkpoint (step %d); mean ± sample std over %d seed(s).\n" % (
          num_steps, len(settings.seeds)),
      "| model | MLM accuracy (%) | MLM loss | NSP accuracy (%) | per seed MLM accuracy (%) |",
      "|---|---|---|---|---|",
  ]
  for model in settings.models:
    last = _final_evals(settings, results, model)
    mlm = mean_std([c["masked_lm_accuracy"] for c in last])
    loss = mean_std([c["masked_lm_loss"] for c in last])
    nsp = mean_std([c["next_sentence_accuracy"] for c in last])
    lines.append("| %s | %s | %s | %s | %s |" % (
        MODELS[model][0], _pm(*mlm), _pm(loss[0], loss[1], 1.0, 3), _pm(*nsp),
        ", ".join(_pct(c["masked_lm_accuracy"]) for c in last)))
  return lines + [""]


def _learning_curve_lines(settings, results, images):
  """The learning-curve figure and table (held-out MLM accuracy per evaluated step)."""
  first_curve = results[(settings.models[0], settings.seeds[0])]["curve"]
  lines = [
      "![learning curves](%s/learning_curves.png)\n" % images,
      "Learning curves (held-out, mean over seeds; band = min..max over seeds):\n",
      "| model | " + " | ".join("step %d" % c["step"] for c in first_curve) + " |",
      "|---|" + "---|" * len(first_curve),
  ]
  for model in settings.models:
    curves = [results[(model, seed)]["curve"] for seed in settings.seeds]
    lines.append("| %s MLM acc | %s |" % (MODELS[model][0], " | ".join(
        _pct(float(np.mean([c[i]["masked_lm_accuracy"] for c in curves])))
        for i in range(len(curves[0])))))
  return lines + [""]


def _speed_lines(settings, results):
  """The training-speed section: steps/s per model (train_summary_local.json) and the paper's."""
  lines = [
      "## Training speed\n",
      "steps/s of the training process (start-up and checkpointing included, the same for all "
      "models). The paper (Table 9, TPU v3 hours, Post-LN / Pre-LN / RealFormer): " +
      "; ".join("%s %s / %s / %s" % ((k,) + v) for k, v in PAPER_TABLE9.items()) +
      " - 10-15% slower on TPU, \"almost negligible\" on GPUs.\n",
      "| model | steps/s (mean over seeds) | relative to Post-LN | train seconds per run |",
      "|---|---|---|---|",
  ]
  speeds = {}
  for model in settings.models:
    sps = [results[(model, seed)]["train"].get("train_steps_per_sec") for seed in settings.seeds]
    secs = [results[(model, seed)]["train"].get("train_seconds") for seed in settings.seeds]
    speeds[model] = mean_std(sps)[0]
    # Relative only once Post-LN's speed is known (models are listed in --models order).
    lines.append("| %s | %s | %s | %s |" % (
        MODELS[model][0], "n/a" if speeds[model] is None else "%.3f" % speeds[model],
        "%.3f" % (speeds[model] / speeds["post_ln"])
        if speeds.get("post_ln") and speeds[model] else "n/a",
        ", ".join("%s" % x for x in secs)))
  return lines + [""]


def _paper_comparison_rows(settings, finals, num_steps):
  """The measured row(s) of the Table 2 comparison (RealFormer: sum, else mean)."""
  real_key = "realformer_sum" if "realformer_sum" in finals else (
      "realformer_mean" if "realformer_mean" in finals else None)
  meas = lambda m: _pct(finals.get(m)) if m in finals else "n/a"
  delta = "n/a"
  if real_key and "post_ln" in finals:
    delta = "%+.2f" % (100 * (finals[real_key] - finals["post_ln"]))
  rows = ["| %s, %d steps (measured here) | %s | %s | %s | %s |" % (
      settings.size, num_steps, meas("post_ln"), meas("pre_ln"),
      meas(real_key) if real_key else "n/a", delta)]
  if "realformer_mean" in finals and real_key != "realformer_mean":
    rows.append("| (measured) RealFormer (mean) | | | %s | %s |" % (
        meas("realformer_mean"), "%+.2f" % (100 * (finals["realformer_mean"] -
                                                   finals["post_ln"]))
        if "post_ln" in finals else "n/a"))
  return rows


def _comparison_lines(settings, results, finals, num_steps):
  """The comparison with the paper's Table 2: its numbers, ours, the ordering, the seed noise."""
  lines = [
      "## Comparison with the paper's Table 2\n",
      "Paper: dev-set MLM accuracy (%) after 1M steps at batch 512, sequence length 512 "
      "(He et al. 2021, §4.1):\n",
      "| model size | Post-LN | Pre-LN | RealFormer | RealFormer - Post-LN |",
      "|---|---|---|---|---|",
  ]
  for k, v in PAPER_TABLE2.items():
    lines.append("| %s (paper) | %.2f | %.2f | %.2f | %+.2f |" % (k, v[0], v[1], v[2],
                                                                   v[2] - v[0]))
  lines += _paper_comparison_rows(settings, finals, num_steps)
  lines.append("")
  lines.append("Measured ordering (best first): %s. Paper ordering for every size: RealFormer > "
               "Post-LN, and Pre-LN below Post-LN except Small.\n" % " > ".join(
                   MODELS[m][0] for m in sorted(finals, key=lambda m: -(finals[m] or 0))))
  seed_std = [mean_std([c["masked_lm_accuracy"] for c in _final_evals(settings, results, m)])[1]
              for m in settings.models]
  seed_std = [x for x in seed_std if x is not None]
  lines.append("Seed noise: %s.\n" % (
      "largest std over seeds %.2f points" % (100 * max(seed_std)) if seed_std
      else "one seed only, so the noise level is unknown"))
  return lines


def _human_block(report_path):
  """The human-written block of an existing report, markers included, or None.

  Args:
    report_path: the report a previous invocation wrote (may not exist).

  Returns:
    str from JUDGEMENT_BEGIN through JUDGEMENT_END, or None when the file or a marker is missing.
  """
  if not _exists(report_path):
    return None
  with tf.io.gfile.GFile(report_path, "r") as f:
    text = f.read()
  begin = text.find(JUDGEMENT_BEGIN)
  end = text.find(JUDGEMENT_END, begin + 1)
  if begin < 0 or end < 0:
    return None
  return text[begin:end + len(JUDGEMENT_END)]


def _judgement_placeholder(settings, num_steps):
  """The marked TODO block a human replaces with the judgement."""
  tokens = num_steps * settings.train_batch_size * settings.max_seq_length
  return "\n".join([
      JUDGEMENT_BEGIN,
      "**Judgement (to be written by a human after the run; text between the two markers is "
      "kept when the report is rewritten):** _TODO: does the measured ordering and gap agree "
      "with the paper, given the seed noise, the ~%s-fold smaller compute (%d x %d x %d tokens "
      "vs 1M x 512 x 512) and the model size?_" % (
          _fmt_int(1e6 * 512 * 512 / tokens), num_steps, settings.train_batch_size,
          settings.max_seq_length),
      JUDGEMENT_END])


def _judgement_lines(report_path, settings, num_steps):
  """The judgement block: the human's from the earlier report, else the placeholder."""
  judgement = _human_block(report_path)
  if judgement is None:
    judgement = _judgement_placeholder(settings, num_steps)
  return [judgement + "\n"]


def _analysis_report_lines(analysis_dir, out_dir, images):
  """analyze_attention.py's report, its paths and figures renamed, headings demoted a level."""
  with tf.io.gfile.GFile(os.path.join(analysis_dir, "report.md"), "r") as f:
    text = f.read()
  # Its checkpoint and input paths, named as the report names inputs.
  text = portable_text(text, out_dir)
  for name in ANALYSIS_FIGURES:
    text = text.replace("](%s)" % name, "](%s/%s)" % (images, name))
  lines = text.splitlines()
  # Demote the analysis report's headings under this section.
  lines = [("#" + l) if l.startswith("#") else l for l in lines[1:]]
  return ["\n".join(lines), ""]


def _analysis_summary_lines(analysis_dir):
  """The paper's attention findings next to our per-layer entropy and JSD medians."""
  summ = _read_json(os.path.join(analysis_dir, "summary.json"))
  lines = [
      "Paper's findings to compare with (§5): RealFormer's top layers are much sparser (lower "
      "entropy) and its adjacent-layer heads far more similar (most JSD medians < 0.3, Post-LN "
      "mostly 0.4-0.9). Measured median over heads of the per-head median:\n",
      "| model | entropy per layer (bottom..top) | JSD per layer (1..top) |",
      "|---|---|---|",
  ]
  for label in summ["labels"]:
    lines.append("| %s | %s | %s |" % (
        label, ", ".join("%.2f" % v for v in summ["entropy_median_of_heads"][label]),
        ", ".join("%.2f" % v for v in summ["jsd_median_of_heads"][label]) or "n/a"))
  return lines + [""]


def _analysis_lines(analysis_dir, out_dir, images, seed):
  """The attention-analysis section (or a note that the analysis did not run)."""
  lines = ["## Attention analyses (final models, seed %d, held-out data)\n" % seed]
  if not _exists(os.path.join(analysis_dir, "report.md")):
    return lines + ["_The analysis did not run._\n"]
  return (lines + _analysis_report_lines(analysis_dir, out_dir, images) +
          _analysis_summary_lines(analysis_dir))


def write_report(report_path, settings, plan, data_stats, results, analysis_dir,
                 invocation_seconds):
  """Writes the markdown report and its images (<report dir>/reproduction/*.png).

  Inputs are named relative to the repository, as "<output_dir>/..." or by flag (see
  display_path), never by this machine's absolute paths.

  Args:
    report_path: the markdown file.
    settings: Settings (with final_eval_steps).
    plan: plan.json contents.
    data_stats: data_stats.json contents.
    results: {(model, seed): {"train": train summary, "curve": [eval dicts]}}.
    analysis_dir: <output_dir>/analysis.
    invocation_seconds: wall seconds of every invocation so far.
  """
  out_dir = os.path.dirname(analysis_dir)
  images = image_dir_name(report_path)
  write_report_images(os.path.join(os.path.dirname(report_path), images), settings, results,
                      analysis_dir)
  num_steps = plan["num_train_steps"]
  lines = (_header_lines(invocation_seconds) +
           _setup_lines(settings, plan, data_stats, out_dir) +
           _accuracy_lines(settings, results, num_steps) +
           _learning_curve_lines(settings, results, images) +
           _speed_lines(settings, results) +
           _comparison_lines(settings, results, final_accuracies(settings, results), num_steps) +
           _judgement_lines(report_path, settings, num_steps) +
           _analysis_lines(analysis_dir, out_dir, images, settings.seeds[0]))
  with common.atomic_output(report_path) as f:
    f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
