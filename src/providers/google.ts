import type { GoogleGenAI } from "@google/genai";
import type { Usage } from "../index.ts";
import { type AdapterOptions, asPolicy, overlay, runFor } from "./shared.ts";

export type GoogleAdapterOptions = AdapterOptions;

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

export const isGoogleContent = (chunk: unknown): boolean =>
  Boolean(
    (chunk as Obj | null)?.candidates?.[0]?.content?.parts?.some(
      (p: Obj) => p.text || p.functionCall,
    ),
  );

/** One attempt per call at the SDK (its retries only run when asked, and never twice). */
function oneAttempt(params: Obj, signal: AbortSignal): Obj {
  const config = params.config ?? {};
  return {
    ...params,
    config: {
      ...config,
      abortSignal: signal,
      httpOptions: { ...config.httpOptions, retryOptions: { attempts: 1 } },
    },
  };
}

/**
 * Routes `@google/genai`'s `models.generateContent` and `models.generateContentStream`
 * through one policy, with the SDK's retry options set to one attempt. The SDK's errors
 * stay its own: the classifier reads the JSON body @google/genai folds into `message`.
 */
export function withBreakwater<C extends GoogleGenAI>(
  client: C,
  options: GoogleAdapterOptions = {},
): C {
  const p = asPolicy(options.policy);
  const models = client.models;
  const generate = models.generateContent.bind(models) as unknown as (
    params: Obj,
  ) => Promise<unknown>;
  const generateStream = models.generateContentStream.bind(models) as unknown as (
    params: Obj,
  ) => Promise<AsyncIterable<unknown>>;
  const wrappedModels = overlay(models, {
    generateContent: (params: Obj) => {
      const signal = params.config?.abortSignal as AbortSignal | undefined;
      return p.execute((ctx) => generate(oneAttempt(params, ctx.signal)), {
        ...(signal && { signal }),
        ...runFor(options),
        usage: googleUsage,
      });
    },
    generateContentStream: async (params: Obj) => {
      const signal = params.config?.abortSignal as AbortSignal | undefined;
      return p.stream((ctx) => generateStream(oneAttempt(params, ctx.signal)), {
        ...(signal && { signal }),
        ...runFor(options),
        usage: googleUsage,
        isContent: isGoogleContent,
      });
    },
  });
  return overlay(client, { models: wrappedModels });
}
