import type { StackResult } from "./metrics.ts";
import type { StormReport } from "./storm.ts";

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const money = (x: number) => `$${x.toFixed(2)}`;
const recovery = (r: StackResult) => (r.recoveryS === null ? "never" : `${r.recoveryS} s`);

export interface Column {
  title: string;
  value: (r: StackResult) => string;
}

/** The columns of the comparison, shared by the terminal table, the README and the HTML. */
export function columns(hasTool: boolean): Column[] {
  const cols: Column[] = [
    { title: "stack", value: (r) => r.stack },
    { title: "calls", value: (r) => String(r.logicalCalls) },
    { title: "requests", value: (r) => String(r.providerRequests) },
    { title: "req/call", value: (r) => r.amplification.toFixed(2) },
    { title: "req/call in trigger", value: (r) => r.amplificationDuringTrigger.toFixed(2) },
    { title: "success", value: (r) => pct(r.successRate) },
    { title: "goodput in trigger", value: (r) => `${r.goodputDuringTrigger.toFixed(1)}/s` },
    { title: "wait p50", value: (r) => `${r.userWaitS.p50} s` },
    { title: "wait p99", value: (r) => `${r.userWaitS.p99} s` },
    { title: "wasted", value: (r) => money(r.cost.wasted) },
    { title: "load after", value: (r) => `${r.loadAfterTrigger.toFixed(2)}x` },
    { title: "refused after", value: (r) => pct(r.refusedAfterTrigger) },
    { title: "recovery", value: recovery },
  ];
  if (hasTool) {
    cols.splice(
      10,
      0,
      {
        title: "tool req/call in trigger",
        value: (r) => (r.tool?.amplificationDuringTrigger ?? 0).toFixed(2),
      },
      { title: "tool success", value: (r) => pct(r.tool?.successRate ?? 0) },
      { title: "double charges", value: (r) => String(r.duplicateSideEffects) },
    );
  }
  return cols;
}

/** A fixed-width table for the terminal. */
export function textTable(report: StormReport): string {
  const out: string[] = [];
  for (const { scenario, capacityGoodput, results } of report.scenarios) {
    const cols = columns(scenario.tool !== undefined);
    const rows = [cols.map((c) => c.title), ...results.map((r) => cols.map((c) => c.value(r)))];
    const widths = cols.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
    const line = (row: string[]) =>
      row
        .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
        .join("  ");
    const t = scenario.trigger;
    out.push(`${scenario.name}: ${scenario.title}`);
    out.push(
      `  (${scenario.source}; trigger ${t.startS}–${t.endS} s of ${scenario.durationS} s, seed ${report.seed}; the provider could answer ${capacityGoodput.toFixed(1)} calls/s during it)`,
    );
    out.push(`  ${line(rows[0]!)}`);
    out.push(`  ${widths.map((w) => "-".repeat(w)).join("  ")}`);
    for (const row of rows.slice(1)) out.push(`  ${line(row)}`);
    out.push("");
  }
  return out.join("\n");
}

/** The same tables in Markdown, for the README. */
export function markdownTables(report: StormReport): string {
  const out: string[] = [];
  for (const { scenario, capacityGoodput, results } of report.scenarios) {
    const cols = columns(scenario.tool !== undefined);
    out.push(
      `**${scenario.name}**: ${scenario.title} (${scenario.source}; the provider could answer ${capacityGoodput.toFixed(1)} calls/s during the trigger)`,
      "",
    );
    out.push(`| ${cols.map((c) => c.title).join(" | ")} |`);
    out.push(`|${cols.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`);
    for (const r of results) out.push(`| ${cols.map((c) => c.value(r)).join(" | ")} |`);
    out.push("");
  }
  return out.join("\n");
}
