"""Tests of etc_model.export_long_model: the raw-text SavedModel of a long-task model, loaded in a
fresh process, equals run_long_tasks' model_fn predictions on the records long_tasks makes from
the same text (cloze, supporting, classify; tiny random ETC and heads); its packed features equal
the records'; one-line errors. The record SavedModels of Table 8's tasks are tested in their
tasks' files (test_etc_wikihop.py, ...) through check_record_export."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf import common
from conftest import REPO_DIR, last_error_line, run_tool, tool_env
from etc_model import etc_inputs
from etc_model import etc_modeling
from etc_model import export_long_model as export
from etc_model import long_task_heads as heads
from etc_model import long_tasks
from etc_model import run_long_tasks
from realformer_tf import pretraining_data
from test_etc_long_tasks import _settings
from test_etc_run_long_tasks import TINY_ETC_CONFIG

tf1 = tf.compat.v1
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
L, G, C = 64, 12, 4
LABELS = ["austen", "melville", "wells"]

RELOAD_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import tensorflow as tf
    import tensorflow_text  # registers the ops of the raw-text signatures
    # Started before the exports (the imports overlap them): waits for the requests.
    deadline = time.time() + 240
    while not os.path.exists(sys.argv[1]) and time.time() < deadline:
      time.sleep(0.2)
    requests = json.loads(open(sys.argv[1]).read())
    out = {}
    for task, (export_dir, inputs) in requests.items():
      loaded = tf.saved_model.load(export_dir)
      args = {k: tf.constant(v) for k, v in inputs.items()}
      for name in ("serving_default", "features"):
        out[task + "/" + name] = {k: v.numpy().tolist()
                                  for k, v in loaded.signatures[name](**args).items()}
    print("RESULT " + json.dumps(out, default=lambda b: b.decode("utf-8")))
""")

# Raw documents, one sentence a string; names repeat so that long_tasks finds them.
DOCUMENTS = [
    ["Anna walked to the river with Boris.", "Boris saw a small boat near home.",
     "The old man told Clara about the boat.", "Anna and Clara laughed at Boris."],
    ["Clara met David at the market.", "David bought bread, and Clara bought cheese.",
     "", "They went home before the rain.", "Clara thanked David for the bread."],
    ["Elena wrote a long letter to her brother in the city, telling him about the harvest, "
     "the weather, the neighbours and the new road that the council had built.",
     "Boris read it twice.", "Elena waited for an answer all winter.",
     "No answer came until spring, when Boris arrived himself with news from the city.",
     "They talked late into the night about the road.", "Elena was glad to see Boris."],
]


def _tokenizer():
  return pretraining_data.make_tokenizer(VOCAB, True)


def _cloze_records(tokenizer, settings):
  """(records, raw inputs): each document's last sentence is the question, its context the
  latest sentences before it that fit (the export is given them all: it cuts the front)."""
  tokenize = long_tasks.tokenize_fn(tokenizer)
  records, inputs = [], {"sentences": [], "question": [], "candidates": []}
  for d, sentences in enumerate(DOCUMENTS):
    sentences = [s for s in sentences if s]
    names = long_tasks.find_names(sentences, 1)
    pattern = long_tasks.names_regex(names)
    tokenized = [long_tasks.tokenize_sentence(s, pattern, tokenize) for s in sentences]
    for start in range(len(sentences) - 1):
      earlier = set(m[0] for s in tokenized[start:-1] for m in s.mentions)
      answers = sorted(set(m[0] for m in tokenized[-1].mentions) & earlier)
      record = answers and long_tasks._cloze_example(tokenized[start:-1], tokenized[-1], answers,
                                                     np.random.default_rng(d), settings)
      if record:
        break
    assert record, d
    record["context_sentences"] = len(sentences) - 1 - start
    records.append(record)
    inputs["sentences"].append(sentences[:-1])
    inputs["question"].append(re.sub(r"\b%s\b" % record["answer"], "[MASK]", sentences[-1]))
    inputs["candidates"].append(record["candidates"])
  width = max(len(s) for s in inputs["sentences"])
  inputs["sentences"] = [s + [""] * (width - len(s)) for s in inputs["sentences"]]
  width = max(len(c) for c in inputs["candidates"])
  inputs["candidates"] = [c + [""] * (width - len(c)) for c in inputs["candidates"]]
  return records, inputs


