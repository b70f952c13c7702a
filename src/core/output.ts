import { OutputError, type OutputIssue } from "./errors.ts";
import { describeError, get, isA, isObj } from "./safe.ts";
import { opt } from "./validate.ts";

/** A Standard Schema (zod 3.24+, valibot 1, arktype 2 all implement it), as far as we use it. */
export interface StandardSchema {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    /** Checks a value: its issues, or the value. */
    readonly validate: (value: unknown) => StandardResult | Promise<StandardResult>;
  };
}

type StandardResult =
  | { readonly value: unknown; readonly issues?: undefined }
  | { readonly issues: readonly OutputIssue[] };

/** A check on the answer: a Standard Schema, or a function that returns true (or nothing)
 * when the answer is good, and false, a reason, or a thrown error when it is not. */
export type OutputCheck = StandardSchema | ((answer: unknown) => unknown);

/** The checks an answer passes before it counts as one (docs/architecture.md, rule 11). */
export interface OutputOptions<T = unknown> {
  /** Checks the answer before it counts as one. A failed check is `invalid_output`, retried
   * within the call's attempts; the last one is thrown as an OutputError. */
  validate?: OutputCheck;
  /** What of the result is checked (the adapters: the message text, read as JSON when it
   * looks like JSON and a schema is given). @default the result */
  answerOf?: (result: T) => unknown;
  /** Whether the result stopped at the token limit. A truncated answer is never retried.
   * The adapters know each SDK's finish reason. */
  truncated?: (result: T) => boolean;
  /** A schema reads the JSON inside a markdown code fence that is the whole answer
   * (```` ```json ... ``` ````, as models often wrap it). `false`: a fenced answer is not
   * JSON (problem `parse`). @default true */
  fencedJson?: boolean;
}

export const isStandardSchema = (x: unknown): x is StandardSchema =>
  isObj(x) && typeof get(get(x, "~standard"), "validate") === "function";

/** The finish reasons that mean "cut at the token limit", across providers. */
export const TRUNCATED_FINISH: ReadonlySet<string> = new Set([
  "length", // OpenAI chat, the AI SDK
  "max_tokens", // Anthropic
  "MAX_TOKENS", // Gemini
  "max_output_tokens", // the Responses API's incomplete_details.reason
  "model_context_window_exceeded", // Anthropic, when the window ends it
]);

const text = (answer: unknown): string | undefined =>
  typeof answer === "string" ? answer : undefined;

/** A markdown code fence that is the whole answer, with an optional language tag. */
const FENCE = /^```[\w-]*[ \t]*\r?\n([\s\S]*?)\r?\n?```$/;

/** The JSON text of an answer: the answer, or what its fence holds. */
function jsonText(answer: string, fenced: boolean): string {
  const t = answer.trim();
  if (!fenced || !t.startsWith("```")) return t;
  const m = FENCE.exec(t);
  return m ? m[1]!.trim() : t;
}

/** The answer read for a schema: JSON when it is a string that looks like JSON (inside its
 * fence, when `fenced`). */
function forSchema(answer: unknown, fenced: boolean): unknown {
  if (typeof answer !== "string") return answer;
  const t = jsonText(answer, fenced);
  if (!(t.startsWith("{") || t.startsWith("["))) return answer;
  try {
    return JSON.parse(t);
  } catch (error) {
    throw new OutputError("parse", `the answer is not valid JSON: ${describeError(error, false)}`, {
      text: answer,
    });
  }
}

/** Text around JSON ("Sure! {...}", or a fence when fences are not read): the answer is
 * not JSON, which is a `parse` problem, not the schema's. Undefined when the text holds no
 * JSON (then the schema's own verdict stands: a string schema may want prose). */
function proseAroundJson(answer: unknown, fenced: boolean): OutputError | undefined {
  if (typeof answer !== "string") return undefined;
  const t = jsonText(answer, fenced);
  const start = t.search(/[{[]/);
  if (start <= 0) return undefined;
  const end = Math.max(t.lastIndexOf("}"), t.lastIndexOf("]"));
  if (end <= start) return undefined;
  try {
    JSON.parse(t.slice(start, end + 1));
  } catch {
    return undefined;
  }
  return new OutputError("parse", "the answer is JSON with text around it, not JSON", {
    text: answer,
  });
}

function fromSchema(
  result: StandardResult,
  answer: unknown,
  fenced: boolean,
): OutputError | undefined {
  if (result.issues === undefined || result.issues.length === 0) return undefined;
  const prose = proseAroundJson(answer, fenced);
  if (prose !== undefined) return prose;
  const first = result.issues[0]!;
  const where = first.path?.length
    ? ` at ${first.path.map((p) => (isObj(p) ? String(get(p, "key")) : String(p))).join(".")}`
    : "";
  return new OutputError(
    "schema",
    `the answer does not match its schema: ${first.message}${where}`,
    {
      text: text(answer),
      issues: result.issues,
    },
  );
}

function fromCheck(verdict: unknown, answer: unknown): OutputError | undefined {
  if (verdict === true || verdict === undefined) return undefined;
  const why = typeof verdict === "string" ? verdict : "the answer failed its check";
  return new OutputError("check", why, { text: text(answer) });
}

const asOutputError = (error: unknown, answer: unknown): OutputError =>
  isA(error, OutputError)
    ? error
    : new OutputError("check", describeError(error, false), { text: text(answer), cause: error });

/**
 * Checks one result: truncated first, then the check. Synchronous unless the schema is
 * async. Never throws: a check that throws is a failed check.
 */
export function checkOutput<T>(
  result: T,
  o: OutputOptions<T>,
): OutputError | undefined | Promise<OutputError | undefined> {
  let answer: unknown = result;
  // Read only when a verdict needs it: a stream's whole answer costs a parse of every event.
  const read = () => (o.answerOf ? o.answerOf(result) : result);
  try {
    if (o.truncated?.(result)) {
      answer = read();
      return new OutputError("truncated", "the answer stopped at the token limit", {
        text: text(answer),
      });
    }
    const check = o.validate;
    if (check === undefined) return undefined;
    answer = read();
    if (answer === undefined || answer === null || answer === "")
      return new OutputError("empty", "the answer is empty", { text: text(answer) });
    if (!isStandardSchema(check)) return fromCheck(check(answer), answer);
    const fenced = o.fencedJson !== false;
    const verdict = check["~standard"].validate(forSchema(answer, fenced));
    return verdict instanceof Promise
      ? verdict.then(
          (r) => fromSchema(r, answer, fenced),
          (e: unknown) => asOutputError(e, answer),
        )
      : fromSchema(verdict, answer, fenced);
  } catch (error) {
    return asOutputError(error, answer);
  }
}

/** The output options' checks, for every owner that takes them (execute, stream). */
export const OUTPUT_SPEC = {
  validate: opt.any<OutputCheck>(
    (x) => typeof x === "function" || isStandardSchema(x),
    "a Standard Schema (zod, valibot, arktype) or a function",
  ),
  answerOf: opt.fn<(result: unknown) => unknown>(),
  truncated: opt.fn<(result: unknown) => boolean>(),
  fencedJson: opt.bool(true),
};
