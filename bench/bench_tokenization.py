r"""Benchmarks FullTokenizer: official-style slow path vs the fast path, in MB/s.

Tokenizes a text file line by line (as create_pretraining_data.py does) with
  * the official-style char-by-char algorithm (the reference implementation
    in tests/test_tokenization.py, a textbook copy of google-research/bert),
  * tokenization.FullTokenizer.tokenize, with a fresh (cold) cache and again
    with the cache warm,
  * tokenization.FullTokenizer.tokenize_to_ids, cold and warm,
checks that all outputs are identical, and prints MB/s and the speed-up.

  python bench/bench_tokenization.py \
      --input_file=../shared/data/sample_1mb.txt --vocab_file=data/vocab.txt
"""

import importlib.util
import os
import sys
import time

from absl import app
from absl import flags

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_DIR)

from realformer_tf import common  # pylint: disable=g-import-not-at-top
import tokenization  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "input_file",
    os.path.join(common.shared_data_dir(), "sample_1mb.txt"),
    "UTF-8 text file to tokenize line by line.")
flags.DEFINE_string("vocab_file", os.path.join(REPO_DIR, "data", "vocab.txt"),
                    "WordPiece vocab file.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input.")
flags.DEFINE_bool("skip_slow", False, "Skip the (slow) official-style run.")


def _load_reference():
  """Imports tests/test_tokenization.py for its RefFullTokenizer."""
  tests_dir = os.path.join(REPO_DIR, "tests")
  sys.path.insert(0, tests_dir)  # for its `from conftest import ...`
  spec = importlib.util.spec_from_file_location(
      "ref_tokenization", os.path.join(tests_dir, "test_tokenization.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _time(fn, lines):
  start = time.perf_counter()
  out = [fn(line) for line in lines]
  return time.perf_counter() - start, out


def main(_):
  common.require_file(FLAGS.input_file, "input_file")
  common.require_file(FLAGS.vocab_file, "vocab_file")
  with open(FLAGS.input_file, "rb") as f:
    data = f.read()
  mb = len(data) / 1e6
  lines = data.decode("utf-8", "ignore").split("\n")
  print("input %s: %.3f MB, %d lines; vocab %s; do_lower_case=%s" %
        (FLAGS.input_file, mb, len(lines), FLAGS.vocab_file, FLAGS.do_lower_case))

  rows = []
  slow_tokens = None
  if not FLAGS.skip_slow:
    ref = _load_reference()
    slow = ref.RefFullTokenizer(ref.ref_load_vocab(FLAGS.vocab_file),
                                do_lower_case=FLAGS.do_lower_case)
    seconds, slow_tokens = _time(slow.tokenize, lines)
    rows.append(("official-style tokenize", seconds))

  fast = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  seconds, fast_tokens = _time(fast.tokenize, lines)
  rows.append(("fast tokenize, cold cache", seconds))
  seconds, _ = _time(fast.tokenize, lines)
  rows.append(("fast tokenize, warm cache", seconds))

  fast_ids = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  seconds, ids = _time(fast_ids.tokenize_to_ids, lines)
  rows.append(("fast tokenize_to_ids, cold cache", seconds))
  seconds, _ = _time(fast_ids.tokenize_to_ids, lines)
  rows.append(("fast tokenize_to_ids, warm cache", seconds))

  if slow_tokens is not None and slow_tokens != fast_tokens:
    bad = next(i for i in range(len(lines)) if slow_tokens[i] != fast_tokens[i])
    raise SystemExit("MISMATCH on line %d: %r" % (bad, lines[bad]))
  if ids != [fast.convert_tokens_to_ids(t) for t in fast_tokens]:
    raise SystemExit("MISMATCH between tokenize_to_ids and tokenize")

  n_tokens = sum(len(t) for t in fast_tokens)
  print("%d tokens; outputs identical%s" %
        (n_tokens, "" if slow_tokens is None else " to the official-style run"))
  base = rows[0][1] if slow_tokens is not None else None
  for name, seconds in rows:
    ratio = " (x%.1f)" % (base / seconds) if base else ""
    print("%-34s %7.3f s %8.2f MB/s%s" % (name, seconds, mb / seconds, ratio))


if __name__ == "__main__":
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
