"""Benchmark create_pretraining_data.py: throughput (MB of input text per second) and peak memory.

Runs the script as a subprocess on ../shared/data/sample_1mb.txt and on all of
../shared/data/corpus/*.txt (28 MB) with dupe_factor 5, max_seq_length 128 and the bert-base-uncased
vocab, polls /proc every 50 ms for the whole process tree (the main process and its workers), and
prints a table with the ratios against the official script measured on this machine
(the official script on the 2-core CPU machine, TF 2.15 with a compat shim: 5.38 MB in 45 s = 0.12 MB/s on one core, 831 MB peak RSS).

Memory columns: "RSS sum" adds the resident set of every process of the tree (pages shared by the
forked workers, e.g. the TensorFlow library, are counted once per process); "PSS sum" splits shared
pages between the processes that share them (the real footprint); "main RSS" is the main process
alone (ru_maxrss of a child of this script is also shown as "max child RSS").

A third run on the corpus written twice (57 MB, in a temporary directory) shows that the peak
memory does not grow with the input (--skip_x2 to leave it out).

Usage: .venv/bin/python bench/bench_create_pretraining_data.py [--num_workers=0] [--skip_x2]
"""

import argparse
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_DIR)
from realformer_tf import common  # pylint: disable=g-import-not-at-top,wrong-import-position
import create_pretraining_data  # pylint: disable=g-import-not-at-top,wrong-import-position

SHARED = common.shared_data_dir()
OFFICIAL_MB_PER_S = 5.38 / 45.0
OFFICIAL_PEAK_MB = 831.0


def _children(pid):
  """All descendant pids of pid (from /proc/<pid>/task/*/children)."""
  out = []
  stack = [pid]
  while stack:
    p = stack.pop()
    for path in glob.glob("/proc/%d/task/*/children" % p):
      try:
        with open(path) as f:
          kids = [int(x) for x in f.read().split()]
      except OSError:
        continue
      out.extend(kids)
      stack.extend(kids)
  return out


def _rss_kb(pid):
  """Resident set of one process in KB from /proc/<pid>/statm (cheap), 0 if it is gone."""
  try:
    with open("/proc/%d/statm" % pid) as f:
      return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
  except (OSError, IndexError, ValueError):
    return 0


def _mem_kb(pid):
  """(rss_kb, pss_kb) of one process from smaps_rollup (slower), or (0, 0) if it is gone."""
  rss = pss = 0
  try:
    with open("/proc/%d/smaps_rollup" % pid) as f:
      for line in f:
        if line.startswith("Rss:"):
          rss = int(line.split()[1])
        elif line.startswith("Pss:"):
          pss = int(line.split()[1])
  except OSError:
    pass
  return rss, pss


