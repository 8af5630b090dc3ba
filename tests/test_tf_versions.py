"""The library and the serving path on the newest TensorFlow (docs/compatibility.md, "Which
TensorFlow").

These tests run in both environments:
- TF 2.15 (`.venv`): the Estimator is there and the scripts do not refuse to run.
- The newest TF (`.venv-tf-latest`, `bash run.sh test-latest`): the training commands train
  there with realformer_tf.tf2_training (tests/test_tf2_training.py, tests/test_run_squad_tf2.py,
  tests/test_run_ner_tf2.py, tests/test_etc_pretraining_tf2.py, ...) and the paper's drivers run
  them (tests/test_paper_drivers_tf2.py), the sweep refusing in one line the --extra_flags only
  the Estimator implements; the tools that need no training loop
  (extract_features, predict_masked, export_hub) give the same outputs as on TF 2.15 from the
  same checkpoint; and SavedModels exported on TF 2.15 load and answer identically. The TF 2.15
  side runs in a subprocess with the interpreter that $REALFORMER_TF215_PYTHON names (run.sh
  sets it).
"""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, last_error_line, run_tool, shared_path, tf215_python
from conftest import tool_env
import convert_hf_checkpoint
from realformer_tf import estimator_utils
import numpy_bert
from test_tf2_training import _side_by_side

NEWEST_TF = not estimator_utils.has_estimator()
CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
          "type_vocab_size": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
          "residual_attention": "sum"}
SENTENCES = ["the captain looked at the old ship .", "she said that she would see him ."]
MASKED = ["the [MASK] of the sea was calm .", "she would [MASK] him tomorrow ."]

# Run by both interpreters as `-c ANSWER_SCRIPT EXPORT_DIRS OUT_FILES SENTENCES...`: the
# SavedModels' answers to SENTENCES as an .npz, for each of the comma-separated export
# directories in the out file at the same place in OUT_FILES (one process for several exports).
ANSWER_SCRIPT = r"""
import sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the preprocessor's ops
sentences = tf.constant(sys.argv[3:])
for export_dir, out_file in zip(sys.argv[1].split(","), sys.argv[2].split(",")):
  preprocessor = tf.saved_model.load(export_dir + "/preprocessor")
  encoder = tf.saved_model.load(export_dir + "/encoder")
  inputs = preprocessor(sentences)
  outputs = encoder(inputs)
  np.savez(out_file, ids=inputs["input_word_ids"].numpy(),
           pooled=outputs["pooled_output"].numpy(), sequence=outputs["sequence_output"].numpy())
"""


# Run by both interpreters: run_classifier's export's answers to SENTENCES (raw text) and to
# fixed int32 features (serving_ids) as an .npz.
CLASSIFIER_ANSWER_SCRIPT = r"""
import sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the raw-text signatures' ops
export_dir, out_file = sys.argv[1], sys.argv[2]
model = tf.saved_model.load(export_dir)
text = model.signatures["serving_default"](sentence=tf.constant(sys.argv[3:]))
ids = np.array([[101, 2009, 2001, 1037, 2204, 3185, 1012, 102] + [0] * 8] * 2, np.int32)
mask = (ids > 0).astype(np.int32)
by_ids = model.signatures["serving_ids"](input_ids=tf.constant(ids), input_mask=tf.constant(mask),
                                         segment_ids=tf.constant(0 * ids))
np.savez(out_file, probabilities=text["probabilities"].numpy(),
         names=text["predicted_label_name"].numpy().astype(str),
         ids_probabilities=by_ids["probabilities"].numpy())
"""


def _tf215_python():
  """The TF 2.15 interpreter, or a skip when this is not the newest-TF run (conftest)."""
  return tf215_python()


