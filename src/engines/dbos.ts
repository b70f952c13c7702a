/**
 * DBOS: breakwater as the one retry layer inside a DBOS workflow. `step(name, fn)` is
 * `DBOS.runStep` with breakwater's policy inside and DBOS's own step retries off: short
 * waits are slept in the step, a longer one (a Retry-After of 20 s, an open breaker's
 * cool-off) is a durable `DBOS.sleepms` between two legs of the step (a step's retries have
 * no delay of their own to take it), and a final failure is thrown as it came, recorded
 * once: DBOS retries nothing.
 *
 * @example
 * ```ts
 * import { DBOS } from "@dbos-inc/dbos-sdk";
 * import OpenAI from "openai";
 * import { policy } from "breakwater";
 * import { step } from "breakwater/dbos";
 * import { withBreakwater } from "breakwater/openai";
 *
 * const p = policy();
 * const openai = withBreakwater(new OpenAI(), { policy: p });
 * export const answer = DBOS.registerWorkflow(
 *   async (question: string) =>
 *     step("answer", async ({ signal }) => {
 *       const r = await openai.chat.completions.create(
 *         { model: "gpt-4o-mini", messages: [{ role: "user", content: question }] },
 *         { signal },
 *       );
 *       return r.choices[0]?.message.content ?? "";
 *     }, { policy: p }),
 *   { name: "answer" },
 * );
 * ```
 * @module breakwater/dbos
 */
import { randomUUID } from "node:crypto";
import { DBOS } from "@dbos-inc/dbos-sdk";
import type { StepState } from "../index.ts";
import { markReason } from "../internal.ts";
import { type Leg, leg, resolveStep, type StepOptions, type StepTarget } from "./step.ts";

export type { StepContext } from "../index.ts";
export type { StepOperation, StepOptions, StepTarget } from "./step.ts";

/** What one `DBOS.runStep` leg records: the leg's outcome and the step's key. */
type Recorded<T> = Leg<T> & { readonly key: string };

/** The step's key: its workflow and the place of its first leg in it (outside a workflow,
 * where DBOS runs a step as a plain call, a key of its own). */
function keyOf(name: string): string {
  const workflow = DBOS.workflowID;
  return workflow === undefined ? `${name}:${randomUUID()}` : `${workflow}:${DBOS.stepID}`;
}

/**
 * `DBOS.runStep` under breakwater's policy (docs/architecture.md, rule 22), or over a chain
 * (`fallback`, `pool`: a switch inside the step), with DBOS's own retries off
 * (`retriesAllowed: false`). The operation gets the attempt's signal and the
 * step's `idempotencyKey` (the workflow and the step's place in it: the same across legs
 * and recoveries; `runId` for `guardTool`). A wait longer than `holdMs` is a
 * `DBOS.sleepms` in the workflow, recorded and resumed by DBOS's recovery; the step's
 * attempts and deadline go on across legs. A final failure is thrown as breakwater threw
 * it (the provider's own error, or a BreakwaterError).
 */
export async function step<T>(
  name: string,
  target: StepTarget<T>,
  options?: StepOptions,
): Promise<T> {
  const r = resolveStep("breakwater/dbos step", target, options);
  let state: StepState | undefined;
  let key: string | undefined;
  for (;;) {
    const label = state === undefined ? name : `${name} (leg ${state.legs + 1})`;
    const out: Recorded<T> = await DBOS.runStep(
      async () => {
        const k = key ?? keyOf(name);
        const cancelled = DBOS.stepStatus?.cancelSignal; // the workflow's cancellation
        try {
          return { ...(await leg(r, target, k, state, cancelled)), key: k };
        } catch (error) {
          markReason(error); // DBOS records the error as JSON: the reason goes with it
          throw error;
        }
      },
      { name: label, retriesAllowed: false },
    );
    if (out.ok) return out.value;
    key = out.key;
    state = out.state;
    await DBOS.sleepms(out.waitMs);
  }
}
