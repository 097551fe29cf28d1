import * as vscode from 'vscode';

/** A row's text, as the view's model (`…Model.ts`) words it. */
export interface RowText {
  readonly label: string;
  readonly description: string;
  readonly tooltip: string;
}

export interface RowItemOptions {
  readonly contextValue: string;
  readonly iconPath: vscode.ThemeIcon;
  /** None unless given. */
  readonly collapsible?: vscode.TreeItemCollapsibleState;
  /** What a click on the row runs. */
  readonly command?: vscode.Command;
  /** What a screen reader says: `label, description` unless given; nothing of its own with false. */
  readonly accessibilityLabel?: string | false;
}

/** The tree item of a row of a record, under the item id `id`. */
export function rowItem(id: string, row: RowText, options: RowItemOptions): vscode.TreeItem {
  const item = new vscode.TreeItem(row.label, options.collapsible ?? vscode.TreeItemCollapsibleState.None);
  item.id = id;
  item.description = row.description;
  // A plain string: ids, names, reasons and states come from agents and are never rendered as Markdown.
  item.tooltip = row.tooltip;
  item.contextValue = options.contextValue;
  item.iconPath = options.iconPath;
  if (options.command) item.command = options.command;
  const accessibilityLabel = options.accessibilityLabel ?? `${row.label}, ${row.description}`;
  if (accessibilityLabel !== false) item.accessibilityInformation = { label: accessibilityLabel };
  return item;
}

/** A theme icon, in the theme color `color` if one is given. */
export function themeIcon(icon: string, color?: string): vscode.ThemeIcon {
  return color ? new vscode.ThemeIcon(icon, new vscode.ThemeColor(color)) : new vscode.ThemeIcon(icon);
}

/** The expanded row of a group of rows: item id `<kind>:<group>`, context value `<kind>+<group>`. */
export function groupItem(kind: string, group: string, label: string, description: string): vscode.TreeItem {
  const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.Expanded);
  item.id = `${kind}:${group}`;
  item.description = description;
  item.contextValue = `${kind}+${group}`;
  return item;
}
