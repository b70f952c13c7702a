import { ConfigError, reasonOf } from "../index.ts";
import { sayOnce } from "./scope.ts";

/**
 * The OpenAI Agents SDK's own retry layer, found and owned: its runner retries a model call
 * when `modelSettings.retry` has a `policy` (off by default), on the agent's settings or
 * the runner's. Over a client wrapped by breakwater, each of its retries would run the
 * policy's attempts again (4 retries of 3 attempts: 15 requests for one model call).
 */

type Obj = Record<string, any>;
const OWNED = Symbol.for("breakwater.owned"); // audit reads it too
/** The Agents SDK's retry settings (`ModelSettings.retry`), as read here. */
interface RetrySettings {
  maxRetries?: number;
  policy?: ((context: { error: unknown }) => unknown) & { [OWNED]?: true };
  [key: string]: unknown;
}

/** What `ownAgentRetries` does with a retry setting it finds. */
export interface OwnAgentRetriesOptions {
  /** "neutralise": the setting's policy retries nothing breakwater gave up on (said once,
   * naming where it is); it still retries a model breakwater does not wrap. "refuse":
   * throws, naming it. @default "neutralise" */
  found?: "neutralise" | "refuse";
}

const OWNER = "ownAgentRetries";

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
  const found = options.found ?? "neutralise";
  if (found !== "neutralise" && found !== "refuse")
    throw new ConfigError(OWNER, "found", found, '"neutralise" or "refuse"');
  const t = target as Obj;
  if (t.config !== null && typeof t.config === "object")
    own(t.config.modelSettings, "runner.config.modelSettings.retry", found);
  ownAgent(t, "agent", found, new Set());
  return target;
}

function ownAgent(agent: Obj, at: string, found: string, seen: Set<object>): void {
  if (seen.has(agent) || !("modelSettings" in agent)) return;
  seen.add(agent);
  own(agent.modelSettings, `${at}.modelSettings.retry`, found);
  const handoffs: unknown[] = Array.isArray(agent.handoffs) ? agent.handoffs : [];
  handoffs.forEach((h, i) => {
    const next = (h as Obj | null)?.agent ?? h; // a handoff() or an Agent
    if (next !== null && typeof next === "object")
      ownAgent(next, `${at}.handoffs[${i}]`, found, seen);
  });
}

function own(settings: unknown, at: string, found: string): void {
  const retry = (settings as Obj | null | undefined)?.retry as RetrySettings | undefined;
  const policy = retry?.policy;
  if (typeof policy !== "function" || policy[OWNED] || !((retry!.maxRetries ?? 0) > 0)) return;
  const what = `${at} retries a failed model call ${retry!.maxRetries} times on top of breakwater's policy`;
  if (found === "refuse")
    throw new ConfigError(OWNER, at, retry, "no policy: breakwater's policy owns the retries");
  const owned = (context: { error: unknown }) =>
    reasonOf(context.error) === undefined ? policy(context) : false;
  (settings as Obj).retry = { ...retry, policy: Object.assign(owned, { [OWNED]: true }) };
  sayOnce(OWNER, `${what}: it retries now only what breakwater did not own`);
}
