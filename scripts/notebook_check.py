#!/usr/bin/env python3
"""Runs a notebook with both memprof magics in a real Jupyter kernel (this Python's ipykernel)
and checks the outputs: exact bytes of the cell's own lines. Prints NOTEBOOK OK, or what failed.

    VENV/bin/python scripts/notebook_check.py   # the venv with memprof, ipykernel and nbclient
"""
import json
import sys

import nbclient
import nbformat

CELLS = [
    # The kernel works in a folder of its own (the history cell writes a file there).
    "%load_ext memprof\nimport os, tempfile, torch\nos.chdir(tempfile.mkdtemp())",
    "def step(n):\n    a = torch.ones(n, n)\n    b = a @ a\n    return b.sum()",
    "%memprof -f step --device cpu step(256)",
    "%%memprof --device cpu\nx = torch.ones(512, 512)\ny = x * 2\ndel x\ntotal = step(128)",
    "import json\nr = _\nprint(json.dumps([[l['line'], l.get('delta_bytes')] "
    "for l in r.function('<module>')['lines']]))",
    # y (1 MiB) is live from the cell before: the cell's peak and the report's are one.
    "%%memprof --device cpu\nz = y + 1",
    "r = _\nprint(json.dumps([r.function('<module>')['peak_allocated_bytes'], "
    "r.peak['allocated_bytes'], r.peak['unseen_bytes'], r.peak_above_start]))",
    # pytorch_memlab's profile_every: a table per 2 calls of step, the fifth call's at the end.
    "%memprof --every 2 --device cpu -f step [step(64) for _ in range(5)]",
    "print(step.__module__, getattr(step, 'memprof_report', 'restored'))",
    # --history: the allocation history memory_viz opens, the cell's lines its frames.
    "%%memprof --device cpu --history cell.pickle\nw = torch.ones(256, 256)\nv = w * 3",
    "import pickle\nh = pickle.load(open('cell.pickle', 'rb'))\n"
    "print(json.dumps(sorted((e['size'], e['frames'][0]['line']) for e in h['device_traces'][0] "
    "if e['action'] == 'alloc' and e['size'] >= 4096)))",
]


def main():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    line_magic = nb.cells[2].outputs[0]["data"]
    cell_magic = nb.cells[3].outputs[0]["data"]["text/plain"]
    lines = json.loads(nb.cells[4].outputs[0]["text"])
    cell_peak, peak, before, added = json.loads(nb.cells[6].outputs[0]["text"])
    every = "".join(o.get("text", "") for o in nb.cells[7].outputs)
    restored = nb.cells[8].outputs[0]["text"].strip()
    history = json.loads(nb.cells[10].outputs[0]["text"])
    problems = []
    if history != [[262144, 1], [262144, 2]]:
        problems.append("%%%%memprof --history's allocations: %s" % history)
    headers = [l for l in every.splitlines() if l.startswith("memprof: step")]
    if headers != ["memprof: step, calls 1–2", "memprof: step, calls 3–4",
                   "memprof: step, call 5 (the statement ended)"]:
        problems.append("--every 2's tables: %s" % headers)
    if restored != "__main__ restored":
        problems.append("step after --every: " + restored)
    if "+256.00 KiB" not in line_magic["text/plain"]:
        problems.append("%memprof's table: " + line_magic["text/plain"])
    if not line_magic.get("text/html", "").startswith('<pre class="memprof-report">'):
        problems.append("%memprof's HTML")
    if "<module>: y = x * 2" not in cell_magic:
        problems.append("%%memprof's peak: " + cell_magic)
    if lines != [[1, 1048576], [2, 1048576], [3, -1048576], [4, 4]]:
        problems.append("%%%%memprof's lines: %s" % lines)
    if not (cell_peak == peak == before + added and 1048576 <= added < 1048576 + 1024 and before >= 1048576):
        problems.append("%%%%memprof's peaks after a cell that kept y: the cell's %d, the report's "
                        "%d, from before %d, added %d" % (cell_peak, peak, before, added))
    print("NOTEBOOK OK" if not problems else "NOTEBOOK FAILED:\n" + "\n".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
