//! `memprof attach PID`: a running Python 3.14+ program, started without memprof, measured from
//! now on. The program's own interpreter binary calls `sys.remote_exec` (PEP 768) on it with a
//! short script, which the program runs at its next bytecode on its main thread: it imports
//! torch-memprof from the program's environment and starts an in-process session there
//! (src/wheel/memprof/_attach.py), which answers `memprof snapshot`/`memprof live` on the
//! program's socket. At Ctrl-C, --duration, `q` in --live or the program's end, a second script
//! stops it and the session's report comes back here. The two sides speak through files in a
//! folder of this user's (next to the sockets): the request, the status, the report.
use super::{files, live};
use crate::cli::{AttachArgs, GlobalOptions};
use crate::error::{Error, Result};
use crate::model::profile::Profile;
use crate::output::{self, socket, terminal};
use crate::render::{self, Format};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the program may take to stop and hand over its report.
const STOP_WITHIN: Duration = Duration::from_secs(60);

pub fn attach(global: &GlobalOptions, args: AttachArgs) -> Result<i32> {
    let pid = args.pid;
    let format = Format::resolve(args.format, args.output.as_deref());
    if args.live {
        live::need_terminal("memprof attach --live")?;
    }
    let python = interpreter_of(pid)?;
    let socket_path = socket::path_of(pid)?;
    if std::os::unix::net::UnixStream::connect(&socket_path).is_ok() {
        return Err(Error::usage(format!(
            "process {pid} is measured by memprof already (`memprof run`, or an attach that goes on)"
        ))
        .hint(format!(
            "read it with `memprof snapshot {pid}` or `memprof live {pid}`"
        )));
    }
    let exchange = Exchange::new(pid)?;
    let request = serde_json::json!({
        "argv": session_argv(global, &args),
        "label": label_of(pid),
        "command": command_line(global, &args),
        "socket": socket_path,
        "status": exchange.status,
        "report": exchange.report,
    });
    std::fs::write(&exchange.request, request.to_string())?;

    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    // A second Ctrl-C while waiting for the report gives up (the folder goes; the program runs
    // on, measured until it ends, with no one to read it).
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    })
    .map_err(|e| Error::usage(format!("cannot handle Ctrl-C: {e}")))?;

    run_script(&python, pid, &exchange.script("start"), &exchange)?;
    match wait_for_status(&exchange, pid, &interrupted, None, true)? {
        Status::Started => {}
        Status::Stopped(_) => {
            return Err(Error::usage(format!(
                "process {pid} ended before memprof could measure anything"
            )))
        }
    }
    let hint = if args.live {
        "`q` detaches"
    } else if args.duration.is_some() {
        "Ctrl-C detaches sooner"
    } else {
        "Ctrl-C detaches"
    };
    output::note(&format!(
        "attached to process {pid}: measuring from now on ({hint}, and the report follows)"
    ));

    let ended = if args.live {
        live::view(pid)? || !alive(pid)
    } else {
        let until = args
            .duration
            .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
        loop {
            if interrupted.load(Ordering::SeqCst) || until.is_some_and(|u| Instant::now() >= u) {
                break false;
            }
            if !alive(pid)
                || exchange
                    .status_text()
                    .is_some_and(|s| s.starts_with("stopped"))
            {
                break true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // Ctrl-C from here on only gives up waiting.
    interrupted.store(false, Ordering::SeqCst);
    if !ended && alive(pid) {
        run_script(&python, pid, &exchange.script("stop"), &exchange)?;
    }
    let deadline = Some(Instant::now() + STOP_WITHIN);
    let how = match wait_for_status(&exchange, pid, &interrupted, deadline, false)? {
        Status::Stopped(how) => how,
        Status::Started => unreachable!("wait_for_status waits past `started`"),
    };
    let text = std::fs::read_to_string(&exchange.report).map_err(|e| {
        Error::usage(format!(
            "process {pid} stopped ({how}) but its report could not be read: {e}"
        ))
    })?;
    let profile: Profile = serde_json::from_str(&text).map_err(|e| {
        Error::usage(format!(
            "process {pid} handed over what memprof cannot read ({e})"
        ))
    })?;
    let width = args.output.is_none().then(terminal::width).flatten();
    let rendered = render::render_printed(&profile, format, width, false);
    files::deliver(&rendered, args.output.as_deref(), "report")?;
    if how != "stopped" {
        output::note(&format!(
            "process {pid} {}",
            how.trim_start_matches("stopped: ")
        ));
    }
    Ok(0)
}

/// The options of the session in the program, as `memprof run` takes them.
fn session_argv(global: &GlobalOptions, args: &AttachArgs) -> Vec<String> {
    let mut argv = measure_flags(global);
    argv.push("run".into());
    argv.extend(target_flags(args));
    argv
}

/// This attach as a command line, for the report (`memprof attach -f step --duration 60 PID`):
/// the one a user typed, but under the wheel's command, whose process is python's.
fn command_line(global: &GlobalOptions, args: &AttachArgs) -> Vec<String> {
    let mut line = vec!["memprof".to_string(), "attach".to_string()];
    line.extend(measure_flags(global));
    line.extend(target_flags(args));
    if let Some(seconds) = args.duration {
        line.extend(["--duration".to_string(), seconds.to_string()]);
    }
    if args.live {
        line.push("--live".into());
    }
    line.push(args.pid.to_string());
    line
}

/// `--device` and `--stat`, as given.
fn measure_flags(global: &GlobalOptions) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(device) = &global.device {
        flags.extend(["--device".to_string(), device.clone()]);
    }
    for stat in &global.stats {
        flags.extend(["--stat".to_string(), stat.clone()]);
    }
    flags
}

/// What to measure: `-f`, `--modules`, `--tensors`, as given.
fn target_flags(args: &AttachArgs) -> Vec<String> {
    let mut flags = Vec::new();
    for f in &args.functions {
        flags.extend(["-f".to_string(), f.clone()]);
    }
    if args.modules {
        flags.push("--modules".into());
    }
    if args.tensors {
        flags.push("--tensors".into());
    }
    flags
}

/// What the report calls the program: its command line, as ps shows it.
fn label_of(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            c.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .skip(1)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .ok()
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| format!("process {pid}"))
}

