"""Runs a script under a frame-evaluation hook (PEP 523) that does nothing but call CPython's own
evaluator (benches/eval_frame_hook.c, built here with cc on first use): the cost CPython 3.11
itself charges while any such hook is installed, with nothing of memprof's in the process.
    python benches/eval_frame_hook.py SCRIPT [ARGS...]   (benches/untargeted.sh runs it)"""
import ctypes
import os
import runpy
import subprocess
import sys
import sysconfig
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
lib = os.path.join(tempfile.gettempdir(), f"memprof_eval_frame_hook_{sys.version_info[0]}{sys.version_info[1]}.so")
if not os.path.exists(lib):
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"],
                    os.path.join(here, "eval_frame_hook.c"), "-o", lib], check=True)
hook = ctypes.PyDLL(lib)
hook.memprof_bench_install()
api = ctypes.pythonapi
api.PyInterpreterState_Get.restype = ctypes.c_void_p
api._PyInterpreterState_GetEvalFrameFunc.argtypes = [ctypes.c_void_p]
api._PyInterpreterState_GetEvalFrameFunc.restype = ctypes.c_void_p
default = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value
assert api._PyInterpreterState_GetEvalFrameFunc(api.PyInterpreterState_Get()) != default
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
