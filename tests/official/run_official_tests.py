"""Runs google-research/bert's own unit tests (kept here unchanged) against our modules.

    python tests/official/run_official_tests.py [modeling_test tokenization_test ...]

The official test files do `from bert import modeling` (tokenization, optimization): a `bert`
package is made here whose modules are the repository's own, with the repository root first on
sys.path. They ran under TensorFlow 1, so TF2 behaviour is turned off first (what the one-line
port `import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()` does), and the absl flags are
parsed as tf.test.main does. Exit status 0 when every test passes. tests/test_official_api.py
runs this; it is a separate process because TF2 behaviour cannot be turned back on.
"""

import importlib.util
import os
import sys
import types
import unittest

OFFICIAL_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(OFFICIAL_DIR))
OFFICIAL_TESTS = ("modeling_test", "tokenization_test", "optimization_test")


def bert_package():
  """Registers a `bert` package whose modeling / tokenization / optimization are ours."""
  # Not this folder: its modeling.py is the official one (for tests/test_modeling.py's parity).
  sys.path[:] = [REPO_DIR] + [p for p in sys.path
                              if os.path.abspath(p or ".") not in (REPO_DIR, OFFICIAL_DIR)]
  import modeling  # pylint: disable=g-import-not-at-top
  import optimization  # pylint: disable=g-import-not-at-top
  import tokenization  # pylint: disable=g-import-not-at-top
  package = types.ModuleType("bert")
  package.__path__ = []
  for module in (modeling, optimization, tokenization):
    setattr(package, module.__name__, module)
    sys.modules["bert." + module.__name__] = module
  sys.modules["bert"] = package
  return package


def main(argv):
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  tf.disable_v2_behavior()
  bert_package()
  flags.FLAGS(argv[:1])
  names = argv[1:] or OFFICIAL_TESTS
  suite = unittest.TestSuite()
  for name in names:
    spec = importlib.util.spec_from_file_location(
        "official_" + name, os.path.join(OFFICIAL_DIR, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(module))
  result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
  return 0 if result.wasSuccessful() and result.testsRun else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv))
