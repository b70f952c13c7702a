import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const cli = (...args: string[]) => run(process.execPath, ["src/cli/main.ts", ...args]);

describe("the breakwater command", () => {
  /** Starts `breakwater fault-server` with `args`; `use` gets its URL; stopped with SIGTERM. */
  async function withFaultServer(
    args: string[],
    use: (url: string, out: () => string) => Promise<void>,
  ) {
    const child = spawn(
      process.execPath,
      ["src/cli/main.ts", "fault-server", "--port", "0", ...args],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    try {
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on("data", (d) => {
          out += d;
          // The whole banner: the last line names the faults, if any, else the stats.
          const last = args.includes("--fail-first") ? "faults:.*\n" : "stats:.*\n";
          const m = new RegExp(`listening on (http://127\\.0\\.0\\.1:\\d+)[\\s\\S]*${last}`).exec(
            out,
          );
          if (m) resolve(m[1]!);
        });
        child.once("exit", (code) => reject(new Error(`exited early with ${code}`)));
      });
      await use(url, () => out);
    } finally {
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
  }
  const chat = (url: string) =>
    fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: [] }),
    }).then((r) => r.status);

  it("fault-server: listens on loopback, serves its stats, stops on SIGTERM", async () => {
    await withFaultServer([], async (url) => {
      expect(await chat(url)).toBe(200);
      const stats = await (await fetch(`${url}/__stats`)).json();
      expect(stats.requests).toBe(1);
    });
  });

  it("fault-server --fail-first 2: the first two requests answer 503, then it is healthy", async () => {
    await withFaultServer(["--fail-first", "2"], async (url, out) => {
      expect(out()).toMatch(/the first 2 requests of each route answer 503/);
      expect([await chat(url), await chat(url), await chat(url)]).toEqual([503, 503, 200]);
    });
    const both = await cli("fault-server", "--fail-first", "1", "--script", "x.json").catch(
      (e) => e,
    );
    expect(both.stderr).toMatch(/--script and --fail-first: give one/);
    const bad = await cli("fault-server", "--fail-first=-1").catch((e) => e);
    expect(bad.stderr).toMatch(/--fail-first must be an integer from 0 to 1000000; got "-1"/);
  });

  it("fault-server -- command: runs it once listening, the SDKs pointed at it, and exits with its code", async () => {
    // The command's first request is sent the moment it starts: it must meet a listening
    // server (the README's one-line quickstart cannot race), the first of them failing.
    const probe = `const u = process.env.OPENAI_BASE_URL;
      const s = [];
      for (let i = 0; i < 3; i++) s.push((await fetch(u + "/chat/completions", { method: "POST", body: "{}" })).status);
      console.log(JSON.stringify({ s, key: process.env.OPENAI_API_KEY, a: process.env.ANTHROPIC_BASE_URL === u.slice(0, -3) }));
      process.exitCode = 7;`;
    const r = await cli(
      "fault-server",
      "--port",
      "0",
      "--fail-first",
      "1",
      "--",
      process.execPath,
      "--input-type=module",
      "-e",
      probe,
    ).catch((e) => e);
    expect(r.code).toBe(7);
    expect(JSON.parse(r.stdout)).toEqual({ s: [503, 200, 200], key: "test", a: true });
    const missing = await cli("fault-server", "--port", "0", "--", "no-such-command-x").catch(
      (e) => e,
    );
    expect(missing.stderr).toMatch(/cannot run no-such-command-x: spawn no-such-command-x ENOENT/);
    const none = await cli("fault-server", "--").catch((e) => e);
    expect(none.stderr).toMatch(/-- names no command/);
  });

  it("storm: one scenario, chosen stacks, a table; bad options are named", async () => {
    const r = await cli(
      "storm",
      "--scenario",
      "blip",
      "--stacks",
      "naive,breakwater",
      "--seed",
      "3",
    );
    expect(r.stdout).toMatch(/^blip: /m);
    expect(r.stdout).toMatch(/^\s+naive\s+\d+/m);
    expect(r.stdout).toMatch(/^\s+breakwater\s+\d+/m);
    expect(r.stdout).not.toMatch(/openai-sdk/);
    const bad = await cli("storm", "--stacks", "nope").catch((e) => e);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--stacks: unknown stack "nope"; one of naive, openai-sdk/);
  });

  it("storm --arrivals: your own request log replayed in a scenario, across threads as in one; a bad log is named", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bw-arrivals-"));
    try {
      // Three requests a second for three minutes, its own column names.
      const rows = Array.from(
        { length: 540 },
        (_, i) => `${(i / 3).toFixed(3)},${800 + (i % 7) * 100},${50 + (i % 5) * 20}`,
      );
      const log = join(dir, "log.csv");
      writeFileSync(log, ["at,prompt,completion", ...rows].join("\n"));
      const args = ["storm", "--scenario", "blip,outage-503", "--stacks", "naive,breakwater"];
      const columns = [
        "--time-column",
        "at",
        "--input-column",
        "prompt",
        "--output-column",
        "completion",
      ];
      const one = join(dir, "one.json");
      const two = join(dir, "two.json");
      await cli(...args, "--arrivals", log, ...columns, "--threads", "1", "--json", one);
      await cli(...args, "--arrivals", log, ...columns, "--threads", "2", "--json", two);
      expect(readFileSync(two, "utf8")).toBe(readFileSync(one, "utf8"));
      const report = JSON.parse(readFileSync(one, "utf8"));
      expect(report.scenarios.map((s: { replayed: number }) => s.replayed)).toEqual([540, 540]);
      expect(report.scenarios[0].scenario.title).toMatch(/replaying your log \(540 requests\)/);
      // The blip's 5 s saw 15 of the log's first turns, each a turn of one call.
      expect(report.scenarios[0].results[0].turns.trigger.begun).toBe(15);
      const bad = await cli(...args, "--arrivals", log).catch((e) => e);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(
        /--arrivals .*log\.csv: the header: no column "TIMESTAMP" .* --time-column/,
      );
      const replay = await cli("storm", "--scenario", "replay-bursts").catch((e) => e);
      expect(replay.stderr).toMatch(
        /unknown scenario "replay-bursts".*\(replays need --traces dir\)/,
      );
      const none = await cli("storm", "--traces", dir).catch((e) => e);
      expect(none.stderr).toMatch(/--traces .*: neither AzureLLMInferenceTrace_code\.csv nor/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("storm across threads: the report is byte for byte one thread's, a --config stack too", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bw-threads-"));
    try {
      const config = join(dir, "stacks.mjs");
      const storm = new URL("../../src/storm/index.ts", import.meta.url).href;
      writeFileSync(
        config,
        `import { breakwater } from ${JSON.stringify(storm)};\nexport const stacks = [{ ...breakwater, name: "mine" }];\n`,
      );
      const json = (threads: string) => {
        const file = join(dir, `t${threads}.json`);
        return cli(
          "storm",
          ...["--scenario", "blip,tool-deploy,tail-latency", "--stacks", "naive,mine"],
          ...["--config", config, "--threads", threads, "--json", file],
        ).then(() => readFileSync(file, "utf8"));
      };
      const [one, three] = await Promise.all([json("1"), json("3")]);
      expect(
        JSON.parse(one).scenarios.map((s: { scenario: { name: string } }) => s.scenario.name),
      ).toEqual(["blip", "tool-deploy", "tail-latency"]);
      expect(one).toMatch(/"stack":"mine"/);
      expect(three).toBe(one);
      // A stack that throws (in metastable) ends the storm, named as in one thread, and
      // the other scenarios' threads are stopped, not waited for: the thread on outage-503
      // never reaches degradation or rate-limit (the stack notes each scenario it runs in).
      const boom = join(dir, "boom.mjs");
      const ran = join(dir, "ran.txt");
      writeFileSync(ran, "");
      writeFileSync(
        boom,
        [
          'import { appendFileSync } from "node:fs";',
          `import { naive } from ${JSON.stringify(storm)};`,
          'export const stacks = [{ ...naive, name: "boom", create: (ctx) => {',
          '  if (ctx.attemptTimeoutMs !== undefined) throw new Error("boom in create");',
          `  appendFileSync(${JSON.stringify(ran)}, "ran\\n");`,
          "  return naive.create(ctx);",
          "} }];",
        ].join("\n"),
      );
      const failed = await cli(
        "storm",
        ...["--config", boom, "--stacks", "naive,boom", "--threads", "2"],
        ...["--scenario", "metastable,outage-503,degradation,rate-limit"],
      ).catch((e) => e);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain("breakwater: boom in create");
      expect(readFileSync(ran, "utf8").split("\n").filter(Boolean).length).toBeLessThanOrEqual(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("an unknown command fails in one line; no command prints the usage", async () => {
    const r = await cli("frobnicate").catch((e) => e);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'breakwater: unknown command "frobnicate" (breakwater --help lists them)\n',
    );
    const none = await cli().catch((e) => e);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/storm\s+simulate an outage/);
  });

  it("a reader that stops reading ends the command quietly (exit 0, nothing on stderr), as `| head` does", async () => {
    const child = spawn(process.execPath, ["src/cli/main.ts", "demo"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.stdout.once("data", () => child.stdout.destroy());
    const code = await new Promise<number | null>((r) => child.once("exit", r));
    expect([code, stderr]).toEqual([0, ""]);
  });

  it("--version, and --help for every command", async () => {
    const { version } = JSON.parse(readFileSync("package.json", "utf8"));
    expect((await cli("--version")).stdout).toBe(`${version}\n`);
    for (const command of ["storm", "fault-server", "audit", "demo"])
      expect((await cli(command, "--help")).stdout).toMatch(
        new RegExp(`^usage: breakwater ${command}`),
      );
  });

  it.each([
    [["demo", "--bogus"], "breakwater: demo: Unknown option '--bogus'"],
    [
      ["fault-server", "--port", "abc"],
      'breakwater: --port must be an integer from 0 to 65535; got "abc"',
    ],
    [["storm", "--seed", "99999999999999999999"], "--seed must be an integer from 0 to 4294967295"],
    [
      ["storm", "--seed", "-1"],
      "breakwater: storm: --seed takes a value; for a negative one write --seed=-N",
    ],
    [["storm", "--config", "nope.mjs"], "breakwater: --config nope.mjs: no such file"],
    [["fault-server", "--script", "nope.json"], "breakwater: --script nope.json: no such file"],
    [["storm", "--scenario", "nope"], 'breakwater: --scenario: unknown scenario "nope"'],
    [
      ["storm", "--threads", "0"],
      'breakwater: --threads must be an integer from 1 to 256; got "0"',
    ],
  ])("%j: one line naming what is wrong, exit 2", async (args, message) => {
    const r = await cli(...args).catch((e) => e);
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n").filter(Boolean)).toHaveLength(1);
    expect(r.stderr).toContain(message);
  });

  it("an output that cannot be written fails before the simulation, not after it", async () => {
    const started = performance.now();
    const r = await cli("storm", "--html", "/nonexistent/x.html").catch((e) => e);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--html \/nonexistent\/x.html: cannot write there/);
    expect(performance.now() - started).toBeLessThan(5_000); // the full storm takes far longer
  });

  it("a config or script that fails is named, in one line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "breakwater-cli-"));
    writeFileSync(join(dir, "bad.mjs"), 'throw new Error("boom in config");');
    writeFileSync(join(dir, "bad.json"), '{"rules": [{"status": 7}]}');
    const config = await cli("storm", "--config", join(dir, "bad.mjs")).catch((e) => e);
    expect(config.stderr).toBe(`breakwater: --config ${join(dir, "bad.mjs")}: boom in config\n`);
    const script = await cli("fault-server", "--script", join(dir, "bad.json")).catch((e) => e);
    expect(script.stderr).toMatch(
      /--script .*bad\.json: fault script: option "rules\[0\]\.status"/,
    );
    rmSync(dir, { recursive: true });
  });
});
