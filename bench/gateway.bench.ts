import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

// The gateway's overhead on loopback (npm run bench -- gateway): the same requests to a
// mock upstream directly, through a bare Node pass-through proxy (the floor: one more HTTP
// decode and encode each way) and through `breakwater gateway`, each server its own process,
// measured side by side in one run, interleaved, at 1 and at 32 clients at once.

const ANSWER = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  model: "m",
  choices: [
    { index: 0, message: { role: "assistant", content: "x".repeat(900) }, finish_reason: "stop" },
  ],
  usage: { prompt_tokens: 5, completion_tokens: 200, total_tokens: 205 },
});
const BODY = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });

/** A process that serves `code` and prints its port. */
function serve(
  code: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ["-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ...env },
  });
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      const m = /(?:port|listening on http:\/\/127\.0\.0\.1:)\s*(\d+)/.exec(String(d));
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.once("exit", (c) => reject(new Error(`exited ${c}`)));
  });
}

const UPSTREAM = `
const http = require("node:http");
const answer = ${JSON.stringify(ANSWER)};
const s = http.createServer((req, res) => { req.resume(); req.on("end", () => {
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) });
  res.end(answer); }); });
s.keepAliveTimeout = 60000;
s.listen(0, "127.0.0.1", () => console.log("port", s.address().port));`;

/** A bare pass-through proxy: node:http in, node:http out with a keep-alive agent. */
const PROXY = (upstream: number) => `
const http = require("node:http");
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const s = http.createServer((req, res) => {
  const up = http.request({ host: "127.0.0.1", port: ${upstream}, path: req.url, method: req.method, headers: req.headers, agent }, (u) => {
    res.writeHead(u.statusCode, u.headers); u.pipe(res); });
  req.pipe(up); });
s.keepAliveTimeout = 60000;
s.listen(0, "127.0.0.1", () => console.log("port", s.address().port));`;

const agent = new (await import("node:http")).Agent({ keepAlive: true, maxSockets: 64 });

/** One request's latency in ns. */
function once(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          authorization: "Bearer k",
          "content-length": Buffer.byteLength(BODY),
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(Number(process.hrtime.bigint() - t0)));
      },
    );
    req.on("error", reject);
    req.end(BODY);
  });
}

/** `n` requests by `clients` at once: every latency. */
async function load(port: number, path: string, n: number, clients: number): Promise<number[]> {
  const out: number[] = [];
  let left = n;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (left-- > 0) out.push(await once(port, path));
    }),
  );
  return out;
}

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.floor(p * (xs.length - 1))]! / 1e6;

export async function benchGateway(): Promise<void> {
  const up = await serve(UPSTREAM);
  const proxy = await serve(PROXY(up.port));
  const dir = mkdtempSync(join(tmpdir(), "bw-gateway-bench-"));
  const config = join(dir, "gateway.json");
  writeFileSync(
    config,
    JSON.stringify({
      keys: ["k"],
      upstreams: { u: { wire: "openai", baseUrl: `http://127.0.0.1:${up.port}/v1`, apiKey: "u" } },
      models: { "*": "u" },
    }),
  );
  const gateway = await new Promise<{ child: ChildProcess; port: number }>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        join(import.meta.dirname, "../src/cli/main.ts"),
        "gateway",
        "--config",
        config,
        "--port",
        "0",
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    child.stdout!.on("data", (d) => {
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(String(d));
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.once("exit", (c) => reject(new Error(`gateway exited ${c}`)));
  });
  const targets = [
    ["direct", up.port, "/v1/chat/completions"],
    ["bare proxy", proxy.port, "/v1/chat/completions"],
    ["breakwater gateway", gateway.port, "/v1/chat/completions"],
  ] as const;
  try {
    for (const clients of [1, 32]) {
      const n = clients === 1 ? 2_000 : 8_000;
      for (const [, port, path] of targets) await load(port, path, 500, clients); // warm-up
      const samples = new Map<string, number[]>(targets.map(([name]) => [name, []]));
      for (let round = 0; round < 6; round++)
        for (const [name, port, path] of round % 2 === 0 ? targets : [...targets].reverse())
          samples.get(name)!.push(...(await load(port, path, n / 6, clients)));
      const direct = samples.get("direct")!;
      console.log(
        `\ngateway, ${clients} client${clients > 1 ? "s" : ""} at once, ${n} requests each, ~1 KB JSON:`,
      );
      for (const [name] of targets) {
        const s = samples.get(name)!;
        const added = (p: number) => (pct(s, p) - pct(direct, p)).toFixed(3);
        console.log(
          `  ${name.padEnd(20)} p50 ${pct(s, 0.5).toFixed(3)} ms  p99 ${pct(s, 0.99).toFixed(3)} ms   added p50 ${added(0.5)} ms  p99 ${added(0.99)} ms`,
        );
      }
    }
  } finally {
    for (const c of [up.child, proxy.child, gateway.child]) c.kill();
    agent.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}
