# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0
"""Checks the hook's patch table (inferprof_hook.points) against every
engine release in RELEASES, read from its source with ast (nothing is
installed or imported), and writes the table in docs/compatibility.md.

  python3 integrations/python/tools/hook_compat.py            # rewrite the docs table
  python3 integrations/python/tools/hook_compat.py --check    # fail if it is stale
  python3 integrations/python/tools/hook_compat.py --fakes    # the fakes against the release they cite
  python3 integrations/python/tools/hook_compat.py --new      # releases on PyPI not in RELEASES

Sources come from PyPI through releases.py and are cached under
~/.cache/inferprof/<engine>-releases/. --check also fails when the newest
release in RELEASES would leave the hook off, and --fakes when a fake's
class differs from the cited release in what the hook reads: a field or
method one has and the other lacks, a wrapped method's parameters, or the
outer type of a field (a list where the release has one object).
"""

import argparse
import difflib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PYROOT))
sys.path[:0] = [HERE, PYROOT]

import releases  # noqa: E402
import srcindex  # noqa: E402
from inferprof_hook import points  # noqa: E402

# Every final release from the first with the V1 engine (0.7.0, opt-in
# through VLLM_USE_V1=1; the default from 0.8.0) to the newest on PyPI
# when the table was last written. --new lists what came out since.
RELEASES = {
    "vllm": (
        "0.7.0", "0.7.1", "0.7.2", "0.7.3", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5",
        "0.8.5.post1", "0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.1.1", "0.10.2",
        "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.13.0", "0.14.0", "0.14.1", "0.15.0", "0.15.1",
        "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1",
        "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0",
        "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0",
    ),
    # 0.5.x, the releases of the Scheduler.run_batch/process_batch_result
    # loop the hook was written on, to the newest on PyPI.
    "sglang": (
        "0.5.1", "0.5.1.post1", "0.5.1.post2", "0.5.1.post3", "0.5.2", "0.5.3", "0.5.3.post1",
        "0.5.3.post2", "0.5.3.post3", "0.5.4", "0.5.4.post1", "0.5.4.post2", "0.5.4.post3", "0.5.5",
        "0.5.5.post1", "0.5.5.post2", "0.5.5.post3", "0.5.6", "0.5.6.post1", "0.5.6.post2", "0.5.7",
        "0.5.8", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1",
        "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18",
        "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23",
    ),
}
TABLES = {"vllm": points.VLLM, "sglang": points.SGLANG}
NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
DOC = os.path.join(REPO, "docs", "compatibility.md")
FAKES = os.path.join(PYROOT, "tests", "fakes")
# A fake module cites the release it was checked against in this form.
CITE = re.compile(r"Checked against (vLLM|SGLang) (\d+(?:\.\d+)+(?:\.post\d+)?)")

# Methods the hook wraps or calls through, whose whole positional
# parameter list a fake must share with the release (constructors differ
# on purpose: the fakes take test knobs).
WRAPPED = {"schedule", "update_from_output", "preprocess_add_request", "execute_model", "sample_tokens", "step",
           "run_batch", "process_batch_result", "update_running_batch", "get_next_batch_to_run",
           "launch_batch_sample_if_needed"}


def find(index, point):
    """(module, ClassInfo) of the point's class in a source tree, or None."""
    for m in point.modules():
        c = index.cls(m, point.cls)
        if c is not None:
            return m, c
    return None


def problem(index, point):
    """What a release's source lacks of point; None when it has it."""
    if point.kind == points.FUNC:
        ok = any(index.func(m, point.name) for m in point.modules())
        return None if ok else point.label()
    found = find(index, point)
    if found is None:
        return "%s (in %s)" % (point.cls, " or ".join(point.modules()))
    _, c = found
    names = point.name.split("|")
    if point.kind == points.METHOD:
        for n in names:
            got = c.method(n)
            if got is not None:
                break
        else:
            return point.label()
        if point.params and tuple(got[:len(point.params)]) != point.params:
            return "%s (it takes (self, %s))" % (point.describe(), ", ".join(got))
        return None
    if point.kind == points.FIELD:
        # A plain class's instance attributes count too: the hook reads them
        # on the instance (at attach time only class-level ones can be seen).
        if any(c.field(n)[0] or c.attr(n) for n in names):
            return None
        return point.label()
    if any(c.attr(n) for n in names):
        return None
    return point.label()


