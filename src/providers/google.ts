import type { GoogleGenAI } from "@google/genai";
import type { Usage } from "../index.ts";
import { type AdapterOptions, asPolicy, overlay, runFor } from "./shared.ts";

export type GoogleAdapterOptions = AdapterOptions;

type Obj = Record<string, any>;

/**
 * @google/genai raises one `ApiError { status, message }` whose message is the JSON body (or
 * "got status: X. {json}" mid-stream). This parses that body onto the error as `.error`, so
 * the classifier reads `status` (RESOURCE_EXHAUSTED, UNAVAILABLE, ...) and
 * `RetryInfo.retryDelay` as a Retry-After. A daily quota (QuotaFailure with a PerDay quota)
 * becomes `quota_exhausted`. The error stays the SDK's own instance.
 */
export function enrichGoogleError(error: unknown): unknown {
  const e = error as Obj | null;
  if (!e || typeof e !== "object" || typeof e.message !== "string" || e.error !== undefined)
    return error;
  const start = e.message.indexOf("{");
  if (start < 0) return error;
  try {
    const body = JSON.parse(e.message.slice(start)) as Obj;
    if (body?.error && typeof body.error === "object") {
      const details = Array.isArray(body.error.details) ? body.error.details : [];
      const daily = details.some(
        (d: Obj) =>
          String(d?.["@type"]).endsWith("QuotaFailure") && JSON.stringify(d).includes("PerDay"),
      );
      e.error = daily ? { ...body.error, code: "quota_exceeded" } : body.error;
      if (typeof e.status !== "number" && typeof body.error.code === "number")
        e.status = body.error.code;
    }
  } catch {}
  return error;
}

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
 * through one policy, with the SDK's retry options set to one attempt.
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
  const enriched = <T>(p: Promise<T>) =>
    p.catch((e) => {
      throw enrichGoogleError(e);
    });
  const wrappedModels = overlay(models, {
    generateContent: (params: Obj) => {
      const signal = params.config?.abortSignal as AbortSignal | undefined;
      return p.execute((ctx) => enriched(generate(oneAttempt(params, ctx.signal))), {
        ...(signal && { signal }),
        ...runFor(options),
        usage: googleUsage,
      });
    },
    generateContentStream: async (params: Obj) => {
      const signal = params.config?.abortSignal as AbortSignal | undefined;
      return p.stream(
        async (ctx) => {
          const source = await enriched(generateStream(oneAttempt(params, ctx.signal)));
          return enrichingIterable(source);
        },
        {
          ...(signal && { signal }),
          ...runFor(options),
          usage: googleUsage,
          isContent: isGoogleContent,
        },
      );
    },
  });
  return overlay(client, { models: wrappedModels });
}

/** Parses errors thrown mid-stream too, and closes the SDK's iterator when asked. */
function enrichingIterable<T>(source: AsyncIterable<T>): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      return {
        next: () =>
          it.next().catch((e) => {
            throw enrichGoogleError(e);
          }),
        return: (v?: unknown) =>
          it.return ? it.return(v) : Promise.resolve({ done: true as const, value: undefined }),
      };
    },
  };
}
