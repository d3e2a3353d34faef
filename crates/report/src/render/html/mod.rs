//! The HTML report (`-o report.html`, `--format html`, `memprof show report.json -o
//! report.html`): one self-contained page that draws a run's report interactively, the timeline,
//! the peak by stack, the tables. Everything is inline, the data as the report's own JSON, and
//! the page's Content-Security-Policy forbids every fetch, so it works from a file:// URL, an
//! e-mail attachment or a CI artifact with no network. The drawing is page.js's; the sections
//! the page shows as the terminal does (modules, OOM, budgets, tensors, child processes) come
//! rendered by the table renderers.
use crate::model::profile::Profile;
use serde::Serialize;

pub mod merged;

const STYLE: &str = include_str!("page.css");
/// What both pages' scripts use, loaded before each.
const COMMON_SCRIPT: &str = include_str!("common.js");
const SCRIPT: &str = include_str!("page.js");

/// The sections the page shows as the terminal prints them.
#[derive(Serialize, Default)]
struct Texts {
    #[serde(skip_serializing_if = "String::is_empty")]
    modules: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    oom: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    budgets: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    tensors: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    children: String,
    /// The whole report as the terminal prints it.
    terminal: String,
}

fn texts(p: &Profile) -> Texts {
    let mut t = Texts {
        terminal: super::report::render(p),
        ..Texts::default()
    };
    if let Some(m) = &p.modules {
        super::modules::render(&mut t.modules, m, None);
    }
    if let Some(oom) = &p.oom {
        super::oom::render(&mut t.oom, oom);
    }
    if let Some(b) = &p.budgets {
        super::budgets::render(&mut t.budgets, b, &p.metadata.stats);
    }
    if let Some(inventories) = &p.tensors {
        super::tensors::render(&mut t.tensors, inventories);
    }
    super::children::render(&mut t.children, &p.children);
    t
}

/// Where a page's report starts: its JSON follows, up to the next `</script>`.
const REPORT_OPENS: &str = "<script type=\"application/json\" id=\"memprof-report\">";

/// The report a page written by memprof embeds, as JSON text (its `\u003c` escapes are JSON's
/// own), so that `show`, `diff` and `merge` read a page as they read the JSON; None for any
/// other text.
pub fn embedded_report(page: &str) -> Option<&str> {
    let start = page.find(REPORT_OPENS)? + REPORT_OPENS.len();
    let len = page[start..].find("</script>")?;
    Some(&page[start..start + len])
}

/// JSON to sit inside a `<script>` element: no `<` (so no `</script>` or `<!--`) and no line
/// separators that old parsers take for line ends.
fn script_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value)
        .expect("reports serialise")
        .replace('<', "\\u003c")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page's title: the script and its peak.
fn title(p: &Profile) -> String {
    let script = p
        .metadata
        .script
        .as_deref()
        .map(crate::model::paths::file_name)
        .unwrap_or("run");
    match &p.peak {
        Some(peak) => format!(
            "memprof: {script}, peak {}",
            crate::model::units::bytes(peak.allocated_bytes)
        ),
        None => format!("memprof: {script}"),
    }
}

/// The run's report as one HTML page.
pub fn render(p: &Profile) -> String {
    let texts = texts(p);
    page(
        &title(p),
        &texts.terminal,
        &[
            (REPORT_OPENS, script_json(p)),
            (TEXTS_OPENS, script_json(&texts)),
        ],
        "",
        SCRIPT,
    )
}

const TEXTS_OPENS: &str = "<script type=\"application/json\" id=\"memprof-texts\">";

/// A self-contained page: `data` (each element's opening tag and its JSON), then the common
/// script and `script`; `terminal` is what it shows where scripts do not run.
fn page(
    title: &str,
    terminal: &str,
    data: &[(&str, String)],
    extra_style: &str,
    script: &str,
) -> String {
    let mut page = String::with_capacity(64 * 1024);
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    // No fetch of any kind: not a script, a style, an image, a font, a frame or a connection.
    page.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n",
    );
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // A favicon of its own, or the browser asks the server for /favicon.ico.
    page.push_str("<link rel=\"icon\" href=\"data:,\">\n");
    page.push_str(&format!("<title>{}</title>\n", escape(title)));
    page.push_str("<style>\n");
    page.push_str(STYLE);
    page.push_str(extra_style);
    page.push_str("</style>\n</head>\n<body>\n");
    // Where scripts do not run (a mail client's preview), the report as the terminal prints it.
    page.push_str(&format!(
        "<noscript><p class=\"noscript\">This report draws itself with JavaScript, which is \
         off here; this is the report as memprof prints it.</p><pre>{}</pre></noscript>\n",
        escape(terminal)
    ));
    page.push_str("<div id=\"app\"></div>\n");
    for (opens, json) in data {
        page.push_str(opens);
        page.push_str(json);
        page.push_str("</script>\n");
    }
    page.push_str("<script>\n");
    page.push_str(COMMON_SCRIPT);
    page.push_str(script);
    page.push_str("</script>\n</body>\n</html>\n");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_in_a_script_element_cannot_end_it_and_reads_back_the_same() {
        let value = serde_json::json!({
            "source": "print('</script><script>alert(1)</script>') # <!-- \u{2028}",
        });
        let text = script_json(&value);
        assert!(!text.contains('<') && !text.contains('\u{2028}'), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn text_in_the_page_is_escaped() {
        assert_eq!(
            escape("a < b && \"c\" > d"),
            "a &lt; b &amp;&amp; &quot;c&quot; &gt; d"
        );
    }
}
