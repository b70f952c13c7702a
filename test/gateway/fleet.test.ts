import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";
import { startRedis, type TestRedis } from "../fixtures/redis.ts";

// Three gateway processes, one Redis (docs/architecture.md, rule 18): an upstream's breaker
// opened, its retry budget spent, a 429's hold heard, or its rate limit spent, through one
// gateway holds in the other two.
let fault: FaultServer;
let redis: TestRedis;
const dir = mkdtempSync(join(tmpdir(), "bw-gateway-fleet-"));
const gateways: { child: ChildProcess; url: string }[] = [];

function start(file: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    ["src/cli/main.ts", "gateway", "--config", file, "--port", "0"],
    {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, BW_FLEET_REDIS: redis.url },
    },
  );
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /gateway listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve({ child, url: m[1]! });
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code}: ${out}`)));
  });
}

beforeAll(async () => {
  [fault, redis] = await Promise.all([startFaultServer(), startRedis()]);
  const file = join(dir, "gateway.json");
  const fast = { backoff: { baseMs: 10, capMs: 20 } };
  writeFileSync(
    file,
    JSON.stringify({
      keys: ["k"],
      fleet: { redis: "env:BW_FLEET_REDIS", prefix: "fleet-test", syncMs: 50 },
      upstreams: {
        guarded: {
          wire: "openai",
          baseUrl: `${fault.url}/v1`,
          apiKey: "u",
          policy: { ...fast, breaker: { consecutiveFailures: 2, openMs: 60_000 } },
        },
        budgeted: {
          wire: "openai",
          baseUrl: `${fault.url}/v1`,
          apiKey: "u",
          policy: { ...fast, budget: { maxTokens: 1, tokenRatio: 0.1 } },
        },
        limited: {
          wire: "openai",
          baseUrl: `${fault.url}/v1`,
          apiKey: "u",
          policy: fast,
        },
        capped: {
          wire: "openai",
          baseUrl: `${fault.url}/v1`,
          apiKey: "u",
          policy: { ...fast, limiter: { limits: { requestsPerMinute: 3 } } },
        },
      },
      models: {
        "m-breaker": "guarded",
        "m-budget": "budgeted",
        "m-hold": "limited",
        "m-capped": "capped",
      },
    }),
  );
  gateways.push(...(await Promise.all([start(file), start(file), start(file)])));
}, 60_000);
afterAll(async () => {
  for (const g of gateways) g.child.kill("SIGTERM");
  await Promise.all(gateways.map((g) => new Promise((r) => g.child.once("exit", r))));
  await fault?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const chat = (url: string, model: string, headers: Record<string, string> = {}) =>
  fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: "Bearer k", "content-type": "application/json", ...headers },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });
const sent = (model: string) => fault.stats().timeline.filter((a) => a.model === model).length;
const syncs = () => new Promise((r) => setTimeout(r, 400)); // several of every gateway's syncs

describe("a fleet of three gateways on one Redis", () => {
  it("a breaker opened through one gateway refuses at the other two, nothing sent", async () => {
    fault.setScript({ rules: [{ model: "m-breaker", status: 500 }] });
    // The provider's last answer, as the fetch layer hands it on, and why the retry went no further.
    const first = await chat(gateways[0]!.url, "m-breaker");
    expect(first.status).toBe(500);
    expect(first.headers.get("x-breakwater-reason")).toBe("circuit-open");
    const before = sent("m-breaker");
    expect(before).toBe(2); // two failures opened it; the retry was refused
    await syncs();
    for (const g of gateways.slice(1)) {
      const r = await chat(g.url, "m-breaker");
      expect(r.status).toBe(503);
      expect(r.headers.get("x-breakwater-reason")).toBe("circuit-open");
    }
    expect(sent("m-breaker")).toBe(before);
  });

  it("one retry budget for the fleet: its one token is one retry in all, not one a gateway", async () => {
    fault.setScript({ rules: [{ model: "m-budget", status: 503 }] });
    await syncs(); // every gateway has synced: whichever first holds the token
    for (const g of gateways) await chat(g.url, "m-budget");
    expect(sent("m-budget")).toBe(3 + 1); // without sharing: 3 + 3
  });

  it("a 429's Retry-After heard by one gateway holds the other two: refused at once, nothing sent", async () => {
    // 40 s: past the 30 s a call waits for, so a held call is refused at once, locally.
    fault.setScript({
      rules: [{ model: "m-hold", requests: [1, 1], status: 429, retryAfter: 40 }],
    });
    const first = await chat(gateways[0]!.url, "m-hold");
    expect(first.status).toBe(429);
    expect(sent("m-hold")).toBe(1);
    await syncs();
    for (const g of gateways.slice(1)) {
      const r = await chat(g.url, "m-hold");
      expect(r.status).toBe(429);
      expect(r.headers.get("x-breakwater-reason")).toMatch(/rate-limit-wait|retry-after-too-long/);
    }
    expect(sent("m-hold")).toBe(1); // the other gateways sent nothing: the upstream asked for 40 s
  });

  it("an upstream's rate limit spent through one gateway is spent for all: the others refuse, nothing sent", async () => {
    fault.setScript({});
    // Three requests a minute for the fleet: one gateway lets all three go.
    for (let i = 0; i < 3; i++) expect((await chat(gateways[0]!.url, "m-capped")).status).toBe(200);
    expect(sent("m-capped")).toBe(3);
    await syncs();
    // The next refill is 20 s away; a run that has 2 s is refused at once by the others too.
    for (const [i, g] of gateways.slice(1).entries()) {
      const run = { "x-breakwater-run": `capped-${i}`, "x-breakwater-run-deadline-ms": "2000" };
      const r = await chat(g.url, "m-capped", run);
      expect(r.status).toBe(429);
      expect(r.headers.get("x-breakwater-reason")).toBe("rate-limit-wait");
    }
    expect(sent("m-capped")).toBe(3);
  });
});