def _run(python, script, args, timeout=300):
  """Runs a repository tool (or `-c` code) with `python`; returns the CompletedProcess."""
  cmd = [python] + ([script] if script.startswith("-") else
                    [os.path.join(REPO_DIR, script)]) + [str(a) for a in args]
  result = subprocess.run(cmd, cwd=REPO_DIR, env=tool_env(), capture_output=True, text=True,
                          timeout=timeout)
  assert result.returncode == 0, "%s failed:\n%s" % (" ".join(cmd), result.stderr[-3000:])
  return result


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  """A seeded checkpoint with bert/* and cls/* (written by this test's TF) and its config."""
  directory = tmp_path_factory.mktemp("tf_versions_model")
  params = numpy_bert.random_params(CONFIG, seed=7, with_heads=True)
  convert_hf_checkpoint.write_tf_checkpoint(params, str(directory / "model.ckpt"))
  (directory / "bert_config.json").write_text(json.dumps(CONFIG))
  return directory


@pytest.mark.skipif(not NEWEST_TF, reason="TF 2.15 has the Estimator")
def test_sweep_refuses_estimator_only_extra_flags_in_one_line(model, tmp_path, vocab_file):
  """The drivers run here (tests/test_paper_drivers_tf2.py); what only the Estimator implements
  and the sweep passes to every run is refused once, before any run."""
  out = tmp_path / "sweep"
  result = run_tool("paper/sweep.py", [
      "--tasks=sst-2", "--glue_dir=%s" % os.path.join(REPO_DIR, "tests", "fixtures", "glue"),
      "--init_checkpoint=%s" % (model / "model.ckpt"),
      "--bert_config_file=%s" % (model / "bert_config.json"), "--vocab_file=%s" % vocab_file,
      "--output_dir=%s" % out, "--extra_flags=--iterations_per_loop=10"], expect_rc=2)
  line = last_error_line(result)
  assert line.startswith("error: --extra_flags=--iterations_per_loop=10: --iterations_per_loop=10: "
                         "implemented by the Estimator only (TensorFlow 2.15); -m paper.sweep on "
                         "TF %s" % tf.__version__), line
  assert "bash run.sh python -m paper.sweep" in line and "Traceback" not in result.stderr
  assert not out.exists()


def test_this_tf_is_described():
  """TF 2.15 has the Estimator; the newest TF has not and require_estimator says so."""
  major_minor = tuple(int(x) for x in tf.__version__.split(".")[:2])
  assert estimator_utils.has_estimator() == (major_minor <= (2, 15))


def _compare_tool_outputs(python215, model, tmp_path, tool, args, output_name):
  """Runs `tool` with the same flags under TF 2.15 and here (side by side); returns both
  outputs' text."""
  outputs = [tmp_path / name / output_name for name in ("tf215", "newest")]
  for output in outputs:
    output.parent.mkdir()
  _side_by_side(python215, [os.path.join(REPO_DIR, tool)] + list(args) +
                ["--output_file=%s" % outputs[0]],
                tool, list(args) + ["--output_file=%s" % outputs[1]])
  return [output.read_text() for output in outputs]


def test_extract_features_same_on_both(model, tmp_path, vocab_file):
  python215 = _tf215_python()
  input_file = tmp_path / "input.txt"
  input_file.write_text("\n".join(SENTENCES) + "\n")
  ours, theirs = _compare_tool_outputs(
      python215, model, tmp_path, "extract_features.py",
      ["--input_file=%s" % input_file, "--vocab_file=%s" % vocab_file,
       "--bert_config_file=%s" % (model / "bert_config.json"),
       "--init_checkpoint=%s" % (model / "model.ckpt"), "--max_seq_length=16", "--layers=-1,-2"],
      "features.jsonl")
  old, new = [[json.loads(line) for line in t.splitlines()] for t in (ours, theirs)]
  assert len(old) == len(new) == len(SENTENCES)
  for a, b in zip(old, new):
    assert [f["token"] for f in a["features"]] == [f["token"] for f in b["features"]]
    for fa, fb in zip(a["features"], b["features"]):
      for la, lb in zip(fa["layers"], fb["layers"]):
        np.testing.assert_allclose(la["values"], lb["values"], atol=1e-4)


