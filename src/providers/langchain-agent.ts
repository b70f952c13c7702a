import { ConfigError, failureOf, movesOn, reasonOf } from "../index.ts";
import { type LangChainAdapterOptions, withBreakwater } from "./langchain-model.ts";
import { ADAPTER_SPEC, adapterOptions, asPolicy, marked } from "./shared.ts";

/**
 * breakwater as the retry and fallback layer of a langchain v1 `createAgent`: one
 * middleware in place of `modelRetryMiddleware` (2 retries by default, and on failure an
 * AIMessage "Model call failed after 3 attempts" the agent goes on with) and
 * `modelFallbackMiddleware`. Each model call runs under the policy through the LangChain
 * adapter (the model's own retries off, a stream retried only before its first content, so
 * the agent's streamed tokens are never shown twice); a give-up the next model can serve
 * (`movesOn`) goes to the next fallback, with its own policy.
 */

type Obj = Record<string, any>;
const OWNER = "agentMiddleware";

/** What `agentMiddleware` takes: the adapter's options, and the models to fall back to. */
export interface AgentMiddlewareOptions extends LangChainAdapterOptions {
  /** Chat models to try, in order, when the agent's own cannot serve the call now; each
   * `{ model, policy }` keeps its own policy. @default none */
  fallbacks?: readonly { model: object; policy?: LangChainAdapterOptions["policy"] }[];
}

/** What a createAgent middleware is, as far as breakwater uses it. */
export interface AgentMiddleware {
  readonly name: "breakwater";
  /** The agent's model call under the policy, then the fallbacks (langchain's request and
   * AIMessage types: langchain is not a dependency of this module). */
  wrapModelCall(request: any, handler: (request: any) => any): Promise<any>;
}

/** The middleware for `createAgent({ middleware: [agentMiddleware()] })`. */
export function agentMiddleware(options: AgentMiddlewareOptions = {}): AgentMiddleware {
  const { fallbacks = [], ...rest } = options;
  adapterOptions(OWNER, ADAPTER_SPEC, rest);
  if (!Array.isArray(fallbacks))
    throw new ConfigError(OWNER, "fallbacks", fallbacks, "a list of { model, policy? }");
  const legs = fallbacks.map((f, i) => {
    if (f === null || typeof f !== "object" || typeof (f as Obj).model?.invoke !== "function")
      throw new ConfigError(OWNER, `fallbacks[${i}]`, f, "{ model: a chat model, policy? }");
    return { model: f.model as Obj, options: { ...rest, policy: asPolicy(f.policy) } };
  });
  const own = { ...rest, policy: asPolicy(rest.policy) };
  const wrapped = new WeakMap<object, unknown>();
  const under = (model: Obj, o: LangChainAdapterOptions) => {
    let w = wrapped.get(model);
    if (w === undefined) wrapped.set(model, (w = withBreakwater(model as never, o)));
    return w;
  };
  const middleware = {
    [Symbol.for("AgentMiddleware")]: true, // createMiddleware's brand
    name: "breakwater",
    async wrapModelCall(request, handler) {
      const call = (model: Obj, o: LangChainAdapterOptions) =>
        handler({ ...request, model: under(model, o) });
      try {
        return await call(request.model, own);
      } catch (error) {
        return onward(error, legs, call);
      }
    },
  } as AgentMiddleware;
  return marked(middleware, OWNER, own.policy);
}

/** The fallbacks, in order, while the last one's give-up says the next may serve it. */
async function onward(
  error: unknown,
  legs: readonly { model: Obj; options: LangChainAdapterOptions }[],
  call: (model: Obj, o: LangChainAdapterOptions) => Promise<unknown>,
): Promise<unknown> {
  let last = error;
  for (const leg of legs) {
    if (!movesOn(failureOf(last), reasonOf(last), last)) break;
    try {
      return await call(leg.model, leg.options);
    } catch (e) {
      last = e;
    }
  }
  throw last;
}
