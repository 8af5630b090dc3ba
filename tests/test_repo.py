"""Repository-wide checks: setup.py installs every module, no machine path in tracked files, the
import structure (no module uses another's private names, no import circle, no sys.path edits,
no command or library module imports a command, nothing imports a paper driver), and commands
read FLAGS only in main and their flag functions."""

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import textwrap

from conftest import REPO_DIR

# An absolute path of some machine (a home, a work tree, a root account), not a URL or a
# generic example.
MACHINE_PATH = re.compile(r"(?<![\w.:/])/(?:work|home|root|Users)/[\w.-]+")


def _setup_list(keyword):
  with open(os.path.join(REPO_DIR, "setup.py")) as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.keyword) and node.arg == keyword:
      return {elt.value for elt in node.value.elts}
  raise AssertionError("setup.py has no %s" % keyword)


def _packages():
  """The model-family folders: top-level directories with an __init__.py."""
  return {name for name in os.listdir(REPO_DIR)
          if os.path.isfile(os.path.join(REPO_DIR, name, "__init__.py"))}


def test_setup_installs_every_top_level_module():
  modules = {name[:-3] for name in os.listdir(REPO_DIR)
             if name.endswith(".py") and name != "setup.py"}
  listed = _setup_list("py_modules")
  assert modules - listed == set(), "modules setup.py does not install"
  assert listed - modules == set(), "setup.py lists modules that do not exist"
  # paper/ (the paper's experiment drivers) runs from a checkout: it reads the repository's
  # data, configs and reports.
  assert _setup_list("packages") == (_packages() - {"paper"}) | {"realformer_tf.configs"}, (
      "setup.py packages != the package folders")


def _copy_sources(destination):
  """The repository's files that pip builds from, without environments, outputs or tests."""
  shutil.copytree(REPO_DIR, destination, ignore=shutil.ignore_patterns(
      ".git", ".venv*", "output", "build", "*.egg-info", "__pycache__", "tests", "bench"))


def test_pip_install_ships_commands_configs_and_runtime_requirements_only(tmp_path):
  source, target, elsewhere = tmp_path / "src", tmp_path / "site", tmp_path / "cwd"
  _copy_sources(str(source))
  elsewhere.mkdir()
  subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                  "--no-build-isolation", "--target", str(target), str(source)],
                 check=True, capture_output=True, timeout=300)
  installed = set(os.listdir(target))
  for name in _setup_list("py_modules"):
    assert name + ".py" in installed, name
  assert {"realformer_tf", "etc_model", "translation"} <= installed
  assert "paper" not in installed and "tests" not in installed
  metadata = next(os.path.join(target, name, "METADATA") for name in installed
                  if name.endswith(".dist-info"))
  with open(metadata, encoding="utf-8") as f:
    required = [line.split(":", 1)[1].strip() for line in f
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
  assert any(r.startswith("tensorflow==") for r in required)
  assert not [r for r in required if r.startswith(("pytest", "execnet", "matplotlib"))]
  # From another working directory, with only the installed copy on the path, the documented
  # `configs/NAME.json` finds the installed config.
  script = ("from realformer_tf import model_config; "
            "print(model_config.shipped_config_path('configs/bert_tiny_realformer.json')); "
            "config = model_config.load_config('configs/bert_tiny_realformer.json'); "
            "print(config.residual_attention)")
  env = dict(os.environ, PYTHONPATH=str(target), TF_CPP_MIN_LOG_LEVEL="3")
  result = subprocess.run([sys.executable, "-c", script], cwd=str(elsewhere), env=env,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  path, residual_attention = result.stdout.split()
  assert path == os.path.join(str(target), "realformer_tf", "configs", "bert_tiny_realformer.json")
  assert residual_attention == "sum"


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



# ------------------------------------------------------------------------------------------------
# The import structure: library code lives in library modules with public names.

# Uses of another module's private name allowed, as (importing module, module, private name or
# "*"), each with its reason. None now: what another module needs gets a public name.
ALLOWED_PRIVATE_IMPORTS = frozenset()
# --processor=module:Class imports the user's module from the current directory (a user's
# file, not the repository): the one sys.path edit allowed (classifier_tasks.load_processor_class).
ALLOWED_SYS_PATH_EDITS = {"realformer_tf.classifier_tasks"}


@functools.lru_cache(maxsize=None)
def _repo_modules():
  """{module name: parsed AST} of every module of the repository (top level and packages)."""
  paths = {name[:-3]: name for name in os.listdir(REPO_DIR)
           if name.endswith(".py") and name != "setup.py"}
  for package in _packages():
    for name in os.listdir(os.path.join(REPO_DIR, package)):
      if name.endswith(".py"):
        module = package if name == "__init__.py" else "%s.%s" % (package, name[:-3])
        paths[module] = os.path.join(package, name)
  trees = {}
  for module, path in paths.items():
    with open(os.path.join(REPO_DIR, path), encoding="utf-8") as f:
      trees[module] = ast.parse(f.read(), path)
  return trees


def _is_script(tree):
  """A module with a top-level `if __name__ == "__main__":` block (or an absl app.run call)."""
  for node in tree.body:
    if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"):
      return True
  return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr == "run" and isinstance(node.func.value, ast.Name)
             and node.func.value.id == "app" for node in ast.walk(tree))


def _imports(tree, modules):
  """(names, from_names): {local name: repo module} of every import in the module (function-level
  ones included), and [(repo module, name)] of `from module import name` of a non-module name."""
  names, from_names = {}, []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name in modules:
          names[alias.asname or alias.name] = alias.name
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      for alias in node.names:
        full = "%s.%s" % (node.module, alias.name)
        if full in modules:
          names[alias.asname or alias.name] = full
        elif node.module in modules:
          from_names.append((node.module, alias.name))
  return names, from_names


def _is_private(name):
  return name.startswith("_") and not name.startswith("__")


def _private_uses(trees):
  """[(module, target, name)]: a private name of repo module `target` used in another module
  (`from target import _x`, `target._x` read or assigned)."""
  uses = []
  for module, tree in sorted(trees.items()):
    names, from_names = _imports(tree, trees)
    used = list(from_names)
    for node in ast.walk(tree):
      if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
          and node.value.id in names):
        used.append((names[node.value.id], node.attr))
    uses.extend((module, target, name) for target, name in used
                if target != module and _is_private(name))
  return sorted(set(uses))


