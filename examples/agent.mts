/**
 * An agent turn with everything on: the official OpenAI client with its retries off, one
 * policy with a shared budget and breaker, a guarded payment tool with idempotency keys,
 * and a run whose steps are journaled. It runs against breakwater's fault server, which
 * fails on script: a 503 on the first model call, a charge that goes through but answers
 * too late, and a stream cut after three words.
 *
 *   node agent.mts   (copied into a project with breakwater and openai installed)
 */

import {
  CircuitBreaker,
  guardTool,
  ledgerOf,
  MemoryJournal,
  policy,
  RetryBudget,
  Run,
  reasonOf,
  throwIfNotOk,
} from "breakwater";
import { withBreakwater } from "breakwater/openai";
import { startFaultServer } from "breakwater/testing";
import OpenAI from "openai";

export async function main(log: (line: string) => void = console.log) {
  const server = await startFaultServer({
    script: {
      rules: [
        { route: "openai", requests: [1, 1], status: 503, retryAfterMs: 200 },
        { route: "tools", tool: "charge", requests: [1, 1], headersDelayMs: 600 },
        { route: "openai", requests: [3, 3], stream: { after: 3, action: "cut" } },
      ],
    },
  });
  try {
    const budget = new RetryBudget({ maxTokens: 10, tokenRatio: 0.1 });
    const breaker = new CircuitBreaker({ consecutiveFailures: 5, openMs: 5_000 });
    const p = policy({
      maxAttempts: 3,
      backoff: { baseMs: 100, capMs: 1_000 },
      deadlineMs: 10_000,
      idleTimeoutMs: 1_000,
      budget,
      breaker,
    });
    const run = new Run({
      id: "ticket-1234",
      deadlineMs: 30_000,
      maxAttempts: 10,
      journal: new MemoryJournal(),
    });
    // Every model call draws on the run: its deadline, its attempts, its token allowance.
    const client = withBreakwater(
      new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "sk-example-not-a-real-key" }),
      { policy: p, run: () => run },
    );

    const charge = guardTool(
      async (args: { order: number; cents: number }, { idempotencyKey, signal }) => {
        const res = await fetch(`${server.url}/tools/charge`, {
          method: "POST",
          body: JSON.stringify(args),
          headers: { "idempotency-key": idempotencyKey },
          signal,
        });
        return (await throwIfNotOk(res)).json() as Promise<{
          status: string;
          executionId: number;
          replayed: boolean;
        }>;
      },
      { name: "charge", effect: "idempotent", attemptTimeoutMs: 300, deadlineMs: 5_000 },
    );

    const messages = [
      { role: "user" as const, content: "Refund order 77, then tell the customer." },
    ];

    const plan = await run.step("plan", async () => {
      const r = await client.chat.completions.create({ model: "gpt-example", messages });
      return r.choices[0]!.message.content;
    });
    log(`plan: "${plan}" (the first request got a 503 with retry-after-ms: 200; retried once)`);

    const refund = await run.step("refund", () => charge({ order: 77, cents: 1999 }, { run }));
    log(
      `refund: ${JSON.stringify(refund)} (the first attempt timed out after the charge went through; the retry carried the same key and was replayed)`,
    );

    const reply = await run.step("reply", async () => {
      const stream = await client.chat.completions.create({
        model: "gpt-example",
        messages,
        stream: true,
      });
      let text = "";
      try {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
        return { text, complete: true };
      } catch (error) {
        // The stream broke after the customer saw three words: not replayed.
        log(
          `reply interrupted (${reasonOf(error)}): ${(error as Error).message}; kept "${text}"; ledger billed ${JSON.stringify(ledgerOf(error)?.billed)}`,
        );
        return { text, complete: false };
      }
    });
    log(`reply: ${JSON.stringify(reply)}`);

    const stats = server.stats();
    log(
      `provider: ${stats.byRoute.openai?.requests} model requests ${JSON.stringify(stats.byRoute.openai?.byOutcome)}, billed ${JSON.stringify(stats.billed)}`,
    );
    log(
      `payments: executed ${stats.tools.executed}, duplicates prevented ${stats.tools.duplicatesPrevented}, double charges ${stats.tools.duplicateEffects}`,
    );
    log(`run: ${JSON.stringify(run.stats)}`);
    return { plan, refund, reply, stats, run };
  } finally {
    await server.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
