/** Tokens as far as known. */
export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** Prices in currency units per million tokens. */
export interface Price {
  readonly inputPerMillion: number;
  readonly outputPerMillion: number;
}

export const ZERO_USAGE: Usage = Object.freeze({ inputTokens: 0, outputTokens: 0 });

export function addUsage(a: Usage, b: Usage | undefined): Usage {
  if (b === undefined) return a;
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
  };
}

export const totalTokens = (u: Usage): number => u.inputTokens + u.outputTokens;

export function costOf(u: Usage, price: Price | undefined): number | undefined {
  if (price === undefined) return undefined;
  return (u.inputTokens * price.inputPerMillion + u.outputTokens * price.outputPerMillion) / 1e6;
}
