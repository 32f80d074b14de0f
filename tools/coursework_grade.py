"""Grade submissions, each in its own sandboxed kernel, several at a time.

One submission is graded by a **driver**, this file run as ``python coursework_grade.py
--driver`` (a process of its own, so that nothing a submission does can stop the others): it
reads a job (JSON on stdin), starts the submission's kernel in the sandbox that
``coursework_sandbox`` describes (with the package's forbidden modules as stubs), and runs the
submitted notebook's code cells one by one (a cell's error is the student's and does not stop
the run; otter's own set-up and check cells are not run). Right after a question's
``grader.check`` cell, the question's tests run **here, in the driver**
(``coursework_remote``): the tests, expected values and comparisons never enter the kernel,
which only answers calls with plain data (``coursework_answer``, ``coursework_channel``). It
writes the executed notebook and the outcome (JSON, to a file of the grader's). The cells and
the tests' calls have ``limits.seconds`` of wall clock, counted once the kernel has started
(``STARTUP_SECONDS`` for that): when the time is up, or the kernel dies (``os._exit``, a
segmentation fault, a blown memory limit that kills rather than raises), the kernel is killed;
the questions graded before keep their points, the others score 0, with the reason.

Why not ``otter run``: it executes the notebook with the tests already on disk beside it, runs
them in the student's kernel and reads the results back by unpickling a file that kernel wrote.
Here the test cases run as otter runs them (``coursework_remote.run_case``, a doctest each), in
the grader's process, and the points come from the instructor's copy of the tests.

``grade_all`` runs the drivers in parallel (threads that wait on driver processes), one sandbox
user per slot, and returns the outcomes in the order of the jobs. Tested by
``tests/test_coursework_isolation.py``, ``tests/test_coursework_remote.py`` and
``tests/test_coursework.py`` (the hostile submissions).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from queue import Queue

import coursework_remote as remote
import coursework_report as report
import coursework_sandbox as sandbox
from coursework_remote import is_otter_cell  # noqa: F401 (coursework.build_one uses it)

MAX_OUTPUT_CHARS = 100_000  # per output of the executed notebook that is kept
# A kernel gets this long to start and import the test runner, before the submission's time
# limit starts counting.
STARTUP_SECONDS = 120
# The driver's own memory (it holds the notebook and the outputs the kernel sends).
DRIVER_MEMORY = 3 * 2**30


@dataclass(frozen=True)
class Job:
    """One submission to grade: what the driver process receives on stdin."""

    submission: str
    assignment: str
    student: str
    tests: dict[str, str]
    executed: str
    result: str
    limits: dict
    isolation: str = "sandbox"
    uid: int | None = None
    forbidden: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    """What became of one submission: ``results`` maps a test case to ``[passed, message]``.

    ``status``: ``graded`` (every question's tests ran), ``timeout``, ``crashed`` (the kernel
    died: the questions graded before keep their results), ``unreadable`` (not a notebook) or
    ``grader-error`` (the driver itself failed: no points). ``reason`` says why in a sentence;
    ``notes`` lists the cells that raised (``cell 4: NameError: ...``), limits that were hit and
    the questions not graded. ``cpu_seconds``: the CPU time of the kernel and of the driver
    (which runs the tests), of which ``killed_cpu_seconds`` were read from ``/proc`` before the
    kernel was killed at the end (the rest reached the driver through ``RUSAGE_CHILDREN``: the
    grader's total CPU is its own children's plus the sum of ``killed_cpu_seconds``).
    """

    status: str
    reason: str = ""
    results: dict[str, list] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    killed_cpu_seconds: float = 0.0


def _trim_outputs(nb) -> None:
    """Cut every text output of the kept notebook to ``MAX_OUTPUT_CHARS``."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if isinstance(out.get("text"), str) and len(out["text"]) > MAX_OUTPUT_CHARS:
                out["text"] = out["text"][:MAX_OUTPUT_CHARS] + "\n[... output cut by the grader]"


