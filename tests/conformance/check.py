#!/usr/bin/env python3
"""The differential conformance suite: each program of fixtures/conformance runs under plain
python and under `memprof run`, in the same fresh working directory, with the same arguments,
standard input and environment. Its exit code, standard output and the files it writes must be
identical, and its standard error too once memprof's own lines (`memprof: ...`) are taken out;
memprof's report must have been written (to a file outside the working directory).

    tests/conformance/check.py --python VENV/bin/python --memprof MEMPROF [--only NAME ...]

MEMPROF is the command under test: the one cargo builds (tests/conformance.rs runs it) or the
wheel's, installed in a venv (scripts/wheel_check.py runs it). The venv of --python must have
torch, hydra-core and transformers (scripts/setup.sh installs them).
"""

import argparse
import concurrent.futures
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipapp
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent.parent / "fixtures" / "conformance"
TIMEOUT = 300


class Case:
    """One program as a user runs it: `argv` after `python` (`{corpus}` is fixtures/conformance,
    `{cwd}` the working directory), what it reads on stdin, memprof's options, and what the
    working directory holds before it starts."""

    def __init__(self, name, argv, stdin="", memprof=(), setup=None, needs=(), ignored=()):
        self.name, self.argv, self.stdin = name, argv, stdin
        self.memprof, self.setup, self.needs = list(memprof), setup, needs
        # Signals the program starts with ignored, as a shell's background job does.
        self.ignored = ignored

    def args(self, cwd):
        return [a.format(corpus=CORPUS, cwd=cwd) for a in self.argv]


def copy_package(name):
    return lambda cwd: shutil.copytree(CORPUS / name, cwd / name,
                                       ignore=shutil.ignore_patterns("__pycache__"))


def make_zipapp(cwd):
    copy_package("app")(cwd)
    zipapp.create_archive(cwd / "app", cwd / "app.pyz")
    shutil.rmtree(cwd / "app")


def spaced_copy(cwd):
    folder = cwd / "my project"
    folder.mkdir()
    shutil.copy(CORPUS / "main_module.py", folder / "the main module.py")


CASES = [
    Case("main_module", ["{corpus}/main_module.py", "a b", "--lr", "3e-4", "-f", "x"]),
    Case("main_module_targeted", ["{corpus}/main_module.py", "--device", "1"],
         memprof=["-f", "shown"]),
    Case("path_with_spaces", ["{cwd}/my project/the main module.py", "x y"],
         setup=spaced_copy),
    Case("warnings", ["{corpus}/warnings_shown.py"]),
    Case("classes_and_device_contexts", ["{corpus}/classes.py"]),
    Case("pickling_and_torch_save", ["{corpus}/pickling.py"]),
    Case("pools_fork", ["{corpus}/pools.py", "fork"]),
    Case("pools_spawn", ["{corpus}/pools.py", "spawn"], memprof=["-f", "work"]),
    Case("pools_forkserver", ["{corpus}/pools.py", "forkserver"]),
    Case("signals_to_forked_children", ["{corpus}/fork_signals.py"]),
    Case("ctrl_c_while_blocked", ["{corpus}/ctrl_c_blocked.py"]),
    Case("started_with_signals_ignored", ["{corpus}/ignored_signals.py"],
         ignored=(signal.SIGINT, signal.SIGTERM)),
    Case("ctrl_c_to_a_fork_pool", ["{corpus}/pool_ctrl_c.py"]),
    Case("torch_multiprocessing_spawn", ["{corpus}/torch_spawn.py"]),
    Case("dataloader_workers_fork", ["{corpus}/loader_workers.py", "fork"]),
    Case("dataloader_workers_spawn", ["{corpus}/loader_workers.py", "spawn"]),
    Case("threads_asyncio_atexit", ["{corpus}/concurrency.py"]),
    Case("own_signal_handlers", ["{corpus}/own_signals.py"]),
    Case("death_by_sigterm", ["{corpus}/sigterm_death.py"]),
    # From a script's background job (`nohup memprof run ... &`): SIGINT inherited ignored.
    Case("own_signal_handlers_in_a_background_job", ["{corpus}/own_signals.py"],
         ignored=(signal.SIGINT,)),
    Case("death_by_sigterm_in_a_background_job", ["{corpus}/sigterm_death.py"],
         ignored=(signal.SIGINT,)),
    Case("sys_exit_code", ["{corpus}/endings.py", "code"]),
    Case("sys_exit_message", ["{corpus}/endings.py", "message"]),
    Case("uncaught_exception", ["{corpus}/endings.py", "raise"]),
    Case("chained_exception", ["{corpus}/endings.py", "chained"]),
    Case("keyboard_interrupt", ["{corpus}/endings.py", "interrupt"]),
    Case("stdin", ["{corpus}/reads_stdin.py"], stdin="one\ntwo\nthree\n"),
    Case("dash_m_package", ["-m", "confpkg", "--flag", "v"], setup=copy_package("confpkg")),
    Case("dash_m_module", ["-m", "confpkg.tool"], setup=copy_package("confpkg")),
    Case("directory_app", ["app", "x"], setup=copy_package("app")),
    Case("zipapp", ["app.pyz", "x"], setup=make_zipapp),
    Case("hydra", ["{corpus}/hydra_app.py", "lr=0.25", "steps=3", "hydra.job.chdir=true",
                   "hydra.run.dir=outputs/run", "hydra/job_logging=disabled",
                   "hydra/hydra_logging=disabled"], needs=("hydra",)),
    Case("huggingface_trainer", ["{corpus}/hf_trainer.py"], needs=("transformers", "accelerate")),
]


