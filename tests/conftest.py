"""Shared test fixtures: paths to the repo and to ../shared/data (skip when absent)."""

import os
import sys

import pytest

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA_DIR = os.environ.get(
    "REALFORMER_SHARED_DATA", os.path.join(os.path.dirname(REPO_DIR), "shared", "data"))

if REPO_DIR not in sys.path:
  sys.path.insert(0, REPO_DIR)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def shared_path(*parts):
  """Returns a path under ../shared/data, or skips the test with the reason if it is absent."""
  path = os.path.join(SHARED_DATA_DIR, *parts)
  if not os.path.exists(path):
    pytest.skip("needs %s (the shared data beside the repo; set REALFORMER_SHARED_DATA)" % path)
  return path


@pytest.fixture
def vocab_file():
  """The bert-base-uncased vocab from ../shared/data, or the copy shipped in data/."""
  shipped = os.path.join(REPO_DIR, "data", "vocab.txt")
  if os.path.exists(shipped):
    return shipped
  return shared_path("vocab", "bert_uncased_vocab.txt")
