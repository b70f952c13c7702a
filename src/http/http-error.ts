/** A non-2xx HTTP answer as an error `classify` reads: status, headers and the body. */
export class HttpError extends Error {
  override name = "HttpError";
  readonly status: number;
  readonly headers: Headers;
  /** The parsed JSON body when there was one, else the text. */
  readonly error: unknown;

  constructor(status: number, headers: Headers, body: unknown) {
    const detail = typeof body === "string" ? body : JSON.stringify(body);
    super(`HTTP ${status}${detail ? `: ${detail.slice(0, 200)}` : ""}`);
    this.status = status;
    this.headers = headers;
    this.error =
      body !== null && typeof body === "object" && "error" in body
        ? (body as { error: unknown }).error
        : body;
  }
}

/** Returns the response when it is 2xx; otherwise reads its body and throws an HttpError.
 * Use it with plain `fetch` inside `policy.execute`. */
export async function throwIfNotOk(response: Response): Promise<Response> {
  if (response.ok) return response;
  const text = await response.text().catch(() => "");
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {}
  throw new HttpError(response.status, response.headers, body);
}