def files_in(folder):
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(folder))] = path.read_bytes()
    return out


def program_stderr(text):
    """memprof's own lines taken out: its notes and warnings (`memprof: ...`)."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith("memprof: "))


def run_once(command, case, cwd, env):
    if cwd.exists():
        shutil.rmtree(cwd)
    cwd.mkdir(parents=True)
    if case.setup:
        case.setup(cwd)
    # A session of its own, as a terminal gives a job: the program may signal its process group.
    # Each case starts with the signals it names ignored and the others at their default, as a
    # terminal's job, however the suite itself was started (a background job ignores SIGINT).
    def signals():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN if s in case.ignored else signal.SIG_DFL)

    r = subprocess.run(command, cwd=cwd, env=env, input=case.stdin, capture_output=True,
                       text=True, timeout=TIMEOUT, start_new_session=True, preexec_fn=signals)
    return r.returncode, r.stdout, r.stderr, files_in(cwd)


def differences(what, a, b):
    if a == b:
        return []
    if isinstance(a, str) and isinstance(b, str):
        diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "python", "memprof",
                                    lineterm="", n=2)
        return ["  %s differs:" % what] + ["    " + line for line in diff]
    return ["  %s differs: python %r, memprof %r" % (what, a, b)]


def check(case, python, memprof, work, env):
    cwd = work / case.name
    report = work / (case.name + ".report.json")
    args = case.args(cwd)
    py = run_once([python] + args, case, cwd, env)
    mp = run_once([memprof, "run", "-o", str(report)] + case.memprof + args, case, cwd, env)
    problems = differences("exit code", py[0], mp[0])
    problems += differences("stdout", py[1], mp[1])
    problems += differences("stderr", py[2], program_stderr(mp[2]))
    if sorted(py[3]) != sorted(mp[3]):
        problems += differences("files written", sorted(py[3]), sorted(mp[3]))
    else:
        for name in py[3]:
            if py[3][name] != mp[3][name]:
                problems.append("  file %s differs" % name)
    try:
        json.loads(report.read_text())
    except (OSError, ValueError) as e:
        problems.append("  memprof's report was not written (%s); its stderr:\n%s" % (e, mp[2]))
    return case.name, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--memprof", required=True)
    parser.add_argument("--only", action="append", help="run only this case (repeatable)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--require-all", action="store_true",
                        help="fail, not skip, a case whose packages the venv lacks")
    a = parser.parse_args()
    a.python, a.memprof = os.path.abspath(a.python), os.path.abspath(a.memprof)
    if a.list:
        print("\n".join(c.name for c in CASES))
        return 0
    cases = [c for c in CASES if not a.only or c.name in a.only]
    unknown = set(a.only or ()) - {c.name for c in CASES}
    if unknown:
        sys.exit("conformance: no case named %s" % ", ".join(sorted(unknown)))
    venv_bin = str(Path(a.python).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["VIRTUAL_ENV"] = str(Path(venv_bin).parent)
    env["PYTHONHASHSEED"] = "0"
    failed = []
    missing = [c for c in cases if c.needs and subprocess.run(
        [a.python, "-c", "import " + ", ".join(c.needs)], env=env, capture_output=True).returncode]
    for c in missing:
        print("%s %s: this venv lacks %s" % ("FAIL" if a.require_all else "skip", c.name,
                                             " or ".join(c.needs)))
        if a.require_all:
            failed.append(c.name)
    cases = [c for c in cases if c not in missing]
    with tempfile.TemporaryDirectory(prefix="memprof-conformance-") as tmp:
        work = Path(tmp)
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            jobs = [pool.submit(check, c, a.python, a.memprof, work, env) for c in cases]
            for job in jobs:
                name, problems = job.result()
                print("%s %s" % ("FAIL" if problems else "ok  ", name), flush=True)
                for line in problems:
                    print(line)
                if problems:
                    failed.append(name)
    identical = len(cases) - len([n for n in failed if n not in {c.name for c in missing}])
    print("conformance: %d of %d cases identical under python and memprof (%s)%s"
          % (identical, len(cases) + len(missing), a.memprof,
             "; %d could not run" % len(missing) if missing else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