def check_release(engine, version, log):
    """{part: (required, optional, harmless absences)} for one release,
    judged by the rules the hook applies at attach time (points.judge)."""
    try:
        root = releases.fetch(engine, version, log=log)
    except Exception as e:  # no network, no such release: say which, not pip's traceback
        raise SystemExit("hook_compat.py: cannot fetch %s %s into %s: %s: %s" % (
            NAMES[engine], version, releases.release_dir(engine, version), type(e).__name__, e))
    index = srcindex.Index(root)
    out = {}
    table_ = TABLES[engine]
    for part in sorted({p.part for p in table_}):
        if part != "engine" and not any(index.path(m) for p in table_ if p.part == part for m in p.modules()):
            out[part] = None  # a release without that part at all
            continue
        req, opt = points.judge(table_, lambda p: problem(index, p), part)
        notes = ["no `%s` (harmless: %s)" % (why, p.cost) for p in table_
                 if p.part == part and p.required is None for why in [problem(index, p)] if why]
        out[part] = (req, opt, notes)
    return out


def verdict(result, part):
    """("off", "degraded", "yes" or "none" (no such part), what is missing,
    harmless absences)."""
    if part in result and result[part] is None:
        return "none", [], []
    req, opt, notes = result.get(part, ([], [], []))
    if req:
        return "off", req, notes
    if opt:
        return "degraded", opt, notes
    return "yes", [], notes


# The columns after the engine's own, by part of the patch table.
PARTS = (("worker", "executor workers' launch marks"), ("thread", "forward thread's launch windows"))


def table(engine, results):
    """The markdown for the docs: consecutive releases with the same result
    share a row."""
    name = NAMES[engine]
    parts = [(k, t) for k, t in PARTS if any(p.part == k for p in TABLES[engine])]
    rows = []
    for v in RELEASES[engine]:
        key = tuple(verdict(results[v], k) for k in ["engine"] + [k for k, _ in parts])
        if rows and rows[-1][1] == key:
            rows[-1][0].append(v)
        else:
            rows.append(([v], key))
    lines = ["| %s releases | engine step hook | what the hook lacks there |%s" % (
        name, "".join(" %s |" % t for _, t in parts)), "|---|---|---|" + "---|" * len(parts)]
    for vs, ((ev, ew, en), *others) in rows:
        span = vs[0] if len(vs) == 1 else "%s to %s (%d releases)" % (vs[0], vs[-1], len(vs))
        what = "; ".join(["`%s`" % w for w in ew] + list(en)) or "nothing"
        cells = ["%s: %s" % (v, "; ".join("`%s`" % w for w in ws)) if ws else v for v, ws, _ in others]
        lines.append("| %s | %s | %s |%s" % (span, ev, what, "".join(" %s |" % c for c in cells)))
    return "\n".join(lines) + "\n"


BEGIN = "<!-- hook_compat.py: generated, do not edit (make hook-compat-docs) -->\n"
END = "<!-- end of hook_compat.py -->\n"


def render(results_by_engine):
    return BEGIN + "\n".join(table(e, r) for e, r in results_by_engine.items()) + END


def splice(doc, block):
    if BEGIN in doc and END in doc:
        a = doc.index(BEGIN)
        b = doc.index(END) + len(END)
        return doc[:a] + block + doc[b:]
    raise SystemExit("hook_compat.py: %s has no generated section (the line %r)" % (DOC, BEGIN.strip()))


def check_fakes(log):
    """Each fake module that defines a class of the table cites a release;
    its classes must agree with that release on what the hook reads."""
    fakes = srcindex.Index(FAKES)
    errors, cited = [], {}
    for engine, table_ in TABLES.items():
        for p in table_:
            found = find(fakes, p)
            if found is None:
                hits = fakes.find(p.cls)
                if not hits:
                    continue
                found = hits[0]
            mod, fc = found
            path = fakes.path(mod)
            with open(path) as f:
                m = CITE.search(f.read())
            rel = os.path.relpath(path, REPO)
            if m is None or m.group(1) != NAMES[engine]:
                errors.append("%s: defines %s but cites no %s release (%r)" % (
                    rel, p.cls, NAMES[engine], "Checked against %s X.Y.Z" % NAMES[engine]))
                continue
            version = m.group(2)
            cited.setdefault((rel, version), set()).add(p.cls)
            real = srcindex.Index(releases.fetch(engine, version, log=log))
            rf = find(real, p)
            if rf is None:
                errors.append("%s: %s is not in %s %s" % (rel, p.cls, NAMES[engine], version))
                continue
            _, rc = rf
            for e in _differ(p, fc, rc):
                errors.append("%s: %s: %s, %s %s %s" % (rel, p.label(), e[0], NAMES[engine], version, e[1]))
    for (rel, version), classes in sorted(cited.items()):
        log("%s: %s checked against %s" % (rel, ", ".join(sorted(classes)), version))
    return errors


