import type { StackResult } from "./metrics.ts";
import { columns } from "./report-text.ts";
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

/** A line chart as inline SVG: one line per stack, the trigger shaded. */
function chart(
  title: string,
  results: StackResult[],
  pick: (r: StackResult) => readonly number[],
  s: ScenarioReport["scenario"],
): string {
  const W = 560;
  const H = 240;
  const L = 48;
  const R = 12;
  const T = 28;
  const B = 32;
  const lines = results.map((r) => smooth(pick(r)));
  const n = s.durationS;
  const yMax = niceMax(Math.max(1, ...lines.flat()));
  const x = (i: number) => L + (i / Math.max(1, n - 1)) * (W - L - R);
  const y = (v: number) => T + (1 - v / yMax) * (H - T - B);
  const parts: string[] = [];
  parts.push(
    `<rect class="trigger" x="${x(s.trigger.startS).toFixed(1)}" y="${T}" width="${Math.max(1, x(s.trigger.endS) - x(s.trigger.startS)).toFixed(1)}" height="${H - T - B}"/>`,
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
    const sec = Math.round((n * k) / 6);
    parts.push(
      `<text class="tick" x="${x(sec).toFixed(1)}" y="${H - B + 16}" text-anchor="middle">${sec} s</text>`,
    );
  }
  lines.forEach((vals, i) => {
    const pts = vals.map((v, j) => `${x(j).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    parts.push(
      `<polyline class="series" data-stack="${esc(results[i]!.stack)}" data-points="${vals.length}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.6" points="${pts}"/>`,
    );
  });
  parts.push(`<text class="title" x="${L}" y="18">${esc(title)}</text>`);
  return `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">${parts.join("")}</svg>`;
}

function table(s: ScenarioReport): string {
  const cols = columns(s.scenario.tool !== undefined);
  const head = cols.map((c) => `<th>${esc(c.title)}</th>`).join("");
  const rows = s.results
    .map(
      (r, i) =>
        `<tr><td><span class="swatch" style="background:${COLORS[i % COLORS.length]}"></span>${cols.map((c) => esc(c.value(r))).join("</td><td>")}</td></tr>`,
    )
    .join("");
  return `<table><thead><tr>${head}</tr></thead><tbody>${rows}</tbody></table>`;
}

/** One self-contained page: no script, no network, charts as inline SVG. */
export function htmlReport(report: StormReport): string {
  const sections = report.scenarios
    .map((s) => {
      const t = s.scenario.trigger;
      return `<section id="${esc(s.scenario.name)}">
<h2>${esc(s.scenario.name)}: ${esc(s.scenario.title)}</h2>
<p class="source">${esc(s.scenario.source)}. Trigger (shaded): ${t.startS}–${t.endS} s of ${s.scenario.durationS} s; the provider could answer ${s.capacityGoodput.toFixed(1)} calls/s during it.</p>
<div class="charts">${chart("provider requests per second", s.results, (r) => r.series.requests, s.scenario)}${chart("goodput: answers per second users received", s.results, (r) => r.series.goodput, s.scenario)}${s.scenario.tool ? chart("tool dependency requests per second", s.results, (r) => r.series.toolRequests, s.scenario) : ""}</div>
${table(s)}
</section>`;
    })
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>breakwater storm report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 4px}.source,.lede{color:#555;margin:0 0 10px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{background:#fff;border:1px solid #ddd;border-radius:6px}
.trigger{fill:#f2c94c;opacity:.25}.grid{stroke:#eee}.tick{font-size:10px;fill:#777}.title{font-size:12px;font-weight:600;fill:#333}
table{border-collapse:collapse;margin-top:10px;font-size:12.5px}th,td{border-bottom:1px solid #e5e5e5;padding:4px 8px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}th{background:#fafafa}.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
</style></head><body>
<h1>breakwater storm</h1>
<p class="lede">The same users and the same provider trouble, replayed against each retry stack in virtual time (seed ${report.seed}). Lines are 5-second averages.</p>
${sections}
</body></html>
`;
}
