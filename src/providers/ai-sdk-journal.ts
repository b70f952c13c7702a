import { type CallSlot, digestOf, journaled, unstampedJson } from "../internal.ts";

/**
 * The AI SDK middleware's calls in a run's journal (docs/architecture.md, rule 14): a
 * `doGenerate` result and a `doStream`'s parts are kept as JSON (dates and bytes tagged),
 * so a resumed run's `generateText` and `streamText` read a replay as they read the call.
 */
type Obj = Record<string, unknown>;

/** What names a call across processes: the model, generate or stream, and the call's
 * options but its signal and what frameworks stamp per run (`RUN_STAMPS`), read through
 * the run's `requestKey`. */
export function slotFor(
  run: unknown,
  how: "generate" | "stream",
  model: { provider: string; modelId: string },
  params: Obj,
): Promise<CallSlot | undefined> | undefined {
  if (run === undefined) return undefined;
  return journaled(run, "model", (key) => {
    const { abortSignal: _, ...rest } = params;
    const named = unstampedJson({ how, provider: model.provider, model: model.modelId, rest });
    if (key === undefined) return digestOf(named);
    const { rest: own, ...call } = JSON.parse(named);
    return digestOf(JSON.stringify(key({ ...call, params: own })) ?? "");
  });
}

/** A value as JSON the journal keeps: a Date and bytes tagged, to come back as they were. */
export function encode(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, function (this: Obj, key, v) {
      const raw = this[key];
      if (raw instanceof Date) return { $date: raw.toISOString() };
      if (raw instanceof Uint8Array) return { $bytes: Buffer.from(raw).toString("base64") };
      return v;
    }),
  );
}

/** A recorded value as it was made. */
export function decode<T>(json: unknown): T {
  return JSON.parse(JSON.stringify(json), (_, v) => {
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      if (typeof v.$date === "string" && Object.keys(v).length === 1) return new Date(v.$date);
      if (typeof v.$bytes === "string" && Object.keys(v).length === 1)
        return new Uint8Array(Buffer.from(v.$bytes, "base64"));
    }
    return v;
  }) as T;
}

/** A stream recorded as its parts: what `doStream` answered besides them, and the parts. */
export interface RecordedStream {
  readonly meta: Obj;
  readonly parts: unknown[];
}

/** The parts as they pass to the SDK; once the stream ends without an error part, they are
 * recorded (a consumer who stops early, or a stream that broke, records nothing). */
export function recording<P extends { type: string }>(
  stream: ReadableStream<P>,
  done: (parts: P[]) => Promise<void>,
): ReadableStream<P> {
  const parts: P[] = [];
  let broke = false;
  return stream.pipeThrough(
    new TransformStream<P, P>({
      transform(part, controller) {
        if (part.type === "error") broke = true;
        parts.push(part);
        controller.enqueue(part);
      },
      async flush() {
        if (!broke) await done(parts);
      },
    }),
  );
}

/** Recorded parts as a stream again. */
export function replayed<P>(parts: readonly P[]): ReadableStream<P> {
  let i = 0;
  return new ReadableStream<P>({
    pull(controller) {
      if (i < parts.length) controller.enqueue(parts[i++]!);
      else controller.close();
    },
  });
}
