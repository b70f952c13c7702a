import { ConfigError, reasonOf } from "../index.ts";
import { agentRetries, OWNED_POLICY, opt, parseOptions, Validator } from "../internal.ts";
import { sayOnce } from "./scope.ts";

/**
 * The OpenAI Agents SDK's own retry layer, found and owned: its runner retries a model call
 * when `modelSettings.retry` has a `policy` (off by default), on the agent's settings or
 * the runner's. Over a client wrapped by breakwater, each of its retries would run the
 * policy's attempts again (4 retries of 3 attempts: 15 requests for one model call).
 */

/** What `ownAgentRetries` does with a retry setting it finds. */
export interface OwnAgentRetriesOptions {
  /** "neutralise": the setting's policy retries nothing breakwater gave up on (said once,
   * naming where it is); it still retries a model breakwater does not wrap. "refuse":
   * throws, naming it. @default "neutralise" */
  found?: "neutralise" | "refuse";
}

const OWNER = "ownAgentRetries";
const SPEC = { found: opt.oneOf(["neutralise", "refuse"] as const, "neutralise") };

/**
 * Makes breakwater the one retry layer of an OpenAI Agents SDK app: every
 * `modelSettings.retry` with a policy on `target` (a Runner's `config.modelSettings`, an
 * Agent's `modelSettings` and those of the agents it hands off to) is neutralised or
 * refused. Give the SDK a wrapped client too (`setDefaultOpenAIClient(withBreakwater(new
 * OpenAI()))`): that is where the retries happen. Returns `target`, changed in place.
 */
export function ownAgentRetries<T extends object>(
  target: T,
  options: OwnAgentRetriesOptions = {},
): T {
  const { found } = parseOptions(new Validator(OWNER), SPEC, options);
  for (const { at, settings, maxRetries, policy } of agentRetries(target)) {
    if (found === "refuse")
      throw new ConfigError(
        OWNER,
        at,
        settings.retry,
        "no policy: breakwater's policy owns the retries",
      );
    const owned = (context: { error: unknown }) =>
      reasonOf(context.error) === undefined ? policy(context) : false;
    settings.retry = { ...settings.retry, policy: Object.assign(owned, { [OWNED_POLICY]: true }) };
    sayOnce(
      OWNER,
      `${at} retries a failed model call ${maxRetries} times on top of breakwater's policy: it retries now only what breakwater did not own`,
    );
  }
  return target;
}