def test_no_module_uses_another_modules_private_names():
  """Scripts' and library modules' private names stay in their module (tests may use them)."""
  trees = _repo_modules()
  scripts = {module for module, tree in trees.items() if _is_script(tree)}
  assert {"run_classifier", "etc_model.run_pretraining"} <= scripts and "modeling" not in scripts
  found = []
  for module, target, name in _private_uses(trees):
    if not {(module, target, name), (module, target, "*")} & ALLOWED_PRIVATE_IMPORTS:
      kind = "script" if target in scripts else "library module"
      found.append("%s uses %s.%s (a %s's private name)" % (module, target, name, kind))
  assert not found, "\n".join(found)


def test_private_name_check_sees_library_modules_and_assignments():
  """The check above flags a library module's private name, read or assigned (as a module
  that swaps another's function would), and `from module import _x`."""
  sources = {
      "lib": "def _helper():\n  pass\n",
      "user": "import lib\nlib._helper()\n",
      "patcher": "import lib\nlib._helper = None\n",
      "importer": "from lib import _helper\n",
      "fine": "import lib\nimport modeling\n\n\ndef f(x):\n  return x._private\n",
  }
  trees = {name: ast.parse(text) for name, text in sources.items()}
  assert _private_uses(trees) == [("importer", "lib", "_helper"), ("patcher", "lib", "_helper"),
                                  ("user", "lib", "_helper")]


def test_import_graph_has_no_circle():
  trees = _repo_modules()
  graph = {}
  for module, tree in trees.items():
    names, from_names = _imports(tree, trees)
    graph[module] = set(names.values()) | {target for target, _ in from_names}
  state = {}  # module -> 1 on the current path, 2 done

  def visit(module, path):
    state[module] = 1
    for target in sorted(graph[module] - {module}):
      if state.get(target) == 1:
        return path[path.index(target):] + [target]
      if target not in state:
        circle = visit(target, path + [target])
        if circle:
          return circle
    state[module] = 2
    return None

  for module in sorted(graph):
    if module not in state:
      circle = visit(module, [module])
      assert not circle, "import circle: %s" % " -> ".join(circle)


# ------------------------------------------------------------------------------------------------
# Layering: a command (a module with `if __name__ == "__main__":`) is the top of the graph. What
# commands share lives in library modules (realformer_tf/, the official libraries, a model
# family's library modules): no command imports another command and no library module imports a
# command, except for the official google-research/bert API of the official scripts, which code
# written against the official modules imports from them. Nothing imports a paper driver
# (paper/: it runs the commands as children).

