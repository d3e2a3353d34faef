//! The live view in a real terminal: tmux (a server of its own per test, a 150 x 45 window),
//! driven with send-keys and read with capture-pane. `memprof run --live` draws memory now, over
//! time, the top sites and the 128 KiB-a-step growth of fixtures/growing_steps.py below the
//! program's own lines; `q` closes it and the program runs on to its end and report; a run
//! that ends closes it itself; `memprof live PID` draws another process's run until it ends.
//! Where standard output is no terminal, both refuse with the fix.
use crate::common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of the test's own, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// `shell_command` in a new 150 x 45 window.
    fn start(name: &str, shell_command: &str) -> Tmux {
        let socket = format!("memprof-test-{}-{name}", std::process::id());
        let t = Tmux { socket };
        let ok = t
            .tmux(&[
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "150",
                "-y",
                "45",
                shell_command,
            ])
            .status
            .success();
        assert!(ok, "tmux starts");
        t
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs (scripts/test.sh installs it)")
    }

    /// The window's text and its history, lines joined as written.
    fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "t"])
                .stdout,
        )
        .into_owned()
    }

    /// Waits until the screen holds every one of `texts`; the screen then.
    fn wait_for(&self, texts: &[&str], seconds: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            let screen = self.screen();
            if texts.iter().all(|t| screen.contains(t)) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited {seconds} s for {texts:?}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn keys(&self, keys: &str) {
        self.tmux(&["send-keys", "-t", "t", keys]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// The shell command that runs `args` with the tests' environment, in fixtures/, then says its
/// exit status and waits.
fn shell(args: &[&str]) -> String {
    let venv = python().parent().unwrap().parent().unwrap().to_path_buf();
    format!(
        "cd {} && VIRTUAL_ENV={} PATH={}:$PATH {} {}; echo EXIT=$?; sleep 600",
        root().join("fixtures").display(),
        venv.display(),
        venv.join("bin").display(),
        memprof_binary().display(),
        args.join(" ")
    )
}

#[test]
fn the_live_view_draws_under_the_programs_output_and_q_closes_it() {
    let t = Tmux::start(
        "q",
        &shell(&[
            "--device",
            device_flag(),
            "run",
            "--live",
            "growing_steps.py",
            "leak",
            "40",
            "--say",
            "--pace",
            "0.2",
        ]),
    );
    let header = format!(
        "memprof live · growing_steps.py · {}",
        if on_cuda() { "cuda:0" } else { "cpu" }
    );
    let screen = t.wait_for(
        &[
            &header,
            "live now, by site",
            "growing at each optimizer step",
            "+128.00 KiB",
            " step  kept.append(out[:32].detach().clone())",
            "step 5 loss",
        ],
        180,
    );
    assert!(
        screen.contains("allocated ") && screen.contains("(peak "),
        "{screen}"
    );
    // The program's lines are above the view, in order.
    let step5 = screen.find("step 5 loss").unwrap();
    assert!(step5 < screen.find("memprof live ·").unwrap(), "{screen}");
    t.keys("q");
    let screen = t.wait_for(
        &[
            "memprof: the live view closed; the program runs on",
            "kept 40 last loss",
            "EXIT=0",
        ],
        240,
    );
    // Closed: no more views; the program went on to its end and its report.
    let closed = screen.find("the live view closed").unwrap();
    assert!(!screen[closed..].contains("memprof live ·"), "{screen}");
    assert!(screen[closed..].contains("step 40 loss"), "{screen}");
    assert!(screen.contains("Growing: 1 site"), "{screen}");
}

#[test]
fn a_run_that_ends_closes_its_view_and_prints_its_report() {
    let t = Tmux::start(
        "end",
        &shell(&[
            "--device",
            device_flag(),
            "run",
            "--live",
            "growing_steps.py",
            "leak",
            "6",
            "--say",
            "--pace",
            "0.2",
        ]),
    );
    let screen = t.wait_for(&["EXIT=0"], 240);
    assert!(screen.contains("kept 6 last loss"), "{screen}");
    assert!(screen.contains("Peak: "), "{screen}");
    assert!(!screen.contains("the live view closed"), "{screen}");
}

#[test]
fn memprof_live_pid_draws_another_processs_run_until_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut program = memprof()
        .args(["--device", device_flag(), "run", "-o"])
        .arg(dir.path().join("r.json"))
        .arg(fixture("growing_steps.py"))
        .args(["leak", "30", "--pace", "0.2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = program.id().to_string();
    let t = Tmux::start("pid", &shell(&["live", &pid]));
    t.wait_for(
        &[
            &format!("pid {pid}"),
            "growing at each optimizer step",
            "+128.00 KiB",
        ],
        180,
    );
    assert!(program.wait().unwrap().success());
    let screen = t.wait_for(&["has ended its run", "EXIT=0"], 60);
    assert!(
        screen.contains(&format!("memprof: process {pid} has ended its run")),
        "{screen}"
    );
}

#[test]
fn without_a_terminal_live_is_refused_with_the_fix() {
    let r = run(&["--live", "lines.py"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--live draws in a terminal") && r.stderr.contains("memprof live PID"),
        "{}",
        r.stderr
    );
    let r = finish(memprof().args(["live", "1"]).output().unwrap());
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("memprof snapshot PID"), "{}", r.stderr);
}