fn alive(pid: u32) -> bool {
    // A zombie has ended: its status says so.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        })
        .unwrap_or(false)
}

/// The program's interpreter: the binary of a Python 3.14 or later (what can call
/// sys.remote_exec on it); a clear error for anything else.
fn interpreter_of(pid: u32) -> Result<PathBuf> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(Error::usage(format!("there is no process {pid}"))
            .hint("give the PID of a running Python program (ps, nvidia-smi)"));
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| {
        Error::usage(format!("cannot see which program process {pid} runs: {e}"))
            .hint("memprof attach reaches programs of the user it runs as")
    })?;
    let name = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.starts_with("python") {
        let hint = if name.starts_with("memprof") {
            format!(
                "it is memprof's: read it with `memprof snapshot {pid}` or `memprof live {pid}`"
            )
        } else {
            "memprof attach reaches programs that python runs (python3.14 and later); start \
             others with `memprof run`"
                .to_string()
        };
        return Err(
            Error::usage(format!("process {pid} runs {}, not python", exe.display())).hint(hint),
        );
    }
    if !exe.exists() {
        return Err(Error::usage(format!(
            "process {pid} runs {}, which this machine's file system does not have (the \
             program runs in another container or root, or its python was removed)",
            exe.display()
        ))
        .hint("run memprof attach where the program's python is, with the same torch-memprof"));
    }
    Ok(exe)
}

