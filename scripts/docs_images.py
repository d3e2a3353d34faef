"""Retakes docs/long-runs.md's two pictures of a long run, from the real programs: the live view
(`memprof run --live` in a tmux window, captured with its colours and drawn as the terminal
shows it) and the HTML report's timeline and "Growing" section, both of
fixtures/growing_steps.py's 128 KiB-a-step leak, in headless Chromium.

    python3 scripts/docs_images.py [--memprof target/release/memprof] [--out docs/images]

Needs tmux and Chromium (/usr/bin/chromium, as scripts/test.sh installs it). Prints what it wrote.
"""

import argparse
import base64
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "browser"))
from page_check import Browser, load  # noqa: E402

FIXTURE = os.path.join(ROOT, "fixtures", "growing_steps.py")
COLUMNS, ROWS = 118, 38

# xterm's 16 colours, as a dark terminal theme draws them.
PALETTE = [
    "#1e1e1e", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
    "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
]
FOREGROUND, BACKGROUND = "#d4d4d4", "#1e1e1e"


def colour_256(n):
    if n < 16:
        return PALETTE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    grey = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (grey, grey, grey)


# SGR codes that set an attribute, and those that clear attributes.
SETS = {1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "reverse"}
CLEARS = {22: ("bold", "dim"), 23: ("italic",), 24: ("underline",), 27: ("reverse",)}


class Style:
    def __init__(self):
        self.fg = self.bg = None
        self.bold = self.dim = self.italic = self.underline = self.reverse = False

    def apply(self, codes):
        """One SGR sequence's parameters."""
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                self.__init__()
            elif c in SETS:
                setattr(self, SETS[c], True)
            elif c in CLEARS:
                for name in CLEARS[c]:
                    setattr(self, name, False)
            elif 30 <= c <= 37:
                self.fg = PALETTE[c - 30]
            elif 90 <= c <= 97:
                self.fg = PALETTE[c - 90 + 8]
            elif 40 <= c <= 47:
                self.bg = PALETTE[c - 40]
            elif 100 <= c <= 107:
                self.bg = PALETTE[c - 100 + 8]
            elif c == 39:
                self.fg = None
            elif c == 49:
                self.bg = None
            elif c in (38, 48) and i + 1 < len(codes):
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    value, i = colour_256(codes[i + 2]), i + 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    value, i = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5]), i + 4
                else:
                    value = None
                if c == 38:
                    self.fg = value
                else:
                    self.bg = value
            i += 1

    def css(self):
        fg, bg = self.fg or FOREGROUND, self.bg
        if self.reverse:
            fg, bg = bg or BACKGROUND, fg
        parts = ["color:" + fg]
        if bg:
            parts.append("background:" + bg)
        if self.bold:
            parts.append("font-weight:bold")
        if self.dim:
            parts.append("opacity:0.7")
        if self.italic:
            parts.append("font-style:italic")
        if self.underline:
            parts.append("text-decoration:underline")
        return ";".join(parts)


SGR = re.compile(r"\x1b\[([0-9;]*)m")


def ansi_to_html(text):
    """tmux capture-pane -e's text (SGR sequences only) as HTML spans."""
    style, out, pos = Style(), [], 0
    for m in SGR.finditer(text):
        if m.start() > pos:
            out.append('<span style="%s">%s</span>' % (style.css(), html.escape(text[pos:m.start()])))
        style.apply([int(p) if p else 0 for p in m.group(1).split(";")])
        pos = m.end()
    out.append('<span style="%s">%s</span>' % (style.css(), html.escape(text[pos:])))
    return "".join(out)


def terminal_page(text):
    return """<!doctype html><meta charset="utf-8"><style>
body { margin: 0; background: #fff; }
pre { display: inline-block; margin: 0; padding: 14px 16px; background: %s; color: %s;
      font: 13px/1.2 "DejaVu Sans Mono", monospace; border-radius: 6px; }
</style><body data-ready="1"><pre id="terminal">%s</pre>""" % (BACKGROUND, FOREGROUND, ansi_to_html(text))


