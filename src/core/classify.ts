import {
  CLASS_KINDS,
  CODES,
  type CodeMeaning,
  NETWORK_CODES,
  TLS_CODE,
  WORDING,
  type WordingScope,
} from "./error-tables.ts";
import { AttemptTimeoutError, OutputError, RequestCheckError } from "./errors.ts";
import { type Evidence, evidenceOf } from "./evidence.ts";
import { type Failure, type FailureKind, failure, KINDS } from "./failure.ts";
import { readHeader } from "./headers.ts";
import { parseRateLimitReset } from "./ratelimit.ts";
import { parseMessageWait, parseRetryAfter, parseRetryAfterValue } from "./retry-after.ts";
import { get, getStr, isA, isArray, isObj, type Obj } from "./safe.ts";

/**
 * Classifies any error, walking its chain (`cause`, the AI SDK's `lastError`, an
 * AggregateError's last error), in the order of docs/architecture.md rule 3: cancellation,
 * timeouts, transport, then the first error that reads as an HTTP answer, and otherwise
 * `unknown` (not retried: bugs stay loud).
 */
export function classify(error: unknown, nowMs: number = Date.now()): Failure {
  try {
    return classifyChain(chainOf(error), nowMs);
  } catch {
    return failure("unknown"); // the readers are total; this is the last line, not the plan
  }
}

function classifyChain(chain: Obj[], nowMs: number): Failure {
  // Our own verdict on an answer the provider gave (rule 11): its kind, its problem.
  const output = chain.find((e) => isA(e, OutputError) || isA(e, RequestCheckError)) as
    | OutputError
    | RequestCheckError
    | undefined;
  if (output !== undefined) return failure(output.kind, { code: output.problem });
  const early = connectionFailure(chain);
  if (early !== undefined) return early;
  for (const e of chain) {
    const evidence = evidenceOf(e);
    const verdict = evidence && answerKind(evidence);
    if (evidence && verdict) return withHints(verdict, evidence, nowMs);
  }
  return failure("unknown");
}

function next(e: Obj): unknown {
  const cause = get(e, "cause");
  if (cause !== undefined) return cause;
  const last = get(e, "lastError"); // AI SDK RetryError
  if (last !== undefined) return last;
  const errors = get(e, "errors"); // AggregateError (undici's happy eyeballs)
  return isArray(errors) && errors.length > 0 ? errors[errors.length - 1] : undefined;
}

function chainOf(error: unknown): Obj[] {
  const chain: Obj[] = [];
  const seen = new Set<unknown>();
  for (let e = error; isObj(e) && !seen.has(e) && chain.length < 16; e = next(e)) {
    seen.add(e);
    chain.push(e);
  }
  return chain;
}

/** `.name` and the class names along the prototype chain: the openai and anthropic SDKs
 * leave `.name` as "Error", their classes still say what they are. */
function classNames(e: Obj): string[] {
  const names = [getStr(e, "name") ?? ""];
  try {
    let p = Object.getPrototypeOf(e);
    for (let i = 0; p !== null && i < 8; i++, p = Object.getPrototypeOf(p)) {
      const ctor = get(p, "constructor");
      if (typeof ctor === "function") names.push(ctor.name);
    }
  } catch {} // a Proxy whose getPrototypeOf throws: its name is all we read
  return names;
}

function classKind(e: Obj): FailureKind | undefined {
  for (const name of classNames(e)) {
    const kind = CLASS_KINDS.get(name);
    if (kind !== undefined) return kind;
  }
  return undefined;
}

/**
 * Cancellation, timeouts and failed connections, which decide before any status: the
 * caller's abort, our own attempt timeout, then the OS's code (the most precise fact: AWS
 * names a reset "TimeoutError"), then the SDK's class (openai's APIConnectionTimeoutError
 * drops the cause that had the code).
 */
function connectionFailure(chain: Obj[]): Failure | undefined {
  const classes = chain.map(classKind);
  // An SDK's timeout class over the abort its own timer cut the request with (openai >= 7
  // keeps that AbortError as the cause) is a timeout, not a cancellation.
  const cancelled = classes.indexOf("cancelled");
  const timedOut = classes.indexOf("timeout");
  if (cancelled !== -1 && !(timedOut !== -1 && timedOut < cancelled)) return failure("cancelled");
  if (chain.some((e) => isA(e, AttemptTimeoutError))) return failure("timeout");
  for (const e of chain) {
    const code = getStr(e, "code") ?? getStr(e, "errno");
    if (code === undefined) continue;
    if (TLS_CODE.test(code)) return failure("unknown", { code });
    const kind = NETWORK_CODES.get(code);
    if (kind !== undefined) return failure(kind, { code });
  }
  if (classes.includes("timeout")) return failure("timeout");
  const transport = chain.findIndex(
    (e, i) => classes[i] === "transport" && evidenceOf(e)?.status === undefined,
  );
  return transport >= 0 ? failure("transport") : undefined;
}

