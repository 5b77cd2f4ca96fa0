"""gpupool.checkpoint, the task side of the checkpoint protocol, against a simulated agent: a
temporary directory as GPUPOOL_CHECKPOINT_DIR, the request written there and the signal sent to
this process as the agent does. The handler and `ready`, the request seen (also one written
before the handler was installed), the answer in `done`, chaining to the handler it replaced,
nothing at all outside a task; and a training loop in another process answering the requests."""

import importlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from unittest import mock

import gpupool
from gpupool import checkpoint

SDK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CheckpointTest(unittest.TestCase):
    def setUp(self):
        self.handlers = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        env = {checkpoint.DIR_ENV: self.dir, checkpoint.SIGNAL_ENV: "SIGUSR1"}
        self.env = mock.patch.dict(os.environ, env)
        self.env.start()
        importlib.reload(checkpoint)  # a fresh process's state: nothing installed yet

    def tearDown(self):
        self.env.stop()
        for s, handler in self.handlers.items():
            signal.signal(s, handler)
        self.tmp.cleanup()
        importlib.reload(checkpoint)

    def path(self, name):
        return os.path.join(self.dir, name)

    def agent_requests(self, number, sig=signal.SIGUSR1):
        """What the agent does before a snapshot: the number into `request` (atomically), then
        the signal."""
        with open(self.path("request.tmp"), "w", encoding="ascii") as f:
            f.write(f"{number}\n")
        os.rename(self.path("request.tmp"), self.path("request"))
        os.kill(os.getpid(), sig)

    def answer(self):
        with open(self.path("done"), encoding="ascii") as f:
            return f.read()

    def test_a_request_is_seen_and_answered_in_done(self):
        self.assertFalse(checkpoint.requested(), "nothing asked yet")
        self.assertTrue(os.path.exists(self.path("ready")), "it said it handles the signal")
        self.assertIs(signal.getsignal(signal.SIGUSR1), checkpoint._handler)
        self.agent_requests(17)
        self.assertTrue(checkpoint.requested())
        self.assertTrue(checkpoint.requested(), "still asked until answered")
        checkpoint.done()
        self.assertEqual(self.answer(), "17\n")
        self.assertEqual(sorted(os.listdir(self.dir)), ["done", "ready", "request"],
                         "written through a temporary file, none left")
        self.assertFalse(checkpoint.requested())
        checkpoint.done()  # nothing asked: nothing written
        self.assertEqual(self.answer(), "17\n")
        self.agent_requests(18)
        self.assertTrue(checkpoint.requested())
        checkpoint.done()
        self.assertEqual(self.answer(), "18\n")
        self.assertFalse(checkpoint.requested())

    def test_a_request_that_came_before_the_handler_is_still_seen(self):
        # The agent saw `ready` from an earlier process of the task and asked: this process got
        # no signal, but `request` holds a number not answered.
        with open(self.path("request"), "w", encoding="ascii") as f:
            f.write("5\n")
        self.assertTrue(checkpoint.requested())
        checkpoint.done()
        self.assertEqual(self.answer(), "5\n")
        self.assertFalse(checkpoint.requested())

    def test_a_request_already_answered_is_not_seen_again(self):
        for name in ("request", "done"):
            with open(self.path(name), "w", encoding="ascii") as f:
                f.write("5\n")
        self.assertFalse(checkpoint.requested())

    def test_a_request_during_the_save_is_not_lost(self):
        checkpoint.enable()
        self.agent_requests(20)
        self.assertTrue(checkpoint.requested())
        self.agent_requests(21)  # while the program saves for 20
        checkpoint.done()
        self.assertTrue(checkpoint.requested(), "21 is still to be answered")
        checkpoint.done()
        self.assertEqual(self.answer(), "21\n")

    def test_enable_installs_early_and_once(self):
        self.assertTrue(checkpoint.enable())
        self.assertTrue(os.path.exists(self.path("ready")))
        self.assertTrue(checkpoint.enable())
        self.assertIs(signal.getsignal(signal.SIGUSR1), checkpoint._handler)
        self.agent_requests(3)
        self.assertTrue(checkpoint.requested())

    def test_the_signal_is_the_one_the_agent_names(self):
        os.environ[checkpoint.SIGNAL_ENV] = "SIGUSR2"
        checkpoint.enable()
        self.assertIs(signal.getsignal(signal.SIGUSR2), checkpoint._handler)
        self.assertIs(signal.getsignal(signal.SIGUSR1), self.handlers[signal.SIGUSR1])
        self.agent_requests(9, signal.SIGUSR2)
        self.assertTrue(checkpoint.requested())

    def test_a_python_handler_it_replaced_is_still_called(self):
        calls = []
        signal.signal(signal.SIGUSR1, lambda signum, frame: calls.append(signum))
        checkpoint.enable()
        self.agent_requests(4)
        self.assertTrue(checkpoint.requested())
        self.assertEqual(calls, [signal.SIGUSR1])

    def test_the_first_call_must_come_from_the_main_thread(self):
        caught = []

        def other():
            try:
                checkpoint.requested()
            except RuntimeError as e:
                caught.append(str(e))

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        self.assertEqual(len(caught), 1)
        self.assertIn("main thread", caught[0])
        self.assertFalse(os.path.exists(self.path("ready")), "no handler: the signal would kill")

    def test_an_unknown_signal_name_is_an_error_naming_the_variable(self):
        os.environ[checkpoint.SIGNAL_ENV] = "SIGNOPE"
        with self.assertRaisesRegex(RuntimeError, r"GPUPOOL_CHECKPOINT_SIGNAL='SIGNOPE'"):
            checkpoint.requested()
        self.assertFalse(os.path.exists(self.path("ready")))

    def test_outside_a_task_it_does_nothing(self):
        del os.environ[checkpoint.DIR_ENV]
        self.assertFalse(checkpoint.requested())
        self.assertFalse(checkpoint.enable())
        checkpoint.done()
        self.assertIs(signal.getsignal(signal.SIGUSR1), self.handlers[signal.SIGUSR1],
                      "no handler installed")
        self.assertEqual(os.listdir(self.dir), [])

    def test_it_is_part_of_the_package(self):
        self.assertIs(gpupool.checkpoint, checkpoint)

    def test_a_training_loop_in_another_process_checkpoints_when_asked(self):
        # The agent's side exactly: wait for `ready`, write `request`, signal the task's process,
        # wait for `done` to hold the number; the task saves, answers, and goes on.
        loop = textwrap.dedent(f"""\
            import os, sys, time
            sys.path.insert(0, {SDK_DIR!r})
            from gpupool import checkpoint
            step = 0
            while True:
                step += 1
                time.sleep(0.005)
                if checkpoint.requested():
                    with open(os.path.join({self.dir!r}, "state.tmp"), "w") as f:
                        f.write(str(step))
                    os.replace(os.path.join({self.dir!r}, "state.tmp"),
                               os.path.join({self.dir!r}, "state"))
                    checkpoint.done()
            """)
        task = subprocess.Popen([sys.executable, "-c", loop])
        try:
            self.wait_for(lambda: os.path.exists(self.path("ready")))
            for number in (101, 102):
                with open(self.path("request"), "w", encoding="ascii") as f:
                    f.write(f"{number}\n")
                task.send_signal(signal.SIGUSR1)
                self.wait_for(lambda: os.path.exists(self.path("done"))
                              and self.answer() == f"{number}\n")
                self.assertIsNone(task.poll(), "the signal did not end it")
            with open(self.path("state"), encoding="ascii") as f:
                self.assertGreater(int(f.read()), 0)
        finally:
            task.kill()
            task.wait()

    @staticmethod
    def wait_for(predicate, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s")
            time.sleep(0.01)


if __name__ == "__main__":
    unittest.main()