def _kernel_manager(argv: list[str], ipc: Path):
    """A jupyter kernel manager that starts ``argv`` and talks to it over Unix sockets in ``ipc``."""
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec

    class SandboxKernelManager(AsyncKernelManager):
        @property
        def kernel_spec(self) -> KernelSpec:
            return KernelSpec(argv=argv, display_name="graded submission", language="python")

        def write_connection_file(self, **kwargs):
            out = super().write_connection_file(**kwargs)
            os.chmod(self.connection_file, 0o644)  # the kernel runs as another user
            return out

    return SandboxKernelManager(
        transport="ipc", ip=str(ipc / "kernel"), connection_file=str(ipc / "kernel.json")
    )


def _prepare(job: Job, work: Path) -> tuple[list[str], Path, str | None]:
    """The kernel's command line, its socket folder and (process isolation) working folder.

    The kernel sees the package without the modules the rules forbid, and the answering
    module (``sandbox.answer_files``).
    """
    limits = sandbox.Limits(**job.limits)
    ipc = work / "ipc"
    ipc.mkdir(mode=0o777)
    os.chmod(ipc, 0o777)  # the kernel creates its sockets here; closed once it has started
    copy = work / f"{job.assignment}.ipynb"
    shutil.copyfile(job.submission, copy)
    os.chmod(copy, 0o644)
    (work / "answer").mkdir()
    forbidden = job.forbidden or remote.forbidden_modules(list(job.tests.values()))
    package, grading = sandbox.answer_files(work / "answer", forbidden)
    if job.isolation == "sandbox":
        home = "/home/student"
        binds = {copy: Path(home) / copy.name, package: sandbox._package_dir()}
        binds[grading] = Path(sandbox.GRADING_DIR)
        return sandbox.kernel_argv("sandbox", home, binds, ipc, limits, job.uid), ipc, None
    home_dir = work / "home"
    home_dir.mkdir()
    shutil.copyfile(copy, home_dir / copy.name)
    if job.uid is not None:
        os.chown(home_dir, job.uid, job.uid)
    binds = {package.parent: package.parent, grading: grading}
    argv = sandbox.kernel_argv("process", str(home_dir), binds, None, limits, job.uid)
    return argv, ipc, str(home_dir)


def _run_cell(client, nb, index: int, deadline: float, outcome: Outcome, memory: int):
    """Execute code cell ``index`` before ``deadline``; None, or why the run stopped.

    A cell's error is noted (``outcome.notes``) and the run goes on; an allocation refused by
    the memory limit (``memory`` bytes) is noted as such.
    """
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    cell = nb.cells[index]
    remaining = deadline - time.monotonic()
    try:
        if remaining < 1:
            raise CellTimeoutError("no time left")
        client.timeout = int(remaining)
        client.execute_cell(cell, index)
    except CellTimeoutError:
        return f"timeout: cell {index + 1}"
    except DeadKernelError:
        return f"crashed: cell {index + 1}"
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            note = f"cell {index + 1}: {out['ename']}: {out['evalue'][:200]}"
            if report.is_memory(note):
                note += f" (the memory limit, {sandbox.format_size(memory)}, was reached)"
            outcome.notes.append(note)
    return None


def _run(client, nb, job: Job, deadline: float, outcome: Outcome, memory: int) -> str | None:
    """Run the cells in order; grade each question right after its check cell.

    A question is graded (``coursework_remote.run_question``: the tests here, the answers
    asked of the kernel) from the state its own and earlier cells made, before any later cell
    runs: a crash or a timeout later costs only the questions not yet graded.
    """
    questions = remote.questions_of(job.tests)
    at = remote.boundaries(nb, questions)
    pending, history = list(questions), []
    chan = remote.Channel(client, nb, deadline)

    def grade(names: list[str]) -> str | None:
        for name in names:
            pending.remove(name)
            outcome.results |= remote.run_question(chan, questions[name], history)
            if chan.dead:
                return chan.dead
        return None

    for index, cell in enumerate(list(nb.cells)):
        if cell.cell_type != "code":
            continue
        stopped = None
        if not remote.is_otter_cell(cell.source):
            stopped = _run_cell(client, nb, index, deadline, outcome, memory)
            history.append(cell.source)
        if stopped:
            break
        stopped = grade([q for q in pending if at.get(q) == index])
        if stopped:
            break
    else:
        stopped = grade(list(pending))
    if pending:
        outcome.notes.append(f"not graded: {', '.join(pending)}")
    return stopped


