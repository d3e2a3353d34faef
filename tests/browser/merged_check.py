"""Opens a merged ranks' page (`memprof merge -o merged.html`) in real headless Chromium and says
what a user would meet there, as JSON on standard output: script and console errors, requests
beyond the page itself, the bars drawn (one per rank with a peak), the ranks marked as standing out,
the host bands, the median and p90 lines, the tables' rows, what hovering a bar and clicking one
(and a row of the outliers table) showed, the link to a rank's report, and screenshots (light and
dark, 1280 px wide).

    python3 merged_check.py MERGED.html OUT_DIR [--chromium /usr/bin/chromium]
"""

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page_check import Browser, events_seen, load, screenshot  # noqa: E402

DRAWN = """(() => {
  const q = (s) => document.querySelectorAll(s);
  const text = (s) => { const e = document.querySelector(s); return e ? e.textContent : null; };
  return {
    ready: document.body.dataset.ready || null,
    title: document.title,
    meta: text('#merged-meta'),
    sections: Array.from(q('section')).map((s) => s.id),
    bars: q('#rank-bars rect.rank:not(.reserved)').length,
    outlier_bars: Array.from(q('#rank-bars rect.outlier')).map((b) => Number(b.getAttribute('data-rank'))),
    outlier_labels: Array.from(q('#ranks-chart text.outlier-label')).map((t) => t.textContent),
    host_bands: q('#ranks-chart rect.host-band').length,
    median_line: q('#ranks-chart line.median').length,
    p90_line: q('#ranks-chart line.p90').length,
    cards: Array.from(q('.card')).map((c) => c.textContent),
    outlier_rows: Array.from(q('#outliers tbody tr')).map((r) => r.textContent),
    host_rows: q('#hosts tbody tr').length,
    site_rows: q('#merged-sites tbody tr').length,
    panel: text('#rank-panel'),
    panel_rank: document.getElementById('rank-panel') ? document.getElementById('rank-panel').getAttribute('data-rank') : null,
    missing: text('#missing'),
    width: document.documentElement.scrollWidth,
  };
})()"""


def check(page, out_dir, chromium):
    url = "file://" + os.path.abspath(page)
    result = {"url": url}
    with tempfile.TemporaryDirectory() as profile:
        b = Browser(chromium, profile)
        try:
            load(b, url, result)
            result["drawn"] = b.evaluate(DRAWN)
            os.makedirs(out_dir, exist_ok=True)
            screenshot(b, os.path.join(out_dir, "light.png"))
            box = b.evaluate(
                "(() => { const o = document.getElementById('ranks-overlay'); if (!o) return null;"
                " const r = o.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; })()"
            )
            if box and box["w"] > 0:
                # A third of the way along the ranks: hover, then click.
                x, y = box["x"] + 0.3 * box["w"], box["y"] + box["h"] * 0.9
                b.mouse("mouseMoved", x, y)
                result["tooltip"] = b.evaluate(
                    "(() => { const t = document.getElementById('tooltip');"
                    " return t.style.display === 'block' ? t.textContent : null; })()"
                )
                b.mouse("mousePressed", x, y, "left", 1)
                b.mouse("mouseReleased", x, y, "left", 1)
                result["clicked_panel"] = b.evaluate("document.getElementById('rank-panel').textContent")
                result["clicked_rank"] = b.evaluate("document.getElementById('rank-panel').getAttribute('data-rank')")
            # A row of the outliers table selects its rank.
            result["row_rank"] = b.evaluate(
                "(() => { const r = document.querySelector('#outliers tbody tr:last-child'); if (!r) return null;"
                " r.click(); return [r.getAttribute('data-rank'), document.getElementById('rank-panel').getAttribute('data-rank')]; })()"
            )
            result["link"] = b.evaluate(
                "(() => { const a = document.getElementById('rank-link'); return a ? [a.getAttribute('href'), a.href] : null; })()"
            )
            b.evaluate("document.getElementById('theme').click()")
            result["dark_theme"] = b.evaluate("document.documentElement.getAttribute('data-theme')")
            screenshot(b, os.path.join(out_dir, "dark.png"))
            b.pump(0.5)
        finally:
            b.close()
    result["errors"], result["requests"] = events_seen(b.events, url)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("page")
    parser.add_argument("out_dir")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    json.dump(check(args.page, args.out_dir, args.chromium), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