def run_once(name, input_pattern, total_bytes, out_dir, num_workers):
  """Runs the script once; returns a dict of measurements."""
  output = os.path.join(out_dir, name + ".tfrecord")
  cmd = [sys.executable, os.path.join(REPO_DIR, "create_pretraining_data.py"),
         "--input_file=" + input_pattern, "--output_file=" + output,
         "--vocab_file=" + os.path.join(REPO_DIR, "data", "vocab.txt"), "--do_lower_case=True",
         "--max_seq_length=128", "--max_predictions_per_seq=20", "--dupe_factor=5",
         "--masked_lm_prob=0.15", "--random_seed=12345", "--num_workers=%d" % num_workers]
  load = os.getloadavg()[0]
  cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.time()
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO_DIR,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  peak_rss = peak_pss = peak_main = max_procs = 0
  log = []
  import threading  # pylint: disable=g-import-not-at-top
  reader = threading.Thread(target=lambda: log.extend(proc.stdout))
  reader.start()
  polls = 0
  while proc.poll() is None:
    pids = [proc.pid] + _children(proc.pid)
    rss = [_rss_kb(p) for p in pids]
    peak_rss = max(peak_rss, sum(rss))
    peak_main = max(peak_main, rss[0])
    max_procs = max(max_procs, len(pids))
    if polls % 5 == 0:  # PSS walks every mapping: sample it less often
      peak_pss = max(peak_pss, sum(_mem_kb(p)[1] for p in pids))
    polls += 1
    time.sleep(0.05)
  reader.join()
  wall = time.time() - start
  cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
  if proc.returncode != 0:
    sys.stdout.write(b"".join(log).decode("utf-8", "replace")[-3000:])
    raise SystemExit("%s: create_pretraining_data.py failed (exit %d)" % (name, proc.returncode))
  with open(create_pretraining_data.summary_path_for(output)) as f:
    summary = json.load(f)
  return {
      "name": name, "mb": total_bytes / 1e6, "wall_s": wall, "elapsed_s": summary["elapsed_s"],
      "mb_per_s": summary["mb_per_s"], "wall_mb_per_s": total_bytes / 1e6 / wall,
      "cpu_s": cpu_s, "load_before": load,
      "instances": summary["instances"], "rss_sum_mb": peak_rss / 1024.0,
      "pss_sum_mb": peak_pss / 1024.0, "main_rss_mb": peak_main / 1024.0, "processes": max_procs,
      "masked_fraction": summary["masked_fraction"],
      "nsp_random_fraction": summary["nsp_random_fraction"],
      "output_mb": sum(os.path.getsize(p) for p in glob.glob(output + "*")
                       if not p.endswith(".json")) / 1e6,
      "summary": summary,
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num_workers", type=int, default=0, help="0 = all cores")
  parser.add_argument("--skip_x2", action="store_true",
                      help="skip the 57 MB run (the corpus twice)")
  args = parser.parse_args()
  sample = os.path.join(SHARED, "sample_1mb.txt")
  corpus = sorted(glob.glob(os.path.join(SHARED, "corpus", "*.txt")))
  if not os.path.exists(sample) or not corpus:
    raise SystemExit("error: needs %s and %s/corpus/*.txt" % (sample, SHARED))
  out_dir = tempfile.mkdtemp(prefix="bench_cpd_")
  rows = []
  try:
    runs = [("sample_1mb", sample, [sample]),
            ("corpus_28mb", os.path.join(SHARED, "corpus", "*.txt"), corpus)]
    if not args.skip_x2:
      # The corpus twice (57 MB), to show that memory stays flat as the input grows.
      doubled = os.path.join(out_dir, "corpus_x2.txt")
      with open(doubled, "wb") as out:
        for path in corpus + corpus:
          with open(path, "rb") as f:
            shutil.copyfileobj(f, out)
          out.write(b"\n")
      runs.append(("corpus_x2_57mb", doubled, [doubled]))
    for name, pattern, files in runs:
      total = sum(os.path.getsize(p) for p in files)
      rows.append(run_once(name, pattern, total, out_dir, args.num_workers))
      if name == "corpus_x2_57mb":
        os.remove(files[0])
      for path in glob.glob(os.path.join(out_dir, name + ".tfrecord*")):
        os.remove(path)  # outputs are large; keep the disk use of the benchmark small
  finally:
    shutil.rmtree(out_dir, ignore_errors=True)

  print("\ncreate_pretraining_data.py, dupe_factor 5, max_seq_length 128, bert-base-uncased vocab, "
        "%d cores, num_workers=%s" % (os.cpu_count(), args.num_workers or "all"))
  header = ("input", "MB", "instances", "proc MB/s", "x official", "wall s", "wall MB/s",
            "CPU s", "PSS sum MB", "RSS sum MB", "main RSS MB", "procs", "load before")
  print("| " + " | ".join(header) + " |")
  print("|" + "---|" * len(header))
  for r in rows:
    row_format = ("| %s | %.2f | %d | %.2f | %.1fx | %.1f | %.2f | %.1f | %.0f | %.0f | %.0f | %d "
                  "| %.1f |")
    print(row_format % (
        r["name"], r["mb"], r["instances"], r["mb_per_s"], r["mb_per_s"] / OFFICIAL_MB_PER_S,
        r["wall_s"], r["wall_mb_per_s"], r["cpu_s"], r["pss_sum_mb"], r["rss_sum_mb"],
        r["main_rss_mb"], r["processes"], r["load_before"]))
  print("| official (2-core machine) | 5.38 | 75336 | %.2f | 1.0x | 45.0 | %.2f | ~45 | - | %.0f "
        "| %.0f | 1 | - |" % (OFFICIAL_MB_PER_S, OFFICIAL_MB_PER_S, OFFICIAL_PEAK_MB,
                               OFFICIAL_PEAK_MB))
  print("\nproc MB/s: input MB / time from the first byte read to the last shard renamed (summary "
        "elapsed_s); wall: the whole command including Python/TensorFlow start-up; CPU s: user+sys "
        "of the whole process tree. The machine may be shared: \"load before\" is the 1-minute "
        "load average when the run started (other jobs slow the MB/s columns, not the CPU column).")
  for r in rows:
    print("%s: %.2f MB per CPU-second (official: %.2f)" % (r["name"], r["mb"] / r["cpu_s"],
                                                          OFFICIAL_MB_PER_S))
  print("peak memory (PSS sum): " + ", ".join(
      "%.0f MB for %.1f MB of text" % (r["pss_sum_mb"], r["mb"]) for r in rows) +
        "; official: %.0f MB (one process) for 5.38 MB" % OFFICIAL_PEAK_MB)
  print("max RSS of a child of this script (ru_maxrss): %.0f MB" %
        (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0))
  for r in rows:
    print("%s: masked fraction %.4f, NSP random %.3f, output %.1f MB" % (
        r["name"], r["masked_fraction"], r["nsp_random_fraction"], r["output_mb"]))


if __name__ == "__main__":
  main()
