import {
  AdaptiveAdmission,
  type AdaptiveAdmissionOptions,
  type Admission,
  type AdmissionAsk,
  type Failure,
  isUpstreamKind,
} from "../index.ts";
import { type Fleet, type Member, Script, SLOTS, windowLua } from "./state.ts";

/** Adds this process's attempts and accepts to the fleet's window and returns the
 * fleet's totals over it. */
const COUNT = new Script(`${windowLua(1, "a", "c")}
add(ARGV[2], ARGV[3])
local a, c = total()
return {a, c}`);

/**
 * Overload-aware admission over the whole fleet (docs/architecture.md, rule 18): the
 * adaptive throttle of `AdaptiveAdmission`, fed by every process's attempts and accepts
 * (counted in Redis per time slot), so a process that has sent nothing yet already knows
 * the upstream is saturated. A decision reads the fleet's totals as of the last sync plus
 * this process's own since: no round trip. While Redis is unreachable, the process's own
 * AdaptiveAdmission (fed all along) decides.
 */
export class SharedAdaptiveAdmission implements Admission, Member {
  readonly #fleet: Fleet;
  readonly #key: string;
  readonly #local: AdaptiveAdmission;
  #attempts = 0;
  #accepts = 0;
  #fleetAttempts = 0;
  #fleetAccepts = 0;

  constructor(
    fleet: Fleet,
    upstream: string,
    options: Omit<AdaptiveAdmissionOptions, "clock"> = {},
  ) {
    this.#local = new AdaptiveAdmission(options);
    this.#fleet = fleet;
    this.#key = fleet.key(upstream, "admission");
    fleet.join(this);
  }

  /** The probability a retry asked for now is refused, from the fleet's counts. */
  get rejectProbability(): number {
    if (!this.#fleet.healthy) return this.#local.rejectProbability;
    const a = this.#fleetAttempts + this.#attempts;
    const c = this.#fleetAccepts + this.#accepts;
    return Math.max(0, (a - this.#local.k * c) / (a + 1));
  }

  tryAcquire(failure?: Failure, ask?: AdmissionAsk): boolean {
    if (!this.#fleet.healthy) return this.#local.tryAcquire(failure, ask);
    // The fleet's share refused, ranked by this process's mix of asks (rule 23).
    return this.#local.admitsAt(this.rejectProbability, failure, ask);
  }

  onSuccess(at?: number): void {
    this.#attempts++;
    this.#accepts++;
    this.#local.onSuccess(at);
  }

  onFailure(failure: Failure, at?: number): void {
    if (failure.kind === "cancelled") return;
    this.#attempts++;
    if (!isUpstreamKind(failure.kind)) this.#accepts++;
    this.#local.onFailure(failure, at);
  }

  /** Sends what this process counted since the last sync and reads the fleet's state
   * (one Lua script; the fleet's loop calls it). */
  async sync(): Promise<void> {
    const attempts = this.#attempts;
    const accepts = this.#accepts;
    this.#attempts = 0;
    this.#accepts = 0;
    const width = Math.max(1, Math.round(this.#local.windowMs / SLOTS));
    try {
      const [a, c] = (await COUNT.run(
        this.#fleet.client,
        [this.#key],
        [width, attempts, accepts],
      )) as [number, number];
      this.#fleetAttempts = Number(a);
      this.#fleetAccepts = Number(c);
    } catch (error) {
      this.#attempts += attempts;
      this.#accepts += accepts;
      throw error;
    }
  }
}
