import { type Ledger, ledgerOf, type Policy, policy, reasonOf, VirtualClock } from "../index.ts";
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
    "a 503 storm: with a deadline, retried until the next wait would pass it (the cap of 10 is a backstop)",
    [{ fail: 503 }],
  ],
  ["a hung attempt: the call's 20 s deadline ends it", [{ text: "never", latencyMs: 60_000 }]],
  [
    "a 429 with Retry-After: 120: past the 30 s cap, the call ends at once",
    [{ fail: 429, retryAfterS: 120 }, { text: "never sent" }],
  ],
  [
    "the next call, while that Retry-After holds every call: refused before sending",
    [{ text: "never sent" }],
  ],
];

/** The deadline each call of the demo is given: the one thing a user tells breakwater. */
const DEADLINE_MS = 20_000;

/** A short demo: a flaky fake model driven by `policy()` as users get it (its defaults;
 * only the clock, the random source and the hooks that print are the demo's), in virtual
 * time, each call with a deadline. */
export async function demo(out: (s: string) => void = console.log): Promise<void> {
  const clock = new VirtualClock();
  const seen: { ledger?: Ledger } = {};
  const p = policy({
    clock,
    random: mulberry32(7),
    usage: (r) => (r as { usage: { inputTokens: number; outputTokens: number } }).usage,
    onSuccess: (e) => {
      seen.ledger = e.ledger;
    },
    onWait: (e) =>
      out(
        `  wait before attempt ${e.attempt}: ${fmtMs(e.ms)} (${e.why}, after ${e.failure?.kind})`,
      ),
  });
  out("breakwater demo: a flaky fake model, policy() as you get it (its defaults), virtual time");
  out(
    `each call has a ${DEADLINE_MS / 1000} s deadline (policy().execute(fn, { deadlineMs })); nothing else is set\n`,
  );
  for (const [title, steps] of CASES) await demoCase(out, clock, p, seen, title, steps);
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
  const call = p.execute(({ signal }) => model.generate(signal), { deadlineMs: DEADLINE_MS });
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
