# coding=utf-8
"""An order-keeping process pool that notices dead workers (OrderedPool).

Forked worker processes run one function over a stream of tasks and hand the results back in
task order, with at most max_in_flight tasks out at a time (memory stays flat whatever the
number of tasks). multiprocessing.Pool cannot tell that a worker died (it starts a replacement
and waits for ever for the lost result); here a worker's end is seen within OrderedPool.POLL_S
seconds and raised as WorkerDied, naming the worker, its exit status and the task it held.
A caller's should_stop() is polled while waiting (Stopped). create_pretraining_data.py's
pipeline (realformer_tf/pretraining_data.py) runs on it.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import multiprocessing
import multiprocessing.connection
import pickle
import queue
import signal
import threading
import traceback


class Stopped(Exception):
  """A stop was requested (SIGINT / SIGTERM): OrderedPool.imap raises it when its should_stop()
  says so, and the data pipelines raise it too (they remove their temporaries on the way out)."""


class WorkerDied(Exception):
  """A worker process ended without answering (e.g. SIGKILL from the out-of-memory killer).

  Attributes:
    pid: the worker's process id.
    exitcode: its exit status as multiprocessing reports it (-N: killed by signal N), or None.
    task_number: the task it was running (its index in the tasks: create_pretraining_data's
      chunk index) or, when it ran none, the first task sent to it and lost; None when it held
      no task.
    running: whether it was running task_number (else it had not begun it, or its answer was
      lost with it).
  """

  def __init__(self, pid, exitcode, task_number, running=True):
    self.pid = pid
    self.exitcode = exitcode
    self.task_number = task_number
    self.running = running
    super(WorkerDied, self).__init__(self.describe())

  def describe(self, task_name="task"):
    """E.g. "worker process 1234 died (signal 9, SIGKILL: out of memory?) while processing
    task 17"."""
    if self.exitcode is not None and self.exitcode < 0:
      signum = -self.exitcode
      try:
        name = signal.Signals(signum).name
      except ValueError:
        name = "unknown signal"
      how = "died (signal %d, %s%s)" % (signum, name,
                                        ": out of memory?" if signum == signal.SIGKILL else "")
    elif self.exitcode is not None:
      how = "exited with status %d" % self.exitcode
    else:
      how = "stopped answering"
    if self.task_number is None:
      return "worker process %d %s while it held no %s" % (self.pid, how, task_name)
    return "worker process %d %s %s %s %d" % (
        self.pid, how, "while processing" if self.running else "before handing back", task_name,
        self.task_number)


def _feed(connection, outbox):
  """Sends the pickled messages put in `outbox` over `connection` until None (a thread).

  Whoever puts never waits on the pipe: the parent does not wait for a busy worker to take its
  next task, and a worker goes on to its next task while the parent is busy writing. Messages
  are pickled by whoever puts them, so that a pickling error surfaces there, not in this thread.
  """
  while True:
    message = outbox.get()
    if message is None:
      return
    try:
      connection.send_bytes(message)
    except OSError:  # the other side is gone (the pool sees a worker's end by its sentinel)
      return


def _worker_loop(task_reader, result_writer, current, fn, initializer, initargs):
  """A worker process: initializer(*initargs), then fn(task) for each task until None.

  Messages: tasks (number, argument); results (number, True, fn(argument)) or
  (number, False, exception). `current` (shared memory, readable after this process is killed)
  holds the number of the task being run, -1 between tasks.
  """
  # A forked worker inherits the parent's handlers (e.g. a job's stop-at-a-safe-point handler):
  # SIGTERM, which close() sends, must end it at once whatever the parent installed; the
  # initializer may set its own.
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  initializer(*initargs)
  results = queue.Queue()
  sender = threading.Thread(target=_feed, args=(result_writer, results), daemon=True)
  sender.start()
  while True:
    try:
      task = pickle.loads(task_reader.recv_bytes())
    except (EOFError, OSError):  # the parent is gone
      break
    if task is None:
      break
    number, argument = task
    current.value = number
    try:
      result = _pickled((number, True, fn(argument)))
    except Exception as e:  # pylint: disable=broad-except
      try:
        result = _pickled((number, False, e))
      except Exception:  # pylint: disable=broad-except
        # An error that does not pickle reaches the parent as its traceback.
        result = _pickled((number, False, RuntimeError("".join(
            traceback.format_exception(type(e), e, e.__traceback__)))))
    current.value = -1
    results.put(result)
  results.put(None)
  sender.join()


def _pickled(message):
  return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


class _Worker(object):
  """One worker process, the parent's ends of its two pipes and the tasks it holds."""

  def __init__(self, process, tasks, results, current):
    self.process = process
    self.tasks = tasks
    self.results = results
    self.current = current  # the task it runs, -1 between tasks (shared memory)
    self.held = collections.deque()  # task numbers sent and not answered, in order
    self.outbox = queue.Queue()
    self.sender = threading.Thread(target=_feed, args=(tasks, self.outbox), daemon=True)


