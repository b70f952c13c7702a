/**
 * The transport on the oldest undici the peer range claims (7.0.0, installed as the alias
 * `undici-v7`): the fetch layer loads `undici` for its transport and connect timeout, and
 * here that name is undici 7. The latest (8) runs in the rest of the suite.
 */
import { describe, expect, it, vi } from "vitest";
import { classify } from "../../src/core/classify.ts";
import { ledgerOf } from "../../src/core/errors.ts";
import { policy } from "../../src/policy/policy.ts";
import { guardedFetch } from "../../src/providers/fetch.ts";
import { useBlackhole } from "../providers/blackhole.ts";
import { useFaultServer } from "../providers/fixture.ts";

vi.mock("undici", async () => await import("undici-v7"));

const fs = useFaultServer();
const fast = () => policy({ maxAttempts: 2, backoff: { baseMs: 5, capMs: 10 } });

describe("undici 7 under the fetch layer", () => {
  it("the name undici is version 7 here", async () => {
    const undici = await import("undici");
    const v7 = await import("undici-v7");
    expect(undici.Agent).toBe(v7.Agent);
  });

  it("a body cut before content is a transport failure, retried; the answer comes whole", async () => {
    fs.script({ rules: [{ requests: [1, 1], stream: { after: 0, action: "cut" } }] });
    const f = guardedFetch({ policy: fast(), connectTimeoutMs: 2_000 });
    const res = await f(`${fs.server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }),
    });
    const text = await res.text();
    expect(text).toContain("[DONE]");
    expect(fs.requests()).toBe(2);
  });

  describe("a connection never accepted", () => {
    const hole = useBlackhole();

    it("each attempt gives up at the connect timeout: a retried timeout", async () => {
      const f = guardedFetch({ connectTimeoutMs: 200, policy: fast() });
      const started = performance.now();
      const error = await f(`http://127.0.0.1:${hole.port()}/v1/chat/completions`, {
        method: "POST",
        body: "{}",
      }).catch((e: unknown) => e);
      const elapsed = performance.now() - started;
      expect(classify(error)).toMatchObject({ kind: "timeout", code: "UND_ERR_CONNECT_TIMEOUT" });
      expect(ledgerOf(error)?.attempts).toHaveLength(2);
      expect(elapsed).toBeGreaterThanOrEqual(390);
      expect(elapsed).toBeLessThan(3_000);
    });
  });
});
