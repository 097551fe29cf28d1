import * as vscode from 'vscode';
import { Commands } from './contributions';

/** Says that the coordinator is not running and offers to start it. */
export async function reportNotRunning(): Promise<void> {
  const choice = await vscode.window.showErrorMessage('The SW4RM coordinator is not running.', 'Start Coordinator');
  if (choice) await vscode.commands.executeCommand(Commands.start);
}

/** The running coordinator's API for a command, or undefined after saying that none runs. */
export async function requireRunning<T>(api: T | undefined): Promise<T | undefined> {
  if (api === undefined) await reportNotRunning();
  return api;
}
