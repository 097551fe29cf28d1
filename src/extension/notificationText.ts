/**
 * A notification's text: brackets dropped (a notification renders `[text](link)` as a link, and ids, branch names, task
 * ids agents choose and git's or the coordinator's messages may carry them), cut at 1,000 characters.
 */
export function notificationText(text: string): string {
  const plain = text.replace(/[[\]]/g, '');
  return plain.length > 1000 ? `${plain.slice(0, 999)}…` : plain;
}
