import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

// The gateway's overhead on loopback (npm run bench -- gateway): the same requests to a
// mock upstream directly, through a bare Node pass-through proxy (the floor: one more HTTP
// decode and encode each way), through `breakwater gateway` and through Portkey's gateway
// (`@portkey-ai/gateway` from npm, installed into node_modules/.cache on the first run), each
// server its own process, measured side by side in one run, interleaved, at 1 and at 32
// clients at once: a JSON answer's whole time, and a stream's time to its first byte.

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

/** A streamed answer: twenty content chunks, the finish, the usage and [DONE]. */
const chunk = (delta: object, finish: string | null, usage: object | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created: 1, model: "m", choices: usage ? [] : [{ index: 0, delta, finish_reason: finish }], usage })}\n\n`;
const SSE = [
  chunk({ role: "assistant", content: "" }, null),
  ...Array.from({ length: 20 }, () => chunk({ content: "word " }, null)),
  chunk({}, "stop"),
  chunk({}, null, { prompt_tokens: 5, completion_tokens: 20, total_tokens: 25 }),
  "data: [DONE]\n\n",
].join("");
const STREAM_BODY = JSON.stringify({
  model: "m",
  stream: true,
  messages: [{ role: "user", content: "hi" }],
});

const UPSTREAM = `
const http = require("node:http");
const answer = ${JSON.stringify(ANSWER)};
const sse = ${JSON.stringify(SSE)};
const s = http.createServer((req, res) => { let body = ""; req.on("data", (d) => (body += d)); req.on("end", () => {
  if (body.includes('"stream":true')) {
    res.writeHead(200, { "content-type": "text/event-stream" });
    return res.end(sse);
  }
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

/** Where a request goes: its port and the headers that route it there. */
interface Target {
  readonly name: string;
  readonly port: number;
  readonly headers: Record<string, string>;
}

/** One request's latency in ns: to the end of a JSON answer, or to a stream's first byte. */
function once(to: Target, stream: boolean): Promise<number> {
  const body = stream ? STREAM_BODY : BODY;
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = request(
      {
        host: "127.0.0.1",
        port: to.port,
        path: "/v1/chat/completions",
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          authorization: "Bearer k",
          "content-length": Buffer.byteLength(body),
          ...to.headers,
        },
      },
      (res) => {
        let first: number | undefined;
        res.on("data", () => {
          first ??= Number(process.hrtime.bigint() - t0);
        });
        res.on("end", () => {
          if (res.statusCode !== 200) reject(new Error(`${to.name}: status ${res.statusCode}`));
          else resolve(stream ? first! : Number(process.hrtime.bigint() - t0));
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** `n` requests by `clients` at once: every latency. */
async function load(to: Target, stream: boolean, n: number, clients: number): Promise<number[]> {
  const out: number[] = [];
  let left = n;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (left-- > 0) out.push(await once(to, stream));
    }),
  );
  return out;
}

const PORTKEY = "@portkey-ai/gateway@1.15.2";

/** Portkey's gateway from npm, installed once into node_modules/.cache, started headless. */
async function portkey(): Promise<{ child: ChildProcess; port: number }> {
  const dir = join(import.meta.dirname, "../node_modules/.cache/bench-portkey");
  const entry = join(dir, "node_modules/@portkey-ai/gateway/build/start-server.js");
  if (!existsSync(entry)) {
    console.log(`installing ${PORTKEY} into node_modules/.cache/bench-portkey (once)`);
    mkdirSync(dir, { recursive: true });
    execFileSync("npm", ["install", "--prefix", dir, "--no-audit", "--no-fund", PORTKEY], {
      stdio: "ignore",
    });
  }
  const port = 18_700 + Math.floor(Math.random() * 200);
  const child = spawn(process.execPath, [entry, `--port=${port}`, "--headless"], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, NODE_ENV: "production" },
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      if (String(d).includes("Ready for connections")) resolve();
    });
    child.once("exit", (c) => reject(new Error(`portkey exited ${c}`)));
  });
  return { child, port };
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
  const pk = await portkey();
  const to = (name: string, port: number, headers: Record<string, string> = {}): Target => ({
    name,
    port,
    headers,
  });
  const targets = [
    to("direct", up.port),
    to("bare proxy", proxy.port),
    to("breakwater gateway", gateway.port),
    to("portkey gateway", pk.port, {
      "x-portkey-provider": "openai",
      "x-portkey-custom-host": `http://127.0.0.1:${up.port}/v1`,
    }),
  ];
  try {
    for (const stream of [false, true])
      for (const clients of [1, 32]) {
        const n = clients === 1 ? 2_000 : 8_000;
        // A target whose requests fail is left out of this table, with why.
        const failed = new Map<string, string>();
        const sample = async (t: Target, count: number) => {
          if (failed.has(t.name)) return [];
          return load(t, stream, count, clients).catch((e: unknown) => {
            failed.set(t.name, e instanceof Error ? e.message : String(e));
            return [];
          });
        };
        for (const t of targets) await sample(t, 500); // warm-up
        const samples = new Map<string, number[]>(targets.map((t) => [t.name, []]));
        for (let round = 0; round < 6; round++)
          for (const t of round % 2 === 0 ? targets : [...targets].reverse())
            samples.get(t.name)!.push(...(await sample(t, n / 6)));
        const direct = samples.get("direct")!;
        const what = stream ? "a stream's first byte (22 events)" : "~1 KB JSON";
        console.log(
          `\ngateway, ${clients} client${clients > 1 ? "s" : ""} at once, ${n} requests each, ${what}:`,
        );
        for (const t of targets) {
          const s = samples.get(t.name)!;
          if (failed.has(t.name)) {
            console.log(`  ${t.name.padEnd(20)} failed: ${failed.get(t.name)}`);
            continue;
          }
          const added = (p: number) => (pct(s, p) - pct(direct, p)).toFixed(3);
          console.log(
            `  ${t.name.padEnd(20)} p50 ${pct(s, 0.5).toFixed(3)} ms  p99 ${pct(s, 0.99).toFixed(3)} ms   added p50 ${added(0.5)} ms  p99 ${added(0.99)} ms`,
          );
        }
      }
  } finally {
    for (const c of [up.child, proxy.child, gateway.child, pk.child]) c.kill();
    agent.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}