def _differ(p, fake, real):
    """How a fake class and the release's differ on point p: (fake, real)."""
    names = p.name.split("|")
    if p.kind == points.METHOD:
        for n in names:
            fm, rm = fake.method(n), real.method(n)
            if (fm is None) != (rm is None):
                yield (("the fake has %s" % n) if rm is None else ("the fake lacks %s" % n),
                       "has it" if rm is not None else "does not")
            elif fm is not None and (n in WRAPPED or p.params) and n != "__init__":
                want = tuple(rm) if n in WRAPPED else p.params
                have = tuple(fm) if n in WRAPPED else tuple(fm[:len(p.params)])
                if have != want:
                    yield ("the fake takes (%s)" % ", ".join(("self",) + tuple(fm)),
                           "takes (%s)" % ", ".join(("self",) + tuple(rm)))
        return
    for n in names:
        if p.kind == points.FIELD:
            ff, fs = fake.field(n)
            rf, rs = real.field(n)
            fa, ra = ff or fake.attr(n), rf or real.attr(n)
        else:
            fa, ra, fs, rs = fake.attr(n), real.attr(n), "", ""
        if fa != ra:
            yield (("the fake has %s" % n) if fa else ("the fake lacks %s" % n),
                   "has it" if ra else "does not")
        elif fs and rs and fs != rs and fs not in ("Any", "object"):
            yield ("the fake's %s is %s" % (n, fs), "has %s" % rs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if docs/compatibility.md is stale")
    ap.add_argument("--fakes", action="store_true", help="check the fakes against the release each cites")
    ap.add_argument("--new", action="store_true", help="list releases on PyPI that RELEASES lacks")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)

    def log(msg):
        if not args.quiet:
            print(msg, file=sys.stderr)

    if args.new:
        from pip._vendor.packaging.version import Version

        for engine, vs in RELEASES.items():
            newest = Version(vs[-1])
            new = [v for v in releases.pip().versions(releases.KEEP[engine][0]) if Version(v) > newest]
            print("%s: %s" % (engine, ", ".join(new) if new else "none newer than " + vs[-1]))
        return 0
    if args.fakes:
        errors = check_fakes(log)
        for e in errors:
            print("hook_compat.py --fakes: " + e, file=sys.stderr)
        return 1 if errors else 0

    results = {}
    for engine, vs in RELEASES.items():
        results[engine] = {v: check_release(engine, v, log) for v in vs}
        for v in vs:
            ev, ew, _ = verdict(results[engine][v], "engine")
            log("%s %s: %s%s" % (engine, v, ev, (": " + "; ".join(ew)) if ew else ""))
    with open(DOC) as f:
        doc = f.read()
    new = splice(doc, render(results))
    status = 0
    for engine, vs in RELEASES.items():
        if verdict(results[engine][vs[-1]], "engine")[0] == "off":
            print("hook_compat.py: the hook stays off on %s %s, the newest release in the table" % (
                NAMES[engine], vs[-1]), file=sys.stderr)
            status = 1
    if args.check:
        if new != doc:
            sys.stderr.writelines(difflib.unified_diff(
                doc.splitlines(True), new.splitlines(True), "docs/compatibility.md", "generated"))
            print("hook_compat.py --check: docs/compatibility.md is stale; run make hook-compat-docs",
                  file=sys.stderr)
            return 1
        return status
    if new != doc:
        with open(DOC, "w") as f:
            f.write(new)
        log("wrote " + os.path.relpath(DOC, REPO))
    return status


if __name__ == "__main__":
    sys.exit(main())
