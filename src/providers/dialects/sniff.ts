/** The dialect a request speaks, read from its URL, for a fetch layer given none: the paths
 * of OpenAI's, Anthropic's and Google's APIs (and of the servers that copy them). */
import { type Dialect, pathOf } from "../dialect.ts";
import { anthropicDialect } from "./anthropic.ts";
import { googleDialect } from "./google.ts";
import { openaiDialect } from "./openai.ts";

/** Only the readings: a sniffed dialect changes no request body (no usage chunk asked for,
 * which a client that did not ask may not expect). */
const reading = (d: Dialect): Dialect => ({ ...d, prepare: undefined });

const OPENAI = reading(openaiDialect());
const ANTHROPIC = reading(anthropicDialect);
const GOOGLE = reading(googleDialect);

const OPENAI_PATH = /\/(chat\/completions|completions|responses|embeddings)\/?$/;
const ANTHROPIC_PATH = /\/v1\/messages(\/count_tokens)?\/?$/;
const GOOGLE_PATH = /:(stream)?[gG]enerateContent$|:embedContent$|:countTokens$/;

/** The dialect a URL's path belongs to, or undefined for one no dialect knows. */
export function sniffDialect(url: string): Dialect | undefined {
  const path = pathOf(url);
  if (OPENAI_PATH.test(path)) return OPENAI;
  if (ANTHROPIC_PATH.test(path)) return ANTHROPIC;
  if (GOOGLE_PATH.test(path)) return GOOGLE;
  return undefined;
}
