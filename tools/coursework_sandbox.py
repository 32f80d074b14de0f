"""Where a submission's code runs while it is graded: a kernel in a sandbox, under limits.

Grading executes code written by students; a submission may crash its kernel, loop forever,
allocate without bound, or try to read the hidden tests and write where it should not. Each
submission's Jupyter kernel is therefore started (``kernel_argv``) as

* its own process, under ``prlimit`` (util-linux): ``RLIMIT_AS`` (the memory limit, virtual
  memory: an allocation past it fails with ``MemoryError``), ``RLIMIT_FSIZE`` (no file larger than
  the limit) and ``RLIMIT_NPROC`` (no fork bomb); the wall-clock limit is the driver's
  (``coursework_grade``), which kills the sandbox when the time is up;
* inside bubblewrap (``bwrap``, the sandbox of Flatpak), in new mount, PID, network, IPC and UTS
  namespaces: the file system it sees is the operating system (``/usr``, read-only), this Python
  and its packages (read-only), the ``dmlbook`` package (read-only), the submitted notebook
  (read-only) and two size-limited in-memory folders it may write, its working folder and
  ``/tmp``. The repository (solutions, hidden tests), the autograder zips, the other submissions
  and the grades do not exist there; there is no network; it sees no other process;
* as an unprivileged user: as root, a user id of its own per parallel slot (``setpriv`` drops
  every capability); as an ordinary user, bubblewrap's user namespace maps it to that user,
  whose files it still cannot reach outside the folders above.

The tests never enter the sandbox at all: they run in the grader's driver, which asks the
kernel for the answers (``coursework_remote``). The package the kernel sees is a copy with the
modules the assignment's rules forbid replaced by stubs (``answer_files``).

When bubblewrap is missing or cannot create namespaces (a Docker container under its default
seccomp profile, a kernel without unprivileged user namespaces), ``sandbox_problem`` says so and
grading stops, unless the instructor asks for ``--isolation process``: the same process, limits
and user, but the whole file system visible (everything world-readable, the repository's master
notebooks included, unless their permissions forbid it) and the network reachable. That is a
weaker isolation and the grader prints so. Tested by ``tests/test_coursework_isolation.py``.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MODES = ("sandbox", "process")
# User ids of the graded kernels when grading runs as root: one per parallel slot, from here up
# (ids no account of this machine uses and no other grading run holds: ``UserIds``).
# DMLBOOK_GRADER_UID_BASE moves them (a simulated Gradescope container, whose lock files are
# its own, uses other ids than the machine's grading runs: coursework_gradescope._container).
UID_BASE = int(os.environ.get("DMLBOOK_GRADER_UID_BASE", "2000000"))
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int:
    """Bytes from ``'512M'``, ``'4G'``, ``'1.5G'`` or a plain number of bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"not a size: {text!r} (write e.g. 512M or 4G)")
    return int(float(m[1]) * _UNITS[m[2].upper()])


def format_size(n: int) -> str:
    """``4294967296`` -> ``'4G'`` (the largest unit that divides it, else MiB with a decimal)."""
    for unit in "TGMK":
        if n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]}{unit}"
    return f"{n / 2**20:.1f}M"


@dataclass(frozen=True)
class Limits:
    """Per-submission limits (``make grade TIMEOUT=... MEMORY=...``).

    ``seconds``: wall clock for the submission's cells and the tests, from the moment its kernel
    has started (a kernel gets two minutes more to start); ``memory``: the
    kernel's virtual memory (``RLIMIT_AS``; importing torch alone takes about 0.8 GiB of it);
    ``disk``: each of the two writable in-memory folders, and the largest file; ``processes``:
    processes and threads of the sandbox's user; ``threads``: BLAS/OpenMP threads of the kernel.
    """

    seconds: float = 300.0
    memory: int = 4 * 2**30
    disk: int = 256 * 2**20
    processes: int = 256
    threads: int = 1

    def describe(self) -> str:
        return (
            f"{self.seconds:g} s, {format_size(self.memory)} of memory, "
            f"{format_size(self.disk)} of files, {self.threads} thread(s)"
        )


