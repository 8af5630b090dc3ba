"""run_classifier: GLUE readers on fixtures in the exact GLUE layouts, features, cache, and tiny
end-to-end train / eval / predict / export runs (subprocesses) for both head types."""

import ast
import importlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, run_tool, shared_path, start_tool
from conftest import last_error_line, write_random_bert_checkpoint
from test_repo import FLAG_READERS, _flag_reads

from realformer_tf import checkpoint_utils
from realformer_tf import classifier_features as cf
from realformer_tf import classifier_outputs as co
from realformer_tf import classifier_tasks as ct
from realformer_tf import common
import convert_hf_checkpoint
from realformer_tf import estimator_utils
from realformer_tf import export_utils
from realformer_tf import feature_cache as fc
from realformer_tf import classifier_model as cm
from realformer_tf import serving
import modeling
import run_classifier as rc
import tokenization
from realformer_tf import training_eval as te

FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "glue")

GLUE_DIRS = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B", "qqp": "QQP",
             "mnli": "MNLI", "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}


def _read(task_name, file_name, split):
  task = ct.get_task(task_name)
  task_file = {f.file_name: f for f in [task.train] + task.dev + task.test}[file_name]
  return ct.read_examples(task, task_file, os.path.join(FIXTURES, GLUE_DIRS[task_name]), split)


# (task, file, split, examples, skipped, first text_a prefix, first text_b prefix, labels)
READER_CASES = [
    ("cola", "train.tsv", "train", 5, 0, "Our friends won't buy", None, ["1", "1", "0", "1", "0"]),
    ("cola", "dev.tsv", "dev", 3, 0, "The sailors rode", None, ["1", "0", "1"]),
    ("cola", "test.tsv", "test", 2, 0, "Bill whistled past", None, [None, None]),
    ("sst-2", "train.tsv", "train", 8, 0, "hide new secretions", None,
     ["0", "0", "1", "0", "1", "1", "1", "0"]),
    ("sst-2", "dev.tsv", "dev", 5, 0, "it 's a charming", None, ["1", "0", "1", "1", "0"]),
    ("sst-2", "test.tsv", "test", 3, 0, "uneasy mishmash", None, [None] * 3),
    ("mrpc", "train.tsv", "train", 3, 0, "Amrozi accused his brother , whom he called \" the",
     "Referring to him as only \" the witness \"", ["1", "0", "1"]),
    ("mrpc", "dev.tsv", "dev", 2, 0, "He said the foodservice", "\" The foodservice pie",
     ["1", "0"]),
    ("mrpc", "test.tsv", "test", 2, 0, "PCCW 's chief", "Current Chief Operating", [None] * 2),
    ("sts-b", "train.tsv", "train", 8, 0, "A plane is taking off.", "An air plane is taking",
     [5.0, 3.8, 3.8, 2.6, 4.25, 4.25, 0.5, 1.6]),
    ("sts-b", "dev.tsv", "dev", 4, 0, "A man with a hard hat", "A man wearing a hard hat",
     [5.0, 4.75, 5.0, 2.4]),
    ("sts-b", "test.tsv", "test", 2, 0, "A girl is styling", "A girl is brushing", [None] * 2),
    ("qqp", "train.tsv", "train", 3, 2, "How is the life of a math student?",
     "Which level of prepration", ["0", "1", "1"]),
    ("qqp", "dev.tsv", "dev", 3, 0, "How can I be a good geologist?", "What should I do",
     ["1", "1", "0"]),
    ("qqp", "test.tsv", "test", 2, 0, "How does the Surface Pro", "Why did Microsoft",
     [None] * 2),
    ("mnli", "train.tsv", "train", 9, 0, "Conceptually cream skimming", "Product and geography",
     ["neutral", "entailment", "entailment", "entailment", "neutral", "entailment", "neutral",
      "entailment", "contradiction"]),
    ("mnli", "dev_matched.tsv", "dev", 3, 0, "The new rights are nice enough",
     "Everyone really likes", ["neutral", "contradiction", "entailment"]),
    ("mnli", "dev_mismatched.tsv", "dev", 2, 0, "Your contribution helped",
     "Your contributions were of no help", ["contradiction", "contradiction"]),
    ("mnli", "test_matched.tsv", "test", 2, 0, "Hierbas, ans seco", "Hierbas is a name",
     [None] * 2),
    ("mnli", "test_mismatched.tsv", "test", 1, 0, "What we have here", "This is a common one",
     [None]),
    ("qnli", "train.tsv", "train", 3, 0, "When did the third Digimon", "Unlike the two seasons",
     ["not_entailment", "not_entailment", "entailment"]),
    ("qnli", "dev.tsv", "dev", 2, 0, "What came into force", "As of that day",
     ["entailment", "not_entailment"]),
    ("qnli", "test.tsv", "test", 1, 0, "What organization is devoted", "For some decades",
     [None]),
    ("rte", "train.tsv", "train", 3, 0, "No Weapons of Mass Destruction Found",
     "Weapons of Mass Destruction Found", ["not_entailment", "entailment", "entailment"]),
    ("rte", "dev.tsv", "dev", 2, 0, "Dana Reeve", "Christopher Reeve had",
     ["not_entailment", "entailment"]),
    ("rte", "test.tsv", "test", 1, 0, "Mangla was summoned", "Shukla is related", [None]),
    ("wnli", "train.tsv", "train", 4, 0, "I stuck a pin", "The carrot had a hole.",
     ["1", "1", "1", "0"]),
    ("wnli", "dev.tsv", "dev", 2, 0, "The drain is clogged", "The hair has to be cleaned.",
     ["0", "1"]),
    ("wnli", "test.tsv", "test", 1, 0, "Maude and Dora", "Horses ran away", [None]),
]


@pytest.mark.parametrize("case", READER_CASES, ids=lambda c: "%s-%s" % (c[0], c[1]))
def test_glue_readers(case):
  task_name, file_name, split, count, skipped, text_a, text_b, labels = case
  examples, stats = _read(task_name, file_name, split)
  assert len(examples) == count
  assert stats.skipped_columns == skipped
  assert examples[0].text_a.startswith(text_a)
  if text_b is None:
    assert all(e.text_b is None for e in examples)
  else:
    assert examples[0].text_b.startswith(text_b)
  assert [e.label for e in examples] == labels
  assert [e.guid for e in examples] == ["%s-%d" % (split, i) for i in range(count)]
  if split == "test":
    # Submission indices come from the test file's index / id column.
    assert [e.index for e in examples] == [str(i) for i in range(count)]


def test_reader_keeps_quotes_and_trailing_space():
  # Fields are not quoted in GLUE: a leading '"' is text, and SST-2's trailing space is kept.
  examples, _ = _read("sst-2", "train.tsv", "train")
  assert examples[4].text_a == "\"the greatest musicians "
  examples, _ = _read("sst-2", "test.tsv", "test")
  assert examples[2].text_a == "\"a sometimes tedious film ."


def test_qqp_malformed_lines_are_skipped_and_counted():
  examples, stats = _read("qqp", "train.tsv", "train")
  assert stats.skipped_columns == 2
  assert stats.first_skipped_lines == [4, 5]
  assert stats.rows == 5
  assert [e.text_a for e in examples][2] == "What can one do after MBBS?"


def test_mnli_columns_and_labels():
  task = ct.get_task("MNLI")
  assert task.labels == ["contradiction", "entailment", "neutral"]
  assert [f.file_name for f in task.dev] == ["dev_matched.tsv", "dev_mismatched.tsv"]
  assert [f.name for f in task.test] == ["MNLI-m.tsv", "MNLI-mm.tsv"]
  with open(os.path.join(FIXTURES, "MNLI", "dev_matched.tsv")) as f:
    lines = f.read().splitlines()
  assert [len(line.split("\t")) for line in lines] == [16] * 4
  examples, _ = _read("mnli", "dev_matched.tsv", "dev")
  # The gold label is the last column, not label1 (which is "neutral" in the second row).
  assert lines[2].split("\t")[10] == "neutral"
  assert examples[1].label == "contradiction"


def test_bad_label_names_file_and_line(tmp_path):
  shutil.copy(os.path.join(FIXTURES, "SST-2", "train.tsv"), tmp_path / "train.tsv")
  lines = (tmp_path / "train.tsv").read_text().splitlines(True)
  lines[3] = "a fine film\tpositive\n"
  (tmp_path / "train.tsv").write_text("".join(lines))
  task = ct.get_task("sst-2")
  with pytest.raises(common.UsageError) as e:
    ct.read_examples(task, task.train, str(tmp_path), "train")
  message = str(e.value)
  assert "train.tsv:4:" in message and "'positive'" in message and "\n" not in message


def test_bad_regression_label_and_wrong_header(tmp_path):
  src = os.path.join(FIXTURES, "STS-B", "train.tsv")
  lines = open(src).read().splitlines(True)
  lines[2] = lines[2].rsplit("\t", 1)[0] + "\thigh\n"
  (tmp_path / "train.tsv").write_text("".join(lines))
  task = ct.get_task("sts-b")
  with pytest.raises(common.UsageError, match=r"train\.tsv:3: label 'high' is not a number"):
    ct.read_examples(task, task.train, str(tmp_path), "train")
  # An MNLI dev file given where train.tsv (12 columns) is expected.
  shutil.copy(os.path.join(FIXTURES, "MNLI", "dev_matched.tsv"), tmp_path / "train.tsv")
  task = ct.get_task("mnli")
  with pytest.raises(common.UsageError, match=r"header has 16 column\(s\).*has 12"):
    ct.read_examples(task, task.train, str(tmp_path), "train")