def _warm_up(client, nb) -> None:
    """Before the submission's first cell: import the answering module (startup, not timed)."""
    import nbformat

    cell = nbformat.v4.new_code_cell("import coursework_answer")
    nb.cells.append(cell)
    try:
        client.timeout = STARTUP_SECONDS
        client.execute_cell(cell, len(nb.cells) - 1, store_history=False)
    finally:
        nb.cells.pop()


def _execute(client, nb, job: Job, limits, outcome: Outcome, ipc: Path, log):
    """Start the kernel, run the cells and grade the questions: ``(stopped, returncode)``."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    stopped, returncode = None, None
    km = client.km
    with client.setup_kernel(stdin=subprocess.DEVNULL, stdout=log, stderr=log):
        os.chmod(ipc, 0o755)  # the sockets exist: nothing more may be created here
        try:
            _warm_up(client, nb)
        except (CellTimeoutError, DeadKernelError) as err:
            raise RuntimeError(f"the kernel did not start: {type(err).__name__}") from err
        deadline = time.monotonic() + limits.seconds
        stopped = _run(client, nb, job, deadline, outcome, limits.memory)
        process = km.provisioner.process if km.provisioner else None
        returncode = process.poll() if process else None
        if returncode is None and process is not None:
            outcome.killed_cpu_seconds = sandbox.tree_cpu_seconds(process.pid)
    return stopped, returncode


def run_submission(job: Job) -> Outcome:
    """Grade one submission (in the driver process); never raises for what a submission does.

    ``limits.seconds`` counts from the kernel's start (which has ``STARTUP_SECONDS`` of its
    own) to the last test.
    """
    import nbformat
    from nbclient import NotebookClient

    limits = sandbox.Limits(**job.limits)
    start = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = usage.ru_utime + usage.ru_stime + own.ru_utime + own.ru_stime
    try:
        nb = nbformat.read(job.submission, as_version=4)
    except Exception as err:  # a corrupt upload: reported, never raised
        return Outcome("unreadable", f"not a readable notebook ({type(err).__name__}: {err})")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    outcome = Outcome("graded")
    work = Path(tempfile.mkdtemp(prefix="dmlbook-grade-"))
    os.chmod(work, 0o711)
    try:
        argv, ipc, cwd = _prepare(job, work)
        client = NotebookClient(
            nb,
            km=_kernel_manager(argv, ipc),
            allow_errors=True,
            shutdown_kernel="immediate",
            iopub_timeout=10,
            startup_timeout=STARTUP_SECONDS,
            resources={"metadata": {"path": cwd}} if cwd else {},
        )
        with open(work / "kernel.log", "wb") as log:
            try:
                stopped, returncode = _execute(client, nb, job, limits, outcome, ipc, log)
            except RuntimeError as err:  # the kernel died before it started, or could not start
                log.flush()
                said = (work / "kernel.log").read_text(errors="replace").strip().splitlines()
                returncode = None
                stopped = f"crashed: at start ({err}; {(said or [''])[-1][:300]})"
            finally:
                if job.uid is not None:
                    sandbox.kill_everything_of(job.uid)
        if stopped:
            report.explain(outcome, stopped, returncode, limits)
        nb.metadata.setdefault("dmlbook_grading", {})["outcome"] = outcome.status
        _trim_outputs(nb)
        Path(job.executed).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, job.executed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    outcome.seconds = time.monotonic() - start
    reaped = usage.ru_utime + usage.ru_stime + own.ru_utime + own.ru_stime - cpu_before
    outcome.cpu_seconds = outcome.killed_cpu_seconds + reaped
    return outcome


def _driver_main() -> int:
    """``python coursework_grade.py --driver``: one job on stdin, its outcome in ``job.result``.

    The outcome goes to a file of the grader's (not to stdout, which a kernel could write to).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (DRIVER_MEMORY, hard))
    job = Job(**json.loads(sys.stdin.read()))
    threads = str(job.limits.get("threads", 1))  # the tests' own torch, here
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[key] = threads
    outcome = run_submission(job)
    Path(job.result).write_text(json.dumps(asdict(outcome)))
    return 0