def _sentence_records(tokenizer, settings, task):
  """(records, raw inputs) of the supporting / classify tasks, as long_tasks builds them."""
  tokenize = long_tasks.tokenize_fn(tokenizer)
  records = []
  for d, sentences in enumerate(DOCUMENTS):
    chapter = long_tasks.Chapter("book", d, [s for s in sentences if s])
    _, tokenized = long_tasks.tokenize_chapter(chapter, tokenize, 2)
    if task == "classify":  # the chapter's first window
      records.append(long_tasks.make_classify_examples(chapter, tokenized, d, settings)[0])
    else:  # make_supporting_examples' packing of a window's (mixed) sentences
      packed = etc_inputs.make_sentence_global_inputs([[s.ids for s in tokenized]], L, G,
                                                      settings["global_token_id"])
      record = {k: [int(v) for v in packed[k]] for k in heads.COMMON_FEATURES}
      record.update(sentence_labels=[0] * G, inserted_start=[0], inserted_count=[0])
      records.append(record)
  width = max(len(s) for s in DOCUMENTS)
  return records, {"sentences": [s + [""] * (width - len(s)) for s in DOCUMENTS]}


def _estimator_logits(task, config, records, checkpoint, path):
  """run_long_tasks' input_fn and PREDICT model_fn over the records, weights from checkpoint."""
  with tf.io.TFRecordWriter(path) as writer:
    for record in records:
      writer.write(long_tasks.serialize(record))
  with tf.Graph().as_default():
    dataset = run_long_tasks.input_fn_builder(path, task, config, L, G, C, is_training=False)(
        {"batch_size": len(records)})
    features = tf1.data.make_one_shot_iterator(dataset).get_next()
    model_fn = run_long_tasks.model_fn_builder(
        task, config, checkpoint, 1e-3, 1, 0, False,
        num_labels=len(LABELS) if task == "classify" else None)
    spec = model_fn(features, None, tf1.estimator.ModeKeys.PREDICT, {"batch_size": len(records)})
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return sess.run(spec.predictions["logits"])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  """A random tiny ETC with the three heads in one checkpoint, and the data's settings."""
  root = tmp_path_factory.mktemp("etc_export")
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  settings = _settings(_tokenizer(), max_seq_length=L, max_global_seq_length=G, max_candidates=C)
  with tf.Graph().as_default():
    tf1.set_random_seed(5)
    for task in heads.TASKS:
      with tf1.variable_scope(tf1.get_variable_scope(), reuse=tf1.AUTO_REUSE):
        export._placeholder_build(task, config, settings, len(LABELS))
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      checkpoint = tf1.train.Saver().save(sess, str(root / "model.ckpt"))
  return {"root": root, "config": config, "settings": settings, "checkpoint": checkpoint}


