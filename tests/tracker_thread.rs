//! The tracker's own thread (src/capture/peak/worker.rs), which records the allocator's events
//! where `MEMPROF_TRACKER_THREAD=1` asks for it, changes no number: a report is the one memprof
//! writes without it (the peak, its sites and categories, every module row, every line, the
//! timeline's points and marks), times and the process's own readings aside.
use crate::common::*;
use serde_json::Value;

/// The report of `memprof run -f step --modules` of fixtures/tracker_thread.py, the thread on
/// or not, and what the program printed.
fn report(thread: bool) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let run = memprof()
        .env("MEMPROF_TRACKER_THREAD", if thread { "1" } else { "0" })
        .args(["--device", device_flag(), "run", "-f", "step", "--modules"])
        .args(["--format", "json", "-o"])
        .arg(&out)
        .arg(fixture("tracker_thread.py"))
        .output()
        .expect("memprof starts");
    let run = finish(run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(&out).expect("a report");
    (serde_json::from_str(&text).unwrap(), run.stdout)
}

/// Takes out what differs from run to run whatever memprof does: clock readings, the process
/// (its id, command line, the host's memory), the device's readings outside torch.
fn without_times(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| {
                !(k == "seconds" || k == "metadata" || k == "device" || k.starts_with("host_"))
            });
            map.values_mut().for_each(without_times);
        }
        Value::Array(items) => items.iter_mut().for_each(without_times),
        _ => {}
    }
}

#[test]
fn the_trackers_thread_changes_no_number_of_the_report() {
    let (mut inline, said) = report(false);
    let (mut threaded, said_threaded) = report(true);
    assert_eq!(said.trim(), "tracker thread: False");
    assert_eq!(said_threaded.trim(), "tracker thread: True");
    assert!(
        inline["modules"]["modules"]
            .as_array()
            .is_some_and(|m| m.len() > 8)
            && inline["peak"]["sites"]
                .as_array()
                .is_some_and(|s| !s.is_empty())
            && inline["timeline"]["allocations"]
                .as_array()
                .is_some_and(|t| t.len() > 100),
        "a report with modules, a peak and a timeline: {inline}"
    );
    without_times(&mut inline);
    without_times(&mut threaded);
    assert_eq!(inline, threaded);
}
