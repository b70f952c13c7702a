/**
 * The fault server's stored conversations (OpenAI's Conversations API): a Responses
 * request that names one appends its turn as it arrives, before the answer goes out, as a
 * provider does the work the client may stop waiting for. A turn appended twice is what
 * a blind resend costs.
 */
export interface ConversationItem {
  readonly type: "message";
  readonly id: string;
  readonly role: "user" | "assistant";
  readonly content: readonly { type: "input_text" | "output_text"; text: string }[];
}

export const CONVERSATION_ITEMS = /^\/v1\/conversations\/([A-Za-z0-9_-]+)\/items$/;

/** The conversation a Responses request names (`conversation: "conv_..."` or `{ id }`). */
export function conversationOf(body: unknown): string | undefined {
  const c = (body as { conversation?: unknown } | null)?.conversation;
  if (typeof c === "string") return c;
  const id = (c as { id?: unknown } | null)?.id;
  return typeof id === "string" ? id : undefined;
}

export class Conversations {
  readonly #items = new Map<string, ConversationItem[]>();
  #n = 0;

  /** Appends one turn: the user's input and the assistant's answer. */
  append(id: string, input: string, answer: string, responseId: string): void {
    const items = this.#items.get(id) ?? [];
    items.push(
      {
        type: "message",
        id: `msg_in_${++this.#n}`,
        role: "user",
        content: [{ type: "input_text", text: input }],
      },
      {
        type: "message",
        id: `msg_${responseId}`,
        role: "assistant",
        content: [{ type: "output_text", text: answer }],
      },
    );
    this.#items.set(id, items);
  }

  /** The items list as the API answers it (newest first, its default order). */
  list(id: string) {
    const data = [...(this.#items.get(id) ?? [])].reverse();
    return {
      object: "list",
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: false,
    };
  }

  /** Turns appended to each conversation. */
  turns(): Record<string, number> {
    return Object.fromEntries([...this.#items].map(([id, items]) => [id, items.length / 2]));
  }

  clear(): void {
    this.#items.clear();
  }
}
