// One process of the fleet benchmark: calls the fault server at a steady pace through a
// policy whose admission and breaker are its own, or shared through Redis.
import { createClient } from "redis";
import { policy, throwIfNotOk } from "../src/index.ts";
import { sharedState } from "../src/redis/index.ts";

const a = JSON.parse(process.argv[2]!) as {
  url: string;
  redis?: string;
  prefix: string;
  ratePerS: number;
  durationMs: number;
  startAt: number;
};
// Judged by the failure share over 20 outcomes only (no consecutive-failure rule).
const breakerOptions = {
  consecutiveFailures: Number.POSITIVE_INFINITY,
  failureRatio: 0.5,
  minimumThroughput: 20,
  windowMs: 3000,
  openMs: 3000,
};
// Retries: a bucket of 10 with 0.1 back per success, each process's own or the fleet's.
const budgetOptions = { maxTokens: 10, tokenRatio: 0.1 };
let openedAt: number | undefined;
const onStateChange = (s: string) => {
  if (s === "open" && openedAt === undefined) openedAt = Date.now();
};
let shared: ReturnType<typeof sharedState> | undefined;
let client: ReturnType<typeof createClient> | undefined;
if (a.redis !== undefined) {
  client = createClient({ url: a.redis, disableOfflineQueue: true });
  client.on("error", () => {});
  await client.connect();
  shared = sharedState({ client, prefix: a.prefix, syncMs: 100 });
}
const upstream = "fault-server";
const p = policy({
  maxAttempts: 3,
  backoff: { baseMs: 200, capMs: 1000 },
  ...(shared
    ? {
        budget: shared.budget(upstream, budgetOptions),
        breaker: shared.breaker(upstream, { ...breakerOptions, onStateChange }),
      }
    : { budget: budgetOptions, breaker: { ...breakerOptions, onStateChange } }),
});
await new Promise((r) => setTimeout(r, Math.max(0, a.startAt - Date.now())));
const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
const outcomes: Record<string, number> = {};
const calls: Promise<void>[] = [];
const start = Date.now();
// The fleet's breaker state as this process sees it, sampled: when did it first say open?
const watch = setInterval(() => {
  if (openedAt === undefined && (p.options.breaker?.state ?? "closed") === "open")
    openedAt = Date.now();
}, 5);
while (Date.now() - start < a.durationMs) {
  calls.push(
    p
      .execute(({ signal }) =>
        fetch(`${a.url}/v1/chat/completions`, { method: "POST", body, signal }).then(throwIfNotOk),
      )
      .then(
        () => void (outcomes.ok = (outcomes.ok ?? 0) + 1),
        (e) => {
          const k = (e as { reason?: string }).reason ?? "error";
          outcomes[k] = (outcomes[k] ?? 0) + 1;
        },
      ),
  );
  await new Promise((r) => setTimeout(r, (1000 / a.ratePerS) * (0.5 + Math.random())));
}
await Promise.all(calls);
clearInterval(watch);
shared?.close();
await client?.close();
console.log(JSON.stringify({ openedAt, outcomes }));
