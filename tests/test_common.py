"""Tests for the shared helpers: one-line errors, atomic writes, input globs, progress, eval files."""

import collections
import json
import os
import subprocess
import sys
import types

import pytest
from absl import flags as absl_flags
import tensorflow as tf

from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import model_config
from conftest import REPO_DIR


def test_expand_input_files_globs_and_comma_lists(tmp_path):
  for name in ("b.txt", "a.txt", "c.log"):
    (tmp_path / name).write_text("x")
  pattern = "%s,%s" % (tmp_path / "*.txt", tmp_path / "c.log")
  files = common.expand_input_files(pattern)
  assert [os.path.basename(f) for f in files] == ["a.txt", "b.txt", "c.log"]
  # Duplicates are read once.
  assert len(common.expand_input_files("%s,%s" % (tmp_path / "a.txt", tmp_path / "*.txt"))) == 2
  with pytest.raises(common.UsageError, match=r"--input_file: .*nope\*.txt matches no file"):
    common.expand_input_files(str(tmp_path / "nope*.txt"))
  with pytest.raises(common.UsageError, match="--input_file is empty"):
    common.expand_input_files(" , ")


def test_expand_input_files_refuses_directories_in_one_line(tmp_path):
  (tmp_path / "corpus").mkdir()
  (tmp_path / "corpus" / "a.txt").write_text("x")
  corpus = str(tmp_path / "corpus")
  for given in (corpus, corpus + "/"):
    with pytest.raises(common.UsageError) as error:
      common.expand_input_files(given, "train_file")
    assert str(error.value) == ("--train_file=%s: is a directory (give files or a glob like "
                                "%s/*)" % (given, corpus))
  assert common.expand_input_files(corpus + "/*") == [corpus + "/a.txt"]
  (tmp_path / "corpus" / "sub").mkdir()
  with pytest.raises(common.UsageError) as error:
    common.expand_input_files(corpus + "/*")
  assert str(error.value) == ("--input_file=%s/*: matches the directory %s/sub (give files or a "
                              "glob like %s/sub/*)" % (corpus, corpus, corpus))
  assert common.expand_input_files(corpus + "/*.txt") == [corpus + "/a.txt"]


def test_require_file(tmp_path):
  with pytest.raises(common.UsageError, match="--vocab_file is required"):
    common.require_file("", "vocab_file")
  with pytest.raises(common.UsageError, match="file does not exist"):
    common.require_file(str(tmp_path / "missing.txt"), "vocab_file")
  with pytest.raises(common.UsageError, match="is a directory"):
    common.require_file(str(tmp_path), "vocab_file")


def test_atomic_output_leaves_nothing_on_failure(tmp_path):
  target = tmp_path / "out.txt"
  with pytest.raises(RuntimeError):
    with common.atomic_output(str(target)) as f:
      f.write("half")
      raise RuntimeError("killed")
  assert os.listdir(tmp_path) == []
  with common.atomic_output(str(target)) as f:
    f.write("whole")
  assert target.read_text() == "whole"
  assert os.listdir(tmp_path) == ["out.txt"]


def test_progress_meter_rate_and_remaining():
  lines = []
  meter = common.ProgressMeter(total=100, unit="MB", min_interval_s=0.0, log_fn=lines.append)
  meter.start_time -= 10.0  # pretend 10 s have passed
  meter.start_done = 0
  meter.update(25)
  assert abs(meter.rate() - 2.5) < 0.1
  assert 29 <= meter.remaining_s() <= 31
  assert "25/100 MB" in lines[-1] and "remaining" in lines[-1]
  assert common.format_duration(3725) == "1:02:05"
  assert common.format_duration(65) == "1:05"


def test_write_eval_results_txt_and_json(tmp_path):
  written = estimator_utils.write_eval_results(str(tmp_path), {"b": 0.5, "a": 2})
  assert (tmp_path / "eval_results.txt").read_text() == "a = 2\nb = 0.5\n"
  assert json.loads((tmp_path / "eval_results.json").read_text()) == written == {"a": 2, "b": 0.5}


def _flag_values(**overrides):
  values = dict(use_tpu=False, tpu_name=None, master=None, distribution_strategy="none",
                num_gpus=None, iterations_per_loop=1000, save_checkpoints_steps=1000,
                keep_checkpoint_max=5)
  values.update(overrides)
  return types.SimpleNamespace(**values)


