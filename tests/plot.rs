//! `memprof plot` and `run --plot`: the pictures hold the series, labels and exact values of
//! the report they were drawn from (the CNN fixture's bytes are worked out in tests/modules.rs).
use crate::common::*;
use std::path::Path;

/// A saved report of the CNN fixture: modules and train_step's lines.
fn cnn_report(dir: &Path) -> String {
    let path = dir.join("cnn.json").to_string_lossy().into_owned();
    let r = run(&[
        "--modules",
        "-f",
        "train_step",
        "--format",
        "json",
        "-o",
        &path,
        "cnn.py",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    path
}

fn plot(args: &[&str]) -> Run {
    finish(memprof().arg("plot").args(args).output().unwrap())
}

/// The texts of an SVG's <text> elements.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            let text = body[..body.find("</text>")?].trim();
            Some(
                text.replace("&apos;", "'")
                    .replace("&quot;", "\"")
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&"),
            )
        })
        .collect()
}

#[test]
fn an_svg_holds_every_panel_with_its_exact_values() {
    let dir = tempfile::tempdir().unwrap();
    let report = cnn_report(dir.path());
    let out = dir.path().join("cnn.svg");
    let r = plot(&[&report, "-o", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("plot written to"), "{}", r.stderr);
    let svg = std::fs::read_to_string(&out).unwrap();
    let t = texts(&svg);
    let has = |s: &str| t.iter().any(|x| x.contains(s));
    for title in [
        "Allocated memory over module calls",
        "Bytes saved for backward per module call",
        "Parameter bytes per module",
        "train_step (cnn.py:17): per line, allocated_bytes.all.peak and Δ",
    ] {
        assert!(has(title), "no title {title:?} in {t:?}");
    }
    for legend in ["forward", "backward", "allocated_bytes.all.peak"] {
        assert!(t.iter().any(|x| x == legend), "no legend {legend:?}");
    }
    // Leaf modules with their types, and the bytes worked out by hand: ReLU saves its 8x16x16x16
    // fp32 output (128 KiB) per call, max pooling its int64 indices (64 KiB); Linear(1024, 32)
    // holds 32800 fp32 parameters (128.12 KiB), Conv2d(4, 16, 3) 592 (2.31 KiB).
    for label in ["0 (Conv2d)", "1 (ReLU)", "2 (MaxPool2d)", "4 (Linear)"] {
        assert!(has(label), "no row {label:?}");
    }
    for value in ["128.00 KiB", "64.00 KiB", "128.12 KiB", "2.31 KiB"] {
        assert!(t.iter().any(|x| x == value), "no value {value:?} in {t:?}");
    }
    assert!(
        has("19  out = model(x)"),
        "the lines are labelled with their source"
    );
    assert!(
        t.iter()
            .any(|x| x.starts_with("peak ") && x.contains("(backward)")),
        "the peak is marked and named: {t:?}"
    );
    // Lines for the memory curve (forward and backward runs) and bars.
    assert!(svg.matches("<polyline").count() >= 2);
    assert!(svg.contains("<rect"));
}

#[test]
fn png_and_html_have_the_svgs_size_and_content() {
    let dir = tempfile::tempdir().unwrap();
    let report = cnn_report(dir.path());
    let svg_path = dir.path().join("p.svg");
    let png_path = dir.path().join("p.png");
    let html_path = dir.path().join("p.html");
    for p in [&svg_path, &png_path, &html_path] {
        let r = plot(&[&report, "-o", p.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let png = std::fs::read(&png_path).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!(width, 1200);
    assert!(
        svg.contains(&format!("width=\"1200\" height=\"{height}\"")),
        "the PNG ({width}x{height}) and the SVG have one layout"
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg") && html.contains("Allocated memory over module calls"));
}

#[test]
fn several_reports_get_one_series_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let report = cnn_report(dir.path());
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    v["metadata"]["process"]["rank"] = 1.into();
    v["metadata"]["process"]["world_size"] = 2.into();
    let second = dir.path().join("rank1.json");
    std::fs::write(&second, serde_json::to_string(&v).unwrap()).unwrap();
    let out = dir.path().join("ranks.svg");
    let r = plot(&[
        &report,
        second.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = texts(&std::fs::read_to_string(&out).unwrap());
    for rank in ["rank 0", "rank 1"] {
        assert!(t.iter().any(|x| x == rank), "no series {rank:?} in {t:?}");
    }
    assert!(t.iter().any(|x| x.starts_with("rank 1: peak ")));
}

#[test]
fn a_section_without_data_says_so_and_a_report_without_any_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("lines.json");
    let r = run(&[
        "-f",
        "step",
        "--format",
        "json",
        "-o",
        lines.to_str().unwrap(),
        "lines.py",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = dir.path().join("lines.svg");
    let r = plot(&[lines.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("no module data (run with --modules)"),
        "{}",
        r.stderr
    );
    let t = texts(&std::fs::read_to_string(&out).unwrap());
    assert!(t
        .iter()
        .any(|x| x.starts_with("No plot: memory over module calls")));
    assert!(t.iter().any(|x| x.starts_with("step (lines.py:")));

    let empty = dir.path().join("empty.json");
    let r = run(&[
        "--format",
        "json",
        "-o",
        empty.to_str().unwrap(),
        // Allocates nothing: no peak either.
        "argv.py",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = plot(&[empty.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("nothing to plot"), "{}", r.stderr);

    let r = plot(&[lines.to_str().unwrap(), "-o", "plot.jpeg"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("name the file .svg, .png or .html"),
        "{}",
        r.stderr
    );
}

#[test]
fn run_plot_draws_the_runs_report_and_checks_the_name_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.png");
    let r = run(&["-f", "step", "--plot", out.to_str().unwrap(), "lines.py"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("Function: step"),
        "the report is printed too"
    );
    assert_eq!(&std::fs::read(&out).unwrap()[..4], b"\x89PNG");

    let r = run(&["-f", "step", "--plot", "out.gif", "lines.py"]);
    assert_eq!(r.code, 2);
    assert!(!r.stdout.contains("result"), "the script did not run");
}
