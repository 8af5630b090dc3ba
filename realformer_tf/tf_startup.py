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
"""

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


def drop_start_up_noise(text):
  """The lines of `text` (what the import printed) that are not START_UP_NOISE, joined."""
  return "".join(line for line in text.splitlines(True) if not START_UP_NOISE.search(line))


def import_tensorflow_quietly():
  """Imports TensorFlow with its start-up noise dropped; other import-time lines are kept."""
  if "tensorflow" in sys.modules:
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
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
