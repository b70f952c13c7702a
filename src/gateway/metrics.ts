/** The gateway's counters, as Prometheus text (`GET /metrics`). */
export class GatewayMetrics {
  readonly #requests = new Map<string, number>();
  readonly #attempts = new Map<string, number>();
  readonly #tokens = new Map<string, number>();

  /** A request answered: by model, how it ended (ok, a give-up's reason, refused). */
  request(model: string, outcome: string): void {
    bump(this.#requests, `model="${esc(model)}",outcome="${esc(outcome)}"`, 1);
  }

  /** Attempts sent for a model. */
  attempts(model: string, n: number): void {
    if (n > 0) bump(this.#attempts, `model="${esc(model)}"`, n);
  }

  /** Tokens a model's calls billed, and how many of them were wasted on failed attempts. */
  tokens(model: string, billed: number, wasted: number): void {
    if (billed > 0) bump(this.#tokens, `model="${esc(model)}",kind="billed"`, billed);
    if (wasted > 0) bump(this.#tokens, `model="${esc(model)}",kind="wasted"`, wasted);
  }

  text(): string {
    return [
      ...family(
        "breakwater_gateway_requests_total",
        "Requests answered, by model and outcome.",
        this.#requests,
      ),
      ...family(
        "breakwater_gateway_attempts_total",
        "Attempts sent to upstreams, by model.",
        this.#attempts,
      ),
      ...family(
        "breakwater_gateway_tokens_total",
        "Tokens billed, and of them wasted, by model.",
        this.#tokens,
      ),
    ]
      .join("\n")
      .concat("\n");
  }
}

const esc = (s: string) => s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const bump = (m: Map<string, number>, k: string, n: number) => m.set(k, (m.get(k) ?? 0) + n);

function family(name: string, help: string, m: Map<string, number>): string[] {
  return [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} counter`,
    ...[...m].map(([k, v]) => `${name}{${k}} ${v}`),
  ];
}
