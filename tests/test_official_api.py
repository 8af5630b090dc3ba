"""The official google-research/bert run_classifier API, used the way its users use it.

Code written against the official script as a library (the TF-Hub notebook
"predicting_movie_reviews_with_bert_on_tf_hub.ipynb", tutorials, the bert-tensorflow package)
must run on ours unchanged: a DataProcessor subclass, InputExample ->
convert_examples_to_features -> input_fn_builder -> model_fn_builder -> TPUEstimator(use_tpu=False)
train / evaluate / predict, the file-based path (TFRecords), main() with --processor=module:Class
or register_processor, and XNLI as the official script reads it. Also run_squad's functions strung
together as its main() does in the user's own TPUEstimator, google-research/bert's own unit tests
(tests/official/) against our modules, and the official --preserve_unused_tokens flag.
"""

import hashlib
import inspect
import json
import os
import sys
import textwrap

from absl.testing import flagsaver
import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, run_tool, write_random_bert_checkpoint

from realformer_tf import classifier_tasks
from realformer_tf import common
import modeling
import run_classifier
import run_pretraining
import run_squad
import tokenization

VOCAB_FILE = os.path.join(REPO_DIR, "data", "vocab.txt")
SST2_SLICE = os.path.join(REPO_DIR, "data", "sst2_slice")
SCRIPT = os.path.join(REPO_DIR, "run_classifier.py")
MAX_SEQ_LENGTH = 32
BATCH_SIZE = 4


