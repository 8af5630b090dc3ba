"""TensorFlow imported without the start-up lines a CPU-only machine prints (imported first).

A command imports this module before TensorFlow. On a machine without a GPU, TensorFlow's CUDA
build prints at import time, whatever TF_CPP_MIN_LOG_LEVEL says, that it could not register the
cuDNN / cuFFT / cuBLAS factories, could not find CUDA drivers or TensorRT, and which CPU
instructions it was not built for: lines that bury a command's one-line summary and mean nothing
for the job. The import runs with the process's standard error captured at the file-descriptor
level (TensorFlow's C++ logging writes there directly); afterwards every captured line except
those is written back, so a real problem during the import still shows.

It also makes C++ INFO lines (e.g. "oneDNN custom operations are on") opt-in: TF_CPP_MIN_LOG_LEVEL
defaults to 1 when unset. The Python-side counterpart (TensorFlow's own INFO and WARNING records
hidden unless --verbosity >= 1) is common.quiet_framework_logs, which common.run_main installs.

Newer TensorFlow builds (2.16+) print their CUDA failure ("failed call to cuInit") when the
devices are first listed rather than at import: the devices are listed inside the capture too,
and that line is dropped only on a machine without NVIDIA device nodes (/dev/nvidia*), where it
says nothing; with a GPU present a failing driver still shows. Listing the devices makes
TensorFlow read TF_XLA_FLAGS, so the CPU flags --use_xla needs (set_xla_cpu_flags) are set
before: they change nothing for a computation that does not ask for XLA.
"""

import glob
import os
import re
import sys
import tempfile

# What TensorFlow prints at import on a machine without a GPU (one pattern per kind of line).
START_UP_NOISE = re.compile("|".join([
    r"Unable to register cu\w+ factory",
    r"Could not find cuda drivers on your machine",
    r"TF-TRT Warning: Could not find TensorRT",
    r"cpu_feature_guard\.cc",
    r"^To enable the following instructions: .* rebuild TensorFlow",
    r"oneDNN custom operations are on",
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"computation placer already registered",
]))
# What --use_xla needs in TF_XLA_FLAGS on a machine without GPUs: auto-clustering on the CPU
# (off by default in TensorFlow), and only of fusible element-wise / reduction ops, which keeps
# the matmuls on oneDNN (clustering them too made a BERT-Small step 1.4x slower).
XLA_CPU_FLAGS = ("--tf_xla_cpu_global_jit", "--tf_xla_ops_to_cluster=FUSIBLE")
# The CUDA initialisation failure of TF 2.16+, noise only where no NVIDIA device exists.
NO_GPU_NOISE = re.compile(r"failed call to cuInit")


def drop_start_up_noise(text, has_gpu_devices=None):
  """The lines of `text` (what the import printed) that are not start-up noise, joined.

  Args:
    text: the captured output.
    has_gpu_devices: whether the machine has NVIDIA device nodes (None: look at /dev); without
      them NO_GPU_NOISE is noise too.

  Returns:
    The lines kept.
  """
  if has_gpu_devices is None:
    has_gpu_devices = bool(glob.glob("/dev/nvidia*"))
  def is_noise(line):
    return START_UP_NOISE.search(line) or (not has_gpu_devices and NO_GPU_NOISE.search(line))
  return "".join(line for line in text.splitlines(True) if not is_noise(line))


def has_gpu_devices():
  """Whether NVIDIA GPUs are visible, without starting TensorFlow's runtime (which would read
  TF_XLA_FLAGS)."""
  if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
    return False
  return bool(glob.glob("/dev/nvidia[0-9]*"))


def set_xla_cpu_flags():
  """Adds XLA_CPU_FLAGS to TF_XLA_FLAGS on a machine without GPUs.

  They only let a computation that asks for XLA (global_jit_level, what --use_xla sets) cluster
  CPU ops; the others are unchanged. TensorFlow reads TF_XLA_FLAGS once per process, when its
  devices are first listed: import_tensorflow_quietly calls this first. A flag the user already
  set in TF_XLA_FLAGS is kept.
  """
  if has_gpu_devices():
    return
  current = os.environ.get("TF_XLA_FLAGS", "")
  missing = [f for f in XLA_CPU_FLAGS if f.split("=")[0] not in current]
  if missing:
    os.environ["TF_XLA_FLAGS"] = " ".join([current] + missing).strip()


def import_tensorflow_quietly():
  """Imports TensorFlow with its start-up noise dropped; other import-time lines are kept."""
  if "tensorflow" in sys.modules:
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
  set_xla_cpu_flags()
  sys.stderr.flush()
  try:
    saved_stderr = os.dup(2)
  except OSError:  # no standard error to capture
    import tensorflow  # pylint: disable=unused-import,g-import-not-at-top
    return
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      import tensorflow  # pylint: disable=unused-import,g-import-not-at-top,redefined-outer-name
      # Where newer builds print their CUDA start-up lines (logical devices stay configurable).
      tensorflow.config.list_physical_devices("GPU")
    finally:
      sys.stderr.flush()
      os.dup2(saved_stderr, 2)
      os.close(saved_stderr)
      captured.seek(0)
      kept = drop_start_up_noise(captured.read().decode("utf-8", errors="replace"))
      if kept:
        sys.stderr.write(kept)
        sys.stderr.flush()


import_tensorflow_quietly()