def test_unknown_task_is_one_line_error():
  with pytest.raises(common.UsageError, match="--task_name=superglue: unknown task"):
    ct.get_task("superglue")
  assert ct.get_task("XNLI").processor.language == "zh"  # the official script's XNLI task
  assert ct.get_task("SST2").name == "sst-2"
  assert ct.get_task("STS-B").is_regression


def test_tsv_task_by_name_and_index(tmp_path):
  (tmp_path / "train.tsv").write_text(
      "id\tquestion\tanswer\tlabel\n1\tq one\ta one\tyes\n2\tq two\ta two\tno\n"
      "3\tq three\ta three\tmaybe\n4\tbroken\n")
  (tmp_path / "test.tsv").write_text("id\tquestion\tanswer\n7\tq\ta\n8\tr\tb\n")
  task = ct.make_tsv_task("question", "answer", "label", has_header=True)
  assert ct.resolve_tsv_labels(task, str(tmp_path), str(tmp_path)) == ["maybe", "no", "yes"]
  examples, stats = ct.read_examples(task, task.train, str(tmp_path), "train")
  assert [(e.text_a, e.text_b, e.label) for e in examples] == [
      ("q one", "a one", "yes"), ("q two", "a two", "no"), ("q three", "a three", "maybe")]
  assert stats.skipped_columns == 1
  examples, _ = ct.read_examples(task, task.test[0], str(tmp_path), "test")
  assert [(e.text_a, e.index) for e in examples] == [("q", "0"), ("r", "1")]
  # No header: 0-based indices; regression.
  (tmp_path / "train.tsv").write_text("0.5\tfirst text\n-1.25\tsecond text\n")
  task = ct.make_tsv_task("1", None, "0", has_header=False, task_type="regression")
  examples, _ = ct.read_examples(task, task.train, str(tmp_path), "train")
  assert [(e.text_a, e.label) for e in examples] == [("first text", 0.5),
                                                      ("second text", -1.25)]
  with pytest.raises(common.UsageError, match="--text_a_column=question: a column name needs"):
    ct.make_tsv_task("question", None, "0", has_header=False)


def test_convert_single_example_matches_official_layout(vocab_file):
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  vocab = tokenization.load_vocab(vocab_file)
  example = rc.InputExample("dev-0", "The cat sat.", "A dog ran away quickly", label="1")
  feature = rc.convert_single_example(9, example, {"0": 0, "1": 1}, 10, tokenizer)
  # Room for 10 - 3 = 7 tokens: a = "the cat sat ." (4), b = "a dog ran away quickly" (5);
  # the longer one loses its last token, b on ties: (4, 5) -> (4, 4) -> (4, 3).
  tokens = ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "a", "dog", "ran", "[SEP]"]
  assert feature.input_ids == [vocab[t] for t in tokens]
  assert feature.segment_ids == [0] * 6 + [1] * 4
  assert feature.input_mask == [1] * 10
  assert feature.label_id == 1
  single = rc.convert_single_example(9, rc.InputExample("x", "Hello"), None, 6, tokenizer)
  assert single.input_ids == [vocab["[CLS]"], vocab["hello"], vocab["[SEP]"], 0, 0, 0]
  assert single.input_mask == [1, 1, 1, 0, 0, 0]
  assert single.label_id == 0.0  # test example without a label (regression dummy)
  pad = rc.convert_single_example(0, rc.PaddingInputExample(), {"0": 0}, 4, tokenizer)
  assert (pad.input_ids, pad.is_real_example) == ([0] * 4, False)


def test_feature_cache_key_changes(tmp_path, vocab_file):
  data = tmp_path / "train.tsv"
  data.write_text("sentence\tlabel\nfine\t1\n")
  task = ct.get_task("sst-2")
  base = fc.feature_cache_key(str(data), vocab_file, True, 128, task, task.labels, None)[1]
  assert base == fc.feature_cache_key(str(data), vocab_file, True, 128, task, task.labels,
                                      None)[1]
  assert base != fc.feature_cache_key(str(data), vocab_file, True, 64, task, task.labels,
                                      None)[1]
  assert base != fc.feature_cache_key(str(data), vocab_file, False, 128, task, task.labels,
                                      None)[1]
  assert base != fc.feature_cache_key(str(data), vocab_file, True, 128, ct.get_task("cola"),
                                      task.labels, None)[1]
  assert base != fc.feature_cache_key(str(data), vocab_file, True, 128, task, ["1", "0"],
                                      None)[1]
  data.write_text("sentence\tlabel\nfine!\t1\n")  # size changes
  assert base != fc.feature_cache_key(str(data), vocab_file, True, 128, task, task.labels,
                                      None)[1]


def test_submission_formatting(tmp_path):
  sts = ct.get_task("sts-b")
  assert co.format_prediction(sts, {"predictions": 5.7}) == "5.000"
  assert co.format_prediction(sts, {"predictions": -0.2}) == "0.000"
  assert co.format_prediction(sts, {"predictions": 3.14159}) == "3.142"
  mnli = ct.get_task("mnli")
  assert co.format_prediction(mnli, {"probabilities": np.array([0.1, 0.2, 0.7])}) == "neutral"
  examples = [rc.InputExample("test-0", "a", index="0"), rc.InputExample("test-1", "b",
                                                                          index="1")]
  path = str(tmp_path / "MNLI-m.tsv")
  co.write_submission(path, mnli, examples, [{"probabilities": [0.9, 0.05, 0.05]},
                                             {"probabilities": [0.1, 0.8, 0.1]}])
  assert open(path).read() == "index\tprediction\n0\tcontradiction\n1\tentailment\n"


# ----------------------------------------------------------------------------------------------
# End-to-end runs (subprocesses, a tiny BERT).

TINY_CONFIG = TINY_BERT_CONFIG


def _run(args, expect_rc=0):
  """run_classifier.py with `args` (conftest.run_tool); returns stdout + stderr."""
  return run_tool("run_classifier.py", args, expect_rc=expect_rc).output


def _random_init_checkpoint(path, config_file):
  """A random BERT checkpoint (bert/* variables only), as a pre-trained one would be."""
  return write_random_bert_checkpoint(config_file, path)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
  root = tmp_path_factory.mktemp("tiny_bert")
  config_file = str(root / "bert_config.json")
  with open(config_file, "w") as f:
    json.dump(TINY_CONFIG, f)
  checkpoint = _random_init_checkpoint(str(root / "bert_model.ckpt"), config_file)
  return config_file, checkpoint


def _common_args(task, data, config_file, output_dir, vocab_file, seq=32):
  return ["--task_name=%s" % task, "--data_dir=%s" % data, "--vocab_file=%s" % vocab_file,
          "--bert_config_file=%s" % config_file, "--output_dir=%s" % output_dir,
          "--max_seq_length=%d" % seq, "--train_batch_size=4", "--eval_batch_size=3",
          "--predict_batch_size=2", "--learning_rate=1e-3", "--num_train_epochs=2"]


# Run in a fresh TF2 process: calls signatures of exported SavedModels, prints the outputs.
SERVE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # registers the raw-text signatures' ops
    loaded, results = {}, {}
    for name, (export_dir, signature, inputs) in json.load(open(sys.argv[1])).items():
      if export_dir not in loaded:
        loaded[export_dir] = tf.saved_model.load(export_dir)
      args = {k: tf.constant(v) if k.startswith("sentence") else
                 tf.constant(np.array(v, np.int32)) for k, v in inputs.items()}
      out = loaded[export_dir].signatures[signature](**args)
      results[name] = {k: v.numpy().tolist() for k, v in out.items()}
    print("RESULT " + json.dumps(results, default=lambda b: b.decode("utf-8")))
