"""Repository-wide checks: setup.py installs every module, no machine path in tracked files."""

import ast
import os
import re
import subprocess

from conftest import REPO_DIR

# An absolute path of some machine (a home, a work tree, a root account), not a URL or a
# generic example.
MACHINE_PATH = re.compile(r"(?<![\w.:/])/(?:work|home|root|Users)/[\w.-]+")


def _setup_modules():
  with open(os.path.join(REPO_DIR, "setup.py")) as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.keyword) and node.arg == "py_modules":
      return {elt.value for elt in node.value.elts}
  raise AssertionError("setup.py has no py_modules")


def test_setup_installs_every_top_level_module():
  modules = {name[:-3] for name in os.listdir(REPO_DIR)
             if name.endswith(".py") and name != "setup.py"}
  listed = _setup_modules()
  assert modules - listed == set(), "modules setup.py does not install"
  assert listed - modules == set(), "setup.py lists modules that do not exist"


def _tracked_text_files():
  try:
    names = subprocess.run(["git", "ls-files"], cwd=REPO_DIR, capture_output=True, text=True,
                           timeout=60, check=True).stdout.splitlines()
  except (OSError, subprocess.SubprocessError):
    names = []
    for root, dirs, files in os.walk(REPO_DIR):
      dirs[:] = [d for d in dirs if not d.startswith(".")]
      names.extend(os.path.relpath(os.path.join(root, f), REPO_DIR) for f in files)
  for name in names:
    if name.endswith((".py", ".md", ".sh", ".txt", ".json", ".cfg", ".toml", ".yml")) or \
        "/" not in name and "." not in name:
      yield name


def test_no_machine_paths_in_tracked_files():
  found = []
  for name in _tracked_text_files():
    path = os.path.join(REPO_DIR, name)
    if not os.path.isfile(path) or name == "data/vocab.txt":
      continue
    with open(path, encoding="utf-8", errors="replace") as f:
      for number, line in enumerate(f, 1):
        if MACHINE_PATH.search(line) and "MACHINE_PATH" not in line:
          found.append("%s:%d: %s" % (name, number, line.strip()[:120]))
  assert not found, "\n".join(found)
