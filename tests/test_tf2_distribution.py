"""The TF2 engine's strategies from the command line: several workers and TPU.

On both TFs, in process: every training command makes its strategy first thing in main and
takes --distribution_strategy=multi_worker_mirrored on the engine; check_flags takes the TPU
flags where a command makes a TPUStrategy (not --iterations_per_loop: the engine has no inner
loop of several steps); command_strategy builds TPUClusterResolver from --tpu_name,
--tpu_zone and --gcp_project or --master, and checks --num_tpu_cores; check_multi_worker_job,
worker_output_dir and worker_settings keep a worker other than the chief out of --output_dir;
Engine.predict on TPU pads a last partial batch and yields the examples only.
On the newest TF: run_classifier.py with --use_tpu trains, evaluates and predicts on the engine
"as on TPU" (no TPU here: the resolver and the TPU system are stand-ins, the strategy the
default one that the engine treats as TPU): every input has static batch shapes (the engine
refuses any other on TPU) and no test example is dropped.
"""

import ast
import collections
import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, run_tool
from realformer_tf import common
from realformer_tf import tf2_training
from test_tf2_training import _job_args, model, newest_tf_only  # pylint: disable=unused-import

# The commands that train on the engine, with the flag set name check_flags shows.
COMMANDS = ("run_classifier.py", "run_squad.py", "run_ner.py", "run_pretraining.py",
            "translation/run_translation.py", "etc_model/run_pretraining.py",
            "etc_model/run_long_tasks.py")
# Those that make a TPUStrategy of --use_tpu on the engine (static-shape inputs as the
# Estimator's with --use_tpu); translation's token-budget batches and ETC's stay refused.
TPU_COMMANDS = ("run_classifier.py", "run_squad.py", "run_ner.py", "run_pretraining.py")


def _function(tree, name):
  return next(node for node in ast.walk(tree)
              if isinstance(node, ast.FunctionDef) and node.name == name)


def _calls(node, attribute):
  """The calls `tf2_training.<attribute>(...)` under `node`."""
  return [call for call in ast.walk(node) if isinstance(call, ast.Call) and
          isinstance(call.func, ast.Attribute) and call.func.attr == attribute and
          isinstance(call.func.value, ast.Name) and call.func.value.id == "tf2_training"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_training_command_makes_its_strategy_first_and_runs_several_workers(command):
  tree = ast.parse(open(os.path.join(REPO_DIR, command)).read())
  check = _calls(_function(tree, "_check_engine_flags"), "check_flags")
  assert len(check) == 1
  keywords = {k.arg: getattr(k.value, "value", None) for k in check[0].keywords}
  assert keywords.get("multi_worker") is True
  assert keywords.get("tpu", False) is (command in TPU_COMMANDS)
  main = _function(tree, "main")
  # The strategy is made in main right after the flag checks, before any other work.
  statements = [s for s in main.body if not isinstance(s, ast.Expr) or
                not isinstance(s.value, ast.Constant)]
  made = next(i for i, s in enumerate(statements) if _calls(s, "command_strategy"))
  before = [ast.unparse(s) for s in statements[:made]]
  assert all(s.startswith(("tf1.logging.set_verbosity", "_check_flags()", "_check_engine_flags()",
                           "_configure_cpu_devices(", "if not FLAGS.output_dir:",
                           "common.check_output_dir(", "common.require_file("))
             for s in before), before
  assert _calls(main, "check_multi_worker_job")
  # No other strategy deep in the job (it would come after TensorFlow started).
  assert not _calls(tree, "make_strategy")


def _flag_values(**overrides):
  values = dict(tf2_training.ESTIMATOR_ONLY_FLAGS, distribution_strategy="none", num_gpus=None)
  values.update(overrides)
  return types.SimpleNamespace(**values)


def test_check_flags_takes_the_tpu_flags_where_the_command_makes_a_tpu_strategy():
  tpu_flags = _flag_values(use_tpu=True, tpu_name="t1", tpu_zone="z", gcp_project="p",
                           num_tpu_cores=32)
  tf2_training.check_flags(tpu_flags, "run_classifier.py", tpu=True)
  tf2_training.check_flags(_flag_values(use_tpu=True, master="grpc://10.0.0.2:8470"),
                           "run_classifier.py", tpu=True)
  with pytest.raises(common.UsageError, match="^--use_tpu: implemented by the Estimator only"):
    tf2_training.check_flags(tpu_flags, "-m etc_model.run_pretraining")
  # One step per call of the engine's training step: the Estimator's inner loop stays its own.
  with pytest.raises(common.UsageError,
                     match="^--iterations_per_loop=100: implemented by the Estimator only"):
    tf2_training.check_flags(_flag_values(use_tpu=True, tpu_name="t1", iterations_per_loop=100),
                             "run_classifier.py", tpu=True)


class _Recorder(object):
  """Stand-ins for the TPU calls of make_strategy: records their arguments."""

  def __init__(self, monkeypatch, cores):
    self.calls = []
    recorder = self

    class Resolver(object):
      def __init__(self, tpu=None, zone=None, project=None):
        recorder.calls.append(("TPUClusterResolver", tpu, zone, project))

    class Strategy(object):
      def __init__(self, resolver):
        recorder.calls.append(("TPUStrategy", type(resolver).__name__))
        self.num_replicas_in_sync = cores

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                        lambda resolver: self.calls.append(("connect",)))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                        lambda resolver: self.calls.append(("initialize_tpu_system",)))
    monkeypatch.setattr(tf.distribute, "TPUStrategy", Strategy)


