/**
 * The LangChain adapter: a chat model whose invoke, stream and batch go through breakwater.
 *
 * @example
 * ```ts
 * import { ChatOpenAI } from "@langchain/openai";
 * import { withBreakwater } from "breakwater/langchain";
 *
 * const model = withBreakwater(
 *   new ChatOpenAI({ model: "gpt-4o-mini", configuration: { baseURL: process.env.OPENAI_BASE_URL } }),
 * );
 * const answer = await model.invoke("Hello");
 * console.log(answer.content);
 * ```
 * @module breakwater/langchain
 */
export {
  type AgentMiddleware,
  type AgentMiddlewareOptions,
  agentMiddleware,
} from "./langchain-agent.ts";
export {
  isLangChainContent,
  type LangChainAdapterOptions,
  langchainUsage,
  withBreakwater,
} from "./langchain-model.ts";
