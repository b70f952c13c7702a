import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classify } from "../../src/core/classify.ts";
import { gatewayFetch } from "../../src/gateway/transport.ts";
import { type FaultServer, startFaultServer } from "../../src/testing/fault-server/server.ts";

// The gateway's transport: Node's HTTP client under a fetch-shaped function, answering as
// fetch would.
let fault: FaultServer;
let send: ReturnType<typeof gatewayFetch>;
beforeAll(async () => {
  fault = await startFaultServer();
  send = gatewayFetch();
});
afterAll(() => {
  send?.close();
  return fault?.close();
});

const post = (body: object, init: RequestInit = {}) =>
  send(`${fault.url}/v1/chat/completions`, {
    method: "POST",
    headers: new Headers({ "content-type": "application/json", authorization: "Bearer k" }),
    body: JSON.stringify(body),
    ...init,
  });
const ask = { model: "m", messages: [{ role: "user", content: "hi" }] };

describe("the gateway's transport (gatewayFetch)", () => {
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

  it("a JSON answer is read once, as a body is, by any of fetch's readers; other bytes stay bytes", async () => {
    const { createServer } = await import("node:http");
    const bytes = Uint8Array.from([0, 255, 128, 10]); // no UTF-8: kept as sent
    const server = createServer((req, res) => {
      req.resume();
      if (req.url === "/bin")
        return void res.writeHead(200, { "content-type": "application/octet-stream" }).end(bytes);
      res.writeHead(201, { "content-type": "application/json", "x-up": "1" }).end('{"a":"é"}');
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const once = () => send(`${url}/`, { method: "POST", body: "{}" });
      const a = await once();
      expect([a.status, a.statusText, a.ok, a.headers.get("x-up"), a.url]).toEqual([
        201,
        "Created",
        true,
        "1",
        `${url}/`,
      ]);
      expect([a.bodyUsed, await a.text(), a.bodyUsed]).toEqual([false, '{"a":"é"}', true]);
      await expect(a.json()).rejects.toThrow(TypeError); // read already
      const b = await once();
      expect(new TextDecoder().decode(await b.arrayBuffer())).toBe('{"a":"é"}');
      const c = await once();
      const read = await new Response(c.body).json(); // its body, as a stream
      expect(read).toEqual({ a: "é" });
      const clone = (await once()).clone();
      expect(await clone.json()).toEqual({ a: "é" });
      const bin = await send(`${url}/bin`, { method: "POST", body: "{}" });
      expect(new Uint8Array(await bin.arrayBuffer())).toEqual(bytes);
    } finally {
      server.close();
    }
  });

  it("a compressed answer is decoded, as fetch would, a stream as it comes; a 205 has no body", async () => {
    const { createServer } = await import("node:http");
    const { gzipSync, createBrotliCompress, constants } = await import("node:zlib");
    const server = createServer((req, res) => {
      req.resume();
      if (req.url === "/reset") return void res.writeHead(205).end();
      if (req.url === "/stream") {
        res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "br" });
        const br = createBrotliCompress();
        br.pipe(res);
        br.write("data: one\n\n");
        // Flushed: the first event reaches the client before the second is sent.
        br.flush(constants.BROTLI_OPERATION_FLUSH, () =>
          setTimeout(() => br.end("data: two\n\n"), 30),
        );
        return;
      }
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
      const stream = await send(`http://127.0.0.1:${port}/stream`, { method: "POST", body: "{}" });
      expect(stream.headers.get("content-encoding")).toBeNull();
      const reader = stream.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      expect(first).toBe("data: one\n\n"); // before the second was sent
      let rest = "";
      for (let r = await reader.read(); !r.done; r = await reader.read())
        rest += new TextDecoder().decode(r.value);
      expect(rest).toBe("data: two\n\n");
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
    // An abort after the headers ends the body's read.
    fault.setScript({ rules: [{ stream: { after: 1, action: "stall" } }] });
    const late = new AbortController();
    const open = await post({ ...ask, stream: true }, { signal: late.signal });
    const reading = open.body!.getReader();
    await reading.read(); // the first chunk
    setTimeout(() => late.abort(new Error("cut")), 20);
    await expect(
      (async () => {
        for (;;) if ((await reading.read()).done) return "ended";
      })(),
    ).rejects.toThrow();
    fault.setScript({});
  });

  it("an idle connection is let go before a server would close it; a call in flight is never cut by that", async () => {
    const { createServer } = await import("node:http");
    let connections = 0;
    const server = createServer((req, res) => {
      req.resume();
      const wait = req.url === "/slow" ? 700 : 0; // longer than the idle timeout below
      setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end("{}"), wait);
    });
    server.on("connection", () => connections++);
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const idle = gatewayFetch(300);
    try {
      expect((await idle(`${url}/slow`, { method: "POST", body: "{}" })).status).toBe(200);
      expect((await idle(`${url}/`, { method: "POST", body: "{}" })).status).toBe(200);
      expect(connections).toBe(1); // kept alive between calls
      await new Promise((r) => setTimeout(r, 900));
      expect((await idle(`${url}/`, { method: "POST", body: "{}" })).status).toBe(200);
      expect(connections).toBe(2); // the idle one was let go; a new one opened
    } finally {
      idle.close();
      server.close();
    }
  });

  it("a body cut short (by its length, chunked, a stream) fails as a transport failure, retried", async () => {
    const { createServer } = await import("node:net");
    const heads = {
      length:
        'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a":',
      chunked:
        'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"a":\r\n',
      stream:
        'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\nf\r\ndata: {"a":1}\n\n\r\n',
    };
    let now: keyof typeof heads = "length";
    const server = createServer((socket) =>
      socket.once("data", () => {
        socket.write(heads[now]);
        setTimeout(() => socket.destroy(), 30);
      }),
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
    try {
      for (const cut of Object.keys(heads) as (keyof typeof heads)[]) {
        now = cut;
        const error = await send(url, { method: "POST", body: "{}" })
          .then((r) => r.text())
          .catch((e: unknown) => e);
        expect(classify(error).kind, cut).toBe("transport");
      }
    } finally {
      server.close();
    }
  });

  it("what no fetch can hand on rejects, never throws out of the client; an aborted signal rejects at once; a cancelled compressed stream lets its connection go", async () => {
    const { createServer } = await import("node:http");
    const { createGzip } = await import("node:zlib");
    const closed: string[] = [];
    const server = createServer((req, res) => {
      req.resume();
      res.once("close", () => closed.push(req.url!));
      if (req.url === "/zstd")
        return void res
          .writeHead(200, { "content-type": "text/event-stream", "content-encoding": "zstd" })
          .end("x");
      if (req.url === "/600")
        return void res.writeHead(600, { "content-type": "text/event-stream" }).end();
      res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip" });
      const gz = createGzip();
      gz.pipe(res);
      gz.write("data: one\n\n");
      gz.flush(); // then nothing more: a stream that stays open
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const post = (path: string, signal?: AbortSignal) =>
      send(`${url}${path}`, { method: "POST", body: "{}", ...(signal && { signal }) });
    try {
      await expect(post("/zstd")).rejects.toThrow(/content-encoding.*zstd/);
      await expect(post("/600")).rejects.toThrow(RangeError);
      const gone = AbortSignal.abort(new Error("asked to stop"));
      await expect(post("/open", gone)).rejects.toThrow("asked to stop");
      const open = await post("/open");
      const reader = open.body!.getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toBe("data: one\n\n");
      await reader.cancel();
      for (let i = 0; i < 50 && !closed.includes("/open"); i++)
        await new Promise((r) => setTimeout(r, 20));
      expect(closed).toContain("/open"); // the server saw its connection go
    } finally {
      server.close();
      server.closeAllConnections();
    }
  });

  it("over HTTPS: a trusted certificate answers (its name checked); an untrusted one fails as TLS, no retry", async () => {
    const { createServer } = await import("node:https");
    const { readFileSync } = await import("node:fs");
    const { execFile } = await import("node:child_process");
    const tls = new URL("../fixtures/tls/", import.meta.url);
    const server = createServer(
      {
        key: readFileSync(new URL("localhost.key", tls)),
        cert: readFileSync(new URL("localhost.crt", tls)),
      },
      (req, res) => {
        req.resume();
        res.writeHead(200, { "content-type": "application/json" }).end('{"over":"tls"}');
      },
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    try {
      // Untrusted here: the self-signed certificate fails the handshake, as configuration.
      const error = await send(`https://localhost:${port}/`, { method: "POST", body: "{}" }).catch(
        (e: unknown) => e,
      );
      expect(String((error as { code?: string }).code)).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
      expect(classify(error).kind).toBe("unknown");
      // Trusted by a process that adds it (NODE_EXTRA_CA_CERTS, as a corporate CA would be).
      const transport = new URL("../../src/gateway/transport.ts", import.meta.url).href;
      const script = `const { gatewayFetch } = await import(${JSON.stringify(transport)});
        const send = gatewayFetch();
        const r = await send("https://localhost:${port}/", { method: "POST", body: "{}" });
        console.log(r.status, JSON.stringify(await r.json()));
        send.close();`;
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          process.execPath,
          ["--input-type=module", "-e", script],
          { env: { ...process.env, NODE_EXTRA_CA_CERTS: new URL("localhost.crt", tls).pathname } },
          (e, stdout, stderr) =>
            e ? reject(new Error(`${e.message}\n${stderr}`)) : resolve(stdout),
        ),
      );
      expect(out.trim()).toBe('200 {"over":"tls"}');
    } finally {
      server.close();
    }
  });
});