def test_command_strategy_connects_to_the_tpu_of_the_flags(monkeypatch):
  recorder = _Recorder(monkeypatch, cores=32)
  strategy = tf2_training.command_strategy(_flag_values(
      use_tpu=True, tpu_name="my-tpu", tpu_zone="us-central1-b", gcp_project="proj",
      num_tpu_cores=32))
  assert strategy.num_replicas_in_sync == 32
  assert recorder.calls == [("TPUClusterResolver", "my-tpu", "us-central1-b", "proj"),
                            ("connect",), ("initialize_tpu_system",), ("TPUStrategy", "Resolver")]
  # --master: the TPU's address, as the Estimator's RunConfig takes it.
  recorder.calls[:] = []
  tf2_training.command_strategy(_flag_values(use_tpu=True, master="grpc://10.0.0.2:8470",
                                             num_tpu_cores=32))
  assert recorder.calls[0] == ("TPUClusterResolver", "grpc://10.0.0.2:8470", None, None)


def test_num_tpu_cores_other_than_the_tpus_is_one_line(monkeypatch):
  _Recorder(monkeypatch, cores=8)
  with pytest.raises(common.UsageError, match=r"^--num_tpu_cores=32: the TPU my-tpu has 8 "
                     r"cores; pass --num_tpu_cores=8$"):
    tf2_training.command_strategy(_flag_values(use_tpu=True, tpu_name="my-tpu",
                                               num_tpu_cores=32))


def test_a_tpu_that_cannot_be_reached_is_one_line(monkeypatch):
  _Recorder(monkeypatch, cores=8)

  def unreachable(resolver):
    raise tf.errors.UnavailableError(None, None, "failed to connect to all addresses\nmore")
  monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", unreachable)
  with pytest.raises(common.UsageError, match=r"^--master=grpc://10.0.0.2:8470: cannot connect "
                     r"to the TPU \(failed to connect to all addresses\)$"):
    tf2_training.command_strategy(_flag_values(use_tpu=True, master="grpc://10.0.0.2:8470"))


def test_predict_on_tpu_pads_a_last_partial_batch_and_yields_the_examples_only(monkeypatch,
                                                                               tmp_path):
  inputs = {"x": np.arange(15, dtype=np.float32).reshape(5, 3), "id": np.arange(5)}

  def model_fn(features, is_training):  # pylint: disable=unused-argument
    kernel = tf.compat.v1.get_variable("kernel", [3, 1],
                                       initializer=tf.compat.v1.ones_initializer())
    return None, {"prediction": tf.matmul(features["x"], kernel)[:, 0], "id": features["id"]}

  def input_fn(params):  # batches of 2, the last one partial
    return tf.data.Dataset.from_tensor_slices(inputs).batch(params["batch_size"])

  want = list(tf2_training.Engine(model_fn, str(tmp_path)).predict(input_fn, batch_size=2))
  monkeypatch.setattr(tf2_training, "is_tpu_strategy", lambda strategy: True)
  engine = tf2_training.Engine(model_fn, str(tmp_path))
  got = list(engine.predict(input_fn, batch_size=2))
  assert [row["id"] for row in got] == list(range(5))
  assert [row["prediction"] for row in got] == [row["prediction"] for row in want] == [
      3.0, 12.0, 21.0, 30.0, 39.0]
  assert sorted(got[0]) == ["id", "prediction"]
  # Batch by batch (an evaluation's losses) a partial batch stays a one-line error on TPU.
  with pytest.raises(common.UsageError, match="^TPUStrategy needs static shapes: the prediction "
                     "input's id is"):
    next(engine.predict_batches(input_fn, batch_size=2))


