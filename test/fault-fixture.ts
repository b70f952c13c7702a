import { afterAll, beforeAll, beforeEach } from "vitest";
import type { FaultScript } from "../src/testing/fault-server/script.ts";
import { type FaultServer, startFaultServer } from "../src/testing/fault-server/server.ts";

/** A fault server for one test file, reset before each test. */
export function useFaultServer() {
  const ctx = { server: undefined as unknown as FaultServer };
  beforeAll(async () => {
    ctx.server = await startFaultServer();
  });
  afterAll(() => ctx.server.close());
  beforeEach(() => {
    ctx.server.setScript({});
    ctx.server.resetStats();
  });
  return {
    get server() {
      return ctx.server;
    },
    script(s: FaultScript) {
      ctx.server.setScript(s);
    },
    requests(): number {
      return ctx.server.stats().requests;
    },
    /** ms between the first two arrivals. */
    gap(): number {
      const t = ctx.server.stats().timeline;
      return t[1]!.at - t[0]!.at;
    },
  };
}
