import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll } from "vitest";

/** A TCP listener that never accepts: its backlog is full, so a connect hangs in SYN_SENT.
 * A child process that blocks its event loop right after listening. */
const BLACKHOLE = `
import net from "node:net";
const s = net.createServer();
s.listen({ port: 0, host: "127.0.0.1", backlog: 1 }, () => {
  process.stdout.write(s.address().port + "\\n");
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
});`;

/** A blackhole for the suite that calls it: `port()` once it listens; killed after. */
export function useBlackhole(): { port: () => number } {
  let child: ChildProcess;
  let port = 0;
  const fill: Socket[] = [];
  beforeAll(async () => {
    child = spawn(process.execPath, ["--input-type=module", "-e", BLACKHOLE], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const [line] = (await once(child.stdout!, "data")) as [Buffer];
    port = Number(line.toString().trim());
    // Fill the accept queue: from here on the kernel drops new SYNs.
    for (let i = 0; i < 4; i++) fill.push(connect(port, "127.0.0.1").on("error", () => {}));
    await new Promise((r) => setTimeout(r, 100));
  });
  afterAll(() => {
    for (const s of fill) s.destroy();
    child.kill("SIGKILL");
  });
  return { port: () => port };
}