@pytest.mark.slow
def test_raw_text_export_equals_estimator_predictions(model, tmp_path):
  tokenizer = _tokenizer()
  config, settings, checkpoint = model["config"], model["settings"], model["checkpoint"]
  built = {"cloze": _cloze_records(tokenizer, settings),
           "supporting": _sentence_records(tokenizer, settings, "supporting"),
           "classify": _sentence_records(tokenizer, settings, "classify")}
  # A fresh process loads the SavedModels (started now: its imports overlap the exports).
  proc = subprocess.Popen([sys.executable, "-c", RELOAD_SCRIPT, str(tmp_path / "requests.json")],
                          cwd=REPO_DIR, env=tool_env(None), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  try:
    requests = {}
    for task, (records, inputs) in built.items():
      export.export_long_model(task, checkpoint, config, settings, VOCAB, True,
                               str(tmp_path / task), label_names=LABELS)
      requests[task] = (str(tmp_path / task), inputs)
    (tmp_path / "requests.tmp").write_text(json.dumps(requests))
    os.rename(str(tmp_path / "requests.tmp"), str(tmp_path / "requests.json"))
    logits = {task: _estimator_logits(task, config, records, checkpoint,
                                      str(tmp_path / task) + ".tfrecord")
              for task, (records, _) in built.items()}
    output = proc.communicate(timeout=240)[0]
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  assert proc.returncode == 0, output[-4000:]
  served = json.loads([l for l in output.splitlines() if l.startswith("RESULT ")][-1][7:])
  for task, (records, inputs) in built.items():
    # The graph packs exactly the records long_tasks builds from the same text.
    features = served[task + "/features"]
    for name in heads.COMMON_FEATURES + (("candidate_mask",) if task == "cloze" else ()):
      assert features[name] == [r[name] for r in records], (task, name)
    out = served[task + "/serving_default"]
    if task == "cloze":
      num = [len(r["candidates"]) for r in records]
      for b, n in enumerate(num):
        np.testing.assert_allclose(out["scores"][b][:n], logits[task][b][:n], atol=1e-5,
                                   rtol=1e-5)
        assert out["answer"][b] == records[b]["candidates"][int(np.argmax(logits[task][b][:n]))]
      # The third document's context is cut from the front, as its record's.
      assert out["context_sentences"] == [r["context_sentences"] for r in records]
      assert records[2]["context_sentences"] < 5
    elif task == "supporting":
      # Per input sentence ("" is not read), the logit of its global token.
      for b, sentences in enumerate(inputs["sentences"]):
        packed = sum(1 for g in records[b]["global_token_ids"] if g)
        read = [i for i, s in enumerate(sentences) if s][:packed]
        assert [i for i, label in enumerate(out["labels"][b]) if label >= 0] == read
        np.testing.assert_allclose([out["logits"][b][i] for i in read],
                                   logits[task][b][:len(read)], atol=1e-5, rtol=1e-5)
    else:
      np.testing.assert_allclose(out["logits"], logits[task], atol=1e-5, rtol=1e-5)
      assert out["label"] == [LABELS[i] for i in np.argmax(logits[task], axis=1)]
      # The third document is longer than L: the first window, as long_tasks cuts it.
      assert out["sentences_read"][2] == sum(1 for g in records[2]["global_token_ids"] if g) < 6
  info = json.loads((tmp_path / "cloze" / export.EXPORT_CONFIG).read_text())
  assert (info["task"], info["blank_token"], info["max_seq_length"]) == ("cloze", "[MASK]", L)


def _checkpoint_of_a_head(task, path):
  """A checkpoint holding only one variable of the task's head (a model tuned for it)."""
  with tf.Graph().as_default():
    tf1.get_variable("cls/long_tasks/%s/output_bias" % task, [1])
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return tf1.train.Saver().save(sess, path)


def test_one_line_errors(model, tmp_path):
  config, settings = model["config"], model["settings"]
  # A checkpoint tuned for another task.
  other = _checkpoint_of_a_head("supporting", str(tmp_path / "other.ckpt"))
  with pytest.raises(common.UsageError, match=r"^--task=cloze: checkpoint \S+ has no cloze "
                     r"head \(it was tuned for --task=supporting\)$"):
    export.export_long_model("cloze", other, config, settings, VOCAB, True, str(tmp_path / "x"))
  with pytest.raises(common.UsageError, match=r"^--task=classify: checkpoint \S+ has 3 labels "
                     r"but the label vocabulary has 2$"):
    export.check_task("classify", model["checkpoint"], 2)
  # Missing checkpoint, through the tool.
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / long_tasks.SUMMARY_NAME).write_text(json.dumps({"settings": settings}))
  proc = run_tool(None, ["-m", "etc_model.export_long_model", "--task=cloze",
                         "--checkpoint=%s" % (tmp_path / "none"),
                         "--data_dir=%s" % (tmp_path / "data"),
                         "--output_dir=%s" % (tmp_path / "export")], expect_rc=2)
  assert last_error_line(proc) == "error: --checkpoint=%s: no checkpoint there" % (
      tmp_path / "none")
  assert not (tmp_path / "export").exists()


