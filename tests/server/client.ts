// What the server tests share about the official openai client.
import OpenAI from 'openai';

/** The HTTP status a call's APIError carries, 'no error' when it succeeded, or what else it threw. */
export async function statusOf(p: Promise<unknown>): Promise<number | string> {
  try {
    await p;
    return 'no error';
  } catch (e) {
    return e instanceof OpenAI.APIError ? (e.status ?? 'no status') : `not an APIError: ${e}`;
  }
}
