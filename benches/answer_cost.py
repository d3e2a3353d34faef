"""What answering a running program costs it (issue 50): the live view's numbers (`memprof live
PID`, and what `memprof run --live` draws once a second) and the report so far (`memprof
snapshot PID`), asked from another process while the resnet50 or GPT-2 step runs, measured
inside one process as benches/paired_cost.py measures the modes: blocks of steps alternate in
an order shuffled per round, unprofiled (`base`, and `control`: the noise floor), under
`memprof.profile()` (`none`), and under it while a client process asks the session's socket
(src/commands/answer.rs, the same thread and code as `memprof run`'s) for `live` or `report json`
--rate times a second (`live`, `snapshot`). The live view asks once a second; asking ten times
as often makes its cost ten times as large, and so measurable where a step's noise would hide
the real rate's. Each block's *mean* step counts (a request lands on one step in many: a median
would not see it), its first step left out. The client also times each answer (the socket's round
trip: an upper bound on how long the tracker's lock was held for it).

    python3 benches/answer_cost.py resnet|gpt2 [--device cuda] [--rounds 12] [--steps 25]
        [--rate 10]

Prints a table: per variant the ratio of its blocks' mean step to the unprofiled blocks' in the
same round, median [min, max] over rounds, and the answers' count and round trip."""
import argparse
import json
import os
import random
import select
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def socket_folder():
    """Where memprof's sockets live (crates/report/src/output/socket.rs: `folder`)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        folder = os.path.join(runtime, "memprof")
    else:
        folder = os.path.join("/tmp", f"memprof-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def ask(path, request):
    """One request on the socket; its answer's size in bytes and round trip in seconds."""
    t = time.perf_counter()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall(request.encode() + b"\n")
        size = 0
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            size += len(chunk)
    return size, time.perf_counter() - t


def client():
    """The asking process: `go PATH REQUEST RATE` starts asking, `stop` stops and prints the
    round trips (JSON, one line), `quit` ends."""
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            return
        if words[0] != "go":
            continue
        path, request, rate = words[1], " ".join(words[2:-1]), float(words[-1])
        trips, sizes, errors = [], [], 0
        next_at = time.perf_counter()
        while True:
            wait = max(0.0, next_at - time.perf_counter())
            ready, _, _ = select.select([sys.stdin], [], [], wait)
            if ready:
                sys.stdin.readline()  # stop
                break
            next_at += 1.0 / rate
            try:
                size, trip = ask(path, request)
                trips.append(trip)
                sizes.append(size)
            except OSError:
                errors += 1
        print(json.dumps({"trips": trips, "sizes": sizes, "errors": errors}), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["resnet", "gpt2"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="small models (a CPU check)")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--steps", type=int, default=25, help="steps per block, the first not counted")
    p.add_argument("--rate", type=float, default=10.0, help="requests a second")
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()

    import memprof
    import workloads
    from paired_cost import block

    cuda = args.device.startswith("cuda")
    if args.case == "gpt2":
        setup = workloads.gpt2_setup(args.device, 12, args.tiny)
        step_fn = workloads.gpt2_train_step
    else:
        setup = workloads.resnet_setup(args.device, 8 if args.tiny else 32)
        step_fn = workloads.train_step

    def step():
        step_fn(*setup)

    for _ in range(args.warmup):
        step()
    asker = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--client"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    path = os.path.join(socket_folder(), f"{os.getpid()}.sock")
    requests = {"live": "live", "snapshot": "report json"}
    variants = ["base", "control", "none", "live", "snapshot"]
    ratios = {v: [] for v in variants}
    answers = {v: {"trips": [], "sizes": [], "errors": 0} for v in requests}
    steps_ms = []
    rng = random.Random(0)
    for _ in range(args.rounds):
        order = variants[:]
        rng.shuffle(order)
        means = {}
        for v in order:
            if v in ("base", "control"):
                means[v] = statistics.fmean(block(step, args.steps, cuda)[0])
                continue
            session = memprof.profile()
            session.__enter__()
            if v in requests:
                # The session's native half answers on the socket, as `memprof run`'s does.
                session._session.serve(path)
                # A first answer waits for the session's first numbers: let it have some.
                step()
                asker.stdin.write(f"go {path} {requests[v]} {args.rate}\n")
                asker.stdin.flush()
            means[v] = statistics.fmean(block(step, args.steps, cuda)[0])
            if v in requests:
                asker.stdin.write("stop\n")
                asker.stdin.flush()
                got = json.loads(asker.stdout.readline())
                for k in ("trips", "sizes"):
                    answers[v][k] += got[k]
                answers[v]["errors"] += got["errors"]
            session.__exit__(None, None, None)
        steps_ms.append(means["base"] * 1e3)
        for v in variants:
            ratios[v].append(means[v] / means["base"])
    asker.stdin.write("quit\n")
    asker.stdin.close()
    asker.wait()
    print(f"{args.case} on {args.device}: {args.rounds} rounds of {args.steps} steps per variant "
          f"(block means), unprofiled step {statistics.median(steps_ms):.2f} ms "
          f"({min(steps_ms):.2f}, {max(steps_ms):.2f}); requests at {args.rate:g} a second")
    print("| variant | ratio to unprofiled: median [min, max] | answers | round trip ms: median, max |")
    print("| --- | --- | --- | --- |")
    for v in variants[1:]:
        r = ratios[v]
        line = f"| {v} | {statistics.median(r):.3f}x [{min(r):.3f}, {max(r):.3f}] |"
        if v in requests:
            a = answers[v]
            trips = a["trips"] or [0.0]
            line += (f" {len(a['trips'])} ({statistics.median(a['sizes'] or [0]) / 1024:.0f} KiB "
                     f"each; {a['errors']} refused) | {statistics.median(trips) * 1e3:.2f}, "
                     f"{max(trips) * 1e3:.2f} |")
        else:
            line += " | |"
        print(line)


if __name__ == "__main__":
    if sys.argv[1:] == ["--client"]:
        client()
    else:
        main()
