/** An error as one log field: its name and message (anything else as text). */
export function errText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}
