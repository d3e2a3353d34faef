"""memprof's pytest plugin (the wheel's `pytest11` entry point): GPU memory limits per test.

    @pytest.mark.limit_device_memory("1.5 GiB")
    def test_train_step(): ...

fails a test whose device peak (the most that what the test allocated held at once: the current
CUDA device, or CPU tensors when there is no GPU) exceeds the limit; the failure says where the
peak came from. What earlier tests left allocated (a cached model) neither counts nor hides what
the test allocates itself: its verdict is the same alone or in the suite. `--memprof-limit SIZE` applies a limit to every test
without its own; `--memprof-report DIR` writes each measured test's report (JSON) there. Tests
without a limit, with neither option, are not measured and pay nothing."""
import os
import re

import pytest

MARK = "limit_device_memory"
# SI units are powers of 1000 and binary ones powers of 1024, as `memprof run --max` reads them.
_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value):
    """Bytes of a limit: an int, or "1.5 GiB", "512 MB", "1000000"."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _SIZE.match(str(value))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise pytest.UsageError(
            "memprof: %r is not a size: write it as 1.5 GiB, 512 MiB, 2 GB or a number of bytes"
            % (value,))
    return int(float(m.group(1)) * _UNITS[unit])


def format_size(n):
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= size:
            return "%.2f %s" % (n / size, unit)
    return "%d B" % n


def pytest_addoption(parser):
    group = parser.getgroup("memprof", "GPU memory limits per test (memprof)")
    group.addoption(
        "--memprof-limit", metavar="SIZE", default=None,
        help="fail every test whose device peak exceeds SIZE (1.5 GiB, 512 MB, bytes); "
             "@pytest.mark.limit_device_memory(SIZE) sets a test's own")
    group.addoption(
        "--memprof-report", metavar="DIR", default=None,
        help="write each measured test's memprof report (JSON) into DIR; with it, every test "
             "is measured")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "%s(size): fail the test when its device peak (the most that what it allocated held at "
        "once) exceeds size, e.g. \"1.5 GiB\" (memprof)" % MARK)
    limit = config.getoption("memprof_limit")
    if limit is not None:
        parse_size(limit)  # a bad size fails the session at once, not every test


def _limit(item):
    """(bytes, where the limit came from) for this test, or (None, None)."""
    mark = item.get_closest_marker(MARK)
    if mark is not None:
        if len(mark.args) != 1 or mark.kwargs:
            raise pytest.UsageError(
                "memprof: @pytest.mark.%s takes one size, as in @pytest.mark.%s(\"1.5 GiB\"), "
                "in %s" % (MARK, MARK, item.nodeid))
        return parse_size(mark.args[0]), "@pytest.mark.%s(%r)" % (MARK, mark.args[0])
    option = item.config.getoption("memprof_limit")
    if option is not None:
        return parse_size(option), "--memprof-limit %s" % option
    return None, None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    limit, source = _limit(item)
    report_dir = item.config.getoption("memprof_report")
    if limit is None and report_dir is None:
        return (yield)
    from .api import profile

    # The peak's categories need a scan of every live object: only for the saved reports.
    session = profile(label="<test %s>" % item.nodeid, categories=report_dir is not None)
    report = session.__enter__()
    try:
        result = yield
    except BaseException as e:
        session.__exit__(type(e), e, e.__traceback__)
        _save(report_dir, item, report)
        raise
    session.__exit__(None, None, None)
    _save(report_dir, item, report)
    if limit is not None and report.peak_above_start > limit:
        pytest.fail(_over_limit(item, report, limit, source), pytrace=False)
    return result


def _save(report_dir, item, report):
    if report_dir is None:
        return
    os.makedirs(report_dir, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_") or "test"
    report.save(os.path.join(report_dir, name + ".json"))


def _over_limit(item, report, limit, source):
    peak = report.peak
    device = report.metadata["device"]
    where = device.get("type") or "the device"
    if device.get("index") is not None:
        where = "cuda:%d" % device["index"]
    lines = [
        "%s: device peak %s (%d B) on %s is over its limit of %s (%s)" % (
            item.name, format_size(report.peak_above_start), report.peak_above_start, where,
            format_size(limit), source),
        "(the device's allocated_bytes.all.peak during the test: %s, with %s allocated when it "
        "started)" % (format_size(peak["allocated_bytes"]), format_size(report.allocated_at_start)),
    ]
    reached = peak.get("reached", {}).get("site")
    if reached:
        lines.append("peak reached at %s:%s %s: %s" % (
            os.path.basename(reached["file"]), reached["line"], reached["function"],
            reached.get("source", "").strip()))
    sites = peak.get("sites", [])
    if sites:
        lines.append("what held it:")
        for s in sites[:8]:
            lines.append("  %10s  %s:%s %s: %s" % (
                format_size(s["bytes"]), os.path.basename(s["file"]), s["line"], s["function"],
                s.get("source", "").strip()))
    if peak.get("unseen_bytes"):
        lines.append("  %10s  (live from before the test: not the test's)" % (
            format_size(peak["unseen_bytes"]),))
    return "\n".join(lines)
