import {
  type Ledger,
  ledgerOf,
  type Policy,
  policy,
  RetryBudget,
  reasonOf,
  VirtualClock,
} from "../index.ts";
import { FakeModel, type FakeStep, mulberry32 } from "../testing/index.ts";

const fmtMs = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`);

function printLedger(out: (s: string) => void, ledger: Ledger) {
  for (const a of ledger.attempts) {
    const what =
      a.outcome === "ok" ? "ok" : `${a.failure?.kind} (HTTP ${a.failure?.status ?? "-"})`;
    out(
      `    attempt ${a.attempt}: waited ${fmtMs(a.waitMs)} before, took ${fmtMs(a.durationMs)} -> ${what}`,
    );
  }
  const { usage, wasted, billed } = ledger;
  out(
    `    tokens: used ${usage.inputTokens}+${usage.outputTokens}, wasted ${wasted.inputTokens}+${wasted.outputTokens}, billed ${billed.inputTokens}+${billed.outputTokens}`,
  );
}

/** The demo's cases: what the fake model does, attempt by attempt. */
const CASES: readonly [string, FakeStep[]][] = [
  [
    "two 503s, then an answer",
    [
      { fail: 503, latencyMs: 120 },
      { fail: 503, latencyMs: 90 },
      { text: "Your refund was issued on Monday.", latencyMs: 800 },
    ],
  ],
  ["a 429 with Retry-After: 2", [{ fail: 429, retryAfterS: 2 }, { text: "Done." }]],
  [
    "a spent quota (429 insufficient_quota): not retried",
    [{ fail: 429, code: "insufficient_quota" }],
  ],
  [
    "a hung attempt cut at 5 s, then an answer",
    [
      { text: "never", latencyMs: 60_000 },
      { text: "Here you go.", latencyMs: 400 },
    ],
  ],
  ["a 503 storm: attempts used up", [{ fail: 503 }]],
];

/** A short demo: a flaky fake model driven by a policy in virtual time. */
export async function demo(out: (s: string) => void = console.log): Promise<void> {
  const clock = new VirtualClock();
  const seen: { ledger?: Ledger } = {};
  const budget = new RetryBudget({ maxTokens: 10, tokenRatio: 0.1 });
  const p = policy({
    maxAttempts: 4,
    backoff: { baseMs: 500, capMs: 8_000 },
    retryAfter: { maxMs: 30_000 },
    deadlineMs: 20_000,
    attemptTimeoutMs: 5_000,
    budget,
    clock,
    random: mulberry32(7),
    usage: (r) => (r as { usage: { inputTokens: number; outputTokens: number } }).usage,
    onSuccess: (e) => {
      seen.ledger = e.ledger;
    },
    onRetry: (e) =>
      out(`  retry after attempt ${e.attempt}: ${e.failure.kind}, waiting ${fmtMs(e.delayMs)}`),
  });
  out("breakwater demo: a flaky fake model, one policy, virtual time\n");
  for (const [title, steps] of CASES) await demoCase(out, clock, p, seen, title, steps);
  out(
    `retry budget left: ${budget.tokens} tokens (granted ${budget.stats.granted}, refused ${budget.stats.refused})`,
  );
}

/** One case: the call in virtual time, what it answered or why it gave up, its ledger. */
async function demoCase(
  out: (s: string) => void,
  clock: VirtualClock,
  p: Policy,
  seen: { ledger?: Ledger },
  title: string,
  steps: FakeStep[],
): Promise<void> {
  out(`- ${title}`);
  const model = new FakeModel(clock, steps);
  const started = clock.now();
  const call = p.execute(({ signal }) => model.generate(signal));
  let ledger: Ledger | undefined;
  let settled = false;
  call.then(
    (r) => {
      ledger = seen.ledger;
      out(`  => "${r.text}"`);
    },
    (e) => {
      ledger = ledgerOf(e);
      out(`  => gave up: ${reasonOf(e)} (${(e as Error).message})`);
    },
  );
  void call.then(
    () => (settled = true),
    () => (settled = true),
  );
  while (!settled) await clock.runAll(1);
  out(`  took ${fmtMs(clock.now() - started)} of virtual time, ${model.calls.length} request(s)`);
  if (ledger) printLedger(out, ledger);
  out("");
}
