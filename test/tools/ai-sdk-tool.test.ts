import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Run } from "../../src/run/run.ts";
import { guardTool, type ToolCallContext } from "../../src/tools/guard-tool.ts";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};
const callTool = (id: string, input: unknown) => ({
  content: [
    {
      type: "tool-call" as const,
      toolCallId: id,
      toolName: "get_order",
      input: JSON.stringify(input),
    },
  ],
  finishReason: { unified: "tool-calls" as const, raw: "tool_calls" },
  usage,
  warnings: [],
});
const answer = {
  content: [{ type: "text" as const, text: "The order could not be found." }],
  finishReason: { unified: "stop" as const, raw: "stop" },
  usage,
  warnings: [],
};

describe("guardTool as the execute of an AI SDK tool()", () => {
  it("gets the model's tool-call id and abort signal, and answers the model's re-call from the run", async () => {
    const run = new Run();
    const seen: ToolCallContext[] = [];
    let dependencyCalls = 0;
    const getOrder = tool({
      description: "Looks an order up",
      inputSchema: z.object({ id: z.number() }),
      execute: guardTool(
        async (
          _args: { id: number },
          ctx: ToolCallContext,
        ): Promise<{ id: number; status: string }> => {
          seen.push(ctx);
          dependencyCalls++;
          throw Object.assign(new Error("no such order"), { status: 404 });
        },
        { name: "get_order", effect: "read", run },
      ),
    });
    // The model calls the tool, reads the failure, and calls it again with the same input.
    const model = new MockLanguageModelV4({
      doGenerate: [callTool("call_1", { id: 9 }), callTool("call_2", { id: 9 }), answer],
    });
    const r = await generateText({
      model,
      prompt: "where is order 9?",
      tools: { get_order: getOrder },
      stopWhen: stepCountIs(5),
      maxRetries: 0,
    });

    expect(r.text).toBe("The order could not be found.");
    expect(dependencyCalls).toBe(1);
    expect(run.stats.modelRecalls).toBe(1);
    expect(seen[0]!.toolCallId).toBe("call_1");
    expect(seen[0]!.signal).toBeInstanceOf(AbortSignal);
    const results = r.steps.flatMap((s) => s.toolResults.map((t) => t.output));
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({
      status: "error",
      error: { code: "NOT_FOUND", action: "do_not_retry" },
    });
    expect(results[1]).toEqual(results[0]);
  });
});
