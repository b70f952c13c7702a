/** How breakwater reads Gemini's answers (generateContent, JSON or streamed): usage,
 * content, in-band errors, the answer so far. */
import type { Usage } from "../../index.ts";
import { googleAnswer } from "../answers.ts";
import type { Dialect } from "../dialect.ts";
import { googleEffect } from "../effects.ts";

type Obj = Record<string, any>;

/** Usage from `usageMetadata` (cumulative in stream chunks). */
export function googleUsage(x: unknown): Partial<Usage> | undefined {
  const u = (x as Obj | null)?.usageMetadata as Obj | undefined;
  if (!u) return undefined;
  return {
    ...(typeof u.promptTokenCount === "number" && { inputTokens: u.promptTokenCount }),
    ...(typeof u.candidatesTokenCount === "number" && { outputTokens: u.candidatesTokenCount }),
  };
}

/** A Gemini chunk is content when a part carries text or a function call. */
export const isGoogleContent = (chunk: unknown): boolean =>
  Boolean(
    (chunk as Obj | null)?.candidates?.[0]?.content?.parts?.some(
      (p: Obj) => p.text || p.functionCall,
    ),
  );

const isObject = (x: unknown): x is Obj => x !== null && typeof x === "object";

/** How breakwater reads Gemini's answers: `usageMetadata`, text and function-call parts,
 * an `{ error }` chunk inside a 200 stream. */
export const googleDialect: Dialect = {
  usage: googleUsage,
  answer: googleAnswer,
  reply: (json) => {
    const cand = isObject(json) ? json.candidates?.[0] : undefined;
    if (!isObject(cand)) return undefined;
    const parts: Obj[] = Array.isArray(cand.content?.parts) ? cand.content.parts : [];
    return {
      text: parts.map((p) => (typeof p?.text === "string" && !p.thought ? p.text : "")).join(""),
      finish: cand.finishReason,
    };
  },
  maxOutput: (body) => body.generationConfig?.maxOutputTokens,
  marks: { usage: /usageMetadata/, error: /"error"/ },
  // A finish reason ends an answer; a prompt blocked before any (`promptFeedback`) is one.
  finished: (json) =>
    isObject(json) &&
    (json.candidates?.[0]?.finishReason != null ||
      json.promptFeedback?.blockReason != null ||
      isObject(json.error)),
  provider: "gcp.gemini",
  effect: googleEffect,
  // `.../models/gemini-2.5-flash:generateContent`: the model is in the path.
  model: (url) => /\/models\/([^/:?]+):/.exec(url)?.[1],
  operation: (url) =>
    /:(?:stream)?[gG]enerateContent(?:$|\?)/.test(url)
      ? "chat"
      : /:(?:batchE|e)mbedContents?(?:$|\?)/.test(url)
        ? "embeddings"
        : undefined,
  responseModel: (json) => {
    const m = isObject(json) ? json.modelVersion : undefined;
    return typeof m === "string" ? m : undefined;
  },
  isContent: (json) => isGoogleContent(json),
  inBand: (json) => (isObject(json) && isObject(json.error) ? { error: json.error } : undefined),
  handsOnInBand: false, // its ApiError keeps no headers: the outcome goes on breakwater's error
};