""")


def _serve(tmp_path, calls):
  """Calls exported signatures in a fresh TF2 process.

  Args:
    tmp_path: where the calls file goes.
    calls: {name: (export_dir, signature name, {input name: list})}; inputs named sentence*
      are strings, the others int32.

  Returns:
    {name: {output name: numpy array (strings decoded)}}.
  """
  calls_file = tmp_path / "serve_calls.json"
  calls_file.write_text(json.dumps({k: [str(v[0]), v[1], v[2]] for k, v in calls.items()}))
  proc = run_tool(None, ["-c", SERVE_SCRIPT, calls_file], timeout=180)
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return {name: {k: np.array(v) for k, v in outputs.items()}
          for name, outputs in json.loads(line[len("RESULT "):]).items()}


def _record_features(record, seq):
  """The int32 features of a run_classifier TFRecord: {input_ids, input_mask, segment_ids}."""
  spec = {k: tf.io.FixedLenFeature([seq], tf.int64) for k in serving.ID_INPUTS}
  rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(str(record))]
  return {k: [row[k].numpy().tolist() for row in rows] for k in spec}


def _former_integer_export(config_file, checkpoint, export_dir, seq, num_labels,
                           is_regression=False):
  """The integer-only SavedModel run_classifier exported before (the reference of serving_ids)."""
  config = modeling.BertConfig.from_json_file(str(config_file))
  specs = {name: (tf.int32, [None, seq]) for name in serving.ID_INPUTS}
  export_utils.export_saved_model(
      cm.serving_build_fn(config, num_labels, is_regression), str(checkpoint), str(export_dir),
      specs, bert_config=config)
  return export_dir


def _test_texts(task_name, split="test"):
  """(text_a list, text_b list or None) of a GLUE fixture split, as run_classifier reads it."""
  task = ct.get_task(task_name)
  task_file = {"test": task.test[0], "dev": task.dev[0], "train": task.train}[split]
  examples = ct.task_examples(task, task_file, os.path.join(FIXTURES, GLUE_DIRS[task_name]),
                              split)
  texts_b = [e.text_b for e in examples]
  return [e.text_a for e in examples], (None if texts_b[0] is None else texts_b)


def _read_floats(path):
  with open(path) as f:
    return np.array([[float(x) for x in line.split("\t")] for line in f.read().splitlines()])


@pytest.mark.slow
def test_classification_train_eval_predict_export(tmp_path, tiny_model, vocab_file):
  config_file, checkpoint = tiny_model
  out = tmp_path / "out"
  export = tmp_path / "export"
  data = os.path.join(FIXTURES, "SST-2")
  log = _run(_common_args("sst-2", data, config_file, out, vocab_file) + [
      "--init_checkpoint=%s" % checkpoint, "--do_train", "--do_eval", "--do_predict",
      "--export_dir=%s" % export, "--save_checkpoints_steps=100"])
  assert "init_checkpoint %s: " % checkpoint in log
  assert "train: step 4/4" in log  # ProgressHook: 8 examples / 4 * 2 epochs
  results = json.loads((out / "eval_results.json").read_text())
  assert set(results) >= {"eval_accuracy", "eval_loss", "global_step", "eval_num_examples"}
  assert results["global_step"] == 4 and results["eval_num_examples"] == 5
  assert results["num_train_steps"] == 4  # the target, beside the step reached
  assert "eval_accuracy = " in (out / "eval_results.txt").read_text()
  # Which checkpoint produced the results: the trained one (not --init_checkpoint); beside the
  # official-format files in <file>.checkpoint.json.
  record = {"checkpoint": str(out / "model.ckpt-4"), "global_step": 4}
  assert (results["checkpoint"], results["checkpoint_step"]) == tuple(record.values())
  for name in ("SST-2.tsv", "test_results.tsv"):
    assert json.loads((out / (name + ".checkpoint.json")).read_text()) == record, name
  lines = (out / "SST-2.tsv").read_text().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 4
  assert [l.split("\t")[0] for l in lines[1:]] == ["0", "1", "2"]
  assert all(l.split("\t")[1] in ("0", "1") for l in lines[1:])
  estimator_probs = _read_floats(str(out / "test_results.tsv"))
  assert estimator_probs.shape == (3, 2)
  assert (export / "labels.txt").read_text() == "0\n1\n"
  assert json.loads((export / "bert_config.json").read_text())["hidden_size"] == 32
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]

  # The export, loaded in a fresh TF2 process: raw text (serving_default, the tokenizer in the
  # graph) and the features (serving_ids) give Estimator.predict's outputs, and serving_ids
  # gives the former integer-only export's.
  assert {"classifier_config.json", "vocab.txt", serving.EXPORT_INFO} <= set(os.listdir(export))
  config = json.loads((export / "classifier_config.json").read_text())
  assert config["signatures"]["serving_default"] == ["sentence"]
  assert config["outputs"] == ["probabilities", "predicted_label"]
  info = json.loads((export / serving.EXPORT_INFO).read_text())
  assert (info["checkpoint"], info["seq_length"], info["padding"]) == (
      str(out / "model.ckpt-4"), 32, "bucket")
  former = _former_integer_export(config_file, out / "model.ckpt-4", tmp_path / "former", 32, 2)
  features = _record_features(out / "predict.tf_record", 32)
  texts, _ = _test_texts("sst-2")
  served = _serve(tmp_path, {
      "text": (export, "serving_default", {"sentence": texts}),
      "ids": (export, "serving_ids", features),
      "former": (former, "serving_default", features)})
  for name in ("text", "ids", "former"):
    np.testing.assert_allclose(served[name]["probabilities"], estimator_probs, atol=1e-5)
  np.testing.assert_allclose(served["ids"]["probabilities"], served["former"]["probabilities"],
                             atol=1e-6)
  assert set(served["ids"]) == set(served["former"]) == {"probabilities", "predicted_label"}
  assert served["ids"]["predicted_label"].tolist() == np.argmax(estimator_probs, axis=1).tolist()
  assert served["former"]["predicted_label"].tolist() == served["ids"]["predicted_label"].tolist()
  assert [l.split("\t")[1] for l in lines[1:]] == served["text"]["predicted_label_name"].tolist()
  assert served["text"]["label_names"].tolist() == [["0", "1"]] * 3

  # Second run: the cached dev features are reused; a new max_seq_length rebuilds them.
  eval_record = out / "eval.tf_record"
  mtime = eval_record.stat().st_mtime_ns
  log = _run(_common_args("sst-2", data, config_file, out, vocab_file) + ["--do_eval"])
  assert "Reusing cached features %s" % eval_record in log
  # No training in this run: no training target in its results.
  assert "num_train_steps" not in json.loads((out / "eval_results.json").read_text())
  assert eval_record.stat().st_mtime_ns == mtime
  assert json.loads((out / "eval_results.json").read_text())["eval_loss"] == pytest.approx(
      results["eval_loss"], abs=1e-6)
  log = _run(_common_args("sst-2", data, config_file, out, vocab_file, seq=24) + ["--do_eval"])
  assert "Writing features to %s (inputs changed: max_seq_length)" % eval_record in log
  meta = json.loads((out / "eval.tf_record.json").read_text())
  assert meta["inputs"]["max_seq_length"] == 24
  assert eval_record.stat().st_mtime_ns != mtime


@pytest.mark.slow
def test_regression_train_eval_predict_export(tmp_path, tiny_model, vocab_file):
  config_file, _ = tiny_model
  out = tmp_path / "out"
  export = tmp_path / "export"
  data = os.path.join(FIXTURES, "STS-B")
  _run(_common_args("sts-b", data, config_file, out, vocab_file) + [
      "--do_train", "--do_eval", "--do_predict", "--export_dir=%s" % export,
      "--residual_attention=sum"])
  assert json.loads((out / "bert_config.json").read_text())["residual_attention"] == "sum"
  results = json.loads((out / "eval_results.json").read_text())
  assert set(results) >= {"eval_pearson", "eval_spearman", "eval_loss", "global_step"}
  assert results["global_step"] == 4 and results["num_train_steps"] == 4
  assert -1.0 <= results["eval_pearson"] <= 1.0
  lines = (out / "STS-B.tsv").read_text().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 3
  raw = _read_floats(str(out / "test_results.tsv"))[:, 0]
  for line, value in zip(lines[1:], raw):
    shown = float(line.split("\t")[1])
    assert 0.0 <= shown <= 5.0 and line.split("\t")[1] == "%.3f" % min(5.0, max(0.0, value))
  assert not (export / "labels.txt").exists()
  # A pair task: serving_default takes sentence and sentence2.
  texts_a, texts_b = _test_texts("sts-b")
  features = _record_features(out / "predict.tf_record", 32)
  former = _former_integer_export(config_file, tf.train.latest_checkpoint(str(out)),
                                  tmp_path / "former", 32, 1, is_regression=True)
  served = _serve(tmp_path, {
      "text": (export, "serving_default", {"sentence": texts_a, "sentence2": texts_b}),
      "pair": (export, "serving_pair", {"sentence": texts_a, "sentence2": texts_b}),
      "ids": (export, "serving_ids", features),
      "former": (former, "serving_default", features)})
  for name in ("text", "pair", "ids", "former"):
    assert set(served[name]) == {"predictions"}, name
    np.testing.assert_allclose(served[name]["predictions"], raw, atol=1e-5)
  np.testing.assert_allclose(served["ids"]["predictions"], served["former"]["predictions"],
                             atol=1e-6)
  config = json.loads((export / "classifier_config.json").read_text())
  assert config["signatures"]["serving_default"] == ["sentence", "sentence2"]
  assert config["outputs"] == ["predictions"] and config["is_regression"]


@pytest.mark.slow
def test_mnli_eval_both_dev_sets_and_predict(tmp_path, tiny_model, vocab_file):
  config_file, checkpoint = tiny_model
  out = tmp_path / "out"
  _run(_common_args("mnli", os.path.join(FIXTURES, "MNLI"), config_file, out, vocab_file) + [
      "--do_eval", "--do_predict", "--init_checkpoint=%s" % checkpoint])
  results = json.loads((out / "eval_results.json").read_text())
  # No checkpoint in --output_dir: scored from --init_checkpoint, and the results say so.
  record = {"checkpoint": checkpoint, "global_step": None}
  assert (results["checkpoint"], results["checkpoint_step"]) == (checkpoint, None)
  sidecars = sorted(p for p in os.listdir(out) if p.endswith(".checkpoint.json"))
  assert sidecars == ["MNLI-m.tsv.checkpoint.json", "MNLI-mm.tsv.checkpoint.json",
                      "test_results.tsv.checkpoint.json",
                      "test_results_mismatched.tsv.checkpoint.json"]
  for name in sidecars:
    assert json.loads((out / name).read_text()) == record, name
  assert results["eval_num_examples"] == 3 and results["eval_mismatched_num_examples"] == 2
  assert results["eval_matched_accuracy"] == results["eval_accuracy"]
  assert "eval_mismatched_accuracy" in results and "eval_mismatched_loss" in results
  matched = (out / "MNLI-m.tsv").read_text().splitlines()
  mismatched = (out / "MNLI-mm.tsv").read_text().splitlines()
  assert len(matched) == 3 and len(mismatched) == 2
  labels = {"contradiction", "entailment", "neutral"}
  assert all(l.split("\t")[1] in labels for l in matched[1:] + mismatched[1:])


def test_one_line_errors(tmp_path, tiny_model, vocab_file):
  config_file, _ = tiny_model
  data = tmp_path / "data"
  data.mkdir()
  shutil.copy(os.path.join(FIXTURES, "SST-2", "train.tsv"), data / "train.tsv")
  out = _run(_common_args("sst-2", data, config_file, tmp_path / "out", vocab_file) +
             ["--do_train", "--do_eval"], expect_rc=2)
  assert "error: --data_dir=%s: has no dev.tsv (needed by --do_eval for task sst-2)" % data in out
  assert "Traceback" not in out


def test_crlf_line_ends_and_blank_lines(tmp_path):
  (tmp_path / "dev.tsv").write_bytes(b"sentence\tlabel\r\ngood \xff film\t1\r\n\r\nbad\t0")
  task = ct.get_task("sst-2")
  examples, stats = ct.read_examples(task, task.dev[0], str(tmp_path), "dev")
  assert [(e.text_a, e.label) for e in examples] == [("good  film", "1"), ("bad", "0")]
  assert (stats.blank, stats.skipped_columns) == (1, 0)


@pytest.mark.slow
def test_own_tsv_pair_task_end_to_end(tmp_path, tiny_model, vocab_file):
  """--task_name=tsv: columns named by header, a sentence pair, string labels, predictions.tsv."""
  config_file, checkpoint = tiny_model
  data = tmp_path / "data"
  data.mkdir()
  rows = [("the film was great", "i loved it", "yes"), ("a dull mess", "i loved it", "no"),
          ("superb acting", "worth seeing", "yes"), ("boring plot", "worth seeing", "no")]
  header = "id\tpremise\thypothesis\tverdict\n"
  for name, subset in (("train.tsv", rows), ("dev.tsv", rows[:3])):
    (data / name).write_text(header + "".join(
        "%d\t%s\t%s\t%s\n" % (i, a, b, y) for i, (a, b, y) in enumerate(subset)))
  (data / "test.tsv").write_text(header + "7\tgreat fun\tgo see it\t\n")
  out, export = tmp_path / "out", tmp_path / "export"
  _run(_common_args("tsv", str(data), config_file, out, vocab_file) + [
      "--init_checkpoint=%s" % checkpoint, "--text_a_column=premise",
      "--text_b_column=hypothesis", "--label_column=verdict", "--do_train", "--do_eval",
      "--do_predict", "--export_dir=%s" % export])
  results = json.loads((out / "eval_results.json").read_text())
  assert results["eval_num_examples"] == 3 and 0.0 <= results["eval_accuracy"] <= 1.0
  lines = (out / "predictions.tsv").read_text().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 2
  assert lines[1].split("\t")[1] in ("no", "yes")
  # The export of a pair task: serving_default takes both texts, answers by label name.
  served = _serve(tmp_path, {
      "default": (export, "serving_default", {"sentence": ["great fun"],
                                              "sentence2": ["go see it"]}),
      "single": (export, "serving_single", {"sentence": ["great fun"]})})
  np.testing.assert_allclose(served["default"]["probabilities"],
                             _read_floats(str(out / "test_results.tsv")), atol=1e-5)
  assert served["default"]["predicted_label_name"].tolist() == [lines[1].split("\t")[1]]
  assert served["single"]["label_names"].tolist() == [["no", "yes"]]
  config = json.loads((export / "classifier_config.json").read_text())
  assert config["signatures"]["serving_default"] == ["sentence", "sentence2"]
  assert json.loads((export / serving.EXPORT_INFO).read_text())["pair_input"] is True
  # A label outside the train labels is an error naming the file and line, before training.
  (data / "dev.tsv").write_text(header + "0\ta\tb\tmaybe\n")
  out2 = tmp_path / "out2"
  log = _run(_common_args("tsv", str(data), config_file, out2, vocab_file) + [
      "--text_a_column=premise", "--text_b_column=hypothesis", "--label_column=verdict",
      "--init_checkpoint=%s" % checkpoint, "--do_train", "--do_eval"], expect_rc=2)
  assert "dev.tsv:2" in log and "maybe" in log
  # Nothing written: the output directory lock removes the directory it made.
  assert not out2.exists()


def _sentencepiece_model(tmp_path):
  """A small SentencePiece model with BERT's special pieces (as build_vocab.py writes)."""
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("\n".join("the quick brown fox jumps over the lazy dog %d times ." % i
                               for i in range(200)))
  model = str(tmp_path / "spm.model")
  spm.SentencePieceTrainer.train(
      input=str(corpus), model_prefix=model[:-len(".model")], vocab_size=60,
      pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]", unk_piece="[UNK]",
      control_symbols=["[CLS]", "[SEP]", "[MASK]"], character_coverage=1.0, minloglevel=2,
      num_threads=1)
  return model


