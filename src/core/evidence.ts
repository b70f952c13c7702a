import { CODES } from "./error-tables.ts";
import { get, getStr, isArray, isObj, type Obj, str } from "./safe.ts";

/**
 * What one error says about an HTTP answer, read from wherever the SDK put it: its own
 * fields, the parsed body (`error`, the AI SDK's `data`), a body it kept as text
 * (`responseBody`, Mistral's `body`), or a body it folded into its message (@google/genai,
 * the Mistral SDK, Anthropic's "400 {json}"), including Vertex's `[{ error }]` arrays and
 * OpenRouter's upstream `metadata.raw`.
 */
export interface Evidence {
  /** The HTTP status; else a status the body states (`error.code: 502` in band). */
  readonly status: number | undefined;
  /** Provider codes, types, exception names and Google reasons, most specific first. */
  readonly codes: readonly string[];
  /** Human text: messages, plain-text bodies, Google quota ids. */
  readonly texts: readonly string[];
  /** google.rpc details (RetryInfo, QuotaFailure, ErrorInfo). */
  readonly details: readonly unknown[];
  readonly headers: unknown;
}

const MAX_TEXT = 100_000;
const MAX_DEPTH = 4;

interface Acc {
  codes: string[];
  texts: string[];
  details: unknown[];
  bodyStatus: number | undefined;
}

/** An error status (4xx, 5xx). A 200 on an error is the stream's, the error is in band. */
const asStatus = (v: unknown): number | undefined => {
  const n = typeof v === "string" && /^\d{3}$/.test(v) ? Number(v) : v;
  return typeof n === "number" && Number.isInteger(n) && n >= 400 && n <= 599 ? n : undefined;
};

/** The JSON a text carries, whole or after a prefix ("Body: {...}", "got status: 429. {...}"). */
export function embeddedJson(text: string): unknown {
  if (text.length > MAX_TEXT) return undefined;
  const brace = text.indexOf("{");
  if (brace < 0) return undefined;
  const bracket = text.lastIndexOf("[", brace);
  const start = bracket >= 0 && text.slice(bracket + 1, brace).trim() === "" ? bracket : brace;
  try {
    return JSON.parse(text.slice(start));
  } catch {
    return undefined;
  }
}

/** xAI sends its message URL-encoded ("Incorrect%20API%20key"). */
function decoded(text: string): string {
  if (!/%[0-9a-f]{2}/i.test(text)) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function addText(acc: Acc, v: unknown, depth: number): void {
  if (isObj(v)) {
    visitBody(acc, v, depth + 1); // Mistral: `message: { detail: [...] }`
    return;
  }
  const text = str(v);
  if (text === undefined) return;
  const json = depth < MAX_DEPTH && text.includes("{") ? embeddedJson(text) : undefined;
  if (isObj(json)) visitBody(acc, json, depth + 1);
  acc.texts.push(decoded(text));
}

function addCode(acc: Acc, v: unknown): void {
  const s = typeof v === "number" ? String(v) : str(v);
  if (s !== undefined && s !== "error") acc.codes.push(s);
}

/** One parsed body, at any depth: `{ error: {...} }`, `{ type: "error", error }`, a top-level
 * `{ message, type, code }`, `{ error: "text" }`, `{ detail }`, or an array of them. */
function visitBody(acc: Acc, body: unknown, depth: number): void {
  if (depth > MAX_DEPTH || !isObj(body)) return;
  if (isArray(body)) {
    visitBody(acc, body[0], depth + 1); // Vertex: `[{ "error": {...} }]`
    return;
  }
  const error = get(body, "error");
  const inner = isObj(error) ? error : body;
  if (isObj(get(inner, "error"))) visitBody(acc, get(inner, "error"), depth + 1); // Anthropic
  for (const key of ["code", "type", "status"]) addCode(acc, get(inner, key));
  acc.bodyStatus ??=
    asStatus(get(inner, "code")) ??
    asStatus(get(body, "statusCode")) ??
    asStatus(get(body, "raw_status_code"));
  addText(acc, get(inner, "message"), depth);
  if (inner !== body) addText(acc, get(body, "message"), depth);
  else addText(acc, error, depth); // `{ "error": "text" }` (xAI, Ollama, Fireworks)
  addText(acc, get(body, "detail"), depth);
  addText(acc, get(get(inner, "metadata"), "raw"), depth); // OpenRouter's upstream answer
  visitDetails(acc, get(inner, "details"));
}

function visitDetails(acc: Acc, details: unknown): void {
  if (!isArray(details)) return;
  for (const d of details.slice(0, 32)) {
    acc.details.push(d);
    addCode(acc, get(d, "reason")); // ErrorInfo: API_KEY_INVALID
    const violations = get(d, "violations"); // QuotaFailure: which quota (per day, per minute)
    if (isArray(violations))
      for (const v of violations.slice(0, 32)) addText(acc, get(v, "quotaId"), MAX_DEPTH);
  }
}

function statusOf(e: Obj): number | undefined {
  const candidates = [
    get(e, "status"),
    get(e, "statusCode"),
    get(get(e, "response"), "status"),
    get(get(e, "$metadata"), "httpStatusCode"), // AWS SDK v3
    get(get(e, "$response"), "statusCode"),
  ];
  for (const v of candidates) {
    const n = asStatus(v);
    if (n !== undefined) return n;
  }
  return undefined;
}

function headersOf(e: Obj): unknown {
  return (
    get(e, "headers") ??
    get(e, "responseHeaders") ??
    get(get(e, "response"), "headers") ??
    get(get(e, "$response"), "headers")
  );
}

/** Reads one error of a chain; undefined when it says nothing about an answer. */
export function evidenceOf(e: Obj): Evidence | undefined {
  const acc: Acc = { codes: [], texts: [], details: [], bodyStatus: undefined };
  for (const key of ["error", "data"]) visitBody(acc, get(e, key), 0);
  if (typeof get(e, "error") === "string") addText(acc, get(e, "error"), 0); // openai-node keeps `{ "error": "text" }` as a string
  for (const key of ["responseBody", "body"]) {
    const raw = get(e, key);
    const body = typeof raw === "string" ? embeddedJson(raw) : raw;
    if (isObj(body)) visitBody(acc, body, 0);
    else if (typeof raw === "string" && acc.texts.length === 0) acc.texts.push(raw);
  }
  addCode(acc, get(e, "code"));
  addCode(acc, get(e, "type"));
  const name = getStr(e, "name"); // AWS: ThrottlingException, ValidationException, ...
  if (name !== undefined && CODES.has(name.toLowerCase())) acc.codes.push(name);
  addText(acc, get(e, "message"), 0);
  const status = statusOf(e) ?? acc.bodyStatus ?? asStatus(get(e, "code")); // in band: `{ code: 500 }`
  if (status === undefined && acc.codes.length === 0) return undefined;
  return {
    status,
    codes: acc.codes,
    texts: acc.texts,
    details: acc.details,
    headers: headersOf(e),
  };
}