def test_predict_masked_same_on_both(model, tmp_path, vocab_file):
  python215 = _tf215_python()
  args = ["--vocab_file=%s" % vocab_file, "--bert_config_file=%s" % (model / "bert_config.json"),
          "--init_checkpoint=%s" % (model / "model.ckpt"), "--top_k=5"]
  args += ["--text=%s" % s for s in MASKED]
  old, new = _compare_tool_outputs(python215, model, tmp_path, "predict_masked.py", args,
                                   "masks.jsonl")
  old, new = [[json.loads(line) for line in t.splitlines()] for t in (old, new)]
  assert len(old) == len(new) == len(MASKED)
  for a, b in zip(old, new):
    a_masks, b_masks = a["masks"], b["masks"]
    assert [[c["token"] for c in m["candidates"]] for m in a_masks] == \
        [[c["token"] for c in m["candidates"]] for m in b_masks]
    for ma, mb in zip(a_masks, b_masks):
      np.testing.assert_allclose([c["probability"] for c in ma["candidates"]],
                                 [c["probability"] for c in mb["candidates"]], atol=1e-5)


@pytest.fixture(scope="module")
def hub_exports(model, tmp_path_factory):
  """export_hub.py --mode=encoder,preprocessor of `model` on TF 2.15 and on the newest TF (side
  by side): {"tf215": export dir, "newest": export dir}, each with encoder/ and preprocessor/."""
  python215 = _tf215_python()
  root = tmp_path_factory.mktemp("tf_versions_hub")
  vocab_file = os.path.join(REPO_DIR, "data", "vocab.txt")
  if not os.path.exists(vocab_file):
    vocab_file = shared_path("vocab", "bert_uncased_vocab.txt")
  exports = {"tf215": root / "hub", "newest": root / "hub_new"}
  export_flags = ["--mode=encoder,preprocessor",
                  "--bert_config_file=%s" % (model / "bert_config.json"),
                  "--init_checkpoint=%s" % (model / "model.ckpt"), "--vocab_file=%s" % vocab_file,
                  "--seq_length=16"]
  _side_by_side(python215, [os.path.join(REPO_DIR, "export_hub.py"),
                            "--export_dir=%s" % exports["tf215"]] + export_flags,
                "export_hub.py", ["--export_dir=%s" % exports["newest"]] + export_flags)
  return exports


def test_saved_models_exported_on_tf215_answer_identically(hub_exports, tmp_path):
  """Exported with export_hub.py on TF 2.15; loaded and run by both; equal to 1e-5."""
  python215 = _tf215_python()
  # The TF 2.15 export and the newest TF's of the same model (hub_exports); both TFs answer
  # from the TF 2.15 export, side by side, the newest TF from its own export too.
  export_dir, export_new = hub_exports["tf215"], hub_exports["newest"]
  outs = {name: tmp_path / ("%s.npz" % name) for name in ("tf215", "newest", "newest_export")}
  _side_by_side(python215, ["-c", ANSWER_SCRIPT, export_dir, outs["tf215"]] + SENTENCES,
                None, ["-c", ANSWER_SCRIPT, "%s,%s" % (export_dir, export_new),
                       "%s,%s" % (outs["newest"], outs["newest_export"])] + SENTENCES)
  old, new = np.load(str(outs["tf215"])), np.load(str(outs["newest"]))
  np.testing.assert_array_equal(old["ids"], new["ids"])
  np.testing.assert_allclose(old["pooled"], new["pooled"], atol=1e-5)
  np.testing.assert_allclose(old["sequence"], new["sequence"], atol=1e-5)
  # And the newest TF exports the same model the same way.
  np.testing.assert_allclose(np.load(str(outs["newest_export"]))["sequence"], old["sequence"],
                             atol=1e-5)