@pytest.mark.slow
def test_export_of_a_windowed_pair_task_with_sentencepiece(tmp_path):
  """--long_document=window on a pair task, tokenised by SentencePiece: the raw-text signature
  windows and max-pools in the graph as run_classifier's prediction does (its windows, the
  model's logits, classifier_outputs.pool_window_outputs); serving_ids scores one window."""
  seq, stride = 16, 3
  config = modeling.BertConfig.from_dict(TINY_CONFIG)
  task = ct.get_task("mrpc")
  model = _sentencepiece_model(tmp_path)
  tokenizer = tokenization.FullTokenizer(None, True, spm_model_file=model)
  texts_a = ["the quick brown fox jumps over the lazy dog 7 times . " * 3, "the dog", ""]
  texts_b = ["the lazy dog", "", "fox " * 20]
  features, windows = [], []
  for i, (a, b) in enumerate(zip(texts_a, texts_b)):
    example = rc.InputExample("x-%d" % i, a, b, label="0")
    doc = cf.convert_example_to_windows(i, example, {"0": 0, "1": 1}, seq, tokenizer, stride)
    features.extend(doc)
    windows.append(len(doc))
  assert windows[0] > 3 and windows[1:] == [1, 1]
  ids = {name: np.array([getattr(f, name) for f in features], np.int32)
         for name in serving.ID_INPUTS}
  # A run_classifier checkpoint and the Estimator's logits of every window.
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(5)
    ph = {name: tf.compat.v1.placeholder(tf.int32, [None, seq]) for name in serving.ID_INPUTS}
    _, _, logits, _ = cm.create_model(config, False, ph["input_ids"], ph["input_mask"],
                                      ph["segment_ids"], None, 2, False)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      window_logits = sess.run(logits, {ph[k]: v for k, v in ids.items()})
      prefix = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "out" / "model.ckpt"))
  pooled = co.pool_window_outputs(
      task, [{"logits": l, "label_ids": 0, "is_real_example": True} for l in window_logits],
      windows, pooling="max")
  export = tmp_path / "export"
  cm.export_classifier(task, config, str(export), prefix, seq, spm_model_file=model,
                       doc_stride=stride, window_pooling="max")
  loaded = tf.saved_model.load(str(export))
  text = loaded.signatures["serving_default"](sentence=tf.constant(texts_a),
                                              sentence2=tf.constant(texts_b))
  np.testing.assert_allclose(text["probabilities"].numpy(),
                             [p["probabilities"] for p in pooled], atol=1e-5)
  one_window = loaded.signatures["serving_ids"](**{k: tf.constant(v) for k, v in ids.items()})
  np.testing.assert_allclose(one_window["probabilities"].numpy(),
                             tf.nn.softmax(window_logits).numpy(), atol=1e-5)
  # Beside the SavedModel: the SentencePiece model (no vocab.txt), the windowing.
  assert (export / "spm.model").read_bytes() == open(model, "rb").read()
  assert not (export / "vocab.txt").exists()
  exported = json.loads((export / "classifier_config.json").read_text())
  assert exported["spm_model_file"] == "spm.model"
  assert exported["signatures"]["serving_default"] == ["sentence", "sentence2"]
  assert (exported["doc_stride"], exported["window_pooling"]) == (stride, "max")
  info = json.loads((export / serving.EXPORT_INFO).read_text())
  assert (info["long_document"], info["doc_stride"], info["window_pooling"]) == (
      "window", stride, "max")