def _data_dir(path, settings, **changes):
  """A data directory whose long_tasks.json holds `settings` with `changes`."""
  path.mkdir()
  (path / long_tasks.SUMMARY_NAME).write_text(json.dumps(
      {"settings": dict(settings, **changes), "classify_labels": LABELS}))
  return str(path)


@pytest.mark.parametrize("changes,message", [
    ({"max_seq_length": 0}, "max_seq_length=0 is not a whole number >= 1"),
    ({"max_global_seq_length": "12"}, "max_global_seq_length='12' is not a whole number >= 1"),
    ({"max_global_seq_length": 65}, "max_global_seq_length=65 is more than max_seq_length=64"),
    ({"max_candidates": 12}, "max_candidates=12 leaves no global token of "
                             "max_global_seq_length=12 for the question"),
    ({"blank_token_id": -1}, "blank_token_id=-1 is not a token id"),
])
def test_settings_create_long_tasks_never_writes_are_one_line(model, tmp_path, changes, message):
  # They built graphs that failed deep inside TensorFlow (or, L = 0, a model that reads nothing).
  data_dir = _data_dir(tmp_path / "data", model["settings"], **changes)
  with pytest.raises(common.UsageError) as e:
    export.read_settings(data_dir)
  assert str(e.value) == "--data_dir=%s: its %s: %s" % (data_dir, long_tasks.SUMMARY_NAME,
                                                       message)


def test_a_vocab_bigger_than_the_model_is_one_line(model, tmp_path):
  # Its extra words' ids lie outside the token table: every request holding one would fail.
  vocab = tmp_path / "vocab.txt"
  with open(VOCAB) as f:
    vocab.write_text(f.read() + "".join("extra%d\n" % i for i in range(3)))
  with pytest.raises(common.UsageError, match=r"^--vocab_file=%s: has 30525 tokens but the "
                     r"model's vocab_size is 30522" % vocab):
    export.export_long_model("cloze", model["checkpoint"], model["config"], model["settings"],
                             str(vocab), True, str(tmp_path / "export"))
  assert not (tmp_path / "export").exists()


