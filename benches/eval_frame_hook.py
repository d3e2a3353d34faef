"""Runs a script under a frame-evaluation hook (PEP 523) that does nothing but call CPython's own
evaluator: the cost that CPython 3.11 itself charges while any such hook is installed (it then
makes every Python-to-Python call a C call), with nothing of memprof's in the process. CPython
3.11 only (3.12 treats this hook as no hook).
    python benches/eval_frame_hook.py SCRIPT [ARGS...]   (benches/untargeted.sh runs it)"""
import ctypes
import runpy
import sys

if sys.version_info[:2] != (3, 11):
    sys.exit("eval_frame_hook.py: CPython 3.11 only")
api = ctypes.pythonapi
api.PyInterpreterState_Get.restype = ctypes.c_void_p
api._PyInterpreterState_SetEvalFrameFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
api._PyInterpreterState_GetEvalFrameFunc.argtypes = [ctypes.c_void_p]
api._PyInterpreterState_GetEvalFrameFunc.restype = ctypes.c_void_p
interp = api.PyInterpreterState_Get()
default = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value
api._PyInterpreterState_SetEvalFrameFunc(interp, default)
assert api._PyInterpreterState_GetEvalFrameFunc(interp) == default
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