def _readme_block(language, must_contain):
  """The one ```language block of README.md that contains every string of must_contain."""
  with open(os.path.join(REPO_DIR, "README.md")) as f:
    blocks = re.findall(r"```%s\n(.*?)```" % language, f.read(), re.S)
  found = [b for b in blocks if all(text in b for text in must_contain)]
  assert len(found) == 1, "README.md: %d %s blocks with %s" % (len(found), language,
                                                                must_contain)
  return found[0]


@pytest.mark.slow
def test_readme_raw_text_example_runs_as_written(tmp_path, tiny_model, vocab_file):
  """README "Your own data": its run_classifier command (plus sizes for the tiny model) makes
  the export its Python lines load; those lines, verbatim, answer in a fresh TF process."""
  python = _readme_block("python", ['signatures["serving_default"]', "predicted_label_name"])
  command = _readme_block("bash", ["run_classifier.py", "--export_dir="])
  words = shlex.split(command.replace("\\\n", " "))
  args = [w for w in words[words.index("run_classifier.py") + 1:] if w.startswith("--")]
  flag = dict(a[2:].split("=", 1) for a in args if "=" in a)
  # What the README's conversion step leaves (models/my_bert), made from the tiny model.
  config_file, checkpoint = tiny_model
  model_dir = tmp_path / os.path.dirname(flag["init_checkpoint"])
  model_dir.mkdir(parents=True)
  shutil.copy(config_file, str(tmp_path / flag["bert_config_file"]))
  shutil.copy(vocab_file, str(tmp_path / flag["vocab_file"]))
  for path in tf.io.gfile.glob(checkpoint + ".*"):
    shutil.copy(path, str(model_dir / (os.path.basename(flag["init_checkpoint"]) +
                                       path[len(checkpoint):])))
  data = tmp_path / flag["data_dir"]
  data.mkdir()
  rows = [("a warm, funny film", "positive"), ("a dull mess", "negative"),
          ("wonderfully acted", "positive"), ("lifeless and boring", "negative")]
  for name in ("train.tsv", "dev.tsv"):
    (data / name).write_text("%s\t%s\n" % (flag["text_a_column"], flag["label_column"]) +
                             "".join("%s\t%s\n" % row for row in rows))
  run_tool("run_classifier.py", args + ["--max_seq_length=32", "--train_batch_size=4",
                                        "--num_train_epochs=1"], cwd=str(tmp_path))
  assert python.count(flag["export_dir"]) == 1  # the Python lines load that export
  printed = run_tool(None, ["-c", python], cwd=str(tmp_path)).stdout.strip().splitlines()[-1]
  match = re.fullmatch(r"\[b'(negative|positive)'\] \[\[([0-9.e-]+) +([0-9.e-]+)\]\]", printed)
  assert match, printed
  assert float(match.group(2)) + float(match.group(3)) == pytest.approx(1.0, abs=1e-5)


# ----------------------------------------------------------------------------------------------
# Safety: stopped jobs, resuming another model, --export_dir targets, --output_dir, the lock.

TSV_ROWS = [("the film was great", "yes"), ("a dull mess", "no"), ("superb acting", "yes"),
            ("boring plot", "no")]


def _tsv_args(data, config_file, out, vocab_file, extra=()):
  return _common_args("tsv", str(data), config_file, out, vocab_file) + [
      "--text_a_column=text", "--label_column=verdict"] + list(extra)


def _checkpoint_step(output_dir):
  latest = tf.train.latest_checkpoint(str(output_dir))
  return int(tf.train.load_checkpoint(latest).get_tensor("global_step")) if latest else None


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, tiny_model):
  """A --do_train --do_eval --export_dir job of 2000 steps, sent SIGTERM once training began.

  Returns:
    dict: data dir, output dir, export dir, config file, the job's exit status and stderr.
  """
  config_file, _ = tiny_model
  vocab_file = os.path.join(REPO_DIR, "data", "vocab.txt")
  if not os.path.exists(vocab_file):
    vocab_file = shared_path("vocab", "bert_uncased_vocab.txt")
  root = tmp_path_factory.mktemp("stopped")
  data = root / "data"
  data.mkdir()
  for name in ("train.tsv", "dev.tsv"):
    (data / name).write_text("text\tverdict\n" + "".join("%s\t%s\n" % r for r in TSV_ROWS))
  out, export = root / "out", root / "export"
  # 4 examples / batch 4 * 2000 epochs = 2000 steps: far more than run before the signal.
  args = _tsv_args(data, config_file, out, vocab_file, [
      "--do_train", "--do_eval", "--num_train_epochs=2000", "--save_checkpoints_steps=100000",
      "--export_dir=%s" % export])
  proc = start_tool("run_classifier.py", args)
  lines = []
  try:
    for line in proc.stderr:
      lines.append(line)
      # The CheckpointSaverHook writes step 0 after the hooks' begin(): training has started.
      if "Saving checkpoints for 0 into" in line:
        proc.send_signal(signal.SIGTERM)
        break
    rest = proc.communicate(timeout=120)[1]
  finally:
    if proc.poll() is None:
      proc.kill()
  return {"data": data, "out": out, "export": export, "returncode": proc.returncode,
          "stderr": "".join(lines) + (rest or ""), "config_file": config_file}


@pytest.mark.slow
def test_sigterm_stops_training_without_results(stopped_run):
  run = stopped_run
  assert run["returncode"] == 143, run["stderr"][-3000:]
  assert "interrupted (signal 15)" in run["stderr"]
  out = run["out"]
  # Stopped at a checkpoint short of the target; nothing that looks finished.
  assert 0 < _checkpoint_step(out) < 2000
  assert not (out / "eval_results.json").exists() and not (out / "eval_results.txt").exists()
  assert not run["export"].exists()
  assert not (out / ".lock-local").exists()  # released on the way out


@pytest.mark.slow
def test_resume_with_another_model_is_one_line_error(stopped_run, vocab_file, tmp_path):
  run = stopped_run
  out = run["out"]
  before = {name: (out / name).read_bytes() for name in ("bert_config.json", "labels.txt")}
  listing = sorted(os.listdir(out))
  # Another hidden size: the checkpoint there cannot be restored into this model.
  other = dict(TINY_CONFIG, hidden_size=16, intermediate_size=32)
  other_config = tmp_path / "other_config.json"
  other_config.write_text(json.dumps(other))
  log = _run(_tsv_args(run["data"], str(other_config), out, vocab_file, ["--do_train"]),
             expect_rc=2)
  last = log.strip().splitlines()[-1]
  assert last.startswith("error: --output_dir=%s: its checkpoint model.ckpt-" % out), last
  assert "[32]" in last and "[16]" in last and "Traceback" not in log
  # Another label list: the classifier head (and labels.txt) belong to other labels.
  log = _run(_tsv_args(run["data"], run["config_file"], out, vocab_file,
                       ["--do_train", "--label_list=no,yes,maybe"]), expect_rc=2)
  assert log.strip().splitlines()[-1] == (
      "error: --output_dir=%s: holds a model trained on labels no,yes (labels.txt) but this "
      "job has no,yes,maybe; use a new --output_dir" % out)
  assert "Traceback" not in log
  # Nothing in the directory changed.
  assert {name: (out / name).read_bytes() for name in before} == before
  assert sorted(os.listdir(out)) == listing


@pytest.mark.slow
def test_export_dir_targets(stopped_run, vocab_file, tmp_path):
  run = stopped_run
  out = run["out"]
  args = _tsv_args(run["data"], run["config_file"], out, vocab_file)
  listing = sorted(os.listdir(out))
  # The output_dir itself and its parent: they hold what the job needs.
  for target in (out, out.parent):
    log = _run(args + ["--export_dir=%s" % target, "--overwrite"], expect_rc=2)
    assert log.strip().splitlines()[-1].startswith(
        "error: --export_dir=%s: would replace " % target), log[-2000:]
  # An unrelated file.
  stray = tmp_path / "notes.txt"
  stray.write_text("keep me\n")
  log = _run(args + ["--export_dir=%s" % stray], expect_rc=2)
  assert log.strip().splitlines()[-1].startswith("error: --export_dir=%s: is a file" % stray)
  assert stray.read_text() == "keep me\n"
  assert sorted(os.listdir(out)) == listing
  # Our own export is replaced only with --overwrite.
  export = tmp_path / "export"
  _run(args + ["--export_dir=%s" % export])
  assert (export / "saved_model.pb").exists() and (export / "labels.txt").read_text() == (
      "no\nyes\n")
  log = _run(args + ["--export_dir=%s" % export], expect_rc=2)
  last = log.strip().splitlines()[-1]
  assert last.startswith("error: --export_dir=%s: already holds " % export), last
  assert "pass --overwrite" in last
  _run(args + ["--export_dir=%s" % export, "--overwrite"])
  assert (export / "saved_model.pb").exists()
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_bad_export_dir_fails_before_training(tmp_path, tiny_model, vocab_file):
  config_file, _ = tiny_model
  stray = tmp_path / "stray.txt"
  stray.write_text("x")
  out = tmp_path / "out"
  log = _run(_common_args("sst-2", os.path.join(FIXTURES, "SST-2"), config_file, out,
                          vocab_file) + ["--do_train", "--export_dir=%s" % stray], expect_rc=2)
  assert log.strip().splitlines()[-1].startswith("error: --export_dir=%s: is a file" % stray)
  assert not out.exists()  # no training ran, nothing was written