@pytest.mark.slow
def test_cloze_requests_it_cannot_answer_fail(model, tmp_path):
  """No candidate answered "" and a question without the blank got an answer to nothing: both
  fail the request now, naming what is missing; an empty batch answers an empty batch."""
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  export.export_long_model("cloze", model["checkpoint"], model["config"], model["settings"],
                           VOCAB, True, str(tmp_path / "cloze"))
  serve = tf.saved_model.load(str(tmp_path / "cloze")).signatures["serving_default"]
  sentences = tf.constant([["Anna walked to the river with Boris.", "Boris saw a boat."],
                           ["Clara met David.", ""]])
  question = tf.constant(["[MASK] laughed.", "[MASK] smiled."])
  candidates = tf.constant([["Anna", "Boris"], ["Clara", "David"]])
  answer = serve(sentences=sentences, question=question, candidates=candidates)["answer"]
  assert set(answer.numpy().tolist()[0:1]) <= {b"Anna", b"Boris"}
  empty = serve(sentences=tf.zeros([0, 2], tf.string), question=tf.zeros([0], tf.string),
                candidates=tf.zeros([0, 2], tf.string))
  assert empty["scores"].shape == (0, 2) and empty["answer"].shape == (0,)
  with pytest.raises(tf.errors.InvalidArgumentError, match="a request without candidates"):
    serve(sentences=sentences, question=question,
          candidates=tf.constant([["Anna", ""], ["", ""]]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"a question without the blank token \[MASK\]"):
    serve(sentences=sentences, question=tf.constant(["Anna laughed.", "[MASK] smiled."]),
          candidates=candidates)


def test_a_request_without_sentence_columns_keeps_its_batch_size():
  # A [2, 0] request was read as a batch of 0 documents: 0 rows of answers for 2 questions.
  tokens = export.tokenize_rows(export.WordpieceIds(VOCAB, True), tf.zeros([2, 0], tf.string))
  assert tokens.nrows() == 2 and tokens.row_lengths().numpy().tolist() == [0, 0]
  tokens = export.tokenize_rows(export.WordpieceIds(VOCAB, True), tf.constant([["a b"], ["c"]]))
  assert tokens.to_list() == [[[1037, 1038]], [[1039]]]


# ----------------------------------------------------------------------------- record tasks
# A fresh process: the records of a file through the SavedModel's serving_default (plain TF).
RECORDS_RELOAD_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import tensorflow as tf
    # Started before the export (the imports overlap it): waits for the SavedModel.
    export_dir, records_file, out_file = sys.argv[1:4]
    deadline = time.time() + 240
    while not os.path.exists(os.path.join(export_dir, "saved_model.pb")) and (
        time.time() < deadline):
      time.sleep(0.2)
    records = [r.numpy() for r in tf.data.TFRecordDataset(records_file)]
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    outputs = serve(examples=tf.constant(records))
    np.savez(out_file, **{k: v.numpy() for k, v in outputs.items()})
""")


def tuned_run(task, config_file, lengths, run_dir):
  """A run directory as run_long_tasks leaves it (etc_config.json, model.ckpt-1) with the task's
  head: random weights, the head's scaled up so that its scores are far apart."""
  config = etc_modeling.EtcConfig.from_dict(json.loads(open(config_file).read()))
  os.makedirs(run_dir)
  with open(os.path.join(run_dir, export.CONFIG_NAME), "w") as f:
    f.write(config.to_json_string())
  with tf.Graph().as_default():
    tf1.set_random_seed(7)
    export.build_record_model(task, config, lengths)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      for v in tf1.global_variables():
        if v.op.name.startswith(heads.SCOPE) and len(v.shape) > 1:
          sess.run(v.assign(v * 30.0))
      return tf1.train.Saver().save(sess, os.path.join(run_dir, "model.ckpt"), global_step=1)


def run_long_tasks_outputs(task, config, checkpoint, records_file, lengths,
                           side_input_options=None):
  """run_long_tasks' prediction path (input_fn, PREDICT model_fn) over a record file."""
  num = sum(1 for _ in tf1.io.tf_record_iterator(records_file))
  with tf.Graph().as_default():
    dataset = run_long_tasks.input_fn_builder(
        records_file, task, config, lengths["max_seq_length"], lengths["max_global_seq_length"],
        lengths["max_candidates"], is_training=False,
        side_input_options=side_input_options)({"batch_size": num})
    features = tf1.data.make_one_shot_iterator(dataset).get_next()
    model_fn = run_long_tasks.model_fn_builder(
        task, config, checkpoint, 1e-3, 1, 0, False,
        max_global_seq_length=lengths["max_global_seq_length"],
        max_seq_length=lengths["max_seq_length"])
    spec = model_fn(features, None, tf1.estimator.ModeKeys.PREDICT, {"batch_size": num})
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return sess.run(spec.predictions)


def start_records_reload(export_dir, records_file, out_file):
  """The fresh process of RECORDS_RELOAD_SCRIPT (wait on it with finish_records_reload)."""
  return subprocess.Popen([sys.executable, "-c", RECORDS_RELOAD_SCRIPT, str(export_dir),
                           str(records_file), str(out_file)], cwd=REPO_DIR, env=tool_env(None),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish_records_reload(proc, out_file):
  """The served outputs {name: array} of a start_records_reload process."""
  try:
    output = proc.communicate(timeout=240)[0]
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  assert proc.returncode == 0, output[-4000:]
  with np.load(str(out_file)) as served:
    return {name: served[name] for name in served.files}


def check_record_export(task, data_dir, config_file, tmp_path, export_args=None,
                        side_input_options=None, run_files=None):
  """Exports a tuned run of a Table 8 task, serves the data's dev records in a fresh process and
  compares with run_long_tasks' predictions (to 1e-5).

  Args:
    task: wikihop, hotpotqa, nq or openkp.
    data_dir: its create_ command's --output_dir.
    config_file: the ETC config.
    tmp_path: the test's directory.
    export_args: further flags of the command, which then exports (None: the command's job
      function export_record_job exports in this process, its imports already paid).
    side_input_options: run_long_tasks' side input options of the task.
    run_files: {name: JSON object} written into the run directory beside the checkpoint.

  Returns:
    (served outputs, run_long_tasks' outputs): {name: array} each.
  """
  lengths = export.read_record_settings(task, data_dir)
  checkpoint = tuned_run(task, config_file, lengths, str(tmp_path / "run"))
  for name, obj in (run_files or {}).items():
    (tmp_path / "run" / name).write_text(json.dumps(obj))
  records_file = os.path.join(data_dir, "%s_dev.tfrecord" % task)
  proc = start_records_reload(tmp_path / "export", records_file, tmp_path / "served.npz")
  try:
    if export_args is None:
      export.export_record_job(task, checkpoint, data_dir, str(tmp_path / "export"))
    else:
      run_tool(None, ["-m", "etc_model.export_long_model", "--task=" + task,
                      "--checkpoint=%s" % (tmp_path / "run"), "--data_dir=" + data_dir,
                      "--output_dir=%s" % (tmp_path / "export")] + list(export_args))
    config = etc_modeling.EtcConfig.from_dict(json.loads(open(config_file).read()))
    expected = run_long_tasks_outputs(task, config, checkpoint, records_file, lengths,
                                      side_input_options)
  finally:
    if proc.poll() is None and not (tmp_path / "export" / "saved_model.pb").exists():
      proc.kill()
  served = finish_records_reload(proc, tmp_path / "served.npz")
  names, passed = export.RECORD_OUTPUTS[task]
  assert sorted(served) == sorted(names + passed + (("prediction",) if task == "wikihop"
                                                    else ()))
  for name in names + passed:
    assert served[name].shape == expected[name].shape, name
    np.testing.assert_allclose(served[name], expected[name], atol=1e-5, rtol=1e-5,
                               err_msg=name)
  info = json.loads((tmp_path / "export" / export.EXPORT_CONFIG).read_text())
  assert (info["task"], info["max_seq_length"]) == (task, lengths["max_seq_length"])
  return served, expected


def test_record_tasks_refuse_another_tasks_data_and_checkpoint(tmp_path):
  (tmp_path / "hotpotqa").mkdir()
  (tmp_path / "hotpotqa" / "hotpotqa.json").write_text("{}")
  with pytest.raises(common.UsageError) as e:
    export.data_summary("wikihop", str(tmp_path / "hotpotqa"))
  assert str(e.value) == ("--data_dir=%s: has no wikihop.json but hotpotqa.json: the records of "
                          "--task=hotpotqa, not --task=wikihop" % (tmp_path / "hotpotqa"))
  with pytest.raises(common.UsageError) as e:
    export.data_summary("cloze", str(tmp_path / "hotpotqa"))
  assert str(e.value).startswith("--data_dir=%s: has no long_tasks.json but hotpotqa.json" %
                                 (tmp_path / "hotpotqa"))
  (tmp_path / "empty").mkdir()
  with pytest.raises(common.UsageError) as e:
    export.data_summary("nq", str(tmp_path / "empty"))
  assert str(e.value) == ("--data_dir=%s: has no nq.json (write the data with "
                          "etc_model.create_nq)" % (tmp_path / "empty"))
  # A HotpotQA checkpoint exported as WikiHop.
  other = _checkpoint_of_a_head("hotpotqa", str(tmp_path / "other.ckpt"))
  with pytest.raises(common.UsageError, match=r"^--task=wikihop: checkpoint \S+ has no wikihop "
                     r"head \(it was tuned for --task=hotpotqa\)$"):
    export.export_record_model("wikihop", other, None, {}, str(tmp_path / "x"))
  assert not (tmp_path / "x").exists()
  # WikiHop's side-input flags with another task, through the tool.
  proc = run_tool(None, ["-m", "etc_model.export_long_model", "--task=nq",
                         "--candidate_ignore_hard_g2l", "--checkpoint=" + other,
                         "--data_dir=%s" % (tmp_path / "empty"),
                         "--output_dir=%s" % (tmp_path / "x")], expect_rc=2)
  assert last_error_line(proc) == "error: --candidate_ignore_hard_g2l: only with --task=wikihop"
  assert not (tmp_path / "x").exists()
