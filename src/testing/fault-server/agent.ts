import type { FaultRule } from "./script.ts";

/**
 * A scripted agent on the OpenAI chat route: the model calls `tool` (arguments
 * `{"step": n}`) until the conversation holds `calls` tool results, then answers with
 * what they said. Its answer depends only on the request, so an agent loop resumed after a
 * crash meets the same model as the run it replaces.
 */
export interface AgentScript {
  tool: string;
  calls: number;
}

/** The turn the model takes for this request: a tool call, or the final answer. */
export function agentTurn(
  agent: AgentScript,
  body: unknown,
): Pick<FaultRule, "text" | "toolCalls"> {
  const messages = (body as { messages?: unknown } | null)?.messages;
  const results = (Array.isArray(messages) ? messages : [])
    .filter((m) => (m as { role?: unknown })?.role === "tool")
    .map((m) => String((m as { content?: unknown }).content));
  if (results.length >= agent.calls)
    return { text: `done after ${results.length} tool calls: ${results.join(" | ")}` };
  const step = results.length + 1;
  return {
    text: "",
    toolCalls: [{ name: agent.tool, arguments: JSON.stringify({ step }), id: `call_${step}` }],
  };
}
