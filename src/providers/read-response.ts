/**
 * A JSON answer the fetch layer has already read (for its usage, model and checks), handed
 * to the SDK without building a body again: `json()` gives the value already parsed and
 * `text()` the text already read; anything else (`body`, `arrayBuffer()`, `blob()`, ...)
 * makes a real Response from the text on first use. The answer's own headers are kept, not
 * copied. Building a body stream and copying the bytes was most of what the fetch layer
 * cost a JSON call.
 */
export class ReadResponse extends Response {
  readonly #text: string;
  readonly #json: unknown;
  readonly #from: ResponseHead;
  #used = false;
  #real: Response | undefined;

  constructor(text: string, from: ResponseHead, json: unknown) {
    super(null, { status: from.status, statusText: from.statusText });
    this.#text = text;
    this.#json = json;
    this.#from = from;
  }

  /** The same answer as a Response with a body of its own, made once; made after a read,
   * its body is read too (locked and used, as a read body is). */
  #body(): Response {
    if (this.#real === undefined) {
      this.#real = new Response(this.#text, {
        status: this.#from.status,
        statusText: this.#from.statusText,
        headers: this.#from.headers,
      });
      if (this.#used) void this.#real.arrayBuffer().catch(() => {});
    }
    return this.#real;
  }

  /** Reads the answer once, as a body is read once. A real body made but never read (an
   * SDK that only looked at `body`) is let go: the answer is what was read before. */
  #take(): boolean {
    const real = this.#real;
    if (this.#used || real?.bodyUsed || real?.body?.locked) return false;
    this.#used = true;
    // Locked and let go, as a body read to its end is.
    const reader = real?.body?.getReader();
    reader?.cancel().catch(() => {});
    return true;
  }

  override get headers(): Headers {
    return this.#from.headers;
  }
  override get url(): string {
    return this.#from.url;
  }
  override get redirected(): boolean {
    return this.#from.redirected;
  }
  override get body(): ReadableStream<Uint8Array<ArrayBuffer>> | null {
    return this.#body().body;
  }
  override get bodyUsed(): boolean {
    return this.#used || (this.#real?.bodyUsed ?? false);
  }
  override json(): Promise<any> {
    if (!this.#take()) return Promise.reject(used());
    try {
      return Promise.resolve(this.#json === undefined ? JSON.parse(this.#text) : this.#json);
    } catch (error) {
      return Promise.reject(error);
    }
  }
  override text(): Promise<string> {
    return this.#take() ? Promise.resolve(this.#text) : Promise.reject(used());
  }
  override arrayBuffer(): Promise<ArrayBuffer> {
    return this.#body().arrayBuffer();
  }
  override bytes(): Promise<Uint8Array<ArrayBuffer>> {
    return this.#body().bytes();
  }
  override blob(): Promise<Blob> {
    return this.#body().blob();
  }
  override formData(): Promise<FormData> {
    return this.#body().formData();
  }
  /** A copy that reads on its own (and parses its own value: the SDK writes on what it
   * gets, `_request_id` for one). */
  override clone(): Response {
    if (this.bodyUsed) throw new TypeError("Response.clone: Body has already been consumed.");
    return this.#real !== undefined
      ? this.#real.clone()
      : new ReadResponse(this.#text, this.#from, undefined);
  }
}

/** What an answer says besides its body: a Response's, or a transport's that read it whole. */
export type ResponseHead = Pick<
  Response,
  "status" | "statusText" | "headers" | "url" | "redirected"
>;

const used = () => new TypeError("Body is unusable: Body has already been read");
