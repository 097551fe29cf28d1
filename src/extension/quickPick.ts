import * as vscode from 'vscode';

/**
 * Shows `quickPick` and answers once: the item Enter accepted (the selected one, else the active one), or undefined
 * when the pick was hidden first (Escape). An item `acceptable` refuses keeps the pick open. The pick is disposed
 * when it answers.
 */
export function answerOf<I extends vscode.QuickPickItem>(
  quickPick: vscode.QuickPick<I>,
  acceptable: (item: I | undefined) => boolean = () => true,
): Promise<I | undefined> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (item: I | undefined) => {
      if (done) return;
      done = true;
      resolve(item);
      quickPick.dispose();
    };
    quickPick.onDidAccept(() => {
      const item = quickPick.selectedItems[0] ?? quickPick.activeItems[0];
      if (acceptable(item)) finish(item);
    });
    quickPick.onDidHide(() => finish(undefined));
    quickPick.show();
  });
}

/** A single choice among `items`, with the one of the current value active; undefined when the user pressed Escape. */
export function pickItem<T, I extends vscode.QuickPickItem & { value: T }>(
  title: string,
  placeholder: string,
  items: I[],
  current: T,
): Promise<I | undefined> {
  const quickPick = vscode.window.createQuickPick<I>();
  quickPick.title = title;
  quickPick.placeholder = placeholder;
  quickPick.matchOnDescription = true;
  quickPick.items = items;
  const active = items.find((item) => item.value === current);
  if (active) quickPick.activeItems = [active];
  return answerOf(quickPick);
}

/** What pickValueOrAny answers when the user pressed Escape. */
export const CANCELLED = Symbol('cancelled');

/** A value a filter can be set to, as a row of the pick. */
export interface ValueChoice {
  readonly value: string;
  readonly label?: string;
  readonly description?: string;
}

/**
 * One value among `choices`, or "any" (undefined, the first row); the current value is active, and listed even when no
 * choice has it (described as `currentDescription`). CANCELLED when the user pressed Escape.
 */
export async function pickValueOrAny(
  title: string,
  placeholder: string,
  any: Omit<ValueChoice, 'value'> & { label: string },
  choices: readonly ValueChoice[],
  current: string | undefined,
  currentDescription?: string,
): Promise<string | undefined | typeof CANCELLED> {
  type Item = vscode.QuickPickItem & { value: string | undefined };
  const row = (value: string | undefined, label: string, description: string | undefined): Item =>
    description === undefined ? { label, value } : { label, value, description };
  const items: Item[] = [
    row(undefined, any.label, any.description),
    ...choices.map((c) => row(c.value, c.label ?? c.value, c.description)),
  ];
  if (current !== undefined && !choices.some((c) => c.value === current))
    items.push(row(current, current, currentDescription));
  const picked = await pickItem(title, placeholder, items, current);
  return picked === undefined ? CANCELLED : picked.value;
}