# A user's processor, written as the official README tells (it is also written into a module
# file for the --processor run below).
class SentimentProcessor(run_classifier.DataProcessor):
  """Sentences with a 0/1 label; train.tsv / dev.tsv / test.tsv with a header."""

  def get_train_examples(self, data_dir):
    return self._create_examples(
        self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")

  def get_dev_examples(self, data_dir):
    return self._create_examples(
        self._read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

  def get_test_examples(self, data_dir):
    return self._create_examples(
        self._read_tsv(os.path.join(data_dir, "test.tsv")), "test")

  def get_labels(self):
    return ["0", "1"]

  def _create_examples(self, lines, set_type):
    examples = []
    for (i, line) in enumerate(lines):
      if i == 0:
        continue
      guid = "%s-%s" % (set_type, i)
      text_a = tokenization.convert_to_unicode(line[0])
      if set_type == "test":
        label = "0"
      else:
        label = tokenization.convert_to_unicode(line[1])
      examples.append(
          run_classifier.InputExample(guid=guid, text_a=text_a, text_b=None, label=label))
    return examples


def _sst2_rows(file_name, count):
  with open(os.path.join(SST2_SLICE, file_name), encoding="utf-8") as f:
    lines = f.read().splitlines()
  return [line.split("\t") for line in lines[1:count + 1]]


def _write_data(data_dir, n_train=16, n_dev=6, n_test=3):
  """train/dev/test.tsv of real SST-2 sentences (the dev count is not a multiple of 4)."""
  os.makedirs(data_dir, exist_ok=True)
  rows = _sst2_rows("train.tsv", n_train + n_test)
  splits = {"train.tsv": rows[:n_train], "dev.tsv": _sst2_rows("dev.tsv", n_dev),
            "test.tsv": rows[n_train:]}
  for name, subset in splits.items():
    with open(os.path.join(data_dir, name), "w", encoding="utf-8") as f:
      f.write("sentence\tlabel\n" + "".join("%s\t%s\n" % (s, y) for s, y in subset))
  return splits


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  root = tmp_path_factory.mktemp("official_api")
  config_file = str(root / "bert_config.json")
  with open(config_file, "w") as f:
    json.dump(TINY_BERT_CONFIG, f)
  checkpoint = write_random_bert_checkpoint(config_file, str(root / "bert_model.ckpt"))
  data_dir = str(root / "data")
  splits = _write_data(data_dir)
  return dict(root=root, config_file=config_file, checkpoint=checkpoint, data_dir=data_dir,
              splits=splits, tokenizer=tokenization.FullTokenizer(VOCAB_FILE, True),
              bert_config=modeling.BertConfig.from_json_file(config_file))


# ----------------------------------------------------------------------------------------------
# Signatures.

OFFICIAL_SIGNATURES = [
    (run_classifier.InputExample, ["guid", "text_a", "text_b", "label"]),
    (run_classifier.InputFeatures,
     ["input_ids", "input_mask", "segment_ids", "label_id", "is_real_example"]),
    (run_classifier.DataProcessor._read_tsv, ["input_file", "quotechar"]),
    (run_classifier.convert_single_example,
     ["ex_index", "example", "label_list", "max_seq_length", "tokenizer"]),
    (run_classifier.convert_examples_to_features,
     ["examples", "label_list", "max_seq_length", "tokenizer"]),
    (run_classifier.file_based_convert_examples_to_features,
     ["examples", "label_list", "max_seq_length", "tokenizer", "output_file"]),
    (run_classifier.file_based_input_fn_builder,
     ["input_file", "seq_length", "is_training", "drop_remainder"]),
    (run_classifier.input_fn_builder, ["features", "seq_length", "is_training", "drop_remainder"]),
    (run_classifier.create_model,
     ["bert_config", "is_training", "input_ids", "input_mask", "segment_ids", "labels",
      "num_labels", "use_one_hot_embeddings"]),
    (run_classifier.model_fn_builder,
     ["bert_config", "num_labels", "init_checkpoint", "learning_rate", "num_train_steps",
      "num_warmup_steps", "use_tpu", "use_one_hot_embeddings"]),
    (run_classifier._truncate_seq_pair, ["tokens_a", "tokens_b", "max_length"]),
    (run_pretraining.model_fn_builder,
     ["bert_config", "init_checkpoint", "learning_rate", "num_train_steps", "num_warmup_steps",
      "use_tpu", "use_one_hot_embeddings"]),
    (run_pretraining.input_fn_builder,
     ["input_files", "max_seq_length", "max_predictions_per_seq", "is_training"]),
    (run_pretraining.get_masked_lm_output,
     ["bert_config", "input_tensor", "output_weights", "positions", "label_ids",
      "label_weights"]),
    (run_pretraining.get_next_sentence_output, ["bert_config", "input_tensor", "labels"]),
    (run_pretraining.gather_indexes, ["sequence_tensor", "positions"]),
]


@pytest.mark.parametrize("fn,official", OFFICIAL_SIGNATURES,
                         ids=[f.__qualname__ for f, _ in OFFICIAL_SIGNATURES])
def test_official_signatures(fn, official):
  """Official parameters first, in order; anything we add is a keyword with a default."""
  params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
  assert [p.name for p in params[:len(official)]] == official
  assert all(p.default is not inspect.Parameter.empty for p in params[len(official):])


def test_official_processors_and_defaults():
  for cls in (run_classifier.XnliProcessor, run_classifier.MnliProcessor,
              run_classifier.MrpcProcessor, run_classifier.ColaProcessor):
    assert issubclass(cls, run_classifier.DataProcessor)
  assert run_classifier.XnliProcessor().language == "zh"
  assert run_classifier.MnliProcessor().get_labels() == ["contradiction", "entailment",
                                                         "neutral"]
  assert run_classifier.ColaProcessor().get_labels() == ["0", "1"]
  with pytest.raises(NotImplementedError):
    run_classifier.DataProcessor().get_train_examples("x")
  example = run_classifier.InputExample("g", "a")
  assert (example.text_b, example.label) == (None, None)
  assert run_classifier.InputFeatures([1], [1], [0], 3).is_real_example is True


def test_official_glue_processors_read_the_fixtures():
  """Official guids / columns / labels on the GLUE-layout fixtures of test_run_classifier."""
  glue = os.path.join(REPO_DIR, "tests", "fixtures", "glue")
  mrpc = run_classifier.MrpcProcessor()
  train = mrpc.get_train_examples(os.path.join(glue, "MRPC"))
  assert [e.guid for e in train] == ["train-1", "train-2", "train-3"]
  assert [e.label for e in train] == ["1", "0", "1"]
  assert train[0].text_a.startswith("Amrozi accused his brother")
  test = mrpc.get_test_examples(os.path.join(glue, "MRPC"))
  assert {e.label for e in test} == {"0"}  # the official dummy label
  cola = run_classifier.ColaProcessor()
  cola_train = cola.get_train_examples(os.path.join(glue, "CoLA"))  # no header
  assert cola_train[0].guid == "train-0" and cola_train[0].text_b is None
  assert [e.label for e in cola_train] == ["1", "1", "0", "1", "0"]
  assert cola.get_test_examples(os.path.join(glue, "CoLA"))[0].text_a.startswith(
      "Bill whistled past")
  mnli = run_classifier.MnliProcessor().get_dev_examples(os.path.join(glue, "MNLI"))
  assert [e.label for e in mnli] == ["neutral", "contradiction", "entailment"]
  assert mnli[0].guid.startswith("dev_matched-")


# ----------------------------------------------------------------------------------------------
# convert_single_example against ids built by hand.


def test_convert_single_example_by_hand(tiny):
  tokenizer = tiny["tokenizer"]
  vocab = tokenization.load_vocab(VOCAB_FILE)
  a = "An entertaining, if somewhat standardized, action movie."
  b = "Don't let your festive spirit go this far."
  tokens_a, tokens_b = tokenizer.tokenize(a), tokenizer.tokenize(b)
  assert (len(tokens_a), len(tokens_b)) == (10, 12)
  # max_seq_length 16 leaves 13 for a + b. Dropping one token at a time from the longer one
  # (from b on ties): (10,12) (10,11) (10,10) (10,9) (9,9) (9,8) (8,8) (8,7) (7,7) (7,6).
  expected = ["[CLS]"] + tokens_a[:7] + ["[SEP]"] + tokens_b[:6] + ["[SEP]"]
  assert expected[1:8] == ["an", "entertaining", ",", "if", "somewhat", "standardized", ","]
  feature = run_classifier.convert_single_example(
      3, run_classifier.InputExample("x", a, b, label="1"), ["0", "1"], 16, tokenizer)
  assert feature.input_ids == [vocab[t] for t in expected]
  assert feature.segment_ids == [0] * 9 + [1] * 7
  assert feature.input_mask == [1] * 16
  assert (feature.label_id, feature.is_real_example) == (1, True)

  # Single sentence: [CLS] a [SEP], cut to max_seq_length - 2 = 6 tokens.
  c = "A major waste...generic."
  tokens_c = tokenizer.tokenize(c)
  assert tokens_c == ["a", "major", "waste", ".", ".", ".", "generic", "."]
  feature = run_classifier.convert_single_example(
      0, run_classifier.InputExample("y", c, None, label="0"), ["0", "1"], 8, tokenizer)
  assert feature.input_ids == [vocab[t] for t in ["[CLS]"] + tokens_c[:6] + ["[SEP]"]]
  assert feature.segment_ids == [0] * 8 and feature.label_id == 0

  # Padding with zeros; integer labels as the TF-Hub notebook has them (label_list = [0, 1]).
  feature = run_classifier.convert_single_example(
      0, run_classifier.InputExample(None, c, None, label=1), [0, 1], 12, tokenizer)
  assert feature.input_ids == [vocab[t] for t in ["[CLS]"] + tokens_c + ["[SEP]"]] + [0, 0]
  assert feature.input_mask == [1] * 10 + [0, 0]
  assert feature.label_id == 1

  # An empty text_b is a single sentence, as officially (budget 10 - 2 keeps all 8 tokens).
  feature = run_classifier.convert_single_example(
      0, run_classifier.InputExample("z", c, "", label="1"), ["0", "1"], 10, tokenizer)
  assert feature.input_ids == [vocab[t] for t in ["[CLS]"] + tokens_c + ["[SEP]"]]
  assert feature.segment_ids == [0] * 10

  pad = run_classifier.convert_single_example(
      0, run_classifier.PaddingInputExample(), ["0", "1"], 5, tokenizer)
  assert (pad.input_ids, pad.input_mask, pad.segment_ids) == ([0] * 5,) * 3
  assert (pad.label_id, pad.is_real_example) == (0, False)

  # An unknown label: one line naming the example (the official code raised a bare KeyError).
  with pytest.raises(common.UsageError, match="example w: label '2' is not one of the labels"):
    run_classifier.convert_single_example(
        0, run_classifier.InputExample("w", c, None, label="2"), ["0", "1"], 8, tokenizer)


# ----------------------------------------------------------------------------------------------
# The notebook's sequence, with the official TPUEstimator usage (use_tpu=False).


def _estimator(model_fn, model_dir):
  run_config = tf.compat.v1.estimator.tpu.RunConfig(
      model_dir=model_dir,
      tf_random_seed=7,
      save_checkpoints_steps=1000,
      tpu_config=tf.compat.v1.estimator.tpu.TPUConfig(
          iterations_per_loop=1000,
          num_shards=8,
          per_host_input_for_training=(
              tf.compat.v1.estimator.tpu.InputPipelineConfig.PER_HOST_V2)))
  return tf.compat.v1.estimator.tpu.TPUEstimator(
      use_tpu=False,
      model_fn=model_fn,
      config=run_config,
      train_batch_size=BATCH_SIZE,
      eval_batch_size=BATCH_SIZE,
      predict_batch_size=BATCH_SIZE)


@pytest.fixture(scope="module")
def notebook_run(tiny):
  """Trains 4 steps as the notebook does; evaluates and predicts the dev set."""
  processor = SentimentProcessor()
  label_list = processor.get_labels()
  train_examples = processor.get_train_examples(tiny["data_dir"])
  dev_examples = processor.get_dev_examples(tiny["data_dir"])
  tokenizer = tiny["tokenizer"]
  train_features = run_classifier.convert_examples_to_features(
      train_examples, label_list, MAX_SEQ_LENGTH, tokenizer)
  dev_features = run_classifier.convert_examples_to_features(
      dev_examples, label_list, MAX_SEQ_LENGTH, tokenizer)
  num_train_steps = int(len(train_examples) / BATCH_SIZE * 1.0)
  model_fn = run_classifier.model_fn_builder(
      bert_config=tiny["bert_config"],
      num_labels=len(label_list),
      init_checkpoint=tiny["checkpoint"],
      learning_rate=1e-3,
      num_train_steps=num_train_steps,
      num_warmup_steps=1,
      use_tpu=False,
      use_one_hot_embeddings=False)
  model_dir = str(tiny["root"] / "notebook_model")
  estimator = _estimator(model_fn, model_dir)
  train_input_fn = run_classifier.input_fn_builder(
      features=train_features, seq_length=MAX_SEQ_LENGTH, is_training=True,
      drop_remainder=False)
  estimator.train(input_fn=train_input_fn, max_steps=num_train_steps)
  eval_input_fn = run_classifier.input_fn_builder(
      features=dev_features, seq_length=MAX_SEQ_LENGTH, is_training=False, drop_remainder=False)
  eval_result = estimator.evaluate(input_fn=eval_input_fn, steps=None)
  predictions = list(estimator.predict(input_fn=eval_input_fn))
  return dict(estimator=estimator, model_dir=model_dir, label_list=label_list,
              train_examples=train_examples, dev_examples=dev_examples,
              dev_features=dev_features, eval_result=eval_result, predictions=predictions,
              num_train_steps=num_train_steps)


def test_notebook_train_evaluate_predict(tiny, notebook_run):
  run = notebook_run
  assert run["num_train_steps"] == 4
  assert [e.label for e in run["train_examples"]] == [y for _, y in tiny["splits"]["train.tsv"]]
  assert run["train_examples"][0].text_a == tiny["splits"]["train.tsv"][0][0]
  result = run["eval_result"]
  assert result["global_step"] == 4
  assert set(result) >= {"eval_accuracy", "eval_loss", "loss", "global_step"}
  # PREDICT gives the official {"probabilities": [num_labels]} per example.
  predictions = run["predictions"]
  assert len(predictions) == len(run["dev_examples"]) == 6
  assert all(set(p) == {"probabilities"} for p in predictions)
  probs = np.array([p["probabilities"] for p in predictions])
  assert probs.shape == (6, 2) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
  # EVAL's metrics equal what the same checkpoint's probabilities give.
  labels = np.array([f.label_id for f in run["dev_features"]])
  assert result["eval_accuracy"] == pytest.approx(np.mean(probs.argmax(axis=1) == labels))
  nll = -np.log(probs[np.arange(len(labels)), labels])
  assert result["eval_loss"] == pytest.approx(nll.mean(), rel=1e-4)
  # init_checkpoint was loaded: position rows the 32-token inputs never reach moved only by
  # weight decay, so they are still the pre-trained (random) values.
  trained = tf.train.load_variable(run["model_dir"], "bert/embeddings/position_embeddings")
  initial = tf.train.load_variable(tiny["checkpoint"], "bert/embeddings/position_embeddings")
  assert np.allclose(trained[MAX_SEQ_LENGTH:], initial[MAX_SEQ_LENGTH:], rtol=1e-3, atol=1e-6)
  assert not np.allclose(trained[:MAX_SEQ_LENGTH], initial[:MAX_SEQ_LENGTH], atol=1e-6)


def test_file_based_path(tiny, notebook_run):
  """TFRecords with the official features; TPU-style padded eval ignores the padding."""
  run = notebook_run
  label_list = run["label_list"]
  dev = list(run["dev_examples"])
  while len(dev) % BATCH_SIZE:
    dev.append(run_classifier.PaddingInputExample())
  assert len(dev) == 8
  eval_file = str(tiny["root"] / "eval.tf_record")
  run_classifier.file_based_convert_examples_to_features(
      dev, label_list, MAX_SEQ_LENGTH, tiny["tokenizer"], eval_file)
  records = [tf.train.Example.FromString(r.numpy())
             for r in tf.data.TFRecordDataset(eval_file)]
  assert len(records) == 8
  for record, feature in zip(records, run["dev_features"] + [None, None]):
    f = record.features.feature
    assert set(f.keys()) == {"input_ids", "input_mask", "segment_ids", "label_ids",
                             "is_real_example"}
    if feature is None:
      assert list(f["input_ids"].int64_list.value) == [0] * MAX_SEQ_LENGTH
      assert list(f["is_real_example"].int64_list.value) == [0]
    else:
      assert list(f["input_ids"].int64_list.value) == feature.input_ids
      assert list(f["segment_ids"].int64_list.value) == feature.segment_ids
      assert list(f["label_ids"].int64_list.value) == [feature.label_id]
      assert list(f["is_real_example"].int64_list.value) == [1]
  eval_input_fn = run_classifier.file_based_input_fn_builder(
      input_file=eval_file, seq_length=MAX_SEQ_LENGTH, is_training=False, drop_remainder=True)
  result = run["estimator"].evaluate(input_fn=eval_input_fn, steps=len(dev) // BATCH_SIZE)
  # Same numbers as the 6 unpadded examples: the 2 padding ones have weight 0.
  assert result["eval_accuracy"] == pytest.approx(run["eval_result"]["eval_accuracy"])
  assert result["eval_loss"] == pytest.approx(run["eval_result"]["eval_loss"], rel=1e-5)

  # Training from a TFRecord file, as run_classifier.py's own main does.
  train_file = str(tiny["root"] / "train.tf_record")
  run_classifier.file_based_convert_examples_to_features(
      run["train_examples"], label_list, MAX_SEQ_LENGTH, tiny["tokenizer"], train_file)
  model_fn = run_classifier.model_fn_builder(
      tiny["bert_config"], len(label_list), tiny["checkpoint"], 1e-3, 2, 0, False, False)
  estimator = _estimator(model_fn, str(tiny["root"] / "file_model"))
  estimator.train(input_fn=run_classifier.file_based_input_fn_builder(
      train_file, MAX_SEQ_LENGTH, True, True), max_steps=2)
  assert estimator.get_variable_value("global_step") == 2
  assert estimator.get_variable_value("output_weights").shape == (2, 32)


# ----------------------------------------------------------------------------------------------
# main() with a user's processor, and XNLI.


def _run(args, cwd, env_extra=None, script=SCRIPT):
  """`script` (a path) with `args` from `cwd` (conftest.run_tool); returns (status, output)."""
  proc = run_tool(None, [script] + list(args), expect_rc=None, timeout=240, env=env_extra,
                  cwd=str(cwd))
  return proc.returncode, proc.output


def _model_args(tiny, out, seq=MAX_SEQ_LENGTH):
  return ["--vocab_file=%s" % VOCAB_FILE, "--bert_config_file=%s" % tiny["config_file"],
          "--init_checkpoint=%s" % tiny["checkpoint"], "--output_dir=%s" % out,
          "--max_seq_length=%d" % seq, "--train_batch_size=4", "--eval_batch_size=4",
          "--predict_batch_size=4", "--learning_rate=1e-3", "--num_train_epochs=1"]


def _write_user_module(directory):
  source = ("import os\n\nimport run_classifier\nimport tokenization\n\n\n" +
            inspect.getsource(SentimentProcessor))
  (directory / "my_processors.py").write_text(source)


@pytest.mark.slow
def test_main_with_processor_flag(tiny, tmp_path):
  _write_user_module(tmp_path)
  out = tmp_path / "out"
  rc, log = _run(["--processor=my_processors:SentimentProcessor",
                  "--data_dir=%s" % tiny["data_dir"], "--do_train", "--do_eval",
                  "--do_predict"] + _model_args(tiny, out), cwd=tmp_path)
  assert rc == 0, log[-4000:]
  results = json.loads((out / "eval_results.json").read_text())
  assert results["global_step"] == 4  # 16 examples / batch 4 * 1 epoch
  assert results["eval_num_examples"] == 6
  assert 0.0 <= results["eval_accuracy"] <= 1.0
  assert (out / "labels.txt").read_text() == "0\n1\n"
  probs = np.array([[float(x) for x in line.split("\t")]
                    for line in (out / "test_results.tsv").read_text().splitlines()])
  assert probs.shape == (3, 2) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
  lines = (out / "test_predictions.tsv").read_text().splitlines()
  assert lines[0] == "index\tprediction"
  assert [line.split("\t")[0] for line in lines[1:]] == ["test-1", "test-2", "test-3"]
  assert [line.split("\t")[1] for line in lines[1:]] == [
      "01"[int(np.argmax(p))] for p in probs]


def test_bad_processor_flags_are_one_line_errors(tmp_path, monkeypatch):
  _write_user_module(tmp_path)
  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(sys, "path", list(sys.path))
  try:
    usage_error = run_classifier.common.UsageError
    with pytest.raises(usage_error, match="module my_processors has no NoSuchClass"):
      classifier_tasks.load_processor_class("my_processors:NoSuchClass")
    with pytest.raises(usage_error, match="expected MODULE:CLASS"):
      classifier_tasks.load_processor_class("my_processors")
    with pytest.raises(usage_error, match="cannot import no_such_module"):
      classifier_tasks.load_processor_class("no_such_module:X")
    # A path to a .py file works as well as a module name.
    cls = classifier_tasks.load_processor_class(str(tmp_path / "my_processors.py") +
                                              ":SentimentProcessor")
    assert cls().get_labels() == ["0", "1"]
  finally:
    sys.modules.pop("my_processors", None)


def test_register_processor_then_main(tiny, tmp_path):
  """A user's script registers its processor and runs our main() (predict only)."""
  _write_user_module(tmp_path)
  (tmp_path / "my_train.py").write_text(textwrap.dedent("""
      import run_classifier
      from my_processors import SentimentProcessor

      run_classifier.register_processor("sentiment", SentimentProcessor)

      if __name__ == "__main__":
        run_classifier.run()
  """))
  out = tmp_path / "out"
  rc, log = _run(["--task_name=sentiment", "--data_dir=%s" % tiny["data_dir"], "--do_predict"] +
                 _model_args(tiny, out), cwd=tmp_path, env_extra={"PYTHONPATH": REPO_DIR},
                 script=str(tmp_path / "my_train.py"))
  assert rc == 0, log[-4000:]
  assert len((out / "test_results.tsv").read_text().splitlines()) == 3
  # In-process: the registry, and a missing file is one line naming it.
  run_classifier.register_processor("sentiment_test", SentimentProcessor)
  try:
    task = classifier_tasks.get_task("Sentiment_Test")
    assert (task.labels, task.metrics) == (["0", "1"], ("accuracy",))
    examples = classifier_tasks.task_examples(task, task.dev[0], tiny["data_dir"], "dev")
    assert [e.text_a for e in examples] == [s for s, _ in tiny["splits"]["dev.tsv"]]
    with pytest.raises(run_classifier.common.UsageError, match="get_dev_examples"):
      classifier_tasks.task_examples(task, task.dev[0], str(tmp_path / "none"), "dev")
  finally:
    del classifier_tasks.PROCESSORS["sentiment_test"]


XNLI_DEV_HEADER = ("language gold_label sentence1_binary_parse sentence2_binary_parse "
                   "sentence1_parse sentence2_parse sentence1 sentence2 promptID pairID genre "
                   "label1 label2 label3 label4 label5 sentence1_tokenized sentence2_tokenized "
                   "match").split()


def _write_xnli(root):
  """XNLI-MT 1.0's multinli/ folder and XNLI 1.0's xnli.dev.tsv, a few rows each."""
  (root / "multinli").mkdir(parents=True)
  train = [("Der Hund schläft im Garten.", "Ein Tier ruht.", "entailment"),
           ("Es regnet heute stark.", "Die Sonne scheint.", "contradictory"),
           ("Sie kauft Brot.", "Sie hat Hunger.", "neutral"),
           ("Das Kind lacht.", "Das Kind weint.", "contradictory")]
  (root / "multinli" / "multinli.train.de.tsv").write_text(
      "premise\thypo\tlabel\n" + "".join("%s\t%s\t%s\n" % r for r in train), encoding="utf-8")
  dev = [("en", "neutral", "A man eats.", "He is hungry."),
         ("de", "entailment", "Ein Mann isst.", "Jemand isst."),
         ("zh", "contradiction", "他在睡觉。", "他在跑步。"),
         ("de", "contradiction", "Die Tür ist offen.", "Die Tür ist zu."),
         ("de", "neutral", "Er liest ein \"Buch\".", "Es ist spannend.")]
  rows = []
  for lang, label, s1, s2 in dev:
    fields = [lang, label, "(x)", "(y)", "(ROOT x)", "(ROOT y)", s1, s2, "1", "1a", "fiction",
              label, label, label, label, label, s1, s2, "True"]
    rows.append("\t".join(fields))
  (root / "xnli.dev.tsv").write_text("\t".join(XNLI_DEV_HEADER) + "\n" + "\n".join(rows) + "\n",
                                     encoding="utf-8")


def test_xnli_processor_and_main(tiny, tmp_path):
  data = tmp_path / "xnli"
  _write_xnli(data)
  processor = run_classifier.XnliProcessor()
  processor.language = "de"
  train = processor.get_train_examples(str(data))
  assert [e.guid for e in train] == ["train-1", "train-2", "train-3", "train-4"]
  assert [e.label for e in train] == ["entailment", "contradiction", "neutral", "contradiction"]
  assert train[1].text_a == "Es regnet heute stark." and train[1].text_b == "Die Sonne scheint."
  dev = processor.get_dev_examples(str(data))
  # Row numbers count every language's rows; quotes are kept as text (quotechar=None).
  assert [e.guid for e in dev] == ["dev-2", "dev-4", "dev-5"]
  assert [e.label for e in dev] == ["entailment", "contradiction", "neutral"]
  assert dev[2].text_a == "Er liest ein \"Buch\"."
  assert {e.label for e in train + dev} <= set(processor.get_labels())

  out = tmp_path / "out"
  rc, log = _run(["--task_name=xnli", "--xnli_language=de", "--data_dir=%s" % data,
                  "--do_train", "--do_eval"] + _model_args(tiny, out), cwd=tmp_path)
  assert rc == 0, log[-4000:]
  results = json.loads((out / "eval_results.json").read_text())
  assert results["eval_num_examples"] == 3 and results["global_step"] == 1
  assert (out / "labels.txt").read_text() == "contradiction\nentailment\nneutral\n"
  # --xnli_language picks the language; one without a training file is one line naming it.
  flag_values = type("Flags", (), {"processor": None, "xnli_language": "fr"})()
  task = classifier_tasks.get_task("xnli", flag_values)
  assert task.processor.language == "fr"
  with pytest.raises(run_classifier.common.UsageError, match=r"multinli\.train\.fr\.tsv"):
    classifier_tasks.task_examples(task, task.train, str(data), "train")


# ----------------------------------------------------------------------------------------------
# run_squad as a library, as the official main() strings it together: examples -> FeatureWriter
# TFRecords -> model_fn_builder / input_fn_builder in the user's TPUEstimator -> predictions.


def test_run_squad_as_a_library(tiny):
  squad_file = os.path.join(REPO_DIR, "tests", "fixtures", "squad", "tiny-v1.1.json")
  root = tiny["root"] / "squad_library"
  root.mkdir()
  tokenizer = tiny["tokenizer"]
  train_examples = run_squad.read_squad_examples(input_file=squad_file, is_training=True)
  train_writer = run_squad.FeatureWriter(filename=str(root / "train.tf_record"),
                                         is_training=True)
  run_squad.convert_examples_to_features(
      examples=train_examples, tokenizer=tokenizer, max_seq_length=MAX_SEQ_LENGTH,
      doc_stride=16, max_query_length=12, is_training=True,
      output_fn=train_writer.process_feature)
  train_writer.close()
  model_fn = run_squad.model_fn_builder(
      bert_config=tiny["bert_config"], init_checkpoint=tiny["checkpoint"], learning_rate=1e-3,
      num_train_steps=2, num_warmup_steps=0, use_tpu=False, use_one_hot_embeddings=False)
  estimator = _estimator(model_fn, str(root / "model"))
  estimator.train(input_fn=run_squad.input_fn_builder(
      input_file=train_writer.filename, seq_length=MAX_SEQ_LENGTH, is_training=True,
      drop_remainder=True), max_steps=2)
  assert estimator.get_variable_value("global_step") == 2

  eval_examples = run_squad.read_squad_examples(input_file=squad_file, is_training=False)
  eval_features = []
  eval_writer = run_squad.FeatureWriter(filename=str(root / "eval.tf_record"),
                                        is_training=False)

  def append_feature(feature):
    eval_features.append(feature)
    eval_writer.process_feature(feature)

  run_squad.convert_examples_to_features(
      examples=eval_examples, tokenizer=tokenizer, max_seq_length=MAX_SEQ_LENGTH,
      doc_stride=16, max_query_length=12, is_training=False, output_fn=append_feature)
  eval_writer.close()
  all_results = [
      run_squad.RawResult(unique_id=int(result["unique_ids"]),
                          start_logits=[float(x) for x in result["start_logits"].flat],
                          end_logits=[float(x) for x in result["end_logits"].flat])
      for result in estimator.predict(input_fn=run_squad.input_fn_builder(
          input_file=eval_writer.filename, seq_length=MAX_SEQ_LENGTH, is_training=False,
          drop_remainder=False), yield_single_examples=True)]
  assert sorted(r.unique_id for r in all_results) == sorted(f.unique_id for f in eval_features)
  files = [str(root / name) for name in ("predictions.json", "nbest.json", "null_odds.json")]
  run_squad.write_predictions(eval_examples, eval_features, all_results, 5, 10, True, *files)
  with open(files[0]) as f:
    predictions = json.load(f)
  assert set(predictions) == {e.qas_id for e in eval_examples}


# ----------------------------------------------------------------------------------------------
# google-research/bert's own unit tests (tests/official/, the bert-tensorflow 1.0.4 text) pass
# on our modeling, tokenization and optimization.

OFFICIAL_DIR = os.path.join(REPO_DIR, "tests", "official")
# sha256 of bert/<name>.py in bert_tensorflow-1.0.4-py2.py3-none-any.whl: kept byte for byte.
OFFICIAL_FILES = {
    "modeling.py": "c00c4ea3c8108154179f87855e2eb22529e7a2296e378fea791cf5bd9d793832",
    "modeling_test.py": "f0d03cf39a48bcb48dbc0ac465acf56b3a82cf422016ab686292c06ddc8efee5",
    "optimization_test.py": "2a7f8b106545c8b21d40266a61783d21ea686e0c3296a2ffbfe0f36a9e7547dd",
    "tokenization_test.py": "ee44f590bc3731596e46a8f6d349099c9682d4ab86c921c1803594faf9d6b061",
}


def test_official_unit_tests_pass():
  for name, digest in OFFICIAL_FILES.items():
    with open(os.path.join(OFFICIAL_DIR, name), "rb") as f:
      assert hashlib.sha256(f.read()).hexdigest() == digest, name + " is not the official text"
  proc = run_tool(None, [os.path.join(OFFICIAL_DIR, "run_official_tests.py")], expect_rc=None,
                  timeout=240)
  assert proc.returncode == 0, proc.output[-6000:]
  # Every official test ran (test_session is the TestCase helper, skipped as "Not a test").
  for test in ("test_default", "test_config_to_json_string", "test_adam", "test_full_tokenizer",
               "test_full_tokenizer_preserve_unused", "test_chinese", "test_wordpiece_tokenizer",
               "test_convert_tokens_to_ids", "test_is_punctuation"):
    assert "%s (" % test in proc.stdout and "FAIL" not in proc.stdout, test
  assert "Ran 16 tests" in proc.output


def test_preserve_unused_tokens_flag(tmp_path):
  """The official flag: library tokenizers keep vocab [unusedN] tokens; tools refuse it."""
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n[unused0]\nx\n")
  tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  text = "x [unused0] [UNUSED0] [unused1]"
  assert tokenizer.tokenize(text) == ["x"] + ["[UNK]"] * 9
  with flagsaver.flagsaver(preserve_unused_tokens=True):
    # Only as written and only if in the vocab; upper case is split as without the flag.
    assert tokenizer.tokenize(text) == ["x", "[unused0]"] + ["[UNK]"] * 6
    assert tokenizer.tokenize_to_ids(text) == [6, 5] + [1] * 6
    basic = tokenization.BasicTokenizer(do_lower_case=True, vocab=tokenizer.vocab)
    assert basic.tokenize(text) == ["x", "[unused0]", "[", "unused0", "]", "[", "unused1", "]"]
    with pytest.raises(common.UsageError, match="--preserve_unused_tokens=true: only the "):
      tokenization.checked_tokenizer(str(vocab_file), True)
  assert tokenizer.tokenize(text) == ["x"] + ["[UNK]"] * 9