# The official library API of the official scripts that are commands here (modeling,
# tokenization and optimization have no __main__: they are libraries).
OFFICIAL_API = {
    "create_pretraining_data": {
        "TrainingInstance", "MaskedLmInstance", "create_training_instances",
        "create_instances_from_document", "create_masked_lm_predictions", "truncate_seq_pair",
        "write_instance_to_example_files", "create_int_feature", "create_float_feature"},
    "run_pretraining": {
        "model_fn_builder", "input_fn_builder", "get_masked_lm_output",
        "get_next_sentence_output", "gather_indexes"},
    "run_classifier": {
        "InputExample", "PaddingInputExample", "InputFeatures", "DataProcessor",
        "XnliProcessor", "MnliProcessor", "MrpcProcessor", "ColaProcessor",
        "convert_single_example", "file_based_convert_examples_to_features",
        "file_based_input_fn_builder", "create_model", "model_fn_builder", "input_fn_builder",
        "convert_examples_to_features"},
    "run_squad": {
        "SquadExample", "InputFeatures", "read_squad_examples", "convert_examples_to_features",
        "create_model", "model_fn_builder", "input_fn_builder", "RawResult", "write_predictions",
        "get_final_text", "FeatureWriter", "validate_flags_or_throw"},
    "extract_features": {
        "InputExample", "InputFeatures", "read_examples", "convert_examples_to_features",
        "model_fn_builder", "input_fn_builder"},
}
# The reproduction drivers of the paper's tables.
PAPER_PACKAGE = "paper"
# A use of an imported module other than reading one of its names (passed on, or imported and
# never used): the names it gives cannot be checked.
WHOLE_MODULE = "(the module itself)"


def _is_command(tree):
  """A module with a top-level `if __name__ == "__main__":` block."""
  for node in tree.body:
    if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__"
                for c in node.test.comparators)):
      return True
  return False


def _names_used(tree, modules):
  """{repo module: set of its names the module uses}, for each repo module it imports.

  `from target import name` and `target.name` read or assigned count as uses of `name`; any
  other use of an imported module, or an import without a use, is WHOLE_MODULE.
  """
  names, from_names = _imports(tree, modules)
  used = {target: set() for target in names.values()}
  for target, name in from_names:
    used.setdefault(target, set()).add(name)
  attribute_bases = set()
  for node in ast.walk(tree):
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        and node.value.id in names):
      used[names[node.value.id]].add(node.attr)
      attribute_bases.add(id(node.value))
  for node in ast.walk(tree):
    if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names
        and id(node) not in attribute_bases):
      used[names[node.id]].add(WHOLE_MODULE)
  for target in used:
    if not used[target]:
      used[target].add(WHOLE_MODULE)
  return used


