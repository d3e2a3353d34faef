//! The HTML report, opened in real headless Chromium (Debian's `chromium`, driven by
//! tests/browser/page_check.py over the DevTools protocol): it loads with no script or console
//! error and no request beyond itself, draws the timeline, the peak by stack and the tables with
//! the report's exact numbers, answers hover, click, drag and its buttons, prints, and stays
//! small and quick for ten million allocations. The screenshots are kept under
//! `target/tmp/html-*` for looking at.
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Whether this machine opens pages: not the GPU machine, which has no browser (its pages come
/// back to be opened here: scripts/gpu-html.sh). Everywhere else a missing Chromium fails.
fn has_no_browser_here() -> bool {
    if on_cuda() {
        eprintln!("skipped on the GPU machine: no browser there (scripts/gpu-html.sh)");
    }
    on_cuda()
}

/// What the page check saw of `page` (screenshots and PDF into `out`).
fn open_in_chromium(page: &Path, out: &Path) -> Value {
    open_in_chromium_with(page, out, "page_check.py")
}

/// What `checker` (a script in tests/browser) saw of `page`.
fn open_in_chromium_with(page: &Path, out: &Path, checker: &str) -> Value {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium package (scripts/setup.sh does)"
    );
    let script = root().join("tests").join("browser").join(checker);
    let r = finish(
        Command::new(python())
            .arg(script)
            .arg(page)
            .arg(out)
            .output()
            .expect("python starts"),
    );
    assert_eq!(r.code, 0, "the page check failed:\n{}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

/// `open_in_chromium` for a page that must load cleanly: no script or console error, and no
/// request beyond itself.
fn open_cleanly(page: &Path, out: &Path) -> Value {
    let seen = open_in_chromium(page, out);
    assert_eq!(
        seen["errors"],
        Value::Array(vec![]),
        "script errors: {seen:#}"
    );
    assert_eq!(seen["requests"], Value::Array(vec![]), "fetches: {seen:#}");
    seen
}

/// Where a test keeps its screenshots (kept after the run, for people to look at).
fn shots(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("html-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Bytes as the page writes them (and the terminal: binary units, two decimals).
fn human(n: i64) -> String {
    if n.abs() < 1024 {
        return format!("{n} B");
    }
    let units = ["KiB", "MiB", "GiB", "TiB"];
    let mut v = n.abs() as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u < units.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{}{v:.2} {}", if n < 0 { "-" } else { "" }, units[u])
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

/// `memprof show REPORT -o PAGE`, which must succeed.
fn show_as_page(json: &Path, page: &Path) {
    let r = finish(
        memprof()
            .args(["show", json.to_str().unwrap(), "-o", page.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("report written to"), "{}", r.stderr);
}

/// The CNN fixture with --modules and -f train_step, as a JSON report in `dir`.
fn cnn_report(dir: &Path) -> (PathBuf, Value) {
    let path = dir.join("cnn.json");
    let r = run(&[
        "--modules",
        "-f",
        "train_step",
        "-o",
        path.to_str().unwrap(),
        "cnn.py",
        "float32",
        "4",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = read_json(&path);
    (path, report)
}

#[test]
fn the_page_opens_in_chromium_with_the_timeline_the_peak_by_stack_and_the_tables() {
    if has_no_browser_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (json, report) = cnn_report(dir.path());
    let page = dir.path().join("cnn.html");
    show_as_page(&json, &page);

    // The report's timeline: its highest point is the peak, exactly, and its categories and
    // what was not seen allocated add up to the allocated bytes at each point.
    let peak = &report["peak"];
    let peak_bytes = peak["allocated_bytes"].as_i64().unwrap();
    let t = &report["timeline"];
    let highest = t["allocated_max"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .max();
    assert_eq!(highest, Some(peak_bytes));
    let points = t["allocations"].as_array().unwrap().len();
    let categories = t["categories"].as_object().unwrap();
    for i in 0..points {
        let named: i64 = categories.values().map(|s| s[i].as_i64().unwrap()).sum();
        assert!(
            named <= t["allocated_end"][i].as_i64().unwrap(),
            "point {i}"
        );
    }
    let kinds: Vec<&str> = t["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    for kind in ["backward", "step", "call_start", "call_end"] {
        assert_eq!(kinds.iter().filter(|&&k| k == kind).count(), 4, "{kind}");
    }

    let out = shots("cnn");
    let seen = open_cleanly(&page, &out);
    let drawn = &seen["drawn"];
    assert_eq!(drawn["ready"], "1");
    let sections = strings(&drawn["sections"]);
    for s in [
        "timeline",
        "stack",
        "sites",
        "device",
        "functions",
        "modules",
        "terminal",
    ] {
        assert!(sections.contains(&s.to_string()), "{s} in {sections:?}");
    }
    // The timeline: its bands, both lines, the peak where the report has it, the backward
    // passes and steps along the top, train_step's calls shaded.
    assert!(!strings(&drawn["bands"]).is_empty(), "{drawn:#}");
    assert_eq!(drawn["allocated_points"].as_u64(), Some(points as u64));
    assert_eq!(drawn["reserved_line"], true);
    assert_eq!(
        drawn["peak_marker"].as_str(),
        Some(format!("peak {}", human(peak_bytes)).as_str())
    );
    assert_eq!(drawn["marks"], 8, "4 backward passes and 4 steps");
    assert_eq!(drawn["calls"], 4);
    // It opens on the peak's point: what was live there, by line.
    let live = drawn["live_head"].as_str().unwrap();
    assert!(live.contains(&human(peak_bytes)), "{live}");
    assert!(drawn["live_rows"].as_u64().unwrap() >= 3);
    // The icicle: the peak at its root, then the program's functions.
    let icicle = strings(&drawn["icicle_nodes"]);
    assert!(
        icicle[0].starts_with(&format!("peak {}", human(peak_bytes))),
        "{icicle:?}"
    );
    assert!(
        icicle.iter().any(|n| n.starts_with("cnn.py · train_step")),
        "{icicle:?}"
    );
    // The tables: every site of the peak (and the rest), each targeted function's lines.
    let sites = peak["sites"].as_array().unwrap().len()
        + usize::from(!peak["other_sites"].is_null())
        + usize::from(peak["unseen_bytes"].as_i64().unwrap() != 0);
    assert_eq!(drawn["peak_site_rows"].as_u64(), Some(sites as u64));
    assert_eq!(drawn["line_tables"], 1);
    let lines = report["functions"][0]["lines"].as_array().unwrap().len();
    assert_eq!(drawn["line_rows"].as_u64(), Some(lines as u64));
    assert!(strings(&drawn["pres"]).contains(&"modules".to_string()));
    // At 1280 px nothing runs past the page's edge.
    assert!(drawn["width"].as_u64().unwrap() <= 1280, "{drawn:#}");

    // What a user does there.
    let tip = seen["tooltip"].as_str().expect("a tooltip on hover");
    assert!(tip.contains("allocated (highest)"), "{tip}");
    assert!(seen["clicked_live_head"]
        .as_str()
        .unwrap()
        .starts_with("Live at "));
    let zoom = &seen["zoom_points"];
    assert!(
        zoom[1].as_u64().unwrap() < zoom[0].as_u64().unwrap(),
        "a drag zooms in: {zoom}"
    );
    let by_site = strings(&seen["site_bands"]);
    assert!(
        !by_site.is_empty()
            && by_site
                .iter()
                .all(|s| s.starts_with("site") || s == "others" || s == "unseen"),
        "{by_site:?}"
    );
    assert!(seen["icicle_zoom"].as_str().unwrap().contains('›'));
    assert_eq!(seen["dark_theme"], "dark");
    assert_eq!(seen["dark_background"], "rgb(20, 23, 29)");
    assert!(seen["pdf_pages"].as_u64().unwrap() >= 1);
    for shot in ["light.png", "dark.png"] {
        let png = std::fs::read(out.join(shot)).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "{shot}");
    }
}

#[test]
fn run_writes_the_page_by_the_file_name_and_prints_it_with_format_html() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let r = run(&["-o", page.to_str().unwrap(), "cnn.py", "float32", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    let start = html.find("id=\"memprof-report\">").unwrap() + "id=\"memprof-report\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let embedded: Value = serde_json::from_str(&html[start..end]).unwrap();
    assert_eq!(embedded["schema"], "memprof.profile/1");
    assert!(
        embedded["timeline"]["allocations"]
            .as_array()
            .unwrap()
            .len()
            > 1
    );
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));

    let r = run(&["--format", "html", "cnn.py", "float32", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The page alone on standard output (`> report.html` is a page); the script's own output
    // went to standard error.
    assert!(
        r.stdout.starts_with("<!DOCTYPE html>"),
        "{}",
        &r.stdout[..80]
    );
    assert!(r.stdout.ends_with("</html>\n"));
    assert!(
        r.stderr.lines().any(|l| l.starts_with("loss ")),
        "{}",
        r.stderr
    );
}

/// The check can fail: a page that fetches is caught, with the content policy (refused: an
/// error) and without it (the request itself).
#[test]
fn the_page_check_catches_a_page_that_fetches() {
    if has_no_browser_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let r = run(&["-o", page.to_str().unwrap(), "cnn.py", "float32", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    let fetching = html.replace(
        "<div id=\"app\"></div>",
        "<div id=\"app\"></div><img src=\"http://127.0.0.1:9/pixel.png\">",
    );
    let with_policy = dir.path().join("with_policy.html");
    std::fs::write(&with_policy, &fetching).unwrap();
    let seen = open_in_chromium(&with_policy, &shots("fetch-refused"));
    let errors = strings(&seen["errors"]);
    assert!(
        errors.iter().any(|e| e.contains("Content Security Policy")),
        "{errors:?}"
    );
    let policy_start = fetching
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .unwrap();
    let policy_end = policy_start + fetching[policy_start..].find('\n').unwrap();
    let without = format!(
        "{}{}",
        &fetching[..policy_start],
        &fetching[policy_end + 1..]
    );
    let no_policy = dir.path().join("no_policy.html");
    std::fs::write(&no_policy, without).unwrap();
    let seen = open_in_chromium(&no_policy, &shots("fetch"));
    assert_eq!(
        strings(&seen["requests"]),
        vec!["http://127.0.0.1:9/pixel.png".to_string()]
    );
}

#[test]
fn ten_million_allocations_make_a_page_under_10_mb_that_stays_quick() {
    if has_no_browser_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("many.html");
    let r = run(&[
        "-o",
        page.to_str().unwrap(),
        "many_allocations.py",
        "10000000",
        "2000",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size < 10 << 20, "{size} bytes");
    let seen = open_cleanly(&page, &shots("many"));
    let drawn = &seen["drawn"];
    let points = drawn["allocated_points"].as_u64().unwrap();
    assert!((512..=2048).contains(&points), "{points} points");
    assert!(seen["load_seconds"].as_f64().unwrap() < 10.0, "{seen:#}");
    assert!(seen["redraw_ms"].as_f64().unwrap() < 1000.0, "{seen:#}");
    let zoom = &seen["zoom_points"];
    assert!(zoom[1].as_u64().unwrap() < zoom[0].as_u64().unwrap());
    // The 4 MiB blocks' site is among the top sites, and the peak holds one of them.
    assert!(drawn["peak_marker"].as_str().unwrap().starts_with("peak "));
}

/// A site that grows step after step has its section, and its own band (marked) when the
/// timeline is stacked by site, however small it is against the rest.
#[test]
fn a_growing_site_has_its_section_and_its_band_in_the_page() {
    if has_no_browser_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("leak.html");
    let r = run(&[
        "-o",
        page.to_str().unwrap(),
        "growing_steps.py",
        "leak",
        "12",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seen = open_cleanly(&page, &shots("growing"));
    let rows = strings(&seen["drawn"]["growing_rows"]);
    assert_eq!(rows.len(), 1, "{seen:#}");
    assert!(rows[0].starts_with("+128.00 KiB11"), "{rows:?}");
    assert!(
        strings(&seen["site_legend"])
            .iter()
            .any(|l| l.starts_with("growing: growing_steps.py:") && l.contains(" step (up to ")),
        "{seen:#}"
    );
}

#[test]
fn html_is_refused_for_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let (json, _) = cnn_report(dir.path());
    let j = json.to_str().unwrap();
    let out = dir.path().join("diff.html");
    let r = finish(
        memprof()
            .args(["diff", j, j, "-o", out.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("a diff has no HTML form")
            && r.stderr.contains("memprof show RUN.json -o report.html"),
        "{}",
        r.stderr
    );
    assert!(!out.exists());
}

/// The merged ranks' page: 64 ranks on 8 hosts (benches/synthetic_ranks.py: rank 33 far above,
/// rank 17 far below), each a bar, the two marked, a click on a bar or a row showing that rank
/// with a link to its report; `show` of several reports and of the merged JSON draws the same.
#[test]
fn the_merged_page_draws_every_rank_marks_the_outliers_and_opens_a_rank() {
    if has_no_browser_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    crate::merge_scale::synthetic_ranks(dir.path(), 64);
    let files = crate::merge_scale::rank_files(dir.path(), 64);
    let page = dir.path().join("merged.html");
    let r = finish(
        memprof()
            .arg("merge")
            .args(&files)
            .arg("-o")
            .arg(&page)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let json = finish(
        memprof()
            .args(["merge", "--format", "json"])
            .args(&files)
            .output()
            .unwrap(),
    );
    let merged: Value = serde_json::from_str(&json.stdout).unwrap();
    let seen = open_in_chromium_with(&page, &shots("merged"), "merged_check.py");
    assert_eq!(seen["errors"], Value::Array(vec![]), "{seen:#}");
    assert_eq!(seen["requests"], Value::Array(vec![]), "{seen:#}");
    let drawn = &seen["drawn"];
    assert_eq!(drawn["ready"], "1", "{seen:#}");
    assert_eq!(drawn["bars"], 64);
    let mut marked: Vec<u64> = drawn["outlier_bars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    marked.sort();
    assert_eq!(marked, vec![17, 33], "{drawn:#}");
    assert_eq!(strings(&drawn["outlier_labels"]), vec!["r33", "r17"]);
    // 8 hosts, every other one shaded.
    assert_eq!(drawn["host_bands"], 4);
    assert_eq!(
        (&drawn["median_line"], &drawn["p90_line"]),
        (&1.into(), &1.into())
    );
    assert_eq!(drawn["host_rows"], 8);
    assert_eq!(
        drawn["site_rows"].as_u64().unwrap() as usize,
        merged["peak"]["sites"].as_array().unwrap().len()
    );
    let rows = strings(&drawn["outlier_rows"]);
    assert!(
        rows.len() == 2
            && rows[0].starts_with("33node004")
            && rows[0].ends_with("far above the rest"),
        "{rows:?}"
    );
    // The page opens on the rank of the max; a bar hovered and clicked shows its rank.
    assert_eq!(drawn["panel_rank"], "33");
    let max = human(
        merged["peak"]["distribution"]["allocated_bytes"]["max"]
            .as_i64()
            .unwrap(),
    );
    assert!(
        drawn["panel"]
            .as_str()
            .unwrap()
            .contains(&format!("peak {max} allocated")),
        "{drawn:#}"
    );
    let tooltip = seen["tooltip"].as_str().expect("a tooltip over a bar");
    let hovered = tooltip
        .strip_prefix("rank ")
        .and_then(|t| t.split(' ').next())
        .unwrap();
    assert_eq!(seen["clicked_rank"], hovered, "{seen:#}");
    assert_eq!(seen["row_rank"], serde_json::json!(["17", "17"]));
    // The rank's own report, linked from the page's folder.
    assert_eq!(seen["link"][0], "ranks/r.17.json");
    assert!(dir.path().join("ranks/r.17.json").exists());
    assert_eq!(seen["dark_theme"], "dark");

    // `show` of the ranks' reports, and of the merged JSON, writes the same page.
    for (args, name) in [
        (files.clone(), "shown.html"),
        (
            vec![dir.path().join("m.json").to_string_lossy().into_owned()],
            "from-json.html",
        ),
    ] {
        std::fs::write(dir.path().join("m.json"), &json.stdout).unwrap();
        let out = dir.path().join(name);
        let r = finish(
            memprof()
                .arg("show")
                .args(&args)
                .arg("-o")
                .arg(&out)
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            std::fs::read_to_string(&page).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn import_memprof_saves_the_page_too_and_it_draws_the_sessions_timeline() {
    if has_no_browser_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("api.html");
    let out = finish(
        python_with_memprof()
            .arg("inprocess_step.py")
            .arg("--api")
            .arg(&page)
            .output()
            .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seen = open_cleanly(&page, &shots("inprocess"));
    let drawn = &seen["drawn"];
    assert!(!strings(&drawn["bands"]).is_empty(), "{drawn:#}");
    assert_eq!(drawn["line_tables"], 1);
    assert!(drawn["peak_marker"].as_str().unwrap().starts_with("peak "));
}

/// The GPT-2 example (examples/gpt2_train.py, made small for the CPU) as a page: its bands by
/// category include the optimizer's state and the activations, and its icicle reaches the
/// model's lines through the loop's.
#[test]
fn the_gpt2_example_on_the_cpu_opens_as_a_page() {
    if has_no_browser_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("gpt2.html");
    let gpt2 = root().join("examples").join("gpt2_train.py");
    let r = run(&[
        "-o",
        page.to_str().unwrap(),
        gpt2.to_str().unwrap(),
        "--device",
        "cpu",
        "--layers",
        "2",
        "--embd",
        "64",
        "--heads",
        "2",
        "--vocab",
        "512",
        "--batch",
        "2",
        "--seq",
        "64",
        "--steps",
        "3",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seen = open_cleanly(&page, &shots("gpt2-cpu"));
    let drawn = &seen["drawn"];
    let bands = strings(&drawn["bands"]);
    for band in ["parameters", "optimizer_state", "activations"] {
        assert!(bands.contains(&band.to_string()), "{band} in {bands:?}");
    }
    let icicle = strings(&drawn["icicle_nodes"]);
    assert!(
        icicle.iter().any(|n| n.contains("gpt2_model.py:")),
        "{icicle:?}"
    );
    assert_eq!(drawn["marks"], 6, "3 backward passes and 3 steps");
}

/// An OOM and a budget: their sections as the terminal prints them, the lines over budget marked
/// in the line table, the exception in the header.
#[test]
fn the_oom_record_and_the_budgets_are_on_the_page() {
    if on_cuda() || has_no_browser_here() {
        return; // the fixture fakes torch's CUDA OOM on the CPU, and opens the page
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("oom.json");
    let r = run(&[
        "-f",
        "step",
        "--max",
        "step:allocated_bytes.all.peak=1KiB",
        "-o",
        json.to_str().unwrap(),
        "oom_forensics.py",
    ]);
    assert_eq!(r.code, 1, "the script raised: {}", r.stderr);
    let report = read_json(&json);
    let page = dir.path().join("oom.html");
    show_as_page(&json, &page);
    let seen = open_cleanly(&page, &shots("oom"));
    let drawn = &seen["drawn"];
    let pres = strings(&drawn["pres"]);
    for s in ["oom", "budgets", "terminal"] {
        assert!(pres.contains(&s.to_string()), "{s} in {pres:?}");
    }
    let exceeded = report["budgets"][0]["exceeded"].as_array().unwrap().len();
    assert!(exceeded > 0);
    assert_eq!(drawn["over_budget_rows"].as_u64(), Some(exceeded as u64));
    assert!(drawn["width"].as_u64().unwrap() <= 1280, "{drawn:#}");
}

/// A run that allocated nothing on the device: no timeline, no peak, and still a page that says
/// so, with the warnings, and no error.
#[test]
fn a_run_that_allocated_nothing_opens_as_a_page_that_says_so() {
    if has_no_browser_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("empty.html");
    let r = run(&["-o", page.to_str().unwrap(), "argv.py", "a"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seen = open_cleanly(&page, &shots("empty"));
    let drawn = &seen["drawn"];
    assert_eq!(
        strings(&drawn["sections"]),
        vec!["timeline", "warnings", "terminal"]
    );
    assert!(drawn["bands"].as_array().unwrap().is_empty());
}
