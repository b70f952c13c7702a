/** The peers' retry loops, one file a peer (what the storm's peer stacks run). */
export { AI_RETRY, AI_RETRY_FALLBACK, aiRetryCall } from "./ai-retry.ts";
export { AI_SDK } from "./ai-sdk.ts";
export { RESTATE_RUN, TEMPORAL_ACTIVITY } from "./engines.ts";
export {
  ASYNC_CALLER_ONCE,
  LANGCHAIN,
  LANGCHAIN_V1_RETRY,
  LANGCHAIN_V1_RETRY_OVER_FALLBACK,
} from "./langchain.ts";
export { type PeerLayer, PeerTimeoutError, runLayers } from "./layers.ts";
export {
  LiteLLMDeployment,
  litellmGroupCall,
  litellmWithFallback,
  RouterRateLimitError,
} from "./litellm.ts";
export { NAIVE } from "./naive.ts";
export { OPENAI_AGENTS, openaiAgentsClient } from "./openai-agents.ts";
export { OPENAI_NODE, OPENAI_NODE_7 } from "./openai-node.ts";