def test_output_dir_file_and_lock_are_one_line_errors(tmp_path, tiny_model, vocab_file):
  config_file, _ = tiny_model
  data = os.path.join(FIXTURES, "SST-2")
  stray = tmp_path / "file.txt"
  stray.write_text("x")
  log = _run(_common_args("sst-2", data, config_file, stray, vocab_file) + ["--do_train"],
             expect_rc=2)
  assert log.strip().splitlines()[-1] == (
      "error: --output_dir=%s: is a file, expected a directory" % stray)
  under = stray / "sub"
  log = _run(_common_args("sst-2", data, config_file, under, vocab_file) + ["--do_train"],
             expect_rc=2)
  assert log.strip().splitlines()[-1] == (
      "error: --output_dir=%s: %s is a file, not a directory" % (under, stray))
  assert stray.read_text() == "x" and "Traceback" not in log
  # A live job's lock (this test process) in the directory: a second job refuses, an
  # evaluation-only one too (it would score an intermediate checkpoint of a training job).
  out = tmp_path / "out"
  out.mkdir()
  (out / ".lock-local").write_text(json.dumps(
      {"pid": os.getpid(), "host": socket.gethostname(), "time": "2024-01-01T00:00:00"}))
  log = _run(_common_args("sst-2", data, config_file, out, vocab_file) + [
      "--do_eval", "--init_checkpoint=%s" % tiny_model[1]], expect_rc=2)
  assert log.strip().splitlines()[-1].startswith(
      "error: --output_dir=%s: in use by another job (pid %d on host %s" %
      (out, os.getpid(), socket.gethostname()))
  assert sorted(os.listdir(out)) == [".lock-local"]


# ----------------------------------------------------------------------------------------------
# No trained weights, an --init_checkpoint of another model, --keep_best temporaries.


def _foreign_checkpoint(prefix, extra=None):
  """A checkpoint of another model (translation-like names): none of BERT's variables.

  extra: {name: shape} of further variables (e.g. a task head's name the model shares).
  """
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("encoder/layer_0/attention/kernel", [4, 4])
    tf.compat.v1.get_variable("decoder/embeddings", [10, 4])
    for name, shape in sorted((extra or {}).items()):
      tf.compat.v1.get_variable(name, shape)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return tf.compat.v1.train.Saver().save(sess, prefix)


def test_no_trained_weights_and_foreign_init_checkpoint(tmp_path, tiny_model, vocab_file):
  config_file, _ = tiny_model
  data = os.path.join(FIXTURES, "SST-2")
  out = tmp_path / "out"
  # --do_eval / --do_predict from nothing: random scores that would look like a result.
  proc = run_tool("run_classifier.py", _common_args("sst-2", data, config_file, out, vocab_file)
                  + ["--do_eval", "--do_predict"], expect_rc=2)
  assert last_error_line(proc) == (
      "error: --do_eval/--do_predict: no trained weights (no checkpoint in --output_dir=%s), so "
      "it would score a randomly initialised model; give --init_checkpoint, or pass "
      "--allow_random_eval to do that deliberately" % out)
  assert not out.exists()
  # Training from a checkpoint of another model: refused by the init_checkpoint_scaffold_fn
  # (it used to train from random weights with an INFO line).
  foreign = _foreign_checkpoint(str(tmp_path / "nmt" / "model.ckpt-7"))
  proc = run_tool("run_classifier.py", _common_args("sst-2", data, config_file, out, vocab_file)
                  + ["--do_train", "--init_checkpoint=%s" % foreign], expect_rc=2)
  assert last_error_line(proc) == (
      "error: --init_checkpoint=%s: supplies none of the model's 41 variables (missing: "
      "bert/embeddings/word_embeddings, bert/embeddings/token_type_embeddings, "
      "bert/embeddings/position_embeddings, ...); a checkpoint of another model or config? pass "
      "--allow_unmatched_init to train the missing ones from random weights" % foreign)
  assert not [p for p in os.listdir(out) if p.startswith("model.ckpt")]


def test_a_second_job_is_refused_before_reading_the_output_dir(tmp_path, tiny_model, vocab_file):
  # The lock comes before anything is read there: an evaluation beside a running job must not
  # pick the running job's latest checkpoint (or say it has none).
  config_file, _ = tiny_model
  data = os.path.join(FIXTURES, "SST-2")
  out = tmp_path / "out"
  with common.OutputDirLock(str(out)):
    proc = run_tool("run_classifier.py", _common_args("sst-2", data, config_file, out, vocab_file)
                    + ["--do_eval"], expect_rc=2)
  assert last_error_line(proc).startswith(
      "error: --output_dir=%s: in use by another job (pid %d" % (out, os.getpid()))


def test_require_eval_weights(tmp_path, tiny_model):
  """Which weights an evaluation without training reads, or why none (in-process)."""
  config_file, checkpoint = tiny_model
  names = cm.model_variable_names(modeling.BertConfig.from_json_file(config_file))
  assert {"output_weights", "output_bias", "bert/embeddings/word_embeddings"} <= names
  out = str(tmp_path / "out")
  foreign = _foreign_checkpoint(str(tmp_path / "nmt" / "model.ckpt-7"))
  # A BERT checkpoint supplies BERT's variables (the head starts from random, as officially).
  assert checkpoint_utils.require_eval_weights("--do_eval", out, checkpoint, names,
                                               allow_random_eval=False) == checkpoint
  with pytest.raises(common.UsageError, match="supplies none of the model's"):
    checkpoint_utils.require_eval_weights("--do_eval", out, foreign, names)
  # A checkpoint of another family that fills the task head but no encoder variable.
  heads_only = _foreign_checkpoint(str(tmp_path / "heads" / "model.ckpt"),
                                   extra={"output_bias": [2]})
  with pytest.raises(common.UsageError, match="supplies 1 of the model's 41 variables but none "
                     "of its 37 encoder variables"):
    checkpoint_utils.require_eval_weights("--do_eval", out, heads_only, names)
  # Allowed: read (its head is all it gives).
  assert checkpoint_utils.require_eval_weights("--do_eval", out, heads_only, names,
                                               allow_unmatched=True) == heads_only
  with pytest.raises(common.UsageError, match="--init_checkpoint=%s: no checkpoint there" %
                     str(tmp_path / "typo")):
    checkpoint_utils.require_eval_weights("--do_eval", out, str(tmp_path / "typo"), names)
  # --allow_unmatched_init: the foreign checkpoint counts as no weights, still refused ...
  with pytest.raises(common.UsageError) as e:
    checkpoint_utils.require_eval_weights("--do_eval", out, foreign, names,
                                          allow_random_eval=False, allow_unmatched=True)
  assert str(e.value).startswith("--do_eval: no trained weights (no checkpoint in "
                                 "--output_dir=%s)" % out)
  # ... unless --allow_random_eval (the results then record no checkpoint).
  assert checkpoint_utils.require_eval_weights("--do_eval", out, foreign, names,
                                               allow_random_eval=True,
                                               allow_unmatched=True) is None
  assert checkpoint_utils.checkpoint_record(None) == {"checkpoint": None, "global_step": None}
  # A checkpoint in --output_dir wins (the Estimator restores it).
  os.makedirs(out)
  trained = write_random_bert_checkpoint(config_file, os.path.join(out, "model.ckpt-3"))
  assert checkpoint_utils.require_eval_weights("--do_eval", out, foreign, names) == trained


def test_fine_tuning_needs_the_encoder_but_not_a_pooler(tmp_path, tiny_model, monkeypatch):
  """The official model_fn_builder as a library: a checkpoint converted without a pooler starts
  the pooler (and the head) fresh with a WARNING; one lacking a layer variable is one line."""
  config_file, _ = tiny_model
  config = modeling.BertConfig.from_json_file(config_file)
  encoder = {name: np.full(shape, 0.01, np.float32)
             for name, shape in estimator_utils.bert_variable_shapes(config).items()}
  no_pooler = {n: v for n, v in encoder.items() if not n.startswith("bert/pooler/")}
  hf = str(tmp_path / "hf" / "model.ckpt")
  convert_hf_checkpoint.write_tf_checkpoint(no_pooler, hf)
  lacking = str(tmp_path / "lacking" / "model.ckpt")
  convert_hf_checkpoint.write_tf_checkpoint(
      {n: v for n, v in encoder.items() if n != "bert/encoder/layer_1/output/dense/kernel"},
      lacking)
  warnings = []
  monkeypatch.setattr(checkpoint_utils.tf1.logging, "warning",
                      lambda fmt, *args: warnings.append(fmt % args))

  def build(init_checkpoint):
    model_fn = rc.model_fn_builder(config, 2, init_checkpoint, learning_rate=1e-3,
                                   num_train_steps=2, num_warmup_steps=0, use_tpu=False,
                                   use_one_hot_embeddings=False)
    with tf.Graph().as_default():
      tf.compat.v1.train.get_or_create_global_step()
      features = {name: tf.zeros([2, 8], tf.int32)
                  for name in ("input_ids", "input_mask", "segment_ids")}
      features["label_ids"] = tf.zeros([2], tf.int32)
      model_fn(features, None, tf.estimator.ModeKeys.TRAIN, {})

  build(hf)
  assert warnings == ["--init_checkpoint=%s: has no bert/pooler variables: the model's 2 start "
                      "from random weights (bert/pooler/dense/kernel, bert/pooler/dense/bias)" %
                      hf]
  with pytest.raises(common.UsageError) as e:
    build(lacking)
  assert str(e.value) == (
      "--init_checkpoint=%s: supplies 38 of the model's 41 variables but only 38 of its 39 "
      "encoder variables (missing: bert/encoder/layer_1/output/dense/kernel); a checkpoint of "
      "another model or config? pass --allow_unmatched_init to train the missing ones from "
      "random weights" % lacking)