def element_shot(b, selector, path, bottom=None):
    """A PNG of the element (to the top of `bottom`'s element, if given)."""
    box = b.evaluate(
        "(() => { const r = document.querySelector(%r).getBoundingClientRect();"
        " return {x: r.x + scrollX, y: r.y + scrollY, w: r.width, h: r.height}; })()" % selector
    )
    height = box["h"]
    if bottom:
        end = b.evaluate(
            "(() => { const r = document.querySelector(%r).getBoundingClientRect();"
            " return r.y + r.height + scrollY; })()" % bottom
        )
        height = end - box["y"]
    metrics = b.send("Page.getLayoutMetrics")
    b.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": int(metrics["cssContentSize"]["height"]) + 1,
         "deviceScaleFactor": 1, "mobile": False},
    )
    clip = {"x": box["x"], "y": box["y"], "width": box["w"], "height": height, "scale": 1}
    shot = b.send("Page.captureScreenshot", {"format": "png", "clip": clip})
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))


def tmux(socket, *args):
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True)


def live_view_capture(memprof, work):
    """The live view of the leak, 16 steps in, as tmux shows it (with its colours)."""
    socket = "memprof-docs-%d" % os.getpid()
    # A copy of the fixture run from its folder, which the view names as a user's own script.
    command = "cd %s && %s --device cpu run --live growing_steps.py leak 60 --say --pace 0.4" % (
        work, memprof)
    tmux(socket, "new-session", "-d", "-s", "t", "-x", str(COLUMNS), "-y", str(ROWS), command)
    try:
        deadline = time.monotonic() + 120
        while True:
            screen = tmux(socket, "capture-pane", "-p", "-t", "t").stdout
            if "step 16 loss" in screen and "growing at each" in screen:
                break
            if time.monotonic() > deadline:
                raise SystemExit("the live view did not show the growth in 120 s:\n" + screen)
            time.sleep(0.2)
        time.sleep(1.2)  # the view's next redraw, after the line just printed
        screen = tmux(socket, "capture-pane", "-p", "-e", "-t", "t").stdout
        return screen.strip("\n")
    finally:
        tmux(socket, "kill-server")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--memprof", default=os.path.join(ROOT, "target", "release", "memprof"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "images"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    memprof = os.path.abspath(args.memprof)
    for tool in ("tmux", args.chromium, memprof):
        if shutil.which(tool) is None:
            raise SystemExit("docs_images: %s is needed (scripts/test.sh installs tmux and chromium)" % tool)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        shutil.copy(FIXTURE, os.path.join(work, "growing_steps.py"))
        screen = live_view_capture(memprof, work)
        with open(os.path.join(work, "live.html"), "w") as f:
            f.write(terminal_page(screen))
        report = os.path.join(work, "growing.html")
        subprocess.run([memprof, "--device", "cpu", "run", "-o", "growing.html", "growing_steps.py",
                        "leak", "25"], check=True, cwd=work, stdout=subprocess.DEVNULL)
        with tempfile.TemporaryDirectory() as profile:
            b = Browser(args.chromium, profile)
            try:
                result = {}
                load(b, "file://" + os.path.join(work, "live.html"), result)
                live_png = os.path.join(args.out, "live-view-cpu.png")
                element_shot(b, "#terminal", live_png)
                load(b, "file://" + report, result)
                # The timeline stacked by site, where the growing site has its band; the page's
                # sections between it and "Growing" (the peak by stack and by site) left out.
                b.evaluate(
                    "(() => { for (const e of document.querySelectorAll('button'))"
                    " if (e.textContent.trim() === 'top sites') e.click();"
                    " for (const id of ['stack', 'sites'])"
                    " document.getElementById(id).style.display = 'none'; })()"
                )
                b.pump(0.5)
                page_png = os.path.join(args.out, "report-growing-cpu.png")
                element_shot(b, "body", page_png, bottom="#growing")
            finally:
                b.close()
    print(live_png)
    print(page_png)


if __name__ == "__main__":
    main()
