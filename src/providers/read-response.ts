/**
 * A JSON answer the fetch layer has already read (for its usage, model and checks), handed
 * to the SDK without building a body again: `json()` gives the value already parsed and
 * `text()` the text already read; anything else (`body`, `arrayBuffer()`, `blob()`,
 * `clone()` of a read one...) makes a real Response from the text on first use. The
 * answer's own headers are kept, not copied. Building a body stream and copying the bytes
 * was most of what the fetch layer cost a JSON call.
 */
export class ReadResponse extends Response {
  readonly #text: string;
  readonly #json: unknown;
  readonly #from: Response;
  #used = false;
  #real: Response | undefined;

  constructor(text: string, from: Response, json: unknown) {
    super(null, { status: from.status, statusText: from.statusText });
    this.#text = text;
    this.#json = json;
    this.#from = from;
  }

  /** The same answer as a Response with a body of its own, made once. */
  #body(): Response {
    this.#real ??= new Response(this.#used ? null : this.#text, {
      status: this.#from.status,
      statusText: this.#from.statusText,
      headers: this.#from.headers,
    });
    return this.#real;
  }

  /** Reads the text once, as a body is read once; a second read fails as it would. */
  #take(): string {
    if (this.bodyUsed) throw new TypeError("Body is unusable: Body has already been read");
    this.#used = true;
    return this.#text;
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
    if (this.#real !== undefined) return this.#real.json();
    try {
      const text = this.#take();
      return Promise.resolve(this.#json === undefined ? JSON.parse(text) : this.#json);
    } catch (error) {
      return Promise.reject(error);
    }
  }
  override text(): Promise<string> {
    if (this.#real !== undefined) return this.#real.text();
    try {
      return Promise.resolve(this.#take());
    } catch (error) {
      return Promise.reject(error);
    }
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
  override clone(): Response {
    if (this.bodyUsed) throw new TypeError("Response.clone: Body has already been consumed.");
    return this.#real !== undefined
      ? this.#real.clone()
      : new ReadResponse(this.#text, this.#from, this.#json);
  }
}