class OrderedPool(object):
  """Forked worker processes that run fn over tasks and hand the results back in task order.

  multiprocessing.Pool cannot tell that a worker died: it starts a replacement and waits for
  ever for the lost task's result. Here each worker has its own pipes and its exit is seen
  (process sentinel, end of file on its pipe) within POLL_S seconds and raised as WorkerDied,
  naming the worker and the task it was running. At most max_in_flight tasks are out (sent and
  not yet handed back), so memory stays flat whatever the number of tasks.

  Usage:
    pool = OrderedPool(2, fn, initializer, initargs)
    try:
      for result in pool.imap(tasks, max_in_flight=4, should_stop=...):
        ...
    finally:
      pool.close()  # the workers are ended and reaped
  """

  POLL_S = 0.5

  def __init__(self, num_workers, fn, initializer=lambda: None, initargs=()):
    """Starts the workers (forked where the platform can: they inherit initargs unpickled).

    Args:
      num_workers: int >= 1.
      fn: the task function (run in the workers).
      initializer: run once in each worker first (with initargs).
      initargs: tuple.
    """
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    self._workers = []
    try:
      for _ in range(num_workers):
        task_reader, task_writer = ctx.Pipe(duplex=False)
        result_reader, result_writer = ctx.Pipe(duplex=False)
        current = ctx.RawValue("q", -1)
        process = ctx.Process(target=_worker_loop, daemon=True,
                              args=(task_reader, result_writer, current, fn, initializer,
                                    initargs))
        process.start()
        # Only the worker keeps its ends: when it dies, its result pipe reads as ended.
        task_reader.close()
        result_writer.close()
        self._workers.append(_Worker(process, task_writer, result_reader, current))
      # Threads only once every worker is forked (a fork copies no thread, but their locks).
      for worker in self._workers:
        worker.sender.start()
    except BaseException:
      self.close()
      raise

  @property
  def pids(self):
    """The worker process ids."""
    return [worker.process.pid for worker in self._workers]

  def imap(self, tasks, max_in_flight, should_stop=None):
    """Yields fn(task) for each task, in order.

    Args:
      tasks: iterable of task arguments (read only as far as max_in_flight allows).
      max_in_flight: int >= 1, the most tasks sent and not yet handed back.
      should_stop: function() -> bool, polled while waiting; True raises Stopped.

    Yields:
      The results, in the order of `tasks`.

    Raises:
      WorkerDied: a worker ended (its task is lost: nothing more is yielded).
      Stopped: should_stop() said so.
      The exception fn raised for a task (a common.UsageError as it is).
    """
    should_stop = should_stop or (lambda: False)
    tasks = iter(tasks)
    done = {}  # task number -> result, received out of order
    next_number = 0  # the next result to hand back
    sent = 0
    exhausted = False
    while True:
      while not exhausted and sent - next_number < max_in_flight:
        task = next(tasks, _NO_TASK)
        if task is _NO_TASK:
          exhausted = True
          break
        self._send(min(self._workers, key=lambda w: len(w.held)), sent, task)
        sent += 1
      if next_number in done:
        result = done.pop(next_number)
        next_number += 1
        yield result
        continue
      if exhausted and next_number == sent:
        return
      self._receive(done)
      if should_stop():
        raise Stopped()

  def _send(self, worker, number, task):
    message = _pickled((number, task))
    worker.held.append(number)
    worker.outbox.put(message)

  def _receive(self, done):
    """Waits up to POLL_S for results or a worker's end; adds results to `done`."""
    by_wait_object = {}
    for worker in self._workers:
      by_wait_object[worker.results] = worker
      by_wait_object[worker.process.sentinel] = worker
    ready = multiprocessing.connection.wait(list(by_wait_object), self.POLL_S)
    # Results first: a worker may have answered just before it was killed.
    for worker in self._workers:
      if worker.results in ready:
        try:
          number, ok, value = pickle.loads(worker.results.recv_bytes())
        except (EOFError, OSError):  # ended, perhaps in the middle of a message
          self._died(worker)
        worker.held.remove(number)
        if not ok:
          raise value
        done[number] = value
    for worker in self._workers:
      if worker.process.sentinel in ready:
        self._died(worker)

  def _died(self, worker):
    """Raises WorkerDied for `worker` (reaped first, for its exit status)."""
    worker.process.join(timeout=5)
    current = worker.current.value
    if current >= 0:
      raise WorkerDied(worker.process.pid, worker.process.exitcode, current)
    # Between two tasks: the first task it held and did not answer is lost.
    try:
      while worker.results.poll():
        number = pickle.loads(worker.results.recv_bytes())[0]
        if number in worker.held:
          worker.held.remove(number)
    except (EOFError, OSError):
      pass
    raise WorkerDied(worker.process.pid, worker.process.exitcode,
                     worker.held[0] if worker.held else None, running=False)

  def close(self):
    """Ends the workers (SIGTERM, SIGKILL after 5 s), reaps them and closes the pipes."""
    for worker in self._workers:
      if worker.process.is_alive():
        worker.process.terminate()
    for worker in self._workers:
      worker.process.join(timeout=5)
      if worker.process.is_alive():
        worker.process.kill()
        worker.process.join()
      # The sender thread ends on None, or on the broken pipe of its ended worker.
      worker.outbox.put(None)
      if worker.sender.is_alive():
        worker.sender.join(timeout=5)
      worker.tasks.close()
      worker.results.close()
    self._workers = []


_NO_TASK = object()
