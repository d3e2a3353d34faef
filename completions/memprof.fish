# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_memprof_global_optspecs
    string join \n device= stat= h/help V/version
end

function __fish_memprof_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_memprof_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_memprof_using_subcommand
    set -l cmd (__fish_memprof_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c memprof -n "__fish_memprof_needs_command" -l device -d 'Device to measure: a CUDA index (`0`, `cuda:1`) or `cpu` [default: the current CUDA device, or `cpu` when there is no GPU]' -r
complete -c memprof -n "__fish_memprof_needs_command" -l stat -d 'A stat to show, as `torch.cuda.memory_stats()` names it (repeatable; `memprof stats` lists them) [default: allocated_bytes.all.peak, allocated_bytes.all.current, and reserved_bytes.all.peak on CUDA or host_rss_bytes.current on the CPU]' -r
complete -c memprof -n "__fish_memprof_needs_command" -s h -l help -d 'Print help'
complete -c memprof -n "__fish_memprof_needs_command" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "run" -d 'Run a Python script (or `-m module`) as `python` would, profiling the targeted functions'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "show" -d 'Render a saved YAML or JSON report as a table (or convert it); several reports (the ranks of one job) are merged as by `memprof merge`'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "merge" -d 'Merge the reports of the ranks of one job: per line and per module, the max and min over ranks of each stat, the rank that holds the max, and the imbalance (max - min)'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "diff" -d 'Compare two runs\' reports: per function line (matched by source text) and module, the change of Δ and of each stat; `--max-increase` fails CI (exit 4)'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "plot" -d 'Draw saved reports as pictures (SVG, PNG or HTML, by the file name): memory over module calls, saved and parameter bytes per module, each targeted line\'s peak and Δ; several reports (a job\'s ranks) give one series per rank'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "fit" -d 'Will it fit? Replay an allocation trace on memprof\'s model of PyTorch\'s CUDA caching allocator, on a device of --memory with --alloc-conf settings: the predicted reserved and allocated peaks, cudaMalloc retries, segments, and where it runs out of memory (exit 5)'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "snapshot" -d 'The report so far of a program that `memprof run` is running (its PID, as ps or nvidia-smi shows it): the peak so far and its sites, what grows, the timeline; the program runs on unchanged'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "live" -d 'The live view of a program that `memprof run` is running (its PID), in this terminal, about once a second: memory now and at its peak, memory over time, the top sites, what grows; `q` closes it, the program runs on'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "attach" -d 'Measure a running Python 3.14+ program that was started without memprof (its PID), from now on, through sys.remote_exec (PEP 768): until Ctrl-C, --duration, `q` in --live or the program\'s end, then its report; the program runs on, and snapshot and live read it meanwhile'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "stats" -d 'List every stat key with what it means'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c memprof -n "__fish_memprof_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c memprof -n "__fish_memprof_using_subcommand run" -l device -d 'Device to measure: a CUDA index (`0`, `cuda:1`) or `cpu` [default: the current CUDA device, or `cpu` when there is no GPU]' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l stat -d 'A stat to show, as `torch.cuda.memory_stats()` names it (repeatable; `memprof stats` lists them) [default: allocated_bytes.all.peak, allocated_bytes.all.current, and reserved_bytes.all.peak on CUDA or host_rss_bytes.current on the CPU]' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -s f -l function -d 'Function to profile (repeatable): `name`, `Class.method`, `outer.<locals>.inner`, `package.module:Qual.name` or `path/to/file.py:Qual.name`; `@profile` in the script marks functions too' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l format -d 'Report format (default: from -o\'s extension, `.json`, `.yaml`/`.yml`, `.html` (an interactive page: the timeline, the peak by stack, the tables); else table)' -r -f -a "table\t''
yaml\t''
json\t''
html\t'One self-contained interactive page (a run\'s report, or ranks merged)'"
complete -c memprof -n "__fish_memprof_using_subcommand run" -s o -l output -d 'Write the report to this file (atomically) instead of standard output; may hold {rank}, {local_rank}, {world_size}, {host}, {pid}; under several ranks a plain path gets the rank (ddp.json -> ddp.rank1.json)' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand run" -l history -d 'Write the allocation history of the measured targeted calls to FILE (a pickle that pytorch.org/memory_viz and `python -m torch.cuda._memory_viz` open): torch\'s own on CUDA, memprof\'s record of the allocator\'s reports on the CPU; may hold the same placeholders as -o' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand run" -l history-max-entries -d 'With --history: keep at most this many events (the latest)' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l trace -d 'Write the measured device\'s allocations and frees, in order, with their lines, to FILE (JSON): what `memprof fit FILE --memory SIZE` replays on another device or with other allocator settings; may hold the same placeholders as -o' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand run" -l plot -d 'Also draw the report as a picture: FILE.svg, FILE.png or FILE.html (as `memprof plot`); may hold the same placeholders as -o' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand run" -l peak-sites -d 'How many sites the peak lists, largest first (the rest are summed in one row)' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l depth -d 'Show modules down to this depth of qualified name (`layer1` is 1, `layer1.0.conv1` 3); with --suggest-checkpoints, split between the modules at this depth' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l suggest-checkpoints -d 'Suggest N activation-checkpoint split points from the measured saved activations, with the estimated activation memory before and after (implies --modules)' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l warmup -d 'Skip the first N calls of each targeted function (and, with --modules and no -f, of each root module): their lines are not measured' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l calls -d 'Measure M calls after the warm-up, then stop every hook so the rest of the run pays nothing' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l simulate-gpu -d 'Run the program without a GPU as if it ran on this one (H100, H200, A100-80GB, A100-40GB, L4, RTX4090): CUDA tensors simulated, no kernels run, and the allocations the CUDA caching allocator would have seen replayed on memprof\'s model of it: the predicted peaks, whether it fits, the peak by line and category (--trace FILE keeps the trace for `memprof fit`)' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l simulate-ranks -d 'With --simulate-gpu: the program runs as rank 0 of N ranks, one GPU each (the environment torchrun gives it; its process group\'s collectives simulated): FSDP2, DDP and DTensor programs, one rank\'s peak' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l gather-timeout -d 'With --gather: how long rank 0 waits, after its own program ended, for the other ranks\' reports (those missing then are named)' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -l max -d 'A budget (repeatable): `KEY=SIZE` or `FUNCTION:KEY=SIZE`, KEY a stat, `delta` (a line\'s Δ summed over its hits) or `delta_per_call` (that Δ per hit), SIZE in bytes or with a unit (`20GiB`, `512MB`); a line above it is marked and memprof exits 3' -r
complete -c memprof -n "__fish_memprof_using_subcommand run" -s m -d 'Run SCRIPT as a module name, like `python -m SCRIPT` (`memprof run -m pkg.mod args...`)'
complete -c memprof -n "__fish_memprof_using_subcommand run" -l modules -d 'Also profile every torch.nn.Module call, forward and backward: allocated Δ, peak, bytes saved for backward, parameters, as a tree of qualified names (works without -f)'
complete -c memprof -n "__fish_memprof_using_subcommand run" -l tensors -d 'At the end of each targeted call and where an exception leaves one, list the live tensors on the device by storage, named from the model and optimizer, with totals by category'
complete -c memprof -n "__fish_memprof_using_subcommand run" -l collectives -d 'Also count the bytes of torch.distributed collectives (all_reduce, all_gather, reduce_scatter, ...) issued during each line and module call, by kind'
complete -c memprof -n "__fish_memprof_using_subcommand run" -l all-ranks -d 'In a multi-rank run (RANK and WORLD_SIZE set, as by torchrun), print every rank\'s report, not only rank 0\'s'
complete -c memprof -n "__fish_memprof_using_subcommand run" -l live -d 'Show the run live in the terminal, about once a second, the program\'s output above it: memory now and at its peak, memory over time, the top sites now, what grows, the step; `q` closes the view and the program runs on to its report'
complete -c memprof -n "__fish_memprof_using_subcommand run" -l gather -d 'Under torchrun, each rank also hands its report to rank 0 through torchrun\'s own store, and rank 0 writes every rank\'s report on its node (by -o\'s name), no shared filesystem needed'
complete -c memprof -n "__fish_memprof_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memprof -n "__fish_memprof_using_subcommand run" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand show" -l format -d 'Output format (default: from -o\'s extension, `.json`, `.yaml`/`.yml`, `.html`; else table)' -r -f -a "table\t''
yaml\t''
json\t''
html\t'One self-contained interactive page (a run\'s report, or ranks merged)'"
complete -c memprof -n "__fish_memprof_using_subcommand show" -s o -l output -d 'Write to this file (atomically) instead of standard output: `-o report.html` draws one run\'s report as an interactive page' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand show" -l stat -d 'With several reports: a stat column to keep (repeatable) [default: every stat they have]' -r
complete -c memprof -n "__fish_memprof_using_subcommand show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memprof -n "__fish_memprof_using_subcommand show" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand merge" -l format -d 'Output format (default: from -o\'s extension, `.json`, `.yaml`/`.yml`, `.html` (the ranks\' page); else table)' -r -f -a "table\t''
yaml\t''
json\t''
html\t'One self-contained interactive page (a run\'s report, or ranks merged)'"
complete -c memprof -n "__fish_memprof_using_subcommand merge" -s o -l output -d 'Write the merged report to this file (atomically) instead of standard output' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand merge" -l stat -d 'A stat column to keep (repeatable) [default: every stat the reports have]' -r
complete -c memprof -n "__fish_memprof_using_subcommand merge" -l ranks -d 'Print these ranks\' detail (where each ran, its file, its peak and what it was): a list such as `3,17` or `0-7,513` [default: every rank\'s up to 8 ranks, else none]' -r
complete -c memprof -n "__fish_memprof_using_subcommand merge" -l all-ranks -d 'Print every rank\'s detail'
complete -c memprof -n "__fish_memprof_using_subcommand merge" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memprof -n "__fish_memprof_using_subcommand merge" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand diff" -l format -d 'Output format (default: from -o\'s extension, `.json`, `.yaml`/`.yml`; else table)' -r -f -a "table\t''
yaml\t''
json\t''
html\t'One self-contained interactive page (a run\'s report, or ranks merged)'"
complete -c memprof -n "__fish_memprof_using_subcommand diff" -s o -l output -d 'Write the diff to this file (atomically) instead of standard output' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand diff" -l max-increase -d 'Fail (exit 4) when a function\'s KEY (`delta` or a stat) grew by more than SIZE (`64MiB`) or PERCENT (`5%`) of its base value: for `delta` and other amounts its net per call, for a level or a peak the highest over its lines (repeatable)' -r
complete -c memprof -n "__fish_memprof_using_subcommand diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memprof -n "__fish_memprof_using_subcommand diff" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand plot" -s o -l output -d 'The picture to write: FILE.svg, FILE.png or FILE.html' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand plot" -s h -l help -d 'Print help'
complete -c memprof -n "__fish_memprof_using_subcommand plot" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand fit" -l batches -d 'The traces\' batch sizes, in their order (`8,16`)' -r
complete -c memprof -n "__fish_memprof_using_subcommand fit" -l scale -d 'Predict at this batch size: each allocation\'s size fitted as an affine function of the batch across the traces, the trace synthesized at N and replayed' -r
complete -c memprof -n "__fish_memprof_using_subcommand fit" -l memory -d 'The bytes the allocator may reserve on the device to predict for (`24GiB`, `80GB`) [default: the traced device\'s]' -r
complete -c memprof -n "__fish_memprof_using_subcommand fit" -l alloc-conf -d 'The allocator\'s settings, as PYTORCH_CUDA_ALLOC_CONF writes them (`max_split_size_mb:128,garbage_collection_threshold:0.6`) [default: the traced run\'s]' -r
complete -c memprof -n "__fish_memprof_using_subcommand fit" -l format -d 'Output format (default: from -o\'s extension, `.json`, `.yaml`/`.yml`; else table)' -r -f -a "table\t''
yaml\t''
json\t''
html\t'One self-contained interactive page (a run\'s report, or ranks merged)'"
complete -c memprof -n "__fish_memprof_using_subcommand fit" -s o -l output -d 'Write the prediction to this file (atomically) instead of standard output' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand fit" -l max-batch -d 'Find the largest batch size that fits in --memory (from the traces, as --scale does)'
complete -c memprof -n "__fish_memprof_using_subcommand fit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memprof -n "__fish_memprof_using_subcommand fit" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand snapshot" -l format -d 'Report format (default: from -o\'s extension, `.json`, `.yaml`/`.yml`, `.html`; else table)' -r -f -a "table\t''
yaml\t''
json\t''
html\t'One self-contained interactive page (a run\'s report, or ranks merged)'"
complete -c memprof -n "__fish_memprof_using_subcommand snapshot" -s o -l output -d 'Write the report to this file (atomically) instead of standard output' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand snapshot" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memprof -n "__fish_memprof_using_subcommand snapshot" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand live" -s h -l help -d 'Print help'
complete -c memprof -n "__fish_memprof_using_subcommand live" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand attach" -l device -d 'Device to measure: a CUDA index (`0`, `cuda:1`) or `cpu` [default: the current CUDA device, or `cpu` when there is no GPU]' -r
complete -c memprof -n "__fish_memprof_using_subcommand attach" -l stat -d 'A stat to show, as `torch.cuda.memory_stats()` names it (repeatable; `memprof stats` lists them) [default: allocated_bytes.all.peak, allocated_bytes.all.current, and reserved_bytes.all.peak on CUDA or host_rss_bytes.current on the CPU]' -r
complete -c memprof -n "__fish_memprof_using_subcommand attach" -s f -l function -d 'Function to profile line by line from now on (repeatable), as `memprof run -f` names it' -r
complete -c memprof -n "__fish_memprof_using_subcommand attach" -l duration -d 'Detach after this many seconds [default: at Ctrl-C, or when the program ends]' -r
complete -c memprof -n "__fish_memprof_using_subcommand attach" -l format -d 'Report format (default: from -o\'s extension, `.json`, `.yaml`/`.yml`, `.html`; else table)' -r -f -a "table\t''
yaml\t''
json\t''
html\t'One self-contained interactive page (a run\'s report, or ranks merged)'"
complete -c memprof -n "__fish_memprof_using_subcommand attach" -s o -l output -d 'Write the report to this file (atomically) instead of standard output' -r -F
complete -c memprof -n "__fish_memprof_using_subcommand attach" -l modules -d 'Also profile every torch.nn.Module call from now on (`memprof run --modules`)'
complete -c memprof -n "__fish_memprof_using_subcommand attach" -l tensors -d 'At the end of each targeted call, list the live tensors (`memprof run --tensors`)'
complete -c memprof -n "__fish_memprof_using_subcommand attach" -l live -d 'Show the live view while attached; `q` detaches'
complete -c memprof -n "__fish_memprof_using_subcommand attach" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c memprof -n "__fish_memprof_using_subcommand attach" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand stats" -s h -l help -d 'Print help'
complete -c memprof -n "__fish_memprof_using_subcommand stats" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand completions" -s h -l help -d 'Print help'
complete -c memprof -n "__fish_memprof_using_subcommand completions" -s V -l version -d 'Print version'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "run" -d 'Run a Python script (or `-m module`) as `python` would, profiling the targeted functions'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "show" -d 'Render a saved YAML or JSON report as a table (or convert it); several reports (the ranks of one job) are merged as by `memprof merge`'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "merge" -d 'Merge the reports of the ranks of one job: per line and per module, the max and min over ranks of each stat, the rank that holds the max, and the imbalance (max - min)'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "diff" -d 'Compare two runs\' reports: per function line (matched by source text) and module, the change of Δ and of each stat; `--max-increase` fails CI (exit 4)'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "plot" -d 'Draw saved reports as pictures (SVG, PNG or HTML, by the file name): memory over module calls, saved and parameter bytes per module, each targeted line\'s peak and Δ; several reports (a job\'s ranks) give one series per rank'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "fit" -d 'Will it fit? Replay an allocation trace on memprof\'s model of PyTorch\'s CUDA caching allocator, on a device of --memory with --alloc-conf settings: the predicted reserved and allocated peaks, cudaMalloc retries, segments, and where it runs out of memory (exit 5)'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "snapshot" -d 'The report so far of a program that `memprof run` is running (its PID, as ps or nvidia-smi shows it): the peak so far and its sites, what grows, the timeline; the program runs on unchanged'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "live" -d 'The live view of a program that `memprof run` is running (its PID), in this terminal, about once a second: memory now and at its peak, memory over time, the top sites, what grows; `q` closes it, the program runs on'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "attach" -d 'Measure a running Python 3.14+ program that was started without memprof (its PID), from now on, through sys.remote_exec (PEP 768): until Ctrl-C, --duration, `q` in --live or the program\'s end, then its report; the program runs on, and snapshot and live read it meanwhile'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "stats" -d 'List every stat key with what it means'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "completions" -d 'Print a shell completion script'
complete -c memprof -n "__fish_memprof_using_subcommand help; and not __fish_seen_subcommand_from run show merge diff plot fit snapshot live attach stats completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
