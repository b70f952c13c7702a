import { inTrigger, type ToolSpec } from "./scenarios.ts";
import { SimHttpError, type SimToolApi, type World } from "./types.ts";

/**
 * The payment dependency of the tool scenario. It executes charges and honours idempotency
 * keys (a repeat with a known key replays the first result). During the trigger most calls
 * are answered 503 before any work, and some execute but answer only much later, so a
 * client that times out cannot know the charge went through.
 */
export class SimTool implements SimToolApi {
  readonly #spec: ToolSpec | undefined;
  readonly #keys = new Map<string, number>();
  readonly #charged = new Set<number>();
  #executed = 0;

  /** Time, the trouble, randomness and the meters, shared with the simulation. */
  readonly #w: World;

  constructor(world: World, spec: ToolSpec | undefined) {
    this.#w = world;
    this.#spec = spec;
  }

  async call(args: { order: number }, options: { idempotencyKey?: string; signal?: AbortSignal }) {
    const spec = this.#spec;
    if (spec === undefined) throw new Error("this scenario has no tool");
    const now = this.#w.clock.now();
    this.#w.metrics.toolArrival(now);
    // Each attempt at the same turn's charge meets the same draws under every stack.
    const roll = inTrigger(this.#w.trigger, now) ? this.#w.draws.of(args.order)() : 1;
    if (roll < spec.errorRate) {
      await this.#w.clock.sleep(50);
      throw new SimHttpError(503, "injected");
    }
    const key = options.idempotencyKey;
    if (key !== undefined && this.#keys.has(key)) {
      await this.#w.clock.sleep(spec.latencyMs);
      return { executionId: this.#keys.get(key)!, replayed: true };
    }
    const id = ++this.#executed;
    if (key !== undefined) this.#keys.set(key, id);
    if (this.#charged.has(args.order)) this.#w.metrics.duplicateSideEffects++;
    this.#charged.add(args.order);
    await this.#w.clock.sleep(roll < spec.errorRate + spec.slowRate ? spec.slowMs : spec.latencyMs);
    return { executionId: id, replayed: false };
  }
}
