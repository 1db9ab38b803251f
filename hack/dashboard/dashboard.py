#!/usr/bin/env python3
"""Draw the Grafana dashboard's panels from a Prometheus, with the dashboard's own queries.

  dashboard.py openmetrics SCRAPEDIR OUT   the agent's /metrics scrapes (one file per scrape,
                                           named by its Unix time in ms) as one OpenMetrics
                                           file for promtool tsdb create-blocks-from openmetrics
  dashboard.py plot URL DASHBOARD START END OUT.png
                                           every panel of DASHBOARD (the JSON model) queried
                                           from the Prometheus at URL from START to END
                                           (Unix seconds), one point every 5 s

Grafana itself is not packaged for Debian, and rendering needs a browser: this draws each
panel's queries (query_range, with Grafana's variables filled in as Grafana would for "All")
into one PNG laid out on the dashboard's own grid, with the panels' legends, units,
thresholds and dashed limit lines. Needs python3-matplotlib.
"""
import gzip
import json
import os
import re
import sys
import urllib.parse
import urllib.request

# Prometheus adds these to every scraped series; the dashboard selects nodes by instance.
TARGET = 'instance="lab-node:9477",job="nfstune"'
SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')


def openmetrics(scrapedir, out):
    """Writes the nfstune series of every scrape, grouped by metric and series as
    OpenMetrics wants them, each sample with its scrape's time."""
    series = {}  # name -> labels -> [(t, value)]
    for f in sorted(os.listdir(scrapedir)):
        if not f.endswith('.prom'):
            continue
        t = int(f[:-5]) / 1000
        with open(os.path.join(scrapedir, f)) as fh:
            for line in fh:
                m = SAMPLE_RE.match(line.rstrip('\n'))
                if not m or not m.group(1).startswith('nfstune_'):
                    continue
                name, labels, value = m.groups()
                labels = TARGET if not labels else labels[1:-1] + ',' + TARGET
                series.setdefault(name, {}).setdefault(labels, []).append((t, value))
    opener = gzip.open if out.endswith('.gz') else open
    with opener(out, 'wt') as w:
        for name in sorted(series):
            for labels in sorted(series[name]):
                for t, value in series[name][labels]:
                    w.write('%s{%s} %s %.3f\n' % (name, labels, value, t))
        w.write('# EOF\n')


def get(url, path, **params):
    with urllib.request.urlopen(url + path + '?' + urllib.parse.urlencode(params), timeout=60) as r:
        body = json.load(r)
    if body.get('status') != 'success':
        raise RuntimeError('%s: %s' % (path, body))
    return body['data']


def fill(expr, scrape, step, span):
    """Grafana's variables with every template variable at All (allValue .*):
    $__rate_interval is max(4 x scrape interval, step + scrape interval)."""
    rate_interval = max(4 * scrape, step + scrape)
    for k, v in (('$__rate_interval', '%ds' % rate_interval), ('$__range', '%ds' % span),
                 ('$instance', '.*'), ('$server', '.*'), ('$device', '.*')):
        expr = expr.replace(k, v)
    return expr


def legend(fmt, metric):
    return re.sub(r'\{\{\s*(\w+)\s*\}\}', lambda m: metric.get(m.group(1), ''), fmt) or str(metric)


UNITS = {
    'Bps': lambda v: human(v, 1024, ['B/s', 'KiB/s', 'MiB/s', 'GiB/s']),
    'bytes': lambda v: human(v, 1024, ['B', 'KiB', 'MiB', 'GiB']),
    's': lambda v: ('%.0f µs' % (v * 1e6)) if 0 < abs(v) < 1e-3 else ('%.3g ms' % (v * 1e3)) if abs(v) < 1 else '%.3g s' % v,
    'percentunit': lambda v: '%.0f%%' % (v * 100),
    'reqps': lambda v: '%.3g req/s' % v,
}


def human(v, base, names):
    i = 0
    while abs(v) >= base and i < len(names) - 1:
        v /= base
        i += 1
    return '%.3g %s' % (v, names[i])