@pytest.mark.parametrize("overrides,message", [
    ({"use_tpu": True, "tpu_name": "t", "distribution_strategy": "mirrored"},
     "cannot be combined with --use_tpu"),
    ({"use_tpu": True}, "--use_tpu needs --tpu_name"),
    ({"num_gpus": 2}, "--num_gpus is only used with --distribution_strategy=mirrored"),
    ({"save_checkpoints_steps": 0}, "--save_checkpoints_steps must be >= 1"),
])
def test_estimator_flag_errors(overrides, message):
  with pytest.raises(common.UsageError, match=message):
    estimator_utils.validate_estimator_flags(_flag_values(**overrides))


def test_multi_worker_needs_tf_config(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with pytest.raises(common.UsageError, match="needs the TF_CONFIG"):
    estimator_utils.make_distribution_strategy("multi_worker_mirrored")


def test_check_tfrecord_lengths(tmp_path):
  path = str(tmp_path / "x.tfrecord")
  with tf.io.TFRecordWriter(path) as writer:
    example = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * 16))}))
    writer.write(example.SerializeToString())
  estimator_utils.check_tfrecord_lengths([path], {"input_ids": (16, "--max_seq_length=16")})
  with pytest.raises(common.UsageError, match="has input_ids of length 16 but --max_seq_length=32"):
    estimator_utils.check_tfrecord_lengths([path], {"input_ids": (32, "--max_seq_length=32")})
  with pytest.raises(common.UsageError, match="has no feature 'segment_ids'"):
    estimator_utils.check_tfrecord_lengths([path], {"segment_ids": (16, "x")})
  empty = str(tmp_path / "empty.tfrecord")
  with tf.io.TFRecordWriter(empty):
    pass
  with pytest.raises(common.UsageError, match="has no records"):
    estimator_utils.check_tfrecord_lengths([empty], {})
  garbage = tmp_path / "garbage.tfrecord"
  garbage.write_bytes(b"this is not a tfrecord at all")
  with pytest.raises(common.UsageError, match="is not a readable TFRecord file"):
    estimator_utils.check_tfrecord_lengths([str(garbage)], {})


def test_load_config_overrides_and_errors(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps({"vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2,
                              "num_hidden_layers": 1, "intermediate_size": 16,
                              "max_position_embeddings": 32}))
  config = model_config.load_config(
      str(path), types.SimpleNamespace(residual_attention="mean", layer_norm_type=None))
  assert (config.residual_attention, config.layer_norm_type) == ("mean", "post")
  with pytest.raises(common.UsageError, match="--max_seq_length=64 is longer than "
                                              "max_position_embeddings=32"):
    model_config.load_config(str(path), None, max_seq_length=64)
  with pytest.raises(common.UsageError, match="--bert_config_file=.*file does not exist"):
    model_config.load_config(str(tmp_path / "nope.json"))


def test_configs_path_means_the_shipped_config_from_any_working_directory(tmp_path,
                                                                          monkeypatch):
  shipped = os.path.join(REPO_DIR, "configs", "bert_tiny_realformer.json")
  monkeypatch.chdir(tmp_path)
  assert model_config.shipped_config_path("configs/bert_tiny_realformer.json") == shipped
  assert model_config.shipped_config_path("bert_tiny_realformer.json") == shipped
  assert model_config.load_config("configs/bert_tiny_realformer.json").residual_attention == "sum"
  # Only the documented form: another folder, or a name nothing ships, stays the user's path.
  for path in ("mine/bert_tiny_realformer.json", "configs/nope.json", ""):
    assert model_config.shipped_config_path(path) == path
  # A file of that name where the user stands is the user's.
  (tmp_path / "configs").mkdir()
  (tmp_path / "configs" / "bert_tiny_realformer.json").write_text("{}")
  assert (model_config.shipped_config_path("configs/bert_tiny_realformer.json") ==
          "configs/bert_tiny_realformer.json")