def _paper_imports(tree):
  """The modules of the paper package a module imports (function-level imports included)."""
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.extend(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      found.append(node.module)
  return sorted({name for name in found
                 if name == PAPER_PACKAGE or name.startswith(PAPER_PACKAGE + ".")})


def _layering_violations(trees):
  """One line per import of a command (beyond OFFICIAL_API) and per import of a paper driver."""
  commands = {module for module, tree in trees.items() if _is_command(tree)}
  found = []
  for module, tree in sorted(trees.items()):
    kind = "command" if module in commands else "library module"
    for target in _paper_imports(tree):
      found.append("%s (a %s) imports %s: nothing imports a paper driver" % (module, kind, target))
    for target, names in sorted(_names_used(tree, trees).items()):
      if target == module or target not in commands:
        continue
      beyond = sorted(names - OFFICIAL_API.get(target, set()))
      if beyond:
        found.append("%s (a %s) imports the command %s for %s (put it in a library module)" %
                     (module, kind, target, ", ".join(beyond)))
  return found


def test_no_command_or_library_imports_a_command():
  """Commands import library modules only (and the official API of the official scripts)."""
  trees = _repo_modules()
  commands = {module for module, tree in trees.items() if _is_command(tree)}
  assert {"run_classifier", "create_pretraining_data", "etc_model.create_pretraining_data",
          "translation.export_translation"} <= commands
  assert not {"modeling", "tokenization", "optimization", "realformer_tf.pretraining_data",
              "translation.decoding"} & commands
  assert set(OFFICIAL_API) <= commands
  violations = _layering_violations(trees)
  assert not violations, "\n".join(violations)


def test_layering_check_sees_commands_libraries_and_paper_drivers():
  """The check above flags a command or library importing a command (from-imports, module
  attributes, the module passed on or imported unused), lets the official API through, and
  flags any import of the paper package."""
  main = "\n\nif __name__ == \"__main__\":\n  main()\n"
  sources = {
      "tool": "def helper():\n  pass\n" + main,
      "run_pretraining": "def get_masked_lm_output():\n  pass\n" + main,
      "lib": "import tool\ntool.helper()\n",
      "other_tool": "from tool import helper\n" + main,
      "passer": "import tool\nrun(tool)\n",
      "unused": "import tool\n",
      "official_user": "import run_pretraining\nrun_pretraining.get_masked_lm_output()\n" + main,
      "official_and_more": "import run_pretraining as rp\nrp.get_masked_lm_output()\nrp.main()\n",
      "fine": "import lib\nlib.x = 1\n" + main,
      "reproducer": "def f():\n  from paper import table7\n",
      "paper_user": "import paper.table2 as t\n",
  }
  trees = {name: ast.parse(text) for name, text in sources.items()}
  assert _layering_violations(trees) == [
      "lib (a library module) imports the command tool for helper (put it in a library module)",
      "official_and_more (a library module) imports the command run_pretraining for main (put it "
      "in a library module)",
      "other_tool (a command) imports the command tool for helper (put it in a library module)",
      "paper_user (a library module) imports paper.table2: nothing imports a paper driver",
      "passer (a library module) imports the command tool for %s (put it in a library module)"
      % WHOLE_MODULE,
      "reproducer (a library module) imports paper: nothing imports a paper driver",
      "unused (a library module) imports the command tool for %s (put it in a library module)"
      % WHOLE_MODULE,
  ]


# ------------------------------------------------------------------------------------------------
# Flags are read in a command's main (or the function that turns them into the job's settings, or
# a check of them) and passed down as arguments: no job function reads the global FLAGS.

# The functions of a command that may read FLAGS: main, the flag definitions, the checks of the
# parsed flags (_check..._flags, _validate..._flags; run_squad's validate_flags_or_throw is
# official google-research/bert API), the one function that turns them into the job's settings
# (job_settings, settings_from_flags and the like, read_flags) and run_classifier's run().
FLAG_READERS = re.compile(r"^(main|define_flags|run|job_settings|\w*_from_flags|read_flags"
                          r"|_check\w*_flags|_validate\w*_flags|validate_flags_or_throw)$")
# The library-like modules of the official code (their FLAGS reads are the official ones).
OFFICIAL_FLAG_MODULES = ("modeling.py", "tokenization.py", "optimization.py")
def _flag_reads(source):
  """[(top-level definition, line)] of every read of FLAGS (or flags.FLAGS) in `source`, the
  module-level `FLAGS = flags.FLAGS` and the FLAGS handed to app.run's parser
  (`common.flags_parser(FLAGS)`) aside; "<module>" for module-level statements."""
  reads = []
  for node in ast.parse(source).body:
    owner = getattr(node, "name", "<module>")
    defines_flags = (isinstance(node, ast.Assign) and
                     [getattr(t, "id", None) for t in node.targets] == ["FLAGS"])
    parsed = set(id(arg) for sub in ast.walk(node)
                 if isinstance(sub, ast.Call) and getattr(sub.func, "attr", None) == "flags_parser"
                 for arg in sub.args)
    for sub in ast.walk(node):
      if defines_flags:
        break
      if id(sub) in parsed:
        continue
      if (isinstance(sub, ast.Name) and sub.id == "FLAGS" and isinstance(sub.ctx, ast.Load) or
          isinstance(sub, ast.Attribute) and sub.attr == "FLAGS"):
        reads.append((owner, sub.lineno))
  return reads


def _flag_reads_outside_readers(source):
  """["function (line N)"] of the reads of FLAGS in `source` outside FLAG_READERS."""
  return ["%s (line %d)" % (owner, line) for owner, line in _flag_reads(source)
          if not FLAG_READERS.match(owner)]


def _command_files():
  """The repository-relative paths of the command modules: the root's scripts (the official
  library modules aside) and the modules of etc_model/, translation/ and paper/."""
  paths = [name for name in os.listdir(REPO_DIR)
           if name.endswith(".py") and name != "setup.py" and name not in OFFICIAL_FLAG_MODULES]
  for folder in ("etc_model", "translation", "paper"):
    paths += ["%s/%s" % (folder, name) for name in os.listdir(os.path.join(REPO_DIR, folder))
              if name.endswith(".py")]
  return sorted(paths)


def test_commands_read_flags_only_in_main_and_the_flag_functions():
  paths = _command_files()
  assert {"run_ner.py", "run_squad.py", "translation/run_translation.py",
          "etc_model/run_pretraining.py", "paper/reproduce_table7.py"} <= set(paths)
  assert "modeling.py" not in paths and "setup.py" not in paths
  found = []
  for path in paths:
    with open(os.path.join(REPO_DIR, path), encoding="utf-8") as f:
      found += ["%s: %s" % (path, read) for read in _flag_reads_outside_readers(f.read())]
  assert not found, ("FLAGS read below main (pass the values down as arguments, or read them in "
                     "job_settings): " + ", ".join(found))


def test_flag_check_allows_main_the_checks_and_the_settings_only():
  source = textwrap.dedent("""\
      FLAGS = flags.FLAGS

      def job_settings(flag_values):
        return Settings(FLAGS.output_dir)

      def settings_from_flags():
        return FLAGS.size

      def _validate_flags():
        return FLAGS.vocab_file

      def validate_flags_or_throw(bert_config):
        return FLAGS.do_train

      def main(_):
        _run_job(job_settings(FLAGS))

      def _run_job(settings):
        return FLAGS.do_predict

      def _predict(settings):
        return FLAGS.output_dir
      """)
  assert _flag_reads_outside_readers(source) == ["_run_job (line 19)", "_predict (line 22)"]


def _is_sys_path(node):
  return (isinstance(node, ast.Attribute) and node.attr == "path"
          and isinstance(node.value, ast.Name) and node.value.id == "sys")


def _edits_sys_path(node):
  """sys.path.insert / append / ... (...), `sys.path = ...`, `sys.path[...] = ...`, `+=`."""
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
    return _is_sys_path(node.func.value)
  if isinstance(node, (ast.Assign, ast.AugAssign)):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(_is_sys_path(t) or isinstance(t, ast.Subscript) and _is_sys_path(t.value)
               for t in targets)
  return False


def test_no_module_edits_sys_path():
  found = ["%s:%d" % (module, node.lineno)
           for module, tree in sorted(_repo_modules().items())
           if module not in ALLOWED_SYS_PATH_EDITS
           for node in ast.walk(tree) if _edits_sys_path(node)]
  assert not found, ("sys.path edited (run a package's tool as `python -m PACKAGE.TOOL`; run.sh's "
                     ".pth puts the repository root on the path): %s" % ", ".join(found))


def test_test_file_names_are_unique():
  """pytest imports test files by base name (no __init__.py in tests/): one of each name."""
  seen = {}
  for root, dirs, files in os.walk(os.path.join(REPO_DIR, "tests")):
    dirs[:] = [d for d in dirs if d not in ("official", "fixtures", "__pycache__")]
    for name in files:
      if name.endswith(".py"):
        assert name not in seen, "%s in both %s and %s" % (name, seen[name], root)
        seen[name] = root


# ------------------------------------------------------------------------------------------------
# The product speaks of features: no ticket numbers and no words about how the work was organised.

PROCESS_WORDS = re.compile(
    r"\bissues? #?\d+|\bissue:|\b(?:first|second|third|next|last|this|previous) slice\b"
    r"|\b(?:this|previous|earlier|last|next) session\b|\bhelper-\d+\b|\bhostile-input campaign\b",
    re.IGNORECASE)


def _process_words(lines):
  return [(number, line) for number, line in enumerate(lines, 1) if PROCESS_WORDS.search(line)]


def test_no_process_words_in_tracked_files():
  found = []
  for name in _tracked_text_files():
    path = os.path.join(REPO_DIR, name)
    if not os.path.isfile(path) or name.startswith("data/") or name == "tests/test_repo.py":
      continue
    with open(path, encoding="utf-8", errors="replace") as f:
      found.extend("%s:%d: %s" % (name, number, line.strip()[:120])
                   for number, line in _process_words(f))
  assert not found, "\n".join(found)


def test_process_word_check_sees_tickets_and_work_slices():
  lines = ["# fixed in issue 23", "(issue 25.8)", "Issue #7", "the next slice adds it",
           "on the previous session's machine", "a 1 MB slice of text", "x[:, :length] slice",
           "a tf.Session", "session_config(flag_values)"]
  assert [number for number, _ in _process_words(lines)] == [1, 2, 3, 4, 5]


def _docstring_source(path):
  """The source text of a file's module docstring ('' without one)."""
  with open(path, encoding="utf-8") as f:
    source = f.read()
  tree = ast.parse(source)
  if not (tree.body and isinstance(tree.body[0], ast.Expr)
          and isinstance(tree.body[0].value, ast.Constant)
          and isinstance(tree.body[0].value.value, str)):
    return ""
  node = tree.body[0]
  return "".join(source.splitlines(True)[node.lineno - 1:node.end_lineno])


def _loses_line_continuations(docstring_source):
  """A non-raw docstring whose shell examples end lines with a backslash: Python joins those
  lines, so --help shows each command as one line with runs of spaces."""
  return (not docstring_source.lstrip().startswith(("r'''", 'r"""'))
          and "\\\n" in docstring_source)


def test_help_shows_usage_examples_with_their_line_breaks():
  found = []
  for module in _repo_modules():
    path = os.path.join(REPO_DIR, *module.split(".")) + ".py"
    if not os.path.isfile(path):
      path = os.path.join(REPO_DIR, module, "__init__.py")
    if _loses_line_continuations(_docstring_source(path)):
      found.append(module)
  assert not found, "make these module docstrings raw (r\"\"\"): %s" % found
  assert _loses_line_continuations('"""Run:\n  python x.py --a=1 \\\n    --b=2\n"""')
  assert not _loses_line_continuations('r"""Run:\n  python x.py --a=1 \\\n    --b=2\n"""')


def _first_imports(tree):
  """The modules a file imports at the top level, in order (`from a.b import c` gives "a.b.c")."""
  order = []
  for node in tree.body:
    if isinstance(node, ast.Import):
      order.extend(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      order.extend("%s.%s" % (node.module, alias.name) for alias in node.names)
  return order


def _imports_tensorflow_before_startup(tree, repo_modules):
  """Whether a command imports TensorFlow (or a repository module, which imports it) before
  realformer_tf.tf_startup, or never imports tf_startup."""
  for name in _first_imports(tree):
    if name == "realformer_tf.tf_startup":
      return False
    top = name.split(".")[0]
    if top.startswith("tensorflow") or top in ("tf_keras", "keras") or name in repo_modules or (
        name.rsplit(".", 1)[0] in repo_modules and top in _packages()):
      return True
  return True


def test_every_command_imports_tensorflow_through_tf_startup():
  trees = _repo_modules()
  commands = [m for m, tree in trees.items()
              if _is_script(tree) and m not in ("modeling", "tokenization", "optimization")]
  assert len(commands) > 20
  late = [m for m in commands if _imports_tensorflow_before_startup(trees[m], trees)]
  assert not late, "import realformer_tf.tf_startup before TensorFlow in: %s" % late
  def parsed(source):
    return ast.parse(textwrap.dedent(source))
  assert _imports_tensorflow_before_startup(parsed("import tensorflow as tf\n"
                                                   "from realformer_tf import tf_startup\n"), trees)
  assert _imports_tensorflow_before_startup(parsed("from realformer_tf import common\n"), trees)
  assert not _imports_tensorflow_before_startup(parsed("import os\nfrom absl import app\n"
                                                       "from realformer_tf import tf_startup\n"
                                                       "import tensorflow as tf\n"), trees)


def test_every_command_parses_its_flags_with_one_line_errors():
  # app.run's own parser prints two lines and exits 1 for an unknown or malformed flag.
  runs = {}
  for path in _command_files():
    with open(os.path.join(REPO_DIR, path), encoding="utf-8") as f:
      # A call and its continuation lines.
      calls = re.findall(r"^\s*app\.run\(.*(?:\n\s{6,}.*)*", f.read(), re.MULTILINE)
    if calls:
      runs[path] = calls
  assert {"run_classifier.py", "run_squad.py", "etc_model/run_long_tasks.py"} <= set(runs)
  plain = [path for path, calls in runs.items()
           if not all("flags_parser=common.flags_parser(FLAGS)" in call for call in calls)]
  assert not plain, "app.run(..., flags_parser=common.flags_parser(FLAGS)) in: %s" % plain
