import type { StackResult, TurnScore } from "./metrics.ts";
import type { ScenarioReport, StormReport } from "./storm.ts";

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const money = (x: number) => `$${x.toFixed(2)}`;
const recovery = (r: StackResult) => (r.recoveryS === null ? "never" : `${r.recoveryS} s`);

export interface Column {
  title: string;
  /** What the column counts, in a sentence (the HTML report's key, docs/storm.md's). */
  help: string;
  value: (r: StackResult) => string;
}

/** The columns of the comparison, shared by the terminal table, docs/storm.md and the HTML. */
const COLUMNS: readonly Column[] = [
  {
    title: "stack",
    help: "the retry stack: a peer's own retry loop, or breakwater (its defaults; a + names what a row adds)",
    value: (r) => r.stack,
  },
  {
    title: "calls",
    help: "logical calls the users started (a call and all its retries count once)",
    value: (r) => String(r.logicalCalls),
  },
  {
    title: "requests",
    help: "requests the provider received, retries included",
    value: (r) => String(r.providerRequests),
  },
  {
    title: "req/call",
    help: "provider requests per logical call, over the whole run",
    value: (r) => r.amplification.toFixed(2),
  },
  {
    title: "req/call in trigger",
    help: "provider requests per logical call, for calls started during the trigger",
    value: (r) => r.amplificationDuringTrigger.toFixed(2),
  },
  {
    title: "call success",
    help: "per call: the share of logical calls answered while the user still waited (a user still waiting starts fewer calls, so fewer can fail: the turn table scores what users live)",
    value: (r) => pct(r.successRate),
  },
  {
    title: "goodput in trigger",
    help: "per call: answers per second users received during the trigger",
    value: (r) => `${r.goodputDuringTrigger.toFixed(1)}/s`,
  },
  {
    title: "wait p50",
    help: "how long users waited for a turn, median",
    value: (r) => `${r.userWaitS.p50} s`,
  },
  {
    title: "wait p99",
    help: "how long users waited for a turn, 99th percentile (a user gives up at their patience)",
    value: (r) => `${r.userWaitS.p99} s`,
  },
  {
    title: "wasted",
    help: "the price of tokens billed for answers nobody used (the user had left, or the attempt was abandoned)",
    value: (r) => money(r.cost.wasted),
  },
  {
    title: "load after",
    help: "requests per second in the minute after the trigger, over the rate before it",
    value: (r) => `${r.loadAfterTrigger.toFixed(2)}x`,
  },
  {
    title: "refused after",
    help: "the share of requests the provider refused (429, 503, 529, queue full) in the minute after the trigger",
    value: (r) => pct(r.refusedAfterTrigger),
  },
  {
    title: "recovery",
    help: "time after the trigger until goodput is back to what the same users got in a calm run",
    value: recovery,
  },
];

/** A scenario with a tool adds these, after "wasted". */
const TOOL_COLUMNS: readonly Column[] = [
  {
    title: "tool req/call in trigger",
    help: "tool dependency requests per tool call, for calls started during the trigger",
    value: (r) => (r.tool?.amplificationDuringTrigger ?? 0).toFixed(2),
  },
  {
    title: "tool success",
    help: "the share of tool calls that succeeded",
    value: (r) => pct(r.tool?.successRate ?? 0),
  },
  {
    title: "double charges",
    help: "orders charged more than once (a retried side effect without an idempotency key)",
    value: (r) => String(r.duplicateSideEffects),
  },
];

/** The columns for a scenario, with or without a tool. */
export function columns(hasTool: boolean): Column[] {
  const at = COLUMNS.findIndex((c) => c.title === "wasted") + 1;
  return hasTool ? [...COLUMNS.slice(0, at), ...TOOL_COLUMNS, ...COLUMNS.slice(at)] : [...COLUMNS];
}

/** What the provider could answer during the trigger, in words that hold for the scenario:
 * a latency trigger's number is a steady state that calls begun before it outrun, and one
 * past the app's timeout has no steady state at all. */
export function capacityText({ scenario, capacityGoodput }: ScenarioReport): string {
  const t = scenario.trigger;
  const rate = `${capacityGoodput.toFixed(1)} calls/s`;
  if (capacityGoodput === 0 && scenario.attemptTimeoutS !== undefined)
    return `at ${t.latencyFactor ?? 1}× latency a typical call outlasts the app's ${scenario.attemptTimeoutS} s timeout, so during the trigger only the shortest calls can be answered`;
  if ((t.latencyFactor ?? 1) > 1)
    return `at ${t.latencyFactor}× latency the provider's slots answer about ${rate} once the calls begun before the trigger are done (those finish sooner, so goodput early in the trigger can pass it)`;
  return `the provider could answer ${rate} during the trigger`;
}

/** The turn table's columns: each conversation's first turn, matched across stacks, begun
 * during the trigger and in the minute after it, answered within T. */
