import type { Clock } from "../core/clock.ts";
import { BreakwaterError } from "../core/errors.ts";
import type { RunLimits } from "./limits.ts";

/**
 * What the model was told about the tool calls that failed in one run, by tool and
 * arguments: the re-call guard (docs/architecture.md, rule 13). A model calling the same
 * tool with the same arguments again gets the recorded answer while it stands, and the
 * dependency is not called; each such re-call is counted.
 */
export class ToolMemo {
  readonly #answers = new Map<string, { answer: unknown; until: number }>();
  readonly #limits: RunLimits;
  readonly #clock: Clock;

  constructor(limits: RunLimits, clock: Clock) {
    this.#limits = limits;
    this.#clock = clock;
  }

  /** Throws `run-tool-failures` once the run has seen as many tool failures as it allows. */
  checkCap(): void {
    const cap = this.#limits.caps.maxToolFailures;
    if (this.#limits.stats.toolFailures >= cap)
      throw new BreakwaterError(
        "run-tool-failures",
        {},
        `the run hit its cap of ${cap} tool failures`,
      );
  }

  /** Records what the model was told about a failed call, standing for `forMs`. */
  remember(key: string, answer: unknown, forMs: number): void {
    this.#limits.count("toolFailures");
    this.#answers.set(key, { answer, until: this.#clock.now() + forMs });
  }

  /** The standing answer to this exact call, counted as a model re-call; else undefined. */
  recall(key: string): unknown {
    const hit = this.#answers.get(key);
    if (hit === undefined) return undefined;
    if (this.#clock.now() >= hit.until) {
      this.#answers.delete(key);
      return undefined;
    }
    this.#limits.count("modelRecalls");
    return hit.answer;
  }
}