def test_temp_names_are_hidden_and_skipped_by_input_globs(tmp_path):
  final = str(tmp_path / "data.tfrecord-00000-of-00002")
  tmp = common.temp_path(final)
  assert os.path.basename(tmp).startswith(".data.tfrecord-00000-of-00002.tmp-")
  assert common.is_temp_path(tmp) and not common.is_temp_path(final)
  assert common.is_temp_path(final + ".tmp-123")  # the older visible form
  open(final, "w").close()
  open(tmp, "w").close()
  open(final.replace("00000", "00001") + ".tmp-77", "w").close()
  files = common.expand_input_files(str(tmp_path / "*"))
  assert files == [final]
  # A dead writer's temporary is removed on the next run; a live one's is kept.
  dead = str(tmp_path / (".out.txt.tmp-%d" % (2 ** 22 + 99)))
  live = str(tmp_path / (".out.txt.tmp-%d" % os.getppid()))
  open(dead, "w").close()
  open(live, "w").close()
  removed = common.remove_stale_temps(str(tmp_path / "out.txt"))
  assert removed == [dead] and os.path.exists(live)


def test_check_export_dir_refuses_what_is_not_ours(tmp_path):
  model_dir = tmp_path / "model"
  model_dir.mkdir()
  (model_dir / "checkpoint").write_text("x")
  with pytest.raises(common.UsageError, match="holds checkpoints"):
    common.check_export_dir(str(model_dir), overwrite=True)
  with pytest.raises(common.UsageError, match="would replace .*model"):
    common.check_export_dir(str(tmp_path), overwrite=True, protected_paths=[str(model_dir)])
  other = tmp_path / "other"
  other.mkdir()
  (other / "a.txt").write_text("x")
  with pytest.raises(common.UsageError, match="not written by this project"):
    common.check_export_dir(str(other), overwrite=True)
  with pytest.raises(common.UsageError, match="is a file, not a directory"):
    common.check_export_dir(str(other / "a.txt" / "sub"))
  # Ours: replaced only with overwrite, atomically, with the marker.
  ours = str(tmp_path / "ours")
  with common.atomic_directory(ours) as tmp_dir:
    os.makedirs(tmp_dir)
    common.write_files(tmp_dir, {"x.txt": "1"})
  assert sorted(os.listdir(ours)) == [common.EXPORT_MARKER, "x.txt"]
  with pytest.raises(common.UsageError, match="pass --overwrite"):
    common.check_export_dir(ours)
  common.check_export_dir(ours, overwrite=True)
  common.check_export_dir(str(tmp_path / "new"))
  (tmp_path / "empty").mkdir()
  common.check_export_dir(str(tmp_path / "empty"))


def test_output_dir_lock_and_check_not_input(tmp_path):
  with common.OutputDirLock(str(tmp_path), label="local"):
    with pytest.raises(common.UsageError, match="in use by another job \\(pid %d" % os.getpid()):
      common.OutputDirLock(str(tmp_path), label="local").acquire()
    # Another task label (a worker of the same multi-worker job) has its own lock.
    common.OutputDirLock(str(tmp_path), label="worker_1").acquire().release()
  assert not os.path.exists(str(tmp_path / ".lock-local"))
  with pytest.raises(common.UsageError, match="--output_file=.*is also an input"):
    common.check_not_input(str(tmp_path / "a.txt"), [str(tmp_path / "b.txt"),
                                                     str(tmp_path / "a.txt")])
  common.check_not_input(str(tmp_path / "c.txt"), [str(tmp_path / "a.txt")])


def test_output_dir_lock_on_a_file_names_the_flag(tmp_path):
  a_file = tmp_path / "a_file"
  a_file.write_text("")
  with pytest.raises(common.UsageError, match="^--output_dir=%s: is a file, expected a "
                     "directory$" % a_file):
    common.OutputDirLock(str(a_file), "output_dir", label="run_demo").acquire()
  with pytest.raises(common.UsageError, match="^--work_dir=%s/sub: %s is a file, not a "
                     "directory$" % (a_file, a_file)):
    common.OutputDirLock(str(a_file / "sub"), "work_dir").acquire()
  assert a_file.read_text() == ""


def test_output_dir_lock_leaves_no_empty_directory_it_made(tmp_path):
  # A job that stops before writing anything (a refused flag, no weights) leaves nothing.
  new_dir = tmp_path / "new"
  with common.OutputDirLock(str(new_dir)):
    assert new_dir.is_dir()
  assert not new_dir.exists()
  # What the job wrote stays, and a directory that existed before is never removed.
  with common.OutputDirLock(str(new_dir)):
    (new_dir / "result.json").write_text("{}")
  assert os.listdir(str(new_dir)) == ["result.json"]
  existing = tmp_path / "existing"
  existing.mkdir()
  with common.OutputDirLock(str(existing)):
    pass
  assert existing.is_dir()


