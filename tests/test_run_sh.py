"""run.sh: the environment comes from the repository, the paths from where the user stands."""

import os
import subprocess
import sys

from conftest import REPO_DIR

RUN_SH = os.path.join(REPO_DIR, "run.sh")


def _run_sh(args, cwd):
  # The test's own interpreter stands in for the one run.sh would create (.venv exists by the
  # time tests run, so setup_env only checks it).
  return subprocess.run(["bash", RUN_SH] + list(args), cwd=cwd, capture_output=True, text=True,
                        timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def _has_env():
  return os.path.exists(os.path.join(REPO_DIR, ".venv", "bin", "python"))


def test_python_keeps_the_working_directory_and_finds_commands_in_the_repository(tmp_path):
  if not _has_env():
    import pytest  # pylint: disable=g-import-not-at-top
    pytest.skip("needs the .venv that `bash run.sh test` creates")
  (tmp_path / "my.txt").write_text("a line of my own text .\n")
  # A relative path the user types means their directory.
  proc = _run_sh(["python", "-c", "import os; print(os.getcwd()); print(open('my.txt').read())"],
                 cwd=str(tmp_path))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.splitlines()[:2] == [str(tmp_path), "a line of my own text ."]
  # A command named by its file name runs from the repository when it is not in the user's
  # directory, still in the user's directory.
  script = tmp_path / "where.py"
  script.write_text("import os, sys; print(os.getcwd()); print(sys.argv[1:])\n")
  proc = _run_sh(["python", "where.py", "--input_file=my.txt"], cwd=str(tmp_path))
  assert proc.stdout.splitlines() == [str(tmp_path), "['--input_file=my.txt']"], proc.stderr
  proc = _run_sh(["python", "slim_checkpoint.py", "--helpshort"], cwd=str(tmp_path))
  assert "Strips optimizer state" in proc.stdout, proc.stderr[-2000:]


def test_unknown_command_is_one_line_then_the_usage():
  proc = _run_sh(["pyhton", "x.py"], cwd=REPO_DIR)
  assert proc.returncode == 2
  lines = proc.stderr.splitlines()
  assert lines[0] == "run.sh: unknown command 'pyhton'"
  assert "bash run.sh demo" in proc.stderr
  assert "set -euo" not in proc.stderr
  proc = _run_sh(["help"], cwd=REPO_DIR)
  assert proc.returncode == 0 and "bash run.sh test" in proc.stdout
  assert "set -euo" not in proc.stdout
