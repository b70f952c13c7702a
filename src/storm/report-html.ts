import type { StackResult } from "./metrics.ts";
import { type Column, capacityText, columns, grouped, turnColumns } from "./report-text.ts";
import type { ScenarioReport, StormReport } from "./storm.ts";

const COLORS = [
  "#d62728",
  "#ff7f0e",
  "#9467bd",
  "#8c564b",
  "#1f77b4",
  "#2ca02c",
  "#e377c2",
  "#17becf",
  "#bcbd22",
  "#7f7f7f",
  "#393b79",
  "#ad494a",
  "#637939",
  "#8c6d31",
  "#6b6ecf",
  "#e7969c",
  "#5254a3",
  "#b5651d",
];

const esc = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** A 5-second moving average: per-second counts are noisy. */
function smooth(values: readonly number[], window = 5): number[] {
  const out: number[] = [];
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    sum += values[i]!;
    if (i >= window) sum -= values[i - window]!;
    out.push(sum / Math.min(i + 1, window));
  }
  return out;
}

function niceMax(x: number): number {
  if (x <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

/** Dash patterns, so lines of close colours stay apart in grey print and for colour-blind eyes. */
const DASHES = [
  "",
  "7 3",
  "2 3",
  "9 3 2 3",
  "",
  "4 2",
  "1 2",
  "12 4",
  "",
  "7 3",
  "2 3",
  "6 2 1 2",
  "3 3",
  "1 3",
  "",
  "8 2 2 2",
  "5 5",
  "10 2 2 2 2 2",
];

const style = (i: number) =>
  `stroke="${COLORS[i % COLORS.length]}" stroke-dasharray="${DASHES[i % DASHES.length]}"`;

/** A line that stands for one or more stacks: those whose lines lie within `tol` of it. */
interface Line {
  readonly values: number[];
  /** Indices of the stacks it stands for, the first one's style. */
  readonly stacks: number[];
}

/** Lines that would be drawn on top of each other are drawn once and named together. */
function mergeLines(series: number[][], tol: number): Line[] {
  const lines: Line[] = [];
  series.forEach((values, i) => {
    const near = lines.find((l) => l.values.every((v, j) => Math.abs(v - values[j]!) <= tol));
    if (near) near.stacks.push(i);
    else lines.push({ values, stacks: [i] });
  });
  return lines;
}

const sample = (i: number) =>
  `<svg class="sample" width="28" height="10" aria-hidden="true"><line x1="1" x2="27" y1="5" y2="5" stroke-width="2.4" ${style(i)}/></svg>`;

/** How a chart's x axis reads: seconds of the run with the trigger shaded (the default), or
 * another domain (the turn chart's patience), with the y axis fixed or fitted. */
interface Axes {
  readonly n: number;
  readonly shade?: readonly [number, number];
  readonly smooth: boolean;
  readonly yMax?: number;
}

/** A line chart as inline SVG, the trigger shaded; lines closer than 2% of the scale are
 * one line, and the caption says which stacks it stands for. */
function chart(
  title: string,
  results: StackResult[],
  pick: (r: StackResult) => readonly number[],
  s: ScenarioReport["scenario"],
  axes: Axes = {
    n: s.durationS,
    shade: [s.trigger.startS, s.trigger.endS],
    smooth: true,
  },
): string {
  const W = 560;
  const H = 240;
  const L = 48;
  const R = 22;
  const T = 28;
  const B = 32;
  const series = results.map((r) => (axes.smooth ? smooth(pick(r)) : [...pick(r)]));
  const n = axes.n;
  const yMax = axes.yMax ?? niceMax(Math.max(1, ...series.flat()));
  const lines = mergeLines(series, yMax * 0.02);
  const x = (i: number) => L + (i / Math.max(1, n - 1)) * (W - L - R);
  const y = (v: number) => T + (1 - v / yMax) * (H - T - B);
  const parts: string[] = [];
  const shade = axes.shade;
  if (shade !== undefined)
    parts.push(
      `<rect class="trigger" x="${x(shade[0]).toFixed(1)}" y="${T}" width="${Math.max(1, x(shade[1]) - x(shade[0])).toFixed(1)}" height="${H - T - B}"/>`,
    );
  for (let k = 0; k <= 4; k++) {
    const v = (yMax * k) / 4;
    parts.push(
      `<line class="grid" x1="${L}" x2="${W - R}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}"/>`,
    );
    parts.push(
      `<text class="tick" x="${L - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${Math.round(v)}</text>`,
    );
  }
  for (let k = 0; k <= 6; k++) {
    const sec = Math.round(((n - 1) * k) / 6);
    parts.push(
      `<text class="tick" x="${x(sec).toFixed(1)}" y="${H - B + 16}" text-anchor="middle">${sec} s</text>`,
    );
  }
  for (const line of lines) {
    const names = line.stacks.map((i) => results[i]!.stack);
    const pts = line.values.map((v, j) => `${x(j).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    parts.push(
      `<polyline class="series" data-stacks="${esc(names.join(","))}" data-points="${line.values.length}" fill="none" ${style(line.stacks[0]!)} stroke-width="1.8" points="${pts}"><title>${esc(names.join(" = "))}</title></polyline>`,
    );
  }
  parts.push(`<text class="title" x="${L}" y="18">${esc(title)}</text>`);
  const shared = lines.filter((l) => l.stacks.length > 1);
  const caption = shared.length
    ? `One line for ${shared.map((l) => l.stacks.map((i) => results[i]!.stack).join(" = ")).join("; ")} (within 2% of the scale: drawn in the first one's style).`
    : "Every stack's line is apart.";
  return `<figure><svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">${parts.join("")}</svg><figcaption>${esc(caption)}</figcaption></figure>`;
}

function legend(results: StackResult[]): string {
  const items = results.map((r, i) => `<li>${sample(i)}${esc(r.stack)}</li>`).join("");
  return `<ul class="legend" aria-label="legend">${items}</ul>`;
}

function table(
  s: ScenarioReport,
  cols: readonly Column[] = columns(s.scenario.tool !== undefined),
): string {
  const head = cols.map((c) => `<th title="${esc(c.help)}">${esc(c.title)}</th>`).join("");
  const { rows: ordered, headings } = grouped(s.results);
  const rows = ordered
    .map((r, i) => {
      const cells = cols.map((c) => esc(c.value(r)));
      const heading = headings.get(i);
      const group =
        heading === undefined
          ? ""
          : `<tr class="group"><th colspan="${cols.length}">${esc(heading)}</th></tr>`;
      return `${group}<tr><td>${sample(s.results.indexOf(r))}${cells.join("</td><td>")}</td></tr>`;
    })
    .join("");
  return `<table><thead><tr>${head}</tr></thead><tbody>${rows}</tbody></table>`;
}

function section(s: ScenarioReport): string {
  const t = s.scenario.trigger;
  const tool = s.scenario.tool
    ? chart(
        "tool dependency requests per second",
        s.results,
        (r) => r.series.toolRequests,
        s.scenario,
      )
    : "";
  return `<section id="${esc(s.scenario.name)}">
<h2>${esc(s.scenario.name)}: ${esc(s.scenario.title)}</h2>
<p class="source">${esc(s.scenario.source)}. Trigger (shaded): ${t.startS}–${t.endS} s of ${s.scenario.durationS} s; ${esc(capacityText(s))}.</p>
${legend(s.results)}
<div class="charts">${chart("provider requests per second", s.results, (r) => r.series.requests, s.scenario)}${chart("goodput: answers per second users received", s.results, (r) => r.series.goodput, s.scenario)}${tool}${turnChart(s)}</div>
${table(s)}
<h3>Whole turns: each conversation's first turn, the same under every stack</h3>
${table(s, turnColumns(s.scenario.users.patienceS))}
</section>`;
}

/** The share of first turns begun during the trigger answered within T, against T from 0 to
 * the users' patience: one line per stack (none when no turn began in the trigger). */
function turnChart(s: ScenarioReport): string {
  if (s.results.every((r) => r.turns.trigger.begun === 0)) return "";
  const patience = s.scenario.users.patienceS;
  return chart(
    "first turns begun in the trigger answered within T (%), T in s",
    s.results,
    (r) => r.turns.trigger.curve.map((v) => v * 100),
    s.scenario,
    { n: patience + 1, smooth: false, yMax: 100 },
  );
}

/** What each column counts, once, before the scenarios: the per-call table's, then the
 * turn table's (for each patience the scenarios give their users). */
function key(report: StormReport): string {
  const withTool = report.scenarios.some((s) => s.scenario.tool !== undefined);
  const patiences = new Set(report.scenarios.map((s) => s.scenario.users.patienceS));
  const seen = new Set<string>();
  const cols = [...columns(withTool), ...[...patiences].flatMap((p) => turnColumns(p))].filter(
    (c) => !seen.has(c.title) && seen.add(c.title),
  );
  const items = cols.map((c) => `<dt>${esc(c.title)}</dt><dd>${esc(c.help)}</dd>`).join("");
  return `<details class="key" open><summary>How to read the tables</summary><dl>${items}</dl></details>`;
}

/** One self-contained page: no script, no network, charts as inline SVG. */
export function htmlReport(report: StormReport): string {
  const toc = report.scenarios
    .map((s) => `<a href="#${esc(s.scenario.name)}">${esc(s.scenario.name)}</a>`)
    .join(" · ");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>breakwater storm report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 4px}h3{font-size:14px;margin:14px 0 0}.source,.lede{color:#555;margin:0 0 10px}
.charts{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;width:560px}figcaption{font-size:11.5px;color:#666;margin-top:2px}
.chart{background:#fff;border:1px solid #ddd;border-radius:6px;max-width:100%;height:auto}
.trigger{fill:#f2c94c;opacity:.25}.grid{stroke:#eee}.tick{font-size:10px;fill:#777}.title{font-size:12px;font-weight:600;fill:#333}
.legend{list-style:none;padding:0;margin:6px 0 10px;display:flex;flex-wrap:wrap;gap:4px 18px}.legend li{display:flex;align-items:center;gap:6px}
.sample{flex:none;vertical-align:middle;margin-right:6px}.legend .sample{margin:0}
table{border-collapse:collapse;margin-top:10px;font-size:12px;width:100%;table-layout:auto}
th,td{border-bottom:1px solid #e5e5e5;padding:4px 5px;text-align:right}td{white-space:nowrap}
th{background:#fafafa;font-weight:600;vertical-align:bottom;cursor:help}th:first-child,td:first-child{text-align:left}
.key dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0 0;font-size:13px}.key dt{font-weight:600}.key dd{margin:0;color:#444}
.key summary{cursor:pointer;font-weight:600}nav{margin:6px 0 14px}
tr.group th{text-align:left;background:#f3f6fb;font-style:italic;cursor:default}
</style></head><body>
<h1>breakwater storm</h1>
<p class="lede">The same users and the same provider trouble, replayed against each retry stack in virtual time (seed ${report.seed}). Only the provider and the users are simulated: breakwater runs its real policy code, each peer its own retry loop. Lines are 5-second averages; the shaded band is the trigger. Hover a column's title for what it counts.</p>
<nav>${toc}</nav>
${key(report)}
${report.scenarios.map(section).join("\n")}
</body></html>
`;
}