def test_start_up_noise_is_dropped_and_other_import_lines_kept():
  from realformer_tf import tf_startup  # pylint: disable=g-import-not-at-top
  printed = (
      "2026-11-27 10:37:15.552161: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261]"
      " Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when"
      " one has already been registered\n"
      "2026-11-27 10:51:11.247093: I external/local_tsl/tsl/cuda/cudart_stub.cc:31] Could not"
      " find cuda drivers on your machine, GPU will not be used.\n"
      "2026-11-27 10:51:11.247381: I tensorflow/core/platform/cpu_feature_guard.cc:182] This"
      " TensorFlow binary is optimized to use available CPU instructions.\n"
      "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow"
      " with the appropriate compiler flags.\n"
      "2026-11-27 10:51:12.150161: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38]"
      " TF-TRT Warning: Could not find TensorRT\n"
      "ImportError: libfoo.so: cannot open shared object file\n")
  assert (tf_startup.drop_start_up_noise(printed) ==
          "ImportError: libfoo.so: cannot open shared object file\n")


def test_a_command_starts_without_tensorflow_start_up_noise():
  from realformer_tf import tf_startup  # pylint: disable=g-import-not-at-top
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  env["PYTHONPATH"] = REPO_DIR
  plain = subprocess.run([sys.executable, "-c", "import tensorflow"], env=env,
                         capture_output=True, text=True, timeout=300)
  if tf_startup.drop_start_up_noise(plain.stderr) == plain.stderr:
    pytest.skip("this TensorFlow build prints no start-up noise to drop")
  quiet = subprocess.run(
      [sys.executable, "-c", "from realformer_tf import tf_startup; import tensorflow as tf; "
       "import sys; sys.stderr.write('imported %s\\n' % tf.__version__)"],
      env=env, capture_output=True, text=True, timeout=300)
  assert quiet.returncode == 0, quiet.stderr
  assert quiet.stderr == "imported %s\n" % tf.__version__


def test_framework_records_are_hidden_unless_verbosity_is_raised(monkeypatch):
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  import logging  # pylint: disable=g-import-not-at-top

  def record(path, level=logging.INFO, message="Calling model_fn."):
    return logging.LogRecord("tensorflow", level, path, 1, message, None, None)

  framework = os.path.join("venv", "lib", "python3.11", "site-packages", "tensorflow_estimator",
                           "python", "estimator", "estimator.py")
  ours = os.path.join(REPO_DIR, "run_pretraining.py")
  installed_ours = os.path.join("venv", "lib", "python3.11", "site-packages", "run_pretraining.py")
  keep = common.FrameworkDetailFilter().filter
  monkeypatch.setattr(absl_logging, "get_verbosity", lambda: 0)
  assert not keep(record(framework)) and not keep(record(framework, logging.WARNING))
  assert keep(record(framework, logging.ERROR))
  assert keep(record(framework, message="Loss for final step: %s."))
  assert keep(record(framework, message="loss = 0.6931, step = 10"))
  assert keep(record(ours)) and keep(record(installed_ours))
  monkeypatch.setattr(absl_logging, "get_verbosity", lambda: 1)
  assert keep(record(framework))


def test_storage_errors_name_the_output_not_its_temporary():
  """TensorFlow's messages of a full or read-only disk name the writer's temporary (removed by
  then) and op details: the line names the output and the problem."""
  saved = ("{{function_node __wrapped__SaveV2_dtypes_57_device_/job:localhost/replica:0/task:0/"
           "device:CPU:0}} out/.export.tmp-317/variables/variables_temp/part-00000-of-00001.data-"
           "00000-of-00001.tempstate1763; No space left on device [Op:SaveV2]")
  assert common.describe_storage_error(saved) == "out/export: No space left on device (errno 28)"
  assert common.describe_storage_error("out/lt/.cloze_train.tfrecord.tmp-68; File too large") == (
      "out/lt/cloze_train.tfrecord: File too large (errno 27)")
  assert common.describe_storage_error("/mnt/new; Read-only file system") == (
      "/mnt/new: Read-only file system (errno 30)")
  assert common.describe_os_error(OSError(28, "No space left on device", "d/.x.json.tmp-5")) == (
      "d/x.json: No space left on device (errno 28)")
  assert common.final_name("a/b.txt") == "a/b.txt"


