import { backgroundClock, type Clock } from "../index.ts";
import { opt, parseOptions, Validator } from "../internal.ts";

/** What breakwater needs of a Redis client: one command at a time (node-redis's
 * `sendCommand`; wrap ioredis as `{ sendCommand: (a) => redis.call(a[0], ...a.slice(1)) }`). */
export interface RedisLike {
  /** Sends one command (["EVALSHA", sha, ...]) and resolves with its reply. */
  sendCommand(args: string[]): Promise<unknown>;
}

/** Options of a `fleet`. */
export interface FleetOptions {
  /** A connected client. Create it with `disableOfflineQueue: true` so commands fail at
   * once while it is disconnected (they time out otherwise). */
  client: RedisLike;
  /** Prefix of every key. @default "breakwater" */
  prefix?: string;
  /** How often each process syncs its shared state (the staleness bound). @default 100 */
  syncMs?: number;
  /** A sync slower than this has failed. @default 250 */
  timeoutMs?: number;
  /** With no good sync for this long (or after a failed one), decisions are local until
   * Redis answers again. @default 1000 */
  staleAfterMs?: number;
  /** Times the syncs and the staleness. @default backgroundClock (its timers never keep a
   * process alive) */
  clock?: Clock;
}

/** One piece of shared state: syncs its local changes and reads the fleet's. The fleet
 * never runs two syncs of one member at once. */
export interface Member {
  sync(): Promise<void>;
}

const CLIENT = "a Redis client with sendCommand (node-redis)";

/** The one table of a fleet's options. */
const FLEET = {
  client: opt.any<RedisLike>(
    (c) => typeof (c as RedisLike | null)?.sendCommand === "function",
    CLIENT,
  ),
  prefix: opt.str({
    pattern: /^[^{}\s]+$/,
    allowed: "a non-empty string without braces or spaces",
  }),
  syncMs: opt.int({ min: 1, default: 100 }),
  timeoutMs: opt.int({ min: 1, default: 250 }),
  staleAfterMs: opt.int({ min: 1, default: 1000 }),
  clock: opt.clock(),
};

/** Slots per sliding window of counts (as the local admission and breaker keep). */
export const SLOTS = 10;

/**
 * The Lua prelude of a script that keeps two counts per time slot in hashes under
 * `KEYS[base]` (fields `x` and `y`), on the server's clock so every process agrees:
 * `slot` is the current slot for a width of ARGV[1] ms; `add(x, y)` adds to it (expiring
 * with the window); `total()` sums the window; `clear()` starts a fresh one.
 */
export const windowLua = (base: number, x: string, y: string): string => `
local t = redis.call('TIME')
local width = tonumber(ARGV[1])
local slot = math.floor((tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) / width)
local function add(dx, dy)
  if tonumber(dx) <= 0 then return end
  local key = KEYS[${base}] .. ':' .. slot
  redis.call('HINCRBY', key, '${x}', dx)
  redis.call('HINCRBY', key, '${y}', dy)
  redis.call('PEXPIRE', key, width * ${SLOTS + 1})
end
local function total()
  local sx, sy = 0, 0
  for i = 0, ${SLOTS - 1} do
    local v = redis.call('HMGET', KEYS[${base}] .. ':' .. (slot - i), '${x}', '${y}')
    sx = sx + (tonumber(v[1]) or 0)
    sy = sy + (tonumber(v[2]) or 0)
  end
  return sx, sy
end
local function clear()
  for i = 0, ${SLOTS - 1} do redis.call('DEL', KEYS[${base}] .. ':' .. (slot - i)) end
end
`;

