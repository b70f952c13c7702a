import { type CallSlot, digestOf, journaled, type RequestKey } from "../internal.ts";

/**
 * Model calls in a run's journal, at the fetch layer (docs/architecture.md, rule 14): the
 * answer is kept as the HTTP answer it was (status, headers, body text; a stream's events
 * as they reached the SDK), so a resumed run's SDK reads a replay exactly as it read the
 * call: its own objects, its own stream chunks, its own helpers.
 */
export interface HttpAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** The place of a request in its run's journal, when the run has one and the body can be
 * named (a JSON or text body; a form upload is not journaled). */
export function slotFor(
  run: unknown,
  method: string,
  url: string,
  body: unknown,
): Promise<CallSlot | undefined> | undefined {
  if (run === undefined || (body !== undefined && body !== null && typeof body !== "string"))
    return undefined;
  return journaled(run, "model", (key) => requestDigest(method, url, body ?? "", key));
}

/** What names a request across processes: its method, its path and query (not the host:
 * a resumed run may reach the provider by another address), and its body; read through
 * the run's `requestKey`, handed the body parsed when it is JSON. */
function requestDigest(method: string, url: string, body: string, key?: RequestKey): string {
  let path = url;
  try {
    const u = new URL(url);
    path = u.pathname + u.search;
  } catch {}
  if (key === undefined) return digestOf(`${method} ${path}\n`, body);
  let read: unknown = body;
  try {
    read = JSON.parse(body);
  } catch {}
  return digestOf(JSON.stringify(key({ method, path, body: read })) ?? "");
}

const isAnswer = (x: unknown): x is HttpAnswer =>
  x !== null &&
  typeof x === "object" &&
  Number.isInteger((x as HttpAnswer).status) &&
  typeof (x as HttpAnswer).body === "string" &&
  typeof (x as HttpAnswer).headers === "object";

/** A recorded answer as the Response the SDK reads; undefined when the record is not one
 * (then the call is made). */
export function replay(answer: unknown): Response | undefined {
  if (!isAnswer(answer)) return undefined;
  const headers = new Headers(answer.headers);
  headers.delete("content-length"); // the body is text now, not the bytes that came
  headers.delete("content-encoding");
  return new Response(answer.body, { status: answer.status, headers });
}

/** An answer as the journal keeps it. */
export function answerOf(res: Response, body: string): HttpAnswer {
  return { status: res.status, headers: Object.fromEntries(res.headers), body };
}
