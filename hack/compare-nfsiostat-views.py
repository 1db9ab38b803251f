#!/usr/bin/env python3
"""Compare nfstune stats --view attr,dir,page with nfs-utils' nfsiostat -a, -d and -p.

Usage: compare-nfsiostat-views.py SAMPLES_DIR NFSTUNE_BINARY WORKDIR

For every NFS entry of every SAMPLES_DIR/*.mountstats (saved /proc/self/mountstats files),
the entry alone is written to WORKDIR/<sample>/<n>/proc/self/mountstats, then:
  * nfsiostat -a, -d and -p run on it in a private mount namespace whose /proc is that
    directory (nfsiostat reads only /proc/self/mountstats; this needs root and unshare);
  * nfstune stats --file <that file> --view all -o json runs on the same bytes.
Both report since mount (over the entry's age), so the figures must agree:
  -a  VFS opens, inoderevalidates, page cache and attribute cache invalidations
  -d  open operations, dentry revalidates, vfs lookups, LOOKUPs, getdents, READDIRs
  -p  nfs_readpage() calls and pages, nfs_readpages() calls and pages, pages per call,
      nfs_updatepage() calls, nfs_writepage() and nfs_writepages() calls and pages, pages
      per call, congestion waits
and, for each view's operations (GETATTR, ACCESS; LOOKUP, READDIR, READDIRPLUS; READ,
WRITE): ops/s, kB/s, kB/op, retrans, avg RTT, avg exe, avg queue, errors. nfsiostat
prints three decimals (one for pages per call): a figure matches when it rounds to the
printed value.

Differences that are explained, not counted as mismatches (status EXPLAINED):
  * nfsiostat prints negative retransmissions when an operation has fewer transmissions
    than calls; nfstune counts them as 0;
  * nfsiostat takes a mount of age 0 as 1 s old; nfstune reports no rates over 0 s.
Not compared: an entry whose opts: value is wrapped onto the next line (a quirk of some
public copies, not kernel output: nfstune drops it with a warning), and a view nfsiostat
itself fails on (-d raises KeyError on an entry without a LOOKUP row).
The header line (ops/s, rpc bklog) is compared by compare.sh in the samples directory.

Exit status: 0 when every figure matches, 1 on a mismatch, 2 when the comparison could not
run. The last line printed is the summary.
"""

import json
import os
import re
import shutil
import subprocess
import sys

NFSIOSTAT = shutil.which("nfsiostat") or "/usr/sbin/nfsiostat"
VIEW_OPS = {"-a": ["GETATTR", "ACCESS"], "-d": ["LOOKUP", "READDIR", "READDIRPLUS"], "-p": ["READ", "WRITE"]}
F3 = r"-?\d+\.\d{3}"
ROW = re.compile(r"^\s*(?P<opss>%s)\s*(?P<kbs>%s)\s*(?P<kbop>%s)\s*(?P<rt>-?\d+) \([^)]*%%\)"
                 r"\s*(?P<rtt>%s)\s*(?P<exe>%s)\s*(?P<q>%s)(?:\s*(?P<err>-?\d+) \([^)]*%%\))?\s*$"
                 % (F3, F3, F3, F3, F3, F3))

# nfsiostat's view lines: a regular expression and the figures it gives, in order.
VIEW_LINES = {
    "-a": [
        (r"^(\d+) VFS opens$", ["attr.vfs_opens"]),
        (r"^(\d+) inoderevalidates \(forced GETATTRs\)$", ["attr.inode_revalidates"]),
        (r"^(\d+) page cache invalidations$", ["attr.page_cache_invalidations"]),
        (r"^(\d+) attribute cache invalidations$", ["attr.attr_cache_invalidations"]),
    ],
    "-d": [
        (r"^(\d+) open operations \(pathname lookups\)$", ["dir.vfs_opens"]),
        (r"^(\d+) dentry revalidates and (\d+) vfs lookup requests$", ["dir.dentry_revalidates", "dir.vfs_lookups"]),
        (r"^resulted in (\d+) LOOKUPs on the wire$", ["dir.lookup_ops"]),
        (r"^(\d+) vfs getdents calls resulted in (\d+) READDIRs on the wire$", ["dir.vfs_getdents", "dir.readdir_ops"]),
    ],
    "-p": [
        (r"^(\d+) nfs_readpage\(\) calls read (-?\d+) pages$", ["page.readpage_calls", "page.readpage_calls"]),
        (r"^(\d+) nfs_readpages\(\) calls read (-?\d+) pages$", ["page.readpages_calls", "page.readpages_pages"]),
        (r"^(\d+) nfs_updatepage\(\) calls$", ["page.updatepage_calls"]),
        (r"^(\d+) nfs_writepage\(\) calls wrote (\d+) pages$", ["page.writepage_calls", "page.writepage_calls"]),
        (r"^(\d+) nfs_writepages\(\) calls wrote (-?\d+) pages$", ["page.writepages_calls", "page.writepages_pages"]),
        (r"^(\d+) congestion waits$", ["page.congestion_waits"]),
    ],
}


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def split_entries(text):
    """The NFS entries of a mountstats file, each as its lines (cut at 'device' lines)."""
    entries, cur = [], None
    for line in text.splitlines(keepends=True):
        f = line.split()
        if f and f[0] == "device":
            cur = [line]
            entries.append(cur)
        elif cur is not None:
            cur.append(line)
    out = []
    for lines in entries:
        f = lines[0].split()
        if len(f) > 8 and f[7] in ("nfs", "nfs4"):
            out.append({"mp": f[4], "text": "".join(lines), "age": age_of(lines), "opts_wrapped": opts_wrapped(lines)})
    return out


