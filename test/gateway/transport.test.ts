import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { leanFetch } from "../../src/gateway/transport.ts";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";

// The gateway's transport: undici's request under a fetch-shaped function (a stream through
// undici's fetch), answering as fetch would.
let fault: FaultServer;
let send: typeof fetch;
beforeAll(async () => {
  fault = await startFaultServer();
  send = (await leanFetch())!;
});
afterAll(() => fault?.close());

const post = (body: object, init: RequestInit = {}) =>
  send(`${fault.url}/v1/chat/completions`, {
    method: "POST",
    headers: new Headers({ "content-type": "application/json", authorization: "Bearer k" }),
    body: JSON.stringify(body),
    ...init,
  });
const ask = { model: "m", messages: [{ role: "user", content: "hi" }] };

describe("the gateway's transport (leanFetch)", () => {
  it("a JSON answer: its status, headers and body, as fetch gives them", async () => {
    const ok = await post(ask);
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toContain("application/json");
    expect(((await ok.json()) as { object: string }).object).toBe("chat.completion");
    fault.setScript({ rules: [{ status: 503, retryAfter: 2 }] });
    const busy = await post(ask);
    expect([busy.status, busy.headers.get("retry-after")]).toEqual([503, "2"]);
    expect(((await busy.json()) as { error: object }).error).toBeDefined();
    fault.setScript({});
  });

  it("a compressed answer is decoded, as fetch would; a 205 has no body", async () => {
    const { createServer } = await import("node:http");
    const { gzipSync } = await import("node:zlib");
    const server = createServer((req, res) => {
      req.resume();
      if (req.url === "/reset") return void res.writeHead(205).end();
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
      res.end(gzipSync(JSON.stringify({ ok: true })));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    try {
      const r = await send(`http://127.0.0.1:${port}/`, { method: "POST", body: "{}" });
      expect([r.headers.get("content-encoding"), await r.json()]).toEqual([null, { ok: true }]);
      const reset = await send(`http://127.0.0.1:${port}/reset`, { method: "POST", body: "{}" });
      expect([reset.status, await reset.text()]).toEqual([205, ""]);
    } finally {
      server.close();
    }
  });

  it("a stream, asked for as one, comes as it is sent; an abort ends a call still waiting", async () => {
    const s = await post({ ...ask, stream: true });
    expect(s.headers.get("content-type")).toContain("text/event-stream");
    const text = await s.text();
    expect(text).toContain("data: [DONE]");
    fault.setScript({ rules: [{ headersDelayMs: 5_000 }] });
    const ac = new AbortController();
    const waiting = post(ask, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("cut")), 50);
    await expect(waiting).rejects.toThrow();
    fault.setScript({});
  });
});