def binary_step(raw):
    """A tick step for byte axes: a power of two of B, KiB, MiB or GiB at or above raw."""
    base = 1
    while raw >= base * 1024 and base < 1024 ** 3:
        base *= 1024
    mult = 1
    while base * mult < raw:
        mult *= 2
    return base * mult


def fmt_unit(unit, v, decimals=None):
    if decimals is not None and unit not in UNITS:
        return '%.*f' % (decimals, v)
    return UNITS.get(unit, lambda x: '%.3g' % x)(v)


def plot(url, dashboard, start, end, out):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator
    import datetime

    with open(dashboard) as f:
        d = json.load(f)
    scrape = step = 5
    span = int(end - start)
    bg, panel_bg, fg, grid = '#111217', '#181b1f', '#ccccdc', '#2c3235'
    colors = ['#73bf69', '#f2cc0c', '#8ab8ff', '#ff780a', '#f2495c', '#5794f2', '#b877d9', '#705da0', '#37872d', '#fade2a']
    plt.rcParams.update({'font.size': 7, 'text.color': fg, 'axes.labelcolor': fg, 'xtick.color': fg,
                         'ytick.color': fg, 'axes.edgecolor': grid, 'font.family': 'DejaVu Sans'})
    rows = max(p['gridPos']['y'] + p['gridPos']['h'] for p in d['panels'])
    unit_h = 0.3  # inches per grid row
    header = 0.7
    W, H = 18.0, rows * unit_h + header
    fig = plt.figure(figsize=(W, H), dpi=90, facecolor=bg)
    t0 = datetime.datetime.fromtimestamp(start, datetime.timezone.utc)
    t1 = datetime.datetime.fromtimestamp(end, datetime.timezone.utc)
    fig.text(0.005, 1 - 0.25 / H, d['title'], fontsize=13, weight='bold', va='top', color=fg)
    fig.text(0.005, 1 - 0.52 / H,
             'Node: All    Server: All    Mount (device): All    %s to %s UTC, lab scrape every %d s, queries as in %s'
             % (t0.strftime('%Y-%m-%d %H:%M:%S'), t1.strftime('%H:%M:%S'), scrape, os.path.basename(dashboard)),
             fontsize=8, va='top', color='#8e8e8e')

    def box(g, pad=0.06):
        x = g['x'] / 24
        w = g['w'] / 24
        top = 1 - (header + g['y'] * unit_h) / H
        h = g['h'] * unit_h / H
        return x, top - h, w, h

    for p in d['panels']:
        g = p['gridPos']
        x, y, w, h = box(g)
        if p['type'] == 'row':
            fig.text(x + 0.003, y + h / 2, p['title'].replace('$instance', 'All').replace('$device', 'All'),
                     fontsize=10, weight='bold', va='center', color=fg)
            continue
        unit = p['fieldConfig']['defaults'].get('unit', 'none')
        results = []
        for t in p['targets']:
            r = get(url, '/api/v1/query_range', query=fill(t['expr'], scrape, step, span),
                     start=start, end=end, step=step)
            for s in r['result']:
                results.append((legend(t.get('legendFormat', ''), s['metric']),
                                [float(v[0]) for v in s['values']], [float(v[1]) for v in s['values']]))
        # The panel: a title strip over the plot area, as Grafana draws it.
        mx, my = 0.004, 0.004 * W / H
        ax_bg = fig.add_axes([x + mx, y + my, w - 2 * mx, h - 2 * my])
        ax_bg.set_facecolor(panel_bg)
        ax_bg.set_xticks([])
        ax_bg.set_yticks([])
        for s in ax_bg.spines.values():
            s.set_color(grid)
        title_h = 0.32 / (h * H)
        ax_bg.text(0.01, 1 - title_h / 2, p['title'], transform=ax_bg.transAxes, va='center', fontsize=8.5,
                   weight='bold', color=fg)
        if p['type'] == 'stat':
            steps = p['fieldConfig']['defaults']['thresholds']['steps']
            last = results[0][2][-1] if results and results[0][2] else None
            color = steps[0]['color']
            for st in steps:
                if st['value'] is not None and last is not None and last >= st['value']:
                    color = st['color']
            color = {'green': '#73bf69', 'orange': '#ff9830', 'red': '#f2495c'}.get(color, color)
            if results:
                spark = fig.add_axes([x + mx, y + my, w - 2 * mx, (h - 2 * my) * 0.45])
                spark.set_axis_off()
                spark.fill_between(results[0][1], results[0][2], color=color, alpha=0.25, lw=0)
                spark.set_xlim(start, end)
                lo = min(results[0][2])
                spark.set_ylim(min(0, lo), max(results[0][2]) * 1.1 or 1)
            ax_bg.text(0.5, 0.5, 'No data' if last is None else fmt_unit(unit, last, p['fieldConfig']['defaults'].get('decimals')), transform=ax_bg.transAxes,
                       ha='center', va='center', fontsize=22, weight='bold', color=color)
            continue
        left, right = 0.75 / W, 0.2 / W  # room for the y tick labels
        ax = fig.add_axes([x + left, y + my + 0.30 * h, w - left - right, h * (1 - 0.30) - title_h * h - 2 * my])
        ax.set_facecolor(panel_bg)
        ax.grid(color=grid, lw=0.5)
        ax.set_xlim(start, end)
        ax.xaxis.set_major_formatter(FuncFormatter(
            lambda v, _: datetime.datetime.fromtimestamp(v, datetime.timezone.utc).strftime('%H:%M:%S')))
        ax.xaxis.set_major_locator(MaxNLocator(7))
        ax.yaxis.set_major_locator(MaxNLocator(5, integer=p['fieldConfig']['defaults'].get('decimals') == 0))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _, unit=unit: fmt_unit(unit, v)))
        custom = p['fieldConfig']['defaults'].get('custom', {})
        bars = custom.get('drawStyle') == 'bars'
        dashed = [re.compile(o['matcher']['options']) for o in p['fieldConfig'].get('overrides', [])
                  if o['matcher']['id'] == 'byRegexp']
        handles = []
        top = 0
        for i, (name, ts, vs) in enumerate(results):
            c = colors[i % len(colors)]
            if any(rx.fullmatch(name) for rx in dashed):
                h_, = ax.plot(ts, vs, color=c, lw=1.6, ls=(0, (5, 4)), label=name)
            elif bars:
                # Side by side, so that equal bars of two series both show.
                n = len(results)
                h_ = ax.bar([t + (i - (n - 1) / 2) * step / n for t in ts], vs, width=step / n,
                            color=c, alpha=0.9, label=name)
            else:
                h_, = ax.plot(ts, vs, color=c, lw=1.1, label=name)
                ax.fill_between(ts, vs, color=c, alpha=0.08, lw=0)
            handles.append(h_)
            top = max([top] + vs)
        th = p['fieldConfig']['defaults'].get('thresholds')
        if th and custom.get('thresholdsStyle'):
            for st in th['steps']:
                if st['value'] is not None:
                    ax.axhline(st['value'], color='#f2495c', lw=1, ls=(0, (3, 3)))
                    ax.axhspan(st['value'], max(top, st['value']) * 1.1, color='#f2495c', alpha=0.08)
                    top = max(top, st['value'])
        ax.set_ylim(0, top * 1.15 if top > 0 else 1)
        if unit in ('Bps', 'bytes') and top > 0:
            ax.yaxis.set_major_locator(MultipleLocator(binary_step(top * 1.15 / 5)))
        if not results:
            ax.text(0.5, 0.5, 'No data', transform=ax.transAxes, ha='center', va='center', fontsize=12, color='#8e8e8e')
        if handles:
            fig.legend(handles=handles, loc='upper left', bbox_to_anchor=(x + mx + 0.005, y + my + 0.22 * h),
                       ncol=(4 if w > 0.4 else 3) if len(handles) > 6 else (2 if w > 0.4 or len(handles) > 3 else 1), fontsize=6.5, frameon=False, labelcolor=fg,
                       handlelength=1.5, columnspacing=1.2, borderaxespad=0)
    fig.savefig(out, facecolor=bg)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == 'openmetrics':
        openmetrics(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 7 and sys.argv[1] == 'plot':
        plot(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