def opts_wrapped(lines):
    """Whether the opts: value is on the next line: a quirk of some public copies, not
    kernel output, which procfs (and so nfstune) rejects."""
    for ln in lines:
        w = ln.split()
        if w and w[0] == "opts:":
            return len(w) == 1
    return False


def age_of(lines):
    for ln in lines:
        w = ln.split()
        if len(w) > 1 and w[0] == "age:":
            return int(w[1])
    return None


def nfsiostat(procdir, flag):
    rc, out, err = run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        'mount --bind "$1" /proc && exec python3 "$2" "$3"', "sh", procdir, NFSIOSTAT, flag])
    if rc != 0 or " mounted on " not in out:
        return None, (err.strip().splitlines() or ["rc=%d" % rc])[-1]
    return out, None


def parse_nfsiostat(out, flag):
    """Figures of one nfsiostat view: {"attr.vfs_opens": 3, ..., "op.GETATTR.opss": 0.1, ...}."""
    got = {}
    lines = [ln.rstrip("\n") for ln in out.splitlines()]
    per_call = []
    for i, ln in enumerate(lines):
        s = ln.strip()
        m = re.match(r"^([a-z_0-9]+):\s+ops/s", ln)
        if m and i + 1 < len(lines):
            v = ROW.match(lines[i + 1])
            if not v:
                raise ValueError("unparsable nfsiostat row: %r" % lines[i + 1])
            op = m.group(1).upper()
            for k in ("opss", "kbs", "kbop", "rtt", "exe", "q"):
                got["op.%s.%s" % (op, k)] = float(v[k])
            got["op.%s.retrans" % op] = int(v["rt"])
            if v["err"] is not None:
                got["op.%s.errors" % op] = int(v["err"])
            continue
        for pattern, names in VIEW_LINES[flag]:
            m = re.match(pattern, s)
            if m:
                for name, value in zip(names, m.groups()):
                    got[name] = int(value)
        m = re.match(r"^\((-?[\d.]+) pages per call\)$", s)
        if m:
            per_call.append(float(m.group(1)))
    if flag == "-p":
        # The first "(x pages per call)" follows the readpages line, the second the
        # writepages line; each is printed only when there were calls.
        for key, calls in (("page.pages_per_readpages_call", "page.readpages_calls"),
                           ("page.pages_per_writepages_call", "page.writepages_calls")):
            if got.get(calls):
                got[key] = per_call.pop(0)
        got.setdefault("page.congestion_waits", 0)
    return got


def nfstune_figures(rep):
    """The same figures from one mount of nfstune stats --view all -o json."""
    got = {}
    for view in ("attr", "dir", "page"):
        for k, v in (rep.get(view) or {}).items():
            got["%s.%s" % (view, k)] = v
    secs = rep["interval_seconds"]
    for op in rep["ops"]:
        name = op["operation"]
        got["op.%s.opss" % name] = op["ops_per_sec"]
        got["op.%s.kbs" % name] = op["kb_per_op"] * op["ops"] / secs if secs else 0.0
        got["op.%s.kbop" % name] = op["kb_per_op"]
        got["op.%s.rtt" % name] = op["avg_rtt_ms"]
        got["op.%s.exe" % name] = op["avg_exe_ms"]
        got["op.%s.q" % name] = op["avg_queue_ms"]
        got["op.%s.retrans" % name] = op["retrans"]
        got["op.%s.errors" % name] = op["errors"]
    return got


def matches(want, got, decimals):
    if isinstance(want, int) and isinstance(got, int):
        return want == got
    # nfsiostat rounds to `decimals` places; allow a relative error for huge values (a
    # wrapped cumulative time of 1.8e19 ms loses digits in a float).
    return abs(float(got) - float(want)) <= 0.5 * 10 ** -decimals + 1e-9 + 1e-12 * abs(float(want))