/** A Lua script run by its SHA, loaded on first use (and again after a Redis restart). */
export class Script {
  readonly #src: string;
  #sha: string | undefined;
  constructor(src: string) {
    this.#src = src;
  }
  async run(client: RedisLike, keys: string[], args: (string | number)[]): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args.map(String)];
    if (this.#sha !== undefined) {
      try {
        return await client.sendCommand(["EVALSHA", this.#sha, ...tail]);
      } catch (error) {
        if (!String((error as Error)?.message).includes("NOSCRIPT")) throw error;
      }
    }
    this.#sha = String(await client.sendCommand(["SCRIPT", "LOAD", this.#src]));
    return client.sendCommand(["EVALSHA", this.#sha, ...tail]);
  }
}

/**
 * The connection every shared piece of state of this process goes through, and its health
 * (docs/architecture.md, rule 18): one background loop syncs them all every `syncMs`;
 * decisions never wait on it. With no good sync for `staleAfterMs`, every member decides
 * on its local state, and rejoins at the first good sync.
 */
export class Fleet {
  readonly client: RedisLike;
  readonly prefix: string;
  readonly syncMs: number;
  readonly timeoutMs: number;
  readonly staleAfterMs: number;
  readonly clock: Clock;
  readonly #members = new Set<Member>();
  /** Each member's sync under way (one that outlived a timeout is joined, not doubled). */
  readonly #syncing = new Map<Member, Promise<void>>();
  #lastOk = Number.NEGATIVE_INFINITY;
  #lastError: unknown;
  #lastFailed = false;
  #running: Promise<void> | undefined;
  #queued: Promise<void> | undefined;
  #loop: (() => void) | undefined;
  #syncs = 0;
  #failures = 0;

  constructor(options: FleetOptions) {
    const v = new Validator("fleet");
    const o = parseOptions(v, FLEET, options);
    this.client = o.client ?? v.fail("client", undefined, CLIENT);
    this.prefix = o.prefix ?? "breakwater";
    this.syncMs = o.syncMs;
    this.timeoutMs = o.timeoutMs;
    this.staleAfterMs = o.staleAfterMs;
    this.clock = o.clock ?? backgroundClock;
  }

  /** Whether to decide on the fleet's state: the last sync worked, and recently. A failed
   * sync turns every decision local at once; the next good one brings it back. */
  get healthy(): boolean {
    return this.#lastFailed === false && this.clock.now() - this.#lastOk <= this.staleAfterMs;
  }

  /** Syncs so far, failed ones, and the last error (what an alert reads). */
  get stats(): { syncs: number; failures: number; lastError: unknown; healthy: boolean } {
    return {
      syncs: this.#syncs,
      failures: this.#failures,
      lastError: this.#lastError,
      healthy: this.healthy,
    };
  }

  /** The key of one upstream's piece of state; the upstream in braces keeps every key of
   * one upstream in one Redis Cluster slot. */
  key(upstream: string, what: string): string {
    return `${this.prefix}:{${upstream}}:${what}`;
  }

  /** Adds a piece of shared state to this process's sync loop (its constructor does). */
  join(m: Member): void {
    this.#members.add(m);
    if (this.#loop === undefined) {
      this.#arm();
      void this.sync();
    }
  }

  #arm(): void {
    this.#loop = this.clock.schedule(this.syncMs, () => {
      if (this.#loop === undefined) return; // closed
      if (this.#running === undefined) void this.sync();
      this.#arm();
    });
  }

  /** Syncs every member now, after the sync under way if there is one (so what was
   * recorded before the call is in it); never rejects. */
  sync(): Promise<void> {
    if (this.#queued !== undefined) return this.#queued;
    const start = () => {
      this.#queued = undefined;
      const run = this.#syncAll().finally(() => {
        if (this.#running === run) this.#running = undefined;
      });
      this.#running = run;
      return run;
    };
    if (this.#running === undefined) return start();
    this.#queued = this.#running.then(start);
    return this.#queued;
  }

  async #syncAll(): Promise<void> {
    this.#syncs++;
    let cancel: (() => void) | undefined;
    const late = new Promise<never>((_, reject) => {
      cancel = this.clock.schedule(this.timeoutMs, () =>
        reject(new Error(`no answer from Redis within ${this.timeoutMs} ms`)),
      );
    });
    try {
      const all = Promise.all([...this.#members].map((m) => this.syncMember(m)));
      await Promise.race([all, late]);
      this.#lastOk = this.clock.now();
      this.#lastFailed = false;
    } catch (error) {
      this.#lastFailed = true;
      this.#failures++;
      this.#lastError = error;
    } finally {
      cancel?.();
    }
  }

  /** Syncs one member now, or joins its sync under way; rejects when it fails. */
  syncMember(m: Member): Promise<void> {
    let p = this.#syncing.get(m);
    if (p === undefined) {
      p = m.sync().finally(() => this.#syncing.delete(m));
      this.#syncing.set(m, p);
    }
    return p;
  }

  /** Stops syncing (the client is yours to close). */
  close(): void {
    this.#loop?.();
    this.#loop = undefined;
  }
}
