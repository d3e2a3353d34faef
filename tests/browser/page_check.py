"""Opens an HTML report in real headless Chromium and says what a user would meet there, as JSON
on standard output: the script errors and console errors, every request the page made beyond
loading itself, what the page drew (the timeline's bands and lines, the peak marker, the icicle,
the tables), what hovering, clicking, dragging and the buttons did, how long a redraw took, and
screenshots (light and dark, 1280 px wide, whole and the top 1150 px) and a PDF of it
printed.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON
messages ended by a NUL, on file descriptors 3 and 4), so nothing but the standard library is
needed.

    python3 page_check.py REPORT.html OUT_DIR [--chromium /usr/bin/chromium]
"""

import argparse
import base64
import fcntl
import json
import os
import select
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, chromium, profile_dir):
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # Out of the way of 3 and 4, which the child gets them as.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (to_chrome_r, from_chrome_w)]
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)

        def child_fds():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--remote-debugging-pipe",
                "--user-data-dir=" + profile_dir,
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=child_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for fd in high:
            os.close(fd)
        self.w = to_chrome_w
        self.r = from_chrome_r
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer")
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                chunk = os.read(self.r, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed its pipe")
                self.buf += chunk
        message, self.buf = self.buf.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def pump(self, seconds):
        """Reads the events that arrive within `seconds`."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read_message(deadline))
        except TimeoutError:
            pass

    def evaluate(self, expression):
        r = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def mouse(self, kind, x, y, button="none", clicks=0):
        self.send(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": x, "y": y, "button": button, "clickCount": clicks},
        )

    def close(self):
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# What the page drew, read from its DOM.
DRAWN = """(() => {
  const q = (s) => document.querySelectorAll(s);
  const text = (s) => { const e = document.querySelector(s); return e ? e.textContent : null; };
  const line = document.getElementById('allocated-line');
  return {
    ready: document.body.dataset.ready || null,
    title: document.title,
    theme: document.documentElement.getAttribute('data-theme'),
    sections: Array.from(q('section')).map((s) => s.id),
    bands: Array.from(q('#bands polygon')).map((p) => p.getAttribute('data-series')),
    allocated_points: line ? line.getAttribute('points').split(' ').length : 0,
    reserved_line: !!document.getElementById('reserved-line'),
    peak_marker: text('#peak-marker text'),
    marks: q('#marks line').length,
    calls: q('#calls rect').length,
    legend: Array.from(q('#timeline-legend .item')).map((e) => e.textContent),
    live_head: text('#live .head'),
    live_rows: q('#live tbody tr').length,
    icicle_nodes: Array.from(q('#icicle .node')).map((n) => n.getAttribute('title')),
    peak_site_rows: q('#peak-sites tbody tr').length,
    line_tables: q('table.lines').length,
    line_rows: q('table.lines tbody tr').length,
    over_budget_rows: q('table.lines tbody tr.over').length,
    pres: Array.from(q('section pre')).map((p) => p.closest('section').id),
    growing_rows: Array.from(q('#growing tbody tr')).map((r) => r.textContent),
    width: document.documentElement.scrollWidth,
  };
})()"""


def overlay_box(b):
    """The timeline's mouse area (None where the page drew none)."""
    return b.evaluate(
        "(() => { const o = document.getElementById('timeline-overlay'); if (!o) return null;"
        " const r = o.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; })()"
    )


def screenshot(b, path):
    metrics = b.send("Page.getLayoutMetrics")
    height = int(metrics["cssContentSize"]["height"]) + 1
    b.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    shot = b.send("Page.captureScreenshot", {"format": "png"})
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    # The page's top (the header, the timeline, the peak by stack): what a README shows.
    top = {"x": 0, "y": 0, "width": 1280, "height": min(height, 1150), "scale": 1}
    shot = b.send("Page.captureScreenshot", {"format": "png", "clip": top})
    with open(path.replace(".png", "-top.png"), "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    b.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    b.pump(0.3)  # the page's resize handling, before the next input


def events_seen(events, url):
    """The script and console errors, and the requests beyond `url`, among DevTools events."""
    errors, requests = [], []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            errors.append(d.get("exception", {}).get("description") or d.get("text"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            errors.append(params["entry"]["text"])
        elif method == "Network.requestWillBeSent":
            if params["request"]["url"] != url:
                requests.append(params["request"]["url"])
    return errors, requests


def load(b, url, result):
    """Opens `url` in a new tab of `b` (1280 x 900, light), waits until the page says it is
    drawn (body data-ready, at most 60 s), and records the seconds that took."""
    target = b.send("Target.createTarget", {"url": "about:blank"}, session=False)
    attached = b.send(
        "Target.attachToTarget",
        {"targetId": target["targetId"], "flatten": True},
        session=False,
    )
    b.session = attached["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        b.send(domain + ".enable")
    b.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    b.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    started = time.monotonic()
    b.send("Page.navigate", {"url": url})
    deadline = time.monotonic() + 60
    while b.evaluate("document.body && document.body.dataset.ready") != "1":
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    result["load_seconds"] = round(time.monotonic() - started, 3)


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

            box = overlay_box(b)
            if box and box["w"] > 0:
                cx, cy = box["x"] + box["w"] * 0.5, box["y"] + box["h"] * 0.5
                # Hover: the tooltip shows the point's values.
                b.mouse("mouseMoved", cx, cy)
                result["tooltip"] = b.evaluate(
                    "(() => { const t = document.getElementById('tooltip');"
                    " return t.style.display === 'block' ? t.textContent : null; })()"
                )
                # A click at a quarter of the way: what was live then.
                qx = box["x"] + box["w"] * 0.25
                b.mouse("mouseMoved", qx, cy)
                b.mouse("mousePressed", qx, cy, "left", 1)
                b.mouse("mouseReleased", qx, cy, "left", 1)
                result["clicked_live_head"] = b.evaluate(
                    "document.querySelector('#live .head').textContent"
                )
                # A drag over the middle fifth: a zoom.
                before = result["drawn"]["allocated_points"]
                a, z = box["x"] + box["w"] * 0.4, box["x"] + box["w"] * 0.6
                b.mouse("mousePressed", a, cy, "left", 1)
                b.mouse("mouseMoved", (a + z) / 2, cy, "left")
                b.mouse("mouseMoved", z, cy, "left")
                b.mouse("mouseReleased", z, cy, "left", 1)
                after = b.evaluate(
                    "document.getElementById('allocated-line').getAttribute('points').split(' ').length"
                )
                result["zoom_points"] = [before, after]
                b.evaluate("document.getElementById('zoom-reset').click()")
                # The bands by site, and how long one redraw takes.
                result["redraw_ms"] = b.evaluate(
                    "(() => { const t0 = performance.now();"
                    " document.getElementById('stack-site').click();"
                    " return performance.now() - t0; })()"
                )
                result["site_bands"] = b.evaluate(
                    "Array.from(document.querySelectorAll('#bands polygon')).map((p) => p.getAttribute('data-series'))"
                )
                result["site_legend"] = b.evaluate(
                    "Array.from(document.querySelectorAll('#timeline-legend .item')).map((e) => e.textContent)"
                )
                b.evaluate("document.getElementById('stack-category').click()")
            # The icicle zooms into a node it is clicked on.
            result["icicle_zoom"] = b.evaluate(
                "(() => { const n = document.querySelectorAll('#icicle .node')[1];"
                " if (!n) return null; n.click();"
                " return document.getElementById('icicle-crumbs').textContent; })()"
            )
            # Dark.
            b.evaluate("document.getElementById('theme').click()")
            result["dark_theme"] = b.evaluate("document.documentElement.getAttribute('data-theme')")
            result["dark_background"] = b.evaluate("getComputedStyle(document.body).backgroundColor")
            screenshot(b, os.path.join(out_dir, "dark.png"))
            # Printed to PDF.
            pdf = base64.b64decode(b.send("Page.printToPDF", {"printBackground": True}, timeout=60)["data"])
            with open(os.path.join(out_dir, "printed.pdf"), "wb") as f:
                f.write(pdf)
            result["pdf_bytes"] = len(pdf)
            result["pdf_pages"] = pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages")
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