class UserIds:
    """User ids for a grading run's parallel slots (root only), each held by this run alone.

    An id is taken when no account of this machine has it and its lock file
    (``<tmp>/dmlbook-grader-uid-<id>.lock``) can be locked: two grading runs on one machine
    (two instructors, two test workers) never share one, so that ending everything an id runs
    (``kill_everything_of``, after each submission) never touches the other run's kernels.
    Whatever an earlier run left under a taken id is ended first.
    """

    def __init__(self, count: int) -> None:
        self.ids: list[int] = []
        self._locks = []
        uid = UID_BASE
        while len(self.ids) < count:
            if uid > UID_BASE + 100_000:
                raise RuntimeError("no free user id for grading: see UID_BASE")
            try:
                pwd.getpwuid(uid)
            except KeyError:
                lock = open(Path(tempfile.gettempdir()) / f"dmlbook-grader-uid-{uid}.lock", "w")  # noqa: SIM115
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    lock.close()
                else:
                    self._locks.append(lock)
                    self.ids.append(uid)
                    kill_everything_of(uid)
            uid += 1

    def close(self) -> None:
        """End whatever the ids still run, then release them."""
        for uid, lock in zip(self.ids, self._locks, strict=True):
            kill_everything_of(uid)
            lock.close()
        self._locks, self.ids = [], []

    def __enter__(self) -> UserIds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _package_dir() -> Path:
    """The folder of the ``dmlbook`` package the kernels import (this checkout's, or installed)."""
    spec = importlib.util.find_spec("dmlbook")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("dmlbook is not importable: run `make install`")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def readonly_paths() -> list[Path]:
    """What the kernel needs to read besides ``/usr``: this Python, its packages, dmlbook."""
    paths = [Path(sys.base_prefix).resolve(), Path(sys.prefix)]
    package = _package_dir()
    if not any(package.is_relative_to(p) for p in paths):
        paths.append(package)
    return sorted({p for p in paths if not p.is_relative_to("/usr")})


GRADING_DIR = "/opt/dmlbook-grading"  # the answering module, inside the sandbox
_TOOLS = Path(__file__).resolve().parent
STUB = '''"""{module}: not available here: this assignment's rules forbid it in answers."""


class _Forbidden:
    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise PermissionError(
            f"{{self.name}}: the rules of this assignment forbid {module} in answers "
            "(it does not exist where your notebook is graded)"
        )

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Forbidden(f"{{self.name}}.{{name}}")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Forbidden(f"{{__name__}}.{{name}}")
'''