/// Runs `script` in the program: its own python calls sys.remote_exec, and the program runs
/// the script at its next bytecode.
fn run_script(python: &Path, pid: u32, script: &Path, exchange: &Exchange) -> Result<()> {
    // -I: nothing of this environment (PYTHONPATH, the user's site) goes into that python.
    let out = Command::new(python)
        .args(["-I", "-c", REMOTE_EXEC])
        .arg(pid.to_string())
        .arg(script)
        .output()
        .map_err(|e| {
            Error::usage(format!("cannot run {}: {e}", python.display()))
                .hint("memprof attach runs the program's own python to reach it")
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr
        .trim_end()
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    match out.status.code() {
        Some(0) => Ok(()),
        Some(3) => {
            let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
            exchange.remove();
            Err(Error::usage(format!(
                "process {pid} runs Python {version}: memprof attach needs Python 3.14 or later \
                 (sys.remote_exec, PEP 768)"
            ))
            .hint("start the program under memprof instead: memprof run script.py ARGS"))
        }
        _ => {
            exchange.remove();
            let hint = if last.contains("PermissionError") || last.contains("not permitted") {
                "run memprof attach as the program's user; where the kernel restricts tracing \
                 (/proc/sys/kernel/yama/ptrace_scope above 0), run it with sudo or CAP_SYS_PTRACE"
            } else {
                "the program's python could not reach it (sys.remote_exec failed)"
            };
            Err(
                Error::usage(format!("cannot attach to process {pid}: {last}"))
                    .hint(hint.to_string()),
            )
        }
    }
}

/// What the program's python runs to reach it: exit 3 (with its version) where it has no
/// sys.remote_exec.
const REMOTE_EXEC: &str = "import sys
if not hasattr(sys, 'remote_exec'):
    print(sys.version.split()[0])
    sys.exit(3)
sys.remote_exec(int(sys.argv[1]), sys.argv[2])
";

enum Status {
    Started,
    Stopped(String),
}

/// Waits until the status file says `started` (`first`: the start script's answer) or
/// `stopped...`; the program's failure is an error. While waiting for the start, a note after a
/// few seconds says why nothing happens yet; Ctrl-C gives up (the script, if it runs later,
/// finds its folder gone and does nothing).
fn wait_for_status(
    exchange: &Exchange,
    pid: u32,
    interrupted: &AtomicBool,
    deadline: Option<Instant>,
    first: bool,
) -> Result<Status> {
    let began = Instant::now();
    let mut told = false;
    loop {
        let status = exchange.status_text();
        if let Some(text) = &status {
            let text = text.trim().to_string();
            if let Some(why) = text.strip_prefix("error: ") {
                exchange.remove();
                let hint = if why.contains("No module named 'memprof") {
                    "install torch-memprof into the program's environment (`pip install \
                     torch-memprof` with its python), then attach again"
                } else if why.contains("has not imported torch") {
                    "memprof measures programs that use torch: attach once it has imported it"
                } else {
                    "the program runs on, unmeasured"
                };
                return Err(Error::usage(format!("process {pid}: {why}")).hint(hint));
            }
            if text == "started" && first {
                return Ok(Status::Started);
            }
            if text.starts_with("stopped") {
                return Ok(Status::Stopped(text));
            }
        }
        if !alive(pid) && status.is_none_or(|s| s.trim() == "started") {
            exchange.remove();
            return Err(Error::usage(format!(
                "process {pid} ended{}",
                if first {
                    " before it ran memprof's request"
                } else {
                    " without handing over its report"
                }
            )));
        }
        if interrupted.load(Ordering::SeqCst) || deadline.is_some_and(|d| Instant::now() >= d) {
            exchange.remove();
            return Err(Error::usage(format!(
                "gave up waiting for process {pid}; it runs on{}",
                if first { ", unmeasured" } else { "" }
            )));
        }
        if first && !told && began.elapsed() > Duration::from_secs(5) {
            told = true;
            output::note(&format!(
                "waiting for process {pid} to run Python code (it runs memprof's request at its \
                 next bytecode: a program waiting in C, for the GPU or I/O, gets to it later); \
                 Ctrl-C gives up"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `s` as a Python string literal (JSON's escapes are Python's).
fn py_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "''".into())
}

/// The files this attach and the program share: a folder of this user's, next to the sockets.
struct Exchange {
    dir: PathBuf,
    request: PathBuf,
    status: PathBuf,
    report: PathBuf,
}

impl Exchange {
    fn new(pid: u32) -> Result<Exchange> {
        let dir = socket::folder()?.join(format!("attach-{pid}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Exchange {
            request: dir.join("request.json"),
            status: dir.join("status"),
            report: dir.join("report.json"),
            dir,
        })
    }

    /// The script the program runs: `memprof._attach.start` or `.stop` of the request, in a
    /// namespace of its own (sys.remote_exec runs scripts in `__main__`'s, which must not change),
    /// and only while this folder is there (an attach that gave up leaves nothing to run).
    fn script(&self, what: &str) -> PathBuf {
        let request = py_str(&self.request.to_string_lossy());
        let status = py_str(&self.status.to_string_lossy());
        let source = format!(
            "import os\n\
             if os.path.exists({request}):\n    \
                 try:\n        \
                     import memprof._attach as attach\n    \
                 except BaseException as e:\n        \
                     open({status}, 'w').write('error: %s: %s\\n' % (type(e).__name__, e))\n    \
                 else:\n        \
                     attach.{what}({request})\n"
        );
        let path = self.dir.join(format!("{what}.py"));
        let text = format!(
            "__import__('builtins').exec(compile({}, '<memprof attach>', 'exec'), \
             {{'__name__': '<memprof attach>'}})\n",
            py_str(&source)
        );
        let _ = std::fs::write(&path, text);
        path
    }

    fn status_text(&self) -> Option<String> {
        std::fs::read_to_string(&self.status).ok()
    }

    fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.remove();
    }
}