def test_a_directory_the_user_may_not_write_is_one_line(monkeypatch, capsys):
  """TensorFlow's writers (GFile, TFRecordWriter, SavedModel) report a directory without write
  permission (chmod 555) as PermissionDeniedError: one line naming the output, exit 1, as an
  OSError from Python's own writers is (not a traceback)."""

  def main(unused_argv):
    raise tf.errors.PermissionDeniedError(None, None,
                                          "out/.x.tfrecord.tmp-12; Permission denied")

  with pytest.raises(SystemExit) as e:
    common.run_main(main, [])
  assert e.value.code == 1
  assert capsys.readouterr().err == "error: out/x.tfrecord: Permission denied (errno 13)\n"

  def python_main(unused_argv):
    raise PermissionError(13, "Permission denied", "out/.lock-local")

  with pytest.raises(SystemExit) as e:
    common.run_main(python_main, [])
  assert e.value.code == 1
  assert capsys.readouterr().err == "error: out/.lock-local: Permission denied (errno 13)\n"


def test_helpers_that_moved_out_of_commands_name_their_new_place():
  import export_hub  # pylint: disable=g-import-not-at-top
  import extract_features  # pylint: disable=g-import-not-at-top
  for module, name, place in (
      (extract_features, "pad_batch", "realformer_tf.batch_inference.pad_batch"),
      (extract_features, "RANDOM_WEIGHTS_SEED",
       "realformer_tf.batch_inference.RANDOM_WEIGHTS_SEED"),
      (export_hub, "BertClassifier", "realformer_tf.serving.BertClassifier")):
    message = "%s.%s moved to %s" % (module.__name__, name, place)
    with pytest.raises(AttributeError) as e:
      getattr(module, name)
    assert str(e.value) == message
    with pytest.raises(ImportError) as e:
      exec("from %s import %s" % (module.__name__, name), {})  # pylint: disable=exec-used
    assert str(e.value) == message
  # What the library module merely imports is not reported as moved.
  for module, name in ((extract_features, "tf1"), (export_hub, "no_such_name")):
    if not hasattr(module, name):
      with pytest.raises(AttributeError, match="has no attribute"):
        getattr(module, name)


@pytest.mark.parametrize("flag, message", [
    ("--no_such_flag=1", "Unknown command line flag 'no_such_flag'"),
    ("--na_prob_thresh=many", "--na_prob_thresh=many"),
])
def test_a_bad_flag_is_one_line_and_exit_status_2(tmp_path, flag, message):
  env = dict(os.environ, PYTHONPATH=REPO_DIR)
  run = subprocess.run([sys.executable, os.path.join(REPO_DIR, "squad_evaluate.py"), flag],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
  assert run.returncode == 2, run.stderr
  assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), run.stderr
  assert message in run.stderr and "--helpfull" in run.stderr


def test_cuda_init_failure_is_noise_only_without_gpu_device_nodes():
  from realformer_tf import tf_startup  # pylint: disable=g-import-not-at-top
  text = ("E0000 00:00:1.0 123 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error\n"
          "a real problem\n")
  assert tf_startup.drop_start_up_noise(text, has_gpu_devices=False) == "a real problem\n"
  assert tf_startup.drop_start_up_noise(text, has_gpu_devices=True) == text


def test_settings_from_flags_takes_flags_of_the_fields_names_and_refuses_the_rest():
  settings_class = collections.namedtuple("JobSettings", ["output_dir", "seed", "engine"])
  flag_values = absl_flags.FlagValues()
  absl_flags.DEFINE_string("output_dir", None, "", flag_values=flag_values)
  absl_flags.DEFINE_integer("seed", 12345, "", flag_values=flag_values)
  absl_flags.DEFINE_integer("other", 1, "", flag_values=flag_values)
  flag_values(["tool", "--output_dir=out", "--seed=7"])
  settings = common.settings_from_flags(settings_class, flag_values, engine="tf2")
  assert settings == settings_class(output_dir="out", seed=7, engine="tf2")
  # A given value wins over the flag of the same name.
  assert common.settings_from_flags(settings_class, flag_values, engine="e", seed=1).seed == 1
  with pytest.raises(ValueError, match=r"neither given nor flags \['engine'\]"):
    common.settings_from_flags(settings_class, flag_values)
  with pytest.raises(ValueError, match=r"not fields \['typo'\]"):
    common.settings_from_flags(settings_class, flag_values, engine="e", typo=1)
