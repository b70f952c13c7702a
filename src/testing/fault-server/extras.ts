/**
 * The provider endpoints beside chat that an SDK's helpers call (embeddings, token counts,
 * batches, images, speech): answered with small, valid bodies, and failed by the same
 * script rules as the chat routes, so every method of a client can be tried against faults.
 */
export interface Extra {
  readonly route: "openai" | "anthropic" | "gemini";
  /** The answer to a request with `input` tokens. */
  answer(input: number, model: string): { body: unknown; contentType?: string };
}

const batch = () => ({
  id: "msgbatch_fault0001",
  type: "message_batch",
  processing_status: "in_progress",
  request_counts: { processing: 1, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
  ended_at: null,
  created_at: "2026-11-30T00:00:00Z",
  expires_at: "2026-12-01T00:00:00Z",
  archived_at: null,
  cancel_initiated_at: null,
  results_url: null,
});

const EXTRAS: [method: string, path: RegExp, extra: Extra][] = [
  [
    "POST",
    /^\/v1\/embeddings$/,
    {
      route: "openai",
      answer: (input, model) => ({
        body: {
          object: "list",
          data: [{ object: "embedding", index: 0, embedding: [0.1, 0.2, 0.3] }],
          model,
          usage: { prompt_tokens: input, total_tokens: input },
        },
      }),
    },
  ],
  [
    "POST",
    /^\/v1\/images\/generations$/,
    {
      route: "openai",
      answer: () => ({ body: { created: 1_790_000_000, data: [{ b64_json: "iVBORw0KGgo=" }] } }),
    },
  ],
  [
    "POST",
    /^\/v1\/audio\/speech$/,
    {
      route: "openai",
      answer: () => ({ body: Buffer.from("ID3fault-audio"), contentType: "audio/mpeg" }),
    },
  ],
  [
    "POST",
    /^\/v1\/messages\/count_tokens$/,
    { route: "anthropic", answer: (input) => ({ body: { input_tokens: input } }) },
  ],
  [
    "POST",
    /^\/v1\/batches$/,
    {
      route: "openai",
      answer: () => ({
        body: {
          id: "batch_fault0001",
          object: "batch",
          endpoint: "/v1/chat/completions",
          status: "validating",
          input_file_id: "file-fault0001",
          completion_window: "24h",
          created_at: 1_790_000_000,
        },
      }),
    },
  ],
  ["POST", /^\/v1\/messages\/batches$/, { route: "anthropic", answer: () => ({ body: batch() }) }],
  [
    "GET",
    /^\/v1\/messages\/batches\/[A-Za-z0-9_]+$/,
    { route: "anthropic", answer: () => ({ body: batch() }) },
  ],
  [
    "POST",
    /^\/v1(?:beta|alpha)?\/models\/[^/:]+:countTokens$/,
    { route: "gemini", answer: (input) => ({ body: { totalTokens: input } }) },
  ],
  [
    "POST",
    /^\/v1(?:beta|alpha)?\/models\/[^/:]+:embedContent$/,
    { route: "gemini", answer: () => ({ body: { embedding: { values: [0.1, 0.2, 0.3] } } }) },
  ],
  [
    "POST",
    /^\/v1(?:beta|alpha)?\/models\/[^/:]+:batchEmbedContents$/,
    { route: "gemini", answer: () => ({ body: { embeddings: [{ values: [0.1, 0.2, 0.3] }] } }) },
  ],
];

/** The extra endpoint a request is for, if it is one. */
export function extraFor(method: string | undefined, path: string): Extra | undefined {
  for (const [m, re, extra] of EXTRAS) if (m === method && re.test(path)) return extra;
  return undefined;
}