interface KindAndCode {
  readonly kind: FailureKind;
  readonly code?: string | undefined;
}

const isTransientStatus = (s: number) => s === 408 || s === 429 || s >= 500;

function kindOfStatus(status: number): FailureKind {
  if (status === 429) return "rate_limited";
  if (status === 503 || status === 529) return "overloaded";
  if (status === 408 || status === 504) return "timeout";
  if (status === 499) return "cancelled"; // the client went away (Cohere, nginx)
  if (status >= 500) return "server_error";
  if (status === 401 || status === 403) return "auth";
  if (status === 402) return "quota_exhausted";
  if (status === 404) return "not_found";
  return "invalid_request";
}

/** The first wording rule, among those allowed to speak here, that the texts match. */
function spoken(
  texts: readonly string[],
  scopes: readonly WordingScope[],
): FailureKind | undefined {
  for (const rule of WORDING)
    if (scopes.includes(rule.scope) && texts.some((t) => rule.test(t))) return rule.kind;
  return undefined;
}

/**
 * The precedence of docs/architecture.md rule 3, for one answer:
 * a specific permanent code → permanent wording → a permanent status → a specific
 * transient code → transient wording → the status → a generic code.
 */
function answerKind(ev: Evidence): KindAndCode | undefined {
  const known: (CodeMeaning & { code: string })[] = [];
  for (const code of ev.codes) {
    const meaning = CODES.get(code.toLowerCase());
    if (meaning !== undefined) known.push({ ...meaning, code });
  }
  const specific = known.filter((k) => !k.generic);
  const permanent = specific.find((k) => !KINDS[k.kind].retryable);
  if (permanent) return permanent;
  const transientCode = specific.find((k) => KINDS[k.kind].retryable);
  const { status } = ev;
  const code = known[0]?.code ?? ev.codes[0];
  const clientStatus = status !== undefined && status >= 400 && status < 500;
  const scopes: WordingScope[] = [];
  if (status === undefined || (clientStatus && status !== 408)) scopes.push("limit");
  if ((status === undefined && !transientCode) || (clientStatus && !isTransientStatus(status)))
    scopes.push("client");
  const words = spoken(ev.texts, scopes);
  if (words !== undefined) return { kind: words, code };
  if (status !== undefined && !isTransientStatus(status))
    return { kind: kindOfStatus(status), code };
  if (transientCode) return transientCode;
  const overload = spoken(ev.texts, ["transient"]);
  if (overload !== undefined) return { kind: overload, code };
  if (status !== undefined) return { kind: kindOfStatus(status), code };
  return known[0]; // a generic code and no status (in band); none recognised: look deeper
}

/** Gemini's google.rpc.RetryInfo: `{ "@type": ".../RetryInfo", retryDelay: "30s" }`. */
function retryInfoMs(details: readonly unknown[]): number | undefined {
  for (const d of details) {
    if (!getStr(d, "@type")?.endsWith("RetryInfo")) continue;
    const m = /^(\d+(?:\.\d+)?)s$/.exec(getStr(d, "retryDelay") ?? "");
    if (m) return parseRetryAfterValue(m[1]!, 0);
  }
  return undefined;
}

/** A wait the body states: Gemini's RetryInfo, else for a rate limit the wait its text
 * names ("Please try again in 17.359s"), the hint of a 429 no header spoke for. Gemini
 * sends both, RetryInfo cut to whole seconds: the later one, so no retry comes early. */
function textHint(v: KindAndCode, ev: Evidence): number | undefined {
  const info = retryInfoMs(ev.details);
  const text = v.kind === "rate_limited" ? messageWait(ev.texts) : undefined;
  return info === undefined ? text : text === undefined ? info : Math.max(info, text);
}

/** A wait the error's text names ("Please try again in 17.359s"). */
function messageWait(texts: readonly string[]): number | undefined {
  for (const t of texts) {
    const ms = parseMessageWait(t);
    if (ms !== undefined) return ms;
  }
  return undefined;
}

/** The server's wait hint and its explicit word on retrying (`x-should-retry`). */
function withHints(v: KindAndCode, ev: Evidence, nowMs: number): Failure {
  const { headers } = ev;
  const retryAfterMs =
    parseRetryAfter(headers as never, nowMs) ??
    (v.kind === "rate_limited" ? parseRateLimitReset(headers) : undefined) ??
    textHint(v, ev);
  const f = failure(v.kind, { status: ev.status, code: v.code, retryAfterMs });
  const should = readHeader(headers, "x-should-retry");
  if (should === "false") return { ...f, retryable: false };
  if (should === "true" && !KINDS[f.kind].final) return { ...f, retryable: true };
  return f;
}