def answer_files(dest: Path, forbidden: list[str]) -> tuple[Path, Path]:
    """The package and the answering module a sandboxed kernel sees, written under ``dest``.

    ``dest/dmlbook``: a copy of the ``dmlbook`` package without bytecode, in which each
    module of ``forbidden`` (``dmlbook.evaluate``: a module, or a package with all its
    submodules) is a stub: importing it works (other modules import it), but every name it
    gives raises ``PermissionError`` when called. The real code is not in the sandbox at all,
    so no profile hook, import trick or file read can reach it. ``dest/grading``: the two files
    that answer the grader (``coursework_answer``, ``coursework_channel``). Returns both
    folders, readable by every user.
    """
    package, target = _package_dir(), dest / "dmlbook"
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for module in forbidden:
        parts = module.split(".")
        if parts[0] != "dmlbook":
            continue
        path = target.joinpath(*parts[1:])
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
        for file in files:
            if file.is_file() or file == path.with_suffix(".py"):
                name = ".".join(file.relative_to(dest).with_suffix("").parts)
                file.write_text(STUB.format(module=name.removesuffix(".__init__")))
    grading = dest / "grading"
    grading.mkdir()
    for name in ("coursework_answer.py", "coursework_channel.py"):
        shutil.copyfile(_TOOLS / name, grading / name)
    for path in [dest, *dest.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return target, grading


def kernel_env(home: str, limits: Limits, pythonpath: str | None = None) -> dict[str, str]:
    """The kernel's whole environment: nothing inherited from the grader's."""
    threads = str(limits.threads)
    return {
        "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "USER": "student",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "PYTHONPATH": pythonpath or f"{_package_dir().parent}{os.pathsep}{GRADING_DIR}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "OMP_WAIT_POLICY": "PASSIVE",
        "MALLOC_ARENA_MAX": "2",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "IPYTHONDIR": "/tmp/ipython",
        "TQDM_DISABLE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }


def _prlimit(limits: Limits) -> list[str]:
    return [
        "prlimit",
        f"--as={limits.memory}",
        f"--fsize={limits.disk}",
        f"--nproc={limits.processes}",
        "--core=0",
        "--",
    ]


def _drop_to(uid: int) -> list[str]:
    """``setpriv`` to ``uid``: no supplementary groups, no capabilities, no setuid gains."""
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
    ]


def _dirs(targets: list[Path]) -> list[str]:
    """``--dir`` for every ancestor of the mount points, world-readable (bwrap's default is 0700)."""
    out, made = [], set()
    for target in targets:
        for parent in reversed(target.parents[:-1]):
            if parent not in made:
                made.add(parent)
                out += ["--perms", "0755", "--dir", str(parent)]
    return out


def bwrap_argv(
    home: str, binds: dict[Path, Path], shared: Path | None, limits: Limits, uid: int | None
) -> list[str]:
    """bubblewrap's arguments up to the command: namespaces, the file system, the environment.

    ``binds`` maps host files to sandbox paths (read-only); ``shared`` is a host folder seen at
    the same path, writable (the kernel's sockets); ``home`` is the writable working folder (in
    memory, ``limits.disk`` bytes). ``uid`` is the user to drop to inside when the grader is
    root (None: an unprivileged user namespace, for graders who are not root).
    """
    ro = readonly_paths()
    argv = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]
    argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if uid is not None else []
    argv += ["--unshare-user"] if uid is None else []
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for etc in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group"):
        argv += ["--ro-bind-try", f"/etc/{etc}", f"/etc/{etc}"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    size = str(limits.disk)
    argv += ["--perms", "01777", "--size", size, "--tmpfs", "/dev/shm"]
    argv += ["--perms", "01777", "--size", size, "--tmpfs", "/tmp"]
    argv += _dirs(ro + [Path(home)] + list(binds.values()) + ([shared] if shared else []))
    argv += ["--perms", "01777", "--size", size, "--tmpfs", home]
    for path in ro:
        argv += ["--ro-bind", str(path), str(path)]
    for source, target in binds.items():
        argv += ["--ro-bind", str(source), str(target)]
    if shared is not None:
        argv += ["--bind", str(shared), str(shared)]
    for key, value in kernel_env(home, limits).items():
        argv += ["--setenv", key, value]
    return argv + ["--chdir", home]


def kernel_argv(
    mode: str,
    home: str,
    binds: dict[Path, Path],
    shared: Path | None,
    limits: Limits,
    uid: int | None,
) -> list[str]:
    """The command that starts one submission's kernel (``{connection_file}`` left for jupyter).

    ``mode`` is ``"sandbox"`` (bubblewrap; arguments as in ``bwrap_argv``) or ``"process"`` (no
    namespaces: ``home`` is a folder of the host, ``binds`` and ``shared`` are ignored).
    """
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    drop = _drop_to(uid) if uid is not None else []
    if mode == "sandbox":
        return _prlimit(limits) + bwrap_argv(home, binds, shared, limits, uid) + drop + kernel
    if mode == "process":
        path = os.pathsep.join(str(p) for p in binds)  # the answer files, first on the path
        env = [f"{k}={v}" for k, v in kernel_env(home, limits, path or None).items()]
        return _prlimit(limits) + ["env", "-i", *env] + drop + kernel
    raise ValueError(f"isolation must be one of {MODES}, not {mode!r}")


def sandbox_problem(uid: int | None) -> str | None:
    """None when a bubblewrap sandbox starts here, else what is wrong and how to fix it."""
    if shutil.which("bwrap") is None:
        return (
            "bubblewrap (bwrap) is not installed: install it (Debian/Ubuntu: "
            "`apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`)"
        )
    drop = _drop_to(uid) if uid is not None else []
    argv = bwrap_argv("/home/student", {}, None, Limits(), uid) + drop
    proc = subprocess.run(
        argv + [sys.executable, "-c", "import dmlbook"], capture_output=True, text=True
    )
    if proc.returncode == 0:
        return None
    return (
        f"bubblewrap cannot create the grading sandbox here: {proc.stderr.strip()[-500:]}\n"
        "It needs Linux namespaces: as root, CAP_SYS_ADMIN (a virtual machine, or a container "
        "started with --privileged or --cap-add SYS_ADMIN --security-opt seccomp=unconfined); "
        "as another user, unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1"
        " on Debian, or Ubuntu's AppArmor profile for bwrap)"
    )


def process_problem(uid: int | None) -> str | None:
    """None when ``--isolation process`` can start a kernel as ``uid`` here, else why not."""
    if uid is None:
        return None
    code = "import dmlbook, ipykernel"
    proc = subprocess.run(
        _drop_to(uid) + [sys.executable, "-c", code], capture_output=True, text=True
    )
    if proc.returncode == 0:
        return None
    return (
        f"user id {uid} cannot run this Python and its packages ({proc.stderr.strip()[-300:]}): "
        f"--isolation process needs {sys.prefix} and {sys.base_prefix} readable by other users "
        "(a Python under /root is not)"
    )


def weaker_isolation_warning(uid: int | None) -> str:
    """What ``--isolation process`` gives up, said before grading starts."""
    who = f"user id {uid}" if uid is not None else "your own user (you are not root)"
    return (
        "WARNING: --isolation process: submissions run as separate processes under the limits, "
        f"as {who}, but WITHOUT a private file system or network: their code can read every file "
        "that user may read (the repository's master notebooks hold the solutions and hidden "
        "tests: keep them unreadable, or grade elsewhere), write where that user may write, and "
        "reach the network. Use the default sandbox (bubblewrap) for untrusted submissions."
    )


def kill_everything_of(uid: int) -> None:
    """SIGKILL every process that runs as ``uid`` (a grading slot's user, nobody else's).

    The sandbox's PID namespace ends with its first process, but a submission run with
    ``--isolation process`` has none: this removes whatever it left running (a daemon, a fork).
    """
    code = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass"
    subprocess.run(_drop_to(uid) + [sys.executable, "-c", code], capture_output=True)


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (and of the children they have reaped).

    A kernel killed at the end is never waited for by this process, so ``RUSAGE_CHILDREN``
    would miss it; its process tree is read from ``/proc`` just before the kill.
    """
    parent, ticks = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        child = int(stat.parent.name)
        parent[child] = int(fields[1])
        ticks[child] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    tree, frontier = {pid}, {pid}
    while frontier:
        frontier = {c for c, p in parent.items() if p in frontier} - tree
        tree |= frontier
    return sum(ticks.get(c, 0) for c in tree) / os.sysconf("SC_CLK_TCK")
