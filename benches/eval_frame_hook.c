/* A frame-evaluation hook (PEP 523) that only calls CPython's own evaluator: loaded by
   benches/eval_frame_hook.py, which builds it. CPython 3.11 makes every Python-to-Python call a
   C call while any such hook is installed; this measures that alone. (Installing
   _PyEval_EvalFrameDefault itself would not: CPython stores it as "no hook".) */
#include <Python.h>

static PyObject *pass_through(PyThreadState *tstate, struct _PyInterpreterFrame *frame,
                              int throwflag) {
    return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

void memprof_bench_install(void) {
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), pass_through);
}