def test_classifier_exported_by_run_classifier_on_tf215_answers_identically(model, tmp_path,
                                                                            vocab_file):
  """run_classifier.py --export_dir (TF 2.15, the Estimator) loads on the newest TF and answers
  raw text and serving_ids as on TF 2.15, to 1e-5."""
  python215 = _tf215_python()
  rng = np.random.RandomState(3)
  params = numpy_bert.random_params(CONFIG, seed=7)
  params["output_weights"] = rng.normal(0, 0.5, [2, CONFIG["hidden_size"]]).astype(np.float32)
  params["output_bias"] = rng.normal(0, 0.1, [2]).astype(np.float32)
  checkpoint = str(tmp_path / "classifier" / "model.ckpt")
  convert_hf_checkpoint.write_tf_checkpoint(params, checkpoint)
  export_dir = tmp_path / "export"
  _run(python215, "run_classifier.py",
       ["--task_name=sst-2", "--vocab_file=%s" % vocab_file,
        "--bert_config_file=%s" % (model / "bert_config.json"),
        "--init_checkpoint=%s" % checkpoint, "--output_dir=%s" % (tmp_path / "out"),
        "--max_seq_length=16", "--export_dir=%s" % export_dir])
  # Both TFs answer side by side.
  outs = {name: tmp_path / ("%s_classifier.npz" % name) for name in ("tf215", "newest")}
  _side_by_side(python215, ["-c", CLASSIFIER_ANSWER_SCRIPT, export_dir, outs["tf215"]] + SENTENCES,
                None, ["-c", CLASSIFIER_ANSWER_SCRIPT, export_dir, outs["newest"]] + SENTENCES)
  old, new = np.load(str(outs["tf215"])), np.load(str(outs["newest"]))
  assert old["probabilities"].shape == (len(SENTENCES), 2)
  np.testing.assert_allclose(old["probabilities"], new["probabilities"], atol=1e-5)
  np.testing.assert_allclose(old["ids_probabilities"], new["ids_probabilities"], atol=1e-5)
  assert old["names"].tolist() == new["names"].tolist()
  assert set(new["names"].tolist()) <= {"0", "1"}


def test_saved_model_exported_on_tf215_fails_wrong_requests_on_the_newest_tf(hub_exports):
  """The encoder exported on TF 2.15 (hub_exports), served on the newest TF: a request of the
  wrong dtype, rank or range fails with an error naming the problem (never a silent answer); an
  empty batch answers an empty batch (docs/serving.md, "What the signatures accept")."""
  serve = tf.saved_model.load(str(hub_exports["tf215"] / "encoder")).signatures[
      "serving_default"]
  ids = np.array([[101, 2009, 2001, 102, 0, 0]] * 2, np.int32)
  good = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
          "input_type_ids": 0 * ids}

  def call(**changes):
    return serve(**{k: tf.constant(v) for k, v in dict(good, **changes).items()})

  assert call()["pooled_output"].shape == (2, CONFIG["hidden_size"])
  assert call(**{k: v[:0] for k, v in good.items()})["pooled_output"].shape == (0, 32)
  wrong = [
      (dict((k, v.astype(np.int64)) for k, v in good.items()), "expected to be a int32 tensor"),
      (dict(input_type_ids=good["input_type_ids"] + 2),
       r"input_type_ids must be in \[0, type_vocab_size=2\)"),
      (dict(input_word_ids=good["input_word_ids"] - 1),
       r"input_word_ids must be in \[0, vocab_size=30522\)"),
      (dict((k, np.ones([1, 65], np.int32)) for k in good),
       "the sequence length must be <= max_position_embeddings=64"),
      (dict((k, v[0]) for k, v in good.items()), ""),  # 1-D: TF checks no signature's rank
  ]
  for changes, message in wrong:
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
      call(**changes)


def test_first_operation_prints_no_cuda_start_up_line():
  # Newer TensorFlow prints its CUDA failure when devices are first used, after the import.
  env = dict(tool_env())
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run(
      [sys.executable, "-c", "from realformer_tf import tf_startup\nimport tensorflow as tf\n"
       "import sys\nsys.stderr.write('sum %d\\n' % int(tf.constant(1) + 1))\n"],
      cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  if glob.glob("/dev/nvidia*"):
    pytest.skip("a machine with GPU device nodes keeps TensorFlow's CUDA lines")
  assert result.stderr == "sum 2\n"