@pytest.fixture
def second_worker(monkeypatch):
  """This process as worker 1 of a two-worker job (a stand-in multi-worker strategy)."""
  monkeypatch.setenv("TF_CONFIG", json.dumps({
      "cluster": {"worker": ["localhost:1", "localhost:2"]},
      "task": {"type": "worker", "index": 1}}))
  monkeypatch.setattr(tf2_training, "is_multi_worker", lambda strategy: strategy == "workers")
  return "workers"


def test_check_multi_worker_job_refuses_what_the_workers_cannot_run_alike(second_worker):
  tf2_training.check_multi_worker_job(second_worker, True, [("--eval_every_steps=0", False)])
  tf2_training.check_multi_worker_job(None, False, [("--eval_every_steps=5", True)])
  with pytest.raises(common.UsageError, match="^--distribution_strategy=multi_worker_mirrored: "
                     "needs --do_train"):
    tf2_training.check_multi_worker_job(second_worker, False)
  with pytest.raises(common.UsageError, match="^--eval_every_steps=5: not with "
                     "--distribution_strategy=multi_worker_mirrored"):
    tf2_training.check_multi_worker_job(second_worker, True, [("--eval_every_steps=5", True)])


Settings = collections.namedtuple("Settings", ["output_dir", "model_dir", "strategy", "do_eval",
                                               "export_dir"])


def test_a_worker_other_than_the_chief_writes_nothing_into_output_dir(second_worker, tmp_path,
                                                                      monkeypatch):
  out = str(tmp_path / "out")
  settings = Settings(out, out, second_worker, True, "export")
  assert not tf2_training.is_chief_worker(second_worker)
  worker = tf2_training.worker_settings(settings, do_eval=False, export_dir=None)
  # Its own directory, outside --output_dir; the engine's checkpoints stay in --output_dir.
  assert os.path.isdir(worker.output_dir)
  assert not os.path.abspath(worker.output_dir).startswith(os.path.abspath(out))
  assert (worker.model_dir, worker.do_eval, worker.export_dir) == (out, False, None)
  # The chief, a single process and the Estimator's job run the settings as they are.
  assert tf2_training.worker_settings(settings._replace(strategy=None), do_eval=False) == \
      settings._replace(strategy=None)
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]},
                                        "task": {"type": "worker", "index": 0}}))
  assert tf2_training.is_chief_worker(second_worker)
  assert tf2_training.worker_settings(settings, do_eval=False) == settings
  assert tf2_training.worker_output_dir(out, second_worker) == out


# run_classifier.py on the engine "as on TPU": the TPU calls are stand-ins that log their
# arguments, TPUStrategy the default strategy, which the engine treats as a TPU's.
AS_ON_TPU = r"""
import sys
import tensorflow as tf
from realformer_tf import tf2_training


class Resolver(object):
  def __init__(self, tpu=None, zone=None, project=None):
    print("TPUClusterResolver(tpu=%s, zone=%s, project=%s)" % (tpu, zone, project),
          file=sys.stderr)


class Strategy(object):
  def __new__(cls, resolver):
    return tf.distribute.get_strategy()


tf.distribute.cluster_resolver.TPUClusterResolver = Resolver
tf.config.experimental_connect_to_cluster = lambda resolver: None
tf.tpu.experimental.initialize_tpu_system = lambda resolver: None
tf.distribute.TPUStrategy = Strategy
tf2_training.is_tpu_strategy = lambda strategy: True
import run_classifier
run_classifier.run(sys.argv)
"""


@newest_tf_only
def test_classifier_on_tpu_reads_static_batch_shapes(model, tmp_path):
  out = tmp_path / "out"
  log = run_tool(None, ["-c", AS_ON_TPU] + _job_args(model, out, [
      "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=1", "--use_tpu",
      "--tpu_name=my-tpu", "--tpu_zone=us-central1-b", "--gcp_project=proj",
      "--num_tpu_cores=1"])).stderr
  assert "TPUClusterResolver(tpu=my-tpu, zone=us-central1-b, project=proj)" in log
  # The engine refuses any input with a dimension of unknown size on TPU: training, the
  # evaluation and the prediction read [batch, max_seq_length] batches, the last ones padded.
  assert "Padding: training max_length, evaluation / prediction max_length (--use_tpu: " \
      "static shapes)" in log
  results = json.loads((out / "eval_results.json").read_text())
  assert results["global_step"] == 2
  with open(os.path.join(REPO_DIR, "tests", "fixtures", "glue", "SST-2", "test.tsv")) as f:
    test_examples = len(f.read().splitlines()) - 1
  assert len((out / "test_results.tsv").read_text().splitlines()) == test_examples