def test_keep_best_removes_stale_temporaries(tmp_path):
  best = tmp_path / te.BEST_DIR
  best.mkdir()
  dead = 2 ** 22 + 12345  # above pid_max: no such process
  kept = ["best.json", "checkpoint", "model.ckpt-4.index", ".best.json.tmp-1"]  # pid 1 lives
  stale = [".checkpoint.tmp-%d" % dead, ".best.json.tmp-%d" % dead,
           ".model.ckpt-6.data-00000-of-00001.tmp-%d" % dead]
  for name in kept + stale:
    (best / name).write_text("x")
  removed = te.remove_stale_best_temps(str(tmp_path))
  assert sorted(os.path.basename(p) for p in removed) == sorted(stale)
  assert sorted(os.listdir(best)) == sorted(kept)
  assert te.remove_stale_best_temps(str(tmp_path / "none")) == []


# Control characters and separators: the raw-text classifier export (export_hub) must split
# words exactly as the official tokenizer (BasicTokenizer) does.
HOSTILE_TEXTS = [
    "Obama in \x00 Paris", "a\x00b c", "\x00", "", " \t\r\n ", "tab\there\r\nnext\rline",
    "x\u2028y\u2029z\u00a0w\u3000v\u2007u\u202ft", "Z\u00fcrich\x0bBern\x0cGenf\x1cA\x1fB\x85C",
    "e\u0301\u200bf zero\ufeffwidth \ufffd rep", "(hi)!? \u00bfqu\u00e9?", "\u4e2d\u6587abc def",
    "\x7f\x80x \ufe0f end"]


def test_raw_text_classifier_export_splits_as_basic_tokenizer():
  for lower in (True, False):
    words = serving.wordpiece_words(tf.constant(HOSTILE_TEXTS), lower).to_list()
    basic = tokenization.BasicTokenizer(do_lower_case=lower)
    for text, got in zip(HOSTILE_TEXTS, words):
      assert [w.decode() for w in got] == basic.tokenize(text), (lower, text)
  # An empty batch: no rows.
  assert serving.wordpiece_words(tf.constant([], tf.string), True).to_list() == []


# ----------------------------------------------------------------------------------------------
# --padding=longest: each batch sliced to its longest example (multiple of 8).


PADDING_SEQ = 64  # TINY_CONFIG's max_position_embeddings


def _padding_records(tmp_path, vocab_file, task_name, data_dir, split, limit):
  """The official fixed-length TFRecord of real ragged text; returns (path, task)."""
  task = ct.get_task(task_name)
  task_file = {"train": task.train, "dev": task.dev[0]}[split]
  examples = ct.task_examples(task, task_file, data_dir, split)[:limit]
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  path = str(tmp_path / ("%s_%s.tf_record" % (task.name, split)))
  rc.file_based_convert_examples_to_features(examples, task.labels, PADDING_SEQ, tokenizer, path)
  return path, task


def _padding_batches(path, padding, is_training, batch_size, steps, **kwargs):
  """The input_fn's first `steps` batches (numpy dicts); kwargs: more builder arguments."""
  kwargs = dict(dict(seed=3, drop_remainder=False), **kwargs)
  input_fn = rc.file_based_input_fn_builder(path, PADDING_SEQ, is_training, padding=padding,
                                            **kwargs)
  with tf.Graph().as_default():
    batch = tf.compat.v1.data.make_one_shot_iterator(
        input_fn({"batch_size": batch_size})).get_next()
    with tf.compat.v1.Session() as sess:
      out = []
      for _ in range(steps):
        try:
          out.append(sess.run(batch))
        except tf.errors.OutOfRangeError:
          break
  return out


def test_input_pipelines_run_without_tf_data_autotuning(tmp_path, vocab_file):
  # Closing a session waits for tf.data's autotuning thread to wake (up to 60 s after a few
  # minutes of training): the pipelines turn it off (estimator_utils.without_autotune).
  path, _ = _padding_records(tmp_path, vocab_file, "sst-2",
                             os.path.join(REPO_DIR, "data", "sst2_slice"), "dev", 8)
  for is_training, kwargs in ((True, {}), (True, {"group_by_length": True}),
                              (False, {"sort_by_length": True}), (False, {})):
    input_fn = rc.file_based_input_fn_builder(path, PADDING_SEQ, is_training, False,
                                              padding="longest", **kwargs)
    with tf.Graph().as_default():
      dataset = input_fn({"batch_size": 4})
      assert dataset.options().autotune.enabled is False, (is_training, kwargs)