export function turnColumns(patienceS: number): Column[] {
  const within = (w: "trigger" | "after", key: keyof TurnScore["within"], t: string): Column => ({
    title: `${w === "trigger" ? "in trigger" : "after"} ≤${t}`,
    help: `the share of first turns begun ${w === "trigger" ? "during the trigger" : "in the minute after the trigger"} answered within ${t} (every call of the turn answered while its user waited)`,
    value: (r) => pct(r.turns[w].within[key]),
  });
  return [
    COLUMNS[0]!, // the stack
    {
      title: "first turns",
      help: "conversations' first turns begun during the trigger, and in the minute after it: the same turns under every stack",
      value: (r) => `${r.turns.trigger.begun} / ${r.turns.after.begun}`,
    },
    within("trigger", "s20", "20 s"),
    within("trigger", "s30", "30 s"),
    within("trigger", "s60", "60 s"),
    within("trigger", "patience", `${patienceS} s`),
    within("after", "s20", "20 s"),
    within("after", "patience", `${patienceS} s`),
    {
      title: "answered wait p50",
      help: "how long the users of first turns begun during the trigger that were answered waited, median",
      value: (r) => `${r.turns.trigger.answeredWaitS.p50} s`,
    },
  ];
}

/** The headings of the rows compared with each other, not with the rows above them:
 * those that fall back to a second provider, and those that run inside a durable engine. */
export const GROUPS = {
  fallback: "with a second provider (compare these with each other)",
  engine: "inside a durable engine (compare these with each other)",
} as const;

const groupOf = (r: StackResult) => (r.engine ? "engine" : r.fallback ? "fallback" : undefined);

/** The results in the report's order: the single-upstream rows, then the fallback rows,
 * then the engine rows; `headings` names the row each group starts at. */
export function grouped(results: readonly StackResult[]): {
  rows: StackResult[];
  headings: Map<number, string>;
} {
  const order = [undefined, "fallback", "engine"] as const;
  const rows = order.flatMap((g) => results.filter((r) => groupOf(r) === g));
  const headings = new Map<number, string>();
  rows.forEach((r, i) => {
    const g = groupOf(r);
    if (g !== undefined && (i === 0 || groupOf(rows[i - 1]!) !== g)) headings.set(i, GROUPS[g]);
  });
  return { rows, headings };
}

/** One line per column: what it counts (the per-call table's, then the turn table's). */
export function columnKey(hasTool: boolean): string[] {
  const turns = turnColumns(90)
    .slice(1)
    .filter((c) => !/≤(20|30|60) s/.test(c.title) || c.title.startsWith("in trigger ≤20"));
  return [...columns(hasTool), ...turns].map((c) => `${c.title}: ${c.help}`);
}

/** Rows as fixed-width lines under a heading row, with the group headings. */
function fixedWidth(
  cols: readonly Column[],
  results: readonly StackResult[],
  headings: Map<number, string>,
): string[] {
  const rows = [cols.map((c) => c.title), ...results.map((r) => cols.map((c) => c.value(r)))];
  const widths = cols.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (row: string[]) =>
    row
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join("  ");
  const out = [`  ${line(rows[0]!)}`, `  ${widths.map((w) => "-".repeat(w)).join("  ")}`];
  rows.slice(1).forEach((row, i) => {
    const heading = headings.get(i);
    if (heading !== undefined) out.push(`  ${heading}:`);
    out.push(`  ${line(row)}`);
  });
  return out;
}

/** A fixed-width table for the terminal: per call, then whole turns. */
export function textTable(report: StormReport): string {
  const out: string[] = [];
  for (const s of report.scenarios) {
    const { scenario } = s;
    const { rows: results, headings } = grouped(s.results);
    const t = scenario.trigger;
    out.push(`${scenario.name}: ${scenario.title}`);
    out.push(
      `  (${scenario.source}; trigger ${t.startS}–${t.endS} s of ${scenario.durationS} s, seed ${report.seed}; ${capacityText(s)})`,
    );
    out.push(...fixedWidth(columns(scenario.tool !== undefined), results, headings));
    out.push("  whole turns (each conversation's first turn, the same under every stack):");
    out.push(...fixedWidth(turnColumns(scenario.users.patienceS), results, headings));
    out.push("");
  }
  return out.join("\n");
}

/** One Markdown table with its group headings. */
function markdown(
  cols: readonly Column[],
  results: readonly StackResult[],
  headings: Map<number, string>,
): string[] {
  const out = [`| ${cols.map((c) => c.title).join(" | ")} |`];
  out.push(`|${cols.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`);
  results.forEach((r, i) => {
    const heading = headings.get(i);
    if (heading !== undefined) out.push(`| *${heading}* |${" |".repeat(cols.length - 1)}`);
    out.push(`| ${cols.map((c) => c.value(r)).join(" | ")} |`);
  });
  return out;
}

/** The same tables in Markdown, for docs/storm.md. */
export function markdownTables(report: StormReport): string {
  const out: string[] = [];
  for (const s of report.scenarios) {
    const { scenario } = s;
    const { rows: results, headings } = grouped(s.results);
    out.push(
      `**${scenario.name}**: ${scenario.title} (${scenario.source}; ${capacityText(s)})`,
      "",
    );
    out.push(...markdown(columns(scenario.tool !== undefined), results, headings), "");
    out.push("Whole turns:", "");
    out.push(...markdown(turnColumns(scenario.users.patienceS), results, headings), "");
  }
  const withTool = report.scenarios.some((s) => s.scenario.tool !== undefined);
  out.push("Columns:", "", ...columnKey(withTool).map((line) => `- ${line}`), "");
  return out.join("\n");
}