def _call_driver(job: Job, limits: sandbox.Limits, running: set | None = None) -> Outcome:
    """Run one driver process; a driver that fails or overruns is reported, never raised.

    The process is in ``running`` while it runs (so that an interrupted grading can end it).
    """
    start = time.monotonic()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--driver"]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    running = set() if running is None else running
    running.add(proc)
    try:
        budget = limits.seconds + STARTUP_SECONDS + 60
        _, err = proc.communicate(json.dumps(asdict(job)), timeout=budget)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Outcome("grader-error", "the grader's driver did not finish: 0 on every test")
    finally:
        running.discard(proc)
    try:
        outcome = Outcome(**json.loads(Path(job.result).read_text()))
    except (OSError, ValueError, TypeError):
        why = (err.strip().splitlines() or ["no output"])[-1][:300]
        outcome = Outcome("grader-error", f"the grader's driver failed ({why}): 0 on every test")
        outcome.seconds = time.monotonic() - start
    return outcome


def grade_all(
    jobs: list[Job],
    parallel: int,
    limits: sandbox.Limits,
    on_done=None,
    isolation: str = "sandbox",
) -> list[Outcome]:
    """Grade ``jobs`` with at most ``parallel`` drivers at a time; outcomes in the jobs' order.

    Every job gets ``limits`` and ``isolation`` (``"sandbox"`` or ``"process"``, see
    ``coursework_sandbox``). ``on_done(job, outcome)`` is called (under a lock) as each
    submission finishes. As root, each parallel slot runs its submissions as a user id of its
    own, held by this run alone (``sandbox.UserIds``).
    """
    user_ids = sandbox.UserIds(parallel if os.geteuid() == 0 else 0)
    slots: Queue[int | None] = Queue()
    for slot in range(parallel):
        slots.put(user_ids.ids[slot] if user_ids.ids else None)
    lock, stop, running = threading.Lock(), threading.Event(), set()
    results = Path(tempfile.mkdtemp(prefix="dmlbook-outcomes-"))  # 0700: the grader's only

    def one(indexed: tuple[int, Job]) -> Outcome:
        index, job = indexed
        if stop.is_set():
            return Outcome("grader-error", "grading was interrupted before this submission")
        uid = slots.get()
        try:
            result = str(results / f"{index}.json")
            fields = {
                "uid": uid,
                "limits": asdict(limits),
                "result": result,
                "isolation": isolation,
            }
            job = Job(**{**asdict(job), **fields})
            outcome = _call_driver(job, limits, running)
        finally:
            slots.put(uid)
        if stop.is_set():  # its driver was ended by the interrupt: not graded
            return Outcome("grader-error", "grading was interrupted during this submission")
        if on_done is not None:
            with lock:
                on_done(job, outcome)
        return outcome

    pool = ThreadPoolExecutor(max_workers=parallel)
    try:
        return list(pool.map(one, enumerate(jobs)))
    except KeyboardInterrupt:  # end the drivers (their sandboxes die with them), then stop
        stop.set()
        for proc in list(running):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(results, ignore_errors=True)
        user_ids.close()


def available_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    return len(os.sched_getaffinity(0))


if __name__ == "__main__" and sys.argv[1:] == ["--driver"]:
    sys.exit(_driver_main())