def test_group_by_length_batches_are_grouped_seeded_and_resumable(tmp_path, vocab_file):
  path, _ = _padding_records(tmp_path, vocab_file, "sst-2",
                             os.path.join(REPO_DIR, "data", "sst2_slice"), "dev", 40)
  window = 3  # batches per sorted window

  def stream(padding="max_length", seed=3, skip=0, group=True, steps=12):
    return _padding_batches(path, padding, True, 4, steps, seed=seed, drop_remainder=True,
                            skip_batches=skip, group_by_length=group,
                            group_window_batches=window)

  def rows(batches):
    return sorted(tuple(r) for b in batches for r in b["input_ids"].tolist())

  grouped, plain = stream(), stream(group=False)
  lengths = [b["input_mask"].sum(axis=1) for b in grouped]
  for w in range(0, 12, window):
    # The same examples as the ungrouped stream's window, regrouped: within a window, batches
    # hold disjoint length ranges (sorted, then cut), in a seeded order.
    assert rows(grouped[w:w + window]) == rows(plain[w:w + window])
    spans = sorted((l.min(), l.max()) for l in lengths[w:w + window])
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
  assert any(l.min() != l.max() for l in lengths)
  spread = np.mean([l.max() - l.min() for l in lengths])
  assert spread < np.mean([np.ptp(b["input_mask"].sum(axis=1)) for b in plain])
  again, other = stream(), stream(seed=4)
  for a, b in zip(grouped, again):
    np.testing.assert_array_equal(a["input_ids"], b["input_ids"])
  assert any(not np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(grouped, other))
  # Resume after N batches (mid-window and at a window's end): the same batches in order.
  for skip in (4, 6):
    resumed = stream(skip=skip, steps=12 - skip)
    for a, b in zip(grouped[skip:], resumed):
      for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=(skip, name))
  # With --padding=longest a grouped batch is cut to about its examples' length.
  trimmed = stream(padding="longest")
  widths = [b["input_ids"].shape[1] for b in trimmed]
  assert widths == [min(PADDING_SEQ, -(-int(l.max()) // 8) * 8) for l in lengths]
  assert sum(widths) < sum(b["input_ids"].shape[1]
                           for b in stream(padding="longest", group=False))


def _run_model_fn(config, batches, mode, num_labels, max_seq_length=None):
  """Runs model_fn on each batch (TRAIN: one Adam step each); returns the predictions of each
  batch (PREDICT) or the final trainable variables (TRAIN), by name. The global step exists
  before model_fn, as under the Estimator (dropout is step-seeded)."""
  model_fn = rc.model_fn_builder(config, num_labels, None, learning_rate=1e-2,
                                 num_train_steps=10, num_warmup_steps=0, use_tpu=False,
                                 use_one_hot_embeddings=False, extra_predictions=True,
                                 max_seq_length=max_seq_length)
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(7)
    tf.compat.v1.train.get_or_create_global_step()
    placeholders = {k: tf.compat.v1.placeholder(tf.int32, [None, None] if v.ndim == 2 else [None])
                    for k, v in batches[0].items()}
    spec = model_fn(placeholders, None, mode, {})
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      outs = []
      for batch in batches:
        feed = {placeholders[k]: v for k, v in batch.items()}
        if mode == tf.estimator.ModeKeys.TRAIN:
          sess.run(spec.train_op, feed)
        else:
          outs.append(sess.run(spec.predictions, feed))
      if mode == tf.estimator.ModeKeys.TRAIN:
        # One run for every variable (a run per variable costs ~35 ms each).
        return sess.run({v.op.name: v for v in tf.compat.v1.trainable_variables()})
      return outs


@pytest.mark.parametrize("task_name,data_dir,split,limit,batch_size", [
    ("sst-2", os.path.join(REPO_DIR, "data", "sst2_slice"), "dev", 23, 4),  # ragged sentences
    ("mrpc", os.path.join(FIXTURES, "MRPC"), "train", 3, 2),  # pairs
], ids=["sst2", "mrpc"])
def test_padding_longest_equals_max_length(tmp_path, vocab_file, task_name, data_dir, split,
                                           limit, batch_size):
  config = modeling.BertConfig.from_dict(TINY_CONFIG)
  path, task = _padding_records(tmp_path, vocab_file, task_name, data_dir, split, limit)
  full = _padding_batches(path, "max_length", False, batch_size, 100)
  trimmed = _padding_batches(path, "longest", False, batch_size, 100)
  assert len(full) == len(trimmed) == -(-limit // batch_size)
  lengths = []
  for f, t in zip(full, trimmed):
    length = t["input_ids"].shape[1]
    lengths.append(length)
    # The batch's longest example, rounded up to a multiple of 8; only padding is cut.
    assert length == min(PADDING_SEQ, -(-int(f["input_mask"].sum(axis=1).max()) // 8) * 8)
    for name in ("input_ids", "input_mask", "segment_ids"):
      np.testing.assert_array_equal(t[name], f[name][:, :length])
      assert not f[name][:, length:].any()
    np.testing.assert_array_equal(t["label_ids"], f["label_ids"])
  assert min(lengths) < PADDING_SEQ and all(l % 8 == 0 for l in lengths)
  # --padding=bucket: the same slices, rounded up to 32 or 64 (padding_buckets(64)).
  bucketed = _padding_batches(path, "bucket", False, batch_size, 100)
  assert [b["input_ids"].shape[1] for b in bucketed] == [32 if l <= 32 else 64 for l in lengths]
  for f, b in zip(full, bucketed):
    np.testing.assert_array_equal(b["input_ids"], f["input_ids"][:, :b["input_ids"].shape[1]])
  if task_name == "mrpc":
    assert any(t["segment_ids"].any() for t in trimmed)  # pairs: text_b kept with its segment
  # Logits, probabilities and losses (what eval metrics and predictions are computed from).
  predict = tf.estimator.ModeKeys.PREDICT
  want = _run_model_fn(config, full, predict, task.num_labels)
  got = _run_model_fn(config, trimmed, predict, task.num_labels)
  for w, g in zip(want, got):
    for name in ("logits", "probabilities", "per_example_loss"):
      np.testing.assert_allclose(g[name], w[name], rtol=1e-5, atol=1e-5)
  metrics = [co.dev_metrics(task, [dict(zip(o, v)) for o in outs for v in zip(*o.values())],
                            limit) for outs in (want, got)]
  assert metrics[0].keys() == metrics[1].keys()
  for name in metrics[0]:
    assert metrics[1][name] == pytest.approx(metrics[0][name], rel=1e-5, abs=1e-6), name
  # Evaluation / prediction batches sorted by length within windows (of 2 batches here): as
  # many batches, less padding; the outputs put back in file order equal max_length's.
  ordered = _padding_batches(path, "longest", False, batch_size, 100, sort_by_length=True,
                             sort_window_batches=2)
  assert len(ordered) == len(full)
  index = np.concatenate([b[co.EXAMPLE_INDEX] for b in ordered])
  assert sorted(index) == list(range(limit))
  window = 2 * batch_size
  for start in range(0, limit, window):
    assert sorted(index[start:start + window]) == list(range(start, min(limit, start + window)))
    ids = np.concatenate([b["input_mask"].sum(axis=1) for b in ordered])[start:start + window]
    assert list(ids) == sorted(ids)
  positions = [b["input_ids"].size for b in ordered]
  assert sum(positions) < sum(t["input_ids"].size for t in trimmed) or task_name == "mrpc"
  outs = _run_model_fn(config, ordered, predict, task.num_labels)
  restored = co.in_file_order([dict(zip(o, v)) for o in outs for v in zip(*o.values())])
  flat_want = [dict(zip(o, v)) for o in want for v in zip(*o.values())]
  assert len(restored) == limit and co.EXAMPLE_INDEX not in restored[0]
  for w, g in zip(flat_want, restored):
    assert g["label_ids"] == w["label_ids"]
    for name in ("logits", "probabilities", "per_example_loss"):
      np.testing.assert_allclose(g[name], w[name], rtol=1e-5, atol=1e-5)


def test_padding_longest_trains_the_same_weights(tmp_path, vocab_file):
  # Same shuffled batches in the same order; dropout on (0.3), its masks drawn at
  # --max_seq_length (modeling.full_length_dropout): the weights after a few Adam steps equal
  # the fixed-length run's (so training's default padding is longest: run_classifier's
  # JobSettings.train_padding).
  config = modeling.BertConfig.from_dict(dict(TINY_CONFIG, hidden_dropout_prob=0.3,
                                              attention_probs_dropout_prob=0.3))
  path, task = _padding_records(tmp_path, vocab_file, "sst-2",
                                os.path.join(REPO_DIR, "data", "sst2_slice"), "dev", 24)
  full = _padding_batches(path, "max_length", True, 8, 3)
  trimmed = _padding_batches(path, "longest", True, 8, 3)
  assert [t["input_ids"].shape[1] for t in trimmed] != [PADDING_SEQ] * 3
  train = tf.estimator.ModeKeys.TRAIN
  want = _run_model_fn(config, full, train, task.num_labels, PADDING_SEQ)
  got = _run_model_fn(config, trimmed, train, task.num_labels, PADDING_SEQ)
  assert want.keys() == got.keys()
  for name in want:
    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


# ----------------------------------------------------------------------------------------------
# The module: the official API and the job; flags read in main; moved names named.

# The official google-research/bert names a user's code imports from run_classifier.
OFFICIAL_NAMES = (
    "InputExample", "PaddingInputExample", "InputFeatures", "DataProcessor", "XnliProcessor",
    "MnliProcessor", "MrpcProcessor", "ColaProcessor", "convert_single_example",
    "convert_examples_to_features", "file_based_convert_examples_to_features",
    "file_based_input_fn_builder", "input_fn_builder", "create_model", "model_fn_builder",
    "_truncate_seq_pair", "flags", "FLAGS")
# Ours, documented for users' scripts (docs/fine_tuning.md).
USER_NAMES = ("register_processor", "run", "define_flags")


def test_only_main_and_the_flag_checks_read_flags():
  with open(os.path.join(REPO_DIR, "run_classifier.py"), encoding="utf-8") as f:
    reads = _flag_reads(f.read())
  assert {owner for owner, _ in reads} >= {"main", "_check_flags", "_check_task_flags"}
  outside = ["%s (line %d)" % read for read in reads if not FLAG_READERS.match(read[0])]
  assert not outside, "FLAGS read outside main and the flag checks: " + ", ".join(outside)


def test_flag_read_check_sees_nested_functions_and_module_level_reads():
  source = textwrap.dedent("""\
      FLAGS = flags.FLAGS

      def main(_):
        return FLAGS.output_dir

      def _run_job(settings):
        def step():
          return FLAGS.do_train
        return step

      class _Inference(object):
        def evaluate(self):
          return flags.FLAGS.eval_batch_size

      BATCH = FLAGS.train_batch_size
      """)
  reads = _flag_reads(source)
  assert reads == [("main", 4), ("_run_job", 8), ("_Inference", 13), ("<module>", 15)]
  assert [owner for owner, _ in reads if not FLAG_READERS.match(owner)] == [
      "_run_job", "_Inference", "<module>"]


def test_library_modules_read_no_flags():
  package = os.path.join(REPO_DIR, "realformer_tf")
  for name in sorted(os.listdir(package)):
    if name.endswith(".py"):
      with open(os.path.join(package, name), encoding="utf-8") as f:
        assert _flag_reads(f.read()) == [], name


def test_official_and_user_names_are_there():
  for name in OFFICIAL_NAMES + USER_NAMES:
    assert name not in rc.MOVED and getattr(rc, name) is not None, name
  assert rc.FLAGS is rc.flags.FLAGS
  assert issubclass(rc.MrpcProcessor, rc.DataProcessor)


def test_moved_names_fail_with_one_line_naming_the_new_place():
  # The aliases this module had, every one in the table.
  assert {"Layout", "TaskFile", "Task", "GLUE_TASKS", "normalize_task_name", "make_tsv_task",
          "get_task", "read_examples", "feature_cache_key", "dev_metrics", "HISTORY_FILE",
          "EvalHistory", "document_windows", "cached_features", "export_classifier",
          "_Inference", "train_shuffle_buffer", "head_shapes"} <= set(rc.MOVED)
  for name, place in sorted(rc.MOVED.items()):
    message = "run_classifier.%s moved to %s" % (name, place)
    with pytest.raises(AttributeError) as e:
      getattr(rc, name)
    assert str(e.value) == message
    assert not hasattr(rc, name)
    namespace = {}
    with pytest.raises(ImportError) as e:
      exec("from run_classifier import %s" % name, namespace)  # pylint: disable=exec-used
    assert str(e.value) == message
    # The new place holds the name.
    module, _, attr = place.rpartition(".")
    assert hasattr(importlib.import_module(module), attr), place
  with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
    rc.no_such_name  # pylint: disable=pointless-statement
  assert rc.MOVED["get_task"] == "realformer_tf.classifier_tasks.get_task"
  assert rc.MOVED["_Inference"] == "realformer_tf.classifier_inference.Inference"