def compare_entry(binary, d, e, counts, report):
    os.makedirs(os.path.join(d, "proc/self"), exist_ok=True)
    path = os.path.join(d, "proc/self/mountstats")
    with open(path, "w") as f:
        f.write(e["text"] if e["text"].endswith("\n") else e["text"] + "\n")
    rc, out, err = run([binary, "stats", "--file", path, "--view", "all", "-o", "json"])
    if rc != 0 and e["opts_wrapped"]:
        report.append("NOT COMPARED %s: the sample's opts: value is wrapped onto the next line (not kernel "
                      "output); nfstune drops the entry with a warning" % e["mp"])
        counts["not_compared"] += 1
        return
    if rc != 0:
        report.append("%s: nfstune stats failed: %s" % (e["mp"], err.strip()))
        counts["errors"] += 1
        return
    mounts = json.loads(out)["mounts"]
    if len(mounts) != 1:
        report.append("%s: nfstune shows %d mounts, want 1" % (e["mp"], len(mounts)))
        counts["errors"] += 1
        return
    mine = nfstune_figures(mounts[0])
    for flag, ops in VIEW_OPS.items():
        out, err = nfsiostat(os.path.join(d, "proc"), flag)
        if out is None:
            report.append("NOT COMPARED %s %s: nfsiostat failed: %s" % (e["mp"], flag, err))
            counts["nfsiostat_failed"] += 1
            continue
        theirs = parse_nfsiostat(out, flag)
        for name in sorted(theirs):
            want = theirs[name]
            if name.startswith("op."):
                op, fig = name.split(".")[1:]
                if op not in ops:
                    continue
                got = mine.get(name, 0 if fig in ("retrans", "errors") else 0.0)
            else:
                got = mine.get(name)
            decimals = 1 if name.startswith("page.pages_per") else 3
            status = "OK" if got is not None and matches(want, got, decimals) else "MISMATCH"
            if status == "MISMATCH" and name.endswith(".retrans") and isinstance(want, int) and want < 0 and got == 0:
                status = "EXPLAINED"
            if status == "MISMATCH" and e["age"] == 0 and name.split(".")[-1] in ("opss", "kbs") and got == 0:
                status = "EXPLAINED"
            counts[status] += 1
            report.append("%-9s %s %s %s: nfsiostat %s, nfstune %s" % (status, e["mp"], flag, name, want, got))


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        print("SUMMARY: usage: compare-nfsiostat-views.py SAMPLES_DIR NFSTUNE_BINARY WORKDIR")
        return 2
    samples, binary, work = sys.argv[1:]
    files = sorted(f for f in os.listdir(samples) if f.endswith(".mountstats"))
    if not files:
        print("SUMMARY: no *.mountstats in %s" % samples)
        return 2
    if os.geteuid() != 0 or not shutil.which("unshare") or not os.path.exists(NFSIOSTAT):
        print("SUMMARY: needs root, unshare and nfsiostat (Debian: nfs-common) to run nfsiostat on a sample")
        return 2
    total = {"OK": 0, "EXPLAINED": 0, "MISMATCH": 0, "errors": 0, "nfsiostat_failed": 0, "not_compared": 0}
    for name in files:
        with open(os.path.join(samples, name)) as f:
            entries = split_entries(f.read())
        counts = dict.fromkeys(total, 0)
        report = []
        for n, e in enumerate(entries):
            compare_entry(binary, os.path.join(work, name, str(n)), e, counts, report)
        with open(os.path.join(work, name + ".report.txt"), "w") as f:
            f.write("\n".join(report) + "\n")
        for line in report:
            if not line.startswith(("OK", "EXPLAINED")):
                print("%s: %s" % (name, line))
        print("%-40s %2d NFS entries: %4d figures, %4d OK, %d explained, %d mismatches, %d nfstune errors; "
              "not compared: %d entries, %d nfsiostat runs"
              % (name, len(entries), counts["OK"] + counts["EXPLAINED"] + counts["MISMATCH"], counts["OK"],
                 counts["EXPLAINED"], counts["MISMATCH"], counts["errors"], counts["not_compared"],
                 counts["nfsiostat_failed"]))
        for k in total:
            total[k] += counts[k]
    figures = total["OK"] + total["EXPLAINED"] + total["MISMATCH"]
    print("SUMMARY: %d samples, %d figures compared with nfsiostat -a/-d/-p: %d match, %d explained, %d mismatches, "
          "%d nfstune errors; not compared: %d entries nfstune drops (opts: wrapped, not kernel output), "
          "%d nfsiostat runs that failed" % (len(files), figures, total["OK"], total["EXPLAINED"], total["MISMATCH"],
                                             total["errors"], total["not_compared"], total["nfsiostat_failed"]))
    if total["MISMATCH"] or total["errors"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
